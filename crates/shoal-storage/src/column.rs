//! Column tables: the column engine. A column table is a list of segments; a segment holds up
//! to [`SEGMENT_MAX_ROWS`] rows as immutable Arrow arrays, with min/max per column (for scan
//! pruning, computed by the SQL layer, which knows the types) and MVCC as one insert stamp per
//! segment plus, once a row of it is deleted, one end stamp per row.
//!
//! Every inserting statement appends segments of its own, so all rows of a segment were written
//! by one transaction and become visible together at its commit. UPDATE is a delete plus an
//! insert. Writers that delete take the table's write lock (held to the end of the transaction),
//! so two transactions never race on one row: a READ COMMITTED statement that takes the lock
//! first and its snapshot after sees every earlier delete, and a REPEATABLE READ transaction
//! that finds a row deleted after its snapshot fails with 40001, as it would on a row table.
//!
//! A row is named by its row id: segment number in the high 32 bits, offset in the low 32. The
//! redo log names deleted rows that way, and logs inserted segments whole as Arrow IPC.
//!
//! Text columns are dictionary-encoded (`text_dictionary`): the table's `schema` hands them out
//! as `Dictionary(Int32, Utf8)`, while writers and the log use the plain schema they were
//! created with (`plain_schema`, Utf8), and `append` does the encoding.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use arrow::array::{Array, ArrayRef, BooleanArray, DictionaryArray, Int32Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use parking_lot::{Mutex, RwLock};

use crate::error::StorageError;
use crate::text_dictionary::{coded_text_type, local_dictionary, TextDictionary};
use crate::txn::{
    is_txn_stamp, txn_stamp, CommitTs, Snapshot, Transaction, TxnId, TxnShared, END_UNSET,
};
use crate::TableId;

/// Rows per segment: large enough that per-segment work (stats, visibility, pruning) is noise
/// next to the scan, small enough that a scan splits into many parallel pieces.
pub const SEGMENT_MAX_ROWS: usize = 65_536;

/// A segment appended with at least this many rows goes into the redo log at once
/// (`Database::log_segment_early`) rather than inside its transaction's commit record: the
/// commit record of an `INSERT ... SELECT` of millions of rows stays small (a record holds at
/// most 1 GiB), and a replication group ships the segments as they come.
const LOG_EARLY_SEGMENT_ROWS: usize = 4096;
/// So does a segment of fewer, wide rows of at least this many bytes.
const LOG_EARLY_SEGMENT_BYTES: usize = 1 << 20;

/// Insert stamp of a segment whose inserting transaction rolled back: never visible.
const ABORTED_STAMP: u64 = u64::MAX;

/// Min and max of one column of a segment, as one-element arrays of the column's type (null
/// when the column holds no non-null value), and its null count.
#[derive(Clone, Debug)]
pub struct ColumnStats {
    pub min: ArrayRef,
    pub max: ArrayRef,
    pub null_count: usize,
}

/// One column of a segment as it is stored.
enum StoredColumn {
    /// The array as scans get it (a text column's own dictionary when the table's was full).
    Array(ArrayRef),
    /// A text column as codes into the table's dictionary for it.
    Coded {
        codes: Int32Array,
        dictionary: Arc<TextDictionary>,
    },
}

/// A segment: immutable arrays, their stats and the MVCC stamps.
pub struct Segment {
    pub no: u32,
    rows: usize,
    columns: Vec<StoredColumn>,
    /// The table's plain schema (text as Utf8), for `plain_batch`.
    plain_schema: SchemaRef,
    /// Min/max of the plain values (text as Utf8, whatever the stored form).
    pub stats: Vec<ColumnStats>,
    /// The inserting transaction's stamp until it commits, then the commit timestamp.
    insert_stamp: AtomicU64,
    /// Per-row end stamps (0 = live), allocated at the segment's first delete.
    ends: OnceLock<Box<[AtomicU64]>>,
    /// Rows whose delete has committed: tells a merge which segments are mostly dead.
    deleted_rows: AtomicU64,
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment")
            .field("no", &self.no)
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

impl Segment {
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Column `c` as scans get it: the table's `schema` type (text as a dictionary).
    pub fn column(&self, c: usize) -> ArrayRef {
        match &self.columns[c] {
            StoredColumn::Array(array) => array.clone(),
            StoredColumn::Coded { codes, dictionary } => Arc::new(
                DictionaryArray::try_new(codes.clone(), dictionary.values())
                    .expect("codes come from the dictionary, which only grows"),
            ),
        }
    }

