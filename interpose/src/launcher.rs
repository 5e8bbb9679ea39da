//! What the MPI launcher tells each rank through its environment, before
//! MPI is initialised (or in a program that never uses MPI): the rank and
//! the number of processes (lines that say the same on every rank of a job
//! are rank 0's only), the ranks on this node (`placement.rs`), and whether
//! the job runs several executables.

/// The rank variables of Open MPI's `mpirun`, PMI (MPICH's Hydra, Intel
/// MPI), PMIx, and Slurm's `srun`, in that order.
const RANK_VARS: [&str; 4] = [
    "OMPI_COMM_WORLD_RANK",
    "PMI_RANK",
    "PMIX_RANK",
    "SLURM_PROCID",
];

/// The rank the first set variable of [`RANK_VARS`] gives (`get` reads the
/// environment).
pub fn world_rank(get: impl Fn(&str) -> Option<String>) -> Option<u32> {
    RANK_VARS
        .iter()
        .find_map(|var| get(var))
        .and_then(|v| v.trim().parse().ok())
}

/// This process as one task of a parallel launch: its rank and the
/// launch's number of processes (Open MPI's `mpirun`, MPICH's Hydra,
/// Slurm's `srun`), when there are several.
pub fn task(get: impl Fn(&str) -> Option<String>) -> Option<(u32, u32)> {
    const SIZE_VARS: [&str; 3] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"];
    let size: u32 = SIZE_VARS
        .iter()
        .find_map(|var| get(var))
        .and_then(|v| v.trim().parse().ok())?;
    let rank = world_rank(get)?;
    (size > 1 && rank < size).then_some((rank, size))
}

/// The launch this process is a task of, as its launcher names it, the
/// same in every process of the launch and different in the next one:
/// PMIx's namespace (Open MPI 4 and 5, Slurm's `srun --mpi=pmix`), Open
/// MPI's job id, else Slurm's job and step (`srun`). Empty when none is set
/// (MPICH's Hydra names none). The launcher's own variables come before
/// Slurm's: ranks of an `mpirun` inside an allocation do not all see the
/// same Slurm step (those on `mpirun`'s node are in the batch step).
///
/// A requeued Slurm job runs again with the same job id, step numbers and
/// PMIx namespaces: from its first restart on (`SLURM_RESTART_COUNT`), the
/// id says which run it is (`slurm:77.0+r1`). Until 2026-11-27 a merge of
/// the spill directory took both runs' profiles as one launch.
pub fn launch_id(get: impl Fn(&str) -> Option<String>) -> String {
    let set = |var: &str| {
        get(var)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let id = if let Some(ns) = set("PMIX_NAMESPACE") {
        format!("pmix:{ns}")
    } else if let Some(job) = set("OMPI_MCA_ess_base_jobid") {
        format!("ompi:{job}")
    } else {
        match (set("SLURM_JOB_ID"), set("SLURM_STEP_ID")) {
            (Some(job), Some(step)) => format!("slurm:{job}.{step}"),
            _ => return String::new(),
        }
    };
    match set("SLURM_RESTART_COUNT").filter(|n| n != "0") {
        Some(n) => format!("{id}+r{n}"),
        None => id,
    }
}

/// [`launch_id`] for a task of a launch, from its environment and, where
/// that names no launch, from MPICH's Hydra: every task's parent is a
/// `hydra_pmi_proxy` (one per node) started with `--control-port
/// <host>:<port>`, the port `mpiexec` listens on for this launch, the same
/// on every node (`hydra:<host>:<port>`).
pub fn task_launch_id() -> String {
    let named = launch_id(|v| std::env::var(v).ok());
    if !named.is_empty() {
        return named;
    }
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() };
    std::fs::read(format!("/proc/{parent}/cmdline"))
        .ok()
        .and_then(|c| hydra_control_port(&c))
        .map(|port| format!("hydra:{port}"))
        .unwrap_or_default()
}

/// The `--control-port` of a `hydra_pmi_proxy` command line (NUL-separated
/// arguments, as in `/proc/<pid>/cmdline`); `None` for any other program.
fn hydra_control_port(cmdline: &[u8]) -> Option<String> {
    let mut args = cmdline
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned());
    let program = args.next()?;
    if program.rsplit('/').next() != Some("hydra_pmi_proxy") {
        return None;
    }
    while let Some(a) = args.next() {
        if a == "--control-port" {
            return args.next().filter(|v| !v.is_empty());
        }
        if let Some(v) = a.strip_prefix("--control-port=") {
            return Some(v.to_string()).filter(|v| !v.is_empty());
        }
    }
    None
}

