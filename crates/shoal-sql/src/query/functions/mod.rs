//! PostgreSQL functions that DataFusion does not have: session and catalog information
//! (version(), current_schema(), pg_get_indexdef(), ...), sequences (nextval/currval/setval)
//! and relation sizes. Each is a row-at-a-time scalar function: they run on catalog-sized
//! inputs, never on hot scan paths. Sequences (`sequences`) and the functions that describe
//! catalog objects (`catalog_describers`) are registered from their own modules.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use shoal_storage::catalog_privileges::Privileges;

use datafusion::arrow::datatypes::{DataType as ArrowType, TimeUnit};
use datafusion::common::{DataFusionError, Result as DfResult, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};
use shoal_storage::catalog::{Catalog, Oid, RelationKind, SequenceDef};

use crate::error::{code, SqlError};
use crate::query::pg_catalog::{
    constraint_definition, format_type_oid, index_definition, index_key_definition,
};
use crate::query::scope::PlanScope;

mod catalog_describers;
mod sequences;
pub use catalog_describers::size_pretty;
pub use sequences::{next_sequence_value, nextval, sequence_by_name};

/// The zone tag of the timestamptz values returned here, DataFusion's now()'s (any tag means
/// "an instant" to Shoal).
pub(super) const INSTANT_ZONE: &str = "+00:00";

type RowFn = dyn Fn(&[ScalarValue]) -> DfResult<ScalarValue> + Send + Sync;

/// A scalar function evaluated row by row over `ScalarValue`s.
pub struct PgFunction {
    name: String,
    signature: Signature,
    return_type: ArrowType,
    /// The PostgreSQL type of the result when the Arrow type does not say it (`void`).
    pg_type_oid: Option<u32>,
    body: Arc<RowFn>,
}

impl std::fmt::Debug for PgFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PgFunction({})", self.name)
    }
}

impl PartialEq for PgFunction {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}
impl Eq for PgFunction {}
impl Hash for PgFunction {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name.hash(state)
    }
}

impl ScalarUDFImpl for PgFunction {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(self.return_type.clone())
    }

    fn return_field_from_args(
        &self,
        _args: datafusion::logical_expr::ReturnFieldArgs,
    ) -> DfResult<datafusion::arrow::datatypes::FieldRef> {
        let field =
            datafusion::arrow::datatypes::Field::new(self.name(), self.return_type.clone(), true);
        Ok(Arc::new(match self.pg_type_oid {
            Some(oid) => field.with_metadata(
                [(
                    crate::types::PG_TYPE_METADATA_KEY.to_string(),
                    oid.to_string(),
                )]
                .into_iter()
                .collect(),
            ),
            None => field,
        }))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let all_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        if all_scalar {
            let values: Vec<ScalarValue> = args
                .args
                .iter()
                .map(|a| match a {
                    ColumnarValue::Scalar(s) => s.clone(),
                    ColumnarValue::Array(_) => unreachable!("checked all scalar"),
                })
                .collect();
            let v = (self.body)(&values)?;
            // Volatile functions with no arguments (nextval of a constant) must produce one
            // value per row, not one per batch.
            if self.signature.volatility == Volatility::Volatile && args.number_rows > 1 {
                let mut out = vec![v];
                for _ in 1..args.number_rows {
                    out.push((self.body)(&values)?);
                }
                return Ok(ColumnarValue::Array(ScalarValue::iter_to_array(out)?));
            }
            return Ok(ColumnarValue::Scalar(v));
        }
        if args.number_rows == 0 {
            // An empty batch (a catalog table without rows): no values to build an array from.
            return Ok(ColumnarValue::Array(
                datafusion::arrow::array::new_empty_array(&self.return_type),
            ));
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
            out.push((self.body)(&values)?.cast_to(&self.return_type)?);
        }
        Ok(ColumnarValue::Array(ScalarValue::iter_to_array(out)?))
    }
}

pub(crate) fn udf(
    name: &str,
    arities: &[usize],
    return_type: ArrowType,
    volatility: Volatility,
    body: impl Fn(&[ScalarValue]) -> DfResult<ScalarValue> + Send + Sync + 'static,
) -> ScalarUDF {
    let sigs: Vec<TypeSignature> = arities
        .iter()
        .map(|n| {
            if *n == 0 {
                TypeSignature::Nullary
            } else {
                TypeSignature::Any(*n)
            }
        })
        .collect();
    let signature = if sigs.len() == 1 {
        Signature::new(sigs.into_iter().next().unwrap(), volatility)
    } else {
        Signature::one_of(sigs, volatility)
    };
    ScalarUDF::new_from_impl(PgFunction {
        name: name.to_string(),
        signature,
        return_type,
        pg_type_oid: None,
        body: Arc::new(body),
    })
}

