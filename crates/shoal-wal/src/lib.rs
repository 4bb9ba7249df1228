//! Shoal's durability layer. Committed changes are appended as checksummed redo records to a
//! write-ahead log of segment files by one group-commit writer thread (`Wal`); recovery reads them
//! back in order (`read_log`), cutting a torn tail and refusing to start on damage anywhere else.
//! Checkpoints (`write_checkpoint`, `read_current_checkpoint`, `load_checkpoint_parts`) write the
//! full table contents in parallel so the log before them can be removed. The crate knows rows only
//! as opaque bytes: the storage layer encodes them and the caller serializes the catalog.

pub mod archive;
mod backup;
mod checkpoint;
mod dir_lock;
mod error;
mod flusher;
mod part_file;
mod prealloc;
mod reader;
mod record;
mod replicated;
mod segment;
mod writer;

pub use backup::{copy_for_backup, BackupCopy};
pub use checkpoint::{
    adopt_checkpoint, current_checkpoint_dir, load_checkpoint_parts, read_current_checkpoint,
    write_checkpoint, write_checkpoint_keeping, CheckpointInfo, CheckpointManifest, LoadSummary,
    PartFile, RowSink, TablePart,
};
pub use dir_lock::{DataDirLock, DATA_DIR_LOCK_FILE};
pub use error::{ReadError, WalError};
pub use part_file::BlockRows;
pub use reader::{read_log, LogReadSummary};
pub use record::{
    CommitChanges, ImageRows, Record, SegmentIds, RECORD_HEADER_BYTES, RECORD_PAYLOAD_MAX_BYTES,
};
pub use replicated::{decode_batch, split_batch, BatchSink};
pub use writer::{Wal, WalOptions, WalStats};

/// Log sequence number: a logical byte counter that grows by the encoded size of every appended
/// record, and the position every record header carries. It is not a file offset: a batch that
/// could not be written (disk full) is dropped, so its LSNs never appear in any file.
pub type Lsn = u64;
