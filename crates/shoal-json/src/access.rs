//! Reading parts of a document: the `->`, `->>`, `#>` and `#>>` operators, the type and length
//! functions, and the set-returning functions that take a document apart (`*_object_keys`,
//! `*_array_elements[_text]`, `*_each[_text]`). json results are cut from the document's own
//! text, whitespace inside them included; jsonb results are normal-form text.

use crate::deep_stack;
use crate::error::JsonError;
use crate::jsonb_text::{jsonb_text, parse_jsonb};
use crate::lex::{Failure, Lexer, Token};
use crate::parse::{parse, Node, Value};
use crate::Flavor;

/// Parses `doc` as `flavor`, de-escaping strings (which the operators need).
fn load(flavor: Flavor, doc: &str) -> Result<Node<'_>, JsonError> {
    match flavor {
        Flavor::Json => parse(doc, true),
        Flavor::Jsonb => parse_jsonb(doc),
    }
}

/// A value of `doc` as a json or jsonb result.
fn render(flavor: Flavor, doc: &str, node: &Node<'_>) -> String {
    match flavor {
        Flavor::Json => doc[node.span.clone()].to_string(),
        Flavor::Jsonb => jsonb_text(node),
    }
}

/// A value as `->>` gives it: a string's content, NULL for json null, else its json text.
fn render_text(flavor: Flavor, doc: &str, node: &Node<'_>) -> Option<String> {
    match &node.value {
        Value::String(text) => Some(text.to_string()),
        Value::Null => None,
        _ => Some(render(flavor, doc, node)),
    }
}

/// The value of `key` in an object; the last one wins when json repeats a key.
fn object_field<'n, 'a>(node: &'n Node<'a>, key: &str) -> Option<&'n Node<'a>> {
    match &node.value {
        Value::Object(members) => members
            .iter()
            .rev()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value),
        _ => None,
    }
}

/// Element `index` of an array, negative counting from the end. jsonb's `->` also indexes a
/// top-level scalar as a one-element array (`'"a"'::jsonb -> 0` is `"a"`), as PostgreSQL does.
fn array_element<'n, 'a>(
    node: &'n Node<'a>,
    index: i32,
    scalar_is_array: bool,
) -> Option<&'n Node<'a>> {
    let items: &[Node<'a>] = match &node.value {
        Value::Array(items) => items,
        _ if scalar_is_array && node.is_scalar() => std::slice::from_ref(node),
        _ => return None,
    };
    let count = items.len() as i64;
    let mut position = i64::from(index);
    if position < 0 {
        if -position > count {
            return None;
        }
        position += count;
    }
    items.get(position as usize)
}

/// Follows a `#>` path: keys through objects, integers through arrays, NULL at a scalar. When
/// json repeats a key, PostgreSQL's streaming search keeps the last complete match in document
/// order, so each branch of a repeated key is tried, last first.
fn follow_path<'n, 'a>(node: &'n Node<'a>, path: &[&str]) -> Option<&'n Node<'a>> {
    let Some((step, rest)) = path.split_first() else {
        return Some(node);
    };
    match &node.value {
        Value::Object(members) => members
            .iter()
            .rev()
            .filter(|(name, _)| name == step)
            .find_map(|(_, value)| follow_path(value, rest)),
        Value::Array(_) => follow_path(array_element(node, parse_c_int(step)?, false)?, rest),
        _ => None,
    }
}

