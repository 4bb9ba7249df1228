//! The fast path: point statements on a table's primary key run straight on the storage API,
//! without DataFusion. OLTP clients (pgbench, TPC-C, ORMs) spend most of their statements on
//! four shapes, and planning them through DataFusion costs far more than the lookup itself:
//!
//! - `SELECT cols FROM t WHERE pk = v [AND pk2 = v2 ...]`, where a column may also be chosen by
//!   `CASE v WHEN 1 THEN c1 WHEN 2 THEN c2 ... END` (TPC-C's `s_dist_NN` by district)
//! - `UPDATE t SET c = v | c = c + v | c = c - v, ... WHERE pk = v ...`
//! - `DELETE FROM t WHERE pk = v ...`
//! - `INSERT INTO t [(cols)] VALUES (v, ...), ...` with any number of rows
//!
//! where each `v` is a literal, a parameter (`$n`) or `CURRENT_TIMESTAMP`/`now()`, and the
//! columns an INSERT leaves out (or gives `DEFAULT`) default to a constant, `now()` or a
//! sequence (serial and identity columns). Anything else (RETURNING, CHECK constraints, an
//! UPDATE of a foreign key's column or a DELETE from a referenced table (see
//! `write_constraints`), other defaults, expressions the fast path cannot evaluate exactly as
//! PostgreSQL does) falls back to the general path, which is always correct. A plan is resolved against the catalog once;
//! prepared statements keep it and re-resolve when the catalog version changes.

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::ast::{self, Expr, Statement};
use shoal_storage::catalog::{ConstraintKind, SequenceDef, TableDef};
use shoal_storage::table::{RowLockMode, RowTable, WriteOutcome};
use shoal_storage::types::{DataType, Value};
use shoal_storage::{StorageError, Transaction};
use std::sync::Arc;

use crate::dml::{column_values, resolve_table, unique_violation_named};
use crate::error::{code, SqlError, SqlResult};
use crate::interrupt::RowWait;
use crate::pgtext;
use crate::session::{ResultColumn, Session, StatementResult};
use crate::timezone::TimeZone;
use crate::types::pg_type_of;

mod point_rows;
pub use point_rows::{PointRows, SelectShape};

/// Where a value in a fast statement comes from.
#[derive(Clone, Debug)]
pub enum Operand {
    /// Bound parameter `$n`, zero-based.
    Param(usize),
    /// A literal, already converted to the column's type.
    Const(Value),
    /// `CURRENT_TIMESTAMP` / `now()`.
    Now,
    /// A serial or identity column's default, `nextval(seq)`: a new value for every row.
    NextVal(Arc<SequenceDef>),
}

/// A result column `CASE operand WHEN v1 THEN col1 ... [ELSE col] END` whose arms are all
/// columns of one type: the column it reads is chosen once per execution.
#[derive(Clone, Debug)]
pub struct Choice {
    /// The result column it fills.
    pub position: usize,
    pub operand: Operand,
    /// The operand's column for `Bindings::value` (the first arm's): its type is not used.
    operand_column: usize,
    pub arms: Vec<(Value, usize)>,
    /// The ELSE column; without one, no match gives NULL.
    pub otherwise: Option<usize>,
}

impl Choice {
    /// The table column chosen for an operand value; None for NULL.
    fn column(&self, operand: &Value) -> Option<usize> {
        if operand.is_null() {
            return self.otherwise;
        }
        self.arms
            .iter()
            .find(|(v, _)| v == operand)
            .map(|(_, c)| *c)
            .or(self.otherwise)
    }
}

/// The right side of `SET col = ...`.
#[derive(Clone, Debug)]
pub enum Assign {
    Set(Operand),
    /// `col = col + v` (or `- v` when `negate`), on an integer column.
    Add {
        operand: Operand,
        negate: bool,
    },
}

#[derive(Clone, Debug)]
pub enum FastKind {
    Select {
        projection: Vec<usize>,
        /// Result columns that a CASE chooses (their `projection` entry is a placeholder).
        choices: Vec<Choice>,
        /// Built once: each execution only clones the Arc.
        shape: Arc<SelectShape>,
        /// `FOR UPDATE` / `FOR SHARE` ...: the row lock taken on the row found.
        lock: Option<PointLock>,
    },
    Update {
        assignments: Vec<(usize, Assign)>,
    },
    Delete,
    Insert {
        /// Per row of VALUES, one operand per table column, in table order.
        rows: Vec<Vec<Operand>>,
    },
}

/// The row lock of a point `SELECT ... FOR UPDATE/SHARE`.
#[derive(Clone, Debug)]
pub struct PointLock {
    pub mode: RowLockMode,
    pub nonblock: Option<ast::NonBlock>,
}

/// A point statement resolved against the catalog.
#[derive(Clone, Debug)]
pub struct FastPlan {
    pub def: Arc<TableDef>,
    pub table: Arc<RowTable>,
    /// The primary key's index and one operand per key column (Select, Update, Delete).
    pub key_index: u64,
    pub key: Vec<Operand>,
    pub kind: FastKind,
    /// For each parameter, what it meets.
    pub params: Vec<Option<ParamUse>>,
}

/// What a parameter meets: the column it is compared with or assigned to, and the type its
/// value is converted to: the column's, or unconstrained numeric when it is added to a numeric
/// column (the sum is then rounded to the column's scale once, as PostgreSQL rounds it).
#[derive(Clone, Debug, PartialEq)]
pub struct ParamUse {
    pub column: usize,
    pub data_type: DataType,
}

impl FastPlan {
    /// Result columns when the statement returns rows.
    pub fn columns(&self) -> Option<&[ResultColumn]> {
        match &self.kind {
            FastKind::Select { shape, .. } => Some(&shape.columns),
            _ => None,
        }
    }

    /// The type each parameter should have, from the column it meets.
    pub fn param_type(&self, i: usize) -> Option<&DataType> {
        self.params.get(i)?.as_ref().map(|p| &p.data_type)
    }

    /// Whether the statement writes (or locks) rows, which a read-only transaction refuses.
    pub fn writes(&self) -> bool {
        !matches!(&self.kind, FastKind::Select { lock: None, .. })
    }

