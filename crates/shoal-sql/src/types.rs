//! Type mapping between the three worlds a value crosses: storage (`DataType`/`Value`), Arrow
//! (what DataFusion computes on) and PostgreSQL (the type OIDs and names clients see).

use std::sync::Arc;

use datafusion::arrow::array::*;
use datafusion::arrow::datatypes::{
    DataType as ArrowType, IntervalMonthDayNano, IntervalUnit, TimeUnit,
};
use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::ast;
use shoal_storage::types::{DataType, Interval, Value, NUMERIC_MAX_PRECISION};

use crate::error::{code, SqlError, SqlResult};

/// PostgreSQL type OIDs (pg_type.oid) used on the wire and in pg_catalog.
pub mod oid {
    pub const BOOL: u32 = 16;
    pub const BYTEA: u32 = 17;
    pub const CHAR: u32 = 18;
    pub const NAME: u32 = 19;
    pub const INT8: u32 = 20;
    pub const INT2: u32 = 21;
    pub const INT4: u32 = 23;
    pub const REGPROC: u32 = 24;
    pub const TEXT: u32 = 25;
    pub const OID: u32 = 26;
    pub const FLOAT4: u32 = 700;
    pub const FLOAT8: u32 = 701;
    pub const UNKNOWN: u32 = 705;
    pub const BPCHAR: u32 = 1042;
    pub const VARCHAR: u32 = 1043;
    pub const DATE: u32 = 1082;
    pub const TIME: u32 = 1083;
    pub const TIMESTAMP: u32 = 1114;
    pub const TIMESTAMPTZ: u32 = 1184;
    pub const INTERVAL: u32 = 1186;
    pub const NUMERIC: u32 = 1700;
    pub const REGCLASS: u32 = 2205;
    pub const REGTYPE: u32 = 2206;
    pub const UUID: u32 = 2950;
    pub const JSON: u32 = 114;
    pub const JSONB: u32 = 3802;
    pub const VOID: u32 = 2278;
    pub const RECORD: u32 = 2249;
    pub const TRIGGER: u32 = 2279;
    /// The catalogs' vectors (pg_index.indkey, indclass): arrays whose subscripts start at 0
    /// and whose text form separates the elements with spaces.
    pub const INT2VECTOR: u32 = 22;
    pub const OIDVECTOR: u32 = 30;
    pub const INT2_ARRAY: u32 = 1005;
    pub const INT4_ARRAY: u32 = 1007;
    pub const TEXT_ARRAY: u32 = 1009;
    pub const FLOAT8_ARRAY: u32 = 1022;
    pub const INT8_ARRAY: u32 = 1016;
    pub const BOOL_ARRAY: u32 = 1000;

    /// Each element type's array type (pg_type.typarray), as PostgreSQL numbers them.
    pub const ARRAY_TYPES: &[(u32, u32)] = &[
        (BOOL, BOOL_ARRAY),
        (CHAR, 1002),
        (NAME, 1003),
        (BYTEA, 1001),
        (INT2, INT2_ARRAY),
        (INT4, INT4_ARRAY),
        (INT8, INT8_ARRAY),
        (TEXT, TEXT_ARRAY),
        (BPCHAR, 1014),
        (VARCHAR, 1015),
        (FLOAT4, 1021),
        (FLOAT8, FLOAT8_ARRAY),
        (OID, 1028),
        (DATE, 1182),
        (TIME, 1183),
        (TIMESTAMP, 1115),
        (TIMESTAMPTZ, 1185),
        (INTERVAL, 1187),
        (NUMERIC, 1231),
        (UUID, 2951),
        (JSON, 199),
        (JSONB, 3807),
    ];

    /// The array type of an element type.
    pub fn array_of(element: u32) -> Option<u32> {
        ARRAY_TYPES
            .iter()
            .find(|(e, _)| *e == element)
            .map(|(_, a)| *a)
    }
}

/// Arrow field metadata key carrying the PostgreSQL type OID of a column whose Arrow type alone
/// does not say it (uuid, varchar, char stored as Utf8).
pub const PG_TYPE_METADATA_KEY: &str = "shoal.pg_type";
/// Beside `PG_TYPE_METADATA_KEY`: the typmod of a length-limited type (varchar(n), char(n)),
/// which result descriptions report and CREATE TABLE AS keeps.
pub const PG_TYPMOD_METADATA_KEY: &str = "shoal.pg_typmod";

