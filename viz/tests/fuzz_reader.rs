//! Fuzzing the HDF5 report reader (issue 8): a real report written by
//! `wmhcct convert`, with bytes overwritten, zeroed or cut at pseudo-random
//! places (fixed seed), is read by `wmhcct report --json` and
//! `wmhcct export`. Whatever the damage, the command either succeeds or
//! fails with one line on stderr naming the file — never a panic, never a
//! crash by signal (the HDF5 C library included), never a hang.
//!
//! HDF5 files without the seal (foreign files written by h5py, our own
//! reports with the seal stripped), damaged the same ways, go through
//! libhdf5 in a child process (viz/src/h5child.rs); the same holds for
//! them, although libhdf5 crashes or loops on some (counted and printed).
//!
//! The profile reader (`.wmprof`) is fuzzed in-process by
//! format/tests/fuzz_decode.rs; here the same files also go through the
//! binary once (`report`, `convert`) for the end-to-end path.
//! WMHCCT_FUZZ_CASES sets the number of mutated reports (default 120);
//! WMHCCT_FUZZ_KEEP=DIR keeps a copy of each in DIR.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use wmhcct_format::*;

fn profile() -> Profile {
    let mut p = Profile::default();
    p.meta.program = "/bin/true".into();
    p.meta.args = vec!["true".into()];
    p.meta.hostname = "fuzz".into();
    p.meta.reason = "exit".into();
    p.meta.tracer_version = "0.1.0".into();
    p.config.unwind = "second".into();
    p.config.phi = 1e-4;
    p.config.epsilon = 2e-5;
    p.modules.push(Module {
        path: "/bin/true".into(),
        build_id: String::new(),
        bias: 0x1000,
        start: 0x1000,
        end: 0x9000,
    });
    let mut t = Tree {
        name: "alloc".into(),
        total_count: 0,
        total_bytes: 0,
        capacity: 100,
        nodes: vec![Node::root()],
        spread: Vec::new(),
        floor: None,
    };
    // 40 contexts: root -> frame f -> frame g -> malloc.
    for f in 0..8u64 {
        let mut a = Node::root();
        a.parent = 0;
        a.key = FrameKey::Addr {
            module: 0,
            offset: 0x100 + f * 0x10,
        };
        t.nodes.push(a);
        let ai = (t.nodes.len() - 1) as u32;
        for g in 0..5u64 {
            let mut b = Node::root();
            b.parent = ai;
            b.key = FrameKey::Addr {
                module: 0,
                offset: 0x800 + g * 0x10,
            };
            t.nodes.push(b);
            let bi = (t.nodes.len() - 1) as u32;
            let mut leaf = Node::root();
            leaf.parent = bi;
            leaf.key = FrameKey::Kind(AllocKind::Malloc as u16);
            leaf.count = 10 + f * 5 + g;
            leaf.bytes = leaf.count * 64;
            t.total_count += leaf.count;
            t.total_bytes += leaf.bytes;
            t.nodes.push(leaf);
        }
    }
    p.totals = ALLOC_KINDS
        .iter()
        .map(|k| KindTotal {
            kind: k.to_string(),
            count: if *k == "malloc" { t.total_count } else { 0 },
            bytes: if *k == "malloc" { t.total_bytes } else { 0 },
        })
        .collect();
    p.trees.push(t);
    p
}

/// Exit code reported for a run killed after `HANG`.
const HUNG: i32 = -1;
const HANG: Duration = Duration::from_secs(5);

fn wmhcct(args: &[&std::ffi::OsStr]) -> (i32, String, String, Duration) {
    wmhcct_limited(args, &[], HANG)
}

