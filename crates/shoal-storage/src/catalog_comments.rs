//! COMMENT ON: the descriptions of objects, keyed as pg_description keys them, by the OID of
//! the catalog the object is in, the object's OID and a column number (0 for the object
//! itself). A comment outlives nothing: a dropped object's comment is no longer shown (OIDs
//! are not reused), and dropping a column drops its comment and renumbers the later ones.

use crate::catalog::{Catalog, Oid, PUBLIC_NAMESPACE_OID};

/// (classoid, objoid, objsubid), as pg_description's key.
pub type CommentKey = (Oid, Oid, i32);

/// pg_class and pg_namespace's OIDs, the catalogs of the objects comments are kept for.
pub const PG_CLASS: Oid = 1259;
pub const PG_NAMESPACE: Oid = 2615;

/// The comment the public schema is created with, as in PostgreSQL.
pub(crate) fn initial_comments() -> std::collections::BTreeMap<CommentKey, String> {
    [(
        (PG_NAMESPACE, PUBLIC_NAMESPACE_OID, 0),
        "standard public schema".to_string(),
    )]
    .into()
}

impl Catalog {
    /// Sets (or with None or an empty text, as PostgreSQL, removes) an object's comment.
    pub fn set_comment(&mut self, key: CommentKey, text: Option<String>) {
        match text.filter(|t| !t.is_empty()) {
            Some(text) => {
                self.comments.insert(key, text);
            }
            None => {
                self.comments.remove(&key);
            }
        }
        self.version += 1;
    }

    pub fn comment(&self, key: CommentKey) -> Option<&str> {
        self.comments.get(&key).map(String::as_str)
    }

    /// After DROP COLUMN of column `attnum` (from 1) of `relation`: its comment goes, and the
    /// comments of the columns after it follow them to their new numbers.
    pub fn drop_column_comment(&mut self, relation: Oid, attnum: i32) {
        let later: Vec<(CommentKey, String)> = self
            .comments
            .range((PG_CLASS, relation, attnum)..=(PG_CLASS, relation, i32::MAX))
            .map(|(k, v)| (*k, v.clone()))
            .collect();
        for (key, text) in later {
            self.comments.remove(&key);
            if key.2 > attnum {
                self.comments.insert((key.0, key.1, key.2 - 1), text);
            }
        }
    }

    /// Whether the object a comment is on still exists.
    pub fn comment_target_exists(&self, (class, oid, column): CommentKey) -> bool {
        match class {
            PG_NAMESPACE => self.schemas.values().any(|s| s.oid == oid),
            PG_CLASS => match self.tables.get(&oid) {
                Some(table) => column == 0 || (column as usize) <= table.columns.len(),
                None => {
                    column == 0
                        && (self.views.contains_key(&oid)
                            || self.sequences.contains_key(&oid)
                            || self.indexes.contains_key(&oid))
                }
            },
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropping_a_column_renumbers_the_later_comments() {
        let mut c = Catalog::default();
        for (column, text) in [(0, "table"), (1, "a"), (2, "b"), (3, "c")] {
            c.set_comment((PG_CLASS, 50_000, column), Some(text.to_string()));
        }
        c.drop_column_comment(50_000, 2);
        assert_eq!(c.comment((PG_CLASS, 50_000, 0)), Some("table"));
        assert_eq!(c.comment((PG_CLASS, 50_000, 1)), Some("a"));
        assert_eq!(c.comment((PG_CLASS, 50_000, 2)), Some("c"));
        assert_eq!(c.comment((PG_CLASS, 50_000, 3)), None);
        c.set_comment((PG_CLASS, 50_000, 0), Some(String::new()));
        assert_eq!(
            c.comment((PG_CLASS, 50_000, 0)),
            None,
            "an empty comment removes it"
        );
    }

    #[test]
    fn the_public_schema_starts_with_its_comment() {
        let c = Catalog::default();
        assert_eq!(
            c.comment((PG_NAMESPACE, PUBLIC_NAMESPACE_OID, 0)),
            Some("standard public schema")
        );
    }
}
