//! Which index a scan of a row table reads, from the filters DataFusion pushes down. Any index
//! whose rows are all in it (not a partial one) qualifies: the primary key or a secondary
//! index. The filters give each column equalities (`=`, `IN (...)`) and bounds (`<`, `<=`, `>`,
//! `>=`, `BETWEEN`); an index is usable when its leading columns have equalities and the next
//! one perhaps a bound, and the index with the longest such prefix wins (a unique index fully
//! matched first). Its ranges are one per combination of the equalities' values. Row-value
//! IN lists (`(a, b) IN ((1, 2), (3, 4))`) and ORs of such equalities pin several columns at
//! once.
//!
//! Every range covers at least the rows that pass the filters it came from, and the filters
//! stay with DataFusion (pushed down as Inexact), so an index read never changes an answer:
//! it only leaves out rows the filters would drop.
//!
//! The values compared with may be literals or a kept plan's parameters (`kept_plan`): the
//! filters of a kept plan are pushed down while they still hold placeholders, and its scans
//! choose their index and ranges again from each execution's parameter values.

use std::cmp::{Ordering, Reverse};
use std::ops::Bound;

use datafusion::arrow::array::Array;
use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator};
use shoal_storage::catalog::TableDef;
use shoal_storage::index::IndexDef;
use shoal_storage::types::{DataType, Value};
use shoal_storage::IndexId;

/// Ranges an index read may expand into (the product of the IN lists' lengths); beyond it the
/// IN list on the last such column is left to the filter.
pub const INDEX_RANGES_MAX: usize = 1024;

/// A key range of an index: bounds on a prefix of its columns.
pub type KeyRange = (Bound<Vec<Value>>, Bound<Vec<Value>>);

/// The index a scan reads and the key ranges it reads of it, in key order.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexRead {
    pub index: IndexId,
    pub ranges: Vec<KeyRange>,
}

/// Which expressions count as values to compare key columns with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyValues {
    /// Literals and the bound parameters of a kept plan: a scan choosing its ranges.
    Bound,
    /// Placeholders too, standing for any value: deciding which filters to push down, where
    /// only the filters' shapes matter.
    Shape,
}

/// What the filters say about one column.
#[derive(Debug, Default, Clone)]
struct ColumnCondition {
    /// The only values the column may have (from `=` or `IN`), sorted and distinct.
    points: Option<Vec<Value>>,
    lower: Option<Bound<Value>>,
    upper: Option<Bound<Value>>,
}

impl ColumnCondition {
    fn bounded(&self) -> bool {
        self.lower.is_some() || self.upper.is_some()
    }
}

/// The index read for `filters` over the table, or None when no index helps (a scan).
pub fn choose(
    def: &TableDef,
    indexes: &[IndexDef],
    filters: &[Expr],
    values: KeyValues,
) -> Option<IndexRead> {
    let conditions = column_conditions(def, filters, values);
    let tuples: Vec<TupleSet> = filters
        .iter()
        .filter_map(|f| tuple_set(def, f, values))
        .collect();
    let constrained = |c: &ColumnCondition| c.points.is_some() || c.bounded();
    if tuples.is_empty() && !conditions.iter().any(constrained) {
        return None;
    }
    let mut best: Option<((usize, bool, bool), &IndexDef, Vec<Vec<Value>>)> = None;
    for index in indexes.iter().filter(|i| usable_index(i)) {
        let keys = point_prefixes(index, &conditions, &tuples);
        let prefix = keys.first().map_or(0, Vec::len);
        let ranged = index
            .columns
            .get(prefix)
            .is_some_and(|&c| conditions[c].bounded());
        if prefix == 0 && !ranged {
            continue;
        }
        let whole_unique_key = index.unique && prefix == index.columns.len();
        let score = (prefix, whole_unique_key, ranged);
        if best.as_ref().is_none_or(|(s, _, _)| score > *s) {
            best = Some((score, index, keys));
        }
    }
    let (_, index, keys) = best?;
    let prefix = keys.first().map_or(0, Vec::len);
    let range_column = index.columns.get(prefix).map(|&c| &conditions[c]);
    let ranges = keys
        .iter()
        .map(|key| {
            let lower = extend(key, range_column.and_then(|c| c.lower.clone()));
            let upper = extend(key, range_column.and_then(|c| c.upper.clone()));
            (lower, upper)
        })
        .collect();
    Some(IndexRead {
        index: index.id,
        ranges,
    })
}

