//! PostgreSQL functions that DataFusion does not have: session and catalog information
//! (version(), current_schema(), pg_get_indexdef(), ...), sequences (nextval/currval/setval)
//! and relation sizes. Each is a row-at-a-time scalar function: they run on catalog-sized
//! inputs, never on hot scan paths.

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

fn sequence_oid(scope: &PlanScope, name: &str) -> Result<Oid, SqlError> {
    // A regclass argument (`nextval('s'::regclass)`, as pg_dump writes defaults) is the OID.
    if let Ok(oid) = name.parse::<Oid>() {
        let catalog = scope.engine.catalog.read();
        return match catalog.relation_name(oid) {
            Some(_) if catalog.sequences.contains_key(&oid) => Ok(oid),
            Some((_, rel)) => Err(SqlError::new(
                code::WRONG_OBJECT_TYPE,
                format!("\"{rel}\" is not a sequence"),
            )),
            None => Err(SqlError::new(
                code::UNDEFINED_TABLE,
                format!("could not open relation with OID {oid}"),
            )),
        };
    }
    let (schema, rel) = parse_qualified_name(name);
    match scope.resolve_relation(schema.as_deref(), &rel) {
        Some((_, RelationKind::Sequence, oid)) => Ok(oid),
        Some(_) => Err(SqlError::new(
            code::WRONG_OBJECT_TYPE,
            format!("\"{rel}\" is not a sequence"),
        )),
        None => Err(SqlError::undefined_table(name)),
    }
}

pub fn nextval(scope: &PlanScope, name: &str) -> Result<i64, SqlError> {
    let seq = sequence_by_name(scope, name)?;
    next_sequence_value(scope, &seq)
}

/// The sequence `name` resolves to through the search path.
pub fn sequence_by_name(scope: &PlanScope, name: &str) -> Result<Arc<SequenceDef>, SqlError> {
    let oid = sequence_oid(scope, name)?;
    scope
        .engine
        .catalog
        .read()
        .sequences
        .get(&oid)
        .cloned()
        .ok_or_else(|| SqlError::undefined_table(name))
}

/// nextval of a resolved sequence: advances it, logs it and remembers it for currval.
pub fn next_sequence_value(scope: &PlanScope, seq: &SequenceDef) -> Result<i64, SqlError> {
    let oid = seq.oid;
    crate::privileges::check_sequence(
        scope,
        oid,
        &seq.name,
        Privileges::USAGE | Privileges::UPDATE,
    )?;
    let v = seq.next_value().map_err(|_| {
        SqlError::new(
            code::SEQUENCE_GENERATOR_LIMIT_EXCEEDED,
            format!(
                "nextval: reached maximum value of sequence \"{}\" ({})",
                seq.name, seq.max_value
            ),
        )
    })?;
    scope.engine.log_sequence(&seq);
    scope.sequence_last.lock().insert(oid, v);
    Ok(v)
}

