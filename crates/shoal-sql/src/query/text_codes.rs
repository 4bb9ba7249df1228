//! GROUP BY on a column table's text column groups on its dictionary codes. Such a column is
//! a `Dictionary(Int32, Utf8)` (see `shoal_storage::text_dictionary`), and DataFusion groups
//! dictionaries through its general row-format path, which copies each row's text. Every
//! segment of a column whose dictionary is `shared` codes it with the same table-wide codes, so
//! this rule groups on the codes instead (a plain Int32 key, DataFusion's fastest) and turns
//! the groups' codes back into text on top of the aggregate: `SELECT cab_type, count(*) ...
//! GROUP BY cab_type` hashes 4-byte integers and looks up three strings at the end.
//!
//! The rule applies when the grouped column comes straight from a column table's scan (through
//! filters, projections and aliases only). A segment appended after planning may, in a rare
//! case, have fallen back to a dictionary of its own (the table's was full); `TextCode` then
//! codes its values by lookup, giving values the table's dictionary lacks codes of their own,
//! so the answer stays right.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, DictionaryArray, Int32Array, StringArray,
};
use datafusion::arrow::datatypes::{DataType as ArrowType, Field, FieldRef, Int32Type};
use datafusion::common::tree_node::Transformed;
use datafusion::common::{internal_err, Column, Result as DfResult};
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::{
    Aggregate, ColumnarValue, Expr, LogicalPlan, Projection, ReturnFieldArgs, ScalarFunctionArgs,
    ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::optimizer::ApplyOrder;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};
use parking_lot::Mutex;
use shoal_storage::text_dictionary::{
    coded_text_type, remap_keys, TextDictionary, DICTIONARY_VALUES_MAX,
};

use crate::query::column_provider::ColumnTableProvider;

/// Codes given to values the table's dictionary does not have start here, above any code of it.
const OTHER_CODES_START: i32 = 2 * DICTIONARY_VALUES_MAX as i32;

#[derive(Debug)]
pub struct GroupOnTextCodes;

impl OptimizerRule for GroupOnTextCodes {
    fn name(&self) -> &str {
        "shoal_group_on_text_codes"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::BottomUp)
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> DfResult<Transformed<LogicalPlan>> {
        match plan {
            LogicalPlan::Aggregate(agg) => group_on_codes(agg),
            other => Ok(Transformed::no(other)),
        }
    }
}

/// Replaces each group column that has shared table-wide codes with its codes, and decodes
/// them in a projection on top that gives the aggregate's original schema.
fn group_on_codes(agg: Aggregate) -> DfResult<Transformed<LogicalPlan>> {
    let spaces: Vec<Option<Arc<CodeSpace>>> = agg
        .group_expr
        .iter()
        .map(|g| match g {
            Expr::Column(col) => shared_dictionary(&agg.input, col).map(CodeSpace::new),
            _ => None,
        })
        .collect();
    if spaces.iter().all(Option::is_none) {
        return Ok(Transformed::no(LogicalPlan::Aggregate(agg)));
    }
    let groups: Vec<Expr> = agg
        .group_expr
        .iter()
        .zip(&spaces)
        .enumerate()
        .map(|(i, (g, space))| match space {
            Some(space) => TextCode::udf(space.clone())
                .call(vec![g.clone()])
                .alias(format!("__shoal_text_code_{i}")),
            None => g.clone(),
        })
        .collect();
    let original = agg.schema.clone();
    let coded = Aggregate::try_new(agg.input, groups, agg.aggr_expr)?;
    let coded_schema = coded.schema.clone();
    let exprs: Vec<Expr> = original
        .iter()
        .enumerate()
        .map(|(i, (qualifier, field))| {
            let column = Expr::Column(Column::from(coded_schema.qualified_field(i)));
            let value = match spaces.get(i).and_then(Option::as_ref) {
                Some(space) => TextValue::udf(space.clone()).call(vec![column]),
                None => column,
            };
            value.alias_qualified(qualifier.cloned(), field.name())
        })
        .collect();
    let projection = Projection::try_new(exprs, Arc::new(LogicalPlan::Aggregate(coded)))?;
    Ok(Transformed::yes(LogicalPlan::Projection(projection)))
}

/// The dictionary of `col` when it is a column table's text column with shared codes, read
/// through filters, plain projections and aliases only.
fn shared_dictionary(plan: &LogicalPlan, col: &Column) -> Option<Arc<TextDictionary>> {
    match plan {
        LogicalPlan::Filter(f) => shared_dictionary(&f.input, col),
        LogicalPlan::SubqueryAlias(a) => {
            shared_dictionary(&a.input, &Column::new_unqualified(&col.name))
        }
        LogicalPlan::Projection(p) => {
            let i = p.schema.iter().position(|(q, f)| {
                f.name() == &col.name && (col.relation.is_none() || q == col.relation.as_ref())
            })?;
            match p.expr.get(i)?.clone().unalias() {
                Expr::Column(inner) => shared_dictionary(&p.input, &inner),
                _ => None,
            }
        }
        LogicalPlan::TableScan(scan) => {
            let provider = source_as_provider(&scan.source).ok()?;
            let table = &provider.downcast_ref::<ColumnTableProvider>()?.table;
            let c = table.schema().index_of(&col.name).ok()?;
            let dictionary = table.dictionary(c)?;
            dictionary.is_shared().then(|| dictionary.clone())
        }
        _ => None,
    }
}

