//! json and jsonb in queries. Values of both types are text to DataFusion (json as the client
//! wrote it, jsonb in its printed normal form; see the `shoal-json` crate); the PostgreSQL type
//! rides in the field's metadata, as uuid's does. This module holds the casts that make a value
//! json or jsonb, the operators (`->`, `->>`, `#>`, `#>>`, `@>`, `<@`, `?`, `?|`, `?&`, `||`,
//! `-`, and jsonb's comparisons) planned as calls of PostgreSQL's named functions, and those
//! functions. They run row by row: they parse their argument each time.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType as ArrowType, Field, FieldRef};
use datafusion::common::{DFSchema, Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::planner::{PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility,
};
use datafusion::sql::sqlparser::ast::BinaryOperator;
use shoal_json::{Flavor, JsonError};

use crate::error::{code, SqlError};
use crate::query::functions::sql_error as df_error;
use crate::types::{oid, PG_TYPE_METADATA_KEY};

/// A json error as a SQL error with its SQLSTATE and detail.
pub fn sql_error(e: JsonError) -> SqlError {
    let err = SqlError::new(e.sqlstate, e.message);
    match e.detail {
        Some(detail) => err.with_detail(detail),
        None => err,
    }
}

/// What an argument is, as far as json functions care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ArgKind {
    Json,
    Jsonb,
    Other,
}

fn arg_kind(field: &Field) -> ArgKind {
    match field
        .metadata()
        .get(PG_TYPE_METADATA_KEY)
        .and_then(|v| v.parse::<u32>().ok())
    {
        Some(oid::JSON) => ArgKind::Json,
        Some(oid::JSONB) => ArgKind::Jsonb,
        _ => ArgKind::Other,
    }
}

type Body = dyn Fn(&[ScalarValue], &[ArgKind]) -> Result<ScalarValue, SqlError> + Send + Sync;

/// One json function: evaluated row by row over `ScalarValue`s, told which arguments are json.
struct JsonFunction {
    name: String,
    signature: Signature,
    return_type: ArrowType,
    /// json or jsonb for functions returning those; None for text, boolean and integers.
    return_oid: Option<u32>,
    body: Arc<Body>,
}

impl std::fmt::Debug for JsonFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JsonFunction({})", self.name)
    }
}

impl PartialEq for JsonFunction {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}
impl Eq for JsonFunction {}
impl Hash for JsonFunction {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name.hash(state)
    }
}

impl ScalarUDFImpl for JsonFunction {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(self.return_type.clone())
    }

    fn return_field_from_args(&self, _args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let field = Field::new(&self.name, self.return_type.clone(), true);
        Ok(Arc::new(match self.return_oid {
            Some(type_oid) => field
                .with_metadata([(PG_TYPE_METADATA_KEY.to_string(), type_oid.to_string())].into()),
            None => field,
        }))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let kinds: Vec<ArgKind> = args.arg_fields.iter().map(|f| arg_kind(f)).collect();
        let call = |values: &[ScalarValue]| -> DfResult<ScalarValue> {
            let v = (self.body)(values, &kinds).map_err(df_error)?;
            Ok(if v.is_null() {
                ScalarValue::try_from(&self.return_type)?
            } else {
                v
            })
        };
        if args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)))
        {
            let values: Vec<ScalarValue> = args
                .args
                .iter()
                .map(|a| match a {
                    ColumnarValue::Scalar(s) => s.clone(),
                    ColumnarValue::Array(_) => unreachable!("checked all scalar"),
                })
                .collect();
            return Ok(ColumnarValue::Scalar(call(&values)?));
        }
        let arrays: Vec<_> = args
            .args
            .iter()
            .map(|a| a.to_array(args.number_rows))
            .collect::<DfResult<_>>()?;
        let mut out = Vec::with_capacity(args.number_rows);
        for row in 0..args.number_rows {
            let values: Vec<ScalarValue> = arrays
                .iter()
                .map(|a| ScalarValue::try_from_array(a, row))
                .collect::<DfResult<_>>()?;
            out.push(call(&values)?);
        }
        if out.is_empty() {
            return Ok(ColumnarValue::Array(
                datafusion::arrow::array::new_empty_array(&self.return_type),
            ));
        }
        Ok(ColumnarValue::Array(ScalarValue::iter_to_array(out)?))
    }
}

