//! Set commands: SADD, SREM, SPOP, SRANDMEMBER, SMEMBERS, SISMEMBER, SMISMEMBER, SCARD,
//! SINTER, SUNION, SDIFF and their STORE forms. A set's members are rows of `redis.sets`.

use std::collections::BTreeSet;
use std::ops::Bound;

use rand::seq::SliceRandom;
use rand::Rng;
use shoal_storage::types::Value;
use shoal_storage::Direction;

use super::{answered, parse_integer, Args, NOT_AN_INTEGER, SYNTAX_ERROR, WRONG_TYPE};
use crate::client::Client;
use crate::keyspace::{
    Entry, Intent, KeyResult, KeyTxn, KeyType, KeyspaceError, Opened, RowWrite, Write,
};
use crate::protocol::ReplyWriter;

const SET: KeyType = KeyType::Set;
/// The most members SRANDMEMBER with a negative count returns.
const SRANDMEMBER_MAX_REPEATS: i64 = 10_000_000;

pub(super) async fn execute(
    kt: &mut KeyTxn,
    client: &Client,
    name: &str,
    args: &Args<'_>,
    w: &mut ReplyWriter<'_>,
) -> Option<KeyResult<()>> {
    let db = client.db;
    let key = args.get(1);
    let result = match name {
        "sadd" => sadd(kt, db, args, w).await,
        "srem" => srem(kt, db, args, w).await,
        "smove" => smove(kt, db, args, w).await,
        "spop" => spop(kt, db, args, w).await,
        "srandmember" => srandmember(kt, db, args, w),
        "sismember" | "smismember" => (|| {
            let ready = match kt.find(db, key, SET)? {
                Opened::WrongType => {
                    w.error(WRONG_TYPE);
                    return Ok(());
                }
                opened => opened == Opened::Ready,
            };
            if name == "smismember" {
                w.array(args.len() - 2);
            }
            for i in 2..args.len() {
                let found = ready && kt.member(SET, db, key, member(args.get(i)))?.is_some();
                w.integer(i64::from(found));
            }
            Ok(())
        })(),
        "scard" => match kt.find(db, key, SET) {
            Ok(Opened::WrongType) => {
                w.error(WRONG_TYPE);
                Ok(())
            }
            Ok(Opened::Missing) => {
                w.integer(0);
                Ok(())
            }
            Ok(Opened::Ready) => kt.count_members(SET, db, key).map(|n| w.integer(n as i64)),
            Err(e) => Err(e),
        },
        "smembers" | "sinter" | "sunion" | "sdiff" => (|| {
            match combine(kt, db, name, args, 1)? {
                None => w.error(WRONG_TYPE),
                Some(members) => {
                    w.set(members.len());
                    for m in &members {
                        w.bulk(m);
                    }
                }
            }
            Ok(())
        })(),
        "sinterstore" | "sunionstore" | "sdiffstore" => store(kt, db, name, args, w).await,
        _ => return None,
    };
    Some(result)
}

fn member(name: &[u8]) -> Value {
    Value::Bytea(name.to_vec())
}

fn set_row(db: u16, key: &[u8], member: &[u8]) -> Vec<Value> {
    vec![
        Value::Int16(db as i16),
        Value::Bytea(key.to_vec()),
        Value::Bytea(member.to_vec()),
    ]
}

/// The members of the set at `key` (empty when missing); None when it holds another type.
fn members_of(kt: &KeyTxn, db: u16, key: &[u8]) -> KeyResult<Option<BTreeSet<Vec<u8>>>> {
    let mut found = BTreeSet::new();
    match kt.find(db, key, SET)? {
        Opened::WrongType => return Ok(None),
        Opened::Missing => {}
        Opened::Ready => kt.members(SET, db, key, Direction::Forward, |mut row| {
            if let Some(Value::Bytea(m)) = row.pop() {
                found.insert(m);
            }
            true
        })?,
    }
    Ok(Some(found))
}

/// SMEMBERS, SINTER, SUNION or SDIFF over the keys from argument `first` on; None when one
/// holds another type (every key is checked, as in Redis).
fn combine(
    kt: &KeyTxn,
    db: u16,
    name: &str,
    args: &Args<'_>,
    first: usize,
) -> KeyResult<Option<BTreeSet<Vec<u8>>>> {
    let mut result: Option<BTreeSet<Vec<u8>>> = None;
    for i in first..args.len() {
        let Some(set) = members_of(kt, db, args.get(i))? else {
            return Ok(None);
        };
        result = Some(match result {
            None => set,
            Some(acc) => match name {
                "sinter" | "sinterstore" => acc.intersection(&set).cloned().collect(),
                "sunion" | "sunionstore" => acc.union(&set).cloned().collect(),
                _ => acc.difference(&set).cloned().collect(),
            },
        });
    }
    Ok(Some(result.unwrap_or_default()))
}

