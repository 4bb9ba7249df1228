//! Durability end to end: clients move money between accounts over the wire while the server is
//! killed with SIGKILL at random moments; after every restart each acknowledged transfer is
//! there, nothing is half applied, and the total is unchanged. Also: clean SIGTERM, CHECKPOINT
//! plus log replay, and a damaged log or checkpoint that stops the server with a clear message.

mod support;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::Rng;
use support::{connect, execute_each, ShoalServer};
use tokio_postgres::{Client, NoTls};

const ACCOUNTS: i64 = 20;
const BALANCE_INITIAL: i64 = 1_000;
const CLIENTS: usize = 4;
const KILL_CYCLES: usize = 20;

async fn create_bank(server: &ShoalServer) {
    let c = connect(server).await;
    c.batch_execute(&format!(
        "CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
         CREATE TABLE transfers (id bigint PRIMARY KEY, src int NOT NULL, dst int NOT NULL,
                                 amount bigint NOT NULL);
         INSERT INTO accounts SELECT g, {BALANCE_INITIAL} FROM generate_series(1, {ACCOUNTS}) g;"
    ))
    .await
    .expect("create the bank");
}

/// One transfer as a transaction block; Ok once COMMIT was acknowledged.
async fn transfer(c: &Client, id: i64, src: i64, dst: i64, amount: i64) -> Result<(), String> {
    let sql = format!(
        "BEGIN;
         UPDATE accounts SET balance = balance - {amount} WHERE id = {src};
         UPDATE accounts SET balance = balance + {amount} WHERE id = {dst};
         INSERT INTO transfers VALUES ({id}, {src}, {dst}, {amount});
         COMMIT;"
    );
    c.batch_execute(&sql).await.map_err(|e| e.to_string())
}

/// Acknowledged transfer ids with the time they were acknowledged.
type Acked = Arc<Mutex<Vec<(i64, Instant)>>>;

/// Runs `CLIENTS` clients doing transfers until the server goes away.
fn start_clients(
    server: &ShoalServer,
    next_id: &Arc<AtomicI64>,
    acked: &Acked,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..CLIENTS)
        .map(|_| {
            let conn = format!(
                "host=127.0.0.1 port={} user=postgres dbname=postgres",
                server.port()
            );
            let (next_id, acked) = (next_id.clone(), acked.clone());
            tokio::spawn(async move {
                let Ok((c, connection)) = tokio_postgres::connect(&conn, NoTls).await else {
                    return;
                };
                tokio::spawn(connection);
                loop {
                    let id = next_id.fetch_add(1, Ordering::Relaxed);
                    let (src, dst, amount) = {
                        let mut rng = rand::rng();
                        let src = rng.random_range(1..=ACCOUNTS);
                        let dst = (src % ACCOUNTS) + 1;
                        (src, dst, rng.random_range(1..100))
                    };
                    match transfer(&c, id, src, dst, amount).await {
                        Ok(()) => acked.lock().unwrap().push((id, Instant::now())),
                        // Deadlocks and serialization failures are retried with a new id; a
                        // closed connection means the server was killed.
                        Err(_) if c.is_closed() => return,
                        Err(_) => {
                            let _ = c.batch_execute("ROLLBACK").await;
                        }
                    }
                }
            })
        })
        .collect()
}