/// The storage type a result field stands for: its PostgreSQL type when the field carries one
/// (varchar(n), char(n), uuid, which Arrow holds as plain strings), else from its Arrow type.
pub fn storage_type_of_field(f: &datafusion::arrow::datatypes::Field) -> DataType {
    let meta = |key: &str| f.metadata().get(key).and_then(|v| v.parse::<i64>().ok());
    let length = meta(PG_TYPMOD_METADATA_KEY)
        .filter(|&typmod| typmod >= 4)
        .map(|typmod| (typmod - 4) as u32);
    match meta(PG_TYPE_METADATA_KEY).map(|o| o as u32) {
        Some(oid::VARCHAR) => DataType::Varchar(length),
        Some(oid::BPCHAR) => DataType::Char(length.unwrap_or(1)),
        Some(oid::UUID) => DataType::Uuid,
        Some(oid::JSON) => DataType::Json,
        Some(oid::JSONB) => DataType::Jsonb,
        Some(oid::NUMERIC) => DataType::Numeric {
            precision: length.map(|t| ((t >> 16) & 0xffff) as u8),
            scale: length.map(|t| (t & 0xffff) as u8),
        },
        _ => match f.data_type() {
            ArrowType::List(element) | ArrowType::LargeList(element) => {
                DataType::Array(Box::new(storage_type_of_field(element)))
            }
            t => crate::params::storage_type_for_arrow(t),
        },
    }
}

/// The Arrow field of a column (or array element) of type `t`: its Arrow type, and its
/// PostgreSQL type in the metadata where the Arrow type does not say it.
pub fn arrow_field(name: &str, t: &DataType) -> datafusion::arrow::datatypes::Field {
    let field = datafusion::arrow::datatypes::Field::new(name, arrow_type(t), true);
    if !declares_pg_type(t) {
        return field;
    }
    let (type_oid, typmod) = pg_type_of(t);
    let mut metadata: std::collections::HashMap<String, String> =
        [(PG_TYPE_METADATA_KEY.to_string(), type_oid.to_string())].into();
    if typmod >= 0 {
        metadata.insert(PG_TYPMOD_METADATA_KEY.to_string(), typmod.to_string());
    }
    field.with_metadata(metadata)
}

/// Types whose Arrow type alone does not say which PostgreSQL type they are.
pub fn declares_pg_type(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Uuid
            | DataType::Json
            | DataType::Jsonb
            | DataType::Enum(_)
            | DataType::Varchar(_)
            | DataType::Char(_)
            | DataType::Numeric {
                precision: Some(_),
                ..
            }
    )
}

pub fn arrow_type(t: &DataType) -> ArrowType {
    match t {
        DataType::Bool => ArrowType::Boolean,
        DataType::Int16 => ArrowType::Int16,
        DataType::Int32 => ArrowType::Int32,
        DataType::Int64 => ArrowType::Int64,
        DataType::Float32 => ArrowType::Float32,
        DataType::Float64 => ArrowType::Float64,
        DataType::Numeric { .. } => crate::numeric::NUMERIC_ARROW,
        DataType::Text
        | DataType::Varchar(_)
        | DataType::Char(_)
        | DataType::Uuid
        | DataType::Json
        | DataType::Jsonb
        | DataType::Enum(_) => ArrowType::Utf8,
        DataType::Bytea => ArrowType::Binary,
        DataType::Date => ArrowType::Date32,
        DataType::Timestamp => ArrowType::Timestamp(TimeUnit::Microsecond, None),
        DataType::TimestampTz => ArrowType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        DataType::Interval => ArrowType::Interval(IntervalUnit::MonthDayNano),
        // Nanoseconds, as DataFusion types `time '...'`, so columns and literals compare.
        DataType::Time => ArrowType::Time64(TimeUnit::Nanosecond),
        DataType::Array(element) => ArrowType::List(Arc::new(arrow_field("item", element))),
    }
}

