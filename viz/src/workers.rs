//! How many threads a command may use for work that can run in parallel
//! (`wmhcct convert`'s symbols: `convert.rs`, `symbolize.rs`).
//!
//! One when the process's address space or data size is limited (`ulimit
//! -v`, `ulimit -d`, or a batch system's memory limit enforced that way):
//! each thread that allocates gets a glibc arena of its own, reserved 64
//! MiB at a time, which a tight limit has no room for. The converter a
//! traced program starts at its exit inherits the program's limits: under
//! `ulimit -v 120000` its second thread's first allocation failed, and the
//! report with it. Else the CPUs the process may run on.

/// Threads to use: 1 under a memory limit, else the CPUs available.
pub fn available() -> usize {
    let limited = std::fs::read_to_string("/proc/self/limits").map_or(true, |l| memory_limited(&l));
    if limited {
        return 1;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Does `/proc/self/limits` (its text) set a soft limit on the address
/// space or the data size? A text without those lines counts as limited.
fn memory_limited(limits: &str) -> bool {
    let soft = |name: &str| {
        limits
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
    };
    ["Max address space", "Max data size"]
        .iter()
        .any(|name| soft(name) != Some("unlimited"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "Limit                     Soft Limit           Hard Limit           Units     \n\
                        Max cpu time              unlimited            unlimited            seconds   \n";

    #[test]
    fn a_limit_on_address_space_or_data_means_one_thread() {
        let free = format!(
            "{HEAD}Max data size             unlimited            unlimited            bytes     \n\
             Max address space         unlimited            unlimited            bytes     \n"
        );
        assert!(!memory_limited(&free));
        let as_limited = free.replace(
            "Max address space         unlimited",
            "Max address space         122880000",
        );
        assert!(memory_limited(&as_limited));
        let data_limited = free.replace(
            "Max data size             unlimited",
            "Max data size             1073741824",
        );
        assert!(memory_limited(&data_limited));
        assert!(memory_limited(HEAD), "lines missing: limited");
        // This process: whatever it is run with, a count of at least one.
        assert!(available() >= 1);
    }
}
