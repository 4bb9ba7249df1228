//! PostgreSQL's reading of date and time text (its ParseDateTime and DecodeDateTime), shared
//! by date, time, timestamp and timestamptz input: the text is cut into fields (numbers, dates
//! such as `1999-01-08` or `1/8/1999`, times such as `04:05:06.5`, signed zone offsets and
//! words), and the fields are then given meaning: month and day names, `BC`, `AM`/`PM`, zone
//! abbreviations and names, and the special words (`epoch`, `infinity`, `today`, ...).
//! Numeric dates are read in DateStyle's default order (MDY), a first field of three or more
//! digits being a year (`1999-01-08`), as PostgreSQL does.

use crate::timezone::TimeZone;

const MICROS_PER_SECOND: i64 = 1_000_000;
const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SECOND;

/// Why a text is not a date or time; the caller words the message for its type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// 22007: not a date/time at all.
    Syntax,
    /// 22008: a field out of its range (month 13, hour 25, February 30).
    FieldOverflow,
    /// 22023: a word that looks like a zone name but is none.
    UnknownZone(String),
}

/// The zone written in the text.
#[derive(Debug, Clone)]
pub enum InputZone {
    /// Seconds east of Greenwich.
    Offset(i32),
    Named(TimeZone),
}

/// What the text says.
#[derive(Debug, Clone)]
pub enum Decoded {
    Infinity,
    NegInfinity,
    /// `now`: the current instant.
    Now,
    Fields(Fields),
}

/// Calendar fields as written; absent ones are None.
#[derive(Debug, Clone, Default)]
pub struct Fields {
    /// (astronomical year, month, day): year 0 is 1 BC.
    pub date: Option<(i64, u32, u32)>,
    /// Microseconds since midnight, up to 24:00:00 (23:59:60 reads as 24:00:00).
    pub time_micros: Option<i64>,
    pub zone: Option<InputZone>,
}

/// One field of the text, as ParseDateTime cuts it.
#[derive(Debug, PartialEq)]
enum Field {
    /// Digits, perhaps with a fraction: `1999`, `08`, `19990108`.
    Number(String),
    /// Numbers or month names joined by `-`, `/` or `.`: `1999-01-08`, `8-jan-1999`.
    Date(String),
    /// `hh:mm[:ss[.ffffff]]`.
    Time(String),
    /// A sign and digits after a time: a zone offset (`-08`, `+05:30`).
    Signed(String),
    /// A word, lower-cased: month, day, `bc`, `am`, a zone, a special word.
    Word(String),
}