/// Checks the bank after a restart: the total is unchanged, every account's balance matches
/// the transfers that are there (so no transfer is half applied), and returns the transfer ids.
async fn check_bank(server: &ShoalServer) -> HashSet<i64> {
    let c = connect(server).await;
    let total: i64 = c
        .query_one("SELECT sum(balance)::bigint FROM accounts", &[])
        .await
        .expect("sum balances")
        .get(0);
    assert_eq!(
        total,
        ACCOUNTS * BALANCE_INITIAL,
        "money appeared or vanished"
    );
    let mut expected = vec![BALANCE_INITIAL; ACCOUNTS as usize + 1];
    let mut ids = HashSet::new();
    for row in c
        .query("SELECT id, src, dst, amount FROM transfers", &[])
        .await
        .expect("read transfers")
    {
        let (id, src, dst, amount): (i64, i32, i32, i64) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        expected[src as usize] -= amount;
        expected[dst as usize] += amount;
        assert!(ids.insert(id), "transfer {id} twice");
    }
    for row in c
        .query("SELECT id, balance FROM accounts ORDER BY id", &[])
        .await
        .expect("read accounts")
    {
        let (id, balance): (i32, i64) = (row.get(0), row.get(1));
        assert_eq!(
            balance, expected[id as usize],
            "account {id} does not match its transfers: a transaction was half applied"
        );
    }
    ids
}

fn restart(dir: PathBuf, args: &[&str]) -> ShoalServer {
    ShoalServer::start_in(dir, args).unwrap_or_else(|e| panic!("restart failed: {e}"))
}

/// Kills the server at random moments under load, `KILL_CYCLES` times. With synchronous_commit
/// on, every acknowledged transfer must survive; with it off, only those acknowledged well
/// before the kill (the log writer flushes every few milliseconds).
async fn kill_cycles(args: &[&str], all_acked_must_survive: bool) {
    let mut server = ShoalServer::start_with(args);
    create_bank(&server).await;
    let next_id = Arc::new(AtomicI64::new(1));
    let mut total_acked = 0;
    for cycle in 0..KILL_CYCLES {
        let acked: Acked = Arc::new(Mutex::new(Vec::new()));
        let clients = start_clients(&server, &next_id, &acked);
        let run_ms = rand::rng().random_range(100..500);
        tokio::time::sleep(Duration::from_millis(run_ms)).await;
        let killed_at = Instant::now();
        let dir = server.crash();
        for c in clients {
            let _ = c.await;
        }
        server = restart(dir, args);
        let present = check_bank(&server).await;
        let acked = acked.lock().unwrap().clone();
        total_acked += acked.len();
        for (id, at) in acked {
            let must_survive =
                all_acked_must_survive || killed_at.duration_since(at) > Duration::from_secs(1);
            assert!(
                !must_survive || present.contains(&id),
                "cycle {cycle}: acknowledged transfer {id} lost after kill -9"
            );
        }
    }
    assert!(
        total_acked > KILL_CYCLES,
        "too few transfers were acknowledged ({total_acked}) for the test to mean anything"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_commits_survive_kill_9() {
    kill_cycles(&[], true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asynchronous_commit_stays_atomic_across_kill_9() {
    kill_cycles(&["--synchronous-commit", "off"], false).await;
}

async fn count(server: &ShoalServer, sql: &str) -> i64 {
    connect(server)
        .await
        .query_one(sql, &[])
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .get(0)
}

/// Data, DDL and sequences survive a checkpoint followed by more log, a clean SIGTERM, and
/// a crash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoint_then_log_replay_restores_everything() {
    let server = ShoalServer::start();
    let c = connect(&server).await;
    c.batch_execute(
        "CREATE SCHEMA s;
         CREATE TABLE s.items (id serial PRIMARY KEY, name text UNIQUE, qty int DEFAULT 0);
         INSERT INTO s.items (name, qty) SELECT 'item' || g, g FROM generate_series(1, 500) g;
         CREATE INDEX items_qty ON s.items (qty);",
    )
    .await
    .expect("build the database");
    // CHECKPOINT among other statements of one query string, as psql -c or a script sends it.
    let messages = c
        .simple_query("SELECT 1; CHECKPOINT; SELECT count(*) FROM s.items")
        .await
        .expect("checkpoint inside a multi-statement query");
    let counts: Vec<Option<u64>> = messages
        .iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::CommandComplete(n) => Some(Some(*n)),
            _ => None,
        })
        .collect();
    assert_eq!(counts.len(), 3, "three statements complete: {messages:?}");
    let last_row = messages.iter().rev().find_map(|m| match m {
        tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
        _ => None,
    });
    assert_eq!(last_row.as_deref(), Some("500"));
    execute_each(
        &c,
        "UPDATE s.items SET qty = qty + 1000 WHERE id <= 100;
         DELETE FROM s.items WHERE id > 400;
         ALTER TABLE s.items ADD COLUMN note text DEFAULT 'n';
         INSERT INTO s.items (name) VALUES ('after-alter');
         CREATE VIEW s.big AS SELECT * FROM s.items WHERE qty >= 1000;",
    )
    .await;
    drop(c);
    let (status, dir) = server.terminate();
    assert!(
        status.success(),
        "SIGTERM should stop the server cleanly: {status}"
    );
    let server = restart(dir, &[]);
    assert_eq!(count(&server, "SELECT count(*) FROM s.items").await, 401);
    assert_eq!(count(&server, "SELECT count(*) FROM s.big").await, 100);
    assert_eq!(
        count(&server, "SELECT count(*) FROM s.items WHERE note = 'n'").await,
        401,
        "the rewritten table keeps its new column"
    );
    let c = connect(&server).await;
    let id: i32 = c
        .query_one(
            "INSERT INTO s.items (name) VALUES ('next') RETURNING id",
            &[],
        )
        .await
        .expect("insert after restart")
        .get(0);
    assert!(id > 501, "the serial sequence went back to {id}");
    let dup = c
        .execute("INSERT INTO s.items (name) VALUES ('item1')", &[])
        .await
        .expect_err("the unique index survives");
    assert_eq!(dup.code().map(|c| c.code()), Some("23505"));
    drop(c);
    let server = restart(server.crash(), &[]);
    assert_eq!(count(&server, "SELECT count(*) FROM s.items").await, 402);
    assert_eq!(
        count(&server, "SELECT count(*) FROM s.items WHERE qty = 1005").await,
        1,
        "an updated row keeps its new value through checkpoint and replay"
    );
}

fn files_under(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_under(&path, extension));
        } else if path.extension().is_some_and(|e| e == extension) {
            found.push(path);
        }
    }
    found.sort();
    found
}

