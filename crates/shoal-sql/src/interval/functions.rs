//! `justify_hours`, `justify_days` and `justify_interval`: an interval's time folded into
//! days, its days into 30-day months, or both, with the fields left sharing one sign, as
//! PostgreSQL 15's interval_justify_* compute them.

use std::sync::Arc;

use datafusion::arrow::array::{AsArray, IntervalMonthDayNanoArray};
use datafusion::arrow::datatypes::{
    DataType as ArrowType, IntervalMonthDayNano, IntervalMonthDayNanoType, IntervalUnit,
};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::execution::{FunctionRegistry, SessionState};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::error::{code, SqlError};
use crate::query::functions::sql_error;

const INTERVAL: ArrowType = ArrowType::Interval(IntervalUnit::MonthDayNano);
const NANOS_PER_DAY: i64 = 86_400 * 1_000_000_000;
const DAYS_PER_MONTH: i32 = 30;

/// Which fields a justify function folds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Fold {
    Hours,
    Days,
    Both,
}

pub fn register(state: &mut SessionState) {
    for fold in [Fold::Hours, Fold::Days, Fold::Both] {
        let udf = ScalarUDF::new_from_impl(Justify {
            fold,
            signature: Signature::exact(vec![INTERVAL], Volatility::Immutable),
        });
        state
            .register_udf(Arc::new(udf))
            .expect("function registration cannot fail");
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Justify {
    fold: Fold,
    signature: Signature,
}

impl ScalarUDFImpl for Justify {
    fn name(&self) -> &str {
        match self.fold {
            Fold::Hours => "justify_hours",
            Fold::Days => "justify_days",
            Fold::Both => "justify_interval",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(INTERVAL)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = matches!(args.args[0], ColumnarValue::Scalar(_));
        let input = args.args[0].to_array(args.number_rows.max(1))?;
        let out: IntervalMonthDayNanoArray = input
            .as_primitive::<IntervalMonthDayNanoType>()
            .iter()
            .map(|v| v.map(|v| justify(self.fold, v)).transpose())
            .collect::<DfResult<_>>()?;
        let out: datafusion::arrow::array::ArrayRef = Arc::new(out);
        Ok(if scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)
        } else {
            ColumnarValue::Array(out)
        })
    }
}

fn justify(fold: Fold, v: IntervalMonthDayNano) -> DfResult<IntervalMonthDayNano> {
    let out_of_range = || {
        sql_error(SqlError::new(
            code::DATETIME_FIELD_OVERFLOW,
            "interval out of range",
        ))
    };
    let (mut months, mut days, mut nanos) = (v.months, v.days, v.nanoseconds);
    if fold != Fold::Days {
        let whole_days = i32::try_from(nanos / NANOS_PER_DAY).map_err(|_| out_of_range())?;
        nanos %= NANOS_PER_DAY;
        days = days.checked_add(whole_days).ok_or_else(out_of_range)?;
    }
    if fold != Fold::Hours {
        let whole_months = days / DAYS_PER_MONTH;
        days -= whole_months * DAYS_PER_MONTH;
        months = months.checked_add(whole_months).ok_or_else(out_of_range)?;
        // justify_interval also looks at the time when the days came out zero.
        let time_sign = if fold == Fold::Both {
            nanos.signum()
        } else {
            0
        };
        if months > 0 && (days < 0 || (days == 0 && time_sign < 0)) {
            days += DAYS_PER_MONTH;
            months -= 1;
        } else if months < 0 && (days > 0 || (days == 0 && time_sign > 0)) {
            days -= DAYS_PER_MONTH;
            months += 1;
        }
    }
    if fold != Fold::Days {
        if days > 0 && nanos < 0 {
            nanos += NANOS_PER_DAY;
            days -= 1;
        } else if days < 0 && nanos > 0 {
            nanos -= NANOS_PER_DAY;
            days += 1;
        }
    }
    Ok(IntervalMonthDayNano::new(months, days, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000_000_000;

    fn iv(months: i32, days: i32, hours: i64) -> IntervalMonthDayNano {
        IntervalMonthDayNano::new(months, days, hours * HOUR)
    }

    #[test]
    fn justify_as_postgresql() {
        // Answers from PostgreSQL 15.
        let ok = |fold, v| justify(fold, v).unwrap();
        // justify_hours('1 day -26 hours') = '-02:00:00'
        assert_eq!(ok(Fold::Hours, iv(0, 1, -26)), iv(0, 0, -2));
        // justify_hours('-1 day 50 hours') = '1 day 02:00:00'
        assert_eq!(ok(Fold::Hours, iv(0, -1, 50)), iv(0, 1, 2));
        // justify_days('1 mon -35 days') = '-5 days'
        assert_eq!(ok(Fold::Days, iv(1, -35, 0)), iv(0, -5, 0));
        // justify_days('-1 mon 65 days') = '1 mon 5 days'
        assert_eq!(ok(Fold::Days, iv(-1, 65, 0)), iv(1, 5, 0));
        // justify_interval('1 mon -1 hour') = '29 days 23:00:00'
        assert_eq!(ok(Fold::Both, iv(1, 0, -1)), iv(0, 29, 23));
        // justify_interval('-1 mon 30 days 1 hour') = '01:00:00'
        assert_eq!(ok(Fold::Both, iv(-1, 30, 1)), iv(0, 0, 1));
    }
}
