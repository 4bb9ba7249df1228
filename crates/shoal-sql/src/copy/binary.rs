//! PostgreSQL's binary COPY format, as pgx's `CopyFrom`, asyncpg's `copy_records_to_table`
//! and psycopg's binary copy send it: the signature `PGCOPY\n\377\r\n\0`, 32-bit flags and a
//! header extension, then per row a 16-bit field count and each field as a 32-bit length (-1
//! for NULL) followed by the value in its type's binary (send) format; a field count of -1
//! ends the data.
//!
//! Values go through the same rules as a text COPY: fixed-size types are read directly (a
//! wrong length is 22P03, as PostgreSQL's receive functions report it), and strings and
//! numerics through the type's text input, which checks lengths and rounds to the scale.

use shoal_storage::types::{DataType, Interval, Value};

use crate::error::{code, SqlError, SqlResult};
use crate::params::{PG_EPOCH_DAYS, PG_EPOCH_MICROS};
use crate::timezone::TimeZone;

const SIGNATURE: &[u8] = b"PGCOPY\n\xff\r\n\0";
/// SQLSTATE 22P03.
const INVALID_BINARY_REPRESENTATION: &str = "22P03";

fn bad_format(message: &str) -> SqlError {
    SqlError::new(code::BAD_COPY_FILE_FORMAT, message.to_string())
}

fn bad_value(t: &DataType) -> SqlError {
    SqlError::new(
        INVALID_BINARY_REPRESENTATION,
        format!(
            "incorrect binary data format for type {}",
            crate::types::format_type(t)
        ),
    )
}

/// Where a binary COPY input stands between pieces of data.
#[derive(Default)]
pub struct BinaryReader {
    header_read: bool,
    /// The end-of-data marker (field count -1) was read.
    pub ended: bool,
}

impl BinaryReader {
    /// Reads the whole rows at the start of `data` (the header first, once): the rows and the
    /// number of bytes they took. A row cut off at the end of `data` is left for the next call.
    pub fn read_rows(
        &mut self,
        data: &[u8],
        types: &[DataType],
        zone: &TimeZone,
    ) -> SqlResult<(Vec<Vec<Value>>, usize)> {
        let mut at = 0;
        if !self.header_read {
            let Some(header_len) = header_length(data)? else {
                return Ok((Vec::new(), 0));
            };
            at = header_len;
            self.header_read = true;
        }
        let mut rows = Vec::new();
        while !self.ended {
            let Some(count) = read_i16(data, at) else {
                break;
            };
            if count == -1 {
                self.ended = true;
                at += 2;
                break;
            }
            if count as usize != types.len() {
                return Err(bad_format(&format!(
                    "row field count is {count}, expected {}",
                    types.len()
                )));
            }
            let mut pos = at + 2;
            let mut row = Vec::with_capacity(types.len());
            let mut complete = true;
            for t in types {
                let Some(len) = read_i32(data, pos) else {
                    complete = false;
                    break;
                };
                pos += 4;
                if len == -1 {
                    row.push(Value::Null);
                    continue;
                }
                let len = usize::try_from(len).map_err(|_| bad_format("invalid field size"))?;
                let Some(bytes) = data.get(pos..pos + len) else {
                    complete = false;
                    break;
                };
                pos += len;
                row.push(decode_field(bytes, t, zone)?);
            }
            if !complete {
                break;
            }
            rows.push(row);
            at = pos;
        }
        Ok((rows, at))
    }

    /// The input ended: it must have been whole.
    pub fn finish(&self, leftover: usize) -> SqlResult<()> {
        if !self.header_read || (!self.ended && leftover > 0) {
            return Err(bad_format("unexpected EOF in COPY data"));
        }
        Ok(())
    }
}

