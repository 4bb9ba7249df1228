//! Commands on keys of any type: DEL, UNLINK, EXISTS, TYPE, the EXPIRE family, TTL, PTTL,
//! PERSIST, RENAME, RENAMENX, KEYS, SCAN, RANDOMKEY, DBSIZE, FLUSHDB and FLUSHALL.

use super::strings::{expiry_at, Out};
use super::{answered, bytes_of, parse_integer, Args, NOT_AN_INTEGER, SYNTAX_ERROR};
use crate::client::Client;
use shoal_storage::types::Value;
use shoal_storage::Direction;
use std::ops::Bound;

use crate::keyspace::{Entry, Intent, KeyResult, KeyTxn, KeyType, Opened, RowWrite, Write};
use crate::protocol::ReplyWriter;

pub(super) async fn execute(
    kt: &mut KeyTxn,
    client: &Client,
    name: &str,
    args: &Args<'_>,
    w: &mut ReplyWriter<'_>,
) -> Option<KeyResult<()>> {
    let db = client.db;
    let result = match name {
        "del" | "unlink" => delete_keys(kt, db, args).await.map(|n| w.integer(n)),
        "exists" => (|| {
            let mut n = 0;
            for i in 1..args.len() {
                n += i64::from(kt.get(db, args.get(i))?.is_some());
            }
            w.integer(n);
            Ok(())
        })(),
        "type" => kt.get(db, args.get(1)).map(|e| match e {
            Some(e) => w.simple(e.key_type.name()),
            None => w.simple("none"),
        }),
        "expire" | "pexpire" | "expireat" | "pexpireat" => {
            expire(kt, db, name, args).await.map(|out| out.write(w))
        }
        "ttl" | "pttl" => kt.get(db, args.get(1)).map(|e| {
            w.integer(match e {
                None => -2,
                Some(Entry {
                    expires_at_us: None,
                    ..
                }) => -1,
                Some(Entry {
                    expires_at_us: Some(at),
                    ..
                }) => {
                    let ms = (at - kt.now_us).max(0) / 1000;
                    match name {
                        "pttl" => ms,
                        _ => (ms + 500) / 1000,
                    }
                }
            })
        }),
        "persist" => kt
            .write(db, args.get(1), |e| match e {
                Some(e) if e.expires_at_us.is_some() => {
                    let mut kept = e.clone();
                    kept.expires_at_us = None;
                    Write::Put(kept, 1)
                }
                _ => Write::Keep(0),
            })
            .await
            .map(|n| w.integer(n)),
        "rename" | "renamenx" => rename(kt, db, name, args).await.map(|out| out.write(w)),
        "keys" => {
            let pattern = args.get(1);
            let mut found = Vec::new();
            kt.scan(Some(db), |_, key, _| {
                if crate::glob::matches(pattern, key) {
                    found.push(key.to_vec());
                }
                true
            });
            w.array(found.len());
            for k in found {
                w.bulk(&k);
            }
            Ok(())
        }
        "scan" => scan(kt, db, args, w),
        "hscan" | "sscan" | "zscan" => scan_members(kt, db, name, args, w),
        "randomkey" => {
            let mut keys = Vec::new();
            kt.scan(Some(db), |_, key, _| {
                keys.push(key.to_vec());
                true
            });
            match keys.is_empty() {
                true => w.null(),
                false => {
                    let pick = (crate::keyspace::now_us() as u64 as usize) % keys.len();
                    w.bulk(&keys[pick]);
                }
            }
            Ok(())
        }
        "dbsize" => {
            let mut n = 0;
            kt.scan(Some(db), |_, _, _| {
                n += 1;
                true
            });
            w.integer(n);
            Ok(())
        }
        "flushdb" | "flushall" => {
            let flush_arg_ok = args.len() == 1
                || (args.len() == 2 && matches!(args.word(1).as_str(), "async" | "sync"));
            if !flush_arg_ok {
                w.error(SYNTAX_ERROR);
                return Some(Ok(()));
            }
            let only = (name == "flushdb").then_some(db);
            let mut keys = Vec::new();
            kt.scan(only, |d, key, _| {
                keys.push((d, key.to_vec()));
                true
            });
            for (d, key) in keys {
                if let Err(e) = kt.write(d, &key, |_| Write::Delete(())).await {
                    return Some(Err(e));
                }
            }
            w.ok();
            Ok(())
        }
        _ => return None,
    };
    Some(result)
}

