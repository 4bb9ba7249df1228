//! The copy an online backup makes of a running server's data directory: the current
//! checkpoint and the log from its start on, up to the last batch that was whole when it was
//! read. The server must keep both from being deleted meanwhile (`pg_backup_start` pins them
//! until `pg_backup_stop`); it goes on writing. A checkpoint directory is never written again
//! once current, so it is copied as it is. The log is copied batch by batch, each checked (its
//! frame and every record's checksum): a batch the writer has not finished, or not begun, ends
//! the copy there, so the copy is always a prefix of the log, which recovery replays like any
//! other; the zero-filled rest of a finished segment is skipped.

use std::fs;
use std::io;
use std::path::Path;

use crate::checkpoint::{read_current_checkpoint, CHECKPOINTS_DIR_NAME, CURRENT_FILE_NAME};
use crate::error::WalError;
use crate::reader::check_batch;
use crate::segment::{
    self, decode_segment_header, BATCH_HEADER_BYTES, SEGMENT_HEADER_BYTES, WAL_DIR_NAME,
};
use crate::Lsn;

/// What `copy_for_backup` copied.
#[derive(Clone, Debug)]
pub struct BackupCopy {
    /// The checkpoint copied; None when the server had written none yet.
    pub checkpoint_id: Option<u64>,
    /// Where the restored server's replay starts.
    pub start_lsn: Lsn,
    /// The end of the last log batch copied: the restored server has every commit before it.
    pub end_lsn: Lsn,
    pub bytes: u64,
}

/// Copies the current checkpoint of `data_dir` and its log into `to` (a new, empty directory),
/// and syncs the copy.
pub fn copy_for_backup(data_dir: &Path, to: &Path) -> Result<BackupCopy, WalError> {
    let io_err = |what: &str, path: &Path, e: io::Error| {
        WalError::from_io(&format!("{what} \"{}\"", path.display()), &e)
    };
    let mut bytes = 0u64;
    let checkpoints = data_dir.join(CHECKPOINTS_DIR_NAME);
    let copied_checkpoints = to.join(CHECKPOINTS_DIR_NAME);
    let current = checkpoints.join(CURRENT_FILE_NAME);
    let (checkpoint_id, start_lsn) = match fs::read_to_string(&current) {
        Ok(text) => {
            let id = u64::from_str_radix(text.trim_end(), 16)
                .map_err(|_| WalError::corrupt(&current, 0, "not a checkpoint id"))?;
            let name = format!("{id:016x}");
            let target = copied_checkpoints.join(&name);
            fs::create_dir_all(&target)
                .map_err(|e| io_err("could not create directory", &target, e))?;
            for entry in fs::read_dir(checkpoints.join(&name))
                .map_err(|e| io_err("could not list directory", &checkpoints, e))?
            {
                let entry =
                    entry.map_err(|e| io_err("could not list directory", &checkpoints, e))?;
                let copied = target.join(entry.file_name());
                bytes += fs::copy(entry.path(), &copied)
                    .map_err(|e| io_err("could not copy file", &entry.path(), e))?;
                sync_file(&copied)?;
            }
            fs::write(copied_checkpoints.join(CURRENT_FILE_NAME), &text)
                .map_err(|e| io_err("could not write file", &copied_checkpoints, e))?;
            sync_file(&copied_checkpoints.join(CURRENT_FILE_NAME))?;
            sync_dir(&target)?;
            sync_dir(&copied_checkpoints)?;
            // Read back: the copy is a checkpoint recovery accepts.
            let manifest = read_current_checkpoint(to)?.expect("CURRENT was just written");
            (Some(id), manifest.start_lsn)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => (None, 0),
        Err(e) => return Err(io_err("could not read file", &current, e)),
    };
    let (log_bytes, end_lsn) = copy_log(
        &data_dir.join(WAL_DIR_NAME),
        &to.join(WAL_DIR_NAME),
        start_lsn,
    )?;
    sync_dir(to)?;
    Ok(BackupCopy {
        checkpoint_id,
        start_lsn,
        end_lsn: end_lsn.max(start_lsn),
        bytes: bytes + log_bytes,
    })
}

/// Copies the segments holding the log from `start_lsn` on, each up to its last whole batch,
/// stopping at the first batch that is not whole. Returns the bytes copied and the log's end.
fn copy_log(wal_dir: &Path, to: &Path, start_lsn: Lsn) -> Result<(u64, Lsn), WalError> {
    let io_err = |what: &str, path: &Path, e: io::Error| {
        WalError::from_io(&format!("{what} \"{}\"", path.display()), &e)
    };
    fs::create_dir_all(to).map_err(|e| io_err("could not create directory", to, e))?;
    let segments = segment::list_segments(wal_dir)
        .map_err(|e| io_err("could not list directory", wal_dir, e))?;
    let (mut bytes, mut end_lsn) = (0u64, 0);
    let mut records = Vec::new();
    for (i, (base_lsn, path)) in segments.iter().enumerate() {
        let next_base = segments.get(i + 1).map(|s| s.0);
        if next_base.is_some_and(|next| next <= start_lsn) {
            continue; // wholly before the checkpoint
        }
        let data = fs::read(path).map_err(|e| io_err("could not read file", path, e))?;
        if decode_segment_header(&data).ok() != Some(*base_lsn) {
            break; // a segment still being created
        }
        let mut whole = SEGMENT_HEADER_BYTES;
        let mut finished = false;
        while whole < data.len() {
            match check_batch(&data[whole..], end_lsn, &mut records) {
                Ok(batch) => {
                    whole += BATCH_HEADER_BYTES + batch.record_bytes as usize;
                    end_lsn = batch.end_lsn;
                }
                Err(_) => {
                    // The zero-filled rest of a segment the writer has moved on from; anything
                    // else is a batch not yet whole, where the copy ends.
                    finished = next_base.is_some() && segment::is_zero_tail(&data[whole..]);
                    break;
                }
            }
        }
        if whole == data.len() {
            finished = next_base.is_some();
        }
        let copied = to.join(path.file_name().expect("a segment file has a name"));
        fs::write(&copied, &data[..whole])
            .map_err(|e| io_err("could not write file", &copied, e))?;
        sync_file(&copied)?;
        bytes += whole as u64;
        if !finished {
            break;
        }
    }
    sync_dir(to)?;
    Ok((bytes, end_lsn))
}

fn sync_file(path: &Path) -> Result<(), WalError> {
    fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| WalError::from_io(&format!("could not fsync file \"{}\"", path.display()), &e))
}

fn sync_dir(dir: &Path) -> Result<(), WalError> {
    segment::sync_dir(dir).map_err(|e| {
        WalError::from_io(
            &format!("could not fsync directory \"{}\"", dir.display()),
            &e,
        )
    })
}
