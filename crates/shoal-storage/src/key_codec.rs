//! Memcomparable encoding of index keys: the bytes of two keys compare (lexicographically, as
//! the index's ordered map compares them) exactly as the keys compare by `Value::total_cmp`,
//! column by column, with NULL last. Each column is a tag byte (the value's variant rank, 0xFF
//! for NULL) followed by a self-delimiting body, so a key made of the first k columns encodes to
//! a byte prefix of the full key: range scans by leading columns are byte-prefix ranges, and a
//! text that is a prefix of another still sorts first in composite keys.

use std::ops::Bound;

use crate::types::Value;

const TAG_NULL: u8 = 0xFF;
/// Escaping for text and bytea: a zero byte inside the value becomes 0x00 0xFF and the value ends
/// with 0x00 0x01, which sorts below any continuation, so "ab" < "ab\0" < "abc".
const ESCAPE_ZERO: [u8; 2] = [0x00, 0xFF];
const TERMINATOR: [u8; 2] = [0x00, 0x01];

fn tag(v: &Value) -> u8 {
    // Must follow Value::total_cmp's variant ranks so mixed-variant keys also order alike.
    match v {
        Value::Null => TAG_NULL,
        Value::Bool(_) => 0,
        Value::Int16(_) => 1,
        Value::Int32(_) => 2,
        Value::Int64(_) => 3,
        Value::Float32(_) => 4,
        Value::Float64(_) => 5,
        Value::Numeric { .. } => 6,
        Value::Text(_) => 7,
        Value::Bytea(_) => 8,
        Value::Date(_) => 9,
        Value::Timestamp(_) => 10,
        Value::TimestampTz(_) => 11,
        Value::Interval(_) => 12,
        Value::Uuid(_) => 13,
        Value::Time(_) => 14,
        Value::Array(_) => 15,
    }
}

/// Encodes a key (or a prefix of one).
pub fn encode_key(values: &[Value]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * 9);
    encode_key_into(values, &mut out);
    out
}

/// Appends the encoding of `values` to `out`.
pub fn encode_key_into(values: &[Value], out: &mut Vec<u8>) {
    for v in values {
        encode_value_into(v, out);
    }
}

/// Appends the encoding of one column value.
pub fn encode_value_into(v: &Value, out: &mut Vec<u8>) {
    out.push(tag(v));
    match v {
        Value::Null => {}
        Value::Bool(b) => out.push(*b as u8),
        Value::Int16(x) => out.extend_from_slice(&((*x as u16) ^ 0x8000).to_be_bytes()),
        Value::Int32(x) | Value::Date(x) => {
            out.extend_from_slice(&((*x as u32) ^ 0x8000_0000).to_be_bytes())
        }
        Value::Int64(x) | Value::Timestamp(x) | Value::TimestampTz(x) | Value::Time(x) => {
            out.extend_from_slice(&flip_i64(*x).to_be_bytes())
        }
        Value::Float32(x) => {
            let bits = x.to_bits();
            let key = if bits >> 31 == 1 {
                !bits
            } else {
                bits | 0x8000_0000
            };
            out.extend_from_slice(&key.to_be_bytes());
        }
        Value::Float64(x) => {
            let bits = x.to_bits();
            let key = if bits >> 63 == 1 {
                !bits
            } else {
                bits | 1 << 63
            };
            out.extend_from_slice(&key.to_be_bytes());
        }
        Value::Numeric { mantissa, scale } => encode_numeric(*mantissa, *scale, out),
        Value::Text(s) => encode_bytes(s.as_bytes(), out),
        Value::Bytea(b) => encode_bytes(b, out),
        Value::Interval(i) => {
            out.extend_from_slice(&((i.months as u32) ^ 0x8000_0000).to_be_bytes());
            out.extend_from_slice(&((i.days as u32) ^ 0x8000_0000).to_be_bytes());
            out.extend_from_slice(&flip_i64(i.micros).to_be_bytes());
        }
        Value::Uuid(u) => out.extend_from_slice(&u.to_be_bytes()),
        // Each element after a 1, then a 0: a prefix sorts before the arrays that extend it,
        // as in PostgreSQL's array order.
        Value::Array(elements) => {
            for e in elements {
                out.push(1);
                encode_value_into(e, out);
            }
            out.push(0);
        }
    }
}

