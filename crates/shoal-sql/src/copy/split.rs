//! Cuts a stream of COPY data into chunks of whole records, so that each chunk can be parsed
//! on its own thread. A record ends at a newline; in CSV, only at a newline outside quotes,
//! since a quoted field may hold newlines. The splitter looks at each byte once, and keeps
//! its quoting state between calls because a CopyData message may end anywhere, even inside
//! a quoted field.

use super::CopyFormat;

/// How much data a parse job gets: large enough that the hand-off costs nothing next to the
/// parsing, small enough that the parse workers all have work while the client sends.
pub const CHUNK_BYTES: usize = 1 << 20;

#[derive(Debug)]
pub struct RecordSplitter {
    csv: bool,
    quote: u8,
    escape: u8,
    in_quotes: bool,
    /// Bytes of the unconsumed data already looked at.
    scanned: usize,
    chunk_bytes: usize,
}

impl RecordSplitter {
    pub fn new(format: &CopyFormat, chunk_bytes: usize) -> Self {
        assert!(chunk_bytes > 0, "a chunk holds at least one byte");
        RecordSplitter {
            csv: format.csv,
            quote: format.quote as u8,
            escape: format.escape as u8,
            in_quotes: false,
            scanned: 0,
            chunk_bytes,
        }
    }

    /// Offsets in `data` (the unconsumed data, which starts at a record) just past a record's
    /// end, at least `chunk_bytes` apart. The caller consumes up to the last one it takes and
    /// reports that with [`RecordSplitter::consumed`].
    pub fn cuts(&mut self, data: &[u8]) -> Vec<usize> {
        let mut cuts = Vec::new();
        let mut chunk_start = 0;
        let mut i = self.scanned;
        if !self.csv {
            // Text format escapes newlines inside values, so every newline ends a record.
            loop {
                let from = i.max(chunk_start + self.chunk_bytes - 1);
                if from >= data.len() {
                    break;
                }
                match memchr::memchr(b'\n', &data[from..]) {
                    Some(off) => {
                        let cut = from + off + 1;
                        cuts.push(cut);
                        chunk_start = cut;
                        i = cut;
                    }
                    None => {
                        i = data.len();
                        break;
                    }
                }
            }
            self.scanned = i.min(data.len());
            return cuts;
        }
        let (quote, escape) = (self.quote, self.escape);
        while i < data.len() {
            let next = if quote == escape {
                memchr::memchr2(quote, b'\n', &data[i..])
            } else {
                memchr::memchr3(quote, escape, b'\n', &data[i..])
            };
            let Some(off) = next else {
                i = data.len();
                break;
            };
            let j = i + off;
            let b = data[j];
            if self.in_quotes {
                if b == escape && escape != quote {
                    // An escape counts only before a quote or another escape; it may be the
                    // last byte so far, so wait for the next one.
                    if j + 1 >= data.len() {
                        i = j;
                        break;
                    }
                    let after = data[j + 1];
                    i = if after == quote || after == escape {
                        j + 2
                    } else {
                        j + 1
                    };
                    continue;
                }
                if b == quote {
                    // With escape == quote, a doubled quote leaves and re-enters the quotes.
                    self.in_quotes = false;
                }
            } else if b == quote {
                self.in_quotes = true;
            } else if b == b'\n' && j + 1 - chunk_start >= self.chunk_bytes {
                cuts.push(j + 1);
                chunk_start = j + 1;
            }
            i = j + 1;
        }
        self.scanned = i;
        cuts
    }

    /// The caller dropped the first `n` bytes of the data (`n` is one of the cuts).
    pub fn consumed(&mut self, n: usize) {
        assert!(n <= self.scanned, "consumed data that was not scanned");
        self.scanned -= n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv() -> CopyFormat {
        CopyFormat {
            csv: true,
            delimiter: ',',
            null: String::new(),
            ..CopyFormat::default()
        }
    }

    /// Feeds `data` in pieces of `step` bytes and returns the chunks cut.
    fn split(format: &CopyFormat, data: &[u8], step: usize, chunk: usize) -> Vec<Vec<u8>> {
        let mut s = RecordSplitter::new(format, chunk);
        let mut pending = Vec::new();
        let mut out = Vec::new();
        for piece in data.chunks(step) {
            pending.extend_from_slice(piece);
            let cuts = s.cuts(&pending);
            let mut start = 0;
            for c in &cuts {
                out.push(pending[start..*c].to_vec());
                start = *c;
            }
            if let Some(last) = cuts.last() {
                pending.drain(..*last);
                s.consumed(*last);
            }
        }
        if !pending.is_empty() {
            out.push(pending);
        }
        out
    }

    #[test]
    fn csv_never_cuts_inside_quotes() {
        let data = b"1,\"a\nb\"\n2,\"x\"\"\ny\"\n3,z\n";
        for step in 1..data.len() {
            for chunk in 1..6 {
                let chunks = split(&csv(), data, step, chunk);
                assert_eq!(chunks.concat(), data.to_vec());
                for c in &chunks[..chunks.len() - 1] {
                    let text = String::from_utf8(c.clone()).unwrap();
                    assert!(
                        text == "1,\"a\nb\"\n" || text == "2,\"x\"\"\ny\"\n" || text == "3,z\n",
                        "step {step} chunk {chunk}: cut inside a record: {text:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn csv_with_backslash_escape() {
        let f = CopyFormat {
            escape: '\\',
            ..csv()
        };
        let data = b"1,\"a\\\"\nb\"\n2,c\n";
        for step in 1..data.len() {
            let chunks = split(&f, data, step, 1);
            assert_eq!(chunks[0], b"1,\"a\\\"\nb\"\n".to_vec(), "step {step}");
            assert_eq!(chunks[1], b"2,c\n".to_vec());
        }
    }

    #[test]
    fn text_cuts_at_newlines_at_least_a_chunk_apart() {
        let data = b"1\ta\n22\tbb\n333\tccc\n4\n";
        let chunks = split(&CopyFormat::default(), data, 3, 8);
        assert_eq!(chunks.concat(), data.to_vec());
        for c in &chunks[..chunks.len() - 1] {
            assert!(c.len() >= 8 && c.ends_with(b"\n"), "{c:?}");
        }
    }
}
