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

/// Loads `encoded` rows (row id, bytes) as a checkpoint load does: two threads, each taking
/// half of them in blocks of `block_rows`.
fn load_in_two_threads(t: &RowTable, encoded: &[(u64, Box<[u8]>)], block_rows: usize) {
    std::thread::scope(|s| {
        for half in encoded.chunks(encoded.len() / 2) {
            s.spawn(move || {
                for block in half.chunks(block_rows) {
                    let rows: Vec<(u64, &[u8])> =
                        block.iter().map(|(id, r)| (*id, &r[..])).collect();
                    t.load_rows(&rows);
                }
            });
        }
    });
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
    load_in_two_threads(&t, &encoded, 1000);
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

/// A checkpoint of a table two clients filled at the same time, each inserting batches of
/// consecutive keys: the rows of a pair of batches alternate in the heap, so every loaded
/// block holds keys of both and overlaps every other block of the pair (far more than the
/// merge's shallow limit). And one whose keys follow no order at all, which the merge gives up
/// on part way and sorts instead. Either way the index comes out in key order, once per row.
#[test]
fn blocks_of_concurrent_batches_and_of_shuffled_keys_load_in_key_order() {
    const ROWS: i32 = 120_000;
    const BATCH: i32 = 20_000;
    let concurrent: Vec<i32> = (0..ROWS / (2 * BATCH))
        .flat_map(|pair| {
            let (a, b) = (2 * pair * BATCH, (2 * pair + 1) * BATCH);
            (0..BATCH)
                .step_by(10)
                .flat_map(move |i| (a + i..a + i + 10).chain(b + i..b + i + 10))
        })
        .collect();
    // A fixed shuffle (an LCG), so a failure repeats.
    let mut shuffled: Vec<i32> = (0..ROWS).collect();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for i in (1..shuffled.len()).rev() {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        shuffled.swap(i, (state >> 33) as usize % (i + 1));
    }
    for (what, keys) in [("concurrent batches", concurrent), ("shuffled", shuffled)] {
        assert_eq!(keys.len(), ROWS as usize);
        let db = Arc::new(Database::new());
        let t = accounts(&db);
        let types = t.types();
        let encoded: Vec<(u64, Box<[u8]>)> = keys
            .iter()
            .enumerate()
            .map(|(pos, &id)| (pos as u64 + 1, row_codec::encode(&types, &row(id, 0, ""))))
            .collect();
        load_in_two_threads(&t, &encoded, 200);
        t.finish_load(2);
        db.restart_clock_at(recovery::RECOVERED_TS);
        let mut txn = db.begin(IsolationLevel::ReadCommitted);
        let snap = db.statement_snapshot(&mut txn);
        assert_eq!(ids(&t, &snap), (0..ROWS).collect::<Vec<_>>(), "{what}");
    }
}
