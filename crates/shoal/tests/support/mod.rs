//! Test support shared by the integration tests: a `shoal serve` child process on a free
//! loopback port with its own data directory, stopped and cleaned up when dropped.

#![allow(dead_code)] // Each test binary uses a different part of this module.

pub mod group;
pub mod postgres;
pub mod resp;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SERVER_START_TIMEOUT: Duration = Duration::from_secs(30);
const SERVER_START_ATTEMPTS_MAX: u32 = 3;
const SERVER_STDERR_TAIL_LINES: usize = 30;
/// What the server prints when it cannot bind its port.
const BIND_FAILURE: &str = "cannot listen on";

/// A `shoal serve` child process with its own data directory, killed and cleaned up on drop.
pub struct ShoalServer {
    child: Child,
    pub addr: String,
    data_dir: PathBuf,
    /// Where the server's Unix-domain socket `.s.PGSQL.PORT` is: a directory of its own under
    /// the system's temporary directory (socket paths are limited to ~100 bytes, so not under
    /// the target directory), removed with the server.
    unix_socket_dir: PathBuf,
}

impl ShoalServer {
    /// Starts a server on a free port. The port is found by binding port 0 and releasing it, so
    /// another process can take it in between: a server that exits before accepting connections
    /// is retried on a new port, up to `SERVER_START_ATTEMPTS_MAX` times.
    pub fn start() -> ShoalServer {
        let mut last_failure = String::new();
        for _ in 0..SERVER_START_ATTEMPTS_MAX {
            match ShoalServer::try_start() {
                Ok(server) => return server,
                Err(failure) => last_failure = failure,
            }
        }
        panic!(
            "shoal server did not start after {SERVER_START_ATTEMPTS_MAX} attempts:\n\
             {last_failure}"
        );
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.addr
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("port in address")
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the server process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Starts a server with extra `shoal serve` flags.
    pub fn start_with(args: &[&str]) -> ShoalServer {
        let port = free_port();
        let data_dir = unique_data_dir(port);
        ShoalServer::start_in(data_dir, args).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts a server on a data directory that may hold a database already (restarts),
    /// retrying on a new port when the free port found was taken meanwhile.
    pub fn start_in(data_dir: PathBuf, args: &[&str]) -> Result<ShoalServer, String> {
        let mut failure = String::new();
        for _ in 0..SERVER_START_ATTEMPTS_MAX {
            match ShoalServer::spawn(free_port(), data_dir.clone(), args) {
                Ok(server) => return Ok(server),
                Err(e) if e.contains(BIND_FAILURE) => failure = e,
                Err(e) => return Err(e),
            }
        }
        Err(failure)
    }

    pub fn data_dir(&self) -> &std::path::Path {
        &self.data_dir
    }

    /// The directory of the server's Unix-domain socket (libpq's host for it).
    pub fn unix_socket_dir(&self) -> &std::path::Path {
        &self.unix_socket_dir
    }

    /// Kills the server with SIGKILL (a crash: nothing is flushed or cleaned up) and keeps its
    /// data directory; returns the directory for a restart.
    pub fn crash(mut self) -> PathBuf {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let dir = std::mem::take(&mut self.data_dir);
        let _ = std::fs::remove_dir_all(&self.unix_socket_dir);
        std::mem::forget(self);
        dir
    }

    /// Stops the server with SIGTERM, waits for it to exit, and returns the exit status and
    /// the data directory.
    pub fn terminate(mut self) -> (std::process::ExitStatus, PathBuf) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let status = self.child.wait().expect("wait for shoal");
        let dir = std::mem::take(&mut self.data_dir);
        let _ = std::fs::remove_dir_all(&self.unix_socket_dir);
        std::mem::forget(self);
        (status, dir)
    }

    fn try_start() -> Result<ShoalServer, String> {
        let port = free_port();
        ShoalServer::spawn(port, unique_data_dir(port), &[])
    }

    fn spawn(port: u16, data_dir: PathBuf, args: &[&str]) -> Result<ShoalServer, String> {
        let addr = format!("127.0.0.1:{port}");
        std::fs::create_dir_all(&data_dir).expect("create shoal data dir");
        let stderr_path = data_dir.with_extension("stderr");
        let stderr = std::fs::File::options()
            .create(true)
            .append(true)
            .open(&stderr_path)
            .expect("create shoal stderr file");
        let unix_socket_dir = std::env::temp_dir().join(format!(
            "shoal-sock-{}-{port}-{}",
            std::process::id(),
            nanos()
        ));
        std::fs::create_dir_all(&unix_socket_dir).expect("create the unix socket directory");
        let child = serve_command(&addr, &data_dir, &unix_socket_dir, args, stderr)
            .spawn()
            .expect("spawn shoal binary");
        let mut server = ShoalServer {
            child,
            addr,
            data_dir,
            unix_socket_dir,
        };
        let started = Instant::now();
        // Another test's server may hold the port (free ports are found by binding port 0 and
        // letting go), and a server binds its port before recovery, which may still fail: a
        // connection counts only once this child said it is ready on that address.
        let listening = format!("ready to accept connections on {}", server.addr);
        loop {
            let stderr_text = || std::fs::read_to_string(&stderr_path).unwrap_or_default();
            let socket: SocketAddr = server.addr.parse().expect("socket address");
            if stderr_text().contains(&listening)
                && TcpStream::connect_timeout(&socket, Duration::from_millis(200)).is_ok()
            {
                return Ok(server);
            }
            if let Some(status) = server.child.try_wait().expect("poll shoal process") {
                return Err(format!(
                    "shoal exited with {status}; stderr:\n{}",
                    stderr_text()
                ));
            }
            if started.elapsed() > SERVER_START_TIMEOUT {
                let stderr = stderr_text();
                drop(server);
                panic!(
                    "shoal did not accept connections within {SERVER_START_TIMEOUT:?}; \
                     stderr:\n{stderr}"
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// `shoal serve` on `addr` and `data_dir` with `args`, its Unix socket in `unix_socket_dir`
/// unless `args` name another, and its log (stdout) and stderr both in `output`: the log says
/// when the server listens.
fn serve_command(
    addr: &str,
    data_dir: &std::path::Path,
    unix_socket_dir: &std::path::Path,
    args: &[&str],
    output: std::fs::File,
) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_shoal"));
    command
        .args(["serve", "--listen", addr, "--data-dir"])
        .arg(data_dir);
    if !args.contains(&"--unix-socket-dir") {
        command.arg("--unix-socket-dir").arg(unix_socket_dir);
    }
    command
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(output.try_clone().expect("clone the output file"))
        .stderr(output);
    command
}

/// Runs `shoal serve` on `data_dir` (a free port, its own socket directory) expecting it to
/// exit on its own, as it does when it cannot open the directory; returns its exit status and
/// output. Unlike a `ShoalServer` it leaves the data directory alone, which may belong to a
/// server still running. Panics if it is still running after `SERVER_START_TIMEOUT`.
pub fn serve_until_exit(data_dir: &std::path::Path) -> (std::process::ExitStatus, String) {
    for _ in 1..SERVER_START_ATTEMPTS_MAX {
        let (status, output) = serve_once_until_exit(data_dir);
        // The free port found was taken meanwhile: another try, on another port.
        if !output.contains(BIND_FAILURE) {
            return (status, output);
        }
    }
    serve_once_until_exit(data_dir)
}

fn serve_once_until_exit(data_dir: &std::path::Path) -> (std::process::ExitStatus, String) {
    let port = free_port();
    let scratch = std::env::temp_dir().join(format!(
        "shoal-exit-{}-{port}-{}",
        std::process::id(),
        nanos()
    ));
    std::fs::create_dir_all(&scratch).expect("create the scratch directory");
    let output_path = scratch.join("output");
    let output = std::fs::File::create(&output_path).expect("create the output file");
    let addr = format!("127.0.0.1:{port}");
    let mut child = serve_command(&addr, data_dir, &scratch, &[], output)
        .spawn()
        .expect("spawn shoal binary");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("poll shoal process") {
            break status;
        }
        if started.elapsed() > SERVER_START_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "shoal kept running on {}:\n{}",
                data_dir.display(),
                std::fs::read_to_string(&output_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(&output_path).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&scratch);
    (status, text)
}

impl ShoalServer {
    /// Whether the server is still running, and the end of its stderr, to explain a failed run.
    pub fn post_mortem(&mut self) -> String {
        let status = match self.child.try_wait() {
            Ok(Some(status)) => format!("shoal server exited during the run with {status}"),
            _ => "shoal server still running".to_string(),
        };
        let stderr = std::fs::read_to_string(self.data_dir.with_extension("stderr"));
        let stderr = stderr.unwrap_or_default();
        let lines: Vec<&str> = stderr.lines().collect();
        let tail = &lines[lines.len().saturating_sub(SERVER_STDERR_TAIL_LINES)..];
        format!("{status}; last lines of its stderr:\n{}", tail.join("\n"))
    }
}

impl Drop for ShoalServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A failed test leaves the server's directory and log to look at.
        if std::thread::panicking() {
            eprintln!(
                "shoal's data and log are kept in {}",
                self.data_dir.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.data_dir);
            let _ = std::fs::remove_file(self.data_dir.with_extension("stderr"));
        }
        let _ = std::fs::remove_dir_all(&self.unix_socket_dir);
    }
}

pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener
        .local_addr()
        .expect("ephemeral port address")
        .port()
}

fn nanos() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0)
}

