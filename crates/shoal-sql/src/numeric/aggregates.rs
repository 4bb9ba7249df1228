//! sum, avg, variance and stddev over numerics, exact and with PostgreSQL's result scales; also
//! what PostgreSQL computes for bigint sums and for integer averages, variances and standard
//! deviations, all of which are numeric. One accumulator serves them all: a count, the sum and
//! (for the moments) the sum of squares, exact. `DISTINCT` keeps the distinct values by key.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, ListArray};
use datafusion::arrow::datatypes::{DataType as ArrowType, Field, FieldRef};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::function::StateFieldsArgs;
use datafusion::logical_expr::Accumulator;
use shoal_numeric::{MomentsAccumulator, Numeric};

use super::kernels::to_numeric_array;
use super::{as_numeric_array, df_error, key_of, scalar, value_at, NUMERIC_ARROW};

/// Which second-moment statistic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Moment {
    VarSamp,
    VarPop,
    StddevSamp,
    StddevPop,
}

/// What an accumulator computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Statistic {
    Sum,
    Avg,
    Moment(Moment),
}

/// The accumulator of `statistic` over numerics (and integers, which it converts).
pub fn numeric_accumulator(statistic: Statistic, distinct: bool) -> Box<dyn Accumulator> {
    Box::new(NumericAccumulator::new(statistic, distinct))
}

/// The partial state a numeric accumulator passes between partitions.
pub fn numeric_state_fields(args: &StateFieldsArgs) -> Vec<FieldRef> {
    let field = |suffix: &str, t: ArrowType| {
        Arc::new(Field::new(format!("{}[{suffix}]", args.name), t, true))
    };
    if args.is_distinct {
        let item = Arc::new(Field::new_list_field(NUMERIC_ARROW, true));
        return vec![field("distinct", ArrowType::List(item))];
    }
    vec![
        field("count", ArrowType::Int64),
        field("sum", NUMERIC_ARROW),
        field("sum_squares", NUMERIC_ARROW),
        field("saw_special", ArrowType::Boolean),
    ]
}

#[derive(Debug)]
struct NumericAccumulator {
    statistic: Statistic,
    /// The count and sum (and for the moments the sum of squares) of the values seen.
    moments: MomentsAccumulator,
    /// For DISTINCT: each distinct value, by its key.
    distinct: Option<BTreeMap<Vec<u8>, Numeric>>,
}

impl NumericAccumulator {
    fn new(statistic: Statistic, distinct: bool) -> Self {
        NumericAccumulator {
            statistic,
            moments: MomentsAccumulator::new(),
            distinct: distinct.then(BTreeMap::new),
        }
    }

    fn push(&mut self, v: &Numeric) -> DfResult<()> {
        match self.statistic {
            Statistic::Moment(_) => self.moments.push(v).map_err(df_error),
            // sum and avg need no squares, which would cost a multiplication per row.
            _ => {
                self.moments.n += 1;
                self.moments.sum_x = self.moments.sum_x.add(v).map_err(df_error)?;
                Ok(())
            }
        }
    }

    /// The totals over the distinct values, for DISTINCT.
    fn distinct_totals(&self, values: &BTreeMap<Vec<u8>, Numeric>) -> DfResult<MomentsAccumulator> {
        let mut totals = NumericAccumulator::new(self.statistic, false);
        for v in values.values() {
            totals.push(v)?;
        }
        Ok(totals.moments)
    }
}

impl Accumulator for NumericAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        let converted = to_numeric_array(&values[0])?;
        let column = as_numeric_array(converted.as_ref())?;
        for row in 0..column.len() {
            if column.is_null(row) {
                continue;
            }
            match &mut self.distinct {
                Some(set) => {
                    let bytes = column.value(row);
                    set.entry(key_of(bytes).to_vec())
                        .or_insert_with(|| super::decode(bytes));
                }
                None => self.push(&super::decode(column.value(row)))?,
            }
        }
        Ok(())
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        let converted = to_numeric_array(&values[0])?;
        let column = as_numeric_array(converted.as_ref())?;
        for row in 0..column.len() {
            if let Some(v) = value_at(column, row) {
                self.moments.n -= 1;
                self.moments.sum_x = self.moments.sum_x.sub(&v).map_err(df_error)?;
            }
        }
        Ok(())
    }

    /// A sliding window frame takes values out of sum and avg; the moments keep no running
    /// state that could give them back exactly, and DISTINCT no counts.
    fn supports_retract_batch(&self) -> bool {
        self.distinct.is_none() && !matches!(self.statistic, Statistic::Moment(_))
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        let totals = match &self.distinct {
            Some(values) => self.distinct_totals(values)?,
            None => self.moments.clone(),
        };
        let result = match self.statistic {
            Statistic::Sum => (totals.n > 0).then(|| totals.sum_x.clone()),
            Statistic::Avg => Numeric::avg(&totals.sum_x, totals.n).map_err(df_error)?,
            Statistic::Moment(m) => match m {
                Moment::VarSamp => totals.var_samp(),
                Moment::VarPop => totals.var_pop(),
                Moment::StddevSamp => totals.stddev_samp(),
                Moment::StddevPop => totals.stddev_pop(),
            }
            .map_err(df_error)?,
        };
        Ok(scalar(result.as_ref()))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
            + self
                .distinct
                .as_ref()
                .map_or(0, |d| d.len() * (std::mem::size_of::<Numeric>() + 32))
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        if let Some(values) = &self.distinct {
            let items: Vec<ScalarValue> = values.values().map(|v| scalar(Some(v))).collect();
            return Ok(vec![ScalarValue::List(ScalarValue::new_list_nullable(
                &items,
                &NUMERIC_ARROW,
            ))]);
        }
        Ok(vec![
            ScalarValue::Int64(Some(self.moments.n)),
            scalar(Some(&self.moments.sum_x)),
            scalar(Some(&self.moments.sum_x2)),
            ScalarValue::Boolean(Some(self.moments.saw_special)),
        ])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        if let Some(set) = &mut self.distinct {
            let lists: &ListArray = states[0].as_list();
            for row in 0..lists.len() {
                if lists.is_null(row) {
                    continue;
                }
                let items = lists.value(row);
                let items = as_numeric_array(items.as_ref())?;
                for i in 0..items.len() {
                    if items.is_valid(i) {
                        let bytes = items.value(i);
                        set.entry(key_of(bytes).to_vec())
                            .or_insert_with(|| super::decode(bytes));
                    }
                }
            }
            return Ok(());
        }
        let counts = states[0].as_primitive::<datafusion::arrow::datatypes::Int64Type>();
        let sums = as_numeric_array(states[1].as_ref())?;
        let squares = as_numeric_array(states[2].as_ref())?;
        let specials = states[3].as_boolean();
        for row in 0..counts.len() {
            if counts.is_null(row) || counts.value(row) == 0 {
                continue;
            }
            let other = MomentsAccumulator {
                n: counts.value(row),
                sum_x: value_at(sums, row).expect("a state with rows has a sum"),
                sum_x2: value_at(squares, row).expect("a state with rows has squares"),
                saw_special: specials.value(row),
            };
            self.moments.merge(&other).map_err(df_error)?;
        }
        Ok(())
    }
}
