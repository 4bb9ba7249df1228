//! `->`, `->>`, `#>`, `#>>`, the type and length functions and the set-returning functions, for
//! json and jsonb. Expected values come from PostgreSQL 15 (json.out, jsonb.out and a server).

use shoal_json::Flavor::{Json, Jsonb};
use shoal_json::{
    array_elements, array_elements_text, array_length, each, each_text, element, element_text,
    field, field_text, object_keys, path, path_text, to_text_value, type_of,
};

fn some(text: &str) -> Result<Option<String>, shoal_json::JsonError> {
    Ok(Some(text.to_string()))
}

#[test]
fn field_by_key() {
    let doc = r#"{"a": {"b":{"c": "foo"}}}"#;
    assert_eq!(field(Json, doc, "a"), some(r#"{"b":{"c": "foo"}}"#));
    assert_eq!(
        field(Jsonb, &shoal_json::jsonb_in(doc).unwrap(), "a"),
        some(r#"{"b": {"c": "foo"}}"#)
    );
    // json keeps the last of duplicate keys, as jsonb does.
    assert_eq!(field(Json, r#"{"a":1, "a":2}"#, "a"), some("2"));
    assert_eq!(field_text(Json, r#"{"a":1, "a":2}"#, "a"), some("2"));
    // A string value: json gives the source text with its escapes, jsonb re-escapes.
    let doc = r#"{"a":"x\u0041\"y"}"#;
    assert_eq!(field(Json, doc, "a"), some(r#""x\u0041\"y""#));
    assert_eq!(field_text(Json, doc, "a"), some("xA\"y"));
    assert_eq!(field(Jsonb, doc, "a"), some(r#""xA\"y""#));
    assert_eq!(field_text(Jsonb, doc, "a"), some("xA\"y"));
    // Missing keys, non-objects and json null under ->> are NULL.
    assert_eq!(field(Jsonb, r#"{"a":1}"#, "b"), Ok(None));
    assert_eq!(field(Json, "[1]", "a"), Ok(None));
    assert_eq!(field(Json, r#""x""#, "a"), Ok(None));
    assert_eq!(field(Jsonb, r#"{"a":null}"#, "a"), some("null"));
    assert_eq!(field_text(Jsonb, r#"{"a":null}"#, "a"), Ok(None));
    assert_eq!(
        field(Jsonb, r#"{"a":{"b":[1, 2.50]}}"#, "a"),
        some(r#"{"b": [1, 2.50]}"#)
    );
    // Whitespace inside a json value is kept.
    assert_eq!(
        field(Json, r#"{"a" : { "b" : 2 } }"#, "a"),
        some(r#"{ "b" : 2 }"#)
    );
}

#[test]
fn element_by_index() {
    assert_eq!(element(Json, "[1,2,3]", -1), some("3"));
    assert_eq!(element(Json, "[1,2,3]", 3), Ok(None));
    assert_eq!(element(Json, "[1,2,3]", -3), some("1"));
    assert_eq!(element(Json, "[1,2,3]", -4), Ok(None));
    assert_eq!(element(Json, r#"{"a":1}"#, 0), Ok(None));
    assert_eq!(element(Json, "1", 0), Ok(None));
    assert_eq!(element(Json, "  [ 1 , \"a\" ] ", 1), some("\"a\""));
    assert_eq!(
        element_text(Json, r#"[1, {"a" : 1.0}]"#, 1),
        some(r#"{"a" : 1.0}"#)
    );
    assert_eq!(
        element_text(Jsonb, r#"[1, {"a" : 1.0}]"#, 1),
        some(r#"{"a": 1.0}"#)
    );
    assert_eq!(element_text(Json, "[1, null]", 1), Ok(None));
    assert_eq!(element_text(Jsonb, r#"[1, "x"]"#, 1), some("x"));
    assert_eq!(element_text(Jsonb, r#"[1, "x"]"#, 5), Ok(None));
    // jsonb indexes a top-level scalar as a one-element array.
    assert_eq!(element(Jsonb, r#""foo""#, 0), some(r#""foo""#));
    assert_eq!(element(Jsonb, "1", -1), some("1"));
    assert_eq!(element(Jsonb, r#""x""#, 1), Ok(None));
    assert_eq!(element(Jsonb, r#""x""#, -2), Ok(None));
    assert_eq!(element_text(Jsonb, "1", 0), some("1"));
}

#[test]
fn extract_path() {
    let doc = r#"{"a": {"b":{"c": "foo"}}}"#;
    assert_eq!(path(Json, doc, &["a", "b"]), some(r#"{"c": "foo"}"#));
    assert_eq!(path_text(Json, doc, &["a", "b", "c"]), some("foo"));
    assert_eq!(path(Jsonb, doc, &["a", "b"]), some(r#"{"c": "foo"}"#));
    assert_eq!(path_text(Jsonb, doc, &["a", "b", "c"]), some("foo"));
    let doc = r#"{"a": [0,1,2]}"#;
    for flavor in [Json, Jsonb] {
        assert_eq!(path(flavor, doc, &["a", "-1"]), some("2"));
        assert_eq!(path(flavor, doc, &["a", "x"]), Ok(None));
        assert_eq!(path(flavor, doc, &["a", "1", "c"]), Ok(None));
        // Indexes are read like C's strtol: leading blanks and a sign are fine.
        assert_eq!(path(flavor, "[1,2,3]", &[" 1"]), some("2"));
        assert_eq!(path(flavor, "[1,2,3]", &["+1"]), some("2"));
        assert_eq!(path(flavor, "[1,2,3]", &["1 "]), Ok(None));
        assert_eq!(path(flavor, "[1,2,3]", &["-4"]), Ok(None));
        assert_eq!(path(flavor, "[1,2,3]", &["99999999999"]), Ok(None));
        assert_eq!(path(flavor, "[1,2,3]", &[""]), Ok(None));
    }
    let doc = r#"{"a":[1,{"b":"x"}]}"#;
    assert_eq!(path_text(Jsonb, doc, &["a", "1", "b"]), some("x"));
    assert_eq!(path_text(Jsonb, doc, &["a", "-1"]), some(r#"{"b": "x"}"#));
    // With repeated json keys, the last complete match in document order wins.
    assert_eq!(
        path(Json, r#"{"a":{"b":1},"a":{"c":2}}"#, &["a", "b"]),
        some("1")
    );
    assert_eq!(
        path(Json, r#"{"a":{"b":1},"a":{"b":2}}"#, &["a", "b"]),
        some("2")
    );
    assert_eq!(
        path_text(Json, r#"{"a":[1],"a":"x"}"#, &["a", "0"]),
        some("1")
    );
    assert_eq!(
        field(Json, r#"{"a":{"b":1},"a":{"c":2}}"#, "a"),
        some(r#"{"c":2}"#)
    );
    // A jsonb top-level scalar is not an array for #>.
    assert_eq!(path(Jsonb, "1", &["0"]), Ok(None));
    assert_eq!(path(Jsonb, "1", &["a"]), Ok(None));
    assert_eq!(path(Jsonb, "[1]", &["a"]), Ok(None));
}

#[test]
fn empty_path_is_the_whole_document() {
    assert_eq!(path(Json, r#"  {"a":1}  "#, &[]), some(r#"{"a":1}"#));
    assert_eq!(path(Json, "[1,2]", &[]), some("[1,2]"));
    // PostgreSQL returns a json scalar from the start of the input, leading blanks included.
    assert_eq!(path(Json, " 1 ", &[]), some(" 1"));
    assert_eq!(path(Json, " \"x\" ", &[]), some(" \"x\""));
    assert_eq!(path(Json, "\n  1  ", &[]), some("\n  1"));
    assert_eq!(path_text(Json, " 1.50 ", &[]), some(" 1.50"));
    assert_eq!(path_text(Json, "1", &[]), some("1"));
    assert_eq!(path_text(Json, "  null ", &[]), Ok(None));
    assert_eq!(path_text(Json, r#"  "a\u0041" "#, &[]), some("aA"));
    assert_eq!(path_text(Json, "  [1] ", &[]), some("[1]"));
    assert_eq!(path(Jsonb, r#""a""#, &[]), some(r#""a""#));
    assert_eq!(path_text(Jsonb, r#""a""#, &[]), some("a"));
    assert_eq!(path_text(Jsonb, "null", &[]), Ok(None));
}

#[test]
fn json_operators_check_escapes() {
    // json input accepts these; the operators de-escape the whole document and fail.
    let error = field(Json, r#"{"a":"\ud83d\ud83d", "b":1}"#, "b").unwrap_err();
    assert_eq!(error.sqlstate, "22P02");
    assert_eq!(
        error.detail.as_deref(),
        Some("Unicode high surrogate must not follow a high surrogate.")
    );
    assert_eq!(
        error.context.as_deref(),
        Some(r#"JSON data, line 1: {"a":"\ud83d\ud83d..."#)
    );
    let error = element(Json, r#"["\u0000"]"#, 1).unwrap_err();
    assert_eq!(error.sqlstate, "22P05");
    assert_eq!(error.message, "unsupported Unicode escape sequence");
    assert_eq!(
        error.detail.as_deref(),
        Some("\\u0000 cannot be converted to text.")
    );
    assert_eq!(
        error.context.as_deref(),
        Some(r#"JSON data, line 1: ["\u0000..."#)
    );
    // ... except json_array_length and json_array_elements, which PostgreSQL runs without.
    assert_eq!(array_length(Json, r#"["\ud83d"]"#), Ok(1));
    assert_eq!(
        array_elements(Json, r#"["\ud83d"]"#),
        Ok(vec![r#""\ud83d""#.to_string()])
    );
    assert!(array_elements_text(Json, r#"["\ud83d"]"#).is_err());
    assert!(each(Json, r#"{"a":"\ud83d"}"#).is_err());
    assert!(object_keys(Json, r#"{"\ud83d":1}"#).is_err());
}

#[test]
fn text_of_a_value() {
    assert_eq!(to_text_value(Json, r#""x\u0041""#), some("xA"));
    assert_eq!(to_text_value(Json, "null"), Ok(None));
    assert_eq!(to_text_value(Json, "[1,2]"), some("[1,2]"));
    assert_eq!(to_text_value(Jsonb, "1.50"), some("1.50"));
    assert_eq!(
        to_text_value(Jsonb, r#"{"b":1,"a":2}"#),
        some(r#"{"a": 2, "b": 1}"#)
    );
}

#[test]
fn type_names() {
    let cases = [
        (r#"{"a":1}"#, "object"),
        ("[1,2]", "array"),
        (r#""x""#, "string"),
        ("-1", "number"),
        ("1.0", "number"),
        ("false", "boolean"),
        ("true", "boolean"),
        ("null", "null"),
    ];
    for (doc, expected) in cases {
        assert_eq!(type_of(Json, doc), Ok(expected));
        assert_eq!(type_of(Jsonb, doc), Ok(expected));
    }
    // Like PostgreSQL, json_typeof reads only the first token.
    assert_eq!(type_of(Json, " [1,"), Ok("array"));
    let error = type_of(Json, "\"x").unwrap_err();
    assert_eq!(error.detail.as_deref(), Some("Token \"\"x\" is invalid."));
}

#[test]
fn array_lengths() {
    assert_eq!(array_length(Json, "[1,2,[3,4]]"), Ok(3));
    assert_eq!(array_length(Jsonb, "[]"), Ok(0));
    for flavor in [Json, Jsonb] {
        let error = array_length(flavor, "1").unwrap_err();
        assert_eq!(
            (error.sqlstate, error.message.as_str()),
            ("22023", "cannot get array length of a scalar")
        );
        let error = array_length(flavor, "{}").unwrap_err();
        assert_eq!(
            (error.sqlstate, error.message.as_str()),
            ("22023", "cannot get array length of a non-array")
        );
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| item.to_string()).collect()
}

#[test]
fn keys_of_objects() {
    assert_eq!(
        object_keys(Json, r#"{"b":1, "a":2, "b":3}"#),
        Ok(strings(&["b", "a", "b"]))
    );
    assert_eq!(
        object_keys(Jsonb, r#"{"b":1, "a":2, "aa":3, "b":4}"#),
        Ok(strings(&["a", "b", "aa"]))
    );
    let message = |flavor, doc| object_keys(flavor, doc).unwrap_err().message;
    assert_eq!(
        message(Json, "1"),
        "cannot call json_object_keys on a scalar"
    );
    assert_eq!(
        message(Json, "[]"),
        "cannot call json_object_keys on an array"
    );
    assert_eq!(
        message(Jsonb, "1"),
        "cannot call jsonb_object_keys on a scalar"
    );
    assert_eq!(
        message(Jsonb, "[]"),
        "cannot call jsonb_object_keys on an array"
    );
}

#[test]
fn elements_of_arrays() {
    let doc = r#"[ [1, 2] , "x\u0041", null, 1.50]"#;
    assert_eq!(
        array_elements(Json, doc),
        Ok(strings(&["[1, 2]", r#""x\u0041""#, "null", "1.50"]))
    );
    assert_eq!(
        array_elements(Jsonb, doc),
        Ok(strings(&["[1, 2]", r#""xA""#, "null", "1.50"]))
    );
    let texts = vec![
        Some("[1, 2]".to_string()),
        Some("xA".to_string()),
        None,
        Some("1.50".to_string()),
    ];
    assert_eq!(array_elements_text(Json, doc), Ok(texts.clone()));
    assert_eq!(array_elements_text(Jsonb, doc), Ok(texts));
    let message = |result: Result<Vec<String>, shoal_json::JsonError>| result.unwrap_err().message;
    assert_eq!(
        message(array_elements(Json, "1")),
        "cannot call json_array_elements on a scalar"
    );
    assert_eq!(
        message(array_elements(Json, "{}")),
        "cannot call json_array_elements on a non-array"
    );
    assert_eq!(
        message(array_elements(Jsonb, "1")),
        "cannot extract elements from a scalar"
    );
    assert_eq!(
        message(array_elements(Jsonb, "{}")),
        "cannot extract elements from an object"
    );
    let error = array_elements_text(Json, "{}").unwrap_err();
    assert_eq!(
        error.message,
        "cannot call json_array_elements_text on a non-array"
    );
    let error = array_elements_text(Jsonb, "{}").unwrap_err();
    assert_eq!(error.message, "cannot extract elements from an object");
}

#[test]
fn each_pair() {
    let doc = r#"{"b": [1, 2] , "a":"x\u0041", "c": null}"#;
    let pairs = |items: &[(&str, &str)]| -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    assert_eq!(
        each(Json, doc),
        Ok(pairs(&[
            ("b", "[1, 2]"),
            ("a", r#""x\u0041""#),
            ("c", "null")
        ]))
    );
    assert_eq!(
        each(Jsonb, doc),
        Ok(pairs(&[("a", r#""xA""#), ("b", "[1, 2]"), ("c", "null")]))
    );
    let texts = |items: &[(&str, Option<&str>)]| -> Vec<(String, Option<String>)> {
        items
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
            .collect()
    };
    assert_eq!(
        each_text(Json, doc),
        Ok(texts(&[
            ("b", Some("[1, 2]")),
            ("a", Some("xA")),
            ("c", None)
        ]))
    );
    assert_eq!(
        each_text(Jsonb, doc),
        Ok(texts(&[
            ("a", Some("xA")),
            ("b", Some("[1, 2]")),
            ("c", None)
        ]))
    );
    assert_eq!(
        each(Json, "1").unwrap_err().message,
        "cannot deconstruct a scalar"
    );
    assert_eq!(
        each(Json, "[]").unwrap_err().message,
        "cannot deconstruct an array as an object"
    );
    assert_eq!(
        each_text(Json, "[]").unwrap_err().message,
        "cannot deconstruct an array as an object"
    );
    assert_eq!(
        each(Jsonb, "1").unwrap_err().message,
        "cannot call jsonb_each on a non-object"
    );
    assert_eq!(
        each(Jsonb, "[]").unwrap_err().message,
        "cannot call jsonb_each on a non-object"
    );
    assert_eq!(
        each_text(Jsonb, "[]").unwrap_err().message,
        "cannot call jsonb_each_text on a non-object"
    );
}
