//! Calls that run a routine's body: PL/pgSQL functions, SQL functions whose body is not one
//! query (it writes, or has several statements), procedures (CALL) and DO blocks.
//!
//! Such a call cannot become part of the calling statement's plan, as an inlined SQL function
//! does. A call whose arguments are known before the statement runs (constants, parameters of
//! an enclosing routine, other such calls) is run first, in the statement's transaction, and
//! its value put in the statement as a literal (`evaluate_calls`); in FROM it becomes a VALUES
//! list of its rows. PostgreSQL runs a VOLATILE call once per row; with arguments that do not
//! change from row to row, running it once gives the same answer for every query whose FROM
//! yields at most one row, and for SELECT lists without FROM, which is how such functions are
//! called. A call whose arguments are columns runs once per row when it is a whole select item
//! (`per_row`); elsewhere it is refused with 0A000 (see `query::rewrite`).

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{
    self, Expr, FunctionArguments, Statement, TableAlias, TableFactor, VisitMut, VisitorMut,
};
use shoal_storage::catalog_functions::{
    ArgMode, RoutineDef, RoutineKind, RoutineReturn, Volatility,
};
use shoal_storage::catalog_privileges::ObjectClass;
use shoal_storage::types::{DataType, Value};
use shoal_storage::Transaction;

use super::plpgsql::embed;
use super::plpgsql::vars::{self, Datum, Field, VarType};
use super::plpgsql::{self, Invocation, Outcome, Param, Returns};
use super::{body_statements, resolve_call, ResolvedCall};
use crate::error::{code, SqlError, SqlResult};
use crate::query::rewrite::object_name_parts;
use crate::session::{ResultColumn, Session, StatementResult};

/// Whether a call of `def` runs its body rather than being inlined.
pub fn runs_body(def: &RoutineDef) -> bool {
    // As in PostgreSQL, a function that runs as its owner or with its own settings is not
    // inlined: they would not hold inside the calling statement.
    if def.language != "sql" || def.security_definer || !def.config.is_empty() {
        return true;
    }
    if def.kind == RoutineKind::Procedure {
        return true;
    }
    match body_statements(def) {
        Ok(statements) => match statements.as_slice() {
            [Statement::Query(q)] => {
                crate::dml::cte::has_modifying_cte(q) || reads_parameters_in_from(def, q)
            }
            _ => true,
        },
        Err(_) => false,
    }
}

/// Whether the body's query reads a parameter in its FROM clause (`FROM unnest(xs)`). Inlined
/// with a column for the parameter, that would be a lateral reference DataFusion does not
/// plan, so such a body runs on its own, as a multi-statement one does.
fn reads_parameters_in_from(def: &RoutineDef, query: &ast::Query) -> bool {
    let names: Vec<String> = def
        .args
        .iter()
        .filter(|a| a.mode != ArgMode::Out)
        .filter_map(|a| a.name.clone())
        .collect();
    let is_parameter = |e: &Expr| match e {
        Expr::Value(v) => matches!(&v.value, ast::Value::Placeholder(p) if p.starts_with('$')),
        Expr::Identifier(id) => names.contains(&crate::ddl::ident(id)),
        _ => false,
    };
    let mut found = false;
    let mut from_items = Vec::new();
    collect_from(query, &mut from_items);
    for item in from_items {
        let _ = ast::visit_expressions(item, |e| {
            found |= is_parameter(e);
            ControlFlow::<()>::Continue(())
        });
    }
    found
}

/// The FROM items of `query`'s SELECTs (and of their set operations).
fn collect_from<'q>(query: &'q ast::Query, out: &mut Vec<&'q ast::TableWithJoins>) {
    fn of_set<'q>(body: &'q ast::SetExpr, out: &mut Vec<&'q ast::TableWithJoins>) {
        match body {
            ast::SetExpr::Select(select) => out.extend(select.from.iter()),
            ast::SetExpr::Query(q) => collect_from(q, out),
            ast::SetExpr::SetOperation { left, right, .. } => {
                of_set(left, out);
                of_set(right, out);
            }
            _ => {}
        }
    }
    of_set(&query.body, out);
}

/// The placeholder a call to be run stands for until its value is known.
const MARKER_PREFIX: &str = "$shoal_call_";

fn marker(n: usize) -> Expr {
    Expr::value(ast::Value::Placeholder(format!("{MARKER_PREFIX}{n}")))
}

fn marker_number(e: &Expr) -> Option<usize> {
    match e {
        Expr::Value(v) => match &v.value {
            ast::Value::Placeholder(p) => p.strip_prefix(MARKER_PREFIX)?.parse().ok(),
            _ => None,
        },
        _ => None,
    }
}

/// A call found in a statement, to be run before it.
struct PendingCall {
    call: ResolvedCall,
    /// In FROM (with the alias written there), or in an expression.
    from: Option<Option<TableAlias>>,
}

