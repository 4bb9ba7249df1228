//! Durability seen from the SQL layer: opening the data directory (recovery), the redo sink
//! that puts every commit into the log, logging of catalog changes, sequences and table
//! rewrites, waiting for the log at commit (`synchronous_commit`), and checkpoints. The log and
//! checkpoint formats themselves live in the shoal-wal crate.

pub mod archive;
mod catalog_lock;
mod checkpoint;
mod recovery;
mod replicated;
pub mod sync_standbys;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use shoal_storage::catalog::SequenceDef;
use shoal_storage::{CommitTs, EarlyRedo, RedoChange, RedoSink, RowTable, TableId};
use shoal_wal::{DataDirLock, Lsn, Record, Wal, WalError, WalOptions};

use crate::error::SqlError;

pub use catalog_lock::{CatalogLock, CatalogWriteGuard};
pub use checkpoint::{BackupPin, CheckpointReport};
pub(crate) use recovery::recover;
pub use recovery::RecoveryReport;
pub use replicated::Replication;
pub(crate) use replicated::{open as open_replicated, wait_for_standbys};

/// How the server keeps data: set by `shoal serve` flags.
#[derive(Clone, Debug)]
pub struct DurabilityOptions {
    /// Default of the `synchronous_commit` setting for new sessions.
    pub synchronous_commit: bool,
    /// A checkpoint starts when this much log was written since the last one...
    pub checkpoint_log_bytes: u64,
    /// ...or when this much time passed and anything was logged.
    pub checkpoint_interval_s: u64,
    /// Threads that write and load checkpoint files.
    pub checkpoint_threads: usize,
    /// Row redo a transaction gathers before it logs it ahead of its commit (`early_redo`).
    pub early_redo_bytes: usize,
    pub wal: WalOptions,
    /// `archive_mode = on`: completed segments go to `archive_command` (see `archive`).
    pub archive_mode: bool,
    /// Archive recovery (`recovery.signal` was found), with its settings.
    pub restore: Option<archive::RestoreOptions>,
}

impl Default for DurabilityOptions {
    fn default() -> Self {
        DurabilityOptions {
            synchronous_commit: true,
            checkpoint_log_bytes: 256 << 20,
            checkpoint_interval_s: 300,
            checkpoint_threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            early_redo_bytes: shoal_storage::early_redo::EARLY_REDO_BYTES_DEFAULT,
            wal: WalOptions::default(),
            archive_mode: false,
            restore: None,
        }
    }
}

/// The open log of a running server.
pub struct Durability {
    pub data_dir: PathBuf,
    pub wal: Arc<Wal>,
    pub options: DurabilityOptions,
    /// One checkpoint at a time.
    checkpoint_running: Mutex<()>,
    /// Online backups under way: checkpoints then delete no older checkpoint or log.
    backups_running: std::sync::atomic::AtomicUsize,
    /// Where the newest checkpoint's log replay starts (what its log bytes are counted from).
    last_checkpoint_lsn: AtomicU64,
    /// End of the newest commit record made visible before it was durable (`release_early`).
    /// A read-only transaction may have seen that commit, so it waits for the flush up to here
    /// before it is acknowledged: no client is told of a commit a crash could still undo.
    released_lsn: AtomicU64,
    /// Checkpoints written, for pg_stat_bgwriter.
    pub checkpoints: checkpoint::CheckpointCounters,
    /// The database's identity, made when its directory was first used (`system_identifier`).
    pub system_identifier: u64,
    /// pg_stat_archiver's counters (the archiver runs with `archive_mode = on`).
    pub archiver: archive::Archiver,
    /// No second server (or engine) opens the directory while this one may still write to it.
    /// Last, so it is dropped last: fields drop in order, and dropping `wal` flushes the log.
    _dir_lock: DataDirLock,
}

