//! Nodes prove to each other that they hold the group's key before any Raft message passes:
//! a challenge and response both ways with HMAC-SHA256 over fresh nonces, so the key never
//! crosses the network and a recorded exchange cannot be replayed. The messages after it are
//! not encrypted: the log travels in clear, as PostgreSQL's replication without TLS.
//!
//! 1. server: `MAGIC`, its nonce (32 bytes)
//! 2. client: its nonce, HMAC(key, "client" | server nonce | client nonce)
//! 3. server: 1 and HMAC(key, "server" | client nonce | server nonce), or 0 and closes
//!
//! A group without a key file uses the empty key: it proves only that the peer speaks this
//! protocol, which is why such a group is held to loopback addresses.

use std::io;

use rand::RngCore;
use ring::hmac;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufStream};
use tokio::net::TcpStream;

const MAGIC: &[u8; 8] = b"SHOALRF1";
const NONCE_BYTES: usize = 32;
const TAG_BYTES: usize = 32;

/// The group's shared secret (`--replication-key-file`), empty when the group has none.
#[derive(Clone)]
pub(crate) struct PeerKey(hmac::Key);

impl PeerKey {
    pub(crate) fn new(secret: &[u8]) -> PeerKey {
        PeerKey(hmac::Key::new(hmac::HMAC_SHA256, secret))
    }

    fn tag(&self, role: &[u8], first: &[u8], second: &[u8]) -> hmac::Tag {
        let mut ctx = hmac::Context::with_key(&self.0);
        ctx.update(role);
        ctx.update(first);
        ctx.update(second);
        ctx.sign()
    }

    fn verify(&self, role: &[u8], first: &[u8], second: &[u8], tag: &[u8]) -> bool {
        let mut message = Vec::with_capacity(role.len() + first.len() + second.len());
        message.extend_from_slice(role);
        message.extend_from_slice(first);
        message.extend_from_slice(second);
        hmac::verify(&self.0, &message, tag).is_ok()
    }
}

fn nonce() -> [u8; NONCE_BYTES] {
    let mut n = [0u8; NONCE_BYTES];
    rand::rng().fill_bytes(&mut n);
    n
}

fn refused(message: &str) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, message.to_string())
}

/// Connects to a peer at `addr` and proves the key both ways.
pub(crate) async fn connect(addr: &str, key: &PeerKey) -> io::Result<BufStream<TcpStream>> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let mut conn = BufStream::new(stream);
    let mut magic = [0u8; 8];
    conn.read_exact(&mut magic).await?;
    if &magic != MAGIC {
        return Err(refused("not a Shoal replication listener"));
    }
    let mut server_nonce = [0u8; NONCE_BYTES];
    conn.read_exact(&mut server_nonce).await?;
    let client_nonce = nonce();
    conn.write_all(&client_nonce).await?;
    conn.write_all(key.tag(b"client", &server_nonce, &client_nonce).as_ref())
        .await?;
    conn.flush().await?;
    if conn.read_u8().await? != 1 {
        return Err(refused("the peer refused this node's replication key"));
    }
    let mut tag = [0u8; TAG_BYTES];
    conn.read_exact(&mut tag).await?;
    if !key.verify(b"server", &client_nonce, &server_nonce, &tag) {
        return Err(refused(
            "the peer does not hold the group's replication key",
        ));
    }
    Ok(conn)
}

/// Checks a connecting peer's key; on success the connection carries Raft's messages.
pub(crate) async fn accept(stream: TcpStream, key: &PeerKey) -> io::Result<BufStream<TcpStream>> {
    stream.set_nodelay(true)?;
    let mut conn = BufStream::new(stream);
    let server_nonce = nonce();
    conn.write_all(MAGIC).await?;
    conn.write_all(&server_nonce).await?;
    conn.flush().await?;
    let mut client_nonce = [0u8; NONCE_BYTES];
    conn.read_exact(&mut client_nonce).await?;
    let mut tag = [0u8; TAG_BYTES];
    conn.read_exact(&mut tag).await?;
    if !key.verify(b"client", &server_nonce, &client_nonce, &tag) {
        conn.write_u8(0).await?;
        conn.flush().await?;
        return Err(refused("a peer without the group's replication key"));
    }
    conn.write_u8(1).await?;
    conn.write_all(key.tag(b"server", &client_nonce, &server_nonce).as_ref())
        .await?;
    conn.flush().await?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn handshake(server_key: &[u8], client_key: &[u8]) -> (io::Result<()>, io::Result<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let server_key = PeerKey::new(server_key);
        let server = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            accept(stream, &server_key).await.map(|_| ())
        });
        let client = connect(&addr, &PeerKey::new(client_key)).await.map(|_| ());
        (server.await.unwrap(), client)
    }

    #[tokio::test]
    async fn only_the_same_key_passes() {
        let (server, client) = handshake(b"group secret", b"group secret").await;
        assert!(server.is_ok() && client.is_ok());
        let (server, client) = handshake(b"group secret", b"another").await;
        assert_eq!(server.unwrap_err().kind(), io::ErrorKind::PermissionDenied);
        assert_eq!(client.unwrap_err().kind(), io::ErrorKind::PermissionDenied);
    }
}
