//! Merging a column table's small segments (`dml::compact`): single-row INSERTs leave one
//! segment per row; VACUUM merges them into one segment by an ordinary transaction, a snapshot
//! taken before the merge still reads the old segments, GC drops them once no snapshot can see
//! them, and the merged table survives a restart with the same rows.

mod common;

use shoal_sql::{Engine, Session};

use common::{no_automatic_checkpoints, run, runtime, scalar, temp_dir};

const SIGNATURE: &str = "SELECT count(*)::text || ' ' || sum(id)::text || ' ' || \
     count(*) FILTER (WHERE v = 'updated')::text FROM t";

#[test]
fn vacuum_merges_small_segments_and_gc_drops_the_old_ones() {
    let dir = temp_dir("segment-merge");
    let options = no_automatic_checkpoints();
    let rt = runtime();
    let (engine, _) = Engine::open(&dir, options.clone()).expect("open a fresh data directory");
    let segments = || {
        let tables = engine.db.column_tables();
        assert_eq!(tables.len(), 1);
        tables[0].segments().len()
    };
    let mut s = Session::new(engine.clone());
    let mut old = Session::new(engine.clone());
    let before = rt.block_on(async {
        run(&mut s, "CREATE TABLE t (id int, v text) USING columnar").await;
        for id in 0..200 {
            run(&mut s, &format!("INSERT INTO t VALUES ({id}, 'row {id}')")).await;
        }
        run(&mut s, "DELETE FROM t WHERE id % 7 = 0").await;
        run(&mut s, "UPDATE t SET v = 'updated' WHERE id % 5 = 0").await;
        scalar(&mut s, SIGNATURE).await
    });
    // One segment per INSERT and one for the UPDATE; background GC may already have dropped
    // those whose only row is deleted.
    assert!(segments() >= 138, "one segment per statement");
    let old_count = rt.block_on(async {
        run(&mut old, "BEGIN ISOLATION LEVEL REPEATABLE READ").await;
        scalar(&mut old, "SELECT count(*) FROM t").await
    });

    rt.block_on(run(&mut s, "VACUUM"));
    // 200 INSERT segments and the UPDATE's: the 63 whose only row was deleted before the old
    // snapshot was taken are dropped; the 138 with live rows stay beside the merged one.
    let after_merge = segments();
    assert_eq!(
        after_merge, 139,
        "the old segments stay while a snapshot from before the merge may read them: {after_merge}"
    );
    rt.block_on(async {
        assert_eq!(
            scalar(&mut s, SIGNATURE).await,
            before,
            "the merge changed the rows"
        );
        assert_eq!(
            scalar(&mut old, "SELECT count(*) FROM t").await,
            old_count,
            "an older snapshot reads the rows it saw"
        );
        run(&mut old, "COMMIT").await;
        run(&mut s, "VACUUM").await;
    });
    assert_eq!(segments(), 1, "GC dropped the merged-away segments");
    let size: i64 = rt
        .block_on(scalar(&mut s, "SELECT pg_total_relation_size('t')"))
        .parse()
        .unwrap();
    assert!(
        size < 64 << 10,
        "one segment of 172 rows takes {size} bytes"
    );
    assert_eq!(rt.block_on(scalar(&mut s, SIGNATURE)), before);

    // The merge is in the log like any write: after a restart the rows are the same.
    drop((s, old));
    engine.shutdown();
    drop(engine);
    let (engine, _) = Engine::open(&dir, options).expect("recover");
    let mut s = Session::new(engine.clone());
    assert_eq!(rt.block_on(scalar(&mut s, SIGNATURE)), before);
    drop(s);
    engine.shutdown();
    drop(engine);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn vacuum_rewrites_a_half_deleted_segment_and_its_memory_comes_back() {
    let dir = temp_dir("segment-sparse");
    let options = no_automatic_checkpoints();
    let rt = runtime();
    let (engine, _) = Engine::open(&dir, options.clone()).expect("open a fresh data directory");
    let segment_rows = || {
        let tables = engine.db.column_tables();
        let mut rows: Vec<usize> = tables[0].segments().iter().map(|s| s.rows()).collect();
        rows.sort();
        rows
    };
    let mut s = Session::new(engine.clone());
    let size = |s: &mut Session| -> i64 {
        rt.block_on(scalar(s, "SELECT pg_total_relation_size('t')"))
            .parse()
            .unwrap()
    };
    rt.block_on(async {
        run(&mut s, "CREATE TABLE t (id int, v text) USING columnar").await;
        // Few distinct texts: the column's dictionary keeps every value it was given (bounded
        // at 1 MiB), and the point here is the segments' memory.
        run(
            &mut s,
            "INSERT INTO t SELECT g, 'kind ' || g % 10 FROM generate_series(1, 20000) g",
        )
        .await;
        // A third deleted: not worth a rewrite.
        run(&mut s, "DELETE FROM t WHERE id % 3 = 0").await;
        run(&mut s, "VACUUM").await;
    });
    assert_eq!(
        segment_rows(),
        vec![20000],
        "a two-thirds-live segment stays"
    );
    let full_size = size(&mut s);
    let before = rt.block_on(async {
        run(&mut s, "DELETE FROM t WHERE id % 3 = 1 AND id > 100").await;
        run(
            &mut s,
            "UPDATE t SET v = 'updated' WHERE id % 5 = 0 AND id <= 2000",
        )
        .await;
        scalar(&mut s, SIGNATURE).await
    });
    rt.block_on(async {
        // The first VACUUM moves the live rows, the second drops the emptied segment.
        run(&mut s, "VACUUM").await;
        run(&mut s, "VACUUM").await;
    });
    let live: usize = rt
        .block_on(scalar(&mut s, "SELECT count(*) FROM t"))
        .parse()
        .unwrap();
    assert_eq!(
        segment_rows().iter().sum::<usize>(),
        live,
        "no dead rows are kept"
    );
    assert_eq!(rt.block_on(scalar(&mut s, SIGNATURE)), before);
    let merged_size = size(&mut s);
    assert!(
        merged_size * 2 < full_size,
        "{live} live rows take {merged_size} bytes, the full segment took {full_size}"
    );

    drop(s);
    engine.shutdown();
    drop(engine);
    let (engine, _) = Engine::open(&dir, options).expect("recover");
    let mut s = Session::new(engine.clone());
    assert_eq!(rt.block_on(scalar(&mut s, SIGNATURE)), before);
    drop(s);
    engine.shutdown();
    drop(engine);
    std::fs::remove_dir_all(&dir).ok();
}
