//! SQL data types and values as the storage engine sees them. The SQL layer maps these to Arrow
//! and PostgreSQL types; storage only needs to know their sizes, their order and how to encode
//! them compactly.

use std::cmp::Ordering;

/// A column's declared type. Parameters (numeric precision/scale, varchar/char length) are kept
/// because they are part of the table's definition that psql shows and inserts must respect.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum DataType {
    Bool,
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    /// `numeric(p, s)`; `None` precision means unconstrained `numeric`.
    Numeric {
        precision: Option<u8>,
        scale: Option<u8>,
    },
    Text,
    /// `varchar(n)`; `None` means no length limit.
    Varchar(Option<u32>),
    /// `char(n)`: blank-padded to n characters on input.
    Char(u32),
    Bytea,
    /// Days since 1970-01-01.
    Date,
    /// Microseconds since 1970-01-01 00:00:00, no time zone.
    Timestamp,
    /// Microseconds since 1970-01-01 00:00:00 UTC.
    TimestampTz,
    Interval,
    Uuid,
    /// `time [without time zone]`: microseconds since midnight, 0..=86_400_000_000 (24:00:00
    /// is a valid time in PostgreSQL).
    Time,
    /// `json`: the client's text, validated, kept as written.
    Json,
    /// `jsonb`: kept as the text PostgreSQL prints for it (keys ordered and deduplicated,
    /// normalized spacing and numbers), so storage sees a string either way.
    Jsonb,
    /// A one-dimensional array of the element type (`int[]`, `text[]`), its lower bound 1.
    Array(Box<DataType>),
    /// A user-defined enum (`CREATE TYPE ... AS ENUM`). Values are stored as their labels,
    /// like text; input is checked against the labels, and the SQL layer orders values by
    /// their place among them.
    Enum(EnumType),
}

/// What a column of an enum type needs to know of it: a copy of its catalog entry
/// (`catalog::EnumTypeDef`), which DDL on the type refreshes in every column.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct EnumType {
    pub oid: u32,
    /// The type's name as format_type prints it (qualified outside `public`).
    pub name: String,
    /// The labels in sort order.
    pub labels: Vec<String>,
}

impl EnumType {
    /// The label's place in the sort order, None for what is not a label of the type.
    pub fn position(&self, label: &str) -> Option<usize> {
        self.labels.iter().position(|l| l == label)
    }
}

/// Scale used for unconstrained `numeric` columns, which are stored as 128-bit decimals.
pub const NUMERIC_DEFAULT_SCALE: u8 = 10;
/// Largest precision a 128-bit decimal holds.
pub const NUMERIC_MAX_PRECISION: u8 = 38;

impl DataType {
    /// The scale a numeric value of this type is stored with.
    pub fn numeric_scale(&self) -> u8 {
        match self {
            DataType::Numeric {
                precision: Some(_),
                scale,
            } => scale.unwrap_or(0),
            DataType::Numeric {
                precision: None, ..
            } => NUMERIC_DEFAULT_SCALE,
            _ => 0,
        }
    }
}

/// A PostgreSQL interval: months, days and microseconds are kept apart as PostgreSQL does,
/// because a month has no fixed number of days.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Interval {
    pub months: i32,
    pub days: i32,
    pub micros: i64,
}

/// One field value. Rows are not stored as `Vec<Value>` (see `row_codec`); this is the currency
/// of the storage API.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int16(i16),
    Int32(i32),
    Int64(i64),
    Float32(f32),
    Float64(f64),
    /// A decimal as mantissa and scale: value = mantissa / 10^scale.
    Numeric {
        mantissa: i128,
        scale: u8,
    },
    Text(String),
    Bytea(Vec<u8>),
    Date(i32),
    Timestamp(i64),
    TimestampTz(i64),
    Interval(Interval),
    Uuid(u128),
    Time(i64),
    /// An array's elements, each of the column's element type or NULL.
    Array(Vec<Value>),
}

impl Value {
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Total order used by indexes: NULL sorts last (as in PostgreSQL's default ASC order);
    /// values of different variants compare by variant only (the SQL layer casts keys to the
    /// column type before they reach storage, so this does not happen for well-formed calls).
    pub fn total_cmp(&self, other: &Value) -> Ordering {
        use Value::*;
        match (self, other) {
            (Null, Null) => Ordering::Equal,
            (Null, _) => Ordering::Greater,
            (_, Null) => Ordering::Less,
            (Bool(a), Bool(b)) => a.cmp(b),
            (Int16(a), Int16(b)) => a.cmp(b),
            (Int32(a), Int32(b)) => a.cmp(b),
            (Int64(a), Int64(b)) => a.cmp(b),
            (Float32(a), Float32(b)) => a.total_cmp(b),
            (Float64(a), Float64(b)) => a.total_cmp(b),
            (
                Numeric {
                    mantissa: a,
                    scale: sa,
                },
                Numeric {
                    mantissa: b,
                    scale: sb,
                },
            ) => {
                if sa == sb {
                    a.cmp(b)
                } else {
                    let (a, b) = rescale_pair(*a, *sa, *b, *sb);
                    a.cmp(&b)
                }
            }
            (Text(a), Text(b)) => a.cmp(b),
            (Bytea(a), Bytea(b)) => a.cmp(b),
            (Date(a), Date(b)) => a.cmp(b),
            (Timestamp(a), Timestamp(b)) => a.cmp(b),
            (TimestampTz(a), TimestampTz(b)) => a.cmp(b),
            (Interval(a), Interval(b)) => a.cmp(b),
            (Uuid(a), Uuid(b)) => a.cmp(b),
            (Time(a), Time(b)) => a.cmp(b),
            // PostgreSQL's array order: element by element, then the shorter array first.
            (Array(a), Array(b)) => {
                for (x, y) in a.iter().zip(b) {
                    match x.total_cmp(y) {
                        Ordering::Equal => {}
                        unequal => return unequal,
                    }
                }
                a.len().cmp(&b.len())
            }
            _ => self.variant_rank().cmp(&other.variant_rank()),
        }
    }

    fn variant_rank(&self) -> u8 {
        match self {
            Value::Null => 255,
            Value::Bool(_) => 0,
            Value::Int16(_) => 1,
            Value::Int32(_) => 2,
            Value::Int64(_) => 3,
            Value::Float32(_) => 4,
            Value::Float64(_) => 5,
            Value::Numeric { .. } => 6,
            Value::Text(_) => 7,
            Value::Bytea(_) => 8,
            Value::Date(_) => 9,
            Value::Timestamp(_) => 10,
            Value::TimestampTz(_) => 11,
            Value::Interval(_) => 12,
            Value::Uuid(_) => 13,
            Value::Time(_) => 14,
            Value::Array(_) => 15,
        }
    }
}

/// Brings two decimals to the larger scale so their mantissas compare; saturates on overflow.
fn rescale_pair(a: i128, sa: u8, b: i128, sb: u8) -> (i128, i128) {
    let up = |m: i128, by: u8| m.saturating_mul(10i128.saturating_pow(by as u32));
    if sa < sb {
        (up(a, sb - sa), b)
    } else {
        (a, up(b, sa - sb))
    }
}
