//! Transactions and the machinery MVCC needs around them: transaction ids and how they are told
//! apart from commit timestamps inside version stamps, snapshots and the visibility rule, the
//! commit clock with its "stable" watermark (a snapshot never includes a commit that is still
//! stamping its versions), the registry of active snapshots (the GC horizon) and of writing
//! transactions (who can be waited for, and the waits-for graph that finds deadlocks: `waits`),
//! and the per-transaction write set, lock set and savepoints that commit stamps and rollback
//! undoes.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::column::{self, ColumnTable, ColumnWrite};
use crate::early_redo::{redo_change, EarlyRedo, EarlyRowRedo, EARLY_REDO_BYTES_DEFAULT};
use crate::error::StorageError;
use crate::table::{RowRef, VersionData};
use crate::TableId;

mod waits;

pub use waits::{LockWaits, RowTicket};
use waits::{TxnDone, WaitGraph};

/// Transaction id. Ids start at 1 and are never reused.
pub type TxnId = u64;
/// Commit timestamp. Timestamps start at 1; snapshot timestamp 0 sees nothing committed.
pub type CommitTs = u64;

/// Version begin/end stamps hold either a commit timestamp or, while the writer runs, its
/// transaction id with this bit set.
pub(crate) const TXN_STAMP_BIT: u64 = 1 << 63;
/// End stamp of a version nobody has deleted or replaced.
pub(crate) const END_UNSET: u64 = 0;

pub(crate) fn txn_stamp(txn: TxnId) -> u64 {
    debug_assert!(txn & TXN_STAMP_BIT == 0);
    txn | TXN_STAMP_BIT
}

pub(crate) fn is_txn_stamp(stamp: u64) -> bool {
    stamp & TXN_STAMP_BIT != 0
}

pub(crate) fn stamp_txn(stamp: u64) -> TxnId {
    debug_assert!(is_txn_stamp(stamp));
    stamp & !TXN_STAMP_BIT
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IsolationLevel {
    ReadCommitted,
    /// Snapshot isolation: one snapshot for the whole transaction, and a write to a row
    /// changed since it fails (first updater wins).
    RepeatableRead,
    /// Snapshot isolation, and at commit a transaction that writes must not have read a table
    /// another transaction wrote after its snapshot (or is committing now): otherwise it fails
    /// with a serialization failure. A table read by the transaction is one the caller named
    /// with [`Transaction::note_reads`]. Serializable transactions that write are then
    /// equivalent to running one at a time in commit order, each at its commit, and a
    /// read-only one sees a prefix of that order, so it needs no check. Coarser than
    /// PostgreSQL's predicate locks (any write to a table read counts), so it fails more
    /// often, never less.
    Serializable,
}

impl IsolationLevel {
    /// Whether the transaction reads at one snapshot taken at its first statement.
    pub fn keeps_snapshot(self) -> bool {
        !matches!(self, IsolationLevel::ReadCommitted)
    }
}

/// SERIALIZABLE's commit-time check (see [`IsolationLevel::Serializable`]): what every writer
/// leaves behind for it.
#[derive(Default)]
struct TableWrites {
    /// The newest commit timestamp that wrote each table.
    last_commit: HashMap<TableId, CommitTs>,
    /// Writers of each table between their check-in and the moment their timestamp is in
    /// `last_commit`: their timestamps are not known yet.
    committing: HashMap<TableId, usize>,
}

/// What a statement sees: every commit with timestamp <= `ts`, plus the own writes of `txn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub ts: CommitTs,
    pub txn: TxnId,
}

impl Snapshot {
    /// The MVCC visibility rule for a version with these stamps. Own deletes hide the version.
    #[inline]
    pub fn sees(&self, begin: u64, end: u64) -> bool {
        let begun = if is_txn_stamp(begin) {
            begin == txn_stamp(self.txn)
        } else {
            begin <= self.ts
        };
        begun
            && (end == END_UNSET
                || if is_txn_stamp(end) {
                    end != txn_stamp(self.txn)
                } else {
                    end > self.ts
                })
    }
}

/// Hands out commit timestamps and keeps the stable watermark: the largest timestamp T such that
/// every commit with timestamp <= T has finished stamping. New snapshots read the watermark, so a
/// half-stamped commit is never half visible.
pub(crate) struct CommitClock {
    queue: Mutex<CommitQueue>,
    stable_ts: AtomicU64,
}

