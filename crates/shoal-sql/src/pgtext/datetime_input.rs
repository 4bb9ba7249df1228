//! Input text of dates, times, timestamps (with and without time zone) and intervals. The
//! shapes bulk loads are made of (`YYYY-MM-DD`, `YYYY-MM-DD HH:MM:SS`) are read directly;
//! everything else (fractions, zones, month names, BC, special values such as `epoch` and
//! `infinity`) takes PostgreSQL's general reading in `datetime_fields`, and the values are
//! then checked against PostgreSQL's ranges (4714-11-24 BC to 5874897 AD for dates, to
//! 294276 AD for timestamps).

use chrono::{NaiveDate, NaiveTime};

use super::datetime_fields::{
    days_from_civil, decode, decode_time, DecodeError, Decoded, Fields, InputZone,
};
use super::{days_from_date, MICROS_PER_DAY, MICROS_PER_SECOND};
use crate::error::{code, SqlError, SqlResult};
use crate::timezone::TimeZone;

/// The first day PostgreSQL's dates and timestamps reach: 4714-11-24 BC, Julian day 0.
const FIRST_DAY: i64 = -2_440_588;
/// The day after the last date (5874897-12-31).
const DATE_END_DAY: i64 = 2_145_042_906;
/// The first microsecond no timestamp reaches. PostgreSQL's run to 294276 AD; Shoal counts
/// microseconds from 1970 in an i64 (whose maximum means `infinity`), which ends in January
/// 294247, so the last 29 years of PostgreSQL's range are refused as out of range.
const TIMESTAMP_END_MICROS: i64 = i64::MAX;

/// The storage value of the date `infinity` (and its negation for `-infinity`), as in
/// PostgreSQL.
pub const DATE_INFINITY: i32 = i32::MAX;

fn decode_error(e: DecodeError, type_name: &str, s: &str) -> SqlError {
    match e {
        DecodeError::Syntax => SqlError::new(
            code::INVALID_DATETIME_FORMAT,
            format!("invalid input syntax for type {type_name}: \"{s}\""),
        ),
        DecodeError::FieldOverflow => SqlError::new(
            code::DATETIME_FIELD_OVERFLOW,
            format!("date/time field value out of range: \"{s}\""),
        ),
        DecodeError::UnknownZone(zone) => SqlError::new(
            code::INVALID_PARAMETER_VALUE,
            format!("time zone \"{zone}\" not recognized"),
        ),
    }
}

fn out_of_range(what: &str, s: &str) -> SqlError {
    SqlError::new(
        code::DATETIME_FIELD_OVERFLOW,
        format!("{what} out of range: \"{s}\""),
    )
}

/// Parses a date; `today`, `tomorrow` and `yesterday` are days in UTC.
pub fn parse_date(s: &str) -> SqlResult<i32> {
    parse_date_at(s, &TimeZone::utc())
}

/// Parses a date; `today` and friends are days in `zone` (the session's).
pub fn parse_date_at(s: &str, zone: &TimeZone) -> SqlResult<i32> {
    if let Some(d) = plain_date(s.as_bytes()) {
        return Ok(days_from_date(d));
    }
    let fields = match decode(s, zone).map_err(|e| decode_error(e, "date", s))? {
        Decoded::Infinity => return Ok(DATE_INFINITY),
        Decoded::NegInfinity => return Ok(-DATE_INFINITY - 1),
        Decoded::Now => {
            let local = zone.utc_to_local(chrono::Utc::now().timestamp_micros());
            return Ok(local.div_euclid(MICROS_PER_DAY) as i32);
        }
        Decoded::Fields(fields) => fields,
    };
    let Some((year, month, day)) = fields.date else {
        return Err(decode_error(DecodeError::Syntax, "date", s));
    };
    let days = days_from_civil(year, month, day);
    if !(FIRST_DAY..DATE_END_DAY).contains(&days) {
        return Err(out_of_range("date", s));
    }
    Ok(days as i32)
}

/// Parses a timestamp (without time zone; a zone in the text is ignored, as in PostgreSQL).
/// Returns microseconds since the epoch, `i64::MAX` / `i64::MIN` for ±infinity.
pub fn parse_timestamp(s: &str) -> SqlResult<i64> {
    parse_timestamp_in(s, None, &TimeZone::utc())
}

/// Parses a timestamp; `now` and `today` are read on the wall clock of `zone`.
pub fn parse_timestamp_at(s: &str, zone: &TimeZone) -> SqlResult<i64> {
    parse_timestamp_in(s, None, zone)
}

/// Parses a timestamptz: an explicit offset or zone name in the text is honoured, otherwise
/// the time is read in `zone` (the session's). Returns UTC microseconds since the epoch.
pub fn parse_timestamptz(s: &str, zone: &TimeZone) -> SqlResult<i64> {
    parse_timestamp_in(s, Some(zone), zone)
}

