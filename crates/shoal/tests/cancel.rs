//! CancelRequest over the wire: a running statement (simple and extended protocol) fails with
//! 57014 "canceling statement due to user request", the connection stays usable, and a
//! statement canceled inside a transaction block leaves the block aborted (25P02) until
//! ROLLBACK, as in PostgreSQL.

mod support;

use std::time::{Duration, Instant};

use support::{connect, ShoalServer};
use tokio_postgres::{Client, NoTls};

/// Long enough that only a cancel can end the statement within the test's patience.
const SLEEP_S: u32 = 30;
/// How long the statement runs before the cancel is sent.
const CANCEL_AFTER: Duration = Duration::from_millis(300);

fn sqlstate(e: &tokio_postgres::Error) -> String {
    e.code().map(|c| c.code().to_string()).unwrap_or_default()
}

/// Sends a CancelRequest for `client`'s running statement after `CANCEL_AFTER`.
fn cancel_soon(client: &Client) -> tokio::task::JoinHandle<()> {
    cancel_after(client, CANCEL_AFTER)
}

/// Sends a CancelRequest for `client`'s running statement after `delay`.
fn cancel_after(client: &Client, delay: Duration) -> tokio::task::JoinHandle<()> {
    let token = client.cancel_token();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        token
            .cancel_query(NoTls)
            .await
            .expect("send cancel request");
    })
}

fn assert_canceled(error: &tokio_postgres::Error, started: Instant) {
    assert_eq!(sqlstate(error), "57014", "{error:?}");
    let message = error.as_db_error().map(|d| d.message()).unwrap_or_default();
    assert_eq!(message, "canceling statement due to user request");
    assert!(
        started.elapsed() < Duration::from_secs(SLEEP_S as u64 / 2),
        "the cancel ended the statement early"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_request_ends_a_simple_query() {
    let server = ShoalServer::start();
    let client = connect(&server).await;
    let started = Instant::now();
    let cancel = cancel_soon(&client);
    let error = client
        .simple_query(&format!("SELECT pg_sleep({SLEEP_S})"))
        .await
        .expect_err("the statement is canceled");
    cancel.await.expect("cancel task");
    assert_canceled(&error, started);
    let one: i32 = client
        .query_one("SELECT 1", &[])
        .await
        .expect("still usable")
        .get(0);
    assert_eq!(one, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_request_aborts_the_block_in_extended_protocol() {
    let server = ShoalServer::start();
    let client = connect(&server).await;
    client
        .batch_execute(
            "CREATE TABLE c (id integer PRIMARY KEY, v integer); INSERT INTO c VALUES (1, 0)",
        )
        .await
        .expect("set up");
    client.batch_execute("BEGIN").await.expect("begin");
    client
        .execute("UPDATE c SET v = 1 WHERE id = 1", &[])
        .await
        .expect("update");
    let started = Instant::now();
    let cancel = cancel_soon(&client);
    let sleep = format!("SELECT length(pg_sleep({SLEEP_S})::text)");
    let error = client
        .query(&sleep, &[])
        .await
        .expect_err("the statement is canceled");
    cancel.await.expect("cancel task");
    assert_canceled(&error, started);
    let error = client.query("SELECT 1", &[]).await.expect_err("aborted");
    assert_eq!(sqlstate(&error), "25P02", "{error:?}");
    client.batch_execute("ROLLBACK").await.expect("rollback");
    let v: i32 = client
        .query_one("SELECT v FROM c WHERE id = 1", &[])
        .await
        .expect("select")
        .get(0);
    assert_eq!(v, 0, "the rollback undid the update");
}

/// A long INSERT ... SELECT into a row table: writing rows never waits on anything, so the
/// statement yields to its connection thread every so many rows, which is also when it sees
/// the cancel. It ends with 57014 long before its millions of rows are in, and leaves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_request_ends_a_long_insert_into_a_row_table() {
    const ROWS: u32 = 3_000_000;
    let server = ShoalServer::start();
    let client = connect(&server).await;
    client
        .batch_execute("CREATE TABLE bulk (id integer PRIMARY KEY, v bigint)")
        .await
        .expect("set up");
    let started = Instant::now();
    // Past the source query, into the rows being written (a debug build writes a few hundred
    // thousand rows a second).
    let cancel = cancel_after(&client, Duration::from_millis(1500));
    let error = client
        .simple_query(&format!(
            "INSERT INTO bulk SELECT g, g * 2 FROM generate_series(1, {ROWS}) g"
        ))
        .await
        .expect_err("the statement is canceled");
    cancel.await.expect("cancel task");
    assert_eq!(sqlstate(&error), "57014", "{error:?}");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "the cancel took {:?} to end the statement",
        started.elapsed()
    );
    let count: i64 = client
        .query_one("SELECT count(*) FROM bulk", &[])
        .await
        .expect("still usable")
        .get(0);
    assert_eq!(count, 0, "a canceled statement changes nothing");
}
