//! INSERT, UPDATE, DELETE and SELECT ... FOR UPDATE on the general path. DataFusion computes
//! what to write (the rows to insert, or the target rows and their new values, found through
//! a scan that records each row's handle); the writes then go through the storage API inside
//! the session's transaction. When a target row was changed by a transaction that committed
//! after our snapshot, READ COMMITTED re-evaluates the statement on the newest version (as
//! PostgreSQL's EvalPlanQual does), so concurrent `SET n = n + 1` never loses an increment.
//! `insert` holds INSERT and ON CONFLICT, `modify` UPDATE and DELETE, `lock` the row-locking
//! SELECT; this module has what they share: type conversion of computed values, RETURNING,
//! error messages and Describe.

pub mod column;
pub mod compact;
pub mod cte;
mod insert;
mod instead;
mod lock;
mod modify;
mod referential;
mod returning;
mod view;

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef};
use datafusion::arrow::compute::{cast_with_options, CastOptions};
use datafusion::arrow::datatypes::{DataType as ArrowType, FieldRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::sql::sqlparser::ast::{self, Statement};
use parking_lot::Mutex;
use shoal_storage::catalog::{ColumnDef, TableDef};
use shoal_storage::table::RowTable;
use shoal_storage::types::{DataType, Value};

use crate::error::{code, SqlError, SqlResult};
use crate::kept_plan::generated;
use crate::params::literal_expr;
use crate::pgtext;
use crate::session::{parse_sql, ResultColumn, Session};
use crate::timezone::TimeZone;
use crate::types::{arrow_type, scalar_from_value, value_from_array};

pub use insert::insert;
use insert::target_columns;
pub use lock::{
    lock_not_available, locking_command_name, restore_locking_syntax, rewrite_locking_syntax,
    select_for_update, single_table_lock,
};
use modify::target_query_sql;
pub use modify::{delete, update};
pub use referential::{referential_action, run_pending_actions, PendingActions};
use returning::{command_done, finish_dml, returning_columns};

/// A table's storage: a row table or a column table (by the table's access method).
pub enum TableStore {
    Row(Arc<RowTable>),
    Column(Arc<shoal_storage::ColumnTable>),
}

/// Resolves a table name for writing, to a table of either kind.
pub fn resolve_store(
    session: &Session,
    name: &ast::ObjectName,
) -> SqlResult<(Arc<TableDef>, TableStore)> {
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
    store_by_oid(session, oid, &rel)
}

/// A table's definition and its storage of either kind.
pub fn store_by_oid(
    session: &Session,
    oid: shoal_storage::catalog::Oid,
    rel: &str,
) -> SqlResult<(Arc<TableDef>, TableStore)> {
    let def = session
        .engine
        .catalog
        .read()
        .tables
        .get(&oid)
        .cloned()
        .ok_or_else(|| SqlError::undefined_table(rel))?;
    let db = &session.engine.db;
    let store = match def.access_method {
        shoal_storage::catalog::AccessMethod::Heap => db.table(oid as u64).map(TableStore::Row),
        shoal_storage::catalog::AccessMethod::Columnar => {
            db.column_table(oid as u64).map(TableStore::Column)
        }
    };
    Ok((def, store.ok_or_else(|| SqlError::undefined_table(rel))?))
}

/// Resolves a table name for writing: it must be a row table (not a view or sequence).
/// Statements that do not work on column tables yet say so with 0A000.
pub fn resolve_table(
    session: &Session,
    name: &ast::ObjectName,
) -> SqlResult<(Arc<TableDef>, Arc<RowTable>)> {
    row_table_only(resolve_store(session, name)?)
}

/// A row table's definition and its storage; `rel` names it in the error if it is gone.
pub fn table_by_oid(
    session: &Session,
    oid: shoal_storage::catalog::Oid,
    rel: &str,
) -> SqlResult<(Arc<TableDef>, Arc<RowTable>)> {
    row_table_only(store_by_oid(session, oid, rel)?)
}

fn row_table_only(
    (def, store): (Arc<TableDef>, TableStore),
) -> SqlResult<(Arc<TableDef>, Arc<RowTable>)> {
    match store {
        TableStore::Row(table) => Ok((def, table)),
        TableStore::Column(_) => Err(SqlError::unsupported(format!(
            "this statement on column table \"{}\"",
            def.name
        ))),
    }
}

pub(crate) fn quote_ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

pub fn qualified(def: &TableDef) -> String {
    format!("{}.{}", quote_ident(&def.schema), quote_ident(&def.name))
}

/// Runs SQL text built by this module as a query and returns its batches. In a prepared
/// statement running with its placeholders in place, the text may hold them too, and the
/// bound values are written in.
async fn run_sql_query(session: &Session, sql: &str) -> SqlResult<Vec<RecordBatch>> {
    match &session.statement_params {
        Some(p) => generated::run_substituted(session, sql, &p.values).await,
        None => crate::query::run_generated_sql(session.state(), &session.scope, sql).await,
    }
}

/// Runs the query that finds a statement's rows: on the plan kept with a prepared statement
/// running with its placeholders in place (see `kept_plan::generated`), else as
/// `run_sql_query`.
async fn run_target_query(session: &Session, sql: &str) -> SqlResult<Vec<RecordBatch>> {
    match &session.statement_params {
        Some(p) => generated::run(session, p, sql).await,
        None => crate::query::run_generated_sql(session.state(), &session.scope, sql).await,
    }
}

/// Converts one result column into values of a table column's type, with PostgreSQL's input
/// rules: text is parsed by the column type's input function; other types are cast.
pub fn column_values(
    array: &ArrayRef,
    t: &DataType,
    column: &str,
    zone: &TimeZone,
) -> SqlResult<Vec<Value>> {
    if let ArrowType::Dictionary(_, value_type) = array.data_type() {
        // A column table's text: decode it, then convert as text.
        let decoded = datafusion::arrow::compute::cast(array, value_type)?;
        return column_values(&decoded, t, column, zone);
    }
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
                pgtext::parse_value(strings.value(i), t, zone)?
            });
        }
        return Ok(out);
    }
    check_assignable(array.data_type(), t, column)?;
    let through_clock = through_wall_clock(array, t, zone)?;
    let array = through_clock.as_ref().unwrap_or(array);
    let target = arrow_type(t);
    let cast = if array.data_type() == &target {
        array.clone()
    } else if crate::numeric::is_numeric(&target) || crate::numeric::is_numeric(array.data_type()) {
        crate::numeric::kernels::cast_array(array, &target).map_err(SqlError::from)?
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

/// Between timestamptz and timestamp or date, PostgreSQL's assignment casts go through the
/// session's wall clock, which Arrow's casts do not know: a timestamp or date stored in a
/// timestamptz column is read in `zone`, a timestamptz stored in a timestamp or date column
/// becomes `zone`'s wall clock. None when no such conversion applies (UTC needs none).
fn through_wall_clock(
    array: &ArrayRef,
    t: &DataType,
    zone: &TimeZone,
) -> SqlResult<Option<ArrayRef>> {
    use datafusion::arrow::array::TimestampMicrosecondArray;
    use datafusion::arrow::datatypes::TimeUnit;
    let zoned = matches!(array.data_type(), ArrowType::Timestamp(_, Some(_)));
    let local = matches!(
        array.data_type(),
        ArrowType::Timestamp(_, None) | ArrowType::Date32
    );
    let to_zoned = matches!(t, DataType::TimestampTz);
    let to_local = matches!(t, DataType::Timestamp | DataType::Date);
    if zone.is_utc() || !(local && to_zoned || zoned && to_local) {
        return Ok(None);
    }
    let micros = cast_with_options(
        array,
        &ArrowType::Timestamp(TimeUnit::Microsecond, None),
        &CastOptions {
            safe: false,
            ..Default::default()
        },
    )?;
    let micros = micros
        .as_any()
        .downcast_ref::<TimestampMicrosecondArray>()
        .expect("cast to microsecond timestamps");
    Ok(Some(if to_zoned {
        let utc: TimestampMicrosecondArray = micros.unary(|v| zone.local_to_utc(v));
        Arc::new(utc.with_timezone("UTC"))
    } else {
        let wall: TimestampMicrosecondArray = micros.unary(|v| zone.utc_to_local(v));
        Arc::new(wall)
    }))
}

/// PostgreSQL stores a value of another type in a column only through an assignment cast:
/// numbers convert among themselves and dates among themselves, anything converts to text, but
/// a boolean does not become an integer (nor the other way round). Arrow would cast them all.
/// Text input is not checked here: it stands for PostgreSQL's untyped literals, which the
/// column type's input function parses.
fn check_assignable(from: &ArrowType, to: &DataType, column: &str) -> SqlResult<()> {
    let numeric = |t: &ArrowType| {
        t.is_integer()
            || t.is_floating()
            || matches!(t, ArrowType::Decimal128(..) | ArrowType::Decimal256(..))
            || crate::numeric::is_numeric(t)
    };
    let datetime = |t: &ArrowType| matches!(t, ArrowType::Date32 | ArrowType::Timestamp(..));
    let allowed = match to {
        DataType::Text | DataType::Varchar(_) | DataType::Char(_) => true,
        _ if matches!(from, ArrowType::Null) => true,
        DataType::Bool => matches!(from, ArrowType::Boolean),
        DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::Float32
        | DataType::Float64
        | DataType::Numeric { .. } => numeric(from),
        DataType::Date | DataType::Timestamp | DataType::TimestampTz => datetime(from),
        DataType::Interval => matches!(from, ArrowType::Interval(_)),
        DataType::Bytea => matches!(from, ArrowType::Binary | ArrowType::BinaryView),
        DataType::Uuid => false,
        DataType::Time => matches!(from, ArrowType::Time64(_) | ArrowType::Time32(_)),
        DataType::Json | DataType::Jsonb | DataType::Enum(_) => false,
        DataType::Array(_) => matches!(from, ArrowType::List(_) | ArrowType::LargeList(_)),
    };
    if allowed {
        return Ok(());
    }
    Err(SqlError::new(
        code::DATATYPE_MISMATCH,
        format!(
            "column \"{column}\" is of type {} but expression is of type {}",
            crate::types::format_type(to),
            pg_type_name_of_arrow(from)
        ),
    )
    .with_hint("You will need to rewrite or cast the expression."))
}

/// The PostgreSQL name of the type a computed value of this Arrow type has.
pub(crate) fn pg_type_name_of_arrow(t: &ArrowType) -> &'static str {
    match t {
        ArrowType::Boolean => "boolean",
        ArrowType::Int8 | ArrowType::Int16 => "smallint",
        ArrowType::Int32 => "integer",
        ArrowType::Int64 => "bigint",
        ArrowType::Float16 | ArrowType::Float32 => "real",
        ArrowType::Float64 => "double precision",
        ArrowType::Decimal128(..) | ArrowType::Decimal256(..) | ArrowType::LargeBinary => "numeric",
        ArrowType::Date32 => "date",
        ArrowType::Timestamp(_, None) => "timestamp without time zone",
        ArrowType::Timestamp(_, Some(_)) => "timestamp with time zone",
        ArrowType::Interval(_) => "interval",
        ArrowType::Binary | ArrowType::BinaryView => "bytea",
        _ => "text",
    }
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
        (v, _) => v,
    })
}

