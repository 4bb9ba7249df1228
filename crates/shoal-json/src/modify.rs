//! Operations that make a new jsonb from an old one: `||`, `-` (key, keys, index), `#-`,
//! `jsonb_set`, `jsonb_insert` and the `*_strip_nulls` functions. Path updates follow
//! PostgreSQL's `setPath` / `setPathObject` / `setPathArray` (jsonfuncs.c) step by step, since
//! their edge cases (negative and out-of-range indexes, where NULL path elements are noticed,
//! which errors win) are the observable behaviour.

use std::borrow::Cow;

use crate::access::parse_c_int;
use crate::deep_stack;
use crate::error::JsonError;
use crate::escape::write_quoted;
use crate::jsonb_text::{jsonb_text, parse_jsonb, sort_members, write_scalar};
use crate::parse::{parse, Node, Value};

/// `jsonb || jsonb`: objects merge (the right side wins on a shared key), anything else
/// becomes an array of both sides' elements, a scalar or object counting as one element.
pub fn jsonb_concat(a: &str, b: &str) -> Result<String, JsonError> {
    deep_stack::run(&[a, b], || {
        let (left, right) = (parse_jsonb(a)?, parse_jsonb(b)?);
        let value = match (left.value, right.value) {
            (Value::Object(mut members), Value::Object(more)) => {
                // The stable sort keeps the right side's pair after the left's, so it wins.
                members.extend(more);
                sort_members(&mut members);
                Value::Object(members)
            }
            (x, y) => {
                let mut items = into_elements(x);
                items.extend(into_elements(y));
                Value::Array(items)
            }
        };
        Ok(jsonb_text(&Node::built(value)))
    })
}

