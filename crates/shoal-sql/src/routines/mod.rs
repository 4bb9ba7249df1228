//! Routines users create: `CREATE FUNCTION ... LANGUAGE sql` and the calls that reach them.
//!
//! A routine is kept in the catalog as its definition and body text (`RoutineDef`, logged and
//! undone like any catalog object). What happens to a call depends on the body, as in
//! PostgreSQL's planner:
//!
//! - a body that is one expression (`SELECT a + b`, `RETURN a + b`) is inlined: the call
//!   becomes that expression with the arguments in place of the parameters (`inline`), so it is
//!   planned, optimized and run like the rest of the statement, in every statement path;
//! - a body that is one query (`SELECT count(*) FROM t WHERE k = $1`) becomes a scalar subquery,
//!   or a derived table when the function is called in FROM;
//! - other bodies (data-modifying statements, several statements) are refused with 0A000 where
//!   they cannot run.
//!
//! Which routine a call means follows PostgreSQL's rules as far as the call's argument types
//! are apparent from its text (`resolve_call`): the arguments' count (with defaults and named
//! arguments), then exact and implicitly castable types, string literals taking any type. An
//! argument whose type shows only once planned (a column, an expression) is checked when the
//! statement is planned (`argument`).

pub(crate) mod alter;
mod argument;
pub mod call;
pub mod define;
pub mod describe;
pub(crate) mod inline;
pub(crate) mod per_row;
pub mod plpgsql;
pub mod statement;
pub mod trigger;

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::sql::sqlparser::ast::{self, Expr, FunctionArg, FunctionArgExpr};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use shoal_storage::catalog::Catalog;
use shoal_storage::catalog_functions::{ArgMode, RoutineDef, RoutineKind};
use shoal_storage::types::DataType;

pub use argument::register;

use crate::error::{code, SqlError, SqlResult};
use crate::parse::VARIADIC_ARGUMENT;

/// How a SQL routine's body was written: a string constant (`AS '...'`), `RETURN expr`, or
/// `BEGIN ATOMIC ... END`. The latter two are kept with their keyword in front.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyForm {
    Quoted,
    Return,
    Atomic,
}

pub fn body_form(def: &RoutineDef) -> BodyForm {
    let head: String = def
        .body
        .trim_start()
        .chars()
        .take(12)
        .collect::<String>()
        .to_ascii_uppercase();
    if def.language != "sql" {
        BodyForm::Quoted
    } else if head.starts_with("RETURN ") || head.starts_with("RETURN\n") {
        BodyForm::Return
    } else if head.starts_with("BEGIN ATOMIC") {
        BodyForm::Atomic
    } else {
        BodyForm::Quoted
    }
}

/// The statements of a SQL routine's body; a `RETURN expr` body is `SELECT expr`.
pub fn body_statements(def: &RoutineDef) -> SqlResult<Vec<ast::Statement>> {
    let body = def.body.trim();
    let sql = match body_form(def) {
        BodyForm::Quoted => body.to_string(),
        BodyForm::Return => format!("SELECT {}", &body["RETURN".len()..]),
        BodyForm::Atomic => {
            let inner = &body["BEGIN ATOMIC".len()..];
            let inner = inner.trim_end();
            inner
                .strip_suffix("END")
                .or_else(|| inner.strip_suffix("end"))
                .unwrap_or(inner)
                .to_string()
        }
    };
    crate::parse::parse_statements(&sql).map_err(|e| {
        SqlError::syntax(format!(
            "syntax error in the body of function \"{}\": {e}",
            def.name
        ))
    })
}

/// A call resolved to one routine: its arguments in declared order, defaults filled in, each
/// converted to its parameter's type.
pub struct ResolvedCall {
    pub routine: Arc<RoutineDef>,
    pub args: Vec<Expr>,
}

/// The type of a call argument as far as its text shows.
#[derive(Clone, Debug, PartialEq)]
enum Apparent {
    /// A string literal or NULL: PostgreSQL's `unknown`, which takes any parameter type.
    Unknown,
    Known(DataType),
    /// Known only once planned (a column, an expression).
    Opaque,
}