    /// Column `c` with text decoded, as writers built it.
    fn plain_column(&self, c: usize) -> ArrayRef {
        let array = self.column(c);
        match array.data_type() {
            DataType::Dictionary(_, value) => {
                arrow::compute::cast(&array, value).expect("a dictionary casts to its values")
            }
            _ => array,
        }
    }

    /// The rows in the plain schema (text decoded): what the log and checkpoints store, and
    /// what a merge of small segments rewrites.
    pub fn plain_batch(&self) -> RecordBatch {
        let columns = (0..self.columns.len())
            .map(|c| self.plain_column(c))
            .collect();
        let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(self.rows));
        RecordBatch::try_new_with_options(self.plain_schema.clone(), columns, &options)
            .expect("a segment's columns fit the table's schema")
    }

    /// The segment as Arrow IPC bytes, for the log and checkpoints (see `segment_to_ipc`).
    /// A text column goes as a dictionary of the values its rows use, so a load hashes each
    /// distinct value once instead of every row.
    pub fn image(&self) -> Vec<u8> {
        let columns: Vec<ArrayRef> = self
            .columns
            .iter()
            .map(|c| match c {
                StoredColumn::Array(array) => array.clone(),
                StoredColumn::Coded { codes, dictionary } => {
                    let values = dictionary.values();
                    // A small dictionary goes whole, with the codes as they are; a big one
                    // only with the values the segment uses.
                    if values.get_array_memory_size() <= IMAGE_WHOLE_DICTIONARY_BYTES_MAX {
                        Arc::new(
                            DictionaryArray::try_new(codes.clone(), values)
                                .expect("codes come from the dictionary"),
                        ) as ArrayRef
                    } else {
                        Arc::new(used_values(codes, &values)) as ArrayRef
                    }
                }
            })
            .collect();
        let fields: Vec<Field> = self
            .plain_schema
            .fields()
            .iter()
            .zip(&columns)
            .map(|(f, a)| f.as_ref().clone().with_data_type(a.data_type().clone()))
            .collect();
        let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(self.rows));
        let batch =
            RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), columns, &options)
                .expect("a segment's columns fit the table's schema");
        segment_to_ipc(&batch, &self.stats)
    }

    fn insert_stamp(&self) -> u64 {
        self.insert_stamp.load(Ordering::Acquire)
    }

    /// Whether the segment's rows exist for `snap` at all (before row deletes).
    pub fn visible_to(&self, snap: &Snapshot) -> bool {
        let stamp = self.insert_stamp();
        stamp != ABORTED_STAMP && snap.sees(stamp, END_UNSET)
    }

    /// The live rows for `snap` as a mask, or None when every row is live (the common case of
    /// a segment nobody deleted from, which a scan then hands out without copying).
    pub fn live_mask(&self, snap: &Snapshot) -> Option<BooleanArray> {
        let ends = self.ends.get()?;
        let begin = self.insert_stamp();
        let mut all_live = true;
        let mask: BooleanArray = ends
            .iter()
            .map(|e| {
                let live = snap.sees(begin, e.load(Ordering::Acquire));
                all_live &= live;
                Some(live)
            })
            .collect();
        (!all_live).then_some(mask)
    }

    /// Rows whose delete has committed (some snapshots may still see them).
    pub fn deleted_rows(&self) -> usize {
        self.deleted_rows.load(Ordering::Acquire) as usize
    }

    /// Rows visible to `snap`.
    pub fn live_rows(&self, snap: &Snapshot) -> usize {
        match self.live_mask(snap) {
            None => self.rows(),
            Some(mask) => mask.true_count(),
        }
    }

    fn ends(&self) -> &[AtomicU64] {
        self.ends.get_or_init(|| {
            (0..self.rows())
                .map(|_| AtomicU64::new(END_UNSET))
                .collect()
        })
    }

    /// Whether no snapshot at or after `horizon` (the oldest any running or future snapshot
    /// reads at) can see any of its rows: its insert rolled back, or every row was deleted by a
    /// commit at or before `horizon`.
    fn is_dead(&self, horizon: CommitTs) -> bool {
        let stamp = self.insert_stamp();
        if stamp == ABORTED_STAMP {
            return true;
        }
        if is_txn_stamp(stamp) {
            return false;
        }
        self.ends.get().is_some_and(|ends| {
            ends.iter().all(|e| {
                let end = e.load(Ordering::Acquire);
                end != END_UNSET && !is_txn_stamp(end) && end <= horizon
            })
        })
    }

    /// Bytes of the arrays (codes, not the shared dictionaries) plus the MVCC stamps.
    pub fn memory_bytes(&self) -> usize {
        let stamps = self.ends.get().map_or(0, |e| e.len() * 8);
        let arrays: usize = self
            .columns
            .iter()
            .map(|c| match c {
                StoredColumn::Array(a) => a.get_array_memory_size(),
                StoredColumn::Coded { codes, .. } => codes.get_array_memory_size(),
            })
            .sum();
        arrays + stamps + std::mem::size_of::<Segment>()
    }
}

