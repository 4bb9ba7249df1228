//! Result encoding for the PostgreSQL wire protocol: Arrow batches become DataRow messages in
//! text format (PostgreSQL's output functions, via `pgtext`) or binary format (PostgreSQL's
//! send functions), and result columns become RowDescription fields.

use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use datafusion::arrow::array::*;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType as ArrowType, IntervalUnit, TimeUnit};
use datafusion::arrow::record_batch::RecordBatch;
use pgwire::api::results::{FieldFormat, FieldInfo};
use pgwire::api::Type;
use pgwire::messages::data::DataRow;
use shoal_sql::fastpath::PointRows;
use shoal_sql::params::{PG_EPOCH_DAYS, PG_EPOCH_MICROS};
use shoal_sql::pgtext;
use shoal_sql::timezone::TimeZone;
use shoal_sql::types::oid;
use shoal_sql::ResultColumn;

pub fn field_infos(
    columns: &[ResultColumn],
    binary: impl Fn(usize) -> bool,
) -> Arc<Vec<FieldInfo>> {
    Arc::new(field_info_list(columns, binary))
}

/// The fields of a result, as a Describe response owns them: built once per Describe rather
/// than shared and then cloned (a point SELECT's Describe runs on every execution).
pub fn field_info_list(columns: &[ResultColumn], binary: impl Fn(usize) -> bool) -> Vec<FieldInfo> {
    columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let t = Type::from_oid(c.type_oid).unwrap_or(Type::TEXT);
            let format = if binary(i) {
                FieldFormat::Binary
            } else {
                FieldFormat::Text
            };
            FieldInfo::new(
                c.name.to_string(),
                Some(c.table_oid as i32),
                Some(c.attnum),
                t,
                format,
            )
            .with_type_modifier(c.typmod)
            .with_type_size(shoal_sql::types::type_length(c.type_oid))
        })
        .collect()
}

/// Encodes the rows of a point SELECT in text format, straight from the storage values (see
/// `StatementResult::PointRows`; binary format goes through [`encode_rows`]).
pub fn encode_point_rows(point: &PointRows, zone: &TimeZone) -> Vec<DataRow> {
    let mut text = String::new();
    point
        .rows
        .iter()
        .map(|row| {
            let mut data = BytesMut::with_capacity(16 * row.len());
            for value in row {
                text.clear();
                if pgtext::write_value(value, zone, &mut text) {
                    data.put_i32(text.len() as i32);
                    data.put_slice(text.as_bytes());
                } else {
                    data.put_i32(-1);
                }
            }
            DataRow::new(data, row.len() as i16)
        })
        .collect()
}

/// Encodes every row of the batches. `binary(i)` says whether column i is sent in binary; in
/// text, a timestamptz shows in `zone` (in binary it is UTC microseconds whatever the zone).
pub fn encode_rows(
    batches: &[RecordBatch],
    columns: &[ResultColumn],
    binary: &dyn Fn(usize) -> bool,
    zone: &TimeZone,
) -> Vec<DataRow> {
    let mut rows = Vec::new();
    let mut text = String::new();
    for batch in batches {
        let type_oids: Vec<u32> = (0..batch.num_columns())
            .map(|c| columns.get(c).map(|col| col.type_oid).unwrap_or(oid::TEXT))
            .collect();
        let arrays: Vec<ArrayRef> = (0..batch.num_columns())
            .map(|c| match binary(c) {
                true => wire_array(batch.column(c), type_oids[c]),
                false => batch.column(c).clone(),
            })
            .collect();
        for r in 0..batch.num_rows() {
            let mut data = BytesMut::with_capacity(16 * batch.num_columns());
            for (c, array) in arrays.iter().enumerate() {
                if is_sql_null(array.as_ref(), r) {
                    data.put_i32(-1);
                } else if binary(c) {
                    put_binary_value(array.as_ref(), r, type_oids[c], &mut data);
                } else {
                    text.clear();
                    match type_oids[c] {
                        oid::INT2VECTOR | oid::OIDVECTOR => {
                            pgtext::format_vector_value(array.as_ref(), r, &mut text)
                        }
                        _ => pgtext::format_array_value(array.as_ref(), r, zone, &mut text),
                    }
                    data.put_i32(text.len() as i32);
                    data.put_slice(text.as_bytes());
                }
            }
            rows.push(DataRow::new(data, batch.num_columns() as i16));
        }
    }
    rows
}