/// The PostgreSQL type OID and typmod of a storage type (typmod as pg_attribute.atttypmod).
pub fn pg_type_of(t: &DataType) -> (u32, i32) {
    match t {
        DataType::Bool => (oid::BOOL, -1),
        DataType::Int16 => (oid::INT2, -1),
        DataType::Int32 => (oid::INT4, -1),
        DataType::Int64 => (oid::INT8, -1),
        DataType::Float32 => (oid::FLOAT4, -1),
        DataType::Float64 => (oid::FLOAT8, -1),
        DataType::Numeric {
            precision: Some(p),
            scale,
        } => (
            oid::NUMERIC,
            (((*p as i32) << 16) | scale.unwrap_or(0) as i32) + 4,
        ),
        DataType::Numeric { .. } => (oid::NUMERIC, -1),
        DataType::Text => (oid::TEXT, -1),
        DataType::Varchar(n) => (oid::VARCHAR, n.map(|n| n as i32 + 4).unwrap_or(-1)),
        DataType::Char(n) => (oid::BPCHAR, *n as i32 + 4),
        DataType::Bytea => (oid::BYTEA, -1),
        DataType::Date => (oid::DATE, -1),
        DataType::Timestamp => (oid::TIMESTAMP, -1),
        DataType::TimestampTz => (oid::TIMESTAMPTZ, -1),
        DataType::Interval => (oid::INTERVAL, -1),
        DataType::Uuid => (oid::UUID, -1),
        DataType::Time => (oid::TIME, -1),
        DataType::Json => (oid::JSON, -1),
        DataType::Jsonb => (oid::JSONB, -1),
        DataType::Enum(e) => (e.oid, -1),
        DataType::Array(element) => {
            let (element, typmod) = pg_type_of(element);
            (oid::array_of(element).unwrap_or(oid::TEXT_ARRAY), typmod)
        }
    }
}

/// PostgreSQL's `format_type` output for a storage type, as `\d` prints it.
pub fn format_type(t: &DataType) -> String {
    match t {
        DataType::Bool => "boolean".into(),
        DataType::Int16 => "smallint".into(),
        DataType::Int32 => "integer".into(),
        DataType::Int64 => "bigint".into(),
        DataType::Float32 => "real".into(),
        DataType::Float64 => "double precision".into(),
        DataType::Numeric {
            precision: Some(p),
            scale,
        } => {
            format!("numeric({},{})", p, scale.unwrap_or(0))
        }
        DataType::Numeric { .. } => "numeric".into(),
        DataType::Text => "text".into(),
        DataType::Varchar(Some(n)) => format!("character varying({n})"),
        DataType::Varchar(None) => "character varying".into(),
        DataType::Char(n) => format!("character({n})"),
        DataType::Bytea => "bytea".into(),
        DataType::Date => "date".into(),
        DataType::Timestamp => "timestamp without time zone".into(),
        DataType::TimestampTz => "timestamp with time zone".into(),
        DataType::Interval => "interval".into(),
        DataType::Uuid => "uuid".into(),
        DataType::Time => "time without time zone".into(),
        DataType::Json => "json".into(),
        DataType::Jsonb => "jsonb".into(),
        DataType::Enum(e) => e.name.clone(),
        DataType::Array(element) => format!("{}[]", format_type(element)),
    }
}

