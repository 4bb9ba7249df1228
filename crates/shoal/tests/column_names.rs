//! Result column names, which .slt files cannot check: ORMs and drivers map rows to fields by
//! them. Each query's column names on Shoal must be those PostgreSQL 15 gives (see
//! `support::postgres`); where PostgreSQL is missing, the names written here stand for it.

mod support;

use support::postgres::Postgres;
use support::{connect_to, ShoalServer};
use tokio_postgres::Client;

/// Queries and the column names PostgreSQL 15 gives them.
const CASES: &[(&str, &[&str])] = &[
    (
        "SELECT true, interval '1 day', CAST(TIMESTAMP '2000-01-01' AS date), \
         CAST(1 AS int2)::float8, 1.5::numeric(8,3)::text",
        &["?column?", "interval", "date", "float8", "text"],
    ),
    (
        "SELECT CASE WHEN x > 0 THEN x END, CASE WHEN x > 0 THEN 1 ELSE x END, x::text, \
         x::int8::text FROM (VALUES (1)) t(x)",
        &["case", "x", "x", "x"],
    ),
    (
        "SELECT substr('abc', 1, 1), substring('abc', 1, 1), extract(year FROM date '2020-01-01'), \
         count(*), 1 + 1, array[1]",
        &["substr", "substring", "extract", "count", "?column?", "array"],
    ),
];

async fn names(client: &Client, sql: &str) -> Vec<String> {
    let statement = client
        .prepare(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    statement
        .columns()
        .iter()
        .map(|c| c.name().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn columns_are_named_as_in_postgresql() {
    let shoal = ShoalServer::start();
    let shoal = connect_to(&shoal.addr).await;
    let postgres = Postgres::start();
    let postgres = match &postgres {
        Some(p) => Some(connect_to(&p.addr).await),
        None => None,
    };
    for (sql, expected) in CASES {
        if let Some(postgres) = &postgres {
            assert_eq!(names(postgres, sql).await, *expected, "PostgreSQL: {sql}");
        }
        assert_eq!(names(&shoal, sql).await, *expected, "Shoal: {sql}");
    }
}
