//! TLS for client connections, as PostgreSQL's `ssl = on`: a certificate chain and its key in
//! PEM files (`ssl_cert_file`, `ssl_key_file`), and optionally the certificate authorities
//! whose client certificates are accepted (`ssl_ca_file`; the `cert` method of pg_hba.conf
//! needs it). The handshake is rustls's; pgwire answers the client's SSLRequest with `S` when
//! an acceptor is configured and `N` otherwise.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pgwire::tokio::TlsAcceptor;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls;
use tokio_rustls::rustls::server::WebPkiClientVerifier;

/// Where the server's TLS material is.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Certificate authorities for client certificates; without it none are asked for.
    pub client_ca: Option<PathBuf>,
}

/// The loaded TLS configuration, shared by every connection.
#[derive(Clone)]
pub struct Tls {
    pub acceptor: TlsAcceptor,
    /// The certificate chain as PEM: SCRAM-SHA-256-PLUS binds the exchange to its first
    /// certificate (`tls-server-end-point`).
    pub cert_pem: Arc<Vec<u8>>,
    pub files: TlsFiles,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("files", &self.files).finish()
    }
}

impl Tls {
    /// Reads and checks the files; the error names the file that is wrong.
    pub fn load(files: TlsFiles) -> Result<Tls, String> {
        let cert_pem = std::fs::read(&files.cert).map_err(|e| cannot_read(&files.cert, e))?;
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<_, _>>()
            .map_err(|e| invalid(&files.cert, e))?;
        if chain.is_empty() {
            return Err(format!(
                "{}: no certificate in the file",
                files.cert.display()
            ));
        }
        let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| invalid(&files.key, e))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?;
        let builder = match &files.client_ca {
            None => builder.with_no_client_auth(),
            Some(path) => {
                let mut roots = rustls::RootCertStore::empty();
                for cert in CertificateDer::pem_file_iter(path).map_err(|e| invalid(path, e))? {
                    roots
                        .add(cert.map_err(|e| invalid(path, e))?)
                        .map_err(|e| invalid(path, e))?;
                }
                // As PostgreSQL with ssl_ca_file: a client may present a certificate, and one
                // it presents must be signed by these authorities; whether a login needs one
                // is pg_hba.conf's to say (the `cert` method).
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                        .allow_unauthenticated()
                        .build()
                        .map_err(|e| invalid(path, e))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder
            .with_single_cert(chain, key)
            .map_err(|e| format!("{}: {e}", files.key.display()))?;
        // libpq 17's direct TLS negotiation requires this protocol name.
        config.alpn_protocols = vec![b"postgresql".to_vec()];
        Ok(Tls {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            cert_pem: Arc::new(cert_pem),
            files,
        })
    }
}

fn cannot_read(path: &Path, e: std::io::Error) -> String {
    format!("cannot read {}: {e}", path.display())
}

fn invalid(path: &Path, e: impl std::fmt::Display) -> String {
    format!("{}: {e}", path.display())
}

/// The common name of a client certificate's subject, which the `cert` method compares with
/// the user name.
pub fn common_name(cert: &CertificateDer<'_>) -> Option<String> {
    x509_certificate::X509Certificate::from_der(cert.as_ref())
        .ok()?
        .subject_common_name()
}
