//! Faults around the tracer (issue 8): allocation failure (impossible
//! sizes, `ulimit -v` exhaustion), programs that bring their own allocator
//! (statically linked, or libjemalloc preloaded before or after us), and
//! report write errors (read-only directory, no such directory, a path
//! through a regular file, a full disk).
//!
//! In every case the program's output and exit code are those of the run
//! without the tracer, and the tracer says what happened in at most one
//! `wmhcct:` line per problem.

mod rel_common;

use std::path::Path;
use std::time::Duration;

use rel_common::*;
use wmhcct_e2e::*;

const JEMALLOC: &str = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";

#[test]
fn impossible_sizes_fail_exactly_as_without_the_tracer() {
    let w = WorkDir::new("rel-oom-huge");
    let exe = compile("rel_oom.c", &w.path, Opt::Debug, &[]);
    let native = run_plain(&exe, &["huge"], &w.path);
    assert_eq!(native.code, 0, "{}", native.describe());
    assert!(native
        .stdout
        .contains("malloc(SIZE_MAX/2): NULL errno ENOMEM"));
    let h5 = w.join("huge.h5");
    let out = run_traced(&exe, &["huge"], &w.path, &h5, &[]);
    assert_eq!(out.code, 0, "{}", out.describe());
    assert_eq!(
        out.stdout, native.stdout,
        "NULL/ENOMEM as without the tracer"
    );
    assert_clean_stderr(&out, &h5);
    let r = report_json(&h5);
    // Failed calls are counted (with 0 bytes).
    assert!(total_count(&r, "malloc") >= 2, "{}", alloc_totals(&r));
    assert!(total_count(&r, "calloc") >= 2, "{}", alloc_totals(&r));
    assert!(total_count(&r, "pvalloc") >= 1, "{}", alloc_totals(&r));
}

/// Under `ulimit -v` the program allocates until malloc returns NULL (1 MiB
/// blocks, then 64-byte blocks), frees everything and allocates again. The
/// tracer's own allocations then fail too: it continues from its emergency
/// reserve instead of aborting the program, and still writes the report.
#[test]
fn address_space_exhaustion_under_ulimit() {
    let t = "address_space_exhaustion_under_ulimit";
    let w = WorkDir::new("rel-oom-ulimit");
    let exe = compile("rel_oom.c", &w.path, Opt::Debug, &[]);
    for limit_kb in [300_000u64, 120_000] {
        let native = run_limited(&exe, &["exhaust"], &w.path, limit_kb, None);
        assert_eq!(native.code, 0, "{}", native.describe());
        let expected = "big blocks: ended with NULL, errno ENOMEM\n\
                        small blocks: ended with NULL, errno ENOMEM\n\
                        malloc(1 MiB) after freeing everything: non-NULL errno 0\n";
        assert_eq!(native.stdout, expected);
        let h5 = w.join(format!("limit{limit_kb}.h5"));
        let out = run_limited(&exe, &["exhaust"], &w.path, limit_kb, Some(&h5));
        assert_eq!(out.code, 0, "the program survives: {}", out.describe());
        assert_eq!(out.stdout, expected, "NULL/ENOMEM as without the tracer");
        assert_no_panic(&out.stderr, "traced run");
        let lines = tracer_lines(&out.stderr);
        assert!(
            lines.len() <= 2
                && lines
                    .iter()
                    .all(|l| l.contains("emergency reserve") || l.contains("report written")),
            "{}",
            out.stderr
        );
        let r = report_json(&h5);
        let big = context_with(&r, "malloc", "rel_big");
        let n_big = number_after(&out.stderr, "rel_oom:").unwrap_or(0);
        figure(
            t,
            format!(
                "ulimit -v {limit_kb} KiB: native {} big blocks, traced {n_big} (+ 1 NULL each); \
                 report: rel_big {} calls; tracer said: {:?}",
                number_after(&native.stderr, "rel_oom:").unwrap_or(0),
                big["count"],
                lines
            ),
        );
        // Every successful call in its context (the failed one is in the
        // totals, with 0 bytes).
        assert_eq!(u64_of(&big["count"]), n_big, "{big}");
        assert!(total_count(&r, "malloc") > n_big, "{}", alloc_totals(&r));
    }
}

