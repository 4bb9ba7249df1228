//! What the Redis front end needs from the server it runs in, behind a small trait: the
//! storage, the tables of the Redis data (created and found through the SQL catalog), and
//! commits made durable through the redo log. `shoal-sql` implements it; the commands here
//! know nothing of SQL.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use shoal_storage::{Database, Transaction};

use crate::keyspace::Tables;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How long a write waits before it is acknowledged: Redis's `appendfsync` choices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AppendFsync {
    /// Acknowledged once its redo record is flushed.
    Always,
    /// Acknowledged at once; the log writer flushes within about a second.
    #[default]
    Everysec,
    /// Acknowledged at once; flushed when the log writer next flushes.
    No,
}

impl AppendFsync {
    pub fn parse(name: &str) -> Option<AppendFsync> {
        Some(match name.to_ascii_lowercase().as_str() {
            "always" => AppendFsync::Always,
            "everysec" => AppendFsync::Everysec,
            "no" => AppendFsync::No,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            AppendFsync::Always => "always",
            AppendFsync::Everysec => "everysec",
            AppendFsync::No => "no",
        }
    }
}

pub trait Host: Send + Sync + 'static {
    fn database(&self) -> Arc<Database>;

    /// The tables of the Redis data as the catalog has them now (they may have been dropped
    /// and made again by SQL).
    fn tables(&self) -> Result<Arc<Tables>, String>;

    /// Commits `txn`; with `wait_for_flush`, returns once its redo record is on disk.
    fn commit(&self, txn: Transaction, wait_for_flush: bool) -> BoxFuture<'_, Result<(), String>>;
}
