//! An `INSERT ... SELECT` of many rows into a column table: wide rows make more, smaller
//! segments (each is one redo record, shipped whole to a replication group's followers), the
//! segments go into the log ahead of the commit, and after a restart the committed insert is
//! there and the rolled-back one is not.

mod common;

use shoal_sql::{Engine, Session};

use common::{no_automatic_checkpoints, run, runtime, scalar, temp_dir};

const DIGEST: &str =
    "SELECT count(*)::text || ' ' || coalesce(sum(id), 0)::text || ' ' || coalesce(sum(octet_length(pad)::bigint), 0)::text FROM wide";

#[test]
fn wide_rows_make_smaller_segments_that_survive_a_restart() {
    let dir = temp_dir("column-bulk-insert");
    let options = no_automatic_checkpoints();
    let rt = runtime();
    let (engine, _) = Engine::open(&dir, options.clone()).expect("open a fresh data directory");
    // The tables in the order they were made: `narrow`, then `wide`.
    let segment_rows = |made: usize| -> Vec<usize> {
        let mut tables = engine.db.column_tables();
        tables.sort_by_key(|t| t.id());
        tables[made].segments().iter().map(|s| s.rows()).collect()
    };
    let mut s = Session::new(engine.clone());
    let before = rt.block_on(async {
        run(&mut s, "CREATE TABLE narrow (id int) USING columnar").await;
        run(
            &mut s,
            "CREATE TABLE wide (id int, pad text) USING columnar",
        )
        .await;
        run(
            &mut s,
            "INSERT INTO narrow SELECT g FROM generate_series(1, 100000) g",
        )
        .await;
        // About 140 bytes a row: 14 MB.
        run(
            &mut s,
            "INSERT INTO wide SELECT g, repeat(md5(g::text), 4) FROM generate_series(1, 100000) g",
        )
        .await;
        run(&mut s, "BEGIN").await;
        run(
            &mut s,
            "INSERT INTO wide SELECT g, 'rolled back' FROM generate_series(1, 50000) g",
        )
        .await;
        run(&mut s, "ROLLBACK").await;
        scalar(&mut s, DIGEST).await
    });
    assert_eq!(before, "100000 5000050000 12800000");
    assert_eq!(segment_rows(0), vec![65536, 34464]);
    let wide = segment_rows(1);
    assert_eq!(wide.iter().sum::<usize>(), 100000);
    assert!(
        wide.len() >= 4 && wide.iter().all(|&rows| rows < 65536),
        "rows of 140 bytes make segments of at most 4 MB: {wide:?}"
    );

    drop(s);
    engine.shutdown();
    drop(engine);
    let (engine, _) = Engine::open(&dir, options).expect("recover");
    let mut s = Session::new(engine.clone());
    assert_eq!(rt.block_on(scalar(&mut s, DIGEST)), before);
    assert_eq!(
        rt.block_on(scalar(&mut s, "SELECT count(*) FROM narrow")),
        "100000"
    );
    drop(s);
    engine.shutdown();
    drop(engine);
    std::fs::remove_dir_all(&dir).ok();
}
