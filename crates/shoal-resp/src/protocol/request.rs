//! Requests as Redis reads them (`processMultibulkBuffer` and `processInlineBuffer` in Redis's
//! networking.c): a RESP array of bulk strings (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`), or an inline
//! command, one line of words (`PING\r\n`, as redis-benchmark's PING_INLINE and telnet send).
//!
//! A request's arguments are spans of the input buffer, so pipelined commands are parsed
//! without copying their bytes. An incomplete request asks for more input; a malformed one is
//! a protocol error, after which Redis replies `-ERR Protocol error: ...` and closes the
//! connection.

use std::ops::Range;

/// Longest inline command, and longest line of a multibulk header, Redis waits for.
pub const INLINE_MAX_BYTES: usize = 64 * 1024;
/// Redis's default `proto-max-bulk-len`: the longest bulk string a request may carry.
pub const BULK_MAX_BYTES: usize = 512 * 1024 * 1024;
/// Most arguments in one request (Redis's limit is INT_MAX; this bounds what one request can
/// make the server allocate before its bytes arrive).
pub const ARGUMENTS_MAX: usize = 1024 * 1024;

/// A protocol error: the reply's text after `ERR `, as Redis words it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl ProtocolError {
    fn new(message: &str) -> Self {
        ProtocolError(format!("Protocol error: {message}"))
    }
}

/// One command: its arguments (the command's name first) as spans of the buffer it was parsed
/// from, and how many bytes of the buffer it took.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Request {
    pub args: Vec<Range<usize>>,
    pub consumed: usize,
    /// Inline arguments with quotes or escapes are not spans of the input: their bytes.
    pub unquoted: Vec<Vec<u8>>,
}

impl Request {
    /// Argument `i`'s bytes, given the buffer the request was parsed from.
    pub fn arg<'b>(&'b self, buf: &'b [u8], i: usize) -> &'b [u8] {
        let span = &self.args[i];
        // An unquoted argument's span starts past the buffer's end (see `push_unquoted`).
        match span.start >= UNQUOTED_BASE {
            true => &self.unquoted[span.start - UNQUOTED_BASE],
            false => &buf[span.clone()],
        }
    }

    pub fn len(&self) -> usize {
        self.args.len()
    }

    pub fn is_empty(&self) -> bool {
        self.args.is_empty()
    }

    fn push_unquoted(&mut self, bytes: Vec<u8>) {
        let at = UNQUOTED_BASE + self.unquoted.len();
        self.unquoted.push(bytes);
        self.args.push(at..at);
    }
}

/// Spans from here on name `Request::unquoted` entries (no buffer is this large).
const UNQUOTED_BASE: usize = usize::MAX / 2;

/// The first request in `buf`: Ok(None) when `buf` does not hold a whole one yet. A request
/// with no arguments (an empty line, `*0`) is returned empty, for the caller to skip.
pub fn parse_request(buf: &[u8]) -> Result<Option<Request>, ProtocolError> {
    match buf.first() {
        None => Ok(None),
        Some(b'*') => parse_multibulk(buf),
        Some(_) => parse_inline(buf),
    }
}

/// The line starting at `from`, without its `\r\n`, and where the next one starts.
fn line_at(buf: &[u8], from: usize) -> Option<(&[u8], usize)> {
    let end = from + memchr::memchr(b'\r', &buf[from..])?;
    match buf.get(end + 1) {
        Some(b'\n') => Some((&buf[from..end], end + 2)),
        // A `\r` not followed by `\n` is part of the (malformed) number: the parse of the
        // number fails on it.
        Some(_) => Some((&buf[from..=end], end + 1)),
        None => None,
    }
}

/// A length as Redis's `string2ll` reads it: an optional `-`, digits, nothing else.
fn parse_length(bytes: &[u8]) -> Option<i64> {
    let (negative, digits) = match bytes.first() {
        Some(b'-') => (true, &bytes[1..]),
        _ => (false, bytes),
    };
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let value: i64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(if negative { -value } else { value })
}

