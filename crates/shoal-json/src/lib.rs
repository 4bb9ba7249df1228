//! PostgreSQL 15's `json` and `jsonb` types for Shoal, over their text. Shoal stores a json value
//! as the client's text (validated, kept byte for byte) and a jsonb value as the text PostgreSQL
//! prints for it (its normal form). Every function here takes and returns text, so the SQL layer
//! can expose each as a scalar function over string columns; results, errors (SQLSTATE, message,
//! DETAIL, HINT, CONTEXT) and formats are PostgreSQL's.
//!
//! Modules by topic: `lex` and `parse` read json as PostgreSQL does; `jsonb_text` holds jsonb's
//! normal form; `input` the types' input functions; `access` the operators and functions that
//! read a document; `compare` and `containment` jsonb's ordering and `@>`/`?` operators;
//! `modify` the functions that make a new jsonb; `build` the constructors and aggregates;
//! `pretty` `jsonb_pretty`; `deep_stack` keeps deep nesting from overflowing the stack.

mod access;
mod build;
mod compare;
mod containment;
mod deep_stack;
mod error;
mod escape;
mod input;
mod jsonb_text;
mod lex;
mod modify;
mod parse;
mod pretty;
mod sort_key;

pub use access::{
    array_elements, array_elements_text, array_length, each, each_text, element, element_text,
    field, field_text, object_keys, path, path_text, to_text_value, type_of,
};
pub use build::{
    json_build_array, json_build_object, jsonb_build_array, jsonb_build_object, to_json, to_jsonb,
    JsonAgg, JsonObjectAgg, JsonScalar, JsonbAgg, JsonbObjectAgg,
};
pub use compare::{jsonb_cmp, jsonb_eq, jsonb_equality_key};
pub use containment::{jsonb_contains, jsonb_exists, jsonb_exists_all, jsonb_exists_any};
pub use error::JsonError;
pub use escape::quote_json_string;
pub use input::{json_to_jsonb, jsonb_in, validate_json};
pub use modify::{
    json_strip_nulls, jsonb_concat, jsonb_delete_index, jsonb_delete_key, jsonb_delete_keys,
    jsonb_delete_path, jsonb_insert, jsonb_set, jsonb_strip_nulls,
};
pub use pretty::jsonb_pretty;
pub use sort_key::jsonb_sort_key;

/// Which SQL type a text argument holds, for the functions both types share.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Flavor {
    /// `json`: the client's text; results are cut from it.
    Json,
    /// `jsonb`: normal-form text; results are normal-form text.
    Jsonb,
}
