//! Compact row encoding. RAM is the main cost of an in-memory database, so a row version is one
//! byte slice rather than a `Vec<Value>` (which costs 32 bytes per field plus a heap allocation per
//! string). Layout: a little-endian `u16` column count, a null bitmap (one bit per encoded
//! column), then one fixed-width slot per column in column order, then a tail with the bytes of
//! variable-width values (text, bytea). The slot of a variable-width column holds the `u32` end
//! offset of its bytes in the tail; its start is the end of the previous variable-width column,
//! so one column can be read without decoding the others. A row encoded with fewer columns than
//! the table now has (rows written before `ALTER TABLE ADD COLUMN`) reads the missing trailing
//! columns as NULL. A char(n) value is stored without its trailing blanks and padded again when
//! read: pgbench's `filler char(84)` is blank, and 84 bytes of blanks per row are a lot of RAM.

use std::borrow::Cow;

use crate::error::StorageError;
use crate::types::{DataType, Interval, Value};

const COUNT_BYTES: usize = 2;
/// Numeric is stored as a 16-byte mantissa plus its 1-byte scale, so a value whose scale differs
/// from the column's still round-trips exactly.
const NUMERIC_BYTES: usize = 17;

/// Bytes a column takes in the fixed area.
pub fn slot_width_bytes(t: &DataType) -> usize {
    if is_variable_width(t) {
        // The end offset of its bytes in the tail.
        return 4;
    }
    match t {
        DataType::Bool => 1,
        DataType::Int16 => 2,
        DataType::Int32 | DataType::Float32 | DataType::Date => 4,
        DataType::Int64
        | DataType::Float64
        | DataType::Timestamp
        | DataType::TimestampTz
        | DataType::Time => 8,
        DataType::Numeric { .. } => NUMERIC_BYTES,
        DataType::Interval | DataType::Uuid => 16,
        DataType::Text
        | DataType::Varchar(_)
        | DataType::Char(_)
        | DataType::Json
        | DataType::Jsonb
        | DataType::Enum(_)
        | DataType::Bytea
        | DataType::Array(_) => unreachable!("variable-width: answered above"),
    }
}

/// Whether a column keeps its bytes in the tail.
pub fn is_variable_width(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Text
            | DataType::Varchar(_)
            | DataType::Char(_)
            | DataType::Json
            | DataType::Jsonb
            | DataType::Enum(_)
            | DataType::Bytea
            | DataType::Array(_)
    )
}

/// Most elements an array value holds: its elements are encoded as one row of that many
/// columns.
pub const ARRAY_ELEMENTS_MAX: usize = u16::MAX as usize;

fn value_fits(t: &DataType, v: &Value) -> bool {
    if let (DataType::Array(element), Value::Array(values)) = (t, v) {
        return values.len() <= ARRAY_ELEMENTS_MAX
            && values.iter().all(|v| value_fits(element, v))
            && !matches!(element.as_ref(), DataType::Array(_));
    }
    matches!(
        (t, v),
        (_, Value::Null)
            | (DataType::Bool, Value::Bool(_))
            | (DataType::Int16, Value::Int16(_))
            | (DataType::Int32, Value::Int32(_))
            | (DataType::Int64, Value::Int64(_))
            | (DataType::Float32, Value::Float32(_))
            | (DataType::Float64, Value::Float64(_))
            | (DataType::Numeric { .. }, Value::Numeric { .. })
            | (
                DataType::Text
                    | DataType::Varchar(_)
                    | DataType::Char(_)
                    | DataType::Json
                    | DataType::Jsonb
                    | DataType::Enum(_),
                Value::Text(_)
            )
            | (DataType::Bytea, Value::Bytea(_))
            | (DataType::Date, Value::Date(_))
            | (DataType::Timestamp, Value::Timestamp(_))
            | (DataType::TimestampTz, Value::TimestampTz(_))
            | (DataType::Time, Value::Time(_))
            | (DataType::Interval, Value::Interval(_))
            | (DataType::Uuid, Value::Uuid(_))
    )
}