fn into_elements(value: Value<'_>) -> Vec<Node<'_>> {
    match value {
        Value::Array(items) => items,
        other => vec![Node::built(other)],
    }
}

/// `jsonb - text`: drops the key from an object, or string elements equal to it from an array.
pub fn jsonb_delete_key(doc: &str, key: &str) -> Result<String, JsonError> {
    jsonb_delete_keys(doc, &[key])
}

/// `jsonb - text[]`: `jsonb - text` for each key. NULL elements are left out by the caller.
pub fn jsonb_delete_keys(doc: &str, keys: &[&str]) -> Result<String, JsonError> {
    deep_stack::run(&[doc], || {
        let mut root = parse_jsonb(doc)?;
        let doomed = |text: &str| keys.iter().any(|key| *key == text);
        match &mut root.value {
            Value::Object(members) => members.retain(|(name, _)| !doomed(name)),
            Value::Array(items) => {
                items.retain(|item| !matches!(&item.value, Value::String(text) if doomed(text)))
            }
            _ => return Err(JsonError::invalid_parameter("cannot delete from scalar")),
        }
        Ok(jsonb_text(&root))
    })
}

/// `jsonb - integer`: drops an array element, negative counting from the end; an index out of
/// range changes nothing.
pub fn jsonb_delete_index(doc: &str, index: i32) -> Result<String, JsonError> {
    deep_stack::run(&[doc], || {
        let mut root = parse_jsonb(doc)?;
        let items = match &mut root.value {
            Value::Array(items) => items,
            Value::Object(_) => {
                return Err(JsonError::invalid_parameter(
                    "cannot delete from object using integer index",
                ))
            }
            _ => return Err(JsonError::invalid_parameter("cannot delete from scalar")),
        };
        let count = items.len() as i64;
        let mut position = i64::from(index);
        if position < 0 {
            position += count;
        }
        if (0..count).contains(&position) {
            items.remove(position as usize);
        }
        Ok(jsonb_text(&root))
    })
}

/// What a path update does at the path's end (PostgreSQL's `JB_PATH_*` flags).
#[derive(Clone, Copy, PartialEq, Eq)]
enum PathOp {
    Replace,
    Create,
    InsertBefore,
    InsertAfter,
    Delete,
}

impl PathOp {
    /// `JB_PATH_CREATE_OR_INSERT`: adds a missing key or array slot.
    fn adds_missing(self) -> bool {
        matches!(
            self,
            PathOp::Create | PathOp::InsertBefore | PathOp::InsertAfter
        )
    }
}

/// `jsonb_set(target, path, new_value, create_if_missing)`. `path` holds the text[] elements,
/// `None` for a NULL element.
pub fn jsonb_set(
    doc: &str,
    path: &[Option<&str>],
    new_value: &str,
    create_missing: bool,
) -> Result<String, JsonError> {
    deep_stack::run(&[doc, new_value], || {
        let root = parse_jsonb(doc)?;
        let replacement = parse_jsonb(new_value)?;
        if root.is_scalar() {
            return Err(JsonError::invalid_parameter("cannot set path in scalar"));
        }
        if (container_len(&root) == 0 && !create_missing) || path.is_empty() {
            return Ok(jsonb_text(&root));
        }
        let op = if create_missing {
            PathOp::Create
        } else {
            PathOp::Replace
        };
        let updated = set_path(root, path, 0, Some(&replacement), op)?;
        Ok(jsonb_text(&updated))
    })
}

/// `jsonb_insert(target, path, new_value, insert_after)`.
pub fn jsonb_insert(
    doc: &str,
    path: &[Option<&str>],
    new_value: &str,
    insert_after: bool,
) -> Result<String, JsonError> {
    deep_stack::run(&[doc, new_value], || {
        let root = parse_jsonb(doc)?;
        let inserted = parse_jsonb(new_value)?;
        if root.is_scalar() {
            return Err(JsonError::invalid_parameter("cannot set path in scalar"));
        }
        if path.is_empty() {
            return Ok(jsonb_text(&root));
        }
        let op = if insert_after {
            PathOp::InsertAfter
        } else {
            PathOp::InsertBefore
        };
        Ok(jsonb_text(&set_path(root, path, 0, Some(&inserted), op)?))
    })
}

/// `jsonb #- text[]` (`jsonb_delete_path`).
pub fn jsonb_delete_path(doc: &str, path: &[Option<&str>]) -> Result<String, JsonError> {
    deep_stack::run(&[doc], || {
        let root = parse_jsonb(doc)?;
        if root.is_scalar() {
            return Err(JsonError::invalid_parameter("cannot delete path in scalar"));
        }
        if container_len(&root) == 0 || path.is_empty() {
            return Ok(jsonb_text(&root));
        }
        Ok(jsonb_text(&set_path(root, path, 0, None, PathOp::Delete)?))
    })
}

fn container_len(node: &Node<'_>) -> usize {
    match &node.value {
        Value::Array(items) => items.len(),
        Value::Object(members) => members.len(),
        _ => 1,
    }
}

/// `setPath`: applies `op` at `path[level..]` inside `node`. Scalars on the way are left as
/// they are. `new_value` is `None` only for deletion.
fn set_path<'a>(
    node: Node<'a>,
    path: &[Option<&'a str>],
    level: usize,
    new_value: Option<&Node<'a>>,
    op: PathOp,
) -> Result<Node<'a>, JsonError> {
    if path[level].is_none() {
        return Err(JsonError::new(
            "22004",
            format!("path element at position {} is null", level + 1),
        ));
    }
    let value = match node.value {
        Value::Object(members) => set_path_object(members, path, level, new_value, op)?,
        Value::Array(items) => set_path_array(items, path, level, new_value, op)?,
        scalar => scalar,
    };
    Ok(Node::built(value))
}

fn set_path_object<'a>(
    members: Vec<(Cow<'a, str>, Node<'a>)>,
    path: &[Option<&'a str>],
    level: usize,
    new_value: Option<&Node<'a>>,
    op: PathOp,
) -> Result<Value<'a>, JsonError> {
    let key = path[level].expect("set_path checked for NULL");
    let at_end = level == path.len() - 1;
    let adds_here = op.adds_missing() && at_end;
    let mut found = false;
    let mut out = Vec::with_capacity(members.len() + 1);
    for (name, value) in members {
        if found || name != key {
            out.push((name, value));
            continue;
        }
        found = true;
        if !at_end {
            out.push((name, set_path(value, path, level + 1, new_value, op)?));
        } else if matches!(op, PathOp::InsertBefore | PathOp::InsertAfter) {
            return Err(JsonError::invalid_parameter("cannot replace existing key")
                .with_hint("Try using the function jsonb_set to replace key value."));
        } else if let Some(replacement) = new_value {
            out.push((name, replacement.clone()));
        }
    }
    if adds_here && !found {
        let replacement = new_value.expect("only deletion has no new value").clone();
        out.push((Cow::Borrowed(key), replacement));
        sort_members(&mut out);
    }
    Ok(Value::Object(out))
}