/// Runs the calls in `stmt` that run a body and whose arguments are known, and puts their
/// values in their place (see the module comment).
///
/// With `direct`, a statement that is nothing but one call of a scalar function (`SELECT
/// f($1)`, the way clients call functions) gets its result here, without planning a SELECT of
/// the value.
pub async fn evaluate_calls(
    session: &mut Session,
    txn: &mut Transaction,
    stmt: &mut Statement,
    direct: bool,
) -> SqlResult<Option<StatementResult>> {
    if session.engine.catalog.read().routines.is_empty() {
        return Ok(None);
    }
    if direct {
        if let Some(result) =
            Box::pin(super::per_row::run_select_list_calls(session, txn, stmt)).await?
        {
            return Ok(Some(result));
        }
    }
    let mut finder = Finder {
        session,
        calls: Vec::new(),
        error: None,
        parameters_known: false,
        row_calls: Vec::new(),
    };
    let _ = stmt.visit(&mut finder);
    if let Some(e) = finder.error {
        return Err(e);
    }
    let calls = finder.calls;
    if calls.is_empty() {
        return Ok(None);
    }
    let lone = match direct && calls.len() == 1 && calls[0].from.is_none() {
        true => lone_call_name(stmt),
        false => None,
    };
    let mut values: Vec<Replacement> = Vec::with_capacity(calls.len());
    for pending in calls {
        let mut args = pending.call.args.clone();
        for a in &mut args {
            put_values(a, &values)?;
        }
        let arg_values = evaluate_arguments(session, txn, &pending.call.routine, args).await?;
        let outcome = invoke(session, txn, &pending.call.routine, arg_values, false).await?;
        if let Some(name) = &lone {
            if let Some(result) = direct_result(&pending.call.routine, &outcome, name)? {
                return Ok(Some(result));
            }
        }
        let zone = session.settings.time_zone().clone();
        let replacement = match pending.from {
            None => Replacement::Expr(outcome_expr(&pending.call.routine, outcome, &zone)?),
            Some(alias) => {
                Replacement::Table(outcome_table(&pending.call.routine, outcome, alias, &zone)?)
            }
        };
        values.push(replacement);
    }
    put_values(stmt, &values)?;
    Ok(None)
}

/// The column name of a statement that is `SELECT f(...)` and nothing else (which the finder
/// has made `SELECT marker AS f`); None for any other statement.
fn lone_call_name(stmt: &Statement) -> Option<Arc<str>> {
    let Statement::Query(q) = stmt else {
        return None;
    };
    let ast::SetExpr::Select(select) = q.body.as_ref() else {
        return None;
    };
    let [ast::SelectItem::ExprWithAlias { expr, alias }] = select.projection.as_slice() else {
        return None;
    };
    if marker_number(expr) != Some(0) {
        return None;
    }
    // Anything else in the statement (FROM, WHERE, LIMIT, ...) shows in its text.
    let bare = format!("SELECT {expr} AS {alias}");
    (stmt.to_string() == bare).then(|| Arc::from(alias.value.as_str()))
}

/// The one-row result of a lone call of a scalar function, when its value already has the
/// declared type (else the SELECT casts it the ordinary way).
fn direct_result(
    def: &RoutineDef,
    outcome: &Outcome,
    name: &Arc<str>,
) -> SqlResult<Option<StatementResult>> {
    let RoutineReturn::Scalar(t) = &def.returns else {
        return Ok(None);
    };
    let value = match outcome {
        Outcome::Value(Datum::Scalar(from, v)) if from == t || v.is_null() => v.clone(),
        Outcome::Value(Datum::Unassigned) => Value::Null,
        _ => return Ok(None),
    };
    let (type_oid, _) = crate::types::pg_type_of(t);
    let shape = crate::fastpath::SelectShape::new(
        vec![ResultColumn::computed(name.clone(), type_oid)],
        vec![t.clone()],
    );
    crate::fastpath::PointRows {
        shape: Arc::new(shape),
        rows: vec![vec![value]],
    }
    .into_result()
    .map(Some)
}