async fn sadd(kt: &mut KeyTxn, db: u16, args: &Args<'_>, w: &mut ReplyWriter<'_>) -> KeyResult<()> {
    let key = args.get(1);
    if kt.open(db, key, SET, Intent::Add).await? == Opened::WrongType {
        w.error(WRONG_TYPE);
        return Ok(());
    }
    let mut added = 0;
    for i in 2..args.len() {
        added += add(kt, db, key, args.get(i)).await?;
    }
    w.integer(added);
    Ok(())
}

/// Adds `m` to the open set `key`: 1 if it was not a member.
async fn add(kt: &mut KeyTxn, db: u16, key: &[u8], m: &[u8]) -> KeyResult<i64> {
    kt.write_member(SET, db, key, member(m), |row| match row {
        Some(_) => RowWrite::Keep(0),
        None => RowWrite::Put(set_row(db, key, m), 1),
    })
    .await
}

/// Removes `m` from the open set `key`: 1 if it was a member.
async fn remove(kt: &mut KeyTxn, db: u16, key: &[u8], m: &[u8]) -> KeyResult<i64> {
    kt.write_member(SET, db, key, member(m), |row| match row {
        Some(_) => RowWrite::Delete(1),
        None => RowWrite::Keep(0),
    })
    .await
}

async fn srem(kt: &mut KeyTxn, db: u16, args: &Args<'_>, w: &mut ReplyWriter<'_>) -> KeyResult<()> {
    let key = args.get(1);
    if answered(kt.open(db, key, SET, Intent::Remove).await?, w, |w| {
        w.integer(0)
    }) {
        return Ok(());
    }
    let mut removed = 0;
    for i in 2..args.len() {
        removed += remove(kt, db, key, args.get(i)).await?;
    }
    kt.close_if_empty(db, key, SET).await?;
    w.integer(removed);
    Ok(())
}

/// SMOVE source destination member: 1 if the member moved (or is already in a source that is
/// also the destination), 0 if the source does not hold it; Redis's checks in Redis's order.
async fn smove(
    kt: &mut KeyTxn,
    db: u16,
    args: &Args<'_>,
    w: &mut ReplyWriter<'_>,
) -> KeyResult<()> {
    let (source, destination, m) = (args.get(1), args.get(2), args.get(3));
    if answered(kt.open(db, source, SET, Intent::Remove).await?, w, |w| {
        w.integer(0)
    }) {
        return Ok(());
    }
    if kt.find(db, destination, SET)? == Opened::WrongType {
        w.error(WRONG_TYPE);
        return Ok(());
    }
    if source == destination {
        w.integer(i64::from(kt.member(SET, db, source, member(m))?.is_some()));
        return Ok(());
    }
    if remove(kt, db, source, m).await? == 0 {
        w.integer(0);
        return Ok(());
    }
    kt.close_if_empty(db, source, SET).await?;
    // Another client made the destination another type since `find`: undo the removal (the
    // command's savepoint) rather than lose the member.
    if kt.open(db, destination, SET, Intent::Add).await? != Opened::Ready {
        return Err(KeyspaceError(WRONG_TYPE.to_string()));
    }
    add(kt, db, destination, m).await?;
    w.integer(1);
    Ok(())
}

/// A member picked at random: the first at or after a random byte string (members are in
/// byte order), wrapping around to the first member. One index seek, however large the set.
fn random_member(kt: &KeyTxn, db: u16, key: &[u8]) -> KeyResult<Option<Vec<u8>>> {
    let mut probe = [0u8; 8];
    rand::rng().fill(&mut probe);
    let probe = [member(&probe)];
    let index = kt.tables.sets.primary;
    for lower in [Bound::Included(&probe[..]), Bound::Unbounded] {
        let mut found = None;
        kt.scan_members(
            SET,
            index,
            db,
            key,
            Direction::Forward,
            lower,
            Bound::Unbounded,
            |mut row| {
                if let Some(Value::Bytea(m)) = row.pop() {
                    found = Some(m);
                }
                false
            },
        )?;
        if found.is_some() {
            return Ok(found);
        }
    }
    Ok(None)
}

