//! An MPI call repeated from one place, folded into the record of its
//! first call.
//!
//! A program that polls (`MPI_Test` or `MPI_Testany` in a loop until a
//! request completes) makes millions of calls of ~12 ns each. Recorded one
//! by one (the clock, the stack, the collector lock, the tree) each cost
//! ~80 ns more: HPCC's MPIRandomAccess, which makes ~30 million of them per
//! rank, ran at less than half its native rate. Now a thread's call that
//! repeats its previous MPI call (same routine, same bytes, same context)
//! only counts itself in a counter of the thread's; the calls are added to
//! the report, in totals and in their context, when the thread next records
//! an MPI call, when it exits, and when a profile is taken (every thread's
//! counter, from the registry in the core: [`Repeats`]).
//!
//! "Same context" is the unwinder's own test, made without unwinding: the
//! heuristic (`second`) takes a stack as unchanged when its two innermost
//! frames of the program have the return addresses and stack heights they
//! had in the previous stack. The tracer's frames between the wrapper's
//! entry and the check are the same on every call from one place, so when
//! the check runs at the stack pointer it ran at before, the program's
//! frames are where they were, and their return addresses are read in
//! place: two words of the thread's own stack. `first` checks one frame;
//! `none` records no stacks, so any repeat of routine and bytes folds;
//! `full` and `fp` fold nothing. At most [`MAX_FOLDED`] calls fold in a
//! row: the next one is recorded in full, a capture of its own (which may
//! reseed the heuristic), so a wrong match cannot last, and folded calls
//! reach the time series within that many calls.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use wmhcct_collector::Repeatable;
use wmhcct_format::settings::UnwindMode;
use wmhcct_unwinder::Frame;

/// Calls folded in a row at most before one is recorded in full.
pub const MAX_FOLDED: u32 = 255;

/// Innermost frames of the program that must match for a call to fold, by
/// unwind mode; `None`: calls never fold.
pub fn frames_to_match(mode: UnwindMode) -> Option<usize> {
    match mode {
        UnwindMode::Second => Some(2),
        UnwindMode::First => Some(1),
        UnwindMode::None => Some(0),
        UnwindMode::Full | UnwindMode::Fp => None,
    }
}

/// What a thread's next MPI call must be to fold into the previous one.
#[derive(Clone, Copy, Debug)]
struct Armed {
    kind: u16,
    bytes: u64,
    /// The stack pointer at the check (none when no frame is checked).
    sp: Option<u64>,
    /// The innermost program frames, leaf first; `matched` of them count.
    frames: [Frame; 2],
    matched: usize,
    /// Frames of the stack (the reused frames a fold stands for).
    depth: u64,
    /// Calls that may still fold before one is recorded.
    left: u32,
}

/// A thread's folding state (in its `ThreadState`).
#[derive(Debug, Default)]
pub struct Fold {
    armed: Option<Armed>,
    /// The thread's entry in [`Repeats`], and its count of folded calls.
    entry: Option<(u32, Arc<AtomicU64>)>,
    /// Folded calls and the frames they reused, not yet in the thread's
    /// unwind statistics.
    events: u64,
    frames: u64,
}

impl Fold {
    /// Folds the call (routine `kind`, `bytes`, the check at stack pointer
    /// `sp`) into the thread's previous one if it repeats it; `read` reads a
    /// word of the thread's stack (`None`: not readable).
    #[inline]
    pub fn try_fold(
        &mut self,
        kind: u16,
        bytes: u64,
        sp: u64,
        mut read: impl FnMut(u64) -> Option<u64>,
    ) -> bool {
        let (Some(a), Some((_, pending))) = (self.armed.as_mut(), self.entry.as_ref()) else {
            return false;
        };
        if a.kind != kind || a.bytes != bytes || a.left == 0 || a.sp.is_some_and(|s| s != sp) {
            return false;
        }
        // A return address lies just below its frame's stack height (the
        // caller-side stack pointer, where the call pushed it).
        let same = a.frames[..a.matched]
            .iter()
            .all(|f| read(f.sp.wrapping_sub(8)) == Some(f.ra));
        if !same {
            return false;
        }
        a.left -= 1;
        pending.fetch_add(1, Ordering::Relaxed);
        self.events += 1;
        self.frames += a.depth;
        true
    }