impl Durability {
    fn new(
        data_dir: &Path,
        dir_lock: DataDirLock,
        wal: Arc<Wal>,
        options: DurabilityOptions,
        start: Lsn,
    ) -> Durability {
        Durability {
            data_dir: data_dir.to_path_buf(),
            wal,
            options,
            checkpoint_running: Mutex::new(()),
            backups_running: Default::default(),
            last_checkpoint_lsn: AtomicU64::new(start),
            released_lsn: AtomicU64::new(start),
            checkpoints: Default::default(),
            system_identifier: system_identifier(data_dir),
            archiver: Default::default(),
            _dir_lock: dir_lock,
        }
    }

    /// Whether the commit whose record ends at `lsn` may be made visible (and release its row
    /// locks) before the flush, its acknowledgement still waiting for it: early lock release.
    /// Writers that queue on a hot row (pgbench's branches) then wait for the commit ahead of
    /// them, not for its fdatasync as well. See `Wal::grant_early_release` for when the log
    /// grants it. Call before making the commit visible.
    pub fn release_early(&self, lsn: Lsn) -> bool {
        let granted = self.wal.grant_early_release(lsn);
        if granted {
            // Before the commit becomes visible, so a reader that sees it finds the LSN here.
            self.released_lsn.fetch_max(lsn, Ordering::AcqRel);
        }
        granted
    }

    /// Where the newest checkpoint's replay starts (0 before the first checkpoint).
    pub fn checkpoint_start_lsn(&self) -> Lsn {
        self.last_checkpoint_lsn.load(Ordering::Acquire)
    }

    /// The log position a read-only transaction waits for before it is acknowledged (see
    /// `released_lsn`); at or below the flushed LSN unless commits were released early.
    pub fn released_lsn(&self) -> Lsn {
        self.released_lsn.load(Ordering::Acquire)
    }

    /// Logs a sequence's counter (nextval, setval, RESTART). It becomes durable with the next
    /// flush, at the latest with the commit of the transaction that used the value.
    pub fn log_sequence(&self, seq: &SequenceDef) {
        let record = Record::Sequence {
            oid: seq.oid,
            last_value: seq.state.last_value.load(Ordering::Acquire),
            is_called: seq.state.is_called.load(Ordering::Acquire),
        };
        if let Err(e) = self.wal.append(&record) {
            tracing::error!("could not log sequence {}: {e}", seq.name);
        }
    }

    /// Logs a table's whole content in a new form (ALTER TABLE ... SET ACCESS METHOD): rows of a
    /// row table, or segment images of a column table under their first row's id. As for
    /// `log_table_rewrite`, the catalog change must follow.
    pub fn log_table_image<'r>(
        &self,
        table: shoal_storage::TableId,
        entries: impl IntoIterator<Item = (u64, &'r [u8])>,
    ) -> Result<(), SqlError> {
        self.wal
            .append_table_image(table, entries)
            .map(|_| ())
            .map_err(wal_error)
    }

    /// Logs a table's whole content after a rewrite (ALTER TABLE changing columns). Log it
    /// before the catalog change that goes with it: recovery installs the image when it meets
    /// that catalog record, and drops an image that no catalog record follows.
    pub fn log_table_rewrite(&self, table: &RowTable) -> Result<(), SqlError> {
        let snapshot = shoal_storage::Snapshot {
            ts: CommitTs::MAX >> 1,
            txn: 0,
        };
        let mut rows: Vec<(u64, Arc<[u8]>)> = Vec::new();
        table.scan(&snapshot, |row, data| {
            rows.push((row.row_id(), Arc::from(data)));
            true
        });
        self.log_table_image(table.id(), rows.iter().map(|(id, d)| (*id, &d[..])))
    }

    /// Fails (58030) once the log is broken. DDL changes the catalog in memory before its image
    /// is logged, so it must ask first rather than find out after.
    pub fn check_writable(&self) -> Result<(), SqlError> {
        self.wal.check_healthy().map_err(wal_error)
    }

    /// Waits until the log is flushed to `lsn` (a commit or catalog record's end).
    pub async fn wait_flushed(&self, lsn: Lsn) -> Result<(), SqlError> {
        if self.wal.surely_flushed(lsn) {
            return Ok(());
        }
        self.wal.wait_flushed(lsn).await.map_err(wal_error)
    }