pub(crate) fn batch_rows(
    batches: &[RecordBatch],
    def: &TableDef,
    first_col: usize,
    zone: &TimeZone,
) -> SqlResult<Vec<Vec<Value>>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    for b in batches {
        let mut cursor = RowCursor::new(b, def, first_col, zone)?;
        while cursor.next_into(&mut row) {
            rows.push(std::mem::replace(
                &mut row,
                Vec::with_capacity(def.columns.len()),
            ));
        }
    }
    Ok(rows)
}

/// Rows a bulk statement writes between two yields to the other connections of its thread.
/// Connections share a thread each (`shoal_server`'s connection threads) and switch only at an
/// await that really waits, which writing rows to memory never does: without these yields a
/// million-row INSERT ... SELECT would hold up every connection of its thread, a CancelRequest
/// for it included.
const ROWS_PER_YIELD: usize = 1024;

/// Yields after every `ROWS_PER_YIELD` rows; `rows_done` counts the statement's rows so far.
pub(crate) async fn yield_between_rows(rows_done: usize) {
    if rows_done % ROWS_PER_YIELD == ROWS_PER_YIELD - 1 {
        tokio::task::yield_now().await;
    }
}

/// The rows of one batch, converted a column at a time (`column_values`) and handed out one by
/// one into a vector the caller reuses. Bulk INSERT and COPY store rows this way rather than
/// through `batch_rows`, so that no per-row vector lives while rows are being stored: a
/// batch's row vectors, freed one by one between the stored rows' own allocations, left holes
/// that glibc splits for the next rows and never gets back (a 144-byte vector freed, a 96-byte
/// row carved from it, a 48-byte hole kept): ~30 bytes of RSS per pgbench_accounts row.
pub(crate) struct RowCursor {
    columns: Vec<std::vec::IntoIter<Value>>,
    /// Rows not handed out yet (a table may have no columns).
    rows_left: usize,
}

