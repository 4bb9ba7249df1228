//! Passwords as SCRAM-SHA-256 verifiers, in PostgreSQL's text form
//! `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>` (base64): what `pg_authid`
//! keeps. The password itself is never stored. A verifier proves a SCRAM exchange (pgwire runs
//! it from the verifier alone) and a password sent in clear text (`password` method). The key
//! derivation is pgwire's (SASLprep, PBKDF2-HMAC-SHA-256).

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use pgwire::api::auth::sasl::scram::{gen_salted_password, ScramSecret};

/// PostgreSQL's default (`scram_iterations`).
pub const ITERATIONS: usize = 4096;
const SALT_BYTES: usize = 16;
const PREFIX: &str = "SCRAM-SHA-256$";

/// A parsed verifier.
#[derive(Clone, PartialEq, Eq)]
pub struct Verifier {
    pub salt: Vec<u8>,
    pub iterations: usize,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl Verifier {
    /// A new verifier of `password`, with a random salt.
    pub fn of_password(password: &str) -> Verifier {
        let salt: [u8; SALT_BYTES] = rand::random();
        Verifier::derive(password, salt.to_vec(), ITERATIONS)
    }

    fn derive(password: &str, salt: Vec<u8>, iterations: usize) -> Verifier {
        let salted = gen_salted_password(password, &salt, iterations);
        match ScramSecret::verifier_from_salted_password(salt, salted, iterations) {
            ScramSecret::Verifier {
                salt,
                iterations,
                stored_key,
                server_key,
            } => Verifier {
                salt,
                iterations,
                stored_key,
                server_key,
            },
            ScramSecret::SaltedPassword { .. } => unreachable!("a verifier is asked for"),
        }
    }

    /// Reads PostgreSQL's text form; None for anything else (an MD5 hash, a plain password).
    pub fn parse(text: &str) -> Option<Verifier> {
        let rest = text.strip_prefix(PREFIX)?;
        let (params, keys) = rest.split_once('$')?;
        let (iterations, salt) = params.split_once(':')?;
        let (stored, server) = keys.split_once(':')?;
        let verifier = Verifier {
            iterations: iterations.parse().ok().filter(|n| *n > 0)?,
            salt: STANDARD.decode(salt).ok()?,
            stored_key: STANDARD.decode(stored).ok()?,
            server_key: STANDARD.decode(server).ok()?,
        };
        (verifier.stored_key.len() == 32 && verifier.server_key.len() == 32).then_some(verifier)
    }

    /// PostgreSQL's text form.
    pub fn text(&self) -> String {
        format!(
            "{PREFIX}{}:{}${}:{}",
            self.iterations,
            STANDARD.encode(&self.salt),
            STANDARD.encode(&self.stored_key),
            STANDARD.encode(&self.server_key)
        )
    }

    /// Whether `password` is the one this verifier was made from (the `password` method).
    pub fn matches(&self, password: &str) -> bool {
        let other = Verifier::derive(password, self.salt.clone(), self.iterations);
        same_bytes(&other.stored_key, &self.stored_key)
    }

    /// A secret for `mock`, made once per server.
    pub fn new_mock_secret() -> [u8; 32] {
        rand::random()
    }

    /// As pgwire's SCRAM exchange takes it.
    pub fn secret(&self) -> ScramSecret {
        ScramSecret::Verifier {
            salt: self.salt.clone(),
            iterations: self.iterations,
            stored_key: self.stored_key.clone(),
            server_key: self.server_key.clone(),
        }
    }

    /// A verifier for a role that does not exist or has no password, so that the SCRAM
    /// exchange runs to its end and fails as for a wrong password, revealing nothing: its salt
    /// is derived from the name and `server_secret` (the same for every attempt, as a real
    /// role's would be), its keys match no password.
    pub fn mock(user: &str, server_secret: &[u8]) -> Verifier {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, server_secret);
        let tag = ring::hmac::sign(&key, user.as_bytes());
        let salt = tag.as_ref()[..SALT_BYTES].to_vec();
        let random: [u8; 32] = rand::random();
        Verifier {
            salt,
            iterations: ITERATIONS,
            stored_key: random.to_vec(),
            server_key: random.to_vec(),
        }
    }
}

/// Compares two keys in time that does not depend on where they differ.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether `text` is a password already hashed for storage (SCRAM, or PostgreSQL's older MD5
/// form `md5` + 32 hex digits), which `PASSWORD '...'` takes as it is.
pub fn is_hashed(text: &str) -> bool {
    text.starts_with(PREFIX)
        || (text.len() == 35
            && text.starts_with("md5")
            && text[3..].bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verifier_round_trips_its_text_and_checks_its_password() {
        let v = Verifier::of_password("s3cret");
        let text = v.text();
        assert!(text.starts_with("SCRAM-SHA-256$4096:"));
        let parsed = Verifier::parse(&text).expect("parses");
        assert_eq!(parsed, v);
        assert!(parsed.matches("s3cret"));
        assert!(!parsed.matches("s3cret "));
        assert!(is_hashed(&text));
        assert!(!is_hashed("s3cret"));
    }

    #[test]
    fn postgresql_s_own_verifier_is_read() {
        // `CREATE ROLE r PASSWORD 'pencil'` on PostgreSQL 15, then `SELECT rolpassword FROM
        // pg_authid WHERE rolname = 'r'`.
        let pg = "SCRAM-SHA-256$4096:ZQaAoZ61GKJteISPQmgGeA==$\
                  L+q4uscE5YeBj2TzNho9gBGLYT6adPgwSbMFaVrKx4o=:\
                  CMt/q05qBo7Ia2Mr/HCsYOGIkD3MyOkBYjlTy8D5rvA=";
        let v = Verifier::parse(pg).expect("parses");
        assert_eq!(v.iterations, 4096);
        assert_eq!(v.text(), pg);
        assert!(v.matches("pencil"));
        assert!(!v.matches("Pencil"));
        assert!(Verifier::parse("md5abc").is_none());
    }

    #[test]
    fn mock_verifiers_keep_their_salt_and_match_nothing() {
        let a = Verifier::mock("nobody", b"server");
        let b = Verifier::mock("nobody", b"server");
        assert_eq!(a.salt, b.salt);
        assert_ne!(a.salt, Verifier::mock("somebody", b"server").salt);
        assert!(!a.matches(""));
    }
}