    /// Whether parameters of these types (as the client declared them) mean what the fast path
    /// does with them: it converts each value to the type of the column it meets, where
    /// PostgreSQL would compute in the declared type (`int_key = 1.5::float8` finds no row;
    /// converted to the key's type it would find row 2). Integers of any width meet integer
    /// and numeric columns exactly, and text is read by the column type's input function, as
    /// an untyped parameter is; other mismatches go to the general path.
    pub fn accepts(&self, declared: &[ArrowType]) -> bool {
        self.params.iter().zip(declared).all(|(p, declared)| {
            let Some(p) = p else { return true };
            let integer = matches!(
                declared,
                ArrowType::Int16 | ArrowType::Int32 | ArrowType::Int64
            );
            *declared == crate::types::arrow_type(&p.data_type)
                || matches!(declared, ArrowType::Utf8)
                || (integer
                    && matches!(
                        p.data_type,
                        DataType::Int16
                            | DataType::Int32
                            | DataType::Int64
                            | DataType::Numeric { .. }
                    ))
                || (matches!(declared, ArrowType::Decimal128(..))
                    && matches!(p.data_type, DataType::Numeric { .. }))
        })
    }
}

/// Tries to resolve `stmt` as a fast-path statement. None means "use the general path".
pub fn plan(session: &Session, stmt: &Statement, param_count: usize) -> Option<FastPlan> {
    let mut params = vec![None; param_count];
    let plan = match stmt {
        Statement::Query(q) => plan_select(session, q, &mut params),
        Statement::Update(u) => plan_update(session, u, &mut params),
        Statement::Delete(d) => plan_delete(session, d, &mut params),
        Statement::Insert(i) => plan_insert(session, i, &mut params),
        _ => None,
    }?;
    // Every parameter must have been placed; otherwise its type is unknown here.
    if params.iter().any(Option::is_none) {
        return None;
    }
    // Writes to a table with triggers go through `dml`, which fires them.
    if !plan.def.triggers.is_empty() && !matches!(stmt, Statement::Query(_)) {
        return None;
    }
    Some(FastPlan { params, ..plan })
}

fn single_table(
    session: &Session,
    from: &ast::TableWithJoins,
) -> Option<(Arc<TableDef>, Arc<RowTable>, Option<String>)> {
    if !from.joins.is_empty() {
        return None;
    }
    let ast::TableFactor::Table {
        name,
        alias,
        args: None,
        ..
    } = &from.relation
    else {
        return None;
    };
    if alias.as_ref().is_some_and(|a| !a.columns.is_empty()) {
        return None;
    }
    let (def, table) = resolve_table(session, name).ok()?;
    Some((def, table, alias.as_ref().map(|a| a.name.value.clone())))
}

/// The column a (possibly qualified) identifier names.
fn column_of(def: &TableDef, alias: Option<&str>, e: &Expr) -> Option<usize> {
    match e {
        Expr::Identifier(id) => def.column_index(&ident_name(id)),
        Expr::CompoundIdentifier(parts) if parts.len() == 2 => {
            let qualifier = ident_name(&parts[0]);
            if qualifier != alias.unwrap_or(&def.name) {
                return None;
            }
            def.column_index(&ident_name(&parts[1]))
        }
        Expr::Nested(inner) => column_of(def, alias, inner),
        _ => None,
    }
}

/// Unquoted identifiers fold to lower case, as in PostgreSQL.
fn ident_name(id: &ast::Ident) -> String {
    if id.quote_style.is_some() {
        id.value.clone()
    } else {
        id.value.to_lowercase()
    }
}

/// A value operand of type `t` for column `col`: a literal, a parameter or now().
fn operand(
    def: &TableDef,
    col: usize,
    t: &DataType,
    e: &Expr,
    params: &mut [Option<ParamUse>],
) -> Option<Operand> {
    match e {
        Expr::Nested(inner) => operand(def, col, t, inner, params),
        Expr::Value(v) => match &v.value {
            ast::Value::Placeholder(p) => {
                let i = crate::params::placeholder_index(p)?;
                let slot = params.get_mut(i)?;
                // A parameter used with two types is left to the general path, which infers
                // one type for it.
                if slot.as_ref().is_some_and(|p| p.data_type != *t) {
                    return None;
                }
                *slot = Some(ParamUse {
                    column: col,
                    data_type: t.clone(),
                });
                Some(Operand::Param(i))
            }
            ast::Value::Number(n, _) => literal(n, t, false),
            ast::Value::SingleQuotedString(s) => string_literal(s, t).map(Operand::Const),
            ast::Value::Null => Some(Operand::Const(Value::Null)),
            ast::Value::Boolean(b) if *t == DataType::Bool => Some(Operand::Const(Value::Bool(*b))),
            _ => None,
        },
        Expr::UnaryOp {
            op: ast::UnaryOperator::Minus,
            expr,
        } => match expr.as_ref() {
            Expr::Value(v) => match &v.value {
                ast::Value::Number(n, _) => literal(n, t, true),
                _ => None,
            },
            _ => None,
        },
        Expr::Function(f)
            if is_now(f) && matches!(t, DataType::TimestampTz | DataType::Timestamp) =>
        {
            Some(Operand::Now)
        }
        _ => None,
    }
}

/// A string literal as a value of `t`, by the type's input function. A timestamptz is left to
/// the general path, which reads a time without an offset in the session's time zone.
pub(crate) fn string_literal(s: &str, t: &DataType) -> Option<Value> {
    if *t == DataType::TimestampTz {
        return None;
    }
    pgtext::parse_value(s, t, &TimeZone::utc()).ok()
}

/// A numeric literal into an integer, float or numeric column. Anything that would need a
/// rounding or a range decision (an int column given 1.5) goes to the general path so the
/// error or result is exactly PostgreSQL's.
pub(crate) fn literal(n: &str, t: &DataType, negative: bool) -> Option<Operand> {
    let is_integer = n.bytes().all(|b| b.is_ascii_digit());
    let text = if negative {
        format!("-{n}")
    } else {
        n.to_string()
    };
    match t {
        DataType::Int16 | DataType::Int32 | DataType::Int64 if is_integer => {
            pgtext::parse_value(&text, t, &TimeZone::utc())
                .ok()
                .map(Operand::Const)
        }
        DataType::Float32 | DataType::Float64 | DataType::Numeric { .. } => {
            pgtext::parse_value(&text, t, &TimeZone::utc())
                .ok()
                .map(Operand::Const)
        }
        _ => None,
    }
}

