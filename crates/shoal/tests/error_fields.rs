//! The fields of an ErrorResponse beyond code and message, compared with PostgreSQL 15: the
//! schema, table, column and constraint a violation names (drivers expose them as e.g.
//! psycopg's `diag.constraint_name`, and ORMs turn them into per-field messages), and the
//! position of a syntax error (psql's caret).

mod support;

use support::postgres::Postgres;
use support::{connect, connect_to, execute_each, ShoalServer};

const SCHEMA: &str = "
    CREATE TABLE parent (id integer PRIMARY KEY);
    CREATE TABLE child (
        id integer PRIMARY KEY,
        parent_id integer CONSTRAINT child_parent_fk REFERENCES parent (id),
        code text NOT NULL UNIQUE,
        qty integer CONSTRAINT qty_positive CHECK (qty > 0)
    );
    INSERT INTO parent VALUES (1);
    INSERT INTO child VALUES (1, 1, 'a', 1);
";

/// Statements that fail, each on a fresh transaction-less connection state.
const FAILING: &[&str] = &[
    "INSERT INTO child VALUES (1, 1, 'b', 1)",
    "INSERT INTO child VALUES (2, 1, 'a', 1)",
    "INSERT INTO child VALUES (2, 1, NULL, 1)",
    "INSERT INTO child VALUES (2, 1, 'b', 0)",
    "INSERT INTO child VALUES (2, 7, 'b', 1)",
    "DELETE FROM parent",
    "UPDATE child SET code = NULL",
    "SELEC 1",
    "SELECT 1 FROM child WHERE",
    "SELECT 1\nFROM child\nWHERE id = ) AND",
    "CREATE TABLE TABLE t (a int)",
];

/// (SQLSTATE, schema, table, column, constraint, position) of the statement's error.
type Fields = (
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

async fn fields_of(client: &tokio_postgres::Client, sql: &str) -> Fields {
    let err = client.simple_query(sql).await.expect_err(sql);
    let db = err.as_db_error().expect("a server error");
    let position = db.position().map(|p| format!("{p:?}"));
    (
        db.code().code().to_string(),
        db.schema().map(str::to_string),
        db.table().map(str::to_string),
        db.column().map(str::to_string),
        db.constraint().map(str::to_string),
        position,
    )
}

async fn all_fields(client: &tokio_postgres::Client) -> Vec<Fields> {
    execute_each(client, SCHEMA).await;
    let mut out = Vec::new();
    for sql in FAILING {
        out.push(fields_of(client, sql).await);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_fields_match_postgres() {
    let server = ShoalServer::start();
    let shoal = all_fields(&connect(&server).await).await;
    // Shoal names its objects whether or not PostgreSQL runs here.
    assert_eq!(shoal[0].4.as_deref(), Some("child_pkey"), "{shoal:?}");
    assert_eq!(shoal[2].3.as_deref(), Some("code"), "{shoal:?}");
    let Some(postgres) = Postgres::start() else {
        return;
    };
    let expected = all_fields(&connect_to(&postgres.addr).await).await;
    for ((sql, got), want) in FAILING.iter().zip(&shoal).zip(&expected) {
        assert_eq!(got, want, "fields of the error of {sql:?}");
    }
}
