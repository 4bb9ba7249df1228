//! The commands: their table (name, arity, flags, key positions, as COMMAND reports them) and
//! the dispatch of one request to its implementation. Connection commands (`connection`) run
//! without the keyspace; key commands (`keys`, `strings`, `hashes`, `lists`, `sets`, `zsets`)
//! run in storage transactions shared by a pipeline's consecutive key commands (`Batch`),
//! committed as the server's `appendfsync` says when they wrote.

mod connection;
mod float;
mod hashes;
mod keys;
mod lists;
mod sets;
mod strings;
mod zsets;

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use crate::client::Client;
use crate::host::{AppendFsync, Host, Login};
use crate::keyspace::{KeyResult, KeyTxn, KeyspaceError, Opened};
use crate::protocol::{ReplyWriter, Request};

/// A command's arguments: the request's spans over the input buffer.
pub struct Args<'a> {
    pub buf: &'a [u8],
    pub req: &'a Request,
}

impl<'a> Args<'a> {
    pub fn len(&self) -> usize {
        self.req.len()
    }

    pub fn get(&self, i: usize) -> &'a [u8] {
        self.req.arg(self.buf, i)
    }

    /// Argument `i` lower-cased, for options (`EX`, `NX`) and subcommands.
    pub fn word(&self, i: usize) -> String {
        String::from_utf8_lossy(self.get(i)).to_ascii_lowercase()
    }
}

/// A command as COMMAND describes it. A negative arity is a minimum.
pub struct Spec {
    pub name: &'static str,
    pub arity: i32,
    pub flags: &'static [&'static str],
    pub first_key: i32,
    pub last_key: i32,
    pub step: i32,
}

const fn spec(
    name: &'static str,
    arity: i32,
    flags: &'static [&'static str],
    keys: (i32, i32, i32),
) -> Spec {
    Spec {
        name,
        arity,
        flags,
        first_key: keys.0,
        last_key: keys.1,
        step: keys.2,
    }
}

const W: &[&str] = &["write", "denyoom"];
const WF: &[&str] = &["write", "fast"];
const WDF: &[&str] = &["write", "denyoom", "fast"];
const R: &[&str] = &["readonly", "fast"];
const RS: &[&str] = &["readonly"];
const C: &[&str] = &["fast", "loading", "stale"];
const NONE: (i32, i32, i32) = (0, 0, 0);
const ONE: (i32, i32, i32) = (1, 1, 1);
const ALL: (i32, i32, i32) = (1, -1, 1);

