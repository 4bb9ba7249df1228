//! Correlated subqueries that DataFusion cannot turn into joins run once per outer row, as
//! PostgreSQL runs every correlated subquery.
//!
//! DataFusion's decorrelation rules turn the common shapes (an equality with an outer column,
//! an aggregate without a LIMIT) into joins, and its physical planner refuses what they leave
//! behind: a subquery whose correlation is not an equality, one inside a CASE, one with a
//! LIMIT, EXISTS or IN in a select list ("Physical plan does not support logical expression
//! ScalarSubquery"). Its rules also cannot see a reference that skips a level (a subquery's
//! subquery reading the outermost query's column): they would take the middle subquery for
//! uncorrelated and push filters through aliases until the reference named the wrong table.
//!
//! So, before a plan is optimized (`prepare`): a plan with correlated subqueries is optimized
//! on trial; when a correlated subquery is left over, or a reference skips a level, every
//! correlated subquery of the plan becomes a call of `SubqueryCall` instead, before
//! DataFusion's rules run. The call's arguments are the outer columns the subquery reads, so
//! the optimizer keeps them in the plan; the call binds their values in place of the outer
//! references and plans and runs the subquery with the session's state, once per distinct set
//! of values in a batch. Subqueries nested in it are planned the same way when it runs.
//!
//! Parameters are bound before this runs (a kept plan with such a subquery is not kept), so
//! the subquery's plan holds values, not placeholders. The runs happen on a thread of their
//! own: a scalar function is synchronous and the connection's runtime may be single-threaded.
//! This is the path for catalog queries and small outer inputs; the subqueries of large joins
//! decorrelate and never get here.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, Datum};
use datafusion::arrow::datatypes::{DataType as ArrowType, Field, FieldRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::metadata::FieldMetadata;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, DataFusionError, Result as DfResult, ScalarValue};
use datafusion::execution::SessionState;
use datafusion::logical_expr::expr::{
    Exists, InSubquery, ScalarFunction, SetComparison, SetQuantifier,
};
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{
    ColumnarValue, Expr, LogicalPlan, LogicalPlanBuilder, Operator, ReturnFieldArgs,
    ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Subquery, TypeSignature, Volatility,
};

use crate::error::{code, SqlError};
use crate::query::expr_pass::rewrite_own_expressions_up;

/// Stack of the thread that runs a batch's subqueries (see `CONNECTION_STACK_BYTES` in
/// shoal-server).
const SUBQUERY_STACK_BYTES: usize = 64 << 20;

/// What `prepare` made of a plan.
pub enum Prepared {
    /// DataFusion's rules handle every subquery: the plan they made.
    Optimized(LogicalPlan),
    /// Some subqueries run per row: the plan with them as calls, still to be optimized.
    PerRow(LogicalPlan),
}

/// Optimizes `plan` with the session's rules, turning the correlated subqueries first into
/// per-row calls when DataFusion's rules would leave one behind (see the module).
pub fn prepare(state: &SessionState, plan: LogicalPlan) -> DfResult<Prepared> {
    if !has_correlated_subquery(&plan) {
        return state.optimize(&plan).map(Prepared::Optimized);
    }
    if !skips_a_level(&plan) {
        if let Ok(optimized) = state.optimize(&plan) {
            if !optimizer_left_correlation(&optimized) {
                return Ok(Prepared::Optimized(optimized));
            }
        }
    }
    Ok(Prepared::PerRow(run_per_row(state, plan)?))
}

/// Whether `optimized`, made by the session's rules from `plan`, needs per-row subqueries:
/// a plan made by `prepare` instead.
pub fn left_for_per_row(plan: &LogicalPlan, optimized: &LogicalPlan) -> bool {
    skips_a_level(plan) || optimizer_left_correlation(optimized)
}

/// Whether DataFusion's rules left a correlated subquery, or an outer reference outside one.
fn optimizer_left_correlation(optimized: &LogicalPlan) -> bool {
    has_correlated_subquery(optimized) || has_loose_outer_ref(optimized)
}

/// Whether an outer reference was left outside any subquery: DataFusion's decorrelation
/// pulled a subquery up without its reference (one inside an UNNEST, for one), and the plan
/// cannot run.
fn has_loose_outer_ref(plan: &LogicalPlan) -> bool {
    let mut found = false;
    let _ = plan.apply(|node| {
        node.apply_expressions(|e| {
            found |= e
                .exists(|x| Ok(matches!(x, Expr::OuterReferenceColumn(..))))
                .unwrap_or(false);
            Ok(stop_if(found))
        })?;
        Ok(stop_if(found))
    });
    found
}

