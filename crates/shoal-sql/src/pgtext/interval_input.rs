//! Interval input text, read as PostgreSQL's DecodeInterval reads it in the default
//! IntervalStyle: numbers with unit words (`1 year 2 mons`, `1.5 weeks`), `hh:mm[:ss]` times
//! with their own sign (`-1 +02:03` is minus a day plus two hours three minutes), a bare
//! number meaning seconds (or days, before a time), SQL's `years-months` (`1-2`), the
//! `@` prefix and a trailing `ago`, and ISO 8601 with designators (`P1Y2M3DT4H`). Fractions
//! spill down into the next smaller field as PostgreSQL's do: a month is 30 days and a day 24
//! hours (`1.5 weeks` is 10 days 12:00:00).

use shoal_storage::types::Interval;

use crate::error::{code, SqlError, SqlResult};

const MICROS_PER_SECOND: i128 = 1_000_000;
const SECONDS_PER_DAY: f64 = 86_400.0;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Unit {
    Microsecond,
    Millisecond,
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Year,
    Decade,
    Century,
    Millennium,
}

fn unit_of(word: &str) -> Option<Unit> {
    Some(match word {
        "us" | "usec" | "usecs" | "microsecon" | "microsecond" | "microseconds" => {
            Unit::Microsecond
        }
        "ms" | "msec" | "msecs" | "millisecon" | "millisecond" | "milliseconds" => {
            Unit::Millisecond
        }
        "s" | "sec" | "secs" | "second" | "seconds" => Unit::Second,
        "m" | "min" | "mins" | "minute" | "minutes" => Unit::Minute,
        "h" | "hr" | "hrs" | "hour" | "hours" => Unit::Hour,
        "d" | "day" | "days" => Unit::Day,
        "w" | "week" | "weeks" => Unit::Week,
        "mon" | "mons" | "month" | "months" => Unit::Month,
        "y" | "yr" | "yrs" | "year" | "years" => Unit::Year,
        "dec" | "decs" | "decade" | "decades" => Unit::Decade,
        "c" | "cent" | "century" | "centuries" => Unit::Century,
        "mil" | "mils" | "millennia" | "millennium" => Unit::Millennium,
        _ => return None,
    })
}

/// One whitespace-separated piece of the text.
#[derive(Debug)]
enum Token<'a> {
    /// `[+-]hh:mm[:ss[.f]]`
    Time(&'a str),
    /// `[+-]digits[.digits]` or `years-months`.
    Number(&'a str),
    Unit(Unit),
    Ago,
}

/// The sums as PostgreSQL keeps them while reading (wide, so that overflow is caught once at
/// the end).
#[derive(Default)]
struct Sums {
    months: i128,
    days: i128,
    micros: i128,
}

enum Failure {
    Syntax,
    Overflow,
}

/// Parses PostgreSQL interval input.
pub fn parse_interval(s: &str) -> SqlResult<Interval> {
    read(s).map_err(|failure| match failure {
        Failure::Syntax => SqlError::new(
            code::INVALID_DATETIME_FORMAT,
            format!("invalid input syntax for type interval: \"{s}\""),
        ),
        Failure::Overflow => SqlError::new(
            code::INTERVAL_FIELD_OVERFLOW,
            format!("interval field value out of range: \"{s}\""),
        ),
    })
}

fn read(s: &str) -> Result<Interval, Failure> {
    // PostgreSQL reads the ISO 8601 form exactly: an upper-case P and designators, no spaces.
    if let Some(designators) = s.strip_prefix('P') {
        return read_iso8601(designators).and_then(into_interval);
    }
    let lower = s.to_ascii_lowercase();
    let tokens = tokenize(&lower)?;
    if tokens.is_empty() {
        return Err(Failure::Syntax);
    }
    let mut sums = Sums::default();
    let mut ago = false;
    // Read right to left, as PostgreSQL does, so a number's unit is known when it is reached
    // (and a unitless number before a time counts days).
    let mut unit: Option<Unit> = None;
    for token in tokens.iter().rev() {
        match token {
            Token::Time(text) => {
                sums.micros += time_micros(text)?;
                unit = Some(Unit::Day);
            }
            Token::Number(text) => add_number(&mut sums, text, unit.unwrap_or(Unit::Second))?,
            Token::Unit(u) => unit = Some(*u),
            Token::Ago => ago = true,
        }
    }
    if ago {
        sums = Sums {
            months: -sums.months,
            days: -sums.days,
            micros: -sums.micros,
        };
    }
    into_interval(sums)
}

/// ISO 8601's format with designators, after its `P`: `1Y2M3W4DT5H6M7.5S` (each number may be
/// signed and have a fraction, which spills into smaller fields as in the other forms).
fn read_iso8601(text: &str) -> Result<Sums, Failure> {
    let mut sums = Sums::default();
    let mut in_time = false;
    let mut rest = text;
    if rest.is_empty() {
        return Err(Failure::Syntax);
    }
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('T') {
            if in_time {
                return Err(Failure::Syntax);
            }
            in_time = true;
            rest = after;
            continue;
        }
        let number_len = rest
            .char_indices()
            .find(|&(i, c)| !(c.is_ascii_digit() || c == '.' || (i == 0 && (c == '-' || c == '+'))))
            .map(|(i, _)| i)
            .ok_or(Failure::Syntax)?;
        let (number, after) = rest.split_at(number_len);
        let mut designator = after.chars();
        let unit = match (designator.next(), in_time) {
            (Some('Y'), false) => Unit::Year,
            (Some('M'), false) => Unit::Month,
            (Some('W'), false) => Unit::Week,
            (Some('D'), false) => Unit::Day,
            (Some('H'), true) => Unit::Hour,
            (Some('M'), true) => Unit::Minute,
            (Some('S'), true) => Unit::Second,
            _ => return Err(Failure::Syntax),
        };
        if number.trim_start_matches(['-', '+']).is_empty() {
            return Err(Failure::Syntax);
        }
        add_number(&mut sums, number, unit)?;
        rest = designator.as_str();
    }
    Ok(sums)
}

