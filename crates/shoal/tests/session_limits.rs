//! Limits on sessions, as PostgreSQL sets them: max_connections (past it FATAL 53300, with
//! the last slots kept for superusers), authentication_timeout (a client that does not finish
//! logging in is disconnected) and the idle timeouts that end a session left idle inside a
//! transaction block (25P03) or outside one (57P05).

mod support;

use std::time::Duration;

use support::ShoalServer;

/// Connects as `user`; the connection's task is returned so that a test can see how the
/// server ended it.
async fn connect_as(
    server: &ShoalServer,
    user: &str,
) -> Result<
    (
        tokio_postgres::Client,
        tokio::task::JoinHandle<Result<(), tokio_postgres::Error>>,
    ),
    tokio_postgres::Error,
> {
    let conn = format!(
        "host=127.0.0.1 port={} user={user} dbname=postgres",
        server.port()
    );
    let (client, connection) = tokio_postgres::connect(&conn, tokio_postgres::NoTls).await?;
    Ok((client, tokio::spawn(connection)))
}

fn message(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .map(|d| d.message().to_string())
        .unwrap_or_else(|| e.to_string())
}

fn sqlstate(e: &tokio_postgres::Error) -> String {
    e.code()
        .map(|c| c.code().to_string())
        .unwrap_or_else(|| format!("not a server error: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_do_not_finish_logging_in_are_disconnected() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = ShoalServer::start_with(&["--authentication-timeout-s", "1"]);
    // One client sends nothing; another stops halfway through its startup message.
    let mut silent = tokio::net::TcpStream::connect(("127.0.0.1", server.port()))
        .await
        .unwrap();
    let mut halfway = tokio::net::TcpStream::connect(("127.0.0.1", server.port()))
        .await
        .unwrap();
    halfway
        .write_all(&[0, 0, 0, 40, 0, 3, 0, 0, b'u', b's'])
        .await
        .unwrap();
    for socket in [&mut silent, &mut halfway] {
        let mut buf = [0u8; 64];
        let read = tokio::time::timeout(Duration::from_secs(20), socket.read(&mut buf))
            .await
            .expect("the server closes the connection after authentication_timeout");
        assert_eq!(read.unwrap(), 0, "closed without a reply");
    }
    // A client that logs in in time is served, and sees the setting.
    let (client, _task) = connect_as(&server, "postgres").await.unwrap();
    let shown: String = client
        .query_one("SHOW authentication_timeout", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(shown, "1s");
    let e = client
        .batch_execute("SET authentication_timeout = 5")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "55P02", "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_connections_keeps_the_last_slots_for_superusers() {
    let server = ShoalServer::start_with(&["--max-connections", "5"]);
    let (admin, _task) = connect_as(&server, "postgres").await.unwrap();
    admin
        .batch_execute("CREATE ROLE worker LOGIN")
        .await
        .unwrap();
    let shown: String = admin
        .query_one("SHOW max_connections", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(shown, "5");
    // 5 slots, 3 kept for superusers: the admin and one worker leave room for no other.
    let mut kept = vec![connect_as(&server, "worker").await.unwrap()];
    let e = connect_as(&server, "worker").await.err().expect("refused");
    assert_eq!(sqlstate(&e), "53300", "{e}");
    assert!(
        message(&e).contains("reserved for non-replication superuser"),
        "{e}"
    );
    // Superusers take the reserved slots, up to max_connections.
    kept.push(connect_as(&server, "postgres").await.unwrap());
    kept.push(connect_as(&server, "postgres").await.unwrap());
    kept.push(connect_as(&server, "postgres").await.unwrap());
    let e = connect_as(&server, "postgres")
        .await
        .err()
        .expect("refused");
    assert_eq!(sqlstate(&e), "53300", "{e}");
    assert_eq!(message(&e), "sorry, too many clients already");
    // A slot comes back when a session ends.
    drop(kept.pop());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match connect_as(&server, "postgres").await {
            Ok(c) => {
                kept.push(c);
                break;
            }
            Err(e) if std::time::Instant::now() < deadline => {
                assert_eq!(sqlstate(&e), "53300", "{e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("the freed slot never came back: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_are_ended_after_their_timeouts() {
    let server = ShoalServer::start();

    // Idle inside a transaction block.
    let (client, task) = connect_as(&server, "postgres").await.unwrap();
    client
        .batch_execute("SET idle_in_transaction_session_timeout = '200ms'; BEGIN")
        .await
        .unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the server ends the session")
        .unwrap();
    let e = ended.expect_err("ended by the server with an error");
    assert_eq!(sqlstate(&e), "25P03", "{e}");
    assert!(client.is_closed());

    // Idle outside one; a session that keeps working is not ended.
    let (client, task) = connect_as(&server, "postgres").await.unwrap();
    client
        .batch_execute("SET idle_session_timeout = 300")
        .await
        .unwrap();
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        client.simple_query("SELECT 1").await.unwrap();
    }
    let ended = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the server ends the session")
        .unwrap();
    let e = ended.expect_err("ended by the server with an error");
    assert_eq!(sqlstate(&e), "57P05", "{e}");

    // Without the settings nothing is ended.
    let (client, _task) = connect_as(&server, "postgres").await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    client.simple_query("SELECT 1").await.unwrap();
}
