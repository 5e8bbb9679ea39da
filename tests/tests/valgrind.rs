//! The tracer under valgrind (installed by scripts/setup.sh). Two things
//! killed a traced program there:
//! - SIGSEGV on the first event: the tracer's work runs on a stack of its
//!   own (tracer_stack.rs) and writes its result back into a frame of the
//!   program's stack that nothing had touched yet; valgrind grows a stack
//!   only on a fault near the stack pointer, which was on the other stack.
//! - exit status 1 at the end: valgrind supports no `clone(CLONE_VM)`
//!   without `CLONE_VFORK` (how the report converter's process is made,
//!   quiet_child.rs) and ends the whole program on one.
//!
//! Now, under a tool that leaves malloc to the program (`none`, callgrind),
//! the program's output and exit status are as under valgrind alone, every
//! call is counted, and the tracer's one line names the profile and the
//! command that converts it. memcheck replaces malloc itself: nothing is
//! traced, and nothing is harmed.

use std::path::Path;

use wmhcct_e2e::*;

/// `valgrind -q --tool=<tool> exe args`; traced in unwind mode `mode` into
/// `report` when they are given.
fn valgrind(
    tool: &str,
    exe: &Path,
    args: &[&str],
    dir: &Path,
    traced: Option<(&Path, &str)>,
) -> std::process::Command {
    let mut v = vec![
        "-q".to_string(),
        format!("--tool={tool}"),
        exe.display().to_string(),
    ];
    v.extend(args.iter().map(|a| a.to_string()));
    let mut c = command("valgrind", &v, dir);
    if let Some((report, mode)) = traced {
        c.env("LD_PRELOAD", lib())
            .env("WMHCCT_OUT", report)
            .env("WMHCCT_UNWIND", mode);
    }
    c
}

/// Run a [`valgrind`] command.
fn run(mut c: std::process::Command) -> Output {
    run_cmd(&mut c, VALGRIND_TIMEOUT)
}

const VALGRIND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

#[test]
fn a_program_under_valgrind_is_traced_without_harm() {
    let w = WorkDir::new("valgrind");
    // Threads with 16 KiB stacks: every one of their events switches to
    // the tracer's stack.
    let exe = compile("small_stacks.c", &w.path, Opt::Release, &["-pthread"]);
    let plain = run(valgrind("none", &exe, &[], &w.path, None));
    assert_eq!(plain.code, 0, "valgrind alone: {}", plain.describe());
    let made = calls_made(&plain.stdout);
    assert_eq!(made.len(), 2, "{}", plain.stdout);

    for mode in ["second", "full"] {
        let h5 = w.join(format!("{mode}.h5"));
        let traced = run(valgrind("none", &exe, &[], &w.path, Some((&h5, mode))));
        assert_eq!(traced.code, 0, "{mode}: {}", traced.describe());
        assert_eq!(traced.stdout, plain.stdout, "{mode}");
        // One line: the profile is kept, with the command that converts it.
        let lines = tracer_lines(&traced.stderr);
        let prof = format!("{}.wmprof", h5.display());
        assert!(
            lines.len() == 1
                && lines[0].contains("not started under valgrind")
                && lines[0].contains(&format!("wmhcct convert {prof} -o {}", h5.display())),
            "{mode}: {}",
            traced.describe()
        );
        assert_eq!(
            without_closing_line(&traced.stderr, &h5),
            plain.stderr,
            "{mode}: nothing else on stderr"
        );
        let conv = run_cmd(
            std::process::Command::new(bin())
                .args(["convert", &prof, "-o"])
                .arg(&h5)
                .arg("--remove-input"),
            TIMEOUT,
        );
        assert_eq!(conv.code, 0, "{mode}: {}", conv.describe());
        let r = report_json(&h5);
        // glibc's own thread set-up and teardown add calloc and free calls
        // (each thread's TLS vector): malloc is the program's alone.
        for (kind, n, bytes) in &made {
            if kind == "malloc" {
                assert_eq!(total_count(&r, kind), *n, "{mode}: {}", alloc_totals(&r));
                assert_eq!(total_bytes(&r, kind), *bytes, "{mode}");
            } else {
                assert!(
                    total_count(&r, kind) >= *n,
                    "{mode} {kind}: {}",
                    alloc_totals(&r)
                );
            }
        }
        let ctx = contexts_with(&r, "malloc", "small_thread_alloc");
        let n: u64 = ctx.iter().map(|c| u64_of(&c["count"])).sum();
        assert_eq!(n, 4 * 2000, "{mode}: {}", summary(&r));
        assert_eq!(u64_of(&r["unwind"]["errors"]), 0, "{mode}: {}", r["unwind"]);
    }

    // The stress program of benches/: its first event, deeper than the
    // main thread's stack had been, is where the tracer's result was
    // written into stack valgrind had not grown yet (SIGSEGV) when the
    // page boundary fell inside the tracer's frame: in about half of the
    // stack's placements. The environment, which lies on the stack above
    // main's frames, is padded by 0 to 3584 bytes in steps of 512 so that
    // the runs meet such placements whatever the rest of the environment.
    let stress = compile(
        "../../benches/alloc_stress.c",
        &w.path,
        Opt::Release,
        &["-pthread", "-Wl,--no-as-needed", "-lm"],
    );
    let args = ["--events", "2000", "--depth", "30", "--contexts", "100"];
    // The same events and checksum (its timing line differs).
    let sums = |o: &Output| {
        o.stdout
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let alone = run(valgrind("none", &stress, &args, &w.path, None));
    assert_eq!(alone.code, 0, "{}", alone.describe());
    assert!(
        sums(&alone).starts_with("events=2000 checksum="),
        "{}",
        alone.stdout
    );
    for pad in (0..8).map(|i| i * 512) {
        let h5 = w.join(format!("stress-{pad}.h5"));
        let mut c = valgrind("none", &stress, &args, &w.path, Some((&h5, "second")));
        c.env("PAD", "x".repeat(pad));
        let traced = run(c);
        assert_eq!(traced.code, 0, "pad {pad}: {}", traced.describe());
        assert_eq!(sums(&traced), sums(&alone), "pad {pad}");
        assert_eq!(
            tracer_lines(&traced.stderr).len(),
            1,
            "pad {pad}: {}",
            traced.describe()
        );
    }

    // memcheck: its own malloc, so no event reaches the tracer; the
    // program runs as under memcheck alone.
    let alone = run(valgrind("memcheck", &exe, &[], &w.path, None));
    let h5 = w.join("memcheck.h5");
    let traced = run(valgrind(
        "memcheck",
        &exe,
        &[],
        &w.path,
        Some((&h5, "second")),
    ));
    assert_eq!(traced.code, alone.code, "{}", traced.describe());
    assert_eq!(traced.stdout, alone.stdout);
    assert!(
        tracer_lines(&traced.stderr).is_empty(),
        "{}",
        traced.describe()
    );
}