/// `stmt` with the calls that run a body replaced by NULLs of their types (in FROM, by no
/// rows of their columns): what the statement's result looks like, for Describe at Parse,
/// without running anything. None when it has no such call.
pub fn describable(session: &Session, stmt: &Statement) -> SqlResult<Option<Statement>> {
    if session.engine.catalog.read().routines.is_empty() {
        return Ok(None);
    }
    let mut stmt = stmt.clone();
    let mut finder = Finder {
        session,
        calls: Vec::new(),
        error: None,
        parameters_known: true,
        row_calls: Vec::new(),
    };
    let _ = stmt.visit(&mut finder);
    if let Some(e) = finder.error {
        return Err(e);
    }
    if finder.calls.is_empty() {
        return Ok(None);
    }
    let zone = session.settings.time_zone().clone();
    let mut values = Vec::with_capacity(finder.calls.len());
    for pending in finder.calls {
        let def = &pending.call.routine;
        let nothing = match &def.returns {
            RoutineReturn::Scalar(t) => Outcome::Value(Datum::null(t)),
            RoutineReturn::Void => Outcome::None,
            _ => Outcome::Rows(Vec::new()),
        };
        // The arguments stay, cast to their parameters' types, so that a parameter of the
        // prepared statement among them is described with its type.
        let typed_args: Vec<Expr> = pending
            .call
            .args
            .iter()
            .map(|a| super::argument::unchecked(a.clone()))
            .collect();
        values.push(match pending.from {
            None => Replacement::Expr(keeping_arguments(
                outcome_expr(def, nothing, &zone)?,
                typed_args,
            )),
            Some(alias) => {
                Replacement::Table(outcome_table(def, Outcome::Rows(Vec::new()), alias, &zone)?)
            }
        });
    }
    put_values(&mut stmt, &values)?;
    Ok(Some(stmt))
}

/// `stmt` with each call of a user's function given its arguments converted to the
/// parameters' types (`CAST($1 AS integer)` for a bare parameter): where Describe finds the
/// types of a prepared statement's parameters that are a routine's arguments. None when it
/// calls no user function. Never run.
pub fn typed_parameters(session: &Session, stmt: &Statement) -> Option<Statement> {
    if session.engine.catalog.read().routines.is_empty() {
        return None;
    }
    struct Typer<'a> {
        session: &'a Session,
        schemas: Vec<String>,
        changed: bool,
    }
    impl Typer<'_> {
        fn convert(&mut self, name: &ast::ObjectName, args: &mut Vec<ast::FunctionArg>) {
            let catalog = self.session.engine.catalog.read();
            let parts = object_name_parts(name);
            if let Ok(Some(call)) = resolve_call(&catalog, &self.schemas, &parts, args) {
                *args = call
                    .args
                    .into_iter()
                    .map(|a| ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(a)))
                    .collect();
                self.changed = true;
            }
        }
    }
    impl VisitorMut for Typer<'_> {
        type Break = ();
        fn pre_visit_table_factor(&mut self, t: &mut TableFactor) -> ControlFlow<()> {
            if let TableFactor::Table {
                name,
                args: Some(args),
                ..
            } = t
            {
                self.convert(name, &mut args.args);
            }
            ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
            if let Expr::Function(f) = e {
                if let FunctionArguments::List(list) = &mut f.args {
                    self.convert(&f.name, &mut list.args);
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut stmt = stmt.clone();
    let mut typer = Typer {
        session,
        schemas: session.scope.lookup_schemas(),
        changed: false,
    };
    let _ = stmt.visit(&mut typer);
    typer.changed.then_some(stmt)
}

/// `value`, in an expression that also reads `args` (`CASE WHEN a IS NULL OR ... THEN value
/// ELSE value END`).
fn keeping_arguments(value: Expr, args: Vec<Expr>) -> Expr {
    let Some(condition) = args
        .into_iter()
        .map(|a| Expr::IsNull(Box::new(a)))
        .reduce(|l, r| Expr::BinaryOp {
            left: Box::new(l),
            op: ast::BinaryOperator::Or,
            right: Box::new(r),
        })
    else {
        return value;
    };
    Expr::Case {
        case_token: ast::helpers::attached_token::AttachedToken::empty(),
        end_token: ast::helpers::attached_token::AttachedToken::empty(),
        operand: None,
        conditions: vec![ast::CaseWhen {
            condition,
            result: value.clone(),
        }],
        else_result: Some(Box::new(value)),
    }
}

enum Replacement {
    Expr(Expr),
    Table(TableFactor),
}

/// Finds the calls to run, innermost first, and leaves a marker in their place.
struct Finder<'a> {
    session: &'a Session,
    calls: Vec<PendingCall>,
    error: Option<SqlError>,
    /// Parameters of a prepared statement count as known (Describe at Parse: they will be
    /// by Execute), and so do columns: calls that will run per row (`per_row`) are taken too.
    parameters_known: bool,
    /// The addresses of the calls that are whole SET values of an UPDATE and VOLATILE: the
    /// UPDATE runs them for each row (`per_row::RowCall`), so they are left in place.
    row_calls: Vec<usize>,
}

impl Finder<'_> {
    /// `resolve` for a function call expression; None for a call with a subquery argument.
    fn resolve_function(&self, f: &ast::Function) -> SqlResult<Option<ResolvedCall>> {
        let args = match &f.args {
            FunctionArguments::List(list) => list.args.clone(),
            FunctionArguments::None => vec![],
            FunctionArguments::Subquery(_) => return Ok(None),
        };
        self.resolve(&f.name, &args)
    }

    fn resolve(
        &self,
        name: &ast::ObjectName,
        args: &[ast::FunctionArg],
    ) -> SqlResult<Option<ResolvedCall>> {
        let catalog = self.session.engine.catalog.read();
        let call = resolve_call(
            &catalog,
            &self.session.scope.lookup_schemas(),
            &object_name_parts(name),
            args,
        )?;
        let known = self.parameters_known;
        Ok(call.filter(|c| {
            runs_body(&c.routine) && (known || !c.args.iter().any(|a| varies(a, known)))
        }))
    }
}

