//! Casts and type names, rewritten for DataFusion with PostgreSQL's meaning: casts to numeric,
//! psql's schema-qualified built-in types, and varchar(n) / char(n) lengths.

use datafusion::sql::sqlparser::ast::{self, DataType, Expr, Ident, ObjectName, ObjectNamePart};

use super::{custom_type_name, function_call, object_name_parts};
use crate::error::{SqlError, SqlResult};

/// A cast to numeric is `pg_numeric(x)`, or `pg_numeric(x, precision, scale)` for numeric(p,s),
/// and one to numeric[] `pg_numeric_array(...)`: DataFusion's planner would make them
/// fixed-scale decimals (see `crate::numeric`). None for casts to other types.
pub(super) fn numeric_cast(inner: &Expr, t: &DataType) -> SqlResult<Option<Expr>> {
    // numeric[] and numeric(p,s)[]: `pg_numeric_array`, each element cast as above.
    let (info, function) = match t {
        DataType::Numeric(info) | DataType::Decimal(info) | DataType::Dec(info) => {
            (info, "pg_numeric")
        }
        DataType::Array(ast::ArrayElemTypeDef::SquareBracket(element, _)) => match element.as_ref()
        {
            DataType::Numeric(info) | DataType::Decimal(info) | DataType::Dec(info) => {
                // An array literal ('{1.10,2.5}') is read as text elements first.
                if let Expr::Value(v) = inner {
                    if let ast::Value::SingleQuotedString(text) = &v.value {
                        let text_array = DataType::Array(ast::ArrayElemTypeDef::SquareBracket(
                            Box::new(DataType::Text),
                            None,
                        ));
                        let elements = crate::query::array_literal::to_expr(text, &text_array)?;
                        let cast = DataType::Array(ast::ArrayElemTypeDef::SquareBracket(
                            Box::new(DataType::Numeric(info.clone())),
                            None,
                        ));
                        return numeric_cast(&elements, &cast);
                    }
                }
                (info, "pg_numeric_array")
            }
            _ => return Ok(None),
        },
        _ => return Ok(None),
    };
    let (precision, scale) = match info {
        ast::ExactNumberInfo::None => {
            return Ok(Some(function_call(function, vec![inner.clone()])))
        }
        ast::ExactNumberInfo::Precision(p) => (*p, 0),
        ast::ExactNumberInfo::PrecisionAndScale(_, s) if *s < 0 => {
            return Err(SqlError::new(
                crate::error::code::FEATURE_NOT_SUPPORTED,
                "numeric with a negative scale is not supported",
            ))
        }
        ast::ExactNumberInfo::PrecisionAndScale(p, s) => (*p, *s as u64),
    };
    if !(1..=NUMERIC_CAST_PRECISION_MAX).contains(&precision) {
        return Err(SqlError::new(
            crate::error::code::INVALID_PARAMETER_VALUE,
            format!(
                "NUMERIC precision {precision} must be between 1 and {NUMERIC_CAST_PRECISION_MAX}"
            ),
        ));
    }
    if scale > precision {
        return Err(SqlError::new(
            crate::error::code::INVALID_PARAMETER_VALUE,
            format!("NUMERIC scale {scale} must be between 0 and precision {precision}"),
        ));
    }
    let number = |n: u64| Expr::value(ast::Value::Number(n.to_string(), false));
    Ok(Some(function_call(
        function,
        vec![inner.clone(), number(precision), number(scale)],
    )))
}

/// PostgreSQL's largest numeric precision in a type modifier.
pub(super) const NUMERIC_CAST_PRECISION_MAX: u64 = 1000;

/// psql spells built-in types with their schema (`x::pg_catalog.text`, `pg_catalog.int2[]`);
/// those become the types sqlparser knows by name, so DataFusion can plan the cast.
pub(super) fn normalize_type_name(t: &mut DataType) {
    if let DataType::Array(ast::ArrayElemTypeDef::SquareBracket(element, _)) = t {
        normalize_type_name(element);
        // The standard's spellings, which DataFusion plans only outside arrays
        // (`character varying(255)[]`, as format_type prints it).
        match element.as_ref() {
            DataType::CharacterVarying(n) | DataType::CharVarying(n) => {
                **element = DataType::Varchar(*n)
            }
            DataType::Character(n) => **element = DataType::Char(*n),
            _ => {}
        }
        // Object identifiers are bigints to Shoal; an array of them too (`$1::oid[]`).
        if matches!(
            custom_type_name(element).as_deref(),
            Some("oid" | "regproc" | "regrole" | "xid" | "cid" | "regclass" | "regtype")
        ) {
            **element = DataType::BigInt(None);
        }
        // Text to DataFusion, as their scalars are (`$1::uuid[]`, `'{...}'::jsonb[]`).
        if matches!(
            element.as_ref(),
            DataType::Uuid | DataType::JSON | DataType::JSONB
        ) || matches!(custom_type_name(element).as_deref(), Some("json" | "jsonb"))
        {
            **element = DataType::Text;
        }
        return;
    }
    // The standard's spelling without a length, which DataFusion does not plan (with one,
    // the length cast below rewrites it).
    if let DataType::CharacterVarying(None) | DataType::CharVarying(None) = t {
        *t = DataType::Varchar(None);
        return;
    }
    let DataType::Custom(name, modifiers) = t else {
        return;
    };
    // A quoted name (`"numeric"`, as quote_ident and format_type print key words) is the same
    // type as the bare one.
    let parts = object_name_parts(name);
    let type_name = match parts.as_slice() {
        [type_name] => type_name,
        [schema, type_name] if schema == "pg_catalog" => type_name,
        _ => return,
    };
    if !modifiers.is_empty() {
        return;
    }
    *t = match type_name.as_str() {
        "text" => DataType::Text,
        "varchar" => DataType::Varchar(None),
        "bool" => DataType::Boolean,
        "int2" => DataType::SmallInt(None),
        "int4" => DataType::Int(None),
        "int8" => DataType::BigInt(None),
        "float4" => DataType::Real,
        "float8" => DataType::DoublePrecision,
        "numeric" => DataType::Numeric(ast::ExactNumberInfo::None),
        "date" => DataType::Date,
        "timestamp" => DataType::Timestamp(None, ast::TimezoneInfo::None),
        "time" => DataType::Time(None, ast::TimezoneInfo::None),
        "interval" => DataType::Interval {
            fields: None,
            precision: None,
        },
        // The remaining names (regclass, oid, name...) are handled by their bare name below.
        _ if parts.len() == 1 => return,
        other => DataType::Custom(
            ObjectName(vec![ObjectNamePart::Identifier(Ident::new(other))]),
            vec![],
        ),
    };
}

pub(super) fn is_text_type(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Text | DataType::Varchar(_) | DataType::CharacterVarying(_)
    )
}

/// n of an explicit cast to varchar(n) or char(n) (char alone is char(1)).
pub(super) fn explicit_length_limit(t: &DataType) -> Option<usize> {
    match t {
        DataType::Varchar(Some(length)) | DataType::CharacterVarying(Some(length)) => {
            character_length_limit(length)
        }
        DataType::Char(length) | DataType::Character(length) => match length {
            Some(length) => character_length_limit(length),
            None => Some(1),
        },
        _ => None,
    }
}

/// n of varchar(n), when it is a plain character count.
pub(super) fn character_length_limit(length: &ast::CharacterLength) -> Option<usize> {
    match length {
        ast::CharacterLength::IntegerLength { length, .. } => usize::try_from(*length).ok(),
        ast::CharacterLength::Max => None,
    }
}