async fn insert_rows(server: &ShoalServer, rows: i64) {
    let c = connect(server).await;
    c.batch_execute("CREATE TABLE t (id int PRIMARY KEY, pad text)")
        .await
        .expect("create t");
    for i in 0..rows {
        c.execute(
            "INSERT INTO t VALUES ($1, repeat('x', 100))",
            &[&(i as i32)],
        )
        .await
        .expect("insert");
    }
}

/// A torn log tail is cut; a byte flipped in the middle of the log stops the server with a
/// message naming the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_log_is_cut_at_a_torn_tail_and_refused_in_the_middle() {
    let server = ShoalServer::start();
    insert_rows(&server, 200).await;
    let dir = server.crash();
    let segment = files_under(&dir.join("wal"), "wal")
        .pop()
        .expect("a log segment");
    // Segments are zero-filled ahead: the records end at the last non-zero byte.
    let written = std::fs::read(&segment).unwrap();
    let len = written.iter().rposition(|&b| b != 0).expect("records") as u64 + 1;
    // Torn tail: garbage where the next batch would have been.
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes.extend_from_slice(&[0xAB; 37]);
    std::fs::write(&segment, &bytes).unwrap();
    let server = restart(dir, &[]);
    assert_eq!(count(&server, "SELECT count(*) FROM t").await, 200);
    let dir = server.crash();
    // Damage in the middle: flip a byte a third of the way in.
    let mut bytes = std::fs::read(&segment).unwrap();
    let at = (len / 3) as usize;
    bytes[at] ^= 0x40;
    std::fs::write(&segment, &bytes).unwrap();
    let err = match ShoalServer::start_in(dir.clone(), &[]) {
        Ok(_) => panic!("the server started on a damaged log"),
        Err(e) => e,
    };
    let name = segment.file_name().unwrap().to_string_lossy().to_string();
    assert!(err.contains(&name), "the error should name {name}: {err}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A truncated checkpoint file stops the server with a message naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_checkpoint_file_is_refused() {
    let server = ShoalServer::start();
    insert_rows(&server, 50).await;
    connect(&server)
        .await
        .batch_execute("CHECKPOINT")
        .await
        .expect("checkpoint");
    let dir = server.crash();
    let part = files_under(&dir.join("checkpoints"), "dat")
        .into_iter()
        .find(|p| std::fs::metadata(p).map(|m| m.len() > 64).unwrap_or(false))
        .expect("a checkpoint table file");
    let len = std::fs::metadata(&part).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&part)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let err = match ShoalServer::start_in(dir.clone(), &[]) {
        Ok(_) => panic!("the server started on a truncated checkpoint"),
        Err(e) => e,
    };
    let name = part.file_name().unwrap().to_string_lossy().to_string();
    assert!(err.contains(&name), "the error should name {name}: {err}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A second server on a data directory in use is refused, says which process holds it, and
/// leaves the first server and its data alone; once the first stops (cleanly or by a crash,
/// which leaves no stale lock) the directory opens again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_server_on_a_data_directory_in_use_is_refused() {
    let server = ShoalServer::start();
    insert_rows(&server, 30).await;
    let (status, output) = support::serve_until_exit(server.data_dir());
    assert_eq!(status.code(), Some(1), "{output}");
    assert!(
        output.contains("is in use by another Shoal server")
            && output.contains(&format!("PID {}", server.pid())),
        "the refusal should name the holder: {output}"
    );
    assert_eq!(count(&server, "SELECT count(*) FROM t").await, 30);
    connect(&server)
        .await
        .batch_execute("INSERT INTO t SELECT g, 'y' FROM generate_series(30, 39) g")
        .await
        .expect("insert after the refusal");
    let dir = server.crash();
    let server = restart(dir, &[]);
    assert_eq!(count(&server, "SELECT count(*) FROM t").await, 40);
    let (status, dir) = server.terminate();
    assert!(status.success(), "{status}");
    let server = restart(dir, &[]);
    assert_eq!(count(&server, "SELECT count(*) FROM t").await, 40);
}

