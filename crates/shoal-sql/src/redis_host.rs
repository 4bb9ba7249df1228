//! The Redis front end's view of the server (`shoal_resp::host::Host`): Shoal's storage, the
//! tables of the `redis` schema, and commits through the redo log.
//!
//! The tables are ordinary row tables, made here through SQL the first time the Redis protocol
//! is served, so SQL sees and changes the same data: `SELECT * FROM redis.keys` lists the keys,
//! and an `UPDATE redis.keys` is what the next GET returns. Their CHECK constraints hold what
//! the Redis side assumes of a row written by SQL.

use std::sync::Arc;

use parking_lot::RwLock;
use std::net::IpAddr;

use shoal_auth::hba::Method;
use shoal_auth::Verifier;
use shoal_resp::host::{Access, BoxFuture, Host, Login, Replication, Standby};
use shoal_resp::keyspace::{self, Members, Tables};
use shoal_storage::catalog::{ConstraintKind, RelationKind};
use shoal_storage::catalog_privileges::{ObjectClass, Privileges};
use shoal_storage::{Database, Transaction};

use crate::engine::Engine;
use crate::error::{SqlError, SqlResult};
use crate::session::Session;

/// The schema of the Redis data and its tables, as SQL makes them. `redis.keys` holds one row
/// per key: its database number (0-15), its name, its type, a string's value, and when it
/// expires (absolute, so a restart keeps it). A hash, list, set or sorted set has one row per
/// member in its type's table; deleting its key from SQL deletes them (the foreign keys). A
/// sorted set's order is the index on `(db, key, score, member)`; `score = score` keeps NaN
/// out, as Redis does.
const SCHEMA_SQL: &str = "
CREATE SCHEMA IF NOT EXISTS redis;
CREATE TABLE IF NOT EXISTS redis.keys (
    db smallint NOT NULL CHECK (db BETWEEN 0 AND 15),
    key bytea NOT NULL,
    type text NOT NULL CHECK (type IN ('string', 'hash', 'list', 'set', 'zset')),
    value bytea,
    expires_at timestamptz,
    PRIMARY KEY (db, key),
    CHECK ((type = 'string') = (value IS NOT NULL))
);
CREATE TABLE IF NOT EXISTS redis.hashes (
    db smallint NOT NULL,
    key bytea NOT NULL,
    field bytea NOT NULL,
    value bytea NOT NULL,
    PRIMARY KEY (db, key, field),
    FOREIGN KEY (db, key) REFERENCES redis.keys ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE TABLE IF NOT EXISTS redis.lists (
    db smallint NOT NULL,
    key bytea NOT NULL,
    position bigint NOT NULL,
    value bytea NOT NULL,
    PRIMARY KEY (db, key, position),
    FOREIGN KEY (db, key) REFERENCES redis.keys ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE TABLE IF NOT EXISTS redis.sets (
    db smallint NOT NULL,
    key bytea NOT NULL,
    member bytea NOT NULL,
    PRIMARY KEY (db, key, member),
    FOREIGN KEY (db, key) REFERENCES redis.keys ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE TABLE IF NOT EXISTS redis.zsets (
    db smallint NOT NULL,
    key bytea NOT NULL,
    member bytea NOT NULL,
    score double precision NOT NULL CHECK (score = score),
    PRIMARY KEY (db, key, member),
    FOREIGN KEY (db, key) REFERENCES redis.keys ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE INDEX IF NOT EXISTS zsets_by_score ON redis.zsets (db, key, score, member);
";

pub struct RedisHost {
    engine: Arc<Engine>,
    /// The secret behind the stand-in verifiers of roles that do not exist (see `login`).
    mock_secret: [u8; 32],
    /// The tables as found under a catalog version.
    tables: RwLock<Option<(u64, Arc<Tables>)>>,
}

impl RedisHost {
    /// Makes the `redis` schema and its tables if they are not there yet. A standby cannot:
    /// it finds them once they arrive by the log, and makes them itself if it is promoted
    /// before any primary did (a group's first primary, elected after its members started).
    pub async fn start(engine: Arc<Engine>) -> SqlResult<Arc<RedisHost>> {
        if engine.in_recovery() {
            let promoted = engine.clone();
            tokio::spawn(async move {
                while promoted.in_recovery() {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                if let Err(e) = make_schema(&promoted).await {
                    tracing::error!("cannot set up the redis schema: {}", e.message);
                }
            });
        } else {
            make_schema(&engine).await?;
        }
        let host = RedisHost {
            engine,
            mock_secret: Verifier::new_mock_secret(),
            tables: RwLock::new(None),
        };
        if !host.engine.in_recovery() {
            host.find_tables()?;
        }
        Ok(Arc::new(host))
    }

    fn find_tables(&self) -> SqlResult<Arc<Tables>> {
        // Every command asks: the catalog lock is taken only when the catalog changed.
        if let Some((v, tables)) = &*self.tables.read() {
            if *v == self.engine.catalog.version() {
                return Ok(tables.clone());
            }
        }
        let catalog = self.engine.catalog.read();
        let version = catalog.version;
        // A table, checked to have the columns the Redis side writes, and its primary key
        // on the first `key_columns` columns.
        let find = |name: &str, columns: &[&str], key_columns: usize| -> SqlResult<Members> {
            let missing = || SqlError::undefined_table(&format!("redis.{name}"));
            let Some((RelationKind::Table, oid)) = catalog.lookup("redis", name) else {
                return Err(missing());
            };
            let def = catalog.tables.get(&oid).ok_or_else(missing)?;
            let names: Vec<&str> = def.columns.iter().map(|c| c.name.as_str()).collect();
            if names != columns {
                return Err(SqlError::internal(format!(
                    "redis.{name} has columns {names:?}, not the ones the Redis protocol writes"
                )));
            }
            let key_columns: Vec<usize> = (0..key_columns).collect();
            let primary = def
                .constraints
                .iter()
                .find_map(|c| match &c.kind {
                    ConstraintKind::PrimaryKey { columns, index } if *columns == key_columns => {
                        Some(*index)
                    }
                    _ => None,
                })
                .ok_or_else(|| {
                    SqlError::internal(format!(
                        "redis.{name} has lost its primary key on {:?}",
                        &columns[..key_columns.len()]
                    ))
                })?;
            let table = self.engine.db.table(oid as u64).ok_or_else(missing)?;
            Ok(Members {
                table,
                primary: primary as u64,
            })
        };
        let keys = find("keys", &keyspace::KEYS_COLUMNS, 2)?;
        let zsets = find("zsets", &keyspace::ZSETS_COLUMNS, 3)?;
        // The sorted sets' order: the index on (db, key, score, member).
        let zsets_by_score = zsets
            .table
            .indexes()
            .iter()
            .find(|i| i.columns == [0, 1, 3, 2])
            .map(|i| i.id)
            .ok_or_else(|| {
                SqlError::internal("redis.zsets has lost its index on (db, key, score, member)")
            })?;
        let tables = Arc::new(Tables {
            keys: keys.table,
            keys_primary: keys.primary,
            hashes: find("hashes", &keyspace::HASHES_COLUMNS, 3)?,
            lists: find("lists", &keyspace::LISTS_COLUMNS, 3)?,
            sets: find("sets", &keyspace::SETS_COLUMNS, 3)?,
            zsets,
            zsets_by_score,
            list_ends: Default::default(),
            // A key is a key whatever else changed: iterations go on.
            scan_cursors: match &*self.tables.read() {
                Some((_, old)) => old.scan_cursors.clone(),
                None => Default::default(),
            },
        });
        *self.tables.write() = Some((version, tables.clone()));
        Ok(tables)
    }
}

async fn make_schema(engine: &Arc<Engine>) -> SqlResult<()> {
    let mut session = Session::new(engine.clone());
    for result in session.execute_sql(SCHEMA_SQL).await {
        result?;
    }
    Ok(())
}

/// The host of a replication address (`host:port`, `[v6]:port`).
fn host_of(addr: &str) -> String {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _port)| host);
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_string()
}

impl Host for RedisHost {
    fn database(&self) -> Arc<Database> {
        self.engine.db.clone()
    }

    fn tables(&self) -> Result<Arc<Tables>, String> {
        self.find_tables().map_err(|e| e.message)
    }

    fn login(&self, peer: Option<IpAddr>, user: &str, password: Option<&[u8]>) -> Login {
        // What the rule and the role say, read under the catalog lock; the password's hashing
        // (thousands of rounds) runs after it is released.
        let (method, verifier) = {
            let hba = self.engine.hba.current();
            let catalog = self.engine.catalog.read();
            let is_member = |member: &str, role: &str| match (
                catalog.role_named(member),
                catalog.role_named(role),
            ) {
                (Some(m), Some(r)) => catalog.is_member_of(m.oid, r.oid),
                _ => false,
            };
            // A Redis connection is a TCP connection without TLS, to the database `redis`.
            let client = shoal_auth::hba::Client {
                local: peer.is_none(),
                ssl: false,
                address: peer,
                database: "redis",
                user,
            };
            let Some(rule) = hba.find(&client, &is_member) else {
                return Login::Refused;
            };
            let role = catalog.role_named(user);
            if role.is_some_and(|r| !r.login) {
                return Login::Refused;
            }
            let verifier = role
                .filter(|r| r.password_valid_now())
                .and_then(|r| r.password.as_deref())
                .and_then(Verifier::parse);
            (rule.method, role.map(|_| verifier))
        };
        match method {
            Method::Trust if verifier.is_some() => Login::Trusted,
            Method::ScramSha256 | Method::Md5 | Method::Password => {
                // A role that does not exist (or has no usable password) costs the same
                // hashing as one that does, so the time does not tell which roles exist.
                let verifier = verifier
                    .flatten()
                    .unwrap_or_else(|| Verifier::mock(user, &self.mock_secret));
                // (A stand-in's secret is random: no password matches it.)
                let matches = password
                    .and_then(|p| std::str::from_utf8(p).ok())
                    .is_some_and(|p| verifier.matches(p));
                match matches {
                    true => Login::Password,
                    false => Login::Refused,
                }
            }
            _ => Login::Refused,
        }
    }

    fn access(&self, user: &str) -> Access {
        let catalog = self.engine.catalog.read();
        let Some(role) = catalog.role_named(user) else {
            return Access::default();
        };
        let Some(schema) = catalog.schemas.get("redis") else {
            return Access::default();
        };
        let usage = catalog
            .privileges_of(role.oid, (ObjectClass::Schema, schema.oid), None)
            .contains(Privileges::USAGE);
        let (mut read, mut write) = (usage, usage);
        let writes =
            Privileges::SELECT | Privileges::INSERT | Privileges::UPDATE | Privileges::DELETE;
        for table in ["keys", "hashes", "lists", "sets", "zsets"] {
            let Some((RelationKind::Table, oid)) = catalog.lookup("redis", table) else {
                return Access::default();
            };
            let held = catalog.privileges_of(
                role.oid,
                (ObjectClass::Relation, oid),
                Some(RelationKind::Table),
            );
            read &= held.contains(Privileges::SELECT);
            write &= held.contains(writes);
        }
        Access { read, write }
    }

    fn catalog_version(&self) -> u64 {
        self.engine.catalog.version()
    }

    fn read_only(&self) -> bool {
        self.engine.in_recovery()
    }

    fn replication(&self) -> Replication {
        let replica = self.engine.replica.get();
        if let Some(replica) = replica.filter(|_| self.engine.in_recovery()) {
            return Replication::Standby {
                applied: replica.applied().borrow().end_lsn,
                primary_host: replica.leader_addr().map(|(_, addr)| host_of(&addr)),
            };
        }
        let log_end = self
            .engine
            .durability
            .as_ref()
            .map_or(0, |d| d.wal.next_lsn());
        let standbys = replica.map_or_else(Vec::new, |r| {
            r.followers()
                .into_iter()
                .map(|f| Standby {
                    name: format!("node{}", f.node_id),
                    host: host_of(&f.addr),
                    flushed: f.flushed_lsn,
                })
                .collect()
        });
        Replication::Primary { log_end, standbys }
    }

    fn commit(&self, txn: Transaction, wait_for_flush: bool) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            match crate::session::commit_durably(&self.engine, txn, wait_for_flush, true).await {
                Ok(_) => Ok(()),
                Err((e, txn)) => {
                    if let Some(txn) = txn {
                        self.engine.db.rollback(txn);
                    }
                    Err(e.message)
                }
            }
        })
    }
}
