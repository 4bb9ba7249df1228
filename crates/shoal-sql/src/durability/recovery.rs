//! Start-up: load the newest checkpoint (catalog, then every table's rows on all cores), replay
//! the redo log written after it, then open the log for new records. Replay applies commits in
//! log order through ordinary storage transactions, keyed by the rows' hidden ids; catalog
//! records reconcile the storage tables and indexes with the logged definitions.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use shoal_storage::catalog::{AccessMethod, Catalog, IndexDef as CatalogIndexDef, TableDef};
use shoal_storage::column::{segment_from_ipc, split_row_id};
use shoal_storage::recovery::RECOVERED_TS;
use shoal_storage::{
    ChangeKind, ColumnTable, Database, IsolationLevel, RedoChange, RowRef, RowTable, TableId,
};
use shoal_wal::{read_log, CheckpointManifest, DataDirLock, Lsn, ReadError, Record, Wal};

use super::{Durability, DurabilityOptions, WalSink};

/// What recovery did, for the server log.
#[derive(Debug, Default)]
pub struct RecoveryReport {
    pub checkpoint_id: Option<u64>,
    pub checkpoint_rows: u64,
    pub checkpoint_bytes: u64,
    pub checkpoint_load: Duration,
    /// The part of `checkpoint_load` spent sorting and hashing the loaded index entries.
    pub checkpoint_index_fold: Duration,
    /// Of which (they overlap): sorting the ordered runs, and filling the hash maps.
    pub checkpoint_ordered_runs: Duration,
    pub checkpoint_point_maps: Duration,
    pub log_records: u64,
    pub log_bytes: u64,
    pub log_replay: Duration,
    pub torn_tail_cut_bytes: u64,
    /// Archive recovery: segments fetched with restore_command, and where replay stopped for
    /// recovery_target_time (the time of the first record left out).
    pub restored_segments: usize,
    pub stopped_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl std::fmt::Display for RecoveryReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let load_s = self.checkpoint_load.as_secs_f64();
        match self.checkpoint_id {
            Some(id) => write!(
                f,
                "loaded checkpoint {id}: {} rows, {:.1} MB in {:.3} s ({:.0} MB/s, indexes {:.3} s: \
                 runs {:.3} s, hash maps {:.3} s); ",
                self.checkpoint_rows,
                self.checkpoint_bytes as f64 / 1e6,
                load_s,
                self.checkpoint_bytes as f64 / 1e6 / load_s.max(1e-9),
                self.checkpoint_index_fold.as_secs_f64(),
                self.checkpoint_ordered_runs.as_secs_f64(),
                self.checkpoint_point_maps.as_secs_f64(),
            )?,
            None => write!(f, "no checkpoint; ")?,
        }
        write!(
            f,
            "replayed {} log records, {:.1} MB in {:.3} s",
            self.log_records,
            self.log_bytes as f64 / 1e6,
            self.log_replay.as_secs_f64()
        )?;
        if self.torn_tail_cut_bytes > 0 {
            write!(
                f,
                "; cut a torn log tail of {} bytes",
                self.torn_tail_cut_bytes
            )?;
        }
        if self.restored_segments > 0 {
            write!(
                f,
                "; {} segments restored from the archive",
                self.restored_segments
            )?;
        }
        if let Some(at) = self.stopped_at {
            write!(
                f,
                "; recovery stopped at the target, before the log of {at}"
            )?;
        }
        Ok(())
    }
}

