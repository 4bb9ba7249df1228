//! Sorted set commands: ZADD (NX, XX, GT, LT, CH, INCR), ZINCRBY, ZREM, ZSCORE, ZMSCORE,
//! ZCARD, ZCOUNT, ZRANK, ZREVRANK, ZRANGE (by rank or BYSCORE, REV, LIMIT, WITHSCORES),
//! ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZREVRANGE, ZPOPMIN, ZPOPMAX, ZREMRANGEBYSCORE and
//! ZREMRANGEBYRANK. A sorted set's members are rows of `redis.zsets`; its order (score, then
//! member bytes, as Redis's) is the index on `(db, key, score, member)`.

use std::ops::Bound;

use shoal_storage::types::Value;
use shoal_storage::Direction;

use super::{answered, bytes_of, parse_integer, Args, NOT_AN_INTEGER, SYNTAX_ERROR, WRONG_TYPE};
use crate::client::Client;
use crate::keyspace::{Entry, Intent, KeyResult, KeyTxn, KeyType, Opened, RowWrite, Write};
use crate::protocol::{Protocol, ReplyWriter};

const ZSET: KeyType = KeyType::ZSet;
const NOT_A_FLOAT: &str = "ERR value is not a valid float";
const BAD_RANGE: &str = "ERR min or max is not a float";
const NAN_SCORE: &str = "ERR resulting score is not a number (NaN)";

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
        "zadd" => zadd(kt, db, args, 2, false, w).await,
        "zincrby" => zadd(kt, db, args, 2, true, w).await,
        "zrem" => zrem(kt, db, args, w).await,
        "zscore" => (|| {
            // Missing or expired: an empty collection, whatever rows are left.
            if answered(kt.find(db, key, ZSET)?, w, |w| w.null()) {
                return Ok(());
            }
            match score_of(kt, db, key, args.get(2))? {
                Some(s) => w.double(s),
                None => w.null(),
            }
            Ok(())
        })(),
        "zmscore" => (|| {
            match kt.find(db, key, ZSET)? {
                Opened::WrongType => {
                    w.error(WRONG_TYPE);
                    return Ok(());
                }
                // Missing or expired: an empty collection, whatever rows are left.
                Opened::Missing => {
                    w.array(args.len() - 2);
                    for _ in 2..args.len() {
                        w.null();
                    }
                    return Ok(());
                }
                Opened::Ready => {}
            }
            w.array(args.len() - 2);
            for i in 2..args.len() {
                match score_of(kt, db, key, args.get(i))? {
                    Some(s) => w.double(s),
                    None => w.null(),
                }
            }
            Ok(())
        })(),
        "zcard" => match kt.find(db, key, ZSET) {
            Ok(Opened::WrongType) => {
                w.error(WRONG_TYPE);
                Ok(())
            }
            Ok(Opened::Missing) => {
                w.integer(0);
                Ok(())
            }
            Ok(Opened::Ready) => kt.count_members(ZSET, db, key).map(|n| w.integer(n as i64)),
            Err(e) => Err(e),
        },
        "zcount" => (|| {
            let Some(range) = ScoreRange::parse(args.get(2), args.get(3)) else {
                w.error(BAD_RANGE);
                return Ok(());
            };
            // Missing or expired: an empty collection, whatever rows are left.
            if answered(kt.find(db, key, ZSET)?, w, |w| w.integer(0)) {
                return Ok(());
            }
            let mut n = 0;
            scan_scores(kt, db, key, &range, Direction::Forward, |_| {
                n += 1;
                true
            })?;
            w.integer(n);
            Ok(())
        })(),
        "zrank" | "zrevrank" => (|| {
            // Missing or expired: an empty collection, whatever rows are left.
            if answered(kt.find(db, key, ZSET)?, w, |w| w.null()) {
                return Ok(());
            }
            let m = args.get(2);
            let Some(score) = score_of(kt, db, key, m)? else {
                w.null();
                return Ok(());
            };
            // The members before it in the set's order (after it, for ZREVRANK).
            let at = [Value::Float64(score), Value::Bytea(m.to_vec())];
            let (lower, upper) = match name {
                "zrank" => (Bound::Unbounded, Bound::Excluded(&at[..])),
                _ => (Bound::Excluded(&at[..]), Bound::Unbounded),
            };
            let mut n = 0;
            let index = kt.tables.zsets_by_score;
            kt.scan_members(
                ZSET,
                index,
                db,
                key,
                Direction::Forward,
                lower,
                upper,
                |_| {
                    n += 1;
                    true
                },
            )?;
            w.integer(n);
            Ok(())
        })(),
        "zrange" | "zrangebyscore" | "zrevrangebyscore" | "zrevrange" => {
            zrange(kt, db, name, args, w)
        }
        "zrangestore" => zrangestore(kt, db, args, w).await,
        "zpopmin" | "zpopmax" => zpop(kt, db, name, args, w).await,
        "zremrangebyscore" | "zremrangebyrank" => zremrange(kt, db, name, args, w).await,
        _ => return None,
    };
    Some(result)
}

