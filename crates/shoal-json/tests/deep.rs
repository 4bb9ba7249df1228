//! Deeply nested documents: accepted up to the depth limit by every function without
//! overflowing the caller's stack (these tests run on 2 MiB test threads), refused beyond it
//! with PostgreSQL's 54001 "stack depth limit exceeded".

use shoal_json::Flavor::{Json, Jsonb};
use shoal_json::JsonScalar;

const DEPTH_MAX: usize = 10_000;

fn nested_arrays(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

fn nested_objects(depth: usize) -> String {
    format!("{}1{}", "{\"a\": ".repeat(depth), "}".repeat(depth))
}

#[test]
fn deepest_documents_work_everywhere() {
    let arrays = nested_arrays(DEPTH_MAX);
    let objects = nested_objects(DEPTH_MAX);
    assert_eq!(shoal_json::validate_json(&arrays), Ok(()));
    assert_eq!(
        shoal_json::jsonb_in(&arrays).as_deref(),
        Ok(arrays.as_str())
    );
    assert_eq!(
        shoal_json::jsonb_in(&objects).as_deref(),
        Ok(objects.as_str())
    );
    assert_eq!(shoal_json::array_length(Json, &arrays), Ok(1));
    assert!(shoal_json::field(Jsonb, &objects, "a").unwrap().is_some());
    assert!(shoal_json::field(Json, &objects, "a").unwrap().is_some());
    assert_eq!(
        shoal_json::jsonb_cmp(&objects, &objects),
        std::cmp::Ordering::Equal
    );
    assert_eq!(shoal_json::jsonb_contains(&objects, &objects), Ok(true));
    assert_eq!(shoal_json::jsonb_contains(&arrays, &arrays), Ok(true));
    // Pretty output grows with the square of the depth, so a shallower document serves.
    assert!(shoal_json::jsonb_pretty(&nested_objects(1_000)).is_ok());
    assert!(shoal_json::jsonb_strip_nulls(&objects).is_ok());
    assert!(shoal_json::json_strip_nulls(&objects).is_ok());
    assert!(shoal_json::jsonb_concat(&objects, &arrays).is_ok());
    let path: Vec<Option<&str>> = vec![Some("a"); 50];
    assert!(shoal_json::jsonb_set(&objects, &path, &objects, true).is_ok());
    assert!(shoal_json::jsonb_build_array(&[JsonScalar::Jsonb(&arrays)]).is_ok());
}

#[test]
fn deeper_documents_are_refused() {
    for text in [
        nested_arrays(DEPTH_MAX + 1),
        nested_objects(DEPTH_MAX + 1),
        "[".repeat(100_000),
    ] {
        for result in [
            shoal_json::validate_json(&text).map(|_| String::new()),
            shoal_json::jsonb_in(&text),
        ] {
            let error = result.unwrap_err();
            assert_eq!(error.sqlstate, "54001");
            assert_eq!(error.message, "stack depth limit exceeded");
            assert_eq!(
                error.hint.as_deref(),
                Some("Increase the configuration parameter \"max_stack_depth\" (currently 2048kB), after ensuring the platform's stack depth limit is adequate.")
            );
            assert_eq!(error.context, None);
        }
    }
}

#[test]
fn syntax_errors_before_the_limit_win() {
    let text = format!("{}x", "[".repeat(5_000));
    let error = shoal_json::validate_json(&text).unwrap_err();
    assert_eq!(error.detail.as_deref(), Some("Token \"x\" is invalid."));
    let context = error.context.unwrap();
    assert!(
        context.starts_with("JSON data, line 1: ...[[["),
        "{context}"
    );
    assert!(context.ends_with("[[x"), "{context}");
}
