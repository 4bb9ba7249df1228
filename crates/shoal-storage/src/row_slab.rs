//! Slabs for rows loaded in bulk: a checkpoint's rows placed side by side in 2 MiB blocks of
//! memory mapped straight from the kernel, instead of one malloc per row.
//!
//! Why: loading a checkpoint is mostly making rows, and in `perf` most of a load's system time
//! was first-touch page faults, one per 4 KiB of fresh heap (~3 µs each on this VM), with
//! malloc's own bookkeeping next (bench/coldstart/README.md, "Row slabs"). A slab is 2 MiB
//! of memory, aligned to its size, whose pages are faulted in with one
//! `madvise(MADV_POPULATE_WRITE)`; rows are cut from it by bumping an offset, with no per-row
//! header and no rounding to malloc's 16-byte granule. A cursor maps `SLABS_PER_MAPPING`
//! slabs with one `mmap` and populates each when it starts cutting from it, because mapping
//! takes a lock that another loading thread's populate holds (see the constant).
//!
//! A slab counts the rows cut from it that are still alive, plus one while a [`SlabCursor`] is
//! still cutting from it, and is unmapped when that count reaches zero. The price: a slab is
//! given back only when its last row dies, so a table that deletes most of its loaded rows
//! keeps their slabs until the survivors die too.
//!
//! This module and `row_ref.rs` are the row store's unsafe code.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicUsize, Ordering};

/// A slab's size and alignment: one transparent huge page on x86-64.
pub(crate) const SLAB_BYTES: usize = 2 << 20;

/// Blocks bigger than this go to malloc: a slab holds 15 of them after its header, so a cursor
/// never wastes more than 1/15th of a slab when it moves on.
const SLAB_BLOCK_MAX: usize = SLAB_BYTES / 16;

/// Slabs in use right now: cut from, or holding live blocks (for tests and memory statistics).
static SLABS_OPEN: AtomicUsize = AtomicUsize::new(0);
/// Slabs mapped ahead in cursors' reservations and not yet opened (for tests).
static SLABS_RESERVED: AtomicUsize = AtomicUsize::new(0);

/// At the start of every slab.
#[repr(C)]
struct SlabHeader {
    /// Live blocks cut from this slab, plus one while a cursor cuts from it.
    live: AtomicUsize,
}

const FIRST_BLOCK_OFFSET: usize = std::mem::size_of::<SlabHeader>();

/// Slabs a cursor maps with one `mmap`. Mapping and trimming take the process's memory-map
/// lock for writing, which waits for any other thread's populate of a slab under way: with a
/// mapping per slab, two loading threads kept waiting on each other (~100 sleeps a second
/// each in a restart's scheduler trace). A reservation not yet cut takes no resident memory,
/// but counts against the kernel's commit limit (strict overcommit) and `RLIMIT_AS`; should a
/// whole reservation not map, the cursor maps one slab.
const SLABS_PER_MAPPING: usize = 16;

/// Cuts blocks from a slab, one thread's; takes the next slab of its reservation when the
/// current one is full, and maps a new reservation when that is used up.
pub(crate) struct SlabCursor {
    slab: Option<NonNull<SlabHeader>>,
    /// Offset of the next free byte in `slab`.
    next: usize,
    /// Mapped, SLAB_BYTES-aligned slabs not yet used: `reserved_slabs` of them from
    /// `reserve_at`.
    reserve_at: usize,
    reserved_slabs: usize,
}

impl SlabCursor {
    pub(crate) const fn new() -> SlabCursor {
        SlabCursor {
            slab: None,
            next: 0,
            reserve_at: 0,
            reserved_slabs: 0,
        }
    }

