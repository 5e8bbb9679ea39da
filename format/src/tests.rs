use super::*;
use proptest::prelude::*;

#[path = "../tests/common/sample.rs"]
mod sample;
use sample::{sample, with_series};

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

#[test]
fn size_classes_are_bit_lengths() {
    assert_eq!(size_class(0), 0);
    assert_eq!(size_class(1), 1);
    assert_eq!((size_class(2), size_class(3)), (2, 2));
    assert_eq!((size_class(4095), size_class(4096)), (12, 13));
    assert_eq!(size_class(u64::MAX), 64);
    for k in 0..SIZE_CLASSES {
        let (min, max) = size_class_range(k);
        assert_eq!((size_class(min), size_class(max)), (k, k), "class {k}");
        if k > 0 {
            assert_eq!(
                size_class_range(k - 1).1 + 1,
                min,
                "classes {k} and before are adjacent"
            );
        }
    }
}
