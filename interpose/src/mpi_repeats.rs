//! An MPI call repeated from one place, folded into the record of its
//! first call.
//!
//! A program that polls (`MPI_Test` or `MPI_Testany` in a loop until a
//! request completes) makes millions of calls of ~12 ns each. Recorded one
//! by one (the clock, the stack, the collector lock, the tree) each cost
//! ~80 ns more: HPCC's MPIRandomAccess, which makes ~30 million of them per
//! rank, ran at less than half its native rate. Now a thread's call that
//! repeats one of its [`WAYS`] latest recorded MPI calls (same routine, same
//! bytes, same context) only counts itself in a counter of that call's;
//! the calls are added to the report, in totals and in their context, when
//! the thread next records an MPI call, when it exits, and when a profile
//! is taken (every thread's counters, from the registry in the core:
//! [`Repeats`]). The contexts stay in the tree while their calls may fold
//! (held as a cursor's leaf is).
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

/// Recent MPI calls of a thread that a call may repeat: a progress loop
/// often tests two or three requests in turn, from as many call sites
/// (HPCC's MPIRandomAccess: `MPI_Testany` four times for one `MPI_Test`).
pub const WAYS: usize = 4;

/// What a call must be to fold into one of the thread's recent calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Signature {
    kind: u16,
    bytes: u64,
    /// The stack pointer at the check (none when no frame is checked).
    sp: Option<u64>,
    /// The innermost program frames, leaf first; `matched` of them count.
    frames: [Frame; 2],
    matched: usize,
}

/// One recent call, its repeats counted in a slot of [`Repeats`].
#[derive(Debug)]
struct Way {
    sig: Signature,
    /// What the slot's calls repeat (held in its tree while armed).
    what: Repeatable,
    /// Frames of its stack (the reused frames a fold stands for).
    depth: u64,
    /// Calls that may still fold before one is recorded.
    left: u32,
    slot: u32,
    /// Calls folded into this way since it was armed; the thread stores
    /// each new total in `folded` (a plain store: only this thread writes
    /// it), and whoever takes them keeps how many it took.
    total: u64,
    folded: Arc<AtomicU64>,
}

/// A thread's folding state (in its `ThreadState`).
#[derive(Debug, Default)]
pub struct Fold {
    /// Made at the thread's first recorded MPI call: a thread that makes
    /// none keeps its state (which every allocation reads) ~550 bytes
    /// smaller.
    ways: Option<Box<[Option<Way>; WAYS]>>,
    /// The way the next new call replaces once all are in use.
    next: usize,
    /// Folded calls and the frames they reused, not yet in the thread's
    /// unwind statistics.
    events: u64,
    frames: u64,
}

/// Contexts to hold and let go in the MPI tree after [`Fold::arm`].
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Rearm {
    pub let_go: Option<Repeatable>,
    pub hold: Option<Repeatable>,
}

impl Fold {
    /// Folds the call (routine `kind`, `bytes`, the check at stack pointer
    /// `sp`) into the thread's recent call it repeats, if any; `read` reads a
    /// word of the thread's stack (`None`: not readable).
    #[inline]
    pub fn try_fold(
        &mut self,
        kind: u16,
        bytes: u64,
        sp: u64,
        mut read: impl FnMut(u64) -> Option<u64>,
    ) -> bool {
        let Some(ways) = self.ways.as_deref_mut() else {
            return false;
        };
        for w in ways.iter_mut().flatten() {
            let s = &w.sig;
            if s.kind != kind || s.bytes != bytes || s.sp.is_some_and(|x| x != sp) {
                continue;
            }
            // A return address lies just below its frame's stack height (the
            // caller-side stack pointer, where the call pushed it).
            let same = s.frames[..s.matched]
                .iter()
                .all(|f| read(f.sp.wrapping_sub(8)) == Some(f.ra));
            if !same {
                continue;
            }
            if w.left == 0 {
                // Recorded in full, then armed again.
                return false;
            }
            w.left -= 1;
            w.total += 1;
            w.folded.store(w.total, Ordering::Relaxed);
            self.events += 1;
            self.frames += w.depth;
            return true;
        }
        false
    }