fn into_interval(sums: Sums) -> Result<Interval, Failure> {
    Ok(Interval {
        months: i32::try_from(sums.months).map_err(|_| Failure::Overflow)?,
        days: i32::try_from(sums.days).map_err(|_| Failure::Overflow)?,
        micros: i64::try_from(sums.micros).map_err(|_| Failure::Overflow)?,
    })
}

fn tokenize(text: &str) -> Result<Vec<Token<'_>>, Failure> {
    let mut tokens = Vec::new();
    let pieces: Vec<&str> = text.split_whitespace().collect();
    for (i, piece) in pieces.iter().enumerate() {
        let piece = piece.strip_prefix('@').unwrap_or(piece);
        if piece.is_empty() {
            continue;
        }
        if piece == "ago" {
            if i + 1 != pieces.len() {
                return Err(Failure::Syntax);
            }
            tokens.push(Token::Ago);
        } else if piece.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '-' | '+' | '.')) {
            if piece.contains(':') {
                tokens.push(Token::Time(piece));
                continue;
            }
            // A unit written against its number: `10d`, `1hour`.
            let end = piece
                .char_indices()
                .find(|&(j, c)| c.is_ascii_alphabetic() && j > 0)
                .map_or(piece.len(), |(j, _)| j);
            tokens.push(Token::Number(&piece[..end]));
            if end < piece.len() {
                tokens.push(Token::Unit(unit_of(&piece[end..]).ok_or(Failure::Syntax)?));
            }
        } else {
            tokens.push(Token::Unit(unit_of(piece).ok_or(Failure::Syntax)?));
        }
    }
    Ok(tokens)
}

/// `[+-]hh:mm[:ss[.f]]` (or `mm:ss.f`) in microseconds, with its sign.
fn time_micros(text: &str) -> Result<i128, Failure> {
    let (negative, body) = match text.as_bytes()[0] {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let parts: Vec<&str> = body.split(':').collect();
    let whole = |p: &str| -> Result<i128, Failure> {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Failure::Syntax);
        }
        p.parse().map_err(|_| Failure::Overflow)
    };
    let seconds = |p: &str| -> Result<i128, Failure> {
        let (int, frac) = p.split_once('.').unwrap_or((p, ""));
        Ok(whole(int)? * MICROS_PER_SECOND + fraction_micros(frac)?)
    };
    let micros = match parts.as_slice() {
        [m, s] if s.contains('.') => whole(m)? * 60 * MICROS_PER_SECOND + seconds(s)?,
        [h, m] => (whole(h)? * 60 + whole(m)?) * 60 * MICROS_PER_SECOND,
        [h, m, s] => (whole(h)? * 60 + whole(m)?) * 60 * MICROS_PER_SECOND + seconds(s)?,
        _ => return Err(Failure::Syntax),
    };
    Ok(if negative { -micros } else { micros })
}

/// The digits after a decimal point as microseconds, rounded.
fn fraction_micros(digits: &str) -> Result<i128, Failure> {
    if digits.is_empty() {
        return Ok(0);
    }
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Failure::Syntax);
    }
    let value: f64 = format!("0.{digits}").parse().map_err(|_| Failure::Syntax)?;
    Ok((value * 1e6).round() as i128)
}

