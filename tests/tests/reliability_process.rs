//! Process life cycle under the tracer (issue 8): fork without exec in a
//! multi-threaded program while other threads allocate, fork+exec,
//! `system()`, `vfork`, `posix_spawn`, 1000 dlopen/dlclose cycles of a
//! library that allocates, and a library whose constructor allocates.
//!
//! Every run has a time limit (a hang is a failure) and the program itself
//! has a watchdog on each child: a child that deadlocks (a tracer lock
//! inherited across fork in a locked state) is killed and reported.

mod rel_common;

use std::path::Path;
use std::time::Duration;

use rel_common::*;
use wmhcct_e2e::*;

fn forkmt(mode: &str, n: u32, expected_child_reports: usize) {
    forkmt_with(mode, n, expected_child_reports, "inline");
}

fn forkmt_with(mode: &str, n: u32, expected_child_reports: usize, collector: &str) {
    let t = format!("forkmt_{mode}_{collector}");
    let w = WorkDir::new(&format!("rel-forkmt-{mode}-{collector}"));
    let exe = compile("rel_forkmt.c", &w.path, Opt::Debug, &["-pthread"]);
    let n_s = n.to_string();
    let expected = format!("forkmt {mode}: {n} children, {n} exited 0, 0 hung\n");
    let native = run_plain(&exe, &[mode, &n_s], &w.path);
    assert_eq!(native.code, 0, "{}", native.describe());
    assert_eq!(native.stdout, expected);

    let h5 = w.join(format!("{mode}.h5"));
    // Exact mode: a forked child's report starts with the parent's history
    // (the spinners' many events), next to which the child's 300 mallocs
    // would not be hot enough for the bounded summary to keep them.
    let out = run_traced_timeout(
        &exe,
        &[mode, &n_s],
        &w.path,
        &h5,
        &[("WMHCCT_EXACT", "1"), ("WMHCCT_COLLECTOR", collector)],
        Duration::from_secs(300),
    );
    figure(
        &t,
        format!(
            "{n} children while 4 threads allocate: {:.2} s traced, {:.2} s native",
            out.elapsed.as_secs_f64(),
            native.elapsed.as_secs_f64()
        ),
    );
    assert_eq!(out.code, 0, "{}", out.describe());
    assert_eq!(out.stdout, expected, "no child hung, every child exited 0");
    for l in out.stderr.lines() {
        assert!(
            l.starts_with("wmhcct: report written to "),
            "unexpected stderr line: {l}\n{}",
            out.stderr
        );
    }
    // The parent's report: its spinners' allocations.
    let r = report_json(&h5);
    assert!(
        !contexts_with(&r, "malloc", "rel_spinner").is_empty(),
        "{}",
        summary(&r)
    );
    // Each child that exits through exit() (or is a started program)
    // writes its own report, with its 100 (or 300) mallocs of
    // rel_child_work. Under system() the shell between them writes one
    // too (dash ends with _exit, which until 2026-11-27 wrote nothing in
    // a started program).
    let kids = child_reports(&w.path, mode);
    let (shells, kids): (Vec<_>, Vec<_>) = kids.into_iter().partition(|k| {
        let program = report_json(k)["program"].as_str().unwrap_or("").to_string();
        program.ends_with("/sh") || program.ends_with("dash")
    });
    let shells_expected = if mode == "system" { n as usize } else { 0 };
    assert_eq!(shells.len(), shells_expected, "{shells:?}");
    assert_eq!(kids.len(), expected_child_reports, "{kids:?}");
    for k in &kids {
        let c = report_json(k);
        let work: u64 = contexts_with(&c, "malloc", "rel_child_work")
            .iter()
            .map(|x| u64_of(&x["count"]))
            .sum();
        let want = if mode == "fork" { 300 } else { 100 };
        assert_eq!(work, want, "{}: {}", k.display(), summary(&c));
    }
}

/// 50 forks without exec while 4 threads malloc/free; each child allocates
/// (also from a new thread); every 10th leaves with exit() and writes a
/// report, the others with _exit().
#[test]
fn fork_without_exec_while_threads_allocate() {
    forkmt("fork", 50, 5);
}

