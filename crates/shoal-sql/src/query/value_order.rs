//! Values held as text whose order is not the text's: enums and jsonb.
//!
//! jsonb sorts by jsonb's order (`shoal_json::jsonb_cmp`: numbers as numbers, `3` before `10`):
//! ORDER BY keys and window ORDER BY keys over jsonb sort `shoal_jsonb_sort_key(x)`, bytes in that
//! order. Its comparison operators are jsonb's own (`query::json`). min and max do not exist for
//! jsonb in PostgreSQL (42883).
//!
//! A user-defined enum value is its label (Arrow Utf8), its field marked with the type's OID;
//! two things differ from text, and this module does both:
//!
//! - Input: `'x'::mood` (and `CAST(x AS mood)`) becomes `shoal_enum_in(x, oid)`, which checks
//!   that the text is one of the type's labels (22P02 otherwise) and marks the result's type.
//! - Order: enum values sort by their place among the labels, not alphabetically. The analyzer
//!   rule here rewrites `<`, `<=`, `>`, `>=` with an enum operand, ORDER BY keys and window
//!   ORDER BY keys over enums to compare `shoal_enum_position(x)`, the label's index in the type
//!   (a text operand is read as a label of the same type, as PostgreSQL resolves
//!   `mood_col < 'ok'`). Equality stays text equality, which is the same. min and max over enum
//!   values are refused (0A000) rather than answered alphabetically.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, Int32Array, StringArray};
use datafusion::arrow::datatypes::{DataType as ArrowType, Field, FieldRef};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, DataFusionError, Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, ReturnFieldArgs,
    ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature, Volatility,
};
use datafusion::optimizer::analyzer::AnalyzerRule;
use shoal_storage::types::{DataType, EnumType};

use crate::engine::Engine;
use crate::error::{code, SqlError};
use crate::query::expr_pass::{replace_sort_keys, rewrite_expressions_up};
use crate::types::PG_TYPE_METADATA_KEY;

/// The function `'x'::mood` becomes (see `rewrite`).
pub const ENUM_IN: &str = "shoal_enum_in";

fn df_error(e: SqlError) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// The enum type of a catalog OID, as columns of it see it.
fn enum_type(engine: &Engine, type_oid: u32) -> Option<EnumType> {
    let catalog = engine.catalog.read();
    match catalog.types.get(&type_oid)?.column_type() {
        DataType::Enum(e) => Some(e),
        _ => None,
    }
}

/// Whether an expression's values are jsonb.
fn is_jsonb(e: &Expr, schema: &DFSchema) -> bool {
    e.to_field(schema).is_ok_and(|(_, field)| {
        field
            .metadata()
            .get(PG_TYPE_METADATA_KEY)
            .is_some_and(|t| t == &crate::types::oid::JSONB.to_string())
    })
}

/// The key an ORDER BY over `e` sorts instead, when `e`'s text does not sort as its type does.
fn sort_key(engine: &Engine, e: &Expr, schema: &DFSchema) -> Option<Expr> {
    if is_jsonb(e, schema) {
        return Some(Expr::ScalarFunction(ScalarFunction::new_udf(
            JSONB_SORT_KEY.clone(),
            vec![e.clone()],
        )));
    }
    let of = enum_of(engine, e, schema)?;
    Some(position_of(e.clone(), &of))
}

static JSONB_SORT_KEY: std::sync::LazyLock<Arc<ScalarUDF>> = std::sync::LazyLock::new(|| {
    Arc::new(ScalarUDF::new_from_impl(JsonbSortKey {
        signature: Signature::new(TypeSignature::Any(1), Volatility::Immutable),
    }))
});

/// `shoal_jsonb_sort_key(jsonb)`: `shoal_json::jsonb_sort_key`, bytes in jsonb's order, as
/// lower-case hex text (which sorts as the bytes do: DataFusion's window frames take text keys,
/// not binary ones).
#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonbSortKey {
    signature: Signature,
}