/// Column tables: segments and deletes survive a checkpoint, the log after it, and a crash;
/// a rolled-back load leaves nothing behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn column_tables_survive_checkpoint_replay_and_kill_9() {
    let server = ShoalServer::start();
    let c = connect(&server).await;
    c.batch_execute(
        "CREATE TABLE trips (id bigint, cab text, fare double precision) USING columnar;
         INSERT INTO trips SELECT g, CASE WHEN g % 4 = 0 THEN 'green' ELSE 'yellow' END, g
           FROM generate_series(1, 100000) g;
         DELETE FROM trips WHERE id % 10 = 0;",
    )
    .await
    .expect("load the column table");
    c.batch_execute("CHECKPOINT").await.expect("checkpoint");
    c.batch_execute(
        "INSERT INTO trips SELECT g, 'uber', g FROM generate_series(100001, 100500) g;
         UPDATE trips SET fare = -fare WHERE id % 1000 = 1;
         DELETE FROM trips WHERE id BETWEEN 50000 AND 50999;",
    )
    .await
    .expect("change it after the checkpoint");
    c.batch_execute("BEGIN; INSERT INTO trips VALUES (0, 'lost', 0); ROLLBACK;")
        .await
        .expect("a rolled-back insert");
    let sums = "SELECT count(*)::bigint * 1000000000 + sum(fare)::bigint FROM trips";
    let before = count(&server, sums).await;
    drop(c);
    let server = restart(server.crash(), &[]);
    assert_eq!(
        count(&server, sums).await,
        before,
        "same rows after kill -9"
    );
    assert_eq!(
        count(&server, "SELECT count(*) FROM trips WHERE cab = 'lost'").await,
        0,
        "a rolled-back insert stays gone"
    );
    assert_eq!(
        count(&server, "SELECT count(*) FROM trips WHERE fare < 0").await,
        100,
        "updated rows keep their new values"
    );
    // A second checkpoint over the recovered table, then a clean restart.
    connect(&server)
        .await
        .batch_execute("CHECKPOINT")
        .await
        .expect("checkpoint after recovery");
    let (status, dir) = server.terminate();
    assert!(status.success());
    let server = restart(dir, &[]);
    assert_eq!(count(&server, sums).await, before);
}