    /// After a call was recorded, with `what` its event (`None`: it cannot
    /// be repeated), `frames` the program's frames of its stack (leaf first)
    /// and `sp` the stack pointer at the check: arm for its repeats.
    /// `matched`: [`frames_to_match`] of the unwind mode.
    pub fn arm(
        &mut self,
        what: Option<&Repeatable>,
        matched: Option<usize>,
        frames: &[Frame],
        sp: u64,
    ) {
        self.armed = match (what, matched) {
            (Some(w), Some(m)) if m == 0 || !frames.is_empty() => {
                let matched = m.min(frames.len());
                let mut fs = [Frame::default(); 2];
                fs[..matched].copy_from_slice(&frames[..matched]);
                Some(Armed {
                    kind: w.kind,
                    bytes: w.bytes,
                    sp: (matched > 0).then_some(sp),
                    frames: fs,
                    matched,
                    depth: frames.len() as u64,
                    left: MAX_FOLDED,
                })
            }
            _ => None,
        };
    }

    /// The thread's entry in `repeats`, registered on first use.
    pub fn entry(&mut self, repeats: &mut Repeats) -> u32 {
        match &self.entry {
            Some((i, _)) => *i,
            None => {
                let (i, pending) = repeats.register();
                self.entry = Some((i, pending));
                i
            }
        }
    }

    /// The thread's entry, if it has one (its exit unregisters it).
    pub fn registered(&self) -> Option<u32> {
        self.entry.as_ref().map(|(i, _)| *i)
    }

    /// Folded calls and the frames they reused since the last call.
    pub fn take_counts(&mut self) -> (u64, u64) {
        (
            std::mem::take(&mut self.events),
            std::mem::take(&mut self.frames),
        )
    }
}

/// One thread's folded calls.
#[derive(Debug)]
struct Slot {
    /// Calls folded since they were last taken (the thread adds, whoever
    /// holds the core lock takes).
    pending: Arc<AtomicU64>,
    /// What they repeat: the thread's latest recorded MPI call (set under
    /// the core lock).
    what: Option<Repeatable>,
}

/// Every thread's folded calls (in the core, under its lock).
#[derive(Debug, Default)]
pub struct Repeats {
    slots: Vec<Slot>,
    free: Vec<u32>,
}

