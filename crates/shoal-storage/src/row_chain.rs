//! A logical row of a row table: its versions newest first ([`ChainState`]), behind a small
//! per-row mutex, reached by a stable handle ([`RowRef`]) from the table's heap and indexes. A
//! version carries begin/end stamps (commit timestamps, or the writer's transaction id while it
//! runs) and the row's `row_codec` bytes. `table` decides who may write a row; this module keeps
//! the chain itself: visibility, stamping at commit, undo at rollback, pruning by GC.

use std::ops::Deref;
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

pub use crate::row_ref::RowRef;
use crate::table::RowLockMode;
use crate::txn::{is_txn_stamp, txn_stamp, ChangeKind, CommitTs, Snapshot, TxnId, END_UNSET};

#[derive(Debug)]
pub(crate) struct Version {
    pub begin: u64,
    pub end: u64,
    pub data: VersionData,
}

/// Where a version's bytes are. The row's first version keeps them in the row's own
/// allocation (see `row_ref`); later ones (updates, rewrites) in an allocation of their own.
/// `Inline` means the inline bytes of the chain the version belongs to, so a `VersionData`
/// (or a clone of it) is only read through that chain's [`RowRef::bytes`].
#[derive(Clone, Debug)]
pub(crate) enum VersionData {
    Inline,
    Shared(Arc<[u8]>),
}

/// A version's bytes, read from a row outside its mutex: borrowed from the row's handle when
/// they are the inline ones (which never change), else a shared reference.
pub enum RowBytes<'a> {
    Inline(&'a [u8]),
    Shared(Arc<[u8]>),
}

impl Deref for RowBytes<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            RowBytes::Inline(bytes) => bytes,
            RowBytes::Shared(bytes) => bytes,
        }
    }
}

impl Version {
    /// Invisible to every snapshot at or after `horizon`: ended by a commit at or before it.
    pub(crate) fn is_dead(&self, horizon: CommitTs) -> bool {
        self.end != END_UNSET && !is_txn_stamp(self.end) && self.end <= horizon
    }
}

/// The versions of one logical row.
pub struct RowChain {
    row_id: u64,
    pub(crate) state: Mutex<ChainState>,
}

pub(crate) struct ChainState {
    /// Newest version, or none (begin stamp `GONE`) once the row is gone for good (insert
    /// rolled back, or deleted and reclaimed): see [`ChainState::head`]. Not an `Option`:
    /// `VersionData` has no spare bit pattern left for `None`, and the 8 bytes a tag would
    /// take grow every row's block by 16.
    head: Version,
    /// Older versions, oldest first (so replacing the head is a push), and the row lock.
    pub older: OlderVersions,
}

/// Begin stamp of "no head": no version begins at 0 (commit timestamps start at 1).
const GONE: u64 = 0;

/// A row's older versions, oldest first, and the transaction holding its row lock (SELECT FOR
/// UPDATE/SHARE). Most rows have neither most of the time, so both sit behind one pointer: 8
/// bytes in every row chain instead of a `Vec`'s 24 and a lock holder's 8, until needed. (The
/// 8 bytes of the lock holder took a row chain's allocation from 96 to 80 bytes in glibc.)
#[derive(Default)]
pub(crate) struct OlderVersions(Option<Box<Rare>>);

/// Set in `Rare::locker` while the lock is FOR NO KEY UPDATE, which lets FOR KEY SHARE in.
/// Transaction ids never use the top bit (in a version's stamp it marks a transaction id), so
/// the flag costs `Rare` no byte: 56 bytes, one 64-byte malloc chunk.
const LOCKER_NO_KEY_BIT: u64 = 1 << 63;

#[derive(Default)]
struct Rare {
    versions: Vec<Version>,
    /// Transaction holding the row's exclusive lock (FOR UPDATE, or FOR NO KEY UPDATE with
    /// `LOCKER_NO_KEY_BIT` set), or 0.
    locker: u64,
    /// Transactions holding a share lock, and whether it is FOR KEY SHARE (a foreign key
    /// check's lock on the row it references) rather than FOR SHARE. Share lockers let each
    /// other in and keep FOR UPDATE and deletes out; FOR SHARE also keeps out every update,
    /// FOR KEY SHARE only updates that change a unique key (as in PostgreSQL).
    sharers: Vec<(TxnId, bool)>,
}

