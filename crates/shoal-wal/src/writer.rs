//! The append side of the log: `Wal` hands out LSNs, encodes records into one shared in-memory
//! buffer under a single lock (so log order is commit order), and lets committers wait until
//! their record is durable. The I/O itself happens on the log-writer thread (see `flusher`),
//! which takes the whole buffer at once: that is group commit, one write and one fdatasync for
//! every transaction that arrived while the previous batch was being synced.

use std::collections::VecDeque;
use std::fs;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::Instant;

use parking_lot::{Condvar, Mutex, MutexGuard};
use shoal_storage::{CommitTs, EarlyRedo, RedoChange, TableId};

use crate::error::WalError;
use crate::flusher::{self, SegmentWriter};
use crate::record::{self, Record, RECORD_PAYLOAD_MAX_BYTES, TABLE_IMAGE_CHUNK_BYTES};
use crate::segment::{self, BATCH_HEADER_BYTES, SEGMENT_HEADER_BYTES, WAL_DIR_NAME};
use crate::Lsn;

/// Tuning of a `Wal`.
#[derive(Clone, Debug)]
pub struct WalOptions {
    /// A new segment file is started once the current one has reached this size. Records never
    /// span segments, so a segment can exceed it by one batch.
    pub segment_size_bytes: u64,
    /// Records nobody waits for (synchronous_commit = off) are written at most this long after
    /// they were appended.
    pub flush_delay_ms_async: u64,
    /// Bound on appended but not yet taken bytes: appenders block until the writer has taken the
    /// buffer. Memory is at most about twice this (the buffer plus the batch being written).
    pub buffer_bytes_max: usize,
    /// How far ahead of the write position a segment is zero-filled at a time. Each step costs
    /// one write of this many zeros and one sync, a pause of tens of milliseconds every few MiB
    /// of log; the zero-filled space ahead is also what commits may be made visible early in
    /// (see `grant_early_release`). Tests on a small file system set it small.
    pub zero_fill_step_bytes: u64,
    /// Fault injection for tests: after this many batches synced, the next batch's fdatasync
    /// fails as if the device had returned EIO. There is no portable way to make a real file
    /// system fail an fsync on demand; None (the default) everywhere else.
    #[doc(hidden)]
    pub fail_batch_sync_after: Option<u64>,
    /// Fault injection for tests: the writer pauses this long after each batch's fdatasync
    /// before it publishes the batch as durable, so a test can act while a commit is logged but
    /// not yet acknowledged. Zero (the default) everywhere else.
    #[doc(hidden)]
    pub hold_batch_sync_ms: u64,
    /// Archiving is on: `remove_segments_before` keeps segments not yet archived (see
    /// `archive`).
    pub keep_unarchived: bool,
}

impl Default for WalOptions {
    fn default() -> Self {
        WalOptions {
            segment_size_bytes: 64 << 20,
            flush_delay_ms_async: 10,
            buffer_bytes_max: 64 << 20,
            zero_fill_step_bytes: 16 << 20,
            fail_batch_sync_after: None,
            hold_batch_sync_ms: 0,
            keep_unarchived: false,
        }
    }
}

/// Counters of a `Wal` since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WalStats {
    /// Records written and synced.
    pub records: u64,
    /// Bytes written and synced, frames and segment headers excluded.
    pub bytes: u64,
    /// fdatasync calls on segment files.
    pub flushes: u64,
    /// Batches handed to the file system (written or dropped).
    pub batches: u64,
    /// Batches dropped because the disk was full.
    pub dropped_batches: u64,
    /// Segments started in a file a helper thread had zero-filled ahead (the others were
    /// zero-filled by the writer as it went).
    pub preallocated_segments: u64,
    /// Time spent in those fdatasync calls, in microseconds.
    pub sync_time_us: u64,
}

/// The write-ahead log, open for appending. `Send + Sync`; share it behind an `Arc`.
pub struct Wal {
    shared: Arc<Shared>,
    writer: Mutex<Option<JoinHandle<()>>>,
    wal_dir: PathBuf,
}

