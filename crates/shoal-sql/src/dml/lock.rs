//! SELECT ... FOR UPDATE / FOR SHARE: the query runs with the locked tables' row positions
//! added to its output; each row found is then locked through the storage API (waiting, or
//! failing with NOWAIT, or skipped with SKIP LOCKED) and the rows locked are returned.
//!
//! Where this differs from PostgreSQL: a row that a concurrent commit changed is re-checked
//! against the query only when the query reads one table (PostgreSQL re-checks a join's whole
//! row too); an outer join's nullable side is refused as written, where PostgreSQL first turns
//! an outer join that the WHERE clause makes inner into an inner one; subqueries and views in
//! FROM are refused rather than locked through; and every row a scan of a locked table visits
//! gets a handle recorded, not only the rows the query returns. A constant LIMIT/OFFSET is
//! applied to the rows locked, as PostgreSQL's LockRows sits below its Limit.

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, UInt64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::common::ScalarValue;
use datafusion::execution::FunctionRegistry;
use datafusion::sql::sqlparser::ast::{self, Statement, Visit, Visitor};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};
use shoal_storage::catalog::{Oid, RelationKind};
use shoal_storage::table::{RowLockMode, RowRef, WriteOutcome};
use shoal_storage::{StorageError, Transaction};

use super::modify::{find_rows, reevaluate, Modification, Targets};
use super::{ident_name, quote_ident, resolve_store, TableStore};
use crate::error::{code, SqlError, SqlResult};
use crate::interrupt::RowWait;
use crate::query::provider::ROW_POSITION_COLUMN;
use crate::session::{columns_of_schema, Session, StatementResult};

/// SELECT ... FOR UPDATE/SHARE: find the rows, lock each locked table's row of every result
/// row (waiting, NOWAIT or SKIP LOCKED), re-check rows changed by a concurrent commit, and
/// return what was locked. The locked tables are those of the FROM clause the clauses name,
/// or all of them for a clause that names none.
pub async fn select_for_update(
    session: &mut Session,
    txn: &mut Transaction,
    mut q: ast::Query,
) -> SqlResult<StatementResult> {
    let locks = lock_clauses(std::mem::take(&mut q.locks));
    check_lockable(session, &q, &locks[0])?;
    let parameters = session
        .statement_params
        .as_ref()
        .map(|p| p.values.clone())
        .unwrap_or_default();
    let window = take_row_window(&mut q, &parameters);
    let ast::SetExpr::Select(select) = q.body.as_ref() else {
        return Err(SqlError::unsupported("FOR UPDATE on this query"));
    };
    let targets = lock_targets(select, &locks, &cte_names(&q))?;
    let mut resolved = Vec::with_capacity(targets.len());
    for target in &targets {
        let (schema, rel) = crate::ddl::split_name(&target.name);
        let relation = session.scope.resolve_relation(schema.as_deref(), &rel);
        let strength = strength_name(target.lock.mode);
        if relation.is_some_and(|(_, kind, _)| kind == RelationKind::View) {
            // PostgreSQL locks the rows of the tables under the view.
            return Err(SqlError::unsupported(format!("{strength} on a view")));
        }
        let (def, table) = match resolve_store(session, &target.name)? {
            (def, TableStore::Row(table)) => (def, table),
            // Column tables have no row locks.
            (def, TableStore::Column(_)) => {
                return Err(SqlError::unsupported(format!(
                    "{strength} on column table \"{}\"",
                    def.name
                )))
            }
        };
        let alias = target.alias.clone().unwrap_or_else(|| def.name.clone());
        resolved.push((def, table, alias));
    }
    let mut oids: Vec<Oid> = resolved.iter().map(|(def, ..)| def.oid).collect();
    oids.sort_unstable();
    oids.dedup();
    let aliases: Vec<&str> = resolved.iter().map(|(.., alias)| alias.as_str()).collect();
    let sql = with_positions(&q, &aliases)?;
    // A changed row is re-checked, and re-projected, over its newest version; that needs the
    // locked table to be the query's only table.
    let single_table = match select.from.as_slice() {
        [only] => only.joins.is_empty() && matches!(only.relation, ast::TableFactor::Table { .. }),
        _ => false,
    };
    let projection: Vec<String> = select.projection.iter().map(|i| i.to_string()).collect();
    let zone = session.settings.time_zone().clone();
    let modifications: Vec<(Modification, &Lock)> = resolved
        .iter()
        .zip(&targets)
        .map(|((def, table, alias), target)| {
            let m = Modification {
                zone: zone.clone(),
                def,
                table,
                alias,
                assignments: &[],
                row_calls: &[],
                from: &[],
                selection: select.selection.as_ref(),
                returning: if single_table { &projection } else { &[] },
            };
            (m, &target.lock)
        })
        .collect();
    // With a window, the query first asks for only the rows the window needs (an ordered index
    // read then stops there: `query::index_order`). Should one of them be skipped (SKIP LOCKED,
    // deleted or changed by a concurrent commit), the rows after it are needed too: the query
    // runs again without the limit, and the rows locked already are locked again at no cost.
    let mut limited = window.map(|w| w.offset + w.limit);
    let (batches, mut kept) = loop {
        let run_sql = match limited {
            Some(n) => format!("{sql} LIMIT {n}"),
            None => sql.clone(),
        };
        let (batches, handles) = find_rows(session, &oids, &run_sql, Targets::Statement).await?;
        // Each locked table's row handles, in the order of `modifications`.
        let handles_of: Vec<&[RowRef]> = modifications
            .iter()
            .map(|(m, _)| {
                let at = oids
                    .binary_search(&m.def.oid)
                    .expect("a locked table's oid");
                handles[at].as_slice()
            })
            .collect();
        let mut kept: Vec<Kept> = Vec::new();
        let mut skipped = false;
        'batches: for (bi, b) in batches.iter().enumerate() {
            // The locked tables' row positions, the batch's last columns.
            let positions: Vec<&UInt64Array> = b.columns()[b.num_columns() - modifications.len()..]
                .iter()
                .map(|c| c.as_any().downcast_ref().expect("position column"))
                .collect();
            'rows: for r in 0..b.num_rows() {
                let mut newest = None;
                for (((m, lock), rows), positions) in
                    modifications.iter().zip(&handles_of).zip(&positions)
                {
                    let handle = &rows[positions.value(r) as usize];
                    let Some(changed) = lock_one(
                        session,
                        txn,
                        m,
                        handle,
                        lock.mode,
                        &lock.clause,
                        single_table,
                    )
                    .await?
                    else {
                        // Skipped (SKIP LOCKED, or gone): the result row goes, and the rows of
                        // other tables it locked stay locked, as in PostgreSQL.
                        skipped = true;
                        continue 'rows;
                    };
                    newest = newest.or(changed);
                }
                kept.push(Kept {
                    batch: bi,
                    row: r,
                    newest,
                });
                if window.is_some_and(|w| kept.len() >= w.offset + w.limit) {
                    break 'batches;
                }
            }
        }
        if skipped && limited.is_some() {
            limited = None;
            continue;
        }
        break (batches, kept);
    };
    if let Some(w) = window {
        kept.drain(..w.offset.min(kept.len()));
    }
    if batches.is_empty() {
        let plan = crate::query::plan_statement(
            session.state(),
            &session.scope,
            Statement::Query(Box::new(q)),
        )
        .await?;
        let schema = plan.schema().inner().clone();
        return Ok(StatementResult::Rows {
            columns: columns_of_schema(&schema),
            batches: vec![],
            tag: "SELECT",
        });
    }
    let out = locked_rows(&batches, modifications.len(), &kept)?;
    Ok(StatementResult::Rows {
        columns: columns_of_schema(&out.schema()),
        batches: vec![out],
        tag: "SELECT",
    })
}

