//! Tests of checkpoint files: a parallel round trip of several tables and parts, damage
//! (truncation, a flipped byte, a missing file) reported as corruption naming the file, and the
//! CURRENT switch (older checkpoints replaced, unpublished ones ignored and cleaned up).

mod common;

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use common::TestDir;
use parking_lot::Mutex;
use shoal_wal::{
    load_checkpoint_parts, read_current_checkpoint, write_checkpoint, CheckpointManifest,
    TablePart, WalError,
};

type Rows = BTreeMap<(u64, u64), Vec<u8>>;

/// Rows of `table`, part `part`: ids are distinct across parts, sizes vary, one row exceeds a block.
fn part_rows(table: u64, part: u32, count: u64) -> Vec<(u64, Vec<u8>)> {
    (0..count)
        .map(|i| {
            let row_id = u64::from(part) * 1_000_000 + i;
            let len = if i == 7 {
                (1 << 20) + 5
            } else {
                (i % 50) as usize
            };
            (row_id, vec![(table as u8).wrapping_add(i as u8); len])
        })
        .collect()
}

/// Parts for tables 1..=3 with 2 parts each; returns the parts and every row they hold.
fn sample_parts(rows_per_part: u64) -> (Vec<TablePart<'static>>, Rows) {
    let mut parts = Vec::new();
    let mut expected = Rows::new();
    for table in 1..=3u64 {
        for part in 0..2u32 {
            let rows = part_rows(table, part, rows_per_part);
            expected.extend(rows.iter().map(|(id, r)| ((table, *id), r.clone())));
            parts.push(TablePart {
                table,
                part,
                produce: Box::new(move |sink| {
                    for (id, row) in &rows {
                        sink(*id, row)?;
                    }
                    Ok(())
                }),
            });
        }
    }
    (parts, expected)
}

fn load_all(manifest: &CheckpointManifest) -> Result<Rows, WalError> {
    let loaded = Mutex::new(Rows::new());
    let summary = load_checkpoint_parts(manifest, 3, &|table, rows| {
        assert!(!rows.is_empty(), "a block without rows");
        let mut loaded = loaded.lock();
        for &(row_id, row) in rows {
            assert!(
                loaded.insert((table, row_id), row.to_vec()).is_none(),
                "row loaded twice"
            );
        }
    })?;
    let loaded = loaded.into_inner();
    assert_eq!(summary.rows, loaded.len() as u64);
    Ok(loaded)
}

fn current(dir: &Path) -> CheckpointManifest {
    read_current_checkpoint(dir)
        .unwrap()
        .expect("a current checkpoint")
}

