//! Functions that describe the catalog's objects and the server for clients and tools:
//! relation sizes, `format_type`, `pg_get_indexdef` / `_constraintdef` / `_expr` /
//! `_viewdef`, the `*_is_visible` tests, comments (`obj_description`), role names, settings
//! (`current_setting`, `set_config`) and a few more that psql and drivers call.

use super::*;

/// Registers them through `add`.
pub(super) fn register(add: &mut impl FnMut(ScalarUDF), s: &Arc<PlanScope>) {
    let text = ArrowType::Utf8;
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
    // Every function pg_proc lists is visible: built-ins are in pg_catalog, and user
    // routines are looked up through the search path.
    add(udf(
        "pg_function_is_visible",
        &[1],
        ArrowType::Boolean,
        Volatility::Stable,
        |_| Ok(ScalarValue::Boolean(Some(true))),
    ));
    // psql's `\df` and `\sf`: a user routine's signature and definition, by OID (or by a
    // regproc's name, which Shoal keeps as text). Built-in functions have none to show.
    type Describer = fn(&shoal_storage::catalog_functions::RoutineDef) -> String;
    let describers: [(&str, Describer); 4] = [
        (
            "pg_get_function_result",
            crate::routines::describe::result_type,
        ),
        (
            "pg_get_function_arguments",
            crate::routines::describe::arguments,
        ),
        (
            "pg_get_function_identity_arguments",
            crate::routines::describe::identity_arguments,
        ),
        ("pg_get_functiondef", crate::routines::describe::functiondef),
    ];
    for (name, describe) in describers {
        let sc = s.clone();
        add(udf(
            name,
            &[1],
            text.clone(),
            Volatility::Stable,
            move |a| {
                let Some(key) = text_arg(&a[0]) else {
                    return Ok(ScalarValue::Utf8(None));
                };
                let schemas = sc.lookup_schemas();
                let catalog = sc.engine.catalog.read();
                let routine = crate::routines::describe::find(&catalog, &schemas, &key);
                Ok(ScalarValue::Utf8(routine.map(|r| describe(&r))))
            },
        ));
    }
    let st = s.clone();
    add(udf(
        "pg_get_triggerdef",
        &[1, 2],
        text.clone(),
        Volatility::Stable,
        move |a| {
            let Some(oid) = int_arg(&a[0]) else {
                return Ok(ScalarValue::Utf8(None));
            };
            let pretty = matches!(a.get(1), Some(ScalarValue::Boolean(Some(true))));
            let catalog = st.engine.catalog.read();
            Ok(ScalarValue::Utf8(
                crate::query::pg_catalog::trigger_definition(&catalog, oid as u32, pretty),
            ))
        },
    ));
    // A regproc (held by name in Shoal's catalogs) cast to oid: the function's OID.
    let sr = s.clone();
    add(udf(
        "shoal_regproc_oid",
        &[1],
        ArrowType::UInt32,
        Volatility::Stable,
        move |a| {
            let Some(name) = text_arg(&a[0]) else {
                return Ok(ScalarValue::UInt32(None));
            };
            let user = {
                let schemas = sr.lookup_schemas();
                let catalog = sr.engine.catalog.read();
                crate::routines::describe::find(&catalog, &schemas, &name).map(|r| r.oid)
            };
            match name
                .parse::<u32>()
                .ok()
                .or(user)
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
