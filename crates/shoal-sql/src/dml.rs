//! INSERT, UPDATE, DELETE and SELECT ... FOR UPDATE on the general path. DataFusion computes
//! what to write (the rows to insert, or the target rows and their new values, found through
//! a scan that records each row's handle); the writes then go through the storage API inside
//! the session's transaction. When a target row was changed by a transaction that committed
//! after our snapshot, READ COMMITTED re-evaluates the statement on the newest version (as
//! PostgreSQL's EvalPlanQual does), so concurrent `SET n = n + 1` never loses an increment.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, UInt64Array};
use datafusion::arrow::compute::{cast_with_options, CastOptions};
use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::ast::{self, Statement};
use parking_lot::Mutex;
use shoal_storage::catalog::{ConstraintKind, TableDef};
use shoal_storage::table::{InsertOutcome, RowLockMode, RowRef, RowTable, WriteOutcome};
use shoal_storage::types::{DataType, Value};
use shoal_storage::{Snapshot, StorageError, Transaction};

use crate::constraints;
use crate::error::{code, SqlError, SqlResult};
use crate::params::literal_expr;
use crate::pgtext;
use crate::query::provider::ROW_POSITION_COLUMN;
use crate::session::{columns_of_schema, parse_sql, ResultColumn, Session, StatementResult};
use crate::types::{arrow_type, scalar_from_value, value_from_array};

/// Resolves a table name for writing: it must be a table (not a view or sequence).
pub fn resolve_table(
    session: &Session,
    name: &ast::ObjectName,
) -> SqlResult<(Arc<TableDef>, Arc<RowTable>)> {
    let (schema, rel) = crate::ddl::split_name(name);
    let (_, kind, oid) = session
        .scope
        .resolve_relation(schema.as_deref(), &rel)
        .ok_or_else(|| SqlError::undefined_table(&rel))?;
    if kind != shoal_storage::catalog::RelationKind::Table {
        return Err(SqlError::new(
            code::WRONG_OBJECT_TYPE,
            format!("cannot change relation \"{rel}\""),
        ));
    }
    let def = session
        .engine
        .catalog
        .read()
        .tables
        .get(&oid)
        .cloned()
        .ok_or_else(|| SqlError::undefined_table(&rel))?;
    let table = session
        .engine
        .db
        .table(oid as u64)
        .ok_or_else(|| SqlError::undefined_table(&rel))?;
    Ok((def, table))
}

fn quote_ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

pub fn qualified(def: &TableDef) -> String {
    format!("{}.{}", quote_ident(&def.schema), quote_ident(&def.name))
}

/// Runs SQL text built by this module as a query and returns its batches.
async fn run_sql_query(session: &Session, sql: &str) -> SqlResult<Vec<RecordBatch>> {
    let mut stmts = parse_sql(sql)?;
    let stmt = stmts
        .pop()
        .ok_or_else(|| SqlError::internal("empty generated query"))?;
    let plan = crate::query::plan_statement(session.state(), &session.scope, stmt).await?;
    crate::query::execute_plan(session.state(), plan, None).await
}

/// Converts one result column into values of a table column's type, with PostgreSQL's input
/// rules: text is parsed by the column type's input function; other types are cast.
pub fn column_values(array: &ArrayRef, t: &DataType, column: &str) -> SqlResult<Vec<Value>> {
    let textual = matches!(
        array.data_type(),
        ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View
    );
    let target_textual = matches!(t, DataType::Text | DataType::Varchar(_) | DataType::Char(_));
    let mut out = Vec::with_capacity(array.len());
    if textual && !target_textual || matches!(t, DataType::Uuid) && textual {
        let strings = cast_with_options(
            array,
            &ArrowType::Utf8,
            &CastOptions {
                safe: false,
                ..Default::default()
            },
        )?;
        let strings = strings
            .as_any()
            .downcast_ref::<datafusion::arrow::array::StringArray>()
            .expect("utf8");
        for i in 0..strings.len() {
            out.push(if strings.is_null(i) {
                Value::Null
            } else {
                pgtext::parse_value(strings.value(i), t)?
            });
        }
        return Ok(out);
    }
    let target = arrow_type(t);
    let cast = if array.data_type() == &target {
        array.clone()
    } else {
        cast_with_options(
            array,
            &target,
            &CastOptions {
                safe: false,
                ..Default::default()
            },
        )
        .map_err(|e| {
            let err = SqlError::from(e);
            if err.code == code::INTERNAL_ERROR || err.code == code::DATA_EXCEPTION {
                SqlError::new(
                    code::DATATYPE_MISMATCH,
                    format!(
                        "column \"{column}\" is of type {} but expression is of another type",
                        crate::types::format_type(t)
                    ),
                )
            } else {
                err
            }
        })?
    };
    for i in 0..cast.len() {
        let v = value_from_array(cast.as_ref(), i, t)?;
        out.push(enforce_type_limits(v, t)?);
    }
    Ok(out)
}