    /// Memory for a block of `layout`, counted as live in its slab; `None` when the block is
    /// too big for a slab or no slab could be mapped (the caller then uses malloc). Give it
    /// back with [`release`].
    pub(crate) fn alloc(&mut self, layout: Layout) -> Option<NonNull<u8>> {
        // (A block's alignment is met by rounding its offset up: the slab's start is aligned
        // to SLAB_BYTES, far more than any row needs.)
        if layout.size() > SLAB_BLOCK_MAX || layout.align() > SLAB_BLOCK_MAX {
            return None;
        }
        let mut start = self.next.next_multiple_of(layout.align());
        if self.slab.is_none() || start + layout.size() > SLAB_BYTES {
            let slab = self.next_slab()?;
            self.move_to(slab);
            start = self.next.next_multiple_of(layout.align());
        }
        let slab = self.slab.expect("a slab was mapped above");
        // SAFETY: `slab` is mapped and this cursor's count keeps it so.
        unsafe { slab.as_ref() }
            .live
            .fetch_add(1, Ordering::Relaxed);
        self.next = start + layout.size();
        debug_assert!(self.next <= SLAB_BYTES);
        // SAFETY: `start + size <= SLAB_BYTES`, so the block is inside the slab's mapping.
        Some(unsafe { NonNull::new_unchecked(slab.as_ptr().cast::<u8>().add(start)) })
    }

    /// The next slab of the reservation, mapping a new one if it is used up.
    fn next_slab(&mut self) -> Option<NonNull<SlabHeader>> {
        if self.reserved_slabs == 0 {
            (self.reserve_at, self.reserved_slabs) = map_slabs(SLABS_PER_MAPPING)
                .map(|start| (start, SLABS_PER_MAPPING))
                .or_else(|| map_slabs(1).map(|start| (start, 1)))?;
        }
        let start = self.reserve_at;
        self.reserve_at += SLAB_BYTES;
        self.reserved_slabs -= 1;
        // SAFETY: `start` is an unused slab of this cursor's reservation; from here on the
        // slab's count owns it.
        Some(unsafe { open_slab(start) })
    }

    fn move_to(&mut self, slab: NonNull<SlabHeader>) {
        if let Some(old) = self.slab.replace(slab) {
            // SAFETY: the cursor's own count on the old slab, given up once.
            unsafe { release_slab(old) };
        }
        self.next = FIRST_BLOCK_OFFSET;
    }
}

impl Drop for SlabCursor {
    fn drop(&mut self) {
        if let Some(slab) = self.slab.take() {
            // SAFETY: the cursor's own count on its slab, given up once.
            unsafe { release_slab(slab) };
        }
        if self.reserved_slabs > 0 {
            // SAFETY: the unused rest of this cursor's reservation: no block was cut from it.
            let unmapped = unsafe {
                rustix::mm::munmap(self.reserve_at as *mut _, self.reserved_slabs * SLAB_BYTES)
            };
            debug_assert!(
                unmapped.is_ok(),
                "munmap of a reservation failed: {unmapped:?}"
            );
            SLABS_RESERVED.fetch_sub(self.reserved_slabs, Ordering::Relaxed);
        }
    }
}

/// Gives back a block that `SlabCursor::alloc` returned.
///
/// # Safety
/// `block` came from `SlabCursor::alloc`, is released once, and is not used afterwards.
pub(crate) unsafe fn release(block: NonNull<u8>) {
    let slab = (block.as_ptr() as usize & !(SLAB_BYTES - 1)) as *mut SlabHeader;
    // SAFETY: slabs are SLAB_BYTES-aligned and blocks lie inside them, so masking the block's
    // address gives its slab's header; the block's count keeps the slab mapped until here.
    unsafe { release_slab(NonNull::new_unchecked(slab)) }
}

/// Drops one count of `slab`, and unmaps it with the last one.
///
/// # Safety
/// The caller owns one count of `slab` and does not use the slab afterwards.
unsafe fn release_slab(slab: NonNull<SlabHeader>) {
    // SAFETY: the caller's count keeps the slab mapped.
    let live = unsafe { &slab.as_ref().live };
    // Release/Acquire as in `Arc::drop`: every use of the slab's blocks happens before the
    // unmap.
    if live.fetch_sub(1, Ordering::Release) != 1 {
        return;
    }
    fence(Ordering::Acquire);
    // SAFETY: that was the last count: no block of the slab is in use and no cursor cuts
    // from it, so nothing refers to the mapping any more.
    let unmapped = unsafe { rustix::mm::munmap(slab.as_ptr().cast(), SLAB_BYTES) };
    debug_assert!(unmapped.is_ok(), "munmap of a slab failed: {unmapped:?}");
    SLABS_OPEN.fetch_sub(1, Ordering::Relaxed);
}

