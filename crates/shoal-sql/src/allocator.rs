//! Giving freed memory back to the operating system. The server runs on mimalloc (see
//! `crates/shoal/src/main.rs`), which returns emptied pages on its own after a short delay;
//! after a burst of freeing (a bulk load, a checkpoint, VACUUM) Shoal asks it to do so at once,
//! and asks glibc's malloc (still used by C code, and by the test binaries) the same, so the
//! server's resident memory tracks its data.

/// Returns free heap memory to the operating system: mimalloc's `mi_collect` and glibc's
/// `malloc_trim`. Costs a walk over the allocators' free pages: call it after bulk work, not
/// per statement.
pub fn release_free_memory() {
    // SAFETY: mi_collect only frees mimalloc's own empty pages of this thread's heap and the
    // abandoned ones; it takes no pointers from us and leaves every live allocation in place.
    unsafe {
        libmimalloc_sys::mi_collect(true);
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks and shrinks malloc's own free lists under malloc's locks;
    // it takes no pointers from us and leaves every live allocation in place.
    unsafe {
        libc::malloc_trim(0);
    }
}
