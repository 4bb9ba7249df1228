//! Visibility, isolation levels, savepoints, unique indexes, DDL and the redo hook, driven
//! through the public storage API from a single thread (interleavings are explicit).

mod common;

use std::ops::Bound;
use std::sync::{Arc, Mutex};

use common::*;
use shoal_storage::*;

#[test]
fn own_writes_visible_others_not_until_commit() {
    let db = Database::new();
    let t = accounts(&db);
    let mut a = db.begin(IsolationLevel::ReadCommitted);
    let mut b = db.begin(IsolationLevel::ReadCommitted);
    t.insert(&mut a, &row(1, 100, "x")).unwrap();
    let sa = db.statement_snapshot(&mut a);
    let sb = db.statement_snapshot(&mut b);
    assert_eq!(balance(&t, &sa, 1), Some(100), "own insert is visible");
    assert_eq!(
        balance(&t, &sb, 1),
        None,
        "uncommitted insert of another is not"
    );
    assert_eq!(t.live_row_count(&sb), 0);
    let ts = db.commit(a).unwrap();
    assert!(ts >= 1);
    assert_eq!(
        balance(&t, &sb, 1),
        None,
        "old snapshot still does not see it"
    );
    let sb2 = db.statement_snapshot(&mut b);
    assert_eq!(
        balance(&t, &sb2, 1),
        Some(100),
        "next statement (READ COMMITTED) does"
    );
    db.commit(b).unwrap();
}

#[test]
fn repeatable_read_keeps_its_snapshot() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 3, 10);
    let mut rr = db.begin(IsolationLevel::RepeatableRead);
    let s1 = db.statement_snapshot(&mut rr);
    let mut w = db.begin(IsolationLevel::ReadCommitted);
    add_balance(&db, &t, &mut w, 1, 5).unwrap();
    let sw = db.statement_snapshot(&mut w);
    let (r2, _) = get(&t, &sw, 2).unwrap();
    assert_eq!(t.delete(&mut w, &r2, &sw), Ok(WriteOutcome::Done));
    t.insert(&mut w, &row(7, 70, "")).unwrap();
    db.commit(w).unwrap();
    let s2 = db.statement_snapshot(&mut rr);
    assert_eq!(s1, s2);
    assert_eq!(balance(&t, &s2, 1), Some(10));
    assert_eq!(ids(&t, &s2), vec![0, 1, 2]);
    let mut rc = db.begin(IsolationLevel::ReadCommitted);
    let s = db.statement_snapshot(&mut rc);
    assert_eq!(ids(&t, &s), vec![0, 1, 7]);
    assert_eq!(balance(&t, &s, 1), Some(15));
}

#[test]
fn rolled_back_writes_are_invisible_and_restore_old_versions() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 3, 10);
    let mut x = db.begin(IsolationLevel::ReadCommitted);
    add_balance(&db, &t, &mut x, 0, 1).unwrap();
    let sx = db.statement_snapshot(&mut x);
    let (r1, _) = get(&t, &sx, 1).unwrap();
    t.delete(&mut x, &r1, &sx).unwrap();
    t.insert(&mut x, &row(9, 9, "new")).unwrap();
    assert_eq!(ids(&t, &db.statement_snapshot(&mut x)), vec![0, 2, 9]);
    db.rollback(x);
    let mut r = db.begin(IsolationLevel::ReadCommitted);
    let s = db.statement_snapshot(&mut r);
    assert_eq!(ids(&t, &s), vec![0, 1, 2]);
    assert_eq!(balance(&t, &s, 0), Some(10));
    // The rolled-back key is free again.
    let mut y = db.begin(IsolationLevel::ReadCommitted);
    t.insert(&mut y, &row(9, 1, "")).unwrap();
    db.commit(y).unwrap();
}

#[test]
fn dropping_an_unended_transaction_rolls_it_back() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 1, 10);
    {
        let mut x = db.begin(IsolationLevel::ReadCommitted);
        add_balance(&db, &t, &mut x, 0, 1).unwrap();
    }
    let mut y = db.begin(IsolationLevel::ReadCommitted);
    assert!(
        add_balance(&db, &t, &mut y, 0, 2).unwrap(),
        "row is not left locked"
    );
    db.commit(y).unwrap();
    let mut r = db.begin(IsolationLevel::ReadCommitted);
    assert_eq!(balance(&t, &db.statement_snapshot(&mut r), 0), Some(12));
}

#[test]
fn write_conflicts_follow_isolation_level() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 1, 10);
    let mut rr = db.begin(IsolationLevel::RepeatableRead);
    let mut rc = db.begin(IsolationLevel::ReadCommitted);
    let srr = db.statement_snapshot(&mut rr);
    let src = db.statement_snapshot(&mut rc);
    let (row0, _) = get(&t, &srr, 0).unwrap();

    let mut w = db.begin(IsolationLevel::ReadCommitted);
    add_balance(&db, &t, &mut w, 0, 5).unwrap();
    // While w runs, both must wait for it.
    let holder = w.id();
    assert_eq!(
        t.update(&mut rr, &row0, &srr, &row(0, 1, "")),
        Err(StorageError::WouldBlock { holder })
    );
    assert_eq!(
        t.lock_row(&mut rc, &row0, &src, RowLockMode::Exclusive),
        Err(StorageError::WouldBlock { holder })
    );
    db.commit(w).unwrap();

    assert_eq!(
        t.update(&mut rr, &row0, &srr, &row(0, 1, "")),
        Err(StorageError::SerializationFailure)
    );
    match t.update(&mut rc, &row0, &src, &row(0, 1, "")).unwrap() {
        WriteOutcome::Changed {
            newest: Some(n),
            newest_snapshot,
        } => {
            assert_eq!(n, row(0, 15, ""));
            assert!(newest_snapshot.ts > src.ts);
            assert_eq!(
                t.update(&mut rc, &row0, &newest_snapshot, &row(0, 16, "")),
                Ok(WriteOutcome::Done)
            );
        }
        o => panic!("{o:?}"),
    }
    db.commit(rc).unwrap();
    db.rollback(rr);
    let mut r = db.begin(IsolationLevel::ReadCommitted);
    assert_eq!(balance(&t, &db.statement_snapshot(&mut r), 0), Some(16));
}

