//! End-to-end tests of the `wmhcct` binary: convert → HDF5 (checked with
//! h5dump and h5py when installed) → report, and every kind of bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use wmhcct_format::{
    Config, FrameKey, HeapStats, KindTotal, Meta, Module, Node, Profile, Resident, Tree,
    UnwindStats, ALLOC_KINDS, NO_PARENT,
};

fn wmhcct() -> Command {
    Command::new(env!("CARGO_BIN_EXE_wmhcct"))
}

fn run(args: &[&std::ffi::OsStr]) -> Output {
    wmhcct().args(args).output().expect("spawn wmhcct")
}

fn os<S: AsRef<std::ffi::OsStr> + ?Sized>(s: &S) -> &std::ffi::OsStr {
    s.as_ref()
}

fn node(parent: u32, key: FrameKey, count: u64, bytes: u64) -> Node {
    Node {
        parent,
        key,
        count,
        count_err: 0,
        bytes,
        bytes_err: 0,
        live_bytes: 0,
        peak_live_bytes: 0,
        temporary: 0,
        flags: 3,
    }
}

/// A C program compiled with debug info, and the file offsets of two of its functions.
struct Prog {
    path: PathBuf,
    /// (symbol address of `leaf_alloc`, its source line), same for `main`.
    leaf: (u64, u32),
    main: (u64, u32),
    /// GNU build id, hex (empty when the linker wrote none).
    build_id: String,
}

const PROG_C: &str = "#include <stdlib.h>\n\
void *leaf_alloc(size_t n)\n\
{\n\
    return malloc(n);\n\
}\n\
int main(void)\n\
{\n\
    free(leaf_alloc(64));\n\
    return 0;\n\
}\n";

fn build_prog(dir: &Path) -> Option<Prog> {
    use object::{Object, ObjectSymbol};
    let src = dir.join("prog.c");
    std::fs::write(&src, PROG_C).unwrap();
    let exe = dir.join("prog");
    let ok = Command::new("gcc")
        .args(["-g", "-O0", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("gcc unavailable: symbolisation of a real binary not tested");
        return None;
    }
    let data = std::fs::read(&exe).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    let addr = |name: &str| {
        obj.symbols()
            .find(|s| s.name() == Ok(name))
            .map(|s| s.address())
            .unwrap()
    };
    let build_id = obj
        .build_id()
        .ok()
        .flatten()
        .map(|id| id.iter().map(|b| format!("{b:02x}")).collect())
        .unwrap_or_default();
    Some(Prog {
        build_id,
        path: exe.clone(),
        leaf: (addr("leaf_alloc"), 3),
        main: (addr("main"), 7),
    })
}

/// A profile with hot, cold, untraced contexts; module 0 is `prog` when given.
fn sample(prog: Option<&Prog>) -> Profile {
    let (leaf, main) = prog
        .map(|p| (p.leaf.0, p.main.0))
        .unwrap_or((0x1100, 0x1200));
    let path = prog
        .map(|p| p.path.to_string_lossy().into_owned())
        .unwrap_or_else(|| "/nonexistent/prog".into());
    let addr = |offset| FrameKey::Addr { module: 0, offset };
    let mut leak = node(2, FrameKey::Kind(0), 100, 6400);
    leak.live_bytes = 64;
    leak.peak_live_bytes = 640;
    leak.count_err = 1;
    leak.temporary = 40;
    let nodes = vec![
        Node::root(),
        node(0, addr(main + 1), 0, 0),                 // 1 main
        node(1, addr(leaf + 1), 0, 0),                 // 2 leaf_alloc
        leak,                                          // 3 malloc (hot)
        node(1, FrameKey::Kind(1), 30, 300),           // 4 calloc in main (hot)
        node(0, FrameKey::Unknown(0xdead_beef), 0, 0), // 5 unknown frame
        node(5, FrameKey::Kind(0), 1, 1),              // 6 cold malloc
        node(0, FrameKey::Kind(0x800), 5, 50),         // 7 untraced malloc
        node(1, FrameKey::Kind(3), 99, 6336),          // 8 free in main (hot)
    ];
    let mut totals: Vec<KindTotal> = ALLOC_KINDS[..10]
        .iter()
        .map(|k| KindTotal {
            kind: k.to_string(),
            count: 0,
            bytes: 0,
        })
        .collect();
    totals[0].count = 106;
    totals[0].bytes = 6451;
    totals[1].count = 30;
    totals[1].bytes = 300;
    totals[3].count = 99;
    totals[3].bytes = 6336;
    Profile {
        meta: Meta {
            program: path.clone(),
            args: vec![path.clone(), "--flag".into()],
            hostname: "node001".into(),
            pid: 4242,
            start_unix_ns: 1_000_000_000,
            end_unix_ns: 3_500_000_000,
            threads: 2,
            rank: None,
            nranks: None,
            reason: "exit".into(),
            tracer_version: "0.1.0".into(),
            launch: String::new(),
        },
        config: Config {
            phi: 0.01,
            epsilon: 0.001,
            unwind: "dwarf".into(),
            max_depth: 128,
            exact: false,
            ..Config::default()
        },
        modules: vec![Module {
            path,
            build_id: prog
                .map(|p| p.build_id.clone())
                .unwrap_or_else(|| "abcdef".into()),
            bias: 0x5555_0000_0000,
            start: 0x5555_0000_1000,
            end: 0x5555_0000_2000,
        }],
        totals,
        heap: HeapStats {
            peak_bytes: 640,
            live_bytes: 64,
            live_blocks: 1,
            evicted_live_bytes: 0,
            evicted_peak_bytes: 0,
            unknown_frees: 2,
            peak_time_ns: 12345,
            temporary_count: 41,
            temporary_bytes: 2624,
            size_classes: vec![0, 0, 0, 0, 0, 0, 0, 0, 130],
        },
        unwind: UnwindStats {
            mode: "dwarf".into(),
            events: 235,
            frames_unwound: 470,
            frames_reused: 235,
            validated: 10,
            correct: 9,
            reseeds: 1,
            truncated: 0,
            errors: 0,
        },
        tracer: Default::default(),
        resident: Resident {
            peak_bytes: 50 << 20,
            end_bytes: 40 << 20,
            tracer_peak_bytes: 3 << 20,
        },
        trees: vec![Tree {
            name: "alloc".into(),
            total_count: 235,
            total_bytes: 13087,
            capacity: 100,
            nodes,
            spread: vec![],
            floor: None,
        }],
        ranks: vec![],
        series: None,
    }
}

fn write_profile(dir: &Path, name: &str, p: &Profile) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, wmhcct_format::encode(p).unwrap()).unwrap();
    path
}

