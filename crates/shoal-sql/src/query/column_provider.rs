//! DataFusion's view of a column table: a `TableProvider` that hands out the segments visible to
//! the statement's snapshot without copying them (a segment nobody deleted from goes out as its
//! own arrays; otherwise the deleted rows are filtered out), skips segments whose min/max rule
//! out the query's filters, and spreads segments over DataFusion's partitions so a scan uses
//! every core. The DML variant adds each row's id (segment and offset) as an extra column.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, UInt64Array};
use datafusion::arrow::compute::filter;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::catalog::memory::MemorySourceConfig;
use datafusion::catalog::Session;
use datafusion::common::{Column, DFSchema, Result as DfResult, ScalarValue};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_optimizer::pruning::{PruningPredicateBuilder, PruningStatistics};
use datafusion::physical_plan::ExecutionPlan;
use shoal_storage::catalog::TableDef;
use shoal_storage::column::row_id;
use shoal_storage::{ColumnTable, Segment};

use crate::query::provider::ROW_POSITION_COLUMN;
use crate::query::scope::PlanScope;
use crate::query::BATCH_SIZE_ROWS;

pub struct ColumnTableProvider {
    pub def: Arc<TableDef>,
    pub table: Arc<ColumnTable>,
    /// Where the snapshot is read at scan time (see `RowTableProvider`).
    pub scope: Arc<PlanScope>,
    /// Whether the scan adds the row id column (the target scan of an UPDATE or DELETE).
    capture: bool,
    schema: SchemaRef,
}

impl std::fmt::Debug for ColumnTableProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColumnTableProvider")
            .field("table", &self.def.name)
            .field("oid", &self.def.oid)
            .field("capture", &self.capture)
            .finish()
    }
}

impl ColumnTableProvider {
    pub fn new(
        def: Arc<TableDef>,
        table: Arc<ColumnTable>,
        scope: Arc<PlanScope>,
        capture: bool,
    ) -> Self {
        let schema = column_scan_schema(&table, capture);
        ColumnTableProvider {
            def,
            table,
            scope,
            capture,
            schema,
        }
    }

    /// Which of `segments` may hold rows matching `filters` (all of them when the filters say
    /// nothing the stats can use).
    fn prune(
        &self,
        state: &dyn Session,
        segments: &[Arc<Segment>],
        filters: &[Expr],
    ) -> DfResult<Vec<bool>> {
        let keep_all = vec![true; segments.len()];
        let Some(predicate) = conjunction(filters.iter().cloned()) else {
            return Ok(keep_all);
        };
        let table_schema = self.table.schema();
        let df_schema = DFSchema::try_from(table_schema.as_ref().clone())?;
        // A filter DataFusion cannot turn into a physical expression here (a subquery, say)
        // prunes nothing; DataFusion still applies every filter after the scan.
        let Ok(physical) = state.create_physical_expr(predicate, &df_schema) else {
            return Ok(keep_all);
        };
        let Ok(pruning) = PruningPredicateBuilder::new()
            .with_file_schema(table_schema)
            .try_build(physical)
        else {
            return Ok(keep_all);
        };
        let stats = SegmentStatistics {
            def: &self.def,
            segments,
        };
        Ok(pruning.prune(&stats).unwrap_or(keep_all))
    }
}

/// The table's scan schema (text as dictionaries), plus the row id column for a DML target scan.
fn column_scan_schema(table: &ColumnTable, capture: bool) -> SchemaRef {
    let schema = table.schema();
    if !capture {
        return schema;
    }
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(ROW_POSITION_COLUMN, DataType::UInt64, false));
    Arc::new(Schema::new(fields))
}

/// Min/max/null counts of a list of segments, in the shape DataFusion's pruning asks for.
struct SegmentStatistics<'a> {
    def: &'a TableDef,
    segments: &'a [Arc<Segment>],
}

