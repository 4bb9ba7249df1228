//! The key/value API the commands run on, over Shoal's storage. Every key is a row of the row
//! table `redis.keys (db, key, type, value, expires_at)`, keyed by `(db, key)`: its database
//! number, its type (one per key, as in Redis), a string's value, and when it expires. SQL reads
//! and writes the same rows (`host::Host` creates the table), so a key set by SET is a row a
//! `SELECT` sees, and an `UPDATE redis.keys` is what the next GET returns.
//!
//! A command runs in one storage transaction (`KeyTxn`), as a one-statement SQL transaction
//! does: it reads at the transaction's snapshot, and a write that meets a row another
//! transaction is writing waits for it, then works on the newest committed version (READ
//! COMMITTED), so concurrent INCRs of one key never lose an increment.

use std::sync::Arc;

use shoal_storage::types::Value;
use shoal_storage::{
    Database, IndexId, IsolationLevel, RowRef, RowTable, Snapshot, StorageError, Transaction,
    WriteOutcome,
};

/// The columns of `redis.keys`, in order.
pub const KEYS_COLUMNS: [&str; 5] = ["db", "key", "type", "value", "expires_at"];

/// The tables of the Redis data, as the host found them in the catalog.
pub struct Tables {
    pub keys: Arc<RowTable>,
    /// The primary key index of `redis.keys`, on `(db, key)`.
    pub keys_primary: IndexId,
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
        }
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
        e.expires_at_us.is_none_or(|at| at > self.now_us)
    }

    /// Runs `decide` on the key's live entry (None if it has none) and does what it says. A row
    /// another transaction is writing is waited for, and `decide` runs again on the newest
    /// committed version, as often as it takes.
    pub async fn write<T>(
        &mut self,
        db: u16,
        key: &[u8],
        mut decide: impl FnMut(Option<&Entry>) -> Write<T>,
    ) -> KeyResult<T> {
        loop {
            let found = self.row(db, key)?;
            let mut snap = self.snap;
            let Some((handle, row)) = found else {
                // No row: insert one, unless another transaction's insert of the key comes
                // first (then wait for it and decide again).
                let (entry, answer) = match decide(None) {
                    Write::Keep(a) | Write::Delete(a) => return Ok(a),
                    Write::Put(e, a) => (e, a),
                };
                match self
                    .tables
                    .keys
                    .insert_or_conflict(&mut self.txn, &row_of(db, key, &entry))
                {
                    Ok(shoal_storage::InsertOutcome::Inserted(_)) => {
                        self.wrote = true;
                        return Ok(answer);
                    }
                    // A live row appeared after the snapshot: decide on it. (Its commit may
                    // not be in new snapshots for a moment, while an earlier commit is still
                    // being stamped: let that run.)
                    Ok(shoal_storage::InsertOutcome::Conflict { .. }) => {
                        tokio::task::yield_now().await;
                        self.snap = self.db.statement_snapshot(&mut self.txn);
                        continue;
                    }
                    Err(StorageError::WouldBlock { holder }) => {
                        self.db.wait_for(&self.txn, holder).await?;
                        self.snap = self.db.statement_snapshot(&mut self.txn);
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                }
            };
            let mut current = entry_of(&row).filter(|e| self.live(e));
            loop {
                let (outcome, answer) = match decide(current.as_ref()) {
                    Write::Keep(a) => return Ok(a),
                    Write::Put(e, a) => (
                        self.tables.keys.update(
                            &mut self.txn,
                            &handle,
                            &snap,
                            &row_of(db, key, &e),
                        ),
                        a,
                    ),
                    Write::Delete(a) => {
                        if current.is_none() && !row_is_expired(&row, self.now_us) {
                            return Ok(a);
                        }
                        (self.tables.keys.delete(&mut self.txn, &handle, &snap), a)
                    }
                };
                match outcome {
                    Ok(WriteOutcome::Done) => {
                        self.wrote = true;
                        return Ok(answer);
                    }
                    // Deleted since the snapshot: start over (an insert, now).
                    Ok(WriteOutcome::Changed { newest: None, .. }) => break,
                    Ok(WriteOutcome::Changed {
                        newest: Some(newest),
                        newest_snapshot,
                    }) => {
                        current = entry_of(&newest).filter(|e| self.live(e));
                        snap = newest_snapshot;
                    }
                    Err(StorageError::WouldBlock { holder }) => {
                        self.db.wait_for(&self.txn, holder).await?;
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
