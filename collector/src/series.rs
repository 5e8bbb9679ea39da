//! A process's time series in bounded memory: at most `cap` bins from
//! program start; when an event falls past the last bin, the bin width
//! doubles and neighbouring bins merge (max for live bytes, sums for the
//! counts), so the series stays exact for maxima and sums at any run length.
//!
//! Per event: O(1) amortised (a doubling costs O(cap) and happens once per
//! doubling of the run length), no allocation (the four tables are allocated
//! once, in [`Bins::new`]).

/// Width of a bin before any doubling: 100 µs (1024 bins cover 0.1 s).
pub const BASE_BIN_NS: u64 = 100_000;

/// The four per-bin quantities.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bins {
    width: u64,
    /// Bins in use: `0..len` (the last one is the current bin).
    len: usize,
    /// Start of the current bin: `(len - 1) * width` (saturating), 0
    /// while `len` is 0.
    last_start: u64,
    pub(crate) live_max: Vec<u64>,
    pub(crate) alloc_events: Vec<u64>,
    pub(crate) alloc_bytes: Vec<u64>,
    pub(crate) mpi_events: Vec<u64>,
}

impl Bins {
    /// `cap` bins (at least 2) of initial width `base_ns` (at least 1).
    pub fn new(cap: usize, base_ns: u64) -> Bins {
        let cap = cap.max(2);
        Bins {
            width: base_ns.max(1),
            len: 0,
            last_start: 0,
            live_max: vec![0; cap],
            alloc_events: vec![0; cap],
            alloc_bytes: vec![0; cap],
            mpi_events: vec![0; cap],
        }
    }

    pub fn cap(&self) -> usize {
        self.live_max.len()
    }

