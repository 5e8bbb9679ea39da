//! Acceptance test of the time series on a real traced MPI run: 4 ranks of
//! tests/programs/mpi_series.c, where rank r holds (r+1) MiB between t1 and
//! t2 (printed by the program). The job report's /series datasets, read with
//! h5py, must show each rank's peak, the bins of t1..t2 holding the block,
//! and event totals equal to the exact totals.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use wmhcct_e2e::{bin, lib, root, run_cmd, Value, WorkDir, ALLOCATING, PYTHON};

const RANKS: usize = 4;
const MIB: u64 = 1 << 20;

fn mpicc(dir: &Path) -> PathBuf {
    let exe = dir.join("mpi_series");
    let out = Command::new("mpicc")
        .current_dir(dir)
        .args(["-g", "-O1", "-fno-omit-frame-pointer", "-o"])
        .arg(&exe)
        .arg(root().join("tests/programs/mpi_series.c"))
        .output()
        .unwrap_or_else(|e| panic!("mpicc (run scripts/setup.sh): {e}"));
    assert!(
        out.status.success(),
        "mpicc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// The datasets the test checks, as JSON.
const READ: &str = r#"
import sys, json, h5py
f = h5py.File(sys.argv[1], "r")
if "series" not in f:
    print(json.dumps({"series": False})); sys.exit(0)
s = f["series"]
pr = s["per_rank"]
out = {
    "series": True,
    "start_unix_ns": int(s.attrs["start_unix_ns"]),
    "bin_ns": int(s.attrs["bin_ns"]),
    "nranks": int(s.attrs["nranks"]),
    "bins": int(s.attrs["bins"]),
    "rank": [int(x) for x in pr["rank"][:]],
    "peak_bytes": [int(x) for x in pr["peak_bytes"][:]],
    "live": [[int(x) for x in row] for row in pr["live_bytes"][:]],
    "alloc_events_sum": int(s["alloc_events_sum"][:].sum()),
    "mpi_events_sum": int(s["mpi_events_sum"][:].sum()),
    "rank_alloc_events": [int(row.sum()) for row in pr["alloc_events"][:]],
    "live_max": [int(x) for x in s["live_bytes_max"][:]],
    "samples": int(len(s["samples"])),
    "totals": {r["kind"].decode() if isinstance(r["kind"], bytes) else r["kind"]: int(r["count"]) for r in f["totals"][:]},
    "rank_peaks": [int(x) for x in f["ranks/summary"]["peak_bytes"][:]],
}
print(json.dumps(out))
"#;

#[test]
fn mpi_job_series_shows_each_ranks_block() {
    let dir = WorkDir::new("series");
    let exe = mpicc(&dir.path);
    let h5 = dir.join("job.h5");
    let mut c = Command::new("mpirun");
    c.current_dir(&dir.path)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env_remove("LD_PRELOAD")
        .args(["-np", &RANKS.to_string(), "--oversubscribe"])
        .arg("-x")
        .arg(format!("LD_PRELOAD={}", lib().display()))
        .arg("-x")
        .arg(format!("WMHCCT_BIN={}", bin().display()))
        .arg("-x")
        .arg(format!("WMHCCT_OUT={}", h5.display()))
        .arg(&exe);
    let run = run_cmd(&mut c, Duration::from_secs(180));
    assert_eq!(run.code, 0, "{}", run.describe());
    assert!(
        run.stdout.contains(&format!("done on {RANKS} ranks")),
        "{}",
        run.describe()
    );
    // rank r → (t1, t2), Unix ns.
    let mut window = [(0u64, 0u64); RANKS];
    for l in run.stdout.lines().filter(|l| l.starts_with("rank ")) {
        let w: Vec<&str> = l.split_whitespace().collect();
        let r: usize = w[1].parse().unwrap();
        window[r] = (w[3].parse().unwrap(), w[5].parse().unwrap());
    }
    assert!(
        window.iter().all(|w| w.0 > 0 && w.1 > w.0),
        "{}",
        run.stdout
    );
    assert!(h5.is_file(), "no report: {}", run.describe());

    let out = run_cmd(
        Command::new(PYTHON).arg("-c").arg(READ).arg(&h5),
        Duration::from_secs(60),
    );
    assert_eq!(out.code, 0, "h5py: {}", out.describe());
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["series"], true, "the job report has no /series group");
    let u = |x: &Value| x.as_u64().unwrap();
    let start = u(&v["start_unix_ns"]);
    let bin_ns = u(&v["bin_ns"]);
    let nbins = u(&v["bins"]) as usize;
    assert_eq!(u(&v["nranks"]), RANKS as u64);
    assert!(nbins > 0 && nbins <= 1024, "{nbins} bins");
    let ids: Vec<u64> = v["rank"].as_array().unwrap().iter().map(u).collect();
    assert_eq!(ids, (0..RANKS as u64).collect::<Vec<_>>());
    let bin_of = |t: u64| ((t.saturating_sub(start)) / bin_ns) as usize;
    for r in 0..RANKS {
        let live: Vec<u64> = v["live"][r].as_array().unwrap().iter().map(u).collect();
        assert_eq!(live.len(), nbins);
        let block = (r as u64 + 1) * MIB;
        let peak = u(&v["peak_bytes"][r]);
        // The rank's exact peak: the series' maximum, and the summary's.
        assert_eq!(peak, *live.iter().max().unwrap(), "rank {r}");
        assert_eq!(peak, u(&v["rank_peaks"][r]), "rank {r}");
        assert!(peak >= block, "rank {r}: peak {peak} < {block}");
        // Held from t1 to t2: every bin strictly inside holds the block on
        // top of what was live before t1; the bins after t2 no longer do.
        let (b1, b2) = (bin_of(window[r].0), bin_of(window[r].1));
        assert!(
            b2 > b1 + 1,
            "rank {r}: t1..t2 spans bins {b1}..{b2} of {bin_ns} ns"
        );
        let before = live[b1.saturating_sub(2)];
        let during = live[(b1 + b2) / 2];
        assert!(
            during >= before + block,
            "rank {r}: live {during} during the hold, {before} before (block {block})"
        );
        // The peak's bin is one of the hold's bins (± 1: a rank's own bin
        // can straddle two bins of the job's grid, and the maximum goes
        // into both).
        let peak_bin = live.iter().position(|&x| x == peak).unwrap();
        assert!(
            (b1 - 1..=b2 + 1).contains(&peak_bin),
            "rank {r}: peak in bin {peak_bin}, hold in bins {b1}..={b2}"
        );
        if b2 + 2 < nbins {
            let after = live[b2 + 2];
            assert!(
                after + block * 9 / 10 <= during,
                "rank {r}: live {after} after t2, {during} during"
            );
        }
        assert!(u(&v["rank_alloc_events"][r]) >= 4001, "rank {r}");
    }
    // Max across ranks: rank 3's block.
    assert!(
        *v["live_max"]
            .as_array()
            .unwrap()
            .iter()
            .map(u)
            .max()
            .as_ref()
            .unwrap()
            >= 4 * MIB
    );
    // Event totals equal the exact totals.
    let totals = v["totals"].as_object().unwrap();
    let total = |kinds: &mut dyn Iterator<Item = &str>| -> u64 {
        kinds.map(|k| totals.get(k).map_or(0, u)).sum()
    };
    let allocs = total(&mut ALLOCATING.iter().copied());
    assert_eq!(u(&v["alloc_events_sum"]), allocs, "allocations");
    let mpi_kinds: Vec<&str> = totals
        .keys()
        .map(|k| k.as_str())
        .filter(|k| k.starts_with("MPI_") && *k != "MPI_Alloc_mem" && *k != "MPI_Free_mem")
        .collect();
    let mpi = total(&mut mpi_kinds.iter().copied());
    assert!(mpi >= 10 * RANKS as u64, "MPI totals {mpi}");
    assert_eq!(u(&v["mpi_events_sum"]), mpi, "MPI events");
    assert!(u(&v["samples"]) > 0);

    // The text report's timeline, and the JSON's same columns: rank 3's
    // block stands out in the live heap's row while it is held.
    let report = run_cmd(
        Command::new(bin()).arg("report").arg(&h5).arg("--json"),
        Duration::from_secs(60),
    );
    assert_eq!(report.code, 0, "{}", report.describe());
    let j: Value = serde_json::from_str(&report.stdout).unwrap();
    let t = &j["timeline"];
    let column_ns = u(&t["column_ns"]);
    let t0 = u(&t["start_unix_ns"]);
    assert_eq!(t0, start);
    let live: Vec<u64> = t["live_bytes_max"]
        .as_array()
        .unwrap()
        .iter()
        .map(u)
        .collect();
    assert!((1..=60).contains(&live.len()), "{} columns", live.len());
    let column = |t: u64| ((t.saturating_sub(t0)) / column_ns) as usize;
    let (t1, t2) = window[RANKS - 1];
    let during = live[column(t1 / 2 + t2 / 2)];
    let block = RANKS as u64 * MIB;
    assert!(during >= block, "{live:?}");
    assert_eq!(during, *live.iter().max().unwrap(), "{live:?}");
    let first_hold = column(window.iter().map(|w| w.0).min().unwrap());
    if first_hold >= 2 {
        let before = live[first_hold - 2];
        assert!(before + block * 9 / 10 <= during, "{live:?}");
    }
    let allocs: u64 = t["alloc_events"].as_array().unwrap().iter().map(u).sum();
    assert_eq!(
        allocs,
        u(&v["alloc_events_sum"]),
        "every allocation in a column"
    );
    let mpi: u64 = t["mpi_events"].as_array().unwrap().iter().map(u).sum();
    assert_eq!(mpi, u(&v["mpi_events_sum"]));
    let text = run_cmd(
        Command::new(bin()).arg("report").arg(&h5),
        Duration::from_secs(60),
    );
    assert_eq!(text.code, 0, "{}", text.describe());
    let row = text
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("  live heap     "))
        .unwrap_or_else(|| panic!("no timeline: {}", text.stdout));
    let glyphs: Vec<char> = row.chars().take(live.len()).collect();
    assert_eq!(glyphs[column(t1 / 2 + t2 / 2)], '█', "{row}");
    assert!(row.contains("(on one rank)"), "{row}");
    assert!(
        text.stdout.contains("\n  MPI calls     "),
        "{}",
        text.stdout
    );
}