/// Maps `slabs` SLAB_BYTES-aligned slabs side by side, not yet populated; returns the first's
/// address, or `None` when the kernel has no memory to map.
fn map_slabs(slabs: usize) -> Option<usize> {
    use rustix::mm::{mmap_anonymous, munmap, MapFlags, ProtFlags};
    // One slab more, then the unaligned ends cut off: mmap only promises page alignment.
    let span_bytes = (slabs + 1) * SLAB_BYTES;
    // SAFETY: a new private anonymous mapping at an address the kernel picks; it aliases
    // nothing.
    let raw = unsafe {
        mmap_anonymous(
            std::ptr::null_mut(),
            span_bytes,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::PRIVATE,
        )
    }
    .ok()?;
    let raw_addr = raw as usize;
    let start = raw_addr.next_multiple_of(SLAB_BYTES);
    let head_bytes = start - raw_addr;
    let tail_bytes = span_bytes - head_bytes - slabs * SLAB_BYTES;
    // SAFETY: both ranges are inside the mapping just made and outside the slabs kept.
    unsafe {
        if head_bytes > 0 {
            let _ = munmap(raw, head_bytes);
        }
        if tail_bytes > 0 {
            let _ = munmap((start + slabs * SLAB_BYTES) as *mut _, tail_bytes);
        }
    }
    SLABS_RESERVED.fetch_add(slabs, Ordering::Relaxed);
    Some(start)
}

/// Makes the mapped, unused slab at `start` a slab whose count (1) is the caller's.
///
/// # Safety
/// `start` is a SLAB_BYTES-aligned, SLAB_BYTES-long part of a mapping of this process that
/// nothing else uses; it passes to the returned count.
unsafe fn open_slab(start: usize) -> NonNull<SlabHeader> {
    use rustix::mm::{madvise, Advice};
    let slab = start as *mut SlabHeader;
    // SAFETY (the caller's): `slab` is SLAB_BYTES of this process's memory, unused. Populating
    // faults all its pages in with one call instead of a trap per 4 KiB page; it is only an
    // optimization (kernels before 5.14 refuse it, and the pages then fault in on first
    // touch). No huge-page advice: on this VM a huge page's first touch cost several times
    // what the same memory in 4 KiB pages did (60% of a load's samples in clear_page).
    unsafe {
        let _ = madvise(slab.cast(), SLAB_BYTES, Advice::LinuxPopulateWrite);
        slab.write(SlabHeader {
            live: AtomicUsize::new(1),
        });
    }
    SLABS_RESERVED.fetch_sub(1, Ordering::Relaxed);
    SLABS_OPEN.fetch_add(1, Ordering::Relaxed);
    NonNull::new(slab).expect("a mapping is not at address 0")
}

/// Slabs in use right now.
#[cfg(test)]
fn slabs_open() -> usize {
    SLABS_OPEN.load(Ordering::Relaxed)
}