/// C's `strtoint(text, &end, 10)` accepting only a whole-string match: leading white space and
/// a sign allowed, trailing anything refused, out-of-`int` values refused.
pub(crate) fn parse_c_int(text: &str) -> Option<i32> {
    let unpadded = text.trim_start_matches([' ', '\t', '\n', '\u{b}', '\u{c}', '\r']);
    let (negative, digits) = match unpadded.as_bytes().first() {
        Some(b'-') => (true, &unpadded[1..]),
        Some(b'+') => (false, &unpadded[1..]),
        _ => (false, unpadded),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut magnitude: i64 = 0;
    for digit in digits.bytes() {
        magnitude = magnitude * 10 + i64::from(digit - b'0');
        if magnitude > 1 << 31 {
            return None;
        }
    }
    i32::try_from(if negative { -magnitude } else { magnitude }).ok()
}

/// `->` with a text key (`json_object_field`, `jsonb_object_field`).
pub fn field(flavor: Flavor, doc: &str, key: &str) -> Result<Option<String>, JsonError> {
    deep_stack::run(&[doc], || {
        let root = load(flavor, doc)?;
        Ok(object_field(&root, key).map(|value| render(flavor, doc, value)))
    })
}

/// `->>` with a text key (`json_object_field_text`, `jsonb_object_field_text`).
pub fn field_text(flavor: Flavor, doc: &str, key: &str) -> Result<Option<String>, JsonError> {
    deep_stack::run(&[doc], || {
        let root = load(flavor, doc)?;
        Ok(object_field(&root, key).and_then(|value| render_text(flavor, doc, value)))
    })
}

/// `->` with an integer (`json_array_element`, `jsonb_array_element`).
pub fn element(flavor: Flavor, doc: &str, index: i32) -> Result<Option<String>, JsonError> {
    deep_stack::run(&[doc], || {
        let root = load(flavor, doc)?;
        let found = array_element(&root, index, flavor == Flavor::Jsonb);
        Ok(found.map(|value| render(flavor, doc, value)))
    })
}

/// `->>` with an integer (`json_array_element_text`, `jsonb_array_element_text`).
pub fn element_text(flavor: Flavor, doc: &str, index: i32) -> Result<Option<String>, JsonError> {
    deep_stack::run(&[doc], || {
        let root = load(flavor, doc)?;
        let found = array_element(&root, index, flavor == Flavor::Jsonb);
        Ok(found.and_then(|value| render_text(flavor, doc, value)))
    })
}

/// `#>` (`json_extract_path`, `jsonb_extract_path`). A NULL path element makes the result NULL;
/// the caller checks for that before calling.
pub fn path(flavor: Flavor, doc: &str, path: &[&str]) -> Result<Option<String>, JsonError> {
    deep_stack::run(&[doc], || {
        let root = load(flavor, doc)?;
        if path.is_empty() {
            return Ok(Some(whole_document(flavor, doc, &root)));
        }
        Ok(follow_path(&root, path).map(|value| render(flavor, doc, value)))
    })
}

/// `#>>` (`json_extract_path_text`, `jsonb_extract_path_text`).
pub fn path_text(flavor: Flavor, doc: &str, path: &[&str]) -> Result<Option<String>, JsonError> {
    deep_stack::run(&[doc], || {
        let root = load(flavor, doc)?;
        if path.is_empty() {
            return Ok(match &root.value {
                Value::String(text) => Some(text.to_string()),
                Value::Null => None,
                _ => Some(whole_document(flavor, doc, &root)),
            });
        }
        Ok(follow_path(&root, path).and_then(|value| render_text(flavor, doc, value)))
    })
}

/// What an empty path yields. PostgreSQL returns a json scalar from the start of the input (so
/// leading white space stays) but a json container from its own first bracket.
fn whole_document(flavor: Flavor, doc: &str, root: &Node<'_>) -> String {
    match flavor {
        Flavor::Json if root.is_scalar() => doc[..root.span.end].to_string(),
        _ => render(flavor, doc, root),
    }
}

/// What `->>`/`#>>` give for a json or jsonb value: a string's content, `None` for json null,
/// else the value's text (normal form for jsonb).
pub fn to_text_value(flavor: Flavor, value_json: &str) -> Result<Option<String>, JsonError> {
    deep_stack::run(&[value_json], || {
        let root = load(flavor, value_json)?;
        Ok(render_text(flavor, value_json, &root))
    })
}

/// `json_typeof` / `jsonb_typeof`. Like PostgreSQL, only the first token is read.
pub fn type_of(_flavor: Flavor, doc: &str) -> Result<&'static str, JsonError> {
    let mut lexer = Lexer::new(doc, false);
    lexer.lex()?;
    Ok(match lexer.token() {
        Token::ObjectStart => "object",
        Token::ArrayStart => "array",
        Token::String => "string",
        Token::Number => "number",
        Token::True | Token::False => "boolean",
        Token::Null => "null",
        // Not valid json; PostgreSQL's type functions never see such text.
        Token::End => return Err(lexer.error(Failure::ExpectedMore)),
        _ => return Err(lexer.error(Failure::ExpectedJson)),
    })
}

/// `json_array_length` / `jsonb_array_length`.
pub fn array_length(flavor: Flavor, doc: &str) -> Result<i32, JsonError> {
    deep_stack::run(&[doc], || {
        let root = load_shallow(flavor, doc)?;
        match &root.value {
            Value::Array(items) => Ok(items.len() as i32),
            Value::Object(_) => Err(JsonError::invalid_parameter(
                "cannot get array length of a non-array",
            )),
            _ => Err(JsonError::invalid_parameter(
                "cannot get array length of a scalar",
            )),
        }
    })
}

/// Parses without de-escaping json strings, for the functions PostgreSQL runs that way.
fn load_shallow(flavor: Flavor, doc: &str) -> Result<Node<'_>, JsonError> {
    match flavor {
        Flavor::Json => parse(doc, false),
        Flavor::Jsonb => parse_jsonb(doc),
    }
}

