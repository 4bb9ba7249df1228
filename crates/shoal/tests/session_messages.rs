//! What sessions tell each other: notifications (LISTEN/NOTIFY), delivered to an idle client
//! without its asking and only for committed transactions, and advisory locks, which make one
//! session wait for another and end with the session that held them. Also what a session
//! shows of itself: its named prepared statements in pg_prepared_statements, and the NOTICEs
//! its statements raise.

mod support;

use std::time::Duration;

use futures::StreamExt;
use support::{connect, ShoalServer};
use tokio::sync::mpsc;
use tokio_postgres::AsyncMessage;

/// How long a test waits for something that must happen.
const ARRIVAL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a test waits to be fairly sure that something does not happen.
const QUIET: Duration = Duration::from_millis(300);

/// A client whose asynchronous messages, as `pick` makes them into `T` (or drops them), come
/// out of the returned receiver as the connection reads them, whether or not a query runs.
async fn client_with_messages<T: Send + 'static>(
    server: &ShoalServer,
    pick: fn(AsyncMessage) -> Option<T>,
) -> (tokio_postgres::Client, mpsc::UnboundedReceiver<T>) {
    let conn = format!(
        "host=127.0.0.1 port={} user=postgres dbname=postgres",
        server.port()
    );
    let (client, mut connection) = tokio_postgres::connect(&conn, tokio_postgres::NoTls)
        .await
        .expect("connect to shoal");
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(message)) = messages.next().await {
            if let Some(picked) = pick(message) {
                let _ = tx.send(picked);
            }
        }
    });
    (client, rx)
}

/// A client whose notifications (channel, payload, sender's backend pid) come out of the
/// returned receiver.
async fn listening_client(
    server: &ShoalServer,
) -> (
    tokio_postgres::Client,
    mpsc::UnboundedReceiver<(String, String, i32)>,
) {
    client_with_messages(server, |message| match message {
        AsyncMessage::Notification(n) => Some((
            n.channel().to_string(),
            n.payload().to_string(),
            n.process_id(),
        )),
        _ => None,
    })
    .await
}

