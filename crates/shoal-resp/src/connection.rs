//! One client's connection: read what the client sent, run every whole command in it in order
//! (pipelining; key commands in batches, `commands::Batch`), commit, write all their replies at
//! once, and read again. No reply is written before the commit of what it reports. A protocol error gets its
//! reply and ends the connection, as in Redis; so does QUIT, once its OK is written.

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::commands::{self, Args, Server};
use crate::protocol::{parse_request, ReplyWriter};

/// Bytes read from the socket at a time.
const READ_CHUNK_BYTES: usize = 16 * 1024;
/// Replies are written out once this much is pending, even in the middle of a pipeline, so a
/// deep pipeline of large replies does not pile up in memory.
const REPLY_FLUSH_BYTES: usize = 64 * 1024;

/// Serves the client on `stream` until it disconnects, QUITs or breaks the protocol.
pub async fn serve<S>(mut stream: S, server: Arc<Server>, peer: String) -> std::io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (mut client, _connected) = server.new_client(peer);
    let mut input: Vec<u8> = Vec::with_capacity(READ_CHUNK_BYTES);
    let mut output: Vec<u8> = Vec::with_capacity(READ_CHUNK_BYTES);
    let mut batch = None;
    loop {
        let mut start = 0;
        let mut broken = false;
        loop {
            match parse_request(&input[start..]) {
                Ok(None) => break,
                Ok(Some(request)) => {
                    let args = Args {
                        buf: &input[start..],
                        req: &request,
                    };
                    if !request.is_empty() {
                        commands::execute(&server, &mut client, &args, &mut output, &mut batch)
                            .await;
                    }
                    start += request.consumed;
                    if client.closing {
                        break;
                    }
                    if output.len() >= REPLY_FLUSH_BYTES {
                        commands::end_batch(&server, &client, &mut batch, &mut output).await;
                        stream.write_all(&output).await?;
                        output.clear();
                    }
                }
                Err(e) => {
                    commands::end_batch(&server, &client, &mut batch, &mut output).await;
                    ReplyWriter::new(&mut output, client.protocol).error(&format!("ERR {}", e.0));
                    broken = true;
                    break;
                }
            }
        }
        input.drain(..start);
        commands::end_batch(&server, &client, &mut batch, &mut output).await;
        if !output.is_empty() {
            stream.write_all(&output).await?;
            output.clear();
        }
        if broken || client.closing {
            return stream.shutdown().await;
        }
        let at = input.len();
        input.resize(at + READ_CHUNK_BYTES, 0);
        let n = stream.read(&mut input[at..]).await?;
        input.truncate(at + n);
        if n == 0 {
            return Ok(());
        }
    }
}
