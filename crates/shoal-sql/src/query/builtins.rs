//! PostgreSQL's ordinary SQL functions where DataFusion lacks them or types them differently:
//! `avg` and `sum` with PostgreSQL's result types (avg of integers is numeric, sum of bigints
//! is numeric), `pg_typeof`, `pg_sleep`, and `format` (in `format.rs`). Functions that are only
//! another name for a DataFusion function (`ceiling`, `mod`, `sign`) are renamed in `rewrite.rs`
//! instead.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::{DataType as ArrowType, FieldRef};
use datafusion::common::{plan_err, Result as DfResult, ScalarValue};
use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::async_udf::{AsyncScalarUDF, AsyncScalarUDFImpl};
use datafusion::logical_expr::expr::AggregateFunctionParams;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    udaf_default_schema_name, Accumulator, AggregateUDF, AggregateUDFImpl, ColumnarValue, Expr,
    GroupsAccumulator, ReturnFieldArgs, ReversedUDAF, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl,
    Signature, Volatility,
};

use crate::query::functions::VOID_OID;
use crate::query::pg_catalog::format_type_oid;
use crate::timezone::SessionZone;
use crate::types::{pg_oid_for_arrow, PG_TYPE_METADATA_KEY};

/// Scale of numeric averages: PostgreSQL divides to at least 16 significant digits, which for
/// the common magnitudes (below 10,000) means 16 digits after the point.
const AVG_SCALE_MIN: i8 = 16;
/// Decimal scale the built-in average adds to its input's.
const AVG_SCALE_ADDED: i8 = 4;

pub fn register(state: &mut datafusion::execution::SessionState, zone: &SessionZone) {
    for (name, coerce) in [
        ("avg", avg_input_type as fn(&ArrowType) -> Option<ArrowType>),
        ("sum", sum_input_type),
    ] {
        let inner = state.udaf(name).expect("DataFusion provides avg and sum");
        let wrapped = PgAggregate {
            inner,
            signature: Signature::user_defined(Volatility::Immutable),
            coerce,
        };
        state
            .register_udaf(Arc::new(AggregateUDF::new_from_impl(wrapped)))
            .expect("function registration cannot fail");
    }
    state
        .register_udf(Arc::new(ScalarUDF::new_from_impl(PgTypeof {
            signature: Signature::any(1, Volatility::Immutable),
        })))
        .expect("function registration cannot fail");
    state
        .register_udf(Arc::new(ScalarUDF::new_from_impl(
            crate::query::format::PgFormat {
                signature: Signature::variadic_any(Volatility::Stable),
                zone: zone.clone(),
            },
        )))
        .expect("function registration cannot fail");
    state
        .register_udf(Arc::new(ScalarUDF::new_from_impl(
            crate::query::datetime_construct::MakeDate {
                signature: Signature::user_defined(Volatility::Immutable),
            },
        )))
        .expect("function registration cannot fail");
    state
        .register_udf(Arc::new(ScalarUDF::new_from_impl(
            crate::query::datetime_construct::ToTimestampFromEpoch {
                signature: Signature::user_defined(Volatility::Immutable),
            },
        )))
        .expect("function registration cannot fail");
    state
        .register_udf(Arc::new(ScalarUDF::new_from_impl(
            crate::query::datetime::Age {
                signature: Signature::user_defined(Volatility::Stable),
            },
        )))
        .expect("function registration cannot fail");
    state
        .register_udf(Arc::new(ScalarUDF::new_from_impl(
            crate::query::datetime::AtTimeZone {
                signature: Signature::user_defined(Volatility::Stable),
                zone: zone.clone(),
            },
        )))
        .expect("function registration cannot fail");
    let date_part = state
        .udf("date_part")
        .expect("DataFusion provides date_part");
    let extract = Arc::new(ScalarUDF::new_from_impl(crate::query::datetime::Extract {
        signature: Signature::user_defined(Volatility::Stable),
        date_part,
        zone: zone.clone(),
    }));
    state
        .register_udf(extract.clone())
        .expect("function registration cannot fail");
    state
        .register_udf(Arc::new(ScalarUDF::new_from_impl(
            crate::query::datetime::DatePart {
                signature: Signature::user_defined(Volatility::Immutable),
                extract,
            },
        )))
        .expect("function registration cannot fail");
    let date_trunc = state
        .udf("date_trunc")
        .expect("DataFusion provides date_trunc");
    state
        .register_udf(Arc::new(ScalarUDF::new_from_impl(
            crate::query::datetime::DateTrunc {
                signature: Signature::user_defined(Volatility::Immutable),
                inner: date_trunc,
            },
        )))
        .expect("function registration cannot fail");
    let sleep = AsyncScalarUDF::new(Arc::new(PgSleep {
        signature: Signature::uniform(1, vec![ArrowType::Float64], Volatility::Volatile),
    }));
    state
        .register_udf(Arc::new(sleep.into_scalar_udf()))
        .expect("function registration cannot fail");
    state
        .register_udf(Arc::new(ScalarUDF::new_from_impl(PgTextOut {
            signature: Signature::any(1, Volatility::Stable),
            zone: zone.clone(),
        })))
        .expect("function registration cannot fail");
}