/// A constant LIMIT (and OFFSET) of a locking query, applied to the rows locked.
#[derive(Debug, Clone, Copy)]
struct RowWindow {
    limit: usize,
    offset: usize,
}

/// Takes a constant LIMIT/OFFSET (or FETCH FIRST) off the query, a bound parameter counting as
/// a constant: PostgreSQL locks below its Limit node, so a row a concurrent transaction deleted
/// (or changed so that it no longer qualifies), or SKIP LOCKED skipped, is passed over and the
/// next one is locked in its place: `ORDER BY id LIMIT 1 FOR UPDATE` still returns a row while
/// one is left. A limit that is not a constant stays in the query.
fn take_row_window(q: &mut ast::Query, parameters: &[ScalarValue]) -> Option<RowWindow> {
    crate::query::rewrite::fetch_to_limit(q);
    let count = |e: &ast::Expr| match e {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => n.parse::<usize>().ok(),
            ast::Value::Placeholder(p) => {
                let value = parameters.get(crate::params::placeholder_index(p)?)?;
                match value.cast_to(&datafusion::arrow::datatypes::DataType::Int64) {
                    Ok(ScalarValue::Int64(Some(n))) => usize::try_from(n).ok(),
                    _ => None,
                }
            }
            _ => None,
        },
        _ => None,
    };
    let Some(ast::LimitClause::LimitOffset {
        limit: Some(limit),
        offset,
        limit_by,
    }) = &q.limit_clause
    else {
        return None;
    };
    if !limit_by.is_empty() {
        return None;
    }
    let window = RowWindow {
        limit: count(limit)?,
        offset: match offset {
            Some(o) => count(&o.value)?,
            None => 0,
        },
    };
    q.limit_clause = None;
    Some(window)
}