fn apparent_type(e: &Expr) -> Apparent {
    match e {
        Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) if n.parse::<i32>().is_ok() => {
                Apparent::Known(DataType::Int32)
            }
            ast::Value::Number(n, _) if n.parse::<i64>().is_ok() => {
                Apparent::Known(DataType::Int64)
            }
            ast::Value::Number(..) => Apparent::Known(DataType::Numeric {
                precision: None,
                scale: None,
            }),
            ast::Value::Boolean(_) => Apparent::Known(DataType::Bool),
            // A prepared statement's parameter is `unknown` too until something types it:
            // the call gives it its parameter's type.
            ast::Value::SingleQuotedString(_)
            | ast::Value::DollarQuotedString(_)
            | ast::Value::Placeholder(_)
            | ast::Value::Null => Apparent::Unknown,
            _ => Apparent::Opaque,
        },
        Expr::Cast { data_type, .. } => crate::types::from_sql_type(data_type)
            .map(Apparent::Known)
            .unwrap_or(Apparent::Opaque),
        Expr::Nested(inner) => apparent_type(inner),
        // `-5` is a negative integer constant in PostgreSQL, of the same type as `5`.
        Expr::UnaryOp {
            op: ast::UnaryOperator::Minus,
            expr,
        } if matches!(expr.as_ref(), Expr::Value(v) if matches!(v.value, ast::Value::Number(..))) => {
            apparent_type(expr)
        }
        _ => Apparent::Opaque,
    }
}

/// The type PostgreSQL would name for a call argument in "does not exist" errors, as far as
/// its text shows it.
pub fn apparent_type_name(arg: &FunctionArg) -> String {
    let e = match arg {
        FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => e,
        FunctionArg::Named {
            arg: FunctionArgExpr::Expr(e),
            ..
        }
        | FunctionArg::ExprNamed {
            arg: FunctionArgExpr::Expr(e),
            ..
        } => e,
        _ => return "unknown".into(),
    };
    match apparent_type(e) {
        Apparent::Known(t) => crate::types::format_type(&t),
        Apparent::Unknown | Apparent::Opaque => "unknown".into(),
    }
}

/// Whether PostgreSQL converts a value of type `from` to `to` implicitly (in a function call's
/// arguments), judged on the types values travel as: integers widen and become numeric or
/// floating point, numeric becomes floating point, real becomes double precision, text types
/// mix, a date becomes a timestamp and a timestamp a timestamp with time zone.
pub fn implicitly_castable(from: &ArrowType, to: &ArrowType) -> bool {
    use ArrowType as A;
    let numeric = crate::numeric::is_numeric;
    let text = |t: &ArrowType| matches!(t, A::Utf8 | A::LargeUtf8 | A::Utf8View);
    let rank = |t: &ArrowType| match t {
        A::Int8 | A::Int16 => Some(1),
        A::Int32 => Some(2),
        A::Int64 => Some(3),
        t if numeric(t) => Some(4),
        A::Float32 => Some(5),
        A::Float64 => Some(6),
        _ => None,
    };
    if from == to || from == &A::Null || (text(from) && text(to)) {
        return true;
    }
    match (from, to) {
        (A::Date32, A::Timestamp(..)) => true,
        (A::Timestamp(u1, None), A::Timestamp(u2, Some(_))) => u1 == u2,
        (A::List(a), A::List(b)) => a.data_type() == b.data_type(),
        _ => matches!((rank(from), rank(to)), (Some(f), Some(t)) if f < t),
    }
}

fn is_text_category(t: &DataType) -> bool {
    matches!(t, DataType::Text | DataType::Varchar(_) | DataType::Char(_))
}

/// Resolves a call of `name` (its parts as written, folded) with `args` to a user routine:
/// None when no routine of that name is in reach, so the call is a built-in function's (or no
/// function's, which planning reports). A name PostgreSQL has a built-in function of reaches a
/// user routine only when qualified with the routine's schema.
pub fn resolve_call(
    catalog: &Catalog,
    lookup_schemas: &[String],
    name: &[String],
    args: &[FunctionArg],
) -> SqlResult<Option<ResolvedCall>> {
    resolve_routine_call(catalog, lookup_schemas, name, args, RoutineKind::Function)
}

