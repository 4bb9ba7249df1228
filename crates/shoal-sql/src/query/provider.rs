//! DataFusion's view of a row table: a `TableProvider` that scans the versions visible to the
//! current statement's snapshot into Arrow batches, with projection and primary-key range
//! pushdown. A DML variant also records which row each output line came from, so UPDATE and
//! DELETE can compute their targets with DataFusion and then write through the storage API.

use std::ops::Bound;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{ArrayRef, UInt64Array};
use datafusion::arrow::datatypes::{DataType as ArrowType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::catalog::Session;
use datafusion::common::{Constraint, Constraints, Result as DfResult};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use parking_lot::Mutex;
use shoal_storage::catalog::TableDef;
use shoal_storage::index::IndexDef;
use shoal_storage::row_codec;
use shoal_storage::table::{RowRef, RowTable};
use shoal_storage::types::{DataType, Value};
use shoal_storage::{Direction, StorageError};

use crate::query::access_path::{self, IndexRead};
use crate::query::row_scan_exec::{Partitions, RowScanExec, ScanRequest};
use crate::query::scope::PlanScope;

use crate::types::{array_from_values, value_from_array};

/// Name of the extra column the DML scan adds: the position of the row in the capture list.
pub const ROW_POSITION_COLUMN: &str = "__shoal_row_position";
const BATCH_ROWS: usize = 8192;

/// Rows a DML scan produced, in the order of their positions.
pub type RowCapture = Arc<Mutex<Vec<RowRef>>>;

pub fn table_schema(def: &TableDef) -> SchemaRef {
    let fields: Vec<Field> = def
        .columns
        .iter()
        .map(|c| crate::types::arrow_field(&c.name, &c.data_type))
        .collect();
    Arc::new(Schema::new(fields))
}

/// The table's schema, plus the row position column for a DML target scan.
pub fn scan_schema(def: &TableDef, capture: bool) -> SchemaRef {
    let schema = table_schema(def);
    if !capture {
        return schema;
    }
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(ROW_POSITION_COLUMN, ArrowType::UInt64, false));
    Arc::new(Schema::new(fields))
}

pub struct RowTableProvider {
    source: Arc<RowSource>,
    /// The primary key, which lets DataFusion know the functional dependencies PostgreSQL
    /// knows (`GROUP BY id` allows selecting the table's other columns).
    constraints: Constraints,
}

/// What a scan of a row table reads from: kept by the plan's scan nodes, which read it again
/// when a kept plan runs again (`row_scan_exec`).
pub struct RowSource {
    pub def: Arc<TableDef>,
    pub table: Arc<RowTable>,
    /// Where the snapshot and the DML capture are read at scan time (not at planning time:
    /// a prepared statement's plan is reused by later statements with newer snapshots).
    pub scope: Arc<PlanScope>,
    /// The table's indexes that hold every row, for index reads (`access_path`).
    pub indexes: Vec<IndexDef>,
    capture: bool,
    pub schema: SchemaRef,
}

// TableProvider requires Debug, but shoal_storage's RowTable does not implement it.
impl std::fmt::Debug for RowTableProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.source.fmt(f)
    }
}

impl std::fmt::Debug for RowSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowSource")
            .field("table", &self.def.name)
            .field("oid", &self.def.oid)
            .field("capture", &self.capture)
            .finish()
    }
}

impl RowTableProvider {
    /// The table this provider reads.
    pub fn def(&self) -> Arc<TableDef> {
        self.source.def.clone()
    }

    pub fn new(
        def: Arc<TableDef>,
        table: Arc<RowTable>,
        scope: Arc<PlanScope>,
        capture: bool,
    ) -> Self {
        let indexes = table.indexes();
        let schema = scan_schema(&def, capture);
        let constraints = match def.primary_key() {
            Some((_, columns)) => {
                Constraints::new_unverified(vec![Constraint::PrimaryKey(columns.to_vec())])
            }
            None => Constraints::default(),
        };
        let source = RowSource {
            def,
            table,
            scope,
            indexes,
            capture,
            schema,
        };
        RowTableProvider {
            source: Arc::new(source),
            constraints,
        }
    }
}

impl RowSource {
    fn capture_list(&self) -> Option<RowCapture> {
        if !self.capture {
            return None;
        }
        self.scope.capture_for(self.def.oid)
    }

    pub fn collect_rows(
        &self,
        read: Option<IndexRead>,
        projection: &[usize],
        limit: Option<usize>,
    ) -> Vec<RecordBatch> {
        self.collect_rows_in(None, read, projection, limit)
            .expect("an unordered read falls back to a scan")
    }

