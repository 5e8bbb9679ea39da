//! The tracer keeps its own allocations out of the program's heap
//! (`interpose/src/own_heap.rs`): glibc gives the program the same blocks at
//! the same offsets, in the same order, as without the tracer, even while
//! the tracer's tables grow (tests/programs/heap_layout.c, 10^5 blocks from
//! ~10^4 calling contexts), with the collector inline and on its thread,
//! and with every unwind mode, in the main thread and in a new one; in an
//! MPI job, the job's merge at
//! `MPI_Finalize` too (tests/programs/mpi_finalize_heap.c).

mod mpi_common;

use wmhcct_e2e::*;

const EVENTS: u64 = 100_000;

#[test]
fn the_program_gets_the_blocks_it_gets_untraced() {
    layout_unchanged(
        &[],
        &[
            ("inline", "second"),
            ("thread", "second"),
            ("thread", "full"),
            ("inline", "none"),
        ],
    );
}

/// The same work in a new thread, in its own arena: the tracer's first
/// event on the thread asks glibc for the thread's stack
/// (`pthread_getattr_np`), whose allocations (the thread's CPU set and the
/// attribute's extension, freed before it returns) are served from the
/// sealed calls' arena (`interpose/src/sealed.rs`). They used to be made in
/// the thread's arena, and the program's next blocks of their size were
/// then taken from them: another layout.
#[test]
fn a_new_thread_gets_the_blocks_it_gets_untraced() {
    layout_unchanged(&["thread"], &[("inline", "second"), ("thread", "second")]);
}

/// The one known change a new thread makes to the creating thread's heap:
/// glibc's `pthread_create` callocs the new thread's TLS vector there, one
/// 16-byte entry per loaded object with thread-local storage, so with the
/// tracer's library the vector is 16 bytes longer (as with any preloaded
/// library with TLS). Blocks placed after it lie 16 bytes further on, no
/// more: this pins the exception the README lists.
#[test]
fn a_new_threads_tls_vector_is_one_entry_longer() {
    let w = WorkDir::new("own-heap-tls");
    let exe = compile("thread_layout.c", &w.path, Opt::Release, &["-pthread"]);
    let offsets =
        |s: &str| -> Vec<i64> { s.split_whitespace().map(|v| v.parse().unwrap()).collect() };
    let plain = run_plain(&exe, &[] as &[&str], &w.path);
    assert_eq!(plain.code, 0, "{}", plain.describe());
    for collector in ["inline", "thread"] {
        let h5 = w.join(format!("tls-{collector}.h5"));
        let traced = run_traced(
            &exe,
            &[] as &[&str],
            &w.path,
            &h5,
            &[("WMHCCT_COLLECTOR", collector)],
        );
        assert_eq!(traced.code, 0, "{}", traced.describe());
        let shifts: Vec<i64> = offsets(&traced.stdout)
            .iter()
            .zip(offsets(&plain.stdout))
            .map(|(t, p)| t - p)
            .collect();
        assert_eq!(shifts.len(), 12, "{}", traced.stdout);
        assert!(
            shifts.iter().all(|&d| d == 0 || d == 16),
            "{collector}: {shifts:?} ({} vs {})",
            traced.stdout,
            plain.stdout
        );
    }
}

