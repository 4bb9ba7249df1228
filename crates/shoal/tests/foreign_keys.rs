//! Foreign keys under concurrency, over the wire. A transaction that writes a referencing row
//! locks the row it references (FOR KEY SHARE, as PostgreSQL), so a DELETE of that row in
//! another transaction waits for it and then fails if the reference committed; a referencing
//! write waits for an uncommitted DELETE of its row and fails if that commits. Referencing
//! writers do not wait for each other, and neither do FOR SHARE lockers.

mod support;

use std::time::Duration;

use support::{connect, ShoalServer};
use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

/// How long a statement that must wait gets to finish on its own before the transaction it
/// waits for ends: it must not.
const STILL_WAITING_AFTER: Duration = Duration::from_millis(300);

async fn set_up(server: &ShoalServer) -> (Client, Client) {
    let a = connect(server).await;
    let b = connect(server).await;
    a.batch_execute(
        "CREATE TABLE parent (id bigint PRIMARY KEY, name text);
         CREATE TABLE child (id int PRIMARY KEY, parent_id int REFERENCES parent (id));
         INSERT INTO parent VALUES (1, 'one'), (2, 'two');",
    )
    .await
    .expect("set up");
    (a, b)
}

/// Starts `sql` on `client` and checks that it is still waiting after a while; returns its
/// outcome's task.
async fn start_waiting(
    client: Client,
    sql: &'static str,
) -> tokio::task::JoinHandle<(Client, Result<(), tokio_postgres::Error>)> {
    let task = tokio::spawn(async move {
        let result = client.batch_execute(sql).await;
        (client, result)
    });
    tokio::time::sleep(STILL_WAITING_AFTER).await;
    assert!(!task.is_finished(), "{sql} should wait");
    task
}