/// The same with a collector thread: the child has none, so the atfork
/// handler applies what the parent had handed over and the child records
/// inline; no child inherits a lock held by the parent's collector thread.
#[test]
fn fork_without_exec_with_collector_thread() {
    forkmt_with("fork", 50, 5, "thread");
}

#[test]
fn fork_exec_while_threads_allocate() {
    forkmt("exec", 10, 10);
}

#[test]
fn system_while_threads_allocate() {
    forkmt("system", 10, 10);
}

#[test]
fn vfork_exec_while_threads_allocate() {
    forkmt("vfork", 10, 10);
}

#[test]
fn posix_spawn_while_threads_allocate() {
    forkmt("spawn", 10, 10);
}

/// 1000 dlopen/call/dlclose cycles, then one load that allocates 1000
/// times in rel_lib_hot_inner and is closed too; the program allocates
/// after the last dlclose. Stacks through the library resolve to its
/// function names (symbolised at convert time from the module's path).
#[test]
fn dlopen_dlclose_1000_times() {
    let t = "dlopen_dlclose_1000_times";
    let w = WorkDir::new("rel-dlopen");
    let so = shared_library("rel_dlib.c", &w.path);
    let exe = compile("rel_dlopen.c", &w.path, Opt::Debug, &[]);
    let so_s = so.to_string_lossy().into_owned();
    let native = run_plain(&exe, &[&so_s], &w.path);
    assert_eq!(native.code, 0, "{}", native.describe());
    let h5 = w.join("dlopen.h5");
    let out = run_traced(&exe, &[&so_s], &w.path, &h5, &[]);
    assert_eq!(out.code, 0, "{}", out.describe());
    assert_eq!(out.stdout, native.stdout, "output unchanged");
    assert_clean_stderr(&out, &h5);
    let r = report_json(&h5);
    figure(
        t,
        format!(
            "1001 dlopen/dlclose cycles: {:.2} s traced, {:.2} s native; {} malloc, {} calloc, {} free",
            out.elapsed.as_secs_f64(),
            native.elapsed.as_secs_f64(),
            total_count(&r, "malloc"),
            total_count(&r, "calloc"),
            total_count(&r, "free"),
        ),
    );
    let inner = context_with(&r, "malloc", "rel_lib_inner");
    assert_eq!(u64_of(&inner["count"]), 3000, "{inner}");
    let names = stack_names(inner);
    assert_eq!(frame_index(inner, "rel_lib_inner"), Some(0), "{names:?}");
    assert_eq!(frame_index(inner, "rel_lib_outer"), Some(1), "{names:?}");
    assert_eq!(frame_index(inner, "rel_lib_work"), Some(2), "{names:?}");
    assert_eq!(frame_index(inner, "main"), Some(3), "{names:?}");
    let hot = context_with(&r, "malloc", "rel_lib_hot_inner");
    assert_eq!(u64_of(&hot["count"]), 1000, "{hot}");
    assert_eq!(
        frame_index(hot, "rel_lib_hot"),
        Some(1),
        "{:?}",
        stack_names(hot)
    );
    let after = context_with(&r, "malloc", "rel_after_close");
    assert_eq!(u64_of(&after["count"]), 10, "{after}");
    // The library's frames name the library's file.
    let frame = &inner["stack"][0];
    assert!(
        frame.to_string().contains("librel_dlib.so"),
        "module of rel_lib_inner: {frame}"
    );
}

