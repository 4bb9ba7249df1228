//! The active expiry cycle. Keys past their expiry are never returned (every read checks), but
//! their rows would stay until a write touched them; this background task deletes them, as
//! Redis's active expiry does. It sweeps the keys in key order, a bounded batch each tick
//! (its CPU budget), and deletes the expired ones it meets in one transaction, checking each
//! again as it deletes it (another client may have set the key since).

use std::sync::Arc;
use std::time::Duration;

use crate::commands::Server;
use crate::keyspace::{KeyResult, KeyTxn, Write};

/// Keys looked at per tick.
const KEYS_PER_TICK: usize = 2_000;
/// Time between ticks: 10 a second, as Redis's default `hz`.
const TICK: Duration = Duration::from_millis(100);

/// Runs the cycle for as long as the server does.
pub async fn run(server: Arc<Server>) {
    let mut cursor: Option<(u16, Vec<u8>)> = None;
    let mut ticks = tokio::time::interval(TICK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        // A standby deletes nothing: the primary's deletions of expired keys reach it by the
        // log, and its reads skip expired keys meanwhile (as a Redis replica's).
        if server.host.read_only() {
            cursor = None;
            continue;
        }
        match tick(&server, cursor.as_ref()).await {
            Ok(next) => cursor = next,
            // The tables may be being dropped and made again: try again next tick.
            Err(_) => cursor = None,
        }
    }
}

/// One tick: sweeps a batch from `cursor` and deletes what expired; the next cursor (None:
/// start over).
pub async fn tick(
    server: &Server,
    cursor: Option<&(u16, Vec<u8>)>,
) -> KeyResult<Option<(u16, Vec<u8>)>> {
    let tables = server
        .host
        .tables()
        .map_err(crate::keyspace::KeyspaceError)?;
    let mut kt = KeyTxn::begin(server.host.database(), tables);
    let batch = kt.sweep(cursor, KEYS_PER_TICK);
    let batch = match batch {
        Ok(b) => b,
        Err(e) => {
            kt.db.rollback(kt.txn);
            return Err(e);
        }
    };
    let next = match batch.len() < KEYS_PER_TICK {
        true => None,
        false => batch.last().map(|(k, _)| k.clone()),
    };
    for ((db, key), expired) in &batch {
        if !expired {
            continue;
        }
        // Deletes the row only if it is still there and expired (see `KeyTxn::write`).
        let deleted = kt
            .write(*db, key, |e| match e {
                None => Write::Delete(()),
                Some(_) => Write::Keep(()),
            })
            .await;
        if let Err(e) = deleted {
            kt.db.rollback(kt.txn);
            return Err(e);
        }
    }
    match kt.wrote {
        true => server
            .host
            .commit(kt.txn, false)
            .await
            .map_err(crate::keyspace::KeyspaceError)?,
        false => kt.db.rollback(kt.txn),
    }
    Ok(next)
}
