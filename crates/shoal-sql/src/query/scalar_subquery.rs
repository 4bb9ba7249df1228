//! Correlated scalar subqueries that are not aggregates, such as psql's
//! `(SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d WHERE d.adrelid = a.attrelid)`.
//! DataFusion only decorrelates a scalar subquery that is an aggregate (it must return at most
//! one row per outer row), while PostgreSQL accepts any and raises an error at run time when one
//! returns more than one row. Wrapping the subquery's column in an aggregate that does exactly
//! that gives DataFusion the shape it can plan and keeps PostgreSQL's meaning.

use std::sync::Arc;

use datafusion::arrow::array::{make_array, Array, ArrayRef, Int64Array, StructArray};
use datafusion::arrow::buffer::NullBuffer;
use datafusion::arrow::datatypes::{DataType as ArrowType, Field, Fields};
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchemaRef, Result as DfResult, ScalarValue};
use datafusion::logical_expr::utils::{conjunction, split_conjunction_owned};
use datafusion::logical_expr::{
    create_udaf, Accumulator, AggregateUDF, ColumnarValue, Expr, LogicalPlan, LogicalPlanBuilder,
    ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Subquery, Volatility,
};
use datafusion::logical_expr::{lit, when};

use crate::error::{code, SqlError};
use crate::query::functions::sql_error;

/// Rewrites every correlated scalar subquery that may return several rows so that its one
/// column goes through [`SingleRow`] and [`SubqueryValue`].
pub fn aggregate_correlated_scalar_subqueries(plan: LogicalPlan) -> DfResult<LogicalPlan> {
    plan.transform_up_with_subqueries(|node| {
        let outer: Vec<DFSchemaRef> = node.inputs().iter().map(|i| i.schema().clone()).collect();
        let in_filter = matches!(node, LogicalPlan::Filter(_));
        node.map_expressions(|e| {
            e.transform_up(|e| match e {
                Expr::ScalarSubquery(sq) if needs_single_row(&sq) => {
                    Ok(Transformed::yes(single_row(sq, &outer)?))
                }
                Expr::Exists(exists) if !in_filter => {
                    match always_one_row(exists.subquery.subquery.as_ref()) {
                        // An aggregate without GROUP BY or HAVING: one row, whatever it reads.
                        Some(true) => Ok(Transformed::yes(lit(!exists.negated))),
                        Some(false) => Ok(Transformed::no(Expr::Exists(exists))),
                        None => Ok(Transformed::yes(exists_as_count(
                            exists.subquery,
                            exists.negated,
                        )?)),
                    }
                }
                other => Ok(Transformed::no(other)),
            })
        })
    })
    .data()
}

/// Under its projections, whether a subquery is an aggregate: Some(true) for one without
/// GROUP BY (exactly one row), Some(false) for a grouped or filtered one (HAVING; left to
/// DataFusion, which refuses it rather than count groups wrongly), None for a plain one.
fn always_one_row(plan: &LogicalPlan) -> Option<bool> {
    match plan {
        LogicalPlan::Projection(p) => always_one_row(p.input.as_ref()),
        LogicalPlan::SubqueryAlias(a) => always_one_row(a.input.as_ref()),
        LogicalPlan::Aggregate(a) => Some(a.group_expr.is_empty()),
        LogicalPlan::Filter(f) if matches!(f.input.as_ref(), LogicalPlan::Aggregate(_)) => {
            Some(false)
        }
        _ => None,
    }
}

