//! Checkpoints: the full content of every table at one snapshot, written in parallel into a new
//! directory `checkpoints/<id>/` (one file per table part, `catalog.bin`, a `manifest`), made
//! durable, and only then published by atomically replacing `checkpoints/CURRENT`. A crash at
//! any point leaves either the old or the new checkpoint current, never a mix; directories that
//! were never published are ignored by recovery and deleted by the next checkpoint.

use std::collections::VecDeque;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use shoal_storage::TableId;

use crate::error::WalError;
use crate::part_file::{self, BlockRows, PartWriter};
use crate::segment::sync_dir;
use crate::Lsn;

pub(crate) const CHECKPOINTS_DIR_NAME: &str = "checkpoints";
pub(crate) const CURRENT_FILE_NAME: &str = "CURRENT";
const MANIFEST_FILE_NAME: &str = "manifest";
const CATALOG_FILE_NAME: &str = "catalog.bin";
const MANIFEST_FIRST_LINE: &str = "shoal checkpoint 1";
const CATALOG_MAGIC: u64 = u64::from_le_bytes(*b"SHOALCAT");
const CATALOG_HEADER_BYTES: usize = 24;

/// The callback a `TablePart` feeds its rows to: `(row_id, row bytes)`.
pub type RowSink<'s> = dyn FnMut(u64, &[u8]) -> io::Result<()> + 's;

/// One slice of one table to write into a checkpoint. `produce` scans the rows (at the
/// checkpoint's snapshot) and passes each to the sink it is given; it runs on a checkpoint thread.
pub struct TablePart<'a> {
    pub table: TableId,
    /// Distinguishes the parts of one table; (table, part) must be unique in a checkpoint.
    pub part: u32,
    #[allow(clippy::type_complexity)]
    pub produce: Box<dyn FnOnce(&mut RowSink<'_>) -> io::Result<()> + Send + 'a>,
}

/// A checkpoint that was written and made current.
#[derive(Clone, Debug)]
pub struct CheckpointInfo {
    pub id: u64,
    pub dir: PathBuf,
    /// Bytes of all part files.
    pub bytes: u64,
    pub rows: u64,
    pub elapsed: Duration,
}

/// One part file listed in a manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartFile {
    pub table: TableId,
    pub part: u32,
    pub path: PathBuf,
    pub bytes: u64,
    pub rows: u64,
}

/// The current checkpoint, as recovery needs it.
#[derive(Clone, Debug)]
pub struct CheckpointManifest {
    pub id: u64,
    /// Replay the log from here (`read_log`'s `from_lsn`).
    pub start_lsn: Lsn,
    /// Records before this LSN other than those logged ahead of a commit (row changes, column
    /// segments) are in the checkpoint already; replay skips them. Equal to `start_lsn` unless
    /// a transaction had logged records ahead of its commit when the checkpoint was cut.
    pub covered_lsn: Lsn,
    pub catalog_image: Vec<u8>,
    pub parts: Vec<PartFile>,
}

/// What `load_checkpoint_parts` loaded.
#[derive(Clone, Copy, Debug)]
pub struct LoadSummary {
    pub rows: u64,
    pub bytes: u64,
    pub elapsed: Duration,
}

/// Writes a checkpoint under `dir/checkpoints/`, running the `parts` on `threads` threads, and
/// makes it current; older checkpoint directories are then deleted. `start_lsn` is where replay
/// must begin and `covered_lsn` what the snapshot covers (see `CheckpointManifest`), both taken
/// while no record could be appended (see `Wal::with_append_lock`).
pub fn write_checkpoint(
    dir: &Path,
    start_lsn: Lsn,
    covered_lsn: Lsn,
    catalog_image: &[u8],
    parts: Vec<TablePart<'_>>,
    threads: usize,
) -> Result<CheckpointInfo, WalError> {
    write_checkpoint_keeping(
        dir,
        start_lsn,
        covered_lsn,
        catalog_image,
        parts,
        threads,
        false,
    )
}