impl RowCursor {
    /// The rows of `batch`, whose columns from `first_col` on are `def`'s columns.
    pub(crate) fn new(
        batch: &RecordBatch,
        def: &TableDef,
        first_col: usize,
        zone: &TimeZone,
    ) -> SqlResult<RowCursor> {
        let mut columns = Vec::with_capacity(def.columns.len());
        for (i, c) in def.columns.iter().enumerate() {
            let values = column_values(batch.column(first_col + i), &c.data_type, &c.name, zone)?;
            columns.push(values.into_iter());
        }
        Ok(RowCursor {
            columns,
            rows_left: batch.num_rows(),
        })
    }

    /// Replaces `row`'s content with the next row's values; false once all rows were given.
    pub(crate) fn next_into(&mut self, row: &mut Vec<Value>) -> bool {
        row.clear();
        if self.rows_left == 0 {
            return false;
        }
        self.rows_left -= 1;
        for column in &mut self.columns {
            row.push(column.next().expect("a value per row in every column"));
        }
        true
    }
}

pub(crate) fn default_expr_sql(def: &TableDef, col: usize) -> String {
    let c = &def.columns[col];
    if let Some(d) = &c.default_sql {
        d.clone()
    } else {
        "NULL".to_string()
    }
}

pub(crate) fn is_default_keyword(e: &ast::Expr) -> bool {
    matches!(e, ast::Expr::Identifier(i) if i.value.eq_ignore_ascii_case("default") && i.quote_style.is_none())
}

