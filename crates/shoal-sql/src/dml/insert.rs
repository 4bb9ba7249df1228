//! INSERT: the rows to insert are computed by one generated query (VALUES with the columns'
//! defaults filled in, or the statement's SELECT), then written one by one. ON CONFLICT turns a
//! unique conflict with a live row into nothing (DO NOTHING) or an update of that row.

use std::collections::HashSet;

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::ast;
use shoal_storage::catalog::{Catalog, ConstraintKind, IndexDef, TableDef};
use shoal_storage::table::{InsertOutcome, RowLockMode, RowRef, RowTable, WriteOutcome};
use shoal_storage::types::Value;
use shoal_storage::{Snapshot, StorageError, Transaction};

use super::{
    assignment_columns, batch_rows, column_values, command_done, default_expr_sql, finish_dml,
    ident_name, is_default_keyword, resolve_store, row_as_values_sql, run_sql_query,
    unique_violation, unique_violation_named, RowCursor, TableStore,
};
use crate::constraints;
use crate::error::{code, SqlError, SqlResult};
use crate::parse::Overriding;
use crate::routines::trigger::{Transition, Triggers, WrittenRow};
use crate::session::{Session, StatementResult};
use shoal_storage::catalog_triggers::{TriggerEvent, TriggerTiming};

pub(super) fn target_columns(def: &TableDef, columns: &[ast::ObjectName]) -> SqlResult<Vec<usize>> {
    if columns.is_empty() {
        return Ok((0..def.columns.len()).collect());
    }
    let mut out = Vec::new();
    for c in columns {
        let name = crate::ddl::ident_of(
            c.0.last()
                .map(|p| p.to_string())
                .unwrap_or_default()
                .as_str(),
        );
        let idx = def.column_index(&name).ok_or_else(|| {
            SqlError::new(
                code::UNDEFINED_COLUMN,
                format!(
                    "column \"{name}\" of relation \"{}\" does not exist",
                    def.name
                ),
            )
        })?;
        if out.contains(&idx) {
            return Err(SqlError::new(
                code::DUPLICATE_COLUMN,
                format!("column \"{name}\" specified more than once"),
            ));
        }
        out.push(idx);
    }
    Ok(out)
}

/// The query that produces full rows (in table column order) for an INSERT.
fn insert_source_sql(
    def: &TableDef,
    targets: &[usize],
    source: Option<&ast::Query>,
    overriding: Option<Overriding>,
) -> SqlResult<String> {
    let n = def.columns.len();
    // Whether an explicit value is written to column `col`. PostgreSQL refuses one for a
    // GENERATED ALWAYS identity column unless OVERRIDING SYSTEM VALUE is given, and OVERRIDING
    // USER VALUE makes identity columns ignore explicit values.
    let takes_explicit = |col: usize| -> SqlResult<bool> {
        let Some(id) = &def.columns[col].identity else {
            return Ok(true);
        };
        match overriding {
            Some(Overriding::System) => Ok(true),
            Some(Overriding::User) => Ok(false),
            None if id.always => Err(SqlError::new(
                code::GENERATED_ALWAYS,
                format!(
                    "cannot insert a non-DEFAULT value into column \"{}\"",
                    def.columns[col].name
                ),
            )
            .with_detail(format!(
                "Column \"{}\" is an identity column defined as GENERATED ALWAYS.",
                def.columns[col].name
            ))
            .with_hint("Use OVERRIDING SYSTEM VALUE to override.")),
            None => Ok(true),
        }
    };
    let Some(source) = source else {
        let row: Vec<String> = (0..n).map(|c| default_expr_sql(def, c)).collect();
        return Ok(format!("VALUES ({})", row.join(", ")));
    };
    if let ast::SetExpr::Values(values) = source.body.as_ref() {
        if source.order_by.is_none() && source.limit_clause.is_none() && source.with.is_none() {
            let width = values.rows.first().map_or(0, |row| row.len());
            if values.rows.iter().any(|row| row.len() != width) {
                return Err(SqlError::syntax("VALUES lists must all be the same length"));
            }
            let mut rows = Vec::with_capacity(values.rows.len());
            for row in &values.rows {
                if row.len() != targets.len() {
                    return Err(SqlError::syntax(if row.len() > targets.len() {
                        "INSERT has more expressions than target columns"
                    } else {
                        "INSERT has more target columns than expressions"
                    }));
                }
                let mut full: Vec<String> = (0..n).map(|c| default_expr_sql(def, c)).collect();
                for (pos, col) in targets.iter().enumerate() {
                    if !is_default_keyword(&row[pos]) && takes_explicit(*col)? {
                        full[*col] = explicit_value_sql(def, *col, &row[pos]);
                    }
                }
                rows.push(format!("({})", full.join(", ")));
            }
            return Ok(format!("VALUES {}", rows.join(", ")));
        }
    }
    let src_cols: Vec<String> = (0..targets.len()).map(|i| format!("__c{i}")).collect();
    let mut select: Vec<String> = (0..n).map(|c| default_expr_sql(def, c)).collect();
    for (pos, col) in targets.iter().enumerate() {
        if takes_explicit(*col)? {
            select[*col] = format!("__src.__c{pos}");
        }
    }
    Ok(format!(
        "SELECT {} FROM ({source}) AS __src({})",
        select.join(", "),
        src_cols.join(", ")
    ))
}