/// The PostgreSQL type OID a result column of this Arrow type is reported as.
pub fn pg_oid_for_arrow(t: &ArrowType) -> u32 {
    match t {
        ArrowType::Boolean => oid::BOOL,
        ArrowType::Int8 | ArrowType::Int16 | ArrowType::UInt8 => oid::INT2,
        ArrowType::Int32 | ArrowType::UInt16 => oid::INT4,
        ArrowType::Int64 => oid::INT8,
        // Catalog OIDs (pg_class.oid, pg_type.typarray) are UInt32.
        ArrowType::UInt32 => oid::OID,
        ArrowType::UInt64 => oid::NUMERIC,
        ArrowType::Float16 | ArrowType::Float32 => oid::FLOAT4,
        ArrowType::Float64 => oid::FLOAT8,
        ArrowType::Decimal32(..)
        | ArrowType::Decimal64(..)
        | ArrowType::Decimal128(..)
        | ArrowType::Decimal256(..) => oid::NUMERIC,
        ArrowType::LargeBinary => oid::NUMERIC,
        ArrowType::Binary | ArrowType::BinaryView => oid::BYTEA,
        ArrowType::FixedSizeBinary(_) => oid::BYTEA,
        ArrowType::Date32 | ArrowType::Date64 => oid::DATE,
        ArrowType::Time32(_) | ArrowType::Time64(_) => oid::TIME,
        ArrowType::Timestamp(_, None) => oid::TIMESTAMP,
        ArrowType::Timestamp(_, Some(_)) => oid::TIMESTAMPTZ,
        ArrowType::Interval(_) | ArrowType::Duration(_) => oid::INTERVAL,
        ArrowType::List(f) | ArrowType::LargeList(f) => {
            let declared = f
                .metadata()
                .get(PG_TYPE_METADATA_KEY)
                .and_then(|v| v.parse::<u32>().ok());
            let element = match (declared, f.data_type()) {
                (Some(element), _) => element,
                (None, t) => pg_oid_for_arrow(t),
            };
            oid::array_of(element).unwrap_or(oid::TEXT_ARRAY)
        }
        ArrowType::Dictionary(_, v) => pg_oid_for_arrow(v),
        _ => oid::TEXT,
    }
}

/// The element type of an array type that result columns can have.
pub fn array_element_oid(array_oid: u32) -> Option<u32> {
    match array_oid {
        oid::INT2VECTOR => return Some(oid::INT2),
        oid::OIDVECTOR => return Some(oid::OID),
        _ => {}
    }
    oid::ARRAY_TYPES
        .iter()
        .find(|(_, a)| *a == array_oid)
        .map(|(e, _)| *e)
}

/// pg_type.typlen of a type: its fixed width in bytes, -1 for a variable-width one (what
/// RowDescription reports as the column's size).
pub fn type_length(type_oid: u32) -> i16 {
    crate::query::pg_catalog::BUILTIN_TYPES
        .iter()
        .find(|t| t.0 == type_oid)
        .map_or(-1, |t| t.2)
}

/// Whether a field holds one of the catalogs' vectors (int2vector, oidvector), whose first
/// subscript is 0.
pub fn is_catalog_vector(f: &datafusion::arrow::datatypes::Field) -> bool {
    matches!(
        f.metadata()
            .get(PG_TYPE_METADATA_KEY)
            .and_then(|v| v.parse::<u32>().ok()),
        Some(oid::INT2VECTOR | oid::OIDVECTOR)
    )
}

/// The user-defined type a type name names: `name` or `schema.name`, unqualified names looked
/// up along `search_path`.
pub fn lookup_user_type(
    t: &ast::DataType,
    catalog: &shoal_storage::catalog::Catalog,
    search_path: &[String],
) -> Option<Arc<shoal_storage::catalog::EnumTypeDef>> {
    let ast::DataType::Custom(name, modifiers) = t else {
        return None;
    };
    if !modifiers.is_empty() {
        return None;
    }
    match crate::ddl::split_name(name) {
        (Some(schema), name) => catalog.lookup_type(&schema, &name).cloned(),
        (None, name) => search_path
            .iter()
            .find_map(|schema| catalog.lookup_type(schema, &name).cloned()),
    }
}

/// A column's type: a built-in type (`from_sql_type`) or a user-defined enum.
pub fn column_type(
    t: &ast::DataType,
    catalog: &shoal_storage::catalog::Catalog,
    search_path: &[String],
) -> SqlResult<DataType> {
    if let Some(def) = lookup_user_type(t, catalog, search_path) {
        return Ok(def.column_type());
    }
    if let ast::DataType::Array(
        ast::ArrayElemTypeDef::SquareBracket(element, _)
        | ast::ArrayElemTypeDef::AngleBracket(element),
    ) = t
    {
        if lookup_user_type(element, catalog, search_path).is_some() {
            return Err(SqlError::unsupported("arrays of enum types"));
        }
    }
    from_sql_type(t)
}

