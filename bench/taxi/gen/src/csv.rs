//! Number and text formatting for CSV lines without allocation: every value is appended to one
//! reused byte buffer. The generator writes hundreds of millions of fields, so integers and
//! fixed-point decimals go through digit-pair tables instead of `fmt`, and a line is assembled
//! by `Line`, which puts the separators in and counts the fields.

const DIGIT_PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

/// Appends the decimal digits of `v`. The line is first extended by a fixed 20 bytes and cut to
/// the length of the number, and the digits are then written in place: a fixed-size extension
/// is a few moves where a variable-size copy is a `memcpy` call, and building the digits in a
/// stack array first stalls on reading back the bytes just stored. This runs for most fields of
/// every row.
pub fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let len = v.checked_ilog10().map_or(1, |log| log as usize + 1);
    let start = out.len();
    out.extend_from_slice(&[0u8; 20]);
    out.truncate(start + len);
    let digits = &mut out[start..];
    let mut pos = len;
    while pos >= 2 {
        let pair = (v % 100) as usize * 2;
        v /= 100;
        pos -= 2;
        digits[pos..pos + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if pos == 1 {
        digits[0] = b'0' + v as u8;
    }
}

/// Appends `v` as exactly two digits (hours, minutes, seconds, months, days).
pub fn push_2digits(out: &mut Vec<u8>, v: u32) {
    debug_assert!(v < 100, "{v} does not fit in two digits");
    let pair = v as usize * 2;
    out.extend_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
}

/// Appends `scaled / 10^DECIMALS` with exactly `DECIMALS` digits after the point: cents with
/// `DECIMALS = 2` give `12.50`, micro-degrees with `DECIMALS = 6` give `-73.981234`. The scale is
/// a constant so that the divisions compile to multiplications.
pub fn push_fixed<const DECIMALS: u32>(out: &mut Vec<u8>, scaled: i64) {
    const { assert!(DECIMALS > 0 && DECIMALS <= 8 && DECIMALS.is_multiple_of(2)) };
    if scaled < 0 {
        out.push(b'-');
    }
    let magnitude = scaled.unsigned_abs();
    let unit = 10u64.pow(DECIMALS);
    push_u64(out, magnitude / unit);
    let mut fraction = magnitude % unit;
    let mut text = [b'.'; 9];
    let mut pos = 1 + DECIMALS as usize;
    while pos > 1 {
        let pair = (fraction % 100) as usize * 2;
        fraction /= 100;
        pos -= 2;
        text[pos..pos + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    out.extend_from_slice(&text[..1 + DECIMALS as usize]);
}

/// Appends the 8 little-endian bytes of `v` as 16 upper-case hex digits, as PostGIS prints the
/// coordinates of a hex EWKB point.
pub fn push_f64_hex_le(out: &mut Vec<u8>, v: f64) {
    let mut hex = [0u8; 16];
    for (i, byte) in v.to_le_bytes().into_iter().enumerate() {
        hex[2 * i] = HEX_UPPER[(byte >> 4) as usize];
        hex[2 * i + 1] = HEX_UPPER[(byte & 0xF) as usize];
    }
    out.extend_from_slice(&hex);
}

/// One CSV line under construction: each method appends a field and its separator, `finish`
/// turns the last separator into the line end. Empty fields are SQL NULLs in PostgreSQL's and
/// DuckDB's CSV readers, so `null` writes nothing.
pub struct Line<'a> {
    out: &'a mut Vec<u8>,
    fields: usize,
}

impl<'a> Line<'a> {
    pub fn new(out: &'a mut Vec<u8>) -> Self {
        Line { out, fields: 0 }
    }

    /// The buffer, for a field that a caller formats itself; the caller must then call `end_field`.
    pub fn raw(&mut self) -> &mut Vec<u8> {
        self.out
    }

    pub fn end_field(&mut self) {
        self.out.push(b',');
        self.fields += 1;
    }

    pub fn null(&mut self) {
        self.end_field();
    }

    /// `s` must not need CSV quoting (no comma, quote or line break); the generator's texts are
    /// fixed tables, checked by their tests.
    pub fn text(&mut self, s: &str) {
        self.out.extend_from_slice(s.as_bytes());
        self.end_field();
    }

    pub fn opt_text(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.text(s),
            None => self.null(),
        }
    }

    pub fn opt_int(&mut self, v: Option<i64>) {
        match v {
            Some(v) => self.int(v),
            None => self.null(),
        }
    }

    pub fn int(&mut self, v: i64) {
        if v < 0 {
            self.out.push(b'-');
        }
        push_u64(self.out, v.unsigned_abs());
        self.end_field();
    }

    pub fn fixed<const DECIMALS: u32>(&mut self, scaled: i64) {
        push_fixed::<DECIMALS>(self.out, scaled);
        self.end_field();
    }

    pub fn opt_fixed<const DECIMALS: u32>(&mut self, scaled: Option<i64>) {
        if let Some(v) = scaled {
            push_fixed::<DECIMALS>(self.out, v);
        }
        self.end_field();
    }

    /// Ends the line and returns how many fields it has.
    pub fn finish(self) -> usize {
        let last = self.out.last_mut().expect("a line has at least one field");
        debug_assert_eq!(*last, b',');
        *last = b'\n';
        self.fields
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut out = Vec::new();
        f(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn integers_match_std_formatting() {
        for v in [0u64, 7, 10, 99, 100, 101, 12345, 1_000_000, u64::MAX] {
            assert_eq!(text(|o| push_u64(o, v)), v.to_string());
        }
    }

    #[test]
    fn fixed_point_pads_the_fraction() {
        assert_eq!(text(|o| push_fixed::<2>(o, 1250)), "12.50");
        assert_eq!(text(|o| push_fixed::<2>(o, 5)), "0.05");
        assert_eq!(text(|o| push_fixed::<2>(o, -5)), "-0.05");
        assert_eq!(text(|o| push_fixed::<2>(o, 0)), "0.00");
        assert_eq!(text(|o| push_fixed::<6>(o, -73_981_234)), "-73.981234");
        assert_eq!(text(|o| push_fixed::<6>(o, 40_000_001)), "40.000001");
    }

    #[test]
    fn hex_is_little_endian_upper_case() {
        assert_eq!(text(|o| push_f64_hex_le(o, 1.0)), "000000000000F03F");
    }

    #[test]
    fn line_counts_fields_and_ends_with_newline() {
        let mut out = Vec::new();
        let mut line = Line::new(&mut out);
        line.int(-3);
        line.null();
        line.text("yellow");
        line.opt_fixed::<2>(None);
        line.fixed::<2>(250);
        assert_eq!(line.finish(), 5);
        assert_eq!(out, b"-3,,yellow,,2.50\n");
    }
}
