//! String commands: GET, SET and its variants, MGET/MSET, INCR and its kin (INCRBYFLOAT in
//! `float`'s arithmetic), APPEND, STRLEN,
//! GETRANGE and SETRANGE, with Redis 7's replies and errors.

use super::{parse_integer, Args, NOT_AN_INTEGER, SYNTAX_ERROR, WRONG_TYPE};
use crate::client::Client;
use crate::keyspace::{Entry, KeyResult, KeyTxn, KeyType, Write};
use crate::protocol::ReplyWriter;

/// The longest string value (Redis's `proto-max-bulk-len`).
const STRING_MAX_BYTES: usize = 512 * 1024 * 1024;

/// A command's answer, decided inside a key's write and written after it.
pub(super) enum Out {
    Ok,
    Nil,
    Int(i64),
    Bulk(Vec<u8>),
    Error(String),
}

impl Out {
    pub(super) fn write(self, w: &mut ReplyWriter<'_>) {
        match self {
            Out::Ok => w.ok(),
            Out::Nil => w.null(),
            Out::Int(n) => w.integer(n),
            Out::Bulk(b) => w.bulk(&b),
            Out::Error(e) => w.error(&e),
        }
    }

    fn error(text: &str) -> Out {
        Out::Error(text.to_string())
    }
}

/// When a key's expiry is to be: an absolute time in microseconds, from an option's value.
/// None for a value Redis refuses (not positive, or past the range of a millisecond time).
pub(super) fn expiry_at(unit: &str, value: i64, now_us: i64) -> Option<i64> {
    let ms = match unit {
        "ex" | "exat" => value.checked_mul(1000)?,
        _ => value,
    };
    let at_ms = match unit {
        "ex" | "px" => ms.checked_add(now_us / 1000)?,
        _ => ms,
    };
    if value <= 0 {
        return None;
    }
    at_ms.checked_mul(1000)
}