/// The header's length once all of it has arrived.
fn header_length(data: &[u8]) -> SqlResult<Option<usize>> {
    let fixed = SIGNATURE.len() + 8;
    if data.len() < fixed {
        if !SIGNATURE.starts_with(&data[..data.len().min(SIGNATURE.len())]) {
            return Err(bad_format("COPY file signature not recognized"));
        }
        return Ok(None);
    }
    if &data[..SIGNATURE.len()] != SIGNATURE {
        return Err(bad_format("COPY file signature not recognized"));
    }
    let flags = read_i32(data, SIGNATURE.len()).expect("checked length");
    if flags & (1 << 16) != 0 {
        return Err(bad_format("COPY with OIDs is not supported"));
    }
    let extension = read_i32(data, SIGNATURE.len() + 4).expect("checked length");
    let extension =
        usize::try_from(extension).map_err(|_| bad_format("invalid COPY file header"))?;
    Ok((data.len() >= fixed + extension).then_some(fixed + extension))
}

fn read_i16(data: &[u8], at: usize) -> Option<i16> {
    Some(i16::from_be_bytes(data.get(at..at + 2)?.try_into().ok()?))
}

fn read_i32(data: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_be_bytes(data.get(at..at + 4)?.try_into().ok()?))
}

/// PostgreSQL's binary array (array_send): dimensions, a has-nulls flag, the element type, a
/// length and lower bound per dimension, then each element as a length and its bytes (-1 for
/// NULL). None when the bytes are not that; an error from an element's decoding as is.
pub(crate) fn decode_array(
    bytes: &[u8],
    mut element: impl FnMut(&[u8]) -> SqlResult<Value>,
) -> Option<SqlResult<Vec<Value>>> {
    let dims = read_i32(bytes, 0)?;
    if dims == 0 {
        return Some(Ok(Vec::new()));
    }
    if dims != 1 {
        return Some(Err(SqlError::unsupported("multidimensional arrays")));
    }
    let count = usize::try_from(read_i32(bytes, 12)?).ok()?;
    let mut at = 20;
    let mut out = Vec::with_capacity(count.min(bytes.len() / 4));
    for _ in 0..count {
        let len = read_i32(bytes, at)?;
        at += 4;
        if len < 0 {
            out.push(Value::Null);
            continue;
        }
        let value = bytes.get(at..at + len as usize)?;
        at += len as usize;
        match element(value) {
            Ok(v) => out.push(v),
            Err(e) => return Some(Err(e)),
        }
    }
    (at == bytes.len()).then_some(Ok(out))
}

