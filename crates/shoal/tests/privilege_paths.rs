//! Privileges hold on every way a statement runs, not only the general path: prepared point
//! statements (the fast path and kept plans, which outlive a GRANT or REVOKE), the simple
//! protocol's statement cache (a point statement the cache has planned before), and COPY in
//! both directions. A denial is 42501 and changes nothing; a GRANT takes effect for statements
//! prepared before it, and a REVOKE for statements that ran allowed before it.

mod support;

use std::io::Cursor;
use std::pin::pin;

use futures::SinkExt;
use support::{connect, ShoalServer};
use tokio_postgres::Client;

async fn connect_as(server: &ShoalServer, user: &str) -> Client {
    support::connect_with(server, &format!("user={user}")).await
}

fn sqlstate(e: &tokio_postgres::Error) -> String {
    e.code()
        .map(|c| c.code().to_string())
        .unwrap_or_else(|| format!("not a server error: {e}"))
}

async fn count(admin: &Client, sql: &str) -> i64 {
    admin.query_one(sql, &[]).await.expect(sql).get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fast_path_statement_cache_and_copy_deny_what_sql_denies() {
    let server = ShoalServer::start();
    let admin = connect(&server).await;
    admin
        .batch_execute(
            "CREATE ROLE clerk LOGIN; \
             CREATE TABLE ledger (id int PRIMARY KEY, amount int); \
             INSERT INTO ledger VALUES (1, 10), (2, 20)",
        )
        .await
        .unwrap();
    let clerk = connect_as(&server, "clerk").await;

    // Prepared before any grant: the fast path must refuse them.
    let select = clerk
        .prepare("SELECT amount FROM ledger WHERE id = $1")
        .await
        .unwrap();
    let update = clerk
        .prepare("UPDATE ledger SET amount = amount + $2 WHERE id = $1")
        .await
        .unwrap();
    let insert = clerk
        .prepare("INSERT INTO ledger (id, amount) VALUES ($1, $2)")
        .await
        .unwrap();
    let e = clerk.query(&select, &[&1i32]).await.unwrap_err();
    assert_eq!(sqlstate(&e), "42501", "{e}");
    let e = clerk.execute(&update, &[&1i32, &5i32]).await.unwrap_err();
    assert_eq!(sqlstate(&e), "42501", "{e}");
    let e = clerk.execute(&insert, &[&3i32, &30i32]).await.unwrap_err();
    assert_eq!(sqlstate(&e), "42501", "{e}");
    // The simple protocol's point statements, run twice so the second comes from the cache.
    for _ in 0..2 {
        let e = clerk
            .simple_query("SELECT amount FROM ledger WHERE id = 1")
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&e), "42501", "{e}");
        let e = clerk
            .simple_query("UPDATE ledger SET amount = 0 WHERE id = 2")
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&e), "42501", "{e}");
    }
    // COPY in both directions.
    let e = clerk
        .copy_out("COPY ledger TO STDOUT")
        .await
        .err()
        .expect("COPY TO without SELECT");
    assert_eq!(sqlstate(&e), "42501", "{e}");
    clerk
        .simple_query("SELECT 1")
        .await
        .expect("usable after a denied COPY TO");
    // On a connection of its own: after a COPY refused at its start, tokio-postgres's copy_in
    // leaves the connection out of step (it does so with PostgreSQL too).
    let copier = connect_as(&server, "clerk").await;
    let copy_in = async {
        let mut sink = pin!(
            copier
                .copy_in::<_, Cursor<Vec<u8>>>("COPY ledger FROM STDIN")
                .await?
        );
        sink.send(Cursor::new(b"9\t90\n".to_vec())).await?;
        sink.as_mut().finish().await
    };
    let e = copy_in.await.unwrap_err();
    assert_eq!(sqlstate(&e), "42501", "{e}");
    drop(copier);
    assert_eq!(count(&admin, "SELECT count(*) FROM ledger").await, 2);
    assert_eq!(
        count(&admin, "SELECT sum(amount)::int8 FROM ledger").await,
        30,
        "nothing a denied statement wrote is there"
    );

    // A GRANT reaches the statements prepared before it ...
    admin
        .batch_execute("GRANT SELECT, UPDATE ON ledger TO clerk")
        .await
        .unwrap();
    for _ in 0..3 {
        let rows = clerk.query(&select, &[&1i32]).await.unwrap();
        assert_eq!(rows[0].get::<_, i32>(0), 10);
        clerk
            .simple_query("SELECT amount FROM ledger WHERE id = 1")
            .await
            .unwrap();
    }
    assert_eq!(clerk.execute(&update, &[&1i32, &5i32]).await.unwrap(), 1);
    let e = clerk.execute(&insert, &[&3i32, &30i32]).await.unwrap_err();
    assert_eq!(sqlstate(&e), "42501", "INSERT was not granted: {e}");

    // ... and a REVOKE reaches statements that ran allowed before it (kept plans, cached
    // shapes).
    admin
        .batch_execute("REVOKE SELECT, UPDATE ON ledger FROM clerk")
        .await
        .unwrap();
    let e = clerk.query(&select, &[&1i32]).await.unwrap_err();
    assert_eq!(sqlstate(&e), "42501", "{e}");
    let e = clerk.execute(&update, &[&1i32, &5i32]).await.unwrap_err();
    assert_eq!(sqlstate(&e), "42501", "{e}");
    let e = clerk
        .simple_query("SELECT amount FROM ledger WHERE id = 1")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "42501", "{e}");
    assert_eq!(
        count(&admin, "SELECT amount::int8 FROM ledger WHERE id = 1").await,
        15
    );

    // SET ROLE changes whose privileges count for the same session's cached statements.
    admin
        .batch_execute("GRANT SELECT ON ledger TO clerk")
        .await
        .unwrap();
    admin
        .simple_query("SELECT amount FROM ledger WHERE id = 2")
        .await
        .unwrap();
    admin.batch_execute("SET ROLE clerk").await.unwrap();
    admin
        .simple_query("SELECT amount FROM ledger WHERE id = 2")
        .await
        .unwrap();
    let e = admin
        .simple_query("UPDATE ledger SET amount = 0 WHERE id = 2")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "42501", "{e}");
    admin.batch_execute("RESET ROLE").await.unwrap();
    admin
        .simple_query("UPDATE ledger SET amount = 21 WHERE id = 2")
        .await
        .unwrap();
    assert_eq!(
        count(&admin, "SELECT amount::int8 FROM ledger WHERE id = 2").await,
        21
    );

    // Column privileges hold on the same paths: SELECT on id only, UPDATE on amount only.
    admin
        .batch_execute(
            "REVOKE SELECT ON ledger FROM clerk;              GRANT SELECT (id), UPDATE (amount) ON ledger TO clerk",
        )
        .await
        .unwrap();
    let ids = clerk
        .prepare("SELECT id FROM ledger WHERE id = $1")
        .await
        .unwrap();
    let set = clerk
        .prepare("UPDATE ledger SET amount = $2 WHERE id = $1")
        .await
        .unwrap();
    for _ in 0..2 {
        assert_eq!(clerk.query(&ids, &[&1i32]).await.unwrap().len(), 1);
        let e = clerk.query(&select, &[&1i32]).await.unwrap_err();
        assert_eq!(sqlstate(&e), "42501", "amount is not readable: {e}");
        // amount = amount + $2 reads amount.
        let e = clerk.execute(&update, &[&1i32, &5i32]).await.unwrap_err();
        assert_eq!(sqlstate(&e), "42501", "{e}");
        assert_eq!(clerk.execute(&set, &[&1i32, &7i32]).await.unwrap(), 1);
        let e = clerk
            .simple_query("SELECT amount FROM ledger WHERE id = 1")
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&e), "42501", "{e}");
        clerk
            .simple_query("SELECT id FROM ledger WHERE id = 1")
            .await
            .unwrap();
    }
    let e = clerk
        .copy_out("COPY ledger TO STDOUT")
        .await
        .err()
        .expect("COPY TO of every column");
    assert_eq!(sqlstate(&e), "42501", "{e}");
    assert_eq!(
        count(&admin, "SELECT amount::int8 FROM ledger WHERE id = 1").await,
        7
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ownership_and_grants_survive_a_crash() {
    let server = ShoalServer::start();
    let admin = connect(&server).await;
    admin
        .batch_execute(
            "CREATE ROLE owner_role LOGIN; CREATE ROLE reader LOGIN; \
             CREATE SCHEMA app; GRANT USAGE, CREATE ON SCHEMA app TO owner_role",
        )
        .await
        .unwrap();
    let owner = connect_as(&server, "owner_role").await;
    owner
        .batch_execute(
            "CREATE TABLE app.items (id int PRIMARY KEY); INSERT INTO app.items VALUES (1); \
             GRANT SELECT ON app.items TO reader; GRANT UPDATE (id) ON app.items TO reader",
        )
        .await
        .unwrap();
    drop(owner);
    drop(admin);
    let data_dir = server.crash();
    let server = ShoalServer::start_in(data_dir, &[]).unwrap();
    let admin = connect(&server).await;
    let row = admin
        .query_one(
            "SELECT tableowner::text, has_table_privilege('reader', 'app.items', 'SELECT'), \
                    has_table_privilege('reader', 'app.items', 'INSERT') \
             FROM pg_tables WHERE tablename = 'items'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "owner_role");
    assert!(row.get::<_, bool>(1));
    assert!(!row.get::<_, bool>(2));
    let column_acl: String = admin
        .query_one(
            "SELECT attacl::text FROM pg_attribute \
             WHERE attrelid = 'app.items'::regclass AND attname = 'id'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(column_acl, "{reader=w/owner_role}");
    let acl: String = admin
        .query_one(
            "SELECT nspacl::text FROM pg_namespace WHERE nspname = 'app'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(acl, "{postgres=UC/postgres,owner_role=UC/postgres}");
    let reader = connect_as(&server, "reader").await;
    let e = reader
        .simple_query("INSERT INTO app.items VALUES (2)")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "42501", "{e}");
}
