//! Bad settings: the program runs unchanged, stderr has one line naming the
//! variable (and what is accepted), and the report is written with the
//! defaults.

use wmhcct_e2e::*;

const OUTPUT: &str = "pattern done: peak 10517760 leak 10485760\n";

fn bad_setting(var: &str, value: &str, accepted: &[&str]) -> Value {
    let w = WorkDir::new(&format!("env-{}", var.to_lowercase()));
    let exe = compile("pattern.c", &w.path, Opt::Debug, &[]);
    let h5 = w.join("pattern.h5");
    let out = run_traced(&exe, &[] as &[&str], &w.path, &h5, &[(var, value)]);
    assert_eq!(out.code, 0, "{var}={value}: {}", out.describe());
    assert_eq!(out.stdout, OUTPUT, "{var}={value}: stdout unchanged");
    let naming: Vec<&str> = out.stderr.lines().filter(|l| l.contains(var)).collect();
    assert_eq!(naming.len(), 1, "one line naming {var}:\n{}", out.stderr);
    for a in accepted {
        assert!(
            naming[0].contains(a),
            "{var} line should list the accepted values ({a}): {}",
            naming[0]
        );
    }
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    // Nothing else than that line and the closing line.
    let rest = without_closing_line(&out.stderr, &h5);
    let others: Vec<&str> = rest.lines().filter(|l| !l.contains(var)).collect();
    assert!(others.is_empty(), "unexpected stderr lines: {others:?}");
    let r = report_json(&h5);
    let leaf = context_with(&r, "malloc", "leaf_a");
    assert_eq!(u64_of(&leaf["count"]), 1000);
    r
}

fn assert_defaults(r: &Value) {
    let c = &r["config"];
    let phi = c["phi"].as_f64().unwrap();
    let eps = c["epsilon"].as_f64().unwrap();
    assert!((phi - 1e-4).abs() < 1e-12, "default phi: {c}");
    assert!((eps - 2e-5).abs() < 1e-12, "default epsilon = phi/5: {c}");
    assert_eq!(c["unwind"], "second", "default unwind: {c}");
    assert_eq!(c["max_depth"], 128, "default max depth: {c}");
}

#[test]
fn bad_phi() {
    let r = bad_setting("WMHCCT_PHI", "abc", &["abc", "phi"]);
    assert_defaults(&r);
}

#[test]
fn bad_unwind() {
    let r = bad_setting(
        "WMHCCT_UNWIND",
        "bogus",
        &["bogus", "none", "full", "fp", "first", "second"],
    );
    assert_defaults(&r);
}

#[test]
fn bad_max_depth() {
    let r = bad_setting("WMHCCT_MAX_DEPTH", "-3", &["-3", "1024"]);
    assert_defaults(&r);
}

#[test]
fn bad_epsilon() {
    let r = bad_setting("WMHCCT_EPSILON", "2", &["2", "epsilon"]);
    assert_defaults(&r);
}

#[test]
fn bad_collector_placement() {
    let r = bad_setting(
        "WMHCCT_COLLECTOR",
        "background",
        &["background", "inline", "thread"],
    );
    assert_defaults(&r);
}
