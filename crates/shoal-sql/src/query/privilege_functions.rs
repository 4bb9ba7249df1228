//! The access privilege inquiry functions: has_table_privilege and its siblings for sequences,
//! columns, schemas, the database and functions, and pg_has_role. Each takes an optional role (name or
//! OID; the current role when left out), the object (name or OID) and a privilege list such as
//! `'SELECT, INSERT WITH GRANT OPTION'`, and is true when the role holds any of them. An OID
//! that names nothing gives NULL, as in PostgreSQL; a name that names nothing is an error.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{ScalarUDF, Volatility};
use shoal_storage::catalog::{Catalog, Oid, RelationKind};
use shoal_storage::catalog_privileges::{ObjectClass, ObjectRef, Privileges, DATABASE_OID};

use super::functions::{sql_error, udf};
use super::scope::PlanScope;
use crate::error::{code, SqlError};

/// Which kind of object a function asks about.
#[derive(Clone, Copy)]
enum Asks {
    Table,
    Sequence,
    Column,
    /// has_any_column_privilege: the table's privileges or any column's.
    AnyColumn,
    Schema,
    Database,
    /// has_function_privilege: a function or procedure, by OID or signature text.
    Function,
}

pub fn register(state: &mut datafusion::execution::SessionState, scope: &Arc<PlanScope>) {
    use datafusion::execution::FunctionRegistry;
    let mut add = |f: ScalarUDF| {
        state
            .register_udf(Arc::new(f))
            .expect("function registration cannot fail");
    };
    for (name, asks, arities) in [
        ("has_table_privilege", Asks::Table, &[2, 3][..]),
        ("has_sequence_privilege", Asks::Sequence, &[2, 3]),
        ("has_any_column_privilege", Asks::AnyColumn, &[2, 3]),
        ("has_column_privilege", Asks::Column, &[3, 4]),
        ("has_schema_privilege", Asks::Schema, &[2, 3]),
        ("has_database_privilege", Asks::Database, &[2, 3]),
        ("has_function_privilege", Asks::Function, &[2, 3]),
    ] {
        let sc = scope.clone();
        add(udf(
            name,
            arities,
            ArrowType::Boolean,
            Volatility::Stable,
            move |a| {
                has_privilege(&sc, asks, a)
                    .map(ScalarValue::Boolean)
                    .map_err(sql_error)
            },
        ));
    }
    let sc = scope.clone();
    add(udf(
        "acldefault",
        &[2],
        ArrowType::Utf8,
        Volatility::Stable,
        move |a| acldefault(&sc, a).map(ScalarValue::Utf8).map_err(sql_error),
    ));
    let sc = scope.clone();
    add(udf(
        "pg_has_role",
        &[2, 3],
        ArrowType::Boolean,
        Volatility::Stable,
        move |a| {
            pg_has_role(&sc, a)
                .map(ScalarValue::Boolean)
                .map_err(sql_error)
        },
    ));
}

