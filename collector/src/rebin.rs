//! Moving per-bin values from one time axis to another (a different origin
//! and a wider bin).
//!
//! A source bin `[s, s + w)` (times relative to the destination origin)
//! goes, for [`Mode::Max`], into every destination bin it overlaps, so a
//! maximum is never lost; for [`Mode::Sum`], whole into the destination bin
//! holding its start, so sums are preserved exactly. When the source grid is
//! a refinement of the destination grid (widths `w | W`, origins differing
//! by a multiple of `w`), each source bin lies in exactly one destination
//! bin and both rules are exact.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Max,
    Sum,
}

/// One time axis: origin (ns since the Unix epoch) and bin width (ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Axis {
    pub origin: u64,
    pub width: u64,
}

impl Axis {
    /// Smallest origin ≤ `t` on the absolute grid of this width.
    pub fn aligned(t: u64, width: u64) -> Axis {
        let width = width.max(1);
        Axis {
            origin: t - t % width,
            width,
        }
    }

    /// Bins needed to reach time `end` (ns since the epoch).
    pub fn bins_to(&self, end: u64) -> usize {
        let span = end.saturating_sub(self.origin);
        span.div_ceil(self.width.max(1)) as usize
    }

    /// Does every bin of `src` lie inside one bin of `self`?
    pub fn refines(&self, src: &Axis) -> bool {
        src.width > 0
            && self.width.is_multiple_of(src.width)
            && src.origin >= self.origin
            && (src.origin - self.origin).is_multiple_of(src.width)
    }

    /// Does `src` map onto `self` bin for bin (same width, aligned origins)?
    pub fn same_grid(&self, src: &Axis) -> bool {
        self.width == src.width
            && src.origin >= self.origin
            && (src.origin - self.origin).is_multiple_of(self.width)
    }
}

/// `values` on axis `src`, moved to `len` bins of axis `dst`
/// (`dst.origin ≤ src.origin`). Values beyond the last bin go into it.
pub fn rebin(values: &[u64], src: Axis, dst: Axis, len: usize, mode: Mode) -> Vec<u64> {
    let mut out = vec![0u64; len];
    rebin_into(values, src, dst, &mut out, mode);
    out
}

/// Like [`rebin`], accumulating into `out` (max or sum with its contents).
pub fn rebin_into(values: &[u64], src: Axis, dst: Axis, out: &mut [u64], mode: Mode) {
    if out.is_empty() {
        return;
    }
    let last = out.len() - 1;
    let w = dst.width.max(1) as u128;
    let shift = src.origin.saturating_sub(dst.origin) as u128;
    for (i, &v) in values.iter().enumerate() {
        let start = shift + i as u128 * src.width as u128;
        let j0 = ((start / w) as usize).min(last);
        match mode {
            Mode::Sum => out[j0] = out[j0].saturating_add(v),
            Mode::Max => {
                let end = start + (src.width.max(1) as u128) - 1;
                let j1 = ((end / w) as usize).min(last);
                for x in &mut out[j0..=j1] {
                    *x = (*x).max(v);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refinement_is_exact() {
        let src = Axis {
            origin: 1000,
            width: 10,
        };
        let dst = Axis {
            origin: 960,
            width: 40,
        };
        assert!(dst.refines(&src));
        let v = [1, 2, 3, 4, 5, 6];
        // src bins start at 40, 50, 60, 70 (dst bin 1), 80, 90 (dst bin 2).
        assert_eq!(rebin(&v, src, dst, 3, Mode::Sum), vec![0, 10, 11]);
        assert_eq!(rebin(&v, src, dst, 3, Mode::Max), vec![0, 4, 6]);
    }

    #[test]
    fn straddling_bins_keep_the_max_and_the_sum() {
        let src = Axis {
            origin: 105,
            width: 10,
        };
        let dst = Axis::aligned(105, 10);
        assert_eq!(dst.origin, 100);
        assert!(!dst.refines(&src));
        let v = [7, 3];
        assert_eq!(rebin(&v, src, dst, 3, Mode::Max), vec![7, 7, 3]);
        let s = rebin(&v, src, dst, 3, Mode::Sum);
        assert_eq!(s.iter().sum::<u64>(), 10);
        assert_eq!(dst.bins_to(105 + 20), 3);
    }

    #[test]
    fn overflow_goes_to_the_last_bin() {
        let a = Axis {
            origin: 0,
            width: 1,
        };
        assert_eq!(rebin(&[1, 1, 1, 1], a, a, 2, Mode::Sum), vec![1, 3]);
        assert!(rebin(&[1], a, a, 0, Mode::Max).is_empty());
    }
}
