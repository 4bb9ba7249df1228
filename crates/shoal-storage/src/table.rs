//! Row tables: the MVCC row engine. A table is a heap of row handles (an append-only list of
//! fixed-size chunks, which scans walk), its indexes, and the rules for writing a row (a
//! [`RowChain`], see `row_chain`). Writers follow PostgreSQL: a row whose newest version is
//! held by another transaction makes the caller wait (`WouldBlock`) and retry; a row changed
//! after the caller's snapshot fails REPEATABLE READ (`SerializationFailure`) and hands READ
//! COMMITTED the newest version to re-check (`WriteOutcome::Changed`).

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::error::StorageError;
use crate::gc::GcCursor;
use crate::index::{key_part, with_key_scratch, EntryKey, Index, IndexDef, KeyScratch};
use crate::key_codec::{self, prefix_successor};
use crate::row_codec;
use crate::txn::{
    is_txn_stamp, stamp_txn, txn_stamp, ChangeKind, CommitTs, IsolationLevel, Snapshot,
    Transaction, TxnId, TxnShared, WriteEntry, END_UNSET,
};
use crate::types::{DataType, Value};
use crate::{Direction, IndexId, TableId};

pub(crate) use crate::row_chain::{ChainState, Version, VersionData};
pub use crate::row_chain::{RowChain, RowRef};

/// Row handles per heap chunk: big enough that the chunk list stays short, small enough that a
/// scan copies a chunk's handles cheaply before visiting them without the chunk lock.
pub(crate) const HEAP_CHUNK_ROWS: usize = 4096;

/// An index scan that walks past at least this many entries its snapshot cannot see prunes
/// the dead ones among them (`prune_dead_entries`), up to the larger number per scan.
const PRUNE_ON_SCAN_MIN_ENTRIES: usize = 16;
const PRUNE_ON_SCAN_MAX_ENTRIES: usize = 1024;

