//! A connection's startup: the rule pg_hba.conf picks for it decides the challenge (`auth`);
//! once the client meets it and the role is admitted, the session logs in as the role, takes
//! the startup parameters, and the client gets the server's parameters and ReadyForQuery.

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use futures::sink::{Sink, SinkExt};
use pgwire::api::auth::mechanism::{AuthMechanism, AuthState};
use pgwire::api::auth::{
    finish_authentication, protocol_negotiation, save_startup_parameters_to_metadata,
    ServerParameterProvider, StartupHandler,
};
use pgwire::api::{
    ClientInfo, ConnectionHandle, PgWireConnectionState, PidSecretKeyGenerator,
    RandomPidSecretKeyGenerator,
};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::startup::{Authentication, PasswordMessageFamily};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use shoal_sql::Session;

use super::auth::{self, Challenge};
use super::errors::error_info;
use super::handler::ConnectionHandler;

/// The ParameterStatus messages sent after authentication: the reported settings with the
/// session's values (startup parameters and PGOPTIONS applied).
struct Parameters(std::collections::HashMap<String, String>);

impl ServerParameterProvider for Parameters {
    fn server_parameters<C: ClientInfo>(
        &self,
        _client: &C,
    ) -> Option<std::collections::HashMap<String, String>> {
        Some(self.0.clone())
    }
}

#[async_trait]
impl StartupHandler for ConnectionHandler {
    /// Startup and authentication: the rule pg_hba.conf picks for the connection decides the
    /// challenge (`auth`); once it is met and the role admitted, the session logs in as the
    /// role, takes the startup parameters and the client gets ReadyForQuery.
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match message {
            PgWireFrontendMessage::Startup(ref startup) => {
                protocol_negotiation(client, startup).await?;
                save_startup_parameters_to_metadata(client, startup);
                let (user, database) = startup_names(client);
                if user.is_empty() {
                    return Err(user_error(auth::fatal(
                        "28000",
                        "no PostgreSQL user name specified in startup packet".into(),
                    )));
                }
                // pgwire gives a Unix-socket client port 0 (see `connection::serve_unix`).
                let addr = client.socket_addr();
                let address = (addr.port() != 0).then_some(addr.ip());
                let challenge = self
                    .auth
                    .challenge(address, client.is_secure(), &user, &database)
                    .map_err(user_error)?;
                match challenge {
                    Challenge::Trust => self.log_in(client, &user, false, None).await,
                    Challenge::Scram(mut mechanism) => match mechanism.begin(&*client).await? {
                        AuthState::InProgress(request) => {
                            *self.pending_auth.lock() = Some(PendingAuth::Scram {
                                mechanism,
                                chosen: false,
                            });
                            client.set_state(PgWireConnectionState::AuthenticationInProgress);
                            client
                                .send(PgWireBackendMessage::Authentication(request))
                                .await?;
                            Ok(())
                        }
                        _ => Err(user_error(auth::password_failed(&user))),
                    },
                    Challenge::Certificate => {
                        let name = client
                            .client_certificates()
                            .and_then(|chain| chain.first())
                            .and_then(crate::tls::common_name);
                        match name {
                            None => Err(user_error(auth::fatal(
                                "28000",
                                "connection requires a valid client certificate".into(),
                            ))),
                            Some(name) if name == user => {
                                self.log_in(client, &user, false, None).await
                            }
                            Some(name) => {
                                tracing::info!(
                                    "certificate authentication failed for user \"{user}\": the certificate names \"{name}\""
                                );
                                Err(user_error(auth::fatal(
                                    "28000",
                                    format!(
                                        "certificate authentication failed for user \"{user}\""
                                    ),
                                )))
                            }
                        }
                    }
                    Challenge::CleartextPassword => {
                        *self.pending_auth.lock() = Some(PendingAuth::Cleartext);
                        client.set_state(PgWireConnectionState::AuthenticationInProgress);
                        client
                            .send(PgWireBackendMessage::Authentication(
                                Authentication::CleartextPassword,
                            ))
                            .await?;
                        Ok(())
                    }
                }
            }
            PgWireFrontendMessage::PasswordMessageFamily(message) => {
                let (user, _) = startup_names(client);
                let pending = self.pending_auth.lock().take();
                match pending {
                    Some(PendingAuth::Scram {
                        mut mechanism,
                        chosen,
                    }) => {
                        // pgwire's decoding of the first SASL message trusts its length
                        // field; a malformed one is refused here first.
                        if let PasswordMessageFamily::Raw(body) = &message {
                            if !chosen && !sasl_initial_response_is_well_formed(body) {
                                return Err(user_error(auth::fatal(
                                    "08P01",
                                    "malformed SASLInitialResponse message".into(),
                                )));
                            }
                        }
                        match mechanism.next(&*client, message).await {
                            Ok(AuthState::InProgress(next)) => {
                                *self.pending_auth.lock() = Some(PendingAuth::Scram {
                                    mechanism,
                                    chosen: true,
                                });
                                client
                                    .send(PgWireBackendMessage::Authentication(next))
                                    .await?;
                                Ok(())
                            }
                            Ok(AuthState::Ok { final_message, .. }) => {
                                self.log_in(client, &user, true, final_message).await
                            }
                            Ok(AuthState::Failed(e)) | Err(e) => {
                                tracing::info!(
                                    "password authentication failed for user \"{user}\": {e}"
                                );
                                Err(user_error(auth::password_failed(&user)))
                            }
                        }
                    }
                    Some(PendingAuth::Cleartext) => {
                        let password = message.into_password()?.password;
                        if self.auth.password_matches(&user, &password) {
                            self.log_in(client, &user, true, None).await
                        } else {
                            tracing::info!("password authentication failed for user \"{user}\"");
                            Err(user_error(auth::password_failed(&user)))
                        }
                    }
                    None => Err(user_error(auth::fatal(
                        "08P01",
                        "unexpected password message: no authentication is in progress".into(),
                    ))),
                }
            }
            _ => Ok(()),
        }
    }
}