struct CommitQueue {
    next_ts: CommitTs,
    /// Commits that took a timestamp, in timestamp order, with where their redo record starts
    /// in the log and whether they finished.
    in_flight: VecDeque<InFlightCommit>,
}

struct InFlightCommit {
    ts: CommitTs,
    log_pos: u64,
    /// Where replay must start for this commit: its record, or its first record logged ahead
    /// of the commit. Kept after the commit finishes stamping until the watermark passes it
    /// (a checkpoint cut while an earlier commit still stamps does not see this one).
    replay_from: u64,
    finished: bool,
}

impl CommitClock {
    fn new() -> CommitClock {
        CommitClock {
            queue: Mutex::new(CommitQueue {
                next_ts: 1,
                in_flight: VecDeque::new(),
            }),
            stable_ts: AtomicU64::new(0),
        }
    }

    pub(crate) fn stable(&self) -> CommitTs {
        self.stable_ts.load(Ordering::Acquire)
    }

    /// The newest timestamp handed to a commit; commits at or below it may still be stamping
    /// their versions (`stable` waits for them).
    pub(crate) fn newest_issued(&self) -> CommitTs {
        self.queue.lock().next_ts - 1
    }

    /// Takes the next timestamp for a commit whose redo record starts at `log_pos` (0 when
    /// nothing is logged), and whose records logged ahead of it start at `early_from`.
    fn begin_commit(&self, log_pos: u64, early_from: Option<u64>) -> CommitTs {
        let mut q = self.queue.lock();
        let ts = q.next_ts;
        q.next_ts += 1;
        debug_assert!(
            q.in_flight.back().is_none_or(|c| c.log_pos <= log_pos),
            "log order must follow timestamp order"
        );
        q.in_flight.push_back(InFlightCommit {
            ts,
            log_pos,
            replay_from: early_from.map_or(log_pos, |e| e.min(log_pos)),
            finished: false,
        });
        ts
    }

    /// Where the oldest commit that has not finished stamping starts in the log (every commit
    /// record before it belongs to a commit a new snapshot sees), and where replay must start
    /// for the commits a new snapshot does not see (earlier when one logged records ahead).
    fn unfinished_log_bounds(&self) -> Option<(u64, u64)> {
        let q = self.queue.lock();
        // Finished commits leave the front at once, so the front is the oldest unfinished.
        let first = q.in_flight.front()?;
        debug_assert!(!first.finished);
        let replay_from = q.in_flight.iter().map(|c| c.replay_from).min();
        Some((first.log_pos, replay_from.unwrap_or(first.log_pos)))
    }

    /// Recovery: the next commit takes `ts + 1`, and snapshots see everything up to `ts`.
    fn restart_at(&self, ts: CommitTs) {
        let mut q = self.queue.lock();
        assert!(
            q.in_flight.is_empty(),
            "restarting the clock under running commits"
        );
        q.next_ts = ts + 1;
        self.stable_ts.store(ts, Ordering::Release);
    }

    /// Marks `ts` finished and advances the watermark past every finished prefix.
    fn finish_commit(&self, ts: CommitTs) {
        let mut q = self.queue.lock();
        let front = q
            .in_flight
            .front()
            .expect("finishing a commit that never began")
            .ts;
        let slot = &mut q.in_flight[(ts - front) as usize];
        debug_assert_eq!(slot.ts, ts);
        slot.finished = true;
        while q.in_flight.front().is_some_and(|c| c.finished) {
            q.in_flight.pop_front();
        }
        let stable = match q.in_flight.front() {
            Some(first_unfinished) => first_unfinished.ts - 1,
            None => q.next_ts - 1,
        };
        debug_assert!(
            stable >= self.stable_ts.load(Ordering::Relaxed),
            "watermark went back"
        );
        self.stable_ts.store(stable, Ordering::Release);
    }
}

/// Log positions of a checkpoint cut: every commit, catalog and sequence record before
/// `covered` is in the state a snapshot taken now sees; replay must still read from `start`
/// (at or before `covered`) for the records running or stamping transactions logged ahead of
/// their commits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplayBounds {
    pub covered: u64,
    pub start: u64,
}

/// One change handed to the redo sink at commit, in the order the transaction made them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RedoChange<'a> {
    pub table: TableId,
    pub kind: ChangeKind,
    /// The table's hidden row id of the changed row (stable for the row's life).
    pub row_id: u64,
    /// Insert/update: the new row (row_codec bytes). Delete: the deleted version, so the log can
    /// extract its key.
    pub row: &'a [u8],
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    Insert,
    Update,
    Delete,
}

