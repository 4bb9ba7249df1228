//! Hash commands: HSET, HSETNX, HMSET, HGET, HMGET, HGETALL, HDEL, HLEN, HEXISTS, HKEYS,
//! HVALS, HINCRBY, HINCRBYFLOAT and HSTRLEN. A hash's fields are rows of `redis.hashes`.

use shoal_storage::types::Value;
use shoal_storage::Direction;

use super::{answered, arity_error, bytes_of, parse_integer, Args, NOT_AN_INTEGER, WRONG_TYPE};
use crate::client::Client;
use crate::keyspace::{Intent, KeyResult, KeyTxn, KeyType, Opened, RowWrite};
use crate::protocol::ReplyWriter;

const HASH: KeyType = KeyType::Hash;

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
        "hset" | "hmset" => hset(kt, db, name, args, w).await,
        "hsetnx" => hsetnx(kt, db, args, w).await,
        "hincrby" | "hincrbyfloat" => hincrby(kt, db, name, args, w).await,
        "hdel" => hdel(kt, db, args, w).await,
        "hget" | "hexists" | "hstrlen" => (|| {
            match kt.find(db, key, HASH)? {
                Opened::WrongType => {
                    w.error(WRONG_TYPE);
                    return Ok(());
                }
                Opened::Missing => {}
                Opened::Ready => {
                    if let Some(row) = kt.member(HASH, db, key, field(args.get(2)))? {
                        let value = bytes_of(&row[3]);
                        match name {
                            "hget" => w.bulk(value),
                            "hexists" => w.integer(1),
                            _ => w.integer(value.len() as i64),
                        }
                        return Ok(());
                    }
                }
            }
            match name {
                "hget" => w.null(),
                _ => w.integer(0),
            }
            Ok(())
        })(),
        "hmget" => (|| {
            let ready = match kt.find(db, key, HASH)? {
                Opened::WrongType => {
                    w.error(WRONG_TYPE);
                    return Ok(());
                }
                opened => opened == Opened::Ready,
            };
            w.array(args.len() - 2);
            for i in 2..args.len() {
                match ready {
                    true => match kt.member(HASH, db, key, field(args.get(i)))? {
                        Some(row) => w.bulk(bytes_of(&row[3])),
                        None => w.null(),
                    },
                    false => w.null(),
                }
            }
            Ok(())
        })(),
        "hlen" => match kt.find(db, key, HASH) {
            Ok(Opened::WrongType) => {
                w.error(WRONG_TYPE);
                Ok(())
            }
            Ok(Opened::Missing) => {
                w.integer(0);
                Ok(())
            }
            Ok(Opened::Ready) => kt.count_members(HASH, db, key).map(|n| w.integer(n as i64)),
            Err(e) => Err(e),
        },
        "hgetall" | "hkeys" | "hvals" => (|| {
            match kt.find(db, key, HASH)? {
                Opened::WrongType => {
                    w.error(WRONG_TYPE);
                    return Ok(());
                }
                // Missing or expired: an empty collection, whatever rows are left.
                Opened::Missing => {
                    match name {
                        "hgetall" => w.map(0),
                        _ => w.array(0),
                    };
                    return Ok(());
                }
                Opened::Ready => {}
            }
            let mut pairs = Vec::new();
            kt.members(HASH, db, key, Direction::Forward, |mut row| {
                let value = row.pop();
                let field = row.pop();
                pairs.push((field, value));
                true
            })?;
            match name {
                "hgetall" => w.map(pairs.len()),
                _ => w.array(pairs.len()),
            }
            for (field, value) in &pairs {
                let (field, value) = (field.as_ref(), value.as_ref());
                if name != "hvals" {
                    w.bulk(field.map_or(&[][..], bytes_of));
                }
                if name != "hkeys" {
                    w.bulk(value.map_or(&[][..], bytes_of));
                }
            }
            Ok(())
        })(),
        _ => return None,
    };
    Some(result)
}

fn field(name: &[u8]) -> Value {
    Value::Bytea(name.to_vec())
}

fn hash_row(db: u16, key: &[u8], field: &[u8], value: Vec<u8>) -> Vec<Value> {
    vec![
        Value::Int16(db as i16),
        Value::Bytea(key.to_vec()),
        Value::Bytea(field.to_vec()),
        Value::Bytea(value),
    ]
}

/// HSET key field value [field value ...] (the number of new fields), and HMSET (OK).
async fn hset(
    kt: &mut KeyTxn,
    db: u16,
    name: &str,
    args: &Args<'_>,
    w: &mut ReplyWriter<'_>,
) -> KeyResult<()> {
    if !args.len().is_multiple_of(2) {
        w.error(&arity_error(name));
        return Ok(());
    }
    let key = args.get(1);
    if kt.open(db, key, HASH, Intent::Add).await? == Opened::WrongType {
        w.error(WRONG_TYPE);
        return Ok(());
    }
    let mut added = 0;
    for i in (2..args.len()).step_by(2) {
        let (f, value) = (args.get(i), args.get(i + 1));
        added += kt
            .write_member(HASH, db, key, field(f), |row| {
                RowWrite::Put(
                    hash_row(db, key, f, value.to_vec()),
                    i64::from(row.is_none()),
                )
            })
            .await?;
    }
    match name {
        "hmset" => w.ok(),
        _ => w.integer(added),
    }
    Ok(())
}

