//! Subqueries DataFusion cannot turn into joins: a correlated scalar subquery inside a CASE, one
//! whose correlation is not an equality, one with a LIMIT or a recursive CTE, EXISTS and IN in a
//! select list. DataFusion's physical planner refuses what its decorrelation rules leave
//! behind ("Physical plan does not support logical expression ScalarSubquery"); PostgreSQL runs
//! such a subquery once per outer row. This optimizer rule, appended after DataFusion's, does
//! the same for whatever is left: each remaining subquery becomes a call whose arguments are
//! the outer columns it reads; the call plans the subquery with those values in place of the
//! outer references and runs it, once per distinct set of values in a batch.
//!
//! The subquery runs on a thread of its own (a scalar function is synchronous, and the
//! connection's runtime may be single-threaded), so this is a path for catalog queries and
//! small outer inputs, not for large joins: those decorrelate and never get here.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray};
use datafusion::arrow::datatypes::{DataType as ArrowType, Field, FieldRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, DataFusionError, Result as DfResult, ScalarValue};
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::logical_expr::expr::{Exists, InSubquery, ScalarFunction};
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{
    ColumnarValue, Expr, LogicalPlan, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Subquery, TypeSignature, Volatility,
};
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};

/// The optimizer rule: remaining subquery expressions become per-row calls.
#[derive(Debug, Default)]
pub struct RunSubqueriesPerRow;

impl OptimizerRule for RunSubqueriesPerRow {
    fn name(&self) -> &str {
        "shoal_run_subqueries_per_row"
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::BottomUp)
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> DfResult<Transformed<LogicalPlan>> {
        let outer_schema = merge_schema(&plan.inputs());
        plan.map_expressions(|e| {
            e.transform_up(|sub| {
                Ok(match sub {
                    Expr::ScalarSubquery(subquery) => Transformed::yes(per_row_call(
                        subquery,
                        Kind::Scalar,
                        vec![],
                        &outer_schema,
                    )?),
                    Expr::Exists(Exists { subquery, negated }) => Transformed::yes(per_row_call(
                        subquery,
                        Kind::Exists { negated },
                        vec![],
                        &outer_schema,
                    )?),
                    Expr::InSubquery(InSubquery {
                        expr,
                        subquery,
                        negated,
                    }) => Transformed::yes(per_row_call(
                        subquery,
                        Kind::In { negated },
                        vec![*expr],
                        &outer_schema,
                    )?),
                    other => Transformed::no(other),
                })
            })
        })
    }
}

/// A subquery in which a nested subquery reads a column of the enclosing query (`(SELECT ...
/// WHERE y.a <= (SELECT ... WHERE z.b < t1.b))`) runs per row from the start. DataFusion lists
/// only a subquery's own outer references, so it would take this one for uncorrelated, prune
/// the column from the enclosing scan and push filters through aliases until the nested
/// reference names a column of the wrong table. Runs before the optimizer.
pub fn run_nested_correlation_per_row(plan: LogicalPlan) -> DfResult<LogicalPlan> {
    plan.transform_up_with_subqueries(|node| {
        let schema = merge_schema(&node.inputs());
        node.map_expressions(|e| {
            e.transform_up(|sub| {
                let subquery = match &sub {
                    Expr::ScalarSubquery(s) => s,
                    Expr::Exists(Exists { subquery, .. }) => subquery,
                    Expr::InSubquery(InSubquery { subquery, .. }) => subquery,
                    _ => return Ok(Transformed::no(sub)),
                };
                let mut nested = false;
                subquery.subquery.apply_with_subqueries(|inner| {
                    inner.apply_expressions(|e| {
                        e.apply(|x| {
                            if let Expr::OuterReferenceColumn(_, column) = x {
                                let listed = subquery.outer_ref_columns.iter().any(
                                    |o| matches!(o, Expr::OuterReferenceColumn(_, c) if c == column),
                                );
                                nested |= !listed && schema.has_column(column);
                            }
                            Ok(TreeNodeRecursion::Continue)
                        })
                    })
                })?;
                if !nested {
                    return Ok(Transformed::no(sub));
                }
                Ok(Transformed::yes(match sub {
                    Expr::ScalarSubquery(s) => per_row_call(s, Kind::Scalar, vec![], &schema)?,
                    Expr::Exists(Exists { subquery, negated }) => {
                        per_row_call(subquery, Kind::Exists { negated }, vec![], &schema)?
                    }
                    Expr::InSubquery(InSubquery {
                        expr,
                        subquery,
                        negated,
                    }) => per_row_call(subquery, Kind::In { negated }, vec![*expr], &schema)?,
                    _ => unreachable!("matched above"),
                }))
            })
        })
    })
    .data()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    /// The subquery's one value (NULL for no row; an error for more than one).
    Scalar,
    /// Whether it has a row.
    Exists { negated: bool },
    /// Whether the first argument equals one of its values, with SQL's NULL rules.
    In { negated: bool },
}