fn zset_row(db: u16, key: &[u8], member: &[u8], score: f64) -> Vec<Value> {
    // -0 is kept as 0 (so it sorts with 0), as Redis's compact sets read it back.
    let score = if score == 0.0 { 0.0 } else { score };
    vec![
        Value::Int16(db as i16),
        Value::Bytea(key.to_vec()),
        Value::Bytea(member.to_vec()),
        Value::Float64(score),
    ]
}

fn score_in(row: &[Value]) -> f64 {
    match row[3] {
        Value::Float64(s) => s,
        _ => unreachable!("redis.zsets.score is a double precision"),
    }
}

fn score_of(kt: &KeyTxn, db: u16, key: &[u8], m: &[u8]) -> KeyResult<Option<f64>> {
    let row = kt.member(ZSET, db, key, Value::Bytea(m.to_vec()))?;
    Ok(row.map(|r| score_in(&r)))
}

/// A score as Redis's `strtod` check reads it: a whole argument, no leading space, not NaN,
/// not out of a double's range ("inf" and "-inf" are scores).
fn parse_score(bytes: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(bytes).ok()?;
    if text.is_empty() || text.starts_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let value: f64 = text.parse().ok()?;
    let spelled_infinite = text
        .trim_start_matches(['+', '-'])
        .to_ascii_lowercase()
        .starts_with("inf");
    let underflowed = value == 0.0
        && text
            .bytes()
            .take_while(|b| *b != b'e' && *b != b'E')
            .any(|b| (b'1'..=b'9').contains(&b));
    if value.is_nan() || (value.is_infinite() && !spelled_infinite) || underflowed {
        return None;
    }
    Some(value)
}

/// A range of scores, as ZRANGEBYSCORE and ZCOUNT take it: `min max`, each inclusive unless
/// written `(x`.
struct ScoreRange {
    min: f64,
    min_excluded: bool,
    max: f64,
    max_excluded: bool,
}

impl ScoreRange {
    fn parse(min: &[u8], max: &[u8]) -> Option<ScoreRange> {
        // Redis's `zslParseRange`: `(` alone is an exclusive 0, and -0 is 0.
        let bound = |b: &[u8]| -> Option<(f64, bool)> {
            let (rest, excluded) = match b.strip_prefix(b"(") {
                Some(rest) => (rest, true),
                None => (b, false),
            };
            let value = match rest.is_empty() && excluded {
                true => 0.0,
                false => {
                    let text = std::str::from_utf8(rest).ok()?;
                    let v: f64 = text.trim_start().parse().ok()?;
                    if v.is_nan() {
                        return None;
                    }
                    v
                }
            };
            Some((if value == 0.0 { 0.0 } else { value }, excluded))
        };
        let (min, min_excluded) = bound(min)?;
        let (max, max_excluded) = bound(max)?;
        Some(ScoreRange {
            min,
            min_excluded,
            max,
            max_excluded,
        })
    }

    fn is_empty(&self) -> bool {
        self.min > self.max || (self.min == self.max && (self.min_excluded || self.max_excluded))
    }
}