/// A VALUES entry for column `col`. A string literal into an integer or array column is read
/// as that column's type, as PostgreSQL types each row's literal by its target column (VALUES rows
/// typed together would read `'x'` in a bigint column as an integer).
fn explicit_value_sql(def: &TableDef, col: usize, value: &ast::Expr) -> String {
    use shoal_storage::types::DataType;
    let t = &def.columns[col].data_type;
    let is_string = matches!(
        value,
        ast::Expr::Value(v) if matches!(v.value, ast::Value::SingleQuotedString(_))
    );
    // An array column's `'{...}'` beside `ARRAY[...]` rows: typed together they would mix
    // text and lists.
    if is_string
        && matches!(
            t,
            DataType::Int16 | DataType::Int32 | DataType::Int64 | DataType::Array(_)
        )
    {
        return format!("CAST({value} AS {})", crate::types::format_type(t));
    }
    // A numeric array's rows each as numeric[]: an ARRAY of decimal literals is typed by its
    // own digits, and rows of different scales would not make one column.
    if let DataType::Array(element) = t {
        if matches!(element.as_ref(), DataType::Numeric { .. }) {
            return format!("CAST({value} AS {})", crate::types::format_type(t));
        }
    }
    value.to_string()
}

pub async fn insert(
    session: &mut Session,
    txn: &mut Transaction,
    ins: ast::Insert,
) -> SqlResult<StatementResult> {
    let ast::TableObject::TableName(name) = &ins.table else {
        return Err(SqlError::unsupported("INSERT into a table function"));
    };
    if let Some(done) = Box::pin(super::instead::insert(session, txn, &ins)).await? {
        return Ok(done);
    }
    let (def, store) = resolve_store(session, name)?;
    let mut targets = target_columns(&def, &ins.columns)?;
    if ins.columns.is_empty() {
        // Without a column list, VALUES fills the first columns and the rest get defaults.
        if let Some(width) = values_width(ins.source.as_deref()) {
            targets.truncate(width);
        }
    }
    let on_conflict = match &ins.on {
        Some(ast::OnInsert::OnConflict(oc)) => {
            // Whether a row with the key exists decides what happens: a read of the table.
            session.scope.note_read(def.oid as u64);
            let arbiters = arbiter_indexes(session, &def, oc)?;
            let update_lock = match &oc.action {
                ast::OnConflictAction::DoUpdate(du) => update_lock(session, &def, du),
                ast::OnConflictAction::DoNothing => RowLockMode::Exclusive,
            };
            Some(OnConflict {
                clause: oc,
                arbiters,
                update_lock,
            })
        }
        Some(_) => return Err(SqlError::unsupported("ON DUPLICATE KEY UPDATE")),
        None => None,
    };
    let overriding = crate::parse::insert_overriding(&ins);
    // Boxed, as the other rare paths here: an INSERT's future stays small (debug builds run
    // statements on small stacks in tests).
    let per_row_source = Box::pin(per_row_source(session, txn, ins.source.as_deref())).await?;
    let source = per_row_source.as_ref().or(ins.source.as_deref());
    let sql = insert_source_sql(&def, &targets, source, overriding)?;
    let batches = Box::pin(source_rows(session, txn, &def, &sql)).await?;
    let zone = session.settings.time_zone().clone();
    let alias = ins
        .table_alias
        .as_ref()
        .map(|a| ident_name(&a.alias))
        .unwrap_or_else(|| def.name.clone());
    let table = match store {
        TableStore::Row(table) => table,
        TableStore::Column(table) => {
            let returning = ins.returning.as_deref();
            let (stored, rows) = match Triggers::of(&def, TriggerEvent::Insert, &[]) {
                Some(triggers) => {
                    let insert = super::column::insert_batches_with_triggers(
                        session,
                        txn,
                        &def,
                        &table,
                        &batches,
                        &zone,
                        &triggers,
                        returning.is_some(),
                    );
                    Box::pin(insert).await?
                }
                None => {
                    super::column::insert_batches(
                        session,
                        txn,
                        &def,
                        &table,
                        &batches,
                        &zone,
                        returning.is_some(),
                    )
                    .await?
                }
            };
            if returning.is_none() {
                return Ok(command_done("INSERT", stored, Some(0)));
            }
            return finish_dml(
                session,
                &def.columns,
                &alias,
                "INSERT",
                rows,
                returning,
                Some(0),
            )
            .await;
        }
    };
    let triggers = Triggers::of(&def, TriggerEvent::Insert, &[]);
    // ON CONFLICT DO UPDATE fires the UPDATE triggers too, as PostgreSQL does: the statement
    // triggers whether or not a row is updated, the row triggers for each row updated.
    let update_triggers = match on_conflict.as_ref().map(|oc| &oc.clause.action) {
        Some(ast::OnConflictAction::DoUpdate(du)) => {
            let set_columns: Vec<String> = assignment_columns(&def, &du.assignments)?
                .iter()
                .map(|(i, _)| def.columns[*i].name.clone())
                .collect();
            Triggers::of(&def, TriggerEvent::Update, &set_columns)
        }
        _ => None,
    };
    for t in [&triggers, &update_triggers].into_iter().flatten() {
        t.statement(session, txn, TriggerTiming::Before).await?;
    }
    // AFTER ROW events in the order they happened: (an update?, the row).
    let mut after_rows: Vec<(bool, WrittenRow)> = Vec::new();
    let mut target = InsertTarget {
        def: &def,
        table: &table,
        alias: &alias,
        on_conflict,
        affected: HashSet::new(),
    };
    // CHECK constraints are evaluated for all rows at once; each row still gets its checks
    // just before it is written, so errors come in the order PostgreSQL gives them.
    let total_rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let first_rejected = if total_rows > 1 && constraints::has_checks(&def) {
        let rows = batch_rows(&batches, &def, 0, &zone)?;
        constraints::first_check_failure(session, &def, &rows).await?
    } else {
        None
    };
    let returning = ins.returning.as_deref();
    // Rows are stored one at a time from the batches' columns (see `RowCursor`); only
    // RETURNING keeps them.
    let (mut count, mut written) = (0, Vec::new());
    let mut deferred = constraints::DeferredReferences::default();
    let mut row = Vec::with_capacity(def.columns.len());
    let mut i = 0;
    for batch in &batches {
        let mut cursor = RowCursor::new(batch, &def, 0, &zone)?;
        while cursor.next_into(&mut row) {
            let with_checks = total_rows == 1 || first_rejected == Some(i);
            super::yield_between_rows(i).await;
            i += 1;
            if let Some(t) = &triggers {
                match t.before_row(session, txn, None, Some(row.clone())).await? {
                    Some(changed) => row = changed,
                    None => continue,
                }
            }
            constraints::check_row_with(session, &def, &row, with_checks).await?;
            let outcome = insert_row(session, txn, &mut target, &row, update_triggers.as_ref());
            let stored = match outcome.await? {
                RowWritten::Nothing => continue,
                RowWritten::AsProposed => {
                    // After the row is in, so that it may reference itself (or, deferred,
                    // a later row).
                    deferred.check_or_defer(session, txn, &def, &row, i).await?;
                    if triggers.as_ref().is_some_and(Triggers::keeps_rows) {
                        after_rows.push((false, (None, Some(row.clone()))));
                    }
                    row.clone()
                }
                RowWritten::Updated { old, new } => {
                    if update_triggers.as_ref().is_some_and(Triggers::keeps_rows) {
                        after_rows.push((true, (Some(old), Some(new.clone()))));
                    }
                    new
                }
            };
            count += 1;
            if returning.is_some() {
                written.push(stored);
            }
        }
    }
    deferred
        .check_deferred(session, txn, &def)
        .await
        .map_err(|(_, e)| e)?;
    // The transition tables: the inserted rows for the INSERT triggers, the updated ones for
    // the UPDATE triggers of ON CONFLICT DO UPDATE.
    let transition = |triggers: &Option<Triggers>, updates: bool| -> SqlResult<_> {
        let Some(t) = triggers else { return Ok(None) };
        let rows: Vec<WrittenRow> = after_rows
            .iter()
            .filter(|(u, _)| *u == updates)
            .map(|(_, row)| row.clone())
            .collect();
        t.transition(&rows)
    };
    let inserted = transition(&triggers, false)?;
    let updated = transition(&update_triggers, true)?;
    let transitions = [inserted.as_ref(), updated.as_ref()];
    fire_after_rows(
        session,
        txn,
        &triggers,
        &update_triggers,
        after_rows,
        transitions,
    )
    .await?;
    for (t, transition) in [
        (&update_triggers, updated.as_ref()),
        (&triggers, inserted.as_ref()),
    ] {
        if let Some(t) = t {
            t.after_statement_triggers(session, txn, transition).await?;
        }
    }
    if returning.is_none() {
        return Ok(command_done("INSERT", count, Some(0)));
    }
    finish_dml(
        session,
        &def.columns,
        &alias,
        "INSERT",
        written,
        returning,
        Some(0),
    )
    .await
}