/// Whether a value is NULL: a NullArray (an untyped `SELECT NULL`) has no validity bitmap, so
/// `Array::is_null` says its values are present.
fn is_sql_null(array: &dyn Array, row: usize) -> bool {
    array.is_null(row) || matches!(array.data_type(), ArrowType::Null)
}

/// A value in binary format, preceded by its length.
fn put_binary_value(array: &dyn Array, row: usize, type_oid: u32, out: &mut BytesMut) {
    let start = out.len();
    out.put_i32(0);
    encode_binary(array, row, type_oid, out);
    let len = (out.len() - start - 4) as i32;
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
}

/// The Arrow type whose values map one to one onto the binary format of a PostgreSQL type, if
/// that format is not text-based. A column is declared (by Describe) with the type OID of its
/// planned type, but the computed Arrow type may be a sibling (Int8 for smallint, nanosecond
/// timestamps, a dictionary); casting first makes the bytes always match the declared type.
fn wire_arrow_type(type_oid: u32, current: &ArrowType) -> Option<ArrowType> {
    Some(match type_oid {
        oid::BOOL => ArrowType::Boolean,
        oid::INT2 => ArrowType::Int16,
        oid::INT4 => ArrowType::Int32,
        oid::INT8 => ArrowType::Int64,
        oid::OID => ArrowType::UInt32,
        oid::FLOAT4 => ArrowType::Float32,
        oid::FLOAT8 => ArrowType::Float64,
        oid::DATE => ArrowType::Date32,
        oid::TIME => ArrowType::Time64(TimeUnit::Microsecond),
        oid::TIMESTAMP => ArrowType::Timestamp(TimeUnit::Microsecond, None),
        oid::TIMESTAMPTZ => {
            let tz = match current {
                ArrowType::Timestamp(_, Some(tz)) => tz.clone(),
                _ => "UTC".into(),
            };
            ArrowType::Timestamp(TimeUnit::Microsecond, Some(tz))
        }
        oid::INTERVAL => ArrowType::Interval(IntervalUnit::MonthDayNano),
        oid::BYTEA => ArrowType::Binary,
        _ => return None,
    })
}

/// The column cast to its wire Arrow type; unchanged when no cast is needed or possible.
fn wire_array(array: &ArrayRef, type_oid: u32) -> ArrayRef {
    match wire_arrow_type(type_oid, array.data_type()) {
        Some(t) if &t != array.data_type() => cast(array, &t).unwrap_or_else(|_| array.clone()),
        _ => array.clone(),
    }
}

