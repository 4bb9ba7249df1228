//! Result encoding for the PostgreSQL wire protocol: Arrow batches become DataRow messages in
//! text format (PostgreSQL's output functions, via `pgtext`) or binary format (PostgreSQL's
//! send functions), and result columns become RowDescription fields.

use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use datafusion::arrow::array::*;
use datafusion::arrow::datatypes::{DataType as ArrowType, IntervalUnit, TimeUnit};
use datafusion::arrow::record_batch::RecordBatch;
use pgwire::api::results::{FieldFormat, FieldInfo};
use pgwire::api::Type;
use pgwire::messages::data::DataRow;
use shoal_sql::params::{PG_EPOCH_DAYS, PG_EPOCH_MICROS};
use shoal_sql::pgtext;
use shoal_sql::types::oid;
use shoal_sql::ResultColumn;

pub fn field_infos(
    columns: &[ResultColumn],
    binary: impl Fn(usize) -> bool,
) -> Arc<Vec<FieldInfo>> {
    Arc::new(
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
                FieldInfo::new(c.name.clone(), None, None, t, format).with_type_modifier(c.typmod)
            })
            .collect(),
    )
}

/// Encodes every row of the batches. `binary(i)` says whether column i is sent in binary.
pub fn encode_rows(
    batches: &[RecordBatch],
    columns: &[ResultColumn],
    binary: &dyn Fn(usize) -> bool,
) -> Vec<DataRow> {
    let mut rows = Vec::new();
    let mut text = String::new();
    for batch in batches {
        for r in 0..batch.num_rows() {
            let mut data = BytesMut::with_capacity(16 * batch.num_columns());
            for c in 0..batch.num_columns() {
                let array = batch.column(c);
                if array.is_null(r) {
                    data.put_i32(-1);
                    continue;
                }
                let type_oid = columns.get(c).map(|col| col.type_oid).unwrap_or(oid::TEXT);
                if binary(c) {
                    let start = data.len();
                    data.put_i32(0);
                    encode_binary(array.as_ref(), r, type_oid, &mut data);
                    let len = (data.len() - start - 4) as i32;
                    data[start..start + 4].copy_from_slice(&len.to_be_bytes());
                } else {
                    text.clear();
                    pgtext::format_array_value(array.as_ref(), r, &mut text);
                    data.put_i32(text.len() as i32);
                    data.put_slice(text.as_bytes());
                }
            }
            rows.push(DataRow::new(data, batch.num_columns() as i16));
        }
    }
    rows
}

fn encode_binary(array: &dyn Array, row: usize, type_oid: u32, out: &mut BytesMut) {
    macro_rules! arr {
        ($t:ty) => {
            array
                .as_any()
                .downcast_ref::<$t>()
                .expect("array matches its data type")
        };
    }
    match array.data_type() {
        ArrowType::Boolean => out.put_u8(arr!(BooleanArray).value(row) as u8),
        ArrowType::Int16 => out.put_i16(arr!(Int16Array).value(row)),
        ArrowType::Int32 => out.put_i32(arr!(Int32Array).value(row)),
        ArrowType::Int64 => {
            let v = arr!(Int64Array).value(row);
            match type_oid {
                oid::INT4 => out.put_i32(v as i32),
                _ => out.put_i64(v),
            }
        }
        ArrowType::UInt32 => {
            let v = arr!(UInt32Array).value(row);
            if type_oid == oid::INT8 {
                out.put_i64(v as i64)
            } else {
                out.put_u32(v)
            }
        }
        ArrowType::Float32 => out.put_f32(arr!(Float32Array).value(row)),
        ArrowType::Float64 => out.put_f64(arr!(Float64Array).value(row)),
        ArrowType::Utf8 if type_oid == oid::UUID => {
            let s = arr!(StringArray).value(row);
            match shoal_sql::types::parse_uuid(s) {
                Ok(u) => out.put_u128(u),
                Err(_) => out.put_slice(s.as_bytes()),
            }
        }
        ArrowType::Binary => out.put_slice(arr!(BinaryArray).value(row)),
        ArrowType::Date32 => out.put_i32(arr!(Date32Array).value(row) - PG_EPOCH_DAYS),
        ArrowType::Timestamp(TimeUnit::Microsecond, _) => {
            out.put_i64(arr!(TimestampMicrosecondArray).value(row) - PG_EPOCH_MICROS)
        }
        ArrowType::Timestamp(TimeUnit::Nanosecond, _) => {
            out.put_i64(arr!(TimestampNanosecondArray).value(row) / 1000 - PG_EPOCH_MICROS)
        }
        ArrowType::Interval(IntervalUnit::MonthDayNano) => {
            let v = arr!(IntervalMonthDayNanoArray).value(row);
            out.put_i64(v.nanoseconds / 1000);
            out.put_i32(v.days);
            out.put_i32(v.months);
        }
        ArrowType::Decimal128(_, scale) => {
            numeric_binary(arr!(Decimal128Array).value(row), *scale, out)
        }
        _ => {
            let mut s = String::new();
            pgtext::format_array_value(array, row, &mut s);
            out.put_slice(s.as_bytes());
        }
    }
}

/// PostgreSQL's binary numeric: base-10000 digits with a weight, sign and display scale.
fn numeric_binary(mantissa: i128, scale: i8, out: &mut BytesMut) {
    let scale = scale.max(0) as usize;
    let abs = mantissa.unsigned_abs().to_string();
    let (int_part, frac_part) = if abs.len() > scale {
        (
            abs[..abs.len() - scale].to_string(),
            abs[abs.len() - scale..].to_string(),
        )
    } else {
        ("0".to_string(), format!("{abs:0>scale$}"))
    };
    let int_padded = format!("{}{}", "0".repeat((4 - int_part.len() % 4) % 4), int_part);
    let frac_padded = format!("{}{}", frac_part, "0".repeat((4 - frac_part.len() % 4) % 4));
    let mut digits: Vec<i16> = int_padded
        .as_bytes()
        .chunks(4)
        .chain(frac_padded.as_bytes().chunks(4))
        .map(|c| std::str::from_utf8(c).unwrap().parse().unwrap())
        .collect();
    let mut weight = (int_padded.len() / 4) as i16 - 1;
    while digits.first() == Some(&0) && !digits.is_empty() {
        digits.remove(0);
        weight -= 1;
    }
    while digits.last() == Some(&0) {
        digits.pop();
    }
    if digits.is_empty() {
        weight = 0;
    }
    out.put_i16(digits.len() as i16);
    out.put_i16(weight);
    out.put_u16(if mantissa < 0 { 0x4000 } else { 0 });
    out.put_u16(scale as u16);
    for d in digits {
        out.put_i16(d);
    }
}
