//! Kept plans: a prepared query planned once, by DataFusion, and run again for each execution
//! without parsing, analysis, optimization or physical planning.
//!
//! DataFusion binds parameters by rewriting the logical plan into one with literals, which then
//! has to be optimized and planned physically again: for a small OLTP query that is most of its
//! cost. The session keeps the plan of a prepared query from its second execution on (the first
//! runs planned the ordinary way: many statements run once). A kept plan is optimized once
//! with its placeholders in it, then each placeholder
//! becomes a call of `param::ParamUdf`, which reads the value bound for the execution under
//! way, and the physical plan is made once. Each execution binds its values, takes fresh
//! copies of the plan's nodes (operators such as hash joins and repartitions keep state from
//! one run) and re-reads every row-table scan (`RowScanExec::reread`) under the execution's
//! snapshot, choosing the scan's index ranges from the new values.
//!
//! A plan is kept only when running it again is the same as planning it again:
//! - no Stable function (now(), current_setting(), the session's time zone conversions ...):
//!   the optimizer folds those into constants of the moment it ran;
//! - every placeholder has a type (from the plan, else as Parse described it: `$1::int` leaves
//!   the placeholder untyped in DataFusion's plan), and each execution's values convert to
//!   those types exactly
//!   (a client may declare int8 for a parameter compared with an int4 column);
//! - every scan is a row-table scan (column tables and system catalogs take their rows when
//!   the plan is made, and the plan would keep them).
//!
//! The session keeps a plan with the catalog version and the settings generation it was made
//! under, and plans again when either changed (DDL, `SET search_path`, ...).
//!
//! A plan whose scans read few rows when it was built (`SMALL_PLAN_ROWS`: the OLTP statement
//! that reads a key or a short range) is planned for one partition: splitting a hundred rows
//! over partitions costs more than the work itself. An execution of it runs on the
//! connection's thread, without the hand-offs to the query runtime's threads and back, when
//! its scans read few rows this time too and nothing in the plan makes more rows than it reads
//! (no join, no unnest): its work is then bounded by those few rows.

pub mod generated;
pub mod param;
#[cfg(test)]
pub(crate) mod tests;

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::execution::{SessionState, TaskContext};
use datafusion::logical_expr::{Expr, LogicalPlan, Volatility};
use datafusion::physical_expr::expressions::DynamicFilterPhysicalExpr;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::placeholder_row::PlaceholderRowExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::unnest::UnnestExec;
use datafusion::physical_plan::{ChildrenPropertiesMode, ExecutionPlan, ReplaceChildrenOptions};

use crate::error::SqlResult;
use crate::query::index_join::KeyedScanExec;
use crate::query::pg_errors;
use crate::query::row_scan_exec::RowScanExec;
use param::{ParamSlot, ParamUdf};

/// Rows a plan's scans may read, when it is built, for it to be planned as a small one.
pub const SMALL_PLAN_ROWS: usize = crate::query::BATCH_SIZE_ROWS;

/// A query's physical plan, kept for the executions after the first.
#[derive(Debug)]
pub struct KeptPlan {
    physical: Arc<dyn ExecutionPlan>,
    params: Arc<ParamSlot>,
    param_types: Vec<ArrowType>,
    small: bool,
    /// No node makes more rows than it reads (see `bounded_by_scans`).
    bounded: bool,
    /// The session's functions and config, as the plan was made with: made once, as building
    /// one copies the session's function registries.
    task_ctx: Arc<TaskContext>,
}

/// What `KeptPlan::build` made of a logical plan.
pub struct Built {
    /// The physical plan, ready to run with the values it was built with.
    pub physical: Arc<dyn ExecutionPlan>,
    /// Whether it may run on the caller's thread (see the module).
    pub inline: bool,
    pub task_ctx: Arc<TaskContext>,
    /// The same plan kept for later executions, unless it cannot be kept.
    pub kept: Option<Arc<KeptPlan>>,
}

impl KeptPlan {
    /// Plans `logical` physically, with `values` (converted by `convert_values`) bound.
    pub async fn build(
        state: &SessionState,
        logical: &LogicalPlan,
        param_types: Vec<ArrowType>,
        values: Vec<ScalarValue>,
    ) -> SqlResult<Built> {
        let state = &without_statistics_answers(state);
        let optimized = state
            .optimize(logical)
            .map_err(pg_errors::from_datafusion)?;
        if crate::query::correlated::left_for_per_row(logical, &optimized) {
            // Its subqueries run per row with the values bound into them: planned each time.
            let values = values.into_iter().map(Into::into).collect();
            let params = datafusion::common::ParamValues::List(values);
            let physical =
                crate::query::physical_plan(state, logical.clone(), Some(params)).await?;
            return Ok(Built {
                physical,
                inline: false,
                task_ctx: state.task_ctx(),
                kept: None,
            });
        }
        let params = Arc::new(ParamSlot::default());
        params.set(values);
        let bound = bind_placeholders(optimized, &param_types, &params)
            .map_err(pg_errors::from_datafusion)?;
        let mut physical = plan_physical(state, &bound).await?;
        let small = rows_read(&physical) <= SMALL_PLAN_ROWS;
        if small && state.config().target_partitions() > 1 {
            let mut single = state.clone();
            single
                .config_mut()
                .options_mut()
                .execution
                .target_partitions = 1;
            physical = plan_physical(&single, &bound).await?;
        }
        let task_ctx = state.task_ctx();
        let bounded = bounded_by_scans(&physical);
        let kept = reusable(&physical).then(|| {
            Arc::new(KeptPlan {
                physical: physical.clone(),
                params,
                param_types,
                small,
                bounded,
                task_ctx: task_ctx.clone(),
            })
        });
        Ok(Built {
            physical,
            inline: small && bounded,
            task_ctx,
            kept,
        })
    }