    /// Waits until the log from `from` to `lsn` is durable, failing if any of it was dropped
    /// (records a transaction logged ahead of its commit).
    pub async fn wait_range_flushed(&self, from: Lsn, lsn: Lsn) -> Result<(), SqlError> {
        if self.wal.surely_flushed(lsn) {
            return Ok(());
        }
        self.wal
            .wait_range_flushed(from, lsn)
            .await
            .map_err(wal_error)
    }

    /// Whether enough log has piled up since the last checkpoint to start one.
    pub(crate) fn checkpoint_due(&self, since_last: Duration) -> bool {
        let bytes = self
            .wal
            .bytes_since(self.last_checkpoint_lsn.load(Ordering::Acquire));
        bytes >= self.options.checkpoint_log_bytes
            || (bytes > 0 && since_last.as_secs() >= self.options.checkpoint_interval_s)
    }
}

/// The redo sink storage commits through.
struct WalSink(Arc<Wal>);

impl RedoSink for WalSink {
    fn log_commit(
        &self,
        take_ts: &mut dyn FnMut(u64) -> CommitTs,
        changes: &[RedoChange<'_>],
        early: Option<EarlyRedo>,
    ) -> Result<u64, String> {
        self.0
            .append_commit(take_ts, changes, early)
            .map_err(|e| e.to_string())
    }

    fn log_row_changes(
        &self,
        chain: Option<u64>,
        first_write: u64,
        changes: &[RedoChange<'_>],
        pin: &mut dyn FnMut(u64),
    ) -> Result<Option<(u64, u64)>, String> {
        self.0
            .append_row_changes(chain, first_write, changes, pin)
            .map(Some)
            .map_err(|e| e.to_string())
    }

    fn log_abandoned(&self, chain: Option<u64>, segments: &[(TableId, u64)]) {
        let mut buf = Vec::new();
        let record = Record::Abandoned {
            chain,
            segments: shoal_wal::SegmentIds::encode(segments, &mut buf),
        };
        // Advisory: a log that fails here has failed for every commit too.
        let _ = self.0.append(&record);
    }

    fn wait_durable(&self, from: u64, end: u64) -> Result<(), String> {
        self.0
            .wait_range_flushed_blocking(from, end)
            .map_err(|e| e.to_string())
    }

    fn log_segment(
        &self,
        table: TableId,
        row_id: u64,
        image: &[u8],
        pin: &mut dyn FnMut(u64),
    ) -> Result<Option<u64>, String> {
        let record = Record::ColumnSegment {
            table,
            row_id,
            image,
        };
        self.0
            .append_noting_start(&record, pin)
            .map(Some)
            .map_err(|e| e.to_string())
    }
}

pub fn wal_error(e: WalError) -> SqlError {
    SqlError::new(e.sqlstate(), e.to_string())
}

/// The file holding the database's system identifier.
const SYSTEM_IDENTIFIER_FILE: &str = "system_identifier";

/// The data directory's system identifier (pg_control_system()), made on first use as
/// PostgreSQL's initdb makes it: the time in seconds and microseconds and the process id, so
/// two databases made apart have different ones. A directory whose file cannot be written keeps
/// the new value for this run only.
fn system_identifier(data_dir: &Path) -> u64 {
    let path = data_dir.join(SYSTEM_IDENTIFIER_FILE);
    if let Some(id) = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
    {
        return id;
    }
    let id = new_system_identifier();
    let tmp = path.with_extension("tmp");
    let written =
        std::fs::write(&tmp, format!("{id}\n")).and_then(|_| std::fs::rename(&tmp, &path));
    if let Err(e) = written {
        tracing::warn!("could not write {}: {e}", path.display());
    }
    id
}

pub fn new_system_identifier() -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (now.as_secs() << 32)
        | (u64::from(now.subsec_micros()) << 12)
        | (u64::from(std::process::id()) & 0xFFF)
}
