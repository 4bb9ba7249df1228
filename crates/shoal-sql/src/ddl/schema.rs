//! CREATE SCHEMA and DROP SCHEMA. Dropping a schema with CASCADE drops the tables, views and
//! sequences in it; without CASCADE a schema that still holds any of them is refused, as in
//! PostgreSQL.

use datafusion::sql::sqlparser::ast;
use shoal_storage::catalog::Oid;

use super::drop::drop_table_by_oid;
use super::{ident, split_name};
use crate::error::{code, SqlError, SqlResult};
use crate::session::{Session, StatementResult};

/// CREATE SCHEMA [IF NOT EXISTS].
pub(super) fn create_schema(
    session: &Session,
    schema_name: &ast::SchemaName,
    if_not_exists: bool,
) -> SqlResult<StatementResult> {
    let name = match schema_name {
        ast::SchemaName::Simple(n) | ast::SchemaName::NamedAuthorization(n, _) => split_name(n).1,
        ast::SchemaName::UnnamedAuthorization(i) => ident(i),
    };
    match session.engine.catalog.write().create_schema(&name) {
        Ok(_) => Ok(StatementResult::command("CREATE SCHEMA")),
        Err(_) if if_not_exists => {
            session.scope.notice(
                code::DUPLICATE_SCHEMA,
                format!("schema \"{name}\" already exists, skipping"),
            );
            Ok(StatementResult::command("CREATE SCHEMA"))
        }
        Err(e) => Err(e.into()),
    }
}

/// DROP SCHEMA; CASCADE drops the tables, views and sequences in it.
pub(super) fn drop_schemas(
    session: &Session,
    if_exists: bool,
    names: &[ast::ObjectName],
    cascade: bool,
) -> SqlResult<()> {
    for n in names {
        let (_, schema) = split_name(n);
        let has_objects = {
            let c = session.engine.catalog.read();
            c.tables.values().any(|t| t.schema == schema)
                || c.views.values().any(|v| v.schema == schema)
                || c.sequences.values().any(|s| s.schema == schema)
        };
        if has_objects && !cascade {
            return Err(SqlError::new(
                code::DEPENDENT_OBJECTS_STILL_EXIST,
                format!("cannot drop schema {schema} because other objects depend on it"),
            )
            .with_hint("Use DROP ... CASCADE to drop the dependent objects too."));
        }
        if has_objects {
            let tables: Vec<Oid> = session
                .engine
                .catalog
                .read()
                .tables
                .values()
                .filter(|t| t.schema == schema)
                .map(|t| t.oid)
                .collect();
            for t in tables {
                drop_table_by_oid(session, t);
            }
            let mut c = session.engine.catalog.write();
            let views: Vec<Oid> = c
                .views
                .values()
                .filter(|v| v.schema == schema)
                .map(|v| v.oid)
                .collect();
            for v in views {
                c.remove_view(v);
            }
            let seqs: Vec<Oid> = c
                .sequences
                .values()
                .filter(|s| s.schema == schema)
                .map(|s| s.oid)
                .collect();
            for s in seqs {
                c.remove_sequence(s);
            }
        }
        match session.engine.catalog.write().drop_schema(&schema) {
            Ok(()) => {}
            Err(_) if if_exists => session.scope.notice(
                code::SUCCESSFUL_COMPLETION,
                format!("schema \"{schema}\" does not exist, skipping"),
            ),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