/// Slabs mapped ahead and not yet in use.
#[cfg(test)]
fn slabs_reserved() -> usize {
    SLABS_RESERVED.load(Ordering::Relaxed)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The tests count open and reserved slabs, process-wide: one test that maps slabs at a
    /// time.
    pub(crate) static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// Blocks from several slabs, released in an order unlike the one they were cut in: each
    /// slab is unmapped exactly when its last block and its cursor are gone, and blocks never
    /// overlap.
    #[test]
    fn a_slab_is_unmapped_with_its_last_block() {
        let _serial = SERIAL.lock().unwrap();
        let before = slabs_open();
        let layout = Layout::from_size_align(1000, 8).unwrap();
        let mut cursor = SlabCursor::new();
        let blocks: Vec<NonNull<u8>> = (0..5000).map(|_| cursor.alloc(layout).unwrap()).collect();
        let per_slab = (SLAB_BYTES - FIRST_BLOCK_OFFSET) / 1000;
        let slabs = 5000usize.div_ceil(per_slab);
        assert_eq!(slabs_open() - before, slabs);
        for (i, b) in blocks.iter().enumerate() {
            // SAFETY: each block is 1000 bytes of a live slab, this test's alone.
            unsafe { std::ptr::write_bytes(b.as_ptr(), i as u8, 1000) };
        }
        for (i, b) in blocks.iter().enumerate() {
            // SAFETY: as above; nothing else wrote these bytes if blocks do not overlap.
            assert_eq!(unsafe { *b.as_ptr().add(999) }, i as u8);
        }
        // Every other block first: no slab empties.
        for b in blocks.iter().step_by(2) {
            // SAFETY: each block released once, not used after.
            unsafe { release(*b) };
        }
        assert_eq!(slabs_open() - before, slabs);
        for b in blocks.iter().skip(1).step_by(2) {
            // SAFETY: as above.
            unsafe { release(*b) };
        }
        // All but the cursor's current slab are gone.
        assert_eq!(slabs_open() - before, 1);
        drop(cursor);
        assert_eq!(slabs_open(), before);
    }

    /// Blocks from more slabs than one mapping holds: each slab's blocks stay apart and
    /// within it, and every slab goes once its blocks and the cursor are gone.
    #[test]
    fn a_cursor_maps_its_next_slabs_when_its_reservation_is_used_up() {
        let _serial = SERIAL.lock().unwrap();
        let (before, reserved_before) = (slabs_open(), slabs_reserved());
        let layout = Layout::from_size_align(SLAB_BLOCK_MAX, 8).unwrap();
        let mut cursor = SlabCursor::new();
        let per_slab = (SLAB_BYTES - FIRST_BLOCK_OFFSET) / SLAB_BLOCK_MAX;
        let slabs = 2 * SLABS_PER_MAPPING + 3;
        let count = per_slab * slabs;
        let blocks: Vec<NonNull<u8>> = (0..count).map(|_| cursor.alloc(layout).unwrap()).collect();
        assert_eq!(slabs_open() - before, slabs);
        // The third mapping's slabs not yet opened.
        assert_eq!(
            slabs_reserved() - reserved_before,
            3 * SLABS_PER_MAPPING - slabs
        );
        for (i, b) in blocks.iter().enumerate() {
            let offset = b.as_ptr() as usize % SLAB_BYTES;
            assert!(offset >= FIRST_BLOCK_OFFSET && offset + SLAB_BLOCK_MAX <= SLAB_BYTES);
            // SAFETY: each block is SLAB_BLOCK_MAX bytes of a live slab, this test's alone.
            unsafe { std::ptr::write_bytes(b.as_ptr(), i as u8, SLAB_BLOCK_MAX) };
        }
        for (i, b) in blocks.iter().enumerate() {
            // SAFETY: as above; nothing else wrote these bytes if blocks do not overlap.
            let (first, last) = unsafe { (*b.as_ptr(), *b.as_ptr().add(SLAB_BLOCK_MAX - 1)) };
            assert_eq!((first, last), (i as u8, i as u8));
        }
        for b in blocks {
            // SAFETY: each block released once, not used after.
            unsafe { release(b) };
        }
        drop(cursor);
        assert_eq!((slabs_open(), slabs_reserved()), (before, reserved_before));
    }

    #[test]
    fn big_blocks_are_left_to_malloc() {
        let _serial = SERIAL.lock().unwrap();
        let mut cursor = SlabCursor::new();
        let big = Layout::from_size_align(SLAB_BLOCK_MAX + 1, 8).unwrap();
        assert!(cursor.alloc(big).is_none());
        let fits = Layout::from_size_align(SLAB_BLOCK_MAX, 8).unwrap();
        let block = cursor.alloc(fits).unwrap();
        assert_eq!(block.as_ptr() as usize % 8, 0);
        // SAFETY: released once.
        unsafe { release(block) };
    }
}
