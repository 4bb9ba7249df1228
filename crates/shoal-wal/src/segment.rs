//! Segment files and the batch frames inside them. A segment `<base lsn as 16 hex digits>.wal`
//! starts with a 32-byte header naming its base LSN (where the previous segment's log ended), then
//! holds batches: each write of the group-commit writer is one batch, a 32-byte frame header
//! (first and end LSN, byte count, CRC of the frame header) followed by the batch's records.
//! Batches are what let recovery tell a torn tail from damage: the writer fsyncs every batch
//! before writing the next, so only the last batch of the log can be torn, and a valid batch after
//! a damaged one proves the damage hit data that had been durable.

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::Lsn;

/// Subdirectory of the data directory holding the segments.
pub(crate) const WAL_DIR_NAME: &str = "wal";
/// Size of the segment header: magic u64, version u32, crc u32, base lsn u64, 8 zero bytes.
pub(crate) const SEGMENT_HEADER_BYTES: usize = 32;
const SEGMENT_MAGIC: u64 = u64::from_le_bytes(*b"SHOALWAL");
const SEGMENT_VERSION: u32 = 1;
/// Size of a batch frame header: magic u32, crc u32, record bytes u64, first lsn u64, end lsn u64.
pub(crate) const BATCH_HEADER_BYTES: usize = 32;
const BATCH_MAGIC: u32 = 0x5357_4842; // "BHWS" little-endian

/// File name of the segment whose base LSN is `base_lsn`.
pub(crate) fn segment_file_name(base_lsn: Lsn) -> String {
    format!("{base_lsn:016x}.wal")
}

pub(crate) fn parse_segment_file_name(name: &str) -> Option<Lsn> {
    let hex = name.strip_suffix(".wal")?;
    if hex.len() != 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Lsn::from_str_radix(hex, 16).ok()
}

/// The segments in `wal_dir`, ordered by base LSN. A missing directory has no segments.
pub(crate) fn list_segments(wal_dir: &Path) -> io::Result<Vec<(Lsn, PathBuf)>> {
    let entries = match fs::read_dir(wal_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut segments = Vec::new();
    for entry in entries {
        let entry = entry?;
        if let Some(base) = entry.file_name().to_str().and_then(parse_segment_file_name) {
            segments.push((base, entry.path()));
        }
    }
    segments.sort_unstable_by_key(|(base, _)| *base);
    Ok(segments)
}

pub(crate) fn encode_segment_header(base_lsn: Lsn) -> [u8; SEGMENT_HEADER_BYTES] {
    let mut h = [0u8; SEGMENT_HEADER_BYTES];
    h[0..8].copy_from_slice(&SEGMENT_MAGIC.to_le_bytes());
    h[8..12].copy_from_slice(&SEGMENT_VERSION.to_le_bytes());
    h[16..24].copy_from_slice(&base_lsn.to_le_bytes());
    let crc = header_crc(&h);
    h[12..16].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Checks a segment header and returns its base LSN.
pub(crate) fn decode_segment_header(data: &[u8]) -> Result<Lsn, &'static str> {
    if data.len() < SEGMENT_HEADER_BYTES {
        return Err("segment header is incomplete");
    }
    let h = &data[..SEGMENT_HEADER_BYTES];
    if u64::from_le_bytes(h[0..8].try_into().unwrap()) != SEGMENT_MAGIC {
        return Err("bad segment magic");
    }
    if u32::from_le_bytes(h[12..16].try_into().unwrap()) != header_crc(h) {
        return Err("segment header checksum mismatch");
    }
    if u32::from_le_bytes(h[8..12].try_into().unwrap()) != SEGMENT_VERSION {
        return Err("unsupported segment version");
    }
    Ok(u64::from_le_bytes(h[16..24].try_into().unwrap()))
}

/// CRC of a segment header: every byte outside its CRC field (bytes 12..16).
fn header_crc(h: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&h[..12]), &h[16..])
}

/// A batch frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BatchHeader {
    pub record_bytes: u64,
    pub first_lsn: Lsn,
    pub end_lsn: Lsn,
}

impl BatchHeader {
    pub fn encode(&self) -> [u8; BATCH_HEADER_BYTES] {
        debug_assert_eq!(self.end_lsn - self.first_lsn, self.record_bytes);
        let mut h = [0u8; BATCH_HEADER_BYTES];
        h[0..4].copy_from_slice(&BATCH_MAGIC.to_le_bytes());
        h[8..16].copy_from_slice(&self.record_bytes.to_le_bytes());
        h[16..24].copy_from_slice(&self.first_lsn.to_le_bytes());
        h[24..32].copy_from_slice(&self.end_lsn.to_le_bytes());
        let crc = batch_crc(&h);
        h[4..8].copy_from_slice(&crc.to_le_bytes());
        h
    }

    /// Checks the frame header at `data[0]` (magic, CRC, consistent LSNs). It does not check that
    /// the records fit in `data`.
    pub fn decode(data: &[u8]) -> Result<BatchHeader, &'static str> {
        if data.len() < BATCH_HEADER_BYTES {
            return Err("batch header is incomplete");
        }
        let h = &data[..BATCH_HEADER_BYTES];
        if u32::from_le_bytes(h[0..4].try_into().unwrap()) != BATCH_MAGIC {
            return Err("bad batch magic");
        }
        if u32::from_le_bytes(h[4..8].try_into().unwrap()) != batch_crc(h) {
            return Err("batch header checksum mismatch");
        }
        let header = BatchHeader {
            record_bytes: u64::from_le_bytes(h[8..16].try_into().unwrap()),
            first_lsn: u64::from_le_bytes(h[16..24].try_into().unwrap()),
            end_lsn: u64::from_le_bytes(h[24..32].try_into().unwrap()),
        };
        if header.end_lsn.checked_sub(header.first_lsn) != Some(header.record_bytes) {
            return Err("batch header LSNs disagree with its size");
        }
        Ok(header)
    }
}

fn batch_crc(h: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&h[..4]), &h[8..])
}

/// Offset of the first valid batch header at or after `from`, if any. Bounded by the data size:
/// one pass looking for the magic, a CRC check at each candidate.
pub(crate) fn find_batch_header(data: &[u8], from: usize) -> Option<usize> {
    let magic = BATCH_MAGIC.to_le_bytes();
    let mut pos = from;
    while pos + BATCH_HEADER_BYTES <= data.len() {
        let window = &data[pos..data.len() - BATCH_HEADER_BYTES + 4];
        let hit = window.windows(4).position(|w| w == magic)?;
        pos += hit;
        if BatchHeader::decode(&data[pos..]).is_ok() {
            return Some(pos);
        }
        pos += 1;
    }
    None
}

/// Whether everything from a batch boundary on is zeros: the zero-filled rest of a segment,
/// where the log ends cleanly.
pub(crate) fn is_zero_tail(data: &[u8]) -> bool {
    data.iter().all(|&b| b == 0)
}

/// Writes zeros over bytes `from..to` of `file` (not synced).
pub(crate) fn write_zeros(file: &File, from: u64, to: u64) -> io::Result<()> {
    const ZEROS: [u8; 1 << 16] = [0; 1 << 16];
    let mut at = from;
    while at < to {
        let n = (to - at).min(ZEROS.len() as u64);
        file.write_all_at(&ZEROS[..n as usize], at)?;
        at += n;
    }
    Ok(())
}

/// Fsyncs a directory so that file creations, renames and deletions in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}