/// SERIALIZABLE's commit check: a transaction that writes fails if a table it read was
/// written by a commit after its snapshot, whoever made it; a read-only one never fails; one
/// whose reads stayed untouched commits.
#[test]
fn serializable_writers_fail_when_a_table_they_read_changed() {
    let db = Database::new();
    let t = accounts(&db);
    let other = db.create_table(2, vec![DataType::Int32, DataType::Int64, DataType::Text]);
    load(&db, &t, 1, 10);

    // Read accounts, then a READ COMMITTED commit writes it: the reader's write fails.
    let mut s = db.begin(IsolationLevel::Serializable);
    let snap = db.statement_snapshot(&mut s);
    assert_eq!(balance(&t, &snap, 0), Some(10));
    s.note_reads([ACCOUNTS]);
    let mut w = db.begin(IsolationLevel::ReadCommitted);
    add_balance(&db, &t, &mut w, 0, 5).unwrap();
    db.commit(w).unwrap();
    other.insert(&mut s, &row(1, 1, "")).unwrap();
    assert_eq!(db.commit(s), Err(StorageError::SerializationFailure));
    let mut r = db.begin(IsolationLevel::ReadCommitted);
    let rs = db.statement_snapshot(&mut r);
    assert_eq!(
        other.live_row_count(&rs),
        0,
        "the failed commit left nothing"
    );
    db.rollback(r);

    // The same with a read-only serializable transaction: it commits.
    let mut ro = db.begin(IsolationLevel::Serializable);
    let snap = db.statement_snapshot(&mut ro);
    assert_eq!(balance(&t, &snap, 0), Some(15));
    ro.note_reads([ACCOUNTS]);
    let mut w = db.begin(IsolationLevel::ReadCommitted);
    add_balance(&db, &t, &mut w, 0, 1).unwrap();
    db.commit(w).unwrap();
    assert!(db.commit(ro).is_ok());

    // A write to a table it did not read does not stop it.
    let mut s = db.begin(IsolationLevel::Serializable);
    db.statement_snapshot(&mut s);
    s.note_reads([2]);
    let mut w = db.begin(IsolationLevel::ReadCommitted);
    add_balance(&db, &t, &mut w, 0, 1).unwrap();
    db.commit(w).unwrap();
    other.insert(&mut s, &row(2, 2, "")).unwrap();
    assert!(db.commit(s).is_ok());

    // A commit that has its timestamp but is not visible yet counts as a change: the reader
    // cannot commit as if it came first, having not seen it.
    let mut s = db.begin(IsolationLevel::Serializable);
    db.statement_snapshot(&mut s);
    s.note_reads([ACCOUNTS]);
    let mut w = db.begin(IsolationLevel::ReadCommitted);
    add_balance(&db, &t, &mut w, 0, 1).unwrap();
    let prepared = db.prepare_commit(w).unwrap();
    other.insert(&mut s, &row(3, 3, "")).unwrap();
    let result = db.commit(s);
    prepared.finish();
    assert_eq!(result, Err(StorageError::SerializationFailure));
}

#[test]
fn concurrent_delete_reports_gone_row() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 1, 10);
    let mut rc = db.begin(IsolationLevel::ReadCommitted);
    let s = db.statement_snapshot(&mut rc);
    let (r0, _) = get(&t, &s, 0).unwrap();
    let mut d = db.begin(IsolationLevel::ReadCommitted);
    let sd = db.statement_snapshot(&mut d);
    t.delete(&mut d, &r0, &sd).unwrap();
    db.commit(d).unwrap();
    match t.update(&mut rc, &r0, &s, &row(0, 1, "")).unwrap() {
        WriteOutcome::Changed { newest: None, .. } => {}
        o => panic!("{o:?}"),
    }
    let mut rr = db.begin(IsolationLevel::RepeatableRead);
    let srr = db.statement_snapshot(&mut rr);
    // Deleted before this snapshot: a stale handle, nothing to do, no error.
    assert!(matches!(
        t.delete(&mut rr, &r0, &srr),
        Ok(WriteOutcome::Changed { newest: None, .. })
    ));
}

