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
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = match holder.trim() {
                    "" => String::new(),
                    pid => format!(" (PID {pid})"),
                };
                return Err(WalError::Io(format!(
                    "data directory \"{}\" is in use by another Shoal server{holder}; \
                     hint: stop it first, or give this one another --data-dir",
                    data_dir.display()
                )));
            }
            Err(TryLockError::Error(e)) => return Err(io("lock", e)),
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
    fn a_second_lock_on_a_directory_is_refused_until_the_first_is_dropped() {
        let dir = std::env::temp_dir().join(format!("shoal-dir-lock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let first = DataDirLock::acquire(&dir).expect("first lock");
        let pid = std::fs::read_to_string(dir.join(DATA_DIR_LOCK_FILE)).unwrap();
        assert_eq!(pid.trim(), std::process::id().to_string());
        // Another open file description, as another process would have.
        let err = DataDirLock::acquire(&dir).expect_err("a second lock");
        let message = err.to_string();
        assert!(
            message.contains("in use by another Shoal server")
                && message.contains(&format!("PID {}", std::process::id())),
            "{message}"
        );
        drop(first);
        DataDirLock::acquire(&dir).expect("the lock after the first is dropped");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