impl Finder<'_> {
    /// The name of a VOLATILE function in `items` whose call runs a body.
    fn volatile_call(&self, items: &[ast::SelectItem]) -> Option<String> {
        let mut found = None;
        for item in items {
            let _ = ast::visit_expressions(item, |e| {
                if let Expr::Function(f) = e {
                    if let Ok(Some(call)) = self.resolve_function(f) {
                        if call.routine.volatility == Volatility::Volatile {
                            found = Some(call.routine.name.clone());
                            return ControlFlow::Break(());
                        }
                    }
                }
                ControlFlow::Continue(())
            });
        }
        found
    }
}

/// The call a SET value is, under parentheses and one cast (as `per_row::RowCall` takes it);
/// else the value itself.
fn called(value: &Expr) -> &Expr {
    let mut e = value;
    let mut cast = false;
    loop {
        match e {
            Expr::Nested(inner) => e = inner,
            Expr::Cast { expr, .. } if !cast => {
                cast = true;
                e = expr;
            }
            _ => return e,
        }
    }
}

/// Whether an argument's value is known only row by row (it reads a column), or only when
/// the statement is executed (a parameter of a prepared statement).
fn varies(e: &Expr, parameters_known: bool) -> bool {
    if super::per_row::reads_rows(e) {
        return true;
    }
    let mut found = false;
    let _ = ast::visit_expressions(e, |x| {
        match x {
            Expr::Value(v) if !parameters_known => {
                if matches!(v.value, ast::Value::Placeholder(_)) && marker_number(x).is_none() {
                    found = true;
                }
            }
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
    found
}

impl VisitorMut for Finder<'_> {
    type Break = ();

    fn pre_visit_statement(&mut self, stmt: &mut Statement) -> ControlFlow<()> {
        let Statement::Update(update) = stmt else {
            return ControlFlow::Continue(());
        };
        if self.parameters_known {
            return ControlFlow::Continue(());
        }
        for a in &update.assignments {
            let value = called(&a.value);
            let Expr::Function(f) = value else {
                continue;
            };
            if let Ok(Some(call)) = self.resolve_function(f) {
                if call.routine.volatility == Volatility::Volatile {
                    self.row_calls.push(value as *const Expr as usize);
                }
            }
        }
        // Elsewhere in a SET value, a VOLATILE call would run once for all rows.
        for a in &update.assignments {
            let whole = self
                .row_calls
                .iter()
                .any(|&at| std::ptr::eq(called(&a.value), at as *const Expr));
            if whole {
                continue;
            }
            if let Some(name) = self.volatile_call(std::slice::from_ref(
                &ast::SelectItem::UnnamedExpr(a.value.clone()),
            )) {
                self.error = Some(SqlError::unsupported(format!(
                    "calling the VOLATILE function {name}() inside a SET expression (SET c = {name}(...) is run for each row)"
                )));
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }

    /// A select item that is just such a call keeps the function's name as its column's, as
    /// PostgreSQL names it, when the call becomes a literal.
    fn pre_visit_query(&mut self, query: &mut ast::Query) -> ControlFlow<()> {
        let ast::SetExpr::Select(select) = query.body.as_mut() else {
            return ControlFlow::Continue(());
        };
        // A VOLATILE call over a FROM runs once for each row (see `per_row`), never once for
        // all of them.
        if !self.parameters_known && !select.from.is_empty() {
            if let Some(name) = self.volatile_call(&select.projection) {
                self.error = Some(SqlError::unsupported(format!(
                    "calling the VOLATILE function {name}() for each row other than as a whole \
                     item of a query's select list (SELECT f() FROM t)"
                )));
                return ControlFlow::Break(());
            }
        }
        for item in &mut select.projection {
            let ast::SelectItem::UnnamedExpr(whole) = item else {
                continue;
            };
            // Under casts too: PostgreSQL names `f(x)::text` after f.
            let mut e = &*whole;
            while let Expr::Cast { expr, .. } | Expr::Nested(expr) = e {
                e = expr;
            }
            let Expr::Function(f) = e else {
                continue;
            };
            if let Ok(Some(call)) = self.resolve_function(f) {
                let alias = ast::Ident::new(call.routine.name.clone());
                let expr = whole.clone();
                *item = ast::SelectItem::ExprWithAlias { expr, alias };
            }
        }
        ControlFlow::Continue(())
    }

    fn post_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        let TableFactor::Table {
            name,
            args: Some(args),
            alias,
            ..
        } = factor
        else {
            return ControlFlow::Continue(());
        };
        match self.resolve(name, &args.args) {
            Ok(Some(call)) => {
                let n = self.calls.len();
                self.calls.push(PendingCall {
                    call,
                    from: Some(alias.clone()),
                });
                // A stand-in that the evaluated rows replace.
                *factor = TableFactor::Table {
                    name: ast::ObjectName::from(vec![ast::Ident::new(format!(
                        "{MARKER_PREFIX}{n}"
                    ))]),
                    alias: None,
                    args: None,
                    with_hints: vec![],
                    version: None,
                    with_ordinality: false,
                    partitions: vec![],
                    json_path: None,
                    sample: None,
                    index_hints: vec![],
                };
                ControlFlow::Continue(())
            }
            Ok(None) => ControlFlow::Continue(()),
            Err(e) => {
                self.error = Some(e);
                ControlFlow::Break(())
            }
        }
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if self.row_calls.contains(&(expr as *const Expr as usize)) {
            return ControlFlow::Continue(());
        }
        let Expr::Function(f) = expr else {
            return ControlFlow::Continue(());
        };
        if f.over.is_some() || f.filter.is_some() {
            return ControlFlow::Continue(());
        }
        match self.resolve_function(f) {
            Ok(Some(call)) => {
                let n = self.calls.len();
                self.calls.push(PendingCall { call, from: None });
                *expr = marker(n);
                ControlFlow::Continue(())
            }
            Ok(None) => ControlFlow::Continue(()),
            Err(e) => {
                self.error = Some(e);
                ControlFlow::Break(())
            }
        }
    }
}

/// Puts evaluated calls where their markers are.
fn put_values<T: VisitMut>(node: &mut T, values: &[Replacement]) -> SqlResult<()> {
    struct Put<'a> {
        values: &'a [Replacement],
    }
    impl VisitorMut for Put<'_> {
        type Break = ();
        fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
            if let Some(n) = marker_number(e) {
                if let Some(Replacement::Expr(v)) = self.values.get(n) {
                    *e = Expr::Nested(Box::new(v.clone()));
                }
            }
            ControlFlow::Continue(())
        }
        fn post_visit_table_factor(&mut self, t: &mut TableFactor) -> ControlFlow<()> {
            if let TableFactor::Table {
                name, args: None, ..
            } = t
            {
                let n = object_name_parts(name).last().and_then(|s| {
                    s.strip_prefix(MARKER_PREFIX)
                        .and_then(|n| n.parse::<usize>().ok())
                });
                if let Some(Replacement::Table(v)) = n.and_then(|n| self.values.get(n)) {
                    *t = v.clone();
                }
            }
            ControlFlow::Continue(())
        }
    }
    let _ = node.visit(&mut Put { values });
    Ok(())
}

