//! Where a report goes when `WMHCCT_OUT` (or `wmhcct convert -o`, `merge
//! -o`, `export -o`, `run --out`) names something other than a plain file
//! path.
//!
//! A report used to be written under a temporary name beside its path and
//! renamed over it, whatever the path was: `WMHCCT_OUT=/dev/null` run as
//! root replaced the device with a regular file (every program on the
//! machine then wrote into that file), a FIFO or `/dev/stdout` was replaced
//! the same way, a link to a report was replaced by the report, and a
//! directory made the run end with "Is a directory" and no report. Now:
//! a device, a FIFO or a process's descriptor is written into and stays
//! what it was; a link is written through; a directory takes the reports
//! under their default names; a socket or block device is refused with one
//! line naming the variable. A command's output that is one of its inputs
//! is refused (the report replaced the profile, and `--remove-input` then
//! deleted both).

mod mpi_common;
mod rel_common;

use std::os::unix::fs::FileTypeExt as _;
use std::path::{Path, PathBuf};

use mpi_common::*;
use rel_common::*;
use wmhcct_e2e::*;

/// The pattern program's exact totals (tests/programs/pattern.c).
fn assert_pattern_totals(r: &serde_json::Value, what: &str) {
    assert_eq!(total_count(r, "malloc"), 1100, "{what}");
    assert_eq!(total_count(r, "calloc"), 10, "{what}");
    assert_eq!(total_count(r, "free"), 1100, "{what}");
}

/// A character device that behaves as `/dev/null`, made in `dir` (as root,
/// as in CI), so that a regression cannot replace the machine's own; where
/// device nodes cannot be made, `/dev/null` itself, which a non-root
/// process cannot replace anyway.
fn null_device(dir: &Path) -> PathBuf {
    let dev = dir.join("null");
    let made = command("mknod", &["-m", "666", "null", "c", "1", "3"], dir)
        .status()
        .is_ok_and(|s| s.success());
    if made {
        dev
    } else {
        PathBuf::from("/dev/null")
    }
}

fn is_char_device(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.file_type().is_char_device())
}

fn mkfifo(p: &Path) {
    let ok = command("mkfifo", &[p], Path::new("/"))
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "mkfifo {}", p.display());
}

/// Read the FIFO `p` whole on a thread (it blocks until a writer opens it).
fn read_fifo(p: &Path) -> std::thread::JoinHandle<Vec<u8>> {
    let p = p.to_path_buf();
    std::thread::spawn(move || std::fs::read(p).expect("read the FIFO"))
}

/// The names in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Run `exe args` in `dir` traced with `WMHCCT_OUT=/proc/self/fd/1` (the
/// program's stdout, where `/dev/stdout` leads; not `/dev/stdout` itself,
/// which a regression would replace for the whole machine), its stdout
/// redirected to the file `out`: the program exited 0; the file's bytes and
/// stderr.
fn traced_into_stdout_file(
    exe: impl AsRef<std::ffi::OsStr>,
    args: &[&str],
    dir: &Path,
    out: &Path,
) -> (Vec<u8>, String) {
    let mut c = command(exe, args, dir);
    c.env("LD_PRELOAD", lib())
        .env("WMHCCT_OUT", "/proc/self/fd/1")
        .stdout(std::fs::File::create(out).unwrap())
        .stderr(std::process::Stdio::piped());
    let done = c.output().unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr).into_owned();
    assert_eq!(done.status.code(), Some(0), "{stderr}");
    (std::fs::read(out).unwrap(), stderr)
}

