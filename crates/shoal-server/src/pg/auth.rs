//! Client authentication at startup, as PostgreSQL does it: the first pg_hba.conf rule that
//! matches the connection picks the method (`shoal_auth::hba`), the method runs (pgwire's SCRAM
//! exchange over the role's stored verifier, or a clear-text password checked against it),
//! and then the role must exist, be allowed to log in, have a password still valid and a free
//! connection slot. A failure is a FATAL error that says as little as PostgreSQL's: a wrong
//! password and an unknown role read the same (an unknown role runs SCRAM against a mock
//! verifier, so the exchange itself tells nothing either).

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use pgwire::api::auth::mechanism::{AuthMechanism, AuthMechanismFactory};
use pgwire::api::auth::sasl::scram::{ScramAuth, ScramSecret};
use pgwire::api::auth::sasl::{SaslMechanismFactory, SaslMechanisms};
use pgwire::api::auth::{AuthSource, LoginInfo, Password};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use shoal_auth::hba::{Client, HbaError, Method};
use shoal_auth::Verifier;
use shoal_sql::engine::Engine;
use shoal_storage::catalog_roles::RoleDef;

/// Decides logins by the engine's host-based rules (`Engine::hba`) and its roles; shared by
/// every connection.
pub struct Authenticator {
    engine: Arc<Engine>,
    /// SCRAM-SHA-256, for connections without TLS (-PLUS is never offered there).
    sasl: SaslMechanisms,
    /// SCRAM-SHA-256 and SCRAM-SHA-256-PLUS bound to the server certificate, for TLS
    /// connections; None without TLS configured.
    sasl_over_tls: Option<SaslMechanisms>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator").finish_non_exhaustive()
    }
}

/// How a connection is to authenticate, the rule decided.
pub enum Challenge {
    /// No password asked.
    Trust,
    /// A SCRAM-SHA-256 exchange, run by this mechanism.
    Scram(Box<dyn AuthMechanism>),
    /// The password in clear text.
    CleartextPassword,
    /// A client certificate whose common name is the user name (only over TLS).
    Certificate,
}

impl Authenticator {
    /// How long a client has to log in (PostgreSQL's authentication_timeout).
    pub fn timeout(&self) -> std::time::Duration {
        self.engine.authentication_timeout()
    }

    /// `server_cert_pem`: the TLS certificate chain, when TLS is configured; SCRAM over TLS
    /// then offers channel binding to it.
    pub fn new(
        engine: Arc<Engine>,
        server_cert_pem: Option<&[u8]>,
    ) -> Result<Authenticator, String> {
        let roles = Arc::new(RoleSource {
            engine: engine.clone(),
            mock_secret: Verifier::new_mock_secret(),
        });
        let plain = ScramAuth::new(roles.clone());
        let sasl = SaslMechanisms::new(vec![Arc::new(plain)]);
        let sasl_over_tls = match server_cert_pem {
            Some(pem) => {
                let mut bound = ScramAuth::new(roles);
                bound
                    .configure_certificate(pem)
                    .map_err(|e| format!("channel binding: {e}"))?;
                Some(SaslMechanisms::new(vec![Arc::new(ChannelBindingFirst(
                    bound,
                ))]))
            }
            None => None,
        };
        Ok(Authenticator {
            engine,
            sasl,
            sasl_over_tls,
        })
    }

    /// Reads the rules file (`path`, from now on) or, later, again (SIGHUP); the lines it
    /// cannot read are logged and left out. On a file that cannot be read the old rules stay.
    pub fn load_rules(&self, path: Option<PathBuf>) -> std::io::Result<()> {
        let file = match path {
            Some(path) => self.engine.hba.load(path)?,
            None => self.engine.hba.reload()?,
        };
        log_errors(&file.errors);
        Ok(())
    }

    /// The challenge for a client that connected from `address` (None: the Unix socket) as
    /// `user` to `database`, or the FATAL error that refuses it.
    pub fn challenge(
        &self,
        address: Option<IpAddr>,
        ssl: bool,
        user: &str,
        database: &str,
    ) -> Result<Challenge, ErrorInfo> {
        let hba = self.engine.hba.current();
        let catalog = self.engine.catalog.read();
        let is_member =
            |member: &str, role: &str| match (catalog.role_named(member), catalog.role_named(role))
            {
                (Some(m), Some(r)) => catalog.is_member_of(m.oid, r.oid),
                _ => false,
            };
        let client = Client {
            local: address.is_none(),
            ssl,
            address,
            database,
            user,
        };
        let host = address.map_or("[local]".to_string(), |a| a.to_string());
        let encryption = if ssl {
            "SSL encryption"
        } else {
            "no encryption"
        };
        let Some(rule) = hba.find(&client, &is_member) else {
            return Err(fatal(
                "28000",
                format!(
                    "no pg_hba.conf entry for host \"{host}\", user \"{user}\", database \"{database}\", {encryption}"
                ),
            ));
        };
        Ok(match rule.method {
            Method::Trust => Challenge::Trust,
            Method::Reject => {
                return Err(fatal(
                    "28000",
                    format!(
                        "pg_hba.conf rejects connection for host \"{host}\", user \"{user}\", database \"{database}\", {encryption}"
                    ),
                ))
            }
            Method::ScramSha256 | Method::Md5 => {
                let mechanisms = match (&self.sasl_over_tls, ssl) {
                    (Some(bound), true) => bound,
                    _ => &self.sasl,
                };
                Challenge::Scram(mechanisms.create())
            }
            Method::Password => Challenge::CleartextPassword,
            Method::Cert if ssl => Challenge::Certificate,
            Method::Cert => {
                return Err(fatal(
                    "28000",
                    format!("certificate authentication failed for user \"{user}\""),
                ))
            }
        })
    }

