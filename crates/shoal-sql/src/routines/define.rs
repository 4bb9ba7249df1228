//! CREATE [OR REPLACE] FUNCTION and DROP FUNCTION, with PostgreSQL's checks and messages.
//! A SQL function's body is checked when it is created, as PostgreSQL does while
//! `check_function_bodies` is on (pg_dump turns it off): its queries are planned with the
//! parameters as typed NULLs, and the last one must give what the function declares.

use std::sync::Arc;

use shoal_storage::catalog::{Catalog, Oid};
use shoal_storage::catalog_privileges::ObjectClass;

use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::sql::sqlparser::ast::{self, Expr, Statement};
use shoal_storage::catalog_functions::{
    ArgMode, RoutineArg, RoutineDef, RoutineKind, RoutineReturn, Volatility,
};
use shoal_storage::types::DataType;

use super::describe::identity_types;
use crate::ddl::{creation_target, ident, split_name};
use crate::error::{code, SqlError, SqlResult};
use crate::session::{Session, StatementResult};

pub async fn create_function(
    session: &mut Session,
    create: ast::CreateFunction,
    kind: RoutineKind,
) -> SqlResult<StatementResult> {
    let def = definition(session, &create, kind)?;
    let check_body =
        def.language == "sql" && session.settings.get("check_function_bodies") != Some("off");
    if def.language == "plpgsql" {
        shoal_plpgsql::parse_body(&def.body).map_err(|e| {
            SqlError::syntax(format!(
                "{} in the body of function \"{}\"",
                e.message, def.name
            ))
        })?;
    }
    let (def, replaced) = put_definition(session, def, create.or_replace)?;
    // The body is checked with the routine in the catalog, so that it may call itself.
    if check_body {
        if let Err(e) = check_sql_body(session, &def).await {
            let mut catalog = session.engine.catalog.write();
            match replaced {
                Some(old) => catalog.put_routine(old.as_ref().clone()),
                None => {
                    catalog.remove_routine(def.oid);
                    catalog.drop_ownership((ObjectClass::Function, def.oid));
                }
            }
            return Err(e);
        }
    }
    Ok(StatementResult::command(match kind {
        RoutineKind::Function => "CREATE FUNCTION",
        RoutineKind::Procedure => "CREATE PROCEDURE",
    }))
}

/// Puts the routine in the catalog (replacing the one with its signature when `or_replace`);
/// returns it with its OID, and the routine it replaced.
fn put_definition(
    session: &Session,
    def: RoutineDef,
    or_replace: bool,
) -> SqlResult<(RoutineDef, Option<Arc<RoutineDef>>)> {
    // The acting role is read before the catalog is locked for writing.
    let actor = crate::privileges::acting_role_oid(session)?;
    let mut catalog = session.engine.catalog.write();
    let inputs = def.input_types();
    let existing = catalog
        .routines_named(&def.schema, &def.name)
        .find(|r| r.input_types() == inputs)
        .cloned();
    let mut def = def;
    match existing {
        Some(_) if !or_replace => {
            return Err(SqlError::new(
                code::DUPLICATE_FUNCTION,
                format!(
                    "function \"{}\" already exists with same argument types",
                    def.name
                ),
            ));
        }
        Some(ref old) => {
            must_own(actor, &catalog, old)?;
            if old.kind != def.kind {
                return Err(SqlError::new(
                    code::WRONG_OBJECT_TYPE,
                    format!("cannot change routine kind of \"{}\"", def.name),
                ));
            }
            if old.returns != def.returns {
                return Err(SqlError::new(
                    code::INVALID_FUNCTION_DEFINITION,
                    "cannot change return type of existing function",
                )
                .with_hint(format!(
                    "Use DROP FUNCTION {}({}) first.",
                    def.name,
                    identity_types(&old, ",")
                )));
            }
            def.oid = old.oid;
        }
        None => def.oid = catalog.allocate_oid(),
    }
    catalog.put_routine(def.clone());
    if existing.is_none() {
        crate::privileges::grant::own_created(
            &mut catalog,
            actor.0,
            &[(ObjectClass::Function, def.oid)],
        );
    }
    Ok((def, existing))
}

