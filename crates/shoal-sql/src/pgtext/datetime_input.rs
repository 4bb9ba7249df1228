//! Input text of dates, timestamps (with and without time zone) and intervals. The shapes bulk
//! loads are made of (`YYYY-MM-DD`, `YYYY-MM-DD HH:MM:SS`) are read without chrono's format
//! parser; everything else (fractions, trailing zones, special values such as `epoch` and
//! `infinity`, interval unit words) takes the general path.

use chrono::{NaiveDate, NaiveDateTime, NaiveTime};
use shoal_storage::types::Interval;

use super::{days_from_date, MICROS_PER_SECOND};
use crate::error::{code, SqlError, SqlResult};
use crate::timezone::TimeZone;

fn date_out_of_range(s: &str) -> SqlError {
    SqlError::new(
        code::DATETIME_FIELD_OVERFLOW,
        format!("date/time field value out of range: \"{s}\""),
    )
}

pub fn parse_date(s: &str) -> SqlResult<i32> {
    if let Some(d) = plain_date(s.as_bytes()) {
        return Ok(days_from_date(d));
    }
    let t = s.trim();
    match t.to_ascii_lowercase().as_str() {
        "epoch" => return Ok(0),
        "today" => return Ok(days_from_date(chrono::Utc::now().date_naive())),
        _ => {}
    }
    let date_part = t.split([' ', 'T']).next().unwrap_or(t);
    match NaiveDate::parse_from_str(date_part, "%Y-%m-%d") {
        Ok(d) => Ok(days_from_date(d)),
        Err(_) => {
            let parts: Vec<&str> = date_part.split('-').collect();
            if parts.len() == 3
                && parts
                    .iter()
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            {
                Err(date_out_of_range(s))
            } else {
                Err(SqlError::new(
                    code::INVALID_DATETIME_FORMAT,
                    format!("invalid input syntax for type date: \"{s}\""),
                ))
            }
        }
    }
}

/// Parses a timestamp (without time zone; a zone in the text is ignored, as in PostgreSQL).
/// Returns microseconds since the epoch.
pub fn parse_timestamp(s: &str) -> SqlResult<i64> {
    parse_timestamp_in(s, None)
}

/// Parses a timestamptz: an explicit offset or zone name in the text is honoured, otherwise
/// the time is read in `zone` (the session's). Returns UTC microseconds since the epoch.
pub fn parse_timestamptz(s: &str, zone: &TimeZone) -> SqlResult<i64> {
    parse_timestamp_in(s, Some(zone))
}

fn parse_timestamp_in(s: &str, session_zone: Option<&TimeZone>) -> SqlResult<i64> {
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
    let t = s.trim();
    match t.to_ascii_lowercase().as_str() {
        "epoch" => return Ok(0),
        "now" => return Ok(chrono::Utc::now().timestamp_micros()),
        "infinity" => return Ok(i64::MAX),
        "-infinity" => return Ok(i64::MIN),
        _ => {}
    }
    let bad = || {
        SqlError::new(
            code::INVALID_DATETIME_FORMAT,
            format!("invalid input syntax for type {type_name}: \"{s}\""),
        )
    };
    // Split off a trailing zone: "Z", "+hh", "+hh:mm", "+hhmm", " UTC", " Europe/Berlin".
    let (body, input_zone) = split_zone(t).ok_or_else(bad)?;
    let body = body.trim();
    let naive = if body.len() <= 10 && !body.contains(':') {
        let d = NaiveDate::parse_from_str(body, "%Y-%m-%d").map_err(|_| bad())?;
        d.and_time(NaiveTime::MIN)
    } else {
        let normalized = body.replacen('T', " ", 1);
        NaiveDateTime::parse_from_str(&normalized, "%Y-%m-%d %H:%M:%S%.f")
            .or_else(|_| NaiveDateTime::parse_from_str(&normalized, "%Y-%m-%d %H:%M"))
            .map_err(|_| {
                if normalized.len() >= 10
                    && NaiveDate::parse_from_str(&normalized[..10], "%Y-%m-%d").is_err()
                    && normalized[..10].split('-').count() == 3
                {
                    date_out_of_range(s)
                } else {
                    bad()
                }
            })?
    };
    let micros = naive.and_utc().timestamp_micros();
    let Some(session_zone) = session_zone else {
        return Ok(micros);
    };
    Ok(match input_zone {
        InputZone::Offset(seconds_east) => micros - seconds_east as i64 * MICROS_PER_SECOND,
        InputZone::Named(zone) => zone.local_to_utc(micros),
        InputZone::Session => session_zone.local_to_utc(micros),
    })
}

