//! The file format of one checkpoint part (`table_<id>_<part>.dat`): blocks of about 1 MiB of
//! rows, each with a 12-byte header (row count, payload bytes, CRC32C over both and the payload),
//! then a 40-byte footer (table, part, CRC, row count, data bytes, magic) so a truncated or
//! swapped file is detected before any row is trusted. Rows are `row id u64, length u32, bytes`.
//! Loading reads a block at a time into one reused buffer and hands rows out as slices of it,
//! so it costs no allocation and no syscall per row.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use shoal_storage::TableId;

use crate::error::WalError;

const BLOCK_HEADER_BYTES: usize = 12;
const BLOCK_PAYLOAD_TARGET_BYTES: usize = 1 << 20;
const ROW_FIXED_BYTES: usize = 12;
pub(crate) const FOOTER_BYTES: usize = 40;
const FOOTER_MAGIC: u64 = u64::from_le_bytes(*b"SHOALCKP");

/// Writes one part file block by block.
pub(crate) struct PartWriter {
    file: File,
    /// `BLOCK_HEADER_BYTES` reserved, then the rows of the block being filled.
    block: Vec<u8>,
    block_rows: u32,
    pub rows: u64,
    pub data_bytes: u64,
}

impl PartWriter {
    pub fn new(file: File) -> PartWriter {
        let mut block = Vec::with_capacity(BLOCK_HEADER_BYTES + BLOCK_PAYLOAD_TARGET_BYTES + 4096);
        block.resize(BLOCK_HEADER_BYTES, 0);
        PartWriter {
            file,
            block,
            block_rows: 0,
            rows: 0,
            data_bytes: 0,
        }
    }

    pub fn push(&mut self, row_id: u64, row: &[u8]) -> io::Result<()> {
        let payload_bytes = self.block.len() - BLOCK_HEADER_BYTES;
        if self.block_rows > 0
            && payload_bytes + ROW_FIXED_BYTES + row.len() > BLOCK_PAYLOAD_TARGET_BYTES
        {
            self.write_block()?;
        }
        if row.len() > u32::MAX as usize - ROW_FIXED_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "row larger than 4 GiB",
            ));
        }
        self.block.extend_from_slice(&row_id.to_le_bytes());
        self.block
            .extend_from_slice(&(row.len() as u32).to_le_bytes());
        self.block.extend_from_slice(row);
        self.block_rows += 1;
        self.rows += 1;
        Ok(())
    }

    fn write_block(&mut self) -> io::Result<()> {
        let payload_bytes = self.block.len() - BLOCK_HEADER_BYTES;
        assert!(
            payload_bytes <= u32::MAX as usize,
            "checkpoint block too large"
        );
        self.block[0..4].copy_from_slice(&self.block_rows.to_le_bytes());
        self.block[4..8].copy_from_slice(&(payload_bytes as u32).to_le_bytes());
        let crc = crc32c::crc32c_append(
            crc32c::crc32c(&self.block[..8]),
            &self.block[BLOCK_HEADER_BYTES..],
        );
        self.block[8..12].copy_from_slice(&crc.to_le_bytes());
        self.file.write_all(&self.block)?;
        self.data_bytes += self.block.len() as u64;
        self.block.truncate(BLOCK_HEADER_BYTES);
        self.block_rows = 0;
        Ok(())
    }

    /// Writes the last block and the footer and syncs the file. Returns the file size.
    pub fn finish(mut self, table: TableId, part: u32) -> io::Result<u64> {
        if self.block_rows > 0 {
            self.write_block()?;
        }
        let footer = encode_footer(table, part, self.rows, self.data_bytes);
        self.file.write_all(&footer)?;
        self.file.sync_all()?;
        Ok(self.data_bytes + FOOTER_BYTES as u64)
    }
}

fn encode_footer(table: TableId, part: u32, rows: u64, data_bytes: u64) -> [u8; FOOTER_BYTES] {
    let mut f = [0u8; FOOTER_BYTES];
    f[0..8].copy_from_slice(&table.to_le_bytes());
    f[8..12].copy_from_slice(&part.to_le_bytes());
    f[16..24].copy_from_slice(&rows.to_le_bytes());
    f[24..32].copy_from_slice(&data_bytes.to_le_bytes());
    f[32..40].copy_from_slice(&FOOTER_MAGIC.to_le_bytes());
    let crc = footer_crc(&f);
    f[12..16].copy_from_slice(&crc.to_le_bytes());
    f
}

fn footer_crc(f: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&f[..12]), &f[16..])
}

/// The rows of one checked block, `(row id, row bytes)`, handed to the loader's sink together
/// so it can take its locks once per block rather than once per row.
pub type BlockRows<'a> = [(u64, &'a [u8])];