/// The executable defines malloc & co. itself (they win over every shared
/// library, ours included): the program runs unchanged; nothing goes
/// through the tracer, which says so in one line at exit (no report).
#[test]
fn statically_linked_allocator() {
    let w = WorkDir::new("rel-ownalloc");
    let exe = compile("rel_ownalloc.c", &w.path, Opt::Debug, &[]);
    let native = run_plain(&exe, &[] as &[&str], &w.path);
    assert_eq!(native.code, 0, "{}", native.describe());
    let h5 = w.join("own.h5");
    let out = run_traced(&exe, &[] as &[&str], &w.path, &h5, &[]);
    assert_eq!(out.code, 0, "{}", out.describe());
    assert_eq!(out.stdout, native.stdout, "the program's allocator is used");
    let lines = tracer_lines(&out.stderr);
    assert_eq!(lines.len(), 1, "{}", out.stderr);
    assert!(
        lines[0].contains("not libwmhcct.so's") && lines[0].contains("not traced"),
        "{}",
        lines[0]
    );
    assert!(!h5.exists(), "no report: nothing was traced");
}

fn preload_pair(first: &str, second: &str) -> String {
    format!("{first} {second}")
}

/// libjemalloc preloaded after libwmhcct.so: the program's calls reach the
/// tracer, which serves them from glibc (jemalloc is bypassed for the
/// interposed functions, and `malloc_usable_size` is glibc's too, so blocks
/// are never mixed): output as without any preload. Preloaded before:
/// jemalloc serves everything, nothing is traced, the tracer says so, and
/// the program behaves exactly as with jemalloc alone (allocators.c, which
/// calls pvalloc — not in jemalloc — and frees the glibc block with
/// jemalloc's free, crashes with jemalloc alone, and so it does then too).
#[test]
fn jemalloc_preloaded_before_or_after() {
    let t = "jemalloc_preloaded_before_or_after";
    assert!(
        Path::new(JEMALLOC).is_file(),
        "{JEMALLOC} is missing (run scripts/setup.sh: libjemalloc2)"
    );
    let w = WorkDir::new("rel-jemalloc");
    let pattern = compile("pattern.c", &w.path, Opt::Debug, &[]);
    let allocs = compile("allocators.c", &w.path, Opt::Debug, &[]);
    let ours = lib().to_string_lossy().into_owned();
    for (exe, name) in [(&pattern, "pattern"), (&allocs, "allocators")] {
        let native = run_plain(exe, &[] as &[&str], &w.path);
        assert_eq!(native.code, 0, "{}", native.describe());

        // Ours first.
        let h5 = w.join(format!("{name}-first.h5"));
        let out = run_preloaded(
            exe,
            &[],
            &w.path,
            &preload_pair(&ours, JEMALLOC),
            &h5,
            &[],
            TIMEOUT,
        );
        assert_eq!(out.code, 0, "{name}, wmhcct first: {}", out.describe());
        assert_eq!(out.stdout, native.stdout, "{name}, wmhcct first");
        assert_clean_stderr(&out, &h5);
        let r = report_json(&h5);
        assert!(total_count(&r, "malloc") > 0, "{}", alloc_totals(&r));
        figure(
            t,
            format!("{name}: wmhcct first: traced, {}", alloc_totals(&r)),
        );

        // jemalloc first: compared with jemalloc alone.
        let alone = run_preloaded(exe, &[], &w.path, JEMALLOC, &w.join("x.h5"), &[], TIMEOUT);
        let h5 = w.join(format!("{name}-second.h5"));
        let out = run_preloaded(
            exe,
            &[],
            &w.path,
            &preload_pair(JEMALLOC, &ours),
            &h5,
            &[],
            TIMEOUT,
        );
        assert_eq!(
            out.code,
            alone.code,
            "{name}, jemalloc first, as with jemalloc alone: {}",
            out.describe()
        );
        assert_eq!(out.stdout, alone.stdout, "{name}, jemalloc first");
        let lines = tracer_lines(&out.stderr);
        if out.code == 0 {
            assert!(
                lines.iter().any(|l| l.contains("not libwmhcct.so's")),
                "{}",
                out.stderr
            );
        }
        figure(
            t,
            format!(
                "{name}: jemalloc first: exit {} (jemalloc alone: {}), not traced, report {}; tracer said {lines:?}",
                out.code,
                alone.code,
                if h5.exists() { "written" } else { "not written" }
            ),
        );
    }
}