impl Repeats {
    /// A slot for a thread: its index and counter.
    fn register(&mut self) -> (u32, Arc<AtomicU64>) {
        let pending = Arc::new(AtomicU64::new(0));
        let slot = Slot {
            pending: Arc::clone(&pending),
            what: None,
        };
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = slot;
                (i, pending)
            }
            None => {
                self.slots.push(slot);
                ((self.slots.len() - 1) as u32, pending)
            }
        }
    }

    /// The calls slot `i` folded since they were last taken, with what
    /// they repeat (`None` when there are none).
    pub fn take(&mut self, i: u32) -> Option<(Repeatable, u64)> {
        let s = self.slots.get(i as usize)?;
        let n = s.pending.swap(0, Ordering::Relaxed);
        s.what.filter(|_| n > 0).map(|w| (w, n))
    }

    /// Slot `i` now repeats `what` (its earlier calls taken first).
    pub fn set(&mut self, i: u32, what: Option<Repeatable>) {
        if let Some(s) = self.slots.get_mut(i as usize) {
            s.what = what;
        }
    }

    /// The thread of slot `i` exits: its last folded calls, and the slot
    /// freed.
    pub fn unregister(&mut self, i: u32) -> Option<(Repeatable, u64)> {
        let taken = self.take(i);
        if let Some(s) = self.slots.get_mut(i as usize) {
            s.what = None;
            self.free.push(i);
        }
        taken
    }

    /// Every slot's folded calls (a profile is being taken).
    pub fn take_all(&mut self, mut f: impl FnMut(&Repeatable, u64)) {
        for i in 0..self.slots.len() as u32 {
            if let Some((w, n)) = self.take(i) {
                f(&w, n);
            }
        }
    }

    /// In a forked child: the calls counted so far are the parent's.
    pub fn forget_pending(&mut self) {
        for s in &self.slots {
            s.pending.store(0, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use wmhcct_collector::{Collector, CollectorConfig, Cursor};

    /// A thread's stack as words by address.
    struct Stack(HashMap<u64, u64>);

    impl Stack {
        /// Frames (return address, stack height) leaf first, their return
        /// addresses written below their heights.
        fn with(frames: &[(u64, u64)]) -> (Stack, Vec<Frame>) {
            let mut m = HashMap::new();
            for &(ra, sp) in frames {
                m.insert(sp - 8, ra);
            }
            let fs = frames.iter().map(|&(ra, sp)| Frame { ra, sp }).collect();
            (Stack(m), fs)
        }

        fn read(&self) -> impl FnMut(u64) -> Option<u64> + '_ {
            |a| self.0.get(&a).copied()
        }
    }

    fn recorded(kind: u16, bytes: u64) -> (Collector, Repeatable) {
        let mut c = Collector::new(CollectorConfig {
            phi: 0.01,
            epsilon: 0.002,
            exact: false,
            n_kinds: 40,
        });
        let w = c
            .on_event(&mut Cursor::new(), kind, &[0x10, 0x20], 0, bytes, 0)
            .unwrap();
        (c, w)
    }

    fn armed(mode: UnwindMode, w: &Repeatable, frames: &[Frame], sp: u64) -> (Fold, Repeats, u32) {
        let mut r = Repeats::default();
        let mut f = Fold::default();
        let i = f.entry(&mut r);
        r.set(i, Some(*w));
        f.arm(Some(w), frames_to_match(mode), frames, sp);
        (f, r, i)
    }

    #[test]
    fn a_repeat_folds_and_is_taken_with_what_it_repeats() {
        let (_, w) = recorded(12, 0);
        let (st, fs) = Stack::with(&[(0x401000, 0x7000), (0x402000, 0x7100), (0x403000, 0x7200)]);
        let (mut f, mut r, i) = armed(UnwindMode::Second, &w, &fs, 0x6000);
        for _ in 0..10 {
            assert!(f.try_fold(12, 0, 0x6000, st.read()));
        }
        assert_eq!(r.take(i), Some((w, 10)));
        assert_eq!(r.take(i), None);
        assert_eq!(f.take_counts(), (10, 30));
        assert_eq!(f.take_counts(), (0, 0));
    }

    #[test]
    fn a_different_call_place_or_height_does_not_fold() {
        let (_, w) = recorded(12, 0);
        let frames = [(0x401000, 0x7000), (0x402000, 0x7100)];
        let (_, fs) = Stack::with(&frames);
        let (mut f, mut r, i) = armed(UnwindMode::Second, &w, &fs, 0x6000);
        // Another routine, other bytes, another height of the check.
        let (st, _) = Stack::with(&frames);
        assert!(!f.try_fold(13, 0, 0x6000, st.read()));
        assert!(!f.try_fold(12, 4, 0x6000, st.read()));
        assert!(!f.try_fold(12, 0, 0x5ff0, st.read()));
        // The same function called from another place: its caller's
        // return address differs (what `first` cannot tell apart).
        let (other, _) = Stack::with(&[(0x401000, 0x7000), (0x402222, 0x7100)]);
        assert!(!f.try_fold(12, 0, 0x6000, other.read()));
        let (mut first, _, _) = armed(UnwindMode::First, &w, &fs, 0x6000);
        assert!(first.try_fold(12, 0, 0x6000, other.read()));
        // Another call site in the same function.
        let (site, _) = Stack::with(&[(0x401010, 0x7000), (0x402000, 0x7100)]);
        assert!(!f.try_fold(12, 0, 0x6000, site.read()));
        // An unreadable word.
        assert!(!f.try_fold(12, 0, 0x6000, |_| None));
        assert_eq!(r.take(i), None);
    }

    #[test]
    fn at_most_max_folded_calls_fold_in_a_row() {
        let (_, w) = recorded(12, 0);
        let (st, fs) = Stack::with(&[(0x401000, 0x7000), (0x402000, 0x7100)]);
        let (mut f, mut r, i) = armed(UnwindMode::Second, &w, &fs, 0x6000);
        let folded = (0..1000)
            .take_while(|_| f.try_fold(12, 0, 0x6000, st.read()))
            .count();
        assert_eq!(folded, MAX_FOLDED as usize);
        assert_eq!(r.take(i), Some((w, u64::from(MAX_FOLDED))));
        // Recorded in full, then armed again.
        f.arm(Some(&w), Some(2), &fs, 0x6000);
        assert!(f.try_fold(12, 0, 0x6000, st.read()));
    }

    #[test]
    fn modes_without_a_heuristic_never_fold_and_none_folds_any_repeat() {
        let (_, w) = recorded(12, 0);
        let (st, fs) = Stack::with(&[(0x401000, 0x7000), (0x402000, 0x7100)]);
        for mode in [UnwindMode::Full, UnwindMode::Fp] {
            let (mut f, _, _) = armed(mode, &w, &fs, 0x6000);
            assert!(!f.try_fold(12, 0, 0x6000, st.read()), "{mode:?}");
        }
        let (mut f, _, _) = armed(UnwindMode::None, &w, &[], 0x6000);
        assert!(f.try_fold(12, 0, 0x1234, |_| None));
        // A stack mode with no frame captured arms nothing.
        let (mut f, _, _) = armed(UnwindMode::Second, &w, &[], 0x6000);
        assert!(!f.try_fold(12, 0, 0x6000, st.read()));
        // Nor does an event that cannot be repeated.
        let mut f = Fold::default();
        f.entry(&mut Repeats::default());
        f.arm(None, Some(2), &fs, 0x6000);
        assert!(!f.try_fold(12, 0, 0x6000, st.read()));
    }

    #[test]
    fn slots_are_taken_all_freed_on_exit_and_forgotten_after_fork() {
        let (mut c, w) = recorded(12, 0);
        let (st, fs) = Stack::with(&[(0x401000, 0x7000), (0x402000, 0x7100)]);
        let mut r = Repeats::default();
        let mut threads: Vec<Fold> = (0..3).map(|_| Fold::default()).collect();
        for f in &mut threads {
            let i = f.entry(&mut r);
            r.set(i, Some(w));
            f.arm(Some(&w), Some(2), &fs, 0x6000);
        }
        for (k, f) in threads.iter_mut().enumerate() {
            for _ in 0..=k {
                assert!(f.try_fold(12, 0, 0x6000, st.read()));
            }
        }
        let mut all = 0;
        r.take_all(|x, n| {
            c.on_repeats(x, n);
            all += n;
        });
        assert_eq!(all, 6);
        assert_eq!(c.totals()[12], (7, 0));
        // An exiting thread's last calls; its slot goes to the next thread.
        assert!(threads[1].try_fold(12, 0, 0x6000, st.read()));
        let gone = threads[1].registered().unwrap();
        assert_eq!(r.unregister(gone), Some((w, 1)));
        let mut next = Fold::default();
        assert_eq!(next.entry(&mut r), gone);
        assert_eq!(r.take(gone), None);
        // After a fork the parent's folded calls are not the child's.
        assert!(threads[0].try_fold(12, 0, 0x6000, st.read()));
        r.forget_pending();
        let mut none = 0;
        r.take_all(|_, n| none += n);
        assert_eq!(none, 0);
    }
}
