//! The Redis protocol for Shoal.
//!
//! A Redis client's bytes go through these parts, in order (`connection` reads and writes
//! them):
//! - `protocol::request` cuts the input into commands, RESP arrays of bulk strings or inline
//!   commands, with Redis's limits and protocol errors;
//! - `protocol::reply` writes the replies in the connection's protocol version (RESP2, or
//!   RESP3 after `HELLO 3`);
//! - `commands` checks each command's arity and runs it: connection commands on the
//!   connection's state (`client`), key commands over the keyspace (`keyspace`) in storage
//!   transactions, one per run of a pipeline's key commands, committed through the server
//!   (`host`) before their replies are written.
//!
//! The parser is written here rather than taken from a RESP crate: a server reads only one
//! shape of frame (an array of bulk strings, or an inline line) and must give Redis's exact
//! protocol errors; client-side frame codecs parse every frame type into owned trees, which a
//! server at hundreds of thousands of commands a second does not want.

pub mod client;
pub mod commands;
pub mod connection;
pub mod expiry;
pub mod glob;
pub mod host;
pub mod keyspace;
pub mod protocol;