/// The key prefixes the filters pin for an index: each combination of the equalities on its
/// leading columns (as many columns as the range budget allows), or the rows of a row-value
/// IN list or OR of equalities over exactly its first columns, whichever is longer. A single
/// empty prefix when neither pins its first column.
fn point_prefixes(
    index: &IndexDef,
    conditions: &[ColumnCondition],
    tuples: &[TupleSet],
) -> Vec<Vec<Value>> {
    let mut keys: Vec<Vec<Value>> = vec![Vec::new()];
    for &c in &index.columns {
        let Some(points) = &conditions[c].points else {
            break;
        };
        if keys.len().saturating_mul(points.len()) > INDEX_RANGES_MAX {
            break;
        }
        keys = keys
            .iter()
            .flat_map(|key| {
                points.iter().map(move |v| {
                    let mut longer = key.clone();
                    longer.push(v.clone());
                    longer
                })
            })
            .collect();
    }
    for t in tuples {
        let width = t.columns.len();
        let longer = width > keys[0].len() && width <= index.columns.len();
        let leading = &index.columns[..width.min(index.columns.len())];
        if !longer || t.rows.len() > INDEX_RANGES_MAX || !same_set(leading, &t.columns) {
            continue;
        }
        // The tuple's values in the index's column order.
        let order: Vec<usize> = leading
            .iter()
            .map(|c| t.columns.iter().position(|tc| tc == c).expect("same set"))
            .collect();
        keys = t
            .rows
            .iter()
            .map(|row| order.iter().map(|&i| row[i].clone()).collect())
            .collect();
        // A row listed twice must be read once.
        keys.sort_by(|a, b| compare_keys(a, b));
        keys.dedup_by(|a, b| compare_keys(a, b) == Ordering::Equal);
    }
    keys
}

fn compare_keys(a: &[Value], b: &[Value]) -> Ordering {
    a.iter()
        .zip(b)
        .map(|(x, y)| x.total_cmp(y))
        .find(|o| *o != Ordering::Equal)
        .unwrap_or_else(|| a.len().cmp(&b.len()))
}

fn same_set(a: &[usize], b: &[usize]) -> bool {
    a.len() == b.len() && a.iter().all(|c| b.contains(c)) && b.iter().all(|c| a.contains(c))
}

/// Whether an index has `key_columns` among its leading columns, every other leading column
/// before the last of them pinned by an equality of `filters`: reading it once per key value
/// (`index_join`) then reads only rows with those keys.
pub fn leads_an_index(
    def: &TableDef,
    indexes: &[IndexDef],
    filters: &[Expr],
    key_columns: &[usize],
) -> bool {
    let conditions = column_conditions(def, filters, KeyValues::Shape);
    indexes.iter().filter(|i| usable_index(i)).any(|index| {
        let mut missing = key_columns.len();
        for c in &index.columns {
            if key_columns.contains(c) {
                missing -= 1;
                if missing == 0 {
                    return true;
                }
            } else if conditions[*c].points.is_none() {
                return false;
            }
        }
        false
    })
}

/// An index whose order is `sort_columns`' order once the filters pin its leading columns:
/// `WHERE w = $1 AND d = $2 ORDER BY o` over an index on (w, d, o, ...). Returns the index and
/// how many leading columns are pinned (by `=` with one value each); None when no index has
/// that order. The index with the most pinned columns is preferred (its range is the
/// narrowest), then a unique one, then the shortest.
pub fn ordered_index(
    def: &TableDef,
    indexes: &[IndexDef],
    filters: &[Expr],
    sort_columns: &[usize],
) -> Option<(IndexId, usize)> {
    let conditions = column_conditions(def, filters, KeyValues::Shape);
    let pinned = |c: usize| conditions[c].points.as_ref().is_some_and(|p| p.len() == 1);
    indexes
        .iter()
        .filter(|i| usable_index(i))
        .filter_map(|index| {
            let prefix = index.columns.iter().take_while(|&&c| pinned(c)).count();
            // A pinned column may also be sorted on (it has one value): the sort columns
            // start at the first that is not pinned.
            let sorted: Vec<usize> = sort_columns
                .iter()
                .copied()
                .skip_while(|&c| index.columns[..prefix].contains(&c))
                .collect();
            let follows = index.columns[prefix..].starts_with(&sorted);
            (follows && !sorted.is_empty()).then_some((index, prefix))
        })
        .min_by_key(|(index, prefix)| (Reverse(*prefix), !index.unique, index.columns.len()))
        .map(|(index, prefix)| (index.id, prefix))
}