pub(super) async fn execute(
    kt: &mut KeyTxn,
    client: &Client,
    name: &str,
    args: &Args<'_>,
    w: &mut ReplyWriter<'_>,
) -> Option<KeyResult<()>> {
    let db = client.db;
    let result = match name {
        "get" => get(kt, db, args.get(1)).map(|out| out.write(w)),
        "mget" => (|| {
            w.array(args.len() - 1);
            for i in 1..args.len() {
                match kt.get(db, args.get(i))? {
                    Some(e) if e.key_type == KeyType::String => w.bulk(&e.value),
                    _ => w.null(),
                }
            }
            Ok(())
        })(),
        "strlen" => kt.get(db, args.get(1)).map(|e| match e {
            None => w.integer(0),
            Some(e) if e.key_type != KeyType::String => w.error(WRONG_TYPE),
            Some(e) => w.integer(e.value.len() as i64),
        }),
        "getrange" => getrange(kt, db, args).map(|out| out.write(w)),
        "set" => set(kt, db, args).await.map(|out| out.write(w)),
        "setnx" => {
            let value = args.get(2).to_vec();
            kt.write(db, args.get(1), |e| match e {
                Some(_) => Write::Keep(Out::Int(0)),
                None => Write::Put(Entry::string(value.clone(), None), Out::Int(1)),
            })
            .await
            .map(|out| out.write(w))
        }
        "setex" | "psetex" => {
            let unit = if name == "setex" { "ex" } else { "px" };
            let Some(n) = parse_integer(args.get(2)) else {
                w.error(NOT_AN_INTEGER);
                return Some(Ok(()));
            };
            let Some(at) = expiry_at(unit, n, kt.now_us) else {
                w.error(&format!("ERR invalid expire time in '{name}' command"));
                return Some(Ok(()));
            };
            let value = args.get(3).to_vec();
            kt.write(db, args.get(1), |_| {
                Write::Put(Entry::string(value.clone(), Some(at)), Out::Ok)
            })
            .await
            .map(|out| out.write(w))
        }
        "getset" => {
            let value = args.get(2).to_vec();
            kt.write(db, args.get(1), |e| match e {
                Some(e) if e.key_type != KeyType::String => Write::Keep(Out::error(WRONG_TYPE)),
                old => Write::Put(
                    Entry::string(value.clone(), None),
                    old.map_or(Out::Nil, |e| Out::Bulk(e.value.clone())),
                ),
            })
            .await
            .map(|out| out.write(w))
        }
        "getdel" => kt
            .write(db, args.get(1), |e| match e {
                None => Write::Keep(Out::Nil),
                Some(e) if e.key_type != KeyType::String => Write::Keep(Out::error(WRONG_TYPE)),
                Some(e) => Write::Delete(Out::Bulk(e.value.clone())),
            })
            .await
            .map(|out| out.write(w)),
        "getex" => getex(kt, db, args).await.map(|out| out.write(w)),
        "mset" | "msetnx" => mset(kt, db, name, args).await.map(|out| out.write(w)),
        "incr" | "decr" | "incrby" | "decrby" => {
            let delta = match name {
                "incr" => Some(1),
                "decr" => Some(-1),
                _ => parse_integer(args.get(2)),
            };
            let delta = match (name, delta) {
                (_, None) => Err(NOT_AN_INTEGER),
                ("decrby", Some(i64::MIN)) => Err("ERR decrement would overflow"),
                ("decrby", Some(d)) => Ok(-d),
                (_, Some(d)) => Ok(d),
            };
            match delta {
                Err(e) => {
                    w.error(e);
                    Ok(())
                }
                Ok(delta) => incr_by(kt, db, args.get(1), delta)
                    .await
                    .map(|out| out.write(w)),
            }
        }
        "incrbyfloat" => incr_by_float(kt, db, args).await.map(|out| out.write(w)),
        "append" => {
            let tail = args.get(2).to_vec();
            kt.write(db, args.get(1), |e| match e {
                Some(e) if e.key_type != KeyType::String => Write::Keep(Out::error(WRONG_TYPE)),
                Some(e) if e.value.len() + tail.len() > STRING_MAX_BYTES => Write::Keep(
                    Out::error("ERR string exceeds maximum allowed size (proto-max-bulk-len)"),
                ),
                Some(e) => {
                    let mut value = e.value.clone();
                    value.extend_from_slice(&tail);
                    let len = value.len() as i64;
                    Write::Put(Entry::string(value, e.expires_at_us), Out::Int(len))
                }
                None => Write::Put(
                    Entry::string(tail.clone(), None),
                    Out::Int(tail.len() as i64),
                ),
            })
            .await
            .map(|out| out.write(w))
        }
        "setrange" => setrange(kt, db, args).await.map(|out| out.write(w)),
        _ => return None,
    };
    Some(result)
}

fn get(kt: &KeyTxn, db: u16, key: &[u8]) -> KeyResult<Out> {
    Ok(match kt.get(db, key)? {
        None => Out::Nil,
        Some(e) if e.key_type != KeyType::String => Out::error(WRONG_TYPE),
        Some(e) => Out::Bulk(e.value),
    })
}

/// SET key value [NX | XX] [GET] [EX s | PX ms | EXAT s | PXAT ms | KEEPTTL].
async fn set(kt: &mut KeyTxn, db: u16, args: &Args<'_>) -> KeyResult<Out> {
    let (mut nx, mut xx, mut get, mut keep_ttl) = (false, false, false, false);
    let mut expiry: Option<(String, i64)> = None;
    let mut i = 3;
    while i < args.len() {
        let word = args.word(i);
        let has_value = i + 1 < args.len();
        match word.as_str() {
            "nx" if !xx => nx = true,
            "xx" if !nx => xx = true,
            "get" => get = true,
            "keepttl" if expiry.is_none() => keep_ttl = true,
            "ex" | "px" | "exat" | "pxat" if expiry.is_none() && !keep_ttl && has_value => {
                let Some(n) = parse_integer(args.get(i + 1)) else {
                    return Ok(Out::error(NOT_AN_INTEGER));
                };
                expiry = Some((word.clone(), n));
                i += 1;
            }
            _ => return Ok(Out::error(SYNTAX_ERROR)),
        }
        i += 1;
    }
    let expires_at = match expiry {
        None => None,
        Some((unit, n)) => match expiry_at(&unit, n, kt.now_us) {
            Some(at) => Some(at),
            None => return Ok(Out::error("ERR invalid expire time in 'set' command")),
        },
    };
    let value = args.get(2).to_vec();
    kt.write(db, args.get(1), |old| {
        if get && old.is_some_and(|e| e.key_type != KeyType::String) {
            return Write::Keep(Out::error(WRONG_TYPE));
        }
        let answer = match get {
            true => old.map_or(Out::Nil, |e| Out::Bulk(e.value.clone())),
            false => Out::Ok,
        };
        if (nx && old.is_some()) || (xx && old.is_none()) {
            return Write::Keep(if get { answer } else { Out::Nil });
        }
        let ttl = match keep_ttl {
            true => old.and_then(|e| e.expires_at_us),
            false => expires_at,
        };
        Write::Put(Entry::string(value.clone(), ttl), answer)
    })
    .await
}

