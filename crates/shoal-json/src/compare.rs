//! jsonb's btree order and equality (`compareJsonbContainers` in jsonb_util.c). Values of
//! different types order Object > Array > Boolean > Number > String > Null; arrays compare by
//! element count, then element by element; objects by pair count, then key, value, key, value in
//! their stored (length-first) key order; numbers as numerics (so `1.0` = `1`), strings bytewise
//! (the C collation). A top-level scalar is stored as a one-element "raw scalar" array: it sorts
//! below any real array of one element, and below or above other arrays by element count.

use std::cmp::Ordering;

use shoal_numeric::Numeric;

use crate::deep_stack;
use crate::error::JsonError;
use crate::escape::write_quoted;
use crate::jsonb_text::parse_jsonb;
use crate::parse::{Node, Value};

/// jsonb's `<`, `=`, `>` and btree support. Both arguments must be jsonb text; an argument
/// that does not parse (never the case for text `jsonb_in` produced) sorts by its bytes.
pub fn jsonb_cmp(a: &str, b: &str) -> Ordering {
    let compared = deep_stack::run(&[a, b], || {
        let (left, right) = (parse_jsonb(a)?, parse_jsonb(b)?);
        Ok(compare_roots(&left, &right))
    });
    compared.unwrap_or_else(|_| {
        debug_assert!(false, "jsonb_cmp on text that is not jsonb: {a:?} {b:?}");
        a.cmp(b)
    })
}

/// jsonb's `=`: equal under `jsonb_cmp` (`'1.0'::jsonb = '1'::jsonb`).
pub fn jsonb_eq(a: &str, b: &str) -> bool {
    a == b || jsonb_cmp(a, b) == Ordering::Equal
}

/// A text that is the same for two jsonb values exactly when `jsonb_eq` holds, for grouping,
/// DISTINCT and hash joins over jsonb (PostgreSQL's `jsonb_hash` serves them there): the
/// normal form with every number stripped of trailing fractional zeros (`1.50` -> `1.5`).
pub fn jsonb_equality_key(doc: &str) -> Result<String, JsonError> {
    deep_stack::run(&[doc], || {
        let root = parse_jsonb(doc)?;
        let mut out = String::with_capacity(doc.len());
        write_equality_key(&root, &mut out)?;
        Ok(out)
    })
}

fn write_equality_key(node: &Node<'_>, out: &mut String) -> Result<(), JsonError> {
    match &node.value {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_equality_key(item, out)?;
            }
            out.push(']');
        }
        Value::Object(members) => {
            out.push('{');
            for (i, (key, value)) in members.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_quoted(out, key);
                out.push_str(": ");
                write_equality_key(value, out)?;
            }
            out.push('}');
        }
        Value::Number(text) if text.contains('.') => {
            out.push_str(&Numeric::parse(text)?.trim_scale().to_pg_text());
        }
        scalar => crate::jsonb_text::write_scalar(scalar, out),
    }
    Ok(())
}

/// PostgreSQL's `JsonbValue` type order; containers rank above all scalars.
fn type_rank(value: &Value<'_>) -> u8 {
    match value {
        Value::Null => 0,
        Value::String(_) => 1,
        Value::Number(_) => 2,
        Value::Bool(_) => 3,
        Value::Array(_) => 0x10,
        Value::Object(_) => 0x11,
    }
}

fn compare_roots(a: &Node<'_>, b: &Node<'_>) -> Ordering {
    match (a.is_scalar(), b.is_scalar()) {
        (true, false) => raw_scalar_against(b),
        (false, true) => raw_scalar_against(a).reverse(),
        _ => compare_values(a, b),
    }
}

/// How a top-level scalar orders against a top-level container. The scalar is an array of one
/// element flagged raw: below a real array of one element, else ordered by element count, and
/// below every object (arrays rank below objects).
fn raw_scalar_against(container: &Node<'_>) -> Ordering {
    match &container.value {
        Value::Array(items) if items.len() != 1 => 1.cmp(&items.len()),
        _ => Ordering::Less,
    }
}

fn compare_values(a: &Node<'_>, b: &Node<'_>) -> Ordering {
    match (&a.value, &b.value) {
        (Value::Array(left), Value::Array(right)) => left.len().cmp(&right.len()).then_with(|| {
            left.iter()
                .zip(right)
                .map(|(x, y)| compare_values(x, y))
                .find(|order| order.is_ne())
                .unwrap_or(Ordering::Equal)
        }),
        (Value::Object(left), Value::Object(right)) => {
            left.len().cmp(&right.len()).then_with(|| {
                left.iter()
                    .zip(right)
                    .map(|((key_x, x), (key_y, y))| {
                        key_x
                            .as_bytes()
                            .cmp(key_y.as_bytes())
                            .then_with(|| compare_values(x, y))
                    })
                    .find(|order| order.is_ne())
                    .unwrap_or(Ordering::Equal)
            })
        }
        (left, right) if type_rank(left) != type_rank(right) => {
            type_rank(left).cmp(&type_rank(right))
        }
        (left, right) => compare_scalars(left, right),
    }
}

/// `compareJsonbScalarValue` for two scalars of the same type.
pub(crate) fn compare_scalars(a: &Value<'_>, b: &Value<'_>) -> Ordering {
    match (a, b) {
        (Value::String(x), Value::String(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Value::Number(x), Value::Number(y)) => compare_numbers(x, y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Null, Value::Null) => Ordering::Equal,
        _ => type_rank(a).cmp(&type_rank(b)),
    }
}

/// Compares two jsonb number texts as numerics.
pub(crate) fn compare_numbers(a: &str, b: &str) -> Ordering {
    if a == b {
        return Ordering::Equal;
    }
    match (Numeric::parse(a), Numeric::parse(b)) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        // Normalized jsonb numbers always parse; fall back to text rather than fail a sort.
        _ => a.cmp(b),
    }
}