impl OlderVersions {
    pub(crate) fn push(&mut self, v: Version) {
        self.0.get_or_insert_with(Default::default).versions.push(v);
    }

    /// The newest of the older versions: the one the head replaced.
    pub(crate) fn newest(&self) -> Option<&Version> {
        self.0.as_ref()?.versions.last()
    }

    pub(crate) fn pop(&mut self) -> Option<Version> {
        let v = self.0.as_mut()?.versions.pop();
        self.free_if_unused();
        v
    }

    /// The transaction holding the row lock, or 0.
    pub(crate) fn locker(&self) -> TxnId {
        self.0.as_ref().map_or(0, |r| r.locker & !LOCKER_NO_KEY_BIT)
    }

    pub(crate) fn set_locker(&mut self, txn: TxnId) {
        if txn == 0 && self.0.is_none() {
            return;
        }
        debug_assert_eq!(
            txn & LOCKER_NO_KEY_BIT,
            0,
            "a transaction id uses the top bit"
        );
        self.0.get_or_insert_with(Default::default).locker = txn;
        self.free_if_unused();
    }

    /// Makes the locker's lock FOR NO KEY UPDATE (`no_key`) or FOR UPDATE.
    pub(crate) fn set_locker_no_key(&mut self, no_key: bool) {
        if let Some(rare) = self.0.as_deref_mut() {
            let holder = rare.locker & !LOCKER_NO_KEY_BIT;
            debug_assert!(holder != 0, "no locker");
            rare.locker = if no_key {
                holder | LOCKER_NO_KEY_BIT
            } else {
                holder
            };
        }
    }

    /// A transaction other than `txn` whose lock keeps a lock of `mode` out (FOR UPDATE's
    /// also a delete): the first of `lock_blockers`.
    pub(crate) fn lock_blocker(&self, txn: TxnId, mode: RowLockMode) -> Option<TxnId> {
        self.lock_blockers(txn, mode).next()
    }