#[test]
fn own_updates_stack_and_own_delete_hides() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 1, 0);
    let mut x = db.begin(IsolationLevel::RepeatableRead);
    for _ in 0..5 {
        assert!(add_balance(&db, &t, &mut x, 0, 1).unwrap());
    }
    let s = db.statement_snapshot(&mut x);
    assert_eq!(balance(&t, &s, 0), Some(5));
    let (r0, _) = get(&t, &s, 0).unwrap();
    t.delete(&mut x, &r0, &s).unwrap();
    assert_eq!(balance(&t, &s, 0), None);
    assert!(matches!(
        t.update(&mut x, &r0, &s, &row(0, 1, "")),
        Ok(WriteOutcome::Changed { newest: None, .. })
    ));
    db.commit(x).unwrap();
    let mut r = db.begin(IsolationLevel::ReadCommitted);
    assert_eq!(t.live_row_count(&db.statement_snapshot(&mut r)), 0);
}

#[test]
fn savepoints_undo_later_changes_and_nest_by_name() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 1, 0);
    let mut x = db.begin(IsolationLevel::ReadCommitted);
    add_balance(&db, &t, &mut x, 0, 1).unwrap();
    db.savepoint(&mut x, "a");
    t.insert(&mut x, &row(1, 1, "")).unwrap();
    add_balance(&db, &t, &mut x, 0, 10).unwrap();
    db.savepoint(&mut x, "a");
    add_balance(&db, &t, &mut x, 0, 100).unwrap();
    let s = db.statement_snapshot(&mut x);
    let (r1, _) = get(&t, &s, 1).unwrap();
    t.lock_row(&mut x, &r1, &s, RowLockMode::Share).unwrap();
    t.delete(&mut x, &r1, &s).unwrap();
    db.rollback_to_savepoint(&mut x, "a").unwrap(); // the newest "a"
    let s = db.statement_snapshot(&mut x);
    assert_eq!(balance(&t, &s, 0), Some(11));
    assert_eq!(ids(&t, &s), vec![0, 1]);
    db.release_savepoint(&mut x, "a").unwrap(); // releases the newest "a"
    db.rollback_to_savepoint(&mut x, "a").unwrap(); // the first "a" still exists
    let s = db.statement_snapshot(&mut x);
    assert_eq!(balance(&t, &s, 0), Some(1));
    assert_eq!(ids(&t, &s), vec![0]);
    db.rollback_to_savepoint(&mut x, "a").unwrap(); // it stays after rolling back to it
    db.release_savepoint(&mut x, "a").unwrap();
    assert_eq!(
        db.release_savepoint(&mut x, "a"),
        Err(StorageError::NoSuchSavepoint("a".into()))
    );
    assert_eq!(
        db.rollback_to_savepoint(&mut x, "zz"),
        Err(StorageError::NoSuchSavepoint("zz".into()))
    );
    db.commit(x).unwrap();
    let mut r = db.begin(IsolationLevel::ReadCommitted);
    let s = db.statement_snapshot(&mut r);
    assert_eq!(balance(&t, &s, 0), Some(1));
    assert_eq!(ids(&t, &s), vec![0]);
}

#[test]
fn savepoint_rollback_releases_later_row_locks() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 1, 0);
    let mut x = db.begin(IsolationLevel::ReadCommitted);
    db.savepoint(&mut x, "s");
    let s = db.statement_snapshot(&mut x);
    let (r0, _) = get(&t, &s, 0).unwrap();
    t.lock_row(&mut x, &r0, &s, RowLockMode::Exclusive).unwrap();
    assert!(!x.is_read_only_so_far());
    let mut y = db.begin(IsolationLevel::ReadCommitted);
    let sy = db.statement_snapshot(&mut y);
    assert_eq!(
        t.delete(&mut y, &r0, &sy),
        Err(StorageError::WouldBlock { holder: x.id() })
    );
    db.rollback_to_savepoint(&mut x, "s").unwrap();
    assert_eq!(t.delete(&mut y, &r0, &sy), Ok(WriteOutcome::Done));
}

#[test]
fn share_locks_admit_each_other_and_keep_writers_out_until_both_end() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 1, 0);
    let mut x = db.begin(IsolationLevel::ReadCommitted);
    let mut y = db.begin(IsolationLevel::ReadCommitted);
    let mut w = db.begin(IsolationLevel::ReadCommitted);
    let (sx, sy, sw) = (
        db.statement_snapshot(&mut x),
        db.statement_snapshot(&mut y),
        db.statement_snapshot(&mut w),
    );
    let (r0, _) = get(&t, &sx, 0).unwrap();
    assert_eq!(
        t.lock_row(&mut x, &r0, &sx, RowLockMode::Share),
        Ok(WriteOutcome::Done)
    );
    assert_eq!(
        t.lock_row(&mut y, &r0, &sy, RowLockMode::Share),
        Ok(WriteOutcome::Done)
    );
    assert_eq!(
        t.delete(&mut w, &r0, &sw),
        Err(StorageError::WouldBlock { holder: x.id() })
    );
    assert_eq!(
        t.lock_row(&mut w, &r0, &sw, RowLockMode::Exclusive),
        Err(StorageError::WouldBlock { holder: x.id() })
    );
    db.commit(x).unwrap();
    assert_eq!(
        t.update(&mut w, &r0, &sw, &row(0, 1, "w")),
        Err(StorageError::WouldBlock { holder: y.id() }),
        "the other share lock still holds"
    );
    db.rollback(y);
    assert_eq!(
        t.update(&mut w, &r0, &sw, &row(0, 1, "w")),
        Ok(WriteOutcome::Done)
    );
    let mut z = db.begin(IsolationLevel::ReadCommitted);
    let sz = db.statement_snapshot(&mut z);
    assert_eq!(
        t.lock_row(&mut z, &r0, &sz, RowLockMode::Share),
        Err(StorageError::WouldBlock { holder: w.id() }),
        "a share lock waits for a pending write"
    );
}

