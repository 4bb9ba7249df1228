//! Column tables: segment visibility at commit and rollback, deletes under the table write lock,
//! savepoints, REPEATABLE READ conflicts, the redo of column writes, and the IPC round trip.

use std::sync::{Arc, Mutex};

use arrow::array::{Array, ArrayRef, Int64Array, StringArray};
use arrow::datatypes::{DataType as ArrowType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use shoal_storage::column::{row_id, segment_from_ipc, segment_to_ipc};
use shoal_storage::*;

const TRIPS: TableId = 7;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", ArrowType::Int64, true),
        Field::new("cab", ArrowType::Utf8, true),
    ]))
}

fn batch(ids: std::ops::Range<i64>) -> (RecordBatch, Vec<ColumnStats>) {
    let id: ArrayRef = Arc::new(Int64Array::from_iter_values(ids.clone()));
    let cab: ArrayRef = Arc::new(StringArray::from_iter_values(ids.clone().map(|i| {
        if i % 2 == 0 {
            "yellow"
        } else {
            "green"
        }
    })));
    let stats = vec![
        ColumnStats {
            min: Arc::new(Int64Array::from(vec![ids.start])),
            max: Arc::new(Int64Array::from(vec![ids.end - 1])),
            null_count: 0,
        },
        ColumnStats {
            min: Arc::new(StringArray::from(vec!["green"])),
            max: Arc::new(StringArray::from(vec!["yellow"])),
            null_count: 0,
        },
    ];
    (
        RecordBatch::try_new(schema(), vec![id, cab]).unwrap(),
        stats,
    )
}

/// `batch` with dictionary columns decoded, in the plain schema.
fn plain(batch: RecordBatch) -> RecordBatch {
    let columns: Vec<ArrayRef> = batch
        .columns()
        .iter()
        .map(|c| match c.data_type() {
            ArrowType::Dictionary(_, v) => arrow::compute::cast(c, v).unwrap(),
            _ => c.clone(),
        })
        .collect();
    RecordBatch::try_new(schema(), columns).unwrap()
}

fn visible_rows(db: &Database, t: &ColumnTable, txn: &mut Transaction) -> usize {
    let snap = db.statement_snapshot(txn);
    t.live_row_count(&snap)
}

fn count_now(db: &Arc<Database>, t: &ColumnTable) -> usize {
    let mut txn = db.begin(IsolationLevel::ReadCommitted);
    let n = visible_rows(db, t, &mut txn);
    db.commit(txn).unwrap();
    n
}

#[test]
fn segments_appear_at_commit_and_vanish_on_rollback() {
    let db = Database::new();
    let t = db.create_column_table(TRIPS, schema());
    let mut writer = db.begin(IsolationLevel::ReadCommitted);
    let (b, s) = batch(0..100);
    t.append(&mut writer, b, s).unwrap();
    assert_eq!(visible_rows(&db, &t, &mut writer), 100, "own insert");
    assert_eq!(count_now(&db, &t), 0, "uncommitted segment is invisible");
    db.commit(writer).unwrap();
    assert_eq!(count_now(&db, &t), 100);

    let mut loser = db.begin(IsolationLevel::ReadCommitted);
    let (b, s) = batch(100..150);
    t.append(&mut loser, b, s).unwrap();
    db.rollback(loser);
    assert_eq!(count_now(&db, &t), 100);
    assert_eq!(t.segments().len(), 1, "rolled-back segment is removed");
}

