//! Row constraints checked before a write reaches storage: NOT NULL, CHECK and FOREIGN KEY
//! (both directions, in `foreign_key`: a new row must reference an existing key; a deleted or
//! re-keyed row must not be referenced, unless the key's ON DELETE action deletes or changes the
//! referencing rows), at once or, for a deferred key, at commit (`deferred`). Unique constraints are enforced by storage's unique indexes.

mod deferred;
mod foreign_key;

pub use deferred::{check_pending, set_constraints, DeferredConstraints};
pub use foreign_key::{
    check_delete_references, check_update_references, latest_snapshot, serialization_failure,
};

use shoal_storage::catalog::{ConstraintKind, TableDef};
use shoal_storage::types::Value;
use shoal_storage::Transaction;

use crate::error::{code, SqlError, SqlResult};
use crate::params::literal_expr;
use crate::pgtext;
use crate::session::{parse_sql, Session};
use crate::timezone::TimeZone;
use crate::types::scalar_from_value;

/// The DETAIL of a constraint violation: the row that was to be written (a timestamptz in
/// `zone`, the session's time zone).
pub fn failing_row(row: &[Value], zone: &TimeZone) -> String {
    let vals: Vec<String> = row
        .iter()
        .map(|v| pgtext::format_value(v, zone).unwrap_or_else(|| "null".into()))
        .collect();
    format!("Failing row contains ({}).", vals.join(", "))
}

fn key_text(def: &TableDef, cols: &[usize], row: &[Value], zone: &TimeZone) -> (String, String) {
    let names: Vec<&str> = cols.iter().map(|c| def.columns[*c].name.as_str()).collect();
    let vals: Vec<String> = cols
        .iter()
        .map(|c| pgtext::format_value(&row[*c], zone).unwrap_or_else(|| "null".into()))
        .collect();
    (names.join(", "), vals.join(", "))
}

async fn query_bool(session: &Session, sql: &str) -> SqlResult<Option<bool>> {
    let stmt = parse_sql(sql)?
        .pop()
        .ok_or_else(|| SqlError::internal("empty constraint query"))?;
    let plan = crate::query::plan_statement(session.state(), &session.scope, stmt).await?;
    let batches = crate::query::execute_plan(session.state(), plan, None).await?;
    for b in batches {
        if b.num_rows() > 0 {
            return Ok(
                match datafusion::common::ScalarValue::try_from_array(b.column(0), 0)? {
                    datafusion::common::ScalarValue::Boolean(v) => v,
                    other => Some(!other.is_null()),
                },
            );
        }
    }
    Ok(None)
}

fn literal(def: &TableDef, col: usize, v: &Value) -> String {
    literal_expr(&scalar_from_value(v, &def.columns[col].data_type)).to_string()
}

/// Rows per query when CHECK constraints are evaluated for many rows at once.
const CHECK_ROWS_PER_QUERY: usize = 1000;

/// `check_row` for many rows about to be written, in order; the error names the first failing
/// row by its index. CHECK constraints are evaluated for up to `CHECK_ROWS_PER_QUERY` rows in
/// one query (a query per row made a bulk INSERT into a table with a CHECK take milliseconds
/// per row); the first row a CHECK rejects is then checked alone, so every row's error is the
/// one `check_row` would give.
pub async fn check_rows(
    session: &Session,
    txn: &mut Transaction,
    def: &TableDef,
    rows: &[Vec<Value>],
) -> Result<(), (usize, SqlError)> {
    let first_rejected = first_check_failure(session, def, rows)
        .await
        .map_err(|e| (0, e))?;
    for (i, row) in rows.iter().enumerate() {
        let with_checks = rows.len() == 1 || first_rejected == Some(i);
        check_row_with(session, def, row, with_checks)
            .await
            .map_err(|e| (i, e))?;
        check_foreign_keys(session, txn, def, row, None)
            .await
            .map_err(|e| (i, e))?;
    }
    Ok(())
}

/// The index of the first row some CHECK constraint of `def` rejects (None for a single row:
/// `check_row` evaluates its CHECKs itself).
/// Whether the table references another one or is referenced.
pub fn has_foreign_keys(session: &Session, def: &TableDef) -> bool {
    let references = def
        .constraints
        .iter()
        .any(|c| matches!(c.kind, ConstraintKind::ForeignKey { .. }));
    references
        || !session
            .engine
            .catalog
            .read()
            .referencing_foreign_keys(def.oid)
            .is_empty()
}

