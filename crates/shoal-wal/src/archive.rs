//! Archiving of completed segments and archive recovery, PostgreSQL's way: an archiver copies
//! every segment the writer has finished with somewhere safe (`archive_command` in shoal-sql),
//! and `archive_status/NAME.done` marks a segment as copied. While archiving is on, checkpoints
//! remove no segment without its mark (`WalOptions::keep_unarchived`). A restore fetches the
//! segments back one after another (`restore_command`): a segment is named by where it starts,
//! which is where the one before it ends (`segment_end_lsn`).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{ReadError, WalError};
use crate::segment::{self, WAL_DIR_NAME};
use crate::Lsn;

/// Subdirectory of the log directory holding the `.done` marks.
const STATUS_DIR_NAME: &str = "archive_status";

/// The log directory of the data directory `dir`.
pub fn wal_dir(dir: &Path) -> PathBuf {
    dir.join(WAL_DIR_NAME)
}

/// File name of the segment starting at `base_lsn` (what `%f` stands for).
pub fn segment_file_name(base_lsn: Lsn) -> String {
    segment::segment_file_name(base_lsn)
}

fn done_mark(wal_dir: &Path, name: &str) -> PathBuf {
    wal_dir.join(STATUS_DIR_NAME).join(format!("{name}.done"))
}

pub(crate) fn is_archived(wal_dir: &Path, name: &str) -> bool {
    done_mark(wal_dir, name).exists()
}

/// Forgets a removed segment's mark.
pub(crate) fn forget(wal_dir: &Path, name: &str) {
    let _ = fs::remove_file(done_mark(wal_dir, name));
}

/// The segments of `dir`'s log, ordered by base LSN: (base LSN, path).
pub fn segments(dir: &Path) -> io::Result<Vec<(Lsn, PathBuf)>> {
    segment::list_segments(&wal_dir(dir))
}

/// The segments of `dir`'s log that are complete (they start before `current_base_lsn`, the
/// segment being written) and not yet archived, oldest first: (file name, path).
pub fn segments_to_archive(
    dir: &Path,
    current_base_lsn: Lsn,
) -> io::Result<Vec<(String, PathBuf)>> {
    let wal_dir = wal_dir(dir);
    Ok(segment::list_segments(&wal_dir)?
        .into_iter()
        .filter(|(base, _)| *base < current_base_lsn)
        .map(|(base, path)| (segment::segment_file_name(base), path))
        .filter(|(name, _)| !is_archived(&wal_dir, name))
        .collect())
}

/// Marks segment `name` of `dir`'s log as archived.
pub fn mark_archived(dir: &Path, name: &str) -> io::Result<()> {
    let status = wal_dir(dir).join(STATUS_DIR_NAME);
    fs::create_dir_all(&status)?;
    fs::write(done_mark(&wal_dir(dir), name), b"")?;
    segment::sync_dir(&status)
}

/// Where the log in segment file `path` ends: the end LSN of its last whole batch.
pub fn segment_end_lsn(path: &Path) -> Result<Lsn, WalError> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let Some(base) = segment::parse_segment_file_name(name) else {
        return Err(WalError::Io(format!(
            "\"{}\" is not named as a log segment",
            path.display()
        )));
    };
    let data = fs::read(path)
        .map_err(|e| WalError::Io(format!("could not read file \"{}\": {e}", path.display())))?;
    let mut summary = crate::LogReadSummary::default();
    let end = crate::reader::read_segment(
        path,
        &data,
        base,
        true,
        Lsn::MAX,
        &mut |_, _| Ok::<(), std::convert::Infallible>(()),
        &mut summary,
    )
    .map_err(|e| match e {
        ReadError::Wal(e) => e,
        ReadError::Visitor(never) => match never {},
    })?;
    Ok(end.end_lsn)
}