/// The key range an ordered read of `index` covers (see `ordered_index`): its first `prefix`
/// columns equal to the filters' values, and a bound on the next column if they give one.
/// Also whether every filter is answered by the range, so that the first rows of the range
/// in order are the first rows of the answer (a LIMIT can stop the read). None when the
/// filters do not pin each of those columns to one value this time (a NULL parameter).
pub fn ordered_range(
    def: &TableDef,
    index: &IndexDef,
    prefix: usize,
    filters: &[Expr],
) -> Option<(KeyRange, bool)> {
    let mut key = Vec::with_capacity(prefix);
    let mut answered = vec![false; filters.len()];
    for &c in &index.columns[..prefix] {
        let (i, v) = filters.iter().enumerate().find_map(|(i, f)| {
            match column_condition(def, f, KeyValues::Bound)? {
                (
                    column,
                    ColumnCondition {
                        points: Some(p), ..
                    },
                ) if column == c && p.len() == 1 => Some((i, p[0].clone())),
                _ => None,
            }
        })?;
        answered[i] = true;
        key.push(v);
    }
    let (mut lower, mut upper) = (None, None);
    if let Some(&next) = index.columns.get(prefix) {
        for (i, f) in filters.iter().enumerate() {
            let Some((column, condition)) = column_condition(def, f, KeyValues::Bound) else {
                continue;
            };
            if column != next || condition.points.is_some() {
                continue;
            }
            // One filter per side: a second bound is left to the filter above.
            let takes_lower = condition.lower.is_some() && lower.is_none();
            let takes_upper = condition.upper.is_some() && upper.is_none();
            answered[i] = (condition.lower.is_none() || takes_lower)
                && (condition.upper.is_none() || takes_upper);
            if takes_lower {
                lower = condition.lower;
            }
            if takes_upper {
                upper = condition.upper;
            }
        }
    }
    let range = (extend(&key, lower), extend(&key, upper));
    Some((range, answered.iter().all(|a| *a)))
}

/// Whether a filter can narrow an index read of the table (pushed down as Inexact).
pub fn narrows(def: &TableDef, indexes: &[IndexDef], filter: &Expr) -> bool {
    let shape = KeyValues::Shape;
    let columns: Vec<usize> = match (
        column_condition(def, filter, shape),
        tuple_set(def, filter, shape),
    ) {
        (Some((column, _)), _) => vec![column],
        (None, Some(t)) => t.columns,
        (None, None) => return false,
    };
    indexes
        .iter()
        .filter(|i| usable_index(i))
        .any(|i| columns.iter().all(|c| i.columns.contains(c)))
}

/// Rows of values for several columns together, any of which a row must match: from
/// `(a, b) IN ((1, 2), (3, 4))` or `(a = 1 AND b = 2) OR (a = 3 AND b = 4)`.
#[derive(Debug, Clone)]
struct TupleSet {
    columns: Vec<usize>,
    rows: Vec<Vec<Value>>,
}

fn tuple_set(def: &TableDef, filter: &Expr, values: KeyValues) -> Option<TupleSet> {
    match filter {
        Expr::InList(InList {
            expr,
            list,
            negated: false,
        }) => {
            let Expr::ScalarFunction(f) = expr.as_ref() else {
                return None;
            };
            if f.func.name() != "struct" {
                return None;
            }
            let columns = f
                .args
                .iter()
                .map(|a| column_of(def, a))
                .collect::<Option<Vec<usize>>>()?;
            let rows = list
                .iter()
                .map(|item| {
                    let fields = struct_fields(item, values)?;
                    if fields.len() != columns.len() {
                        return None;
                    }
                    columns
                        .iter()
                        .zip(fields)
                        .map(|(&c, v)| key_value(&v, &def.columns[c].data_type, values))
                        .collect::<Option<Vec<Value>>>()
                })
                .collect::<Option<Vec<Vec<Value>>>>()?;
            Some(TupleSet { columns, rows })
        }
        Expr::BinaryExpr(BinaryExpr {
            op: Operator::Or, ..
        }) => {
            let mut disjuncts = Vec::new();
            split_or(filter, &mut disjuncts);
            let mut columns: Option<Vec<usize>> = None;
            let mut rows = Vec::with_capacity(disjuncts.len());
            for d in disjuncts {
                let mut conjuncts = Vec::new();
                split_and(d, &mut conjuncts);
                let mut pinned: Vec<(usize, Value)> = Vec::with_capacity(conjuncts.len());
                for c in conjuncts {
                    let (column, condition) = column_condition(def, c, values)?;
                    let point = match condition.points.as_deref() {
                        Some([v]) => v.clone(),
                        _ => return None,
                    };
                    pinned.push((column, point));
                }
                pinned.sort_by_key(|(c, _)| *c);
                let these: Vec<usize> = pinned.iter().map(|(c, _)| *c).collect();
                if these.windows(2).any(|w| w[0] == w[1]) {
                    return None;
                }
                match &columns {
                    None => columns = Some(these),
                    Some(cols) if *cols == these => {}
                    Some(_) => return None,
                }
                rows.push(pinned.into_iter().map(|(_, v)| v).collect());
            }
            Some(TupleSet {
                columns: columns?,
                rows,
            })
        }
        _ => None,
    }
}

