//! Shared helpers for the tests that compare Shoal's numeric with PostgreSQL 15's recorded
//! answers: rendering a result the way the case files spell it and checking it.

#![allow(dead_code)]

use shoal_numeric::{Numeric, NumericError};

/// Parses a case-file operand, which is always valid numeric text.
pub fn num(text: &str) -> Numeric {
    Numeric::parse(text).unwrap_or_else(|e| panic!("bad operand {text:?}: {e}"))
}

/// The case-file spelling of a result: PostgreSQL's text, "ERR <sqlstate>" for an error, and
/// very long answers as "BIG <length> <first 40> <last 40>".
pub fn render(result: &Result<Numeric, NumericError>) -> String {
    match result {
        Ok(n) => squash(n.to_pg_text()),
        Err(e) => format!("ERR {}", e.sqlstate),
    }
}

pub fn squash(text: String) -> String {
    if text.len() > 240 {
        format!(
            "BIG {} {} {}",
            text.len(),
            &text[..40],
            &text[text.len() - 40..]
        )
    } else {
        text
    }
}

/// Checks every case, reporting all mismatches together so one run shows the whole picture.
pub fn check_all(what: &str, cases: impl IntoIterator<Item = (String, String, String)>) {
    let mut failures = Vec::new();
    let mut count = 0;
    for (input, expected, actual) in cases {
        count += 1;
        if expected != actual {
            failures.push(format!(
                "{what}({input}): expected {expected}, got {actual}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {count} {what} cases differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
