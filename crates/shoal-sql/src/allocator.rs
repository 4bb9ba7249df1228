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
