//! The benchmark's calendar: every day from 2009-01-01 to 2016-06-30 (plus a little slack for
//! drop-offs after the last pick-up), with its date already formatted, its weekday and
//! its weather. Timestamps inside the generator are seconds since 2009-01-01 00:00:00, so turning
//! one into `YYYY-MM-DD HH:MM:SS` is a table lookup and three two-digit writes.

use crate::csv::push_2digits;
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

pub const SECONDS_PER_DAY: u32 = 86_400;

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
pub const fn days_from_civil(year: i32, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year } as i64;
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = if month > 2 { month - 3 } else { month + 9 } as i64;
    let doy = (153 * mp + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day number since 1970-01-01 (Hinnant's `civil_from_days`).
pub const fn civil_from_days(days: i64) -> (i32, u32, u32) {
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = (yoe + era * 400) as i32 + if month <= 2 { 1 } else { 0 };
    (year, month, day)
}

const EPOCH_DAYS: i64 = days_from_civil(2009, 1, 1);

/// Index of a date in the calendar (2009-01-01 is 0).
pub const fn day_index(year: i32, month: u32, day: u32) -> u32 {
    (days_from_civil(year, month, day) - EPOCH_DAYS) as u32
}

/// The last pick-up day, 2016-06-30.
pub const LAST_DAY: u32 = day_index(2016, 6, 30);
/// Days after `LAST_DAY` that a drop-off may still fall on.
const SLACK_DAYS: u32 = 2;

/// Daily weather in the units of the public data set's weather columns (all small integers).
#[derive(Clone, Copy, Debug)]
pub struct Weather {
    /// Hundredths of an inch.
    pub precipitation: i16,
    /// Inches.
    pub snow_depth: i16,
    /// Inches.
    pub snowfall: i16,
    /// Degrees Fahrenheit.
    pub max_temperature: i16,
    pub min_temperature: i16,
    /// Miles per hour.
    pub average_wind_speed: i16,
}

pub struct Day {
    /// `YYYY-MM-DD ` including the space before the time.
    pub date_prefix: [u8; 11],
    /// 0 is Monday.
    pub weekday: u8,
    pub weather: Weather,
}

pub struct Calendar {
    days: Vec<Day>,
}

impl Calendar {
    /// The weather is random but fixed by `seed`, and the same for every row of a day.
    pub fn new(seed: u64) -> Self {
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x005E_A50F_DA75);
        let mut snow_depth = 0.0f64;
        let days = (0..=LAST_DAY + SLACK_DAYS)
            .map(|index| {
                let (year, month, day) = civil_from_days(EPOCH_DAYS + index as i64);
                let mut date_prefix = *b"0000-00-00 ";
                date_prefix[..4].copy_from_slice(format!("{year:04}").as_bytes());
                date_prefix[5..7].copy_from_slice(format!("{month:02}").as_bytes());
                date_prefix[8..10].copy_from_slice(format!("{day:02}").as_bytes());
                // 2009-01-01 was a Thursday.
                let weekday = ((index + 3) % 7) as u8;
                let day_of_year =
                    (days_from_civil(year, month, day) - days_from_civil(year, 1, 1)) as f64;
                let weather = draw_weather(&mut rng, day_of_year, &mut snow_depth);
                Day {
                    date_prefix,
                    weekday,
                    weather,
                }
            })
            .collect();
        Calendar { days }
    }

    #[inline]
    pub fn day(&self, index: u32) -> &Day {
        &self.days[index as usize]
    }

    /// Appends `YYYY-MM-DD HH:MM:SS` for `seconds` since 2009-01-01 00:00:00.
    #[inline]
    pub fn push_timestamp(&self, out: &mut Vec<u8>, seconds: u32) {
        let day = self.day(seconds / SECONDS_PER_DAY);
        let second_of_day = seconds % SECONDS_PER_DAY;
        out.extend_from_slice(&day.date_prefix);
        push_2digits(out, second_of_day / 3600);
        out.push(b':');
        push_2digits(out, second_of_day / 60 % 60);
        out.push(b':');
        push_2digits(out, second_of_day % 60);
    }
}

fn unit(rng: &mut SmallRng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// A seasonal temperature curve (coldest late January, warmest late July) with day-to-day noise;
/// rain on about a third of the days; snow when it is cold and wet, melting over a few days.
fn draw_weather(rng: &mut SmallRng, day_of_year: f64, snow_depth: &mut f64) -> Weather {
    let season = (2.0 * std::f64::consts::PI * (day_of_year - 110.0) / 365.25).sin();
    let max_temperature = 62.0 + 24.0 * season + 22.0 * (unit(rng) - 0.5);
    let min_temperature = max_temperature - 8.0 - 12.0 * unit(rng);
    let precipitation = if unit(rng) < 0.35 {
        -40.0 * unit(rng).max(1e-9).ln()
    } else {
        0.0
    };
    let snowfall = if max_temperature < 36.0 && precipitation > 0.0 {
        (precipitation / 10.0).round()
    } else {
        0.0
    };
    let melt = if max_temperature > 40.0 { 0.5 } else { 0.85 };
    *snow_depth = (*snow_depth * melt + snowfall).floor();
    Weather {
        precipitation: precipitation.min(500.0) as i16,
        snow_depth: *snow_depth as i16,
        snowfall: snowfall as i16,
        max_temperature: max_temperature.round() as i16,
        min_temperature: min_temperature.round() as i16,
        average_wind_speed: (3.0 + 12.0 * unit(rng) * unit(rng).sqrt()).round() as i16,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_round_trip_and_known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(day_index(2009, 1, 1), 0);
        assert_eq!(LAST_DAY + 1, 2738);
        for days in [0i64, 14_245, 16_000, 16_892, 16_982] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(days_from_civil(2012, 2, 29)), (2012, 2, 29));
    }

    #[test]
    fn timestamps_are_formatted() {
        let calendar = Calendar::new(1);
        let mut out = Vec::new();
        calendar.push_timestamp(
            &mut out,
            LAST_DAY * SECONDS_PER_DAY + 23 * 3600 + 59 * 60 + 58,
        );
        assert_eq!(out, b"2016-06-30 23:59:58");
        assert_eq!(calendar.day(0).weekday, 3);
        assert_eq!(calendar.day(day_index(2016, 6, 27)).weekday, 0);
    }
}
