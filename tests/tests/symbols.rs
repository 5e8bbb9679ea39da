//! Function names in the report for a stripped shared library (only
//! `.dynsym` left, no debug file): an address is named by the function
//! whose symbol's extent holds it, and a static function, which has no
//! symbol left, stays `??` with its module instead of taking the name of
//! the exported function before it. (Before, the nearest symbol below any
//! address named it: every frame of Python's stripped `_json` encoder was
//! `PyInit__json`.) A stripped library whose `.gnu_debuglink` names its
//! debug file is named from that file.

use std::path::{Path, PathBuf};
use std::process::Command;

use wmhcct_e2e::*;

fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// How the library is shipped.
#[derive(PartialEq)]
enum Lib {
    /// As built, with its symbols and DWARF.
    Whole,
    /// `strip --strip-all`: only `.dynsym` left.
    Stripped,
    /// Stripped, its debug information in `.debug/libstripped.so.debug`,
    /// which the library's `.gnu_debuglink` names.
    DebugLink,
}

/// The library and the program linked against it, in `dir`.
fn build(dir: &Path, how: Lib) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let programs = root().join("tests/programs");
    let lib = dir.join("libstripped.so");
    run_ok(
        Command::new("cc")
            .args(["-O2", "-g", "-fPIC", "-shared", "-fno-omit-frame-pointer"])
            // Functions in the text in the order of the source.
            .arg("-fno-toplevel-reorder")
            .arg("-o")
            .arg(&lib)
            .arg(programs.join("stripped_lib.c")),
    );
    if how == Lib::DebugLink {
        std::fs::create_dir_all(dir.join(".debug")).unwrap();
        run_ok(
            Command::new("objcopy")
                .arg("--only-keep-debug")
                .arg(&lib)
                .arg(dir.join(".debug/libstripped.so.debug")),
        );
    }
    if how != Lib::Whole {
        run_ok(Command::new("strip").arg("--strip-all").arg(&lib));
    }
    if how == Lib::DebugLink {
        // (The link holds the file's name and CRC, not its directory.)
        let debug = dir.join(".debug/libstripped.so.debug");
        run_ok(
            Command::new("objcopy")
                .arg(format!("--add-gnu-debuglink={}", debug.display()))
                .arg(&lib),
        );
    }
    let exe = dir.join("stripped_main");
    run_ok(
        Command::new("cc")
            .args(["-O2", "-g", "-fno-omit-frame-pointer"])
            .arg("-o")
            .arg(&exe)
            .arg(programs.join("stripped_main.c"))
            .arg(format!("-L{}", dir.display()))
            .arg(format!("-Wl,-rpath,{}", dir.display()))
            .arg("-lstripped"),
    );
    exe
}