/// Checks that `values` can be encoded for `types`; [`encode`] panics on rows that fail this.
pub fn check_row(types: &[DataType], values: &[Value]) -> Result<(), StorageError> {
    if types.len() != values.len() {
        return Err(StorageError::ColumnCountMismatch {
            expected: types.len(),
            got: values.len(),
        });
    }
    for (column, (t, v)) in types.iter().zip(values).enumerate() {
        if !value_fits(t, v) {
            return Err(StorageError::TypeMismatch {
                column,
                expected: t.clone(),
                value: v.clone(),
            });
        }
    }
    Ok(())
}

/// The bytes a variable-width value keeps in the tail. An array's are its elements encoded as
/// one row with a column per element.
fn variable_bytes<'v>(t: &DataType, v: &'v Value) -> Cow<'v, [u8]> {
    match (t, v) {
        (DataType::Char(_), Value::Text(s)) => Cow::Borrowed(s.trim_end_matches(' ').as_bytes()),
        (_, Value::Text(s)) => Cow::Borrowed(s.as_bytes()),
        (_, Value::Bytea(b)) => Cow::Borrowed(b),
        (DataType::Array(element), Value::Array(values)) => {
            let types = vec![element.as_ref().clone(); values.len()];
            Cow::Owned(encode_vec(&types, values))
        }
        _ => Cow::Borrowed(&[]),
    }
}

/// A char(n) value as read back: blank-padded to n characters again.
fn pad_char(mut s: String, width_chars: u32) -> String {
    let chars = s.chars().count();
    let width_chars = width_chars as usize;
    if chars < width_chars {
        s.extend(std::iter::repeat_n(' ', width_chars - chars));
    }
    s
}

/// Encodes one row. Panics if a value does not fit its column type (see [`check_row`]).
pub fn encode(types: &[DataType], values: &[Value]) -> Box<[u8]> {
    encode_vec(types, values).into_boxed_slice()
}

/// [`encode`] into a `Vec` whose capacity equals its length.
pub fn encode_vec(types: &[DataType], values: &[Value]) -> Vec<u8> {
    assert_eq!(
        types.len(),
        values.len(),
        "row_codec::encode: one value per column"
    );
    assert!(
        values.len() <= u16::MAX as usize,
        "row_codec::encode: too many columns"
    );
    let column_count = values.len();
    let fixed_start = COUNT_BYTES + column_count.div_ceil(8);
    let fixed_bytes: usize = types.iter().map(slot_width_bytes).sum();
    let tail_start = fixed_start + fixed_bytes;
    let tail_bytes: usize = types
        .iter()
        .zip(values)
        .map(|(t, v)| variable_bytes(t, v).len())
        .sum();
    let mut out = Vec::with_capacity(tail_start + tail_bytes);
    out.resize(tail_start, 0);
    out[..COUNT_BYTES].copy_from_slice(&(column_count as u16).to_le_bytes());
    let mut slot = fixed_start;
    for (col, (t, v)) in types.iter().zip(values).enumerate() {
        let width = slot_width_bytes(t);
        if v.is_null() {
            out[COUNT_BYTES + col / 8] |= 1 << (col % 8);
        }
        if is_variable_width(t) {
            out.extend_from_slice(&variable_bytes(t, v));
            let end = (out.len() - tail_start) as u32;
            out[slot..slot + 4].copy_from_slice(&end.to_le_bytes());
        } else if !v.is_null() {
            write_fixed(t, v, &mut out[slot..slot + width]);
        }
        slot += width;
    }
    debug_assert_eq!(out.len(), out.capacity());
    out
}