#[test]
fn a_key_share_lock_keeps_out_deletes_and_key_updates_only() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 1, 0);
    let mut x = db.begin(IsolationLevel::ReadCommitted);
    let sx = db.statement_snapshot(&mut x);
    let (r0, _) = get(&t, &sx, 0).unwrap();
    assert_eq!(
        t.lock_row(&mut x, &r0, &sx, RowLockMode::KeyShare),
        Ok(WriteOutcome::Done)
    );
    let mut w = db.begin(IsolationLevel::ReadCommitted);
    let sw = db.statement_snapshot(&mut w);
    assert_eq!(
        t.update(&mut w, &r0, &sw, &row(0, 5, "balance only")),
        Ok(WriteOutcome::Done),
        "an update that leaves the key alone goes ahead"
    );
    db.commit(w).unwrap();
    let mut v = db.begin(IsolationLevel::ReadCommitted);
    let sv = db.statement_snapshot(&mut v);
    assert_eq!(
        t.update(&mut v, &r0, &sv, &row(7, 5, "new key")),
        Err(StorageError::WouldBlock { holder: x.id() })
    );
    assert_eq!(
        t.delete(&mut v, &r0, &sv),
        Err(StorageError::WouldBlock { holder: x.id() })
    );
    db.commit(x).unwrap();
    assert_eq!(t.delete(&mut v, &r0, &sv), Ok(WriteOutcome::Done));
}

/// FOR NO KEY UPDATE, as PostgreSQL: FOR KEY SHARE gets in beside it; FOR SHARE, a second
/// FOR NO KEY UPDATE, FOR UPDATE and writes wait for it. Its holder's update of other columns
/// goes ahead of the key share, a delete (or FOR UPDATE) waits for the key share.
#[test]
fn a_no_key_update_lock_admits_key_share_only() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 1, 0);
    let mut x = db.begin(IsolationLevel::ReadCommitted);
    let sx = db.statement_snapshot(&mut x);
    let (r0, _) = get(&t, &sx, 0).unwrap();
    assert_eq!(
        t.lock_row(&mut x, &r0, &sx, RowLockMode::NoKeyUpdate),
        Ok(WriteOutcome::Done)
    );
    let mut y = db.begin(IsolationLevel::ReadCommitted);
    let sy = db.statement_snapshot(&mut y);
    assert_eq!(
        t.lock_row(&mut y, &r0, &sy, RowLockMode::KeyShare),
        Ok(WriteOutcome::Done),
        "FOR KEY SHARE does not wait for FOR NO KEY UPDATE"
    );
    let mut w = db.begin(IsolationLevel::ReadCommitted);
    let sw = db.statement_snapshot(&mut w);
    for mode in [
        RowLockMode::Share,
        RowLockMode::NoKeyUpdate,
        RowLockMode::Exclusive,
    ] {
        assert_eq!(
            t.lock_row(&mut w, &r0, &sw, mode),
            Err(StorageError::WouldBlock { holder: x.id() }),
            "{mode:?} waits for FOR NO KEY UPDATE"
        );
    }
    assert_eq!(
        t.update(&mut w, &r0, &sw, &row(0, 9, "w")),
        Err(StorageError::WouldBlock { holder: x.id() })
    );
    assert_eq!(
        t.lock_row(&mut x, &r0, &sx, RowLockMode::Exclusive),
        Err(StorageError::WouldBlock { holder: y.id() }),
        "growing it to FOR UPDATE waits for the key share"
    );
    assert_eq!(
        t.update(&mut x, &r0, &sx, &row(0, 5, "balance only")),
        Ok(WriteOutcome::Done),
        "the holder's update of other columns goes ahead of the key share"
    );
    db.commit(x).unwrap();
    let sw = db.statement_snapshot(&mut w);
    assert_eq!(
        t.delete(&mut w, &r0, &sw),
        Err(StorageError::WouldBlock { holder: y.id() }),
        "a delete still waits for the key share"
    );
    db.commit(y).unwrap();
    assert_eq!(t.delete(&mut w, &r0, &sw), Ok(WriteOutcome::Done));
}

/// FOR UPDATE keeps FOR KEY SHARE out, also when its holder took FOR NO KEY UPDATE first; a
/// rollback to a savepoint taken between the two leaves the stronger lock.
#[test]
fn for_update_over_no_key_update_keeps_key_share_out() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 1, 0);
    let mut x = db.begin(IsolationLevel::ReadCommitted);
    let sx = db.statement_snapshot(&mut x);
    let (r0, _) = get(&t, &sx, 0).unwrap();
    t.lock_row(&mut x, &r0, &sx, RowLockMode::NoKeyUpdate)
        .unwrap();
    db.savepoint(&mut x, "s");
    t.lock_row(&mut x, &r0, &sx, RowLockMode::Exclusive)
        .unwrap();
    let mut y = db.begin(IsolationLevel::ReadCommitted);
    let sy = db.statement_snapshot(&mut y);
    assert_eq!(
        t.lock_row(&mut y, &r0, &sy, RowLockMode::KeyShare),
        Err(StorageError::WouldBlock { holder: x.id() })
    );
    db.rollback_to_savepoint(&mut x, "s").unwrap();
    assert_eq!(
        t.lock_row(&mut y, &r0, &sy, RowLockMode::KeyShare),
        Err(StorageError::WouldBlock { holder: x.id() }),
        "the grown lock stays after the rollback to the savepoint"
    );
    db.rollback(x);
    assert_eq!(
        t.lock_row(&mut y, &r0, &sy, RowLockMode::KeyShare),
        Ok(WriteOutcome::Done)
    );
}

