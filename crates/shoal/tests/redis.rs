//! The Redis protocol end to end: concurrent writers, WATCH across clients, SQL and Redis on
//! the same rows, and what survives a crash. Replies and error texts are compared with a real
//! Redis in tests/redis/differential.py; these tests check what one Redis alone cannot show.

mod support;

use std::time::{Duration, Instant};

use support::group::{Group, ONE_GROUP_AT_A_TIME};
use support::resp::{bulk, Redis, Reply};
use support::{free_port, ShoalServer};

fn start(args: &[&str]) -> (ShoalServer, u16) {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut all = vec!["--redis-listen", &listen];
    all.extend_from_slice(args);
    (ShoalServer::start_with(&all), port)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_incrs_lose_nothing_and_sql_sees_the_counter() {
    const CLIENTS: usize = 8;
    const INCRS: usize = 200;
    let (server, port) = start(&[]);
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        tasks.push(tokio::spawn(async move {
            let mut r = Redis::connect(port).await;
            for _ in 0..INCRS {
                match r.call(&["INCR", "counter"]).await {
                    Reply::Int(_) => {}
                    other => panic!("INCR answered {other:?}"),
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut r = Redis::connect(port).await;
    let total = (CLIENTS * INCRS).to_string();
    assert_eq!(r.call(&["GET", "counter"]).await, bulk(&total));
    let sql = support::connect(&server).await;
    let row = sql
        .query_one(
            "SELECT convert_from(value, 'UTF8'), type FROM redis.keys WHERE db = 0 AND key = 'counter'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), total);
    assert_eq!(row.get::<_, String>(1), "string");
}

/// Pipelines run in shared transactions (`commands::Batch`). Clients that write the same keys
/// in opposite orders would wait for each other's batch if a batch waited while holding locks;
/// every command must still succeed exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelines_writing_keys_in_opposite_orders_neither_deadlock_nor_lose_writes() {
    const CLIENTS: usize = 4;
    const PIPELINES: usize = 20;
    const ROUNDS: usize = 50;
    let (server, port) = start(&[]);
    let mut tasks = Vec::new();
    for client in 0..CLIENTS {
        tasks.push(tokio::spawn(async move {
            let mut r = Redis::connect(port).await;
            let mut round: Vec<Vec<String>> = [
                &["INCR", "a"][..],
                &["HINCRBY", "h", "f", "1"],
                &["RPUSH", "l", "x"],
                &["SADD", "s", &format!("m{client}")],
                &["INCR", "b"],
            ]
            .iter()
            .map(|c| c.iter().map(|s| s.to_string()).collect())
            .collect();
            if client % 2 == 1 {
                round.reverse();
            }
            let mut incr_a = Vec::new();
            for _ in 0..PIPELINES {
                let commands: Vec<Vec<String>> = (0..ROUNDS).flat_map(|_| round.clone()).collect();
                for (command, reply) in commands.iter().zip(r.pipeline(&commands).await) {
                    let Reply::Int(n) = reply else {
                        panic!("{command:?}: {reply:?}");
                    };
                    if command[..] == ["INCR", "a"] {
                        incr_a.push(n);
                    }
                }
            }
            incr_a
        }));
    }
    // Each INCR of `a` counted once: its replies are 1, 2, ... with none twice or missing.
    let mut incr_a = Vec::new();
    for t in tasks {
        incr_a.extend(t.await.unwrap());
    }
    incr_a.sort();
    let expected: Vec<i64> = (1..=(CLIENTS * PIPELINES * ROUNDS) as i64).collect();
    assert_eq!(incr_a, expected);
    let total = (CLIENTS * PIPELINES * ROUNDS).to_string();
    let mut r = Redis::connect(port).await;
    assert_eq!(r.call(&["GET", "a"]).await, bulk(&total));
    assert_eq!(r.call(&["GET", "b"]).await, bulk(&total));
    assert_eq!(r.call(&["HGET", "h", "f"]).await, bulk(&total));
    assert_eq!(
        r.call(&["LLEN", "l"]).await,
        Reply::Int(total.parse().unwrap())
    );
    assert_eq!(r.call(&["SCARD", "s"]).await, Reply::Int(CLIENTS as i64));
    drop(server);
}

/// LPUSH and RPUSH on one list from many clients at once: each reply is the list's length
/// right after that push, so the replies are 1, 2, ... with none twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushes_at_both_ends_report_every_length_once() {
    const CLIENTS: usize = 6;
    const PUSHES: usize = 150;
    let (server, port) = start(&[]);
    let mut tasks = Vec::new();
    for client in 0..CLIENTS {
        tasks.push(tokio::spawn(async move {
            let mut r = Redis::connect(port).await;
            let push = if client % 2 == 0 { "LPUSH" } else { "RPUSH" };
            let mut lengths = Vec::new();
            for i in 0..PUSHES {
                match r.call(&[push, "both-ends", &format!("{client}:{i}")]).await {
                    Reply::Int(n) => lengths.push(n),
                    other => panic!("{push}: {other:?}"),
                }
            }
            lengths
        }));
    }
    let mut lengths = Vec::new();
    for t in tasks {
        lengths.extend(t.await.unwrap());
    }
    lengths.sort();
    let expected: Vec<i64> = (1..=(CLIENTS * PUSHES) as i64).collect();
    assert_eq!(lengths, expected);
    drop(server);
}

/// SCAN's guarantee: a full iteration returns every key that exists from its start to its
/// end, even while other keys are deleted and added before and after the cursor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_returns_every_key_that_stays_while_others_come_and_go() {
    const KEPT: usize = 600;
    const DOOMED: usize = 400;
    let (server, port) = start(&[]);
    let mut r = Redis::connect(port).await;
    let mut setup = Vec::new();
    // Doomed keys come first, in key order and in the order they are stored, and among the
    // kept ones: deleting them moves every kept key's position.
    for i in 0..DOOMED {
        setup.push(vec![
            "SET".to_string(),
            format!("doomed:{i:04}"),
            "v".into(),
        ]);
        setup.push(vec![
            "SET".to_string(),
            format!("kept:{i:04}:doomed"),
            "v".into(),
        ]);
    }
    for i in 0..KEPT {
        setup.push(vec!["SET".to_string(), format!("kept:{i:04}"), "v".into()]);
    }
    for reply in r.pipeline(&setup).await {
        assert_eq!(reply, Reply::Status("OK".into()));
    }
    let mut seen = std::collections::HashSet::new();
    let (mut cursor, mut calls, mut doomed) = ("0".to_string(), 0, 0usize);
    loop {
        let Reply::Array(page) = r.call(&["SCAN", &cursor, "COUNT", "25"]).await else {
            panic!("SCAN's reply is an array");
        };
        let [Reply::Bulk(next), Reply::Array(keys)] = &page[..] else {
            panic!("SCAN's reply: {page:?}");
        };
        for k in keys {
            let Reply::Bulk(k) = k else { panic!("{k:?}") };
            seen.insert(String::from_utf8(k.clone()).unwrap());
        }
        cursor = String::from_utf8(next.clone()).unwrap();
        calls += 1;
        if cursor == "0" {
            break;
        }
        assert!(calls < 1000, "SCAN does not end");
        // Between calls: delete ten doomed keys of each kind, add ten new ones.
        let mut churn = Vec::new();
        for _ in 0..10 {
            if doomed < DOOMED {
                churn.push(vec!["DEL".to_string(), format!("doomed:{doomed:04}")]);
                churn.push(vec!["DEL".to_string(), format!("kept:{doomed:04}:doomed")]);
                doomed += 1;
            }
            churn.push(vec![
                "SET".to_string(),
                format!("new:{calls}:{doomed}"),
                "v".into(),
            ]);
        }
        r.pipeline(&churn).await;
    }
    for i in 0..KEPT {
        assert!(
            seen.contains(&format!("kept:{i:04}")),
            "kept:{i:04} was not returned"
        );
    }
    // A cursor the server does not know (from before a restart) starts over.
    let Reply::Array(page) = r.call(&["SCAN", "12345", "COUNT", "5"]).await else {
        panic!("SCAN's reply is an array");
    };
    assert!(
        matches!(&page[1], Reply::Array(keys) if keys.len() == 5),
        "{page:?}"
    );
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_aborts_exec_when_another_client_writes_the_key() {
    let (_server, port) = start(&[]);
    let (mut a, mut b) = (Redis::connect(port).await, Redis::connect(port).await);
    assert_eq!(
        a.call(&["SET", "balance", "10"]).await,
        Reply::Status("OK".into())
    );
    assert_eq!(
        a.call(&["WATCH", "balance"]).await,
        Reply::Status("OK".into())
    );
    assert_eq!(b.call(&["INCRBY", "balance", "5"]).await, Reply::Int(15));
    assert_eq!(a.call(&["MULTI"]).await, Reply::Status("OK".into()));
    assert_eq!(
        a.call(&["SET", "balance", "0"]).await,
        Reply::Status("QUEUED".into())
    );
    assert_eq!(a.call(&["EXEC"]).await, Reply::Nil);
    assert_eq!(a.call(&["GET", "balance"]).await, bulk("15"));
    // Unchanged since WATCH: EXEC runs.
    assert_eq!(
        a.call(&["WATCH", "balance"]).await,
        Reply::Status("OK".into())
    );
    assert_eq!(a.call(&["MULTI"]).await, Reply::Status("OK".into()));
    assert_eq!(
        a.call(&["DECRBY", "balance", "15"]).await,
        Reply::Status("QUEUED".into())
    );
    assert_eq!(a.call(&["EXEC"]).await, Reply::Array(vec![Reply::Int(0)]));
    // A write from SQL changes a WATCHed key too.
    assert_eq!(
        a.call(&["WATCH", "balance"]).await,
        Reply::Status("OK".into())
    );
    let sql = support::connect(&_server).await;
    sql.execute(
        "UPDATE redis.keys SET value = '99' WHERE db = 0 AND key = 'balance'",
        &[],
    )
    .await
    .unwrap();
    assert_eq!(a.call(&["MULTI"]).await, Reply::Status("OK".into()));
    assert_eq!(
        a.call(&["SET", "balance", "1"]).await,
        Reply::Status("QUEUED".into())
    );
    assert_eq!(a.call(&["EXEC"]).await, Reply::Nil);
    assert_eq!(b.call(&["GET", "balance"]).await, bulk("99"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_and_redis_share_the_keys_and_they_survive_a_crash() {
    let (server, port) = start(&["--redis-appendfsync", "always"]);
    let mut r = Redis::connect(port).await;
    assert_eq!(
        r.call(&["SET", "user:1", "ann"]).await,
        Reply::Status("OK".into())
    );
    assert_eq!(
        r.call(&["SET", "session", "s1", "EX", "1000"]).await,
        Reply::Status("OK".into())
    );
    assert_eq!(r.call(&["SELECT", "5"]).await, Reply::Status("OK".into()));
    assert_eq!(
        r.call(&["SET", "user:1", "other db"]).await,
        Reply::Status("OK".into())
    );
    let sql = support::connect(&server).await;
    sql.batch_execute(
        "CREATE TABLE users (id int PRIMARY KEY, name text);
         INSERT INTO users VALUES (1, 'ann'), (2, 'bob');
         INSERT INTO redis.keys VALUES (0, 'user:2', 'string', 'bob', NULL);
         UPDATE redis.keys SET value = 'ANN' WHERE db = 0 AND key = 'user:1';",
    )
    .await
    .unwrap();
    // Redis keys joined with a table.
    let joined: Vec<(i32, String)> = sql
        .query(
            "SELECT u.id, convert_from(k.value, 'UTF8') FROM users u JOIN redis.keys k
               ON k.db = 0 AND k.key = convert_to('user:' || u.id, 'UTF8') ORDER BY u.id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    assert_eq!(joined, vec![(1, "ANN".to_string()), (2, "bob".to_string())]);
    // A row the Redis side could not read is refused.
    let bad = sql
        .execute(
            "INSERT INTO redis.keys VALUES (0, 'x', 'string', NULL, NULL)",
            &[],
        )
        .await
        .unwrap_err();
    assert_eq!(bad.code().map(|c| c.code()), Some("23514"));
    drop(sql);
    let dir = server.crash();
    let listen = format!("127.0.0.1:{port}");
    let restarted = ShoalServer::start_in(dir, &["--redis-listen", &listen]).unwrap();
    let mut r = Redis::connect(port).await;
    assert_eq!(
        r.call(&["MGET", "user:1", "user:2", "session"]).await,
        Reply::Array(vec![bulk("ANN"), bulk("bob"), bulk("s1")])
    );
    match r.call(&["TTL", "session"]).await {
        Reply::Int(ttl) => assert!((990..=1000).contains(&ttl), "TTL {ttl}"),
        other => panic!("TTL answered {other:?}"),
    }
    assert_eq!(r.call(&["SELECT", "5"]).await, Reply::Status("OK".into()));
    assert_eq!(r.call(&["GET", "user:1"]).await, bulk("other db"));
    drop(restarted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_keys_are_never_read_and_their_rows_go() {
    let (server, port) = start(&[]);
    let mut r = Redis::connect(port).await;
    assert_eq!(
        r.call(&["SET", "short", "v", "PX", "200"]).await,
        Reply::Status("OK".into())
    );
    assert_eq!(
        r.call(&["SET", "long", "v", "EX", "100"]).await,
        Reply::Status("OK".into())
    );
    assert_eq!(
        r.call(&["RPUSH", "short-list", "a", "b"]).await,
        Reply::Int(2)
    );
    assert_eq!(
        r.call(&["PEXPIRE", "short-list", "200"]).await,
        Reply::Int(1)
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(r.call(&["GET", "short"]).await, Reply::Nil);
    assert_eq!(r.call(&["LLEN", "short-list"]).await, Reply::Int(0));
    assert_eq!(r.call(&["EXISTS", "short", "long"]).await, Reply::Int(1));
    // The expiry cycle deletes the expired row without any command touching the key.
    let sql = support::connect(&server).await;
    let mut left = i64::MAX;
    for _ in 0..100 {
        left = sql
            .query_one(
                "SELECT (SELECT count(*) FROM redis.keys WHERE key IN ('short', 'short-list'))
                      + (SELECT count(*) FROM redis.lists)",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if left == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        left, 0,
        "the expired keys' rows (or the list's elements) are still there"
    );
    let kept: i64 = sql
        .query_one("SELECT count(*) FROM redis.keys WHERE key = 'long'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(kept, 1);
}

/// Pushes and pops of one list from many clients at once: every element pushed is popped
/// exactly once, and the list's key goes with its last element.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_pushes_and_pops_keep_every_element_once() {
    const CLIENTS: usize = 6;
    const PUSHES: usize = 50;
    let (_server, port) = start(&[]);
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        tasks.push(tokio::spawn(async move {
            let mut r = Redis::connect(port).await;
            for i in 0..PUSHES {
                let side = if i % 2 == 0 { "LPUSH" } else { "RPUSH" };
                match r.call(&[side, "queue", &format!("{c}:{i}")]).await {
                    Reply::Int(n) => assert!(n >= 1),
                    other => panic!("{side} answered {other:?}"),
                }
                // Members of a set and fields of a hash from every client, too.
                r.call(&["SADD", "seen", &format!("{c}:{i}")]).await;
                r.call(&["HINCRBY", "per-client", &c.to_string(), "1"])
                    .await;
            }
        }));
    }
    for t in tasks.drain(..) {
        t.await.unwrap();
    }
    let mut r = Redis::connect(port).await;
    let total = (CLIENTS * PUSHES) as i64;
    assert_eq!(r.call(&["LLEN", "queue"]).await, Reply::Int(total));
    assert_eq!(r.call(&["SCARD", "seen"]).await, Reply::Int(total));
    for c in 0..CLIENTS {
        assert_eq!(
            r.call(&["HGET", "per-client", &c.to_string()]).await,
            bulk(&PUSHES.to_string())
        );
    }
    let mut poppers = Vec::new();
    for c in 0..CLIENTS {
        poppers.push(tokio::spawn(async move {
            let mut r = Redis::connect(port).await;
            let mut popped = Vec::new();
            loop {
                let pop = if c % 2 == 0 { "LPOP" } else { "RPOP" };
                match r.call(&[pop, "queue"]).await {
                    Reply::Bulk(v) => popped.push(String::from_utf8(v).unwrap()),
                    Reply::Nil => return popped,
                    other => panic!("{pop} answered {other:?}"),
                }
            }
        }));
    }
    let mut all = Vec::new();
    for t in poppers {
        all.extend(t.await.unwrap());
    }
    all.sort();
    let mut expected: Vec<String> = (0..CLIENTS)
        .flat_map(|c| (0..PUSHES).map(move |i| format!("{c}:{i}")))
        .collect();
    expected.sort();
    assert_eq!(all, expected);
    assert_eq!(r.call(&["EXISTS", "queue"]).await, Reply::Int(0));
}

/// Hashes, lists, sets and sorted sets are rows SQL reads and writes: a write from either side
/// is what the other reads, and deleting a key from SQL deletes its members.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_sees_and_changes_collections() {
    let (server, port) = start(&[]);
    let mut r = Redis::connect(port).await;
    r.call(&["HSET", "user:1", "name", "ann", "city", "oslo"])
        .await;
    r.call(&["RPUSH", "jobs", "a", "b", "c"]).await;
    r.call(&["SADD", "tags", "x", "y"]).await;
    r.call(&["ZADD", "board", "10", "ann", "20", "bob"]).await;
    let sql = support::connect(&server).await;
    let fields: Vec<(String, String)> = sql
        .query(
            "SELECT convert_from(field, 'UTF8'), convert_from(value, 'UTF8') FROM redis.hashes
              WHERE db = 0 AND key = 'user:1' ORDER BY field",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    assert_eq!(
        fields,
        vec![
            ("city".into(), "oslo".into()),
            ("name".into(), "ann".into())
        ]
    );
    let jobs: Vec<String> = sql
        .query(
            "SELECT convert_from(value, 'UTF8') FROM redis.lists WHERE key = 'jobs'
              ORDER BY position",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(jobs, vec!["a", "b", "c"]);
    sql.batch_execute(
        "UPDATE redis.hashes SET value = 'bergen' WHERE key = 'user:1' AND field = 'city';
         INSERT INTO redis.sets VALUES (0, 'tags', 'z');
         UPDATE redis.zsets SET score = 5 WHERE key = 'board' AND member = 'bob';",
    )
    .await
    .unwrap();
    assert_eq!(r.call(&["HGET", "user:1", "city"]).await, bulk("bergen"));
    assert_eq!(r.call(&["SCARD", "tags"]).await, Reply::Int(3));
    assert_eq!(
        r.call(&["ZRANGE", "board", "0", "-1"]).await,
        Reply::Array(vec![bulk("bob"), bulk("ann")])
    );
    // A member needs its key: the foreign key refuses an orphan.
    let orphan = sql
        .execute("INSERT INTO redis.sets VALUES (0, 'no-such-key', 'm')", &[])
        .await
        .unwrap_err();
    assert_eq!(orphan.code().map(|c| c.code()), Some("23503"));
    sql.execute("DELETE FROM redis.keys WHERE key = 'user:1'", &[])
        .await
        .unwrap();
    assert_eq!(r.call(&["EXISTS", "user:1"]).await, Reply::Int(0));
    let left: i64 = sql
        .query_one("SELECT count(*) FROM redis.hashes", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0);
    // A key of one type replaced by another leaves none of the old members behind.
    r.call(&["SET", "jobs", "now a string"]).await;
    let left: i64 = sql
        .query_one("SELECT count(*) FROM redis.lists", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0);
}

/// Redis clients log in as Shoal's roles, by pg_hba.conf's rules, and a role's privileges on
/// the `redis` tables decide what it may run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_logs_in_as_roles_and_privileges_apply() {
    let password = std::env::temp_dir().join(format!("shoal-redis-pw-{}", std::process::id()));
    std::fs::write(&password, "admin pw\n").unwrap();
    let (server, port) = start(&["--superuser-password-file", password.to_str().unwrap()]);
    let mut r = Redis::connect(port).await;
    let noauth = Reply::Error("NOAUTH Authentication required.".into());
    assert_eq!(r.call(&["PING"]).await, noauth);
    assert_eq!(r.call(&["GET", "k"]).await, noauth);
    let wrong =
        Reply::Error("WRONGPASS invalid username-password pair or user is disabled.".into());
    assert_eq!(r.call(&["AUTH", "nope"]).await, wrong);
    assert_eq!(r.call(&["AUTH", "postgres", "nope"]).await, wrong);
    // `AUTH password` is the default user's (the superuser by default).
    assert_eq!(
        r.call(&["AUTH", "admin pw"]).await,
        Reply::Status("OK".into())
    );
    assert_eq!(r.call(&["SET", "k", "v"]).await, Reply::Status("OK".into()));

    let sql = support::connect_with(&server, "user=postgres password='admin pw'").await;
    sql.batch_execute(
        "CREATE ROLE reader LOGIN PASSWORD 'r';
         GRANT USAGE ON SCHEMA redis TO reader;
         GRANT SELECT ON ALL TABLES IN SCHEMA redis TO reader;
         CREATE ROLE nobody LOGIN PASSWORD 'n';",
    )
    .await
    .unwrap();
    let mut reader = Redis::connect(port).await;
    assert_eq!(
        reader.call(&["AUTH", "reader", "r"]).await,
        Reply::Status("OK".into())
    );
    assert_eq!(reader.call(&["GET", "k"]).await, bulk("v"));
    let noperm = |cmd: &str| {
        Reply::Error(format!(
            "NOPERM this user has no permissions to run the '{cmd}' command"
        ))
    };
    assert_eq!(reader.call(&["SET", "k", "w"]).await, noperm("set"));
    assert_eq!(reader.call(&["HSET", "h", "f", "v"]).await, noperm("hset"));
    // Refused when queued: EXEC then aborts, as Redis does for an ACL error.
    assert_eq!(reader.call(&["MULTI"]).await, Reply::Status("OK".into()));
    assert_eq!(reader.call(&["DEL", "k"]).await, noperm("del"));
    assert!(matches!(reader.call(&["EXEC"]).await, Reply::Error(e) if e.starts_with("EXECABORT")));
    // A GRANT takes effect on the next command.
    sql.batch_execute("GRANT INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA redis TO reader")
        .await
        .unwrap();
    assert_eq!(
        reader.call(&["SET", "k", "w"]).await,
        Reply::Status("OK".into())
    );
    // A role without privileges logs in, and may run nothing on the data.
    let mut nobody = Redis::connect(port).await;
    assert!(matches!(
        nobody.call(&["HELLO", "2", "AUTH", "nobody", "n"]).await,
        Reply::Array(_)
    ));
    assert_eq!(nobody.call(&["GET", "k"]).await, noperm("get"));
    assert_eq!(nobody.call(&["PING"]).await, Reply::Status("PONG".into()));
    drop(server);
    let _ = std::fs::remove_file(password);
}

/// Adds to collections racing with DEL and RENAME of the same keys leave no member behind
/// without its key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_racing_adds_leave_no_orphan_members() {
    let (server, port) = start(&[]);
    let mut tasks = Vec::new();
    for c in 0..4 {
        tasks.push(tokio::spawn(async move {
            let mut r = Redis::connect(port).await;
            for i in 0..150 {
                let key = format!("k{}", i % 3);
                let reply = match c {
                    0 => r.call(&["DEL", &key, "k0", "k1"]).await,
                    1 => r.call(&["RENAME", &key, "moved"]).await,
                    2 => r.call(&["SADD", &key, &i.to_string()]).await,
                    _ => r.call(&["RPUSH", "moved", &i.to_string()]).await,
                };
                assert!(
                    !matches!(&reply, Reply::Error(e) if !e.contains("no such key") && !e.starts_with("WRONGTYPE")),
                    "{reply:?}"
                );
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let sql = support::connect(&server).await;
    for table in ["sets", "lists"] {
        let orphans: i64 = sql
            .query_one(
                &format!(
                    "SELECT count(*) FROM redis.{table} m WHERE NOT EXISTS
                       (SELECT 1 FROM redis.keys k WHERE k.db = m.db AND k.key = m.key
                           AND k.type = '{}')",
                    &table[..table.len() - 1]
                ),
                &[],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(orphans, 0, "members of redis.{table} without their key");
    }
}

/// `everysec` and `no` acknowledge a write before it is flushed, and promise it is on disk
/// within about a second: after that, a kill -9 keeps it, collections included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_survive_a_crash_a_second_later_at_every_appendfsync() {
    for appendfsync in ["everysec", "no"] {
        let (server, port) = start(&["--redis-appendfsync", appendfsync]);
        let mut r = Redis::connect(port).await;
        for i in 0..100 {
            let key = format!("k{i}");
            assert_eq!(
                r.call(&["SET", &key, appendfsync]).await,
                Reply::Status("OK".into())
            );
        }
        r.call(&["HSET", "h", "f", "v"]).await;
        r.call(&["RPUSH", "l", "a", "b"]).await;
        r.call(&["ZADD", "z", "2.5", "m"]).await;
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        let dir = server.crash();
        let listen = format!("127.0.0.1:{port}");
        let restarted = ShoalServer::start_in(dir, &["--redis-listen", &listen]).unwrap();
        let mut r = Redis::connect(port).await;
        assert_eq!(r.call(&["DBSIZE"]).await, Reply::Int(103), "{appendfsync}");
        assert_eq!(r.call(&["GET", "k99"]).await, bulk(appendfsync));
        assert_eq!(r.call(&["HGET", "h", "f"]).await, bulk("v"));
        assert_eq!(
            r.call(&["LRANGE", "l", "0", "-1"]).await,
            Reply::Array(vec![bulk("a"), bulk("b")])
        );
        assert_eq!(r.call(&["ZSCORE", "z", "m"]).await, bulk("2.5"));
        drop(restarted);
    }
}

/// Sends `args` until the reply is not an error (a node may still be making the Redis tables,
/// or be promoted a moment later than SQL says); panics after 20 s.
async fn call_until_ok(redis: &mut Redis, args: &[&str]) -> Reply {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let reply = redis.call(args).await;
        if !matches!(reply, Reply::Error(_)) {
            return reply;
        }
        assert!(Instant::now() < deadline, "{args:?} answered {reply:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The text of INFO's replication section.
async fn replication_info(redis: &mut Redis) -> String {
    match redis.call(&["INFO", "replication"]).await {
        Reply::Bulk(text) => String::from_utf8(text).unwrap(),
        other => panic!("INFO replication answered {other:?}"),
    }
}

/// A replication group serves the Redis protocol over the same log: a write on the primary
/// reaches every standby, which answers reads and refuses writes with READONLY (a write
/// queued in MULTI aborts the EXEC), as a Redis replica does; INFO and ROLE tell each node's
/// role; after a failover the new primary takes Redis writes and has every acknowledged one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replication_groups_standbys_serve_reads_and_refuse_writes() {
    let _one_group = ONE_GROUP_AT_A_TIME.lock().await;
    let redis_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut group = Group::start_each(|n| {
        vec![
            "--redis-listen".into(),
            format!("127.0.0.1:{}", redis_ports[n]),
            "--redis-appendfsync".into(),
            "always".into(),
        ]
    });
    let (p, _) = group.settled_primary().await;
    let mut primary = Redis::connect(redis_ports[p]).await;
    // No node was the primary when the group started: the first one made the tables when it
    // was elected.
    assert_eq!(
        call_until_ok(&mut primary, &["SET", "greeting", "hello"]).await,
        Reply::Status("OK".into())
    );
    assert_eq!(
        primary.call(&["RPUSH", "queue", "a", "b"]).await,
        Reply::Int(2)
    );
    let info = replication_info(&mut primary).await;
    assert!(info.contains("role:master\r\n"), "{info}");
    assert!(info.contains("connected_slaves:2\r\n"), "{info}");
    match primary.call(&["ROLE"]).await {
        Reply::Array(items) => assert_eq!(items[0], bulk("master")),
        other => panic!("ROLE answered {other:?}"),
    }

    for s in (0..3).filter(|&n| n != p) {
        let mut standby = Redis::connect(redis_ports[s]).await;
        let deadline = Instant::now() + Duration::from_secs(20);
        while standby.call(&["LRANGE", "queue", "0", "-1"]).await
            != Reply::Array(vec![bulk("a"), bulk("b")])
        {
            assert!(
                Instant::now() < deadline,
                "node {} did not get the list",
                s + 1
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(standby.call(&["GET", "greeting"]).await, bulk("hello"));
        for write in [
            &["SET", "greeting", "bye"][..],
            &["DEL", "greeting"],
            &["LPOP", "queue"],
            &["FLUSHALL"],
        ] {
            match standby.call(write).await {
                Reply::Error(e) => assert_eq!(
                    e, "READONLY You can't write against a read only replica.",
                    "{write:?}"
                ),
                other => panic!("{write:?} on a standby answered {other:?}"),
            }
        }
        assert_eq!(standby.call(&["MULTI"]).await, Reply::Status("OK".into()));
        assert!(
            matches!(standby.call(&["INCR", "n"]).await, Reply::Error(e) if e.starts_with("READONLY"))
        );
        assert!(
            matches!(standby.call(&["EXEC"]).await, Reply::Error(e) if e.starts_with("EXECABORT"))
        );
        assert_eq!(standby.call(&["GET", "greeting"]).await, bulk("hello"));
        let info = replication_info(&mut standby).await;
        assert!(info.contains("role:slave\r\n"), "{info}");
        assert!(info.contains("master_link_status:up\r\n"), "{info}");
        match standby.call(&["ROLE"]).await {
            Reply::Array(items) => assert_eq!(items[0], bulk("slave")),
            other => panic!("ROLE answered {other:?}"),
        }
    }

    // Acknowledged (appendfsync always: on a majority's disks), then the primary dies.
    assert_eq!(
        primary.call(&["INCRBY", "counter", "41"]).await,
        Reply::Int(41)
    );
    drop(primary);
    group.kill(p);
    let (q, _) = group.primary().await;
    let mut promoted = Redis::connect(redis_ports[q]).await;
    assert_eq!(
        call_until_ok(&mut promoted, &["INCR", "counter"]).await,
        Reply::Int(42)
    );
    assert_eq!(promoted.call(&["GET", "greeting"]).await, bulk("hello"));
    let info = replication_info(&mut promoted).await;
    assert!(info.contains("role:master\r\n"), "{info}");
}