#[test]
fn a_device_a_fifo_or_stdout_is_written_into_and_stays_what_it_was() {
    let w = WorkDir::new("targets-streams");
    let exe = compile("pattern.c", &w.path, Opt::Debug, &[]);
    let plain = run_plain(&exe, &[] as &[&str], &w.path);
    let tmp = w.join("tmp");
    let runs = w.join("runs");
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::create_dir_all(&runs).unwrap();
    let tmp_env = tmp.to_string_lossy().into_owned();

    // A null device: the report goes into it; nothing is left anywhere.
    let dev = null_device(&runs);
    let out = run_traced(&exe, &[] as &[&str], &runs, &dev, &[("TMPDIR", &tmp_env)]);
    let what = format!("WMHCCT_OUT={}: {}", dev.display(), out.describe());
    assert_eq!((out.code, &out.stdout), (0, &plain.stdout), "{what}");
    assert_eq!(
        tracer_lines(&out.stderr),
        [format!("wmhcct: report written to {}", dev.display())],
        "{what}"
    );
    assert!(is_char_device(&dev), "still a device: {what}");
    let left: Vec<String> = names_in(&runs)
        .into_iter()
        .filter(|n| n != "null")
        .collect();
    assert!(left.is_empty(), "nothing beside it: {left:?}; {what}");
    assert!(
        names_in(&tmp).is_empty(),
        "no profile left in TMPDIR: {what}"
    );

    // A FIFO: the reader gets the whole report; the FIFO stays a FIFO.
    let fifo = runs.join("report.fifo");
    mkfifo(&fifo);
    let reader = read_fifo(&fifo);
    let out = run_traced(&exe, &[] as &[&str], &runs, &fifo, &[]);
    let what = format!("WMHCCT_OUT=FIFO: {}", out.describe());
    assert_eq!((out.code, &out.stdout), (0, &plain.stdout), "{what}");
    let got = w.join("from-fifo.h5");
    std::fs::write(&got, reader.join().unwrap()).unwrap();
    assert_pattern_totals(&report_json(&got), &what);
    assert!(
        std::fs::metadata(&fifo).unwrap().file_type().is_fifo(),
        "{what}"
    );
    let left: Vec<String> = names_in(&runs)
        .into_iter()
        .filter(|n| n != "null" && n != "report.fifo")
        .collect();
    assert!(left.is_empty(), "{left:?}");

    // The program's stdout redirected to a file: the report follows the
    // program's own output (appended: nothing it wrote is overwritten), and
    // the closing line names the path as given.
    let (bytes, stderr) = traced_into_stdout_file(&exe, &[], &runs, &w.join("stdout.bin"));
    assert_eq!(
        tracer_lines(&stderr),
        ["wmhcct: report written to /proc/self/fd/1"],
        "{stderr}"
    );
    let own = plain.stdout.as_bytes();
    assert!(bytes.starts_with(own), "the program's output first");
    assert!(
        bytes[own.len()..].starts_with(b"\x89HDF"),
        "then the report"
    );
    let rest = w.join("from-stdout.h5");
    std::fs::write(&rest, &bytes[own.len()..]).unwrap();
    assert_pattern_totals(&report_json(&rest), "WMHCCT_OUT=/proc/self/fd/1");
}

