//! Index lookups for joins: a hash join whose probe side scans a row table on the join key
//! reads only the rows of that table whose keys the build side has, through an index, instead
//! of the whole table (or the whole index range its other conditions give). TPC-C's
//! Stock-Level joins the ~200 order lines of the last orders with `stock` on the item id: it
//! reads ~200 stock rows by key, not the warehouse's 100,000.
//!
//! DataFusion's hash join collects its build side before it reads a row of the probe side.
//! This rule wraps the build side in a `KeyCollectorExec`, which notes the distinct join keys
//! of the rows passing through, and replaces the probe side's `RowScanExec` with a
//! `KeyedScanExec`, which reads when it is first polled: its scan's filters plus
//! `key IN (the keys noted)`, so that `access_path` reads one index range per key. The rows read
//! are a subset of what the scan read before that holds every row the join can match, and the
//! hash join still matches them, so the answer is the same.
//!
//! It applies only where rows of the probe side without a match are not part of the result
//! (inner, left, semi and anti joins of the build side, right semi joins), where an index has
//! the keys among its leading columns (with the scan's equalities for the others), and where
//! the scan read many more rows than the build side is expected to have. Past
//! `INDEX_RANGES_MAX` distinct keys the keyed scan reads what the scan read before.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::common::{JoinType, NullEquality, Result as DfResult, ScalarValue};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::{lit, Expr};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    ChildrenPropertiesMode, DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning,
    PlanProperties, ReplaceChildrenOptions,
};
use futures::StreamExt;
use parking_lot::Mutex;

use crate::query::access_path::{self, KeyValues, INDEX_RANGES_MAX};
use crate::query::row_scan_exec::{scan_below, RowScanExec, ScanRequest};

/// Rows a probe-side scan must have read, and how many times the build side's expected rows,
/// for the lookups to be worth their overhead.
const MIN_SCAN_ROWS: usize = 1024;
const MIN_SCAN_TO_BUILD_RATIO: usize = 8;

/// The build side's distinct join keys, from the collector to the keyed scan of one run.
#[derive(Debug, Default)]
struct KeySlot {
    /// None: not collected (the run has not finished the build side, or it had more keys
    /// than an index read takes).
    keys: Mutex<Option<Vec<Vec<ScalarValue>>>>,
}

#[derive(Debug, Default)]
pub struct IndexLookupJoin;

impl PhysicalOptimizerRule for IndexLookupJoin {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| match node.downcast_ref::<HashJoinExec>() {
            Some(join) => match keyed(&node, join)? {
                Some(rewritten) => Ok(Transformed::yes(rewritten)),
                None => Ok(Transformed::no(node)),
            },
            None => Ok(Transformed::no(node)),
        })
        .data()
    }

    fn name(&self) -> &str {
        "index_lookup_join"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// The join with its probe side read by key, when that applies (see the module).
fn keyed(
    node: &Arc<dyn ExecutionPlan>,
    join: &HashJoinExec,
) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
    let unmatched_probe_rows_dropped = matches!(
        join.join_type(),
        JoinType::Inner
            | JoinType::Left
            | JoinType::LeftSemi
            | JoinType::LeftAnti
            | JoinType::LeftMark
            | JoinType::RightSemi
    );
    if *join.partition_mode() != PartitionMode::CollectLeft
        || !unmatched_probe_rows_dropped
        || join.null_equality() != NullEquality::NullEqualsNothing
        || join.left().properties().partitioning.partition_count() != 1
    {
        return Ok(None);
    }
    // The probe side's key columns, followed down to the scan.
    let mut right_columns = Vec::new();
    for (_, right) in join.on() {
        match right.downcast_ref::<Column>() {
            Some(c) => right_columns.push(c.index()),
            None => return Ok(None),
        }
    }
    let Some((scan, scan_columns)) = scan_below(join.right(), right_columns) else {
        return Ok(None);
    };
    let request = scan.request();
    let source = &request.source;
    let key_columns: Option<Vec<usize>> = scan_columns
        .iter()
        .map(|c| request.projection.get(*c).copied())
        .collect();
    let Some(key_columns) = key_columns else {
        return Ok(None);
    };
    if key_columns.iter().any(|c| *c >= source.def.columns.len())
        || !access_path::leads_an_index(
            &source.def,
            &source.indexes,
            &request.filters,
            &key_columns,
        )
    {
        return Ok(None);
    }
    let Some(build_rows) = rows_at_most(join.left()) else {
        return Ok(None);
    };
    let scan_rows = scan.rows_read();
    if scan_rows < MIN_SCAN_ROWS || build_rows.saturating_mul(MIN_SCAN_TO_BUILD_RATIO) > scan_rows {
        return Ok(None);
    }
    let slot = Arc::new(KeySlot::default());
    let keyed_scan: Arc<dyn ExecutionPlan> = Arc::new(KeyedScanExec::new(
        scan.request_arc(),
        key_columns,
        slot.clone(),
    ));
    let right = replace_scan(join.right(), &keyed_scan)?;
    let left: Arc<dyn ExecutionPlan> = Arc::new(KeyCollectorExec::new(
        join.left().clone(),
        join.on().iter().map(|(l, _)| l.clone()).collect(),
        slot,
    ));
    let rewritten = node
        .clone()
        .replace_children(vec![left, right], recompute())?;
    Ok(Some(rewritten))
}

