//! The extension's objects, found in the schema it was created in: the views
//! `pg_stat_statements` (PostgreSQL 15's columns; the planning, block, WAL and JIT counters
//! are zero, as Shoal has no such costs per statement) and `pg_stat_statements_info`, and the
//! function `pg_stat_statements_reset(userid, dbid, queryid)`.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType as ArrowType, TimeUnit};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::datasource::TableProvider;
use datafusion::logical_expr::{ScalarUDF, Signature, TypeSignature, Volatility};

use super::EXTENSION;
use crate::error::{code, SqlError};
use crate::query::functions::sql_error;
use crate::query::pg_catalog::{b, i64v, live_view_of, o, s, TableBuilder, DATABASE_OID};
use crate::query::scope::PlanScope;

/// The extension's view `name` in `schema`, if the extension is installed there.
pub fn table(scope: &Arc<PlanScope>, schema: &str, name: &str) -> Option<Arc<dyn TableProvider>> {
    if !matches!(name, "pg_stat_statements" | "pg_stat_statements_info") {
        return None;
    }
    let installed_here = scope
        .engine
        .catalog
        .read()
        .extension(EXTENSION)
        .is_some_and(|e| e.schema == schema);
    if !installed_here {
        return None;
    }
    let scope = scope.clone();
    Some(match name {
        "pg_stat_statements" => {
            live_view_of(statements(None).schema(), move || statements(Some(&scope)))
        }
        _ => live_view_of(info(None).schema(), move || info(Some(&scope))),
    })
}

const COUNTERS: &[&str] = &[
    "shared_blks_hit",
    "shared_blks_read",
    "shared_blks_dirtied",
    "shared_blks_written",
    "local_blks_hit",
    "local_blks_read",
    "local_blks_dirtied",
    "local_blks_written",
    "temp_blks_read",
    "temp_blks_written",
];

const IO_TIMES: &[&str] = &[
    "blk_read_time",
    "blk_write_time",
    "temp_blk_read_time",
    "temp_blk_write_time",
];

const JIT: &[(&str, bool)] = &[
    ("jit_functions", false),
    ("jit_generation_time", true),
    ("jit_inlining_count", false),
    ("jit_inlining_time", true),
    ("jit_optimization_count", false),
    ("jit_optimization_time", true),
    ("jit_emission_count", false),
    ("jit_emission_time", true),
];

fn f64v(v: f64) -> ScalarValue {
    ScalarValue::Float64(Some(v))
}

