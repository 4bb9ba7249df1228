//! `||`, `-`, `#-`, `jsonb_set`, `jsonb_insert`, the strip-nulls functions and `jsonb_pretty`.
//! Expected values come from PostgreSQL 15 (jsonb.out, json.out and a server).

use shoal_json::{
    json_strip_nulls, jsonb_concat, jsonb_delete_index, jsonb_delete_key, jsonb_delete_keys,
    jsonb_delete_path, jsonb_insert, jsonb_pretty, jsonb_set, jsonb_strip_nulls, JsonError,
};

fn ok(text: &str) -> Result<String, JsonError> {
    Ok(text.to_string())
}

fn failure(result: Result<String, JsonError>) -> (&'static str, String) {
    let error = result.unwrap_err();
    (error.sqlstate, error.message)
}

#[test]
fn concatenation() {
    let cases = [
        (
            r#"{"a":1,"b":2}"#,
            r#"{"b":3,"c":4}"#,
            r#"{"a": 1, "b": 3, "c": 4}"#,
        ),
        ("[1,2]", "[3]", "[1, 2, 3]"),
        ("1", "2", "[1, 2]"),
        (r#"{"a":1}"#, "[1]", r#"[{"a": 1}, 1]"#),
        ("[1]", r#"{"a":1}"#, r#"[1, {"a": 1}]"#),
        ("1", "[2]", "[1, 2]"),
        ("[2]", "1", "[2, 1]"),
        (r#"{"a":1}"#, "1", r#"[{"a": 1}, 1]"#),
        ("1", r#"{"a":1}"#, r#"[1, {"a": 1}]"#),
        ("[]", "[]", "[]"),
        ("{}", "{}", "{}"),
        ("[]", "1", "[1]"),
        ("1", "[]", "[1]"),
        (r#""a""#, r#""b""#, r#"["a", "b"]"#),
        ("null", "{}", "[null, {}]"),
        ("{}", "null", "[{}, null]"),
        (r#"{"a":1}"#, r#""x""#, r#"[{"a": 1}, "x"]"#),
    ];
    for (a, b, expected) in cases {
        assert_eq!(jsonb_concat(a, b), ok(expected), "{a} || {b}");
    }
}

#[test]
fn deletion_by_key_and_index() {
    assert_eq!(jsonb_delete_key(r#"{"a":1,"b":2}"#, "a"), ok(r#"{"b": 2}"#));
    assert_eq!(
        jsonb_delete_key(r#"["a","b","a",1]"#, "a"),
        ok(r#"["b", 1]"#)
    );
    assert_eq!(jsonb_delete_key("{}", "a"), ok("{}"));
    assert_eq!(
        failure(jsonb_delete_key(r#""a""#, "a")),
        ("22023", "cannot delete from scalar".to_string())
    );
    assert_eq!(
        jsonb_delete_keys(r#"{"a":1,"b":2,"c":3}"#, &["a", "c"]),
        ok(r#"{"b": 2}"#)
    );
    assert_eq!(jsonb_delete_keys(r#"["a","b"]"#, &["a"]), ok(r#"["b"]"#));
    assert_eq!(
        failure(jsonb_delete_keys("1", &["a"])).1,
        "cannot delete from scalar"
    );

    assert_eq!(jsonb_delete_index("[1,2,3]", 1), ok("[1, 3]"));
    assert_eq!(jsonb_delete_index("[1,2,3]", -1), ok("[1, 2]"));
    assert_eq!(jsonb_delete_index("[1,2,3]", 5), ok("[1, 2, 3]"));
    assert_eq!(jsonb_delete_index("[1,2,3]", -5), ok("[1, 2, 3]"));
    assert_eq!(jsonb_delete_index("[]", 0), ok("[]"));
    assert_eq!(
        failure(jsonb_delete_index(r#"{"a":1}"#, 0)),
        (
            "22023",
            "cannot delete from object using integer index".to_string()
        )
    );
    assert_eq!(
        failure(jsonb_delete_index("1", 0)).1,
        "cannot delete from scalar"
    );
    assert_eq!(
        failure(jsonb_delete_index(r#""a""#, 0)).1,
        "cannot delete from scalar"
    );
}

#[test]
fn deletion_by_path() {
    let doc = r#"{"a":[1,2]}"#;
    assert_eq!(
        jsonb_delete_path(doc, &[Some("a"), Some("0")]),
        ok(r#"{"a": [2]}"#)
    );
    assert_eq!(jsonb_delete_path(doc, &[Some("a")]), ok("{}"));
    assert_eq!(jsonb_delete_path(doc, &[]), ok(r#"{"a": [1, 2]}"#));
    assert_eq!(
        jsonb_delete_path(doc, &[Some("a"), Some("-1")]),
        ok(r#"{"a": [1]}"#)
    );
    assert_eq!(
        jsonb_delete_path(doc, &[Some("b"), None]),
        ok(r#"{"a": [1, 2]}"#)
    );
    assert_eq!(jsonb_delete_path("[]", &[Some("a")]), ok("[]"));
    assert_eq!(
        failure(jsonb_delete_path("1", &[Some("a")])),
        ("22023", "cannot delete path in scalar".to_string())
    );
    assert_eq!(
        failure(jsonb_delete_path("[1]", &[Some("a")])),
        (
            "22P02",
            "path element at position 1 is not an integer: \"a\"".to_string()
        )
    );
    assert_eq!(
        failure(jsonb_delete_path(r#"{"a":1}"#, &[Some("a"), None])),
        ("22004", "path element at position 2 is null".to_string())
    );
}

#[test]
fn set_by_path() {
    let doc = r#"{"a":[1,2,3]}"#;
    let set = |path: &[&str], create| {
        let path: Vec<Option<&str>> = path.iter().map(|step| Some(*step)).collect();
        jsonb_set(doc, &path, r#""x""#, create)
    };
    assert_eq!(set(&["a", "1"], true), ok(r#"{"a": [1, "x", 3]}"#));
    assert_eq!(set(&["a", "-1"], true), ok(r#"{"a": [1, 2, "x"]}"#));
    assert_eq!(set(&["a", "9"], true), ok(r#"{"a": [1, 2, 3, "x"]}"#));
    assert_eq!(set(&["a", "-9"], true), ok(r#"{"a": ["x", 1, 2, 3]}"#));
    assert_eq!(set(&["b"], true), ok(r#"{"a": [1, 2, 3], "b": "x"}"#));
    assert_eq!(set(&["b"], false), ok(r#"{"a": [1, 2, 3]}"#));
    assert_eq!(set(&["b", "c"], true), ok(r#"{"a": [1, 2, 3]}"#));
    assert_eq!(set(&["a", " 1"], true), ok(r#"{"a": [1, "x", 3]}"#));
    assert_eq!(set(&["a", "+1"], true), ok(r#"{"a": [1, "x", 3]}"#));
    assert_eq!(set(&[], true), ok(r#"{"a": [1, 2, 3]}"#));
    for bad in ["x", "99999999999", ""] {
        assert_eq!(
            failure(set(&["a", bad], true)),
            (
                "22P02",
                format!("path element at position 2 is not an integer: \"{bad}\"")
            )
        );
    }
    let null_step = jsonb_set(doc, &[Some("a"), None], r#""x""#, true);
    assert_eq!(
        failure(null_step),
        ("22004", "path element at position 2 is null".to_string())
    );
    let null_first = jsonb_set(doc, &[None], r#""x""#, true);
    assert_eq!(failure(null_first).1, "path element at position 1 is null");
    // A NULL element past a missing key is never reached.
    assert_eq!(
        jsonb_set(r#"{"a":1}"#, &[Some("b"), None], "1", true),
        ok(r#"{"a": 1}"#)
    );
    assert_eq!(
        failure(jsonb_set("1", &[Some("a")], "1", true)),
        ("22023", "cannot set path in scalar".to_string())
    );
    assert_eq!(
        failure(jsonb_set(r#""s""#, &[], "1", true)).1,
        "cannot set path in scalar"
    );
    assert_eq!(jsonb_set("[]", &[Some("a")], "1", false), ok("[]"));
    assert_eq!(
        failure(jsonb_set("[]", &[Some("a")], "1", true)).1,
        "path element at position 1 is not an integer: \"a\""
    );
    assert_eq!(jsonb_set("[]", &[Some("0")], "1", true), ok("[1]"));
    assert_eq!(jsonb_set("[]", &[Some("-1")], "1", true), ok("[1]"));
    assert_eq!(
        jsonb_set(
            r#"{"a":{"b":1}}"#,
            &[Some("a"), Some("c")],
            r#"{"z": 1}"#,
            true
        ),
        ok(r#"{"a": {"b": 1, "c": {"z": 1}}}"#)
    );
    assert_eq!(
        jsonb_set("[[1]]", &[Some("0"), Some("0")], "5", true),
        ok("[[5]]")
    );
    assert_eq!(
        jsonb_set(r#"{"a":"b"}"#, &[Some("a"), Some("x")], "1", true),
        ok(r#"{"a": "b"}"#)
    );
    assert_eq!(
        jsonb_set(
            r#"{"a":[1,{"b":2},3]}"#,
            &[Some("a"), Some("1"), Some("x")],
            r#""x""#,
            true
        ),
        ok(r#"{"a": [1, {"b": 2, "x": "x"}, 3]}"#)
    );
    let doc = r#"{"n":null, "a":1, "b":[1,2], "c":{"1":2}, "d":{"1":[2,3]}}"#;
    assert_eq!(
        jsonb_set(doc, &[Some("n")], "[1,2,3]", true),
        ok(r#"{"a": 1, "b": [1, 2], "c": {"1": 2}, "d": {"1": [2, 3]}, "n": [1, 2, 3]}"#)
    );
    assert_eq!(
        jsonb_set(doc, &[Some("b"), Some("-1")], "[1,2,3]", false),
        ok(r#"{"a": 1, "b": [1, [1, 2, 3]], "c": {"1": 2}, "d": {"1": [2, 3]}, "n": null}"#)
    );
    assert_eq!(
        jsonb_set(doc, &[Some("d"), Some("1"), Some("0")], "[1,2,3]", true),
        ok(r#"{"a": 1, "b": [1, 2], "c": {"1": 2}, "d": {"1": [[1, 2, 3], 3]}, "n": null}"#)
    );
    assert_eq!(
        jsonb_set(r#"{"a":[1,2]}"#, &[Some("a"), Some("-3")], "0", false),
        ok(r#"{"a": [1, 2]}"#)
    );
    assert_eq!(
        jsonb_set(r#"{"a":[1,2]}"#, &[Some("a"), Some("2")], "0", false),
        ok(r#"{"a": [1, 2]}"#)
    );
}

#[test]
fn insert_by_path() {
    let doc = r#"{"a": [0,1,2]}"#;
    let insert = |path: &[&str], after| {
        let path: Vec<Option<&str>> = path.iter().map(|step| Some(*step)).collect();
        jsonb_insert(doc, &path, r#""new_value""#, after)
    };
    assert_eq!(
        insert(&["a", "-1"], false),
        ok(r#"{"a": [0, 1, "new_value", 2]}"#)
    );
    assert_eq!(
        insert(&["a", "-1"], true),
        ok(r#"{"a": [0, 1, 2, "new_value"]}"#)
    );
    assert_eq!(
        insert(&["a", "-10"], false),
        ok(r#"{"a": ["new_value", 0, 1, 2]}"#)
    );
    assert_eq!(
        insert(&["a", "0"], false),
        ok(r#"{"a": ["new_value", 0, 1, 2]}"#)
    );
    assert_eq!(
        insert(&["a", "0"], true),
        ok(r#"{"a": [0, "new_value", 1, 2]}"#)
    );
    assert_eq!(
        insert(&["a", "9"], false),
        ok(r#"{"a": [0, 1, 2, "new_value"]}"#)
    );
    assert_eq!(
        insert(&["b"], false),
        ok(r#"{"a": [0, 1, 2], "b": "new_value"}"#)
    );
    assert_eq!(
        jsonb_insert(
            r#"{"a": []}"#,
            &[Some("a"), Some("5")],
            r#""new_value""#,
            false
        ),
        ok(r#"{"a": ["new_value"]}"#)
    );
    assert_eq!(
        jsonb_insert(
            r#"{"a": {"b": {"c": [0, 1, "test1", "test2"]}}}"#,
            &[Some("a"), Some("b"), Some("c"), Some("2")],
            r#""new_value""#,
            false
        ),
        ok(r#"{"a": {"b": {"c": [0, 1, "new_value", "test1", "test2"]}}}"#)
    );
    assert_eq!(
        jsonb_insert(
            r#"{"a": {"b": "value"}}"#,
            &[Some("a"), Some("c")],
            r#""new_value""#,
            false
        ),
        ok(r#"{"a": {"b": "value", "c": "new_value"}}"#)
    );
    let error = jsonb_insert(
        r#"{"a": {"b": "value"}}"#,
        &[Some("a"), Some("b")],
        r#""new_value""#,
        true,
    )
    .unwrap_err();
    assert_eq!(
        (error.sqlstate, error.message.as_str()),
        ("22023", "cannot replace existing key")
    );
    assert_eq!(
        error.hint.as_deref(),
        Some("Try using the function jsonb_set to replace key value.")
    );
    assert_eq!(
        failure(jsonb_insert("1", &[Some("a")], "1", false)).1,
        "cannot set path in scalar"
    );
}

#[test]
fn strip_nulls() {
    let cases = [
        ("[1,2,null,3,4]", "[1,2,null,3,4]", "[1, 2, null, 3, 4]"),
        (
            r#"{"a":1,"b":null,"c":[2,null,3],"d":{"e":4,"f":null}}"#,
            r#"{"a":1,"c":[2,null,3],"d":{"e":4}}"#,
            r#"{"a": 1, "c": [2, null, 3], "d": {"e": 4}}"#,
        ),
        (
            r#"[1,{"a":1,"b":null,"c":2},3]"#,
            r#"[1,{"a":1,"c":2},3]"#,
            r#"[1, {"a": 1, "c": 2}, 3]"#,
        ),
        (
            r#"{"a": {"b": null, "c": null}, "d": {} }"#,
            r#"{"a":{},"d":{}}"#,
            r#"{"a": {}, "d": {}}"#,
        ),
        ("null", "null", "null"),
        (" 1.50 ", "1.50", "1.50"),
        ("[ null , 1 ]", "[null,1]", "[null, 1]"),
        (
            r#"{ "a" : null, "b" : [1, null, {"c":null, "d" : 2}] , "e":"x\u0041"}"#,
            r#"{"b":[1,null,{"d":2}],"e":"xA"}"#,
            r#"{"b": [1, null, {"d": 2}], "e": "xA"}"#,
        ),
    ];
    for (input, json_expected, jsonb_expected) in cases {
        assert_eq!(json_strip_nulls(input), ok(json_expected), "{input}");
        assert_eq!(jsonb_strip_nulls(input), ok(jsonb_expected), "{input}");
    }
}

#[test]
fn pretty_printing() {
    let doc = r#"{"a":"test","b":[1,2,3],"c":"test3","d":{"dd":"test4","dd2":{"ddd":"test5"}}}"#;
    let expected = "{\n    \"a\": \"test\",\n    \"b\": [\n        1,\n        2,\n        3\n    ],\n    \"c\": \"test3\",\n    \"d\": {\n        \"dd\": \"test4\",\n        \"dd2\": {\n            \"ddd\": \"test5\"\n        }\n    }\n}";
    assert_eq!(jsonb_pretty(doc), ok(expected));
    let doc = r#"[{"f1":1,"f2":null},2,null,3]"#;
    let expected =
        "[\n    {\n        \"f1\": 1,\n        \"f2\": null\n    },\n    2,\n    null,\n    3\n]";
    assert_eq!(jsonb_pretty(doc), ok(expected));
    let doc = r#"{"a":"\u00e9\n", "b":[[1,[]],{}]}"#;
    let expected = "{\n    \"a\": \"é\\n\",\n    \"b\": [\n        [\n            1,\n            [\n            ]\n        ],\n        {\n        }\n    ]\n}";
    assert_eq!(jsonb_pretty(doc), ok(expected));
    assert_eq!(jsonb_pretty("[]"), ok("[\n]"));
    assert_eq!(jsonb_pretty("{}"), ok("{\n}"));
    assert_eq!(jsonb_pretty("1"), ok("1"));
    assert_eq!(jsonb_pretty("[[]]"), ok("[\n    [\n    ]\n]"));
}