/// A COPY into a column table logs its segments ahead of the commit. A checkpoint taken while
/// such a COPY is still open must keep the log it needs: after kill -9, the committed COPY is
/// back whole and the one that never committed is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn column_copy_logged_ahead_survives_a_checkpoint_in_between() {
    use futures::SinkExt;
    let server = ShoalServer::start();
    let loader = connect(&server).await;
    let other = connect(&server).await;
    loader
        .batch_execute("CREATE TABLE bulk (id bigint, tag text) USING columnar")
        .await
        .expect("create");
    // 200,000 rows: three full segments and a partial one.
    let copy = |from: i64, to: i64, tag: &'static str| {
        let mut data = Vec::new();
        for i in from..to {
            data.extend_from_slice(format!("{i}\t{tag}\n").as_bytes());
        }
        std::io::Cursor::new(data)
    };
    loader.batch_execute("BEGIN").await.expect("begin");
    {
        let mut sink = std::pin::pin!(loader
            .copy_in::<_, std::io::Cursor<Vec<u8>>>("COPY bulk FROM STDIN")
            .await
            .expect("copy"));
        sink.send(copy(0, 200_000, "kept")).await.expect("send");
        sink.as_mut().finish().await.expect("copy done");
    }
    other.batch_execute("CHECKPOINT").await.expect("checkpoint");
    loader.batch_execute("COMMIT").await.expect("commit");
    // A second COPY stays open when the server dies.
    let open = connect(&server).await;
    open.batch_execute("BEGIN").await.expect("begin");
    {
        let mut sink = std::pin::pin!(open
            .copy_in::<_, std::io::Cursor<Vec<u8>>>("COPY bulk FROM STDIN")
            .await
            .expect("copy"));
        sink.send(copy(0, 100_000, "open")).await.expect("send");
        sink.as_mut().finish().await.expect("copy done");
    }
    drop((loader, other));
    let server = restart(server.crash(), &[]);
    assert_eq!(
        count(&server, "SELECT count(*) FROM bulk WHERE tag = 'kept'").await,
        200_000
    );
    assert_eq!(
        count(&server, "SELECT sum(id)::bigint FROM bulk").await,
        200_000 * 199_999 / 2
    );
    assert_eq!(
        count(&server, "SELECT count(*) FROM bulk WHERE tag = 'open'").await,
        0,
        "an uncommitted COPY leaves nothing"
    );
    drop(open);
}