/// PostgreSQL's send function for one non-null value. Types whose binary format is their text
/// (text, varchar, bpchar, name, unknown) and types Shoal has no binary encoder for go as text.
fn encode_binary(array: &dyn Array, row: usize, type_oid: u32, out: &mut BytesMut) {
    macro_rules! arr {
        ($t:ty) => {
            array
                .as_any()
                .downcast_ref::<$t>()
                .expect("array matches its data type")
        };
    }
    match (type_oid, array.data_type()) {
        (oid::BOOL, ArrowType::Boolean) => out.put_u8(arr!(BooleanArray).value(row) as u8),
        (oid::INT2, ArrowType::Int16) => out.put_i16(arr!(Int16Array).value(row)),
        (oid::INT4, ArrowType::Int32) => out.put_i32(arr!(Int32Array).value(row)),
        (oid::INT8, ArrowType::Int64) => out.put_i64(arr!(Int64Array).value(row)),
        (oid::OID, ArrowType::UInt32) => out.put_u32(arr!(UInt32Array).value(row)),
        (oid::FLOAT4, ArrowType::Float32) => out.put_f32(arr!(Float32Array).value(row)),
        (oid::FLOAT8, ArrowType::Float64) => out.put_f64(arr!(Float64Array).value(row)),
        (oid::DATE, ArrowType::Date32) => out.put_i32(arr!(Date32Array).value(row) - PG_EPOCH_DAYS),
        (oid::TIME, ArrowType::Time64(TimeUnit::Microsecond)) => {
            out.put_i64(arr!(Time64MicrosecondArray).value(row))
        }
        (oid::TIMESTAMP | oid::TIMESTAMPTZ, ArrowType::Timestamp(TimeUnit::Microsecond, _)) => {
            out.put_i64(arr!(TimestampMicrosecondArray).value(row) - PG_EPOCH_MICROS)
        }
        (oid::INTERVAL, ArrowType::Interval(IntervalUnit::MonthDayNano)) => {
            let v = arr!(IntervalMonthDayNanoArray).value(row);
            out.put_i64(v.nanoseconds / 1000);
            out.put_i32(v.days);
            out.put_i32(v.months);
        }
        (oid::BYTEA, ArrowType::Binary) => out.put_slice(arr!(BinaryArray).value(row)),
        (oid::UUID, _) => {
            let mut s = String::new();
            pgtext::format_array_value(array, row, &TimeZone::utc(), &mut s);
            match shoal_sql::types::parse_uuid(&s) {
                Ok(u) => out.put_u128(u),
                Err(_) => out.put_slice(s.as_bytes()),
            }
        }
        (oid::JSONB, _) => {
            // jsonb_send: format version 1, then the text.
            out.put_u8(1);
            put_text(array, row, out)
        }
        (oid::NUMERIC, _) => {
            // The text form already carries PostgreSQL's display scale, so both formats show
            // the same digits.
            let mut s = String::new();
            pgtext::format_array_value(array, row, &TimeZone::utc(), &mut s);
            numeric_binary(&s, out);
        }
        (_, ArrowType::List(_)) => match shoal_sql::types::array_element_oid(type_oid) {
            Some(element_oid) => {
                // The catalogs' vectors count their subscripts from 0.
                let lower_bound = match type_oid {
                    oid::INT2VECTOR | oid::OIDVECTOR => 0,
                    _ => 1,
                };
                array_binary(arr!(ListArray).value(row), element_oid, lower_bound, out)
            }
            None => put_text(array, row, out),
        },
        _ => put_text(array, row, out),
    }
}

fn put_text(array: &dyn Array, row: usize, out: &mut BytesMut) {
    let mut s = String::new();
    pgtext::format_array_value(array, row, &TimeZone::utc(), &mut s);
    out.put_slice(s.as_bytes());
}

/// PostgreSQL's binary array: dimensions, a has-nulls flag, the element type, the length and
/// lower bound of the one dimension, then each element with its length.
fn array_binary(elements: ArrayRef, element_oid: u32, lower_bound: i32, out: &mut BytesMut) {
    let elements = wire_array(&elements, element_oid);
    let dims = if elements.is_empty() { 0 } else { 1 };
    out.put_i32(dims);
    out.put_i32((elements.null_count() > 0) as i32);
    out.put_u32(element_oid);
    if dims == 1 {
        out.put_i32(elements.len() as i32);
        out.put_i32(lower_bound);
    }
    for i in 0..elements.len() {
        if is_sql_null(elements.as_ref(), i) {
            out.put_i32(-1);
        } else {
            put_binary_value(elements.as_ref(), i, element_oid, out);
        }
    }
}

const NUMERIC_POS: u16 = 0x0000;
const NUMERIC_NEG: u16 = 0x4000;
const NUMERIC_NAN: u16 = 0xC000;
const NUMERIC_PINF: u16 = 0xD000;
const NUMERIC_NINF: u16 = 0xF000;