/// Visits the members with scores in `range`, in the set's order or its reverse.
fn scan_scores(
    kt: &KeyTxn,
    db: u16,
    key: &[u8],
    range: &ScoreRange,
    direction: Direction,
    f: impl FnMut(Vec<Value>) -> bool,
) -> KeyResult<()> {
    if range.is_empty() {
        return Ok(());
    }
    let (min, max) = ([Value::Float64(range.min)], [Value::Float64(range.max)]);
    let lower = match range.min_excluded {
        true => Bound::Excluded(&min[..]),
        false => Bound::Included(&min[..]),
    };
    let upper = match range.max_excluded {
        true => Bound::Excluded(&max[..]),
        false => Bound::Included(&max[..]),
    };
    let index = kt.tables.zsets_by_score;
    kt.scan_members(ZSET, index, db, key, direction, lower, upper, f)
}

/// The members from rank `start` to `stop` (inclusive, already clamped), in the set's order
/// or its reverse.
fn scan_ranks(
    kt: &KeyTxn,
    db: u16,
    key: &[u8],
    (start, stop): (i64, i64),
    direction: Direction,
    mut f: impl FnMut(Vec<Value>),
) -> KeyResult<()> {
    let mut rank = 0;
    let index = kt.tables.zsets_by_score;
    let all = Bound::Unbounded;
    kt.scan_members(ZSET, index, db, key, direction, all, all, |row| {
        if rank >= start {
            f(row);
        }
        rank += 1;
        rank <= stop
    })
}

/// Writes `members` (member, score) as Z*RANGE WITHSCORES does: member and score in turn in
/// RESP2, a [member, score] pair each in RESP3.
fn write_scored(w: &mut ReplyWriter<'_>, members: &[(Vec<u8>, f64)], with_scores: bool) {
    let pairs = with_scores && w.protocol == Protocol::Resp3;
    match (with_scores, pairs) {
        (false, _) => w.array(members.len()),
        (true, false) => w.array(2 * members.len()),
        (true, true) => w.array(members.len()),
    }
    for (m, score) in members {
        if pairs {
            w.array(2);
        }
        w.bulk(m);
        if with_scores {
            w.double(*score);
        }
    }
}

fn scored(row: Vec<Value>) -> (Vec<u8>, f64) {
    let score = score_in(&row);
    (bytes_of(&row[2]).to_vec(), score)
}

