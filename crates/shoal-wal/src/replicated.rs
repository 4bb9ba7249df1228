//! The log of a node in a replication group: the writer thread takes batches from the append
//! buffer as it does for segment files (`flusher`), but hands each to a `BatchSink`, which
//! makes it durable in the group (one write and one fsync per batch on each node, done by the
//! sink's own log). Batches are handed over in LSN order without waiting for the ones before
//! (up to `BATCHES_IN_FLIGHT_MAX` at once: the group's round trip overlaps the next batches),
//! and a publisher thread tells their waiters in the same order, as for flushed batches. A
//! batch that fails (this node lost its place as the primary) breaks the log, and every later
//! commit fails.

use std::sync::Arc;

use crate::flusher::{self, BatchOutcome, Taken};
use crate::record::{self, Record};
use crate::segment::BATCH_HEADER_BYTES;
use crate::writer::Shared;
use crate::Lsn;

/// Batches handed to the group and not yet durable there: the writer waits beyond this.
const BATCHES_IN_FLIGHT_MAX: usize = 4;

/// Blocks until a batch handed to the group is durable there; an error says why it may not
/// be.
pub type BatchWait = Box<dyn FnOnce() -> Result<(), String> + Send>;

/// Where a replicated log's batches go.
pub trait BatchSink: Send + 'static {
    /// Hands the records `first_lsn..end_lsn` (encoded as the log encodes them) to the group,
    /// after every batch handed before; returns without waiting for them to be durable.
    fn submit(&mut self, first_lsn: Lsn, end_lsn: Lsn, records: &[u8]) -> BatchWait;
}

/// The writer thread of `Wal::open_replicated`.
pub(crate) fn run(shared: Arc<Shared>, mut sink: Box<dyn BatchSink>) {
    let (in_flight, arrived) =
        std::sync::mpsc::sync_channel::<(Taken, usize, BatchWait)>(BATCHES_IN_FLIGHT_MAX);
    let publisher_shared = shared.clone();
    let publisher = std::thread::Builder::new()
        .name("shoal-log-publish".into())
        .spawn(move || {
            for (taken, batch_bytes, wait) in arrived {
                let outcome = match wait() {
                    Ok(()) => BatchOutcome::Written,
                    Err(message) => BatchOutcome::Broken(format!(
                        "{message}; the server no longer accepts writes"
                    )),
                };
                if !flusher::publish(&publisher_shared, &taken, outcome, batch_bytes, None) {
                    return;
                }
            }
        })
        .expect("spawn the log publisher thread");
    let mut batch = Vec::with_capacity(BATCH_HEADER_BYTES + (1 << 16));
    batch.resize(BATCH_HEADER_BYTES, 0);
    while let Some(taken) = flusher::take_batch(&shared, &mut batch) {
        let wait = sink.submit(taken.first_lsn, taken.end_lsn, &batch[BATCH_HEADER_BYTES..]);
        // A publisher gone means a broken log: nothing more is acknowledged.
        if in_flight.send((taken, batch.len(), wait)).is_err() {
            break;
        }
        batch.truncate(BATCH_HEADER_BYTES);
    }
    drop(in_flight);
    let _ = publisher.join();
}

/// Visits the records of a batch's payload (`records` as a `BatchSink` was given them) with
/// their LSNs. Fails on a record that does not check or decode, or on LSNs that do not run on
/// from `first_lsn`.
pub fn decode_batch<E: From<String>>(
    first_lsn: Lsn,
    records: &[u8],
    mut visit: impl FnMut(Lsn, Record<'_>) -> Result<(), E>,
) -> Result<(), E> {
    let mut pos = 0usize;
    let mut lsn = first_lsn;
    while pos < records.len() {
        let raw = record::check_record(&records[pos..])
            .map_err(|e| E::from(format!("replicated batch at LSN {lsn:X}: {e}")))?;
        if raw.lsn != lsn {
            return Err(E::from(format!(
                "replicated record at LSN {:X} where {lsn:X} belongs",
                raw.lsn
            )));
        }
        let record = Record::decode(raw.kind, raw.payload)
            .map_err(|e| E::from(format!("replicated record at LSN {lsn:X}: {e}")))?;
        let size = raw.total_bytes();
        visit(lsn, record)?;
        pos += size;
        lsn += size as u64;
    }
    Ok(())
}