/// Packs a segment number and an offset into a row id.
pub fn row_id(segment: u32, offset: u32) -> u64 {
    (u64::from(segment) << 32) | u64::from(offset)
}

/// Splits a row id into segment number and offset.
pub fn split_row_id(row_id: u64) -> (u32, u32) {
    ((row_id >> 32) as u32, row_id as u32)
}

/// One column-table write of a transaction, for stamping at commit, undo and redo.
pub(crate) enum ColumnWrite {
    Insert {
        table: Arc<ColumnTable>,
        segment: Arc<Segment>,
        /// Its image is already in the log (`Database::log_segment_early`).
        logged_early: bool,
    },
    Delete {
        table: Arc<ColumnTable>,
        segment: Arc<Segment>,
        offset: u32,
    },
}

impl ColumnWrite {
    pub(crate) fn table_id(&self) -> TableId {
        match self {
            ColumnWrite::Insert { table, .. } | ColumnWrite::Delete { table, .. } => table.id,
        }
    }

    pub(crate) fn stamp(&self, txn: TxnId, ts: CommitTs) {
        match self {
            ColumnWrite::Insert { segment, .. } => {
                debug_assert_eq!(segment.insert_stamp(), txn_stamp(txn));
                segment.insert_stamp.store(ts, Ordering::Release);
            }
            ColumnWrite::Delete {
                table,
                segment,
                offset,
            } => {
                let end = &segment.ends()[*offset as usize];
                debug_assert_eq!(end.load(Ordering::Relaxed), txn_stamp(txn));
                end.store(ts, Ordering::Release);
                segment.deleted_rows.fetch_add(1, Ordering::AcqRel);
                table.last_delete_ts.fetch_max(ts, Ordering::AcqRel);
            }
        }
    }

    pub(crate) fn undo(&self) {
        match self {
            ColumnWrite::Insert { table, segment, .. } => {
                segment.insert_stamp.store(ABORTED_STAMP, Ordering::Release);
                table.segments.write().retain(|s| !Arc::ptr_eq(s, segment));
            }
            ColumnWrite::Delete {
                segment, offset, ..
            } => segment.ends()[*offset as usize].store(END_UNSET, Ordering::Release),
        }
    }
}

