//! `--metrics-listen`: Prometheus's text format at /metrics, with values that follow what
//! clients do (sessions, transactions, statement latency, rows, the redo log, checkpoints,
//! memory per table), and 404 for any other path.

mod support;

use std::io::{Read, Write};

use support::{connect, free_port, ShoalServer};

/// GETs `path`; returns the status line, the headers and the body.
fn get(port: u16, path: &str) -> (String, String, String) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response
        .split_once("\r\n\r\n")
        .expect("a header and a body");
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    (
        status.to_string(),
        headers.to_ascii_lowercase(),
        body.to_string(),
    )
}

/// The value of the sample `name` (with its labels, as written) in `body`.
fn sample(body: &str, name: &str) -> f64 {
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no sample {name} in:\n{body}"))
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_follow_what_clients_do() {
    let metrics_port = free_port();
    let metrics_addr = format!("127.0.0.1:{metrics_port}");
    let server = ShoalServer::start_with(&["--metrics-listen", &metrics_addr]);
    let client = connect(&server).await;

    let (status, headers, before) = get(metrics_port, "/metrics");
    assert!(status.contains("200"), "{status}");
    assert!(
        headers.contains("content-type: text/plain; version=0.0.4"),
        "{headers}"
    );
    for family in [
        "# TYPE shoal_statement_duration_seconds histogram",
        "# TYPE shoal_transactions_total counter",
        "# TYPE shoal_wal_fsyncs_total counter",
        "# TYPE shoal_memory_resident_bytes gauge",
        "# TYPE shoal_gc_backlog_tables gauge",
    ] {
        assert!(before.contains(family), "{family} missing");
    }
    assert_eq!(sample(&before, "shoal_connections{state=\"idle\"}"), 1.0);

    client
        .batch_execute("CREATE TABLE m (id int PRIMARY KEY, v text)")
        .await
        .unwrap();
    for i in 0..20 {
        client
            .execute("INSERT INTO m VALUES ($1, 'x')", &[&i])
            .await
            .unwrap();
    }
    client
        .batch_execute("BEGIN; SELECT 1; ROLLBACK")
        .await
        .unwrap();
    client.batch_execute("CHECKPOINT").await.unwrap();

    let (_, _, after) = get(metrics_port, "/metrics");
    let grew = |name: &str| sample(&after, name) - sample(&before, name);
    assert!(
        grew("shoal_transactions_total{outcome=\"commit\"}") >= 20.0,
        "{}",
        grew("shoal_transactions_total{outcome=\"commit\"}")
    );
    assert!(grew("shoal_transactions_total{outcome=\"rollback\"}") >= 1.0);
    assert!(grew("shoal_statement_duration_seconds_count") >= 20.0);
    assert_eq!(
        sample(&after, "shoal_statement_duration_seconds_count"),
        sample(
            &after,
            "shoal_statement_duration_seconds_bucket{le=\"+Inf\"}"
        )
    );
    assert_eq!(
        sample(&after, "shoal_rows_total{operation=\"inserted\"}"),
        20.0
    );
    assert!(grew("shoal_wal_records_total") >= 20.0);
    assert!(grew("shoal_wal_fsyncs_total") >= 1.0);
    assert_eq!(grew("shoal_checkpoints_total{trigger=\"requested\"}"), 1.0);
    assert!(
        sample(
            &after,
            "shoal_table_memory_bytes{schema=\"public\",table=\"m\",part=\"rows\"}"
        ) > 0.0
    );
    assert!(sample(&after, "shoal_memory_resident_bytes") > 0.0);
    assert!(sample(&after, "shoal_memory_limit_bytes") > 0.0);

    let (status, _, _) = get(metrics_port, "/other");
    assert!(status.contains("404"), "{status}");
}

/// The Grafana dashboard in the repository reads only metrics the server serves.
#[test]
fn the_grafana_dashboard_names_served_metrics() {
    let dashboard = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/grafana/shoal.json"
    ))
    .unwrap();
    let source = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shoal-sql/src/metrics.rs"
    ))
    .unwrap();
    let mut named = 0;
    for word in dashboard.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        if let Some(family) = word.strip_prefix("shoal_") {
            let family = family
                .trim_end_matches("_bucket")
                .trim_end_matches("_sum")
                .trim_end_matches("_count");
            assert!(
                source.contains(&format!("\"shoal_{family}\"")),
                "shoal_{family} is not served"
            );
            named += 1;
        }
    }
    assert!(named > 10);
}
