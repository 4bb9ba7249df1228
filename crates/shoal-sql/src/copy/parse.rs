//! Parses one chunk of COPY FROM data (whole records, see `split`) straight into Arrow arrays,
//! one per COPY column. This runs on a parse worker, many chunks at once; it touches no
//! session or table state, so a bad line found here changes nothing. A chunk that makes a
//! whole column segment also gets its columns' min/max here, on the worker, rather than on
//! the one task that appends segments.

use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use datafusion::arrow::array::NullBufferBuilder;
use datafusion::arrow::array::*;
use datafusion::arrow::buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use datafusion::arrow::datatypes::DataType as ArrowType;
use shoal_storage::types::{DataType, Value};
use shoal_storage::ColumnStats;

use super::decimal::{plain_float, plain_integer};
use super::scan::ByteScanner;
use super::CopyFormat;
use crate::error::{code, SqlError, SqlResult};
use crate::pgtext;
use crate::timezone::TimeZone;
use crate::types::array_from_values;

/// What a parse worker needs to know about the COPY; shared by all its chunks.
#[derive(Debug)]
pub struct ChunkLayout {
    pub format: CopyFormat,
    pub table: String,
    /// Name and type of each column in the COPY's column list, in order.
    pub columns: Vec<(String, DataType)>,
    /// The session's time zone, in which a timestamptz without an offset is read.
    pub zone: TimeZone,
    /// Set when the COPY fills a column table: a chunk of exactly this many rows is a whole
    /// column segment, whose columns' min/max are computed with the parse; and text columns
    /// leave the parse as dictionaries of their own values (the costly half of the table's
    /// dictionary encoding, see `shoal_storage::text_dictionary`).
    pub stats_rows: Option<usize>,
    /// Per column, text bytes per 1,000 rows in the latest chunk: sizes the next chunk's text
    /// buffers, so they seldom grow while filling.
    pub text_bytes_per_1000_rows: Vec<AtomicUsize>,
}

impl ChunkLayout {
    pub fn new(
        format: CopyFormat,
        table: String,
        columns: Vec<(String, DataType)>,
        zone: TimeZone,
        stats_rows: Option<usize>,
    ) -> Self {
        ChunkLayout {
            text_bytes_per_1000_rows: columns.iter().map(|_| AtomicUsize::new(0)).collect(),
            format,
            table,
            columns,
            zone,
            stats_rows,
        }
    }
}

/// The rows of one chunk, column by column.
#[derive(Debug)]
pub struct ParsedChunk {
    pub arrays: Vec<ArrayRef>,
    /// Min/max of each array, when the chunk is a whole segment (`ChunkLayout::stats_rows`).
    pub stats: Option<Vec<ColumnStats>>,
    /// The input line each row starts on (CSV rows may span lines).
    pub lines: Vec<usize>,
    /// The chunk held the end-of-data marker `\.`: rows after it are not data.
    pub saw_end_marker: bool,
}

impl ParsedChunk {
    pub fn rows(&self) -> usize {
        self.lines.len()
    }
}