/// Whether a subquery anywhere in the plan reads a column of a query around it.
pub fn has_correlated_subquery(plan: &LogicalPlan) -> bool {
    let mut found = false;
    let _ = plan.apply_with_subqueries(|node| {
        node.apply_expressions(|e| {
            e.apply(|x| {
                found |= is_correlated(x);
                Ok(stop_if(found))
            })
        })?;
        Ok(stop_if(found))
    });
    found
}

/// Whether a subquery reads a column of a query two or more levels out, or will once
/// DataFusion's rules move an operand into one.
fn skips_a_level(plan: &LogicalPlan) -> bool {
    let mut found = false;
    let _ = plan.apply_with_subqueries(|node| {
        let schema = merge_schema(&node.inputs());
        node.apply_expressions(|e| {
            e.apply(|x| {
                if let Some(sub) = subquery_of(x) {
                    found |= free_outer_refs(&sub.subquery)
                        .iter()
                        .any(|c| !schema.has_column(c));
                }
                // DataFusion moves the operand of `x op ANY (...)` and `x IN (...)` into the
                // subquery: a correlated subquery in x then reads two levels out.
                if let Expr::SetComparison(SetComparison { expr, .. })
                | Expr::InSubquery(InSubquery { expr, .. }) = x
                {
                    found |= expr.exists(|e| Ok(is_correlated(e))).unwrap_or(false);
                }
                Ok(stop_if(found))
            })
        })?;
        Ok(stop_if(found))
    });
    found
}

fn stop_if(found: bool) -> TreeNodeRecursion {
    if found {
        TreeNodeRecursion::Stop
    } else {
        TreeNodeRecursion::Continue
    }
}

/// Whether `e` is a subquery that reads a column of a query around it.
fn is_correlated(e: &Expr) -> bool {
    subquery_of(e).is_some_and(|s| !free_outer_refs(&s.subquery).is_empty())
}

fn subquery_of(e: &Expr) -> Option<&Subquery> {
    match e {
        Expr::ScalarSubquery(s) => Some(s),
        Expr::Exists(Exists { subquery, .. })
        | Expr::InSubquery(InSubquery { subquery, .. })
        | Expr::SetComparison(SetComparison { subquery, .. }) => Some(subquery),
        _ => None,
    }
}

