//! Undoing DDL: which catalog objects a statement changed, as they were before it, and putting
//! them back. A transaction block keeps one list per DDL statement; ROLLBACK (or ROLLBACK TO
//! SAVEPOINT) restores the lists newest first. Only the objects the statement touched go back,
//! so DDL other sessions ran in the meantime on other objects stays. Sequence counters are
//! shared between a definition and its copies (`SequenceDef::state`), so restoring a sequence
//! does not move its counter back: nextval is not transactional in PostgreSQL either.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use crate::catalog::{
    Catalog, EnumTypeDef, IndexDef, Oid, RelationKind, SchemaDef, SequenceDef, TableDef, ViewDef,
};
use crate::catalog_comments::CommentKey;
use crate::catalog_extensions::ExtensionDef;
use crate::catalog_functions::RoutineDef;
use crate::catalog_privileges::{DefaultAcl, ObjectRef, Ownership};
use crate::catalog_roles::{RoleDef, RoleMembership};

/// One catalog object, as the catalog holds it.
#[derive(Clone, Debug)]
pub enum CatalogObject {
    Schema(SchemaDef),
    Table(Arc<TableDef>),
    Index(Arc<IndexDef>),
    Sequence(Arc<SequenceDef>),
    View(Arc<ViewDef>),
    Type(Arc<EnumTypeDef>),
    Routine(Arc<RoutineDef>),
    Role(RoleDef),
    /// Every role membership: they change together, and are few.
    RoleMembers(Vec<RoleMembership>),
    /// An object's owner and access list.
    Ownership(ObjectRef, Ownership),
    /// Every default acl (ALTER DEFAULT PRIVILEGES): they change together, and are few.
    DefaultAcls(Vec<DefaultAcl>),
    /// Every comment: they change together, one COMMENT at a time.
    Comments(BTreeMap<CommentKey, String>),
    /// Every installed extension: they are few, and change one statement at a time.
    Extensions(BTreeMap<String, ExtensionDef>),
}

/// Names one catalog object: schemas by name (the catalog keys them so), the rest by OID.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ObjectKey {
    Schema(String),
    Table(Oid),
    Index(Oid),
    Sequence(Oid),
    View(Oid),
    Type(Oid),
    Routine(Oid),
    Role(Oid),
    RoleMembers,
    Ownership(ObjectRef),
    DefaultAcls,
    Comments,
    Extensions,
}

/// An object a statement changed, and its state before: None when the statement created it.
#[derive(Clone, Debug)]
pub struct PriorObject {
    pub key: ObjectKey,
    pub before: Option<CatalogObject>,
}

impl CatalogObject {
    /// Whether two states of an object are the same state (definitions are shared `Arc`s
    /// replaced on every change; schemas compare by OID).
    pub fn same(a: Option<&CatalogObject>, b: Option<&CatalogObject>) -> bool {
        match (a, b) {
            (None, None) => true,
            (Some(CatalogObject::Schema(x)), Some(CatalogObject::Schema(y))) => x.oid == y.oid,
            (Some(CatalogObject::Table(x)), Some(CatalogObject::Table(y))) => Arc::ptr_eq(x, y),
            (Some(CatalogObject::Index(x)), Some(CatalogObject::Index(y))) => Arc::ptr_eq(x, y),
            (Some(CatalogObject::Sequence(x)), Some(CatalogObject::Sequence(y))) => {
                Arc::ptr_eq(x, y)
            }
            (Some(CatalogObject::View(x)), Some(CatalogObject::View(y))) => Arc::ptr_eq(x, y),
            (Some(CatalogObject::Type(x)), Some(CatalogObject::Type(y))) => Arc::ptr_eq(x, y),
            (Some(CatalogObject::Routine(x)), Some(CatalogObject::Routine(y))) => Arc::ptr_eq(x, y),
            (Some(CatalogObject::Role(x)), Some(CatalogObject::Role(y))) => x == y,
            (Some(CatalogObject::RoleMembers(x)), Some(CatalogObject::RoleMembers(y))) => x == y,
            (Some(CatalogObject::Ownership(a, x)), Some(CatalogObject::Ownership(b, y))) => {
                a == b && x == y
            }
            (Some(CatalogObject::DefaultAcls(x)), Some(CatalogObject::DefaultAcls(y))) => x == y,
            (Some(CatalogObject::Comments(x)), Some(CatalogObject::Comments(y))) => x == y,
            (Some(CatalogObject::Extensions(x)), Some(CatalogObject::Extensions(y))) => x == y,
            _ => false,
        }
    }