fn convert(dir: &Path, p: &Profile) -> PathBuf {
    let prof = write_profile(dir, "p.wmhcct", p);
    let out = dir.join("report.h5");
    let o = run(&[
        os("convert"),
        prof.as_os_str(),
        os("-o"),
        out.as_os_str(),
        os("--remove-input"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.is_file());
    assert!(!prof.exists(), "--remove-input left the profile");
    out
}

fn report_json(file: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![os("report"), file.as_os_str(), os("--json")];
    args.extend(extra.iter().map(os));
    let o = run(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("valid JSON")
}

fn have(tool: &str, arg: &str) -> bool {
    Command::new(tool)
        .arg(arg)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

const PY: &str = "/usr/bin/python3";

fn have_h5py() -> bool {
    have(PY, "-c")
        && Command::new(PY)
            .args(["-c", "import h5py"])
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
}

#[test]
fn convert_then_report_json() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_prog(dir.path());
    let p = sample(prog.as_ref());
    let out = convert(dir.path(), &p);
    let v = report_json(&out, &[]);

    assert_eq!(v["format_version"], 4);
    assert_eq!(v["program"], p.meta.program.as_str());
    assert_eq!(v["ranks"], 1);
    assert_eq!(v["totals"]["malloc"]["count"], 106);
    assert_eq!(v["totals"]["calloc"]["bytes"], 300);
    for k in &ALLOC_KINDS[..10] {
        assert!(v["totals"][k]["count"].is_u64(), "missing total {k}");
    }
    assert_eq!(v["peak_bytes"], 640);
    assert_eq!(v["live_bytes"], 64);
    assert_eq!(v["heap"]["unknown_frees"], 2);
    assert_eq!(v["heap"]["temporary_count"], 41);
    assert_eq!(v["heap"]["temporary_bytes"], 2624);
    assert_eq!(
        v["size_classes"],
        serde_json::json!([{"min": 128, "max": 255, "count": 130}])
    );
    assert_eq!(v["config"]["phi"], 0.01);
    assert_eq!(v["config"]["exact"], false);
    assert_eq!(v["unwind"]["accuracy"], 0.9);
    assert_eq!(v["unwind"]["frames_unwound_per_event"], 2.0);
    assert_eq!(
        v["resident"],
        serde_json::json!({"peak_bytes": 50u64 << 20, "end_bytes": 40u64 << 20,
                           "tracer_peak_bytes": 3u64 << 20})
    );
    assert_eq!(v["ranks_detail"][0]["resident"], v["resident"]);

    let ctx = v["contexts"].as_array().unwrap();
    // Hot contexts only: the cold malloc (count 1, 1 byte) is not in the HCCT.
    assert_eq!(ctx.len(), 3, "{ctx:#?}");
    let kinds: Vec<&str> = ctx.iter().map(|c| c["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["malloc", "free", "calloc"]);
    let top = &ctx[0];
    assert_eq!(top["count"], 100);
    assert_eq!(top["count_err"], 1);
    assert_eq!(top["bytes"], 6400);
    assert_eq!(top["leaked_bytes"], 64);
    assert_eq!(top["peak_live_bytes"], 640);
    assert_eq!(top["temporary"], 40);
    let stack = top["stack"].as_array().unwrap();
    assert_eq!(stack.len(), 2);
    assert_eq!(stack[0]["module"], p.meta.program.as_str());
    if let Some(prog) = &prog {
        assert_eq!(stack[0]["function"], "leaf_alloc");
        assert!(stack[0]["file"].as_str().unwrap().ends_with("prog.c"));
        assert_eq!(stack[0]["line"], prog.leaf.1);
        assert_eq!(stack[1]["function"], "main");
        assert_eq!(stack[1]["line"], prog.main.1);
        assert_eq!(stack[0]["address"], format!("{:#x}", prog.leaf.0 + 1));
    }
    let untraced = v["untraced"].as_array().unwrap();
    assert_eq!(untraced.len(), 1);
    assert_eq!(untraced[0]["kind"], "malloc");
    assert_eq!(untraced[0]["count"], 5);
    assert_eq!(untraced[0]["stack"].as_array().unwrap().len(), 0);

    // --top limits the list.
    let v = report_json(&out, &["--top", "1"]);
    assert_eq!(v["contexts"].as_array().unwrap().len(), 1);
}

#[test]
fn exact_mode_lists_every_context() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = sample(None);
    p.config.exact = true;
    let out = convert(dir.path(), &p);
    let v = report_json(&out, &[]);
    let ctx = v["contexts"].as_array().unwrap();
    assert_eq!(ctx.len(), 4);
    let cold = ctx.last().unwrap();
    assert_eq!(cold["count"], 1);
    assert_eq!(cold["stack"][0]["function"], "??");
    assert_eq!(cold["stack"][0]["address"], "0xdeadbeef");
    // A missing module file leaves frames unknown, with the module path.
    assert_eq!(ctx[0]["stack"][0]["function"], "??");
    assert_eq!(ctx[0]["stack"][0]["module"], "/nonexistent/prog");
}

#[test]
fn report_reads_raw_profiles_too() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_prog(dir.path());
    let p = sample(prog.as_ref());
    let prof = write_profile(dir.path(), "raw.wmhcct", &p);
    let v = report_json(&prof, &[]);
    assert_eq!(v["contexts"].as_array().unwrap().len(), 3);
    if prog.is_some() {
        assert_eq!(v["contexts"][0]["stack"][0]["function"], "leaf_alloc");
    }
}

#[test]
fn text_report_is_readable() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_prog(dir.path());
    let out = convert(dir.path(), &sample(prog.as_ref()));
    let o = run(&[os("report"), out.as_os_str()]);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    for needle in [
        "program:",
        "ranks:     1",
        "duration:  2.500 s",
        "peak 640 B",
        "malloc",
        "accuracy 90.00%",
        "top 3 of 3 hot contexts",
        "#1 malloc  count 100 (over by ≤1)",
        "untraced",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    if prog.is_some() {
        assert!(text.contains("leaf_alloc ("), "{text}");
        assert!(text.contains("prog.c:3) ["), "{text}");
    }
    let o = run(&[os("report"), out.as_os_str(), os("--top"), os("1")]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("top 1 of 3"), "{text}");
    assert!(!text.contains("#2 "), "{text}");
}

#[test]
fn report_round_trips_the_profile() {
    // Everything the report stores comes back: same JSON from profile and report.
    let dir = tempfile::tempdir().unwrap();
    let mut p = sample(None);
    p.trees.push(Tree {
        name: "mpi".into(),
        total_count: 7,
        total_bytes: 700,
        capacity: 0,
        nodes: vec![Node::root(), node(0, FrameKey::Kind(2), 7, 700)],
        spread: vec![Default::default(); 2],
        floor: Some((1, 2)),
    });
    p.meta.rank = Some(3);
    p.meta.nranks = Some(8);
    let raw = write_profile(dir.path(), "keep.wmhcct", &p);
    let out = dir.path().join("r.h5");
    let o = run(&[os("convert"), raw.as_os_str(), os("-o"), out.as_os_str()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(raw.exists(), "input removed without --remove-input");
    let mut a = report_json(&raw, &[]);
    let mut b = report_json(&out, &[]);
    a["format_version"] = 0.into();
    b["format_version"] = 0.into();
    assert_eq!(a, b);
}

#[test]
fn h5dump_shows_the_layout() {
    if !have("h5dump", "--version") {
        eprintln!("h5dump not installed: skipped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = convert(dir.path(), &sample(None));
    let o = Command::new("h5dump").arg("-H").arg(&out).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    for needle in [
        "ATTRIBUTE \"format_version\"",
        "ATTRIBUTE \"node_count\"",
        "GROUP \"config\"",
        "DATASET \"totals\"",
        "GROUP \"heap\"",
        "GROUP \"unwind\"",
        "DATASET \"modules\"",
        "GROUP \"trees\"",
        "GROUP \"alloc\"",
        "DATASET \"nodes\"",
        "DATASET \"frames\"",
        "\"peak_live_bytes\"",
    ] {
        assert!(text.contains(needle), "missing {needle} in\n{text}");
    }
}

#[test]
fn h5py_reads_stacks_without_wmhcct() {
    if !have_h5py() {
        eprintln!("h5py not installed: skipped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = build_prog(dir.path());
    let out = convert(dir.path(), &sample(prog.as_ref()));
    let script = r#"
import sys, h5py
f = h5py.File(sys.argv[1], "r")
assert f.attrs["format_version"] == 4
assert f.attrs["node_count"] == 9
assert f.attrs["ranks"] == 1
t = f["trees/alloc"]
assert t.attrs["total_count"] == 235
nodes, frames, strings = t["nodes"][:], t["frames"][:], t["strings"][:]
assert len(nodes) == len(frames) == 9
i = 3
assert nodes[i]["key_type"] == 1 and nodes[i]["count"] == 100
assert t["temporary"][i] == 40
assert f["heap"].attrs["temporary_count"] == 41
stack = []
p = nodes[i]["parent"]
while p != 0:
    fn = strings[frames[p]["function"]]
    stack.append(fn.decode() if isinstance(fn, bytes) else fn)
    p = nodes[p]["parent"]
print(",".join(stack))
tot = {(r["kind"].decode() if isinstance(r["kind"], bytes) else r["kind"]): int(r["count"]) for r in f["totals"][:]}
assert tot["malloc"] == 106, tot
assert f["heap"].attrs["peak_bytes"] == 640
assert f["resident"].attrs["peak_bytes"] == 50 << 20
assert f["resident"].attrs["tracer_peak_bytes"] == 3 << 20
assert f["config"].attrs["phi"] == 0.01
m = f["modules"][0]["path"]
print(m.decode() if isinstance(m, bytes) else m)
"#;
    let o = Command::new(PY)
        .arg("-c")
        .arg(script)
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8(o.stdout).unwrap();
    if prog.is_some() {
        assert!(stdout.starts_with("leaf_alloc,main\n"), "{stdout}");
    } else {
        assert!(stdout.starts_with("??,??\n"), "{stdout}");
    }
}

// ------------------------------------------------------------- bad input

/// Exactly one line `wmhcct: error: <file>: …`, non-zero exit, no panic.
fn assert_one_line_error(o: &Output, file: &Path) -> String {
    assert!(!o.status.success(), "unexpected success");
    assert_ne!(o.status.code(), Some(101), "panicked");
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(err.lines().count(), 1, "not one line: {err:?}");
    let prefix = format!("wmhcct: error: {}: ", file.display());
    assert!(err.starts_with(&prefix), "{err:?} lacks {prefix:?}");
    assert!(!err.contains("panicked") && !err.contains("RUST_BACKTRACE"));
    err
}

fn bad_inputs(dir: &Path) -> Vec<(PathBuf, &'static str)> {
    let mut v = Vec::new();
    v.push((dir.join("missing.h5"), "No such file"));
    let empty = dir.join("empty");
    std::fs::write(&empty, b"").unwrap();
    v.push((empty, "empty file"));
    let random = dir.join("random.bin");
    let bytes: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(&random, bytes).unwrap();
    v.push((random, "not a wmhcct"));
    let text = dir.join("notes.txt");
    std::fs::write(&text, "just some text\nover two lines\n").unwrap();
    v.push((text, "not a wmhcct"));
    let bytes = wmhcct_format::encode(&sample(None)).unwrap();
    let trunc_prof = dir.join("trunc.wmhcct");
    std::fs::write(&trunc_prof, &bytes[..bytes.len() / 2]).unwrap();
    v.push((trunc_prof, "truncated"));
    v
}

#[test]
fn report_rejects_bad_input_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut cases = bad_inputs(dir.path());

    let good = {
        let sub = dir.path().join("good");
        std::fs::create_dir(&sub).unwrap();
        convert(&sub, &sample(None))
    };
    let data = std::fs::read(&good).unwrap();
    for (name, len) in [("half.h5", data.len() / 2), ("head.h5", 600), ("sig.h5", 4)] {
        let p = dir.path().join(name);
        std::fs::write(&p, &data[..len]).unwrap();
        cases.push((p, ""));
    }
    if have_h5py() {
        let foreign = dir.path().join("foreign.h5");
        let ok = Command::new(PY)
            .args([
                "-c",
                "import sys,h5py; f=h5py.File(sys.argv[1],'w'); f['x']=[1,2,3]; f.attrs['a']=1",
            ])
            .arg(&foreign)
            .status()
            .unwrap()
            .success();
        assert!(ok);
        cases.push((foreign, "not a wmhcct report"));
        // A report whose conversion died before node_count was written.
        let partial = dir.path().join("partial.h5");
        std::fs::copy(&good, &partial).unwrap();
        let ok = Command::new(PY)
            .args([
                "-c",
                "import sys,h5py; f=h5py.File(sys.argv[1],'a'); del f.attrs['node_count']",
            ])
            .arg(&partial)
            .status()
            .unwrap()
            .success();
        assert!(ok);
        cases.push((partial, "truncated or corrupt report"));
        // A report whose node_count disagrees with its trees.
        let wrong = dir.path().join("wrong.h5");
        std::fs::copy(&good, &wrong).unwrap();
        Command::new(PY)
            .args(["-c", "import sys,h5py,numpy; f=h5py.File(sys.argv[1],'a'); f.attrs['node_count']=numpy.uint64(3)"])
            .arg(&wrong)
            .status()
            .unwrap();
        cases.push((wrong, "truncated or corrupt report"));
    }
    for (path, expect) in &cases {
        for json in [false, true] {
            let mut args = vec![os("report"), path.as_os_str()];
            if json {
                args.push(os("--json"));
            }
            let o = run(&args);
            let err = assert_one_line_error(&o, path);
            assert!(
                err.contains(expect),
                "{}: {err:?} lacks {expect:?}",
                path.display()
            );
            assert!(o.stdout.is_empty());
        }
    }
}

#[test]
fn convert_rejects_bad_input_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    for (path, expect) in bad_inputs(dir.path()) {
        let out = dir.path().join("out.h5");
        let o = run(&[
            os("convert"),
            path.as_os_str(),
            os("-o"),
            out.as_os_str(),
            os("--remove-input"),
        ]);
        let err = assert_one_line_error(&o, &path);
        if expect == "not a wmhcct" {
            assert!(err.contains("bad magic"), "{err}");
        } else {
            assert!(err.contains(expect), "{err:?} lacks {expect:?}");
        }
        assert!(!out.exists());
        if path.file_name().unwrap() != "missing.h5" {
            assert!(path.exists(), "bad input was removed");
        }
    }
    // An unwritable output: the error names the output.
    let prof = write_profile(dir.path(), "ok.wmhcct", &sample(None));
    let out = dir.path().join("no/such/dir/out.h5");
    let o = run(&[
        os("convert"),
        prof.as_os_str(),
        os("-o"),
        out.as_os_str(),
        os("--remove-input"),
    ]);
    assert_one_line_error(&o, &out);
    assert!(prof.exists());
}

#[test]
fn convert_merges_several_profiles_into_one_job() {
    let dir = tempfile::tempdir().unwrap();
    let one = sample(None);
    let a = write_profile(dir.path(), "a.wmhcct", &one);
    let mut pb = sample(None);
    pb.meta.pid = 7;
    let b = write_profile(dir.path(), "b.wmhcct", &pb);
    let out = dir.path().join("o.h5");
    let o = run(&[
        os("convert"),
        a.as_os_str(),
        b.as_os_str(),
        os("-o"),
        out.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = report_json(&out, &[]);
    assert_eq!(r["ranks"], 2);
    for t in &one.totals {
        assert_eq!(r["totals"][&t.kind]["count"], 2 * t.count, "{}", t.kind);
    }
    let pids: Vec<u64> = r["ranks_detail"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["pid"].as_u64().unwrap())
        .collect();
    assert!(
        pids.contains(&7) && pids.contains(&(one.meta.pid as u64)),
        "{pids:?}"
    );
}

// ------------------------------------------------------------- run

fn empty_lib(dir: &Path) -> Option<PathBuf> {
    let src = dir.join("empty.c");
    std::fs::write(&src, "int wmhcct_test_marker;\n").unwrap();
    let lib = dir.join("libwmhcct.so");
    let ok = Command::new("gcc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&src)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    ok.then_some(lib)
}

#[test]
fn run_sets_environment_and_passes_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let Some(lib) = empty_lib(dir.path()) else {
        eprintln!("gcc unavailable: skipped");
        return;
    };
    let o = wmhcct()
        .args(["run", "--phi", "0.05", "--epsilon", "0.005", "--unwind", "fp", "--exact", "--out", "/tmp/x.h5", "--lib"])
        .arg(&lib)
        .args(["--", "sh", "-c", "echo $LD_PRELOAD $WMHCCT_PHI $WMHCCT_EPSILON $WMHCCT_UNWIND $WMHCCT_EXACT $WMHCCT_OUT; exit 7"])
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let lib = std::fs::canonicalize(&lib).unwrap();
    assert_eq!(
        String::from_utf8(o.stdout).unwrap().trim(),
        format!("{} 0.05 0.005 fp 1 /tmp/x.h5", lib.display())
    );

    // A command killed by a signal: wmhcct run dies of the same signal
    // (tests/tests/run_signals.rs); WMHCCT_LIB is honoured.
    let o = wmhcct()
        .args(["run", "--", "sh", "-c", "kill -9 $$"])
        .env("WMHCCT_LIB", &lib)
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(o.status.signal(), Some(9), "{:?}", o.status);
}

#[test]
fn run_without_library_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.so");
    let o = wmhcct()
        .arg("run")
        .arg("--lib")
        .arg(&missing)
        .args(["--", "true"])
        .output()
        .unwrap();
    let err = assert_one_line_error(&o, &missing);
    assert!(err.contains("tracer library not found"), "{err}");

    let o = wmhcct()
        .args(["run", "--", "/nonexistent/command"])
        .env("WMHCCT_LIB", "/bin/sh")
        .output()
        .unwrap();
    assert_one_line_error(&o, Path::new("/nonexistent/command"));
}

#[test]
fn help_lists_subcommands() {
    let o = run(&[os("--help")]);
    let text = String::from_utf8(o.stdout).unwrap();
    for c in ["run", "convert", "report"] {
        assert!(text.contains(c));
    }
    let _ = NO_PARENT;
}

/// `WMHCCT_SAMPLE_DIR=/some/dir cargo test -p wmhcct --test cli -- --ignored`
/// leaves a sample profile (with a real debug binary) there for manual checks.
#[test]
#[ignore]
fn write_sample_profile() {
    let dir = PathBuf::from(std::env::var_os("WMHCCT_SAMPLE_DIR").expect("WMHCCT_SAMPLE_DIR"));
    let prog = build_prog(&dir);
    let mut p = sample(prog.as_ref());
    // WMHCCT_SAMPLE_NODES=n adds n synthetic frames (for timing conversions).
    let extra: u32 = std::env::var("WMHCCT_SAMPLE_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let t = &mut p.trees[0];
    for i in 0..extra {
        let parent = if i % 16 == 0 {
            0
        } else {
            t.nodes.len() as u32 - 1
        };
        let key = FrameKey::Addr {
            module: 0,
            offset: 0x1000 + (i as u64 % 5000) * 4,
        };
        t.nodes.push(node(parent, key, i as u64, i as u64));
    }
    write_profile(&dir, "sample.wmhcct", &p);
}

#[test]
fn run_finds_the_library_beside_the_executable() {
    let dir = tempfile::tempdir().unwrap();
    let Some(lib) = empty_lib(dir.path()) else {
        eprintln!("gcc unavailable: skipped");
        return;
    };
    let exe = dir.path().join("wmhcct");
    std::fs::copy(env!("CARGO_BIN_EXE_wmhcct"), &exe).unwrap();
    // The copy's descriptor may still be open in a child another test's
    // thread forked meanwhile (until that child execs): ETXTBSY for a
    // moment. Try again.
    let mut tries = 0;
    let o = loop {
        let r = Command::new(&exe)
            .args(["run", "--", "sh", "-c", "echo $LD_PRELOAD"])
            .env_remove("WMHCCT_LIB")
            .env_remove("LD_PRELOAD")
            .output();
        match r {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => break r.unwrap(),
        }
    };
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lib = std::fs::canonicalize(lib).unwrap();
    assert_eq!(
        String::from_utf8(o.stdout).unwrap().trim(),
        lib.to_string_lossy()
    );
}

// ------------------------------------------------------------- outputs

/// `wmhcct args…` in `dir` through bash, with `setup` (shell commands) run
/// first: for limits (`ulimit -f`) and redirections the test needs.
fn in_shell(dir: &Path, setup: &str, args: &str) -> Output {
    Command::new("bash")
        .arg("-c")
        .arg(format!("{setup}; exec \"$0\" {args}"))
        .arg(env!("CARGO_BIN_EXE_wmhcct"))
        .current_dir(dir)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_stdout_or_stderr_that_cannot_be_written_ends_no_command_in_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    convert(dir.path(), &sample(None));
    // Standard output on a full device: one line, exit 1.
    for args in [
        "slurm --ntasks 2 ./app",
        "plot report.h5 --out-dir pl",
        "report report.h5",
        "export report.h5 --format folded",
    ] {
        let o = in_shell(dir.path(), "exec >/dev/full", args);
        assert_eq!(o.status.code(), Some(1), "{args}: {}", stderr(&o));
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{args}: {err:?}");
        assert!(
            err.starts_with("wmhcct: error: <stdout>: No space left"),
            "{args}: {err:?}"
        );
    }
    // A reader that went away: quiet, exit 0.
    for args in ["slurm --ntasks 2 ./app", "plot report.h5 --out-dir pl2"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_wmhcct"))
            .args(args.split(' '))
            .current_dir(dir.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{args}: {}", stderr(&o));
        assert_eq!(stderr(&o), "", "{args}");
    }
    // Standard error on a full device: the result and the exit status
    // stand (a merge that succeeded, a budget exceeded).
    let prof = write_profile(dir.path(), "p.wmprof", &sample(None));
    let o = in_shell(dir.path(), "exec 2>/dev/full", "merge p.wmprof -o m.h5");
    assert_eq!(o.status.code(), Some(0));
    assert!(dir.path().join("m.h5").is_file());
    let o = in_shell(
        dir.path(),
        "exec >/dev/null 2>/dev/full",
        "report report.h5 --max peak=0",
    );
    assert_eq!(o.status.code(), Some(3));
    assert!(prof.is_file());
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

#[test]
fn a_write_that_fails_leaves_the_old_file_and_no_cut_one() {
    let dir = tempfile::tempdir().unwrap();
    convert(dir.path(), &sample(None));
    let whole = run(&[
        os("export"),
        dir.path().join("report.h5").as_os_str(),
        os("--format"),
        os("json"),
    ]);
    assert!(
        whole.stdout.len() > 2048,
        "the export must outgrow the limit"
    );
    // Files may grow to 1 KiB (bash's `ulimit -f` counts KiB); SIGXFSZ
    // ignored, so a write past it fails with EFBIG.
    let limit = "trap '' XFSZ; ulimit -f 1";
    std::fs::write(dir.path().join("out.json"), "old").unwrap();
    std::fs::write(dir.path().join("job.sbatch"), "old").unwrap();
    let o = in_shell(
        dir.path(),
        limit,
        "export report.h5 --format json -o out.json",
    );
    assert_one_line_error(&o, Path::new("out.json"));
    assert_eq!(std::fs::read(dir.path().join("out.json")).unwrap(), b"old");
    // Plots: none cut, and the error names the picture.
    std::fs::create_dir(dir.path().join("pl")).unwrap();
    let o = in_shell(dir.path(), limit, "plot report.h5 --out-dir pl");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err:?}");
    assert!(err.starts_with("wmhcct: error: pl/"), "{err:?}");
    assert!(err.contains("File too large"), "{err:?}");
    assert!(!err.contains("Error("), "debug text: {err:?}");
    for name in names_in(&dir.path().join("pl")) {
        let len = std::fs::metadata(dir.path().join("pl").join(&name))
            .unwrap()
            .len();
        assert!(!name.starts_with('.'), "temporary file left: {name}");
        // Whatever was written before the limit was met is whole.
        assert!(len <= 1024, "{name}: {len} bytes");
    }
    assert_eq!(
        names_in(dir.path()),
        ["job.sbatch", "out.json", "pl", "report.h5"]
    );
}

#[test]
fn export_refuses_its_input_as_its_output() {
    let dir = tempfile::tempdir().unwrap();
    let report = convert(dir.path(), &sample(None));
    let before = std::fs::read(&report).unwrap();
    let o = run(&[
        os("export"),
        report.as_os_str(),
        os("--format"),
        os("folded"),
        os("-o"),
        report.as_os_str(),
    ]);
    let err = assert_one_line_error(&o, &report);
    assert!(err.contains("is also an input"), "{err}");
    assert_eq!(std::fs::read(&report).unwrap(), before);
}

#[test]
fn merge_and_convert_refuse_one_process_given_twice() {
    let dir = tempfile::tempdir().unwrap();
    let p = sample(None);
    let a = write_profile(dir.path(), "rank-0.wmprof", &p);
    let copy = write_profile(dir.path(), "copy.wmprof", &p);
    let out = dir.path().join("job.h5");
    for cmd in ["merge", "convert"] {
        let o = run(&[
            os(cmd),
            a.as_os_str(),
            copy.as_os_str(),
            os("-o"),
            out.as_os_str(),
        ]);
        let err = assert_one_line_error(&o, &a);
        assert!(
            err.contains("the same process's profile as") && err.contains("copy.wmprof (pid 4242"),
            "{err}"
        );
        // `-` named twice, or fed a file also named.
        for args in [vec!["-", "-"], vec!["-", "rank-0.wmprof"]] {
            let o = Command::new(env!("CARGO_BIN_EXE_wmhcct"))
                .arg(cmd)
                .args(&args)
                .args(["-o", "job.h5"])
                .current_dir(dir.path())
                .stdin(std::fs::File::open(&a).unwrap())
                .output()
                .unwrap();
            let err = assert_one_line_error(&o, Path::new("standard input"));
            assert!(
                err.contains("given more than once") || err.contains("same process"),
                "{cmd} {args:?}: {err}"
            );
        }
        assert!(!out.exists());
    }
}

#[test]
fn diff_finds_a_missing_input_before_it_waits_on_a_fifo() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("nobody-writes");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let missing = dir.path().join("missing.h5");
    let mut child = wmhcct()
        .arg("diff")
        .arg(&fifo)
        .arg(&missing)
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(20) {
            let _ = child.kill();
            // Unblock it for good measure, then fail.
            let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
            panic!("diff waited on the FIFO");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    let err = assert_one_line_error(&o, &missing);
    assert!(err.contains("No such file"), "{err}");
}

#[test]
fn run_refuses_option_values_the_tracer_would_not_take() {
    let dir = tempfile::tempdir().unwrap();
    let Some(lib) = empty_lib(dir.path()) else {
        eprintln!("gcc unavailable: skipped");
        return;
    };
    let marker = dir.path().join("ran");
    for (args, named) in [
        (vec!["--unwind", "sideways"], "'--unwind'"),
        (vec!["--phi", "2"], "'--phi'"),
        (vec!["--epsilon", "0"], "'--epsilon'"),
        // ε above the φ in force (the default 1e-4).
        (vec!["--epsilon", "0.001"], "'--epsilon'"),
    ] {
        let o = wmhcct()
            .arg("run")
            .args(&args)
            .arg("--lib")
            .arg(&lib)
            .args(["--", "touch"])
            .arg(&marker)
            .env_remove("WMHCCT_PHI")
            .output()
            .unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(named) && err.contains("expected"), "{err}");
        // `run`'s usage, as for clap's own errors on its options.
        assert!(err.contains("Usage: wmhcct run "), "{err}");
        assert!(!marker.exists(), "{args:?}: the command ran");
    }
    // ε within a φ given by option or by the environment.
    for (args, env_phi) in [
        (vec!["--phi", "0.01", "--epsilon", "0.001"], None),
        (vec!["--epsilon", "0.001"], Some("0.01")),
    ] {
        let mut cmd = wmhcct();
        cmd.arg("run")
            .args(&args)
            .arg("--lib")
            .arg(&lib)
            .args(["--", "true"]);
        match env_phi {
            Some(v) => cmd.env("WMHCCT_PHI", v),
            None => cmd.env_remove("WMHCCT_PHI"),
        };
        let o = cmd.output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn a_report_whose_name_is_not_utf8_is_written_and_read() {
    use std::os::unix::ffi::OsStrExt as _;
    let dir = tempfile::tempdir().unwrap();
    let prof = write_profile(dir.path(), "p.wmprof", &sample(None));
    let sub = dir.path().join(std::ffi::OsStr::from_bytes(b"runs-\xfd"));
    std::fs::create_dir(&sub).unwrap();
    let report = sub.join(std::ffi::OsStr::from_bytes(b"r\xff.h5"));
    let o = run(&[
        os("convert"),
        prof.as_os_str(),
        os("-o"),
        report.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r = report_json(&report, &[]);
    assert_eq!(r["pid"], sample(None).meta.pid);
    let o = run(&[os("diff"), report.as_os_str(), report.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn a_library_path_with_a_space_is_refused_and_a_link_to_it_is_taken() {
    let dir = tempfile::tempdir().unwrap();
    let spaced = dir.path().join("my tools");
    std::fs::create_dir(&spaced).unwrap();
    let Some(lib) = empty_lib(&spaced) else {
        eprintln!("gcc unavailable: skipped");
        return;
    };
    let marker = dir.path().join("ran");
    let o = wmhcct()
        .arg("run")
        .arg("--lib")
        .arg(&lib)
        .args(["--", "touch"])
        .arg(&marker)
        .output()
        .unwrap();
    let err = assert_one_line_error(&o, &lib);
    assert!(
        err.contains("LD_PRELOAD cannot name a path with a space"),
        "{err}"
    );
    assert!(!marker.exists(), "the command ran untraced");
    let o = wmhcct()
        .args(["slurm", "--ntasks", "2", "--lib"])
        .arg(&lib)
        .arg("./app")
        .output()
        .unwrap();
    assert_one_line_error(&o, &lib);
    // Through a link to its directory, the link's path is preloaded.
    let link = dir.path().join("tools");
    std::os::unix::fs::symlink(&spaced, &link).unwrap();
    let o = wmhcct()
        .arg("run")
        .arg("--lib")
        .arg(link.join("libwmhcct.so"))
        .args(["--", "sh", "-c", "echo $LD_PRELOAD"])
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        String::from_utf8(o.stdout).unwrap().trim(),
        link.join("libwmhcct.so").to_string_lossy()
    );
}

#[test]
fn a_report_that_cannot_be_made_says_why_in_plain_words() {
    let dir = tempfile::tempdir().unwrap();
    write_profile(dir.path(), "p.wmprof", &sample(None));
    for (setup, out, why) in [
        (
            "true",
            "missing/r.h5",
            "No such file or directory (os error 2)",
        ),
        (
            "trap '' XFSZ; ulimit -f 1",
            "r.h5",
            "File too large (os error 27)",
        ),
    ] {
        let o = in_shell(dir.path(), setup, &format!("convert p.wmprof -o {out}"));
        let err = assert_one_line_error(&o, Path::new(out));
        assert!(err.trim_end().ends_with(why), "{err}");
        for internal in ["flags", "errno", "time =", "buf =", "H5F"] {
            assert!(!err.contains(internal), "libhdf5's internals: {err}");
        }
    }
    assert_eq!(names_in(dir.path()), ["p.wmprof"]);
}

/// Option values that cannot be right are usage errors (exit 2, clap's
/// one line naming the option and what it takes), checked before any file
/// is read: `slurm --time abc` exited 1 after building the job, and `plot
/// --top 0` drew one bar without a word.
#[test]
fn bad_option_values_are_usage_errors() {
    let cases: [(&[&str], &str); 3] = [
        (
            &["slurm", "--ntasks", "2", "--time", "abc", "--", "./app"],
            "invalid value 'abc' for '--time <TIME>': not a Slurm time (MIN, MIN:SEC, H:M:S, D-H, D-H:M, D-H:M:S)",
        ),
        (
            &["slurm", "--ntasks", "2", "--partition", "a b", "--", "./app"],
            "invalid value 'a b' for '--partition <PARTITION>': use letters, digits and _ - . , +",
        ),
        (
            &["plot", "/nonexistent.h5", "--out-dir", "/nonexistent", "--top", "0"],
            "invalid value '0' for '--top <TOP>': give at least 1",
        ),
    ];
    for (args, says) in cases {
        let out = wmhcct().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.starts_with(&format!("error: {says}\n")),
            "{args:?}: {err}"
        );
    }
    let ok = wmhcct()
        .args([
            "slurm",
            "--ntasks",
            "2",
            "--time",
            "1-02:30",
            "--partition",
            "debug",
            "--",
            "./app",
        ])
        .output()
        .unwrap();
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
}

/// `diff --top 0`: the totals and how many contexts changed, without a
/// heading for a list of none (it said "the 0 largest changes:").
#[test]
fn diff_top_zero_gives_the_totals_without_an_empty_list() {
    let dir = tempfile::tempdir().unwrap();
    let a = write_profile(dir.path(), "a.wmprof", &sample(None));
    let mut more = sample(None);
    more.trees[0].nodes[4].count = 60;
    more.trees[0].nodes[4].bytes = 600;
    let b = write_profile(dir.path(), "b.wmprof", &more);
    let text = |top: &str| {
        let o = run(&[
            os("diff"),
            a.as_os_str(),
            b.as_os_str(),
            os("--top"),
            os(top),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let none = text("0");
    assert!(none.contains(" contexts changed ("), "{none}");
    assert!(!none.contains("largest"), "{none}");
    let one = text("1");
    assert!(one.contains("; the 1 largest changes:\n"), "{one}");
    assert!(one.contains("calloc"), "{one}");
}
