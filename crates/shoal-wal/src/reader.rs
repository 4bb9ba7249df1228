//! Reading the log back for recovery. `read_log` visits every record from a checkpoint's start
//! LSN onwards, in order across segments, validating each batch completely before handing out any
//! of its records. Only the last batch of the log can legitimately be torn (the writer syncs
//! each batch before writing the next), so damage there with nothing valid after it is cut off;
//! damage anywhere else, and any gap in the chain of segments, is reported as corruption. A
//! segment's content ends where only zeros follow: the writer zero-fills segments ahead.

use std::fs;
use std::ops::Range;
use std::path::Path;

use crate::error::{ReadError, WalError};
use crate::record::{check_record, Record};
use crate::segment::{self, BatchHeader, BATCH_HEADER_BYTES, SEGMENT_HEADER_BYTES, WAL_DIR_NAME};
use crate::Lsn;

/// What `read_log` found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogReadSummary {
    /// Where the log ends: pass it to `Wal::open`. Never below the `from_lsn` given to `read_log`.
    pub end_lsn: Lsn,
    /// Records visited (those at or after `from_lsn`).
    pub records: u64,
    /// Encoded bytes of the visited records.
    pub bytes: u64,
    /// Segment files read.
    pub segments: usize,
    /// Bytes cut off the end of the last segment as a torn tail (0 if the log ended cleanly).
    pub torn_tail_cut_bytes: u64,
}

/// Where a segment's valid content ends, and the torn tail cut off after it if any.
pub(crate) struct SegmentEnd {
    valid_bytes: usize,
    pub end_lsn: Lsn,
    torn: Option<String>,
}

