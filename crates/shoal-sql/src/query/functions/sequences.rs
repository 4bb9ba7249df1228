//! Sequence functions: `nextval`, `currval`, `setval` and `pg_get_serial_sequence`, and the
//! lookups DML and defaults use to draw from a sequence.

use super::*;

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

/// As PostgreSQL: a sequence does not advance in a read-only transaction (a standby's
/// transactions are all read-only; its sequences follow the primary's log).
fn refuse_if_read_only(scope: &PlanScope, function: &str) -> Result<(), SqlError> {
    let read_only = scope.engine.in_recovery()
        || scope
            .settings
            .lock()
            .get("transaction_read_only")
            .is_some_and(|v| v == "on");
    if read_only {
        return Err(SqlError::new(
            code::READ_ONLY_SQL_TRANSACTION,
            format!("cannot execute {function}() in a read-only transaction"),
        ));
    }
    Ok(())
}

/// nextval of a resolved sequence: advances it, logs it and remembers it for currval.
pub fn next_sequence_value(scope: &PlanScope, seq: &SequenceDef) -> Result<i64, SqlError> {
    refuse_if_read_only(scope, "nextval")?;
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

/// Registers them through `add`.
pub(super) fn register(add: &mut impl FnMut(ScalarUDF), s: &Arc<PlanScope>) {
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
            refuse_if_read_only(&sc, "setval").map_err(sql_error)?;
            seq.set_value(value, is_called);
            sc.engine.log_sequence(&seq);
            if is_called {
                sc.sequence_last.lock().insert(oid, value);
            }
            Ok(ScalarValue::Int64(Some(value)))
        },
    ));
}
