//! Per-thread tracer state: the unwinder (its cache and the previous stack),
//! the collector cursor, scratch buffers and the thread's stack bounds.
//! Flushed into the process state when the thread exits.

use std::cell::Cell;

use wmhcct_collector::packet::Replay;
use wmhcct_collector::Cursor;
use wmhcct_unwinder::{HeuristicConfig, Mode, RootAnchored, ThreadUnwinder, UnwindStats};

use crate::bernoulli::Bernoulli;
use crate::config::{Config, UnwindMode};
use crate::stack_memory::OwnStack;
use crate::thread_key::ThreadKey;

/// Proof that the core lock is held: `tracer::Core` owns the only one, so
/// `&mut CursorAccess` is borrowed from a locked core.
pub struct CursorAccess(());

impl CursorAccess {
    /// For `tracer::Core` only.
    pub(crate) const fn new() -> CursorAccess {
        CursorAccess(())
    }
}

/// A thread's cursor into the allocation tree (with, for the collector
/// thread, the stack of the thread's latest record), in its own allocation.
/// It is used only under the core lock: by the thread itself (inline), or
/// by the collector thread through a record's token (`packets.rs`), while
/// the thread goes on with the rest of its state.
pub struct CursorCell(std::ptr::NonNull<Replay>);

impl CursorCell {
    pub(crate) fn new(max_depth: usize) -> CursorCell {
        let mut r = Replay::default();
        r.frames.reserve_exact(max_depth + 1);
        CursorCell(std::ptr::NonNull::from(Box::leak(Box::new(r))))
    }

    /// The token records carry for this cursor.
    pub fn token(&self) -> u64 {
        self.0.as_ptr() as u64
    }

    /// The cursor, with the core lock held.
    pub fn get<'a>(&'a self, _held: &'a mut CursorAccess) -> &'a mut Replay {
        // SAFETY: the cursor is only reached through `get` and `from_token`,
        // both with the core lock held (the borrowed `CursorAccess`), so no
        // other reference to it exists meanwhile; it lives until `self` drops.
        unsafe { &mut *self.0.as_ptr() }
    }

    /// The cursor of `token` (from [`CursorCell::token`]), with the core
    /// lock held.
    ///
    /// # Safety
    /// The `CursorCell` the token came from must still be alive.
    pub unsafe fn from_token(token: u64, _held: &mut CursorAccess) -> &mut Replay {
        // SAFETY: alive by the caller's promise; exclusive as in `get`.
        unsafe { &mut *(token as *mut Replay) }
    }
}

