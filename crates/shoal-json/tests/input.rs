//! json and jsonb input: accepted texts, jsonb's normal form, and the exact errors (SQLSTATE,
//! DETAIL, CONTEXT) PostgreSQL 15 reports for bad input. Expected values come from PostgreSQL
//! 15's regression outputs (json.out, jsonb.out, json_encoding.out) and a PostgreSQL 15 server.

use shoal_json::{json_to_jsonb, jsonb_in, validate_json, JsonError};

fn json_error(text: &str) -> JsonError {
    validate_json(text).expect_err(text)
}

/// (input, DETAIL, CONTEXT) for json input errors.
const JSON_SYNTAX_ERRORS: &[(&str, &str, &str)] = &[
    (
        "",
        "The input string ended unexpectedly.",
        "JSON data, line 1: ",
    ),
    (
        "   ",
        "The input string ended unexpectedly.",
        "JSON data, line 1:    ",
    ),
    (
        "{",
        "The input string ended unexpectedly.",
        "JSON data, line 1: {",
    ),
    (
        "{\"a\"",
        "The input string ended unexpectedly.",
        "JSON data, line 1: {\"a\"",
    ),
    (
        "{\"a\" 1}",
        "Expected \":\", but found \"1\".",
        "JSON data, line 1: {\"a\" 1...",
    ),
    (
        "{\"a\":1,}",
        "Expected string, but found \"}\".",
        "JSON data, line 1: {\"a\":1,}",
    ),
    (
        "{1:2}",
        "Expected string or \"}\", but found \"1\".",
        "JSON data, line 1: {1...",
    ),
    (
        "[1,]",
        "Expected JSON value, but found \"]\".",
        "JSON data, line 1: [1,]",
    ),
    (
        "[}",
        "Expected JSON value, but found \"}\".",
        "JSON data, line 1: [}",
    ),
    (
        "{]",
        "Expected string or \"}\", but found \"]\".",
        "JSON data, line 1: {]",
    ),
    (
        "truex",
        "Token \"truex\" is invalid.",
        "JSON data, line 1: truex",
    ),
    ("nul", "Token \"nul\" is invalid.", "JSON data, line 1: nul"),
    (
        "1 2",
        "Expected end of input, but found \"2\".",
        "JSON data, line 1: 1 2",
    ),
    ("01", "Token \"01\" is invalid.", "JSON data, line 1: 01"),
    ("-", "Token \"-\" is invalid.", "JSON data, line 1: -"),
    ("1.", "Token \"1.\" is invalid.", "JSON data, line 1: 1."),
    ("1e", "Token \"1e\" is invalid.", "JSON data, line 1: 1e"),
    (".5", "Token \".\" is invalid.", "JSON data, line 1: ...."),
    (
        "1.5e+",
        "Token \"1.5e+\" is invalid.",
        "JSON data, line 1: 1.5e+",
    ),
    (
        "\"abc",
        "Token \"\"abc\" is invalid.",
        "JSON data, line 1: \"abc",
    ),
    (
        "\"a\tb\"",
        "Character with value 0x09 must be escaped.",
        "JSON data, line 1: \"a...",
    ),
    (
        "\"\\x\"",
        "Escape sequence \"\\x\" is invalid.",
        "JSON data, line 1: \"\\x...",
    ),
    (
        "\"\\u12\"",
        "\"\\u\" must be followed by four hexadecimal digits.",
        "JSON data, line 1: \"\\u12\"",
    ),
    (
        "\"\\u12x4\"",
        "\"\\u\" must be followed by four hexadecimal digits.",
        "JSON data, line 1: \"\\u12x...",
    ),
    (
        "\"\\",
        "Token \"\"\\\" is invalid.",
        "JSON data, line 1: \"\\",
    ),
    ("@", "Token \"@\" is invalid.", "JSON data, line 1: @"),
    ("é", "Token \"é\" is invalid.", "JSON data, line 1: é"),
    (
        "{\"a\":1,\n \"b\":2,\n \"c\" x}",
        "Token \"x\" is invalid.",
        "JSON data, line 3:  \"c\" x...",
    ),
    (
        "{\"abcdefghijklmnopqrstuvwxyz\": \"abcdefghijklmnopqrstuvwxyz\", \"k\": tru}",
        "Token \"tru\" is invalid.",
        "JSON data, line 1: ...stuvwxyz\": \"abcdefghijklmnopqrstuvwxyz\", \"k\": tru...",
    ),
    (
        "{\"a\":1}x",
        "Token \"x\" is invalid.",
        "JSON data, line 1: {\"a\":1}x",
    ),
    (
        "[1] ]",
        "Expected end of input, but found \"]\".",
        "JSON data, line 1: [1] ]",
    ),
    (
        "{\"a\":1 \"b\":2}",
        "Expected \",\" or \"}\", but found \"\"b\"\".",
        "JSON data, line 1: {\"a\":1 \"b\"...",
    ),
    (
        "{\"a\"::1}",
        "Expected JSON value, but found \":\".",
        "JSON data, line 1: {\"a\"::...",
    ),
    (
        "{,}",
        "Expected string or \"}\", but found \",\".",
        "JSON data, line 1: {,...",
    ),
    (
        "[,]",
        "Expected JSON value, but found \",\".",
        "JSON data, line 1: [,...",
    ),
    (
        ":",
        "Expected JSON value, but found \":\".",
        "JSON data, line 1: :",
    ),
    (
        "[1 2]",
        "Expected \",\" or \"]\", but found \"2\".",
        "JSON data, line 1: [1 2...",
    ),
    (
        " [1, 2, tru",
        "Token \"tru\" is invalid.",
        "JSON data, line 1:  [1, 2, tru",
    ),
    // From json.out.
    (
        "{\"abc\",1}",
        "Expected \":\", but found \",\".",
        "JSON data, line 1: {\"abc\",...",
    ),
    (
        "{\"abc\"=1}",
        "Token \"=\" is invalid.",
        "JSON data, line 1: {\"abc\"=...",
    ),
    (
        "{\"abc\"::1}",
        "Expected JSON value, but found \":\".",
        "JSON data, line 1: {\"abc\"::...",
    ),
    (
        "{\"abc\":1:2}",
        "Expected \",\" or \"}\", but found \":\".",
        "JSON data, line 1: {\"abc\":1:...",
    ),
    (
        "{\"abc\":1,3}",
        "Expected string, but found \"3\".",
        "JSON data, line 1: {\"abc\":1,3...",
    ),
    (
        "[1,2,3]]",
        "Expected end of input, but found \"]\".",
        "JSON data, line 1: [1,2,3]]",
    ),
    (
        "[1,2,3",
        "The input string ended unexpectedly.",
        "JSON data, line 1: [1,2,3",
    ),
    (
        "{\"a\":1, \"b\":2",
        "The input string ended unexpectedly.",
        "JSON data, line 1: {\"a\":1, \"b\":2",
    ),
    ("1f2", "Token \"1f2\" is invalid.", "JSON data, line 1: 1f2"),
    (
        "0.x1",
        "Token \"0.x1\" is invalid.",
        "JSON data, line 1: 0.x1",
    ),
    (
        "1.3ex100",
        "Token \"1.3ex100\" is invalid.",
        "JSON data, line 1: 1.3ex100",
    ),
    (
        "'abc'",
        "Token \"'\" is invalid.",
        "JSON data, line 1: '...",
    ),
    (
        "\"\\v\"",
        "Escape sequence \"\\v\" is invalid.",
        "JSON data, line 1: \"\\v...",
    ),
];

