//! The errors of the log and of checkpoints, each with the PostgreSQL SQLSTATE the server reports,
//! and the wrapper `read_log` returns so a recovery visitor's own error passes through unchanged.

use std::path::PathBuf;

/// An error of the write-ahead log or of checkpoint files. Cloneable because one failed batch
/// reports the same error to every transaction waiting on it.
#[derive(Clone, Debug, thiserror::Error)]
pub enum WalError {
    /// A write hit ENOSPC. The batch was dropped (nothing partial stays in the log) and later
    /// appends are tried again, so writes resume once space is freed.
    #[error("could not write to the write-ahead log: {0}; hint: free disk space, writes resume automatically")]
    DiskFull(String),
    /// An fsync or other write failure after which the log's durable state is unknown. Sticky:
    /// every later append and wait gets it too.
    #[error("{0}")]
    Broken(String),
    /// An I/O error outside the append path (opening the log, writing or reading a checkpoint).
    #[error("{0}")]
    Io(String),
    /// Damage in a log segment or checkpoint file that is not a torn tail.
    #[error("file \"{}\" is corrupt at byte offset {offset}: {reason}; hint: the data directory is damaged, restore it from a backup", file.display())]
    Corrupt {
        file: PathBuf,
        offset: u64,
        reason: String,
    },
    /// An append to a standby's log: only the primary of a replication group writes.
    #[error("cannot execute this in a read-only transaction: the server is a standby")]
    Standby,
    /// One record larger than `RECORD_PAYLOAD_MAX_BYTES`.
    #[error("write-ahead log record of {0} bytes is too large")]
    TooLarge(usize),
}

impl WalError {
    /// The SQLSTATE a client sees for this error.
    pub fn sqlstate(&self) -> &'static str {
        match self {
            WalError::DiskFull(_) => "53100",
            WalError::Broken(_) | WalError::Io(_) => "58030",
            WalError::Corrupt { .. } => "XX001",
            WalError::TooLarge(_) => "54000",
            WalError::Standby => "25006",
        }
    }

    pub(crate) fn corrupt(
        file: impl Into<PathBuf>,
        offset: u64,
        reason: impl Into<String>,
    ) -> Self {
        WalError::Corrupt {
            file: file.into(),
            offset,
            reason: reason.into(),
        }
    }

    /// Maps an I/O error met while doing `what` (a phrase such as `could not write file "x"`):
    /// ENOSPC becomes `DiskFull`, anything else `Io`.
    pub(crate) fn from_io(what: &str, err: &std::io::Error) -> Self {
        if is_disk_full(err) {
            WalError::DiskFull(format!("{what}: {err}"))
        } else {
            WalError::Io(format!("{what}: {err}"))
        }
    }
}

pub(crate) fn is_disk_full(err: &std::io::Error) -> bool {
    // EDQUOT (quota exceeded) means the same thing to the operator as ENOSPC.
    err.kind() == std::io::ErrorKind::StorageFull || err.raw_os_error() == Some(122)
}

/// What `read_log` returns on failure: the log's own error or the visitor's, unchanged.
#[derive(Debug)]
pub enum ReadError<E> {
    Wal(WalError),
    Visitor(E),
}

impl<E: std::fmt::Display> std::fmt::Display for ReadError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Wal(e) => e.fmt(f),
            ReadError::Visitor(e) => e.fmt(f),
        }
    }
}

impl<E: std::fmt::Debug + std::fmt::Display> std::error::Error for ReadError<E> {}

impl<E> From<WalError> for ReadError<E> {
    fn from(e: WalError) -> Self {
        ReadError::Wal(e)
    }
}