pub(crate) fn is_now(f: &ast::Function) -> bool {
    let name = f.name.to_string().to_lowercase();
    let no_args = match &f.args {
        ast::FunctionArguments::None => true,
        ast::FunctionArguments::List(l) => l.args.is_empty(),
        _ => false,
    };
    (name == "now" || name == "current_timestamp" || name == "pg_catalog.now") && no_args
}

/// `pk1 = v1 AND pk2 = v2 ...` covering exactly the primary key.
fn key_condition(
    def: &TableDef,
    alias: Option<&str>,
    selection: Option<&Expr>,
    params: &mut [Option<ParamUse>],
) -> Option<(u64, Vec<Operand>)> {
    let (pk, pk_cols) = def.primary_key()?;
    let ConstraintKind::PrimaryKey { index, .. } = &pk.kind else {
        return None;
    };
    let mut terms = Vec::new();
    conjuncts(selection?, &mut terms);
    let mut key: Vec<Option<Operand>> = vec![None; pk_cols.len()];
    for term in terms {
        let Expr::BinaryOp {
            left,
            op: ast::BinaryOperator::Eq,
            right,
        } = term
        else {
            return None;
        };
        let (col, value) = match (column_of(def, alias, left), column_of(def, alias, right)) {
            (Some(c), None) => (c, right.as_ref()),
            (None, Some(c)) => (c, left.as_ref()),
            _ => return None,
        };
        let slot = pk_cols.iter().position(|k| *k == col)?;
        if key[slot].is_some() {
            return None;
        }
        let t = &def.columns[col].data_type;
        key[slot] = Some(operand(def, col, t, value, params)?);
    }
    let key: Option<Vec<Operand>> = key.into_iter().collect();
    Some((*index as u64, key?))
}

fn conjuncts<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::BinaryOp {
            left,
            op: ast::BinaryOperator::And,
            right,
        } => {
            conjuncts(left, out);
            conjuncts(right, out);
        }
        Expr::Nested(inner) => conjuncts(inner, out),
        other => out.push(other),
    }
}

/// The constraints beyond NOT NULL that a point write must respect, and so which writes the
/// fast path takes: no CHECK (an SQL expression); an INSERT checks its foreign keys itself
/// (`constraints::check_foreign_keys`); an UPDATE only when it assigns no column of a foreign
/// key, in either direction (then no key check applies); a DELETE only of a row nothing can
/// reference.
struct WriteConstraints {
    checks: bool,
    /// Columns of this table's foreign keys, and columns other tables' foreign keys reference.
    key_columns: Vec<usize>,
    referenced: bool,
}

fn write_constraints(session: &Session, def: &TableDef) -> WriteConstraints {
    let mut key_columns = Vec::new();
    let mut checks = false;
    for c in &def.constraints {
        match &c.kind {
            ConstraintKind::Check { .. } => checks = true,
            ConstraintKind::ForeignKey { columns, .. } => key_columns.extend(columns),
            _ => {}
        }
    }
    let referencing = session
        .engine
        .catalog
        .read()
        .referencing_foreign_keys(def.oid);
    for (_, c) in &referencing {
        if let ConstraintKind::ForeignKey { ref_columns, .. } = &c.kind {
            key_columns.extend(ref_columns);
        }
    }
    WriteConstraints {
        checks,
        key_columns,
        referenced: !referencing.is_empty(),
    }
}

fn plan_select(
    session: &Session,
    q: &ast::Query,
    params: &mut [Option<ParamUse>],
) -> Option<FastPlan> {
    if q.with.is_some() || q.order_by.is_some() || q.limit_clause.is_some() || q.fetch.is_some() {
        return None;
    }
    let ast::SetExpr::Select(s) = q.body.as_ref() else {
        return None;
    };
    let plain_group_by =
        matches!(&s.group_by, ast::GroupByExpr::Expressions(e, m) if e.is_empty() && m.is_empty());
    if s.distinct.is_some()
        || s.top.is_some()
        || s.into.is_some()
        || s.from.len() != 1
        || !s.lateral_views.is_empty()
        || s.prewhere.is_some()
        || !plain_group_by
        || s.having.is_some()
        || !s.named_window.is_empty()
        || s.qualify.is_some()
    {
        return None;
    }
    let (def, table, alias) = single_table(session, &s.from[0])?;
    let alias = alias.as_deref();
    let lock = if q.locks.is_empty() {
        None
    } else {
        let (mode, nonblock) = crate::dml::single_table_lock(q, alias.unwrap_or(&def.name))?;
        Some(PointLock { mode, nonblock })
    };
    let mut projection = Vec::new();
    let mut columns = Vec::new();
    let mut choices = Vec::new();
    for item in &s.projection {
        let (expr, name) = match item {
            ast::SelectItem::UnnamedExpr(e) => (e, None),
            ast::SelectItem::ExprWithAlias { expr, alias } => (expr, Some(ident_name(alias))),
            ast::SelectItem::Wildcard(opts) if is_plain_wildcard(opts) => {
                for (i, c) in def.columns.iter().enumerate() {
                    projection.push(i);
                    columns.push(result_column(&c.name, &def, i));
                }
                continue;
            }
            _ => return None,
        };
        if let Expr::Case { .. } = expr {
            let choice = choice_of(&def, alias, expr, projection.len(), params)?;
            let first = choice.operand_column;
            let mut column = result_column(name.as_deref().unwrap_or("case"), &def, first);
            column.table_oid = 0;
            column.attnum = 0;
            projection.push(first);
            columns.push(column);
            choices.push(choice);
            continue;
        }
        let col = column_of(&def, alias, expr)?;
        let c = &def.columns[col];
        projection.push(col);
        columns.push(result_column(name.as_deref().unwrap_or(&c.name), &def, col));
    }
    let (key_index, key) = key_condition(&def, alias, s.selection.as_ref(), params)?;
    let types = projection
        .iter()
        .map(|col| def.columns[*col].data_type.clone())
        .collect();
    let shape = Arc::new(SelectShape::new(columns, types));
    Some(FastPlan {
        def,
        table,
        key_index,
        key,
        kind: FastKind::Select {
            projection,
            choices,
            shape,
            lock,
        },
        params: Vec::new(),
    })
}