/// `write_checkpoint`, which with `keep_older` leaves the older checkpoint directories in
/// place (an online backup may be copying one of them).
pub fn write_checkpoint_keeping(
    dir: &Path,
    start_lsn: Lsn,
    covered_lsn: Lsn,
    catalog_image: &[u8],
    parts: Vec<TablePart<'_>>,
    threads: usize,
    keep_older: bool,
) -> Result<CheckpointInfo, WalError> {
    let started = Instant::now();
    let root = dir.join(CHECKPOINTS_DIR_NAME);
    let io_err = |what: &str, path: &Path, e: io::Error| {
        WalError::from_io(&format!("{what} \"{}\"", path.display()), &e)
    };
    fs::create_dir_all(&root).map_err(|e| io_err("could not create directory", &root, e))?;
    sync_dir(dir).map_err(|e| io_err("could not fsync directory", dir, e))?;
    let id = next_checkpoint_id(&root).map_err(|e| io_err("could not list directory", &root, e))?;
    let ckpt_dir = root.join(format!("{id:016x}"));
    fs::create_dir(&ckpt_dir).map_err(|e| io_err("could not create directory", &ckpt_dir, e))?;
    assert!(
        start_lsn <= covered_lsn,
        "replay starts after what it covers"
    );
    let lsns = (start_lsn, covered_lsn);
    let written = write_checkpoint_files(&ckpt_dir, id, lsns, catalog_image, parts, threads);
    let files = match written {
        Ok(files) => files,
        Err(e) => {
            let _ = fs::remove_dir_all(&ckpt_dir);
            return Err(e);
        }
    };
    publish_current(&root, id)
        .map_err(|e| io_err("could not switch", &root.join(CURRENT_FILE_NAME), e))?;
    if !keep_older {
        remove_other_checkpoints(&root, &ckpt_dir);
    }
    Ok(CheckpointInfo {
        id,
        dir: ckpt_dir,
        bytes: files.iter().map(|f| f.bytes).sum(),
        rows: files.iter().map(|f| f.rows).sum(),
        elapsed: started.elapsed(),
    })
}

/// One more than any id in use, published or not, so ids never repeat.
fn next_checkpoint_id(root: &Path) -> io::Result<u64> {
    let mut max_id = 0;
    for entry in fs::read_dir(root)? {
        let name = entry?.file_name();
        if let Some(id) = name.to_str().and_then(|n| u64::from_str_radix(n, 16).ok()) {
            max_id = max_id.max(id);
        }
    }
    Ok(max_id + 1)
}

/// Writes and syncs every file of checkpoint `id` into `ckpt_dir`; returns the part files.
fn write_checkpoint_files(
    ckpt_dir: &Path,
    id: u64,
    (start_lsn, covered_lsn): (Lsn, Lsn),
    catalog_image: &[u8],
    parts: Vec<TablePart<'_>>,
    threads: usize,
) -> Result<Vec<PartFile>, WalError> {
    let mut files = write_parts(ckpt_dir, parts, threads)?;
    files.sort_by_key(|f| (f.table, f.part));
    let catalog_path = ckpt_dir.join(CATALOG_FILE_NAME);
    let mut catalog = Vec::with_capacity(CATALOG_HEADER_BYTES + catalog_image.len());
    catalog.extend_from_slice(&CATALOG_MAGIC.to_le_bytes());
    catalog.extend_from_slice(&(catalog_image.len() as u64).to_le_bytes());
    catalog.extend_from_slice(&crc32c::crc32c(catalog_image).to_le_bytes());
    catalog.extend_from_slice(&[0; 4]);
    catalog.extend_from_slice(catalog_image);
    write_synced(&catalog_path, &catalog)?;
    let mut manifest = format!(
        "{MANIFEST_FIRST_LINE}\nid {id}\nstart_lsn {start_lsn}\ncovered_lsn {covered_lsn}\n"
    );
    for f in &files {
        let name = f
            .path
            .file_name()
            .and_then(|n| n.to_str())
            .expect("part file names are ASCII");
        manifest += &format!(
            "part {} {} {} {} {}\n",
            f.table, f.part, f.bytes, f.rows, name
        );
    }
    manifest += &format!("crc {:08x}\n", crc32c::crc32c(manifest.as_bytes()));
    write_synced(&ckpt_dir.join(MANIFEST_FILE_NAME), manifest.as_bytes())?;
    sync_dir(ckpt_dir).map_err(|e| {
        WalError::from_io(
            &format!("could not fsync directory \"{}\"", ckpt_dir.display()),
            &e,
        )
    })?;
    Ok(files)
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), WalError> {
    let write = || -> io::Result<()> {
        let mut file = File::create_new(path)?;
        file.write_all(bytes)?;
        file.sync_all()
    };
    write()
        .map_err(|e| WalError::from_io(&format!("could not write file \"{}\"", path.display()), &e))
}

