//! SCAN's cursors. Redis's cursor is a number that encodes a place in its hash table, so that a
//! full iteration returns every key that exists from its start to its end, whatever is added or
//! deleted meanwhile. Shoal's keys are in key order (the primary key of `redis.keys`), and a
//! place in that order is a key, which does not fit in a number. So a cursor is a number that
//! names the last key a SCAN call returned, remembered here. The next call goes on after that
//! key, and so sees every key that was there all along, once.
//!
//! Bounded: the oldest cursors are forgotten first. A forgotten cursor, or one from before a
//! restart, starts its iteration over: keys come again (Redis allows that), none is missed.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// Cursors remembered at most.
const CURSORS_MAX: usize = 16 * 1024;
/// Bytes of keys the remembered cursors hold at most.
const CURSOR_KEY_BYTES_MAX: usize = 16 << 20;

pub struct ScanCursors(Mutex<Cursors>);

struct Cursors {
    /// The next cursor's number. It starts at the server's start time in microseconds, so a
    /// cursor from before a restart is not taken for one issued after it.
    next: u64,
    /// Cursor number to the database and last key of its SCAN call.
    places: HashMap<u64, (u16, Vec<u8>)>,
    /// Cursor numbers, oldest first.
    order: VecDeque<u64>,
    key_bytes: usize,
}

impl Default for ScanCursors {
    fn default() -> Self {
        ScanCursors(Mutex::new(Cursors {
            next: (super::now_us() as u64).max(1),
            places: HashMap::new(),
            order: VecDeque::new(),
            key_bytes: 0,
        }))
    }
}

impl ScanCursors {
    /// The key of database `db` that `cursor` goes on after; None to start from the first key
    /// (cursor 0, or one not remembered).
    pub fn resume(&self, db: u16, cursor: u64) -> Option<Vec<u8>> {
        let cursors = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match cursors.places.get(&cursor) {
            Some((d, key)) if *d == db => Some(key.clone()),
            _ => None,
        }
    }

    /// A new cursor for going on after `key` of database `db`.
    pub fn after(&self, db: u16, key: Vec<u8>) -> u64 {
        let mut cursors = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let c = &mut *cursors;
        let cursor = c.next;
        c.next += 1;
        c.key_bytes += key.len();
        c.places.insert(cursor, (db, key));
        c.order.push_back(cursor);
        while c.order.len() > CURSORS_MAX || c.key_bytes > CURSOR_KEY_BYTES_MAX {
            let Some(oldest) = c.order.pop_front() else {
                break;
            };
            if let Some((_, key)) = c.places.remove(&oldest) {
                c.key_bytes -= key.len();
            }
        }
        debug_assert_ne!(cursor, 0, "0 means the iteration is over");
        cursor
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_resumes_its_database_only_and_the_oldest_are_forgotten() {
        let cursors = ScanCursors::default();
        let first = cursors.after(3, b"k1".to_vec());
        assert_eq!(cursors.resume(3, first), Some(b"k1".to_vec()));
        assert_eq!(cursors.resume(4, first), None);
        assert_eq!(cursors.resume(3, 0), None);
        for i in 0..CURSORS_MAX {
            cursors.after(3, format!("k{i}").into_bytes());
        }
        assert_eq!(cursors.resume(3, first), None, "forgotten");
        let last = cursors.after(3, b"z".to_vec());
        assert_eq!(cursors.resume(3, last), Some(b"z".to_vec()));
    }
}