impl Drop for CursorCell {
    fn drop(&mut self) {
        // SAFETY: from Box::leak in `new`; no reference outlives `self`.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

pub struct ThreadState {
    pub unwinder: ThreadUnwinder,
    /// Cursor into the allocation tree.
    pub cursor: CursorCell,
    /// The capture whose frames the collector thread's replay of this
    /// thread holds, once it applies the records pushed so far (0: none).
    pub replayed: u64,
    /// Cursor into the MPI tree.
    pub mpi_cursor: Cursor,
    /// Repeats of the thread's recent MPI calls, folded into them.
    pub mpi_fold: crate::mpi_repeats::Fold,
    /// Return addresses of the current stack, leaf first, root-anchored
    /// like the unwinder's frames.
    pub frames: RootAnchored<u64>,
    /// Captures made by `unwinder` (numbers the cursors' frames, see
    /// `Cursor::stamp_next`).
    pub captures: u64,
    /// The capture `frames` was filled from.
    pub frames_of: u64,
    /// This thread's own stack.
    pub stack: OwnStack,
    /// Unwind statistics already added to the process totals.
    pub reported: UnwindStats,
    /// Counted in the process's thread total.
    pub counted: bool,
    /// The module table this thread unwinds with, and its generation
    /// (`Tracer::modules_gen`).
    pub modules: Option<(u64, std::sync::Arc<wmhcct_unwinder::Modules>)>,
    /// Which captures are also fully unwound to measure accuracy, a fraction
    /// `WMHCCT_VALIDATE` of them: only a heuristic's (`first`, `second`).
    /// `full` would check its own walk, and `fp` one frame-pointer walk
    /// against another (it read 100 % on code without frame pointers, 1
    /// frame per stack).
    pub validate: Bernoulli,
}

fn mode(m: UnwindMode) -> Mode {
    match m {
        UnwindMode::None => Mode::None,
        UnwindMode::Full => Mode::Full,
        UnwindMode::Fp => Mode::Fp,
        UnwindMode::First => Mode::First,
        UnwindMode::Second => Mode::Second,
    }
}

impl ThreadState {
    pub fn new(cfg: &Config) -> ThreadState {
        let unwinder = ThreadUnwinder::new(
            mode(cfg.unwind),
            HeuristicConfig {
                reseed_every: cfg.reseed_every,
                reseed_gap_ns: cfg.reseed_gap_ns,
                max_depth: cfg.max_depth,
                check_reused: cfg.check_reused,
            },
        );
        ThreadState {
            unwinder,
            cursor: CursorCell::new(cfg.max_depth),
            replayed: 0,
            mpi_cursor: Cursor::default(),
            mpi_fold: Default::default(),
            frames: RootAnchored::with_capacity(cfg.max_depth + 1),
            captures: 0,
            frames_of: 0,
            stack: OwnStack::current(),
            reported: UnwindStats::default(),
            counted: false,
            modules: None,
            validate: Bernoulli::new(
                match cfg.unwind {
                    UnwindMode::First | UnwindMode::Second => cfg.validate,
                    _ => 0.0,
                },
                // SAFETY: pthread_self has no preconditions.
                unsafe { libc::pthread_self() } as u64,
            ),
        }
    }

    /// Statistics since the last call, to add to the process totals.
    pub fn take_stats_delta(&mut self) -> UnwindStats {
        let now = self.unwinder.stats().clone();
        // A folded MPI call stands for a capture that reused every frame.
        let (folded, reused) = self.mpi_fold.take_counts();
        let d = UnwindStats {
            events: now.events - self.reported.events + folded,
            frames_unwound: now.frames_unwound - self.reported.frames_unwound,
            frames_reused: now.frames_reused - self.reported.frames_reused + reused,
            validated: now.validated - self.reported.validated,
            correct: now.correct - self.reported.correct,
            reseeds: now.reseeds - self.reported.reseeds,
            truncated: now.truncated - self.reported.truncated,
            errors: now.errors - self.reported.errors,
        };
        self.reported = now;
        d
    }
}

/// The TLS slot: a plain pointer (no Rust TLS destructor: registering one
/// makes glibc allocate inside the tracer and free outside it at thread
/// exit, which the program never did). The thread's state is handed back to
/// the process by a pthread key destructor; `pthread_key_create` and
/// `pthread_setspecific` on an early key do not allocate.
pub struct Slot {
    state: Cell<*mut ThreadState>,
    /// A state was made for this thread before: one made again (for a
    /// pthread key destructor that allocates after ours ran, in a later
    /// round) is not another thread. Until 2026-11-27 a destructor that
    /// allocated in 4 rounds made each thread count 4 times.
    made: Cell<bool>,
}

/// Its destructor hands the thread's state back when the thread exits.
static KEY: ThreadKey = ThreadKey::new(exit_thread);

extern "C" fn exit_thread(p: *mut libc::c_void) {
    if p.is_null() {
        return;
    }
    // Ours: the thread's slot holds the same pointer; clear it first so a
    // later allocation by another destructor starts a fresh state.
    crate::tracer::clear_thread_slot();
    // SAFETY: `p` came from Box::into_raw in `Slot::get` and the slot no
    // longer refers to it.
    let ts = unsafe { Box::from_raw(p.cast::<ThreadState>()) };
    let _g = crate::guard::Guard::acquire();
    crate::tracer::thread_exit(ts);
}

impl Slot {
    pub const fn new() -> Slot {
        Slot {
            state: Cell::new(std::ptr::null_mut()),
            made: Cell::new(false),
        }
    }

    /// The thread's state, created on first use.
    ///
    /// Only called with the reentrancy guard held, so never re-entered on
    /// this thread while the returned reference is alive.
    #[allow(clippy::mut_from_ref)]
    #[inline]
    pub fn get(&self, cfg: &Config) -> &mut ThreadState {
        let mut p = self.state.get();
        if p.is_null() {
            p = self.create(cfg);
        }
        // SAFETY: the pointer is this thread's own live state (set above or
        // earlier on this thread, cleared before it is freed) and the
        // reentrancy guard ensures a single live reference at a time.
        unsafe { &mut *p }
    }

    /// The thread's first event: its state made and kept in the slot.
    #[cold]
    #[inline(never)]
    fn create(&self, cfg: &Config) -> *mut ThreadState {
        // pthread_getattr_np, pthread_key_create and pthread_setspecific
        // allocate through the exported functions: hidden.
        let again = self.made.replace(true);
        let p = crate::guard::hidden(|| {
            let p = Box::into_raw(Box::new(ThreadState {
                counted: again,
                ..ThreadState::new(cfg)
            }));
            if let Some(k) = KEY.get() {
                // SAFETY: a valid key; the value is our own pointer.
                unsafe { libc::pthread_setspecific(k, p.cast()) };
            }
            p
        });
        self.state.set(p);
        p
    }

    /// The thread's own stack, if its state exists.
    pub fn own_stack(&self) -> Option<OwnStack> {
        let p = self.state.get();
        // SAFETY: a non-null pointer is this thread's live state; only a
        // `Copy` field is read, while the guard keeps every other use of
        // the state out.
        (!p.is_null()).then(|| unsafe { (*p).stack })
    }

    /// Whether the thread's state exists.
    pub fn is_set(&self) -> bool {
        !self.state.get().is_null()
    }

    /// Forget the state (its owner, the key destructor, frees it).
    pub fn clear(&self) {
        self.state.set(std::ptr::null_mut());
    }
}
