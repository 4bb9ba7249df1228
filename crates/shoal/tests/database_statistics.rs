//! pg_stat_database's session and transaction counters, which depend on how clients behave:
//! sessions that end normally, vanish, are ended by a FATAL error or by pg_terminate_backend,
//! transactions that commit or roll back, and deadlocks.

mod support;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use support::{connect, connect_with, startup_message, ShoalServer};

#[derive(Debug, Clone, Copy, PartialEq)]
struct Counters {
    xact_commit: i64,
    xact_rollback: i64,
    deadlocks: i64,
    sessions: i64,
    sessions_abandoned: i64,
    sessions_fatal: i64,
    sessions_killed: i64,
}

async fn counters(client: &tokio_postgres::Client) -> Counters {
    let row = client
        .query_one(
            "SELECT xact_commit, xact_rollback, deadlocks, sessions, sessions_abandoned, \
             sessions_fatal, sessions_killed FROM pg_stat_database WHERE datname = 'postgres'",
            &[],
        )
        .await
        .unwrap();
    Counters {
        xact_commit: row.get(0),
        xact_rollback: row.get(1),
        deadlocks: row.get(2),
        sessions: row.get(3),
        sessions_abandoned: row.get(4),
        sessions_fatal: row.get(5),
        sessions_killed: row.get(6),
    }
}

/// Waits until `done` holds of the counters: a session's end is counted once the server has
/// noticed it.
async fn wait_for(client: &tokio_postgres::Client, done: impl Fn(&Counters) -> bool) -> Counters {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = counters(client).await;
        if done(&now) {
            return now;
        }
        assert!(Instant::now() < deadline, "counters stayed at {now:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_transactions_and_deadlocks_are_counted() {
    let server = ShoalServer::start();
    let watcher = connect(&server).await;
    let start = counters(&watcher).await;
    assert!(start.sessions >= 1);

    // Transactions: two commits and a rollback.
    watcher
        .batch_execute("CREATE TABLE t (id int PRIMARY KEY, v int)")
        .await
        .unwrap();
    watcher
        .batch_execute("INSERT INTO t VALUES (1, 0), (2, 0)")
        .await
        .unwrap();
    watcher
        .batch_execute("BEGIN; SELECT 1; ROLLBACK")
        .await
        .unwrap();
    let after = counters(&watcher).await;
    // The counting query itself commits too.
    assert_eq!(after.xact_commit - start.xact_commit, 3);
    assert_eq!(after.xact_rollback - start.xact_rollback, 1);

    // A client that says goodbye (a Terminate message) ends normally; one whose connection
    // drops without it abandons its session.
    raw_session(&server, true);
    raw_session(&server, false);
    // An idle timeout ends a session with a FATAL error.
    let sleepy = connect_with(
        &server,
        "user=postgres options='-c idle_session_timeout=50'",
    )
    .await;
    // pg_terminate_backend kills one.
    let victim = connect(&server).await;
    let pid: i32 = victim
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    watcher
        .query_one("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .unwrap();
    let ended = wait_for(&watcher, |c| {
        c.sessions_abandoned > start.sessions_abandoned
            && c.sessions_fatal > start.sessions_fatal
            && c.sessions_killed > start.sessions_killed
    })
    .await;
    assert_eq!(ended.sessions - start.sessions, 4);
    assert_eq!(ended.sessions_abandoned - start.sessions_abandoned, 1);
    assert_eq!(ended.sessions_fatal - start.sessions_fatal, 1);
    assert_eq!(ended.sessions_killed - start.sessions_killed, 1);
    drop((sleepy, victim));

    // Two transactions that lock rows in opposite orders: one of them is a deadlock, and
    // holds its locks until it rolls back.
    let a = std::sync::Arc::new(connect(&server).await);
    let b = std::sync::Arc::new(connect(&server).await);
    a.batch_execute("BEGIN; UPDATE t SET v = 1 WHERE id = 1")
        .await
        .unwrap();
    b.batch_execute("BEGIN; UPDATE t SET v = 2 WHERE id = 2")
        .await
        .unwrap();
    let (a2, b2) = (a.clone(), b.clone());
    let mut first =
        tokio::spawn(async move { a2.batch_execute("UPDATE t SET v = 1 WHERE id = 2").await });
    let mut second =
        tokio::spawn(async move { b2.batch_execute("UPDATE t SET v = 2 WHERE id = 1").await });
    let (victim, other, survivor) = tokio::select! {
        r = &mut first => (r.unwrap(), a, second),
        r = &mut second => (r.unwrap(), b, first),
    };
    let e = victim.expect_err("the first to finish is the deadlock's victim");
    assert_eq!(e.code().unwrap().code(), "40P01");
    other.batch_execute("ROLLBACK").await.unwrap();
    survivor.await.unwrap().unwrap();
    let last = counters(&watcher).await;
    assert_eq!(last.deadlocks - start.deadlocks, 1);
}

/// A session over a socket of its own: logs in, then closes with or without a Terminate.
fn raw_session(server: &ShoalServer, terminate: bool) {
    let mut socket = std::net::TcpStream::connect(&server.addr).unwrap();
    socket.write_all(&startup_message("postgres")).unwrap();
    let mut reply = [0u8; 1024];
    let mut seen = Vec::new();
    while !seen.windows(6).any(|w| w == [b'Z', 0, 0, 0, 5, b'I']) {
        let n = socket.read(&mut reply).unwrap();
        assert!(n > 0, "closed before ReadyForQuery");
        seen.extend_from_slice(&reply[..n]);
    }
    if terminate {
        socket.write_all(&[b'X', 0, 0, 0, 4]).unwrap();
    }
}
