//! RESP on the wire: requests in, replies out.

pub mod reply;
pub mod request;

pub use reply::{Protocol, ReplyWriter};
pub use request::{parse_request, ProtocolError, Request};