/// Every command Shoal serves.
pub static COMMANDS: &[Spec] = &[
    spec(
        "auth",
        -2,
        &["noscript", "loading", "stale", "fast", "no_auth"],
        NONE,
    ),
    spec("ping", -1, C, NONE),
    spec("echo", 2, C, NONE),
    spec("hello", -1, C, NONE),
    spec("select", 2, C, NONE),
    spec("quit", -1, C, NONE),
    spec("reset", 1, C, NONE),
    spec("client", -2, C, NONE),
    spec("command", -1, C, NONE),
    spec("time", 1, C, NONE),
    spec(
        "config",
        -2,
        &["admin", "noscript", "loading", "stale"],
        NONE,
    ),
    spec("info", -1, &["loading", "stale"], NONE),
    spec("role", 1, &["noscript", "loading", "stale", "fast"], NONE),
    spec("dbsize", 1, R, NONE),
    spec("flushdb", -1, &["write"], NONE),
    spec("flushall", -1, &["write"], NONE),
    spec("get", 2, R, ONE),
    spec("set", -3, W, ONE),
    spec("setnx", 3, &["write", "denyoom", "fast"], ONE),
    spec("setex", 4, W, ONE),
    spec("psetex", 4, W, ONE),
    spec("getset", 3, &["write", "denyoom", "fast"], ONE),
    spec("getdel", 2, WF, ONE),
    spec("getex", -2, WF, ONE),
    spec("mget", -2, R, ALL),
    spec("mset", -3, W, (1, -1, 2)),
    spec("msetnx", -3, W, (1, -1, 2)),
    spec("incr", 2, &["write", "denyoom", "fast"], ONE),
    spec("decr", 2, &["write", "denyoom", "fast"], ONE),
    spec("incrby", 3, &["write", "denyoom", "fast"], ONE),
    spec("decrby", 3, &["write", "denyoom", "fast"], ONE),
    spec("incrbyfloat", 3, &["write", "denyoom", "fast"], ONE),
    spec("append", 3, &["write", "denyoom", "fast"], ONE),
    spec("strlen", 2, R, ONE),
    spec("getrange", 4, RS, ONE),
    spec("setrange", 4, W, ONE),
    spec("del", -2, &["write"], ALL),
    spec("unlink", -2, WF, ALL),
    spec("exists", -2, R, ALL),
    spec("type", 2, R, ONE),
    spec("expire", -3, WF, ONE),
    spec("pexpire", -3, WF, ONE),
    spec("expireat", -3, WF, ONE),
    spec("pexpireat", -3, WF, ONE),
    spec("ttl", 2, R, ONE),
    spec("pttl", 2, R, ONE),
    spec("persist", 2, WF, ONE),
    spec("rename", 3, &["write"], (1, 2, 1)),
    spec("multi", 1, &["noscript", "loading", "stale", "fast"], NONE),
    spec(
        "exec",
        1,
        &["noscript", "loading", "stale", "skip_slowlog"],
        NONE,
    ),
    spec(
        "discard",
        1,
        &["noscript", "loading", "stale", "fast"],
        NONE,
    ),
    spec("watch", -2, &["noscript", "loading", "stale", "fast"], ALL),
    spec(
        "unwatch",
        1,
        &["noscript", "loading", "stale", "fast"],
        NONE,
    ),
    spec("renamenx", 3, WF, (1, 2, 1)),
    spec("keys", 2, RS, NONE),
    spec("scan", -2, RS, NONE),
    spec("randomkey", 1, RS, NONE),
    spec("hscan", -3, RS, ONE),
    spec("sscan", -3, RS, ONE),
    spec("zscan", -3, RS, ONE),
    spec("hset", -4, WDF, ONE),
    spec("hsetnx", 4, WDF, ONE),
    spec("hmset", -4, WDF, ONE),
    spec("hget", 3, R, ONE),
    spec("hmget", -3, R, ONE),
    spec("hgetall", 2, RS, ONE),
    spec("hdel", -3, WF, ONE),
    spec("hlen", 2, R, ONE),
    spec("hexists", 3, R, ONE),
    spec("hkeys", 2, RS, ONE),
    spec("hvals", 2, RS, ONE),
    spec("hincrby", 4, WDF, ONE),
    spec("hincrbyfloat", 4, WDF, ONE),
    spec("hstrlen", 3, R, ONE),
    spec("lpush", -3, WDF, ONE),
    spec("rpush", -3, WDF, ONE),
    spec("lpushx", -3, WDF, ONE),
    spec("rpushx", -3, WDF, ONE),
    spec("lpop", -2, WF, ONE),
    spec("rpop", -2, WF, ONE),
    spec("lrange", 4, RS, ONE),
    spec("llen", 2, R, ONE),
    spec("lindex", 3, RS, ONE),
    spec("lset", 4, W, ONE),
    spec("lmove", 5, W, (1, 2, 1)),
    spec("rpoplpush", 3, W, (1, 2, 1)),
    spec("lrem", 4, &["write"], ONE),
    spec("ltrim", 4, &["write"], ONE),
    spec("sadd", -3, WDF, ONE),
    spec("srem", -3, WF, ONE),
    spec("smove", 4, WF, (1, 2, 1)),
    spec("spop", -2, WF, ONE),
    spec("srandmember", -2, RS, ONE),
    spec("smembers", 2, RS, ONE),
    spec("sismember", 3, R, ONE),
    spec("smismember", -3, R, ONE),
    spec("scard", 2, R, ONE),
    spec("sinter", -2, RS, ALL),
    spec("sunion", -2, RS, ALL),
    spec("sdiff", -2, RS, ALL),
    spec("sinterstore", -3, W, ALL),
    spec("sunionstore", -3, W, ALL),
    spec("sdiffstore", -3, W, ALL),
    spec("zadd", -4, WDF, ONE),
    spec("zincrby", 4, WDF, ONE),
    spec("zrem", -3, WF, ONE),
    spec("zscore", 3, R, ONE),
    spec("zmscore", -3, R, ONE),
    spec("zcard", 2, R, ONE),
    spec("zcount", 4, R, ONE),
    spec("zrank", 3, R, ONE),
    spec("zrevrank", 3, R, ONE),
    spec("zrange", -4, RS, ONE),
    spec("zrangebyscore", -4, RS, ONE),
    spec("zrevrangebyscore", -4, RS, ONE),
    spec("zrevrange", -4, RS, ONE),
    spec("zrangestore", -5, W, (1, 2, 1)),
    spec("zpopmin", -2, WF, ONE),
    spec("zpopmax", -2, WF, ONE),
    spec("zremrangebyscore", 4, &["write"], ONE),
    spec("zremrangebyrank", 4, &["write"], ONE),
];

