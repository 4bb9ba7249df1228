//! The session time zone (PostgreSQL's `TimeZone` setting): reading `SET TIME ZONE` values
//! with PostgreSQL's rules, and moving instants between UTC and the zone's wall clock. A
//! timestamptz is stored and computed on as UTC microseconds; the zone only matters where
//! PostgreSQL turns it into local time or back: text output and input, casts to and from
//! timestamp and date, and the date/time fields that extract and date_trunc work on.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use chrono::{DateTime, LocalResult, NaiveDateTime, Offset, TimeZone as _};
use chrono_tz::Tz;

const MICROS_PER_SECOND: i64 = 1_000_000;
const SECONDS_PER_HOUR: i32 = 3600;
/// PostgreSQL refuses offsets beyond 15 hours (`TZDISP_LIMIT` is 15:59:59).
const OFFSET_SECONDS_MAX: i32 = 15 * 3600 + 59 * 60 + 59;

/// How a zone maps UTC to local time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Rules {
    /// A fixed offset, in seconds east of Greenwich (ISO sign: +02 is ahead of UTC).
    Fixed(i32),
    /// A zone of the IANA database, with its history of offsets and daylight-saving rules.
    Named(Tz),
    /// A POSIX specification with daylight-saving time (`EST5EDT,M3.2.0,M11.1.0`): the same
    /// rules every year.
    Posix(PosixRules),
}

/// Standard and daylight offsets (seconds east) and the yearly days and times DST starts
/// (on the standard clock) and ends (on the daylight clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct PosixRules {
    std_east: i32,
    dst_east: i32,
    start: PosixDate,
    start_seconds: i32,
    end: PosixDate,
    end_seconds: i32,
}

/// A day of the year in a POSIX rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum PosixDate {
    /// `Jn`: day 1..=365, February 29 never counted.
    Julian(u16),
    /// `n`: day 0..=365, counting February 29 in leap years.
    ZeroBased(u16),
    /// `Mm.w.d`: weekday d (0 = Sunday) of week w (1..=5, 5 = the last) of month m.
    MonthWeekDay { month: u8, week: u8, weekday: u8 },
}

/// A session time zone: the name SHOW prints and the rules behind it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TimeZone {
    name: Arc<str>,
    rules: Rules,
}

impl Default for TimeZone {
    fn default() -> Self {
        TimeZone::utc()
    }
}

impl TimeZone {
    pub fn utc() -> TimeZone {
        static UTC: OnceLock<Arc<str>> = OnceLock::new();
        TimeZone {
            name: UTC.get_or_init(|| Arc::from("UTC")).clone(),
            rules: Rules::Fixed(0),
        }
    }

    /// The value as SHOW TimeZone prints it (the IANA name in its canonical case, or a POSIX
    /// specification such as `<+02>-02` for an offset given as a number or an interval).
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn is_utc(&self) -> bool {
        self.rules == Rules::Fixed(0)
    }

    /// Reads a `SET TIME ZONE` value as PostgreSQL's check_timezone does: `INTERVAL '...'`
    /// and plain numbers are hours east of Greenwich (ISO sign); anything else is an IANA zone
    /// name (any case) or a POSIX specification (`UTC+3`, `<+02>-02`, `+02:00`), whose offset
    /// counts hours *west* of Greenwich. None when it is none of these.
    pub fn from_setting(value: &str) -> Option<TimeZone> {
        let v = value.trim();
        if v.len() >= 8 && v[..8].eq_ignore_ascii_case("interval") {
            return interval_offset(&v[8..]).map(TimeZone::fixed_iso);
        }
        if let Ok(hours) = v.parse::<f64>() {
            let seconds = (hours * SECONDS_PER_HOUR as f64).round();
            if !hours.is_finite() || seconds.abs() > OFFSET_SECONDS_MAX as f64 {
                return None;
            }
            return Some(TimeZone::fixed_iso(seconds as i32));
        }
        TimeZone::from_zone_text(v)
    }

    /// A zone as `AT TIME ZONE` reads it: an IANA name (any case) or a POSIX specification,
    /// whose offset (even a bare number) counts hours west of Greenwich.
    pub fn from_zone_text(v: &str) -> Option<TimeZone> {
        TimeZone::from_name(v).or_else(|| {
            let rules = match posix_rules(v)? {
                (seconds_west, None) => Rules::Fixed(-seconds_west),
                (_, Some(rules)) => Rules::Posix(rules),
            };
            Some(TimeZone {
                name: Arc::from(v.to_uppercase()),
                rules,
            })
        })
    }