/// State shared between appenders, waiters and the writer thread. Lock order: `pending` before
/// `progress`; the writer never holds `progress` while taking `pending`.
pub(crate) struct Shared {
    pub opts: WalOptions,
    pub pending: Mutex<Pending>,
    /// Wakes the writer: the buffer became non-empty, someone waits, or shutdown.
    pub writer_wake: Condvar,
    /// Wakes appenders blocked on a full buffer.
    pub space_freed: Condvar,
    pub progress: Mutex<Progress>,
    /// Wakes blocking waiters when `progress` changed.
    pub progress_changed: Condvar,
    /// Ids for `Progress::async_waiters`.
    pub next_waiter_id: AtomicU64,
    pub broken: AtomicBool,
    pub durable_lsn: AtomicU64,
    /// Records ending at or below this LSN land in zero-filled space of the current segment,
    /// so their write cannot fail for a full disk (see `SegmentWriter::room_end_lsn`).
    pub room_end_lsn: AtomicU64,
    pub next_lsn: AtomicU64,
    pub current_segment_base_lsn: AtomicU64,
    /// `switch_segment` asks the writer to start a new segment with its next batch.
    pub switch_requested: AtomicBool,
    pub stats: StatCounters,
    /// False on a standby's log (`open_replicated`) until `start_appends_at`: the primary
    /// writes the group's log, a standby only applies it.
    pub accepting: AtomicBool,
}

impl Shared {
    fn new(start_lsn: Lsn, opts: WalOptions, accepting: bool) -> Shared {
        let mut buf = Vec::with_capacity(BATCH_HEADER_BYTES + (1 << 16));
        buf.resize(BATCH_HEADER_BYTES, 0);
        Shared {
            pending: Mutex::new(Pending {
                buf,
                start_lsn,
                next_lsn: start_lsn,
                records: 0,
                wanted_lsn: start_lsn,
                oldest_at: None,
                granted_end_lsn: start_lsn,
                shutdown: false,
                last_clock_ms: 0,
            }),
            writer_wake: Condvar::new(),
            space_freed: Condvar::new(),
            progress: Mutex::new(Progress {
                processed_lsn: start_lsn,
                failed: VecDeque::new(),
                broken: None,
                async_waiters: Vec::new(),
            }),
            progress_changed: Condvar::new(),
            next_waiter_id: AtomicU64::new(0),
            broken: AtomicBool::new(false),
            durable_lsn: AtomicU64::new(start_lsn),
            // No room until the writer has zero-filled some: the first batch publishes it.
            room_end_lsn: AtomicU64::new(start_lsn),
            next_lsn: AtomicU64::new(start_lsn),
            current_segment_base_lsn: AtomicU64::new(start_lsn),
            switch_requested: AtomicBool::new(false),
            stats: StatCounters::default(),
            accepting: AtomicBool::new(accepting),
            opts,
        }
    }
}

#[derive(Default)]
pub(crate) struct StatCounters {
    pub records: AtomicU64,
    pub bytes: AtomicU64,
    pub flushes: AtomicU64,
    pub batches: AtomicU64,
    pub dropped_batches: AtomicU64,
    pub preallocated_segments: AtomicU64,
    pub sync_time_us: AtomicU64,
}

/// Records appended but not yet taken by the writer.
pub(crate) struct Pending {
    /// `BATCH_HEADER_BYTES` reserved for the writer's frame header, then encoded records.
    pub buf: Vec<u8>,
    /// LSN of the first record in `buf`.
    pub start_lsn: Lsn,
    /// LSN the next appended record gets; the end of `buf`.
    pub next_lsn: Lsn,
    pub records: u64,
    /// Highest end LSN someone waits for; the writer flushes at once while it is in the buffer.
    pub wanted_lsn: Lsn,
    /// When the first record now in `buf` was appended.
    pub oldest_at: Option<Instant>,
    /// End of the last record granted early release (`Wal::grant_early_release`): the writer
    /// writes the records up to here even if the rest of their batch meets a full disk.
    pub granted_end_lsn: Lsn,
    pub shutdown: bool,
    /// The millisecond (since 1970) of the last `Record::Clock` appended.
    pub last_clock_ms: i64,
}

impl Pending {
    pub fn buffered_bytes(&self) -> usize {
        self.buf.len() - BATCH_HEADER_BYTES
    }
}

/// What the writer has done with the log so far, as waiters see it.
pub(crate) struct Progress {
    /// End of the last batch the writer finished with (written or dropped).
    pub processed_lsn: Lsn,
    /// LSN ranges of dropped batches, ascending, adjacent ones merged.
    pub failed: VecDeque<FailedRange>,
    pub broken: Option<String>,
    /// Async committers waiting for an LSN, each woken only once a batch reaches its LSN (or the
    /// log breaks). A channel that woke every waiter after every batch woke most of them for
    /// nothing, and each wake-up of a task on another thread's runtime is a syscall there and
    /// an epoll return here: ~1.85 such wake-ups per pgbench transaction instead of ~1.
    pub async_waiters: Vec<AsyncWaiter>,
}

