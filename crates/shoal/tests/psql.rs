//! psql's meta-commands against a running Shoal: `\d TABLE`, `\d+ TABLE`, `\d INDEX`, `\dt`,
//! `\di`, `\dv`, `\dn`, `\ds`, `\l`, `\du`, `\df`, `\x` and `\timing` send psql's own catalog
//! queries (pg_class, pg_attribute, pg_constraint, regclass casts, correlated subqueries,
//! ARRAY(subquery), EXISTS in a select list ...), so this test checks that those queries run and
//! that their answers describe the objects that were created.
//! It needs the `psql` client (Debian's postgresql-client-15; `.ci/run` installs it).

mod support;

use std::io::Write;
use std::process::{Command, Stdio};

use support::ShoalServer;

/// Runs a psql script (fed on stdin, one line per command) with ON_ERROR_STOP, so any failing
/// catalog query fails the test. psql connects over the server's Unix socket, as it does by
/// default when no host is given.
fn psql(server: &ShoalServer, script: &str) -> String {
    let mut child = Command::new("psql")
        .args(["-X", "-U", "postgres", "-d", "postgres", "-h"])
        .arg(server.unix_socket_dir())
        .args(["-p", &server.port().to_string()])
        .args(["-v", "ON_ERROR_STOP=1", "-P", "pager=off", "-f", "-"])
        .env("PGCONNECT_TIMEOUT", "10")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run psql (install postgresql-client-15)");
    let mut stdin = child.stdin.take().expect("psql stdin");
    stdin
        .write_all(script.as_bytes())
        .expect("write psql script");
    stdin.write_all(b"\n").expect("write psql script");
    drop(stdin);
    let out = child.wait_with_output().expect("wait for psql");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success() && !stderr.contains("ERROR"),
        "psql failed on {script:?}:\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    stdout
}

fn assert_contains(output: &str, expected: &[&str]) {
    for e in expected {
        assert!(
            output.contains(e),
            "expected {e:?} in psql output:\n{output}"
        );
    }
}

#[test]
fn list_commands_show_what_was_created() {
    let server = ShoalServer::start();
    for sql in [
        "CREATE SCHEMA app",
        "CREATE TABLE app.items (id integer PRIMARY KEY, name varchar(20) NOT NULL DEFAULT 'x', \
         price numeric(10,2) CHECK (price > 0), made timestamptz)",
        "CREATE INDEX items_name_idx ON app.items (name)",
        "CREATE VIEW app.cheap AS SELECT id FROM app.items WHERE price < 10",
        "CREATE SEQUENCE app.ticket_seq",
    ] {
        psql(&server, &format!("{sql};"));
    }

    let lists = [
        ("\\dt app.*", vec!["items", "table"]),
        ("\\di app.*", vec!["items_pkey", "items_name_idx", "index"]),
        ("\\dv app.*", vec!["cheap", "view"]),
        ("\\ds app.*", vec!["ticket_seq", "sequence"]),
        ("\\dn", vec!["app", "public"]),
    ];
    for (command, expected) in lists {
        assert_contains(&psql(&server, command), &expected);
    }
}

#[test]
fn describe_commands_show_tables_indexes_databases_and_roles() {
    let server = ShoalServer::start();
    psql(
        &server,
        "CREATE TABLE parent (id integer PRIMARY KEY, name varchar(20) NOT NULL DEFAULT 'x', \
         price numeric(10,2) CHECK (price > 0)) WITH (fillfactor=90);\n\
         CREATE INDEX parent_name ON parent (name);\n\
         CREATE TABLE child (id integer REFERENCES parent (id));",
    );
    let table = psql(&server, "\\d parent");
    assert_contains(
        &table,
        &[
            "Table \"public.parent\"",
            "character varying(20)",
            "numeric(10,2)",
            "not null",
            "'x'",
            "\"parent_pkey\" PRIMARY KEY, btree (id)",
            "\"parent_name\" btree (name)",
            "Check constraints:",
            "\"parent_price_check\" CHECK",
            "Referenced by:",
            "TABLE \"child\" CONSTRAINT \"child_id_fkey\" FOREIGN KEY (id) REFERENCES parent(id)",
        ],
    );
    let child = psql(&server, "\\d child");
    assert_contains(
        &child,
        &[
            "Foreign-key constraints:",
            "\"child_id_fkey\" FOREIGN KEY (id) REFERENCES parent(id)",
        ],
    );
    let plus = psql(&server, "\\d+ parent");
    assert_contains(
        &plus,
        &[
            "Storage",
            "Stats target",
            "Access method: heap",
            "Options: fillfactor=90",
        ],
    );
    let index = psql(&server, "\\d parent_name");
    assert_contains(
        &index,
        &[
            "Index \"public.parent_name\"",
            "| yes  | name",
            "btree, for table \"public.parent\"",
        ],
    );
    let databases = psql(&server, "\\l\n\\l+");
    assert_contains(
        &databases,
        &["List of databases", "postgres", "UTF8", "pg_default"],
    );
    let roles = psql(&server, "\\du");
    assert_contains(&roles, &["List of roles", "postgres", "Superuser"]);
    let functions = psql(&server, "\\df");
    assert_contains(&functions, &["List of functions"]);
}

