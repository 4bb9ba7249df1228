//! Building an index over a table's existing rows (CREATE INDEX, ADD PRIMARY KEY / UNIQUE,
//! recovery re-creating indexes): every version's key goes in as a bulk load, sorted once, and
//! a unique index is then checked for keys that two live rows hold.

use std::ops::Bound;

use crate::error::StorageError;
use crate::index::{key_part, Index, IndexDef, LoadBuffer, ROW_ID_BYTES};
use crate::table::RowTable;
use crate::txn::{is_txn_stamp, END_UNSET};
use crate::types::{DataType, Value};

/// Rows an index build reads between checks of the server's memory.
const ROWS_PER_MEMORY_CHECK: usize = 4096;

impl RowTable {
    /// Builds a new index from the existing rows. Fails with `UniqueViolation` if live rows
    /// collide. Recovery builds indexes so, whatever the memory limit.
    pub fn add_index(&self, def: IndexDef) -> Result<(), StorageError> {
        self.build_index(def, false)
    }

    /// `add_index` for a statement (CREATE INDEX, ADD PRIMARY KEY): fails with `OutOfMemory`
    /// if the server's memory is at its limit when it starts or reaches it while the index is
    /// built (the entries built so far are then freed).
    pub fn add_index_within_memory(&self, def: IndexDef) -> Result<(), StorageError> {
        self.build_index(def, true)
    }

    fn build_index(&self, def: IndexDef, check_memory: bool) -> Result<(), StorageError> {
        if check_memory {
            self.shared.memory.check()?;
        }
        let mut shape = self.shape.write();
        if shape.indexes.iter().any(|i| i.def.id == def.id) {
            return Err(StorageError::DuplicateIndex(def.id));
        }
        let idx = Index::new(def);
        let (mut values, mut key) = (Vec::new(), Vec::new());
        let mut pending = LoadBuffer::new();
        // Keys this row's versions already have an entry for (versions mostly share one).
        let mut row_keys: Vec<Vec<u8>> = Vec::new();
        let mut rows_read = 0usize;
        for chunk in self.heap.chunks() {
            for chain in chunk.lock().iter() {
                rows_read += 1;
                if check_memory && rows_read % ROWS_PER_MEMORY_CHECK == 0 {
                    self.shared.memory.check()?;
                }
                let st = chain.state.lock();
                row_keys.clear();
                for v in st.versions() {
                    if !idx.covers(&shape.types, chain.bytes(&v.data)) {
                        continue;
                    }
                    idx.row_key(&shape.types, chain.bytes(&v.data), &mut values, &mut key);
                    if !row_keys.contains(&key) {
                        idx.load_entry(&key, chain, &mut pending);
                        row_keys.push(key.clone());
                    }
                }
            }
        }
        idx.flush_loaded(&mut pending);
        // Sort the entries now: the statement that builds the index pays for it, rather than
        // whichever query first looks something up.
        idx.entries.fold_staged();
        idx.fold_staged_points(1);
        if idx.def.unique {
            if let Some(key) = first_duplicate_live_key(&idx, &shape.types) {
                return Err(StorageError::UniqueViolation {
                    index_name: idx.def.name.clone(),
                    key_columns: idx.def.columns.clone(),
                    key,
                });
            }
        }
        shape.indexes.push(idx);
        self.reset_gc_cursor();
        Ok(())
    }
}

/// A new unique index's first key that two live rows hold (NULL keys never conflict), decoded;
/// None if there is none. The entries are sorted by key, so entries of one key are neighbours:
/// one pass over them finds the keys with several entries (old versions mostly) without a
/// clone or an allocation per row, and only those keys' rows are read.
fn first_duplicate_live_key(idx: &Index, types: &[DataType]) -> Option<Vec<Value>> {
    let mut shared_keys: Vec<Vec<u8>> = Vec::new();
    let mut prev_key: Vec<u8> = Vec::new();
    let mut first = true;
    idx.for_each_entry(Bound::Unbounded, Bound::Unbounded, |entry, _| {
        let key = key_part(entry);
        if !first && key == prev_key.as_slice() {
            if shared_keys.last().map(Vec::as_slice) != Some(key) {
                shared_keys.push(key.to_vec());
            }
        } else {
            prev_key.clear();
            prev_key.extend_from_slice(key);
            first = false;
        }
        true
    });
    let (mut values, mut row_key) = (Vec::new(), Vec::new());
    for key in shared_keys {
        let mut upper = key.clone();
        upper.extend_from_slice(&[0xFF; ROW_ID_BYTES]);
        let mut rows = Vec::new();
        idx.for_each_entry(
            Bound::Included(&key),
            Bound::Included(&upper),
            |entry, row| {
                if key_part(entry) == key.as_slice() {
                    rows.push(row.clone());
                }
                true
            },
        );
        let mut live_holders = 0;
        for row in rows {
            let st = row.state.lock();
            let Some(head) = st.head() else {
                continue;
            };
            let live = head.end == END_UNSET || is_txn_stamp(head.end);
            let data = row.bytes(&head.data);
            if !live || !idx.covers(types, data) {
                continue;
            }
            let has_null = idx.row_key(types, data, &mut values, &mut row_key);
            if !has_null && row_key == key {
                live_holders += 1;
                if live_holders == 2 {
                    return Some(values);
                }
            }
        }
    }
    None
}
