//! The engine: everything sessions share — the storage database and the catalog. One per
//! server process.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use shoal_storage::catalog::Catalog;
use shoal_storage::Database;

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

pub struct Engine {
    pub db: Arc<Database>,
    pub catalog: RwLock<Catalog>,
    next_backend_pid: AtomicI32,
}

impl Engine {
    pub fn new() -> Arc<Engine> {
        let db = Database::new();
        db.start_background_gc(GC_INTERVAL_MS);
        Arc::new(Engine {
            db,
            catalog: RwLock::new(Catalog::default()),
            next_backend_pid: AtomicI32::new(1000),
        })
    }

    pub fn allocate_backend_pid(&self) -> i32 {
        self.next_backend_pid.fetch_add(1, Ordering::Relaxed)
    }
}