/// Maps a parsed SQL type name to a storage type; PostgreSQL's spelling variants included.
pub fn from_sql_type(t: &ast::DataType) -> SqlResult<DataType> {
    use ast::DataType as S;
    Ok(match t {
        S::Boolean | S::Bool => DataType::Bool,
        S::SmallInt(_) | S::Int2(_) => DataType::Int16,
        S::Int(_) | S::Integer(_) | S::Int4(_) => DataType::Int32,
        S::BigInt(_) | S::Int8(_) => DataType::Int64,
        S::Real | S::Float4 => DataType::Float32,
        S::Float(info) => match info {
            ast::ExactNumberInfo::Precision(p) if *p <= 24 => DataType::Float32,
            _ => DataType::Float64,
        },
        S::DoublePrecision | S::Double(_) | S::Float8 | S::Float64 => DataType::Float64,
        S::Numeric(info) | S::Decimal(info) | S::Dec(info) => numeric_type(info)?,
        S::Text | S::String(_) => DataType::Text,
        S::Varchar(len) | S::CharacterVarying(len) | S::CharVarying(len) => {
            DataType::Varchar(char_length(len)?)
        }
        S::Char(len) | S::Character(len) => DataType::Char(char_length(len)?.unwrap_or(1)),
        S::Bytea => DataType::Bytea,
        S::Date => DataType::Date,
        S::Timestamp(_, tz) => match tz {
            ast::TimezoneInfo::WithTimeZone | ast::TimezoneInfo::Tz => DataType::TimestampTz,
            _ => DataType::Timestamp,
        },
        S::TimestampNtz(_) => DataType::Timestamp,
        S::Interval { .. } => DataType::Interval,
        S::Uuid => DataType::Uuid,
        S::JSON => DataType::Json,
        S::JSONB => DataType::Jsonb,
        S::Array(
            ast::ArrayElemTypeDef::SquareBracket(element, _)
            | ast::ArrayElemTypeDef::AngleBracket(element),
        ) => match from_sql_type(element)? {
            // `int[][]` is `int[]`: PostgreSQL does not enforce declared dimensions.
            array @ DataType::Array(_) => array,
            element => DataType::Array(Box::new(element)),
        },
        S::Time(_, ast::TimezoneInfo::None | ast::TimezoneInfo::WithoutTimeZone) => DataType::Time,
        S::Custom(name, mods) => {
            let n = name.to_string().to_lowercase();
            let n = n.trim_matches('"');
            let n = n.strip_prefix("pg_catalog.").unwrap_or(n);
            match n {
                "serial" | "serial4" => DataType::Int32,
                "bigserial" | "serial8" => DataType::Int64,
                "smallserial" | "serial2" => DataType::Int16,
                "int2" => DataType::Int16,
                "int4" => DataType::Int32,
                "int8" => DataType::Int64,
                "float4" => DataType::Float32,
                "float8" => DataType::Float64,
                "bpchar" => DataType::Char(mods.first().and_then(|m| m.parse().ok()).unwrap_or(1)),
                "timestamptz" => DataType::TimestampTz,
                // A refcursor holds a cursor's name.
                "citext" | "name" | "refcursor" => DataType::Text,
                "json" => DataType::Json,
                "jsonb" => DataType::Jsonb,
                _ => {
                    return Err(SqlError::new(
                        code::UNDEFINED_OBJECT,
                        format!("type \"{n}\" does not exist"),
                    ))
                }
            }
        }
        other => {
            return Err(SqlError::new(
                code::UNDEFINED_OBJECT,
                format!(
                    "type \"{}\" does not exist",
                    other.to_string().to_lowercase()
                ),
            ))
        }
    })
}

/// serial types are integers with a sequence default; the caller adds the sequence.
pub fn is_serial_type(t: &ast::DataType) -> bool {
    if let ast::DataType::Custom(name, _) = t {
        let n = name.to_string().to_lowercase();
        return matches!(
            n.as_str(),
            "serial" | "serial4" | "bigserial" | "serial8" | "smallserial" | "serial2"
        );
    }
    false
}