fn flip_i64(x: i64) -> u64 {
    (x as u64) ^ (1 << 63)
}

fn encode_bytes(bytes: &[u8], out: &mut Vec<u8>) {
    for chunk in bytes.split_inclusive(|&b| b == 0) {
        match chunk.split_last() {
            Some((0, head)) => {
                out.extend_from_slice(head);
                out.extend_from_slice(&ESCAPE_ZERO);
            }
            _ => out.extend_from_slice(chunk),
        }
    }
    out.extend_from_slice(&TERMINATOR);
}

/// Decimals are encoded scale-independently (1.5 and 1.50 encode alike, as total_cmp says they
/// are equal): a sign byte, then for nonzero values the decimal exponent and the significant
/// digits (trailing zeros dropped) ending in 0x00; negative values invert those bytes so a larger
/// magnitude sorts lower.
fn encode_numeric(mantissa: i128, scale: u8, out: &mut Vec<u8>) {
    const NEGATIVE: u8 = 0x01;
    const ZERO: u8 = 0x02;
    const POSITIVE: u8 = 0x03;
    if mantissa == 0 {
        out.push(ZERO);
        return;
    }
    let digits = mantissa.unsigned_abs().to_string();
    let significant = digits.trim_end_matches('0');
    // value = 0.d1d2d3... * 10^exponent
    let exponent = digits.len() as i32 - scale as i32;
    let mut body = Vec::with_capacity(significant.len() + 3);
    body.extend_from_slice(&((exponent + 0x8000) as u16).to_be_bytes());
    body.extend(significant.bytes().map(|d| d - b'0' + 1));
    body.push(0x00);
    if mantissa < 0 {
        out.push(NEGATIVE);
        out.extend(body.iter().map(|b| !b));
    } else {
        out.push(POSITIVE);
        out.extend_from_slice(&body);
    }
}

/// The smallest byte string greater than every string that starts with `prefix`, or `None` when
/// there is none (the prefix is all 0xFF).
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut out = prefix.to_vec();
    while let Some(last) = out.last_mut() {
        if *last == 0xFF {
            out.pop();
        } else {
            *last += 1;
            return Some(out);
        }
    }
    None
}