fn write_fixed(t: &DataType, v: &Value, slot: &mut [u8]) {
    match v {
        Value::Bool(b) => slot[0] = *b as u8,
        Value::Int16(x) => slot.copy_from_slice(&x.to_le_bytes()),
        Value::Int32(x) | Value::Date(x) => slot.copy_from_slice(&x.to_le_bytes()),
        Value::Int64(x) | Value::Timestamp(x) | Value::TimestampTz(x) | Value::Time(x) => {
            slot.copy_from_slice(&x.to_le_bytes())
        }
        Value::Float32(x) => slot.copy_from_slice(&x.to_le_bytes()),
        Value::Float64(x) => slot.copy_from_slice(&x.to_le_bytes()),
        Value::Numeric { mantissa, scale } => {
            slot[..16].copy_from_slice(&mantissa.to_le_bytes());
            slot[16] = *scale;
        }
        Value::Interval(i) => {
            slot[..4].copy_from_slice(&i.months.to_le_bytes());
            slot[4..8].copy_from_slice(&i.days.to_le_bytes());
            slot[8..].copy_from_slice(&i.micros.to_le_bytes());
        }
        Value::Uuid(u) => slot.copy_from_slice(&u.to_le_bytes()),
        _ => panic!("row_codec: value {v:?} does not fit column type {t:?}"),
    }
}

fn read_fixed(t: &DataType, slot: &[u8]) -> Value {
    fn arr<const N: usize>(s: &[u8]) -> [u8; N] {
        s[..N].try_into().expect("slot width")
    }
    match t {
        DataType::Bool => Value::Bool(slot[0] != 0),
        DataType::Int16 => Value::Int16(i16::from_le_bytes(arr(slot))),
        DataType::Int32 => Value::Int32(i32::from_le_bytes(arr(slot))),
        DataType::Date => Value::Date(i32::from_le_bytes(arr(slot))),
        DataType::Int64 => Value::Int64(i64::from_le_bytes(arr(slot))),
        DataType::Timestamp => Value::Timestamp(i64::from_le_bytes(arr(slot))),
        DataType::TimestampTz => Value::TimestampTz(i64::from_le_bytes(arr(slot))),
        DataType::Time => Value::Time(i64::from_le_bytes(arr(slot))),
        DataType::Float32 => Value::Float32(f32::from_le_bytes(arr(slot))),
        DataType::Float64 => Value::Float64(f64::from_le_bytes(arr(slot))),
        DataType::Numeric { .. } => Value::Numeric {
            mantissa: i128::from_le_bytes(arr(slot)),
            scale: slot[16],
        },
        DataType::Interval => Value::Interval(Interval {
            months: i32::from_le_bytes(arr(slot)),
            days: i32::from_le_bytes(arr(&slot[4..])),
            micros: i64::from_le_bytes(arr(&slot[8..])),
        }),
        DataType::Uuid => Value::Uuid(u128::from_le_bytes(arr(slot))),
        DataType::Text
        | DataType::Varchar(_)
        | DataType::Char(_)
        | DataType::Json
        | DataType::Jsonb
        | DataType::Enum(_)
        | DataType::Bytea
        | DataType::Array(_) => {
            unreachable!("variable-width columns are not read from their slot")
        }
    }
}

/// The parsed header of an encoded row: where the fixed area and the tail start.
struct RowHeader {
    column_count: usize,
    fixed_start: usize,
    tail_start: usize,
}

impl RowHeader {
    fn parse(types: &[DataType], bytes: &[u8]) -> RowHeader {
        let column_count = u16::from_le_bytes([bytes[0], bytes[1]]) as usize;
        debug_assert!(
            column_count <= types.len(),
            "row has more columns than its table"
        );
        let fixed_start = COUNT_BYTES + column_count.div_ceil(8);
        let fixed_bytes: usize = types[..column_count].iter().map(slot_width_bytes).sum();
        debug_assert!(
            fixed_start + fixed_bytes <= bytes.len(),
            "row shorter than its fixed area"
        );
        RowHeader {
            column_count,
            fixed_start,
            tail_start: fixed_start + fixed_bytes,
        }
    }

    fn is_null(&self, bytes: &[u8], col: usize) -> bool {
        col >= self.column_count || bytes[COUNT_BYTES + col / 8] & (1 << (col % 8)) != 0
    }
}

fn read_u32(bytes: &[u8], at: usize) -> usize {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize
}

