//! Bad input (issue 8).
//!
//! - Every `WMHCCT_*` variable with garbage, empty, negative and
//!   out-of-range values: the program runs unchanged, stderr has exactly one
//!   line naming the variable and the accepted values ("expected …; using
//!   the default"), the report is written with the defaults.
//! - The `wmhcct` command on bad files (missing, empty, text, random bytes,
//!   truncated, a profile of another format version, a foreign HDF5 file)
//!   for every subcommand that reads one: one line on stderr naming the file
//!   and the problem, a non-zero exit code below 128 (no signal), no panic,
//!   nothing on stdout.

mod rel_common;

use std::path::{Path, PathBuf};
use std::process::Command;

use rel_common::*;
use wmhcct_e2e::*;

const OUTPUT: &str = "pattern done: peak 10517760 leak 10485760\n";

/// (variable, bad values). Path variables accept any non-empty string
/// (a relative name is a path), so only their empty (and, for the binary,
/// missing) values are bad.
const BAD: &[(&str, &[&str])] = &[
    ("WMHCCT_PHI", &["abc", "", "-1", "0", "1.5", "1e400"]),
    ("WMHCCT_EPSILON", &["abc", "", "-0.1", "1e-9", "0.5"]),
    ("WMHCCT_UNWIND", &["bogus", "", "-1", "FULL"]),
    (
        "WMHCCT_MAX_DEPTH",
        &["abc", "", "-3", "0", "1025", "99999999999999999999999"],
    ),
    ("WMHCCT_EXACT", &["maybe", "", "-1", "2"]),
    ("WMHCCT_RESEED", &["x", "", "-5", "99999999999999999999999"]),
    (
        "WMHCCT_RESEED_GAP_US",
        &["x", "", "-5", "18446744073709552"],
    ),
    ("WMHCCT_VALIDATE", &["x", "", "-0.5", "2"]),
    ("WMHCCT_BINS", &["lots", "", "-1", "1048577"]),
    ("WMHCCT_RANK_SERIES", &["x", "", "-1", "99999999"]),
    ("WMHCCT_EVENT_SAMPLES", &["1e4", "", "-1", "10000001"]),
    ("WMHCCT_SNAPSHOT", &["lots", "", "-1", "5XB", "1.5"]),
    ("WMHCCT_OUT", &[""]),
    ("WMHCCT_SPILL_DIR", &[""]),
    ("WMHCCT_BIN", &["", "-1", "/nonexistent/wmhcct"]),
];

#[test]
fn every_variable_with_bad_values() {
    let t = "every_variable_with_bad_values";
    let w = WorkDir::new("rel-env");
    let exe = compile("pattern.c", &w.path, Opt::Debug, &[]);
    let mut runs = 0;
    for (var, values) in BAD {
        for value in *values {
            // WMHCCT_OUT="" falls back to the default report name in the
            // working directory.
            let h5 = w.join(format!("r{runs}.h5"));
            let mut c = command(&exe, &[] as &[&str], &w.path);
            c.env("LD_PRELOAD", lib());
            if *var != "WMHCCT_OUT" {
                c.env("WMHCCT_OUT", &h5);
            }
            c.env(var, value);
            let out = run_cmd(&mut c, TIMEOUT);
            let what = format!("{var}={value:?}");
            assert_eq!(out.code, 0, "{what}: {}", out.describe());
            assert_eq!(out.stdout, OUTPUT, "{what}: stdout unchanged");
            let naming: Vec<&str> = out.stderr.lines().filter(|l| l.contains(var)).collect();
            assert_eq!(
                naming.len(),
                1,
                "{what}: one line naming it:\n{}",
                out.stderr
            );
            assert!(
                naming[0].starts_with("wmhcct: ")
                    && naming[0].contains("expected")
                    && naming[0].contains("using the default"),
                "{what}: {}",
                naming[0]
            );
            let others: Vec<&str> = out
                .stderr
                .lines()
                .filter(|l| !l.contains(var) && !l.contains("report written to"))
                .collect();
            assert!(others.is_empty(), "{what}: other lines {others:?}");
            assert_no_panic(&out.stderr, &what);
            let report = if *var == "WMHCCT_OUT" {
                let pid_reports: Vec<PathBuf> = std::fs::read_dir(&w.path)
                    .unwrap()
                    .filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .filter(|p| {
                        let n = p.file_name().unwrap().to_string_lossy();
                        n.starts_with("wmhcct-") && n.ends_with(".h5")
                    })
                    .collect();
                assert_eq!(pid_reports.len(), 1, "{what}: default report name");
                pid_reports[0].clone()
            } else {
                h5
            };
            let r = report_json(&report);
            let cfg = &r["config"];
            assert!(
                (cfg["phi"].as_f64().unwrap() - 1e-4).abs() < 1e-12,
                "{what}: {cfg}"
            );
            assert!(
                (cfg["epsilon"].as_f64().unwrap() - 2e-5).abs() < 1e-12,
                "{what}: {cfg}"
            );
            assert_eq!(cfg["unwind"], "second", "{what}: {cfg}");
            assert_eq!(cfg["max_depth"], 128, "{what}: {cfg}");
            assert_eq!(cfg["exact"], false, "{what}: {cfg}");
            let _ = std::fs::remove_file(&report);
            runs += 1;
            if runs % 10 == 0 {
                figure(t, format!("{runs} runs so far; last: {}", naming[0]));
            }
        }
    }
    figure(
        t,
        format!("{runs} bad settings, each one line and the defaults"),
    );
}