/// The arguments' values, each of its parameter's type.
async fn evaluate_arguments(
    session: &mut Session,
    txn: &mut Transaction,
    def: &RoutineDef,
    args: Vec<Expr>,
) -> SqlResult<Vec<Datum>> {
    let types: Vec<DataType> = def
        .args
        .iter()
        .filter(|a| a.mode != ArgMode::Out)
        .map(|a| a.data_type.clone())
        .collect();
    if args.is_empty() {
        return Ok(Vec::new());
    }
    let args: Vec<Expr> = args.into_iter().map(super::argument::unchecked).collect();
    let zone = session.settings.time_zone().clone();
    if let Some(values) = constant_arguments(&args, &types, &zone) {
        return Ok(values);
    }
    let items: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let sql = format!("SELECT {}", items.join(", "));
    let stmt = crate::parse::parse_statements(&sql)
        .map_err(|e| SqlError::internal(format!("call arguments do not parse: {e}")))?
        .pop()
        .ok_or_else(|| SqlError::internal("call arguments gave no statement"))?;
    let result = session.run_embedded(txn, stmt).await?;
    let row = vars::rows_of(&result.batches)?
        .pop()
        .ok_or_else(|| SqlError::internal("call arguments gave no row"))?;
    Ok(row
        .into_iter()
        .zip(types)
        .map(|(f, t)| Datum::Scalar(t, f.value))
        .collect())
}