/// The text of a string argument; None for SQL NULL.
fn text(v: &ScalarValue) -> Option<String> {
    match v {
        ScalarValue::Utf8(s) | ScalarValue::LargeUtf8(s) | ScalarValue::Utf8View(s) => s.clone(),
        ScalarValue::Null => None,
        other if other.is_null() => None,
        other => Some(other.to_string()),
    }
}

fn integer(v: &ScalarValue) -> Option<i64> {
    match v {
        ScalarValue::Int8(x) => x.map(i64::from),
        ScalarValue::Int16(x) => x.map(i64::from),
        ScalarValue::Int32(x) => x.map(i64::from),
        ScalarValue::Int64(x) => *x,
        _ => None,
    }
}

fn is_integer(v: &ScalarValue) -> bool {
    matches!(
        v,
        ScalarValue::Int8(_)
            | ScalarValue::Int16(_)
            | ScalarValue::Int32(_)
            | ScalarValue::Int64(_)
    )
}

/// A text[] argument: an Arrow list of strings, or an untyped literal in array syntax
/// (`'{a,b}'`, which is how `#>` and `?|` paths are usually written).
fn text_array(v: &ScalarValue) -> Result<Option<Vec<String>>, SqlError> {
    match v {
        ScalarValue::List(list) => {
            if datafusion::arrow::array::Array::is_null(list.as_ref(), 0) {
                return Ok(None);
            }
            let values = list.value(0);
            let mut out = Vec::with_capacity(values.len());
            for i in 0..values.len() {
                let s = ScalarValue::try_from_array(&values, i)?;
                out.push(text(&s).unwrap_or_default());
            }
            Ok(Some(out))
        }
        other => match text(other) {
            None => Ok(None),
            Some(s) => {
                use crate::query::array_literal::Element;
                let mut out = Vec::new();
                for e in crate::query::array_literal::parse(&s)? {
                    match e {
                        Element::Text(t) => out.push(t),
                        // A NULL path element makes the whole result NULL in PostgreSQL.
                        Element::Null => return Ok(None),
                        Element::Array(_) => {
                            return Err(SqlError::new("2202E", "wrong number of array subscripts"))
                        }
                    }
                }
                Ok(Some(out))
            }
        },
    }
}

fn utf8(s: Option<String>) -> ScalarValue {
    ScalarValue::Utf8(s)
}

/// The json functions, built once: they hold no state, and the operator planner finds them
/// here by name.
static FUNCTIONS: std::sync::LazyLock<HashMap<String, Arc<ScalarUDF>>> =
    std::sync::LazyLock::new(|| {
        functions()
            .into_iter()
            .map(|f| (f.name.clone(), Arc::new(ScalarUDF::new_from_impl(f))))
            .collect()
    });

/// Registers the json functions.
pub fn register(state: &mut datafusion::execution::SessionState) {
    use datafusion::execution::FunctionRegistry;
    for f in FUNCTIONS.values() {
        state
            .register_udf(f.clone())
            .expect("function registration cannot fail");
    }
}

fn function(
    name: impl Into<String>,
    signature: Signature,
    return_type: ArrowType,
    return_oid: Option<u32>,
    body: impl Fn(&[ScalarValue], &[ArgKind]) -> Result<ScalarValue, SqlError> + Send + Sync + 'static,
) -> JsonFunction {
    JsonFunction {
        name: name.into(),
        signature,
        return_type,
        return_oid,
        body: Arc::new(body),
    }
}