fn numeric_type(info: &ast::ExactNumberInfo) -> SqlResult<DataType> {
    let (precision, scale) = match info {
        ast::ExactNumberInfo::None => {
            return Ok(DataType::Numeric {
                precision: None,
                scale: None,
            })
        }
        ast::ExactNumberInfo::Precision(p) => (*p, 0),
        ast::ExactNumberInfo::PrecisionAndScale(p, s) => (*p, *s),
    };
    if precision < 1 || precision > NUMERIC_MAX_PRECISION as u64 {
        return Err(SqlError::new(
            code::INVALID_PARAMETER_VALUE,
            format!("NUMERIC precision {precision} must be between 1 and {NUMERIC_MAX_PRECISION}"),
        ));
    }
    if scale < 0 || scale > precision as i64 {
        return Err(SqlError::new(
            code::INVALID_PARAMETER_VALUE,
            format!("NUMERIC scale {scale} must be between 0 and precision {precision}"),
        ));
    }
    Ok(DataType::Numeric {
        precision: Some(precision as u8),
        scale: Some(scale as u8),
    })
}

fn char_length(len: &Option<ast::CharacterLength>) -> SqlResult<Option<u32>> {
    match len {
        None | Some(ast::CharacterLength::Max) => Ok(None),
        Some(ast::CharacterLength::IntegerLength { length, .. }) => {
            if *length == 0 {
                return Err(SqlError::new(
                    code::INVALID_PARAMETER_VALUE,
                    "length for type varchar must be at least 1",
                ));
            }
            Ok(Some(*length as u32))
        }
    }
}

/// Converts one Arrow array element to a storage value. The array has already been cast to
/// `arrow_type(t)`, so the downcasts below cannot fail for well-typed input.
pub fn value_from_array(array: &dyn Array, row: usize, t: &DataType) -> SqlResult<Value> {
    if array.is_null(row) {
        return Ok(Value::Null);
    }
    macro_rules! get {
        ($arr:ty) => {
            array
                .as_any()
                .downcast_ref::<$arr>()
                .ok_or_else(|| {
                    SqlError::internal(format!("unexpected array type {:?}", array.data_type()))
                })?
                .value(row)
        };
    }
    Ok(match t {
        DataType::Bool => Value::Bool(get!(BooleanArray)),
        DataType::Int16 => Value::Int16(get!(Int16Array)),
        DataType::Int32 => Value::Int32(get!(Int32Array)),
        DataType::Int64 => Value::Int64(get!(Int64Array)),
        DataType::Float32 => Value::Float32(get!(Float32Array)),
        DataType::Float64 => Value::Float64(get!(Float64Array)),
        DataType::Numeric { precision, scale } => {
            let bytes = get!(LargeBinaryArray);
            numeric_value(&crate::numeric::decode(bytes), *precision, *scale)?
        }
        DataType::Text
        | DataType::Varchar(_)
        | DataType::Json
        | DataType::Jsonb
        | DataType::Enum(_) => Value::Text(get!(StringArray).to_string()),
        DataType::Char(n) => Value::Text(pad_char(get!(StringArray), *n)),
        DataType::Uuid => Value::Uuid(parse_uuid(get!(StringArray))?),
        DataType::Bytea => Value::Bytea(get!(BinaryArray).to_vec()),
        DataType::Date => Value::Date(get!(Date32Array)),
        DataType::Time => Value::Time(get!(Time64NanosecondArray) / 1000),
        DataType::Array(element) => {
            let elements = array
                .as_any()
                .downcast_ref::<ListArray>()
                .ok_or_else(|| {
                    SqlError::internal(format!("unexpected array type {:?}", array.data_type()))
                })?
                .value(row);
            let elements = if elements.data_type() == &arrow_type(element) {
                elements
            } else {
                datafusion::arrow::compute::cast(&elements, &arrow_type(element))?
            };
            Value::Array(
                (0..elements.len())
                    .map(|i| value_from_array(elements.as_ref(), i, element))
                    .collect::<SqlResult<_>>()?,
            )
        }
        DataType::Timestamp => Value::Timestamp(get!(TimestampMicrosecondArray)),
        DataType::TimestampTz => Value::TimestampTz(get!(TimestampMicrosecondArray)),
        DataType::Interval => {
            let v = get!(IntervalMonthDayNanoArray);
            Value::Interval(Interval {
                months: v.months,
                days: v.days,
                micros: v.nanoseconds / 1000,
            })
        }
    })
}