/// `CASE operand WHEN 1 THEN c1 ... [ELSE c] END` whose operand is an integer parameter or
/// literal, whose WHEN values are integer literals and whose results are columns of one type.
fn choice_of(
    def: &TableDef,
    alias: Option<&str>,
    e: &Expr,
    position: usize,
    params: &mut [Option<ParamUse>],
) -> Option<Choice> {
    let Expr::Case {
        operand: Some(chosen_by),
        conditions,
        else_result,
        ..
    } = e
    else {
        return None;
    };
    let mut arms = Vec::with_capacity(conditions.len());
    for arm in conditions {
        let value = match literal_value(&arm.condition)? {
            Operand::Const(v @ Value::Int32(_)) => v,
            _ => return None,
        };
        arms.push((value, column_of(def, alias, &arm.result)?));
    }
    let operand_column = arms.first()?.1;
    let otherwise = match else_result {
        Some(e) => Some(column_of(def, alias, e)?),
        None => None,
    };
    let t = &def.columns[operand_column].data_type;
    let same_type = arms
        .iter()
        .map(|(_, c)| *c)
        .chain(otherwise)
        .all(|c| def.columns[c].data_type == *t);
    if !same_type {
        return None;
    }
    let operand = match chosen_by.as_ref() {
        e @ Expr::Value(v) if matches!(v.value, ast::Value::Placeholder(_)) => {
            operand(def, operand_column, &DataType::Int32, e, params)?
        }
        e => literal_value(e)?,
    };
    Some(Choice {
        position,
        operand,
        operand_column,
        arms,
        otherwise,
    })
}

/// An integer literal as an int4 value.
fn literal_value(e: &Expr) -> Option<Operand> {
    match e {
        Expr::Nested(inner) => literal_value(inner),
        Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => literal(n, &DataType::Int32, false),
            _ => None,
        },
        _ => None,
    }
}

fn is_plain_wildcard(opts: &ast::WildcardAdditionalOptions) -> bool {
    opts.opt_ilike.is_none()
        && opts.opt_exclude.is_none()
        && opts.opt_except.is_none()
        && opts.opt_replace.is_none()
        && opts.opt_rename.is_none()
}

/// The result column of table column `column` (0-based) of `def`, under `name`.
fn result_column(name: &str, def: &TableDef, column: usize) -> ResultColumn {
    let (type_oid, typmod) = pg_type_of(&def.columns[column].data_type);
    ResultColumn {
        name: name.into(),
        type_oid,
        typmod,
        table_oid: def.oid,
        attnum: i16::try_from(column + 1).unwrap_or(0),
    }
}

fn plan_update(
    session: &Session,
    u: &ast::Update,
    params: &mut [Option<ParamUse>],
) -> Option<FastPlan> {
    if u.from.is_some()
        || u.returning.is_some()
        || u.or.is_some()
        || u.limit.is_some()
        || !u.order_by.is_empty()
    {
        return None;
    }
    let (def, table, alias) = single_table(session, &u.table)?;
    let constraints = write_constraints(session, &def);
    if constraints.checks {
        return None;
    }
    let alias = alias.as_deref();
    let (_, pk_cols) = def.primary_key()?;
    let pk_cols = pk_cols.to_vec();
    let mut assignments = Vec::new();
    for a in &u.assignments {
        let ast::AssignmentTarget::ColumnName(name) = &a.target else {
            return None;
        };
        let [ast::ObjectNamePart::Identifier(id)] = name.0.as_slice() else {
            return None;
        };
        let col = def.column_index(&ident_name(id))?;
        // Changing the key, a foreign key's column (or a generated identity column) is left
        // to the general path.
        if pk_cols.contains(&col)
            || constraints.key_columns.contains(&col)
            || def.columns[col].identity.is_some()
        {
            return None;
        }
        let column_type = &def.columns[col].data_type;
        let assign = match &a.value {
            Expr::BinaryOp { left, op, right }
                if matches!(op, ast::BinaryOperator::Plus | ast::BinaryOperator::Minus)
                    && column_of(&def, alias, left) == Some(col) =>
            {
                let operand_type = match column_type {
                    DataType::Int16 | DataType::Int32 | DataType::Int64 => column_type.clone(),
                    DataType::Numeric { .. } => DataType::Numeric {
                        precision: None,
                        scale: None,
                    },
                    _ => return None,
                };
                Assign::Add {
                    operand: operand(&def, col, &operand_type, right, params)?,
                    negate: matches!(op, ast::BinaryOperator::Minus),
                }
            }
            v => Assign::Set(operand(&def, col, column_type, v, params)?),
        };
        if assignments.iter().any(|(c, _)| *c == col) {
            return None; // PostgreSQL rejects this; let the general path say so.
        }
        assignments.push((col, assign));
    }
    let (key_index, key) = key_condition(&def, alias, u.selection.as_ref(), params)?;
    Some(FastPlan {
        def,
        table,
        key_index,
        key,
        kind: FastKind::Update { assignments },
        params: Vec::new(),
    })
}

fn plan_delete(
    session: &Session,
    d: &ast::Delete,
    params: &mut [Option<ParamUse>],
) -> Option<FastPlan> {
    if d.using.is_some()
        || d.returning.is_some()
        || d.limit.is_some()
        || !d.order_by.is_empty()
        || !d.tables.is_empty()
    {
        return None;
    }
    let tables = match &d.from {
        ast::FromTable::WithFromKeyword(t) | ast::FromTable::WithoutKeyword(t) => t,
    };
    let [target] = tables.as_slice() else {
        return None;
    };
    let (def, table, alias) = single_table(session, target)?;
    if write_constraints(session, &def).referenced {
        return None;
    }
    let (key_index, key) = key_condition(&def, alias.as_deref(), d.selection.as_ref(), params)?;
    Some(FastPlan {
        def,
        table,
        key_index,
        key,
        kind: FastKind::Delete,
        params: Vec::new(),
    })
}

