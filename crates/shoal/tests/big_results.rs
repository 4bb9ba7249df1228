//! Results far larger than memory: a client that stops reading one holds the server's memory
//! to a few batches while other clients go on being served, and statement_timeout and a
//! CancelRequest end such a query while its rows are being sent.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use futures::StreamExt;
use support::{connect, ShoalServer};

/// A cross join of three copies of this many rows: 8e9 rows, some 100 GB as DataRows.
const ROWS: i64 = 2000;
/// How much the server's resident memory may grow while a client stalls on such a result:
/// a few batches in flight and the socket buffers, far from the result's size.
const STALLED_GROWTH_MAX_BYTES: u64 = 256 << 20;
/// A limit for work that should take well under a second, so a hang fails the test instead of
/// stalling the run.
const HANG: Duration = Duration::from_secs(60);

const CROSS_JOIN: &str = "SELECT a.x, b.x, c.y FROM t a, t b, t c";

async fn server_with_table() -> ShoalServer {
    let server = ShoalServer::start();
    connect(&server)
        .await
        .batch_execute(&format!(
            "CREATE TABLE t (x int, y int);
             INSERT INTO t SELECT g, g * 2 FROM generate_series(1, {ROWS}) g"
        ))
        .await
        .expect("set up");
    server
}

fn resident_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS");
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// Opens a connection by hand and sends `sql` as a simple Query, then reads nothing more.
fn send_query_and_stall(addr: &str, sql: &str) -> TcpStream {
    let mut socket = TcpStream::connect(addr).expect("connect");
    let params = b"user\0postgres\0database\0postgres\0\0";
    let mut startup = Vec::new();
    startup.extend_from_slice(&(8 + params.len() as i32).to_be_bytes());
    startup.extend_from_slice(&196608i32.to_be_bytes());
    startup.extend_from_slice(params);
    socket.write_all(&startup).expect("startup");
    // Read up to the first ReadyForQuery ('Z') of the startup.
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !seen.windows(6).any(|w| w == [b'Z', 0, 0, 0, 5, b'I']) {
        let n = socket.read(&mut buf).expect("startup reply");
        assert!(n > 0, "server closed the connection at startup");
        seen.extend_from_slice(&buf[..n]);
    }
    let mut query = vec![b'Q'];
    query.extend_from_slice(&(4 + sql.len() as i32 + 1).to_be_bytes());
    query.extend_from_slice(sql.as_bytes());
    query.push(0);
    socket.write_all(&query).expect("query");
    socket
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_reader_holds_a_few_batches_and_others_are_served() {
    let server = server_with_table().await;
    let before = resident_bytes(server.pid());
    let stalled = send_query_and_stall(&server.addr, CROSS_JOIN);
    let other = connect(&server).await;
    let mut peak = before;
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        peak = peak.max(resident_bytes(server.pid()));
        let row = tokio::time::timeout(HANG, other.query_one("SELECT count(*) FROM t", &[]))
            .await
            .expect("another client is served while one stalls")
            .expect("count");
        assert_eq!(row.get::<_, i64>(0), ROWS);
    }
    assert!(
        peak - before < STALLED_GROWTH_MAX_BYTES,
        "resident memory grew by {} MB while a client stalled",
        (peak - before) >> 20
    );
    // The stalled client goes away: its query stops, and the server goes on.
    drop(stalled);
    let row = other.query_one("SELECT 1", &[]).await.expect("still up");
    assert_eq!(row.get::<_, i32>(0), 1);
}

/// Reads a query's rows, dropping them, until the stream ends; returns its error, if any.
async fn drain(client: &tokio_postgres::Client, sql: &str) -> Option<tokio_postgres::Error> {
    let params: [&str; 0] = [];
    let rows = match client.query_raw(sql, params).await {
        Ok(rows) => rows,
        Err(e) => return Some(e),
    };
    let mut rows = std::pin::pin!(rows);
    while let Some(row) = rows.next().await {
        if let Err(e) = row {
            return Some(e);
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statement_timeout_and_cancel_end_a_query_while_its_rows_are_sent() {
    let server = server_with_table().await;
    let client = connect(&server).await;
    client
        .batch_execute("SET statement_timeout = 300")
        .await
        .unwrap();
    let error = tokio::time::timeout(HANG, drain(&client, CROSS_JOIN))
        .await
        .expect("the timeout ends the query")
        .expect("the query fails");
    assert_eq!(error.code().map(|c| c.code()), Some("57014"), "{error:?}");

    client
        .batch_execute("SET statement_timeout = 0")
        .await
        .unwrap();
    let token = client.cancel_token();
    let cancel = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        token
            .cancel_query(tokio_postgres::NoTls)
            .await
            .expect("send the CancelRequest");
    });
    let error = tokio::time::timeout(HANG, drain(&client, CROSS_JOIN))
        .await
        .expect("the cancel ends the query")
        .expect("the query fails");
    assert_eq!(error.code().map(|c| c.code()), Some("57014"), "{error:?}");
    cancel.await.unwrap();
    let row = client.query_one("SELECT 2", &[]).await.expect("served");
    assert_eq!(row.get::<_, i32>(0), 2);
}