    /// A zone abbreviation of PostgreSQL's default set (`PST`, `CEST`), as a fixed offset: what
    /// timestamptz input and AT TIME ZONE read before IANA names (SET TIME ZONE does not).
    pub fn from_abbreviation(abbreviation: &str) -> Option<TimeZone> {
        let seconds_east = crate::timezone_abbreviations::offset_of(abbreviation)?;
        Some(TimeZone {
            name: Arc::from(abbreviation.to_ascii_uppercase()),
            rules: Rules::Fixed(seconds_east),
        })
    }

    /// The zone of `AT TIME ZONE text`: an abbreviation, an IANA name or a POSIX specification.
    pub fn from_at_time_zone_text(v: &str) -> Option<TimeZone> {
        TimeZone::from_abbreviation(v).or_else(|| TimeZone::from_zone_text(v))
    }

    /// A zone named in timestamptz input or in AT TIME ZONE: an IANA name, in any case.
    pub fn from_name(name: &str) -> Option<TimeZone> {
        let tz = named_zone(name)?;
        Some(TimeZone {
            name: Arc::from(tz.name()),
            rules: Rules::Named(tz),
        })
    }

    /// A fixed offset east of Greenwich, named as PostgreSQL's pg_tzset_offset names it.
    pub fn fixed_iso(seconds_east: i32) -> TimeZone {
        let mut digits = String::new();
        push_offset_digits(seconds_east.unsigned_abs(), &mut digits);
        let name = if seconds_east >= 0 {
            format!("<+{digits}>-{digits}")
        } else {
            format!("<-{digits}>+{digits}")
        };
        TimeZone {
            name: Arc::from(name),
            rules: Rules::Fixed(seconds_east),
        }
    }

    /// The offset from UTC, in seconds east, at an instant (UTC microseconds).
    pub fn offset_at_utc(&self, utc_micros: i64) -> i32 {
        match self.rules {
            Rules::Fixed(seconds) => seconds,
            Rules::Posix(rules) => rules.offset_at_utc(utc_micros.div_euclid(MICROS_PER_SECOND)),
            Rules::Named(tz) => match DateTime::from_timestamp_micros(utc_micros) {
                Some(t) => tz
                    .offset_from_utc_datetime(&t.naive_utc())
                    .fix()
                    .local_minus_utc(),
                None => 0,
            },
        }
    }

    /// The wall-clock time (as microseconds of a timestamp without time zone) at an instant.
    pub fn utc_to_local(&self, utc_micros: i64) -> i64 {
        if is_infinite(utc_micros) {
            return utc_micros;
        }
        utc_micros.saturating_add(self.offset_at_utc(utc_micros) as i64 * MICROS_PER_SECOND)
    }

    /// The instant a wall-clock time stands for. A time that occurs twice (when clocks go
    /// back) or not at all (when they go forward) resolves as PostgreSQL resolves it: to the
    /// later of the two candidate instants, which for a skipped time means reading it with the
    /// offset in force before the change.
    pub fn local_to_utc(&self, local_micros: i64) -> i64 {
        if is_infinite(local_micros) {
            return local_micros;
        }
        let tz = match self.rules {
            Rules::Fixed(seconds) => {
                return local_micros.saturating_sub(seconds as i64 * MICROS_PER_SECOND)
            }
            Rules::Posix(rules) => return self.posix_local_to_utc(rules, local_micros),
            Rules::Named(tz) => tz,
        };
        let Some(naive) = DateTime::from_timestamp_micros(local_micros).map(|t| t.naive_utc())
        else {
            return local_micros;
        };
        let with = |seconds: i32| local_micros - seconds as i64 * MICROS_PER_SECOND;
        match tz.offset_from_local_datetime(&naive) {
            LocalResult::Single(o) => with(o.fix().local_minus_utc()),
            LocalResult::Ambiguous(a, b) => {
                with(a.fix().local_minus_utc()).max(with(b.fix().local_minus_utc()))
            }
            LocalResult::None => {
                // In a gap: the offsets a day either side are those before and after it.
                const DAY_MICROS: i64 = 86_400 * MICROS_PER_SECOND;
                let before = self.offset_at_utc(local_micros - DAY_MICROS);
                let after = self.offset_at_utc(local_micros + DAY_MICROS);
                with(before).max(with(after))
            }
        }
    }