/// DataFusion plans EXISTS only in a filter; psql's `\d INDEX` selects it (`(NOT
/// i.indimmediate) AND EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = i.indrelid ...)`).
/// Elsewhere it becomes `(SELECT count(*) FROM ...) > 0`, an aggregate subquery DataFusion
/// decorrelates (counting 0, not NULL, for outer rows without a match).
fn exists_as_count(sq: Subquery, negated: bool) -> DfResult<Expr> {
    let plan = LogicalPlanBuilder::from(Arc::unwrap_or_clone(sq.subquery))
        .aggregate(
            Vec::<Expr>::new(),
            vec![datafusion::functions_aggregate::expr_fn::count(lit(1i64)).alias("exists_rows")],
        )?
        .build()?;
    let rows = Expr::ScalarSubquery(Subquery {
        subquery: Arc::new(plan),
        outer_ref_columns: sq.outer_ref_columns,
        spans: sq.spans,
    });
    let found = rows.gt(lit(0i64));
    Ok(if negated { !found } else { found })
}

/// DataFusion cannot decorrelate a filter conjunct that reads only the outer row
/// (`WHERE d.adrelid = a.attrelid AND a.atthasdef`). Such conjuncts are taken out of the
/// subquery; `single_row` evaluates them in the outer query instead. Only conjuncts whose
/// columns the outer node itself has are taken out (not those of a query further out).
fn lift_outer_only_conjuncts(
    plan: LogicalPlan,
    outer: &[DFSchemaRef],
) -> DfResult<(LogicalPlan, Vec<Expr>)> {
    match plan {
        LogicalPlan::Projection(_) | LogicalPlan::SubqueryAlias(_) => {
            let child = plan.inputs()[0].clone();
            // The child changes even when nothing is lifted (see `substitute_outer_equalities`).
            let (child, lifted) = lift_outer_only_conjuncts(child, outer)?;
            Ok((
                plan.with_new_exprs(plan.expressions(), vec![child])?,
                lifted,
            ))
        }
        LogicalPlan::Filter(filter) => {
            let conjuncts = substitute_outer_equalities(split_conjunction_owned(filter.predicate))?;
            let (lifted, kept): (Vec<Expr>, Vec<Expr>) = conjuncts
                .into_iter()
                .partition(|c| reads_only_outer(c, outer));
            let input = Arc::unwrap_or_clone(filter.input);
            let plan = match conjunction(kept) {
                Some(predicate) => LogicalPlanBuilder::from(input).filter(predicate)?.build()?,
                None => input,
            };
            let lifted = lifted
                .into_iter()
                .map(|c| c.transform_up(unwrap_outer_reference).data())
                .collect::<DfResult<_>>()?;
            Ok((plan, lifted))
        }
        other => Ok((other, vec![])),
    }
}

/// DataFusion decorrelates an equality between an inner and an outer column, but not another
/// comparison with the outer row, such as psql's `c.oid = a.attcollation AND
/// a.attcollation <> t.typcollation`. Where an equality ties an outer column to an inner
/// expression, the other conjuncts read that expression instead (equal on every row the
/// conjunction passes), and no longer depend on the outer row.
fn substitute_outer_equalities(conjuncts: Vec<Expr>) -> DfResult<Vec<Expr>> {
    let has_outer = |e: &Expr| {
        e.exists(|e| Ok(matches!(e, Expr::OuterReferenceColumn(..))))
            .expect("visiting an expression cannot fail")
    };
    let mut tied: Vec<(Column, Expr)> = Vec::new();
    let mut is_tie = vec![false; conjuncts.len()];
    for (i, c) in conjuncts.iter().enumerate() {
        let Expr::BinaryExpr(b) = c else { continue };
        if b.op != datafusion::logical_expr::Operator::Eq {
            continue;
        }
        for (outer_side, inner_side) in [(&b.left, &b.right), (&b.right, &b.left)] {
            if let Expr::OuterReferenceColumn(_, col) = outer_side.as_ref() {
                if !has_outer(inner_side) && !inner_side.is_volatile() {
                    tied.push((col.clone(), inner_side.as_ref().clone()));
                    is_tie[i] = true;
                    break;
                }
            }
        }
    }
    if tied.is_empty() {
        return Ok(conjuncts);
    }
    conjuncts
        .into_iter()
        .zip(is_tie)
        .map(|(c, tie)| {
            if tie || !has_outer(&c) {
                return Ok(c);
            }
            c.transform_up(|e| match &e {
                Expr::OuterReferenceColumn(_, col) => {
                    match tied.iter().find(|(tied_col, _)| tied_col == col) {
                        Some((_, inner)) => Ok(Transformed::yes(inner.clone())),
                        None => Ok(Transformed::no(e)),
                    }
                }
                _ => Ok(Transformed::no(e)),
            })
            .data()
        })
        .collect()
}