#[test]
fn rolling_back_past_a_row_lock_keeps_the_share_lock_taken_before_it() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 1, 0);
    let mut x = db.begin(IsolationLevel::ReadCommitted);
    let s = db.statement_snapshot(&mut x);
    let (r0, _) = get(&t, &s, 0).unwrap();
    t.lock_row(&mut x, &r0, &s, RowLockMode::KeyShare).unwrap();
    db.savepoint(&mut x, "s");
    t.lock_row(&mut x, &r0, &s, RowLockMode::Exclusive).unwrap();
    db.rollback_to_savepoint(&mut x, "s").unwrap();
    let mut y = db.begin(IsolationLevel::ReadCommitted);
    let sy = db.statement_snapshot(&mut y);
    assert_eq!(
        t.lock_row(&mut y, &r0, &sy, RowLockMode::Share),
        Ok(WriteOutcome::Done),
        "the FOR UPDATE is gone"
    );
    assert_eq!(
        t.delete(&mut y, &r0, &sy),
        Err(StorageError::WouldBlock { holder: x.id() }),
        "the FOR KEY SHARE from before the savepoint stays"
    );
}

#[test]
fn unique_index_rejects_live_duplicates_and_waits_for_pending_ones() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 2, 0);
    let mut a = db.begin(IsolationLevel::ReadCommitted);
    match t.insert(&mut a, &row(1, 5, "dup")) {
        Err(StorageError::UniqueViolation {
            index_name,
            key_columns,
            key,
        }) => {
            assert_eq!(index_name, "accounts_pkey");
            assert_eq!(key_columns, vec![0]);
            assert_eq!(key, vec![Value::Int32(1)]);
        }
        o => panic!("{o:?}"),
    }
    // Uncommitted insert by a: b must wait; outcome depends on a.
    t.insert(&mut a, &row(5, 0, "")).unwrap();
    let mut b = db.begin(IsolationLevel::ReadCommitted);
    assert_eq!(
        t.insert(&mut b, &row(5, 0, "")).unwrap_err(),
        StorageError::WouldBlock { holder: a.id() }
    );
    db.rollback(a);
    t.insert(&mut b, &row(5, 0, "b")).unwrap();
    let mut c = db.begin(IsolationLevel::ReadCommitted);
    assert_eq!(
        t.insert(&mut c, &row(5, 0, "")).unwrap_err(),
        StorageError::WouldBlock { holder: b.id() }
    );
    db.commit(b).unwrap();
    assert!(matches!(
        t.insert(&mut c, &row(5, 0, "")),
        Err(StorageError::UniqueViolation { .. })
    ));
    // ON CONFLICT: the existing row is handed back.
    match t.insert_or_conflict(&mut c, &row(5, 0, "")).unwrap() {
        InsertOutcome::Conflict { index, existing } => {
            assert_eq!(index, PK);
            let s = db.statement_snapshot(&mut c);
            assert_eq!(t.read(&existing, &s).unwrap()[2], Value::Text("b".into()));
        }
        o => panic!("{o:?}"),
    }
}

#[test]
fn unique_index_allows_null_keys_and_key_reuse_after_delete() {
    let db = Database::new();
    let t = db.create_table(2, vec![DataType::Int32, DataType::Text]);
    t.add_index(IndexDef {
        id: 1,
        name: "u".into(),
        columns: vec![1],
        unique: true,
        predicate: None,
    })
    .unwrap();
    let mut x = db.begin(IsolationLevel::ReadCommitted);
    t.insert(&mut x, &[Value::Int32(1), Value::Null]).unwrap();
    t.insert(&mut x, &[Value::Int32(2), Value::Null]).unwrap();
    let r = t
        .insert(&mut x, &[Value::Int32(3), Value::Text("k".into())])
        .unwrap();
    let s = db.statement_snapshot(&mut x);
    t.delete(&mut x, &r, &s).unwrap();
    t.insert(&mut x, &[Value::Int32(4), Value::Text("k".into())])
        .unwrap();
    db.commit(x).unwrap();
    let mut y = db.begin(IsolationLevel::ReadCommitted);
    let s = db.statement_snapshot(&mut y);
    assert_eq!(t.live_row_count(&s), 3);
}