/// GETEX key [EX s | PX ms | EXAT s | PXAT ms | PERSIST].
async fn getex(kt: &mut KeyTxn, db: u16, args: &Args<'_>) -> KeyResult<Out> {
    enum Change {
        None,
        Persist,
        At(i64),
    }
    let change = match args.len() {
        2 => Change::None,
        3 if args.word(2) == "persist" => Change::Persist,
        4 => {
            let unit = args.word(2);
            if !matches!(unit.as_str(), "ex" | "px" | "exat" | "pxat") {
                return Ok(Out::error(SYNTAX_ERROR));
            }
            let Some(n) = parse_integer(args.get(3)) else {
                return Ok(Out::error(NOT_AN_INTEGER));
            };
            match expiry_at(&unit, n, kt.now_us) {
                Some(at) => Change::At(at),
                None => return Ok(Out::error("ERR invalid expire time in 'getex' command")),
            }
        }
        _ => return Ok(Out::error(SYNTAX_ERROR)),
    };
    let now = kt.now_us;
    kt.write(db, args.get(1), |e| match e {
        None => Write::Keep(Out::Nil),
        Some(e) if e.key_type != KeyType::String => Write::Keep(Out::error(WRONG_TYPE)),
        Some(e) => {
            let answer = Out::Bulk(e.value.clone());
            match change {
                Change::None => Write::Keep(answer),
                Change::Persist if e.expires_at_us.is_none() => Write::Keep(answer),
                Change::Persist => Write::Put(Entry::string(e.value.clone(), None), answer),
                Change::At(at) if at <= now => Write::Delete(answer),
                Change::At(at) => Write::Put(Entry::string(e.value.clone(), Some(at)), answer),
            }
        }
    })
    .await
}

async fn mset(kt: &mut KeyTxn, db: u16, name: &str, args: &Args<'_>) -> KeyResult<Out> {
    if args.len() % 2 == 0 {
        return Ok(Out::Error(format!(
            "ERR wrong number of arguments for '{name}' command"
        )));
    }
    if name == "msetnx" {
        for i in (1..args.len()).step_by(2) {
            if kt.get(db, args.get(i))?.is_some() {
                return Ok(Out::Int(0));
            }
        }
    }
    for i in (1..args.len()).step_by(2) {
        let value = args.get(i + 1).to_vec();
        kt.write(db, args.get(i), |_| {
            Write::Put(Entry::string(value.clone(), None), ())
        })
        .await?;
    }
    Ok(match name {
        "msetnx" => Out::Int(1),
        _ => Out::Ok,
    })
}

async fn incr_by(kt: &mut KeyTxn, db: u16, key: &[u8], delta: i64) -> KeyResult<Out> {
    kt.write(db, key, |e| {
        let (current, ttl) = match e {
            None => (0, None),
            Some(e) if e.key_type != KeyType::String => return Write::Keep(Out::error(WRONG_TYPE)),
            Some(e) => match parse_integer(&e.value) {
                Some(n) => (n, e.expires_at_us),
                None => return Write::Keep(Out::error(NOT_AN_INTEGER)),
            },
        };
        match current.checked_add(delta) {
            None => Write::Keep(Out::error("ERR increment or decrement would overflow")),
            Some(n) => Write::Put(Entry::string(n.to_string().into_bytes(), ttl), Out::Int(n)),
        }
    })
    .await
}