fn set_path_array<'a>(
    items: Vec<Node<'a>>,
    path: &[Option<&'a str>],
    level: usize,
    new_value: Option<&Node<'a>>,
    op: PathOp,
) -> Result<Value<'a>, JsonError> {
    let step = path[level].expect("set_path checked for NULL");
    let index = parse_c_int(step).ok_or_else(|| {
        JsonError::new(
            "22P02",
            format!(
                "path element at position {} is not an integer: \"{step}\"",
                level + 1
            ),
        )
    })?;
    let count = items.len() as i64;
    // `None` is PostgreSQL's INT_MIN: a negative index before the start, which prepends.
    let target: Option<i64> = match i64::from(index) {
        i if i < 0 && -i > count => None,
        i if i < 0 => Some(i + count),
        i => Some(i.min(count)),
    };
    let at_end = level == path.len() - 1;
    let mut out = Vec::with_capacity(items.len() + 1);
    let mut done = false;
    if (target.is_none() || count == 0) && at_end && op.adds_missing() {
        out.push(new_value.expect("adding needs a value").clone());
        done = true;
    }
    for (i, item) in items.into_iter().enumerate() {
        if target != Some(i as i64) {
            out.push(item);
            continue;
        }
        done = true;
        if !at_end {
            out.push(set_path(item, path, level + 1, new_value, op)?);
            continue;
        }
        match (op, new_value) {
            (PathOp::InsertBefore, Some(inserted)) => {
                out.push(inserted.clone());
                out.push(item);
            }
            (PathOp::InsertAfter, Some(inserted)) => {
                out.push(item);
                out.push(inserted.clone());
            }
            (PathOp::Replace | PathOp::Create, Some(replacement)) => out.push(replacement.clone()),
            _ => {}
        }
    }
    if op.adds_missing() && !done && at_end {
        out.push(new_value.expect("adding needs a value").clone());
    }
    Ok(Value::Array(out))
}

/// `jsonb_strip_nulls`: drops object fields whose value is null, at every level; nulls in
/// arrays stay.
pub fn jsonb_strip_nulls(doc: &str) -> Result<String, JsonError> {
    deep_stack::run(&[doc], || {
        let mut root = parse_jsonb(doc)?;
        strip_nulls(&mut root);
        Ok(jsonb_text(&root))
    })
}

fn strip_nulls(node: &mut Node<'_>) {
    match &mut node.value {
        Value::Object(members) => {
            members.retain(|(_, value)| !matches!(value.value, Value::Null));
            for (_, value) in members.iter_mut() {
                strip_nulls(value);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// `json_strip_nulls`: as `jsonb_strip_nulls`, but PostgreSQL re-emits the json compactly,
/// with no white space, numbers as written and strings re-escaped.
pub fn json_strip_nulls(doc: &str) -> Result<String, JsonError> {
    deep_stack::run(&[doc], || {
        let mut root = parse(doc, true)?;
        strip_nulls(&mut root);
        let mut out = String::with_capacity(doc.len());
        write_compact(&root, &mut out);
        Ok(out)
    })
}

fn write_compact(node: &Node<'_>, out: &mut String) {
    match &node.value {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_compact(item, out);
            }
            out.push(']');
        }
        Value::Object(members) => {
            out.push('{');
            for (i, (key, value)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_quoted(out, key);
                out.push(':');
                write_compact(value, out);
            }
            out.push('}');
        }
        scalar => write_scalar(scalar, out),
    }
}
