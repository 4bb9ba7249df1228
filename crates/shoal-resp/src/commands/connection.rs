//! Commands about the connection and the server, which need no keyspace: AUTH, PING, ECHO,
//! HELLO, SELECT, QUIT, RESET, CLIENT, COMMAND, TIME, CONFIG and INFO.

use super::{find, parse_integer, Args, Server, COMMANDS, NOT_AN_INTEGER, SYNTAX_ERROR};
use crate::client::Client;
use crate::host::{AppendFsync, Login, Replication};
use crate::protocol::{Protocol, ReplyWriter};

/// The Redis version Shoal answers as (INFO, HELLO): the protocol and command semantics it
/// follows.
pub const REDIS_VERSION: &str = "7.0.15";
/// Databases SELECT takes (0 to 15).
pub const DATABASES: u16 = 16;

/// Runs `name` if it is a connection command; false if it is not one.
pub(super) fn execute(
    server: &Server,
    client: &mut Client,
    name: &str,
    args: &Args<'_>,
    w: &mut ReplyWriter<'_>,
) -> bool {
    match name {
        "ping" => match args.len() {
            1 => w.simple("PONG"),
            _ => w.bulk(args.get(1)),
        },
        "echo" => w.bulk(args.get(1)),
        "quit" => {
            client.closing = true;
            w.ok();
        }
        "select" => match parse_integer(args.get(1)) {
            None => w.error(NOT_AN_INTEGER),
            Some(n) if !(0..i64::from(DATABASES)).contains(&n) => {
                w.error("ERR DB index is out of range")
            }
            Some(n) => {
                client.db = n as u16;
                w.ok();
            }
        },
        "reset" => {
            client.db = 0;
            client.protocol = Protocol::Resp2;
            client.name = None;
            // Back to the default user, logged out unless pg_hba.conf trusts the client.
            client.user = server.trusted_default_user(client);
            client.access = None;
            w.protocol = Protocol::Resp2;
            w.simple("RESET");
        }
        "auth" => auth(server, client, args, w),
        "hello" => hello(server, client, args, w),
        "client" => client_command(client, args, w),
        "command" => command(args, w),
        "time" => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            w.array(2);
            w.bulk(now.as_secs().to_string().as_bytes());
            w.bulk(now.subsec_micros().to_string().as_bytes());
        }
        "config" => config(server, args, w),
        "info" => info(server, args, w),
        "role" => role(server, w),
        _ => return false,
    }
    true
}

/// HELLO [protover [AUTH user pass] [SETNAME name]]: switches the protocol and answers with
/// the server's description (a map).
const WRONG_PASSWORD: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// Logs the client in as `user` with `password`; false (and nothing changed) when refused.
fn log_in(server: &Server, client: &mut Client, user: &[u8], password: &[u8]) -> bool {
    let user = String::from_utf8_lossy(user).into_owned();
    match server.host.login(client.peer_ip, &user, Some(password)) {
        Login::Refused => false,
        Login::Trusted | Login::Password => {
            client.user = Some(user);
            client.access = None;
            true
        }
    }
}

/// AUTH [username] password: logs in as a Shoal role (the default user without a name).
fn auth(server: &Server, client: &mut Client, args: &Args<'_>, w: &mut ReplyWriter<'_>) {
    if args.len() > 3 {
        return w.error(SYNTAX_ERROR);
    }
    if args.len() == 2 {
        let default_user = server.default_user.as_bytes();
        // As Redis: a password for a default user that needs none is a configuration mistake.
        if server
            .host
            .login(client.peer_ip, &server.default_user, None)
            == Login::Trusted
        {
            return w.error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
        }
        return match log_in(server, client, default_user, args.get(1)) {
            true => w.ok(),
            false => w.error(WRONG_PASSWORD),
        };
    }
    match log_in(server, client, args.get(1), args.get(2)) {
        true => w.ok(),
        false => w.error(WRONG_PASSWORD),
    }
}

