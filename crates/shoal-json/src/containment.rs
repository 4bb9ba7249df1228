//! jsonb's containment and existence operators: `@>`/`<@` (`JsonbDeepContains` in
//! jsonb_util.c) and `?`, `?|`, `?&`. Containment matches structure level by level: an object
//! contains another whose every pair it has (values contained recursively), an array contains
//! another whose every element equals one of its scalars or is contained in one of its
//! containers, regardless of order and repetition. A top-level scalar is a one-element raw array,
//! so an array contains a scalar it holds, but a scalar never contains an array.

use std::cmp::Ordering;

use crate::compare::compare_scalars;
use crate::deep_stack;
use crate::error::JsonError;
use crate::jsonb_text::{key_order, parse_jsonb};
use crate::parse::{Node, Value};

/// `@>`: whether jsonb `a` contains jsonb `b` (`b <@ a` is the same call).
pub fn jsonb_contains(a: &str, b: &str) -> Result<bool, JsonError> {
    deep_stack::run(&[a, b], || {
        let (outer, inner) = (parse_jsonb(a)?, parse_jsonb(b)?);
        let is_object = |node: &Node<'_>| matches!(node.value, Value::Object(_));
        if is_object(&outer) != is_object(&inner) {
            return Ok(false);
        }
        Ok(match (&outer.value, &inner.value) {
            (Value::Object(_), _) => contains(&outer, &inner),
            _ => array_contains(
                root_elements(&outer),
                outer.is_scalar(),
                root_elements(&inner),
                inner.is_scalar(),
            ),
        })
    })
}

/// A top-level array's elements, or a top-level scalar as its own one-element array.
fn root_elements<'n, 'a>(root: &'n Node<'a>) -> &'n [Node<'a>] {
    match &root.value {
        Value::Array(items) => items,
        _ => std::slice::from_ref(root),
    }
}

/// Containment of two nested containers (never raw scalars).
fn contains(outer: &Node<'_>, inner: &Node<'_>) -> bool {
    match (&outer.value, &inner.value) {
        (Value::Object(outer_members), Value::Object(inner_members)) => {
            // Keys are unique, so fewer pairs cannot hold them all.
            if outer_members.len() < inner_members.len() {
                return false;
            }
            inner_members.iter().all(|(key, inner_value)| {
                let found = outer_members
                    .binary_search_by(|(outer_key, _)| key_order(outer_key, key))
                    .ok()
                    .map(|i| &outer_members[i].1);
                match found {
                    Some(outer_value) if outer_value.is_scalar() && inner_value.is_scalar() => {
                        scalars_equal(outer_value, inner_value)
                    }
                    Some(outer_value) if !outer_value.is_scalar() && !inner_value.is_scalar() => {
                        contains(outer_value, inner_value)
                    }
                    _ => false,
                }
            })
        }
        (Value::Array(outer_items), Value::Array(inner_items)) => {
            array_contains(outer_items, false, inner_items, false)
        }
        _ => false,
    }
}

fn array_contains(
    outer: &[Node<'_>],
    outer_is_raw_scalar: bool,
    inner: &[Node<'_>],
    inner_is_raw_scalar: bool,
) -> bool {
    if outer_is_raw_scalar && !inner_is_raw_scalar {
        return false;
    }
    inner.iter().all(|wanted| {
        if wanted.is_scalar() {
            outer
                .iter()
                .any(|candidate| candidate.is_scalar() && scalars_equal(candidate, wanted))
        } else {
            outer
                .iter()
                .any(|candidate| !candidate.is_scalar() && contains(candidate, wanted))
        }
    })
}

/// `equalsJsonbScalarValue`: same type and equal value, numbers as numerics.
fn scalars_equal(a: &Node<'_>, b: &Node<'_>) -> bool {
    std::mem::discriminant(&a.value) == std::mem::discriminant(&b.value)
        && compare_scalars(&a.value, &b.value) == Ordering::Equal
}

/// Whether `key` is a key of the top-level object, or a string element of the top-level array
/// (a top-level string counting as such an array).
fn has_key(root: &Node<'_>, key: &str) -> bool {
    match &root.value {
        Value::Object(members) => members
            .binary_search_by(|(name, _)| key_order(name, key))
            .is_ok(),
        _ => root_elements(root)
            .iter()
            .any(|item| matches!(&item.value, Value::String(text) if text == key)),
    }
}

/// `?` (`jsonb_exists`).
pub fn jsonb_exists(doc: &str, key: &str) -> Result<bool, JsonError> {
    deep_stack::run(&[doc], || Ok(has_key(&parse_jsonb(doc)?, key)))
}

/// `?|` (`jsonb_exists_any`): any of `keys`. NULL elements of the SQL array are left out by the
/// caller, as PostgreSQL skips them.
pub fn jsonb_exists_any(doc: &str, keys: &[&str]) -> Result<bool, JsonError> {
    deep_stack::run(&[doc], || {
        let root = parse_jsonb(doc)?;
        Ok(keys.iter().any(|key| has_key(&root, key)))
    })
}

/// `?&` (`jsonb_exists_all`): all of `keys` (true for none). NULL elements are left out by the
/// caller, as PostgreSQL skips them.
pub fn jsonb_exists_all(doc: &str, keys: &[&str]) -> Result<bool, JsonError> {
    deep_stack::run(&[doc], || {
        let root = parse_jsonb(doc)?;
        Ok(keys.iter().all(|key| has_key(&root, key)))
    })
}
