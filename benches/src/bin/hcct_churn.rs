//! HCCT update cost when the summary evicts all along: more distinct
//! contexts than its 1/ε counters, as in a large application (a CP2K rank
//! keeps ~300 000 nodes and evicts and prunes contexts throughout).
//!
//! Feeds `Hcct::record` (φ = 1e-4, ε = φ/5: 50 000 counters per weight)
//! depth-30 stacks in random order from 10 000 contexts (Zipf 1.0: no
//! eviction after the start), 100 000 and 1 000 000 contexts (Zipf 0.5:
//! most events evict a context and prune its path, and a later one
//! rebuilds it). Prints ns per event and the tree's nodes at the end,
//! medians over rounds.
//!
//!     hcct_churn [--quick]

use wmhcct_benches::clock::{median, quick_flag, time_ns};
use wmhcct_benches::recorded::Recorded;
use wmhcct_benches::stream::{Order, Shape};
use wmhcct_collector::hcct::capacity_for;
use wmhcct_collector::{Cursor, Hcct};

fn record_stream(contexts: usize, zipf: f64, events: usize) -> Recorded {
    Recorded::new(
        Shape {
            depth: 30,
            contexts,
            zipf,
            order: Order::Random,
            seed: 7,
        },
        events,
    )
}

/// Nanoseconds per `record` over the stream, and the tree's nodes after it.
fn run(r: &Recorded) -> (f64, usize) {
    let mut h = Hcct::new(capacity_for(1e-4 / 5.0));
    let mut cur = Cursor::new();
    let n = r.len();
    let ns = time_ns(|| {
        for i in 0..n {
            let frames = r.stack(i);
            std::hint::black_box(h.record(&mut cur, frames, r.unchanged[i], 1, r.sizes[i], 0));
        }
    });
    (ns / n as f64, h.node_count())
}

fn main() {
    let quick = quick_flag();
    let (events, rounds) = if quick { (20_000, 1) } else { (1_000_000, 5) };
    println!("## HCCT update cost with eviction");
    println!();
    println!("Hcct::record on depth-30 stacks, random order, φ = 1e-4, ε = φ/5 (50 000 counters per weight); {events} events from an empty tree, median of {rounds} rounds.");
    println!();
    println!("| contexts | Zipf | ns/event | nodes at the end |");
    println!("|---|---|---|---|");
    for (contexts, zipf) in [(10_000, 1.0), (100_000, 0.5), (1_000_000, 0.5)] {
        let r = record_stream(contexts, zipf, events);
        let runs: Vec<(f64, usize)> = (0..rounds).map(|_| run(&r)).collect();
        let ns = median(&runs.iter().map(|x| x.0).collect::<Vec<_>>());
        println!("| {contexts} | {zipf:.1} | {ns:.0} | {} |", runs[0].1);
    }
}