/// Recovers the database in `data_dir` into `db` and returns its catalog and the open log.
pub(crate) fn recover(
    data_dir: &Path,
    db: &Arc<Database>,
    options: DurabilityOptions,
) -> Result<(Catalog, Durability, RecoveryReport), String> {
    let mut report = RecoveryReport::default();
    let started = Instant::now();
    // Before anything is read: recovery itself writes (it cuts a torn log tail).
    let dir_lock = DataDirLock::acquire(data_dir).map_err(|e| e.to_string())?;
    let (catalog, manifest) = load_checkpoint(data_dir, db, &options, &mut report)?;
    let start_lsn = manifest.as_ref().map_or(0, |m| m.start_lsn);
    report.checkpoint_load = started.elapsed();

    let replay_started = Instant::now();
    let mut replay = Replay::new(db.clone(), catalog);
    let covered_lsn = manifest.as_ref().map_or(0, |m| m.covered_lsn);
    let mut target_micros = None;
    if let Some(restore) = &options.restore {
        if let Some(command) = &restore.restore_command {
            report.restored_segments =
                super::archive::fetch_archived_segments(data_dir, command, start_lsn)?;
        }
        target_micros = restore.target_time;
    }
    let mut stopped_at = None;
    let summary = read_log(data_dir, start_lsn, |lsn, record| {
        // Archive recovery to a point in time: everything logged after the first clock past
        // the target is left out (the log is still read to its end, where appends resume).
        if let (Record::Clock { unix_micros }, Some(target)) = (record, target_micros) {
            if unix_micros > target && stopped_at.is_none() {
                stopped_at = chrono::DateTime::from_timestamp_micros(unix_micros);
            }
        }
        if stopped_at.is_some() {
            return Ok(());
        }
        // Before the checkpoint's cut only records logged ahead of a commit (and those that
        // abandon them) are new to it.
        let ahead_of_commit = matches!(
            record,
            Record::RowChanges { .. } | Record::ColumnSegment { .. } | Record::Abandoned { .. }
        );
        if lsn < covered_lsn && !ahead_of_commit {
            replay.forget_committed(&record);
            return Ok(());
        }
        replay.apply(lsn, record)
    })
    .map_err(|e| match e {
        ReadError::Wal(e) => e.to_string(),
        ReadError::Visitor(e) => format!("replaying the redo log: {e}"),
    })?;
    report.log_records = summary.records;
    report.log_bytes = summary.bytes;
    report.torn_tail_cut_bytes = summary.torn_tail_cut_bytes;
    report.stopped_at = stopped_at;
    if target_micros.is_some() && stopped_at.is_none() {
        // As PostgreSQL: a restore short of its target (a segment missing from the archive)
        // is not silently taken for the state at the target.
        return Err(
            "recovery ended before the configured recovery target was reached: the log has \
             nothing after recovery_target_time (remove it to recover to the end of the \
             archive, or check restore_command)"
                .to_string(),
        );
    }
    report.log_replay = replay_started.elapsed();
    let catalog = replay.catalog;

    let mut wal_options = options.wal.clone();
    wal_options.keep_unarchived = options.archive_mode;
    let wal =
        Arc::new(Wal::open(data_dir, summary.end_lsn, wal_options).map_err(|e| e.to_string())?);
    db.set_redo_sink(Arc::new(WalSink(wal.clone())));
    db.set_early_redo_bytes(options.early_redo_bytes);
    let durability = Durability::new(data_dir, dir_lock, wal, options, start_lsn);
    Ok((catalog, durability, report))
}

/// Loads the current checkpoint of `data_dir`, if there is one, into the empty `db` (catalog,
/// storage tables, rows, indexes); returns the catalog and the checkpoint's manifest.
pub(super) fn load_checkpoint(
    data_dir: &Path,
    db: &Arc<Database>,
    options: &DurabilityOptions,
    report: &mut RecoveryReport,
) -> Result<(Catalog, Option<CheckpointManifest>), String> {
    let manifest = shoal_wal::read_current_checkpoint(data_dir).map_err(|e| e.to_string())?;
    let catalog = match &manifest {
        Some(m) => Catalog::from_image(&m.catalog_image)?,
        None => Catalog::default(),
    };
    for def in catalog.tables.values() {
        create_storage_table(db, &catalog, def.oid);
    }
    if let Some(m) = &manifest {
        // Loading allocates every row at once, from fresh threads' fresh heaps.
        let _growth = crate::allocator::BulkHeapGrowth::begin();
        let tables: HashMap<TableId, Arc<RowTable>> =
            db.tables().into_iter().map(|t| (t.id(), t)).collect();
        let column_tables: HashMap<TableId, Arc<ColumnTable>> = db
            .column_tables()
            .into_iter()
            .map(|t| (t.id(), t))
            .collect();
        let damage: Mutex<Option<String>> = Mutex::new(None);
        let summary =
            shoal_wal::load_checkpoint_parts(m, options.checkpoint_threads, &|table, rows| {
                if let Some(t) = tables.get(&table) {
                    t.load_rows(rows)
                } else if let Some(t) = column_tables.get(&table) {
                    for &(row_id, data) in rows {
                        if let Err(e) = load_column_entry(t, row_id, data) {
                            damage.lock().get_or_insert(e);
                        }
                    }
                } else {
                    tracing::warn!("checkpoint rows for unknown table {table} skipped")
                }
            })
            .map_err(|e| e.to_string())?;
        if let Some(e) = damage.into_inner() {
            return Err(format!("checkpoint {}: {e}", m.id));
        }
        // Sort and hash the loaded index entries now, a table at a time on every thread, so
        // that recovery's time includes it and the first queries do not pay for it.
        let fold_started = Instant::now();
        for table in tables.values() {
            let times = table.finish_load(options.checkpoint_threads);
            report.checkpoint_ordered_runs += times.ordered_runs;
            report.checkpoint_point_maps += times.point_maps;
        }
        report.checkpoint_index_fold = fold_started.elapsed();
        report.checkpoint_id = Some(m.id);
        report.checkpoint_rows = summary.rows;
        report.checkpoint_bytes = summary.bytes;
    }
    db.restart_clock_at(RECOVERED_TS);
    Ok((catalog, manifest))
}

