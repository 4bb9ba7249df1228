//! An order-preserving byte key for jsonb: `jsonb_sort_key(a) < jsonb_sort_key(b)` exactly when
//! `jsonb_cmp(a, b)` is Less, so ORDER BY, window order and TopK can sort jsonb values as bytes.
//!
//! Every value encodes as a tag (jsonb's type order: Null < String < Number < Bool < Array <
//! Object), then its content; containers put their element count first (jsonb compares counts
//! before elements). Each encoding is prefix-free, so the first byte where two keys differ lies
//! in the first element where the values differ. A top-level scalar encodes as a one-element
//! array flagged raw, below a real one-element array (see `compare::raw_scalar_against`).

use shoal_numeric::Numeric;

use crate::deep_stack;
use crate::error::JsonError;
use crate::jsonb_text::parse_jsonb;
use crate::parse::{Node, Value};

const TAG_NULL: u8 = 0x00;
const TAG_STRING: u8 = 0x01;
const TAG_NUMBER: u8 = 0x02;
const TAG_BOOL: u8 = 0x03;
const TAG_ARRAY: u8 = 0x10;
const TAG_OBJECT: u8 = 0x11;
/// After a top-level array's count: a raw scalar sorts below a real array of one element.
const RAW_SCALAR: u8 = 0x00;
const REAL_ARRAY: u8 = 0x01;

/// The sort key of jsonb text (as `jsonb_in` produces it).
pub fn jsonb_sort_key(doc: &str) -> Result<Vec<u8>, JsonError> {
    deep_stack::run(&[doc], || {
        let root = parse_jsonb(doc)?;
        let mut out = Vec::with_capacity(doc.len() + 8);
        match &root.value {
            Value::Array(items) => {
                out.push(TAG_ARRAY);
                out.extend_from_slice(&count(items.len()));
                out.push(REAL_ARRAY);
                for item in items {
                    write_value(item, &mut out)?;
                }
            }
            Value::Object(_) => write_value(&root, &mut out)?,
            _ => {
                out.push(TAG_ARRAY);
                out.extend_from_slice(&count(1));
                out.push(RAW_SCALAR);
                write_value(&root, &mut out)?;
            }
        }
        Ok(out)
    })
}

fn count(n: usize) -> [u8; 4] {
    u32::try_from(n).unwrap_or(u32::MAX).to_be_bytes()
}

fn write_value(node: &Node<'_>, out: &mut Vec<u8>) -> Result<(), JsonError> {
    match &node.value {
        Value::Null => out.push(TAG_NULL),
        Value::String(s) => {
            out.push(TAG_STRING);
            write_string(s, out);
        }
        Value::Number(text) => {
            out.push(TAG_NUMBER);
            write_number(text, out)?;
        }
        Value::Bool(b) => out.extend_from_slice(&[TAG_BOOL, u8::from(*b)]),
        Value::Array(items) => {
            out.push(TAG_ARRAY);
            out.extend_from_slice(&count(items.len()));
            for item in items {
                write_value(item, out)?;
            }
        }
        Value::Object(members) => {
            out.push(TAG_OBJECT);
            out.extend_from_slice(&count(members.len()));
            for (key, value) in members {
                write_string(key, out);
                write_value(value, out)?;
            }
        }
    }
    Ok(())
}

/// Bytes in order, a zero byte escaped as 0x00 0xFF, ended by 0x00 0x00: a string sorts before
/// every longer string it begins.
fn write_string(s: &str, out: &mut Vec<u8>) {
    for &b in s.as_bytes() {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

/// A number as sign, decimal exponent and significant digits (value = 0.d1d2... x 10^exponent,
/// trailing zeros dropped, so `1.0` and `1` encode alike). Negative numbers invert exponent and
/// digits, and end with a byte above every digit, so that a longer one sorts first.
fn write_number(text: &str, out: &mut Vec<u8>) -> Result<(), JsonError> {
    let plain = Numeric::parse(text)?.trim_scale().to_pg_text();
    let (negative, magnitude) = match plain.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, plain.as_str()),
    };
    let (integer, fraction) = magnitude.split_once('.').unwrap_or((magnitude, ""));
    let integer = integer.trim_start_matches('0');
    let (exponent, digits) = if integer.is_empty() {
        let significant = fraction.trim_start_matches('0');
        let leading_zeros = fraction.len() - significant.len();
        (-(leading_zeros as i64), significant.to_string())
    } else {
        (integer.len() as i64, format!("{integer}{fraction}"))
    };
    let digits = digits.trim_end_matches('0');
    if digits.is_empty() {
        out.push(0x02);
        return Ok(());
    }
    let exponent = i32::try_from(exponent).unwrap_or(i32::MAX);
    if negative {
        out.push(0x01);
        out.extend_from_slice(&((exponent.wrapping_neg() as u32) ^ 0x8000_0000).to_be_bytes());
        out.extend(digits.bytes().map(|d| b'9' - d + b'0'));
        out.push(0xFF);
    } else {
        out.push(0x03);
        out.extend_from_slice(&((exponent as u32) ^ 0x8000_0000).to_be_bytes());
        out.extend(digits.bytes());
        out.push(0x00);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::jsonb_cmp;
    use crate::input::jsonb_in;

    /// Every pair of the documents orders the same by key as by jsonb_cmp.
    #[test]
    fn keys_order_as_jsonb_compares() {
        let docs = [
            "null",
            "true",
            "false",
            "0",
            "-0.0",
            "1",
            "1.0",
            "1.5",
            "10",
            "3",
            "7",
            "-1",
            "-1.25",
            "-10",
            "0.001",
            "0.01",
            "-0.001",
            "123456789012345678901234567890.5",
            "-123456789012345678901234567890.5",
            "1e-30",
            "\"\"",
            "\"a\"",
            "\"ab\"",
            "\"b\"",
            "\"10\"",
            "[]",
            "[1]",
            "[1, 2]",
            "[[1]]",
            "[\"a\"]",
            "[null]",
            "[true]",
            "[2]",
            "{}",
            "{\"a\": 1}",
            "{\"a\": 2}",
            "{\"b\": 1}",
            "{\"a\": 1, \"b\": 2}",
            "{\"s\": 10}",
            "{\"s\": 3}",
            "{\"s\": \"a\"}",
            "{\"aa\": 1}",
            "[1, \"a\"]",
            "[1, {\"a\": 1}]",
            "[[]]",
            "[{}]",
            "{\"a\": [1]}",
            "{\"a\": {}}",
        ];
        let docs: Vec<String> = docs.iter().map(|d| jsonb_in(d).unwrap()).collect();
        for a in &docs {
            for b in &docs {
                let by_key = jsonb_sort_key(a).unwrap().cmp(&jsonb_sort_key(b).unwrap());
                assert_eq!(by_key, jsonb_cmp(a, b), "{a} vs {b}");
            }
        }
    }
}