/// A source query whose select list calls a routine for each row (`INSERT ... SELECT f(x)
/// FROM t`, see `routines::per_row`): run now, its rows made a VALUES list (or, with none, a
/// query of no rows) that the insert reads as if written. None for any other source.
async fn per_row_source(
    session: &mut Session,
    txn: &mut Transaction,
    source: Option<&ast::Query>,
) -> SqlResult<Option<ast::Query>> {
    let Some(query) = source else {
        return Ok(None);
    };
    if matches!(query.body.as_ref(), ast::SetExpr::Values(_))
        || session.engine.catalog.read().routines.is_empty()
    {
        return Ok(None);
    }
    let stmt = ast::Statement::Query(Box::new(query.clone()));
    let Some(result) = crate::routines::per_row::run_select_list_calls(session, txn, &stmt).await?
    else {
        return Ok(None);
    };
    let StatementResult::Rows {
        batches, columns, ..
    } = result
    else {
        return Err(SqlError::internal("a per-row source gave no rows"));
    };
    let zone = session.settings.time_zone().clone();
    let mut rows = Vec::new();
    for batch in &batches {
        let types: Vec<_> = batch
            .schema()
            .fields()
            .iter()
            .map(|f| crate::types::storage_type_of_field(f))
            .collect();
        for r in 0..batch.num_rows() {
            let mut row = Vec::with_capacity(types.len());
            for (c, t) in types.iter().enumerate() {
                let v = crate::types::value_from_array(batch.column(c).as_ref(), r, t)?;
                row.push(crate::routines::plpgsql::vars::literal(t, &v, &zone)?.to_string());
            }
            rows.push(format!("({})", row.join(", ")));
        }
    }
    let sql = match rows.is_empty() {
        true => format!(
            "SELECT {} WHERE false",
            vec!["NULL"; columns.len()].join(", ")
        ),
        false => format!("VALUES {}", rows.join(", ")),
    };
    match crate::session::parse_sql(&sql)?.pop() {
        Some(ast::Statement::Query(q)) => Ok(Some(*q)),
        _ => Err(SqlError::internal("a per-row source's rows do not parse")),
    }
}