fn plan_insert(
    session: &Session,
    i: &ast::Insert,
    params: &mut [Option<ParamUse>],
) -> Option<FastPlan> {
    if i.on.is_some()
        || i.returning.is_some()
        || i.or.is_some()
        || !i.assignments.is_empty()
        || i.partitioned.is_some()
        || i.settings.is_some()
    {
        // Settings carry OVERRIDING, which the general INSERT path handles.
        return None;
    }
    let ast::TableObject::TableName(name) = &i.table else {
        return None;
    };
    let (def, table) = resolve_table(session, name).ok()?;
    if write_constraints(session, &def).checks {
        return None;
    }
    let source = i.source.as_ref()?;
    if source.with.is_some() || source.order_by.is_some() || source.limit_clause.is_some() {
        return None;
    }
    let ast::SetExpr::Values(values) = source.body.as_ref() else {
        return None;
    };
    let width = values.rows.first()?.len();
    let targets: Vec<usize> = if i.columns.is_empty() {
        (0..width.min(def.columns.len())).collect()
    } else {
        let mut t = Vec::new();
        for c in &i.columns {
            let [ast::ObjectNamePart::Identifier(id)] = c.0.as_slice() else {
                return None;
            };
            let col = def.column_index(&ident_name(id))?;
            if t.contains(&col) {
                return None;
            }
            t.push(col);
        }
        t
    };
    // Each column left out (or given DEFAULT) gets its default, resolved once.
    let mut defaults: Vec<Option<Operand>> = vec![None; def.columns.len()];
    let mut default_of = |col: usize| -> Option<Operand> {
        if defaults[col].is_none() {
            defaults[col] = Some(default_operand(session, &def, col)?);
        }
        defaults[col].clone()
    };
    let mut rows = Vec::with_capacity(values.rows.len());
    for exprs in &values.rows {
        // Rows of another width are an error the general path words as PostgreSQL does.
        if exprs.len() != targets.len() {
            return None;
        }
        let mut row: Vec<Option<Operand>> = vec![None; def.columns.len()];
        for (col, e) in targets.iter().zip(exprs.iter()) {
            if crate::dml::is_default_keyword(e) {
                continue;
            }
            if def.columns[*col]
                .identity
                .as_ref()
                .is_some_and(|id| id.always)
            {
                return None;
            }
            row[*col] = Some(operand(
                &def,
                *col,
                &def.columns[*col].data_type,
                e,
                params,
            )?);
        }
        let mut full = Vec::with_capacity(row.len());
        for (col, op) in row.into_iter().enumerate() {
            full.push(match op {
                Some(op) => op,
                None => default_of(col)?,
            });
        }
        rows.push(full);
    }
    Some(FastPlan {
        def,
        table,
        key_index: 0,
        key: Vec::new(),
        kind: FastKind::Insert { rows },
        params: Vec::new(),
    })
}

/// The operand of a column's default when the fast path can compute it exactly: none (NULL),
/// a constant, `now()`/`CURRENT_TIMESTAMP` into a timestamp, or `nextval('seq')` into an
/// integer column (serial, identity). None sends the statement to the general path.
fn default_operand(session: &Session, def: &TableDef, col: usize) -> Option<Operand> {
    let column = &def.columns[col];
    let Some(sql) = &column.default_sql else {
        return Some(Operand::Const(Value::Null));
    };
    let dialect = datafusion::sql::sqlparser::dialect::PostgreSqlDialect {};
    let e = datafusion::sql::sqlparser::parser::Parser::new(&dialect)
        .try_with_sql(sql)
        .ok()?
        .parse_expr()
        .ok()?;
    if let Expr::Function(f) = &e {
        if f.name.to_string().eq_ignore_ascii_case("nextval")
            && matches!(
                column.data_type,
                DataType::Int16 | DataType::Int32 | DataType::Int64
            )
        {
            let name = sequence_name_argument(f)?;
            let seq = crate::query::functions::sequence_by_name(&session.scope, name).ok()?;
            return Some(Operand::NextVal(seq));
        }
    }
    operand(def, col, &column.data_type, &e, &mut [])
}

/// The sequence name in `nextval('name')` or `nextval('name'::regclass)`.
fn sequence_name_argument(f: &ast::Function) -> Option<&str> {
    let ast::FunctionArguments::List(list) = &f.args else {
        return None;
    };
    let [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(arg))] = list.args.as_slice() else {
        return None;
    };
    let arg = match arg {
        Expr::Cast {
            expr, data_type, ..
        } if data_type.to_string().eq_ignore_ascii_case("regclass") => expr.as_ref(),
        other => other,
    };
    match arg {
        Expr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(s) => Some(s),
            _ => None,
        },
        _ => None,
    }
}

// ----------------------------------------------------------------------------------------
// Execution

/// Values of the statement's operands for one execution.
struct Bindings<'a> {
    plan: &'a FastPlan,
    params: Params<'a>,
    now_micros: i64,
    /// The session's time zone: now() into a timestamp column is its wall clock, and a
    /// parameter's text is read in it.
    zone: &'a TimeZone,
}

#[derive(Clone, Copy)]
enum Params<'a> {
    /// From Bind: converted to the column's type when used.
    Scalars(&'a [ScalarValue]),
    /// Already of the column's type.
    Values(&'a [Value]),
}

impl Bindings<'_> {
    fn value(&self, op: &Operand, col: usize) -> SqlResult<Value> {
        match op {
            Operand::Const(v) => Ok(v.clone()),
            Operand::NextVal(_) => unreachable!("nextval is evaluated by execute_insert"),
            Operand::Now => Ok(match self.plan.def.columns[col].data_type {
                DataType::Timestamp => Value::Timestamp(self.zone.utc_to_local(self.now_micros)),
                _ => Value::TimestampTz(self.now_micros),
            }),
            Operand::Param(i) => match self.params {
                Params::Scalars(params) => {
                    let t = self.plan.param_type(*i).expect("every parameter is placed");
                    let name = &self.plan.def.columns[col].name;
                    scalar_to_value(&params[*i], t, name, self.zone)
                }
                Params::Values(params) => Ok(params[*i].clone()),
            },
        }
    }

    /// The operand of `col = col + v`. A bound integer is taken at its own width: PostgreSQL
    /// adds an int8 parameter to an int4 column in int8 and checks the range of the sum only.
    fn delta(&self, op: &Operand, col: usize) -> SqlResult<Value> {
        if let (Operand::Param(i), Params::Scalars(params)) = (op, self.params) {
            match &params[*i] {
                ScalarValue::Int16(Some(x)) => return Ok(Value::Int64(*x as i64)),
                ScalarValue::Int32(Some(x)) => return Ok(Value::Int64(*x as i64)),
                ScalarValue::Int64(Some(x)) => return Ok(Value::Int64(*x)),
                _ => {}
            }
        }
        self.value(op, col)
    }
}

