//! The engine: everything sessions share — the storage database, the catalog and, for a server
//! with a data directory, the redo log and checkpoints. One per server process.

use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use shoal_storage::catalog::{Catalog, SequenceDef};
use shoal_storage::{Database, RowTable};

use crate::durability::{
    self, CatalogLock, CheckpointReport, Durability, DurabilityOptions, RecoveryReport,
};
use crate::error::SqlResult;

/// What `SELECT version()` answers. Drivers parse the leading "PostgreSQL 15.x".
pub const VERSION_STRING: &str = concat!(
    "PostgreSQL 15.0 (Shoal ",
    env!("CARGO_PKG_VERSION"),
    ") on x86_64-pc-linux-gnu, compiled by rustc, 64-bit"
);
/// server_version as reported in ParameterStatus and SHOW.
pub const SERVER_VERSION: &str = "15.0";
/// How often the background garbage collector looks for dead versions.
pub const GC_INTERVAL_MS: u64 = 200;
/// How often the checkpointer checks whether a checkpoint is due.
/// How often the background looks for column tables with many small segments.
const SEGMENT_MERGE_POLL_MS: u64 = 1000;
pub(crate) const CHECKPOINT_POLL_MS: u64 = 1000;

pub struct Engine {
    pub db: Arc<Database>,
    pub catalog: CatalogLock,
    /// None for an engine without a data directory (nothing survives it).
    pub durability: Option<Arc<Durability>>,
    next_backend_pid: AtomicI32,
    /// Held by each statement that changes the catalog while it runs, so that what one
    /// statement changed (`ddl::undo`) is never mixed with another session's changes.
    pub(crate) ddl_statement: tokio::sync::Mutex<()>,
    /// The sessions listening for notifications (LISTEN/NOTIFY).
    pub notifications: Arc<crate::notify::Hub>,
    /// Advisory locks (`pg_advisory_lock` and its siblings).
    pub advisory_locks: Arc<crate::advisory::LockTable>,
    /// The sessions' backends (pg_stat_activity, pg_cancel_backend, pg_terminate_backend).
    pub backends: crate::backends::Backends,
    /// Who may connect, and how (pg_hba.conf); reloaded by pg_reload_conf() and SIGHUP.
    pub hba: shoal_auth::hba::HbaRules,
    /// Whether clients may connect over TLS (the `ssl` setting).
    ssl: std::sync::atomic::AtomicBool,
    /// Most sessions at once (`max_connections`); the last SUPERUSER_RESERVED_CONNECTIONS of
    /// them only for superusers.
    max_connections: std::sync::atomic::AtomicUsize,
    /// How long a client has to finish its startup, authentication included
    /// (`authentication_timeout`), in seconds.
    authentication_timeout_s: std::sync::atomic::AtomicU64,
    /// Server-wide settings (postgresql.conf, ALTER SYSTEM, `-c`): new sessions start from them.
    pub config: parking_lot::RwLock<crate::config::ServerConfig>,
    /// When the engine was created (pg_postmaster_start_time).
    pub started_at: chrono::DateTime<chrono::Utc>,
    /// Bumped by every reload of `config`, so that sessions take the new values.
    config_generation: std::sync::atomic::AtomicU64,
    /// pg_stat_statements' counters (kept once the extension is created).
    pub statement_stats: crate::statement_stats::StatementStats,
    /// A standby of a replication group: the database follows the primary's log, and
    /// sessions only read (pg_is_in_recovery()).
    in_recovery: std::sync::atomic::AtomicBool,
    /// This node in its replication group (`durability::Replication`), set as it joins.
    pub replica: std::sync::OnceLock<Arc<shoal_replication::Replica>>,
}

/// Connection slots kept for superusers (PostgreSQL's superuser_reserved_connections).
pub const SUPERUSER_RESERVED_CONNECTIONS: usize = 3;

/// max_connections unless the server is told otherwise.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1000;

