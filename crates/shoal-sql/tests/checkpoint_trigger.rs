//! The automatic checkpoint does not repeat a checkpoint that a CHECKPOINT command already
//! took. After a bulk load the log is over its size trigger, so the checkpointer starts one,
//! and a user (or the taxi benchmark) typing CHECKPOINT at the same moment made the
//! checkpointer wait for the lock and then write the same multi-gigabyte image a second time,
//! beside the queries that followed.

mod common;

use std::time::Duration;

use shoal_sql::durability::DurabilityOptions;
use shoal_sql::{Engine, Session};

use common::temp_dir;

#[test]
fn automatic_checkpoint_is_skipped_when_a_command_covered_the_log() {
    let dir = temp_dir("checkpoint-trigger");
    let options = DurabilityOptions {
        // Never due by size, and by time only an hour after the last: the background
        // checkpointer stays out of the test, which passes its own "time since the last".
        checkpoint_log_bytes: u64::MAX,
        checkpoint_interval_s: 3600,
        ..DurabilityOptions::default()
    };
    let (engine, _) = Engine::open(&dir, options).expect("open a fresh data directory");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let durability = engine.durability.clone().expect("a durable engine");
    let mut session = Session::new(engine.clone());
    rt.block_on(async {
        for sql in [
            "CREATE TABLE t (k int PRIMARY KEY, v text)",
            "INSERT INTO t SELECT g, 'x' FROM generate_series(1, 1000) g",
        ] {
            let results = session.execute_sql(sql).await;
            assert!(results.iter().all(|r| r.is_ok()), "{sql}: {results:?}");
        }
    });
    let an_hour_later = Duration::from_secs(3600);
    engine
        .checkpoint()
        .expect("CHECKPOINT")
        .expect("a durable engine checkpoints");
    let again = durability
        .checkpoint_if_due(&engine.db, &engine.catalog, an_hour_later)
        .expect("no error");
    assert!(
        again.is_none(),
        "nothing was logged after the CHECKPOINT, yet another checkpoint was written"
    );
    // New log makes it due: one checkpoint, then not again.
    rt.block_on(async {
        let results = session
            .execute_sql("INSERT INTO t VALUES (5000, 'y')")
            .await;
        assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
    });
    let report = durability
        .checkpoint_if_due(&engine.db, &engine.catalog, an_hour_later)
        .expect("no error")
        .expect("log written after the last checkpoint makes one due");
    assert_eq!(report.rows, 1001, "the checkpoint holds every row");
    assert!(durability
        .checkpoint_if_due(&engine.db, &engine.catalog, an_hour_later)
        .expect("no error")
        .is_none());
    drop(session);
    engine.shutdown();
    drop(engine);
    std::fs::remove_dir_all(&dir).ok();
}
