//! Constructors and aggregates: `to_json[b]`, `json[b]_build_array`, `json[b]_build_object`,
//! `json[b]_agg`, `json[b]_object_agg`, and string quoting. Expected values come from
//! PostgreSQL 15 (json.out, jsonb.out and a server).

use shoal_json::JsonScalar::{Bool, Composite, Json, Jsonb, Null, Number, Text};
use shoal_json::{
    json_build_array, json_build_object, jsonb_build_array, jsonb_build_object, quote_json_string,
    to_json, to_jsonb, JsonAgg, JsonObjectAgg, JsonScalar, JsonbAgg, JsonbObjectAgg,
};

const MIXED: [JsonScalar<'static>; 10] = [
    Text("a"),
    Number("1.50"),
    Bool(true),
    Null,
    Json("{\"b\" : 1}"),
    Jsonb("{\"b\": 1}"),
    Text("x\"y\\z\n\u{1}"),
    Number("1e+100"),
    Number("NaN"),
    Number("-Infinity"),
];

#[test]
fn quoting_strings() {
    assert_eq!(
        quote_json_string("x\"y\\z\n\u{1}\u{1f}é/"),
        "\"x\\\"y\\\\z\\n\\u0001\\u001fé/\""
    );
    assert_eq!(quote_json_string("\u{8}\u{c}\r\t"), "\"\\b\\f\\r\\t\"");
    assert_eq!(to_json(Text("1e+100")), "\"1e+100\"");
    assert_eq!(to_json(Number("1e+100")), "1e+100");
    assert_eq!(to_jsonb(Number("1e2")), Ok("100".to_string()));
    assert_eq!(to_jsonb(Number("NaN")), Ok("\"NaN\"".to_string()));
}

#[test]
fn build_arrays() {
    assert_eq!(
        json_build_array(&MIXED),
        r#"["a", 1.50, true, null, {"b" : 1}, {"b": 1}, "x\"y\\z\n\u0001", 1e+100, "NaN", "-Infinity"]"#
    );
    let expected = format!(
        r#"["a", 1.50, true, null, {{"b": 1}}, {{"b": 1}}, "x\"y\\z\n\u0001", 1{}, "NaN", "-Infinity"]"#,
        "0".repeat(100)
    );
    assert_eq!(jsonb_build_array(&MIXED), Ok(expected));
    assert_eq!(json_build_array(&[]), "[]");
    assert_eq!(jsonb_build_array(&[]), Ok("[]".to_string()));
}