/// The rows to insert, from the source query `sql` (the statement's VALUES or query with the
/// columns' defaults filled in). A default that calls a routine with a body (a PL/pgSQL ID
/// generator) is only in this query: its calls run here, once for each row (see
/// `routines::call`).
async fn source_rows(
    session: &mut Session,
    txn: &mut Transaction,
    def: &TableDef,
    sql: &str,
) -> SqlResult<Vec<RecordBatch>> {
    // The statement's own calls have run already: only a default can bring one in.
    if !defaults_may_call_routines(session, def) {
        return run_sql_query(session, sql).await;
    }
    let mut stmt = crate::session::parse_sql(sql)?
        .pop()
        .ok_or_else(|| SqlError::internal("an INSERT source gave no statement"))?;
    match crate::routines::call::evaluate_calls(session, txn, &mut stmt, true).await? {
        None => run_sql_query(session, &stmt.to_string()).await,
        Some(result) => match result.into_batches()? {
            StatementResult::Rows { batches, .. } => Ok(batches),
            StatementResult::RowStream { rows, .. } => rows.collect().await,
            _ => Err(SqlError::internal("an INSERT source gave no rows")),
        },
    }
}

/// Whether a column default of `def` names a user's routine (a cheap test of the text: a
/// false alarm only costs the parse that `source_rows` then makes).
fn defaults_may_call_routines(session: &Session, def: &TableDef) -> bool {
    let catalog = session.engine.catalog.read();
    if catalog.routines.is_empty() {
        return false;
    }
    def.columns
        .iter()
        .filter_map(|c| c.default_sql.as_deref())
        .any(|d| {
            let d = d.to_ascii_lowercase();
            catalog
                .routines
                .values()
                .any(|r| d.contains(&r.name.to_ascii_lowercase()))
        })
}