/// The zone written at the end of a timestamp's text, if any.
enum InputZone {
    /// Seconds east of Greenwich.
    Offset(i32),
    Named(TimeZone),
    Session,
}

fn digits(b: &[u8]) -> Option<u32> {
    b.iter().try_fold(0u32, |acc, d| {
        d.is_ascii_digit().then(|| acc * 10 + u32::from(d - b'0'))
    })
}

/// `YYYY-MM-DD`, the shape bulk loads are made of, without chrono's format parser.
fn plain_date(b: &[u8]) -> Option<NaiveDate> {
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    NaiveDate::from_ymd_opt(
        digits(&b[0..4])? as i32,
        digits(&b[5..7])?,
        digits(&b[8..10])?,
    )
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

fn split_zone(t: &str) -> Option<(&str, InputZone)> {
    if let Some(b) = t.strip_suffix('Z').or_else(|| t.strip_suffix('z')) {
        return Some((b, InputZone::Offset(0)));
    }
    for suffix in [" UTC", " utc", " GMT", "+00", "-00"] {
        if let Some(b) = t.strip_suffix(suffix) {
            if suffix.starts_with(' ') || b.contains(':') {
                return Some((b, InputZone::Offset(0)));
            }
        }
    }
    // A zone after the time: "2024-03-31 02:30 Europe/Berlin", "12:00 PST" (abbreviations
    // first, as PostgreSQL reads them).
    if let Some((body, name)) = t.rsplit_once(' ') {
        if name.starts_with(|c: char| c.is_ascii_alphabetic()) && body.contains(':') {
            let zone = TimeZone::from_abbreviation(name).or_else(|| TimeZone::from_name(name))?;
            return Some((body, InputZone::Named(zone)));
        }
    }
    // A sign after the time part (position > 10 so a date's dashes are not taken for it).
    if let Some(pos) = t.rfind(['+', '-']) {
        if pos > 10 && t[..pos].contains(':') {
            let zone = &t[pos + 1..];
            let sign = if &t[pos..pos + 1] == "-" { -1 } else { 1 };
            let digits: String = zone.chars().filter(|c| *c != ':').collect();
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let (h, m, sec) = match digits.len() {
                1 | 2 => (digits.parse::<i32>().ok()?, 0, 0),
                4 => (
                    digits[..2].parse::<i32>().ok()?,
                    digits[2..].parse::<i32>().ok()?,
                    0,
                ),
                6 => (
                    digits[..2].parse::<i32>().ok()?,
                    digits[2..4].parse::<i32>().ok()?,
                    digits[4..].parse::<i32>().ok()?,
                ),
                _ => return None,
            };
            let offset = sign * (h * 3600 + m * 60 + sec);
            return Some((&t[..pos], InputZone::Offset(offset)));
        }
    }
    Some((t, InputZone::Session))
}

/// Parses PostgreSQL interval input: unit words ("1 year 2 mons 3 days 04:05:06"), a bare
/// hh:mm:ss, "ago", and a number with no unit meaning seconds.
pub fn parse_interval(s: &str) -> SqlResult<Interval> {
    let bad = || {
        SqlError::new(
            code::INVALID_DATETIME_FORMAT,
            format!("invalid input syntax for type interval: \"{s}\""),
        )
    };
    let mut out = Interval::default();
    let lower = s.trim().to_ascii_lowercase();
    let mut tokens: Vec<&str> = lower.split_whitespace().collect();
    let ago = tokens.last() == Some(&"ago");
    if ago {
        tokens.pop();
    }
    if tokens.is_empty() {
        return Err(bad());
    }
    let mut i = 0;
    while i < tokens.len() {
        let tok = tokens[i].trim_start_matches('@');
        if tok.is_empty() {
            i += 1;
            continue;
        }
        if tok.contains(':') {
            let negative = tok.starts_with('-');
            let parts: Vec<&str> = tok.trim_start_matches(['-', '+']).split(':').collect();
            let h: i64 = parts.first().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
            let m: i64 = parts.get(1).and_then(|p| p.parse().ok()).ok_or_else(bad)?;
            let sec: f64 = parts
                .get(2)
                .map(|p| p.parse().map_err(|_| bad()))
                .transpose()?
                .unwrap_or(0.0);
            let micros = h * 3600 * MICROS_PER_SECOND
                + m * 60 * MICROS_PER_SECOND
                + (sec * 1e6).round() as i64;
            out.micros += if negative { -micros } else { micros };
            i += 1;
            continue;
        }
        let (num_str, unit_inline) = split_number_unit(tok);
        let n: f64 = num_str.parse().map_err(|_| bad())?;
        let unit = if !unit_inline.is_empty() {
            unit_inline.to_string()
        } else if i + 1 < tokens.len()
            && !tokens[i + 1].starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '+')
        {
            i += 1;
            tokens[i].to_string()
        } else {
            "second".to_string()
        };
        add_interval_unit(&mut out, n, unit.trim_end_matches(','), bad)?;
        i += 1;
    }
    if ago {
        out = Interval {
            months: -out.months,
            days: -out.days,
            micros: -out.micros,
        };
    }
    Ok(out)
}