pub fn unique_violation(session: &Session, def: &TableDef, index: u64, row: &[Value]) -> SqlError {
    let catalog = session.engine.catalog.read();
    match catalog.indexes.get(&(index as u32)) {
        Some(idx) => {
            let key: Vec<Value> = idx.columns.iter().map(|c| row[*c].clone()).collect();
            let zone = session.settings.time_zone();
            unique_violation_named(def, &idx.name, &idx.columns, &key, zone)
        }
        None => SqlError::new(
            code::UNIQUE_VIOLATION,
            "duplicate key value violates unique constraint",
        )
        .with_table(&def.schema, &def.name),
    }
}

pub fn unique_violation_named(
    def: &TableDef,
    index_name: &str,
    key_columns: &[usize],
    key: &[Value],
    zone: &TimeZone,
) -> SqlError {
    SqlError::new(
        code::UNIQUE_VIOLATION,
        format!("duplicate key value violates unique constraint \"{index_name}\""),
    )
    .with_detail(format!(
        "Key {} already exists.",
        key_text(def, key_columns, key, zone)
    ))
    .with_table(&def.schema, &def.name)
    .with_constraint(index_name)
}

/// CREATE UNIQUE INDEX (or a rewrite rebuilding one) found two rows with the same key.
pub fn duplicate_index_key(
    def: &TableDef,
    index_name: &str,
    key_columns: &[usize],
    key: &[Value],
    zone: &TimeZone,
) -> SqlError {
    SqlError::new(
        code::UNIQUE_VIOLATION,
        format!("could not create unique index \"{index_name}\""),
    )
    .with_detail(format!(
        "Key {} is duplicated.",
        key_text(def, key_columns, key, zone)
    ))
    .with_table(&def.schema, &def.name)
    .with_constraint(index_name)
}