async fn backend_pid(client: &tokio_postgres::Client) -> i32 {
    client
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_reach_an_idle_listener_once_the_sender_commits() {
    let server = ShoalServer::start();
    let (listener, mut inbox) = listening_client(&server).await;
    let sender = connect(&server).await;
    let sender_pid = backend_pid(&sender).await;
    listener.batch_execute("LISTEN jobs").await.unwrap();

    // The listener sends nothing more: the notification must come by itself.
    sender.batch_execute("NOTIFY jobs, 'first'").await.unwrap();
    let got = tokio::time::timeout(ARRIVAL_TIMEOUT, inbox.recv())
        .await
        .expect("a notification reaches the idle listener")
        .unwrap();
    assert_eq!(got, ("jobs".to_string(), "first".to_string(), sender_pid));

    // pg_notify() in a query of its own (extended protocol, autocommit): sent when that
    // query's transaction commits, not left for the sender's next one.
    sender
        .query("SELECT pg_notify($1, $2)", &[&"jobs", &"from a query"])
        .await
        .unwrap();
    let got = tokio::time::timeout(ARRIVAL_TIMEOUT, inbox.recv())
        .await
        .expect("pg_notify's notification arrives")
        .unwrap();
    assert_eq!(got.1, "from a query");

    // Inside the sender's block nothing is sent; its commit sends it, a rollback drops it.
    sender
        .batch_execute("BEGIN; NOTIFY jobs, 'committed'; SELECT pg_notify('jobs', 'committed')")
        .await
        .unwrap();
    assert!(tokio::time::timeout(QUIET, inbox.recv()).await.is_err());
    sender.batch_execute("COMMIT").await.unwrap();
    let got = tokio::time::timeout(ARRIVAL_TIMEOUT, inbox.recv())
        .await
        .expect("the committed notification arrives")
        .unwrap();
    assert_eq!(got.1, "committed");
    sender
        .batch_execute("BEGIN; NOTIFY jobs, 'rolled back'; ROLLBACK")
        .await
        .unwrap();
    sender
        .batch_execute("NOTIFY other, 'not listened'")
        .await
        .unwrap();
    assert!(tokio::time::timeout(QUIET, inbox.recv()).await.is_err());

    // A listener inside its own block hears of it when its block ends.
    listener.batch_execute("BEGIN").await.unwrap();
    sender.batch_execute("NOTIFY jobs, 'later'").await.unwrap();
    assert!(tokio::time::timeout(QUIET, inbox.recv()).await.is_err());
    listener.batch_execute("COMMIT").await.unwrap();
    let got = tokio::time::timeout(ARRIVAL_TIMEOUT, inbox.recv())
        .await
        .expect("delivered at the end of the listener's block")
        .unwrap();
    assert_eq!(got.1, "later");

    // After UNLISTEN, nothing.
    listener.batch_execute("UNLISTEN *").await.unwrap();
    sender
        .batch_execute("NOTIFY jobs, 'unheard'")
        .await
        .unwrap();
    assert!(tokio::time::timeout(QUIET, inbox.recv()).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_advisory_lock_waits_for_its_holder_and_detects_deadlocks() {
    let server = ShoalServer::start();
    let a = connect(&server).await;
    let b = std::sync::Arc::new(connect(&server).await);
    a.batch_execute("SELECT pg_advisory_lock(5)").await.unwrap();

    let waiter = {
        let b = b.clone();
        tokio::spawn(async move { b.batch_execute("SELECT pg_advisory_lock(5)").await })
    };
    tokio::time::sleep(QUIET).await;
    assert!(
        !waiter.is_finished(),
        "the second session waits for the first"
    );
    let released: bool = a
        .query_one("SELECT pg_advisory_unlock(5)", &[])
        .await
        .unwrap()
        .get(0);
    assert!(released);
    tokio::time::timeout(ARRIVAL_TIMEOUT, waiter)
        .await
        .expect("the waiter gets the lock once it is released")
        .unwrap()
        .unwrap();

    // lock_timeout bounds the wait.
    let e = a
        .batch_execute("SET lock_timeout = '100ms'; SELECT pg_advisory_lock(5)")
        .await
        .unwrap_err();
    assert_eq!(e.code().unwrap().code(), "55P03");
    a.batch_execute("RESET lock_timeout").await.unwrap();

    // a holds 1 and waits for 5 (held by b); b asking for 1 closes the cycle.
    a.batch_execute("SELECT pg_advisory_lock(1)").await.unwrap();
    let a = std::sync::Arc::new(a);
    let a_waits = {
        let a = a.clone();
        tokio::spawn(async move { a.batch_execute("SELECT pg_advisory_lock(5)").await })
    };
    tokio::time::sleep(QUIET).await;
    let e = b
        .batch_execute("SELECT pg_advisory_lock(1)")
        .await
        .unwrap_err();
    assert_eq!(e.code().unwrap().code(), "40P01");
    b.batch_execute("SELECT pg_advisory_unlock_all()")
        .await
        .unwrap();
    tokio::time::timeout(ARRIVAL_TIMEOUT, a_waits)
        .await
        .expect("the other waiter proceeds")
        .unwrap()
        .unwrap();

    // A session that ends lets go of its locks.
    drop(a);
    let c = connect(&server).await;
    let deadline = tokio::time::Instant::now() + ARRIVAL_TIMEOUT;
    loop {
        let got: bool = c
            .query_one("SELECT pg_try_advisory_lock(5)", &[])
            .await
            .unwrap()
            .get(0);
        if got {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the lock of a closed session is never released"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// pg_prepared_statements rows of the test's statement: name, text, parameter types, from_sql.
async fn listed_statements(client: &tokio_postgres::Client) -> Vec<Vec<String>> {
    client
        .simple_query(
            "SELECT name, statement, parameter_types::text, from_sql::text \
             FROM pg_prepared_statements WHERE statement LIKE '%$1::int8 * 2'",
        )
        .await
        .expect("read pg_prepared_statements")
        .into_iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => Some(
                (0..4)
                    .map(|i| r.get(i).unwrap_or("").to_string())
                    .collect::<Vec<_>>(),
            ),
            _ => None,
        })
        .collect()
}

/// A named statement of the extended protocol is listed in pg_prepared_statements (from_sql
/// false, with its text and parameter types) from its Parse until its Close or a DEALLOCATE,
/// as in PostgreSQL; drivers' statement caches and tests read it there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_protocol_statements_are_listed_until_closed() {
    let server = ShoalServer::start();
    let client = connect(&server).await;
    let statement = client
        .prepare("SELECT $1::int8 * 2")
        .await
        .expect("prepare");
    let rows = listed_statements(&client).await;
    assert_eq!(rows.len(), 1, "the named statement is listed: {rows:?}");
    assert_eq!(rows[0][1], "SELECT $1::int8 * 2");
    assert_eq!(rows[0][2], "{bigint}");
    assert_eq!(rows[0][3], "false");
    drop(statement);
    // The Close goes out with the next message the client sends.
    assert!(
        listed_statements(&client).await.is_empty(),
        "closed, no longer listed"
    );

    // DEALLOCATE ALL drops the protocol's statements too: no longer listed, nor bound.
    let statement = client
        .prepare("SELECT $1::int8 * 2")
        .await
        .expect("prepare");
    assert_eq!(listed_statements(&client).await.len(), 1);
    client
        .batch_execute("DEALLOCATE ALL")
        .await
        .expect("deallocate");
    assert!(listed_statements(&client).await.is_empty());
    let err = client
        .query(&statement, &[&1i64])
        .await
        .expect_err("a deallocated statement");
    assert_eq!(err.code().map(|c| c.code()), Some("26000"), "{err}");
}

/// What `IF EXISTS` and `IF NOT EXISTS` skip reaches the client as a NOTICE, with
/// PostgreSQL's SQLSTATE and text, in both protocols; the statements themselves succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skipped_if_exists_statements_send_notices() {
    let server = ShoalServer::start();
    let (client, mut rx) = client_with_messages(&server, |message| match message {
        AsyncMessage::Notice(n) => Some((n.code().code().to_string(), n.message().to_string())),
        _ => None,
    })
    .await;
    client
        .batch_execute(
            "DROP TABLE IF EXISTS nt_missing;
             CREATE TABLE nt_t (a int);
             CREATE TABLE IF NOT EXISTS nt_t (a int);",
        )
        .await
        .expect("skipping statements succeed");
    // The extended protocol too.
    client
        .execute("ALTER TABLE nt_t ADD COLUMN IF NOT EXISTS a int", &[])
        .await
        .expect("skipped ADD COLUMN");
    let mut got = Vec::new();
    for _ in 0..3 {
        let notice = tokio::time::timeout(ARRIVAL_TIMEOUT, rx.recv())
            .await
            .expect("a notice in time")
            .expect("notice channel open");
        got.push(notice);
    }
    assert_eq!(
        got,
        vec![
            (
                "00000".to_string(),
                "table \"nt_missing\" does not exist, skipping".to_string()
            ),
            (
                "42P07".to_string(),
                "relation \"nt_t\" already exists, skipping".to_string()
            ),
            (
                "42701".to_string(),
                "column \"a\" of relation \"nt_t\" already exists, skipping".to_string()
            ),
        ]
    );
    assert!(
        tokio::time::timeout(QUIET, rx.recv()).await.is_err(),
        "CREATE TABLE sent no notice"
    );
}