/// Result of update/delete/lock_row when no error occurred.
#[derive(Clone, Debug, PartialEq)]
pub enum WriteOutcome {
    Done,
    /// READ COMMITTED only: the row changed after the caller's snapshot and nothing was written.
    /// `newest` is the newest committed row (None: it was deleted, skip it). If it still matches
    /// the statement's WHERE, call again with `newest_snapshot`.
    Changed {
        newest: Option<Vec<Value>>,
        newest_snapshot: Snapshot,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowLockMode {
    /// FOR KEY SHARE, a foreign key check's lock on the row it references: deletes, updates
    /// of a unique key and FOR UPDATE wait for it; other updates and share locks do not.
    KeyShare,
    /// FOR SHARE: every write, FOR NO KEY UPDATE and FOR UPDATE wait for it; share locks do
    /// not.
    Share,
    /// FOR NO KEY UPDATE, what an update that leaves the key alone holds: writes and every
    /// lock but FOR KEY SHARE wait for it.
    NoKeyUpdate,
    /// FOR UPDATE: as a delete, without changing the row; every other lock and write waits.
    Exclusive,
}

/// What a caller of `check_write` is about to do to the row, which decides the lock holders it
/// must wait for.
#[derive(Clone, Copy)]
enum Access<'a> {
    Lock(RowLockMode),
    Delete,
    /// Replace the row with these values.
    Update(&'a [Value]),
}

/// Result of [`RowTable::insert_or_conflict`].
#[derive(Debug)]
pub enum InsertOutcome {
    Inserted(RowRef),
    /// A live row already has the key in unique index `index` (for ON CONFLICT).
    Conflict {
        index: IndexId,
        existing: RowRef,
    },
}

/// Why a new index key could not be added.
enum KeyConflict {
    Live { index_pos: usize, existing: RowRef },
    Pending(TxnId),
}

enum WriteCheck {
    Proceed,
    Outcome(WriteOutcome),
}

/// Column types and indexes: read-locked by every operation, write-locked by DDL.
pub(crate) struct TableShape {
    pub types: Vec<DataType>,
    pub indexes: Vec<Index>,
}

pub(crate) type HeapChunk = Arc<Mutex<Vec<RowRef>>>;

/// A slice of a table's heap taken at one moment (`RowTable::heap_parts`): rows appended
/// later, or with ids from `row_id_end` on, are not in it.
pub struct HeapPart {
    chunks: Vec<HeapChunk>,
    row_id_end: u64,
}

/// The table's row handles, append-only except for GC removing dead rows.
pub(crate) struct Heap {
    chunks: RwLock<Vec<HeapChunk>>,
}

impl Heap {
    pub(crate) fn append(&self, row: RowRef) {
        if let Some(last) = self.chunks.read().last() {
            let mut c = last.lock();
            if c.len() < HEAP_CHUNK_ROWS {
                c.push(row);
                return;
            }
        }
        let mut chunks = self.chunks.write();
        if let Some(last) = chunks.last() {
            let mut c = last.lock();
            if c.len() < HEAP_CHUNK_ROWS {
                c.push(row);
                return;
            }
        }
        let mut c = Vec::with_capacity(HEAP_CHUNK_ROWS);
        c.push(row);
        chunks.push(Arc::new(Mutex::new(c)));
    }

    /// Appends many rows, taking the chunk locks once per chunk rather than once per row.
    pub(crate) fn append_many(&self, rows: impl IntoIterator<Item = RowRef>) {
        let mut rows = rows.into_iter().peekable();
        while rows.peek().is_some() {
            if let Some(last) = self.chunks.read().last() {
                let mut c = last.lock();
                let room = HEAP_CHUNK_ROWS.saturating_sub(c.len());
                if room > 0 {
                    c.extend(rows.by_ref().take(room));
                    continue;
                }
            }
            let mut chunks = self.chunks.write();
            if chunks
                .last()
                .is_none_or(|c| c.lock().len() >= HEAP_CHUNK_ROWS)
            {
                chunks.push(Arc::new(Mutex::new(Vec::with_capacity(HEAP_CHUNK_ROWS))));
            }
        }
    }

    pub(crate) fn chunks(&self) -> Vec<HeapChunk> {
        self.chunks.read().clone()
    }

    /// Drops emptied chunks other than the last (which takes appends).
    pub(crate) fn drop_empty_chunks(&self) {
        let mut chunks = self.chunks.write();
        let last = chunks.len().saturating_sub(1);
        let mut i = 0;
        chunks.retain(|c| {
            i += 1;
            i - 1 == last || !c.lock().is_empty()
        });
    }

    fn len(&self) -> usize {
        self.chunks.read().iter().map(|c| c.lock().len()).sum()
    }
}

pub struct RowTable {
    id: TableId,
    pub(crate) shared: Arc<TxnShared>,
    pub(crate) shape: RwLock<TableShape>,
    pub(crate) heap: Heap,
    pub(crate) next_row_id: AtomicU64,
    dropped: AtomicBool,
    pub(crate) gc_cursor: Mutex<GcCursor>,
    /// Set by every insert, update and delete; cleared when a GC pass starts. A table whose
    /// last pass found nothing left to do and that nothing wrote to since is skipped by the
    /// background GC (see `gc.rs`).
    pub(crate) gc_dirty: AtomicBool,
    /// What statements read and wrote, for pg_stat_user_tables.
    activity: crate::activity::Striped<crate::activity::TableCounters>,
}

/// Tables show as their id: their rows are far too many to print.
impl std::fmt::Debug for RowTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowTable")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl RowTable {
    pub(crate) fn new(id: TableId, types: Vec<DataType>, shared: Arc<TxnShared>) -> RowTable {
        RowTable {
            id,
            shared,
            shape: RwLock::new(TableShape {
                types,
                indexes: Vec::new(),
            }),
            heap: Heap {
                chunks: RwLock::new(Vec::new()),
            },
            next_row_id: AtomicU64::new(1),
            dropped: AtomicBool::new(false),
            gc_cursor: Mutex::new(GcCursor::default()),
            gc_dirty: AtomicBool::new(true),
            activity: Default::default(),
        }
    }

    /// What statements have read and written since the server started.
    pub fn activity(&self) -> crate::activity::TableActivity {
        self.activity.total()
    }

    /// The scans of index `id` since it was built or the server started; None if there is no
    /// such index.
    pub fn index_activity(&self, id: IndexId) -> Option<crate::activity::IndexActivity> {
        let shape = self.shape.read_recursive();
        let idx = shape.indexes.iter().find(|i| i.def.id == id)?;
        Some(idx.activity.total())
    }

    pub fn id(&self) -> TableId {
        self.id
    }

    /// Marks the table for the next GC pass. Called after the write's row and heap locks are
    /// released: a pass that looked at the row (or, for an insert, the heap chunk) before the
    /// write locked it must see the mark (that lock orders the pass's clearing of the flag
    /// before this load). Writes mostly find
    /// the mark set and only read it, so the flag's cache line is not written per row.
    fn note_write(&self) {
        if !self.gc_dirty.load(Ordering::Relaxed) {
            self.gc_dirty.store(true, Ordering::Release);
        }
    }

    /// The column types rows are encoded with (changes only with `alter_columns`).
    pub fn types(&self) -> Vec<DataType> {
        self.shape.read_recursive().types.clone()
    }

    /// Decodes a row handed out by `scan`/`index_scan`.
    pub fn decode_row(&self, bytes: &[u8]) -> Vec<Value> {
        row_codec::decode_all(&self.shape.read_recursive().types, bytes)
    }

    pub(crate) fn mark_dropped(&self) {
        self.dropped.store(true, Ordering::Release);
    }

    pub(crate) fn mark_restored(&self) {
        self.dropped.store(false, Ordering::Release);
    }

    fn check_alive(&self) -> Result<(), StorageError> {
        if self.dropped.load(Ordering::Acquire) {
            Err(StorageError::TableDropped)
        } else {
            Ok(())
        }
    }

    fn unique_violation(&self, shape: &TableShape, index: IndexId, row: &[Value]) -> StorageError {
        let def = &shape
            .indexes
            .iter()
            .find(|i| i.def.id == index)
            .expect("conflicting index")
            .def;
        StorageError::UniqueViolation {
            index_name: def.name.clone(),
            key_columns: def.columns.clone(),
            key: def.columns.iter().map(|&c| row[c].clone()).collect(),
        }
    }

    /// Inserts a row. A live row with the same key in a unique index is a `UniqueViolation`; an
    /// uncommitted one is `WouldBlock` (wait, then retry).
    pub fn insert(&self, txn: &mut Transaction, row: &[Value]) -> Result<RowRef, StorageError> {
        match self.insert_or_conflict(txn, row)? {
            InsertOutcome::Inserted(r) => Ok(r),
            InsertOutcome::Conflict { index, .. } => {
                Err(self.unique_violation(&self.shape.read_recursive(), index, row))
            }
        }
    }

    /// Like `insert`, but a unique conflict with a live row returns that row (ON CONFLICT).
    pub fn insert_or_conflict(
        &self,
        txn: &mut Transaction,
        row: &[Value],
    ) -> Result<InsertOutcome, StorageError> {
        let shape = self.shape.read_recursive();
        self.check_alive()?;
        self.shared.memory.check()?;
        row_codec::check_row(&shape.types, row)?;
        let data = row_codec::encode_vec(&shape.types, row);
        let row_id = self.next_row_id.fetch_add(1, Ordering::Relaxed);
        let outcome = self.insert_encoded(&shape, txn, row_id, &data)?;
        if let InsertOutcome::Inserted(_) = outcome {
            self.activity.inserted(1);
        }
        Ok(outcome)
    }

    /// Links a new row with these bytes and id into the heap and indexes.
    pub(crate) fn insert_encoded(
        &self,
        shape: &TableShape,
        txn: &mut Transaction,
        row_id: u64,
        data: &[u8],
    ) -> Result<InsertOutcome, StorageError> {
        self.shared.before_row_write(txn)?;
        let chain = RowRef::new(RowChain::new(row_id, txn_stamp(txn.id())), data);
        if let Err(conflict) = self.index_new_version(shape, txn.id(), &chain, data, None) {
            // Whoever found the chain through an index meanwhile now sees an empty row.
            chain.state.lock().clear_head();
            return match conflict {
                KeyConflict::Live {
                    index_pos,
                    existing,
                } => Ok(InsertOutcome::Conflict {
                    index: shape.indexes[index_pos].def.id,
                    existing,
                }),
                KeyConflict::Pending(holder) => {
                    Err(self.shared.would_block(txn.id(), holder, Vec::new()))
                }
            };
        }
        self.heap.append(chain.clone());
        self.note_write();
        txn.push_write(WriteEntry {
            table: self.id,
            chain: chain.clone(),
            kind: ChangeKind::Insert,
            row: VersionData::Inline,
        });
        Ok(InsertOutcome::Inserted(chain))
    }

    /// Adds index entries for a new version of `chain` (already linked) whose key differs from
    /// `old`'s, checking unique indexes. On a conflict the entries it added are removed again.
    fn index_new_version(
        &self,
        shape: &TableShape,
        txn: TxnId,
        chain: &RowRef,
        data: &[u8],
        old: Option<&[u8]>,
    ) -> Result<(), KeyConflict> {
        with_key_scratch(|s| self.index_new_version_with(shape, txn, chain, data, old, s))
    }

    fn index_new_version_with(
        &self,
        shape: &TableShape,
        txn: TxnId,
        chain: &RowRef,
        data: &[u8],
        old: Option<&[u8]>,
        scratch: &mut KeyScratch,
    ) -> Result<(), KeyConflict> {
        let mut added: Vec<(usize, EntryKey)> = Vec::new();
        let KeyScratch {
            values,
            key,
            other_key: old_key,
            ..
        } = scratch;
        for (pos, idx) in shape.indexes.iter().enumerate() {
            if !idx.covers(&shape.types, data) {
                continue;
            }
            let has_null = idx.row_key(&shape.types, data, values, key);
            if let Some(old) = old {
                idx.row_key(&shape.types, old, values, old_key);
                if old_key == key && idx.covers(&shape.types, old) {
                    continue;
                }
            }
            let _stripe = idx.lock_key(&key);
            if idx.def.unique && !has_null {
                if let Some(c) = find_conflict(idx, pos, &shape.types, &key, chain, txn) {
                    for (pos, e) in &added {
                        shape.indexes[*pos].remove_entry(e.as_bytes());
                    }
                    return Err(c);
                }
            }
            if let Some(entry) = idx.add_entry(&key, chain) {
                added.push((pos, entry));
            }
        }
        Ok(())
    }

    /// Decides whether `txn` may write the row now (see the module comment).
    fn check_write(
        &self,
        row: &RowRef,
        st: &ChainState,
        txn: &Transaction,
        snap: &Snapshot,
        shape: &TableShape,
        access: Access<'_>,
    ) -> Result<WriteCheck, StorageError> {
        let types = &shape.types;
        let me = txn_stamp(txn.id());
        let gone = || {
            WriteCheck::Outcome(WriteOutcome::Changed {
                newest: None,
                newest_snapshot: *snap,
            })
        };
        let Some(head) = st.head() else {
            return Ok(gone());
        };
        let mode = match access {
            Access::Lock(mode) => mode,
            Access::Delete => RowLockMode::Exclusive,
            // An update that keeps the row's unique keys conflicts as FOR NO KEY UPDATE (FOR
            // KEY SHARE lets it through), one that changes them as FOR UPDATE. The key check
            // decodes the row, so it runs only when some lock is there to conflict.
            Access::Update(new_row) => {
                let locked = st.older.other_lock_holder(txn.id(), true).is_some();
                if locked && changes_unique_key(shape, row.bytes(&head.data), new_row) {
                    RowLockMode::Exclusive
                } else {
                    RowLockMode::NoKeyUpdate
                }
            }
        };
        let mut blockers = st.older.lock_blockers(txn.id(), mode);
        if let Some(holder) = blockers.next() {
            let others = blockers.collect();
            return Err(self.shared.would_block(txn.id(), holder, others));
        }
        if is_txn_stamp(head.begin) && head.begin != me {
            // FOR KEY SHARE is judged by the committed version such an update replaced: the
            // key it protects is the same in both.
            if matches!(access, Access::Lock(RowLockMode::KeyShare)) {
                if let Some(replaced) = key_preserving_update(row, st, shape) {
                    if replaced.begin <= snap.ts {
                        return Ok(WriteCheck::Proceed);
                    }
                    return self.changed_after_snapshot(txn, replaced.begin, || {
                        Some(row_codec::decode_all(types, row.bytes(&replaced.data)))
                    });
                }
            }
            return Err(self
                .shared
                .would_block(txn.id(), stamp_txn(head.begin), Vec::new()));
        }
        if head.end == me {
            // Already deleted (or replaced) by this transaction: nothing left to change.
            return Ok(gone());
        }
        if is_txn_stamp(head.end) {
            return Err(self
                .shared
                .would_block(txn.id(), stamp_txn(head.end), Vec::new()));
        }
        if head.begin == me || (head.end == END_UNSET && head.begin <= snap.ts) {
            return Ok(WriteCheck::Proceed);
        }
        if head.end != END_UNSET && head.end <= snap.ts {
            // Deleted before the snapshot: the caller holds a stale handle.
            return Ok(gone());
        }
        let deleted = head.end != END_UNSET;
        let changed_ts = if deleted { head.end } else { head.begin };
        self.changed_after_snapshot(txn, changed_ts, || {
            (!deleted).then(|| row_codec::decode_all(types, row.bytes(&head.data)))
        })
    }

    /// `check_write`'s outcome for a row whose visible version changed at `changed_ts`, after
    /// `txn`'s snapshot: a serialization failure in REPEATABLE READ; in READ COMMITTED the
    /// `newest` values (none if deleted) and a snapshot to re-check the row at.
    fn changed_after_snapshot(
        &self,
        txn: &Transaction,
        changed_ts: CommitTs,
        newest: impl FnOnce() -> Option<Vec<Value>>,
    ) -> Result<WriteCheck, StorageError> {
        match txn.isolation() {
            IsolationLevel::RepeatableRead | IsolationLevel::Serializable => {
                Err(StorageError::SerializationFailure)
            }
            IsolationLevel::ReadCommitted => {
                // The change is stamped, so its commit is done with this row; the watermark may
                // still lag behind it, the re-check only needs this row.
                let ts = changed_ts.max(self.shared.clock.stable());
                Ok(WriteCheck::Outcome(WriteOutcome::Changed {
                    newest: newest(),
                    newest_snapshot: Snapshot { ts, txn: txn.id() },
                }))
            }
        }
    }

    /// Replaces the row's visible version with `new_row` (see [`WriteOutcome`] for the
    /// outcomes). A new version adds memory, so this fails with 53200 at the memory limit.
    pub fn update(
        &self,
        txn: &mut Transaction,
        row: &RowRef,
        snap: &Snapshot,
        new_row: &[Value],
    ) -> Result<WriteOutcome, StorageError> {
        self.shared.memory.check()?;
        let outcome = self.update_version(txn, row, snap, new_row)?;
        if let WriteOutcome::Done = outcome {
            self.activity.updated();
        }
        Ok(outcome)
    }

    /// `update` without the memory limit: recovery replays what was committed whatever the
    /// limit.
    pub(crate) fn update_version(
        &self,
        txn: &mut Transaction,
        row: &RowRef,
        snap: &Snapshot,
        new_row: &[Value],
    ) -> Result<WriteOutcome, StorageError> {
        debug_assert_eq!(snap.txn, txn.id(), "snapshot of another transaction");
        let shape = self.shape.read_recursive();
        self.check_alive()?;
        row_codec::check_row(&shape.types, new_row)?;
        let data: Arc<[u8]> = Arc::from(row_codec::encode_vec(&shape.types, new_row));
        self.shared.before_row_write(txn)?;
        let me = txn_stamp(txn.id());
        let old_data = {
            let mut st = row.state.lock();
            if let WriteCheck::Outcome(o) =
                self.check_write(row, &st, txn, snap, &shape, Access::Update(new_row))?
            {
                return Ok(o);
            }
            let head = st.head_mut().expect("check_write saw a head");
            head.end = me;
            let old = row.keep_bytes(&head.data);
            st.push(Version {
                begin: me,
                end: END_UNSET,
                data: VersionData::Shared(data.clone()),
            });
            // Prune while we hold the chain anyway, so hot rows stay short between GC passes.
            st.prune(self.shared.gc_horizon_ts.load(Ordering::Relaxed));
            old
        };
        if let Err(c) = self.index_new_version(&shape, txn.id(), row, &data, Some(&old_data)) {
            row.undo(ChangeKind::Update, txn.id());
            return Err(match c {
                KeyConflict::Live { index_pos, .. } => {
                    self.unique_violation(&shape, shape.indexes[index_pos].def.id, new_row)
                }
                KeyConflict::Pending(holder) => {
                    self.shared.would_block(txn.id(), holder, Vec::new())
                }
            });
        }
        self.note_write();
        txn.push_write(WriteEntry {
            table: self.id,
            chain: row.clone(),
            kind: ChangeKind::Update,
            row: VersionData::Shared(data),
        });
        Ok(WriteOutcome::Done)
    }

    /// Deletes the row's visible version.
    pub fn delete(
        &self,
        txn: &mut Transaction,
        row: &RowRef,
        snap: &Snapshot,
    ) -> Result<WriteOutcome, StorageError> {
        let outcome = self.delete_version(txn, row, snap)?;
        if let WriteOutcome::Done = outcome {
            self.activity.deleted();
        }
        Ok(outcome)
    }

    /// `delete` without counting it: recovery replays deletes already counted.
    pub(crate) fn delete_version(
        &self,
        txn: &mut Transaction,
        row: &RowRef,
        snap: &Snapshot,
    ) -> Result<WriteOutcome, StorageError> {
        debug_assert_eq!(snap.txn, txn.id(), "snapshot of another transaction");
        let shape = self.shape.read_recursive();
        self.check_alive()?;
        self.shared.before_row_write(txn)?;
        let old = {
            let mut st = row.state.lock();
            if let WriteCheck::Outcome(o) =
                self.check_write(row, &st, txn, snap, &shape, Access::Delete)?
            {
                return Ok(o);
            }
            let head = st.head_mut().expect("check_write saw a head");
            head.end = txn_stamp(txn.id());
            head.data.clone() // The chain's own bytes: the write entry keeps the chain.
        };
        self.note_write();
        txn.push_write(WriteEntry {
            table: self.id,
            chain: row.clone(),
            kind: ChangeKind::Delete,
            row: old,
        });
        Ok(WriteOutcome::Done)
    }

    /// SELECT ... FOR UPDATE / FOR SHARE: same checks as update, then holds the row until the
    /// transaction ends (or rolls back past a savepoint taken before the lock).
    pub fn lock_row(
        &self,
        txn: &mut Transaction,
        row: &RowRef,
        snap: &Snapshot,
        mode: RowLockMode,
    ) -> Result<WriteOutcome, StorageError> {
        let shape = self.shape.read_recursive();
        self.check_alive()?;
        self.shared.ensure_writer(txn);
        let mut st = row.state.lock();
        let checked = self.check_write(row, &st, txn, snap, &shape, Access::Lock(mode))?;
        if let WriteCheck::Outcome(o) = checked {
            return Ok(o);
        }
        let me = txn.id();
        let newly_locked = match mode {
            // A version of its own or its exclusive lock already keeps the others out.
            RowLockMode::Share | RowLockMode::KeyShare => {
                let head_is_own = st.head().is_some_and(|h| h.begin == txn_stamp(me));
                let key_only = mode == RowLockMode::KeyShare;
                st.older.locker() != me && !head_is_own && st.older.add_sharer(me, key_only)
            }
            RowLockMode::NoKeyUpdate | RowLockMode::Exclusive => {
                let no_key = mode == RowLockMode::NoKeyUpdate;
                let newly = st.older.locker() != me;
                if newly {
                    debug_assert_eq!(st.older.locker(), 0);
                    st.older.set_locker(me);
                    st.older.set_locker_no_key(no_key);
                } else if !no_key {
                    // FOR UPDATE over its own FOR NO KEY UPDATE: the lock grows and stays
                    // recorded once, so a rollback to a savepoint between the two keeps the
                    // stronger lock (more than needed, never less).
                    st.older.set_locker_no_key(false);
                }
                newly
            }
        };
        if newly_locked {
            txn.locks.push((row.clone(), mode));
        }
        Ok(WriteOutcome::Done)
    }

    /// Calls `f` with every row visible to `snap` and its encoded bytes until `f` returns false.
    /// Rows inserted after the scan started are not visited (INSERT ... SELECT from the same
    /// table terminates). Counted as a sequential scan of the table.
    pub fn scan(&self, snap: &Snapshot, mut f: impl FnMut(&RowRef, &[u8]) -> bool) {
        let whole = self.heap_parts(1).pop().expect("one part");
        let mut rows_read = 0;
        self.scan_heap_part(snap, &whole, |row, data| {
            rows_read += 1;
            f(row, data)
        });
        self.activity.seq_scan(rows_read);
    }

    /// The heap as `parts` contiguous slices of whole chunks, in heap order, for several
    /// threads scanning the table together (checkpoints do). Taken once for all parts: GC may
    /// drop emptied chunks meanwhile, so slices that each looked at the chunk list on their own
    /// could overlap or leave a gap. Contiguous slices (not every `parts`-th chunk) keep each
    /// part in insertion order, for a bulk-loaded table usually key order, so a checkpoint's
    /// parts load into index runs that need no sorting.
    pub fn heap_parts(&self, parts: usize) -> Vec<HeapPart> {
        assert!(parts > 0, "a heap in no parts");
        let _shape = self.shape.read_recursive();
        let row_id_end = self.next_row_id.load(Ordering::Relaxed);
        let chunks = self.heap.chunks();
        let per_part = chunks.len().div_ceil(parts).max(1);
        let mut out: Vec<HeapPart> = chunks
            .chunks(per_part)
            .map(|c| HeapPart {
                chunks: c.to_vec(),
                row_id_end,
            })
            .collect();
        out.resize_with(parts, || HeapPart {
            chunks: Vec::new(),
            row_id_end,
        });
        out
    }

    /// `scan` over one part of `heap_parts`, not counted in the table's activity: the server's
    /// own reads (checkpoints) use it.
    pub fn scan_heap_part(
        &self,
        snap: &Snapshot,
        part: &HeapPart,
        mut f: impl FnMut(&RowRef, &[u8]) -> bool,
    ) {
        let _shape = self.shape.read_recursive();
        let mut rows: Vec<RowRef> = Vec::with_capacity(HEAP_CHUNK_ROWS);
        for chunk in &part.chunks {
            rows.clear();
            rows.extend(chunk.lock().iter().cloned());
            for r in &rows {
                if r.row_id() >= part.row_id_end {
                    continue;
                }
                if let Some(data) = r.visible_data(snap) {
                    if !f(r, &data) {
                        return;
                    }
                }
            }
        }
    }

    /// Calls `f` with the visible rows whose key in `index` lies within the bounds, in key order.
    /// Bounds may be prefixes of a composite key; a point lookup is Included(key) on both sides.
    pub fn index_scan(
        &self,
        index: IndexId,
        snap: &Snapshot,
        lower: Bound<&[Value]>,
        upper: Bound<&[Value]>,
        f: impl FnMut(&RowRef, &[u8]) -> bool,
    ) -> Result<(), StorageError> {
        self.index_scan_in(Direction::Forward, index, snap, lower, upper, f)
    }

    /// `index_scan` in either key order: `Backward` visits the largest key first (ORDER BY
    /// ... DESC read from the index).
    pub fn index_scan_in(
        &self,
        direction: Direction,
        index: IndexId,
        snap: &Snapshot,
        lower: Bound<&[Value]>,
        upper: Bound<&[Value]>,
        mut f: impl FnMut(&RowRef, &[u8]) -> bool,
    ) -> Result<(), StorageError> {
        let shape = self.shape.read_recursive();
        let idx = shape
            .indexes
            .iter()
            .find(|i| i.def.id == index)
            .ok_or(StorageError::NoSuchIndex(index))?;
        let (mut entries_read, mut rows_fetched) = (0u64, 0u64);
        let mut f = |row: &RowRef, data: &[u8]| {
            rows_fetched += 1;
            f(row, data)
        };
        with_key_scratch(|s| {
            if let (Bound::Included(lo), Bound::Included(hi)) = (lower, upper) {
                // Rows of one full key come in row id order, which is the forward order.
                if lo.len() == idx.def.columns.len() && lo == hi && direction == Direction::Forward
                {
                    let point_key = &mut s.other_key;
                    point_key.clear();
                    key_codec::encode_key_into(lo, point_key);
                    if idx.point_candidates(point_key, &mut s.rows) {
                        entries_read += s.rows.len() as u64;
                        s.rows.sort_by_key(|r| r.row_id());
                        for chain in &s.rows {
                            let Some(data) = chain.visible_data(snap) else {
                                continue;
                            };
                            idx.row_key(&shape.types, &data, &mut s.values, &mut s.key);
                            if s.key == *point_key
                                && idx.covers(&shape.types, &data)
                                && !f(chain, &data)
                            {
                                break;
                            }
                        }
                        return;
                    }
                }
            }
            let (lo, hi) = key_codec::key_range(lower, upper);
            let (lo, hi) = (as_slice_bound(&lo), as_slice_bound(&hi));
            let mut unseen: Vec<(Box<[u8]>, RowRef)> = Vec::new();
            idx.walk_entries(direction, lo, hi, |entry, chain| {
                entries_read += 1;
                let Some(data) = chain.visible_data(snap) else {
                    if unseen.len() < PRUNE_ON_SCAN_MAX_ENTRIES {
                        unseen.push((entry.into(), chain.clone()));
                    }
                    return true;
                };
                // Entries of old versions stay until GC: use this entry only if the visible
                // version has its key (which also reports each row once).
                idx.row_key(&shape.types, &data, &mut s.values, &mut s.key);
                if s.key[..] != *key_part(entry) || !idx.covers(&shape.types, &data) {
                    return true;
                }
                f(chain, &data)
            });
            if unseen.len() >= PRUNE_ON_SCAN_MIN_ENTRIES {
                self.prune_dead_entries(idx, &shape.types, unseen);
            }
        });
        idx.activity.scan(entries_read, rows_fetched);
        self.activity.idx_scan(rows_fetched);
        Ok(())
    }

    /// Whether more than `share` (0 to 1) of an index's entries lie in the key ranges: an index
    /// read would visit more than that part of what a scan visits. Counts the index's sorted
    /// run by binary searches and walks its recent entries only up to that share. False for an
    /// index of fewer than `min_entries` entries; None when the index is gone.
    pub fn index_ranges_exceed(
        &self,
        index: IndexId,
        ranges: &[(Bound<&[Value]>, Bound<&[Value]>)],
        share: f64,
        min_entries: usize,
    ) -> Option<bool> {
        let shape = self.shape.read_recursive();
        let idx = shape.indexes.iter().find(|i| i.def.id == index)?;
        let entries = idx.len_estimate();
        if entries < min_entries {
            return Some(false);
        }
        let enough = (entries as f64 * share) as usize + 1;
        let mut within = 0;
        for (lower, upper) in ranges {
            let (lo, hi) = key_codec::key_range(*lower, *upper);
            within += idx.count_range_up_to(as_slice_bound(&lo), as_slice_bound(&hi), enough);
            if within >= enough {
                return Some(true);
            }
        }
        Some(false)
    }

    /// Point lookup on an index: the first visible row with exactly `key`.
    pub fn index_get(
        &self,
        index: IndexId,
        snap: &Snapshot,
        key: &[Value],
    ) -> Result<Option<(RowRef, Vec<Value>)>, StorageError> {
        // Decoded in place (the shape lock is taken recursively), not copied out first.
        self.index_first(index, snap, key, |r, bytes| {
            (r.clone(), self.decode_row(bytes))
        })
    }

    /// Point lookup that decodes only columns `cols` of the row found (a point SELECT needs one
    /// column of pgbench's four, and not the 84-character filler).
    pub fn index_get_columns(
        &self,
        index: IndexId,
        snap: &Snapshot,
        key: &[Value],
        cols: &[usize],
    ) -> Result<Option<Vec<Value>>, StorageError> {
        self.index_first(index, snap, key, |_, bytes| {
            let mut values = Vec::with_capacity(cols.len());
            let types = &self.shape.read_recursive().types;
            row_codec::decode_into(types, bytes, cols, &mut values);
            values
        })
    }

    /// `take` of the first visible row with exactly `key` in `index`.
    fn index_first<T>(
        &self,
        index: IndexId,
        snap: &Snapshot,
        key: &[Value],
        mut take: impl FnMut(&RowRef, &[u8]) -> T,
    ) -> Result<Option<T>, StorageError> {
        let mut found = None;
        let (lower, upper) = (Bound::Included(key), Bound::Included(key));
        self.index_scan(index, snap, lower, upper, |r, bytes| {
            found = Some(take(r, bytes));
            false
        })?;
        Ok(found)
    }

    /// The row's version visible to `snap`, decoded.
    pub fn read(&self, row: &RowRef, snap: &Snapshot) -> Option<Vec<Value>> {
        let shape = self.shape.read_recursive();
        let st = row.state.lock();
        st.visible(snap)
            .map(|v| row_codec::decode_all(&shape.types, row.bytes(&v.data)))
    }

    /// Removes every row at once. Not transactional: it is not undone by rollback and running
    /// transactions lose sight of the rows at once (TRUNCATE takes an exclusive table lock in
    /// the SQL layer, so nobody else is looking).
    pub fn truncate(&self) {
        let shape = self.shape.write();
        self.heap.chunks.write().clear();
        for idx in &shape.indexes {
            idx.clear();
        }
        self.reset_gc_cursor();
    }

    pub fn drop_index(&self, id: IndexId) -> Result<(), StorageError> {
        let mut shape = self.shape.write();
        let pos = shape
            .indexes
            .iter()
            .position(|i| i.def.id == id)
            .ok_or(StorageError::NoSuchIndex(id))?;
        shape.indexes.remove(pos);
        self.reset_gc_cursor();
        Ok(())
    }

    /// Drops every index whose id is not in `keep`.
    pub fn retain_indexes(&self, keep: &[IndexId]) {
        let mut shape = self.shape.write();
        shape.indexes.retain(|i| keep.contains(&i.def.id));
        self.reset_gc_cursor();
    }

    /// Brings the indexes in line with `wanted` (a catalog's, after recovery replayed it or a
    /// rollback restored it): drops the others, builds the missing ones. Returns those that
    /// could not be built (live rows collide), with why.
    pub fn set_indexes(&self, wanted: Vec<IndexDef>) -> Vec<(IndexDef, StorageError)> {
        self.retain_indexes(&wanted.iter().map(|w| w.id).collect::<Vec<_>>());
        let have = self.indexes();
        wanted
            .into_iter()
            .filter(|w| !have.iter().any(|h| h.id == w.id))
            .filter_map(|w| self.add_index(w.clone()).err().map(|e| (w, e)))
            .collect()
    }

    pub fn indexes(&self) -> Vec<IndexDef> {
        self.shape
            .read_recursive()
            .indexes
            .iter()
            .map(|i| i.def.clone())
            .collect()
    }

    /// Rows in the heap, visible or not (cheap).
    pub fn row_count_estimate(&self) -> usize {
        self.heap.len()
    }

    /// Rows visible to `snap` (walks the table).
    pub fn live_row_count(&self, snap: &Snapshot) -> usize {
        let mut n = 0;
        let whole = self.heap_parts(1).pop().expect("one part");
        self.scan_heap_part(snap, &whole, |_, _| {
            n += 1;
            true
        });
        n
    }

    /// Estimate of the memory the table holds: its rows and its indexes (see `memory`).
    pub fn memory_bytes(&self) -> usize {
        self.memory().total_bytes()
    }

    /// Estimate of the memory the table holds, split into rows (heap slots, row chains,
    /// versions and their bytes, with allocation headers) and index entries. Walks the table.
    pub fn memory(&self) -> TableMemory {
        const ARC_HEADER_BYTES: usize = 16;
        let shape = self.shape.read_recursive();
        let mut rows_bytes = std::mem::size_of::<RowTable>();
        for chunk in self.heap.chunks() {
            let c = chunk.lock();
            rows_bytes += ARC_HEADER_BYTES + c.capacity() * std::mem::size_of::<RowRef>();
            rows_bytes += c.iter().map(RowRef::memory_bytes).sum::<usize>();
        }
        let index_bytes = shape.indexes.iter().map(index_memory_bytes).sum();
        TableMemory {
            rows_bytes,
            index_bytes,
        }
    }

    /// Estimate of the memory index `id` holds; None if the table has no such index.
    pub fn index_memory_bytes(&self, id: IndexId) -> Option<usize> {
        let shape = self.shape.read_recursive();
        let idx = shape.indexes.iter().find(|i| i.def.id == id)?;
        Some(index_memory_bytes(idx))
    }
}

/// The memory a table holds, as `pg_relation_size` (rows), `pg_indexes_size` (indexes) and
/// `pg_total_relation_size` (both) report it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableMemory {
    pub rows_bytes: usize,
    pub index_bytes: usize,
}