async fn count(client: &Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).await.expect(sql).get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_of_a_referenced_row_waits_for_the_referencing_transaction() {
    let server = ShoalServer::start();
    let (a, b) = set_up(&server).await;
    // The reference commits: the delete, which could not see it when it started, fails.
    a.batch_execute("BEGIN; INSERT INTO child VALUES (10, 1)")
        .await
        .unwrap();
    let delete = start_waiting(b, "DELETE FROM parent WHERE id = 1").await;
    a.batch_execute("COMMIT").await.unwrap();
    let (b, result) = delete.await.unwrap();
    let err = result.expect_err("the committed reference keeps the row");
    assert_eq!(
        err.code(),
        Some(&SqlState::FOREIGN_KEY_VIOLATION),
        "{err:?}"
    );
    assert_eq!(
        count(&b, "SELECT count(*) FROM parent WHERE id = 1").await,
        1
    );
    // The reference rolls back: the delete goes ahead.
    a.batch_execute("BEGIN; INSERT INTO child VALUES (20, 2)")
        .await
        .unwrap();
    let delete = start_waiting(b, "DELETE FROM parent WHERE id = 2").await;
    a.batch_execute("ROLLBACK").await.unwrap();
    let (b, result) = delete.await.unwrap();
    result.expect("nothing references the row any more");
    assert_eq!(
        count(&b, "SELECT count(*) FROM parent WHERE id = 2").await,
        0
    );
    // No child points at a missing parent.
    let orphans = "SELECT count(*) FROM child c WHERE NOT EXISTS
                   (SELECT 1 FROM parent p WHERE p.id = c.parent_id)";
    assert_eq!(count(&b, orphans).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_referencing_insert_waits_for_an_uncommitted_delete_of_its_row() {
    let server = ShoalServer::start();
    let (a, b) = set_up(&server).await;
    a.batch_execute("BEGIN; DELETE FROM parent WHERE id = 1")
        .await
        .unwrap();
    let insert = start_waiting(b, "INSERT INTO child VALUES (10, 1)").await;
    a.batch_execute("COMMIT").await.unwrap();
    let (b, result) = insert.await.unwrap();
    let err = result.expect_err("the referenced row is gone");
    assert_eq!(
        err.code(),
        Some(&SqlState::FOREIGN_KEY_VIOLATION),
        "{err:?}"
    );
    // The same with a rollback: the insert goes ahead.
    a.batch_execute("BEGIN; DELETE FROM parent WHERE id = 2")
        .await
        .unwrap();
    let insert = start_waiting(b, "INSERT INTO child VALUES (20, 2)").await;
    a.batch_execute("ROLLBACK").await.unwrap();
    let (b, result) = insert.await.unwrap();
    result.expect("the referenced row is back");
    assert_eq!(count(&b, "SELECT count(*) FROM child").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn referencing_writers_of_one_row_do_not_wait_for_each_other() {
    let server = ShoalServer::start();
    let (a, b) = set_up(&server).await;
    a.batch_execute("BEGIN; INSERT INTO child VALUES (10, 1)")
        .await
        .unwrap();
    let insert = b.batch_execute("BEGIN; INSERT INTO child VALUES (11, 1)");
    tokio::time::timeout(Duration::from_secs(10), insert)
        .await
        .expect("the second reference to the row does not wait for the first")
        .unwrap();
    // FOR SHARE lockers share too; FOR UPDATE waits for both.
    a.batch_execute("SELECT * FROM parent WHERE id = 2 FOR SHARE")
        .await
        .unwrap();
    let share = b.batch_execute("SELECT * FROM parent WHERE id = 2 FOR SHARE");
    tokio::time::timeout(Duration::from_secs(10), share)
        .await
        .expect("FOR SHARE does not wait for FOR SHARE")
        .unwrap();
    let c = connect(&server).await;
    let for_update = start_waiting(c, "SELECT * FROM parent WHERE id = 2 FOR UPDATE").await;
    a.batch_execute("COMMIT").await.unwrap();
    tokio::time::sleep(STILL_WAITING_AFTER).await;
    assert!(
        !for_update.is_finished(),
        "FOR UPDATE waits for the other FOR SHARE"
    );
    b.batch_execute("COMMIT").await.unwrap();
    let (_, result) = for_update.await.unwrap();
    result.expect("FOR UPDATE once both share locks are gone");
    assert_eq!(count(&a, "SELECT count(*) FROM child").await, 2);
}

/// Two transactions that each add a line to one order and then update its total, as
/// applications do: the lines' locks on the order (FOR KEY SHARE) do not keep out an update
/// that leaves its key alone, so neither waits for the other's lock and neither deadlocks.
/// An update of the key does wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn referencing_rows_let_updates_of_other_columns_through() {
    let server = ShoalServer::start();
    let (a, b) = set_up(&server).await;
    a.batch_execute("BEGIN; INSERT INTO child VALUES (10, 1)")
        .await
        .unwrap();
    b.batch_execute("BEGIN; INSERT INTO child VALUES (11, 1)")
        .await
        .unwrap();
    let rename = a.batch_execute("UPDATE parent SET name = name || '+a' WHERE id = 1");
    tokio::time::timeout(Duration::from_secs(10), rename)
        .await
        .expect("an update of a non-key column does not wait for the references")
        .unwrap();
    // b's update waits for a's (the row's newer version), not for a lock, and then applies.
    let update_b = start_waiting(b, "UPDATE parent SET name = name || '+b' WHERE id = 1").await;
    a.batch_execute("COMMIT").await.unwrap();
    let (b, result) = update_b.await.unwrap();
    result.expect("b's update after a's commit");
    b.batch_execute("COMMIT").await.unwrap();
    let name: String = a
        .query_one("SELECT name FROM parent WHERE id = 1", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(name, "one+a+b");
    // A key update waits for a reference, and fails once it commits.
    a.batch_execute("BEGIN; INSERT INTO child VALUES (20, 2)")
        .await
        .unwrap();
    let rekey = start_waiting(b, "UPDATE parent SET id = 5 WHERE id = 2").await;
    a.batch_execute("COMMIT").await.unwrap();
    let (_, result) = rekey.await.unwrap();
    let err = result.expect_err("the committed reference keeps the key");
    assert_eq!(
        err.code(),
        Some(&SqlState::FOREIGN_KEY_VIOLATION),
        "{err:?}"
    );
}

/// A reference to a row that another transaction is updating goes ahead when that update
/// leaves the row's key alone (PostgreSQL's FOR KEY SHARE does not conflict with the FOR NO KEY
/// UPDATE lock of such an update), and waits when the update changes the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reference_does_not_wait_for_a_pending_update_of_other_columns() {
    let server = ShoalServer::start();
    let (a, b) = set_up(&server).await;
    a.batch_execute("BEGIN; UPDATE parent SET name = 'uno' WHERE id = 1")
        .await
        .unwrap();
    let insert = b.batch_execute("BEGIN; INSERT INTO child VALUES (10, 1)");
    tokio::time::timeout(Duration::from_secs(10), insert)
        .await
        .expect("a reference does not wait for an update of a non-key column")
        .unwrap();
    // The reference holds the row's key: the updater's delete now waits for it, and fails
    // once it commits.
    let delete = start_waiting(a, "DELETE FROM parent WHERE id = 1").await;
    b.batch_execute("COMMIT").await.unwrap();
    let (a, result) = delete.await.unwrap();
    let err = result.expect_err("the committed reference keeps the row");
    assert_eq!(
        err.code(),
        Some(&SqlState::FOREIGN_KEY_VIOLATION),
        "{err:?}"
    );
    a.batch_execute("ROLLBACK").await.unwrap();
    // A pending update of the key itself is waited for, and the reference fails once the
    // new key commits.
    a.batch_execute("BEGIN; UPDATE parent SET id = 3 WHERE id = 2")
        .await
        .unwrap();
    let insert = start_waiting(b, "INSERT INTO child VALUES (20, 2)").await;
    a.batch_execute("COMMIT").await.unwrap();
    let (b, result) = insert.await.unwrap();
    let err = result.expect_err("the referenced key is gone");
    assert_eq!(
        err.code(),
        Some(&SqlState::FOREIGN_KEY_VIOLATION),
        "{err:?}"
    );
    let rows = b
        .query(
            "SELECT p.id, p.name FROM child c JOIN parent p ON p.id = c.parent_id",
            &[],
        )
        .await
        .unwrap();
    let rows: Vec<(i64, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(rows, [(1, "one".to_string())]);
}

/// ROLLBACK TO SAVEPOINT releases the locks taken after the savepoint only: a reference's lock
/// from before it stays, even when the row was locked FOR UPDATE in between.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_to_savepoint_keeps_the_references_lock_from_before_it() {
    let server = ShoalServer::start();
    let (a, b) = set_up(&server).await;
    a.batch_execute(
        "BEGIN; INSERT INTO child VALUES (10, 1); SAVEPOINT s;
         SELECT * FROM parent WHERE id = 1 FOR UPDATE; ROLLBACK TO SAVEPOINT s",
    )
    .await
    .unwrap();
    let delete = start_waiting(b, "DELETE FROM parent WHERE id = 1").await;
    a.batch_execute("COMMIT").await.unwrap();
    let (_, result) = delete.await.unwrap();
    let err = result.expect_err("the committed reference keeps the row");
    assert_eq!(
        err.code(),
        Some(&SqlState::FOREIGN_KEY_VIOLATION),
        "{err:?}"
    );
}

/// REPEATABLE READ: a reference committed after the deleting transaction's snapshot is one it
/// cannot see, and deleting past it would orphan it: a serialization failure, as in PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeatable_read_delete_of_a_row_referenced_since_its_snapshot_fails_to_serialize() {
    let server = ShoalServer::start();
    let (a, b) = set_up(&server).await;
    b.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM child")
        .await
        .unwrap();
    a.batch_execute("INSERT INTO child VALUES (10, 1)")
        .await
        .unwrap();
    let err = b
        .batch_execute("DELETE FROM parent WHERE id = 1")
        .await
        .expect_err("the reference it cannot see keeps the row");
    assert_eq!(
        err.code(),
        Some(&SqlState::T_R_SERIALIZATION_FAILURE),
        "{err:?}"
    );
    b.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(
        count(&b, "SELECT count(*) FROM parent WHERE id = 1").await,
        1
    );
}

/// REPEATABLE READ with ON DELETE CASCADE: a reference committed after the snapshot is one the
/// cascade cannot see, and deleting the row past it would orphan it: a serialization failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeatable_read_cascade_past_a_reference_it_cannot_see_fails_to_serialize() {
    let server = ShoalServer::start();
    let (a, b) = set_up(&server).await;
    a.batch_execute(
        "CREATE TABLE tag (id int PRIMARY KEY, parent_id int REFERENCES parent ON DELETE CASCADE);
         INSERT INTO tag VALUES (1, 2)",
    )
    .await
    .unwrap();
    b.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM tag")
        .await
        .unwrap();
    a.batch_execute("INSERT INTO tag VALUES (2, 2)")
        .await
        .unwrap();
    let err = b
        .batch_execute("DELETE FROM parent WHERE id = 2")
        .await
        .expect_err("tag 2 is a reference b cannot see");
    assert_eq!(
        err.code(),
        Some(&SqlState::T_R_SERIALIZATION_FAILURE),
        "{err:?}"
    );
    b.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(count(&b, "SELECT count(*) FROM tag").await, 2);
}

/// An integer column may reference a bigint key; ON DELETE CASCADE removes references that
/// committed after the deleting statement began.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cascades_reach_references_committed_while_the_delete_waited() {
    let server = ShoalServer::start();
    let (a, b) = set_up(&server).await;
    a.batch_execute(
        "CREATE TABLE tag (id int PRIMARY KEY, parent_id int REFERENCES parent ON DELETE CASCADE)",
    )
    .await
    .unwrap();
    a.batch_execute("BEGIN; INSERT INTO tag VALUES (1, 2)")
        .await
        .unwrap();
    let delete = start_waiting(b, "DELETE FROM parent WHERE id = 2").await;
    a.batch_execute("COMMIT").await.unwrap();
    let (b, result) = delete.await.unwrap();
    result.expect("the cascade deletes the reference");
    assert_eq!(count(&b, "SELECT count(*) FROM tag").await, 0);
    assert_eq!(count(&b, "SELECT count(*) FROM parent").await, 1);
}