fn parse_multibulk(buf: &[u8]) -> Result<Option<Request>, ProtocolError> {
    let Some((count_line, mut at)) = line_at(buf, 1) else {
        if buf.len() > INLINE_MAX_BYTES {
            return Err(ProtocolError::new("too big mbulk count string"));
        }
        return Ok(None);
    };
    let count = match parse_length(count_line) {
        Some(n) if n <= ARGUMENTS_MAX as i64 => n,
        _ => return Err(ProtocolError::new("invalid multibulk length")),
    };
    let mut request = Request::default();
    if count <= 0 {
        request.consumed = at;
        return Ok(Some(request));
    }
    request.args.reserve(count as usize);
    for _ in 0..count {
        match buf.get(at) {
            None => return Ok(None),
            Some(b'$') => {}
            Some(&other) => {
                return Err(ProtocolError(format!(
                    "Protocol error: expected '$', got '{}'",
                    other as char
                )))
            }
        }
        let Some((len_line, data_at)) = line_at(buf, at + 1) else {
            if buf.len() - at > INLINE_MAX_BYTES {
                return Err(ProtocolError::new("too big bulk count string"));
            }
            return Ok(None);
        };
        let len = match parse_length(len_line) {
            Some(n) if (0..=BULK_MAX_BYTES as i64).contains(&n) => n as usize,
            _ => return Err(ProtocolError::new("invalid bulk length")),
        };
        if buf.len() < data_at + len + 2 {
            return Ok(None);
        }
        request.args.push(data_at..data_at + len);
        at = data_at + len + 2;
    }
    request.consumed = at;
    Ok(Some(request))
}

fn parse_inline(buf: &[u8]) -> Result<Option<Request>, ProtocolError> {
    let Some(newline) = memchr::memchr(b'\n', buf) else {
        if buf.len() > INLINE_MAX_BYTES {
            return Err(ProtocolError::new("too big inline request"));
        }
        return Ok(None);
    };
    let line_end = match newline > 0 && buf[newline - 1] == b'\r' {
        true => newline - 1,
        false => newline,
    };
    let mut request = split_inline(&buf[..line_end])
        .ok_or_else(|| ProtocolError::new("unbalanced quotes in request"))?;
    request.consumed = newline + 1;
    Ok(Some(request))
}

