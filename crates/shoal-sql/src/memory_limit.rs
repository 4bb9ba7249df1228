//! `shoal.max_memory`: how much memory the server may hold before writes that add rows fail
//! with 53200 (the storage engine's `MemoryBudget` enforces it). An in-memory database that
//! the kernel's OOM killer stops loses every connection at once; refusing growth near the
//! limit keeps it serving reads and deletes instead.
//!
//! The setting is a size (`8GB`, `512MB`; a bare number is MB) or a share of the memory the
//! machine gives the server (`80%`, the default): the smaller of its RAM and its cgroup's
//! memory limit. What is measured is the process's resident memory, every 10 ms by a
//! background thread, so memory can pass the limit by what 10 ms of writes add.

use std::sync::Weak;
use std::time::Duration;

use shoal_storage::memory_budget::MemoryBudget;

/// The setting's name and default.
pub const SETTING: &str = "shoal.max_memory";
pub const DEFAULT: &str = "80%";

const SAMPLE_INTERVAL: Duration = Duration::from_millis(10);

/// A value of the setting.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MaxMemory {
    Bytes(u64),
    /// Percent (1 to 100) of the machine's memory.
    ShareOfMachine(u32),
}

impl MaxMemory {
    /// Reads `80%`, `512MB`, `8GB`, `1048576kB`, or a bare number of MB; None if it is none of
    /// these (units are case-sensitive, as PostgreSQL's).
    pub fn parse(value: &str) -> Option<MaxMemory> {
        let value = value.trim();
        if let Some(percent) = value.strip_suffix('%') {
            let percent: u32 = percent.trim().parse().ok()?;
            return (1..=100)
                .contains(&percent)
                .then_some(MaxMemory::ShareOfMachine(percent));
        }
        let digits = value
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(value.len());
        let n: u64 = value[..digits].parse().ok()?;
        let unit_bytes: u64 = match value[digits..].trim() {
            "B" => 1,
            "kB" => 1 << 10,
            "" | "MB" => 1 << 20,
            "GB" => 1 << 30,
            "TB" => 1 << 40,
            _ => return None,
        };
        let bytes = n.checked_mul(unit_bytes)?;
        (bytes > 0).then_some(MaxMemory::Bytes(bytes))
    }

    pub fn bytes(self) -> u64 {
        match self {
            MaxMemory::Bytes(b) => b,
            MaxMemory::ShareOfMachine(percent) => machine_memory_bytes() / 100 * percent as u64,
        }
    }
}

/// The setting's value normalized for SHOW, or None if it is not a valid value.
pub fn normalize(value: &str) -> Option<String> {
    MaxMemory::parse(value)?;
    Some(value.trim().to_string())
}

/// Sets the budget's limit from the setting's value (the default if `value` is None or, having
/// passed `normalize` when it was read, somehow fails now).
pub fn apply(budget: &MemoryBudget, value: Option<&str>) {
    let max = value
        .and_then(MaxMemory::parse)
        .or_else(|| MaxMemory::parse(DEFAULT))
        .expect("the default parses");
    let limit_bytes = max.bytes();
    budget.set_limit_bytes(limit_bytes);
    tracing::info!("{SETTING}: {} MB", limit_bytes >> 20);
}

/// Measures the server's memory into `budget` every 10 ms while the database lives.
pub fn start_sampler(db: Weak<shoal_storage::Database>) {
    std::thread::Builder::new()
        .name("shoal-memory-sampler".into())
        .spawn(move || loop {
            let Some(db) = db.upgrade() else {
                return;
            };
            if let Some(bytes) = resident_bytes() {
                db.memory_budget().set_used_bytes(bytes);
            }
            drop(db);
            std::thread::sleep(SAMPLE_INTERVAL);
        })
        .expect("spawn the memory sampler thread");
}

/// The process's resident memory (Linux: /proc/self/statm); None elsewhere, where no limit is
/// enforced.
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * page_bytes())
}

fn page_bytes() -> u64 {
    #[cfg(unix)]
    // SAFETY: sysconf reads a constant of the system; it takes no pointers.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    #[cfg(not(unix))]
    let page = 4096;
    if page > 0 {
        page as u64
    } else {
        4096
    }
}

/// The memory the machine gives the server: its RAM, or its cgroup's limit if lower.
pub fn machine_memory_bytes() -> u64 {
    let ram = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kb << 10)
        })
        .unwrap_or(u64::MAX);
    let cgroup_limit = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .filter_map(|path| std::fs::read_to_string(path).ok())
    // cgroup v2 says `max` for no limit; v1 a huge number.
    .filter_map(|v| v.trim().parse::<u64>().ok())
    .min()
    .unwrap_or(u64::MAX);
    ram.min(cgroup_limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_shares_are_read_as_postgresql_reads_memory_settings() {
        assert_eq!(MaxMemory::parse("512MB"), Some(MaxMemory::Bytes(512 << 20)));
        assert_eq!(MaxMemory::parse("2GB"), Some(MaxMemory::Bytes(2 << 30)));
        assert_eq!(MaxMemory::parse("64"), Some(MaxMemory::Bytes(64 << 20)));
        assert_eq!(MaxMemory::parse("80%"), Some(MaxMemory::ShareOfMachine(80)));
        for bad in ["0", "0%", "101%", "2gb", "lots", "", "-1GB"] {
            assert_eq!(MaxMemory::parse(bad), None, "{bad}");
        }
        let machine = machine_memory_bytes();
        assert!(machine > 0);
        let half = MaxMemory::ShareOfMachine(50).bytes();
        assert!(half <= machine / 2 && half + 100 >= machine / 2);
    }

    #[test]
    fn resident_memory_is_measured_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(resident_bytes().unwrap() > 1 << 20);
        }
    }
}