#[test]
fn json_syntax_errors_match_postgres() {
    for (input, detail, context) in JSON_SYNTAX_ERRORS {
        let error = json_error(input);
        assert_eq!(error.sqlstate, "22P02", "{input:?}");
        assert_eq!(
            error.message, "invalid input syntax for type json",
            "{input:?}"
        );
        assert_eq!(error.detail.as_deref(), Some(*detail), "{input:?}");
        assert_eq!(error.context.as_deref(), Some(*context), "{input:?}");
        // jsonb reports the same errors in the same words.
        assert_eq!(jsonb_in(input).unwrap_err(), error, "{input:?}");
    }
}

#[test]
fn json_accepts_valid_text() {
    for input in [
        "1",
        "-0",
        "0.5e-10",
        "1E+2",
        "\"\"",
        "\"\\u0000\"",
        "\"\\uaBcD\"",
        "\"\\ud83d\"",
        "[]",
        "{}",
        " { \"a\" : [ true , false , null ] } ",
        "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"",
        "[\"é\", \"😀\"]",
        "\n[1,\r\n2]\t",
    ] {
        assert_eq!(validate_json(input), Ok(()), "{input:?}");
    }
}

#[test]
fn jsonb_normal_form() {
    let cases = [
        ("{\"b\":1,\"a\":[1,2],\"a\":-0}", "{\"a\": 0, \"b\": 1}"),
        ("1e2", "100"),
        ("-0.0", "0.0"),
        ("1.50", "1.50"),
        ("-1.5E-3", "-0.0015"),
        ("  null ", "null"),
        ("true", "true"),
        ("\"x\"", "\"x\""),
        ("[]", "[]"),
        ("{}", "{}"),
        ("[ 1 , [ ] , { } ]", "[1, [], {}]"),
        (
            "{\"aa\":1, \"b\":2, \"c\":{\"y\":1,\"x\":2}}",
            "{\"b\": 2, \"c\": {\"x\": 2, \"y\": 1}, \"aa\": 1}",
        ),
        ("{\"a\":1,\"a\":2,\"a\":3}", "{\"a\": 3}"),
        (
            "\"\\ud83d\\ude04\\u00e9\\u0041\\n\\u001f\\/\"",
            "\"😄éA\\n\\u001f/\"",
        ),
        ("\"\\b\\f\\r\\t\\\"\\\\\"", "\"\\b\\f\\r\\t\\\"\\\\\""),
        // From jsonb.out.
        (
            "{\"a\":\"aaa\",\"abc\":{\"x\":\"y\"}}",
            "{\"a\": \"aaa\", \"abc\": {\"x\": \"y\"}}",
        ),
        ("[1,2,3]", "[1, 2, 3]"),
        ("0.0000000000000000000001", "0.0000000000000000000001"),
        ("1e-5", "0.00001"),
    ];
    for (input, expected) in cases {
        assert_eq!(jsonb_in(input).as_deref(), Ok(expected), "{input:?}");
        assert_eq!(json_to_jsonb(input).as_deref(), Ok(expected), "{input:?}");
        // The normal form is a fixed point.
        assert_eq!(jsonb_in(expected).as_deref(), Ok(expected), "{expected:?}");
    }
}

