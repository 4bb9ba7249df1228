//! List commands: LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP, LRANGE, LLEN, LINDEX, LSET, LREM
//! and LTRIM. A list's elements are rows of `redis.lists` at consecutive positions: a push
//! takes the position before the first or after the last, a pop takes the first or last, and
//! LREM closes the gaps it leaves. So the length is `last - first + 1` and the element at an
//! index is one lookup, as Redis's LLEN and LINDEX are cheap.

use std::ops::Bound;

use shoal_storage::types::Value;
use shoal_storage::Direction;

use super::{answered, bytes_of, parse_integer, Args, NOT_AN_INTEGER, SYNTAX_ERROR, WRONG_TYPE};
use crate::client::Client;
use crate::keyspace::{Intent, KeyResult, KeyTxn, KeyType, KeyspaceError, Opened, RowWrite};
use crate::protocol::ReplyWriter;

const LIST: KeyType = KeyType::List;

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
        "lpush" | "rpush" | "lpushx" | "rpushx" => push(kt, db, name, args, w).await,
        "lpop" | "rpop" => pop(kt, db, name, args, w).await,
        "lmove" | "rpoplpush" => lmove(kt, db, name, args, w).await,
        "llen" => (|| {
            match kt.find(db, key, LIST)? {
                Opened::WrongType => w.error(WRONG_TYPE),
                Opened::Missing => w.integer(0),
                Opened::Ready => w.integer(length(ends(kt, db, key)?)),
            }
            Ok(())
        })(),
        "lindex" => (|| {
            let Some(index) = parse_integer(args.get(2)) else {
                w.error(NOT_AN_INTEGER);
                return Ok(());
            };
            if answered(kt.find(db, key, LIST)?, w, |w| w.null()) {
                return Ok(());
            }
            match position_at(ends(kt, db, key)?, index) {
                None => w.null(),
                Some(at) => match kt.member(LIST, db, key, Value::Int64(at))? {
                    Some(row) => w.bulk(bytes_of(&row[3])),
                    None => w.null(),
                },
            }
            Ok(())
        })(),
        "lrange" => lrange(kt, db, args, w),
        "lset" => lset(kt, db, args, w).await,
        "ltrim" => ltrim(kt, db, args, w).await,
        "lrem" => lrem(kt, db, args, w).await,
        _ => return None,
    };
    Some(result)
}

fn position_of(row: &[Value]) -> i64 {
    match row[2] {
        Value::Int64(p) => p,
        _ => unreachable!("redis.lists.position is a bigint"),
    }
}

fn list_row(db: u16, key: &[u8], position: i64, value: Vec<u8>) -> Vec<Value> {
    vec![
        Value::Int16(db as i16),
        Value::Bytea(key.to_vec()),
        Value::Int64(position),
        Value::Bytea(value),
    ]
}

/// The first and last positions of the list; None when it has no elements.
fn ends(kt: &KeyTxn, db: u16, key: &[u8]) -> KeyResult<Option<(i64, i64)>> {
    let hint = kt.tables.list_ends.get(db, key);
    let Some(first) = find_end(kt, db, key, Direction::Forward, hint.map(|h| h.0))? else {
        kt.tables.list_ends.set(db, key, None);
        return Ok(None);
    };
    let last = find_end(kt, db, key, Direction::Backward, hint.map(|h| h.1))?.unwrap_or(first);
    kt.tables.list_ends.set(db, key, Some((first, last)));
    Ok(Some((first, last)))
}

/// The first position of the list (`Forward`) or its last (`Backward`). With a hint, the
/// search starts there: the element it finds is the end when the position beyond it holds
/// none, as positions are consecutive. Otherwise (or without a hint) it walks from the key's
/// first (last) entry.
fn find_end(
    kt: &KeyTxn,
    db: u16,
    key: &[u8],
    direction: Direction,
    hint: Option<i64>,
) -> KeyResult<Option<i64>> {
    let first_found = |lower: Bound<&[Value]>, upper: Bound<&[Value]>| {
        let mut found = None;
        let index = kt.tables.lists.primary;
        kt.scan_members(LIST, index, db, key, direction, lower, upper, |row| {
            found = Some(position_of(&row));
            false
        })
        .map(|()| found)
    };
    if let Some(hint) = hint {
        let from = [Value::Int64(hint)];
        let found = match direction {
            Direction::Forward => first_found(Bound::Included(&from), Bound::Unbounded)?,
            Direction::Backward => first_found(Bound::Unbounded, Bound::Included(&from))?,
        };
        if let Some(at) = found {
            let beyond = match direction {
                Direction::Forward => at - 1,
                Direction::Backward => at + 1,
            };
            if kt.member(LIST, db, key, Value::Int64(beyond))?.is_none() {
                return Ok(Some(at));
            }
        }
    }
    first_found(Bound::Unbounded, Bound::Unbounded)
}