fn recompute() -> ReplaceChildrenOptions {
    ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute)
}

/// The most rows the plan can make: the rows its row-table scans read, when nothing above them
/// makes more rows than it takes (no join, no unnest). None when unknown.
fn rows_at_most(plan: &Arc<dyn ExecutionPlan>) -> Option<usize> {
    if let Some(scan) = plan.downcast_ref::<RowScanExec>() {
        return Some(scan.rows_read());
    }
    let passes_at_most_its_input = plan.downcast_ref::<FilterExec>().is_some()
        || plan.downcast_ref::<ProjectionExec>().is_some()
        || plan.downcast_ref::<RepartitionExec>().is_some()
        || plan.downcast_ref::<CoalescePartitionsExec>().is_some()
        || plan.downcast_ref::<AggregateExec>().is_some()
        || plan.downcast_ref::<SortExec>().is_some();
    match plan.children().as_slice() {
        [child] if passes_at_most_its_input => rows_at_most(child),
        _ => None,
    }
}

/// `plan` with its row-table scan (the one `scan_below` found) replaced by `keyed`.
fn replace_scan(
    plan: &Arc<dyn ExecutionPlan>,
    keyed: &Arc<dyn ExecutionPlan>,
) -> DfResult<Arc<dyn ExecutionPlan>> {
    if plan.downcast_ref::<RowScanExec>().is_some() {
        return Ok(keyed.clone());
    }
    let child = plan.children()[0].clone();
    plan.clone()
        .replace_children(vec![replace_scan(&child, keyed)?], recompute())
}

/// Passes its input's rows on and notes their distinct join keys for the keyed scan.
#[derive(Debug)]
pub struct KeyCollectorExec {
    input: Arc<dyn ExecutionPlan>,
    keys: Vec<Arc<dyn PhysicalExpr>>,
    slot: Arc<KeySlot>,
}

impl KeyCollectorExec {
    fn new(
        input: Arc<dyn ExecutionPlan>,
        keys: Vec<Arc<dyn PhysicalExpr>>,
        slot: Arc<KeySlot>,
    ) -> Self {
        KeyCollectorExec { input, keys, slot }
    }
}

impl DisplayAs for KeyCollectorExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let keys: Vec<String> = self.keys.iter().map(|k| k.to_string()).collect();
        write!(f, "KeyCollector: keys=[{}]", keys.join(", "))
    }
}

