//! Checkpoints as Raft snapshots. Shoal writes its checkpoints itself (the `Applier`); this
//! module records which Raft entry a checkpoint covers (the snapshot record, `raft/snapshot`)
//! and packs a checkpoint's files into one stream for a node that lacks log the group dropped.
//!
//! The record is written after the checkpoint is made current, so it never claims more than the
//! current checkpoint holds: after a crash between the two it names an older entry, and the
//! entries after it are applied again (the database skips what its checkpoint already holds,
//! by LSN).
//!
//! A pack: `PACK_MAGIC`, then per file `[name len u32][name][data len u64][crc32c u32][data]`,
//! the snapshot record first (as `RECORD_FILE_NAME`), then the checkpoint's files.

use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use openraft::{BasicNode, LogId, StoredMembership};
use serde::{Deserialize, Serialize};

use crate::NodeId;

pub(crate) const RECORD_FILE_NAME: &str = "snapshot";
const PACK_MAGIC: &[u8; 8] = b"SHOALSN1";
/// File names in a pack are short (`table_<oid>_<part>.dat`); anything longer is damage.
const NAME_BYTES_MAX: u32 = 4096;

/// Which log entries the current checkpoint makes unnecessary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SnapshotRecord {
    /// The newest entry whose batch the checkpoint holds whole: Raft's snapshot `last_log_id`.
    pub(crate) last_log_id: LogId<NodeId>,
    /// The group's membership as of `last_log_id`.
    pub(crate) membership: StoredMembership<NodeId, BasicNode>,
    /// Where the redo log ends after `last_log_id`.
    pub(crate) end_lsn: u64,
}

impl SnapshotRecord {
    /// Raft's name for the snapshot: unique per entry and checkpoint content.
    pub(crate) fn snapshot_id(&self) -> String {
        format!(
            "{}-{}-{:X}",
            self.last_log_id.leader_id.term, self.last_log_id.index, self.end_lsn
        )
    }

    pub(crate) fn meta(&self) -> openraft::SnapshotMeta<NodeId, BasicNode> {
        openraft::SnapshotMeta {
            last_log_id: Some(self.last_log_id),
            last_membership: self.membership.clone(),
            snapshot_id: self.snapshot_id(),
        }
    }
}

fn invalid(message: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.into())
}

/// Reads the snapshot record in `log_dir`, if a checkpoint was ever recorded.
pub(crate) fn read_record(log_dir: &Path) -> io::Result<Option<SnapshotRecord>> {
    match fs::read(log_dir.join(RECORD_FILE_NAME)) {
        Ok(bytes) => decode_record(&bytes).map(Some),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn decode_record(bytes: &[u8]) -> io::Result<SnapshotRecord> {
    let (crc, body) = bytes
        .split_first_chunk::<4>()
        .ok_or_else(|| invalid("snapshot record is truncated"))?;
    if u32::from_le_bytes(*crc) != crc32c::crc32c(body) {
        return Err(invalid("snapshot record fails its checksum"));
    }
    bincode::deserialize(body).map_err(|e| invalid(format!("snapshot record: {e}")))
}

fn encode_record(record: &SnapshotRecord) -> Vec<u8> {
    let body = bincode::serialize(record).expect("a snapshot record encodes");
    let mut bytes = crc32c::crc32c(&body).to_le_bytes().to_vec();
    bytes.extend_from_slice(&body);
    bytes
}

/// Replaces the snapshot record in `log_dir`, durably (temporary file, sync, rename, sync).
pub(crate) fn write_record(log_dir: &Path, record: &SnapshotRecord) -> io::Result<()> {
    let tmp = log_dir.join(format!("{RECORD_FILE_NAME}.tmp"));
    let mut file = File::create(&tmp)?;
    file.write_all(&encode_record(record))?;
    file.sync_all()?;
    fs::rename(&tmp, log_dir.join(RECORD_FILE_NAME))?;
    File::open(log_dir)?.sync_all()
}

/// Packs `record` and every file of `checkpoint_dir` into `pack_path`.
pub(crate) fn pack(
    record: &SnapshotRecord,
    checkpoint_dir: &Path,
    pack_path: &Path,
) -> io::Result<()> {
    let tmp = pack_path.with_extension("tmp");
    let mut out = BufWriter::new(File::create(&tmp)?);
    out.write_all(PACK_MAGIC)?;
    write_member(&mut out, RECORD_FILE_NAME, &encode_record(record))?;
    let mut names: Vec<String> = Vec::new();
    for entry in fs::read_dir(checkpoint_dir)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            names.push(
                entry
                    .file_name()
                    .into_string()
                    .map_err(|n| invalid(format!("checkpoint file name {n:?}")))?,
            );
        }
    }
    names.sort();
    for name in &names {
        let data = fs::read(checkpoint_dir.join(name))?;
        write_member(&mut out, name, &data)?;
    }
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    fs::rename(&tmp, pack_path)
}