/// Deletes the list's key when it has no elements left (looking from the ends' hints: the
/// popped elements' entries are at its head or tail).
async fn close_if_empty(kt: &mut KeyTxn, db: u16, key: &[u8]) -> KeyResult<()> {
    match ends(kt, db, key)? {
        Some(_) => Ok(()),
        None => kt.close_if_empty(db, key, LIST).await,
    }
}

fn length(ends: Option<(i64, i64)>) -> i64 {
    ends.map_or(0, |(first, last)| last - first + 1)
}

/// The position of the element at `index` (negative: from the end); None when out of range.
fn position_at(ends: Option<(i64, i64)>, index: i64) -> Option<i64> {
    let (first, _) = ends?;
    let len = length(ends);
    let i = if index < 0 { len + index } else { index };
    (0..len).contains(&i).then_some(first + i)
}

/// Inclusive `start..=stop` in Redis's range rules (negative from the end, clamped); None
/// when the range is empty.
pub(super) fn clamp_range(start: i64, stop: i64, len: i64) -> Option<(i64, i64)> {
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let stop = if stop < 0 { len + stop } else { stop };
    if start > stop || start >= len {
        return None;
    }
    Some((start, stop.min(len - 1)))
}

/// LPUSH/RPUSH key element... (and the X forms, only onto an existing list): the length after.
async fn push(
    kt: &mut KeyTxn,
    db: u16,
    name: &str,
    args: &Args<'_>,
    w: &mut ReplyWriter<'_>,
) -> KeyResult<()> {
    let key = args.get(1);
    let intent = match name.ends_with('x') {
        true => Intent::Change,
        false => Intent::Add,
    };
    if answered(kt.open(db, key, LIST, intent).await?, w, |w| w.integer(0)) {
        return Ok(());
    }
    let values: Vec<&[u8]> = (2..args.len()).map(|i| args.get(i)).collect();
    match add_elements(kt, db, key, name.starts_with('l'), &values).await? {
        Ok(length) => w.integer(length),
        Err(e) => w.error(e),
    }
    Ok(())
}

/// Pushes `values` one after another at the left or right end of list `key`, which is open
/// (`KeyTxn::open`): its new length, or Redis's error text.
async fn add_elements(
    kt: &mut KeyTxn,
    db: u16,
    key: &[u8],
    left: bool,
    values: &[&[u8]],
) -> KeyResult<Result<i64, &'static str>> {
    let mut known = ends(kt, db, key)?;
    for value in values {
        // Another client may take the position first (pushes to one list run side by side
        // under a shared lock): then look again.
        loop {
            let at = match known {
                None => Some(0),
                Some((first, _)) if left => first.checked_sub(1),
                Some((_, last)) => last.checked_add(1),
            };
            // Only positions written from SQL can get here.
            let Some(at) = at else {
                return Ok(Err("ERR the list's positions are exhausted"));
            };
            let pushed = kt
                .write_member(LIST, db, key, Value::Int64(at), |row| match row {
                    None => RowWrite::Put(list_row(db, key, at, value.to_vec()), true),
                    Some(_) => RowWrite::Keep(false),
                })
                .await?;
            if pushed {
                known = Some(match known {
                    None => (at, at),
                    Some((_, last)) if left => (at, last),
                    Some((first, _)) => (first, at),
                });
                break;
            }
            known = ends(kt, db, key)?;
        }
    }
    kt.tables.list_ends.set(db, key, known);
    Ok(Ok(length(known)))
}

/// LPOP/RPOP key [count]: one element, or an array of up to `count`.
async fn pop(
    kt: &mut KeyTxn,
    db: u16,
    name: &str,
    args: &Args<'_>,
    w: &mut ReplyWriter<'_>,
) -> KeyResult<()> {
    if args.len() > 3 {
        w.error(&super::arity_error(name));
        return Ok(());
    }
    let count = match args.len() {
        3 => match parse_integer(args.get(2)) {
            Some(n) if n >= 0 => Some(n),
            _ => {
                w.error(super::MUST_BE_POSITIVE);
                return Ok(());
            }
        },
        _ => None,
    };
    let key = args.get(1);
    match kt.open(db, key, LIST, Intent::Remove).await? {
        Opened::WrongType => {
            w.error(WRONG_TYPE);
            return Ok(());
        }
        Opened::Missing if count.is_some() => {
            w.null_array();
            return Ok(());
        }
        Opened::Missing => {
            w.null();
            return Ok(());
        }
        Opened::Ready => {}
    }
    let direction = match name {
        "lpop" => Direction::Forward,
        _ => Direction::Backward,
    };
    let popped = take_elements(kt, db, key, direction, count.unwrap_or(1) as usize).await?;
    close_if_empty(kt, db, key).await?;
    match count {
        None => match popped.first() {
            Some(v) => w.bulk(v),
            None => w.null(),
        },
        Some(_) => {
            w.array(popped.len());
            for v in &popped {
                w.bulk(v);
            }
        }
    }
    Ok(())
}