/// `resolve_call` for routines of `kind` (CALL resolves procedures).
pub fn resolve_routine_call(
    catalog: &Catalog,
    lookup_schemas: &[String],
    name: &[String],
    args: &[FunctionArg],
    kind: RoutineKind,
) -> SqlResult<Option<ResolvedCall>> {
    if catalog.routines.is_empty() {
        return Ok(None);
    }
    let (schemas, routine_name): (Vec<String>, &str) = match name {
        [n] => {
            if crate::query::pg_catalog::is_builtin_function(n) {
                return Ok(None);
            }
            (lookup_schemas.to_vec(), n)
        }
        [s, n] => (vec![s.clone()], n),
        _ => return Ok(None),
    };
    // The nearest schema on the path with a routine of that name hides the later ones.
    let Some(candidates) = schemas.iter().find_map(|s| {
        let found: Vec<&Arc<RoutineDef>> = catalog
            .routines_named(s, routine_name)
            .filter(|r| r.kind == kind)
            .collect();
        (!found.is_empty()).then_some(found)
    }) else {
        return Ok(None);
    };
    // Positional arguments first, then named ones (`name => value`).
    let mut positional = Vec::new();
    let mut named = Vec::new();
    for a in args {
        match a {
            // PostgreSQL's older spelling of a named argument, `name := value`.
            FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::BinaryOp {
                left,
                op: ast::BinaryOperator::Assignment,
                right,
            })) if matches!(left.as_ref(), Expr::Identifier(_)) => {
                let Expr::Identifier(name) = left.as_ref() else {
                    unreachable!("matched above")
                };
                named.push((crate::ddl::ident(name), right.as_ref().clone()));
            }
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => {
                if !named.is_empty() {
                    return Err(SqlError::syntax(
                        "positional argument cannot follow named argument",
                    ));
                }
                positional.push(e.clone());
            }
            FunctionArg::Named {
                name,
                arg: FunctionArgExpr::Expr(e),
                ..
            }
            | FunctionArg::ExprNamed {
                name: Expr::Identifier(name),
                arg: FunctionArgExpr::Expr(e),
                ..
            } => named.push((crate::ddl::ident(name), e.clone())),
            _ => return Ok(None),
        }
    }
    // `VARIADIC array` (see `parse::mark_variadic_arguments`): the array for a variadic
    // parameter, which must be the last argument.
    let spread = match named.iter().position(|(n, _)| n == VARIADIC_ARGUMENT) {
        Some(at) if at + 1 == named.len() && at == 0 => named.pop().map(|(_, e)| e),
        Some(_) => {
            return Err(SqlError::syntax(
                "a VARIADIC argument must be the last argument",
            ))
        }
        None => None,
    };
    let mut matches: Vec<Match> = Vec::new();
    'candidate: for routine in candidates {
        let inputs: Vec<_> = routine
            .args
            .iter()
            .filter(|a| a.mode != ArgMode::Out)
            .collect();
        let variadic = inputs.last().filter(|a| a.mode == ArgMode::Variadic);
        let mut positional = positional.clone();
        let mut packed = None;
        match (&spread, variadic) {
            (Some(_), None) => continue,
            (Some(array), Some(_)) => positional.push(array.clone()),
            // The arguments from the variadic parameter's place on are its array's elements;
            // it takes at least one (else its default, if it has one).
            (None, Some(v)) if positional.len() >= inputs.len() => {
                let DataType::Array(element) = &v.data_type else {
                    continue;
                };
                let elements = positional.split_off(inputs.len() - 1);
                for e in &elements {
                    if let Apparent::Known(t) = apparent_type(e) {
                        let (from, to) = (
                            crate::types::arrow_type(&t),
                            crate::types::arrow_type(element),
                        );
                        if !implicitly_castable(&from, &to) {
                            continue 'candidate;
                        }
                    }
                }
                packed = Some(variadic_array(
                    &routine.name,
                    inputs.len(),
                    element,
                    elements,
                )?);
            }
            _ => {}
        }
        if positional.len() + named.len() + usize::from(packed.is_some()) > inputs.len() {
            continue;
        }
        let mut slots: Vec<Option<Expr>> = vec![None; inputs.len()];
        for (slot, e) in slots.iter_mut().zip(&positional) {
            *slot = Some(e.clone());
        }
        let variadic_slot = match (&packed, &spread) {
            (Some(_), _) => VariadicSlot::Packed,
            (None, Some(_)) => VariadicSlot::Spread,
            (None, None) => VariadicSlot::None,
        };
        if let Some(array) = packed {
            slots[inputs.len() - 1] = Some(array);
        }
        for (n, e) in &named {
            let Some(i) = inputs.iter().position(|a| a.name.as_deref() == Some(n)) else {
                continue 'candidate;
            };
            if slots[i].is_some() {
                continue 'candidate;
            }
            slots[i] = Some(e.clone());
        }
        // Every parameter without a value needs a default.
        if slots
            .iter()
            .zip(&inputs)
            .any(|(s, a)| s.is_none() && a.default_sql.is_none())
        {
            continue;
        }
        let mut exact = 0;
        for (slot, a) in slots.iter().zip(&inputs) {
            let Some(e) = slot else { continue };
            match apparent_type(e) {
                Apparent::Known(t) if t == a.data_type => exact += 1,
                Apparent::Known(t) => {
                    let (from, to) = (
                        crate::types::arrow_type(&t),
                        crate::types::arrow_type(&a.data_type),
                    );
                    if !implicitly_castable(&from, &to) {
                        continue 'candidate;
                    }
                }
                Apparent::Unknown | Apparent::Opaque => {}
            }
        }
        matches.push(Match {
            routine: routine.clone(),
            slots,
            exact,
            variadic: variadic_slot,
        });
    }
    if matches.len() > 1 {
        let best = matches.iter().map(|m| m.exact).max().unwrap_or(0);
        matches.retain(|m| m.exact == best);
    }
    if matches.len() > 1 {
        // Unknown literals prefer string-category parameters, as PostgreSQL's do.
        let prefers_text = |m: &Match| {
            let inputs: Vec<_> = m
                .routine
                .args
                .iter()
                .filter(|a| a.mode != ArgMode::Out)
                .collect();
            m.slots.iter().zip(&inputs).all(|(slot, a)| match slot {
                Some(e) if apparent_type(e) == Apparent::Unknown => is_text_category(&a.data_type),
                _ => true,
            })
        };
        if matches.iter().filter(|m| prefers_text(m)).count() == 1 {
            matches.retain(|m| prefers_text(m));
        }
    }
    match matches.len() {
        0 => Ok(None),
        1 => {
            let m = matches.pop().expect("one match");
            let args = convert_arguments(&m.routine, m.slots, m.variadic)?;
            Ok(Some(ResolvedCall {
                routine: m.routine,
                args,
            }))
        }
        _ => Err(SqlError::new(
            code::AMBIGUOUS_FUNCTION,
            format!("function {routine_name}(...) is not unique"),
        )
        .with_hint(
            "Could not choose a best candidate function. You might need to add explicit type casts.",
        )),
    }
}