/// The columns of queries around `plan` that it reads, at any depth: an outer reference in a
/// subquery nested in `plan` is `plan`'s own unless the node holding that subquery has the
/// column (then it reads `plan`'s column, not ours).
fn free_outer_refs(plan: &LogicalPlan) -> Vec<Column> {
    let mut refs: Vec<Column> = Vec::new();
    let _ = plan.apply(|node| {
        let schema = merge_schema(&node.inputs());
        node.apply_expressions(|e| {
            e.apply(|x| {
                if let Expr::OuterReferenceColumn(_, c) = x {
                    if !refs.contains(c) {
                        refs.push(c.clone());
                    }
                } else if let Some(sub) = subquery_of(x) {
                    for c in free_outer_refs(&sub.subquery) {
                        if !schema.has_column(&c) && !refs.contains(&c) {
                            refs.push(c);
                        }
                    }
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })
    });
    refs
}

/// `plan` with each correlated subquery as a `SubqueryCall`; the subqueries of uncorrelated
/// subqueries are looked at the same way, relative to their own query.
fn run_per_row(state: &SessionState, plan: LogicalPlan) -> DfResult<LogicalPlan> {
    rewrite_own_expressions_up(plan, |x, schema| {
        let Some(sub) = subquery_of(&x) else {
            return Ok(Transformed::no(x));
        };
        if free_outer_refs(&sub.subquery).is_empty() {
            let inner = run_per_row(state, sub.subquery.as_ref().clone())?;
            return Ok(Transformed::yes(with_subquery_plan(x, inner)));
        }
        Ok(Transformed::yes(per_row_call(state, x, schema)?))
    })
}

fn with_subquery_plan(e: Expr, plan: LogicalPlan) -> Expr {
    let plan = Arc::new(plan);
    match e {
        Expr::ScalarSubquery(s) => Expr::ScalarSubquery(Subquery {
            subquery: plan,
            ..s
        }),
        Expr::Exists(Exists { subquery, negated }) => Expr::Exists(Exists {
            subquery: Subquery {
                subquery: plan,
                ..subquery
            },
            negated,
        }),
        Expr::InSubquery(InSubquery {
            expr,
            subquery,
            negated,
        }) => Expr::InSubquery(InSubquery {
            expr,
            subquery: Subquery {
                subquery: plan,
                ..subquery
            },
            negated,
        }),
        Expr::SetComparison(SetComparison {
            expr,
            subquery,
            op,
            quantifier,
        }) => Expr::SetComparison(SetComparison {
            expr,
            subquery: Subquery {
                subquery: plan,
                ..subquery
            },
            op,
            quantifier,
        }),
        other => other,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    /// The subquery's one value (NULL for no row; an error for more than one).
    Scalar,
    /// Whether it has a row.
    Exists { negated: bool },
    /// Whether the first argument equals one of its values, with SQL's NULL rules.
    In { negated: bool },
    /// `x op ANY (...)` / `x op ALL (...)`.
    Compare { op: Operator, all: bool },
}

/// The call standing for the subquery expression `e`: its leading argument (the operand of IN
/// or a comparison) if any, then the outer columns the subquery reads.
fn per_row_call(state: &SessionState, e: Expr, outer_schema: &DFSchema) -> DfResult<Expr> {
    let (kind, lead, subquery) = match e {
        Expr::ScalarSubquery(s) => (Kind::Scalar, None, s),
        Expr::Exists(Exists { subquery, negated }) => (Kind::Exists { negated }, None, subquery),
        Expr::InSubquery(InSubquery {
            expr,
            subquery,
            negated,
        }) => (Kind::In { negated }, Some(*expr), subquery),
        Expr::SetComparison(SetComparison {
            expr,
            subquery,
            op,
            quantifier,
        }) => (
            Kind::Compare {
                op,
                all: quantifier == SetQuantifier::All,
            },
            Some(*expr),
            subquery,
        ),
        other => return Ok(other),
    };
    let outer: Vec<Column> = free_outer_refs(&subquery.subquery)
        .into_iter()
        .filter(|c| outer_schema.has_column(c))
        .collect();
    let return_field: FieldRef = match kind {
        Kind::Scalar => {
            let field = subquery.subquery.schema().field(0);
            Arc::new(
                Field::new("subquery", field.data_type().clone(), true)
                    .with_metadata(field.metadata().clone()),
            )
        }
        _ => Arc::new(Field::new("subquery", ArrowType::Boolean, true)),
    };
    let lead_count = usize::from(lead.is_some());
    let args: Vec<Expr> = lead
        .into_iter()
        .chain(outer.iter().cloned().map(Expr::Column))
        .collect();
    let signature = if args.is_empty() {
        Signature::new(TypeSignature::Nullary, Volatility::Volatile)
    } else {
        Signature::new(TypeSignature::Any(args.len()), Volatility::Volatile)
    };
    let volatile = subquery
        .subquery
        .exists(|node| {
            let mut found = false;
            node.apply_expressions(|e| {
                found |= e.is_volatile();
                Ok(stop_if(found))
            })?;
            Ok(found)
        })
        .unwrap_or(true);
    let call = SubqueryCall {
        signature,
        kind,
        volatile,
        lead_count,
        plan: subquery.subquery,
        outer,
        return_field,
        state: Box::new(state.clone()),
    };
    Ok(Expr::ScalarFunction(ScalarFunction::new_udf(
        Arc::new(ScalarUDF::new_from_impl(call)),
        args,
    )))
}

/// A correlated subquery, run once per distinct set of the outer values it reads.
struct SubqueryCall {
    signature: Signature,
    kind: Kind,
    /// Whether the subquery calls a volatile function (random(), nextval()): it then runs for
    /// every row, as two runs with the same outer values may differ.
    volatile: bool,
    /// Arguments before the outer columns (the operand of IN or a comparison).
    lead_count: usize,
    plan: Arc<LogicalPlan>,
    /// The outer columns, in the order of the arguments after the lead ones.
    outer: Vec<Column>,
    return_field: FieldRef,
    /// The session's state, to plan the subquery with its functions, rules and settings.
    state: Box<SessionState>,
}

impl std::fmt::Debug for SubqueryCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SubqueryCall({:?}, {:?})", self.kind, self.outer)
    }
}

impl PartialEq for SubqueryCall {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.plan, &other.plan) && self.kind == other.kind
    }
}
impl Eq for SubqueryCall {}
impl Hash for SubqueryCall {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (Arc::as_ptr(&self.plan) as usize).hash(state);
        self.kind.hash(state);
    }
}

impl ScalarUDFImpl for SubqueryCall {
    fn name(&self) -> &str {
        "subquery"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(self.return_field.data_type().clone())
    }

