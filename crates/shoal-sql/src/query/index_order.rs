//! ORDER BY read from an index: a sort over a row-table scan whose filters pin an index's
//! leading columns, by the index's next columns, becomes a read of that index range in key
//! order (forward, or backward for DESC) and no sort. With a LIMIT the read stops after that
//! many rows when the range answers every filter. TPC-C's Delivery takes the oldest new order
//! of a district (`WHERE no_w_id = $1 AND no_d_id = $2 ORDER BY no_o_id LIMIT 1`) and
//! Order-Status a customer's newest order (`... ORDER BY o_id DESC LIMIT 1`): one index entry
//! each, not the district's ~900 rows sorted.
//!
//! `min(c)` and `max(c)` without GROUP BY become the aggregate of the first row of such a read
//! (PostgreSQL's MinMaxAgg): `max(o_id)` of a district reads one index entry. Going forward the
//! first row is the smallest value, or NULL when every value is NULL, whose min is NULL too;
//! going backward NULL keys come first, so `max` is read this way only on a NOT NULL column.
//!
//! The index's key order is the sort's order only for types whose key bytes order as SQL
//! orders values (`access_path::exact_keys`), and NULL keys come last, so each sort key must be
//! ascending with NULLS LAST or descending with NULLS FIRST (PostgreSQL's defaults), or its
//! column NOT NULL. Between the sort and the scan only filters, column projections and
//! partition shuffles may stand; the shuffles are dropped, since ordered rows stay in one
//! partition.

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::Result as DfResult;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::split_conjunction;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::limit::GlobalLimitExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::{ChildrenPropertiesMode, ExecutionPlan, ReplaceChildrenOptions};
use shoal_storage::Direction;

use crate::query::access_path;
use crate::query::row_scan_exec::{scan_below, Partitions, RowScanExec, ScanOrder, ScanRequest};

#[derive(Debug, Default)]
pub struct IndexOrder;

impl PhysicalOptimizerRule for IndexOrder {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        plan.transform_down(|node| {
            let rewritten = match ordered(&node)? {
                Some(r) => Some(r),
                None => min_or_max(&node)?,
            };
            match rewritten {
                Some(r) => Ok(Transformed::yes(r)),
                None => Ok(Transformed::no(node)),
            }
        })
        .data()
    }

    fn name(&self) -> &str {
        "index_order"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// The sort at `node` (a sort, or a merge of sorted partitions over one) as an ordered index
/// read, when that applies (see the module).
fn ordered(node: &Arc<dyn ExecutionPlan>) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
    let (sort, fetch) = if let Some(merge) = node.downcast_ref::<SortPreservingMergeExec>() {
        match merge.input().downcast_ref::<SortExec>() {
            Some(sort) => (sort, merge.fetch().or(sort.fetch())),
            None => return Ok(None),
        }
    } else if let Some(sort) = node.downcast_ref::<SortExec>() {
        if sort.preserve_partitioning()
            && sort.input().properties().partitioning.partition_count() > 1
        {
            // Sorted partitions merged above: the merge is the node to replace.
            return Ok(None);
        }
        (sort, sort.fetch())
    } else {
        return Ok(None);
    };
    let mut keys = Vec::new();
    for e in sort.expr().iter() {
        match e.expr.downcast_ref::<Column>() {
            Some(c) => keys.push((c.index(), e.options.descending, e.options.nulls_first)),
            None => return Ok(None),
        }
    }
    ordered_rows(sort.input(), &keys, fetch)
}

