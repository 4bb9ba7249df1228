//! Server-wide settings as PostgreSQL users set them: DATA_DIR/postgresql.conf, `-c
//! name=value` on the command line, ALTER SYSTEM (postgresql.auto.conf, applied by
//! pg_reload_conf or a restart, to every session that did not set the value itself), and
//! pg_settings telling where each value comes from. A file that does not read refuses the
//! start.

mod support;

use support::{connect, connect_with, ShoalServer};

async fn show(client: &tokio_postgres::Client, name: &str) -> String {
    client
        .query_one(&format!("SHOW {name}"), &[])
        .await
        .unwrap()
        .get(0)
}

fn sqlstate(e: &tokio_postgres::Error) -> String {
    e.code()
        .map(|c| c.code().to_string())
        .unwrap_or_else(|| format!("not a server error: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_command_line_and_alter_system_set_what_sessions_start_with() {
    let data_dir = std::env::temp_dir().join(format!("shoal-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&data_dir).unwrap();
    std::fs::write(
        data_dir.join("postgresql.conf"),
        "# ours\nstatement_timeout = 5s\nlock_timeout = '1s'  # replaced below\n",
    )
    .unwrap();
    let server = ShoalServer::start_in(data_dir, &["-c", "lock_timeout=3s"]).unwrap();
    let admin = connect(&server).await;
    assert_eq!(show(&admin, "statement_timeout").await, "5s");
    assert_eq!(show(&admin, "lock_timeout").await, "3s");
    let row = admin
        .query_one(
            "SELECT source, sourceline, reset_val, boot_val FROM pg_settings \
             WHERE name = 'statement_timeout'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "configuration file");
    assert_eq!(row.get::<_, Option<i32>>(1), Some(2));
    // In the setting's unit, as PostgreSQL gives them: milliseconds.
    assert_eq!(row.get::<_, String>(2), "5000");
    assert_eq!(row.get::<_, String>(3), "0");
    let source: String = admin
        .query_one(
            "SELECT source FROM pg_settings WHERE name = 'lock_timeout'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(source, "command line");
    // RESET returns to the server's value, not the built-in one.
    admin
        .batch_execute("SET statement_timeout = 0; RESET statement_timeout")
        .await
        .unwrap();
    assert_eq!(show(&admin, "statement_timeout").await, "5s");

    // ALTER SYSTEM writes postgresql.auto.conf; pg_reload_conf applies it to new sessions.
    admin
        .batch_execute("ALTER SYSTEM SET search_path = app, public")
        .await
        .unwrap();
    let auto = std::fs::read_to_string(server.data_dir().join("postgresql.auto.conf")).unwrap();
    assert!(auto.contains("search_path = 'app, public'"), "{auto}");
    assert_eq!(
        show(&connect(&server).await, "search_path").await,
        "\"$user\", public"
    );
    let keeper = connect(&server).await;
    keeper
        .batch_execute("SET search_path = kept")
        .await
        .unwrap();
    admin
        .batch_execute("SELECT pg_reload_conf()")
        .await
        .unwrap();
    // New sessions, and running ones that did not SET it, take the new value.
    assert_eq!(
        show(&connect(&server).await, "search_path").await,
        "app, public"
    );
    assert_eq!(show(&admin, "search_path").await, "app, public");
    assert_eq!(show(&keeper, "search_path").await, "kept");
    keeper.batch_execute("RESET search_path").await.unwrap();
    assert_eq!(show(&keeper, "search_path").await, "app, public");
    let reloaded: bool = admin
        .query_one(
            "SELECT pg_conf_load_time() > pg_postmaster_start_time() \
                AND pg_postmaster_start_time() < now()",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(reloaded, "pg_conf_load_time moves with pg_reload_conf");

    // Refused: a bad value, an unknown setting, a non-superuser, a transaction block.
    let e = admin
        .batch_execute("ALTER SYSTEM SET statement_timeout = 'soon'")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "22023", "{e}");
    let e = admin
        .batch_execute("ALTER SYSTEM SET no_such_setting = 1")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "42704", "{e}");
    let e = admin
        .batch_execute("BEGIN; ALTER SYSTEM SET work_mem = '8MB'")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "25001", "{e}");
    admin.batch_execute("ROLLBACK").await.unwrap();
    admin
        .batch_execute("CREATE ROLE tuner LOGIN")
        .await
        .unwrap();
    let tuner = connect_with(&server, "user=tuner").await;
    let e = tuner
        .batch_execute("ALTER SYSTEM SET work_mem = '8MB'")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "42501", "{e}");

    // A restart reads both files; ALTER SYSTEM RESET takes the value away again.
    let (_, data_dir) = server.terminate();
    let server = ShoalServer::start_in(data_dir, &[]).unwrap();
    let admin = connect(&server).await;
    assert_eq!(show(&admin, "search_path").await, "app, public");
    assert_eq!(show(&admin, "lock_timeout").await, "1s");
    // As in PostgreSQL, ALTER SYSTEM runs alone: with another statement in one message it
    // would be inside that message's implicit transaction.
    let e = admin
        .batch_execute("ALTER SYSTEM RESET search_path; SELECT pg_reload_conf()")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "25001", "{e}");
    admin
        .batch_execute("ALTER SYSTEM RESET search_path")
        .await
        .unwrap();
    admin
        .batch_execute("SELECT pg_reload_conf()")
        .await
        .unwrap();
    assert_eq!(
        show(&connect(&server).await, "search_path").await,
        "\"$user\", public"
    );

    // A file that does not read refuses the start, naming the file and line.
    let (_, data_dir) = server.terminate();
    std::fs::write(
        data_dir.join("postgresql.conf"),
        "statement_timeout = 5s\nbogus = 1\n",
    )
    .unwrap();
    let (status, output) = support::serve_until_exit(&data_dir);
    assert!(!status.success());
    assert!(
        output.contains("unrecognized configuration parameter \"bogus\"")
            && output.contains("line 2"),
        "{output}"
    );
    std::fs::remove_dir_all(&data_dir).unwrap();
}
