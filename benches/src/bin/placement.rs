//! Collector placement (issue 7, item 4), the parallel-CCT paper's idea:
//! update the HCCT inline under a lock in the allocating thread, or hand the
//! captured stacks in per-thread packets to a background collector thread.
//!
//! Each producer thread generates depth-30 stacks (10 000 Zipf contexts,
//! bursts) and an allocation + free per event. The table shows wall
//! nanoseconds per event until the collector has applied every event,
//! medians over rounds that alternate the two placements.
//!
//!     placement [--quick]

use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Mutex};
use std::thread;

use wmhcct_benches::clock::{median, quick_flag, time_ns};
use wmhcct_benches::stream::{Order, Shape, StackStream};
use wmhcct_collector::{Collector, CollectorConfig, Cursor};

const PACKET_EVENTS: usize = 256;
const KIND_MALLOC: u16 = 1;
const KIND_FREE: u16 = 2;

fn config() -> CollectorConfig {
    CollectorConfig {
        phi: 1e-4,
        epsilon: 2e-5,
        exact: false,
        n_kinds: 8,
    }
}

fn stream(thread: usize) -> StackStream {
    StackStream::new(Shape {
        depth: 30,
        contexts: 10_000,
        zipf: 1.0,
        order: Order::Bursts,
        seed: 100 + thread as u64,
    })
}

/// A fake, unique block address for event `i` of `thread`.
fn address(thread: usize, i: usize) -> u64 {
    0x1000_0000 + ((thread as u64) << 40) + (i as u64) * 16
}

fn inline(threads: usize, events: usize) -> f64 {
    let c = Arc::new(Mutex::new(Collector::new(config())));
    let ns = time_ns(|| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let c = Arc::clone(&c);
                thread::spawn(move || {
                    let mut s = stream(t);
                    let mut cur = Cursor::new();
                    let mut f = Vec::new();
                    for i in 0..events {
                        let e = s.next_event(&mut f);
                        let p = address(t, i);
                        let mut g = c.lock().unwrap();
                        g.on_alloc(&mut cur, KIND_MALLOC, &f, e.unchanged, p, e.size, 0);
                        g.on_free(KIND_FREE, p, 0, false);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    });
    ns / (threads * events) as f64
}

/// Events of one thread, stacks stored back to back.
struct Packet {
    thread: usize,
    frames: Vec<u64>,
    /// Per event: (frames in the stack, unchanged, address, size).
    events: Vec<(usize, usize, u64, u64)>,
}

impl Packet {
    fn new(thread: usize) -> Packet {
        Packet {
            thread,
            frames: Vec::with_capacity(PACKET_EVENTS * 40),
            events: Vec::with_capacity(PACKET_EVENTS),
        }
    }
}

fn packets(threads: usize, events: usize) -> f64 {
    time_ns(|| {
        let (tx, rx) = sync_channel::<Packet>(64);
        let collector = thread::spawn(move || {
            let mut c = Collector::new(config());
            let mut cursors: Vec<Cursor> = (0..threads).map(|_| Cursor::new()).collect();
            for p in rx {
                let cur = &mut cursors[p.thread];
                let mut at = 0;
                for &(n, unchanged, addr, size) in &p.events {
                    let f = &p.frames[at..at + n];
                    at += n;
                    c.on_alloc(cur, KIND_MALLOC, f, unchanged, addr, size, 0);
                    c.on_free(KIND_FREE, addr, 0, false);
                }
            }
            c.live_blocks()
        });
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let tx = tx.clone();
                thread::spawn(move || {
                    let mut s = stream(t);
                    let mut f = Vec::new();
                    let mut p = Packet::new(t);
                    for i in 0..events {
                        let e = s.next_event(&mut f);
                        p.frames.extend_from_slice(&f);
                        p.events.push((f.len(), e.unchanged, address(t, i), e.size));
                        if p.events.len() == PACKET_EVENTS {
                            tx.send(std::mem::replace(&mut p, Packet::new(t))).unwrap();
                        }
                    }
                    if !p.events.is_empty() {
                        tx.send(p).unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(collector.join().unwrap(), 0);
    }) / (threads * events) as f64
}

fn main() {
    let quick = quick_flag();
    let (events, rounds) = if quick { (20_000, 1) } else { (1_000_000, 5) };
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    println!("## Collector placement");
    println!();
    println!("Depth-30 stacks, 10 000 Zipf contexts in bursts, malloc + free per event, {events} events per thread, {PACKET_EVENTS}-event packets, {cores} cores; wall ns per event, median of {rounds} rounds.");
    println!();
    println!(
        "| threads | inline (lock per event) | packets to a collector thread | packets / inline |"
    );
    println!("|---|---|---|---|");
    for threads in [1, 2, 4] {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for r in 0..rounds {
            if r % 2 == 0 {
                a.push(inline(threads, events));
                b.push(packets(threads, events));
            } else {
                b.push(packets(threads, events));
                a.push(inline(threads, events));
            }
        }
        let (a, b) = (median(&a), median(&b));
        println!("| {threads} | {a:.0} | {b:.0} | {:.2} |", b / a);
    }
}