/// A library closed and opened again at another address each time (the
/// program keeps the page where it was taken): the same code is the same
/// frames, whichever load ran it. The report holds one context through
/// `rel_lib_inner`, with every load's calls, not one per address, and one
/// for `rel_lib_hot_inner` under it; the program's output says the library
/// did move. (With 1000 loads the dynamic loader mostly reuses one place,
/// which hid this until the tracer's own memory took that place now and
/// then.)
#[test]
fn a_library_reloaded_at_other_addresses_is_one_set_of_frames() {
    let w = WorkDir::new("rel-dlmove");
    let so = shared_library("rel_dlib.c", &w.path);
    let exe = compile("rel_dlopen.c", &w.path, Opt::Debug, &[]);
    let so_s = so.to_string_lossy().into_owned();
    let args = [so_s.as_str(), "20", "move"];
    let native = run_plain(&exe, &args, &w.path);
    assert_eq!(native.code, 0, "{}", native.describe());
    let moved = native
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("loaded at "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse::<u32>().ok())
        .unwrap_or(0);
    assert!(moved >= 10, "the library did not move: {}", native.stdout);
    let h5 = w.join("dlmove.h5");
    let out = run_traced(&exe, &args, &w.path, &h5, &[]);
    assert_eq!(out.code, 0, "{}", out.describe());
    assert_eq!(out.stdout, native.stdout, "output unchanged");
    assert_clean_stderr(&out, &h5);
    let r = report_json(&h5);
    let inner = context_with(&r, "malloc", "rel_lib_inner");
    assert_eq!(u64_of(&inner["count"]), 60, "{inner}");
    let names = stack_names(inner);
    assert_eq!(
        names[..4],
        ["rel_lib_inner", "rel_lib_outer", "rel_lib_work", "main"],
        "{names:?}"
    );
    let hot = context_with(&r, "malloc", "rel_lib_hot_inner");
    assert_eq!(u64_of(&hot["count"]), 1000, "{hot}");
}

/// A library's constructor allocates while `dlopen` runs it: the capture
/// point is in an object the tracer's table does not hold yet (it rescans
/// when a walk meets unknown code). Built `-O2` without frame pointers, so
/// nothing but its unwind tables leads out of it. The context must hold the
/// whole stack, from the constructor through the loader and `dlopen` to
/// `main`, name the library's module, and count one call per load; no
/// walk may end in an error. (The capture point used to be exempt from the
/// module check: the walk stepped out of it with the frame-pointer
/// fallback, failed, and the report had a one-frame `?? [?]` context.)
#[test]
fn allocation_in_a_dlopened_librarys_constructor() {
    let w = WorkDir::new("rel-dl-ctor");
    let so = shared_library_with(
        "dl_ctor_lib.c",
        &w.path,
        &["-O2", "-g", "-fomit-frame-pointer"],
    );
    let exe = compile("dl_ctor_main.c", &w.path, Opt::Release, &[]);
    let so_s = so.to_string_lossy().into_owned();
    let native = run_plain(&exe, &[&so_s, "20"], &w.path);
    assert_eq!(native.code, 0, "{}", native.describe());
    assert_eq!(native.stdout, "loaded 20 times, sum 60\n");
    for mode in ["second", "full"] {
        let h5 = w.join(format!("{mode}.h5"));
        let out = run_traced(
            &exe,
            &[&so_s, "20"],
            &w.path,
            &h5,
            &[("WMHCCT_UNWIND", mode)],
        );
        assert_eq!(out.code, 0, "{mode}: {}", out.describe());
        assert_eq!(out.stdout, native.stdout, "{mode}: output unchanged");
        assert_clean_stderr(&out, &h5);
        let r = report_json(&h5);
        let ctx = context_with(&r, "malloc", "dl_ctor_alloc");
        let names = stack_names(ctx);
        assert_eq!(u64_of(&ctx["count"]), 20, "{mode}: {names:?}");
        assert_eq!(u64_of(&ctx["bytes"]), 20 * 4242, "{mode}");
        assert_eq!(
            frame_index(ctx, "dl_ctor_alloc"),
            Some(0),
            "{mode}: {names:?}"
        );
        assert_eq!(
            frame_index(ctx, "dl_ctor_init"),
            Some(1),
            "{mode}: {names:?}"
        );
        let load = frame_index(ctx, "dl_ctor_load").unwrap_or_else(|| panic!("{mode}: {names:?}"));
        assert_eq!(names[load + 1], "main", "{mode}: {names:?}");
        assert!(
            names[2..load].iter().any(|f| f.contains("dlopen")),
            "{mode}: through dlopen: {names:?}"
        );
        assert!(
            ctx["stack"][0]["module"]
                .as_str()
                .unwrap_or("")
                .ends_with("/libdl_ctor_lib.so"),
            "{mode}: module of the constructor's frame: {}",
            ctx["stack"][0]
        );
        assert_eq!(u64_of(&r["unwind"]["errors"]), 0, "{mode}: {}", r["unwind"]);
    }
}