/// The file name a task of a launch gives its profile in the spill
/// directory: `rank-<r>.<launch>.wmprof`, the launch as [`task_launch_id`]
/// names it with every character but letters, digits, `.`, `_` and `-`
/// made a `-` (`rank-2.pmix-2106982401.wmprof`), so that a later launch
/// with the same report path (a second `srun` task farm of the job) leaves
/// an earlier one's files in place; `rank-<r>.wmprof` where the launcher
/// names no launch.
pub fn task_file_name(rank: u32, launch: &str) -> String {
    if launch.is_empty() {
        return format!("rank-{rank}.wmprof");
    }
    let tag: String = launch
        .chars()
        .take(96)
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '_' | '-' => c,
            _ => '-',
        })
        .collect();
    format!("rank-{rank}.{tag}.wmprof")
}

/// The executables of MPI launchers and their daemons (Open MPI 4 and 5,
/// MPICH's Hydra, Slurm), by file name: never traced, so that `wmhcct run
/// -- mpirun …` or an MPI singleton (which starts Open MPI's `orted`)
/// traces the ranks only, and a launcher's own report never takes the
/// job's.
pub fn is_launcher_program(file_name: &str) -> bool {
    const LAUNCHERS: [&str; 14] = [
        "orterun",
        "mpirun",
        "mpiexec",
        "orted",
        "prte",
        "prted",
        "prterun",
        "prun",
        "mpiexec.hydra",
        "mpiexec.mpich",
        "mpirun.mpich",
        "hydra_pmi_proxy",
        "srun",
        "slurmstepd",
    ];
    LAUNCHERS.contains(&file_name)
}

/// Programs that run one command as their child and wait for it, by file
/// name: GNU `timeout` and `time`, `strace`, `ltrace`, `perf`, `flock`.
/// Never traced either, and transparent: the command they run is traced as
/// if started in their place, so `wmhcct run --out r.h5 -- timeout 3600
/// ./app` writes the application's report at `r.h5` with the closing line,
/// where it used to be `timeout`'s, the application's going beside it as
/// `r-<pid>.h5` (coreutils close stderr at exit, so without even a line).
/// (`nice`, `taskset`, `numactl`, `env`, `nohup`, `stdbuf` replace
/// themselves with the command and need nothing.)
pub fn is_command_wrapper(file_name: &str) -> bool {
    const WRAPPERS: [&str; 6] = ["timeout", "time", "strace", "ltrace", "perf", "flock"];
    WRAPPERS.contains(&file_name)
}

/// The file name of process `pid`'s executable (`self`: this one).
fn executable_name(pid: &str) -> Option<String> {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
}

/// [`is_launcher_program`] for the executable of process `pid` (`self`:
/// this one).
pub fn runs_a_launcher(pid: &str) -> bool {
    executable_name(pid).is_some_and(|n| is_launcher_program(&n))
}

/// [`is_command_wrapper`] for the executable of process `pid`.
pub fn runs_a_command_wrapper(pid: &str) -> bool {
    executable_name(pid).is_some_and(|n| is_command_wrapper(&n))
}

/// Whether a job-wide line is this process's to print: rank 0's, or any
/// process's when no launcher said which rank it is.
pub fn speaks_for_the_job() -> bool {
    world_rank(|v| std::env::var(v).ok()).is_none_or(|r| r == 0)
}

