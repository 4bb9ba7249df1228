//! Who may connect to Shoal, as PostgreSQL decides it: host-based rules in pg_hba.conf's
//! format (`hba`) choose how a connection must authenticate, and passwords are kept only as
//! SCRAM-SHA-256 verifiers (`scram`). The wire protocol side (pgwire's SCRAM exchange, TLS)
//! lives in `shoal-server`; the roles themselves in the catalog.

pub mod hba;
pub mod scram;

pub use hba::{Client, ConnectionType, HbaFile, HbaRule, Method};
pub use scram::Verifier;