/// Parses `data` (whole records; the last may lack its newline) whose first line is
/// `first_line`; `rows_hint` (its newline count) sizes the arrays. `skip_header` drops the
/// first record.
pub fn parse_chunk(
    layout: &ChunkLayout,
    data: &[u8],
    first_line: usize,
    rows_hint: usize,
    skip_header: bool,
) -> SqlResult<ParsedChunk> {
    let context = |line: usize| format!("COPY {}, line {line}", layout.table);
    let text = std::str::from_utf8(data).map_err(|e| {
        let at = e.valid_up_to();
        let line = first_line + data[..at].iter().filter(|b| **b == b'\n').count();
        SqlError::new(
            code::CHARACTER_NOT_IN_REPERTOIRE,
            format!(
                "invalid byte sequence for encoding \"UTF8\": 0x{:02x}",
                data[at]
            ),
        )
        .with_context(context(line))
    })?;
    let mut builders: Vec<ColumnBuilder> = layout
        .columns
        .iter()
        .zip(&layout.text_bytes_per_1000_rows)
        .map(|((_, t), hint)| {
            let text_bytes = hint.load(Ordering::Relaxed) * rows_hint / 1000;
            ColumnBuilder::new(t, &layout.zone, rows_hint, text_bytes)
        })
        .collect();
    let mut lines = Vec::with_capacity(rows_hint);
    let mut fields: Vec<Option<Cow<str>>> = Vec::with_capacity(layout.columns.len());
    let mut records = Records::new(text, first_line, &layout.format);
    let mut skip = skip_header;
    let mut saw_end_marker = false;
    loop {
        let line = records.line;
        let Some(raw) = records
            .next_record(&mut fields)
            .map_err(|e| e.with_context(context(line)))?
        else {
            break;
        };
        if raw.trim_end_matches('\r') == "\\." {
            saw_end_marker = true;
            break;
        }
        if std::mem::take(&mut skip) {
            continue;
        }
        if fields.len() != builders.len() {
            let msg = if fields.len() < builders.len() {
                format!(
                    "missing data for column \"{}\"",
                    layout.columns[fields.len()].0
                )
            } else {
                "extra data after last expected column".to_string()
            };
            return Err(SqlError::new(code::BAD_COPY_FILE_FORMAT, msg).with_context(context(line)));
        }
        for (i, field) in fields.drain(..).enumerate() {
            builders[i].append(field.as_deref()).map_err(|e| {
                let (name, _) = &layout.columns[i];
                let detail = match &field {
                    Some(s) => format!("{}, column {name}: \"{s}\"", context(line)),
                    None => format!("{}, column {name}: null input", context(line)),
                };
                e.with_context(detail)
            })?;
        }
        lines.push(line);
    }
    let rows = lines.len();
    let arrays: Vec<ArrayRef> = builders
        .into_iter()
        .zip(&layout.text_bytes_per_1000_rows)
        .map(|(b, hint)| {
            if let Some(bytes) = b.text_bytes() {
                hint.store(bytes * 1000 / rows.max(1), Ordering::Relaxed);
            }
            b.finish()
        })
        .collect::<SqlResult<_>>()?;
    let arrays = match layout.stats_rows {
        Some(_) => arrays
            .into_iter()
            .map(|a| match a.data_type() {
                ArrowType::Utf8 => shoal_storage::column::prepare_text(&a)
                    .map(|d| Arc::new(d) as ArrayRef)
                    .map_err(|e| SqlError::internal(e.to_string())),
                _ => Ok(a),
            })
            .collect::<SqlResult<Vec<_>>>()?,
        None => arrays,
    };
    let stats = match layout.stats_rows {
        Some(n) if n == rows => Some(
            arrays
                .iter()
                .map(segment_column_stats)
                .collect::<SqlResult<_>>()?,
        ),
        _ => None,
    };
    Ok(ParsedChunk {
        arrays,
        stats,
        lines,
        saw_end_marker,
    })
}

/// Min/max of a parsed column; a text column's from its dictionary's values, each distinct
/// value once rather than every row.
fn segment_column_stats(array: &ArrayRef) -> SqlResult<ColumnStats> {
    let Some(text) = array.as_any_dictionary_opt() else {
        return crate::dml::column::column_stats(array);
    };
    let mut stats = crate::dml::column::column_stats(text.values())?;
    stats.null_count = array.null_count();
    Ok(stats)
}

/// Walks the records of a chunk, splitting each into fields (None = NULL).
struct Records<'a> {
    text: &'a str,
    pos: usize,
    /// The line the next record starts on.
    line: usize,
    format: &'a CopyFormat,
    /// CSV: where the delimiters, newlines and quotes are.
    scanner: ByteScanner<'a>,
}

impl<'a> Records<'a> {
    fn new(text: &'a str, first_line: usize, format: &'a CopyFormat) -> Self {
        let wanted = [format.delimiter as u8, b'\n', format.quote as u8];
        Records {
            text,
            pos: 0,
            line: first_line,
            format,
            scanner: ByteScanner::new(text.as_bytes(), wanted),
        }
    }