/// The AFTER ROW triggers of an INSERT (and of its ON CONFLICT DO UPDATE), for the rows in
/// the order they were written: each run of inserted or updated rows goes to its triggers.
async fn fire_after_rows(
    session: &mut Session,
    txn: &mut Transaction,
    inserts: &Option<Triggers>,
    updates: &Option<Triggers>,
    events: Vec<(bool, WrittenRow)>,
    [inserted, updated]: [Option<&Transition>; 2],
) -> SqlResult<()> {
    let mut events = events.into_iter().peekable();
    while let Some((update, first)) = events.next() {
        let mut run = vec![first];
        while let Some((_, row)) = events.next_if(|(u, _)| *u == update) {
            run.push(row);
        }
        let (triggers, transition) = match update {
            true => (updates, updated),
            false => (inserts, inserted),
        };
        if let Some(t) = triggers {
            t.after_rows(session, txn, run, transition).await?;
        }
    }
    Ok(())
}

/// The width of a plain `VALUES` source's first row.
fn values_width(source: Option<&ast::Query>) -> Option<usize> {
    match source?.body.as_ref() {
        ast::SetExpr::Values(values) => values.rows.first().map(|row| row.len()),
        _ => None,
    }
}

/// The statement's ON CONFLICT clause and the unique indexes it applies to.
struct OnConflict<'a> {
    clause: &'a ast::OnConflict,
    /// None: any unique index (`ON CONFLICT DO NOTHING` without a target).
    arbiters: Option<Vec<u64>>,
    /// The lock DO UPDATE takes on the row it updates (`update_lock`; unused by DO NOTHING).
    update_lock: RowLockMode,
}