/// The arguments' values without running a query, when each is a constant (as a client's
/// bound parameters are once in the statement) read by its parameter type's input function
/// exactly as the cast would read it; None when any is not.
fn constant_arguments(
    args: &[Expr],
    types: &[DataType],
    zone: &crate::timezone::TimeZone,
) -> Option<Vec<Datum>> {
    if args.len() != types.len() {
        return None;
    }
    let mut values = Vec::with_capacity(args.len());
    for (arg, t) in args.iter().zip(types) {
        // `unchecked` casts each argument to its parameter's type; a bound parameter comes
        // as a cast to the type the client declared. The casts in between are kept to check.
        let mut e = arg;
        let mut between = Vec::new();
        let mut outermost = true;
        loop {
            match e {
                Expr::Nested(inner) => e = inner,
                Expr::Cast {
                    expr, data_type, ..
                } => {
                    if !outermost {
                        between.push(crate::types::from_sql_type(data_type).ok()?);
                    }
                    outermost = false;
                    e = expr;
                }
                _ => break,
            }
        }
        let (text, negative) = match e {
            Expr::Value(v) => (&v.value, false),
            Expr::UnaryOp {
                op: ast::UnaryOperator::Minus,
                expr,
            } => match expr.as_ref() {
                Expr::Value(v) => (&v.value, true),
                _ => return None,
            },
            _ => return None,
        };
        let value = match (text, t) {
            (ast::Value::Null, _) if !negative => Value::Null,
            (ast::Value::Boolean(b), DataType::Bool) if !negative => Value::Bool(*b),
            // An integer constant into an integer or numeric parameter; one with a point or
            // an exponent would be rounded by the cast: SQL's.
            (
                ast::Value::Number(n, _),
                DataType::Int16 | DataType::Int32 | DataType::Int64 | DataType::Numeric { .. },
            ) if n.bytes().all(|b| b.is_ascii_digit()) => {
                let text = if negative { format!("-{n}") } else { n.clone() };
                // Each integer cast on the way must hold the value too.
                for b in &between {
                    let integral = matches!(
                        b,
                        DataType::Int16
                            | DataType::Int32
                            | DataType::Int64
                            | DataType::Numeric { .. }
                    );
                    if !integral || crate::pgtext::parse_value(&text, b, zone).is_err() {
                        return None;
                    }
                }
                crate::pgtext::parse_value(&text, t, zone).ok()?
            }
            // A string is read by the type's input function, as the cast of an untyped
            // literal reads it (a time with a zone reads the session's), through text or
            // the parameter's own type (a bound parameter comes as `CAST('5' AS INTEGER)`),
            // or an integer through integer types that each hold it.
            (ast::Value::SingleQuotedString(s), _) if !negative => {
                let integral =
                    |t: &DataType| matches!(t, DataType::Int16 | DataType::Int32 | DataType::Int64);
                let integer_text = {
                    let digits = s.strip_prefix('-').unwrap_or(s);
                    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
                };
                for b in &between {
                    match b {
                        DataType::Text | DataType::Varchar(None) => {}
                        b if b == t => {}
                        b if integral(b)
                            && integer_text
                            && (integral(t) || matches!(t, DataType::Numeric { .. })) =>
                        {
                            crate::pgtext::parse_value(s, b, zone).ok()?;
                        }
                        _ => return None,
                    }
                }
                crate::pgtext::parse_value(s, t, zone).ok()?
            }
            _ => return None,
        };
        values.push(Datum::Scalar(t.clone(), value));
    }
    Some(values)
}

/// What a routine returns, as the interpreter shapes it.
fn returns_of(def: &RoutineDef) -> Returns {
    match &def.returns {
        RoutineReturn::Void => Returns::Void,
        RoutineReturn::Scalar(t) => Returns::Scalar(t.clone()),
        RoutineReturn::SetOf(t) => Returns::Rows(vec![(def.name.clone(), t.clone())]),
        RoutineReturn::Table(cols) => Returns::Rows(cols.clone()),
        RoutineReturn::Record(cols) => Returns::OutRow(cols.clone()),
        RoutineReturn::Trigger => Returns::Trigger,
    }
}

