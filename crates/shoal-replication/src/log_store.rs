//! The replicated log on one node's disk: openraft's `RaftLogStorage` over segment files in
//! `<data dir>/raft/`. A segment `log-<first index as 16 hex digits>` holds entries framed as
//! `[length u32][crc32c u32][entry in bincode]`. An append is one write of all its entries;
//! its fdatasync runs on a syncer thread, which syncs once for every append queued behind it
//! (group commit) and then tells openraft the entries are durable.
//!
//! Entries are read back from the files (the page cache, usually): memory keeps only each
//! entry's place and log id. The vote lives in `vote`, the newest purged log id in `purged`,
//! each replaced atomically (written aside, synced, renamed).

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Debug;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::ops::{Bound, RangeBounds};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{ErrorSubject, ErrorVerb, LogId, RaftLogReader, StorageError, StorageIOError, Vote};
use parking_lot::Mutex;

use crate::{NodeId, TypeConfig};

type Entry = openraft::Entry<TypeConfig>;

/// A segment is closed and the next one started once it holds this much.
const SEGMENT_BYTES: u64 = 64 << 20;
/// Frame header: length and CRC of the encoded entry.
const FRAME_HEADER_BYTES: usize = 8;
/// An entry bigger than this is damage, not data (a batch is bounded by the log buffer).
const ENTRY_BYTES_MAX: usize = 1 << 30;

/// Where one entry is.
#[derive(Clone, Copy, Debug)]
struct Location {
    log_id: LogId<NodeId>,
    /// Where the redo log ends after this entry (the batch's end LSN; an entry without a batch
    /// ends where the one before it does), for `pg_stat_replication`.
    end_lsn: u64,
    /// The segment's first index (its key in `LogFiles::segments`).
    segment: u64,
    /// Offset of the frame header in the segment.
    offset: u64,
    /// Length of the encoded entry after the header.
    len: u32,
}

struct Segment {
    path: PathBuf,
    file: Arc<File>,
    len_bytes: u64,
    /// The index after its last entry: the next entry written to it must have this one.
    end_index: u64,
}

/// The open log, shared by the store and its readers.
struct LogFiles {
    dir: PathBuf,
    /// By first index.
    segments: BTreeMap<u64, Segment>,
    /// Places of the entries `first_index..first_index + locations.len()`.
    locations: VecDeque<Location>,
    first_index: u64,
    last_purged: Option<LogId<NodeId>>,
}

/// A request to the syncer thread: make `files` durable, then report `callback`.
struct SyncRequest {
    files: Vec<Arc<File>>,
    sync_dir: bool,
    callback: LogFlushed<TypeConfig>,
}

/// openraft's log storage for this node.
pub(crate) struct LogStore {
    files: Arc<Mutex<LogFiles>>,
    vote: Option<Vote<NodeId>>,
    syncer: mpsc::Sender<SyncRequest>,
}

/// A reader of the same log, for openraft's replication tasks.
#[derive(Clone)]
pub(crate) struct LogReader {
    files: Arc<Mutex<LogFiles>>,
}

fn io_error(subject: ErrorSubject<NodeId>, verb: ErrorVerb, e: io::Error) -> StorageError<NodeId> {
    StorageIOError::new(subject, verb, openraft::AnyError::new(&e)).into()
}

fn logs_error(verb: ErrorVerb, e: io::Error) -> StorageError<NodeId> {
    io_error(ErrorSubject::Logs, verb, e)
}