/// `(a, b)=(1, x)`, as PostgreSQL's unique-violation details show a key.
/// A timestamptz in a key shows in `zone`, the session's time zone.
fn key_text(def: &TableDef, key_columns: &[usize], key: &[Value], zone: &TimeZone) -> String {
    let cols: Vec<&str> = key_columns
        .iter()
        .map(|c| def.columns[*c].name.as_str())
        .collect();
    let vals: Vec<String> = key
        .iter()
        .map(|v| pgtext::format_value(v, zone).unwrap_or_else(|| "null".into()))
        .collect();
    format!("({})=({})", cols.join(", "), vals.join(", "))
}

/// A one-row derived table holding `values` under the table's column names.
fn row_as_values_sql(columns: &[ColumnDef], values: &[Value], alias: &str) -> String {
    let literals: Vec<String> = columns
        .iter()
        .zip(values)
        .map(|(c, v)| column_literal(v, &c.data_type))
        .collect();
    let names: Vec<String> = columns.iter().map(|c| quote_ident(&c.name)).collect();
    format!(
        "(VALUES ({})) AS {}({})",
        literals.join(", "),
        quote_ident(alias),
        names.join(", ")
    )
}

/// A literal of a column's value that plans to the column's own type, so that expressions over
/// it (RETURNING, ON CONFLICT, re-checks) see what a scan of the table would: `numeric(5,1)`
/// keeps its scale and a NULL text stays text rather than becoming an untyped NULL.
fn column_literal(v: &Value, t: &DataType) -> String {
    let literal = literal_expr(&scalar_from_value(v, t)).to_string();
    match t {
        DataType::Numeric {
            precision: Some(_), ..
        } => format!("CAST({literal} AS {})", crate::types::format_type(t)),
        DataType::Text | DataType::Varchar(_) | DataType::Char(_) if v.is_null() => {
            "CAST(NULL AS TEXT)".to_string()
        }
        // Text to DataFusion: the cast marks the type the value has.
        DataType::Uuid | DataType::Json | DataType::Jsonb | DataType::Array(_) => {
            let literal = if v.is_null() {
                "NULL".to_string()
            } else {
                literal
            };
            format!("CAST({literal} AS {})", crate::types::format_type(t))
        }
        _ => literal,
    }
}

/// The columns a SET list assigns and the SQL of each new value (DEFAULT already replaced by
/// the column's default). `SET (a, b) = (x, y)` is taken as `SET a = x, b = y`.
fn assignment_columns(
    def: &TableDef,
    assignments: &[ast::Assignment],
) -> SqlResult<Vec<(usize, String)>> {
    let mut out: Vec<(usize, String)> = Vec::new();
    for a in assignments {
        for (name, value) in assignment_pairs(a)? {
            let idx = assigned_column(def, name, value)?;
            if out.iter().any(|(c, _)| *c == idx) {
                return Err(SqlError::syntax(format!(
                    "multiple assignments to same column \"{}\"",
                    def.columns[idx].name
                )));
            }
            let value = if is_default_keyword(value) {
                default_expr_sql(def, idx)
            } else {
                value.to_string()
            };
            out.push((idx, value));
        }
    }
    Ok(out)
}

/// One SET item as (column, value) pairs.
fn assignment_pairs(a: &ast::Assignment) -> SqlResult<Vec<(&ast::ObjectName, &ast::Expr)>> {
    match &a.target {
        ast::AssignmentTarget::ColumnName(name) => Ok(vec![(name, &a.value)]),
        ast::AssignmentTarget::Tuple(names) => {
            let values: Vec<&ast::Expr> = match &a.value {
                ast::Expr::Tuple(values) => values.iter().collect(),
                ast::Expr::Nested(value) => vec![value.as_ref()],
                _ => {
                    return Err(SqlError::unsupported(
                        "multiple-column assignment from a subquery or row value",
                    ))
                }
            };
            if values.len() != names.len() {
                return Err(SqlError::syntax(
                    "number of columns does not match number of values",
                ));
            }
            Ok(names.iter().zip(values).collect())
        }
    }
}