/// Runs a routine's body with these argument values (IN and INOUT ones, in order).
pub async fn invoke(
    session: &mut Session,
    txn: &mut Transaction,
    def: &Arc<RoutineDef>,
    args: Vec<Datum>,
    transaction_control: bool,
) -> SqlResult<Outcome> {
    super::check_execute(&session.scope, def)?;
    let returns = returns_of(def);
    if def.strict && args.iter().any(Datum::is_null) {
        return Ok(match returns {
            Returns::Rows(_) => Outcome::Rows(Vec::new()),
            Returns::Void => Outcome::None,
            Returns::Scalar(t) => Outcome::Value(Datum::null(&t)),
            _ => Outcome::Value(Datum::Unassigned),
        });
    }
    let saved = apply_settings(session, def)?;
    let result = match def.language.as_str() {
        "plpgsql" => {
            let body = session.routine_cache.body(&def).map_err(|e| {
                SqlError::syntax(format!(
                    "{} in the body of function \"{}\"",
                    e.message, def.name
                ))
            })?;
            let mut given = args.into_iter();
            let mut params: Vec<Param> = def
                .args
                .iter()
                .map(|a| {
                    let value = match a.mode {
                        ArgMode::Out => Datum::null(&a.data_type),
                        _ => given.next().unwrap_or_else(|| Datum::null(&a.data_type)),
                    };
                    Param {
                        name: a.name.clone(),
                        var_type: VarType::Scalar(a.data_type.clone()),
                        value,
                        output: matches!(a.mode, ArgMode::Out | ArgMode::InOut),
                    }
                })
                .collect();
            // RETURNS TABLE's columns are output variables, as OUT parameters are.
            if let RoutineReturn::Table(cols) = &def.returns {
                params.extend(cols.iter().map(|(name, t)| Param {
                    name: Some(name.clone()),
                    var_type: VarType::Scalar(t.clone()),
                    value: Datum::null(t),
                    output: true,
                }));
            }
            let label = format!(
                "{}({})",
                def.name,
                super::describe::identity_types(def, ",")
            );
            plpgsql::run(
                session,
                txn,
                Invocation {
                    name: &def.name,
                    context: &label,
                    body: &body,
                    params,
                    returns,
                    specials: Vec::new(),
                    transaction_control,
                },
            )
            .await
        }
        "sql" => run_sql_body(session, txn, def, args, returns).await,
        other => Err(SqlError::unsupported(format!(
            "functions in language {other}"
        ))),
    };
    restore_settings(session, saved);
    result.map_err(|e| match (e.context.is_some(), def.language.as_str()) {
        (false, "sql") => {
            let name = def.name.clone();
            e.with_context(format!("SQL function \"{name}\""))
        }
        _ => e,
    })
}

/// A routine's `SET name = value` clauses, in force while it runs; the values they replaced.
fn apply_settings(
    session: &mut Session,
    def: &RoutineDef,
) -> SqlResult<Vec<(String, Option<String>)>> {
    let mut saved = Vec::new();
    // SECURITY DEFINER: the body runs as the routine's owner (current_user is the owner),
    // and the caller's role is back when it returns.
    if def.security_definer {
        let owner = {
            let catalog = session.engine.catalog.read();
            let oid = catalog.owner_of((ObjectClass::Function, def.oid));
            catalog.roles.get(&oid).map(|r| r.name.clone())
        };
        if let Some(owner) = owner {
            saved.push((
                "role".to_string(),
                session.settings.get("role").map(str::to_string),
            ));
            session.set_routine_setting("role", Some(&owner))?;
        }
    }
    for (name, value) in &def.config {
        saved.push((name.clone(), session.settings.get(name).map(str::to_string)));
        session.set_routine_setting(name, Some(value))?;
    }
    Ok(saved)
}

fn restore_settings(session: &mut Session, saved: Vec<(String, Option<String>)>) {
    for (name, value) in saved.into_iter().rev() {
        let _ = session.set_routine_setting(&name, value.as_deref());
    }
}

/// A SQL function's statements, with the arguments in place of the parameters; the last one
/// gives the result.
async fn run_sql_body(
    session: &mut Session,
    txn: &mut Transaction,
    def: &Arc<RoutineDef>,
    args: Vec<Datum>,
    returns: Returns,
) -> SqlResult<Outcome> {
    let zone = session.settings.time_zone().clone();
    let arg_exprs = args
        .iter()
        .map(|d| d.to_expr(&zone))
        .collect::<SqlResult<Vec<_>>>()?;
    let statements = body_statements(def)?;
    let count = statements.len();
    let mut last = None;
    for (i, mut stmt) in statements.into_iter().enumerate() {
        super::inline::substitute_parameters(&session.scope.clone(), &mut stmt, def, &arg_exprs);
        let result = session.run_embedded(txn, stmt).await?;
        if i + 1 == count {
            last = Some(result);
        }
    }
    let rows = match last {
        Some(r) => vars::rows_of(&r.batches)?,
        None => Vec::new(),
    };
    Ok(match returns {
        Returns::Void => Outcome::None,
        Returns::Scalar(t) => {
            let value = rows
                .into_iter()
                .next()
                .and_then(|r| r.into_iter().next())
                .map(|f| Datum::Scalar(f.data_type, f.value))
                .unwrap_or_else(|| Datum::null(&t));
            Outcome::Value(value)
        }
        Returns::Rows(cols) => Outcome::Rows(
            rows.into_iter()
                .map(|r| plpgsql::named_row(&cols, r.into_iter().map(|f| f.value).collect()))
                .collect(),
        ),
        Returns::OutRow(cols) => match rows.into_iter().next() {
            Some(r) => Outcome::Value(Datum::Row(plpgsql::named_row(
                &cols,
                r.into_iter().map(|f| f.value).collect(),
            ))),
            None => Outcome::Value(Datum::Unassigned),
        },
        Returns::Trigger => {
            return Err(SqlError::new(
                code::FEATURE_NOT_SUPPORTED,
                "SQL functions cannot return type trigger",
            ))
        }
    })
}