fn assert_corrupt_names(err: WalError, file: &Path) {
    let text = err.to_string();
    match &err {
        WalError::Corrupt { file: f, .. } => assert_eq!(f, file, "{text}"),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert!(
        text.contains(&file.display().to_string()),
        "message does not name the file: {text}"
    );
}

#[test]
fn checkpoint_round_trips_tables_and_parts_in_parallel() {
    let dir = TestDir::new("ckpt");
    assert!(read_current_checkpoint(dir.path()).unwrap().is_none());
    let (parts, expected) = sample_parts(3000);
    let info = write_checkpoint(dir.path(), 777, 777, b"the catalog", parts, 3).unwrap();
    assert_eq!(info.rows, expected.len() as u64);

    let manifest = current(dir.path());
    assert_eq!(manifest.id, info.id);
    assert_eq!(manifest.start_lsn, 777);
    assert_eq!(manifest.catalog_image, b"the catalog");
    assert_eq!(manifest.parts.len(), 6);
    assert_eq!(
        manifest.parts.iter().map(|p| p.bytes).sum::<u64>(),
        info.bytes
    );
    assert_eq!(load_all(&manifest).unwrap(), expected);
}

#[test]
fn empty_tables_and_empty_catalog_round_trip() {
    let dir = TestDir::new("ckpt-empty");
    let parts = vec![TablePart {
        table: 5,
        part: 0,
        produce: Box::new(|_| Ok(())),
    }];
    write_checkpoint(dir.path(), 0, 0, b"", parts, 4).unwrap();
    let manifest = current(dir.path());
    assert!(manifest.catalog_image.is_empty());
    assert_eq!(manifest.parts.len(), 1);
    assert!(load_all(&manifest).unwrap().is_empty());
}

#[test]
fn damaged_checkpoint_files_are_corruption_naming_the_file() {
    let dir = TestDir::new("ckpt-damage");
    let (parts, _) = sample_parts(500);
    write_checkpoint(dir.path(), 1, 1, b"cat", parts, 2).unwrap();
    let manifest = current(dir.path());
    let (first, second) = (&manifest.parts[0].path, &manifest.parts[1].path);

    // A flipped byte inside a block.
    let mut bytes = std::fs::read(first).unwrap();
    bytes[100] ^= 0x10;
    std::fs::write(first, &bytes).unwrap();
    assert_corrupt_names(load_all(&manifest).unwrap_err(), first);
    bytes[100] ^= 0x10;
    std::fs::write(first, &bytes).unwrap();
    assert!(load_all(&manifest).is_ok());

    // A truncated file, even with the manifest's size patched to match, loses its footer.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(second)
        .unwrap();
    file.set_len(manifest.parts[1].bytes - 10).unwrap();
    assert_corrupt_names(load_all(&manifest).unwrap_err(), second);
    let mut patched = manifest.clone();
    patched.parts[1].bytes -= 10;
    assert_corrupt_names(load_all(&patched).unwrap_err(), second);

    // A missing file.
    std::fs::remove_file(second).unwrap();
    assert_corrupt_names(load_all(&manifest).unwrap_err(), second);

    // A damaged catalog image or manifest stops reading the checkpoint at all.
    let catalog = first.parent().unwrap().join("catalog.bin");
    let mut bytes = std::fs::read(&catalog).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&catalog, &bytes).unwrap();
    assert_corrupt_names(read_current_checkpoint(dir.path()).unwrap_err(), &catalog);
    let manifest_path = first.parent().unwrap().join("manifest");
    let text = std::fs::read_to_string(&manifest_path)
        .unwrap()
        .replace("start_lsn 1", "start_lsn 2");
    std::fs::write(&manifest_path, text).unwrap();
    assert_corrupt_names(
        read_current_checkpoint(dir.path()).unwrap_err(),
        &manifest_path,
    );
}

#[test]
fn current_switches_to_the_newest_complete_checkpoint() {
    let dir = TestDir::new("ckpt-current");
    let root = dir.path().join("checkpoints");
    let (parts, _) = sample_parts(10);
    let first = write_checkpoint(dir.path(), 10, 10, b"one", parts, 2).unwrap();
    let (parts, expected) = sample_parts(20);
    let second = write_checkpoint(dir.path(), 20, 20, b"two", parts, 2).unwrap();
    assert!(second.id > first.id);
    assert!(!first.dir.exists(), "the replaced checkpoint is deleted");
    let manifest = current(dir.path());
    assert_eq!(
        (
            manifest.id,
            manifest.start_lsn,
            manifest.catalog_image.as_slice()
        ),
        (second.id, 20, &b"two"[..])
    );
    assert_eq!(load_all(&manifest).unwrap(), expected);

    // A checkpoint interrupted before CURRENT was switched: its directory exists, half written.
    let interrupted = root.join(format!("{:016x}", second.id + 1));
    std::fs::create_dir(&interrupted).unwrap();
    std::fs::write(interrupted.join("table_1_0.dat"), b"partial").unwrap();
    assert_eq!(
        current(dir.path()).id,
        second.id,
        "an unpublished checkpoint is ignored"
    );

    // A failing producer leaves CURRENT alone and cleans up its own directory.
    let failing = vec![TablePart {
        table: 1,
        part: 0,
        produce: Box::new(|_| Err(io::Error::other("scan failed"))),
    }];
    assert!(write_checkpoint(dir.path(), 30, 30, b"three", failing, 1).is_err());
    assert_eq!(current(dir.path()).id, second.id);

    // The next successful checkpoint gets a fresh id and removes the leftovers.
    let (parts, _) = sample_parts(5);
    let third = write_checkpoint(dir.path(), 40, 40, b"four", parts, 2).unwrap();
    assert!(third.id > second.id + 1);
    assert!(!interrupted.exists() && !second.dir.exists());
    let dirs: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(dirs, vec![third.dir.clone()]);
    assert_eq!(current(dir.path()).start_lsn, 40);
}