/// ALTER TABLE ... SET ACCESS METHOD logs the table's new image before the catalog change:
/// after kill -9 the table is back in its new storage with all its rows, whether the log or a
/// checkpoint holds the conversion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_method_changes_survive_kill_9() {
    let server = ShoalServer::start();
    let c = connect(&server).await;
    execute_each(
        &c,
        "CREATE TABLE conv (id bigint, cab text, fare double precision);
         INSERT INTO conv SELECT g, 'c' || (g % 3), g FROM generate_series(1, 70000) g;
         ALTER TABLE conv SET ACCESS METHOD columnar;
         INSERT INTO conv VALUES (0, 'after', 1);
         CREATE TABLE back (id bigint, note text) USING columnar;
         INSERT INTO back SELECT g, 'n' FROM generate_series(1, 1000) g;
         ALTER TABLE back SET ACCESS METHOD heap;
         DELETE FROM back WHERE id > 500;",
    )
    .await;
    let sums = "SELECT (SELECT count(*) * 1000000 + sum(fare)::bigint FROM conv) \
                + (SELECT count(*) * 1000 + sum(id)::bigint FROM back)";
    let methods = "SELECT count(*) FROM pg_class c JOIN pg_am a ON a.oid = c.relam \
                   WHERE (c.relname, a.amname) IN (('conv', 'columnar'), ('back', 'heap'))";
    let before = count(&server, sums).await;
    drop(c);
    let server = restart(server.crash(), &[]);
    assert_eq!(
        count(&server, sums).await,
        before,
        "rows after replaying the log"
    );
    assert_eq!(
        count(&server, methods).await,
        2,
        "both tables in their new storage"
    );
    connect(&server)
        .await
        .batch_execute("CHECKPOINT")
        .await
        .expect("checkpoint");
    let server = restart(server.crash(), &[]);
    assert_eq!(
        count(&server, sums).await,
        before,
        "rows after loading the checkpoint"
    );
    assert_eq!(count(&server, methods).await, 2);
}

/// ALTER COLUMN TYPE rewrites the table and logs its image before the catalog change, and a
/// partial unique index comes back with its WHERE clause: after kill -9 (log replay, then a
/// checkpoint) the converted rows are there and the index still constrains only its rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn column_type_changes_and_partial_indexes_survive_kill_9() {
    let server = ShoalServer::start();
    let c = connect(&server).await;
    execute_each(
        &c,
        "CREATE TABLE retyped (id integer PRIMARY KEY, code text, live boolean);
         INSERT INTO retyped SELECT g, (g * 10)::text, g % 2 = 0 FROM generate_series(1, 5000) g;
         CREATE UNIQUE INDEX retyped_live_code ON retyped (code) WHERE live;
         ALTER TABLE retyped ALTER COLUMN code TYPE bigint USING code::bigint;
         INSERT INTO retyped VALUES (5001, 10, false);",
    )
    .await;
    let sums = "SELECT (count(*) * 1000000000 + sum(code + id))::bigint FROM retyped";
    let before = count(&server, sums).await;
    drop(c);
    let mut server = restart(server.crash(), &[]);
    for place in ["the log", "the checkpoint"] {
        assert_eq!(count(&server, sums).await, before, "rows from {place}");
        let c = connect(&server).await;
        let dup = c
            .batch_execute("INSERT INTO retyped VALUES (6000, 20, true)")
            .await
            .expect_err("a live duplicate violates the partial index");
        assert_eq!(dup.code().map(|s| s.code()), Some("23505"), "{dup:?}");
        c.batch_execute(
            "INSERT INTO retyped VALUES (6001, 20, false); DELETE FROM retyped WHERE id = 6001",
        )
        .await
        .expect("rows outside the index do not conflict");
        assert_eq!(
            count(&server, "SELECT count(*) FROM retyped WHERE code = 20").await,
            1,
            "code converted to bigint in {place}"
        );
        c.batch_execute("CHECKPOINT").await.expect("checkpoint");
        drop(c);
        server = restart(server.crash(), &[]);
    }
}

/// ALTER COLUMN TYPE and DROP COLUMN inside blocks that roll back: the old table comes back
/// and is logged again, so after kill -9 the rows have their old columns and values, not the
/// rebuilt ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_column_type_change_stays_undone_after_kill_9() {
    let server = ShoalServer::start();
    let c = connect(&server).await;
    execute_each(
        &c,
        "CREATE TABLE unretyped (id integer PRIMARY KEY, code integer);
         INSERT INTO unretyped SELECT g, g * 10 FROM generate_series(1, 1000) g;
         BEGIN;
         ALTER TABLE unretyped ALTER COLUMN code TYPE text USING (code * 2)::text;
         ROLLBACK;
         BEGIN;
         ALTER TABLE unretyped DROP COLUMN code;
         ROLLBACK;
         INSERT INTO unretyped VALUES (1001, 7);",
    )
    .await;
    let sums = "SELECT (count(*) * 1000000000 + sum(code + id))::bigint FROM unretyped";
    let before = count(&server, sums).await;
    assert_eq!(before, 1001 * 1_000_000_000 + 11 * 500_500 + 1001 + 7);
    drop(c);
    let server = restart(server.crash(), &[]);
    assert_eq!(count(&server, sums).await, before, "rows from the log");
}

