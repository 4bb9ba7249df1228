//! Parses one chunk of COPY FROM data (whole records, see `split`) straight into Arrow arrays,
//! one per COPY column. This runs on a parse worker, many chunks at once; it touches no
//! session or table state, so a bad line found here changes nothing.

use std::borrow::Cow;
use std::sync::Arc;

use datafusion::arrow::array::*;
use datafusion::arrow::datatypes::DataType as ArrowType;
use shoal_storage::types::{DataType, Value};

use super::CopyFormat;
use crate::error::{code, SqlError, SqlResult};
use crate::pgtext;
use crate::timezone::TimeZone;
use crate::types::{array_from_values, arrow_type};

/// What a parse worker needs to know about the COPY; shared by all its chunks.
#[derive(Debug)]
pub struct ChunkLayout {
    pub format: CopyFormat,
    pub table: String,
    /// Name and type of each column in the COPY's column list, in order.
    pub columns: Vec<(String, DataType)>,
    /// The session's time zone, in which a timestamptz without an offset is read.
    pub zone: TimeZone,
}

/// The rows of one chunk, column by column.
#[derive(Debug)]
pub struct ParsedChunk {
    pub arrays: Vec<ArrayRef>,
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
/// `first_line`. `skip_header` drops the first record.
pub fn parse_chunk(
    layout: &ChunkLayout,
    data: &[u8],
    first_line: usize,
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
        .map(|(_, t)| ColumnBuilder::new(t, &layout.zone))
        .collect();
    let mut lines = Vec::new();
    let mut fields: Vec<Option<Cow<str>>> = Vec::with_capacity(layout.columns.len());
    let mut records = Records {
        text,
        pos: 0,
        line: first_line,
        format: &layout.format,
    };
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
    let arrays = builders.into_iter().map(ColumnBuilder::finish).collect();
    Ok(ParsedChunk {
        arrays,
        lines,
        saw_end_marker,
    })
}

/// Walks the records of a chunk, splitting each into fields (None = NULL).
struct Records<'a> {
    text: &'a str,
    pos: usize,
    /// The line the next record starts on.
    line: usize,
    format: &'a CopyFormat,
}

impl<'a> Records<'a> {
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
            let stop = memchr::memchr3(delim, b'\n', quote, &bytes[i..])
                .map(|o| i + o)
                .unwrap_or(bytes.len());
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

/// Appends parsed fields to an Arrow builder of the column's type. The common types parse
/// straight into their builder; the rest go through `Value`.
enum ColumnBuilder {
    Bool(BooleanBuilder),
    Int16(Int16Builder),
    Int32(Int32Builder),
    Int64(Int64Builder),
    Float32(Float32Builder),
    Float64(Float64Builder),
    Date(Date32Builder),
    Timestamp(TimestampMicrosecondBuilder),
    /// The session's zone, for values without an offset.
    TimestampTz(TimestampMicrosecondBuilder, TimeZone),
    Text(StringBuilder, DataType),
    Other(DataType, Vec<Value>, TimeZone),
}

impl ColumnBuilder {
    fn new(t: &DataType, zone: &TimeZone) -> Self {
        match t {
            DataType::Bool => ColumnBuilder::Bool(BooleanBuilder::new()),
            DataType::Int16 => ColumnBuilder::Int16(Int16Builder::new()),
            DataType::Int32 => ColumnBuilder::Int32(Int32Builder::new()),
            DataType::Int64 => ColumnBuilder::Int64(Int64Builder::new()),
            DataType::Float32 => ColumnBuilder::Float32(Float32Builder::new()),
            DataType::Float64 => ColumnBuilder::Float64(Float64Builder::new()),
            DataType::Date => ColumnBuilder::Date(Date32Builder::new()),
            DataType::Timestamp => ColumnBuilder::Timestamp(TimestampMicrosecondBuilder::new()),
            DataType::TimestampTz => ColumnBuilder::TimestampTz(
                TimestampMicrosecondBuilder::new().with_timezone("UTC"),
                zone.clone(),
            ),
            DataType::Text | DataType::Varchar(_) => {
                ColumnBuilder::Text(StringBuilder::new(), t.clone())
            }
            _ => ColumnBuilder::Other(t.clone(), Vec::new(), zone.clone()),
        }
    }

