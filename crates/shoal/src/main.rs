//! The `shoal` binary: `shoal serve` starts the database server.

mod backup;
mod client_auth;
mod group;

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};
use shoal_sql::durability::DurabilityOptions;

#[derive(Parser)]
#[command(
    name = "shoal",
    version,
    about = "Shoal: an in-memory SQL database that speaks PostgreSQL"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the server.
    Serve {
        /// Address to listen on. Loopback by default; another address is refused while a
        /// pg_hba.conf line lets clients from the network in without a password.
        #[arg(long, default_value = "127.0.0.1:5432")]
        listen: SocketAddr,
        /// Host-based authentication rules in PostgreSQL's pg_hba.conf format. Default:
        /// DATA_DIR/pg_hba.conf, written on first start (local and loopback clients `trust`,
        /// or loopback `scram-sha-256` when a superuser password is given).
        #[arg(long)]
        hba_file: Option<PathBuf>,
        /// A file whose first line is the password of the superuser `postgres`, set on first
        /// start (or while it has none). SHOAL_PASSWORD gives it too.
        #[arg(long)]
        superuser_password_file: Option<PathBuf>,
        /// TLS certificate chain (PEM), PostgreSQL's ssl_cert_file. With --tls-key, clients
        /// that ask for TLS (sslmode=require and stronger) get it, and SCRAM over TLS offers
        /// channel binding (SCRAM-SHA-256-PLUS).
        #[arg(long, requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1), PostgreSQL's
        /// ssl_key_file.
        #[arg(long, requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// Certificate authorities (PEM) that sign client certificates, PostgreSQL's
        /// ssl_ca_file: clients may present a certificate, which must be signed by one of
        /// them; pg_hba.conf's `cert` method logs in by it.
        #[arg(long, requires = "tls_cert")]
        tls_ca: Option<PathBuf>,
        /// Most client sessions at once (PostgreSQL's max_connections); the last 3 are kept
        /// for superusers. A client past it gets FATAL 53300.
        #[arg(long, default_value_t = shoal_sql::engine::DEFAULT_MAX_CONNECTIONS as u32,
              value_parser = clap::value_parser!(u32).range(4..=100_000))]
        max_connections: u32,
        /// Seconds a client has to complete its startup and authentication (PostgreSQL's
        /// authentication_timeout); a client that takes longer is disconnected.
        #[arg(long, default_value_t = shoal_sql::engine::DEFAULT_AUTHENTICATION_TIMEOUT_S,
              value_parser = clap::value_parser!(u64).range(1..=600))]
        authentication_timeout_s: u64,
        /// A server setting, as postgresql.conf would give it (`-c statement_timeout=5s`);
        /// repeatable. It overrides DATA_DIR/postgresql.conf and postgresql.auto.conf.
        #[arg(short = 'c', long = "set", value_name = "NAME=VALUE", value_parser = name_value)]
        settings: Vec<(String, String)>,
        /// Serve Prometheus metrics over HTTP at http://ADDR/metrics (for example
        /// 127.0.0.1:9188). Off by default. The endpoint has no authentication: give a loopback
        /// address unless the network in between is trusted.
        #[arg(long, value_name = "ADDR")]
        metrics_listen: Option<SocketAddr>,
        /// Serve the Redis protocol on this address (for example 127.0.0.1:6379), over the
        /// same data: the keys are rows of the `redis` schema's tables. Off by default. Redis
        /// clients log in as Shoal's roles (AUTH, HELLO AUTH) by pg_hba.conf's rules for the
        /// database `redis`; an address beyond loopback is refused while a rule lets network
        /// clients in without a password, as Redis's protected mode.
        #[arg(long, value_name = "ADDR")]
        redis_listen: Option<SocketAddr>,
        /// The role a Redis client is before it logs in, and that `AUTH password` (without a
        /// user name) logs in as: Redis's `default` user.
        #[arg(long, default_value = "postgres", value_name = "ROLE")]
        redis_default_user: String,
        /// When a Redis client's write is acknowledged, as Redis's appendfsync: `always` once
        /// its redo record is flushed, `everysec` or `no` at once (the log writer flushes it
        /// within about a second).
        #[arg(long, default_value = "everysec", value_parser = ["always", "everysec", "no"])]
        redis_appendfsync: String,
        /// Directory of the Unix-domain socket `.s.PGSQL.PORT` (PostgreSQL's
        /// unix_socket_directories), which psql and pgbench use when given `-h DIR` or no host
        /// at all. Empty: no Unix socket.
        #[arg(long, default_value = "/tmp")]
        unix_socket_dir: String,
        /// Data directory (created if missing): the redo log and checkpoints.
        #[arg(long, default_value = "./shoal-data")]
        data_dir: PathBuf,
        /// Default of the synchronous_commit setting. `off` acknowledges commits before their
        /// redo record is flushed: a crash loses at most the last ~10 ms of commits, never
        /// part of one.
        #[arg(long, default_value = "on", value_parser = ["on", "off"])]
        synchronous_commit: String,
        /// `off` runs without a redo log or checkpoints: nothing survives a restart. Only for
        /// measuring what the log costs (bench/pgbench/log_overhead.py); the default is `on`.
        #[arg(long, default_value = "on", value_parser = ["on", "off"])]
        redo_log: String,
        /// Start a checkpoint after this many MiB of redo log.
        #[arg(long, default_value_t = 256)]
        checkpoint_log_mb: u64,
        /// Start a checkpoint after this many seconds if anything was logged.
        #[arg(long, default_value_t = 300)]
        checkpoint_interval_s: u64,
        /// Tests only: the redo log's fdatasync fails after this many batches, as a failing
        /// disk's would, to check the server stops taking writes and loses nothing acknowledged.
        #[arg(long, hide = true)]
        fail_log_sync_after: Option<u64>,
        /// Tests only: the log writer pauses this long after each fdatasync before it tells the
        /// committers, to check what happens while commits are logged but not yet acknowledged.
        #[arg(long, hide = true, default_value_t = 0)]
        hold_log_sync_ms: u64,
        /// This server's id in its replication group (1, 2, 3, ...); with --peers.
        #[arg(long, requires = "peers")]
        node_id: Option<u64>,
        /// Every member of the replication group, this node included, as ID=HOST:PORT of its
        /// replication listener, comma-separated (1=127.0.0.1:7001,2=127.0.0.1:7002,...).
        /// The members keep one redo log by Raft: a commit is acknowledged once a majority has
        /// it on disk; one member is the primary and the others serve reads as hot standbys.
        #[arg(long, value_delimiter = ',', value_parser = group::peer, requires = "node_id")]
        peers: Vec<(u64, SocketAddr)>,
        /// This node joins a group that is already running (listed in --peers with this node):
        /// the primary adds it, and it catches up from the primary's newest checkpoint and log.
        #[arg(long, requires = "node_id")]
        join: bool,
        /// Group commits of log kept after a checkpoint for a member that is behind; one
        /// further behind is sent the checkpoint instead.
        #[arg(long, default_value_t = shoal_replication::ENTRIES_KEPT_AFTER_CHECKPOINT)]
        replication_log_keep: u64,
        /// A file holding the group's shared secret (at least 16 bytes), the same on every
        /// member: members prove they hold it before they exchange anything. Required when a
        /// member is on another machine (a --peers address that is not loopback).
        #[arg(long, requires = "node_id")]
        replication_key_file: Option<PathBuf>,
    },
    /// Back up a running server (on its machine) into a new directory, without stopping it
    Backup {
        /// The directory to write the backup to: new, or empty. `shoal serve --data-dir` on
        /// it starts a server with the data as of the backup's end
        #[arg(long)]
        to: PathBuf,
        /// The running server's data directory, which the backup copies
        #[arg(long, default_value = "./shoal-data")]
        data_dir: PathBuf,
        /// The server's host name or address (the password, if one is needed, comes from
        /// PGPASSWORD)
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        #[arg(long, default_value_t = 5432)]
        port: u16,
        /// A superuser to connect as
        #[arg(long, default_value = "postgres")]
        user: String,
        /// Copy the newest checkpoint as it is rather than writing one first (the backup is
        /// quicker, its restore replays more log)
        #[arg(long)]
        no_checkpoint: bool,
    },
}