fn unique_data_dir(port: u16) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "shoal-{}-{port}-{}",
        std::process::id(),
        nanos()
    ))
}

/// A tokio-postgres client of `server` (its connection task runs on the current runtime).
pub async fn connect(server: &ShoalServer) -> tokio_postgres::Client {
    connect_with(server, "user=postgres").await
}

/// Connects over TCP with extra libpq-style settings (`user=alice application_name=x`).
#[allow(dead_code)] // not every test binary uses every helper
pub async fn connect_with(server: &ShoalServer, settings: &str) -> tokio_postgres::Client {
    let conn = format!(
        "host=127.0.0.1 port={} dbname=postgres {settings}",
        server.port()
    );
    let (client, connection) = tokio_postgres::connect(&conn, tokio_postgres::NoTls)
        .await
        .expect("connect to shoal");
    tokio::spawn(connection);
    client
}

/// A StartupMessage for `user`, protocol 3.0, for tests that speak the protocol by hand.
#[allow(dead_code)] // not every test binary uses every helper
pub fn startup_message(user: &str) -> Vec<u8> {
    let mut body = 196608u32.to_be_bytes().to_vec();
    for part in ["user", user, "database", "postgres", ""] {
        body.extend_from_slice(part.as_bytes());
        body.push(0);
    }
    let mut message = ((body.len() + 4) as u32).to_be_bytes().to_vec();
    message.extend(body);
    message
}

/// Runs each `;`-separated statement of `script` as a message of its own, so that each commits
/// on its own, as psql runs a script file. (One message holding them all is one implicit
/// transaction, in which Shoal refuses some DDL that it runs alone: table rewrites after
/// writes, conversions between row and column storage.) The statements must not contain `;`.
pub async fn execute_each(client: &tokio_postgres::Client, script: &str) {
    for sql in script.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        client
            .batch_execute(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    }
}

/// A tokio-postgres client of the server at `addr` (`host:port`; user and database `postgres`),
/// Shoal or PostgreSQL; its connection task runs on the current runtime.
pub async fn connect_to(addr: &str) -> tokio_postgres::Client {
    let (host, port) = addr.rsplit_once(':').expect("host:port");
    let conn = format!("host={host} port={port} user=postgres dbname=postgres");
    let (client, connection) = tokio_postgres::connect(&conn, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    tokio::spawn(connection);
    client
}
