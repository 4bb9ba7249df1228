//! Binary encodings of numeric values. The *sortable* encoding lets the SQL layer keep numerics
//! as byte strings that sort (memcmp) in PostgreSQL's value order, with equal values sharing a
//! key whatever their display scale; the display scale follows the key so that nothing is lost.
//! The *wire* encoding is PostgreSQL's binary format (`numeric_send` / `numeric_recv`).

use num_bigint::BigInt;
use num_traits::{Signed, Zero};

use crate::nbase::{NBaseDigits, DEC_DIGITS, NBASE};
use crate::{pow10, Numeric, NumericError, DSCALE_MAX};

// Class bytes of the sortable key, in PostgreSQL's order of the classes.
const CLASS_NEG_INF: u8 = 0x10;
const CLASS_NEGATIVE: u8 = 0x20;
const CLASS_ZERO: u8 = 0x30;
const CLASS_POSITIVE: u8 = 0x40;
const CLASS_POS_INF: u8 = 0x50;
const CLASS_NAN: u8 = 0x60;
/// Ends the digit pairs of a positive key; digit bytes are 1..=100, so it sorts first.
const TERMINATOR: u8 = 0x00;
/// Bias that makes the signed decimal exponent sort as an unsigned big-endian integer.
const EXPONENT_BIAS: u32 = 0x8000_0000;

// Sign words of PostgreSQL's binary format.
const WIRE_POS: u16 = 0x0000;
const WIRE_NEG: u16 = 0x4000;
const WIRE_NAN: u16 = 0xC000;
const WIRE_PINF: u16 = 0xD000;
const WIRE_NINF: u16 = 0xF000;

fn invalid_sortable() -> NumericError {
    NumericError::new("XX000", "invalid sortable encoding of numeric")
}

impl Numeric {
    /// Appends the sortable encoding: a memcomparable, self-delimiting key (class byte; for a
    /// finite non-zero value the biased decimal exponent and the significant digits two per
    /// byte, terminated; all complemented for negatives) followed by the display scale as two
    /// big-endian bytes.
    pub fn encode_sortable(&self, out: &mut Vec<u8>) {
        let (mantissa, scale) = match self {
            Numeric::NaN => return out.extend_from_slice(&[CLASS_NAN, 0, 0]),
            Numeric::PosInf => return out.extend_from_slice(&[CLASS_POS_INF, 0, 0]),
            Numeric::NegInf => return out.extend_from_slice(&[CLASS_NEG_INF, 0, 0]),
            Numeric::Finite { mantissa, scale } => (mantissa, *scale),
        };
        if mantissa.is_zero() {
            out.push(CLASS_ZERO);
        } else {
            let negative = mantissa.is_negative();
            out.push(if negative {
                CLASS_NEGATIVE
            } else {
                CLASS_POSITIVE
            });
            let start = out.len();
            let text = mantissa.magnitude().to_str_radix(10);
            let significant = text.trim_end_matches('0');
            // Decimal exponent of the leading digit: value = d.ddd × 10^exponent.
            let exponent = text.len() as i64 - 1 - i64::from(scale);
            out.extend_from_slice(&((exponent as i32 as u32) ^ EXPONENT_BIAS).to_be_bytes());
            for pair in significant.as_bytes().chunks(2) {
                let high = pair[0] - b'0';
                let low = pair.get(1).map_or(0, |d| d - b'0');
                out.push(1 + high * 10 + low);
            }
            out.push(TERMINATOR);
            if negative {
                out[start..].iter_mut().for_each(|b| *b = !*b);
            }
        }
        out.extend_from_slice(&scale.to_be_bytes());
    }

    /// Length of the key part of a sortable encoding (everything but the trailing scale).
    /// Comparing key prefixes compares values exactly. Returns `bytes.len()` if malformed.
    pub fn sortable_key_len(bytes: &[u8]) -> usize {
        let terminator = match bytes.first() {
            Some(&CLASS_POSITIVE) => TERMINATOR,
            Some(&CLASS_NEGATIVE) => !TERMINATOR,
            Some(_) => return 1,
            None => return 0,
        };
        match bytes.iter().skip(5).position(|b| *b == terminator) {
            Some(offset) => 5 + offset + 1,
            None => bytes.len(),
        }
    }

    /// Reads back a value written by `encode_sortable`, with its display scale.
    pub fn decode_sortable(bytes: &[u8]) -> Result<Numeric, NumericError> {
        let key_len = Numeric::sortable_key_len(bytes);
        let tail = bytes
            .get(key_len..)
            .filter(|t| t.len() == 2)
            .ok_or_else(invalid_sortable)?;
        let scale = u16::from_be_bytes([tail[0], tail[1]]);
        let class = bytes[0];
        match class {
            CLASS_NAN => return Ok(Numeric::NaN),
            CLASS_POS_INF => return Ok(Numeric::PosInf),
            CLASS_NEG_INF => return Ok(Numeric::NegInf),
            CLASS_ZERO => return Numeric::make(BigInt::zero(), i64::from(scale)),
            CLASS_POSITIVE | CLASS_NEGATIVE => {}
            _ => return Err(invalid_sortable()),
        }
        let negative = class == CLASS_NEGATIVE;
        let body: Vec<u8> = bytes[1..key_len]
            .iter()
            .map(|b| if negative { !*b } else { *b })
            .collect();
        if body.len() < 6 {
            return Err(invalid_sortable());
        }
        let exponent =
            (u32::from_be_bytes([body[0], body[1], body[2], body[3]]) ^ EXPONENT_BIAS) as i32;
        let mut digits = String::with_capacity(2 * body.len());
        for &b in &body[4..body.len() - 1] {
            if !(1..=100).contains(&b) {
                return Err(invalid_sortable());
            }
            digits.push((b'0' + (b - 1) / 10) as char);
            digits.push((b'0' + (b - 1) % 10) as char);
        }
        let significand: BigInt = digits.parse().map_err(|_| invalid_sortable())?;
        // significand has digits.len() digits with the first at 10^exponent; an odd digit
        // count carries a padding zero that the scale may not have room for.
        let shift = i64::from(scale) + i64::from(exponent) - (digits.len() as i64 - 1);
        let magnitude = if shift >= 0 {
            significand * pow10(shift as u64)
        } else {
            let (q, r) = num_integer::Integer::div_rem(&significand, &pow10((-shift) as u64));
            if !r.is_zero() {
                return Err(invalid_sortable());
            }
            q
        };
        Numeric::make(
            if negative { -magnitude } else { magnitude },
            i64::from(scale),
        )
    }