#[test]
fn old_snapshot_keeps_seeing_deleted_rows() {
    let db = Database::new();
    let t = db.create_column_table(TRIPS, schema());
    let mut w = db.begin(IsolationLevel::ReadCommitted);
    let (b, s) = batch(0..10);
    let no = t.append(&mut w, b, s).unwrap();
    db.commit(w).unwrap();

    let mut reader = db.begin(IsolationLevel::RepeatableRead);
    assert_eq!(visible_rows(&db, &t, &mut reader), 10);

    let mut deleter = db.begin(IsolationLevel::ReadCommitted);
    t.lock_for_write(&mut deleter).unwrap();
    let snap = db.statement_snapshot(&mut deleter);
    assert!(t.delete(&mut deleter, &snap, row_id(no, 3)).unwrap());
    assert!(
        !t.delete(&mut deleter, &snap, row_id(no, 3)).unwrap(),
        "second delete of the same row by the same transaction"
    );
    assert_eq!(visible_rows(&db, &t, &mut deleter), 9, "own delete");
    db.commit(deleter).unwrap();

    assert_eq!(
        visible_rows(&db, &t, &mut reader),
        10,
        "snapshot before delete"
    );
    assert_eq!(count_now(&db, &t), 9);
    let segment = t.segment(no).unwrap();
    let mut now = db.begin(IsolationLevel::ReadCommitted);
    let snap = db.statement_snapshot(&mut now);
    let mask = segment.live_mask(&snap).expect("a row is deleted");
    assert!(!mask.value(3) && mask.value(2));
}

#[test]
fn write_lock_blocks_second_deleter_and_repeatable_read_fails() {
    let db = Database::new();
    let t = db.create_column_table(TRIPS, schema());
    let mut w = db.begin(IsolationLevel::ReadCommitted);
    let (b, s) = batch(0..10);
    let no = t.append(&mut w, b, s).unwrap();
    db.commit(w).unwrap();

    let mut rr = db.begin(IsolationLevel::RepeatableRead);
    let rr_snap = db.statement_snapshot(&mut rr);

    let mut first = db.begin(IsolationLevel::ReadCommitted);
    t.lock_for_write(&mut first).unwrap();
    let snap = db.statement_snapshot(&mut first);
    t.delete(&mut first, &snap, row_id(no, 0)).unwrap();
    match t.lock_for_write(&mut rr) {
        Err(StorageError::WouldBlock { holder }) => assert_eq!(holder, first.id()),
        other => panic!("expected WouldBlock, got {other:?}"),
    }
    db.commit(first).unwrap();
    t.lock_for_write(&mut rr).unwrap();
    assert_eq!(
        t.delete(&mut rr, &rr_snap, row_id(no, 0)),
        Err(StorageError::SerializationFailure)
    );
    // A row nobody touched is fine.
    assert!(t.delete(&mut rr, &rr_snap, row_id(no, 1)).unwrap());
    db.commit(rr).unwrap();
    assert_eq!(count_now(&db, &t), 8);
}

#[test]
fn rollback_to_savepoint_undoes_column_writes() {
    let db = Database::new();
    let t = db.create_column_table(TRIPS, schema());
    let mut txn = db.begin(IsolationLevel::ReadCommitted);
    let (b, s) = batch(0..10);
    let no = t.append(&mut txn, b, s).unwrap();
    db.savepoint(&mut txn, "a");
    let (b, s) = batch(10..20);
    t.append(&mut txn, b, s).unwrap();
    t.lock_for_write(&mut txn).unwrap();
    let snap = db.statement_snapshot(&mut txn);
    t.delete(&mut txn, &snap, row_id(no, 5)).unwrap();
    assert_eq!(visible_rows(&db, &t, &mut txn), 19);
    db.rollback_to_savepoint(&mut txn, "a").unwrap();
    assert_eq!(visible_rows(&db, &t, &mut txn), 10);
    db.commit(txn).unwrap();
    assert_eq!(count_now(&db, &t), 10);
}

/// Records what a commit logs, and segments logged ahead of commits (at positions 100, 101 ...).
#[derive(Default)]
struct Recorder {
    changes: Mutex<Vec<(TableId, ChangeKind, u64, Vec<u8>)>>,
    early: Mutex<Vec<(TableId, u64, Vec<u8>)>>,
}