/// acldefault(objtype, owner): the acl an object of the kind owned by `owner` has while its
/// acl is NULL, as aclitem[]'s text. pg_dump compares every acl with it to know what to grant.
fn acldefault(scope: &PlanScope, args: &[ScalarValue]) -> Result<Option<String>, SqlError> {
    use shoal_storage::catalog_privileges::{acl_items_text, AclItem, PUBLIC};
    if args.iter().any(ScalarValue::is_null) {
        return Ok(None);
    }
    let kind = text(&args[0]);
    let owner = text(&args[1])
        .parse::<Oid>()
        .map_err(|_| SqlError::new(code::INVALID_TEXT_REPRESENTATION, "acldefault: bad owner"))?;
    let p = |letters: &str| {
        letters.chars().fold(Privileges::NONE, |held, letter| {
            held | match letter {
                'a' => Privileges::INSERT,
                'r' => Privileges::SELECT,
                'w' => Privileges::UPDATE,
                'd' => Privileges::DELETE,
                'D' => Privileges::TRUNCATE,
                'x' => Privileges::REFERENCES,
                't' => Privileges::TRIGGER,
                'X' => Privileges::EXECUTE,
                'U' => Privileges::USAGE,
                'C' => Privileges::CREATE,
                'T' => Privileges::TEMPORARY,
                'c' => Privileges::CONNECT,
                _ => unreachable!("privilege letter {letter}"),
            }
        })
    };
    // (PUBLIC's privileges, the owner's), as PostgreSQL's acldefault() gives them.
    let (public, own) = match kind.as_str() {
        "c" | "r" => ("", "arwdDxt"),
        "s" => ("", "rwU"),
        "d" => ("Tc", "CTc"),
        "f" => ("X", "X"),
        "l" | "T" => ("U", "U"),
        "F" | "S" => ("", "U"),
        "n" => ("", "UC"),
        "L" => ("", "rw"),
        _ => {
            return Err(SqlError::new(
                code::INTERNAL_ERROR,
                format!("unrecognized object type abbreviation: {kind}"),
            ))
        }
    };
    let item = |grantee: Oid, letters: &str| AclItem {
        grantee,
        grantor: owner,
        privileges: p(letters),
        grant_options: Privileges::NONE,
    };
    let mut acl = Vec::new();
    if !public.is_empty() {
        acl.push(item(PUBLIC, public));
    }
    acl.push(item(owner, own));
    Ok(Some(acl_items_text(&scope.engine.catalog.read(), &acl)))
}

fn has_privilege(
    scope: &PlanScope,
    asks: Asks,
    args: &[ScalarValue],
) -> Result<Option<bool>, SqlError> {
    // (role, object, [column,] privilege list): the role is optional.
    let with_role = match asks {
        Asks::Column => args.len() == 4,
        _ => args.len() == 3,
    };
    if args.iter().any(ScalarValue::is_null) {
        return Ok(None);
    }
    let catalog = scope.engine.catalog.read();
    let role = match with_role {
        true => role_arg(scope, &catalog, &args[0])?,
        false => current_role(scope, &catalog)?,
    };
    let rest = &args[usize::from(with_role)..];
    let Some((object, kind)) = object_arg(scope, &catalog, asks, &rest[0])? else {
        return Ok(None);
    };
    let list = text(&rest[rest.len() - 1]);
    let wanted = privilege_list(&list, asks)?;
    if (object, kind) == system_catalog() {
        return Ok(Some(wanted.iter().any(|(p, _)| *p == Privileges::SELECT)));
    }
    let mut held = catalog.privileges_of(role, object, kind);
    let mut options = grant_options_of(&catalog, role, object, kind);
    // Column privileges add to the table's: the named column's, or any column's.
    let columns = match asks {
        Asks::Column => match column_arg(&catalog, object.1, &rest[0], &rest[1])? {
            Some(column) => vec![column],
            None => return Ok(None),
        },
        Asks::AnyColumn => catalog.relation_column_names(object.1),
        _ => Vec::new(),
    };
    if let Some(ownership) = catalog.ownership.get(&object) {
        for column in &columns {
            for item in ownership.columns.get(column).into_iter().flatten() {
                if item.grantee == 0 || catalog.has_privileges_of_role(role, item.grantee) {
                    held = held | item.privileges;
                    if item.grantee != 0 {
                        options = options | item.grant_options;
                    }
                }
            }
        }
    }
    Ok(Some(wanted.iter().any(|(p, with_grant)| {
        held.contains(*p) && (!with_grant || options.contains(*p))
    })))
}

/// The column a has_column_privilege call names, by name or number; None for a number that
/// names none (NULL, as in PostgreSQL), an error for a name.
fn column_arg(
    catalog: &Catalog,
    relation: Oid,
    table: &ScalarValue,
    column: &ScalarValue,
) -> Result<Option<String>, SqlError> {
    let columns = catalog.relation_column_names(relation);
    if let Some(number) = oid_of(column) {
        return Ok(columns.get((number as usize).wrapping_sub(1)).cloned());
    }
    let name = text(column);
    if columns.contains(&name) {
        return Ok(Some(name));
    }
    let table = match oid_of(table) {
        Some(_) => catalog
            .tables
            .get(&relation)
            .map_or(String::new(), |t| t.name.clone()),
        None => text(table),
    };
    Err(SqlError::new(
        code::UNDEFINED_COLUMN,
        format!("column \"{name}\" of relation \"{table}\" does not exist"),
    ))
}