    fn append(&mut self, field: Option<&str>) -> SqlResult<()> {
        let Some(s) = field else {
            match self {
                ColumnBuilder::Bool(b) => b.append_null(),
                ColumnBuilder::Int16(b) => b.append_null(),
                ColumnBuilder::Int32(b) => b.append_null(),
                ColumnBuilder::Int64(b) => b.append_null(),
                ColumnBuilder::Float32(b) => b.append_null(),
                ColumnBuilder::Float64(b) => b.append_null(),
                ColumnBuilder::Date(b) => b.append_null(),
                ColumnBuilder::Timestamp(b) => b.append_null(),
                ColumnBuilder::TimestampTz(b, _) => b.append_null(),
                ColumnBuilder::Text(b, _) => b.append_null(),
                ColumnBuilder::Other(_, v, _) => v.push(Value::Null),
            }
            return Ok(());
        };
        match self {
            ColumnBuilder::Bool(b) => b.append_value(pgtext::parse_bool(s)?),
            ColumnBuilder::Int16(b) => b.append_value(pgtext::parse_smallint(s)?),
            ColumnBuilder::Int32(b) => b.append_value(pgtext::parse_integer(s)?),
            ColumnBuilder::Int64(b) => b.append_value(pgtext::parse_bigint(s)?),
            ColumnBuilder::Float32(b) => b.append_value(pgtext::parse_real(s)?),
            ColumnBuilder::Float64(b) => b.append_value(pgtext::parse_double(s)?),
            ColumnBuilder::Date(b) => b.append_value(pgtext::parse_date(s)?),
            ColumnBuilder::Timestamp(b) => b.append_value(pgtext::parse_timestamp(s)?),
            ColumnBuilder::TimestampTz(b, zone) => {
                b.append_value(pgtext::parse_timestamptz(s, zone)?)
            }
            ColumnBuilder::Text(b, t) => match t {
                // Fewer bytes than the limit means fewer characters: no need to count.
                DataType::Varchar(Some(n)) if s.len() > *n as usize => {
                    b.append_value(pgtext::check_varchar(s, Some(*n), t)?)
                }
                _ => b.append_value(s),
            },
            ColumnBuilder::Other(t, v, zone) => v.push(pgtext::parse_value(s, t, zone)?),
        }
        Ok(())
    }

    fn finish(self) -> ArrayRef {
        let (array, t): (ArrayRef, Option<DataType>) = match self {
            ColumnBuilder::Bool(mut b) => (Arc::new(b.finish()), None),
            ColumnBuilder::Int16(mut b) => (Arc::new(b.finish()), None),
            ColumnBuilder::Int32(mut b) => (Arc::new(b.finish()), None),
            ColumnBuilder::Int64(mut b) => (Arc::new(b.finish()), None),
            ColumnBuilder::Float32(mut b) => (Arc::new(b.finish()), None),
            ColumnBuilder::Float64(mut b) => (Arc::new(b.finish()), None),
            ColumnBuilder::Date(mut b) => (Arc::new(b.finish()), None),
            ColumnBuilder::Timestamp(mut b) => (Arc::new(b.finish()), None),
            ColumnBuilder::TimestampTz(mut b, _) => (Arc::new(b.finish()), None),
            ColumnBuilder::Text(mut b, t) => (Arc::new(b.finish()), Some(t)),
            ColumnBuilder::Other(t, v, _) => (array_from_values(&t, v.iter()), Some(t)),
        };
        if let Some(t) = t {
            debug_assert_eq!(array.data_type(), &arrow_type(&t));
        }
        debug_assert!(!matches!(array.data_type(), ArrowType::Null));
        array
    }
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
        ChunkLayout {
            format,
            table: "t".into(),
            columns: types
                .iter()
                .enumerate()
                .map(|(i, t)| (format!("c{i}"), t.clone()))
                .collect(),
            zone: TimeZone::utc(),
        }
    }

    fn texts(a: &ArrayRef) -> Vec<Option<String>> {
        let a = a.as_any().downcast_ref::<StringArray>().unwrap();
        a.iter().map(|v| v.map(str::to_string)).collect()
    }

    #[test]
    fn csv_quotes_nulls_and_multiline_fields() {
        let l = layout(true, &[DataType::Int32, DataType::Text]);
        let data = b"1,\"a,b\"\n2,\n3,\"\"\n4,\"x\ny\"\"z\"\n5,plain\r\n";
        let p = parse_chunk(&l, data, 10, false).unwrap();
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
        let p = parse_chunk(&l, data, 1, false).unwrap();
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
        let e = parse_chunk(&l, b"1,a\n2,b\n70000,c\n", 7, false).unwrap_err();
        assert_eq!(e.code, code::NUMERIC_VALUE_OUT_OF_RANGE);
        assert!(e.context.as_deref().unwrap().contains("line 9, column c0"));
        let e = parse_chunk(&l, b"1,a\n2\n", 1, false).unwrap_err();
        assert_eq!(e.code, code::BAD_COPY_FILE_FORMAT);
        assert_eq!(e.message, "missing data for column \"c1\"");
        let e = parse_chunk(&l, b"1,a,x\n", 1, false).unwrap_err();
        assert_eq!(e.message, "extra data after last expected column");
    }

    #[test]
    fn header_is_skipped_and_invalid_utf8_is_refused() {
        let l = layout(true, &[DataType::Int64]);
        let p = parse_chunk(&l, b"id\n1\n2", 1, true).unwrap();
        assert_eq!(p.lines, vec![2, 3]);
        let e = parse_chunk(&l, b"1\n\xff\n", 1, false).unwrap_err();
        assert_eq!(e.code, code::CHARACTER_NOT_IN_REPERTOIRE);
        assert!(e.context.unwrap().contains("line 2"));
    }
}