/// avg over integers is numeric; over numeric it keeps at least 16 fractional digits.
fn avg_input_type(t: &ArrowType) -> Option<ArrowType> {
    let decimal_for_scale =
        |s: i8| ArrowType::Decimal128(38, s.max(AVG_SCALE_MIN - AVG_SCALE_ADDED));
    match t {
        t if t.is_integer() => Some(decimal_for_scale(0)),
        ArrowType::Decimal32(_, s) | ArrowType::Decimal64(_, s) | ArrowType::Decimal128(_, s) => {
            Some(decimal_for_scale(*s))
        }
        ArrowType::Float16 | ArrowType::Float32 | ArrowType::Float64 | ArrowType::Null => {
            Some(ArrowType::Float64)
        }
        ArrowType::Duration(_) | ArrowType::Interval(_) => Some(t.clone()),
        _ => None,
    }
}

/// sum over smallint/integer is bigint; over bigint it is numeric, so it cannot overflow.
fn sum_input_type(t: &ArrowType) -> Option<ArrowType> {
    match t {
        ArrowType::Int8 | ArrowType::Int16 | ArrowType::Int32 => Some(ArrowType::Int64),
        ArrowType::UInt8 | ArrowType::UInt16 | ArrowType::UInt32 => Some(ArrowType::Int64),
        // The sum of bigints is numeric, but `arithmetic::type_for_postgres` casts them.
        ArrowType::Int64 => Some(ArrowType::Int64),
        ArrowType::UInt64 => Some(ArrowType::Decimal128(38, 0)),
        ArrowType::Decimal32(..) | ArrowType::Decimal64(..) | ArrowType::Decimal128(..) => {
            Some(t.clone())
        }
        ArrowType::Float16 | ArrowType::Float32 | ArrowType::Float64 | ArrowType::Null => {
            Some(ArrowType::Float64)
        }
        ArrowType::Duration(_) | ArrowType::Interval(_) => Some(t.clone()),
        _ => None,
    }
}

/// A DataFusion aggregate with PostgreSQL's argument coercion; everything else is delegated.
#[derive(Debug)]
struct PgAggregate {
    inner: Arc<AggregateUDF>,
    signature: Signature,
    coerce: fn(&ArrowType) -> Option<ArrowType>,
}

impl PartialEq for PgAggregate {
    fn eq(&self, other: &Self) -> bool {
        self.inner.name() == other.inner.name()
    }
}
impl Eq for PgAggregate {}
impl Hash for PgAggregate {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.inner.name().hash(state)
    }
}

impl AggregateUDFImpl for PgAggregate {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[ArrowType]) -> DfResult<Vec<ArrowType>> {
        let coerced: Option<Vec<ArrowType>> = match arg_types {
            [t] => (self.coerce)(t).map(|c| vec![c]),
            _ => None,
        };
        match coerced {
            Some(c) => Ok(c),
            None => plan_err!(
                "coercion from {} to the signature of '{}' failed",
                arg_types
                    .iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                self.inner.name()
            ),
        }
    }

    fn return_type(&self, arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        self.inner.return_type(arg_types)
    }

    fn is_nullable(&self) -> bool {
        self.inner.is_nullable()
    }

    fn accumulator(&self, acc_args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        self.inner.accumulator(acc_args)
    }

    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        self.inner.state_fields(args)
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        self.inner.groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> DfResult<Box<dyn GroupsAccumulator>> {
        self.inner.create_groups_accumulator(args)
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        self.inner.create_sliding_accumulator(args)
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        match self.inner.reverse_udf() {
            ReversedUDAF::Identical => ReversedUDAF::Identical,
            _ => ReversedUDAF::NotSupported,
        }
    }

    fn default_value(&self, data_type: &ArrowType) -> DfResult<ScalarValue> {
        self.inner.default_value(data_type)
    }

    /// DataFusion names an aggregate after its arguments without their casts, which makes
    /// `sum(val)` and `sum(val::bigint)` two columns of the same name in one aggregation;
    /// these aggregates keep the casts in their names.
    fn schema_name(&self, params: &AggregateFunctionParams) -> DfResult<String> {
        let mut named = params.clone();
        for arg in &mut named.args {
            if matches!(arg, Expr::Cast(_) | Expr::TryCast(_)) {
                let name = arg.to_string();
                *arg = arg.clone().alias(name);
            }
        }
        udaf_default_schema_name(self, &named)
    }
}

/// pg_typeof(x): the name of x's PostgreSQL type.
#[derive(Debug, PartialEq, Eq, Hash)]
struct PgTypeof {
    signature: Signature,
}

impl ScalarUDFImpl for PgTypeof {
    fn name(&self) -> &str {
        "pg_typeof"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(ArrowType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let field = &args.arg_fields[0];
        let name = match field.data_type() {
            ArrowType::Null => "unknown".to_string(),
            t => {
                let oid = field
                    .metadata()
                    .get(PG_TYPE_METADATA_KEY)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| pg_oid_for_arrow(t));
                format_type_oid(oid, -1).unwrap_or_else(|| t.to_string())
            }
        };
        Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some(name))))
    }
}