/// Run exitcode.c (prints "exiting with 7", exits 7) with the report at
/// `out`: exit code and stdout unchanged, exactly one `wmhcct:` line, which
/// must contain every string of `says`.
fn write_error(t: &str, w: &WorkDir, out_path: &Path, says: &[&str]) -> Output {
    let exe = compile("exitcode.c", &w.path, Opt::Debug, &[]);
    let out = run_traced_timeout(
        &exe,
        &[] as &[&str],
        &w.path,
        out_path,
        &[],
        Duration::from_secs(60),
    );
    assert_eq!(out.code, 7, "{}", out.describe());
    assert_eq!(out.stdout, "exiting with 7\n");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one line: {}", out.stderr);
    assert!(lines[0].starts_with("wmhcct: "), "{}", lines[0]);
    for s in says {
        assert!(lines[0].contains(s), "{s:?} in {}", lines[0]);
    }
    assert_no_panic(&out.stderr, t);
    figure(t, format!("{} -> {}", out_path.display(), lines[0]));
    out
}

#[test]
fn report_into_a_missing_directory() {
    let w = WorkDir::new("rel-werr-missing");
    let p = w.join("no/such/dir/r.h5");
    write_error(
        "report_into_a_missing_directory",
        &w,
        &p,
        &["cannot write the profile", "No such file"],
    );
}

#[test]
fn report_path_through_a_regular_file() {
    let w = WorkDir::new("rel-werr-notdir");
    std::fs::write(w.join("file"), "x").unwrap();
    let p = w.join("file/r.h5");
    write_error(
        "report_path_through_a_regular_file",
        &w,
        &p,
        &["cannot write the profile", "Not a directory"],
    );
}

#[test]
fn report_into_a_read_only_file_system() {
    let t = "report_into_a_read_only_file_system";
    let w = WorkDir::new("rel-werr-ro");
    let Some(fs) = Tmpfs::mount(&w.path, "ro", "size=64k,ro") else {
        // Not root: a read-only directory (root would ignore the mode).
        figure(t, "cannot mount a tmpfs here: read-only directory instead");
        let d = w.join("ro");
        std::fs::create_dir_all(&d).unwrap();
        let _ = Command::new("chmod").arg("555").arg(&d).status();
        write_error(t, &w, &d.join("r.h5"), &["cannot write the profile"]);
        return;
    };
    write_error(
        t,
        &w,
        &fs.path.join("r.h5"),
        &["cannot write the profile", "Read-only file system"],
    );
    assert_eq!(std::fs::read_dir(&fs.path).unwrap().count(), 0);
}

use std::process::Command;

/// A full disk (a small tmpfs, filled): no space for the profile at all,
/// then space for the profile but not for the report. Nothing truncated is
/// left behind; when the profile fits it is kept with the command that
/// converts it.
#[test]
fn report_onto_a_full_disk() {
    let t = "report_onto_a_full_disk";
    let w = WorkDir::new("rel-werr-full");
    let Some(fs) = Tmpfs::mount(&w.path, "full", "size=64k") else {
        figure(t, "cannot mount a tmpfs here (not root): skipped");
        return;
    };
    fs.fill_leaving(0);
    let p = fs.path.join("r.h5");
    write_error(
        t,
        &w,
        &p,
        &["cannot write the profile", "No space left on device"],
    );
    assert!(
        !fs.path.join("r.h5.wmprof").exists(),
        "no truncated profile left behind"
    );
    assert!(!p.exists());

    // Room for the profile (about 2 KiB) but not for the HDF5 report.
    fs.fill_leaving(4);
    let out = write_error(t, &w, &p, &[]);
    let line = out.stderr.lines().next().unwrap();
    if line.contains("report written") {
        // HDF5 files are sparse: the report may still fit in 4 KiB.
        figure(t, "the report fitted in the space left");
        report_json(&p);
    } else {
        assert!(
            line.contains("could not convert the profile")
                && line.contains("convert it with: wmhcct convert"),
            "{line}"
        );
        assert!(fs.path.join("r.h5.wmprof").is_file(), "profile kept");
    }
}
