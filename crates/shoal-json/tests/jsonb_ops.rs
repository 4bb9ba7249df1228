//! jsonb's ordering, equality, containment and existence operators. Expected values come from
//! PostgreSQL 15 (jsonb.out and a server).

use std::cmp::Ordering;

use shoal_json::{
    jsonb_cmp, jsonb_contains, jsonb_eq, jsonb_equality_key, jsonb_exists, jsonb_exists_all,
    jsonb_exists_any,
};

#[test]
fn btree_order_matches_postgres() {
    // `ORDER BY v, v::text` over these values in PostgreSQL 15.
    let sorted = [
        "[]",
        "null",
        "\"\"",
        "\"a\"",
        "\"ab\"",
        "\"b\"",
        "-2",
        "1",
        "1.0",
        "false",
        "true",
        "[null]",
        "[\"a\"]",
        "[1]",
        "[2]",
        "[true]",
        "[[]]",
        "[{}]",
        "[1, 2]",
        "[1, [2]]",
        "[1, 2, 3]",
        "{}",
        "{\"a\": null}",
        "{\"a\": 1}",
        "{\"a\": 2}",
        "{\"a\": [1]}",
        "{\"a\": {}}",
        "{\"b\": 0}",
        "{\"a\": 1, \"b\": 1}",
        "{\"b\": 1, \"d\": 1}",
        "{\"c\": 1, \"aa\": 1}",
    ];
    let mut shuffled: Vec<&str> = sorted.iter().rev().copied().collect();
    shuffled.rotate_left(7);
    shuffled.sort_by(|a, b| jsonb_cmp(a, b).then_with(|| a.cmp(b)));
    assert_eq!(shuffled, sorted);
}

#[test]
fn comparison_operators() {
    assert!(jsonb_eq("1", "1.0"));
    assert!(jsonb_eq("{\"a\": [1.50]}", "{\"a\": [1.5]}"));
    assert!(!jsonb_eq("\"1\"", "1"));
    let less = |a, b| jsonb_cmp(a, b) == Ordering::Less;
    assert!(less("[]", "1"));
    assert!(less("1", "[1]"));
    assert!(less("[1, 2]", "{}"));
    assert!(less("\"a\"", "1"));
    assert!(less("null", "\"\""));
    assert!(less("1", "true"));
    // Keys compare in stored order, shorter keys first (the documented surprise).
    assert!(less("{\"b\": 1, \"d\": 1}", "{\"c\": 1, \"aa\": 1}"));
    assert!(less("[3]", "[1, 2]"));
    assert!(less("\"ab\"", "\"b\""));
}

#[test]
fn containment() {
    let doc = r#"{"a":"b", "b":1, "c":null}"#;
    let cases = [
        (doc, r#"{"a":"b"}"#, true),
        (doc, r#"{"a":"b", "c":null}"#, true),
        (doc, r#"{"a":"b", "g":null}"#, false),
        (doc, r#"{"g":null}"#, false),
        (doc, r#"{"a":"c"}"#, false),
        (doc, r#"{"a":"b", "c":"q"}"#, false),
        (doc, "{}", true),
        ("[1,2]", "[1,2,2]", true),
        ("[1,1,2]", "[1,2,2]", true),
        ("[[1,2]]", "[[1,2,2]]", true),
        ("[1,1,2]", "[1,2,2]", true),
        ("[]", "[]", true),
        ("[]", "[[]]", false),
        ("[[]]", "[[]]", true),
        ("[[[]]]", "[[]]", true),
        ("[[[]]]", "[[[]]]", true),
        ("[1,[2,3]]", "[[3]]", true),
        (
            r#"{"name": "Bob", "tags": ["enim", "qui"]}"#,
            r#"{"tags":["qui"]}"#,
            true,
        ),
        (
            r#"{"name": "Bob", "tags": ["enim", "qui"]}"#,
            r#"{"tags":[]}"#,
            true,
        ),
        (r#"[1, {"a":1, "b":2}]"#, r#"[{"a":1}]"#, true),
        (r#"[1, {"a":1, "b":2}]"#, r#"{"a":1}"#, false),
        (r#""a""#, r#"["a"]"#, false),
        (r#"["a"]"#, r#""a""#, true),
        (r#"{"a":1}"#, "1", false),
        (r#"[{"a":1}]"#, "[1]", false),
        ("1", "1.00", true),
        ("1.0", "1", true),
        ("null", "null", true),
        ("[null]", "null", true),
        ("[1]", "1", true),
        ("1", "[1]", false),
        (r#"{"a":[1,[2]]}"#, r#"{"a":[[2]]}"#, true),
        (r#"{"a":[1,[2]]}"#, r#"{"a":[2]}"#, false),
        (r#"{"a":{"b":1}}"#, r#"{"a":[]}"#, false),
        (r#"{"a":{"b":1}}"#, r#"{"a":{}}"#, true),
        (r#"{"a":null, "b":{"c":null}}"#, r#"{"b":{}}"#, true),
        (r#"{"a":[1,2]}"#, r#"{"a":1}"#, false),
    ];
    for (outer, inner, expected) in cases {
        assert_eq!(
            jsonb_contains(outer, inner),
            Ok(expected),
            "{outer} @> {inner}"
        );
    }
}

#[test]
fn key_existence() {
    let doc = r#"{"a":null, "b":"qq"}"#;
    assert_eq!(jsonb_exists(doc, "a"), Ok(true));
    assert_eq!(jsonb_exists(doc, "c"), Ok(false));
    assert_eq!(jsonb_exists(r#"[1, "a", ["b"]]"#, "b"), Ok(false));
    assert_eq!(jsonb_exists(r#"[1, "a", ["b"]]"#, "a"), Ok(true));
    assert_eq!(jsonb_exists(r#""a""#, "a"), Ok(true));
    assert_eq!(jsonb_exists("1", "1"), Ok(false));
    assert_eq!(jsonb_exists(r#"{"aa": 1, "b": 2}"#, "aa"), Ok(true));
    assert_eq!(jsonb_exists_any(doc, &["c", "b"]), Ok(true));
    assert_eq!(jsonb_exists_all(doc, &["a", "b"]), Ok(true));
    assert_eq!(jsonb_exists_all(doc, &["a", "c"]), Ok(false));
    assert_eq!(jsonb_exists_any("[]", &[]), Ok(false));
    assert_eq!(jsonb_exists_all("[]", &[]), Ok(true));
}

#[test]
fn equality_keys_agree_with_equality() {
    let values = [
        "1",
        "1.0",
        "1.50",
        "1.5",
        "100",
        "1e2",
        "[1, 1.0]",
        "[1.00, 1]",
        "{\"a\": 2.0}",
        "{\"a\": 2}",
        "\"1.0\"",
        "[1]",
        "0.0",
        "0",
        "-0.10",
        "-0.1",
        "{}",
        "[]",
        "null",
    ];
    for a in values {
        for b in values {
            let (a, b) = (
                shoal_json::jsonb_in(a).unwrap(),
                shoal_json::jsonb_in(b).unwrap(),
            );
            let same_key = jsonb_equality_key(&a).unwrap() == jsonb_equality_key(&b).unwrap();
            assert_eq!(same_key, jsonb_eq(&a, &b), "{a} vs {b}");
        }
    }
    assert_eq!(
        jsonb_equality_key("{\"a\": [1.50, \"x\"]}").as_deref(),
        Ok("{\"a\": [1.5, \"x\"]}")
    );
}