/// The column a SET item assigns; identity columns GENERATED ALWAYS only take DEFAULT.
fn assigned_column(def: &TableDef, name: &ast::ObjectName, value: &ast::Expr) -> SqlResult<usize> {
    let col_name = crate::ddl::ident_of(&name.0.last().map(|p| p.to_string()).unwrap_or_default());
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
        if id.always && !is_default_keyword(value) {
            return Err(SqlError::new(
                code::GENERATED_ALWAYS,
                format!("column \"{col_name}\" can only be updated to DEFAULT"),
            )
            .with_detail(format!(
                "Column \"{col_name}\" is an identity column defined as GENERATED ALWAYS."
            )));
        }
    }
    Ok(idx)
}

/// Unquoted identifiers fold to lower case, as in PostgreSQL.
fn ident_name(id: &ast::Ident) -> String {
    if id.quote_style.is_some() {
        id.value.clone()
    } else {
        id.value.to_lowercase()
    }
}

/// The target table of an UPDATE/DELETE/FOR UPDATE and the alias it is given, if any.
fn table_alias(t: &ast::TableWithJoins) -> SqlResult<(ast::ObjectName, Option<String>)> {
    match &t.relation {
        ast::TableFactor::Table { name, alias, .. } => {
            Ok((name.clone(), alias.as_ref().map(|a| ident_name(&a.name))))
        }
        _ => Err(SqlError::unsupported("UPDATE/DELETE of a derived table")),
    }
}

/// Describe for a DML statement: parameter types (from the target columns and the statement's
/// expressions) and RETURNING columns.
/// The fields of a DML statement's parameters (their Arrow types, and in the metadata the
/// PostgreSQL type where the Arrow type does not say it: uuid, json) and its result columns.
pub async fn describe(
    session: &mut Session,
    stmt: &Statement,
    count: usize,
) -> SqlResult<(Vec<Option<FieldRef>>, Option<Vec<ResultColumn>>)> {
    let mut types: Vec<Option<FieldRef>> = vec![None; count];
    // Written by a view's triggers: no table columns type the parameters.
    if instead::writes_through_triggers(session, stmt) {
        return Ok((types, instead::describe_returning(session, stmt).await?));
    }
    let columns = match stmt {
        Statement::Insert(ins) => describe_insert(session, ins, &mut types).await?,
        Statement::Update(upd) => describe_update(session, upd, &mut types).await?,
        Statement::Delete(del) => describe_delete(session, del, &mut types).await?,
        _ => None,
    };
    Ok((types, columns))
}