/// varchar(n), char(n) and numeric(p,s) limits that a cast alone does not check.
fn enforce_type_limits(v: Value, t: &DataType) -> SqlResult<Value> {
    Ok(match (v, t) {
        (Value::Text(s), DataType::Varchar(limit)) => {
            Value::Text(pgtext::check_varchar(&s, *limit, t)?)
        }
        (Value::Text(s), DataType::Char(n)) => {
            Value::Text(pgtext::check_char(s.trim_end_matches(' '), *n)?)
        }
        (
            v @ Value::Numeric { .. },
            DataType::Numeric {
                precision: Some(p),
                scale,
            },
        ) => {
            if let Value::Numeric { mantissa, .. } = &v {
                pgtext::check_numeric_precision(*mantissa, *p, scale.unwrap_or(0))?;
            }
            v
        }
        (v, _) => v,
    })
}

fn batch_rows(
    batches: &[RecordBatch],
    def: &TableDef,
    first_col: usize,
) -> SqlResult<Vec<Vec<Value>>> {
    let mut rows = Vec::new();
    for b in batches {
        let mut cols: Vec<Vec<Value>> = Vec::with_capacity(def.columns.len());
        for (i, c) in def.columns.iter().enumerate() {
            cols.push(column_values(
                b.column(first_col + i),
                &c.data_type,
                &c.name,
            )?);
        }
        for r in 0..b.num_rows() {
            rows.push(cols.iter().map(|c| c[r].clone()).collect());
        }
    }
    Ok(rows)
}

fn default_expr_sql(def: &TableDef, col: usize) -> String {
    let c = &def.columns[col];
    if let Some(d) = &c.default_sql {
        d.clone()
    } else {
        "NULL".to_string()
    }
}

