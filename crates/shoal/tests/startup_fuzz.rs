//! Garbage before and during authentication: random bytes, startup messages cut at every
//! length, absurd lengths, password and SASL messages out of order or mangled, each from a
//! client that then hangs up. The server closes each such connection (with a FATAL error when
//! it can tell what went wrong), stays up, and keeps serving well-behaved clients. The bytes
//! come from a fixed-seed generator, so a failure repeats.

mod support;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use support::{startup_message, ShoalServer};

/// xorshift64*: deterministic bytes without a dependency.
struct Bytes(u64);

impl Bytes {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn fill(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A message of the regular protocol: type byte, length, body.
fn message(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![kind];
    m.extend(((body.len() + 4) as u32).to_be_bytes());
    m.extend_from_slice(body);
    m
}

/// Sends `bytes`, hangs up its sending side, and returns what the server said before it
/// closed the connection. Fails the test if the server does not close it.
fn send_and_hang_up(port: u16, bytes: &[u8]) -> Vec<u8> {
    let mut socket = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    socket
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    // The server may close before it has read everything: a failed write is fine.
    let _ = socket.write_all(bytes);
    let _ = socket.shutdown(Shutdown::Write);
    let mut answer = Vec::new();
    match socket.read_to_end(&mut answer) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the server kept a garbage connection open: {e} after {bytes:?}"),
    }
    answer
}

/// A well-behaved client still gets in.
fn assert_serving(server: &mut ShoalServer) {
    assert!(server.is_running(), "the server died");
    let answer = send_and_hang_up(server.port(), &startup_message("postgres"));
    // 'R' AuthenticationRequest: the server answered the startup as usual.
    assert_eq!(answer.first(), Some(&b'R'), "{answer:?}");
}

#[test]
fn garbage_during_startup_and_authentication_is_refused_and_the_server_stays_up() {
    let password = std::env::temp_dir().join(format!("shoal-fuzz-pw-{}", std::process::id()));
    std::fs::write(&password, "fuzz pw\n").unwrap();
    let mut server =
        ShoalServer::start_with(&["--superuser-password-file", password.to_str().unwrap()]);
    let port = server.port();
    let mut rng = Bytes(0x5eed_cafe_f00d_d00d);

    // Random bytes as the first thing a client sends.
    for _ in 0..60 {
        let n = rng.below(300) as usize;
        send_and_hang_up(port, &rng.fill(n));
    }
    assert_serving(&mut server);

    // A valid startup message cut at every length.
    let startup = startup_message("postgres");
    for cut in 0..startup.len() {
        send_and_hang_up(port, &startup[..cut]);
    }
    assert_serving(&mut server);

    // Lengths no startup message has: below the minimum, and absurdly large.
    for length in [0u32, 1, 3, 7, 0x7fff_ffff, u32::MAX] {
        let mut bytes = length.to_be_bytes().to_vec();
        bytes.extend(196608u32.to_be_bytes());
        send_and_hang_up(port, &bytes);
    }
    // An unknown protocol version, and an SSLRequest followed by garbage.
    send_and_hang_up(port, &[0, 0, 0, 8, 0, 9, 0, 0]);
    let mut ssl = vec![0, 0, 0, 8, 4, 210, 22, 47];
    ssl.extend(rng.fill(40));
    send_and_hang_up(port, &ssl);
    assert_serving(&mut server);

    // Messages of the regular protocol before the startup.
    for kind in [b'p', b'Q', b'X', b'S', b'P'] {
        let body = rng.fill(20);
        send_and_hang_up(port, &message(kind, &body));
    }
    assert_serving(&mut server);

    // After the SASL request: out-of-order, truncated and random password messages.
    let sasl_bodies: Vec<Vec<u8>> = vec![
        // A SASLResponse-like body before any mechanism was chosen.
        b"c=biws,r=abc,p=xyz".to_vec(),
        // An unknown mechanism.
        b"SCRAM-SHA-1\0\0\0\0\x04abcd".to_vec(),
        // SCRAM-SHA-256-PLUS without TLS.
        b"SCRAM-SHA-256-PLUS\0\0\0\0\x20p=tls-server-end-point,,n=,r=abc".to_vec(),
        // A client-first-message that is not one.
        b"SCRAM-SHA-256\0\0\0\0\x05hello".to_vec(),
        Vec::new(),
    ];
    for body in &sasl_bodies {
        let mut bytes = startup_message("postgres");
        bytes.extend(message(b'p', body));
        let answer = send_and_hang_up(port, &bytes);
        let text = String::from_utf8_lossy(&answer);
        assert!(text.contains("FATAL"), "{body:?}: {text:?}");
    }
    for _ in 0..40 {
        let mut bytes = startup_message("postgres");
        let n = rng.below(80) as usize;
        let body = rng.fill(n);
        bytes.extend(message(b'p', &body));
        // A second message, as a client that does not wait for the server's answer.
        if rng.below(2) == 0 {
            let n = rng.below(80) as usize;
            let body = rng.fill(n);
            bytes.extend(message(b'p', &body));
        }
        send_and_hang_up(port, &bytes);
    }
    // A password message whose length field says less than its own four bytes.
    let mut bytes = startup_message("postgres");
    bytes.extend([b'p', 0, 0, 0, 2]);
    send_and_hang_up(port, &bytes);
    assert_serving(&mut server);

    // An honest login still works after all this.
    let _ = std::fs::remove_file(&password);
}