#[test]
fn a_directory_takes_default_names_a_link_is_written_through_a_socket_is_refused() {
    let w = WorkDir::new("targets-paths");
    let exe = compile("pattern.c", &w.path, Opt::Debug, &[]);
    let plain = run_plain(&exe, &[] as &[&str], &w.path);
    let run = |out: &str| {
        let mut c = command(&exe, &[] as &[&str], &w.path);
        c.env("LD_PRELOAD", lib()).env("WMHCCT_OUT", out);
        let o = run_cmd(&mut c, TIMEOUT);
        assert_eq!(
            (o.code, &o.stdout),
            (0, &plain.stdout),
            "{out}: {}",
            o.describe()
        );
        o
    };
    // An existing directory, and one named with a trailing slash that is
    // made: each holds one report, wmhcct-<pid>.h5, named by the line.
    std::fs::create_dir_all(w.join("runs")).unwrap();
    for (out, dir) in [("runs", "runs"), ("later/", "later")] {
        let o = run(out);
        let reports = files_named(&w.join(dir), "wmhcct-", ".h5");
        assert_eq!(
            reports.len(),
            1,
            "{out}: {:?}; {}",
            names_in(&w.join(dir)),
            o.describe()
        );
        assert_eq!(
            tracer_lines(&o.stderr),
            [format!(
                "wmhcct: report written to {}",
                reports[0].display()
            )],
            "{out}"
        );
        assert_pattern_totals(&report_json(&reports[0]), out);
    }
    // A report path in directories not there yet: they are made, as the
    // spill directory beside the report is (until 2026-11-27 the report was
    // lost: "cannot write the profile …: No such file or directory").
    let o = run("new/deeper/r.h5");
    assert_pattern_totals(&report_json(&w.join("new/deeper/r.h5")), "new/deeper");
    assert_clean_stderr(&o, &w.join("new/deeper/r.h5"));
    // Not through `..` (a typo's directory, left empty), nor for a
    // descendant, which reads a relative path from its own directory: a
    // shell that starts the program in `sub` gets `rel/`, the program no
    // `sub/rel/` (it says it cannot write there).
    let o = run("typo/../up.h5");
    assert!(!w.join("typo").exists(), "{}", o.describe());
    std::fs::create_dir_all(w.join("sub")).unwrap();
    let mut c = command(
        "sh",
        &["-c", &format!("cd sub && {}; true", exe.display())],
        &w.path,
    );
    c.env("LD_PRELOAD", lib()).env("WMHCCT_OUT", "rel/r.h5");
    let o = run_cmd(&mut c, TIMEOUT);
    assert_eq!(o.code, 0, "{}", o.describe());
    assert!(w.join("rel/r.h5").is_file(), "{}", o.describe());
    assert!(!w.join("sub/rel").exists(), "{}", o.describe());
    // A link to a report (relative, to a file not there yet): the link
    // stays and its target gets the report.
    std::os::unix::fs::symlink("runs/kept.h5", w.join("latest.h5")).unwrap();
    let o = run("latest.h5");
    assert!(std::fs::symlink_metadata(w.join("latest.h5"))
        .unwrap()
        .is_symlink());
    assert_pattern_totals(&report_json(&w.join("runs/kept.h5")), "link");
    assert_clean_stderr(&o, &w.join("runs/kept.h5"));
    // A socket: one line naming the variable, and the default report.
    let sock = w.join("s.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let o = run(&sock.to_string_lossy());
    let lines = tracer_lines(&o.stderr);
    assert_eq!(lines.len(), 2, "{}", o.describe());
    assert!(
        lines[0].starts_with(&format!(
            "wmhcct: WMHCCT_OUT=\"{}\" is a socket: expected",
            sock.display()
        )),
        "{}",
        lines[0]
    );
    assert!(lines[0].ends_with("using the default"), "{}", lines[0]);
    let defaults = files_named(&w.path, "wmhcct-", ".h5");
    assert_eq!(defaults.len(), 1, "{}", o.describe());
    assert!(
        lines[1].contains(&*defaults[0].to_string_lossy()),
        "{}",
        lines[1]
    );
}

#[test]
fn the_commands_write_into_streams_and_through_links_and_refuse_directories() {
    let w = WorkDir::new("targets-cli");
    let prof = real_profile(&w);
    let p = prof.to_string_lossy().into_owned();
    let dev = null_device(&w.path);
    let d = dev.to_string_lossy().into_owned();

    let ok = |args: &[&str]| {
        let o = run_plain(bin(), args, &w.path);
        assert_eq!(o.code, 0, "wmhcct {args:?}: {}", o.describe());
        assert!(o.stderr.is_empty(), "wmhcct {args:?}: {}", o.describe());
        o
    };
    // Into the device, which stays one; nothing is left beside it.
    let before = names_in(&w.path);
    ok(&["convert", &p, "-o", &d]);
    assert!(is_char_device(&dev));
    assert_eq!(names_in(&w.path), before);

    // Through a link: the link stays.
    std::os::unix::fs::symlink("real.h5", w.join("link.h5")).unwrap();
    ok(&["convert", &p, "-o", "link.h5"]);
    assert!(std::fs::symlink_metadata(w.join("link.h5"))
        .unwrap()
        .is_symlink());
    assert_pattern_totals(&report_json(&w.join("real.h5")), "convert -o link");

    // `-o -`: the report on standard output.
    let o = run_cmd(
        command(
            "bash",
            &["-c", &format!("\"$W\" convert '{p}' -o - > piped.h5")],
            &w.path,
        )
        .env("W", bin()),
        TIMEOUT,
    );
    assert_eq!(o.code, 0, "{}", o.describe());
    assert_pattern_totals(&report_json(&w.join("piped.h5")), "convert -o -");

    // `-o -` at a terminal: refused rather than written there (a pty).
    let o = wmhcct_at_terminal(&w.path, &["convert", &p, "-o", "-"], &[]);
    assert_eq!(o.code, 1, "{}", o.describe());
    assert!(
        o.stdout.contains("standard output is a terminal"),
        "{}",
        o.describe()
    );
    assert!(
        !o.stdout.contains("HDF"),
        "nothing binary on the terminal: {}",
        o.describe()
    );

    // merge into a FIFO.
    let fifo = w.join("job.fifo");
    mkfifo(&fifo);
    let reader = read_fifo(&fifo);
    let o = run_plain(
        bin(),
        &["merge", &p, "-o", &fifo.to_string_lossy()],
        &w.path,
    );
    assert_eq!(o.code, 0, "{}", o.describe());
    assert!(
        o.stderr.starts_with("wmhcct: merged 1 profile"),
        "{}",
        o.describe()
    );
    std::fs::write(w.join("merged.h5"), reader.join().unwrap()).unwrap();
    assert_pattern_totals(&report_json(&w.join("merged.h5")), "merge -o FIFO");

    // export -o - prints (it used to write a file named "-").
    let o = ok(&["export", "real.h5", "--format", "folded", "-o", "-"]);
    assert!(o.stdout.contains("leaf_a"), "{}", o.describe());
    assert!(!w.join("-").exists());
    ok(&["export", "real.h5", "--format", "folded", "-o", &d]);
    assert!(is_char_device(&dev));

    // A directory or a socket: one line, exit 1, nothing replaced.
    let sock = w.join("s.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    for (out, says) in [
        (w.path.clone(), "is a directory"),
        (sock.clone(), "is a socket"),
    ] {
        let o = run_plain(
            bin(),
            &["convert", &p, "-o", &out.to_string_lossy()],
            &w.path,
        );
        let what = format!("convert -o {}: {}", out.display(), o.describe());
        assert_eq!(o.code, 1, "{what}");
        let lines: Vec<&str> = o.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{what}");
        assert!(
            lines[0].starts_with("wmhcct: error: ") && lines[0].contains(says),
            "{what}"
        );
        assert_no_panic(&o.stderr, &what);
    }
    assert!(std::fs::symlink_metadata(&sock)
        .unwrap()
        .file_type()
        .is_socket());

    // The output is one of the inputs (by another name): refused, the
    // profile intact (the report used to replace it, and --remove-input
    // then deleted the report too).
    let bytes = std::fs::read(&prof).unwrap();
    std::os::unix::fs::symlink(&prof, w.join("alias.h5")).unwrap();
    for args in [
        ["convert", &p, "-o", &p, "--remove-input"],
        ["merge", &p, "-o", "alias.h5", "--remove-input"],
    ] {
        let o = run_plain(bin(), &args, &w.path);
        let what = format!("wmhcct {args:?}: {}", o.describe());
        assert_eq!(o.code, 1, "{what}");
        assert_eq!(o.stderr.lines().count(), 1, "{what}");
        assert!(o.stderr.contains("is also an input"), "{what}");
        assert_eq!(std::fs::read(&prof).unwrap(), bytes, "{what}");
    }

    // run --out a socket: refused before the command runs.
    let o = run_plain(
        bin(),
        &[
            "run",
            "--out",
            &sock.to_string_lossy(),
            "--",
            "touch",
            "ran",
        ],
        &w.path,
    );
    assert_eq!(o.code, 1, "{}", o.describe());
    assert!(o.stderr.contains("is a socket"), "{}", o.describe());
    assert!(!w.join("ran").exists(), "the command did not run");
}

#[test]
fn an_mpi_jobs_report_goes_into_a_fifo() {
    let w = WorkDir::new("targets-mpi");
    let exe = mpi_compile("mpicc", "mpi_pattern.c", &w.path, &[]);
    let fifo = w.join("job.fifo");
    mkfifo(&fifo);
    let reader = read_fifo(&fifo);
    let out = launch(
        Launcher::OpenMpi,
        PATTERN_RANKS as u32,
        &exe,
        &[],
        &w.path,
        Some(&fifo),
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.describe());
    assert_eq!(
        tracer_lines(&out.stderr),
        [format!("wmhcct: report written to {}", fifo.display())],
        "{}",
        out.describe()
    );
    let got = w.join("job.h5");
    std::fs::write(&got, reader.join().unwrap()).unwrap();
    check_pattern(&report_json(&got), "malloc", 64, 256);
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    let spills: Vec<String> = names_in(&w.path)
        .into_iter()
        .filter(|n| n.ends_with(".spill") || n.ends_with(".wmprof"))
        .collect();
    assert!(spills.is_empty(), "{spills:?}");
}

/// A stream other than a null device is the traced program's alone: the
/// programs it starts write their reports as `wmhcct-<pid>.h5` in their
/// working directory, as without `WMHCCT_OUT`, and the closing line says
/// so. They used to write into the stream too: a FIFO's reader got the
/// report of whichever process ended first (here an `ls`), and the next
/// writer waited for a reader that never came (until the conversion's time
/// limit); under `WMHCCT_OUT=/dev/stdout` a child whose output the program
/// had redirected into a file (`python3 … > list.txt`) appended its report
/// to that file.
#[test]
fn a_stream_is_the_traced_programs_alone() {
    let w = WorkDir::new("targets-stream-children");
    let script = "ls / > list.txt; ls / > /dev/null; echo done";
    let listing = run_cmd(&mut command("ls", &["/"], &w.path), TIMEOUT).stdout;
    let reports = |dir: &Path| -> Vec<String> {
        names_in(dir)
            .into_iter()
            .filter(|n| n.starts_with("wmhcct-") && n.ends_with(".h5"))
            .collect()
    };

    // A FIFO: its reader gets the shell's report, at once.
    let runs = w.join("fifo");
    std::fs::create_dir_all(&runs).unwrap();
    let fifo = runs.join("report.fifo");
    mkfifo(&fifo);
    let reader = read_fifo(&fifo);
    let env = [("WMHCCT_CONVERT_TIMEOUT", "20")];
    let out = run_traced("bash", &["-c", script], &runs, &fifo, &env);
    let what = format!("WMHCCT_OUT=FIFO: {}", out.describe());
    assert_eq!((out.code, out.stdout.as_str()), (0, "done\n"), "{what}");
    assert!(out.elapsed.as_secs() < 15, "no writer waits: {what}");
    // Should nobody have written into the FIFO, its reader would wait for
    // ever: open it for writing once, without waiting (O_NONBLOCK: fails
    // when the reader has gone), so the test fails instead of hanging.
    if !reader.is_finished() {
        use std::os::unix::fs::OpenOptionsExt as _;
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(0o4000)
            .open(&fifo);
    }
    let got = w.join("from-fifo.h5");
    std::fs::write(&got, reader.join().unwrap()).unwrap();
    let r = report_json(&got);
    assert!(
        r["program"].as_str().is_some_and(|p| p.ends_with("bash")),
        "the traced program's report: {} ({what})",
        r["program"]
    );
    let children = reports(&runs);
    assert_eq!(children.len(), 2, "{children:?}: {what}");
    for c in &children {
        let r = report_json(&runs.join(c));
        assert!(
            r["program"].as_str().is_some_and(|p| p.ends_with("ls")),
            "{c}: {}",
            r["program"]
        );
    }
    assert_eq!(
        tracer_lines(&out.stderr),
        [format!(
            "wmhcct: report written to {}; 2 processes it started wrote their own as {}",
            fifo.display(),
            runs.join("wmhcct-<pid>.h5").display()
        )],
        "{what}"
    );
    assert_eq!(
        std::fs::read_to_string(runs.join("list.txt")).unwrap(),
        listing
    );

    // The program's stdout, a file: the shell's output then its report;
    // list.txt holds the child's output and nothing else. (The child is a
    // program that leaves its stdout open at exit, as most do: `ls` closes
    // it, and its report then went into whatever the tracer opened next as
    // descriptor 1, its own profile, and was lost.)
    let runs = w.join("stdout");
    std::fs::create_dir_all(&runs).unwrap();
    let script = "/usr/bin/python3 -c 'print(1)' > list.txt; ls / > /dev/null; echo done";
    let (bytes, stderr) =
        traced_into_stdout_file("bash", &["-c", script], &runs, &w.join("stdout.bin"));
    let what = format!("WMHCCT_OUT=/proc/self/fd/1: {stderr}");
    let list = std::fs::read(runs.join("list.txt")).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&list),
        "1\n",
        "the child's output alone, no report appended: {what}"
    );
    assert!(bytes.starts_with(b"done\n"), "{what}");
    let report = w.join("from-stdout.h5");
    std::fs::write(&report, &bytes[5..]).unwrap();
    let r = report_json(&report);
    assert!(
        r["program"].as_str().is_some_and(|p| p.ends_with("bash")),
        "{}",
        r["program"]
    );
    // `/proc/self/fd/1` is each process's own stdout: Python wrote its
    // report beside list.txt; `ls`'s stdout is the null device, which takes
    // it.
    assert_eq!(reports(&runs).len(), 1, "{:?}: {what}", names_in(&runs));
    assert_eq!(
        tracer_lines(&stderr),
        [format!(
            "wmhcct: report written to /proc/self/fd/1; 1 process it started wrote its own as {}",
            runs.join("wmhcct-<pid>.h5").display()
        )],
        "{what}"
    );
}