    /// `collect_rows`, and with `order`, an index read whose rows come in the index's key
    /// order (ascending or descending). An ordered read cannot fall back to a table scan, so
    /// it fails when its index is gone.
    pub fn collect_rows_in(
        &self,
        order: Option<Direction>,
        read: Option<IndexRead>,
        projection: &[usize],
        limit: Option<usize>,
    ) -> Result<Vec<RecordBatch>, StorageError> {
        let types = self.def.column_types();
        let table_columns = self.def.columns.len();
        let data_cols: Vec<usize> = projection
            .iter()
            .copied()
            .filter(|c| *c < table_columns)
            .collect();
        let wants_position = projection.iter().any(|c| *c >= table_columns);
        let out_schema = Arc::new(
            self.schema
                .project(projection)
                .expect("projection within schema"),
        );
        let mut batches = Vec::new();
        // Grown as rows come: a batch's worth up front is a block big enough for malloc to map
        // and unmap on every scan (see `allocator`), which costs more than a short index read.
        let mut columns: Vec<Vec<Value>> = vec![Vec::new(); data_cols.len()];
        let mut positions: Vec<u64> = Vec::new();
        let capture = self.capture_list();
        let mut captured = capture.as_ref().map(|c| c.lock());
        let snapshot = self.scope.snapshot();
        self.scope.note_read(self.table.id());
        let mut rows_in_batch = 0usize;
        let mut total = 0usize;
        let mut scratch = Vec::with_capacity(data_cols.len());
        // `batches` is a parameter, not a capture, so it can be inspected between flushes.
        let flush = |batches: &mut Vec<RecordBatch>,
                     columns: &mut Vec<Vec<Value>>,
                     positions: &mut Vec<u64>,
                     rows: usize| {
            let mut arrays: Vec<ArrayRef> = Vec::with_capacity(projection.len());
            let mut data_iter = 0;
            for &c in projection {
                if c < table_columns {
                    arrays.push(array_from_values(&types[c], columns[data_iter].iter()));
                    columns[data_iter].clear();
                    data_iter += 1;
                } else {
                    arrays.push(Arc::new(UInt64Array::from(std::mem::take(positions))));
                }
            }
            let options = RecordBatchOptions::new().with_row_count(Some(rows));
            batches.push(
                RecordBatch::try_new_with_options(out_schema.clone(), arrays, &options)
                    .expect("arrays match schema"),
            );
        };
        let mut visit = |row: &RowRef, bytes: &[u8]| -> bool {
            scratch.clear();
            row_codec::decode_into(&types, bytes, &data_cols, &mut scratch);
            for (i, v) in scratch.drain(..).enumerate() {
                columns[i].push(v);
            }
            // Position = index in the capture list. Without a list (the capture was cleared
            // before this scan ran) the column still needs one value per row, or the batch
            // would not match its schema.
            let position = match captured.as_mut() {
                Some(list) => {
                    list.push(row.clone());
                    list.len() as u64 - 1
                }
                None => total as u64,
            };
            if wants_position {
                positions.push(position);
            }
            rows_in_batch += 1;
            total += 1;
            if rows_in_batch == BATCH_ROWS {
                flush(&mut batches, &mut columns, &mut positions, rows_in_batch);
                rows_in_batch = 0;
            }
            limit.is_none_or(|l| total < l)
        };
        match read {
            Some(read) => {
                let mut scanned = Ok(());
                for (lower, upper) in &read.ranges {
                    scanned = self.table.index_scan_in(
                        order.unwrap_or(Direction::Forward),
                        read.index,
                        &snapshot,
                        slice_bound(lower),
                        slice_bound(upper),
                        &mut visit,
                    );
                    // No limit comes with filters, so every range is read.
                    if scanned.is_err() {
                        break;
                    }
                }
                // The only failure is a missing index (dropped since planning); it fails before
                // visiting any row, and the filters are Inexact, so a full scan is correct.
                match scanned {
                    Err(e) if order.is_some() => return Err(e),
                    Err(_) => self.table.scan(&snapshot, &mut visit),
                    Ok(()) => {}
                }
            }
            None => self.table.scan(&snapshot, &mut visit),
        }
        if rows_in_batch > 0 || batches.is_empty() {
            flush(&mut batches, &mut columns, &mut positions, rows_in_batch);
        }
        Ok(batches)
    }
}

fn slice_bound(b: &Bound<Vec<Value>>) -> Bound<&[Value]> {
    match b {
        Bound::Included(v) => Bound::Included(v),
        Bound::Excluded(v) => Bound::Excluded(v),
        Bound::Unbounded => Bound::Unbounded,
    }
}

#[async_trait]
impl TableProvider for RowTableProvider {
    fn schema(&self) -> SchemaRef {
        self.source.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn constraints(&self) -> Option<&Constraints> {
        Some(&self.constraints)
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        let source = &self.source;
        Ok(filters
            .iter()
            .map(
                |f| match access_path::narrows(&source.def, &source.indexes, f) {
                    true => TableProviderFilterPushDown::Inexact,
                    false => TableProviderFilterPushDown::Unsupported,
                },
            )
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let all: Vec<usize> = (0..self.source.schema.fields().len()).collect();
        let request = Arc::new(ScanRequest {
            source: self.source.clone(),
            projection: projection.cloned().unwrap_or(all),
            filters: filters.to_vec(),
            limit,
            order: None,
        });
        let partitions = Partitions::UpTo(state.config().target_partitions());
        Ok(Arc::new(RowScanExec::read(request, partitions)?))
    }
}

/// Reads rows of an Arrow batch back as storage values of the given types.
pub fn batch_row_values(
    batch: &RecordBatch,
    row: usize,
    types: &[DataType],
) -> crate::error::SqlResult<Vec<Value>> {
    types
        .iter()
        .enumerate()
        .map(|(i, t)| value_from_array(batch.column(i).as_ref(), row, t))
        .collect()
}