fn array_length(elements: usize) -> i32 {
    i32::try_from(elements).unwrap_or(i32::MAX)
}

/// PostgreSQL's `void`, the type of functions that return nothing; its output is empty.
pub const VOID_OID: u32 = 2278;

/// A function returning `void` (an empty text value of that type), called for its effect.
pub(crate) fn void_udf(
    name: &str,
    arity: usize,
    body: impl Fn(&[ScalarValue]) -> DfResult<()> + Send + Sync + 'static,
) -> ScalarUDF {
    let signature = match arity {
        0 => Signature::new(TypeSignature::Nullary, Volatility::Volatile),
        n => Signature::new(TypeSignature::Any(n), Volatility::Volatile),
    };
    void_udf_with(name, signature, body)
}

/// `void_udf` with its own signature (several arities).
pub(crate) fn void_udf_with(
    name: &str,
    signature: Signature,
    body: impl Fn(&[ScalarValue]) -> DfResult<()> + Send + Sync + 'static,
) -> ScalarUDF {
    ScalarUDF::new_from_impl(PgFunction {
        name: name.to_string(),
        signature,
        return_type: ArrowType::Utf8,
        pg_type_oid: Some(VOID_OID),
        body: Arc::new(move |a: &[ScalarValue]| {
            body(a)?;
            Ok(ScalarValue::Utf8(Some(String::new())))
        }),
    })
}

/// Errors raised inside functions travel through DataFusion as `External` and come back out
/// with their SQLSTATE intact (see `errors.rs`).
pub fn sql_error(e: SqlError) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// The OID of the built-in type a name spells, as `regtype` input reads it: any case, the
/// catalog name (`int4`) or the SQL one (`integer`), a type modifier ignored (`varchar(20)`), and
/// `[]` for the array type.
/// The OID of a type by name: a built-in type, else a user-defined one (or its array type)
/// along the search path.
fn type_oid_by_name_in(scope: &PlanScope, name: &str) -> Option<u32> {
    if let Some(oid) = type_oid_by_name(name) {
        return Some(oid);
    }
    let trimmed = name.trim();
    let (element, array) = match trimmed.strip_suffix("[]") {
        Some(e) => (e.trim(), true),
        None => (trimmed, false),
    };
    let parsed = datafusion::sql::sqlparser::parser::Parser::new(
        &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
    )
    .try_with_sql(element)
    .and_then(|mut p| p.parse_object_name(false))
    .ok()?;
    let t = datafusion::sql::sqlparser::ast::DataType::Custom(parsed, Vec::new());
    let search_path = scope.search_path.lock().clone();
    let def = crate::types::lookup_user_type(&t, &scope.engine.catalog.read(), &search_path)?;
    Some(if array { def.array_oid } else { def.oid })
}

fn type_oid_by_name(name: &str) -> Option<u32> {
    let mut n = name.trim().to_lowercase();
    let array = n.ends_with("[]");
    if array {
        n.truncate(n.len() - 2);
    }
    if let (Some(open), true) = (n.find('('), n.ends_with(')')) {
        n.truncate(open);
    }
    let n = n.trim().strip_prefix("pg_catalog.").unwrap_or(n.trim());
    let element = crate::query::pg_catalog::BUILTIN_TYPES
        .iter()
        .find(|t| t.1 == n || format_type_oid(t.0, -1).as_deref() == Some(n))?
        .0;
    if !array {
        return Some(element);
    }
    crate::query::pg_catalog::BUILTIN_TYPES
        .iter()
        .find(|t| crate::types::array_element_oid(t.0) == Some(element))
        .map(|t| t.0)
}

/// A string literal for `t`, as PostgreSQL's quote_literal writes it: quotes doubled, and with
/// backslashes doubled behind an `E` prefix when there are any.
fn quote_literal(t: &str) -> String {
    let quoted = t.replace('\'', "''");
    if t.contains('\\') {
        format!("E'{}'", quoted.replace('\\', "\\\\"))
    } else {
        format!("'{quoted}'")
    }
}

fn text_arg(v: &ScalarValue) -> Option<String> {
    match v {
        ScalarValue::Utf8(s) | ScalarValue::LargeUtf8(s) | ScalarValue::Utf8View(s) => s.clone(),
        ScalarValue::Null => None,
        other => Some(other.to_string()),
    }
}