/// Runs the parts on `threads` threads, each taking the next part from a shared queue, so a big
/// table does not leave the other threads idle at the end. Stops early after the first error.
fn write_parts(
    ckpt_dir: &Path,
    parts: Vec<TablePart<'_>>,
    threads: usize,
) -> Result<Vec<PartFile>, WalError> {
    let threads = threads.clamp(1, parts.len().max(1));
    let queue = Mutex::new(VecDeque::from(parts));
    let failed = AtomicBool::new(false);
    let worker = || -> Result<Vec<PartFile>, WalError> {
        let mut done = Vec::new();
        while !failed.load(Ordering::Relaxed) {
            let Some(part) = queue.lock().pop_front() else {
                break;
            };
            match write_part(ckpt_dir, part) {
                Ok(file) => done.push(file),
                Err(e) => {
                    failed.store(true, Ordering::Relaxed);
                    return Err(e);
                }
            }
        }
        Ok(done)
    };
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads).map(|_| s.spawn(worker)).collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("checkpoint thread panicked"))
            .collect()
    });
    let mut files = Vec::new();
    for result in results {
        files.extend(result?);
    }
    Ok(files)
}

fn write_part(ckpt_dir: &Path, part: TablePart<'_>) -> Result<PartFile, WalError> {
    let path = ckpt_dir.join(format!("table_{}_{}.dat", part.table, part.part));
    let write = || -> io::Result<(u64, u64)> {
        let mut writer = PartWriter::new(File::create_new(&path)?);
        (part.produce)(&mut |row_id, row| writer.push(row_id, row))?;
        let rows = writer.rows;
        Ok((writer.finish(part.table, part.part)?, rows))
    };
    let (bytes, rows) = write().map_err(|e| {
        WalError::from_io(
            &format!("could not write checkpoint file \"{}\"", path.display()),
            &e,
        )
    })?;
    Ok(PartFile {
        table: part.table,
        part: part.part,
        path,
        bytes,
        rows,
    })
}

/// Points CURRENT at checkpoint `id`: write a temporary file, sync it, rename it over CURRENT,
/// sync the directory. Rename is atomic, so CURRENT is always one whole id.
fn publish_current(root: &Path, id: u64) -> io::Result<()> {
    let tmp = root.join(format!("{CURRENT_FILE_NAME}.tmp"));
    let _ = fs::remove_file(&tmp);
    let mut file = File::create_new(&tmp)?;
    file.write_all(format!("{id:016x}\n").as_bytes())?;
    file.sync_all()?;
    fs::rename(&tmp, root.join(CURRENT_FILE_NAME))?;
    sync_dir(root)
}

/// Makes the checkpoint whose files are in `received` (another node's, sent whole; on the
/// same file system as `dir`) the current one of `dir`: it is renamed into
/// `dir/checkpoints/` under a new id (its manifest rewritten to match), checked by reading its
/// manifest, then published; older ones are deleted. Returns the new id.
pub fn adopt_checkpoint(dir: &Path, received: &Path) -> Result<u64, WalError> {
    let root = dir.join(CHECKPOINTS_DIR_NAME);
    let io_err = |what: &str, path: &Path, e: io::Error| {
        WalError::from_io(&format!("{what} \"{}\"", path.display()), &e)
    };
    fs::create_dir_all(&root).map_err(|e| io_err("could not create directory", &root, e))?;
    let id = next_checkpoint_id(&root).map_err(|e| io_err("could not list directory", &root, e))?;
    let manifest_path = received.join(MANIFEST_FILE_NAME);
    let text = fs::read_to_string(&manifest_path)
        .map_err(|e| io_err("could not read file", &manifest_path, e))?;
    let bad = |reason: &str| WalError::corrupt(&manifest_path, 0, reason);
    let received_id: u64 = text
        .lines()
        .nth(1)
        .and_then(|l| l.strip_prefix("id "))
        .and_then(|id| id.parse().ok())
        .ok_or_else(|| bad("no id line"))?;
    // Whole as sent (its checksum holds), before it is given this directory's id.
    parse_manifest(received, received_id)?;
    let body_end = text.rfind("crc ").ok_or_else(|| bad("no checksum line"))?;
    let mut rewritten: String = text[..body_end]
        .lines()
        .enumerate()
        .map(|(n, line)| match n {
            1 => format!("id {id}\n"),
            _ => format!("{line}\n"),
        })
        .collect();
    rewritten += &format!("crc {:08x}\n", crc32c::crc32c(rewritten.as_bytes()));
    let tmp = received.join(format!("{MANIFEST_FILE_NAME}.tmp"));
    let _ = fs::remove_file(&tmp);
    write_synced(&tmp, rewritten.as_bytes())?;
    fs::rename(&tmp, &manifest_path).map_err(|e| io_err("could not rename", &tmp, e))?;
    let ckpt_dir = root.join(format!("{id:016x}"));
    fs::rename(received, &ckpt_dir).map_err(|e| io_err("could not move", received, e))?;
    sync_dir(&ckpt_dir).map_err(|e| io_err("could not fsync directory", &ckpt_dir, e))?;
    sync_dir(&root).map_err(|e| io_err("could not fsync directory", &root, e))?;
    // A damaged checkpoint is refused before it replaces a good one.
    parse_manifest(&ckpt_dir, id)?;
    read_catalog(&ckpt_dir.join(CATALOG_FILE_NAME))?;
    publish_current(&root, id)
        .map_err(|e| io_err("could not switch", &root.join(CURRENT_FILE_NAME), e))?;
    remove_other_checkpoints(&root, &ckpt_dir);
    Ok(id)
}

