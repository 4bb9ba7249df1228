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
use std::ops::Bound;
use std::sync::Arc;

use datafusion::arrow::compute::SortOptions;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::memory::MemorySourceConfig;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, Result as DfResult, Statistics};
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::{LexOrdering, PhysicalSortExpr};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::statistics::StatisticsArgs;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};

use crate::query::access_path::{self, IndexRead, KeyValues};
use crate::query::provider::RowSource;
use shoal_storage::{Direction, IndexId};

/// What one scan of a row table reads: fixed when the plan is made.
#[derive(Debug)]
pub struct ScanRequest {
    pub source: Arc<RowSource>,
    /// Table columns to read (a position past the last column is the DML row position).
    pub projection: Vec<usize>,
    /// The filters DataFusion pushed down (Inexact: DataFusion applies them again).
    pub filters: Vec<Expr>,
    pub limit: Option<usize>,
    /// Rows in an index's order (`index_order`), for an ORDER BY read from the index.
    pub order: Option<ScanOrder>,
}

/// An index read in key order: the index's first `pinned` columns equal to the filters'
/// values, the rows in the order of its next columns.
#[derive(Debug, Clone)]
pub struct ScanOrder {
    pub index: IndexId,
    pub pinned: usize,
    pub direction: Direction,
    /// The rows the statement needs at most (its LIMIT): when the index range answers every
    /// filter, the read stops there.
    pub fetch: Option<usize>,
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

/// Above this share of an index's entries, a scan of the table reads the rows sooner than the
/// index does (an index read visits entries in key order and follows each to its row).
const INDEX_SHARE_MAX: f64 = 0.3;
/// Smaller indexes are always read: either way costs little.
const JUDGED_ENTRIES_MIN: usize = 1024;

/// Whether an index read would visit more of the index than `INDEX_SHARE_MAX`, counted in the
/// index itself (`RowTable::index_ranges_exceed`). Reads of many ranges (IN lists) are taken as
/// narrow.
fn reads_most_of_the_table(source: &RowSource, read: &IndexRead) -> bool {
    const RANGES_JUDGED_MAX: usize = 8;
    if read.ranges.len() > RANGES_JUDGED_MAX {
        return false;
    }
    let ranges: Vec<_> = read
        .ranges
        .iter()
        .map(|(lower, upper)| {
            (
                lower.as_ref().map(Vec::as_slice),
                upper.as_ref().map(Vec::as_slice),
            )
        })
        .collect();
    source
        .table
        .index_ranges_exceed(read.index, &ranges, INDEX_SHARE_MAX, JUDGED_ENTRIES_MIN)
        .unwrap_or(false)
}

/// What an ordered read reads this time: one range of its index, and the rows it may stop
/// after.
fn ordered_read(request: &ScanRequest, order: &ScanOrder) -> (IndexRead, Option<usize>) {
    let source = &request.source;
    let range = source
        .indexes
        .iter()
        .find(|i| i.id == order.index)
        .and_then(|index| {
            access_path::ordered_range(&source.def, index, order.pinned, &request.filters)
        });
    match range {
        Some((range, answers_every_filter)) => (
            IndexRead {
                index: order.index,
                ranges: vec![range],
            },
            order.fetch.filter(|_| answers_every_filter),
        ),
        // The filters do not pin the leading columns this time (a NULL parameter): the whole
        // index in order, and the filters above drop what they drop.
        None => (
            IndexRead {
                index: order.index,
                ranges: vec![(Bound::Unbounded, Bound::Unbounded)],
            },
            None,
        ),
    }
}

impl RowScanExec {
    /// Reads the rows `request` asks for into `partitions`.
    pub fn read(request: Arc<ScanRequest>, partitions: Partitions) -> DfResult<RowScanExec> {
        let source = &request.source;
        // A limit is only safe to push when no filter is left for DataFusion to apply.
        let (read, limit) = match &request.order {
            Some(order) => {
                let (read, limit) = ordered_read(&request, order);
                (Some(read), limit)
            }
            None => (
                access_path::choose(
                    &source.def,
                    &source.indexes,
                    &request.filters,
                    KeyValues::Bound,
                )
                .filter(|read| !reads_most_of_the_table(source, read)),
                request.limit.filter(|_| request.filters.is_empty()),
            ),
        };
        let index = read.as_ref().map(|r| {
            let name = source
                .indexes
                .iter()
                .find(|i| i.id == r.index)
                .map_or_else(|| r.index.to_string(), |i| i.name.clone());
            (name, r.ranges.len())
        });
        let direction = request.order.as_ref().map(|o| o.direction);
        let batches = source
            .collect_rows_in(direction, read, &request.projection, limit)
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        let rows_read = batches.iter().map(RecordBatch::num_rows).sum();
        let schema = Arc::new(source.schema.project(&request.projection)?);
        let rows: Arc<dyn ExecutionPlan> = match &request.order {
            // Ordered rows stay in one partition, which says its order.
            Some(order) => {
                let ordering = output_ordering(&request, order, &schema);
                let config = MemorySourceConfig::try_new(&[batches], schema, None)?
                    .try_with_sort_information(ordering.into_iter().collect())?;
                DataSourceExec::from_data_source(config)
            }
            None => {
                let n = match partitions {
                    Partitions::UpTo(target) => target.clamp(1, batches.len().max(1)),
                    Partitions::Exactly(n) => n.max(1),
                };
                let parts = split_partitions(batches, n);
                MemorySourceConfig::try_new_exec(&parts, schema, None)?
            }
        };
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

/// The order of an ordered read's output: its index's columns after the pinned ones, as far
/// as the scan reads them. NULL keys sort last, so ascending is NULLS LAST and descending
/// NULLS FIRST, as PostgreSQL's defaults.
fn output_ordering(
    request: &ScanRequest,
    order: &ScanOrder,
    schema: &SchemaRef,
) -> Option<LexOrdering> {
    let index = request
        .source
        .indexes
        .iter()
        .find(|i| i.id == order.index)?;
    let backward = order.direction == Direction::Backward;
    let options = SortOptions {
        descending: backward,
        nulls_first: backward,
    };
    let sort: Vec<PhysicalSortExpr> = index.columns[order.pinned..]
        .iter()
        .map_while(|c| request.projection.iter().position(|p| p == c))
        .map(|at| {
            let column = Column::new(schema.field(at).name(), at);
            PhysicalSortExpr::new(Arc::new(column), options)
        })
        .collect();
    LexOrdering::new(sort)
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
        if let Some(order) = &self.request.order {
            let index = self.index.as_ref().map_or("?", |(name, _)| name.as_str());
            let direction = match order.direction {
                Direction::Forward => "forward",
                Direction::Backward => "backward",
            };
            write!(
                f,
                "IndexOrderRead: table={table} index={index} order={direction}"
            )?;
            if let Some(fetch) = order.fetch {
                write!(f, " fetch={fetch}")?;
            }
            return write!(f, " rows={}", self.rows_read);
        }
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

/// The row-table scan under `plan`, through filters, column projections and partition
/// shuffles, with the scan's output columns for `plan`'s output columns `columns`. None when
/// anything else stands between them.
pub fn scan_below(
    plan: &Arc<dyn ExecutionPlan>,
    columns: Vec<usize>,
) -> Option<(&RowScanExec, Vec<usize>)> {
    if let Some(scan) = plan.downcast_ref::<RowScanExec>() {
        return Some((scan, columns));
    }
    if let Some(filter) = plan.downcast_ref::<FilterExec>() {
        let columns = match filter.projection() {
            Some(p) => columns
                .iter()
                .map(|c| p.get(*c).copied())
                .collect::<Option<_>>()?,
            None => columns,
        };
        return scan_below(filter.input(), columns);
    }
    if let Some(projection) = plan.downcast_ref::<ProjectionExec>() {
        let exprs = projection.expr();
        let columns = columns
            .iter()
            .map(|c| Some(exprs.get(*c)?.expr.downcast_ref::<Column>()?.index()))
            .collect::<Option<_>>()?;
        return scan_below(projection.input(), columns);
    }
    if let Some(r) = plan.downcast_ref::<RepartitionExec>() {
        return scan_below(r.input(), columns);
    }
    if let Some(c) = plan.downcast_ref::<CoalescePartitionsExec>() {
        return scan_below(c.input(), columns);
    }
    None
}
