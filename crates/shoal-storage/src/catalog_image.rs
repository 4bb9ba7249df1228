//! The catalog as bytes: what the redo log records after every DDL statement and what a
//! checkpoint stores, so recovery rebuilds schemas, tables, indexes, views and sequences (with
//! their counters) exactly. JSON: the catalog is small next to the data, and a readable image
//! helps when something has to be diagnosed by hand.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::catalog::{
    Catalog, EnumTypeDef, IndexDef, Oid, RelationKind, SchemaDef, SequenceDef, SequenceState,
    TableDef, ViewDef,
};
use crate::catalog_comments::CommentKey;
use crate::catalog_extensions::ExtensionDef;
use crate::catalog_functions::RoutineDef;
use crate::catalog_privileges::{DefaultAcl, ObjectRef, Ownership};
use crate::catalog_roles::{RoleDef, RoleMembership};

#[derive(Serialize, Deserialize)]
struct CatalogImage {
    next_oid: Oid,
    version: u64,
    schemas: Vec<SchemaDef>,
    tables: Vec<TableDef>,
    indexes: Vec<IndexDef>,
    views: Vec<ViewDef>,
    /// Each sequence with its counter: last_value and is_called.
    sequences: Vec<(SequenceDef, i64, bool)>,
    /// User-defined types (absent from images written before there were any).
    #[serde(default)]
    types: Vec<EnumTypeDef>,
    /// Roles and memberships (absent from images written before roles were kept: the
    /// bootstrap superuser is put back).
    #[serde(default)]
    roles: Vec<RoleDef>,
    #[serde(default)]
    role_members: Vec<RoleMembership>,
    /// Owners and access lists (absent from images written before they were kept: every
    /// object is then the bootstrap superuser's, with the default privileges).
    #[serde(default)]
    ownership: Vec<(ObjectRef, Ownership)>,
    #[serde(default)]
    default_acls: Vec<DefaultAcl>,
    /// Comments (absent from images written before they were kept: the public schema's
    /// comment is put back).
    #[serde(default)]
    comments: Option<Vec<(CommentKey, String)>>,
    /// Installed extensions (absent from images written before they were kept: none).
    #[serde(default)]
    extensions: Vec<ExtensionDef>,
    /// Functions and procedures (absent from images written before they were kept: none).
    #[serde(default)]
    routines: Vec<RoutineDef>,
}

impl Catalog {
    pub fn to_image(&self) -> Vec<u8> {
        let image = CatalogImage {
            next_oid: self.next_oid,
            version: self.version,
            schemas: self.schemas.values().cloned().collect(),
            tables: self.tables.values().map(|t| (**t).clone()).collect(),
            indexes: self.indexes.values().map(|i| (**i).clone()).collect(),
            views: self.views.values().map(|v| (**v).clone()).collect(),
            types: self.types.values().map(|t| (**t).clone()).collect(),
            roles: self.roles.values().cloned().collect(),
            role_members: self.role_members.clone(),
            default_acls: self.default_acls.clone(),
            comments: Some(self.comments.iter().map(|(k, v)| (*k, v.clone())).collect()),
            extensions: self.extensions.values().cloned().collect(),
            routines: self.routines.values().map(|r| (**r).clone()).collect(),
            ownership: self
                .ownership
                .iter()
                .map(|(k, v)| (*k, v.clone()))
                .collect(),
            sequences: self
                .sequences
                .values()
                .map(|s| {
                    (
                        (**s).clone(),
                        s.state.last_value.load(Ordering::Acquire),
                        s.state.is_called.load(Ordering::Acquire),
                    )
                })
                .collect(),
        };
        serde_json::to_vec(&image).expect("catalog serializes")
    }