/// One locking clause and the lock it takes.
struct Lock {
    clause: ast::LockClause,
    mode: RowLockMode,
}

/// Clauses `rewrite_locking_syntax` appends after a clause it made stronger for the parser,
/// naming the lock the clause really asked for; `lock_clauses` takes them off.
const KEY_SHARE_MARKER: &str = "__shoal_for_key_share";
const NO_KEY_UPDATE_MARKER: &str = "__shoal_for_no_key_update";

/// `sql` (a query as the parser prints it) with the locking clauses as written: a view's
/// stored text keeps the marker clauses, which its users parse again, and shows this.
pub fn restore_locking_syntax(sql: &str) -> String {
    let mut out = sql.to_string();
    for (marker, parsed, written) in [
        (KEY_SHARE_MARKER, "FOR SHARE", "FOR KEY SHARE"),
        (NO_KEY_UPDATE_MARKER, "FOR UPDATE", "FOR NO KEY UPDATE"),
    ] {
        let tail = format!(" FOR SHARE OF {marker}");
        while let Some(at) = out.find(&tail) {
            out.replace_range(at..at + tail.len(), "");
            // The marked clause is the one right before the marker.
            if let Some(clause) = out[..at].rfind(parsed) {
                out.replace_range(clause..clause + parsed.len(), written);
            }
        }
    }
    out
}

/// The lock of a query with one locking clause that names no table or only `table_name`: the
/// lock a point SELECT on that table takes (see `fastpath`). None for anything else.
pub fn single_table_lock(
    q: &ast::Query,
    table_name: &str,
) -> Option<(RowLockMode, Option<ast::NonBlock>)> {
    let locks = lock_clauses(q.locks.clone());
    let [lock] = locks.as_slice() else {
        return None;
    };
    match &lock.clause.of {
        None => {}
        Some(of) => match of.0.as_slice() {
            [ast::ObjectNamePart::Identifier(id)] if ident_name(id) == table_name => {}
            _ => return None,
        },
    }
    Some((lock.mode, lock.clause.nonblock.clone()))
}

/// The error of a NOWAIT lock that a row's holder refuses.
pub fn lock_not_available(table_name: &str) -> SqlError {
    SqlError::new(
        code::LOCK_NOT_AVAILABLE,
        format!("could not obtain lock on row in relation \"{table_name}\""),
    )
}

/// The statement's locking clauses with their locks, the marker clauses folded in.
fn lock_clauses(clauses: Vec<ast::LockClause>) -> Vec<Lock> {
    let mut locks: Vec<Lock> = Vec::new();
    for clause in clauses {
        let marked = match clause.of.as_ref().map(|of| of.to_string()) {
            Some(of) if of == KEY_SHARE_MARKER => Some(RowLockMode::KeyShare),
            Some(of) if of == NO_KEY_UPDATE_MARKER => Some(RowLockMode::NoKeyUpdate),
            _ => None,
        };
        match (marked, locks.last_mut()) {
            (Some(mode), Some(last)) => last.mode = mode,
            _ => {
                let mode = match clause.lock_type {
                    ast::LockType::Share => RowLockMode::Share,
                    ast::LockType::Update => RowLockMode::Exclusive,
                };
                locks.push(Lock { clause, mode });
            }
        }
    }
    locks
}

/// Orders locks from the weakest to the strongest.
fn strength_rank(mode: RowLockMode) -> u8 {
    match mode {
        RowLockMode::KeyShare => 0,
        RowLockMode::Share => 1,
        RowLockMode::NoKeyUpdate => 2,
        RowLockMode::Exclusive => 3,
    }
}

/// The SQL name of a lock, for messages.
fn strength_name(mode: RowLockMode) -> &'static str {
    match mode {
        RowLockMode::KeyShare => "FOR KEY SHARE",
        RowLockMode::Share => "FOR SHARE",
        RowLockMode::NoKeyUpdate => "FOR NO KEY UPDATE",
        RowLockMode::Exclusive => "FOR UPDATE",
    }
}

/// "SELECT FOR UPDATE" and the like, for the read-only transaction error; None without a
/// locking clause.
pub fn locking_command_name(q: &ast::Query) -> Option<String> {
    let mode = lock_clauses(q.locks.clone()).first()?.mode;
    Some(format!("SELECT {}", strength_name(mode)))
}

/// A row the statement returns: row `row` of target batch `batch`, or, when the row had
/// changed, the projection of its newest version.
struct Kept {
    batch: usize,
    row: usize,
    newest: Option<Vec<ScalarValue>>,
}

/// The output columns `with_positions` adds: the locked tables' row positions.
const LOCKED_POSITION_COLUMN: &str = "__shoal_locked_row_position";