#[test]
fn jsonb_rejects_bad_unicode_escapes() {
    let cases = [
        (
            "[\"\\ud83d\"]",
            "22P02",
            "Unicode low surrogate must follow a high surrogate.",
            "JSON data, line 1: [\"\\ud83d\"...",
        ),
        (
            "[\"\\ude04\"]",
            "22P02",
            "Unicode low surrogate must follow a high surrogate.",
            "JSON data, line 1: [\"\\ude04...",
        ),
        (
            "[\"\\ud83d\\ud83d\"]",
            "22P02",
            "Unicode high surrogate must not follow a high surrogate.",
            "JSON data, line 1: [\"\\ud83d\\ud83d...",
        ),
        (
            "[\"\\ud83dx\"]",
            "22P02",
            "Unicode low surrogate must follow a high surrogate.",
            "JSON data, line 1: [\"\\ud83dx...",
        ),
        (
            "[\"\\ud83d\\n\"]",
            "22P02",
            "Unicode low surrogate must follow a high surrogate.",
            "JSON data, line 1: [\"\\ud83d\\n...",
        ),
        (
            "[\"a\\u0000b\"]",
            "22P05",
            "\\u0000 cannot be converted to text.",
            "JSON data, line 1: [\"a\\u0000...",
        ),
    ];
    for (input, sqlstate, detail, context) in cases {
        let error = jsonb_in(input).unwrap_err();
        assert_eq!(error.sqlstate, sqlstate, "{input:?}");
        let message = if sqlstate == "22P05" {
            "unsupported Unicode escape sequence"
        } else {
            "invalid input syntax for type json"
        };
        assert_eq!(error.message, message);
        assert_eq!(error.detail.as_deref(), Some(detail), "{input:?}");
        assert_eq!(error.context.as_deref(), Some(context), "{input:?}");
        // json input does not de-escape, so it accepts them.
        assert_eq!(validate_json(input), Ok(()), "{input:?}");
    }
}

#[test]
fn jsonb_number_out_of_numeric_range() {
    let error = jsonb_in("1e1000000").unwrap_err();
    assert_eq!(error.sqlstate, "22003");
    assert_eq!(error.message, "value overflows numeric format");
    assert_eq!(validate_json("1e1000000"), Ok(()));
}