/// Adds `text` (a signed number, perhaps with a fraction, or `years-months`) in `unit`. The
/// fraction of a unit spills into the smaller ones the way PostgreSQL's AdjustFractDays and
/// AdjustFractSeconds do it.
fn add_number(sums: &mut Sums, text: &str, unit: Unit) -> Result<(), Failure> {
    let negative = text.starts_with('-');
    let body = text.trim_start_matches(['-', '+']);
    if let Some((years, months)) = body.split_once('-') {
        let total = parse_whole(years)? * 12 + parse_whole(months)?;
        sums.months += if negative { -total } else { total };
        return Ok(());
    }
    let (int_text, frac_text) = body.split_once('.').unwrap_or((body, ""));
    let whole = if int_text.is_empty() && !frac_text.is_empty() {
        0
    } else {
        parse_whole(int_text)?
    };
    if !frac_text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Failure::Syntax);
    }
    let frac: f64 = if frac_text.is_empty() {
        0.0
    } else {
        format!("0.{frac_text}")
            .parse()
            .map_err(|_| Failure::Syntax)?
    };
    let (whole, frac) = if negative {
        (-whole, -frac)
    } else {
        (whole, frac)
    };
    let seconds = |secs: f64| (secs * 1e6).round() as i128;
    match unit {
        Unit::Microsecond => sums.micros += whole + (frac.round() as i128),
        Unit::Millisecond => sums.micros += whole * 1000 + (frac * 1000.0).round() as i128,
        Unit::Second => sums.micros += whole * MICROS_PER_SECOND + seconds(frac),
        Unit::Minute => sums.micros += whole * 60 * MICROS_PER_SECOND + seconds(frac * 60.0),
        Unit::Hour => sums.micros += whole * 3600 * MICROS_PER_SECOND + seconds(frac * 3600.0),
        Unit::Day => {
            sums.days += whole;
            sums.micros += seconds(frac * SECONDS_PER_DAY);
        }
        Unit::Week => {
            sums.days += whole * 7;
            spill_days(sums, frac * 7.0);
        }
        Unit::Month => {
            sums.months += whole;
            spill_days(sums, frac * 30.0);
        }
        Unit::Year => sums.months += whole * 12 + (frac * 12.0).round() as i128,
        Unit::Decade => sums.months += whole * 120 + (frac * 120.0).round() as i128,
        Unit::Century => sums.months += whole * 1200 + (frac * 1200.0).round() as i128,
        Unit::Millennium => sums.months += whole * 12_000 + (frac * 12_000.0).round() as i128,
    }
    Ok(())
}

/// Whole days of `days`, the rest as time.
fn spill_days(sums: &mut Sums, days: f64) {
    let whole = days.trunc();
    sums.days += whole as i128;
    sums.micros += ((days - whole) * SECONDS_PER_DAY * 1e6).round() as i128;
}

fn parse_whole(digits: &str) -> Result<i128, Failure> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Failure::Syntax);
    }
    // More digits than any field holds overflow, as in PostgreSQL.
    digits
        .parse::<i64>()
        .map(i128::from)
        .map_err(|_| Failure::Overflow)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(text: &str) -> (i32, i32, i64) {
        let i = parse_interval(text).unwrap();
        (i.months, i.days, i.micros)
    }

    #[test]
    fn intervals_read_as_postgresql_reads_them() {
        let hour = 3_600_000_000;
        assert_eq!(iv("1.5 weeks"), (0, 10, 12 * hour));
        assert_eq!(iv("-1 +02:03"), (0, -1, 2 * hour + 3 * 60_000_000));
        assert_eq!(iv("@ 1 day 2 hours ago"), (0, -1, -2 * hour));
        assert_eq!(iv("1.5 months"), (1, 15, 0));
        assert_eq!(iv("1-2"), (14, 0, 0));
        assert_eq!(iv("10d"), (0, 10, 0));
        assert_eq!(iv("P1Y2M3DT4H5M6.5S"), (14, 3, 4 * hour + 306_500_000));
        assert_eq!(iv("P-1Y2M"), (-10, 0, 0));
        assert_eq!(iv("PT"), (0, 0, 0));
        for bad in ["P", "p1y", "P1H", " P1Y", "P1YT1HT"] {
            assert!(parse_interval(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_interval("2147483648 days").unwrap_err().code,
            code::INTERVAL_FIELD_OVERFLOW
        );
    }
}
