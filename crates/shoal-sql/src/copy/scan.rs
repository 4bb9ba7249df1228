//! Finds the bytes that matter to field splitting (delimiter, newline, quote) in a chunk of
//! COPY data, 64 bytes at a time: one pass of byte compares turns a block into a bit mask,
//! and each field end is then a count of trailing zeros. Fields of a CSV file are short (a
//! few bytes), so a search call per field would spend more on its own set-up than on the
//! bytes it looks at.

const BLOCK_BYTES: usize = 64;

/// A forward-only cursor over the positions of three byte values in `bytes`.
pub struct ByteScanner<'a> {
    bytes: &'a [u8],
    wanted: [u8; 3],
    /// Start of the block `mask` describes.
    block_start: usize,
    /// Bit i is set when `bytes[block_start + i]` is one of `wanted`.
    mask: u64,
}

impl<'a> ByteScanner<'a> {
    pub fn new(bytes: &'a [u8], wanted: [u8; 3]) -> Self {
        let mut s = ByteScanner {
            bytes,
            wanted,
            block_start: 0,
            mask: 0,
        };
        s.mask = s.block_mask(0);
        s
    }

    /// The first position at or after `from` that holds one of the wanted bytes, or
    /// `bytes.len()` when there is none. `from` must not go back to an earlier block than the
    /// previous call's.
    #[inline]
    pub fn find(&mut self, from: usize) -> usize {
        debug_assert!(from >= self.block_start, "the scanner only moves forward");
        if from >= self.block_start + BLOCK_BYTES {
            if from >= self.bytes.len() {
                return self.bytes.len();
            }
            self.block_start = from - from % BLOCK_BYTES;
            self.mask = self.block_mask(self.block_start);
        }
        let mut mask = self.mask & (u64::MAX << (from - self.block_start));
        while mask == 0 {
            self.block_start += BLOCK_BYTES;
            if self.block_start >= self.bytes.len() {
                // Park on the last block so that later calls stay cheap.
                self.block_start -= BLOCK_BYTES;
                return self.bytes.len();
            }
            self.mask = self.block_mask(self.block_start);
            mask = self.mask;
        }
        self.block_start + mask.trailing_zeros() as usize
    }

    fn block_mask(&self, start: usize) -> u64 {
        match self.bytes.get(start..start + BLOCK_BYTES) {
            Some(block) => block_mask(block.try_into().expect("a whole block"), self.wanted),
            None => {
                let [a, b, c] = self.wanted;
                let tail = &self.bytes[start.min(self.bytes.len())..];
                tail.iter().enumerate().fold(0u64, |mask, (i, &x)| {
                    mask | u64::from((x == a) | (x == b) | (x == c)) << i
                })
            }
        }
    }
}

/// Bit i is set when `block[i]` is one of `wanted`. SSE2 is part of every x86-64 CPU.
#[cfg(target_arch = "x86_64")]
#[inline]
fn block_mask(block: &[u8; BLOCK_BYTES], wanted: [u8; 3]) -> u64 {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    // SAFETY: the intrinsics need SSE2, which every x86-64 CPU has (the target enables it
    // unconditionally), and each load reads the 16 bytes of one `lane` of `block`.
    unsafe {
        let [a, b, c] = wanted.map(|w| _mm_set1_epi8(w as i8));
        let mut mask = 0u64;
        for (i, lane) in block.chunks_exact(16).enumerate() {
            let v = _mm_loadu_si128(lane.as_ptr().cast::<__m128i>());
            let hits = _mm_or_si128(
                _mm_or_si128(_mm_cmpeq_epi8(v, a), _mm_cmpeq_epi8(v, b)),
                _mm_cmpeq_epi8(v, c),
            );
            mask |= u64::from(_mm_movemask_epi8(hits) as u16) << (16 * i);
        }
        mask
    }
}

/// Bit i is set when `block[i]` is one of `wanted`: eight bytes at a time in a word, each
/// byte that matches leaves its high bit set, and a multiplication gathers those bits.
#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn block_mask(block: &[u8; BLOCK_BYTES], wanted: [u8; 3]) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let zero_bytes = |x: u64| !(((x & LOW7) + LOW7) | x | LOW7);
    let mut mask = 0u64;
    for (i, word) in block.chunks_exact(8).enumerate() {
        let w = u64::from_le_bytes(word.try_into().expect("eight bytes"));
        let hits = wanted.iter().fold(0u64, |h, &x| {
            h | zero_bytes(w ^ (u64::from(x) * 0x0101_0101_0101_0101))
        });
        let packed = ((hits >> 7) * 0x0102_0408_1020_4080) >> 56;
        mask |= packed << (8 * i);
    }
    mask
}

#[cfg(test)]
mod tests {
    use super::*;

    fn positions(data: &[u8], step_from: impl Fn(usize) -> usize) -> Vec<usize> {
        let mut s = ByteScanner::new(data, [b',', b'\n', b'"']);
        let mut out = Vec::new();
        let mut from = 0;
        loop {
            let at = s.find(from);
            if at == data.len() {
                return out;
            }
            out.push(at);
            from = step_from(at);
        }
    }

    #[test]
    fn finds_every_wanted_byte_across_blocks() {
        for len in [0, 1, 63, 64, 65, 127, 128, 129, 300] {
            let data: Vec<u8> = (0..len)
                .map(|i| match i % 7 {
                    0 => b',',
                    3 if i % 5 == 0 => b'\n',
                    5 if i % 3 == 0 => b'"',
                    _ => b'x',
                })
                .collect();
            let expected: Vec<usize> = (0..len)
                .filter(|i| matches!(data[*i], b',' | b'\n' | b'"'))
                .collect();
            assert_eq!(positions(&data, |at| at + 1), expected, "len {len}");
        }
    }

    #[test]
    fn skips_long_stretches_and_jumps_ahead() {
        let mut data = vec![b'x'; 1000];
        data[5] = b',';
        data[700] = b'\n';
        data[999] = b'"';
        assert_eq!(positions(&data, |at| at + 1), vec![5, 700, 999]);
        // Jumping past a wanted byte (a quoted field handled elsewhere) skips it.
        let mut s = ByteScanner::new(&data, [b',', b'\n', b'"']);
        assert_eq!(s.find(6), 700);
        assert_eq!(s.find(701), 999);
        assert_eq!(s.find(1000), 1000);
        assert_eq!(s.find(1000), 1000);
    }
}