impl TableMemory {
    pub fn total_bytes(&self) -> usize {
        self.rows_bytes + self.index_bytes
    }
}

/// Ordered entries with their keys, plus the hashed point entries of a unique index.
/// Whether replacing a row whose bytes are `old` with `new_row` changes the key of one of the
/// table's unique indexes (partial ones aside): the keys foreign keys reference, the updates
/// FOR KEY SHARE keeps out.
fn changes_unique_key(shape: &TableShape, old: &[u8], new_row: &[Value]) -> bool {
    let mut keys = shape
        .indexes
        .iter()
        .filter(|idx| idx.def.unique && idx.def.predicate.is_none())
        .peekable();
    if keys.peek().is_none() {
        return false;
    }
    let old = row_codec::decode_all(&shape.types, old);
    keys.any(|idx| idx.def.columns.iter().any(|&c| old[c] != new_row[c]))
}

/// The committed version that the head of `st`, another transaction's pending update,
/// replaced, if that update left every unique key as it was. PostgreSQL takes such an update's
/// row lock as FOR NO KEY UPDATE, which does not conflict with the FOR KEY SHARE lock of a
/// foreign key check: the referencing row does not wait for it. The updater's later delete or
/// key change does wait for that lock (`Access::Delete`, `Access::Update`).
fn key_preserving_update<'s>(
    row: &RowRef,
    st: &'s ChainState,
    shape: &TableShape,
) -> Option<&'s Version> {
    // Updated and then deleted by the same transaction: a pending delete, waited for.
    let head = st.head().filter(|h| h.end == END_UNSET)?;
    let replaced = st
        .older
        .newest()
        .filter(|v| v.end == head.begin && !is_txn_stamp(v.begin))?;
    let head_values = row_codec::decode_all(&shape.types, row.bytes(&head.data));
    (!changes_unique_key(shape, row.bytes(&replaced.data), &head_values)).then_some(replaced)
}

