//! Continuous archiving and point-in-time recovery, with PostgreSQL's settings:
//!
//! - `archive_mode = on` and `archive_command` (a shell command; `%p` is the segment's path,
//!   `%f` its file name): a thread hands every completed log segment to the command, in order,
//!   and marks it archived when the command exits 0 (a failure is retried every second, and
//!   the segment stays in the log directory until then). `pg_switch_wal()` completes the
//!   current segment; `pg_stat_archiver` counts.
//! - A `recovery.signal` file in the data directory (a restored backup) starts archive
//!   recovery: `restore_command` fetches the segments after the backup from the archive, one
//!   after another, and replay stops at `recovery_target_time` if one is set (else at the end of
//!   the archive). The log carries the wall-clock time to the millisecond (clock records), so
//!   replay keeps what committed up to that millisecond. Then a checkpoint makes the result the
//!   new starting point and `recovery.signal` is removed; the log records after the target are
//!   never replayed again, and new segments are named after every archived one.

use std::path::Path;
use std::sync::{Arc, Weak};
use std::time::Duration;

use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use shoal_wal::archive;
use shoal_wal::Lsn;

use crate::engine::Engine;

/// The file whose presence starts archive recovery, as in PostgreSQL 12 and later.
pub const RECOVERY_SIGNAL_FILE: &str = "recovery.signal";

/// How often the archiver looks for completed segments.
const ARCHIVE_POLL: Duration = Duration::from_secs(1);

/// Archive recovery's settings, read at start.
#[derive(Clone, Debug)]
pub struct RestoreOptions {
    /// Fetches archived segment `%f` to path `%p`; None: only the segments in the directory.
    pub restore_command: Option<String>,
    /// Replay stops before the first record logged after this time (microseconds since 1970,
    /// UTC).
    pub target_time: Option<i64>,
}

/// pg_stat_archiver's counters.
#[derive(Clone, Debug, Default)]
pub struct ArchiverStats {
    pub archived_count: u64,
    pub last_archived_wal: Option<String>,
    pub last_archived_time: Option<DateTime<Utc>>,
    pub failed_count: u64,
    pub last_failed_wal: Option<String>,
    pub last_failed_time: Option<DateTime<Utc>>,
}

/// The archiver's state, shared with pg_stat_archiver.
#[derive(Default)]
pub struct Archiver {
    pub stats: Mutex<ArchiverStats>,
}

/// `command` with PostgreSQL's placeholders replaced: `%p` the path, `%f` the file name, `%%`
/// a percent sign.
fn expand(command: &str, path: &Path, name: &str) -> String {
    let mut out = String::with_capacity(command.len() + 64);
    let mut chars = command.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('%', Some('p')) => {
                out.push_str(&path.display().to_string());
                chars.next();
            }
            ('%', Some('f')) => {
                out.push_str(name);
                chars.next();
            }
            ('%', Some('%')) => {
                out.push('%');
                chars.next();
            }
            (c, _) => out.push(c),
        }
    }
    out
}