/// The command named `name`, in any case.
pub fn find(name: &str) -> Option<&'static Spec> {
    find_bytes(name.as_bytes())
}

fn find_bytes(name: &[u8]) -> Option<&'static Spec> {
    COMMANDS
        .iter()
        .find(|s| s.name.as_bytes().eq_ignore_ascii_case(name))
}

/// The state every connection shares.
pub struct Server {
    pub host: Arc<dyn Host>,
    next_client_id: AtomicU64,
    /// `AppendFsync as u8`: CONFIG SET changes it while connections read it.
    appendfsync: AtomicU8,
    pub started: std::time::Instant,
    /// The port the Redis protocol is served on (INFO's `tcp_port`).
    pub port: u16,
    /// The role a client is before it logs in, and `AUTH password` logs in as (Redis's
    /// `default` user).
    pub default_user: String,
    connected_clients: AtomicU64,
}

/// Counts a connection in INFO's `connected_clients` while it lives.
pub struct Connected<'a>(&'a Server);

impl Drop for Connected<'_> {
    fn drop(&mut self) {
        self.0.connected_clients.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Server {
    pub fn new(
        host: Arc<dyn Host>,
        appendfsync: AppendFsync,
        port: u16,
        default_user: String,
    ) -> Server {
        Server {
            host,
            next_client_id: AtomicU64::new(1),
            appendfsync: AtomicU8::new(appendfsync as u8),
            started: std::time::Instant::now(),
            port,
            default_user,
            connected_clients: AtomicU64::new(0),
        }
    }

    /// A new connection's state, and the guard that counts it as connected.
    pub fn new_client(&self, addr: String) -> (Client, Connected<'_>) {
        self.connected_clients.fetch_add(1, Ordering::Relaxed);
        let id = self.next_client_id.fetch_add(1, Ordering::Relaxed);
        let mut client = Client::new(id, addr);
        client.user = self.trusted_default_user(&client);
        (client, Connected(self))
    }

    /// The default user, when pg_hba.conf lets this client in as it without a password.
    pub fn trusted_default_user(&self, client: &Client) -> Option<String> {
        let login = self.host.login(client.peer_ip, &self.default_user, None);
        (login == Login::Trusted).then(|| self.default_user.clone())
    }

    /// Whether the client's role may run `spec` now: a write or admin command (CONFIG SET
    /// appendfsync changes every client's durability) needs write access to the Redis tables,
    /// a read command or one that names keys (WATCH) read access.
    fn permits(&self, client: &mut Client, spec: &Spec) -> bool {
        let write = spec.flags.contains(&"write") || spec.flags.contains(&"admin");
        if !write && !spec.flags.contains(&"readonly") && spec.first_key == 0 {
            return true;
        }
        let Some(user) = &client.user else {
            return false;
        };
        let version = self.host.catalog_version();
        let access = match client.access {
            Some((v, access)) if v == version => access,
            _ => {
                let access = self.host.access(user);
                client.access = Some((version, access));
                access
            }
        };
        match write {
            true => access.write,
            false => access.read,
        }
    }

    pub fn connected_clients(&self) -> u64 {
        self.connected_clients.load(Ordering::Relaxed)
    }

    pub fn appendfsync(&self) -> AppendFsync {
        match self.appendfsync.load(Ordering::Relaxed) {
            0 => AppendFsync::Always,
            1 => AppendFsync::Everysec,
            _ => AppendFsync::No,
        }
    }

    pub fn set_appendfsync(&self, v: AppendFsync) {
        self.appendfsync.store(v as u8, Ordering::Relaxed)
    }
}

/// Runs one request, appending its reply to `out`. A key command joins `batch` (see
/// `Batch`); anything else first ends it, so the batch's replies are the last ones in `out`.
pub async fn execute(
    server: &Server,
    client: &mut Client,
    args: &Args<'_>,
    out: &mut Vec<u8>,
    batch: &mut Option<Batch>,
) {
    let spec = find_bytes(args.get(0));
    if let Some(spec) = spec.filter(|spec| runs_in_batch(server, client, spec, args)) {
        return run_in_batch(server, client, spec, args, out, batch).await;
    }
    end_batch(server, client, batch, out).await;
    let mut w = ReplyWriter::new(&mut *out, client.protocol);
    // Refused before it runs: a command queued after MULTI makes EXEC abort, as in Redis.
    let refuse = |client: &mut Client, w: &mut ReplyWriter<'_>, error: &str| {
        if client.multi.is_some() {
            client.multi_failed = true;
        }
        w.error(error);
    };
    let Some(spec) = spec else {
        return refuse(client, &mut w, &unknown_command(args));
    };
    let name = spec.name;
    // A client that has not logged in may only log in (or leave).
    if client.user.is_none() && !matches!(name, "auth" | "hello" | "quit" | "reset") {
        return refuse(client, &mut w, "NOAUTH Authentication required.");
    }
    if !arity_fits(spec, args) {
        return refuse(client, &mut w, &arity_error(spec.name));
    }
    if !server.permits(client, spec) {
        let error = format!("NOPERM this user has no permissions to run the '{name}' command");
        return refuse(client, &mut w, &error);
    }
    if refused_on_standby(server, spec) {
        return refuse(client, &mut w, READONLY_ERROR);
    }
    match name {
        "multi" => match client.multi {
            Some(_) => w.error("ERR MULTI calls can not be nested"),
            None => {
                client.multi = Some(Vec::new());
                w.ok();
            }
        },
        "discard" => match client.multi.take() {
            None => w.error("ERR DISCARD without MULTI"),
            Some(_) => {
                client.multi_failed = false;
                client.watched.clear();
                w.ok();
            }
        },
        "exec" => {
            drop(w);
            exec(server, client, out).await;
        }
        "watch" if client.multi.is_some() => w.error("ERR WATCH inside MULTI is not allowed"),
        "watch" => match watch(server, client, args) {
            Ok(()) => w.ok(),
            Err(e) => w.error(&format!("ERR {}", e.0)),
        },
        "unwatch" => {
            client.watched.clear();
            w.ok();
        }
        "quit" | "reset" => {
            client.multi = None;
            client.multi_failed = false;
            client.watched.clear();
            connection::execute(server, client, name, args, &mut w);
        }
        _ if client.multi.is_some() => {
            let mut bytes = Vec::new();
            let mut request = Request::default();
            for i in 0..args.len() {
                let at = bytes.len();
                bytes.extend_from_slice(args.get(i));
                request.args.push(at..bytes.len());
            }
            client
                .multi
                .as_mut()
                .expect("in MULTI")
                .push((bytes, request));
            w.simple("QUEUED");
        }
        _ => {
            let handled = connection::execute(server, client, name, args, &mut w);
            debug_assert!(handled, "key commands run in batches");
        }
    }
}