pub struct ColumnTable {
    id: TableId,
    shared: Arc<TxnShared>,
    /// As scans see the rows: text columns as dictionaries.
    schema: SchemaRef,
    /// As writers and the log see them: text as Utf8.
    plain_schema: SchemaRef,
    /// Per column: the dictionary of a text column.
    dictionaries: Vec<Option<Arc<TextDictionary>>>,
    /// In segment-number order (appends take increasing numbers under this lock).
    segments: RwLock<Vec<Arc<Segment>>>,
    next_segment_no: Mutex<u32>,
    /// The transaction holding the table's write lock (deletes and updates), or 0.
    writer: Mutex<TxnId>,
    /// Commit timestamp of the newest committed delete: a writer that takes the lock reads at
    /// a snapshot at least this new (see `last_delete_ts`).
    last_delete_ts: AtomicU64,
    dropped: AtomicBool,
    /// What statements read and wrote, for pg_stat_user_tables.
    activity: crate::activity::Striped<crate::activity::TableCounters>,
}

impl std::fmt::Debug for ColumnTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColumnTable")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl ColumnTable {
    /// A column table of `plain_schema`'s columns; its Utf8 columns are dictionary-encoded.
    pub(crate) fn new(id: TableId, plain_schema: SchemaRef, shared: Arc<TxnShared>) -> ColumnTable {
        let is_text = |f: &Field| f.data_type() == &DataType::Utf8;
        let fields: Vec<Field> = plain_schema
            .fields()
            .iter()
            .map(|f| match is_text(f) {
                true => f.as_ref().clone().with_data_type(coded_text_type()),
                false => f.as_ref().clone(),
            })
            .collect();
        let schema = Arc::new(Schema::new_with_metadata(
            fields,
            plain_schema.metadata().clone(),
        ));
        let dictionaries = plain_schema
            .fields()
            .iter()
            .map(|f| is_text(f).then(|| Arc::new(TextDictionary::default())))
            .collect();
        ColumnTable {
            id,
            shared,
            schema,
            plain_schema,
            dictionaries,
            segments: RwLock::new(Vec::new()),
            next_segment_no: Mutex::new(1),
            writer: Mutex::new(0),
            last_delete_ts: AtomicU64::new(0),
            dropped: AtomicBool::new(false),
            activity: Default::default(),
        }
    }

    pub fn id(&self) -> TableId {
        self.id
    }

    /// The schema scans hand out: text columns as `Dictionary(Int32, Utf8)`.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// The schema writers append in and the log stores: text as Utf8.
    pub fn plain_schema(&self) -> SchemaRef {
        self.plain_schema.clone()
    }

    /// The dictionary of text column `c`.
    pub fn dictionary(&self, c: usize) -> Option<&Arc<TextDictionary>> {
        self.dictionaries.get(c)?.as_ref()
    }

    /// The stored form of `batch` (the plain schema; text columns may also come as dictionaries,
    /// from `prepare_text` or a scan): text as codes into the table's dictionaries where they
    /// have room. Cheap for columns `prepare_text` has already made dictionaries of.
    fn store_columns(&self, batch: &RecordBatch) -> Result<Vec<StoredColumn>, StorageError> {
        if batch.num_columns() != self.dictionaries.len() {
            return Err(StorageError::SchemaMismatch(format!(
                "{} columns for a table of {}",
                batch.num_columns(),
                self.dictionaries.len()
            )));
        }
        batch
            .columns()
            .iter()
            .zip(&self.dictionaries)
            .zip(self.schema.fields())
            .map(|((array, dictionary), field)| {
                let Some(dictionary) = dictionary else {
                    if array.data_type() != field.data_type() {
                        return Err(StorageError::SchemaMismatch(format!(
                            "column {} is {}, not {}",
                            field.name(),
                            array.data_type(),
                            field.data_type()
                        )));
                    }
                    return Ok(StoredColumn::Array(array.clone()));
                };
                let local = prepare_text(array)?;
                Ok(match dictionary.encode(&local) {
                    Some(codes) => StoredColumn::Coded {
                        codes,
                        dictionary: dictionary.clone(),
                    },
                    None => StoredColumn::Array(Arc::new(local)),
                })
            })
            .collect()
    }

    pub(crate) fn mark_dropped(&self) {
        self.dropped.store(true, Ordering::Release);
    }

    pub(crate) fn mark_restored(&self) {
        self.dropped.store(false, Ordering::Release);
    }

    fn check_live(&self) -> Result<(), StorageError> {
        if self.dropped.load(Ordering::Acquire) {
            return Err(StorageError::TableDropped);
        }
        Ok(())
    }

    /// Appends `batch` (at most `SEGMENT_MAX_ROWS` rows, the table's schema) as a new segment
    /// owned by `txn`: invisible to others until it commits. Returns the segment number. Fails
    /// with 53200 at the memory limit.
    pub fn append(
        self: &Arc<Self>,
        txn: &mut Transaction,
        batch: RecordBatch,
        stats: Vec<ColumnStats>,
    ) -> Result<u32, StorageError> {
        self.shared.memory.check()?;
        let rows = batch.num_rows();
        let bytes = batch.get_array_memory_size();
        let no = self.append_rewritten(txn, batch, stats)?;
        self.activity.inserted(rows as u64);
        if rows >= LOG_EARLY_SEGMENT_ROWS || bytes >= LOG_EARLY_SEGMENT_BYTES {
            self.shared.log_segment_early(txn, self.id, no)?;
        }
        Ok(no)
    }

    /// What statements have read and written since the server started.
    pub fn activity(&self) -> crate::activity::TableActivity {
        self.activity.total()
    }

    /// Counts a scan of the table that read `rows_read` live rows (the scan itself is the
    /// caller's: it reads the segments).
    pub fn count_scan(&self, rows_read: u64) {
        self.activity.seq_scan(rows_read);
    }

    /// `append` without the memory limit, for rewrites that free as much as they add (merging
    /// small segments into one).
    pub fn append_rewritten(
        self: &Arc<Self>,
        txn: &mut Transaction,
        batch: RecordBatch,
        stats: Vec<ColumnStats>,
    ) -> Result<u32, StorageError> {
        self.check_live()?;
        assert!(batch.num_rows() <= SEGMENT_MAX_ROWS, "segment too large");
        debug_assert_eq!(stats.len(), batch.num_columns());
        let columns = self.store_columns(&batch)?;
        self.shared.ensure_writer(txn);
        let segment =
            self.push_segment(None, batch.num_rows(), columns, stats, txn_stamp(txn.id()));
        let no = segment.no;
        txn.column_writes.push(ColumnWrite::Insert {
            table: self.clone(),
            segment,
            logged_early: false,
        });
        Ok(no)
    }

    /// Adds a segment: numbered `no` (recovery) or the next number.
    fn push_segment(
        &self,
        no: Option<u32>,
        rows: usize,
        columns: Vec<StoredColumn>,
        stats: Vec<ColumnStats>,
        insert_stamp: u64,
    ) -> Arc<Segment> {
        let mut next = self.next_segment_no.lock();
        let no = no.unwrap_or(*next);
        *next = (*next).max(no + 1);
        let segment = Arc::new(Segment {
            no,
            rows,
            columns,
            plain_schema: self.plain_schema.clone(),
            stats,
            insert_stamp: AtomicU64::new(insert_stamp),
            ends: OnceLock::new(),
            deleted_rows: AtomicU64::new(0),
        });
        let mut segments = self.segments.write();
        // Recovery may load segments out of order; keep the list sorted by number.
        let at = segments.partition_point(|s| s.no < no);
        segments.insert(at, segment.clone());
        segment
    }

    /// Takes the table's write lock for `txn` (held until it ends). `WouldBlock` names the
    /// holder to wait for.
    pub fn lock_for_write(self: &Arc<Self>, txn: &mut Transaction) -> Result<(), StorageError> {
        self.check_live()?;
        let mut writer = self.writer.lock();
        if *writer == txn.id() {
            return Ok(());
        }
        if *writer != 0 {
            return Err(self.shared.would_block(txn.id(), *writer, Vec::new()));
        }
        self.shared.ensure_writer(txn);
        *writer = txn.id();
        txn.table_locks.push(self.clone());
        Ok(())
    }

    /// The newest commit timestamp of a delete on this table. The lock is released as soon as
    /// its holder has stamped, which can be before the stable watermark passes its commit
    /// (an earlier commit may still be stamping); a READ COMMITTED writer that just took the
    /// lock waits for `Database::stable_ts` to reach this before taking its snapshot, so it
    /// never finds a row deleted after its snapshot.
    pub fn last_delete_ts(&self) -> CommitTs {
        self.last_delete_ts.load(Ordering::Acquire)
    }

    pub(crate) fn unlock(&self, txn: TxnId) {
        let mut writer = self.writer.lock();
        debug_assert_eq!(*writer, txn);
        *writer = 0;
    }

    /// Deletes a row visible to `snap`. The caller holds the write lock. Returns false when the
    /// row was already deleted by `txn` itself (a second update of one row in a statement).
    pub fn delete(
        self: &Arc<Self>,
        txn: &mut Transaction,
        snap: &Snapshot,
        row_id: u64,
    ) -> Result<bool, StorageError> {
        self.check_live()?;
        debug_assert_eq!(
            *self.writer.lock(),
            txn.id(),
            "delete without the write lock"
        );
        let (no, offset) = split_row_id(row_id);
        let segment = self
            .segment(no)
            .filter(|s| (offset as usize) < s.rows())
            .ok_or(StorageError::TableDropped)?;
        let end = &segment.ends()[offset as usize];
        let current = end.load(Ordering::Acquire);
        if current == txn_stamp(txn.id()) {
            return Ok(false);
        }
        if current != END_UNSET {
            // Another transaction's delete: it committed (we hold the lock it held), after our
            // snapshot, since the row was visible to it. READ COMMITTED takes its snapshot after
            // the lock and `last_delete_ts`, so only REPEATABLE READ gets here.
            debug_assert!(!is_txn_stamp(current));
            return Err(StorageError::SerializationFailure);
        }
        debug_assert!(snap.sees(segment.insert_stamp(), END_UNSET));
        end.store(txn_stamp(txn.id()), Ordering::Release);
        txn.column_writes.push(ColumnWrite::Delete {
            table: self.clone(),
            segment,
            offset,
        });
        self.activity.deleted();
        Ok(true)
    }

    pub fn segment(&self, no: u32) -> Option<Arc<Segment>> {
        let segments = self.segments.read();
        let at = segments.binary_search_by_key(&no, |s| s.no).ok()?;
        Some(segments[at].clone())
    }

    /// Every segment, committed or not, in number order; use `Segment::visible_to` and
    /// `live_mask` to read them at a snapshot.
    pub fn segments(&self) -> Vec<Arc<Segment>> {
        self.segments.read().clone()
    }

    /// GC: drops the segments no snapshot at or after `horizon` can see (rolled-back inserts,
    /// and segments whose rows were all deleted, as a merge of small segments leaves them).
    /// Scans that hold a segment keep it alive until they finish. Returns how many it dropped.
    pub fn remove_dead_segments(&self, horizon: CommitTs) -> usize {
        let dead = |s: &Arc<Segment>| s.is_dead(horizon);
        if !self.segments.read().iter().any(dead) {
            return 0;
        }
        let mut segments = self.segments.write();
        let before = segments.len();
        segments.retain(|s| !dead(s));
        before - segments.len()
    }

    /// Removes every segment at once; not transactional (see `RowTable::truncate`).
    pub fn truncate(&self) {
        self.segments.write().clear();
    }

    /// Rows visible to `snap`.
    pub fn live_row_count(&self, snap: &Snapshot) -> usize {
        self.segments()
            .iter()
            .filter(|s| s.visible_to(snap))
            .map(|s| s.live_rows(snap))
            .sum()
    }

    /// Rows in all segments, visible or not (cheap).
    pub fn row_count_estimate(&self) -> usize {
        self.segments.read().iter().map(|s| s.rows()).sum()
    }

    pub fn memory_bytes(&self) -> usize {
        let segments: usize = self.segments.read().iter().map(|s| s.memory_bytes()).sum();
        let dictionaries: usize = self
            .dictionaries
            .iter()
            .flatten()
            .map(|d| d.memory_bytes())
            .sum();
        segments + dictionaries + std::mem::size_of::<ColumnTable>()
    }

    /// Recovery: adds a committed segment with number `no` (the plain schema), visible to
    /// every snapshot.
    pub fn load_segment(
        &self,
        no: u32,
        batch: RecordBatch,
        stats: Vec<ColumnStats>,
    ) -> Result<(), StorageError> {
        let columns = self.store_columns(&batch)?;
        let stamp = crate::recovery::RECOVERED_TS;
        self.push_segment(Some(no), batch.num_rows(), columns, stats, stamp);
        Ok(())
    }

    /// Recovery: marks a row deleted for every snapshot. Unknown rows are skipped (replay is
    /// idempotent: the log after a checkpoint may repeat what the checkpoint holds).
    pub fn load_delete(&self, row_id: u64) {
        let (no, offset) = split_row_id(row_id);
        if let Some(segment) = self.segment(no) {
            if let Some(end) = segment.ends().get(offset as usize) {
                if end.swap(crate::recovery::RECOVERED_TS, Ordering::AcqRel) == END_UNSET {
                    segment.deleted_rows.fetch_add(1, Ordering::AcqRel);
                }
            }
        }
    }
}

