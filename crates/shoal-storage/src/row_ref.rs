//! The one allocation behind a row handle ([`RowRef`]): a reference count, the row's chain of
//! versions, and the bytes of the row's first version right after them.
//!
//! Why not `Arc<RowChain>` with an `Arc<[u8]>` per version: every row of a table pays for two
//! allocations then (a 72-byte chain and a 16-byte `Arc` header in front of ~20 row bytes: 80 +
//! 48 bytes of glibc chunks for a pgbench account), while most rows are inserted once and
//! rarely or never updated. Here the first version's bytes live in the chain's own block (96
//! bytes for the same row); only later versions get an allocation of their own
//! ([`VersionData::Shared`](crate::row_chain::VersionData)). The inline bytes are written once,
//! when the block is made, and never again, so a reader holding a `RowRef` may read them
//! without the chain's mutex.
//!
//! A block comes from malloc, or, for rows loaded in bulk, from a slab (`row_slab.rs`); a bit
//! of the inline length says which, so the last handle gives it back to the right one.
//!
//! This and `row_slab.rs` are the unsafe code of the row store; it is a thin `Arc` with a
//! trailing slice and no weak count. The handle is one pointer wide, as `Arc<RowChain>` was, so
//! heaps and indexes stay as small.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, Ordering};

use crate::row_chain::RowChain;
use crate::row_slab::{self, SlabCursor};

/// Past this many handles to one row something leaks them; abort before the count wraps
/// (as `Arc` does).
const MAX_REFS: u32 = u32::MAX / 2;

/// Set in `RowBlock::inline_len` when the block was cut from a slab.
const IN_SLAB: u32 = 1 << 31;

#[repr(C)]
struct RowBlock {
    refs: AtomicU32,
    /// Length of the bytes that follow the block, with `IN_SLAB` set for a slab's block.
    inline_len: u32,
    chain: RowChain,
}

impl RowBlock {
    fn inline_len(&self) -> usize {
        (self.inline_len & !IN_SLAB) as usize
    }

    fn in_slab(&self) -> bool {
        self.inline_len & IN_SLAB != 0
    }
}

/// Stable handle of a logical row: cheap to clone (one atomic increment), the row lives while
/// a handle does.
pub struct RowRef {
    block: NonNull<RowBlock>,
}

// SAFETY: what a `RowRef` shares between threads is the block: the count is atomic, the chain
// is `Sync` (its mutable state sits behind a mutex) and the inline bytes are immutable after
// `RowRef::new`. Dropping the last handle from any thread is fine: `RowChain` is `Send`.
unsafe impl Send for RowRef {}
// SAFETY: as above; `&RowRef` only gives `&RowChain` and `&[u8]`.
unsafe impl Sync for RowRef {}

const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<RowChain>();
};

/// Layout of a block with `inline_len` trailing bytes; the bytes start at
/// `size_of::<RowBlock>()`.
fn block_layout(inline_len: usize) -> Layout {
    let bytes = Layout::array::<u8>(inline_len).expect("row size fits a layout");
    let (layout, offset) = Layout::new::<RowBlock>()
        .extend(bytes)
        .expect("row size fits a layout");
    debug_assert_eq!(offset, std::mem::size_of::<RowBlock>());
    layout.pad_to_align()
}

impl RowRef {
    /// A new row: `chain` and, after it in the same allocation, `inline` (the bytes of the
    /// chain's first version).
    pub(crate) fn new(chain: RowChain, inline: &[u8]) -> RowRef {
        RowRef::make(chain, inline, None)
    }

    /// `new`, with the block cut from `slab` rather than malloc'd (rows loaded in bulk).
    pub(crate) fn new_in(chain: RowChain, inline: &[u8], slab: &mut SlabCursor) -> RowRef {
        RowRef::make(chain, inline, Some(slab))
    }

    fn make(chain: RowChain, inline: &[u8], slab: Option<&mut SlabCursor>) -> RowRef {
        let inline_len = u32::try_from(inline.len())
            .ok()
            .filter(|len| len & IN_SLAB == 0)
            .expect("row bytes over 2 GiB");
        let layout = block_layout(inline.len());
        let (raw, flag) = match slab.and_then(|s| s.alloc(layout)) {
            Some(block) => (block.as_ptr().cast::<RowBlock>(), IN_SLAB),
            None => {
                // SAFETY: the layout is not zero-sized (it holds a `RowBlock`).
                let raw = unsafe { alloc(layout) }.cast::<RowBlock>();
                if raw.is_null() {
                    handle_alloc_error(layout)
                }
                (raw, 0)
            }
        };
        // SAFETY: `raw` is fresh memory of `layout` (from malloc or a slab): aligned for
        // `RowBlock`, with room for one and `inline_len` bytes right after it; nothing else
        // sees it yet.
        unsafe {
            raw.write(RowBlock {
                refs: AtomicU32::new(1),
                inline_len: inline_len | flag,
                chain,
            });
            std::ptr::copy_nonoverlapping(
                inline.as_ptr(),
                raw.cast::<u8>().add(std::mem::size_of::<RowBlock>()),
                inline.len(),
            );
            RowRef {
                block: NonNull::new_unchecked(raw),
            }
        }
    }

    fn header(&self) -> &RowBlock {
        // SAFETY: the block lives while this handle does (the count includes it).
        unsafe { self.block.as_ref() }
    }