fn parse_timestamp_in(
    s: &str,
    session_zone: Option<&TimeZone>,
    clock_zone: &TimeZone,
) -> SqlResult<i64> {
    let type_name = if session_zone.is_some() {
        "timestamp with time zone"
    } else {
        "timestamp"
    };
    if let Some(micros) = plain_timestamp(s.as_bytes()) {
        return Ok(match session_zone {
            Some(zone) => zone.local_to_utc(micros),
            None => micros,
        });
    }
    let fields = match decode(s, clock_zone).map_err(|e| decode_error(e, type_name, s))? {
        Decoded::Infinity => return Ok(i64::MAX),
        Decoded::NegInfinity => return Ok(i64::MIN),
        Decoded::Now => {
            let now = chrono::Utc::now().timestamp_micros();
            return Ok(match session_zone {
                Some(_) => now,
                None => clock_zone.utc_to_local(now),
            });
        }
        Decoded::Fields(fields) => fields,
    };
    let Some((year, month, day)) = fields.date else {
        return Err(decode_error(DecodeError::Syntax, type_name, s));
    };
    let local = i128::from(days_from_civil(year, month, day)) * i128::from(MICROS_PER_DAY)
        + i128::from(fields.time_micros.unwrap_or(0));
    let local = timestamp_in_range(local).ok_or_else(|| out_of_range("timestamp", s))?;
    let Some(session_zone) = session_zone else {
        return Ok(local);
    };
    let utc = match fields.zone {
        Some(InputZone::Offset(seconds_east)) => local - seconds_east as i64 * MICROS_PER_SECOND,
        Some(InputZone::Named(zone)) => zone.local_to_utc(local),
        None => session_zone.local_to_utc(local),
    };
    timestamp_in_range(i128::from(utc)).ok_or_else(|| out_of_range("timestamp", s))
}

fn timestamp_in_range(micros: i128) -> Option<i64> {
    let first = i128::from(FIRST_DAY) * i128::from(MICROS_PER_DAY);
    (first..i128::from(TIMESTAMP_END_MICROS))
        .contains(&micros)
        .then_some(micros as i64)
}

/// Parses a time of day (a date or zone in the text is ignored, as in PostgreSQL) into
/// microseconds since midnight, up to 24:00:00.
pub fn parse_time(s: &str, zone: &TimeZone) -> SqlResult<i64> {
    match decode_time(s, zone).map_err(|e| decode_error(e, "time without time zone", s))? {
        Decoded::Now => {
            let local = zone.utc_to_local(chrono::Utc::now().timestamp_micros());
            Ok(local.rem_euclid(MICROS_PER_DAY))
        }
        Decoded::Fields(Fields {
            time_micros: Some(micros),
            ..
        }) => Ok(micros),
        _ => Err(decode_error(
            DecodeError::Syntax,
            "time without time zone",
            s,
        )),
    }
}

fn digits(b: &[u8]) -> Option<u32> {
    b.iter().try_fold(0u32, |acc, d| {
        d.is_ascii_digit().then(|| acc * 10 + u32::from(d - b'0'))
    })
}

/// `YYYY-MM-DD`, the shape bulk loads are made of, without the general parser.
fn plain_date(b: &[u8]) -> Option<NaiveDate> {
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let year = digits(&b[0..4])? as i32;
    if year == 0 {
        return None;
    }
    NaiveDate::from_ymd_opt(year, digits(&b[5..7])?, digits(&b[8..10])?)
}

/// `YYYY-MM-DD HH:MM:SS` as microseconds, likewise. Anything else (fractions, zones, other
/// layouts) returns None and takes the general path.
fn plain_timestamp(b: &[u8]) -> Option<i64> {
    if b.len() != 19 || !(b[10] == b' ' || b[10] == b'T') || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let date = plain_date(&b[..10])?;
    let time = NaiveTime::from_hms_opt(
        digits(&b[11..13])?,
        digits(&b[14..16])?,
        digits(&b[17..19])?,
    )?;
    Some(date.and_time(time).and_utc().timestamp_micros())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::pgtext::{format_interval, format_timestamp, parse_interval};

    #[test]
    fn timestamps_and_intervals_round_trip_text() {
        let t = parse_timestamp("2024-02-29 13:14:15.25").unwrap();
        let mut s = String::new();
        format_timestamp(t, None, &mut s);
        assert_eq!(s, "2024-02-29 13:14:15.25");
        let utc = TimeZone::utc();
        let tz = parse_timestamptz("2024-01-01 02:00:00+02", &utc).unwrap();
        let mut s = String::new();
        format_timestamp(tz, Some(&utc), &mut s);
        assert_eq!(s, "2024-01-01 00:00:00+00");
        let kolkata = TimeZone::from_setting("Asia/Kolkata").unwrap();
        let tz = parse_timestamptz("2024-01-01 12:00:00", &kolkata).unwrap();
        let mut s = String::new();
        format_timestamp(tz, Some(&kolkata), &mut s);
        assert_eq!(s, "2024-01-01 12:00:00+05:30");
        let i = parse_interval("1 year 2 mons 3 days 04:05:06").unwrap();
        let mut s = String::new();
        format_interval(&i, &mut s);
        assert_eq!(s, "1 year 2 mons 3 days 04:05:06");
        assert!(parse_date("2020-13-01").unwrap_err().code == code::DATETIME_FIELD_OVERFLOW);
    }
}
