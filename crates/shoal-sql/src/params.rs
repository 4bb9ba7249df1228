//! Statement parameters ($1, $2, ...): counting and locating them, choosing their types, decoding
//! the client's text or binary bytes into typed values, and substituting values into a statement
//! for the paths that execute from the AST rather than a cached plan.

use std::ops::ControlFlow;

use datafusion::arrow::datatypes::{DataType as ArrowType, IntervalUnit, TimeUnit};
use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::ast::{
    self, Expr, Statement, Visit, VisitMut, Visitor, VisitorMut,
};
use shoal_storage::types::{DataType, Value};

use crate::error::{code, SqlError, SqlResult};
use crate::pgtext;
use crate::timezone::TimeZone;
use crate::types::{oid, scalar_from_value};

/// "$3" → 2.
pub fn placeholder_index(name: &str) -> Option<usize> {
    name.strip_prefix('$')?
        .parse::<usize>()
        .ok()?
        .checked_sub(1)
}

/// The number of parameters: the highest $n used. A PREPARE has none of its own: the $n in
/// the statement it prepares are that statement's, bound by EXECUTE.
pub fn count_placeholders(stmt: &Statement) -> usize {
    if matches!(stmt, Statement::Prepare { .. }) {
        return 0;
    }
    struct Counter(usize);
    impl Visitor for Counter {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            if let Expr::Value(v) = e {
                if let ast::Value::Placeholder(p) = &v.value {
                    if let Some(i) = placeholder_index(p) {
                        self.0 = self.0.max(i + 1);
                    }
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut c = Counter(0);
    let _ = stmt.visit(&mut c);
    c.0
}

/// The types explicit casts give parameters (`$1::timestamptz`), by parameter index, with their
/// PostgreSQL type OID: PostgreSQL takes a parameter's type from such a cast, while DataFusion
/// leaves it unknown. The first cast of a parameter wins; unknown type names are skipped. A
/// parameter that is a LIMIT or OFFSET is a bigint, as PostgreSQL types it.
/// Functions whose arguments are not text, by name and argument types (PostgreSQL's one
/// candidate for that many arguments): a placeholder passed to one takes the argument's type,
/// as PostgreSQL infers it.
const FUNCTION_PARAMETER_TYPES: &[(&str, &[u32])] = &[
    ("pg_cancel_backend", &[oid::INT4]),
    ("pg_terminate_backend", &[oid::INT4]),
    ("pg_terminate_backend", &[oid::INT4, oid::INT8]),
    ("pg_sleep", &[oid::FLOAT8]),
    ("pg_advisory_lock", &[oid::INT8]),
    ("pg_advisory_lock", &[oid::INT4, oid::INT4]),
    ("pg_advisory_lock_shared", &[oid::INT8]),
    ("pg_advisory_lock_shared", &[oid::INT4, oid::INT4]),
    ("pg_advisory_xact_lock", &[oid::INT8]),
    ("pg_advisory_xact_lock", &[oid::INT4, oid::INT4]),
    ("pg_advisory_xact_lock_shared", &[oid::INT8]),
    ("pg_advisory_xact_lock_shared", &[oid::INT4, oid::INT4]),
    ("pg_try_advisory_lock", &[oid::INT8]),
    ("pg_try_advisory_lock", &[oid::INT4, oid::INT4]),
    ("pg_try_advisory_lock_shared", &[oid::INT8]),
    ("pg_try_advisory_lock_shared", &[oid::INT4, oid::INT4]),
    ("pg_try_advisory_xact_lock", &[oid::INT8]),
    ("pg_try_advisory_xact_lock", &[oid::INT4, oid::INT4]),
    ("pg_try_advisory_xact_lock_shared", &[oid::INT8]),
    ("pg_try_advisory_xact_lock_shared", &[oid::INT4, oid::INT4]),
    ("pg_advisory_unlock", &[oid::INT8]),
    ("pg_advisory_unlock", &[oid::INT4, oid::INT4]),
    ("pg_advisory_unlock_shared", &[oid::INT8]),
    ("pg_advisory_unlock_shared", &[oid::INT4, oid::INT4]),
];

pub fn placeholder_cast_types(stmt: &Statement, count: usize) -> Vec<Option<(ArrowType, u32)>> {
    struct Casts(Vec<Option<(ArrowType, u32)>>);
    impl Casts {
        fn bigint_if_placeholder(&mut self, e: &Expr) {
            let Expr::Value(v) = e else { return };
            let ast::Value::Placeholder(name) = &v.value else {
                return;
            };
            if let Some(slot @ None) = placeholder_index(name).and_then(|i| self.0.get_mut(i)) {
                *slot = Some((ArrowType::Int64, crate::types::oid::INT8));
            }
        }
    }
    impl Casts {
        /// Placeholders that are arguments of a function in `FUNCTION_PARAMETER_TYPES`.
        fn function_arguments(&mut self, f: &ast::Function) {
            let ast::FunctionArguments::List(list) = &f.args else {
                return;
            };
            let name = crate::query::rewrite::object_name_parts(&f.name);
            let [name] = name.as_slice() else { return };
            let Some((_, types)) = FUNCTION_PARAMETER_TYPES
                .iter()
                .find(|(n, types)| n == name && types.len() == list.args.len())
            else {
                return;
            };
            for (arg, oid) in list.args.iter().zip(types.iter()) {
                let ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(Expr::Value(v))) = arg
                else {
                    continue;
                };
                let ast::Value::Placeholder(name) = &v.value else {
                    continue;
                };
                if let Some(slot @ None) = placeholder_index(name).and_then(|i| self.0.get_mut(i)) {
                    *slot = Some((arrow_type_for_oid(*oid), *oid));
                }
            }
        }
    }
    impl Visitor for Casts {
        type Break = ();
        /// `generate_series(1, $1)` in FROM: a series of integers, as PostgreSQL resolves it
        /// when the other bounds are integers.
        fn pre_visit_table_factor(&mut self, t: &ast::TableFactor) -> ControlFlow<()> {
            let ast::TableFactor::Table {
                name,
                args: Some(args),
                ..
            } = t
            else {
                return ControlFlow::Continue(());
            };
            let is_series = matches!(
                crate::query::rewrite::object_name_parts(name).as_slice(),
                [n] if n == "generate_series"
            );
            let exprs: Vec<&Expr> = args
                .args
                .iter()
                .filter_map(|a| match a {
                    ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => Some(e),
                    _ => None,
                })
                .collect();
            let integers = exprs.iter().all(|e| {
                crate::query::select_srf::int4_literal(e).is_some()
                    || matches!(e, Expr::Value(v) if matches!(v.value, ast::Value::Placeholder(_)))
            });
            if is_series && integers && exprs.len() == args.args.len() {
                for e in exprs {
                    let Expr::Value(v) = e else { continue };
                    let ast::Value::Placeholder(name) = &v.value else {
                        continue;
                    };
                    if let Some(slot @ None) =
                        placeholder_index(name).and_then(|i| self.0.get_mut(i))
                    {
                        *slot = Some((ArrowType::Int32, crate::types::oid::INT4));
                    }
                }
            }
            ControlFlow::Continue(())
        }
        fn pre_visit_query(&mut self, q: &ast::Query) -> ControlFlow<()> {
            match &q.limit_clause {
                Some(ast::LimitClause::LimitOffset { limit, offset, .. }) => {
                    if let Some(limit) = limit {
                        self.bigint_if_placeholder(limit);
                    }
                    if let Some(offset) = offset {
                        self.bigint_if_placeholder(&offset.value);
                    }
                }
                Some(ast::LimitClause::OffsetCommaLimit { offset, limit }) => {
                    self.bigint_if_placeholder(offset);
                    self.bigint_if_placeholder(limit);
                }
                None => {}
            }
            ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            if let Expr::Function(f) = e {
                self.function_arguments(f);
            }
            let Expr::Cast {
                expr, data_type, ..
            } = e
            else {
                return ControlFlow::Continue(());
            };
            let mut inner = expr.as_ref();
            while let Expr::Nested(nested) = inner {
                inner = nested;
            }
            let Expr::Value(v) = inner else {
                return ControlFlow::Continue(());
            };
            let ast::Value::Placeholder(name) = &v.value else {
                return ControlFlow::Continue(());
            };
            let slot = placeholder_index(name).and_then(|i| self.0.get_mut(i));
            if let (Some(slot @ None), Some(declared)) = (slot, declared_type(data_type)) {
                *slot = Some(declared);
            }
            ControlFlow::Continue(())
        }
    }
    let mut casts = Casts(vec![None; count]);
    let _ = stmt.visit(&mut casts);
    casts.0
}

/// The Arrow type and PostgreSQL OID a cast to `data_type` gives a parameter. `oid[]` is an
/// array of bigints to Shoal, but clients know it by its own OID (asyncpg's type queries send
/// `$1::oid[]` and have no codec for int8[] until they have asked for one).
fn declared_type(data_type: &ast::DataType) -> Option<(ArrowType, u32)> {
    if let ast::DataType::Array(ast::ArrayElemTypeDef::SquareBracket(element, _)) = data_type {
        if let ast::DataType::Custom(name, _) = element.as_ref() {
            if name.to_string().eq_ignore_ascii_case("oid") {
                let t = DataType::Array(Box::new(DataType::Int64));
                return Some((crate::types::arrow_type(&t), 1028));
            }
        }
    }
    let t = crate::types::from_sql_type(data_type).ok()?;
    Some((crate::types::arrow_type(&t), crate::types::pg_type_of(&t).0))
}

pub fn arrow_type_for_oid(type_oid: u32) -> ArrowType {
    match type_oid {
        oid::BOOL => ArrowType::Boolean,
        oid::INT2 => ArrowType::Int16,
        oid::INT4 => ArrowType::Int32,
        oid::INT8 | oid::OID => ArrowType::Int64,
        oid::FLOAT4 => ArrowType::Float32,
        oid::FLOAT8 => ArrowType::Float64,
        oid::NUMERIC => crate::numeric::NUMERIC_ARROW,
        oid::BYTEA => ArrowType::Binary,
        oid::DATE => ArrowType::Date32,
        oid::TIMESTAMP => ArrowType::Timestamp(TimeUnit::Microsecond, None),
        oid::TIMESTAMPTZ => ArrowType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        oid::INTERVAL => ArrowType::Interval(IntervalUnit::MonthDayNano),
        oid::TIME => ArrowType::Time64(TimeUnit::Nanosecond),
        array => match crate::types::array_element_oid(array) {
            Some(element) => {
                let element = storage_type_for_arrow(&arrow_type_for_oid(element));
                crate::types::arrow_type(&DataType::Array(Box::new(element)))
            }
            None => ArrowType::Utf8,
        },
    }
}

/// The storage type whose values a parameter of PostgreSQL type `type_oid` holds.
fn storage_type_for_oid(type_oid: u32) -> DataType {
    match type_oid {
        oid::UUID => DataType::Uuid,
        oid::JSON => DataType::Json,
        oid::JSONB => DataType::Jsonb,
        other => storage_type_for_arrow(&arrow_type_for_oid(other)),
    }
}

/// The storage type that parses text for an Arrow parameter type.
pub fn storage_type_for_arrow(t: &ArrowType) -> DataType {
    match t {
        ArrowType::Boolean => DataType::Bool,
        ArrowType::Int8 | ArrowType::Int16 => DataType::Int16,
        ArrowType::Int32 => DataType::Int32,
        ArrowType::Int64 | ArrowType::UInt32 | ArrowType::UInt64 => DataType::Int64,
        ArrowType::Float32 => DataType::Float32,
        ArrowType::Float64 => DataType::Float64,
        ArrowType::Decimal128(p, s) => DataType::Numeric {
            precision: Some(*p),
            scale: Some((*s).max(0) as u8),
        },
        ArrowType::LargeBinary => DataType::Numeric {
            precision: None,
            scale: None,
        },
        ArrowType::Binary => DataType::Bytea,
        ArrowType::Date32 => DataType::Date,
        ArrowType::Timestamp(_, None) => DataType::Timestamp,
        ArrowType::Timestamp(_, Some(_)) => DataType::TimestampTz,
        ArrowType::Interval(_) => DataType::Interval,
        ArrowType::Time64(_) | ArrowType::Time32(_) => DataType::Time,
        ArrowType::List(element) | ArrowType::LargeList(element) => {
            DataType::Array(Box::new(crate::types::storage_type_of_field(element)))
        }
        _ => DataType::Text,
    }
}

/// The scalar cast to the parameter's type when it differs (`ScalarValue::cast_to` goes
/// through one-element arrays even when nothing changes); left as it is if the cast fails.
fn scalar_of_type(scalar: ScalarValue, t: &ArrowType) -> ScalarValue {
    if scalar.data_type() == *t {
        return scalar;
    }
    if crate::numeric::is_numeric(t) {
        let converted = scalar
            .to_array()
            .and_then(|a| crate::numeric::kernels::to_numeric_array(&a))
            .and_then(|a| ScalarValue::try_from_array(&a, 0));
        return converted.unwrap_or(scalar);
    }
    scalar.cast_to(t).unwrap_or(scalar)
}

/// Decodes a text-format parameter; a timestamptz without an offset is read in `zone`, the
/// session's time zone.
pub fn decode_text(text: &str, t: &ArrowType, zone: &TimeZone) -> SqlResult<ScalarValue> {
    if crate::numeric::is_numeric(t) {
        let n = shoal_numeric::Numeric::parse(text).map_err(crate::numeric::sql_error)?;
        return Ok(crate::numeric::scalar(Some(&n)));
    }
    let st = storage_type_for_arrow(t);
    let v = pgtext::parse_value(text, &st, zone)?;
    Ok(scalar_of_type(scalar_from_value(&v, &st), t))
}

/// Decodes a binary-format parameter of PostgreSQL type `type_oid`.
pub fn decode_binary(bytes: &[u8], type_oid: u32, t: &ArrowType) -> SqlResult<ScalarValue> {
    let bad = || {
        SqlError::new(
            code::PROTOCOL_VIOLATION,
            format!("incorrect binary data format in bind parameter (type {type_oid})"),
        )
    };
    let be_i64 =
        |b: &[u8]| -> SqlResult<i64> { Ok(i64::from_be_bytes(b.try_into().map_err(|_| bad())?)) };
    if type_oid == oid::NUMERIC {
        let n = shoal_numeric::Numeric::from_pg_binary(bytes).map_err(|_| bad())?;
        return Ok(scalar_of_type(crate::numeric::scalar(Some(&n)), t));
    }
    if let Some(element_oid) = crate::types::array_element_oid(type_oid) {
        let element = storage_type_for_oid(element_oid);
        let utc = TimeZone::utc();
        let elements = crate::copy::binary::decode_array(bytes, |b| match element_oid {
            // An oid is 4 unsigned bytes; Shoal holds it as a bigint.
            oid::OID => Ok(Value::Int64(
                u32::from_be_bytes(b.try_into().map_err(|_| bad())?) as i64,
            )),
            _ => crate::copy::binary::decode_field(b, &element, &utc),
        })
        .ok_or_else(bad)??;
        let array_type = DataType::Array(Box::new(element));
        return Ok(scalar_of_type(
            scalar_from_value(&Value::Array(elements), &array_type),
            t,
        ));
    }
    let v = match type_oid {
        oid::BOOL => Value::Bool(*bytes.first().ok_or_else(bad)? != 0),
        oid::INT2 => Value::Int16(i16::from_be_bytes(bytes.try_into().map_err(|_| bad())?)),
        oid::INT4 => Value::Int32(i32::from_be_bytes(bytes.try_into().map_err(|_| bad())?)),
        oid::INT8 => Value::Int64(be_i64(bytes)?),
        oid::OID => Value::Int64(u32::from_be_bytes(bytes.try_into().map_err(|_| bad())?) as i64),
        oid::FLOAT4 => Value::Float32(f32::from_be_bytes(bytes.try_into().map_err(|_| bad())?)),
        oid::FLOAT8 => Value::Float64(f64::from_be_bytes(bytes.try_into().map_err(|_| bad())?)),
        oid::BYTEA => Value::Bytea(bytes.to_vec()),
        oid::DATE => {
            Value::Date(i32::from_be_bytes(bytes.try_into().map_err(|_| bad())?) + PG_EPOCH_DAYS)
        }
        oid::TIMESTAMP => Value::Timestamp(be_i64(bytes)? + PG_EPOCH_MICROS),
        oid::TIMESTAMPTZ => Value::TimestampTz(be_i64(bytes)? + PG_EPOCH_MICROS),
        // interval_send: microseconds, days, months.
        oid::INTERVAL if bytes.len() == 16 => Value::Interval(shoal_storage::types::Interval {
            micros: be_i64(&bytes[..8])?,
            days: i32::from_be_bytes(bytes[8..12].try_into().map_err(|_| bad())?),
            months: i32::from_be_bytes(bytes[12..].try_into().map_err(|_| bad())?),
        }),
        oid::INTERVAL => return Err(bad()),
        oid::TIME => match be_i64(bytes)? {
            micros @ 0..=86_400_000_000 => Value::Time(micros),
            _ => return Err(bad()),
        },
        // jsonb_send: a format version (1), then the text.
        oid::JSONB => match bytes.split_first() {
            Some((1, text)) => Value::Text(String::from_utf8(text.to_vec()).map_err(|_| bad())?),
            _ => return Err(bad()),
        },
        oid::UUID => Value::Text(crate::types::format_uuid(u128::from_be_bytes(
            bytes.try_into().map_err(|_| bad())?,
        ))),
        _ => Value::Text(String::from_utf8(bytes.to_vec()).map_err(|_| {
            SqlError::new(code::PROTOCOL_VIOLATION, "invalid UTF-8 in bind parameter")
        })?),
    };
    let st = storage_type_for_arrow(&arrow_type_for_oid(type_oid));
    let st = if matches!(v, Value::Text(_)) {
        DataType::Text
    } else {
        st
    };
    Ok(scalar_of_type(scalar_from_value(&v, &st), t))
}

/// Days and microseconds from 1970-01-01 to PostgreSQL's epoch, 2000-01-01.
pub const PG_EPOCH_DAYS: i32 = 10_957;
pub const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;

/// Replaces $n placeholders with literal expressions of the bound values (none in a PREPARE,
/// whose placeholders belong to the statement it prepares).
pub fn substitute(stmt: &mut Statement, values: &[ScalarValue]) -> SqlResult<()> {
    if matches!(stmt, Statement::Prepare { .. }) {
        return Ok(());
    }
    struct Sub<'a> {
        values: &'a [ScalarValue],
        error: Option<SqlError>,
    }
    impl VisitorMut for Sub<'_> {
        type Break = ();
        fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
            if let Expr::Value(v) = e {
                if let ast::Value::Placeholder(p) = &v.value {
                    match placeholder_index(p).and_then(|i| self.values.get(i)) {
                        Some(value) => *e = literal_expr(value),
                        None => {
                            self.error = Some(SqlError::new(
                                code::UNDEFINED_PARAMETER,
                                format!("there is no parameter {p}"),
                            ));
                            return ControlFlow::Break(());
                        }
                    }
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut s = Sub {
        values,
        error: None,
    };
    let _ = stmt.visit(&mut s);
    s.error.map_or(Ok(()), Err)
}

fn sql_type_name(t: &ArrowType) -> Option<&'static str> {
    Some(match t {
        ArrowType::Int16 => "SMALLINT",
        ArrowType::Int32 => "INTEGER",
        ArrowType::Int64 => "BIGINT",
        ArrowType::Float32 => "REAL",
        ArrowType::Float64 => "DOUBLE PRECISION",
        ArrowType::Decimal128(..) | ArrowType::LargeBinary => "NUMERIC",
        ArrowType::Boolean => "BOOLEAN",
        ArrowType::Date32 => "DATE",
        ArrowType::Timestamp(_, None) => "TIMESTAMP",
        ArrowType::Timestamp(_, Some(_)) => "TIMESTAMPTZ",
        ArrowType::Interval(_) => "INTERVAL",
        ArrowType::Binary => "BYTEA",
        _ => return None,
    })
}

/// A literal that plans to exactly this value and type.
pub fn literal_expr(v: &ScalarValue) -> Expr {
    let text = if v.is_null() {
        None
    } else {
        let array = v.to_array().expect("scalar to array");
        let mut s = String::new();
        // A timestamptz is written with its offset, so it reads back the same in any zone.
        pgtext::format_array_value(array.as_ref(), 0, &TimeZone::utc(), &mut s);
        Some(s)
    };
    let dt = v.data_type();
    let inner = match &text {
        None => ast::Expr::value(ast::Value::Null),
        Some(t) => ast::Expr::value(ast::Value::SingleQuotedString(t.clone())),
    };
    match (sql_type_name(&dt), text) {
        (Some(name), _) => {
            let sql = format!("CAST(NULL AS {name})");
            let mut parsed = datafusion::sql::sqlparser::parser::Parser::new(
                &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
            )
            .try_with_sql(&sql)
            .and_then(|mut p| p.parse_expr())
            .expect("type names parse");
            if let Expr::Cast { expr, .. } = &mut parsed {
                *expr = Box::new(inner);
            }
            parsed
        }
        (None, _) => inner,
    }
}