/// Reads column `col` whose slot starts at `slot`; `var_start` is where its tail bytes begin.
fn read_column(t: &DataType, bytes: &[u8], h: &RowHeader, slot: usize, var_start: usize) -> Value {
    if !is_variable_width(t) {
        return read_fixed(t, &bytes[slot..slot + slot_width_bytes(t)]);
    }
    let end = read_u32(bytes, slot);
    let raw = &bytes[h.tail_start + var_start..h.tail_start + end];
    let text = || String::from_utf8(raw.to_vec()).expect("row_codec: text is UTF-8");
    match t {
        DataType::Bytea => Value::Bytea(raw.to_vec()),
        DataType::Char(width_chars) => Value::Text(pad_char(text(), *width_chars)),
        DataType::Array(element) => {
            let count = u16::from_le_bytes([raw[0], raw[1]]) as usize;
            Value::Array(decode_all(&vec![element.as_ref().clone(); count], raw))
        }
        _ => Value::Text(text()),
    }
}

/// Decodes every column of the table (missing trailing columns are NULL).
pub fn decode_all(types: &[DataType], bytes: &[u8]) -> Vec<Value> {
    let mut out = Vec::with_capacity(types.len());
    let all: Vec<usize> = (0..types.len()).collect();
    decode_into(types, bytes, &all, &mut out);
    out
}

/// Decodes one column without decoding the others.
pub fn decode_column(types: &[DataType], bytes: &[u8], col: usize) -> Value {
    let h = RowHeader::parse(types, bytes);
    if h.is_null(bytes, col) {
        return Value::Null;
    }
    let mut slot = h.fixed_start;
    let mut var_start = 0;
    for t in &types[..col] {
        if is_variable_width(t) {
            var_start = read_u32(bytes, slot);
        }
        slot += slot_width_bytes(t);
    }
    read_column(&types[col], bytes, &h, slot, var_start)
}

/// Columns whose slot positions `decode_into` keeps on the stack.
const STACK_SLOTS: usize = 32;

/// Appends the values of columns `cols` (any order, repeats allowed) to `out`.
pub fn decode_into(types: &[DataType], bytes: &[u8], cols: &[usize], out: &mut Vec<Value>) {
    let h = RowHeader::parse(types, bytes);
    // One forward pass finds every slot and tail start; cols is usually short and sorted.
    let max_col = cols
        .iter()
        .copied()
        .max()
        .map_or(0, |c| c + 1)
        .min(h.column_count);
    // (slot, tail start) per column up to the last wanted one; on the stack for all but very
    // wide rows, since this runs for every row a scan, an index build or a load decodes.
    let mut on_stack = [(0usize, 0usize); STACK_SLOTS];
    let mut on_heap = Vec::new();
    let slots: &mut [(usize, usize)] = if max_col <= STACK_SLOTS {
        &mut on_stack[..max_col]
    } else {
        on_heap.resize(max_col, (0, 0));
        &mut on_heap
    };
    let mut slot = h.fixed_start;
    let mut var_start = 0;
    for (i, t) in types[..max_col].iter().enumerate() {
        slots[i] = (slot, var_start);
        if is_variable_width(t) {
            var_start = read_u32(bytes, slot);
        }
        slot += slot_width_bytes(t);
    }
    for &col in cols {
        if h.is_null(bytes, col) {
            out.push(Value::Null);
        } else {
            let (slot, var_start) = slots[col];
            out.push(read_column(&types[col], bytes, &h, slot, var_start));
        }
    }
}