/// `WMHCCT_OUT=/dev/stdout` (here `/proc/self/fd/1`) names the stdout the
/// program started with: the tracer holds a duplicate of it from the start.
/// A program that closes its stdout before it exits (coreutils do, at
/// exit) used to lose the report: the tracer's next file (the profile) took
/// descriptor 1, and the report went into it and was deleted with it,
/// without a line. A program that closes every descriptor above 2 (a
/// daemon) takes the duplicate too: the report then goes to the default
/// name, and one line says so.
#[test]
fn stdout_closed_by_the_program_still_gets_the_report() {
    let w = WorkDir::new("targets-stdout-closed");
    let exe = compile("close_fds.c", &w.path, Opt::Debug, &[]);
    let run =
        |args: &[&str], name: &str| traced_into_stdout_file(&exe, args, &w.path, &w.join(name));
    let own = b"output of close_fds\n";

    // stdout closed: the report follows the program's output.
    let (bytes, stderr) = run(&[], "closed.bin");
    assert!(bytes.starts_with(own), "{stderr}");
    assert!(
        bytes[own.len()..].starts_with(b"\x89HDF"),
        "the report after the output: {} bytes; {stderr}",
        bytes.len()
    );
    let report = w.join("closed.h5");
    std::fs::write(&report, &bytes[own.len()..]).unwrap();
    let r = report_json(&report);
    // The program's 11, and stdio's buffer and tmpfile's stream.
    assert_eq!(total_count(&r, "malloc"), 13, "{}", alloc_totals(&r));
    assert_eq!(
        tracer_lines(&stderr),
        ["wmhcct: report written to /proc/self/fd/1"],
        "{stderr}"
    );

    // Every descriptor above 2 closed: the default name, said in a line.
    let (bytes, stderr) = run(&["all"], "all.bin");
    assert_eq!(bytes, own, "only the program's output: {stderr}");
    let lines = tracer_lines(&stderr);
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(
        lines[0].starts_with("wmhcct: cannot write the report into /proc/self/fd/1: the program closed that descriptor; writing it to "),
        "{stderr}"
    );
    let moved = lines[1]
        .strip_prefix("wmhcct: report written to ")
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(moved.starts_with(&w.path.to_string_lossy().into_owned()) && moved.ends_with(".h5"));
    let r = report_json(Path::new(moved));
    // The program's 11, and stdio's buffer and tmpfile's stream.
    assert_eq!(total_count(&r, "malloc"), 13, "{}", alloc_totals(&r));
}