    /// Fills `fields` with the next record's fields and returns the record's raw text.
    fn next_record(
        &mut self,
        fields: &mut Vec<Option<Cow<'a, str>>>,
    ) -> SqlResult<Option<&'a str>> {
        fields.clear();
        if self.pos >= self.text.len() {
            return Ok(None);
        }
        let start = self.pos;
        if self.format.csv {
            self.csv_record(fields)?;
        } else {
            let rest = &self.text[start..];
            let end = memchr::memchr(b'\n', rest.as_bytes()).unwrap_or(rest.len());
            self.pos = start + (end + 1).min(rest.len());
            self.line += 1;
            let line = &rest[..end];
            let line = line.strip_suffix('\r').unwrap_or(line);
            split_text_line(line, self.format, fields);
        }
        let raw = &self.text[start..self.pos];
        Ok(Some(raw.strip_suffix('\n').unwrap_or(raw)))
    }

    fn csv_record(&mut self, fields: &mut Vec<Option<Cow<'a, str>>>) -> SqlResult<()> {
        let f = self.format;
        let bytes = self.text.as_bytes();
        let (delim, quote, escape) = (f.delimiter as u8, f.quote as u8, f.escape as u8);
        let mut i = self.pos;
        loop {
            // One field: an unquoted run is borrowed; any quote switches to building it.
            let field_start = i;
            let stop = self.scanner.find(i);
            if stop == bytes.len() || bytes[stop] != quote {
                let mut raw = &self.text[field_start..stop];
                let at_end = stop == bytes.len() || bytes[stop] == b'\n';
                if at_end {
                    raw = raw.strip_suffix('\r').unwrap_or(raw);
                }
                fields.push(if raw == f.null {
                    None
                } else {
                    Some(raw.into())
                });
                if at_end {
                    self.line += 1;
                    self.pos = (stop + 1).min(bytes.len());
                    return Ok(());
                }
                i = stop + 1;
                continue;
            }
            let mut value = Vec::from(&bytes[field_start..stop]);
            let mut in_quotes = false;
            let mut j = stop;
            while j < bytes.len() {
                let b = bytes[j];
                if in_quotes {
                    if b == escape && j + 1 < bytes.len() && bytes[j + 1] == quote {
                        value.push(quote);
                        j += 2;
                        continue;
                    }
                    if b == escape
                        && escape != quote
                        && j + 1 < bytes.len()
                        && bytes[j + 1] == escape
                    {
                        value.push(escape);
                        j += 2;
                        continue;
                    }
                    if b == quote {
                        in_quotes = false;
                    } else {
                        if b == b'\n' {
                            self.line += 1;
                        }
                        value.push(b);
                    }
                } else if b == quote {
                    in_quotes = true;
                } else if b == delim || b == b'\n' {
                    break;
                } else {
                    value.push(b);
                }
                j += 1;
            }
            if in_quotes {
                return Err(SqlError::new(
                    code::BAD_COPY_FILE_FORMAT,
                    "unterminated CSV quoted field",
                ));
            }
            let at_end = j >= bytes.len() || bytes[j] == b'\n';
            if at_end && value.last() == Some(&b'\r') {
                value.pop();
            }
            // Cut at ASCII bytes only, so the value is still UTF-8.
            let value = String::from_utf8(value).expect("cut at ASCII bytes");
            fields.push(Some(value.into()));
            if at_end {
                self.line += 1;
                self.pos = (j + 1).min(bytes.len());
                return Ok(());
            }
            i = j + 1;
        }
    }
}

/// Splits one text-format line into fields, undoing backslash escapes. The NULL marker is
/// compared before unescaping, as PostgreSQL does.
fn split_text_line<'a>(line: &'a str, f: &CopyFormat, fields: &mut Vec<Option<Cow<'a, str>>>) {
    for raw in line.split(f.delimiter) {
        if raw == f.null {
            fields.push(None);
        } else if !raw.contains('\\') {
            fields.push(Some(raw.into()));
        } else {
            fields.push(Some(unescape_text(raw).into()));
        }
    }
}