/// Refuses to replace or drop a routine the acting role does not own, as PostgreSQL does.
/// `actor`: the acting role and whether it is a superuser.
pub(super) fn must_own(actor: (Oid, bool), catalog: &Catalog, def: &RoutineDef) -> SqlResult<()> {
    let (role, superuser) = actor;
    let owner = catalog.owner_of((ObjectClass::Function, def.oid));
    if superuser || catalog.has_privileges_of_role(role, owner) {
        return Ok(());
    }
    Err(SqlError::new(
        code::INSUFFICIENT_PRIVILEGE,
        format!("must be owner of {} {}", routine_word(def), def.name),
    ))
}

/// "function" or "procedure", as PostgreSQL's messages name a routine.
pub fn routine_word(def: &RoutineDef) -> &'static str {
    match def.kind {
        RoutineKind::Function => "function",
        RoutineKind::Procedure => "procedure",
    }
}

/// The routine `create` describes (its OID not yet given).
fn definition(
    session: &Session,
    create: &ast::CreateFunction,
    kind: RoutineKind,
) -> SqlResult<RoutineDef> {
    let (schema, name) = creation_target(session, &create.name)?;
    let mut args = Vec::new();
    for a in create.args.iter().flatten() {
        let mode = match a.mode {
            None | Some(ast::ArgMode::In) => ArgMode::In,
            Some(ast::ArgMode::Out) => ArgMode::Out,
            Some(ast::ArgMode::InOut) => ArgMode::InOut,
            Some(ast::ArgMode::Variadic) => ArgMode::Variadic,
        };
        if args
            .iter()
            .any(|a: &RoutineArg| a.mode == ArgMode::Variadic)
            && mode != ArgMode::Out
        {
            return Err(SqlError::new(
                code::INVALID_FUNCTION_DEFINITION,
                "VARIADIC parameter must be the last input parameter",
            ));
        }
        if mode == ArgMode::Out && a.default_expr.is_some() {
            return Err(SqlError::new(
                code::INVALID_FUNCTION_DEFINITION,
                "only input parameters can have default values",
            ));
        }
        let data_type = crate::ddl::column_type(session, &a.data_type)?;
        if mode == ArgMode::Variadic && !matches!(data_type, DataType::Array(_)) {
            return Err(SqlError::new(
                code::INVALID_FUNCTION_DEFINITION,
                "VARIADIC parameter must be an array",
            ));
        }
        args.push(RoutineArg {
            name: a.name.as_ref().map(ident),
            mode,
            data_type,
            default_sql: a.default_expr.as_ref().map(Expr::to_string),
        });
    }
    // After a parameter with a default, every input parameter needs one.
    let inputs: Vec<&RoutineArg> = args.iter().filter(|a| a.mode != ArgMode::Out).collect();
    if let Some(first) = inputs.iter().position(|a| a.default_sql.is_some()) {
        if inputs[first..].iter().any(|a| a.default_sql.is_none()) {
            return Err(SqlError::new(
                code::INVALID_FUNCTION_DEFINITION,
                "input parameters after one with a default value must also have defaults",
            ));
        }
    }
    let outputs: Vec<(String, DataType)> = args
        .iter()
        .enumerate()
        .filter(|(_, a)| matches!(a.mode, ArgMode::Out | ArgMode::InOut))
        .map(|(i, a)| {
            (
                a.name.clone().unwrap_or_else(|| format!("column{}", i + 1)),
                a.data_type.clone(),
            )
        })
        .collect();
    let declared = match &create.return_type {
        Some(t) => Some(return_type(session, t)?),
        None => None,
    };
    let returns = match (declared, outputs.len()) {
        // A procedure returns nothing, or (to CALL) one row of its output parameters.
        _ if kind == RoutineKind::Procedure => match outputs.is_empty() {
            true => RoutineReturn::Void,
            false => RoutineReturn::Record(outputs),
        },
        (None, 0) => {
            return Err(SqlError::new(
                code::INVALID_FUNCTION_DEFINITION,
                "function result type must be specified",
            ))
        }
        (None, 1) => RoutineReturn::Scalar(outputs[0].1.clone()),
        (None, _) => RoutineReturn::Record(outputs),
        (Some(RoutineReturn::Table(cols)), 0) => RoutineReturn::Table(cols),
        (Some(RoutineReturn::Table(_)), _) => {
            return Err(SqlError::new(
                code::INVALID_FUNCTION_DEFINITION,
                "OUT parameters cannot be used with RETURNS TABLE",
            ))
        }
        (Some(declared), 0) => declared,
        (Some(declared), 1) if declared == RoutineReturn::Scalar(outputs[0].1.clone()) => declared,
        (Some(_), 1) => {
            return Err(SqlError::new(
                code::INVALID_FUNCTION_DEFINITION,
                format!(
                    "function result type must be {} because of OUT parameters",
                    crate::types::format_type(&outputs[0].1)
                ),
            ))
        }
        (Some(_), _) => {
            return Err(SqlError::new(
                code::INVALID_FUNCTION_DEFINITION,
                "function result type must be record because of OUT parameters",
            ))
        }
    };
    let body = match &create.function_body {
        Some(ast::CreateFunctionBody::AsBeforeOptions { body, .. })
        | Some(ast::CreateFunctionBody::AsAfterOptions(body)) => match body {
            Expr::Value(v) => match &v.value {
                ast::Value::SingleQuotedString(s) => s.clone(),
                ast::Value::DollarQuotedString(d) => d.value.clone(),
                _ => return Err(SqlError::syntax("function body must be a string constant")),
            },
            _ => return Err(SqlError::syntax("function body must be a string constant")),
        },
        Some(ast::CreateFunctionBody::Return(e)) => format!("RETURN {e}"),
        Some(_) => return Err(SqlError::unsupported("this form of function body")),
        None => {
            return Err(SqlError::new(
                code::INVALID_FUNCTION_DEFINITION,
                "no function body specified",
            ))
        }
    };
    let language = match &create.language {
        Some(l) => ident(l),
        None if body.starts_with("RETURN ") => "sql".to_string(),
        None => {
            return Err(SqlError::new(
                code::INVALID_FUNCTION_DEFINITION,
                "no language specified",
            ))
        }
    };
    match language.as_str() {
        "sql" | "plpgsql" => {}
        "c" | "internal" => {
            return Err(SqlError::unsupported(format!(
                "functions in language {language}"
            )))
        }
        other => {
            return Err(SqlError::new(
                code::UNDEFINED_OBJECT,
                format!("language \"{other}\" does not exist"),
            ))
        }
    }
    if returns == RoutineReturn::Trigger && language == "sql" {
        return Err(SqlError::new(
            code::INVALID_FUNCTION_DEFINITION,
            "SQL functions cannot return type trigger",
        ));
    }
    let volatility = match create.behavior {
        Some(ast::FunctionBehavior::Immutable) => Volatility::Immutable,
        Some(ast::FunctionBehavior::Stable) => Volatility::Stable,
        _ => Volatility::Volatile,
    };
    let strict = matches!(
        create.called_on_null,
        Some(ast::FunctionCalledOnNull::Strict | ast::FunctionCalledOnNull::ReturnsNullOnNullInput)
    );
    let config = create
        .set_params
        .iter()
        .filter_map(|p| config_setting(session, p))
        .collect();
    Ok(RoutineDef {
        oid: 0,
        schema,
        name,
        kind,
        args,
        returns,
        language,
        body,
        volatility,
        strict,
        security_definer: matches!(create.security, Some(ast::FunctionSecurity::Definer)),
        config,
    })
}

