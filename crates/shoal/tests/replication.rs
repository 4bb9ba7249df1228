//! Replication groups end to end: three `shoal serve` processes on loopback keep one redo log.
//! The primary writes, the standbys follow and serve reads, and refuse writes as PostgreSQL's
//! hot standby does; clients move money between accounts while the primary is killed with
//! SIGKILL again and again, and every acknowledged transfer is on the new primary, nothing is
//! half applied, and a restarted node catches up with exactly the primary's data.
//! (replication_catchup.rs: checkpoints and joining; redis.rs: the Redis protocol on a group.)

mod support;

use std::collections::HashSet;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::connect;
use support::group::*;
use tokio_postgres::{Client, NoTls};

const ACCOUNTS: i64 = 10;
const BALANCE_INITIAL: i64 = 1_000;
const CLIENTS: usize = 3;
const KILL_CYCLES: usize = 10;

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