/// Runs a shell command; Err says how it failed.
fn run_shell(command: &str) -> Result<(), String> {
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .output()
        .map_err(|e| format!("could not run the command: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    Err(format!("{} ({})", output.status, stderr.trim()))
}

/// Starts the archiver thread of a server with `archive_mode = on`.
pub(crate) fn start_archiver(engine: Weak<Engine>) {
    std::thread::Builder::new()
        .name("shoal-archiver".into())
        .spawn(move || loop {
            std::thread::sleep(ARCHIVE_POLL);
            let Some(engine) = engine.upgrade() else {
                return;
            };
            archive_completed_segments(&engine);
        })
        .expect("start the archiver thread");
}

/// Hands each completed, not yet archived segment to archive_command, oldest first, stopping
/// at the first failure.
pub fn archive_completed_segments(engine: &Engine) {
    let Some(d) = &engine.durability else {
        return;
    };
    // Read at each round: archive_command takes effect at a reload, as in PostgreSQL.
    let command = engine
        .config
        .read()
        .value_map()
        .get("archive_command")
        .cloned()
        .unwrap_or_default();
    if command.trim().is_empty() {
        return;
    }
    let segments = match archive::segments_to_archive(&d.data_dir, d.wal.current_segment_base_lsn())
    {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("archiver: could not list the log segments: {e}");
            return;
        }
    };
    for (name, path) in segments {
        let result = run_shell(&expand(&command, &path, &name))
            .and_then(|()| archive::mark_archived(&d.data_dir, &name).map_err(|e| e.to_string()));
        let mut stats = d.archiver.stats.lock();
        match result {
            Ok(()) => {
                stats.archived_count += 1;
                stats.last_archived_wal = Some(name);
                stats.last_archived_time = Some(Utc::now());
            }
            Err(e) => {
                tracing::warn!(
                    "archive command failed for log segment \"{name}\": {e}; retrying in a second"
                );
                stats.failed_count += 1;
                stats.last_failed_wal = Some(name);
                stats.last_failed_time = Some(Utc::now());
                return;
            }
        }
    }
}

/// Archive recovery's first step: brings the segments after the backup into the log
/// directory. Starting with the segment holding `start_lsn` (the checkpoint's), each segment
/// is fetched from the archive by name (an archived copy is complete, where a backup's may end
/// early) or else taken from the directory, and the next one is the segment named after where
/// it ends; the first name neither has ends the log. Returns the segments fetched.
pub(crate) fn fetch_archived_segments(
    data_dir: &Path,
    restore_command: &str,
    start_lsn: Lsn,
) -> Result<usize, String> {
    let wal_dir = archive::wal_dir(data_dir);
    std::fs::create_dir_all(&wal_dir).map_err(|e| e.to_string())?;
    let local = archive::segments(data_dir).map_err(|e| e.to_string())?;
    let mut base = local
        .iter()
        .rev()
        .find(|(b, _)| *b <= start_lsn)
        .map(|(b, _)| *b)
        .unwrap_or(start_lsn);
    let mut fetched = 0;
    loop {
        let name = archive::segment_file_name(base);
        let target = wal_dir.join(&name);
        let partial = wal_dir.join("RECOVERYXLOG");
        let _ = std::fs::remove_file(&partial);
        let got = run_shell(&expand(restore_command, &partial, &name)).is_ok() && partial.exists();
        if got {
            std::fs::rename(&partial, &target).map_err(|e| e.to_string())?;
            fetched += 1;
            tracing::info!("restored log file \"{name}\" from archive");
        } else if !target.exists() {
            return Ok(fetched);
        }
        let end = archive::segment_end_lsn(&target).map_err(|e| e.to_string())?;
        if end <= base {
            return Ok(fetched);
        }
        base = end;
    }
}

/// Archive recovery's last step, once a checkpoint holds the recovered state: the segments
/// of the old history are all in the archive already (marked so, lest they be archived again
/// under names the archive holds), and `recovery.signal` goes.
pub(crate) fn finish_archive_recovery(engine: &Arc<Engine>) -> Result<(), String> {
    let Some(d) = &engine.durability else {
        return Ok(());
    };
    let current = d.wal.current_segment_base_lsn();
    for (name, _) in
        archive::segments_to_archive(&d.data_dir, current).map_err(|e| e.to_string())?
    {
        archive::mark_archived(&d.data_dir, &name).map_err(|e| e.to_string())?;
    }
    std::fs::remove_file(d.data_dir.join(RECOVERY_SIGNAL_FILE)).map_err(|e| e.to_string())?;
    tracing::info!("archive recovery complete");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_replaced_as_postgresql_does() {
        assert_eq!(
            expand(
                "cp %p /arch/%f && echo 100%%",
                Path::new("/d/wal/x.wal"),
                "x.wal"
            ),
            "cp /d/wal/x.wal /arch/x.wal && echo 100%"
        );
    }
}