async fn delete_keys(kt: &mut KeyTxn, db: u16, args: &Args<'_>) -> KeyResult<i64> {
    let mut n = 0;
    for i in 1..args.len() {
        n += kt
            .write(db, args.get(i), |e| match e {
                Some(_) => Write::Delete(1),
                None => Write::Delete(0),
            })
            .await?;
    }
    Ok(n)
}

/// EXPIRE key seconds [NX | XX | GT | LT] and its siblings in milliseconds and absolute time.
async fn expire(kt: &mut KeyTxn, db: u16, name: &str, args: &Args<'_>) -> KeyResult<Out> {
    let Some(n) = parse_integer(args.get(2)) else {
        return Ok(Out::Error(NOT_AN_INTEGER.into()));
    };
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for i in 3..args.len() {
        match args.word(i).as_str() {
            "nx" => nx = true,
            "xx" => xx = true,
            "gt" => gt = true,
            "lt" => lt = true,
            _ => {
                return Ok(Out::Error(format!(
                    "ERR Unsupported option {}",
                    String::from_utf8_lossy(args.get(i))
                )));
            }
        }
    }
    if nx && (xx || gt || lt) {
        return Ok(Out::Error(
            "ERR NX and XX, GT or LT options at the same time are not compatible".into(),
        ));
    }
    if gt && lt {
        return Ok(Out::Error(
            "ERR GT and LT options at the same time are not compatible".into(),
        ));
    }
    let unit = match name {
        "expire" => "ex",
        "pexpire" => "px",
        "expireat" => "exat",
        _ => "pxat",
    };
    // A time in the past (zero and negative included) deletes the key; only overflow is an
    // error.
    let at = match expiry_at(unit, n, kt.now_us) {
        Some(at) => at,
        None if n <= 0 => i64::MIN,
        None => {
            return Ok(Out::Error(format!(
                "ERR invalid expire time in '{name}' command"
            )))
        }
    };
    let now = kt.now_us;
    kt.write(db, args.get(1), |e| {
        let Some(e) = e else {
            return Write::Keep(Out::Int(0));
        };
        let current = e.expires_at_us;
        let allowed = match (nx, xx, gt, lt, current) {
            (true, _, _, _, Some(_)) => false,
            (_, true, _, _, None) => false,
            // No expiry is forever: nothing is greater, everything is less.
            (_, _, true, _, None) => false,
            (_, _, true, _, Some(c)) => at > c,
            (_, _, _, true, Some(c)) => at < c,
            _ => true,
        };
        if !allowed {
            return Write::Keep(Out::Int(0));
        }
        if at <= now {
            return Write::Delete(Out::Int(1));
        }
        let mut kept = e.clone();
        kept.expires_at_us = Some(at);
        Write::Put(kept, Out::Int(1))
    })
    .await
}

/// RENAME key newkey / RENAMENX: the value (or members), type and expiry move to the new
/// name.
async fn rename(kt: &mut KeyTxn, db: u16, name: &str, args: &Args<'_>) -> KeyResult<Out> {
    let (from, to) = (args.get(1), args.get(2));
    let Some(entry) = kt.get(db, from)? else {
        return Ok(Out::Error("ERR no such key".into()));
    };
    if from == to {
        return Ok(match name {
            "renamenx" => Out::Int(0),
            _ => Out::Ok,
        });
    }
    if name == "renamenx" && kt.get(db, to)?.is_some() {
        return Ok(Out::Int(0));
    }
    // A collection's members move too. The old value of `to` goes first, with its members.
    let mut members = Vec::new();
    if entry.key_type != KeyType::String {
        // Locked first, so no add to it commits between the copy and the delete.
        if kt.open(db, from, entry.key_type, Intent::Remove).await? != Opened::Ready {
            return Ok(Out::Error("ERR no such key".into()));
        }
        kt.members(entry.key_type, db, from, Direction::Forward, |row| {
            members.push(row);
            true
        })?;
    }
    kt.write(db, to, |_| Write::Delete(())).await?;
    kt.write(db, to, |_| Write::Put(entry.clone(), ())).await?;
    for mut row in members {
        row[1] = Value::Bytea(to.to_vec());
        let sub = row[2].clone();
        kt.write_member(entry.key_type, db, to, sub, |_| {
            RowWrite::Put(row.clone(), ())
        })
        .await?;
    }
    kt.write(db, from, |_| Write::Delete(())).await?;
    Ok(match name {
        "renamenx" => Out::Int(1),
        _ => Out::Ok,
    })
}