/// The malloc context of the library, innermost frame first, as
/// (function, module) pairs.
fn library_stack(dir: &Path, exe: &Path) -> Vec<(String, String)> {
    let native = run_plain(exe, &[] as &[&str], dir);
    assert_eq!(native.code, 0, "{}", native.describe());
    let h5 = dir.join("r.h5");
    let out = run_traced(exe, &[] as &[&str], dir, &h5, &[]);
    assert_eq!(out.code, 0, "{}", out.describe());
    assert_eq!(out.stdout, native.stdout);
    let r = report_json(&h5);
    let found: Vec<&serde_json::Value> = contexts(&r)
        .iter()
        .filter(|c| c["kind"] == "malloc" && u64_of(&c["bytes"]) == 25 * 4242)
        .collect();
    assert_eq!(found.len(), 1, "the library's context: {}", summary(&r));
    found[0]["stack"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["function"].as_str().unwrap_or("").to_string(),
                f["module"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn stripped_library_frames_are_not_misnamed() {
    let w = WorkDir::new("symbols-stripped");
    // With its symbols and debug information: the stack as written.
    let full = w.join("full");
    let exe = build(&full, Lib::Whole);
    // The layout the test relies on: the static helper lies after the
    // exported function, with no other symbol in .dynsym between them.
    let nm = run_ok(Command::new("nm").arg(full.join("libstripped.so")));
    let addr = |name: &str| {
        nm.lines()
            .find(|l| l.ends_with(&format!(" {name}")))
            .and_then(|l| u64::from_str_radix(l.split(' ').next().unwrap(), 16).ok())
            .unwrap_or_else(|| panic!("{name} not in nm's output:\n{nm}"))
    };
    assert!(
        addr("stripped_hidden_worker") > addr("stripped_api"),
        "the helper must follow the exported function:\n{nm}"
    );
    let stack = library_stack(&full, &exe);
    let names: Vec<&str> = stack.iter().map(|(f, _)| f.as_str()).collect();
    assert!(is_fn(names[0], "stripped_hidden_worker"), "{stack:?}");
    assert!(is_fn(names[1], "stripped_api"), "{stack:?}");
    assert!(is_fn(names[2], "main"), "{stack:?}");

    // Stripped: the exported function keeps its name, the helper has none.
    let bare = w.join("stripped");
    let exe = build(&bare, Lib::Stripped);
    let dynsym = run_ok(
        Command::new("nm")
            .arg("-D")
            .arg(bare.join("libstripped.so")),
    );
    assert!(!dynsym.contains("stripped_hidden_worker"), "{dynsym}");
    let stack = library_stack(&bare, &exe);
    assert_eq!(stack[0].0, "??", "{stack:?}");
    assert!(stack[0].1.ends_with("libstripped.so"), "{stack:?}");
    assert_eq!(stack[1].0, "stripped_api", "{stack:?}");
    assert!(stack[1].1.ends_with("libstripped.so"), "{stack:?}");
    assert!(is_fn(&stack[2].0, "main"), "{stack:?}");
}

/// `nm -a`'s list of every symbol of `file` (empty for a stripped file,
/// for which nm complains on stderr).
fn all_symbols(file: &Path) -> String {
    run_ok(
        Command::new("nm")
            .arg("-a")
            .arg(file)
            .stderr(std::process::Stdio::null()),
    )
}

/// A library stripped for shipping, its debug information kept in
/// `.debug/` and named by its `.gnu_debuglink` (as `objcopy
/// --only-keep-debug` and `--add-gnu-debuglink` make it): its frames are
/// named from that file, the static helper too, with file and line. Before
/// 2026-11-27 the link was not followed and the helper stayed `??`.
#[test]
fn a_stripped_librarys_debug_link_is_followed() {
    let w = WorkDir::new("symbols-debuglink");
    let dir = w.join("linked");
    let exe = build(&dir, Lib::DebugLink);
    let lib = dir.join("libstripped.so");
    let syms = all_symbols(&lib);
    assert!(!syms.contains("stripped_hidden_worker"), "{syms}");
    let sections = run_ok(Command::new("readelf").arg("-S").arg(&lib));
    assert!(sections.contains(".gnu_debuglink"), "{sections}");
    assert!(!sections.contains(".debug_info"), "{sections}");
    let stack = library_stack(&dir, &exe);
    assert!(is_fn(&stack[0].0, "stripped_hidden_worker"), "{stack:?}");
    assert!(stack[0].1.ends_with("libstripped.so"), "{stack:?}");
    assert!(is_fn(&stack[1].0, "stripped_api"), "{stack:?}");
    assert!(is_fn(&stack[2].0, "main"), "{stack:?}");
    let h5 = dir.join("r.h5");
    let text = cli_out(&dir, &["report", h5.to_str().unwrap()]);
    assert!(
        text.contains("stripped_hidden_worker (") && text.contains("stripped_lib.c:"),
        "no file and line for the helper:\n{text}"
    );
}

/// A stripped executable, as distributions ship programs (Debian's
/// `pw.x`, `cp2k.psmp`, `hpcc`): its `main` has no name, and the text
/// report's stacks end at the frame the C library's start-up called, as
/// they end at `main` in a program with its symbols; the JSON keeps every
/// frame. Before 2026-11-27 they went on below it to
/// `__libc_start_call_main`, `__libc_start_main_impl` and `_start`.
#[test]
fn a_stripped_programs_stacks_end_at_its_main() {
    let w = WorkDir::new("symbols-stripped-exe");
    let dir = w.join("exe");
    let exe = build(&dir, Lib::Whole);
    run_ok(Command::new("strip").arg("--strip-all").arg(&exe));
    let syms = all_symbols(&exe);
    assert!(!syms.contains(" main"), "{syms}");
    let stack = library_stack(&dir, &exe);
    // The JSON: the unnamed main, and the C library's start-up below it.
    let main_at = stack
        .iter()
        .position(|(f, m)| f == "??" && m == exe.to_str().unwrap())
        .unwrap_or_else(|| panic!("no frame of the program: {stack:?}"));
    assert!(
        stack[main_at + 1..]
            .iter()
            .any(|(f, _)| f.starts_with("__libc_start")),
        "{stack:?}"
    );
    let h5 = dir.join("r.h5");
    let text = cli_out(&dir, &["report", h5.to_str().unwrap()]);
    assert!(!text.contains("__libc_start"), "{text}");
    // The library's context: its two functions, then the program's main,
    // and nothing below it.
    let block = text
        .split("\n\n")
        .find(|b| b.contains("stripped_hidden_worker ("))
        .unwrap_or_else(|| panic!("{text}"));
    let frames: Vec<&str> = block.lines().skip(1).collect();
    assert_eq!(frames.len(), 3, "{block}");
    assert!(frames[2].trim_start().starts_with("?? ("), "{block}");
    assert!(
        frames[2].ends_with(&format!("[{}]", exe.display())),
        "{block}"
    );
}

/// A stripped Fortran program (gfortran's `main` calls `MAIN__`, both
/// unnamed once stripped): its contexts are named by its own frames, not
/// by the C library's start-up below `main`, and `--group function` sums
/// them under the program. Before 2026-11-27 every one of them was named
/// `__libc_start_call_main`, the innermost frame with a name, in the text,
/// the plots and `diff`, and `--group function` summed them all under it.
#[test]
fn a_stripped_programs_contexts_are_its_own() {
    let w = WorkDir::new("symbols-stripped-fortran");
    let dir = w.join("f");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = compile("pattern.f90", &dir, Opt::Release, &["-s"]);
    let native = run_plain(&exe, &[] as &[&str], &dir);
    assert_eq!(native.code, 0, "{}", native.describe());
    let h5 = dir.join("r.h5");
    let out = run_traced(&exe, &[] as &[&str], &dir, &h5, &[]);
    assert_eq!(out.code, 0, "{}", out.describe());
    assert_eq!(out.stdout, native.stdout);
    let name = exe.file_name().unwrap().to_str().unwrap();
    let h5 = h5.to_str().unwrap();
    for args in [
        vec!["report", h5],
        vec!["report", h5, "--by", "bytes"],
        vec!["report", h5, "--group", "function"],
    ] {
        let text = cli_out(&dir, &args);
        assert!(!text.contains("__libc_start"), "{args:?}:\n{text}");
        let first = text
            .lines()
            .find(|l| l.starts_with("#1 "))
            .unwrap_or_else(|| panic!("{args:?}:\n{text}"));
        if args[2..].contains(&"--group") {
            // The program's allocation sites, by function.
            assert!(
                first.starts_with(&format!("#1 ?? ({name}) [")),
                "{first}\n{text}"
            );
        }
    }
    // The flame graph's and the hottest-contexts plot's labels.
    let plots = dir.join("plots");
    cli_out(
        &dir,
        &[
            "plot",
            h5,
            "--out-dir",
            plots.to_str().unwrap(),
            "--format",
            "svg",
        ],
    );
    let svg = std::fs::read_to_string(plots.join("contexts.svg")).unwrap();
    assert!(!svg.contains("__libc_start"), "{svg}");
    // (Unnamed sites told apart by their addresses: `?? @0x1632 (pattern-O2)`.)
    assert!(svg.contains(&format!(" ({name})")), "{svg}");
}
