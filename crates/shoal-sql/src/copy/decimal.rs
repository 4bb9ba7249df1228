//! Fast paths for the numbers of bulk-loaded text: plain decimal integers (`-42`) and plain
//! decimal fractions (`-73.976154`), which are nearly all the numbers a CSV file holds. Each
//! function returns `None` for anything else (spaces, exponents, too many digits, `NaN`), and
//! the caller then uses the full PostgreSQL input function, which also words the errors. For
//! the inputs they accept, they return exactly what the full parsers return.

/// Powers of ten that a double holds exactly (10^22 is the last one).
const EXACT_POWERS_OF_TEN: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// Up to 15 decimal digits always make an integer below 2^53, which a double holds exactly.
const EXACT_DIGITS_MAX: usize = 15;

/// `[-+]?[0-9]{1,18}`: the value, which always fits an i64.
#[inline]
pub fn plain_integer(text: &[u8]) -> Option<i64> {
    let (negative, digits) = split_sign(text);
    if digits.is_empty() || digits.len() > 18 {
        return None;
    }
    let mut value: i64 = 0;
    for &b in digits {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        value = value * 10 + i64::from(d);
    }
    Some(if negative { -value } else { value })
}

/// `[-+]?[0-9]*(\.[0-9]*)?` with at least one digit, at most 15 significant digits and at
/// most 22 after the point: the double nearest to the decimal. The digits make an integer m
/// below 2^53 and the fraction digits a power of ten p of at most 10^22, both exact as
/// doubles, so the one rounding of m / p is the correctly rounded result that the standard
/// parser also gives.
#[inline]
pub fn plain_float(text: &[u8]) -> Option<f64> {
    let (negative, body) = split_sign(text);
    let mut mantissa: u64 = 0;
    let mut any_digit = false;
    let mut significant_digits = 0;
    let mut fraction_digits = 0;
    let mut seen_point = false;
    for &b in body {
        let d = b.wrapping_sub(b'0');
        if d <= 9 {
            any_digit = true;
            significant_digits += usize::from(mantissa != 0 || d != 0);
            mantissa = mantissa * 10 + u64::from(d);
            fraction_digits += usize::from(seen_point);
            if significant_digits > EXACT_DIGITS_MAX {
                return None;
            }
        } else if b == b'.' && !seen_point {
            seen_point = true;
        } else {
            return None;
        }
    }
    if !any_digit || fraction_digits > 22 {
        return None;
    }
    // The cast is exact: mantissa < 10^15 < 2^53.
    let value = mantissa as f64 / EXACT_POWERS_OF_TEN[fraction_digits];
    Some(if negative { -value } else { value })
}

#[inline]
fn split_sign(text: &[u8]) -> (bool, &[u8]) {
    match text.first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers() {
        assert_eq!(plain_integer(b"0"), Some(0));
        assert_eq!(plain_integer(b"-42"), Some(-42));
        assert_eq!(plain_integer(b"+7"), Some(7));
        assert_eq!(
            plain_integer(b"999999999999999999"),
            Some(999_999_999_999_999_999)
        );
        for refused in [
            &b""[..],
            b"-",
            b"+",
            b" 1",
            b"1 ",
            b"1.0",
            b"1e3",
            b"--1",
            b"0x1",
        ] {
            assert_eq!(plain_integer(refused), None, "{refused:?}");
        }
        assert_eq!(plain_integer(b"1000000000000000000"), None, "19 digits");
    }

    #[test]
    fn floats_match_the_standard_parser() {
        let samples = [
            "0",
            "-0",
            "-0.00",
            "1.60",
            "-73.976154",
            "40.753385",
            "0.1",
            "0.3",
            ".5",
            "5.",
            "+2.5",
            "123456789012345",
            "1234567.89012345",
            "0.000000000000001",
            "9.17",
            "3000000.12",
            "-0.000001",
            "007.50",
        ];
        for s in samples {
            let fast = plain_float(s.as_bytes()).unwrap_or_else(|| panic!("{s} refused"));
            let std: f64 = s.parse().unwrap();
            assert_eq!(fast.to_bits(), std.to_bits(), "{s}");
        }
        for refused in [
            &b""[..],
            b".",
            b"-",
            b"-.",
            b"1e5",
            b"1.2.3",
            b" 1",
            b"nan",
            b"1234567890123456",
            b"0.1234567890123456",
            b"0.00000000000000000000001",
        ] {
            assert_eq!(plain_float(refused), None, "{refused:?}");
        }
    }

    #[test]
    fn floats_match_the_standard_parser_on_many_values() {
        // A deterministic spread of digit counts and point positions.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let digits = (x % 15 + 1) as usize;
            let mantissa = (x >> 8) % 10u64.pow(digits as u32);
            let text = format!("{mantissa:0digits$}");
            let point = (x >> 60) as usize % (digits + 1);
            let s = format!("{}.{}", &text[..point], &text[point..]);
            let fast = plain_float(s.as_bytes()).unwrap();
            let std: f64 = s.parse().unwrap();
            assert_eq!(fast.to_bits(), std.to_bits(), "{s}");
        }
    }
}