/// A routine a call's arguments fit: its arguments by parameter, how many have the
/// parameter's exact type, and what its last argument is to a variadic parameter.
struct Match {
    routine: Arc<RoutineDef>,
    slots: Vec<Option<Expr>>,
    exact: usize,
    variadic: VariadicSlot,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum VariadicSlot {
    /// An ordinary argument.
    None,
    /// The array of the arguments from the variadic parameter's place on (`variadic_array`).
    Packed,
    /// The array written `VARIADIC array`.
    Spread,
}

/// The arguments a variadic parameter takes, as one array of its type: each element made a
/// value of the element type as `convert_arguments` makes arguments, the whole cast to the
/// array type (`convert_arguments` leaves it as it is).
fn variadic_array(
    routine: &str,
    position: usize,
    element: &DataType,
    elements: Vec<Expr>,
) -> SqlResult<Expr> {
    let target = sql_type(element)?;
    let elem = elements
        .into_iter()
        .map(|e| match apparent_type(&e) {
            // Known types were checked to convert implicitly.
            Apparent::Unknown | Apparent::Known(_) => cast(e, target.clone()),
            Apparent::Opaque => argument::checked(e, target.clone(), routine, position),
        })
        .collect();
    let array = Expr::Array(ast::Array { elem, named: true });
    Ok(cast(
        array,
        sql_type(&DataType::Array(Box::new(element.clone())))?,
    ))
}

/// The call's arguments in declared order, each made a value of its parameter's type: string
/// literals and NULL are read as that type, as PostgreSQL reads `unknown`; other expressions
/// go through `shoal_routine_arg`, which refuses at planning a type that does not convert
/// implicitly. Missing arguments take their defaults.
fn convert_arguments(
    routine: &RoutineDef,
    slots: Vec<Option<Expr>>,
    variadic: VariadicSlot,
) -> SqlResult<Vec<Expr>> {
    let inputs: Vec<_> = routine
        .args
        .iter()
        .filter(|a| a.mode != ArgMode::Out)
        .collect();
    let mut out = Vec::new();
    let count = slots.len();
    for (position, (slot, a)) in slots.into_iter().zip(inputs).enumerate() {
        if position + 1 == count {
            match variadic {
                VariadicSlot::None => {}
                VariadicSlot::Packed => {
                    out.push(slot.expect("the variadic array"));
                    continue;
                }
                // `VARIADIC array` is cast to the parameter's type: an array's type is not
                // always what its text shows (DataFusion types `ARRAY[1, 2]` as bigint[],
                // PostgreSQL as int[]); other types were refused when matching.
                VariadicSlot::Spread => {
                    let e = slot.expect("the VARIADIC argument");
                    out.push(cast(e, sql_type(&a.data_type)?));
                    continue;
                }
            }
        }
        let target = sql_type(&a.data_type)?;
        let e = match slot {
            Some(e) => e,
            None => {
                let text = a.default_sql.as_deref().expect("checked: has a default");
                parse_expr(text)?
            }
        };
        let converted = match apparent_type(&e) {
            Apparent::Unknown => cast(e, target),
            Apparent::Known(t) if t == a.data_type => Expr::Nested(Box::new(e)),
            _ => argument::checked(e, target, &routine.name, position + 1),
        };
        out.push(converted);
    }
    Ok(out)
}

pub fn cast(e: Expr, data_type: ast::DataType) -> Expr {
    Expr::Cast {
        kind: ast::CastKind::Cast,
        expr: Box::new(e),
        data_type,
        array: false,
        format: None,
    }
}

pub fn parse_expr(text: &str) -> SqlResult<Expr> {
    Parser::new(&PostgreSqlDialect {})
        .try_with_sql(text)
        .and_then(|mut p| p.parse_expr())
        .map_err(|e| SqlError::syntax(e.to_string()))
}

/// The SQL type name of a storage type, for the casts calls are rewritten with.
pub fn sql_type(t: &DataType) -> SqlResult<ast::DataType> {
    let name = match t {
        DataType::Enum(e) => crate::query::functions::quote_ident_if_needed(&e.name),
        other => crate::types::format_type(other),
    };
    Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&name)
        .and_then(|mut p| p.parse_data_type())
        .map_err(|e| SqlError::internal(format!("type name {name} does not parse: {e}")))
}