#[test]
fn privilege_commands_show_roles_grants_and_owners() {
    let server = ShoalServer::start();
    psql(
        &server,
        "CREATE ROLE reader LOGIN;\n\
         CREATE ROLE staff;\n\
         GRANT staff TO reader;\n\
         CREATE TABLE notes (id int);\n\
         GRANT SELECT ON notes TO reader;\n\
         GRANT INSERT, UPDATE ON notes TO staff WITH GRANT OPTION;\n\
         CREATE TABLE plain (id int);\n\
         GRANT CONNECT ON DATABASE postgres TO reader;",
    );
    let roles = psql(&server, "\\du");
    assert_contains(&roles, &["reader", "{staff}", "Cannot login"]);
    // \dp and \z: one grant per line; a table with the default privileges shows none.
    for command in ["\\dp", "\\z notes"] {
        let grants = psql(&server, command);
        assert_contains(
            &grants,
            &[
                "Access privileges",
                "postgres=arwdDxt/postgres",
                "reader=r/postgres",
                "staff=a*w*/postgres",
            ],
        );
    }
    // Column privileges: one column per block, its grants indented below it.
    let grants = psql(
        &server,
        "GRANT SELECT (id), UPDATE (id) ON plain TO reader;\n\\dp plain",
    );
    assert_contains(&grants, &["Column privileges", "id:", "reader=rw/postgres"]);
    psql(
        &server,
        "REVOKE SELECT (id), UPDATE (id) ON plain FROM reader;",
    );
    let grants = psql(&server, "\\dp plain");
    assert_contains(&grants, &["plain", "table"]);
    assert!(!grants.contains("=arwdDxt/"), "{grants}");
    let defaults = psql(&server, "\\ddp");
    assert_contains(&defaults, &["Default access privileges", "(0 rows)"]);
    let defaults = psql(
        &server,
        "ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO reader;\n\\ddp",
    );
    assert_contains(&defaults, &["postgres", "table", "reader=r/postgres"]);
    let databases = psql(&server, "\\l");
    assert_contains(&databases, &["reader=c/postgres"]);
}

#[test]
fn display_settings_and_tab_completion_queries() {
    let server = ShoalServer::start();
    psql(&server, "CREATE TABLE tab_orders (id int);");
    let expanded = psql(&server, "\\x on\nSELECT 1 AS one, 'a' AS letter;");
    assert_contains(&expanded, &["-[ RECORD 1 ]", "one", "letter"]);
    let timing = psql(&server, "\\timing on\nSELECT 1;");
    assert_contains(&timing, &["Time: "]);
    // What psql's tab completion asks for `SELECT * FROM tab_<TAB>`.
    let completion = psql(
        &server,
        "SELECT pg_catalog.quote_ident(c.relname) FROM pg_catalog.pg_class c \
         WHERE c.relkind IN ('r', 'S', 'v', 'm', 'f', 'p') \
         AND substring(pg_catalog.quote_ident(c.relname),1,4)='tab_' \
         AND pg_catalog.pg_table_is_visible(c.oid) \
         AND c.relnamespace <> (SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = 'pg_catalog') \
         LIMIT 1000;",
    );
    assert_contains(&completion, &["tab_orders"]);
}

/// Runs one query through psql with extra environment (libpq turns PGOPTIONS, PGTZ and
/// PGAPPNAME into startup parameters); returns success, stdout and stderr.
fn psql_with_env(
    server: &ShoalServer,
    env: &[(&str, &str)],
    query: &str,
) -> (bool, String, String) {
    let out = Command::new("psql")
        .args([
            "-X",
            "-A",
            "-t",
            "-h",
            "127.0.0.1",
            "-U",
            "postgres",
            "-d",
            "postgres",
        ])
        .args(["-p", &server.port().to_string(), "-c", query])
        .env("PGCONNECT_TIMEOUT", "10")
        .envs(env.iter().copied())
        .output()
        .expect("run psql (install postgresql-client-15)");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn startup_parameters_and_pgoptions_set_the_session() {
    let server = ShoalServer::start();
    let env = [
        (
            "PGOPTIONS",
            "-c search_path=app,public --statement-timeout=5s -csynchronous_commit=off",
        ),
        ("PGTZ", "Europe/Berlin"),
        ("PGAPPNAME", "startup-test"),
    ];
    let query = "SELECT current_setting('search_path') || '|' || \
                 current_setting('statement_timeout') || '|' || \
                 current_setting('synchronous_commit') || '|' || \
                 current_setting('TimeZone') || '|' || current_setting('application_name')";
    let (ok, stdout, stderr) = psql_with_env(&server, &env, query);
    assert!(ok, "psql failed: {stderr}");
    assert_eq!(
        stdout.trim(),
        "app,public|5s|off|Europe/Berlin|startup-test"
    );
    // RESET returns to the startup packet's value, not the built-in default.
    let (ok, stdout, stderr) = psql_with_env(
        &server,
        &env,
        "SET statement_timeout = '1min'; SET TimeZone = 'UTC'; RESET statement_timeout; \
         RESET ALL; SELECT current_setting('statement_timeout') || '|' || \
         current_setting('TimeZone') || '|' || current_setting('search_path')",
    );
    assert!(ok, "psql failed: {stderr}");
    assert_eq!(
        stdout.trim().lines().last(),
        Some("5s|Europe/Berlin|app,public")
    );
    // As in PostgreSQL, a bad setting in the startup packet refuses the connection.
    for (options, message) in [
        (
            "-c no_such_setting=1",
            "unrecognized configuration parameter \"no_such_setting\"",
        ),
        (
            "-c TimeZone=Nowhere/Land",
            "invalid value for parameter \"TimeZone\"",
        ),
        (
            "-B 100",
            "invalid command-line argument for server process: -B",
        ),
    ] {
        let (ok, _, stderr) = psql_with_env(&server, &[("PGOPTIONS", options)], "SELECT 1");
        assert!(!ok, "{options}: connected");
        assert!(
            stderr.contains(&format!("FATAL:  {message}")),
            "{options}: {stderr}"
        );
    }
    let (ok, stdout, _) = psql_with_env(&server, &[], "SELECT 1");
    assert!(ok && stdout.trim() == "1", "the server still serves");
}
