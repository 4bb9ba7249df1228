//! ALTER FUNCTION: rename a routine, give it another owner or schema, or change what CREATE
//! said of it (IMMUTABLE/STABLE/VOLATILE, STRICT, SECURITY DEFINER, SET clauses). pg_dump
//! writes `ALTER FUNCTION ... OWNER TO` after each function, and migration tools change
//! volatility this way.
//!
//! LEAKPROOF, PARALLEL, COST and ROWS only guide PostgreSQL's planner; they are accepted and
//! not kept. SUPPORT functions and DEPENDS ON EXTENSION are refused with 0A000.

use datafusion::sql::sqlparser::ast;
use shoal_storage::catalog_functions::{RoutineDef, RoutineKind, Volatility};
use shoal_storage::catalog_privileges::ObjectClass;

use super::define::{config_setting, must_own, routine_word, signature_types};
use super::{find_by_signature, Named};
use crate::ddl::ident;
use crate::error::{code, SqlError, SqlResult};
use crate::session::{Session, StatementResult};

pub fn alter_function(session: &Session, alter: &ast::AlterFunction) -> SqlResult<StatementResult> {
    if alter.kind == ast::AlterFunctionKind::Aggregate {
        return Err(SqlError::unsupported("ALTER AGGREGATE"));
    }
    let desc = &alter.function;
    let types = signature_types(session, desc)?;
    let search_path = session.scope.lookup_schemas();
    let def = {
        let catalog = session.engine.catalog.read();
        let found = [RoutineKind::Function, RoutineKind::Procedure]
            .into_iter()
            .map(|kind| {
                find_by_signature(&catalog, &search_path, &desc.name, kind, types.as_deref())
            })
            .collect::<SqlResult<Vec<Named>>>()?;
        match found.into_iter().reduce(|f, p| match f {
            Named::Found(_) => f,
            Named::Missing(_) => p,
        }) {
            Some(Named::Found(def)) => def,
            Some(Named::Missing(e)) => return Err(e),
            None => unreachable!("two kinds were looked up"),
        }
    };
    if let ast::AlterFunctionOperation::OwnerTo(owner) = &alter.operation {
        return crate::privileges::grant::alter_owner(
            session,
            (ObjectClass::Function, def.oid),
            None,
            &def.name,
            Some(&def.schema),
            owner,
        );
    }
    let actor = crate::privileges::acting_role_oid(session)?;
    let mut new = (*def).clone();
    match &alter.operation {
        ast::AlterFunctionOperation::OwnerTo(_) => unreachable!("handled above"),
        ast::AlterFunctionOperation::RenameTo { new_name } => new.name = ident(new_name),
        ast::AlterFunctionOperation::SetSchema { schema_name } => {
            let schema = crate::ddl::ident_of(&schema_name.to_string());
            if !session.engine.catalog.read().schemas.contains_key(&schema) {
                return Err(SqlError::new(
                    code::INVALID_SCHEMA_NAME,
                    format!("schema \"{schema}\" does not exist"),
                ));
            }
            new.schema = schema;
        }
        ast::AlterFunctionOperation::DependsOnExtension { .. } => {
            return Err(SqlError::unsupported(
                "ALTER FUNCTION ... DEPENDS ON EXTENSION",
            ))
        }
        ast::AlterFunctionOperation::Actions { actions, .. } => {
            for action in actions {
                apply(session, &mut new, action)?;
            }
        }
    }
    let mut catalog = session.engine.catalog.write();
    must_own(actor, &catalog, &def)?;
    if new.name != def.name || new.schema != def.schema {
        let input = new.input_types();
        if catalog
            .routines_named(&new.schema, &new.name)
            .any(|r| r.oid != def.oid && r.input_types() == input)
        {
            let names: Vec<String> = input.iter().map(|t| crate::types::format_type(t)).collect();
            return Err(SqlError::new(
                code::DUPLICATE_FUNCTION,
                format!(
                    "{} {}({}) already exists in schema \"{}\"",
                    routine_word(&new),
                    new.name,
                    names.join(", "),
                    new.schema
                ),
            ));
        }
    }
    catalog.put_routine(new);
    Ok(StatementResult::command(match def.kind {
        RoutineKind::Function => "ALTER FUNCTION",
        RoutineKind::Procedure => "ALTER PROCEDURE",
    }))
}

fn apply(
    session: &Session,
    def: &mut RoutineDef,
    action: &ast::AlterFunctionAction,
) -> SqlResult<()> {
    use ast::AlterFunctionAction as A;
    match action {
        A::CalledOnNull(c) => {
            def.strict = matches!(
                c,
                ast::FunctionCalledOnNull::Strict
                    | ast::FunctionCalledOnNull::ReturnsNullOnNullInput
            )
        }
        A::Behavior(b) => {
            def.volatility = match b {
                ast::FunctionBehavior::Immutable => Volatility::Immutable,
                ast::FunctionBehavior::Stable => Volatility::Stable,
                ast::FunctionBehavior::Volatile => Volatility::Volatile,
            }
        }
        A::Security { security, .. } => {
            def.security_definer = matches!(security, ast::FunctionSecurity::Definer)
        }
        A::Set(p) => {
            let name = p.name.to_string().to_lowercase();
            def.config.retain(|(n, _)| *n != name);
            def.config.extend(config_setting(session, p));
        }
        A::Reset(ast::ResetConfig::ALL) => def.config.clear(),
        A::Reset(ast::ResetConfig::ConfigName(name)) => {
            let name = name.to_string().to_lowercase();
            def.config.retain(|(n, _)| *n != name);
        }
        // Planner hints only.
        A::Leakproof(_) | A::Parallel(_) | A::Cost(_) | A::Rows(_) => {}
        A::Support(_) => return Err(SqlError::unsupported("SUPPORT functions")),
    }
    Ok(())
}