fn unescape_text(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        i += 1;
        if b != b'\\' || i == bytes.len() {
            out.push(b);
            continue;
        }
        let c = bytes[i];
        i += 1;
        match c {
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'b' => out.push(8),
            b'f' => out.push(12),
            b'v' => out.push(11),
            b'0'..=b'7' => {
                // Up to three octal digits.
                let mut v = u32::from(c - b'0');
                for _ in 0..2 {
                    match bytes.get(i) {
                        Some(d @ b'0'..=b'7') => {
                            v = v * 8 + u32::from(d - b'0');
                            i += 1;
                        }
                        _ => break,
                    }
                }
                out.push(v as u8);
            }
            b'x' if bytes.get(i).is_some_and(u8::is_ascii_hexdigit) => {
                let mut v = 0u32;
                for _ in 0..2 {
                    match bytes.get(i).and_then(|d| (*d as char).to_digit(16)) {
                        Some(d) => {
                            v = v * 16 + d;
                            i += 1;
                        }
                        None => break,
                    }
                }
                out.push(v as u8);
            }
            other => out.push(other),
        }
    }
    // Octal and hex escapes may spell bytes that are not UTF-8; keep the text valid.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Collects one column's parsed fields. The common types parse straight into a vector of
/// their Arrow type, which becomes the array's buffer without a copy; the rest go through
/// `Value`. Plain decimal numbers take a fast path; anything else (and every error) goes
/// through the PostgreSQL input functions.
struct ColumnBuilder {
    values: ColumnValues,
    /// Unmaterialized until the first NULL, so a column without NULLs costs nothing here.
    nulls: NullBufferBuilder,
}

enum ColumnValues {
    Bool(BooleanBuilder),
    Int16(Vec<i16>),
    Int32(Vec<i32>),
    Int64(Vec<i64>),
    Float32(Vec<f32>),
    Float64(Vec<f64>),
    Date(Vec<i32>),
    Timestamp(Vec<i64>),
    /// The session's zone, for values without an offset.
    TimestampTz(Vec<i64>, TimeZone),
    /// Value i is `bytes[offsets[i]..offsets[i + 1]]`.
    Text {
        offsets: Vec<i32>,
        bytes: Vec<u8>,
        t: DataType,
    },
    Other(DataType, Vec<Value>, TimeZone),
}

impl ColumnBuilder {
    fn new(t: &DataType, zone: &TimeZone, rows: usize, text_bytes: usize) -> Self {
        let values = match t {
            DataType::Bool => ColumnValues::Bool(BooleanBuilder::with_capacity(rows)),
            DataType::Int16 => ColumnValues::Int16(Vec::with_capacity(rows)),
            DataType::Int32 => ColumnValues::Int32(Vec::with_capacity(rows)),
            DataType::Int64 => ColumnValues::Int64(Vec::with_capacity(rows)),
            DataType::Float32 => ColumnValues::Float32(Vec::with_capacity(rows)),
            DataType::Float64 => ColumnValues::Float64(Vec::with_capacity(rows)),
            DataType::Date => ColumnValues::Date(Vec::with_capacity(rows)),
            DataType::Timestamp => ColumnValues::Timestamp(Vec::with_capacity(rows)),
            DataType::TimestampTz => {
                ColumnValues::TimestampTz(Vec::with_capacity(rows), zone.clone())
            }
            DataType::Text | DataType::Varchar(_) => {
                let mut offsets = Vec::with_capacity(rows + 1);
                offsets.push(0);
                ColumnValues::Text {
                    offsets,
                    bytes: Vec::with_capacity(text_bytes + text_bytes / 8),
                    t: t.clone(),
                }
            }
            _ => ColumnValues::Other(t.clone(), Vec::with_capacity(rows), zone.clone()),
        };
        ColumnBuilder {
            values,
            nulls: NullBufferBuilder::new(rows),
        }
    }