/// The storage index for a catalog index, if storage keeps one. A partial index's clause
/// compiled when the index was created; should it no longer, the index stays in the catalog
/// only rather than stopping recovery.
fn storage_index(idx: &CatalogIndexDef, table: &TableDef) -> Option<shoal_storage::IndexDef> {
    crate::ddl::index_predicate::storage_index(idx, table).unwrap_or_else(|e| {
        tracing::warn!("index {} not rebuilt: {}", idx.name, e.message);
        None
    })
}

/// Creates the storage of a catalog table; returns it when it is a row table.
fn create_storage_table(db: &Database, catalog: &Catalog, oid: u32) -> Option<Arc<RowTable>> {
    let def = &catalog.tables[&oid];
    if def.access_method == AccessMethod::Columnar {
        db.create_column_table(oid as u64, crate::query::provider::table_schema(def));
        return None;
    }
    let table = db.create_table(oid as u64, def.column_types());
    for idx in catalog.table_indexes(oid) {
        if let Some(def) = storage_index(&idx, def) {
            table.add_index(def).expect("index on an empty table");
        }
    }
    Some(table)
}

/// Loads one column-table entry of a checkpoint or of a logged commit: a segment's Arrow IPC
/// image under the row id of its first row, or (empty) the delete of one row.
fn load_column_entry(table: &ColumnTable, row_id: u64, data: &[u8]) -> Result<(), String> {
    if data.is_empty() {
        table.load_delete(row_id);
        return Ok(());
    }
    let (batch, stored_stats) = segment_from_ipc(data)?;
    // Types are checked by `load_segment`: text may come plain or as a dictionary.
    let names = |s: &datafusion::arrow::datatypes::SchemaRef| -> Vec<String> {
        s.fields().iter().map(|f| f.name().clone()).collect()
    };
    if names(&batch.schema()) != names(&table.plain_schema()) {
        return Err(format!(
            "column segment of table {} has the wrong columns",
            table.id()
        ));
    }
    // Images written before the stats were stored carry none.
    let stats = match stored_stats {
        Some(stats) => stats,
        None => crate::dml::column::segment_stats(&batch).map_err(|e| e.message)?,
    };
    table
        .load_segment(split_row_id(row_id).0, batch, stats)
        .map_err(|e| e.to_string())
}

/// A table's rows logged by a rewrite, waiting for the catalog record that installs them.
#[derive(Default)]
struct PendingImage {
    /// Where its `TableImageBegin` record is.
    first_lsn: Lsn,
    rows: Vec<(u64, Vec<u8>)>,
    complete: bool,
}

pub(super) struct Replay {
    db: Arc<Database>,
    catalog: Catalog,
    /// Row handles by hidden id for the tables the log touched so far.
    rows_by_id: HashMap<TableId, HashMap<u64, RowRef>>,
    images: HashMap<TableId, PendingImage>,
    /// Column segments logged ahead of their commit, by table and row id, until the commit
    /// record that names them, or the `Abandoned` record of a transaction that rolled back (or
    /// the end of the log, for one that never finished), with the LSN of each.
    early_segments: HashMap<(TableId, u64), (Lsn, Vec<u8>)>,
    /// Row changes logged ahead of their commit, by chain (see `shoal_storage::early_redo`),
    /// until the commit record that names the chain. A chain abandoned, or no commit names, is
    /// dropped.
    early_rows: HashMap<u64, Vec<OwnedChange>>,
}

