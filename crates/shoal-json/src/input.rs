//! The input functions of json and jsonb and the cast between them: json keeps the client's text
//! once it parses; jsonb becomes its normal-form text.

use crate::deep_stack;
use crate::error::JsonError;
use crate::jsonb_text::{jsonb_text, parse_jsonb};
use crate::parse::parse;

/// Input of `json` (`json_in`): checks the text; the stored value is the text itself.
pub fn validate_json(text: &str) -> Result<(), JsonError> {
    deep_stack::run(&[text], || parse(text, false).map(|_| ()))
}

/// Input of `jsonb` (`jsonb_in`): the normal-form text PostgreSQL would print for the value.
pub fn jsonb_in(text: &str) -> Result<String, JsonError> {
    deep_stack::run(&[text], || parse_jsonb(text).map(|root| jsonb_text(&root)))
}

/// The `json::jsonb` cast; PostgreSQL parses the json text again, exactly as `jsonb_in`.
pub fn json_to_jsonb(json_text: &str) -> Result<String, JsonError> {
    jsonb_in(json_text)
}
