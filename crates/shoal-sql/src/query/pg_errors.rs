//! PostgreSQL's wording for the query errors DataFusion reports in its own words: GROUP BY
//! violations, misplaced aggregates, bad ORDER BY positions and LIMITs, set operations of
//! different widths, subqueries returning too much, function calls whose argument types
//! match no signature, and casts between types that have no conversion. Everything else falls
//! through to the general mapping in `errors.rs`.

use std::str::FromStr;

use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::error::DataFusionError;

use crate::error::{code, SqlError};
use crate::query::errors;
use crate::query::pg_catalog::format_type_oid;
use crate::types::pg_oid_for_arrow;

const NO_FUNCTION_HINT: &str =
    "No function matches the given name and argument types. You might need to add explicit type casts.";

/// Converts a DataFusion error raised while planning or running a query.
pub fn from_datafusion(e: DataFusionError) -> SqlError {
    // An analyzer rule's error comes wrapped in the rule's context.
    let e = match e {
        DataFusionError::Context(_, inner) if matches!(*inner, DataFusionError::External(_)) => {
            *inner
        }
        other => other,
    };
    if matches!(e, DataFusionError::External(_)) {
        return errors::from_datafusion(e);
    }
    match pg_wording(&e.to_string()) {
        Some(sql) => sql,
        None => errors::from_datafusion(e),
    }
}

fn pg_wording(msg: &str) -> Option<SqlError> {
    grouping_error(msg)
        .or_else(|| clause_error(msg))
        .or_else(|| subquery_error(msg))
        .or_else(|| reference_error(msg))
        .or_else(|| function_error(msg))
        .or_else(|| argument_error(msg))
        .or_else(|| unsupported_cast(msg))
}

/// A cast between types with no conversion: "Unsupported CAST from Boolean to Date32".
fn unsupported_cast(msg: &str) -> Option<SqlError> {
    let rest = msg.split("Unsupported CAST from ").nth(1)?;
    let (from, to) = rest.split_once(" to ")?;
    let to = to.split_whitespace().next()?;
    Some(SqlError::new(
        code::CANNOT_COERCE,
        format!(
            "cannot cast type {} to {}",
            pg_type_name(from),
            pg_type_name(to)
        ),
    ))
}

/// The first double-quoted string after `marker`.
fn quoted_after<'a>(msg: &'a str, marker: &str) -> Option<&'a str> {
    let rest = &msg[msg.find(marker)? + marker.len()..];
    let start = rest.find('"')? + 1;
    let len = rest[start..].find('"')?;
    Some(&rest[start..start + len])
}

fn grouping_error(msg: &str) -> Option<SqlError> {
    let column = if msg.contains("must appear in the GROUP BY clause or must be part of") {
        quoted_after(msg, "While expanding wildcard, column")?.to_string()
    } else if let Some(rest) = msg.split("HAVING clause references: ").nth(1) {
        rest.split(" must appear in the GROUP BY")
            .next()?
            .to_string()
    } else if msg.contains("Aggregate functions are not allowed in the WHERE clause") {
        return Some(SqlError::new(
            code::GROUPING_ERROR,
            "aggregate functions are not allowed in WHERE",
        ));
    } else {
        return None;
    };
    Some(SqlError::new(
        code::GROUPING_ERROR,
        format!(
            "column \"{column}\" must appear in the GROUP BY clause or be used in an aggregate function"
        ),
    ))
}

/// ORDER BY, LIMIT/OFFSET and set-operation errors.
fn clause_error(msg: &str) -> Option<SqlError> {
    if msg.contains("For SELECT DISTINCT, ORDER BY expressions") {
        return Some(SqlError::new(
            code::INVALID_COLUMN_REFERENCE,
            "for SELECT DISTINCT, ORDER BY expressions must appear in select list",
        ));
    }
    if let Some(rest) = msg
        .split("Order by column out of bounds, specified: ")
        .nth(1)
    {
        let position = rest.split(',').next()?;
        return Some(SqlError::new(
            code::INVALID_COLUMN_REFERENCE,
            format!("ORDER BY position {position} is not in select list"),
        ));
    }
    if msg.contains("LIMIT must be >=") {
        return Some(SqlError::new(
            code::INVALID_ROW_COUNT_IN_LIMIT_CLAUSE,
            "LIMIT must not be negative",
        ));
    }
    if msg.contains("OFFSET must be >=") {
        return Some(SqlError::new(
            code::INVALID_ROW_COUNT_IN_RESULT_OFFSET_CLAUSE,
            "OFFSET must not be negative",
        ));
    }
    for op in ["UNION", "INTERSECT", "EXCEPT"] {
        if msg.contains(&format!("{op} queries have different number of columns")) {
            return Some(SqlError::syntax(format!(
                "each {op} query must have the same number of columns"
            )));
        }
    }
    None
}

