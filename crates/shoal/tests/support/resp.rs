//! A minimal RESP2 client for the tests of the Redis protocol.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A reply, as far as these tests look at it.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    Nil,
    Array(Vec<Reply>),
}

/// A minimal RESP2 client.
pub struct Redis {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Redis {
    pub async fn connect(port: u16) -> Redis {
        for _ in 0..200 {
            if let Ok(stream) = TcpStream::connect(("127.0.0.1", port)).await {
                return Redis {
                    stream,
                    buf: Vec::new(),
                };
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("no Redis listener on port {port}");
    }

    pub async fn call(&mut self, args: &[&str]) -> Reply {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend(format!("${}\r\n{a}\r\n", a.len()).bytes());
        }
        self.stream.write_all(&out).await.unwrap();
        self.reply().await
    }

    /// Sends every command in one write, then reads their replies.
    pub async fn pipeline(&mut self, commands: &[Vec<String>]) -> Vec<Reply> {
        let mut out = Vec::new();
        for args in commands {
            out.extend(format!("*{}\r\n", args.len()).bytes());
            for a in args {
                out.extend(format!("${}\r\n{a}\r\n", a.len()).bytes());
            }
        }
        self.stream.write_all(&out).await.unwrap();
        let mut replies = Vec::new();
        for _ in commands {
            replies.push(self.reply().await);
        }
        replies
    }

    pub async fn line(&mut self) -> String {
        loop {
            if let Some(at) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8(self.buf[..at].to_vec()).unwrap();
                self.buf.drain(..at + 2);
                return line;
            }
            self.fill().await;
        }
    }

    pub async fn fill(&mut self) {
        let mut chunk = [0u8; 4096];
        let n = self.stream.read(&mut chunk).await.unwrap();
        assert!(n > 0, "server closed the connection");
        self.buf.extend_from_slice(&chunk[..n]);
    }

    pub fn reply(
        &mut self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Reply> + Send + '_>> {
        Box::pin(async move {
            let line = self.line().await;
            let (kind, rest) = line.split_at(1);
            match kind {
                "+" => Reply::Status(rest.into()),
                "-" => Reply::Error(rest.into()),
                ":" => Reply::Int(rest.parse().unwrap()),
                "$" if rest == "-1" => Reply::Nil,
                "$" => {
                    let n: usize = rest.parse().unwrap();
                    while self.buf.len() < n + 2 {
                        self.fill().await;
                    }
                    let data = self.buf[..n].to_vec();
                    self.buf.drain(..n + 2);
                    Reply::Bulk(data)
                }
                "*" if rest == "-1" => Reply::Nil,
                "*" => {
                    let mut items = Vec::new();
                    for _ in 0..rest.parse::<usize>().unwrap() {
                        items.push(self.reply().await);
                    }
                    Reply::Array(items)
                }
                _ => panic!("unexpected reply line {line:?}"),
            }
        })
    }
}

pub fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}