/// ZADD key [NX | XX] [GT | LT] [CH] [INCR] score member [score member ...], and ZINCRBY key
/// increment member (ZADD INCR), with Redis's checks in Redis's order.
async fn zadd(
    kt: &mut KeyTxn,
    db: u16,
    args: &Args<'_>,
    first: usize,
    zincrby: bool,
    w: &mut ReplyWriter<'_>,
) -> KeyResult<()> {
    let (mut nx, mut xx, mut gt, mut lt, mut ch, mut incr) =
        (false, false, false, false, false, zincrby);
    let mut i = first;
    while !zincrby && i < args.len() {
        match args.word(i).as_str() {
            "nx" => nx = true,
            "xx" => xx = true,
            "gt" => gt = true,
            "lt" => lt = true,
            "ch" => ch = true,
            "incr" => incr = true,
            _ => break,
        }
        i += 1;
    }
    let elements = args.len() - i;
    if !elements.is_multiple_of(2) || elements == 0 {
        w.error(SYNTAX_ERROR);
        return Ok(());
    }
    if nx && xx {
        w.error("ERR XX and NX options at the same time are not compatible");
        return Ok(());
    }
    if (nx && (gt || lt)) || (gt && lt) {
        w.error("ERR GT, LT, and/or NX options at the same time are not compatible");
        return Ok(());
    }
    if incr && elements > 2 {
        w.error("ERR INCR option supports a single increment-element pair");
        return Ok(());
    }
    let mut pairs = Vec::with_capacity(elements / 2);
    for j in (i..args.len()).step_by(2) {
        let Some(score) = parse_score(args.get(j)) else {
            w.error(NOT_A_FLOAT);
            return Ok(());
        };
        pairs.push((score, args.get(j + 1)));
    }
    let key = args.get(1);
    let intent = match xx {
        true => Intent::Change,
        false => Intent::Add,
    };
    match kt.open(db, key, ZSET, intent).await? {
        Opened::WrongType => {
            w.error(WRONG_TYPE);
            return Ok(());
        }
        Opened::Ready => {}
        Opened::Missing => {
            match incr {
                true => w.null(),
                false => w.integer(0),
            }
            return Ok(());
        }
    }
    enum Added {
        Inserted(f64),
        Updated(f64),
        Same(f64),
        Nothing,
        NotANumber,
    }
    let (mut added, mut updated, mut last) = (0, 0, None);
    for (score, m) in pairs {
        let outcome = kt
            .write_member(ZSET, db, key, Value::Bytea(m.to_vec()), |row| {
                let Some(row) = row else {
                    return match xx {
                        true => RowWrite::Keep(Added::Nothing),
                        false => RowWrite::Put(zset_row(db, key, m, score), Added::Inserted(score)),
                    };
                };
                if nx {
                    return RowWrite::Keep(Added::Nothing);
                }
                let current = score_in(row);
                let new = match incr {
                    true => current + score,
                    false => score,
                };
                if new.is_nan() {
                    return RowWrite::Keep(Added::NotANumber);
                }
                if (lt && new >= current) || (gt && new <= current) {
                    return RowWrite::Keep(Added::Nothing);
                }
                match new == current {
                    true => RowWrite::Keep(Added::Same(new)),
                    false => RowWrite::Put(zset_row(db, key, m, new), Added::Updated(new)),
                }
            })
            .await?;
        match outcome {
            Added::Inserted(s) => {
                added += 1;
                last = Some(s);
            }
            Added::Updated(s) => {
                updated += 1;
                last = Some(s);
            }
            Added::Same(s) => last = Some(s),
            Added::Nothing => {}
            Added::NotANumber => {
                kt.close_if_empty(db, key, ZSET).await?;
                {
                    w.error(NAN_SCORE);
                    return Ok(());
                }
            }
        }
    }
    // ZADD XX or NX may have added nothing to a set it made.
    kt.close_if_empty(db, key, ZSET).await?;
    match (incr, last) {
        (true, Some(s)) => w.double(s),
        (true, None) => w.null(),
        (false, _) if ch => w.integer(added + updated),
        (false, _) => w.integer(added),
    }
    Ok(())
}

async fn remove(kt: &mut KeyTxn, db: u16, key: &[u8], m: &[u8]) -> KeyResult<i64> {
    kt.write_member(ZSET, db, key, Value::Bytea(m.to_vec()), |row| match row {
        Some(_) => RowWrite::Delete(1),
        None => RowWrite::Keep(0),
    })
    .await
}

async fn zrem(kt: &mut KeyTxn, db: u16, args: &Args<'_>, w: &mut ReplyWriter<'_>) -> KeyResult<()> {
    let key = args.get(1);
    if answered(kt.open(db, key, ZSET, Intent::Remove).await?, w, |w| {
        w.integer(0)
    }) {
        return Ok(());
    }
    let mut removed = 0;
    for i in 2..args.len() {
        removed += remove(kt, db, key, args.get(i)).await?;
    }
    kt.close_if_empty(db, key, ZSET).await?;
    w.integer(removed);
    Ok(())
}

/// What a Z*RANGE* command asks for.
enum RangeBy {
    Rank(i64, i64),
    Score(ScoreRange),
}

/// ZRANGE key start stop [BYSCORE] [REV] [LIMIT offset count] [WITHSCORES], and the older
/// ZRANGEBYSCORE, ZREVRANGEBYSCORE and ZREVRANGE, parsed as Redis 7's `zrangeGenericCommand`
/// parses them. BYLEX is refused.
fn zrange(
    kt: &KeyTxn,
    db: u16,
    name: &str,
    args: &Args<'_>,
    w: &mut ReplyWriter<'_>,
) -> KeyResult<()> {
    match range_members(kt, db, name, args, 1)? {
        Ok((found, with_scores)) => write_scored(w, &found, with_scores),
        Err(e) => w.error(e),
    }
    Ok(())
}