    /// `local_to_utc` for POSIX rules: of the instants the wall-clock time can stand for (with
    /// the standard or the daylight offset), those whose offset is the one used; the later if
    /// both (clocks went back), and for a skipped time the later reading of the offsets before
    /// and after the change, as for IANA zones.
    fn posix_local_to_utc(&self, rules: PosixRules, local_micros: i64) -> i64 {
        let with = |seconds: i32| local_micros - seconds as i64 * MICROS_PER_SECOND;
        let valid: Vec<i64> = [rules.std_east, rules.dst_east]
            .into_iter()
            .map(with)
            .filter(|&utc| {
                rules.offset_at_utc(utc.div_euclid(MICROS_PER_SECOND))
                    == ((local_micros - utc) / MICROS_PER_SECOND) as i32
            })
            .collect();
        match valid.iter().max() {
            Some(&utc) => utc,
            None => {
                const DAY_MICROS: i64 = 86_400 * MICROS_PER_SECOND;
                let before = self.offset_at_utc(local_micros - DAY_MICROS);
                let after = self.offset_at_utc(local_micros + DAY_MICROS);
                with(before).max(with(after))
            }
        }
    }

    /// The instant of a wall-clock time given as a chrono value (for input parsing).
    pub fn naive_to_utc(&self, naive: NaiveDateTime) -> i64 {
        self.local_to_utc(naive.and_utc().timestamp_micros())
    }
}

/// The session's current zone, shared with the functions that show or read local time while
/// a statement runs (they hold a handle, so a plan prepared earlier uses the zone of the
/// moment it runs). Handles compare equal only when they share the same session's zone.
#[derive(Debug, Clone, Default)]
pub struct SessionZone(Arc<parking_lot::Mutex<TimeZone>>);

impl SessionZone {
    pub fn get(&self) -> TimeZone {
        self.0.lock().clone()
    }

    pub fn set(&self, zone: TimeZone) {
        *self.0.lock() = zone;
    }
}

impl PartialEq for SessionZone {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for SessionZone {}

impl std::hash::Hash for SessionZone {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::ptr::hash(Arc::as_ptr(&self.0), state);
    }
}

fn is_infinite(micros: i64) -> bool {
    micros == i64::MAX || micros == i64::MIN
}

/// Appends a UTC offset as PostgreSQL's timestamptz output writes it: `+01`, `+05:30`,
/// `-03:30`, `+00:53:28`.
pub fn push_offset(seconds_east: i32, out: &mut String) {
    out.push(if seconds_east < 0 { '-' } else { '+' });
    push_offset_digits(seconds_east.unsigned_abs(), out);
}

fn push_offset_digits(seconds: u32, out: &mut String) {
    use std::fmt::Write;
    let (h, m, s) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    write!(out, "{h:02}").expect("writing to a String cannot fail");
    if m != 0 || s != 0 {
        write!(out, ":{m:02}").expect("writing to a String cannot fail");
    }
    if s != 0 {
        write!(out, ":{s:02}").expect("writing to a String cannot fail");
    }
}

/// IANA zone names by their lower-case spelling, for PostgreSQL's case-insensitive lookup.
fn named_zone(name: &str) -> Option<Tz> {
    static BY_LOWER_NAME: OnceLock<HashMap<String, Tz>> = OnceLock::new();
    if let Ok(tz) = name.parse::<Tz>() {
        return Some(tz);
    }
    BY_LOWER_NAME
        .get_or_init(|| {
            chrono_tz::TZ_VARIANTS
                .iter()
                .map(|tz| (tz.name().to_ascii_lowercase(), *tz))
                .collect()
        })
        .get(&name.to_ascii_lowercase())
        .copied()
}

/// `'02:00'` or `'+05:30' HOUR TO MINUTE` after `INTERVAL`: the offset in seconds east. Only a
/// time part is allowed, as in PostgreSQL (an interval with months or days is refused).
fn interval_offset(rest: &str) -> Option<i32> {
    let rest = rest.trim();
    let quoted = rest.strip_prefix('\'')?;
    let end = quoted.find('\'')?;
    let interval = crate::pgtext::parse_interval(&quoted[..end]).ok()?;
    if interval.months != 0 || interval.days != 0 {
        return None;
    }
    let seconds = interval.micros / MICROS_PER_SECOND;
    (seconds.abs() <= OFFSET_SECONDS_MAX as i64).then_some(seconds as i32)
}

