//! Cuts a stream of COPY data into chunks of whole records, so that each chunk can be parsed
//! on its own thread. A record ends at a newline; in CSV, only at a newline outside quotes,
//! since a quoted field may hold newlines. The splitter looks at each byte once, and keeps
//! its quoting state between calls because a CopyData message may end anywhere, even inside
//! a quoted field. A chunk ends once it holds `chunk_bytes` bytes or `chunk_records` records:
//! a load into a column table cuts a chunk per segment, so a parse job builds a whole
//! segment and nothing has to be copied together afterwards.

use super::CopyFormat;

/// How much data a parse job gets when only its size bounds it (row tables): large enough
/// that the hand-off costs nothing next to the parsing, small enough that the parse workers
/// all have work while the client sends.
pub const CHUNK_BYTES: usize = 1 << 20;

/// The bound on a chunk cut per segment (column tables), in case records are so long that a
/// segment's worth would hold too much input at once; such a chunk makes a partial segment.
pub const SEGMENT_CHUNK_BYTES_MAX: usize = 64 << 20;

#[derive(Debug)]
pub struct RecordSplitter {
    csv: bool,
    quote: u8,
    escape: u8,
    in_quotes: bool,
    /// Bytes of the unconsumed data already looked at.
    scanned: usize,
    chunk_bytes: usize,
    chunk_records: usize,
    /// Records the current chunk (the one after the last cut) may hold: `chunk_records`, plus
    /// one for the first chunk when it starts with a header line.
    quota: usize,
    /// Records ended in the scanned data after the last cut.
    records: usize,
}

impl RecordSplitter {
    /// `header` counts the first record outside the first chunk's `chunk_records`.
    pub fn new(
        format: &CopyFormat,
        chunk_bytes: usize,
        chunk_records: usize,
        header: bool,
    ) -> Self {
        assert!(chunk_bytes > 0, "a chunk holds at least one byte");
        assert!(chunk_records > 0, "a chunk holds at least one record");
        RecordSplitter {
            csv: format.csv,
            quote: format.quote as u8,
            escape: format.escape as u8,
            in_quotes: false,
            scanned: 0,
            chunk_bytes,
            chunk_records,
            quota: chunk_records.saturating_add(usize::from(header)),
            records: 0,
        }
    }

    /// Offsets in `data` (the unconsumed data, which starts at a record) just past a record's
    /// end where chunks end. The caller consumes up to the last one and reports that with
    /// [`RecordSplitter::consumed`].
    pub fn cuts(&mut self, data: &[u8]) -> Vec<usize> {
        let mut cuts = Vec::new();
        let i = if self.csv {
            self.csv_cuts(data, &mut cuts)
        } else {
            self.text_cuts(data, &mut cuts)
        };
        self.scanned = i;
        cuts
    }

    /// A record ended just before `end`: cuts there if the chunk is full.
    #[inline]
    fn record_ended(&mut self, end: usize, cuts: &mut Vec<usize>) {
        self.records += 1;
        let chunk_start = cuts.last().copied().unwrap_or(0);
        if self.records >= self.quota || end - chunk_start >= self.chunk_bytes {
            cuts.push(end);
            self.records = 0;
            self.quota = self.chunk_records;
        }
    }

    /// Text format escapes newlines inside values, so every newline ends a record.
    fn text_cuts(&mut self, data: &[u8], cuts: &mut Vec<usize>) -> usize {
        let from = self.scanned;
        if self.chunk_records == usize::MAX {
            // Only the size bounds a chunk: jump a chunk ahead instead of visiting each
            // newline.
            let mut i = from;
            loop {
                let chunk_start = cuts.last().copied().unwrap_or(0);
                let at = i.max(chunk_start + self.chunk_bytes - 1);
                if at >= data.len() {
                    return i;
                }
                match memchr::memchr(b'\n', &data[at..]) {
                    Some(off) => {
                        cuts.push(at + off + 1);
                        i = at + off + 1;
                    }
                    None => return data.len(),
                }
            }
        }
        for off in memchr::memchr_iter(b'\n', &data[from..]) {
            self.record_ended(from + off + 1, cuts);
        }
        data.len()
    }

    fn csv_cuts(&mut self, data: &[u8], cuts: &mut Vec<usize>) -> usize {
        let (quote, escape) = (self.quote, self.escape);
        let mut i = self.scanned;
        while i < data.len() {
            let next = if quote == escape {
                memchr::memchr2(quote, b'\n', &data[i..])
            } else {
                memchr::memchr3(quote, escape, b'\n', &data[i..])
            };
            let Some(off) = next else {
                return data.len();
            };
            let j = i + off;
            let b = data[j];
            if self.in_quotes {
                if b == escape && escape != quote {
                    // An escape counts only before a quote or another escape; it may be the
                    // last byte so far, so wait for the next one.
                    if j + 1 >= data.len() {
                        return j;
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
            } else if b == b'\n' {
                self.record_ended(j + 1, cuts);
            }
            i = j + 1;
        }
        i
    }

    /// The caller dropped the first `n` bytes of the data, `n` being the last cut.
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
        split_records(format, data, step, chunk, usize::MAX, false)
    }

    fn split_records(
        format: &CopyFormat,
        data: &[u8],
        step: usize,
        chunk: usize,
        records: usize,
        header: bool,
    ) -> Vec<Vec<u8>> {
        let mut s = RecordSplitter::new(format, chunk, records, header);
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

    #[test]
    fn record_quota_cuts_whole_segments() {
        let csv_data = b"1,\"a\nb\"\n2,x\n3,y\n4,z\n5,w\n";
        let text_data = b"1\ta\n2\tx\n3\ty\n4\tz\n5\tw\n";
        for step in 1..csv_data.len() {
            let chunks = split_records(&csv(), csv_data, step, 1 << 20, 2, false);
            let texts: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
            assert_eq!(
                texts,
                vec![&b"1,\"a\nb\"\n2,x\n"[..], b"3,y\n4,z\n", b"5,w\n"],
                "step {step}"
            );
            // A header line comes on top of the first chunk's records.
            let chunks = split_records(&csv(), csv_data, step, 1 << 20, 2, true);
            assert_eq!(chunks[0], b"1,\"a\nb\"\n2,x\n3,y\n".to_vec(), "step {step}");
            assert_eq!(chunks[1], b"4,z\n5,w\n".to_vec(), "step {step}");
        }
        for step in 1..text_data.len() {
            let chunks = split_records(&CopyFormat::default(), text_data, step, 1 << 20, 2, false);
            assert_eq!(chunks.len(), 3, "step {step}");
            assert_eq!(chunks[1], b"3\ty\n4\tz\n".to_vec(), "step {step}");
        }
        // The byte bound still holds when records are long.
        let chunks = split_records(&csv(), csv_data, 5, 8, 1000, false);
        assert_eq!(chunks.concat(), csv_data.to_vec());
        assert!(chunks.len() > 1);
    }
}
