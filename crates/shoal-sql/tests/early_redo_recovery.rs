//! Transactions whose row redo is logged ahead of their commit (`shoal_storage::early_redo`)
//! recover exactly: with the threshold at 4 KiB, a one-statement INSERT ... SELECT, a
//! transaction that rolls back to a savepoint past logged writes, one that a checkpoint
//! interrupts, and one that never commits all go through `RowChanges` records, and after a
//! restart the table holds what was committed and nothing else. Replay then starts before the
//! checkpoint, and must skip the commits the checkpoint already holds. (A commit record is limited to
//! 1 GiB; without this, a COPY of a few million rows into a row table could not commit.)

mod common;

use std::path::Path;

use shoal_sql::durability::DurabilityOptions;
use shoal_sql::{Engine, Session};
use shoal_wal::Record;

use common::{no_automatic_checkpoints, run, runtime, scalar, temp_dir};

const EARLY_REDO_BYTES: usize = 4096;

fn options() -> DurabilityOptions {
    // The background checkpointer stays out: the test takes its own checkpoint.
    DurabilityOptions {
        early_redo_bytes: EARLY_REDO_BYTES,
        ..no_automatic_checkpoints()
    }
}

/// Row count, key sum and a digest of the values: any lost, extra or stale row changes it.
const SIGNATURE: &str = "SELECT count(*)::text || ' ' || sum(k)::text || ' ' || \
     sum(length(v))::text || ' ' || count(*) FILTER (WHERE v = 'kept')::text FROM t";

fn count_row_change_records(dir: &Path) -> u64 {
    let mut n = 0;
    shoal_wal::read_log(dir, 0, |_, record| {
        if matches!(record, Record::RowChanges { .. }) {
            n += 1;
        }
        Ok::<(), String>(())
    })
    .expect("read the log");
    n
}

#[test]
fn transactions_logged_ahead_of_their_commit_recover_exactly() {
    let dir = temp_dir("early-redo");
    let rt = runtime();
    let (engine, _) = Engine::open(&dir, options()).expect("open a fresh data directory");
    let mut a = Session::new(engine.clone());
    let mut unfinished = Session::new(engine.clone());
    let mut spanning = Session::new(engine.clone());
    let before = rt.block_on(async {
        run(&mut a, "CREATE TABLE t (k int PRIMARY KEY, v text)").await;
        // One statement, ~300 KB of redo: ~70 records ahead of its commit.
        run(
            &mut a,
            "INSERT INTO t SELECT g, repeat('x', 50) FROM generate_series(1, 5000) g",
        )
        .await;
        // Writes after the savepoint are logged, then undone; the commit must not apply them.
        for sql in [
            "BEGIN",
            "INSERT INTO t SELECT g, 'second' FROM generate_series(5001, 6000) g",
            "SAVEPOINT s",
            "UPDATE t SET v = 'undone' WHERE k <= 3000",
            "DELETE FROM t WHERE k > 5500",
            "ROLLBACK TO SAVEPOINT s",
            "UPDATE t SET v = 'kept' WHERE k % 10 = 0",
            "DELETE FROM t WHERE k BETWEEN 100 AND 199",
            "COMMIT",
        ] {
            run(&mut a, sql).await;
        }
        // A transaction that never commits: its chain is in the log, named by nobody.
        run(&mut unfinished, "BEGIN").await;
        run(
            &mut unfinished,
            "INSERT INTO t SELECT g, 'uncommitted' FROM generate_series(10001, 13000) g",
        )
        .await;
        // A checkpoint in the middle of a logged-ahead transaction: replay must start at the
        // chain's first record, before the checkpoint.
        run(&mut spanning, "BEGIN").await;
        run(
            &mut spanning,
            "INSERT INTO t SELECT g, 'spanning' FROM generate_series(20001, 23000) g",
        )
        .await;
        // Commits the checkpoint holds but replay (starting at the open chain) reads past: a key
        // deleted and inserted again must not be replayed on top of the checkpoint's row.
        for sql in [
            "INSERT INTO t VALUES (30000, 'reused')",
            "DELETE FROM t WHERE k = 30000",
            "INSERT INTO t VALUES (30000, 'reused')",
        ] {
            run(&mut a, sql).await;
        }
        engine
            .checkpoint()
            .expect("CHECKPOINT")
            .expect("a durable engine checkpoints");
        run(
            &mut spanning,
            "UPDATE t SET v = 'spanning2' WHERE k BETWEEN 20001 AND 20500",
        )
        .await;
        run(&mut spanning, "COMMIT").await;
        scalar(&mut a, SIGNATURE).await
    });
    assert!(
        before.starts_with("8901 "),
        "5000 + 1000 - 100 deleted + 3000 spanning + 1 reused rows: {before}"
    );
    // The server stops without a final checkpoint: as after a crash, recovery replays the log.
    engine.shutdown();
    drop((a, unfinished, spanning));
    drop(engine);
    assert!(
        count_row_change_records(&dir) > 100,
        "the transactions logged their rows ahead of their commits"
    );

    let (engine, report) = Engine::open(&dir, options()).expect("recover");
    assert!(report.checkpoint_id.is_some(), "{report}");
    let mut s = Session::new(engine.clone());
    let after = rt.block_on(async {
        let uncommitted = scalar(&mut s, "SELECT count(*) FROM t WHERE v = 'uncommitted'").await;
        assert_eq!(uncommitted, "0", "the unfinished transaction came back");
        let spanning2 = scalar(&mut s, "SELECT count(*) FROM t WHERE v = 'spanning2'").await;
        assert_eq!(spanning2, "500");
        scalar(&mut s, SIGNATURE).await
    });
    assert_eq!(
        after, before,
        "recovered table differs from the committed one"
    );
    drop(s);
    engine.shutdown();
    drop(engine);
    std::fs::remove_dir_all(&dir).ok();
}
