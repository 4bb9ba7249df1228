//! Three `shoal serve` processes on loopback that form a replication group, for the tests
//! of replication: start, kill, freeze, restart, and find the primary.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio_postgres::{Client, NoTls};

use super::{free_port, ShoalServer};

/// How long the group may take to have a primary again.
pub const ELECTION_TIMEOUT: Duration = Duration::from_secs(20);

/// One group at a time: three servers and their clients per test already fill a small
/// machine, and a starved node misses heartbeats and calls an election the test did not ask for.
pub static ONE_GROUP_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Three nodes' flags and data directories; a node that is down has `None`.
pub struct Group {
    pub args: Vec<Vec<String>>,
    pub dirs: Vec<PathBuf>,
    pub nodes: Vec<Option<ShoalServer>>,
    /// Each node's `--metrics-listen` port (its /primary and /replica health checks).
    pub metrics_ports: Vec<u16>,
    /// Nodes stopped with SIGSTOP: connecting to them would hang.
    pub frozen: Vec<bool>,
}

impl Group {
    pub fn start() -> Group {
        Group::start_with(&[])
    }

    /// Three nodes, each with `extra` flags.
    pub fn start_with(extra: &[&str]) -> Group {
        let extra: Vec<String> = extra.iter().map(|a| a.to_string()).collect();
        Group::start_each(|_| extra.clone())
    }