/// The startup message's user and database (the user's name when it names none).
fn startup_names<C: ClientInfo>(client: &C) -> (String, String) {
    let meta = client.metadata();
    let user = meta.get("user").cloned().unwrap_or_default();
    let database = meta
        .get("database")
        .cloned()
        .unwrap_or_else(|| user.clone());
    (user, database)
}

fn user_error(info: pgwire::error::ErrorInfo) -> PgWireError {
    PgWireError::UserError(Box::new(info))
}

/// A connection's authentication exchange under way.
pub(super) enum PendingAuth {
    /// `chosen`: the client's SASLInitialResponse (its choice of mechanism) has arrived.
    Scram {
        mechanism: Box<dyn AuthMechanism>,
        chosen: bool,
    },
    Cleartext,
}

/// Whether a SASLInitialResponse body is a mechanism name, NUL, and a data length that is -1
/// or at most what follows.
fn sasl_initial_response_is_well_formed(body: &[u8]) -> bool {
    let Some(nul) = body.iter().position(|b| *b == 0) else {
        return false;
    };
    let rest = &body[nul + 1..];
    let Some(length) = rest.get(..4) else {
        return false;
    };
    let length = i32::from_be_bytes([length[0], length[1], length[2], length[3]]);
    length == -1 || (length >= 0 && length as usize <= rest.len() - 4)
}

impl ConnectionHandler {
    /// The client has met its challenge (`with_password`: by a password): the role is
    /// admitted (or the connection refused), the session logs in as it, and the startup ends
    /// with the server's parameters and ReadyForQuery.
    async fn log_in<C>(
        &self,
        client: &mut C,
        user: &str,
        with_password: bool,
        final_message: Option<Authentication>,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let role = self.auth.admit(user, with_password).map_err(user_error)?;
        if let Some(message) = final_message {
            client
                .send(PgWireBackendMessage::Authentication(message))
                .await?;
        }
        let pid = self.session.lock().await.backend_pid();
        let (_, secret) = RandomPidSecretKeyGenerator::default().generate(client);
        client.set_pid_and_secret_key(pid, secret.clone());
        let (handle, guard) = self.connections.register(pid, secret);
        self.connection.set(handle.clone()).ok();
        client.session_extensions().insert(guard);
        let reported = {
            let mut session = self.session.lock().await;
            session.log_in_as(&role.name, role.superuser);
            if let Err(e) = session.apply_startup_parameters(client.metadata()) {
                let mut fatal = error_info(&e);
                fatal.severity = "FATAL".into();
                return Err(PgWireError::UserError(Box::new(fatal)));
            }
            register_backend(&session, client, handle);
            session.settings.reported().into_iter().collect()
        };
        finish_authentication(client, &Parameters(reported)).await
    }
}

/// Tells the session's backend entry who the client is, and how to cancel its statements
/// (pg_cancel_backend takes the path of a CancelRequest).
fn register_backend<C: ClientInfo>(session: &Session, client: &C, handle: Arc<ConnectionHandle>) {
    let meta = client.metadata();
    let user = meta.get("user").map_or("", String::as_str);
    let database = meta.get("database").map_or(user, String::as_str);
    let addr = client.socket_addr();
    // A Unix-socket client has no address (pgwire is given port 0 for it).
    let addr = (addr.port() != 0).then_some(addr);
    let application_name = session.settings.get("application_name").unwrap_or("");
    session
        .backend
        .set_client(user, database, application_name, addr);
    session.backend.set_canceller(move || {
        let handle = handle.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(async move { handle.cancel().await })),
            Err(_) => drop(futures::executor::block_on(handle.cancel())),
        }
    });
}
