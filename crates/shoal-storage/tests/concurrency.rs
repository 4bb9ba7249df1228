//! Multi-threaded tests: READ COMMITTED increments never get lost, deadlocks are detected,
//! concurrent inserts of one key let exactly one win, snapshots stay consistent while writers
//! commit (the stable watermark), and the async wait wakes up.

mod common;

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::Duration;

use common::*;
use shoal_storage::*;

#[test]
fn read_committed_increments_are_never_lost() {
    const THREADS: usize = 4;
    const INCREMENTS: usize = 300;
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 1, 0);
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let (db, t) = (db.clone(), t.clone());
            thread::spawn(move || {
                for _ in 0..INCREMENTS {
                    let mut txn = db.begin(IsolationLevel::ReadCommitted);
                    assert!(add_balance(&db, &t, &mut txn, 0, 1).unwrap());
                    db.commit(txn).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let mut r = db.begin(IsolationLevel::ReadCommitted);
    assert_eq!(
        balance(&t, &db.statement_snapshot(&mut r), 0),
        Some((THREADS * INCREMENTS) as i64)
    );
}

#[test]
fn repeatable_read_conflicts_fail_with_serialization_failure() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 1, 0);
    let failures = Arc::new(AtomicUsize::new(0));
    let commits = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let (db, t, failures, commits) =
                (db.clone(), t.clone(), failures.clone(), commits.clone());
            thread::spawn(move || {
                for _ in 0..200 {
                    let mut txn = db.begin(IsolationLevel::RepeatableRead);
                    match add_balance(&db, &t, &mut txn, 0, 1) {
                        Ok(true) => {
                            db.commit(txn).unwrap();
                            commits.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(StorageError::SerializationFailure) => {
                            failures.fetch_add(1, Ordering::Relaxed);
                            db.rollback(txn);
                        }
                        o => panic!("{o:?}"),
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let mut r = db.begin(IsolationLevel::ReadCommitted);
    let committed = commits.load(Ordering::Relaxed);
    assert_eq!(committed + failures.load(Ordering::Relaxed), 800);
    assert_eq!(
        balance(&t, &db.statement_snapshot(&mut r), 0),
        Some(committed as i64),
        "every committed increment counted once"
    );
}

#[test]
fn opposite_lock_order_ends_one_transaction_with_deadlock() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 2, 0);
    let barrier = Arc::new(Barrier::new(2));
    let results: Vec<Result<(), StorageError>> = thread::scope(|s| {
        let hs: Vec<_> = [(0, 1), (1, 0)]
            .into_iter()
            .map(|(first, second)| {
                let (db, t, barrier) = (&db, &t, barrier.clone());
                s.spawn(move || {
                    let mut txn = db.begin(IsolationLevel::ReadCommitted);
                    let snap = db.statement_snapshot(&mut txn);
                    let (r1, _) = get(t, &snap, first).unwrap();
                    let (r2, _) = get(t, &snap, second).unwrap();
                    t.lock_row(&mut txn, &r1, &snap, RowLockMode::Exclusive)
                        .unwrap();
                    barrier.wait();
                    loop {
                        match t.lock_row(&mut txn, &r2, &snap, RowLockMode::Exclusive) {
                            Ok(_) => {
                                db.commit(txn).unwrap();
                                return Ok(());
                            }
                            Err(StorageError::WouldBlock { holder }) => {
                                if let Err(e) = db.wait_for_blocking(&txn, holder) {
                                    db.rollback(txn);
                                    return Err(e);
                                }
                            }
                            Err(e) => panic!("{e:?}"),
                        }
                    }
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let deadlocks = results
        .iter()
        .filter(|r| **r == Err(StorageError::Deadlock))
        .count();
    assert_eq!(deadlocks, 1, "{results:?}");
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1);
}

#[test]
fn concurrent_inserts_of_one_key_let_exactly_one_win() {
    const THREADS: usize = 4;
    for round in 0..20 {
        let db = Database::new();
        let t = accounts(&db);
        let barrier = Arc::new(Barrier::new(THREADS));
        let wins = thread::scope(|s| {
            let hs: Vec<_> = (0..THREADS)
                .map(|i| {
                    let (db, t, barrier) = (&db, &t, barrier.clone());
                    s.spawn(move || {
                        let mut txn = db.begin(IsolationLevel::ReadCommitted);
                        barrier.wait();
                        loop {
                            match t.insert(&mut txn, &row(round, i as i64, "")) {
                                Ok(_) => break,
                                Err(StorageError::WouldBlock { holder }) => {
                                    db.wait_for_blocking(&txn, holder).unwrap()
                                }
                                Err(StorageError::UniqueViolation { .. }) => {
                                    db.rollback(txn);
                                    return 0;
                                }
                                Err(e) => panic!("{e:?}"),
                            }
                        }
                        // Hold the key a moment so others really wait on the pending insert.
                        thread::sleep(Duration::from_millis(1));
                        // Half of the winners change their mind: a waiter must then win.
                        if i % 2 == 0 {
                            db.rollback(txn);
                            0
                        } else {
                            db.commit(txn).unwrap();
                            1
                        }
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum::<usize>()
        });
        let mut r = db.begin(IsolationLevel::ReadCommitted);
        let s = db.statement_snapshot(&mut r);
        assert_eq!(t.live_row_count(&s), wins);
        assert_eq!(
            wins, 1,
            "odd threads never roll back, so exactly one insert commits"
        );
    }
}

#[test]
fn snapshots_see_consistent_totals_while_transfers_commit() {
    const ACCOUNTS_N: i32 = 20;
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, ACCOUNTS_N, 100);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    thread::scope(|s| {
        let mut writers = Vec::new();
        for w in 0..2 {
            let (db, t) = (&db, &t);
            writers.push(s.spawn(move || {
                use rand::Rng;
                let mut rng = rand::rng();
                for _ in 0..2000 {
                    let (a, b) = (
                        rng.random_range(0..ACCOUNTS_N),
                        rng.random_range(0..ACCOUNTS_N),
                    );
                    let mut txn = db.begin(IsolationLevel::ReadCommitted);
                    // Lock in id order to stay deadlock-free; the deadlock test covers the rest.
                    let (x, y) = if a <= b { (a, b) } else { (b, a) };
                    let amount = if a <= b { 3 } else { -3 };
                    assert!(add_balance(db, t, &mut txn, x, -amount).unwrap());
                    assert!(add_balance(db, t, &mut txn, y, amount).unwrap());
                    if w == 0 && rng.random_ratio(1, 5) {
                        db.rollback(txn);
                    } else {
                        db.commit(txn).unwrap();
                    }
                }
            }));
        }
        let (db, t, checker_stop) = (&db, &t, stop.clone());
        s.spawn(move || {
            let mut checks = 0;
            while !checker_stop.load(Ordering::Relaxed) || checks < 100 {
                let mut txn = db.begin(IsolationLevel::RepeatableRead);
                let snap = db.statement_snapshot(&mut txn);
                let mut total = 0;
                let mut n = 0;
                t.scan(&snap, |_, bytes| {
                    let Value::Int64(b) = row_codec::decode_column(&t.types(), bytes, 1) else {
                        panic!()
                    };
                    total += b;
                    n += 1;
                    true
                });
                assert_eq!(
                    (n, total),
                    (ACCOUNTS_N, 100 * ACCOUNTS_N as i64),
                    "torn snapshot at {}",
                    snap.ts
                );
                db.commit(txn).unwrap();
                checks += 1;
                if checks > 100_000 {
                    break;
                }
            }
        });
        for w in writers {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
}

/// A minimal executor: polls the future, parking the thread between wake-ups.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    struct ThreadWaker(thread::Thread);
    impl Wake for ThreadWaker {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        thread::park();
    }
}

#[test]
fn async_wait_for_wakes_when_holder_ends() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 1, 0);
    let mut holder = db.begin(IsolationLevel::ReadCommitted);
    add_balance(&db, &t, &mut holder, 0, 1).unwrap();
    let holder_id = holder.id();
    let mut waiter = db.begin(IsolationLevel::ReadCommitted);
    let snap = db.statement_snapshot(&mut waiter);
    let (r0, _) = get(&t, &snap, 0).unwrap();
    assert_eq!(
        t.delete(&mut waiter, &r0, &snap),
        Err(StorageError::WouldBlock { holder: holder_id })
    );
    let db2 = db.clone();
    let ender = thread::spawn(move || {
        thread::sleep(Duration::from_millis(50));
        db2.commit(holder).unwrap();
    });
    let started = std::time::Instant::now();
    block_on(db.wait_for(&waiter, holder_id)).unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(40),
        "returned before the holder ended"
    );
    ender.join().unwrap();
    // Waiting for a finished transaction returns at once.
    block_on(db.wait_for(&waiter, holder_id)).unwrap();
    assert!(matches!(
        t.delete(&mut waiter, &r0, &snap),
        Ok(WriteOutcome::Changed {
            newest: Some(_),
            ..
        })
    ));
}

/// `is_waited_for` says whether another transaction is waiting for this one right now: the
/// server answers a transaction that others queue behind before anything else.
#[test]
fn a_transaction_knows_while_another_waits_for_it() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 1, 0);
    let mut holder = db.begin(IsolationLevel::ReadCommitted);
    assert!(!holder.is_waited_for(), "a transaction that wrote nothing");
    add_balance(&db, &t, &mut holder, 0, 1).unwrap();
    assert!(!holder.is_waited_for(), "nobody waits yet");
    let waiter = db.begin(IsolationLevel::ReadCommitted);
    let mut wait = Box::pin(db.wait_for(&waiter, holder.id()));
    let mut cx = Context::from_waker(Waker::noop());
    assert!(wait.as_mut().poll(&mut cx).is_pending());
    assert!(holder.is_waited_for());
    // A wait given up (a cancelled statement) no longer counts.
    drop(wait);
    assert!(!holder.is_waited_for());
    db.commit(holder).unwrap();
}

/// A waiter for a row lock that several transactions share waits for all of them, so a
/// cycle through any of them is a deadlock, not only one through the holder it sleeps on
/// (which, idle in its transaction, could otherwise leave the other two waiting forever).
#[test]
fn a_deadlock_through_any_holder_of_a_shared_lock_is_found() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 2, 0);
    let mut txns: Vec<Transaction> = (0..3)
        .map(|_| db.begin(IsolationLevel::ReadCommitted))
        .collect();
    let snaps: Vec<Snapshot> = txns.iter_mut().map(|x| db.statement_snapshot(x)).collect();
    let (r0, _) = get(&t, &snaps[0], 0).unwrap();
    let (r1, _) = get(&t, &snaps[0], 1).unwrap();
    // The first holds row 1 for update; all three share row 0.
    t.lock_row(&mut txns[0], &r1, &snaps[0], RowLockMode::Exclusive)
        .unwrap();
    for (x, snap) in txns.iter_mut().zip(&snaps) {
        t.lock_row(x, &r0, snap, RowLockMode::Share).unwrap();
    }
    // The first wants row 0 for update: it waits for one of the other two...
    let holder = match t.lock_row(&mut txns[0], &r0, &snaps[0], RowLockMode::Exclusive) {
        Err(StorageError::WouldBlock { holder }) => holder,
        other => panic!("expected WouldBlock, got {other:?}"),
    };
    let mut first = txns.remove(0);
    let (first_id, first_snap) = (first.id(), snaps[0]);
    let mut wait = Box::pin(db.wait_for(&first, holder));
    let mut cx = Context::from_waker(Waker::noop());
    assert!(wait.as_mut().poll(&mut cx).is_pending());
    // ...and the other one, wanting row 1, closes a cycle through the first.
    let other = txns.iter().position(|x| x.id() != holder).unwrap();
    let other_snap = snaps[1 + other];
    let mut other = txns.remove(other);
    assert_eq!(
        t.lock_row(&mut other, &r1, &other_snap, RowLockMode::Exclusive),
        Err(StorageError::WouldBlock { holder: first_id })
    );
    assert_eq!(
        block_on(db.wait_for(&other, first_id)),
        Err(StorageError::Deadlock)
    );
    db.rollback(other);
    // The holder it sleeps on ends too; then the first gets its lock.
    db.rollback(txns.pop().unwrap());
    assert!(wait.as_mut().poll(&mut cx).is_ready());
    drop(wait);
    assert_eq!(
        t.lock_row(&mut first, &r0, &first_snap, RowLockMode::Exclusive),
        Ok(WriteOutcome::Done)
    );
    db.commit(first).unwrap();
}

/// The other holders a `WouldBlock` names go with that one wait only: a transaction that did
/// not wait then (NOWAIT) and later waits for one of them at a row it holds alone is not
/// taken to wait for the rest, so no false deadlock comes of it.
#[test]
fn the_other_holders_of_a_lock_not_waited_for_are_forgotten() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 3, 0);
    let mut h = db.begin(IsolationLevel::ReadCommitted);
    let mut o = db.begin(IsolationLevel::ReadCommitted);
    let mut w = db.begin(IsolationLevel::ReadCommitted);
    let (sh, so, sw) = (
        db.statement_snapshot(&mut h),
        db.statement_snapshot(&mut o),
        db.statement_snapshot(&mut w),
    );
    let rows: Vec<RowRef> = (0..3).map(|id| get(&t, &sh, id).unwrap().0).collect();
    t.lock_row(&mut h, &rows[0], &sh, RowLockMode::Share)
        .unwrap();
    t.lock_row(&mut o, &rows[0], &so, RowLockMode::Share)
        .unwrap();
    t.lock_row(&mut h, &rows[1], &sh, RowLockMode::Exclusive)
        .unwrap();
    t.lock_row(&mut w, &rows[2], &sw, RowLockMode::Exclusive)
        .unwrap();
    // w finds row 0 shared by h and o, and does not wait (NOWAIT)...
    assert_eq!(
        t.lock_row(&mut w, &rows[0], &sw, RowLockMode::Exclusive),
        Err(StorageError::WouldBlock { holder: h.id() })
    );
    // ...then waits for h at row 1, which h holds alone.
    assert_eq!(
        t.lock_row(&mut w, &rows[1], &sw, RowLockMode::Exclusive),
        Err(StorageError::WouldBlock { holder: h.id() })
    );
    let mut cx = Context::from_waker(Waker::noop());
    let mut w_waits = Box::pin(db.wait_for(&w, h.id()));
    assert!(w_waits.as_mut().poll(&mut cx).is_pending());
    // o waiting for w closes no cycle: w waits for h only.
    assert_eq!(
        t.lock_row(&mut o, &rows[2], &so, RowLockMode::Exclusive),
        Err(StorageError::WouldBlock { holder: w.id() })
    );
    let mut o_waits = Box::pin(db.wait_for(&o, w.id()));
    assert!(o_waits.as_mut().poll(&mut cx).is_pending());
    db.rollback(h);
    assert!(w_waits.as_mut().poll(&mut cx).is_ready());
    drop(w_waits);
    db.rollback(w);
    assert!(o_waits.as_mut().poll(&mut cx).is_ready());
    drop(o_waits);
    db.rollback(o);
}

#[test]
fn async_wait_detects_deadlock() {
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, 2, 0);
    let mut a = db.begin(IsolationLevel::ReadCommitted);
    let mut b = db.begin(IsolationLevel::ReadCommitted);
    add_balance(&db, &t, &mut a, 0, 1).unwrap();
    add_balance(&db, &t, &mut b, 1, 1).unwrap();
    let (a_id, b_id) = (a.id(), b.id());
    let db2 = db.clone();
    // a waits for b on another thread...
    let waiter = thread::spawn(move || {
        let r = block_on(db2.wait_for(&a, b_id));
        (r, a)
    });
    thread::sleep(Duration::from_millis(50));
    // ...so b waiting for a closes the cycle and b is the victim.
    assert_eq!(block_on(db.wait_for(&b, a_id)), Err(StorageError::Deadlock));
    db.rollback(b);
    let (r, a) = waiter.join().unwrap();
    assert_eq!(r, Ok(()));
    db.commit(a).unwrap();
}

/// Index range scans, forward and backward, while writers move a window of ids (each
/// transaction deletes the lowest id and inserts one past the highest) and garbage collection
/// runs: every snapshot sees exactly one window, each id once and in key order, never a row
/// missed or seen twice, whichever of the index's run and delta the entries sit in.
#[test]
fn index_range_scans_see_each_row_once_under_inserts_and_deletes() {
    const WINDOW: i32 = 300;
    const MOVES: i32 = 3000;
    const BY_ID: IndexId = 11;
    let db = Database::new();
    let t = accounts(&db);
    load(&db, &t, WINDOW, 0);
    // Built over the loaded rows, this index holds them in its sorted run (deletes set
    // tombstones there) and the moved-in ones in its delta.
    t.add_index(IndexDef {
        id: BY_ID,
        name: "accounts_by_id".into(),
        columns: vec![0],
        unique: false,
        predicate: None,
    })
    .unwrap();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (db, t) = (&db, &t);
    thread::scope(|s| {
        let writer_done = done.clone();
        s.spawn(move || {
            for lo in 0..MOVES {
                let mut txn = db.begin(IsolationLevel::ReadCommitted);
                let snap = db.statement_snapshot(&mut txn);
                let (r, _) = get(t, &snap, lo).expect("the window's lowest id");
                assert!(matches!(
                    t.delete(&mut txn, &r, &snap),
                    Ok(WriteOutcome::Done)
                ));
                t.insert(&mut txn, &row(lo + WINDOW, 0, "")).unwrap();
                if lo % 7 == 3 {
                    // A rolled-back move leaves no trace; do it again for real.
                    db.rollback(txn);
                    let mut txn = db.begin(IsolationLevel::ReadCommitted);
                    let snap = db.statement_snapshot(&mut txn);
                    let (r, _) = get(t, &snap, lo).expect("still there after a rollback");
                    assert!(matches!(
                        t.delete(&mut txn, &r, &snap),
                        Ok(WriteOutcome::Done)
                    ));
                    t.insert(&mut txn, &row(lo + WINDOW, 0, "")).unwrap();
                    db.commit(txn).unwrap();
                } else {
                    db.commit(txn).unwrap();
                }
                if lo % 500 == 0 {
                    db.vacuum();
                }
            }
            writer_done.store(true, Ordering::Relaxed);
        });
        for direction in [Direction::Forward, Direction::Backward] {
            let reader_done = done.clone();
            s.spawn(move || {
                let mut checks = 0;
                while !reader_done.load(Ordering::Relaxed) || checks < 50 {
                    let mut txn = db.begin(IsolationLevel::RepeatableRead);
                    let snap = db.statement_snapshot(&mut txn);
                    let mut seen = Vec::new();
                    t.index_scan_in(
                        direction,
                        BY_ID,
                        &snap,
                        std::ops::Bound::Unbounded,
                        std::ops::Bound::Unbounded,
                        |_, bytes| {
                            match row_codec::decode_column(&t.types(), bytes, 0) {
                                Value::Int32(id) => seen.push(id),
                                v => panic!("{v:?}"),
                            }
                            true
                        },
                    )
                    .unwrap();
                    if direction == Direction::Backward {
                        seen.reverse();
                    }
                    assert_eq!(seen.len(), WINDOW as usize, "{direction:?} at {}", snap.ts);
                    let lo = seen[0];
                    assert!(
                        seen.iter().enumerate().all(|(i, id)| *id == lo + i as i32),
                        "{direction:?} scan not one window in order: {seen:?}"
                    );
                    // A bounded range inside the window: the same rows, in order.
                    let (from, to) = (lo + 10, lo + 20);
                    let mut inner = Vec::new();
                    t.index_scan_in(
                        direction,
                        BY_ID,
                        &snap,
                        std::ops::Bound::Included(&[Value::Int32(from)][..]),
                        std::ops::Bound::Excluded(&[Value::Int32(to)][..]),
                        |_, bytes| {
                            if let Value::Int32(id) = row_codec::decode_column(&t.types(), bytes, 0)
                            {
                                inner.push(id);
                            }
                            true
                        },
                    )
                    .unwrap();
                    if direction == Direction::Backward {
                        inner.reverse();
                    }
                    assert_eq!(inner, (from..to).collect::<Vec<_>>(), "{direction:?}");
                    db.commit(txn).unwrap();
                    checks += 1;
                }
            });
        }
    });
}