/// The privileges `role` may grant on the object: all for its owner and superusers, else the
/// grant options the acl gives it (or roles it inherits from).
fn grant_options_of(
    catalog: &Catalog,
    role: Oid,
    object: ObjectRef,
    kind: Option<RelationKind>,
) -> Privileges {
    if catalog.has_privileges_of_role(role, catalog.owner_of(object)) {
        return Privileges::all_for(object.0, kind);
    }
    catalog
        .effective_acl(object, kind)
        .iter()
        .filter(|i| i.grantee != 0 && catalog.has_privileges_of_role(role, i.grantee))
        .fold(Privileges::NONE, |p, i| p | i.grant_options)
}

fn pg_has_role(scope: &PlanScope, args: &[ScalarValue]) -> Result<Option<bool>, SqlError> {
    if args.iter().any(ScalarValue::is_null) {
        return Ok(None);
    }
    let catalog = scope.engine.catalog.read();
    let (member, role, mode) = match args {
        [role, mode] => (current_role(scope, &catalog)?, role, mode),
        [member, role, mode] => (role_arg(scope, &catalog, member)?, role, mode),
        _ => return Ok(None),
    };
    let superuser = catalog.roles.get(&member).is_some_and(|r| r.superuser);
    // PostgreSQL's predefined roles (psql's \l+ asks about pg_read_all_stats): Shoal grants
    // them to nobody, and a superuser holds what they would give.
    if oid_of(role).is_none() && PREDEFINED_ROLES.contains(&text(role).as_str()) {
        return Ok(Some(superuser));
    }
    let role = role_arg(scope, &catalog, role)?;
    let mode = text(mode).to_ascii_uppercase();
    let (mode, admin) = match mode.trim().strip_suffix("WITH ADMIN OPTION") {
        Some(m) => (m.trim().to_string(), true),
        None => (mode.trim().to_string(), false),
    };
    if admin {
        return Ok(Some(
            superuser
                || catalog
                    .role_members
                    .iter()
                    .any(|m| m.role == role && m.member == member && m.admin_option),
        ));
    }
    match mode.as_str() {
        "MEMBER" | "SET" => Ok(Some(superuser || catalog.is_member_of(member, role))),
        "USAGE" => Ok(Some(catalog.has_privileges_of_role(member, role))),
        other => Err(unrecognized(other)),
    }
}

/// PostgreSQL 15's predefined roles.
const PREDEFINED_ROLES: &[&str] = &[
    "pg_database_owner",
    "pg_read_all_data",
    "pg_write_all_data",
    "pg_monitor",
    "pg_read_all_settings",
    "pg_read_all_stats",
    "pg_stat_scan_tables",
    "pg_read_server_files",
    "pg_write_server_files",
    "pg_execute_server_program",
    "pg_signal_backend",
    "pg_checkpoint",
];

fn text(v: &ScalarValue) -> String {
    match v {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => s.clone(),
        other => other.to_string(),
    }
}

fn oid_of(v: &ScalarValue) -> Option<Oid> {
    match v {
        ScalarValue::Utf8(_) | ScalarValue::LargeUtf8(_) | ScalarValue::Utf8View(_) => None,
        other => other.cast_to(&ArrowType::Int64).ok().and_then(|s| match s {
            ScalarValue::Int64(Some(n)) => Oid::try_from(n).ok(),
            _ => None,
        }),
    }
}

fn current_role(scope: &PlanScope, catalog: &Catalog) -> Result<Oid, SqlError> {
    let name = scope.current_role();
    catalog
        .role_named(&name)
        .map(|r| r.oid)
        .ok_or_else(|| undefined_role(&name))
}

