//! Who blocks whom: a session waiting for a row another transaction updated is listed by
//! `pg_blocking_pids` with the holder's pid, and pg_locks shows the wait as PostgreSQL does (a
//! ShareLock not granted on the holder's transactionid, which the holder holds as an
//! ExclusiveLock); the same for a wait on an advisory lock. When the holder ends, the wait and
//! its rows go.

mod support;

use std::time::Duration;

use support::{connect, ShoalServer};

async fn pid(client: &tokio_postgres::Client) -> i32 {
    client
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0)
}

async fn blocking(observer: &tokio_postgres::Client, waiter: i32) -> Vec<i32> {
    observer
        .query_one("SELECT pg_blocking_pids($1::int4)", &[&waiter])
        .await
        .unwrap()
        .get(0)
}

/// Polls until `waiter` is blocked (its wait starts on another connection's task).
async fn wait_until_blocked(observer: &tokio_postgres::Client, waiter: i32) -> Vec<i32> {
    for _ in 0..200 {
        let pids = blocking(observer, waiter).await;
        if !pids.is_empty() {
            return pids;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("session {waiter} never waited");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_lock_and_advisory_lock_waits_name_their_blockers() {
    let server = ShoalServer::start();
    let holder = connect(&server).await;
    let waiter = connect(&server).await;
    let observer = connect(&server).await;
    let (holder_pid, waiter_pid) = (pid(&holder).await, pid(&waiter).await);
    holder
        .batch_execute("CREATE TABLE lw (id int PRIMARY KEY, v int); INSERT INTO lw VALUES (1, 0)")
        .await
        .unwrap();
    holder
        .batch_execute("BEGIN; UPDATE lw SET v = 1 WHERE id = 1")
        .await
        .unwrap();
    assert_eq!(blocking(&observer, waiter_pid).await, Vec::<i32>::new());
    let update = tokio::spawn(async move {
        waiter
            .batch_execute("UPDATE lw SET v = 2 WHERE id = 1")
            .await
            .unwrap();
        waiter
    });
    assert_eq!(
        wait_until_blocked(&observer, waiter_pid).await,
        vec![holder_pid]
    );
    let rows = observer
        .query(
            "SELECT pid, mode, granted, transactionid FROM pg_locks
             WHERE locktype = 'transactionid' AND pid IN ($1, $2)",
            &[&holder_pid, &waiter_pid],
        )
        .await
        .unwrap();
    let locks: Vec<(i32, String, bool, String)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    let waited = locks
        .iter()
        .find(|l| l.0 == waiter_pid && !l.2)
        .unwrap_or_else(|| panic!("the wait: {locks:?}"));
    assert_eq!(waited.1, "ShareLock");
    assert!(
        locks
            .iter()
            .any(|l| l.0 == holder_pid && l.1 == "ExclusiveLock" && l.2 && l.3 == waited.3),
        "the holder holds the transaction lock waited for: {locks:?}"
    );

    holder.batch_execute("COMMIT").await.unwrap();
    let waiter = update.await.unwrap();
    assert_eq!(blocking(&observer, waiter_pid).await, Vec::<i32>::new());
    let v: i32 = observer
        .query_one("SELECT v FROM lw WHERE id = 1", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(v, 2);

    // An advisory lock's waiter is blocked by its holder.
    holder
        .batch_execute("SELECT pg_advisory_lock(42)")
        .await
        .unwrap();
    let lock = tokio::spawn(async move {
        waiter
            .batch_execute("SELECT pg_advisory_lock(42)")
            .await
            .unwrap();
        waiter
    });
    assert_eq!(
        wait_until_blocked(&observer, waiter_pid).await,
        vec![holder_pid]
    );
    holder
        .batch_execute("SELECT pg_advisory_unlock(42)")
        .await
        .unwrap();
    let _waiter = lock.await.unwrap();
    assert_eq!(blocking(&observer, waiter_pid).await, Vec::<i32>::new());
}
