//! What PL/pgSQL keeps between calls, as PostgreSQL keeps a function's parsed body and the
//! plans of its statements for the session:
//!
//! - each routine's parsed body, until the routine is replaced;
//! - for each embedded statement's text, the statement with its variables made parameters
//!   (`$1`, `$2`, ...) and how it runs again (`KeptRun`): a point statement on its fast plan;
//!   a query on a plan DataFusion made once (`kept_plan`), as a prepared query's; an UPDATE,
//!   DELETE or `SELECT ... FOR UPDATE` of a row table with its parameters in place, so the
//!   query that finds its rows keeps its plan (`kept_plan::generated`), as a prepared
//!   statement's does. A later run (in any routine) binds the variables' values and runs
//!   without parsing or substituting, and, on a kept plan, without planning. A maximal part of
//!   an expression that reads only variables (`b + 1`) becomes one parameter computed in place
//!   (`fast_eval`), so `SET balance = b + 1` stays a point UPDATE.
//!
//! A kept statement holds for the catalog version and settings generation it was planned under
//! (DDL, GRANT or SET re-plan it), and only while the names it read as variables are still
//! variables and the names it read as columns are not: otherwise it runs the ordinary way.
//! Values are bound only when they convert exactly to the type the plan expects (an integer
//! into a fitting integer type, or the same type); anything else runs the ordinary way too,
//! which gives PostgreSQL's answer or error. A statement planned by DataFusion is kept only
//! when its parameters are of types whose placeholders type as their literals do (numbers,
//! text, booleans, dates and timestamps) and it calls no routine (calls run before the
//! statement, see `routines::call`).

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::ast::{self, Expr, Statement, VisitMut, VisitorMut};
use shoal_plpgsql::Block;
use shoal_storage::catalog_functions::RoutineDef;
use shoal_storage::types::{DataType, Value};

use super::embed::{ident_name, resolve_name};
use super::fast_eval;
use super::vars::{Datum, Scopes};
use crate::fastpath::FastPlan;
use crate::kept_plan::generated::GeneratedPlans;
use crate::kept_plan::KeptPlan;
use crate::session::ResultColumn;

/// How many bodies and statements a session keeps before it starts over.
const KEPT_MAX: usize = 4096;

/// A session's kept bodies and statements.
#[derive(Default)]
pub struct RoutineCache {
    bodies: HashMap<u32, (String, Arc<Block>)>,
    statements: HashMap<String, Arc<KeptStatement>>,
    /// Expressions parsed, by their text (None: not simple enough for `fast_eval`).
    simple: HashMap<String, Option<Arc<Expr>>>,
    /// Embedded statements parsed, by their text, as written and as trigger functions read
    /// them (`TG_ARGV` counted from zero).
    parsed: [HashMap<String, Statement>; 2],
}

/// An embedded statement made ready to run again.
pub struct KeptStatement {
    catalog_version: u64,
    settings_generation: u64,
    /// What each parameter `$i+1` takes its value from.
    bindings: Vec<Binding>,
    /// Names the statement read as columns (not variables) when it was kept.
    columns_named: Vec<Vec<String>>,
    pub run: KeptRun,
}

/// How a kept statement runs again.
#[allow(clippy::large_enum_variant)]
pub enum KeptRun {
    /// A point statement, on its fast plan.
    Fast(Arc<FastPlan>),
    /// Planned by DataFusion with its parameters in place.
    General(General),
    /// Each run puts the variables' values into the statement and plans it.
    Ordinary,
}

/// A statement kept with its parameters in place, for DataFusion to plan.
pub struct General {
    /// The statement with `$1...` where its variables were.
    pub stmt: Statement,
    /// The parameters' types when it was kept: a run whose variables have other types (the
    /// same text in another routine) runs the ordinary way.
    pub types: Vec<DataType>,
    /// The parameters' types as planned: `types`, then the transaction's start time when
    /// `now_parameter`.
    pub arrow_types: Vec<ArrowType>,
    /// Whether the statement's `now()` calls became the last parameter: a plan keeps no
    /// Stable function (see `kept_plan`), and now() is the same for the whole transaction.
    now_parameter: bool,
    pub form: GeneralForm,
}

pub enum GeneralForm {
    /// A query, whose plan is kept as a prepared query's.
    Query(KeptQueries),
    /// An UPDATE, DELETE or `SELECT ... FOR UPDATE` of a row table, run with its parameters in
    /// place: the plans of the queries it generates are kept here.
    Targets(Arc<GeneratedPlans>),
}