fn target_columns(def: &TableDef, columns: &[ast::ObjectName]) -> SqlResult<Vec<usize>> {
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

fn is_default_keyword(e: &ast::Expr) -> bool {
    matches!(e, ast::Expr::Identifier(i) if i.value.eq_ignore_ascii_case("default") && i.quote_style.is_none())
}

/// The query that produces full rows (in table column order) for an INSERT.
fn insert_source_sql(
    def: &TableDef,
    targets: &[usize],
    source: Option<&ast::Query>,
) -> SqlResult<String> {
    let n = def.columns.len();
    let check_identity = |col: usize, explicit: bool| -> SqlResult<()> {
        if explicit {
            if let Some(id) = &def.columns[col].identity {
                if id.always {
                    return Err(SqlError::new(
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
                    .with_hint("Use OVERRIDING SYSTEM VALUE to override."));
                }
            }
        }
        Ok(())
    };
    let Some(source) = source else {
        let row: Vec<String> = (0..n).map(|c| default_expr_sql(def, c)).collect();
        return Ok(format!("VALUES ({})", row.join(", ")));
    };
    if let ast::SetExpr::Values(values) = source.body.as_ref() {
        if source.order_by.is_none() && source.limit_clause.is_none() && source.with.is_none() {
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
                    if !is_default_keyword(&row[pos]) {
                        check_identity(*col, true)?;
                        full[*col] = row[pos].to_string();
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
        check_identity(*col, true)?;
        select[*col] = format!("__src.__c{pos}");
    }
    Ok(format!(
        "SELECT {} FROM ({source}) AS __src({})",
        select.join(", "),
        src_cols.join(", ")
    ))
}

pub async fn insert(
    session: &mut Session,
    txn: &mut Transaction,
    ins: ast::Insert,
) -> SqlResult<StatementResult> {
    let ast::TableObject::TableName(name) = &ins.table else {
        return Err(SqlError::unsupported("INSERT into a table function"));
    };
    let (def, table) = resolve_table(session, name)?;
    let targets = target_columns(&def, &ins.columns)?;
    let sql = insert_source_sql(&def, &targets, ins.source.as_deref())?;
    let batches = run_sql_query(session, &sql).await?;
    let rows = batch_rows(&batches, &def, 0)?;
    let on_conflict = match &ins.on {
        Some(ast::OnInsert::OnConflict(c)) => Some(c.clone()),
        Some(_) => return Err(SqlError::unsupported("ON DUPLICATE KEY UPDATE")),
        None => None,
    };
    let alias = ins
        .table_alias
        .as_ref()
        .map(|a| a.alias.value.clone())
        .unwrap_or_else(|| def.name.clone());
    let mut written = Vec::new();
    for row in rows {
        constraints::check_row(session, &def, &row).await?;
        if let Some(r) = insert_row(
            session,
            txn,
            &def,
            &table,
            row,
            on_conflict.as_ref(),
            &alias,
        )
        .await?
        {
            written.push(r);
        }
    }
    finish_dml(
        session,
        &def,
        &alias,
        "INSERT",
        written,
        ins.returning.as_deref(),
        Some(0),
    )
    .await
}

/// Inserts one row, waiting for conflicting uncommitted inserts, and applies ON CONFLICT.
/// Returns the row as written (for RETURNING), or None when nothing was written.
async fn insert_row(
    session: &Session,
    txn: &mut Transaction,
    def: &TableDef,
    table: &RowTable,
    row: Vec<Value>,
    on_conflict: Option<&ast::OnConflict>,
    alias: &str,
) -> SqlResult<Option<Vec<Value>>> {
    loop {
        match table.insert_or_conflict(txn, &row) {
            Ok(InsertOutcome::Inserted(_)) => return Ok(Some(row)),
            Ok(InsertOutcome::Conflict { index, existing }) => {
                let Some(oc) = on_conflict else {
                    return Err(unique_violation(session, def, index, &row));
                };
                if !conflict_target_matches(session, def, index, oc)? {
                    return Err(unique_violation(session, def, index, &row));
                }
                match &oc.action {
                    ast::OnConflictAction::DoNothing => return Ok(None),
                    ast::OnConflictAction::DoUpdate(du) => {
                        return on_conflict_update(
                            session, txn, def, table, &existing, &row, du, alias,
                        )
                        .await
                    }
                }
            }
            Err(StorageError::WouldBlock { holder }) => {
                session.engine.db.wait_for(txn, holder).await?
            }
            Err(StorageError::UniqueViolation {
                index_name,
                key_columns,
                key,
            }) => return Err(unique_violation_named(def, &index_name, &key_columns, &key)),
            Err(e) => return Err(e.into()),
        }
    }
}

fn conflict_target_matches(
    session: &Session,
    def: &TableDef,
    index: u64,
    oc: &ast::OnConflict,
) -> SqlResult<bool> {
    let catalog = session.engine.catalog.read();
    let Some(idx) = catalog.indexes.get(&(index as u32)) else {
        return Ok(true);
    };
    Ok(match &oc.conflict_target {
        None => true,
        Some(ast::ConflictTarget::Columns(cols)) => {
            let mut wanted: Vec<usize> = cols
                .iter()
                .filter_map(|c| def.column_index(&c.value))
                .collect();
            let mut have = idx.columns.clone();
            wanted.sort();
            have.sort();
            if wanted.len() != cols.len() {
                return Err(SqlError::new(
                    code::UNDEFINED_COLUMN,
                    "column named in ON CONFLICT does not exist",
                ));
            }
            if wanted != have && !def.constraints.iter().any(|c| matches!(&c.kind, ConstraintKind::PrimaryKey { columns, .. } | ConstraintKind::Unique { columns, .. } if { let mut s = columns.clone(); s.sort(); s == wanted })) {
                return Err(SqlError::new(code::INVALID_COLUMN_REFERENCE, "there is no unique or exclusion constraint matching the ON CONFLICT specification"));
            }
            wanted == have
        }
        Some(ast::ConflictTarget::OnConstraint(name)) => {
            let n = crate::ddl::ident_of(&name.to_string());
            def.constraints.iter().any(|c| c.name == n && matches!(&c.kind, ConstraintKind::PrimaryKey { index: i, .. } | ConstraintKind::Unique { index: i, .. } if *i as u64 == index))
        }
    })
}

pub fn unique_violation(session: &Session, def: &TableDef, index: u64, row: &[Value]) -> SqlError {
    let catalog = session.engine.catalog.read();
    match catalog.indexes.get(&(index as u32)) {
        Some(idx) => {
            let key: Vec<Value> = idx.columns.iter().map(|c| row[*c].clone()).collect();
            unique_violation_named(def, &idx.name, &idx.columns, &key)
        }
        None => SqlError::new(
            code::UNIQUE_VIOLATION,
            "duplicate key value violates unique constraint",
        ),
    }
}

pub fn unique_violation_named(
    def: &TableDef,
    index_name: &str,
    key_columns: &[usize],
    key: &[Value],
) -> SqlError {
    let cols: Vec<&str> = key_columns
        .iter()
        .map(|c| def.columns[*c].name.as_str())
        .collect();
    let vals: Vec<String> = key
        .iter()
        .map(|v| pgtext::format_value(v).unwrap_or_else(|| "null".into()))
        .collect();
    SqlError::new(
        code::UNIQUE_VIOLATION,
        format!("duplicate key value violates unique constraint \"{index_name}\""),
    )
    .with_detail(format!(
        "Key ({})=({}) already exists.",
        cols.join(", "),
        vals.join(", ")
    ))
}

/// A one-row derived table holding `values` under the table's column names.
fn row_as_values_sql(def: &TableDef, values: &[Value], alias: &str) -> String {
    let literals: Vec<String> = def
        .columns
        .iter()
        .zip(values)
        .map(|(c, v)| literal_expr(&scalar_from_value(v, &c.data_type)).to_string())
        .collect();
    let names: Vec<String> = def.columns.iter().map(|c| quote_ident(&c.name)).collect();
    format!(
        "(VALUES ({})) AS {}({})",
        literals.join(", "),
        quote_ident(alias),
        names.join(", ")
    )
}

fn assignment_columns(
    def: &TableDef,
    assignments: &[ast::Assignment],
) -> SqlResult<Vec<(usize, String)>> {
    let mut out = Vec::new();
    for a in assignments {
        let ast::AssignmentTarget::ColumnName(name) = &a.target else {
            return Err(SqlError::unsupported("multiple-column assignment"));
        };
        let col_name =
            crate::ddl::ident_of(&name.0.last().map(|p| p.to_string()).unwrap_or_default());
        let idx = def.column_index(&col_name).ok_or_else(|| {
            SqlError::new(
                code::UNDEFINED_COLUMN,
                format!(
                    "column \"{col_name}\" of relation \"{}\" does not exist",
                    def.name
                ),
            )
        })?;
        if let Some(id) = &def.columns[idx].identity {
            if id.always && !is_default_keyword(&a.value) {
                return Err(SqlError::new(
                    code::GENERATED_ALWAYS,
                    format!("column \"{col_name}\" can only be updated to DEFAULT"),
                )
                .with_detail(format!(
                    "Column \"{col_name}\" is an identity column defined as GENERATED ALWAYS."
                )));
            }
        }
        let value = if is_default_keyword(&a.value) {
            default_expr_sql(def, idx)
        } else {
            a.value.to_string()
        };
        out.push((idx, value));
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
async fn on_conflict_update(
    session: &Session,
    txn: &mut Transaction,
    def: &TableDef,
    table: &RowTable,
    existing: &RowRef,
    excluded: &[Value],
    du: &ast::DoUpdate,
    alias: &str,
) -> SqlResult<Option<Vec<Value>>> {
    let assignments = assignment_columns(def, &du.assignments)?;
    loop {
        let snap = session.engine.db.statement_snapshot(txn);
        match table.lock_row(txn, existing, &snap, RowLockMode::Exclusive) {
            Err(StorageError::WouldBlock { holder }) => {
                session.engine.db.wait_for(txn, holder).await?;
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
            row_as_values_sql(def, &current, alias),
            row_as_values_sql(def, excluded, "excluded"),
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
            new_row[*col] =
                column_values(&b.column(i).slice(0, 1), &c.data_type, &c.name)?.remove(0);
        }
        constraints::check_row(session, def, &new_row).await?;
        match write_update(session, txn, table, def, existing, &snap, &new_row).await? {
            true => return Ok(Some(new_row)),
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
                session.engine.db.wait_for(txn, holder).await?
            }
            Err(StorageError::UniqueViolation {
                index_name,
                key_columns,
                key,
            }) => return Err(unique_violation_named(def, &index_name, &key_columns, &key)),
            Err(e) => return Err(e.into()),
        }
    }
}

/// The SELECT that finds an UPDATE/DELETE's target rows: row position first, then `extra`.
fn target_query_sql(
    def: &TableDef,
    alias: &str,
    extra: &[String],
    from: &[ast::TableWithJoins],
    selection: Option<&ast::Expr>,
) -> String {
    let mut sql = format!("SELECT {}.{}", quote_ident(alias), ROW_POSITION_COLUMN);
    for e in extra {
        sql.push_str(", ");
        sql.push_str(e);
    }
    sql.push_str(&format!(
        " FROM {} AS {}",
        qualified(def),
        quote_ident(alias)
    ));
    for f in from {
        sql.push_str(&format!(", {f}"));
    }
    if let Some(s) = selection {
        sql.push_str(&format!(" WHERE {s}"));
    }
    sql
}

/// Runs the target query with the table's scan capturing row handles.
async fn find_targets(
    session: &Session,
    def: &TableDef,
    sql: &str,
) -> SqlResult<(Vec<RecordBatch>, Vec<RowRef>)> {
    let capture = Arc::new(Mutex::new(Vec::new()));
    *session.scope.dml_capture.lock() = Some((def.oid, capture.clone()));
    let result = run_sql_query(session, sql).await;
    *session.scope.dml_capture.lock() = None;
    let batches = result?;
    let rows = std::mem::take(&mut *capture.lock());
    Ok((batches, rows))
}

fn table_alias(t: &ast::TableWithJoins) -> SqlResult<(ast::ObjectName, Option<String>)> {
    match &t.relation {
        ast::TableFactor::Table { name, alias, .. } => {
            Ok((name.clone(), alias.as_ref().map(|a| a.name.value.clone())))
        }
        _ => Err(SqlError::unsupported("UPDATE/DELETE of a derived table")),
    }
}

pub async fn update(
    session: &mut Session,
    txn: &mut Transaction,
    upd: ast::Update,
) -> SqlResult<StatementResult> {
    let (name, alias) = table_alias(&upd.table)?;
    let (def, table) = resolve_table(session, &name)?;
    let alias = alias.unwrap_or_else(|| def.name.clone());
    let assignments = assignment_columns(&def, &upd.assignments)?;
    let from: Vec<ast::TableWithJoins> = match &upd.from {
        Some(ast::UpdateTableFromKind::AfterSet(f))
        | Some(ast::UpdateTableFromKind::BeforeSet(f)) => f.clone(),
        None => vec![],
    };
    let exprs: Vec<String> = assignments.iter().map(|(_, e)| e.clone()).collect();
    let sql = target_query_sql(&def, &alias, &exprs, &from, upd.selection.as_ref());
    let (batches, handles) = find_targets(session, &def, &sql).await?;
    let snap = session.scope.snapshot();
    let mut written = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for b in &batches {
        let positions = b
            .column(0)
            .as_any()
            .downcast_ref::<UInt64Array>()
            .expect("position column");
        let mut new_values: Vec<Vec<Value>> = Vec::with_capacity(assignments.len());
        for (i, (col, _)) in assignments.iter().enumerate() {
            let c = &def.columns[*col];
            new_values.push(column_values(b.column(i + 1), &c.data_type, &c.name)?);
        }
        for r in 0..b.num_rows() {
            let handle = &handles[positions.value(r) as usize];
            if !seen.insert(Arc::as_ptr(handle) as usize) {
                continue; // UPDATE ... FROM joining several rows: the first one wins, as in PostgreSQL.
            }
            let Some(mut row) = table.read(handle, &snap) else {
                continue;
            };
            for (i, (col, _)) in assignments.iter().enumerate() {
                row[*col] = new_values[i][r].clone();
            }
            if let Some(done) = update_one(
                session,
                txn,
                &def,
                &table,
                handle,
                snap,
                row,
                &alias,
                &assignments,
                &from,
                upd.selection.as_ref(),
            )
            .await?
            {
                written.push(done);
            }
        }
    }
    finish_dml(
        session,
        &def,
        &alias,
        "UPDATE",
        written,
        upd.returning.as_deref(),
        None,
    )
    .await
}

#[allow(clippy::too_many_arguments)]
async fn update_one(
    session: &Session,
    txn: &mut Transaction,
    def: &TableDef,
    table: &RowTable,
    handle: &RowRef,
    mut snap: Snapshot,
    mut row: Vec<Value>,
    alias: &str,
    assignments: &[(usize, String)],
    from: &[ast::TableWithJoins],
    selection: Option<&ast::Expr>,
) -> SqlResult<Option<Vec<Value>>> {
    loop {
        constraints::check_row(session, def, &row).await?;
        constraints::check_update_references(session, txn, def, handle, &snap, &row).await?;
        match table.update(txn, handle, &snap, &row) {
            Ok(WriteOutcome::Done) => return Ok(Some(row)),
            Ok(WriteOutcome::Changed { newest: None, .. }) => return Ok(None),
            Ok(WriteOutcome::Changed {
                newest: Some(newest),
                newest_snapshot,
            }) => {
                // READ COMMITTED: re-evaluate WHERE and SET on the newest committed version.
                match reevaluate(session, def, alias, &newest, assignments, from, selection).await?
                {
                    Some(new_row) => {
                        row = new_row;
                        snap = newest_snapshot;
                    }
                    None => return Ok(None),
                }
            }
            Err(StorageError::WouldBlock { holder }) => {
                session.engine.db.wait_for(txn, holder).await?
            }
            Err(StorageError::UniqueViolation {
                index_name,
                key_columns,
                key,
            }) => return Err(unique_violation_named(def, &index_name, &key_columns, &key)),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Re-runs the statement's WHERE and SET for one row version in place of the target table.
/// None when the row no longer qualifies.
async fn reevaluate(
    session: &Session,
    def: &TableDef,
    alias: &str,
    newest: &[Value],
    assignments: &[(usize, String)],
    from: &[ast::TableWithJoins],
    selection: Option<&ast::Expr>,
) -> SqlResult<Option<Vec<Value>>> {
    let mut sql = String::from("SELECT TRUE");
    for (_, e) in assignments {
        sql.push_str(", ");
        sql.push_str(e);
    }
    sql.push_str(&format!(" FROM {}", row_as_values_sql(def, newest, alias)));
    for f in from {
        sql.push_str(&format!(", {f}"));
    }
    if let Some(s) = selection {
        sql.push_str(&format!(" WHERE {s}"));
    }
    sql.push_str(" LIMIT 1");
    let batches = run_sql_query(session, &sql).await?;
    let Some(b) = batches.iter().find(|b| b.num_rows() > 0) else {
        return Ok(None);
    };
    let mut row = newest.to_vec();
    for (i, (col, _)) in assignments.iter().enumerate() {
        let c = &def.columns[*col];
        row[*col] = column_values(&b.column(i + 1).slice(0, 1), &c.data_type, &c.name)?.remove(0);
    }
    Ok(Some(row))
}

pub async fn delete(
    session: &mut Session,
    txn: &mut Transaction,
    del: ast::Delete,
) -> SqlResult<StatementResult> {
    let tables = match &del.from {
        ast::FromTable::WithFromKeyword(t) | ast::FromTable::WithoutKeyword(t) => t,
    };
    let target = tables
        .first()
        .ok_or_else(|| SqlError::syntax("DELETE needs a table"))?;
    let (name, alias) = table_alias(target)?;
    let (def, table) = resolve_table(session, &name)?;
    let alias = alias.unwrap_or_else(|| def.name.clone());
    let using = del.using.clone().unwrap_or_default();
    let sql = target_query_sql(&def, &alias, &[], &using, del.selection.as_ref());
    let (batches, handles) = find_targets(session, &def, &sql).await?;
    let mut snap = session.scope.snapshot();
    let mut written = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for b in &batches {
        let positions = b
            .column(0)
            .as_any()
            .downcast_ref::<UInt64Array>()
            .expect("position column");
        for r in 0..b.num_rows() {
            let handle = &handles[positions.value(r) as usize];
            if !seen.insert(Arc::as_ptr(handle) as usize) {
                continue;
            }
            let Some(old) = table.read(handle, &snap) else {
                continue;
            };
            loop {
                constraints::check_delete_references(session, txn, &def, &old).await?;
                match table.delete(txn, handle, &snap) {
                    Ok(WriteOutcome::Done) => {
                        written.push(old.clone());
                        break;
                    }
                    Ok(WriteOutcome::Changed { newest: None, .. }) => break,
                    Ok(WriteOutcome::Changed {
                        newest: Some(newest),
                        newest_snapshot,
                    }) => {
                        if reevaluate(
                            session,
                            &def,
                            &alias,
                            &newest,
                            &[],
                            &using,
                            del.selection.as_ref(),
                        )
                        .await?
                        .is_none()
                        {
                            break;
                        }
                        snap = newest_snapshot;
                    }
                    Err(StorageError::WouldBlock { holder }) => {
                        session.engine.db.wait_for(txn, holder).await?
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            snap = session.scope.snapshot();
        }
    }
    finish_dml(
        session,
        &def,
        &alias,
        "DELETE",
        written,
        del.returning.as_deref(),
        None,
    )
    .await
}

/// SELECT ... FOR UPDATE/SHARE on one table: find the rows, lock each (waiting, NOWAIT or
/// SKIP LOCKED), re-check changed rows, and return the projection of what was locked.
pub async fn select_for_update(
    session: &mut Session,
    txn: &mut Transaction,
    mut q: ast::Query,
) -> SqlResult<StatementResult> {
    let lock = q.locks.remove(0);
    q.locks.clear();
    let ast::SetExpr::Select(select) = q.body.as_ref() else {
        return Err(SqlError::unsupported("FOR UPDATE on this query"));
    };
    let Some(first) = select.from.first() else {
        return Err(SqlError::unsupported("FOR UPDATE without a table"));
    };
    let (name, alias) = table_alias(first)?;
    let (def, table) = resolve_table(session, &name)?;
    let alias = alias.unwrap_or_else(|| def.name.clone());
    // Run the query with the row position prepended to the projection.
    let mut with_position = q.clone();
    if let ast::SetExpr::Select(s) = with_position.body.as_mut() {
        let pos: ast::Expr = datafusion::sql::sqlparser::parser::Parser::new(
            &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
        )
        .try_with_sql(&format!("{}.{}", quote_ident(&alias), ROW_POSITION_COLUMN))?
        .parse_expr()?;
        s.projection.insert(
            0,
            ast::SelectItem::ExprWithAlias {
                expr: pos,
                alias: ast::Ident::new(ROW_POSITION_COLUMN),
            },
        );
    }
    let (batches, handles) = find_targets(session, &def, &with_position.to_string()).await?;
    let mode = if matches!(lock.lock_type, ast::LockType::Share) {
        RowLockMode::Share
    } else {
        RowLockMode::Exclusive
    };
    let snap = session.scope.snapshot();
    let mut keep: Vec<(usize, usize)> = Vec::new();
    for (bi, b) in batches.iter().enumerate() {
        let positions = b
            .column(0)
            .as_any()
            .downcast_ref::<UInt64Array>()
            .expect("position column");
        for r in 0..b.num_rows() {
            let handle = &handles[positions.value(r) as usize];
            loop {
                match table.lock_row(txn, handle, &snap, mode) {
                    Ok(WriteOutcome::Done) => {
                        keep.push((bi, r));
                        break;
                    }
                    Ok(WriteOutcome::Changed { newest, .. }) => {
                        // The row changed after our snapshot: PostgreSQL returns the newest version if it
                        // still qualifies; Shoal skips it for now (documented gap) unless it qualifies unchanged.
                        if let Some(n) = newest {
                            if reevaluate(
                                session,
                                &def,
                                &alias,
                                &n,
                                &[],
                                &[],
                                select.selection.as_ref(),
                            )
                            .await?
                            .is_some()
                            {
                                keep.push((bi, r));
                            }
                        }
                        break;
                    }
                    Err(StorageError::WouldBlock { holder }) => match lock.nonblock {
                        Some(ast::NonBlock::Nowait) => {
                            return Err(SqlError::new(
                                code::LOCK_NOT_AVAILABLE,
                                format!(
                                    "could not obtain lock on row in relation \"{}\"",
                                    def.name
                                ),
                            ))
                        }
                        Some(ast::NonBlock::SkipLocked) => break,
                        None => session.engine.db.wait_for(txn, holder).await?,
                    },
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }
    // Output: the rows kept, without the position column(s).
    let Some(first_batch) = batches.first() else {
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
    };
    let keep_cols: Vec<usize> = (1..first_batch.num_columns())
        .filter(|i| first_batch.schema().field(*i).name() != ROW_POSITION_COLUMN)
        .collect();
    let schema = Arc::new(first_batch.schema().project(&keep_cols)?);
    let mut out = Vec::new();
    for (bi, b) in batches.iter().enumerate() {
        let rows: Vec<u32> = keep
            .iter()
            .filter(|(x, _)| *x == bi)
            .map(|(_, r)| *r as u32)
            .collect();
        let idx = datafusion::arrow::array::UInt32Array::from(rows);
        let cols: Vec<ArrayRef> = keep_cols
            .iter()
            .map(|c| datafusion::arrow::compute::take(b.column(*c), &idx, None))
            .collect::<Result<_, _>>()?;
        out.push(RecordBatch::try_new(schema.clone(), cols)?);
    }
    Ok(StatementResult::Rows {
        columns: columns_of_schema(&schema),
        batches: out,
        tag: "SELECT",
    })
}

/// The command tag, or the RETURNING rows computed over the rows written.
async fn finish_dml(
    session: &Session,
    def: &TableDef,
    alias: &str,
    tag: &str,
    written: Vec<Vec<Value>>,
    returning: Option<&[ast::SelectItem]>,
    oid: Option<u32>,
) -> SqlResult<StatementResult> {
    let count = written.len();
    let Some(items) = returning else {
        return Ok(StatementResult::Command {
            tag: tag.to_string(),
            rows: Some(count),
            oid,
        });
    };
    let items_sql: Vec<String> = items.iter().map(|i| i.to_string()).collect();
    let mut batches = Vec::new();
    let mut schema = None;
    // One query per row keeps RETURNING expressions exact (volatile functions, subqueries).
    for row in &written {
        let sql = format!(
            "SELECT {} FROM {}",
            items_sql.join(", "),
            row_as_values_sql(def, row, alias)
        );
        let mut b = run_sql_query(session, &sql).await?;
        if schema.is_none() {
            schema = b.first().map(|b| b.schema());
        }
        batches.append(&mut b);
    }
    let columns = match schema {
        Some(s) => columns_of_schema(&s),
        None => returning_columns(session, def, alias, items).await?,
    };
    Ok(StatementResult::Rows {
        columns,
        batches,
        tag: leak_tag(tag),
    })
}

fn leak_tag(tag: &str) -> &'static str {
    match tag {
        "INSERT" => "INSERT",
        "UPDATE" => "UPDATE",
        _ => "DELETE",
    }
}

async fn returning_columns(
    session: &Session,
    def: &TableDef,
    alias: &str,
    items: &[ast::SelectItem],
) -> SqlResult<Vec<ResultColumn>> {
    let nulls: Vec<Value> = def.columns.iter().map(|_| Value::Null).collect();
    let items_sql: Vec<String> = items.iter().map(|i| i.to_string()).collect();
    let sql = format!(
        "SELECT {} FROM {} WHERE FALSE",
        items_sql.join(", "),
        row_as_values_sql(def, &nulls, alias)
    );
    let stmt = parse_sql(&sql)?.pop().expect("one statement");
    let plan = crate::query::plan_statement(session.state(), &session.scope, stmt).await?;
    Ok(columns_of_schema(&plan.schema().inner().clone()))
}

/// Describe for a DML statement: parameter types (from the target columns and the statement's
/// expressions) and RETURNING columns.
pub async fn describe(
    session: &mut Session,
    stmt: &Statement,
    count: usize,
) -> SqlResult<(Vec<Option<ArrowType>>, Option<Vec<ResultColumn>>)> {
    let mut types: Vec<Option<ArrowType>> = vec![None; count];
    match stmt {
        Statement::Insert(ins) => {
            let ast::TableObject::TableName(name) = &ins.table else {
                return Ok((types, None));
            };
            let (def, _) = resolve_table(session, name)?;
            let targets = target_columns(&def, &ins.columns)?;
            if let Some(src) = &ins.source {
                if let ast::SetExpr::Values(values) = src.body.as_ref() {
                    for row in &values.rows {
                        for (pos, e) in row.iter().enumerate() {
                            if let ast::Expr::Value(v) = e {
                                if let ast::Value::Placeholder(p) = &v.value {
                                    if let (Some(i), Some(col)) =
                                        (crate::params::placeholder_index(p), targets.get(pos))
                                    {
                                        if i < count {
                                            types[i] =
                                                Some(arrow_type(&def.columns[*col].data_type));
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            let alias = ins
                .table_alias
                .as_ref()
                .map(|a| a.alias.value.clone())
                .unwrap_or_else(|| def.name.clone());
            let cols = match &ins.returning {
                Some(items) => Some(returning_columns(session, &def, &alias, items).await?),
                None => None,
            };
            Ok((types, cols))
        }
        Statement::Update(upd) => {
            let (name, alias) = table_alias(&upd.table)?;
            let (def, _) = resolve_table(session, &name)?;
            let alias = alias.unwrap_or_else(|| def.name.clone());
            let assignments = assignment_columns(&def, &upd.assignments)?;
            // SET col = $n takes the column's type.
            for (a, (col, _)) in upd.assignments.iter().zip(&assignments) {
                if let ast::Expr::Value(v) = &a.value {
                    if let ast::Value::Placeholder(p) = &v.value {
                        if let Some(i) = crate::params::placeholder_index(p).filter(|i| *i < count)
                        {
                            types[i] = Some(arrow_type(&def.columns[*col].data_type));
                        }
                    }
                }
            }
            let exprs: Vec<String> = assignments.iter().map(|(_, e)| e.clone()).collect();
            let from: Vec<ast::TableWithJoins> = match &upd.from {
                Some(ast::UpdateTableFromKind::AfterSet(f))
                | Some(ast::UpdateTableFromKind::BeforeSet(f)) => f.clone(),
                None => vec![],
            };
            let sql = target_query_sql(&def, &alias, &exprs, &from, upd.selection.as_ref());
            infer_from_query(session, &def, &sql, &mut types).await?;
            let cols = match &upd.returning {
                Some(items) => Some(returning_columns(session, &def, &alias, items).await?),
                None => None,
            };
            Ok((types, cols))
        }
        Statement::Delete(del) => {
            let tables = match &del.from {
                ast::FromTable::WithFromKeyword(t) | ast::FromTable::WithoutKeyword(t) => t,
            };
            let Some(target) = tables.first() else {
                return Ok((types, None));
            };
            let (name, alias) = table_alias(target)?;
            let (def, _) = resolve_table(session, &name)?;
            let alias = alias.unwrap_or_else(|| def.name.clone());
            let using = del.using.clone().unwrap_or_default();
            let sql = target_query_sql(&def, &alias, &[], &using, del.selection.as_ref());
            infer_from_query(session, &def, &sql, &mut types).await?;
            let cols = match &del.returning {
                Some(items) => Some(returning_columns(session, &def, &alias, items).await?),
                None => None,
            };
            Ok((types, cols))
        }
        _ => Ok((types, None)),
    }
}

async fn infer_from_query(
    session: &Session,
    def: &TableDef,
    sql: &str,
    types: &mut [Option<ArrowType>],
) -> SqlResult<()> {
    let stmt = parse_sql(sql)?.pop().expect("one statement");
    *session.scope.dml_capture.lock() = Some((def.oid, Arc::new(Mutex::new(Vec::new()))));
    let plan = crate::query::plan_statement(session.state(), &session.scope, stmt).await;
    *session.scope.dml_capture.lock() = None;
    for (name, t) in plan?.get_parameter_types()? {
        if let Some(i) = crate::params::placeholder_index(&name) {
            if i < types.len() && types[i].is_none() {
                types[i] = t;
            }
        }
    }
    Ok(())
}