/// The call standing for `subquery`: its leading arguments (`lead`, the IN operand), then the
/// outer columns the subquery reads.
fn per_row_call(
    subquery: Subquery,
    kind: Kind,
    lead: Vec<Expr>,
    outer_schema: &DFSchema,
) -> DfResult<Expr> {
    // Every column of this query that the subquery reads, at any depth: a subquery nested in
    // it may read this query's columns too, and they are bound with the others.
    let mut outer = Vec::new();
    subquery.subquery.apply_with_subqueries(|node| {
        node.apply_expressions(|e| {
            e.apply(|sub| {
                if let Expr::OuterReferenceColumn(_, column) = sub {
                    if outer_schema.has_column(column) && !outer.contains(column) {
                        outer.push(column.clone());
                    }
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })
    })?;
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
    let arity = lead.len() + outer.len();
    let signature = if arity == 0 {
        Signature::new(TypeSignature::Nullary, Volatility::Volatile)
    } else {
        Signature::new(TypeSignature::Any(arity), Volatility::Volatile)
    };
    let args: Vec<Expr> = lead
        .into_iter()
        .chain(outer.iter().cloned().map(Expr::Column))
        .collect();
    let call = SubqueryCall {
        signature,
        kind,
        lead_count: args.len() - outer.len(),
        plan: subquery.subquery,
        outer,
        return_field,
    };
    Ok(Expr::ScalarFunction(ScalarFunction::new_udf(
        Arc::new(ScalarUDF::new_from_impl(call)),
        args,
    )))
}

struct SubqueryCall {
    signature: Signature,
    kind: Kind,
    lead_count: usize,
    plan: Arc<LogicalPlan>,
    /// The outer columns, in the order of the arguments after the lead ones.
    outer: Vec<Column>,
    return_field: FieldRef,
}

impl std::fmt::Debug for SubqueryCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SubqueryCall({:?})", self.kind)
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
        let arrays: Vec<ArrayRef> = args
            .args
            .iter()
            .map(|a| a.to_array(rows))
            .collect::<DfResult<_>>()?;
        // One run per distinct set of outer values.
        let mut runs: HashMap<Vec<ScalarValue>, Vec<RecordBatch>> = HashMap::new();
        let mut out = Vec::with_capacity(rows);
        for row in 0..rows {
            let values: Vec<ScalarValue> = arrays
                .iter()
                .map(|a| ScalarValue::try_from_array(a, row))
                .collect::<DfResult<_>>()?;
            let (lead, outer) = values.split_at(self.lead_count);
            if !runs.contains_key(outer) {
                let batches = self.run(outer)?;
                runs.insert(outer.to_vec(), batches);
            }
            out.push(self.answer(lead, &runs[outer])?);
        }
        if rows == 0 {
            return Ok(ColumnarValue::Array(
                datafusion::arrow::array::new_empty_array(self.return_field.data_type()),
            ));
        }
        Ok(ColumnarValue::Array(ScalarValue::iter_to_array(out)?))
    }
}

impl SubqueryCall {
    /// The subquery's rows with `outer` in place of its outer references.
    fn run(&self, outer: &[ScalarValue]) -> DfResult<Vec<RecordBatch>> {
        let bound: HashMap<&Column, &ScalarValue> = self.outer.iter().zip(outer).collect();
        let plan = self
            .plan
            .as_ref()
            .clone()
            .transform_up_with_subqueries(|node| {
                node.map_expressions(|e| {
                    e.transform_up(|sub| {
                        Ok(match &sub {
                            Expr::OuterReferenceColumn(_, column) => match bound.get(column) {
                                Some(v) => Transformed::yes(Expr::Literal((*v).clone(), None)),
                                None => Transformed::no(sub),
                            },
                            _ => Transformed::no(sub),
                        })
                    })
                })
            })
            .data()?;
        let limit = match self.kind {
            Kind::Scalar => Some(2),
            Kind::Exists { .. } => Some(1),
            Kind::In { .. } => None,
        };
        std::thread::scope(|s| {
            s.spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| DataFusionError::External(Box::new(e)))?;
                runtime.block_on(async {
                    let state = SessionStateBuilder::new()
                        .with_default_features()
                        .with_optimizer_rule(Arc::new(RunSubqueriesPerRow))
                        .build();
                    let plan = match limit {
                        Some(n) => datafusion::logical_expr::LogicalPlanBuilder::from(plan)
                            .limit(0, Some(n))?
                            .build()?,
                        None => plan,
                    };
                    let physical = state.create_physical_plan(&plan).await?;
                    datafusion::physical_plan::collect(physical, state.task_ctx()).await
                })
            })
            .join()
            .map_err(|_| DataFusionError::Execution("a subquery's run panicked".into()))?
        })
    }

    /// The value of the call for one row, from the subquery's rows.
    fn answer(&self, lead: &[ScalarValue], batches: &[RecordBatch]) -> DfResult<ScalarValue> {
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        match self.kind {
            Kind::Scalar => {
                if rows > 1 {
                    return Err(DataFusionError::External(Box::new(
                        crate::error::SqlError::new(
                            crate::error::code::CARDINALITY_VIOLATION,
                            "more than one row returned by a subquery used as an expression",
                        ),
                    )));
                }
                match batches.iter().find(|b| b.num_rows() > 0) {
                    Some(b) => ScalarValue::try_from_array(b.column(0), 0),
                    None => ScalarValue::try_from(self.return_field.data_type()),
                }
            }
            Kind::Exists { negated } => Ok(ScalarValue::Boolean(Some((rows > 0) != negated))),
            Kind::In { negated } => {
                let needle = &lead[0];
                let mut saw_null = needle.is_null() && rows > 0;
                let mut found = false;
                if !needle.is_null() {
                    for b in batches {
                        let column = b.column(0);
                        let needle = needle.cast_to(column.data_type())?;
                        let equal: BooleanArray = datafusion::arrow::compute::kernels::cmp::eq(
                            column,
                            &needle.to_scalar()?,
                        )?;
                        found |= equal.true_count() > 0;
                        saw_null |= column.null_count() > 0;
                    }
                }
                Ok(ScalarValue::Boolean(if found {
                    Some(!negated)
                } else if saw_null {
                    None
                } else {
                    Some(negated)
                }))
            }
        }
    }
}