/// A segment image carries its table's dictionary for a text column whole up to this size.
const IMAGE_WHOLE_DICTIONARY_BYTES_MAX: usize = 16 << 10;

/// Codes into `values` as a dictionary of only the values they use, renumbered.
fn used_values(
    codes: &Int32Array,
    values: &ArrayRef,
) -> DictionaryArray<arrow::datatypes::Int32Type> {
    const UNSEEN: i32 = -1;
    let mut local_of = vec![UNSEEN; values.len()];
    let mut used: Vec<u32> = Vec::new();
    let keys: Vec<i32> = codes
        .values()
        .iter()
        .map(|&code| {
            // A NULL row's code may be 0 of an empty dictionary: it keeps key 0.
            let Some(slot) = local_of.get_mut(code as usize) else {
                return 0;
            };
            if *slot == UNSEEN {
                *slot = used.len() as i32;
                used.push(code as u32);
            }
            *slot
        })
        .collect();
    let used = arrow::array::UInt32Array::from(used);
    let values = arrow::compute::take(values, &used, None).expect("codes index the values");
    DictionaryArray::try_new(Int32Array::new(keys.into(), codes.nulls().cloned()), values)
        .expect("keys index the used values")
}

/// A text column (Utf8, or already a dictionary) as a dictionary of its own values: the costly
/// part of dictionary encoding (a hash lookup per row), which COPY's parse jobs do in parallel
/// before the one appending task codes the few distinct values into the table's dictionary.
pub fn prepare_text(
    array: &ArrayRef,
) -> Result<DictionaryArray<arrow::datatypes::Int32Type>, StorageError> {
    match array.data_type() {
        DataType::Utf8 => Ok(local_dictionary(array)),
        t if t == &coded_text_type() => Ok(local_dictionary(array)),
        t => Err(StorageError::SchemaMismatch(format!(
            "{t} where text was expected"
        ))),
    }
}

