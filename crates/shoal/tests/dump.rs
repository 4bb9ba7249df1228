//! pg_dump 15 of a Shoal database restores into PostgreSQL 15, and PostgreSQL's dump of the
//! same database (and Shoal's own) restores into Shoal: the plain format through psql and the
//! custom format through pg_restore, all stopping at the first error. The schema
//! covers what a dump carries: serial and identity columns with their sequences, a sequence of
//! its own, numeric, varchar, array, jsonb, boolean and timestamptz columns, defaults, CHECK,
//! UNIQUE, a primary key, a cascading foreign key, an index, a view, a second schema whose table
//! the view of the first reads, comments. After the restore, every table and the view read the same in
//! PostgreSQL as in Shoal, and the sequences continue where Shoal's stood.
//! It needs PostgreSQL 15 (server, psql, pg_dump, pg_restore); `.ci/run` installs them.

mod support;

use std::process::Command;

use support::postgres::Postgres;
use support::ShoalServer;

const SCHEMA: &str = "
CREATE TABLE customers (id serial PRIMARY KEY, name text NOT NULL,
    email varchar(100) UNIQUE, balance numeric(12,2) DEFAULT 0,
    created timestamptz DEFAULT '2026-01-02 03:04:05+00');
CREATE TABLE orders (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    customer_id int REFERENCES customers(id) ON DELETE CASCADE,
    total numeric(10,2) CHECK (total >= 0), note text, tags text[], data jsonb,
    paid boolean DEFAULT false);
CREATE INDEX orders_customer ON orders (customer_id);
CREATE SEQUENCE invoice_seq START 100 INCREMENT 5;
CREATE SCHEMA archive;
CREATE TABLE archive.old_orders (id int PRIMARY KEY, total numeric(10,2));
CREATE VIEW big_orders AS SELECT o.id, o.total FROM orders o WHERE o.total > 100
    UNION ALL SELECT id, total FROM archive.old_orders;
INSERT INTO customers (name, email, balance) VALUES
    ('Ann', 'ann@example.com', 10.5), ('Bob', NULL, 0), ('Zoë ''quoted''', 'z@example.com', -3.25);
INSERT INTO orders (customer_id, total, note, tags, data) VALUES
    (1, 150.25, 'first', '{a,b}', '{\"k\": [1, 2]}'), (2, 5, NULL, NULL, NULL),
    (3, 999.99, E'tab\\there', '{\"x y\",NULL}', '{\"nested\": {\"a\": null}}');
INSERT INTO archive.old_orders VALUES (7, 700), (8, 80);
SELECT nextval('invoice_seq'), nextval('invoice_seq');
COMMENT ON TABLE customers IS 'people who buy';
COMMENT ON COLUMN customers.name IS 'full name, as written';
COMMENT ON VIEW big_orders IS 'orders over 100';
";

/// Queries whose answers must match after the restore.
const CHECKS: &[&str] = &[
    "SELECT * FROM public.customers ORDER BY id",
    "SELECT * FROM public.orders ORDER BY id",
    "SELECT * FROM archive.old_orders ORDER BY id",
    "SELECT * FROM public.big_orders ORDER BY id",
    "SELECT nextval('public.invoice_seq')",
    "SELECT obj_description('public.customers'::regclass, 'pg_class'), \
     col_description('public.customers'::regclass, 2), \
     obj_description('public.big_orders'::regclass, 'pg_class')",
    "INSERT INTO public.customers (name) VALUES ('next') RETURNING id",
    "INSERT INTO public.orders (customer_id, total) VALUES (1, 1) RETURNING id",
];