fn layout_unchanged(extra: &[&str], modes: &[(&str, &str)]) {
    let w = WorkDir::new(&format!("own-heap{}", extra.concat()));
    let exe = compile("heap_layout.c", &w.path, Opt::Release, &[]);
    let events = EVENTS.to_string();
    let args: Vec<&str> = [events.as_str()].iter().chain(extra).copied().collect();
    let plain = run_plain(&exe, &args, &w.path);
    assert_eq!(plain.code, 0, "{}", plain.describe());
    assert!(
        plain.stdout.contains(" blocks, layout "),
        "{}",
        plain.stdout
    );
    for &(collector, unwind) in modes {
        let h5 = w.join(format!("layout-{collector}-{unwind}.h5"));
        let traced = run_traced(
            &exe,
            &args,
            &w.path,
            &h5,
            &[("WMHCCT_COLLECTOR", collector), ("WMHCCT_UNWIND", unwind)],
        );
        assert_eq!(traced.code, 0, "{}", traced.describe());
        assert_clean_stderr(&traced, &h5);
        assert_eq!(
            traced.stdout, plain.stdout,
            "WMHCCT_COLLECTOR={collector} WMHCCT_UNWIND={unwind} {extra:?}: the program's \
             heap changed under the tracer"
        );
        // Traced, and every call counted: one realloc per seven blocks, one
        // malloc per block and the first (stdio's buffer, and in a thread
        // glibc's own blocks for it, may add some).
        let r = report_json(&h5);
        assert_eq!(
            total_count(&r, "realloc"),
            EVENTS.div_ceil(7),
            "{}",
            alloc_totals(&r)
        );
        let mallocs = total_count(&r, "malloc");
        assert!(
            (EVENTS + 1..=EVENTS + 4).contains(&mallocs),
            "{mallocs} mallocs: {}",
            alloc_totals(&r)
        );
        if unwind != "none" {
            assert!(contexts(&r).len() > 100, "{}", summary(&r));
        }
    }
}

/// In an MPI job the merge at `MPI_Finalize` (the MPI side library, on
/// rank 0) allocates on the tracer's own heap too: during `MPI_Finalize`
/// the program's allocator is asked for what the MPI library itself asks
/// for untraced, not for the merge's ~390 MB (2 ranks of ~50 000 contexts
/// each; `count_alloc.c`, preloaded after the tracer, counts the bytes).
#[test]
fn the_job_merge_stays_off_the_programs_heap() {
    let w = WorkDir::new("own-heap-mpi");
    let exe = mpi_common::mpi_compile("mpicc", "mpi_finalize_heap.c", &w.path, &[]);
    let counter = w.join("count_alloc.so");
    let cc = run_cmd(
        command("cc", &["-O2", "-shared", "-fPIC", "-o"], &w.path)
            .arg(&counter)
            .arg(root().join("tests/programs/count_alloc.c")),
        TIMEOUT,
    );
    assert_eq!(cc.code, 0, "{}", cc.describe());
    let counted = |out: &Output| -> u64 {
        out.stderr
            .lines()
            .find_map(|l| l.strip_prefix("MPI_Finalize allocated "))
            .and_then(|l| l.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no count: {}", out.describe()))
    };
    let counter_s = counter.display().to_string();
    // The tracer's launch with LD_PRELOAD replaced: the counter alone.
    let plain = mpi_common::launch(
        mpi_common::Launcher::OpenMpi,
        2,
        &exe,
        &[],
        &w.path,
        Some(&w.join("unused.h5")),
        &[("LD_PRELOAD", &counter_s)],
    );
    assert_eq!(plain.code, 0, "{}", plain.describe());
    assert!(
        !w.join("unused.h5").exists(),
        "untraced: {}",
        plain.describe()
    );
    let h5 = w.join("job.h5");
    let both = format!("{} {counter_s}", lib().display());
    let traced = mpi_common::launch(
        mpi_common::Launcher::OpenMpi,
        2,
        &exe,
        &[],
        &w.path,
        Some(&h5),
        &[("LD_PRELOAD", &both)],
    );
    assert_eq!(traced.code, 0, "{}", traced.describe());
    let (untraced_bytes, traced_bytes) = (counted(&plain), counted(&traced));
    assert!(
        traced_bytes <= untraced_bytes + (64 << 10),
        "MPI_Finalize asked the program's allocator for {traced_bytes} bytes traced, \
         {untraced_bytes} untraced"
    );
    // The merge itself happened: both ranks in one report, with their
    // 2 × 200 000 calls (and MPI's own since MPI_Init).
    let r = report_json(&h5);
    assert_eq!(u64_of(&r["ranks"]), 2, "{}", summary(&r));
    let mallocs = total_count(&r, "malloc");
    assert!(mallocs >= 400_000, "{mallocs}: {}", alloc_totals(&r));
    eprintln!(
        "[own_heap] MPI_Finalize asked the program's allocator for {traced_bytes} bytes \
         traced, {untraced_bytes} untraced"
    );
}
