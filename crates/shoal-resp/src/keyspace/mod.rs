//! The key/value API the commands run on, over Shoal's storage. Every key is a row of the row
//! table `redis.keys (db, key, type, value, expires_at)`, keyed by `(db, key)`: its database
//! number, its type (one per key, as in Redis), a string's value, and when it expires. SQL reads
//! and writes the same rows (`host::Host` creates the table), so a key set by SET is a row a
//! `SELECT` sees, and an `UPDATE redis.keys` is what the next GET returns.
//!
//! A command runs in a storage transaction (`KeyTxn`), alone or with the commands after it in
//! a pipeline (`commands::Batch`), as a statement of a READ COMMITTED SQL transaction does: it
//! reads at a snapshot of its own, and a write that meets a row another transaction is writing
//! waits for it, then works on the newest committed version, so concurrent INCRs of one key
//! never lose an increment.

use std::sync::Arc;

use shoal_storage::types::Value;
use shoal_storage::{
    Database, IndexId, InsertOutcome, IsolationLevel, RowLockMode, RowRef, RowTable, Snapshot,
    StorageError, Transaction, WriteOutcome,
};

mod cursors;
mod members;

pub use cursors::ScanCursors;
pub use members::{Intent, ListEnds, Opened};

/// The columns of `redis.keys`, in order.
pub const KEYS_COLUMNS: [&str; 5] = ["db", "key", "type", "value", "expires_at"];
/// The columns of the members' tables, in order: `redis.hashes`, `redis.lists`, `redis.sets`
/// and `redis.zsets`. Each has the primary key `(db, key, <third column>)`.
pub const HASHES_COLUMNS: [&str; 4] = ["db", "key", "field", "value"];
pub const LISTS_COLUMNS: [&str; 4] = ["db", "key", "position", "value"];
pub const SETS_COLUMNS: [&str; 3] = ["db", "key", "member"];
pub const ZSETS_COLUMNS: [&str; 4] = ["db", "key", "member", "score"];

/// A table of a collection type's members, with its primary key index.
pub struct Members {
    pub table: Arc<RowTable>,
    pub primary: IndexId,
}

/// The tables of the Redis data, as the host found them in the catalog.
pub struct Tables {
    pub keys: Arc<RowTable>,
    /// The primary key index of `redis.keys`, on `(db, key)`.
    pub keys_primary: IndexId,
    pub hashes: Members,
    pub lists: Members,
    pub sets: Members,
    pub zsets: Members,
    /// The index of `redis.zsets` on `(db, key, score, member)`: a sorted set in its order.
    pub zsets_by_score: IndexId,
    /// Hints of where lists end (see `ListEnds`).
    pub list_ends: ListEnds,
    /// SCAN's cursors (see `ScanCursors`), kept when the catalog changes.
    pub scan_cursors: Arc<ScanCursors>,
}

impl Tables {
    /// The members' table of a collection type.
    pub fn members(&self, t: KeyType) -> &Members {
        match t {
            KeyType::Hash => &self.hashes,
            KeyType::List => &self.lists,
            KeyType::Set => &self.sets,
            KeyType::ZSet => &self.zsets,
            KeyType::String => unreachable!("a string has no members"),
        }
    }
}

/// A key's type, as TYPE names it and `redis.keys.type` holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyType {
    String,
    Hash,
    List,
    Set,
    ZSet,
}

impl KeyType {
    pub fn name(self) -> &'static str {
        match self {
            KeyType::String => "string",
            KeyType::Hash => "hash",
            KeyType::List => "list",
            KeyType::Set => "set",
            KeyType::ZSet => "zset",
        }
    }

    fn parse(name: &str) -> Option<KeyType> {
        Some(match name {
            "string" => KeyType::String,
            "hash" => KeyType::Hash,
            "list" => KeyType::List,
            "set" => KeyType::Set,
            "zset" => KeyType::ZSet,
            _ => return None,
        })
    }
}

/// A live key: its type, a string's value, and its expiry (microseconds since the Unix epoch).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub key_type: KeyType,
    pub value: Vec<u8>,
    pub expires_at_us: Option<i64>,
}

impl Entry {
    /// Whether the key has not expired at `now_us`.
    pub fn live_at(&self, now_us: i64) -> bool {
        self.expires_at_us.is_none_or(|at| at > now_us)
    }