/// Takes up to `n` elements from the `direction` end of list `key`, which is open for
/// removal. The caller deletes the key if that left it empty (`close_if_empty`).
async fn take_elements(
    kt: &mut KeyTxn,
    db: u16,
    key: &[u8],
    direction: Direction,
    n: usize,
) -> KeyResult<Vec<Vec<u8>>> {
    let mut popped = Vec::new();
    let mut hint = match kt.tables.list_ends.get(db, key) {
        Some(h) => Some(h),
        None => ends(kt, db, key)?,
    };
    while popped.len() < n {
        let end_hint = hint.map(|(first, last)| match direction {
            Direction::Forward => first,
            Direction::Backward => last,
        });
        let Some(at) = find_end(kt, db, key, direction, end_hint)? else {
            break;
        };
        let value = kt
            .write_member(LIST, db, key, Value::Int64(at), |row| match row {
                Some(row) => RowWrite::Delete(Some(bytes_of(&row[3]).to_vec())),
                None => RowWrite::Keep(None),
            })
            .await?;
        popped.extend(value);
        // The next pop seeks from the next element.
        hint = hint.map(|(first, last)| match direction {
            Direction::Forward => (at + 1, last),
            Direction::Backward => (first, at - 1),
        });
    }
    kt.tables.list_ends.set(db, key, hint);
    Ok(popped)
}

/// LMOVE source destination LEFT|RIGHT LEFT|RIGHT, and RPOPLPUSH source destination (RIGHT
/// LEFT): pops an element from one list and pushes it onto another (or the same one, a
/// rotation), with Redis's checks in Redis's order.
async fn lmove(
    kt: &mut KeyTxn,
    db: u16,
    name: &str,
    args: &Args<'_>,
    w: &mut ReplyWriter<'_>,
) -> KeyResult<()> {
    let (source, destination) = (args.get(1), args.get(2));
    let side = |i: usize| match args.word(i).as_str() {
        "left" => Some(true),
        "right" => Some(false),
        _ => None,
    };
    let (from_left, to_left) = match name {
        "rpoplpush" => (false, true),
        _ => match (side(3), side(4)) {
            (Some(from), Some(to)) => (from, to),
            _ => {
                w.error(SYNTAX_ERROR);
                return Ok(());
            }
        },
    };
    if answered(kt.open(db, source, LIST, Intent::Remove).await?, w, |w| {
        w.null()
    }) {
        return Ok(());
    }
    if kt.find(db, destination, LIST)? == Opened::WrongType {
        w.error(WRONG_TYPE);
        return Ok(());
    }
    let direction = match from_left {
        true => Direction::Forward,
        false => Direction::Backward,
    };
    let Some(value) = take_elements(kt, db, source, direction, 1).await?.pop() else {
        w.null();
        return Ok(());
    };
    // Another client made the destination another type since `find`: undo the pop (the
    // command's savepoint) rather than lose the element.
    if kt.open(db, destination, LIST, Intent::Add).await? != Opened::Ready {
        return Err(KeyspaceError(WRONG_TYPE.to_string()));
    }
    // Pushed before the source is checked for emptiness: a one-element rotation keeps its key
    // (and its expiry), as in Redis.
    if let Err(e) = add_elements(kt, db, destination, to_left, &[&value]).await? {
        w.error(e);
        return Ok(());
    }
    close_if_empty(kt, db, source).await?;
    w.bulk(&value);
    Ok(())
}

fn lrange(kt: &KeyTxn, db: u16, args: &Args<'_>, w: &mut ReplyWriter<'_>) -> KeyResult<()> {
    let key = args.get(1);
    let (Some(start), Some(stop)) = (parse_integer(args.get(2)), parse_integer(args.get(3))) else {
        w.error(NOT_AN_INTEGER);
        return Ok(());
    };
    // Missing or expired: an empty collection, whatever rows are left.
    if answered(kt.find(db, key, LIST)?, w, |w| w.array(0)) {
        return Ok(());
    }
    let ends = ends(kt, db, key)?;
    let (Some((first, _)), Some((start, stop))) = (ends, clamp_range(start, stop, length(ends)))
    else {
        w.array(0);
        return Ok(());
    };
    let mut values = Vec::with_capacity((stop - start + 1).min(1024) as usize);
    let index = kt.tables.lists.primary;
    let (lower, upper) = ([Value::Int64(first + start)], [Value::Int64(first + stop)]);
    kt.scan_members(
        LIST,
        index,
        db,
        key,
        Direction::Forward,
        Bound::Included(&lower),
        Bound::Included(&upper),
        |mut row| {
            values.push(row.pop());
            true
        },
    )?;
    w.array(values.len());
    for v in &values {
        w.bulk(v.as_ref().map_or(&[][..], bytes_of));
    }
    Ok(())
}