fn reads_only_outer(conjunct: &Expr, outer: &[DFSchemaRef]) -> bool {
    let mut outer_columns = 0;
    let mut own_columns = 0;
    let mut foreign_columns = 0;
    conjunct
        .apply(|e| {
            match e {
                Expr::Column(_) => own_columns += 1,
                Expr::OuterReferenceColumn(_, c) => {
                    if outer.iter().any(|s| s.has_column(c)) {
                        outer_columns += 1;
                    } else {
                        foreign_columns += 1;
                    }
                }
                Expr::ScalarSubquery(_) | Expr::Exists(_) | Expr::InSubquery(_) => {
                    foreign_columns += 1
                }
                _ => {}
            }
            Ok(TreeNodeRecursion::Continue)
        })
        .expect("visiting an expression cannot fail");
    outer_columns > 0 && own_columns == 0 && foreign_columns == 0 && !conjunct.is_volatile()
}

fn unwrap_outer_reference(e: Expr) -> DfResult<Transformed<Expr>> {
    Ok(match e {
        Expr::OuterReferenceColumn(_, c) => Transformed::yes(Expr::Column(c)),
        other => Transformed::no(other),
    })
}

/// Mirrors the check DataFusion makes before it decorrelates: the subquery is correlated and is
/// neither an aggregate nor bounded to one row.
fn needs_single_row(sq: &Subquery) -> bool {
    if sq.outer_ref_columns.is_empty() || sq.subquery.schema().fields().len() != 1 {
        return false;
    }
    if sq.subquery.max_rows().is_some_and(|rows| rows <= 1) {
        return false;
    }
    let mut inner = sq.subquery.as_ref();
    loop {
        match inner {
            LogicalPlan::Projection(p) => inner = p.input.as_ref(),
            LogicalPlan::SubqueryAlias(a) => inner = a.input.as_ref(),
            LogicalPlan::Filter(f) if matches!(f.input.as_ref(), LogicalPlan::Aggregate(_)) => {
                return false
            }
            LogicalPlan::Aggregate(a) => return a.aggr_expr.is_empty(),
            _ => return true,
        }
    }
}

/// The subquery becomes `SELECT scalar_subquery_row(col) FROM (...)`, and the outer expression
/// `scalar_subquery_value((that subquery))`. The error for more than one row is raised in the
/// outer expression, because after decorrelation the aggregate runs once per group of inner
/// rows, including groups that match no outer row and that PostgreSQL never evaluates.
fn single_row(sq: Subquery, outer: &[DFSchemaRef]) -> DfResult<Expr> {
    let (plan, lifted) = lift_outer_only_conjuncts(Arc::unwrap_or_clone(sq.subquery), outer)?;
    let outer_ref_columns = if lifted.is_empty() {
        sq.outer_ref_columns
    } else {
        plan.all_out_ref_exprs()
    };
    let (qualifier, field) = plan.schema().qualified_field(0);
    let column = Expr::Column(Column::new(qualifier.cloned(), field.name()));
    let data_type = field.data_type().clone();
    let name = field.name().clone();
    let plan = LogicalPlanBuilder::from(plan)
        .aggregate(
            Vec::<Expr>::new(),
            vec![single_row_udaf(data_type.clone())
                .call(vec![column])
                .alias(name)],
        )?
        .build()?;
    let subquery = Expr::ScalarSubquery(Subquery {
        subquery: Arc::new(plan),
        outer_ref_columns,
        spans: sq.spans,
    });
    let value = ScalarUDF::new_from_impl(SubqueryValue {
        signature: Signature::any(1, Volatility::Immutable),
        data_type,
    })
    .call(vec![subquery]);
    Ok(match conjunction(lifted) {
        // A false or NULL condition leaves the subquery without rows, so its value is NULL.
        Some(condition) => when(condition, value).end()?,
        None => value,
    })
}

