//! CREATE EXTENSION and DROP EXTENSION. Shoal loads no code: an extension it provides is a
//! capability built into the server that creating the extension switches on and places in a
//! schema (pg_stat_statements, see `statement_stats`). Any other extension is refused with
//! 0A000, rather than accepted and left without its functions.

use datafusion::sql::sqlparser::ast;
use shoal_storage::catalog_extensions::ExtensionDef;

use super::ident;
use crate::error::{code, SqlError, SqlResult};
use crate::session::{Session, StatementResult};
use crate::statement_stats;

/// An extension Shoal provides: (name, version, description).
pub const AVAILABLE: &[(&str, &str, &str)] = &[(
    statement_stats::EXTENSION,
    statement_stats::VERSION,
    statement_stats::DESCRIPTION,
)];

pub(super) fn create_extension(
    session: &Session,
    create: &ast::CreateExtension,
) -> SqlResult<StatementResult> {
    let name = ident(&create.name);
    let Some(&(name, version, _)) = AVAILABLE.iter().find(|(n, _, _)| *n == name) else {
        return Err(SqlError::new(
            code::FEATURE_NOT_SUPPORTED,
            format!("extension \"{name}\" is not available"),
        )
        .with_detail(
            "Shoal loads no extensions; it provides those listed in pg_available_extensions.",
        ));
    };
    let (role, superuser) = crate::privileges::acting_role_oid(session)?;
    if !superuser {
        return Err(SqlError::new(
            code::INSUFFICIENT_PRIVILEGE,
            format!("permission denied to create extension \"{name}\""),
        )
        .with_hint("Must be superuser to create this extension."));
    }
    if let Some(wanted) = &create.version {
        let wanted = ident(wanted);
        if wanted != version {
            return Err(SqlError::new(
                code::INVALID_PARAMETER_VALUE,
                format!(
                    "extension \"{name}\" has no installation script nor update path for version \"{wanted}\""
                ),
            ));
        }
    }
    let schema = match &create.schema {
        Some(s) => ident(s),
        None => session.scope.creation_schema().ok_or_else(|| {
            SqlError::new(
                code::INVALID_SCHEMA_NAME,
                "no schema has been selected to create in",
            )
        })?,
    };
    let mut catalog = session.engine.catalog.write();
    if !catalog.schemas.contains_key(&schema) {
        return Err(SqlError::new(
            code::INVALID_SCHEMA_NAME,
            format!("schema \"{schema}\" does not exist"),
        ));
    }
    if catalog.extension(name).is_some() {
        if create.if_not_exists {
            session.scope.notice(
                code::DUPLICATE_OBJECT,
                format!("extension \"{name}\" already exists, skipping"),
            );
            return Ok(StatementResult::command("CREATE EXTENSION"));
        }
        return Err(SqlError::new(
            code::DUPLICATE_OBJECT,
            format!("extension \"{name}\" already exists"),
        ));
    }
    let oid = catalog.allocate_oid();
    catalog.add_extension(ExtensionDef {
        oid,
        name: name.to_string(),
        version: version.to_string(),
        schema,
        owner: role,
    });
    Ok(StatementResult::command("CREATE EXTENSION"))
}

pub(super) fn drop_extension(
    session: &Session,
    drop: &ast::DropExtension,
) -> SqlResult<StatementResult> {
    let (role, superuser) = crate::privileges::acting_role_oid(session)?;
    let mut catalog = session.engine.catalog.write();
    // Every name is checked before any is dropped: the statement drops all or none.
    let mut dropping = Vec::new();
    for name in drop.names.iter().map(ident) {
        match catalog.extension(&name) {
            Some(e) if !superuser && e.owner != role => {
                return Err(SqlError::new(
                    code::INSUFFICIENT_PRIVILEGE,
                    format!("must be owner of extension {name}"),
                ));
            }
            Some(_) => dropping.push(name),
            None if drop.if_exists => session.scope.notice(
                code::UNDEFINED_OBJECT,
                format!("extension \"{name}\" does not exist, skipping"),
            ),
            None => {
                return Err(SqlError::new(
                    code::UNDEFINED_OBJECT,
                    format!("extension \"{name}\" does not exist"),
                ))
            }
        }
    }
    for name in dropping {
        catalog.remove_extension(&name);
    }
    Ok(StatementResult::command("DROP EXTENSION"))
}