pub(crate) struct AsyncWaiter {
    id: u64,
    lsn: Lsn,
    waker: Waker,
}

pub(crate) struct FailedRange {
    pub first_lsn: Lsn,
    pub end_lsn: Lsn,
    pub message: String,
}

/// Bound on remembered failed ranges; beyond it the oldest two are merged, which can only turn a
/// late waiter's success into a (conservative) DiskFull error.
const FAILED_RANGES_MAX: usize = 1024;

impl Progress {
    /// The result for a waiter on the records from `from` to end LSN `lsn` (a record lies
    /// within one batch, so `from = lsn - 1` asks about the record ending at `lsn`), or `None`
    /// if it must keep waiting.
    fn outcome(&self, from: Lsn, lsn: Lsn) -> Option<Result<(), WalError>> {
        if self.processed_lsn >= lsn {
            let failed = self.failed.iter().rev().take_while(|f| f.end_lsn > from);
            return Some(match failed.into_iter().find(|f| f.first_lsn < lsn) {
                Some(f) => Err(WalError::DiskFull(f.message.clone())),
                None => Ok(()),
            });
        }
        self.broken
            .as_ref()
            .map(|m| Err(WalError::Broken(m.clone())))
    }

    /// Registers (or refreshes) waiter `id` for `lsn`.
    fn set_async_waiter(&mut self, id: u64, lsn: Lsn, waker: &Waker) {
        match self.async_waiters.iter_mut().find(|w| w.id == id) {
            Some(w) => w.waker.clone_from(waker),
            None => self.async_waiters.push(AsyncWaiter {
                id,
                lsn,
                waker: waker.clone(),
            }),
        }
    }

    fn remove_async_waiter(&mut self, id: u64) {
        if let Some(at) = self.async_waiters.iter().position(|w| w.id == id) {
            self.async_waiters.swap_remove(at);
        }
    }

    /// Takes out the async waiters that have an outcome now (`outcome` is `Some` for them):
    /// the caller wakes them after dropping the lock.
    pub fn take_decided_waiters(&mut self) -> Vec<Waker> {
        let decided = |w: &AsyncWaiter| w.lsn <= self.processed_lsn || self.broken.is_some();
        if !self.async_waiters.iter().any(decided) {
            return Vec::new();
        }
        let (done, waiting): (Vec<AsyncWaiter>, Vec<AsyncWaiter>) =
            std::mem::take(&mut self.async_waiters)
                .into_iter()
                .partition(decided);
        self.async_waiters = waiting;
        done.into_iter().map(|w| w.waker).collect()
    }

    pub fn record_failure(&mut self, first_lsn: Lsn, end_lsn: Lsn, message: String) {
        match self.failed.back_mut() {
            Some(last) if last.end_lsn == first_lsn => {
                last.end_lsn = end_lsn;
                last.message = message;
            }
            _ => self.failed.push_back(FailedRange {
                first_lsn,
                end_lsn,
                message,
            }),
        }
        if self.failed.len() > FAILED_RANGES_MAX {
            let oldest = self.failed.pop_front().expect("non-empty");
            self.failed[0].first_lsn = oldest.first_lsn;
        }
    }
}

/// Appends a `Record::Clock` ahead of the record about to be appended, if none was appended
/// in the current millisecond of the wall clock (which may step back: then none is).
fn append_clock(p: &mut Pending) {
    let now_micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64);
    let now_ms = now_micros.div_euclid(1000);
    if now_ms <= p.last_clock_ms {
        return;
    }
    p.last_clock_ms = now_ms;
    let record = Record::Clock {
        unix_micros: now_micros,
    };
    let lsn = p.next_lsn;
    let bytes = record::encode_record(
        &mut p.buf,
        lsn,
        record.kind(),
        record.payload_bytes(),
        |buf| record.encode_payload(buf),
    );
    // Not counted in `records`: clock records mark time, the count is of the log's content.
    p.next_lsn += bytes as u64;
}