/// Where committed changes go before they become visible: the redo log. An error aborts the
/// transaction with `StorageError::CommitFailed`.
pub trait RedoSink: Send + Sync {
    /// Appends one commit's changes. Calls `take_ts` exactly once, with the position the record
    /// starts at, while no other record can be appended: log order is then commit-timestamp
    /// order, which recovery and checkpoints rely on. Returns the log position the commit is
    /// durable at once the log is flushed that far.
    /// With `early`, the transaction's first `early.writes` row changes are already in the log
    /// (see `log_row_changes`) and `changes` holds the rest.
    fn log_commit(
        &self,
        take_ts: &mut dyn FnMut(u64) -> CommitTs,
        changes: &[RedoChange<'_>],
        early: Option<EarlyRedo>,
    ) -> Result<u64, String>;

    /// Logs row changes of a running transaction ahead of its commit (its writes from number
    /// `first_write` on), as the next record of the transaction's chain: `chain` is None for its
    /// first record. Calls `pin` with the position the record starts at while no other record
    /// can be appended. Returns the chain's position, which the commit then names, and the
    /// record's end position, or None when this sink logs row changes only inside commit
    /// records.
    fn log_row_changes(
        &self,
        _chain: Option<u64>,
        _first_write: u64,
        _changes: &[RedoChange<'_>],
        _pin: &mut dyn FnMut(u64),
    ) -> Result<Option<(u64, u64)>, String> {
        Ok(None)
    }

    /// Logs the image of a column segment a running transaction appended, ahead of its commit
    /// (whose record then names the segment with an empty image). Calls `pin` with the position
    /// the record starts at while no other record can be appended (so no checkpoint can start
    /// in between). Returns the record's end position, or None when this sink logs segments
    /// only inside commit records.
    fn log_segment(
        &self,
        _table: TableId,
        _row_id: u64,
        _image: &[u8],
        _pin: &mut dyn FnMut(u64),
    ) -> Result<Option<u64>, String> {
        Ok(None)
    }

    /// Logs that a rolled-back transaction will never commit its row-change chain (`chain`)
    /// or the column segments (table, first row id) it logged ahead of its commit. Advisory:
    /// recovery drops such writes at the end of the log anyway, but a standby applying the log
    /// as it comes never reaches an end.
    fn log_abandoned(&self, _chain: Option<u64>, _segments: &[(TableId, u64)]) {}

    /// Waits until the log from `from` to `end` is durable, and fails if any of it was lost
    /// (a write dropped for a full disk): checked for a transaction's records logged ahead of
    /// its commit before the commit record names them.
    fn wait_durable(&self, _from: u64, _end: u64) -> Result<(), String> {
        Ok(())
    }
}

/// One write of a transaction, kept for stamping at commit, undo at rollback and redo.
pub(crate) struct WriteEntry {
    pub table: TableId,
    pub chain: RowRef,
    pub kind: ChangeKind,
    /// The bytes the write left (an insert's or update's new version, a delete's last one),
    /// a version of `chain`: read them with [`WriteEntry::row_bytes`].
    pub row: VersionData,
}

impl WriteEntry {
    pub fn row_bytes(&self) -> &[u8] {
        self.chain.bytes(&self.row)
    }
}

struct SavepointMark {
    name: String,
    writes_len: usize,
    column_writes_len: usize,
    locks_len: usize,
}

const SNAPSHOT_SHARDS: usize = 16;

/// State shared by the database, its tables and its transactions.
pub(crate) struct TxnShared {
    next_txn_id: AtomicU64,
    pub(crate) clock: CommitClock,
    /// Snapshot timestamp each transaction may still read at; min of these is the GC horizon.
    snapshots: Box<[Mutex<HashMap<TxnId, CommitTs>>]>,
    waits: Mutex<WaitGraph>,
    /// Signalled whenever a row lock waiter leaves its row's queue (`waits.row_queues`).
    row_turns: tokio::sync::Notify,
    /// How many waiters `waits.other_lock_holders` holds (stored under that lock).
    noted_waiters: AtomicUsize,
    pub(crate) redo_sink: RwLock<Option<Arc<dyn RedoSink>>>,
    /// Running transactions that logged column segments or row changes ahead of their commit,
    /// with a log position at or before their first such record: a checkpoint replays from
    /// there.
    early_log_pins: Mutex<HashMap<TxnId, u64>>,
    /// Unlogged row redo after which a transaction logs it ahead of its commit.
    pub(crate) early_redo_bytes: AtomicUsize,
    /// Last horizon computed by GC. Writers prune versions dead below it while they hold a
    /// chain anyway; it only ever lags the true horizon, which keeps that safe.
    pub(crate) gc_horizon_ts: AtomicU64,
    table_writes: Mutex<TableWrites>,
    pub(crate) memory: crate::memory_budget::MemoryBudget,
    pub(crate) gc_totals: crate::gc::GcTotals,
}

impl TxnShared {
    pub(crate) fn new() -> TxnShared {
        TxnShared {
            next_txn_id: AtomicU64::new(1),
            clock: CommitClock::new(),
            snapshots: (0..SNAPSHOT_SHARDS)
                .map(|_| Mutex::new(HashMap::new()))
                .collect(),
            waits: Mutex::new(WaitGraph::default()),
            row_turns: tokio::sync::Notify::new(),
            noted_waiters: AtomicUsize::new(0),
            redo_sink: RwLock::new(None),
            early_log_pins: Mutex::new(HashMap::new()),
            early_redo_bytes: AtomicUsize::new(EARLY_REDO_BYTES_DEFAULT),
            gc_horizon_ts: AtomicU64::new(0),
            table_writes: Mutex::new(TableWrites::default()),
            memory: Default::default(),
            gc_totals: Default::default(),
        }
    }

    pub(crate) fn begin(self: &Arc<Self>, isolation: IsolationLevel) -> Transaction {
        Transaction {
            id: self.next_txn_id.fetch_add(1, Ordering::Relaxed),
            isolation,
            shared: self.clone(),
            snapshot: None,
            done: None,
            writes: Vec::new(),
            column_writes: Vec::new(),
            locks: Vec::new(),
            table_locks: Vec::new(),
            savepoints: Vec::new(),
            early: EarlyRowRedo::default(),
            early_log_end: 0,
            finished: false,
            tables_read: Vec::new(),
        }
    }

    fn snapshot_shard(&self, txn: TxnId) -> &Mutex<HashMap<TxnId, CommitTs>> {
        &self.snapshots[txn as usize % SNAPSHOT_SHARDS]
    }

    /// Takes a snapshot timestamp and publishes it for GC in one step: the watermark is read
    /// under the shard lock, so a GC pass that misses this entry read an older watermark.
    fn register_snapshot(&self, txn: TxnId) -> CommitTs {
        let mut shard = self.snapshot_shard(txn).lock();
        let ts = self.clock.stable();
        shard.insert(txn, ts);
        ts
    }

    fn unregister_snapshot(&self, txn: TxnId) {
        self.snapshot_shard(txn).lock().remove(&txn);
    }

    /// Oldest timestamp any running or future snapshot can read at.
    pub(crate) fn oldest_active_snapshot(&self) -> CommitTs {
        // Read the watermark first: a snapshot registered after we pass its shard reads a
        // watermark at least this large.
        let mut oldest = self.clock.stable();
        for shard in self.snapshots.iter() {
            if let Some(&min) = shard.lock().values().min() {
                oldest = oldest.min(min);
            }
        }
        oldest
    }

    pub(crate) fn table_written_since(&self, table: TableId, ts: CommitTs) -> bool {
        let table_writes = self.table_writes.lock();
        table_writes
            .last_commit
            .get(&table)
            .is_some_and(|&last| last > ts)
            || table_writes.committing.get(&table).is_some_and(|&n| n > 0)
    }

    pub(crate) fn statement_snapshot(&self, txn: &mut Transaction) -> Snapshot {
        debug_assert!(!txn.finished);
        if txn.isolation.keeps_snapshot() {
            if let Some(s) = txn.snapshot {
                return s;
            }
        }
        let s = Snapshot {
            ts: self.register_snapshot(txn.id),
            txn: txn.id,
        };
        txn.snapshot = Some(s);
        s
    }

    /// First half of a commit: takes the commit timestamp and logs the redo record. The
    /// versions stay unstamped (invisible) and the locks held until `finish_commit`, which the
    /// caller runs once the record is durable enough for it. Returns the timestamp and the log
    /// position to wait for; read-only transactions end at once and return their snapshot's
    /// timestamp and no position.
    pub(crate) fn prepare_commit(
        &self,
        txn: &mut Transaction,
    ) -> Result<(CommitTs, Option<u64>), StorageError> {
        assert!(!txn.finished, "transaction already ended");
        txn.finished = true;
        if !txn.has_writes() {
            // Read-only (maybe with row locks): nothing to stamp, no timestamp needed.
            let ts = txn.snapshot.map_or_else(|| self.clock.stable(), |s| s.ts);
            self.end(txn);
            return Ok((ts, None));
        }
        let written = txn.written_tables();
        let mut table_writes = self.table_writes.lock();
        if txn.isolation == IsolationLevel::Serializable {
            // Never read: nothing to check (reads take a snapshot first).
            let snapshot_ts = txn.snapshot.map_or(CommitTs::MAX, |s| s.ts);
            let changed_since_read = txn.tables_read.iter().any(|t| {
                table_writes
                    .last_commit
                    .get(t)
                    .is_some_and(|&ts| ts > snapshot_ts)
                    || table_writes.committing.get(t).is_some_and(|&n| n > 0)
            });
            if changed_since_read {
                drop(table_writes);
                self.undo_all_writes(txn);
                self.end(txn);
                return Err(StorageError::SerializationFailure);
            }
        }
        for t in &written {
            *table_writes.committing.entry(*t).or_default() += 1;
        }
        // A serializable commit keeps the check-in closed until it has its timestamp, so every
        // writer that checks in after its check gets a later one.
        let held = match txn.isolation {
            IsolationLevel::Serializable => Some(table_writes),
            _ => {
                drop(table_writes);
                None
            }
        };
        let check_out =
            |ts: Option<CommitTs>, held: Option<parking_lot::MutexGuard<'_, TableWrites>>| {
                let mut table_writes = held.unwrap_or_else(|| self.table_writes.lock());
                for t in &written {
                    if let Some(n) = table_writes.committing.get_mut(t) {
                        *n -= 1;
                    }
                    if let Some(ts) = ts {
                        let last = table_writes.last_commit.entry(*t).or_default();
                        *last = (*last).max(ts);
                    }
                }
            };
        let sink = self.redo_sink.read().clone();
        let Some(sink) = sink else {
            let ts = self.clock.begin_commit(0, None);
            check_out(Some(ts), held);
            return Ok((ts, None));
        };
        // Column inserts are logged as whole segments (Arrow IPC), column deletes by row id.
        // A segment logged ahead of the commit is named with an empty image.
        let segment_images: Vec<Vec<u8>> = txn
            .column_writes
            .iter()
            .map(|w| match w {
                ColumnWrite::Insert {
                    segment,
                    logged_early: false,
                    ..
                } => segment.image(),
                ColumnWrite::Insert { .. } | ColumnWrite::Delete { .. } => Vec::new(),
            })
            .collect();
        // Row writes logged ahead of the commit are named, not repeated.
        let (early, first_unlogged) = txn.early.for_commit();
        let mut changes: Vec<RedoChange<'_>> = txn.writes[first_unlogged..]
            .iter()
            .map(redo_change)
            .collect();
        changes.extend(
            txn.column_writes
                .iter()
                .zip(&segment_images)
                .map(|(w, image)| {
                    let (kind, row_id) = match w {
                        ColumnWrite::Insert { segment, .. } => {
                            (ChangeKind::Insert, column::row_id(segment.no, 0))
                        }
                        ColumnWrite::Delete {
                            segment, offset, ..
                        } => (ChangeKind::Delete, column::row_id(segment.no, *offset)),
                    };
                    RedoChange {
                        table: w.table_id(),
                        kind,
                        row_id,
                        row: image,
                    }
                }),
        );
        // Records logged ahead of the commit must all be in the log before the commit record
        // that names them: a batch dropped for a full disk would leave the commit naming a hole.
        let early_range = self.early_log_range(txn);
        let early_checked = match early_range {
            Some((from, end)) => sink.wait_durable(from, end),
            None => Ok(()),
        };
        let early_from = early_range.map(|(from, _)| from);
        let mut ts = None;
        let logged = early_checked.and_then(|()| {
            sink.log_commit(
                &mut |log_pos| *ts.insert(self.clock.begin_commit(log_pos, early_from)),
                &changes,
                early,
            )
        });
        drop(changes);
        check_out(ts.filter(|_| logged.is_ok()), held);
        match (logged, ts) {
            (Ok(pos), Some(ts)) => Ok((ts, Some(pos))),
            (Ok(_), None) => unreachable!("redo sink did not take a commit timestamp"),
            (Err(msg), ts) => {
                self.undo_all_writes(txn);
                if let Some(ts) = ts {
                    self.clock.finish_commit(ts);
                }
                self.end(txn);
                Err(StorageError::CommitFailed(msg))
            }
        }
    }

    /// Second half of a commit: stamps the versions with `ts`, releases locks, wakes waiters.
    pub(crate) fn finish_commit(&self, txn: &mut Transaction, ts: CommitTs) {
        debug_assert!(txn.finished);
        let mut last: Option<*const crate::table::RowChain> = None;
        for w in &txn.writes {
            // Consecutive writes to one row stamp it once.
            if last != Some(RowRef::as_ptr(&w.chain)) {
                w.chain.stamp(txn.id, ts);
                last = Some(RowRef::as_ptr(&w.chain));
            }
        }
        for w in &txn.column_writes {
            w.stamp(txn.id, ts);
        }
        self.clock.finish_commit(ts);
        self.end(txn);
    }

    /// Ends a prepared commit whose redo record could not be made durable: its changes are
    /// undone, as if it had rolled back.
    pub(crate) fn abort_prepared(&self, txn: &mut Transaction, ts: CommitTs) {
        debug_assert!(txn.finished);
        self.undo_all_writes(txn);
        self.clock.finish_commit(ts);
        self.end(txn);
    }

    /// What a checkpoint cut now covers, as log positions: see [`ReplayBounds`].
    pub(crate) fn replay_bounds(&self, log_end: u64) -> ReplayBounds {
        let (covered, commits_from) = self
            .clock
            .unfinished_log_bounds()
            .unwrap_or((log_end, log_end));
        let early = self.early_log_pins.lock().values().min().copied();
        let start = early.map_or(commits_from, |e| e.min(commits_from));
        debug_assert!(start <= covered);
        ReplayBounds { covered, start }
    }

    /// See `Database::early_log_range`.
    pub(crate) fn early_log_range(&self, txn: &Transaction) -> Option<(u64, u64)> {
        let from = self.early_log_pins.lock().get(&txn.id).copied()?;
        (txn.early_log_end > from).then_some((from, txn.early_log_end))
    }

    /// Keeps the log from `pos` on for a checkpoint's replay until `txn` ends (a no-op if the
    /// transaction pinned an earlier position already).
    pub(crate) fn pin_log(&self, txn: TxnId, pos: u64) {
        self.early_log_pins.lock().entry(txn).or_insert(pos);
    }

    pub(crate) fn has_early_log_pins(&self) -> bool {
        !self.early_log_pins.lock().is_empty()
    }

    /// See `Database::log_segment_early`.
    pub(crate) fn log_segment_early(
        &self,
        txn: &mut Transaction,
        table: TableId,
        segment_no: u32,
    ) -> Result<(), StorageError> {
        let Some(sink) = self.redo_sink.read().clone() else {
            return Ok(());
        };
        let write = txn.column_writes.iter_mut().rev().find(|w| {
            matches!(w, ColumnWrite::Insert { table: t, segment, .. }
                if t.id() == table && segment.no == segment_no)
        });
        let Some(ColumnWrite::Insert {
            segment,
            logged_early,
            ..
        }) = write
        else {
            panic!("segment {segment_no} of table {table} is not this transaction's");
        };
        if *logged_early {
            return Ok(());
        }
        let image = segment.image();
        let row_id = column::row_id(segment_no, 0);
        // The pin is taken under the log's append lock, as checkpoints read the pins.
        let txn_id = txn.id;
        let logged = sink.log_segment(table, row_id, &image, &mut |pos| self.pin_log(txn_id, pos));
        match logged {
            Ok(end) => {
                *logged_early = end.is_some();
                txn.early_log_end = txn.early_log_end.max(end.unwrap_or(0));
                Ok(())
            }
            Err(msg) => Err(StorageError::CommitFailed(msg)),
        }
    }

    /// Tells the log that `chain` and the column segments after `keep_column` that `txn`
    /// logged ahead of its commit will never be committed (see `RedoSink::log_abandoned`).
    fn log_abandoned(&self, txn: &Transaction, chain: Option<u64>, keep_column: usize) {
        let segments: Vec<(TableId, u64)> = txn.column_writes[keep_column..]
            .iter()
            .filter_map(|w| match w {
                ColumnWrite::Insert {
                    table,
                    segment,
                    logged_early: true,
                } => Some((table.id(), column::row_id(segment.no, 0))),
                _ => None,
            })
            .collect();
        if chain.is_none() && segments.is_empty() {
            return;
        }
        if let Some(sink) = self.redo_sink.read().clone() {
            sink.log_abandoned(chain, &segments);
        }
    }

    pub(crate) fn restart_clock_at(&self, ts: CommitTs) {
        self.clock.restart_at(ts)
    }

    pub(crate) fn rollback(&self, txn: &mut Transaction) {
        assert!(!txn.finished, "transaction already ended");
        txn.finished = true;
        self.undo_all_writes(txn);
        self.end(txn);
    }

    /// Undoes all writes of a transaction that ends without committing (newest first: a row's
    /// own versions form a stack), and tells the log what it logged ahead of its commit.
    fn undo_all_writes(&self, txn: &mut Transaction) {
        let chain = txn.early.chain();
        self.log_abandoned(txn, chain, 0);
        self.undo_writes_to(txn, 0, 0);
    }

    /// Undoes row writes after `keep` and column writes after `keep_column`.
    fn undo_writes_to(&self, txn: &mut Transaction, keep: usize, keep_column: usize) {
        for w in txn.writes.drain(keep..).rev() {
            w.chain.undo(w.kind, txn.id);
        }
        for w in txn.column_writes.drain(keep_column..).rev() {
            w.undo();
        }
    }

    fn release_locks(&self, txn: &mut Transaction, keep: usize) {
        for (chain, mode) in txn.locks.drain(keep..) {
            chain.unlock(txn.id, mode);
        }
    }

    /// Releases locks, wakes waiters and forgets the transaction. Versions are already stamped
    /// or undone, so a woken waiter sees the outcome.
    fn end(&self, txn: &mut Transaction) {
        self.release_locks(txn, 0);
        self.early_log_pins.lock().remove(&txn.id);
        // Column-table write locks are held to the end, also past ROLLBACK TO SAVEPOINT.
        for table in txn.table_locks.drain(..) {
            table.unlock(txn.id);
        }
        if let Some(done) = txn.done.take() {
            self.forget_writer(txn.id);
            done.finish();
        }
        if txn.snapshot.is_some() {
            self.unregister_snapshot(txn.id);
        }
    }

    pub(crate) fn savepoint(&self, txn: &mut Transaction, name: &str) {
        txn.savepoints.push(SavepointMark {
            name: name.to_string(),
            writes_len: txn.writes.len(),
            column_writes_len: txn.column_writes.len(),
            locks_len: txn.locks.len(),
        });
    }

    pub(crate) fn rollback_to_savepoint(
        &self,
        txn: &mut Transaction,
        name: &str,
    ) -> Result<(), StorageError> {
        let at = txn.find_savepoint(name)?;
        let mark = &txn.savepoints[at];
        let (writes_len, column_writes_len, locks_len) =
            (mark.writes_len, mark.column_writes_len, mark.locks_len);
        txn.savepoints.truncate(at + 1);
        // The row chain goes on (its next record replaces what followed the savepoint).
        self.log_abandoned(txn, None, column_writes_len);
        self.undo_writes_to(txn, writes_len, column_writes_len);
        txn.early.rolled_back(&txn.writes);
        self.release_locks(txn, locks_len);
        Ok(())
    }

    pub(crate) fn release_savepoint(
        &self,
        txn: &mut Transaction,
        name: &str,
    ) -> Result<(), StorageError> {
        let at = txn.find_savepoint(name)?;
        txn.savepoints.truncate(at);
        Ok(())
    }
}

/// A running transaction. End it with `Database::commit` or `Database::rollback`; dropping it
/// unended rolls it back, so a lost session never leaves rows locked.
pub struct Transaction {
    id: TxnId,
    isolation: IsolationLevel,
    shared: Arc<TxnShared>,
    /// REPEATABLE READ: the transaction's snapshot. READ COMMITTED: the current statement's.
    snapshot: Option<Snapshot>,
    /// Set once the transaction writes or locks something: what others wait on.
    done: Option<Arc<TxnDone>>,
    pub(crate) writes: Vec<WriteEntry>,
    pub(crate) column_writes: Vec<ColumnWrite>,
    pub(crate) locks: Vec<(RowRef, crate::table::RowLockMode)>,
    /// Column tables whose write lock this transaction holds.
    pub(crate) table_locks: Vec<Arc<ColumnTable>>,
    savepoints: Vec<SavepointMark>,
    /// How much of `writes` is logged ahead of the commit.
    pub(crate) early: EarlyRowRedo,
    /// End position of the last record this transaction logged ahead of its commit (row
    /// changes or a column segment), 0 if none.
    pub(crate) early_log_end: u64,
    finished: bool,
    /// Tables the transaction read, as its caller named them (SERIALIZABLE's commit check).
    tables_read: Vec<TableId>,
}

impl Transaction {
    pub fn id(&self) -> TxnId {
        self.id
    }

