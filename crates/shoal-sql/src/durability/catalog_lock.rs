//! The catalog behind its lock, with one addition: a write guard that changed the catalog logs
//! the new catalog image to the redo log before it lets go of the lock. DDL is spread over many
//! statements and helpers; logging at the guard means none of them can forget, and no other
//! session can use the new definitions (and log commits against them) before the log has them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use shoal_storage::catalog::Catalog;
use shoal_wal::{Lsn, Record, Wal};

pub struct CatalogLock {
    catalog: RwLock<Catalog>,
    /// Set once recovery is done; recovery itself changes the catalog without logging.
    wal: OnceLock<Arc<Wal>>,
    /// End of the newest catalog record: a DDL statement is durable once the log is flushed
    /// this far.
    last_logged_lsn: AtomicU64,
    /// Whether pg_stat_statements is installed, kept up to date by every catalog change so
    /// that each statement can ask without taking the catalog lock.
    tracks_statements: AtomicBool,
    /// The catalog's version, kept up to date by every catalog change, for callers that only
    /// need to know whether the catalog changed since they last read it.
    version: AtomicU64,
}

impl CatalogLock {
    pub fn new(catalog: Catalog) -> CatalogLock {
        CatalogLock {
            tracks_statements: AtomicBool::new(tracks_statements(&catalog)),
            version: AtomicU64::new(catalog.version),
            catalog: RwLock::new(catalog),
            wal: OnceLock::new(),
            last_logged_lsn: AtomicU64::new(0),
        }
    }

    pub fn read(&self) -> RwLockReadGuard<'_, Catalog> {
        self.catalog.read()
    }

    /// A read that may run while this thread already reads (a catalog view whose rows are
    /// made while its statement is planned): a plain read would wait behind a queued writer
    /// that waits for the outer read.
    pub fn read_recursive(&self) -> RwLockReadGuard<'_, Catalog> {
        self.catalog.read_recursive()
    }

    pub fn write(&self) -> CatalogWriteGuard<'_> {
        let guard = self.catalog.write();
        let version_before = guard.version;
        CatalogWriteGuard {
            guard,
            version_before,
            lock: self,
        }
    }

    /// Puts in the catalog a replicated log carries (a standby applying its primary's DDL),
    /// without logging it again.
    pub(crate) fn install_replayed(&self, catalog: Catalog) {
        let mut guard = self.catalog.write();
        self.tracks_statements
            .store(tracks_statements(&catalog), Ordering::Relaxed);
        self.version.store(catalog.version, Ordering::Release);
        *guard = catalog;
    }

    /// From now on every catalog change is logged.
    pub(crate) fn start_logging(&self, wal: Arc<Wal>) {
        assert!(self.wal.set(wal).is_ok(), "catalog logging started twice");
    }

    /// Whether pg_stat_statements is installed (see `statement_stats`).
    pub fn tracks_statements(&self) -> bool {
        self.tracks_statements.load(Ordering::Relaxed)
    }

    /// The catalog's version now, without taking the lock.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    pub fn last_logged_lsn(&self) -> Lsn {
        self.last_logged_lsn.load(Ordering::Acquire)
    }
}

pub struct CatalogWriteGuard<'a> {
    guard: RwLockWriteGuard<'a, Catalog>,
    version_before: u64,
    lock: &'a CatalogLock,
}

impl std::ops::Deref for CatalogWriteGuard<'_> {
    type Target = Catalog;
    fn deref(&self) -> &Catalog {
        &self.guard
    }
}

impl std::ops::DerefMut for CatalogWriteGuard<'_> {
    fn deref_mut(&mut self) -> &mut Catalog {
        &mut self.guard
    }
}

impl Drop for CatalogWriteGuard<'_> {
    fn drop(&mut self) {
        if self.guard.version == self.version_before {
            return;
        }
        self.lock
            .tracks_statements
            .store(tracks_statements(&self.guard), Ordering::Relaxed);
        self.lock
            .version
            .store(self.guard.version, Ordering::Release);
        let Some(wal) = self.lock.wal.get() else {
            return;
        };
        let image = self.guard.to_image();
        match wal.append(&Record::Catalog { image: &image }) {
            Ok(lsn) => {
                self.lock.last_logged_lsn.fetch_max(lsn, Ordering::AcqRel);
            }
            // The change is made in memory and cannot be refused from a destructor; the log is
            // broken, so every later commit fails and says why.
            Err(e) => tracing::error!("could not log a catalog change: {e}"),
        }
    }
}

fn tracks_statements(catalog: &Catalog) -> bool {
    catalog
        .extension(crate::statement_stats::EXTENSION)
        .is_some()
}
