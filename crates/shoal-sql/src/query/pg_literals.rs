//! Literals that DataFusion would read differently from PostgreSQL, read PostgreSQL's way by
//! the rewrite (`rewrite.rs`): numbers with an exponent, numbers and booleans cast from text,
//! and SIMILAR TO patterns.

use datafusion::sql::sqlparser::ast::{self, DataType, Expr};

use crate::error::{SqlError, SqlResult};

/// The regular expression a SIMILAR TO pattern means, as PostgreSQL's similar_to_escape builds
/// it: anchored at both ends, `%` for any string, `_` for any character, the escape character
/// (backslash unless ESCAPE says otherwise; none for ESCAPE '') quoting the next one, bracket
/// expressions copied, and the characters that are special to regular expressions but not to
/// SIMILAR TO (`.`, `^`, `$`, `\`) quoted. None for a NULL pattern (the result is NULL, as
/// DataFusion already gives). DataFusion would take the pattern for a regular expression.
pub(crate) fn similar_to_regex(
    pattern: &Expr,
    escape: Option<&ast::ValueWithSpan>,
) -> SqlResult<Option<String>> {
    let pattern = match pattern {
        Expr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(s) | ast::Value::EscapedStringLiteral(s) => s,
            ast::Value::Null => return Ok(None),
            _ => return Err(SqlError::unsupported("SIMILAR TO with a non-text pattern")),
        },
        _ => {
            return Err(SqlError::unsupported(
                "SIMILAR TO with a non-constant pattern",
            ))
        }
    };
    let escape = match escape.map(|v| &v.value) {
        None => Some('\\'),
        Some(ast::Value::SingleQuotedString(e)) if e.is_empty() => None,
        Some(ast::Value::SingleQuotedString(e)) if e.chars().count() == 1 => e.chars().next(),
        Some(_) => {
            return Err(SqlError::new("22025", "invalid escape string")
                .with_hint("Escape string must be empty or one character."))
        }
    };
    let mut regex = String::from("^(?:");
    let (mut after_escape, mut in_class) = (false, false);
    for c in pattern.chars() {
        if after_escape {
            regex.push('\\');
            regex.push(c);
            after_escape = false;
        } else if Some(c) == escape {
            after_escape = true;
        } else if in_class {
            if c == '\\' {
                regex.push('\\');
            }
            regex.push(c);
            in_class = c != ']';
        } else {
            match c {
                '[' => {
                    regex.push(c);
                    in_class = true;
                }
                '%' => regex.push_str(".*"),
                '_' => regex.push('.'),
                '(' => regex.push_str("(?:"),
                '.' | '^' | '$' | '\\' => {
                    regex.push('\\');
                    regex.push(c);
                }
                _ => regex.push(c),
            }
        }
    }
    regex.push_str(")$");
    Ok(Some(regex))
}

/// A string literal cast to a number or a boolean, read as PostgreSQL reads it: DataFusion
/// would take "10e400" for infinity, " 12 " for an error and "1e-400" for zero. The literal
/// is refused as PostgreSQL refuses it, or rewritten in a form DataFusion reads the same way.
pub(crate) fn read_scalar_literal(text: &mut String, t: &DataType) -> SqlResult<()> {
    use crate::pgtext;
    let name = t.to_string().to_ascii_lowercase();
    match name.as_str() {
        "smallint" | "int2" => *text = pgtext::parse_smallint(text)?.to_string(),
        "int" | "integer" | "int4" => *text = pgtext::parse_integer(text)?.to_string(),
        "bigint" | "int8" => *text = pgtext::parse_bigint(text)?.to_string(),
        "boolean" | "bool" => *text = pgtext::parse_bool(text)?.to_string(),
        "real" | "float4" => {
            pgtext::parse_real(text)?;
            *text = text.trim().to_string();
        }
        "double" | "double precision" | "float8" => {
            pgtext::parse_double(text)?;
            *text = text.trim().to_string();
        }
        _ => {}
    }
    Ok(())
}

/// A numeric literal with an exponent written out in plain digits: `1e3` is `1000`, `1.5e-3`
/// `0.0015`, `1.50e2` `150` (PostgreSQL's numeric of the same value and scale). DataFusion reads
/// an exponent as a negative decimal scale, which it mishandles: `1e3` became 10, and arithmetic
/// with it overflowed. None when there is no exponent (or it is too large to write out).
pub(crate) fn without_exponent(number: &str) -> Option<String> {
    const EXPONENT_MAX: i64 = 1000;
    let (mantissa, exponent) = number.split_once(['e', 'E'])?;
    let exponent: i64 = exponent.parse().ok()?;
    if exponent.abs() > EXPONENT_MAX {
        return None;
    }
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{whole}{fraction}");
    // Where the decimal point falls in `digits` once the exponent moves it.
    let point = whole.len() as i64 + exponent;
    let (int_part, frac_part) = if point <= 0 {
        (
            "0".to_string(),
            format!("{}{digits}", "0".repeat((-point) as usize)),
        )
    } else if point as usize >= digits.len() {
        (
            format!("{digits}{}", "0".repeat(point as usize - digits.len())),
            String::new(),
        )
    } else {
        let (i, f) = digits.split_at(point as usize);
        (i.to_string(), f.to_string())
    };
    let int_part = int_part.trim_start_matches('0');
    let int_part = if int_part.is_empty() { "0" } else { int_part };
    Some(match frac_part.is_empty() {
        true => int_part.to_string(),
        false => format!("{int_part}.{frac_part}"),
    })
}

#[cfg(test)]
mod tests {
    use super::without_exponent;

    #[test]
    fn exponents_are_written_out() {
        assert_eq!(without_exponent("1e3").as_deref(), Some("1000"));
        assert_eq!(without_exponent("1.5e-3").as_deref(), Some("0.0015"));
        assert_eq!(without_exponent("1.50e2").as_deref(), Some("150"));
        assert_eq!(without_exponent("12.5E1").as_deref(), Some("125"));
        assert_eq!(without_exponent("0.5e0").as_deref(), Some("0.5"));
        assert_eq!(without_exponent(".5e1").as_deref(), Some("5"));
        assert_eq!(without_exponent("25e-1").as_deref(), Some("2.5"));
        assert_eq!(without_exponent("123"), None);
        assert_eq!(without_exponent("1e5000"), None);
    }
}