fn arity_fits(spec: &Spec, args: &Args<'_>) -> bool {
    let n = args.len() as i32;
    (spec.arity > 0 && n == spec.arity) || (spec.arity < 0 && n >= -spec.arity)
}

/// A key command, outside MULTI, that the client may run now.
fn runs_in_batch(server: &Server, client: &mut Client, spec: &Spec, args: &Args<'_>) -> bool {
    let touches_keys = spec.flags.contains(&"write") || spec.flags.contains(&"readonly");
    touches_keys
        && client.multi.is_none()
        && client.user.is_some()
        && arity_fits(spec, args)
        && server.permits(client, spec)
        && !refused_on_standby(server, spec)
}

/// Redis's answer to a write on a read-only replica.
const READONLY_ERROR: &str = "READONLY You can't write against a read only replica.";

/// A write command on a standby: refused (before MULTI queues it, so EXEC then aborts), as a
/// Redis replica with `replica-read-only yes` does.
fn refused_on_standby(server: &Server, spec: &Spec) -> bool {
    spec.flags.contains(&"write") && server.host.read_only()
}

/// The key commands of one read of a pipeline, run in one storage transaction and committed
/// together before their replies are written: one commit for the run, not one per command.
/// Each command still behaves as if it ran alone:
/// - it reads at a snapshot taken when it starts, which has every commit before it, and sees
///   the batch's earlier commands;
/// - it runs under a savepoint, so an error undoes its own writes only;
/// - only the batch's first command may wait for another transaction's lock. A later one
///   would wait while holding the earlier commands' locks, and two batches could wait for
///   each other; instead the batch is committed up to it, and it runs again first in a new
///   batch;
/// - once the batch has written, other clients see none of it until the commit, so a later
///   read of a row another client is changing could be ordered both before that change (it
///   missed it) and after it (that client may have read ours, had it been committed). A
///   read-only command therefore starts a new batch after writes, and a write command joins
///   only if it reads nothing it does not lock (`reads_under_locks`); its reads of rows it
///   leaves unchanged then take share locks (`KeyTxn::next_command`).
pub struct Batch {
    kt: KeyTxn,
    /// Commands in the batch, each with one reply in `out` from `replies_at` on.
    commands: usize,
    replies_at: usize,
    /// Every command so far was read-only.
    read_only: bool,
}