fn return_type(session: &Session, t: &ast::FunctionReturnType) -> SqlResult<RoutineReturn> {
    let custom_name = |t: &ast::DataType| match t {
        ast::DataType::Custom(name, _) => split_name(name).1,
        _ => String::new(),
    };
    Ok(match t {
        ast::FunctionReturnType::SetOf(t) => {
            if custom_name(t) == "record" {
                return Err(SqlError::unsupported("functions returning SETOF record"));
            }
            RoutineReturn::SetOf(crate::ddl::column_type(session, t)?)
        }
        ast::FunctionReturnType::DataType(ast::DataType::Table(Some(columns))) => {
            RoutineReturn::Table(
                columns
                    .iter()
                    .map(|c| {
                        Ok((
                            ident(&c.name),
                            crate::ddl::column_type(session, &c.data_type)?,
                        ))
                    })
                    .collect::<SqlResult<_>>()?,
            )
        }
        ast::FunctionReturnType::DataType(ast::DataType::Trigger) => RoutineReturn::Trigger,
        ast::FunctionReturnType::DataType(t) => match custom_name(t).as_str() {
            "void" => RoutineReturn::Void,
            "trigger" => RoutineReturn::Trigger,
            "record" => return Err(SqlError::unsupported("functions returning record")),
            _ => RoutineReturn::Scalar(crate::ddl::column_type(session, t)?),
        },
    })
}