/// A partial unique index holds only the rows its predicate accepts: keys outside it repeat
/// freely, and an update that moves a row into it is checked like an insert.
#[test]
fn partial_unique_index_constrains_only_its_rows() {
    let db = Database::new();
    let t = db.create_table(2, vec![DataType::Int32, DataType::Bool]);
    let live = RowPredicate(Arc::new(|row: &[Value]| row[1] == Value::Bool(true)));
    let mut x = db.begin(IsolationLevel::ReadCommitted);
    t.insert(&mut x, &[Value::Int32(1), Value::Bool(true)])
        .unwrap();
    t.insert(&mut x, &[Value::Int32(1), Value::Bool(false)])
        .unwrap();
    t.insert(&mut x, &[Value::Int32(1), Value::Bool(false)])
        .unwrap();
    db.commit(x).unwrap();
    t.add_index(IndexDef {
        id: 1,
        name: "u_live".into(),
        columns: vec![0],
        unique: true,
        predicate: Some(live),
    })
    .expect("duplicates outside the predicate do not count");
    let mut y = db.begin(IsolationLevel::ReadCommitted);
    t.insert(&mut y, &[Value::Int32(1), Value::Bool(false)])
        .unwrap();
    assert!(matches!(
        t.insert(&mut y, &[Value::Int32(1), Value::Bool(true)]),
        Err(StorageError::UniqueViolation { .. })
    ));
    let s = db.statement_snapshot(&mut y);
    let mut outside = None;
    t.scan(&s, |r, bytes| {
        if t.decode_row(bytes) == [Value::Int32(1), Value::Bool(false)] {
            outside = Some(r.clone());
        }
        true
    });
    let outside = outside.expect("a row outside the index");
    assert!(matches!(
        t.update(&mut y, &outside, &s, &[Value::Int32(1), Value::Bool(true)]),
        Err(StorageError::UniqueViolation { .. })
    ));
    db.commit(y).unwrap();
}

#[test]
fn update_to_duplicate_key_fails_and_changes_nothing() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 3, 0);
    let mut x = db.begin(IsolationLevel::ReadCommitted);
    let s = db.statement_snapshot(&mut x);
    let (r0, _) = get(&t, &s, 0).unwrap();
    assert!(matches!(
        t.update(&mut x, &r0, &s, &row(2, 0, "")),
        Err(StorageError::UniqueViolation { .. })
    ));
    assert_eq!(ids(&t, &s), vec![0, 1, 2]);
    // Changing the key to a free value moves the row in the index.
    assert_eq!(
        t.update(&mut x, &r0, &s, &row(10, 0, "")),
        Ok(WriteOutcome::Done)
    );
    assert_eq!(ids(&t, &s), vec![1, 2, 10]);
    db.commit(x).unwrap();
    let mut y = db.begin(IsolationLevel::ReadCommitted);
    let s = db.statement_snapshot(&mut y);
    assert_eq!(ids(&t, &s), vec![1, 2, 10]);
    assert!(get(&t, &s, 0).is_none(), "the old entry is rechecked away");
    t.insert(&mut y, &row(0, 0, "")).unwrap();
}

#[test]
fn composite_index_range_scans_by_prefix() {
    let db = Database::new();
    let t = db.create_table(3, vec![DataType::Text, DataType::Int32, DataType::Int64]);
    t.add_index(IndexDef {
        id: 1,
        name: "ix".into(),
        columns: vec![0, 1],
        unique: false,
        predicate: None,
    })
    .unwrap();
    let mut x = db.begin(IsolationLevel::ReadCommitted);
    let keys = [
        ("a", 1),
        ("a", 2),
        ("ab", 0),
        ("b", 5),
        ("a", 3),
        ("b", 1),
        ("ab", 9),
    ];
    for (i, (s, n)) in keys.iter().enumerate() {
        t.insert(
            &mut x,
            &[
                Value::Text((*s).into()),
                Value::Int32(*n),
                Value::Int64(i as i64),
            ],
        )
        .unwrap();
    }
    t.insert(
        &mut x,
        &[Value::Text("a".into()), Value::Null, Value::Int64(99)],
    )
    .unwrap();
    t.insert(
        &mut x,
        &[Value::Text("a".into()), Value::Int32(2), Value::Int64(100)],
    )
    .unwrap(); // duplicate key
    db.commit(x).unwrap();
    let mut r = db.begin(IsolationLevel::ReadCommitted);
    let s = db.statement_snapshot(&mut r);
    let scan = |lo: Bound<&[Value]>, hi: Bound<&[Value]>| {
        let mut out = Vec::new();
        t.index_scan(1, &s, lo, hi, |_, b| {
            let v = t.decode_row(b);
            out.push((v[0].clone(), v[1].clone()));
            true
        })
        .unwrap();
        out
    };
    let a = [Value::Text("a".into())];
    let got = scan(Bound::Included(&a), Bound::Included(&a));
    let t_ = |s: &str, n: Option<i32>| (Value::Text(s.into()), n.map_or(Value::Null, Value::Int32));
    assert_eq!(
        got,
        vec![
            t_("a", Some(1)),
            t_("a", Some(2)),
            t_("a", Some(2)),
            t_("a", Some(3)),
            t_("a", None)
        ]
    );
    let lo = [Value::Text("a".into()), Value::Int32(2)];
    let hi = [Value::Text("ab".into())];
    let got = scan(Bound::Excluded(&lo), Bound::Included(&hi));
    assert_eq!(
        got,
        vec![
            t_("a", Some(3)),
            t_("a", None),
            t_("ab", Some(0)),
            t_("ab", Some(9))
        ]
    );
    let got = scan(
        Bound::Excluded(&a),
        Bound::Excluded(&[Value::Text("b".into()), Value::Int32(5)]),
    );
    assert_eq!(
        got,
        vec![t_("ab", Some(0)), t_("ab", Some(9)), t_("b", Some(1))]
    );
    assert_eq!(scan(Bound::Unbounded, Bound::Unbounded).len(), 9);
    assert_eq!(
        t.index_scan(77, &s, Bound::Unbounded, Bound::Unbounded, |_, _| true),
        Err(StorageError::NoSuchIndex(77))
    );
}