fn hello(server: &Server, client: &mut Client, args: &Args<'_>, w: &mut ReplyWriter<'_>) {
    let mut protocol = client.protocol;
    if args.len() > 1 {
        protocol = match parse_integer(args.get(1)) {
            Some(2) => Protocol::Resp2,
            Some(3) => Protocol::Resp3,
            Some(_) => return w.error("NOPROTO unsupported protocol version"),
            None => return w.error("ERR Protocol version is not an integer or out of range"),
        };
    }
    let mut i = 2;
    let mut name = None;
    let mut login = None;
    while i < args.len() {
        match args.word(i).as_str() {
            "auth" if i + 2 < args.len() => {
                login = Some((args.get(i + 1), args.get(i + 2)));
                i += 3;
            }
            "setname" if i + 1 < args.len() => {
                name = Some(args.get(i + 1).to_vec());
                i += 2;
            }
            _ => {
                return w.error(&format!(
                    "ERR Syntax error in HELLO option '{}'",
                    String::from_utf8_lossy(args.get(i))
                ))
            }
        }
    }
    if let Some((user, password)) = login {
        if !log_in(server, client, user, password) {
            return w.error(WRONG_PASSWORD);
        }
    }
    if client.user.is_none() {
        return w.error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
    }
    if name.is_some() {
        client.name = name;
    }
    client.protocol = protocol;
    w.protocol = protocol;
    w.map(7);
    w.bulk(b"server");
    w.bulk(b"redis");
    w.bulk(b"version");
    w.bulk(REDIS_VERSION.as_bytes());
    w.bulk(b"proto");
    w.integer(if protocol == Protocol::Resp3 { 3 } else { 2 });
    w.bulk(b"id");
    w.integer(client.id as i64);
    w.bulk(b"mode");
    w.bulk(b"standalone");
    w.bulk(b"role");
    w.bulk(match server.host.read_only() {
        true => &b"replica"[..],
        false => &b"master"[..],
    });
    w.bulk(b"modules");
    w.array(0);
}

fn client_command(client: &mut Client, args: &Args<'_>, w: &mut ReplyWriter<'_>) {
    match (args.word(1).as_str(), args.len()) {
        ("id", 2) => w.integer(client.id as i64),
        ("getname", 2) => match &client.name {
            Some(name) => w.bulk(name),
            None => w.null(),
        },
        ("setname", 3) => {
            let name = args.get(2);
            if name.iter().any(|&b| b <= b' ' || b > b'~') {
                return w.error(
                    "ERR Client names cannot contain spaces, newlines or special characters.",
                );
            }
            client.name = (!name.is_empty()).then(|| name.to_vec());
            w.ok();
        }
        ("setinfo", 4) => {
            let value = args.get(3).to_vec();
            match args.word(2).as_str() {
                "lib-name" => client.lib_name = Some(value),
                "lib-ver" => client.lib_version = Some(value),
                other => {
                    return w.error(&format!("ERR Unrecognized option '{other}'"));
                }
            }
            w.ok();
        }
        ("info", 2) => w.verbatim(&format!("{}\n", client.info_line("client|info"))),
        ("list", _) => w.verbatim(&format!("{}\n", client.info_line("client|list"))),
        _ => w.error(&format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
            String::from_utf8_lossy(args.get(1))
        )),
    }
}

/// COMMAND, COMMAND COUNT, COMMAND INFO name..., COMMAND DOCS (an empty map: no docs kept).
fn command(args: &Args<'_>, w: &mut ReplyWriter<'_>) {
    let describe = |w: &mut ReplyWriter<'_>, s: &super::Spec| {
        w.array(10);
        w.bulk(s.name.as_bytes());
        w.integer(i64::from(s.arity));
        w.set(s.flags.len());
        for f in s.flags {
            w.simple(f);
        }
        w.integer(i64::from(s.first_key));
        w.integer(i64::from(s.last_key));
        w.integer(i64::from(s.step));
        w.set(0);
        w.set(0);
        w.array(0);
        w.array(0);
    };
    match args.len() {
        1 => {
            w.array(COMMANDS.len());
            for s in COMMANDS {
                describe(w, s);
            }
        }
        _ => match args.word(1).as_str() {
            "count" => w.integer(COMMANDS.len() as i64),
            "info" => {
                w.array(args.len() - 2);
                for i in 2..args.len() {
                    match find(&args.word(i)) {
                        Some(s) => describe(w, s),
                        None => w.null_array(),
                    }
                }
            }
            "docs" => w.map(0),
            _ => w.error(&format!(
                "ERR unknown subcommand '{}'. Try COMMAND HELP.",
                String::from_utf8_lossy(args.get(1))
            )),
        },
    }
}

