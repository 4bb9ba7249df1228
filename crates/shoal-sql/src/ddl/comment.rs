//! COMMENT ON TABLE | VIEW | SEQUENCE | INDEX | COLUMN | SCHEMA name IS 'text' | NULL: kept in
//! the catalog (`catalog_comments`), shown by pg_description, obj_description and
//! col_description, logged and undone like any DDL. Comments on other kinds of objects are
//! refused: Shoal would have nowhere to show them.

use datafusion::sql::sqlparser::ast::{self, CommentObject};
use shoal_storage::catalog::RelationKind;
use shoal_storage::catalog_comments::{CommentKey, PG_CLASS, PG_NAMESPACE};

use super::{ident, split_name};
use crate::error::{code, SqlError, SqlResult};
use crate::session::{Session, StatementResult};

pub(super) fn comment_on(
    session: &Session,
    object_type: &CommentObject,
    object_name: &ast::ObjectName,
    comment: Option<String>,
) -> SqlResult<StatementResult> {
    let key = comment_key(session, object_type, object_name)?;
    session.engine.catalog.write().set_comment(key, comment);
    Ok(StatementResult::command("COMMENT"))
}

fn comment_key(
    session: &Session,
    object_type: &CommentObject,
    object_name: &ast::ObjectName,
) -> SqlResult<CommentKey> {
    let relation = |name: &ast::ObjectName, wanted: RelationKind, what: &str| {
        let (schema, rel) = split_name(name);
        match session.scope.resolve_relation(schema.as_deref(), &rel) {
            Some((_, kind, oid)) if kind == wanted => Ok(oid),
            Some(_) => Err(SqlError::new(
                code::WRONG_OBJECT_TYPE,
                format!("\"{rel}\" is not {what}"),
            )),
            None => Err(SqlError::undefined_table(&rel)),
        }
    };
    Ok(match object_type {
        CommentObject::Table => (
            PG_CLASS,
            relation(object_name, RelationKind::Table, "a table")?,
            0,
        ),
        CommentObject::View => (
            PG_CLASS,
            relation(object_name, RelationKind::View, "a view")?,
            0,
        ),
        CommentObject::Sequence => (
            PG_CLASS,
            relation(object_name, RelationKind::Sequence, "a sequence")?,
            0,
        ),
        CommentObject::Index => (
            PG_CLASS,
            relation(object_name, RelationKind::Index, "an index")?,
            0,
        ),
        CommentObject::Column => {
            let mut table = object_name.clone();
            let Some(ast::ObjectNamePart::Identifier(column)) = table.0.pop() else {
                return Err(SqlError::syntax("column name must be qualified"));
            };
            if table.0.is_empty() {
                return Err(SqlError::syntax("column name must be qualified"));
            }
            let oid = relation(&table, RelationKind::Table, "a table")?;
            let column = ident(&column);
            let position = session
                .engine
                .catalog
                .read()
                .tables
                .get(&oid)
                .and_then(|t| t.column_index(&column))
                .ok_or_else(|| {
                    SqlError::new(
                        code::UNDEFINED_COLUMN,
                        format!(
                            "column \"{column}\" of relation \"{}\" does not exist",
                            split_name(&table).1
                        ),
                    )
                })?;
            (PG_CLASS, oid, position as i32 + 1)
        }
        CommentObject::Schema => {
            let name = split_name(object_name).1;
            let oid = session
                .engine
                .catalog
                .read()
                .schemas
                .get(&name)
                .map(|s| s.oid)
                .ok_or_else(|| {
                    SqlError::new(
                        code::INVALID_SCHEMA_NAME,
                        format!("schema \"{name}\" does not exist"),
                    )
                })?;
            (PG_NAMESPACE, oid, 0)
        }
        other => {
            return Err(SqlError::new(
                code::FEATURE_NOT_SUPPORTED,
                format!("COMMENT ON {other} is not supported"),
            ))
        }
    })
}
