//! DDL that checks a table's existing rows against a new constraint (SET NOT NULL, ADD CHECK,
//! ADD FOREIGN KEY, ADD PRIMARY KEY) checks the rows other transactions have written and not
//! yet committed, too. Shoal takes no relation locks, so such a row would otherwise commit
//! after the DDL and break the constraint the table now has. PostgreSQL waits for the other
//! transaction; Shoal fails the DDL with the violation instead, and it succeeds once the other
//! transaction has rolled back.

mod support;

use support::{connect, ShoalServer};
use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

/// Runs `ddl` while `other` has an open transaction that ran `uncommitted`: the DDL must fail
/// with `code`. Then `other` rolls back, and the same DDL must succeed.
async fn refused_until_rollback(
    ddl_client: &Client,
    other: &Client,
    uncommitted: &str,
    ddl: &str,
    code: &SqlState,
) {
    other.batch_execute("BEGIN").await.expect("begin");
    other
        .batch_execute(uncommitted)
        .await
        .expect("uncommitted write");
    let err = ddl_client.batch_execute(ddl).await.expect_err(&format!(
        "{ddl} must see the uncommitted row ({uncommitted})"
    ));
    assert_eq!(err.code(), Some(code), "{ddl}: {err:?}");
    other.batch_execute("ROLLBACK").await.expect("rollback");
    ddl_client
        .batch_execute(ddl)
        .await
        .unwrap_or_else(|e| panic!("{ddl} after the rollback: {e:?}"));
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