impl ScalarUDFImpl for JsonbSortKey {
    fn name(&self) -> &str {
        "shoal_jsonb_sort_key"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(ArrowType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let key = |doc: Option<&str>| -> DfResult<Option<String>> {
            doc.map(|d| {
                let bytes = shoal_json::jsonb_sort_key(d)
                    .map_err(|e| df_error(crate::query::json::sql_error(e)))?;
                let mut hex = String::with_capacity(bytes.len() * 2);
                for b in bytes {
                    use std::fmt::Write;
                    let _ = write!(hex, "{b:02x}");
                }
                Ok(hex)
            })
            .transpose()
        };
        match &args.args[0] {
            ColumnarValue::Scalar(v) => {
                let ScalarValue::Utf8(doc) = v.cast_to(&ArrowType::Utf8)? else {
                    unreachable!("cast to utf8")
                };
                Ok(ColumnarValue::Scalar(ScalarValue::Utf8(key(
                    doc.as_deref()
                )?)))
            }
            ColumnarValue::Array(a) => {
                let a = datafusion::arrow::compute::cast(a, &ArrowType::Utf8)?;
                let docs = a.as_any().downcast_ref::<StringArray>().expect("utf8");
                let keys: StringArray = docs
                    .iter()
                    .map(key)
                    .collect::<DfResult<Vec<_>>>()?
                    .into_iter()
                    .collect();
                Ok(ColumnarValue::Array(Arc::new(keys) as ArrayRef))
            }
        }
    }
}

/// The enum type an expression's values have, if any.
fn enum_of(engine: &Engine, e: &Expr, schema: &DFSchema) -> Option<EnumType> {
    let (_, field) = e.to_field(schema).ok()?;
    let type_oid = field.metadata().get(PG_TYPE_METADATA_KEY)?.parse().ok()?;
    if type_oid < shoal_storage::catalog::FIRST_USER_OID {
        return None;
    }
    enum_type(engine, type_oid)
}

/// `shoal_enum_in(text, type_oid)`: enum_in.
pub struct EnumIn {
    signature: Signature,
    engine: Arc<Engine>,
}

impl std::fmt::Debug for EnumIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(ENUM_IN)
    }
}

impl PartialEq for EnumIn {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}
impl Eq for EnumIn {}
impl std::hash::Hash for EnumIn {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        ENUM_IN.hash(state)
    }
}

/// The type OID argument of `shoal_enum_in`, a literal the rewrite wrote.
fn type_oid_argument(arg: Option<&ScalarValue>) -> DfResult<u32> {
    match arg.map(|v| v.cast_to(&ArrowType::Int64)) {
        Some(Ok(ScalarValue::Int64(Some(oid)))) => Ok(oid as u32),
        _ => Err(DataFusionError::Plan(format!(
            "{ENUM_IN} takes the type's OID as a constant"
        ))),
    }
}

impl ScalarUDFImpl for EnumIn {
    fn name(&self) -> &str {
        ENUM_IN
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(ArrowType::Utf8)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let type_oid = type_oid_argument(args.scalar_arguments.get(1).copied().flatten())?;
        Ok(Arc::new(
            Field::new(ENUM_IN, ArrowType::Utf8, true)
                .with_metadata([(PG_TYPE_METADATA_KEY.to_string(), type_oid.to_string())].into()),
        ))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let type_oid = match &args.args[1] {
            ColumnarValue::Scalar(v) => type_oid_argument(Some(v))?,
            ColumnarValue::Array(_) => type_oid_argument(None)?,
        };
        let Some(e) = enum_type(&self.engine, type_oid) else {
            return Err(df_error(SqlError::new(
                code::UNDEFINED_OBJECT,
                format!("type with OID {type_oid} does not exist"),
            )));
        };
        let check = |label: Option<&str>| -> DfResult<()> {
            match label {
                Some(label) => crate::pgtext::check_enum_label(label, &e)
                    .map(|_| ())
                    .map_err(df_error),
                None => Ok(()),
            }
        };
        match &args.args[0] {
            ColumnarValue::Scalar(v) => {
                let v = v.cast_to(&ArrowType::Utf8)?;
                if let ScalarValue::Utf8(label) = &v {
                    check(label.as_deref())?;
                }
                Ok(ColumnarValue::Scalar(v))
            }
            ColumnarValue::Array(a) => {
                let a = datafusion::arrow::compute::cast(a, &ArrowType::Utf8)?;
                let labels = a.as_any().downcast_ref::<StringArray>().expect("utf8");
                labels.iter().try_for_each(check)?;
                Ok(ColumnarValue::Array(a))
            }
        }
    }
}

pub fn register(state: &mut datafusion::execution::SessionState, engine: &Arc<Engine>) {
    use datafusion::execution::FunctionRegistry;
    let f = EnumIn {
        signature: Signature::new(TypeSignature::Any(2), Volatility::Immutable),
        engine: engine.clone(),
    };
    state
        .register_udf(Arc::new(ScalarUDF::new_from_impl(f)))
        .expect("registering a function cannot fail");
}

/// `shoal_enum_position(x)`: a label's index among its type's labels, for comparing enums.
#[derive(Debug, PartialEq, Eq, Hash)]
struct EnumPosition {
    signature: Signature,
    of: EnumType,
}

