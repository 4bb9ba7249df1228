//! `x op ANY (array)` and `x op ALL (array)` with PostgreSQL's NULL rules: ANY is true when a
//! comparison is true, else NULL when one is NULL, else false (false for an empty array);
//! ALL is false when a comparison is false, else NULL when one is NULL, else true (true for an
//! empty array); a NULL array gives NULL.
//!
//! DataFusion plans `= ANY` as `array_has`, which answers false where a NULL element makes
//! PostgreSQL's answer NULL (`1 = ANY('{2,NULL}')`), and the other operators through the
//! array's minimum or maximum, which loses the NULLs the same way. The rewrite (`rewrite.rs`)
//! turns each such expression over an array (not a subquery) into a call of one of the
//! functions here, `shoal_any_<op>` / `shoal_all_<op>`, with the operand first.
//!
//! The containment operators `@>`, `<@` and `&&` over arrays are here too (`plan_operator`),
//! and the subscripts of the catalogs' int2vector and oidvector columns, which start at 0.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, BooleanBuilder};
use datafusion::arrow::compute::kernels::cmp;
use datafusion::arrow::datatypes::{DataType as ArrowType, Field};
use datafusion::common::{DFSchema, Result as DfResult, ScalarValue};
use datafusion::execution::{FunctionRegistry, SessionState};
use datafusion::logical_expr::planner::{
    ExprPlanner, PlannerResult, RawBinaryExpr, RawFieldAccessExpr,
};
use datafusion::logical_expr::type_coercion::binary::comparison_coercion;
use datafusion::logical_expr::{cast, lit, GetFieldAccess};
use datafusion::logical_expr::{
    ColumnarValue, Operator, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::logical_expr::{Expr, ExprSchemable};
use datafusion::sql::sqlparser::ast::BinaryOperator;

use crate::error::{code, SqlError};
use crate::query::array_literal::Element;
use crate::query::functions::sql_error;

/// The comparisons ANY and ALL take, by the names in the functions' names.
const OPERATORS: &[(&str, Operator, &str)] = &[
    ("eq", Operator::Eq, "="),
    ("ne", Operator::NotEq, "<>"),
    ("lt", Operator::Lt, "<"),
    ("le", Operator::LtEq, "<="),
    ("gt", Operator::Gt, ">"),
    ("ge", Operator::GtEq, ">="),
];

/// The function standing for `x <op> ANY|ALL (array)`, if `op` (as SQL writes it) is one of
/// the comparisons.
pub fn function_name(op: &str, all: bool) -> Option<String> {
    let (name, _, _) = OPERATORS.iter().find(|(_, _, sql)| *sql == op)?;
    Some(format!("shoal_{}_{name}", if all { "all" } else { "any" }))
}

/// Whether `name` is one of these functions (the array is its second argument).
pub fn is_array_compare(name: &str) -> bool {
    name.starts_with("shoal_any_") || name.starts_with("shoal_all_")
}

pub fn register(state: &mut SessionState) {
    for &(name, op, sql) in OPERATORS {
        for all in [false, true] {
            let udf = ArrayCompare {
                name: format!("shoal_{}_{name}", if all { "all" } else { "any" }),
                op,
                sql,
                all,
                signature: Signature::user_defined(Volatility::Immutable),
            };
            state
                .register_udf(Arc::new(ScalarUDF::new_from_impl(udf)))
                .expect("registering a function cannot fail");
        }
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ArrayCompare {
    name: String,
    op: Operator,
    sql: &'static str,
    all: bool,
    signature: Signature,
}

impl ArrayCompare {
    fn no_operator(
        &self,
        left: &ArrowType,
        right: &ArrowType,
    ) -> datafusion::error::DataFusionError {
        let quantifier = if self.all { "ALL" } else { "ANY" };
        let name = |t: &ArrowType| {
            let type_oid = crate::types::pg_oid_for_arrow(t);
            crate::query::pg_catalog::format_type_oid(type_oid, -1)
                .unwrap_or_else(|| type_oid.to_string())
        };
        sql_error(SqlError::new(
            code::UNDEFINED_FUNCTION,
            format!(
                "operator does not exist: {} {} {quantifier} ({})",
                name(left),
                self.sql,
                name(right)
            ),
        ))
    }

    /// The type both sides compare as: the operand's, and the array's elements'.
    fn common_type(&self, args: &[ArrowType]) -> DfResult<ArrowType> {
        let [left, right] = args else {
            return Err(self.no_operator(&ArrowType::Null, &ArrowType::Null));
        };
        let element = match right {
            ArrowType::List(f) | ArrowType::LargeList(f) | ArrowType::FixedSizeList(f, _) => {
                f.data_type().clone()
            }
            ArrowType::Null => left.clone(),
            _ => {
                return Err(sql_error(SqlError::new(
                    code::WRONG_OBJECT_TYPE,
                    "op ANY/ALL (array) requires array on right side",
                )));
            }
        };
        let common = match (left, &element) {
            (ArrowType::Null, e) => e.clone(),
            (l, ArrowType::Null) => l.clone(),
            // The elements of an untyped array literal (`x = ANY('{1,2}')`) take x's type.
            (l, ArrowType::Utf8) if !crate::numeric::is_numeric(l) => l.clone(),
            // A numeric with any number (or an untyped literal) compares as numerics; the
            // conversion happens in the call (`as_numeric`), not by a cast, which would
            // reinterpret the bytes.
            (l, e) if crate::numeric::is_numeric(l) || crate::numeric::is_numeric(e) => {
                if !converts_to_numeric(l) || !converts_to_numeric(e) {
                    return Err(self.no_operator(l, right));
                }
                crate::numeric::NUMERIC_ARROW
            }
            (l, e) => comparison_coercion(l, e).ok_or_else(|| self.no_operator(l, right))?,
        };
        Ok(common)
    }
}

impl ScalarUDFImpl for ArrayCompare {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[ArrowType]) -> DfResult<ArrowType> {
        self.common_type(args)?;
        Ok(ArrowType::Boolean)
    }

    fn coerce_types(&self, args: &[ArrowType]) -> DfResult<Vec<ArrowType>> {
        // A mismatch is reported by return_type: DataFusion words a coercion's error itself.
        Ok(match self.common_type(args) {
            Ok(common) if crate::numeric::is_numeric(&common) => args.to_vec(),
            Ok(common) => vec![
                common.clone(),
                ArrowType::List(Arc::new(Field::new_list_field(common, true))),
            ],
            Err(_) => args.to_vec(),
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let form = Form::of(&args.arg_fields[0], &args.arg_fields[1]);
        let left = form.apply(&args.args[0].to_array(rows)?)?;
        let right = args.args[1].to_array(rows)?;
        let mut out = BooleanBuilder::with_capacity(rows);
        let lists = match right.data_type() {
            ArrowType::Null => {
                out.append_nulls(rows);
                return Ok(ColumnarValue::Array(Arc::new(out.finish())));
            }
            _ => right.as_list_opt::<i32>().ok_or_else(|| {
                datafusion::error::DataFusionError::Internal(format!(
                    "{} called with {} for an array",
                    self.name,
                    right.data_type()
                ))
            })?,
        };
        for row in 0..rows {
            if lists.is_null(row) {
                out.append_null();
                continue;
            }
            let elements = form.apply(&lists.value(row))?;
            if elements.is_empty() {
                out.append_value(self.all);
                continue;
            }
            if left.is_null(row) {
                out.append_null();
                continue;
            }
            let needle = ScalarValue::try_from_array(&left, row)?;
            let results = compare(self.op, &elements, &needle)?;
            // ANY is decided by a true comparison, ALL by a false one.
            let decided = if self.all {
                results.false_count() > 0
            } else {
                results.true_count() > 0
            };
            if decided {
                out.append_value(!self.all);
            } else if results.null_count() > 0 {
                out.append_null();
            } else {
                out.append_value(self.all);
            }
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// Whether values of this type convert to numerics exactly (`as_numeric`).
fn converts_to_numeric(t: &ArrowType) -> bool {
    t.is_integer()
        || t.is_floating()
        || crate::numeric::is_decimal(t)
        || crate::numeric::is_numeric(t)
        || matches!(t, ArrowType::Utf8 | ArrowType::Null)
}

/// The form in which both sides of an array comparison compare, where their Arrow values
/// alone would compare wrongly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    Plain,
    /// Numerics, and the numbers compared with them, as numerics.
    Numeric,
    /// char(n): trailing blanks do not count.
    Bpchar,
    /// uuid: by value, whatever the case and hyphens of the text.
    Uuid,
}

impl Form {
    /// The form for the arguments' fields (any of them, or of their arrays' elements, may
    /// say it).
    fn of(left: &Field, right: &Field) -> Form {
        let element = |f: &Field| match f.data_type() {
            ArrowType::List(e) | ArrowType::LargeList(e) | ArrowType::FixedSizeList(e, _) => {
                Some(e.clone())
            }
            _ => None,
        };
        let (left_element, right_element) = (element(left), element(right));
        let fields = [
            Some(left),
            Some(right),
            left_element.as_deref(),
            right_element.as_deref(),
        ];
        let declared = |type_oid: u32| {
            fields.iter().flatten().any(|f| {
                f.metadata()
                    .get(crate::types::PG_TYPE_METADATA_KEY)
                    .and_then(|v| v.parse::<u32>().ok())
                    == Some(type_oid)
            })
        };
        if fields
            .iter()
            .flatten()
            .any(|f| crate::numeric::is_numeric(f.data_type()))
        {
            Form::Numeric
        } else if declared(crate::types::oid::UUID) {
            Form::Uuid
        } else if declared(crate::types::oid::BPCHAR) {
            Form::Bpchar
        } else {
            Form::Plain
        }
    }

    fn apply(self, array: &ArrayRef) -> DfResult<ArrayRef> {
        match self {
            Form::Plain => Ok(array.clone()),
            Form::Numeric => as_numeric(array),
            Form::Bpchar | Form::Uuid => {
                let Some(strings) = array.as_string_opt::<i32>() else {
                    return Ok(array.clone());
                };
                let values = strings
                    .iter()
                    .map(|v| {
                        v.map(|v| match self {
                            Form::Uuid => crate::types::parse_uuid(v)
                                .map(crate::types::format_uuid)
                                .map_err(sql_error),
                            _ => Ok(v.trim_end_matches(' ').to_string()),
                        })
                        .transpose()
                    })
                    .collect::<DfResult<Vec<_>>>()?;
                Ok(Arc::new(datafusion::arrow::array::StringArray::from(
                    values,
                )))
            }
        }
    }
}

/// `array`'s values as numerics: numbers through their text, which a numeric reads exactly.
fn as_numeric(array: &ArrayRef) -> DfResult<ArrayRef> {
    if crate::numeric::is_numeric(array.data_type()) {
        return Ok(array.clone());
    }
    let mut text = String::new();
    let values = (0..array.len())
        .map(|row| {
            if array.is_null(row) {
                return Ok(None);
            }
            text.clear();
            crate::pgtext::format_array_value(
                array.as_ref(),
                row,
                &crate::timezone::TimeZone::utc(),
                &mut text,
            );
            shoal_numeric::Numeric::parse(text.trim())
                .map(Some)
                .map_err(crate::numeric::df_error)
        })
        .collect::<DfResult<Vec<_>>>()?;
    Ok(crate::numeric::array_from(values))
}

/// `array` with float -0 as 0: SQL compares them equal, Arrow's comparison kernels order them
/// (and order NaN as PostgreSQL does: equal to itself, above every number).
pub fn zero_without_sign(array: &ArrayRef) -> DfResult<ArrayRef> {
    Ok(match array.data_type() {
        ArrowType::Float64 => {
            let a = array.as_primitive::<datafusion::arrow::datatypes::Float64Type>();
            Arc::new(a.unary::<_, datafusion::arrow::datatypes::Float64Type>(|v| v + 0.0))
                as ArrayRef
        }
        ArrowType::Float32 => {
            let a = array.as_primitive::<datafusion::arrow::datatypes::Float32Type>();
            Arc::new(a.unary::<_, datafusion::arrow::datatypes::Float32Type>(|v| v + 0.0))
                as ArrayRef
        }
        _ => array.clone(),
    })
}

/// `needle op element` for each element.
fn compare(op: Operator, elements: &ArrayRef, needle: &ScalarValue) -> DfResult<BooleanArray> {
    // With the element on the left: `x < e` is `e > x`.
    let op = match op {
        Operator::Lt => Operator::Gt,
        Operator::LtEq => Operator::GtEq,
        Operator::Gt => Operator::Lt,
        Operator::GtEq => Operator::LtEq,
        other => other,
    };
    if crate::numeric::is_numeric(elements.data_type()) {
        // Numerics compare by their sortable key (the display scale left out).
        let elements = crate::numeric::as_numeric_array(elements.as_ref())?;
        let ScalarValue::LargeBinary(Some(needle)) = needle else {
            return Ok(BooleanArray::new_null(elements.len()));
        };
        let needle = crate::numeric::key_of(needle);
        return Ok(elements
            .iter()
            .map(|e| {
                e.map(|e| {
                    let ordering = crate::numeric::key_of(e).cmp(needle);
                    match op {
                        Operator::Eq => ordering.is_eq(),
                        Operator::NotEq => ordering.is_ne(),
                        Operator::Lt => ordering.is_lt(),
                        Operator::LtEq => ordering.is_le(),
                        Operator::Gt => ordering.is_gt(),
                        _ => ordering.is_ge(),
                    }
                })
            })
            .collect());
    }
    let elements = &zero_without_sign(elements)?;
    let needle = datafusion::arrow::array::Scalar::new(zero_without_sign(&needle.to_array()?)?);
    Ok(match op {
        Operator::Eq => cmp::eq(elements, &needle)?,
        Operator::NotEq => cmp::neq(elements, &needle)?,
        Operator::Lt => cmp::lt(elements, &needle)?,
        Operator::LtEq => cmp::lt_eq(elements, &needle)?,
        Operator::Gt => cmp::gt(elements, &needle)?,
        _ => cmp::gt_eq(elements, &needle)?,
    })
}

/// The expression planner of the array operators (see `plan_operator`).
#[derive(Debug)]
pub struct ArrayOperators;

impl ExprPlanner for ArrayOperators {
    fn plan_binary_op(
        &self,
        expr: RawBinaryExpr,
        schema: &DFSchema,
    ) -> DfResult<PlannerResult<RawBinaryExpr>> {
        plan_operator(expr, schema)
    }

    /// `indkey[0]`: the catalogs' vectors count their subscripts from 0, lists from 1.
    fn plan_field_access(
        &self,
        expr: RawFieldAccessExpr,
        schema: &DFSchema,
    ) -> DfResult<PlannerResult<RawFieldAccessExpr>> {
        let is_vector = expr
            .expr
            .to_field(schema)
            .is_ok_and(|(_, f)| crate::types::is_catalog_vector(&f));
        match expr.field_access {
            GetFieldAccess::ListIndex { key } if is_vector => Ok(PlannerResult::Planned(
                datafusion::functions_nested::expr_fn::array_element(
                    expr.expr,
                    cast(*key, ArrowType::Int64) + lit(1_i64),
                ),
            )),
            field_access => Ok(PlannerResult::Original(RawFieldAccessExpr {
                field_access,
                expr: expr.expr,
            })),
        }
    }
}

/// The array operators `@>` (contains), `<@` (is contained by) and `&&` (overlaps), as
/// PostgreSQL defines them: elements compare by equality, a NULL element equals nothing (so
/// `ARRAY[1,NULL] @> ARRAY[NULL]` is false), and either array NULL gives NULL. DataFusion
/// plans none of them over lists. An untyped parameter takes the other side's array type; an
/// untyped string literal is read as an array literal of it.
pub fn plan_operator(
    expr: RawBinaryExpr,
    schema: &DFSchema,
) -> DfResult<PlannerResult<RawBinaryExpr>> {
    let kind = match expr.op {
        BinaryOperator::AtArrow => Containment::Contains,
        BinaryOperator::ArrowAt => Containment::ContainedBy,
        BinaryOperator::PGOverlap => Containment::Overlaps,
        _ => return Ok(PlannerResult::Original(expr)),
    };
    let is_list = |e: &Expr| {
        matches!(
            e.get_type(schema),
            Ok(ArrowType::List(_) | ArrowType::LargeList(_) | ArrowType::FixedSizeList(..))
        )
    };
    if !is_list(&expr.left) && !is_list(&expr.right) {
        return Ok(PlannerResult::Original(expr));
    }
    let (mut left, mut right) = (expr.left, expr.right);
    adopt_array_type(&mut left, &right, schema)?;
    adopt_array_type(&mut right, &left, schema)?;
    Ok(PlannerResult::Planned(Expr::ScalarFunction(
        datafusion::logical_expr::expr::ScalarFunction::new_udf(
            Arc::new(ScalarUDF::new_from_impl(ArrayContainment::new(kind))),
            vec![left, right],
        ),
    )))
}

/// An untyped parameter or string literal `e` as an array of `other`'s type.
fn adopt_array_type(e: &mut Expr, other: &Expr, schema: &DFSchema) -> DfResult<()> {
    match e {
        Expr::Placeholder(p) if p.field.is_none() => {
            if let Ok((_, field)) = other.to_field(schema) {
                p.field = Some(Arc::new(field.as_ref().clone().with_name(&p.id)));
            }
        }
        Expr::Literal(ScalarValue::Utf8(Some(text)), _) => {
            let elements = crate::query::array_literal::parse(text).map_err(sql_error)?;
            let elements = elements
                .into_iter()
                .map(|element| match element {
                    Element::Null => Ok(Expr::Literal(ScalarValue::Utf8(None), None)),
                    Element::Text(s) => Ok(Expr::Literal(ScalarValue::Utf8(Some(s)), None)),
                    Element::Array(_) => Err(sql_error(SqlError::new(
                        code::FEATURE_NOT_SUPPORTED,
                        "multidimensional arrays are not supported",
                    ))),
                })
                .collect::<DfResult<Vec<_>>>()?;
            *e = datafusion::functions_nested::expr_fn::make_array(elements);
        }
        _ => {}
    }
    Ok(())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Containment {
    Contains,
    ContainedBy,
    Overlaps,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ArrayContainment {
    kind: Containment,
    signature: Signature,
}

impl ArrayContainment {
    fn new(kind: Containment) -> Self {
        ArrayContainment {
            kind,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }

    /// The element type both arrays compare as.
    fn element_type(args: &[ArrowType]) -> DfResult<ArrowType> {
        let element = |t: &ArrowType| match t {
            ArrowType::List(f) | ArrowType::LargeList(f) | ArrowType::FixedSizeList(f, _) => {
                Some(f.data_type().clone())
            }
            ArrowType::Null => Some(ArrowType::Null),
            _ => None,
        };
        let (Some(l), Some(r)) = (
            args.first().and_then(element),
            args.get(1).and_then(element),
        ) else {
            return Err(sql_error(SqlError::new(
                code::UNDEFINED_FUNCTION,
                "operator does not exist: array containment needs two arrays",
            )));
        };
        let common = match (&l, &r) {
            (ArrowType::Null, t) | (t, ArrowType::Null) => t.clone(),
            (a, b) if a == b => a.clone(),
            // An array literal's text elements take the other array's type.
            (a, ArrowType::Utf8) | (ArrowType::Utf8, a) if !crate::numeric::is_numeric(a) => {
                a.clone()
            }
            (a, b) if crate::numeric::is_numeric(a) || crate::numeric::is_numeric(b) => {
                if !converts_to_numeric(a) || !converts_to_numeric(b) {
                    return Err(sql_error(SqlError::new(
                        code::UNDEFINED_FUNCTION,
                        "operator does not exist: arrays of different element types",
                    )));
                }
                crate::numeric::NUMERIC_ARROW
            }
            (a, b) => comparison_coercion(a, b).ok_or_else(|| {
                sql_error(SqlError::new(
                    code::UNDEFINED_FUNCTION,
                    "operator does not exist: arrays of different element types",
                ))
            })?,
        };
        Ok(common)
    }
}

impl ScalarUDFImpl for ArrayContainment {
    fn name(&self) -> &str {
        match self.kind {
            Containment::Contains => "arraycontains",
            Containment::ContainedBy => "arraycontained",
            Containment::Overlaps => "arrayoverlap",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[ArrowType]) -> DfResult<ArrowType> {
        Self::element_type(args)?;
        Ok(ArrowType::Boolean)
    }

    fn coerce_types(&self, args: &[ArrowType]) -> DfResult<Vec<ArrowType>> {
        // A mismatch is reported by return_type: DataFusion words a coercion's error itself.
        Ok(match Self::element_type(args) {
            // Converted in the call (`as_numeric`).
            Ok(common) if crate::numeric::is_numeric(&common) => args.to_vec(),
            Ok(common) => {
                let list = ArrowType::List(Arc::new(Field::new_list_field(common, true)));
                vec![list.clone(), list]
            }
            Err(_) => args.to_vec(),
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let form = Form::of(&args.arg_fields[0], &args.arg_fields[1]);
        let left = args.args[0].to_array(rows)?;
        let right = args.args[1].to_array(rows)?;
        let mut out = BooleanBuilder::with_capacity(rows);
        let (Some(left), Some(right)) = (left.as_list_opt::<i32>(), right.as_list_opt::<i32>())
        else {
            out.append_nulls(rows);
            return Ok(ColumnarValue::Array(Arc::new(out.finish())));
        };
        for row in 0..rows {
            if left.is_null(row) || right.is_null(row) {
                out.append_null();
                continue;
            }
            let (a, b) = (
                form.apply(&left.value(row))?,
                form.apply(&right.value(row))?,
            );
            let value = match self.kind {
                Containment::Contains => contains_all(&a, &b)?,
                Containment::ContainedBy => contains_all(&b, &a)?,
                Containment::Overlaps => contains_any(&a, &b)?,
            };
            out.append_value(value);
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// Whether some non-NULL element of `haystack` equals element `i` of `needles`.
fn holds(haystack: &ArrayRef, needles: &ArrayRef, i: usize) -> DfResult<bool> {
    if needles.is_null(i) {
        return Ok(false);
    }
    let needle = ScalarValue::try_from_array(needles, i)?;
    Ok(compare(Operator::Eq, haystack, &needle)?.true_count() > 0)
}

/// Whether every element of `needles` is in `haystack` (`haystack @> needles`).
fn contains_all(haystack: &ArrayRef, needles: &ArrayRef) -> DfResult<bool> {
    for i in 0..needles.len() {
        if !holds(haystack, needles, i)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether some element of `needles` is in `haystack` (`haystack && needles`).
fn contains_any(haystack: &ArrayRef, needles: &ArrayRef) -> DfResult<bool> {
    for i in 0..needles.len() {
        if holds(haystack, needles, i)? {
            return Ok(true);
        }
    }
    Ok(false)
}
