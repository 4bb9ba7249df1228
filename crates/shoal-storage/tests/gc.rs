//! Garbage collection: memory stays bounded under update-heavy load, versions an open snapshot
//! can still see survive, deleted rows and stale index entries go, and the background thread
//! works and stops with the database.

mod common;

use std::ops::Bound;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use common::*;
use shoal_storage::*;

#[test]
fn memory_returns_near_start_after_many_updates_and_vacuum() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 100, 0);
    db.vacuum();
    let start_bytes = t.memory_bytes();
    for i in 0..100_000 {
        let mut txn = db.begin(IsolationLevel::ReadCommitted);
        assert!(add_balance(&db, &t, &mut txn, i % 100, 1).unwrap());
        db.commit(txn).unwrap();
    }
    let stats = db.vacuum();
    let end_bytes = t.memory_bytes();
    assert!(
        end_bytes <= start_bytes + start_bytes / 10,
        "start {start_bytes} end {end_bytes}, {stats:?}"
    );
    let mut r = db.begin(IsolationLevel::ReadCommitted);
    let s = db.statement_snapshot(&mut r);
    for id in 0..100 {
        assert_eq!(balance(&t, &s, id), Some(1000));
    }
}

#[test]
fn hot_rows_stay_short_between_vacuums() {
    // Writers prune below the last published horizon, so chains do not grow with update count.
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 10, 0);
    let mut peak = 0;
    for round in 0..20 {
        for i in 0..2000 {
            let mut txn = db.begin(IsolationLevel::ReadCommitted);
            add_balance(&db, &t, &mut txn, i % 10, 1).unwrap();
            db.commit(txn).unwrap();
        }
        if round > 0 {
            peak = peak.max(t.memory_bytes());
        }
        db.vacuum();
    }
    let after = t.memory_bytes();
    assert!(peak < after * 20, "peak {peak} vs vacuumed {after}");
}

#[test]
fn versions_visible_to_an_open_snapshot_survive() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 10, 5);
    let mut old = db.begin(IsolationLevel::RepeatableRead);
    let s_old = db.statement_snapshot(&mut old);
    assert_eq!(db.oldest_active_snapshot(), s_old.ts);
    for _ in 0..10 {
        let mut txn = db.begin(IsolationLevel::ReadCommitted);
        for id in 0..10 {
            add_balance(&db, &t, &mut txn, id, 1).unwrap();
        }
        db.commit(txn).unwrap();
    }
    let mut txn = db.begin(IsolationLevel::ReadCommitted);
    let s = db.statement_snapshot(&mut txn);
    let (r9, _) = get(&t, &s, 9).unwrap();
    t.delete(&mut txn, &r9, &s).unwrap();
    db.commit(txn).unwrap();

    let stats = db.vacuum();
    // The horizon is the old snapshot: every version ended after it, so nothing is garbage yet
    // (GC by horizon, like PostgreSQL's VACUUM, not by per-snapshot intervals).
    assert_eq!(stats, GcStats::default());
    for id in 0..10 {
        assert_eq!(balance(&t, &s_old, id), Some(5));
    }
    db.commit(old).unwrap();
    let stats = db.vacuum();
    // Rows 0..8 keep only their newest of 11 versions; deleted row 9 goes entirely.
    assert_eq!(
        stats,
        GcStats {
            versions_freed: 9 * 10 + 11,
            rows_freed: 1,
            index_entries_freed: 1,
            segments_freed: 0,
        }
    );
}

#[test]
fn stale_index_entries_and_rolled_back_rows_are_reclaimed() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 10, 0);
    db.vacuum();
    let base = t.memory_bytes();
    // Key changes leave the old key's entries behind until GC.
    let mut x = db.begin(IsolationLevel::ReadCommitted);
    let s = db.statement_snapshot(&mut x);
    for id in 0..10 {
        let (r, _) = get(&t, &s, id).unwrap();
        t.update(&mut x, &r, &s, &row(id + 100, 0, "")).unwrap();
    }
    db.commit(x).unwrap();
    // A rolled-back bulk insert leaves dead rows and entries.
    let mut y = db.begin(IsolationLevel::ReadCommitted);
    for id in 1000..2000 {
        t.insert(&mut y, &row(id, 0, "")).unwrap();
    }
    db.rollback(y);
    let stats = db.vacuum();
    assert_eq!(stats.rows_freed, 1000);
    assert_eq!(stats.index_entries_freed, 1010);
    assert_eq!(stats.versions_freed, 10);
    assert!(
        t.memory_bytes() <= base + base / 10,
        "{} vs {base}",
        t.memory_bytes()
    );
    let mut r = db.begin(IsolationLevel::ReadCommitted);
    let s = db.statement_snapshot(&mut r);
    assert_eq!(ids(&t, &s), (100..110).collect::<Vec<_>>());
    assert_eq!(t.row_count_estimate(), 10);
    let mut n = 0;
    t.index_scan(
        PK,
        &s,
        Bound::Included(&[Value::Int32(0)]),
        Bound::Excluded(&[Value::Int32(100)]),
        |_, _| {
            n += 1;
            true
        },
    )
    .unwrap();
    assert_eq!(n, 0);
}