/// `json_object_keys` / `jsonb_object_keys`: json keys in document order, duplicates included;
/// jsonb keys in jsonb order.
pub fn object_keys(flavor: Flavor, doc: &str) -> Result<Vec<String>, JsonError> {
    deep_stack::run(&[doc], || {
        let root = load(flavor, doc)?;
        let name = function_name(flavor, "object_keys");
        match &root.value {
            Value::Object(members) => Ok(members.iter().map(|(key, _)| key.to_string()).collect()),
            Value::Array(_) => Err(JsonError::invalid_parameter(format!(
                "cannot call {name} on an array"
            ))),
            _ => Err(JsonError::invalid_parameter(format!(
                "cannot call {name} on a scalar"
            ))),
        }
    })
}

fn function_name(flavor: Flavor, suffix: &str) -> String {
    match flavor {
        Flavor::Json => format!("json_{suffix}"),
        Flavor::Jsonb => format!("jsonb_{suffix}"),
    }
}

/// The elements of a top-level array, or PostgreSQL's error for the function named `suffix`.
fn elements_of<'n, 'a>(
    flavor: Flavor,
    root: &'n Node<'a>,
    suffix: &str,
) -> Result<&'n [Node<'a>], JsonError> {
    match (&root.value, flavor) {
        (Value::Array(items), _) => Ok(items),
        (Value::Object(_), Flavor::Json) => Err(JsonError::invalid_parameter(format!(
            "cannot call json_{suffix} on a non-array"
        ))),
        (_, Flavor::Json) => Err(JsonError::invalid_parameter(format!(
            "cannot call json_{suffix} on a scalar"
        ))),
        (Value::Object(_), Flavor::Jsonb) => Err(JsonError::invalid_parameter(
            "cannot extract elements from an object",
        )),
        (_, Flavor::Jsonb) => Err(JsonError::invalid_parameter(
            "cannot extract elements from a scalar",
        )),
    }
}

/// `json_array_elements` / `jsonb_array_elements`.
pub fn array_elements(flavor: Flavor, doc: &str) -> Result<Vec<String>, JsonError> {
    deep_stack::run(&[doc], || {
        let root = load_shallow(flavor, doc)?;
        let items = elements_of(flavor, &root, "array_elements")?;
        Ok(items.iter().map(|item| render(flavor, doc, item)).collect())
    })
}

/// `json_array_elements_text` / `jsonb_array_elements_text`; json null elements are `None`.
pub fn array_elements_text(flavor: Flavor, doc: &str) -> Result<Vec<Option<String>>, JsonError> {
    deep_stack::run(&[doc], || {
        let root = load(flavor, doc)?;
        let items = elements_of(flavor, &root, "array_elements_text")?;
        Ok(items
            .iter()
            .map(|item| render_text(flavor, doc, item))
            .collect())
    })
}

/// The members of a top-level object, or PostgreSQL's error for the function named `suffix`.
fn members_of<'n, 'a>(
    flavor: Flavor,
    root: &'n Node<'a>,
    suffix: &str,
) -> Result<&'n [(std::borrow::Cow<'a, str>, Node<'a>)], JsonError> {
    match (&root.value, flavor) {
        (Value::Object(members), _) => Ok(members),
        (Value::Array(_), Flavor::Json) => Err(JsonError::invalid_parameter(
            "cannot deconstruct an array as an object",
        )),
        (_, Flavor::Json) => Err(JsonError::invalid_parameter("cannot deconstruct a scalar")),
        (_, Flavor::Jsonb) => Err(JsonError::invalid_parameter(format!(
            "cannot call jsonb_{suffix} on a non-object"
        ))),
    }
}

/// `json_each` / `jsonb_each`: (key, value) rows.
pub fn each(flavor: Flavor, doc: &str) -> Result<Vec<(String, String)>, JsonError> {
    deep_stack::run(&[doc], || {
        let root = load(flavor, doc)?;
        let members = members_of(flavor, &root, "each")?;
        Ok(members
            .iter()
            .map(|(key, value)| (key.to_string(), render(flavor, doc, value)))
            .collect())
    })
}

/// `json_each_text` / `jsonb_each_text`: (key, value as text) rows, json null values `None`.
pub fn each_text(flavor: Flavor, doc: &str) -> Result<Vec<(String, Option<String>)>, JsonError> {
    deep_stack::run(&[doc], || {
        let root = load(flavor, doc)?;
        let members = members_of(flavor, &root, "each_text")?;
        Ok(members
            .iter()
            .map(|(key, value)| (key.to_string(), render_text(flavor, doc, value)))
            .collect())
    })
}