#[test]
fn add_index_builds_from_rows_and_rejects_duplicates() {
    let db = Database::new();
    let t = db.create_table(4, vec![DataType::Int32, DataType::Int32]);
    let mut x = db.begin(IsolationLevel::ReadCommitted);
    for i in 0..100 {
        t.insert(&mut x, &[Value::Int32(i), Value::Int32(i % 10)])
            .unwrap();
    }
    db.commit(x).unwrap();
    assert!(matches!(
        t.add_index(IndexDef {
            id: 1,
            name: "u2".into(),
            columns: vec![1],
            unique: true,
            predicate: None,
        }),
        Err(StorageError::UniqueViolation { .. })
    ));
    t.add_index(IndexDef {
        id: 2,
        name: "n2".into(),
        columns: vec![1],
        unique: false,
        predicate: None,
    })
    .unwrap();
    t.add_index(IndexDef {
        id: 3,
        name: "u1".into(),
        columns: vec![0],
        unique: true,
        predicate: None,
    })
    .unwrap();
    assert_eq!(
        t.indexes().iter().map(|d| d.id).collect::<Vec<_>>(),
        vec![2, 3]
    );
    let mut r = db.begin(IsolationLevel::ReadCommitted);
    let s = db.statement_snapshot(&mut r);
    let mut n = 0;
    let k = [Value::Int32(3)];
    t.index_scan(2, &s, Bound::Included(&k), Bound::Included(&k), |_, _| {
        n += 1;
        true
    })
    .unwrap();
    assert_eq!(n, 10);
    assert!(matches!(
        t.insert(&mut r, &[Value::Int32(5), Value::Int32(0)]),
        Err(StorageError::UniqueViolation { .. })
    ));
    t.drop_index(3).unwrap();
    assert_eq!(t.drop_index(3), Err(StorageError::NoSuchIndex(3)));
    t.insert(&mut r, &[Value::Int32(5), Value::Int32(0)])
        .unwrap();
}

#[test]
fn alter_columns_rewrites_every_version() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 3, 7);
    let mut old_reader = db.begin(IsolationLevel::RepeatableRead);
    let s_old = db.statement_snapshot(&mut old_reader);
    let mut x = db.begin(IsolationLevel::ReadCommitted);
    add_balance(&db, &t, &mut x, 0, 1).unwrap();
    db.commit(x).unwrap();
    // ADD COLUMN flag bool DEFAULT true, DROP COLUMN note.
    let new_types = vec![DataType::Int32, DataType::Int64, DataType::Bool];
    t.alter_columns(new_types.clone(), &|mut r| {
        r.pop();
        r.push(Value::Bool(true));
        r
    })
    .unwrap();
    assert_eq!(t.types(), new_types);
    let (r0, v) = get(&t, &s_old, 0).unwrap();
    assert_eq!(
        v,
        vec![Value::Int32(0), Value::Int64(7), Value::Bool(true)],
        "old version rewritten too"
    );
    let mut y = db.begin(IsolationLevel::ReadCommitted);
    let s = db.statement_snapshot(&mut y);
    assert_eq!(
        t.read(&r0, &s).unwrap(),
        vec![Value::Int32(0), Value::Int64(8), Value::Bool(true)]
    );
    assert!(matches!(
        t.alter_columns(vec![DataType::Int32], &|r| r),
        Err(StorageError::ColumnCountMismatch { .. })
    ));
    assert_eq!(t.types(), new_types, "a failed alter changes nothing");
}

#[test]
fn truncate_and_drop_table() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 10, 0);
    t.truncate();
    let mut x = db.begin(IsolationLevel::ReadCommitted);
    let s = db.statement_snapshot(&mut x);
    assert_eq!(t.live_row_count(&s), 0);
    assert_eq!(ids(&t, &s), Vec::<i32>::new());
    t.insert(&mut x, &row(1, 0, "")).unwrap();
    assert!(db.drop_table(ACCOUNTS));
    assert!(db.table(ACCOUNTS).is_none());
    assert_eq!(
        t.insert(&mut x, &row(2, 0, "")).unwrap_err(),
        StorageError::TableDropped
    );
}

#[test]
fn type_mismatch_is_an_error_not_a_panic() {
    let db = Database::new();
    let t = accounts(&db);
    let mut x = db.begin(IsolationLevel::ReadCommitted);
    let bad = vec![Value::Int64(1), Value::Int64(1), Value::Null];
    assert!(matches!(
        t.insert(&mut x, &bad),
        Err(StorageError::TypeMismatch { column: 0, .. })
    ));
    assert!(x.is_read_only_so_far());
}

/// (table, kind, row id, row bytes) of one logged change.
type LoggedChange = (TableId, ChangeKind, u64, Vec<u8>);

#[derive(Default)]
struct RecordingSink {
    commits: Mutex<Vec<(CommitTs, Vec<LoggedChange>)>>,
    fail: Mutex<bool>,
}