fn role_arg(scope: &PlanScope, catalog: &Catalog, v: &ScalarValue) -> Result<Oid, SqlError> {
    if let Some(oid) = oid_of(v) {
        return Ok(oid);
    }
    let name = text(v);
    match name.as_str() {
        "public" => Ok(0),
        _ => catalog.role_named(&name).map(|r| r.oid).ok_or_else(|| {
            let _ = scope;
            undefined_role(&name)
        }),
    }
}

fn undefined_role(name: &str) -> SqlError {
    SqlError::new(
        code::UNDEFINED_OBJECT,
        format!("role \"{name}\" does not exist"),
    )
}

/// The object an inquiry names; None for an OID that names nothing.
fn object_arg(
    scope: &PlanScope,
    catalog: &Catalog,
    asks: Asks,
    v: &ScalarValue,
) -> Result<Option<(ObjectRef, Option<RelationKind>)>, SqlError> {
    match asks {
        Asks::Table | Asks::Column | Asks::AnyColumn | Asks::Sequence => {
            let oid = match oid_of(v) {
                Some(oid) => oid,
                None => {
                    let name = text(v);
                    let (schema, rel) = super::functions::parse_qualified_name(&name);
                    match scope.resolve_relation(schema.as_deref(), &rel) {
                        Some((_, _, oid)) => oid,
                        // The system catalogs: readable by everyone.
                        None if super::functions::regclass(scope, &name).is_ok() => {
                            return Ok(Some(system_catalog()))
                        }
                        None => return Err(SqlError::undefined_table(&name)),
                    }
                }
            };
            let kind = if catalog.tables.contains_key(&oid) {
                RelationKind::Table
            } else if catalog.views.contains_key(&oid) {
                RelationKind::View
            } else if catalog.sequences.contains_key(&oid) {
                RelationKind::Sequence
            } else {
                return Ok(None);
            };
            if matches!(asks, Asks::Sequence) && kind != RelationKind::Sequence {
                let name = text(v);
                return Err(SqlError::new(
                    code::WRONG_OBJECT_TYPE,
                    format!("\"{name}\" is not a sequence"),
                ));
            }
            Ok(Some(((ObjectClass::Relation, oid), Some(kind))))
        }
        Asks::Schema => {
            if let Some(oid) = oid_of(v) {
                let exists = catalog.schemas.values().any(|s| s.oid == oid);
                return Ok(exists.then_some(((ObjectClass::Schema, oid), None)));
            }
            let name = text(v);
            let schema = catalog.schemas.get(&name).ok_or_else(|| {
                SqlError::new(
                    code::INVALID_SCHEMA_NAME,
                    format!("schema \"{name}\" does not exist"),
                )
            })?;
            Ok(Some(((ObjectClass::Schema, schema.oid), None)))
        }
        Asks::Function => {
            if let Some(oid) = oid_of(v) {
                let exists = catalog.routines.contains_key(&oid);
                return Ok(exists.then_some(((ObjectClass::Function, oid), None)));
            }
            let oid = routine_arg(scope, catalog, &text(v))?;
            Ok(Some(((ObjectClass::Function, oid), None)))
        }
        Asks::Database => {
            if let Some(oid) = oid_of(v) {
                return Ok((oid == DATABASE_OID).then_some(((ObjectClass::Database, oid), None)));
            }
            let name = text(v);
            if name != crate::query::schema::DATABASE_NAME {
                return Err(SqlError::new(
                    "3D000",
                    format!("database \"{name}\" does not exist"),
                ));
            }
            Ok(Some(((ObjectClass::Database, DATABASE_OID), None)))
        }
    }
}