    /// Every transaction other than `txn` whose lock keeps a lock of `mode` out, the exclusive
    /// locker first, by PostgreSQL's conflict table: FOR KEY SHARE waits only for FOR UPDATE,
    /// FOR SHARE for either exclusive lock, FOR NO KEY UPDATE for those and FOR SHARE, FOR
    /// UPDATE for every lock.
    pub(crate) fn lock_blockers(
        &self,
        txn: TxnId,
        mode: RowLockMode,
    ) -> impl Iterator<Item = TxnId> + '_ {
        let rare = self.0.as_deref();
        let locker_field = rare.map_or(0, |r| r.locker);
        let locker = locker_field & !LOCKER_NO_KEY_BIT;
        // FOR KEY SHARE passes a FOR NO KEY UPDATE locker; every other mode waits for it.
        let locker_blocks = mode != RowLockMode::KeyShare || locker_field & LOCKER_NO_KEY_BIT == 0;
        let (sharers_block, key_sharers_block) = match mode {
            RowLockMode::Exclusive => (true, true),
            RowLockMode::NoKeyUpdate => (true, false),
            RowLockMode::Share | RowLockMode::KeyShare => (false, false),
        };
        let sharers = rare.map_or(&[][..], |r| r.sharers.as_slice());
        (locker_blocks && locker != 0 && locker != txn)
            .then_some(locker)
            .into_iter()
            .chain(
                sharers
                    .iter()
                    .filter(move |&&(s, key_only)| {
                        sharers_block && s != txn && (key_sharers_block || !key_only)
                    })
                    .map(|&(s, _)| s),
            )
    }

    /// Adds a share lock of `txn` (FOR KEY SHARE when `key_only`); false if it had that one.
    pub(crate) fn add_sharer(&mut self, txn: TxnId, key_only: bool) -> bool {
        debug_assert_ne!(txn, 0);
        let rare = self.0.get_or_insert_with(Default::default);
        if rare.sharers.contains(&(txn, key_only)) {
            return false;
        }
        rare.sharers.push((txn, key_only));
        true
    }

    /// A transaction other than `txn` holding the exclusive lock or a share lock, FOR KEY
    /// SHARE ones only `with_key_share`.
    pub(crate) fn other_lock_holder(&self, txn: TxnId, with_key_share: bool) -> Option<TxnId> {
        let mode = if with_key_share {
            RowLockMode::Exclusive
        } else {
            RowLockMode::NoKeyUpdate
        };
        self.lock_blocker(txn, mode)
    }

    /// Releases the lock of mode `mode` that `txn` holds on the row (it may hold others).
    pub(crate) fn release_lock(&mut self, txn: TxnId, mode: RowLockMode) {
        let Some(rare) = self.0.as_deref_mut() else {
            return;
        };
        match mode {
            RowLockMode::Exclusive | RowLockMode::NoKeyUpdate
                if rare.locker & !LOCKER_NO_KEY_BIT == txn =>
            {
                rare.locker = 0;
            }
            RowLockMode::Exclusive | RowLockMode::NoKeyUpdate => {}
            RowLockMode::Share | RowLockMode::KeyShare => {
                let key_only = mode == RowLockMode::KeyShare;
                rare.sharers.retain(|&s| s != (txn, key_only));
            }
        }
        self.free_if_unused();
    }

    fn free_if_unused(&mut self) {
        if self
            .0
            .as_ref()
            .is_some_and(|r| r.versions.is_empty() && r.locker == 0 && r.sharers.is_empty())
        {
            self.0 = None;
        }
    }

    pub(crate) fn as_slice(&self) -> &[Version] {
        self.0.as_deref().map_or(&[], |r| r.versions.as_slice())
    }

    pub(crate) fn iter(&self) -> std::slice::Iter<'_, Version> {
        self.as_slice().iter()
    }

    pub(crate) fn iter_mut(&mut self) -> std::slice::IterMut<'_, Version> {
        match self.0.as_deref_mut() {
            Some(r) => r.versions.iter_mut(),
            None => [].iter_mut(),
        }
    }

    pub(crate) fn last(&self) -> Option<&Version> {
        self.as_slice().last()
    }

    pub(crate) fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// No older version and no row lock.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// Keeps the versions `keep` accepts; frees the list once it is empty and unlocked.
    /// Drops the oldest versions while `dead` holds, and returns how many. Ends only decrease
    /// going older, so the versions dead at a horizon are the oldest ones: found by a binary
    /// search. A hot row rewritten thousands of times between two GC steps keeps that many
    /// versions, and a walk over all of them at every update made each update cost more.
    fn drop_oldest(&mut self, dead: impl Fn(&Version) -> bool) -> usize {
        let Some(r) = &mut self.0 else {
            return 0;
        };
        let n = r.versions.partition_point(&dead);
        debug_assert!(r.versions[n..].first().is_none_or(|v| !dead(v)));
        if n > 0 {
            r.versions.drain(..n);
            self.free_if_unused();
        }
        n
    }

    /// Drops every older version (the row lock stays).
    fn clear_versions(&mut self) {
        if let Some(r) = &mut self.0 {
            r.versions = Vec::new();
            self.free_if_unused();
        }
    }

    /// Bytes the list holds beyond its pointer.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.0.as_ref().map_or(0, |r| {
            let versions = match r.versions.capacity() {
                0 => 0, // A lock alone: the Vec never allocated.
                n => crate::row_ref::malloc_chunk_bytes(n * std::mem::size_of::<Version>()),
            };
            let sharers = match r.sharers.capacity() {
                0 => 0,
                n => crate::row_ref::malloc_chunk_bytes(n * std::mem::size_of::<(TxnId, bool)>()),
            };
            crate::row_ref::malloc_chunk_bytes(std::mem::size_of::<Rare>()) + versions + sharers
        })
    }
}

impl ChainState {
    /// The newest version, unless the row is gone for good.
    pub(crate) fn head(&self) -> Option<&Version> {
        (self.head.begin != GONE).then_some(&self.head)
    }

    pub(crate) fn head_mut(&mut self) -> Option<&mut Version> {
        (self.head.begin != GONE).then_some(&mut self.head)
    }

    fn take_head(&mut self) -> Option<Version> {
        let gone = Version {
            begin: GONE,
            end: END_UNSET,
            data: VersionData::Inline,
        };
        let head = std::mem::replace(&mut self.head, gone);
        (head.begin != GONE).then_some(head)
    }

    /// The row is gone for good: no head (the older versions stay for GC).
    pub(crate) fn clear_head(&mut self) {
        self.take_head();
    }

