//! `array_agg` whose result keeps its elements' PostgreSQL type. DataFusion's array_agg builds its
//! list element from the argument's Arrow type alone, so `array_agg(attname)` would be a
//! `text[]` and `array_agg(uuid_column)` a `text[]` too. PostgreSQL answers `name[]` and
//! `uuid[]`, and clients decode by that OID: Sequelize reads an index's column list from a
//! `name[]` in its own way and fails on a parsed `text[]`. Everything but the result field
//! is DataFusion's.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType as ArrowType, FieldRef};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::expr::AggregateFunctionParams;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::AggregateOrderSensitivity;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, GroupsAccumulator, ReversedUDAF, Signature,
};

use crate::types::{oid, PG_TYPE_METADATA_KEY};

/// Replaces DataFusion's `array_agg` with one that keeps its argument's PostgreSQL type.
pub fn register(state: &mut datafusion::execution::SessionState) {
    let inner = state
        .udaf("array_agg")
        .expect("DataFusion provides array_agg");
    state
        .register_udaf(Arc::new(AggregateUDF::new_from_impl(TypedArrayAgg {
            inner,
        })))
        .expect("function registration cannot fail");
}

#[derive(Debug)]
struct TypedArrayAgg {
    inner: Arc<AggregateUDF>,
}

impl TypedArrayAgg {
    fn wrap(inner: AggregateUDF) -> Arc<dyn AggregateUDFImpl> {
        Arc::new(TypedArrayAgg {
            inner: Arc::new(inner),
        })
    }
}

impl PartialEq for TypedArrayAgg {
    fn eq(&self, other: &Self) -> bool {
        self.inner == other.inner
    }
}
impl Eq for TypedArrayAgg {}
impl Hash for TypedArrayAgg {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.inner.hash(state)
    }
}

impl AggregateUDFImpl for TypedArrayAgg {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn coerce_types(&self, arg_types: &[ArrowType]) -> DfResult<Vec<ArrowType>> {
        self.inner.coerce_types(arg_types)
    }

    fn return_type(&self, arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        self.inner.return_type(arg_types)
    }

    /// The result field declares the array type of the argument's PostgreSQL type, which the
    /// result description reports. The list's element field stays as DataFusion builds it:
    /// the accumulators build their arrays from the Arrow type alone, and a batch's nested
    /// fields must equal its schema's.
    fn return_field(&self, arg_fields: &[FieldRef]) -> DfResult<FieldRef> {
        let field = self.inner.return_field(arg_fields)?;
        let array_oid = arg_fields
            .first()
            .and_then(|argument| argument.metadata().get(PG_TYPE_METADATA_KEY))
            .and_then(|v| v.parse::<u32>().ok())
            .and_then(oid::array_of);
        Ok(match array_oid {
            Some(array_oid) => {
                Arc::new(field.as_ref().clone().with_metadata(
                    [(PG_TYPE_METADATA_KEY.to_string(), array_oid.to_string())].into(),
                ))
            }
            None => field,
        })
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

    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        self.inner.order_sensitivity()
    }

    fn with_beneficial_ordering(
        self: Arc<Self>,
        beneficial_ordering: bool,
    ) -> DfResult<Option<Arc<dyn AggregateUDFImpl>>> {
        Ok(self
            .inner
            .as_ref()
            .clone()
            .with_beneficial_ordering(beneficial_ordering)?
            .map(TypedArrayAgg::wrap))
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        match self.inner.reverse_udf() {
            ReversedUDAF::Reversed(reversed) => ReversedUDAF::Reversed(Arc::new(
                AggregateUDF::new_from_shared_impl(TypedArrayAgg::wrap(reversed.as_ref().clone())),
            )),
            other => other,
        }
    }

    fn supports_null_handling_clause(&self) -> bool {
        self.inner.inner().supports_null_handling_clause()
    }

    fn default_value(&self, data_type: &ArrowType) -> DfResult<ScalarValue> {
        self.inner.default_value(data_type)
    }

    fn schema_name(&self, params: &AggregateFunctionParams) -> DfResult<String> {
        self.inner.inner().schema_name(params)
    }
}
