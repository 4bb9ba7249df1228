//! The server log: `log_min_duration_statement` logs each statement that ran at least that
//! long with its duration, as PostgreSQL words it (`duration: 1.234 ms  statement: ...` for a
//! simple query, `execute <name>: ...` for the extended protocol), only superusers may change
//! it, and `log_destination = jsonlog` makes every log line a JSON object.

mod support;

use support::{connect, ShoalServer};

/// The server's output so far (its log goes to stdout, which the test harness keeps with its
/// stderr).
fn log_of(server: &ShoalServer) -> String {
    std::fs::read_to_string(server.data_dir().with_extension("stderr")).unwrap()
}

/// Waits for the log to hold `text` (the line is written when the statement's result is sent).
async fn wait_for_log(server: &ShoalServer, text: &str) -> String {
    for _ in 0..100 {
        let log = log_of(server);
        if log.contains(text) {
            return log;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("the log never said {text:?}:\n{}", log_of(server));
}

#[tokio::test]
async fn slow_statements_are_logged_as_json_lines() {
    let server = ShoalServer::start_with(&[
        "-c",
        "log_destination=jsonlog",
        "-c",
        "log_min_duration_statement=0",
    ]);
    let client = connect(&server).await;
    client
        .simple_query("SELECT 42 AS simple_marker")
        .await
        .unwrap();
    client
        .query("SELECT $1::int + 1 AS extended_marker", &[&1i32])
        .await
        .unwrap();
    let log = wait_for_log(&server, "extended_marker").await;
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect();
    let message = |needle: &str| {
        lines
            .iter()
            .filter_map(|l| l["message"].as_str())
            .find(|m| m.contains(needle))
            .unwrap_or_else(|| panic!("no log line with {needle}:\n{log}"))
            .to_string()
    };
    let simple = message("simple_marker");
    assert!(
        simple.starts_with("duration: ")
            && simple.contains(" ms  statement: SELECT 42 AS simple_marker"),
        "{simple}"
    );
    let extended = message("extended_marker");
    assert!(
        extended.starts_with("duration: ") && extended.contains(" ms  execute "),
        "{extended}"
    );
    assert!(lines
        .iter()
        .all(|l| l["level"].is_string() && l["timestamp"].is_string()));
    let ready = message("ready to accept connections");
    assert!(!ready.is_empty());

    // Only superusers change it; a long threshold logs nothing more.
    client
        .batch_execute("CREATE ROLE plain LOGIN; SET log_min_duration_statement = '1h'")
        .await
        .unwrap();
    client.simple_query("SELECT 'quick_marker'").await.unwrap();
    let plain = support::connect_with(&server, "user=plain").await;
    let e = plain
        .batch_execute("SET log_min_duration_statement = 0")
        .await
        .unwrap_err();
    let db = e.as_db_error().unwrap();
    assert_eq!(db.code().code(), "42501");
    assert_eq!(
        db.message(),
        "permission denied to set parameter \"log_min_duration_statement\""
    );
    client.simple_query("SELECT 'after_marker'").await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(!log_of(&server).contains("quick_marker"));
    let shown: String = client
        .query_one("SHOW log_min_duration_statement", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(shown, "1h");
}

#[tokio::test]
async fn statements_are_not_logged_by_default() {
    let server = ShoalServer::start();
    let client = connect(&server).await;
    client
        .simple_query("SELECT 'default_marker'")
        .await
        .unwrap();
    let shown: String = client
        .query_one("SHOW log_min_duration_statement", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(shown, "-1");
    let e = client
        .batch_execute("SET log_destination = jsonlog")
        .await
        .unwrap_err();
    assert_eq!(e.as_db_error().unwrap().code().code(), "55P02");
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let log = log_of(&server);
    assert!(!log.contains("default_marker"), "{log}");
    assert!(!log.starts_with('{'), "text lines by default");
}
