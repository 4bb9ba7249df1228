//! Client authentication over the wire, as PostgreSQL does it: pg_hba.conf's first matching
//! line picks the method; SCRAM-SHA-256 against the role's stored verifier; roles that may not
//! log in, whose password expired or that are at their connection limit are refused with
//! PostgreSQL's SQLSTATEs; a wrong password and an unknown role read the same; roles and
//! passwords survive a restart; and a server is refused at start when it would listen beyond
//! loopback while a rule lets clients from there in without a password.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use support::{startup_message, ShoalServer};

/// Connects as `user` with `password` (None: none), over TCP loopback.
async fn connect(
    server: &ShoalServer,
    user: &str,
    password: Option<&str>,
) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let mut conn = format!(
        "host=127.0.0.1 port={} user={user} dbname=postgres connect_timeout=10",
        server.port()
    );
    if let Some(p) = password {
        let quoted = p.replace('\\', "\\\\").replace('\'', "\\'");
        conn.push_str(&format!(" password='{quoted}'"));
    }
    let (client, connection) = tokio_postgres::connect(&conn, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

fn sqlstate(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .map(|d| d.code().code().to_string())
        .unwrap_or_else(|| format!("not a server error: {e}"))
}

fn message(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .map(|d| d.message().to_string())
        .unwrap_or_default()
}

/// A file holding `password`, for `--superuser-password-file`.
fn password_file(password: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!(
        "shoal-password-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::write(&path, format!("{password}\n")).unwrap();
    path
}

async fn current_user(client: &tokio_postgres::Client) -> (String, String) {
    let row = client
        .query_one("SELECT current_user, session_user", &[])
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_logins_check_roles_and_survive_a_restart() {
    let file = password_file("s3cret pass");
    let server = ShoalServer::start_with(&["--superuser-password-file", file.to_str().unwrap()]);
    let hba = std::fs::read_to_string(server.data_dir().join("pg_hba.conf")).unwrap();
    assert!(
        hba.contains("127.0.0.1/32   scram-sha-256"),
        "loopback asks for a password when one is given:\n{hba}"
    );

    // The superuser, with and without its password.
    let admin = connect(&server, "postgres", Some("s3cret pass"))
        .await
        .expect("the superuser logs in with its password");
    assert_eq!(
        current_user(&admin).await,
        ("postgres".into(), "postgres".into())
    );
    let e = connect(&server, "postgres", Some("wrong"))
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "28P01");
    assert_eq!(
        message(&e),
        "password authentication failed for user \"postgres\""
    );
    // An unknown role fails as a wrong password does.
    let e = connect(&server, "ghost", Some("wrong")).await.unwrap_err();
    assert_eq!(sqlstate(&e), "28P01");
    assert_eq!(
        message(&e),
        "password authentication failed for user \"ghost\""
    );

    admin
        .batch_execute(
            "CREATE ROLE alice LOGIN PASSWORD 'alice pw';
             CREATE USER carol PASSWORD 'carol pw' CONNECTION LIMIT 1;
             CREATE ROLE bob PASSWORD 'bob pw';
             CREATE ROLE dave LOGIN PASSWORD 'dave pw' VALID UNTIL '2001-01-01';",
        )
        .await
        .unwrap();
    // The password is kept only as a SCRAM verifier.
    let stored: String = admin
        .query_one(
            "SELECT rolpassword FROM pg_authid WHERE rolname = 'alice'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(stored.starts_with("SCRAM-SHA-256$4096:"), "{stored}");
    assert!(!stored.contains("alice pw"));

    let alice = connect(&server, "alice", Some("alice pw"))
        .await
        .expect("alice");
    assert_eq!(current_user(&alice).await, ("alice".into(), "alice".into()));
    // Not a superuser: no roles of her own making; but her own password, yes.
    let e = alice.batch_execute("CREATE ROLE eve").await.unwrap_err();
    assert_eq!(sqlstate(&e), "42501");
    alice
        .batch_execute("ALTER ROLE alice PASSWORD 'alice new'")
        .await
        .expect("a role changes its own password");
    let e = connect(&server, "alice", Some("alice pw"))
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "28P01");

    let e = connect(&server, "bob", Some("bob pw")).await.unwrap_err();
    assert_eq!(sqlstate(&e), "28000");
    assert_eq!(message(&e), "role \"bob\" is not permitted to log in");
    let e = connect(&server, "dave", Some("dave pw")).await.unwrap_err();
    assert_eq!(sqlstate(&e), "28P01", "an expired password logs in no more");

    let carol = connect(&server, "carol", Some("carol pw"))
        .await
        .expect("carol");
    let e = connect(&server, "carol", Some("carol pw"))
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "53300");
    assert_eq!(message(&e), "too many connections for role \"carol\"");
    drop(carol);

    admin.batch_execute("DROP ROLE dave").await.unwrap();
    let e = admin.batch_execute("DROP ROLE postgres").await.unwrap_err();
    assert_eq!(sqlstate(&e), "2BP01");
    drop((admin, alice));

    // Roles and passwords are catalog changes: they survive a restart.
    let (_, dir) = server.terminate();
    let server = ShoalServer::start_in(dir, &[]).expect("restart");
    let alice = connect(&server, "alice", Some("alice new"))
        .await
        .expect("alice after the restart");
    assert_eq!(current_user(&alice).await.0, "alice");
    let e = connect(&server, "dave", Some("dave pw")).await.unwrap_err();
    assert_eq!(sqlstate(&e), "28P01");
    let _ = std::fs::remove_file(file);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_decide_and_are_reloaded_on_sighup() {
    // Without a password: local and loopback clients are trusted, as initdb's defaults.
    let server = ShoalServer::start();
    let admin = connect(&server, "postgres", None).await.expect("trusted");
    let e = connect(&server, "nobody", None).await.unwrap_err();
    assert_eq!(sqlstate(&e), "28000");
    assert_eq!(message(&e), "role \"nobody\" does not exist");
    admin
        .batch_execute("CREATE ROLE frank LOGIN PASSWORD 'frank pw'; CREATE ROLE grace LOGIN")
        .await
        .unwrap();
    assert!(connect(&server, "frank", None).await.is_ok());

    // New rules: frank needs his password in clear text, grace is rejected, and only
    // loopback IPv4 is served.
    std::fs::write(
        server.data_dir().join("pg_hba.conf"),
        "host all frank 127.0.0.1/32 password\n\
         host all grace 127.0.0.0/8  reject\n\
         host all all   127.0.0.1/32 trust\n",
    )
    .unwrap();
    let status = std::process::Command::new("kill")
        .args(["-HUP", &server.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match connect(&server, "grace", None).await {
            Err(e) if sqlstate(&e) == "28000" => {
                assert!(
                    message(&e).starts_with(
                        "pg_hba.conf rejects connection for host \"127.0.0.1\", user \"grace\""
                    ),
                    "{}",
                    message(&e)
                );
                break;
            }
            _ => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the rules were not reloaded"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    let e = connect(&server, "frank", Some("wrong")).await.unwrap_err();
    assert_eq!(sqlstate(&e), "28P01");
    let frank = connect(&server, "frank", Some("frank pw"))
        .await
        .expect("frank");
    assert_eq!(current_user(&frank).await.0, "frank");
    let admin = connect(&server, "postgres", None).await.expect("trusted");

    // pg_reload_conf() reads the file as SIGHUP does, and pg_hba_file_rules shows it, the
    // lines it could not read with their error.
    std::fs::write(
        server.data_dir().join("pg_hba.conf"),
        "host all all 127.0.0.1/32 trust\nhost all all example.com trust\n",
    )
    .unwrap();
    let e = frank
        .query_one("SELECT pg_reload_conf()", &[])
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "42501", "only a superuser reloads");
    let reloaded: bool = admin
        .query_one("SELECT pg_reload_conf()", &[])
        .await
        .unwrap()
        .get(0);
    assert!(reloaded);
    let rules: Vec<(i32, Option<String>, Option<String>, Option<String>)> = admin
        .query(
            "SELECT line_number, type, auth_method, error FROM pg_hba_file_rules ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    assert_eq!(rules.len(), 2, "{rules:?}");
    assert_eq!(
        rules[0],
        (1, Some("host".into()), Some("trust".into()), None)
    );
    assert_eq!((rules[1].0, &rules[1].1), (2, &None));
    assert!(
        rules[1]
            .3
            .as_deref()
            .is_some_and(|e| e.contains("host names are not supported")),
        "{rules:?}"
    );
    assert!(
        connect(&server, "frank", None).await.is_ok(),
        "frank is trusted now"
    );
}

#[test]
fn listening_beyond_loopback_needs_rules_that_ask_for_a_password() {
    let dir = std::env::temp_dir().join(format!("shoal-hba-open-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("pg_hba.conf"),
        "local all all trust\nhost all all 0.0.0.0/0 trust\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shoal"))
        .args([
            "serve",
            "--listen",
            "0.0.0.0:0",
            "--unix-socket-dir",
            "",
            "--data-dir",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("pg_hba.conf line 2 lets clients from the network in without a password"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn malformed_sasl_messages_get_a_fatal_error_and_the_server_stays_up() {
    use std::io::{Read, Write};
    let file = password_file("pw");
    let server = ShoalServer::start_with(&["--superuser-password-file", file.to_str().unwrap()]);
    let bad_messages: [&[u8]; 3] = [
        // A data length past the message's end.
        b"SCRAM-SHA-256\0\x7f\xff\xff\xffzz",
        // No data length at all.
        b"SCRAM-SHA-256\0",
        // No mechanism name.
        b"\x01\x02\x03",
    ];
    for bad in bad_messages {
        let mut socket = std::net::TcpStream::connect(("127.0.0.1", server.port())).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        socket.write_all(&startup_message("postgres")).unwrap();
        let mut message = b"p".to_vec();
        message.extend(((bad.len() + 4) as u32).to_be_bytes());
        message.extend_from_slice(bad);
        socket.write_all(&message).unwrap();
        let mut answer = Vec::new();
        let _ = socket.read_to_end(&mut answer);
        let text = String::from_utf8_lossy(&answer);
        assert!(
            text.contains("C08P01") && text.contains("malformed SASLInitialResponse"),
            "{text:?}"
        );
    }
    let mut server = server;
    assert!(server.is_running());
    let _ = std::fs::remove_file(file);
}