/// A POSIX zone specification, `STDoffset[DST[offset][,start[/time],end[/time]]]`: STD and
/// DST are letters or `<...>` (PostgreSQL also allows STD empty), an offset is
/// `[+-]hh[:mm[:ss]]` hours *west* of Greenwich (DST's defaults to one hour less than STD's),
/// and a DST without rules takes the United States' (PostgreSQL's `posixrules`). Returns the
/// standard offset in seconds west, and the daylight-saving rules if there is a DST part.
fn posix_rules(spec: &str) -> Option<(i32, Option<PosixRules>)> {
    let rest = skip_zone_name(spec, true)?;
    let (std_west, rest) = posix_duration(rest)?;
    if std_west.abs() > OFFSET_SECONDS_MAX {
        return None;
    }
    if rest.is_empty() {
        return Some((std_west, None));
    }
    let rest = skip_zone_name(rest, false)?;
    let (dst_west, rest) = match rest.as_bytes().first() {
        None | Some(b',') => (std_west - SECONDS_PER_HOUR, rest),
        Some(_) => posix_duration(rest)?,
    };
    if dst_west.abs() > OFFSET_SECONDS_MAX {
        return None;
    }
    let rule = if rest.is_empty() {
        "M3.2.0,M11.1.0"
    } else {
        rest.strip_prefix(',')?
    };
    let (start, end) = rule.split_once(',')?;
    let (start, start_seconds) = posix_transition(start)?;
    let (end, end_seconds) = posix_transition(end)?;
    Some((
        std_west,
        Some(PosixRules {
            std_east: -std_west,
            dst_east: -dst_west,
            start,
            start_seconds,
            end,
            end_seconds,
        }),
    ))
}

/// The text after a zone name: `<...>`, or letters (at least three, or none if `may_be_empty`).
fn skip_zone_name(spec: &str, may_be_empty: bool) -> Option<&str> {
    if let Some(quoted) = spec.strip_prefix('<') {
        return Some(&quoted[quoted.find('>')? + 1..]);
    }
    let rest = spec.trim_start_matches(|c: char| c.is_ascii_alphabetic());
    let letters = spec.len() - rest.len();
    (letters >= 3 || (letters == 0 && may_be_empty)).then_some(rest)
}

/// `[+-]hh[:mm[:ss]]` at the start of `text`: seconds (negative with `-`) and the rest.
fn posix_duration(text: &str) -> Option<(i32, &str)> {
    let (sign, digits) = match text.as_bytes().first()? {
        b'-' => (-1, &text[1..]),
        b'+' => (1, &text[1..]),
        _ => (1, text),
    };
    let end = digits
        .find(|c: char| !c.is_ascii_digit() && c != ':')
        .unwrap_or(digits.len());
    let mut parts = digits[..end].split(':');
    let mut seconds = 0;
    for (i, unit) in [3600, 60, 1].into_iter().enumerate() {
        let Some(part) = parts.next() else {
            if i == 0 {
                return None;
            }
            break;
        };
        // Hours may have three digits in a transition time (`/167` is a week later).
        let max_digits = if i == 0 { 3 } else { 2 };
        if part.is_empty() || part.len() > max_digits {
            return None;
        }
        seconds += part.parse::<i32>().ok()? * unit;
    }
    if parts.next().is_some() {
        return None;
    }
    Some((sign * seconds, &digits[end..]))
}

/// One transition of a rule: `Jn`, `n` or `Mm.w.d`, then `/time` (02:00 by default).
fn posix_transition(text: &str) -> Option<(PosixDate, i32)> {
    let (date, time) = match text.split_once('/') {
        Some((date, time)) => (date, Some(time)),
        None => (text, None),
    };
    let seconds = match time {
        Some(t) => match posix_duration(t)? {
            (seconds, "") => seconds,
            _ => return None,
        },
        None => 2 * SECONDS_PER_HOUR,
    };
    let date = if let Some(day) = date.strip_prefix('J') {
        let day: u16 = day.parse().ok()?;
        (1..=365).contains(&day).then_some(PosixDate::Julian(day))?
    } else if let Some(mwd) = date.strip_prefix('M') {
        let mut parts = mwd.split('.').map(|p| p.parse::<u8>().ok());
        let (month, week, weekday) = (parts.next()??, parts.next()??, parts.next()??);
        if parts.next().is_some()
            || !(1..=12).contains(&month)
            || !(1..=5).contains(&week)
            || weekday > 6
        {
            return None;
        }
        PosixDate::MonthWeekDay {
            month,
            week,
            weekday,
        }
    } else {
        let day: u16 = date.parse().ok()?;
        (day <= 365).then_some(PosixDate::ZeroBased(day))?
    };
    Some((date, seconds))
}

