//! `WMHCCT_COLLECTOR=thread`: events handed to a collector thread in
//! packets give the same report as recording them inline.
//!
//! A single-threaded program makes the same events in the same order either
//! way, so the bounded summary (which contexts survive, their counters and
//! error bounds) must come out identical, not just close: `rel_contexts`
//! with 10^5 contexts, far more than the summary keeps, so evictions are
//! part of the comparison. The other placements' checks (exact totals with
//! 8 threads and cross-thread frees, fork while threads allocate, every
//! allocator entry point, the known pattern) run in `threads.rs`,
//! `reliability_process.rs`, `allocators.rs` and `pattern.rs`.

use wmhcct_e2e::*;

const EVENTS: &str = "1000000";

/// Every context as (kind, stack, count, count error, bytes, leaked bytes),
/// sorted.
fn contexts_of(r: &Value) -> Vec<String> {
    let mut v: Vec<String> = contexts(r)
        .iter()
        .map(|c| {
            format!(
                "{} [{}] count {} ±{} bytes {} leaked {}",
                c["kind"],
                stack_addresses(c).join(" "),
                c["count"],
                c["count_err"],
                c["bytes"],
                c["leaked_bytes"]
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn packets_to_a_collector_thread_give_the_inline_report() {
    let w = WorkDir::new("collector-thread");
    let exe = compile("rel_contexts.c", &w.path, Opt::Release, &[]);
    let run = |name: &str, placement: &str| {
        let h5 = w.join(format!("{name}.h5"));
        let out = run_traced(
            &exe,
            &[EVENTS],
            &w.path,
            &h5,
            &[("WMHCCT_COLLECTOR", placement)],
        );
        assert_eq!(out.code, 0, "{name}: {}", out.describe());
        assert!(out.stdout.contains("contexts done"), "{}", out.describe());
        assert_clean_stderr(&out, &h5);
        report_json(&h5)
    };
    let inline = run("inline", "inline");
    let thread = run("thread", "thread");

    let (a, b) = (contexts_of(&inline), contexts_of(&thread));
    assert!(
        a.len() > 100,
        "the report lists the hot contexts: {}",
        a.len()
    );
    let differ: Vec<_> = a.iter().zip(&b).filter(|(x, y)| x != y).take(5).collect();
    assert!(
        a.len() == b.len() && differ.is_empty(),
        "{} contexts inline, {} with the collector thread; first differences: {differ:#?}",
        a.len(),
        b.len()
    );
    assert_eq!(alloc_totals(&inline), alloc_totals(&thread));
    for k in ["peak_bytes", "live_bytes"] {
        assert_eq!(inline[k], thread[k], "{k}");
    }
    assert_eq!(
        inline["heap"]["unknown_frees"], thread["heap"]["unknown_frees"],
        "unknown frees"
    );
    // The recording threads' unwind statistics reach the report too.
    for k in ["events", "frames_unwound", "frames_reused"] {
        assert!(
            u64_of(&thread["unwind"][k]) > 0 && u64_of(&inline["unwind"][k]) > 0,
            "{k}: {} / {}",
            inline["unwind"],
            thread["unwind"]
        );
    }
    assert_eq!(inline["unwind"]["events"], thread["unwind"]["events"]);
    assert_eq!(
        inline["ranks_detail"][0]["threads"], thread["ranks_detail"][0]["threads"],
        "threads"
    );
    assert_eq!(u64_of(&thread["ranks_detail"][0]["threads"]), 1);
}

/// `WMHCCT_COLLECTOR=auto` (the default) starts the collector thread only
/// where the process has a CPU to spare for it: `threads_seen` prints its
/// thread count, restricted to one CPU or to two by `taskset`, as a rank of
/// a job filling the CPUs, and with each placement forced.
#[test]
fn auto_placement_starts_the_thread_only_with_a_spare_cpu() {
    let w = WorkDir::new("collector-auto");
    let exe = compile("threads_seen.c", &w.path, Opt::Release, &[]);
    let exe = exe.to_string_lossy().into_owned();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut totals = Vec::new();
    let mut threads = |name: &str, cpu_list: &str, env: &[(&str, &str)]| -> u32 {
        let h5 = w.join(format!("{name}.h5"));
        let out = run_traced(
            "taskset",
            &["-c", cpu_list, exe.as_str()],
            &w.path,
            &h5,
            env,
        );
        assert_eq!(out.code, 0, "{name}: {}", out.describe());
        assert_clean_stderr(&out, &h5);
        totals.push((name.to_string(), alloc_totals(&report_json(&h5))));
        let n = out
            .stdout
            .split_whitespace()
            .find_map(|t| t.strip_prefix("threads="))
            .and_then(|n| n.parse().ok());
        n.unwrap_or_else(|| panic!("{name}: no thread count in {:?}", out.stdout))
    };
    assert_eq!(threads("one-cpu", "0", &[]), 1, "auto on one CPU: inline");
    assert_eq!(
        threads("one-cpu-forced", "0", &[("WMHCCT_COLLECTOR", "thread")]),
        2,
        "WMHCCT_COLLECTOR=thread starts the thread on one CPU too"
    );
    if cpus >= 2 {
        assert_eq!(threads("two-cpus", "0,1", &[]), 2, "auto with a spare CPU");
        assert_eq!(
            threads("two-cpus-auto", "0,1", &[("WMHCCT_COLLECTOR", "auto")]),
            2
        );
        assert_eq!(
            threads("two-cpus-inline", "0,1", &[("WMHCCT_COLLECTOR", "inline")]),
            1
        );
        assert_eq!(
            threads("two-ranks", "0,1", &[("OMPI_COMM_WORLD_LOCAL_SIZE", "2")]),
            1,
            "two ranks on two CPUs: inline"
        );
        assert_eq!(
            threads("no-stacks", "0,1", &[("WMHCCT_UNWIND", "none")]),
            1,
            "without stacks there is nothing to hand over: inline"
        );
        assert_eq!(
            threads("openmp", "0,1", &[("OMP_NUM_THREADS", "2")]),
            1,
            "two OpenMP threads on two CPUs: inline"
        );
    } else {
        eprintln!("one CPU here: the spare-CPU cases are not run");
    }
    // Same program, same events: every placement counts the same calls.
    let (first, rest) = totals.split_first().unwrap();
    for (name, t) in rest {
        assert_eq!(t, &first.1, "{name} vs {}", first.0);
    }
}

/// A CPU cgroup with a quota of one CPU, made for the test (cgroup v1's
/// `cpu` controller or cgroup v2's `cpu.max`); `None` where this machine
/// does not let us make one.
struct QuotaCgroup {
    dir: std::path::PathBuf,
    procs: &'static str,
}

impl QuotaCgroup {
    fn one_cpu() -> Option<QuotaCgroup> {
        let name = format!("wmhcct-test-quota-{}", std::process::id());
        let v1 = std::path::Path::new("/sys/fs/cgroup/cpu");
        let (dir, procs, limits): (_, _, &[(&str, &str)]) = if v1.join("cpu.cfs_quota_us").is_file()
        {
            (
                v1.join(&name),
                "tasks",
                &[
                    ("cpu.cfs_period_us", "100000"),
                    ("cpu.cfs_quota_us", "100000"),
                ],
            )
        } else {
            let root = std::path::Path::new("/sys/fs/cgroup");
            let _ = std::fs::write(root.join("cgroup.subtree_control"), "+cpu");
            (
                root.join(&name),
                "cgroup.procs",
                &[("cpu.max", "100000 100000")],
            )
        };
        std::fs::create_dir(&dir).ok()?;
        let cg = QuotaCgroup { dir, procs };
        for (file, value) in limits {
            std::fs::write(cg.dir.join(file), value).ok()?;
        }
        Some(cg)
    }
}

impl Drop for QuotaCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// `auto` counts a cgroup's CPU quota, not only the affinity mask: a
/// process on two CPUs limited to one CPU's time records inline.
#[test]
fn auto_placement_respects_a_cgroup_cpu_quota() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        eprintln!("one CPU here: nothing for a quota to take away");
        return;
    }
    let Some(cg) = QuotaCgroup::one_cpu() else {
        eprintln!("no CPU cgroup can be made here: not run");
        return;
    };
    let w = WorkDir::new("collector-quota");
    let exe = compile("threads_seen.c", &w.path, Opt::Release, &[]);
    let h5 = w.join("quota.h5");
    let script = format!("echo $$ > {}/{} && exec \"$0\"", cg.dir.display(), cg.procs);
    let out = run_traced(
        "sh",
        &["-c", script.as_str(), &exe.to_string_lossy()],
        &w.path,
        &h5,
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.describe());
    assert_clean_stderr(&out, &h5);
    assert!(
        out.stdout.contains("threads=1 "),
        "auto under a one-CPU quota: inline\n{}",
        out.describe()
    );
    let r = report_json(&h5);
    assert!(r["totals"]["malloc"]["count"].as_u64().unwrap_or(0) >= 1000);
}

/// The value of `key=` in `threads_seen`'s output line.
fn seen(out: &Output, key: &str) -> u64 {
    out.stdout
        .split_whitespace()
        .find_map(|t| t.strip_prefix(key)?.strip_prefix('='))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {key}= in {:?}", out.stdout))
}

/// A collector thread that cannot start (no address space left for its
/// stack) leaves the process recording inline: with `WMHCCT_COLLECTOR=thread`
/// the tracer says so in one line, with `auto` it says nothing; either way
/// the program runs as usual and the report counts every call.
#[test]
fn a_collector_thread_that_cannot_start_leaves_recording_inline() {
    let w = WorkDir::new("collector-nostart");
    let exe = compile("threads_seen.c", &w.path, Opt::Release, &[]);
    let exe = exe.to_string_lossy().into_owned();
    let inline_h5 = w.join("inline.h5");
    let inline = run_traced(
        &exe,
        &[] as &[&str],
        &w.path,
        &inline_h5,
        &[("WMHCCT_COLLECTOR", "inline")],
    );
    assert_eq!(inline.code, 0, "{}", inline.describe());
    // Room for the ring (1 MiB, made before the thread) and 5 MiB to spare,
    // but not for the thread's 8 MiB stack: a soft limit, which the
    // converter the tracer starts at exit lifts again for itself (it needs
    // more).
    let limit = (seen(&inline, "vmsize_kib") + 6 * 1024) * 1024;
    let limit_arg = format!("--as={limit}:unlimited");
    let converter = write_script(
        &w.path,
        "converter-unlimited",
        &format!(
            "ulimit -S -v unlimited\nexec '{}' \"$@\"\n",
            bin().display()
        ),
    );
    let expected = alloc_totals(&report_json(&inline_h5));
    for placement in ["thread", "auto"] {
        let h5 = w.join(format!("{placement}.h5"));
        let out = run_traced(
            "prlimit",
            &[limit_arg.as_str(), "--", exe.as_str()],
            &w.path,
            &h5,
            &[
                ("WMHCCT_COLLECTOR", placement),
                ("WMHCCT_BIN", &converter.to_string_lossy()),
            ],
        );
        assert_eq!(out.code, 0, "{placement}: {}", out.describe());
        assert_eq!(seen(&out, "threads"), 1, "{placement}: {}", out.describe());
        let told: Vec<&str> = tracer_lines(&out.stderr)
            .into_iter()
            .filter(|l| l.contains("could not start the collector thread"))
            .collect();
        assert_eq!(
            told.len(),
            usize::from(placement == "thread"),
            "{placement}: {}",
            out.stderr
        );
        // Nothing else, but for the line of a tracer that ran out of memory
        // and went on from its emergency reserve: with this little address
        // space, one of its own allocations now and then does not fit.
        let others = without_closing_line(&out.stderr, &h5)
            .lines()
            .filter(|l| !l.contains("the tracer continues from its emergency reserve"))
            .count();
        assert_eq!(others, told.len(), "{placement}: {}", out.stderr);
        assert_eq!(alloc_totals(&report_json(&h5)), expected, "{placement}");
    }
}

/// A program whose main thread ends first with `pthread_exit`, the others
/// going on (`main_exits_first.c`): with the collector thread the process
/// used to live on forever after its last thread, the collector thread
/// keeping it alive; it now ends as without the tracer (status 0, when its
/// last worker returns), with each thread's allocations counted exactly,
/// and the report names the program (its command line used to be read
/// from the main thread's `/proc` entry, empty by then).
#[test]
fn a_main_thread_that_ends_first_does_not_keep_the_process_alive() {
    let w = WorkDir::new("main-exits-first");
    let exe = compile("main_exits_first.c", &w.path, Opt::Release, &["-pthread"]);
    let plain = run_plain(&exe, &[] as &[&str], &w.path);
    assert_eq!(plain.code, 0, "{}", plain.describe());
    for placement in ["thread", "inline", "auto"] {
        let h5 = w.join(format!("{placement}.h5"));
        let out = run_traced_timeout(
            &exe,
            &[] as &[&str],
            &w.path,
            &h5,
            &[("WMHCCT_COLLECTOR", placement)],
            std::time::Duration::from_secs(30),
        );
        let what = format!("[{placement}] {}", out.describe());
        assert_eq!(out.code, 0, "{what}");
        assert_eq!(
            sorted_lines(&out.stdout),
            sorted_lines(&plain.stdout),
            "{what}"
        );
        assert_clean_stderr(&out, &h5);
        assert!(
            out.elapsed < std::time::Duration::from_secs(5),
            "ends with its last thread: {what}"
        );
        let r = report_json(&h5);
        assert!(
            r["program"]
                .as_str()
                .unwrap()
                .ends_with("main_exits_first-O2"),
            "{}",
            r["program"]
        );
        let count = |f: &str| u64_of(&context_with(&r, "malloc", f)["count"]);
        assert_eq!(count("main_blocks"), 100, "{what}");
        assert_eq!(count("worker_loop"), 2000, "{what}");
        assert_eq!(count("worker_tail"), 20, "{what}");
        assert!(total_count(&r, "free") >= 2000, "{}", alloc_totals(&r));
        assert!(
            u64_of(&r["resident"]["peak_bytes"]) > 0,
            "{}",
            r["resident"]
        );
    }
}

/// The collector thread lends its clock to the recording threads while it
/// is awake (`interpose/src/shared_clock.rs`) and withdraws it before it
/// sleeps: the heap's peak, one block allocated at a known time, is stamped
/// at that time whether the block came amid a stream of allocations or
/// after the collector thread had gone to sleep (a clock left published
/// there would stamp it ~400 ms early).
#[test]
fn events_are_stamped_when_they_happen_with_the_collector_thread() {
    let w = WorkDir::new("collector-clock");
    let exe = compile("clock_phases.c", &w.path, Opt::Release, &[]);
    for mode in ["busy", "idle"] {
        let h5 = w.join(format!("{mode}.h5"));
        let out = run_traced(
            &exe,
            &[mode],
            &w.path,
            &h5,
            &[("WMHCCT_COLLECTOR", "thread")],
        );
        assert_eq!(out.code, 0, "{mode}: {}", out.describe());
        assert_clean_stderr(&out, &h5);
        let line = out
            .stdout
            .lines()
            .find(|l| l.starts_with("block "))
            .unwrap_or_else(|| panic!("{mode}: {}", out.describe()));
        let t: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|x| x.parse().unwrap())
            .collect();
        let r = report_json(&h5);
        assert!(
            u64_of(&r["peak_bytes"]) >= 24 << 20,
            "{mode}: {}",
            r["heap"]
        );
        let at = u64_of(&r["start_unix_ns"]) + u64_of(&r["heap"]["peak_time_ns"]);
        // A stamp is never late (1 ms for the two clocks' origins), and
        // early by at most the published clock's step and lag, or a stalled
        // collector thread's time off the CPU on a loaded machine.
        let (early, late) = (t[0].saturating_sub(at), at.saturating_sub(t[1]));
        assert!(
            early <= 20_000_000 && late <= 1_000_000,
            "{mode}: the peak is stamped {}, the block was allocated in {}..{} \
             ({early} ns early, {late} ns late)",
            at,
            t[0],
            t[1]
        );
    }
}