/// `wmhcct args` with extra environment `env`, killed after `hang`
/// (exit code `HUNG`). A death by signal gives 128 + the signal.
fn wmhcct_limited(
    args: &[&std::ffi::OsStr],
    env: &[(&str, &str)],
    hang: Duration,
) -> (i32, String, String, Duration) {
    use std::os::unix::process::ExitStatusExt;
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_wmhcct"))
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn wmhcct");
    // Outputs are small (well under a pipe's buffer): wait with a limit.
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if start.elapsed() > hang {
            let _ = child.kill();
            let _ = child.wait();
            return (HUNG, String::new(), String::new(), start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let out = child.wait_with_output().expect("output");
    let code = out
        .status
        .code()
        .unwrap_or_else(|| 128 + out.status.signal().unwrap_or(0));
    (
        code,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        start.elapsed(),
    )
}

/// Outcome of one command on a damaged file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Read,
    Rejected,
    /// Killed by a signal (inside libhdf5, see below).
    Hdf5Crash,
    /// Still running after `HANG` (looping inside libhdf5, see below).
    Hdf5Hang,
}

/// Run `wmhcct args` on a damaged `file`: success, or one line naming the
/// file; never a panic. A crash by signal fails the test when `strict`,
/// else it is returned (for the HDF5 reads, see below).
fn check(args: &[&std::ffi::OsStr], file: &Path, what: &str, strict: bool) -> Verdict {
    let (code, _stdout, stderr, _) = wmhcct(args);
    let ctx = format!("{what}: wmhcct {args:?}: exit {code}\n{stderr}");
    if code == HUNG {
        assert!(!strict, "hung: {ctx}");
        return Verdict::Hdf5Hang;
    }
    if code >= 128 {
        assert!(!strict, "killed by a signal: {ctx}");
        assert!(
            !stderr.contains("panicked"),
            "panic before the crash: {ctx}"
        );
        return Verdict::Hdf5Crash;
    }
    assert!(
        !stderr.contains("panicked") && !stderr.contains("stack backtrace"),
        "panic: {ctx}"
    );
    if code != 0 {
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "one line: {ctx}");
        assert!(
            lines[0].contains(&*file.to_string_lossy()),
            "names the file: {ctx}"
        );
    }
    if code == 0 {
        Verdict::Read
    } else {
        Verdict::Rejected
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn setup() -> (tempfile::TempDir, PathBuf, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let prof = dir.path().join("p.wmprof");
    std::fs::write(&prof, encode(&profile()).unwrap()).unwrap();
    let h5 = dir.path().join("r.h5");
    let (code, _, err, _) = wmhcct(&[
        "convert".as_ref(),
        prof.as_os_str(),
        "-o".as_ref(),
        h5.as_os_str(),
    ]);
    assert_eq!(code, 0, "convert: {err}");
    let bytes = std::fs::read(&h5).unwrap();
    (dir, h5, bytes)
}

/// Damaged reports. Rust-side failures (panic, a message of more than one
/// line or not naming the file) fail the test, and so does any crash by
/// signal or hang: reports carry a checksum seal (viz/src/seal.rs) checked
/// before libhdf5 opens them, because Debian's libhdf5 1.10 segfaults or
/// loops on some damaged files (`H5HG_read` through a corrupted global-heap
/// reference), which wmhcct could not intercept once HDF5 has the file.
#[test]
fn mutated_reports_never_crash_the_reader() {
    let (dir, h5, original) = setup();
    assert_eq!(
        check(
            &["report".as_ref(), h5.as_os_str(), "--json".as_ref()],
            &h5,
            "original",
            true
        ),
        Verdict::Read
    );
    let cases: usize = std::env::var("WMHCCT_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(120);
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let mut tally: std::collections::BTreeMap<(&str, &str), usize> = Default::default();
    let mut crashes = 0;
    let start = Instant::now();
    for case in 0..cases {
        let mut b = original.clone();
        let kind = match case % 4 {
            0 => {
                // A few random bytes anywhere.
                for _ in 0..1 + rng.below(8) {
                    let i = rng.below(b.len());
                    b[i] = rng.next() as u8;
                }
                "bytes overwritten"
            }
            1 => {
                // A zeroed block (a lost page).
                let len = 1 + rng.below(512);
                let at = rng.below(b.len().saturating_sub(len));
                b[at..at + len].fill(0);
                "block zeroed"
            }
            2 => {
                // Cut anywhere.
                b.truncate(rng.below(b.len()));
                "truncated"
            }
            _ => {
                // One bit in the first 4 KiB (superblock, root group,
                // object headers live there).
                let i = rng.below(b.len().min(4096));
                b[i] ^= 1 << rng.below(8);
                "bit flipped in the metadata"
            }
        };
        let f = dir.path().join(format!("m{case}.h5"));
        std::fs::write(&f, &b).unwrap();
        if let Some(keep) = std::env::var_os("WMHCCT_FUZZ_KEEP") {
            std::fs::write(Path::new(&keep).join(format!("m{case}.h5")), &b).unwrap();
        }
        let what = format!("case {case} ({kind})");
        let strict = kind == "truncated";
        for args in [
            vec!["report".as_ref(), f.as_os_str(), "--json".as_ref()],
            vec![
                "export".as_ref(),
                f.as_os_str(),
                "--format".as_ref(),
                "folded".as_ref(),
            ],
        ] {
            let v = check(&args, &f, &what, strict);
            let verdict = match v {
                Verdict::Read => "read",
                Verdict::Rejected => "rejected with one line",
                Verdict::Hdf5Crash => {
                    crashes += 1;
                    "crashed in libhdf5"
                }
                Verdict::Hdf5Hang => {
                    crashes += 1;
                    "hung in libhdf5 (killed after 5 s)"
                }
            };
            *tally.entry((kind, verdict)).or_default() += 1;
        }
        let _ = std::fs::remove_file(&f);
    }
    eprintln!(
        "[reliability] fuzz_reader: {cases} damaged reports of {} bytes, 2 commands each, in {:.1} s:",
        original.len(),
        start.elapsed().as_secs_f64()
    );
    for ((kind, verdict), n) in &tally {
        eprintln!("[reliability] fuzz_reader:   {kind}: {verdict}: {n}");
    }
    assert_eq!(crashes, 0, "crashes or hangs in {} runs", cases * 2);
}

#[test]
fn mutated_profiles_through_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = encode(&profile()).unwrap();
    let mut rng = Rng(42);
    for case in 0..40 {
        let mut b = bytes.clone();
        for _ in 0..1 + rng.below(4) {
            let i = rng.below(b.len());
            b[i] = rng.next() as u8;
        }
        if case % 5 == 0 {
            b.truncate(rng.below(b.len()));
        }
        let f = dir.path().join(format!("m{case}.wmprof"));
        std::fs::write(&f, &b).unwrap();
        let what = format!("profile case {case}");
        check(
            &["report".as_ref(), f.as_os_str(), "--json".as_ref()],
            &f,
            &what,
            true,
        );
        let out = dir.path().join(format!("m{case}.h5"));
        check(
            &[
                "convert".as_ref(),
                f.as_os_str(),
                "-o".as_ref(),
                out.as_os_str(),
            ],
            &f,
            &what,
            true,
        );
    }
}

/// Foreign HDF5 files written by h5py (not by wmhcct, so without a seal):
/// groups, attributes, variable-length strings (the global heap Debian's
/// libhdf5 crashed on), a compound table, a chunked gzip dataset; the
/// second one looks like a report (`format_version` = 1) so the reader
/// goes deeper into it.
fn foreign_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let script = r#"
import sys, h5py, numpy as np
s = h5py.string_dtype('utf-8')
for i, name in enumerate(sys.argv[1:]):
    with h5py.File(name, 'w') as f:
        if i == 1:
            f.attrs['format_version'] = np.uint32(1)
            f.attrs['program'] = '/bin/foreign'
        f.attrs['title'] = 'not a wmhcct report'
        f.attrs['names'] = np.array(['alpha', 'beta', 'gamma'], dtype=s)
        g = f.create_group('trees/alloc')
        g.attrs['index'] = np.uint32(0)
        g.create_dataset('strings', data=np.array(['s%d' % k * (k % 7 + 1) for k in range(60)], dtype=s))
        rows = np.zeros(50, dtype=[('parent', '<u4'), ('addr', '<u8'), ('name', s)])
        rows['parent'] = np.arange(50)
        rows['addr'] = np.arange(50) * 16
        rows['name'] = ['f%d' % k for k in range(50)]
        f.create_dataset('config', data=rows)
        f.create_dataset('chunked', data=np.arange(4000, dtype='<u8'), chunks=(500,), compression='gzip')
        f.create_group('heap').attrs['peak'] = np.uint64(12345)
"#;
    let names = ["foreign.h5", "lookalike.h5"];
    let paths: Vec<PathBuf> = names.iter().map(|n| dir.join(n)).collect();
    let out = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(script)
        .args(&paths)
        .output()
        .expect("run /usr/bin/python3");
    assert!(
        out.status.success(),
        "h5py (run scripts/setup.sh): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    names
        .iter()
        .zip(&paths)
        .map(|(n, p)| (n.to_string(), std::fs::read(p).unwrap()))
        .collect()
}

/// Length of the seal wmhcct appends to its reports (viz/src/seal.rs).
const SEAL: usize = 24;

/// A report without its seal: as a report written before the seal, or one
/// whose tail another tool rewrote.
fn unsealed(sealed: &[u8]) -> Vec<u8> {
    assert_eq!(&sealed[sealed.len() - SEAL..][..8], b"WMHCSEA2");
    sealed[..sealed.len() - SEAL].to_vec()
}

/// Deterministic damage to `b`: `(kind, damaged bytes)`, about 110 cases.
fn damaged(b: &[u8], rng: &mut Rng) -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    let head = b.len().min(4096);
    // One bit at 40 evenly spaced offsets of the metadata-rich head…
    for k in 0..40 {
        let mut m = b.to_vec();
        m[k * head / 40 + k % 3] ^= 1 << (k % 8);
        out.push(("bit flipped in the first 4 KiB", m));
    }
    // …and at 20 offsets over the whole file.
    for k in 0..20 {
        let mut m = b.to_vec();
        m[(k * b.len() / 20 + 7).min(b.len() - 1)] ^= 0x80 >> (k % 8);
        out.push(("bit flipped anywhere", m));
    }
    // A byte set to 0xff (addresses and lengths become huge).
    for _ in 0..15 {
        let mut m = b.to_vec();
        let i = rng.below(b.len());
        m[i] = 0xff;
        out.push(("byte set to 0xff", m));
    }
    // Cut at 15 places.
    for k in 1..=15 {
        out.push(("truncated", b[..k * b.len() / 16].to_vec()));
    }
    // A zeroed range (a lost page), 20 places and lengths.
    for _ in 0..20 {
        let mut m = b.to_vec();
        let len = 1 + rng.below(512);
        let at = rng.below(b.len().saturating_sub(len));
        m[at..at + len].fill(0);
        out.push(("range zeroed", m));
    }
    out
}

/// Time the CLI gives its libhdf5 child in these tests, and the harness's
/// own limit on the whole command (longer: a timeout must be reported by
/// wmhcct, not by the harness).
const CHILD_LIMIT: &str = "4";
const HARNESS_LIMIT: Duration = Duration::from_secs(20);

/// Damaged HDF5 files without a seal (foreign files, our own reports with
/// the seal stripped) go to libhdf5 in a child process (viz/src/h5child.rs):
/// whatever the damage, `wmhcct report` must exit 0 with a valid report or
/// 1 with exactly one line naming the file — never die by a signal, hang,
/// panic or print a backtrace, even where libhdf5 crashes or loops.
#[test]
fn damaged_unsealed_hdf5_never_crashes_the_cli() {
    let (dir, _h5, sealed) = setup();
    let mut bases = foreign_files(dir.path());
    bases.push(("unsealed report".into(), unsealed(&sealed)));
    let mut rng = Rng(0xf0e1_d2c3_b4a5_9687);
    let mut tally: std::collections::BTreeMap<(String, &str, &str), usize> = Default::default();
    let mut failures = Vec::new();
    let mut cases = 0;
    let start = Instant::now();
    for (base, bytes) in &bases {
        let ours = base == "unsealed report";
        for (kind, b) in damaged(bytes, &mut rng) {
            let f = dir.path().join(format!("u{cases}.h5"));
            std::fs::write(&f, &b).unwrap();
            if let Some(keep) = std::env::var_os("WMHCCT_FUZZ_KEEP") {
                std::fs::write(Path::new(&keep).join(format!("u{cases}.h5")), &b).unwrap();
            }
            cases += 1;
            let (code, stdout, stderr, took) = wmhcct_limited(
                &["report".as_ref(), f.as_os_str(), "--json".as_ref()],
                &[("WMHCCT_READ_TIMEOUT", CHILD_LIMIT)],
                HARNESS_LIMIT,
            );
            let lines: Vec<&str> = stderr.lines().collect();
            let ok = match code {
                0 => ours && serde_json::from_str::<serde_json::Value>(&stdout).is_ok(),
                1 => {
                    lines.len() == 1
                        && lines[0].starts_with("wmhcct: error: ")
                        && lines[0].contains(&*f.to_string_lossy())
                }
                _ => false,
            } && !stderr.contains("panicked")
                && !stderr.to_lowercase().contains("backtrace");
            if !ok {
                failures.push(format!(
                    "{base}, case {cases} ({kind}): exit {code} after {took:?}, stderr {stderr:?}"
                ));
            }
            let verdict = match code {
                _ if !ok => "FAILED",
                0 => "read",
                _ if stderr.contains("crashed") => "rejected: libhdf5 crashed in the child",
                _ if stderr.contains("did not finish") => "rejected: libhdf5 hung in the child",
                _ => "rejected with one line",
            };
            *tally.entry((base.clone(), kind, verdict)).or_default() += 1;
            let _ = std::fs::remove_file(&f);
        }
    }
    eprintln!(
        "[reliability] fuzz_reader: {cases} damaged unsealed HDF5 files, `report --json` each, in {:.1} s:",
        start.elapsed().as_secs_f64()
    );
    for ((base, kind, verdict), n) in &tally {
        eprintln!("[reliability] fuzz_reader:   {base}: {kind}: {verdict}: {n}");
    }
    assert!(cases >= 300, "{cases} cases");
    assert!(
        failures.is_empty(),
        "{} of {cases} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// An intact report without its seal is read by the child process and
/// gives exactly what the sealed report gives, in every output.
#[test]
fn unsealed_report_reads_like_the_sealed_one() {
    let (dir, sealed_path, sealed) = setup();
    let bare = dir.path().join("bare.h5");
    std::fs::write(&bare, unsealed(&sealed)).unwrap();
    let same = |args: &[&str]| {
        let run = |f: &Path| {
            let mut a: Vec<&std::ffi::OsStr> = vec![args[0].as_ref(), f.as_os_str()];
            a.extend(args[1..].iter().map(std::ffi::OsStr::new));
            let (code, out, err, _) = wmhcct(&a);
            assert_eq!((code, err.as_str()), (0, ""), "wmhcct {a:?}");
            out
        };
        let (a, b) = (run(&sealed_path), run(&bare));
        assert!(!a.is_empty(), "{args:?}: no output");
        assert_eq!(a, b, "{args:?}: sealed and unsealed reports differ");
    };
    same(&["report"]);
    same(&["report", "--json"]);
    same(&["export", "--format", "folded"]);
    same(&["export", "--format", "folded", "--weight", "count"]);
    // Both sides of a diff through the child.
    let (code, out, err, _) = wmhcct(&[
        "diff".as_ref(),
        bare.as_os_str(),
        bare.as_os_str(),
        "--json".as_ref(),
    ]);
    assert_eq!(code, 0, "diff: {err}");
    assert!(serde_json::from_str::<serde_json::Value>(&out).is_ok());
}

/// The child's subcommand is internal: not in `--help`.
#[test]
fn internal_subcommand_is_not_listed() {
    let (code, out, err, _) = wmhcct(&["--help".as_ref()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("report"), "{out}");
    assert!(!out.contains("__read-report"), "{out}");
}

/// A string that is not UTF-8 in a report (a damaged or foreign file:
/// wmhcct writes only UTF-8) reads with U+FFFD in its place. HDF5's strings
/// were taken as UTF-8 unchecked: in this process such a report read, but
/// through the isolated reader (an unsealed file) it failed with "profile
/// body is corrupt: string is not valid utf8".
#[test]
fn a_string_that_is_not_utf8_reads_with_a_replacement_character() {
    let (dir, _h5, sealed) = setup();
    let mut bytes = unsealed(&sealed);
    let at = bytes
        .windows(4)
        .position(|w| w == b"fuzz")
        .expect("the hostname's bytes");
    bytes[at] = 0xd2;
    let bad = dir.path().join("not-utf8.h5");
    std::fs::write(&bad, &bytes).unwrap();
    let (code, out, err, _) = wmhcct(&["report".as_ref(), "--json".as_ref(), bad.as_os_str()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"hostname\": \"\u{FFFD}uzz\""), "{out}");
}
