//! Helpers shared by the storage integration tests: a small accounts table and retry loops that
//! follow the caller protocol the SQL layer uses (wait on WouldBlock, re-check on Changed).

#![allow(dead_code)]

use std::ops::Bound;
use std::sync::Arc;

use shoal_storage::*;

pub const ACCOUNTS: TableId = 1;
pub const PK: IndexId = 10;

/// accounts(id int4 primary key, balance int8, note text)
pub fn accounts(db: &Arc<Database>) -> Arc<RowTable> {
    let t = db.create_table(
        ACCOUNTS,
        vec![DataType::Int32, DataType::Int64, DataType::Text],
    );
    t.add_index(IndexDef {
        id: PK,
        name: "accounts_pkey".into(),
        columns: vec![0],
        unique: true,
        predicate: None,
    })
    .unwrap();
    t
}

pub fn row(id: i32, balance: i64, note: &str) -> Vec<Value> {
    vec![
        Value::Int32(id),
        Value::Int64(balance),
        Value::Text(note.into()),
    ]
}

pub fn load(db: &Arc<Database>, t: &RowTable, n: i32, balance: i64) {
    let mut txn = db.begin(IsolationLevel::ReadCommitted);
    for id in 0..n {
        t.insert(&mut txn, &row(id, balance, "")).unwrap();
    }
    db.commit(txn).unwrap();
}

/// Point lookup by primary key.
pub fn get(t: &RowTable, snap: &Snapshot, id: i32) -> Option<(RowRef, Vec<Value>)> {
    t.index_get(PK, snap, &[Value::Int32(id)]).unwrap()
}

pub fn balance(t: &RowTable, snap: &Snapshot, id: i32) -> Option<i64> {
    get(t, snap, id).map(|(_, r)| match r[1] {
        Value::Int64(b) => b,
        ref v => panic!("balance {v:?}"),
    })
}

/// All visible ids via a primary-key range scan, in key order.
pub fn ids(t: &RowTable, snap: &Snapshot) -> Vec<i32> {
    let mut out = Vec::new();
    t.index_scan(PK, snap, Bound::Unbounded, Bound::Unbounded, |_, bytes| {
        match shoal_storage::row_codec::decode_column(&t.types(), bytes, 0) {
            Value::Int32(id) => out.push(id),
            v => panic!("{v:?}"),
        }
        true
    })
    .unwrap();
    out
}

/// `UPDATE accounts SET balance = balance + delta WHERE id = ?` inside `txn` (READ COMMITTED
/// protocol: wait on WouldBlock, re-check on Changed). Returns Ok(false) if the row is gone.
pub fn add_balance(
    db: &Database,
    t: &RowTable,
    txn: &mut Transaction,
    id: i32,
    delta: i64,
) -> Result<bool, StorageError> {
    let mut snap = db.statement_snapshot(txn);
    let Some((r, mut cur)) = get(t, &snap, id) else {
        return Ok(false);
    };
    loop {
        let Value::Int64(b) = cur[1] else { panic!() };
        let mut new = cur.clone();
        new[1] = Value::Int64(b + delta);
        match t.update(txn, &r, &snap, &new) {
            Ok(WriteOutcome::Done) => return Ok(true),
            Ok(WriteOutcome::Changed {
                newest: Some(n),
                newest_snapshot,
            }) => {
                cur = n;
                snap = newest_snapshot;
            }
            Ok(WriteOutcome::Changed { newest: None, .. }) => return Ok(false),
            Err(StorageError::WouldBlock { holder }) => db.wait_for_blocking(txn, holder)?,
            Err(e) => return Err(e),
        }
    }
}