fn row_fields(data_type: &ArrowType) -> Fields {
    Fields::from(vec![
        Field::new("value", data_type.clone(), true),
        Field::new("rows", ArrowType::Int64, false),
    ])
}

fn single_row_udaf(data_type: ArrowType) -> AggregateUDF {
    let accumulator_type = data_type.clone();
    create_udaf(
        "scalar_subquery_row",
        vec![data_type.clone()],
        Arc::new(ArrowType::Struct(row_fields(&data_type))),
        Volatility::Immutable,
        Arc::new(move |_| Ok(Box::new(SingleRow::new(&accumulator_type)?))),
        Arc::new(vec![data_type, ArrowType::Int64]),
    )
}

/// The value a scalar subquery returned and how many rows it had.
#[derive(Debug)]
struct SingleRow {
    value: ScalarValue,
    rows: i64,
}

impl SingleRow {
    fn new(data_type: &ArrowType) -> DfResult<Self> {
        Ok(SingleRow {
            value: ScalarValue::try_from(data_type)?,
            rows: 0,
        })
    }

    fn add_rows(&mut self, rows: i64, values: &ArrayRef, index: usize) -> DfResult<()> {
        if self.rows == 0 {
            self.value = ScalarValue::try_from_array(values, index)?;
        }
        self.rows += rows;
        Ok(())
    }
}

impl Accumulator for SingleRow {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        for index in 0..values[0].len() {
            self.add_rows(1, &values[0], index)?;
        }
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        let counts = states[1]
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("the row count state is Int64");
        for index in 0..counts.len() {
            let rows = counts.value(index);
            if rows > 0 {
                self.add_rows(rows, &states[0], index)?;
            }
        }
        Ok(())
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        Ok(vec![
            self.value.clone(),
            ScalarValue::Int64(Some(self.rows)),
        ])
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        let fields = row_fields(&self.value.data_type());
        let arrays: Vec<ArrayRef> = vec![
            self.value.to_array()?,
            ScalarValue::Int64(Some(self.rows)).to_array()?,
        ];
        Ok(ScalarValue::Struct(Arc::new(StructArray::try_new(
            fields, arrays, None,
        )?)))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.value.size() - std::mem::size_of_val(&self.value)
    }
}

/// Unpacks what [`SingleRow`] produced: the value, NULL when the subquery had no row, and
/// PostgreSQL's error when it had more than one.
#[derive(Debug, PartialEq, Eq, Hash)]
struct SubqueryValue {
    signature: Signature,
    data_type: ArrowType,
}

impl ScalarUDFImpl for SubqueryValue {
    fn name(&self) -> &str {
        "scalar_subquery_value"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(self.data_type.clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.args[0].to_array(args.number_rows)?;
        if rows.data_type() == &ArrowType::Null {
            return Ok(ColumnarValue::Scalar(ScalarValue::try_from(
                &self.data_type,
            )?));
        }
        let rows = rows
            .as_any()
            .downcast_ref::<StructArray>()
            .expect("scalar_subquery_row returns a struct");
        let counts = rows
            .column(1)
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("the row count is Int64");
        let several = (0..rows.len()).any(|i| rows.is_valid(i) && counts.value(i) > 1);
        if several {
            return Err(sql_error(SqlError::new(
                code::CARDINALITY_VIOLATION,
                "more than one row returned by a subquery used as an expression",
            )));
        }
        let values = rows.column(0);
        let nulls = NullBuffer::union(values.nulls(), rows.nulls());
        let data = values.to_data().into_builder().nulls(nulls).build()?;
        Ok(ColumnarValue::Array(make_array(data)))
    }
}