/// Commands a batch holds at most, so that locks are held for a bounded time.
const BATCH_COMMANDS_MAX: usize = 1000;

/// Write commands whose every read is of a row they write or lock (a key's row, or members
/// under their key's lock): they may join a batch that has written. See `Batch`.
fn reads_under_locks(name: &str) -> bool {
    matches!(
        name,
        "set"
            | "setnx"
            | "setex"
            | "psetex"
            | "getset"
            | "getdel"
            | "getex"
            | "mset"
            | "incr"
            | "decr"
            | "incrby"
            | "decrby"
            | "incrbyfloat"
            | "append"
            | "setrange"
            | "del"
            | "unlink"
            | "expire"
            | "pexpire"
            | "expireat"
            | "pexpireat"
            | "persist"
            | "hset"
            | "hmset"
            | "hsetnx"
            | "hdel"
            | "hincrby"
            | "hincrbyfloat"
            | "lpush"
            | "rpush"
            | "lpop"
            | "rpop"
            | "sadd"
            | "srem"
            | "spop"
            | "zadd"
            | "zincrby"
            | "zrem"
            | "zpopmin"
            | "zpopmax"
    )
}

/// Runs the key command `spec` in `batch`, starting one if there is none (see `Batch`).
async fn run_in_batch(
    server: &Server,
    client: &mut Client,
    spec: &Spec,
    args: &Args<'_>,
    out: &mut Vec<u8>,
    batch: &mut Option<Batch>,
) {
    if let Some(b) = batch {
        let joins = !b.kt.wrote || reads_under_locks(spec.name);
        if !joins || b.commands >= BATCH_COMMANDS_MAX {
            end_batch(server, client, batch, out).await;
        }
    }
    loop {
        let b = match batch {
            Some(b) => b,
            None => match begin(server) {
                Ok(kt) => batch.insert(Batch {
                    kt,
                    commands: 0,
                    replies_at: out.len(),
                    read_only: true,
                }),
                Err(e) => {
                    return ReplyWriter::new(out, client.protocol).error(&format!("ERR {}", e.0))
                }
            },
        };
        let reply_at = out.len();
        // The first command reads at the snapshot the batch began with, and a read that
        // follows only reads at the same one: the batch's replies wait for its end in any
        // case. A read-only command needs no savepoint: it neither writes nor locks.
        let reads = spec.flags.contains(&"readonly");
        let fresh = b.commands > 0 && !(reads && b.read_only);
        b.read_only &= reads;
        b.kt.next_command(b.commands == 0, fresh);
        if !reads {
            b.kt.db.savepoint(&mut b.kt.txn, "");
        }
        let mut w = ReplyWriter::new(&mut *out, client.protocol);
        let ran = run_key_command(&mut b.kt, client, spec.name, args, &mut w).await;
        if ran.is_err() {
            out.truncate(reply_at);
        }
        if !reads {
            if ran.is_err() {
                let undone = b.kt.db.rollback_to_savepoint(&mut b.kt.txn, "");
                debug_assert!(undone.is_ok(), "the command's savepoint is there");
            }
            let released = b.kt.db.release_savepoint(&mut b.kt.txn, "");
            debug_assert!(released.is_ok(), "the command's savepoint is there");
        }
        match ran {
            Err(_) if b.kt.must_wait => {
                debug_assert!(b.commands > 0, "a batch's first command may wait");
                end_batch(server, client, batch, out).await;
            }
            Err(e) => {
                ReplyWriter::new(&mut *out, client.protocol).error(&format!("ERR {}", e.0));
                b.commands += 1;
                return;
            }
            Ok(()) => {
                b.commands += 1;
                return;
            }
        }
    }
}

