//! Replies, written in the connection's protocol: RESP2 until the client says `HELLO 3`, then
//! RESP3. The two differ in how they write nulls, maps, sets, doubles and booleans; a command
//! writes its reply once, through `ReplyWriter`, and gets the right form for either.

use std::io::Write;

/// The protocol version a connection speaks (`HELLO 2` or `HELLO 3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    #[default]
    Resp2,
    Resp3,
}

/// Appends replies to an output buffer, which the connection writes out once per batch of
/// pipelined commands.
pub struct ReplyWriter<'a> {
    pub out: &'a mut Vec<u8>,
    pub protocol: Protocol,
}

impl<'a> ReplyWriter<'a> {
    pub fn new(out: &'a mut Vec<u8>, protocol: Protocol) -> Self {
        ReplyWriter { out, protocol }
    }

    fn line(&mut self, prefix: u8, text: &[u8]) {
        self.out.push(prefix);
        self.out.extend_from_slice(text);
        self.out.extend_from_slice(b"\r\n");
    }

    fn header(&mut self, prefix: u8, n: i64) {
        self.out.push(prefix);
        let _ = write!(self.out, "{n}");
        self.out.extend_from_slice(b"\r\n");
    }

    /// `+OK`: a status. Line breaks would end the reply early; Redis replaces them by spaces.
    pub fn simple(&mut self, text: &str) {
        let clean: Vec<u8> = text
            .bytes()
            .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b })
            .collect();
        self.line(b'+', &clean);
    }

    pub fn ok(&mut self) {
        self.out.extend_from_slice(b"+OK\r\n");
    }

    /// An error: `message` starts with its code (`ERR`, `WRONGTYPE`, ...), as Redis's do.
    pub fn error(&mut self, message: &str) {
        let clean: Vec<u8> = message
            .bytes()
            .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b })
            .collect();
        self.line(b'-', &clean);
    }

    pub fn integer(&mut self, n: i64) {
        self.header(b':', n);
    }

    pub fn bulk(&mut self, bytes: &[u8]) {
        self.header(b'$', bytes.len() as i64);
        self.out.extend_from_slice(bytes);
        self.out.extend_from_slice(b"\r\n");
    }

    /// A missing value (GET of no key).
    pub fn null(&mut self) {
        match self.protocol {
            Protocol::Resp2 => self.out.extend_from_slice(b"$-1\r\n"),
            Protocol::Resp3 => self.out.extend_from_slice(b"_\r\n"),
        }
    }

    /// A missing array (EXEC after a WATCHed key changed, a BLPOP that timed out).
    pub fn null_array(&mut self) {
        match self.protocol {
            Protocol::Resp2 => self.out.extend_from_slice(b"*-1\r\n"),
            Protocol::Resp3 => self.out.extend_from_slice(b"_\r\n"),
        }
    }

    /// The start of an array of `n` replies, which follow.
    pub fn array(&mut self, n: usize) {
        self.header(b'*', n as i64);
    }

    /// The start of a map of `n` pairs (key reply, value reply, ...): a flat array in RESP2.
    pub fn map(&mut self, n: usize) {
        match self.protocol {
            Protocol::Resp2 => self.header(b'*', 2 * n as i64),
            Protocol::Resp3 => self.header(b'%', n as i64),
        }
    }

    /// The start of a set of `n` replies: an array in RESP2.
    pub fn set(&mut self, n: usize) {
        match self.protocol {
            Protocol::Resp2 => self.header(b'*', n as i64),
            Protocol::Resp3 => self.header(b'~', n as i64),
        }
    }

    /// A double (ZSCORE, INCRBYFLOAT's kin): a bulk string in RESP2.
    pub fn double(&mut self, value: f64) {
        let text = format_double(value);
        match self.protocol {
            Protocol::Resp2 => self.bulk(text.as_bytes()),
            Protocol::Resp3 => self.line(b',', text.as_bytes()),
        }
    }

    /// A boolean: an integer 1 or 0 in RESP2.
    pub fn boolean(&mut self, value: bool) {
        match (self.protocol, value) {
            (Protocol::Resp2, v) => self.integer(i64::from(v)),
            (Protocol::Resp3, true) => self.out.extend_from_slice(b"#t\r\n"),
            (Protocol::Resp3, false) => self.out.extend_from_slice(b"#f\r\n"),
        }
    }

    /// Text meant for people (INFO, CLIENT LIST): a verbatim string in RESP3, a bulk string
    /// in RESP2.
    pub fn verbatim(&mut self, text: &str) {
        match self.protocol {
            Protocol::Resp2 => self.bulk(text.as_bytes()),
            Protocol::Resp3 => {
                self.header(b'=', text.len() as i64 + 4);
                self.out.extend_from_slice(b"txt:");
                self.out.extend_from_slice(text.as_bytes());
                self.out.extend_from_slice(b"\r\n");
            }
        }
    }
}