    /// Three nodes, node `n` (from 0) with the flags `extra(n)`.
    pub fn start_each(extra: impl Fn(usize) -> Vec<String>) -> Group {
        let peers: Vec<String> = (1..=3)
            .map(|id| format!("{id}=127.0.0.1:{}", free_port()))
            .collect();
        let peers = peers.join(",");
        let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "shoal-group-{}-{}",
            std::process::id(),
            free_port()
        ));
        let mut group = Group {
            args: Vec::new(),
            dirs: Vec::new(),
            nodes: Vec::new(),
            metrics_ports: Vec::new(),
            frozen: vec![false; 3],
        };
        for id in 1..=3 {
            let metrics_port = free_port();
            group.args.push(vec![
                "--node-id".into(),
                id.to_string(),
                "--peers".into(),
                peers.clone(),
                "--metrics-listen".into(),
                format!("127.0.0.1:{metrics_port}"),
            ]);
            group.args[id - 1].extend(extra(id - 1));
            group.metrics_ports.push(metrics_port);
            group.dirs.push(root.join(format!("node{id}")));
            group.nodes.push(None);
        }
        for n in 0..3 {
            group.restart(n);
        }
        group
    }

    /// The primary, once the group has settled on one: the same node twice, half a second
    /// apart (a group starting for the first time may elect twice).
    pub async fn settled_primary(&self) -> (usize, Client) {
        loop {
            let (first, _) = self.primary().await;
            tokio::time::sleep(Duration::from_millis(500)).await;
            let (again, client) = self.primary().await;
            if again == first {
                return (again, client);
            }
        }
    }

    pub fn restart(&mut self, n: usize) {
        let args: Vec<&str> = self.args[n].iter().map(String::as_str).collect();
        let server = ShoalServer::start_in(self.dirs[n].clone(), &args)
            .unwrap_or_else(|e| panic!("node {} did not start: {e}", n + 1));
        self.nodes[n] = Some(server);
    }

    pub fn kill(&mut self, n: usize) {
        let server = self.nodes[n].take().expect("running");
        server.crash();
    }

    /// SIGSTOP (`freeze`) or SIGCONT: a node that hangs, then goes on.
    pub fn signal(&mut self, n: usize, freeze: bool) {
        let pid = self.nodes[n].as_ref().expect("running").pid();
        let signal = if freeze { "-STOP" } else { "-CONT" };
        let status = std::process::Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
        self.frozen[n] = freeze;
    }

    pub fn port(&self, n: usize) -> u16 {
        self.nodes[n].as_ref().expect("running").port()
    }

    /// The node that is the primary: the one running node not in recovery.
    pub async fn primary(&self) -> (usize, Client) {
        let deadline = Instant::now() + ELECTION_TIMEOUT;
        loop {
            for (n, node) in self.nodes.iter().enumerate() {
                let Some(server) = node else { continue };
                if self.frozen[n] {
                    continue;
                }
                let Ok(c) = try_connect(server).await else {
                    continue;
                };
                let in_recovery = c.query_one("SELECT pg_is_in_recovery()", &[]).await;
                if let Ok(row) = in_recovery {
                    if !row.get::<_, bool>(0) {
                        return (n, c);
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "no primary within {ELECTION_TIMEOUT:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        for n in 0..self.nodes.len() {
            if self.frozen[n] {
                self.signal(n, false);
            }
        }
        self.nodes.clear();
        if let Some(root) = self.dirs.first().and_then(|d| d.parent()) {
            // A failed test leaves the nodes' directories and logs to look at.
            if std::thread::panicking() {
                eprintln!("the group's directories are kept in {}", root.display());
            } else {
                let _ = std::fs::remove_dir_all(root);
            }
        }
    }
}

pub async fn try_connect(server: &ShoalServer) -> Result<Client, tokio_postgres::Error> {
    let conn = format!(
        "host=127.0.0.1 port={} user=postgres dbname=postgres connect_timeout=2",
        server.port()
    );
    let (client, connection) = tokio_postgres::connect(&conn, NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// Polls `query` (one bigint) on `client` until it gives `expected`.
pub async fn wait_for_value(client: &Client, query: &str, expected: i64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got: Result<Option<i64>, String> = match client.query_one(query, &[]).await {
            Ok(row) => Ok(row.get(0)),
            Err(e) => Err(format!("{e:?}")),
        };
        if got == Ok(Some(expected)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{query} gave {got:?}, expected {expected}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn sqlstate(e: &tokio_postgres::Error) -> &str {
    e.code().map_or("", |c| c.code())
}

/// The status code of `GET path` on a node's metrics address.
pub fn http_status(port: u16, path: &str) -> u16 {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("metrics address");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("HTTP answer: {answer}"))
}

/// Whether node `n` answers as a standby, polling through a restart; panics after 30 s.
pub async fn wait_standby(group: &Group, n: usize) -> Client {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(c) = try_connect(group.nodes[n].as_ref().unwrap()).await {
            if let Ok(row) = c.query_one("SELECT pg_is_in_recovery()", &[]).await {
                if row.get::<_, bool>(0) {
                    return c;
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "node {} did not come back as a standby",
            n + 1
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What node `n` printed to its standard error (the server log).
pub fn server_log(group: &Group, n: usize) -> String {
    std::fs::read_to_string(group.dirs[n].with_extension("stderr")).unwrap_or_default()
}

/// `count(*)` and `sum(v)` of table `t` as text, to compare two nodes.
pub async fn table_digest(client: &Client, table: &str) -> String {
    let row = client
        .query_one(
            &format!("SELECT count(*)::text || '/' || coalesce(sum(v), 0)::text FROM {table}"),
            &[],
        )
        .await
        .unwrap_or_else(|e| panic!("digest of {table}: {e}"));
    row.get(0)
}

/// Polls until node `n` (a standby) has `expected` for each of `tables`.
pub async fn wait_digests(group: &Group, n: usize, tables: &[(&str, String)]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(c) = try_connect(group.nodes[n].as_ref().unwrap()).await {
            let mut all = true;
            for (table, expected) in tables {
                let got = c
                    .query_one(
                        &format!(
                            "SELECT count(*)::text || '/' || coalesce(sum(v), 0)::text FROM {table}"
                        ),
                        &[],
                    )
                    .await
                    .map(|r| r.get::<_, String>(0));
                all &= got.as_ref().ok() == Some(expected);
            }
            if all {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "node {} did not catch up with {tables:?}",
            n + 1
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
