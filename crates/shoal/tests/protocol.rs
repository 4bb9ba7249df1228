//! Malformed and hostile protocol traffic: garbage instead of a startup packet, unknown message
//! types, lengths that lie, oversize messages, clients that vanish mid-transaction. After each,
//! the server must still be up and answer a well-behaved client, and committed data must stay.
//! The test speaks the wire protocol by hand (a few dozen lines) because client libraries
//! refuse to send broken messages.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::ShoalServer;

const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// A raw connection speaking just enough of the protocol v3 for these tests.
struct RawClient {
    stream: TcpStream,
}

/// One backend message: its type byte and body.
struct Message {
    kind: u8,
    body: Vec<u8>,
}

impl RawClient {
    fn connect(server: &ShoalServer) -> RawClient {
        let stream = TcpStream::connect(&server.addr).expect("connect to shoal");
        stream
            .set_read_timeout(Some(READ_TIMEOUT))
            .expect("set timeout");
        RawClient { stream }
    }

    /// Connects and completes the startup handshake (user postgres, no password).
    fn ready(server: &ShoalServer) -> RawClient {
        let mut c = RawClient::connect(server);
        let mut body = Vec::new();
        body.extend_from_slice(&196608u32.to_be_bytes()); // protocol 3.0
        for s in ["user", "postgres", "database", "postgres", ""] {
            body.extend_from_slice(s.as_bytes());
            body.push(0);
        }
        c.send_untyped(&body);
        c.read_until_ready().expect("startup completes");
        c
    }

    fn send_untyped(&mut self, body: &[u8]) {
        let len = (body.len() + 4) as u32;
        self.stream.write_all(&len.to_be_bytes()).expect("write");
        self.stream.write_all(body).expect("write");
    }

    fn send(&mut self, kind: u8, body: &[u8]) {
        self.stream.write_all(&[kind]).expect("write");
        self.send_untyped(body);
    }

    fn query(&mut self, sql: &str) {
        let mut body = sql.as_bytes().to_vec();
        body.push(0);
        self.send(b'Q', &body);
    }

    fn read_message(&mut self) -> Option<Message> {
        let mut header = [0u8; 5];
        self.stream.read_exact(&mut header).ok()?;
        let len = u32::from_be_bytes(header[1..5].try_into().expect("4 bytes")) as usize;
        let mut body = vec![0u8; len.checked_sub(4)?];
        self.stream.read_exact(&mut body).ok()?;
        Some(Message {
            kind: header[0],
            body,
        })
    }

    /// Reads messages up to ReadyForQuery; None if the connection closed first.
    fn read_until_ready(&mut self) -> Option<Vec<Message>> {
        let mut messages = Vec::new();
        loop {
            let m = self.read_message()?;
            let done = m.kind == b'Z';
            messages.push(m);
            if done {
                return Some(messages);
            }
        }
    }

    /// Sends each statement's Parse, Bind and Execute, then one Sync, in a single write, and
    /// reads the answers up to ReadyForQuery.
    fn pipeline(&mut self, statements: &[&str]) -> Vec<Message> {
        let mut batch = Vec::new();
        for sql in statements {
            batch.extend(extended_messages(sql));
        }
        batch.extend_from_slice(&[b'S', 0, 0, 0, 4]);
        self.stream.write_all(&batch).expect("write");
        self.read_until_ready().expect("pipeline answered")
    }

    /// Runs a simple query and returns the text of the first column of each row.
    fn query_column(&mut self, sql: &str) -> Vec<String> {
        self.query(sql);
        let messages = self.read_until_ready().expect("query answered");
        if let Some(e) = messages.iter().find(|m| m.kind == b'E') {
            panic!("{sql} failed: {}", String::from_utf8_lossy(&e.body));
        }
        messages
            .iter()
            .filter(|m| m.kind == b'D')
            .map(|m| {
                let len = i32::from_be_bytes(m.body[2..6].try_into().expect("4 bytes"));
                String::from_utf8_lossy(&m.body[6..6 + len as usize]).into_owned()
            })
            .collect()
    }
}

/// The SQLSTATE of an ErrorResponse body (field 'C').
fn sqlstate(error_body: &[u8]) -> String {
    let mut fields = error_body.split(|b| *b == 0);
    fields
        .find(|f| f.first() == Some(&b'C'))
        .map(|f| String::from_utf8_lossy(&f[1..]).into_owned())
        .unwrap_or_default()
}

fn assert_server_healthy(server: &mut ShoalServer) {
    assert!(server.is_running(), "{}", server.post_mortem());
    let mut c = RawClient::ready(server);
    assert_eq!(c.query_column("SELECT 40 + 2"), vec!["42"]);
}

#[test]
fn garbage_before_startup_is_rejected_and_server_survives() {
    let mut server = ShoalServer::start();
    let attempts: Vec<Vec<u8>> = vec![
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        vec![0, 0, 0, 3], // length smaller than the length field itself
        vec![0x7f, 0xff, 0xff, 0xff, 0, 3, 0], // a 2 GiB startup packet
        vec![0, 0, 0, 8, 0, 9, 0, 0], // unknown protocol version 9.0
        vec![0, 0, 0, 12, 0, 3, 0, 0, b'u', b's', b'e', b'r'], // parameters not terminated
    ];
    for bytes in attempts {
        let mut c = RawClient::connect(&server);
        let _ = c.stream.write_all(&bytes);
        let _ = c.stream.shutdown(std::net::Shutdown::Write);
        // Whatever the answer (an ErrorResponse or a closed socket), it must come promptly.
        let mut sink = Vec::new();
        let _ = c.stream.read_to_end(&mut sink);
    }
    assert_server_healthy(&mut server);
}