fn tokenize(text: &str) -> Result<Vec<Field>, DecodeError> {
    let mut chars: Vec<char> = text.chars().collect();
    // ISO 8601's `T` between a date and a time (`1999-01-08T04:05:06`) separates like a space;
    // no word has a digit on both sides.
    for i in 1..chars.len().saturating_sub(1) {
        if matches!(chars[i], 't' | 'T')
            && chars[i - 1].is_ascii_digit()
            && chars[i + 1].is_ascii_digit()
        {
            chars[i] = ' ';
        }
    }
    let chars = chars;
    let mut fields = Vec::new();
    let mut i = 0;
    let take_while = |i: &mut usize, ok: &dyn Fn(char) -> bool| {
        let start = *i;
        while *i < chars.len() && ok(chars[*i]) {
            *i += 1;
        }
        chars[start..*i]
            .iter()
            .collect::<String>()
            .to_ascii_lowercase()
    };
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() || c == ',' {
            i += 1;
        } else if c.is_ascii_digit() {
            let digits = take_while(&mut i, &|c| c.is_ascii_digit());
            fields.push(match chars.get(i) {
                Some(':') => Field::Time(digits + &take_while(&mut i, &is_time_char)),
                // As PostgreSQL's ParseDateTime: after `1999-`, a digit means an all-numeric
                // date (`1970-01-01Z` is a date and the zone `z`), a letter a month name
                // (`1999-jan-08`).
                Some(&delim @ ('-' | '/'))
                    if chars.get(i + 1).is_some_and(char::is_ascii_digit) =>
                {
                    Field::Date(digits + &take_while(&mut i, &|c| c.is_ascii_digit() || c == delim))
                }
                Some('-' | '/') => Field::Date(digits + &take_while(&mut i, &is_date_char)),
                Some('.') if is_dotted_date(&chars[i..]) => {
                    Field::Date(digits + &take_while(&mut i, &is_date_char))
                }
                Some('.') => Field::Number(digits + &take_while(&mut i, &is_fraction_char)),
                _ => Field::Number(digits),
            });
        } else if c.is_alphabetic() {
            let word = take_while(&mut i, &|c| c.is_alphabetic() || c == '.');
            let word = word.trim_end_matches('.').to_string();
            fields.push(match chars.get(i) {
                Some('-' | '/') if chars.get(i + 1).is_some_and(char::is_ascii_digit) => {
                    Field::Date(word + &take_while(&mut i, &is_date_char))
                }
                Some('/' | '_') => Field::Word(word + &take_while(&mut i, &is_zone_char)),
                _ => Field::Word(word),
            });
        } else if c == '+' || c == '-' {
            i += 1;
            match chars.get(i) {
                Some(d) if d.is_ascii_digit() => {
                    let rest = take_while(&mut i, &is_time_char);
                    fields.push(Field::Signed(format!("{c}{rest}")));
                }
                Some(a) if a.is_alphabetic() => {
                    let word = take_while(&mut i, &|c| c.is_alphabetic());
                    fields.push(Field::Word(format!("{c}{word}")));
                }
                _ => return Err(DecodeError::Syntax),
            }
        } else {
            return Err(DecodeError::Syntax);
        }
    }
    Ok(fields)
}

fn is_time_char(c: char) -> bool {
    c.is_ascii_digit() || c == ':' || c == '.'
}

fn is_fraction_char(c: char) -> bool {
    c.is_ascii_digit() || c == '.'
}

fn is_date_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '-' | '/' | '.')
}

fn is_zone_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '/' | '_' | '-' | '+')
}

/// `1999.01.08`: two dots make a date, one a number with a fraction.
fn is_dotted_date(rest: &[char]) -> bool {
    rest.iter()
        .take_while(|c| c.is_ascii_digit() || **c == '.')
        .filter(|c| **c == '.')
        .count()
        >= 2
}

fn month_number(word: &str) -> Option<u32> {
    const MONTHS: [&str; 12] = [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ];
    // PostgreSQL reads the full names and their first three letters (and "sept").
    MONTHS
        .iter()
        .position(|m| {
            *m == word
                || (word.len() == 3 && m.starts_with(word))
                || word == "sept" && *m == "september"
        })
        .map(|i| i as u32 + 1)
}

fn is_day_name(word: &str) -> bool {
    const DAYS: [&str; 7] = [
        "sunday",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
    ];
    DAYS.iter()
        .any(|d| *d == word || (word.len() == 3 && d.starts_with(word)))
        || matches!(word, "tues" | "wednes" | "thur" | "thurs")
}

/// Date fields found so far, with what DecodeNumber needs to place the next number.
#[derive(Default)]
struct DateParts {
    year: Option<i64>,
    month: Option<u32>,
    day: Option<u32>,
    /// The year was written with two digits or fewer (`99` is 1999).
    year_two_digits: bool,
    text_month: bool,
}

impl DateParts {
    fn set_year(&mut self, digits: &str) -> Result<(), DecodeError> {
        if self.year.is_some() {
            return Err(DecodeError::Syntax);
        }
        self.year = Some(digits.parse().map_err(|_| DecodeError::FieldOverflow)?);
        self.year_two_digits = digits.len() <= 2;
        Ok(())
    }