/// CONFIG GET pattern... and CONFIG SET appendfsync: the settings clients and tools ask for.
fn config(server: &Server, args: &Args<'_>, w: &mut ReplyWriter<'_>) {
    match args.word(1).as_str() {
        "get" if args.len() >= 3 => {
            let appendfsync = server.appendfsync();
            let settings: [(&str, String); 7] = [
                ("appendonly", "yes".into()),
                ("appendfsync", appendfsync.name().into()),
                ("save", String::new()),
                ("databases", DATABASES.to_string()),
                ("maxmemory", "0".into()),
                ("maxmemory-policy", "noeviction".into()),
                ("timeout", "0".into()),
            ];
            let mut found: Vec<(&str, &String)> = Vec::new();
            for i in 2..args.len() {
                let pattern = args.get(i).to_ascii_lowercase();
                for (name, value) in &settings {
                    if crate::glob::matches(&pattern, name.as_bytes())
                        && !found.iter().any(|(n, _)| n == name)
                    {
                        found.push((name, value));
                    }
                }
            }
            w.map(found.len());
            for (name, value) in found {
                w.bulk(name.as_bytes());
                w.bulk(value.as_bytes());
            }
        }
        "set" if args.len() == 4 => match args.word(2).as_str() {
            "appendfsync" => match AppendFsync::parse(&args.word(3)) {
                Some(v) => {
                    server.set_appendfsync(v);
                    w.ok();
                }
                None => w.error(&format!(
                    "ERR Invalid argument '{}' for CONFIG SET 'appendfsync' - argument(s) must be one of the following: always, everysec, no",
                    String::from_utf8_lossy(args.get(3))
                )),
            },
            other => w.error(&format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{other}'"
            )),
        },
        "resetstat" if args.len() == 2 => w.ok(),
        _ => w.error(SYNTAX_ERROR),
    }
}

/// INFO's replication section, with Redis's names: a standby is a `slave` whose offset is
/// the log it applied; a primary lists each standby and the log it has on disk. Offsets are
/// positions in Shoal's redo log (as `pg_current_wal_lsn()`), and ports 0: the members do not
/// know each other's Redis ports.
fn replication_section(replication: &Replication) -> String {
    let mut text = "# Replication\r\n".to_string();
    match replication {
        Replication::Primary { log_end, standbys } => {
            text.push_str(&format!(
                "role:master\r\nconnected_slaves:{}\r\n",
                standbys.len()
            ));
            for (i, s) in standbys.iter().enumerate() {
                text.push_str(&format!(
                    "slave{i}:ip={},port=0,state={},offset={},name={}\r\n",
                    s.host,
                    if s.flushed.is_some() {
                        "online"
                    } else {
                        "wait_bgsave"
                    },
                    s.flushed.unwrap_or(0),
                    s.name,
                ));
            }
            text.push_str(&format!("master_repl_offset:{log_end}\r\n"));
        }
        Replication::Standby {
            applied,
            primary_host,
        } => {
            text.push_str(&format!(
                "role:slave\r\nmaster_host:{}\r\nmaster_port:0\r\nmaster_link_status:{}\r\nslave_read_only:1\r\nslave_repl_offset:{applied}\r\nmaster_repl_offset:{applied}\r\n",
                primary_host.as_deref().unwrap_or(""),
                if primary_host.is_some() { "up" } else { "down" }
            ));
        }
    }
    text
}