/// Reads `-c NAME=VALUE`.
fn name_value(arg: &str) -> Result<(String, String), String> {
    match arg.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok((name.trim().replace('-', "_"), value.trim().to_string()))
        }
        _ => Err(format!("-c {arg}: expected NAME=VALUE")),
    }
}

/// Logged once recovery is done and connections are served.
const READY_MESSAGE: &str = "database system is ready to accept connections";

/// Archiving and archive recovery, from the settings read at start (`archive_mode`,
/// `restore_command`, `recovery_target_time`) and `DATA_DIR/recovery.signal`.
fn archive_options(
    config: &shoal_sql::config::ServerConfig,
    data_dir: &std::path::Path,
    options: &mut DurabilityOptions,
) -> Result<(), String> {
    use shoal_sql::durability::archive::{RestoreOptions, RECOVERY_SIGNAL_FILE};
    let values = config.value_map();
    let setting = |name: &str| {
        values
            .get(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    options.archive_mode = matches!(setting("archive_mode").as_deref(), Some("on" | "always"));
    if !data_dir.join(RECOVERY_SIGNAL_FILE).exists() {
        return Ok(());
    }
    let target_time = match setting("recovery_target_time") {
        // As PostgreSQL reads it: with the offset or zone the text gives, else in UTC (the
        // server's time zone).
        Some(text) => Some(
            shoal_sql::pgtext::parse_timestamptz(&text, &shoal_sql::timezone::TimeZone::utc())
                .ok()
                .filter(|micros| micros.abs() < i64::MAX)
                .ok_or_else(|| {
                    format!("invalid value for parameter \"recovery_target_time\": \"{text}\"")
                })?,
        ),
        None => None,
    };
    options.restore = Some(RestoreOptions {
        restore_command: setting("restore_command"),
        target_time,
    });
    Ok(())
}

/// The server log on stdout: text lines, or with `log_destination = jsonlog` one JSON object
/// per line (time, level, target, message and the event's fields), for log collectors.
/// RUST_LOG filters it (default `info`).
fn init_logging(json: bool) {
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match json {
        true => builder.json().flatten_event(true).init(),
        false => builder.init(),
    }
}

fn main() {
    shoal_sql::allocator::configure();
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve { .. }) {
        init_logging(false);
    }
    match cli.command {
        Command::Backup {
            to,
            data_dir,
            host,
            port,
            user,
            no_checkpoint,
        } => {
            let request = backup::BackupRequest {
                to,
                data_dir,
                host,
                port,
                user,
                checkpoint: !no_checkpoint,
            };
            match backup::run(request) {
                Ok(summary) => println!("{summary}"),
                Err(e) => {
                    eprintln!("shoal backup: {e}");
                    std::process::exit(1);
                }
            }
        }
        Command::Serve {
            listen,
            metrics_listen,
            redis_listen,
            redis_default_user,
            redis_appendfsync,
            unix_socket_dir,
            data_dir,
            synchronous_commit,
            redo_log,
            checkpoint_log_mb,
            checkpoint_interval_s,
            fail_log_sync_after,
            hold_log_sync_ms,
            node_id,
            peers,
            join,
            replication_log_keep,
            replication_key_file,
            hba_file,
            superuser_password_file,
            tls_cert,
            tls_key,
            tls_ca,
            max_connections,
            authentication_timeout_s,
            settings,
        } => {
            if let Err(e) = std::fs::create_dir_all(&data_dir) {
                eprintln!(
                    "shoal: cannot create data directory {}: {e}",
                    data_dir.display()
                );
                std::process::exit(1);
            }
            let config =
                shoal_sql::config::ServerConfig::load(&data_dir, settings).unwrap_or_else(|e| {
                    eprintln!("shoal: server settings: {e}");
                    std::process::exit(1);
                });
            // Read at start only: a changed log_destination takes a restart.
            init_logging(
                config
                    .value_map()
                    .get("log_destination")
                    .map(String::as_str)
                    == Some("jsonlog"),
            );
            let group = node_id
                .map(|id| {
                    let key = replication_key_file
                        .as_deref()
                        .map(group::read_key)
                        .transpose()?;
                    group::config(id, &peers, join, replication_log_keep, key, &data_dir)
                })
                .transpose()
                .unwrap_or_else(|e| {
                    eprintln!("shoal: {e}");
                    std::process::exit(2);
                });
            if group.is_some() && redo_log == "off" {
                eprintln!("shoal: a member of a replication group always keeps its redo log");
                std::process::exit(2);
            }
            let password = client_auth::superuser_password(superuser_password_file.as_deref())
                .unwrap_or_else(|e| {
                    eprintln!("shoal: {e}");
                    std::process::exit(2);
                });
            let hba_path = client_auth::prepare_hba(&data_dir, hba_file, password.is_some())
                .and_then(|path| client_auth::check_network(listen, &path).map(|()| path))
                .unwrap_or_else(|e| {
                    eprintln!("shoal: {e}");
                    std::process::exit(2);
                });
            let tls = match (tls_cert, tls_key) {
                (Some(cert), Some(key)) => Some(
                    shoal_server::Tls::load(shoal_server::TlsFiles {
                        cert,
                        key,
                        client_ca: tls_ca,
                    })
                    .unwrap_or_else(|e| {
                        eprintln!("shoal: TLS: {e}");
                        std::process::exit(2);
                    }),
                ),
                _ => None,
            };
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .expect("tokio runtime");
            runtime.block_on(async move {
                let tcp = match tokio::net::TcpListener::bind(listen).await {
                    Ok(l) => l,
                    Err(e) => {
                        eprintln!("shoal: cannot listen on {listen}: {e}");
                        std::process::exit(1);
                    }
                };
                let unix_socket_dir = PathBuf::from(unix_socket_dir);
                let unix = if unix_socket_dir.as_os_str().is_empty() {
                    None
                } else {
                    match shoal_server::UnixSocket::bind(&unix_socket_dir, listen.port()) {
                        Ok(socket) => {
                            tracing::info!(
                                "listening on Unix socket {}",
                                socket.path().display()
                            );
                            Some(socket)
                        }
                        Err(e) => {
                            eprintln!(
                                "shoal: cannot listen on a Unix socket in {}: {e}",
                                unix_socket_dir.display()
                            );
                            std::process::exit(1);
                        }
                    }
                };
                let redis_tcp = match redis_listen {
                    None => None,
                    Some(addr) => {
                        if let Err(e) = client_auth::check_network(addr, &hba_path) {
                            eprintln!("shoal: --redis-listen: {e}");
                            std::process::exit(2);
                        }
                        match tokio::net::TcpListener::bind(addr).await {
                            Ok(l) => Some(l),
                            Err(e) => {
                                eprintln!("shoal: cannot listen for Redis clients on {addr}: {e}");
                                std::process::exit(1);
                            }
                        }
                    }
                };
                let mut listeners = shoal_server::Listeners {
                    tcp,
                    unix,
                    redis: None,
                };
                tracing::info!(
                    "Shoal {} listening on {listen}, data directory {}",
                    env!("CARGO_PKG_VERSION"),
                    data_dir.display()
                );
                let mut options = DurabilityOptions {
                    synchronous_commit: synchronous_commit == "on",
                    checkpoint_log_bytes: checkpoint_log_mb << 20,
                    checkpoint_interval_s,
                    ..DurabilityOptions::default()
                };
                options.wal.fail_batch_sync_after = fail_log_sync_after;
                options.wal.hold_batch_sync_ms = hold_log_sync_ms;
                archive_options(&config, &data_dir, &mut options).unwrap_or_else(|e| {
                    eprintln!("shoal: {e}");
                    std::process::exit(1);
                });
                let dir = data_dir.clone();
                let mut replication = None;
                let opened = if let Some(group) = group {
                    if options.archive_mode || options.restore.is_some() {
                        eprintln!("shoal: a member of a replication group does not archive its log yet");
                        std::process::exit(2);
                    }
                    shoal_sql::Engine::open_replicated(&dir, options, group)
                        .await
                        .map(|(engine, r)| {
                            replication = Some(r);
                            (engine, "joined the replication group as a standby".to_string())
                        })
                } else if redo_log == "off" {
                    tracing::warn!(
                        "--redo-log off: nothing is logged or checkpointed; every change is lost when the server stops"
                    );
                    Ok((shoal_sql::Engine::new(), "skipped (--redo-log off)".to_string()))
                } else {
                    tokio::task::spawn_blocking(move || shoal_sql::Engine::open(&dir, options))
                        .await
                        .expect("recovery thread")
                        .map(|(engine, report)| (engine, report.to_string()))
                };
                let engine = match opened {
                    Ok((engine, report)) => {
                        tracing::info!("recovery: {report}");
                        shoal_sql::query::query_runtime::start();
                        // As PostgreSQL says it: tools (and the tests) wait for this line.
                        tracing::info!("{READY_MESSAGE} on {listen}");
                        engine
                    }
                    Err(e) => {
                        eprintln!(
                            "shoal: cannot open data directory {}: {e}",
                            data_dir.display()
                        );
                        drop(listeners); // exit() runs no destructors: remove the socket file
                        std::process::exit(1);
                    }
                };
                if let Some(replication) = replication {
                    let watched = engine.clone();
                    let password = password.clone();
                    tokio::spawn(async move {
                        // The group's roles are set on its primary, and reach the standbys
                        // by the log.
                        let primary_while_leading = async {
                            replication.wait_promoted(&watched).await;
                            if let Some(password) = &password {
                                client_auth::apply_superuser_password(&watched, password);
                            }
                            replication.wait_demoted().await;
                            "this node is no longer the primary: restarting, to drop any commit the group did not acknowledge"
                        };
                        let checkpoint_installed = async {
                            replication.wait_checkpoint_installed().await;
                            "this node was behind the log the group keeps and received the primary's checkpoint: restarting to load it"
                        };
                        let why = tokio::select! {
                            why = primary_while_leading => why,
                            why = checkpoint_installed => why,
                            why = replication.wait_stopped() => {
                                // As PostgreSQL's postmaster when its startup process fails: a
                                // node whose log or checkpoint cannot be written stops.
                                tracing::error!("replication failed: {why}; the server stops");
                                std::process::exit(1);
                            }
                        };
                        tracing::warn!("{why}");
                        group::restart_process();
                    });
                }
                if let (Some(password), false) = (&password, engine.replicated()) {
                    client_auth::apply_superuser_password(&engine, password);
                }
                engine.set_config(config);
                engine.set_ssl(tls.is_some());
                engine.set_max_connections(max_connections as usize);
                engine.set_authentication_timeout(std::time::Duration::from_secs(
                    authentication_timeout_s,
                ));
                let server_cert = tls.as_ref().map(|t| t.cert_pem.as_slice());
                let auth = shoal_server::pg::auth::Authenticator::new(engine.clone(), server_cert)
                    .unwrap_or_else(|e| {
                        eprintln!("shoal: TLS: {e}");
                        std::process::exit(2);
                    });
                let auth = std::sync::Arc::new(auth);
                if let Err(e) = auth.load_rules(Some(hba_path.clone())) {
                    eprintln!("shoal: cannot read {}: {e}", hba_path.display());
                    drop(listeners);
                    std::process::exit(1);
                }
                if let Some(addr) = metrics_listen {
                    let listener = match tokio::net::TcpListener::bind(addr).await {
                        Ok(l) => l,
                        Err(e) => {
                            eprintln!("shoal: cannot listen for metrics on {addr}: {e}");
                            drop(listeners);
                            std::process::exit(1);
                        }
                    };
                    if !addr.ip().is_loopback() {
                        tracing::warn!(
                            "metrics served on {addr} without authentication: anyone who reaches it reads table names and activity"
                        );
                    }
                    tracing::info!("metrics on http://{addr}/metrics");
                    tokio::spawn(shoal_server::metrics_http::serve(listener, engine.clone()));
                }
                if let Some(tcp) = redis_tcp {
                    let host = match shoal_sql::redis_host::RedisHost::start(engine.clone()).await
                    {
                        Ok(host) => host,
                        Err(e) => {
                            eprintln!("shoal: cannot set up the redis schema: {}", e.message);
                            drop(listeners);
                            std::process::exit(1);
                        }
                    };
                    let appendfsync = shoal_resp::host::AppendFsync::parse(&redis_appendfsync)
                        .expect("clap checked the value");
                    let port = tcp.local_addr().map_or(0, |a| a.port());
                    let server = std::sync::Arc::new(shoal_resp::commands::Server::new(
                        host,
                        appendfsync,
                        port,
                        redis_default_user,
                    ));
                    tokio::spawn(shoal_resp::expiry::run(server.clone()));
                    tracing::info!(
                        "Redis clients on {}, appendfsync {}",
                        tcp.local_addr().map_or_else(|_| "?".into(), |a| a.to_string()),
                        appendfsync.name()
                    );
                    listeners.redis = Some(shoal_server::RedisListener { tcp, server });
                }
                let reloads = auth.clone();
                let reload_engine = engine.clone();
                tokio::spawn(async move {
                    let mut hangups =
                        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
                            .expect("install the SIGHUP handler");
                    while hangups.recv().await.is_some() {
                        match reloads.load_rules(None) {
                            Ok(()) => tracing::info!("SIGHUP: pg_hba.conf reloaded"),
                            Err(e) => tracing::warn!("SIGHUP: pg_hba.conf not reloaded: {e}"),
                        }
                        reload_engine.reload_config();
                    }
                });
                tokio::select! {
                    r = shoal_server::serve(listeners, engine.clone(), auth, tls) => {
                        if let Err(e) = r {
                            eprintln!("shoal: server stopped: {e}");
                            std::process::exit(1);
                        }
                    }
                    _ = shutdown_signal() => {
                        tracing::info!("shutting down: flushing the redo log");
                        engine.shutdown();
                    }
                }
                // The log is flushed and the socket file removed (with the listeners). Dropping
                // the engine would free every row one by one, seconds for tens of millions of
                // them, only to give back memory the exit gives back at once; a checkpoint
                // under way is cut off as by a crash, which recovery handles.
                tracing::info!("shut down");
                std::process::exit(0);
            });
        }
    }
}

/// SIGTERM (what init systems and `pg_ctl`-style tools send) or Ctrl-C.
async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("install the SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
