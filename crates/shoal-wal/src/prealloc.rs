//! The next segment, zero-filled ahead of time on its own thread.
//!
//! A segment is zero-filled before batches land in it, so that a group commit's fdatasync
//! overwrites allocated blocks instead of growing the file (see `flusher`). Done by the log
//! writer itself, that is a write of 16 MiB of zeros and a sync every 16 MiB of log, a pause of
//! tens of milliseconds for every commit waiting behind it, and half the writer's disk traffic
//! during a bulk load. So, as PostgreSQL's WAL writer does with its segment files, a helper
//! thread prepares the whole next segment while the current one fills: a file of zeros under a
//! name recovery does not read, synced. At rotation the writer puts the segment header in it,
//! syncs, and renames it into place.
//!
//! A disk with little room left is not preallocated on (a full segment's worth of zeros would
//! take the space commits need); the writer then zero-fills in steps as before.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

/// The file being prepared, in the log directory. Not a segment name: recovery and segment
/// removal ignore it, and a start-up overwrites one a crash left behind.
const NEXT_SEGMENT_FILE_NAME: &str = "next-segment.zeros";

/// Preallocate only while the file system keeps this many segments' worth of room besides.
const FREE_SEGMENTS_MIN: u64 = 4;

/// A zero-filled file for the next segment, being made or made.
pub(crate) struct NextSegment {
    job: Option<JoinHandle<io::Result<File>>>,
}

impl NextSegment {
    /// Nothing prepared (tests, or a disk short of space).
    pub(crate) fn none() -> NextSegment {
        NextSegment { job: None }
    }

    /// Starts zero-filling a file of `size_bytes` in `wal_dir` on a new thread, unless the
    /// file system is short of room.
    pub(crate) fn start(wal_dir: &Path, size_bytes: u64) -> NextSegment {
        match available_bytes(wal_dir) {
            Ok(free) if free >= size_bytes.saturating_mul(FREE_SEGMENTS_MIN + 1) => {}
            _ => return NextSegment::none(),
        }
        let path = next_segment_path(wal_dir);
        let job = std::thread::Builder::new()
            .name("shoal-wal-prealloc".into())
            .spawn(move || zero_filled_file(&path, size_bytes))
            .ok();
        NextSegment { job }
    }

    /// The prepared file (open for writing, zero-filled and synced), if it is ready; `None` if
    /// it is still being made (it stays for a later call) or could not be made.
    pub(crate) fn take_ready(&mut self) -> Option<File> {
        if !self.job.as_ref()?.is_finished() {
            return None;
        }
        match self.job.take()?.join() {
            Ok(Ok(file)) => Some(file),
            Ok(Err(e)) => {
                tracing::warn!("could not zero-fill the next log segment ahead: {e}");
                None
            }
            Err(_) => {
                tracing::warn!("the thread zero-filling the next log segment panicked");
                None
            }
        }
    }

    /// Whether a job is under way or done and not yet taken.
    pub(crate) fn is_pending(&self) -> bool {
        self.job.is_some()
    }
}

pub(crate) fn next_segment_path(wal_dir: &Path) -> PathBuf {
    wal_dir.join(NEXT_SEGMENT_FILE_NAME)
}

/// Writes `size_bytes` of zeros to a fresh file at `path` and syncs it; removes it on failure.
fn zero_filled_file(path: &Path, size_bytes: u64) -> io::Result<File> {
    let filled = (|| {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        crate::segment::write_zeros(&file, 0, size_bytes)?;
        file.sync_data()?;
        Ok(file)
    })();
    if filled.is_err() {
        let _ = fs::remove_file(path);
    }
    filled
}

/// Bytes an unprivileged writer may still use on the file system holding `dir`.
fn available_bytes(dir: &Path) -> io::Result<u64> {
    let stats = rustix::fs::statvfs(dir)?;
    Ok(stats.f_bavail.saturating_mul(stats.f_frsize))
}