/// PostgreSQL's binary numeric from its text form: base-10000 digits with a weight, sign and
/// display scale (the number of digits after the point in the text).
fn numeric_binary(text: &str, out: &mut BytesMut) {
    let special = match text {
        "NaN" => Some(NUMERIC_NAN),
        "Infinity" => Some(NUMERIC_PINF),
        "-Infinity" => Some(NUMERIC_NINF),
        _ => None,
    };
    if let Some(sign) = special {
        out.put_i16(0);
        out.put_i16(0);
        out.put_u16(sign);
        out.put_u16(0);
        return;
    }
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (int_part, frac_part) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    debug_assert!(int_part
        .bytes()
        .chain(frac_part.bytes())
        .all(|b| b.is_ascii_digit()));
    let int_part = int_part.trim_start_matches('0');
    // Pad both parts to whole base-10000 digits: the integer part on the left, the fraction on
    // the right, so that the digit groups line up with the decimal point.
    let int_pad = (4 - int_part.len() % 4) % 4;
    let frac_pad = (4 - frac_part.len() % 4) % 4;
    let decimal: Vec<u8> = std::iter::repeat_n(b'0', int_pad)
        .chain(int_part.bytes())
        .chain(frac_part.bytes())
        .chain(std::iter::repeat_n(b'0', frac_pad))
        .map(|b| b - b'0')
        .collect();
    let mut digits: Vec<i16> = decimal
        .chunks(4)
        .map(|c| c.iter().fold(0i16, |acc, d| acc * 10 + *d as i16))
        .collect();
    let mut weight = ((int_pad + int_part.len()) / 4) as i16 - 1;
    let leading_zeros = digits.iter().take_while(|d| **d == 0).count();
    digits.drain(..leading_zeros);
    weight -= leading_zeros as i16;
    while digits.last() == Some(&0) {
        digits.pop();
    }
    if digits.is_empty() {
        weight = 0;
    }
    out.put_i16(digits.len() as i16);
    out.put_i16(weight);
    out.put_u16(if negative && !digits.is_empty() {
        NUMERIC_NEG
    } else {
        NUMERIC_POS
    });
    out.put_u16(frac_part.len() as u16);
    for d in digits {
        out.put_i16(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_sql::fastpath::SelectShape;
    use shoal_sql::StatementResult;
    use shoal_storage::types::{DataType, Value};

    /// The text of a point SELECT's row written from storage values is byte for byte what
    /// the Arrow path writes, for every type `SelectShape` lets take the value path.
    #[test]
    fn point_rows_print_as_their_batch_does() {
        let samples: Vec<(DataType, Vec<Value>)> = vec![
            (DataType::Bool, vec![Value::Bool(true), Value::Bool(false)]),
            (
                DataType::Int16,
                vec![Value::Int16(i16::MIN), Value::Int16(7)],
            ),
            (
                DataType::Int32,
                vec![Value::Int32(-1), Value::Int32(i32::MAX)],
            ),
            (
                DataType::Int64,
                vec![Value::Int64(i64::MIN), Value::Int64(0)],
            ),
            (
                DataType::Float32,
                vec![Value::Float32(f32::NAN), Value::Float32(1.5e-7)],
            ),
            (
                DataType::Float64,
                vec![
                    Value::Float64(-0.0),
                    Value::Float64(f64::INFINITY),
                    Value::Float64(1e20),
                    Value::Float64(0.1),
                ],
            ),
            (
                DataType::Text,
                vec![Value::Text("".into()), Value::Text("zß\t\"x\"".into())],
            ),
            (DataType::Varchar(Some(3)), vec![Value::Text("abc".into())]),
        ];
        let zone = TimeZone::utc();
        for (t, values) in samples {
            assert!(SelectShape::prints_from_values(&t), "{t:?}");
            let (type_oid, typmod) = shoal_sql::types::pg_type_of(&t);
            let columns = vec![ResultColumn {
                name: "c".into(),
                type_oid,
                typmod,
                table_oid: 0,
                attnum: 0,
            }];
            let shape = Arc::new(SelectShape::new(columns.clone(), vec![t.clone()]));
            assert!(shape.text_from_values);
            let rows: Vec<Vec<Value>> = values
                .into_iter()
                .chain([Value::Null])
                .map(|v| vec![v])
                .collect();
            let point = PointRows { shape, rows };
            let direct = encode_point_rows(&point, &zone);
            let StatementResult::Rows { batches, .. } = point.into_rows().unwrap() else {
                panic!("into_rows gives Rows");
            };
            let via_batch = encode_rows(&batches, &columns, &|_| false, &zone);
            assert_eq!(direct, via_batch, "{t:?}");
        }
        // char(n) keeps its padding only on the batch path, so it must not take the value path.
        assert!(!SelectShape::prints_from_values(&DataType::Char(4)));
    }
}

/// Bytes per CopyData message of a binary COPY TO STDOUT (clients reassemble the stream).
const COPY_BINARY_PIECE_BYTES: usize = 64 * 1024;

/// The rows in PostgreSQL's binary COPY format: the signature, flags and header extension,
/// each row as a field count and its fields (the body of a binary DataRow), and the trailer.
pub fn copy_binary_data(batches: &[RecordBatch], columns: &[ResultColumn]) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_slice(b"PGCOPY\n\xff\r\n\0");
    out.put_i32(0); // flags: no OIDs
    out.put_i32(0); // no header extension
    for row in encode_rows(batches, columns, &|_| true, &TimeZone::default()) {
        out.put_i16(row.field_count);
        out.put_slice(&row.data);
    }
    out.put_i16(-1);
    out.to_vec()
}

/// A COPY ... TO STDOUT's messages up to its CopyDone: CopyOutResponse (text format, `columns`
/// columns) and a CopyData per line of `data`, queued (written as the buffer fills) and left
/// for the ReadyForQuery after them to flush, as PostgreSQL sends them. The caller sends the
/// CommandComplete with the row count the statement gave (a CSV header is not a row).
/// pgwire's `send_copy_out_response` flushes CopyDone and CommandComplete one by one and
/// counts CopyData messages as rows; a client that ends its COPY stream at CopyDone (Node's
/// pg-copy-streams) could then read the count before it arrived.
pub async fn feed_copy_out<C>(
    client: &mut C,
    column_formats: &[i16],
    data: &[u8],
) -> pgwire::error::PgWireResult<()>
where
    C: futures::Sink<pgwire::messages::PgWireBackendMessage> + Unpin,
    pgwire::error::PgWireError: From<C::Error>,
{
    use futures::SinkExt;
    use pgwire::messages::copy::{CopyData, CopyDone, CopyOutResponse};
    use pgwire::messages::PgWireBackendMessage;
    client
        .feed(PgWireBackendMessage::CopyOutResponse(CopyOutResponse::new(
            i8::from(column_formats.first() == Some(&1)),
            column_formats.len() as i16,
            column_formats.to_vec(),
        )))
        .await?;
    // Text goes a line per message, as PostgreSQL sends it; binary in pieces of whole rows.
    let pieces: Box<dyn Iterator<Item = &[u8]> + Send> = match column_formats.first() {
        Some(1) => Box::new(data.chunks(COPY_BINARY_PIECE_BYTES)),
        _ => Box::new(data.split_inclusive(|b| *b == b'\n')),
    };
    for line in pieces {
        client
            .feed(PgWireBackendMessage::CopyData(CopyData::new(
                bytes::Bytes::copy_from_slice(line),
            )))
            .await?;
    }
    client
        .feed(PgWireBackendMessage::CopyDone(CopyDone::new()))
        .await?;
    Ok(())
}