/// Reads and checks one part file, calling `sink(rows)` for every block's rows. `expected_bytes`
/// is the size the manifest recorded. `buf` is the caller's reusable read buffer. Returns the
/// number of rows.
pub(crate) fn load_part(
    path: &Path,
    table: TableId,
    part: u32,
    expected_bytes: u64,
    buf: &mut Vec<u8>,
    sink: &mut dyn FnMut(&BlockRows),
) -> Result<u64, WalError> {
    let corrupt = |offset: u64, reason: String| WalError::corrupt(path, offset, reason);
    let file = File::open(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => corrupt(0, "checkpoint file is missing".into()),
        _ => WalError::Io(format!("could not open file \"{}\": {e}", path.display())),
    })?;
    let read_err =
        |e: io::Error| WalError::Io(format!("could not read file \"{}\": {e}", path.display()));
    let file_bytes = file.metadata().map_err(read_err)?.len();
    if file_bytes != expected_bytes {
        return Err(corrupt(
            0,
            format!("file is {file_bytes} bytes, the manifest says {expected_bytes}"),
        ));
    }
    if file_bytes < FOOTER_BYTES as u64 {
        return Err(corrupt(0, "file is shorter than its footer".into()));
    }
    let data_bytes = file_bytes - FOOTER_BYTES as u64;
    let mut footer = [0u8; FOOTER_BYTES];
    file.read_exact_at(&mut footer, data_bytes)
        .map_err(read_err)?;
    let u64_at = |at: usize| u64::from_le_bytes(footer[at..at + 8].try_into().unwrap());
    if u64_at(32) != FOOTER_MAGIC
        || u32::from_le_bytes(footer[12..16].try_into().unwrap()) != footer_crc(&footer)
    {
        return Err(corrupt(
            data_bytes,
            "bad footer (the file is truncated or damaged)".into(),
        ));
    }
    if u64_at(0) != table
        || u32::from_le_bytes(footer[8..12].try_into().unwrap()) != part
        || u64_at(24) != data_bytes
    {
        return Err(corrupt(
            data_bytes,
            format!("footer does not describe table {table} part {part}"),
        ));
    }
    let rows = read_blocks(&file, data_bytes, buf, sink).map_err(|err| match err {
        BlockError::Io(e) => read_err(e),
        BlockError::Bad(offset, reason) => corrupt(offset, reason),
    })?;
    if rows != u64_at(16) {
        return Err(corrupt(
            data_bytes,
            format!("file holds {rows} rows, its footer says {}", u64_at(16)),
        ));
    }
    Ok(rows)
}

enum BlockError {
    Io(io::Error),
    Bad(u64, String),
}

/// Reads the blocks in `0..data_bytes` one at a time into `buf`, checking each block's CRC
/// before any of its rows reach `sink`. One read per block fetches its payload and the next
/// block's header. Why a block at a time: a block (~1 MiB) is then checked and decoded while
/// it is still in this core's cache. With reads of 8 MiB, the copy out of the page cache was an
/// eighth of a restart's samples, because the buffer's lines were evicted before the check and
/// the decode read them. `buf` keeps the size of the largest block read plus a header: ~1 MiB,
/// or one row's size for a row larger than a block.
fn read_blocks(
    file: &File,
    data_bytes: u64,
    buf: &mut Vec<u8>,
    sink: &mut dyn FnMut(&BlockRows),
) -> Result<u64, BlockError> {
    let cut_short = |offset: u64| BlockError::Bad(offset, "last block is cut short".into());
    let mut rows = 0u64;
    let mut block_offset = 0u64;
    // The header of the block at `block_offset`, once the read of the block before fetched it.
    let mut next_header: Option<[u8; BLOCK_HEADER_BYTES]> = None;
    while block_offset < data_bytes {
        if data_bytes - block_offset < BLOCK_HEADER_BYTES as u64 {
            return Err(cut_short(block_offset));
        }
        let header = match next_header.take() {
            Some(header) => header,
            None => {
                let mut header = [0u8; BLOCK_HEADER_BYTES];
                file.read_exact_at(&mut header, block_offset)
                    .map_err(BlockError::Io)?;
                header
            }
        };
        let payload_bytes = u32::from_le_bytes(header[4..8].try_into().unwrap()) as u64;
        let block_end = block_offset + BLOCK_HEADER_BYTES as u64 + payload_bytes;
        if block_end > data_bytes {
            return Err(cut_short(block_offset));
        }
        // A part of a header after the block is left for the next pass to report, once this
        // block's rows are in.
        let next_header_bytes = if data_bytes - block_end >= BLOCK_HEADER_BYTES as u64 {
            BLOCK_HEADER_BYTES
        } else {
            0
        };
        let block_bytes = BLOCK_HEADER_BYTES + payload_bytes as usize;
        buf.resize(block_bytes + next_header_bytes, 0);
        buf[..BLOCK_HEADER_BYTES].copy_from_slice(&header);
        file.read_exact_at(
            &mut buf[BLOCK_HEADER_BYTES..],
            block_offset + BLOCK_HEADER_BYTES as u64,
        )
        .map_err(BlockError::Io)?;
        if next_header_bytes > 0 {
            next_header = Some(buf[block_bytes..].try_into().expect("a whole header"));
        }
        rows += parse_block(&buf[..block_bytes], sink)
            .map_err(|reason| BlockError::Bad(block_offset, reason))?;
        block_offset = block_end;
    }
    Ok(rows)
}

