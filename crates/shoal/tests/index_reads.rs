//! EXPLAIN names the index a scan of a row table reads, and a scan where no index helps
//! (`crates/shoal-sql/src/query/access_path.rs`). The answers themselves are checked against
//! PostgreSQL in `tests/slt/index_reads.slt`.

mod support;

use support::{connect, ShoalServer};
use tokio_postgres::Client;

async fn plan(client: &Client, query: &str) -> String {
    let rows = client
        .simple_query(&format!("EXPLAIN {query}"))
        .await
        .expect("explain");
    rows.iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_shows_the_index_a_scan_reads() {
    let server = ShoalServer::start();
    let client = connect(&server).await;
    client
        .batch_execute(
            "CREATE TABLE ie_t (a int, b int, c text, PRIMARY KEY (a, b));
             CREATE INDEX ie_t_c ON ie_t (c);
             INSERT INTO ie_t SELECT g % 10, g, 'v' || (g % 7) FROM generate_series(1, 200) g;",
        )
        .await
        .expect("set up");
    let key_range = plan(&client, "SELECT b FROM ie_t WHERE a = 3 AND b < 50").await;
    assert!(
        key_range.contains("IndexRead: table=ie_t index=ie_t_pkey ranges=1 rows=5"),
        "{key_range}"
    );
    let in_list = plan(&client, "SELECT b FROM ie_t WHERE c IN ('v1', 'v2')").await;
    assert!(
        in_list.contains("IndexRead: table=ie_t index=ie_t_c ranges=2"),
        "{in_list}"
    );
    let rows = plan(
        &client,
        "SELECT b FROM ie_t WHERE (a, b) IN ((1, 11), (2, 12))",
    )
    .await;
    assert!(
        rows.contains("IndexRead: table=ie_t index=ie_t_pkey ranges=2 rows=2"),
        "{rows}"
    );
    let scan = plan(&client, "SELECT b FROM ie_t WHERE b = 5").await;
    assert!(!scan.contains("IndexRead"), "{scan}");
}

/// A join whose inner table is reached by key: EXPLAIN shows the build side's keys collected and
/// the inner table read through an index lookup, not scanned (`query/index_join.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_shows_an_index_lookup_join() {
    let server = ShoalServer::start();
    let client = connect(&server).await;
    client
        .batch_execute(
            "CREATE TABLE il_stock (w int, i int, q int, PRIMARY KEY (w, i));
             INSERT INTO il_stock SELECT w, i, i % 20 FROM generate_series(1, 2) w,
                 generate_series(1, 3000) i;
             CREATE TABLE il_line (o int, n int, item int, PRIMARY KEY (o, n));
             INSERT INTO il_line SELECT o, n, o * 13 + n FROM generate_series(1, 30) o,
                 generate_series(1, 5) n;",
        )
        .await
        .expect("set up");
    let join = plan(
        &client,
        "SELECT count(*) FROM il_line l JOIN il_stock s ON s.w = 1 AND s.i = l.item WHERE l.o < 5",
    )
    .await;
    assert!(join.contains("KeyCollector: keys=[item@"), "{join}");
    assert!(
        join.contains("IndexLookup: table=il_stock keys=[i]"),
        "{join}"
    );
    // Without a condition pinning `w`, the leading key column, no index has `i` first.
    let scan = plan(
        &client,
        "SELECT count(*) FROM il_line l JOIN il_stock s ON s.i = l.item WHERE l.o < 5",
    )
    .await;
    assert!(!scan.contains("IndexLookup"), "{scan}");
}