impl RedoSink for RecordingSink {
    fn log_commit(
        &self,
        take_ts: &mut dyn FnMut(u64) -> CommitTs,
        changes: &[RedoChange<'_>],
        _early: Option<EarlyRedo>,
    ) -> Result<u64, String> {
        if *self.fail.lock().unwrap() {
            return Err("disk full".into());
        }
        let c = changes
            .iter()
            .map(|c| (c.table, c.kind, c.row_id, c.row.to_vec()))
            .collect();
        let mut commits = self.commits.lock().unwrap();
        let log_pos = commits.len() as u64;
        commits.push((take_ts(log_pos), c));
        Ok(log_pos + 1)
    }
}

#[test]
fn redo_sink_sees_changes_and_can_fail_a_commit() {
    let db = Database::new();
    let t = accounts(&db);
    let sink = Arc::new(RecordingSink::default());
    db.set_redo_sink(sink.clone());
    let mut x = db.begin(IsolationLevel::ReadCommitted);
    let r = t.insert(&mut x, &row(1, 5, "a")).unwrap();
    add_balance(&db, &t, &mut x, 1, 1).unwrap();
    let ts = db.commit(x).unwrap();
    {
        let commits = sink.commits.lock().unwrap();
        assert_eq!(commits.len(), 1);
        let (cts, changes) = &commits[0];
        assert_eq!(*cts, ts);
        assert_eq!(changes.len(), 2);
        assert_eq!(
            (changes[0].0, changes[0].1, changes[0].2),
            (ACCOUNTS, ChangeKind::Insert, r.row_id())
        );
        assert_eq!(changes[1].1, ChangeKind::Update);
        assert_eq!(t.decode_row(&changes[1].3), row(1, 6, "a"));
    }
    // Read-only transactions do not reach the sink.
    let mut ro = db.begin(IsolationLevel::ReadCommitted);
    db.statement_snapshot(&mut ro);
    db.commit(ro).unwrap();
    assert_eq!(sink.commits.lock().unwrap().len(), 1);

    *sink.fail.lock().unwrap() = true;
    let mut y = db.begin(IsolationLevel::ReadCommitted);
    add_balance(&db, &t, &mut y, 1, 100).unwrap();
    t.insert(&mut y, &row(2, 0, "")).unwrap();
    assert_eq!(
        db.commit(y),
        Err(StorageError::CommitFailed("disk full".into()))
    );
    *sink.fail.lock().unwrap() = false;
    let mut z = db.begin(IsolationLevel::ReadCommitted);
    let s = db.statement_snapshot(&mut z);
    assert_eq!(balance(&t, &s, 1), Some(6));
    assert_eq!(ids(&t, &s), vec![1]);
    assert!(
        add_balance(&db, &t, &mut z, 1, 1).unwrap(),
        "failed commit released the row"
    );
    db.commit(z).unwrap();
}

/// A new unique index refuses only keys that two live rows hold: a key left in an older
/// version, a deleted row's key and NULL keys do not count, and the error names the key.
#[test]
fn add_unique_index_counts_only_live_non_null_keys() {
    let db = Database::new();
    let t = db.create_table(5, vec![DataType::Int32, DataType::Int32]);
    let unique_on = |id, column| IndexDef {
        id,
        name: format!("u{id}"),
        columns: vec![column],
        unique: true,
        predicate: None,
    };
    let mut x = db.begin(IsolationLevel::ReadCommitted);
    let moved = t
        .insert(&mut x, &[Value::Int32(1), Value::Int32(10)])
        .unwrap();
    let deleted = t
        .insert(&mut x, &[Value::Int32(2), Value::Int32(20)])
        .unwrap();
    for i in 3..50 {
        t.insert(&mut x, &[Value::Int32(i), Value::Int32(i * 10)])
            .unwrap();
    }
    t.insert(&mut x, &[Value::Int32(50), Value::Null]).unwrap();
    t.insert(&mut x, &[Value::Int32(51), Value::Null]).unwrap();
    db.commit(x).unwrap();
    // Keep the old versions around: an open snapshot from before the changes.
    let mut old_reader = db.begin(IsolationLevel::RepeatableRead);
    let _old = db.statement_snapshot(&mut old_reader);
    let mut y = db.begin(IsolationLevel::ReadCommitted);
    let sy = db.statement_snapshot(&mut y);
    // Row 1's key 10 now lives only in its older version; rows 52 and 53 take 10 and 20.
    t.update(&mut y, &moved, &sy, &[Value::Int32(1), Value::Int32(11)])
        .unwrap();
    t.delete(&mut y, &deleted, &sy).unwrap();
    t.insert(&mut y, &[Value::Int32(52), Value::Int32(10)])
        .unwrap();
    t.insert(&mut y, &[Value::Int32(53), Value::Int32(20)])
        .unwrap();
    db.commit(y).unwrap();
    t.add_index(unique_on(1, 1)).unwrap();
    t.drop_index(1).unwrap();
    // Two live rows with key 30.
    let mut z = db.begin(IsolationLevel::ReadCommitted);
    t.insert(&mut z, &[Value::Int32(54), Value::Int32(30)])
        .unwrap();
    db.commit(z).unwrap();
    match t.add_index(unique_on(2, 1)) {
        Err(StorageError::UniqueViolation {
            index_name, key, ..
        }) => {
            assert_eq!(index_name, "u2");
            assert_eq!(key, vec![Value::Int32(30)]);
        }
        other => panic!("expected a unique violation, got {other:?}"),
    }
    assert!(t.indexes().is_empty());
}