fn int_arg(v: &ScalarValue) -> Option<i64> {
    v.cast_to(&ArrowType::Int64).ok().and_then(|s| match s {
        ScalarValue::Int64(v) => v,
        _ => None,
    })
}

/// Splits `schema.name` (with optional double quotes) into its parts, lowercasing unquoted ones.
pub fn parse_qualified_name(s: &str) -> (Option<String>, String) {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut was_quoted = false;
    for c in s.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                was_quoted = true;
            }
            '.' if !quoted => {
                parts.push(if was_quoted {
                    current.clone()
                } else {
                    current.to_lowercase()
                });
                current.clear();
                was_quoted = false;
            }
            c => current.push(c),
        }
    }
    parts.push(if was_quoted {
        current
    } else {
        current.to_lowercase()
    });
    let name = parts.pop().unwrap_or_default();
    (parts.pop(), name)
}

/// Resolves a relation name (as regclass input does) to its OID.
pub fn regclass(scope: &PlanScope, name: &str) -> Result<Oid, SqlError> {
    if let Ok(oid) = name.trim().parse::<u32>() {
        return Ok(oid);
    }
    let (schema, rel) = parse_qualified_name(name.trim());
    scope
        .resolve_relation(schema.as_deref(), &rel)
        .map(|(_, _, oid)| oid)
        .or_else(|| system_catalog_oid(schema.as_deref(), &rel))
        .ok_or_else(|| SqlError::undefined_table(name))
}

/// A system catalog's OID, for a bare name or one in pg_catalog.
fn system_catalog_oid(schema: Option<&str>, name: &str) -> Option<Oid> {
    if !matches!(schema, None | Some("pg_catalog")) {
        return None;
    }
    crate::query::pg_catalog::SYSTEM_CATALOG_OIDS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, oid)| *oid)
}

/// regclass output: the relation's name, schema-qualified when the search path would not find
/// it, or the bare number for an OID that names no relation (as PostgreSQL prints it).
fn regclass_text(scope: &PlanScope, oid: Oid) -> String {
    let Some((schema, name)) = scope.engine.catalog.read().relation_name(oid) else {
        return match crate::query::pg_catalog::SYSTEM_CATALOG_OIDS
            .iter()
            .find(|(_, o)| *o == oid)
        {
            Some((name, _)) => name.to_string(),
            None => oid.to_string(),
        };
    };
    if relation_is_visible(scope, oid) {
        quote_ident_if_needed(&name)
    } else {
        format!(
            "{}.{}",
            quote_ident_if_needed(&schema),
            quote_ident_if_needed(&name)
        )
    }
}

/// Whether the relation is the one its bare name finds through the search path.
fn relation_is_visible(scope: &PlanScope, oid: Oid) -> bool {
    relation_is_visible_in(scope, &scope.engine.catalog.read(), oid)
}

/// `relation_is_visible` with the catalog already read.
fn relation_is_visible_in(scope: &PlanScope, catalog: &Catalog, oid: Oid) -> bool {
    let Some((_, name)) = catalog.relation_name(oid) else {
        return false;
    };
    let found = scope
        .lookup_schemas()
        .iter()
        .find_map(|schema| catalog.lookup(schema, &name));
    found.map(|(_, o)| o) == Some(oid)
}

/// A default `nextval('seq'::regclass)` with the sequence named as regclass output names it:
/// with its schema (the schema of `relation`, the column's table, where it has a sequence of
/// that name) when the search path does not find it by the bare name.
fn qualify_nextval(scope: &PlanScope, expr: &str, relation: Option<Oid>) -> String {
    let Some(name) = expr
        .strip_prefix("nextval('")
        .and_then(|rest| rest.strip_suffix("'::regclass)"))
    else {
        return expr.to_string();
    };
    if name.contains(['.', '"', '\'']) {
        return expr.to_string();
    }
    let catalog = scope.engine.catalog.read();
    let table_schema = relation
        .and_then(|r| catalog.relation_name(r))
        .map(|(s, _)| s);
    let sequence = table_schema
        .and_then(|s| catalog.lookup(&s, name))
        .map(|(_, oid)| oid);
    match sequence {
        Some(oid) if !relation_is_visible_in(scope, &catalog, oid) => {
            let (schema, _) = catalog.relation_name(oid).expect("a sequence has a name");
            format!(
                "nextval('{}.{}'::regclass)",
                quote_ident_if_needed(&schema),
                quote_ident_if_needed(name)
            )
        }
        _ => expr.to_string(),
    }
}

