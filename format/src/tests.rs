use super::*;
use proptest::prelude::*;

fn sample() -> Profile {
    let mut p = Profile::default();
    p.meta.program = "/bin/true".into();
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
    p
}

#[test]
fn roundtrip() {
    let p = sample();
    let b = encode(&p).unwrap();
    assert_eq!(decode(&b).unwrap(), p);
}

#[test]
fn rejects_foreign_and_truncated() {
    let b = encode(&sample()).unwrap();
    assert!(matches!(
        decode(b"hello world, plain text"),
        Err(FormatError::BadMagic)
    ));
    assert!(matches!(decode(b""), Err(FormatError::BadMagic)));
    for cut in [4, 9, 13, 20, b.len() - 1] {
        assert!(decode(&b[..cut]).is_err(), "cut at {cut} accepted");
    }
    let mut v = b.clone();
    v[8] = 99;
    assert!(matches!(
        decode(&v),
        Err(FormatError::Version { found: 99, .. })
    ));
    let mut c = b.clone();
    let n = c.len();
    c[n - 8] ^= 1;
    assert!(matches!(decode(&c), Err(FormatError::CountMismatch { .. })));
}

#[test]
fn rejects_bad_structure() {
    let mut p = sample();
    p.trees[0].nodes[2].parent = 7;
    assert!(decode(&encode(&p).unwrap()).is_err());
}

proptest! {
    #[test]
    fn never_panics_on_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode(&bytes);
    }

    #[test]
    fn never_panics_on_corrupted_profile(pos in 0usize..400, val in any::<u8>()) {
        let mut b = encode(&sample()).unwrap();
        let i = pos % b.len();
        b[i] = val;
        let _ = decode(&b);
    }
}

#[test]
fn spread_merge_keeps_max_rank_and_presence() {
    let a = Spread::single(5, 0).merge(Spread::single(9, 3));
    let b = a.merge(Spread::default()).merge(Spread::single(2, 1));
    assert_eq!(
        (b.min, b.max, b.sum, b.max_rank, b.present),
        (2, 9, 16, 3, 3)
    );
    assert_eq!(b.min_over(4), 0);
    assert_eq!(b.min_over(3), 2);
    assert!((b.mean_over(4) - 4.0).abs() < 1e-12);
}

fn with_series() -> Profile {
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

#[test]
fn series_roundtrip_and_validation() {
    let p = with_series();
    assert_eq!(decode(&encode(&p).unwrap()).unwrap(), p);

    let mut bad = p.clone();
    bad.series.as_mut().unwrap().live.min.pop();
    assert!(decode(&encode(&bad).unwrap()).is_err());

    let mut bad = p.clone();
    bad.series.as_mut().unwrap().per_rank[0].samples[0].context = 3;
    assert!(bad.validate().unwrap_err().contains("context 3"));

    let mut bad = p.clone();
    bad.series.as_mut().unwrap().per_rank[0].mpi_events.push(0);
    assert!(bad.validate().is_err());

    let mut bad = p;
    bad.series.as_mut().unwrap().bin_ns = 0;
    assert!(bad.validate().is_err());
}