/// INCRBYFLOAT key increment, in Redis's long double arithmetic (`float`).
async fn incr_by_float(kt: &mut KeyTxn, db: u16, args: &Args<'_>) -> KeyResult<Out> {
    const NOT_A_FLOAT: &str = "ERR value is not a valid float";
    let increment = super::float::parse(args.get(2));
    kt.write(db, args.get(1), |e| {
        let (current, ttl) = match e {
            Some(e) if e.key_type != KeyType::String => return Write::Keep(Out::error(WRONG_TYPE)),
            Some(e) => match super::float::parse(&e.value) {
                Some(v) => (v, e.expires_at_us),
                None => return Write::Keep(Out::error(NOT_A_FLOAT)),
            },
            None => (super::float::parse(b"0").expect("zero is a float"), None),
        };
        let Some(increment) = increment else {
            return Write::Keep(Out::error(NOT_A_FLOAT));
        };
        let sum = super::float::add(current, increment);
        if !sum.is_finite() {
            return Write::Keep(Out::error("ERR increment would produce NaN or Infinity"));
        }
        let text = super::float::format_human(sum).into_bytes();
        Write::Put(Entry::string(text.clone(), ttl), Out::Bulk(text))
    })
    .await
}

/// GETRANGE key start end: inclusive byte offsets, negative ones from the end.
fn getrange(kt: &KeyTxn, db: u16, args: &Args<'_>) -> KeyResult<Out> {
    let (Some(mut start), Some(mut end)) = (parse_integer(args.get(2)), parse_integer(args.get(3)))
    else {
        return Ok(Out::error(NOT_AN_INTEGER));
    };
    let value = match kt.get(db, args.get(1))? {
        None => return Ok(Out::Bulk(Vec::new())),
        Some(e) if e.key_type != KeyType::String => return Ok(Out::error(WRONG_TYPE)),
        Some(e) => e.value,
    };
    let len = value.len() as i64;
    if start < 0 && end < 0 && start > end {
        return Ok(Out::Bulk(Vec::new()));
    }
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    end = end.max(0).min(len - 1);
    if start > end || len == 0 {
        return Ok(Out::Bulk(Vec::new()));
    }
    Ok(Out::Bulk(value[start as usize..=end as usize].to_vec()))
}

/// SETRANGE key offset value: overwrites from `offset`, padding with zero bytes.
async fn setrange(kt: &mut KeyTxn, db: u16, args: &Args<'_>) -> KeyResult<Out> {
    let Some(offset) = parse_integer(args.get(2)) else {
        return Ok(Out::error(NOT_AN_INTEGER));
    };
    if offset < 0 {
        return Ok(Out::error("ERR offset is out of range"));
    }
    let part = args.get(3).to_vec();
    let offset = offset as usize;
    kt.write(db, args.get(1), |e| {
        let (mut value, ttl) = match e {
            Some(e) if e.key_type != KeyType::String => return Write::Keep(Out::error(WRONG_TYPE)),
            Some(e) => (e.value.clone(), e.expires_at_us),
            None if part.is_empty() => return Write::Keep(Out::Int(0)),
            None => (Vec::new(), None),
        };
        if part.is_empty() {
            return Write::Keep(Out::Int(value.len() as i64));
        }
        if offset + part.len() > STRING_MAX_BYTES {
            return Write::Keep(Out::error(
                "ERR string exceeds maximum allowed size (proto-max-bulk-len)",
            ));
        }
        if value.len() < offset + part.len() {
            value.resize(offset + part.len(), 0);
        }
        value[offset..offset + part.len()].copy_from_slice(&part);
        let len = value.len() as i64;
        Write::Put(Entry::string(value, ttl), Out::Int(len))
    })
    .await
}