/// Whether the table has CHECK constraints.
pub fn has_checks(def: &TableDef) -> bool {
    def.constraints
        .iter()
        .any(|c| matches!(c.kind, ConstraintKind::Check { .. }))
}

pub async fn first_check_failure(
    session: &Session,
    def: &TableDef,
    rows: &[Vec<Value>],
) -> SqlResult<Option<usize>> {
    let checks: Vec<&str> = def
        .constraints
        .iter()
        .filter_map(|c| match &c.kind {
            ConstraintKind::Check { expr_sql } => Some(expr_sql.as_str()),
            _ => None,
        })
        .collect();
    if checks.is_empty() || rows.len() <= 1 {
        return Ok(None);
    }
    const ROW_NO: &str = "\"shoal check row\"";
    let names: Vec<String> = def
        .columns
        .iter()
        .map(|c| format!("\"{}\"", c.name.replace('"', "\"\"")))
        .collect();
    let rejected = checks
        .iter()
        .map(|e| format!("({e}) IS FALSE"))
        .collect::<Vec<_>>()
        .join(" OR ");
    for (chunk_no, chunk) in rows.chunks(CHECK_ROWS_PER_QUERY).enumerate() {
        let values: Vec<String> = chunk
            .iter()
            .enumerate()
            .map(|(i, row)| {
                let literals: Vec<String> = (0..def.columns.len())
                    .map(|c| literal(def, c, &row[c]))
                    .collect();
                format!("({i}::bigint, {})", literals.join(", "))
            })
            .collect();
        let sql = format!(
            "SELECT min({ROW_NO}) FROM (VALUES {}) AS \"{}\"({ROW_NO}, {}) WHERE {rejected}",
            values.join(", "),
            def.name.replace('"', "\"\""),
            names.join(", ")
        );
        let stmt = parse_sql(&sql)?
            .pop()
            .ok_or_else(|| SqlError::internal("empty constraint query"))?;
        let plan = crate::query::plan_statement(session.state(), &session.scope, stmt).await?;
        let batches = crate::query::execute_plan(session.state(), plan, None).await?;
        for b in batches.iter().filter(|b| b.num_rows() > 0) {
            if let datafusion::common::ScalarValue::Int64(Some(i)) =
                datafusion::common::ScalarValue::try_from_array(b.column(0), 0)?
            {
                return Ok(Some(chunk_no * CHECK_ROWS_PER_QUERY + i as usize));
            }
        }
    }
    Ok(None)
}

/// NOT NULL, CHECK and outgoing FOREIGN KEY checks for a row `txn` is about to write. The
/// row each foreign key references is locked FOR KEY SHARE until `txn` ends.
pub async fn check_row(
    session: &Session,
    txn: &mut Transaction,
    def: &TableDef,
    row: &[Value],
) -> SqlResult<()> {
    check_row_with(session, def, row, true).await?;
    check_foreign_keys(session, txn, def, row, None).await
}

/// `check_row` for the new version of `old`: as PostgreSQL, a foreign key whose columns the
/// update leaves alone is not checked again, nor its referenced row looked up and locked (an
/// UPDATE of pgbench_accounts would otherwise do that for its branch every time).
pub async fn check_updated_row(
    session: &Session,
    txn: &mut Transaction,
    def: &TableDef,
    old: Option<&[Value]>,
    row: &[Value],
) -> SqlResult<()> {
    check_row_with(session, def, row, true).await?;
    check_foreign_keys(session, txn, def, row, old).await
}

