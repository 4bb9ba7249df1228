//! The server's memory limit as the storage engine enforces it. Writes that add rows (INSERT,
//! UPDATE, COPY, appends to column tables) ask [`MemoryBudget::check`] first and fail with
//! 53200 once the server's memory has reached the limit; deletes, reads, garbage collection,
//! checkpoints and recovery never ask, so a full server can always be read, emptied and
//! restarted. The SQL layer measures the memory (the process's resident set) and sets the
//! limit (`shoal.max_memory`); the check itself is two relaxed loads, cheap enough for every row.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::StorageError;

/// No limit: the value of `limit_bytes` before one is set.
const UNLIMITED: u64 = u64::MAX;

#[derive(Debug)]
pub struct MemoryBudget {
    limit_bytes: AtomicU64,
    /// The server's memory at the last measurement.
    used_bytes: AtomicU64,
}

impl Default for MemoryBudget {
    fn default() -> Self {
        MemoryBudget {
            limit_bytes: AtomicU64::new(UNLIMITED),
            used_bytes: AtomicU64::new(0),
        }
    }
}

impl MemoryBudget {
    pub fn set_limit_bytes(&self, limit_bytes: u64) {
        self.limit_bytes.store(limit_bytes, Ordering::Relaxed);
    }

    pub fn limit_bytes(&self) -> Option<u64> {
        Some(self.limit_bytes.load(Ordering::Relaxed)).filter(|&l| l != UNLIMITED)
    }

    /// Records a new measurement of the server's memory.
    pub fn set_used_bytes(&self, used_bytes: u64) {
        self.used_bytes.store(used_bytes, Ordering::Relaxed);
    }

    pub fn used_bytes(&self) -> u64 {
        self.used_bytes.load(Ordering::Relaxed)
    }

    /// Ok while the server's memory is below the limit; the write that asks may then add
    /// memory. Measurements lag by their interval, so memory can pass the limit by what the
    /// writes of one interval add.
    pub fn check(&self) -> Result<(), StorageError> {
        let limit_bytes = self.limit_bytes.load(Ordering::Relaxed);
        let used_bytes = self.used_bytes.load(Ordering::Relaxed);
        if used_bytes < limit_bytes {
            return Ok(());
        }
        Err(StorageError::OutOfMemory {
            used_bytes,
            limit_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_refused_from_the_limit_on() {
        let budget = MemoryBudget::default();
        budget.set_used_bytes(10 << 30);
        assert!(budget.check().is_ok(), "no limit until one is set");
        budget.set_limit_bytes(1 << 30);
        assert_eq!(budget.limit_bytes(), Some(1 << 30));
        let e = budget.check().unwrap_err();
        assert_eq!(e.sqlstate(), "53200");
        budget.set_used_bytes((1 << 30) - 1);
        assert!(budget.check().is_ok());
    }
}
