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
            let seconds_west = posix_offset(v)?;
            Some(TimeZone {
                name: Arc::from(v.to_uppercase()),
                rules: Rules::Fixed(-seconds_west),
            })
        })
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

/// A POSIX zone specification without daylight-saving rules, `STDoffset`: STD is letters or
/// `<...>` (PostgreSQL also allows it empty), offset is `[+-]hh[:mm[:ss]]` hours *west* of
/// Greenwich. Returns the offset in seconds west.
fn posix_offset(spec: &str) -> Option<i32> {
    let rest = if let Some(quoted) = spec.strip_prefix('<') {
        &quoted[quoted.find('>')? + 1..]
    } else {
        spec.trim_start_matches(|c: char| c.is_ascii_alphabetic())
    };
    let (sign, digits) = match rest.as_bytes().first()? {
        b'-' => (-1, &rest[1..]),
        b'+' => (1, &rest[1..]),
        _ => (1, rest),
    };
    let mut parts = digits.split(':');
    let mut seconds = 0;
    for (i, unit) in [3600, 60, 1].into_iter().enumerate() {
        let Some(part) = parts.next() else {
            if i == 0 {
                return None;
            }
            break;
        };
        if part.is_empty() || part.len() > 2 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        seconds += part.parse::<i32>().ok()? * unit;
    }
    if parts.next().is_some() || seconds > OFFSET_SECONDS_MAX {
        return None;
    }
    Some(sign * seconds)
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