/// A bound parameter in the column's type. The common cases are converted directly; the rest
/// go through the general conversion (casts and PostgreSQL's input functions).
fn scalar_to_value(
    v: &ScalarValue,
    t: &DataType,
    column: &str,
    zone: &TimeZone,
) -> SqlResult<Value> {
    match (v, t) {
        (v, _) if v.is_null() => Ok(Value::Null),
        (ScalarValue::Int64(Some(x)), DataType::Int64) => Ok(Value::Int64(*x)),
        (ScalarValue::Int32(Some(x)), DataType::Int32) => Ok(Value::Int32(*x)),
        (ScalarValue::Int32(Some(x)), DataType::Int64) => Ok(Value::Int64(*x as i64)),
        (ScalarValue::Utf8(Some(s)), DataType::Text) => Ok(Value::Text(s.clone())),
        _ => {
            let array: ArrayRef = v.to_array().map_err(SqlError::from)?;
            Ok(column_values(&array, t, column, zone)?.remove(0))
        }
    }
}

fn as_numeric(v: &Value) -> Option<shoal_numeric::Numeric> {
    match v {
        Value::Int16(x) => Some(shoal_numeric::Numeric::from_i64(*x as i64)),
        Value::Int32(x) => Some(shoal_numeric::Numeric::from_i64(*x as i64)),
        Value::Int64(x) => Some(shoal_numeric::Numeric::from_i64(*x)),
        Value::Numeric { mantissa, scale } => {
            shoal_numeric::Numeric::from_i128(*mantissa, *scale as u16).ok()
        }
        _ => None,
    }
}

fn not_null_check(def: &TableDef, row: &[Value], zone: &TimeZone) -> SqlResult<()> {
    for (c, v) in def.columns.iter().zip(row) {
        if c.not_null && matches!(v, Value::Null) {
            return Err(SqlError::new(
                code::NOT_NULL_VIOLATION,
                format!(
                    "null value in column \"{}\" of relation \"{}\" violates not-null constraint",
                    c.name, def.name
                ),
            )
            .with_detail(crate::constraints::failing_row(row, zone))
            .with_table(&def.schema, &def.name)
            .with_column(&c.name));
        }
    }
    Ok(())
}

/// `old + delta` (or `old - delta`) as a value of column type `t`: integers with PostgreSQL's
/// range errors, numerics exactly and then rounded to the column's typmod. NULL on either side
/// gives NULL.
fn add_checked(old: &Value, delta: &Value, negate: bool, t: &DataType) -> SqlResult<Value> {
    if let DataType::Numeric { precision, scale } = t {
        let (Some(a), Some(b)) = (as_numeric(old), as_numeric(delta)) else {
            return Ok(Value::Null);
        };
        let sum = if negate { a.sub(&b) } else { a.add(&b) };
        let sum = sum.map_err(crate::numeric::sql_error)?;
        return crate::types::numeric_value(&sum, *precision, *scale);
    }
    let out_of_range = |name: &str| {
        SqlError::new(
            code::NUMERIC_VALUE_OUT_OF_RANGE,
            format!("{name} out of range"),
        )
    };
    let as_i64 = |v: &Value| match v {
        Value::Int16(x) => Some(*x as i64),
        Value::Int32(x) => Some(*x as i64),
        Value::Int64(x) => Some(*x),
        _ => None,
    };
    let (Some(a), Some(b)) = (as_i64(old), as_i64(delta)) else {
        return Ok(Value::Null); // NULL + x is NULL
    };
    let sum = if negate {
        a.checked_sub(b)
    } else {
        a.checked_add(b)
    };
    match t {
        DataType::Int16 => sum
            .and_then(|s| i16::try_from(s).ok())
            .map(Value::Int16)
            .ok_or_else(|| out_of_range("smallint")),
        DataType::Int32 => sum
            .and_then(|s| i32::try_from(s).ok())
            .map(Value::Int32)
            .ok_or_else(|| out_of_range("integer")),
        _ => sum.map(Value::Int64).ok_or_else(|| out_of_range("bigint")),
    }
}

/// Runs a fast plan inside `txn` with bound parameters.
pub async fn execute(
    session: &Session,
    txn: &mut Transaction,
    plan: &FastPlan,
    params: &[ScalarValue],
) -> SqlResult<StatementResult> {
    execute_with(session, txn, plan, Params::Scalars(params)).await
}

/// Runs a fast plan inside `txn` with parameters already converted to their columns' types
/// (the literals of a cached statement shape).
pub async fn execute_values(
    session: &Session,
    txn: &mut Transaction,
    plan: &FastPlan,
    params: &[Value],
) -> SqlResult<StatementResult> {
    execute_with(session, txn, plan, Params::Values(params)).await
}