fn split_number_unit(tok: &str) -> (&str, &str) {
    let end = tok
        .char_indices()
        .find(|(i, c)| !(c.is_ascii_digit() || *c == '.' || ((*c == '-' || *c == '+') && *i == 0)))
        .map(|(i, _)| i)
        .unwrap_or(tok.len());
    (&tok[..end], &tok[end..])
}

fn add_interval_unit(
    out: &mut Interval,
    n: f64,
    unit: &str,
    bad: impl Fn() -> SqlError,
) -> SqlResult<()> {
    let micros = |secs: f64| (secs * 1e6).round() as i64;
    match unit {
        "y" | "yr" | "yrs" | "year" | "years" => out.months += (n * 12.0).round() as i32,
        "mon" | "mons" | "month" | "months" => {
            out.months += n.trunc() as i32;
            out.days += (n.fract() * 30.0).round() as i32;
        }
        "w" | "week" | "weeks" => out.days += (n * 7.0).round() as i32,
        "d" | "day" | "days" => {
            out.days += n.trunc() as i32;
            out.micros += micros(n.fract() * 86400.0);
        }
        "h" | "hr" | "hrs" | "hour" | "hours" => out.micros += micros(n * 3600.0),
        "m" | "min" | "mins" | "minute" | "minutes" => out.micros += micros(n * 60.0),
        "s" | "sec" | "secs" | "second" | "seconds" => out.micros += micros(n),
        "ms" | "millisecond" | "milliseconds" => out.micros += micros(n / 1000.0),
        "us" | "microsecond" | "microseconds" => out.micros += n.round() as i64,
        "decade" | "decades" => out.months += (n * 120.0).round() as i32,
        "century" | "centuries" => out.months += (n * 1200.0).round() as i32,
        _ => return Err(bad()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::pgtext::{format_interval, format_timestamp};

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