/// `wmhcct <args…>` must fail cleanly naming `file`.
fn fails_cleanly(args: &[&str], file: &Path, problem: &[&str]) {
    let line = assert_cli_fails_cleanly(args, file);
    let lower = line.to_lowercase();
    assert!(
        problem.iter().any(|p| lower.contains(&p.to_lowercase())),
        "the line names the problem (one of {problem:?}): wmhcct {}: {line}",
        args.join(" ")
    );
    figure("cli", format!("wmhcct {} -> {line}", args[0]));
}

fn random_bytes(n: usize, mut x: u64) -> Vec<u8> {
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The bad files every reading subcommand is given.
fn bad_files(w: &WorkDir) -> Vec<(PathBuf, &'static [&'static str])> {
    let prof = real_profile(w);
    let bytes = std::fs::read(&prof).unwrap();
    let mut v: Vec<(PathBuf, &'static [&'static str])> = Vec::new();
    v.push((
        w.join("missing.h5"),
        &["no such file", "not found", "cannot open", "does not exist"],
    ));
    let empty = w.join("empty.h5");
    std::fs::write(&empty, b"").unwrap();
    v.push((empty, &["empty", "not a", "truncated", "unable", "cannot"]));
    let text = w.join("notes.txt");
    std::fs::write(&text, "this is not a report\n").unwrap();
    v.push((
        text,
        &["not a", "unable", "cannot", "unrecognized", "bad magic"],
    ));
    let random = w.join("random.bin");
    std::fs::write(&random, random_bytes(65536, 0x9e3779b97f4a7c15)).unwrap();
    v.push((
        random,
        &["not a", "unable", "cannot", "unrecognized", "bad magic"],
    ));
    let trunc = w.join("truncated.wmprof");
    std::fs::write(&trunc, &bytes[..bytes.len() / 2]).unwrap();
    v.push((trunc, &["truncated"]));
    // Another format version: the u32 after the 8-byte magic.
    let mut other = bytes.clone();
    other[8..12].copy_from_slice(&99u32.to_le_bytes());
    let ver = w.join("other-version.wmprof");
    std::fs::write(&ver, &other).unwrap();
    v.push((ver, &["version 99"]));
    // A foreign HDF5 file.
    let foreign = foreign_hdf5(w, "foreign.h5");
    v.push((
        foreign,
        &[
            "not a wmhcct",
            "not a report",
            "missing",
            "format",
            "unable",
            "cannot",
        ],
    ));
    v
}