/// A segment as Arrow IPC stream bytes: how inserted segments go to the redo log and
/// checkpoints. The stream holds the segment's batch and then, when the stats fit the schema,
/// a two-row batch of its per-column minimums (row 0) and maximums (row 1), so that loading a
/// segment does not scan every column again to rebuild them (half of a column table's cold
/// start before the stats were stored).
pub fn segment_to_ipc(batch: &RecordBatch, stats: &[ColumnStats]) -> Vec<u8> {
    let mut out = Vec::with_capacity(batch.get_array_memory_size() + 1024);
    {
        let mut writer = arrow::ipc::writer::StreamWriter::try_new(&mut out, &batch.schema())
            .expect("IPC writer on a Vec");
        writer.write(batch).expect("IPC write to a Vec");
        if let Some(stats_batch) = stats_batch(batch, stats) {
            writer.write(&stats_batch).expect("IPC write to a Vec");
        }
        writer.finish().expect("IPC finish on a Vec");
    }
    out
}

/// The min/max batch of `segment_to_ipc`, if the stats have the batch's types and fit its
/// nullability (a column with no non-null value has null stats, which a NOT NULL field cannot
/// hold: such a segment is stored without stats).
fn stats_batch(batch: &RecordBatch, stats: &[ColumnStats]) -> Option<RecordBatch> {
    if stats.len() != batch.num_columns() {
        return None;
    }
    // A text column stored as a dictionary has its stats as plain text: cast to the column's
    // type (`segment_from_ipc` casts back).
    let columns = stats
        .iter()
        .zip(batch.schema().fields())
        .map(|(s, f)| {
            let both = arrow::compute::concat(&[s.min.as_ref(), s.max.as_ref()]).ok()?;
            arrow::compute::cast(&both, f.data_type()).ok()
        })
        .collect::<Option<Vec<ArrayRef>>>()?;
    RecordBatch::try_new(batch.schema(), columns).ok()
}

