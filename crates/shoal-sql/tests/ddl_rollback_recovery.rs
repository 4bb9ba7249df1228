//! DDL undone by ROLLBACK stays undone after a restart: the undo logs the rows of every table
//! it brings back and the restored catalog (see `ddl::undo`). A row table and a column table
//! dropped in rolled back blocks come back with their rows (after a plain restart, which
//! replays the log, and after a checkpoint); a table created, a column added and an index
//! created in rolled back blocks stay gone; DDL committed beside them stays.

mod common;

use shoal_sql::{Engine, Session};

use common::{no_automatic_checkpoints, run, runtime, scalar, temp_dir};

/// Everything the rolled back DDL could have changed, as one line.
const STATE: &str = "SELECT (SELECT count(*) || '/' || sum(k) FROM rows_t) || ' ' || \
     (SELECT count(*) || '/' || sum(k) FROM cols_t) || ' ' || \
     (SELECT count(*) FROM pg_class WHERE relname IN ('created_t', 'rows_t_v')) || ' ' || \
     (SELECT count(*) FROM information_schema.columns WHERE table_name = 'rows_t') || ' ' || \
     (SELECT count(*) FROM committed_t)";

async fn assert_state(s: &mut Session, expected: &str, when: &str) {
    assert_eq!(scalar(s, STATE).await, expected, "{when}");
    // The restored primary key is enforced.
    let dup = s
        .execute_sql("INSERT INTO rows_t VALUES (1, 'dup')")
        .await
        .pop()
        .unwrap();
    assert_eq!(
        dup.err().map(|e| e.code),
        Some("23505"),
        "{when}: the primary key of the restored table"
    );
}

#[test]
fn rolled_back_ddl_stays_undone_after_restart() {
    let dir = temp_dir("ddl-rollback");
    let rt = runtime();
    let (engine, _) =
        Engine::open(&dir, no_automatic_checkpoints()).expect("open a fresh data directory");
    let mut s = Session::new(engine.clone());
    let expected = "1000/500500 300/45150 0 2 1";
    rt.block_on(async {
        for sql in [
            "CREATE TABLE rows_t (k int PRIMARY KEY, v text)",
            "INSERT INTO rows_t SELECT g, 'v' || g FROM generate_series(1, 1000) g",
            "CREATE TABLE cols_t (k int, v text) USING columnar",
            "INSERT INTO cols_t SELECT g, 'c' || g FROM generate_series(1, 300) g",
            "BEGIN",
            "CREATE TABLE committed_t (k int)",
            "INSERT INTO committed_t VALUES (1)",
            "COMMIT",
            "BEGIN",
            "ALTER TABLE rows_t ADD COLUMN extra int DEFAULT 5",
            "CREATE UNIQUE INDEX rows_t_v ON rows_t (v)",
            "UPDATE rows_t SET extra = 6 WHERE k < 10",
            "ROLLBACK",
            // Last, so that only the undo's image of rows_t can bring its rows back.
            "BEGIN",
            "DROP TABLE rows_t",
            "DROP TABLE cols_t",
            "CREATE TABLE created_t (k int)",
            "INSERT INTO created_t VALUES (1)",
            "ROLLBACK",
        ] {
            run(&mut s, sql).await;
        }
        assert_state(&mut s, expected, "before the restart").await;
    });
    drop(s);
    engine.shutdown();
    drop(engine);

    // Recovery replays the log: the drops, then the undo's images and catalog.
    let (engine, _) = Engine::open(&dir, no_automatic_checkpoints()).expect("recover");
    let mut s = Session::new(engine.clone());
    rt.block_on(assert_state(&mut s, expected, "after replaying the log"));
    engine
        .checkpoint()
        .expect("CHECKPOINT")
        .expect("a durable engine checkpoints");
    drop(s);
    engine.shutdown();
    drop(engine);

    let (engine, report) = Engine::open(&dir, no_automatic_checkpoints()).expect("recover");
    assert!(report.checkpoint_id.is_some(), "{report}");
    let mut s = Session::new(engine.clone());
    rt.block_on(assert_state(
        &mut s,
        expected,
        "after loading the checkpoint",
    ));
    drop(s);
    engine.shutdown();
    drop(engine);
    std::fs::remove_dir_all(&dir).ok();
}