fn subquery_error(msg: &str) -> Option<SqlError> {
    if msg.contains("Scalar subquery returned more than one row") {
        return Some(SqlError::new(
            code::CARDINALITY_VIOLATION,
            "more than one row returned by a subquery used as an expression",
        ));
    }
    if msg.contains("Too many columns! The subquery should only return one column") {
        return Some(SqlError::syntax("subquery has too many columns"));
    }
    None
}

/// Ambiguous and unknown qualified column references.
fn reference_error(msg: &str) -> Option<SqlError> {
    if let Some(rest) = msg
        .split("Ambiguous reference to unqualified field ")
        .nth(1)
    {
        let name = rest.split_whitespace().next()?.trim_matches('"');
        return Some(SqlError::new(
            code::AMBIGUOUS_COLUMN,
            format!("column reference \"{name}\" is ambiguous"),
        ));
    }
    let rest = msg.split("No field named ").nth(1)?;
    let (reference, valid) = rest.split_once("Valid fields are ").unwrap_or((rest, ""));
    // DataFusion may add a suggestion: "No field named nope. Did you mean 'err_t.name'?".
    let reference = reference.split(". Did you mean").next()?;
    let reference = reference.trim_end().trim_end_matches('.');
    let (qualifier, column) = reference.rsplit_once('.')?;
    let qualifier = qualifier.trim_matches('"');
    let column = column.trim_matches('"');
    let qualifier_known = valid.split(", ").any(|f| {
        f.trim_matches('.')
            .rsplit_once('.')
            .map(|(q, _)| q.trim_matches('"'))
            == Some(qualifier)
    });
    if qualifier_known {
        return Some(SqlError::new(
            code::UNDEFINED_COLUMN,
            format!("column {qualifier}.{column} does not exist"),
        ));
    }
    Some(SqlError::new(
        code::UNDEFINED_TABLE,
        format!("missing FROM-clause entry for table \"{qualifier}\""),
    ))
}

/// A call whose argument types match no signature: "function sum(text) does not exist".
fn function_error(msg: &str) -> Option<SqlError> {
    let types: Vec<String> = if let Some(rest) = msg.split("coercion from ").nth(1) {
        let list = rest.split(" to the signature").next()?;
        split_type_list(list)
    } else if msg.contains("failed to match any signature") {
        let first = msg.split("(DataType: ").nth(1)?;
        vec![first.split(')').next()?.to_string()]
    } else {
        return None;
    };
    let name = quoted_single(msg)?;
    let pg_types: Vec<String> = types.iter().map(|t| pg_type_name(t)).collect();
    Some(
        SqlError::new(
            code::UNDEFINED_FUNCTION,
            format!("function {name}({}) does not exist", pg_types.join(", ")),
        )
        .with_hint(NO_FUNCTION_HINT),
    )
}

fn quoted_single(msg: &str) -> Option<&str> {
    msg.split('\'').nth(1)
}

/// Splits "Utf8, Decimal128(10, 2)" at the commas outside parentheses.
fn split_type_list(list: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut current = String::new();
    for c in list.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(current.trim().to_string());
                current.clear();
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !current.trim().is_empty() {
        out.push(current.trim().to_string());
    }
    out
}

/// PostgreSQL's name for the type DataFusion printed as `arrow`.
fn pg_type_name(arrow: &str) -> String {
    if arrow == "Null" {
        return "unknown".into();
    }
    match ArrowType::from_str(arrow) {
        Ok(t) => format_type_oid(pg_oid_for_arrow(&t), -1).unwrap_or_else(|| arrow.to_string()),
        Err(_) => arrow.to_string(),
    }
}

/// Bad arguments detected inside functions DataFusion provides.
fn argument_error(msg: &str) -> Option<SqlError> {
    if msg.contains("field position must not be zero") {
        return Some(SqlError::new(
            code::INVALID_PARAMETER_VALUE,
            "field position must not be zero",
        ));
    }
    if msg.contains("cannot take square root of a negative number") {
        return Some(SqlError::new(
            code::INVALID_ARGUMENT_FOR_POWER_FUNCTION,
            "cannot take square root of a negative number",
        ));
    }
    None
}
