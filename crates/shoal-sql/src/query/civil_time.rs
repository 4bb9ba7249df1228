//! Calendar fields (year, month, day, hour, ...) of timestamps by integer arithmetic, for
//! `EXTRACT` and `date_part` over whole columns. Arrow's date_part builds a chrono date per
//! value, which made `extract(year from pickup_datetime)` 40% of a GROUP BY over millions of
//! rows; the proleptic Gregorian calendar needs only a few divisions per value (Howard
//! Hinnant's `civil_from_days`). Only wall-clock timestamps (no zone) in microseconds take this
//! way, and dates;
//! everything else keeps DataFusion's date_part.

use datafusion::arrow::array::TimestampMicrosecondArray;
use datafusion::arrow::array::{Array, ArrayRef, Date32Array, Decimal128Array};
use datafusion::arrow::datatypes::{DataType as ArrowType, TimeUnit};

const MICROS_PER_MINUTE: i64 = 60_000_000;
const MICROS_PER_HOUR: i64 = 60 * MICROS_PER_MINUTE;
const MICROS_PER_DAY: i64 = 24 * MICROS_PER_HOUR;

/// Day number (from 1970-01-01) of 1900-01-01, the first day `YEAR_OF_DAY` covers.
const YEAR_TABLE_FIRST_DAY: i64 = -25_567;
/// Days from 1900-01-01 to 2101-01-01.
const YEAR_TABLE_DAYS: usize = 73_414;

/// The year of each day from 1900 through 2100 (147 KB): a GROUP BY on `extract(year ...)`
/// looks its years up here instead of doing `civil_from_days`' divisions for every row.
static YEAR_OF_DAY: std::sync::LazyLock<Box<[i16]>> = std::sync::LazyLock::new(|| {
    (0..YEAR_TABLE_DAYS as i64)
        .map(|i| civil_from_days(YEAR_TABLE_FIRST_DAY + i).0 as i16)
        .collect()
});

/// The (PostgreSQL) year of a timestamp in microseconds, by `year_of_day` (the table above)
/// when it covers the day.
#[inline(always)]
fn year_of_micros(micros: i64, year_of_day: &[i16]) -> i64 {
    let days = micros.div_euclid(MICROS_PER_DAY);
    match year_of_day.get(days.wrapping_sub(YEAR_TABLE_FIRST_DAY) as usize) {
        Some(&year) => i64::from(year),
        None => CivilField::Year.of_micros(micros),
    }
}

/// A field `civil_field` computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CivilField {
    Year,
    Quarter,
    Month,
    Day,
    Hour,
    Minute,
    /// Day of the week, Sunday = 0 (PostgreSQL's `dow`).
    DayOfWeek,
}

impl CivilField {
    /// The field for an EXTRACT field name, if it is one of the fast ones.
    pub fn of(name: &str) -> Option<CivilField> {
        Some(match name.to_ascii_lowercase().as_str() {
            "year" | "years" | "y" | "yr" | "yrs" => CivilField::Year,
            "quarter" | "qtr" => CivilField::Quarter,
            "month" | "months" | "mon" | "mons" => CivilField::Month,
            "day" | "days" | "d" => CivilField::Day,
            "hour" | "hours" | "h" | "hr" | "hrs" => CivilField::Hour,
            "minute" | "minutes" | "m" | "min" | "mins" => CivilField::Minute,
            "dow" => CivilField::DayOfWeek,
            _ => return None,
        })
    }

    /// The field of a timestamp given as microseconds since 1970-01-01 00:00.
    #[inline(always)]
    pub fn of_micros(self, micros: i64) -> i64 {
        let days = micros.div_euclid(MICROS_PER_DAY);
        match self {
            CivilField::Hour => micros.rem_euclid(MICROS_PER_DAY) / MICROS_PER_HOUR,
            CivilField::Minute => micros.rem_euclid(MICROS_PER_HOUR) / MICROS_PER_MINUTE,
            // 1970-01-01 was a Thursday.
            CivilField::DayOfWeek => (days + 4).rem_euclid(7),
            CivilField::Year => {
                let (year, _, _) = civil_from_days(days);
                // PostgreSQL has no year 0: the year before 1 AD is -1 (1 BC).
                if year <= 0 {
                    year - 1
                } else {
                    year
                }
            }
            CivilField::Quarter => (civil_from_days(days).1 as i64 - 1) / 3 + 1,
            CivilField::Month => civil_from_days(days).1 as i64,
            CivilField::Day => civil_from_days(days).2 as i64,
        }
    }
}

/// (year, month 1-12, day 1-31) of a day number counted from 1970-01-01, in the proleptic
/// Gregorian calendar with astronomical years (year 0 is 1 BC).
#[inline(always)]
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    // Shift the epoch to 0000-03-01, so that the leap day is the last day of a "year", and
    // count in 400-year eras of 146,097 days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u32;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The field of every value as a numeric of scale 0 (nulls stay null), when `values` are