/// The directory of the current checkpoint of `dir`, if there is one.
pub fn current_checkpoint_dir(dir: &Path) -> Result<Option<PathBuf>, WalError> {
    Ok(read_current_checkpoint(dir)?.map(|m| {
        dir.join(CHECKPOINTS_DIR_NAME)
            .join(format!("{:016x}", m.id))
    }))
}

/// Deletes every checkpoint directory but `keep`. Failures only cost disk space, so they are
/// logged rather than failing a checkpoint that is already current.
fn remove_other_checkpoints(root: &Path, keep: &Path) {
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path != keep && entry.file_type().is_ok_and(|t| t.is_dir()) {
            if let Err(e) = fs::remove_dir_all(&path) {
                tracing::warn!(dir = %path.display(), "could not remove old checkpoint: {e}");
            }
        }
    }
}

/// Reads the manifest and catalog image of the current checkpoint, or `None` if no checkpoint
/// was ever made current. Damage returns `WalError::Corrupt` naming the file.
pub fn read_current_checkpoint(dir: &Path) -> Result<Option<CheckpointManifest>, WalError> {
    let root = dir.join(CHECKPOINTS_DIR_NAME);
    let current_path = root.join(CURRENT_FILE_NAME);
    let current = match fs::read_to_string(&current_path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(WalError::Io(format!(
                "could not read file \"{}\": {e}",
                current_path.display()
            )))
        }
    };
    let id = current
        .strip_suffix('\n')
        .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        .ok_or_else(|| WalError::corrupt(&current_path, 0, "not a checkpoint id"))?;
    let ckpt_dir = root.join(format!("{id:016x}"));
    let manifest = parse_manifest(&ckpt_dir, id)?;
    let catalog_image = read_catalog(&ckpt_dir.join(CATALOG_FILE_NAME))?;
    Ok(Some(CheckpointManifest {
        catalog_image,
        ..manifest
    }))
}