/// Plans the body's queries with the parameters as typed NULLs, and checks that the last
/// statement gives what the function returns.
async fn check_sql_body(session: &Session, def: &RoutineDef) -> SqlResult<()> {
    let statements = super::body_statements(def)?;
    let placeholders: Vec<Expr> = def
        .args
        .iter()
        .filter(|a| a.mode != ArgMode::Out)
        .map(|a| {
            Ok(super::cast(
                Expr::value(ast::Value::Null),
                super::sql_type(&a.data_type)?,
            ))
        })
        .collect::<SqlResult<_>>()?;
    let count = statements.len();
    for (i, mut stmt) in statements.into_iter().enumerate() {
        let last = i + 1 == count;
        let Statement::Query(q) = &mut stmt else {
            if last && !matches!(def.returns, RoutineReturn::Void) {
                return Err(return_mismatch(def, None));
            }
            continue;
        };
        if crate::dml::cte::has_modifying_cte(q) {
            continue;
        }
        super::inline::substitute_parameters(&session.scope, q.as_mut(), def, &placeholders);
        let plan = crate::query::plan_statement(session.state(), &session.scope, stmt)
            .await
            .map_err(|e| e.with_context(format!("SQL function \"{}\"", def.name)))?;
        if !last {
            continue;
        }
        let fields: Vec<ArrowType> = plan
            .schema()
            .fields()
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        let expected: Vec<ArrowType> = match &def.returns {
            RoutineReturn::Void => continue,
            RoutineReturn::Scalar(t) | RoutineReturn::SetOf(t) => vec![crate::types::arrow_type(t)],
            RoutineReturn::Table(cols) | RoutineReturn::Record(cols) => cols
                .iter()
                .map(|(_, t)| crate::types::arrow_type(t))
                .collect(),
            RoutineReturn::Trigger => continue,
        };
        if fields.len() != expected.len() {
            return Err(return_mismatch(def, None));
        }
        for (from, to) in fields.iter().zip(&expected) {
            if !assignable(from, to) {
                return Err(return_mismatch(def, Some(from)));
            }
        }
    }
    Ok(())
}

/// Whether a value of type `from` may be returned as `to`: implicitly castable, between number
/// types (PostgreSQL's assignment casts), or to a string type.
fn assignable(from: &ArrowType, to: &ArrowType) -> bool {
    let number = |t: &ArrowType| t.is_integer() || t.is_floating() || crate::numeric::is_numeric(t);
    super::implicitly_castable(from, to)
        || (number(from) && number(to))
        || matches!(
            to,
            ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View
        )
}