async fn execute_with(
    session: &Session,
    txn: &mut Transaction,
    plan: &FastPlan,
    params: Params<'_>,
) -> SqlResult<StatementResult> {
    let now_micros = session.now_micros();
    let b = Bindings {
        plan,
        params,
        now_micros,
        zone: session.settings.time_zone(),
    };
    let pk_cols: Vec<usize> = plan
        .def
        .primary_key()
        .map(|(_, c)| c.to_vec())
        .unwrap_or_default();
    let mut key = Vec::with_capacity(plan.key.len());
    for (op, col) in plan.key.iter().zip(&pk_cols) {
        key.push(b.value(op, *col)?);
    }
    let point = Point {
        plan,
        key_columns: &pk_cols,
        key: &key,
    };
    match &plan.kind {
        FastKind::Select {
            projection,
            choices,
            shape,
            lock: None,
        } if choices.is_empty() => execute_select(session, txn, &point, projection, shape),
        FastKind::Select {
            projection,
            choices,
            shape,
            lock,
        } => {
            let chosen = chosen_projection(&b, projection, choices)?;
            execute_select_locking(session, txn, &point, &chosen, shape, lock.as_ref()).await
        }
        FastKind::Update { assignments } => {
            execute_update(session, txn, &point, &b, assignments).await
        }
        FastKind::Delete => execute_delete(session, txn, &point).await,
        FastKind::Insert { rows } => execute_insert(session, txn, plan, &b, rows).await,
    }
}

/// The projection with each CASE's column chosen by this execution's operand (None: NULL).
fn chosen_projection(
    b: &Bindings<'_>,
    projection: &[usize],
    choices: &[Choice],
) -> SqlResult<Vec<Option<usize>>> {
    let mut chosen: Vec<Option<usize>> = projection.iter().copied().map(Some).collect();
    for choice in choices {
        let operand = b.value(&choice.operand, choice.operand_column)?;
        chosen[choice.position] = choice.column(&operand);
    }
    Ok(chosen)
}

/// The row a point statement addresses: the value of its primary key.
struct Point<'a> {
    plan: &'a FastPlan,
    key_columns: &'a [usize],
    key: &'a [Value],
}

impl Point<'_> {
    /// Whether a row version still has the key. A concurrent UPDATE may have changed it, and
    /// then the statement's WHERE no longer holds for the newest version (READ COMMITTED).
    fn matches(&self, row: &[Value]) -> bool {
        self.key_columns
            .iter()
            .zip(self.key)
            .all(|(c, v)| row[*c] == *v)
    }
}

fn execute_select(
    session: &Session,
    txn: &mut Transaction,
    point: &Point<'_>,
    projection: &[usize],
    shape: &Arc<SelectShape>,
) -> SqlResult<StatementResult> {
    let plan = point.plan;
    let snap = session.engine.db.statement_snapshot(txn);
    note_read(txn, plan.table.id());
    let found = plan
        .table
        .index_get_columns(plan.key_index, &snap, point.key, projection)?;
    let rows = PointRows {
        shape: shape.clone(),
        rows: found.into_iter().collect(),
    };
    rows.into_result()
}

/// `SELECT ... FOR UPDATE/SHARE` of one row: the row found is locked, waiting for its holder
/// (or failing with NOWAIT, or skipped with SKIP LOCKED). As in PostgreSQL under READ
/// COMMITTED, a row a concurrent commit changed is locked and returned in its newest version
/// if that still has the key.
/// Without a lock, it reads the whole row: a SELECT whose columns a CASE chooses.
async fn execute_select_locking(
    session: &Session,
    txn: &mut Transaction,
    point: &Point<'_>,
    projection: &[Option<usize>],
    shape: &Arc<SelectShape>,
    lock: Option<&PointLock>,
) -> SqlResult<StatementResult> {
    let plan = point.plan;
    let mut snap = session.engine.db.statement_snapshot(txn);
    note_read(txn, plan.table.id());
    let found = plan.table.index_get(plan.key_index, &snap, point.key)?;
    let mut rows = PointRows {
        shape: shape.clone(),
        rows: Vec::with_capacity(1),
    };
    let project = |row: &[Value]| -> Vec<Value> {
        projection
            .iter()
            .map(|c| c.map_or(Value::Null, |c| row[c].clone()))
            .collect()
    };
    let Some(lock) = lock else {
        rows.rows.extend(found.map(|(_, row)| project(&row)));
        return rows.into_result();
    };
    if let Some((handle, mut row)) = found {
        let mut waiting = RowWait::default();
        let locked = loop {
            match plan.table.lock_row(txn, &handle, &snap, lock.mode) {
                Ok(WriteOutcome::Done) => break true,
                Ok(WriteOutcome::Changed { newest: None, .. }) => break false,
                Ok(WriteOutcome::Changed {
                    newest: Some(newest),
                    newest_snapshot,
                }) => {
                    if !point.matches(&newest) {
                        break false;
                    }
                    row = newest;
                    snap = newest_snapshot;
                }
                Err(StorageError::WouldBlock { holder }) => match lock.nonblock {
                    Some(ast::NonBlock::Nowait) => {
                        return Err(crate::dml::lock_not_available(&plan.def.name))
                    }
                    Some(ast::NonBlock::SkipLocked) => break false,
                    None => waiting.wait(session, txn, &handle, holder).await?,
                },
                Err(e) => return Err(e.into()),
            }
        };
        if locked {
            rows.rows.push(project(&row));
        }
    }
    rows.into_result()
}