    /// The (schema, name) a relation claims; None for a schema.
    pub fn relation_name(&self) -> Option<(&str, &str)> {
        match self {
            CatalogObject::Schema(_)
            | CatalogObject::Type(_)
            | CatalogObject::Routine(_)
            | CatalogObject::Role(_)
            | CatalogObject::RoleMembers(_)
            | CatalogObject::Ownership(..)
            | CatalogObject::DefaultAcls(_)
            | CatalogObject::Comments(_)
            | CatalogObject::Extensions(_) => None,
            CatalogObject::Table(t) => Some((&t.schema, &t.name)),
            CatalogObject::Index(i) => Some((&i.schema, &i.name)),
            CatalogObject::Sequence(q) => Some((&q.schema, &q.name)),
            CatalogObject::View(v) => Some((&v.schema, &v.name)),
        }
    }

    fn oid(&self) -> Oid {
        match self {
            CatalogObject::Schema(s) => s.oid,
            CatalogObject::Table(t) => t.oid,
            CatalogObject::Index(i) => i.oid,
            CatalogObject::Sequence(q) => q.oid,
            CatalogObject::View(v) => v.oid,
            CatalogObject::Type(t) => t.oid,
            CatalogObject::Routine(r) => r.oid,
            CatalogObject::Role(r) => r.oid,
            CatalogObject::RoleMembers(_)
            | CatalogObject::Ownership(..)
            | CatalogObject::DefaultAcls(_)
            | CatalogObject::Comments(_)
            | CatalogObject::Extensions(_) => 0,
        }
    }
}

impl ObjectKey {
    fn oid(&self) -> Option<Oid> {
        match self {
            ObjectKey::Schema(_)
            | ObjectKey::RoleMembers
            | ObjectKey::Ownership(_)
            | ObjectKey::DefaultAcls
            | ObjectKey::Comments
            | ObjectKey::Extensions => None,
            ObjectKey::Role(o)
            | ObjectKey::Table(o)
            | ObjectKey::Index(o)
            | ObjectKey::Sequence(o)
            | ObjectKey::View(o)
            | ObjectKey::Type(o)
            | ObjectKey::Routine(o) => Some(*o),
        }
    }
}

impl Catalog {
    /// The object under `key`, as the catalog holds it now.
    pub fn object(&self, key: &ObjectKey) -> Option<CatalogObject> {
        match key {
            ObjectKey::Schema(n) => self.schemas.get(n).cloned().map(CatalogObject::Schema),
            ObjectKey::Table(o) => self.tables.get(o).cloned().map(CatalogObject::Table),
            ObjectKey::Index(o) => self.indexes.get(o).cloned().map(CatalogObject::Index),
            ObjectKey::Sequence(o) => self.sequences.get(o).cloned().map(CatalogObject::Sequence),
            ObjectKey::View(o) => self.views.get(o).cloned().map(CatalogObject::View),
            ObjectKey::Type(o) => self.types.get(o).cloned().map(CatalogObject::Type),
            ObjectKey::Routine(o) => self.routines.get(o).cloned().map(CatalogObject::Routine),
            ObjectKey::Role(o) => self.roles.get(o).cloned().map(CatalogObject::Role),
            ObjectKey::RoleMembers => Some(CatalogObject::RoleMembers(self.role_members.clone())),
            ObjectKey::DefaultAcls => Some(CatalogObject::DefaultAcls(self.default_acls.clone())),
            ObjectKey::Comments => Some(CatalogObject::Comments(self.comments.clone())),
            ObjectKey::Extensions => Some(CatalogObject::Extensions(self.extensions.clone())),
            ObjectKey::Ownership(object) => self
                .ownership
                .get(object)
                .cloned()
                .map(|o| CatalogObject::Ownership(*object, o)),
        }
    }