    pub fn param_types(&self) -> &[ArrowType] {
        &self.param_types
    }

    /// Whether `plan`, an instance of this one, may run on the caller's thread (see the module).
    pub fn runs_inline(&self, plan: &Arc<dyn ExecutionPlan>) -> bool {
        self.small && self.bounded && rows_read(plan) <= SMALL_PLAN_ROWS
    }

    pub fn task_ctx(&self) -> Arc<TaskContext> {
        self.task_ctx.clone()
    }

    /// The plan to run for one execution with `values` (converted by `convert_values`) bound,
    /// its scans read under the scope's snapshot. The caller holds the `Arc` of this plan
    /// until the execution's rows are all made, and runs it only when no other execution
    /// holds one (the values are the plan's).
    pub fn instantiate(&self, values: Vec<ScalarValue>) -> SqlResult<Arc<dyn ExecutionPlan>> {
        self.params.set(values);
        fresh_copy(&self.physical).map_err(pg_errors::from_datafusion)
    }
}

/// The session state without the rule that answers `count(*)`, `min()` and `max()` from the
/// scans' statistics at planning: a kept plan would keep the answer of the moment it was made.
fn without_statistics_answers(state: &SessionState) -> SessionState {
    let rules = state
        .physical_optimizers()
        .iter()
        .filter(|r| r.name() != "aggregate_statistics")
        .cloned()
        .collect();
    SessionStateBuilder::new_from_existing(state.clone())
        .with_physical_optimizer_rules(rules)
        .build()
}

async fn plan_physical(
    state: &SessionState,
    plan: &LogicalPlan,
) -> SqlResult<Arc<dyn ExecutionPlan>> {
    state
        .query_planner()
        .create_physical_plan(plan, state)
        .await
        .map_err(pg_errors::from_datafusion)
}

/// Whether no node of the plan makes more rows than its input has: no joins (a node of
/// several inputs), no unnest.
fn bounded_by_scans(plan: &Arc<dyn ExecutionPlan>) -> bool {
    let children = plan.children();
    children.len() <= 1
        && plan.downcast_ref::<UnnestExec>().is_none()
        && children.into_iter().all(bounded_by_scans)
}

/// The rows the plan's row-table scans read.
fn rows_read(plan: &Arc<dyn ExecutionPlan>) -> usize {
    match plan.downcast_ref::<RowScanExec>() {
        Some(scan) => scan.rows_read(),
        None => plan.children().into_iter().map(rows_read).sum(),
    }
}

/// The parameter types of `plan` (analyzed, with placeholders) when it can be kept, None when
/// it cannot (see the module). `described` are the types Parse described, for placeholders
/// the plan leaves untyped.
pub fn keepable(plan: &LogicalPlan, described: &[ArrowType]) -> Option<Vec<ArrowType>> {
    planned_types(plan, described)?.into_iter().collect()
}

/// `keepable` for a statement some of whose parameters may be missing from the plan (written
/// into it as values before planning): those keep their `described` types.
pub fn keepable_with_unused(plan: &LogicalPlan, described: &[ArrowType]) -> Option<Vec<ArrowType>> {
    let types = planned_types(plan, described)?;
    Some(
        types
            .into_iter()
            .zip(described)
            .map(|(t, d)| t.unwrap_or_else(|| d.clone()))
            .collect(),
    )
}

