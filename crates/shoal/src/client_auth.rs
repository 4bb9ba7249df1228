//! Who may connect, set up at start: the data directory's pg_hba.conf (written with safe
//! defaults on first start, as initdb does), the bootstrap superuser's password from
//! `--superuser-password-file` or `SHOAL_PASSWORD`, and the check that a server listening
//! beyond loopback lets nobody in from there without a password or a certificate.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use shoal_auth::hba::{default_file, HbaFile, Method};
use shoal_auth::Verifier;
use shoal_sql::Engine;
use shoal_storage::catalog_roles::BOOTSTRAP_SUPERUSER_OID;

/// The superuser password given at start, if any: the file's first line, or `SHOAL_PASSWORD`.
pub fn superuser_password(file: Option<&Path>) -> Result<Option<String>, String> {
    if let Some(file) = file {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read the password file {}: {e}", file.display()))?;
        let password = text.lines().next().unwrap_or("").to_string();
        if password.is_empty() {
            return Err(format!("the password file {} is empty", file.display()));
        }
        return Ok(Some(password));
    }
    Ok(std::env::var("SHOAL_PASSWORD")
        .ok()
        .filter(|p| !p.is_empty()))
}

/// The rules file to use: `hba_file`, or the data directory's pg_hba.conf, written with the
/// defaults if it does not exist (loopback as `scram-sha-256` when a superuser password is
/// given, `trust` otherwise; the Unix socket `trust`).
pub fn prepare_hba(
    data_dir: &Path,
    hba_file: Option<PathBuf>,
    with_password: bool,
) -> Result<PathBuf, String> {
    if let Some(path) = hba_file {
        return match path.exists() {
            true => Ok(path),
            false => Err(format!(
                "the host-based rules file {} does not exist",
                path.display()
            )),
        };
    }
    let path = data_dir.join("pg_hba.conf");
    if !path.exists() {
        let loopback = if with_password {
            Method::ScramSha256
        } else {
            tracing::warn!(
                "enabling \"trust\" authentication for local connections: any local user can \
                 connect as any role. Edit {} or give --superuser-password-file (or \
                 SHOAL_PASSWORD) when the data directory is created to require a password.",
                path.display()
            );
            Method::Trust
        };
        std::fs::write(&path, default_file(Method::Trust, loopback))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(path)
}

/// Refuses to listen beyond loopback while a rule lets clients from there in without a
/// password or certificate.
pub fn check_network(listen: SocketAddr, hba_path: &Path) -> Result<(), String> {
    if listen.ip().is_loopback() {
        return Ok(());
    }
    let text = std::fs::read_to_string(hba_path)
        .map_err(|e| format!("cannot read {}: {e}", hba_path.display()))?;
    let hba = HbaFile::parse(&text);
    let open = hba.open_to_the_network();
    if open.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = open.iter().map(|r| r.line.to_string()).collect();
    Err(format!(
        "refusing to listen on {listen}: {} line {} lets clients from the network in without \
         a password (\"trust\"); change the method to scram-sha-256 or narrow the address to \
         loopback",
        hba_path.display(),
        lines.join(", ")
    ))
}

/// Gives the bootstrap superuser `password` if it has none yet (a changed password is set
/// with ALTER ROLE).
pub fn apply_superuser_password(engine: &Engine, password: &str) {
    let role = engine
        .catalog
        .read()
        .roles
        .get(&BOOTSTRAP_SUPERUSER_OID)
        .cloned();
    let Some(mut role) = role else { return };
    if role.password.is_some() {
        tracing::info!(
            "the superuser \"{}\" has a password already; the one given at start is ignored \
             (change it with ALTER ROLE ... PASSWORD)",
            role.name
        );
        return;
    }
    role.password = Some(Verifier::of_password(password).text());
    if let Err(e) = engine.catalog.write().replace_role(role) {
        tracing::error!("cannot set the superuser's password: {e:?}");
    }
}