/// The program gives fd 2 to a data file of its own (closing stderr and
/// opening the file, or `dup2` over fd 2), or was started with fd 2
/// closed: the tracer's closing line must not land in that file. The
/// report is still written; with stderr kept, the line goes there.
#[test]
fn program_that_takes_over_fd_2() {
    let w = WorkDir::new("rel-stderr");
    let exe = compile("rel_stderr.c", &w.path, Opt::Debug, &[]);
    let data = "the program's own data\n";
    for (mode, closed_at_start) in [("reopen", false), ("dup2", false), ("reopen", true)] {
        let name = format!("{mode}-{closed_at_start}");
        let file = w.join(format!("{name}.txt"));
        let file_s = file.to_string_lossy().into_owned();
        let native = run_plain(&exe, &[mode, &file_s], &w.path);
        assert_eq!(native.code, 0, "{}", native.describe());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), data);
        let h5 = w.join(format!("{name}.h5"));
        let out = if closed_at_start {
            // `exec 2>&-`: the program starts without fd 2.
            let script = format!("exec 2>&- && exec {} {mode} {file_s}", exe.display());
            run_traced(Path::new("/bin/sh"), &["-c", &script], &w.path, &h5, &[])
        } else {
            run_traced(&exe, &[mode, &file_s], &w.path, &h5, &[])
        };
        assert_eq!(out.code, 0, "{name}: {}", out.describe());
        assert_eq!(out.stdout, native.stdout, "{name}: output unchanged");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            data,
            "{name}: nothing of the tracer's in the program's file"
        );
        assert_eq!(out.stderr, "", "{name}: fd 2 was never the test's");
        let r = report_json(&h5);
        let work: u64 = contexts_with(&r, "malloc", "rel_stderr_work")
            .iter()
            .map(|x| u64_of(&x["count"]))
            .sum();
        assert_eq!(work, 1000, "{name}: {}", summary(&r));
    }
    // Control: with fd 2 left alone the closing line goes there.
    let file = w.join("keep.txt");
    let h5 = w.join("keep.h5");
    let out = run_traced(&exe, &["keep", &file.to_string_lossy()], &w.path, &h5, &[]);
    assert_eq!(out.code, 0, "{}", out.describe());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), data);
    assert_only_closing_line(&out.stderr, &h5, "keep");
}

/// A program that never calls the allocator still gets its report: the
/// tracer starts when it is loaded, not only at the first allocation, so
/// the report has zero events and the process's whole duration, and
/// `wmhcct run` names it instead of saying none was written. (Such a
/// program used to end without a report.)
#[test]
fn program_that_never_allocates() {
    let w = WorkDir::new("rel-no-alloc");
    let exe = compile("no_alloc.c", &w.path, Opt::Release, &[]);
    let native = run_plain(&exe, &["300"], &w.path);
    assert_eq!(native.code, 3, "{}", native.describe());
    assert_eq!(native.stdout, "no allocation\n");
    let check = |h5: &Path, out: &Output, what: &str| {
        assert_eq!(out.code, 3, "{what}: {}", out.describe());
        assert_eq!(out.stdout, native.stdout, "{what}");
        assert_only_closing_line(&out.stderr, h5, what);
        let r = report_json(h5);
        assert_eq!(r["reason"], "exit", "{what}");
        assert_eq!(r["program"], exe.to_string_lossy().as_ref(), "{what}");
        for kind in ALLOCATORS {
            assert_eq!(total_count(&r, kind), 0, "{what}: {}", alloc_totals(&r));
        }
        assert!(contexts(&r).is_empty(), "{what}: {}", summary(&r));
        assert_eq!(u64_of(&r["heap"]["peak_bytes"]), 0, "{what}");
        let d = r["duration_s"].as_f64().unwrap();
        assert!(
            (0.29..60.0).contains(&d),
            "{what}: duration {d} s: the tracer started at the end, not at load"
        );
        let text = run_plain(bin(), &["report", &h5.to_string_lossy()], &w.path);
        assert_eq!(text.code, 0, "{what}: {}", text.describe());
        assert!(
            text.stdout.contains(", no thread made an event)"),
            "{what}: {}",
            text.stdout
        );
    };
    let h5 = w.join("preload.h5");
    let out = run_traced(&exe, &["300"], &w.path, &h5, &[]);
    check(&h5, &out, "LD_PRELOAD");
    let h5 = w.join("run.h5");
    let exe_s = exe.to_string_lossy().into_owned();
    let h5_s = h5.to_string_lossy().into_owned();
    let out = run_plain(
        bin(),
        &["run", "--out", &h5_s, "--", &exe_s, "300"],
        &w.path,
    );
    check(&h5, &out, "wmhcct run");
}

