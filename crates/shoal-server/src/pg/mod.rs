//! The PostgreSQL wire protocol front end (on pgwire): one `ConnectionHandler` per client.

pub mod auth;
pub mod connection;
pub mod encode;
pub mod errors;
mod extended;
pub mod handler;
pub(crate) mod reply_batch;
mod startup;
