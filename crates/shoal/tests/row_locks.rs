//! A point UPDATE that finds its row locked by another transaction waits for it, then applies
//! its SET to the right version, as in PostgreSQL's READ COMMITTED: to the version it first
//! read when the holder rolls back, and to the holder's new version when it commits. Run over
//! the wire with prepared statements, the fast path's way (`shoal_sql::fastpath`).

mod support;

use std::time::Duration;

use support::{connect, ShoalServer};
use tokio_postgres::Client;

/// How long the waiting UPDATE gets to finish on its own before the holder ends: it must not.
const STILL_WAITING_AFTER: Duration = Duration::from_millis(300);

async fn row(client: &Client) -> (i32, String) {
    let row = client
        .query_one("SELECT n, s FROM counters WHERE id = 1", &[])
        .await
        .expect("read the row");
    (row.get(0), row.get(1))
}

/// Starts `UPDATE counters SET n = n + 1, s = $1 WHERE id = 1` on `waiter` while `holder`'s
/// open transaction has the row locked, checks that it waits, ends the holder's transaction
/// with `end`, and returns the waiter's row count.
async fn update_behind(holder: &Client, waiter: Client, s: &str, end: &str) -> (Client, u64) {
    let s = s.to_string();
    let update = tokio::spawn(async move {
        let n = waiter
            .execute("UPDATE counters SET n = n + 1, s = $1 WHERE id = 1", &[&s])
            .await
            .expect("the waiting update");
        (waiter, n)
    });
    tokio::time::sleep(STILL_WAITING_AFTER).await;
    assert!(
        !update.is_finished(),
        "the update should wait for the row's lock"
    );
    holder.batch_execute(end).await.expect("end the holder");
    update.await.expect("update task")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_point_update_applies_to_the_version_left_by_the_holder() {
    let server = ShoalServer::start();
    let holder = connect(&server).await;
    let waiter = connect(&server).await;
    holder
        .batch_execute(
            "CREATE TABLE counters (id int PRIMARY KEY, n int NOT NULL, s text NOT NULL);
             INSERT INTO counters VALUES (1, 10, 'start');",
        )
        .await
        .expect("set up");
    let hold = "UPDATE counters SET n = n + 100, s = 'holder' WHERE id = 1";

    // The holder rolls back: the waiter's SET applies to the version it read first, once.
    holder.batch_execute("BEGIN").await.expect("begin");
    holder.execute(hold, &[]).await.expect("lock the row");
    let (waiter, updated) = update_behind(&holder, waiter, "after rollback", "ROLLBACK").await;
    assert_eq!(updated, 1);
    assert_eq!(row(&holder).await, (11, "after rollback".to_string()));

    // The holder commits: the waiter's SET applies on top of the holder's version.
    holder.batch_execute("BEGIN").await.expect("begin");
    holder.execute(hold, &[]).await.expect("lock the row");
    let (waiter, updated) = update_behind(&holder, waiter, "after commit", "COMMIT").await;
    assert_eq!(updated, 1);
    assert_eq!(row(&waiter).await, (112, "after commit".to_string()));
}

/// SELECT ... FOR UPDATE over a join written in parentheses, waiting for a row a concurrent
/// transaction updates: once that commits, the row is locked and the result keeps the join's
/// columns (the re-check over the newest version is for single-table queries only; it once
/// took `FROM (a JOIN b ...)` for one table and failed on b's columns).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locking_read_over_a_parenthesised_join_waits_and_keeps_its_columns() {
    let server = ShoalServer::start();
    let holder = connect(&server).await;
    let waiter = connect(&server).await;
    holder
        .batch_execute(
            "CREATE TABLE counters (id int PRIMARY KEY, n int NOT NULL, s text NOT NULL);
             CREATE TABLE notes (counter_id int, note text);
             INSERT INTO counters VALUES (1, 10, 'start');
             INSERT INTO notes VALUES (1, 'first');",
        )
        .await
        .expect("set up");
    holder
        .batch_execute("BEGIN; UPDATE counters SET n = 11 WHERE id = 1;")
        .await
        .expect("update");
    let read = tokio::spawn(async move {
        let rows = waiter
            .query(
                "SELECT c.n, x.note FROM (counters c JOIN notes x ON x.counter_id = c.id) \
                 FOR UPDATE",
                &[],
            )
            .await;
        (waiter, rows)
    });
    tokio::time::sleep(STILL_WAITING_AFTER).await;
    assert!(!read.is_finished(), "the read should wait for the row lock");
    holder.batch_execute("COMMIT").await.expect("commit");
    let (_, rows) = read.await.expect("read task");
    let rows = rows.expect("the locking read");
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0].get::<_, i32>(0),
        10,
        "as the statement's snapshot saw it"
    );
    assert_eq!(rows[0].get::<_, &str>(1), "first");
}