/// Refuses a call of `def` unless the role acting in `scope` may execute it: EXECUTE, which
/// PUBLIC holds until it is revoked, as in PostgreSQL.
pub fn check_execute(scope: &crate::query::scope::PlanScope, def: &RoutineDef) -> SqlResult<()> {
    use shoal_storage::catalog_privileges::{ObjectClass, Privileges};
    let catalog = scope.engine.catalog.read();
    let Some(role) = catalog.role_named(&scope.current_role()).map(|r| r.oid) else {
        // The statement's own privilege check reports a role that is gone.
        return Ok(());
    };
    let held = catalog.privileges_of(role, (ObjectClass::Function, def.oid), None);
    if held.contains(Privileges::EXECUTE) {
        return Ok(());
    }
    Err(SqlError::new(
        code::INSUFFICIENT_PRIVILEGE,
        format!(
            "permission denied for {} {}",
            define::routine_word(def),
            def.name
        ),
    ))
}

/// What a statement that names a routine by its signature (DROP, GRANT, REVOKE) finds.
pub enum Named {
    Found(Arc<RoutineDef>),
    /// None matches. The error, for the statements that do not skip a missing routine.
    Missing(SqlError),
}

/// The routine of `kind` named `name` (schema-qualified, else found on `search_path`): with
/// `types` (the argument list as written, OUT arguments left out), the one whose input types
/// are those; without, the only routine of that name. As PostgreSQL's
/// `LookupFuncWithArgs`: a name alone that fits several routines is an error, not a miss.
pub fn find_by_signature(
    catalog: &Catalog,
    search_path: &[String],
    name: &ast::ObjectName,
    kind: RoutineKind,
    types: Option<&[DataType]>,
) -> SqlResult<Named> {
    let word = match kind {
        RoutineKind::Function => "function",
        RoutineKind::Procedure => "procedure",
    };
    let (schema, routine) = crate::ddl::split_name(name);
    let schemas = match schema {
        Some(s) => vec![s],
        None => search_path.to_vec(),
    };
    let mut candidates = schemas
        .iter()
        .flat_map(|s| catalog.routines_named(s, &routine))
        .filter(|r| r.kind == kind);
    let Some(types) = types else {
        return match (candidates.next(), candidates.next()) {
            (Some(only), None) => Ok(Named::Found(only.clone())),
            (None, _) => Ok(Named::Missing(SqlError::new(
                code::UNDEFINED_FUNCTION,
                format!("could not find a {word} named \"{routine}\""),
            ))),
            (Some(_), Some(_)) => Err(SqlError::new(
                code::AMBIGUOUS_FUNCTION,
                format!("{word} name \"{routine}\" is not unique"),
            )
            .with_hint(format!(
                "Specify the argument list to select the {word} unambiguously."
            ))),
        };
    };
    let wanted: Vec<&DataType> = types.iter().collect();
    match candidates.find(|r| r.input_types() == wanted) {
        Some(r) => Ok(Named::Found(r.clone())),
        None => {
            let names: Vec<String> = types.iter().map(crate::types::format_type).collect();
            Ok(Named::Missing(SqlError::new(
                code::UNDEFINED_FUNCTION,
                format!("{word} {routine}({}) does not exist", names.join(", ")),
            )))
        }
    }
}