fn split_or<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Or,
            right,
        }) => {
            split_or(left, out);
            split_or(right, out);
        }
        other => out.push(other),
    }
}

fn split_and<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::And,
            right,
        }) => {
            split_and(left, out);
            split_and(right, out);
        }
        other => out.push(other),
    }
}

/// Indexes holding every row of the table by plain columns.
fn usable_index(index: &IndexDef) -> bool {
    index.predicate.is_none() && !index.columns.is_empty()
}

/// A key prefix followed by a bound on the next column: `Included(prefix)` without one (an
/// inclusive prefix bound covers every key starting with it).
fn extend(prefix: &[Value], bound: Option<Bound<Value>>) -> Bound<Vec<Value>> {
    let with = |v: Value| {
        let mut key = prefix.to_vec();
        key.push(v);
        key
    };
    match bound {
        Some(Bound::Included(v)) => Bound::Included(with(v)),
        Some(Bound::Excluded(v)) => Bound::Excluded(with(v)),
        Some(Bound::Unbounded) | None if prefix.is_empty() => Bound::Unbounded,
        Some(Bound::Unbounded) | None => Bound::Included(prefix.to_vec()),
    }
}

/// Each table column's condition from the filters.
fn column_conditions(def: &TableDef, filters: &[Expr], values: KeyValues) -> Vec<ColumnCondition> {
    let mut conditions = vec![ColumnCondition::default(); def.columns.len()];
    for f in filters {
        let Some((column, found)) = column_condition(def, f, values) else {
            continue;
        };
        let c = &mut conditions[column];
        // Any one filter's condition covers the rows passing all of them: take the narrower
        // list of points, and a bound where there was none.
        if let Some(points) = found.points {
            if c.points.as_ref().is_none_or(|p| points.len() < p.len()) {
                c.points = Some(points);
            }
        }
        if c.lower.is_none() {
            c.lower = found.lower;
        }
        if c.upper.is_none() {
            c.upper = found.upper;
        }
    }
    conditions
}

/// The column one filter constrains, and how.
fn column_condition(
    def: &TableDef,
    filter: &Expr,
    values: KeyValues,
) -> Option<(usize, ColumnCondition)> {
    match filter {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (column, value, op) = match (column_of(def, left), value_of(right, values)) {
                (Some(c), Some(v)) => (c, v, *op),
                _ => (column_of(def, right)?, value_of(left, values)?, op.swap()?),
            };
            let v = key_value(&value, &def.columns[column].data_type, values)?;
            let mut condition = ColumnCondition::default();
            match op {
                Operator::Eq => condition.points = Some(vec![v]),
                Operator::Gt => condition.lower = Some(Bound::Excluded(v)),
                Operator::GtEq => condition.lower = Some(Bound::Included(v)),
                Operator::Lt => condition.upper = Some(Bound::Excluded(v)),
                Operator::LtEq => condition.upper = Some(Bound::Included(v)),
                _ => return None,
            }
            Some((column, condition))
        }
        Expr::InList(InList {
            expr,
            list,
            negated: false,
        }) => {
            let column = column_of(def, expr)?;
            let t = &def.columns[column].data_type;
            let mut points = list
                .iter()
                .map(|e| key_value(&value_of(e, values)?, t, values))
                .collect::<Option<Vec<Value>>>()?;
            points.sort_by(Value::total_cmp);
            points.dedup_by(|a, b| a.total_cmp(b) == Ordering::Equal);
            let condition = ColumnCondition {
                points: Some(points),
                ..Default::default()
            };
            Some((column, condition))
        }
        Expr::Between(Between {
            expr,
            negated: false,
            low,
            high,
        }) => {
            let column = column_of(def, expr)?;
            let t = &def.columns[column].data_type;
            let condition = ColumnCondition {
                points: None,
                lower: Some(Bound::Included(key_value(
                    &value_of(low, values)?,
                    t,
                    values,
                )?)),
                upper: Some(Bound::Included(key_value(
                    &value_of(high, values)?,
                    t,
                    values,
                )?)),
            };
            Some((column, condition))
        }
        _ => None,
    }
}

