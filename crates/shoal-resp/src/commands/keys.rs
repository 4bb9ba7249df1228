//! Commands on keys of any type: DEL, UNLINK, EXISTS, TYPE, the EXPIRE family, TTL, PTTL,
//! PERSIST, RENAME, RENAMENX, KEYS, SCAN, RANDOMKEY, DBSIZE, FLUSHDB and FLUSHALL.

use super::strings::{expiry_at, Out};
use super::{parse_integer, Args, NOT_AN_INTEGER, SYNTAX_ERROR};
use crate::client::Client;
use shoal_storage::types::Value;
use shoal_storage::Direction;

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

/// SCAN cursor [MATCH pattern] [COUNT n] [TYPE type]: COUNT keys in key order from where the
/// cursor left off (`ScanCursors`), those that match in the reply.
fn scan(kt: &KeyTxn, db: u16, args: &Args<'_>, w: &mut ReplyWriter<'_>) -> KeyResult<()> {
    let Some(cursor) = std::str::from_utf8(args.get(1))
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    else {
        w.error("ERR invalid cursor");
        return Ok(());
    };
    let (mut pattern, mut count, mut type_name) = (None, 10usize, None);
    let mut i = 2;
    while i < args.len() {
        if i + 1 >= args.len() {
            w.error(SYNTAX_ERROR);
            return Ok(());
        }
        match args.word(i).as_str() {
            "match" => pattern = Some(args.get(i + 1).to_vec()),
            "count" => match parse_integer(args.get(i + 1)) {
                Some(n) if n >= 1 => count = n as usize,
                Some(_) => {
                    w.error(SYNTAX_ERROR);
                    return Ok(());
                }
                None => {
                    w.error(NOT_AN_INTEGER);
                    return Ok(());
                }
            },
            "type" => type_name = Some(args.word(i + 1)),
            _ => {
                w.error(SYNTAX_ERROR);
                return Ok(());
            }
        }
        i += 2;
    }
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
        if pattern
            .as_deref()
            .is_none_or(|p| crate::glob::matches(p, key))
            && type_name.as_deref().is_none_or(|t| t == e.key_type.name())
        {
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
