//! Turns DataFusion and Arrow errors into PostgreSQL errors. DataFusion reports by message, so
//! this matches on the messages of the failures users actually hit (unknown table or column,
//! bad casts, overflow, division by zero) and gives each its SQLSTATE; errors Shoal raised
//! itself inside DataFusion (from functions) come back unchanged.

use datafusion::arrow::error::ArrowError;
use datafusion::error::DataFusionError;

use crate::error::{code, SqlError};

pub fn from_datafusion(e: DataFusionError) -> SqlError {
    match e {
        DataFusionError::External(inner) => match inner.downcast::<SqlError>() {
            Ok(sql) => *sql,
            Err(other) => match other.downcast::<DataFusionError>() {
                Ok(df) => from_datafusion(*df),
                Err(other) => match other.downcast::<ArrowError>() {
                    Ok(arrow) => from_arrow(*arrow),
                    Err(other) => classify(other.to_string(), code::INTERNAL_ERROR),
                },
            },
        },
        DataFusionError::Context(_, inner) => from_datafusion(*inner),
        DataFusionError::Shared(inner) => match shared_sql_error(&inner) {
            Some(sql) => sql,
            None => from_datafusion(DataFusionError::External(Box::new(SharedMessage(
                inner.to_string(),
            )))),
        },
        DataFusionError::ArrowError(inner, _) => from_arrow(*inner),
        DataFusionError::SchemaError(inner, _) => schema_error(inner.to_string()),
        DataFusionError::SQL(inner, _) => SqlError::from(*inner),
        DataFusionError::NotImplemented(msg) => classify(msg, code::FEATURE_NOT_SUPPORTED),
        DataFusionError::Plan(msg) => classify(msg, code::SYNTAX_ERROR),
        DataFusionError::Execution(msg) => classify(msg, code::DATA_EXCEPTION),
        // The query memory pool is full (see `query::query_memory`).
        DataFusionError::ResourcesExhausted(msg) => {
            SqlError::new(code::OUT_OF_MEMORY, "out of memory").with_detail(msg)
        }
        DataFusionError::Diagnostic(_, inner) => from_datafusion(*inner),
        DataFusionError::Collection(mut errors) => match errors.pop() {
            Some(first) => from_datafusion(first),
            None => SqlError::internal("unknown error"),
        },
        other => classify(other.to_string(), code::INTERNAL_ERROR),
    }
}

/// The SqlError inside an error DataFusion shares between tasks (a constant evaluated once).
fn shared_sql_error(e: &DataFusionError) -> Option<SqlError> {
    match e {
        DataFusionError::External(inner) => inner.downcast_ref::<SqlError>().cloned(),
        DataFusionError::Context(_, inner) | DataFusionError::Diagnostic(_, inner) => {
            shared_sql_error(inner)
        }
        DataFusionError::Shared(inner) => shared_sql_error(inner),
        _ => None,
    }
}

#[derive(Debug)]
struct SharedMessage(String);
impl std::fmt::Display for SharedMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for SharedMessage {}

pub fn from_arrow(e: ArrowError) -> SqlError {
    match e {
        ArrowError::DivideByZero => SqlError::new(code::DIVISION_BY_ZERO, "division by zero"),
        ArrowError::ExternalError(inner) => match inner.downcast::<SqlError>() {
            Ok(sql) => *sql,
            Err(other) => match other.downcast::<DataFusionError>() {
                Ok(df) => from_datafusion(*df),
                Err(other) => SqlError::internal(other.to_string()),
            },
        },
        ArrowError::CastError(msg) | ArrowError::ParseError(msg) => cast_error(&msg),
        ArrowError::ComputeError(msg) | ArrowError::InvalidArgumentError(msg) => {
            classify(msg, code::DATA_EXCEPTION)
        }
        ArrowError::ArithmeticOverflow(_) => {
            SqlError::new(code::NUMERIC_VALUE_OUT_OF_RANGE, "integer out of range")
        }
        other => classify(other.to_string(), code::DATA_EXCEPTION),
    }
}

fn schema_error(msg: String) -> SqlError {
    // "No field named foo. Valid fields are ..." / "Schema contains duplicate unqualified field name"
    if let Some(rest) = msg.split("No field named ").nth(1) {
        let name = rest.split(['.', ' ']).next().unwrap_or(rest);
        let name = name.trim_matches('"');
        return SqlError::undefined_column(name)
            .with_hint_opt(rest.contains('.').then_some(()).and(None::<String>));
    }
    if msg.contains("Ambiguous reference") {
        let name = msg
            .split('\'')
            .nth(1)
            .unwrap_or("")
            .rsplit('.')
            .next()
            .unwrap_or("")
            .to_string();
        return SqlError::new(
            code::AMBIGUOUS_COLUMN,
            format!("column reference \"{name}\" is ambiguous"),
        );
    }
    if msg.contains("duplicate") {
        return SqlError::new(code::DUPLICATE_COLUMN, msg);
    }
    SqlError::new(code::UNDEFINED_COLUMN, msg)
}