/// The options of SCAN and its collection forms: MATCH pattern, COUNT n (how many keys or
/// members a call looks at) and, for SCAN only, TYPE type.
struct ScanOptions {
    pattern: Option<Vec<u8>>,
    count: usize,
    type_name: Option<String>,
}

impl ScanOptions {
    /// The cursor (argument `at`) and the options after it, or Redis's error reply.
    fn parse(
        args: &Args<'_>,
        at: usize,
        scans_keys: bool,
    ) -> Result<(u64, ScanOptions), &'static str> {
        let cursor = parse_cursor(args.get(at)).ok_or("ERR invalid cursor")?;
        let mut options = ScanOptions {
            pattern: None,
            count: 10,
            type_name: None,
        };
        let mut i = at + 1;
        while i < args.len() {
            if i + 1 >= args.len() {
                return Err(SYNTAX_ERROR);
            }
            match args.word(i).as_str() {
                "match" => options.pattern = Some(args.get(i + 1).to_vec()),
                "count" => match parse_integer(args.get(i + 1)) {
                    Some(n) if n >= 1 => options.count = n as usize,
                    Some(_) => return Err(SYNTAX_ERROR),
                    None => return Err(NOT_AN_INTEGER),
                },
                "type" if scans_keys => options.type_name = Some(args.word(i + 1)),
                _ => return Err(SYNTAX_ERROR),
            }
            i += 2;
        }
        Ok((cursor, options))
    }

    fn matches(&self, name: &[u8]) -> bool {
        self.pattern
            .as_deref()
            .is_none_or(|p| crate::glob::matches(p, name))
    }
}

/// A cursor as Redis reads one (C's `strtoul`): digits after an optional sign, a negative
/// number wrapping around, nothing else; None if it is not one or overflows.
fn parse_cursor(text: &[u8]) -> Option<u64> {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, text),
    };
    if digits.is_empty() {
        // `strtoul` converts nothing: an empty cursor is 0, a bare sign is not a number.
        return text.is_empty().then_some(0);
    }
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = std::str::from_utf8(digits).ok()?.parse::<u64>().ok()?;
    Some(if negative { n.wrapping_neg() } else { n })
}

/// SCAN cursor [MATCH pattern] [COUNT n] [TYPE type]: COUNT keys in key order from where the
/// cursor left off (`ScanCursors`), those that match in the reply.
fn scan(kt: &KeyTxn, db: u16, args: &Args<'_>, w: &mut ReplyWriter<'_>) -> KeyResult<()> {
    let (cursor, options) = match ScanOptions::parse(args, 1, true) {
        Ok(parsed) => parsed,
        Err(e) => {
            w.error(e);
            return Ok(());
        }
    };
    let (count, type_name) = (options.count, options.type_name.as_deref());
    let cursors = &kt.tables.scan_cursors;
    let resume = match cursor {
        0 => None,
        _ => cursors.resume(db, cursor),
    };
    let (mut visited, mut found, mut last) = (0usize, Vec::new(), None);
    kt.scan_db_from(db, resume.as_deref(), |key, e| {
        if visited == count {
            return false;
        }
        visited += 1;
        last = Some(key.to_vec());
        if options.matches(key) && type_name.is_none_or(|t| t == e.key_type.name()) {
            found.push(key.to_vec());
        }
        true
    })?;
    // The iteration is over once a call finds fewer keys than it may visit.
    let next = match last {
        Some(key) if visited == count => cursors.after(db, key),
        _ => 0,
    };
    w.array(2);
    w.bulk(next.to_string().as_bytes());
    w.array(found.len());
    for k in found {
        w.bulk(&k);
    }
    Ok(())
}

