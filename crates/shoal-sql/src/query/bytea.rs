//! bytea's functions as PostgreSQL defines them. DataFusion's string functions read a bytea's
//! bytes as text (and fail on bytes that are not UTF-8), and its `encode` writes base64 without
//! padding or line breaks. Here:
//! - `length`, `octet_length`, `bit_length`, `substring`/`substr` and `position`/`strpos` on
//!   bytea count and cut bytes; the wrappers keep DataFusion's functions for text;
//! - `encode`/`decode` in PostgreSQL's `hex`, `base64` (padded, a line break every 76
//!   characters) and `escape` formats, reading whitespace and reporting errors as it does;
//! - `get_byte`, `set_byte`, and `convert_to`/`convert_from` for UTF8, LATIN1 and SQL_ASCII.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray, BinaryBuilder, Int32Builder, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType as ArrowType, FieldRef};
use datafusion::common::{plan_err, Result as DfResult, ScalarValue};
use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};

use crate::error::{code, SqlError};
use crate::numeric::functions::inner_coercion;
use crate::query::functions::sql_error;

/// Registers the bytea functions; after DataFusion's, whose text forms the wrappers keep.
pub fn register(state: &mut datafusion::execution::SessionState) {
    for (name, op) in [
        ("character_length", ByteOp::Length),
        ("octet_length", ByteOp::Length),
        ("bit_length", ByteOp::BitLength),
        ("substr", ByteOp::Substring),
        ("strpos", ByteOp::Position),
    ] {
        let Ok(inner) = state.udf(name) else {
            continue;
        };
        let wrapped = ByteaAware {
            signature: Signature::user_defined(inner.signature().volatility),
            inner,
            op,
        };
        state
            .register_udf(Arc::new(ScalarUDF::new_from_impl(wrapped)))
            .expect("function registration cannot fail");
    }
    for function in [
        ByteaFunction::Encode,
        ByteaFunction::Decode,
        ByteaFunction::GetByte,
        ByteaFunction::SetByte,
        ByteaFunction::ConvertTo,
        ByteaFunction::ConvertFrom,
    ] {
        state
            .register_udf(Arc::new(ScalarUDF::new_from_impl(ByteaUdf {
                function,
                signature: Signature::user_defined(Volatility::Immutable),
            })))
            .expect("function registration cannot fail");
    }
}

fn is_bytes(t: &ArrowType) -> bool {
    matches!(
        t,
        ArrowType::Binary | ArrowType::LargeBinary | ArrowType::BinaryView
    )
}

fn error(code: &'static str, message: impl Into<String>) -> datafusion::common::DataFusionError {
    sql_error(SqlError::new(code, message))
}

/// The arguments as arrays of one length: the batch's, or 1 when every argument is a constant
/// (the answer is then a constant too, see `answer`).
fn argument_arrays(args: &ScalarFunctionArgs) -> DfResult<(Vec<ArrayRef>, bool)> {
    let constant = args
        .args
        .iter()
        .all(|a| matches!(a, ColumnarValue::Scalar(_)));
    let rows = if constant { 1 } else { args.number_rows };
    let arrays = args
        .args
        .iter()
        .map(|a| a.to_array(rows))
        .collect::<DfResult<_>>()?;
    Ok((arrays, constant))
}

fn answer(result: ArrayRef, constant: bool) -> DfResult<ColumnarValue> {
    if constant {
        return Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(
            &result, 0,
        )?));
    }
    Ok(ColumnarValue::Array(result))
}

/// Each row's bytes, None for NULL.
fn bytes_of(array: &ArrayRef) -> DfResult<Vec<Option<Vec<u8>>>> {
    let binary = cast(array, &ArrowType::Binary)?;
    Ok(binary
        .as_binary::<i32>()
        .iter()
        .map(|v| v.map(<[u8]>::to_vec))
        .collect())
}

fn texts_of(array: &ArrayRef) -> DfResult<Vec<Option<String>>> {
    let text = cast(array, &ArrowType::Utf8)?;
    Ok(text
        .as_string::<i32>()
        .iter()
        .map(|v| v.map(str::to_string))
        .collect())
}

fn integers_of(array: &ArrayRef) -> DfResult<Vec<Option<i64>>> {
    let ints = cast(array, &ArrowType::Int64)?;
    Ok(ints
        .as_primitive::<datafusion::arrow::datatypes::Int64Type>()
        .iter()
        .collect())
}