/// A query's kept plans: one, or, when its LIMIT or OFFSET reads a parameter (which DataFusion
/// plans only as a constant), one for each of a few windows.
pub struct KeptQueries {
    window: bool,
    /// By the values of the window's parameters (none when not `window`).
    plans: parking_lot::Mutex<Vec<(Vec<ScalarValue>, KeptQuery)>>,
}

/// How many windows of a query keep plans; runs with others plan each time.
const WINDOWS_MAX: usize = 8;

impl KeptQueries {
    fn new(q: &ast::Query) -> KeptQueries {
        let mut window = false;
        let _ = ast::visit_expressions(&q.limit_clause, |e| {
            window |= matches!(e, Expr::Value(v) if matches!(v.value, ast::Value::Placeholder(_)));
            ControlFlow::<()>::Continue(())
        });
        KeptQueries {
            window,
            plans: parking_lot::Mutex::default(),
        }
    }

    /// The statement to plan for a run with `values`, with its window's parameters written in
    /// as their values, and the key of its plan.
    pub fn statement<'a>(
        &self,
        stmt: &'a Statement,
        values: &[ScalarValue],
    ) -> (std::borrow::Cow<'a, Statement>, Vec<ScalarValue>) {
        if !self.window {
            return (std::borrow::Cow::Borrowed(stmt), Vec::new());
        }
        let mut stmt = stmt.clone();
        let mut key = Vec::new();
        if let Statement::Query(q) = &mut stmt {
            let _ = ast::visit_expressions_mut(&mut q.limit_clause, |e| {
                if let Expr::Value(v) = e {
                    if let ast::Value::Placeholder(p) = &v.value {
                        if let Some(value) =
                            crate::params::placeholder_index(p).and_then(|i| values.get(i))
                        {
                            key.push(value.clone());
                            *e = crate::params::literal_expr(value);
                        }
                    }
                }
                ControlFlow::<()>::Continue(())
            });
        }
        (std::borrow::Cow::Owned(stmt), key)
    }

    /// The plan kept for `key`; None when there is no room for another window.
    pub fn get(&self, key: &[ScalarValue]) -> Option<KeptQuery> {
        let mut plans = self.plans.lock();
        if let Some((_, kept)) = plans.iter().find(|(k, _)| k == key) {
            return Some(kept.clone());
        }
        if plans.len() >= WINDOWS_MAX {
            return None;
        }
        plans.push((key.to_vec(), KeptQuery::Untried));
        Some(KeptQuery::Untried)
    }

    pub fn set(&self, key: &[ScalarValue], kept: KeptQuery) {
        if let Some((_, slot)) = self.plans.lock().iter_mut().find(|(k, _)| k == key) {
            *slot = kept;
        }
    }
}

#[derive(Clone)]
pub enum KeptQuery {
    /// The next run plans it and keeps the plan if it can.
    Untried,
    Plan {
        plan: Arc<KeptPlan>,
        columns: Vec<ResultColumn>,
    },
    /// It cannot be kept (see `kept_plan::keepable`): every run plans it the ordinary way.
    Never,
}

impl General {
    /// What `stmt`, with `types` of parameters, is kept as; None when it runs the ordinary way.
    /// `with_placeholders` says whether the statement may run with its placeholders in place
    /// (`Session::runs_with_placeholders`).
    pub fn new(stmt: &Statement, types: &[DataType], with_placeholders: bool) -> Option<General> {
        if !types.iter().all(types_as_its_literal) {
            return None;
        }
        let form = match stmt {
            Statement::Query(q) if q.locks.is_empty() && !crate::dml::cte::has_modifying_cte(q) => {
                GeneralForm::Query(KeptQueries::new(q))
            }
            _ if with_placeholders => GeneralForm::Targets(Arc::default()),
            _ => return None,
        };
        let mut stmt = typed_parameters(stmt, types)?;
        let now_parameter = now_as_parameter(&mut stmt, types.len() + 1);
        let mut arrow_types: Vec<ArrowType> = types.iter().map(crate::types::arrow_type).collect();
        if now_parameter {
            arrow_types.push(crate::types::arrow_type(&DataType::TimestampTz));
        }
        Some(General {
            stmt,
            types: types.to_vec(),
            arrow_types,
            now_parameter,
            form,
        })
    }
}

