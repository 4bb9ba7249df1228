//! TLS as libpq uses it, with a certificate authority made for the test (openssl's command
//! line): sslmode=require, verify-ca and verify-full against the server's certificate;
//! SCRAM-SHA-256-PLUS channel binding over TLS (channel_binding=require) and plain SCRAM
//! without TLS; `hostssl` and `hostnossl` lines; the `cert` method with client certificates
//! signed by the CA (the certificate's common name must be the user's name). Needs `psql`
//! and `openssl` (`.ci/run` installs them).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::ShoalServer;

/// A test CA, a server certificate for localhost and 127.0.0.1, and client certificates.
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn make() -> Pki {
        let dir = std::env::temp_dir().join(format!(
            "shoal-tls-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let pki = Pki { dir };
        pki.openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "2",
            "-subj",
            "/CN=Shoal test CA",
        ]);
        // A second CA that signed nothing the server uses: verify-ca against it must fail.
        pki.openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "other-ca.key",
            "-out",
            "other-ca.crt",
            "-days",
            "2",
            "-subj",
            "/CN=Another CA",
        ]);
        pki.signed(
            "server",
            "localhost",
            Some("subjectAltName=DNS:localhost,IP:127.0.0.1"),
        );
        pki.signed("alice", "alice", None);
        pki.signed("mallory", "mallory", None);
        pki
    }

    /// A key and a certificate for `cn`, signed by the test CA.
    fn signed(&self, name: &str, cn: &str, extension: Option<&str>) {
        let key = format!("{name}.key");
        let csr = format!("{name}.csr");
        let crt = format!("{name}.crt");
        self.openssl(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &csr,
            "-subj",
            &format!("/CN={cn}"),
        ]);
        let ext_file = self.dir.join(format!("{name}.ext"));
        std::fs::write(&ext_file, extension.unwrap_or("basicConstraints=CA:FALSE")).unwrap();
        self.openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &crt,
            "-days",
            "2",
            "-extfile",
            ext_file.to_str().unwrap(),
        ]);
        // libpq refuses a client key that others may read.
        Command::new("chmod")
            .args(["600", self.path(&key).to_str().unwrap()])
            .status()
            .unwrap();
    }

    fn openssl(&self, args: &[&str]) {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(&self.dir)
            .output()
            .expect("run openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }
}

/// Runs `query` through psql with a libpq connection string; (success, stdout, stderr).
fn psql(conninfo: &str, query: &str) -> (bool, String, String) {
    let out = Command::new("psql")
        .args(["-X", "-A", "-t", "-d", conninfo, "-c", query])
        .env("PGCONNECT_TIMEOUT", "10")
        .output()
        .expect("run psql (install postgresql-client-15)");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn conninfo(server: &ShoalServer, host: &str, user: &str, extra: &str) -> String {
    format!(
        "host={host} port={} dbname=postgres user={user} {extra}",
        server.port()
    )
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn libpq_connects_over_tls_with_channel_binding_and_client_certificates() {
    let pki = Pki::make();
    let password_file = pki.path("password");
    std::fs::write(&password_file, "tls secret\n").unwrap();
    let hba = pki.path("pg_hba.conf");
    std::fs::write(
        &hba,
        "local     all all                  trust\n\
         hostssl   all alice   127.0.0.1/32 cert\n\
         hostnossl all bob     127.0.0.1/32 scram-sha-256\n\
         hostssl   all all     127.0.0.1/32 scram-sha-256\n",
    )
    .unwrap();
    let server = ShoalServer::start_with(&[
        "--tls-cert",
        path_str(&pki.path("server.crt")),
        "--tls-key",
        path_str(&pki.path("server.key")),
        "--tls-ca",
        path_str(&pki.path("ca.crt")),
        "--superuser-password-file",
        path_str(&password_file),
        "--hba-file",
        path_str(&hba),
    ]);
    let ca = path_str(&pki.path("ca.crt")).to_string();
    let password = "password='tls secret'";

    // sslmode=require, verify-ca and verify-full (by name and by address).
    for (host, mode) in [
        ("127.0.0.1", "sslmode=require".to_string()),
        ("127.0.0.1", format!("sslmode=verify-ca sslrootcert={ca}")),
        ("localhost", format!("sslmode=verify-full sslrootcert={ca}")),
        ("127.0.0.1", format!("sslmode=verify-full sslrootcert={ca}")),
    ] {
        let (ok, out, err) = psql(
            &conninfo(&server, host, "postgres", &format!("{mode} {password}")),
            "SHOW ssl",
        );
        assert!(ok, "{mode} to {host}: {err}");
        assert_eq!(out, "on");
    }
    // A CA that did not sign the server's certificate: libpq refuses the server.
    let other = path_str(&pki.path("other-ca.crt")).to_string();
    let (ok, _, err) = psql(
        &conninfo(
            &server,
            "127.0.0.1",
            "postgres",
            &format!("sslmode=verify-ca sslrootcert={other} {password}"),
        ),
        "SELECT 1",
    );
    assert!(!ok && err.contains("certificate verify failed"), "{err}");

    // SCRAM-SHA-256-PLUS: channel binding to the server's certificate.
    let (ok, out, err) = psql(
        &conninfo(
            &server,
            "127.0.0.1",
            "postgres",
            &format!("sslmode=require channel_binding=require {password}"),
        ),
        "SELECT current_user",
    );
    assert!(ok, "channel binding: {err}");
    assert_eq!(out, "postgres");

    // The hostssl lines are not reached without TLS: no rule matches.
    let (ok, _, err) = psql(
        &conninfo(
            &server,
            "127.0.0.1",
            "postgres",
            &format!("sslmode=disable {password}"),
        ),
        "SELECT 1",
    );
    assert!(!ok, "a hostssl line served a client without TLS");
    assert!(
        err.contains("no pg_hba.conf entry for host \"127.0.0.1\", user \"postgres\", database \"postgres\", no encryption"),
        "{err}"
    );

    // bob's hostnossl line: plain SCRAM without TLS (never -PLUS there, so libpq's
    // channel_binding=require refuses to go on).
    let setup = format!(
        "host={} port={} dbname=postgres user=postgres",
        server.unix_socket_dir().display(),
        server.port()
    );
    let (ok, _, err) = psql(
        &setup,
        "CREATE ROLE bob LOGIN PASSWORD 'bob pw'; CREATE ROLE alice LOGIN; CREATE ROLE mallory LOGIN",
    );
    assert!(ok, "{err}");
    let (ok, out, err) = psql(
        &conninfo(
            &server,
            "127.0.0.1",
            "bob",
            "sslmode=disable password='bob pw'",
        ),
        "SELECT current_user || ' ' || current_setting('ssl')",
    );
    assert!(ok, "bob without TLS: {err}");
    assert_eq!(out, "bob on");
    let (ok, _, err) = psql(
        &conninfo(
            &server,
            "127.0.0.1",
            "bob",
            "sslmode=disable channel_binding=require password='bob pw'",
        ),
        "SELECT 1",
    );
    assert!(!ok && err.contains("channel binding"), "{err}");

    // The cert method: alice's certificate logs her in without a password ...
    let client = |name: &str| {
        format!(
            "sslmode=verify-full sslrootcert={ca} sslcert={} sslkey={}",
            path_str(&pki.path(&format!("{name}.crt"))),
            path_str(&pki.path(&format!("{name}.key")))
        )
    };
    let (ok, out, err) = psql(
        &conninfo(&server, "localhost", "alice", &client("alice")),
        "SELECT current_user",
    );
    assert!(ok, "alice by certificate: {err}");
    assert_eq!(out, "alice");
    // ... another name's certificate does not, and neither does none.
    let (ok, _, err) = psql(
        &conninfo(&server, "localhost", "alice", &client("mallory")),
        "SELECT 1",
    );
    assert!(
        !ok && err.contains("certificate authentication failed for user \"alice\""),
        "{err}"
    );
    let (ok, _, err) = psql(
        &conninfo(
            &server,
            "localhost",
            "alice",
            &format!("sslmode=verify-full sslrootcert={ca}"),
        ),
        "SELECT 1",
    );
    assert!(
        !ok && err.contains("connection requires a valid client certificate"),
        "{err}"
    );
}

#[test]
fn a_server_without_tls_refuses_sslmode_require_and_serves_sslmode_prefer() {
    let server = ShoalServer::start();
    let (ok, _, err) = psql(
        &conninfo(&server, "127.0.0.1", "postgres", "sslmode=require"),
        "SELECT 1",
    );
    assert!(!ok && err.contains("server does not support SSL"), "{err}");
    let (ok, out, err) = psql(
        &conninfo(&server, "127.0.0.1", "postgres", "sslmode=prefer"),
        "SHOW ssl",
    );
    assert!(ok, "{err}");
    assert_eq!(out, "off");
}

#[test]
fn a_bad_certificate_file_stops_the_start_with_its_name() {
    let dir = std::env::temp_dir().join(format!("shoal-badtls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cert = dir.join("server.crt");
    std::fs::write(&cert, "not a certificate\n").unwrap();
    let key = dir.join("server.key");
    std::fs::write(&key, "not a key\n").unwrap();
    let e = ShoalServer::start_in(
        dir.join("data"),
        &["--tls-cert", path_str(&cert), "--tls-key", path_str(&key)],
    )
    .err()
    .expect("a server with a broken certificate must not start");
    assert!(e.contains("server.crt"), "{e}");
}