/// ZRANGESTORE destination source min max [BYSCORE] [REV] [LIMIT offset count]: ZRANGE's
/// members, with their scores, as the sorted set `destination` (whatever it held before).
async fn zrangestore(
    kt: &mut KeyTxn,
    db: u16,
    args: &Args<'_>,
    w: &mut ReplyWriter<'_>,
) -> KeyResult<()> {
    let found = match range_members(kt, db, "zrangestore", args, 2)? {
        Ok((found, _)) => found,
        Err(e) => {
            w.error(e);
            return Ok(());
        }
    };
    let destination = args.get(1);
    kt.write(db, destination, |_| Write::Delete(())).await?;
    if !found.is_empty() {
        let empty = Entry {
            key_type: ZSET,
            value: Vec::new(),
            expires_at_us: None,
        };
        kt.write(db, destination, |_| Write::Put(empty.clone(), ()))
            .await?;
        for (m, score) in &found {
            let row = zset_row(db, destination, m, *score);
            kt.write_member(ZSET, db, destination, Value::Bytea(m.clone()), |_| {
                RowWrite::Put(row.clone(), ())
            })
            .await?;
        }
    }
    w.integer(found.len() as i64);
    Ok(())
}

/// The members (with scores) a ZRANGE-family command asks for, and whether it asked for the
/// scores; or Redis's error reply. The source key is argument `at`, its range and options
/// follow.
fn range_members(
    kt: &KeyTxn,
    db: u16,
    name: &str,
    args: &Args<'_>,
    at: usize,
) -> KeyResult<Result<(Vec<(Vec<u8>, f64)>, bool), &'static str>> {
    let (mut by_score, mut reverse) = match name {
        "zrangebyscore" => (Some(true), Some(false)),
        "zrevrangebyscore" => (Some(true), Some(true)),
        "zrevrange" => (Some(false), Some(true)),
        _ => (None, None),
    };
    let (mut with_scores, mut offset, mut limit) = (false, 0i64, -1i64);
    let mut i = at + 3;
    while i < args.len() {
        let left = args.len() - i - 1;
        match args.word(i).as_str() {
            "withscores" if name != "zrangestore" => with_scores = true,
            "limit" if left >= 2 => {
                match (
                    parse_integer(args.get(i + 1)),
                    parse_integer(args.get(i + 2)),
                ) {
                    (Some(o), Some(l)) => (offset, limit) = (o, l),
                    _ => return Ok(Err(NOT_AN_INTEGER)),
                }
                i += 2;
            }
            "rev" if reverse.is_none() => reverse = Some(true),
            "byscore" if by_score.is_none() => by_score = Some(true),
            "bylex" if by_score.is_none() => {
                return Ok(Err("ERR BYLEX ranges are not supported by Shoal"))
            }
            _ => return Ok(Err(SYNTAX_ERROR)),
        }
        i += 1;
    }
    let (by_score, reverse) = (by_score.unwrap_or(false), reverse.unwrap_or(false));
    if limit != -1 && !by_score {
        return Ok(Err(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    let (mut low, mut high) = (args.get(at + 1), args.get(at + 2));
    if reverse && by_score {
        std::mem::swap(&mut low, &mut high);
    }
    let range = match by_score {
        false => match (parse_integer(low), parse_integer(high)) {
            (Some(start), Some(stop)) => RangeBy::Rank(start, stop),
            _ => return Ok(Err(NOT_AN_INTEGER)),
        },
        true => match ScoreRange::parse(low, high) {
            Some(r) => RangeBy::Score(r),
            None => return Ok(Err(BAD_RANGE)),
        },
    };
    let key = args.get(at);
    match kt.find(db, key, ZSET)? {
        Opened::WrongType => return Ok(Err(WRONG_TYPE)),
        // Missing or expired: an empty collection, whatever rows are left.
        Opened::Missing => return Ok(Ok((Vec::new(), with_scores))),
        Opened::Ready => {}
    }
    let direction = match reverse {
        true => Direction::Backward,
        false => Direction::Forward,
    };
    let mut found = Vec::new();
    match range {
        RangeBy::Rank(start, stop) => {
            let len = kt.count_members(ZSET, db, key)? as i64;
            if let Some(ranks) = super::lists::clamp_range(start, stop, len) {
                scan_ranks(kt, db, key, ranks, direction, |row| found.push(scored(row)))?;
            }
        }
        // Redis's LIMIT: a negative offset gives nothing, a negative count everything.
        RangeBy::Score(range) if offset >= 0 => {
            let mut skipped = 0;
            scan_scores(kt, db, key, &range, direction, |row| {
                if limit >= 0 && found.len() as i64 >= limit {
                    return false;
                }
                match skipped < offset {
                    true => skipped += 1,
                    false => found.push(scored(row)),
                }
                true
            })?;
        }
        RangeBy::Score(_) => {}
    }
    Ok(Ok((found, with_scores)))
}

/// ZPOPMIN/ZPOPMAX key [count]: removes and returns the lowest (highest) members with their
/// scores.
async fn zpop(
    kt: &mut KeyTxn,
    db: u16,
    name: &str,
    args: &Args<'_>,
    w: &mut ReplyWriter<'_>,
) -> KeyResult<()> {
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
    let mut popped = Vec::new();
    match kt.open(db, key, ZSET, Intent::Remove).await? {
        Opened::WrongType => {
            w.error(WRONG_TYPE);
            return Ok(());
        }
        Opened::Missing => {}
        Opened::Ready => {
            let direction = match name {
                "zpopmin" => Direction::Forward,
                _ => Direction::Backward,
            };
            let wanted = count.unwrap_or(1);
            if wanted > 0 {
                scan_ranks(kt, db, key, (0, wanted as i64 - 1), direction, |row| {
                    popped.push(scored(row))
                })?;
            }
            for (m, _) in &popped {
                remove(kt, db, key, m).await?;
            }
            kt.close_if_empty(db, key, ZSET).await?;
        }
    }
    // Without a count, RESP3 has a flat [member, score] as RESP2 does.
    match (count, w.protocol) {
        (None, Protocol::Resp3) => {
            w.array(2 * popped.len());
            for (m, score) in &popped {
                w.bulk(m);
                w.double(*score);
            }
        }
        _ => write_scored(w, &popped, true),
    }
    Ok(())
}

/// ZREMRANGEBYSCORE key min max, ZREMRANGEBYRANK key start stop: the number removed.
async fn zremrange(
    kt: &mut KeyTxn,
    db: u16,
    name: &str,
    args: &Args<'_>,
    w: &mut ReplyWriter<'_>,
) -> KeyResult<()> {
    let range = match name {
        "zremrangebyscore" => match ScoreRange::parse(args.get(2), args.get(3)) {
            Some(r) => RangeBy::Score(r),
            None => {
                w.error(BAD_RANGE);
                return Ok(());
            }
        },
        _ => match (parse_integer(args.get(2)), parse_integer(args.get(3))) {
            (Some(start), Some(stop)) => RangeBy::Rank(start, stop),
            _ => {
                w.error(NOT_AN_INTEGER);
                return Ok(());
            }
        },
    };
    let key = args.get(1);
    if answered(kt.open(db, key, ZSET, Intent::Remove).await?, w, |w| {
        w.integer(0)
    }) {
        return Ok(());
    }
    let mut doomed = Vec::new();
    match range {
        RangeBy::Score(range) => scan_scores(kt, db, key, &range, Direction::Forward, |row| {
            doomed.push(scored(row).0);
            true
        })?,
        RangeBy::Rank(start, stop) => {
            let len = kt.count_members(ZSET, db, key)? as i64;
            if let Some(ranks) = super::lists::clamp_range(start, stop, len) {
                scan_ranks(kt, db, key, ranks, Direction::Forward, |row| {
                    doomed.push(scored(row).0)
                })?;
            }
        }
    }
    for m in &doomed {
        remove(kt, db, key, m).await?;
    }
    kt.close_if_empty(db, key, ZSET).await?;
    w.integer(doomed.len() as i64);
    Ok(())
}
