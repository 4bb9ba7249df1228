//! The byte format of log records: a fixed 24-byte header (magic, payload length, CRC32C over
//! everything but the CRC field, LSN, kind) followed by a kind-specific payload. Encoding writes
//! straight into the writer's buffer; decoding borrows from the segment bytes, so recovery never
//! allocates per record or per row. All integers are little-endian.

use shoal_storage::{ChangeKind, CommitTs, EarlyRedo, RedoChange, TableId};

use crate::Lsn;

/// Marks the start of every record ("SHWR").
pub(crate) const RECORD_MAGIC: u32 = 0x5357_4852;
/// Size of the record header: magic u32, payload length u32, crc u32, lsn u64, kind u8, 3 zero bytes.
pub const RECORD_HEADER_BYTES: usize = 24;
/// Largest payload of one record. A transaction's row changes beyond what one record holds go
/// into `RowChanges` records ahead of its commit, so this bounds one row, not one transaction.
pub const RECORD_PAYLOAD_MAX_BYTES: usize = 1 << 30;
/// Target payload size of one `TableImageRows` chunk, so a table image of any size is written as
/// bounded records.
pub(crate) const TABLE_IMAGE_CHUNK_BYTES: usize = 1 << 20;

pub(crate) const KIND_COMMIT: u8 = 1;
pub(crate) const KIND_CATALOG: u8 = 2;
pub(crate) const KIND_TABLE_IMAGE_BEGIN: u8 = 3;
pub(crate) const KIND_TABLE_IMAGE_ROWS: u8 = 4;
pub(crate) const KIND_TABLE_IMAGE_END: u8 = 5;
pub(crate) const KIND_SEQUENCE: u8 = 6;
pub(crate) const KIND_COLUMN_SEGMENT: u8 = 7;
pub(crate) const KIND_ROW_CHANGES: u8 = 8;
/// A commit whose transaction logged `RowChanges` first: the commit payload after the chain's
/// LSN and its number of valid early writes.
pub(crate) const KIND_COMMIT_AFTER_EARLY: u8 = 9;
pub(crate) const KIND_CLOCK: u8 = 10;
pub(crate) const KIND_ABANDONED: u8 = 11;

/// Encoded size of one commit change before its row bytes: table u64, kind u8, row id u64, len u32.
const CHANGE_FIXED_BYTES: usize = 8 + 1 + 8 + 4;
/// Encoded size of one image row before its bytes: row id u64, len u32.
const IMAGE_ROW_FIXED_BYTES: usize = 8 + 4;

/// One log record, borrowing its variable-length parts from the bytes it was decoded from.
///
/// A table image (the whole content of a table after ALTER TABLE or TRUNCATE) is logged as
/// `TableImageBegin`, any number of `TableImageRows` chunks and `TableImageEnd`. Records of other
/// tables may sit between them. A `TableImageBegin` without its `TableImageEnd` at the end of the
/// log was never acknowledged to anyone, and recovery should discard it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record<'a> {
    /// The redo of one committed transaction. With `early`, the transaction's first
    /// `early.writes` changes are in the `RowChanges` records of chain `early.chain`, and
    /// `changes` holds the rest.
    Commit {
        commit_ts: CommitTs,
        changes: CommitChanges<'a>,
        early: Option<EarlyRedo>,
    },
    /// Row changes of a running transaction, logged ahead of its commit when they grow large:
    /// its writes number `first_write` onwards. `chain` is the LSN of the transaction's first
    /// such record (so unique in the log, unlike transaction ids, which restart with the server).
    /// A later record of the chain starting at an earlier write replaces what followed it (a
    /// ROLLBACK TO SAVEPOINT undid those writes). Without a commit naming the chain later in the
    /// log, recovery discards it.
    RowChanges {
        chain: u64,
        first_write: u64,
        changes: CommitChanges<'a>,
    },
    /// An opaque serialized catalog image.
    Catalog { image: &'a [u8] },
    /// Starts the image of `table`: recovery drops the table's rows and loads the following chunks.
    TableImageBegin { table: TableId },
    /// A chunk of rows of the image of `table`.
    TableImageRows { table: TableId, rows: ImageRows<'a> },
    /// Ends the image of `table`.
    TableImageEnd { table: TableId },
    /// The image (Arrow IPC) of a column segment a transaction appended, logged before its
    /// commit; the commit record names it with an `Insert` of `row_id` and an empty image.
    /// Without such a commit later in the log, recovery discards it.
    ColumnSegment {
        table: TableId,
        row_id: u64,
        image: &'a [u8],
    },
    /// The state of a sequence.
    Sequence {
        oid: u32,
        last_value: i64,
        is_called: bool,
    },
    /// The wall-clock time (microseconds since 1970, UTC) when the records after it were
    /// appended, to the millisecond: the log writes one ahead of the first record of each
    /// millisecond, so recovery can stop at a point in time (`recovery_target_time`).
    Clock { unix_micros: i64 },
    /// A transaction that logged writes ahead of its commit rolled back: no commit will name
    /// its row-change chain (if `chain`) or its column segments. Recovery drops such writes at
    /// the end of the log anyway; a standby, which never reaches an end, forgets them here.
    Abandoned {
        chain: Option<u64>,
        segments: SegmentIds<'a>,
    },
}

/// The (table, first row id) of column segments logged ahead of a commit, still encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentIds<'a> {
    bytes: &'a [u8],
}

