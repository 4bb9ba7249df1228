//! Micro-benchmark of the row engine on a pgbench_accounts-shaped table (aid int4 primary key,
//! bid int4, abalance int4, filler char(84)), 1M rows: point lookups, inserts and updates in
//! autocommit READ COMMITTED transactions, with 1 and 2 threads, plus memory per row.
//! Run with `cargo run --release -p shoal-storage --example microbench [rows]`.

use std::ops::Bound;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shoal_storage::*;

const PK: IndexId = 1;
const OPS_PER_THREAD: usize = 1_000_000;

fn account(aid: i32, abalance: i32) -> Vec<Value> {
    vec![
        Value::Int32(aid),
        Value::Int32(aid / 100_000 + 1),
        Value::Int32(abalance),
        Value::Text(" ".repeat(84)),
    ]
}

/// Cheap per-thread pseudo-random ids (xorshift), so the generator does not dominate.
struct Ids(u64);
impl Ids {
    fn next(&mut self, n: i32) -> i32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as i32
    }
}

fn lookup(db: &Database, t: &RowTable, types: &[DataType], aid: i32) -> i32 {
    let mut txn = db.begin(IsolationLevel::ReadCommitted);
    let snap = db.statement_snapshot(&mut txn);
    let key = [Value::Int32(aid)];
    let mut balance = None;
    t.index_scan(
        PK,
        &snap,
        Bound::Included(&key),
        Bound::Included(&key),
        |_, bytes| {
            balance = Some(row_codec::decode_column(types, bytes, 2));
            false
        },
    )
    .unwrap();
    db.commit(txn).unwrap();
    match balance {
        Some(Value::Int32(b)) => b,
        other => panic!("aid {aid}: {other:?}"),
    }
}

/// UPDATE pgbench_accounts SET abalance = abalance + delta WHERE aid = ? (autocommit).
fn update(db: &Database, t: &RowTable, aid: i32, delta: i32) {
    let mut txn = db.begin(IsolationLevel::ReadCommitted);
    let mut snap = db.statement_snapshot(&mut txn);
    let (r, mut row) = t
        .index_get(PK, &snap, &[Value::Int32(aid)])
        .unwrap()
        .expect("row");
    loop {
        let Value::Int32(b) = row[2] else {
            unreachable!()
        };
        row[2] = Value::Int32(b + delta);
        match t.update(&mut txn, &r, &snap, &row) {
            Ok(WriteOutcome::Done) => break,
            Ok(WriteOutcome::Changed {
                newest: Some(n),
                newest_snapshot,
            }) => {
                row = n;
                snap = newest_snapshot;
            }
            Ok(WriteOutcome::Changed { newest: None, .. }) => break,
            Err(StorageError::WouldBlock { holder }) => db.wait_for_blocking(&txn, holder).unwrap(),
            Err(e) => panic!("{e}"),
        }
    }
    db.commit(txn).unwrap();
}

/// Runs `op(thread, i)` OPS_PER_THREAD times on each of `threads` threads; returns ops/s per thread.
fn run(threads: usize, op: impl Fn(usize, usize) + Sync) -> f64 {
    let started = Instant::now();
    std::thread::scope(|s| {
        for th in 0..threads {
            let op = &op;
            s.spawn(move || {
                for i in 0..OPS_PER_THREAD {
                    op(th, i);
                }
            });
        }
    });
    let elapsed: Duration = started.elapsed();
    OPS_PER_THREAD as f64 / elapsed.as_secs_f64()
}

fn main() {
    let rows: i32 = std::env::args()
        .nth(1)
        .map_or(1_000_000, |s| s.parse().expect("rows"));
    let db = Database::new();
    let types = vec![
        DataType::Int32,
        DataType::Int32,
        DataType::Int32,
        DataType::Char(84),
    ];
    let t = db.create_table(1, types.clone());
    t.add_index(IndexDef {
        id: PK,
        name: "pgbench_accounts_pkey".into(),
        columns: vec![0],
        unique: true,
        predicate: None,
    })
    .unwrap();

    let started = Instant::now();
    for batch in (0..rows).step_by(10_000) {
        let mut txn = db.begin(IsolationLevel::ReadCommitted);
        for aid in batch..(batch + 10_000).min(rows) {
            t.insert(&mut txn, &account(aid, 0)).unwrap();
        }
        db.commit(txn).unwrap();
    }
    let load_s = started.elapsed().as_secs_f64();
    println!(
        "loaded {rows} rows in {load_s:.2}s ({:.0} rows/s, 10k rows per txn)",
        rows as f64 / load_s
    );
    db.vacuum();
    println!(
        "memory: {:.0} bytes/row ({} MiB total)",
        t.memory_bytes() as f64 / rows as f64,
        t.memory_bytes() >> 20
    );

    let db = &db;
    let t = &*t;
    for threads in [1, 2] {
        let per_thread = run(threads, |th, i| {
            let mut ids = Ids(0x9E37_79B9_7F4A_7C15 ^ ((th as u64 + 1) << 32) ^ i as u64);
            std::hint::black_box(lookup(db, t, &types, ids.next(rows)));
        });
        println!(
            "point lookups, {threads} thread(s): {:.0}/s per thread, {:.0}/s total",
            per_thread,
            per_thread * threads as f64
        );
    }
    for threads in [1, 2] {
        let per_thread = run(threads, |th, i| {
            let mut ids = Ids(0x2545_F491_4F6C_DD1D ^ ((th as u64 + 1) << 40) ^ i as u64);
            update(db, t, ids.next(rows), 1);
        });
        println!(
            "updates, {threads} thread(s): {:.0}/s per thread, {:.0}/s total",
            per_thread,
            per_thread * threads as f64
        );
    }
    let next_aid = Arc::new(AtomicI32::new(rows));
    for threads in [1, 2] {
        let per_thread = run(threads, |_, _| {
            let aid = next_aid.fetch_add(1, Ordering::Relaxed);
            let mut txn = db.begin(IsolationLevel::ReadCommitted);
            t.insert(&mut txn, &account(aid, 0)).unwrap();
            db.commit(txn).unwrap();
        });
        println!(
            "inserts, {threads} thread(s): {:.0}/s per thread, {:.0}/s total",
            per_thread,
            per_thread * threads as f64
        );
    }
    let stats = db.vacuum();
    let n = t.row_count_estimate();
    println!(
        "after vacuum ({stats:?}): {n} rows, {:.0} bytes/row",
        t.memory_bytes() as f64 / n as f64
    );
}