impl Wal {
    /// Opens the log in `dir/wal` (created if missing) for appending at `start_lsn`, the end LSN
    /// recovery returned (or any LSN for a new database). Appends always go to a new segment; an
    /// existing segment starting after `start_lsn` means recovery was skipped, and is refused.
    pub fn open(dir: &Path, start_lsn: Lsn, opts: WalOptions) -> Result<Wal, WalError> {
        assert!(
            opts.segment_size_bytes > SEGMENT_HEADER_BYTES as u64,
            "segment too small"
        );
        assert!(
            opts.buffer_bytes_max > 0,
            "buffer_bytes_max must be positive"
        );
        let wal_dir = dir.join(WAL_DIR_NAME);
        let io_err = |what: &str, e: &std::io::Error| {
            WalError::from_io(&format!("{what} \"{}\"", wal_dir.display()), e)
        };
        fs::create_dir_all(&wal_dir).map_err(|e| io_err("could not create directory", &e))?;
        segment::sync_dir(dir).map_err(|e| io_err("could not fsync the parent of", &e))?;
        let segments =
            segment::list_segments(&wal_dir).map_err(|e| io_err("could not list", &e))?;
        if let Some((base, path)) = segments.iter().find(|(base, _)| *base > start_lsn) {
            return Err(WalError::Io(format!(
                "segment \"{}\" starts at LSN {base:x}, after the requested start {start_lsn:x}; \
                 recover from the log before opening it for appends",
                path.display()
            )));
        }
        let mut seg = SegmentWriter::create(&wal_dir, start_lsn, opts.segment_size_bytes)
            .map_err(|e| io_err("could not create a segment in", &e))?;
        seg.syncs_before_failure = opts.fail_batch_sync_after;
        seg.zero_fill_step_bytes = opts.zero_fill_step_bytes;
        seg.sync_hold = std::time::Duration::from_millis(opts.hold_batch_sync_ms);
        // A file a crash left half made would hold space the check for room counts as used.
        let _ = fs::remove_file(crate::prealloc::next_segment_path(&wal_dir));
        let shared = Arc::new(Shared::new(start_lsn, opts, true));
        let writer_shared = Arc::clone(&shared);
        let writer = std::thread::Builder::new()
            .name("shoal-wal-writer".into())
            .spawn(move || flusher::run(writer_shared, seg))
            .map_err(|e| WalError::Io(format!("could not start the log writer thread: {e}")))?;
        Ok(Wal {
            shared,
            writer: Mutex::new(Some(writer)),
            wal_dir,
        })
    }

    /// A log whose batches go to `sink` (a replication group) instead of segment files in
    /// `dir/wal`. It takes no appends until `start_appends_at` (the node is a standby until
    /// then). Early lock release is granted for any record in the buffer: a batch is never
    /// dropped here (the sink writes it or the log breaks, and a broken primary restarts), so
    /// a commit others saw is in the group's log before any later commit is acknowledged.
    pub fn open_replicated(
        dir: &Path,
        opts: WalOptions,
        sink: Box<dyn crate::BatchSink>,
    ) -> Result<Wal, WalError> {
        let shared = Arc::new(Shared::new(0, opts, false));
        let writer_shared = Arc::clone(&shared);
        let writer = std::thread::Builder::new()
            .name("shoal-wal-replicated".into())
            .spawn(move || crate::replicated::run(writer_shared, sink))
            .map_err(|e| WalError::Io(format!("could not start the log writer thread: {e}")))?;
        Ok(Wal {
            shared,
            writer: Mutex::new(Some(writer)),
            wal_dir: dir.join(WAL_DIR_NAME),
        })
    }

    /// Opens a replicated log for appends from `lsn`, where the group's log ends (this node
    /// became the primary). Nothing may have been appended before.
    pub fn start_appends_at(&self, lsn: Lsn) {
        let mut p = self.shared.pending.lock();
        assert_eq!(p.buffered_bytes(), 0, "a standby's log holds no appends");
        assert!(
            !self.shared.accepting.load(Ordering::Acquire),
            "appends started twice"
        );
        p.start_lsn = lsn;
        p.next_lsn = lsn;
        p.wanted_lsn = lsn;
        p.granted_end_lsn = lsn;
        self.shared.progress.lock().processed_lsn = lsn;
        self.shared.durable_lsn.store(lsn, Ordering::Release);
        self.shared.room_end_lsn.store(Lsn::MAX, Ordering::Release);
        self.shared.next_lsn.store(lsn, Ordering::Release);
        self.shared
            .current_segment_base_lsn
            .store(lsn, Ordering::Release);
        self.shared.accepting.store(true, Ordering::Release);
    }

