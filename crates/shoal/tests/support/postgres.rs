//! A real PostgreSQL 15 for tests that compare Shoal's answers with PostgreSQL's: a throwaway
//! cluster (initdb) in a temporary directory on a free loopback port, stopped and removed when
//! dropped. CI installs PostgreSQL 15 (`.ci/run`); where its binaries are missing, `start`
//! returns None and the comparison is skipped with a note, unless `SHOAL_REQUIRE_POSTGRES` is
//! set (as CI sets it), which makes a missing PostgreSQL a failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const PG_BIN: &str = "/usr/lib/postgresql/15/bin";
/// initdb and postgres refuse to run as root; as root they run as this user, which Debian's
/// postgresql package creates.
const PG_OS_USER: &str = "postgres";

pub struct Postgres {
    pub addr: String,
    dir: PathBuf,
}

impl Postgres {
    /// Starts a fresh cluster (user `postgres`, trust authentication on loopback), or returns
    /// None when PostgreSQL 15 is not installed and not required.
    pub fn start() -> Option<Postgres> {
        if !Path::new(PG_BIN).join("postgres").exists() {
            assert!(
                std::env::var_os("SHOAL_REQUIRE_POSTGRES").is_none(),
                "PostgreSQL 15 is required (SHOAL_REQUIRE_POSTGRES) but {PG_BIN} has none"
            );
            println!("PostgreSQL 15 not installed in {PG_BIN}: comparison skipped");
            return None;
        }
        let port = super::free_port();
        let dir = std::env::temp_dir().join(format!(
            "shoal-pg-{}-{port}-{}",
            std::process::id(),
            super::nanos()
        ));
        std::fs::create_dir_all(&dir).expect("create the PostgreSQL directory");
        let data = dir.join("data");
        if is_root() {
            run(Command::new("chown").arg(PG_OS_USER).arg(&dir), "chown");
        }
        run(
            as_pg_user(PG_BIN, "initdb")
                .arg("-D")
                .arg(&data)
                .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
                .args(["--locale=C.UTF-8"]),
            "initdb",
        );
        let settings = format!(
            "port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
             fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n\
             max_connections = 50\nshared_buffers = '64MB'\n\
             shared_preload_libraries = 'pg_stat_statements'\n",
            dir.display()
        );
        let conf = data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf).expect("read postgresql.conf");
        text.push_str(&settings);
        std::fs::write(&conf, text).expect("write postgresql.conf");
        run(
            as_pg_user(PG_BIN, "pg_ctl")
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(dir.join("log"))
                .args(["-w", "start"]),
            "pg_ctl start",
        );
        Some(Postgres {
            addr: format!("127.0.0.1:{port}"),
            dir,
        })
    }

    pub fn port(&self) -> u16 {
        self.addr.rsplit(':').next().unwrap().parse().unwrap()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = as_pg_user(PG_BIN, "pg_ctl")
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-m", "immediate", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

fn as_pg_user(bin: &str, program: &str) -> Command {
    let path = Path::new(bin).join(program);
    if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", PG_OS_USER, "--"]).arg(path);
        command
    } else {
        Command::new(path)
    }
}

fn run(command: &mut Command, what: &str) {
    let output = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