/// Checks one block and feeds its rows to `sink`; returns its row count.
fn parse_block(block: &[u8], sink: &mut dyn FnMut(&BlockRows)) -> Result<u64, String> {
    let row_count = u32::from_le_bytes(block[0..4].try_into().unwrap());
    let crc = u32::from_le_bytes(block[8..12].try_into().unwrap());
    if crc32c::crc32c_append(crc32c::crc32c(&block[..8]), &block[BLOCK_HEADER_BYTES..]) != crc {
        return Err("block checksum mismatch".into());
    }
    let mut rest = &block[BLOCK_HEADER_BYTES..];
    let mut rows = Vec::with_capacity(row_count as usize);
    for _ in 0..row_count {
        if rest.len() < ROW_FIXED_BYTES {
            return Err("row runs past the end of its block".into());
        }
        let row_id = u64::from_le_bytes(rest[0..8].try_into().unwrap());
        let len = u32::from_le_bytes(rest[8..12].try_into().unwrap()) as usize;
        if rest.len() - ROW_FIXED_BYTES < len {
            return Err("row runs past the end of its block".into());
        }
        rows.push((row_id, &rest[ROW_FIXED_BYTES..ROW_FIXED_BYTES + len]));
        rest = &rest[ROW_FIXED_BYTES + len..];
    }
    if !rest.is_empty() {
        return Err(format!(
            "{} bytes left after the last row of the block",
            rest.len()
        ));
    }
    sink(&rows);
    Ok(row_count as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A part of several blocks (one row larger than a block's target), read back whole, and
    /// read as if the file ended at its start, inside the first header, inside a block's
    /// payload (the large one's too) or inside the next block's header. One buffer serves all
    /// reads, as a loading thread's does.
    #[test]
    fn blocks_read_one_at_a_time_and_a_short_end_is_named() {
        let path = std::env::temp_dir().join(format!("shoal-part-file-{}", std::process::id()));
        let rows: Vec<(u64, Vec<u8>)> = (0..5_000u64)
            .map(|i| {
                let len = if i == 10 {
                    (1 << 20) + 3
                } else {
                    (i % 700) as usize
                };
                (i * 3, vec![i as u8; len])
            })
            .collect();
        let mut writer = PartWriter::new(File::create(&path).unwrap());
        for (row_id, row) in &rows {
            writer.push(*row_id, row).unwrap();
        }
        let file_bytes = writer.finish(9, 0).unwrap();
        let data_bytes = file_bytes - FOOTER_BYTES as u64;
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let file = tempfile_with(&bytes);

        let mut buf = Vec::new();
        let mut read = |data_bytes: u64| {
            let (mut got, mut blocks) = (Vec::new(), 0);
            let result = read_blocks(&file, data_bytes, &mut buf, &mut |block| {
                blocks += 1;
                got.extend(block.iter().map(|&(id, row)| (id, row.to_vec())));
            });
            (result, got, blocks)
        };
        let (result, got, blocks) = read(data_bytes);
        assert_eq!(result.ok(), Some(rows.len() as u64));
        assert!(got == rows, "rows differ after the round trip");
        assert!(blocks > 3, "only {blocks} blocks");
        assert_eq!(read(0).0.ok(), Some(0));

        // Where each block ends, from the headers.
        let mut block_ends = vec![0u64];
        while *block_ends.last().unwrap() < data_bytes {
            let at = *block_ends.last().unwrap() as usize;
            let payload_bytes = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap());
            block_ends.push(at as u64 + BLOCK_HEADER_BYTES as u64 + u64::from(payload_bytes));
        }
        let largest = (1..block_ends.len())
            .max_by_key(|&i| block_ends[i] - block_ends[i - 1])
            .unwrap();
        assert!(block_ends[largest] - block_ends[largest - 1] > 1 << 20);
        let cuts = [
            (5, 0),
            (block_ends[1] - 1, 0),
            (block_ends[largest] - 7, block_ends[largest - 1]),
            (block_ends[1] + 5, block_ends[1]),
        ];
        for (end, cut_at) in cuts {
            let (result, got, _) = read(end);
            match result {
                Err(BlockError::Bad(offset, reason)) => {
                    assert_eq!(
                        (offset, reason.as_str()),
                        (cut_at, "last block is cut short")
                    );
                }
                Err(BlockError::Io(e)) => panic!("a file ending at {end}: {e}"),
                Ok(n) => panic!("a file ending at {end} read {n} rows"),
            }
            // The blocks before the cut were read.
            assert!(got.len() <= rows.len() && got[..] == rows[..got.len()]);
        }
    }

    /// An unlinked file holding `bytes`: nothing is left behind should the test fail.
    fn tempfile_with(bytes: &[u8]) -> File {
        let path = std::env::temp_dir().join(format!("shoal-part-copy-{}", std::process::id()));
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        file.write_all(bytes).unwrap();
        file
    }
}