    /// Whether another transaction is waiting for this one to end (for a row it wrote or
    /// locked) right now.
    pub fn is_waited_for(&self) -> bool {
        self.done.as_ref().is_some_and(|d| d.is_waited_for())
    }

    pub fn isolation(&self) -> IsolationLevel {
        self.isolation
    }

    /// True while the transaction has neither written nor locked anything.
    pub fn is_read_only_so_far(&self) -> bool {
        !self.has_writes() && self.locks.is_empty() && self.table_locks.is_empty()
    }

    /// How many writes the commit will log and stamp (row versions and column-table changes).
    pub fn write_count(&self) -> usize {
        self.writes.len() + self.column_writes.len()
    }

    /// Names tables the transaction has read, for a SERIALIZABLE transaction's commit check.
    pub fn note_reads(&mut self, tables: impl IntoIterator<Item = TableId>) {
        for t in tables {
            if !self.tables_read.contains(&t) {
                self.tables_read.push(t);
            }
        }
    }

    /// The tables the transaction wrote (row and column tables), each once.
    fn written_tables(&self) -> Vec<TableId> {
        let mut tables: Vec<TableId> = Vec::new();
        let mut last = None;
        let ids = self
            .writes
            .iter()
            .map(|w| w.table)
            .chain(self.column_writes.iter().map(|w| w.table_id()));
        for t in ids {
            // Writes come in runs per table: skip the repeats cheaply.
            if last != Some(t) && !tables.contains(&t) {
                tables.push(t);
            }
            last = Some(t);
        }
        tables
    }