    /// Versions newest first.
    pub(crate) fn versions(&self) -> impl Iterator<Item = &Version> {
        self.head().into_iter().chain(self.older.iter().rev())
    }

    /// Versions newest first, to restamp or rewrite.
    pub(crate) fn versions_mut(&mut self) -> impl Iterator<Item = &mut Version> {
        let head = (self.head.begin != GONE).then_some(&mut self.head);
        head.into_iter().chain(self.older.iter_mut().rev())
    }

    pub(crate) fn visible(&self, snap: &Snapshot) -> Option<&Version> {
        self.versions().find(|v| snap.sees(v.begin, v.end))
    }

    pub(crate) fn push(&mut self, v: Version) {
        // A begin of 0 would read as "no head" and lose the version replaced here.
        assert_ne!(v.begin, GONE, "a version begins at a stamp");
        let old = std::mem::replace(&mut self.head, v);
        if old.begin != GONE {
            self.older.push(old);
        }
    }

    pub(crate) fn pop(&mut self) -> Option<Version> {
        let head = self.take_head();
        if let Some(older) = self.older.pop() {
            self.head = older;
        }
        head
    }

    /// One committed, live version and nothing else: nothing here for GC to do until a write
    /// comes (see `RowTable::note_write`).
    pub(crate) fn is_settled(&self) -> bool {
        self.older.is_empty()
            && self
                .head()
                .is_some_and(|h| !is_txn_stamp(h.begin) && h.end == END_UNSET)
    }

    /// Drops versions no snapshot at or after `horizon` can see; returns how many.
    pub(crate) fn prune(&mut self, horizon: CommitTs) -> usize {
        if self.head().is_some_and(|h| h.is_dead(horizon)) {
            // Ends only decrease going older, so everything below a dead head is dead too.
            debug_assert!(self.older.iter().all(|v| v.is_dead(horizon)));
            let freed = 1 + self.older.len();
            self.clear_head();
            self.older.clear_versions();
            return freed;
        }
        self.older.drop_oldest(|v| v.is_dead(horizon))
    }
}

impl RowChain {
    /// A chain whose only version begins at `begin` and has the inline bytes of the block the
    /// chain goes into (`RowRef::new`).
    pub(crate) fn new(row_id: u64, begin: u64) -> RowChain {
        RowChain {
            row_id,
            state: Mutex::new(ChainState {
                head: Version {
                    begin,
                    end: END_UNSET,
                    data: VersionData::Inline,
                },
                older: OlderVersions::default(),
            }),
        }
    }

    /// The table's hidden id of this row: unique within the table, never reused.
    pub fn row_id(&self) -> u64 {
        self.row_id
    }

    pub(crate) fn lock_state(&self) -> MutexGuard<'_, ChainState> {
        self.state.lock()
    }

    /// Replaces `txn`'s stamps with its commit timestamp. Its versions are the newest ones.
    pub(crate) fn stamp(&self, txn: TxnId, ts: CommitTs) {
        let me = txn_stamp(txn);
        let mut st = self.state.lock();
        for v in st.versions_mut() {
            let mut touched = false;
            if v.begin == me {
                v.begin = ts;
                touched = true;
            }
            if v.end == me {
                v.end = ts;
                touched = true;
            }
            debug_assert!(
                is_txn_stamp(v.end) || v.end == END_UNSET || v.begin <= v.end,
                "version ends before it begins"
            );
            if !touched {
                break;
            }
        }
    }

    /// Undoes the newest write of `txn` to this row (rollback walks writes newest first).
    pub(crate) fn undo(&self, kind: ChangeKind, txn: TxnId) {
        let me = txn_stamp(txn);
        let mut st = self.state.lock();
        if matches!(kind, ChangeKind::Insert | ChangeKind::Update) {
            let undone = st.pop();
            debug_assert!(
                undone.is_some_and(|v| v.begin == me),
                "undo of a version not ours"
            );
        }
        if matches!(kind, ChangeKind::Update | ChangeKind::Delete) {
            let head = st
                .head_mut()
                .expect("undo: the replaced version is still there");
            debug_assert_eq!(head.end, me, "undo of an end stamp not ours");
            head.end = END_UNSET;
        }
    }

    pub(crate) fn unlock(&self, txn: TxnId, mode: RowLockMode) {
        self.state.lock().older.release_lock(txn, mode);
    }
}