    fn append(&mut self, field: Option<&str>) -> SqlResult<()> {
        let Some(s) = field else {
            self.nulls.append_null();
            match &mut self.values {
                ColumnValues::Bool(b) => b.append_null(),
                ColumnValues::Int16(v) => v.push(0),
                ColumnValues::Int32(v) | ColumnValues::Date(v) => v.push(0),
                ColumnValues::Int64(v)
                | ColumnValues::Timestamp(v)
                | ColumnValues::TimestampTz(v, _) => v.push(0),
                ColumnValues::Float32(v) => v.push(0.0),
                ColumnValues::Float64(v) => v.push(0.0),
                ColumnValues::Text { offsets, bytes, .. } => offsets.push(text_offset(bytes)),
                ColumnValues::Other(_, v, _) => v.push(Value::Null),
            }
            return Ok(());
        };
        self.nulls.append_non_null();
        match &mut self.values {
            ColumnValues::Bool(b) => b.append_value(pgtext::parse_bool(s)?),
            ColumnValues::Int16(v) => v.push(
                match plain_integer(s.as_bytes()).and_then(|i| i16::try_from(i).ok()) {
                    Some(i) => i,
                    None => pgtext::parse_smallint(s)?,
                },
            ),
            ColumnValues::Int32(v) => v.push(
                match plain_integer(s.as_bytes()).and_then(|i| i32::try_from(i).ok()) {
                    Some(i) => i,
                    None => pgtext::parse_integer(s)?,
                },
            ),
            ColumnValues::Int64(v) => v.push(match plain_integer(s.as_bytes()) {
                Some(i) => i,
                None => pgtext::parse_bigint(s)?,
            }),
            ColumnValues::Float32(v) => v.push(pgtext::parse_real(s)?),
            ColumnValues::Float64(v) => v.push(match plain_float(s.as_bytes()) {
                Some(f) => f,
                None => pgtext::parse_double(s)?,
            }),
            ColumnValues::Date(v) => v.push(pgtext::parse_date(s)?),
            ColumnValues::Timestamp(v) => v.push(pgtext::parse_timestamp(s)?),
            ColumnValues::TimestampTz(v, zone) => v.push(pgtext::parse_timestamptz(s, zone)?),
            ColumnValues::Text { offsets, bytes, t } => {
                match t {
                    // Fewer bytes than the limit means fewer characters: no need to count.
                    DataType::Varchar(Some(n)) if s.len() > *n as usize => {
                        bytes.extend_from_slice(pgtext::check_varchar(s, Some(*n), t)?.as_bytes())
                    }
                    _ => bytes.extend_from_slice(s.as_bytes()),
                }
                offsets.push(text_offset(bytes));
            }
            ColumnValues::Other(t, v, zone) => v.push(pgtext::parse_value(s, t, zone)?),
        }
        Ok(())
    }

    /// Bytes of text collected, for a text column.
    fn text_bytes(&self) -> Option<usize> {
        match &self.values {
            ColumnValues::Text { bytes, .. } => Some(bytes.len()),
            _ => None,
        }
    }

    fn finish(mut self) -> SqlResult<ArrayRef> {
        let nulls = self.nulls.finish();
        let array: ArrayRef = match self.values {
            ColumnValues::Bool(mut b) => Arc::new(b.finish()),
            ColumnValues::Int16(v) => Arc::new(Int16Array::new(exact(v), nulls)),
            ColumnValues::Int32(v) => Arc::new(Int32Array::new(exact(v), nulls)),
            ColumnValues::Int64(v) => Arc::new(Int64Array::new(exact(v), nulls)),
            ColumnValues::Float32(v) => Arc::new(Float32Array::new(exact(v), nulls)),
            ColumnValues::Float64(v) => Arc::new(Float64Array::new(exact(v), nulls)),
            ColumnValues::Date(v) => Arc::new(Date32Array::new(exact(v), nulls)),
            ColumnValues::Timestamp(v) => Arc::new(TimestampMicrosecondArray::new(exact(v), nulls)),
            ColumnValues::TimestampTz(v, _) => {
                Arc::new(TimestampMicrosecondArray::new(exact(v), nulls).with_timezone("UTC"))
            }
            ColumnValues::Text {
                offsets, mut bytes, ..
            } => {
                bytes.shrink_to_fit();
                // Fields are cut from UTF-8 text at ASCII bytes, so the check cannot fail.
                Arc::new(StringArray::try_new(
                    OffsetBuffer::new(exact(offsets)),
                    Buffer::from_vec(bytes),
                    nulls,
                )?)
            }
            ColumnValues::Other(t, v, _) => array_from_values(&t, v.iter()),
        };
        debug_assert!(!matches!(array.data_type(), ArrowType::Null));
        Ok(array)
    }
}