/// What a wrapped text function computes on bytea.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ByteOp {
    /// `length`, `octet_length`: bytes.
    Length,
    BitLength,
    /// `substring(b FROM start [FOR count])`, 1-based, as for text.
    Substring,
    /// `position(needle IN b)`: 1-based, 0 when absent.
    Position,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ByteaAware {
    inner: Arc<ScalarUDF>,
    op: ByteOp,
    /// User-defined, so that DataFusion asks `coerce_types`, which delegates to the inner
    /// function's own signature for text.
    signature: Signature,
}

impl ByteaAware {
    fn on_bytes(arg_types: &[ArrowType]) -> bool {
        arg_types.first().is_some_and(is_bytes)
    }
}

impl ScalarUDFImpl for ByteaAware {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[ArrowType]) -> DfResult<Vec<ArrowType>> {
        if !Self::on_bytes(arg_types) {
            return inner_coercion(arg_types, self.inner.as_ref());
        }
        let arity_ok = match self.op {
            ByteOp::Length | ByteOp::BitLength => arg_types.len() == 1,
            ByteOp::Substring => matches!(arg_types.len(), 2 | 3),
            ByteOp::Position => arg_types.len() == 2,
        };
        if !arity_ok {
            return plan_err!("function {}(bytea) does not exist", self.name());
        }
        Ok(arg_types
            .iter()
            .enumerate()
            .map(|(i, t)| match (self.op, i) {
                (_, 0) | (ByteOp::Position, _) => ArrowType::Binary,
                _ if t.is_null() || t.is_integer() => ArrowType::Int64,
                _ => t.clone(),
            })
            .collect())
    }

    fn return_type(&self, arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        if !Self::on_bytes(arg_types) {
            return self.inner.return_type(arg_types);
        }
        Ok(match self.op {
            ByteOp::Substring => ArrowType::Binary,
            _ => ArrowType::Int32,
        })
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let types: Vec<ArrowType> = args
            .arg_fields
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        if !Self::on_bytes(&types) {
            return self.inner.return_field_from_args(args);
        }
        Ok(Arc::new(datafusion::arrow::datatypes::Field::new(
            self.name(),
            self.return_type(&types)?,
            true,
        )))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let types: Vec<ArrowType> = args.args.iter().map(|a| a.data_type()).collect();
        if !Self::on_bytes(&types) {
            return self.inner.invoke_with_args(args);
        }
        let (arrays, constant) = argument_arrays(&args)?;
        let values = bytes_of(&arrays[0])?;
        let result: ArrayRef = match self.op {
            ByteOp::Length | ByteOp::BitLength => {
                let bits = if self.op == ByteOp::BitLength { 8 } else { 1 };
                let mut out = Int32Builder::with_capacity(values.len());
                for v in &values {
                    out.append_option(v.as_ref().map(|b| (b.len() * bits) as i32));
                }
                Arc::new(out.finish())
            }
            ByteOp::Substring => {
                let starts = integers_of(&arrays[1])?;
                let counts = match arrays.get(2) {
                    Some(a) => Some(integers_of(a)?),
                    None => None,
                };
                let mut out = BinaryBuilder::new();
                for (row, v) in values.iter().enumerate() {
                    let count = counts.as_ref().map(|c| c[row]);
                    match (v, starts[row], count) {
                        (Some(b), Some(start), None) => {
                            out.append_value(substring(b, start, None)?)
                        }
                        (Some(b), Some(start), Some(Some(count))) => {
                            out.append_value(substring(b, start, Some(count))?)
                        }
                        _ => out.append_null(),
                    }
                }
                Arc::new(out.finish())
            }
            ByteOp::Position => {
                let needles = bytes_of(&arrays[1])?;
                let mut out = Int32Builder::with_capacity(values.len());
                for (v, needle) in values.iter().zip(&needles) {
                    out.append_option(match (v, needle) {
                        (Some(b), Some(n)) => Some(position(b, n)),
                        _ => None,
                    });
                }
                Arc::new(out.finish())
            }
        };
        answer(result, constant)
    }
}