impl RowRef {
    /// The bytes of `data`, a version of this row.
    pub(crate) fn bytes<'a>(&'a self, data: &'a VersionData) -> &'a [u8] {
        match data {
            VersionData::Inline => self.inline_bytes(),
            VersionData::Shared(bytes) => bytes,
        }
    }

    /// The bytes of `data`, a version of this row, to keep after the row's mutex is released.
    pub(crate) fn keep_bytes(&self, data: &VersionData) -> RowBytes<'_> {
        match data {
            VersionData::Inline => RowBytes::Inline(self.inline_bytes()),
            VersionData::Shared(bytes) => RowBytes::Shared(bytes.clone()),
        }
    }

    /// The bytes of the version `snap` sees, if any.
    pub fn visible_data(&self, snap: &Snapshot) -> Option<RowBytes<'_>> {
        let st = self.state.lock();
        st.visible(snap).map(|v| self.keep_bytes(&v.data))
    }

    /// Where the version `snap` sees began: its commit timestamp (or the writing transaction's
    /// stamp, for its own uncommitted version). Every write of a row makes a new version, so
    /// this tells whether a row was written since it was last looked at (Redis's WATCH).
    pub fn visible_version_begin(&self, snap: &Snapshot) -> Option<u64> {
        let st = self.state.lock();
        st.visible(snap).map(|v| v.begin)
    }

    /// Bytes of memory the row holds: its block, older versions and their bytes.
    pub(crate) fn memory_bytes(&self) -> usize {
        let st = self.state.lock();
        let mut bytes = self.allocation_bytes() + st.older.heap_bytes();
        for v in st.versions() {
            if let VersionData::Shared(data) = &v.data {
                // An `Arc<[u8]>`: two counts and the bytes.
                bytes += crate::row_ref::malloc_chunk_bytes(16 + data.len());
            }
        }
        bytes
    }
}