/// A call's value as an expression of the function's type.
fn outcome_expr(
    def: &RoutineDef,
    outcome: Outcome,
    zone: &crate::timezone::TimeZone,
) -> SqlResult<Expr> {
    match (outcome, &def.returns) {
        (Outcome::None, _) => Ok(super::cast(
            Expr::value(ast::Value::Null),
            ast::DataType::Text,
        )),
        (Outcome::Value(Datum::Scalar(from, v)), RoutineReturn::Scalar(t)) => {
            let lit = vars::literal(&from, &v, zone)?;
            Ok(match &from == t {
                true => lit,
                false => super::cast(lit, super::sql_type(t)?),
            })
        }
        (Outcome::Value(Datum::Unassigned), RoutineReturn::Scalar(t)) => {
            vars::literal(t, &Value::Null, zone)
        }
        (Outcome::Value(_), RoutineReturn::Record(_)) => Err(SqlError::unsupported(format!(
            "calling function {}() with OUT parameters in a select list (call it in FROM)",
            def.name
        ))),
        (Outcome::Rows(_), _) => Err(SqlError::unsupported(format!(
            "calling set-returning function {}() in a select list (call it in FROM)",
            def.name
        ))),
        _ => Err(SqlError::new(
            code::DATATYPE_MISMATCH,
            format!(
                "function {}() did not return a value of its declared type",
                def.name
            ),
        )),
    }
}

/// A call's rows as a derived table in FROM.
fn outcome_table(
    def: &RoutineDef,
    outcome: Outcome,
    alias: Option<TableAlias>,
    zone: &crate::timezone::TimeZone,
) -> SqlResult<TableFactor> {
    // A scalar function's one column is named after the alias, as in PostgreSQL (`SELECT *
    // FROM f(1) AS r` has a column r), else after the function.
    let scalar_name = alias
        .as_ref()
        .map(|a| embed::ident_name(&a.name))
        .unwrap_or_else(|| def.name.clone());
    let columns: Vec<(String, DataType)> = match &def.returns {
        RoutineReturn::Scalar(t) | RoutineReturn::SetOf(t) => vec![(scalar_name, t.clone())],
        RoutineReturn::Table(cols) | RoutineReturn::Record(cols) => cols.clone(),
        RoutineReturn::Void => vec![(scalar_name, DataType::Text)],
        RoutineReturn::Trigger => {
            return Err(SqlError::new(
                code::FEATURE_NOT_SUPPORTED,
                "trigger functions can only be called as triggers",
            ))
        }
    };
    let rows: Vec<Vec<Value>> = match outcome {
        Outcome::None => vec![vec![Value::Null]],
        Outcome::Value(Datum::Scalar(_, v)) => vec![vec![v]],
        Outcome::Value(Datum::Row(fields)) => vec![fields.into_iter().map(|f| f.value).collect()],
        Outcome::Value(Datum::Unassigned) => vec![vec![Value::Null; columns.len()]],
        Outcome::Rows(rows) => rows
            .into_iter()
            .map(|r| r.into_iter().map(|f: Field| f.value).collect())
            .collect(),
    };
    let quote = crate::query::functions::quote_ident_if_needed;
    let typed = |i: usize, v: &Value| -> SqlResult<String> {
        Ok(vars::literal(&columns[i].1, v, zone)?.to_string())
    };
    let names: Vec<String> = columns.iter().map(|(n, _)| quote(n)).collect();
    // A VALUES list keeps the rows in the order the function gave them, as PostgreSQL's
    // function scan does.
    let sql = if rows.is_empty() {
        let items = (0..columns.len())
            .map(|i| Ok(format!("{} AS {}", typed(i, &Value::Null)?, names[i])))
            .collect::<SqlResult<Vec<_>>>()?;
        format!("SELECT {} WHERE false", items.join(", "))
    } else {
        let mut tuples = Vec::with_capacity(rows.len());
        for row in &rows {
            let items = row
                .iter()
                .enumerate()
                .map(|(i, v)| typed(i, v))
                .collect::<SqlResult<Vec<_>>>()?;
            tuples.push(format!("({})", items.join(", ")));
        }
        format!(
            "SELECT * FROM (VALUES {}) AS shoal_function_rows({})",
            tuples.join(", "),
            names.join(", ")
        )
    };
    let subquery = crate::parse::parse_statements(&sql)
        .ok()
        .and_then(|mut s| match s.pop() {
            Some(Statement::Query(q)) => Some(q),
            _ => None,
        })
        .ok_or_else(|| SqlError::internal(format!("a function's rows do not parse: {sql}")))?;
    let alias = alias.unwrap_or_else(|| TableAlias {
        explicit: true,
        name: ast::Ident::new(def.name.clone()),
        columns: vec![],
        at: None,
    });
    Ok(TableFactor::Derived {
        lateral: false,
        subquery,
        alias: Some(alias),
        sample: None,
    })
}
