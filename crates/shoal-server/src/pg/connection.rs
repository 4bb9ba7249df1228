//! A client's connection loop. It is pgwire's (read a message, hand it to the handlers, report
//! a failure) with one addition: notifications (LISTEN/NOTIFY) reach a client that is idle
//! between transactions without its asking, as PostgreSQL sends them. A client waiting for them
//! (psycopg's `notifies()`, pgx's `WaitForNotification`, JDBC's `getNotifications`) sends
//! nothing meanwhile, so the loop waits for the client's next message or a notification,
//! whichever comes first. Notifications that arrive while a statement runs go out just before
//! its ReadyForQuery (see `handler`).

use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use pgwire::api::cancel::DefaultCancelHandler;
use pgwire::api::{ClientInfo, DefaultClient, PgWireConnectionState};
use pgwire::error::ErrorInfo;
use pgwire::messages::response::{NotificationResponse, TransactionStatus};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use pgwire::tokio::server::{
    negotiate_tls, process_error, process_message, MaybeTls, PgWireMessageServerCodec,
};
use shoal_sql::notify::Inbox;
use shoal_sql::session::Prepared;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, UnixStream};
use tokio_util::codec::Framed;

use super::handler::ConnectionHandler;

type Socket<S> = Framed<S, PgWireMessageServerCodec<Arc<Prepared>>>;

/// Serves a TCP client until it leaves, over TLS when it asks and `tls` is configured (pgwire
/// answers the SSLRequest and runs the handshake).
pub async fn serve_tcp(
    socket: TcpStream,
    tls: Option<pgwire::tokio::TlsAcceptor>,
    connection: Arc<ConnectionHandler>,
    cancel: Arc<DefaultCancelHandler>,
) -> std::io::Result<()> {
    // A client that has not finished its startup, authentication included, by then is
    // dropped without a word (PostgreSQL's authentication_timeout).
    let startup = tokio::time::sleep(connection.auth.timeout());
    tokio::pin!(startup);
    let socket = tokio::select! {
        _ = &mut startup => return Ok(()),
        socket = negotiate_tls(socket, tls) => socket?,
    };
    // None: the client asked for TLS directly while none is configured.
    let Some(mut socket) = socket else {
        return Ok(());
    };
    serve_messages(&mut socket, startup, connection, cancel).await
}

/// Serves a Unix-socket client until it leaves (libpq never asks for TLS there).
pub async fn serve_unix(
    socket: UnixStream,
    connection: Arc<ConnectionHandler>,
    cancel: Arc<DefaultCancelHandler>,
) -> std::io::Result<()> {
    // A client that has not finished its startup, authentication included, by then is
    // dropped without a word (PostgreSQL's authentication_timeout).
    let startup = tokio::time::sleep(connection.auth.timeout());
    tokio::pin!(startup);
    // PostgreSQL shows Unix-socket clients without an address; pgwire wants one.
    let client = DefaultClient::new(std::net::SocketAddr::from(([127, 0, 0, 1], 0)), false);
    let mut socket = Framed::new(
        MaybeTls::Unix(socket),
        PgWireMessageServerCodec::new(client),
    );
    socket.set_state(PgWireConnectionState::AwaitingStartup);
    serve_messages(&mut socket, startup, connection, cancel).await
}

