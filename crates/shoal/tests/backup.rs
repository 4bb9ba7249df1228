//! `shoal backup` of a server under write load restores to a consistent state: transfers
//! between accounts run on two connections while the backup is taken; a server started on the
//! backup has every transfer committed before the backup began, none committed after it
//! ended, each one whole (every account's balance is what its transfers make it), and the
//! total unchanged. It then takes writes of its own, and the original server goes on.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use support::{connect, ShoalServer};
use tokio_postgres::error::SqlState;

const ACCOUNTS: i64 = 50;
const OPENING_BALANCE: i64 = 1_000;

async fn count(client: &tokio_postgres::Client) -> i64 {
    client
        .query_one("SELECT count(*) FROM transfers", &[])
        .await
        .unwrap()
        .get(0)
}

/// Moves money between accounts until `stop`, each transfer one transaction.
async fn transfers(server_port: u16, seed: i64, stop: Arc<AtomicBool>) {
    let client = support::connect_to(&format!("127.0.0.1:{server_port}")).await;
    let mut n = seed;
    while !stop.load(Ordering::Relaxed) {
        n += 7;
        let (from, to, amount) = (n % ACCOUNTS, (n * 3 + 1) % ACCOUNTS, n % 13 + 1);
        if from == to {
            continue;
        }
        match client
            .batch_execute(&format!(
                "BEGIN;
                 UPDATE accounts SET balance = balance - {amount} WHERE id = {from};
                 UPDATE accounts SET balance = balance + {amount} WHERE id = {to};
                 INSERT INTO transfers (from_id, to_id, amount) VALUES ({from}, {to}, {amount});
                 COMMIT;"
            ))
            .await
        {
            // Two writers lock the same accounts in either order, so a deadlock (or a
            // serialization failure) is a legitimate outcome: roll back and go on, as
            // an application would.
            Ok(()) => {}
            Err(error)
                if matches!(
                    error.code(),
                    Some(&SqlState::T_R_DEADLOCK_DETECTED)
                        | Some(&SqlState::T_R_SERIALIZATION_FAILURE)
                ) =>
            {
                client.batch_execute("ROLLBACK").await.unwrap();
            }
            Err(error) => panic!("transfer failed: {error}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_under_writes_restores_to_a_consistent_state() {
    let server = ShoalServer::start();
    let client = connect(&server).await;
    client
        .batch_execute(&format!(
            "CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
             INSERT INTO accounts SELECT g, {OPENING_BALANCE} FROM generate_series(0, {}) g;
             CREATE TABLE transfers (id bigserial PRIMARY KEY, from_id int, to_id int, amount int);
             CREATE TABLE facts (n int) USING columnar;
             INSERT INTO facts SELECT g FROM generate_series(1, 1000) g;
             CHECKPOINT;",
            ACCOUNTS - 1
        ))
        .await
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|seed| tokio::spawn(transfers(server.port(), seed, stop.clone())))
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;

    let backup_dir = server.data_dir().with_extension("backup");
    let committed_before = count(&client).await;
    let backup = {
        let (dir, data_dir, port) = (
            backup_dir.clone(),
            server.data_dir().to_path_buf(),
            server.port(),
        );
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_shoal"))
                .arg("backup")
                .arg("--to")
                .arg(&dir)
                .arg("--data-dir")
                .arg(&data_dir)
                .args(["--port", &port.to_string()])
                .output()
                .expect("run shoal backup")
        })
        .await
        .unwrap()
    };
    let committed_after = count(&client).await;
    assert!(
        backup.status.success(),
        "shoal backup failed: {}",
        String::from_utf8_lossy(&backup.stderr)
    );
    assert!(String::from_utf8_lossy(&backup.stdout).contains("backup written to"));
    assert!(backup_dir.join("backup_label").exists());
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    assert!(
        committed_after > committed_before,
        "the writers ran during the backup"
    );

    // A second backup into the same directory is refused.
    let again = std::process::Command::new(env!("CARGO_BIN_EXE_shoal"))
        .arg("backup")
        .arg("--to")
        .arg(&backup_dir)
        .arg("--data-dir")
        .arg(server.data_dir())
        .args(["--port", &server.port().to_string()])
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("is not empty"));

    let restored = ShoalServer::start_in(backup_dir.clone(), &[]).expect("start on the backup");
    let copy = connect(&restored).await;
    let transfers_restored = count(&copy).await;
    assert!(
        (committed_before..=committed_after).contains(&transfers_restored),
        "{committed_before} <= {transfers_restored} <= {committed_after}"
    );
    let total: i64 = copy
        .query_one("SELECT sum(balance)::int8 FROM accounts", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(total, ACCOUNTS * OPENING_BALANCE);
    // Every transfer whole: each balance is the opening one plus what its transfers moved.
    let off: i64 = copy
        .query_one(
            &format!(
                "SELECT count(*) FROM accounts a WHERE a.balance <> {OPENING_BALANCE}
                   - coalesce((SELECT sum(amount) FROM transfers WHERE from_id = a.id), 0)
                   + coalesce((SELECT sum(amount) FROM transfers WHERE to_id = a.id), 0)"
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        off, 0,
        "accounts whose balance disagrees with their transfers"
    );
    let facts: i64 = copy
        .query_one("SELECT count(*) FROM facts", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(facts, 1000);
    copy.batch_execute("INSERT INTO transfers (from_id, to_id, amount) VALUES (1, 2, 0)")
        .await
        .unwrap();
    assert_eq!(count(&copy).await, transfers_restored + 1);

    // The original server let its files go: its next checkpoint removes the old log.
    client.batch_execute("CHECKPOINT").await.unwrap();
    assert!(count(&client).await >= committed_after);
    drop(restored);
}

#[tokio::test]
async fn pg_backup_stop_without_a_start_is_refused() {
    let server = ShoalServer::start();
    let client = connect(&server).await;
    let e = client
        .query("SELECT * FROM pg_backup_stop()", &[])
        .await
        .unwrap_err();
    let db = e.as_db_error().expect("a server error");
    assert_eq!(db.code().code(), "55000");
    assert_eq!(db.message(), "backup is not in progress");
    let start: String = client
        .query_one("SELECT pg_backup_start('x')", &[])
        .await
        .unwrap()
        .get(0);
    assert!(start.contains('/'), "an LSN: {start}");
    let e = client
        .query("SELECT pg_backup_start('again')", &[])
        .await
        .unwrap_err();
    assert_eq!(e.as_db_error().unwrap().code().code(), "55000");
    let row = client
        .query_one("SELECT lsn, labelfile FROM pg_backup_stop()", &[])
        .await
        .unwrap();
    let label: String = row.get(1);
    assert!(label.contains("LABEL: x"), "{label}");
}