/// One field in the binary format of the column's type.
pub(crate) fn decode_field(bytes: &[u8], t: &DataType, zone: &TimeZone) -> SqlResult<Value> {
    let exact = |n: usize| -> SqlResult<&[u8]> {
        if bytes.len() == n {
            Ok(bytes)
        } else {
            Err(bad_value(t))
        }
    };
    let i64_at = |b: &[u8]| i64::from_be_bytes(b.try_into().expect("8 bytes"));
    Ok(match t {
        DataType::Array(element) => Value::Array(
            decode_array(bytes, |b| decode_field(b, element, zone))
                .ok_or_else(|| bad_value(t))??,
        ),
        DataType::Bool => Value::Bool(exact(1)?[0] != 0),
        DataType::Int16 => Value::Int16(i16::from_be_bytes(exact(2)?.try_into().expect("2"))),
        DataType::Int32 => Value::Int32(i32::from_be_bytes(exact(4)?.try_into().expect("4"))),
        DataType::Int64 => Value::Int64(i64_at(exact(8)?)),
        DataType::Float32 => Value::Float32(f32::from_be_bytes(exact(4)?.try_into().expect("4"))),
        DataType::Float64 => Value::Float64(f64::from_be_bytes(exact(8)?.try_into().expect("8"))),
        DataType::Date => {
            let days = i32::from_be_bytes(exact(4)?.try_into().expect("4"));
            Value::Date(
                days.checked_add(PG_EPOCH_DAYS)
                    .ok_or_else(|| bad_value(t))?,
            )
        }
        DataType::Timestamp | DataType::TimestampTz => {
            let micros = i64_at(exact(8)?)
                .checked_add(PG_EPOCH_MICROS)
                .ok_or_else(|| bad_value(t))?;
            match t {
                DataType::Timestamp => Value::Timestamp(micros),
                _ => Value::TimestampTz(micros),
            }
        }
        DataType::Interval => {
            let b = exact(16)?;
            Value::Interval(Interval {
                micros: i64_at(&b[..8]),
                days: i32::from_be_bytes(b[8..12].try_into().expect("4")),
                months: i32::from_be_bytes(b[12..].try_into().expect("4")),
            })
        }
        DataType::Uuid => Value::Uuid(u128::from_be_bytes(exact(16)?.try_into().expect("16"))),
        DataType::Time => match i64_at(exact(8)?) {
            micros @ 0..=86_400_000_000 => Value::Time(micros),
            _ => return Err(bad_value(t)),
        },
        DataType::Bytea => Value::Bytea(bytes.to_vec()),
        DataType::Numeric { .. } => {
            let n = shoal_numeric::Numeric::from_pg_binary(bytes).map_err(|_| bad_value(t))?;
            crate::pgtext::parse_value(&n.to_string(), t, zone)?
        }
        DataType::Text
        | DataType::Varchar(_)
        | DataType::Char(_)
        | DataType::Json
        | DataType::Jsonb
        | DataType::Enum(_) => {
            // jsonb_send puts a format version (1) before the text.
            let bytes = match (t, bytes.split_first()) {
                (DataType::Jsonb, Some((1, text))) => text,
                (DataType::Jsonb, _) => return Err(bad_value(t)),
                _ => bytes,
            };
            let s = std::str::from_utf8(bytes).map_err(|_| {
                SqlError::new(
                    code::CHARACTER_NOT_IN_REPERTOIRE,
                    "invalid byte sequence for encoding \"UTF8\"",
                )
            })?;
            crate::pgtext::parse_value(s, t, zone)?
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Vec<u8> {
        let mut h = SIGNATURE.to_vec();
        h.extend_from_slice(&0i32.to_be_bytes());
        h.extend_from_slice(&0i32.to_be_bytes());
        h
    }

    fn field(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
        match bytes {
            Some(b) => {
                out.extend_from_slice(&(b.len() as i32).to_be_bytes());
                out.extend_from_slice(b);
            }
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }

    #[test]
    fn rows_arrive_in_pieces_and_end_at_the_trailer() {
        let mut data = header();
        for (id, name) in [(1i32, Some("a")), (2, None)] {
            data.extend_from_slice(&2i16.to_be_bytes());
            field(&mut data, Some(&id.to_be_bytes()));
            field(&mut data, name.map(str::as_bytes));
        }
        data.extend_from_slice(&(-1i16).to_be_bytes());
        let types = [DataType::Int32, DataType::Varchar(Some(3))];
        let zone = TimeZone::default();
        // Cut inside the second row: the first comes out, the rest waits.
        let mut reader = BinaryReader::default();
        let cut = data.len() - 5;
        let (rows, used) = reader.read_rows(&data[..cut], &types, &zone).unwrap();
        assert_eq!(rows, vec![vec![Value::Int32(1), Value::Text("a".into())]]);
        let (rows, rest) = reader.read_rows(&data[used..], &types, &zone).unwrap();
        assert_eq!(rows, vec![vec![Value::Int32(2), Value::Null]]);
        assert_eq!(used + rest, data.len());
        assert!(reader.ended);
        reader.finish(0).unwrap();
    }

    #[test]
    fn bad_input_is_refused_with_postgres_codes() {
        let zone = TimeZone::default();
        let mut reader = BinaryReader::default();
        let err = reader
            .read_rows(b"PGCOPX\n\xff\r\n\0........", &[DataType::Int32], &zone)
            .unwrap_err();
        assert_eq!(err.code, code::BAD_COPY_FILE_FORMAT);
        let mut data = header();
        data.extend_from_slice(&1i16.to_be_bytes());
        field(&mut data, Some(&7i64.to_be_bytes()));
        let err = BinaryReader::default()
            .read_rows(&data, &[DataType::Int32], &zone)
            .unwrap_err();
        assert_eq!(err.code, INVALID_BINARY_REPRESENTATION);
        let mut data = header();
        data.extend_from_slice(&1i16.to_be_bytes());
        field(&mut data, Some(b"toolong"));
        let err = BinaryReader::default()
            .read_rows(&data, &[DataType::Varchar(Some(3))], &zone)
            .unwrap_err();
        assert_eq!(err.code, code::STRING_DATA_RIGHT_TRUNCATION);
    }
}
