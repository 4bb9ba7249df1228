//! DDL that checks a table's existing rows against a new constraint (SET NOT NULL, ADD CHECK,
//! ADD FOREIGN KEY, ADD PRIMARY KEY) checks the rows other transactions have written and not
//! yet committed, too. Shoal takes no relation locks, so such a row would otherwise commit
//! after the DDL and break the constraint the table now has. PostgreSQL waits for the other
//! transaction; Shoal fails the DDL with the violation instead, and it succeeds once the other
//! transaction has rolled back. DDL that rewrites the rows fails (55P03) while another
//! transaction has uncommitted changes in the table, which the rewrite would lose or which
//! replay after a crash could not apply.

mod support;

use support::{connect, ShoalServer};
use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

/// Runs `ddl` while `other` has an open transaction that ran `uncommitted`: the DDL must fail
/// with `code` and change nothing. Then `other` ends its transaction with `end` (ROLLBACK or
/// COMMIT), and the same DDL must succeed.
async fn refused_until_writer_ends(
    ddl_client: &Client,
    other: &Client,
    uncommitted: &str,
    ddl: &str,
    code: &SqlState,
    end: &str,
) {
    other.batch_execute("BEGIN").await.expect("begin");
    other
        .batch_execute(uncommitted)
        .await
        .expect("uncommitted write");
    let err = ddl_client.batch_execute(ddl).await.expect_err(&format!(
        "{ddl} must see the uncommitted change ({uncommitted})"
    ));
    assert_eq!(err.code(), Some(code), "{ddl}: {err:?}");
    other.batch_execute(end).await.expect("end the writer");
    ddl_client
        .batch_execute(ddl)
        .await
        .unwrap_or_else(|e| panic!("{ddl} after {end}: {e:?}"));
}