/// The vector as an Arrow buffer of its length, without copying. `shrink_to_fit` goes
/// through `realloc`, which shrinks in place.
fn exact<T: datafusion::arrow::datatypes::ArrowNativeType>(mut v: Vec<T>) -> ScalarBuffer<T> {
    v.shrink_to_fit();
    ScalarBuffer::from(v)
}

/// The end of the text so far as an Arrow offset. A chunk is far smaller than 2 GiB (see
/// `split::SEGMENT_CHUNK_BYTES_MAX`), and a value never grows when it is unquoted.
fn text_offset(bytes: &[u8]) -> i32 {
    i32::try_from(bytes.len()).expect("a chunk's text fits 32-bit offsets")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(csv: bool, types: &[DataType]) -> ChunkLayout {
        let format = if csv {
            CopyFormat {
                csv: true,
                delimiter: ',',
                null: String::new(),
                ..CopyFormat::default()
            }
        } else {
            CopyFormat::default()
        };
        ChunkLayout::new(
            format,
            "t".into(),
            types
                .iter()
                .enumerate()
                .map(|(i, t)| (format!("c{i}"), t.clone()))
                .collect(),
            TimeZone::utc(),
            None,
        )
    }

    fn texts(a: &ArrayRef) -> Vec<Option<String>> {
        let a = a.as_any().downcast_ref::<StringArray>().unwrap();
        a.iter().map(|v| v.map(str::to_string)).collect()
    }

    #[test]
    fn csv_quotes_nulls_and_multiline_fields() {
        let l = layout(true, &[DataType::Int32, DataType::Text]);
        let data = b"1,\"a,b\"\n2,\n3,\"\"\n4,\"x\ny\"\"z\"\n5,plain\r\n";
        let p = parse_chunk(&l, data, 10, 4, false).unwrap();
        assert_eq!(p.lines, vec![10, 11, 12, 13, 15]);
        assert_eq!(
            texts(&p.arrays[1]),
            vec![
                Some("a,b".into()),
                None,
                Some(String::new()),
                Some("x\ny\"z".into()),
                Some("plain".into())
            ]
        );
    }

    #[test]
    fn text_escapes_and_end_marker() {
        let l = layout(false, &[DataType::Text, DataType::Int64]);
        let data = b"a\\tb\\\\\t1\n\\N\t\\N\n\\101\\x42\t3\n\\.\nignored\n";
        let p = parse_chunk(&l, data, 1, 4, false).unwrap();
        assert!(p.saw_end_marker);
        assert_eq!(
            texts(&p.arrays[0]),
            vec![Some("a\tb\\".into()), None, Some("AB".into())]
        );
        assert_eq!(p.arrays[1].null_count(), 1);
    }

    #[test]
    fn bad_lines_name_their_line_and_column() {
        let l = layout(true, &[DataType::Int16, DataType::Text]);
        let e = parse_chunk(&l, b"1,a\n2,b\n70000,c\n", 7, 4, false).unwrap_err();
        assert_eq!(e.code, code::NUMERIC_VALUE_OUT_OF_RANGE);
        assert!(e.context.as_deref().unwrap().contains("line 9, column c0"));
        let e = parse_chunk(&l, b"1,a\n2\n", 1, 4, false).unwrap_err();
        assert_eq!(e.code, code::BAD_COPY_FILE_FORMAT);
        assert_eq!(e.message, "missing data for column \"c1\"");
        let e = parse_chunk(&l, b"1,a,x\n", 1, 4, false).unwrap_err();
        assert_eq!(e.message, "extra data after last expected column");
    }

    #[test]
    fn header_is_skipped_and_invalid_utf8_is_refused() {
        let l = layout(true, &[DataType::Int64]);
        let p = parse_chunk(&l, b"id\n1\n2", 1, 4, true).unwrap();
        assert_eq!(p.lines, vec![2, 3]);
        let e = parse_chunk(&l, b"1\n\xff\n", 1, 4, false).unwrap_err();
        assert_eq!(e.code, code::CHARACTER_NOT_IN_REPERTOIRE);
        assert!(e.context.unwrap().contains("line 2"));
    }
}