/// wall-clock timestamps in microseconds or dates; None for other types.
pub fn civil_field(values: &ArrayRef, field: CivilField) -> Option<Decimal128Array> {
    // One loop per field, so that the field's arithmetic is inlined into it rather than
    // chosen per value.
    match field {
        CivilField::Year => {
            let year_of_day: &[i16] = &YEAR_OF_DAY;
            map_days_or_micros(values, |m| year_of_micros(m, year_of_day))
        }
        CivilField::Quarter => map_days_or_micros(values, |m| CivilField::Quarter.of_micros(m)),
        CivilField::Month => map_days_or_micros(values, |m| CivilField::Month.of_micros(m)),
        CivilField::Day => map_days_or_micros(values, |m| CivilField::Day.of_micros(m)),
        CivilField::Hour => map_days_or_micros(values, |m| CivilField::Hour.of_micros(m)),
        CivilField::Minute => map_days_or_micros(values, |m| CivilField::Minute.of_micros(m)),
        CivilField::DayOfWeek => map_days_or_micros(values, |m| CivilField::DayOfWeek.of_micros(m)),
    }
}

fn map_days_or_micros(
    values: &ArrayRef,
    field_of_micros: impl Fn(i64) -> i64,
) -> Option<Decimal128Array> {
    match values.data_type() {
        ArrowType::Timestamp(TimeUnit::Microsecond, None) => {
            let micros = values
                .as_any()
                .downcast_ref::<TimestampMicrosecondArray>()?;
            // Only valid slots: a NULL's slot holds any value, which may overflow. A field of
            // infinity is NULL (PostgreSQL gives NULL for most fields, ±Infinity for a few
            // that a decimal cannot hold).
            Some(micros.unary_opt(|micros| {
                (micros != i64::MAX && micros != i64::MIN).then(|| field_of_micros(micros) as i128)
            }))
        }
        ArrowType::Date32 => {
            let days = values.as_any().downcast_ref::<Date32Array>()?;
            Some(days.unary_opt(|days| {
                (days != i32::MAX && days != i32::MIN)
                    .then(|| field_of_micros(days as i64 * MICROS_PER_DAY) as i128)
            }))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Datelike, NaiveDate, Timelike};

    #[test]
    fn fields_match_chrono_across_eras() {
        // Every 7 hours 13 minutes from 600 BC to 2600 AD: leap years, century rules, and
        // negative day numbers.
        let first = NaiveDate::from_ymd_opt(-600, 1, 1)
            .unwrap()
            .and_hms_opt(0, 0, 0)
            .unwrap();
        let step_micros = (7 * 60 + 13) * MICROS_PER_MINUTE;
        let mut micros = first.and_utc().timestamp_micros();
        let last = NaiveDate::from_ymd_opt(2600, 12, 31).unwrap();
        let last_micros = last
            .and_hms_opt(23, 59, 59)
            .unwrap()
            .and_utc()
            .timestamp_micros();
        while micros < last_micros {
            let t = chrono::DateTime::from_timestamp_micros(micros)
                .unwrap()
                .naive_utc();
            let pg_year = if t.year() <= 0 {
                t.year() - 1
            } else {
                t.year()
            };
            assert_eq!(CivilField::Year.of_micros(micros), pg_year as i64, "{t}");
            assert_eq!(year_of_micros(micros, &YEAR_OF_DAY), pg_year as i64, "{t}");
            assert_eq!(CivilField::Month.of_micros(micros), t.month() as i64, "{t}");
            assert_eq!(CivilField::Day.of_micros(micros), t.day() as i64, "{t}");
            assert_eq!(CivilField::Hour.of_micros(micros), t.hour() as i64, "{t}");
            assert_eq!(
                CivilField::Minute.of_micros(micros),
                t.minute() as i64,
                "{t}"
            );
            assert_eq!(
                CivilField::Quarter.of_micros(micros),
                (t.month() as i64 - 1) / 3 + 1
            );
            assert_eq!(
                CivilField::DayOfWeek.of_micros(micros),
                t.weekday().num_days_from_sunday() as i64,
                "{t}"
            );
            micros += step_micros;
        }
    }

    #[test]
    fn the_year_table_spans_1900_to_2100() {
        let day = |y, m, d| {
            NaiveDate::from_ymd_opt(y, m, d)
                .unwrap()
                .signed_duration_since(NaiveDate::from_ymd_opt(1970, 1, 1).unwrap())
                .num_days()
        };
        assert_eq!(YEAR_TABLE_FIRST_DAY, day(1900, 1, 1));
        assert_eq!(YEAR_TABLE_DAYS as i64, day(2101, 1, 1) - day(1900, 1, 1));
        assert_eq!(YEAR_OF_DAY[0], 1900);
        assert_eq!(YEAR_OF_DAY[YEAR_TABLE_DAYS - 1], 2100);
    }

    #[test]
    fn nulls_stay_null_and_dates_count_too() {
        let values: ArrayRef =
            std::sync::Arc::new(TimestampMicrosecondArray::from(vec![Some(0), None]));
        let years = civil_field(&values, CivilField::Year).unwrap();
        assert_eq!(years.value(0), 1970);
        assert!(years.is_null(1));
        let dates: ArrayRef = std::sync::Arc::new(Date32Array::from(vec![Some(-1), None]));
        let days = civil_field(&dates, CivilField::Day).unwrap();
        assert_eq!(days.value(0), 31);
        assert!(days.is_null(1));
        let text: ArrayRef =
            std::sync::Arc::new(datafusion::arrow::array::StringArray::from(vec![
                "2024-01-01",
            ]));
        assert!(civil_field(&text, CivilField::Year).is_none());
    }
}