/// Commits `batch` (when it wrote, waiting for the flush as the server's appendfsync says).
/// If the commit fails, each of its commands' replies becomes the error.
pub async fn end_batch(
    server: &Server,
    client: &Client,
    batch: &mut Option<Batch>,
    out: &mut Vec<u8>,
) {
    let Some(b) = batch.take() else {
        return;
    };
    if let Err(e) = finish(server, b.kt, Ok(true)).await {
        out.truncate(b.replies_at);
        let mut w = ReplyWriter::new(out, client.protocol);
        for _ in 0..b.commands {
            w.error(&format!("ERR {}", e.0));
        }
    }
}

/// A storage transaction for a key command (or for EXEC's commands).
fn begin(server: &Server) -> KeyResult<KeyTxn> {
    let tables = server.host.tables().map_err(KeyspaceError)?;
    Ok(KeyTxn::begin(server.host.database(), tables))
}

/// Ends `kt` after its commands `ran`: commits what they wrote (waiting for the flush as the
/// server's appendfsync says) when they ran to the end (`Ok(true)`), else rolls it back.
async fn finish(server: &Server, kt: KeyTxn, ran: KeyResult<bool>) -> KeyResult<bool> {
    match ran {
        Ok(true) if kt.wrote => {
            let wait = server.appendfsync() == AppendFsync::Always;
            server
                .host
                .commit(kt.txn, wait)
                .await
                .map_err(KeyspaceError)?;
            Ok(true)
        }
        other => {
            kt.db.rollback(kt.txn);
            other
        }
    }
}

/// Runs a key command (not a connection command) in `kt`.
async fn run_key_command(
    kt: &mut KeyTxn,
    client: &mut Client,
    name: &str,
    args: &Args<'_>,
    w: &mut ReplyWriter<'_>,
) -> KeyResult<()> {
    if let Some(r) = keys::execute(kt, client, name, args, w).await {
        return r;
    }
    if let Some(r) = strings::execute(kt, client, name, args, w).await {
        return r;
    }
    let ran = match name.as_bytes()[0] {
        b'h' => hashes::execute(kt, client, name, args, w).await,
        b'l' | b'r' => lists::execute(kt, client, name, args, w).await,
        b's' => sets::execute(kt, client, name, args, w).await,
        b'z' => zsets::execute(kt, client, name, args, w).await,
        _ => None,
    };
    ran.unwrap_or_else(|| {
        Err(KeyspaceError(format!(
            "command '{name}' is not implemented"
        )))
    })
}

/// EXEC's work in `kt`: false, with nothing done, when a WATCHed key has changed.
async fn exec_queued(
    server: &Server,
    client: &mut Client,
    kt: &mut KeyTxn,
    watched: &[(u16, Vec<u8>, Option<(u64, u64)>)],
    queued: &[(Vec<u8>, Request)],
    reply: &mut Vec<u8>,
) -> KeyResult<bool> {
    for (db, key, version) in watched {
        if !kt.still_at(*db, key, *version).await? {
            return Ok(false);
        }
    }
    ReplyWriter::new(&mut *reply, client.protocol).array(queued.len());
    for (bytes, request) in queued {
        let args = Args {
            buf: bytes,
            req: request,
        };
        let name = args.word(0);
        let mut w = ReplyWriter::new(&mut *reply, client.protocol);
        if connection::execute(server, client, &name, &args, &mut w) {
            continue;
        }
        run_key_command(kt, client, &name, &args, &mut w).await?;
    }
    Ok(true)
}

/// WATCH key...: notes each key's current version for EXEC to check.
fn watch(server: &Server, client: &mut Client, args: &Args<'_>) -> KeyResult<()> {
    let tables = server.host.tables().map_err(KeyspaceError)?;
    let db = server.host.database();
    let kt = KeyTxn::begin(db.clone(), tables);
    let noted: KeyResult<Vec<_>> = (1..args.len())
        .map(|i| {
            let key = args.get(i);
            Ok((client.db, key.to_vec(), kt.version(client.db, key)?))
        })
        .collect();
    db.rollback(kt.txn);
    client.watched.extend(noted?);
    Ok(())
}