/// TPC-C's Delivery takes the oldest new order with `ORDER BY ... LIMIT 1 FOR UPDATE`. When a
/// concurrent transaction deletes that row, PostgreSQL locks the next one instead (its LockRows
/// runs below the Limit): the waiting read must return the next order, not nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locking_read_with_limit_takes_the_next_row_when_its_row_is_deleted() {
    let server = ShoalServer::start();
    let holder = connect(&server).await;
    let waiter = connect(&server).await;
    holder
        .batch_execute(
            "CREATE TABLE new_order (w int, d int, o int, PRIMARY KEY (w, d, o));
             INSERT INTO new_order VALUES (1, 1, 1), (1, 1, 2), (1, 1, 3);",
        )
        .await
        .expect("set up");
    let oldest = "SELECT o FROM new_order WHERE w = 1 AND d = 1 ORDER BY o LIMIT 1 FOR UPDATE";
    holder
        .batch_execute("BEGIN; DELETE FROM new_order WHERE w = 1 AND d = 1 AND o = 1;")
        .await
        .expect("delete the oldest");
    let read = tokio::spawn(async move {
        let rows = waiter.query(oldest, &[]).await;
        (waiter, rows)
    });
    tokio::time::sleep(STILL_WAITING_AFTER).await;
    assert!(!read.is_finished(), "the read should wait for the row lock");
    holder.batch_execute("COMMIT").await.expect("commit");
    let (waiter, rows) = read.await.expect("read task");
    let rows = rows.expect("the locking read");
    assert_eq!(rows.len(), 1, "the next order, in place of the deleted one");
    assert_eq!(rows[0].get::<_, i32>(0), 2);
    // With an OFFSET the rows before the window are locked too, and the window is returned.
    let rows = waiter
        .query(
            "SELECT o FROM new_order WHERE w = 1 ORDER BY o LIMIT 1 OFFSET 1 FOR UPDATE",
            &[],
        )
        .await
        .expect("offset");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<_, i32>(0), 3);
}

/// A prepared point read that locks its row (the fast path's `SELECT ... FOR UPDATE`) waits for
/// the row's holder and, once that commits, returns the holder's version, as PostgreSQL's READ
/// COMMITTED does; with NOWAIT it fails with 55P03 at once, and with SKIP LOCKED it returns no
/// row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_point_read_for_update_waits_for_the_holder_and_returns_its_version() {
    let server = ShoalServer::start();
    let holder = connect(&server).await;
    let waiter = connect(&server).await;
    holder
        .batch_execute(
            "CREATE TABLE counters (id int PRIMARY KEY, n int NOT NULL, s text NOT NULL);
             INSERT INTO counters VALUES (1, 10, 'start');",
        )
        .await
        .expect("set up");
    holder.batch_execute("BEGIN").await.expect("begin");
    holder
        .execute("UPDATE counters SET n = 20, s = 'holder' WHERE id = 1", &[])
        .await
        .expect("lock the row");

    let nowait = waiter
        .query(
            "SELECT n FROM counters WHERE id = $1 FOR UPDATE NOWAIT",
            &[&1i32],
        )
        .await
        .expect_err("NOWAIT on a locked row");
    assert_eq!(
        nowait.code(),
        Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE)
    );
    let skipped = waiter
        .query(
            "SELECT n FROM counters WHERE id = $1 FOR UPDATE SKIP LOCKED",
            &[&1i32],
        )
        .await
        .expect("SKIP LOCKED");
    assert!(skipped.is_empty());

    let read = tokio::spawn(async move {
        waiter.batch_execute("BEGIN").await.expect("begin");
        let row = waiter
            .query_one(
                "SELECT n, s FROM counters WHERE id = $1 FOR UPDATE",
                &[&1i32],
            )
            .await
            .expect("the waiting locking read");
        let seen: (i32, String) = (row.get(0), row.get(1));
        waiter.batch_execute("COMMIT").await.expect("commit");
        seen
    });
    tokio::time::sleep(STILL_WAITING_AFTER).await;
    assert!(!read.is_finished(), "the locking read should wait");
    holder.batch_execute("COMMIT").await.expect("commit");
    assert_eq!(read.await.expect("read task"), (20, "holder".to_string()));
}

/// A parameter the client declares with another type than the column's means what PostgreSQL
/// makes of it: an int key compared with a float8 1.5 finds no row (converting 1.5 to the key's
/// type would find row 2), and an int8 added to a numeric column adds exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_parameter_types_keep_their_meaning_on_point_statements() {
    use tokio_postgres::types::Type;
    let server = ShoalServer::start();
    let client = connect(&server).await;
    client
        .batch_execute(
            "CREATE TABLE accounts (id int PRIMARY KEY, bal numeric(12,2) NOT NULL);
             INSERT INTO accounts VALUES (1, 0.50), (2, 7.25);",
        )
        .await
        .expect("set up");
    let by_float = client
        .prepare_typed(
            "SELECT bal::text FROM accounts WHERE id = $1",
            &[Type::FLOAT8],
        )
        .await
        .expect("prepare");
    assert!(client
        .query(&by_float, &[&1.5f64])
        .await
        .unwrap()
        .is_empty());
    let row = client.query_one(&by_float, &[&2.0f64]).await.unwrap();
    assert_eq!(row.get::<_, String>(0), "7.25");

    let add = client
        .prepare_typed(
            "UPDATE accounts SET bal = bal + $1 WHERE id = $2",
            &[Type::INT8, Type::INT4],
        )
        .await
        .expect("prepare");
    assert_eq!(client.execute(&add, &[&-3i64, &1i32]).await.unwrap(), 1);
    let row = client
        .query_one("SELECT bal::text FROM accounts WHERE id = 1", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "-2.50");
}

