//! Shoal's network front end: accepts PostgreSQL clients and gives each its own session, and
//! Redis clients (`--redis-listen`), whose connections `shoal_resp` serves.
//! Connections are tokio tasks, not threads, so thousands of idle clients cost only memory;
//! they are spread over one single-threaded runtime per core (`connection_threads`).

mod connection_threads;
mod listeners;
pub mod metrics_http;
pub mod pg;
mod tls;

use std::net::SocketAddr;
use std::sync::Arc;

use pgwire::api::cancel::DefaultCancelHandler;
use pgwire::api::ConnectionManager;
use shoal_sql::Engine;
use tokio::net::{TcpStream, UnixStream};
use tokio::sync::Semaphore;

use connection_threads::ConnectionThreads;
pub use listeners::{Listeners, RedisListener, UnixSocket};
pub use tls::{Tls, TlsFiles};

use pg::handler::ConnectionHandler;

/// Most client connections served at once; further clients wait in the accept queue.
pub const CONNECTIONS_MAX: usize = 4096;

/// How long to wait after a failed accept (say, out of file descriptors) before the next.
const ACCEPT_RETRY_DELAY: std::time::Duration = std::time::Duration::from_millis(100);

/// One client's protocol handlers.
struct Handlers {
    connection: Arc<ConnectionHandler>,
    cancel: Arc<DefaultCancelHandler>,
    tls: Option<pgwire::tokio::TlsAcceptor>,
}

/// A client socket taken off a listener, in the std form that moves between runtimes.
enum Accepted {
    Tcp(std::net::TcpStream, SocketAddr),
    Unix(std::os::unix::net::UnixStream),
    /// A Redis client.
    Redis(
        std::net::TcpStream,
        SocketAddr,
        Arc<shoal_resp::commands::Server>,
    ),
}

impl Accepted {
    /// What the server's log calls this client.
    fn peer(&self) -> String {
        match self {
            Accepted::Tcp(_, peer) | Accepted::Redis(_, peer, _) => peer.to_string(),
            Accepted::Unix(_) => "[local]".to_string(),
        }
    }

    /// Serves the client's session to its end, on the runtime of the calling thread.
    async fn serve(self, handlers: Handlers) -> std::io::Result<()> {
        match self {
            Accepted::Tcp(socket, _) => {
                let socket = TcpStream::from_std(socket)?;
                pg::connection::serve_tcp(
                    socket,
                    handlers.tls,
                    handlers.connection,
                    handlers.cancel,
                )
                .await
            }
            Accepted::Unix(socket) => {
                let socket = UnixStream::from_std(socket)?;
                pg::connection::serve_unix(socket, handlers.connection, handlers.cancel).await
            }
            Accepted::Redis(socket, peer, server) => {
                let socket = TcpStream::from_std(socket)?;
                shoal_resp::connection::serve(socket, server, peer.to_string()).await
            }
        }
    }
}

async fn accept(listeners: &Listeners) -> std::io::Result<Accepted> {
    let tcp = async {
        let (socket, peer) = listeners.tcp.accept().await?;
        socket.set_nodelay(true).ok();
        Ok(Accepted::Tcp(socket.into_std()?, peer))
    };
    let unix = async {
        match &listeners.unix {
            Some(unix) => Ok(Accepted::Unix(unix.listener.accept().await?.0.into_std()?)),
            None => std::future::pending().await,
        }
    };
    let redis = async {
        match &listeners.redis {
            Some(redis) => {
                let (socket, peer) = redis.tcp.accept().await?;
                socket.set_nodelay(true).ok();
                Ok(Accepted::Redis(
                    socket.into_std()?,
                    peer,
                    redis.server.clone(),
                ))
            }
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        accepted = tcp => accepted,
        accepted = unix => accepted,
        accepted = redis => accepted,
    }
}

/// Serves clients on `listeners` until the process ends; over TLS for clients that ask, when
/// `tls` is given.
pub async fn serve(
    listeners: Listeners,
    engine: Arc<Engine>,
    auth: Arc<pg::auth::Authenticator>,
    tls: Option<Tls>,
) -> std::io::Result<()> {
    let acceptor = tls.map(|t| t.acceptor);
    let connections = Arc::new(ConnectionManager::new());
    let cancel = Arc::new(DefaultCancelHandler::new(connections.clone()));
    let slots = Arc::new(Semaphore::new(CONNECTIONS_MAX));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = ConnectionThreads::start(cores)?;
    loop {
        let permit = slots
            .clone()
            .acquire_owned()
            .await
            .expect("semaphore is never closed");
        // The socket moves to the connection's thread as a std socket and registers with that
        // thread's own reactor there.
        let accepted = match accept(&listeners).await {
            Ok(accepted) => accepted,
            // Out of file descriptors, or a client that hung up while queued: the clients
            // already connected are unaffected, so keep serving them and try again shortly
            // (PostgreSQL's postmaster logs these and goes on too).
            Err(e) => {
                tracing::warn!("cannot accept a connection: {e}");
                tokio::time::sleep(ACCEPT_RETRY_DELAY).await;
                continue;
            }
        };
        let handlers = Handlers {
            connection: ConnectionHandler::new(engine.clone(), connections.clone(), auth.clone()),
            cancel: cancel.clone(),
            tls: acceptor.clone(),
        };
        threads.next().spawn(async move {
            let peer = accepted.peer();
            if let Err(e) = accepted.serve(handlers).await {
                tracing::debug!(%peer, "connection ended with error: {e}");
            }
            drop(permit);
        });
    }
}