/// HSCAN, SSCAN and ZSCAN key cursor [MATCH pattern] [COUNT n]: COUNT members of the collection
/// in member order from where the cursor left off; a hash's fields with their values, a sorted
/// set's members with their scores (bulk strings, as Redis writes them here).
fn scan_members(
    kt: &KeyTxn,
    db: u16,
    name: &str,
    args: &Args<'_>,
    w: &mut ReplyWriter<'_>,
) -> KeyResult<()> {
    let t = match name {
        "hscan" => KeyType::Hash,
        "sscan" => KeyType::Set,
        _ => KeyType::ZSet,
    };
    let key = args.get(1);
    // Redis reads the cursor, then the key, and the options only for a key that exists.
    if parse_cursor(args.get(2)).is_none() {
        w.error("ERR invalid cursor");
        return Ok(());
    }
    if answered(kt.find(db, key, t)?, w, |w| {
        w.array(2);
        w.bulk(b"0");
        w.array(0);
    }) {
        return Ok(());
    }
    let (cursor, options) = match ScanOptions::parse(args, 2, false) {
        Ok(parsed) => parsed,
        Err(e) => {
            w.error(e);
            return Ok(());
        }
    };
    let cursors = &kt.tables.scan_cursors;
    let resume = match cursor {
        0 => None,
        _ => cursors
            .resume(db, cursor)
            .and_then(|place| member_after(&place, key)),
    };
    let after = resume.map(|m| [Value::Bytea(m)]);
    let lower = match &after {
        Some(sub) => Bound::Excluded(&sub[..]),
        None => Bound::Unbounded,
    };
    let primary = kt.tables.members(t).primary;
    let (mut visited, mut found, mut last) = (0usize, Vec::new(), None);
    kt.scan_members(
        t,
        primary,
        db,
        key,
        Direction::Forward,
        lower,
        Bound::Unbounded,
        |row| {
            if visited == options.count {
                return false;
            }
            visited += 1;
            let member = bytes_of(&row[2]).to_vec();
            if options.matches(&member) {
                let with = match (t, &row.get(3)) {
                    (KeyType::Hash, _) => Some(bytes_of(&row[3]).to_vec()),
                    (KeyType::ZSet, Some(Value::Float64(score))) => {
                        Some(crate::protocol::reply::format_double(*score).into_bytes())
                    }
                    _ => None,
                };
                found.push((member.clone(), with));
            }
            last = Some(member);
            true
        },
    )?;
    let next = match last {
        Some(member) if visited == options.count => cursors.after(db, member_place(key, &member)),
        _ => 0,
    };
    w.array(2);
    w.bulk(next.to_string().as_bytes());
    w.array(
        found
            .iter()
            .map(|(_, with)| 1 + usize::from(with.is_some()))
            .sum(),
    );
    for (member, with) in found {
        w.bulk(&member);
        if let Some(with) = with {
            w.bulk(&with);
        }
    }
    Ok(())
}

/// A member scan's place for `ScanCursors`: the collection's key (its length first) and the
/// last member returned.
fn member_place(key: &[u8], member: &[u8]) -> Vec<u8> {
    let mut place = (key.len() as u32).to_be_bytes().to_vec();
    place.extend_from_slice(key);
    place.extend_from_slice(member);
    place
}

/// The member a place goes on after, if the place is one of `key`'s.
fn member_after(place: &[u8], key: &[u8]) -> Option<Vec<u8>> {
    let (len, rest) = place.split_first_chunk::<4>()?;
    let (of, member) = rest.split_at_checked(u32::from_be_bytes(*len) as usize)?;
    (of == key).then(|| member.to_vec())
}