/// Visits every record with LSN >= `from_lsn` in `dir/wal`, in log order, calling
/// `visit(lsn, record)`. `from_lsn` is the start LSN of the checkpoint recovery loaded (0 without
/// one). A torn tail of the last segment is truncated away (with a warning). Damage elsewhere, a
/// missing segment or a log starting after `from_lsn` returns `WalError::Corrupt` naming the
/// file. A missing or empty log directory is an empty log ending at `from_lsn`.
pub fn read_log<E>(
    dir: &Path,
    from_lsn: Lsn,
    mut visit: impl FnMut(Lsn, Record<'_>) -> Result<(), E>,
) -> Result<LogReadSummary, ReadError<E>> {
    let wal_dir = dir.join(WAL_DIR_NAME);
    let segments = segment::list_segments(&wal_dir).map_err(|e| {
        WalError::Io(format!(
            "could not list directory \"{}\": {e}",
            wal_dir.display()
        ))
    })?;
    let mut summary = LogReadSummary {
        end_lsn: from_lsn,
        ..LogReadSummary::default()
    };
    if segments.is_empty() {
        return Ok(summary);
    }
    // Start at the last segment beginning at or before `from_lsn`; earlier ones hold only older
    // records (and are normally removed after the checkpoint).
    let Some(first) = segments
        .iter()
        .rposition(|(base_lsn, _)| *base_lsn <= from_lsn)
    else {
        let reason = format!(
            "the log starts at LSN {:x} but recovery needs it from LSN {from_lsn:x}: segments are missing",
            segments[0].0
        );
        return Err(WalError::corrupt(&segments[0].1, 0, reason).into());
    };
    let last = segments.len() - 1;
    let mut prev_end_lsn: Option<Lsn> = None;
    for (i, (base_lsn, path)) in segments.iter().enumerate().skip(first) {
        if let Some(prev_end_lsn) = prev_end_lsn {
            // A gap is harmless only where it lies wholly before what recovery needs: batches
            // dropped for ENOSPC leave LSN holes, and a checkpoint may start inside one.
            let harmless_gap = *base_lsn > prev_end_lsn && *base_lsn <= from_lsn;
            if *base_lsn != prev_end_lsn && !harmless_gap {
                let reason = format!(
                    "segment starts at LSN {base_lsn:x} but the previous segment ends at LSN \
                     {prev_end_lsn:x}: a segment is missing or damaged"
                );
                return Err(WalError::corrupt(path, 0, reason).into());
            }
        }
        let data = fs::read(path).map_err(|e| {
            WalError::Io(format!("could not read file \"{}\": {e}", path.display()))
        })?;
        let end = read_segment(
            path,
            &data,
            *base_lsn,
            i == last,
            from_lsn,
            &mut visit,
            &mut summary,
        )?;
        summary.segments += 1;
        if let Some(reason) = &end.torn {
            cut_torn_tail(path, &wal_dir, end.valid_bytes, data.len(), reason)?;
            summary.torn_tail_cut_bytes = (data.len() - end.valid_bytes) as u64;
        }
        prev_end_lsn = Some(end.end_lsn);
    }
    summary.end_lsn = prev_end_lsn.unwrap_or(from_lsn).max(from_lsn);
    Ok(summary)
}

/// Validates and visits the batches of one segment.
pub(crate) fn read_segment<E>(
    path: &Path,
    data: &[u8],
    name_base_lsn: Lsn,
    is_last: bool,
    from_lsn: Lsn,
    visit: &mut impl FnMut(Lsn, Record<'_>) -> Result<(), E>,
    summary: &mut LogReadSummary,
) -> Result<SegmentEnd, ReadError<E>> {
    match segment::decode_segment_header(data) {
        Ok(base_lsn) if base_lsn == name_base_lsn => {}
        Ok(base_lsn) => {
            let reason =
                format!("header says the segment starts at LSN {base_lsn:x}, its name disagrees");
            return Err(WalError::corrupt(path, 0, reason).into());
        }
        // A crash while creating the segment: nothing after the header was ever written.
        Err(reason) if is_last && segment::find_batch_header(data, 0).is_none() => {
            return Ok(SegmentEnd {
                valid_bytes: 0,
                end_lsn: name_base_lsn,
                torn: Some(reason.into()),
            });
        }
        Err(reason) => return Err(WalError::corrupt(path, 0, reason).into()),
    }
    let mut pos = SEGMENT_HEADER_BYTES;
    let mut end_lsn = name_base_lsn;
    // Reused for every batch: (lsn, kind, payload range) of its records.
    let mut records: Vec<(Lsn, u8, Range<usize>)> = Vec::new();
    while pos < data.len() {
        match check_batch(&data[pos..], end_lsn, &mut records) {
            Ok(header) => {
                for (lsn, kind, payload) in records.iter().filter(|r| r.0 >= from_lsn) {
                    let payload = &data[pos + payload.start..pos + payload.end];
                    // `check_batch` decoded every payload already.
                    let record = Record::decode(*kind, payload).expect("validated record");
                    visit(*lsn, record).map_err(ReadError::Visitor)?;
                    // Clock records mark time; `records` counts the log's content.
                    summary.records += u64::from(*kind != crate::record::KIND_CLOCK);
                    summary.bytes += (crate::RECORD_HEADER_BYTES + payload.len()) as u64;
                }
                pos += BATCH_HEADER_BYTES + header.record_bytes as usize;
                end_lsn = header.end_lsn;
            }
            Err(_) if segment::is_zero_tail(&data[pos..]) => break,
            Err((reason, header)) => {
                // Look for a later batch past this one's records (or, if even its header is bad,
                // anywhere after it). Finding one proves this batch had been synced.
                let resume = match header {
                    Some(h) => pos.saturating_add(BATCH_HEADER_BYTES + h.record_bytes as usize),
                    None => pos + 1,
                };
                if is_last && segment::find_batch_header(data, resume.min(data.len())).is_none() {
                    return Ok(SegmentEnd {
                        valid_bytes: pos,
                        end_lsn,
                        torn: Some(reason),
                    });
                }
                let reason = if is_last {
                    format!("{reason}, with valid batches after it")
                } else {
                    reason
                };
                return Err(WalError::corrupt(path, pos as u64, reason).into());
            }
        }
    }
    Ok(SegmentEnd {
        valid_bytes: pos,
        end_lsn,
        torn: None,
    })
}

/// Validates the batch at `data[0]` whose first LSN must be at least `min_first_lsn`, filling
/// `records` with its records (offsets relative to `data`). On failure returns why, and the
/// batch header if that much was valid.
pub(crate) fn check_batch(
    data: &[u8],
    min_first_lsn: Lsn,
    records: &mut Vec<(Lsn, u8, Range<usize>)>,
) -> Result<BatchHeader, (String, Option<BatchHeader>)> {
    records.clear();
    let header = BatchHeader::decode(data).map_err(|r| (r.to_string(), None))?;
    let fail = |reason: String| Err((reason, Some(header)));
    if header.first_lsn < min_first_lsn {
        return fail(format!(
            "batch LSN {:x} goes back before {min_first_lsn:x}",
            header.first_lsn
        ));
    }
    let batch_end = match BATCH_HEADER_BYTES.checked_add(header.record_bytes as usize) {
        Some(end) if end <= data.len() => end,
        _ => return fail("batch runs past the end of the file".into()),
    };
    let mut pos = BATCH_HEADER_BYTES;
    let mut lsn = header.first_lsn;
    while pos < batch_end {
        let raw = match check_record(&data[pos..batch_end]) {
            Ok(raw) => raw,
            Err(reason) => return fail(format!("{reason} at LSN {lsn:x}")),
        };
        if raw.lsn != lsn {
            return fail(format!("record has LSN {:x}, expected {lsn:x}", raw.lsn));
        }
        if let Err(reason) = Record::decode(raw.kind, raw.payload) {
            return fail(format!("record at LSN {lsn:x} is malformed: {reason}"));
        }
        let payload_start = pos + crate::RECORD_HEADER_BYTES;
        records.push((
            lsn,
            raw.kind,
            payload_start..payload_start + raw.payload.len(),
        ));
        pos += raw.total_bytes();
        lsn += raw.total_bytes() as u64;
    }
    debug_assert_eq!(lsn, header.end_lsn);
    Ok(header)
}

/// Truncates the last segment to its valid bytes (removing it if not even its header was
/// valid) and makes that durable, so appends after recovery never follow garbage.
fn cut_torn_tail(
    path: &Path,
    wal_dir: &Path,
    valid_bytes: usize,
    file_bytes: usize,
    reason: &str,
) -> Result<(), WalError> {
    tracing::warn!(
        file = %path.display(),
        offset = valid_bytes,
        cut_bytes = file_bytes - valid_bytes,
        "cutting torn tail of the write-ahead log: {reason}"
    );
    let io_err = |e: std::io::Error| {
        WalError::Io(format!(
            "could not cut the torn tail of \"{}\": {e}",
            path.display()
        ))
    };
    if valid_bytes == 0 {
        fs::remove_file(path).map_err(io_err)?;
    } else {
        let file = fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(io_err)?;
        file.set_len(valid_bytes as u64).map_err(io_err)?;
        file.sync_all().map_err(io_err)?;
    }
    segment::sync_dir(wal_dir).map_err(io_err)
}