    fn return_field_from_args(&self, _args: ReturnFieldArgs) -> DfResult<FieldRef> {
        Ok(self.return_field.clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        if rows == 0 {
            return Ok(ColumnarValue::Array(
                datafusion::arrow::array::new_empty_array(self.return_field.data_type()),
            ));
        }
        let arrays: Vec<ArrayRef> = args
            .args
            .iter()
            .map(|a| a.to_array(rows))
            .collect::<DfResult<_>>()?;
        let mut keys = Vec::with_capacity(rows);
        for row in 0..rows {
            let mut values: Vec<ScalarValue> = arrays
                .iter()
                .map(|a| ScalarValue::try_from_array(a, row))
                .collect::<DfResult<_>>()?;
            if self.volatile {
                // A key of its own: the row's run is not shared (see `volatile`).
                values.push(ScalarValue::UInt64(Some(row as u64)));
            }
            keys.push(values);
        }
        // One thread for the batch's runs, each distinct set of outer values run once.
        let runs: HashMap<Vec<ScalarValue>, Vec<RecordBatch>> = std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("shoal-subquery".into())
                // Planning the subquery recurses as the connection's thread does.
                .stack_size(SUBQUERY_STACK_BYTES)
                .spawn_scoped(s, || self.run_all(&keys))
                .map_err(|e| DataFusionError::External(Box::new(e)))?
                .join()
                .map_err(|_| DataFusionError::Execution("a subquery's run panicked".into()))?
        })?;
        let out = keys
            .iter()
            .map(|values| {
                let (lead, outer) = values.split_at(self.lead_count);
                self.answer(lead, &runs[outer])
            })
            .collect::<DfResult<Vec<_>>>()?;
        ScalarValue::iter_to_array(out).map(ColumnarValue::Array)
    }
}

impl SubqueryCall {
    /// The subquery's rows for each distinct set of outer values in `keys`.
    fn run_all(
        &self,
        keys: &[Vec<ScalarValue>],
    ) -> DfResult<HashMap<Vec<ScalarValue>, Vec<RecordBatch>>> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        let mut runs = HashMap::new();
        for values in keys {
            let outer = &values[self.lead_count..];
            if runs.contains_key(outer) {
                continue;
            }
            let plan = self.bound_plan(outer)?;
            let batches = runtime.block_on(async {
                let physical = super::physical_plan(&self.state, plan, None)
                    .await
                    .map_err(|e| DataFusionError::External(Box::new(e)))?;
                datafusion::physical_plan::collect(physical, self.state.task_ctx()).await
            })?;
            runs.insert(outer.to_vec(), batches);
        }
        Ok(runs)
    }

    /// The subquery's plan with `values` in place of its references to the outer columns,
    /// limited to the rows its answer needs.
    fn bound_plan(&self, values: &[ScalarValue]) -> DfResult<LogicalPlan> {
        let bound: HashMap<Column, ScalarValue> = self
            .outer
            .iter()
            .cloned()
            .zip(values.iter().cloned())
            .collect();
        let plan = bind_outer_refs(self.plan.as_ref().clone(), &bound)?;
        // With its outer references bound, a subquery node (an UNNEST of an outer column is
        // planned as one) is its plan.
        let plan = plan
            .transform_up(|node| {
                Ok(match node {
                    LogicalPlan::Subquery(s) => Transformed::yes(Arc::unwrap_or_clone(s.subquery)),
                    other => Transformed::no(other),
                })
            })
            .data()?;
        let limit = match self.kind {
            Kind::Scalar => Some(2),
            Kind::Exists { .. } => Some(1),
            Kind::In { .. } | Kind::Compare { .. } => None,
        };
        match limit {
            Some(n) => LogicalPlanBuilder::from(plan).limit(0, Some(n))?.build(),
            None => Ok(plan),
        }
    }

    /// The value of the call for one row, from the subquery's rows.
    fn answer(&self, lead: &[ScalarValue], batches: &[RecordBatch]) -> DfResult<ScalarValue> {
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        let compare = |op: Operator, all: bool| -> DfResult<ScalarValue> {
            // ANY: true if a comparison is true, else NULL if one is NULL, else false.
            // ALL: false if a comparison is false, else NULL if one is NULL, else true.
            let needle = &lead[0];
            let (mut decided, mut saw_null) = (false, false);
            for b in batches.iter().filter(|b| b.num_rows() > 0) {
                let column = b.column(0);
                if needle.is_null() {
                    saw_null = true;
                    continue;
                }
                let needle = crate::query::array_compare::zero_without_sign(
                    &needle.cast_to(column.data_type())?.to_array()?,
                )?;
                let needle = datafusion::arrow::array::Scalar::new(needle);
                let result = compare_arrays(op, column, &needle)?;
                saw_null |= result.null_count() > 0;
                decided |= if all {
                    result.false_count() > 0
                } else {
                    result.true_count() > 0
                };
            }
            Ok(ScalarValue::Boolean(if decided {
                Some(!all)
            } else if saw_null {
                None
            } else {
                Some(all)
            }))
        };
        match self.kind {
            Kind::Scalar => {
                if rows > 1 {
                    return Err(DataFusionError::External(Box::new(SqlError::new(
                        code::CARDINALITY_VIOLATION,
                        "more than one row returned by a subquery used as an expression",
                    ))));
                }
                match batches.iter().find(|b| b.num_rows() > 0) {
                    Some(b) => ScalarValue::try_from_array(b.column(0), 0),
                    None => ScalarValue::try_from(self.return_field.data_type()),
                }
            }
            Kind::Exists { negated } => Ok(ScalarValue::Boolean(Some((rows > 0) != negated))),
            Kind::In { negated } => {
                let found = compare(Operator::Eq, false)?;
                Ok(match (found, negated) {
                    (ScalarValue::Boolean(Some(b)), true) => ScalarValue::Boolean(Some(!b)),
                    (v, _) => v,
                })
            }
            Kind::Compare { op, all } => compare(op, all),
        }
    }
}