async fn serve_messages<S>(
    socket: &mut Socket<S>,
    mut startup: std::pin::Pin<&mut tokio::time::Sleep>,
    connection: Arc<ConnectionHandler>,
    cancel: Arc<DefaultCancelHandler>,
) -> std::io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static,
{
    let inbox = connection.notification_inbox();
    let backend = connection.backend();
    // Whether an extended-protocol exchange is open (messages after its last Sync): the client
    // is then not waiting between transactions, whatever the transaction status says.
    let mut exchange_open = false;
    loop {
        let starting = matches!(
            socket.state(),
            PgWireConnectionState::AwaitingStartup
                | PgWireConnectionState::AuthenticationInProgress
        );
        let idle = !starting
            && !exchange_open
            && matches!(socket.state(), PgWireConnectionState::ReadyForQuery)
            && matches!(socket.transaction_status(), TransactionStatus::Idle);
        // A client that leaves its session idle too long is disconnected
        // (idle_in_transaction_session_timeout, idle_session_timeout).
        let waiting = !starting
            && !exchange_open
            && matches!(socket.state(), PgWireConnectionState::ReadyForQuery);
        let idle_limit = match waiting {
            true => connection.idle_limit(socket.transaction_status()).await,
            false => None,
        };
        let idle_timer = async {
            match idle_limit {
                Some((limit, _)) => tokio::time::sleep(limit).await,
                None => std::future::pending().await,
            }
        };
        // What arrived while the last message was handled, or whose wake-up a message took
        // the place of (the select below drops the losing future, and its wake-up with it).
        if idle && !inbox.is_empty() {
            send_notifications(socket, &inbox).await?;
        }
        let msg = tokio::select! {
            _ = backend.terminated() => {
                send_terminated(socket).await?;
                break;
            }
            _ = &mut startup, if starting => None,
            _ = idle_timer => {
                backend.set_end(shoal_sql::database_stats::SessionEnd::Fatal);
                if let Some((_, fatal)) = idle_limit {
                    socket.send(PgWireBackendMessage::ErrorResponse(fatal.into())).await?;
                }
                break;
            }
            msg = socket.next() => msg,
            _ = inbox.arrival(), if idle => {
                send_notifications(socket, &inbox).await?;
                continue;
            }
        };
        let Some(Ok(msg)) = msg else {
            break;
        };
        // A Terminate means the client is leaving: close, as PostgreSQL does (a client that
        // waits for the server to hang up would otherwise wait forever).
        if matches!(msg, PgWireFrontendMessage::Terminate(_)) {
            backend.set_end(shoal_sql::database_stats::SessionEnd::Normal);
            break;
        }
        if msg.is_extended_query() {
            exchange_open = !matches!(msg, PgWireFrontendMessage::Sync(_));
        }
        let in_extended = match socket.state() {
            PgWireConnectionState::CopyInProgress(extended) => extended,
            _ => msg.is_extended_query(),
        };
        let is_cancel_request = matches!(msg, PgWireFrontendMessage::CancelRequest(_));
        let ends_exchange = matches!(
            msg,
            PgWireFrontendMessage::Query(_) | PgWireFrontendMessage::Sync(_)
        );
        if matches!(msg, PgWireFrontendMessage::Execute(_)) {
            // A Sync message is 'S' and its length, 4, with no body.
            let sync_follows = socket.read_buffer().starts_with(&[b'S', 0, 0, 0, 4]);
            connection
                .sync_follows
                .store(sync_follows, std::sync::atomic::Ordering::Relaxed);
        }
        if let Err(e) = process_message(
            msg,
            socket,
            connection.clone(),
            connection.clone(),
            connection.clone(),
            connection.clone(),
            cancel.clone(),
        )
        .await
        {
            // A FATAL error ends the session, as in PostgreSQL.
            let fatal = e.is_fatal();
            if fatal {
                backend.set_end(shoal_sql::database_stats::SessionEnd::Fatal);
            }
            process_error(socket, e, in_extended).await?;
            if fatal {
                break;
            }
        }
        if is_cancel_request {
            break;
        }
        if backend.is_terminated() {
            // Its statement was canceled (and failed with the FATAL error, unless it had
            // finished): now the connection goes.
            if !backend.termination_reported() {
                send_terminated(socket).await?;
            }
            break;
        }
        if ends_exchange {
            backend.ready_for_query(match socket.transaction_status() {
                TransactionStatus::Idle => b'I',
                TransactionStatus::Transaction => b'T',
                TransactionStatus::Error => b'E',
            });
        }
    }
    Ok(())
}

impl ConnectionHandler {
    /// How long the session may stay idle now, in or outside a transaction block, and the
    /// FATAL error that ends it then; None: no limit.
    async fn idle_limit(&self, status: TransactionStatus) -> Option<(Duration, ErrorInfo)> {
        let (in_transaction_ms, session_ms) = self.session.lock().await.settings.idle_timeouts_ms();
        let (ms, code, message) = match status {
            TransactionStatus::Idle => (
                session_ms,
                "57P05",
                "terminating connection due to idle-session timeout",
            ),
            TransactionStatus::Transaction | TransactionStatus::Error => (
                in_transaction_ms,
                "25P03",
                "terminating connection due to idle-in-transaction timeout",
            ),
        };
        (ms > 0).then(|| {
            let fatal = ErrorInfo::new("FATAL".into(), code.into(), message.into());
            (Duration::from_millis(ms), fatal)
        })
    }
}

/// The FATAL error PostgreSQL sends a client whose backend pg_terminate_backend ended.
async fn send_terminated<S>(socket: &mut Socket<S>) -> std::io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static,
{
    let info = ErrorInfo::new(
        "FATAL".to_owned(),
        "57P01".to_owned(),
        "terminating connection due to administrator command".to_owned(),
    );
    socket
        .send(PgWireBackendMessage::ErrorResponse(info.into()))
        .await
}

/// Writes what has arrived in `inbox` as NotificationResponse messages.
pub(crate) async fn send_notifications<C>(client: &mut C, inbox: &Inbox) -> std::io::Result<()>
where
    C: futures::Sink<PgWireBackendMessage, Error = std::io::Error> + Unpin,
{
    for n in inbox.take_all() {
        client
            .feed(PgWireBackendMessage::NotificationResponse(
                NotificationResponse::new(n.sender_pid, n.channel, n.payload),
            ))
            .await?;
    }
    client.flush().await
}