    /// PostgreSQL's binary format (`numeric_send`): int16 ndigits, int16 weight, uint16 sign,
    /// uint16 dscale, then the base-10000 digits as int16, all big-endian.
    pub fn to_pg_binary(&self) -> Vec<u8> {
        let (sign, scale, nbase) = match self {
            Numeric::NaN => (
                WIRE_NAN,
                0,
                NBaseDigits {
                    weight: 0,
                    digits: Vec::new(),
                },
            ),
            // PostgreSQL reads the dscale of an infinity out of its header word, where the
            // infinity bits land in the short-format scale field and come out as 32.
            Numeric::PosInf => (
                WIRE_PINF,
                32,
                NBaseDigits {
                    weight: 0,
                    digits: Vec::new(),
                },
            ),
            Numeric::NegInf => (
                WIRE_NINF,
                32,
                NBaseDigits {
                    weight: 0,
                    digits: Vec::new(),
                },
            ),
            Numeric::Finite { mantissa, scale } => {
                let sign = if mantissa.is_negative() {
                    WIRE_NEG
                } else {
                    WIRE_POS
                };
                (sign, *scale, NBaseDigits::of(mantissa, *scale))
            }
        };
        let mut out = Vec::with_capacity(8 + 2 * nbase.digits.len());
        out.extend_from_slice(&(nbase.digits.len() as u16).to_be_bytes());
        out.extend_from_slice(&(nbase.weight as i16).to_be_bytes());
        out.extend_from_slice(&sign.to_be_bytes());
        out.extend_from_slice(&scale.to_be_bytes());
        for d in &nbase.digits {
            out.extend_from_slice(&d.to_be_bytes());
        }
        out
    }

    /// Reads PostgreSQL's binary format as `numeric_recv` does: a bad sign, scale or digit is
    /// 22P03; digits hidden by the scale are truncated away; too few bytes is 08P01
    /// `insufficient data left in message`, extra bytes 22P03.
    pub fn from_pg_binary(bytes: &[u8]) -> Result<Numeric, NumericError> {
        let mut reader = WireReader { bytes, pos: 0 };
        let ndigits = reader.u16()?;
        let weight = reader.u16()? as i16;
        let sign = reader.u16()?;
        let scale = reader.u16()?;
        if !matches!(sign, WIRE_POS | WIRE_NEG | WIRE_NAN | WIRE_PINF | WIRE_NINF) {
            return Err(NumericError::new(
                "22P03",
                "invalid sign in external \"numeric\" value",
            ));
        }
        if scale > DSCALE_MAX {
            return Err(NumericError::new(
                "22P03",
                "invalid scale in external \"numeric\" value",
            ));
        }
        let mut digits = BigInt::zero();
        for _ in 0..ndigits {
            let d = reader.u16()? as i16;
            if !(0..NBASE as i16).contains(&d) {
                return Err(NumericError::new(
                    "22P03",
                    "invalid digit in external \"numeric\" value",
                ));
            }
            digits = digits * NBASE + d;
        }
        if reader.pos != bytes.len() {
            return Err(NumericError::new("22P03", "incorrect binary data format"));
        }
        match sign {
            WIRE_NAN => return Ok(Numeric::NaN),
            WIRE_PINF => return Ok(Numeric::PosInf),
            WIRE_NINF => return Ok(Numeric::NegInf),
            _ => {}
        }
        // The last digit is worth 10000^(weight - ndigits + 1); express it at the scale.
        let last_digit_exponent = DEC_DIGITS as i64 * (i64::from(weight) - i64::from(ndigits) + 1);
        let shift = last_digit_exponent + i64::from(scale);
        let magnitude = if shift >= 0 {
            digits * pow10(shift as u64)
        } else {
            digits / pow10((-shift) as u64)
        };
        Numeric::make(
            if sign == WIRE_NEG {
                -magnitude
            } else {
                magnitude
            },
            i64::from(scale),
        )
    }
}

/// Reads big-endian 16-bit fields, failing as `pq_getmsgint` does when the message runs out.
struct WireReader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl WireReader<'_> {
    fn u16(&mut self) -> Result<u16, NumericError> {
        let field = self
            .bytes
            .get(self.pos..self.pos + 2)
            .ok_or_else(|| NumericError::new("08P01", "insufficient data left in message"))?;
        self.pos += 2;
        Ok(u16::from_be_bytes([field[0], field[1]]))
    }
}