fn write_member(out: &mut impl Write, name: &str, data: &[u8]) -> io::Result<()> {
    out.write_all(&(name.len() as u32).to_le_bytes())?;
    out.write_all(name.as_bytes())?;
    out.write_all(&(data.len() as u64).to_le_bytes())?;
    out.write_all(&crc32c::crc32c(data).to_le_bytes())?;
    out.write_all(data)
}

/// Unpacks `pack_path` into the new directory `into` (files synced, directory synced); returns
/// the snapshot record it carries.
pub(crate) fn unpack(pack_path: &Path, into: &Path) -> io::Result<SnapshotRecord> {
    if into.exists() {
        fs::remove_dir_all(into)?;
    }
    fs::create_dir_all(into)?;
    let mut input = BufReader::new(File::open(pack_path)?);
    let mut magic = [0u8; 8];
    input.read_exact(&mut magic)?;
    if &magic != PACK_MAGIC {
        return Err(invalid("not a Shoal snapshot"));
    }
    let mut record = None;
    loop {
        let mut len = [0u8; 4];
        match input.read_exact(&mut len) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e),
        }
        let name_len = u32::from_le_bytes(len);
        if name_len > NAME_BYTES_MAX {
            return Err(invalid(format!("snapshot member name of {name_len} bytes")));
        }
        let mut name = vec![0u8; name_len as usize];
        input.read_exact(&mut name)?;
        let name = String::from_utf8(name).map_err(|_| invalid("snapshot member name"))?;
        // Only plain names: a member never lands outside `into`.
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            return Err(invalid(format!("snapshot member name {name:?}")));
        }
        let mut header = [0u8; 12];
        input.read_exact(&mut header)?;
        let data_len = u64::from_le_bytes(header[..8].try_into().expect("8 bytes"));
        let crc = u32::from_le_bytes(header[8..].try_into().expect("4 bytes"));
        let mut data = Vec::new();
        (&mut input).take(data_len).read_to_end(&mut data)?;
        if data.len() as u64 != data_len || crc32c::crc32c(&data) != crc {
            return Err(invalid(format!("snapshot member {name} is damaged")));
        }
        if name == RECORD_FILE_NAME && record.is_none() {
            record = Some(decode_record(&data)?);
            continue;
        }
        let mut file = File::create_new(into.join(&name))?;
        file.write_all(&data)?;
        file.sync_all()?;
    }
    File::open(into)?.sync_all()?;
    record.ok_or_else(|| invalid("snapshot without its record"))
}

/// Where this node keeps the pack of checkpoint `record` describes.
pub(crate) fn pack_path(log_dir: &Path, record: &SnapshotRecord) -> PathBuf {
    log_dir.join(format!("snapshot-{}.pack", record.snapshot_id()))
}

/// Removes every pack in `log_dir` but `keep`.
pub(crate) fn remove_other_packs(log_dir: &Path, keep: Option<&Path>) {
    let Ok(entries) = fs::read_dir(log_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let is_pack = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("snapshot-") && n.ends_with(".pack"));
        if is_pack && Some(path.as_path()) != keep {
            let _ = fs::remove_file(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::CommittedLeaderId;

    #[test]
    fn a_pack_unpacks_to_the_same_files_and_record() {
        let dir = std::env::temp_dir().join(format!("shoal-pack-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let ckpt = dir.join("ckpt");
        fs::create_dir_all(&ckpt).unwrap();
        fs::write(ckpt.join("manifest"), b"shoal checkpoint 1\n").unwrap();
        fs::write(ckpt.join("table_1_0.dat"), vec![7u8; 100_000]).unwrap();
        let record = SnapshotRecord {
            last_log_id: LogId::new(CommittedLeaderId::new(3, 1), 42),
            membership: StoredMembership::default(),
            end_lsn: 0x1234,
        };
        let pack_file = dir.join("x.pack");
        pack(&record, &ckpt, &pack_file).unwrap();
        let out = dir.join("out");
        assert_eq!(unpack(&pack_file, &out).unwrap(), record);
        assert_eq!(
            fs::read(out.join("table_1_0.dat")).unwrap(),
            vec![7u8; 100_000]
        );
        assert_eq!(
            fs::read(out.join("manifest")).unwrap(),
            b"shoal checkpoint 1\n"
        );
        // A flipped byte is caught.
        let mut bytes = fs::read(&pack_file).unwrap();
        let at = bytes.len() - 10;
        bytes[at] ^= 1;
        fs::write(&pack_file, bytes).unwrap();
        assert!(unpack(&pack_file, &out).is_err());
        let _ = fs::remove_dir_all(&dir);
    }
}