#[test]
fn build_objects() {
    let args = [
        Text("a"),
        Number("1"),
        Text("b"),
        Text("x"),
        Text("c"),
        Null,
        Text("d"),
        Bool(true),
    ];
    let mut with_json = args.to_vec();
    with_json.extend([Text("e"), Json("{\"x\": [1, 2]}"), Text("a"), Number("2")]);
    assert_eq!(
        json_build_object(&with_json).as_deref(),
        Ok(r#"{"a" : 1, "b" : "x", "c" : null, "d" : true, "e" : {"x": [1, 2]}, "a" : 2}"#)
    );
    assert_eq!(
        jsonb_build_object(&with_json).as_deref(),
        Ok(r#"{"a": 2, "b": "x", "c": null, "d": true, "e": {"x": [1, 2]}}"#)
    );
    assert_eq!(json_build_object(&[]).as_deref(), Ok("{}"));
    assert_eq!(jsonb_build_object(&[]).as_deref(), Ok("{}"));
    // Keys of other types become their text.
    let keys = [
        Number("1"),
        Number("2"),
        Number("1.5"),
        Number("3"),
        Bool(true),
        Number("4"),
    ];
    assert_eq!(
        json_build_object(&keys).as_deref(),
        Ok(r#"{"1" : 2, "1.5" : 3, "true" : 4}"#)
    );
    let args = [Text("a\"b"), Number("1"), Text("k"), Json("[1,  2]")];
    assert_eq!(
        json_build_object(&args).as_deref(),
        Ok(r#"{"a\"b" : 1, "k" : [1,  2]}"#)
    );
    let args = [
        Text("b"),
        Number("1"),
        Text("a"),
        Json("[1,  2]"),
        Text("aa"),
        Number("1e1"),
    ];
    assert_eq!(
        jsonb_build_object(&args).as_deref(),
        Ok(r#"{"a": [1, 2], "b": 1, "aa": 10}"#)
    );
}

#[test]
fn build_object_errors() {
    let error = json_build_object(&[Text("a")]).unwrap_err();
    assert_eq!(error.sqlstate, "22023");
    assert_eq!(
        error.message,
        "argument list must have even number of elements"
    );
    assert_eq!(
        error.hint.as_deref(),
        Some("The arguments of json_build_object() must consist of alternating keys and values.")
    );
    let error = jsonb_build_object(&[Text("a")]).unwrap_err();
    assert_eq!(
        error.hint.as_deref(),
        Some("The arguments of jsonb_build_object() must consist of alternating keys and values.")
    );
    let error = json_build_object(&[Text("a"), Number("1"), Null, Number("2")]).unwrap_err();
    assert_eq!(error.message, "argument 3 cannot be null");
    assert_eq!(error.hint.as_deref(), Some("Object keys should be text."));
    let error = jsonb_build_object(&[Text("a"), Number("1"), Null, Number("2")]).unwrap_err();
    assert_eq!(error.message, "argument 3: key must not be null");
    assert_eq!(error.hint, None);
    for flavor_key in [Json("{\"a\":1}"), Jsonb("{\"a\": 1}"), Composite("[1]")] {
        let expected = "key value must be scalar, not array, composite, or json";
        assert_eq!(
            json_build_object(&[flavor_key, Number("1")])
                .unwrap_err()
                .message,
            expected
        );
        assert_eq!(
            jsonb_build_object(&[flavor_key, Number("1")])
                .unwrap_err()
                .message,
            expected
        );
    }
}

#[test]
fn array_aggregates() {
    let mut agg = JsonAgg::new();
    assert_eq!(agg.finish(), None);
    for value in [Number("1"), Number("2"), Null] {
        agg.push(value);
    }
    assert_eq!(agg.finish().as_deref(), Some("[1, 2, null]"));
    let mut agg = JsonAgg::new();
    agg.push(Json("{\"a\" : 1}"));
    agg.push(Json("[ 2 ]"));
    assert_eq!(agg.finish().as_deref(), Some("[{\"a\" : 1}, [ 2 ]]"));
    // Rows and arrays are set apart by a line break.
    let mut agg = JsonAgg::new();
    agg.push(Composite("{\"f1\":1,\"f2\":\"a\"}"));
    agg.push(Composite("{\"f1\":2,\"f2\":\"b\"}"));
    assert_eq!(
        agg.finish().as_deref(),
        Some("[{\"f1\":1,\"f2\":\"a\"}, \n {\"f1\":2,\"f2\":\"b\"}]")
    );

    let mut agg = JsonbAgg::new();
    assert_eq!(agg.finish(), None);
    agg.push(Number("1.50")).unwrap();
    agg.push(Number("2e2")).unwrap();
    assert_eq!(agg.finish().as_deref(), Some("[1.50, 200]"));
    let mut agg = JsonbAgg::new();
    for value in [Json("{\"b\":1,\"a\":2}"), Null, Json("\"s\"")] {
        agg.push(value).unwrap();
    }
    assert_eq!(
        agg.finish().as_deref(),
        Some("[{\"a\": 2, \"b\": 1}, null, \"s\"]")
    );
}

#[test]
fn object_aggregates() {
    let mut agg = JsonObjectAgg::new();
    assert_eq!(agg.finish(), None);
    for (key, value) in [("a", "1"), ("b", "2"), ("a", "3")] {
        agg.push(Text(key), Number(value)).unwrap();
    }
    assert_eq!(
        agg.finish().as_deref(),
        Some("{ \"a\" : 1, \"b\" : 2, \"a\" : 3 }")
    );
    let mut agg = JsonObjectAgg::new();
    agg.push(Number("1.5"), Json("{\"a\": [1]}")).unwrap();
    agg.push(Number("2"), Null).unwrap();
    assert_eq!(
        agg.finish().as_deref(),
        Some("{ \"1.5\" : {\"a\": [1]}, \"2\" : null }")
    );
    let mut agg = JsonObjectAgg::new();
    agg.push(Bool(true), Text("x")).unwrap();
    agg.push(Bool(false), Text("y\"")).unwrap();
    assert_eq!(
        agg.finish().as_deref(),
        Some("{ \"true\" : \"x\", \"false\" : \"y\\\"\" }")
    );
    let error = JsonObjectAgg::new().push(Null, Number("1")).unwrap_err();
    assert_eq!(
        (error.sqlstate, error.message.as_str()),
        ("22023", "field name must not be null")
    );
    let error = JsonObjectAgg::new()
        .push(Jsonb("[1]"), Number("1"))
        .unwrap_err();
    assert_eq!(
        error.message,
        "key value must be scalar, not array, composite, or json"
    );

    let mut agg = JsonbObjectAgg::new();
    assert_eq!(agg.finish(), None);
    for (key, value) in [("a", "1"), ("b", "2"), ("a", "3")] {
        agg.push(Text(key), Number(value)).unwrap();
    }
    assert_eq!(agg.finish().as_deref(), Some("{\"a\": 3, \"b\": 2}"));
    let mut agg = JsonbObjectAgg::new();
    let rows = [
        ("b", Jsonb("1")),
        ("a", Jsonb("[1,2]")),
        ("b", Jsonb("{\"z\":null}")),
        ("aa", Null),
    ];
    for (key, value) in rows {
        agg.push(Text(key), value).unwrap();
    }
    assert_eq!(
        agg.finish().as_deref(),
        Some("{\"a\": [1, 2], \"b\": {\"z\": null}, \"aa\": null}")
    );
    let error = JsonbObjectAgg::new().push(Null, Number("1")).unwrap_err();
    assert_eq!(error.message, "field name must not be null");
}