/// pg_get_serial_sequence: the sequence a serial or identity column owns, schema-qualified, or
/// None for a column without one. The column name is taken as written (not case-folded), as in
/// PostgreSQL.
fn serial_sequence(
    scope: &PlanScope,
    table: &str,
    column: &str,
) -> Result<Option<String>, SqlError> {
    let table_oid = regclass(scope, table)?;
    let catalog = scope.engine.catalog.read();
    let def = catalog
        .tables
        .get(&table_oid)
        .ok_or_else(|| SqlError::undefined_table(table))?;
    let col = def.column_index(column).ok_or_else(|| {
        SqlError::new(
            code::UNDEFINED_COLUMN,
            format!(
                "column \"{column}\" of relation \"{}\" does not exist",
                def.name
            ),
        )
    })?;
    let owned = catalog
        .sequences
        .values()
        .find(|seq| seq.owned_by == Some((table_oid, col)));
    Ok(owned.map(|seq| {
        format!(
            "{}.{}",
            quote_ident_if_needed(&seq.schema),
            quote_ident_if_needed(&seq.name)
        )
    }))
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
    let sc = s.clone();
    add(udf(
        "nextval",
        &[1],
        ArrowType::Int64,
        Volatility::Volatile,
        move |a| {
            let Some(name) = text_arg(&a[0]) else {
                return Ok(ScalarValue::Int64(None));
            };
            nextval(&sc, &name)
                .map(|v| ScalarValue::Int64(Some(v)))
                .map_err(sql_error)
        },
    ));
    let sc = s.clone();
    add(udf(
        "pg_get_serial_sequence",
        &[2],
        ArrowType::Utf8,
        Volatility::Stable,
        move |a| {
            let (Some(table), Some(column)) = (text_arg(&a[0]), text_arg(&a[1])) else {
                return Ok(ScalarValue::Utf8(None));
            };
            let name = serial_sequence(&sc, &table, &column).map_err(sql_error)?;
            Ok(ScalarValue::Utf8(name))
        },
    ));
    let sc = s.clone();
    add(udf(
        "currval",
        &[1],
        ArrowType::Int64,
        Volatility::Volatile,
        move |a| {
            let Some(name) = text_arg(&a[0]) else {
                return Ok(ScalarValue::Int64(None));
            };
            let oid = sequence_oid(&sc, &name).map_err(sql_error)?;
            let relation = parse_qualified_name(&name).1;
            crate::privileges::check_sequence(
                &sc,
                oid,
                &relation,
                Privileges::SELECT | Privileges::USAGE,
            )
            .map_err(sql_error)?;
            let last = sc.sequence_last.lock().get(&oid).copied();
            last.map(|v| ScalarValue::Int64(Some(v))).ok_or_else(|| {
                sql_error(SqlError::new(
                    code::OBJECT_NOT_IN_PREREQUISITE_STATE,
                    format!("currval of sequence \"{name}\" is not yet defined in this session"),
                ))
            })
        },
    ));
    let sc = s.clone();
    add(udf(
        "setval",
        &[2, 3],
        ArrowType::Int64,
        Volatility::Volatile,
        move |a| {
            let (Some(name), Some(value)) = (text_arg(&a[0]), int_arg(&a[1])) else {
                return Ok(ScalarValue::Int64(None));
            };
            let is_called = a
                .get(2)
                .map(|v| matches!(v, ScalarValue::Boolean(Some(true))))
                .unwrap_or(true);
            let oid = sequence_oid(&sc, &name).map_err(sql_error)?;
            let seq = sc
                .engine
                .catalog
                .read()
                .sequences
                .get(&oid)
                .cloned()
                .ok_or_else(|| sql_error(SqlError::undefined_table(&name)))?;
            crate::privileges::check_sequence(&sc, oid, &seq.name, Privileges::UPDATE)
                .map_err(sql_error)?;
            if value < seq.min_value || value > seq.max_value {
                return Err(sql_error(SqlError::new(
                    code::NUMERIC_VALUE_OUT_OF_RANGE,
                    format!(
                        "setval: value {value} is out of bounds for sequence \"{}\" ({}..{})",
                        seq.name, seq.min_value, seq.max_value
                    ),
                )));
            }
            seq.set_value(value, is_called);
            sc.engine.log_sequence(&seq);
            if is_called {
                sc.sequence_last.lock().insert(oid, value);
            }
            Ok(ScalarValue::Int64(Some(value)))
        },
    ));
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
    for size_fn in [
        "pg_total_relation_size",
        "pg_relation_size",
        "pg_table_size",
        "pg_indexes_size",
    ] {
        let sc = s.clone();
        let which = size_fn.to_string();
        add(udf(
            size_fn,
            &[1],
            ArrowType::Int64,
            Volatility::Volatile,
            move |a| {
                let oid = match &a[0] {
                    ScalarValue::Utf8(Some(n)) => regclass(&sc, n).map_err(sql_error)?,
                    other => match int_arg(other) {
                        Some(o) => o as u32,
                        None => return Ok(ScalarValue::Int64(None)),
                    },
                };
                Ok(ScalarValue::Int64(Some(
                    relation_size(&sc, oid, &which) as i64
                )))
            },
        ));
    }
    add(udf(
        "pg_size_pretty",
        &[1],
        text.clone(),
        Volatility::Immutable,
        |a| Ok(ScalarValue::Utf8(int_arg(&a[0]).map(size_pretty))),
    ));
    let sc = s.clone();
    add(udf(
        "format_type",
        &[2],
        text.clone(),
        Volatility::Stable,
        move |a| {
            let Some(t) = int_arg(&a[0]) else {
                return Ok(ScalarValue::Utf8(None));
            };
            let typmod = int_arg(&a[1]).unwrap_or(-1) as i32;
            Ok(ScalarValue::Utf8(Some(
                format_type_oid(t as u32, typmod)
                    .or_else(|| {
                        crate::query::pg_catalog::format_user_type(
                            &sc.engine.catalog.read(),
                            t as u32,
                        )
                    })
                    .unwrap_or_else(|| "???".into()),
            )))
        },
    ));
    let sc = s.clone();
    add(udf(
        "pg_get_indexdef",
        &[1, 3],
        text.clone(),
        Volatility::Stable,
        move |a| {
            let Some(oid) = int_arg(&a[0]) else {
                return Ok(ScalarValue::Utf8(None));
            };
            let catalog = sc.engine.catalog.read();
            let key_no = a.get(1).and_then(int_arg).unwrap_or(0);
            Ok(ScalarValue::Utf8(if key_no > 0 {
                index_key_definition(&catalog, oid as u32, key_no as usize)
            } else {
                index_definition(&catalog, oid as u32)
            }))
        },
    ));
    let sc = s.clone();
    add(udf(
        "pg_get_constraintdef",
        &[1, 2],
        text.clone(),
        Volatility::Stable,
        move |a| {
            let Some(oid) = int_arg(&a[0]) else {
                return Ok(ScalarValue::Utf8(None));
            };
            let catalog = sc.engine.catalog.read();
            let def = catalog.tables.values().find_map(|t| {
                t.constraints.iter().find(|c| c.oid == oid as u32).map(|c| {
                    let visible = |oid| relation_is_visible_in(&sc, &catalog, oid);
                    constraint_definition(&catalog, t.oid, &c.kind, &visible)
                })
            });
            Ok(ScalarValue::Utf8(def))
        },
    ));
    let sc = s.clone();
    add(udf(
        "pg_get_expr",
        &[2, 3],
        text.clone(),
        Volatility::Stable,
        move |a| {
            let relation = int_arg(&a[1]).map(|o| o as u32);
            Ok(ScalarValue::Utf8(
                text_arg(&a[0]).map(|e| qualify_nextval(&sc, &e, relation)),
            ))
        },
    ));
    // Shoal has no partitioned tables: a relation's only ancestor is itself.
    add(udf(
        "pg_partition_ancestors",
        &[1],
        ArrowType::UInt32,
        Volatility::Stable,
        |a| Ok(ScalarValue::UInt32(int_arg(&a[0]).map(|o| o as u32))),
    ));
    // pg_proc lists no functions (Shoal has no user-defined ones), so psql's `\df` finds
    // nothing to describe with these.
    add(udf(
        "pg_function_is_visible",
        &[1],
        ArrowType::Boolean,
        Volatility::Stable,
        |_| Ok(ScalarValue::Boolean(Some(true))),
    ));
    for describe in ["pg_get_function_result", "pg_get_function_arguments"] {
        add(udf(
            describe,
            &[1],
            text.clone(),
            Volatility::Stable,
            |_| Ok(ScalarValue::Utf8(None)),
        ));
    }
    // Shoal has no triggers (pg_trigger is empty), so no OID names one.
    add(udf(
        "pg_get_triggerdef",
        &[1, 2],
        text.clone(),
        Volatility::Stable,
        |_| Ok(ScalarValue::Utf8(None)),
    ));
    // A regproc (held by name in Shoal's catalogs) cast to oid: the function's OID.
    add(udf(
        "shoal_regproc_oid",
        &[1],
        ArrowType::UInt32,
        Volatility::Immutable,
        |a| {
            let Some(name) = text_arg(&a[0]) else {
                return Ok(ScalarValue::UInt32(None));
            };
            match name
                .parse::<u32>()
                .ok()
                .or_else(|| crate::query::pg_catalog::function_oid(&name))
            {
                Some(oid) => Ok(ScalarValue::UInt32(Some(oid))),
                None => Err(sql_error(SqlError::new(
                    code::UNDEFINED_FUNCTION,
                    format!("function \"{name}\" does not exist"),
                ))),
            }
        },
    ));
    // No extended statistics objects exist to describe.
    add(udf(
        "pg_get_statisticsobjdef_columns",
        &[1],
        text.clone(),
        Volatility::Stable,
        |_| Ok(ScalarValue::Utf8(None)),
    ));
    // The one database holds every table: its size is theirs (as pg_total_relation_size).
    let sc = s.clone();
    add(udf(
        "pg_database_size",
        &[1],
        ArrowType::Int64,
        Volatility::Volatile,
        move |_| {
            let oids: Vec<u32> = sc.engine.catalog.read().tables.keys().copied().collect();
            let total: usize = oids
                .into_iter()
                .map(|oid| relation_size(&sc, oid, "pg_total_relation_size"))
                .sum();
            Ok(ScalarValue::Int64(Some(total as i64)))
        },
    ));
    // A role's name by OID; PostgreSQL's text for an OID that names none.
    let sc = s.clone();
    add(udf(
        "pg_get_userbyid",
        &[1],
        text.clone(),
        Volatility::Stable,
        move |a| {
            let oid = match a[0].cast_to(&ArrowType::Int64) {
                Ok(ScalarValue::Int64(Some(oid))) => oid,
                _ => return Ok(ScalarValue::Utf8(None)),
            };
            let catalog = sc.engine.catalog.read();
            let name = u32::try_from(oid)
                .ok()
                .and_then(|oid| catalog.roles.get(&oid))
                .map_or_else(|| format!("unknown (OID={oid})"), |r| r.name.clone());
            Ok(ScalarValue::Utf8(Some(name)))
        },
    ));
    add(udf(
        "pg_encoding_to_char",
        &[1],
        text.clone(),
        Volatility::Stable,
        |_| Ok(ScalarValue::Utf8(Some("UTF8".into()))),
    ));
    let sc = s.clone();
    add(udf(
        "pg_table_is_visible",
        &[1],
        ArrowType::Boolean,
        Volatility::Stable,
        move |a| {
            Ok(ScalarValue::Boolean(
                int_arg(&a[0]).map(|oid| relation_is_visible(&sc, oid as Oid)),
            ))
        },
    ));
    // Shoal has no collations beyond the default, which every schema sees.
    add(udf(
        "pg_collation_is_visible",
        &[1],
        ArrowType::Boolean,
        Volatility::Stable,
        |a| Ok(ScalarValue::Boolean(int_arg(&a[0]).map(|_| true))),
    ));
    add(udf(
        "pg_type_is_visible",
        &[1],
        ArrowType::Boolean,
        Volatility::Stable,
        |_| Ok(ScalarValue::Boolean(Some(true))),
    ));
    // COMMENT ON's text: obj_description(oid, 'pg_class'), col_description(table, column).
    let sc = s.clone();
    add(udf(
        "obj_description",
        &[1, 2],
        text.clone(),
        Volatility::Stable,
        move |a| {
            let Some(oid) = int_arg(&a[0]) else {
                return Ok(ScalarValue::Utf8(None));
            };
            let class = match a.get(1).and_then(text_arg).as_deref() {
                Some("pg_class") => Some(shoal_storage::catalog_comments::PG_CLASS),
                Some("pg_namespace") => Some(shoal_storage::catalog_comments::PG_NAMESPACE),
                Some(_) => return Ok(ScalarValue::Utf8(None)),
                None => None,
            };
            let catalog = sc.engine.catalog.read();
            let comment = [
                shoal_storage::catalog_comments::PG_CLASS,
                shoal_storage::catalog_comments::PG_NAMESPACE,
            ]
            .into_iter()
            .filter(|c| class.is_none_or(|wanted| wanted == *c))
            .map(|c| (c, oid as u32, 0))
            .filter(|key| catalog.comment_target_exists(*key))
            .find_map(|key| catalog.comment(key).map(str::to_string));
            Ok(ScalarValue::Utf8(comment))
        },
    ));
    let sc = s.clone();
    add(udf(
        "col_description",
        &[2],
        text.clone(),
        Volatility::Stable,
        move |a| {
            let (Some(table), Some(column)) = (int_arg(&a[0]), int_arg(&a[1])) else {
                return Ok(ScalarValue::Utf8(None));
            };
            let key = (
                shoal_storage::catalog_comments::PG_CLASS,
                table as u32,
                column as i32,
            );
            let catalog = sc.engine.catalog.read();
            let comment = catalog
                .comment_target_exists(key)
                .then(|| catalog.comment(key).map(str::to_string))
                .flatten();
            Ok(ScalarValue::Utf8(comment))
        },
    ));
    add(udf(
        "shobj_description",
        &[2],
        text.clone(),
        Volatility::Stable,
        |_| Ok(ScalarValue::Utf8(None)),
    ));
    add(udf(
        "pg_get_viewdef",
        &[1, 2],
        text.clone(),
        Volatility::Stable,
        {
            let sc = s.clone();
            move |a| {
                let Some(oid) = int_arg(&a[0]) else {
                    return Ok(ScalarValue::Utf8(None));
                };
                let view = sc.engine.catalog.read().views.get(&(oid as u32)).cloned();
                Ok(ScalarValue::Utf8(view.map(|v| {
                    crate::query::view_definition::view_definition(&sc, &v)
                })))
            }
        },
    ));
    let sc = s.clone();
    add(udf(
        "current_setting",
        &[1, 2],
        text.clone(),
        Volatility::Stable,
        move |a| {
            let Some(name) = text_arg(&a[0]) else {
                return Ok(ScalarValue::Utf8(None));
            };
            let v = sc.settings.lock().get(&name.to_lowercase()).cloned();
            match v {
                Some(v) => Ok(ScalarValue::Utf8(Some(v))),
                None if matches!(a.get(1), Some(ScalarValue::Boolean(Some(true)))) => {
                    Ok(ScalarValue::Utf8(None))
                }
                None => Err(sql_error(SqlError::new(
                    code::UNDEFINED_OBJECT,
                    format!("unrecognized configuration parameter \"{name}\""),
                ))),
            }
        },
    ));
    let sc = s.clone();
    add(udf(
        "set_config",
        &[3],
        text.clone(),
        Volatility::Volatile,
        move |a| {
            let (Some(name), Some(value)) = (text_arg(&a[0]), text_arg(&a[1])) else {
                return Ok(ScalarValue::Utf8(None));
            };
            let local = matches!(a[2], ScalarValue::Boolean(Some(true)));
            let mut settings = sc.settings.lock();
            let (name, value) =
                crate::settings::checked_assignment(&name, &value, |n| settings.contains_key(n))
                    .map_err(sql_error)?;
            // Visible at once to current_setting() in the same statement; the session keeps
            // the change only if the statement succeeds.
            settings.insert(name.clone(), value.clone());
            sc.set_config_calls
                .lock()
                .push((name, value.clone(), local));
            Ok(ScalarValue::Utf8(Some(value)))
        },
    ));
    add(udf(
        "gen_random_uuid",
        &[0],
        text.clone(),
        Volatility::Volatile,
        |_| {
            Ok(ScalarValue::Utf8(Some(
                uuid::Uuid::new_v4().hyphenated().to_string(),
            )))
        },
    ));
    let sc = s.clone();
    add(udf(
        "txid_current",
        &[0],
        ArrowType::Int64,
        Volatility::Volatile,
        move |_| {
            Ok(ScalarValue::Int64(Some(
                sc.snapshot().txn as i64 & 0x7fff_ffff_ffff,
            )))
        },
    ));
}