impl std::fmt::Debug for RowChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RowChain({})", self.row_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row pays for its chain: keep it to 56 bytes (64 with the handle's count and the
    /// inline length in front, see `row_ref`), with the older versions and the row lock behind
    /// one pointer and no tag for a missing head.
    #[test]
    fn a_row_chain_stays_small() {
        assert!(
            std::mem::size_of::<RowChain>() <= 56,
            "{}",
            std::mem::size_of::<RowChain>()
        );
        assert_eq!(std::mem::size_of::<OlderVersions>(), 8);
        // Older versions or a row lock: one 64-byte glibc chunk.
        assert_eq!(std::mem::size_of::<Rare>(), 56);
        assert_eq!(std::mem::size_of::<Version>(), 32);
        // A pgbench_accounts row (19 bytes) takes one 96-byte glibc chunk.
        let row = RowRef::new(RowChain::new(1, 1), &[0; 19]);
        assert_eq!(row.allocation_bytes(), 96);
    }

    /// A hot row: 99 committed rewrites, then one by a transaction still running. Pruning at a
    /// horizon drops exactly the versions that ended at or before it, oldest first, and never
    /// the running transaction's.
    #[test]
    fn prune_drops_the_versions_that_ended_by_the_horizon() {
        let row = RowRef::new(RowChain::new(1, 1), b"v1");
        let mut st = row.lock_state();
        let rewrite = |st: &mut ChainState, begin: u64| {
            st.head_mut().expect("a head").end = begin;
            st.push(Version {
                begin,
                end: END_UNSET,
                data: VersionData::Shared(Arc::from(&b"v"[..])),
            });
        };
        for ts in 2..=100 {
            rewrite(&mut st, ts);
        }
        rewrite(&mut st, txn_stamp(7));
        assert_eq!(st.versions().count(), 101);
        assert_eq!(st.prune(1), 0, "the first version ended at 2");
        assert_eq!(st.prune(50), 49, "versions 1 to 49 ended by 50");
        assert_eq!(st.prune(50), 0);
        assert_eq!(
            st.prune(1000),
            50,
            "all but the last committed and the running one"
        );
        let begins: Vec<u64> = st.versions().map(|v| v.begin).collect();
        assert!(begins.contains(&100) && begins.contains(&txn_stamp(7)));
        assert_eq!(begins.len(), 2);
    }

    #[test]
    fn a_gone_head_is_no_head() {
        let row = RowRef::new(RowChain::new(1, 5), b"first");
        let mut st = row.lock_state();
        st.push(Version {
            begin: 6,
            end: END_UNSET,
            data: VersionData::Shared(std::sync::Arc::from(&b"second"[..])),
        });
        assert_eq!(st.versions().count(), 2);
        let second = st.pop().expect("the update's version");
        assert_eq!(row.bytes(&second.data), b"second");
        assert_eq!(row.bytes(&st.head().expect("first again").data), b"first");
        assert!(st.pop().is_some());
        assert!(st.head().is_none() && st.pop().is_none());
        assert_eq!(st.versions().count(), 0);
    }

    #[test]
    fn share_locks_let_each_other_in_and_are_released_one_mode_at_a_time() {
        let mut older = OlderVersions::default();
        assert!(older.add_sharer(3, true));
        assert!(
            !older.add_sharer(3, true),
            "a second FOR KEY SHARE of one transaction"
        );
        assert!(older.add_sharer(3, false), "FOR SHARE on top of it");
        assert!(older.add_sharer(4, true));
        assert_eq!(older.other_lock_holder(4, false), Some(3));
        older.release_lock(3, RowLockMode::Share);
        assert_eq!(
            older.other_lock_holder(4, false),
            None,
            "FOR SHARE released"
        );
        assert_eq!(
            older.other_lock_holder(4, true),
            Some(3),
            "FOR KEY SHARE kept"
        );
        older.release_lock(3, RowLockMode::KeyShare);
        assert_eq!(
            older.other_lock_holder(4, true),
            None,
            "only its own lock is left"
        );
        older.set_locker(4);
        assert_eq!(
            older.other_lock_holder(4, true),
            None,
            "a sharer that also locks"
        );
        assert_eq!(older.other_lock_holder(6, false), Some(4));
        older.release_lock(4, RowLockMode::Exclusive);
        assert_eq!(
            older.other_lock_holder(6, true),
            Some(4),
            "its share lock stays"
        );
        older.release_lock(4, RowLockMode::KeyShare);
        assert!(older.0.is_none(), "freed once no lock is left");
    }

    #[test]
    fn every_conflicting_holder_is_listed_locker_first() {
        use RowLockMode::*;
        let mut older = OlderVersions::default();
        older.add_sharer(3, true);
        older.add_sharer(4, false);
        older.add_sharer(5, true);
        let blockers =
            |older: &OlderVersions, txn, mode| older.lock_blockers(txn, mode).collect::<Vec<_>>();
        assert_eq!(blockers(&older, 9, Exclusive), [3, 4, 5]);
        assert_eq!(blockers(&older, 3, Exclusive), [4, 5], "not itself");
        assert_eq!(
            blockers(&older, 9, NoKeyUpdate),
            [4],
            "FOR KEY SHARE lets it in"
        );
        assert!(blockers(&older, 9, Share).is_empty());
        older.release_lock(4, Share);
        older.set_locker(6);
        older.set_locker_no_key(true);
        assert_eq!(blockers(&older, 9, Exclusive), [6, 3, 5]);
        assert_eq!(blockers(&older, 9, NoKeyUpdate), [6]);
        assert_eq!(blockers(&older, 9, Share), [6]);
        assert!(
            blockers(&older, 9, KeyShare).is_empty(),
            "FOR NO KEY UPDATE lets it in"
        );
        older.set_locker_no_key(false);
        assert_eq!(blockers(&older, 9, KeyShare), [6]);
    }

    #[test]
    fn the_row_lock_and_older_versions_share_one_box() {
        let mut older = OlderVersions::default();
        older.set_locker(0);
        assert!(
            older.0.is_none(),
            "unlocking a row without a box allocates nothing"
        );
        older.set_locker(7);
        assert_eq!(older.locker(), 7);
        older.set_locker(0);
        assert!(
            older.0.is_none(),
            "freed once unlocked and without versions"
        );
        let v = Version {
            begin: 1,
            end: END_UNSET,
            data: VersionData::Shared(std::sync::Arc::from(&b"x"[..])),
        };
        older.push(v);
        older.set_locker(9);
        assert!(older.pop().is_some());
        assert_eq!(older.locker(), 9, "the lock outlives the versions");
        older.set_locker(0);
        assert!(older.0.is_none());
    }
}