impl RedoSink for Recorder {
    fn log_commit(
        &self,
        take_ts: &mut dyn FnMut(u64) -> CommitTs,
        changes: &[RedoChange<'_>],
        _early: Option<EarlyRedo>,
    ) -> Result<u64, String> {
        take_ts(0);
        let mut log = self.changes.lock().unwrap();
        for c in changes {
            log.push((c.table, c.kind, c.row_id, c.row.to_vec()));
        }
        Ok(0)
    }

    fn log_segment(
        &self,
        table: TableId,
        row_id: u64,
        image: &[u8],
        pin: &mut dyn FnMut(u64),
    ) -> Result<Option<u64>, String> {
        let mut early = self.early.lock().unwrap();
        pin(100 + early.len() as u64);
        early.push((table, row_id, image.to_vec()));
        Ok(Some(100 + early.len() as u64))
    }
}

#[test]
fn segments_logged_ahead_of_commit_pin_the_replay_start() {
    let db = Database::new();
    let recorder = Arc::new(Recorder::default());
    db.set_redo_sink(recorder.clone());
    let t = db.create_column_table(TRIPS, schema());
    let mut txn = db.begin(IsolationLevel::ReadCommitted);
    let (b, s) = batch(0..5);
    let first = t.append(&mut txn, b.clone(), s).unwrap();
    db.log_segment_early(&mut txn, TRIPS, first).unwrap();
    let (b2, s2) = batch(5..9);
    let second = t.append(&mut txn, b2, s2).unwrap();
    db.log_segment_early(&mut txn, TRIPS, second).unwrap();
    assert_eq!(
        db.replay_bounds(500).start,
        100,
        "the first early record pins the replay start"
    );
    assert!(db.replay_start_pinned());
    db.commit(txn).unwrap();
    assert_eq!(db.replay_bounds(500).start, 500, "released at commit");
    assert!(!db.replay_start_pinned());

    let early = recorder.early.lock().unwrap();
    assert_eq!(early.len(), 2);
    assert_eq!((early[0].0, early[0].1), (TRIPS, row_id(first, 0)));
    assert_eq!(plain(segment_from_ipc(&early[0].2).unwrap().0), b);
    let log = recorder.changes.lock().unwrap();
    assert_eq!(log.len(), 2);
    for ((_, kind, id, bytes), no) in log.iter().zip([first, second]) {
        assert_eq!((*kind, *id), (ChangeKind::Insert, row_id(no, 0)));
        assert!(
            bytes.is_empty(),
            "the commit names an early segment without its image"
        );
    }
    drop((early, log));

    // A rolled-back transaction's pin goes too.
    let mut txn = db.begin(IsolationLevel::ReadCommitted);
    let (b, s) = batch(0..2);
    let no = t.append(&mut txn, b, s).unwrap();
    db.log_segment_early(&mut txn, TRIPS, no).unwrap();
    assert_eq!(db.replay_bounds(500).start, 102);
    db.rollback(txn);
    assert_eq!(db.replay_bounds(500).start, 500);
}

/// A segment of many rows, or of few wide ones, goes into the log as it is appended: the
/// commit record only names it.
#[test]
fn big_segments_are_logged_as_they_are_appended() {
    let db = Database::new();
    let recorder = Arc::new(Recorder::default());
    db.set_redo_sink(recorder.clone());
    let t = db.create_column_table(TRIPS, schema());
    let mut txn = db.begin(IsolationLevel::ReadCommitted);
    let (small, small_stats) = batch(0..10);
    t.append(&mut txn, small, small_stats).unwrap();
    let (many, many_stats) = batch(0..4096);
    let many_no = t.append(&mut txn, many, many_stats).unwrap();
    // 64 rows of 32 KB: 2 MB in few rows.
    let wide_text = "w".repeat(32 << 10);
    let id: ArrayRef = Arc::new(Int64Array::from_iter_values(0..64));
    let cab: ArrayRef = Arc::new(StringArray::from_iter_values((0..64).map(|_| &wide_text)));
    let wide = RecordBatch::try_new(schema(), vec![id, cab]).unwrap();
    let wide_stats = vec![
        ColumnStats {
            min: Arc::new(Int64Array::from(vec![0])),
            max: Arc::new(Int64Array::from(vec![63])),
            null_count: 0,
        },
        ColumnStats {
            min: Arc::new(StringArray::from(vec![wide_text.as_str()])),
            max: Arc::new(StringArray::from(vec![wide_text.as_str()])),
            null_count: 0,
        },
    ];
    let wide_no = t.append(&mut txn, wide, wide_stats).unwrap();
    let early: Vec<u64> = recorder.early.lock().unwrap().iter().map(|e| e.1).collect();
    assert_eq!(early, vec![row_id(many_no, 0), row_id(wide_no, 0)]);
    db.commit(txn).unwrap();
    let log = recorder.changes.lock().unwrap();
    let image_bytes: Vec<usize> = log.iter().map(|c| c.3.len()).collect();
    assert_eq!(log.len(), 3);
    assert!(
        image_bytes[0] > 0,
        "the small segment's image is in the commit"
    );
    assert_eq!(&image_bytes[1..], &[0, 0], "the big ones are only named");
}

#[test]
fn commit_logs_segments_as_ipc_and_deletes_by_row_id() {
    let db = Database::new();
    let recorder = Arc::new(Recorder::default());
    db.set_redo_sink(recorder.clone());
    let t = db.create_column_table(TRIPS, schema());
    let mut txn = db.begin(IsolationLevel::ReadCommitted);
    let (b, s) = batch(0..5);
    let no = t.append(&mut txn, b.clone(), s).unwrap();
    t.lock_for_write(&mut txn).unwrap();
    let snap = db.statement_snapshot(&mut txn);
    t.delete(&mut txn, &snap, row_id(no, 2)).unwrap();
    db.commit(txn).unwrap();

    let log = recorder.changes.lock().unwrap();
    assert_eq!(log.len(), 2);
    let (table, kind, id, bytes) = &log[0];
    assert_eq!(
        (*table, *kind, *id),
        (TRIPS, ChangeKind::Insert, row_id(no, 0))
    );
    assert_eq!(plain(segment_from_ipc(bytes).unwrap().0), b);
    assert_eq!(
        (log[1].0, log[1].1, log[1].2),
        (TRIPS, ChangeKind::Delete, row_id(no, 2))
    );

    // Replaying the log into a fresh table gives the same rows.
    let db2 = Database::new();
    let t2 = db2.create_column_table(TRIPS, schema());
    let (logged, logged_stats) = segment_from_ipc(bytes).unwrap();
    t2.load_segment(no, logged, logged_stats.expect("the log stores the stats"))
        .unwrap();
    assert_eq!(t2.segment(no).unwrap().plain_batch(), b);
    t2.load_delete(log[1].2);
    t2.load_delete(row_id(no + 5, 0)); // unknown rows are skipped
    db2.restart_clock_at(shoal_storage::recovery::RECOVERED_TS);
    assert_eq!(count_now(&db2, &t2), 4);
}

#[test]
fn text_columns_are_coded_into_one_dictionary_per_column() {
    let db = Database::new();
    let t = db.create_column_table(TRIPS, schema());
    assert_eq!(t.plain_schema(), schema());
    assert_eq!(
        t.schema().field(1).data_type(),
        &shoal_storage::text_dictionary::coded_text_type()
    );
    let mut txn = db.begin(IsolationLevel::ReadCommitted);
    let (b1, s1) = batch(0..4);
    let (b2, s2) = batch(10..13);
    let first = t.append(&mut txn, b1.clone(), s1).unwrap();
    let second = t.append(&mut txn, b2.clone(), s2).unwrap();
    db.commit(txn).unwrap();
    let (first, second) = (t.segment(first).unwrap(), t.segment(second).unwrap());
    // Both segments' scans share the dictionary's values and agree on the codes.
    let a = first.column(1);
    let b = second.column(1);
    let a = a
        .as_any()
        .downcast_ref::<arrow::array::DictionaryArray<arrow::datatypes::Int32Type>>()
        .unwrap();
    let b = b
        .as_any()
        .downcast_ref::<arrow::array::DictionaryArray<arrow::datatypes::Int32Type>>()
        .unwrap();
    assert_eq!(a.values().len(), 2);
    assert_eq!(a.keys().value(0), b.keys().value(0), "yellow");
    assert_eq!(a.keys().value(1), b.keys().value(1), "green");
    assert!(t.dictionary(1).unwrap().is_shared());
    assert!(t.dictionary(0).is_none());
    // Decoded, they are the rows that were appended, and the log image holds plain text.
    assert_eq!(first.plain_batch(), b1);
    // The image holds each text column as a dictionary of the values its rows use, and the
    // stats as plain text.
    let (image, image_stats) = segment_from_ipc(&second.image()).unwrap();
    assert_eq!(plain(image.clone()), b2);
    let image_cab = image.column(1);
    let image_cab = image_cab
        .as_any()
        .downcast_ref::<arrow::array::DictionaryArray<arrow::datatypes::Int32Type>>()
        .unwrap();
    assert_eq!(image_cab.values().len(), 2);
    let image_stats = image_stats.unwrap();
    assert_eq!(image_stats[1].min.data_type(), &ArrowType::Utf8);
    assert_eq!(
        image_stats[1].max.as_ref(),
        &StringArray::from(vec!["yellow"]) as &dyn Array
    );
    // A wrongly typed column is refused, not stored.
    let mut txn = db.begin(IsolationLevel::ReadCommitted);
    let wrong = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("id", ArrowType::Utf8, true),
            Field::new("cab", ArrowType::Utf8, true),
        ])),
        vec![
            Arc::new(StringArray::from(vec!["1"])) as ArrayRef,
            Arc::new(StringArray::from(vec!["x"])) as ArrayRef,
        ],
    )
    .unwrap();
    let stats = batch(0..1).1;
    assert!(matches!(
        t.append(&mut txn, wrong, stats),
        Err(StorageError::SchemaMismatch(_))
    ));
}