/// The routine a has_function_privilege signature names (`f(integer, text)`, as regprocedure
/// reads it).
fn routine_arg(scope: &PlanScope, catalog: &Catalog, signature: &str) -> Result<Oid, SqlError> {
    use datafusion::sql::sqlparser::ast;
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;
    use shoal_storage::catalog_functions::RoutineKind;
    let Some((name, args)) = signature.trim().split_once('(') else {
        return Err(SqlError::new(
            code::INVALID_TEXT_REPRESENTATION,
            "expected a left parenthesis",
        ));
    };
    let Some(args) = args.trim_end().strip_suffix(')') else {
        return Err(SqlError::new(
            code::INVALID_TEXT_REPRESENTATION,
            "expected a right parenthesis",
        ));
    };
    let mut types = Vec::new();
    if !args.trim().is_empty() {
        let parsed = Parser::new(&PostgreSqlDialect {})
            .try_with_sql(args)
            .and_then(|mut p| p.parse_comma_separated(Parser::parse_data_type))
            .map_err(|e| SqlError::syntax(e.to_string()))?;
        for t in &parsed {
            types.push(crate::types::from_sql_type(t)?);
        }
    }
    let (schema, routine) = super::functions::parse_qualified_name(name.trim());
    let parts: Vec<ast::Ident> = schema
        .into_iter()
        .chain(std::iter::once(routine))
        .map(|p| ast::Ident::with_quote('"', p))
        .collect();
    let object_name = ast::ObjectName::from(parts);
    for kind in [RoutineKind::Function, RoutineKind::Procedure] {
        if let crate::routines::Named::Found(def) = crate::routines::find_by_signature(
            catalog,
            &scope.lookup_schemas(),
            &object_name,
            kind,
            Some(&types),
        )? {
            return Ok(def.oid);
        }
    }
    Err(SqlError::new(
        code::UNDEFINED_FUNCTION,
        format!("function \"{}\" does not exist", signature.trim()),
    ))
}

/// A system catalog, asked about as a table (it stands for all of them: only SELECT is held,
/// by everyone; see `has_privilege`).
fn system_catalog() -> (ObjectRef, Option<RelationKind>) {
    ((ObjectClass::Relation, 0), None)
}

/// A privilege list: names separated by commas, each optionally `WITH GRANT OPTION`.
fn privilege_list(list: &str, asks: Asks) -> Result<Vec<(Privileges, bool)>, SqlError> {
    let mut out = Vec::new();
    for item in list.split(',') {
        let item = item.trim().to_ascii_uppercase();
        let (name, with_grant) = match item.strip_suffix("WITH GRANT OPTION") {
            Some(n) => (n.trim().to_string(), true),
            None => (item.clone(), false),
        };
        let p = match (asks, name.as_str()) {
            (Asks::Table | Asks::Column | Asks::AnyColumn | Asks::Sequence, "SELECT") => {
                Privileges::SELECT
            }
            (Asks::Table | Asks::Column | Asks::AnyColumn, "INSERT") => Privileges::INSERT,
            (Asks::Table | Asks::Column | Asks::AnyColumn | Asks::Sequence, "UPDATE") => {
                Privileges::UPDATE
            }
            (Asks::Table, "DELETE") => Privileges::DELETE,
            (Asks::Table, "TRUNCATE") => Privileges::TRUNCATE,
            (Asks::Table | Asks::Column | Asks::AnyColumn, "REFERENCES") => Privileges::REFERENCES,
            (Asks::Table, "TRIGGER") => Privileges::TRIGGER,
            (Asks::Sequence | Asks::Schema, "USAGE") => Privileges::USAGE,
            (Asks::Schema | Asks::Database, "CREATE") => Privileges::CREATE,
            (Asks::Database, "CONNECT") => Privileges::CONNECT,
            (Asks::Database, "TEMPORARY" | "TEMP") => Privileges::TEMPORARY,
            (Asks::Function, "EXECUTE") => Privileges::EXECUTE,
            _ => return Err(unrecognized(item.trim())),
        };
        out.push((p, with_grant));
    }
    Ok(out)
}

fn unrecognized(item: &str) -> SqlError {
    SqlError::new(
        code::INVALID_PARAMETER_VALUE,
        format!("unrecognized privilege type: \"{item}\""),
    )
}
