//! The members of hashes, lists, sets and sorted sets. A collection is a row of `redis.keys`
//! (its type and expiry) and one row per member in its type's table, keyed by
//! `(db, key, field | position | member)`:
//! - `redis.hashes (db, key, field, value)`;
//! - `redis.lists (db, key, position, value)`, in position order (a push takes the position
//!   before the first or after the last; positions need not be consecutive);
//! - `redis.sets (db, key, member)`;
//! - `redis.zsets (db, key, member, score)`, with an index on `(db, key, score, member)`,
//!   which is a sorted set's order.
//!
//! Members are written under a lock on their key's row: a command that adds members holds it
//! shared (adds to one key run side by side), one that removes members holds it exclusively,
//! so it sees every committed add before it decides that the collection is empty and deletes
//! the key, as Redis does with an empty collection. Every write of a list holds it
//! exclusively: a list's positions and length depend on both its ends, so an LPUSH and an
//! RPUSH side by side would each count the list without the other's element, and an LSET's
//! index would shift under a concurrent push. Deleting a key, or replacing it with one
//! of another type, deletes its members (`KeyTxn::write`).

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Mutex;

use shoal_storage::types::Value;
use shoal_storage::{Direction, IndexId, RowLockMode};

use super::{Entry, KeyResult, KeyTxn, KeyType, RowWrite, Write};

/// What a command does to a collection's members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intent {
    /// Adds members, making the key (empty) when it is missing.
    Add,
    /// Adds or changes members of a key that exists (LPUSHX, ZADD XX).
    Change,
    /// Removes members (and the key with the last of them).
    Remove,
}

/// The key a collection command opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opened {
    /// It exists (or was made), with the type asked for, and is locked.
    Ready,
    /// There is no such key (nor was one made).
    Missing,
    /// The key holds another type.
    WrongType,
}

impl KeyTxn {
    /// Opens `key` as a collection of type `t` for a command that writes its members, and
    /// locks its row for the rest of the transaction (see the module's comment). Reads after
    /// it see every commit the lock waited for.
    pub async fn open(
        &mut self,
        db: u16,
        key: &[u8],
        t: KeyType,
        intent: Intent,
    ) -> KeyResult<Opened> {
        debug_assert_ne!(t, KeyType::String);
        let mode = match (intent, t) {
            (Intent::Remove, _) | (_, KeyType::List) => RowLockMode::Exclusive,
            (Intent::Add | Intent::Change, _) => RowLockMode::Share,
        };
        let opened = self
            .write(db, key, |e| match e {
                Some(e) if e.key_type != t => Write::Keep(Opened::WrongType),
                Some(_) => Write::Lock(mode, Opened::Ready),
                None if intent == Intent::Add => {
                    let empty = Entry {
                        key_type: t,
                        value: Vec::new(),
                        expires_at_us: None,
                    };
                    Write::Put(empty, Opened::Ready)
                }
                None => Write::Keep(Opened::Missing),
            })
            .await?;
        if opened == Opened::Ready {
            // Under the lock, the members as the last commit that held it left them.
            self.snapshot_ended_commits().await;
        }
        Ok(opened)
    }

    /// The type of `key` for a command that reads a collection of type `t`: Ready when it is
    /// one, Missing, or WrongType.
    pub fn find(&self, db: u16, key: &[u8], t: KeyType) -> KeyResult<Opened> {
        Ok(match self.get(db, key)? {
            None => Opened::Missing,
            Some(e) if e.key_type != t => Opened::WrongType,
            Some(_) => Opened::Ready,
        })
    }

    fn member_key(db: u16, key: &[u8], sub: &[Value]) -> Vec<Value> {
        let mut values = Self::key_values(db, key).to_vec();
        values.extend_from_slice(sub);
        values
    }

    /// The member row of collection `key` of type `t` whose third column is `sub`.
    pub fn member(
        &self,
        t: KeyType,
        db: u16,
        key: &[u8],
        sub: Value,
    ) -> KeyResult<Option<Vec<Value>>> {
        let m = self.tables.members(t);
        let found = m
            .table
            .index_get(m.primary, &self.snap, &Self::member_key(db, key, &[sub]))?;
        Ok(found.map(|(_, row)| row))
    }