#[test]
fn every_reading_subcommand_on_bad_files() {
    let w = WorkDir::new("rel-cli");
    let good_prof = real_profile(&w);
    let files = bad_files(&w);
    let plots = w.join("plots");
    for (f, problem) in &files {
        let fs = f.to_string_lossy().into_owned();
        let out_h5 = w.join("out.h5").to_string_lossy().into_owned();
        let g = good_prof.to_string_lossy().into_owned();
        fails_cleanly(&["report", &fs], f, problem);
        fails_cleanly(&["report", &fs, "--json"], f, problem);
        fails_cleanly(&["convert", &fs, "-o", &out_h5], f, problem);
        fails_cleanly(&["merge", &fs, "-o", &out_h5], f, problem);
        fails_cleanly(
            &["plot", &fs, "--out-dir", &plots.to_string_lossy()],
            f,
            problem,
        );
        fails_cleanly(&["export", &fs, "--format", "folded"], f, problem);
        fails_cleanly(&["export", &fs, "--format", "json"], f, problem);
        fails_cleanly(&["diff", &fs, &g], f, problem);
        fails_cleanly(&["diff", &g, &fs], f, problem);
    }
}

/// `wmhcct merge` on a spill directory with nothing usable in it.
#[test]
fn merge_on_empty_or_garbage_directories() {
    let w = WorkDir::new("rel-cli-merge");
    let out_h5 = w.join("out.h5").to_string_lossy().into_owned();
    let empty = w.join("empty.spill");
    std::fs::create_dir_all(&empty).unwrap();
    fails_cleanly(
        &["merge", &empty.to_string_lossy(), "-o", &out_h5],
        &empty,
        &["no profile", "empty", "nothing", "no .wmprof"],
    );
    let garbage = w.join("garbage.spill");
    std::fs::create_dir_all(&garbage).unwrap();
    let bad = garbage.join("rank-0.wmprof");
    std::fs::write(&bad, random_bytes(4096, 7)).unwrap();
    // A spill directory is merged from what can be read: each unreadable
    // profile gets one warning naming it, then one error when none is left.
    let out = run_cmd(
        Command::new(bin())
            .args(["merge", &garbage.to_string_lossy(), "-o", &out_h5])
            .env("RUST_BACKTRACE", "1")
            .env_remove("LD_PRELOAD"),
        TIMEOUT,
    );
    let what = format!("wmhcct merge (garbage): {}", out.describe());
    assert_ne!(out.code, 0, "{what}");
    assert!(out.code < 128, "{what}");
    assert_no_panic(&out.stderr, &what);
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "a warning and an error: {what}");
    assert!(
        lines[0].contains("rank-0.wmprof") && lines[0].contains("bad magic"),
        "{what}"
    );
    assert!(lines[1].contains("no readable profiles"), "{what}");
    figure(
        "cli",
        format!("wmhcct merge (garbage dir) -> {}", lines.join(" / ")),
    );
    assert!(!Path::new(&out_h5).exists(), "no report from nothing");
}

/// A report given where a raw profile is wanted (`convert`, `merge`) is
/// named for what it is, and `plot --out-dir` naming a file says so,
/// instead of the system's "bad magic" and "File exists".
#[test]
fn a_report_where_a_profile_is_wanted_and_a_file_as_plot_directory() {
    let w = WorkDir::new("rel-cli-kind");
    let prof = real_profile(&w);
    let h5 = w.join("r.h5");
    let p = prof.to_string_lossy().into_owned();
    let r = h5.to_string_lossy().into_owned();
    cli_out(&w.path, &["convert", &p, "-o", &r]);
    let out_h5 = w.join("out.h5").to_string_lossy().into_owned();
    for cmd in ["convert", "merge"] {
        fails_cleanly(
            &[cmd, &r, "-o", &out_h5],
            &h5,
            &["an HDF5 file, not a wmhcct profile"],
        );
    }
    fails_cleanly(
        &["plot", &r, "--out-dir", &p],
        &prof,
        &["exists and is not a directory"],
    );
    assert!(!Path::new(&out_h5).exists());
}
