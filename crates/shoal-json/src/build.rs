//! Making json and jsonb from SQL values: `to_json`/`to_jsonb`, `json[b]_build_array`,
//! `json[b]_build_object` and the aggregates `json[b]_agg` and `json[b]_object_agg`. The SQL layer
//! hands each argument over as a `JsonScalar`; the formats are PostgreSQL's, which differ per
//! function: `{"a" : 1}` from json_build_object, `{ "a" : 1 }` from json_object_agg, `[1, 2]`
//! from both json array builders, and normal-form text from every jsonb one.

use std::borrow::Cow;

use shoal_numeric::Numeric;

use crate::error::JsonError;
use crate::escape::{quote_json_string, write_quoted};
use crate::jsonb_text::key_order;
use crate::lex::{Lexer, Token};

/// One SQL value given to a json builder, as the SQL layer renders it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonScalar<'a> {
    /// SQL NULL.
    Null,
    /// A boolean.
    Bool(bool),
    /// A number as its type prints it (`1.50`, `1e+100`, `NaN`, `-Infinity`); values that are
    /// not json numbers become json strings, as in PostgreSQL.
    Number(&'a str),
    /// Any other value as its text (text, dates, ...); becomes a json string.
    Text(&'a str),
    /// A json value's text, used as is.
    Json(&'a str),
    /// A jsonb value's text, used as is.
    Jsonb(&'a str),
    /// An SQL array or row already rendered as json (`array_to_json`, `row_to_json`);
    /// `json_agg` sets these apart with a line break, and they cannot be object keys.
    Composite(&'a str),
}

/// `to_json(value)`: the json text for one SQL value (SQL NULL gives json `null` here, as
/// inside the builders).
pub fn to_json(value: JsonScalar<'_>) -> String {
    match value {
        JsonScalar::Null => "null".to_string(),
        JsonScalar::Bool(true) => "true".to_string(),
        JsonScalar::Bool(false) => "false".to_string(),
        JsonScalar::Number(text) if is_json_number(text) => text.to_string(),
        JsonScalar::Number(text) | JsonScalar::Text(text) => quote_json_string(text),
        JsonScalar::Json(text) | JsonScalar::Jsonb(text) | JsonScalar::Composite(text) => {
            text.to_string()
        }
    }
}

/// `to_jsonb(value)`: the jsonb text for one SQL value.
pub fn to_jsonb(value: JsonScalar<'_>) -> Result<String, JsonError> {
    match value {
        // numeric's and float's special values print with an N, and become strings.
        JsonScalar::Number(text) if !text.contains(['N', 'n']) => {
            Ok(Numeric::parse(text)?.to_pg_text())
        }
        JsonScalar::Json(text) | JsonScalar::Jsonb(text) | JsonScalar::Composite(text) => {
            crate::jsonb_in(text)
        }
        other => Ok(to_json(other)),
    }
}

/// PostgreSQL's `IsValidJsonNumber`: the whole text is one json number token.
fn is_json_number(text: &str) -> bool {
    let mut lexer = Lexer::new(text, false);
    lexer.lex().is_ok() && lexer.token() == Token::Number && lexer.token_span() == (0, text.len())
}

/// An object key's text, or PostgreSQL's error when the value cannot be a key.
fn key_text<'a>(key: JsonScalar<'a>) -> Result<Cow<'a, str>, JsonError> {
    match key {
        JsonScalar::Text(text) | JsonScalar::Number(text) => Ok(Cow::Borrowed(text)),
        JsonScalar::Bool(flag) => Ok(Cow::Borrowed(if flag { "true" } else { "false" })),
        JsonScalar::Json(_) | JsonScalar::Jsonb(_) | JsonScalar::Composite(_) => Err(
            JsonError::invalid_parameter("key value must be scalar, not array, composite, or json"),
        ),
        JsonScalar::Null => unreachable!("callers report NULL keys in their own words"),
    }
}

fn check_even_arguments(args: &[JsonScalar<'_>], function: &str) -> Result<(), JsonError> {
    if args.len() % 2 != 0 {
        return Err(JsonError::invalid_parameter(
            "argument list must have even number of elements",
        )
        .with_hint(format!(
            "The arguments of {function}() must consist of alternating keys and values."
        )));
    }
    Ok(())
}

/// `json_build_array(VARIADIC "any")`.
pub fn json_build_array(values: &[JsonScalar<'_>]) -> String {
    let rendered: Vec<String> = values.iter().map(|value| to_json(*value)).collect();
    format!("[{}]", rendered.join(", "))
}

/// `jsonb_build_array(VARIADIC "any")`.
pub fn jsonb_build_array(values: &[JsonScalar<'_>]) -> Result<String, JsonError> {
    let rendered = values
        .iter()
        .map(|value| to_jsonb(*value))
        .collect::<Result<Vec<String>, JsonError>>()?;
    Ok(format!("[{}]", rendered.join(", ")))
}

/// `json_build_object(VARIADIC "any")`: alternating keys and values; keys kept in argument
/// order, duplicates included.
pub fn json_build_object(args: &[JsonScalar<'_>]) -> Result<String, JsonError> {
    check_even_arguments(args, "json_build_object")?;
    let mut out = String::from("{");
    for (pair_index, pair) in args.chunks(2).enumerate() {
        if pair[0] == JsonScalar::Null {
            return Err(JsonError::invalid_parameter(format!(
                "argument {} cannot be null",
                pair_index * 2 + 1
            ))
            .with_hint("Object keys should be text."));
        }
        if pair_index > 0 {
            out.push_str(", ");
        }
        write_quoted(&mut out, &key_text(pair[0])?);
        out.push_str(" : ");
        out.push_str(&to_json(pair[1]));
    }
    out.push('}');
    Ok(out)
}

/// `jsonb_build_object(VARIADIC "any")`: as jsonb, so keys sorted and the last duplicate kept.
pub fn jsonb_build_object(args: &[JsonScalar<'_>]) -> Result<String, JsonError> {
    check_even_arguments(args, "jsonb_build_object")?;
    let mut members = Vec::with_capacity(args.len() / 2);
    for (pair_index, pair) in args.chunks(2).enumerate() {
        if pair[0] == JsonScalar::Null {
            return Err(JsonError::invalid_parameter(format!(
                "argument {}: key must not be null",
                pair_index * 2 + 1
            )));
        }
        members.push((key_text(pair[0])?.into_owned(), to_jsonb(pair[1])?));
    }
    Ok(object_text(members))
}

/// Normal-form jsonb object text from keys and values already in jsonb text.
fn object_text(mut members: Vec<(String, String)>) -> String {
    // A stable sort keeps duplicates in arrival order; the last of each run is kept.
    members.sort_by(|a, b| key_order(&a.0, &b.0));
    let mut out = String::from("{");
    let mut first = true;
    for (i, (key, value)) in members.iter().enumerate() {
        if members.get(i + 1).is_some_and(|next| next.0 == *key) {
            continue;
        }
        if !first {
            out.push_str(", ");
        }
        first = false;
        write_quoted(&mut out, key);
        out.push_str(": ");
        out.push_str(value);
    }
    out.push('}');
    out
}

/// `json_agg(value)`'s running state.
#[derive(Clone, Debug, Default)]
pub struct JsonAgg {
    text: Option<String>,
}

impl JsonAgg {
    pub fn new() -> JsonAgg {
        JsonAgg::default()
    }

    /// Adds one row's value (SQL NULL as `JsonScalar::Null`).
    pub fn push(&mut self, value: JsonScalar<'_>) {
        match &mut self.text {
            None => self.text = Some(String::from("[")),
            Some(text) => {
                text.push_str(", ");
                if matches!(value, JsonScalar::Composite(_)) {
                    text.push_str("\n ");
                }
            }
        }
        let text = self.text.as_mut().expect("started above");
        text.push_str(&to_json(value));
    }

    /// The aggregate's result: `None` (SQL NULL) when no rows were added.
    pub fn finish(&self) -> Option<String> {
        self.text.as_ref().map(|text| format!("{text}]"))
    }
}

/// `jsonb_agg(value)`'s running state.
#[derive(Clone, Debug, Default)]
pub struct JsonbAgg {
    elements: Option<Vec<String>>,
}

impl JsonbAgg {
    pub fn new() -> JsonbAgg {
        JsonbAgg::default()
    }

    /// Adds one row's value (SQL NULL as `JsonScalar::Null`).
    pub fn push(&mut self, value: JsonScalar<'_>) -> Result<(), JsonError> {
        let rendered = to_jsonb(value)?;
        self.elements.get_or_insert_with(Vec::new).push(rendered);
        Ok(())
    }

    /// The aggregate's result: `None` (SQL NULL) when no rows were added.
    pub fn finish(&self) -> Option<String> {
        self.elements
            .as_ref()
            .map(|elements| format!("[{}]", elements.join(", ")))
    }
}

fn null_field_name() -> JsonError {
    JsonError::invalid_parameter("field name must not be null")
}

/// `json_object_agg(key, value)`'s running state.
#[derive(Clone, Debug, Default)]
pub struct JsonObjectAgg {
    text: Option<String>,
}

impl JsonObjectAgg {
    pub fn new() -> JsonObjectAgg {
        JsonObjectAgg::default()
    }

    /// Adds one row's pair; a NULL key is an error, a NULL value json `null`.
    pub fn push(&mut self, key: JsonScalar<'_>, value: JsonScalar<'_>) -> Result<(), JsonError> {
        if key == JsonScalar::Null {
            return Err(null_field_name());
        }
        let key = key_text(key)?;
        let text = match &mut self.text {
            Some(text) => {
                text.push_str(", ");
                text
            }
            None => self.text.insert(String::from("{ ")),
        };
        write_quoted(text, &key);
        text.push_str(" : ");
        text.push_str(&to_json(value));
        Ok(())
    }

    /// The aggregate's result: `None` (SQL NULL) when no rows were added.
    pub fn finish(&self) -> Option<String> {
        self.text.as_ref().map(|text| format!("{text} }}"))
    }
}

/// `jsonb_object_agg(key, value)`'s running state.
#[derive(Clone, Debug, Default)]
pub struct JsonbObjectAgg {
    members: Option<Vec<(String, String)>>,
}

impl JsonbObjectAgg {
    pub fn new() -> JsonbObjectAgg {
        JsonbObjectAgg::default()
    }

    /// Adds one row's pair; a NULL key is an error, a NULL value json `null`.
    pub fn push(&mut self, key: JsonScalar<'_>, value: JsonScalar<'_>) -> Result<(), JsonError> {
        if key == JsonScalar::Null {
            return Err(null_field_name());
        }
        let key = key_text(key)?.into_owned();
        let value = to_jsonb(value)?;
        self.members.get_or_insert_with(Vec::new).push((key, value));
        Ok(())
    }

    /// The aggregate's result: `None` (SQL NULL) when no rows were added.
    pub fn finish(&self) -> Option<String> {
        self.members.clone().map(object_text)
    }
}