    /// Appends the commit record of one transaction. `take_ts` is called with the record's start
    /// LSN while no other record can be appended, so that log order equals commit-timestamp
    /// order. Returns the record's end LSN: the commit is durable once `flushed_lsn()` reaches
    /// it; `wait_flushed` waits for that. Does no I/O.
    pub fn append_commit(
        &self,
        take_ts: impl FnOnce(Lsn) -> CommitTs,
        changes: &[RedoChange<'_>],
        early: Option<EarlyRedo>,
    ) -> Result<Lsn, WalError> {
        let payload_bytes = record::commit_payload_bytes(changes, early);
        let kind = match early {
            None => record::KIND_COMMIT,
            Some(_) => record::KIND_COMMIT_AFTER_EARLY,
        };
        self.append_encoded(kind, payload_bytes, |lsn, buf| {
            record::encode_commit_payload(buf, take_ts(lsn), changes, early)
        })
    }

    /// Appends a `RowChanges` record: writes `first_write..` of a running transaction, ahead of
    /// its commit. `chain` is the LSN of the transaction's first such record, None for the
    /// first one, which then starts the chain at its own LSN. Calls `on_start` with the record's
    /// start LSN while no other record can be appended. Returns the chain's LSN and the
    /// record's end LSN.
    pub fn append_row_changes(
        &self,
        chain: Option<Lsn>,
        first_write: u64,
        changes: &[RedoChange<'_>],
        on_start: impl FnOnce(Lsn),
    ) -> Result<(Lsn, Lsn), WalError> {
        let payload_bytes = record::row_changes_payload_bytes(changes);
        let mut chain_lsn = chain;
        let end = self.append_encoded(record::KIND_ROW_CHANGES, payload_bytes, |lsn, buf| {
            on_start(lsn);
            let chain = *chain_lsn.get_or_insert(lsn);
            record::encode_row_changes_payload(buf, chain, first_write, changes)
        })?;
        Ok((chain_lsn.expect("the record was encoded"), end))
    }

    /// Appends a record of any kind but `Commit` (which goes through `append_commit`) and returns
    /// its end LSN. Whole table images go through `append_table_image`.
    pub fn append(&self, record: &Record<'_>) -> Result<Lsn, WalError> {
        assert!(
            !matches!(record, Record::Commit { .. } | Record::RowChanges { .. }),
            "commits and row changes go through append_commit and append_row_changes"
        );
        self.append_encoded(record.kind(), record.payload_bytes(), |_, buf| {
            record.encode_payload(buf)
        })
    }

    /// Appends a record like `append`, and calls `on_start` with the LSN it starts at while no
    /// other record can be appended.
    pub fn append_noting_start(
        &self,
        record: &Record<'_>,
        on_start: impl FnOnce(Lsn),
    ) -> Result<Lsn, WalError> {
        assert!(
            !matches!(record, Record::Commit { .. } | Record::RowChanges { .. }),
            "commits and row changes go through append_commit and append_row_changes"
        );
        self.append_encoded(record.kind(), record.payload_bytes(), |lsn, buf| {
            on_start(lsn);
            record.encode_payload(buf)
        })
    }

    /// Appends the whole content of `table` as `TableImageBegin`, chunks of about 1 MiB of rows,
    /// and `TableImageEnd`. Returns the end LSN of the `TableImageEnd` record.
    pub fn append_table_image<'r>(
        &self,
        table: TableId,
        rows: impl IntoIterator<Item = (u64, &'r [u8])>,
    ) -> Result<Lsn, WalError> {
        self.append(&Record::TableImageBegin { table })?;
        let mut chunk: Vec<(u64, &[u8])> = Vec::new();
        let mut chunk_bytes = 12;
        for (row_id, row) in rows {
            let row_bytes = record::image_row_bytes(row);
            if !chunk.is_empty() && chunk_bytes + row_bytes > TABLE_IMAGE_CHUNK_BYTES {
                self.append_image_chunk(table, &chunk, chunk_bytes)?;
                chunk.clear();
                chunk_bytes = 12;
            }
            chunk.push((row_id, row));
            chunk_bytes += row_bytes;
        }
        if !chunk.is_empty() {
            self.append_image_chunk(table, &chunk, chunk_bytes)?;
        }
        self.append(&Record::TableImageEnd { table })
    }

    fn append_image_chunk(
        &self,
        table: TableId,
        rows: &[(u64, &[u8])],
        payload_bytes: usize,
    ) -> Result<Lsn, WalError> {
        self.append_encoded(record::KIND_TABLE_IMAGE_ROWS, payload_bytes, |_, buf| {
            record::encode_image_rows_payload(buf, table, rows)
        })
    }

    /// Runs `f` with the LSN the next record will get, while no record can be appended. `f`
    /// must not call back into this `Wal`.
    pub fn with_append_lock<R>(&self, f: impl FnOnce(Lsn) -> R) -> R {
        let pending = self.shared.pending.lock();
        f(pending.next_lsn)
    }

    fn append_encoded(
        &self,
        kind: u8,
        payload_bytes: usize,
        encode: impl FnOnce(Lsn, &mut Vec<u8>),
    ) -> Result<Lsn, WalError> {
        if payload_bytes > RECORD_PAYLOAD_MAX_BYTES {
            return Err(WalError::TooLarge(payload_bytes));
        }
        let mut p = self.lock_for_append()?;
        let was_empty = p.buffered_bytes() == 0;
        append_clock(&mut p);
        let lsn = p.next_lsn;
        let bytes =
            record::encode_record(&mut p.buf, lsn, kind, payload_bytes, |buf| encode(lsn, buf));
        p.next_lsn += bytes as u64;
        p.records += 1;
        if was_empty {
            p.oldest_at = Some(Instant::now());
        }
        self.shared.next_lsn.store(p.next_lsn, Ordering::Release);
        // The writer sleeps without a deadline only while the buffer is empty, and it flushes
        // early at half the bound; other appends need not wake it.
        if was_empty || p.buffered_bytes() >= self.shared.opts.buffer_bytes_max / 2 {
            self.shared.writer_wake.notify_one();
        }
        Ok(p.next_lsn)
    }

    /// Ends the current segment, so that it can be archived (pg_switch_wal): the next batch,
    /// which this forces with a clock record, starts a new one. Returns where the log ended
    /// before the switch; a segment holding no batch is not switched.
    pub fn switch_segment(&self) -> Result<Lsn, WalError> {
        let end = self.next_lsn();
        self.shared.switch_requested.store(true, Ordering::Release);
        let lsn = self.append_clock_now()?;
        self.wait_flushed_blocking(lsn)?;
        Ok(end)
    }

    /// The base LSN of the segment being written.
    pub fn current_segment_base_lsn(&self) -> Lsn {
        self.shared.current_segment_base_lsn.load(Ordering::Acquire)
    }

    /// Appends a clock record now, whatever the time of the last one.
    fn append_clock_now(&self) -> Result<Lsn, WalError> {
        let mut p = self.lock_for_append()?;
        p.last_clock_ms = 0;
        let was_empty = p.buffered_bytes() == 0;
        append_clock(&mut p);
        self.shared.next_lsn.store(p.next_lsn, Ordering::Release);
        if was_empty {
            p.oldest_at = Some(Instant::now());
            self.shared.writer_wake.notify_one();
        }
        Ok(p.next_lsn)
    }

    /// Asks whether the commit whose record ends at `end_lsn` may be made visible, and its row
    /// locks released, before the record is durable (early lock release, as in Shore-MT's
    /// Aether). A transaction that then reads or overwrites its rows commits with a later
    /// record, so its own acknowledgement waits for the same flush; a read-only one waits for
    /// it too (`Durability::released_lsn` in shoal-sql).
    ///
    /// What must never happen is that such a record is dropped while others already build on
    /// it, so a grant is given only while the record is still in the buffer and ends in log
    /// space already zero-filled, where writing it cannot fail for a full disk; the writer
    /// writes the granted records on their own if the rest of their batch does not fit. A
    /// granted record can still miss the disk if the log breaks (a failed write or fdatasync),
    /// which stops all writes, as PostgreSQL stops on a failed WAL fsync.
    pub fn grant_early_release(&self, end_lsn: Lsn) -> bool {
        let mut p = self.shared.pending.lock();
        let in_buffer = p.start_lsn < end_lsn && end_lsn <= p.next_lsn;
        let granted = in_buffer
            && end_lsn <= self.shared.room_end_lsn.load(Ordering::Acquire)
            && !self.shared.broken.load(Ordering::Acquire);
        if granted {
            p.granted_end_lsn = p.granted_end_lsn.max(end_lsn);
        }
        granted
    }

    /// Fails once a write or sync failed and the log can no longer be trusted: callers that
    /// change state before they log it (DDL) check first.
    pub fn check_healthy(&self) -> Result<(), WalError> {
        if !self.shared.broken.load(Ordering::Acquire) {
            return Ok(());
        }
        let message = self.shared.progress.lock().broken.clone();
        Err(WalError::Broken(message.unwrap_or_default()))
    }

    /// Takes the buffer lock, blocking while the buffer is over its bound (backpressure).
    fn lock_for_append(&self) -> Result<MutexGuard<'_, Pending>, WalError> {
        let mut p = self.shared.pending.lock();
        loop {
            self.check_healthy()?;
            if p.shutdown {
                return Err(WalError::Broken("the write-ahead log is shut down".into()));
            }
            if !self.shared.accepting.load(Ordering::Acquire) {
                return Err(WalError::Standby);
            }
            if p.buffered_bytes() < self.shared.opts.buffer_bytes_max {
                return Ok(p);
            }
            p.wanted_lsn = p.wanted_lsn.max(p.next_lsn);
            self.shared.writer_wake.notify_one();
            self.shared.space_freed.wait(&mut p);
        }
    }

    /// Waits without blocking the thread until the record ending at `lsn` is durable. Errors:
    /// `DiskFull` if its batch was dropped, `Broken` if the log broke before it was synced.
    pub async fn wait_flushed(&self, lsn: Lsn) -> Result<(), WalError> {
        self.wait_range_flushed(lsn.saturating_sub(1), lsn).await
    }

    /// Waits until the log up to `lsn` is durable, and fails if any batch between `from` and
    /// `lsn` was dropped; the async form of `wait_range_flushed_blocking`.
    pub async fn wait_range_flushed(&self, from: Lsn, lsn: Lsn) -> Result<(), WalError> {
        if let Some(result) = self.shared.progress.lock().outcome(from, lsn) {
            return result;
        }
        self.request_flush(lsn);
        FlushWait {
            shared: &self.shared,
            id: self.shared.next_waiter_id.fetch_add(1, Ordering::Relaxed),
            from,
            lsn,
            registered: false,
        }
        .await
    }

    /// Blocks the calling thread until the record ending at `lsn` is durable; see `wait_flushed`.
    pub fn wait_flushed_blocking(&self, lsn: Lsn) -> Result<(), WalError> {
        self.wait_range_flushed_blocking(lsn.saturating_sub(1), lsn)
    }

    /// Blocks until the log up to `lsn` is durable, and fails if any batch between `from` and
    /// `lsn` was dropped (a full disk), not only the one holding the last record: a transaction
    /// checks its records logged ahead of its commit this way.
    pub fn wait_range_flushed_blocking(&self, from: Lsn, lsn: Lsn) -> Result<(), WalError> {
        if let Some(result) = self.shared.progress.lock().outcome(from, lsn) {
            return result;
        }
        self.request_flush(lsn);
        let mut progress = self.shared.progress.lock();
        loop {
            if let Some(result) = progress.outcome(from, lsn) {
                return result;
            }
            self.shared.progress_changed.wait(&mut progress);
        }
    }

    fn request_flush(&self, lsn: Lsn) {
        let mut p = self.shared.pending.lock();
        debug_assert!(
            lsn <= p.next_lsn,
            "waiting for LSN {lsn} that was never appended"
        );
        if lsn > p.wanted_lsn {
            p.wanted_lsn = lsn;
            self.shared.writer_wake.notify_one();
        }
    }

    /// End of the last batch written and synced. Records below it are durable unless their batch
    /// was reported as dropped (`DiskFull`) to its waiters.
    /// Whether the record ending at `lsn` is surely durable, from atomics alone: the log is
    /// flushed past it and no batch was ever dropped (after a full disk, ask `wait_flushed`,
    /// which knows which ranges were).
    pub fn surely_flushed(&self, lsn: Lsn) -> bool {
        self.shared.durable_lsn.load(Ordering::Acquire) >= lsn
            && self.shared.stats.dropped_batches.load(Ordering::Acquire) == 0
    }

    pub fn flushed_lsn(&self) -> Lsn {
        self.shared.durable_lsn.load(Ordering::Acquire)
    }

    /// The directory of the log's segment files.
    pub fn dir(&self) -> &std::path::Path {
        &self.wal_dir
    }

    /// The LSN the next appended record will get.
    pub fn next_lsn(&self) -> Lsn {
        self.shared.next_lsn.load(Ordering::Acquire)
    }

    /// Log bytes appended since `lsn`, for "checkpoint after N MB of log".
    pub fn bytes_since(&self, lsn: Lsn) -> u64 {
        self.next_lsn().saturating_sub(lsn)
    }

    /// Counters since open.
    pub fn stats(&self) -> WalStats {
        let s = &self.shared.stats;
        WalStats {
            records: s.records.load(Ordering::Relaxed),
            bytes: s.bytes.load(Ordering::Relaxed),
            flushes: s.flushes.load(Ordering::Relaxed),
            batches: s.batches.load(Ordering::Relaxed),
            dropped_batches: s.dropped_batches.load(Ordering::Relaxed),
            preallocated_segments: s.preallocated_segments.load(Ordering::Relaxed),
            sync_time_us: s.sync_time_us.load(Ordering::Relaxed),
        }
    }

    /// Deletes segment files all of whose records are below `lsn` (a checkpoint's start LSN):
    /// those followed by a segment starting at or below `lsn`. Never the segment being written.
    /// Returns the number of files deleted.
    pub fn remove_segments_before(&self, lsn: Lsn) -> std::io::Result<usize> {
        // Read the current segment first: if the writer rotates meanwhile, we only keep more.
        let current_base_lsn = self.shared.current_segment_base_lsn.load(Ordering::Acquire);
        let segments = segment::list_segments(&self.wal_dir)?;
        let mut removed = 0;
        for pair in segments.windows(2) {
            let ((base_lsn, path), next_base_lsn) = (&pair[0], pair[1].0);
            let name = segment::segment_file_name(*base_lsn);
            let archived = || crate::archive::is_archived(&self.wal_dir, &name);
            if next_base_lsn <= lsn
                && *base_lsn < current_base_lsn
                && (!self.shared.opts.keep_unarchived || archived())
            {
                fs::remove_file(path)?;
                crate::archive::forget(&self.wal_dir, &name);
                removed += 1;
            }
        }
        if removed > 0 {
            segment::sync_dir(&self.wal_dir)?;
        }
        Ok(removed)
    }

    /// Writes and syncs everything appended, then stops the writer thread. Later appends fail.
    /// Also done on drop.
    pub fn shutdown(&self) {
        {
            let mut p = self.shared.pending.lock();
            p.shutdown = true;
            self.shared.writer_wake.notify_all();
            self.shared.space_freed.notify_all();
        }
        if let Some(handle) = self.writer.lock().take() {
            if handle.join().is_err() {
                tracing::error!("the log writer thread panicked");
            }
        }
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The future of `wait_range_flushed`: registers its task in `Progress::async_waiters` until the
/// log writer has an outcome for `lsn`, and unregisters on drop (a cancelled statement).
struct FlushWait<'a> {
    shared: &'a Shared,
    id: u64,
    from: Lsn,
    lsn: Lsn,
    registered: bool,
}

impl Future for FlushWait<'_> {
    type Output = Result<(), WalError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        // Checked and registered under one lock, which the writer holds while it publishes and
        // takes the decided waiters: no wake-up falls between the two.
        let mut progress = this.shared.progress.lock();
        if let Some(result) = progress.outcome(this.from, this.lsn) {
            if this.registered {
                progress.remove_async_waiter(this.id);
                this.registered = false;
            }
            return Poll::Ready(result);
        }
        progress.set_async_waiter(this.id, this.lsn, cx.waker());
        this.registered = true;
        Poll::Pending
    }
}