impl PosixDate {
    /// The date in `year`.
    fn in_year(self, year: i32) -> Option<chrono::NaiveDate> {
        use chrono::{Datelike, NaiveDate};
        match self {
            PosixDate::Julian(day) => {
                let leap = NaiveDate::from_ymd_opt(year, 2, 29).is_some();
                let ordinal = u32::from(day) + u32::from(leap && day >= 60);
                NaiveDate::from_yo_opt(year, ordinal)
            }
            PosixDate::ZeroBased(day) => NaiveDate::from_yo_opt(year, u32::from(day) + 1),
            PosixDate::MonthWeekDay {
                month,
                week,
                weekday,
            } => {
                let first = NaiveDate::from_ymd_opt(year, month.into(), 1)?;
                let first_weekday = first.weekday().num_days_from_sunday() as u8;
                let mut day = 1 + u32::from((7 + weekday - first_weekday) % 7);
                day += 7 * (u32::from(week) - 1);
                // Week 5 means the last such weekday: step back while past the month's end.
                while NaiveDate::from_ymd_opt(year, month.into(), day).is_none() {
                    day -= 7;
                }
                NaiveDate::from_ymd_opt(year, month.into(), day)
            }
        }
    }
}

impl PosixRules {
    /// The offset east at an instant (seconds since the epoch, UTC).
    fn offset_at_utc(&self, utc_seconds: i64) -> i32 {
        use chrono::Datelike;
        let Some(local_std) = DateTime::from_timestamp(utc_seconds + self.std_east as i64, 0)
        else {
            return self.std_east;
        };
        let year = local_std.year();
        // Transition instants in UTC: DST starts on the standard clock, ends on the daylight one.
        let instant = |date: PosixDate, seconds: i32, east: i32| -> Option<i64> {
            let midnight = date
                .in_year(year)?
                .and_hms_opt(0, 0, 0)?
                .and_utc()
                .timestamp();
            Some(midnight + seconds as i64 - east as i64)
        };
        let (Some(start), Some(end)) = (
            instant(self.start, self.start_seconds, self.std_east),
            instant(self.end, self.end_seconds, self.dst_east),
        ) else {
            return self.std_east;
        };
        let in_dst = if start < end {
            (start..end).contains(&utc_seconds)
        } else {
            // Southern hemisphere: DST spans the turn of the year.
            utc_seconds >= start || utc_seconds < end
        };
        if in_dst {
            self.dst_east
        } else {
            self.std_east
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(s: &str) -> i64 {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S")
            .unwrap()
            .and_utc()
            .timestamp_micros()
    }

    #[test]
    fn settings_read_like_postgres() {
        assert_eq!(
            TimeZone::from_setting("europe/berlin").unwrap().name(),
            "Europe/Berlin"
        );
        assert_eq!(TimeZone::from_setting("2").unwrap().name(), "<+02>-02");
        assert_eq!(
            TimeZone::from_setting("-3.5").unwrap().name(),
            "<-03:30>+03:30"
        );
        let posix = TimeZone::from_setting("+02:00").unwrap();
        assert_eq!(posix.offset_at_utc(0), -7200);
        assert_eq!(
            TimeZone::from_setting("utc+3").unwrap().offset_at_utc(0),
            -3 * 3600
        );
        assert_eq!(
            TimeZone::from_setting("<+02>-02").unwrap().offset_at_utc(0),
            7200
        );
        let interval = TimeZone::from_setting("INTERVAL '+02:00' HOUR TO MINUTE").unwrap();
        assert_eq!(interval.offset_at_utc(0), 7200);
        assert!(TimeZone::from_setting("Mars/Base").is_none());
        assert!(TimeZone::from_setting("FOOBAR").is_none());
    }

    #[test]
    fn wall_clock_times_resolve_like_postgres() {
        let berlin = TimeZone::from_setting("Europe/Berlin").unwrap();
        // Skipped (02:30 on the day clocks go forward): read with the winter offset.
        assert_eq!(
            berlin.local_to_utc(local("2024-03-31 02:30:00")),
            local("2024-03-31 01:30:00")
        );
        // Repeated (02:30 on the day clocks go back): the later instant, in winter time.
        assert_eq!(
            berlin.local_to_utc(local("2024-10-27 02:30:00")),
            local("2024-10-27 01:30:00")
        );
        assert_eq!(
            berlin.utc_to_local(local("2024-07-01 10:00:00")),
            local("2024-07-01 12:00:00")
        );
        let mut s = String::new();
        push_offset(5 * 3600 + 1800, &mut s);
        push_offset(-(53 * 60 + 28), &mut s);
        assert_eq!(s, "+05:30-00:53:28");
    }
}
