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

/// Cuts a batch's payload (`records` as a `BatchSink` was given them) into runs of whole
/// records of at most `max_bytes` each, but never less than one record: byte ranges of
/// `records`, in order, covering it. Fails on a record that does not check.
pub fn split_batch(
    records: &[u8],
    max_bytes: usize,
) -> Result<Vec<std::ops::Range<usize>>, String> {
    let mut runs = Vec::new();
    let (mut start, mut pos) = (0usize, 0usize);
    while pos < records.len() {
        let size = record::check_record(&records[pos..])
            .map_err(|e| format!("splitting a batch at byte {pos}: {e}"))?
            .total_bytes();
        if pos > start && pos + size - start > max_bytes {
            runs.push(start..pos);
            start = pos;
        }
        pos += size;
    }
    if pos > start {
        runs.push(start..pos);
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A payload of records with these payload sizes, from LSN 1000.
    fn records(payload_sizes: &[usize]) -> Vec<u8> {
        let mut buf = Vec::new();
        let mut lsn = 1000;
        for &bytes in payload_sizes {
            let image = vec![7u8; bytes];
            let record = Record::Catalog { image: &image };
            lsn += record::encode_record(&mut buf, lsn, record.kind(), bytes, |b| {
                record.encode_payload(b)
            }) as u64;
        }
        buf
    }

    #[test]
    fn a_batch_splits_into_whole_records_within_the_bound() {
        let sizes = [100, 100, 5000, 100, 100, 100];
        let payload = records(&sizes);
        let record_bytes: Vec<usize> = sizes
            .iter()
            .map(|s| s + record::RECORD_HEADER_BYTES)
            .collect();
        let max = 2 * record_bytes[0] + 1;
        let runs = split_batch(&payload, max).unwrap();
        // Two small ones, the big one alone (bigger than the bound), two, then the last.
        let ends: Vec<usize> = runs.iter().map(|r| r.end).collect();
        let mut expected = Vec::new();
        let mut at = 0;
        for group in [
            &record_bytes[0..2],
            &record_bytes[2..3],
            &record_bytes[3..5],
            &record_bytes[5..6],
        ] {
            at += group.iter().sum::<usize>();
            expected.push(at);
        }
        assert_eq!(ends, expected);
        assert_eq!(runs[0].start, 0);
        assert!(runs.windows(2).all(|w| w[0].end == w[1].start));
        // Each run decodes on its own from its LSN.
        for run in &runs {
            let mut seen = 0;
            decode_batch::<String>(1000 + run.start as u64, &payload[run.clone()], |_, _| {
                seen += 1;
                Ok(())
            })
            .unwrap();
            assert!(seen >= 1);
        }
        assert_eq!(
            split_batch(&payload, usize::MAX).unwrap(),
            vec![0..payload.len()]
        );
        assert!(split_batch(&[], 10).unwrap().is_empty());
        assert!(
            split_batch(&payload[..50], 10).is_err(),
            "a cut record does not check"
        );
    }
}