    pub fn string(value: Vec<u8>, expires_at_us: Option<i64>) -> Entry {
        Entry {
            key_type: KeyType::String,
            value,
            expires_at_us,
        }
    }
}

/// What a write does to a key, given the entry it finds.
pub enum Write<T> {
    /// Leave the key as it is, and answer `T`.
    Keep(T),
    /// Store this entry (insert or replace), and answer `T`.
    Put(Entry, T),
    /// Delete the key, and answer `T`.
    Delete(T),
    /// Lock the key's row in this mode until the transaction ends (if the key is live), and
    /// answer `T`: a collection's members are written under its key's lock.
    Lock(RowLockMode, T),
}

/// What a write does to a row of any of the tables, given the row it finds.
pub enum RowWrite<T> {
    Keep(T),
    Put(Vec<Value>, T),
    Delete(T),
    Lock(RowLockMode, T),
}

/// An error a command reports: a storage failure, with its message.
#[derive(Debug)]
pub struct KeyspaceError(pub String);

impl From<StorageError> for KeyspaceError {
    fn from(e: StorageError) -> Self {
        KeyspaceError(e.to_string())
    }
}

pub type KeyResult<T> = Result<T, KeyspaceError>;

/// Now, in microseconds since the Unix epoch (expiry times are absolute, as in Redis's AOF).
pub fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// One command's transaction over the keyspace.
pub struct KeyTxn {
    pub db: Arc<Database>,
    pub tables: Arc<Tables>,
    pub txn: Transaction,
    snap: Snapshot,
    /// The command's time: keys that expire at or before it are gone.
    pub now_us: i64,
    pub wrote: bool,
    /// Whether the command may wait for another transaction's lock. A pipeline's batch
    /// (`commands::Batch`) allows it only to its first command: a later one would wait while
    /// holding the locks of the commands before it.
    may_wait: bool,
    /// The command stopped because it would have waited (`may_wait` was false): nothing it did
    /// may be kept, and it must run again where it may wait.
    pub must_wait: bool,
    /// Reads of rows a write leaves unchanged take a share lock (see `commands::Batch`).
    lock_reads: bool,
}

impl KeyTxn {
    pub fn begin(db: Arc<Database>, tables: Arc<Tables>) -> KeyTxn {
        let mut txn = db.begin(IsolationLevel::ReadCommitted);
        let snap = db.statement_snapshot(&mut txn);
        KeyTxn {
            db,
            tables,
            txn,
            snap,
            now_us: now_us(),
            wrote: false,
            may_wait: true,
            must_wait: false,
            lock_reads: false,
        }
    }

    /// Starts the next command of a batch. With `fresh`, it reads at a new snapshot (READ
    /// COMMITTED: it sees the commits before it) and a new time; without, at the last
    /// command's (reads that follow reads may all read at one moment). Only the batch's first
    /// command may wait for locks; once the batch has written, reads that decide to leave a
    /// row as it is lock it.
    pub fn next_command(&mut self, first: bool, fresh: bool) {
        if fresh {
            self.snap = self.db.statement_snapshot(&mut self.txn);
            self.now_us = now_us();
        }
        self.may_wait = first;
        self.must_wait = false;
        self.lock_reads = self.wrote;
    }

    /// Takes a new snapshot that has every commit that has ended by now: after taking a lock,
    /// the commits that held it. A new snapshot may lag behind a commit that has ended while an
    /// earlier one is still being stamped (`Database::stable_ts`); that takes moments, and this
    /// waits them out. (A snapshot past that watermark could see a commit only in part, and a
    /// write at it could miss a version stamped after it read the row.)
    pub(crate) async fn snapshot_ended_commits(&mut self) {
        let ended = self.db.newest_commit_ts();
        for attempt in 0u32.. {
            self.snap = self.db.statement_snapshot(&mut self.txn);
            if self.snap.ts >= ended {
                return;
            }
            match attempt < 64 {
                true => tokio::task::yield_now().await,
                false => tokio::time::sleep(std::time::Duration::from_millis(1)).await,
            }
        }
    }

    /// Ok when the command may wait for a lock; otherwise marks it as stopped (`must_wait`).
    fn may_wait_for_lock(&mut self) -> KeyResult<()> {
        if self.may_wait {
            return Ok(());
        }
        self.must_wait = true;
        Err(KeyspaceError(
            "the command would wait for a lock inside a batch".to_string(),
        ))
    }