#[test]
fn background_gc_reclaims_and_stops_with_the_database() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 10, 0);
    let gc = db.start_background_gc(5);
    for i in 0..5000 {
        let mut txn = db.begin(IsolationLevel::ReadCommitted);
        add_balance(&db, &t, &mut txn, i % 10, 1).unwrap();
        db.commit(txn).unwrap();
    }
    let mut txn = db.begin(IsolationLevel::ReadCommitted);
    let s = db.statement_snapshot(&mut txn);
    let (r0, _) = get(&t, &s, 0).unwrap();
    t.delete(&mut txn, &r0, &s).unwrap();
    db.commit(txn).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while t.row_count_estimate() != 9 && std::time::Instant::now() < deadline {
        thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        t.row_count_estimate(),
        9,
        "background GC removed the deleted row"
    );
    let weak = Arc::downgrade(&db);
    drop(t);
    drop(db);
    gc.join().unwrap();
    assert!(weak.upgrade().is_none());
}

#[test]
fn gc_runs_safely_alongside_readers_and_writers() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 50, 0);
    thread::scope(|s| {
        for w in 0..2 {
            let (db, t) = (&db, &t);
            s.spawn(move || {
                for i in 0..3000 {
                    let mut txn = db.begin(IsolationLevel::ReadCommitted);
                    add_balance(db, t, &mut txn, (i * 7 + w) % 50, 1).unwrap();
                    db.commit(txn).unwrap();
                }
            });
        }
        let (db, t) = (&db, &t);
        s.spawn(move || {
            for _ in 0..200 {
                let mut txn = db.begin(IsolationLevel::RepeatableRead);
                let snap = db.statement_snapshot(&mut txn);
                let first = ids(t, &snap);
                thread::yield_now();
                assert_eq!(ids(t, &snap), first);
                assert_eq!(first.len(), 50);
                db.commit(txn).unwrap();
            }
        });
        s.spawn(move || {
            for _ in 0..50 {
                db.vacuum();
                thread::sleep(Duration::from_millis(1));
            }
        });
    });
    let mut r = db.begin(IsolationLevel::ReadCommitted);
    let s = db.statement_snapshot(&mut r);
    let mut total = 0;
    for id in 0..50 {
        total += balance(&t, &s, id).unwrap();
    }
    assert_eq!(total, 6000);
}

/// A checkpoint splits a table's heap among its threads once (`heap_parts`) and scans the parts
/// later; GC dropping an emptied chunk in between must not make a part skip or repeat rows.
/// Each part keeps heap order (here key order), so its rows load into sorted index runs.
#[test]
fn heap_parts_cover_every_row_once_while_gc_drops_chunks() {
    const ROWS: i32 = 4096 * 7;
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, ROWS, 0);
    // Delete the second chunk's rows, so GC can drop that chunk.
    let deleted = 4096..8192;
    let mut txn = db.begin(IsolationLevel::ReadCommitted);
    let snap = db.statement_snapshot(&mut txn);
    for id in deleted.clone() {
        let (r, _) = get(&t, &snap, id).expect("loaded");
        assert!(matches!(
            t.delete(&mut txn, &r, &snap).unwrap(),
            WriteOutcome::Done
        ));
    }
    db.commit(txn).unwrap();
    let mut reader = db.begin(IsolationLevel::RepeatableRead);
    let snap = db.statement_snapshot(&mut reader);
    let parts = t.heap_parts(3);
    assert_eq!(parts.len(), 3);
    db.vacuum();
    let mut seen = Vec::new();
    for part in &parts {
        let mut ids = Vec::new();
        t.scan_heap_part(&snap, part, |_, bytes| {
            match row_codec::decode_column(&t.types(), bytes, 0) {
                Value::Int32(id) => ids.push(id),
                v => panic!("{v:?}"),
            }
            true
        });
        assert!(ids.is_sorted(), "a part keeps heap order");
        seen.extend(ids);
    }
    seen.sort_unstable();
    let expected: Vec<i32> = (0..ROWS).filter(|id| !deleted.contains(id)).collect();
    assert_eq!(seen, expected);
    db.rollback(reader);
}

/// Background GC steps until the table's pass comes back idle; panics after `max_steps`.
fn step_until_idle(db: &Database, t: &RowTable, max_steps: usize) -> GcStats {
    let mut total = GcStats::default();
    for _ in 0..max_steps {
        if t.gc_is_idle() {
            return total;
        }
        let s = db.background_gc_step();
        total.versions_freed += s.versions_freed;
        total.rows_freed += s.rows_freed;
        total.index_entries_freed += s.index_entries_freed;
    }
    panic!("the table's GC did not go idle in {max_steps} steps ({total:?})");
}