/// Whether a parameter appears in `e`.
fn has_placeholder(e: &ast::Expr) -> bool {
    use std::ops::ControlFlow;
    ast::visit_expressions(e, |e| match e {
        ast::Expr::Value(v) if matches!(v.value, ast::Value::Placeholder(_)) => {
            ControlFlow::Break(())
        }
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

/// The type of parameter `$n` when `e` is just that parameter.
fn set_placeholder_type(e: &ast::Expr, t: &DataType, types: &mut [Option<FieldRef>]) {
    if let ast::Expr::Value(v) = e {
        if let ast::Value::Placeholder(p) = &v.value {
            if let Some(i) = crate::params::placeholder_index(p).filter(|i| *i < types.len()) {
                types[i] = Some(Arc::new(crate::types::arrow_field(p, t)));
            }
        }
    }
}

async fn describe_insert(
    session: &Session,
    ins: &ast::Insert,
    types: &mut [Option<FieldRef>],
) -> SqlResult<Option<Vec<ResultColumn>>> {
    let ast::TableObject::TableName(name) = &ins.table else {
        return Ok(None);
    };
    let (def, _) = resolve_store(session, name)?;
    let targets = target_columns(&def, &ins.columns)?;
    if let Some(src) = &ins.source {
        if let ast::SetExpr::Values(values) = src.body.as_ref() {
            // Expressions over parameters (`$4 * 2.0`, `lower($1)`): typed as PostgreSQL
            // types them, by the operators and functions around them.
            let mut expressions = Vec::new();
            for row in &values.rows {
                for (e, col) in row.iter().zip(&targets) {
                    set_placeholder_type(e, &def.columns[*col].data_type, types);
                    if !matches!(e, ast::Expr::Value(_)) && has_placeholder(e) {
                        expressions.push(e.to_string());
                    }
                }
            }
            if !expressions.is_empty() {
                let sql = format!("SELECT {}", expressions.join(", "));
                infer_from_query(session, &def, &sql, types).await?;
            }
        }
    }
    // ON CONFLICT ... DO UPDATE SET col = $n takes the column's type.
    if let Some(ast::OnInsert::OnConflict(oc)) = &ins.on {
        if let ast::OnConflictAction::DoUpdate(du) = &oc.action {
            let assignments = assignment_columns(&def, &du.assignments)?;
            let mut values = Vec::with_capacity(assignments.len());
            for a in &du.assignments {
                values.extend(assignment_pairs(a)?.into_iter().map(|(_, v)| v));
            }
            for (value, (col, _)) in values.into_iter().zip(&assignments) {
                set_placeholder_type(value, &def.columns[*col].data_type, types);
            }
        }
    }
    let alias = ins
        .table_alias
        .as_ref()
        .map(|a| ident_name(&a.alias))
        .unwrap_or_else(|| def.name.clone());
    match &ins.returning {
        Some(items) => Ok(Some(
            returning_columns(session, &def.columns, &alias, items, &[]).await?,
        )),
        None => Ok(None),
    }
}

async fn describe_update(
    session: &Session,
    upd: &ast::Update,
    types: &mut [Option<FieldRef>],
) -> SqlResult<Option<Vec<ResultColumn>>> {
    let rewritten = view::update_onto_table(session, upd.clone())?;
    let upd = &rewritten;
    let (name, alias) = table_alias(&upd.table)?;
    let (def, _) = resolve_store(session, &name)?;
    let alias = alias.unwrap_or_else(|| def.name.clone());
    let assignments = assignment_columns(&def, &upd.assignments)?;
    // SET col = $n takes the column's type.
    let mut values = Vec::with_capacity(assignments.len());
    for a in &upd.assignments {
        values.extend(assignment_pairs(a)?.into_iter().map(|(_, v)| v));
    }
    for (value, (col, _)) in values.into_iter().zip(&assignments) {
        set_placeholder_type(value, &def.columns[*col].data_type, types);
    }
    let exprs: Vec<String> = assignments.iter().map(|(_, e)| e.clone()).collect();
    let from = modify::update_from(upd);
    let sql = target_query_sql(&def, &alias, &exprs, &from, upd.selection.as_ref());
    infer_from_query(session, &def, &sql, types).await?;
    match &upd.returning {
        Some(items) => Ok(Some(
            returning_columns(session, &def.columns, &alias, items, &from).await?,
        )),
        None => Ok(None),
    }
}

async fn describe_delete(
    session: &Session,
    del: &ast::Delete,
    types: &mut [Option<FieldRef>],
) -> SqlResult<Option<Vec<ResultColumn>>> {
    let rewritten = view::delete_onto_table(session, del.clone())?;
    let del = &rewritten;
    let tables = match &del.from {
        ast::FromTable::WithFromKeyword(t) | ast::FromTable::WithoutKeyword(t) => t,
    };
    let Some(target) = tables.first() else {
        return Ok(None);
    };
    let (name, alias) = table_alias(target)?;
    let (def, _) = resolve_store(session, &name)?;
    let alias = alias.unwrap_or_else(|| def.name.clone());
    let using = del.using.clone().unwrap_or_default();
    let sql = target_query_sql(&def, &alias, &[], &using, del.selection.as_ref());
    infer_from_query(session, &def, &sql, types).await?;
    match &del.returning {
        Some(items) => Ok(Some(
            returning_columns(session, &def.columns, &alias, items, &using).await?,
        )),
        None => Ok(None),
    }
}

async fn infer_from_query(
    session: &Session,
    def: &TableDef,
    sql: &str,
    types: &mut [Option<FieldRef>],
) -> SqlResult<()> {
    let stmt = parse_sql(sql)?.pop().expect("one statement");
    *session.scope.dml_capture.lock() = vec![(def.oid, Arc::new(Mutex::new(Vec::new())))];
    let plan = crate::query::plan_statement(session.state(), &session.scope, stmt).await;
    session.scope.dml_capture.lock().clear();
    for (name, t) in plan?.get_parameter_fields()? {
        if let Some(i) = crate::params::placeholder_index(&name) {
            if i < types.len() && types[i].is_none() {
                types[i] = t;
            }
        }
    }
    Ok(())
}