/// The type each parameter has in `plan` (None where the plan has none of it), when the plan
/// can be kept.
fn planned_types(plan: &LogicalPlan, described: &[ArrowType]) -> Option<Vec<Option<ArrowType>>> {
    let mut types: Vec<Option<ArrowType>> = vec![None; described.len()];
    let mut ok = true;
    let _ = plan.apply_with_subqueries(|node| {
        if matches!(
            node,
            LogicalPlan::Explain(_)
                | LogicalPlan::Analyze(_)
                | LogicalPlan::Dml(_)
                | LogicalPlan::Ddl(_)
                | LogicalPlan::Copy(_)
                | LogicalPlan::Statement(_)
                | LogicalPlan::Extension(_)
                | LogicalPlan::RecursiveQuery(_)
        ) {
            ok = false;
        }
        // DataFusion plans LIMIT and OFFSET only from constants: a parameter there must be
        // bound before each planning.
        if let LogicalPlan::Limit(limit) = node {
            let parameter = |e: &Option<Box<Expr>>| {
                e.as_ref().is_some_and(|e| {
                    e.exists(|e| Ok(matches!(e, Expr::Placeholder(_))))
                        .unwrap_or(true)
                })
            };
            ok &= !parameter(&limit.skip) && !parameter(&limit.fetch);
        }
        node.apply_expressions(|e| {
            e.apply(|e| {
                match e {
                    // set_config(), pg_notify() and transaction-level advisory locks hand their
                    // effects to the transaction's end, which the session settles only for
                    // plans it runs the ordinary way.
                    Expr::ScalarFunction(f) => {
                        ok &= f.func.signature().volatility != Volatility::Stable
                            && !crate::query::TRANSACTION_SCOPED_FUNCTIONS.contains(&f.name());
                    }
                    Expr::AggregateFunction(f) => {
                        ok &= f.func.signature().volatility != Volatility::Stable;
                    }
                    Expr::ScalarVariable(..) => ok = false,
                    Expr::Placeholder(p) => {
                        let index = crate::params::placeholder_index(&p.id);
                        match index.and_then(|i| Some((types.get_mut(i)?, &described[i]))) {
                            Some((slot, described)) => {
                                let t = p.field.as_ref().map_or(described, |f| f.data_type());
                                match slot {
                                    Some(seen) if seen != t => ok = false,
                                    _ => *slot = Some(t.clone()),
                                }
                            }
                            None => ok = false,
                        }
                    }
                    _ => {}
                }
                Ok(if ok {
                    TreeNodeRecursion::Continue
                } else {
                    TreeNodeRecursion::Stop
                })
            })
        })
    });
    ok.then_some(types)
}

/// Each value as the type its placeholder was planned with; None when one does not convert
/// exactly (5000000000 bound where an int4 was planned), and the execution is planned with
/// its values instead.
pub fn convert_values(types: &[ArrowType], values: &[ScalarValue]) -> Option<Vec<ScalarValue>> {
    if types.len() != values.len() {
        return None;
    }
    types
        .iter()
        .zip(values)
        .map(|(t, v)| {
            if &v.data_type() == t {
                return Some(v.clone());
            }
            if v.is_null() {
                return ScalarValue::try_from(t).ok();
            }
            let converted = v.cast_to(t).ok()?;
            (converted.cast_to(&v.data_type()).ok()? == *v).then_some(converted)
        })
        .collect()
}

/// The plan with each placeholder replaced by a call reading its value from `params`.
fn bind_placeholders(
    plan: LogicalPlan,
    types: &[ArrowType],
    params: &Arc<ParamSlot>,
) -> DfResult<LogicalPlan> {
    plan.transform_up_with_subqueries(|node| {
        node.map_expressions(|e| {
            e.transform_up(|e| match e {
                Expr::Placeholder(p) => {
                    let index = crate::params::placeholder_index(&p.id)
                        .expect("keepable plans have numbered placeholders");
                    let call = ParamUdf::call(&p.id, index, types[index].clone(), params.clone());
                    Ok(Transformed::yes(call))
                }
                other => Ok(Transformed::no(other)),
            })
        })
    })
    .map(|t| t.data)
}

/// Whether the physical plan can run again: every leaf makes its rows when it runs (or makes
/// none), and no node reads a dynamic filter that one run would leave set for the next (their
/// pushdown is turned off in Shoal's session config; this guards that). A TopK sort's own
/// filter, which nothing else reads with pushdown off, is made anew by its `reset_state`.
fn reusable(plan: &Arc<dyn ExecutionPlan>) -> bool {
    let mut dynamic = false;
    let owns_its_filter = plan.downcast_ref::<SortExec>().is_some();
    let _ = (!owns_its_filter).then(|| {
        plan.apply_expressions(&mut |e| {
            e.apply(|x| {
                dynamic |= x.downcast_ref::<DynamicFilterPhysicalExpr>().is_some();
                Ok(TreeNodeRecursion::Continue)
            })
        })
    });
    if dynamic {
        return false;
    }
    let children = plan.children();
    if children.is_empty() {
        return plan.downcast_ref::<RowScanExec>().is_some()
            || plan.downcast_ref::<KeyedScanExec>().is_some()
            || plan.downcast_ref::<EmptyExec>().is_some()
            || plan.downcast_ref::<PlaceholderRowExec>().is_some();
    }
    children.into_iter().all(reusable)
}

/// A copy of the plan for one execution: scans read again, every other node with its run
/// state reset. The nodes' properties stay as planned: a re-read scan keeps its partitioning.
fn fresh_copy(plan: &Arc<dyn ExecutionPlan>) -> DfResult<Arc<dyn ExecutionPlan>> {
    if let Some(scan) = plan.downcast_ref::<RowScanExec>() {
        return Ok(Arc::new(scan.reread()?));
    }
    let children = plan
        .children()
        .into_iter()
        .map(fresh_copy)
        .collect::<DfResult<Vec<_>>>()?;
    let node = match children.is_empty() {
        true => plan.clone(),
        false => plan.clone().replace_children(
            children,
            ReplaceChildrenOptions::new(ChildrenPropertiesMode::Keep),
        )?,
    };
    node.reset_state()
}