/// A row change copied out of a `RowChanges` record (the log's bytes do not outlive the record).
struct OwnedChange {
    table: TableId,
    kind: ChangeKind,
    row_id: u64,
    row: Vec<u8>,
}

impl OwnedChange {
    fn borrow(&self) -> RedoChange<'_> {
        RedoChange {
            table: self.table,
            kind: self.kind,
            row_id: self.row_id,
            row: &self.row,
        }
    }
}

impl Replay {
    pub(super) fn new(db: Arc<Database>, catalog: Catalog) -> Replay {
        Replay {
            db,
            catalog,
            rows_by_id: HashMap::new(),
            images: HashMap::new(),
            early_segments: HashMap::new(),
            early_rows: HashMap::new(),
        }
    }

    /// The catalog as the log has it so far.
    pub(super) fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Where the oldest record still waiting for a later one (a commit, or a table image's
    /// catalog record) is: a checkpoint of the database as replayed so far must replay from
    /// there. `None` when nothing waits.
    pub(super) fn pending_from(&self) -> Option<Lsn> {
        let rows = self.early_rows.keys().copied();
        let segments = self.early_segments.values().map(|(lsn, _)| *lsn);
        let images = self.images.values().map(|p| p.first_lsn);
        rows.chain(segments).chain(images).min()
    }

    /// `record` is before the loaded checkpoint's cut, which holds what it did: if it is a
    /// commit, the records it names that were logged ahead of it, and replayed from the
    /// checkpoint's start, are done with (else a standby, which never reaches the log's end,
    /// would keep them, and its checkpoints would replay from them forever).
    pub(super) fn forget_committed(&mut self, record: &Record<'_>) {
        let Record::Commit { changes, early, .. } = record else {
            return;
        };
        if let Some(early) = early {
            self.early_rows.remove(&early.chain);
        }
        if self.early_segments.is_empty() {
            return;
        }
        // A segment logged ahead is named by an insert with an empty image.
        for c in changes.iter() {
            if c.kind == ChangeKind::Insert && c.row.is_empty() {
                self.early_segments.remove(&(c.table, c.row_id));
            }
        }
    }

    /// Applies `record`, which the log holds at `lsn`.
    pub(super) fn apply(&mut self, lsn: Lsn, record: Record<'_>) -> Result<(), String> {
        match record {
            Record::Commit { changes, early, .. } => {
                let mut txn = self.db.begin(IsolationLevel::ReadCommitted);
                if let Some(early) = early {
                    let mut logged = self.early_rows.remove(&early.chain).unwrap_or_default();
                    if (logged.len() as u64) < early.writes {
                        return Err(format!(
                            "a commit names {} row changes logged ahead of it at LSN {:X}, \
                             but the log holds {}",
                            early.writes,
                            early.chain,
                            logged.len()
                        ));
                    }
                    logged.truncate(early.writes as usize);
                    for c in &logged {
                        self.apply_change(&mut txn, c.borrow())?;
                    }
                }
                for c in changes.iter() {
                    self.apply_change(&mut txn, c)?;
                }
                self.db.commit(txn).map_err(|e| e.to_string())?;
            }
            Record::Catalog { image } => {
                let catalog = Catalog::from_image(image)?;
                self.reconcile(catalog)?;
            }
            Record::TableImageBegin { table } => {
                self.images.insert(
                    table,
                    PendingImage {
                        first_lsn: lsn,
                        ..PendingImage::default()
                    },
                );
            }
            Record::TableImageRows { table, rows } => {
                if let Some(p) = self.images.get_mut(&table) {
                    p.rows.extend(rows.iter().map(|(id, d)| (id, d.to_vec())));
                }
            }
            Record::TableImageEnd { table } => {
                if let Some(p) = self.images.get_mut(&table) {
                    p.complete = true;
                }
            }
            Record::ColumnSegment {
                table,
                row_id,
                image,
            } => {
                self.early_segments
                    .insert((table, row_id), (lsn, image.to_vec()));
            }
            Record::Abandoned { chain, segments } => {
                if let Some(chain) = chain {
                    self.early_rows.remove(&chain);
                }
                for id in segments.iter() {
                    self.early_segments.remove(&id);
                }
            }
            Record::RowChanges {
                chain,
                first_write,
                changes,
            } => {
                let logged = self.early_rows.entry(chain).or_default();
                if first_write > logged.len() as u64 {
                    return Err(format!(
                        "row changes logged ahead of a commit at LSN {chain:X} continue at \
                         change {first_write}, but the log holds {}",
                        logged.len()
                    ));
                }
                // A later record from an earlier write: a ROLLBACK TO SAVEPOINT undid the rest.
                logged.truncate(first_write as usize);
                logged.extend(changes.iter().map(|c| OwnedChange {
                    table: c.table,
                    kind: c.kind,
                    row_id: c.row_id,
                    row: c.row.to_vec(),
                }));
            }
            Record::Sequence {
                oid,
                last_value,
                is_called,
            } => {
                if let Some(seq) = self.catalog.sequences.get(&oid) {
                    seq.set_value(last_value, is_called);
                }
            }
            Record::Clock { .. } => {}
        }
        Ok(())
    }

    fn apply_change(
        &mut self,
        txn: &mut shoal_storage::Transaction,
        c: shoal_storage::RedoChange<'_>,
    ) -> Result<(), String> {
        if let Some(table) = self.db.column_table(c.table) {
            let early = (c.kind == ChangeKind::Insert && c.row.is_empty())
                .then(|| self.early_segments.remove(&(c.table, c.row_id)));
            return match c.kind {
                // A segment the checkpoint already holds is not loaded twice.
                ChangeKind::Insert if table.segment(split_row_id(c.row_id).0).is_some() => Ok(()),
                ChangeKind::Insert => match early {
                    None => load_column_entry(&table, c.row_id, c.row),
                    Some(Some((_, image))) => load_column_entry(&table, c.row_id, &image),
                    Some(None) => Err(format!(
                        "a commit names segment {} of table {}, which is not in the log",
                        split_row_id(c.row_id).0,
                        c.table
                    )),
                },
                _ => load_column_entry(&table, c.row_id, c.row),
            };
        }
        // A table dropped later in the log (or already in the checkpoint's catalog) is gone.
        let Some(table) = self.db.table(c.table) else {
            return Ok(());
        };
        let rows = self
            .rows_by_id
            .entry(c.table)
            .or_insert_with(|| table.rows_by_id());
        let err = |e: shoal_storage::StorageError| e.to_string();
        match (c.kind, rows.get(&c.row_id)) {
            (ChangeKind::Insert | ChangeKind::Update, Some(row)) => {
                table.redo_update(txn, row, c.row).map_err(err)?
            }
            (ChangeKind::Insert | ChangeKind::Update, None) => {
                let row = table.redo_insert(txn, c.row_id, c.row).map_err(err)?;
                rows.insert(c.row_id, row);
            }
            (ChangeKind::Delete, Some(row)) => {
                table.redo_delete(txn, row).map_err(err)?;
                rows.remove(&c.row_id);
            }
            // Already gone in the checkpoint: the log replays from a little before it.
            (ChangeKind::Delete, None) => {}
        }
        Ok(())
    }

    /// Brings storage in line with a logged catalog: creates and drops tables and indexes, and
    /// installs the rows of tables rewritten just before.
    fn reconcile(&mut self, catalog: Catalog) -> Result<(), String> {
        // A table whose access method changed (ALTER TABLE ... SET ACCESS METHOD) is dropped
        // here and comes back below in its new storage, from the image logged before.
        let method_of = |id: TableId| catalog.tables.get(&(id as u32)).map(|d| d.access_method);
        for table in self.db.column_tables() {
            if method_of(table.id()) != Some(AccessMethod::Columnar) {
                self.db.drop_table(table.id());
            }
        }
        for table in self.db.tables() {
            let oid = table.id() as u32;
            let rewritten = self.images.get(&table.id()).is_some_and(|p| p.complete);
            let same_types = catalog
                .tables
                .get(&oid)
                .is_some_and(|d| d.column_types() == table.types());
            if !same_types || rewritten || method_of(table.id()) != Some(AccessMethod::Heap) {
                self.db.drop_table(table.id());
                self.rows_by_id.remove(&table.id());
            }
        }
        for def in catalog.tables.values() {
            if def.access_method == AccessMethod::Columnar {
                if self.db.column_table(def.oid as u64).is_none() {
                    create_storage_table(&self.db, &catalog, def.oid);
                    let table = self.db.column_table(def.oid as u64).expect("just created");
                    if let Some(image) = self.images.remove(&table.id()).filter(|p| p.complete) {
                        for (row_id, data) in &image.rows {
                            load_column_entry(&table, *row_id, data)?;
                        }
                    }
                }
                continue;
            }
            let table = match self.db.table(def.oid as u64) {
                Some(t) => t,
                None => {
                    let Some(t) = create_storage_table(&self.db, &catalog, def.oid) else {
                        continue;
                    };
                    if let Some(image) = self.images.remove(&t.id()).filter(|p| p.complete) {
                        for (row_id, data) in &image.rows {
                            t.load_row(*row_id, data);
                        }
                    }
                    continue;
                }
            };
            let wanted: Vec<_> = catalog
                .table_indexes(def.oid)
                .iter()
                .filter_map(|i| storage_index(i, &def))
                .collect();
            // A failed CREATE UNIQUE INDEX is logged and then removed again by the next
            // catalog record.
            for (w, e) in table.set_indexes(wanted) {
                tracing::warn!("replay: index {} not rebuilt: {e}", w.name);
            }
        }
        self.images.retain(|_, p| !p.complete);
        self.catalog = catalog;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A standby replays the log without reaching an end: what a rolled-back transaction
    /// logged ahead of its commit must stop holding back its checkpoints' replay start once the
    /// log says it is abandoned.
    #[test]
    fn abandoned_segments_stop_holding_back_the_replay_start() {
        let mut replay = Replay::new(Database::new(), Catalog::default());
        let segment = |row_id| Record::ColumnSegment {
            table: 7,
            row_id,
            image: b"image",
        };
        replay.apply(100, segment(1 << 32)).unwrap();
        replay.apply(200, segment(2 << 32)).unwrap();
        assert_eq!(replay.pending_from(), Some(100));
        let mut buf = Vec::new();
        let abandoned = Record::Abandoned {
            chain: Some(50),
            segments: shoal_wal::SegmentIds::encode(&[(7, 1 << 32)], &mut buf),
        };
        replay.apply(300, abandoned).unwrap();
        assert_eq!(replay.pending_from(), Some(200));
        let abandoned = Record::Abandoned {
            chain: None,
            segments: shoal_wal::SegmentIds::encode(&[(7, 2 << 32)], &mut buf),
        };
        replay.apply(400, abandoned).unwrap();
        assert_eq!(replay.pending_from(), None);
    }

    /// A standby replaying from a checkpoint's start skips the commits the checkpoint holds,
    /// but must forget the records they name that were logged ahead of them.
    #[test]
    fn a_commit_before_the_cut_releases_what_it_names() {
        let dir = std::env::temp_dir().join(format!("shoal-forget-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let wal = Wal::open(&dir, 0, shoal_wal::WalOptions::default()).unwrap();
        let segment = RedoChange {
            table: 7,
            kind: ChangeKind::Insert,
            row_id: 1 << 32,
            row: b"",
        };
        let early = shoal_storage::EarlyRedo {
            chain: 50,
            writes: 0,
        };
        let end = wal.append_commit(|_| 1, &[segment], Some(early)).unwrap();
        wal.wait_flushed_blocking(end).unwrap();
        wal.shutdown();
        let mut replay = Replay::new(Database::new(), Catalog::default());
        replay
            .apply(
                100,
                Record::ColumnSegment {
                    table: 7,
                    row_id: 1 << 32,
                    image: b"image",
                },
            )
            .unwrap();
        replay.early_rows.insert(50, Vec::new());
        assert_eq!(replay.pending_from(), Some(50));
        let mut commits = 0;
        read_log(&dir, 0, |_, record| {
            commits += matches!(record, Record::Commit { .. }) as usize;
            replay.forget_committed(&record);
            Ok::<(), std::convert::Infallible>(())
        })
        .unwrap();
        assert_eq!(commits, 1);
        assert_eq!(replay.pending_from(), None);
        std::fs::remove_dir_all(&dir).ok();
    }
}