    pub fn width_ns(&self) -> u64 {
        self.width
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn live_max(&self) -> &[u64] {
        &self.live_max[..self.len]
    }

    pub fn alloc_events(&self) -> &[u64] {
        &self.alloc_events[..self.len]
    }

    pub fn alloc_bytes(&self) -> &[u64] {
        &self.alloc_bytes[..self.len]
    }

    pub fn mpi_events(&self) -> &[u64] {
        &self.mpi_events[..self.len]
    }

    /// Make the bin of time `t_ns` current and return its index. Bins
    /// entered for the first time start at `live` (the live heap carried
    /// over from before). An earlier time (threads race to the lock) lands
    /// in its own, earlier bin.
    #[inline]
    pub fn advance(&mut self, t_ns: u64, live: u64) -> usize {
        if let Some(last) = self.len.checked_sub(1) {
            // Most events fall in the current bin: no division.
            let start = self.last_start;
            if t_ns >= start && t_ns - start < self.width {
                return last;
            }
        }
        self.advance_to(t_ns, live)
    }

    /// [`Bins::advance`] to another bin than the current one.
    #[cold]
    #[inline(never)]
    fn advance_to(&mut self, t_ns: u64, live: u64) -> usize {
        let mut i = t_ns / self.width;
        while i >= self.cap() as u64 {
            self.double();
            i = t_ns / self.width;
        }
        let i = i as usize;
        while self.len <= i {
            self.live_max[self.len] = live;
            self.len += 1;
        }
        self.last_start = (self.len.saturating_sub(1) as u64).saturating_mul(self.width);
        i
    }

    /// Merge neighbouring bins and double the width.
    fn double(&mut self) {
        let half = self.len.div_ceil(2);
        for k in 0..half {
            let (a, b) = (2 * k, 2 * k + 1);
            self.live_max[k] =
                self.live_max[a].max(if b < self.len { self.live_max[b] } else { 0 });
            for v in [
                &mut self.alloc_events,
                &mut self.alloc_bytes,
                &mut self.mpi_events,
            ] {
                v[k] = v[a].saturating_add(if b < self.len { v[b] } else { 0 });
            }
        }
        for v in [
            &mut self.live_max,
            &mut self.alloc_events,
            &mut self.alloc_bytes,
            &mut self.mpi_events,
        ] {
            v[half..].iter_mut().for_each(|x| *x = 0);
        }
        self.len = half;
        self.width = self.width.saturating_mul(2);
    }

    /// An allocation of `size` at `t_ns`; the live heap went from `before` to `after`.
    #[inline]
    pub fn on_alloc(&mut self, t_ns: u64, size: u64, before: u64, after: u64) {
        let i = self.advance(t_ns, before);
        self.live_max[i] = self.live_max[i].max(after);
        self.alloc_events[i] = self.alloc_events[i].saturating_add(1);
        self.alloc_bytes[i] = self.alloc_bytes[i].saturating_add(size);
    }

    /// A release at `t_ns`; the live heap was `before` (the bin's maximum
    /// already covers it when the bin is not new).
    #[inline]
    pub fn on_release(&mut self, t_ns: u64, before: u64) {
        let i = self.advance(t_ns, before);
        self.live_max[i] = self.live_max[i].max(before);
    }

    /// `n` MPI calls at `t_ns`, with `live` bytes live.
    pub fn on_mpi(&mut self, t_ns: u64, live: u64, n: u64) {
        let i = self.advance(t_ns, live);
        self.mpi_events[i] = self.mpi_events[i].saturating_add(n);
    }

    /// Memory held, bytes.
    pub fn memory_bytes(&self) -> u64 {
        (4 * self.cap() * std::mem::size_of::<u64>()) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Exact per-time truth: the events, replayed onto bins of a given width.
    #[derive(Clone, Debug)]
    enum Ev {
        Alloc(u64, u64),
        Free(u64),
        Mpi(u64),
    }

    fn replay(evs: &[Ev], cap: usize, base: u64) -> Bins {
        let mut b = Bins::new(cap, base);
        let mut live = 0u64;
        let mut held: Vec<u64> = Vec::new();
        for e in evs {
            match *e {
                Ev::Alloc(t, s) => {
                    b.on_alloc(t, s, live, live + s);
                    live += s;
                    held.push(s);
                }
                Ev::Free(t) => {
                    if let Some(s) = held.pop() {
                        b.on_release(t, live);
                        live -= s;
                    }
                }
                Ev::Mpi(t) => b.on_mpi(t, live, 1),
            }
        }
        b
    }

    fn event_time(e: &Ev) -> u64 {
        match *e {
            Ev::Alloc(t, _) | Ev::Free(t) | Ev::Mpi(t) => t,
        }
    }

    /// Naive exact computation at the final width.
    fn naive(evs: &[Ev], width: u64, n: usize) -> [Vec<u64>; 4] {
        let mut live_max = vec![0u64; n];
        let mut ev = vec![0u64; n];
        let mut by = vec![0u64; n];
        let mut mpi = vec![0u64; n];
        let mut live = 0u64;
        let mut held: Vec<u64> = Vec::new();
        let mut last_bin = 0usize;
        for e in evs {
            if matches!(e, Ev::Free(_)) && held.is_empty() {
                continue; // the collector sees nothing
            }
            let i = (event_time(e) / width) as usize;
            // Bins between the previous event and this one hold `live`.
            for x in &mut live_max[last_bin.min(i)..=i.min(n - 1)] {
                *x = (*x).max(live);
            }
            last_bin = last_bin.max(i);
            match *e {
                Ev::Alloc(_, s) => {
                    live += s;
                    held.push(s);
                    ev[i] += 1;
                    by[i] += s;
                }
                Ev::Free(_) => {
                    if let Some(s) = held.pop() {
                        live -= s;
                    }
                }
                Ev::Mpi(_) => mpi[i] += 1,
            }
            live_max[i] = live_max[i].max(live);
        }
        [live_max, ev, by, mpi]
    }

    fn events() -> impl Strategy<Value = Vec<Ev>> {
        proptest::collection::vec(
            (0u8..3, 0u64..50_000, 1u64..1000).prop_map(|(k, dt, s)| (k, dt, s)),
            1..300,
        )
        .prop_map(|v| {
            let mut t = 0u64;
            v.into_iter()
                .map(|(k, dt, s)| {
                    t += dt;
                    match k {
                        0 => Ev::Alloc(t, s),
                        1 => Ev::Free(t),
                        _ => Ev::Mpi(t),
                    }
                })
                .collect()
        })
    }

    proptest! {
        /// Doubling never loses a maximum or a count: the bins equal a
        /// naive exact computation at the final width.
        #[test]
        fn doubling_equals_naive(evs in events(), cap in 2usize..16) {
            let b = replay(&evs, cap, 1000);
            prop_assert!(b.len() <= cap);
            let n = b.len();
            let [live, ev, by, mpi] = naive(&evs, b.width_ns(), n);
            prop_assert_eq!(b.live_max(), &live[..]);
            prop_assert_eq!(b.alloc_events(), &ev[..]);
            prop_assert_eq!(b.alloc_bytes(), &by[..]);
            prop_assert_eq!(b.mpi_events(), &mpi[..]);
            let allocs = evs.iter().filter(|e| matches!(e, Ev::Alloc(..))).count() as u64;
            prop_assert_eq!(b.alloc_events().iter().sum::<u64>(), allocs);
        }
    }

    #[test]
    fn width_doubles_and_stays_bounded() {
        let mut b = Bins::new(4, 10);
        b.on_alloc(0, 1, 0, 1);
        b.on_alloc(39, 1, 1, 2);
        assert_eq!((b.width_ns(), b.len()), (10, 4));
        b.on_alloc(40, 1, 2, 3);
        assert_eq!((b.width_ns(), b.len()), (20, 3));
        assert_eq!(b.live_max(), &[1, 2, 3]);
        b.on_mpi(1_000_000, 3, 1);
        assert!(b.len() <= 4);
        assert_eq!(b.mpi_events().iter().sum::<u64>(), 1);
        assert_eq!(b.alloc_events().iter().sum::<u64>(), 3);
        assert_eq!(*b.live_max().iter().max().unwrap(), 3);
    }

    #[test]
    fn tables_never_grow() {
        let mut b = Bins::new(8, 1);
        let caps = |b: &Bins| {
            [
                b.live_max.capacity(),
                b.alloc_events.capacity(),
                b.alloc_bytes.capacity(),
                b.mpi_events.capacity(),
            ]
        };
        let before = caps(&b);
        for t in 0..100_000u64 {
            b.on_alloc(t * 7, 1, t, t + 1);
        }
        assert_eq!(caps(&b), before);
    }
}
