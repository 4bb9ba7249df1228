//! Giving freed memory back to the operating system. glibc's malloc keeps memory that a bulk
//! load or a checkpoint freed (log images, parse buffers, one arena per parse thread) mapped in
//! the process, where it counts as resident though nothing uses it. After such bursts Shoal
//! asks malloc to return what it can, so the server's resident memory tracks its data.

/// Returns free heap memory to the operating system (glibc's `malloc_trim`); a no-op on other
/// platforms. Costs a walk over the free lists: call it after bulk work, not per statement.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks and shrinks malloc's own free lists under malloc's locks;
    // it takes no pointers from us and leaves every live allocation in place.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Fixes glibc malloc's mmap threshold at 128 KiB (its initial value); call once at start-up.
/// By default glibc raises the threshold to the size of each mapped block it frees (up to 32
/// MiB), so after a bulk load's first big buffers the later ones come from the heap, between
/// long-lived rows, and leave holes there when freed that `malloc_trim` cannot give back. With a
/// fixed threshold big buffers always get a mapping of their own, returned whole when freed:
/// `pgbench -i -s 10` leaves 239-244 bytes of RSS per row instead of 258-278
/// (`bench/pgbench/memory.sh`, bench/pgbench/README.md).
pub fn configure() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a malloc parameter under malloc's lock; it takes no pointers.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES);
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD_BYTES: libc::c_int = 128 * 1024;

/// While alive, glibc's malloc grows its heaps in steps of `BULK_TOP_PAD_BYTES` instead of its
/// default 128 KiB; dropping it restores the default and gives back what is left free. A thread
/// other than the main one allocates from an arena of 64 MiB heaps, and glibc makes such a heap
/// usable one `mprotect` call per step as it fills: loading a 450 MB checkpoint made ~150K of
/// those calls, each holding the address-space lock that the other load thread's page faults
/// wait on. With the large step a new heap is usable in one call. The step is only raised for
/// bulk work because glibc also keeps that much free memory at the top of a heap when it trims.
/// Measured (bench/coldstart/README.md): a 3M-row, 450 MB row-table checkpoint loads in
/// ~1.0 s instead of ~1.27 s.
pub struct BulkHeapGrowth(());

#[cfg(all(target_os = "linux", target_env = "gnu"))]
const BULK_TOP_PAD_BYTES: libc::c_int = 64 << 20;
/// glibc's default M_TOP_PAD (mallopt(3)).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const DEFAULT_TOP_PAD_BYTES: libc::c_int = 128 * 1024;

impl BulkHeapGrowth {
    pub fn begin() -> BulkHeapGrowth {
        set_top_pad(true);
        BulkHeapGrowth(())
    }
}

impl Drop for BulkHeapGrowth {
    fn drop(&mut self) {
        set_top_pad(false);
        release_free_memory();
    }
}

fn set_top_pad(bulk: bool) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let bytes = if bulk {
            BULK_TOP_PAD_BYTES
        } else {
            DEFAULT_TOP_PAD_BYTES
        };
        // SAFETY: mallopt only sets a malloc parameter under malloc's lock; it takes no pointers.
        unsafe {
            libc::mallopt(libc::M_TOP_PAD, bytes);
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = bulk;
}
