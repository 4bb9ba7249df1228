//! The memory every query's operators may hold at once, server-wide. Sorts, hash joins,
//! aggregates and the build side of a cross join take their memory from one DataFusion pool
//! shared by all sessions, a fixed share of the machine's RAM (`QUERY_MEMORY_SHARE_PERCENT`):
//! a query that would pass it fails with 53200 (out of memory) instead of growing until the
//! kernel ends the server, and with it every connection and the tables it holds in RAM.
//! Operators that can spill (sorts, aggregates) write to temporary files first.
//!
//! The rows a query sends are not in the pool: they stream to the client a few batches at a
//! time (see `row_stream`).

use std::num::NonZeroUsize;
use std::sync::{Arc, LazyLock};

use datafusion::execution::memory_pool::{GreedyMemoryPool, TrackConsumersPool};
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};

/// The share of the machine's RAM that queries' operators may hold together. The rest holds
/// the tables, their indexes and the connections.
const QUERY_MEMORY_SHARE_PERCENT: u64 = 25;
/// The pool's size where the machine's RAM cannot be read.
const QUERY_MEMORY_FALLBACK_BYTES: u64 = 1 << 30;
/// How many of the largest consumers an out-of-memory error names.
const CONSUMERS_REPORTED: usize = 3;

static RUNTIME: LazyLock<Arc<RuntimeEnv>> = LazyLock::new(|| {
    let limit_bytes = query_memory_bytes() as usize;
    let pool = TrackConsumersPool::new(
        GreedyMemoryPool::new(limit_bytes),
        NonZeroUsize::new(CONSUMERS_REPORTED).expect("nonzero"),
    );
    RuntimeEnvBuilder::new()
        .with_memory_pool(Arc::new(pool))
        .build_arc()
        .expect("build the query runtime environment")
});

/// The runtime environment (memory pool, spill files) every session's queries share.
pub fn runtime_env() -> Arc<RuntimeEnv> {
    RUNTIME.clone()
}

/// The pool's size: `QUERY_MEMORY_SHARE_PERCENT` of the machine's RAM.
pub fn query_memory_bytes() -> u64 {
    physical_memory_bytes()
        .map(|total| total / 100 * QUERY_MEMORY_SHARE_PERCENT)
        .unwrap_or(QUERY_MEMORY_FALLBACK_BYTES)
}

/// MemTotal from /proc/meminfo.
fn physical_memory_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_is_a_share_of_ram() {
        let total = physical_memory_bytes().expect("MemTotal in /proc/meminfo");
        let pool = query_memory_bytes();
        assert!(pool > 0 && pool <= total / 2, "pool {pool} of {total}");
    }
}
