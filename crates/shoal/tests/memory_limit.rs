//! `shoal.max_memory`: once the server's memory reaches the limit, writes that add rows fail
//! with 53200 and a hint, while reads and deletes keep working, the server stays up, and
//! everything committed survives a restart.

mod support;

use support::{connect, ShoalServer};

/// Rows of ~1 KB each statement adds: ~5 MB.
const ROWS_PER_INSERT: i64 = 5_000;
/// How far above the server's memory at the start the test sets the limit.
const HEADROOM_MB: u64 = 96;

fn resident_mb(pid: u32) -> u64 {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096 >> 20
}

fn sqlstate(e: &tokio_postgres::Error) -> String {
    e.code()
        .map(|c| c.code().to_string())
        .unwrap_or_else(|| format!("not a server error: {e}"))
}

async fn count(client: &tokio_postgres::Client) -> i64 {
    client
        .query_one("SELECT count(*) FROM filler", &[])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_stop_at_the_limit_and_reads_deletes_and_restarts_go_on() {
    if !cfg!(target_os = "linux") {
        return; // the limit is measured from /proc
    }
    let mut server = ShoalServer::start();
    let client = connect(&server).await;
    client
        .batch_execute(
            "CREATE TABLE filler (id bigint PRIMARY KEY, pad text);
             CREATE TABLE facts (n int) USING columnar;",
        )
        .await
        .unwrap();
    let e = client
        .batch_execute("SET shoal.max_memory = '1GB'")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "55P02", "a setting of the whole server: {e}");

    let limit_mb = resident_mb(server.pid()) + HEADROOM_MB;
    client
        .batch_execute(&format!(
            "ALTER SYSTEM SET shoal.max_memory = '{limit_mb}MB'"
        ))
        .await
        .unwrap();
    client
        .batch_execute("SELECT pg_reload_conf()")
        .await
        .unwrap();
    let shown: String = client
        .query_one("SHOW shoal.max_memory", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(shown, format!("{limit_mb}MB"));

    let mut inserts_committed = 0i64;
    let refusal = loop {
        assert!(
            inserts_committed < 400,
            "2 GB went in under a limit of {limit_mb} MB"
        );
        let first = inserts_committed * ROWS_PER_INSERT;
        let insert = format!(
            "INSERT INTO filler SELECT g, repeat('x', 1000) FROM generate_series({first}, {}) g",
            first + ROWS_PER_INSERT - 1
        );
        match client.batch_execute(&insert).await {
            Ok(()) => inserts_committed += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(sqlstate(&refusal), "53200", "{refusal}");
    let db_error = refusal.as_db_error().unwrap();
    assert_eq!(db_error.message(), "out of memory");
    assert!(db_error.hint().unwrap().contains("shoal.max_memory"));
    assert!(inserts_committed > 0, "the limit was set above the start");
    assert!(server.is_running());

    // The failed statement left nothing; reads go on.
    assert_eq!(count(&client).await, inserts_committed * ROWS_PER_INSERT);
    // The refused statement's own rows were freed, which may take the server back under the
    // limit: lower it by half the headroom, below what the committed rows alone hold, so the
    // checks that follow run over the limit whatever the allocator gave back.
    let held_mb = limit_mb - HEADROOM_MB / 2;
    client
        .batch_execute(&format!(
            "ALTER SYSTEM SET shoal.max_memory = '{held_mb}MB'"
        ))
        .await
        .unwrap();
    client
        .batch_execute("SELECT pg_reload_conf()")
        .await
        .unwrap();
    // Other writes that add memory are refused too: updates and column tables.
    let update = client
        .batch_execute("UPDATE filler SET pad = 'y' WHERE id = 1")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&update), "53200", "{update}");
    let columnar = client
        .batch_execute("INSERT INTO facts VALUES (1)")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&columnar), "53200", "{columnar}");
    // So are index builds, which leave no index behind.
    let index = client
        .batch_execute("CREATE INDEX filler_pad ON filler (pad)")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&index), "53200", "{index}");
    let indexes: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_indexes WHERE indexname = 'filler_pad'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(indexes, 0);
    // A transaction block that hits the limit rolls back as a whole.
    client.batch_execute("BEGIN").await.unwrap();
    client
        .batch_execute("DELETE FROM filler WHERE id = 0")
        .await
        .unwrap();
    assert!(client
        .batch_execute("INSERT INTO filler VALUES (-1, 'z')")
        .await
        .is_err());
    client.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(count(&client).await, inserts_committed * ROWS_PER_INSERT);

    // Deletes work at the limit.
    let kept = ROWS_PER_INSERT;
    let deleted = client
        .execute("DELETE FROM filler WHERE id >= $1", &[&kept])
        .await
        .unwrap();
    assert_eq!(deleted as i64, (inserts_committed - 1) * ROWS_PER_INSERT);
    assert_eq!(count(&client).await, kept);
    // Back to the first limit, which the restart below is measured against.
    client
        .batch_execute(&format!(
            "ALTER SYSTEM SET shoal.max_memory = '{limit_mb}MB'"
        ))
        .await
        .unwrap();
    drop(client);

    // Nothing committed is lost, and with the memory back the limit lets writes in.
    let (status, data_dir) = server.terminate();
    assert!(status.success());
    let server = ShoalServer::start_in(data_dir, &[]).unwrap();
    let client = connect(&server).await;
    assert_eq!(count(&client).await, kept);
    client
        .batch_execute(
            "INSERT INTO filler VALUES (-1, 'after restart'); INSERT INTO facts VALUES (1)",
        )
        .await
        .unwrap();
    let shown: String = client
        .query_one("SHOW shoal.max_memory", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(shown, format!("{limit_mb}MB"), "ALTER SYSTEM lasts");
}