/// A full disk (the data directory on a small tmpfs): commits fail with 53100 and change
/// nothing, reads go on, and writes work again once space returns. Needs root to mount the
/// tmpfs; skipped with a note otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_fails_commits_with_53100_until_space_returns() {
    let mount_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("shoal-enospc-{}", std::process::id()));
    std::fs::create_dir_all(&mount_dir).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"])
        .arg(&mount_dir)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipping the full-disk test: cannot mount a tmpfs (needs root)");
        return;
    }
    let result = tokio::spawn(full_disk_scenario(mount_dir.clone())).await;
    let _ = std::process::Command::new("umount")
        .arg(&mount_dir)
        .status();
    let _ = std::fs::remove_dir(&mount_dir);
    if let Err(e) = result {
        std::panic::resume_unwind(e.into_panic());
    }
}

async fn full_disk_scenario(mount_dir: PathBuf) {
    let filler = mount_dir.join("filler");
    std::fs::write(&filler, vec![0u8; 2 << 20]).unwrap();
    let server = ShoalServer::start_in(mount_dir.join("data"), &[]).expect("start on the tmpfs");
    let c = connect(&server).await;
    c.batch_execute("CREATE TABLE f (id int PRIMARY KEY, pad text)")
        .await
        .unwrap();
    let mut acknowledged = 0i64;
    let error = loop {
        let insert = format!("INSERT INTO f VALUES ({acknowledged}, repeat('x', 20000))");
        match c.batch_execute(&insert).await {
            Ok(()) => acknowledged += 1,
            Err(e) => break e,
        }
        assert!(acknowledged < 1000, "a 4 MiB tmpfs must fill up");
    };
    assert_eq!(
        error.code().map(|c| c.code()),
        Some("53100"),
        "a full disk fails the commit with 53100: {error:?}"
    );
    assert!(acknowledged > 0);
    // Reads go on and see exactly the acknowledged rows.
    assert_eq!(count(&server, "SELECT count(*) FROM f").await, acknowledged);
    // Space returns: writes work again.
    std::fs::remove_file(&filler).unwrap();
    c.batch_execute(&format!("INSERT INTO f VALUES ({acknowledged}, 'after')"))
        .await
        .expect("a commit after space came back");
    assert_eq!(
        count(&server, "SELECT count(*) FROM f").await,
        acknowledged + 1
    );
}

