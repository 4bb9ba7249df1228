//! Replication groups that drop the log's start: checkpoints are the group's snapshots, and a
//! node further behind than the log kept, or one joining from nothing, is sent the primary's
//! newest checkpoint and follows the log from there. A member gone for good is removed. The
//! members authenticate each other.

mod support;

use std::time::{Duration, Instant};

use support::group::*;
use support::{connect, free_port};
use tokio_postgres::NoTls;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_drop_the_log_and_nodes_behind_it_load_the_primarys() {
    let _one_group = ONE_GROUP_AT_A_TIME.lock().await;
    // Few entries kept after a checkpoint, so that a node behind is sent the checkpoint. The
    // members authenticate each other with a group key.
    let key_file = std::env::temp_dir().join(format!("shoal-group-key-{}", std::process::id()));
    std::fs::write(&key_file, "a group key of 32 bytes, at least\n").unwrap();
    let key_arg = key_file.to_str().unwrap().to_string();
    let mut group = Group::start_with(&[
        "--replication-log-keep",
        "5",
        "--replication-key-file",
        &key_arg,
    ]);
    let (p, primary) = group.settled_primary().await;
    primary
        .batch_execute(
            "CREATE TABLE rows_t (id int PRIMARY KEY, v bigint NOT NULL);
             CREATE INDEX rows_v ON rows_t (v);
             CREATE TABLE cols_t (id int, v bigint) USING columnar;",
        )
        .await
        .unwrap();
    for i in 0..40 {
        primary
            .batch_execute(&format!(
                "INSERT INTO rows_t SELECT g, g * 2 FROM generate_series({0} * 25 + 1, {0} * 25 + 25) g;
                 INSERT INTO cols_t SELECT g, g FROM generate_series({0} * 100 + 1, {0} * 100 + 100) g;",
                i
            ))
            .await
            .unwrap();
    }
    for statement in [
        "UPDATE rows_t SET v = v + 1 WHERE id % 7 = 0",
        "DELETE FROM rows_t WHERE id % 11 = 0",
        "ALTER TABLE rows_t ADD COLUMN note text DEFAULT 'x'",
    ] {
        primary.batch_execute(statement).await.unwrap();
    }
    let tables = |rows: String, cols: String| vec![("rows_t", rows), ("cols_t", cols)];
    let expected = tables(
        table_digest(&primary, "rows_t").await,
        table_digest(&primary, "cols_t").await,
    );
    for n in 0..3 {
        wait_digests(&group, n, &expected).await;
    }
    // Every node checkpoints (a standby of the log it applied) and drops the log before it.
    for n in 0..3 {
        let c = connect(group.nodes[n].as_ref().unwrap()).await;
        c.batch_execute("CHECKPOINT")
            .await
            .unwrap_or_else(|e| panic!("CHECKPOINT on node {}: {e}", n + 1));
        assert!(
            group.dirs[n].join("checkpoints/CURRENT").exists(),
            "node {} has a checkpoint",
            n + 1
        );
    }

    // A standby restarts from its checkpoint and the log after it.
    let standby = (p + 1) % 3;
    group.kill(standby);
    group.restart(standby);
    wait_standby(&group, standby).await;
    wait_digests(&group, standby, &expected).await;
    assert!(
        server_log(&group, standby).contains("loaded checkpoint"),
        "node {} restarted from its checkpoint",
        standby + 1
    );

    // The other standby is away while the group commits and checkpoints on: it comes back
    // behind the log the group kept and is sent the primary's checkpoint.
    let away = (p + 2) % 3;
    group.kill(away);
    for i in 40..60 {
        primary
            .batch_execute(&format!(
                "INSERT INTO rows_t (id, v) SELECT g, g * 2 FROM generate_series({0} * 25 + 1, {0} * 25 + 25) g;
                 INSERT INTO cols_t SELECT g, g FROM generate_series({0} * 100 + 1, {0} * 100 + 100) g;",
                i
            ))
            .await
            .unwrap();
    }
    primary.batch_execute("CHECKPOINT").await.unwrap();
    group.restart(away);
    let expected = tables(
        table_digest(&primary, "rows_t").await,
        table_digest(&primary, "cols_t").await,
    );
    wait_digests(&group, away, &expected).await;
    assert!(
        server_log(&group, away).contains("received the primary's checkpoint"),
        "node {} was sent the checkpoint:\n{}",
        away + 1,
        server_log(&group, away)
    );

    // A fourth node joins from nothing while the primary takes writes.
    let port = free_port();
    let mut peers = group.args[0][3].clone();
    peers.push_str(&format!(",4=127.0.0.1:{port}"));
    // A node with another key is refused.
    let wrong_key = key_file.with_extension("wrong");
    std::fs::write(&wrong_key, "not the group's key, but as long").unwrap();
    let impostor_dir = group.dirs[0].with_file_name("impostor");
    let impostor = support::ShoalServer::start_in(
        impostor_dir,
        &[
            "--node-id",
            "4",
            "--peers",
            &peers,
            "--join",
            "--replication-key-file",
            wrong_key.to_str().unwrap(),
        ],
    )
    .expect("the impostor starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !server_log(&group, p).contains("refused a replication connection") {
        assert!(
            Instant::now() < deadline,
            "the primary did not refuse a wrong key"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(impostor);
    let joining_args = vec![
        "--node-id".to_string(),
        "4".into(),
        "--peers".into(),
        peers,
        "--join".into(),
        "--replication-key-file".into(),
        key_arg.clone(),
    ];
    group.args.push(joining_args);
    group.dirs.push(group.dirs[0].with_file_name("node4"));
    group.nodes.push(None);
    group.frozen.push(false);
    let writer_port = group.port(p);
    let writer = tokio::spawn(async move {
        let conn = format!("host=127.0.0.1 port={writer_port} user=postgres dbname=postgres");
        let (client, connection) = tokio_postgres::connect(&conn, NoTls).await.unwrap();
        tokio::spawn(connection);
        for i in 60..80 {
            client
                .batch_execute(&format!(
                    "INSERT INTO rows_t (id, v) SELECT g, g FROM generate_series({0} * 25 + 1, {0} * 25 + 25) g",
                    i
                ))
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    group.restart(3);
    writer.await.unwrap();
    let expected = tables(
        table_digest(&primary, "rows_t").await,
        table_digest(&primary, "cols_t").await,
    );
    wait_standby(&group, 3).await;
    wait_digests(&group, 3, &expected).await;
    assert!(
        server_log(&group, 3).contains("received the primary's checkpoint"),
        "the new node loaded the primary's checkpoint"
    );
    // The primary counts it among its standbys.
    wait_for_value(
        &primary,
        "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'",
        3,
    )
    .await;
    let node4 = connect(group.nodes[3].as_ref().unwrap()).await;
    let err = node4
        .batch_execute("INSERT INTO rows_t VALUES (-1, 0)")
        .await
        .expect_err("the new node is a standby");
    assert_eq!(sqlstate(&err), "25006", "{err}");

    // A member gone for good is removed on the primary; the group's majority is then counted
    // without it, so the group takes writes with another member down too (two of four down
    // would have stopped it).
    let standbys: Vec<usize> = (0..4).filter(|&n| n != p).collect();
    let (gone, down, up) = (standbys[0], standbys[1], standbys[2]);
    for (on, id, why) in [
        (&node4, p + 1, "a member is removed on the primary"),
        (&primary, p + 1, "switch over to another member first"),
        (&primary, 9, "node 9 is not a member of the group"),
    ] {
        let err = on
            .query_one(&format!("SELECT shoal_remove_member({id})"), &[])
            .await
            .expect_err("refused");
        assert_eq!(sqlstate(&err), "55000", "{err}");
        let message = err.as_db_error().map_or("", |e| e.message());
        assert!(message.contains(why), "{message}");
    }
    group.kill(gone);
    let removed: bool = primary
        .query_one(&format!("SELECT shoal_remove_member({})", gone + 1), &[])
        .await
        .unwrap()
        .get(0);
    assert!(removed);
    wait_for_value(&primary, "SELECT count(*) FROM pg_stat_replication", 2).await;
    group.kill(down);
    let insert = primary.batch_execute("INSERT INTO rows_t VALUES (-2, 2)");
    tokio::time::timeout(Duration::from_secs(20), insert)
        .await
        .expect("a majority of the three members left takes the write")
        .unwrap();
    let survivor = connect(group.nodes[up].as_ref().unwrap()).await;
    wait_for_value(&survivor, "SELECT count(*) FROM rows_t WHERE id = -2", 1).await;
    let _ = std::fs::remove_file(key_file);
    let _ = std::fs::remove_file(wrong_key);
}

/// A bulk load in one transaction, row and column tables, replicates as it goes: no append to
/// a follower is so big that it misses its time, so the primary stays the primary and the
/// statements succeed. So does one value of 64 MB. A transaction rolled back after logging
/// ahead of its commit leaves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_load_in_one_transaction_keeps_the_primary() {
    let _one_group = ONE_GROUP_AT_A_TIME.lock().await;
    let group = Group::start();
    let (p, primary) = group.settled_primary().await;
    // About 90 MB of row redo in one statement, more than a record of the log holds before it
    // is logged ahead of the commit on a single server.
    primary
        .batch_execute(
            "CREATE TABLE big AS SELECT g::bigint AS v, repeat(md5(g::text), 6) AS pad \
             FROM generate_series(1, 400000) g",
        )
        .await
        .unwrap();
    primary
        .batch_execute(
            "CREATE TABLE big_cols (v bigint, pad text) USING columnar;
             INSERT INTO big_cols SELECT g, repeat(md5(g::text), 6) FROM generate_series(1, 200000) g;",
        )
        .await
        .unwrap();
    // One value of 64 MB: one record of the log, which no cutting makes smaller.
    primary
        .batch_execute("CREATE TABLE blob (b bytea)")
        .await
        .unwrap();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let value: Vec<u8> = (0..8 << 20)
        .flat_map(|_| {
            // xorshift64: bytes that do not compress.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()
        })
        .collect();
    primary
        .execute("INSERT INTO blob VALUES ($1)", &[&value])
        .await
        .unwrap();
    let blob_md5: String = primary
        .query_one("SELECT md5(b) FROM blob", &[])
        .await
        .unwrap()
        .get(0);
    // Rolled back after logging rows and a segment ahead of the commit: the standbys are told
    // to forget them, and drop them.
    primary
        .batch_execute(
            "BEGIN;
             INSERT INTO big SELECT g, 'gone' FROM generate_series(1, 100000) g;
             INSERT INTO big_cols SELECT g, 'gone' FROM generate_series(1, 10000) g;
             ROLLBACK;",
        )
        .await
        .unwrap();
    let row = primary
        .query_one("SELECT pg_is_in_recovery()", &[])
        .await
        .unwrap();
    assert!(!row.get::<_, bool>(0), "node {} stayed the primary", p + 1);
    let expected = vec![
        ("big", table_digest(&primary, "big").await),
        ("big_cols", table_digest(&primary, "big_cols").await),
    ];
    assert_eq!(expected[0].1, "400000/80000200000");
    for n in (0..3).filter(|&n| n != p) {
        wait_digests(&group, n, &expected).await;
        let standby = try_connect(group.nodes[n].as_ref().unwrap()).await.unwrap();
        wait_for_value(&standby, "SELECT count(*) FROM blob", 1).await;
        let md5: String = standby
            .query_one("SELECT md5(b) FROM blob", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(md5, blob_md5, "node {} has the 64 MB value", n + 1);
    }
    let (now, _) = group.primary().await;
    assert_eq!(now, p, "the group elected another primary during the load");
}