/// What every row of one INSERT is written into.
struct InsertTarget<'a> {
    def: &'a TableDef,
    table: &'a RowTable,
    alias: &'a str,
    on_conflict: Option<OnConflict<'a>>,
    /// Row ids this statement inserted or updated, kept only under ON CONFLICT DO UPDATE: it
    /// may not touch a row twice, since the outcome would depend on the order of the proposed
    /// rows.
    affected: HashSet<u64>,
}

impl InsertTarget<'_> {
    fn may_update(&self) -> bool {
        self.on_conflict
            .as_ref()
            .is_some_and(|oc| matches!(oc.clause.action, ast::OnConflictAction::DoUpdate(_)))
    }
}

/// What `insert_row` did with a proposed row.
enum RowWritten {
    /// Nothing (ON CONFLICT DO NOTHING, or a DO UPDATE whose WHERE said no).
    Nothing,
    /// Inserted it as proposed.
    AsProposed,
    /// Updated the conflicting row from `old` to `new` (ON CONFLICT DO UPDATE).
    Updated { old: Vec<Value>, new: Vec<Value> },
}

/// Inserts one row, waiting for conflicting uncommitted inserts, and applies ON CONFLICT.
async fn insert_row(
    session: &mut Session,
    txn: &mut Transaction,
    target: &mut InsertTarget<'_>,
    row: &[Value],
    update_triggers: Option<&Triggers>,
) -> SqlResult<RowWritten> {
    let def = target.def;
    loop {
        match target.table.insert_or_conflict(txn, row) {
            Ok(InsertOutcome::Inserted(inserted)) => {
                if target.may_update() {
                    target.affected.insert(inserted.row_id());
                }
                return Ok(RowWritten::AsProposed);
            }
            Ok(InsertOutcome::Conflict { index, existing }) => {
                let Some(oc) = target
                    .on_conflict
                    .as_ref()
                    .filter(|oc| oc.arbiters.as_ref().is_none_or(|a| a.contains(&index)))
                else {
                    return Err(unique_violation(session, def, index, row));
                };
                let ast::OnConflictAction::DoUpdate(du) = &oc.clause.action else {
                    return Ok(RowWritten::Nothing);
                };
                if target.affected.contains(&existing.row_id()) {
                    return Err(SqlError::new(
                        code::CARDINALITY_VIOLATION,
                        "ON CONFLICT DO UPDATE command cannot affect row a second time",
                    )
                    .with_hint(
                        "Ensure that no rows proposed for insertion within the same command \
                         have duplicate constrained values.",
                    ));
                }
                let updated = on_conflict_update(
                    session,
                    txn,
                    def,
                    target.table,
                    &existing,
                    row,
                    du,
                    oc.update_lock,
                    target.alias,
                    update_triggers,
                )
                .await?;
                let Some((old, new)) = updated else {
                    return Ok(RowWritten::Nothing);
                };
                target.affected.insert(existing.row_id());
                return Ok(RowWritten::Updated { old, new });
            }
            Err(StorageError::WouldBlock { holder }) => {
                session.wait_for_row_holder(txn, holder).await?
            }
            Err(StorageError::UniqueViolation {
                index_name,
                key_columns,
                key,
            }) => {
                let zone = session.settings.time_zone();
                let e = unique_violation_named(def, &index_name, &key_columns, &key, zone);
                return Err(e);
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// The unique indexes an ON CONFLICT clause names, by columns or by constraint; as in
/// PostgreSQL, a conflict on any other unique index is still an error.
fn arbiter_indexes(
    session: &Session,
    def: &TableDef,
    oc: &ast::OnConflict,
) -> SqlResult<Option<Vec<u64>>> {
    match &oc.conflict_target {
        None if matches!(oc.action, ast::OnConflictAction::DoUpdate(_)) => Err(SqlError::syntax(
            "ON CONFLICT DO UPDATE requires inference specification or constraint name",
        )
        .with_hint("For example, ON CONFLICT (column_name).")),
        None => Ok(None),
        Some(ast::ConflictTarget::Columns(cols)) => {
            let mut wanted = Vec::with_capacity(cols.len());
            for c in cols {
                let name = crate::ddl::ident_of(&c.to_string());
                let col = def
                    .column_index(&name)
                    .ok_or_else(|| SqlError::undefined_column(&name))?;
                wanted.push(col);
            }
            wanted.sort_unstable();
            wanted.dedup();
            let catalog = session.engine.catalog.read();
            // A partial index is an arbiter only when ON CONFLICT repeats its WHERE clause,
            // which Shoal does not parse yet.
            let arbiters: Vec<u64> = key_indexes(&catalog, def)
                .filter(|idx| {
                    let mut have = idx.columns.clone();
                    have.sort_unstable();
                    have == wanted
                })
                .map(|idx| idx.oid as u64)
                .collect();
            if arbiters.is_empty() {
                return Err(SqlError::new(
                    code::INVALID_COLUMN_REFERENCE,
                    "there is no unique or exclusion constraint matching the ON CONFLICT specification",
                ));
            }
            Ok(Some(arbiters))
        }
        Some(ast::ConflictTarget::OnConstraint(name)) => {
            let name = crate::ddl::ident_of(&name.to_string());
            let constraint = def
                .constraints
                .iter()
                .find(|c| c.name == name)
                .ok_or_else(|| {
                    SqlError::new(
                        code::UNDEFINED_OBJECT,
                        format!(
                            "constraint \"{name}\" for table \"{}\" does not exist",
                            def.name
                        ),
                    )
                })?;
            match &constraint.kind {
                ConstraintKind::PrimaryKey { index, .. } | ConstraintKind::Unique { index, .. } => {
                    Ok(Some(vec![*index as u64]))
                }
                _ => Err(SqlError::new(
                    code::WRONG_OBJECT_TYPE,
                    "constraint in ON CONFLICT clause has no associated index",
                )),
            }
        }
    }
}

/// The table's unique indexes that are not partial: ON CONFLICT's arbiters, and the keys a
/// foreign key can reference.
fn key_indexes<'c>(catalog: &'c Catalog, def: &TableDef) -> impl Iterator<Item = &'c IndexDef> {
    let table = def.oid;
    catalog
        .indexes
        .values()
        .map(|idx| idx.as_ref())
        .filter(move |idx| idx.table == table && idx.unique && idx.predicate_sql.is_none())
}

/// The row lock DO UPDATE takes, as PostgreSQL: FOR NO KEY UPDATE unless it assigns a column
/// of a unique key, so a reference to the row (FOR KEY SHARE) need not wait for it.
fn update_lock(session: &Session, def: &TableDef, du: &ast::DoUpdate) -> RowLockMode {
    // An unknown column is reported by `on_conflict_update`, at the first conflict.
    let Ok(assigned) = assignment_columns(def, &du.assignments) else {
        return RowLockMode::Exclusive;
    };
    let catalog = session.engine.catalog.read();
    let touches_key = key_indexes(&catalog, def).any(|idx| {
        idx.columns
            .iter()
            .any(|c| assigned.iter().any(|(a, _)| a == c))
    });
    if touches_key {
        RowLockMode::Exclusive
    } else {
        RowLockMode::NoKeyUpdate
    }
}

#[allow(clippy::too_many_arguments)]
async fn on_conflict_update(
    session: &mut Session,
    txn: &mut Transaction,
    def: &TableDef,
    table: &RowTable,
    existing: &RowRef,
    excluded: &[Value],
    du: &ast::DoUpdate,
    mode: RowLockMode,
    alias: &str,
    triggers: Option<&Triggers>,
) -> SqlResult<Option<(Vec<Value>, Vec<Value>)>> {
    let assignments = assignment_columns(def, &du.assignments)?;
    loop {
        let snap = session.engine.db.statement_snapshot(txn);
        match table.lock_row(txn, existing, &snap, mode) {
            Err(StorageError::WouldBlock { holder }) => {
                session.wait_for_row_holder(txn, holder).await?;
                continue;
            }
            Err(e) => return Err(e.into()),
            Ok(_) => {}
        }
        let lock_snap = Snapshot {
            ts: u64::MAX >> 2,
            txn: snap.txn,
        };
        let Some(current) = table
            .read(existing, &lock_snap)
            .or_else(|| table.read(existing, &snap))
        else {
            return Ok(None);
        };
        let exprs: Vec<String> = assignments.iter().map(|(_, e)| e.clone()).collect();
        let cond = du
            .selection
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_else(|| "TRUE".into());
        let sql = format!(
            "SELECT {}{}({cond}) FROM {} CROSS JOIN {}",
            exprs.join(", "),
            if exprs.is_empty() { "" } else { ", " },
            row_as_values_sql(&def.columns, &current, alias),
            row_as_values_sql(&def.columns, excluded, "excluded"),
        );
        let batches = run_sql_query(session, &sql).await?;
        let Some(b) = batches.iter().find(|b| b.num_rows() > 0) else {
            return Ok(None);
        };
        let cond_col = b.column(exprs.len());
        if !matches!(
            ScalarValue::try_from_array(cond_col, 0)?,
            ScalarValue::Boolean(Some(true))
        ) {
            return Ok(None);
        }
        let mut new_row = current.clone();
        for (i, (col, _)) in assignments.iter().enumerate() {
            let c = &def.columns[*col];
            let zone = session.settings.time_zone();
            new_row[*col] =
                column_values(&b.column(i).slice(0, 1), &c.data_type, &c.name, zone)?.remove(0);
        }
        // A BEFORE UPDATE row trigger sees the row as updated (and may change or skip it).
        let new_row = match triggers {
            Some(t) => match t
                .before_row(session, txn, Some(&current), Some(new_row))
                .await?
            {
                Some(changed) => changed,
                None => return Ok(None),
            },
            None => new_row,
        };
        constraints::check_updated_row(session, txn, def, Some(&current), &new_row).await?;
        match write_update(session, txn, table, def, existing, &snap, &new_row).await? {
            true => {
                constraints::check_update_references(session, txn, def, &current, &new_row).await?;
                return Ok(Some((current, new_row)));
            }
            false => continue,
        }
    }
}

/// Applies one update, waiting on row locks. False: the row changed meanwhile, re-evaluate.
async fn write_update(
    session: &Session,
    txn: &mut Transaction,
    table: &RowTable,
    def: &TableDef,
    row: &RowRef,
    snap: &Snapshot,
    new_row: &[Value],
) -> SqlResult<bool> {
    loop {
        match table.update(txn, row, snap, new_row) {
            Ok(WriteOutcome::Done) => return Ok(true),
            Ok(WriteOutcome::Changed { .. }) => return Ok(false),
            Err(StorageError::WouldBlock { holder }) => {
                session.wait_for_row_holder(txn, holder).await?
            }
            Err(StorageError::UniqueViolation {
                index_name,
                key_columns,
                key,
            }) => {
                let zone = session.settings.time_zone();
                let e = unique_violation_named(def, &index_name, &key_columns, &key, zone);
                return Err(e);
            }
            Err(e) => return Err(e.into()),
        }
    }
}