/// The table column `e` reads, directly or through a cast between integer types (which keeps
/// values and their order; a cast from text would not: `'05'::int = 5`).
fn column_of(def: &TableDef, e: &Expr) -> Option<usize> {
    let column = match e {
        Expr::Column(c) => c,
        Expr::Cast(cast) => match cast.expr.as_ref() {
            Expr::Column(c) if is_integer(cast.field.data_type()) => c,
            _ => return None,
        },
        _ => return None,
    };
    let position = def.columns.iter().position(|c| c.name == column.name)?;
    if !exact_keys(&def.columns[position].data_type) {
        return None;
    }
    let widened = !matches!(e, Expr::Column(_));
    if widened && !is_integer(&crate::types::arrow_type(&def.columns[position].data_type)) {
        return None;
    }
    Some(position)
}

/// Types whose key bytes are equal exactly when SQL calls the values equal. Not floats (`-0 =
/// 0`), numerics (`1.5 = 1.50`), intervals (`'1 mon' = '30 days'`) or char(n) (trailing
/// blanks do not count).
pub(crate) fn exact_keys(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Bool
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::Text
            | DataType::Varchar(_)
            | DataType::Bytea
            | DataType::Date
            | DataType::Timestamp
            | DataType::TimestampTz
            | DataType::Uuid
            | DataType::Time
    )
}

fn is_integer(t: &ArrowType) -> bool {
    matches!(t, ArrowType::Int16 | ArrowType::Int32 | ArrowType::Int64)
}

/// The value an expression compares a column with: a literal, or a kept plan's parameter
/// (under `Shape`, any placeholder, as a NULL standing for the value to come).
fn value_of(e: &Expr, values: KeyValues) -> Option<ScalarValue> {
    match e {
        Expr::Literal(v, _) => Some(v.clone()),
        Expr::Cast(cast) => value_of(&cast.expr, values),
        Expr::Placeholder(_) if values == KeyValues::Shape => Some(ScalarValue::Null),
        Expr::ScalarFunction(f) => {
            let bound = crate::kept_plan::param::bound_value(f)?;
            Some(match values {
                KeyValues::Bound => bound,
                KeyValues::Shape => ScalarValue::Null,
            })
        }
        _ => None,
    }
}

/// The values of a row value in a row-value IN list: a struct literal, or `struct(...)` of
/// values.
fn struct_fields(item: &Expr, values: KeyValues) -> Option<Vec<ScalarValue>> {
    match item {
        Expr::ScalarFunction(f) if f.func.name() == "struct" => {
            f.args.iter().map(|a| value_of(a, values)).collect()
        }
        _ => {
            let ScalarValue::Struct(fields) = value_of(item, values)? else {
                return None;
            };
            if fields.len() != 1 {
                return None;
            }
            fields
                .columns()
                .iter()
                .map(|array| ScalarValue::try_from_array(array, 0).ok())
                .collect()
        }
    }
}

/// A filter's value as a key value of the column's type; None when it does not convert
/// exactly (a fraction against an integer column), and the filter is left to DataFusion.
/// Under `Shape`, a NULL stands for a value to come and converts to a NULL key.
fn key_value(v: &ScalarValue, t: &DataType, values: KeyValues) -> Option<Value> {
    if v.is_null() {
        return (values == KeyValues::Shape).then_some(Value::Null);
    }
    let target = crate::types::arrow_type(t);
    let cast = v.cast_to(&target).ok()?;
    let back = cast.cast_to(&v.data_type()).ok()?;
    if &back != v {
        return None;
    }
    let array = cast.to_array().ok()?;
    crate::types::value_from_array(array.as_ref(), 0, t).ok()
}
