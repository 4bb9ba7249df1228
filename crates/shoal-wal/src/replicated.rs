//! The log of a node in a replication group: the writer thread takes batches from the append
//! buffer as it does for segment files (`flusher`), but hands each to a `BatchSink`, which
//! returns once the group has it durably (one write and one fsync per batch on each node,
//! done by the sink's own log). Waiters are told as for a flushed batch; a sink that fails
//! (this node lost its place as the primary) breaks the log, and every later commit fails.

use std::sync::Arc;

use crate::flusher::{self, BatchOutcome};
use crate::record::{self, Record};
use crate::segment::BATCH_HEADER_BYTES;
use crate::writer::Shared;
use crate::Lsn;

/// Where a replicated log's batches go.
pub trait BatchSink: Send + 'static {
    /// Makes the records `first_lsn..end_lsn` (encoded as the log encodes them) durable in the
    /// group; blocks until they are. An error says why they may not be: the log breaks.
    fn write(&mut self, first_lsn: Lsn, end_lsn: Lsn, records: &[u8]) -> Result<(), String>;
}

/// The writer thread of `Wal::open_replicated`.
pub(crate) fn run(shared: Arc<Shared>, mut sink: Box<dyn BatchSink>) {
    let mut batch = Vec::with_capacity(BATCH_HEADER_BYTES + (1 << 16));
    batch.resize(BATCH_HEADER_BYTES, 0);
    while let Some(taken) = flusher::take_batch(&shared, &mut batch) {
        let outcome = match sink.write(taken.first_lsn, taken.end_lsn, &batch[BATCH_HEADER_BYTES..])
        {
            Ok(()) => BatchOutcome::Written,
            Err(message) => {
                BatchOutcome::Broken(format!("{message}; the server no longer accepts writes"))
            }
        };
        if !flusher::publish(&shared, &taken, outcome, batch.len(), None) {
            return;
        }
        batch.truncate(BATCH_HEADER_BYTES);
    }
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