    /// The changes of one statement that can be undone here: those whose object is still in
    /// the state the statement left (`after`, aligned with `changes`), and whose name, if it
    /// comes back, is free or held by one of these objects. Another session's DDL on the same
    /// object or name since would otherwise be overwritten; those changes are left out (and
    /// returned second).
    pub fn undoable(
        &self,
        changes: &[PriorObject],
        after: &[Option<CatalogObject>],
    ) -> (Vec<PriorObject>, Vec<PriorObject>) {
        let mut kept = Vec::new();
        let mut conflicting = Vec::new();
        let own_oids: Vec<Oid> = changes.iter().filter_map(|c| c.key.oid()).collect();
        for (change, after) in changes.iter().zip(after) {
            let unchanged = CatalogObject::same(self.object(&change.key).as_ref(), after.as_ref());
            let name_free = match change
                .before
                .as_ref()
                .and_then(|b| b.relation_name().map(|n| (b, n)))
            {
                Some((before, (schema, name))) => match self.lookup(schema, name) {
                    Some((_, holder)) => holder == before.oid() || own_oids.contains(&holder),
                    None => true,
                },
                None => true,
            };
            if unchanged && name_free {
                kept.push(change.clone());
            } else {
                conflicting.push(change.clone());
            }
        }
        (kept, conflicting)
    }

    /// The objects that differ between `before` (a copy taken earlier) and this catalog, with
    /// their state in `before`. Definitions are shared `Arc`s and every change replaces one, so
    /// pointer equality finds them.
    pub fn changes_since(&self, before: &Catalog) -> Vec<PriorObject> {
        let mut changes = Vec::new();
        let schema_names: HashSet<&String> =
            self.schemas.keys().chain(before.schemas.keys()).collect();
        for name in schema_names {
            let (now, then) = (self.schemas.get(name), before.schemas.get(name));
            if now.map(|s| s.oid) != then.map(|s| s.oid) {
                changes.push(PriorObject {
                    key: ObjectKey::Schema(name.clone()),
                    before: then.cloned().map(CatalogObject::Schema),
                });
            }
        }
        diff_map(&self.tables, &before.tables, &mut changes, |oid, def| {
            (ObjectKey::Table(oid), def.map(CatalogObject::Table))
        });
        diff_map(&self.indexes, &before.indexes, &mut changes, |oid, def| {
            (ObjectKey::Index(oid), def.map(CatalogObject::Index))
        });
        diff_map(
            &self.sequences,
            &before.sequences,
            &mut changes,
            |oid, def| (ObjectKey::Sequence(oid), def.map(CatalogObject::Sequence)),
        );
        diff_map(&self.views, &before.views, &mut changes, |oid, def| {
            (ObjectKey::View(oid), def.map(CatalogObject::View))
        });
        diff_map(&self.types, &before.types, &mut changes, |oid, def| {
            (ObjectKey::Type(oid), def.map(CatalogObject::Type))
        });
        diff_map(
            &self.routines,
            &before.routines,
            &mut changes,
            |oid, def| (ObjectKey::Routine(oid), def.map(CatalogObject::Routine)),
        );
        let role_oids: HashSet<&Oid> = self.roles.keys().chain(before.roles.keys()).collect();
        for oid in role_oids {
            let then = before.roles.get(oid);
            if self.roles.get(oid) != then {
                changes.push(PriorObject {
                    key: ObjectKey::Role(*oid),
                    before: then.cloned().map(CatalogObject::Role),
                });
            }
        }
        let owned: HashSet<&ObjectRef> = self
            .ownership
            .keys()
            .chain(before.ownership.keys())
            .collect();
        for object in owned {
            let then = before.ownership.get(object);
            if self.ownership.get(object) != then {
                changes.push(PriorObject {
                    key: ObjectKey::Ownership(*object),
                    before: then.cloned().map(|o| CatalogObject::Ownership(*object, o)),
                });
            }
        }
        if self.default_acls != before.default_acls {
            changes.push(PriorObject {
                key: ObjectKey::DefaultAcls,
                before: Some(CatalogObject::DefaultAcls(before.default_acls.clone())),
            });
        }
        if self.comments != before.comments {
            changes.push(PriorObject {
                key: ObjectKey::Comments,
                before: Some(CatalogObject::Comments(before.comments.clone())),
            });
        }
        if self.extensions != before.extensions {
            changes.push(PriorObject {
                key: ObjectKey::Extensions,
                before: Some(CatalogObject::Extensions(before.extensions.clone())),
            });
        }
        if self.role_members != before.role_members {
            changes.push(PriorObject {
                key: ObjectKey::RoleMembers,
                before: Some(CatalogObject::RoleMembers(before.role_members.clone())),
            });
        }
        changes
    }