/// A double as Redis 7.0 writes it (`%.17g`): 17 significant digits without trailing zeros,
/// in exponent form below 1e-4 and from 1e17 on; `inf`, `-inf` and `nan`.
pub fn format_double(value: f64) -> String {
    if value.is_nan() {
        return "nan".into();
    }
    if value.is_infinite() {
        return if value > 0.0 { "inf" } else { "-inf" }.into();
    }
    const SIGNIFICANT: i32 = 17;
    // The exponent after rounding to 17 significant digits, as %g decides by it.
    let scientific = format!("{:.*e}", (SIGNIFICANT - 1) as usize, value);
    let (mantissa, exponent) = scientific.split_once('e').expect("an exponent");
    let exponent: i32 = exponent.parse().expect("an integer exponent");
    let trim = |s: &str| -> String {
        match s.contains('.') {
            true => s.trim_end_matches('0').trim_end_matches('.').to_string(),
            false => s.to_string(),
        }
    };
    if (-4..SIGNIFICANT).contains(&exponent) {
        let decimals = (SIGNIFICANT - 1 - exponent) as usize;
        trim(&format!("{value:.decimals$}"))
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), exponent.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(protocol: Protocol, f: impl FnOnce(&mut ReplyWriter)) -> String {
        let mut out = Vec::new();
        f(&mut ReplyWriter::new(&mut out, protocol));
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn resp2_and_resp3_forms() {
        for (protocol, null, map, set, double, boolean) in [
            (
                Protocol::Resp2,
                "$-1\r\n",
                "*4\r\n",
                "*2\r\n",
                "$3\r\n1.5\r\n",
                ":1\r\n",
            ),
            (
                Protocol::Resp3,
                "_\r\n",
                "%2\r\n",
                "~2\r\n",
                ",1.5\r\n",
                "#t\r\n",
            ),
        ] {
            assert_eq!(written(protocol, |w| w.null()), null);
            assert_eq!(written(protocol, |w| w.map(2)), map);
            assert_eq!(written(protocol, |w| w.set(2)), set);
            assert_eq!(written(protocol, |w| w.double(1.5)), double);
            assert_eq!(written(protocol, |w| w.boolean(true)), boolean);
        }
        assert_eq!(written(Protocol::Resp2, |w| w.null_array()), "*-1\r\n");
        assert_eq!(
            written(Protocol::Resp3, |w| w.verbatim("a")),
            "=5\r\ntxt:a\r\n"
        );
    }

    #[test]
    fn scalars() {
        let w = |f: fn(&mut ReplyWriter)| written(Protocol::Resp2, f);
        assert_eq!(w(|w| w.ok()), "+OK\r\n");
        assert_eq!(w(|w| w.integer(-42)), ":-42\r\n");
        assert_eq!(w(|w| w.bulk(b"a\r\nb")), "$4\r\na\r\nb\r\n");
        assert_eq!(w(|w| w.bulk(b"")), "$0\r\n\r\n");
        assert_eq!(w(|w| w.error("ERR bad\r\nthing")), "-ERR bad  thing\r\n");
        assert_eq!(w(|w| w.simple("PONG")), "+PONG\r\n");
    }

    /// What Redis 7.0.15 answers to `ZADD z <score> m` then `ZSCORE z m`.
    #[test]
    fn doubles_as_redis_writes_them() {
        for (value, redis) in [
            (3.0, "3"),
            (10.5, "10.5"),
            (1e20, "1e+20"),
            (1.5e-7, "1.4999999999999999e-07"),
            (0.1, "0.10000000000000001"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (1e17, "1e+17"),
            (1e16, "10000000000000000"),
            (0.00001, "1.0000000000000001e-05"),
            (0.000001, "9.9999999999999995e-07"),
            (0.0, "0"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
        ] {
            assert_eq!(format_double(value), redis, "{value}");
        }
    }
}