/// SELECT ... FOR NO KEY UPDATE lets a reference (FOR KEY SHARE) in, as PostgreSQL does, and
/// keeps FOR SHARE out; SELECT ... FOR KEY SHARE keeps a key update out and lets an update of
/// other columns in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_weaker_locking_clauses_lock_as_postgresql_does() {
    let server = ShoalServer::start();
    let (a, b) = set_up(&server).await;
    a.batch_execute("BEGIN; SELECT * FROM parent WHERE id = 1 FOR NO KEY UPDATE")
        .await
        .unwrap();
    let reference = b.batch_execute(
        "BEGIN; INSERT INTO child VALUES (10, 1); SELECT id FROM parent WHERE id = 1 FOR KEY SHARE",
    );
    tokio::time::timeout(Duration::from_secs(10), reference)
        .await
        .expect("FOR KEY SHARE does not wait for FOR NO KEY UPDATE")
        .unwrap();
    let err = b
        .batch_execute("SELECT id FROM parent WHERE id = 1 FOR SHARE NOWAIT")
        .await
        .expect_err("FOR SHARE conflicts with FOR NO KEY UPDATE");
    assert_eq!(err.code(), Some(&SqlState::LOCK_NOT_AVAILABLE), "{err:?}");
    b.batch_execute("ROLLBACK").await.unwrap();
    a.batch_execute("ROLLBACK").await.unwrap();

    a.batch_execute("BEGIN; SELECT id FROM parent WHERE id = 2 FOR KEY SHARE")
        .await
        .unwrap();
    let update = b.batch_execute("UPDATE parent SET name = 'deux' WHERE id = 2");
    tokio::time::timeout(Duration::from_secs(10), update)
        .await
        .expect("an update of other columns does not wait for FOR KEY SHARE")
        .unwrap();
    let key_update = start_waiting(b, "UPDATE parent SET id = 3 WHERE id = 2").await;
    a.batch_execute("COMMIT").await.unwrap();
    let (b, result) = key_update.await.unwrap();
    result.expect("the key update goes ahead once the key share ends");
    assert_eq!(
        count(&b, "SELECT count(*) FROM parent WHERE id = 3").await,
        1
    );
}

