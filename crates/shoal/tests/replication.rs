//! Replication groups end to end: three `shoal serve` processes on loopback keep one redo log.
//! The primary writes, the standbys follow and serve reads, and refuse writes as PostgreSQL's
//! hot standby does; clients move money between accounts while the primary is killed with
//! SIGKILL again and again, and every acknowledged transfer is on the new primary, nothing is
//! half applied, and a restarted node catches up with exactly the primary's data. Checkpoints
//! drop the log's start; a node that joins later, or comes back after long, gets the newest
//! checkpoint instead.

mod support;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::{free_port, ShoalServer};
use tokio_postgres::{Client, NoTls};

const ACCOUNTS: i64 = 10;
const BALANCE_INITIAL: i64 = 1_000;
const CLIENTS: usize = 3;
const KILL_CYCLES: usize = 10;
/// How long the group may take to have a primary again.
const ELECTION_TIMEOUT: Duration = Duration::from_secs(20);

/// One group at a time: three servers and their clients per test already fill a small
/// machine, and a starved node misses heartbeats and calls an election the test did not ask for.
static ONE_GROUP_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Three nodes' flags and data directories; a node that is down has `None`.
struct Group {
    args: Vec<Vec<String>>,
    dirs: Vec<PathBuf>,
    nodes: Vec<Option<ShoalServer>>,
    /// Each node's `--metrics-listen` port (its /primary and /replica health checks).
    metrics_ports: Vec<u16>,
    /// Nodes stopped with SIGSTOP: connecting to them would hang.
    frozen: Vec<bool>,
}

impl Group {
    fn start() -> Group {
        Group::start_with(&[])
    }