impl ScalarUDFImpl for EnumPosition {
    fn name(&self) -> &str {
        "shoal_enum_position"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(ArrowType::Int32)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let position = |label: Option<&str>| -> DfResult<Option<i32>> {
            let Some(label) = label else { return Ok(None) };
            crate::pgtext::check_enum_label(label, &self.of).map_err(df_error)?;
            Ok(self.of.position(label).map(|p| p as i32))
        };
        match &args.args[0] {
            ColumnarValue::Scalar(v) => {
                let ScalarValue::Utf8(label) = v.cast_to(&ArrowType::Utf8)? else {
                    unreachable!("cast to utf8")
                };
                Ok(ColumnarValue::Scalar(ScalarValue::Int32(position(
                    label.as_deref(),
                )?)))
            }
            ColumnarValue::Array(a) => {
                let a = datafusion::arrow::compute::cast(a, &ArrowType::Utf8)?;
                let labels = a.as_any().downcast_ref::<StringArray>().expect("utf8");
                let out: Int32Array = labels.iter().map(position).collect::<DfResult<_>>()?;
                Ok(ColumnarValue::Array(Arc::new(out) as ArrayRef))
            }
        }
    }
}

fn position_of(e: Expr, of: &EnumType) -> Expr {
    let f = EnumPosition {
        signature: Signature::new(TypeSignature::Any(1), Volatility::Immutable),
        of: of.clone(),
    };
    Expr::ScalarFunction(ScalarFunction::new_udf(
        Arc::new(ScalarUDF::new_from_impl(f)),
        vec![e],
    ))
}

/// Whether `e` is a text value that can stand for a label (a literal or a text expression).
fn is_text(e: &Expr, schema: &DFSchema) -> bool {
    e.get_type(schema).is_ok_and(|t| {
        matches!(
            t,
            ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View
        )
    })
}

pub struct ValueOrder {
    engine: Arc<Engine>,
}

impl std::fmt::Debug for ValueOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ValueOrder")
    }
}

impl ValueOrder {
    pub fn new(engine: Arc<Engine>) -> Self {
        ValueOrder { engine }
    }

    fn rewrite(&self, e: Expr, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
        match e {
            Expr::BinaryExpr(BinaryExpr { left, op, right })
                if matches!(
                    op,
                    Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq
                ) =>
            {
                let of = enum_of(&self.engine, &left, schema)
                    .or_else(|| enum_of(&self.engine, &right, schema));
                match of {
                    Some(of) if is_text(&left, schema) && is_text(&right, schema) => {
                        Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
                            Box::new(position_of(*left, &of)),
                            op,
                            Box::new(position_of(*right, &of)),
                        ))))
                    }
                    _ => Ok(Transformed::no(Expr::BinaryExpr(BinaryExpr {
                        left,
                        op,
                        right,
                    }))),
                }
            }
            Expr::AggregateFunction(f)
                if matches!(f.func.name(), "min" | "max")
                    && f.params.args.first().is_some_and(|a| is_jsonb(a, schema)) =>
            {
                Err(df_error(
                    SqlError::new(
                        code::UNDEFINED_FUNCTION,
                        format!("function {}(jsonb) does not exist", f.func.name()),
                    )
                    .with_hint(
                        "No function matches the given name and argument types. You might need to \
                     add explicit type casts.",
                    ),
                ))
            }
            Expr::AggregateFunction(f)
                if matches!(f.func.name(), "min" | "max")
                    && f.params
                        .args
                        .first()
                        .is_some_and(|a| enum_of(&self.engine, a, schema).is_some()) =>
            {
                Err(df_error(SqlError::unsupported(format!(
                    "{}() of an enum type",
                    f.func.name()
                ))))
            }
            Expr::WindowFunction(mut w) => {
                let mut changed = false;
                for key in w.params.order_by.iter_mut() {
                    if let Some(sorted) = sort_key(&self.engine, &key.expr, schema) {
                        key.expr = sorted;
                        changed = true;
                    }
                }
                let e = Expr::WindowFunction(w);
                Ok(if changed {
                    Transformed::yes(e)
                } else {
                    Transformed::no(e)
                })
            }
            other => Ok(Transformed::no(other)),
        }
    }
}

impl AnalyzerRule for ValueOrder {
    fn name(&self) -> &str {
        "pg_value_order"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        let plan = rewrite_expressions_up(plan, |e, schema| self.rewrite(e, schema))?;
        Ok(plan
            .transform_up_with_subqueries(|node| {
                Ok(replace_sort_keys(node, |e, schema| {
                    sort_key(&self.engine, e, schema)
                }))
            })?
            .data)
    }
}