    /// Puts the objects of one statement's `changes` back as they were before it: first takes
    /// every one of them out (with its name), then puts back those that existed, so names that
    /// moved between them (a rename, a drop and re-create) are free again when claimed.
    pub fn restore(&mut self, changes: &[PriorObject]) {
        for change in changes {
            self.take_out(&change.key);
        }
        for change in changes {
            if let Some(object) = &change.before {
                self.put_back(object.clone());
            }
        }
        self.version += 1;
    }

    fn take_out(&mut self, key: &ObjectKey) {
        let (kind, oid) = match key {
            ObjectKey::Schema(name) => {
                self.schemas.remove(name);
                return;
            }
            ObjectKey::Table(oid) => {
                self.tables.remove(oid);
                (RelationKind::Table, *oid)
            }
            ObjectKey::Index(oid) => {
                self.indexes.remove(oid);
                (RelationKind::Index, *oid)
            }
            ObjectKey::Sequence(oid) => {
                self.sequences.remove(oid);
                (RelationKind::Sequence, *oid)
            }
            ObjectKey::View(oid) => {
                self.views.remove(oid);
                (RelationKind::View, *oid)
            }
            ObjectKey::Type(oid) => {
                self.types.remove(oid);
                return;
            }
            ObjectKey::Routine(oid) => {
                self.routines.remove(oid);
                return;
            }
            ObjectKey::Role(oid) => {
                self.roles.remove(oid);
                return;
            }
            ObjectKey::RoleMembers => {
                self.role_members.clear();
                return;
            }
            ObjectKey::Ownership(object) => {
                self.ownership.remove(object);
                return;
            }
            ObjectKey::DefaultAcls => {
                self.default_acls.clear();
                return;
            }
            ObjectKey::Comments => {
                self.comments.clear();
                return;
            }
            ObjectKey::Extensions => {
                self.extensions.clear();
                return;
            }
        };
        self.relations.retain(|_, entry| *entry != (kind, oid));
    }

    fn put_back(&mut self, object: CatalogObject) {
        let (schema, name, kind, oid) = match object {
            CatalogObject::Schema(s) => {
                self.schemas.insert(s.name.clone(), s);
                return;
            }
            CatalogObject::Table(t) => {
                let entry = (t.schema.clone(), t.name.clone(), RelationKind::Table, t.oid);
                self.tables.insert(t.oid, t);
                entry
            }
            CatalogObject::Index(i) => {
                let entry = (i.schema.clone(), i.name.clone(), RelationKind::Index, i.oid);
                self.indexes.insert(i.oid, i);
                entry
            }
            CatalogObject::Sequence(s) => {
                let entry = (
                    s.schema.clone(),
                    s.name.clone(),
                    RelationKind::Sequence,
                    s.oid,
                );
                self.sequences.insert(s.oid, s);
                entry
            }
            CatalogObject::View(v) => {
                let entry = (v.schema.clone(), v.name.clone(), RelationKind::View, v.oid);
                self.views.insert(v.oid, v);
                entry
            }
            CatalogObject::Type(t) => {
                self.types.insert(t.oid, t);
                return;
            }
            CatalogObject::Routine(r) => {
                self.routines.insert(r.oid, r);
                return;
            }
            CatalogObject::Role(r) => {
                self.roles.insert(r.oid, r);
                return;
            }
            CatalogObject::RoleMembers(members) => {
                self.role_members = members;
                return;
            }
            CatalogObject::Ownership(object, ownership) => {
                self.ownership.insert(object, ownership);
                return;
            }
            CatalogObject::DefaultAcls(acls) => {
                self.default_acls = acls;
                return;
            }
            CatalogObject::Comments(comments) => {
                self.comments = comments;
                return;
            }
            CatalogObject::Extensions(extensions) => {
                self.extensions = extensions;
                return;
            }
        };
        // Should another session's DDL have taken the name while the block was open, the
        // restored object wins it back: the other keeps its OID but is no longer found by name.
        self.relations.insert((schema, name), (kind, oid));
    }
}