/// authentication_timeout unless the server is told otherwise: PostgreSQL's one minute.
pub const DEFAULT_AUTHENTICATION_TIMEOUT_S: u64 = 60;

impl Engine {
    /// Records whether the server offers TLS (shown by `SHOW ssl`).
    pub fn set_ssl(&self, on: bool) {
        self.ssl.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn ssl(&self) -> bool {
        self.ssl.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn set_max_connections(&self, n: usize) {
        self.max_connections
            .store(n, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn max_connections(&self) -> usize {
        self.max_connections
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Reads the settings files again (pg_reload_conf, SIGHUP); logs what does not read.
    /// Takes the server-wide settings read at start-up.
    pub fn set_config(&self, config: crate::config::ServerConfig) {
        *self.config.write() = config;
        self.apply_server_settings();
    }

    /// Applies the settings the engine itself (not each session) acts on.
    fn apply_server_settings(&self) {
        let values = self.config.read().value_map();
        crate::memory_limit::apply(
            self.db.memory_budget(),
            values.get(crate::memory_limit::SETTING).map(String::as_str),
        );
    }

    pub fn reload_config(&self) {
        let errors = self.config.write().reload();
        self.apply_server_settings();
        self.config_generation
            .fetch_add(1, std::sync::atomic::Ordering::Release);
        for e in &errors {
            tracing::warn!("{e}; the setting is ignored");
        }
        tracing::info!("server settings reloaded");
    }

    /// The database's system identifier (pg_control_system()): kept in the data directory, or
    /// made for this process when there is none.
    pub fn system_identifier(&self) -> u64 {
        static WITHOUT_DATA_DIR: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        match &self.durability {
            Some(d) => d.system_identifier,
            None => *WITHOUT_DATA_DIR.get_or_init(crate::durability::new_system_identifier),
        }
    }

    /// Changes whenever the server-wide settings were reloaded.
    pub fn config_generation(&self) -> u64 {
        self.config_generation
            .load(std::sync::atomic::Ordering::Acquire)
    }

    pub fn set_authentication_timeout(&self, timeout: std::time::Duration) {
        self.authentication_timeout_s
            .store(timeout.as_secs(), std::sync::atomic::Ordering::Relaxed);
    }

    pub fn authentication_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(
            self.authentication_timeout_s
                .load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// An engine over `db` and `catalog`, with everything else as a new server has it.
    fn assemble(
        db: Arc<Database>,
        catalog: CatalogLock,
        durability: Option<Arc<Durability>>,
    ) -> Arc<Engine> {
        Arc::new(Engine {
            db,
            catalog,
            durability,
            next_backend_pid: AtomicI32::new(1000),
            ddl_statement: tokio::sync::Mutex::new(()),
            notifications: Default::default(),
            advisory_locks: Default::default(),
            backends: Default::default(),
            hba: Default::default(),
            ssl: Default::default(),
            max_connections: std::sync::atomic::AtomicUsize::new(DEFAULT_MAX_CONNECTIONS),
            authentication_timeout_s: std::sync::atomic::AtomicU64::new(
                DEFAULT_AUTHENTICATION_TIMEOUT_S,
            ),
            config: Default::default(),
            started_at: chrono::Utc::now(),
            config_generation: Default::default(),
            statement_stats: Default::default(),
            in_recovery: Default::default(),
            replica: Default::default(),
        })
    }

    /// A replication group member's engine, a standby until promoted: `db` and `catalog` are
    /// filled by the group's log.
    pub(crate) fn assemble_standby(
        db: Arc<Database>,
        catalog: shoal_storage::catalog::Catalog,
        durability: Arc<Durability>,
    ) -> Arc<Engine> {
        let engine = Engine::assemble(db.clone(), CatalogLock::new(catalog), Some(durability));
        engine
            .in_recovery
            .store(true, std::sync::atomic::Ordering::Release);
        db.start_background_gc(GC_INTERVAL_MS);
        start_segment_merger(Arc::downgrade(&engine));
        crate::memory_limit::start_sampler(Arc::downgrade(&engine.db));
        engine
    }

    /// Opens `data_dir` as a member of a replication group (see `durability::Replication`):
    /// a standby that follows the group's log until this node is elected its primary.
    pub async fn open_replicated(
        data_dir: &Path,
        options: DurabilityOptions,
        config: shoal_replication::ReplicaConfig,
    ) -> Result<(Arc<Engine>, durability::Replication), String> {
        let (engine, replication) = durability::open_replicated(data_dir, options, config).await?;
        engine.apply_server_settings();
        Ok((engine, replication))
    }

    /// Whether this server is a standby: it applies a primary's log and sessions only read.
    pub fn in_recovery(&self) -> bool {
        self.in_recovery.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Promotion: sessions may write from now on. Each session reports `in_hot_standby` off
    /// at its next statement, as it takes new server settings (`take_reloaded_config`).
    pub(crate) fn end_recovery(&self) {
        self.in_recovery
            .store(false, std::sync::atomic::Ordering::Release);
        self.config_generation
            .fetch_add(1, std::sync::atomic::Ordering::Release);
    }

    /// Whether this server is a member of a replication group.
    pub fn replicated(&self) -> bool {
        self.replica.get().is_some()
    }

    /// An engine that keeps nothing: for tests of the SQL layer.
    pub fn new() -> Arc<Engine> {
        let db = Database::new();
        db.start_background_gc(GC_INTERVAL_MS);
        let engine = Engine::assemble(db, CatalogLock::new(Catalog::default()), None);
        start_segment_merger(Arc::downgrade(&engine));
        engine.apply_server_settings();
        crate::memory_limit::start_sampler(Arc::downgrade(&engine.db));
        engine
    }

    /// Opens (recovering) the database in `data_dir` and starts logging to it.
    pub fn open(
        data_dir: &Path,
        options: DurabilityOptions,
    ) -> Result<(Arc<Engine>, RecoveryReport), String> {
        let db = Database::new();
        let (archive_mode, restoring) = (options.archive_mode, options.restore.is_some());
        let (catalog, durability, report) = durability::recover(data_dir, &db, options)?;
        let durability = Arc::new(durability);
        let catalog = CatalogLock::new(catalog);
        catalog.start_logging(durability.wal.clone());
        db.start_background_gc(GC_INTERVAL_MS);
        let engine = Engine::assemble(db, catalog, Some(durability));
        if restoring {
            // The recovered state becomes the starting point before anything else is logged:
            // a crash from here on never replays the log past the recovery target again.
            let d = engine.durability.as_ref().expect("opened with a log");
            d.checkpoint(&engine.db, &engine.catalog)
                .map_err(|e| format!("checkpoint after archive recovery: {}", e.message))?;
            durability::archive::finish_archive_recovery(&engine)?;
        }
        if archive_mode {
            durability::archive::start_archiver(Arc::downgrade(&engine));
        }
        start_checkpointer(Arc::downgrade(&engine));
        start_segment_merger(Arc::downgrade(&engine));
        engine.apply_server_settings();
        crate::memory_limit::start_sampler(Arc::downgrade(&engine.db));
        Ok((engine, report))
    }

    pub fn allocate_backend_pid(&self) -> i32 {
        self.next_backend_pid.fetch_add(1, Ordering::Relaxed)
    }

    /// The default of `synchronous_commit` for new sessions.
    pub fn synchronous_commit_default(&self) -> bool {
        self.durability
            .as_ref()
            .is_none_or(|d| d.options.synchronous_commit)
    }

    /// Writes a checkpoint now (the CHECKPOINT command). Blocks.
    pub fn checkpoint(&self) -> SqlResult<Option<CheckpointReport>> {
        if let Some(replica) = self.replica.get() {
            // Through the group: the checkpoint becomes the Raft snapshot the log is dropped to.
            let runtime = tokio::runtime::Handle::try_current().map_err(|e| {
                crate::error::SqlError::internal(format!(
                    "checkpoint off the server's runtime: {e}"
                ))
            })?;
            runtime.block_on(replica.checkpoint()).map_err(|e| {
                crate::error::SqlError::new("58030", format!("could not write a checkpoint: {e}"))
            })?;
            return Ok(None);
        }
        match &self.durability {
            Some(d) => d.checkpoint(&self.db, &self.catalog).map(Some),
            None => Ok(None),
        }
    }

    pub fn log_sequence(&self, seq: &SequenceDef) {
        if let Some(d) = &self.durability {
            d.log_sequence(seq);
        }
    }

    /// Logs a table's content after ALTER TABLE rewrote its rows; before the catalog change.
    pub fn log_table_rewrite(&self, table: &RowTable) -> SqlResult<()> {
        match &self.durability {
            Some(d) => d.log_table_rewrite(table),
            None => Ok(()),
        }
    }

    /// See `Durability::log_table_image`.
    pub fn log_table_image<'r>(
        &self,
        table: shoal_storage::TableId,
        entries: impl IntoIterator<Item = (u64, &'r [u8])>,
    ) -> SqlResult<()> {
        match &self.durability {
            Some(d) => d.log_table_image(table, entries),
            None => Ok(()),
        }
    }

    /// Stops logging cleanly: flushes the log (SIGTERM).
    pub fn shutdown(&self) {
        if let Some(d) = &self.durability {
            d.wal.shutdown();
        }
    }
}

/// Merges the small segments of column tables fed by small INSERTs (`dml::compact`).
fn start_segment_merger(engine: Weak<Engine>) {
    std::thread::Builder::new()
        .name("shoal-segment-merger".into())
        .spawn(move || loop {
            std::thread::sleep(Duration::from_millis(SEGMENT_MERGE_POLL_MS));
            let Some(engine) = engine.upgrade() else {
                return;
            };
            // A standby's segments are the primary's, merged by the primary's log.
            if engine.in_recovery() {
                continue;
            }
            let merged = crate::dml::compact::merge_small_segments(
                &engine.db,
                crate::dml::compact::BACKGROUND_MERGE_SEGMENTS,
            );
            match merged {
                Ok(r) if r.segments_merged > 0 => tracing::debug!(
                    "merged {} small column segments ({} rows)",
                    r.segments_merged,
                    r.rows_moved
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!("merging small column segments: {}", e.message),
            }
        })
        .expect("spawn the segment merger thread");
}

fn start_checkpointer(engine: Weak<Engine>) {
    std::thread::Builder::new()
        .name("shoal-checkpointer".into())
        .spawn(move || {
            let mut last = Instant::now();
            loop {
                std::thread::sleep(Duration::from_millis(CHECKPOINT_POLL_MS));
                let Some(engine) = engine.upgrade() else {
                    return;
                };
                let Some(d) = engine.durability.clone() else {
                    return;
                };
                // During a bulk load the log before it must stay, so a checkpoint would only
                // take cores from the load; the next one after it covers the load as well.
                if !d.checkpoint_due(last.elapsed()) || engine.db.replay_start_pinned() {
                    continue;
                }
                match d.checkpoint_if_due(&engine.db, &engine.catalog, last.elapsed()) {
                    Ok(None) => {}
                    Ok(Some(r)) => tracing::info!(
                        "checkpoint {}: {} rows, {:.1} MB in {:.2} s, {} log segments removed",
                        r.id,
                        r.rows,
                        r.bytes as f64 / 1e6,
                        r.elapsed.as_secs_f64(),
                        r.removed_segments
                    ),
                    Err(e) => tracing::error!("checkpoint failed: {}", e.message),
                }
                last = Instant::now();
            }
        })
        .expect("spawn the checkpointer thread");
}
