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

/// ORDER BY an index's next columns after equalities on its leading ones reads the index in
/// order (`query/index_order.rs`): EXPLAIN shows the ordered read, its direction and how many
/// rows it stopped after; a sort by anything else is still a sort.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_shows_an_ordered_index_read() {
    let server = ShoalServer::start();
    let client = connect(&server).await;
    client
        .batch_execute(
            "CREATE TABLE io_new (w int, d int, o int, note text, PRIMARY KEY (w, d, o));
             INSERT INTO io_new SELECT w, d, o, 'x' FROM generate_series(1, 2) w,
                 generate_series(1, 10) d, generate_series(1, 900) o;",
        )
        .await
        .expect("set up");
    let oldest = plan(
        &client,
        "SELECT o FROM io_new WHERE w = 1 AND d = 5 ORDER BY o LIMIT 1",
    )
    .await;
    assert!(
        oldest.contains(
            "IndexOrderRead: table=io_new index=io_new_pkey order=forward fetch=1 rows=1"
        ),
        "{oldest}"
    );
    assert!(!oldest.contains("SortExec"), "{oldest}");
    let newest = plan(
        &client,
        "SELECT o FROM io_new WHERE w = 2 AND d = 1 ORDER BY o DESC LIMIT 3",
    )
    .await;
    assert!(
        newest.contains(
            "IndexOrderRead: table=io_new index=io_new_pkey order=backward fetch=3 rows=3"
        ),
        "{newest}"
    );
    // Another filter: the read goes on until the filter above has its rows.
    let filtered = plan(
        &client,
        "SELECT o FROM io_new WHERE w = 2 AND d = 1 AND note = 'y' ORDER BY o DESC LIMIT 3",
    )
    .await;
    assert!(
        filtered.contains("IndexOrderRead: table=io_new index=io_new_pkey order=backward rows=900"),
        "{filtered}"
    );
    let max = plan(&client, "SELECT max(o) FROM io_new WHERE w = 1 AND d = 5").await;
    assert!(
        max.contains(
            "IndexOrderRead: table=io_new index=io_new_pkey order=backward fetch=1 rows=1"
        ),
        "{max}"
    );
    let min = plan(&client, "SELECT min(o) FROM io_new WHERE w = 1 AND d = 5").await;
    assert!(
        min.contains("IndexOrderRead: table=io_new index=io_new_pkey order=forward fetch=1 rows=1"),
        "{min}"
    );
    let by_note = plan(
        &client,
        "SELECT o FROM io_new WHERE w = 2 AND d = 1 ORDER BY note LIMIT 3",
    )
    .await;
    assert!(by_note.contains("SortExec"), "{by_note}");
    assert!(!by_note.contains("IndexOrderRead"), "{by_note}");
}

/// A range that keeps most of a table is read by a scan, a narrow one through the index: the
/// choice counts the index's entries in the range (`RowTable::index_ranges_exceed`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_over_most_of_a_table_is_scanned() {
    let server = ShoalServer::start();
    let client = connect(&server).await;
    client
        .batch_execute(
            "CREATE TABLE is_t (id int PRIMARY KEY, k int);
             CREATE INDEX is_t_k ON is_t (k);
             INSERT INTO is_t SELECT g, g % 10 FROM generate_series(1, 5000) g;",
        )
        .await
        .expect("set up");
    let most = plan(&client, "SELECT count(*) FROM is_t WHERE id > 100").await;
    assert!(most.contains("RowScan: table=is_t rows=5000"), "{most}");
    let few = plan(&client, "SELECT count(*) FROM is_t WHERE id > 4900").await;
    assert!(
        few.contains("IndexRead: table=is_t index=is_t_pkey ranges=1 rows=100"),
        "{few}"
    );
    let half = plan(
        &client,
        "SELECT count(*) FROM is_t WHERE k IN (1, 2, 3, 4, 5)",
    )
    .await;
    assert!(half.contains("RowScan: table=is_t"), "{half}");
    let tenth = plan(&client, "SELECT count(*) FROM is_t WHERE k = 7").await;
    assert!(
        tenth.contains("IndexRead: table=is_t index=is_t_k ranges=1 rows=500"),
        "{tenth}"
    );
}
