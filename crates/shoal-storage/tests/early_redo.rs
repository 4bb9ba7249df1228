//! Row redo logged ahead of the commit (`early_redo`): what a redo sink sees when transactions
//! gather more row redo than the threshold. Replaying the sink's records by recovery's rule (a
//! record of a chain replaces the chain's changes from its first write on; the commit keeps the
//! first `writes` of the chain and adds its own) must give exactly the committed writes.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use common::*;
use shoal_storage::*;

/// (kind, row id, row bytes) of one logged change.
type Logged = (ChangeKind, u64, Vec<u8>);

#[derive(Debug)]
enum Rec {
    Rows {
        chain: u64,
        first_write: u64,
        changes: Vec<Logged>,
    },
    Commit {
        early: Option<EarlyRedo>,
        changes: Vec<Logged>,
    },
    Abandoned {
        chain: Option<u64>,
    },
}

/// Records every record and pin; chains are named 1000, 1001 ... by their first record.
#[derive(Default)]
struct ChainSink {
    records: Mutex<Vec<Rec>>,
    pins: Mutex<Vec<u64>>,
    /// Ranges `wait_durable` was asked about.
    waits: Mutex<Vec<(u64, u64)>>,
    /// Whether `wait_durable` reports a lost record.
    lose_records: Mutex<bool>,
}