/// A process that ends without exit()'s handlers (`_exit`, `_Exit`,
/// `quick_exit`, `_exit` from a signal handler while another thread
/// allocates) still writes its report, with every call it made; its exit
/// status and output are unchanged. A vfork child's `_exit` (the child
/// shares the parent's memory) does nothing of the tracer's, and a forked
/// child's `_exit` writes no report, as before.
/// (These processes used to end without a report or a word.)
#[test]
fn processes_that_end_without_exit_handlers() {
    let w = WorkDir::new("rel-exit");
    let exe = compile("rel_exit.c", &w.path, Opt::Release, &["-pthread"]);
    for (mode, code, stdout) in [
        ("_exit", 3, "worked\n"),
        ("_Exit", 4, "worked\n"),
        ("quick", 5, "worked\n"),
        ("handler", 6, "worked\n"),
        ("vfork", 8, "worked\nchild: 9\n"),
        ("fork", 0, "worked\nchild: 7\n"),
    ] {
        let native = run_plain(&exe, &[mode], &w.path);
        assert_eq!(native.code, code, "{mode}: {}", native.describe());
        assert_eq!(native.stdout, stdout, "{mode}");
        let dir = w.join(mode);
        std::fs::create_dir_all(&dir).unwrap();
        let h5 = dir.join("r.h5");
        let out = run_traced(&exe, &[mode], &dir, &h5, &[]);
        assert_eq!(out.code, code, "{mode}: {}", out.describe());
        assert_eq!(out.stdout, stdout, "{mode}");
        let r = report_json(&h5);
        let reason = match mode {
            "fork" | "quick" => "exit",
            _ => "_exit",
        };
        assert_eq!(r["reason"], reason, "{mode}");
        let work = context_with(&r, "malloc", "rel_exit_work");
        assert_eq!(u64_of(&work["count"]), 100, "{mode}: {work}");
        let keep = context_with(&r, "malloc", "rel_exit_keep");
        assert_eq!(u64_of(&keep["count"]), 7, "{mode}: {keep}");
        assert_eq!(u64_of(&keep["leaked_bytes"]), 7000, "{mode}: {keep}");
        // Every malloc freed but the 7 kept (and stdout's buffer).
        assert_live_blocks_balance(&r, mode);
        assert_eq!(u64_of(&r["heap"]["unknown_frees"]), 0, "{mode}");
        if mode == "handler" {
            let spin = context_with(&r, "malloc", "rel_exit_spin");
            assert!(u64_of(&spin["count"]) > 0, "{spin}");
        }
        let mut reports: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".h5") || n.ends_with(".wmprof"))
            .collect();
        reports.sort();
        // One report: a vfork child's `_exit` does nothing of the tracer's,
        // and a forked child's leaves without one, as it leaves without
        // its parent's clean-up (`forkmt`: its exit() writes one).
        assert_eq!(reports, ["r.h5"], "{mode}: one report");
        assert!(contexts_with(&r, "malloc", "rel_exit_child").is_empty());
        let lines = tracer_lines(&out.stderr);
        assert_eq!(lines.len(), reports.len(), "{mode}: {}", out.stderr);
        assert!(
            lines
                .iter()
                .all(|l| l.starts_with("wmhcct: report written to ")),
            "{mode}: {}",
            out.stderr
        );
    }
}