/// A failed fdatasync of the redo log (injected after a few batches with a hidden test flag):
/// the commit fails with 58030 and says writes stopped, every later write fails the same way,
/// reads go on, and after a restart every acknowledged commit is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_log_sync_stops_writes_and_keeps_what_was_acknowledged() {
    let dir = std::env::temp_dir().join(format!("shoal-fsync-fail-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let server =
        ShoalServer::start_in(dir, &["--fail-log-sync-after", "40"]).expect("start the server");
    let c = connect(&server).await;
    c.batch_execute("CREATE TABLE s (id int PRIMARY KEY)")
        .await
        .unwrap();
    let mut acknowledged = Vec::new();
    let error = loop {
        let id = acknowledged.len() as i32;
        match c.execute("INSERT INTO s VALUES ($1)", &[&id]).await {
            Ok(_) => acknowledged.push(id),
            Err(e) => break e,
        }
        assert!(acknowledged.len() < 100, "the sync failure was injected");
    };
    assert_eq!(error.code().map(|c| c.code()), Some("58030"), "{error:?}");
    let message = error.as_db_error().map(|e| e.message().to_string());
    assert!(
        message.as_deref().is_some_and(|m| m.contains("fsync")),
        "the error says the log sync failed: {message:?}"
    );
    assert!(!acknowledged.is_empty());
    // The log can no longer be trusted: no write is acknowledged from now on.
    for sql in [
        "INSERT INTO s VALUES (1000)",
        "CREATE TABLE t2 (x int)",
        "DELETE FROM s",
    ] {
        let e = c.batch_execute(sql).await.expect_err(sql);
        assert_eq!(e.code().map(|c| c.code()), Some("58030"), "{sql}: {e:?}");
    }
    // Reads go on.
    let seen = count(&server, "SELECT count(*) FROM s").await;
    assert!(seen >= acknowledged.len() as i64, "{seen} rows visible");
    let dir = server.crash();
    let server = restart(dir, &[]);
    let c = connect(&server).await;
    let rows = c.query("SELECT id FROM s ORDER BY id", &[]).await.unwrap();
    let ids: HashSet<i32> = rows.iter().map(|r| r.get(0)).collect();
    for id in &acknowledged {
        assert!(ids.contains(id), "acknowledged row {id} lost");
    }
    assert!(
        !ids.contains(&1000),
        "a write after the failure was not acknowledged"
    );
}

/// Early lock release, with the log writer holding each flush for 1.5 s (a hidden test flag):
/// a commit is visible and frees its rows as soon as its record is logged, so another writer
/// updates the same row before the first commit is acknowledged; but a synchronous read-only
/// statement that may have seen it does not answer before the flush.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_frees_its_rows_once_logged_and_is_acknowledged_once_durable() {
    let dir = std::env::temp_dir().join(format!("shoal-early-release-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let server = ShoalServer::start_in(dir.clone(), &["--hold-log-sync-ms", "1500"])
        .expect("start the server");
    let a = connect(&server).await;
    a.batch_execute(
        "CREATE TABLE acct (id int PRIMARY KEY, balance int NOT NULL);
         INSERT INTO acct VALUES (1, 0)",
    )
    .await
    .unwrap();
    let first_commit = tokio::spawn(async move {
        a.batch_execute("UPDATE acct SET balance = balance + 1 WHERE id = 1")
            .await
    });
    // A session with synchronous_commit off does not wait for flushes: it sees the commit as
    // soon as it is visible.
    let b = connect(&server).await;
    b.batch_execute("SET synchronous_commit = off")
        .await
        .unwrap();
    let balance = |rows: Vec<tokio_postgres::Row>| rows[0].get::<_, i32>(0);
    while balance(
        b.query("SELECT balance FROM acct WHERE id = 1", &[])
            .await
            .unwrap(),
    ) != 1
    {
        assert!(
            !first_commit.is_finished(),
            "acknowledged before it was seen"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert!(
        !first_commit.is_finished(),
        "the commit is visible before its flush is done"
    );
    // Its row lock is gone too: another writer updates the row without waiting for the flush.
    b.batch_execute("BEGIN; UPDATE acct SET balance = balance + 10 WHERE id = 1")
        .await
        .unwrap();
    assert!(
        !first_commit.is_finished(),
        "the second writer did not wait for the first one's flush"
    );
    b.batch_execute("COMMIT").await.unwrap();
    // A synchronous read-only statement waits for the flush of what it may have seen.
    let reader = connect(&server).await;
    let read = tokio::spawn(async move {
        balance(
            reader
                .query("SELECT balance FROM acct WHERE id = 1", &[])
                .await
                .unwrap(),
        )
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !read.is_finished(),
        "a synchronous reader answered before the commit it saw was durable"
    );
    assert_eq!(read.await.unwrap(), 11);
    first_commit.await.unwrap().expect("the first commit");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
