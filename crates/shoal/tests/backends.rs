//! The server's backends as a DBA sees and handles them: pg_stat_activity shows each client
//! and what it is doing, pg_cancel_backend stops another session's statement, and
//! pg_terminate_backend ends its connection (FATAL 57P01), rolling back its open transaction;
//! either only for a role with the privileges of the backend's role (a superuser's: superusers).

mod support;

use std::time::Duration;

use support::ShoalServer;

/// How long a test waits for something that must happen.
const ARRIVAL_TIMEOUT: Duration = Duration::from_secs(10);

async fn connect_as(server: &ShoalServer, application_name: &str) -> tokio_postgres::Client {
    support::connect_with(
        server,
        &format!("user=postgres application_name={application_name}"),
    )
    .await
}

/// The pg_stat_activity row of the backend named `application_name`: pid, state, query.
async fn activity_of(
    observer: &tokio_postgres::Client,
    application_name: &str,
) -> Option<(i32, String, String)> {
    observer
        .query_opt(
            "SELECT pid, state, query FROM pg_stat_activity WHERE application_name = $1",
            &[&application_name],
        )
        .await
        .expect("pg_stat_activity")
        .map(|r| (r.get(0), r.get(1), r.get(2)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_stat_activity_shows_each_client_and_its_state() {
    let server = ShoalServer::start();
    let observer = connect_as(&server, "observer").await;
    let worker = connect_as(&server, "worker").await;
    worker
        .batch_execute("CREATE TABLE sa_t (a int)")
        .await
        .unwrap();
    let (pid, state, query) = activity_of(&observer, "worker").await.expect("listed");
    assert_eq!(state, "idle");
    assert_eq!(query, "CREATE TABLE sa_t (a int)");
    let worker_pid: i32 = worker
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(pid, worker_pid);

    worker
        .batch_execute("BEGIN; INSERT INTO sa_t VALUES (1)")
        .await
        .unwrap();
    let (_, state, _) = activity_of(&observer, "worker").await.unwrap();
    assert_eq!(state, "idle in transaction");
    assert!(worker.batch_execute("SELECT 1/0").await.is_err());
    let (_, state, _) = activity_of(&observer, "worker").await.unwrap();
    assert_eq!(state, "idle in transaction (aborted)");
    worker.batch_execute("ROLLBACK").await.unwrap();

    // The observer sees itself running its query, with the client's address.
    let row = observer
        .query_one(
            "SELECT state, usename, datname, client_addr, client_port > 0 \
             FROM pg_stat_activity WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "active");
    assert_eq!(row.get::<_, String>(1), "postgres");
    assert_eq!(row.get::<_, String>(2), "postgres");
    assert_eq!(row.get::<_, String>(3), "127.0.0.1");
    assert!(row.get::<_, bool>(4));

    // A client that leaves leaves the view.
    drop(worker);
    let deadline = tokio::time::Instant::now() + ARRIVAL_TIMEOUT;
    while activity_of(&observer, "worker").await.is_some() {
        assert!(tokio::time::Instant::now() < deadline, "still listed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_cancel_backend_stops_the_statement_and_keeps_the_session() {
    let server = ShoalServer::start();
    let observer = connect_as(&server, "observer").await;
    let sleeper = std::sync::Arc::new(connect_as(&server, "sleeper").await);
    let running = {
        let sleeper = sleeper.clone();
        tokio::spawn(async move { sleeper.batch_execute("SELECT pg_sleep(30)").await })
    };
    let deadline = tokio::time::Instant::now() + ARRIVAL_TIMEOUT;
    let pid = loop {
        match activity_of(&observer, "sleeper").await {
            Some((pid, state, _)) if state == "active" => break pid,
            _ => assert!(tokio::time::Instant::now() < deadline, "never active"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let signalled: bool = observer
        .query_one("SELECT pg_cancel_backend($1)", &[&pid])
        .await
        .unwrap()
        .get(0);
    assert!(signalled);
    let e = tokio::time::timeout(ARRIVAL_TIMEOUT, running)
        .await
        .expect("the statement stops")
        .unwrap()
        .unwrap_err();
    assert_eq!(e.code().unwrap().code(), "57014");
    let one: i32 = sleeper.query_one("SELECT 1", &[]).await.unwrap().get(0);
    assert_eq!(one, 1);

    // No such backend: false.
    let signalled: bool = observer
        .query_one("SELECT pg_cancel_backend(-7)", &[])
        .await
        .unwrap()
        .get(0);
    assert!(!signalled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_terminate_backend_ends_the_connection_and_rolls_back() {
    let server = ShoalServer::start();
    let observer = connect_as(&server, "observer").await;
    observer
        .batch_execute("CREATE TABLE tb_t (a int)")
        .await
        .unwrap();

    // Idle in a transaction: the connection closes and the insert is undone.
    let idle = connect_as(&server, "idle").await;
    idle.batch_execute("BEGIN; INSERT INTO tb_t VALUES (1)")
        .await
        .unwrap();
    let (pid, ..) = activity_of(&observer, "idle").await.unwrap();
    let signalled: bool = observer
        .query_one("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .unwrap()
        .get(0);
    assert!(signalled);
    let deadline = tokio::time::Instant::now() + ARRIVAL_TIMEOUT;
    while !idle.is_closed() {
        assert!(tokio::time::Instant::now() < deadline, "connection kept");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(idle.batch_execute("COMMIT").await.is_err());
    let rows: i64 = observer
        .query_one("SELECT count(*) FROM tb_t", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 0, "the terminated transaction's insert is gone");

    // Running a statement: it fails with FATAL 57P01.
    let busy = std::sync::Arc::new(connect_as(&server, "busy").await);
    let running = {
        let busy = busy.clone();
        tokio::spawn(async move { busy.batch_execute("SELECT pg_sleep(30)").await })
    };
    let deadline = tokio::time::Instant::now() + ARRIVAL_TIMEOUT;
    let pid = loop {
        match activity_of(&observer, "busy").await {
            Some((pid, state, _)) if state == "active" => break pid,
            _ => assert!(tokio::time::Instant::now() < deadline, "never active"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    observer
        .query_one("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .unwrap();
    let e = tokio::time::timeout(ARRIVAL_TIMEOUT, running)
        .await
        .expect("the statement stops")
        .unwrap()
        .unwrap_err();
    assert_eq!(e.code().map(|c| c.code()), Some("57P01"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_roles_with_the_backends_privileges_may_signal_it() {
    let server = ShoalServer::start();
    let admin = connect_as(&server, "admin").await;
    admin
        .batch_execute("CREATE ROLE sig_a LOGIN; CREATE ROLE sig_b LOGIN; GRANT sig_b TO sig_a")
        .await
        .unwrap();
    let a = support::connect_with(&server, "user=sig_a application_name=a").await;
    let b = support::connect_with(&server, "user=sig_b application_name=b").await;
    let (admin_pid, ..) = activity_of(&admin, "admin").await.unwrap();
    let (a_pid, ..) = activity_of(&admin, "a").await.unwrap();
    let (b_pid, ..) = activity_of(&admin, "b").await.unwrap();
    // A superuser's backend: only superusers.
    assert_eq!(
        refused(&b, "SELECT pg_cancel_backend($1)", admin_pid).await,
        "must be a superuser to cancel superuser query"
    );
    assert_eq!(
        refused(&b, "SELECT pg_terminate_backend($1)", admin_pid).await,
        "must be a superuser to terminate superuser process"
    );
    // sig_b lacks sig_a's privileges; sig_a has sig_b's (a member that inherits).
    assert_eq!(
        refused(&b, "SELECT pg_cancel_backend($1)", a_pid).await,
        "must be a member of the role whose query is being canceled or member of pg_signal_backend"
    );
    let cancelled: bool = a
        .query_one("SELECT pg_cancel_backend($1)", &[&b_pid])
        .await
        .unwrap()
        .get(0);
    assert!(cancelled);
    let terminated: bool = admin
        .query_one("SELECT pg_terminate_backend($1)", &[&a_pid])
        .await
        .unwrap()
        .get(0);
    assert!(terminated);
}

/// The message of the error `sql` (a pg_*_backend call on `pid`) fails with.
async fn refused(client: &tokio_postgres::Client, sql: &str, pid: i32) -> String {
    let e = client.query_one(sql, &[&pid]).await.expect_err("refused");
    e.as_db_error()
        .expect("a server error")
        .message()
        .to_string()
}