#[test]
fn background_gc_idles_on_a_table_until_it_is_written() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 100, 0);
    assert!(!t.gc_is_idle(), "a table nothing swept yet is not idle");
    // One pass finds nothing, and then the table is skipped.
    assert_eq!(step_until_idle(&db, &t, 3), GcStats::default());
    assert!(t.gc_is_idle());

    // An update leaves an older version: the table is swept again until it is gone.
    let mut txn = db.begin(IsolationLevel::ReadCommitted);
    assert!(add_balance(&db, &t, &mut txn, 7, 5).unwrap());
    assert!(!t.gc_is_idle(), "a write marks the table");
    db.commit(txn).unwrap();
    let freed = step_until_idle(&db, &t, 4);
    assert_eq!(freed.versions_freed, 1, "{freed:?}");

    // While a transaction's insert is uncommitted, or an open snapshot keeps a deleted
    // version, every pass finds work and the table stays swept.
    let mut open = db.begin(IsolationLevel::RepeatableRead);
    let snap = db.statement_snapshot(&mut open);
    let mut del = db.begin(IsolationLevel::ReadCommitted);
    let s = db.statement_snapshot(&mut del);
    let (r, _) = get(&t, &s, 3).unwrap();
    t.delete(&mut del, &r, &s).unwrap();
    db.commit(del).unwrap();
    let mut ins = db.begin(IsolationLevel::ReadCommitted);
    t.insert(&mut ins, &row(500, 0, "")).unwrap();
    for _ in 0..5 {
        db.background_gc_step();
        assert!(!t.gc_is_idle());
    }
    assert_eq!(
        balance(&t, &snap, 3),
        Some(0),
        "the open snapshot still sees row 3"
    );
    db.rollback(ins);
    db.commit(open).unwrap();
    let freed = step_until_idle(&db, &t, 4);
    // The deleted row and the rolled-back insert go, with their index entries.
    assert_eq!(freed.rows_freed, 2, "{freed:?}");
    assert_eq!(freed.index_entries_freed, 2, "{freed:?}");
    let mut r = db.begin(IsolationLevel::ReadCommitted);
    let s = db.statement_snapshot(&mut r);
    assert_eq!(ids(&t, &s).len(), 99);
}

/// A queue popped from its head: a scan that walks past the entries of rows deleted before
/// every open snapshot removes them, so the next scan from the head does not walk them again
/// (before the background GC gets there), and a snapshot that can still see them keeps them.
#[test]
fn scans_prune_the_dead_entries_they_walk_past() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 200, 0);
    let first_live = |snap: &Snapshot| {
        let mut found = None;
        t.index_scan(PK, snap, Bound::Unbounded, Bound::Unbounded, |_, bytes| {
            found = Some(t.decode_row(bytes)[0].clone());
            false
        })
        .unwrap();
        found
    };
    let entries_read = || t.index_activity(PK).unwrap().idx_tup_read;
    // An old snapshot that still sees every row.
    let mut old = db.begin(IsolationLevel::RepeatableRead);
    let old_snap = db.statement_snapshot(&mut old);
    let mut txn = db.begin(IsolationLevel::ReadCommitted);
    let snap = db.statement_snapshot(&mut txn);
    for id in 0..100 {
        let (r, _) = get(&t, &snap, id).unwrap();
        t.delete(&mut txn, &r, &snap).unwrap();
    }
    db.commit(txn).unwrap();
    let mut reader = db.begin(IsolationLevel::ReadCommitted);
    let fresh = db.statement_snapshot(&mut reader);
    // While the old snapshot is open, the entries stay: every scan walks them.
    for _ in 0..2 {
        let before = entries_read();
        assert_eq!(first_live(&fresh), Some(Value::Int32(100)));
        assert_eq!(entries_read() - before, 101);
    }
    assert_eq!(first_live(&old_snap), Some(Value::Int32(0)));
    db.rollback(old);
    db.rollback(reader);
    // Then the first scan walks them once and removes them.
    let mut reader = db.begin(IsolationLevel::ReadCommitted);
    let fresh = db.statement_snapshot(&mut reader);
    let before = entries_read();
    assert_eq!(first_live(&fresh), Some(Value::Int32(100)));
    assert_eq!(entries_read() - before, 101);
    let before = entries_read();
    assert_eq!(first_live(&fresh), Some(Value::Int32(100)));
    assert_eq!(entries_read() - before, 1);
    assert_eq!(ids(&t, &fresh), (100..200).collect::<Vec<_>>());
    db.rollback(reader);
}
