//! Transactions that must not leak after an error, checked on Shoal and on a real PostgreSQL
//! 15 side by side (see `support::postgres`): each scenario records what every statement
//! answered (its rows or its SQLSTATE) and what the table holds afterwards, and both servers
//! must give the same record. The scenarios cover what the extended-protocol and several-
//! statement cases of `.slt` files cannot: a syntax error and a failed Parse inside a failed
//! block, the implicit block of a several-statement Query message, COMMIT AND CHAIN, and a
//! query that fails after some of its rows were sent.

mod support;

use support::postgres::Postgres;
use support::{connect_to, ShoalServer};
use tokio_postgres::{Client, SimpleQueryMessage};

/// What a simple-protocol query string answered: its rows, or the SQLSTATE of its error.
async fn simple(client: &Client, sql: &str) -> String {
    match client.simple_query(sql).await {
        Ok(messages) => {
            let rows: Vec<String> = messages
                .iter()
                .filter_map(|m| match m {
                    SimpleQueryMessage::Row(row) => Some(
                        (0..row.len())
                            .map(|i| row.get(i).unwrap_or("NULL").to_string())
                            .collect::<Vec<_>>()
                            .join(","),
                    ),
                    _ => None,
                })
                .collect();
            format!("ok [{}]", rows.join(" "))
        }
        Err(e) => format!("error {}", sqlstate(&e)),
    }
}

fn sqlstate(e: &tokio_postgres::Error) -> String {
    e.code()
        .map(|c| c.code().to_string())
        .unwrap_or_else(|| format!("(no sqlstate: {e})"))
}

/// The scenarios, each a list of what every step answered.
async fn scenarios(addr: &str) -> Vec<(&'static str, Vec<String>)> {
    let client = connect_to(addr).await;
    simple(&client, "CREATE TABLE atom (x int)").await;
    let mut out = Vec::new();

    // A syntax error in a block that has failed already leaves it failed: the INSERT after it
    // is refused (25P02) and ROLLBACK undoes the first one.
    let mut steps = Vec::new();
    for sql in [
        "BEGIN",
        "INSERT INTO atom VALUES (1)",
        "SELECT 1/0",
        "selec 1",
        "INSERT INTO atom VALUES (2)",
        "ROLLBACK",
        "SELECT count(*) FROM atom",
    ] {
        steps.push(simple(&client, sql).await);
    }
    out.push(("syntax error in a failed block", steps));

    // The same over the extended protocol: a statement that fails at Parse fails the block.
    let mut steps = vec![simple(&client, "BEGIN").await];
    steps.push(
        match client.execute("INSERT INTO atom VALUES (3)", &[]).await {
            Ok(n) => format!("ok {n}"),
            Err(e) => format!("error {}", sqlstate(&e)),
        },
    );
    steps.push(match client.prepare("SELEC 1").await {
        Ok(_) => "ok".into(),
        Err(e) => format!("error {}", sqlstate(&e)),
    });
    steps.push(
        match client.execute("INSERT INTO atom VALUES (4)", &[]).await {
            Ok(n) => format!("ok {n}"),
            Err(e) => format!("error {}", sqlstate(&e)),
        },
    );
    steps.push(simple(&client, "COMMIT").await);
    steps.push(simple(&client, "SELECT count(*) FROM atom").await);
    out.push(("failed Parse in a block", steps));

    // Several statements in one message are one implicit transaction.
    let mut steps = Vec::new();
    for sql in [
        "INSERT INTO atom VALUES (5); SELECT 1/0",
        "SELECT count(*) FROM atom",
        "INSERT INTO atom VALUES (6); COMMIT; INSERT INTO atom VALUES (7); SELECT 1/0",
        "SELECT x FROM atom ORDER BY x",
        "BEGIN; INSERT INTO atom VALUES (8); COMMIT; INSERT INTO atom VALUES (9)",
        "SELECT x FROM atom ORDER BY x",
        "INSERT INTO atom VALUES (10); SELECT count(*) FROM atom; ROLLBACK",
        "SELECT count(*) FROM atom",
        "INSERT INTO atom VALUES (11); VACUUM",
        "SELECT count(*) FROM atom",
        "DELETE FROM atom",
    ] {
        steps.push(simple(&client, sql).await);
    }
    out.push(("implicit block of several statements", steps));

    // COMMIT AND CHAIN needs a block, and opens the next one like the last.
    let mut steps = Vec::new();
    for sql in [
        "COMMIT AND CHAIN",
        "ROLLBACK AND CHAIN",
        "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
        "COMMIT AND CHAIN",
        "SHOW transaction_isolation",
        "SHOW transaction_read_only",
        "INSERT INTO atom VALUES (12)",
        "ROLLBACK AND CHAIN",
        "SHOW transaction_isolation",
        "COMMIT AND NO CHAIN",
        "SHOW transaction_isolation",
        "SELECT count(*) FROM atom",
    ] {
        steps.push(simple(&client, sql).await);
    }
    out.push(("AND CHAIN", steps));

    // A query that fails after rows went out fails its block.
    let mut steps = Vec::new();
    for sql in [
        "BEGIN",
        "INSERT INTO atom VALUES (13)",
        "SELECT 1/(x - 60000) FROM generate_series(1, 100000) x",
        "SELECT 1",
        "ROLLBACK",
        "SELECT count(*) FROM atom",
    ] {
        steps.push(simple(&client, sql).await);
    }
    out.push(("a query failing in a block", steps));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_leave_nothing_behind_as_in_postgresql() {
    let shoal = ShoalServer::start();
    let shoal_answers = scenarios(&shoal.addr).await;

    // What PostgreSQL 15 answers, written out, so that the test holds where it is missing.
    let expected: Vec<(&str, Vec<&str>)> = vec![
        (
            "syntax error in a failed block",
            vec![
                "ok []",
                "ok []",
                "error 22012",
                "error 42601",
                "error 25P02",
                "ok []",
                "ok [0]",
            ],
        ),
        (
            "failed Parse in a block",
            vec![
                "ok []",
                "ok 1",
                "error 42601",
                "error 25P02",
                "ok []",
                "ok [0]",
            ],
        ),
        (
            "implicit block of several statements",
            vec![
                "error 22012",
                "ok [0]",
                "error 22012",
                "ok [6]",
                "ok []",
                "ok [6 8 9]",
                "ok [4]",
                "ok [3]",
                "error 25001",
                "ok [3]",
                "ok []",
            ],
        ),
        (
            "AND CHAIN",
            vec![
                "error 25P01",
                "error 25P01",
                "ok []",
                "ok []",
                "ok [repeatable read]",
                "ok [on]",
                "error 25006",
                "ok []",
                "ok [repeatable read]",
                "ok []",
                "ok [read committed]",
                "ok [0]",
            ],
        ),
        (
            "a query failing in a block",
            vec![
                "ok []",
                "ok []",
                "error 22012",
                "error 25P02",
                "ok []",
                "ok [0]",
            ],
        ),
    ];
    let expected: Vec<(&str, Vec<String>)> = expected
        .into_iter()
        .map(|(name, steps)| (name, steps.into_iter().map(String::from).collect()))
        .collect();

    if let Some(postgres) = Postgres::start() {
        let postgres_answers = scenarios(&postgres.addr).await;
        assert_eq!(
            postgres_answers, expected,
            "PostgreSQL 15 no longer answers as this test says"
        );
    }
    assert_eq!(shoal_answers, expected, "Shoal differs from PostgreSQL 15");
}