    /// Three nodes, each with `extra` flags.
    fn start_with(extra: &[&str]) -> Group {
        let peers: Vec<String> = (1..=3)
            .map(|id| format!("{id}=127.0.0.1:{}", free_port()))
            .collect();
        let peers = peers.join(",");
        let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "shoal-group-{}-{}",
            std::process::id(),
            free_port()
        ));
        let mut group = Group {
            args: Vec::new(),
            dirs: Vec::new(),
            nodes: Vec::new(),
            metrics_ports: Vec::new(),
            frozen: vec![false; 3],
        };
        for id in 1..=3 {
            let metrics_port = free_port();
            group.args.push(vec![
                "--node-id".into(),
                id.to_string(),
                "--peers".into(),
                peers.clone(),
                "--metrics-listen".into(),
                format!("127.0.0.1:{metrics_port}"),
            ]);
            group.args[id - 1].extend(extra.iter().map(|a| a.to_string()));
            group.metrics_ports.push(metrics_port);
            group.dirs.push(root.join(format!("node{id}")));
            group.nodes.push(None);
        }
        for n in 0..3 {
            group.restart(n);
        }
        group
    }

    /// The primary, once the group has settled on one: the same node twice, half a second
    /// apart (a group starting for the first time may elect twice).
    async fn settled_primary(&self) -> (usize, Client) {
        loop {
            let (first, _) = self.primary().await;
            tokio::time::sleep(Duration::from_millis(500)).await;
            let (again, client) = self.primary().await;
            if again == first {
                return (again, client);
            }
        }
    }

    fn restart(&mut self, n: usize) {
        let args: Vec<&str> = self.args[n].iter().map(String::as_str).collect();
        let server = ShoalServer::start_in(self.dirs[n].clone(), &args)
            .unwrap_or_else(|e| panic!("node {} did not start: {e}", n + 1));
        self.nodes[n] = Some(server);
    }

    fn kill(&mut self, n: usize) {
        let server = self.nodes[n].take().expect("running");
        server.crash();
    }

    /// SIGSTOP (`freeze`) or SIGCONT: a node that hangs, then goes on.
    fn signal(&mut self, n: usize, freeze: bool) {
        let pid = self.nodes[n].as_ref().expect("running").pid();
        let signal = if freeze { "-STOP" } else { "-CONT" };
        let status = std::process::Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
        self.frozen[n] = freeze;
    }

    fn port(&self, n: usize) -> u16 {
        self.nodes[n].as_ref().expect("running").port()
    }

    /// The node that is the primary: the one running node not in recovery.
    async fn primary(&self) -> (usize, Client) {
        let deadline = Instant::now() + ELECTION_TIMEOUT;
        loop {
            for (n, node) in self.nodes.iter().enumerate() {
                let Some(server) = node else { continue };
                if self.frozen[n] {
                    continue;
                }
                let Ok(c) = try_connect(server).await else {
                    continue;
                };
                let in_recovery = c.query_one("SELECT pg_is_in_recovery()", &[]).await;
                if let Ok(row) = in_recovery {
                    if !row.get::<_, bool>(0) {
                        return (n, c);
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "no primary within {ELECTION_TIMEOUT:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        for n in 0..self.nodes.len() {
            if self.frozen[n] {
                self.signal(n, false);
            }
        }
        self.nodes.clear();
        if let Some(root) = self.dirs.first().and_then(|d| d.parent()) {
            // A failed test leaves the nodes' directories and logs to look at.
            if std::thread::panicking() {
                eprintln!("the group's directories are kept in {}", root.display());
            } else {
                let _ = std::fs::remove_dir_all(root);
            }
        }
    }
}

async fn try_connect(server: &ShoalServer) -> Result<Client, tokio_postgres::Error> {
    let conn = format!(
        "host=127.0.0.1 port={} user=postgres dbname=postgres connect_timeout=2",
        server.port()
    );
    let (client, connection) = tokio_postgres::connect(&conn, NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

async fn connect(server: &ShoalServer) -> Client {
    try_connect(server).await.expect("connect")
}

/// Polls `query` (one bigint) on `client` until it gives `expected`.
async fn wait_for_value(client: &Client, query: &str, expected: i64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got: Result<Option<i64>, String> = match client.query_one(query, &[]).await {
            Ok(row) => Ok(row.get(0)),
            Err(e) => Err(format!("{e:?}")),
        };
        if got == Ok(Some(expected)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{query} gave {got:?}, expected {expected}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn sqlstate(e: &tokio_postgres::Error) -> &str {
    e.code().map_or("", |c| c.code())
}

/// The status code of `GET path` on a node's metrics address.
fn http_status(port: u16, path: &str) -> u16 {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("metrics address");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("HTTP answer: {answer}"))
}

/// Whether node `n` answers as a standby, polling through a restart; panics after 30 s.
async fn wait_standby(group: &Group, n: usize) -> Client {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(c) = try_connect(group.nodes[n].as_ref().unwrap()).await {
            if let Ok(row) = c.query_one("SELECT pg_is_in_recovery()", &[]).await {
                if row.get::<_, bool>(0) {
                    return c;
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "node {} did not come back as a standby",
            n + 1
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standbys_follow_the_primary_and_refuse_writes() {
    let _one_group = ONE_GROUP_AT_A_TIME.lock().await;
    let mut group = Group::start();
    let (p, primary) = group.settled_primary().await;
    primary
        .batch_execute(
            "CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL);
             CREATE INDEX items_name ON items (name);
             CREATE SEQUENCE items_seq;
             INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 100) g;
             UPDATE items SET name = 'changed' WHERE id <= 10;
             DELETE FROM items WHERE id > 90;
             CREATE TABLE facts (k int, v double precision) USING columnar;
             INSERT INTO facts SELECT g, g * 0.5 FROM generate_series(1, 1000) g;",
        )
        .await
        .expect("the primary writes");
    let shown: String = primary
        .query_one("SHOW transaction_read_only", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(shown, "off");
    // Both standbys have the primary's whole log on disk, and the primary says so.
    wait_for_value(
        &primary,
        "SELECT count(*) FROM pg_stat_replication
         WHERE state = 'streaming' AND sync_state = 'quorum'
           AND flush_lsn = pg_current_wal_lsn()",
        2,
    )
    .await;
    let primary_lsn: String = primary
        .query_one("SELECT pg_current_wal_lsn()", &[])
        .await
        .unwrap()
        .get(0);
    for (n, node) in group.nodes.iter().enumerate() {
        if n == p {
            continue;
        }
        let standby = connect(node.as_ref().unwrap()).await;
        let in_recovery: bool = standby
            .query_one("SELECT pg_is_in_recovery()", &[])
            .await
            .unwrap()
            .get(0);
        assert!(in_recovery, "node {} is a standby", n + 1);
        wait_for_value(&standby, "SELECT count(*) FROM items", 90).await;
        let changed: i64 = standby
            .query_one("SELECT count(*) FROM items WHERE name = 'changed'", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(changed, 10);
        wait_for_value(&standby, "SELECT count(*) FROM facts", 1000).await;
        let sum: f64 = standby
            .query_one("SELECT sum(v) FROM facts", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(sum, 250_250.0);
        let replayed: Option<String> = standby
            .query_one("SELECT pg_last_wal_replay_lsn()", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(replayed.as_deref(), Some(primary_lsn.as_str()));
        let receiver = standby
            .query_one(
                "SELECT status, flushed_lsn, sender_port FROM pg_stat_wal_receiver",
                &[],
            )
            .await
            .unwrap();
        assert_eq!(receiver.get::<_, String>(0), "streaming");
        assert_eq!(receiver.get::<_, String>(1), primary_lsn);
        assert!(receiver.get::<_, Option<i32>>(2).is_some());
        let err = standby
            .query_one("SELECT pg_current_wal_lsn()", &[])
            .await
            .expect_err("a standby has no insert position");
        assert_eq!(sqlstate(&err), "55000", "{err}");
        let shown: String = standby
            .query_one("SHOW transaction_read_only", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(shown, "on");
        // The extended protocol's writes too, a prepared statement run twice.
        let insert = standby
            .prepare("INSERT INTO items VALUES ($1, 'x')")
            .await
            .expect("prepare on a standby");
        for id in [1000i32, 1001] {
            let err = standby.execute(&insert, &[&id]).await.expect_err("insert");
            assert_eq!(sqlstate(&err), "25006", "{err}");
        }
        let err = standby
            .query_one("SELECT nextval('items_seq')", &[])
            .await
            .expect_err("nextval on a standby");
        assert_eq!(sqlstate(&err), "25006", "{err}");
        for write in [
            "INSERT INTO items VALUES (1000, 'x')",
            "UPDATE items SET name = 'y'",
            "DELETE FROM items",
            "CREATE TABLE t (a int)",
        ] {
            let err = standby.batch_execute(write).await.expect_err(write);
            assert_eq!(sqlstate(&err), "25006", "{write}: {err}");
        }
        let err = standby
            .batch_execute("BEGIN READ WRITE")
            .await
            .expect_err("read-write transaction on a standby");
        assert_eq!(sqlstate(&err), "0A000", "{err}");
        assert_eq!(http_status(group.metrics_ports[n], "/replica"), 200);
        assert_eq!(http_status(group.metrics_ports[n], "/primary"), 503);
    }
    assert_eq!(http_status(group.metrics_ports[p], "/primary"), 200);
    assert_eq!(http_status(group.metrics_ports[p], "/replica"), 503);
    let receivers: i64 = primary
        .query_one("SELECT count(*) FROM pg_stat_wal_receiver", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(receivers, 0, "a primary receives no log");

    // remote_apply with both standbys named: once the commit is acknowledged, both show it.
    let err = primary
        .batch_execute("ALTER SYSTEM SET synchronous_standby_names = 'ANY 0 (node1)'")
        .await
        .expect_err("zero standbys");
    assert_eq!(sqlstate(&err), "22023", "{err}");
    primary
        .batch_execute("ALTER SYSTEM SET synchronous_standby_names = 'ANY 2 (node1, node2, node3)'")
        .await
        .unwrap();
    primary
        .batch_execute("SELECT pg_reload_conf()")
        .await
        .unwrap();
    let standbys: Vec<Client> = {
        let mut v = Vec::new();
        for n in (0..3).filter(|&n| n != p) {
            v.push(connect(group.nodes[n].as_ref().unwrap()).await);
        }
        v
    };
    let applying = connect(group.nodes[p].as_ref().unwrap()).await;
    applying
        .batch_execute("SET synchronous_commit = remote_apply")
        .await
        .unwrap();
    for id in 500..520 {
        applying
            .execute("INSERT INTO items VALUES ($1, 'applied')", &[&id])
            .await
            .unwrap();
        for standby in &standbys {
            let seen: i64 = standby
                .query_one("SELECT count(*) FROM items WHERE id = $1", &[&id])
                .await
                .unwrap()
                .get(0);
            assert_eq!(seen, 1, "row {id} acknowledged with remote_apply");
        }
    }
    // A commit that must be shown by both standbys waits while one of them hangs.
    let hung = (p + 1) % 3;
    group.signal(hung, true);
    let waiting = tokio::spawn(async move {
        applying
            .execute("INSERT INTO items VALUES (600, 'waits')", &[])
            .await
            .map(|_| applying)
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !waiting.is_finished(),
        "acknowledged while a named standby hung"
    );
    group.signal(hung, false);
    waiting
        .await
        .unwrap()
        .expect("acknowledged once the standby is back");
    let shown: i64 = connect(group.nodes[hung].as_ref().unwrap())
        .await
        .query_one("SELECT count(*) FROM items WHERE id = 600", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(shown, 1);
    let named: i64 = primary
        .query_one(
            "SELECT count(*) FROM pg_stat_replication
             WHERE application_name ~ '^node[123]$' AND replay_lsn IS NOT NULL",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(named, 2);

    // Switchover: pg_promote() on a standby makes it the primary, with every commit.
    let err = primary
        .query_one("SELECT pg_promote()", &[])
        .await
        .expect_err("pg_promote on the primary");
    assert_eq!(sqlstate(&err), "55000", "{err}");
    let before = table_digest(&primary, "facts").await;
    let items_before: i64 = primary
        .query_one("SELECT count(*) FROM items", &[])
        .await
        .unwrap()
        .get(0);
    let target = (p + 2) % 3;
    let promoting = connect(group.nodes[target].as_ref().unwrap()).await;
    let promoted: bool = promoting
        .query_one("SELECT pg_promote(true, 30)", &[])
        .await
        .expect("pg_promote on a standby")
        .get(0);
    assert!(promoted);
    let in_recovery: bool = promoting
        .query_one("SELECT pg_is_in_recovery()", &[])
        .await
        .unwrap()
        .get(0);
    assert!(!in_recovery, "the promoted node is the primary");
    assert_eq!(table_digest(&promoting, "facts").await, before);
    promoting
        .batch_execute("INSERT INTO items VALUES (700, 'after the switchover')")
        .await
        .expect("the new primary writes");
    // The old primary restarts as a standby and follows.
    let old = wait_standby(&group, p).await;
    wait_for_value(&old, "SELECT count(*) FROM items", items_before + 1).await;
    let (now, _) = group.primary().await;
    assert_eq!(now, target);

    // libpq finds the primary, or a standby, in a multi-host connection string.
    let ports: Vec<String> = (0..3).map(|n| group.port(n).to_string()).collect();
    for (attrs, expected) in [
        ("read-write", "f"),
        ("primary", "f"),
        ("standby", "t"),
        ("prefer-standby", "t"),
        ("read-only", "t"),
    ] {
        let conninfo = format!(
            "host=127.0.0.1,127.0.0.1,127.0.0.1 port={} user=postgres dbname=postgres \
             target_session_attrs={attrs}",
            ports.join(",")
        );
        let Ok(out) = std::process::Command::new("psql")
            .args([&conninfo, "-Atc", "SELECT pg_is_in_recovery()"])
            .output()
        else {
            assert!(
                std::env::var_os("SHOAL_REQUIRE_POSTGRES").is_none(),
                "psql is not installed"
            );
            return;
        };
        let answer = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "psql {conninfo}: {out:?}");
        assert_eq!(answer.trim(), expected, "target_session_attrs={attrs}");
        // psycopg, as an application connects (it tries the hosts itself, through libpq).
        let script = "import sys, psycopg\n\
                      with psycopg.connect(sys.argv[1]) as c:\n\
                      \x20   print(c.execute('SELECT pg_is_in_recovery()').fetchone()[0])";
        let out = std::process::Command::new("python3")
            .args(["-c", script, &conninfo])
            .output()
            .expect("run python3");
        let stderr = String::from_utf8_lossy(&out.stderr);
        if stderr.contains("No module named 'psycopg'") {
            eprintln!("psycopg is not installed: its target_session_attrs check is skipped");
            continue;
        }
        assert!(out.status.success(), "psycopg {conninfo}: {stderr}");
        let answer = String::from_utf8_lossy(&out.stdout);
        let expected = if expected == "t" { "True" } else { "False" };
        assert_eq!(
            answer.trim(),
            expected,
            "psycopg target_session_attrs={attrs}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_primary_is_replaced_and_rejoins_as_a_standby() {
    let _one_group = ONE_GROUP_AT_A_TIME.lock().await;
    let mut group = Group::start();
    let (old, primary) = group.settled_primary().await;
    primary
        .batch_execute(
            "CREATE TABLE events (id int PRIMARY KEY, at text);
             INSERT INTO events VALUES (1, 'before')",
        )
        .await
        .unwrap();
    drop(primary);

    // A hung standby does not stop the primary: a majority is still there.
    let standby = (old + 1) % 3;
    group.signal(standby, true);
    let primary = connect(group.nodes[old].as_ref().unwrap()).await;
    primary
        .batch_execute("INSERT INTO events VALUES (2, 'standby hung')")
        .await
        .expect("a commit with one standby hung");
    group.signal(standby, false);
    drop(primary);

    // Sessions opened on the standbys before the failover.
    let mut standby_sessions = Vec::new();
    for n in (0..3).filter(|&n| n != old) {
        standby_sessions.push((n, connect(group.nodes[n].as_ref().unwrap()).await));
    }

    // The primary hangs: the others elect one of themselves, which takes writes.
    group.signal(old, true);
    let (new, primary) = group.primary().await;
    assert_ne!(new, old);
    primary
        .batch_execute("INSERT INTO events VALUES (3, 'after')")
        .await
        .expect("the new primary writes");
    // A session the new primary had as a standby is told it is not in hot standby any more,
    // and writes.
    let (_, promoted) = standby_sessions
        .iter()
        .find(|(n, _)| *n == new)
        .expect("a session on the new primary");
    for (show, expected) in [("in_hot_standby", "off"), ("transaction_read_only", "off")] {
        let value: String = promoted
            .query_one(&format!("SHOW {show}"), &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(value, expected, "{show} after promotion");
    }
    promoted
        .batch_execute("INSERT INTO events VALUES (4, 'promoted session')")
        .await
        .expect("a session from before the promotion writes");
    promoted
        .batch_execute("DELETE FROM events WHERE id = 4")
        .await
        .unwrap();

    // Woken, the old primary finds a newer term, restarts and follows the new primary.
    group.signal(old, false);
    let rejoined = wait_standby(&group, old).await;
    wait_for_value(&rejoined, "SELECT count(*) FROM events", 3).await;
    let rows: Vec<String> = rejoined
        .query("SELECT at FROM events ORDER BY id", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(rows, ["before", "standby hung", "after"]);
    let caught_up = connect(group.nodes[standby].as_ref().unwrap()).await;
    wait_for_value(&caught_up, "SELECT count(*) FROM events", 3).await;
}

/// One transfer as a transaction block; Ok once COMMIT was acknowledged.
async fn transfer(c: &Client, id: i64, src: i64, dst: i64) -> Result<(), tokio_postgres::Error> {
    let sql = format!(
        "BEGIN;
         UPDATE accounts SET balance = balance - 1 WHERE id = {src};
         UPDATE accounts SET balance = balance + 1 WHERE id = {dst};
         INSERT INTO transfers VALUES ({id}, {src}, {dst});
         COMMIT;"
    );
    c.batch_execute(&sql).await
}

/// Clients doing transfers against `port` until their connection fails.
fn start_clients(
    port: u16,
    next_id: &Arc<AtomicI64>,
    acked: &Arc<Mutex<Vec<i64>>>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..CLIENTS)
        .map(|k| {
            let (next_id, acked) = (next_id.clone(), acked.clone());
            tokio::spawn(async move {
                let conn = format!("host=127.0.0.1 port={port} user=postgres dbname=postgres");
                let Ok((c, connection)) = tokio_postgres::connect(&conn, NoTls).await else {
                    return;
                };
                tokio::spawn(async move {
                    let _ = connection.await;
                });
                let mut turn = k as i64;
                loop {
                    let id = next_id.fetch_add(1, Ordering::Relaxed);
                    turn += 1;
                    let src = turn % ACCOUNTS + 1;
                    let dst = (turn * 7 + 3) % ACCOUNTS + 1;
                    match transfer(&c, id, src, dst).await {
                        Ok(()) => acked.lock().unwrap().push(id),
                        Err(e) if e.is_closed() || sqlstate(&e).is_empty() => return,
                        // A conflict or a log that broke under a deposed primary: the block
                        // is rolled back and the client goes on (or finds the server gone).
                        Err(_) => {
                            let _ = c.batch_execute("ROLLBACK").await;
                        }
                    }
                }
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_primary_loses_no_acknowledged_commit() {
    let _one_group = ONE_GROUP_AT_A_TIME.lock().await;
    // Checkpoints every second drop the log's start while nodes die and come back: a node
    // that missed more than the kept log is sent a checkpoint.
    let mut group = Group::start_with(&[
        "--checkpoint-interval-s",
        "1",
        "--replication-log-keep",
        "20",
    ]);
    let (_, primary) = group.settled_primary().await;
    primary
        .batch_execute(&format!(
            "CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
             CREATE TABLE transfers (id bigint PRIMARY KEY, src int NOT NULL, dst int NOT NULL);
             INSERT INTO accounts SELECT g, {BALANCE_INITIAL} FROM generate_series(1, {ACCOUNTS}) g;"
        ))
        .await
        .expect("create the bank");
    drop(primary);
    let next_id = Arc::new(AtomicI64::new(1));
    let acked: Arc<Mutex<Vec<i64>>> = Arc::default();
    for cycle in 0..KILL_CYCLES {
        let (p, _) = group.primary().await;
        let port = group.nodes[p].as_ref().unwrap().port();
        let clients = start_clients(port, &next_id, &acked);
        let run_ms = 300 + (cycle as u64 * 137) % 700;
        tokio::time::sleep(Duration::from_millis(run_ms)).await;
        group.kill(p);
        for c in clients {
            let _ = c.await;
        }
        let (_, new_primary) = group.primary().await;
        check_ledger(&new_primary, &acked.lock().unwrap(), cycle).await;
        group.restart(p);
    }
    let acknowledged = acked.lock().unwrap().len();
    eprintln!("{acknowledged} transfers acknowledged across {KILL_CYCLES} failovers");
    assert!(
        acknowledged > KILL_CYCLES,
        "the clients got some transfers through"
    );

    // Every node ends with the primary's data exactly, the restarted ones included.
    let (p, primary) = group.primary().await;
    let expected = snapshot(&primary).await;
    for (n, node) in group.nodes.iter().enumerate() {
        if n == p {
            continue;
        }
        let standby = connect(node.as_ref().unwrap()).await;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let got = snapshot(&standby).await;
            if got == expected {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "node {} did not catch up: {got:?} against {expected:?}",
                n + 1
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Every acknowledged transfer is there once, none is half applied, the money adds up.
async fn check_ledger(c: &Client, acked: &[i64], cycle: usize) {
    let ids: Vec<i64> = c
        .query("SELECT id FROM transfers", &[])
        .await
        .expect("read transfers")
        .iter()
        .map(|r| r.get(0))
        .collect();
    let present: HashSet<i64> = ids.iter().copied().collect();
    assert_eq!(present.len(), ids.len(), "cycle {cycle}: a transfer twice");
    let lost: Vec<&i64> = acked.iter().filter(|id| !present.contains(id)).collect();
    assert!(
        lost.is_empty(),
        "cycle {cycle}: acknowledged transfers lost in the failover: {lost:?}"
    );
    let row = c
        .query_one("SELECT sum(balance)::bigint, count(*) FROM accounts", &[])
        .await
        .expect("read accounts");
    let (total, accounts): (i64, i64) = (row.get(0), row.get(1));
    assert_eq!(accounts, ACCOUNTS);
    assert_eq!(
        total,
        ACCOUNTS * BALANCE_INITIAL,
        "cycle {cycle}: money appeared"
    );
    // Each transfer moved one unit from src to dst: the balances follow from the ledger.
    let row = c
        .query_one(
            &format!(
                "SELECT count(*) FROM accounts a WHERE a.balance <> {BALANCE_INITIAL}
                     - (SELECT count(*) FROM transfers t WHERE t.src = a.id)
                     + (SELECT count(*) FROM transfers t WHERE t.dst = a.id)"
            ),
            &[],
        )
        .await
        .expect("check balances against the ledger");
    let wrong: i64 = row.get(0);
    assert_eq!(wrong, 0, "cycle {cycle}: a transfer half applied");
}

async fn snapshot(c: &Client) -> (Vec<(i32, i64)>, i64) {
    let accounts = c
        .query("SELECT id, balance FROM accounts ORDER BY id", &[])
        .await
        .map(|rows| rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        .unwrap_or_default();
    let transfers: i64 = c
        .query_one("SELECT count(*) FROM transfers", &[])
        .await
        .map(|r| r.get(0))
        .unwrap_or(-1);
    (accounts, transfers)
}

/// `count(*)` and `sum(v)` of table `t` as text, to compare two nodes.
async fn table_digest(client: &Client, table: &str) -> String {
    let row = client
        .query_one(
            &format!("SELECT count(*)::text || '/' || coalesce(sum(v), 0)::text FROM {table}"),
            &[],
        )
        .await
        .unwrap_or_else(|e| panic!("digest of {table}: {e}"));
    row.get(0)
}

/// Polls until node `n` (a standby) has `expected` for each of `tables`.
async fn wait_digests(group: &Group, n: usize, tables: &[(&str, String)]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(c) = try_connect(group.nodes[n].as_ref().unwrap()).await {
            let mut all = true;
            for (table, expected) in tables {
                let got = c
                    .query_one(
                        &format!(
                            "SELECT count(*)::text || '/' || coalesce(sum(v), 0)::text FROM {table}"
                        ),
                        &[],
                    )
                    .await
                    .map(|r| r.get::<_, String>(0));
                all &= got.as_ref().ok() == Some(expected);
            }
            if all {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "node {} did not catch up with {tables:?}",
            n + 1
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn server_log(group: &Group, n: usize) -> String {
    std::fs::read_to_string(group.dirs[n].with_extension("stderr")).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_drop_the_log_and_nodes_behind_it_load_the_primarys() {
    let _one_group = ONE_GROUP_AT_A_TIME.lock().await;
    // Few entries kept after a checkpoint, so that a node behind is sent the checkpoint. The
    // members authenticate each other with a group key.
    let key_file = std::env::temp_dir().join(format!("shoal-group-key-{}", std::process::id()));
    std::fs::write(&key_file, "a group key of 32 bytes, at least\n").unwrap();
    let key_arg = key_file.to_str().unwrap().to_string();
    let mut group = Group::start_with(&[
        "--replication-log-keep",
        "5",
        "--replication-key-file",
        &key_arg,
    ]);
    let (p, primary) = group.settled_primary().await;
    primary
        .batch_execute(
            "CREATE TABLE rows_t (id int PRIMARY KEY, v bigint NOT NULL);
             CREATE INDEX rows_v ON rows_t (v);
             CREATE TABLE cols_t (id int, v bigint) USING columnar;",
        )
        .await
        .unwrap();
    for i in 0..40 {
        primary
            .batch_execute(&format!(
                "INSERT INTO rows_t SELECT g, g * 2 FROM generate_series({0} * 25 + 1, {0} * 25 + 25) g;
                 INSERT INTO cols_t SELECT g, g FROM generate_series({0} * 100 + 1, {0} * 100 + 100) g;",
                i
            ))
            .await
            .unwrap();
    }
    for statement in [
        "UPDATE rows_t SET v = v + 1 WHERE id % 7 = 0",
        "DELETE FROM rows_t WHERE id % 11 = 0",
        "ALTER TABLE rows_t ADD COLUMN note text DEFAULT 'x'",
    ] {
        primary.batch_execute(statement).await.unwrap();
    }
    let tables = |rows: String, cols: String| vec![("rows_t", rows), ("cols_t", cols)];
    let expected = tables(
        table_digest(&primary, "rows_t").await,
        table_digest(&primary, "cols_t").await,
    );
    for n in 0..3 {
        wait_digests(&group, n, &expected).await;
    }
    // Every node checkpoints (a standby of the log it applied) and drops the log before it.
    for n in 0..3 {
        let c = connect(group.nodes[n].as_ref().unwrap()).await;
        c.batch_execute("CHECKPOINT")
            .await
            .unwrap_or_else(|e| panic!("CHECKPOINT on node {}: {e}", n + 1));
        assert!(
            group.dirs[n].join("checkpoints/CURRENT").exists(),
            "node {} has a checkpoint",
            n + 1
        );
    }

    // A standby restarts from its checkpoint and the log after it.
    let standby = (p + 1) % 3;
    group.kill(standby);
    group.restart(standby);
    wait_standby(&group, standby).await;
    wait_digests(&group, standby, &expected).await;
    assert!(
        server_log(&group, standby).contains("loaded checkpoint"),
        "node {} restarted from its checkpoint",
        standby + 1
    );

    // The other standby is away while the group commits and checkpoints on: it comes back
    // behind the log the group kept and is sent the primary's checkpoint.
    let away = (p + 2) % 3;
    group.kill(away);
    for i in 40..60 {
        primary
            .batch_execute(&format!(
                "INSERT INTO rows_t (id, v) SELECT g, g * 2 FROM generate_series({0} * 25 + 1, {0} * 25 + 25) g;
                 INSERT INTO cols_t SELECT g, g FROM generate_series({0} * 100 + 1, {0} * 100 + 100) g;",
                i
            ))
            .await
            .unwrap();
    }
    primary.batch_execute("CHECKPOINT").await.unwrap();
    group.restart(away);
    let expected = tables(
        table_digest(&primary, "rows_t").await,
        table_digest(&primary, "cols_t").await,
    );
    wait_digests(&group, away, &expected).await;
    assert!(
        server_log(&group, away).contains("received the primary's checkpoint"),
        "node {} was sent the checkpoint:\n{}",
        away + 1,
        server_log(&group, away)
    );

    // A fourth node joins from nothing while the primary takes writes.
    let port = free_port();
    let mut peers = group.args[0][3].clone();
    peers.push_str(&format!(",4=127.0.0.1:{port}"));
    // A node with another key is refused.
    let wrong_key = key_file.with_extension("wrong");
    std::fs::write(&wrong_key, "not the group's key, but as long").unwrap();
    let impostor_dir = group.dirs[0].with_file_name("impostor");
    let impostor = support::ShoalServer::start_in(
        impostor_dir,
        &[
            "--node-id",
            "4",
            "--peers",
            &peers,
            "--join",
            "--replication-key-file",
            wrong_key.to_str().unwrap(),
        ],
    )
    .expect("the impostor starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !server_log(&group, p).contains("refused a replication connection") {
        assert!(
            Instant::now() < deadline,
            "the primary did not refuse a wrong key"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(impostor);
    let joining_args = vec![
        "--node-id".to_string(),
        "4".into(),
        "--peers".into(),
        peers,
        "--join".into(),
        "--replication-key-file".into(),
        key_arg.clone(),
    ];
    group.args.push(joining_args);
    group.dirs.push(group.dirs[0].with_file_name("node4"));
    group.nodes.push(None);
    group.frozen.push(false);
    let writer_port = group.port(p);
    let writer = tokio::spawn(async move {
        let conn = format!("host=127.0.0.1 port={writer_port} user=postgres dbname=postgres");
        let (client, connection) = tokio_postgres::connect(&conn, NoTls).await.unwrap();
        tokio::spawn(connection);
        for i in 60..80 {
            client
                .batch_execute(&format!(
                    "INSERT INTO rows_t (id, v) SELECT g, g FROM generate_series({0} * 25 + 1, {0} * 25 + 25) g",
                    i
                ))
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    group.restart(3);
    writer.await.unwrap();
    let expected = tables(
        table_digest(&primary, "rows_t").await,
        table_digest(&primary, "cols_t").await,
    );
    wait_standby(&group, 3).await;
    wait_digests(&group, 3, &expected).await;
    assert!(
        server_log(&group, 3).contains("received the primary's checkpoint"),
        "the new node loaded the primary's checkpoint"
    );
    // The primary counts it among its standbys.
    wait_for_value(
        &primary,
        "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'",
        3,
    )
    .await;
    let node4 = connect(group.nodes[3].as_ref().unwrap()).await;
    let err = node4
        .batch_execute("INSERT INTO rows_t VALUES (-1, 0)")
        .await
        .expect_err("the new node is a standby");
    assert_eq!(sqlstate(&err), "25006", "{err}");
    let _ = std::fs::remove_file(key_file);
    let _ = std::fs::remove_file(wrong_key);
}