/// Adds the entries of two OID maps that differ to `changes`, with the old entry.
fn diff_map<T>(
    now: &std::collections::BTreeMap<Oid, Arc<T>>,
    then: &std::collections::BTreeMap<Oid, Arc<T>>,
    changes: &mut Vec<PriorObject>,
    make: impl Fn(Oid, Option<Arc<T>>) -> (ObjectKey, Option<CatalogObject>),
) {
    let oids: HashSet<&Oid> = now.keys().chain(then.keys()).collect();
    for &oid in oids {
        let (a, b) = (now.get(&oid), then.get(&oid));
        let same = match (a, b) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if !same {
            let (key, before) = make(oid, b.cloned());
            changes.push(PriorObject { key, before });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{AccessMethod, ColumnDef};
    use crate::types::DataType;

    fn table(catalog: &mut Catalog, name: &str) -> Oid {
        let oid = catalog.allocate_oid();
        catalog
            .insert_table(TableDef {
                oid,
                schema: "public".into(),
                name: name.into(),
                columns: vec![ColumnDef {
                    name: "a".into(),
                    data_type: DataType::Int32,
                    not_null: false,
                    default_sql: None,
                    identity: None,
                }],
                constraints: Vec::new(),
                access_method: AccessMethod::Heap,
                options: Vec::new(),
                triggers: Vec::new(),
            })
            .unwrap();
        oid
    }

    #[test]
    fn restore_undoes_create_drop_and_rename() {
        let mut catalog = Catalog::default();
        let kept = table(&mut catalog, "kept");
        let dropped = table(&mut catalog, "dropped");
        let mut statements = Vec::new();

        let before = catalog.clone();
        let created = table(&mut catalog, "created");
        statements.push(catalog.changes_since(&before));

        let before = catalog.clone();
        catalog.remove_table(dropped);
        statements.push(catalog.changes_since(&before));

        // A rename into the dropped table's name, so restoring must free it first.
        let before = catalog.clone();
        let mut renamed = (*catalog.tables[&kept]).clone();
        renamed.name = "dropped".into();
        catalog.replace_table(renamed).unwrap();
        statements.push(catalog.changes_since(&before));
        assert_eq!(statements[2].len(), 1, "only the renamed table changed");

        let version = catalog.version;
        for changes in statements.iter().rev() {
            catalog.restore(changes);
        }
        assert!(catalog.version > version);
        assert_eq!(
            catalog.lookup("public", "kept"),
            Some((RelationKind::Table, kept))
        );
        assert_eq!(
            catalog.lookup("public", "dropped"),
            Some((RelationKind::Table, dropped))
        );
        assert_eq!(catalog.lookup("public", "created"), None);
        assert!(!catalog.tables.contains_key(&created));
        assert_eq!(catalog.tables.len(), 2);
        assert_eq!(catalog.relations.len(), 2);
    }

    #[test]
    fn restore_keeps_other_objects_changed_meanwhile() {
        let mut catalog = Catalog::default();
        let before = catalog.clone();
        catalog.create_schema("mine").unwrap();
        let mine = catalog.changes_since(&before);
        // Another session's table, created after this statement.
        let theirs = table(&mut catalog, "theirs");
        catalog.restore(&mine);
        assert!(!catalog.schemas.contains_key("mine"));
        assert_eq!(
            catalog.lookup("public", "theirs"),
            Some((RelationKind::Table, theirs))
        );
    }
}