fn logged(changes: &[RedoChange<'_>]) -> Vec<Logged> {
    changes
        .iter()
        .map(|c| (c.kind, c.row_id, c.row.to_vec()))
        .collect()
}

impl RedoSink for ChainSink {
    fn log_commit(
        &self,
        take_ts: &mut dyn FnMut(u64) -> CommitTs,
        changes: &[RedoChange<'_>],
        early: Option<EarlyRedo>,
    ) -> Result<u64, String> {
        let mut records = self.records.lock().unwrap();
        take_ts(1000 + records.len() as u64);
        records.push(Rec::Commit {
            early,
            changes: logged(changes),
        });
        Ok(1000 + records.len() as u64)
    }

    fn log_row_changes(
        &self,
        chain: Option<u64>,
        first_write: u64,
        changes: &[RedoChange<'_>],
        pin: &mut dyn FnMut(u64),
    ) -> Result<Option<(u64, u64)>, String> {
        let mut records = self.records.lock().unwrap();
        let pos = 1000 + records.len() as u64;
        pin(pos);
        self.pins.lock().unwrap().push(pos);
        let chain = chain.unwrap_or(pos);
        records.push(Rec::Rows {
            chain,
            first_write,
            changes: logged(changes),
        });
        Ok(Some((chain, pos + 1)))
    }

    fn log_abandoned(&self, chain: Option<u64>, segments: &[(TableId, u64)]) {
        assert!(segments.is_empty(), "row tables only here");
        self.records.lock().unwrap().push(Rec::Abandoned { chain });
    }

    fn wait_durable(&self, from: u64, end: u64) -> Result<(), String> {
        self.waits.lock().unwrap().push((from, end));
        match *self.lose_records.lock().unwrap() {
            true => Err("no space left on device".into()),
            false => Ok(()),
        }
    }
}

impl ChainSink {
    /// The changes of each commit, in commit order, rebuilt from its chain as recovery does.
    fn replay(&self) -> Vec<Vec<Logged>> {
        let mut chains: HashMap<u64, Vec<Logged>> = HashMap::new();
        let mut commits = Vec::new();
        for r in self.records.lock().unwrap().iter() {
            match r {
                Rec::Rows {
                    chain,
                    first_write,
                    changes,
                } => {
                    let c = chains.entry(*chain).or_default();
                    assert!(*first_write as usize <= c.len(), "a gap in chain {chain}");
                    c.truncate(*first_write as usize);
                    c.extend(changes.iter().cloned());
                }
                Rec::Commit { early, changes } => {
                    let mut all = Vec::new();
                    if let Some(e) = early {
                        let mut c = chains.remove(&e.chain).expect("the named chain");
                        assert!(c.len() as u64 >= e.writes);
                        c.truncate(e.writes as usize);
                        all = c;
                    }
                    all.extend(changes.iter().cloned());
                    commits.push(all);
                }
                Rec::Abandoned { chain } => {
                    if let Some(chain) = chain {
                        chains.remove(chain);
                    }
                }
            }
        }
        commits
    }

    fn early_records(&self) -> usize {
        self.records
            .lock()
            .unwrap()
            .iter()
            .filter(|r| matches!(r, Rec::Rows { .. }))
            .count()
    }
}

fn setup(threshold_bytes: usize) -> (Arc<Database>, Arc<RowTable>, Arc<ChainSink>) {
    let db = Database::new();
    let t = accounts(&db);
    let sink = Arc::new(ChainSink::default());
    db.set_redo_sink(sink.clone());
    db.set_early_redo_bytes(threshold_bytes);
    (db, t, sink)
}

fn inserted_ids(t: &RowTable, changes: &[Logged]) -> Vec<(ChangeKind, i32)> {
    changes
        .iter()
        .map(|(kind, _, bytes)| match t.decode_row(bytes)[0] {
            Value::Int32(id) => (*kind, id),
            ref v => panic!("{v:?}"),
        })
        .collect()
}

#[test]
fn a_large_transaction_logs_its_rows_ahead_and_the_commit_names_them() {
    // One change is ~40 bytes: every ~3 writes go out ahead of the commit.
    let (db, t, sink) = setup(100);
    let mut x = db.begin(IsolationLevel::ReadCommitted);
    for id in 1..=10 {
        t.insert(&mut x, &row(id, 0, "a note")).unwrap();
    }
    add_balance(&db, &t, &mut x, 3, 7).unwrap();
    assert!(sink.early_records() >= 2, "{:?}", sink.records);
    assert!(db.replay_start_pinned(), "the chain pins the log");
    let pinned = *sink.pins.lock().unwrap().first().unwrap();
    assert_eq!(db.replay_bounds(u64::MAX).start, pinned);
    db.commit(x).unwrap();
    assert!(!db.replay_start_pinned(), "the commit released the pin");

    let commits = sink.replay();
    assert_eq!(commits.len(), 1);
    let mut expected: Vec<(ChangeKind, i32)> =
        (1..=10).map(|id| (ChangeKind::Insert, id)).collect();
    expected.push((ChangeKind::Update, 3));
    assert_eq!(inserted_ids(&t, &commits[0]), expected);
    let records = sink.records.lock().unwrap();
    match records.last().unwrap() {
        Rec::Commit {
            early: Some(e),
            changes,
        } => assert_eq!(e.writes as usize + changes.len(), 11),
        other => panic!("the last record is not a commit naming its chain: {other:?}"),
    }
}

#[test]
fn rollback_to_savepoint_drops_writes_already_logged() {
    let (db, t, sink) = setup(100);
    let mut x = db.begin(IsolationLevel::ReadCommitted);
    for id in 1..=4 {
        t.insert(&mut x, &row(id, 0, "kept")).unwrap();
    }
    db.savepoint(&mut x, "s");
    for id in 5..=12 {
        t.insert(&mut x, &row(id, 0, "undone")).unwrap();
    }
    let before = sink.early_records();
    assert!(before >= 3, "writes after the savepoint were logged");
    db.rollback_to_savepoint(&mut x, "s").unwrap();
    for id in 20..=25 {
        t.insert(&mut x, &row(id, 0, "after")).unwrap();
    }
    assert!(sink.early_records() > before);
    db.commit(x).unwrap();

    let commits = sink.replay();
    let expected: Vec<(ChangeKind, i32)> = (1..=4)
        .chain(20..=25)
        .map(|id| (ChangeKind::Insert, id))
        .collect();
    assert_eq!(inserted_ids(&t, &commits[0]), expected);
    let mut r = db.begin(IsolationLevel::ReadCommitted);
    let s = db.statement_snapshot(&mut r);
    assert_eq!(ids(&t, &s), (1..=4).chain(20..=25).collect::<Vec<_>>());
}

#[test]
fn small_transactions_log_only_commit_records() {
    let (db, t, sink) = setup(1 << 20);
    for id in 1..=50 {
        let mut x = db.begin(IsolationLevel::ReadCommitted);
        t.insert(&mut x, &row(id, 0, "")).unwrap();
        db.commit(x).unwrap();
    }
    assert_eq!(sink.early_records(), 0);
    assert!(sink
        .records
        .lock()
        .unwrap()
        .iter()
        .all(|r| matches!(r, Rec::Commit { early: None, .. })));
}

#[test]
fn a_rolled_back_transaction_logs_its_chain_abandoned() {
    let (db, t, sink) = setup(50);
    let mut x = db.begin(IsolationLevel::ReadCommitted);
    for id in 1..=6 {
        t.insert(&mut x, &row(id, 0, "gone")).unwrap();
    }
    assert!(sink.early_records() > 0);
    db.rollback(x);
    assert!(!db.replay_start_pinned(), "the rollback released the pin");
    assert!(sink.replay().is_empty(), "no commit");
    let records = sink.records.lock().unwrap();
    let Some(Rec::Rows { chain, .. }) = records.first() else {
        panic!("the chain's first record comes first: {records:?}");
    };
    assert!(
        matches!(records.last(), Some(Rec::Abandoned { chain: Some(c) }) if c == chain),
        "the rollback names the chain it abandons: {records:?}"
    );
    drop(records);
    // A transaction that logged nothing ahead says nothing when it rolls back.
    let before = sink.records.lock().unwrap().len();
    let mut y = db.begin(IsolationLevel::ReadCommitted);
    t.insert(&mut y, &row(100, 0, "small")).unwrap();
    db.rollback(y);
    assert_eq!(sink.records.lock().unwrap().len(), before);
}

#[test]
fn the_commit_checks_its_early_records_reached_the_log() {
    let (db, t, sink) = setup(100);
    let mut x = db.begin(IsolationLevel::ReadCommitted);
    for id in 1..=10 {
        t.insert(&mut x, &row(id, 0, "a note")).unwrap();
    }
    let pins = sink.pins.lock().unwrap().clone();
    db.commit(x).unwrap();
    assert_eq!(
        *sink.waits.lock().unwrap(),
        vec![(pins[0], pins.last().unwrap() + 1)],
        "the commit waited for its records logged ahead, first to last"
    );

    // A record lost on the way (a batch dropped for a full disk): the commit fails and its
    // writes are undone, instead of a commit record naming a hole.
    *sink.lose_records.lock().unwrap() = true;
    let mut y = db.begin(IsolationLevel::ReadCommitted);
    for id in 100..=110 {
        t.insert(&mut y, &row(id, 0, "a note")).unwrap();
    }
    let commits_before = sink.replay().len();
    assert!(matches!(db.commit(y), Err(StorageError::CommitFailed(_))));
    assert_eq!(sink.replay().len(), commits_before, "no commit record");
    assert!(!db.replay_start_pinned());
    let mut r = db.begin(IsolationLevel::ReadCommitted);
    let s = db.statement_snapshot(&mut r);
    assert_eq!(ids(&t, &s), (1..=10).collect::<Vec<_>>());
}

/// A checkpoint cut while an earlier commit still stamps does not see a later one that has
/// finished; if that one logged rows ahead of its commit, replay must start at its first
/// record even though the transaction has ended.
#[test]
fn a_finished_commit_keeps_its_early_records_in_replay_until_the_watermark_passes_it() {
    let (db, t, sink) = setup(100);
    let mut big = db.begin(IsolationLevel::ReadCommitted);
    for id in 1..=10 {
        t.insert(&mut big, &row(id, 0, "a note")).unwrap();
    }
    let first_early = sink.pins.lock().unwrap()[0];
    let mut small = db.begin(IsolationLevel::ReadCommitted);
    t.insert(&mut small, &row(50, 0, "")).unwrap();
    // `small` takes the earlier timestamp and logs its record, but has not finished stamping.
    let small = db.prepare_commit(small).unwrap();
    let small_record = sink.records.lock().unwrap().len() as u64 - 1 + 1000;
    db.commit(big).unwrap();
    let bounds = db.replay_bounds(u64::MAX);
    assert_eq!(
        bounds.covered, small_record,
        "covered up to the stamping commit"
    );
    assert_eq!(
        bounds.start, first_early,
        "replay from the big commit's first record"
    );
    small.finish();
    let bounds = db.replay_bounds(u64::MAX);
    assert_eq!((bounds.covered, bounds.start), (u64::MAX, u64::MAX));
}