/// Resolves a schema name (as regnamespace input does) to its OID.
fn regnamespace(scope: &PlanScope, name: &str) -> Result<Oid, SqlError> {
    let name = name.trim();
    if let Ok(oid) = name.parse::<u32>() {
        return Ok(oid);
    }
    let (_, schema) = parse_qualified_name(name);
    let catalog = scope.engine.catalog.read();
    catalog.schemas.get(&schema).map(|s| s.oid).ok_or_else(|| {
        SqlError::new(
            code::INVALID_SCHEMA_NAME,
            format!("schema \"{schema}\" does not exist"),
        )
    })
}

/// regnamespace output: the schema's name, or the bare number for an OID that names none.
fn regnamespace_text(scope: &PlanScope, oid: i64) -> String {
    let catalog = scope.engine.catalog.read();
    let schema = catalog.schemas.values().find(|s| i64::from(s.oid) == oid);
    match schema {
        Some(s) => quote_ident_if_needed(&s.name),
        None => oid.to_string(),
    }
}

/// regtype output: the type's SQL name, `-` for OID 0 and the bare number for an unknown OID.
fn regtype_text(oid: i64) -> String {
    if oid == 0 {
        return "-".to_string();
    }
    format_type_oid(oid as u32, -1).unwrap_or_else(|| oid.to_string())
}