/// Byte range covering keys within the given bounds, where each bound may be a prefix of the
/// key (an inclusive prefix bound covers every key starting with it).
pub fn key_range(
    lower: Bound<&[Value]>,
    upper: Bound<&[Value]>,
) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let lo = match lower {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Included(k) => Bound::Included(encode_key(k)),
        Bound::Excluded(k) => match prefix_successor(&encode_key(k)) {
            Some(s) => Bound::Included(s),
            None => Bound::Excluded(encode_key(k)),
        },
    };
    let hi = match upper {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Included(k) => match prefix_successor(&encode_key(k)) {
            Some(s) => Bound::Excluded(s),
            None => Bound::Unbounded,
        },
        Bound::Excluded(k) => Bound::Excluded(encode_key(k)),
    };
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{DataType, Interval};
    use rand::Rng;
    use std::cmp::Ordering;

    fn cmp_keys(a: &[Value], b: &[Value]) -> Ordering {
        for (x, y) in a.iter().zip(b) {
            match x.total_cmp(y) {
                Ordering::Equal => continue,
                o => return o,
            }
        }
        a.len().cmp(&b.len())
    }

    fn small_value(t: &DataType, rng: &mut impl Rng) -> Value {
        // Narrow domains so equal values and shared prefixes actually occur.
        if rng.random_ratio(1, 8) {
            return Value::Null;
        }
        match t {
            DataType::Bool => Value::Bool(rng.random()),
            DataType::Int16 => Value::Int16(rng.random_range(-3..3)),
            DataType::Int32 => Value::Int32([i32::MIN, -1, 0, 1, i32::MAX][rng.random_range(0..5)]),
            DataType::Int64 => Value::Int64(rng.random_range(-3..3) * 1_000_000_000_000),
            DataType::Float32 => Value::Float32(
                [-1.5, -0.0, 0.0, 2.0, f32::INFINITY, f32::NEG_INFINITY][rng.random_range(0..6)],
            ),
            DataType::Float64 => Value::Float64(
                [-1.5, -0.0, 0.0, 1e-300, f64::MAX, f64::NAN][rng.random_range(0..6)],
            ),
            DataType::Numeric { .. } => Value::Numeric {
                mantissa: [
                    -1500,
                    -15,
                    -1,
                    0,
                    1,
                    10,
                    15,
                    150,
                    1500,
                    99999,
                    10i128.pow(30),
                    7 - 10i128.pow(30),
                ][rng.random_range(0..12)],
                scale: rng.random_range(0..4),
            },
            DataType::Text => {
                let len = rng.random_range(0..4);
                Value::Text(
                    (0..len)
                        .map(|_| ['a', 'b', '\0', 'é'][rng.random_range(0..4)])
                        .collect(),
                )
            }
            DataType::Bytea => Value::Bytea(
                (0..rng.random_range(0..4))
                    .map(|_| [0u8, 1, 0xFF][rng.random_range(0..3)])
                    .collect(),
            ),
            DataType::Interval => Value::Interval(Interval {
                months: rng.random_range(-1..2),
                days: rng.random_range(-1..2),
                micros: rng.random_range(-1..2),
            }),
            DataType::Uuid => Value::Uuid([0, 1, u128::MAX][rng.random_range(0..3)]),
            DataType::Time => Value::Time([0, 1, 86_400_000_000][rng.random_range(0..3)]),
            _ => Value::Date(rng.random_range(-2..2)),
        }
    }

    #[test]
    fn byte_order_matches_value_order_on_random_composite_keys() {
        let mut rng = rand::rng();
        let types = [
            DataType::Bool,
            DataType::Int16,
            DataType::Int32,
            DataType::Int64,
            DataType::Float32,
            DataType::Float64,
            DataType::Numeric {
                precision: None,
                scale: None,
            },
            DataType::Text,
            DataType::Bytea,
            DataType::Date,
            DataType::Interval,
            DataType::Uuid,
            DataType::Time,
        ];
        for _ in 0..20_000 {
            let width = rng.random_range(1..4);
            let shape: Vec<&DataType> = (0..width)
                .map(|_| &types[rng.random_range(0..types.len())])
                .collect();
            let a: Vec<Value> = shape.iter().map(|t| small_value(t, &mut rng)).collect();
            let mut b: Vec<Value> = shape.iter().map(|t| small_value(t, &mut rng)).collect();
            if rng.random_ratio(1, 3) {
                b[0] = a[0].clone();
            }
            let expected = cmp_keys(&a, &b);
            let got = encode_key(&a).cmp(&encode_key(&b));
            assert_eq!(got, expected, "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn text_prefix_sorts_first_in_composite_keys() {
        let k = |s: &str, n: i32| encode_key(&[Value::Text(s.into()), Value::Int32(n)]);
        assert!(k("ab", i32::MAX) < k("abc", i32::MIN));
        assert!(k("ab", 5) < k("ab\0", 0));
        assert!(k("", 1) < k("a", 0));
    }

    #[test]
    fn key_prefix_encodes_to_byte_prefix() {
        let full = [Value::Text("x".into()), Value::Int64(3), Value::Null];
        let enc = encode_key(&full);
        for k in 0..=full.len() {
            assert!(enc.starts_with(&encode_key(&full[..k])));
        }
    }

    #[test]
    fn null_sorts_last_and_numeric_ignores_scale() {
        assert!(encode_key(&[Value::Int32(i32::MAX)]) < encode_key(&[Value::Null]));
        assert_eq!(
            encode_key(&[Value::Numeric {
                mantissa: 15,
                scale: 1
            }]),
            encode_key(&[Value::Numeric {
                mantissa: 1500,
                scale: 3
            }])
        );
    }

    #[test]
    fn prefix_successor_bounds_all_extensions() {
        assert_eq!(prefix_successor(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_successor(&[0xFF, 0xFF]), None);
        let p = encode_key(&[Value::Int32(7)]);
        let s = prefix_successor(&p).unwrap();
        let ext = encode_key(&[Value::Int32(7), Value::Null]);
        assert!(p < ext && ext < s);
    }
}
