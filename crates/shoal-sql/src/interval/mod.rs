//! PostgreSQL's `interval` over Arrow's `Interval(MonthDayNano)`: months, days and a time
//! kept apart, as PostgreSQL keeps them.
//!
//! - `arith`: the operators DataFusion lacks or answers differently: `timestamp - timestamp`
//!   (days and a time below a day, as PostgreSQL's timestamp_mi), `interval * number`,
//!   `interval / number`, and `date ± interval` as a timestamp.
//! - `order`: comparisons and sort keys by the span an interval stands for (a month counts
//!   30 days), so `'30 days' = '1 month'`; GROUP BY, DISTINCT, DISTINCT ON and windows by span.
//! - `aggregates`: min and max by span.
//! - `functions`: justify_hours, justify_days, justify_interval.
//!
//! Text input and output live with the other types in `pgtext`.

pub mod aggregates;
pub mod arith;
pub mod functions;
pub mod order;