impl SqlError {
    fn with_hint_opt(self, hint: Option<String>) -> Self {
        match hint {
            Some(h) => self.with_hint(h),
            None => self,
        }
    }
}

fn cast_error(msg: &str) -> SqlError {
    if let Some(e) = datetime_error(msg) {
        return e;
    }
    // "Cannot cast value 'maybe' to value of Boolean type"
    if let Some(rest) = msg.split("Cannot cast value '").nth(1) {
        if msg.contains("Boolean") {
            let value = rest.rsplit_once("' to value").map_or(rest, |(v, _)| v);
            return SqlError::new(
                code::INVALID_TEXT_REPRESENTATION,
                format!("invalid input syntax for type boolean: \"{value}\""),
            );
        }
    }
    // "Cannot cast string 'abc' to value of Int32 type"
    if let Some(rest) = msg.split("Cannot cast string '").nth(1) {
        let value = rest.split('\'').next().unwrap_or("");
        let arrow_type = msg.split("value of ").nth(1).unwrap_or("");
        // Dates and timestamps: PostgreSQL's own parser says what is wrong (bad syntax,
        // 22007, or a field out of range, 22008).
        let parsed = if arrow_type.starts_with("Date32") {
            crate::pgtext::parse_date(value).err()
        } else if arrow_type.starts_with("Timestamp") {
            // Only whether it parses matters here, so the zone does not.
            let utc = crate::timezone::TimeZone::utc();
            match arrow_type.contains("Some") {
                true => crate::pgtext::parse_timestamptz(value, &utc).err(),
                false => crate::pgtext::parse_timestamp(value).err(),
            }
        } else {
            None
        };
        if let Some(e) = parsed {
            return e;
        }
        let type_name = pg_name_of_arrow(arrow_type);
        return SqlError::new(
            code::INVALID_TEXT_REPRESENTATION,
            format!("invalid input syntax for type {type_name}: \"{value}\""),
        );
    }
    if msg.contains("Can't cast value")
        || msg.contains("overflow")
        || msg.contains("Overflow")
        || msg.contains("too large")
    {
        let type_name = if msg.contains("Int16") {
            "smallint"
        } else if msg.contains("Int64") {
            "bigint"
        } else {
            "integer"
        };
        return SqlError::new(
            code::NUMERIC_VALUE_OUT_OF_RANGE,
            format!("{type_name} out of range"),
        );
    }
    if msg.contains("Error parsing timestamp") || msg.contains("date") || msg.contains("timestamp")
    {
        return SqlError::new(code::INVALID_DATETIME_FORMAT, msg.to_string());
    }
    SqlError::new(code::INVALID_TEXT_REPRESENTATION, msg.to_string())
}

fn pg_name_of_arrow(arrow: &str) -> &'static str {
    let t = arrow.trim();
    if t.starts_with("Int16") {
        "smallint"
    } else if t.starts_with("Int32") {
        "integer"
    } else if t.starts_with("Int64") {
        "bigint"
    } else if t.starts_with("Float32") {
        "real"
    } else if t.starts_with("Float64") {
        "double precision"
    } else if t.starts_with("Decimal") {
        "numeric"
    } else if t.starts_with("Boolean") {
        "boolean"
    } else if t.starts_with("Date") {
        "date"
    } else if t.starts_with("Timestamp") {
        "timestamp"
    } else {
        "text"
    }
}

