//! SQLsmith (Debian's `sqlsmith` package), unmodified, against a fresh Shoal: it reads the
//! catalogs (pg_type, pg_proc, pg_operator, information_schema.tables), then sends a bounded
//! number of random queries built from what it read, each in a transaction it rolls back.
//! Errors are expected (SQLsmith writes much that PostgreSQL refuses too); what must not
//! happen is a hang (SQLsmith does not finish within the wall-clock limit), a crash (the server
//! exits or stops answering), a panic in the server, or a query left without an answer
//! (SQLsmith counts a lost connection as `C` in its progress line). Also checks that every
//! function and operator the catalogs list exists, since SQLsmith calls them on that word.
//! Skipped with a note where sqlsmith is not installed, unless `SHOAL_REQUIRE_SQLSMITH` is set.

mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{connect, execute_each, ShoalServer};

/// About 90 seconds of queries in a debug build.
const QUERIES: u32 = 10_000;
const SEED: u32 = 1;
/// A run that takes longer than this is a hang.
const WALL_CLOCK_LIMIT: Duration = Duration::from_secs(600);
/// SQLsmith's progress marks, one per query: `.` answered, `e` an error, `S` a syntax error,
/// `t` a statement timeout, `C` a lost connection.
const PROGRESS_MARKS: &[char] = &['.', 'e', 'S', 't', 'C'];
const LOST_CONNECTION_MARK: char = 'C';

/// Tables of the column types clients use most, with NULLs, for SQLsmith to query.
const SCHEMA: &str = "
    CREATE TABLE smith_num (id int PRIMARY KEY, big bigint, amount numeric(10,2), ratio float8,
        small smallint);
    CREATE TABLE smith_text (id int PRIMARY KEY, name text, code varchar(20), flag bool,
        note text);
    CREATE TABLE smith_time (id int, day date, at timestamp, num_id int REFERENCES smith_num(id));
    INSERT INTO smith_num VALUES (1, 10000000000, 12.34, 0.5, 1), (2, NULL, -5.00, NULL, 2),
        (3, -7, NULL, 1e10, NULL);
    INSERT INTO smith_text VALUES (1, 'alpha', 'A1', true, NULL), (2, NULL, 'B2', false, 'x'),
        (3, 'gamma', NULL, NULL, '');
    INSERT INTO smith_time VALUES (1, '2024-02-29', '2024-02-29 12:00:00', 1),
        (2, NULL, NULL, NULL), (3, '1999-12-31', '2000-01-01 00:00:00', 3)";

/// The sqlsmith binary on the PATH, or None (the test is then skipped unless required).
fn sqlsmith_binary() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    let found = std::env::split_paths(&path)
        .map(|dir| dir.join("sqlsmith"))
        .find(|candidate| candidate.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("SHOAL_REQUIRE_SQLSMITH").is_none(),
            "sqlsmith is required (SHOAL_REQUIRE_SQLSMITH) but not installed (apt-get install \
             sqlsmith)"
        );
        println!("sqlsmith not installed: test skipped");
    }
    found
}

#[test]
fn sqlsmith_finds_no_crash_and_no_hang() {
    let Some(sqlsmith) = sqlsmith_binary() else {
        return;
    };
    let mut server = ShoalServer::start();
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    runtime.block_on(async {
        let client = connect(&server).await;
        execute_each(&client, SCHEMA).await;
        assert_listed_functions_exist(&client).await;
        assert_listed_operators_exist(&client).await;
    });

    let output = run_sqlsmith(&sqlsmith, &mut server);
    let progress = progress_marks(&output);
    println!("{}", summary(&output));

    assert!(
        server.is_running(),
        "shoal crashed during the SQLsmith run: {}",
        server.post_mortem()
    );
    runtime.block_on(async {
        let client = connect(&server).await;
        let rows = client.simple_query("SELECT 1").await.expect("SELECT 1");
        assert!(!rows.is_empty(), "SELECT 1 answered nothing");
    });
    let lost = progress
        .chars()
        .filter(|c| *c == LOST_CONNECTION_MARK)
        .count();
    assert_eq!(
        lost,
        0,
        "{lost} queries lost their connection: {}",
        server.post_mortem()
    );
    assert!(
        progress.len() as u32 >= QUERIES,
        "SQLsmith reported {} queries of {QUERIES}:\n{output}",
        progress.len()
    );
    let stderr = server_stderr(&server);
    assert!(
        !stderr.contains("panicked"),
        "the server panicked during the SQLsmith run: {}",
        server.post_mortem()
    );
}

