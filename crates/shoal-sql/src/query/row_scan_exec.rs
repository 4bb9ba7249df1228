//! The physical plan node of a row-table scan. It holds the rows the scan read, which it hands
//! out as the memory source under it would, and what it needs to read them again: the table,
//! the projection, the pushed filters and the limit. Rows are read when the node is made (at
//! physical planning, under the statement's snapshot), and again by `reread`, which is how a
//! kept plan (`kept_plan`) takes fresh rows for each execution: with that execution's snapshot
//! and parameter values, which may choose other index ranges.
//!
//! EXPLAIN shows `IndexRead: table, index, ranges, rows` where the scan read an index
//! (`access_path`), and `RowScan: table, rows` where it read the whole table.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::memory::MemorySourceConfig;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Result as DfResult, Statistics};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::physical_plan::statistics::StatisticsArgs;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};

use crate::query::access_path::{self, KeyValues};
use crate::query::provider::RowSource;

/// What one scan of a row table reads: fixed when the plan is made.
#[derive(Debug)]
pub struct ScanRequest {
    pub source: Arc<RowSource>,
    /// Table columns to read (a position past the last column is the DML row position).
    pub projection: Vec<usize>,
    /// The filters DataFusion pushed down (Inexact: DataFusion applies them again).
    pub filters: Vec<Expr>,
    pub limit: Option<usize>,
}

#[derive(Debug)]
pub struct RowScanExec {
    request: Arc<ScanRequest>,
    /// The memory source holding the rows read.
    rows: Arc<dyn ExecutionPlan>,
    /// The index read and how many ranges of it, when the scan read an index.
    index: Option<(String, usize)>,
    rows_read: usize,
}

impl RowScanExec {
    /// Reads the rows `request` asks for into `partitions`.
    pub fn read(request: Arc<ScanRequest>, partitions: Partitions) -> DfResult<RowScanExec> {
        let source = &request.source;
        let read = access_path::choose(
            &source.def,
            &source.indexes,
            &request.filters,
            KeyValues::Bound,
        );
        let index = read.as_ref().map(|r| {
            let name = source
                .indexes
                .iter()
                .find(|i| i.id == r.index)
                .map_or_else(|| r.index.to_string(), |i| i.name.clone());
            (name, r.ranges.len())
        });
        // A limit is only safe to push when no filter is left for DataFusion to apply.
        let limit = request.limit.filter(|_| request.filters.is_empty());
        let batches = source.collect_rows(read, &request.projection, limit);
        let rows_read = batches.iter().map(RecordBatch::num_rows).sum();
        let schema = Arc::new(source.schema.project(&request.projection)?);
        let n = match partitions {
            Partitions::UpTo(target) => target.clamp(1, batches.len().max(1)),
            Partitions::Exactly(n) => n.max(1),
        };
        let parts = split_partitions(batches, n);
        let rows: Arc<dyn ExecutionPlan> = MemorySourceConfig::try_new_exec(&parts, schema, None)?;
        Ok(RowScanExec {
            request,
            rows,
            index,
            rows_read,
        })
    }

    pub fn rows_read(&self) -> usize {
        self.rows_read
    }

    pub fn request(&self) -> &ScanRequest {
        &self.request
    }

    pub fn request_arc(&self) -> Arc<ScanRequest> {
        self.request.clone()
    }

    /// The same scan read again, under the scope's current snapshot and with the current
    /// values of the plan's parameters.
    pub fn reread(&self) -> DfResult<RowScanExec> {
        let partitions = self.rows.properties().partitioning.partition_count();
        RowScanExec::read(self.request.clone(), Partitions::Exactly(partitions))
    }
}

/// How many partitions a scan spreads its batches over.
#[derive(Debug, Clone, Copy)]
pub enum Partitions {
    /// One per batch, up to this many (DataFusion's target partitions), so that DataFusion
    /// can work on them in parallel.
    UpTo(usize),
    /// Exactly this many, empty ones included: a re-read scan keeps the partitioning its
    /// parents were planned for.
    Exactly(usize),
}

/// Spreads batches round-robin over `n` partitions.
fn split_partitions(batches: Vec<RecordBatch>, n: usize) -> Vec<Vec<RecordBatch>> {
    let mut out = vec![Vec::new(); n];
    for (i, b) in batches.into_iter().enumerate() {
        out[i % n].push(b);
    }
    out
}

impl DisplayAs for RowScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let table = &self.request.source.def.name;
        match &self.index {
            Some((index, ranges)) => write!(
                f,
                "IndexRead: table={table} index={index} ranges={ranges} rows={}",
                self.rows_read
            ),
            None => write!(f, "RowScan: table={table} rows={}", self.rows_read),
        }
    }
}

impl ExecutionPlan for RowScanExec {
    fn name(&self) -> &str {
        "RowScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.rows.properties()
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    /// A leaf: the memory source is this node's own storage, not a child to optimize.
    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        debug_assert!(children.is_empty(), "a leaf gets no children");
        Ok(self)
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        self.rows.execute(partition, context)
    }

    fn metrics(&self) -> Option<MetricsSet> {
        self.rows.metrics()
    }

    /// The memory source's exact counts, which DataFusion uses to choose a join's build side.
    fn statistics_from_inputs(
        &self,
        input_stats: &[Arc<Statistics>],
        args: &StatisticsArgs,
    ) -> DfResult<Arc<Statistics>> {
        self.rows.statistics_from_inputs(input_stats, args)
    }
}
