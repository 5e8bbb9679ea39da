//! HCCT update cost with and without the prefix-aware descent (issue 4).
//!
//! Feeds `Hcct::record` the stacks of a depth-30 stream (10 000 Zipf
//! contexts), random order and bursts, with the `unchanged` hint the
//! heuristic unwinder would give, and times it with prefix reuse on and off.
//! Rounds alternate the two settings; the table shows medians.
//!
//!     prefix_reuse [--quick]

use wmhcct_benches::clock::{median, quick_flag, time_ns};
use wmhcct_benches::recorded::Recorded;
use wmhcct_benches::stream::{Order, Shape};
use wmhcct_collector::hcct::capacity_for;
use wmhcct_collector::{Cursor, Hcct};

fn record_stream(order: Order, events: usize) -> Recorded {
    Recorded::new(
        Shape {
            depth: 30,
            contexts: 10_000,
            zipf: 1.0,
            order,
            seed: 42,
        },
        events,
    )
}

/// Nanoseconds per `record` over `passes` replays of the stream.
fn run(r: &Recorded, reuse: bool, passes: usize) -> f64 {
    let mut h = Hcct::new(capacity_for(1e-4 / 5.0));
    h.set_prefix_reuse(reuse);
    let mut cur = Cursor::new();
    let n = r.len();
    let ns = time_ns(|| {
        for _ in 0..passes {
            for i in 0..n {
                let frames = r.stack(i);
                std::hint::black_box(h.record(&mut cur, frames, r.unchanged[i], 1, r.sizes[i], 0));
            }
        }
    });
    ns / (n * passes) as f64
}

fn main() {
    let quick = quick_flag();
    let (events, passes, rounds) = if quick {
        (20_000, 1, 1)
    } else {
        (300_000, 4, 5)
    };
    println!("## HCCT update cost, prefix-aware descent on/off");
    println!();
    println!("Hcct::record on depth-30 stacks (36 frames), 10 000 Zipf(1.0) contexts, φ = 1e-4, ε = φ/5; {} events × {} passes, median of {} rounds.", events, passes, rounds);
    println!();
    println!("| order | frames/stack | unchanged frames/event | ns/event, prefix reuse | ns/event, from root | ratio |");
    println!("|---|---|---|---|---|---|");
    for (name, order) in [("random", Order::Random), ("bursts", Order::Bursts)] {
        let r = record_stream(order, events);
        let mean_unchanged = r.unchanged.iter().sum::<usize>() as f64 / events as f64;
        let (mut on, mut off) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            if round % 2 == 0 {
                on.push(run(&r, true, passes));
                off.push(run(&r, false, passes));
            } else {
                off.push(run(&r, false, passes));
                on.push(run(&r, true, passes));
            }
        }
        let (on, off) = (median(&on), median(&off));
        println!(
            "| {name} | {} | {mean_unchanged:.1} | {on:.0} | {off:.0} | {:.2} |",
            r.per_stack,
            on / off
        );
    }
}