    pub fn from_image(bytes: &[u8]) -> Result<Catalog, String> {
        let image: CatalogImage =
            serde_json::from_slice(bytes).map_err(|e| format!("bad catalog image: {e}"))?;
        let mut c = Catalog {
            next_oid: image.next_oid,
            version: image.version,
            ..Catalog::default()
        };
        c.schemas = image
            .schemas
            .into_iter()
            .map(|s| (s.name.clone(), s))
            .collect();
        let mut name = |schema: &str, name: &str, kind: RelationKind, oid: Oid| {
            c.relations
                .insert((schema.to_string(), name.to_string()), (kind, oid));
        };
        for t in &image.tables {
            name(&t.schema, &t.name, RelationKind::Table, t.oid);
        }
        for i in &image.indexes {
            name(&i.schema, &i.name, RelationKind::Index, i.oid);
        }
        for v in &image.views {
            name(&v.schema, &v.name, RelationKind::View, v.oid);
        }
        for (s, _, _) in &image.sequences {
            name(&s.schema, &s.name, RelationKind::Sequence, s.oid);
        }
        c.tables = image
            .tables
            .into_iter()
            .map(|t| (t.oid, Arc::new(t)))
            .collect();
        c.indexes = image
            .indexes
            .into_iter()
            .map(|i| (i.oid, Arc::new(i)))
            .collect();
        c.views = image
            .views
            .into_iter()
            .map(|v| (v.oid, Arc::new(v)))
            .collect();
        c.sequences = image
            .sequences
            .into_iter()
            .map(|(mut s, last_value, is_called)| {
                s.state = Arc::new(SequenceState::default());
                s.set_value(last_value, is_called);
                (s.oid, Arc::new(s))
            })
            .collect();
        c.types = image
            .types
            .into_iter()
            .map(|t| (t.oid, Arc::new(t)))
            .collect();
        c.roles = image.roles.into_iter().map(|r| (r.oid, r)).collect();
        c.role_members = image.role_members;
        c.ownership = image.ownership.into_iter().collect();
        c.default_acls = image.default_acls;
        if let Some(comments) = image.comments {
            c.comments = comments.into_iter().collect();
        }
        c.extensions = image
            .extensions
            .into_iter()
            .map(|e| (e.name.clone(), e))
            .collect();
        c.routines = image
            .routines
            .into_iter()
            .map(|r| (r.oid, Arc::new(r)))
            .collect();
        c.ensure_bootstrap_role();
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{AccessMethod, ColumnDef};
    use crate::types::DataType;

    #[test]
    fn image_round_trip_keeps_names_and_counters() {
        let mut c = Catalog::default();
        c.create_schema("s").unwrap();
        let oid = c.allocate_oid();
        c.insert_table(TableDef {
            oid,
            schema: "s".into(),
            name: "t".into(),
            columns: vec![ColumnDef {
                name: "a".into(),
                data_type: DataType::Numeric {
                    precision: Some(10),
                    scale: Some(2),
                },
                not_null: true,
                default_sql: Some("1".into()),
                identity: None,
            }],
            constraints: vec![],
            access_method: AccessMethod::Heap,
            options: vec!["fillfactor=100".into()],
            triggers: vec![],
        })
        .unwrap();
        let seq = c.allocate_oid();
        c.insert_sequence(SequenceDef {
            oid: seq,
            schema: "public".into(),
            name: "q".into(),
            data_type: DataType::Int64,
            start: 1,
            increment: 1,
            min_value: 1,
            max_value: i64::MAX,
            cycle: false,
            owned_by: None,
            state: Arc::new(SequenceState::default()),
        })
        .unwrap();
        c.sequences[&seq].set_value(41, true);
        let mood = c.allocate_oid();
        let array_oid = c.allocate_oid();
        let sad = c.allocate_oid();
        c.put_type(EnumTypeDef {
            oid: mood,
            array_oid,
            schema: "public".into(),
            name: "mood".into(),
            labels: vec![crate::catalog::EnumLabel {
                oid: sad,
                label: "sad".into(),
                sort_order: 1.0,
            }],
        });
        let extension = ExtensionDef {
            oid: c.allocate_oid(),
            name: "pg_stat_statements".into(),
            version: "1.10".into(),
            schema: "s".into(),
            owner: 10,
        };
        c.add_extension(extension.clone());
        let back = Catalog::from_image(&c.to_image()).unwrap();
        assert_eq!(back.extension("pg_stat_statements"), Some(&extension));
        assert_eq!(back.lookup("s", "t"), Some((RelationKind::Table, oid)));
        assert_eq!(back.tables[&oid].columns, c.tables[&oid].columns);
        assert_eq!(back.sequences[&seq].next_value(), Ok(42));
        assert_eq!(back.version, c.version);
        assert_eq!(
            back.lookup_type("public", "mood").unwrap().position("sad"),
            Some(0)
        );
        let mut back = back;
        assert!(back.allocate_oid() > seq, "oids are never reused");
        assert!(Catalog::from_image(b"{").is_err());
    }
}