    fn key_values(db: u16, key: &[u8]) -> [Value; 2] {
        [Value::Int16(db as i16), Value::Bytea(key.to_vec())]
    }

    /// The key's row as stored, expired or not.
    fn row(&self, db: u16, key: &[u8]) -> KeyResult<Option<(RowRef, Vec<Value>)>> {
        let t = &self.tables;
        Ok(t.keys
            .index_get(t.keys_primary, &self.snap, &Self::key_values(db, key))?)
    }

    /// The live entry of `key` in database `db`: None if there is none or it has expired.
    pub fn get(&self, db: u16, key: &[u8]) -> KeyResult<Option<Entry>> {
        Ok(self
            .row(db, key)?
            .and_then(|(_, row)| entry_of(&row))
            .filter(|e| self.live(e)))
    }

    fn live(&self, e: &Entry) -> bool {
        e.live_at(self.now_us)
    }

    /// Runs `decide` on the key's live entry (None if it has none) and does what it says. A row
    /// another transaction is writing is waited for, and `decide` runs again on the newest
    /// committed version, as often as it takes. A collection's members go with its key: when
    /// the key is deleted, or replaced by a key of another type or after it expired.
    pub async fn write<T>(
        &mut self,
        db: u16,
        key: &[u8],
        mut decide: impl FnMut(Option<&Entry>) -> Write<T>,
    ) -> KeyResult<T> {
        let now = self.now_us;
        let tables = self.tables.clone();
        let mut purge = None;
        let answer = self
            .write_row(
                &tables.keys,
                tables.keys_primary,
                &Self::key_values(db, key),
                |row| {
                    purge = None;
                    let Some(row) = row else {
                        return match decide(None) {
                            Write::Put(e, a) => RowWrite::Put(row_of(db, key, &e), a),
                            Write::Keep(a) | Write::Delete(a) | Write::Lock(_, a) => {
                                RowWrite::Keep(a)
                            }
                        };
                    };
                    let stored = stored_collection(row);
                    let current = entry_of(row).filter(|e| e.live_at(now));
                    match decide(current.as_ref()) {
                        Write::Keep(a) => RowWrite::Keep(a),
                        Write::Lock(mode, a) => match current {
                            Some(_) => RowWrite::Lock(mode, a),
                            None => RowWrite::Keep(a),
                        },
                        Write::Put(e, a) => {
                            if current.is_none() || stored != Some(e.key_type) {
                                purge = stored;
                            }
                            RowWrite::Put(row_of(db, key, &e), a)
                        }
                        // A row SQL wrote that is not a key (an unknown type) is left alone;
                        // an expired key's row goes.
                        Write::Delete(a) if current.is_none() && !row_is_expired(row, now) => {
                            RowWrite::Keep(a)
                        }
                        Write::Delete(a) => {
                            purge = stored;
                            RowWrite::Delete(a)
                        }
                    }
                },
            )
            .await?;
        if let Some(t) = purge {
            self.purge_members(db, key, t).await?;
        }
        Ok(answer)
    }