/// The size functions over Shoal's memory estimates: a table's "relation" is its rows, its
/// indexes are counted apart, as PostgreSQL counts the heap and the index files apart.
fn relation_size(scope: &PlanScope, oid: Oid, which: &str) -> usize {
    let index_table = scope
        .engine
        .catalog
        .read()
        .indexes
        .get(&oid)
        .map(|i| i.table);
    let db = &scope.engine.db;
    if let Some(table_oid) = index_table {
        let bytes = db
            .table(table_oid as u64)
            .and_then(|t| t.index_memory_bytes(oid as u64))
            .unwrap_or(0);
        return if which == "pg_indexes_size" { 0 } else { bytes };
    }
    let Some(memory) = crate::query::shoal_memory::table_memory(db, oid) else {
        return 0;
    };
    match which {
        "pg_relation_size" | "pg_table_size" => memory.rows_bytes,
        "pg_indexes_size" => memory.index_bytes,
        _ => memory.total_bytes(),
    }
}

pub fn size_pretty(bytes: i64) -> String {
    let abs = bytes.unsigned_abs();
    if abs < 10 * 1024 {
        format!("{bytes} bytes")
    } else if abs < 10 * 1024 * 1024 {
        format!("{} kB", (bytes + 512) / 1024)
    } else if abs < 10 * 1024 * 1024 * 1024 {
        format!("{} MB", (bytes + 512 * 1024) / (1024 * 1024))
    } else {
        format!("{} GB", (bytes + 512 * 1024 * 1024) / (1024 * 1024 * 1024))
    }
}