fn functions() -> Vec<JsonFunction> {
    let imm = Volatility::Immutable;
    let mut out = Vec::new();
    for (f, oid_of, suffix) in [
        (Flavor::Json, oid::JSON, "json"),
        (Flavor::Jsonb, oid::JSONB, "jsonb"),
    ] {
        let returns = Some(oid_of);
        // The casts: text (or the other json type) to this one.
        out.push(function(
            format!("shoal_to_{suffix}"),
            Signature::any(1, imm),
            ArrowType::Utf8,
            returns,
            move |a, kinds| {
                let Some(s) = text(&a[0]) else {
                    return Ok(utf8(None));
                };
                let s = match (f, kinds[0]) {
                    (Flavor::Json, ArgKind::Json | ArgKind::Jsonb) => s,
                    (Flavor::Json, _) => {
                        shoal_json::validate_json(&s).map_err(sql_error)?;
                        s
                    }
                    (Flavor::Jsonb, ArgKind::Jsonb) => s,
                    (Flavor::Jsonb, _) => shoal_json::jsonb_in(&s).map_err(sql_error)?,
                };
                Ok(utf8(Some(s)))
            },
        ));
        // -> and ->> with a key or an index, #> and #>> with a text[] path, and
        // json_extract_path(j, VARIADIC text) by name.
        for as_text in [false, true] {
            let tail = if as_text { "_text" } else { "" };
            let result_oid = (!as_text).then_some(oid_of);
            out.push(function(
                format!("{suffix}_object_field{tail}"),
                Signature::any(2, imm),
                ArrowType::Utf8,
                result_oid,
                move |a, _| {
                    let (Some(doc), Some(key)) = (text(&a[0]), text(&a[1])) else {
                        return Ok(utf8(None));
                    };
                    let v = shoal_json::field(f, &doc, &key).map_err(sql_error)?;
                    finish(f, v, as_text)
                },
            ));
            out.push(function(
                format!("{suffix}_array_element{tail}"),
                Signature::any(2, imm),
                ArrowType::Utf8,
                result_oid,
                move |a, _| {
                    let (Some(doc), Some(index)) = (text(&a[0]), integer(&a[1])) else {
                        return Ok(utf8(None));
                    };
                    let Ok(index) = i32::try_from(index) else {
                        return Ok(utf8(None));
                    };
                    let v = shoal_json::element(f, &doc, index).map_err(sql_error)?;
                    finish(f, v, as_text)
                },
            ));
            out.push(function(
                format!("shoal_{suffix}_path{tail}"),
                Signature::any(2, imm),
                ArrowType::Utf8,
                result_oid,
                move |a, _| {
                    let (Some(doc), Some(path)) = (text(&a[0]), text_array(&a[1])?) else {
                        return Ok(utf8(None));
                    };
                    let path: Vec<&str> = path.iter().map(String::as_str).collect();
                    let v = shoal_json::path(f, &doc, &path).map_err(sql_error)?;
                    finish(f, v, as_text)
                },
            ));
            out.push(function(
                format!("{suffix}_extract_path{tail}"),
                Signature::variadic_any(imm),
                ArrowType::Utf8,
                result_oid,
                move |a, _| {
                    let Some(doc) = text(&a[0]) else {
                        return Ok(utf8(None));
                    };
                    let mut path = Vec::with_capacity(a.len() - 1);
                    for p in &a[1..] {
                        match text(p) {
                            Some(p) => path.push(p),
                            None => return Ok(utf8(None)),
                        }
                    }
                    let path: Vec<&str> = path.iter().map(String::as_str).collect();
                    let v = shoal_json::path(f, &doc, &path).map_err(sql_error)?;
                    finish(f, v, as_text)
                },
            ));
        }
        out.push(function(
            format!("{suffix}_typeof"),
            Signature::any(1, imm),
            ArrowType::Utf8,
            None,
            move |a, _| match text(&a[0]) {
                None => Ok(utf8(None)),
                Some(d) => Ok(utf8(Some(
                    shoal_json::type_of(f, &d).map_err(sql_error)?.to_string(),
                ))),
            },
        ));
        out.push(function(
            format!("{suffix}_array_length"),
            Signature::any(1, imm),
            ArrowType::Int32,
            None,
            move |a, _| match text(&a[0]) {
                None => Ok(ScalarValue::Int32(None)),
                Some(d) => Ok(ScalarValue::Int32(Some(
                    shoal_json::array_length(f, &d).map_err(sql_error)?,
                ))),
            },
        ));
        out.push(function(
            format!("{suffix}_strip_nulls"),
            Signature::any(1, imm),
            ArrowType::Utf8,
            returns,
            move |a, _| {
                let Some(d) = text(&a[0]) else {
                    return Ok(utf8(None));
                };
                let stripped = match f {
                    Flavor::Json => shoal_json::json_strip_nulls(&d),
                    Flavor::Jsonb => shoal_json::jsonb_strip_nulls(&d),
                };
                Ok(utf8(Some(stripped.map_err(sql_error)?)))
            },
        ));
        // to_json / to_jsonb and the builders.
        out.push(function(
            format!("to_{suffix}"),
            Signature::any(1, Volatility::Stable),
            ArrowType::Utf8,
            returns,
            move |a, kinds| {
                if a[0].is_null() {
                    return Ok(utf8(None));
                }
                let value = Rendered::of(&a[0], kinds[0]);
                Ok(utf8(Some(match f {
                    Flavor::Json => shoal_json::to_json(value.scalar()),
                    Flavor::Jsonb => shoal_json::to_jsonb(value.scalar()).map_err(sql_error)?,
                })))
            },
        ));
        out.push(function(
            format!("{suffix}_build_object"),
            Signature::variadic_any(Volatility::Stable),
            ArrowType::Utf8,
            returns,
            move |a, kinds| {
                let values = Rendered::all(a, kinds);
                let scalars: Vec<_> = values.iter().map(Rendered::scalar).collect();
                Ok(utf8(Some(
                    match f {
                        Flavor::Json => shoal_json::json_build_object(&scalars),
                        Flavor::Jsonb => shoal_json::jsonb_build_object(&scalars),
                    }
                    .map_err(sql_error)?,
                )))
            },
        ));
        out.push(function(
            format!("{suffix}_build_array"),
            Signature::variadic_any(Volatility::Stable),
            ArrowType::Utf8,
            returns,
            move |a, kinds| {
                let values = Rendered::all(a, kinds);
                let scalars: Vec<_> = values.iter().map(Rendered::scalar).collect();
                Ok(utf8(Some(match f {
                    Flavor::Json => shoal_json::json_build_array(&scalars),
                    Flavor::Jsonb => shoal_json::jsonb_build_array(&scalars).map_err(sql_error)?,
                })))
            },
        ));
    }
    let jsonb = Some(oid::JSONB);
    let two_docs = |name: &'static str, op: fn(&str, &str) -> Result<bool, JsonError>| {
        function(
            name,
            Signature::any(2, imm),
            ArrowType::Boolean,
            None,
            move |a, _| match (text(&a[0]), text(&a[1])) {
                (Some(x), Some(y)) => {
                    // An untyped literal operand is jsonb's input text, not yet normal form.
                    let x = shoal_json::jsonb_in(&x).map_err(sql_error)?;
                    let y = shoal_json::jsonb_in(&y).map_err(sql_error)?;
                    Ok(ScalarValue::Boolean(Some(op(&x, &y).map_err(sql_error)?)))
                }
                _ => Ok(ScalarValue::Boolean(None)),
            },
        )
    };
    out.push(two_docs("jsonb_contains", shoal_json::jsonb_contains));
    out.push(two_docs("jsonb_contained", |a, b| {
        shoal_json::jsonb_contains(b, a)
    }));
    out.push(two_docs("jsonb_eq", |a, b| Ok(shoal_json::jsonb_eq(a, b))));
    out.push(two_docs("jsonb_ne", |a, b| Ok(!shoal_json::jsonb_eq(a, b))));
    out.push(two_docs("jsonb_lt", |a, b| {
        Ok(shoal_json::jsonb_cmp(a, b).is_lt())
    }));
    out.push(two_docs("jsonb_le", |a, b| {
        Ok(shoal_json::jsonb_cmp(a, b).is_le())
    }));
    out.push(two_docs("jsonb_gt", |a, b| {
        Ok(shoal_json::jsonb_cmp(a, b).is_gt())
    }));
    out.push(two_docs("jsonb_ge", |a, b| {
        Ok(shoal_json::jsonb_cmp(a, b).is_ge())
    }));
    out.push(function(
        "jsonb_exists",
        Signature::any(2, imm),
        ArrowType::Boolean,
        None,
        |a, _| match (text(&a[0]), text(&a[1])) {
            (Some(doc), Some(key)) => Ok(ScalarValue::Boolean(Some(
                shoal_json::jsonb_exists(&doc, &key).map_err(sql_error)?,
            ))),
            _ => Ok(ScalarValue::Boolean(None)),
        },
    ));
    for (name, all) in [("jsonb_exists_any", false), ("jsonb_exists_all", true)] {
        out.push(function(
            name,
            Signature::any(2, imm),
            ArrowType::Boolean,
            None,
            move |a, _| match (text(&a[0]), text_array(&a[1])?) {
                (Some(doc), Some(keys)) => {
                    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                    let found = if all {
                        shoal_json::jsonb_exists_all(&doc, &keys)
                    } else {
                        shoal_json::jsonb_exists_any(&doc, &keys)
                    };
                    Ok(ScalarValue::Boolean(Some(found.map_err(sql_error)?)))
                }
                _ => Ok(ScalarValue::Boolean(None)),
            },
        ));
    }
    out.push(function(
        "jsonb_concat",
        Signature::any(2, imm),
        ArrowType::Utf8,
        jsonb,
        |a, _| match (text(&a[0]), text(&a[1])) {
            (Some(x), Some(y)) => {
                let x = shoal_json::jsonb_in(&x).map_err(sql_error)?;
                let y = shoal_json::jsonb_in(&y).map_err(sql_error)?;
                Ok(utf8(Some(
                    shoal_json::jsonb_concat(&x, &y).map_err(sql_error)?,
                )))
            }
            _ => Ok(utf8(None)),
        },
    ));
    out.push(function(
        "jsonb_delete",
        Signature::any(2, imm),
        ArrowType::Utf8,
        jsonb,
        |a, _| {
            let Some(doc) = text(&a[0]) else {
                return Ok(utf8(None));
            };
            let deleted = if is_integer(&a[1]) {
                let Some(i) = integer(&a[1]) else {
                    return Ok(utf8(None));
                };
                shoal_json::jsonb_delete_index(
                    &doc,
                    i.clamp(i32::MIN as i64, i32::MAX as i64) as i32,
                )
            } else if let ScalarValue::List(_) = &a[1] {
                let Some(keys) = text_array(&a[1])? else {
                    return Ok(utf8(None));
                };
                let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                shoal_json::jsonb_delete_keys(&doc, &keys)
            } else {
                let Some(key) = text(&a[1]) else {
                    return Ok(utf8(None));
                };
                shoal_json::jsonb_delete_key(&doc, &key)
            };
            Ok(utf8(Some(deleted.map_err(sql_error)?)))
        },
    ));
    out.push(function(
        "jsonb_pretty",
        Signature::any(1, imm),
        ArrowType::Utf8,
        None,
        |a, _| match text(&a[0]) {
            None => Ok(utf8(None)),
            Some(d) => Ok(utf8(Some(shoal_json::jsonb_pretty(&d).map_err(sql_error)?))),
        },
    ));
    out.push(function(
        "jsonb_set",
        Signature::variadic_any(imm),
        ArrowType::Utf8,
        jsonb,
        |a, _| {
            if !(3..=4).contains(&a.len()) {
                return Err(SqlError::new(
                    code::UNDEFINED_FUNCTION,
                    "function jsonb_set does not exist",
                ));
            }
            let create = match a.get(3) {
                Some(ScalarValue::Boolean(b)) => b.unwrap_or(false),
                _ => true,
            };
            match (text(&a[0]), text_array(&a[1])?, text(&a[2])) {
                (Some(doc), Some(path), Some(new)) => {
                    let new = shoal_json::jsonb_in(&new).map_err(sql_error)?;
                    let path: Vec<Option<&str>> = path.iter().map(|p| Some(p.as_str())).collect();
                    Ok(utf8(Some(
                        shoal_json::jsonb_set(&doc, &path, &new, create).map_err(sql_error)?,
                    )))
                }
                _ => Ok(utf8(None)),
            }
        },
    ));
    out
}