/// EXEC: the queued commands, in one transaction, their replies in one array; nothing if a
/// command was refused when queued (EXECABORT) or a WATCHed key changed (a null array). A
/// command that fails as it runs gives its error in the array and the others still run, as
/// in Redis.
async fn exec(server: &Server, client: &mut Client, out: &mut Vec<u8>) {
    let Some(queued) = client.multi.take() else {
        ReplyWriter::new(out, client.protocol).error("ERR EXEC without MULTI");
        return;
    };
    let watched = std::mem::take(&mut client.watched);
    if std::mem::take(&mut client.multi_failed) {
        ReplyWriter::new(out, client.protocol)
            .error("EXECABORT Transaction discarded because of previous errors.");
        return;
    }
    let reply_start = out.len();
    let outcome = match begin(server) {
        Err(e) => Err(e),
        Ok(mut kt) => {
            let ran = exec_queued(server, client, &mut kt, &watched, &queued, out).await;
            finish(server, kt, ran).await
        }
    };
    if !matches!(outcome, Ok(true)) {
        out.truncate(reply_start);
    }
    let mut w = ReplyWriter::new(out, client.protocol);
    match outcome {
        Ok(true) => {}
        Ok(false) => w.null_array(),
        Err(e) => w.error(&format!("ERR {}", e.0)),
    }
}

/// Redis's reply to a command it does not know, with the first arguments quoted.
fn unknown_command(args: &Args<'_>) -> String {
    let mut text = format!(
        "ERR unknown command '{}', with args beginning with: ",
        String::from_utf8_lossy(args.get(0))
    );
    for i in 1..args.len() {
        text.push_str(&format!("'{}' ", String::from_utf8_lossy(args.get(i))));
    }
    text
}

/// Redis's reply to a command with the wrong number of arguments.
pub fn arity_error(name: &str) -> String {
    format!("ERR wrong number of arguments for '{name}' command")
}

/// The bytes of a bytea value of a row (an empty slice for anything else, which the tables'
/// NOT NULL constraints keep out).
pub fn bytes_of(value: &shoal_storage::types::Value) -> &[u8] {
    match value {
        shoal_storage::types::Value::Bytea(b) => b,
        _ => &[],
    }
}

/// For a collection command that cannot go on: answers WRONGTYPE for a key of another type, or
/// `missing`'s reply for a missing key, and returns true. False when the key is ready.
pub fn answered(
    opened: Opened,
    w: &mut ReplyWriter<'_>,
    missing: impl FnOnce(&mut ReplyWriter<'_>),
) -> bool {
    match opened {
        Opened::WrongType => {
            w.error(WRONG_TYPE);
            true
        }
        Opened::Missing => {
            missing(w);
            true
        }
        Opened::Ready => false,
    }
}

/// A count argument of SPOP, ZPOPMIN and the list pops: a non-negative integer.
pub fn positive_count(args: &Args<'_>, i: usize) -> Result<Option<usize>, &'static str> {
    if args.len() <= i {
        return Ok(None);
    }
    match parse_integer(args.get(i)) {
        Some(n) if n >= 0 => Ok(Some(n as usize)),
        _ => Err(MUST_BE_POSITIVE),
    }
}

/// Redis's reply for an argument that should be an integer.
pub const NOT_AN_INTEGER: &str = "ERR value is not an integer or out of range";
pub const SYNTAX_ERROR: &str = "ERR syntax error";
/// Redis's reply for a count (LPOP, SPOP, ZPOPMIN) that is negative or not a number.
pub const MUST_BE_POSITIVE: &str = "ERR value is out of range, must be positive";
pub const WRONG_TYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// An integer as Redis's `string2ll` reads one: optional `-`, digits without leading zeros,
/// in i64's range.
pub fn parse_integer(bytes: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(bytes).ok()?;
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
        || (s.starts_with('-') && digits == "0")
    {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_as_string2ll_reads_them() {
        assert_eq!(parse_integer(b"0"), Some(0));
        assert_eq!(parse_integer(b"-12"), Some(-12));
        assert_eq!(parse_integer(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_integer(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b"01"[..],
            b"+1",
            b" 1",
            b"1 ",
            b"",
            b"-",
            b"-0",
            b"9223372036854775808",
            b"1.0",
        ] {
            assert_eq!(
                parse_integer(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn the_table_has_each_command_once() {
        let mut names: Vec<&str> = COMMANDS.iter().map(|s| s.name).collect();
        names.sort();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before);
    }
}