/// The segment of `segment_to_ipc` bytes, with its stats when the stream holds them. The bytes
/// are copied once into an Arrow buffer that the arrays then share, instead of into a fresh
/// buffer per array.
pub fn segment_from_ipc(bytes: &[u8]) -> Result<(RecordBatch, Option<Vec<ColumnStats>>), String> {
    let bad = |e: arrow::error::ArrowError| format!("bad column segment: {e}");
    let mut buffer = arrow::buffer::Buffer::from_vec(bytes.to_vec());
    let mut decoder = arrow::ipc::reader::StreamDecoder::new();
    let mut batches = Vec::with_capacity(2);
    while !buffer.is_empty() {
        if let Some(batch) = decoder.decode(&mut buffer).map_err(bad)? {
            batches.push(batch);
        }
    }
    decoder.finish().map_err(bad)?;
    let mut batches = batches.into_iter();
    let (Some(batch), stats_batch, None) = (batches.next(), batches.next(), batches.next()) else {
        return Err("column segment holds no batch or more than two".to_string());
    };
    let stats = match stats_batch {
        Some(s) if s.num_rows() == 2 && s.num_columns() == batch.num_columns() => Some(
            s.columns()
                .iter()
                .zip(batch.columns())
                .map(|(minmax, data)| {
                    let minmax = match minmax.data_type() {
                        DataType::Dictionary(_, value) => arrow::compute::cast(minmax, value)
                            .map_err(|e| format!("bad column segment stats: {e}"))?,
                        _ => minmax.clone(),
                    };
                    Ok(ColumnStats {
                        min: minmax.slice(0, 1),
                        max: minmax.slice(1, 1),
                        null_count: data.null_count(),
                    })
                })
                .collect::<Result<_, String>>()?,
        ),
        Some(_) => return Err("column segment has malformed stats".to_string()),
        None => None,
    };
    Ok((batch, stats))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{AsArray, StringArray};

    #[test]
    fn used_values_keeps_only_the_values_the_codes_use() {
        let values: ArrayRef = Arc::new(StringArray::from(vec!["a", "b", "c"]));
        let codes = Int32Array::from(vec![Some(2), Some(0), Some(2), None]);
        let image = used_values(&codes, &values);
        assert_eq!(
            image.values().as_string::<i32>(),
            &StringArray::from(vec!["c", "a"])
        );
        let decoded = arrow::compute::cast(&image, &DataType::Utf8).unwrap();
        assert_eq!(
            decoded.as_string::<i32>(),
            &StringArray::from(vec![Some("c"), Some("a"), Some("c"), None])
        );
        // Codes of an empty dictionary (every row NULL) stay valid.
        let empty: ArrayRef = Arc::new(StringArray::from(Vec::<&str>::new()));
        let nulls = Int32Array::from(vec![None, None]);
        assert_eq!(used_values(&nulls, &empty).null_count(), 2);
    }
}