/// A constraint check that fails on another transaction's uncommitted row.
async fn refused_until_rollback(
    ddl_client: &Client,
    other: &Client,
    uncommitted: &str,
    ddl: &str,
    code: &SqlState,
) {
    refused_until_writer_ends(ddl_client, other, uncommitted, ddl, code, "ROLLBACK").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn constraints_added_while_another_transaction_writes_check_its_rows() {
    let server = ShoalServer::start();
    let ddl = connect(&server).await;
    let other = connect(&server).await;
    ddl.batch_execute(
        "CREATE TABLE parent (id int PRIMARY KEY);
         INSERT INTO parent VALUES (1);
         CREATE TABLE t (id int, v int, pid int);
         INSERT INTO t VALUES (1, 10, 1);",
    )
    .await
    .expect("set up");

    refused_until_rollback(
        &ddl,
        &other,
        "INSERT INTO t VALUES (2, NULL, 1)",
        "ALTER TABLE t ALTER COLUMN v SET NOT NULL",
        &SqlState::NOT_NULL_VIOLATION,
    )
    .await;
    refused_until_rollback(
        &ddl,
        &other,
        "INSERT INTO t VALUES (3, -5, 1)",
        "ALTER TABLE t ADD CONSTRAINT v_positive CHECK (v > 0)",
        &SqlState::CHECK_VIOLATION,
    )
    .await;
    refused_until_rollback(
        &ddl,
        &other,
        "INSERT INTO t VALUES (4, 40, 99)",
        "ALTER TABLE t ADD CONSTRAINT t_pid_fkey FOREIGN KEY (pid) REFERENCES parent (id)",
        &SqlState::FOREIGN_KEY_VIOLATION,
    )
    .await;
    refused_until_rollback(
        &ddl,
        &other,
        "INSERT INTO t VALUES (NULL, 50, 1)",
        "ALTER TABLE t ADD PRIMARY KEY (id)",
        &SqlState::NOT_NULL_VIOLATION,
    )
    .await;

    // An uncommitted row that satisfies every constraint does not stop the DDL, and after both
    // commit, the constraints hold for every row.
    other.batch_execute("BEGIN").await.expect("begin");
    other
        .batch_execute("INSERT INTO t VALUES (5, 50, 1)")
        .await
        .expect("a row that satisfies them");
    ddl.batch_execute("ALTER TABLE t ADD CONSTRAINT v_below_100 CHECK (v < 100)")
        .await
        .expect("a CHECK the uncommitted row passes");
    other.batch_execute("COMMIT").await.expect("commit");
    let rows = ddl
        .query("SELECT id, v, pid FROM t ORDER BY id", &[])
        .await
        .expect("read back");
    let ids: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(ids, vec![1, 5]);
    let err = ddl
        .batch_execute("INSERT INTO t VALUES (6, NULL, 1)")
        .await
        .expect_err("NOT NULL holds for new rows");
    assert_eq!(err.code(), Some(&SqlState::NOT_NULL_VIOLATION));
}

/// A rewrite refused (55P03) while another transaction's change is uncommitted; it keeps that
/// change once committed.
async fn rebuild_refused_until_commit(
    ddl_client: &Client,
    other: &Client,
    uncommitted: &str,
    ddl: &str,
) {
    let code = &SqlState::LOCK_NOT_AVAILABLE;
    refused_until_writer_ends(ddl_client, other, uncommitted, ddl, code, "COMMIT").await;
}

/// ALTER COLUMN TYPE and SET ACCESS METHOD rebuild the table from the rows they read. Before,
/// another session's open transaction kept writing into the old table: its COMMIT succeeded
/// and its rows were gone, and the redo log then named rows the rebuilt table did not have, so
/// the next start-up failed in replay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_does_not_drop_another_transactions_changes() {
    let server = ShoalServer::start();
    let ddl = connect(&server).await;
    let other = connect(&server).await;
    ddl.batch_execute(
        "CREATE TABLE r (id int PRIMARY KEY, v int);
         INSERT INTO r VALUES (1, 10);
         CREATE TABLE h (id int, v int);
         INSERT INTO h VALUES (1, 10);",
    )
    .await
    .expect("set up");

    rebuild_refused_until_commit(
        &ddl,
        &other,
        "INSERT INTO r VALUES (2, 20)",
        "ALTER TABLE r ALTER COLUMN v TYPE bigint",
    )
    .await;
    rebuild_refused_until_commit(
        &ddl,
        &other,
        "UPDATE r SET v = 11 WHERE id = 1",
        "ALTER TABLE r ALTER COLUMN v TYPE text",
    )
    .await;
    let rows = ddl
        .query("SELECT id, v FROM r ORDER BY id", &[])
        .await
        .expect("read r");
    let r: Vec<(i32, String)> = rows.iter().map(|row| (row.get(0), row.get(1))).collect();
    assert_eq!(r, vec![(1, "11".to_string()), (2, "20".to_string())]);

    rebuild_refused_until_commit(
        &ddl,
        &other,
        "DELETE FROM h WHERE id = 1",
        "ALTER TABLE h SET ACCESS METHOD columnar",
    )
    .await;
    let left: i64 = ddl
        .query_one("SELECT count(*) FROM h", &[])
        .await
        .expect("count h")
        .get(0);
    assert_eq!(left, 0, "the committed DELETE must survive the rebuild");

    // With nobody else writing, the statement's own snapshot is all there is to copy.
    ddl.batch_execute("ALTER TABLE r ALTER COLUMN v TYPE varchar(10)")
        .await
        .expect("a rebuild with no other writer");
    drop((ddl, other));

    // The redo log replays to the same tables after a crash.
    let data_dir = server.crash();
    let server = ShoalServer::start_in(data_dir, &[]).expect("restart after the crash");
    let client = connect(&server).await;
    let rows = client
        .query("SELECT id, v FROM r ORDER BY id", &[])
        .await
        .expect("read r after the restart");
    let r: Vec<(i32, String)> = rows.iter().map(|row| (row.get(0), row.get(1))).collect();
    assert_eq!(r, vec![(1, "11".to_string()), (2, "20".to_string())]);
    let left: i64 = client
        .query_one("SELECT count(*) FROM h", &[])
        .await
        .expect("count h after the restart")
        .get(0);
    assert_eq!(left, 0);
}

