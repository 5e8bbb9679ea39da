//! The tracer keeps its own allocations out of the program's heap
//! (`interpose/src/own_heap.rs`): glibc gives the program the same blocks at
//! the same offsets, in the same order, as without the tracer, even while
//! the tracer's tables grow (tests/programs/heap_layout.c, 10^5 blocks from
//! ~10^4 calling contexts), with the collector inline and on its thread,
//! and with every unwind mode.

use wmhcct_e2e::*;

const EVENTS: u64 = 100_000;

#[test]
fn the_program_gets_the_blocks_it_gets_untraced() {
    let w = WorkDir::new("own-heap");
    let exe = compile("heap_layout.c", &w.path, Opt::Release, &[]);
    let events = EVENTS.to_string();
    let plain = run_plain(&exe, &[&events], &w.path);
    assert_eq!(plain.code, 0, "{}", plain.describe());
    assert!(
        plain.stdout.contains(" blocks, layout "),
        "{}",
        plain.stdout
    );
    for (collector, unwind) in [
        ("inline", "second"),
        ("thread", "second"),
        ("thread", "full"),
        ("inline", "none"),
    ] {
        let h5 = w.join(format!("layout-{collector}-{unwind}.h5"));
        let traced = run_traced(
            &exe,
            &[&events],
            &w.path,
            &h5,
            &[("WMHCCT_COLLECTOR", collector), ("WMHCCT_UNWIND", unwind)],
        );
        assert_eq!(traced.code, 0, "{}", traced.describe());
        assert_clean_stderr(&traced, &h5);
        assert_eq!(
            traced.stdout, plain.stdout,
            "WMHCCT_COLLECTOR={collector} WMHCCT_UNWIND={unwind}: the program's heap \
             changed under the tracer"
        );
        // Traced, and every call counted: one realloc per seven blocks, one
        // malloc per block and the first (stdio's buffer may add one).
        let r = report_json(&h5);
        assert_eq!(
            total_count(&r, "realloc"),
            EVENTS.div_ceil(7),
            "{}",
            alloc_totals(&r)
        );
        let mallocs = total_count(&r, "malloc");
        assert!(
            (EVENTS + 1..=EVENTS + 2).contains(&mallocs),
            "{mallocs} mallocs: {}",
            alloc_totals(&r)
        );
        if unwind != "none" {
            assert!(contexts(&r).len() > 100, "{}", summary(&r));
        }
    }
}