    /// Runs `decide` on the row of `table` with `key` in its unique `index` (None if there is
    /// none) and does what it says, waiting for a transaction that is writing the row and
    /// deciding again on the newest committed version. After a wait, the transaction reads at
    /// a new snapshot, which has what it waited for.
    pub async fn write_row<T>(
        &mut self,
        table: &RowTable,
        index: IndexId,
        key: &[Value],
        mut decide: impl FnMut(Option<&[Value]>) -> RowWrite<T>,
    ) -> KeyResult<T> {
        // The place in the queue of the row's waiters, kept across the retries: writers of a
        // hot key get it in the order they came, one woken at a time (PostgreSQL's tuple
        // lock), not all of them at every commit.
        let mut ticket = None;
        loop {
            let Some((handle, row)) = table.index_get(index, &self.snap, key)? else {
                // No row: insert one, unless another transaction's insert of the key comes
                // first (then wait for it and decide again).
                let (row, answer) = match decide(None) {
                    RowWrite::Put(r, a) => (r, a),
                    RowWrite::Keep(a) | RowWrite::Delete(a) | RowWrite::Lock(_, a) => return Ok(a),
                };
                match table.insert_or_conflict(&mut self.txn, &row) {
                    Ok(InsertOutcome::Inserted(_)) => {
                        self.wrote = true;
                        return Ok(answer);
                    }
                    // A live row appeared after the snapshot: decide on it. (Its commit may
                    // not be in new snapshots for a moment, while an earlier commit is still
                    // being stamped: let that run.)
                    Ok(InsertOutcome::Conflict { .. }) => {
                        tokio::task::yield_now().await;
                        self.snap = self.db.statement_snapshot(&mut self.txn);
                        continue;
                    }
                    Err(StorageError::WouldBlock { holder }) => {
                        self.may_wait_for_lock()?;
                        self.db.wait_for(&self.txn, holder).await?;
                        self.snap = self.db.statement_snapshot(&mut self.txn);
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                }
            };
            let mut current = row;
            let mut snap = self.snap;
            loop {
                let (outcome, answer, writes) = match decide(Some(&current)) {
                    RowWrite::Keep(a) if self.lock_reads => (
                        table.lock_row(&mut self.txn, &handle, &snap, RowLockMode::Share),
                        a,
                        false,
                    ),
                    RowWrite::Keep(a) => return Ok(a),
                    RowWrite::Put(r, a) => {
                        (table.update(&mut self.txn, &handle, &snap, &r), a, true)
                    }
                    RowWrite::Delete(a) => (table.delete(&mut self.txn, &handle, &snap), a, true),
                    RowWrite::Lock(mode, a) => (
                        table.lock_row(&mut self.txn, &handle, &snap, mode),
                        a,
                        false,
                    ),
                };
                match outcome {
                    Ok(WriteOutcome::Done) => {
                        self.wrote |= writes;
                        return Ok(answer);
                    }
                    // Deleted since the snapshot: start over (an insert, now).
                    Ok(WriteOutcome::Changed { newest: None, .. }) => {
                        tokio::task::yield_now().await;
                        break;
                    }
                    Ok(WriteOutcome::Changed {
                        newest: Some(newest),
                        newest_snapshot,
                    }) => {
                        current = newest;
                        snap = newest_snapshot;
                    }
                    Err(StorageError::WouldBlock { holder }) => {
                        self.may_wait_for_lock()?;
                        let turn =
                            ticket.get_or_insert_with(|| self.db.queue_for_row(&self.txn, &handle));
                        self.db.wait_for_turn(turn).await?;
                        self.db.wait_for(&self.txn, holder).await?;
                        break;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            self.snap = self.db.statement_snapshot(&mut self.txn);
        }
    }

    /// The identity of the key's current version, for WATCH: its row and where the version
    /// began (any write makes a new one); None when the key does not exist.
    pub fn version(&self, db: u16, key: &[u8]) -> KeyResult<Option<(u64, u64)>> {
        let Some((handle, row)) = self.row(db, key)? else {
            return Ok(None);
        };
        if entry_of(&row).is_none_or(|e| !self.live(&e)) {
            return Ok(None);
        }
        Ok(handle
            .visible_version_begin(&self.snap)
            .map(|begin| (handle.row_id(), begin)))
    }

    /// EXEC's check of a key WATCHed at `version`: whether it still is at that version. An
    /// existing key's row is then share-locked until the transaction ends, so no other
    /// transaction writes it between the check and the commit.
    pub async fn still_at(
        &mut self,
        db: u16,
        key: &[u8],
        version: Option<(u64, u64)>,
    ) -> KeyResult<bool> {
        loop {
            self.snap = self.db.statement_snapshot(&mut self.txn);
            if self.version(db, key)? != version {
                return Ok(false);
            }
            let Some((handle, _)) = self.row(db, key)? else {
                return Ok(true);
            };
            let lock = self.tables.keys.lock_row(
                &mut self.txn,
                &handle,
                &self.snap,
                shoal_storage::RowLockMode::Share,
            );
            match lock {
                Ok(WriteOutcome::Done) => return Ok(true),
                Ok(WriteOutcome::Changed { .. }) => return Ok(false),
                Err(StorageError::WouldBlock { holder }) => {
                    self.may_wait_for_lock()?;
                    self.db.wait_for(&self.txn, holder).await?
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Every live key of database `db` (or of every database), in key order, with its entry.
    pub fn scan(&self, db: Option<u16>, mut f: impl FnMut(u16, &[u8], &Entry) -> bool) {
        let tables = &self.tables;
        let now = self.now_us;
        tables.keys.scan(&self.snap, |_, bytes| {
            let row = tables.keys.decode_row(bytes);
            let (Value::Int16(d), Value::Bytea(key)) = (&row[0], &row[1]) else {
                return true;
            };
            if db.is_some_and(|db| db as i16 != *d) {
                return true;
            }
            match entry_of(&row) {
                Some(e) if e.expires_at_us.is_none_or(|at| at > now) => f(*d as u16, key, &e),
                _ => true,
            }
        });
    }
}

impl KeyTxn {
    /// Visits the live keys of database `db` in key order after `after` (from its first key
    /// when None), with their entries, until `f` returns false.
    pub fn scan_db_from(
        &self,
        db: u16,
        after: Option<&[u8]>,
        mut f: impl FnMut(&[u8], &Entry) -> bool,
    ) -> KeyResult<()> {
        let tables = &self.tables;
        let database = [Value::Int16(db as i16)];
        let start = after.map(|key| Self::key_values(db, key));
        let lower = match &start {
            Some(k) => std::ops::Bound::Excluded(&k[..]),
            None => std::ops::Bound::Included(&database[..]),
        };
        tables.keys.index_scan(
            tables.keys_primary,
            &self.snap,
            lower,
            std::ops::Bound::Included(&database[..]),
            |_, bytes| {
                let row = tables.keys.decode_row(bytes);
                match (&row[1], entry_of(&row)) {
                    (Value::Bytea(key), Some(e)) if self.live(&e) => f(key, &e),
                    _ => true,
                }
            },
        )?;
        Ok(())
    }

    /// Up to `limit` keys in key order after `after` (from the start when None), each with
    /// whether it has expired; for the expiry cycle's sweep.
    pub fn sweep(
        &self,
        after: Option<&(u16, Vec<u8>)>,
        limit: usize,
    ) -> KeyResult<Vec<((u16, Vec<u8>), bool)>> {
        let tables = &self.tables;
        let start = after.map(|(db, key)| Self::key_values(*db, key));
        let lower = match &start {
            Some(k) => std::ops::Bound::Excluded(&k[..]),
            None => std::ops::Bound::Unbounded,
        };
        let mut found = Vec::new();
        tables.keys.index_scan(
            tables.keys_primary,
            &self.snap,
            lower,
            std::ops::Bound::Unbounded,
            |_, bytes| {
                let row = tables.keys.decode_row(bytes);
                if let (Value::Int16(db), Value::Bytea(key)) = (&row[0], &row[1]) {
                    let expired = row_is_expired(&row, self.now_us);
                    found.push(((*db as u16, key.clone()), expired));
                }
                found.len() < limit
            },
        )?;
        Ok(found)
    }
}

/// The collection type of a stored row of `redis.keys`, expired or not (its members are still
/// stored until the row goes).
fn stored_collection(row: &[Value]) -> Option<KeyType> {
    match row.get(2) {
        Some(Value::Text(t)) => KeyType::parse(t).filter(|t| *t != KeyType::String),
        _ => None,
    }
}

fn row_is_expired(row: &[Value], now_us: i64) -> bool {
    matches!(row.get(4), Some(Value::TimestampTz(at)) if *at <= now_us)
}

/// A row of `redis.keys` as an entry; None for a row SQL wrote that is not one (an unknown
/// type), which the commands do not see.
fn entry_of(row: &[Value]) -> Option<Entry> {
    let Some(Value::Text(type_name)) = row.get(2) else {
        return None;
    };
    let key_type = KeyType::parse(type_name)?;
    let value = match row.get(3) {
        Some(Value::Bytea(v)) => v.clone(),
        _ if key_type == KeyType::String => return None,
        _ => Vec::new(),
    };
    let expires_at_us = match row.get(4) {
        Some(Value::TimestampTz(at)) => Some(*at),
        _ => None,
    };
    Some(Entry {
        key_type,
        value,
        expires_at_us,
    })
}

fn row_of(db: u16, key: &[u8], e: &Entry) -> Vec<Value> {
    vec![
        Value::Int16(db as i16),
        Value::Bytea(key.to_vec()),
        Value::Text(e.key_type.name().to_string()),
        match e.key_type {
            KeyType::String => Value::Bytea(e.value.clone()),
            _ => Value::Null,
        },
        match e.expires_at_us {
            Some(at) => Value::TimestampTz(at),
            None => Value::Null,
        },
    ]
}
