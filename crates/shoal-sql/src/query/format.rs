//! PostgreSQL's `format(formatstr, args...)`: `%s` (the value's text output, NULL as empty),
//! `%I` (quoted as an identifier when needed), `%L` (quoted as a literal, NULL as `NULL`),
//! `%%`, and argument positions (`%2$s`). Width and `-` flags are not supported yet and are
//! refused like an unknown specifier.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, StringBuilder};
use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature};

use crate::error::{code, SqlError, SqlResult};
use crate::query::functions::{quote_ident_if_needed, sql_error};
use crate::timezone::{SessionZone, TimeZone};

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PgFormat {
    pub signature: Signature,
    /// A timestamptz argument shows in the session's zone.
    pub zone: SessionZone,
}

impl ScalarUDFImpl for PgFormat {
    fn name(&self) -> &str {
        "format"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(ArrowType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let arrays = args
            .args
            .iter()
            .map(|a| a.to_array(rows))
            .collect::<DfResult<Vec<ArrayRef>>>()?;
        let zone = self.zone.get();
        let mut out = StringBuilder::with_capacity(rows, rows * 16);
        let mut text = String::new();
        for row in 0..rows {
            if crate::pgtext::is_null_at(arrays[0].as_ref(), row) {
                out.append_null();
                continue;
            }
            let mut template = String::new();
            crate::pgtext::format_array_value(arrays[0].as_ref(), row, &zone, &mut template);
            text.clear();
            format_row(&template, &arrays[1..], row, &zone, &mut text).map_err(sql_error)?;
            out.append_value(&text);
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// Expands `template` with row `row` of `values` into `out`.
fn format_row(
    template: &str,
    values: &[ArrayRef],
    row: usize,
    zone: &TimeZone,
    out: &mut String,
) -> SqlResult<()> {
    let mut chars = template.chars().peekable();
    let mut next_arg = 0usize;
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = chars.next().ok_or_else(|| {
            SqlError::new(
                code::INVALID_PARAMETER_VALUE,
                "unterminated format() type specifier",
            )
            .with_hint("For a single \"%\" use \"%%\".")
        })?;
        if spec == '%' {
            out.push('%');
            continue;
        }
        // An explicit position: digits followed by '$'.
        if spec.is_ascii_digit() {
            let mut digits = spec.to_string();
            while let Some(d) = chars.next_if(char::is_ascii_digit) {
                digits.push(d);
            }
            if chars.next_if_eq(&'$').is_none() {
                return Err(unrecognized_specifier(chars.next().unwrap_or(spec)));
            }
            let position: usize = digits.parse().unwrap_or(0);
            if position == 0 {
                return Err(SqlError::new(
                    code::INVALID_PARAMETER_VALUE,
                    "format specifies argument 0, but arguments are numbered from 1",
                ));
            }
            next_arg = position - 1;
            spec = chars.next().ok_or_else(|| unrecognized_specifier('$'))?;
        }
        let array = values.get(next_arg).ok_or_else(|| {
            SqlError::new(
                code::INVALID_PARAMETER_VALUE,
                "too few arguments for format()",
            )
        })?;
        next_arg += 1;
        append_value(spec, array.as_ref(), row, zone, out)?;
    }
    Ok(())
}

fn append_value(
    spec: char,
    array: &dyn Array,
    row: usize,
    zone: &TimeZone,
    out: &mut String,
) -> SqlResult<()> {
    let mut value = String::new();
    let is_null = crate::pgtext::is_null_at(array, row);
    if !is_null {
        crate::pgtext::format_array_value(array, row, zone, &mut value);
    }
    match spec {
        's' => out.push_str(&value),
        'I' if is_null => {
            return Err(SqlError::new(
                "22004",
                "null values cannot be formatted as an SQL identifier",
            ))
        }
        'I' => out.push_str(&quote_ident_if_needed(&value)),
        'L' if is_null => out.push_str("NULL"),
        'L' => out.push_str(&quote_literal(&value)),
        other => return Err(unrecognized_specifier(other)),
    }
    Ok(())
}

/// `'it''s'`; with backslashes PostgreSQL writes an escape string, `E'a\\b'`.
fn quote_literal(value: &str) -> String {
    let quoted = value.replace('\'', "''");
    if value.contains('\\') {
        format!("E'{}'", quoted.replace('\\', "\\\\"))
    } else {
        format!("'{quoted}'")
    }
}

fn unrecognized_specifier(spec: char) -> SqlError {
    SqlError::new(
        code::INVALID_PARAMETER_VALUE,
        format!("unrecognized format() type specifier \"{spec}\""),
    )
    .with_hint("For a single \"%\" use \"%%\".")
}