/// A numeric as a row table stores it: with its column's typmod applied (rounded to the declared
/// scale, checked against the precision), as a 128-bit mantissa and a scale. Values beyond 38
/// digits are refused: PostgreSQL would store them, Shoal's row format does not yet.
pub fn numeric_value(
    n: &shoal_numeric::Numeric,
    precision: Option<u8>,
    scale: Option<u8>,
) -> SqlResult<Value> {
    let n = match precision {
        Some(p) => n
            .apply_typmod(p as u32, scale.unwrap_or(0) as i32)
            .map_err(crate::numeric::sql_error)?,
        None => n.clone(),
    };
    match n.to_i128_scaled() {
        Some((mantissa, scale)) if scale <= u8::MAX as u16 => Ok(Value::Numeric {
            mantissa,
            scale: scale as u8,
        }),
        _ if !matches!(n, shoal_numeric::Numeric::Finite { .. }) => Err(SqlError::new(
            code::FEATURE_NOT_SUPPORTED,
            format!("numeric {n} cannot be stored in a table column"),
        )),
        _ => Err(SqlError::new(
            code::FEATURE_NOT_SUPPORTED,
            format!(
                "numeric value {n} has more digits than a table column holds \
                 (38 significant digits, 255 after the point)"
            ),
        )),
    }
}

/// char(n) is blank-padded to n characters, as PostgreSQL stores it.
pub fn pad_char(s: &str, n: u32) -> String {
    let len = s.chars().count();
    if len >= n as usize {
        s.to_string()
    } else {
        let mut out = String::with_capacity(n as usize);
        out.push_str(s);
        out.extend(std::iter::repeat_n(' ', n as usize - len));
        out
    }
}

pub fn parse_uuid(s: &str) -> SqlResult<u128> {
    uuid::Uuid::parse_str(s.trim())
        .map(|u| u.as_u128())
        .map_err(|_| {
            SqlError::new(
                code::INVALID_TEXT_REPRESENTATION,
                format!("invalid input syntax for type uuid: \"{s}\""),
            )
        })
}

pub fn format_uuid(u: u128) -> String {
    uuid::Uuid::from_u128(u).hyphenated().to_string()
}

/// Builds one Arrow column from the values of one storage column.
pub fn array_from_values<'a>(
    t: &DataType,
    values: impl Iterator<Item = &'a Value> + ExactSizeIterator,
) -> ArrayRef {
    macro_rules! build {
        ($builder:ty, $variant:path) => {{
            let mut b = <$builder>::with_capacity(values.len());
            for v in values {
                match v {
                    $variant(x) => b.append_value(x.clone()),
                    _ => b.append_null(),
                }
            }
            Arc::new(b.finish()) as ArrayRef
        }};
    }
    match t {
        DataType::Bool => build!(BooleanBuilder, Value::Bool),
        DataType::Int16 => build!(Int16Builder, Value::Int16),
        DataType::Int32 => build!(Int32Builder, Value::Int32),
        DataType::Int64 => build!(Int64Builder, Value::Int64),
        DataType::Float32 => build!(Float32Builder, Value::Float32),
        DataType::Float64 => build!(Float64Builder, Value::Float64),
        DataType::Date => build!(Date32Builder, Value::Date),
        DataType::Array(element) => {
            let mut offsets = Vec::with_capacity(values.len() + 1);
            offsets.push(0i32);
            let mut nulls = NullBufferBuilder::new(values.len());
            let mut flat: Vec<&Value> = Vec::new();
            for v in values {
                match v {
                    Value::Array(elements) => {
                        flat.extend(elements);
                        nulls.append_non_null();
                    }
                    _ => nulls.append_null(),
                }
                offsets.push(flat.len() as i32);
            }
            let child = array_from_values(element, flat.into_iter());
            Arc::new(ListArray::new(
                Arc::new(arrow_field("item", element)),
                datafusion::arrow::buffer::OffsetBuffer::new(offsets.into()),
                child,
                nulls.finish(),
            ))
        }
        DataType::Time => {
            let mut b = Time64NanosecondBuilder::with_capacity(values.len());
            for v in values {
                match v {
                    Value::Time(micros) => b.append_value(micros * 1000),
                    _ => b.append_null(),
                }
            }
            Arc::new(b.finish())
        }
        DataType::Timestamp => build!(TimestampMicrosecondBuilder, Value::Timestamp),
        DataType::TimestampTz => {
            let mut b =
                TimestampMicrosecondBuilder::with_capacity(values.len()).with_timezone("UTC");
            for v in values {
                match v {
                    Value::TimestampTz(x) => b.append_value(*x),
                    _ => b.append_null(),
                }
            }
            Arc::new(b.finish())
        }
        DataType::Numeric { .. } => crate::numeric::array_from(values.map(|v| {
            match v {
                Value::Numeric { mantissa, scale } => Some(
                    shoal_numeric::Numeric::from_i128(*mantissa, *scale as u16)
                        .expect("a stored scale is within numeric's limits"),
                ),
                _ => None,
            }
        })),
        DataType::Text
        | DataType::Varchar(_)
        | DataType::Char(_)
        | DataType::Json
        | DataType::Jsonb
        | DataType::Enum(_) => {
            let mut b = StringBuilder::with_capacity(values.len(), values.len() * 16);
            for v in values {
                match v {
                    Value::Text(s) => b.append_value(s),
                    _ => b.append_null(),
                }
            }
            Arc::new(b.finish())
        }
        DataType::Uuid => {
            let mut b = StringBuilder::with_capacity(values.len(), values.len() * 36);
            for v in values {
                match v {
                    Value::Uuid(u) => b.append_value(format_uuid(*u)),
                    _ => b.append_null(),
                }
            }
            Arc::new(b.finish())
        }
        DataType::Bytea => {
            let mut b = BinaryBuilder::with_capacity(values.len(), values.len() * 16);
            for v in values {
                match v {
                    Value::Bytea(x) => b.append_value(x),
                    _ => b.append_null(),
                }
            }
            Arc::new(b.finish())
        }
        DataType::Interval => {
            let mut b = IntervalMonthDayNanoBuilder::with_capacity(values.len());
            for v in values {
                match v {
                    Value::Interval(i) => {
                        b.append_value(IntervalMonthDayNano::new(i.months, i.days, i.micros * 1000))
                    }
                    _ => b.append_null(),
                }
            }
            Arc::new(b.finish())
        }
    }
}