/// Runs SQLsmith against `server` to its end; fails the test if it is still running after
/// `WALL_CLOCK_LIMIT` or fails itself. Returns its stderr (progress and report).
fn run_sqlsmith(sqlsmith: &Path, server: &mut ShoalServer) -> String {
    let stderr_path = server.data_dir().with_extension("sqlsmith");
    let stderr = std::fs::File::create(&stderr_path).expect("create sqlsmith's output file");
    let target = format!(
        "--target=host=127.0.0.1 port={} user=postgres dbname=postgres",
        server.port()
    );
    let mut child = Command::new(sqlsmith)
        .arg(target)
        .arg(format!("--max-queries={QUERIES}"))
        .arg(format!("--seed={SEED}"))
        .arg("--verbose")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("spawn sqlsmith");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("poll sqlsmith") {
            break status;
        }
        if started.elapsed() > WALL_CLOCK_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            let output = std::fs::read_to_string(&stderr_path).unwrap_or_default();
            panic!(
                "SQLsmith still running after {WALL_CLOCK_LIMIT:?} (a hang); its output:\n\
                 {output}\n{}",
                server.post_mortem()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let output = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let _ = std::fs::remove_file(&stderr_path);
    assert!(
        status.success(),
        "sqlsmith exited with {status}:\n{output}\n{}",
        server.post_mortem()
    );
    output
}

/// The progress marks of SQLsmith's output: its lines made of nothing else.
fn progress_marks(output: &str) -> String {
    output
        .lines()
        .filter(|line| !line.is_empty() && line.chars().all(|c| PROGRESS_MARKS.contains(&c)))
        .collect()
}

/// SQLsmith's last report: the query count and errors by message, most frequent first.
fn summary(output: &str) -> String {
    let start = output.rfind("queries: ").unwrap_or(output.len());
    let report: Vec<&str> = output[start..].lines().take(12).collect();
    report.join("\n")
}

fn server_stderr(server: &ShoalServer) -> String {
    std::fs::read_to_string(server.data_dir().with_extension("stderr")).unwrap_or_default()
}

/// Every function pg_proc lists can be called with its argument types (NULLs of them).
async fn assert_listed_functions_exist(client: &tokio_postgres::Client) {
    let type_names = type_names(client).await;
    let rows = client
        .simple_query("SELECT proname, proargtypes FROM pg_proc")
        .await
        .expect("read pg_proc");
    let mut calls = 0;
    for row in rows.iter().filter_map(simple_row) {
        let name = row.get(0).expect("proname");
        // An array of OIDs, as `{25,23}`.
        let arg_types = row.get(1).expect("proargtypes");
        let args: Vec<String> = arg_types
            .trim_matches(|c| c == '{' || c == '}')
            .split(',')
            .filter(|oid| !oid.is_empty())
            .map(|oid| format!("CAST(NULL AS {})", type_names[oid]))
            .collect();
        let sql = format!("SELECT pg_catalog.{name}({})", args.join(", "));
        assert_runs(client, &sql).await;
        calls += 1;
    }
    assert!(calls > 0, "pg_proc lists no functions");
}

/// The SQL name of each type in pg_type, by OID.
async fn type_names(client: &tokio_postgres::Client) -> HashMap<String, String> {
    let rows = client
        .simple_query("SELECT oid::text, format_type(oid, NULL) FROM pg_type")
        .await
        .expect("read pg_type");
    rows.iter()
        .filter_map(simple_row)
        .map(|row| {
            let oid = row.get(0).expect("oid").to_string();
            (oid, row.get(1).expect("type name").to_string())
        })
        .collect()
}

/// Every operator pg_operator lists applies to its operand types.
async fn assert_listed_operators_exist(client: &tokio_postgres::Client) {
    let rows = client
        .simple_query(
            "SELECT oprname, format_type(oprleft, NULL), format_type(oprright, NULL) \
             FROM pg_operator",
        )
        .await
        .expect("read pg_operator");
    let mut applied = 0;
    for row in rows.iter().filter_map(simple_row) {
        let (op, left, right) = (row.get(0), row.get(1), row.get(2));
        let (Some(op), Some(left), Some(right)) = (op, left, right) else {
            panic!("pg_operator row without a name or types");
        };
        let sql = format!("SELECT CAST(NULL AS {left}) {op} CAST(NULL AS {right})");
        assert_runs(client, &sql).await;
        applied += 1;
    }
    assert!(applied > 0, "pg_operator lists no operators");
}

fn simple_row(
    message: &tokio_postgres::SimpleQueryMessage,
) -> Option<&tokio_postgres::SimpleQueryRow> {
    match message {
        tokio_postgres::SimpleQueryMessage::Row(row) => Some(row),
        _ => None,
    }
}

async fn assert_runs(client: &tokio_postgres::Client, sql: &str) {
    if let Err(e) = client.simple_query(sql).await {
        let code = e.code().map(|c| c.code().to_string()).unwrap_or_default();
        panic!("{sql}: {code} {e:?}");
    }
}