/// DROP COLUMN and ADD COLUMN with a default rewrite every row in place, but a write made
/// before them by a transaction still open is logged, at its commit, with the columns it was
/// written with: replay then panicked on it (DROP COLUMN) or read the new column as NULL (ADD
/// COLUMN ... DEFAULT). Such rewrites are refused while the table has uncommitted writes;
/// ADD COLUMN without a default still runs (a row logged without the column reads NULL on
/// replay too). Every committed value must be the same after a crash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn column_rewrites_wait_for_no_one_and_replay_to_the_same_rows() {
    let server = ShoalServer::start();
    let ddl = connect(&server).await;
    let other = connect(&server).await;
    ddl.batch_execute(
        "CREATE TABLE c (id int PRIMARY KEY, d int, v int);
         INSERT INTO c VALUES (1, 0, 10);",
    )
    .await
    .expect("set up");

    rebuild_refused_until_commit(
        &ddl,
        &other,
        "INSERT INTO c VALUES (2, 0, 20)",
        "ALTER TABLE c DROP COLUMN d",
    )
    .await;
    rebuild_refused_until_commit(
        &ddl,
        &other,
        "UPDATE c SET v = 11 WHERE id = 1",
        "ALTER TABLE c ADD COLUMN e int DEFAULT 7",
    )
    .await;

    // This transaction's own uncommitted rows stop a rewrite too (55006), not one that adds a
    // column without a default.
    ddl.batch_execute("BEGIN; INSERT INTO c VALUES (3, 30, 70)")
        .await
        .expect("own write");
    let err = ddl
        .batch_execute("ALTER TABLE c ADD COLUMN f int DEFAULT 8")
        .await
        .expect_err("a rewrite over the transaction's own uncommitted row");
    assert_eq!(err.code(), Some(&SqlState::OBJECT_IN_USE), "{err:?}");
    ddl.batch_execute("ROLLBACK; BEGIN; INSERT INTO c VALUES (3, 30, 70)")
        .await
        .expect("own write again");
    ddl.batch_execute("ALTER TABLE c ADD COLUMN g int; COMMIT")
        .await
        .expect("a column without a default in the same transaction");

    let read = |client: Client| async move {
        let rows = client
            .query("SELECT id, v, e, g FROM c ORDER BY id", &[])
            .await
            .expect("read c");
        rows.iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
            .collect::<Vec<(i32, i32, Option<i32>, Option<i32>)>>()
    };
    let expected = vec![
        (1, 11, Some(7), None),
        (2, 20, Some(7), None),
        (3, 30, Some(70), None),
    ];
    assert_eq!(read(ddl).await, expected);
    drop(other);

    let data_dir = server.crash();
    let server = ShoalServer::start_in(data_dir, &[]).expect("restart after the crash");
    assert_eq!(read(connect(&server).await).await, expected);
}

/// A table rebuilt inside a block (ALTER COLUMN TYPE, DROP COLUMN) that another session writes
/// to before the block rolls back keeps the rebuilt table and that session's commit: putting
/// the old storage back would lose it. Without such a write the old table comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_rebuild_keeps_rows_other_sessions_committed_since() {
    let server = ShoalServer::start();
    let ddl = connect(&server).await;
    let other = connect(&server).await;
    ddl.batch_execute(
        "CREATE TABLE rb (id int PRIMARY KEY, n int, extra text);
         INSERT INTO rb VALUES (1, 10, 'a'), (2, 20, 'b')",
    )
    .await
    .unwrap();
    ddl.batch_execute("BEGIN; ALTER TABLE rb ALTER COLUMN n TYPE bigint")
        .await
        .unwrap();
    other
        .batch_execute("INSERT INTO rb VALUES (3, 30, 'c')")
        .await
        .unwrap();
    ddl.batch_execute("ALTER TABLE rb DROP COLUMN extra; ROLLBACK")
        .await
        .unwrap();
    let rows = other
        .query("SELECT id, n::text FROM rb ORDER BY id", &[])
        .await
        .unwrap();
    let got: Vec<(i32, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(
        got,
        vec![(1, "10".into()), (2, "20".into()), (3, "30".into())],
        "the other session's committed row stays"
    );
    // Nobody else writes this time: the old table, with its column, comes back.
    ddl.batch_execute("BEGIN; ALTER TABLE rb ALTER COLUMN n TYPE text; ROLLBACK")
        .await
        .unwrap();
    let n_type: String = ddl
        .query_one(
            "SELECT data_type::text FROM information_schema.columns \
             WHERE table_name = 'rb' AND column_name = 'n'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_ne!(n_type, "text");
    let sum: i64 = ddl
        .query_one("SELECT sum(n)::bigint FROM rb", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(sum, 60);
}