#[test]
fn ipc_round_trip_keeps_nulls() {
    let cab: ArrayRef = Arc::new(StringArray::from(vec![Some("a"), None]));
    let id: ArrayRef = Arc::new(Int64Array::from(vec![None, Some(2)]));
    let b = RecordBatch::try_new(schema(), vec![id, cab]).unwrap();
    let stats = vec![
        ColumnStats {
            min: Arc::new(Int64Array::from(vec![2])),
            max: Arc::new(Int64Array::from(vec![2])),
            null_count: 1,
        },
        ColumnStats {
            min: Arc::new(StringArray::from(vec!["a"])),
            max: Arc::new(StringArray::from(vec!["a"])),
            null_count: 1,
        },
    ];
    let (back, back_stats) = segment_from_ipc(&segment_to_ipc(&b, &stats)).unwrap();
    assert_eq!(back, b);
    assert!(back.column(0).is_null(0));
    let back_stats = back_stats.expect("stats stored with the segment");
    for (got, want) in back_stats.iter().zip(&stats) {
        assert_eq!(got.min.as_ref(), want.min.as_ref());
        assert_eq!(got.max.as_ref(), want.max.as_ref());
        assert_eq!(got.null_count, want.null_count);
    }
    assert!(segment_from_ipc(b"garbage").is_err());
}

#[test]
fn stats_that_do_not_fit_the_schema_are_left_out_of_the_image() {
    // A NOT NULL column cannot hold a null minimum; such a segment goes out without stats,
    // and loading it recomputes them.
    let (b, mut stats) = batch(0..3);
    stats[0].min = Arc::new(Int64Array::from(vec![None::<i64>]));
    let strict = Arc::new(Schema::new(vec![
        Field::new("id", ArrowType::Int64, false),
        Field::new("cab", ArrowType::Utf8, true),
    ]));
    let b = RecordBatch::try_new(strict, b.columns().to_vec()).unwrap();
    let (back, back_stats) = segment_from_ipc(&segment_to_ipc(&b, &stats)).unwrap();
    assert_eq!(back, b);
    assert!(back_stats.is_none());
}