impl SegmentStatistics<'_> {
    fn column_stat(
        &self,
        column: &Column,
        pick: impl Fn(&shoal_storage::ColumnStats) -> &ArrayRef,
    ) -> Option<ArrayRef> {
        let c = self.def.column_index(&column.name)?;
        let parts: Vec<&dyn Array> = self
            .segments
            .iter()
            .map(|s| pick(&s.stats[c]).as_ref())
            .collect();
        datafusion::arrow::compute::concat(&parts).ok()
    }
}

impl PruningStatistics for SegmentStatistics<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.column_stat(column, |s| &s.min)
    }

    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.column_stat(column, |s| &s.max)
    }

    fn num_containers(&self) -> usize {
        self.segments.len()
    }

    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        let c = self.def.column_index(&column.name)?;
        Some(Arc::new(UInt64Array::from_iter_values(
            self.segments.iter().map(|s| s.stats[c].null_count as u64),
        )))
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        Some(Arc::new(UInt64Array::from_iter_values(
            self.segments.iter().map(|s| s.rows() as u64),
        )))
    }

    fn contained(
        &self,
        _column: &Column,
        _values: &std::collections::HashSet<ScalarValue>,
    ) -> Option<BooleanArray> {
        None
    }
}

#[async_trait]
impl TableProvider for ColumnTableProvider {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        // Filters prune whole segments; DataFusion still checks every row.
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let all: Vec<usize> = (0..self.schema.fields().len()).collect();
        let projection = projection.cloned().unwrap_or(all);
        let out_schema = Arc::new(self.schema.project(&projection)?);
        let table_columns = self.def.columns.len();
        let snapshot = self.scope.snapshot();
        self.scope.note_read(self.table.id());
        let segments: Vec<Arc<Segment>> = self
            .table
            .segments()
            .into_iter()
            .filter(|s| s.visible_to(&snapshot))
            .collect();
        let keep = self.prune(state, &segments, filters)?;
        // A limit is only safe to push when no filter is left for DataFusion to apply.
        let limit = if filters.is_empty() { limit } else { None };
        let mut batches = Vec::new();
        let mut total = 0usize;
        for (segment, _) in segments.iter().zip(keep).filter(|(_, k)| *k) {
            if limit.is_some_and(|l| total >= l) {
                break;
            }
            let mask = segment.live_mask(&snapshot);
            let mut arrays: Vec<ArrayRef> = Vec::with_capacity(projection.len());
            for &c in &projection {
                let array = if c < table_columns {
                    segment.column(c)
                } else {
                    Arc::new(UInt64Array::from_iter_values(
                        (0..segment.rows() as u32).map(|offset| row_id(segment.no, offset)),
                    ))
                };
                arrays.push(match &mask {
                    None => array,
                    Some(mask) => filter(array.as_ref(), mask)?,
                });
            }
            let rows = mask.as_ref().map_or(segment.rows(), |m| m.true_count());
            if rows == 0 {
                continue;
            }
            let options = RecordBatchOptions::new().with_row_count(Some(rows));
            let batch = RecordBatch::try_new_with_options(out_schema.clone(), arrays, &options)?;
            // Operators work a batch at a time: slices of BATCH_SIZE_ROWS (zero-copy) keep a
            // hash aggregation's per-batch hashes and group ids in cache, where a whole
            // segment's would not fit.
            for offset in (0..rows).step_by(BATCH_SIZE_ROWS) {
                batches.push(batch.slice(offset, BATCH_SIZE_ROWS.min(rows - offset)));
            }
            total += rows;
        }
        self.table.count_scan(total as u64);
        let partitions = state
            .config()
            .target_partitions()
            .clamp(1, batches.len().max(1));
        let mut parts = vec![Vec::new(); partitions];
        for (i, b) in batches.into_iter().enumerate() {
            parts[i % partitions].push(b);
        }
        Ok(MemorySourceConfig::try_new_exec(&parts, out_schema, None)?)
    }
}