    fn set_month(&mut self, month: u32) -> Result<(), DecodeError> {
        if self.month.replace(month).is_some() {
            return Err(DecodeError::Syntax);
        }
        Ok(())
    }

    fn set_day(&mut self, digits: &str) -> Result<(), DecodeError> {
        let day = digits.parse().map_err(|_| DecodeError::FieldOverflow)?;
        if self.day.replace(day).is_some() {
            return Err(DecodeError::Syntax);
        }
        Ok(())
    }

    /// PostgreSQL's DecodeNumber for a date: where a number goes depends on the fields
    /// already known (MDY order; three or more digits first make a year).
    fn place_number(&mut self, digits: &str) -> Result<(), DecodeError> {
        let number = |d: &str| d.parse::<u32>().map_err(|_| DecodeError::FieldOverflow);
        match (
            self.year.is_some(),
            self.month.is_some(),
            self.day.is_some(),
        ) {
            (false, false, false) if digits.len() >= 3 => self.set_year(digits),
            (false, false, false) => self.set_month(number(digits)?),
            (true, false, false) => self.set_month(number(digits)?),
            (false, true, false) if self.text_month && digits.len() >= 3 => self.set_year(digits),
            (false, true, false) | (true, true, false) => self.set_day(digits),
            (true, false, true) => self.set_month(number(digits)?),
            (false, true, true) | (false, false, true) => self.set_year(digits),
            _ => Err(DecodeError::Syntax),
        }
    }

    /// `1999-01-08`, `1/8/1999`, `08-Jan-1999`, `1999.01.08`: month names first, then the
    /// numbers in order.
    fn place_date(&mut self, text: &str) -> Result<(), DecodeError> {
        let parts: Vec<&str> = text.split(['-', '/', '.']).collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err(DecodeError::Syntax);
        }
        for part in parts
            .iter()
            .filter(|p| !p.starts_with(|c: char| c.is_ascii_digit()))
        {
            let month = month_number(part).ok_or(DecodeError::Syntax)?;
            self.set_month(month)?;
            self.text_month = true;
        }
        for part in parts
            .iter()
            .filter(|p| p.starts_with(|c: char| c.is_ascii_digit()))
        {
            if !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(DecodeError::Syntax);
            }
            self.place_number(part)?;
        }
        Ok(())
    }

    /// `19990108` and `990108`, when no date field came before.
    fn place_concatenated(&mut self, digits: &str) -> Result<(), DecodeError> {
        let year_len = digits.len() - 4;
        self.set_year(&digits[..year_len])?;
        self.set_month(digits[year_len..year_len + 2].parse().expect("digits"))?;
        self.set_day(&digits[year_len + 2..])
    }

    fn is_empty(&self) -> bool {
        self.year.is_none() && self.month.is_none() && self.day.is_none()
    }

    fn is_complete(&self) -> bool {
        self.year.is_some() && self.month.is_some() && self.day.is_some()
    }
}

/// Decodes date/time text; `today` and friends are days in `zone` (the session's).
pub fn decode(text: &str, zone: &TimeZone) -> Result<Decoded, DecodeError> {
    decode_as(text, zone, false)
}

/// Decodes the text of a time of day, where a lone `040506` is a time, not a date.
pub fn decode_time(text: &str, zone: &TimeZone) -> Result<Decoded, DecodeError> {
    decode_as(text, zone, true)
}

fn decode_as(text: &str, zone: &TimeZone, time_only: bool) -> Result<Decoded, DecodeError> {
    let fields = tokenize(text)?;
    if let [Field::Word(word)] = fields.as_slice() {
        match word.as_str() {
            "infinity" | "+infinity" => return Ok(Decoded::Infinity),
            "-infinity" => return Ok(Decoded::NegInfinity),
            "now" => return Ok(Decoded::Now),
            "epoch" => {
                return Ok(Decoded::Fields(Fields {
                    date: Some((1970, 1, 1)),
                    time_micros: Some(0),
                    zone: Some(InputZone::Offset(0)),
                }))
            }
            _ => {}
        }
    }
    let mut decoder = Decoder {
        time_only,
        ..Decoder::default()
    };
    for field in &fields {
        decoder.field(field, zone)?;
    }
    decoder.finish()
}

