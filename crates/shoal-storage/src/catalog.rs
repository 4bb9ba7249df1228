//! The catalog: the names and definitions of schemas, tables, columns, constraints, indexes,
//! sequences and views. Storage keeps it (the redo log and checkpoints will persist it) but
//! treats SQL fragments inside it (DEFAULT and CHECK expressions, view queries) as opaque text
//! that the SQL layer parses and evaluates. Object ids are PostgreSQL-style OIDs: one counter
//! for every object, starting where PostgreSQL's user objects start, so pg_class can show them.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::types::DataType;

pub type Oid = u32;

/// First OID handed to user objects, as in PostgreSQL (FirstNormalObjectId).
pub const FIRST_USER_OID: Oid = 16384;
/// OIDs of the schemas that always exist.
pub const PG_CATALOG_NAMESPACE_OID: Oid = 11;
pub const PUBLIC_NAMESPACE_OID: Oid = 2200;
pub const INFORMATION_SCHEMA_NAMESPACE_OID: Oid = 13000;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SchemaDef {
    pub oid: Oid,
    pub name: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Identity {
    /// GENERATED ALWAYS (true) rejects explicit values; BY DEFAULT (false) accepts them.
    pub always: bool,
    pub sequence: Oid,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ColumnDef {
    pub name: String,
    pub data_type: DataType,
    pub not_null: bool,
    /// DEFAULT expression as SQL text, evaluated by the SQL layer for every inserted row.
    pub default_sql: Option<String>,
    pub identity: Option<Identity>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ForeignKeyAction {
    NoAction,
    Restrict,
    Cascade,
    SetNull,
    SetDefault,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ConstraintKind {
    PrimaryKey {
        columns: Vec<usize>,
        index: Oid,
    },
    Unique {
        columns: Vec<usize>,
        index: Oid,
    },
    Check {
        expr_sql: String,
    },
    ForeignKey {
        columns: Vec<usize>,
        ref_table: Oid,
        ref_columns: Vec<usize>,
        on_delete: ForeignKeyAction,
        on_update: ForeignKeyAction,
        /// When the key is checked (catalog images from before it was kept read as
        /// NOT DEFERRABLE, what every key then was).
        #[serde(default)]
        timing: ConstraintTiming,
    },
}

/// When a deferrable constraint is checked: `[NOT] DEFERRABLE [INITIALLY {IMMEDIATE |
/// DEFERRED}]`. A deferrable one can be moved by SET CONSTRAINTS within a transaction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConstraintTiming {
    #[default]
    NotDeferrable,
    /// DEFERRABLE INITIALLY IMMEDIATE.
    Immediate,
    /// DEFERRABLE INITIALLY DEFERRED: checked at commit.
    Deferred,
}

impl ConstraintTiming {
    pub fn deferrable(self) -> bool {
        self != ConstraintTiming::NotDeferrable
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConstraintDef {
    pub oid: Oid,
    pub name: String,
    pub kind: ConstraintKind,
}

/// How a table stores its rows (PostgreSQL's table access method).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AccessMethod {
    Heap,
    /// Column table (`USING columnar`): segments of Arrow arrays.
    Columnar,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TableDef {
    pub oid: Oid,
    pub schema: String,
    pub name: String,
    pub columns: Vec<ColumnDef>,
    pub constraints: Vec<ConstraintDef>,
    pub access_method: AccessMethod,
    /// Storage options from `WITH (...)`, kept for `\d+` (e.g. fillfactor=100).
    pub options: Vec<String>,
    /// Its triggers, in the order they fire (PostgreSQL's: by name).
    #[serde(default)]
    pub triggers: Vec<crate::catalog_triggers::TriggerDef>,
}

impl TableDef {
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    pub fn column_types(&self) -> Vec<DataType> {
        self.columns.iter().map(|c| c.data_type.clone()).collect()
    }

    pub fn primary_key(&self) -> Option<(&ConstraintDef, &[usize])> {
        self.constraints.iter().find_map(|c| match &c.kind {
            ConstraintKind::PrimaryKey { columns, .. } => Some((c, columns.as_slice())),
            _ => None,
        })
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IndexDef {
    pub oid: Oid,
    pub schema: String,
    pub name: String,
    pub table: Oid,
    /// Key column positions. Empty when a key part is an expression: such indexes (and partial
    /// ones) are kept in the catalog only, since queries scan the table anyway.
    pub columns: Vec<usize>,
    /// Each key part as SQL text (a column name or an expression), for pg_indexes and \d.
    pub key_sql: Vec<String>,
    /// The WHERE clause of a partial index, as SQL text.
    pub predicate_sql: Option<String>,
    pub unique: bool,
    pub primary: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ViewDef {
    pub oid: Oid,
    pub schema: String,
    pub name: String,
    /// The view's defining query as SQL text.
    pub query_sql: String,
    pub column_names: Vec<String>,
    /// Tables and views the query reads: they cannot be dropped while the view exists (without
    /// CASCADE, which drops the view too).
    pub depends_on: Vec<Oid>,
    /// Its INSTEAD OF triggers, by name.
    #[serde(default)]
    pub triggers: Vec<crate::catalog_triggers::TriggerDef>,
}

/// A user-defined enum type (`CREATE TYPE name AS ENUM (...)`). Columns of it store labels;
/// the labels' order here is the type's sort order.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EnumTypeDef {
    pub oid: Oid,
    /// The type of arrays of it (pg_type.typarray), allocated with it.
    pub array_oid: Oid,
    pub schema: String,
    pub name: String,
    /// In sort order.
    pub labels: Vec<EnumLabel>,
}

/// One label of an enum type, as pg_enum lists it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EnumLabel {
    pub oid: Oid,
    pub label: String,
    /// pg_enum.enumsortorder: 1, 2, 3 ... at creation; a label added between two others takes
    /// the midpoint, as in PostgreSQL.
    pub sort_order: f32,
}

impl EnumTypeDef {
    /// The label's place in the sort order.
    pub fn position(&self, label: &str) -> Option<usize> {
        self.labels.iter().position(|l| l.label == label)
    }

    /// The type of a column of this type.
    pub fn column_type(&self) -> DataType {
        let name = match self.schema.as_str() {
            "public" => self.name.clone(),
            schema => format!("{schema}.{}", self.name),
        };
        DataType::Enum(crate::types::EnumType {
            oid: self.oid,
            name,
            labels: self.labels.iter().map(|l| l.label.clone()).collect(),
        })
    }
}

/// A sequence's counter lives outside transactions, as in PostgreSQL: nextval is never rolled
/// back, so concurrent inserters never wait on each other for ids.
#[derive(Debug, Default)]
pub struct SequenceState {
    pub last_value: AtomicI64,
    /// False until the first nextval (or setval(..., true)): the first nextval returns start.
    pub is_called: AtomicBool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SequenceDef {
    pub oid: Oid,
    pub schema: String,
    pub name: String,
    pub data_type: DataType,
    pub start: i64,
    pub increment: i64,
    pub min_value: i64,
    pub max_value: i64,
    pub cycle: bool,
    /// The column that owns the sequence (serial/identity): dropped with its table.
    pub owned_by: Option<(Oid, usize)>,
    /// Not in the serialized definition: images store the counter beside it.
    #[serde(skip)]
    pub state: Arc<SequenceState>,
}

/// Why a sequence could not advance.
#[derive(Debug, Clone, PartialEq)]
pub enum SequenceError {
    Exhausted { max: bool, limit: i64 },
}

impl SequenceDef {
    /// Advances the sequence and returns the new value (PostgreSQL's nextval).
    pub fn next_value(&self) -> Result<i64, SequenceError> {
        loop {
            let called = self.state.is_called.load(Ordering::Acquire);
            let last = self.state.last_value.load(Ordering::Acquire);
            let next = if !called {
                last
            } else {
                match last.checked_add(self.increment) {
                    Some(v) if v <= self.max_value && v >= self.min_value => v,
                    _ if self.cycle => {
                        if self.increment > 0 {
                            self.min_value
                        } else {
                            self.max_value
                        }
                    }
                    _ => {
                        let max = self.increment > 0;
                        let limit = if max { self.max_value } else { self.min_value };
                        return Err(SequenceError::Exhausted { max, limit });
                    }
                }
            };
            if self
                .state
                .last_value
                .compare_exchange(last, next, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
                && (called
                    || self
                        .state
                        .is_called
                        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok())
            {
                return Ok(next);
            }
        }
    }

    pub fn set_value(&self, value: i64, is_called: bool) {
        self.state.last_value.store(value, Ordering::Release);
        self.state.is_called.store(is_called, Ordering::Release);
    }
}

/// What a name in pg_class's namespace refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RelationKind {
    Table,
    Index,
    Sequence,
    View,
}

#[derive(Clone, Debug, PartialEq)]
pub enum CatalogError {
    DuplicateRelation(String),
    DuplicateSchema(String),
    UndefinedSchema(String),
    UndefinedRelation(String),
    DuplicateRole(String),
    UndefinedRole(String),
}

/// The whole catalog. The SQL layer wraps it in a lock; DDL replaces entries, readers clone the
/// `Arc`s they need, so a running query keeps the definitions it was planned with. A clone
/// shares every definition (cheap: maps of `Arc`s), which is how DDL undo remembers a state.
#[derive(Debug, Clone)]
pub struct Catalog {
    pub(crate) next_oid: Oid,
    pub schemas: BTreeMap<String, SchemaDef>,
    /// (schema, relation name) → (kind, oid): tables, indexes, sequences and views share it,
    /// as they share pg_class in PostgreSQL.
    pub(crate) relations: HashMap<(String, String), (RelationKind, Oid)>,
    pub tables: BTreeMap<Oid, Arc<TableDef>>,
    pub indexes: BTreeMap<Oid, Arc<IndexDef>>,
    pub sequences: BTreeMap<Oid, Arc<SequenceDef>>,
    pub views: BTreeMap<Oid, Arc<ViewDef>>,
    /// User-defined types (enums), by OID. Types have their own namespace, apart from
    /// relations.
    pub types: BTreeMap<Oid, Arc<EnumTypeDef>>,
    /// Roles by OID, and who is a member of whom (see `catalog_roles`).
    pub roles: BTreeMap<Oid, crate::catalog_roles::RoleDef>,
    pub role_members: Vec<crate::catalog_roles::RoleMembership>,
    /// Owners and access lists of the objects that have other than the defaults (see
    /// `catalog_privileges`).
    pub ownership:
        BTreeMap<crate::catalog_privileges::ObjectRef, crate::catalog_privileges::Ownership>,
    /// ALTER DEFAULT PRIVILEGES: the acls objects get when created (pg_default_acl).
    pub default_acls: Vec<crate::catalog_privileges::DefaultAcl>,
    /// COMMENT ON (see `catalog_comments`).
    pub comments: BTreeMap<crate::catalog_comments::CommentKey, String>,
    /// CREATE EXTENSION, by name (see `catalog_extensions`).
    pub extensions: BTreeMap<String, crate::catalog_extensions::ExtensionDef>,
    /// Functions and procedures, by OID (see `catalog_functions`).
    pub routines: BTreeMap<Oid, Arc<crate::catalog_functions::RoutineDef>>,
    /// Bumped by every DDL change so cached plans know when to re-plan.
    pub version: u64,
}

impl Default for Catalog {
    fn default() -> Self {
        let mut schemas = BTreeMap::new();
        for (oid, name) in [
            (PG_CATALOG_NAMESPACE_OID, "pg_catalog"),
            (PUBLIC_NAMESPACE_OID, "public"),
            (INFORMATION_SCHEMA_NAMESPACE_OID, "information_schema"),
        ] {
            schemas.insert(
                name.to_string(),
                SchemaDef {
                    oid,
                    name: name.to_string(),
                },
            );
        }
        Catalog {
            next_oid: FIRST_USER_OID,
            schemas,
            relations: HashMap::new(),
            tables: BTreeMap::new(),
            indexes: BTreeMap::new(),
            sequences: BTreeMap::new(),
            views: BTreeMap::new(),
            types: BTreeMap::new(),
            roles: [(
                crate::catalog_roles::BOOTSTRAP_SUPERUSER_OID,
                crate::catalog_roles::RoleDef::bootstrap(),
            )]
            .into(),
            role_members: Vec::new(),
            ownership: BTreeMap::new(),
            default_acls: Vec::new(),
            comments: crate::catalog_comments::initial_comments(),
            extensions: BTreeMap::new(),
            routines: BTreeMap::new(),
            version: 1,
        }
    }
}

impl Catalog {
    pub fn allocate_oid(&mut self) -> Oid {
        let oid = self.next_oid;
        self.next_oid += 1;
        oid
    }

    pub fn lookup(&self, schema: &str, name: &str) -> Option<(RelationKind, Oid)> {
        self.relations
            .get(&(schema.to_string(), name.to_string()))
            .copied()
    }

    pub fn create_schema(&mut self, name: &str) -> Result<Oid, CatalogError> {
        if self.schemas.contains_key(name) {
            return Err(CatalogError::DuplicateSchema(name.to_string()));
        }
        let oid = self.allocate_oid();
        self.schemas.insert(
            name.to_string(),
            SchemaDef {
                oid,
                name: name.to_string(),
            },
        );
        self.version += 1;
        Ok(oid)
    }

    pub fn drop_schema(&mut self, name: &str) -> Result<(), CatalogError> {
        self.schemas
            .remove(name)
            .ok_or_else(|| CatalogError::UndefinedSchema(name.to_string()))?;
        self.version += 1;
        Ok(())
    }

    fn claim_name(
        &mut self,
        schema: &str,
        name: &str,
        kind: RelationKind,
        oid: Oid,
    ) -> Result<(), CatalogError> {
        if !self.schemas.contains_key(schema) {
            return Err(CatalogError::UndefinedSchema(schema.to_string()));
        }
        let key = (schema.to_string(), name.to_string());
        if self.relations.contains_key(&key) {
            return Err(CatalogError::DuplicateRelation(name.to_string()));
        }
        self.relations.insert(key, (kind, oid));
        self.version += 1;
        Ok(())
    }

    fn release_name(&mut self, schema: &str, name: &str) {
        self.relations
            .remove(&(schema.to_string(), name.to_string()));
        self.version += 1;
    }

    pub fn insert_table(&mut self, def: TableDef) -> Result<(), CatalogError> {
        self.claim_name(&def.schema, &def.name, RelationKind::Table, def.oid)?;
        self.tables.insert(def.oid, Arc::new(def));
        Ok(())
    }

    /// Replaces a table's definition (ALTER TABLE); renames move its name entry.
    pub fn replace_table(&mut self, def: TableDef) -> Result<(), CatalogError> {
        let old = self
            .tables
            .get(&def.oid)
            .cloned()
            .ok_or_else(|| CatalogError::UndefinedRelation(def.name.clone()))?;
        if old.name != def.name || old.schema != def.schema {
            self.claim_name(&def.schema, &def.name, RelationKind::Table, def.oid)?;
            self.release_name(&old.schema, &old.name);
        }
        self.tables.insert(def.oid, Arc::new(def));
        self.version += 1;
        Ok(())
    }

    pub fn remove_table(&mut self, oid: Oid) -> Option<Arc<TableDef>> {
        let def = self.tables.remove(&oid)?;
        self.release_name(&def.schema, &def.name);
        let owned: Vec<Oid> = self
            .indexes
            .values()
            .filter(|i| i.table == oid)
            .map(|i| i.oid)
            .collect();
        for index in owned {
            self.remove_index(index);
        }
        let sequences: Vec<Oid> = self
            .sequences
            .values()
            .filter(|s| matches!(s.owned_by, Some((t, _)) if t == oid))
            .map(|s| s.oid)
            .collect();
        for seq in sequences {
            self.remove_sequence(seq);
        }
        Some(def)
    }

    pub fn insert_index(&mut self, def: IndexDef) -> Result<(), CatalogError> {
        self.claim_name(&def.schema, &def.name, RelationKind::Index, def.oid)?;
        self.indexes.insert(def.oid, Arc::new(def));
        Ok(())
    }

    pub fn remove_index(&mut self, oid: Oid) -> Option<Arc<IndexDef>> {
        let def = self.indexes.remove(&oid)?;
        self.release_name(&def.schema, &def.name);
        Some(def)
    }

    pub fn rename_index(&mut self, oid: Oid, new_name: &str) -> Result<(), CatalogError> {
        let def = self
            .indexes
            .get(&oid)
            .cloned()
            .ok_or_else(|| CatalogError::UndefinedRelation(new_name.to_string()))?;
        self.claim_name(&def.schema, new_name, RelationKind::Index, oid)?;
        self.release_name(&def.schema, &def.name);
        let mut def = (*def).clone();
        def.name = new_name.to_string();
        self.indexes.insert(oid, Arc::new(def));
        Ok(())
    }

    pub fn table_indexes(&self, table: Oid) -> Vec<Arc<IndexDef>> {
        self.indexes
            .values()
            .filter(|i| i.table == table)
            .cloned()
            .collect()
    }

    pub fn insert_sequence(&mut self, def: SequenceDef) -> Result<(), CatalogError> {
        self.claim_name(&def.schema, &def.name, RelationKind::Sequence, def.oid)?;
        self.sequences.insert(def.oid, Arc::new(def));
        Ok(())
    }

    pub fn remove_sequence(&mut self, oid: Oid) -> Option<Arc<SequenceDef>> {
        let def = self.sequences.remove(&oid)?;
        self.release_name(&def.schema, &def.name);
        Some(def)
    }

    /// The user-defined type `schema.name`.
    pub fn lookup_type(&self, schema: &str, name: &str) -> Option<&Arc<EnumTypeDef>> {
        self.types
            .values()
            .find(|t| t.schema == schema && t.name == name)
    }

    /// Adds or replaces a user-defined type.
    pub fn put_type(&mut self, def: EnumTypeDef) {
        self.types.insert(def.oid, Arc::new(def));
        self.version += 1;
    }

    pub fn remove_type(&mut self, oid: Oid) -> Option<Arc<EnumTypeDef>> {
        let removed = self.types.remove(&oid);
        self.version += 1;
        removed
    }

    /// The tables with a column of type `type_oid` (or arrays of it).
    pub fn tables_using_type(&self, type_oid: Oid) -> Vec<Arc<TableDef>> {
        fn uses(t: &DataType, type_oid: Oid) -> bool {
            match t {
                DataType::Enum(e) => e.oid == type_oid,
                DataType::Array(element) => uses(element, type_oid),
                _ => false,
            }
        }
        self.tables
            .values()
            .filter(|t| t.columns.iter().any(|c| uses(&c.data_type, type_oid)))
            .cloned()
            .collect()
    }

    pub fn insert_view(&mut self, def: ViewDef) -> Result<(), CatalogError> {
        self.claim_name(&def.schema, &def.name, RelationKind::View, def.oid)?;
        self.views.insert(def.oid, Arc::new(def));
        Ok(())
    }

    /// Replaces a view's definition under the same name (its triggers changed).
    pub fn replace_view(&mut self, def: ViewDef) -> Result<(), CatalogError> {
        let old = self
            .views
            .get(&def.oid)
            .ok_or_else(|| CatalogError::UndefinedRelation(def.name.clone()))?;
        assert!(
            old.name == def.name && old.schema == def.schema,
            "replace_view keeps the view's name"
        );
        self.views.insert(def.oid, Arc::new(def));
        self.version += 1;
        Ok(())
    }

    pub fn remove_view(&mut self, oid: Oid) -> Option<Arc<ViewDef>> {
        let def = self.views.remove(&oid)?;
        self.release_name(&def.schema, &def.name);
        Some(def)
    }

    /// Views that read `relation` directly or through other views, direct dependents first.
    pub fn dependent_views(&self, relation: Oid) -> Vec<Oid> {
        let mut found: Vec<Oid> = Vec::new();
        let mut frontier = vec![relation];
        while let Some(oid) = frontier.pop() {
            for v in self.views.values() {
                if v.depends_on.contains(&oid) && !found.contains(&v.oid) {
                    found.push(v.oid);
                    frontier.push(v.oid);
                }
            }
        }
        found
    }

    /// Foreign keys elsewhere that point at `table` (for DROP ... CASCADE and delete checks).
    pub fn referencing_foreign_keys(&self, table: Oid) -> Vec<(Arc<TableDef>, ConstraintDef)> {
        let mut found = Vec::new();
        for t in self.tables.values() {
            for c in &t.constraints {
                if let ConstraintKind::ForeignKey { ref_table, .. } = &c.kind {
                    if *ref_table == table {
                        found.push((t.clone(), c.clone()));
                    }
                }
            }
        }
        found
    }

    pub fn relation_name(&self, oid: Oid) -> Option<(String, String)> {
        if let Some(t) = self.tables.get(&oid) {
            return Some((t.schema.clone(), t.name.clone()));
        }
        if let Some(i) = self.indexes.get(&oid) {
            return Some((i.schema.clone(), i.name.clone()));
        }
        if let Some(s) = self.sequences.get(&oid) {
            return Some((s.schema.clone(), s.name.clone()));
        }
        self.views
            .get(&oid)
            .map(|v| (v.schema.clone(), v.name.clone()))
    }
}