/// ROLE, in Redis's shapes: `master`, the log's end and a `[host, port, offset]` per standby
/// on a primary; `slave`, the primary's host and port, the link's state and the log applied
/// on a standby. Ports are 0 and offsets redo log positions, as in INFO.
fn role(server: &Server, w: &mut ReplyWriter<'_>) {
    match server.host.replication() {
        Replication::Primary { log_end, standbys } => {
            w.array(3);
            w.bulk(b"master");
            w.integer(log_end as i64);
            w.array(standbys.len());
            for s in &standbys {
                w.array(3);
                w.bulk(s.host.as_bytes());
                w.bulk(b"0");
                w.bulk(s.flushed.unwrap_or(0).to_string().as_bytes());
            }
        }
        Replication::Standby {
            applied,
            primary_host,
        } => {
            w.array(5);
            w.bulk(b"slave");
            w.bulk(primary_host.as_deref().unwrap_or("").as_bytes());
            w.integer(0);
            w.bulk(match primary_host {
                Some(_) => &b"connected"[..],
                None => &b"connect"[..],
            });
            w.integer(applied as i64);
        }
    }
}

/// INFO: the server, memory, persistence, replication and keyspace sections, as far as they
/// apply. Memory is what the Redis data's table holds (rows, versions and index entries);
/// the keyspace counts each database's live keys and those with an expiry.
/// INFO [section ...]: the server, clients, memory, persistence, replication and keyspace
/// sections (all of them without an argument or with `all`, `default` or `everything`).
fn info(server: &Server, args: &Args<'_>, w: &mut ReplyWriter<'_>) {
    let asked: Vec<String> = (1..args.len()).map(|i| args.word(i)).collect();
    let wanted = |section: &str| {
        asked.is_empty()
            || asked
                .iter()
                .any(|a| a == section || matches!(a.as_str(), "all" | "default" | "everything"))
    };
    let mut sections: Vec<String> = Vec::new();
    if wanted("server") {
        sections.push(format!(
            "# Server\r\nredis_version:{REDIS_VERSION}\r\nredis_mode:standalone\r\nshoal_version:{}\r\nprocess_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{}\r\nuptime_in_days:{}\r\n",
            env!("CARGO_PKG_VERSION"),
            std::process::id(),
            server.port,
            server.started.elapsed().as_secs(),
            server.started.elapsed().as_secs() / 86_400,
        ));
    }
    if wanted("clients") {
        sections.push(format!(
            "# Clients\r\nconnected_clients:{}\r\nblocked_clients:0\r\n",
            server.connected_clients()
        ));
    }
    let tables = server.host.tables().ok();
    if wanted("memory") {
        // The rows and indexes of the Redis tables: what the Redis data takes.
        let bytes = tables.as_ref().map_or(0, |t| {
            let members = [&t.hashes, &t.lists, &t.sets, &t.zsets];
            t.keys.memory_bytes()
                + members
                    .iter()
                    .map(|m| m.table.memory_bytes())
                    .sum::<usize>()
        });
        sections.push(format!(
            "# Memory\r\nused_memory:{bytes}\r\nused_memory_human:{:.2}M\r\nmaxmemory:0\r\nmaxmemory_policy:noeviction\r\n",
            bytes as f64 / (1024.0 * 1024.0)
        ));
    }
    if wanted("persistence") {
        sections.push(format!(
            "# Persistence\r\nloading:0\r\naof_enabled:1\r\nappendfsync:{}\r\n",
            server.appendfsync().name()
        ));
    }
    if wanted("replication") {
        sections.push(replication_section(&server.host.replication()));
    }
    if wanted("keyspace") {
        let mut text = "# Keyspace\r\n".to_string();
        if let Some(tables) = tables {
            let kt = crate::keyspace::KeyTxn::begin(server.host.database(), tables);
            let mut counts = [(0u64, 0u64); DATABASES as usize];
            kt.scan(None, |db, _, e| {
                let c = &mut counts[usize::from(db) % counts.len()];
                c.0 += 1;
                c.1 += u64::from(e.expires_at_us.is_some());
                true
            });
            kt.db.rollback(kt.txn);
            for (db, (keys, expires)) in counts.iter().enumerate() {
                if *keys > 0 {
                    text.push_str(&format!(
                        "db{db}:keys={keys},expires={expires},avg_ttl=0\r\n"
                    ));
                }
            }
        }
        sections.push(text);
    }
    w.verbatim(&sections.join("\r\n"));
}