/// Open MPI's MPMD launch (`mpirun -np 1 a : -np 3 b`): the number of
/// executables (application contexts), and whether this rank is the first
/// of its own. Every rank of the job reads the same count. `None` when the
/// launcher does not say (MPICH's Hydra, srun).
pub fn app_contexts(get: impl Fn(&str) -> Option<String>) -> Option<(u32, bool)> {
    let n = get("OMPI_NUM_APP_CTX")?.trim().parse().ok()?;
    let number = |var: &str| get(var).and_then(|v| v.trim().parse::<u32>().ok());
    // The contexts' sizes, in order: the first rank of context k is the sum
    // of the sizes before it.
    let sizes: Vec<u32> = get("OMPI_APP_CTX_NUM_PROCS")
        .map(|v| {
            v.split_whitespace()
                .filter_map(|s| s.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let first = match (
        number("OMPI_MCA_orte_app_num"),
        number("OMPI_COMM_WORLD_RANK"),
    ) {
        (Some(app), Some(rank)) if (app as usize) < sizes.len() => {
            sizes[..app as usize].iter().sum::<u32>() == rank
        }
        _ => false,
    };
    Some((n, first))
}

/// Ranks on this node, from the variables the launchers set in each rank:
/// Open MPI's `mpirun`, MPICH's Hydra, then Slurm's `srun` (the step's
/// tasks per node, indexed by this node's number).
pub fn local_ranks(get: &impl Fn(&str) -> Option<String>) -> Option<usize> {
    for var in ["OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"] {
        if let Some(n) = get(var).and_then(|v| v.trim().parse::<usize>().ok()) {
            return Some(n);
        }
    }
    let node = get("SLURM_NODEID")
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    ["SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"]
        .iter()
        .find_map(|var| get(var).and_then(|v| slurm_tasks_on_node(&v, node)))
}

/// Slurm's compressed tasks-per-node list, e.g. `4(x2),3`: 4 tasks on
/// nodes 0 and 1, 3 on node 2. The count of node `node`, if listed.
fn slurm_tasks_on_node(list: &str, node: usize) -> Option<usize> {
    let mut first = 0usize;
    for part in list.trim().split(',') {
        let (count, repeat) = match part.split_once("(x") {
            Some((c, r)) => (c, r.strip_suffix(')')?.parse::<usize>().ok()?),
            None => (part, 1),
        };
        let count = count.parse::<usize>().ok()?;
        if node < first.checked_add(repeat)? {
            return Some(count);
        }
        first += repeat;
    }
    None
}

/// For tests: `vars` as the environment lookup the functions here take.
#[cfg(test)]
pub(crate) fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |k| {
        vars.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_slurm_tasks_per_node() {
        assert_eq!(slurm_tasks_on_node("4", 0), Some(4));
        assert_eq!(slurm_tasks_on_node("4(x2),3", 0), Some(4));
        assert_eq!(slurm_tasks_on_node("4(x2),3", 1), Some(4));
        assert_eq!(slurm_tasks_on_node("4(x2),3", 2), Some(3));
        assert_eq!(slurm_tasks_on_node("4(x2),3", 3), None);
        assert_eq!(slurm_tasks_on_node("2,1(x3)", 3), Some(1));
        assert_eq!(slurm_tasks_on_node("bogus", 0), None);
        assert_eq!(slurm_tasks_on_node("4(x", 0), None);
    }

    #[test]
    fn launch_ids() {
        let ompi = [
            ("PMIX_NAMESPACE", "2106982401"),
            ("OMPI_MCA_ess_base_jobid", "2106982401"),
            ("SLURM_JOB_ID", "77"),
        ];
        assert_eq!(launch_id(env(&ompi)), "pmix:2106982401");
        assert_eq!(
            launch_id(env(&[("OMPI_MCA_ess_base_jobid", " 5 ")])),
            "ompi:5"
        );
        let srun = [("SLURM_JOB_ID", "77"), ("SLURM_STEP_ID", "2")];
        assert_eq!(launch_id(env(&srun)), "slurm:77.2");
        // The batch step of a job, and Hydra (PMI_* only), name no launch.
        assert_eq!(launch_id(env(&[("SLURM_JOB_ID", "77")])), "");
        assert_eq!(launch_id(env(&[("PMI_RANK", "1"), ("PMI_SIZE", "2")])), "");
        assert_eq!(launch_id(env(&[("PMIX_NAMESPACE", "")])), "");
        // A requeued job's runs differ.
        let requeued = [
            ("SLURM_JOB_ID", "77"),
            ("SLURM_STEP_ID", "0"),
            ("SLURM_RESTART_COUNT", "1"),
        ];
        assert_eq!(launch_id(env(&requeued)), "slurm:77.0+r1");
        let first = [
            ("PMIX_NAMESPACE", "slurm.pmix.77.0"),
            ("SLURM_RESTART_COUNT", "0"),
        ];
        assert_eq!(launch_id(env(&first)), "pmix:slurm.pmix.77.0");
    }

    #[test]
    fn hydra_names_its_launch_by_the_control_port() {
        let proxy = b"/usr/bin/hydra_pmi_proxy\0--control-port\0vm:43505\0--rmk\0user\0--pgid\x000\x00--proxy-id\x000\x00";
        assert_eq!(hydra_control_port(proxy).as_deref(), Some("vm:43505"));
        let eq = b"hydra_pmi_proxy\0--control-port=n1:77\0";
        assert_eq!(hydra_control_port(eq).as_deref(), Some("n1:77"));
        // Another parent (a shell), or a proxy without the option.
        assert_eq!(
            hydra_control_port(b"/bin/bash\0--control-port\0x:1\0"),
            None
        );
        assert_eq!(
            hydra_control_port(b"/usr/bin/hydra_pmi_proxy\0--rmk\0user\0"),
            None
        );
        assert_eq!(
            hydra_control_port(b"hydra_pmi_proxy\0--control-port\0"),
            None
        );
        assert_eq!(hydra_control_port(b""), None);
        assert_eq!(
            task_file_name(1, "hydra:vm:43505"),
            "rank-1.hydra-vm-43505.wmprof"
        );
    }

    #[test]
    fn task_file_names_carry_the_launch() {
        assert_eq!(
            task_file_name(2, "pmix:2106982401"),
            "rank-2.pmix-2106982401.wmprof"
        );
        assert_eq!(task_file_name(0, "slurm:77.2"), "rank-0.slurm-77.2.wmprof");
        // A PMIx namespace of Open MPI 5 (`prterun-<host>-<pid>@1`), and
        // one with a path separator: one file name, in the directory.
        assert_eq!(
            task_file_name(1, "pmix:prterun-n1-4711@1"),
            "rank-1.pmix-prterun-n1-4711-1.wmprof"
        );
        assert_eq!(
            task_file_name(1, "pmix:a/../b"),
            "rank-1.pmix-a-..-b.wmprof"
        );
        assert_eq!(task_file_name(3, ""), "rank-3.wmprof");
        let long = format!("pmix:{}", "x".repeat(500));
        assert!(task_file_name(0, &long).len() < 120);
    }

    #[test]
    fn each_launcher() {
        assert_eq!(world_rank(env(&[("OMPI_COMM_WORLD_RANK", "3")])), Some(3));
        assert_eq!(world_rank(env(&[("PMI_RANK", "0")])), Some(0));
        assert_eq!(world_rank(env(&[("PMIX_RANK", " 7 ")])), Some(7));
        assert_eq!(world_rank(env(&[("SLURM_PROCID", "12")])), Some(12));
        assert_eq!(world_rank(env(&[])), None);
    }

    #[test]
    fn the_launchers_own_variable_wins_over_slurms() {
        // mpirun inside an allocation: SLURM_PROCID is the batch step's.
        let both = [("SLURM_PROCID", "0"), ("OMPI_COMM_WORLD_RANK", "2")];
        assert_eq!(world_rank(env(&both)), Some(2));
        assert_eq!(world_rank(env(&[("PMI_RANK", "x")])), None);
    }

    #[test]
    fn launcher_programs() {
        for name in [
            "orterun",
            "orted",
            "prterun",
            "mpiexec.hydra",
            "hydra_pmi_proxy",
            "srun",
        ] {
            assert!(is_launcher_program(name), "{name}");
        }
        for name in ["mpi_pattern", "python3.11", "bash", "mpirun.sh", "lmp"] {
            assert!(!is_launcher_program(name), "{name}");
        }
        assert!(!runs_a_launcher("self"), "the unit-test binary");
        for name in ["timeout", "time", "strace", "perf", "flock"] {
            assert!(
                is_command_wrapper(name) && !is_launcher_program(name),
                "{name}"
            );
        }
        for name in ["nice", "env", "taskset", "mpirun", "bash", "timeouts"] {
            assert!(!is_command_wrapper(name), "{name}");
        }
        assert!(!runs_a_command_wrapper("self"), "the unit-test binary");
    }

    #[test]
    fn tasks_of_a_launch() {
        let ompi = [("OMPI_COMM_WORLD_SIZE", "4"), ("OMPI_COMM_WORLD_RANK", "2")];
        assert_eq!(task(env(&ompi)), Some((2, 4)));
        let hydra = [("PMI_SIZE", "3"), ("PMI_RANK", "0")];
        assert_eq!(task(env(&hydra)), Some((0, 3)));
        let srun = [("SLURM_STEP_NUM_TASKS", "8"), ("SLURM_PROCID", "7")];
        assert_eq!(task(env(&srun)), Some((7, 8)));
        // One process, or no launcher: not a task of a launch.
        let alone = [("OMPI_COMM_WORLD_SIZE", "1"), ("OMPI_COMM_WORLD_RANK", "0")];
        assert_eq!(task(env(&alone)), None);
        assert_eq!(task(env(&[("SLURM_PROCID", "0")])), None);
        let inconsistent = [("PMI_SIZE", "2"), ("PMI_RANK", "5")];
        assert_eq!(task(env(&inconsistent)), None);
    }

    #[test]
    fn open_mpi_app_contexts() {
        // mpirun -np 1 a : -np 2 b, as Open MPI 4.1 tells ranks 0, 1 and 2.
        let rank = |r: &'static str, app: &'static str| {
            [
                ("OMPI_NUM_APP_CTX", "2"),
                ("OMPI_APP_CTX_NUM_PROCS", "1 2"),
                ("OMPI_MCA_orte_app_num", app),
                ("OMPI_COMM_WORLD_RANK", r),
            ]
        };
        assert_eq!(app_contexts(env(&rank("0", "0"))), Some((2, true)));
        assert_eq!(app_contexts(env(&rank("1", "1"))), Some((2, true)));
        assert_eq!(app_contexts(env(&rank("2", "1"))), Some((2, false)));
        let one = [("OMPI_NUM_APP_CTX", "1"), ("OMPI_APP_CTX_NUM_PROCS", "4")];
        assert_eq!(app_contexts(env(&one)), Some((1, false)));
        assert_eq!(app_contexts(env(&[("PMI_RANK", "0")])), None);
    }
}