#[derive(Default)]
struct Decoder {
    date: DateParts,
    /// A day given as a word (`today`), already complete.
    relative_date: Option<(i64, u32, u32)>,
    time: Option<(i64, i64, i64, i64)>,
    zone: Option<InputZone>,
    bc: bool,
    /// Some(true) for PM.
    pm: Option<bool>,
    /// Reading a time of day: numbers of four or six digits are `hhmm` and `hhmmss`.
    time_only: bool,
}

impl Decoder {
    fn field(&mut self, field: &Field, zone: &TimeZone) -> Result<(), DecodeError> {
        match field {
            Field::Date(text) => self.date.place_date(text),
            Field::Time(text) => self.set_time(parse_time_field(text)?),
            Field::Number(digits) => self.number(digits),
            Field::Signed(text) if self.time.is_some() || !self.date.is_empty() => {
                self.set_zone(InputZone::Offset(parse_offset(text)?))
            }
            Field::Signed(_) => Err(DecodeError::Syntax),
            Field::Word(word) => self.word(word, zone),
        }
    }

    fn number(&mut self, digits: &str) -> Result<(), DecodeError> {
        if digits.contains('.') {
            return Err(DecodeError::Syntax);
        }
        let date_started = !self.date.is_empty() || self.relative_date.is_some();
        match digits.len() {
            8 if !date_started => self.date.place_concatenated(digits),
            6 if !date_started && !self.time_only => self.date.place_concatenated(digits),
            // `040506` after a date, or as a time of day, is hhmmss.
            4 | 6 if (self.time_only || self.date.is_complete()) && self.time.is_none() => {
                let hhmmss = format!("{digits:0<6}");
                let part = |r: std::ops::Range<usize>| hhmmss[r].parse::<i64>().expect("digits");
                self.set_time((part(0..2), part(2..4), part(4..6), 0))
            }
            _ => self.date.place_number(digits),
        }
    }

    fn word(&mut self, word: &str, zone: &TimeZone) -> Result<(), DecodeError> {
        if let Some(month) = month_number(word) {
            self.date.text_month = true;
            return self.date.set_month(month);
        }
        if is_day_name(word) {
            return Ok(());
        }
        match word {
            "bc" => self.bc = true,
            "z" | "zulu" => self.set_zone(InputZone::Offset(0))?,
            "ad" => {}
            "am" | "a.m" => self.pm = Some(false),
            "pm" | "p.m" => self.pm = Some(true),
            "today" | "tomorrow" | "yesterday" => {
                let offset = match word {
                    "tomorrow" => 1,
                    "yesterday" => -1,
                    _ => 0,
                };
                let today = zone.utc_to_local(chrono::Utc::now().timestamp_micros());
                let days = today.div_euclid(MICROS_PER_DAY) + offset;
                if self.relative_date.is_some() || !self.date.is_empty() {
                    return Err(DecodeError::Syntax);
                }
                self.relative_date = Some(crate::query::civil_time::civil_from_days(days));
            }
            "allballs" => {
                self.set_time((0, 0, 0, 0))?;
                self.set_zone(InputZone::Offset(0))?;
            }
            _ => {
                let named = TimeZone::from_abbreviation(word).or_else(|| TimeZone::from_name(word));
                match named {
                    Some(z) => self.set_zone(InputZone::Named(z))?,
                    None if word.contains('/') => {
                        return Err(DecodeError::UnknownZone(word.to_string()))
                    }
                    None => return Err(DecodeError::Syntax),
                }
            }
        }
        Ok(())
    }

