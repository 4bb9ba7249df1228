//! The log-writer thread. It takes the whole append buffer when someone waits (or when
//! unwaited records have aged `flush_delay_ms_async`), writes it as one batch with one write and
//! one fdatasync, then publishes the new flushed LSN to every waiter. A write that hits ENOSPC
//! is cut back with ftruncate and its batch dropped; any other write or sync failure breaks the
//! log for good, because after a failed fsync the kernel may have discarded the dirty pages and
//! nothing written since can be trusted to be on disk.
//!
//! Segments are zero-filled ahead of the write position, as PostgreSQL does with its WAL files:
//! an fdatasync after an append that grows the file must also commit the new file size to the
//! file system's journal, and on ext4 that made each group commit's sync 5-10 times slower than
//! one that overwrites blocks already allocated. Recovery reads a zero tail as the log's end.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::error::is_disk_full;
use crate::prealloc::{self, NextSegment};
use crate::segment::{self, BatchHeader, BATCH_HEADER_BYTES, SEGMENT_HEADER_BYTES};
use crate::writer::Shared;
use crate::Lsn;

/// The segment file being appended to. Owned by the writer thread.
pub(crate) struct SegmentWriter {
    wal_dir: PathBuf,
    path: PathBuf,
    file: File,
    base_lsn: Lsn,
    len_bytes: u64,
    /// End LSN of the last batch in this file: the base of the next segment.
    end_lsn: Lsn,
    segment_size_bytes: u64,
    /// `WalOptions::fail_batch_sync_after`, counting down.
    pub syncs_before_failure: Option<u64>,
    /// `WalOptions::hold_batch_sync_ms`.
    pub sync_hold: Duration,
    /// `WalOptions::zero_fill_step_bytes`.
    pub zero_fill_step_bytes: u64,
    /// How long the last batch's fdatasync took, in microseconds.
    pub last_sync_us: u64,
    /// The file is zero-filled and synced up to here: batches below it overwrite zeros.
    zeroed_bytes: u64,
    /// Zero-filling failed (a full disk): this segment grows by appends from now on.
    zero_fill_failed: bool,
    /// The file the next segment goes into, zero-filled ahead by a helper thread once this
    /// segment is half full (a server that writes little never makes one).
    next: NextSegment,
    /// Whether this segment asked for `next` already (it is asked once: a disk short of room
    /// is not asked again at every batch).
    next_asked: bool,
    /// `Wal::switch_segment` asked for the next batch to start a new segment.
    switch_next: bool,
    /// Segments so far that went into such a file (carried over at each rotation).
    preallocated_segments: u64,
}

/// Batch headers `room_end_lsn` keeps space for: LSNs do not count them, and the records a grant
/// covers can end up behind up to three (the batch in flight when it was given, split in two,
/// and the granted part of the next), plus one to spare.
const ROOM_HEADERS: u64 = 4;

/// Whether a segment file holds nothing after its header but zeros (or not even a header): a
/// crash or a full disk right after creating it, before any batch was written.
fn holds_no_batch(data: &[u8]) -> bool {
    data.get(SEGMENT_HEADER_BYTES..)
        .is_none_or(segment::is_zero_tail)
}