/// The view's rows; with no scope, only its columns.
fn statements(scope: Option<&PlanScope>) -> Arc<dyn TableProvider> {
    let (f8, i8) = (ArrowType::Float64, ArrowType::Int64);
    let named = |n: &str, t: &ArrowType| (n.to_string(), t.clone());
    let mut columns: Vec<(String, ArrowType)> = vec![
        named("userid", &ArrowType::UInt32),
        named("dbid", &ArrowType::UInt32),
        named("toplevel", &ArrowType::Boolean),
        named("queryid", &i8),
        named("query", &ArrowType::Utf8),
        named("plans", &i8),
    ];
    for stat in ["total", "min", "max", "mean", "stddev"] {
        columns.push((format!("{stat}_plan_time"), f8.clone()));
    }
    columns.push(named("calls", &i8));
    for stat in ["total", "min", "max", "mean", "stddev"] {
        columns.push((format!("{stat}_exec_time"), f8.clone()));
    }
    columns.push(named("rows", &i8));
    columns.extend(COUNTERS.iter().map(|c| named(c, &i8)));
    columns.extend(IO_TIMES.iter().map(|c| named(c, &f8)));
    columns.push(named("wal_records", &i8));
    columns.push(named("wal_fpi", &i8));
    // numeric, as Shoal's numeric columns are carried.
    columns.push(named("wal_bytes", &ArrowType::LargeBinary));
    columns.extend(
        JIT.iter()
            .map(|(c, time)| named(c, if *time { &f8 } else { &i8 })),
    );
    let columns: Vec<(&str, ArrowType)> = columns
        .iter()
        .map(|(n, t)| (n.as_str(), t.clone()))
        .collect();
    let mut t = TableBuilder::new(&columns);
    let Some(scope) = scope else {
        return t.build();
    };
    // Other roles' statements are shown without their text to roles that are not
    // superusers, as PostgreSQL shows them to roles without pg_read_all_stats.
    let (role, superuser) = {
        let catalog = scope.engine.catalog.read();
        catalog
            .role_named(&scope.current_role())
            .map_or((0, false), |r| (r.oid, r.superuser))
    };
    let zero = || i64v(0);
    let mut entries = scope.engine.statement_stats.entries();
    entries.sort_by(|a, b| a.1.query.cmp(&b.1.query));
    for (key, e) in entries {
        let visible = superuser || key.userid == role;
        let mut row = vec![
            o(key.userid),
            o(DATABASE_OID),
            b(key.toplevel),
            match visible {
                true => i64v(key.queryid),
                false => ScalarValue::Int64(None),
            },
            s(if visible {
                &e.query
            } else {
                "<insufficient privilege>"
            }),
            zero(),
        ];
        row.extend((0..5).map(|_| f64v(0.0)));
        row.push(i64v(e.calls));
        row.extend([e.total_ms, e.min_ms, e.max_ms, e.mean_ms, e.stddev_ms()].map(f64v));
        row.push(i64v(e.rows));
        row.extend(COUNTERS.iter().map(|_| zero()));
        row.extend(IO_TIMES.iter().map(|_| f64v(0.0)));
        row.push(zero());
        row.push(zero());
        row.push(crate::numeric::scalar(Some(
            &shoal_numeric::Numeric::from_i64(0),
        )));
        row.extend(JIT.iter().map(|(_, time)| match time {
            true => f64v(0.0),
            false => zero(),
        }));
        t.row(row);
    }
    t.build()
}

fn info(scope: Option<&PlanScope>) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("dealloc", ArrowType::Int64),
        (
            "stats_reset",
            ArrowType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        ),
    ]);
    if let Some(scope) = scope {
        let (dealloc, reset) = scope.engine.statement_stats.info();
        t.row(vec![
            i64v(dealloc),
            ScalarValue::TimestampMicrosecond(Some(reset.timestamp_micros()), Some("UTC".into())),
        ]);
    }
    t.build()
}

/// pg_stat_statements_reset([userid [, dbid [, queryid]]]): superusers only, as PostgreSQL
/// grants it to none but them by default.
pub fn reset_function(scope: &Arc<PlanScope>) -> ScalarUDF {
    let scope = scope.clone();
    let signature = Signature::one_of(
        vec![
            TypeSignature::Nullary,
            TypeSignature::Any(1),
            TypeSignature::Any(2),
            TypeSignature::Any(3),
        ],
        Volatility::Volatile,
    );
    crate::query::functions::void_udf_with(
        "pg_stat_statements_reset",
        signature,
        move |args| -> DfResult<()> {
            if scope.engine.catalog.read().extension(EXTENSION).is_none() {
                return Err(sql_error(
                    SqlError::new(
                        code::UNDEFINED_FUNCTION,
                        "function pg_stat_statements_reset() does not exist",
                    )
                    .with_hint("Run CREATE EXTENSION pg_stat_statements first."),
                ));
            }
            if !scope.current_role_is_superuser() {
                return Err(sql_error(SqlError::new(
                    code::INSUFFICIENT_PRIVILEGE,
                    "permission denied for function pg_stat_statements_reset",
                )));
            }
            let arg = |i: usize| -> DfResult<i64> {
                match args
                    .get(i)
                    .map(|a| a.cast_to(&ArrowType::Int64))
                    .transpose()?
                {
                    Some(ScalarValue::Int64(Some(v))) => Ok(v),
                    _ => Ok(0),
                }
            };
            scope
                .engine
                .statement_stats
                .reset(arg(0)? as u32, arg(1)? as u32, arg(2)?);
            Ok(())
        },
    )
}