fn compare_arrays(op: Operator, left: &ArrayRef, right: &dyn Datum) -> DfResult<BooleanArray> {
    use datafusion::arrow::compute::kernels::cmp;
    // -0 equals 0 in SQL; Arrow's float comparison orders them.
    let left = &crate::query::array_compare::zero_without_sign(left)?;
    Ok(match op {
        Operator::Eq => cmp::eq(left, right)?,
        Operator::NotEq => cmp::neq(left, right)?,
        // The subquery's value is on the left: `x < ANY (s)` holds where `s > x`.
        Operator::Lt => cmp::gt(left, right)?,
        Operator::LtEq => cmp::gt_eq(left, right)?,
        Operator::Gt => cmp::lt(left, right)?,
        Operator::GtEq => cmp::lt_eq(left, right)?,
        other => {
            return Err(DataFusionError::External(Box::new(SqlError::new(
                code::FEATURE_NOT_SUPPORTED,
                format!(
                    "operator {other} with ANY/ALL over a correlated subquery is not supported"
                ),
            ))))
        }
    })
}

/// `plan` with the values of `bound` in place of its references to those outer columns, at
/// any depth (a nested subquery's reference is ours unless the node holding it has the column).
fn bind_outer_refs(
    plan: LogicalPlan,
    bound: &HashMap<Column, ScalarValue>,
) -> DfResult<LogicalPlan> {
    if bound.is_empty() {
        return Ok(plan);
    }
    rewrite_own_expressions_up(plan, |x, schema| {
        if let Expr::OuterReferenceColumn(field, c) = &x {
            // The value keeps its column's PostgreSQL type (jsonb, uuid).
            let metadata =
                (!field.metadata().is_empty()).then(|| FieldMetadata::new_from_field(field));
            return Ok(match bound.get(c) {
                Some(v) => Transformed::yes(Expr::Literal(v.clone(), metadata)),
                None => Transformed::no(x),
            });
        }
        let Some(sub) = subquery_of(&x) else {
            return Ok(Transformed::no(x));
        };
        // What the node holding the subquery has is the subquery's, not ours.
        let inner: HashMap<Column, ScalarValue> = bound
            .iter()
            .filter(|(c, _)| !schema.has_column(c))
            .map(|(c, v)| (c.clone(), v.clone()))
            .collect();
        let outer_ref_columns = sub
            .outer_ref_columns
            .iter()
            .filter(|r| !matches!(r, Expr::OuterReferenceColumn(_, c) if inner.contains_key(c)))
            .cloned()
            .collect();
        let plan = bind_outer_refs(sub.subquery.as_ref().clone(), &inner)?;
        let x = with_subquery_plan(x, plan);
        Ok(Transformed::yes(with_outer_ref_columns(
            x,
            outer_ref_columns,
        )))
    })
}

fn with_outer_ref_columns(e: Expr, columns: Vec<Expr>) -> Expr {
    match e {
        Expr::ScalarSubquery(mut s) => {
            s.outer_ref_columns = columns;
            Expr::ScalarSubquery(s)
        }
        Expr::Exists(mut x) => {
            x.subquery.outer_ref_columns = columns;
            Expr::Exists(x)
        }
        Expr::InSubquery(mut x) => {
            x.subquery.outer_ref_columns = columns;
            Expr::InSubquery(x)
        }
        Expr::SetComparison(mut x) => {
            x.subquery.outer_ref_columns = columns;
            Expr::SetComparison(x)
        }
        other => other,
    }
}