fn parse_manifest(ckpt_dir: &Path, id: u64) -> Result<CheckpointManifest, WalError> {
    let path = ckpt_dir.join(MANIFEST_FILE_NAME);
    let text = fs::read(&path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => {
            WalError::corrupt(&path, 0, "manifest of the current checkpoint is missing")
        }
        _ => WalError::Io(format!("could not read file \"{}\": {e}", path.display())),
    })?;
    let bad = |reason: &str| WalError::corrupt(&path, 0, reason);
    let text = String::from_utf8(text).map_err(|_| bad("manifest is not text"))?;
    let body_end = text
        .rfind("crc ")
        .ok_or_else(|| bad("manifest has no checksum line"))?;
    let (body, crc_line) = text.split_at(body_end);
    let crc = u32::from_str_radix(crc_line.trim_start_matches("crc ").trim_end(), 16)
        .map_err(|_| bad("bad checksum line"))?;
    if crc32c::crc32c(body.as_bytes()) != crc {
        return Err(bad("manifest checksum mismatch"));
    }
    let mut lines = body.lines().peekable();
    if lines.next() != Some(MANIFEST_FIRST_LINE) {
        return Err(bad("not a version 1 checkpoint manifest"));
    }
    let field = |line: Option<&str>, name: &str| -> Result<u64, WalError> {
        line.unwrap_or_default()
            .strip_prefix(name)
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| bad(&format!("bad {name} line")))
    };
    let manifest_id = field(lines.next(), "id ")?;
    let start_lsn = field(lines.next(), "start_lsn ")?;
    // Manifests written before `covered_lsn` existed cover exactly what they replay from.
    let covered_lsn = match lines.next_if(|l| l.starts_with("covered_lsn ")) {
        Some(line) => field(Some(line), "covered_lsn ")?,
        None => start_lsn,
    };
    if manifest_id != id {
        return Err(bad(&format!(
            "manifest is of checkpoint {manifest_id}, CURRENT says {id}"
        )));
    }
    let mut parts = Vec::new();
    for line in lines {
        let words: Vec<&str> = line.split(' ').collect();
        let parsed = match words.as_slice() {
            ["part", table, part, bytes, rows, name] => (|| {
                Some(PartFile {
                    table: table.parse().ok()?,
                    part: part.parse().ok()?,
                    bytes: bytes.parse().ok()?,
                    rows: rows.parse().ok()?,
                    path: ckpt_dir.join(name),
                })
            })(),
            _ => None,
        };
        parts.push(parsed.ok_or_else(|| bad(&format!("bad manifest line \"{line}\"")))?);
    }
    Ok(CheckpointManifest {
        id,
        start_lsn,
        covered_lsn,
        catalog_image: Vec::new(),
        parts,
    })
}

fn read_catalog(path: &Path) -> Result<Vec<u8>, WalError> {
    let mut data = fs::read(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => WalError::corrupt(path, 0, "catalog image is missing"),
        _ => WalError::Io(format!("could not read file \"{}\": {e}", path.display())),
    })?;
    let bad = |reason: &str| WalError::corrupt(path, 0, reason);
    if data.len() < CATALOG_HEADER_BYTES
        || u64::from_le_bytes(data[0..8].try_into().unwrap()) != CATALOG_MAGIC
    {
        return Err(bad("bad catalog image header"));
    }
    let len = u64::from_le_bytes(data[8..16].try_into().unwrap());
    let crc = u32::from_le_bytes(data[16..20].try_into().unwrap());
    if len != (data.len() - CATALOG_HEADER_BYTES) as u64 {
        return Err(bad("catalog image is truncated"));
    }
    if crc32c::crc32c(&data[CATALOG_HEADER_BYTES..]) != crc {
        return Err(bad("catalog image checksum mismatch"));
    }
    data.drain(..CATALOG_HEADER_BYTES);
    Ok(data)
}

/// Loads every part of `manifest` on `threads` threads, calling `sink(table, rows)` for each
/// block of rows (from several threads at once). Stops at the first damaged file with
/// `WalError::Corrupt` naming it; rows of earlier blocks may already have been passed to `sink`.
pub fn load_checkpoint_parts(
    manifest: &CheckpointManifest,
    threads: usize,
    sink: &(dyn Fn(TableId, &BlockRows) + Sync),
) -> Result<LoadSummary, WalError> {
    let started = Instant::now();
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let worker = || -> Result<u64, WalError> {
        let mut buf = Vec::new();
        let mut rows = 0;
        while !failed.load(Ordering::Relaxed) {
            let Some(f) = manifest.parts.get(next.fetch_add(1, Ordering::Relaxed)) else {
                break;
            };
            let mut part_sink = |rows: &BlockRows| sink(f.table, rows);
            match part_file::load_part(&f.path, f.table, f.part, f.bytes, &mut buf, &mut part_sink)
            {
                Ok(n) => rows += n,
                Err(e) => {
                    failed.store(true, Ordering::Relaxed);
                    return Err(e);
                }
            }
        }
        Ok(rows)
    };
    let threads = threads.clamp(1, manifest.parts.len().max(1));
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads).map(|_| s.spawn(worker)).collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("checkpoint load thread panicked"))
            .collect()
    });
    let mut rows = 0;
    for result in results {
        rows += result?;
    }
    let bytes = manifest.parts.iter().map(|f| f.bytes).sum();
    Ok(LoadSummary {
        rows,
        bytes,
        elapsed: started.elapsed(),
    })
}