/// A program that reaps every child in its SIGCHLD handler (a shell, a
/// server): the converter the tracer starts at exit is none of its
/// children, so the handler never sees it, and the tracer gets its status.
/// (The handler used to reap it: "could not run wmhcct (No child
/// processes)" for a report that was written, and a child the program
/// never started.)
#[test]
fn sigchld_handler_never_meets_the_converter() {
    let w = WorkDir::new("rel-sigchld");
    let exe = compile("rel_sigchld.c", &w.path, Opt::Debug, &[]);
    let native = run_plain(&exe, &[] as &[&str], &w.path);
    assert_eq!(native.code, 0, "{}", native.describe());
    assert_eq!(native.stdout, "own child reaped\n");
    for i in 0..5 {
        let h5 = w.join(format!("r{i}.h5"));
        let out = run_traced(&exe, &[] as &[&str], &w.path, &h5, &[]);
        assert_eq!(out.code, 0, "{}", out.describe());
        assert_eq!(out.stdout, native.stdout, "{}", out.describe());
        assert_only_closing_line(&out.stderr, &h5, "sigchld");
        let r = report_json(&h5);
        let work = context_with(&r, "malloc", "rel_sigchld_work");
        assert_eq!(u64_of(&work["count"]), 100, "{work}");
    }
}

/// A library registers fork handlers that allocate from its constructor,
/// before the tracer starts (`atfork_lib.c`). The tracer's own handlers
/// lock it around `fork`; registered after the library's, they held its
/// locks while the library's handlers allocated, and the process spun for
/// ever in `fork` (SIGTERM did not end it). The tracer now registers its
/// handlers before anyone else's, so every other handler runs with the
/// tracer unlocked, and is traced: 3 forks, each with one allocation in
/// the prepare and one in the parent handler, in the parent's report.
#[test]
fn fork_handlers_that_allocate_registered_before_the_tracer_started() {
    let w = WorkDir::new("rel-atfork");
    let exe = compile_linked("atfork_main.c", "atfork_lib.c", &w.path);
    let native = run_plain(&exe, &[] as &[&str], &w.path);
    assert_eq!(native.code, 0, "{}", native.describe());
    assert_eq!(native.stdout, "forked 3, 3 children exited 7\n");
    for placement in ["inline", "thread"] {
        let h5 = w.join(format!("{placement}.h5"));
        let out = run_traced_timeout(
            &exe,
            &[] as &[&str],
            &w.path,
            &h5,
            &[("WMHCCT_COLLECTOR", placement)],
            Duration::from_secs(60),
        );
        assert_eq!(out.code, 0, "{placement}: {}", out.describe());
        assert_eq!(out.stdout, native.stdout, "{placement}");
        let r = report_json(&h5);
        for (func, size) in [("atfork_prepare", 123), ("atfork_parent", 124)] {
            let c = context_with(&r, "malloc", func);
            assert_eq!(u64_of(&c["count"]), 3, "{placement} {func}: {c}");
            assert_eq!(u64_of(&c["bytes"]), 3 * size, "{placement} {func}: {c}");
        }
        assert!(
            contexts_with(&r, "malloc", "atfork_child").is_empty(),
            "the child handler runs in the children: {}",
            summary(&r)
        );
        // Each child's own report has its child handler's allocation.
        let children = child_reports(&w.path, placement);
        assert_eq!(children.len(), 3, "{placement}: {children:?}");
        for child in &children {
            let c = report_json(child);
            assert_eq!(
                u64_of(&context_with(&c, "malloc", "atfork_child")["count"]),
                1,
                "{}",
                summary(&c)
            );
        }
    }
}