    /// After the method passed (`with_password`: a password was checked), whether `user` may
    /// log in: the role exists, may log in, and its password is still valid.
    pub fn admit(&self, user: &str, with_password: bool) -> Result<RoleDef, ErrorInfo> {
        let role = self.engine.catalog.read().role_named(user).cloned();
        let Some(role) = role else {
            return Err(match with_password {
                true => password_failed(user),
                false => fatal("28000", format!("role \"{user}\" does not exist")),
            });
        };
        if with_password && !password_valid(&role) {
            return Err(password_failed(user));
        }
        if !role.login {
            return Err(fatal(
                "28000",
                format!("role \"{user}\" is not permitted to log in"),
            ));
        }
        let backends = self.engine.backends.all();
        // The sessions logged in so far (this one registers once admitted).
        let sessions = backends
            .iter()
            .filter(|b| !b.activity().user.is_empty())
            .count();
        let max = self.engine.max_connections();
        if sessions >= max {
            return Err(fatal("53300", "sorry, too many clients already".into()));
        }
        let reserved = shoal_sql::engine::SUPERUSER_RESERVED_CONNECTIONS.min(max);
        if !role.superuser && sessions >= max - reserved {
            return Err(fatal(
                "53300",
                "remaining connection slots are reserved for non-replication superuser connections"
                    .into(),
            ));
        }
        if role.connection_limit >= 0 && !role.superuser {
            let connected = backends
                .iter()
                .filter(|b| b.activity().user == user)
                .count();
            if connected >= role.connection_limit as usize {
                return Err(fatal(
                    "53300",
                    format!("too many connections for role \"{user}\""),
                ));
            }
        }
        Ok(role)
    }

    /// Whether `password`, sent in clear text, is `user`'s.
    pub fn password_matches(&self, user: &str, password: &str) -> bool {
        let role = self.engine.catalog.read().role_named(user).cloned();
        role.as_ref()
            .filter(|r| password_valid(r))
            .and_then(|r| r.password.as_deref())
            .and_then(Verifier::parse)
            .is_some_and(|v| v.matches(password))
    }
}

/// SCRAM with channel binding offered first, as PostgreSQL lists its mechanisms (the list is in
/// the server's order of preference; pgwire puts SCRAM-SHA-256 first).
struct ChannelBindingFirst(ScramAuth);

impl AuthMechanismFactory for ChannelBindingFirst {
    fn create(&self) -> Box<dyn AuthMechanism> {
        self.0.create()
    }
}

impl SaslMechanismFactory for ChannelBindingFirst {
    fn sasl_mechanism_names(&self) -> Vec<String> {
        let mut names = self.0.sasl_mechanism_names();
        names.sort_by_key(|n| !n.ends_with("-PLUS"));
        names
    }
}

/// A role's password logs in while the role has one and its VALID UNTIL has not passed.
fn password_valid(role: &RoleDef) -> bool {
    role.password_valid_now()
}

fn log_errors(errors: &[HbaError]) {
    for e in errors {
        tracing::warn!(
            "pg_hba.conf line {}: {}; the line is ignored",
            e.line,
            e.message
        );
    }
}

pub fn fatal(code: &str, message: String) -> ErrorInfo {
    ErrorInfo::new("FATAL".to_owned(), code.to_owned(), message)
}

pub fn password_failed(user: &str) -> ErrorInfo {
    fatal(
        "28P01",
        format!("password authentication failed for user \"{user}\""),
    )
}

/// The roles' SCRAM verifiers, for pgwire's exchange.
struct RoleSource {
    engine: Arc<Engine>,
    /// Salts the mock verifiers of roles that do not exist.
    mock_secret: [u8; 32],
}

impl std::fmt::Debug for RoleSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RoleSource")
    }
}

#[async_trait]
impl AuthSource for RoleSource {
    async fn get_password(&self, login: &LoginInfo) -> PgWireResult<Password> {
        // Only SCRAM asks this source, through `get_scram_secret`.
        Err(PgWireError::InvalidPassword(
            login.user().unwrap_or_default().to_owned(),
        ))
    }

    async fn get_scram_secret(&self, login: &LoginInfo) -> PgWireResult<(ScramSecret, Option<()>)> {
        let user = login.user().unwrap_or_default();
        let role = self.engine.catalog.read().role_named(user).cloned();
        let verifier = role
            .as_ref()
            .filter(|r| password_valid(r))
            .and_then(|r| r.password.as_deref())
            .and_then(Verifier::parse)
            .unwrap_or_else(|| Verifier::mock(user, &self.mock_secret));
        Ok((verifier.secret(), None))
    }
}