/// ON CONFLICT DO UPDATE of other columns locks the row FOR NO KEY UPDATE, as PostgreSQL: a
/// reference to it does not wait. One that assigns the key locks it FOR UPDATE, and does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upsert_of_other_columns_lets_references_in() {
    let server = ShoalServer::start();
    let (a, b) = set_up(&server).await;
    a.batch_execute(
        "BEGIN; INSERT INTO parent VALUES (1, 'x') ON CONFLICT (id) DO UPDATE SET name = 'uno'",
    )
    .await
    .unwrap();
    let reference = b.batch_execute("INSERT INTO child VALUES (10, 1)");
    tokio::time::timeout(Duration::from_secs(10), reference)
        .await
        .expect("a reference does not wait for an upsert of other columns")
        .unwrap();
    a.batch_execute("COMMIT").await.unwrap();
    a.batch_execute(
        "BEGIN; INSERT INTO parent VALUES (2, 'x') ON CONFLICT (id) DO UPDATE SET id = 3",
    )
    .await
    .unwrap();
    let reference = start_waiting(b, "INSERT INTO child VALUES (20, 2)").await;
    a.batch_execute("COMMIT").await.unwrap();
    let (b, result) = reference.await.unwrap();
    let err = result.expect_err("the referenced key is gone");
    assert_eq!(
        err.code(),
        Some(&SqlState::FOREIGN_KEY_VIOLATION),
        "{err:?}"
    );
    assert_eq!(
        count(&b, "SELECT count(*) FROM child WHERE parent_id = 1").await,
        1
    );
}