/// The destructors of the libraries a program links run after the
/// tracer's (glibc finalizes a preloaded library first): the report is
/// written after them, from stdio's clean-up (`last_flush.rs`). Until
/// 2026-11-27 it was written before, and missed their calls: a library's
/// blocks freed in its destructor were reported live at the end, as
/// libgfortran's units were in every gfortran program's report.
#[test]
fn library_destructors_run_before_the_report() {
    let w = WorkDir::new("rel-dtor");
    let exe = compile_linked("dtor_main.c", "dtor_lib.c", &w.path);

    for placement in ["inline", "thread"] {
        let h5 = w.join(format!("{placement}.h5"));
        let out = run_traced(
            &exe,
            &[] as &[&str],
            &w.path,
            &h5,
            &[("WMHCCT_COLLECTOR", placement)],
        );
        assert_eq!(out.code, 0, "{}", out.describe());
        assert_eq!(out.stdout, "main done\n");
        assert_only_closing_line(&out.stderr, &h5, placement);
        let r = report_json(&h5);
        assert_eq!(r["reason"], "exit");
        let keep = context_with(&r, "malloc", "dtor_ctor_keep");
        assert_eq!(u64_of(&keep["count"]), 20, "{keep}");
        assert_eq!(
            u64_of(&keep["leaked_bytes"]),
            0,
            "freed in the destructor: {keep}"
        );
        let work = context_with(&r, "malloc", "dtor_work");
        assert_eq!(u64_of(&work["count"]), 30, "{placement}: {work}");
    }
    // A gfortran program: nothing libgfortran allocates is left live.
    let f = compile("pattern.f90", &w.path, Opt::Release, &[]);
    let h5 = w.join("fortran.h5");
    let out = run_traced(&f, &[] as &[&str], &w.path, &h5, &[]);
    assert_eq!(out.code, 0, "{}", out.describe());
    let r = report_json(&h5);
    let gfortran_live: Vec<&Value> = contexts(&r)
        .iter()
        .filter(|c| u64_of(&c["leaked_bytes"]) > 0)
        .filter(|c| {
            c["stack"].as_array().unwrap().iter().any(|f| {
                f["module"]
                    .as_str()
                    .is_some_and(|m| m.contains("libgfortran"))
            })
        })
        .collect();
    assert!(gfortran_live.is_empty(), "{gfortran_live:?}");
}

/// A destructor after the tracer's that flushes every stream
/// (`fflush(NULL)`, `fcloseall`) writes the report then, from the tracer's
/// stream: with stdout and stderr in one pipe, the program's buffered
/// stdout comes first, then the closing line, as at exit
/// (`exit_output.rs`); until 2026-11-27 the closing line came first. One
/// that calls `_exit` leaves stdout's buffer unwritten, as untraced, and
/// `_exit`'s hook writes the report.
#[test]
fn later_destructor_flushes_or_ends_the_process() {
    let w = WorkDir::new("rel-dtor-end");
    let exe = compile_linked("dtor_main.c", "dtor_lib.c", &w.path);
    for (end, code, stdout) in [
        ("fflush", 0, "main done\n"),
        ("fcloseall", 0, "main done\n"),
        ("_exit", 5, ""),
    ] {
        let plain = run_merged(&exe, &[end], &w.path, None, false);
        assert_eq!((plain.code, plain.stdout.as_str()), (code, stdout), "{end}");
        let h5 = w.join(format!("{end}.h5"));
        let traced = run_merged(&exe, &[end], &w.path, Some(&h5), false);
        assert_eq!(traced.code, code, "{end}: {}", traced.describe());
        assert_eq!(
            traced.stdout,
            format!("{stdout}wmhcct: report written to {}\n", h5.display()),
            "{end}"
        );
        let r = report_json(&h5);
        assert_eq!(r["reason"], "exit", "{end}");
        let keep = context_with(&r, "malloc", "dtor_ctor_keep");
        assert_eq!(u64_of(&keep["leaked_bytes"]), 0, "{end}: {keep}");
    }
}