    /// Calls this thread folded and did not record yet, taken from
    /// `repeats` (under the core lock), with what each repeats.
    pub fn take_pending(&self, repeats: &mut Repeats, mut f: impl FnMut(&Repeatable, u64)) {
        for w in self.ways.iter().flat_map(|ways| ways.iter().flatten()) {
            if let Some((what, n)) = repeats.take(w.slot) {
                f(&what, n);
            }
        }
    }

    /// After a call was recorded, with `what` its event (`None`: it cannot
    /// be repeated), `frames` the program's frames of its stack (leaf first)
    /// and `sp` the stack pointer at the check: arm a way for its repeats
    /// (the one of the same call, else a free one, else the next in turn).
    /// `matched`: [`frames_to_match`] of the unwind mode. The thread's
    /// folded calls must have been taken first ([`Fold::take_pending`]).
    pub fn arm(
        &mut self,
        repeats: &mut Repeats,
        what: Option<Repeatable>,
        matched: Option<usize>,
        frames: &[Frame],
        sp: u64,
    ) -> Rearm {
        let (Some(what), Some(m)) = (what, matched) else {
            return Rearm::default();
        };
        if m > 0 && frames.is_empty() {
            return Rearm::default();
        }
        let matched = m.min(frames.len());
        let mut fs = [Frame::default(); 2];
        fs[..matched].copy_from_slice(&frames[..matched]);
        let sig = Signature {
            kind: what.kind,
            bytes: what.bytes,
            sp: (matched > 0).then_some(sp),
            frames: fs,
            matched,
        };
        let depth = frames.len() as u64;
        let ways = self.ways.get_or_insert_with(Default::default);
        let at = match ways
            .iter()
            .position(|w| w.as_ref().is_some_and(|w| w.sig == sig))
        {
            Some(i) => i,
            None => match ways.iter().position(Option::is_none) {
                Some(i) => i,
                None => {
                    let i = self.next;
                    self.next = (i + 1) % WAYS;
                    i
                }
            },
        };
        let (slot, total, folded, old) = match ways[at].take() {
            Some(w) => (w.slot, w.total, w.folded, Some(w.what)),
            None => {
                let (slot, folded) = repeats.register();
                (slot, 0, folded, None)
            }
        };
        repeats.set(slot, Some(what));
        ways[at] = Some(Way {
            sig,
            what,
            depth,
            left: MAX_FOLDED,
            slot,
            total,
            folded,
        });
        match old {
            Some(o) if o == what => Rearm::default(),
            _ => Rearm {
                let_go: old,
                hold: Some(what),
            },
        }
    }

    /// The thread exits: its slots freed. Each way's context (held until
    /// now), with the calls folded into it and not yet taken (maybe 0).
    pub fn release(&mut self, repeats: &mut Repeats) -> [Option<(Repeatable, u64)>; WAYS] {
        let Some(mut ways) = self.ways.take() else {
            return [None; WAYS];
        };
        ways.each_mut().map(|w| {
            let w = w.take()?;
            let n = repeats.unregister(w.slot);
            Some((w.what, n))
        })
    }

    /// Folded calls and the frames they reused since the last call.
    pub fn take_counts(&mut self) -> (u64, u64) {
        (
            std::mem::take(&mut self.events),
            std::mem::take(&mut self.frames),
        )
    }
}

/// The folded calls of one way of a thread.
#[derive(Debug)]
struct Slot {
    /// Calls folded into the way in all (its thread stores the total).
    folded: Arc<AtomicU64>,
    /// How many of them were taken (under the core lock).
    taken: u64,
    /// What they repeat: the recorded MPI call the way was armed with (set
    /// under the core lock).
    what: Option<Repeatable>,
}