/// Changes a decimal mantissa from one scale to another (rounding half away from zero when the
/// scale shrinks, as PostgreSQL's numeric does).
pub fn rescale(mantissa: i128, from: u8, to: u8) -> i128 {
    if from == to {
        mantissa
    } else if from < to {
        mantissa.saturating_mul(10i128.pow((to - from) as u32))
    } else {
        let div = 10i128.pow((from - to) as u32);
        let q = mantissa / div;
        let r = mantissa % div;
        if r.abs() * 2 >= div {
            q + mantissa.signum()
        } else {
            q
        }
    }
}

/// A storage value as a DataFusion scalar of the column's Arrow type.
pub fn scalar_from_value(v: &Value, t: &DataType) -> ScalarValue {
    // The common fixed-width types directly: a one-element array costs several allocations,
    // and prepared statements decode every parameter through here.
    match (v, t) {
        (Value::Bool(x), DataType::Bool) => return ScalarValue::Boolean(Some(*x)),
        (Value::Int16(x), DataType::Int16) => return ScalarValue::Int16(Some(*x)),
        (Value::Int32(x), DataType::Int32) => return ScalarValue::Int32(Some(*x)),
        (Value::Int64(x), DataType::Int64) => return ScalarValue::Int64(Some(*x)),
        (Value::Float32(x), DataType::Float32) => return ScalarValue::Float32(Some(*x)),
        (Value::Float64(x), DataType::Float64) => return ScalarValue::Float64(Some(*x)),
        (Value::Date(x), DataType::Date) => return ScalarValue::Date32(Some(*x)),
        (Value::Timestamp(x), DataType::Timestamp) => {
            return ScalarValue::TimestampMicrosecond(Some(*x), None)
        }
        (Value::Text(x), DataType::Text | DataType::Varchar(_) | DataType::Char(_)) => {
            return ScalarValue::Utf8(Some(x.clone()))
        }
        _ => {}
    }
    let array = array_from_values(t, std::iter::once(v));
    ScalarValue::try_from_array(&array, 0).unwrap_or(ScalarValue::Null)
}