fn return_mismatch(def: &RoutineDef, actual: Option<&ArrowType>) -> SqlError {
    let declared = super::describe::result_type(def);
    let error = SqlError::new(
        code::INVALID_FUNCTION_DEFINITION,
        format!("return type mismatch in function declared to return {declared}"),
    )
    .with_context(format!("SQL function \"{}\"", def.name));
    match actual {
        Some(t) => error.with_detail(format!(
            "Actual return type is {}.",
            crate::dml::pg_type_name_of_arrow(t)
        )),
        None => error.with_detail(match def.returns {
            RoutineReturn::Scalar(_) | RoutineReturn::SetOf(_) => {
                "Final statement must return exactly one column."
            }
            _ => "Final statement returns the wrong number of columns.",
        }),
    }
}

/// A `SET name = value` clause of a routine as (name, value); None for `SET name TO DEFAULT`,
/// which keeps nothing.
pub(super) fn config_setting(
    session: &Session,
    p: &ast::FunctionDefinitionSetParam,
) -> Option<(String, String)> {
    let name = p.name.to_string().to_lowercase();
    let value = match &p.value {
        ast::FunctionSetValue::Values(values) => values
            .iter()
            .map(|v| match v {
                Expr::Value(v) => match &v.value {
                    ast::Value::SingleQuotedString(s) => s.clone(),
                    other => other.to_string(),
                },
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join(", "),
        ast::FunctionSetValue::Default => return None,
        ast::FunctionSetValue::FromCurrent => {
            session.settings.get(&name).unwrap_or_default().to_string()
        }
    };
    Some((name, value))
}

/// The input argument types a DROP, ALTER or GRANT names a routine by; None without a list.
/// Read before the catalog is locked for writing (reading a type takes its read lock).
pub(super) fn signature_types(
    session: &Session,
    desc: &ast::FunctionDesc,
) -> SqlResult<Option<Vec<DataType>>> {
    desc.args
        .as_ref()
        .map(|args| {
            args.iter()
                .filter(|a| !matches!(a.mode, Some(ast::ArgMode::Out)))
                .map(|a| crate::ddl::column_type(session, &a.data_type))
                .collect()
        })
        .transpose()
}

/// DROP FUNCTION name [(argument types)], ...: every name is found before any is dropped.
pub fn drop_functions(
    session: &Session,
    descs: &[ast::FunctionDesc],
    if_exists: bool,
    kind: RoutineKind,
) -> SqlResult<StatementResult> {
    let word = match kind {
        RoutineKind::Function => "function",
        RoutineKind::Procedure => "procedure",
    };
    let search_path = session.scope.lookup_schemas();
    // The argument types are read before the catalog is locked for writing (reading a type
    // takes the catalog's read lock).
    let desc_types = descs
        .iter()
        .map(|desc| signature_types(session, desc))
        .collect::<SqlResult<Vec<_>>>()?;
    let actor = crate::privileges::acting_role_oid(session)?;
    let mut catalog = session.engine.catalog.write();
    let mut dropping = Vec::new();
    for (desc, types) in descs.iter().zip(desc_types) {
        match super::find_by_signature(&catalog, &search_path, &desc.name, kind, types.as_deref())?
        {
            super::Named::Found(r) => {
                must_own(actor, &catalog, &r)?;
                dropping.push(r.oid)
            }
            super::Named::Missing(e) if !if_exists => return Err(e),
            super::Named::Missing(_) => {
                let (_, name) = split_name(&desc.name);
                let names: Vec<String> = types
                    .iter()
                    .flatten()
                    .map(crate::types::format_type)
                    .collect();
                session.scope.notice(
                    code::SUCCESSFUL_COMPLETION,
                    format!(
                        "{word} {name}({}) does not exist, skipping",
                        names.join(", ")
                    ),
                );
            }
        }
    }
    for oid in dropping {
        catalog.remove_routine(oid);
        catalog.drop_ownership((ObjectClass::Function, oid));
    }
    Ok(StatementResult::command(match kind {
        RoutineKind::Function => "DROP FUNCTION",
        RoutineKind::Procedure => "DROP PROCEDURE",
    }))
}
