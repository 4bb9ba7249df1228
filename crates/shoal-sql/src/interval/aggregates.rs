//! `min` and `max` over intervals by span, as PostgreSQL's interval_smaller and
//! interval_larger: `max('1 mon', '29 days')` is `1 mon`. Of two equal spans the one seen later
//! wins (PostgreSQL keeps the second argument on a tie). Arrow's min and max compare the
//! fields one by one instead.

use std::collections::VecDeque;
use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{ArrayRef, AsArray};
use datafusion::arrow::datatypes::{
    DataType as ArrowType, IntervalMonthDayNano, IntervalMonthDayNanoType, IntervalUnit,
};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::function::AccumulatorArgs;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility,
};

use super::order::span_nanos;

const INTERVAL: ArrowType = ArrowType::Interval(IntervalUnit::MonthDayNano);

static MIN: LazyLock<Arc<AggregateUDF>> =
    LazyLock::new(|| Arc::new(AggregateUDF::new_from_impl(IntervalExtreme::new(false))));
static MAX: LazyLock<Arc<AggregateUDF>> =
    LazyLock::new(|| Arc::new(AggregateUDF::new_from_impl(IntervalExtreme::new(true))));

/// The span-ordered replacement for `min` or `max` over intervals.
pub fn extreme(name: &str) -> Option<Arc<AggregateUDF>> {
    match name {
        "min" => Some(MIN.clone()),
        "max" => Some(MAX.clone()),
        _ => None,
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct IntervalExtreme {
    largest: bool,
    signature: Signature,
}

impl IntervalExtreme {
    fn new(largest: bool) -> Self {
        IntervalExtreme {
            largest,
            signature: Signature::exact(vec![INTERVAL], Volatility::Immutable),
        }
    }
}

impl AggregateUDFImpl for IntervalExtreme {
    fn name(&self) -> &str {
        if self.largest {
            "max"
        } else {
            "min"
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(INTERVAL)
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        Ok(Box::new(Extreme {
            largest: self.largest,
            best: None,
        }))
    }

    /// Window frames that slide keep the frame's values, to drop them as the frame moves.
    fn create_sliding_accumulator(&self, _args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        Ok(Box::new(SlidingExtreme {
            largest: self.largest,
            frame: VecDeque::new(),
        }))
    }
}

/// Whether `candidate` replaces `best`: larger (or smaller) in span, or equal and later.
fn wins(largest: bool, best: IntervalMonthDayNano, candidate: IntervalMonthDayNano) -> bool {
    let (best, candidate) = (span_nanos(best), span_nanos(candidate));
    if largest {
        candidate >= best
    } else {
        candidate <= best
    }
}

fn interval_scalar(v: Option<IntervalMonthDayNano>) -> ScalarValue {
    ScalarValue::IntervalMonthDayNano(v)
}

#[derive(Debug)]
struct Extreme {
    largest: bool,
    best: Option<IntervalMonthDayNano>,
}

impl Accumulator for Extreme {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        for v in values[0]
            .as_primitive::<IntervalMonthDayNanoType>()
            .iter()
            .flatten()
        {
            self.best = match self.best {
                Some(best) if !wins(self.largest, best, v) => Some(best),
                _ => Some(v),
            };
        }
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        self.update_batch(states)
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        Ok(vec![interval_scalar(self.best)])
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        Ok(interval_scalar(self.best))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }
}

#[derive(Debug)]
struct SlidingExtreme {
    largest: bool,
    /// The frame's values, oldest first (NULLs left out).
    frame: VecDeque<IntervalMonthDayNano>,
}

impl Accumulator for SlidingExtreme {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        let values = values[0].as_primitive::<IntervalMonthDayNanoType>();
        self.frame.extend(values.iter().flatten());
        Ok(())
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        // Rows leave a window frame in the order they entered it.
        let leaving = values[0].as_primitive::<IntervalMonthDayNanoType>();
        for _ in leaving.iter().flatten() {
            self.frame.pop_front();
        }
        Ok(())
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        self.update_batch(states)
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        Ok(vec![self.evaluate()?])
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        let best = self.frame.iter().copied().fold(None, |best, v| match best {
            Some(best) if !wins(self.largest, best, v) => Some(best),
            _ => Some(v),
        });
        Ok(interval_scalar(best))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.frame.len() * std::mem::size_of::<IntervalMonthDayNano>()
    }
}