#[test]
fn pg_dump_of_shoal_restores_into_postgres() {
    let Some(postgres) = Postgres::start() else {
        return;
    };
    let shoal = ShoalServer::start();
    psql(shoal.port(), "postgres", SCHEMA);

    let dir = std::env::temp_dir().join(format!("shoal-dump-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plain = dir.join("dump.sql");
    let custom = dir.join("dump.custom");
    run(
        pg_dump(shoal.port()).arg("-f").arg(&plain),
        "pg_dump (plain)",
    );
    run(
        pg_dump(shoal.port()).args(["-Fc", "-f"]).arg(&custom),
        "pg_dump (custom)",
    );
    // Asked after the dumps: the checks insert rows and draw from sequences.
    let expected: Vec<String> = CHECKS
        .iter()
        .map(|q| psql(shoal.port(), "postgres", q))
        .collect();

    psql(postgres.port(), "postgres", "CREATE DATABASE from_plain");
    psql(postgres.port(), "postgres", "CREATE DATABASE from_custom");
    run(
        &mut psql_file(postgres.port(), "from_plain", &plain),
        "psql < plain dump",
    );
    run(
        Command::new("pg_restore")
            .args(["--exit-on-error", "-h", "127.0.0.1", "-U", "postgres"])
            .args(["-d", "from_custom", "-p"])
            .arg(postgres.port().to_string())
            .arg(&custom),
        "pg_restore of the custom dump",
    );
    for database in ["from_plain", "from_custom"] {
        for (query, shoal_answer) in CHECKS.iter().zip(&expected) {
            assert_eq!(
                &psql(postgres.port(), database, query),
                shoal_answer,
                "{database}: {query}"
            );
        }
        // The constraints came along: a CHECK violation and an orphan are refused.
        for refused in [
            "INSERT INTO public.orders (customer_id, total) VALUES (1, -1)",
            "INSERT INTO public.orders (customer_id, total) VALUES (42, 1)",
            "INSERT INTO public.customers (name, email) VALUES ('dup', 'ann@example.com')",
        ] {
            assert!(
                psql_fails(postgres.port(), database, refused),
                "{database}: {refused}"
            );
        }
    }

    // And back: PostgreSQL's dumps of the same database, and Shoal's own plain dump, restore
    // into new Shoal servers with the same answers.
    psql(postgres.port(), "postgres", "CREATE DATABASE pg_source");
    run(
        &mut psql_file(postgres.port(), "pg_source", &plain),
        "psql < plain dump (PostgreSQL)",
    );
    let pg_plain = dir.join("pg_dump.sql");
    let pg_custom = dir.join("pg_dump.custom");
    run(
        pg_dump_database(postgres.port(), "pg_source")
            .arg("-f")
            .arg(&pg_plain),
        "pg_dump of PostgreSQL (plain)",
    );
    run(
        pg_dump_database(postgres.port(), "pg_source")
            .args(["-Fc", "-f"])
            .arg(&pg_custom),
        "pg_dump of PostgreSQL (custom)",
    );
    let restores: [(&str, &std::path::Path); 3] = [
        ("PostgreSQL's plain dump", &pg_plain),
        ("PostgreSQL's custom dump", &pg_custom),
        ("Shoal's own plain dump", &plain),
    ];
    for (what, file) in restores {
        let target = ShoalServer::start();
        let mut restore = match file.extension().and_then(|e| e.to_str()) {
            Some("custom") => {
                let mut command = Command::new("pg_restore");
                command
                    .args(["--exit-on-error", "-h", "127.0.0.1", "-U", "postgres"])
                    .args(["-d", "postgres", "-p"])
                    .arg(target.port().to_string())
                    .arg(file);
                command
            }
            _ => psql_file(target.port(), "postgres", file),
        };
        run(&mut restore, what);
        for (query, answer) in CHECKS.iter().zip(&expected) {
            assert_eq!(
                &psql(target.port(), "postgres", query),
                answer,
                "Shoal restored from {what}: {query}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// psql running the script `file`, stopping at its first error.
fn psql_file(port: u16, database: &str, file: &std::path::Path) -> Command {
    let mut command = Command::new("psql");
    command
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1"])
        .args(["-U", "postgres", "-d", database, "-p"])
        .arg(port.to_string())
        .arg("-f")
        .arg(file);
    command
}

fn pg_dump_database(port: u16, database: &str) -> Command {
    let mut command = Command::new("pg_dump");
    command
        .args(["-h", "127.0.0.1", "-U", "postgres", "-d", database, "-p"])
        .arg(port.to_string());
    command
}

fn pg_dump(port: u16) -> Command {
    pg_dump_database(port, "postgres")
}

/// Runs `sql` with psql (stopping at the first error) and returns its unaligned output.
fn psql(port: u16, database: &str, sql: &str) -> String {
    let output = psql_command(port, database, sql)
        .output()
        .expect("run psql");
    assert!(
        output.status.success(),
        "psql on port {port} failed on {sql}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("psql prints UTF-8")
}

fn psql_fails(port: u16, database: &str, sql: &str) -> bool {
    !psql_command(port, database, sql)
        .output()
        .expect("run psql")
        .status
        .success()
}

fn psql_command(port: u16, database: &str, sql: &str) -> Command {
    let mut command = Command::new("psql");
    command
        .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1"])
        .args(["-U", "postgres", "-d", database, "-p"])
        .arg(port.to_string())
        .args(["-c", sql]);
    command
}

fn run(command: &mut Command, what: &str) {
    let output = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