/// Bytes a row of these values would take once encoded (for memory estimates and tests).
pub fn encoded_len_bytes(types: &[DataType], values: &[Value]) -> usize {
    COUNT_BYTES
        + values.len().div_ceil(8)
        + types.iter().map(slot_width_bytes).sum::<usize>()
        + types
            .iter()
            .zip(values)
            .map(|(t, v)| variable_bytes(t, v).len())
            .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    fn all_types() -> Vec<DataType> {
        vec![
            DataType::Bool,
            DataType::Int16,
            DataType::Int32,
            DataType::Int64,
            DataType::Float32,
            DataType::Float64,
            DataType::Numeric {
                precision: Some(20),
                scale: Some(4),
            },
            DataType::Text,
            DataType::Varchar(Some(10)),
            DataType::Char(5),
            DataType::Bytea,
            DataType::Date,
            DataType::Timestamp,
            DataType::TimestampTz,
            DataType::Time,
            DataType::Array(Box::new(DataType::Int32)),
            DataType::Array(Box::new(DataType::Text)),
            DataType::Interval,
            DataType::Uuid,
        ]
    }

    fn random_text(rng: &mut impl Rng) -> String {
        let len = rng.random_range(0..6);
        (0..len)
            .map(|_| ['a', 'z', '\0', 'é', '日', ' '][rng.random_range(0..6)])
            .collect()
    }

    pub(crate) fn random_value(t: &DataType, rng: &mut impl Rng) -> Value {
        if rng.random_ratio(1, 6) {
            return Value::Null;
        }
        let extreme = rng.random_ratio(1, 4);
        match t {
            DataType::Bool => Value::Bool(rng.random()),
            DataType::Int16 => Value::Int16(if extreme {
                [i16::MIN, i16::MAX, 0][rng.random_range(0..3)]
            } else {
                rng.random()
            }),
            DataType::Int32 => Value::Int32(if extreme {
                [i32::MIN, i32::MAX, 0][rng.random_range(0..3)]
            } else {
                rng.random()
            }),
            DataType::Int64 => Value::Int64(if extreme {
                [i64::MIN, i64::MAX, 0][rng.random_range(0..3)]
            } else {
                rng.random()
            }),
            DataType::Float32 => Value::Float32(if extreme {
                [f32::MIN, f32::MAX, -0.0, f32::INFINITY][rng.random_range(0..4)]
            } else {
                rng.random::<f32>() * 1e6 - 5e5
            }),
            DataType::Float64 => Value::Float64(if extreme {
                [f64::MIN, f64::MAX, -0.0, f64::NEG_INFINITY][rng.random_range(0..4)]
            } else {
                rng.random::<f64>() * 1e9 - 5e8
            }),
            DataType::Numeric { .. } => Value::Numeric {
                mantissa: if extreme {
                    [i128::MIN, i128::MAX, 0][rng.random_range(0..3)]
                } else {
                    rng.random_range(-1_000_000..1_000_000)
                },
                scale: rng.random_range(0..6),
            },
            DataType::Text
            | DataType::Varchar(_)
            | DataType::Json
            | DataType::Jsonb
            | DataType::Enum(_) => Value::Text(random_text(rng)),
            // The SQL layer pads char(n) values before they reach storage.
            DataType::Char(width_chars) => Value::Text(pad_char(random_text(rng), *width_chars)),
            DataType::Bytea => {
                Value::Bytea((0..rng.random_range(0..5)).map(|_| rng.random()).collect())
            }
            DataType::Date => Value::Date(rng.random()),
            DataType::Timestamp => Value::Timestamp(rng.random()),
            DataType::TimestampTz => Value::TimestampTz(rng.random()),
            DataType::Time => Value::Time(rng.random_range(0..=86_400_000_000)),
            DataType::Array(element) => Value::Array(
                (0..rng.random_range(0..4))
                    .map(|_| random_value(element, rng))
                    .collect(),
            ),
            DataType::Interval => Value::Interval(Interval {
                months: rng.random(),
                days: rng.random(),
                micros: rng.random(),
            }),
            DataType::Uuid => Value::Uuid(rng.random()),
        }
    }

    fn same(a: &Value, b: &Value) -> bool {
        // Floats compare by bits so -0.0 and NaN round trips are checked exactly.
        match (a, b) {
            (Value::Float32(x), Value::Float32(y)) => x.to_bits() == y.to_bits(),
            (Value::Float64(x), Value::Float64(y)) => x.to_bits() == y.to_bits(),
            _ => a == b,
        }
    }

    #[test]
    fn round_trips_random_rows_of_every_type() {
        let mut rng = rand::rng();
        let base = all_types();
        for round in 0..3000 {
            // Every tenth row is wider than the slots `decode_into` keeps on the stack.
            let n = if round % 10 == 0 {
                rng.random_range(STACK_SLOTS..STACK_SLOTS + 40)
            } else {
                rng.random_range(0..24)
            };
            let types: Vec<DataType> = (0..n)
                .map(|_| base[rng.random_range(0..base.len())].clone())
                .collect();
            let values: Vec<Value> = types.iter().map(|t| random_value(t, &mut rng)).collect();
            check_row(&types, &values).unwrap();
            let bytes = encode(&types, &values);
            assert_eq!(bytes.len(), encoded_len_bytes(&types, &values));
            let back = decode_all(&types, &bytes);
            assert_eq!(back.len(), values.len());
            for (col, v) in values.iter().enumerate() {
                assert!(same(&back[col], v), "col {col}: {:?} != {v:?}", back[col]);
                assert!(same(&decode_column(&types, &bytes, col), v));
            }
            if n > 0 {
                let cols: Vec<usize> = (0..4).map(|_| rng.random_range(0..n)).collect();
                let mut out = Vec::new();
                decode_into(&types, &bytes, &cols, &mut out);
                for (i, &c) in cols.iter().enumerate() {
                    assert!(same(&out[i], &values[c]));
                }
            }
        }
    }

    #[test]
    fn char_values_are_stored_without_their_padding() {
        let types = vec![DataType::Char(84), DataType::Char(4), DataType::Text];
        let blank = " ".repeat(84);
        let values = vec![
            Value::Text(blank.clone()),
            Value::Text("日 a".into()),
            Value::Text("b  ".into()),
        ];
        let bytes = encode(&types, &values);
        // Header, null bitmap, three 4-byte slots, then only "日 a" and "b  " in the tail.
        assert_eq!(bytes.len(), 2 + 1 + 12 + "日 a".len() + 3);
        let back = decode_all(&types, &bytes);
        assert_eq!(back[0], Value::Text(blank));
        assert_eq!(
            back[1],
            Value::Text("日 a ".into()),
            "padded to 4 characters, not bytes"
        );
        assert_eq!(
            back[2],
            Value::Text("b  ".into()),
            "text keeps its trailing blanks"
        );
    }

    #[test]
    fn empty_strings_and_all_nulls() {
        let types = vec![DataType::Text, DataType::Bytea, DataType::Text];
        let values = vec![
            Value::Text(String::new()),
            Value::Null,
            Value::Text("x".into()),
        ];
        let bytes = encode(&types, &values);
        assert_eq!(decode_all(&types, &bytes), values);
        let nulls = vec![Value::Null; 3];
        assert_eq!(decode_all(&types, &encode(&types, &nulls)), nulls);
        assert_eq!(decode_all(&[], &encode(&[], &[])), Vec::<Value>::new());
    }

    #[test]
    fn rows_written_before_add_column_read_null() {
        let old_types = vec![DataType::Int32, DataType::Text];
        let bytes = encode(&old_types, &[Value::Int32(7), Value::Text("a".into())]);
        let new_types = vec![
            DataType::Int32,
            DataType::Text,
            DataType::Int64,
            DataType::Text,
        ];
        assert_eq!(
            decode_all(&new_types, &bytes),
            vec![
                Value::Int32(7),
                Value::Text("a".into()),
                Value::Null,
                Value::Null
            ]
        );
        assert_eq!(decode_column(&new_types, &bytes, 3), Value::Null);
    }

    #[test]
    fn check_row_rejects_wrong_types_and_counts() {
        let types = vec![DataType::Int32];
        assert!(matches!(
            check_row(&types, &[Value::Int64(1)]),
            Err(StorageError::TypeMismatch { column: 0, .. })
        ));
        assert!(matches!(
            check_row(&types, &[]),
            Err(StorageError::ColumnCountMismatch { .. })
        ));
        assert!(check_row(&types, &[Value::Null]).is_ok());
    }
}