fn classify(msg: String, default_code: &'static str) -> SqlError {
    let lower = msg.to_lowercase();
    if lower.contains("divide by zero") || lower.contains("division by zero") {
        return SqlError::new(code::DIVISION_BY_ZERO, "division by zero");
    }
    if let Some(e) = datetime_error(&msg) {
        return e;
    }
    // An Arrow cast failure that reached us as text (from a task, or shared).
    if let Some(rest) = msg.split("Cast error: ").nth(1) {
        return cast_error(rest);
    }
    if let Some(rest) = msg
        .split("table '")
        .nth(1)
        .filter(|_| lower.contains("not found"))
    {
        // DataFusion names the table fully resolved ("postgres.$search_path.t"); PostgreSQL
        // names it as the query wrote it ("t" or "s.t").
        let full = rest.split('\'').next().unwrap_or(rest);
        let name = full
            .strip_prefix(crate::query::schema::DATABASE_NAME)
            .and_then(|n| n.strip_prefix('.'))
            .unwrap_or(full);
        let search_path_prefix = format!("{}.", crate::query::schema::SEARCH_PATH_SCHEMA);
        let name = name.strip_prefix(&search_path_prefix).unwrap_or(name);
        return SqlError::undefined_table(name);
    }
    if let Some(rest) = msg.split("non-boolean predicate").nth(1) {
        // "Cannot create filter with non-boolean predicate 'name' returning Utf8"
        let mut type_name = pg_name_of_arrow(rest.rsplit("returning ").next().unwrap_or(""));
        // DataFusion types every integer literal as Int64; PostgreSQL gives one that fits in
        // four bytes the type integer.
        let literal = rest.split('\'').nth(1).unwrap_or("");
        let small_literal = literal
            .strip_prefix("Int64(")
            .and_then(|n| n.strip_suffix(')'))
            .and_then(|n| n.parse::<i32>().ok());
        if small_literal.is_some() {
            type_name = "integer";
        }
        return SqlError::new(
            code::DATATYPE_MISMATCH,
            format!("argument of WHERE must be type boolean, not type {type_name}"),
        );
    }
    if lower.contains("invalid function") || lower.contains("unknown function") {
        let name = msg.split('\'').nth(1).unwrap_or("").to_string();
        return SqlError::new(code::UNDEFINED_FUNCTION, format!("function {name} does not exist"))
            .with_hint("No function matches the given name and argument types. You might need to add explicit type casts.");
    }
    if lower.contains("no function matches")
        || lower.contains("failed to coerce arguments")
        || lower.contains("does not support") && lower.contains("function")
    {
        return SqlError::new(code::UNDEFINED_FUNCTION, first_line(&msg));
    }
    // "Cannot coerce arithmetic expression Date32 + Date32 to valid types"
    if let Some(rest) = msg.split("Cannot coerce arithmetic expression ").nth(1) {
        let expr = rest.split(" to valid types").next().unwrap_or(rest);
        let parts: Vec<&str> = expr.split_whitespace().collect();
        if let [left, op, right] = parts.as_slice() {
            return SqlError::new(
                code::UNDEFINED_FUNCTION,
                format!(
                    "operator does not exist: {} {op} {}",
                    pg_name_of_arrow(left),
                    pg_name_of_arrow(right)
                ),
            )
            .with_hint("No operator matches the given name and argument types. You might need to add explicit type casts.");
        }
    }
    if lower.contains("cannot infer common")
        || lower.contains("there isn't a common type")
        || lower.contains("cannot coerce")
        || lower.contains("unsupported arithmetic")
        || lower.contains("cannot get result type")
    {
        return SqlError::new(
            code::UNDEFINED_FUNCTION,
            format!("operator does not exist: {}", first_line(&msg)),
        );
    }
    if lower.contains("overflow") {
        return SqlError::new(
            code::NUMERIC_VALUE_OUT_OF_RANGE,
            "value out of range: overflow",
        );
    }
    if lower.contains("must appear in the group by")
        || lower.contains("projection references non-aggregate values")
    {
        return SqlError::new(code::GROUPING_ERROR, first_line(&msg));
    }
    if lower.contains("cannot cast") || lower.contains("cast error") {
        return cast_error(&msg);
    }
    if lower.contains("scalar subquery") && lower.contains("more than one row") {
        return SqlError::new(
            code::CARDINALITY_VIOLATION,
            "more than one row returned by a subquery used as an expression",
        );
    }
    if lower.contains("no field named") {
        return schema_error(msg);
    }
    if lower.contains("unsupported sql type") {
        let name = msg.rsplit(' ').next().unwrap_or("").to_lowercase();
        return SqlError::new(
            code::UNDEFINED_OBJECT,
            format!("type \"{name}\" does not exist"),
        );
    }
    SqlError::new(default_code, first_line(&msg))
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or(s).to_string()
}

/// DataFusion's date and time errors in PostgreSQL's words.
fn datetime_error(msg: &str) -> Option<SqlError> {
    // "Invalid input syntax for type interval: \"abc\""
    if let Some(rest) = msg.split("Invalid input syntax for type interval: ").nth(1) {
        let value = rest.split('"').nth(1).unwrap_or(rest);
        return Some(SqlError::new(
            code::INVALID_DATETIME_FORMAT,
            format!("invalid input syntax for type interval: \"{value}\""),
        ));
    }
    // "Unable to parse date from 2024, 2, 30"
    if let Some(rest) = msg.split("Unable to parse date from ").nth(1) {
        let parts: Vec<&str> = rest.split(',').map(str::trim).collect();
        if let [y, m, d] = parts.as_slice() {
            return Some(SqlError::new(
                code::DATETIME_FIELD_OVERFLOW,
                format!("date field value out of range: {y}-{m:0>2}-{d:0>2}"),
            ));
        }
    }
    // "Unsupported date_trunc granularity: 'fortnight'. Supported values are: ..."
    if let Some(rest) = msg.split("Unsupported date_trunc granularity: '").nth(1) {
        let unit = rest.split('\'').next().unwrap_or(rest);
        return Some(SqlError::new(
            code::INVALID_PARAMETER_VALUE,
            format!("unit \"{unit}\" not recognized for type timestamp without time zone"),
        ));
    }
    None
}
