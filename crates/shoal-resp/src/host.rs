//! What the Redis front end needs from the server it runs in, behind a small trait: the
//! storage, the tables of the Redis data (created and found through the SQL catalog), commits
//! made durable through the redo log, and logins and privileges from Shoal's roles. `shoal-sql` implements it; the commands here
//! know nothing of SQL.

use std::future::Future;
use std::net::IpAddr;
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

/// What a role may do with the Redis data, from its privileges on the `redis` schema and
/// tables.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Access {
    /// Read commands (GET, HGETALL, ...): USAGE on the schema, SELECT on the tables.
    pub read: bool,
    /// Write commands (SET, LPUSH, ...): SELECT, INSERT, UPDATE and DELETE as well.
    pub write: bool,
}

/// How a login went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Login {
    /// pg_hba.conf trusts the client: no password was needed.
    Trusted,
    /// The password was checked and is the role's.
    Password,
    /// Refused: no such role, it may not log in, a wrong or expired password, or pg_hba.conf
    /// rejects the client.
    Refused,
}

/// This server's place in a replication group, as INFO's replication section and ROLE tell
/// it. A server alone is a primary with no standbys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replication {
    /// It takes writes. `log_end` is where its redo log ends; `standbys` what each standby
    /// has on disk (`None` before it acknowledged anything).
    Primary {
        log_end: u64,
        standbys: Vec<Standby>,
    },
    /// A hot standby: it serves reads of the log it applied up to `applied`, and refuses
    /// writes with READONLY. `primary_host` is the primary's host while it hears from one.
    Standby {
        applied: u64,
        primary_host: Option<String>,
    },
}

/// A standby, as its primary sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standby {
    /// Its name in the group (`nodeN`).
    pub name: String,
    /// The host of its replication address.
    pub host: String,
    /// Where the log it has on disk ends.
    pub flushed: Option<u64>,
}

pub trait Host: Send + Sync + 'static {
    fn database(&self) -> Arc<Database>;

    /// The tables of the Redis data as the catalog has them now (they may have been dropped
    /// and made again by SQL).
    fn tables(&self) -> Result<Arc<Tables>, String>;

    /// Commits `txn`; with `wait_for_flush`, returns once its redo record is on disk.
    fn commit(&self, txn: Transaction, wait_for_flush: bool) -> BoxFuture<'_, Result<(), String>>;

    /// Logs `user` in for a client at `peer`, as pg_hba.conf (database `redis`) and the
    /// role's password say; `password` None asks whether the client is trusted without one.
    fn login(&self, peer: Option<IpAddr>, user: &str, password: Option<&[u8]>) -> Login;

    /// What `user` may do now.
    fn access(&self, user: &str) -> Access;

    /// A number that changes whenever roles or privileges may have (the catalog's version):
    /// a connection keeps its `access` until it changes.
    fn catalog_version(&self) -> u64;

    /// Whether this server is a standby now: write commands get READONLY, and keys are not
    /// expired here (the primary's deletions arrive by the log). Asked by every write.
    fn read_only(&self) -> bool;

    /// Where this server stands in its replication group.
    fn replication(&self) -> Replication;
}