    /// Whether the transaction has written rows of this row table.
    pub fn writes_table(&self, table: TableId) -> bool {
        self.writes.iter().any(|w| w.table == table)
    }

    /// Whether the transaction changed anything (what a commit must log and stamp).
    pub(crate) fn has_writes(&self) -> bool {
        !self.writes.is_empty() || !self.column_writes.is_empty()
    }

    /// The snapshot of the current statement (READ COMMITTED) or transaction (REPEATABLE READ),
    /// if one was taken.
    pub fn current_snapshot(&self) -> Option<Snapshot> {
        self.snapshot
    }

    /// Records a row write (for stamping, undo and redo).
    pub(crate) fn push_write(&mut self, write: WriteEntry) {
        self.early.wrote(&write);
        self.writes.push(write);
    }

    pub(crate) fn shared(&self) -> &Arc<TxnShared> {
        &self.shared
    }

    fn find_savepoint(&self, name: &str) -> Result<usize, StorageError> {
        // The newest savepoint of that name wins, as in PostgreSQL.
        self.savepoints
            .iter()
            .rposition(|s| s.name == name)
            .ok_or_else(|| StorageError::NoSuchSavepoint(name.to_string()))
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        if !self.finished {
            let shared = self.shared.clone();
            shared.rollback(self);
        }
    }
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("id", &self.id)
            .field("isolation", &self.isolation)
            .field("writes", &self.writes.len())
            .field("locks", &self.locks.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visibility_rule() {
        let s = Snapshot { ts: 10, txn: 7 };
        assert!(s.sees(5, END_UNSET));
        assert!(s.sees(10, END_UNSET));
        assert!(!s.sees(11, END_UNSET));
        assert!(s.sees(5, 11), "deleted after the snapshot");
        assert!(!s.sees(5, 10), "deleted at the snapshot");
        assert!(s.sees(txn_stamp(7), END_UNSET), "own insert");
        assert!(
            !s.sees(txn_stamp(8), END_UNSET),
            "other's uncommitted insert"
        );
        assert!(s.sees(5, txn_stamp(8)), "other's uncommitted delete");
        assert!(!s.sees(5, txn_stamp(7)), "own delete");
        assert!(
            !s.sees(txn_stamp(7), txn_stamp(7)),
            "own insert then own delete"
        );
    }

    #[test]
    fn watermark_waits_for_earlier_commits() {
        let c = CommitClock::new();
        let a = c.begin_commit(0, None);
        let b = c.begin_commit(0, None);
        c.finish_commit(b);
        assert_eq!(
            c.stable(),
            a - 1,
            "b finished first but a is still stamping"
        );
        c.finish_commit(a);
        assert_eq!(c.stable(), b);
    }
}