    /// Visits the member rows of `key` (type `t`) through `index` of its members' table (the
    /// primary key, or the sorted sets' score index) in `direction`, from `lower` to `upper`:
    /// bounds on the index's columns after `(db, key)`, Unbounded for the whole collection.
    /// `f` returns false to stop.
    #[allow(clippy::too_many_arguments)]
    pub fn scan_members(
        &self,
        t: KeyType,
        index: IndexId,
        db: u16,
        key: &[u8],
        direction: Direction,
        lower: Bound<&[Value]>,
        upper: Bound<&[Value]>,
        mut f: impl FnMut(Vec<Value>) -> bool,
    ) -> KeyResult<()> {
        let m = self.tables.members(t);
        let bound = |b: Bound<&[Value]>| match b {
            Bound::Unbounded => Bound::Included(Self::member_key(db, key, &[])),
            Bound::Included(sub) => Bound::Included(Self::member_key(db, key, sub)),
            Bound::Excluded(sub) => Bound::Excluded(Self::member_key(db, key, sub)),
        };
        let (lower, upper) = (bound(lower), bound(upper));
        m.table.index_scan_in(
            direction,
            index,
            &self.snap,
            lower.as_ref().map(|v| &v[..]),
            upper.as_ref().map(|v| &v[..]),
            |_, bytes| f(m.table.decode_row(bytes)),
        )?;
        Ok(())
    }

    /// Every member row of `key` (type `t`) in primary key order, or the reverse.
    pub fn members(
        &self,
        t: KeyType,
        db: u16,
        key: &[u8],
        direction: Direction,
        f: impl FnMut(Vec<Value>) -> bool,
    ) -> KeyResult<()> {
        let index = self.tables.members(t).primary;
        let all = Bound::Unbounded;
        self.scan_members(t, index, db, key, direction, all, all, f)
    }

    /// How many members `key` (type `t`) has.
    pub fn count_members(&self, t: KeyType, db: u16, key: &[u8]) -> KeyResult<usize> {
        let mut n = 0;
        self.members(t, db, key, Direction::Forward, |_| {
            n += 1;
            true
        })?;
        Ok(n)
    }

    /// Runs `decide` on the member row of `key` (type `t`) whose third column is `sub` and
    /// does what it says (see `write_row`). The key must be open (`open`).
    pub async fn write_member<T>(
        &mut self,
        t: KeyType,
        db: u16,
        key: &[u8],
        sub: Value,
        decide: impl FnMut(Option<&[Value]>) -> RowWrite<T>,
    ) -> KeyResult<T> {
        let tables = self.tables.clone();
        let m = tables.members(t);
        let row_key = Self::member_key(db, key, &[sub]);
        self.write_row(&m.table, m.primary, &row_key, decide).await
    }

    /// Deletes the key of a collection that has no members left, as Redis does.
    pub async fn close_if_empty(&mut self, db: u16, key: &[u8], t: KeyType) -> KeyResult<()> {
        let mut empty = true;
        self.members(t, db, key, Direction::Forward, |_| {
            empty = false;
            false
        })?;
        if empty {
            self.write(db, key, |e| match e {
                Some(e) if e.key_type == t => Write::Delete(()),
                _ => Write::Keep(()),
            })
            .await?;
        }
        Ok(())
    }

    /// Deletes every member of `key` in type `t`'s table (its key is being deleted or
    /// replaced).
    pub(super) async fn purge_members(&mut self, db: u16, key: &[u8], t: KeyType) -> KeyResult<()> {
        // The key's row is this transaction's now: every member a committed add left goes,
        // even one committed after this command's snapshot.
        self.snapshot_ended_commits().await;
        let mut subs = Vec::new();
        self.members(t, db, key, Direction::Forward, |mut row| {
            subs.push(row.swap_remove(2));
            true
        })?;
        for sub in subs {
            self.write_member(t, db, key, sub, |row| match row {
                Some(_) => RowWrite::Delete(()),
                None => RowWrite::Keep(()),
            })
            .await?;
        }
        Ok(())
    }
}

/// Where lists' first and last positions were last seen, by (db, key). A list popped from its
/// head leaves the index entries of the popped elements until they are pruned, so a scan from
/// the key's first entry walks them; LPOP and RPOP seek from these hints instead. A hint is
/// checked before it is trusted (`commands::lists`), so a stale one costs a scan, never a wrong
/// answer. Bounded: it forgets everything when full.
#[derive(Default)]
pub struct ListEnds(Mutex<HashMap<(u16, Vec<u8>), (i64, i64)>>);

/// Lists whose ends are remembered at most.
const LIST_ENDS_MAX: usize = 4096;

impl ListEnds {
    pub fn get(&self, db: u16, key: &[u8]) -> Option<(i64, i64)> {
        let ends = self.0.lock().unwrap_or_else(|e| e.into_inner());
        ends.get(&(db, key.to_vec())).copied()
    }

    /// Notes the ends of a list; None forgets them.
    pub fn set(&self, db: u16, key: &[u8], found: Option<(i64, i64)>) {
        let mut ends = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match found {
            Some(e) => {
                if ends.len() >= LIST_ENDS_MAX {
                    ends.clear();
                }
                ends.insert((db, key.to_vec()), e);
            }
            None => {
                ends.remove(&(db, key.to_vec()));
            }
        }
    }
}