/// A table several locking clauses affect takes the strongest of their locks, and NOWAIT if
/// any clause says so (PostgreSQL's rule), whatever the clauses' order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_locking_clauses_on_one_table_take_the_strongest() {
    let server = ShoalServer::start();
    let (a, b) = set_up(&server).await;
    a.batch_execute("BEGIN; SELECT * FROM parent p WHERE id = 1 FOR KEY SHARE FOR UPDATE OF p")
        .await
        .unwrap();
    let err = b
        .batch_execute("SELECT id FROM parent WHERE id = 1 FOR KEY SHARE OF parent NOWAIT")
        .await
        .expect_err("the row is locked FOR UPDATE");
    assert_eq!(err.code(), Some(&SqlState::LOCK_NOT_AVAILABLE), "{err:?}");
    let locked = b.batch_execute("SELECT id FROM parent WHERE id = 1 FOR UPDATE FOR SHARE NOWAIT");
    let err = tokio::time::timeout(Duration::from_secs(10), locked)
        .await
        .expect("NOWAIT in any clause applies")
        .expect_err("the row is locked FOR UPDATE");
    assert_eq!(err.code(), Some(&SqlState::LOCK_NOT_AVAILABLE), "{err:?}");
    a.batch_execute("COMMIT").await.unwrap();
    let rows = b
        .query(
            "SELECT id FROM parent WHERE id = 1 FOR KEY SHARE FOR UPDATE NOWAIT",
            &[],
        )
        .await
        .expect("free again");
    assert_eq!(rows.len(), 1);
}

/// Three transactions reference one parent row (each holds FOR KEY SHARE on it); one of them
/// also holds the other parent row and then wants the first one for update, so it waits for
/// both others. When the second of them reaches for the other parent row, the cycle goes
/// through the first waiter's wait for it (not for the one it sleeps on): a deadlock
/// (40P01), found at once as PostgreSQL does, rather than a wait for as long as the third stays open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadlock_through_a_second_holder_of_a_shared_lock_is_found() {
    let server = ShoalServer::start();
    let (a, b) = set_up(&server).await;
    let c = connect(&server).await;
    a.batch_execute(
        "BEGIN; SELECT id FROM parent WHERE id = 2 FOR UPDATE; INSERT INTO child VALUES (10, 1)",
    )
    .await
    .unwrap();
    b.batch_execute("BEGIN; INSERT INTO child VALUES (20, 1)")
        .await
        .unwrap();
    c.batch_execute("BEGIN; INSERT INTO child VALUES (30, 1)")
        .await
        .unwrap();
    let wait = start_waiting(a, "SELECT id FROM parent WHERE id = 1 FOR UPDATE").await;
    let locked = c.batch_execute("SELECT id FROM parent WHERE id = 2 FOR UPDATE");
    let err = tokio::time::timeout(Duration::from_secs(10), locked)
        .await
        .expect("the deadlock is found while b stays open")
        .expect_err("a deadlock");
    assert_eq!(
        err.code(),
        Some(&SqlState::T_R_DEADLOCK_DETECTED),
        "{err:?}"
    );
    c.batch_execute("ROLLBACK").await.unwrap();
    b.batch_execute("ROLLBACK").await.unwrap();
    let (a, locked) = wait.await.unwrap();
    locked.expect("a gets the row once b and c are gone");
    a.batch_execute("COMMIT").await.unwrap();
    assert_eq!(count(&a, "SELECT count(*) FROM child").await, 1);
}
