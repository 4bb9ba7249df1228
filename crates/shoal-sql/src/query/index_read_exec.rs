//! The physical plan node of a row-table scan that read an index (`access_path`): the rows are
//! already collected (the scan reads them when DataFusion plans it), and this node hands them
//! out as the memory source under it would, but names the index and the ranges read, so that
//! EXPLAIN shows how the table was reached.

use std::fmt;
use std::sync::Arc;

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::Result as DfResult;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};

#[derive(Debug)]
pub struct IndexReadExec {
    /// The memory source holding the rows read.
    rows: Arc<dyn ExecutionPlan>,
    table: String,
    index: String,
    ranges: usize,
    rows_read: usize,
}

impl IndexReadExec {
    pub fn new(
        rows: Arc<dyn ExecutionPlan>,
        table: String,
        index: String,
        ranges: usize,
        rows_read: usize,
    ) -> Self {
        IndexReadExec {
            rows,
            table,
            index,
            ranges,
            rows_read,
        }
    }
}

impl DisplayAs for IndexReadExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "IndexRead: table={} index={} ranges={} rows={}",
            self.table, self.index, self.ranges, self.rows_read
        )
    }
}

impl ExecutionPlan for IndexReadExec {
    fn name(&self) -> &str {
        "IndexReadExec"
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
}