/// The result of an access: the json value, or for the `_text` forms its text.
fn finish(f: Flavor, value: Option<String>, as_text: bool) -> Result<ScalarValue, SqlError> {
    let Some(value) = value else {
        return Ok(utf8(None));
    };
    if as_text {
        return Ok(utf8(
            shoal_json::to_text_value(f, &value).map_err(sql_error)?,
        ));
    }
    Ok(utf8(Some(value)))
}

/// An SQL value rendered for the json builders (`JsonScalar` borrows from it).
enum Rendered {
    Null,
    Bool(bool),
    Number(String),
    Text(String),
    Json(String),
    Jsonb(String),
}

impl Rendered {
    fn all(values: &[ScalarValue], kinds: &[ArgKind]) -> Vec<Rendered> {
        values
            .iter()
            .zip(kinds)
            .map(|(v, k)| Rendered::of(v, *k))
            .collect()
    }

    fn of(v: &ScalarValue, kind: ArgKind) -> Rendered {
        if v.is_null() {
            return Rendered::Null;
        }
        match kind {
            ArgKind::Json => return Rendered::Json(text(v).unwrap_or_default()),
            ArgKind::Jsonb => return Rendered::Jsonb(text(v).unwrap_or_default()),
            ArgKind::Other => {}
        }
        match v {
            ScalarValue::Boolean(Some(b)) => Rendered::Bool(*b),
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)) => Rendered::Text(s.clone()),
            v if v.data_type().is_numeric() || crate::numeric::is_numeric(&v.data_type()) => {
                Rendered::Number(pg_text(v))
            }
            // Timestamps print in ISO 8601 with a T, as PostgreSQL's json output does.
            ScalarValue::TimestampMicrosecond(..) | ScalarValue::TimestampNanosecond(..) => {
                Rendered::Text(pg_text(v).replacen(' ', "T", 1))
            }
            _ => Rendered::Text(pg_text(v)),
        }
    }

    fn scalar(&self) -> shoal_json::JsonScalar<'_> {
        use shoal_json::JsonScalar;
        match self {
            Rendered::Null => JsonScalar::Null,
            Rendered::Bool(b) => JsonScalar::Bool(*b),
            Rendered::Number(s) => JsonScalar::Number(s),
            Rendered::Text(s) => JsonScalar::Text(s),
            Rendered::Json(s) => JsonScalar::Json(s),
            Rendered::Jsonb(s) => JsonScalar::Jsonb(s),
        }
    }
}

