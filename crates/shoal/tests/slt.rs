//! SQL behaviour tests: runs every sqllogictest file in `tests/slt/` (at the workspace root)
//! over the PostgreSQL wire protocol, once with the simple and once with the extended query
//! protocol, each run against a fresh `shoal serve` process. The expected outputs in the files
//! were taken from a real PostgreSQL 15, and the same harness can run them against any server:
//!
//! - `SHOAL_SLT_TARGET=host:port` (or `SHOAL_SLT_URL_HOST` + `SHOAL_SLT_URL_PORT`) runs the files
//!   against that server instead of starting Shoal; user `postgres`, database `postgres`.
//! - `SHOAL_SLT_FILTER=substring` runs only the files whose path contains the substring.
//! - `SHOAL_SLT_PENDING=1` also runs `tests/slt/pending/`, the files describing behaviour that
//!   Shoal does not have yet (they are not run by default so that CI stays green).
//!
//! A second test, `sqllogictest_on_postgresql`, runs every file against a real PostgreSQL 15
//! that it starts itself (see `support::postgres`), each file and protocol in a database of
//! its own, so that no expected output can encode an answer PostgreSQL would not give. Files
//! about what only Shoal has (column tables, `shoal_memory`) start with a line
//! `# shoal-only: why` and are not run there; records where Shoal refuses (0A000) what
//! PostgreSQL does say `skipif postgresql` (the runs label themselves `shoal` or
//! `postgresql`).
//!
//! All failures are collected and reported together at the end.

mod support;

use std::fmt;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::FutureExt;
use sqllogictest::{AsyncDB, DBOutput, DefaultColumnType};
use sqllogictest_engines::postgres::{PostgresConfig, PostgresExtended, PostgresSimple};
use support::postgres::Postgres;
use support::ShoalServer;

const SLT_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/slt");
/// Later failures in a file are usually knock-on effects of the first few.
const FAILURES_PER_RUN_MAX: usize = 10;
const USER: &str = "postgres";
const DATABASE: &str = "postgres";

/// The error type of the postgres engines (`tokio_postgres::Error`), named through the trait so
/// that this test does not need its own dependency on `tokio-postgres`.
type PgError = <PostgresSimple as AsyncDB>::Error;

#[derive(Clone, Copy, Debug)]
enum Protocol {
    Simple,
    Extended,
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protocol::Simple => "simple",
            Protocol::Extended => "extended",
        })
    }
}