/// How long the first waiter may take to get the row once its holder commits.
const FIRST_WAITER_GETS_THE_ROW: Duration = Duration::from_secs(10);

/// Starts `BEGIN; <locking statement>` on `client` in a task that keeps the transaction open
/// and hands the client back with what the statement returned.
fn lock_in_transaction(
    client: Client,
    sql: &'static str,
) -> tokio::task::JoinHandle<(Client, Vec<i32>)> {
    tokio::spawn(async move {
        client.batch_execute("BEGIN").await.expect("begin");
        let rows = client.query(sql, &[]).await.expect("the waiting statement");
        (client, rows.iter().map(|r| r.get(0)).collect())
    })
}

/// Transactions waiting for one row's lock get it in the order they came, as PostgreSQL's
/// (its tuple lock queues them): when the holder commits, the first waiter takes the row and
/// the second goes on waiting, now for the first. Otherwise the lock goes to whichever wakes
/// first, and a busy job queue can starve a worker. Each round runs one way of locking: a
/// point read (the fast path), a general locking read, and an UPDATE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_for_a_row_get_it_in_the_order_they_came() {
    let server = ShoalServer::start();
    let holder = connect(&server).await;
    holder
        .batch_execute(
            "CREATE TABLE jobs (id int PRIMARY KEY, n int NOT NULL);
             INSERT INTO jobs VALUES (1, 0), (2, 0);",
        )
        .await
        .expect("set up");
    let mut first = connect(&server).await;
    let mut second = connect(&server).await;
    let rounds: [&'static str; 3] = [
        "SELECT n FROM jobs WHERE id = 1 FOR UPDATE",
        "SELECT n FROM jobs WHERE id + 0 = 1 AND n >= 0 FOR UPDATE",
        "UPDATE jobs SET n = n + 1 WHERE id = 1 RETURNING n",
    ];
    for sql in rounds {
        holder
            .batch_execute("BEGIN; UPDATE jobs SET n = n + 1 WHERE id = 1")
            .await
            .expect("lock the row");
        let first_task = lock_in_transaction(first, sql);
        tokio::time::sleep(STILL_WAITING_AFTER).await;
        let second_task = lock_in_transaction(second, sql);
        tokio::time::sleep(STILL_WAITING_AFTER).await;
        assert!(!first_task.is_finished(), "{sql}: the first waits");
        assert!(!second_task.is_finished(), "{sql}: the second waits");
        holder.batch_execute("COMMIT").await.expect("commit");
        // Were the lock given to the second, the first would wait for it for good.
        let (client, _) = tokio::time::timeout(FIRST_WAITER_GETS_THE_ROW, first_task)
            .await
            .unwrap_or_else(|_| panic!("{sql}: the second waiter took the row before the first"))
            .expect("first task");
        first = client;
        tokio::time::sleep(STILL_WAITING_AFTER).await;
        assert!(
            !second_task.is_finished(),
            "{sql}: the second waits for the first, which came before it"
        );
        first.batch_execute("COMMIT").await.expect("commit");
        let (client, _) = second_task.await.expect("second task");
        second = client;
        second.batch_execute("COMMIT").await.expect("commit");
    }
    let n: i32 = holder
        .query_one("SELECT n FROM jobs WHERE id = 1", &[])
        .await
        .expect("read")
        .get(0);
    assert_eq!(n, 5, "three holders' updates and the last round's two");
}

/// `SELECT * ... FOR SHARE OF t` that waits for an update returns the updated row, all its
/// columns (the re-check of a changed row projects the wildcard too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_wildcard_locking_read_returns_the_updated_row() {
    let server = ShoalServer::start();
    let holder = connect(&server).await;
    let waiter = connect(&server).await;
    holder
        .batch_execute(
            "CREATE TABLE seats (id int PRIMARY KEY, label text, taken bool);
             INSERT INTO seats VALUES (1, 'A1', false), (2, 'A2', false);",
        )
        .await
        .expect("set up");
    holder
        .batch_execute("BEGIN; UPDATE seats SET taken = true WHERE id = 1;")
        .await
        .expect("update");
    let read = tokio::spawn(async move {
        let rows = waiter
            .query(
                "SELECT * FROM seats WHERE label = $1 ORDER BY seats.id LIMIT 1 FOR SHARE OF seats",
                &[&"A1"],
            )
            .await;
        (waiter, rows)
    });
    tokio::time::sleep(STILL_WAITING_AFTER).await;
    assert!(!read.is_finished(), "the read should wait for the row lock");
    holder.batch_execute("COMMIT").await.expect("commit");
    let (_, rows) = read.await.expect("read task");
    let rows = rows.expect("the locking read");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<_, i32>(0), 1);
    assert_eq!(rows[0].get::<_, String>(1), "A1");
    assert!(rows[0].get::<_, bool>(2), "the holder's committed version");
}