/// `input`'s rows in the order of `keys` (column, descending, nulls first) read from an index,
/// at most `fetch` of them; None when no index gives that order (see the module).
fn ordered_rows(
    input: &Arc<dyn ExecutionPlan>,
    keys: &[(usize, bool, bool)],
    fetch: Option<usize>,
) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
    let columns = keys.iter().map(|k| k.0).collect();
    let Some((scan, scan_columns)) = scan_below(input, columns) else {
        return Ok(None);
    };
    let request = scan.request();
    if request.order.is_some() {
        return Ok(None);
    }
    let def = &request.source.def;
    let Some(table_columns) = scan_columns
        .iter()
        .map(|c| {
            request
                .projection
                .get(*c)
                .copied()
                .filter(|&t| t < def.columns.len())
        })
        .collect::<Option<Vec<usize>>>()
    else {
        return Ok(None);
    };
    // One direction for every key, with NULLs where the index puts them.
    let descending = keys[0].1;
    let in_key_order = keys
        .iter()
        .zip(&table_columns)
        .all(|(&(_, desc, nulls_first), &c)| {
            let column = &def.columns[c];
            desc == descending
                && (nulls_first == descending || column.not_null)
                && access_path::exact_keys(&column.data_type)
        });
    if !in_key_order {
        return Ok(None);
    }
    let Some((index, pinned)) = access_path::ordered_index(
        def,
        &request.source.indexes,
        &request.filters,
        &table_columns,
    ) else {
        return Ok(None);
    };
    // The scan may stop after `fetch` rows only if every filter between it and the sort is
    // one it was given (and answers with its range): DataFusion keeps the filters it pushed
    // down (they are Inexact) beside those it did not, so more conjuncts above than filters
    // pushed means one was not pushed.
    let scan_fetch = fetch.filter(|_| filter_conjuncts(input) <= request.filters.len());
    let ordered_request = Arc::new(ScanRequest {
        source: request.source.clone(),
        projection: request.projection.clone(),
        filters: request.filters.clone(),
        limit: request.limit,
        order: Some(ScanOrder {
            index,
            pinned,
            direction: if descending {
                Direction::Backward
            } else {
                Direction::Forward
            },
            fetch: scan_fetch,
        }),
    });
    let ordered_scan: Arc<dyn ExecutionPlan> =
        Arc::new(RowScanExec::read(ordered_request, Partitions::Exactly(1))?);
    let rows = replace_scan(input, &ordered_scan)?;
    Ok(Some(match fetch {
        Some(n) => Arc::new(GlobalLimitExec::new(rows, 0, Some(n))),
        None => rows,
    }))
}

/// `min(c)` or `max(c)` without GROUP BY over the first row of an ordered index read (see the
/// module): the aggregate that reads the rows (single, or the partial one under a final) gets
/// that row as its input.
fn min_or_max(node: &Arc<dyn ExecutionPlan>) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
    let Some(aggregate) = node.downcast_ref::<AggregateExec>() else {
        return Ok(None);
    };
    let reads_rows = matches!(
        aggregate.mode(),
        AggregateMode::Partial | AggregateMode::Single | AggregateMode::SinglePartitioned
    );
    let [expr] = aggregate.aggr_expr() else {
        return Ok(None);
    };
    if !reads_rows
        || !aggregate.group_expr().is_empty()
        || aggregate.filter_expr().iter().any(Option::is_some)
        || expr.is_distinct()
    {
        return Ok(None);
    }
    let descending = match expr.fun().name() {
        "min" => false,
        "max" => true,
        _ => return Ok(None),
    };
    let arguments = expr.expressions();
    let [argument] = arguments.as_slice() else {
        return Ok(None);
    };
    let Some(column) = argument.downcast_ref::<Column>() else {
        return Ok(None);
    };
    // Backward, NULL keys come first: only a NOT NULL column's first row is its max.
    if descending && !not_null_column(aggregate.input(), column.index()) {
        return Ok(None);
    }
    let key = (column.index(), descending, descending);
    let Some(first_row) = ordered_rows(aggregate.input(), &[key], Some(1))? else {
        return Ok(None);
    };
    Ok(Some(node.clone().replace_children(
        vec![first_row],
        ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
    )?))
}

/// Whether column `column` of `plan`'s output is a NOT NULL column of the row table scanned
/// under it.
fn not_null_column(plan: &Arc<dyn ExecutionPlan>, column: usize) -> bool {
    let Some((scan, scan_columns)) = scan_below(plan, vec![column]) else {
        return false;
    };
    let request = scan.request();
    request
        .projection
        .get(scan_columns[0])
        .and_then(|&c| request.source.def.columns.get(c))
        .is_some_and(|c| c.not_null)
}

/// The conjuncts of the filters on the way from `plan` down to its row-table scan.
fn filter_conjuncts(plan: &Arc<dyn ExecutionPlan>) -> usize {
    if plan.downcast_ref::<RowScanExec>().is_some() {
        return 0;
    }
    let here = plan
        .downcast_ref::<FilterExec>()
        .map_or(0, |f| split_conjunction(f.predicate()).len());
    here + plan.children().first().map_or(0, |c| filter_conjuncts(c))
}

/// `plan` with its row-table scan replaced by `ordered` and its partition shuffles dropped.
fn replace_scan(
    plan: &Arc<dyn ExecutionPlan>,
    ordered: &Arc<dyn ExecutionPlan>,
) -> DfResult<Arc<dyn ExecutionPlan>> {
    if plan.downcast_ref::<RowScanExec>().is_some() {
        return Ok(ordered.clone());
    }
    let child = plan.children()[0].clone();
    if plan.downcast_ref::<RepartitionExec>().is_some()
        || plan.downcast_ref::<CoalescePartitionsExec>().is_some()
    {
        return replace_scan(&child, ordered);
    }
    plan.clone().replace_children(
        vec![replace_scan(&child, ordered)?],
        ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
    )
}