impl ExecutionPlan for KeyCollectorExec {
    fn name(&self) -> &str {
        "KeyCollectorExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.input.properties()
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        for k in &self.keys {
            if f(k)? == TreeNodeRecursion::Stop {
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(KeyCollectorExec::new(
            children.remove(0),
            self.keys.clone(),
            self.slot.clone(),
        )))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        *self.slot.keys.lock() = None;
        let input = self.input.execute(partition, context)?;
        let schema = input.schema();
        let stream = CollectingStream {
            input,
            keys: self.keys.clone(),
            slot: self.slot.clone(),
            seen: Some(HashSet::new()),
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

/// The collector's stream: its input's, noting keys as batches pass.
struct CollectingStream {
    input: SendableRecordBatchStream,
    keys: Vec<Arc<dyn PhysicalExpr>>,
    slot: Arc<KeySlot>,
    /// None once there are more keys than an index read takes.
    seen: Option<HashSet<Vec<ScalarValue>>>,
}

impl futures::Stream for CollectingStream {
    type Item = DfResult<RecordBatch>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        let this = &mut *self;
        match this.input.poll_next_unpin(cx) {
            Poll::Ready(Some(Ok(batch))) => {
                if let Some(set) = this.seen.as_mut() {
                    if let Err(e) = note_keys(&batch, &this.keys, set) {
                        return Poll::Ready(Some(Err(e)));
                    }
                    if set.len() > INDEX_RANGES_MAX {
                        this.seen = None;
                    }
                }
                Poll::Ready(Some(Ok(batch)))
            }
            Poll::Ready(None) => {
                if let Some(seen) = this.seen.take() {
                    *this.slot.keys.lock() = Some(seen.into_iter().collect());
                }
                Poll::Ready(None)
            }
            other => other,
        }
    }
}

/// Adds the batch's join keys without NULLs (which match nothing) to `set`.
fn note_keys(
    batch: &RecordBatch,
    keys: &[Arc<dyn PhysicalExpr>],
    set: &mut HashSet<Vec<ScalarValue>>,
) -> DfResult<()> {
    let arrays = keys
        .iter()
        .map(|k| k.evaluate(batch)?.into_array(batch.num_rows()))
        .collect::<DfResult<Vec<_>>>()?;
    'rows: for r in 0..batch.num_rows() {
        let mut key = Vec::with_capacity(arrays.len());
        for a in &arrays {
            if a.is_null(r) {
                continue 'rows;
            }
            key.push(ScalarValue::try_from_array(a, r)?);
        }
        set.insert(key);
    }
    Ok(())
}

/// A row-table scan that reads, when first polled, only the rows with the keys the build side
/// of its join had (see the module).
#[derive(Debug, Clone)]
pub struct KeyedScanExec {
    request: Arc<ScanRequest>,
    /// The table columns the keys are values of, in the keys' order.
    key_columns: Vec<usize>,
    slot: Arc<KeySlot>,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
}

impl KeyedScanExec {
    fn new(request: Arc<ScanRequest>, key_columns: Vec<usize>, slot: Arc<KeySlot>) -> Self {
        let schema = Arc::new(
            request
                .source
                .schema
                .project(&request.projection)
                .expect("the scan's projection"),
        );
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        KeyedScanExec {
            request,
            key_columns,
            slot,
            schema,
            properties,
        }
    }

    /// The rows of the build side's keys, or every row the scan's own filters give when the
    /// keys were not collected.
    fn read(&self) -> Vec<RecordBatch> {
        let source = &self.request.source;
        let mut filters = self.request.filters.clone();
        if let Some(keys) = self.slot.keys.lock().take() {
            if keys.is_empty() {
                return Vec::new();
            }
            filters.push(key_filter(&self.request, &self.key_columns, keys));
        }
        let read = access_path::choose(&source.def, &source.indexes, &filters, KeyValues::Bound);
        source.collect_rows(read, &self.request.projection, None)
    }
}

/// `col IN (keys)` for one key column, `(a = .. AND b = ..) OR ...` for several.
fn key_filter(request: &ScanRequest, key_columns: &[usize], keys: Vec<Vec<ScalarValue>>) -> Expr {
    let columns = &request.source.def.columns;
    let column = |c: usize| Expr::Column(datafusion::common::Column::from_name(&columns[c].name));
    if let [only] = key_columns {
        let list = keys.into_iter().map(|mut k| lit(k.remove(0))).collect();
        return Expr::InList(InList::new(Box::new(column(*only)), list, false));
    }
    keys.into_iter()
        .map(|key| {
            key_columns
                .iter()
                .zip(key)
                .map(|(c, v)| column(*c).eq(lit(v)))
                .reduce(Expr::and)
                .expect("a key has columns")
        })
        .reduce(Expr::or)
        .expect("at least one key")
}

impl DisplayAs for KeyedScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let def = &self.request.source.def;
        let keys: Vec<&str> = self
            .key_columns
            .iter()
            .map(|c| def.columns[*c].name.as_str())
            .collect();
        write!(
            f,
            "IndexLookup: table={} keys=[{}]",
            def.name,
            keys.join(", ")
        )
    }
}

impl ExecutionPlan for KeyedScanExec {
    fn name(&self) -> &str {
        "KeyedScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(
        &self,
        _partition: usize,
        _context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        // Reads on the first poll: the join polls its probe side only after its build side is
        // collected, and with it the keys.
        let scan = self.clone();
        let stream = futures::stream::once(async move { scan.read() })
            .flat_map(|batches| futures::stream::iter(batches.into_iter().map(Ok)));
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema.clone(),
            stream,
        )))
    }
}
