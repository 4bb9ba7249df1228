//! One server per data directory. A second server on the same directory would append to the
//! same log segments and write checkpoints over the first one's, and each would delete log the
//! other still needs: committed data lost without a message. PostgreSQL refuses to start when
//! `postmaster.pid` names a live process; Shoal holds an exclusive `flock` on `shoal.lock` for
//! as long as it runs. The kernel drops the lock when the process ends, however it ends, so a
//! crash (`kill -9`) leaves no stale lock to clean up by hand. The file holds the holder's
//! process id, for the message a second server prints.

use std::fs::{File, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::Path;

use crate::error::WalError;

/// The lock file's name in the data directory.
pub const DATA_DIR_LOCK_FILE: &str = "shoal.lock";

/// How long a lock held by this same process is waited for (see `acquire`).
const OWN_PROCESS_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The lock on a data directory; held until dropped (or the process ends).
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
}

impl DataDirLock {
    /// Creates `data_dir` if needed and locks it, or says which process holds it.
    pub fn acquire(data_dir: &Path) -> Result<DataDirLock, WalError> {
        std::fs::create_dir_all(data_dir).map_err(|e| {
            WalError::Io(format!(
                "could not create data directory \"{}\": {e}",
                data_dir.display()
            ))
        })?;
        let path = data_dir.join(DATA_DIR_LOCK_FILE);
        let io = |what: &str, e: std::io::Error| {
            WalError::Io(format!(
                "could not {what} lock file \"{}\": {e}",
                path.display()
            ))
        };
        let mut file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| io("open", e))?;
        // An engine of this same process that is being dropped (a restart inside one process,
        // as the tests do) lets go once its last reference goes, which a background thread may
        // hold a moment longer: wait for it, a while. Another process is refused at once.
        let own_pid = std::process::id().to_string();
        let waited = std::time::Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) => {
                    let mut holder = String::new();
                    file.rewind().map_err(|e| io("read", e))?;
                    let _ = file.read_to_string(&mut holder);
                    let holder = holder.trim();
                    if holder == own_pid && waited.elapsed() < OWN_PROCESS_WAIT {
                        std::thread::sleep(std::time::Duration::from_millis(10));
                        continue;
                    }
                    let holder = match holder {
                        "" => String::new(),
                        pid => format!("PID {pid}, "),
                    };
                    return Err(WalError::Io(format!(
                        "it is in use by another Shoal server ({holder}lock file \"{}\"); \
                         hint: stop that server first, or give this one another --data-dir",
                        path.display()
                    )));
                }
                Err(TryLockError::Error(e)) => return Err(io("lock", e)),
            }
        }
        file.set_len(0).map_err(|e| io("write", e))?;
        file.rewind().map_err(|e| io("write", e))?;
        writeln!(file, "{}", std::process::id()).map_err(|e| io("write", e))?;
        Ok(DataDirLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_locked_directory_is_refused_to_another_process_and_waited_for_by_this_one() {
        let dir = std::env::temp_dir().join(format!("shoal-dir-lock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let first = DataDirLock::acquire(&dir).expect("first lock");
        let pid = std::fs::read_to_string(dir.join(DATA_DIR_LOCK_FILE)).unwrap();
        assert_eq!(pid.trim(), std::process::id().to_string());
        // Each `acquire` opens the file anew, and flock locks belong to the open file, so a
        // second `acquire` conflicts as another process's would. A holder that is this same
        // process is waited for, until it is dropped.
        let err = std::thread::scope(|s| {
            let waiter = s.spawn(|| DataDirLock::acquire(&dir));
            std::thread::sleep(std::time::Duration::from_millis(200));
            assert!(
                !waiter.is_finished(),
                "a lock of this process is waited for"
            );
            drop(first);
            waiter
                .join()
                .unwrap()
                .expect("the lock once the first is dropped");
            // A holder that is not this process: its pid, as another server writes it.
            let other = DataDirLock::acquire(&dir).unwrap();
            std::fs::write(dir.join(DATA_DIR_LOCK_FILE), "4242\n").unwrap();
            let err = DataDirLock::acquire(&dir).expect_err("a lock of another process");
            drop(other);
            err
        });
        let message = err.to_string();
        assert!(
            message.contains("in use by another Shoal server") && message.contains("PID 4242"),
            "{message}"
        );
        DataDirLock::acquire(&dir).expect("the lock after the others are dropped");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
