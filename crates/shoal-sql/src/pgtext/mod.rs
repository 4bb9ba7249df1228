//! PostgreSQL's text representation of values: parsing input text into storage values (used
//! for text-format parameters, COPY FROM and literal coercion; `input` for numbers, strings and
//! bytea, `datetime_input` for dates, timestamps and intervals) and formatting Arrow values as
//! PostgreSQL prints them (used for text-format results and COPY TO; `output`). Output must
//! match PostgreSQL byte for byte, since tests and applications compare strings.

mod datetime_fields;
mod datetime_input;
mod input;
mod interval_input;
mod output;

pub use datetime_fields::days_from_civil;
pub use datetime_input::{
    parse_date, parse_date_at, parse_time, parse_timestamp, parse_timestamp_at, parse_timestamptz,
    DATE_INFINITY,
};
pub use input::{
    check_char, check_enum_label, check_numeric_precision, check_varchar, parse_bigint, parse_bool,
    parse_bytea, parse_double, parse_integer, parse_numeric, parse_real, parse_smallint,
    parse_value,
};
pub use interval_input::parse_interval;
pub use output::{
    format_array_value, format_bytea, format_date, format_decimal, format_float, format_interval,
    format_time, format_timestamp, format_value, format_vector_value, write_value,
};

use chrono::{Datelike, NaiveDate};

const UNIX_EPOCH_DAYS_FROM_CE: i32 = 719_163;
const MICROS_PER_SECOND: i64 = 1_000_000;
const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SECOND;

/// Whether element `row` of `array` is NULL, a NULL literal's NullArray included (which has no
/// validity bitmap, so `Array::is_null` calls its elements valid).
pub fn is_null_at(array: &dyn datafusion::arrow::array::Array, row: usize) -> bool {
    array.logical_nulls().is_some_and(|n| n.is_null(row))
}

pub fn days_from_date(d: NaiveDate) -> i32 {
    d.num_days_from_ce() - UNIX_EPOCH_DAYS_FROM_CE
}
