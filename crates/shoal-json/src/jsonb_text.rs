//! jsonb's normal form and its text. A jsonb value is stored as the text PostgreSQL prints for
//! it: object keys sorted by (length, bytes) with the last of duplicate keys kept, numbers as
//! numeric prints them, strings re-escaped, `", "` and `": "` as separators. Every jsonb argument
//! is read back through `parse_jsonb`, which also normalizes text that is not yet in that form.

use std::borrow::Cow;
use std::cmp::Ordering;

use shoal_numeric::Numeric;

use crate::error::JsonError;
use crate::escape::write_quoted;
use crate::parse::{parse, Node, Value};

/// Parses json or jsonb text into jsonb's normal form (`jsonb_in`).
pub(crate) fn parse_jsonb(text: &str) -> Result<Node<'_>, JsonError> {
    let mut root = parse(text, true)?;
    normalize(&mut root)?;
    Ok(root)
}

/// Brings a tree into jsonb's normal form: numbers canonical, object keys sorted and unique.
pub(crate) fn normalize(node: &mut Node<'_>) -> Result<(), JsonError> {
    match &mut node.value {
        Value::Number(text) => {
            if !is_numeric_output(text) {
                *text = Cow::Owned(Numeric::parse(text)?.to_pg_text());
            }
        }
        Value::Array(items) => {
            for item in items {
                normalize(item)?;
            }
        }
        Value::Object(members) => {
            for (_, value) in members.iter_mut() {
                normalize(value)?;
            }
            sort_members(members);
        }
        Value::Null | Value::Bool(_) | Value::String(_) => {}
    }
    Ok(())
}

/// True when a json number's text is already what numeric would print for it, which saves a
/// numeric round trip for every number of a stored jsonb. Exponents and negative zero change
/// on output; very long numbers go through numeric so its length limits apply.
fn is_numeric_output(text: &str) -> bool {
    const PLAIN_DIGITS_MAX: usize = 1000;
    if text.len() > PLAIN_DIGITS_MAX || text.bytes().any(|b| b == b'e' || b == b'E') {
        return false;
    }
    let negative_zero =
        text.starts_with('-') && text.bytes().all(|b| matches!(b, b'-' | b'0' | b'.'));
    !negative_zero
}

/// jsonb's key order: shorter keys first, then bytewise (`lengthCompareJsonbStringValue`).
pub(crate) fn key_order(a: &str, b: &str) -> Ordering {
    a.len()
        .cmp(&b.len())
        .then_with(|| a.as_bytes().cmp(b.as_bytes()))
}

/// Sorts members into jsonb's key order, keeping only the last of each duplicate key.
pub(crate) fn sort_members<'a>(members: &mut Vec<(Cow<'a, str>, Node<'a>)>) {
    let already_sorted_unique = members
        .windows(2)
        .all(|pair| key_order(&pair[0].0, &pair[1].0) == Ordering::Less);
    if already_sorted_unique {
        return;
    }
    // A stable sort keeps duplicates in input order, so the last one of each run wins.
    members.sort_by(|a, b| key_order(&a.0, &b.0));
    let mut unique: Vec<(Cow<'a, str>, Node<'a>)> = Vec::with_capacity(members.len());
    for member in members.drain(..) {
        match unique.last_mut() {
            Some(last) if last.0 == member.0 => *last = member,
            _ => unique.push(member),
        }
    }
    *members = unique;
}

/// The jsonb text of a normalized tree.
pub(crate) fn jsonb_text(node: &Node<'_>) -> String {
    let mut out = String::new();
    write_jsonb(node, &mut out);
    out
}

pub(crate) fn write_jsonb(node: &Node<'_>, out: &mut String) {
    match &node.value {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_jsonb(item, out);
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
                write_jsonb(value, out);
            }
            out.push('}');
        }
        scalar => write_scalar(scalar, out),
    }
}

/// A scalar's json text; strings are re-escaped from their de-escaped content.
pub(crate) fn write_scalar(value: &Value<'_>, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(text) => out.push_str(text),
        Value::String(text) => write_quoted(out, text),
        Value::Array(_) | Value::Object(_) => unreachable!("containers are written by the caller"),
    }
}
