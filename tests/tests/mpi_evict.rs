//! Bounded per-rank summaries that must evict, merged across ranks, against
//! the exact mode: tests/programs/mpi_evict.c runs 2048 distinct call paths
//! (Zipf-distributed, hot spot shifted per rank, the same sequence in every
//! run) on 4 ranks, once with WMHCCT_EXACT=1 and once with φ = 0.01,
//! ε = 0.002 (⌈1/ε⌉ = 500 counters per weight, far fewer than the contexts of
//! one rank). Every context whose exact count is at least φN (N: the job's
//! allocation events), or whose exact bytes are at least φB, is in the
//! bounded report, its estimate never below the truth and the truth within
//! its recorded error.

mod mpi_common;

use std::collections::HashMap;

use mpi_common::*;
use wmhcct_e2e::*;

const P: u64 = 4;
const EVENTS: u64 = 50_000;
const CODES: usize = 2048;
const PHI: f64 = 0.01;
const EPSILON: f64 = 0.002;

type Key = (String, Vec<(String, String)>);

/// A context's identity across two runs of the same binary: kind and
/// (module, module-relative address) of every frame.
fn key(c: &Value) -> Key {
    let frames = c["stack"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["module"].as_str().unwrap_or("").to_string(),
                f["address"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    (c["kind"].as_str().unwrap().to_string(), frames)
}

fn is_alloc(c: &Value) -> bool {
    ALLOCATING.iter().any(|k| c["kind"] == *k)
}

/// (events, bytes) of the allocation tree, from the exact totals.
fn weights(r: &Value) -> (u64, u64) {
    ALLOCATING
        .iter()
        .filter(|k| r["totals"][**k].is_object())
        .fold((0, 0), |(n, b), k| {
            (n + total_count(r, k), b + total_bytes(r, k))
        })
}

fn run(dir: &WorkDir, exe: &std::path::Path, name: &str, env: &[(&str, &str)]) -> Value {
    let report = dir.join(name);
    let events = EVENTS.to_string();
    let mut env = env.to_vec();
    // DWARF unwinding: the same stacks in both runs.
    env.push(("WMHCCT_UNWIND", "full"));
    let out = launch(
        Launcher::OpenMpi,
        P as u32,
        exe,
        &[&events],
        &dir.path,
        Some(&report),
        &env,
    );
    assert_clean_job(&out, &report);
    report_json(&report)
}

#[test]
fn hot_contexts_survive_evicting_per_rank_summaries() {
    let dir = WorkDir::new("mpi-evict");
    let exe = mpi_compile("mpicc", "mpi_evict.c", &dir.path, &["-lm"]);
    let exact = run(&dir, &exe, "exact.h5", &[("WMHCCT_EXACT", "1")]);
    let phi = PHI.to_string();
    let eps = EPSILON.to_string();
    let bounded = run(
        &dir,
        &exe,
        "bounded.h5",
        &[("WMHCCT_PHI", &phi), ("WMHCCT_EPSILON", &eps)],
    );
    assert_eq!(exact["ranks"], P);
    assert_eq!(bounded["ranks"], P);
    assert_eq!(exact["config"]["exact"], true);
    assert_eq!(bounded["config"]["exact"], false);
    assert_eq!(bounded["config"]["epsilon"].as_f64(), Some(EPSILON));

    // The exact report has every one of the program's contexts.
    let prog = |c: &&Value| frame_index(c, "leaf").is_some() && c["kind"] == "malloc";
    let exact_prog: Vec<&Value> = contexts(&exact).iter().filter(prog).collect();
    assert_eq!(exact_prog.len(), CODES, "{}", summary(&exact));
    assert_eq!(
        exact_prog.iter().map(|c| u64_of(&c["count"])).sum::<u64>(),
        P * EVENTS
    );
    // Each rank alone has more contexts than the bounded summary's
    // 1/ε = 500 counters: the summaries evicted.
    let capacity = (1.0 / EPSILON).ceil() as u64;
    let on_every_rank = exact_prog
        .iter()
        .filter(|c| u64_of(&c["per_rank_count"]["min"]) > 0)
        .count() as u64;
    assert!(
        on_every_rank > capacity,
        "{on_every_rank} contexts on every rank"
    );
    assert!(
        contexts(&bounded)
            .iter()
            .any(|c| u64_of(&c["count_err"]) > 0),
        "no eviction error anywhere: {}",
        summary(&bounded)
    );
    assert!(contexts(&bounded).len() < contexts(&exact).len() / 10);

    // Totals stay exact; N and B are the same in both runs up to MPI's own
    // run-to-run variation.
    let (ne, be) = weights(&exact);
    let (nb, bb) = weights(&bounded);
    assert!(ne.abs_diff(nb) * 50 < ne, "allocation events {ne} vs {nb}");
    let n = ne.max(nb) as f64;
    let b = be.max(bb) as f64;

    let by_key: HashMap<Key, &Value> = contexts(&bounded)
        .iter()
        .filter(|c| is_alloc(c))
        .map(|c| (key(c), c))
        .collect();
    let mut hot = 0;
    let mut problems = Vec::new();
    for c in contexts(&exact).iter().filter(|c| is_alloc(c)) {
        let (count, bytes) = (u64_of(&c["count"]), u64_of(&c["bytes"]));
        let hot_count = count as f64 >= PHI * n;
        let hot_bytes = bytes as f64 >= PHI * b;
        if !hot_count && !hot_bytes {
            continue;
        }
        hot += 1;
        let Some(got) = by_key.get(&key(c)) else {
            problems.push(format!(
                "missing hot context (count {count} ≥ φN = {:.0}: {hot_count}, bytes {bytes} ≥ φB = {:.0}: {hot_bytes}): {}",
                PHI * n,
                PHI * b,
                stack_names(c).join(" < ")
            ));
            continue;
        };
        let (gc, ge) = (u64_of(&got["count"]), u64_of(&got["count_err"]));
        let (gb, gbe) = (u64_of(&got["bytes"]), u64_of(&got["bytes_err"]));
        if !(gc >= count && gc - ge <= count) {
            problems.push(format!(
                "count {gc} (err {ge}) does not bound the exact {count}"
            ));
        }
        if !(gb >= bytes && gb - gbe <= bytes) {
            problems.push(format!(
                "bytes {gb} (err {gbe}) do not bound the exact {bytes}"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // Zipf(1) over 2048 codes: each rank's top few contexts are above φN.
    assert!(hot >= 4, "only {hot} hot contexts: {}", summary(&exact));
    // The bounded report never claims less than the truth for any context
    // it lists.
    let exact_by_key: HashMap<Key, &Value> = contexts(&exact)
        .iter()
        .filter(|c| prog(c))
        .map(|c| (key(c), c))
        .collect();
    for c in contexts(&bounded).iter().filter(prog) {
        let x = exact_by_key
            .get(&key(c))
            .unwrap_or_else(|| panic!("unknown context {}", stack_names(c).join(" < ")));
        assert!(u64_of(&c["count"]) >= u64_of(&x["count"]), "{c} vs {x}");
        assert!(
            u64_of(&c["count"]) - u64_of(&c["count_err"]) <= u64_of(&x["count"]),
            "{c} vs {x}"
        );
    }
}