pub(crate) fn quote_ident_if_needed(name: &str) -> String {
    let plain = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && !name.is_empty()
        && !crate::query::checks::is_quoted_keyword(name);
    if plain {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

pub fn register(state: &mut datafusion::execution::SessionState, scope: Arc<PlanScope>) {
    use datafusion::execution::FunctionRegistry;
    let s = scope.clone();
    let mut add = |f: ScalarUDF| {
        state
            .register_udf(Arc::new(f))
            .expect("function registration cannot fail");
    };
    let text = ArrowType::Utf8;
    add(udf(
        "version",
        &[0],
        text.clone(),
        Volatility::Stable,
        |_| {
            Ok(ScalarValue::Utf8(Some(
                crate::engine::VERSION_STRING.to_string(),
            )))
        },
    ));
    // Array bounds as PostgreSQL gives them for one-dimensional arrays: NULL for an empty array
    // or another dimension (DataFusion's array_length says 0 for an empty one).
    for (name, bound) in [
        ("array_length", array_length as fn(usize) -> i32),
        ("array_upper", array_length),
        ("array_lower", |_| 1),
    ] {
        add(udf(
            name,
            &[2],
            ArrowType::Int32,
            Volatility::Immutable,
            move |a| {
                let length = match &a[0] {
                    ScalarValue::List(list)
                        if !datafusion::arrow::array::Array::is_null(list.as_ref(), 0) =>
                    {
                        list.value(0).len()
                    }
                    _ => return Ok(ScalarValue::Int32(None)),
                };
                let dimension = a[1].cast_to(&ArrowType::Int64)?;
                Ok(ScalarValue::Int32(
                    (length > 0 && dimension == ScalarValue::Int64(Some(1))).then(|| bound(length)),
                ))
            },
        ));
    }
    add(ScalarUDF::new_from_impl(PgFunction {
        name: "shoal_to_uuid".to_string(),
        signature: Signature::new(TypeSignature::Any(1), Volatility::Immutable),
        return_type: ArrowType::Utf8,
        pg_type_oid: Some(crate::types::oid::UUID),
        body: Arc::new(|a: &[ScalarValue]| {
            Ok(ScalarValue::Utf8(match &a[0] {
                ScalarValue::Utf8(Some(s))
                | ScalarValue::LargeUtf8(Some(s))
                | ScalarValue::Utf8View(Some(s)) => Some(crate::types::format_uuid(
                    crate::types::parse_uuid(s).map_err(sql_error)?,
                )),
                v if v.is_null() => None,
                v => {
                    return Err(sql_error(SqlError::new(
                        code::CANNOT_COERCE,
                        format!(
                            "cannot cast type {} to uuid",
                            crate::dml::pg_type_name_of_arrow(&v.data_type())
                        ),
                    )))
                }
            }))
        }),
    }));
    add(udf(
        "current_database",
        &[0],
        text.clone(),
        Volatility::Stable,
        |_| Ok(ScalarValue::Utf8(Some("postgres".into()))),
    ));
    add(udf(
        "current_catalog",
        &[0],
        text.clone(),
        Volatility::Stable,
        |_| Ok(ScalarValue::Utf8(Some("postgres".into()))),
    ));
    let sc = s.clone();
    add(udf(
        "current_user",
        &[0],
        text.clone(),
        Volatility::Stable,
        move |_| Ok(ScalarValue::Utf8(Some(sc.current_role()))),
    ));
    let sc = s.clone();
    add(udf(
        "session_user",
        &[0],
        text.clone(),
        Volatility::Stable,
        move |_| Ok(ScalarValue::Utf8(Some(sc.session_user()))),
    ));
    let sc = s.clone();
    add(udf(
        "current_role",
        &[0],
        text.clone(),
        Volatility::Stable,
        move |_| Ok(ScalarValue::Utf8(Some(sc.current_role()))),
    ));
    let sc = s.clone();
    add(udf(
        "user",
        &[0],
        text.clone(),
        Volatility::Stable,
        move |_| Ok(ScalarValue::Utf8(Some(sc.current_role()))),
    ));
    let sc = s.clone();
    add(udf(
        "current_schema",
        &[0],
        text.clone(),
        Volatility::Stable,
        move |_| Ok(ScalarValue::Utf8(sc.creation_schema())),
    ));
    let sc = s.clone();
    add(udf(
        "current_schemas",
        &[1],
        ArrowType::List(Arc::new(
            datafusion::arrow::datatypes::Field::new_list_field(ArrowType::Utf8, true),
        )),
        Volatility::Stable,
        move |a| {
            let implicit = matches!(a[0], ScalarValue::Boolean(Some(true)));
            Ok(ScalarValue::List(ScalarValue::new_list_nullable(
                &sc.current_schemas(implicit)
                    .into_iter()
                    .map(|n| ScalarValue::Utf8(Some(n)))
                    .collect::<Vec<_>>(),
                &ArrowType::Utf8,
            )))
        },
    ));
    // now() is the transaction's start (DataFusion's, which the session sets);
    // statement_timestamp() the statement's, clock_timestamp() the time it is called.
    let sc = s.clone();
    add(udf(
        "statement_timestamp",
        &[0],
        ArrowType::Timestamp(TimeUnit::Microsecond, Some(INSTANT_ZONE.into())),
        Volatility::Stable,
        move |_| {
            Ok(ScalarValue::TimestampMicrosecond(
                Some(sc.statement_started_micros()),
                Some(INSTANT_ZONE.into()),
            ))
        },
    ));
    add(udf(
        "clock_timestamp",
        &[0],
        ArrowType::Timestamp(TimeUnit::Microsecond, Some(INSTANT_ZONE.into())),
        Volatility::Volatile,
        |_| {
            Ok(ScalarValue::TimestampMicrosecond(
                Some(chrono::Utc::now().timestamp_micros()),
                Some(INSTANT_ZONE.into()),
            ))
        },
    ));
    let sc = s.clone();
    add(udf(
        "pg_backend_pid",
        &[0],
        ArrowType::Int32,
        Volatility::Stable,
        move |_| Ok(ScalarValue::Int32(Some(sc.backend_pid))),
    ));
    add(udf(
        "inet_server_port",
        &[0],
        ArrowType::Int32,
        Volatility::Stable,
        |_| Ok(ScalarValue::Int32(None)),
    ));
    sequences::register(&mut add, &s);
    let sc = s.clone();
    add(udf(
        "to_regclass_oid",
        &[1],
        ArrowType::UInt32,
        Volatility::Stable,
        move |a| {
            let Some(name) = text_arg(&a[0]) else {
                return Ok(ScalarValue::UInt32(None));
            };
            regclass(&sc, &name)
                .map(|o| ScalarValue::UInt32(Some(o)))
                .map_err(sql_error)
        },
    ));
    let sc = s.clone();
    add(udf(
        "to_regclass",
        &[1],
        ArrowType::UInt32,
        Volatility::Stable,
        move |a| {
            let Some(name) = text_arg(&a[0]) else {
                return Ok(ScalarValue::UInt32(None));
            };
            Ok(ScalarValue::UInt32(regclass(&sc, &name).ok()))
        },
    ));
    let sc = s.clone();
    add(udf(
        "regclass_out",
        &[1],
        ArrowType::Utf8,
        Volatility::Stable,
        move |a| {
            let Some(oid) = int_arg(&a[0]) else {
                return Ok(ScalarValue::Utf8(None));
            };
            Ok(ScalarValue::Utf8(Some(regclass_text(&sc, oid as Oid))))
        },
    ));
    let sc = s.clone();
    add(udf(
        "to_regnamespace_oid",
        &[1],
        ArrowType::UInt32,
        Volatility::Stable,
        move |a| {
            let Some(name) = text_arg(&a[0]) else {
                return Ok(ScalarValue::UInt32(None));
            };
            regnamespace(&sc, &name)
                .map(|o| ScalarValue::UInt32(Some(o)))
                .map_err(sql_error)
        },
    ));
    let sc = s.clone();
    add(udf(
        "regnamespace_out",
        &[1],
        ArrowType::Utf8,
        Volatility::Stable,
        move |a| {
            let Some(oid) = int_arg(&a[0]) else {
                return Ok(ScalarValue::Utf8(None));
            };
            Ok(ScalarValue::Utf8(Some(regnamespace_text(&sc, oid))))
        },
    ));
    let sc = s.clone();
    add(udf(
        "to_regtype_oid",
        &[1],
        ArrowType::UInt32,
        Volatility::Stable,
        move |a| {
            let Some(name) = text_arg(&a[0]) else {
                return Ok(ScalarValue::UInt32(None));
            };
            if let Ok(oid) = name.trim().parse::<u32>() {
                return Ok(ScalarValue::UInt32(Some(oid)));
            }
            type_oid_by_name_in(&sc, &name)
                .map(|oid| ScalarValue::UInt32(Some(oid)))
                .ok_or_else(|| {
                    sql_error(SqlError::new(
                        code::UNDEFINED_OBJECT,
                        format!("type \"{name}\" does not exist"),
                    ))
                })
        },
    ));
    // to_regtype: the type's OID, or NULL when no type has that name (where the cast fails).
    let sc = s.clone();
    add(udf(
        "to_regtype",
        &[1],
        ArrowType::UInt32,
        Volatility::Stable,
        move |a| {
            Ok(ScalarValue::UInt32(
                text_arg(&a[0]).and_then(|name| type_oid_by_name_in(&sc, &name)),
            ))
        },
    ));
    let sc = s.clone();
    add(udf(
        "regtype_out",
        &[1],
        ArrowType::Utf8,
        Volatility::Stable,
        move |a| {
            Ok(ScalarValue::Utf8(int_arg(&a[0]).map(|oid| {
                crate::query::pg_catalog::format_user_type(&sc.engine.catalog.read(), oid as u32)
                    .unwrap_or_else(|| regtype_text(oid))
            })))
        },
    ));
    add(udf(
        "quote_ident",
        &[1],
        ArrowType::Utf8,
        Volatility::Immutable,
        |a| {
            Ok(ScalarValue::Utf8(
                text_arg(&a[0]).map(|n| quote_ident_if_needed(&n)),
            ))
        },
    ));
    let sc = s.clone();
    add(void_udf("pg_notify", 2, move |a| {
        // NULL arguments: PostgreSQL's pg_notify is not strict, and reads them as empty.
        let channel = text_arg(&a[0]).unwrap_or_default();
        let payload = text_arg(&a[1]).unwrap_or_default();
        sc.notifications
            .notify(&channel, &payload)
            .map_err(sql_error)
    }));
    // LIKE ... ESCAPE 'c' with a computed pattern (see `rewrite.rs`).
    add(udf(
        "pg_like_escape",
        &[2],
        ArrowType::Utf8,
        Volatility::Immutable,
        |a| match (text_arg(&a[0]), text_arg(&a[1])) {
            (Some(pattern), Some(escape)) => {
                crate::query::rewrite::like_pattern_with_backslash(&pattern, &escape)
                    .map(|p| ScalarValue::Utf8(Some(p)))
                    .map_err(sql_error)
            }
            _ => Ok(ScalarValue::Utf8(None)),
        },
    ));
    add(udf(
        "quote_literal",
        &[1],
        ArrowType::Utf8,
        Volatility::Immutable,
        |a| {
            Ok(ScalarValue::Utf8(
                text_arg(&a[0]).map(|t| quote_literal(&t)),
            ))
        },
    ));
    add(udf(
        "quote_nullable",
        &[1],
        ArrowType::Utf8,
        Volatility::Immutable,
        |a| {
            Ok(ScalarValue::Utf8(Some(text_arg(&a[0]).map_or_else(
                || "NULL".to_string(),
                |t| quote_literal(&t),
            ))))
        },
    ));
    catalog_describers::register(&mut add, &s);
}