async fn execute_update(
    session: &Session,
    txn: &mut Transaction,
    point: &Point<'_>,
    b: &Bindings<'_>,
    assignments: &[(usize, Assign)],
) -> SqlResult<StatementResult> {
    let plan = point.plan;
    let mut new_values = Vec::with_capacity(assignments.len());
    for (col, a) in assignments {
        new_values.push(match a {
            Assign::Set(op) => b.value(op, *col)?,
            Assign::Add { operand, .. } => b.delta(operand, *col)?,
        });
    }
    let mut snap = session.engine.db.statement_snapshot(txn);
    note_read(txn, plan.table.id());
    let Some((handle, mut base)) = plan.table.index_get(plan.key_index, &snap, point.key)? else {
        return Ok(command("UPDATE", 0));
    };
    // The assigned columns' new values are swapped into `base` rather than into a clone of it
    // (a clone is an allocation per column of text, pgbench's filler among them); `assigned`
    // then holds the values they replaced, and a retry swaps them back (the plan assigns each
    // column at most once, so the swaps commute).
    let mut assigned = Vec::with_capacity(assignments.len());
    let swap_assigned = |row: &mut [Value], assigned: &mut [Value]| {
        for ((col, _), v) in assignments.iter().zip(assigned) {
            std::mem::swap(&mut row[*col], v);
        }
    };
    let mut waiting = RowWait::default();
    loop {
        assigned.clear();
        for ((col, a), v) in assignments.iter().zip(&new_values) {
            assigned.push(match a {
                Assign::Set(_) => v.clone(),
                Assign::Add { negate, .. } => {
                    add_checked(&base[*col], v, *negate, &plan.def.columns[*col].data_type)?
                }
            });
        }
        swap_assigned(&mut base, &mut assigned);
        let row = &base;
        not_null_check(&plan.def, row, b.zone)?;
        match plan.table.update(txn, &handle, &snap, row) {
            Ok(WriteOutcome::Done) => return Ok(command("UPDATE", 1)),
            Ok(WriteOutcome::Changed { newest: None, .. }) => return Ok(command("UPDATE", 0)),
            // READ COMMITTED: apply SET to the newest version if it still has the key.
            Ok(WriteOutcome::Changed {
                newest: Some(newest),
                newest_snapshot,
            }) => {
                if !point.matches(&newest) {
                    return Ok(command("UPDATE", 0));
                }
                base = newest;
                snap = newest_snapshot;
            }
            // The holder's outcome is known after the wait; the retry reports a change.
            Err(StorageError::WouldBlock { holder }) => {
                swap_assigned(&mut base, &mut assigned);
                waiting.wait(session, txn, &handle, holder).await?
            }
            Err(e) => return Err(write_error(&plan.def, e, b.zone)),
        }
    }
}

async fn execute_delete(
    session: &Session,
    txn: &mut Transaction,
    point: &Point<'_>,
) -> SqlResult<StatementResult> {
    let plan = point.plan;
    let mut snap = session.engine.db.statement_snapshot(txn);
    note_read(txn, plan.table.id());
    let Some((handle, _)) = plan.table.index_get(plan.key_index, &snap, point.key)? else {
        return Ok(command("DELETE", 0));
    };
    let mut waiting = RowWait::default();
    loop {
        match plan.table.delete(txn, &handle, &snap) {
            Ok(WriteOutcome::Done) => return Ok(command("DELETE", 1)),
            Ok(WriteOutcome::Changed { newest: None, .. }) => return Ok(command("DELETE", 0)),
            // READ COMMITTED: delete the newest version if it still has the key.
            Ok(WriteOutcome::Changed {
                newest: Some(newest),
                newest_snapshot,
            }) => {
                if !point.matches(&newest) {
                    return Ok(command("DELETE", 0));
                }
                snap = newest_snapshot;
            }
            Err(StorageError::WouldBlock { holder }) => {
                waiting.wait(session, txn, &handle, holder).await?
            }
            Err(e) => return Err(e.into()),
        }
    }
}

async fn execute_insert(
    session: &Session,
    txn: &mut Transaction,
    plan: &FastPlan,
    b: &Bindings<'_>,
    rows: &[Vec<Operand>],
) -> SqlResult<StatementResult> {
    // Foreign keys are checked once every row is in, as PostgreSQL's checks run at the end of
    // the statement: a row may reference itself or a later row of the same VALUES.
    let has_references = plan
        .def
        .constraints
        .iter()
        .any(|c| matches!(c.kind, ConstraintKind::ForeignKey { .. }));
    let mut inserted = Vec::with_capacity(if has_references { rows.len() } else { 0 });
    for (i, ops) in rows.iter().enumerate() {
        crate::dml::yield_between_rows(i).await;
        let mut row = Vec::with_capacity(ops.len());
        for (col, op) in ops.iter().enumerate() {
            row.push(match op {
                Operand::NextVal(seq) => sequence_value(session, seq, &plan.def, col)?,
                op => b.value(op, col)?,
            });
        }
        not_null_check(&plan.def, &row, b.zone)?;
        loop {
            match plan.table.insert(txn, &row) {
                Ok(_) => break,
                Err(StorageError::WouldBlock { holder }) => {
                    session.wait_for_row_holder(txn, holder).await?
                }
                Err(e) => return Err(write_error(&plan.def, e, b.zone)),
            }
        }
        if has_references {
            inserted.push(row);
        }
    }
    for row in &inserted {
        crate::constraints::check_foreign_keys(session, txn, &plan.def, row, None).await?;
    }
    Ok(StatementResult::Command {
        tag: "INSERT".into(),
        rows: Some(rows.len()),
        oid: Some(0),
    })
}

/// nextval of a column's sequence, in the column's type: bigint's value assigned to a smaller
/// integer fails as PostgreSQL's cast does when out of its range.
fn sequence_value(
    session: &Session,
    seq: &SequenceDef,
    def: &TableDef,
    col: usize,
) -> SqlResult<Value> {
    let v = crate::query::functions::next_sequence_value(&session.scope, seq)?;
    let out_of_range = |type_name: &str| {
        SqlError::new(
            code::NUMERIC_VALUE_OUT_OF_RANGE,
            format!("{type_name} out of range"),
        )
    };
    Ok(match def.columns[col].data_type {
        DataType::Int16 => Value::Int16(i16::try_from(v).map_err(|_| out_of_range("smallint"))?),
        DataType::Int32 => Value::Int32(i32::try_from(v).map_err(|_| out_of_range("integer"))?),
        _ => Value::Int64(v),
    })
}

/// A storage error of a write as the client sees it; unique violations name the constraint
/// and the key as PostgreSQL does.
fn write_error(def: &TableDef, e: StorageError, zone: &TimeZone) -> SqlError {
    match e {
        StorageError::UniqueViolation {
            index_name,
            key_columns,
            key,
        } => unique_violation_named(def, &index_name, &key_columns, &key, zone),
        other => other.into(),
    }
}

fn command(tag: &str, rows: usize) -> StatementResult {
    StatementResult::Command {
        tag: tag.into(),
        rows: Some(rows),
        oid: None,
    }
}

/// A SERIALIZABLE transaction's point read of `table`, for its commit check.
fn note_read(txn: &mut Transaction, table: shoal_storage::TableId) {
    if txn.isolation() == shoal_storage::IsolationLevel::Serializable {
        txn.note_reads([table]);
    }
}