/// A scalar's PostgreSQL text.
fn pg_text(v: &ScalarValue) -> String {
    let mut s = String::new();
    match v.to_array() {
        Ok(a) => crate::pgtext::format_array_value(
            a.as_ref(),
            0,
            &crate::timezone::TimeZone::utc(),
            &mut s,
        ),
        Err(_) => s = v.to_string(),
    }
    s
}

/// Plans the json operators as calls of their functions when an operand is json or jsonb.
pub fn plan_operator(
    expr: RawBinaryExpr,
    schema: &DFSchema,
) -> DfResult<PlannerResult<RawBinaryExpr>> {
    let left = declared_kind(&expr.left, schema);
    let right = declared_kind(&expr.right, schema);
    if left == ArgKind::Other && right == ArgKind::Other {
        return Ok(PlannerResult::Original(expr));
    }
    let prefix = if left == ArgKind::Json {
        "json"
    } else {
        "jsonb"
    };
    let right_is_integer = expr
        .right
        .get_type(schema)
        .map(|t| t.is_integer())
        .unwrap_or(false);
    let name: String = match &expr.op {
        BinaryOperator::Arrow if right_is_integer => format!("{prefix}_array_element"),
        BinaryOperator::Arrow => format!("{prefix}_object_field"),
        BinaryOperator::LongArrow if right_is_integer => format!("{prefix}_array_element_text"),
        BinaryOperator::LongArrow => format!("{prefix}_object_field_text"),
        BinaryOperator::HashArrow => format!("shoal_{prefix}_path"),
        BinaryOperator::HashLongArrow => format!("shoal_{prefix}_path_text"),
        BinaryOperator::AtArrow => "jsonb_contains".into(),
        BinaryOperator::ArrowAt => "jsonb_contained".into(),
        BinaryOperator::Question => "jsonb_exists".into(),
        BinaryOperator::QuestionPipe => "jsonb_exists_any".into(),
        BinaryOperator::QuestionAnd => "jsonb_exists_all".into(),
        BinaryOperator::StringConcat if left == ArgKind::Jsonb || right == ArgKind::Jsonb => {
            "jsonb_concat".into()
        }
        BinaryOperator::Minus if left == ArgKind::Jsonb => "jsonb_delete".into(),
        op @ (BinaryOperator::Eq
        | BinaryOperator::NotEq
        | BinaryOperator::Lt
        | BinaryOperator::LtEq
        | BinaryOperator::Gt
        | BinaryOperator::GtEq) => {
            if left == ArgKind::Json || right == ArgKind::Json {
                // json has no comparison operators in PostgreSQL.
                let side = |k: ArgKind| match k {
                    ArgKind::Json => "json",
                    ArgKind::Jsonb => "jsonb",
                    ArgKind::Other => "unknown",
                };
                return Err(df_error(
                    SqlError::new(
                        code::UNDEFINED_FUNCTION,
                        format!(
                            "operator does not exist: {} {op} {}",
                            side(left),
                            side(right)
                        ),
                    )
                    .with_hint(crate::query::typecheck::NO_OPERATOR_HINT),
                ));
            }
            match op {
                BinaryOperator::Eq => "jsonb_eq",
                BinaryOperator::NotEq => "jsonb_ne",
                BinaryOperator::Lt => "jsonb_lt",
                BinaryOperator::LtEq => "jsonb_le",
                BinaryOperator::Gt => "jsonb_gt",
                _ => "jsonb_ge",
            }
            .into()
        }
        _ => return Ok(PlannerResult::Original(expr)),
    };
    // A parameter compared with, contained in or appended to a json value is of its type,
    // as PostgreSQL resolves it (drivers then send their json encoding).
    let (mut left_expr, mut right_expr) = (expr.left, expr.right);
    let takes_same_type = !matches!(
        expr.op,
        BinaryOperator::Arrow
            | BinaryOperator::LongArrow
            | BinaryOperator::HashArrow
            | BinaryOperator::HashLongArrow
            | BinaryOperator::Question
            | BinaryOperator::QuestionPipe
            | BinaryOperator::QuestionAnd
            | BinaryOperator::Minus
    );
    if takes_same_type {
        type_placeholder(&mut right_expr, left);
        type_placeholder(&mut left_expr, right);
    }
    let udf = FUNCTIONS
        .get(&name)
        .expect("every operator's function is in the table")
        .clone();
    Ok(PlannerResult::Planned(Expr::ScalarFunction(
        ScalarFunction::new_udf(udf, vec![left_expr, right_expr]),
    )))
}

/// Gives an untyped parameter the json type `kind` of the other operand.
fn type_placeholder(e: &mut Expr, kind: ArgKind) {
    let type_oid = match kind {
        ArgKind::Json => oid::JSON,
        ArgKind::Jsonb => oid::JSONB,
        ArgKind::Other => return,
    };
    if let Expr::Placeholder(p) = e {
        if p.field.is_none() {
            p.field = Some(Arc::new(
                Field::new(&p.id, ArrowType::Utf8, true).with_metadata(
                    [(PG_TYPE_METADATA_KEY.to_string(), type_oid.to_string())].into(),
                ),
            ));
        }
    }
}

fn declared_kind(e: &Expr, schema: &DFSchema) -> ArgKind {
    match e.to_field(schema) {
        Ok((_, field)) => arg_kind(&field),
        Err(_) => ArgKind::Other,
    }
}