impl Drop for FlushWait<'_> {
    fn drop(&mut self) {
        if self.registered {
            self.shared.progress.lock().remove_async_waiter(self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress_at(processed_lsn: Lsn) -> Progress {
        Progress {
            processed_lsn,
            failed: VecDeque::new(),
            broken: None,
            async_waiters: Vec::new(),
        }
    }

    #[test]
    fn async_waiters_are_taken_once_their_lsn_is_decided() {
        let mut p = progress_at(10);
        p.set_async_waiter(1, 20, Waker::noop());
        p.set_async_waiter(2, 30, Waker::noop());
        // A second poll of the same wait refreshes its entry instead of adding one.
        p.set_async_waiter(1, 20, Waker::noop());
        assert_eq!(p.async_waiters.len(), 2);
        assert!(p.take_decided_waiters().is_empty(), "nothing reached yet");
        p.processed_lsn = 25;
        assert_eq!(p.take_decided_waiters().len(), 1);
        assert_eq!(p.async_waiters.len(), 1);
        assert_eq!(
            p.async_waiters[0].id, 2,
            "the waiter for LSN 30 still waits"
        );
        // A dropped wait (a cancelled statement) leaves nothing behind.
        p.remove_async_waiter(2);
        assert!(p.async_waiters.is_empty());
        // A broken log decides every waiter.
        p.set_async_waiter(3, 40, Waker::noop());
        p.set_async_waiter(4, 50, Waker::noop());
        p.broken = Some("test".into());
        assert_eq!(p.take_decided_waiters().len(), 2);
        assert!(p.async_waiters.is_empty());
    }
}