async fn hsetnx(
    kt: &mut KeyTxn,
    db: u16,
    args: &Args<'_>,
    w: &mut ReplyWriter<'_>,
) -> KeyResult<()> {
    let (key, f, value) = (args.get(1), args.get(2), args.get(3));
    if kt.open(db, key, HASH, Intent::Add).await? == Opened::WrongType {
        w.error(WRONG_TYPE);
        return Ok(());
    }
    let added = kt
        .write_member(HASH, db, key, field(f), |row| match row {
            Some(_) => RowWrite::Keep(0),
            None => RowWrite::Put(hash_row(db, key, f, value.to_vec()), 1),
        })
        .await?;
    w.integer(added);
    Ok(())
}

async fn hdel(kt: &mut KeyTxn, db: u16, args: &Args<'_>, w: &mut ReplyWriter<'_>) -> KeyResult<()> {
    let key = args.get(1);
    if answered(kt.open(db, key, HASH, Intent::Remove).await?, w, |w| {
        w.integer(0)
    }) {
        return Ok(());
    }
    let mut removed = 0;
    for i in 2..args.len() {
        removed += kt
            .write_member(HASH, db, key, field(args.get(i)), |row| match row {
                Some(_) => RowWrite::Delete(1),
                None => RowWrite::Keep(0),
            })
            .await?;
    }
    kt.close_if_empty(db, key, HASH).await?;
    w.integer(removed);
    Ok(())
}

/// HINCRBY key field increment (64-bit integers) and HINCRBYFLOAT (Redis's long double
/// arithmetic, as INCRBYFLOAT).
async fn hincrby(
    kt: &mut KeyTxn,
    db: u16,
    name: &str,
    args: &Args<'_>,
    w: &mut ReplyWriter<'_>,
) -> KeyResult<()> {
    const NOT_A_FLOAT: &str = "ERR value is not a valid float";
    let (key, f) = (args.get(1), args.get(2));
    // The increment is checked before the key, as in Redis.
    let by_float = name == "hincrbyfloat";
    let (int_by, float_by) = match by_float {
        false => match parse_integer(args.get(3)) {
            Some(n) => (n, None),
            None => {
                w.error(NOT_AN_INTEGER);
                return Ok(());
            }
        },
        true => match super::float::parse(args.get(3)) {
            Some(v) if v.is_finite() => (0, Some(v)),
            Some(_) => {
                w.error("ERR value is NaN or Infinity");
                return Ok(());
            }
            None => {
                w.error(NOT_A_FLOAT);
                return Ok(());
            }
        },
    };
    if kt.open(db, key, HASH, Intent::Add).await? == Opened::WrongType {
        w.error(WRONG_TYPE);
        return Ok(());
    }
    enum Sum {
        Int(i64),
        Text(Vec<u8>),
        Error(&'static str),
    }
    let sum = kt
        .write_member(HASH, db, key, field(f), |row| {
            let current = row.map(|r| bytes_of(&r[3]));
            let (text, answer) = match float_by {
                None => {
                    let current = match current.map(parse_integer) {
                        None => 0,
                        Some(Some(n)) => n,
                        Some(None) => {
                            return RowWrite::Keep(Sum::Error("ERR hash value is not an integer"))
                        }
                    };
                    match current.checked_add(int_by) {
                        Some(n) => (n.to_string().into_bytes(), Sum::Int(n)),
                        None => {
                            return RowWrite::Keep(Sum::Error(
                                "ERR increment or decrement would overflow",
                            ))
                        }
                    }
                }
                Some(by) => {
                    let current = match current.map(super::float::parse) {
                        None => super::float::parse(b"0").expect("zero is a float"),
                        Some(Some(v)) => v,
                        Some(None) => {
                            return RowWrite::Keep(Sum::Error("ERR hash value is not a float"))
                        }
                    };
                    let sum = super::float::add(current, by);
                    if !sum.is_finite() {
                        return RowWrite::Keep(Sum::Error(
                            "ERR increment would produce NaN or Infinity",
                        ));
                    }
                    let text = super::float::format_human(sum).into_bytes();
                    (text.clone(), Sum::Text(text))
                }
            };
            RowWrite::Put(hash_row(db, key, f, text), answer)
        })
        .await?;
    match sum {
        Sum::Int(n) => w.integer(n),
        Sum::Text(t) => w.bulk(&t),
        Sum::Error(e) => w.error(e),
    }
    Ok(())
}
