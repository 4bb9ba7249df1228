//! Loading checkpoint rows (`load_rows`): blocks from several threads at once end up in the heap
//! and every index exactly once, and the table goes on working normally afterwards.

mod common;

use std::sync::Arc;

use common::*;
use shoal_storage::*;

#[test]
fn rows_loaded_in_blocks_from_several_threads_are_found_and_keys_stay_unique() {
    // Indexes fold what a load staged on first use, or all at once in `finish_load`.
    for finish_threads in [None, Some(1), Some(3)] {
        load_blocks_then_use_the_table(finish_threads);
    }
}

fn load_blocks_then_use_the_table(finish_threads: Option<usize>) {
    let db = Arc::new(Database::new());
    let t = accounts(&db);
    let types = t.types();
    // Blocks of 1000 rows, like checkpoint blocks, over several heap chunks; the row ids are
    // deliberately not the key order.
    const ROWS: i32 = 10_000;
    let encoded: Vec<(u64, Box<[u8]>)> = (0..ROWS)
        .map(|id| {
            let row_id = (ROWS - id) as u64 * 3;
            (
                row_id,
                row_codec::encode(&types, &row(id, id as i64 * 10, "x")),
            )
        })
        .collect();
    std::thread::scope(|s| {
        for half in encoded.chunks(encoded.len() / 2) {
            let t = &t;
            s.spawn(move || {
                for block in half.chunks(1000) {
                    let rows: Vec<(u64, &[u8])> =
                        block.iter().map(|(id, r)| (*id, &r[..])).collect();
                    t.load_rows(&rows);
                }
            });
        }
    });
    if let Some(threads) = finish_threads {
        t.finish_load(threads);
    }
    // As recovery does: commits after the load come after the loaded rows' timestamp.
    db.restart_clock_at(recovery::RECOVERED_TS);

    let mut txn = db.begin(IsolationLevel::ReadCommitted);
    let snap = db.statement_snapshot(&mut txn);
    assert_eq!(ids(&t, &snap), (0..ROWS).collect::<Vec<_>>());
    assert_eq!(balance(&t, &snap, 4321), Some(43210));
    let mut heap_rows = 0;
    t.scan(&snap, |_, _| {
        heap_rows += 1;
        true
    });
    assert_eq!(heap_rows, ROWS);
    drop(txn);

    // A new row gets a row id past every loaded one, and a loaded key still conflicts.
    let mut txn = db.begin(IsolationLevel::ReadCommitted);
    let fresh = t.insert(&mut txn, &row(ROWS, 0, "new")).unwrap();
    assert!(fresh.row_id() > ROWS as u64 * 3);
    assert!(matches!(
        t.insert(&mut txn, &row(7, 0, "dup")),
        Err(StorageError::UniqueViolation { .. })
    ));
}