fn damaged(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

fn segment_name(first_index: u64) -> String {
    format!("log-{first_index:016x}")
}

fn parse_segment_name(name: &str) -> Option<u64> {
    let hex = name.strip_prefix("log-")?;
    (hex.len() == 16).then(|| u64::from_str_radix(hex, 16).ok())?
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Replaces `dir/name` with `bytes`, durably: written aside, synced, renamed, directory synced.
fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    let aside = dir.join(format!("{name}.new"));
    fs::write(&aside, bytes)?;
    File::open(&aside)?.sync_all()?;
    fs::rename(&aside, dir.join(name))?;
    sync_dir(dir)
}

fn read_small_file<T: serde::de::DeserializeOwned>(path: &Path) -> io::Result<Option<T>> {
    match fs::read(path) {
        Ok(bytes) => bincode::deserialize(&bytes)
            .map(Some)
            .map_err(|e| damaged(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The redo log's end after `entry`, given its end before.
fn end_lsn_after(entry: &Entry, before: u64) -> u64 {
    match &entry.payload {
        openraft::EntryPayload::Normal(batch) => batch.end_lsn,
        _ => before,
    }
}

fn encode_frame(entry: &Entry, out: &mut Vec<u8>) -> u32 {
    let body = bincode::serialize(entry).expect("a log entry always encodes");
    assert!(
        body.len() < ENTRY_BYTES_MAX,
        "log entry of {} bytes",
        body.len()
    );
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    out.extend_from_slice(&body);
    body.len() as u32
}

/// Decodes the frame at `data[0..]`: the entry and the frame's whole size, or `None` where the
/// data ends or holds no valid frame (a torn or never-written tail).
fn decode_frame(data: &[u8]) -> Option<(Entry, usize)> {
    let header = data.get(..FRAME_HEADER_BYTES)?;
    let len = u32::from_le_bytes(header[0..4].try_into().unwrap()) as usize;
    let crc = u32::from_le_bytes(header[4..8].try_into().unwrap());
    if len == 0 || len >= ENTRY_BYTES_MAX {
        return None;
    }
    let body = data.get(FRAME_HEADER_BYTES..FRAME_HEADER_BYTES + len)?;
    if crc32c::crc32c(body) != crc {
        return None;
    }
    let entry = bincode::deserialize(body).ok()?;
    Some((entry, FRAME_HEADER_BYTES + len))
}

impl LogFiles {
    /// Opens the log in `dir` (created if missing). A torn tail of the newest segment (a crash
    /// during a write) is cut; a bad frame anywhere else is damage, and opening fails.
    fn open(dir: &Path) -> io::Result<LogFiles> {
        fs::create_dir_all(dir)?;
        let last_purged: Option<LogId<NodeId>> = read_small_file(&dir.join("purged"))?;
        let mut names: Vec<(u64, PathBuf)> = fs::read_dir(dir)?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let first = parse_segment_name(e.file_name().to_str()?)?;
                Some((first, e.path()))
            })
            .collect();
        names.sort_unstable_by_key(|(first, _)| *first);
        let mut files = LogFiles {
            dir: dir.to_path_buf(),
            segments: BTreeMap::new(),
            locations: VecDeque::new(),
            first_index: last_purged.map_or(0, |p| p.index + 1),
            last_purged,
        };
        let count = names.len();
        for (n, (first, path)) in names.into_iter().enumerate() {
            let newest = n + 1 == count;
            let data = fs::read(&path)?;
            let mut offset = 0usize;
            let mut expected = first;
            while offset < data.len() {
                let Some((entry, size)) = decode_frame(&data[offset..]) else {
                    break;
                };
                if entry.log_id.index != expected {
                    return Err(damaged(format!(
                        "{}: entry {} where {expected} belongs",
                        path.display(),
                        entry.log_id.index
                    )));
                }
                // Entries a purge already dropped may still sit in the oldest segment.
                if entry.log_id.index >= files.first_index {
                    if files.locations.is_empty() {
                        files.first_index = entry.log_id.index;
                    }
                    let before = files.locations.back().map_or(0, |l| l.end_lsn);
                    files.locations.push_back(Location {
                        log_id: entry.log_id,
                        end_lsn: end_lsn_after(&entry, before),
                        segment: first,
                        offset: offset as u64,
                        len: (size - FRAME_HEADER_BYTES) as u32,
                    });
                }
                offset += size;
                expected += 1;
            }
            if offset < data.len() {
                if !newest {
                    return Err(damaged(format!(
                        "{}: damaged entry at byte {offset} before the log's end",
                        path.display()
                    )));
                }
                tracing::warn!(
                    segment = %path.display(),
                    "cutting a torn log tail of {} bytes",
                    data.len() - offset
                );
            }
            let file = OpenOptions::new().read(true).write(true).open(&path)?;
            if offset < data.len() {
                file.set_len(offset as u64)?;
                file.sync_all()?;
            }
            files.segments.insert(
                first,
                Segment {
                    path,
                    file: Arc::new(file),
                    len_bytes: offset as u64,
                    end_index: expected,
                },
            );
        }
        Ok(files)
    }

    fn last_log_id(&self) -> Option<LogId<NodeId>> {
        self.locations.back().map(|l| l.log_id).or(self.last_purged)
    }

    fn next_index(&self) -> u64 {
        self.first_index + self.locations.len() as u64
    }

    /// Writes `entries` at the log's end with one write. Returns the files to sync and whether
    /// a new segment was made (its directory entry needs a sync too).
    fn append(&mut self, entries: &[Entry]) -> io::Result<(Vec<Arc<File>>, bool)> {
        let Some(first) = entries.first() else {
            return Ok((Vec::new(), false));
        };
        assert_eq!(
            first.log_id.index,
            self.next_index(),
            "appended entries must continue the log"
        );
        let mut to_sync = Vec::new();
        let mut new_segment = false;
        // A segment holds consecutive entries: after a purge past its end (a snapshot
        // installed) the log goes on in a new one.
        let full = self
            .segments
            .last_key_value()
            .is_none_or(|(_, s)| s.len_bytes >= SEGMENT_BYTES || s.end_index != first.log_id.index);
        if full {
            if let Some((_, s)) = self.segments.last_key_value() {
                // The closed segment's last writes must be durable along with these.
                to_sync.push(s.file.clone());
            }
            let index = first.log_id.index;
            let path = self.dir.join(segment_name(index));
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)?;
            let segment = Segment {
                path,
                file: Arc::new(file),
                len_bytes: 0,
                end_index: index,
            };
            self.segments.insert(index, segment);
            new_segment = true;
        }
        let (&segment_first, segment) = self.segments.last_key_value().expect("made above");
        let mut buf = Vec::new();
        let mut placed = Vec::with_capacity(entries.len());
        let mut end_lsn = self.locations.back().map_or(0, |l| l.end_lsn);
        for entry in entries {
            let offset = segment.len_bytes + buf.len() as u64;
            let len = encode_frame(entry, &mut buf);
            end_lsn = end_lsn_after(entry, end_lsn);
            placed.push(Location {
                log_id: entry.log_id,
                end_lsn,
                segment: segment_first,
                offset,
                len,
            });
        }
        segment.file.write_all_at(&buf, segment.len_bytes)?;
        let file = segment.file.clone();
        let segment = self.segments.get_mut(&segment_first).expect("found above");
        segment.len_bytes += buf.len() as u64;
        segment.end_index += entries.len() as u64;
        self.locations.extend(placed);
        to_sync.push(file);
        Ok((to_sync, new_segment))
    }

    /// Drops the entries from `index` on (a new leader's log disagrees with them).
    fn truncate(&mut self, index: u64) -> io::Result<()> {
        if index >= self.next_index() {
            return Ok(());
        }
        let keep = index.saturating_sub(self.first_index) as usize;
        let cut = self.locations[keep];
        let later: Vec<u64> = self
            .segments
            .range(cut.segment + 1..)
            .map(|(&k, _)| k)
            .collect();
        for first in later {
            let segment = self.segments.remove(&first).expect("listed above");
            fs::remove_file(&segment.path)?;
        }
        let segment = self
            .segments
            .get_mut(&cut.segment)
            .expect("an entry's segment");
        segment.file.set_len(cut.offset)?;
        segment.file.sync_all()?;
        segment.len_bytes = cut.offset;
        segment.end_index = index;
        sync_dir(&self.dir)?;
        self.locations.truncate(keep);
        Ok(())
    }

    /// Forgets the entries up to and including `log_id` and deletes the segments that hold
    /// nothing else.
    fn purge(&mut self, log_id: LogId<NodeId>) -> io::Result<()> {
        write_atomically(
            &self.dir,
            "purged",
            &bincode::serialize(&log_id).expect("a log id encodes"),
        )?;
        while self
            .locations
            .front()
            .is_some_and(|l| l.log_id.index <= log_id.index)
        {
            self.locations.pop_front();
        }
        self.first_index = log_id.index + 1;
        self.last_purged = Some(log_id);
        // A segment goes when the next one starts at or before the first entry kept.
        let starts: Vec<u64> = self.segments.keys().copied().collect();
        for pair in starts.windows(2) {
            if pair[1] <= self.first_index {
                let segment = self.segments.remove(&pair[0]).expect("listed above");
                fs::remove_file(&segment.path)?;
            }
        }
        Ok(())
    }

    /// The redo log's end after entry `index`, if the log holds it.
    fn end_lsn_at(&self, index: u64) -> Option<u64> {
        let at = index.checked_sub(self.first_index)?;
        self.locations.get(at as usize).map(|l| l.end_lsn)
    }

    /// Entries `start..end` that the log holds, stopping early (but after at least one) once
    /// they reach `bytes_max`.
    fn read(&self, start: u64, end: u64, bytes_max: usize) -> io::Result<Vec<Entry>> {
        let start = start.max(self.first_index);
        let end = end.min(self.next_index());
        let mut entries = Vec::with_capacity(end.saturating_sub(start) as usize);
        let mut bytes = 0usize;
        for index in start..end {
            let at = self.locations[(index - self.first_index) as usize];
            if !entries.is_empty() && bytes + at.len as usize > bytes_max {
                break;
            }
            bytes += at.len as usize;
            let segment = &self.segments[&at.segment];
            let mut frame = vec![0u8; FRAME_HEADER_BYTES + at.len as usize];
            segment.file.read_exact_at(&mut frame, at.offset)?;
            let (entry, _) = decode_frame(&frame).ok_or_else(|| {
                damaged(format!(
                    "{}: entry {index} is damaged",
                    segment.path.display()
                ))
            })?;
            debug_assert_eq!(entry.log_id, at.log_id);
            entries.push(entry);
        }
        Ok(entries)
    }
}

/// The syncer thread: fdatasyncs what appends wrote, as few times as the queue allows, and
/// reports each append durable in order.
fn run_syncer(dir: PathBuf, requests: mpsc::Receiver<SyncRequest>) {
    while let Ok(first) = requests.recv() {
        let mut batch = vec![first];
        while let Ok(more) = requests.try_recv() {
            batch.push(more);
        }
        let mut files: Vec<&Arc<File>> = Vec::new();
        for request in &batch {
            for f in &request.files {
                if !files.iter().any(|seen| Arc::ptr_eq(seen, f)) {
                    files.push(f);
                }
            }
        }
        let mut synced = files.iter().try_for_each(|f| f.sync_data());
        if synced.is_ok() && batch.iter().any(|r| r.sync_dir) {
            synced = sync_dir(&dir);
        }
        for request in batch {
            let result = match &synced {
                Ok(()) => Ok(()),
                Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
            };
            request.callback.log_io_completed(result);
        }
    }
}

/// Log positions by Raft index, for progress reports.
#[derive(Clone)]
pub(crate) struct Positions {
    files: Arc<Mutex<LogFiles>>,
}

impl Positions {
    /// Where the redo log ends after entry `index`, if this node's log holds it.
    pub(crate) fn end_lsn_at(&self, index: u64) -> Option<u64> {
        self.files.lock().end_lsn_at(index)
    }

    /// The id of the last entry in the log (what a vote request carries).
    pub(crate) fn last_log_id(&self) -> Option<LogId<NodeId>> {
        self.files.lock().last_log_id()
    }
}

impl Positions {
    /// The newest entry up to `index_max` whose batch ends at or before `lsn`, with the LSN
    /// it ends at: the newest entry a checkpoint from `lsn` on holds whole.
    pub(crate) fn last_entry_ending_by(
        &self,
        lsn: u64,
        index_max: u64,
    ) -> Option<(LogId<NodeId>, u64)> {
        let files = self.files.lock();
        files
            .locations
            .iter()
            .rev()
            .filter(|l| l.log_id.index <= index_max)
            .find(|l| l.end_lsn <= lsn)
            .map(|l| (l.log_id, l.end_lsn))
    }
}

impl LogStore {
    pub(crate) fn positions(&self) -> Positions {
        Positions {
            files: self.files.clone(),
        }
    }

    /// Opens (or creates) the log in `dir`.
    pub(crate) fn open(dir: &Path) -> io::Result<LogStore> {
        let files = LogFiles::open(dir)?;
        let vote = read_small_file(&dir.join("vote"))?;
        let (syncer, requests) = mpsc::channel();
        let syncer_dir = dir.to_path_buf();
        std::thread::Builder::new()
            .name("raft-log-sync".into())
            .spawn(move || run_syncer(syncer_dir, requests))?;
        Ok(LogStore {
            files: Arc::new(Mutex::new(files)),
            vote,
            syncer,
        })
    }
}

fn bounds(range: &impl RangeBounds<u64>) -> (u64, u64) {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s + 1,
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e + 1,
        Bound::Excluded(&e) => e,
        Bound::Unbounded => u64::MAX,
    };
    (start, end)
}

/// The entries of `range`, for both readers of the log.
fn read_entries(
    files: &Mutex<LogFiles>,
    range: &impl RangeBounds<u64>,
    bytes_max: usize,
) -> Result<Vec<Entry>, StorageError<NodeId>> {
    let (start, end) = bounds(range);
    files
        .lock()
        .read(start, end, bytes_max)
        .map_err(|e| logs_error(ErrorVerb::Read, e))
}

/// The most log one AppendEntries carries (unless one entry is bigger). openraft gives a
/// follower one heartbeat interval to answer an append, which it does once the entries are on
/// its disk: a request of tens of megabytes (a bulk load) would time out again and again, and
/// the followers, hearing nothing whole from the leader, would elect another.
pub(crate) const APPEND_BYTES_MAX: usize = 1 << 20;

impl RaftLogReader<TypeConfig> for LogReader {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError<NodeId>> {
        read_entries(&self.files, &range, usize::MAX)
    }

    /// What replication sends a follower at a time: at most `APPEND_BYTES_MAX` of entries.
    async fn limited_get_log_entries(
        &mut self,
        start: u64,
        end: u64,
    ) -> Result<Vec<Entry>, StorageError<NodeId>> {
        read_entries(&self.files, &(start..end), APPEND_BYTES_MAX)
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError<NodeId>> {
        read_entries(&self.files, &range, usize::MAX)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogReader;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let files = self.files.lock();
        Ok(LogState {
            last_purged_log_id: files.last_purged,
            last_log_id: files.last_log_id(),
        })
    }

    async fn get_log_reader(&mut self) -> LogReader {
        LogReader {
            files: self.files.clone(),
        }
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        let dir = self.files.lock().dir.clone();
        let bytes = bincode::serialize(vote).expect("a vote encodes");
        write_atomically(&dir, "vote", &bytes)
            .map_err(|e| io_error(ErrorSubject::Vote, ErrorVerb::Write, e))?;
        self.vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        Ok(self.vote)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        let (files, sync_dir) = self
            .files
            .lock()
            .append(&entries)
            .map_err(|e| logs_error(ErrorVerb::Write, e))?;
        let request = SyncRequest {
            files,
            sync_dir,
            callback,
        };
        if let Err(mpsc::SendError(request)) = self.syncer.send(request) {
            request
                .callback
                .log_io_completed(Err(io::Error::other("the log syncer stopped")));
        }
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        tracing::info!(from = %log_id, "dropping log entries the leader does not have");
        self.files
            .lock()
            .truncate(log_id.index)
            .map_err(|e| logs_error(ErrorVerb::Delete, e))
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.files
            .lock()
            .purge(log_id)
            .map_err(|e| logs_error(ErrorVerb::Delete, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LogBatch;
    use openraft::{CommittedLeaderId, EntryPayload};

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("shoal-raft-log-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    fn entry(term: u64, index: u64) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
            payload: EntryPayload::Normal(LogBatch {
                first_lsn: index * 10,
                end_lsn: index * 10 + 10,
                records: vec![index as u8; 10],
            }),
        }
    }

    #[test]
    fn entries_survive_reopen_and_a_torn_tail_is_cut() {
        let dir = temp_dir("reopen");
        let mut files = LogFiles::open(&dir).unwrap();
        let written: Vec<Entry> = (0..5).map(|i| entry(1, i)).collect();
        files.append(&written[..3]).unwrap();
        files.append(&written[3..]).unwrap();
        assert_eq!(files.read(0, 5, usize::MAX).unwrap(), written);
        let segment = files.segments.values().next().unwrap().path.clone();
        drop(files);
        // Half a frame after the last entry: a write the crash interrupted.
        let mut data = fs::read(&segment).unwrap();
        let whole = data.len();
        let mut tail = Vec::new();
        encode_frame(&entry(1, 5), &mut tail);
        data.extend_from_slice(&tail[..tail.len() / 2]);
        fs::write(&segment, &data).unwrap();
        let files = LogFiles::open(&dir).unwrap();
        assert_eq!(files.read(0, 10, usize::MAX).unwrap(), written);
        assert_eq!(files.last_log_id(), Some(written[4].log_id));
        assert_eq!(fs::metadata(&segment).unwrap().len(), whole as u64);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_read_stops_at_its_byte_bound_after_one_entry() {
        let dir = temp_dir("bounded");
        let mut files = LogFiles::open(&dir).unwrap();
        let written: Vec<Entry> = (0..6).map(|i| entry(1, i)).collect();
        files.append(&written).unwrap();
        let frame = files.locations[0].len as usize;
        // Two entries' worth reads two; less than one still reads one.
        assert_eq!(files.read(1, 6, 2 * frame).unwrap(), written[1..3]);
        assert_eq!(files.read(1, 6, 2 * frame - 1).unwrap(), written[1..2]);
        assert_eq!(files.read(4, 6, 1).unwrap(), written[4..5]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn truncate_and_purge_keep_the_log_contiguous() {
        let dir = temp_dir("truncate");
        let mut files = LogFiles::open(&dir).unwrap();
        let written: Vec<Entry> = (0..6).map(|i| entry(1, i)).collect();
        files.append(&written).unwrap();
        files.truncate(4).unwrap();
        assert_eq!(files.last_log_id(), Some(written[3].log_id));
        let replaced = vec![entry(2, 4)];
        files.append(&replaced).unwrap();
        files.purge(written[1].log_id).unwrap();
        drop(files);
        let files = LogFiles::open(&dir).unwrap();
        assert_eq!(files.first_index, 2);
        let read = files.read(0, 10, usize::MAX).unwrap();
        let expected: Vec<Entry> =
            vec![written[2].clone(), written[3].clone(), replaced[0].clone()];
        assert_eq!(read, expected);
        assert_eq!(files.last_purged, Some(written[1].log_id));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_purge_past_the_end_goes_on_in_a_new_segment() {
        // A follower sent a snapshot drops all its log, and the log resumes after the
        // snapshot's entry, with a gap from what the old segment holds.
        let dir = temp_dir("purge-past");
        let mut files = LogFiles::open(&dir).unwrap();
        let old: Vec<Entry> = (0..3).map(|i| entry(1, i)).collect();
        files.append(&old).unwrap();
        files.purge(entry(2, 9).log_id).unwrap();
        let new: Vec<Entry> = (10..12).map(|i| entry(2, i)).collect();
        files.append(&new).unwrap();
        drop(files);
        let files = LogFiles::open(&dir).unwrap();
        assert_eq!(files.first_index, 10);
        assert_eq!(files.read(0, 20, usize::MAX).unwrap(), new);
        fs::remove_dir_all(&dir).unwrap();
    }
}