impl<'a> SegmentIds<'a> {
    /// Encodes `ids` into `buf` and returns them as a record's part, borrowing `buf`.
    pub fn encode(ids: &[(TableId, u64)], buf: &'a mut Vec<u8>) -> SegmentIds<'a> {
        buf.clear();
        for (table, row_id) in ids {
            buf.extend_from_slice(&table.to_le_bytes());
            buf.extend_from_slice(&row_id.to_le_bytes());
        }
        SegmentIds { bytes: buf }
    }

    pub fn iter(&self) -> impl Iterator<Item = (TableId, u64)> + 'a {
        self.bytes.chunks_exact(16).map(|pair| {
            let (table, row_id) = pair.split_at(8);
            (
                u64::from_le_bytes(table.try_into().expect("8 bytes")),
                u64::from_le_bytes(row_id.try_into().expect("8 bytes")),
            )
        })
    }
}

/// The changes of a `Record::Commit`, still encoded; `iter` decodes them without allocating.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommitChanges<'a> {
    count: usize,
    bytes: &'a [u8],
}

impl<'a> CommitChanges<'a> {
    /// Number of changes.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True if the transaction logged no change.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The changes in the order the transaction made them.
    pub fn iter(&self) -> impl Iterator<Item = RedoChange<'a>> + 'a {
        let mut rest = self.bytes;
        (0..self.count).map(move |_| {
            // `decode` validated the layout, so these reads cannot run past the end.
            let table = take_u64(&mut rest);
            let kind = kind_from_u8(take_u8(&mut rest)).expect("validated change kind");
            let row_id = take_u64(&mut rest);
            let len = take_u32(&mut rest) as usize;
            let (row, tail) = rest.split_at(len);
            rest = tail;
            RedoChange {
                table,
                kind,
                row_id,
                row,
            }
        })
    }
}

/// The rows of a `Record::TableImageRows` chunk, still encoded; `iter` decodes them lazily.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageRows<'a> {
    count: usize,
    bytes: &'a [u8],
}

impl<'a> ImageRows<'a> {
    /// Number of rows in the chunk.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True if the chunk holds no row.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// `(row_id, row bytes)` pairs in the order they were appended.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &'a [u8])> + 'a {
        let mut rest = self.bytes;
        (0..self.count).map(move |_| {
            let row_id = take_u64(&mut rest);
            let len = take_u32(&mut rest) as usize;
            let (row, tail) = rest.split_at(len);
            rest = tail;
            (row_id, row)
        })
    }
}