/// PostgreSQL's substring: positions before the first byte count, so `substring(b FROM 0 FOR 2)`
/// is the first byte.
fn substring(b: &[u8], start: i64, count: Option<i64>) -> DfResult<&[u8]> {
    let end = match count {
        Some(c) if c < 0 => return Err(error("22011", "negative substring length not allowed")),
        Some(c) => start.saturating_add(c),
        None => i64::MAX,
    };
    let from = (start.max(1) - 1).min(b.len() as i64) as usize;
    let to = (end.max(1) - 1).min(b.len() as i64) as usize;
    Ok(&b[from..to.max(from)])
}

fn position(haystack: &[u8], needle: &[u8]) -> i32 {
    if needle.is_empty() {
        return 1;
    }
    haystack
        .windows(needle.len())
        .position(|w| w == needle)
        .map_or(0, |at| at as i32 + 1)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ByteaFunction {
    /// `encode(bytea, format) -> text`.
    Encode,
    /// `decode(text, format) -> bytea`.
    Decode,
    /// `get_byte(bytea, n) -> int`.
    GetByte,
    /// `set_byte(bytea, n, value) -> bytea`.
    SetByte,
    /// `convert_to(text, encoding) -> bytea`.
    ConvertTo,
    /// `convert_from(bytea, encoding) -> text`.
    ConvertFrom,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ByteaUdf {
    function: ByteaFunction,
    signature: Signature,
}

impl ScalarUDFImpl for ByteaUdf {
    fn name(&self) -> &str {
        match self.function {
            ByteaFunction::Encode => "encode",
            ByteaFunction::Decode => "decode",
            ByteaFunction::GetByte => "get_byte",
            ByteaFunction::SetByte => "set_byte",
            ByteaFunction::ConvertTo => "convert_to",
            ByteaFunction::ConvertFrom => "convert_from",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[ArrowType]) -> DfResult<Vec<ArrowType>> {
        use ArrowType::{Binary, Int64, Utf8};
        let wanted: Vec<ArrowType> = match self.function {
            ByteaFunction::Encode | ByteaFunction::ConvertFrom => vec![Binary, Utf8],
            ByteaFunction::Decode | ByteaFunction::ConvertTo => vec![Utf8, Utf8],
            ByteaFunction::GetByte => vec![Binary, Int64],
            ByteaFunction::SetByte => vec![Binary, Int64, Int64],
        };
        let fits = arg_types.len() == wanted.len()
            && arg_types.iter().zip(&wanted).all(|(t, w)| {
                t.is_null()
                    || match w {
                        Binary => is_bytes(t),
                        Int64 => t.is_integer(),
                        _ => matches!(
                            t,
                            ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View
                        ),
                    }
            });
        if !fits {
            let types: Vec<String> = arg_types
                .iter()
                .map(|t| match t {
                    ArrowType::Null => "unknown".to_string(),
                    t => crate::query::pg_catalog::format_type_oid(
                        crate::types::pg_oid_for_arrow(t),
                        -1,
                    )
                    .unwrap_or_else(|| t.to_string()),
                })
                .collect();
            return Err(sql_error(
                SqlError::new(
                    code::UNDEFINED_FUNCTION,
                    format!("function {}({}) does not exist", self.name(), types.join(", ")),
                )
                .with_hint(
                    "No function matches the given name and argument types. You might need to add explicit type casts.",
                ),
            ));
        }
        Ok(wanted)
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(match self.function {
            ByteaFunction::Encode | ByteaFunction::ConvertFrom => ArrowType::Utf8,
            ByteaFunction::GetByte => ArrowType::Int32,
            _ => ArrowType::Binary,
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let (arrays, constant) = argument_arrays(&args)?;
        let result: ArrayRef = match self.function {
            ByteaFunction::Encode => {
                let values = bytes_of(&arrays[0])?;
                let formats = texts_of(&arrays[1])?;
                let mut out = StringBuilder::new();
                for (v, f) in values.iter().zip(&formats) {
                    match (v, f) {
                        (Some(b), Some(f)) => out.append_value(encode(b, format_of(f)?)),
                        _ => out.append_null(),
                    }
                }
                Arc::new(out.finish())
            }
            ByteaFunction::Decode => {
                let values = texts_of(&arrays[0])?;
                let formats = texts_of(&arrays[1])?;
                let mut out = BinaryBuilder::new();
                for (v, f) in values.iter().zip(&formats) {
                    match (v, f) {
                        (Some(t), Some(f)) => out.append_value(decode(t, format_of(f)?)?),
                        _ => out.append_null(),
                    }
                }
                Arc::new(out.finish())
            }
            ByteaFunction::GetByte => {
                let values = bytes_of(&arrays[0])?;
                let at = integers_of(&arrays[1])?;
                let mut out = Int32Builder::new();
                for (v, n) in values.iter().zip(&at) {
                    match (v, n) {
                        (Some(b), Some(n)) => out.append_value(b[byte_index(b, *n)?] as i32),
                        _ => out.append_null(),
                    }
                }
                Arc::new(out.finish())
            }
            ByteaFunction::SetByte => {
                let values = bytes_of(&arrays[0])?;
                let at = integers_of(&arrays[1])?;
                let new = integers_of(&arrays[2])?;
                let mut out = BinaryBuilder::new();
                for ((v, n), x) in values.into_iter().zip(&at).zip(&new) {
                    match (v, n, x) {
                        (Some(mut b), Some(n), Some(x)) => {
                            let i = byte_index(&b, *n)?;
                            // PostgreSQL keeps the new value's low 8 bits.
                            b[i] = *x as u8;
                            out.append_value(b);
                        }
                        _ => out.append_null(),
                    }
                }
                Arc::new(out.finish())
            }
            ByteaFunction::ConvertTo => {
                let values = texts_of(&arrays[0])?;
                let encodings = texts_of(&arrays[1])?;
                let mut out = BinaryBuilder::new();
                for (v, e) in values.iter().zip(&encodings) {
                    match (v, e) {
                        (Some(t), Some(e)) => out.append_value(convert_to(t, e)?),
                        _ => out.append_null(),
                    }
                }
                Arc::new(out.finish())
            }
            ByteaFunction::ConvertFrom => {
                let values = bytes_of(&arrays[0])?;
                let encodings = texts_of(&arrays[1])?;
                let mut out = StringBuilder::new();
                for (v, e) in values.iter().zip(&encodings) {
                    match (v, e) {
                        (Some(b), Some(e)) => out.append_value(convert_from(b, e)?),
                        _ => out.append_null(),
                    }
                }
                Arc::new(out.finish())
            }
        };
        answer(result, constant)
    }
}

fn byte_index(b: &[u8], n: i64) -> DfResult<usize> {
    if n < 0 || n >= b.len() as i64 {
        return Err(error(
            "2202E",
            format!("index {n} out of valid range, 0..{}", b.len() as i64 - 1),
        ));
    }
    Ok(n as usize)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Hex,
    Base64,
    Escape,
}

fn format_of(name: &str) -> DfResult<Format> {
    match name.to_ascii_lowercase().as_str() {
        "hex" => Ok(Format::Hex),
        "base64" => Ok(Format::Base64),
        "escape" => Ok(Format::Escape),
        _ => Err(error(
            code::INVALID_PARAMETER_VALUE,
            format!("unrecognized encoding: \"{name}\""),
        )),
    }
}

const BASE64_ALPHABET: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
/// PostgreSQL breaks base64 text into lines of this many characters.
const BASE64_LINE_CHARS: usize = 76;

fn encode(b: &[u8], format: Format) -> String {
    match format {
        Format::Hex => {
            let mut s = String::with_capacity(b.len() * 2);
            for byte in b {
                s.push_str(&format!("{byte:02x}"));
            }
            s
        }
        Format::Escape => {
            let mut s = String::with_capacity(b.len());
            for &byte in b {
                match byte {
                    0 | 0x80..=0xff => s.push_str(&format!("\\{byte:03o}")),
                    b'\\' => s.push_str("\\\\"),
                    _ => s.push(byte as char),
                }
            }
            s
        }
        Format::Base64 => {
            let mut s = String::with_capacity(b.len() * 4 / 3 + b.len() / 57 + 4);
            let mut line = 0;
            for chunk in b.chunks(3) {
                let group = (u32::from(chunk[0]) << 16)
                    | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
                    | u32::from(*chunk.get(2).unwrap_or(&0));
                for i in 0..4 {
                    if i <= chunk.len() {
                        s.push(BASE64_ALPHABET[(group >> (18 - 6 * i) & 0x3f) as usize] as char);
                    } else {
                        s.push('=');
                    }
                }
                line += 4;
                // As PostgreSQL: a full line ends with a break once its last group is out,
                // except after the padded final group.
                if line >= BASE64_LINE_CHARS && chunk.len() == 3 {
                    s.push('\n');
                    line = 0;
                }
            }
            s
        }
    }
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

fn decode(t: &str, format: Format) -> DfResult<Vec<u8>> {
    let s = t.as_bytes();
    let invalid = |message: String| error(code::INVALID_PARAMETER_VALUE, message);
    match format {
        Format::Hex => {
            let digit = |at: usize| -> DfResult<u8> {
                (s[at] as char)
                    .to_digit(16)
                    .map(|d| d as u8)
                    .ok_or_else(|| {
                        let c = t[at..].chars().next().unwrap_or('?');
                        invalid(format!("invalid hexadecimal digit: \"{c}\""))
                    })
            };
            let mut out = Vec::with_capacity(s.len() / 2);
            let mut i = 0;
            while i < s.len() {
                if is_space(s[i]) {
                    i += 1;
                    continue;
                }
                let high = digit(i)?;
                if i + 1 >= s.len() {
                    return Err(invalid(
                        "invalid hexadecimal data: odd number of digits".into(),
                    ));
                }
                out.push(high << 4 | digit(i + 1)?);
                i += 2;
            }
            Ok(out)
        }
        Format::Escape => {
            let mut out = Vec::with_capacity(s.len());
            let mut i = 0;
            let octal = |c: u8, max: u8| (b'0'..=max).contains(&c);
            while i < s.len() {
                if s[i] != b'\\' {
                    out.push(s[i]);
                    i += 1;
                } else if i + 3 < s.len()
                    && octal(s[i + 1], b'3')
                    && octal(s[i + 2], b'7')
                    && octal(s[i + 3], b'7')
                {
                    out.push((s[i + 1] - b'0') << 6 | (s[i + 2] - b'0') << 3 | (s[i + 3] - b'0'));
                    i += 4;
                } else if i + 1 < s.len() && s[i + 1] == b'\\' {
                    out.push(b'\\');
                    i += 2;
                } else {
                    return Err(error(
                        code::INVALID_TEXT_REPRESENTATION,
                        "invalid input syntax for type bytea",
                    ));
                }
            }
            Ok(out)
        }
        Format::Base64 => {
            // PostgreSQL's decoder: whitespace is skipped, '=' ends the data (1 or 2 of them
            // after 2 or 3 symbols of a group), and the groups must come out whole.
            let mut out = Vec::with_capacity(s.len() * 3 / 4);
            let (mut group, mut symbols, mut end) = (0u32, 0, 0);
            for (at, &c) in s.iter().enumerate() {
                if is_space(c) {
                    continue;
                }
                let value = if c == b'=' {
                    if end == 0 {
                        end = match symbols {
                            2 => 1,
                            3 => 2,
                            _ => {
                                return Err(invalid(
                                    "unexpected \"=\" while decoding base64 sequence".into(),
                                ))
                            }
                        };
                    }
                    0
                } else {
                    match BASE64_ALPHABET.iter().position(|&a| a == c) {
                        Some(v) => v as u32,
                        None => {
                            let c = t[at..].chars().next().unwrap_or('?');
                            return Err(invalid(format!(
                                "invalid symbol \"{c}\" found while decoding base64 sequence"
                            )));
                        }
                    }
                };
                group = group << 6 | value;
                symbols += 1;
                if symbols == 4 {
                    out.push((group >> 16) as u8);
                    if end == 0 || end > 1 {
                        out.push((group >> 8) as u8);
                    }
                    if end == 0 || end > 2 {
                        out.push(group as u8);
                    }
                    group = 0;
                    symbols = 0;
                }
            }
            if symbols != 0 {
                return Err(sql_error(
                    SqlError::new(code::INVALID_PARAMETER_VALUE, "invalid base64 end sequence")
                        .with_hint(
                        "Input data is missing padding, is truncated, or is otherwise corrupted.",
                    ),
                ));
            }
            Ok(out)
        }
    }
}

/// The encodings `convert_to` and `convert_from` know, by PostgreSQL's names and spellings
/// (case and punctuation do not matter: `utf-8` is UTF8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Utf8,
    Latin1,
    SqlAscii,
}

fn encoding_of(name: &str, role: &str) -> DfResult<Encoding> {
    let key: String = name
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    match key.as_str() {
        "utf8" | "unicode" => Ok(Encoding::Utf8),
        "latin1" | "iso88591" => Ok(Encoding::Latin1),
        "sqlascii" => Ok(Encoding::SqlAscii),
        _ => Err(error(
            code::INVALID_PARAMETER_VALUE,
            format!("invalid {role} encoding name \"{name}\""),
        )),
    }
}

fn convert_to(t: &str, encoding: &str) -> DfResult<Vec<u8>> {
    match encoding_of(encoding, "destination")? {
        Encoding::Utf8 | Encoding::SqlAscii => Ok(t.as_bytes().to_vec()),
        Encoding::Latin1 => t
            .chars()
            .map(|c| {
                u8::try_from(u32::from(c)).map_err(|_| {
                    let mut utf8 = [0u8; 4];
                    let bytes: Vec<String> = c
                        .encode_utf8(&mut utf8)
                        .bytes()
                        .map(|b| format!("0x{b:02x}"))
                        .collect();
                    error(
                        "22P05",
                        format!(
                            "character with byte sequence {} in encoding \"UTF8\" has no equivalent in encoding \"LATIN1\"",
                            bytes.join(" ")
                        ),
                    )
                })
            })
            .collect(),
    }
}

fn convert_from(b: &[u8], encoding: &str) -> DfResult<String> {
    match encoding_of(encoding, "source")? {
        Encoding::Latin1 => Ok(b.iter().map(|&byte| byte as char).collect()),
        Encoding::Utf8 | Encoding::SqlAscii => match std::str::from_utf8(b) {
            Ok(s) if !s.contains('\0') => Ok(s.to_string()),
            Ok(_) => Err(error(
                code::CHARACTER_NOT_IN_REPERTOIRE,
                "invalid byte sequence for encoding \"UTF8\": 0x00",
            )),
            Err(e) => {
                let at = e.valid_up_to();
                let bad = e.error_len().unwrap_or(b.len() - at);
                let bytes: Vec<String> = b[at..at + bad.max(1)]
                    .iter()
                    .map(|x| format!("0x{x:02x}"))
                    .collect();
                Err(error(
                    code::CHARACTER_NOT_IN_REPERTOIRE,
                    format!(
                        "invalid byte sequence for encoding \"UTF8\": {}",
                        bytes.join(" ")
                    ),
                ))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_with_postgres_line_breaks() {
        let data: Vec<u8> = (0..=255u8).collect();
        let text = encode(&data, Format::Base64);
        assert!(text.lines().all(|l| l.len() <= BASE64_LINE_CHARS));
        assert_eq!(text.lines().next().unwrap().len(), BASE64_LINE_CHARS);
        assert_eq!(decode(&text, Format::Base64).unwrap(), data);
        assert_eq!(encode(b"\x03\x00\xff", Format::Base64), "AwD/");
        assert_eq!(encode(b"ab", Format::Base64), "YWI=");
        assert!(decode("YWI", Format::Base64).is_err());
        assert!(decode("Y=WI", Format::Base64).is_err());
    }

    #[test]
    fn hex_and_escape_round_trip() {
        let data = b"a\\b\x00\xff\n".to_vec();
        for f in [Format::Hex, Format::Escape] {
            assert_eq!(decode(&encode(&data, f), f).unwrap(), data);
        }
        assert_eq!(encode(&data, Format::Escape), "a\\\\b\\000\\377\n");
        assert!(decode("abc", Format::Hex).is_err());
        assert!(decode("zz", Format::Hex).is_err());
        assert_eq!(decode("0a 0B", Format::Hex).unwrap(), vec![10, 11]);
    }

    #[test]
    fn substring_counts_positions_before_the_first_byte() {
        assert_eq!(substring(b"abc", 0, Some(2)).unwrap(), b"a");
        assert_eq!(substring(b"abc", 2, None).unwrap(), b"bc");
        assert_eq!(substring(b"abc", 5, Some(1)).unwrap(), b"");
        assert!(substring(b"abc", 1, Some(-1)).is_err());
        assert_eq!(position(b"abc", b"c"), 3);
        assert_eq!(position(b"abc", b""), 1);
        assert_eq!(position(b"abc", b"x"), 0);
    }
}