/// The words of an inline command, as Redis's `sdssplitargs` splits them: separated by
/// blanks; a word in double quotes takes `\n`, `\t`, `\xHH`-style escapes, one in single quotes
/// only `\'`; a closing quote must be followed by a blank or the end. None for unbalanced
/// quotes.
fn split_inline(line: &[u8]) -> Option<Request> {
    let mut request = Request::default();
    let mut i = 0;
    loop {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == line.len() {
            return Some(request);
        }
        let start = i;
        match line[i] {
            b'"' | b'\'' => {
                let quote = line[i];
                let mut word = Vec::new();
                i += 1;
                loop {
                    let &c = line.get(i)?;
                    match c {
                        b'\\' if quote == b'"' => {
                            let hex = |c: u8| (c as char).to_digit(16);
                            let next = *line.get(i + 1)?;
                            match (next, line.get(i + 2), line.get(i + 3)) {
                                (b'x', Some(&h), Some(&l))
                                    if hex(h).is_some() && hex(l).is_some() =>
                                {
                                    word.push((hex(h)? * 16 + hex(l)?) as u8);
                                    i += 4;
                                    continue;
                                }
                                _ => {}
                            }
                            word.push(match next {
                                b'n' => b'\n',
                                b'r' => b'\r',
                                b't' => b'\t',
                                b'b' => 0x08,
                                b'a' => 0x07,
                                other => other,
                            });
                            i += 2;
                        }
                        b'\\' if line.get(i + 1) == Some(&b'\'') => {
                            word.push(b'\'');
                            i += 2;
                        }
                        c if c == quote => {
                            i += 1;
                            // The closing quote must end the word.
                            if line.get(i).is_some_and(|c| !c.is_ascii_whitespace()) {
                                return None;
                            }
                            break;
                        }
                        c => {
                            word.push(c);
                            i += 1;
                        }
                    }
                }
                request.push_unquoted(word);
            }
            _ => {
                while i < line.len() && !line[i].is_ascii_whitespace() {
                    i += 1;
                }
                request.args.push(start..i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(buf: &[u8]) -> Vec<Vec<u8>> {
        let r = parse_request(buf).unwrap().expect("a whole request");
        (0..r.len()).map(|i| r.arg(buf, i).to_vec()).collect()
    }

    #[test]
    fn multibulk_requests_and_their_spans() {
        let buf = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n*1\r\n$4\r\nPING\r\n";
        let first = parse_request(buf).unwrap().unwrap();
        assert_eq!(
            args(buf),
            vec![b"SET".to_vec(), b"k".to_vec(), b"".to_vec()]
        );
        assert_eq!(first.consumed, 26);
        assert_eq!(args(&buf[first.consumed..]), vec![b"PING".to_vec()]);
        // Binary data, CR and LF included, is taken by its length.
        let bin = b"*2\r\n$3\r\nGET\r\n$4\r\na\r\nb\r\n";
        assert_eq!(args(bin)[1], b"a\r\nb".to_vec());
    }

    #[test]
    fn incomplete_requests_wait_for_more() {
        let whole = b"*2\r\n$3\r\nGET\r\n$5\r\nhello\r\n";
        for cut in 0..whole.len() {
            assert_eq!(parse_request(&whole[..cut]), Ok(None), "cut at {cut}");
        }
        assert!(parse_request(whole).unwrap().is_some());
        assert_eq!(parse_request(b"PIN"), Ok(None));
    }

    #[test]
    fn protocol_errors_as_redis_words_them() {
        let err = |b: &[u8]| parse_request(b).unwrap_err().0;
        assert_eq!(err(b"*x\r\n"), "Protocol error: invalid multibulk length");
        assert_eq!(
            err(b"*2\r\n+GET\r\n"),
            "Protocol error: expected '$', got '+'"
        );
        assert_eq!(err(b"*1\r\n$-2\r\n"), "Protocol error: invalid bulk length");
        assert_eq!(
            err(b"*1\r\n$536870913\r\n"),
            "Protocol error: invalid bulk length"
        );
        assert_eq!(
            err(b"SET k \"v\r\n"),
            "Protocol error: unbalanced quotes in request"
        );
        assert_eq!(
            err(b"SET k \"v\"x\r\n"),
            "Protocol error: unbalanced quotes in request"
        );
        let long = vec![b'a'; INLINE_MAX_BYTES + 1];
        assert_eq!(err(&long), "Protocol error: too big inline request");
        let mut long_count = b"*".to_vec();
        long_count.extend(std::iter::repeat_n(b'1', INLINE_MAX_BYTES + 1));
        assert_eq!(
            err(&long_count),
            "Protocol error: too big mbulk count string"
        );
    }

    #[test]
    fn empty_requests_are_skipped_by_length() {
        let r = parse_request(b"*0\r\nPING\r\n").unwrap().unwrap();
        assert!(r.is_empty());
        assert_eq!(r.consumed, 4);
        let r = parse_request(b"*-1\r\n").unwrap().unwrap();
        assert!(r.is_empty());
        let r = parse_request(b"   \r\n").unwrap().unwrap();
        assert!(r.is_empty());
        assert_eq!(r.consumed, 5);
    }

    #[test]
    fn inline_commands_split_as_sdssplitargs() {
        assert_eq!(args(b"PING\r\n"), vec![b"PING".to_vec()]);
        assert_eq!(args(b"PING\n"), vec![b"PING".to_vec()]);
        assert_eq!(
            args(b"SET  key   value\r\n"),
            vec![b"SET".to_vec(), b"key".to_vec(), b"value".to_vec()]
        );
        assert_eq!(args(b"SET k \"a b\\n\\x41\"\r\n")[2], b"a b\nA".to_vec());
        assert_eq!(args(b"ECHO 'it\\'s'\r\n")[1], b"it's".to_vec());
        assert_eq!(args(b"ECHO \"\"\r\n")[1], b"".to_vec());
    }
}
