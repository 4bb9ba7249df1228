//! Synthetic data for the "billion taxi rides" benchmark (see `bench/taxi/README.md`): NYC taxi
//! trips as CSV in the 51-column layout of `bench/taxi/schema.sql`, with the distributions the
//! benchmark's queries look at (cab types, passenger counts, years, distances) shaped like the
//! public data. The output depends only on the row count and the seed: rows are made in chunks
//! of a fixed size, each chunk from its own random stream seeded by (seed, chunk index), chunks
//! are generated on several threads and written in order, so the thread count changes the speed
//! and never the bytes.

mod calendar;
mod choice;
mod city;
mod csv;
mod row;
mod trip;

use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::io::{self, Write};
use std::sync::mpsc::{channel, sync_channel};
use std::thread;

pub use row::COLUMN_COUNT;
use trip::TripModel;

/// Rows per chunk in normal use. Part of the output's definition: changing it changes the bytes.
pub const ROWS_PER_CHUNK: u64 = 65_536;
/// Bytes a row takes at most, give or take; used to size chunk buffers once.
const ROW_BYTES_TYPICAL: usize = 480;

pub struct GenOptions {
    pub rows: u64,
    pub seed: u64,
    pub threads: usize,
    /// `ROWS_PER_CHUNK` except in tests, which use small chunks to exercise many of them.
    pub rows_per_chunk: u64,
}

/// The random stream of one chunk (SplitMix64 finalizer over seed and index, so neighbouring
/// chunks and neighbouring seeds get unrelated streams).
fn chunk_rng(seed: u64, chunk_index: u64) -> SmallRng {
    let mut z = seed
        ^ chunk_index
            .wrapping_add(1)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    SmallRng::seed_from_u64(z ^ (z >> 31))
}

fn write_chunk(model: &TripModel, options: &GenOptions, chunk_index: u64, out: &mut Vec<u8>) {
    let first_row = chunk_index * options.rows_per_chunk;
    let rows = options.rows_per_chunk.min(options.rows - first_row);
    let mut rng = chunk_rng(options.seed, chunk_index);
    out.clear();
    out.reserve(rows as usize * ROW_BYTES_TYPICAL);
    for row in first_row..first_row + rows {
        let trip = model.draw(&mut rng);
        row::write_trip(out, row + 1, &trip, &model.calendar);
    }
}

/// Writes `options.rows` rows to `out`. Thread `t` makes chunks `t`, `t + threads`, ... and
/// hands each to the writer (this thread) through its own channel of capacity one; the writer
/// takes them round-robin, so chunks come out in order, and every thread has at most three
/// buffers alive (one being filled, one queued, one being written), recycled through a return
/// channel.
pub fn generate(options: &GenOptions, out: &mut dyn Write) -> io::Result<()> {
    assert!(options.rows_per_chunk > 0 && options.threads > 0);
    let model = TripModel::new(options.seed);
    let chunk_count = options.rows.div_ceil(options.rows_per_chunk);
    let threads = options.threads.min(chunk_count.max(1) as usize);
    thread::scope(|scope| {
        let mut filled = Vec::with_capacity(threads);
        let mut recycle = Vec::with_capacity(threads);
        for first_chunk in 0..threads {
            let (filled_tx, filled_rx) = sync_channel::<Vec<u8>>(1);
            let (recycle_tx, recycle_rx) = channel::<Vec<u8>>();
            let model = &model;
            scope.spawn(move || {
                for chunk in (first_chunk as u64..chunk_count).step_by(threads) {
                    let mut buf = recycle_rx.try_recv().unwrap_or_default();
                    write_chunk(model, options, chunk, &mut buf);
                    if filled_tx.send(buf).is_err() {
                        return; // The writer stopped on an error.
                    }
                }
            });
            filled.push(filled_rx);
            recycle.push(recycle_tx);
        }
        for chunk in 0..chunk_count as usize {
            let t = chunk % threads;
            let buf = filled[t]
                .recv()
                .map_err(|_| io::Error::other("a generator thread stopped early"))?;
            out.write_all(&buf)?;
            let _ = recycle[t].send(buf);
        }
        out.flush()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_streams_differ() {
        use rand::RngCore;
        let a = chunk_rng(1, 0).next_u64();
        assert_ne!(a, chunk_rng(1, 1).next_u64());
        assert_ne!(a, chunk_rng(2, 0).next_u64());
    }
}
