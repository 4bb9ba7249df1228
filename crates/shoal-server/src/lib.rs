//! Shoal's network front end: accepts PostgreSQL clients and gives each its own session.
//! Connections are tokio tasks, not threads, so thousands of idle clients cost only memory;
//! they are spread over one single-threaded runtime per core (`connection_threads`).

mod connection_threads;
pub mod pg;

use std::net::SocketAddr;
use std::sync::Arc;

use pgwire::api::cancel::DefaultCancelHandler;
use pgwire::api::ConnectionManager;
use pgwire::api::PgWireServerHandlers;
use shoal_sql::Engine;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use connection_threads::ConnectionThreads;

use pg::handler::ConnectionHandler;

/// Most client connections served at once; further clients wait in the accept queue.
pub const CONNECTIONS_MAX: usize = 4096;

struct Handlers {
    connection: Arc<ConnectionHandler>,
    cancel: Arc<DefaultCancelHandler>,
}

impl PgWireServerHandlers for Handlers {
    fn simple_query_handler(&self) -> Arc<impl pgwire::api::query::SimpleQueryHandler> {
        self.connection.clone()
    }
    fn extended_query_handler(&self) -> Arc<impl pgwire::api::query::ExtendedQueryHandler> {
        self.connection.clone()
    }
    fn startup_handler(&self) -> Arc<impl pgwire::api::auth::StartupHandler> {
        self.connection.clone()
    }
    fn copy_handler(&self) -> Arc<impl pgwire::api::copy::CopyHandler> {
        self.connection.clone()
    }
    fn cancel_handler(&self) -> Arc<impl pgwire::api::cancel::CancelHandler> {
        self.cancel.clone()
    }
}

/// Serves clients on `listener` until the process ends.
pub async fn serve(listener: TcpListener, engine: Arc<Engine>) -> std::io::Result<()> {
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
        let (socket, peer) = listener.accept().await?;
        socket.set_nodelay(true).ok();
        // Moved to the connection's thread, whose own reactor it registers with there.
        let socket = socket.into_std()?;
        let handlers = Handlers {
            connection: ConnectionHandler::new(engine.clone(), connections.clone()),
            cancel: cancel.clone(),
        };
        threads.next().spawn(async move {
            let socket = match TcpStream::from_std(socket) {
                Ok(socket) => socket,
                Err(e) => {
                    tracing::warn!(%peer, "cannot serve connection: {e}");
                    return;
                }
            };
            if let Err(e) = pgwire::tokio::process_socket(socket, None, handlers).await {
                tracing::debug!(%peer, "connection ended with error: {e}");
            }
            drop(permit);
        });
    }
}

pub fn local_addr(listener: &TcpListener) -> Option<SocketAddr> {
    listener.local_addr().ok()
}