/// Where a run of the files goes.
enum Target<'a> {
    /// A fresh `shoal serve` per file and protocol.
    Shoal,
    /// A server named by the environment, used as it is.
    External(&'a str),
    /// A PostgreSQL this test started: a fresh database per file and protocol.
    Postgres(&'a Postgres),
}

#[test]
fn sqllogictest() {
    match external_target() {
        Some(addr) => {
            println!("running the slt files against external server {addr}");
            run_all(&Target::External(&addr));
        }
        None => run_all(&Target::Shoal),
    }
}

#[test]
fn sqllogictest_on_postgresql() {
    if external_target().is_some() {
        return; // `sqllogictest` runs the files against that server
    }
    if let Some(postgres) = Postgres::start() {
        run_all(&Target::Postgres(&postgres));
    }
}

fn run_all(target: &Target) {
    let files = slt_files();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("build tokio runtime");
    let label = match target {
        Target::Postgres(_) => "postgresql",
        _ => "shoal",
    };

    let mut failures: Vec<String> = Vec::new();
    let mut files_passed = 0usize;
    let mut files_skipped = 0usize;
    for file in &files {
        let name = file
            .strip_prefix(SLT_DIR)
            .unwrap_or(file)
            .display()
            .to_string();
        if matches!(target, Target::Postgres(_)) && shoal_only(file) {
            println!("skipped {name} (shoal-only)");
            files_skipped += 1;
            continue;
        }
        let mut file_failed = false;
        for protocol in [Protocol::Simple, Protocol::Extended] {
            let started = Instant::now();
            let run_failures = match target {
                Target::External(addr) => {
                    runtime.block_on(run_file(file, protocol, addr, DATABASE, label))
                }
                Target::Shoal => {
                    let mut server = ShoalServer::start();
                    let mut run_failures =
                        runtime.block_on(run_file(file, protocol, &server.addr, DATABASE, label));
                    if !run_failures.is_empty() {
                        run_failures.push(server.post_mortem());
                    }
                    run_failures
                }
                Target::Postgres(postgres) => runtime.block_on(async {
                    recreate_database(&postgres.addr).await;
                    run_file(file, protocol, &postgres.addr, DATABASE, label).await
                }),
            };
            let elapsed_ms = started.elapsed().as_millis();
            if run_failures.is_empty() {
                println!("ok      {name} [{protocol}] ({elapsed_ms} ms)");
            } else {
                println!("FAILED  {name} [{protocol}] ({elapsed_ms} ms)");
                for failure in run_failures {
                    failures.push(format!("--- {name} [{protocol}]\n{failure}\n"));
                }
                file_failed = true;
            }
        }
        if !file_failed {
            files_passed += 1;
        }
    }

    let files_failed = files.len() - files_passed - files_skipped;
    for failure in &failures {
        println!("{failure}");
    }
    println!(
        "slt ({label}): {files_passed} passed, {files_failed} failed, {files_skipped} skipped"
    );
    assert!(
        failures.is_empty(),
        "{files_failed} slt file(s) failed on {label}; see the output above"
    );
}

/// Gives the next run a fresh `postgres` database on the PostgreSQL this test started (the
/// files read `current_database()`, so the name stays).
async fn recreate_database(addr: &str) {
    let (host, port) = addr.rsplit_once(':').expect("host:port");
    let conn = format!("host={host} port={port} user={USER} dbname=template1");
    let (client, connection) = tokio_postgres::connect(&conn, tokio_postgres::NoTls)
        .await
        .expect("connect to PostgreSQL");
    let connection = tokio::spawn(connection);
    // Two messages: neither may run inside the implicit block of a several-statement one.
    for sql in [
        format!("DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)"),
        format!("CREATE DATABASE {DATABASE}"),
    ] {
        client
            .batch_execute(&sql)
            .await
            .expect("recreate the run's database");
    }
    drop(client);
    let _ = connection.await;
}

/// Whether the file is about what only Shoal has: its first line says `# shoal-only: why`.
fn shoal_only(file: &Path) -> bool {
    std::fs::read_to_string(file)
        .ok()
        .and_then(|text| text.lines().next().map(|l| l.starts_with("# shoal-only:")))
        .unwrap_or(false)
}

/// The `.slt` files to run, sorted, honouring `SHOAL_SLT_FILTER` and `SHOAL_SLT_PENDING`.
fn slt_files() -> Vec<PathBuf> {
    let root = PathBuf::from(SLT_DIR);
    let mut dirs = vec![root.clone()];
    if env_flag("SHOAL_SLT_PENDING") {
        dirs.push(root.join("pending"));
    }
    let filter = std::env::var("SHOAL_SLT_FILTER").unwrap_or_default();
    let mut files: Vec<PathBuf> = dirs
        .iter()
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flatten()
        .map(|entry| entry.expect("read tests/slt entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "slt"))
        .filter(|path| path.to_string_lossy().contains(&filter))
        .collect();
    files.sort();
    files
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// `host:port` of an external server to test instead of Shoal, if the environment names one.
fn external_target() -> Option<String> {
    if let Ok(target) = std::env::var("SHOAL_SLT_TARGET") {
        return Some(target);
    }
    let host = std::env::var("SHOAL_SLT_URL_HOST").ok();
    let port = std::env::var("SHOAL_SLT_URL_PORT").ok();
    match (host, port) {
        (None, None) => None,
        (host, port) => Some(format!(
            "{}:{}",
            host.unwrap_or_else(|| "127.0.0.1".into()),
            port.unwrap_or_else(|| "5432".into())
        )),
    }
}

/// Runs one file on one protocol and returns its failures, at most `FAILURES_PER_RUN_MAX`.
/// Unlike `Runner::run_file_async`, it carries on after a failing record, so one run shows
/// every broken record of a file (later ones may only fail because of an earlier one).
async fn run_file(
    file: &Path,
    protocol: Protocol,
    addr: &str,
    database: &str,
    label: &str,
) -> Vec<String> {
    let Some((host, port)) = addr.rsplit_once(':') else {
        return vec![format!("bad target address {addr}, expected host:port")];
    };
    let Ok(port) = port.parse::<u16>() else {
        return vec![format!("bad port in target address {addr}")];
    };
    let mut config = PostgresConfig::new();
    config.host(host).port(port).user(USER).dbname(database);
    config.connect_timeout(Duration::from_secs(10));

    match protocol {
        Protocol::Simple => {
            let runner = sqllogictest::Runner::new(|| {
                let config = config.clone();
                async move {
                    Ok(Db(PostgresSimple::connect(config)
                        .await
                        .map_err(SqlError::from_pg)?))
                }
            });
            run_records(runner, file, label).await
        }
        Protocol::Extended => {
            let runner = sqllogictest::Runner::new(|| {
                let config = config.clone();
                async move {
                    Ok(Db(PostgresExtended::connect(config)
                        .await
                        .map_err(SqlError::from_pg)?))
                }
            });
            run_records(runner, file, label).await
        }
    }
}

async fn run_records<D, M>(
    mut runner: sqllogictest::Runner<D, M>,
    file: &Path,
    label: &str,
) -> Vec<String>
where
    D: AsyncDB<ColumnType = DefaultColumnType>,
    M: sqllogictest::MakeConnection<Conn = D>,
{
    runner.add_label(label);
    let records = match sqllogictest::parse_file::<DefaultColumnType>(file) {
        Ok(records) => records,
        Err(error) => return vec![format!("cannot parse {}: {error}", file.display())],
    };
    let mut failures = Vec::new();
    for record in records {
        if let sqllogictest::Record::Halt { .. } = record {
            break;
        }
        if let Err(error) = runner.run_async(record).await {
            failures.push(error.display(false).to_string());
            if failures.len() == FAILURES_PER_RUN_MAX {
                failures.push(format!("(stopped after {FAILURES_PER_RUN_MAX} failures)"));
                break;
            }
        }
    }
    runner.shutdown_async().await;
    failures
}

/// Wraps a postgres engine so that errors display the SQLSTATE and the server's message
/// (`tokio_postgres::Error` displays only "db error"), which is what `statement error <regex>`
/// records match against, and so that an engine panic (the extended engine panics on result
/// types it cannot decode, such as `bpchar`, `name` or `uuid`) fails one record, not the run.
struct Db<D>(D);

#[async_trait]
impl<D> AsyncDB for Db<D>
where
    D: AsyncDB<Error = PgError, ColumnType = DefaultColumnType> + Send,
{
    type Error = SqlError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, SqlError> {
        match AssertUnwindSafe(self.0.run(sql)).catch_unwind().await {
            Ok(result) => result.map_err(SqlError::from_pg),
            Err(panic) => Err(SqlError::from_panic(panic)),
        }
    }

    async fn shutdown(&mut self) {
        self.0.shutdown().await;
    }

    fn engine_name(&self) -> &str {
        self.0.engine_name()
    }

    async fn sleep(dur: Duration) {
        tokio::time::sleep(dur).await;
    }

    fn error_sql_state(err: &SqlError) -> Option<String> {
        err.sqlstate.clone()
    }
}

/// An error as the `.slt` files see it. A server error displays as
/// `ERROR 23505: duplicate key value violates unique constraint "t_pkey"`, followed by
/// `DETAIL:` and `HINT:` lines when the server sent them.
#[derive(Debug)]
struct SqlError {
    sqlstate: Option<String>,
    display: String,
}

impl SqlError {
    fn from_pg(error: PgError) -> Self {
        let Some(db) = error.as_db_error() else {
            let mut display = error.to_string();
            let mut source = std::error::Error::source(&error);
            while let Some(cause) = source {
                display.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            return SqlError {
                sqlstate: None,
                display,
            };
        };
        let code = db.code().code().to_owned();
        let mut display = format!("{} {}: {}", db.severity(), code, db.message());
        if let Some(detail) = db.detail() {
            display.push_str(&format!("\nDETAIL: {detail}"));
        }
        if let Some(hint) = db.hint() {
            display.push_str(&format!("\nHINT: {hint}"));
        }
        SqlError {
            sqlstate: Some(code),
            display,
        }
    }

    fn from_panic(panic: Box<dyn std::any::Any + Send>) -> Self {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "unknown panic".into());
        let display = format!(
            "test engine panicked: {message} (if the engine cannot decode a column type, \
             cast the column to text in the .slt file)"
        );
        SqlError {
            sqlstate: None,
            display,
        }
    }
}

impl fmt::Display for SqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.display)
    }
}

impl std::error::Error for SqlError {}