/// `CAST(x AS text)`, which `rewrite.rs` turns into `pg_text_out(x)`: PostgreSQL casts to text
/// with the type's output function, so a timestamp becomes `2024-01-02 03:04:05` (DataFusion's
/// cast writes a `T`), a float its shortest exact digits, an interval `1 day 02:00:00`. The one
/// exception is boolean, whose cast says `true` where its output says `t`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct PgTextOut {
    signature: Signature,
    /// A timestamptz shows in the session's zone.
    zone: SessionZone,
}

impl ScalarUDFImpl for PgTextOut {
    fn name(&self) -> &str {
        "pg_text_out"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(ArrowType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        use datafusion::arrow::array::{Array, BooleanArray, StringBuilder};
        let scalar = matches!(args.args[0], ColumnarValue::Scalar(_));
        let array = args.args[0].to_array(args.number_rows.max(1))?;
        // char(n) loses its padding on the way to text.
        let bpchar = args.arg_fields[0]
            .metadata()
            .get(PG_TYPE_METADATA_KEY)
            .and_then(|t| t.parse::<u32>().ok())
            == Some(crate::types::oid::BPCHAR);
        let vector = crate::types::is_catalog_vector(&args.arg_fields[0]);
        let out: ArrayRef = match array.data_type() {
            ArrowType::Utf8 if bpchar => {
                let padded = array
                    .as_any()
                    .downcast_ref::<datafusion::arrow::array::StringArray>()
                    .expect("utf8 array");
                Arc::new(
                    padded
                        .iter()
                        .map(|v| v.map(|v| v.trim_end_matches(' ')))
                        .collect::<datafusion::arrow::array::StringArray>(),
                )
            }
            ArrowType::Utf8 => array,
            ArrowType::LargeUtf8 | ArrowType::Utf8View | ArrowType::Null => {
                datafusion::arrow::compute::cast(&array, &ArrowType::Utf8)?
            }
            ArrowType::Boolean => {
                let b = array
                    .as_any()
                    .downcast_ref::<BooleanArray>()
                    .expect("boolean array");
                Arc::new(
                    b.iter()
                        .map(|v| v.map(|v| if v { "true" } else { "false" }))
                        .collect::<datafusion::arrow::array::StringArray>(),
                )
            }
            _ => {
                let zone = self.zone.get();
                let mut builder = StringBuilder::with_capacity(array.len(), array.len() * 16);
                let mut text = String::new();
                for row in 0..array.len() {
                    if array.is_null(row) {
                        builder.append_null();
                    } else {
                        text.clear();
                        if vector {
                            crate::pgtext::format_vector_value(array.as_ref(), row, &mut text);
                        } else {
                            crate::pgtext::format_array_value(
                                array.as_ref(),
                                row,
                                &zone,
                                &mut text,
                            );
                        }
                        builder.append_value(&text);
                    }
                }
                Arc::new(builder.finish())
            }
        };
        Ok(if scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)
        } else {
            ColumnarValue::Array(out)
        })
    }
}

/// `pg_sleep(seconds)`. It is async, so the sleep holds no thread and ends at once when the
/// statement is canceled or times out (the session drops the statement's future).
#[derive(Debug, PartialEq, Eq, Hash)]
struct PgSleep {
    signature: Signature,
}

impl ScalarUDFImpl for PgSleep {
    fn name(&self) -> &str {
        "pg_sleep"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(ArrowType::Utf8)
    }

    fn return_field_from_args(&self, _args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let field = datafusion::arrow::datatypes::Field::new(self.name(), ArrowType::Utf8, false)
            .with_metadata(
                [(PG_TYPE_METADATA_KEY.to_string(), VOID_OID.to_string())]
                    .into_iter()
                    .collect(),
            );
        Ok(Arc::new(field))
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        // AsyncScalarUDF calls invoke_async_with_args instead.
        datafusion::common::internal_err!("pg_sleep must be invoked asynchronously")
    }
}

#[async_trait::async_trait]
impl AsyncScalarUDFImpl for PgSleep {
    async fn invoke_async_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        use datafusion::arrow::array::{Array, Float64Array, StringArray};
        let rows = args.number_rows;
        let seconds = args.args[0].to_array(rows)?;
        let seconds = seconds
            .as_any()
            .downcast_ref::<Float64Array>()
            .expect("the signature coerces the argument to float8");
        // One sleep per row, as PostgreSQL evaluates a volatile function once per row.
        for row in 0..seconds.len() {
            if seconds.is_null(row) {
                continue;
            }
            let s = seconds.value(row);
            if s > 0.0 {
                let duration = std::time::Duration::try_from_secs_f64(s)
                    .unwrap_or(std::time::Duration::from_secs(u32::MAX as u64));
                tokio::time::sleep(duration).await;
            }
        }
        let empty: ArrayRef = Arc::new(StringArray::from(vec![""; rows]));
        Ok(ColumnarValue::Array(empty))
    }
}