    /// The bytes of the row's first version (see the module comment).
    pub(crate) fn inline_bytes(&self) -> &[u8] {
        let len = self.header().inline_len();
        // SAFETY: `new` wrote `len` bytes right after the block and nobody writes them again;
        // the block lives while `self` does, which bounds the returned borrow.
        unsafe {
            std::slice::from_raw_parts(
                self.block
                    .as_ptr()
                    .cast::<u8>()
                    .add(std::mem::size_of::<RowBlock>()),
                len,
            )
        }
    }

    /// Whether both handles name the same row.
    pub fn ptr_eq(a: &RowRef, b: &RowRef) -> bool {
        a.block == b.block
    }

    /// The row's address, as an identity (sorting or deduplicating handles).
    pub fn as_ptr(&self) -> *const RowChain {
        &self.header().chain
    }

    /// Bytes of memory the block takes: its size in a slab, or with glibc's 8-byte chunk
    /// header rounded to its 16-byte granule.
    pub(crate) fn allocation_bytes(&self) -> usize {
        let size = block_layout(self.header().inline_len()).size();
        if self.header().in_slab() {
            size
        } else {
            malloc_chunk_bytes(size)
        }
    }
}

/// What glibc's malloc takes for a request of `bytes`: an 8-byte header, rounded up to 16,
/// at least 32.
pub(crate) fn malloc_chunk_bytes(bytes: usize) -> usize {
    (bytes + 8).next_multiple_of(16).max(32)
}

impl Clone for RowRef {
    fn clone(&self) -> RowRef {
        // Relaxed as in `Arc::clone`: a new handle is made from an existing one, which already
        // keeps the block alive and visible to this thread.
        let before = self.header().refs.fetch_add(1, Ordering::Relaxed);
        if before > MAX_REFS {
            std::process::abort();
        }
        RowRef { block: self.block }
    }
}

impl Drop for RowRef {
    fn drop(&mut self) {
        if self.header().refs.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        // Every other handle's use of the block happens before their decrements (Release);
        // this Acquire makes them happen before the free, as in `Arc::drop`.
        fence(Ordering::Acquire);
        let layout = block_layout(self.header().inline_len());
        let in_slab = self.header().in_slab();
        // SAFETY: this was the last handle, so nothing else reads the block; the chain is
        // dropped once, then the block goes back where it came from (with the layout it was
        // allocated with, for malloc).
        unsafe {
            std::ptr::drop_in_place(&mut (*self.block.as_ptr()).chain);
            if in_slab {
                row_slab::release(self.block.cast::<u8>());
            } else {
                dealloc(self.block.as_ptr().cast::<u8>(), layout);
            }
        }
    }
}

impl Deref for RowRef {
    type Target = RowChain;

    fn deref(&self) -> &RowChain {
        &self.header().chain
    }
}

impl std::fmt::Debug for RowRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::row_chain::VersionData;

    #[test]
    fn a_handle_is_one_pointer_and_keeps_its_bytes() {
        assert_eq!(std::mem::size_of::<RowRef>(), 8);
        assert_eq!(std::mem::size_of::<Option<RowRef>>(), 8);
        let row = RowRef::new(RowChain::new(7, 1), b"abc");
        let other = row.clone();
        drop(row);
        assert_eq!(other.inline_bytes(), b"abc");
        assert_eq!(other.row_id(), 7);
        let empty = RowRef::new(RowChain::new(8, 1), b"");
        assert!(empty.inline_bytes().is_empty());
        assert!(!RowRef::ptr_eq(&other, &empty));
        assert!(RowRef::ptr_eq(&other, &other.clone()));
    }

    #[test]
    fn a_row_cut_from_a_slab_reads_and_drops_like_a_malloced_one() {
        let _serial = crate::row_slab::tests::SERIAL.lock().unwrap();
        let later: Arc<[u8]> = Arc::from(&b"later"[..]);
        let mut slab = SlabCursor::new();
        let rows: Vec<RowRef> = (0..1000u64)
            .map(|id| RowRef::new_in(RowChain::new(id, 1), &id.to_be_bytes(), &mut slab))
            .collect();
        drop(slab);
        rows[3].lock_state().push(crate::row_chain::Version {
            begin: 2,
            end: crate::txn::END_UNSET,
            data: VersionData::Shared(later.clone()),
        });
        for (id, row) in rows.iter().enumerate() {
            assert_eq!(row.row_id(), id as u64);
            assert_eq!(row.inline_bytes(), (id as u64).to_be_bytes());
            assert_eq!(row.allocation_bytes(), block_layout(8).size());
        }
        let kept = rows[3].clone();
        drop(rows);
        assert_eq!(kept.inline_bytes(), 3u64.to_be_bytes());
        assert_eq!(Arc::strong_count(&later), 2);
        drop(kept);
        assert_eq!(Arc::strong_count(&later), 1, "the chain was dropped");
    }

    /// The chain's own drop runs once, with the last handle: a later version's bytes (an
    /// `Arc` the chain holds) are freed then and not before.
    #[test]
    fn the_last_handle_drops_the_chain_once() {
        let later: Arc<[u8]> = Arc::from(&b"later"[..]);
        let row = RowRef::new(RowChain::new(1, 1), b"first");
        row.lock_state().push(crate::row_chain::Version {
            begin: 2,
            end: crate::txn::END_UNSET,
            data: VersionData::Shared(later.clone()),
        });
        let handles: Vec<RowRef> = (0..100).map(|_| row.clone()).collect();
        std::thread::scope(|s| {
            for h in handles {
                s.spawn(move || {
                    assert_eq!(h.inline_bytes(), b"first");
                    drop(h);
                });
            }
        });
        assert_eq!(Arc::strong_count(&later), 2);
        drop(row);
        assert_eq!(
            Arc::strong_count(&later),
            1,
            "the chain's versions were dropped"
        );
    }
}