fn index_memory_bytes(idx: &Index) -> usize {
    idx.entries.memory_bytes() + idx.point_map_bytes()
}

fn as_slice_bound(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(v) => Bound::Included(v.as_slice()),
        Bound::Excluded(v) => Bound::Excluded(v.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Looks for another row that has, or may get back, `key` in unique index `idx`. Called with
/// the key's stripe lock held.
fn find_conflict(
    idx: &Index,
    index_pos: usize,
    types: &[DataType],
    key: &[u8],
    own: &RowRef,
    txn: TxnId,
) -> Option<KeyConflict> {
    let me = txn_stamp(txn);
    let hi = prefix_successor(key);
    let upper = hi.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
    let mut conflict = None;
    idx.for_each_entry(Bound::Included(key), upper, |_, chain| {
        conflict = row_conflict(idx, index_pos, types, key, chain, own, me);
        conflict.is_none()
    });
    conflict
}

/// Whether `chain`, found under `key` in unique index `idx`, conflicts with a new entry of
/// `own` under that key (see `find_conflict`).
fn row_conflict(
    idx: &Index,
    index_pos: usize,
    types: &[DataType],
    key: &[u8],
    chain: &RowRef,
    own: &RowRef,
    me: u64,
) -> Option<KeyConflict> {
    if RowRef::ptr_eq(chain, own) {
        return None;
    }
    let st = chain.state.lock();
    let head = st.head()?;
    if head.end == me || (head.end != END_UNSET && !is_txn_stamp(head.end)) {
        // Deleted by us, or by a committed transaction: dead for every new snapshot.
        return None;
    }
    if is_txn_stamp(head.end) {
        // Another transaction is deleting it: a conflict only if that one rolls back.
        return idx
            .row_has_key(types, chain.bytes(&head.data), key)
            .then(|| KeyConflict::Pending(stamp_txn(head.end)));
    }
    if is_txn_stamp(head.begin) && head.begin != me {
        // Another transaction's new version; if it rolls back, the version it replaced
        // is live again.
        let replaced = st.older.last().filter(|p| p.end == head.begin);
        let has_key = idx.row_has_key(types, chain.bytes(&head.data), key)
            || replaced.is_some_and(|p| idx.row_has_key(types, chain.bytes(&p.data), key));
        return has_key.then(|| KeyConflict::Pending(stamp_txn(head.begin)));
    }
    idx.row_has_key(types, chain.bytes(&head.data), key)
        .then(|| KeyConflict::Live {
            index_pos,
            existing: chain.clone(),
        })
}