/// The query with each locked table's row position as its last output columns, in the order
/// of `aliases` (last, so that `ORDER BY 1` still means the first column the query names).
fn with_positions(q: &ast::Query, aliases: &[&str]) -> SqlResult<String> {
    let mut q = q.clone();
    if let ast::SetExpr::Select(s) = q.body.as_mut() {
        for (i, alias) in aliases.iter().enumerate() {
            let pos: ast::Expr = Parser::new(&PostgreSqlDialect {})
                .try_with_sql(&format!("{}.{}", quote_ident(alias), ROW_POSITION_COLUMN))?
                .parse_expr()?;
            // Under its own name: a `*` in the query brings the scan's position column too,
            // and an alias equal to the column's name would leave two columns of one name.
            s.projection.push(ast::SelectItem::ExprWithAlias {
                expr: pos,
                alias: ast::Ident::new(format!("{LOCKED_POSITION_COLUMN}_{i}")),
            });
        }
    }
    Ok(q.to_string())
}

/// Locks one row. Some(None): locked as found; Some(Some(values)): it had changed, and its
/// newest version (projected) still qualifies and is locked; None: skipped.
async fn lock_one(
    session: &Session,
    txn: &mut Transaction,
    m: &Modification<'_>,
    handle: &RowRef,
    mode: RowLockMode,
    lock: &ast::LockClause,
    single_table: bool,
) -> SqlResult<Option<Option<Vec<ScalarValue>>>> {
    let mut snap = session.scope.snapshot();
    let mut newest_values = None;
    let mut waiting = RowWait::default();
    loop {
        match m.table.lock_row(txn, handle, &snap, mode) {
            Ok(WriteOutcome::Done) => return Ok(Some(newest_values)),
            Ok(WriteOutcome::Changed { newest: None, .. }) => return Ok(None),
            Ok(WriteOutcome::Changed {
                newest: Some(newest),
                newest_snapshot,
            }) => {
                // READ COMMITTED, as PostgreSQL: lock the newest version if it still
                // qualifies, and return it. With joins Shoal cannot re-check the other
                // tables' conditions, so it locks the newest version and returns the row as
                // the statement's snapshot saw it.
                if single_table {
                    let Some((_, values)) = reevaluate(session, m, &newest).await? else {
                        return Ok(None);
                    };
                    newest_values = Some(values);
                }
                snap = newest_snapshot;
            }
            Err(StorageError::WouldBlock { holder }) => match lock.nonblock {
                Some(ast::NonBlock::Nowait) => return Err(lock_not_available(&m.def.name)),
                Some(ast::NonBlock::SkipLocked) => return Ok(None),
                None => waiting.wait(session, txn, handle, holder).await?,
            },
            Err(e) => return Err(e.into()),
        }
    }
}

/// The rows kept, without the row position columns (the `locked_tables` added at the end, and
/// any a `*` brought), in one batch.
fn locked_rows(
    batches: &[RecordBatch],
    locked_tables: usize,
    kept: &[Kept],
) -> SqlResult<RecordBatch> {
    let first = batches[0].schema();
    let keep_cols: Vec<usize> = (0..first.fields().len() - locked_tables)
        .filter(|i| first.field(*i).name() != ROW_POSITION_COLUMN)
        .collect();
    let schema = Arc::new(first.project(&keep_cols)?);
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(keep_cols.len());
    for (i, c) in keep_cols.iter().enumerate() {
        let field_type = schema.field(i).data_type();
        let values = kept.iter().map(|k| match &k.newest {
            Some(newest) => Ok(newest[i].clone()),
            None => ScalarValue::try_from_array(batches[k.batch].column(*c), k.row),
        });
        let values = values.collect::<Result<Vec<_>, _>>()?;
        let array = if values.is_empty() {
            datafusion::arrow::array::new_empty_array(field_type)
        } else {
            ScalarValue::iter_to_array(values)?
        };
        columns.push(if array.data_type() == field_type {
            array
        } else {
            cast(&array, field_type)?
        });
    }
    let options = RecordBatchOptions::new().with_row_count(Some(kept.len()));
    Ok(RecordBatch::try_new_with_options(
        schema, columns, &options,
    )?)
}

/// PostgreSQL's checks that a query's rows can be locked: each result row must be one row of
/// the tables read, which rules out set operations, DISTINCT, grouping and window functions.
fn check_lockable(session: &Session, q: &ast::Query, lock: &Lock) -> SqlResult<()> {
    let strength = strength_name(lock.mode);
    let not_allowed = |what: &str| {
        Err(SqlError::new(
            code::FEATURE_NOT_SUPPORTED,
            format!("{strength} is not allowed with {what}"),
        ))
    };
    let select = match q.body.as_ref() {
        ast::SetExpr::Select(select) => select,
        ast::SetExpr::SetOperation { .. } => return not_allowed("UNION/INTERSECT/EXCEPT"),
        _ => return Err(SqlError::unsupported(format!("{strength} on this query"))),
    };
    let grouped = match &select.group_by {
        ast::GroupByExpr::All(_) => true,
        ast::GroupByExpr::Expressions(exprs, _) => !exprs.is_empty(),
    };
    if select.distinct.is_some() {
        return not_allowed("DISTINCT clause");
    }
    if grouped {
        return not_allowed("GROUP BY clause");
    }
    if select.having.is_some() {
        return not_allowed("HAVING clause");
    }
    let mut calls = FunctionKinds {
        state: session.state(),
        depth: 0,
        aggregate: false,
        window: false,
    };
    let _ = select.projection.visit(&mut calls);
    if calls.aggregate {
        return not_allowed("aggregate functions");
    }
    if calls.window {
        return not_allowed("window functions");
    }
    Ok(())
}