/// Removes the file at `path` if it is a segment holding no batch (a crash or a full disk
/// right after creating it); fails if it holds batches.
fn remove_if_no_batch(path: &Path) -> io::Result<()> {
    match fs::read(path) {
        Ok(data) if holds_no_batch(&data) => fs::remove_file(path),
        Ok(_) => {
            let msg = format!("segment \"{}\" already holds records", path.display());
            Err(io::Error::new(io::ErrorKind::AlreadyExists, msg))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// What became of one batch.
pub(crate) enum BatchOutcome {
    Written,
    DiskFull(String),
    Broken(String),
}

impl SegmentWriter {
    /// Creates segment `base_lsn` with its header, synced along with the directory entry. A file
    /// of that name holding only a header (a crash or ENOSPC right after creating it) is replaced.
    pub fn create(
        wal_dir: &Path,
        base_lsn: Lsn,
        segment_size_bytes: u64,
    ) -> io::Result<SegmentWriter> {
        let path = wal_dir.join(segment::segment_file_name(base_lsn));
        remove_if_no_batch(&path)?;
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        let written = file
            .write_all_at(&segment::encode_segment_header(base_lsn), 0)
            .and_then(|()| file.sync_data())
            .and_then(|()| segment::sync_dir(wal_dir));
        if let Err(e) = written {
            let _ = fs::remove_file(&path);
            return Err(e);
        }
        let zeroed_bytes = SEGMENT_HEADER_BYTES as u64;
        Ok(SegmentWriter::opened(
            wal_dir,
            path,
            file,
            base_lsn,
            segment_size_bytes,
            zeroed_bytes,
        ))
    }

    /// The writer of a segment file that holds its header and is zero-filled up to
    /// `zeroed_bytes`, with no batch yet.
    fn opened(
        wal_dir: &Path,
        path: PathBuf,
        file: File,
        base_lsn: Lsn,
        segment_size_bytes: u64,
        zeroed_bytes: u64,
    ) -> SegmentWriter {
        SegmentWriter {
            wal_dir: wal_dir.to_path_buf(),
            path,
            file,
            base_lsn,
            len_bytes: SEGMENT_HEADER_BYTES as u64,
            end_lsn: base_lsn,
            segment_size_bytes,
            syncs_before_failure: None,
            sync_hold: Duration::ZERO,
            zero_fill_step_bytes: 16 << 20,
            last_sync_us: 0,
            zeroed_bytes: zeroed_bytes.max(SEGMENT_HEADER_BYTES as u64),
            zero_fill_failed: false,
            next: NextSegment::none(),
            next_asked: false,
            switch_next: false,
            preallocated_segments: 0,
        }
    }

    /// Makes segment `base_lsn` out of `prepared`, the zero-filled file `NextSegment` made: its
    /// header is written and synced before the file takes the segment's name, so a crash leaves
    /// either no segment or a valid one holding no batch.
    fn install(
        wal_dir: &Path,
        prepared: File,
        base_lsn: Lsn,
        segment_size_bytes: u64,
    ) -> io::Result<SegmentWriter> {
        let path = wal_dir.join(segment::segment_file_name(base_lsn));
        remove_if_no_batch(&path)?;
        let zeroed_bytes = prepared.metadata()?.len();
        prepared.write_all_at(&segment::encode_segment_header(base_lsn), 0)?;
        prepared.sync_data()?;
        fs::rename(prealloc::next_segment_path(wal_dir), &path)?;
        segment::sync_dir(wal_dir)?;
        Ok(SegmentWriter::opened(
            wal_dir,
            path,
            prepared,
            base_lsn,
            segment_size_bytes,
            zeroed_bytes,
        ))
    }

    /// Makes sure the file is zero-filled past `end_bytes`, so the batch ending there overwrites
    /// allocated blocks, and half a step beyond it (within the segment size), so commits after
    /// it find room to be granted early release in. A failure (a full disk) is not an error:
    /// the segment goes on growing by appends, and the batch's own write reports a full disk if
    /// it is one.
    fn zero_fill_to(&mut self, end_bytes: u64) {
        let wanted = (end_bytes + self.zero_fill_step_bytes / 2)
            .min(self.segment_size_bytes)
            .max(end_bytes);
        if wanted <= self.zeroed_bytes || self.zero_fill_failed {
            return;
        }
        let target = (self.zeroed_bytes + self.zero_fill_step_bytes)
            .min(self.segment_size_bytes)
            .max(wanted);
        let filled = segment::write_zeros(&self.file, self.zeroed_bytes, target);
        match filled.and_then(|()| self.file.sync_data()) {
            Ok(()) => self.zeroed_bytes = target,
            Err(e) => {
                tracing::warn!(
                    file = %self.path.display(),
                    "could not zero-fill the log segment ahead ({e}); appending instead"
                );
                // Give the space back; only zeros past the last batch are cut.
                let _ = self.file.set_len(self.zeroed_bytes);
                self.zero_fill_failed = true;
            }
        }
    }

    /// Writes `batch` (frame header space followed by the records `first_lsn..end_lsn`) with one
    /// write and one fdatasync, starting a new segment first if this one is full.
    fn write_batch(&mut self, batch: &mut [u8], first_lsn: Lsn, end_lsn: Lsn) -> BatchOutcome {
        let record_bytes = (batch.len() - BATCH_HEADER_BYTES) as u64;
        assert_eq!(
            end_lsn - first_lsn,
            record_bytes,
            "batch size disagrees with its LSNs"
        );
        assert!(
            first_lsn >= self.end_lsn,
            "batch {first_lsn} starts before the log end {}",
            self.end_lsn
        );
        let switch =
            std::mem::take(&mut self.switch_next) && self.len_bytes > SEGMENT_HEADER_BYTES as u64;
        if self.len_bytes >= self.segment_size_bytes || switch {
            if let Err(outcome) = self.rotate() {
                return outcome;
            }
        }
        let header = BatchHeader {
            record_bytes,
            first_lsn,
            end_lsn,
        };
        batch[..BATCH_HEADER_BYTES].copy_from_slice(&header.encode());
        self.zero_fill_to(self.len_bytes + batch.len() as u64);
        let path = self.path.display();
        if let Err(e) = self.file.write_all_at(batch, self.len_bytes) {
            if !is_disk_full(&e) {
                return BatchOutcome::Broken(format!(
                    "could not write to file \"{path}\": {e}; the server no longer accepts writes"
                ));
            }
            // Cut off whatever part of the batch reached the file, so the log holds only whole
            // batches and the next batch starts where this one did.
            if let Err(t) = self.file.set_len(self.len_bytes) {
                return BatchOutcome::Broken(format!(
                    "could not truncate file \"{path}\" after a failed write ({e}): {t}; \
                     the server no longer accepts writes"
                ));
            }
            self.zeroed_bytes = self.zeroed_bytes.min(self.len_bytes);
            return BatchOutcome::DiskFull(format!("could not write to file \"{path}\": {e}"));
        }
        if let Err(e) = self.sync_batch() {
            return BatchOutcome::Broken(format!(
                "could not fsync file \"{}\": {e}; the server no longer accepts writes",
                self.path.display()
            ));
        }
        self.len_bytes += batch.len() as u64;
        self.end_lsn = end_lsn;
        if !self.next_asked && self.len_bytes >= self.segment_size_bytes / 2 {
            self.next_asked = true;
            if !self.next.is_pending() {
                self.next = NextSegment::start(&self.wal_dir, self.segment_size_bytes);
            }
        }
        BatchOutcome::Written
    }

    fn sync_batch(&mut self) -> io::Result<()> {
        let started = std::time::Instant::now();
        let synced = match self.syncs_before_failure.as_mut() {
            Some(0) => Err(io::Error::other("injected fdatasync failure (test)")),
            Some(left) => {
                *left -= 1;
                self.file.sync_data()
            }
            None => self.file.sync_data(),
        };
        self.last_sync_us = started.elapsed().as_micros() as u64;
        if !self.sync_hold.is_zero() {
            std::thread::sleep(self.sync_hold);
        }
        synced
    }

    /// Whether a batch of `batch_bytes` goes into this segment's zero-filled space, zero-filling
    /// further first if it can: its write then cannot fail for a full disk.
    fn make_room(&mut self, batch_bytes: usize) -> bool {
        if self.len_bytes >= self.segment_size_bytes {
            return false;
        }
        let end_bytes = self.len_bytes + batch_bytes as u64;
        self.zero_fill_to(end_bytes);
        end_bytes <= self.zeroed_bytes
    }

    /// The LSN up to which records appended from now on are sure to land in this segment's
    /// zero-filled space. A record's file offset is at most the log end's offset plus its
    /// distance in LSNs from the log end plus the batch headers in between (a batch dropped
    /// for a full disk only moves later records closer).
    fn room_end_lsn(&self) -> Lsn {
        if self.len_bytes >= self.segment_size_bytes {
            return self.end_lsn;
        }
        let headers = ROOM_HEADERS * BATCH_HEADER_BYTES as u64;
        let room = self.zeroed_bytes.saturating_sub(self.len_bytes + headers);
        self.end_lsn + room
    }

    fn rotate(&mut self) -> Result<(), BatchOutcome> {
        let (dir, base, size) = (&self.wal_dir, self.end_lsn, self.segment_size_bytes);
        let (created, preallocated) = match self.next.take_ready() {
            Some(prepared) => (SegmentWriter::install(dir, prepared, base, size), 1),
            // Not ready yet (a burst of log outran the helper) or not made: make a bare one.
            None => (SegmentWriter::create(dir, base, size), 0),
        };
        match created {
            Ok(mut next) => {
                next.syncs_before_failure = self.syncs_before_failure;
                next.sync_hold = self.sync_hold;
                next.zero_fill_step_bytes = self.zero_fill_step_bytes;
                next.preallocated_segments = self.preallocated_segments + preallocated;
                // A helper still under way carries over, for the segment after.
                next.next = std::mem::replace(&mut self.next, NextSegment::none());
                *self = next;
                Ok(())
            }
            Err(e) => {
                let msg = format!(
                    "could not create a new segment in \"{}\": {e}",
                    self.wal_dir.display()
                );
                if is_disk_full(&e) {
                    Err(BatchOutcome::DiskFull(msg))
                } else {
                    Err(BatchOutcome::Broken(format!(
                        "{msg}; the server no longer accepts writes"
                    )))
                }
            }
        }
    }
}

/// Capacity a batch buffer keeps between batches. Group commits are far smaller; a burst bigger
/// than this (a bulk load's commit record) is rare enough to pay for a fresh allocation.
const BATCH_KEEP_BYTES_MAX: usize = 8 << 20;

/// A batch taken from the append buffer.
pub(crate) struct Taken {
    pub first_lsn: Lsn,
    pub end_lsn: Lsn,
    pub records: u64,
    /// End of the records in it granted early release (`first_lsn` if none is).
    granted_end_lsn: Lsn,
}

/// The writer thread's loop; returns on shutdown (after writing everything) or when the log broke.
pub(crate) fn run(shared: Arc<Shared>, mut segment: SegmentWriter) {
    let mut batch = Vec::with_capacity(BATCH_HEADER_BYTES + (1 << 16));
    batch.resize(BATCH_HEADER_BYTES, 0);
    shared
        .room_end_lsn
        .store(segment.room_end_lsn(), Ordering::Release);
    while let Some(taken) = take_batch(&shared, &mut batch) {
        let keep_running = write_taken(&shared, &mut segment, &mut batch, &taken);
        if !keep_running {
            return;
        }
        batch.truncate(BATCH_HEADER_BYTES);
        // Give back memory after a burst (a big table image, one bulk load's commit) instead of
        // keeping the peak forever: the two buffers swap, so each would keep its own peak.
        if batch.capacity() > BATCH_KEEP_BYTES_MAX {
            batch.shrink_to(BATCH_KEEP_BYTES_MAX / 4);
        }
    }
}

/// Writes one taken batch and publishes what became of it. Records granted early release are
/// already visible to other transactions, so they must not be dropped for a full disk: if the
/// batch does not fit in zero-filled space, they are written as a batch of their own first
/// (they fit, by the grant's rule), then the rest. Returns false once the log is broken.
fn write_taken(
    shared: &Shared,
    segment: &mut SegmentWriter,
    batch: &mut Vec<u8>,
    taken: &Taken,
) -> bool {
    let granted_end = taken.granted_end_lsn.clamp(taken.first_lsn, taken.end_lsn);
    if granted_end > taken.first_lsn
        && granted_end < taken.end_lsn
        && !segment.make_room(batch.len())
    {
        let granted_bytes = BATCH_HEADER_BYTES + (granted_end - taken.first_lsn) as usize;
        let mut rest = Vec::with_capacity(batch.len() - granted_bytes + BATCH_HEADER_BYTES);
        rest.resize(BATCH_HEADER_BYTES, 0);
        rest.extend_from_slice(&batch[granted_bytes..]);
        batch.truncate(granted_bytes);
        // Record counts are not split: the stats count them all with the granted part.
        let (granted, after) = (
            Taken {
                end_lsn: granted_end,
                ..*taken
            },
            Taken {
                first_lsn: granted_end,
                records: 0,
                ..*taken
            },
        );
        if !write_and_publish(shared, segment, batch, &granted, true) {
            return false;
        }
        return write_and_publish(shared, segment, &mut rest, &after, false);
    }
    write_and_publish(shared, segment, batch, taken, granted_end > taken.first_lsn)
}

/// Writes `batch` and publishes the outcome. A batch holding records granted early release that
/// is dropped for a full disk (which the grant's rule rules out) breaks the log instead: those
/// commits are visible, and later ones may have built on them.
fn write_and_publish(
    shared: &Shared,
    segment: &mut SegmentWriter,
    batch: &mut [u8],
    taken: &Taken,
    holds_granted: bool,
) -> bool {
    if shared.switch_requested.swap(false, Ordering::AcqRel) {
        segment.switch_next = true;
    }
    let outcome = match segment.write_batch(batch, taken.first_lsn, taken.end_lsn) {
        BatchOutcome::DiskFull(message) if holds_granted => BatchOutcome::Broken(format!(
            "{message}, dropping commits already made visible; the server no longer accepts writes"
        )),
        outcome => outcome,
    };
    publish(shared, taken, outcome, batch.len(), Some(segment))
}

/// Waits until the buffer should be written, then swaps it with `spare` (which holds only the
/// frame header space). `None` once shut down with nothing left to write.
pub(crate) fn take_batch(shared: &Shared, spare: &mut Vec<u8>) -> Option<Taken> {
    debug_assert_eq!(spare.len(), BATCH_HEADER_BYTES);
    let delay = Duration::from_millis(shared.opts.flush_delay_ms_async);
    let mut p = shared.pending.lock();
    loop {
        let buffered_bytes = p.buffered_bytes();
        if buffered_bytes == 0 {
            if p.shutdown {
                return None;
            }
            shared.writer_wake.wait(&mut p);
            continue;
        }
        let oldest_at = p
            .oldest_at
            .expect("a non-empty buffer has an oldest record");
        let due = p.shutdown
            || p.wanted_lsn > p.start_lsn
            || buffered_bytes >= shared.opts.buffer_bytes_max / 2
            || oldest_at.elapsed() >= delay;
        if !due {
            shared.writer_wake.wait_until(&mut p, oldest_at + delay);
            continue;
        }
        std::mem::swap(&mut p.buf, spare);
        let taken = Taken {
            first_lsn: p.start_lsn,
            end_lsn: p.next_lsn,
            records: p.records,
            granted_end_lsn: p.granted_end_lsn,
        };
        p.start_lsn = p.next_lsn;
        p.records = 0;
        p.oldest_at = None;
        shared.space_freed.notify_all();
        return Some(taken);
    }
}

/// Tells waiters what became of the batch (`segment` is where it went, if a segment file).
/// Returns false once the log is broken.
pub(crate) fn publish(
    shared: &Shared,
    taken: &Taken,
    outcome: BatchOutcome,
    batch_bytes: usize,
    segment: Option<&SegmentWriter>,
) -> bool {
    let stats = &shared.stats;
    stats.batches.fetch_add(1, Ordering::Relaxed);
    let mut progress = shared.progress.lock();
    let keep_running = match outcome {
        BatchOutcome::Written => {
            stats.records.fetch_add(taken.records, Ordering::Relaxed);
            stats
                .bytes
                .fetch_add((batch_bytes - BATCH_HEADER_BYTES) as u64, Ordering::Relaxed);
            stats.flushes.fetch_add(1, Ordering::Relaxed);
            if let Some(segment) = segment {
                stats
                    .sync_time_us
                    .fetch_add(segment.last_sync_us, Ordering::Relaxed);
            }
            progress.processed_lsn = taken.end_lsn;
            shared.durable_lsn.store(taken.end_lsn, Ordering::Release);
            true
        }
        BatchOutcome::DiskFull(message) => {
            tracing::warn!(
                first_lsn = taken.first_lsn,
                end_lsn = taken.end_lsn,
                "{message}; batch dropped"
            );
            // Before the waiters hear of it: `Wal::surely_flushed` reads it.
            stats.dropped_batches.fetch_add(1, Ordering::Release);
            progress.processed_lsn = taken.end_lsn;
            progress.record_failure(taken.first_lsn, taken.end_lsn, message);
            true
        }
        BatchOutcome::Broken(message) => {
            tracing::error!("{message}");
            progress.broken = Some(message);
            shared.broken.store(true, Ordering::Release);
            false
        }
    };
    if let Some(segment) = segment {
        shared
            .current_segment_base_lsn
            .store(segment.base_lsn, Ordering::Release);
        shared
            .room_end_lsn
            .store(segment.room_end_lsn(), Ordering::Release);
        stats
            .preallocated_segments
            .store(segment.preallocated_segments, Ordering::Relaxed);
    }
    let decided = progress.take_decided_waiters();
    drop(progress);
    shared.progress_changed.notify_all();
    for waker in decided {
        waker.wake();
    }
    if !keep_running {
        // Under the lock, so an appender cannot check the flag and then sleep past this wakeup.
        let _pending = shared.pending.lock();
        shared.space_freed.notify_all();
    }
    keep_running
}