/// SPOP key [count]: removes and returns random members.
async fn spop(kt: &mut KeyTxn, db: u16, args: &Args<'_>, w: &mut ReplyWriter<'_>) -> KeyResult<()> {
    if args.len() > 3 {
        w.error(SYNTAX_ERROR);
        return Ok(());
    }
    let count = match super::positive_count(args, 2) {
        Ok(c) => c,
        Err(e) => {
            w.error(e);
            return Ok(());
        }
    };
    let key = args.get(1);
    match kt.open(db, key, SET, Intent::Remove).await? {
        Opened::WrongType => {
            w.error(WRONG_TYPE);
            return Ok(());
        }
        Opened::Missing if count.is_some() => {
            w.set(0);
            return Ok(());
        }
        Opened::Missing => {
            w.null();
            return Ok(());
        }
        Opened::Ready => {}
    }
    let mut popped = Vec::new();
    while popped.len() < count.unwrap_or(1) {
        let Some(m) = random_member(kt, db, key)? else {
            break;
        };
        remove(kt, db, key, &m).await?;
        popped.push(m);
    }
    kt.close_if_empty(db, key, SET).await?;
    match count {
        None => match popped.first() {
            Some(m) => w.bulk(m),
            None => w.null(),
        },
        Some(_) => {
            w.set(popped.len());
            for m in &popped {
                w.bulk(m);
            }
        }
    }
    Ok(())
}

/// SRANDMEMBER key [count]: random members, distinct for a positive count, possibly repeated
/// for a negative one.
fn srandmember(kt: &KeyTxn, db: u16, args: &Args<'_>, w: &mut ReplyWriter<'_>) -> KeyResult<()> {
    if args.len() > 3 {
        w.error(SYNTAX_ERROR);
        return Ok(());
    }
    let count = match args.len() {
        3 => match parse_integer(args.get(2)) {
            Some(i64::MIN) => {
                w.error("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807");
                return Ok(());
            }
            // A reply of more repeats than this would take gigabytes (Redis drops such a
            // client at its output buffer limit).
            Some(n) if n < -SRANDMEMBER_MAX_REPEATS => {
                w.error("ERR count is too large: the reply would exceed the output limit");
                return Ok(());
            }
            Some(n) => Some(n),
            None => {
                w.error(NOT_AN_INTEGER);
                return Ok(());
            }
        },
        _ => None,
    };
    let key = args.get(1);
    match kt.find(db, key, SET)? {
        Opened::WrongType => {
            w.error(WRONG_TYPE);
            return Ok(());
        }
        Opened::Missing if count.is_some() => {
            w.array(0);
            return Ok(());
        }
        Opened::Missing => {
            w.null();
            return Ok(());
        }
        Opened::Ready => {}
    }
    let Some(count) = count else {
        match random_member(kt, db, key)? {
            Some(m) => w.bulk(&m),
            None => w.null(),
        }
        return Ok(());
    };
    let mut all: Vec<Vec<u8>> = members_of(kt, db, key)?
        .unwrap_or_default()
        .into_iter()
        .collect();
    let mut rng = rand::rng();
    if count >= 0 || all.is_empty() {
        all.shuffle(&mut rng);
        all.truncate(count.max(0) as usize);
        w.array(all.len());
        for m in &all {
            w.bulk(m);
        }
    } else {
        // Repeats allowed: written as they are picked, not gathered first.
        let n = count.unsigned_abs() as usize;
        w.array(n);
        for _ in 0..n {
            w.bulk(&all[rng.random_range(0..all.len())]);
        }
    }
    Ok(())
}

/// SINTERSTORE / SUNIONSTORE / SDIFFSTORE destination key...: the result replaces whatever
/// `destination` held (an empty result deletes it); the reply is its size.
async fn store(
    kt: &mut KeyTxn,
    db: u16,
    name: &str,
    args: &Args<'_>,
    w: &mut ReplyWriter<'_>,
) -> KeyResult<()> {
    let Some(result) = combine(kt, db, name, args, 2)? else {
        w.error(WRONG_TYPE);
        return Ok(());
    };
    let destination = args.get(1);
    // The old value goes (with its members, whatever its type), then the result goes in.
    kt.write(db, destination, |_| Write::Delete(())).await?;
    if !result.is_empty() {
        let empty = Entry {
            key_type: SET,
            value: Vec::new(),
            expires_at_us: None,
        };
        kt.write(db, destination, |_| Write::Put(empty.clone(), ()))
            .await?;
        for m in &result {
            add(kt, db, destination, m).await?;
        }
    }
    w.integer(result.len() as i64);
    Ok(())
}