    fn set_time(&mut self, time: (i64, i64, i64, i64)) -> Result<(), DecodeError> {
        if self.time.replace(time).is_some() {
            return Err(DecodeError::Syntax);
        }
        Ok(())
    }

    fn set_zone(&mut self, zone: InputZone) -> Result<(), DecodeError> {
        if self.zone.replace(zone).is_some() {
            return Err(DecodeError::Syntax);
        }
        Ok(())
    }

    fn finish(self) -> Result<Decoded, DecodeError> {
        let date = match self.relative_date {
            Some(d) => Some(d),
            None if self.date.is_empty() => None,
            None => Some(finish_date(&self.date, self.bc)?),
        };
        if date.is_none() && self.bc {
            return Err(DecodeError::Syntax);
        }
        let time_micros = match self.time {
            Some(time) => Some(finish_time(time, self.pm)?),
            None if self.pm.is_some() => return Err(DecodeError::Syntax),
            None => None,
        };
        Ok(Decoded::Fields(Fields {
            date,
            time_micros,
            zone: self.zone,
        }))
    }
}

/// The calendar date of the fields, checked (PostgreSQL's ValidateDate).
fn finish_date(parts: &DateParts, bc: bool) -> Result<(i64, u32, u32), DecodeError> {
    let (Some(year), Some(month), Some(day)) = (parts.year, parts.month, parts.day) else {
        return Err(DecodeError::Syntax);
    };
    let year = if bc {
        if year <= 0 {
            return Err(DecodeError::FieldOverflow);
        }
        1 - year
    } else if parts.year_two_digits {
        if year < 70 {
            year + 2000
        } else {
            year + 1900
        }
    } else if year <= 0 {
        return Err(DecodeError::FieldOverflow);
    } else {
        year
    };
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return Err(DecodeError::FieldOverflow);
    }
    Ok((year, month, day))
}

/// The time of day in microseconds, checked as PostgreSQL does: up to 24:00:00, a leap
/// second 60 allowed only where it does not pass midnight.
fn finish_time(
    (hour, minute, second, micros): (i64, i64, i64, i64),
    pm: Option<bool>,
) -> Result<i64, DecodeError> {
    let hour = match pm {
        Some(_) if !(1..=12).contains(&hour) && hour != 0 => {
            return Err(DecodeError::FieldOverflow)
        }
        Some(false) if hour == 12 => 0,
        Some(true) if hour < 12 => hour + 12,
        _ => hour,
    };
    if minute > 59 || second > 60 || hour > 24 {
        return Err(DecodeError::FieldOverflow);
    }
    let total = ((hour * 60 + minute) * 60 + second) * MICROS_PER_SECOND + micros;
    if total > MICROS_PER_DAY {
        return Err(DecodeError::FieldOverflow);
    }
    Ok(total)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    let leap = year.rem_euclid(4) == 0 && (year.rem_euclid(100) != 0 || year.rem_euclid(400) == 0);
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// `hh:mm[:ss[.ffffff]]` as (hour, minute, second, microseconds); the fraction is rounded to
/// microseconds.
fn parse_time_field(text: &str) -> Result<(i64, i64, i64, i64), DecodeError> {
    let parts: Vec<&str> = text.split(':').collect();
    if parts.len() > 3 || parts.iter().any(|p| p.is_empty()) {
        return Err(DecodeError::Syntax);
    }
    let whole = |p: &str| {
        if !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err(DecodeError::Syntax);
        }
        p.parse::<i64>().map_err(|_| DecodeError::FieldOverflow)
    };
    let hour = whole(parts[0])?;
    let (minute, seconds_text) = match parts.len() {
        1 => return Err(DecodeError::Syntax),
        // `hh:mm`; PostgreSQL's rarer `mm:ss.f` reading is not supported.
        2 => (whole(parts[1])?, "0"),
        _ => (whole(parts[1])?, parts[2]),
    };
    let (second_text, fraction) = seconds_text.split_once('.').unwrap_or((seconds_text, ""));
    let second = whole(second_text)?;
    if !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return Err(DecodeError::Syntax);
    }
    let micros = if fraction.is_empty() {
        0
    } else {
        (format!("0.{fraction}")
            .parse::<f64>()
            .map_err(|_| DecodeError::Syntax)?
            * 1e6)
            .round() as i64
    };
    Ok((hour, minute, second, micros))
}

