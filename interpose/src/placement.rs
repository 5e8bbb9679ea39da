//! `WMHCCT_COLLECTOR=auto` (the default): a collector thread where the
//! process has a core to spare for it, inline recording where it does not.
//!
//! The collector thread takes the tree update off the program's threads
//! (`packets.rs`), which pays only when it runs on a core the program does
//! not use: an MPI job with one rank per core, or ranks bound to single
//! cores, gets nothing from it but one more thread competing for its core.
//! So `auto` counts the CPUs this process may run on (its affinity mask,
//! which is what `mpirun`/`srun` binding and cgroup cpusets set, lowered to
//! its cgroup's CPU quota if that is smaller), divides
//! them among the ranks the launcher started on this node, and starts the
//! thread only if each rank is left at least one CPU beyond the threads it
//! runs itself (`OMP_NUM_THREADS`, else one).

use crate::config::CollectorPlacement;

/// What the decision looks at, read once at tracer start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Host {
    /// CPUs in the process's affinity mask.
    pub cpus: usize,
    /// Processes of this job on this node (1 outside MPI or when unknown).
    pub local_ranks: usize,
    /// Threads each of them runs (`OMP_NUM_THREADS`, else 1).
    pub threads_per_rank: usize,
}

/// Inline or thread: `auto` resolved for `host`; the other two as given.
/// `stacks`: events carry captured stacks (any unwind mode but `none`).
/// Without them recording is only the heap bookkeeping, which costs about
/// as much as handing the event over, so `auto` stays inline.
pub fn resolve(p: CollectorPlacement, host: &Host, stacks: bool) -> CollectorPlacement {
    match p {
        CollectorPlacement::Auto if !stacks => CollectorPlacement::Inline,
        CollectorPlacement::Auto => {
            let per_rank = host.cpus / host.local_ranks.max(1);
            if per_rank > host.threads_per_rank.max(1) {
                CollectorPlacement::Thread
            } else {
                CollectorPlacement::Inline
            }
        }
        other => other,
    }
}

/// CPUs this process may use (0 if unknown): its affinity mask, lowered to
/// its cgroup's CPU quota where one is set (a container's `--cpus`, a
/// batch system's limit), as `std::thread::available_parallelism` reads
/// them.
pub fn usable_cpus() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}

/// The host as this process sees it: `get` looks up environment variables.
pub fn host(cpus: usize, get: impl Fn(&str) -> Option<String>) -> Host {
    Host {
        cpus,
        local_ranks: crate::launcher::local_ranks(&get).unwrap_or(1).max(1),
        threads_per_rank: get("OMP_NUM_THREADS")
            .and_then(|v| first_number(&v))
            .unwrap_or(1)
            .max(1),
    }
}

/// The first number of a comma-separated list (`OMP_NUM_THREADS=8,2`: 8 at
/// the outer level).
fn first_number(v: &str) -> Option<usize> {
    v.split(',').next()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launcher::env;

    fn auto(cpus: usize, vars: &[(&str, &str)]) -> CollectorPlacement {
        resolve(CollectorPlacement::Auto, &host(cpus, env(vars)), true)
    }

    #[test]
    fn auto_needs_a_cpu_beyond_each_ranks_own_threads() {
        use CollectorPlacement::{Inline, Thread};
        const OMPI: &str = "OMPI_COMM_WORLD_LOCAL_SIZE";
        const OMP: &str = "OMP_NUM_THREADS";
        type Case<'a> = (usize, &'a [(&'a str, &'a str)], CollectorPlacement);
        let cases: &[Case] = &[
            // A single process with a spare CPU.
            (2, &[], Thread),
            (64, &[], Thread),
            // One CPU, or unknown (0): none to spare.
            (1, &[], Inline),
            (0, &[], Inline),
            // Open MPI: 2 ranks on 2 CPUs, 4 oversubscribed; half the cores used.
            (2, &[(OMPI, "2")], Inline),
            (2, &[(OMPI, "4")], Inline),
            (8, &[(OMPI, "4")], Thread),
            // MPICH's Hydra.
            (4, &[("MPI_LOCALNRANKS", "4")], Inline),
            (16, &[("MPI_LOCALNRANKS", "4")], Thread),
            // OpenMP threads count as used CPUs (the outer level of a list).
            (2, &[(OMP, "2")], Inline),
            (8, &[(OMP, "4,2")], Thread),
            (16, &[(OMP, "4"), (OMPI, "4")], Inline),
            // Unparsable or 0: one thread.
            (2, &[(OMP, "lots")], Thread),
            (2, &[(OMP, "0")], Thread),
        ];
        for (cpus, vars, want) in cases {
            assert_eq!(auto(*cpus, vars), *want, "{cpus} CPUs, {vars:?}");
        }
    }

    #[test]
    fn without_stacks_auto_stays_inline() {
        let idle = host(64, env(&[]));
        assert_eq!(
            resolve(CollectorPlacement::Auto, &idle, false),
            CollectorPlacement::Inline
        );
    }

    #[test]
    fn slurm_tasks_per_node() {
        // The step's list wins over the job's; the node number picks.
        let h = host(
            8,
            env(&[
                ("SLURM_STEP_TASKS_PER_NODE", "1,8"),
                ("SLURM_TASKS_PER_NODE", "8(x2)"),
                ("SLURM_NODEID", "1"),
            ]),
        );
        assert_eq!(h.local_ranks, 8);
        let h = host(
            8,
            env(&[("SLURM_STEP_TASKS_PER_NODE", "1,8"), ("SLURM_NODEID", "0")]),
        );
        assert_eq!(h.local_ranks, 1);
        assert_eq!(
            resolve(CollectorPlacement::Auto, &h, true),
            CollectorPlacement::Thread
        );
    }

    #[test]
    fn usable_cpus_are_within_the_affinity_mask() {
        // SAFETY: `set` is a local cpu_set_t of the size passed.
        let mask = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            assert_eq!(
                libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
                0
            );
            libc::CPU_COUNT(&set) as usize
        };
        let n = usable_cpus();
        assert!((1..=mask).contains(&n), "{n} usable, {mask} in the mask");
    }

    #[test]
    fn forced_placements_are_kept() {
        let busy = host(1, env(&[("OMPI_COMM_WORLD_LOCAL_SIZE", "8")]));
        let idle = host(64, env(&[]));
        for h in [&busy, &idle] {
            for stacks in [false, true] {
                assert_eq!(
                    resolve(CollectorPlacement::Inline, h, stacks),
                    CollectorPlacement::Inline
                );
                assert_eq!(
                    resolve(CollectorPlacement::Thread, h, stacks),
                    CollectorPlacement::Thread
                );
            }
        }
    }
}