#[test]
fn malformed_messages_after_startup_get_errors_not_crashes() {
    let mut server = ShoalServer::start();
    // An unknown message type.
    let mut c = RawClient::ready(&server);
    c.send(b'@', b"whatever");
    let mut sink = Vec::new();
    let _ = c.stream.read_to_end(&mut sink);

    // A Query whose string is not NUL-terminated, and one that is not UTF-8.
    let mut c = RawClient::ready(&server);
    c.send(b'Q', b"SELECT 1");
    let _ = c.stream.read_to_end(&mut sink);
    let mut c = RawClient::ready(&server);
    c.send(b'Q', &[0xff, 0xfe, b'1', 0]);
    let _ = c.stream.read_to_end(&mut sink);

    // A Bind for a statement that was never parsed: an error, and the session goes on.
    let mut c = RawClient::ready(&server);
    c.send(b'B', b"\0nope\0\0\0\0\0\0\0");
    c.send(b'S', b"");
    let replies = c.read_until_ready().expect("error then ReadyForQuery");
    let error = replies
        .iter()
        .find(|m| m.kind == b'E')
        .expect("an ErrorResponse");
    assert_eq!(sqlstate(&error.body), "26000");
    assert_eq!(c.query_column("SELECT 7"), vec!["7"]);

    // A message that claims to be larger than the server accepts.
    let mut c = RawClient::ready(&server);
    c.stream
        .write_all(&[b'Q', 0x7f, 0xff, 0xff, 0xff])
        .expect("write");
    let _ = c.stream.shutdown(std::net::Shutdown::Write);
    let _ = c.stream.read_to_end(&mut sink);

    assert_server_healthy(&mut server);
}

#[test]
fn vanished_client_loses_its_transaction_but_not_committed_data() {
    let mut server = ShoalServer::start();
    let mut c = RawClient::ready(&server);
    c.query_column("CREATE TABLE vanish (id int PRIMARY KEY, v text)");
    c.query_column("INSERT INTO vanish VALUES (1, 'committed')");

    let mut gone = RawClient::ready(&server);
    gone.query_column("BEGIN");
    gone.query_column("UPDATE vanish SET v = 'uncommitted' WHERE id = 1");
    gone.query_column("INSERT INTO vanish VALUES (2, 'uncommitted')");
    drop(gone); // the socket closes mid-transaction

    // The row lock must be released when the session ends, so this update does not wait
    // forever, and the vanished client's changes are rolled back.
    c.query_column("UPDATE vanish SET v = v || '!' WHERE id = 1");
    assert_eq!(
        c.query_column("SELECT v FROM vanish ORDER BY id"),
        vec!["committed!"]
    );
    assert_server_healthy(&mut server);
}

/// Parse, Bind and Execute of `sql` (unnamed statement and portal), without a Sync.
fn extended_messages(sql: &str) -> Vec<u8> {
    fn message(out: &mut Vec<u8>, kind: u8, body: &[u8]) {
        out.push(kind);
        out.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
        out.extend_from_slice(body);
    }
    let mut out = Vec::new();
    let mut parse = vec![0u8]; // unnamed statement
    parse.extend_from_slice(sql.as_bytes());
    parse.extend_from_slice(&[0, 0, 0]); // end of text, no parameter types
    message(&mut out, b'P', &parse);
    // Unnamed portal and statement, no formats, no parameters, no result formats.
    message(&mut out, b'B', &[0, 0, 0, 0, 0, 0, 0, 0]);
    message(&mut out, b'E', &[0, 0, 0, 0, 0]); // unnamed portal, all rows
    out
}

/// The statements of an extended-protocol pipeline up to its Sync form one implicit
/// transaction, as in PostgreSQL: an error rolls back the statements before it (pgJDBC's and
/// pgx's batches rely on this), and a pipeline that succeeds commits at the Sync.
#[test]
fn a_pipeline_up_to_sync_is_one_transaction() {
    let server = ShoalServer::start();
    let mut c = RawClient::ready(&server);
    c.query_column("CREATE TABLE piped (id int PRIMARY KEY)");
    c.query_column("INSERT INTO piped VALUES (1)");

    let messages = c.pipeline(&[
        "INSERT INTO piped VALUES (2)",
        "INSERT INTO piped VALUES (3)",
        "INSERT INTO piped VALUES (1)",
        "INSERT INTO piped VALUES (4)",
    ]);
    let errors: Vec<String> = messages
        .iter()
        .filter(|m| m.kind == b'E')
        .map(|m| sqlstate(&m.body))
        .collect();
    assert_eq!(errors, vec!["23505"]);
    assert_eq!(messages.last().unwrap().body, b"I", "idle after the Sync");
    assert_eq!(c.query_column("SELECT count(*) FROM piped"), vec!["1"]);

    let messages = c.pipeline(&[
        "INSERT INTO piped VALUES (2)",
        "INSERT INTO piped VALUES (3)",
    ]);
    assert!(messages.iter().all(|m| m.kind != b'E'));
    assert_eq!(messages.last().unwrap().body, b"I");
    assert_eq!(c.query_column("SELECT count(*) FROM piped"), vec!["3"]);
}