/// A zone offset after a time: `-8`, `+05:30`, `-0800`, `+053000`; seconds east.
fn parse_offset(text: &str) -> Result<i32, DecodeError> {
    let (sign, body) = text.split_at(1);
    let sign = if sign == "-" { -1 } else { 1 };
    let number = |s: &str| s.parse::<i32>().map_err(|_| DecodeError::Syntax);
    let (h, m, s) = if body.contains(':') {
        let parts: Vec<&str> = body.split(':').collect();
        match parts.as_slice() {
            [h, m] => (number(h)?, number(m)?, 0),
            [h, m, s] => (number(h)?, number(m)?, number(s)?),
            _ => return Err(DecodeError::Syntax),
        }
    } else {
        match body.len() {
            1 | 2 => (number(body)?, 0, 0),
            3 | 4 => {
                let split = body.len() - 2;
                (number(&body[..split])?, number(&body[split..])?, 0)
            }
            5 | 6 => {
                let split = body.len() - 4;
                (
                    number(&body[..split])?,
                    number(&body[split..split + 2])?,
                    number(&body[split + 2..])?,
                )
            }
            _ => return Err(DecodeError::Syntax),
        }
    };
    // PostgreSQL's limit on zone offsets is 15:59:59.
    if h > 15 || m > 59 || s > 59 {
        return Err(DecodeError::FieldOverflow);
    }
    Ok(sign * (h * 3600 + m * 60 + s))
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (astronomical years),
/// with no range limit of its own (Howard Hinnant's `days_from_civil`).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y.rem_euclid(400);
    let month_from_march = (i64::from(month) + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date_of(text: &str) -> Option<(i64, u32, u32)> {
        match decode(text, &TimeZone::utc()).ok()? {
            Decoded::Fields(f) => f.date,
            _ => None,
        }
    }

    #[test]
    fn dates_read_in_postgresql_forms() {
        for text in [
            "1999-01-08",
            "January 8, 1999",
            "1/8/1999",
            "08-Jan-1999",
            "Jan-08-1999",
            "1999-Jan-08",
            "19990108",
            "990108",
            "Jan 8 1999",
            "Friday, January 8, 1999",
            "1999.01.08",
        ] {
            assert_eq!(date_of(text), Some((1999, 1, 8)), "{text}");
        }
        assert_eq!(date_of("2040-04-10 BC"), Some((-2039, 4, 10)));
        assert_eq!(
            decode("99-01-08", &TimeZone::utc()).unwrap_err(),
            DecodeError::FieldOverflow
        );
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        for days in [-2_500_000, -719_468, -1, 0, 59, 11_017, 2_000_000] {
            let (y, m, d) = crate::query::civil_time::civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn times_are_checked_as_postgresql_does() {
        let time_of = |text: &str| match decode(text, &TimeZone::utc()) {
            Ok(Decoded::Fields(f)) => Ok(f.time_micros),
            Ok(_) => Ok(None),
            Err(e) => Err(e),
        };
        assert_eq!(time_of("23:59:60"), Ok(Some(MICROS_PER_DAY)));
        assert_eq!(time_of("24:00:00"), Ok(Some(MICROS_PER_DAY)));
        assert_eq!(time_of("23:59:60.01"), Err(DecodeError::FieldOverflow));
        assert_eq!(time_of("12:00 am"), Ok(Some(0)));
        assert_eq!(time_of("13:00 pm"), Err(DecodeError::FieldOverflow));
    }
}
