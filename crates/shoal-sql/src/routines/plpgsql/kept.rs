//! What PL/pgSQL keeps between calls, as PostgreSQL keeps a function's parsed body and the
//! plans of its statements for the session:
//!
//! - each routine's parsed body, until the routine is replaced;
//! - for each embedded statement's text, the statement with its variables made parameters
//!   (`$1`, `$2`, ...) and, when it is a point statement, its fast plan. A later run (in any
//!   routine) binds the variables' values and runs the plan, without parsing, substituting or
//!   planning. A maximal part of an expression that reads only variables (`b + 1`) becomes one
//!   parameter computed in place (`fast_eval`), so `SET balance = b + 1` stays a point UPDATE.
//!
//! A kept statement holds for the catalog version and settings generation it was planned under
//! (DDL, GRANT or SET re-plan it), and only while the names it read as variables are still
//! variables and the names it read as columns are not: otherwise it runs the ordinary way.
//! Values are bound only when they convert exactly to the type the plan expects (an integer
//! into a fitting integer type, or the same type); anything else runs the ordinary way too,
//! which gives PostgreSQL's answer or error.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{self, Expr, Statement, VisitMut, VisitorMut};
use shoal_plpgsql::Block;
use shoal_storage::catalog_functions::RoutineDef;
use shoal_storage::types::{DataType, Value};

use super::embed::{ident_name, resolve_name};
use super::fast_eval;
use super::vars::{Datum, Scopes};
use crate::fastpath::FastPlan;

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
    /// None when the statement is not a point statement: it runs the ordinary way.
    pub plan: Option<Arc<FastPlan>>,
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

    pub fn keep(&mut self, text: &str, kept: Arc<KeptStatement>) {
        if self.statements.len() >= KEPT_MAX {
            self.statements.clear();
        }
        self.statements.insert(text.to_string(), kept);
    }
}

impl KeptStatement {
    /// Keeps `stmt`, which has just run the ordinary way (so no name in it is ambiguous): its
    /// variables become parameters; `plan` makes the fast plan of the parameterized statement,
    /// if it has one.
    pub fn new(
        stmt: &Statement,
        scopes: &Scopes,
        catalog_version: u64,
        settings_generation: u64,
        plan: impl FnOnce(&Statement, usize) -> Option<FastPlan>,
    ) -> KeptStatement {
        let parameterized = parameterize(stmt, scopes);
        let plan = parameterized
            .as_ref()
            .and_then(|(stmt, bindings, _)| plan(stmt, bindings.len()))
            .map(Arc::new);
        let (bindings, columns_named) = match parameterized {
            Some((_, bindings, columns_named)) if plan.is_some() => (bindings, columns_named),
            _ => (Vec::new(), Vec::new()),
        };
        KeptStatement {
            catalog_version,
            settings_generation,
            bindings,
            columns_named,
            plan,
        }
    }

    /// The parameter values for a run with these variables, converted to the plan's types;
    /// None when the statement must run the ordinary way this time.
    pub fn bind(&self, scopes: &Scopes) -> Option<Vec<Value>> {
        let plan = self.plan.as_ref()?;
        // Names must mean what they meant when the statement was kept.
        for parts in &self.columns_named {
            if resolve_name(scopes, parts).ok()?.is_some() {
                return None;
            }
        }
        let mut values = Vec::with_capacity(self.bindings.len());
        for (i, binding) in self.bindings.iter().enumerate() {
            let datum = match binding {
                Binding::Var(parts) => resolve_name(scopes, parts).ok()??,
                Binding::Expr(e) => fast_eval::eval(e, scopes)?,
            };
            let Datum::Scalar(from, value) = datum else {
                return None;
            };
            values.push(convert(&from, value, plan.param_type(i)?)?);
        }
        Some(values)
    }
}

/// `value` of type `from` as a value of `to`, as an assignment converts it, when that cannot
/// fail or change the value's meaning; None leaves the statement to the ordinary path (which
/// raises the error, or converts as PostgreSQL does).
fn convert(from: &DataType, value: Value, to: &DataType) -> Option<Value> {
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

/// `stmt` with its variables (and variable-only expressions) as parameters `$1...`, what each
/// parameter takes, and the names that were not variables; None when the statement reads a
/// whole row or an unassigned record (which stay literals, the ordinary way).
fn parameterize(
    stmt: &Statement,
    scopes: &Scopes,
) -> Option<(Statement, Vec<Binding>, Vec<Vec<String>>)> {
    let mut stmt = stmt.clone();
    let mut walker = Parameterizer {
        scopes,
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

struct Parameterizer<'a> {
    scopes: &'a Scopes,
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
        {
            let e = expr.clone();
            *expr = self.parameter(Binding::Expr(e));
        }
        ControlFlow::Continue(())
    }
}