/// Every thread's folded calls, a slot per way (in the core, under its
/// lock).
#[derive(Debug, Default)]
pub struct Repeats {
    slots: Vec<Slot>,
    free: Vec<u32>,
}

impl Repeats {
    /// A slot for a thread: its index and counter.
    fn register(&mut self) -> (u32, Arc<AtomicU64>) {
        let folded = Arc::new(AtomicU64::new(0));
        let slot = Slot {
            folded: Arc::clone(&folded),
            taken: 0,
            what: None,
        };
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = slot;
                (i, folded)
            }
            None => {
                self.slots.push(slot);
                ((self.slots.len() - 1) as u32, folded)
            }
        }
    }

    /// The calls slot `i` folded since they were last taken, with what
    /// they repeat (`None` when there are none).
    fn take(&mut self, i: u32) -> Option<(Repeatable, u64)> {
        let s = self.slots.get_mut(i as usize)?;
        let total = s.folded.load(Ordering::Relaxed);
        let n = total.wrapping_sub(s.taken);
        s.taken = total;
        s.what.filter(|_| n > 0).map(|w| (w, n))
    }

    /// Slot `i` now repeats `what` (its earlier calls taken first).
    fn set(&mut self, i: u32, what: Option<Repeatable>) {
        if let Some(s) = self.slots.get_mut(i as usize) {
            s.what = what;
        }
    }

    /// The way of slot `i` is gone (its thread exits): the slot freed, and
    /// the calls it folded since they were last taken.
    fn unregister(&mut self, i: u32) -> u64 {
        let n = self.take(i).map_or(0, |(_, n)| n);
        if let Some(s) = self.slots.get_mut(i as usize) {
            s.what = None;
            self.free.push(i);
        }
        n
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
        for s in &mut self.slots {
            s.taken = s.folded.load(Ordering::Relaxed);
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

    /// `n` recorded calls of routine `kind`, each from its own place.
    fn recorded(kind: u16, bytes: u64, n: u64) -> (Collector, Vec<Repeatable>) {
        let mut c = Collector::new(CollectorConfig {
            phi: 0.01,
            epsilon: 0.002,
            exact: false,
            n_kinds: 40,
        });
        let mut cur = Cursor::new();
        let w = (0..n)
            .map(|i| {
                c.on_event(&mut cur, kind, &[0x10 + i, 0x20], 0, bytes, 0)
                    .unwrap()
            })
            .collect();
        (c, w)
    }

    fn stack_a() -> (Stack, Vec<Frame>) {
        Stack::with(&[(0x401000, 0x7000), (0x402000, 0x7100), (0x403000, 0x7200)])
    }

    /// A thread that makes no MPI call keeps a small state: the ways are
    /// made at its first recorded call.
    #[test]
    fn a_thread_without_mpi_calls_keeps_a_small_state() {
        assert!(std::mem::size_of::<Fold>() <= 32);
        let mut f = Fold::default();
        assert!(f.ways.is_none());
        assert!(!f.try_fold(12, 0, 0x6000, |_| None));
        f.take_pending(&mut Repeats::default(), |_, _| panic!("nothing folded"));
        assert_eq!(f.release(&mut Repeats::default()), [None; WAYS]);
    }

    #[test]
    fn a_repeat_folds_and_is_taken_with_what_it_repeats() {
        let (_, w) = recorded(12, 0, 1);
        let (st, fs) = stack_a();
        let (mut f, mut r) = (Fold::default(), Repeats::default());
        let arm = f.arm(
            &mut r,
            Some(w[0]),
            frames_to_match(UnwindMode::Second),
            &fs,
            0x6000,
        );
        assert_eq!(
            arm,
            Rearm {
                let_go: None,
                hold: Some(w[0])
            }
        );
        for _ in 0..10 {
            assert!(f.try_fold(12, 0, 0x6000, st.read()));
        }
        let mut taken = Vec::new();
        f.take_pending(&mut r, |x, n| taken.push((*x, n)));
        assert_eq!(taken, [(w[0], 10)]);
        f.take_pending(&mut r, |_, _| panic!("taken twice"));
        assert_eq!(f.take_counts(), (10, 30));
        assert_eq!(f.take_counts(), (0, 0));
    }

    #[test]
    fn a_different_call_place_or_height_does_not_fold() {
        let (_, w) = recorded(12, 0, 1);
        let frames = [(0x401000, 0x7000), (0x402000, 0x7100)];
        let (st, fs) = Stack::with(&frames);
        let (mut f, mut r) = (Fold::default(), Repeats::default());
        f.arm(&mut r, Some(w[0]), Some(2), &fs, 0x6000);
        // Another routine, other bytes, another height of the check.
        assert!(!f.try_fold(13, 0, 0x6000, st.read()));
        assert!(!f.try_fold(12, 4, 0x6000, st.read()));
        assert!(!f.try_fold(12, 0, 0x5ff0, st.read()));
        // The same function called from another place: its caller's
        // return address differs (what `first` cannot tell apart).
        let (other, _) = Stack::with(&[(0x401000, 0x7000), (0x402222, 0x7100)]);
        assert!(!f.try_fold(12, 0, 0x6000, other.read()));
        let mut first = Fold::default();
        first.arm(&mut r, Some(w[0]), Some(1), &fs, 0x6000);
        assert!(first.try_fold(12, 0, 0x6000, other.read()));
        // Another call site in the same function.
        let (site, _) = Stack::with(&[(0x401010, 0x7000), (0x402000, 0x7100)]);
        assert!(!f.try_fold(12, 0, 0x6000, site.read()));
        // An unreadable word.
        assert!(!f.try_fold(12, 0, 0x6000, |_| None));
        f.take_pending(&mut r, |_, _| panic!("nothing folded"));
    }

    /// A progress loop testing requests in turn, from several call sites:
    /// each site's calls fold into its own record.
    #[test]
    fn calls_from_sites_taking_turns_fold_each_into_its_own() {
        let (_, w) = recorded(14, 0, 3);
        let sites: Vec<(Stack, Vec<Frame>)> = (0..3u64)
            .map(|i| Stack::with(&[(0x401000 + 16 * i, 0x7000), (0x402000, 0x7100)]))
            .collect();
        let (mut f, mut r) = (Fold::default(), Repeats::default());
        for (i, (_, fs)) in sites.iter().enumerate() {
            f.arm(&mut r, Some(w[i]), Some(2), fs, 0x6000);
        }
        for k in 0..30 {
            let (st, _) = &sites[k % 3];
            assert!(f.try_fold(14, 0, 0x6000, st.read()), "call {k}");
        }
        let mut taken = Vec::new();
        f.take_pending(&mut r, |x, n| taken.push((*x, n)));
        assert_eq!(taken, [(w[0], 10), (w[1], 10), (w[2], 10)]);
    }

    /// Once every way is in use, a new call replaces the next in turn: its
    /// context is let go, the new one held.
    #[test]
    fn a_new_call_replaces_a_way_in_turn() {
        let (_, w) = recorded(14, 0, WAYS as u64 + 1);
        let sites: Vec<(Stack, Vec<Frame>)> = (0..WAYS as u64 + 1)
            .map(|i| Stack::with(&[(0x401000 + 16 * i, 0x7000), (0x402000, 0x7100)]))
            .collect();
        let (mut f, mut r) = (Fold::default(), Repeats::default());
        for (i, (_, fs)) in sites.iter().enumerate().take(WAYS) {
            let arm = f.arm(&mut r, Some(w[i]), Some(2), fs, 0x6000);
            assert_eq!(
                arm,
                Rearm {
                    let_go: None,
                    hold: Some(w[i])
                }
            );
        }
        let arm = f.arm(&mut r, Some(w[WAYS]), Some(2), &sites[WAYS].1, 0x6000);
        assert_eq!(
            arm,
            Rearm {
                let_go: Some(w[0]),
                hold: Some(w[WAYS])
            }
        );
        assert!(!f.try_fold(14, 0, 0x6000, sites[0].0.read()));
        assert!(f.try_fold(14, 0, 0x6000, sites[WAYS].0.read()));
        assert!(f.try_fold(14, 0, 0x6000, sites[1].0.read()));
    }

    #[test]
    fn at_most_max_folded_calls_fold_in_a_row() {
        let (_, w) = recorded(12, 0, 1);
        let (st, fs) = stack_a();
        let (mut f, mut r) = (Fold::default(), Repeats::default());
        f.arm(&mut r, Some(w[0]), Some(2), &fs, 0x6000);
        let folded = (0..1000)
            .take_while(|_| f.try_fold(12, 0, 0x6000, st.read()))
            .count();
        assert_eq!(folded, MAX_FOLDED as usize);
        let mut taken = Vec::new();
        f.take_pending(&mut r, |x, n| taken.push((*x, n)));
        assert_eq!(taken, [(w[0], u64::from(MAX_FOLDED))]);
        // Recorded in full, then the same way armed again: nothing to hold
        // anew.
        let arm = f.arm(&mut r, Some(w[0]), Some(2), &fs, 0x6000);
        assert_eq!(arm, Rearm::default());
        assert!(f.try_fold(12, 0, 0x6000, st.read()));
    }

    #[test]
    fn modes_without_a_heuristic_never_fold_and_none_folds_any_repeat() {
        let (_, w) = recorded(12, 0, 1);
        let (st, fs) = stack_a();
        let mut r = Repeats::default();
        for mode in [UnwindMode::Full, UnwindMode::Fp] {
            let mut f = Fold::default();
            let arm = f.arm(&mut r, Some(w[0]), frames_to_match(mode), &fs, 0x6000);
            assert_eq!(arm, Rearm::default());
            assert!(!f.try_fold(12, 0, 0x6000, st.read()), "{mode:?}");
        }
        let mut f = Fold::default();
        f.arm(
            &mut r,
            Some(w[0]),
            frames_to_match(UnwindMode::None),
            &[],
            0x6000,
        );
        assert!(f.try_fold(12, 0, 0x1234, |_| None));
        // A stack mode with no frame captured arms nothing.
        let mut f = Fold::default();
        f.arm(&mut r, Some(w[0]), Some(2), &[], 0x6000);
        assert!(!f.try_fold(12, 0, 0x6000, st.read()));
        // Nor does an event that cannot be repeated.
        let mut f = Fold::default();
        f.arm(&mut r, None, Some(2), &fs, 0x6000);
        assert!(!f.try_fold(12, 0, 0x6000, st.read()));
    }

    #[test]
    fn slots_are_taken_all_freed_on_exit_and_forgotten_after_fork() {
        let (mut c, w) = recorded(12, 0, 1);
        let (st, fs) = stack_a();
        let mut r = Repeats::default();
        let mut threads: Vec<Fold> = (0..3).map(|_| Fold::default()).collect();
        for f in &mut threads {
            f.arm(&mut r, Some(w[0]), Some(2), &fs, 0x6000);
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
        // An exiting thread's last calls and held context; its slot goes to
        // the next thread.
        assert!(threads[1].try_fold(12, 0, 0x6000, st.read()));
        let last: Vec<_> = threads[1].release(&mut r).into_iter().flatten().collect();
        assert_eq!(last, [(w[0], 1)]);
        assert!(!threads[1].try_fold(12, 0, 0x6000, st.read()));
        let before = r.slots.len();
        Fold::default().arm(&mut r, Some(w[0]), Some(2), &fs, 0x6000);
        assert_eq!(r.slots.len(), before);
        // After a fork the parent's folded calls are not the child's.
        assert!(threads[0].try_fold(12, 0, 0x6000, st.read()));
        r.forget_pending();
        let mut none = 0;
        r.take_all(|_, n| none += n);
        assert_eq!(none, 0);
    }
}
