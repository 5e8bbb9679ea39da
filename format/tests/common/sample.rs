//! Sample profiles shared by the unit tests (`src/tests.rs`, included with
//! `#[path]`) and the fuzz test (`tests/fuzz_decode.rs`): one valid profile
//! with a tree, a module and totals, and the same with a time series.

use super::*;

/// A small valid profile: one module, one tree `root → Addr → Kind(malloc)`,
/// totals, no series.
pub fn sample() -> Profile {
    let mut p = Profile::default();
    p.meta.program = "/bin/true".into();
    p.meta.args = vec!["true".into(), "--flag".into()];
    p.meta.reason = "exit".into();
    p.modules.push(Module {
        path: "/bin/true".into(),
        build_id: "abcd".into(),
        bias: 0x1000,
        start: 0x1000,
        end: 0x2000,
    });
    let mut t = Tree {
        name: "alloc".into(),
        total_count: 3,
        total_bytes: 30,
        capacity: 10,
        nodes: vec![Node::root()],
        spread: Vec::new(),
        floor: None,
    };
    let mut n = Node::root();
    n.parent = 0;
    n.key = FrameKey::Addr {
        module: 0,
        offset: 0x10,
    };
    t.nodes.push(n);
    n.parent = 1;
    n.key = FrameKey::Kind(AllocKind::Malloc as u16);
    n.count = 3;
    n.bytes = 30;
    t.nodes.push(n);
    p.trees.push(t);
    p.totals.push(KindTotal {
        kind: "malloc".into(),
        count: 3,
        bytes: 30,
    });
    p.resident = Resident {
        peak_bytes: 40 << 20,
        end_bytes: 30 << 20,
        tracer_peak_bytes: 2 << 20,
    };
    p
}

/// [`sample`] with a one-rank time series (two bins, two samples).
pub fn with_series() -> Profile {
    let mut p = sample();
    let rank = RankSeries {
        rank: 0,
        peak_bytes: 30,
        live_max: vec![10, 30],
        alloc_events: vec![1, 2],
        alloc_bytes: vec![10, 20],
        mpi_events: vec![0, 4],
        samples: vec![
            Sample {
                t_ns: 5,
                size: 10,
                context: 2,
            },
            Sample {
                t_ns: 15,
                size: 20,
                context: NO_CONTEXT,
            },
        ],
        sampled_from: 3,
    };
    let stats = |v: &[u64]| BinStats {
        min: v.to_vec(),
        max: v.to_vec(),
        sum: v.to_vec(),
    };
    p.series = Some(JobSeries {
        start_unix_ns: 1_000,
        bin_ns: 10,
        nranks: 1,
        ranks: vec![1, 1],
        live: stats(&rank.live_max),
        alloc_events: stats(&rank.alloc_events),
        alloc_bytes: stats(&rank.alloc_bytes),
        mpi_events: stats(&rank.mpi_events),
        approximate: false,
        per_rank: vec![rank],
    });
    p
}