/// `stmt` with each parameter `$i` as `CAST($i AS type)`, as the ordinary way writes each
/// value as `CAST('...' AS type)`: the statement's types are then the same either way (an
/// untyped parameter would take its type from what it meets, `$1 + 1` a bigint's).
fn typed_parameters(stmt: &Statement, types: &[DataType]) -> Option<Statement> {
    let sql_types = types
        .iter()
        .map(|t| crate::routines::sql_type(t).ok())
        .collect::<Option<Vec<_>>>()?;
    let mut stmt = stmt.clone();
    let _ = ast::visit_expressions_mut(&mut stmt, |e| {
        if let Expr::Value(v) = e {
            if let ast::Value::Placeholder(p) = &v.value {
                let index = p.strip_prefix('$').and_then(|n| n.parse::<usize>().ok());
                if let Some(t) = index.and_then(|n| sql_types.get(n.checked_sub(1)?)) {
                    *e = crate::routines::cast(e.clone(), t.clone());
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
    Some(stmt)
}

/// Replaces each `now()` (`CURRENT_TIMESTAMP`) in `stmt` by the parameter `$number`, as a
/// timestamptz; whether there was one.
fn now_as_parameter(stmt: &mut Statement, number: usize) -> bool {
    let Ok(timestamptz) = crate::routines::sql_type(&DataType::TimestampTz) else {
        return false;
    };
    let mut found = false;
    let _ = ast::visit_expressions_mut(stmt, |e| {
        if matches!(e, Expr::Function(f) if crate::fastpath::is_now(f)) {
            let parameter = Expr::value(ast::Value::Placeholder(format!("${number}")));
            *e = crate::routines::cast(parameter, timestamptz.clone());
            found = true;
        }
        ControlFlow::<()>::Continue(())
    });
    found
}

/// Whether a parameter of type `t` plans as the literal the ordinary way puts in its place
/// (`CAST('...' AS t)`) does. A char(n), uuid, json or enum value would be a text parameter,
/// which compares and converts as text, not as its type.
fn types_as_its_literal(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Bool
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::Float32
            | DataType::Float64
            | DataType::Numeric { .. }
            | DataType::Text
            | DataType::Varchar(_)
            | DataType::Date
            | DataType::Timestamp
            | DataType::TimestampTz
    ) || matches!(t, DataType::Array(element) if types_as_its_literal(element))
}

enum Binding {
    /// A variable or a record's field.
    Var(Vec<String>),
    /// An expression of variables and constants, computed by `fast_eval`.
    Expr(Expr),
}

impl RoutineCache {
    /// The parsed body of `def`, parsed now if it is new or was replaced.
    pub fn body(&mut self, def: &RoutineDef) -> Result<Arc<Block>, shoal_plpgsql::ParseError> {
        if let Some((text, block)) = self.bodies.get(&def.oid) {
            if *text == def.body {
                return Ok(block.clone());
            }
        }
        let block = Arc::new(shoal_plpgsql::parse_body(&def.body)?);
        if self.bodies.len() >= KEPT_MAX {
            self.bodies.clear();
        }
        self.bodies
            .insert(def.oid, (def.body.clone(), block.clone()));
        Ok(block)
    }

    /// The expression `text` parsed before, if it was: Some(None) when it is not simple.
    pub fn simple(&self, text: &str) -> Option<Option<Arc<Expr>>> {
        self.simple.get(text).cloned()
    }

    pub fn keep_simple(&mut self, text: &str, parsed: Option<Arc<Expr>>) {
        if self.simple.len() >= KEPT_MAX {
            self.simple.clear();
        }
        self.simple.insert(text.to_string(), parsed);
    }

    /// The embedded statement `text` parsed before (for a trigger function: with its
    /// `TG_ARGV` subscripts made zero-based).
    pub fn parsed(&self, text: &str, in_trigger: bool) -> Option<Statement> {
        self.parsed[usize::from(in_trigger)].get(text).cloned()
    }

    pub fn keep_parsed(&mut self, text: &str, in_trigger: bool, stmt: Statement) {
        let parsed = &mut self.parsed[usize::from(in_trigger)];
        if parsed.len() >= KEPT_MAX {
            parsed.clear();
        }
        parsed.insert(text.to_string(), stmt);
    }

    /// The kept statement for `text`, if it holds under this catalog version and settings
    /// generation.
    pub fn statement(
        &self,
        text: &str,
        catalog_version: u64,
        settings_generation: u64,
    ) -> Option<Arc<KeptStatement>> {
        self.statements
            .get(text)
            .filter(|k| {
                k.catalog_version == catalog_version && k.settings_generation == settings_generation
            })
            .cloned()
    }

    /// How the statement `text` runs again, for tests: "fast", "query" or "targets" (with
    /// "+plan" once a plan is kept), or "ordinary"; None when it is not kept.
    #[cfg(test)]
    pub fn kept_form(&self, text: &str) -> Option<String> {
        let kept = self.statements.get(text)?;
        Some(match &kept.run {
            KeptRun::Fast(_) => "fast".to_string(),
            KeptRun::Ordinary => "ordinary".to_string(),
            KeptRun::General(g) => match &g.form {
                GeneralForm::Query(q) => {
                    let planned = q
                        .plans
                        .lock()
                        .iter()
                        .any(|(_, k)| matches!(k, KeptQuery::Plan { .. }));
                    format!("query{}", if planned { "+plan" } else { "" })
                }
                GeneralForm::Targets(plans) => {
                    format!("targets{}", if plans.any_kept() { "+plan" } else { "" })
                }
            },
        })
    }

    pub fn keep(&mut self, text: &str, kept: Arc<KeptStatement>) {
        if self.statements.len() >= KEPT_MAX {
            self.statements.clear();
        }
        self.statements.insert(text.to_string(), kept);
    }
}

impl KeptStatement {
    /// A statement that runs the ordinary way each time.
    pub fn ordinary(catalog_version: u64, settings_generation: u64) -> KeptStatement {
        KeptStatement {
            catalog_version,
            settings_generation,
            bindings: Vec::new(),
            columns_named: Vec::new(),
            run: KeptRun::Ordinary,
        }
    }

    /// Keeps `stmt`, which has just run the ordinary way (so no name in it is ambiguous): its
    /// variables become parameters. `fast` makes the fast plan of the statement with that many
    /// parameters, if it has one; else `general` keeps it for DataFusion with parameters of the
    /// given types. Each maximal variable-only expression is one parameter computed by
    /// `fast_eval` (for `general`, one that `fast_eval` computes now: others are left to the
    /// plan), so that `WHERE k = ids[i]` has a key the plan finds by an index.
    pub fn new(
        stmt: &Statement,
        scopes: &Scopes,
        catalog_version: u64,
        settings_generation: u64,
        fast: impl FnOnce(&Statement, usize) -> Option<FastPlan>,
        general: impl FnOnce(&Statement, &[DataType]) -> Option<General>,
    ) -> KeptStatement {
        let mut kept = KeptStatement {
            catalog_version,
            settings_generation,
            bindings: Vec::new(),
            columns_named: Vec::new(),
            run: KeptRun::Ordinary,
        };
        if let Some((s, bindings, columns_named)) = parameterize(stmt, scopes, Group::All) {
            if let Some(plan) = fast(&s, bindings.len()) {
                kept.run = KeptRun::Fast(Arc::new(plan));
                kept.bindings = bindings;
                kept.columns_named = columns_named;
                return kept;
            }
        }
        if let Some((s, bindings, columns_named)) = parameterize(stmt, scopes, Group::Computable) {
            let types = bindings
                .iter()
                .map(|b| match b {
                    Binding::Var(parts) => match resolve_name(scopes, parts) {
                        Ok(Some(Datum::Scalar(t, _))) => Some(t),
                        _ => None,
                    },
                    Binding::Expr(e) => match fast_eval::eval(e, scopes) {
                        Some(Datum::Scalar(t, _)) => Some(t),
                        _ => None,
                    },
                })
                .collect::<Option<Vec<_>>>();
            if let Some(g) = types.and_then(|types| general(&s, &types)) {
                kept.run = KeptRun::General(g);
                kept.bindings = bindings;
                kept.columns_named = columns_named;
            }
        }
        kept
    }

    /// The parameters' values for a run with these variables, with their types; None when
    /// the statement must run the ordinary way this time.
    fn values(&self, scopes: &Scopes) -> Option<Vec<(DataType, Value)>> {
        // Names must mean what they meant when the statement was kept.
        for parts in &self.columns_named {
            if resolve_name(scopes, parts).ok()?.is_some() {
                return None;
            }
        }
        let mut values = Vec::with_capacity(self.bindings.len());
        for binding in &self.bindings {
            let datum = match binding {
                Binding::Var(parts) => resolve_name(scopes, parts).ok()??,
                Binding::Expr(e) => fast_eval::eval(e, scopes)?,
            };
            let Datum::Scalar(from, value) = datum else {
                return None;
            };
            values.push((from, value));
        }
        Some(values)
    }

    /// The values for a run of `plan`, converted to the plan's types.
    pub fn bind_fast(&self, scopes: &Scopes, plan: &FastPlan) -> Option<Vec<Value>> {
        let values = self.values(scopes)?;
        values
            .into_iter()
            .enumerate()
            .map(|(i, (from, value))| convert(&from, value, plan.param_type(i)?))
            .collect()
    }

    /// The values for a run of `general`, of the types it was kept with, in a transaction
    /// that started at `now_micros`.
    pub fn bind_general(
        &self,
        scopes: &Scopes,
        general: &General,
        now_micros: i64,
    ) -> Option<Vec<ScalarValue>> {
        let values = self.values(scopes)?;
        let mut scalars = values
            .iter()
            .zip(&general.types)
            .map(|((from, value), t)| {
                (from == t).then(|| crate::types::scalar_from_value(value, t))
            })
            .collect::<Option<Vec<_>>>()?;
        if general.now_parameter {
            let now = Value::TimestampTz(now_micros);
            scalars.push(crate::types::scalar_from_value(
                &now,
                &DataType::TimestampTz,
            ));
        }
        Some(scalars)
    }
}

/// `value` of type `from` as a value of `to`, as an assignment converts it, when that cannot
/// fail or change the value's meaning; None leaves the conversion to SQL (which raises the
/// error, or converts as PostgreSQL does).
pub(super) fn convert(from: &DataType, value: Value, to: &DataType) -> Option<Value> {
    if value.is_null() || from == to {
        return Some(value);
    }
    match (&value, to) {
        // Rounded to the column's scale, as PostgreSQL rounds it; an overflow is an error.
        (
            Value::Numeric { mantissa, scale },
            DataType::Numeric {
                precision,
                scale: s,
            },
        ) => {
            let n = shoal_numeric::Numeric::from_i128(*mantissa, *scale as u16).ok()?;
            return crate::types::numeric_value(&n, *precision, *s).ok();
        }
        (
            Value::Int16(_) | Value::Int32(_) | Value::Int64(_),
            DataType::Numeric { precision, scale },
        ) => {
            let i = match value {
                Value::Int16(i) => i as i64,
                Value::Int32(i) => i as i64,
                Value::Int64(i) => i,
                _ => unreachable!("matched above"),
            };
            let n = shoal_numeric::Numeric::from_i64(i);
            return crate::types::numeric_value(&n, *precision, *scale).ok();
        }
        // Text within the length (a longer one is an error, or is cut, by PostgreSQL's rule).
        (Value::Text(s), DataType::Varchar(limit))
            if matches!(from, DataType::Text | DataType::Varchar(_)) =>
        {
            let fits = limit.is_none_or(|n| s.chars().count() <= n as usize);
            return fits.then_some(value);
        }
        (Value::Text(_), DataType::Text) if matches!(from, DataType::Varchar(_)) => {
            return Some(value)
        }
        // Blank-padded to the length; a longer one is cut only where it has blanks.
        (Value::Text(s), DataType::Char(n))
            if matches!(
                from,
                DataType::Text | DataType::Varchar(_) | DataType::Char(_)
            ) =>
        {
            return (s.chars().count() <= *n as usize)
                .then(|| Value::Text(crate::types::pad_char(s, *n)));
        }
        _ => {}
    }
    let i = match value {
        Value::Int16(i) => i as i64,
        Value::Int32(i) => i as i64,
        Value::Int64(i) => i,
        _ => return None,
    };
    match to {
        DataType::Int16 => i16::try_from(i).ok().map(Value::Int16),
        DataType::Int32 => i32::try_from(i).ok().map(Value::Int32),
        DataType::Int64 => Some(Value::Int64(i)),
        _ => None,
    }
}

/// The marker a parameter has until they are numbered: `$n` is taken by the routine's
/// positional parameters while the statement is walked.
const MARK: &str = "$shoal_kept_";

/// `stmt` with its variables and variable-only expressions (when `group` says so) as
/// parameters `$1...`, what each parameter takes, and the names that were not variables; None when the
/// statement reads a whole row or an unassigned record (which stay literals, the ordinary way).
fn parameterize(
    stmt: &Statement,
    scopes: &Scopes,
    group: Group,
) -> Option<(Statement, Vec<Binding>, Vec<Vec<String>>)> {
    let mut stmt = stmt.clone();
    let mut walker = Parameterizer {
        scopes,
        group,
        bindings: Vec::new(),
        columns_named: Vec::new(),
        keepable: true,
    };
    let _ = stmt.visit(&mut walker);
    if !walker.keepable {
        return None;
    }
    let _ = ast::visit_expressions_mut(&mut stmt, |e| {
        if let Expr::Value(v) = e {
            if let ast::Value::Placeholder(p) = &mut v.value {
                if let Some(n) = p.strip_prefix(MARK) {
                    *p = format!("${n}");
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
    Some((stmt, walker.bindings, walker.columns_named))
}

/// Which variable-only expressions become one parameter.
#[derive(Clone, Copy, PartialEq)]
enum Group {
    All,
    /// Those `fast_eval` computes with the variables' values now.
    Computable,
}

struct Parameterizer<'a> {
    scopes: &'a Scopes,
    group: Group,
    bindings: Vec<Binding>,
    columns_named: Vec<Vec<String>>,
    keepable: bool,
}

/// The name an expression is, if it is one: `x`, `a.b`, `$1`.
fn name_parts(e: &Expr) -> Option<Vec<String>> {
    match e {
        Expr::Identifier(i) => Some(vec![ident_name(i)]),
        Expr::CompoundIdentifier(ids) => Some(ids.iter().map(ident_name).collect()),
        Expr::Value(v) => match &v.value {
            ast::Value::Placeholder(p) if !p.starts_with(MARK) => Some(vec![p.clone()]),
            _ => None,
        },
        _ => None,
    }
}

impl Parameterizer<'_> {
    fn parameter(&mut self, binding: Binding) -> Expr {
        self.bindings.push(binding);
        Expr::value(ast::Value::Placeholder(format!(
            "{MARK}{}",
            self.bindings.len()
        )))
    }

    /// Whether `e` is made of scalar variables (one at least), constants and the operators
    /// `fast_eval` computes.
    fn variables_only(&self, e: &Expr) -> bool {
        let mut variables = 0;
        let only = self.leaves_are_variables(e, &mut variables);
        only && variables > 0
    }

    fn leaves_are_variables(&self, e: &Expr, variables: &mut usize) -> bool {
        match e {
            Expr::Nested(inner) | Expr::UnaryOp { expr: inner, .. } => {
                self.leaves_are_variables(inner, variables)
            }
            Expr::BinaryOp { left, right, .. } => {
                self.leaves_are_variables(left, variables)
                    && self.leaves_are_variables(right, variables)
            }
            Expr::Value(v) => matches!(
                v.value,
                ast::Value::Number(..) | ast::Value::SingleQuotedString(_)
            ),
            // An element of an array variable, `a[i]`.
            Expr::CompoundFieldAccess { root, access_chain } => match access_chain.as_slice() {
                [ast::AccessExpr::Subscript(ast::Subscript::Index { index })] => {
                    let array = name_parts(root).is_some_and(|parts| {
                        matches!(
                            resolve_name(self.scopes, &parts),
                            Ok(Some(Datum::Scalar(DataType::Array(_), _)))
                        )
                    });
                    if array {
                        *variables += 1;
                    }
                    array && self.leaves_are_variables(index, variables)
                }
                _ => false,
            },
            e => match name_parts(e) {
                Some(parts) => match resolve_name(self.scopes, &parts) {
                    Ok(Some(Datum::Scalar(..))) => {
                        *variables += 1;
                        true
                    }
                    _ => false,
                },
                None => false,
            },
        }
    }
}

impl VisitorMut for Parameterizer<'_> {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Some(parts) = name_parts(expr) {
            match resolve_name(self.scopes, &parts) {
                Ok(Some(Datum::Scalar(..))) => *expr = self.parameter(Binding::Var(parts)),
                Ok(None) => self.columns_named.push(parts),
                Ok(Some(_)) | Err(_) => {
                    self.keepable = false;
                    return ControlFlow::Break(());
                }
            }
        } else if matches!(
            expr,
            Expr::BinaryOp { .. } | Expr::UnaryOp { .. } | Expr::CompoundFieldAccess { .. }
        ) && self.variables_only(expr)
            && (self.group == Group::All || fast_eval::eval(expr, self.scopes).is_some())
        {
            let e = expr.clone();
            *expr = self.parameter(Binding::Expr(e));
        }
        ControlFlow::Continue(())
    }
}