/// The NOT NULL and (unless `with_checks` is false: known to pass) CHECK constraints of
/// `check_row`; not the foreign keys, which an INSERT checks after the row is in, so that a
/// row may reference itself (PostgreSQL's check runs after the row, too).
pub async fn check_row_with(
    session: &Session,
    def: &TableDef,
    row: &[Value],
    with_checks: bool,
) -> SqlResult<()> {
    for (i, c) in def.columns.iter().enumerate() {
        if c.not_null && row[i].is_null() {
            return Err(SqlError::new(
                code::NOT_NULL_VIOLATION,
                format!(
                    "null value in column \"{}\" of relation \"{}\" violates not-null constraint",
                    c.name, def.name
                ),
            )
            .with_detail(failing_row(row, session.settings.time_zone()))
            .with_table(&def.schema, &def.name)
            .with_column(&c.name));
        }
    }
    for constraint in &def.constraints {
        match &constraint.kind {
            ConstraintKind::Check { expr_sql } if with_checks => {
                let literals: Vec<String> = (0..def.columns.len())
                    .map(|i| literal(def, i, &row[i]))
                    .collect();
                let names: Vec<String> = def
                    .columns
                    .iter()
                    .map(|c| format!("\"{}\"", c.name))
                    .collect();
                let sql = format!(
                    "SELECT ({expr_sql}) FROM (VALUES ({})) AS \"{}\"({})",
                    literals.join(", "),
                    def.name,
                    names.join(", ")
                );
                if query_bool(session, &sql).await? == Some(false) {
                    return Err(SqlError::new(
                        code::CHECK_VIOLATION,
                        format!(
                            "new row for relation \"{}\" violates check constraint \"{}\"",
                            def.name, constraint.name
                        ),
                    )
                    .with_detail(failing_row(row, session.settings.time_zone()))
                    .with_table(&def.schema, &def.name)
                    .with_constraint(&constraint.name));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Rows an INSERT or COPY wrote whose referenced row was not there when checked right after
/// each was written. PostgreSQL checks foreign keys at the end of the statement, so a row may
/// reference one written after it: these rows are checked again then. Rows that passed hold
/// their lock already and are not kept.
#[derive(Default)]
pub struct DeferredReferences {
    /// Each row with the input line it came from (COPY) or its position.
    rows: Vec<(usize, Vec<Value>)>,
}

impl DeferredReferences {
    /// `check_foreign_keys` for a row just written (`at`: its line or position), keeping it
    /// for `check_deferred` when what it references is missing.
    pub async fn check_or_defer(
        &mut self,
        session: &Session,
        txn: &mut Transaction,
        def: &TableDef,
        row: &[Value],
        at: usize,
    ) -> SqlResult<()> {
        match check_foreign_keys(session, txn, def, row, None).await {
            Err(e) if e.code == code::FOREIGN_KEY_VIOLATION => {
                self.rows.push((at, row.to_vec()));
                Ok(())
            }
            other => other,
        }
    }

    /// The end of the statement: checks the deferred rows again, failing with the first
    /// whose referenced row is still missing (and its line or position).
    pub async fn check_deferred(
        self,
        session: &Session,
        txn: &mut Transaction,
        def: &TableDef,
    ) -> Result<(), (usize, SqlError)> {
        for (at, row) in self.rows {
            check_foreign_keys(session, txn, def, &row, None)
                .await
                .map_err(|e| (at, e))?;
        }
        Ok(())
    }
}

/// The outgoing FOREIGN KEY checks of `check_row`: each row `row` references is
/// looked up and locked (FOR KEY SHARE) until `txn` ends; for an update of `old`, keys whose
/// columns it leaves alone are skipped.
pub async fn check_foreign_keys(
    session: &Session,
    txn: &mut Transaction,
    def: &TableDef,
    row: &[Value],
    old: Option<&[Value]>,
) -> SqlResult<()> {
    for constraint in &def.constraints {
        let ConstraintKind::ForeignKey {
            columns,
            ref_table,
            ref_columns,
            ..
        } = &constraint.kind
        else {
            continue;
        };
        let unchanged = old.is_some_and(|old| columns.iter().all(|&c| old[c] == row[c]));
        if unchanged || columns.iter().any(|c| row[*c].is_null()) {
            continue;
        }
        if session
            .scope
            .deferred_constraints
            .lock()
            .defer_reference(def.oid, constraint, row)
        {
            continue;
        }
        let target = session.engine.catalog.read().tables.get(ref_table).cloned();
        let Some(target) = target else {
            continue;
        };
        // Boxed: the check may plan a query, a future far larger than the point writes that
        // await this one (and debug builds run out of a test thread's stack).
        Box::pin(foreign_key::check_reference(
            session,
            txn,
            (def, &constraint.name, columns),
            (&target, ref_columns),
            row,
        ))
        .await?;
    }
    Ok(())
}
