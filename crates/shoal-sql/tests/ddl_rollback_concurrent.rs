//! ROLLBACK of DDL while other sessions work on the same objects (PostgreSQL would make them
//! wait on its locks; Shoal lets them go on): the rollback must not destroy what the others
//! committed. A column another session added, a name another session took and rows another
//! transaction is writing all survive, also across a restart; statements that changed the
//! catalog meanwhile are never taken for the rolled back transaction's own.

mod common;

use shoal_sql::{Engine, Session};

use common::{no_automatic_checkpoints, run, runtime, scalar, temp_dir};

const STATE: &str = "SELECT (SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute \
     WHERE attrelid = 'cols'::regclass AND attnum > 0) || ' ' || \
     (SELECT count(*) FROM pg_class WHERE relname = 'named') || ' ' || \
     (SELECT string_agg(v, ',') FROM named) || ' ' || \
     (SELECT count(*) || '/' || sum(k) FROM busy) || ' ' || \
     (SELECT count(*) FROM pg_class WHERE relname = 'other')";

#[test]
fn rollback_leaves_other_sessions_ddl_and_rows_alone() {
    let dir = temp_dir("ddl-rollback-concurrent");
    let rt = runtime();
    let (engine, _) =
        Engine::open(&dir, no_automatic_checkpoints()).expect("open a fresh data directory");
    let mut a = Session::new(engine.clone());
    let mut b = Session::new(engine.clone());
    let expected = "k,x,y 1 theirs 2/3 1";
    rt.block_on(async {
        for sql in [
            "CREATE TABLE cols (k int)",
            "CREATE TABLE named (v text)",
            "INSERT INTO named VALUES ('mine')",
            "CREATE TABLE busy (k int)",
            "INSERT INTO busy VALUES (1)",
        ] {
            run(&mut a, sql).await;
        }
        for sql in [
            "BEGIN",
            "ALTER TABLE cols ADD COLUMN x int",
            "DROP TABLE named",
            "ALTER TABLE busy ADD COLUMN extra int DEFAULT 5",
        ] {
            run(&mut a, sql).await;
        }
        for sql in [
            // Committed on top of A's uncommitted DDL.
            "ALTER TABLE cols ADD COLUMN y int",
            "CREATE TABLE named (v text)",
            "INSERT INTO named VALUES ('theirs')",
            "CREATE TABLE other (i int)",
            // In flight, written with A's added column, when A rolls back.
            "BEGIN",
            "INSERT INTO busy VALUES (2, 6)",
        ] {
            run(&mut b, sql).await;
        }
        run(&mut a, "ROLLBACK").await;
        run(&mut b, "COMMIT").await;
        assert_eq!(scalar(&mut a, STATE).await, expected, "after the rollback");
    });
    drop((a, b));
    engine.shutdown();
    drop(engine);

    let (engine, _) = Engine::open(&dir, no_automatic_checkpoints()).expect("recover");
    let mut s = Session::new(engine.clone());
    rt.block_on(async {
        assert_eq!(scalar(&mut s, STATE).await, expected, "after a restart");
        // Every row of the table written across the rollback reads back.
        assert_eq!(scalar(&mut s, "SELECT sum(extra) FROM busy").await, "11");
    });
    drop(s);
    engine.shutdown();
    drop(engine);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_primary_key_that_no_longer_holds_is_not_restored() {
    let rt = runtime();
    let engine = Engine::new();
    let mut a = Session::new(engine.clone());
    let mut b = Session::new(engine.clone());
    rt.block_on(async {
        run(&mut a, "CREATE TABLE keyed (k int PRIMARY KEY)").await;
        run(&mut a, "INSERT INTO keyed VALUES (1)").await;
        run(&mut a, "BEGIN").await;
        run(&mut a, "ALTER TABLE keyed DROP CONSTRAINT keyed_pkey").await;
        // Committed while the key is gone: the index cannot be rebuilt over it.
        run(&mut b, "INSERT INTO keyed VALUES (1)").await;
        run(&mut a, "ROLLBACK").await;
        let described = scalar(
            &mut a,
            "SELECT (SELECT count(*) FROM pg_constraint WHERE conname = 'keyed_pkey') || ' ' || \
             (SELECT count(*) FROM pg_indexes WHERE indexname = 'keyed_pkey') || ' ' || \
             (SELECT count(*) FROM keyed)",
        )
        .await;
        assert_eq!(
            described, "0 0 2",
            "the catalog does not claim a key its rows break"
        );
    });
}
