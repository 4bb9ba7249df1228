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