async fn lset(kt: &mut KeyTxn, db: u16, args: &Args<'_>, w: &mut ReplyWriter<'_>) -> KeyResult<()> {
    let (key, value) = (args.get(1), args.get(3));
    let Some(index) = parse_integer(args.get(2)) else {
        w.error(NOT_AN_INTEGER);
        return Ok(());
    };
    if answered(kt.open(db, key, LIST, Intent::Change).await?, w, |w| {
        w.error("ERR no such key")
    }) {
        return Ok(());
    }
    let Some(at) = position_at(ends(kt, db, key)?, index) else {
        w.error("ERR index out of range");
        return Ok(());
    };
    kt.write_member(LIST, db, key, Value::Int64(at), |_| {
        RowWrite::Put(list_row(db, key, at, value.to_vec()), ())
    })
    .await?;
    w.ok();
    Ok(())
}

/// Deletes the element at position `at`.
async fn delete_at(kt: &mut KeyTxn, db: u16, key: &[u8], at: i64) -> KeyResult<()> {
    kt.write_member(LIST, db, key, Value::Int64(at), |row| match row {
        Some(_) => RowWrite::Delete(()),
        None => RowWrite::Keep(()),
    })
    .await
}

/// LTRIM key start stop: keeps only the elements in the range.
async fn ltrim(
    kt: &mut KeyTxn,
    db: u16,
    args: &Args<'_>,
    w: &mut ReplyWriter<'_>,
) -> KeyResult<()> {
    let key = args.get(1);
    let (Some(start), Some(stop)) = (parse_integer(args.get(2)), parse_integer(args.get(3))) else {
        w.error(NOT_AN_INTEGER);
        return Ok(());
    };
    if answered(kt.open(db, key, LIST, Intent::Remove).await?, w, |w| w.ok()) {
        return Ok(());
    }
    if let Some((first, last)) = ends(kt, db, key)? {
        let (keep_from, keep_to) = match clamp_range(start, stop, last - first + 1) {
            Some((start, stop)) => (first + start, first + stop),
            None => (last + 1, last),
        };
        for at in (first..keep_from).chain(keep_to + 1..=last) {
            delete_at(kt, db, key, at).await?;
        }
    }
    close_if_empty(kt, db, key).await?;
    w.ok();
    Ok(())
}

/// LREM key count element: removes the first `count` elements equal to `element` (from the
/// end when negative, all when 0), then moves the elements after the first gap down so the
/// positions stay consecutive.
async fn lrem(kt: &mut KeyTxn, db: u16, args: &Args<'_>, w: &mut ReplyWriter<'_>) -> KeyResult<()> {
    let (key, element) = (args.get(1), args.get(3));
    let Some(count) = parse_integer(args.get(2)) else {
        w.error(NOT_AN_INTEGER);
        return Ok(());
    };
    if answered(kt.open(db, key, LIST, Intent::Remove).await?, w, |w| {
        w.integer(0)
    }) {
        return Ok(());
    }
    let direction = match count < 0 {
        true => Direction::Backward,
        false => Direction::Forward,
    };
    let limit = match count {
        0 => usize::MAX,
        n => n.unsigned_abs() as usize,
    };
    let mut matches = Vec::new();
    kt.members(LIST, db, key, direction, |row| {
        if bytes_of(&row[3]) == element {
            matches.push(position_of(&row));
        }
        matches.len() < limit
    })?;
    for &at in &matches {
        delete_at(kt, db, key, at).await?;
    }
    if let Some(&gap) = matches.iter().min() {
        let mut after = Vec::new();
        let index = kt.tables.lists.primary;
        let lower = [Value::Int64(gap)];
        kt.scan_members(
            LIST,
            index,
            db,
            key,
            Direction::Forward,
            Bound::Included(&lower),
            Bound::Unbounded,
            |row| {
                after.push(row);
                true
            },
        )?;
        for (next, mut row) in (gap..).zip(after) {
            let at = position_of(&row);
            if at != next {
                row[2] = Value::Int64(next);
                kt.write_member(LIST, db, key, Value::Int64(at), |_| {
                    RowWrite::Put(row.clone(), ())
                })
                .await?;
            }
        }
    }
    close_if_empty(kt, db, key).await?;
    w.integer(matches.len() as i64);
    Ok(())
}
