//! Helpers shared by the engine-level tests: a fresh data directory path and running SQL
//! through a `Session` without the wire.

#![allow(dead_code)] // Each test file uses a different subset.

use std::path::PathBuf;

use datafusion::arrow::util::display::array_value_to_string;
use shoal_sql::durability::DurabilityOptions;
use shoal_sql::session::StatementResult;
use shoal_sql::Session;

/// Durability options without the background checkpointer: a test takes its checkpoints
/// itself, and every restart otherwise replays the whole log.
pub fn no_automatic_checkpoints() -> DurabilityOptions {
    DurabilityOptions {
        checkpoint_log_bytes: u64::MAX,
        checkpoint_interval_s: 3600,
        ..DurabilityOptions::default()
    }
}

/// A single-threaded runtime to drive sessions from a plain test.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A data directory path unique to this process and moment (not created).
pub fn temp_dir(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "shoal-{name}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ))
}

/// Runs `sql`, panicking on any error.
pub async fn run(session: &mut Session, sql: &str) -> Vec<StatementResult> {
    session
        .execute_sql(sql)
        .await
        .into_iter()
        .map(|r| r.unwrap_or_else(|e| panic!("{sql}: {e:?}")))
        .collect()
}

/// The first column of the first row of a query's result, as text.
pub async fn scalar(session: &mut Session, sql: &str) -> String {
    let mut results = run(session, sql).await;
    let batches = match results.pop().map(|r| r.into_batches().expect("rows")) {
        Some(StatementResult::Rows { batches, .. }) => batches,
        other => panic!("{sql}: not rows: {other:?}"),
    };
    let batch = batches.iter().find(|b| b.num_rows() > 0).expect("one row");
    array_value_to_string(batch.column(0), 0).unwrap()
}