/// A shared `CodeSpace`, equal only to itself: plans compare UDFs by value, and two rewrites
/// of one column must not be taken for one.
#[derive(Debug, Clone)]
struct SpaceRef(Arc<CodeSpace>);

impl PartialEq for SpaceRef {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for SpaceRef {}

impl Hash for SpaceRef {
    fn hash<H: Hasher>(&self, state: &mut H) {
        Arc::as_ptr(&self.0).hash(state)
    }
}

/// The return field of `TextCode` and `TextValue`: their type, with the argument's field
/// metadata (a varchar or char column's PostgreSQL type).
fn field_keeping_metadata(name: &str, data_type: ArrowType, args: &ReturnFieldArgs) -> FieldRef {
    Arc::new(Field::new(name, data_type, true).with_metadata(args.arg_fields[0].metadata().clone()))
}

/// One grouped column's codes: the table's dictionary, and codes for values it lacks.
#[derive(Debug)]
struct CodeSpace {
    dictionary: Arc<TextDictionary>,
    others: Mutex<OtherValues>,
}

#[derive(Debug, Default)]
struct OtherValues {
    codes: HashMap<String, i32>,
    values: Vec<String>,
}

impl CodeSpace {
    fn new(dictionary: Arc<TextDictionary>) -> Arc<CodeSpace> {
        Arc::new(CodeSpace {
            dictionary,
            others: Mutex::new(OtherValues::default()),
        })
    }

    fn code_of(&self, value: &str) -> i32 {
        if let Some(code) = self.dictionary.code_of(value) {
            return code;
        }
        let mut others = self.others.lock();
        if let Some(&code) = others.codes.get(value) {
            return code;
        }
        let code = OTHER_CODES_START + others.values.len() as i32;
        others.codes.insert(value.to_string(), code);
        others.values.push(value.to_string());
        code
    }
}

/// The codes of a coded text column (Int32).
#[derive(Debug, PartialEq, Eq, Hash)]
struct TextCode {
    space: SpaceRef,
    signature: Signature,
}

impl TextCode {
    fn udf(space: Arc<CodeSpace>) -> ScalarUDF {
        ScalarUDF::new_from_impl(TextCode {
            space: SpaceRef(space),
            signature: Signature::exact(vec![coded_text_type()], Volatility::Immutable),
        })
    }
}

impl ScalarUDFImpl for TextCode {
    fn name(&self) -> &str {
        "shoal_text_code"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(ArrowType::Int32)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        Ok(field_keeping_metadata(
            self.name(),
            self.return_type(&[])?,
            &args,
        ))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let array = args.args[0].to_array(args.number_rows)?;
        let Some(text) = array.as_dictionary_opt::<Int32Type>() else {
            return internal_err!("shoal_text_code of {}", array.data_type());
        };
        // The common case: the scan's arrays carry the dictionary's values as they are now.
        if Arc::ptr_eq(text.values(), &self.space.0.dictionary.values()) {
            return Ok(ColumnarValue::Array(Arc::new(text.keys().clone())));
        }
        let values = text.values().as_string::<i32>();
        let remap: Vec<i32> = values
            .iter()
            .map(|v| self.space.0.code_of(v.unwrap_or("")))
            .collect();
        let codes = remap_keys(text.keys(), &remap);
        Ok(ColumnarValue::Array(Arc::new(codes)))
    }
}

/// Codes back to the text column: a dictionary array over the table dictionary's values.
#[derive(Debug, PartialEq, Eq, Hash)]
struct TextValue {
    space: SpaceRef,
    signature: Signature,
}

impl TextValue {
    fn udf(space: Arc<CodeSpace>) -> ScalarUDF {
        ScalarUDF::new_from_impl(TextValue {
            space: SpaceRef(space),
            signature: Signature::exact(vec![ArrowType::Int32], Volatility::Immutable),
        })
    }
}

impl ScalarUDFImpl for TextValue {
    fn name(&self) -> &str {
        "shoal_text_value"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(coded_text_type())
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        Ok(field_keeping_metadata(
            self.name(),
            self.return_type(&[])?,
            &args,
        ))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let array = args.args[0].to_array(args.number_rows)?;
        let codes = array.as_primitive::<Int32Type>().clone();
        let table_values = self.space.0.dictionary.values();
        let others = self.space.0.others.lock();
        if others.values.is_empty() {
            let text = DictionaryArray::try_new(codes, table_values)?;
            return Ok(ColumnarValue::Array(Arc::new(text)));
        }
        // Codes of values the table's dictionary lacked follow its values.
        let first_other = table_values.len() as i32;
        let other_values: ArrayRef = Arc::new(StringArray::from_iter_values(&others.values));
        let values = datafusion::arrow::compute::concat(&[&table_values, &other_values])?;
        let codes: Int32Array = codes.unary(|c| match c >= OTHER_CODES_START {
            true => first_other + (c - OTHER_CODES_START),
            false => c,
        });
        let text = DictionaryArray::try_new(codes, values)?;
        Ok(ColumnarValue::Array(Arc::new(text)))
    }
}