/// Finds aggregate and window function calls of a query level (not of its subqueries).
struct FunctionKinds<'a> {
    state: &'a datafusion::execution::SessionState,
    depth: usize,
    aggregate: bool,
    window: bool,
}

impl Visitor for FunctionKinds<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, _: &ast::Query) -> ControlFlow<()> {
        self.depth += 1;
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _: &ast::Query) -> ControlFlow<()> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, e: &ast::Expr) -> ControlFlow<()> {
        if let (ast::Expr::Function(f), 0) = (e, self.depth) {
            let name = f.name.to_string().to_lowercase();
            if f.over.is_some() {
                self.window = true;
            } else if self.state.udaf(&name).is_ok() {
                self.aggregate = true;
            }
        }
        ControlFlow::Continue(())
    }
}

/// An item of the FROM clause, as a locking clause can name it.
struct FromTable {
    name: ast::ObjectName,
    alias: Option<String>,
    /// The name the query knows it by: its alias, else its own name.
    visible: String,
    /// On the nullable side of an outer join: a result row may have no row of it.
    nullable: bool,
    kind: FromKind,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum FromKind {
    /// A table (or a view) named in FROM.
    Relation,
    /// A subquery: PostgreSQL locks the tables inside it, which Shoal does not do yet.
    Subquery,
    /// A set-returning function: no rows to lock; a clause without OF passes over it.
    Function,
    /// A WITH query: as a function, in PostgreSQL's rules.
    Cte,
}

/// The names of the query's WITH queries, as FROM items refer to them.
fn cte_names(q: &ast::Query) -> Vec<String> {
    q.with.as_ref().map_or_else(Vec::new, |with| {
        with.cte_tables
            .iter()
            .map(|cte| ident_name(&cte.alias.name))
            .collect()
    })
}

/// The items of a FROM clause, in order, nested joins flattened.
fn from_tables(select: &ast::Select) -> Vec<FromTable> {
    let mut out = Vec::new();
    for t in &select.from {
        collect_join(t, false, &mut out);
    }
    out
}

fn collect_join(t: &ast::TableWithJoins, nullable: bool, out: &mut Vec<FromTable>) {
    let first = out.len();
    collect_factor(&t.relation, nullable, out);
    for j in &t.joins {
        use ast::JoinOperator as J;
        let (left_nullable, right_nullable) = match &j.join_operator {
            J::Left(_) | J::LeftOuter(_) => (false, true),
            J::Right(_) | J::RightOuter(_) => (true, false),
            J::FullOuter(_) => (true, true),
            _ => (false, false),
        };
        if left_nullable {
            for t in &mut out[first..] {
                t.nullable = true;
            }
        }
        collect_factor(&j.relation, nullable || right_nullable, out);
    }
}

fn collect_factor(f: &ast::TableFactor, nullable: bool, out: &mut Vec<FromTable>) {
    let alias_of = |alias: &Option<ast::TableAlias>| alias.as_ref().map(|a| ident_name(&a.name));
    let (name, alias, kind) = match f {
        ast::TableFactor::NestedJoin {
            table_with_joins, ..
        } => return collect_join(table_with_joins, nullable, out),
        // `generate_series(1, 3) AS g` parses as a table with arguments.
        ast::TableFactor::Table {
            name, alias, args, ..
        } => {
            let kind = match args {
                Some(_) => FromKind::Function,
                None => FromKind::Relation,
            };
            (name.clone(), alias_of(alias), kind)
        }
        ast::TableFactor::Derived { alias, .. } => (
            ast::ObjectName(Vec::new()),
            alias_of(alias),
            FromKind::Subquery,
        ),
        ast::TableFactor::Function { name, alias, .. } => {
            (name.clone(), alias_of(alias), FromKind::Function)
        }
        ast::TableFactor::TableFunction { alias, .. } | ast::TableFactor::UNNEST { alias, .. } => (
            ast::ObjectName(Vec::new()),
            alias_of(alias),
            FromKind::Function,
        ),
        _ => return,
    };
    let visible = alias.clone().unwrap_or_else(|| {
        crate::ddl::ident_of(&name.0.last().map(|p| p.to_string()).unwrap_or_default())
    });
    out.push(FromTable {
        name,
        alias,
        visible,
        nullable,
        kind,
    });
}

/// A table to lock and the lock to take on it.
struct LockTarget {
    name: ast::ObjectName,
    alias: Option<String>,
    lock: Lock,
}

/// The tables to lock, in FROM order, each with its lock (none for a FROM clause of functions
/// only, as PostgreSQL). Every `OF` name must be an item of the FROM clause and no locked table
/// may be on the nullable side of an outer join; a function cannot be named, and a subquery
/// cannot be locked yet (PostgreSQL locks the tables inside it). As
/// PostgreSQL, a table several clauses affect (those naming it and those naming no table) takes
/// the strongest of their locks, NOWAIT if any of them says so, else SKIP LOCKED if any does.
fn lock_targets(
    select: &ast::Select,
    locks: &[Lock],
    cte_names: &[String],
) -> SqlResult<Vec<LockTarget>> {
    let mut tables = from_tables(select);
    for t in &mut tables {
        if t.kind == FromKind::Relation && t.name.0.len() == 1 {
            let name = crate::ddl::ident_of(&t.name.to_string());
            if cte_names.contains(&name) {
                t.kind = FromKind::Cte;
            }
        }
    }
    // Each clause with the index of the table it names (None: every table).
    let mut named: Vec<(Option<usize>, &Lock)> = Vec::new();
    for lock in locks {
        let index = match &lock.clause.of {
            None => None,
            Some(of) => {
                let wanted = crate::ddl::ident_of(&of.to_string());
                let Some(index) = tables.iter().position(|t| t.visible == wanted) else {
                    let strength = strength_name(lock.mode);
                    return Err(SqlError::new(
                        code::UNDEFINED_TABLE,
                        format!(
                            "relation \"{wanted}\" in {strength} clause not found in FROM clause"
                        ),
                    ));
                };
                Some(index)
            }
        };
        named.push((index, lock));
    }
    let mut targets = Vec::new();
    for (index, table) in tables.into_iter().enumerate() {
        let affecting = || {
            named
                .iter()
                .filter(move |(i, _)| i.is_none_or(|i| i == index))
                .map(|(_, l)| l)
        };
        let Some(strongest) = affecting().max_by_key(|l| strength_rank(l.mode)) else {
            continue;
        };
        let strength = strength_name(strongest.mode);
        match table.kind {
            FromKind::Relation => {}
            FromKind::Function | FromKind::Cte if named.iter().all(|(i, _)| *i != Some(index)) => {
                continue
            }
            FromKind::Function | FromKind::Cte => {
                let what = match table.kind {
                    FromKind::Cte => "a WITH query",
                    _ => "a function",
                };
                return Err(SqlError::new(
                    code::FEATURE_NOT_SUPPORTED,
                    format!("{strength} cannot be applied to {what}"),
                ));
            }
            FromKind::Subquery => {
                return Err(SqlError::unsupported(format!(
                    "{strength} on a subquery in FROM"
                )))
            }
        }
        if table.nullable {
            return Err(SqlError::new(
                code::FEATURE_NOT_SUPPORTED,
                format!("{strength} cannot be applied to the nullable side of an outer join"),
            ));
        }
        let nonblocks: Vec<ast::NonBlock> = affecting().filter_map(|l| l.clause.nonblock).collect();
        let nonblock = nonblocks
            .iter()
            .find(|n| matches!(n, ast::NonBlock::Nowait))
            .or(nonblocks.first())
            .copied();
        targets.push(LockTarget {
            name: table.name,
            alias: table.alias,
            lock: Lock {
                clause: ast::LockClause {
                    nonblock,
                    ..strongest.clause.clone()
                },
                mode: strongest.mode,
            },
        });
    }
    Ok(targets)
}

/// Rewrites PostgreSQL locking clauses that the SQL parser does not know into ones it does:
/// `FOR NO KEY UPDATE` into `FOR UPDATE` and `FOR KEY SHARE` into `FOR SHARE`, each followed
/// by a marker clause naming the lock it asked for (`lock_clauses` reads it), and `FOR UPDATE
/// OF a, b NOWAIT` into one clause per table. None when there is nothing to rewrite. Called
/// only after a parse failed, so it costs nothing on the common path.
pub fn rewrite_locking_syntax(sql: &str) -> Option<String> {
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql)
        .tokenize_with_location()
        .ok()?;
    let offsets = TokenOffsets::new(sql, &tokens);
    // Indexes (into `tokens`) of the tokens that are not whitespace.
    let words: Vec<usize> = (0..tokens.len())
        .filter(|i| !matches!(tokens[*i].token, Token::Whitespace(_)))
        .collect();
    let keyword = |w: usize| match words.get(w).map(|i| &tokens[*i].token) {
        Some(Token::Word(word)) => word.keyword,
        _ => Keyword::NoKeyword,
    };
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    let mut w = 0;
    while w < words.len() {
        if keyword(w) != Keyword::FOR {
            w += 1;
            continue;
        }
        let start = offsets.start(words[w]);
        let (strength, marker, mut next) = match (keyword(w + 1), keyword(w + 2), keyword(w + 3)) {
            (Keyword::NO, Keyword::KEY, Keyword::UPDATE) => {
                ("UPDATE", Some(NO_KEY_UPDATE_MARKER), w + 4)
            }
            (Keyword::KEY, Keyword::SHARE, _) => ("SHARE", Some(KEY_SHARE_MARKER), w + 3),
            (Keyword::UPDATE, _, _) => ("UPDATE", None, w + 2),
            (Keyword::SHARE, _, _) => ("SHARE", None, w + 2),
            _ => {
                w += 1;
                continue;
            }
        };
        // OF name [, name ...]: each name is words joined by periods.
        let mut names: Vec<(usize, usize)> = Vec::new();
        if keyword(next) == Keyword::OF {
            loop {
                let first = next + 1;
                let mut last = first;
                while matches!(
                    words.get(last + 1).map(|i| &tokens[*i].token),
                    Some(Token::Period)
                ) {
                    last += 2;
                }
                if !matches!(
                    words.get(first).map(|i| &tokens[*i].token),
                    Some(Token::Word(_))
                ) {
                    break;
                }
                names.push((
                    offsets.start(words[first]),
                    offsets.end(words[last.min(words.len() - 1)]),
                ));
                next = last + 1;
                if !matches!(
                    words.get(next).map(|i| &tokens[*i].token),
                    Some(Token::Comma)
                ) {
                    break;
                }
            }
        }
        let nonblock_end = match (keyword(next), keyword(next + 1)) {
            (Keyword::NOWAIT, _) => Some(next),
            (Keyword::SKIP, Keyword::LOCKED) => Some(next + 1),
            _ => None,
        };
        let end_word = nonblock_end.unwrap_or(next.saturating_sub(1));
        let end = offsets.end(words[end_word.min(words.len() - 1)]);
        let nonblock = nonblock_end.map_or(String::new(), |last| {
            format!(
                " {}",
                &sql[offsets.start(words[next])..offsets.end(words[last])]
            )
        });
        let marker = marker.map_or(String::new(), |m| format!(" FOR SHARE OF {m}"));
        let clause = if names.is_empty() {
            format!("FOR {strength}{nonblock}{marker}")
        } else {
            let clauses: Vec<String> = names
                .iter()
                .map(|(a, b)| format!("FOR {strength} OF {}{nonblock}{marker}", &sql[*a..*b]))
                .collect();
            clauses.join(" ")
        };
        if sql[start..end] != clause {
            edits.push((start, end, clause));
        }
        w = end_word + 1;
    }
    if edits.is_empty() {
        return None;
    }
    let mut out = sql.to_string();
    for (start, end, text) in edits.into_iter().rev() {
        out.replace_range(start..end, &text);
    }
    Some(out)
}

