//! What a point SELECT returns: its result columns (`SelectShape`, built once per plan) and
//! the rows found (`PointRows`), which the wire encoder may write straight from storage values.

use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use shoal_storage::types::{DataType, Value};

use crate::error::SqlResult;
use crate::session::{ResultColumn, StatementResult};
use crate::types::{array_from_values, arrow_type};

/// What a point SELECT returns, shared by all executions of its plan.
#[derive(Debug)]
pub struct SelectShape {
    pub columns: Vec<ResultColumn>,
    /// The projected columns' types, one per result column.
    pub types: Vec<DataType>,
    /// The result batch's schema, when the rows are wanted as a batch.
    pub schema: SchemaRef,
    /// Every result type prints the same from a storage value as from an Arrow array, so the
    /// rows can go to the wire as values (see `StatementResult::PointRows`).
    pub text_from_values: bool,
}

impl SelectShape {
    /// The shape of result columns `columns` of types `types`.
    pub fn new(columns: Vec<ResultColumn>, types: Vec<DataType>) -> Self {
        assert_eq!(columns.len(), types.len(), "a type per result column");
        let fields: Vec<Field> = columns
            .iter()
            .zip(&types)
            .map(|(c, t)| Field::new(c.name.to_string(), arrow_type(t), true))
            .collect();
        SelectShape {
            text_from_values: types.iter().all(Self::prints_from_values),
            schema: Arc::new(Schema::new(fields)),
            columns,
            types,
        }
    }

    /// The types whose text output `pgtext::write_value` gives exactly as
    /// `pgtext::format_array_value` does. Others (char(n), whose stored value lacks its
    /// padding; numeric, whose array type decides trailing zeros; times, ...) take the batch.
    pub fn prints_from_values(t: &DataType) -> bool {
        matches!(
            t,
            DataType::Bool
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::Float32
                | DataType::Float64
                | DataType::Text
                | DataType::Varchar(_)
        )
    }
}

/// The rows a point SELECT found, as storage values (at most one row: the key is unique).
#[derive(Debug)]
pub struct PointRows {
    pub shape: Arc<SelectShape>,
    pub rows: Vec<Vec<Value>>,
}

impl PointRows {
    /// The statement's result: the rows as they are when the wire encoder can print them from
    /// storage values, else as an Arrow batch.
    pub fn into_result(self) -> SqlResult<StatementResult> {
        if self.shape.text_from_values {
            Ok(StatementResult::PointRows(Box::new(self)))
        } else {
            self.into_rows()
        }
    }

    /// The rows as a one-batch `StatementResult::Rows`.
    pub fn into_rows(self) -> SqlResult<StatementResult> {
        let shape = &self.shape;
        let arrays = shape
            .types
            .iter()
            .enumerate()
            .map(|(i, t)| array_from_values(t, self.rows.iter().map(|r| &r[i])))
            .collect();
        let batch = RecordBatch::try_new_with_options(
            shape.schema.clone(),
            arrays,
            &datafusion::arrow::record_batch::RecordBatchOptions::new()
                .with_row_count(Some(self.rows.len())),
        )?;
        Ok(StatementResult::Rows {
            columns: shape.columns.clone(),
            batches: vec![batch],
            tag: "SELECT",
        })
    }
}
