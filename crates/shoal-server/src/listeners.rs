//! Where clients connect: a loopback TCP port, and a Unix-domain socket in a directory, as
//! PostgreSQL does (`listen_addresses` and `unix_socket_directories`). psql, pgbench and libpq
//! connect to the Unix socket when no host is given (`psql -h /tmp -p 5432`, or `PGHOST=/tmp`);
//! on one machine it is also the cheaper transport: no TCP stack, no loopback softirq per
//! message (bench/pgbench/README.md, "Unix-domain sockets").
//!
//! The socket file is `DIR/.s.PGSQL.PORT`, the name libpq builds from the host directory and
//! the port. Its mode is 0777, PostgreSQL's default `unix_socket_permissions`: any local user
//! may connect, exactly as any local user may connect to the loopback port; Shoal has no
//! authentication yet, so neither is reachable from another machine.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use tokio::net::{TcpListener, UnixListener};

/// The sockets a server accepts clients on.
pub struct Listeners {
    pub tcp: TcpListener,
    pub unix: Option<UnixSocket>,
    /// Redis clients (`--redis-listen`), with the state their connections share.
    pub redis: Option<RedisListener>,
}

/// The port Redis clients connect to.
pub struct RedisListener {
    pub tcp: TcpListener,
    pub server: std::sync::Arc<shoal_resp::commands::Server>,
}

/// A listening Unix-domain socket; the socket file is removed when this is dropped.
pub struct UnixSocket {
    pub(crate) listener: UnixListener,
    path: PathBuf,
}

impl UnixSocket {
    /// Listens on `dir/.s.PGSQL.port`. A socket file left by a server that crashed (nothing
    /// accepts on it) is replaced; one that a running server still accepts on is an error, so
    /// two servers never steal each other's clients.
    pub fn bind(dir: &Path, port: u16) -> io::Result<UnixSocket> {
        let path = dir.join(format!(".s.PGSQL.{port}"));
        if path.exists() {
            match std::os::unix::net::UnixStream::connect(&path) {
                Ok(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::AddrInUse,
                        format!("another server is listening on {}", path.display()),
                    ))
                }
                // Refused (or not a socket at all): left behind by a server that is gone.
                Err(_) => std::fs::remove_file(&path)?,
            }
        }
        let listener = UnixListener::bind(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777))?;
        Ok(UnixSocket { listener, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for UnixSocket {
    fn drop(&mut self) {
        // A client connecting after this gets "no such file" rather than "connection refused";
        // both say the server is gone, and the directory is left as it was found.
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("shoal-unix-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[tokio::test]
    async fn a_live_socket_is_not_taken_over_and_a_dead_one_is_replaced() {
        let dir = temp_dir("takeover");
        let first = UnixSocket::bind(&dir, 5999).unwrap();
        let path = first.path().to_path_buf();
        assert!(path.ends_with(".s.PGSQL.5999"));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o777);

        let second = UnixSocket::bind(&dir, 5999);
        assert_eq!(
            second.err().map(|e| e.kind()),
            Some(io::ErrorKind::AddrInUse)
        );

        drop(first);
        assert!(
            !path.exists(),
            "dropping the listener removes its socket file"
        );

        // A crash leaves the file behind with nobody accepting on it.
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        let third = UnixSocket::bind(&dir, 5999).expect("a dead socket file is replaced");
        assert!(std::os::unix::net::UnixStream::connect(&path).is_ok());
        drop(third);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