/// Byte offsets of tokens in the text they were read from.
struct TokenOffsets {
    starts: Vec<usize>,
    len: usize,
}

impl TokenOffsets {
    fn new(sql: &str, tokens: &[TokenWithSpan]) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(sql.match_indices('\n').map(|(i, _)| i + 1));
        let starts = tokens
            .iter()
            .map(|t| {
                let line = (t.span.start.line.max(1) - 1) as usize;
                let line_start = line_starts.get(line).copied().unwrap_or(sql.len());
                let column = (t.span.start.column.max(1) - 1) as usize;
                sql[line_start..]
                    .char_indices()
                    .nth(column)
                    .map_or(sql.len(), |(i, _)| line_start + i)
            })
            .collect();
        TokenOffsets {
            starts,
            len: sql.len(),
        }
    }

    fn start(&self, token: usize) -> usize {
        self.starts[token]
    }

    /// Where the token ends: where the next token (whitespace included) starts.
    fn end(&self, token: usize) -> usize {
        self.starts.get(token + 1).copied().unwrap_or(self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The locks of a statement's clauses after the rewrite and the parse, with each clause's
    /// table.
    fn locks_of(sql: &str) -> Vec<(RowLockMode, Option<String>, bool)> {
        let rewritten = rewrite_locking_syntax(sql).unwrap_or_else(|| sql.to_string());
        let mut statements = crate::parse::parse_statements(&rewritten).expect("parses");
        let Some(Statement::Query(q)) = statements.pop() else {
            panic!("a query")
        };
        lock_clauses(q.locks)
            .into_iter()
            .map(|l| {
                let of = l.clause.of.as_ref().map(|o| o.to_string());
                (l.mode, of, l.clause.nonblock.is_some())
            })
            .collect()
    }

    #[test]
    fn a_view_shows_the_clauses_as_written() {
        for sql in [
            "SELECT 1 FROM t, u FOR NO KEY UPDATE OF t NOWAIT FOR KEY SHARE OF u FOR UPDATE",
            "SELECT 1 FROM t FOR KEY SHARE SKIP LOCKED",
            "SELECT 1 FROM t FOR SHARE",
        ] {
            let rewritten = rewrite_locking_syntax(sql).unwrap_or_else(|| sql.to_string());
            let parsed = crate::parse::parse_statements(&rewritten).expect("parses");
            assert_eq!(restore_locking_syntax(&parsed[0].to_string()), sql);
        }
    }

    /// Each table of the query's FROM clause with whether it is on an outer join's nullable
    /// side.
    fn nullable_sides(sql: &str) -> Vec<(String, bool)> {
        let mut statements = crate::parse::parse_statements(sql).expect("parses");
        let Some(Statement::Query(q)) = statements.pop() else {
            panic!("a query")
        };
        let ast::SetExpr::Select(select) = q.body.as_ref() else {
            panic!("a select")
        };
        from_tables(select)
            .into_iter()
            .map(|t| (t.visible, t.nullable))
            .collect()
    }

    #[test]
    fn outer_joins_make_their_nullable_sides_known() {
        let sides = |pairs: &[(&str, bool)]| -> Vec<(String, bool)> {
            pairs.iter().map(|(n, b)| (n.to_string(), *b)).collect()
        };
        assert_eq!(
            nullable_sides("SELECT 1 FROM a LEFT JOIN b ON true JOIN c ON true, d"),
            sides(&[("a", false), ("b", true), ("c", false), ("d", false)])
        );
        assert_eq!(
            nullable_sides("SELECT 1 FROM a JOIN b ON true RIGHT JOIN c AS x ON true"),
            sides(&[("a", true), ("b", true), ("x", false)])
        );
        assert_eq!(
            nullable_sides("SELECT 1 FROM a FULL JOIN b ON true"),
            sides(&[("a", true), ("b", true)])
        );
        assert_eq!(
            nullable_sides("SELECT 1 FROM a JOIN (b LEFT JOIN c ON true) ON true"),
            sides(&[("a", false), ("b", false), ("c", true)])
        );
        assert_eq!(
            nullable_sides("SELECT 1 FROM a LEFT JOIN (b JOIN c ON true) ON true"),
            sides(&[("a", false), ("b", true), ("c", true)])
        );
    }

    /// The error `lock_targets` gives for a query, if any.
    fn lock_targets_error(sql: &str) -> Option<String> {
        let rewritten = rewrite_locking_syntax(sql).unwrap_or_else(|| sql.to_string());
        let mut statements = crate::parse::parse_statements(&rewritten).expect("parses");
        let Some(Statement::Query(q)) = statements.pop() else {
            panic!("a query")
        };
        let ast::SetExpr::Select(select) = q.body.as_ref() else {
            panic!("a select")
        };
        lock_targets(select, &lock_clauses(q.locks.clone()), &cte_names(&q))
            .err()
            .map(|e| e.to_string())
    }

    #[test]
    fn subqueries_in_from_are_refused_rather_than_left_unlocked() {
        let refused = lock_targets_error("SELECT s.id FROM (SELECT id FROM t) s, u FOR UPDATE");
        assert!(
            refused.is_some_and(|e| e.contains("FOR UPDATE on a subquery in FROM")),
            "a clause without OF covers the subquery"
        );
        let refused = lock_targets_error("SELECT 1 FROM (SELECT 1) s FOR KEY SHARE OF s");
        assert!(refused.is_some_and(|e| e.contains("FOR KEY SHARE on a subquery in FROM")));
        assert_eq!(
            lock_targets_error("SELECT 1 FROM (SELECT 1) s, u FOR UPDATE OF u"),
            None,
            "a subquery no clause covers"
        );
    }

    #[test]
    fn each_clause_keeps_the_lock_it_asked_for() {
        use RowLockMode::*;
        assert_eq!(
            locks_of("SELECT 1 FROM t, u FOR NO KEY UPDATE OF t, u NOWAIT FOR KEY SHARE"),
            [
                (NoKeyUpdate, Some("t".into()), true),
                (NoKeyUpdate, Some("u".into()), true),
                (KeyShare, None, false),
            ]
        );
        assert_eq!(
            locks_of("SELECT 1 FROM t FOR SHARE OF t FOR UPDATE SKIP LOCKED"),
            [(Share, Some("t".into()), false), (Exclusive, None, true)]
        );
        assert_eq!(
            locks_of("SELECT 1 FROM t FOR KEY SHARE OF t SKIP LOCKED"),
            [(KeyShare, Some("t".into()), true)]
        );
    }
}