impl<'a> Record<'a> {
    /// Decodes a payload whose header was already checked; `Err` says what is wrong with it.
    pub(crate) fn decode(kind: u8, payload: &'a [u8]) -> Result<Record<'a>, String> {
        let mut rest = payload;
        let record = match kind {
            KIND_COMMIT | KIND_COMMIT_AFTER_EARLY => {
                let early = if kind == KIND_COMMIT_AFTER_EARLY {
                    need(rest, 16)?;
                    let chain = take_u64(&mut rest);
                    let writes = take_u64(&mut rest);
                    Some(EarlyRedo { chain, writes })
                } else {
                    None
                };
                need(rest, 12)?;
                let commit_ts = take_u64(&mut rest);
                let count = take_u32(&mut rest) as usize;
                validate_rows(rest, count, CHANGE_FIXED_BYTES, true)?;
                Record::Commit {
                    commit_ts,
                    changes: CommitChanges { count, bytes: rest },
                    early,
                }
            }
            KIND_ROW_CHANGES => {
                need(rest, 20)?;
                let chain = take_u64(&mut rest);
                let first_write = take_u64(&mut rest);
                let count = take_u32(&mut rest) as usize;
                validate_rows(rest, count, CHANGE_FIXED_BYTES, true)?;
                Record::RowChanges {
                    chain,
                    first_write,
                    changes: CommitChanges { count, bytes: rest },
                }
            }
            KIND_CATALOG => Record::Catalog { image: payload },
            KIND_TABLE_IMAGE_BEGIN | KIND_TABLE_IMAGE_END => {
                need_exact(rest, 8)?;
                let table = take_u64(&mut rest);
                if kind == KIND_TABLE_IMAGE_BEGIN {
                    Record::TableImageBegin { table }
                } else {
                    Record::TableImageEnd { table }
                }
            }
            KIND_TABLE_IMAGE_ROWS => {
                need(rest, 12)?;
                let table = take_u64(&mut rest);
                let count = take_u32(&mut rest) as usize;
                validate_rows(rest, count, IMAGE_ROW_FIXED_BYTES, false)?;
                Record::TableImageRows {
                    table,
                    rows: ImageRows { count, bytes: rest },
                }
            }
            KIND_COLUMN_SEGMENT => {
                need(rest, 16)?;
                let table = take_u64(&mut rest);
                let row_id = take_u64(&mut rest);
                Record::ColumnSegment {
                    table,
                    row_id,
                    image: rest,
                }
            }
            KIND_SEQUENCE => {
                need_exact(rest, 13)?;
                let oid = take_u32(&mut rest);
                let last_value = take_u64(&mut rest) as i64;
                let is_called = match take_u8(&mut rest) {
                    0 => false,
                    1 => true,
                    b => return Err(format!("sequence record has is_called byte {b}")),
                };
                Record::Sequence {
                    oid,
                    last_value,
                    is_called,
                }
            }
            KIND_CLOCK => {
                need_exact(rest, 8)?;
                Record::Clock {
                    unix_micros: take_u64(&mut rest) as i64,
                }
            }
            KIND_ABANDONED => {
                need(rest, 9)?;
                let has_chain = take_u8(&mut rest);
                let chain = take_u64(&mut rest);
                let chain = match has_chain {
                    0 => None,
                    1 => Some(chain),
                    b => return Err(format!("abandoned record has chain byte {b}")),
                };
                if rest.len() % 16 != 0 {
                    return Err(format!(
                        "abandoned record has {} bytes of segment ids",
                        rest.len()
                    ));
                }
                Record::Abandoned {
                    chain,
                    segments: SegmentIds { bytes: rest },
                }
            }
            other => return Err(format!("unknown record kind {other}")),
        };
        Ok(record)
    }

    /// The kind byte of this record.
    pub(crate) fn kind(&self) -> u8 {
        match self {
            Record::Commit { early: None, .. } => KIND_COMMIT,
            Record::Commit { early: Some(_), .. } => KIND_COMMIT_AFTER_EARLY,
            Record::RowChanges { .. } => KIND_ROW_CHANGES,
            Record::Catalog { .. } => KIND_CATALOG,
            Record::TableImageBegin { .. } => KIND_TABLE_IMAGE_BEGIN,
            Record::TableImageRows { .. } => KIND_TABLE_IMAGE_ROWS,
            Record::TableImageEnd { .. } => KIND_TABLE_IMAGE_END,
            Record::Sequence { .. } => KIND_SEQUENCE,
            Record::ColumnSegment { .. } => KIND_COLUMN_SEGMENT,
            Record::Clock { .. } => KIND_CLOCK,
            Record::Abandoned { .. } => KIND_ABANDONED,
        }
    }

    /// Appends this record's payload to `buf`.
    pub(crate) fn encode_payload(&self, buf: &mut Vec<u8>) {
        match *self {
            Record::Commit {
                commit_ts,
                changes,
                early,
            } => {
                if let Some(early) = early {
                    buf.extend_from_slice(&early.chain.to_le_bytes());
                    buf.extend_from_slice(&early.writes.to_le_bytes());
                }
                buf.extend_from_slice(&commit_ts.to_le_bytes());
                buf.extend_from_slice(&(changes.count as u32).to_le_bytes());
                buf.extend_from_slice(changes.bytes);
            }
            Record::RowChanges {
                chain,
                first_write,
                changes,
            } => {
                buf.extend_from_slice(&chain.to_le_bytes());
                buf.extend_from_slice(&first_write.to_le_bytes());
                buf.extend_from_slice(&(changes.count as u32).to_le_bytes());
                buf.extend_from_slice(changes.bytes);
            }
            Record::Catalog { image } => buf.extend_from_slice(image),
            Record::TableImageBegin { table } | Record::TableImageEnd { table } => {
                buf.extend_from_slice(&table.to_le_bytes())
            }
            Record::TableImageRows { table, rows } => {
                buf.extend_from_slice(&table.to_le_bytes());
                buf.extend_from_slice(&(rows.count as u32).to_le_bytes());
                buf.extend_from_slice(rows.bytes);
            }
            Record::ColumnSegment {
                table,
                row_id,
                image,
            } => {
                buf.extend_from_slice(&table.to_le_bytes());
                buf.extend_from_slice(&row_id.to_le_bytes());
                buf.extend_from_slice(image);
            }
            Record::Sequence {
                oid,
                last_value,
                is_called,
            } => {
                buf.extend_from_slice(&oid.to_le_bytes());
                buf.extend_from_slice(&last_value.to_le_bytes());
                buf.push(is_called as u8);
            }
            Record::Clock { unix_micros } => buf.extend_from_slice(&unix_micros.to_le_bytes()),
            Record::Abandoned { chain, segments } => {
                buf.push(chain.is_some() as u8);
                buf.extend_from_slice(&chain.unwrap_or(0).to_le_bytes());
                buf.extend_from_slice(segments.bytes);
            }
        }
    }

    /// Encoded payload size, known before encoding so size limits are checked up front.
    pub(crate) fn payload_bytes(&self) -> usize {
        match self {
            Record::Commit { changes, early, .. } => {
                early.map_or(0, |_| 16) + 12 + changes.bytes.len()
            }
            Record::RowChanges { changes, .. } => 20 + changes.bytes.len(),
            Record::Catalog { image } => image.len(),
            Record::TableImageBegin { .. } | Record::TableImageEnd { .. } => 8,
            Record::TableImageRows { rows, .. } => 12 + rows.bytes.len(),
            Record::Sequence { .. } => 13,
            Record::ColumnSegment { image, .. } => 16 + image.len(),
            Record::Clock { .. } => 8,
            Record::Abandoned { segments, .. } => 9 + segments.bytes.len(),
        }
    }
}

/// Payload size of a commit record for these changes.
pub(crate) fn commit_payload_bytes(changes: &[RedoChange<'_>], early: Option<EarlyRedo>) -> usize {
    early.map_or(0, |_| 16) + 12 + changes_bytes(changes)
}

/// Payload size of a `RowChanges` record for these changes.
pub(crate) fn row_changes_payload_bytes(changes: &[RedoChange<'_>]) -> usize {
    20 + changes_bytes(changes)
}

fn changes_bytes(changes: &[RedoChange<'_>]) -> usize {
    changes
        .iter()
        .map(|c| CHANGE_FIXED_BYTES + c.row.len())
        .sum::<usize>()
}

/// Appends the payload of a commit record to `buf`.
pub(crate) fn encode_commit_payload(
    buf: &mut Vec<u8>,
    commit_ts: CommitTs,
    changes: &[RedoChange<'_>],
    early: Option<EarlyRedo>,
) {
    if let Some(early) = early {
        buf.extend_from_slice(&early.chain.to_le_bytes());
        buf.extend_from_slice(&early.writes.to_le_bytes());
    }
    buf.extend_from_slice(&commit_ts.to_le_bytes());
    encode_changes(buf, changes);
}

/// Appends the payload of a `RowChanges` record to `buf`.
pub(crate) fn encode_row_changes_payload(
    buf: &mut Vec<u8>,
    chain: u64,
    first_write: u64,
    changes: &[RedoChange<'_>],
) {
    buf.extend_from_slice(&chain.to_le_bytes());
    buf.extend_from_slice(&first_write.to_le_bytes());
    encode_changes(buf, changes);
}

/// The change count and the changes, as commit and `RowChanges` payloads end.
fn encode_changes(buf: &mut Vec<u8>, changes: &[RedoChange<'_>]) {
    buf.extend_from_slice(&(changes.len() as u32).to_le_bytes());
    for c in changes {
        debug_assert!(c.row.len() <= u32::MAX as usize);
        buf.extend_from_slice(&c.table.to_le_bytes());
        buf.push(kind_to_u8(c.kind));
        buf.extend_from_slice(&c.row_id.to_le_bytes());
        buf.extend_from_slice(&(c.row.len() as u32).to_le_bytes());
        buf.extend_from_slice(c.row);
    }
}

/// Encoded size of one image row inside a `TableImageRows` payload.
pub(crate) fn image_row_bytes(row: &[u8]) -> usize {
    IMAGE_ROW_FIXED_BYTES + row.len()
}

/// Appends the payload of a `TableImageRows` record holding `rows` to `buf`.
pub(crate) fn encode_image_rows_payload(buf: &mut Vec<u8>, table: TableId, rows: &[(u64, &[u8])]) {
    buf.extend_from_slice(&table.to_le_bytes());
    buf.extend_from_slice(&(rows.len() as u32).to_le_bytes());
    for (row_id, row) in rows {
        buf.extend_from_slice(&row_id.to_le_bytes());
        buf.extend_from_slice(&(row.len() as u32).to_le_bytes());
        buf.extend_from_slice(row);
    }
}

/// Appends one whole record (header and payload) at the end of `buf`. `write_payload` must append
/// exactly `payload_bytes` bytes. Returns the record's encoded size, by which the LSN advances.
pub(crate) fn encode_record(
    buf: &mut Vec<u8>,
    lsn: Lsn,
    kind: u8,
    payload_bytes: usize,
    write_payload: impl FnOnce(&mut Vec<u8>),
) -> usize {
    assert!(payload_bytes <= RECORD_PAYLOAD_MAX_BYTES);
    let start = buf.len();
    buf.reserve(RECORD_HEADER_BYTES + payload_bytes);
    buf.extend_from_slice(&RECORD_MAGIC.to_le_bytes());
    buf.extend_from_slice(&(payload_bytes as u32).to_le_bytes());
    buf.extend_from_slice(&[0; 4]);
    buf.extend_from_slice(&lsn.to_le_bytes());
    buf.extend_from_slice(&[kind, 0, 0, 0]);
    write_payload(buf);
    let record = &mut buf[start..];
    assert_eq!(
        record.len(),
        RECORD_HEADER_BYTES + payload_bytes,
        "payload size mismatch"
    );
    let crc = record_crc(record);
    record[8..12].copy_from_slice(&crc.to_le_bytes());
    record.len()
}

/// CRC32C of a record over every byte except the CRC field itself.
fn record_crc(record: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&record[..8]), &record[12..])
}

/// A record found in a byte slice by `check_record`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawRecord<'a> {
    pub lsn: Lsn,
    pub kind: u8,
    pub payload: &'a [u8],
}

impl RawRecord<'_> {
    /// Encoded size of the whole record.
    pub fn total_bytes(&self) -> usize {
        RECORD_HEADER_BYTES + self.payload.len()
    }
}

/// Checks the record starting at `data[0]`: magic, length within `data`, CRC. Does not decode the
/// payload.
pub(crate) fn check_record(data: &[u8]) -> Result<RawRecord<'_>, &'static str> {
    if data.len() < RECORD_HEADER_BYTES {
        return Err("record header runs past the end of the batch");
    }
    if u32::from_le_bytes(data[0..4].try_into().unwrap()) != RECORD_MAGIC {
        return Err("bad record magic");
    }
    let payload_bytes = u32::from_le_bytes(data[4..8].try_into().unwrap()) as usize;
    if payload_bytes > RECORD_PAYLOAD_MAX_BYTES || RECORD_HEADER_BYTES + payload_bytes > data.len()
    {
        return Err("record length runs past the end of the batch");
    }
    let record = &data[..RECORD_HEADER_BYTES + payload_bytes];
    let crc = u32::from_le_bytes(data[8..12].try_into().unwrap());
    if record_crc(record) != crc {
        return Err("record checksum mismatch");
    }
    Ok(RawRecord {
        lsn: u64::from_le_bytes(data[12..20].try_into().unwrap()),
        kind: data[20],
        payload: &record[RECORD_HEADER_BYTES..],
    })
}

fn kind_to_u8(kind: ChangeKind) -> u8 {
    match kind {
        ChangeKind::Insert => 1,
        ChangeKind::Update => 2,
        ChangeKind::Delete => 3,
    }
}

fn kind_from_u8(b: u8) -> Option<ChangeKind> {
    match b {
        1 => Some(ChangeKind::Insert),
        2 => Some(ChangeKind::Update),
        3 => Some(ChangeKind::Delete),
        _ => None,
    }
}

/// Walks `count` length-prefixed rows (`fixed_bytes` of header each, the length in its last 4
/// bytes) and checks they exactly fill `bytes`, so the lazy iterators can never read out of bounds.
fn validate_rows(
    bytes: &[u8],
    count: usize,
    fixed_bytes: usize,
    has_kind: bool,
) -> Result<(), String> {
    let mut pos = 0usize;
    for i in 0..count {
        if bytes.len() - pos < fixed_bytes {
            return Err(format!(
                "row {i} of {count} runs past the end of the record"
            ));
        }
        if has_kind && kind_from_u8(bytes[pos + 8]).is_none() {
            return Err(format!(
                "row {i} has unknown change kind {}",
                bytes[pos + 8]
            ));
        }
        let len_at = pos + fixed_bytes - 4;
        let len = u32::from_le_bytes(bytes[len_at..len_at + 4].try_into().unwrap()) as usize;
        pos += fixed_bytes;
        if bytes.len() - pos < len {
            return Err(format!(
                "row {i} of {count} runs past the end of the record"
            ));
        }
        pos += len;
    }
    if pos != bytes.len() {
        return Err(format!(
            "{} bytes left after the last row",
            bytes.len() - pos
        ));
    }
    Ok(())
}

fn need(rest: &[u8], bytes: usize) -> Result<(), String> {
    if rest.len() < bytes {
        return Err(format!(
            "payload of {} bytes is shorter than {bytes}",
            rest.len()
        ));
    }
    Ok(())
}

fn need_exact(rest: &[u8], bytes: usize) -> Result<(), String> {
    if rest.len() != bytes {
        return Err(format!("payload is {} bytes, expected {bytes}", rest.len()));
    }
    Ok(())
}

fn take_u8(rest: &mut &[u8]) -> u8 {
    let b = rest[0];
    *rest = &rest[1..];
    b
}

fn take_u32(rest: &mut &[u8]) -> u32 {
    let (head, tail) = rest.split_at(4);
    *rest = tail;
    u32::from_le_bytes(head.try_into().unwrap())
}

fn take_u64(rest: &mut &[u8]) -> u64 {
    let (head, tail) = rest.split_at(8);
    *rest = tail;
    u64::from_le_bytes(head.try_into().unwrap())
}
