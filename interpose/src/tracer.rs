//! The tracer's core API, called by the exports in `exports.rs` with the
//! reentrancy guard held. Testable without preloading: the tests call these
//! functions directly.

use std::ffi::c_void;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use wmhcct_collector::{Collector, CollectorConfig, Repeatable, SeriesConfig};
use wmhcct_format::{AllocKind, ALLOC_KINDS, MPI_KINDS};
use wmhcct_unwinder::{Capture, ModuleData, Modules, ReadStack, Regs, Stop, UnwindStats};

use crate::stack_memory::SwitchedStack;

use wmhcct_collector::packet::Event;

use crate::biased_lock::{BiasedGuard, BiasedMutex};
use crate::config::{CollectorPlacement, Config, UnwindMode};
use crate::deferred::Op;
use crate::guard::Guard;
use crate::lock::SpinMutex;
use crate::modules;
use crate::packets::{Front, Packets};
use crate::thread::{CursorAccess, ThreadState};

/// Everything the collector lock protects.
pub struct Core {
    pub collector: Collector,
    /// MPI calls: their own tree, weighted by bytes moved.
    pub mpi: Collector,
    /// Unwind statistics of all threads, added per event.
    pub unwind: UnwindStats,
    /// Threads that produced events.
    pub threads: u32,
    /// Every module seen so far (the report's module table).
    pub records: Vec<wmhcct_format::Module>,
    /// Loader generation (adds, subs) of the current module table.
    pub generation: (u64, u64),
    /// Reaches the threads' allocation cursors (`thread::CursorCell`).
    pub cursors: CursorAccess,
    /// Each thread's MPI calls folded into a recent one, not yet recorded
    /// (`mpi_repeats`).
    pub repeats: crate::mpi_repeats::Repeats,
    /// Live heap at which the next snapshot is taken (`report::snapshot_if_due`;
    /// `u64::MAX`: none).
    pub snapshot_at: u64,
}

pub struct Tracer {
    pub config: Config,
    pub core: BiasedMutex<Core>,
    /// The collector thread's ring (`WMHCCT_COLLECTOR=thread`).
    pub packets: Option<Packets>,
    /// The module table, replaced whole when the loader's objects change.
    /// Threads keep their own reference (`ThreadState::modules`) and take
    /// this lock only when `modules_gen` says the table changed, so an
    /// event costs no atomic read-modify-write for it.
    pub modules: SpinMutex<Arc<Modules>>,
    /// Bumped (under the lock) after every replacement of `modules`.
    pub modules_gen: AtomicU64,
    /// The objects of the latest scan, whose unwind-table copies the next
    /// scan reuses for the objects still loaded.
    pub scanned: SpinMutex<Vec<ModuleData>>,
    /// Our own code: leaf frames there are the tracer's, not the program's.
    pub self_text: Range<u64>,
    pub start_mono_ns: u64,
    pub start_unix_ns: u64,
    /// Working directory at start, for relative paths.
    pub cwd: PathBuf,
    /// Where the reports go (`WMHCCT_OUT` resolved at start).
    pub dest: crate::output::Destination,
    /// A forked child, or a program started by a traced process: its report
    /// gets its pid in the name so it never overwrites its parent's.
    pub descendant: AtomicBool,
    /// The process has forked (a shell, a wrapper script starting the
    /// real program).
    pub forked: AtomicBool,
    /// Rank, size and agreed report path once MPI_Init has run.
    pub job: SpinMutex<Option<Job>>,
    /// The latest snapshot (`report::snapshot_if_due`).
    pub snapshot: SpinMutex<Option<crate::report::Snapshot>>,
}

#[derive(Clone, Debug)]
pub struct Job {
    pub rank: u32,
    pub size: u32,
    pub report: PathBuf,
    /// The launch, as rank 0 named it (`wmhcct_format::Meta::launch`).
    pub launch: String,
}

/// The MPI job this process belongs to, if any.
pub fn job(t: &Tracer) -> Option<Job> {
    t.job.lock().clone()
}

/// Record the MPI job (after MPI_Init).
pub fn set_job(t: &Tracer, job: Job) {
    *t.job.lock() = Some(job);
}

const UNINIT: u8 = 0;
const INITIALISING: u8 = 1;
const READY: u8 = 2;
/// The report was taken: events pass through untraced.
const FINISHED: u8 = 3;

static STATE: AtomicU8 = AtomicU8::new(UNINIT);
static TRACER: AtomicPtr<Tracer> = AtomicPtr::new(std::ptr::null_mut());

/// Monotonic nanoseconds of the event clock (`clock.rs`).
#[inline]
pub fn now_mono_ns() -> u64 {
    crate::clock::now_ns()
}

fn now_unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// The tracer, initialised on first use. `None` when tracing is off
/// (finished, disabled, or another thread is initialising).
#[inline]
pub fn get(g: &Guard) -> Option<&'static Tracer> {
    if STATE.load(Ordering::Acquire) == READY {
        // SAFETY: set once before READY is published, never freed.
        return unsafe { TRACER.load(Ordering::Acquire).as_ref() };
    }
    get_slow(g)
}

/// [`get`] before the tracer is ready: start it, or wait for the thread
/// that does.
#[cold]
#[inline(never)]
fn get_slow(g: &Guard) -> Option<&'static Tracer> {
    // Start-up calls into libc and the loader: hidden (see `guard.rs`).
    loop {
        match STATE.load(Ordering::Acquire) {
            READY => {
                // SAFETY: set once before READY is published, never freed.
                return unsafe { TRACER.load(Ordering::Acquire).as_ref() };
            }
            UNINIT => {
                if crate::launcher::runs_a_launcher("self")
                    || crate::launcher::runs_a_command_wrapper("self")
                {
                    // An MPI launcher or daemon, or a command wrapper
                    // (`timeout`): not traced (its children, the ranks or
                    // the command, are). Events pass through from now on.
                    let _ = STATE.compare_exchange(
                        UNINIT,
                        FINISHED,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    );
                    continue;
                }
                if STATE
                    .compare_exchange(UNINIT, INITIALISING, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    if !crate::reserve::room_to_start() {
                        not_started_for_room();
                        STATE.store(FINISHED, Ordering::Release);
                        return None;
                    }
                    let t = crate::guard::hidden(|| {
                        // Start-up work, on the tracer's stack.
                        let t = Box::leak(Box::new(crate::tracer_stack::run(g, init)));
                        TRACER.store(t, Ordering::Release);
                        STATE.store(READY, Ordering::Release);
                        crate::lifecycle::after_init();
                        t
                    });
                    return Some(t);
                }
            }
            INITIALISING => std::thread::yield_now(),
            _ => return None,
        }
    }
}

/// The tracer if it is running, without initialising it.
pub fn running() -> Option<&'static Tracer> {
    if STATE.load(Ordering::Acquire) == READY {
        // SAFETY: set once before READY is published, never freed.
        unsafe { TRACER.load(Ordering::Acquire).as_ref() }
    } else {
        None
    }
}

/// Stop tracing (the report has been taken); later events pass through.
pub fn finish() -> bool {
    STATE
        .compare_exchange(READY, FINISHED, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
}

/// The address space is nearly used up at start-up: not traced, said once.
#[cold]
fn not_started_for_room() {
    crate::diag::note_stderr();
    let limit = match crate::reserve::address_space_limit_kib() {
        Some(kib) => format!(" (`ulimit -v` {kib} KiB)"),
        None => String::new(),
    };
    crate::diag::message(&[
        "not tracing this process: its address space",
        &limit,
        " has less than ",
        &(crate::reserve::START_ROOM >> 20).to_string(),
        " MiB free for the tracer; it runs untraced and no report is written",
    ]);
}

fn init() -> Tracer {
    crate::diag::note_stderr();
    let (config, warnings) = Config::from_lookup(|k| std::env::var(k).ok());
    for w in &warnings {
        crate::diag::message(&[&w.to_string()]);
    }
    let loaded = modules::scan();
    let here = init as *const () as usize as u64;
    let self_text = loaded
        .iter()
        .find(|m| m.unwind.text.contains(&here))
        .map(|m| m.unwind.text.clone())
        .unwrap_or(0..0);
    let (unwind_modules, records, scanned) = split_scan(loaded);
    let collector = Collector::with_series(
        CollectorConfig {
            phi: config.phi,
            epsilon: config.epsilon,
            exact: config.exact,
            n_kinds: ALLOC_KINDS.len(),
        },
        SeriesConfig {
            bins: config.bins as usize,
            event_samples: config.event_samples as usize,
        },
    );
    let cwd = std::env::current_dir().unwrap_or_default();
    let (mut dest, bad_out) = crate::output::destination(config.out.as_deref(), &cwd);
    if let Some(w) = bad_out {
        crate::diag::message(&[&w]);
    }
    let host = crate::placement::host(crate::placement::usable_cpus(), |k| std::env::var(k).ok());
    let placement =
        crate::placement::resolve(config.collector, &host, config.unwind != UnwindMode::None);
    let parent_traced = crate::output::parent_is_traced();
    if !parent_traced {
        dest.pin_own_descriptor();
    }
    let descendant = AtomicBool::new(parent_traced);
    Tracer {
        core: BiasedMutex::new(Core {
            collector,
            mpi: Collector::new(CollectorConfig {
                phi: config.phi,
                epsilon: config.epsilon,
                exact: config.exact,
                n_kinds: MPI_KINDS.len(),
            }),
            unwind: UnwindStats::default(),
            threads: 0,
            records,
            generation: modules::generation(),
            cursors: CursorAccess::new(),
            repeats: Default::default(),
            snapshot_at: config.snapshot_from,
        }),
        packets: (placement == CollectorPlacement::Thread).then(Packets::new),
        modules: SpinMutex::new(Arc::new(unwind_modules)),
        modules_gen: AtomicU64::new(0),
        scanned: SpinMutex::new(scanned),
        self_text,
        start_mono_ns: now_mono_ns(),
        start_unix_ns: now_unix_ns(),
        cwd,
        dest,
        descendant,
        forked: AtomicBool::new(false),
        job: SpinMutex::new(None),
        snapshot: SpinMutex::new(None),
        config,
    }
}

/// A scan as the unwinder's module table, the report's module records and
/// the objects the next scan may reuse copies of.
fn split_scan(
    loaded: Vec<modules::Loaded>,
) -> (Modules, Vec<wmhcct_format::Module>, Vec<ModuleData>) {
    let mut table = Modules::new();
    let mut records = Vec::with_capacity(loaded.len());
    let mut scanned = Vec::with_capacity(loaded.len());
    for m in loaded {
        records.push(m.record);
        scanned.push(m.unwind.clone());
        table.add(m.unwind);
    }
    let root = crate::stack_memory::makecontext_root();
    table.set_stack_root(root.filter(|&ra| table.contains(ra)));
    (table, records, scanned)
}

/// Re-read the loaded objects if the loader's generation changed.
/// Never called with `modules` or `core` locked: `dl_iterate_phdr` takes the
/// loader's lock, and a thread holding that lock may be waiting for ours.
pub fn refresh_modules(t: &Tracer) -> bool {
    let gen = modules::generation();
    if t.core.lock().generation == gen {
        return false;
    }
    // Not held while scanning (the loader's lock, see above).
    let previous = t.scanned.lock().clone();
    let loaded = crate::guard::hidden(|| modules::scan_reusing(&previous));
    drop(previous);
    let (table, fresh, scanned) = split_scan(loaded);
    *t.scanned.lock() = scanned;
    {
        let mut m = t.modules.lock();
        *m = Arc::new(table);
        t.modules_gen.fetch_add(1, Ordering::Release);
    }
    let mut core = t.core.lock();
    for r in fresh {
        if !core.records.contains(&r) {
            core.records.push(r);
        }
    }
    core.generation = gen;
    true
}

/// The registers here: called at the top of an exported function (the MPI
/// wrappers), they name the frame the program called, so unwinding starts
/// right there, without stepping through the tracer's other frames. (The
/// allocator exports pass the program's own frame instead:
/// `exports::from_caller`.)
#[inline(always)]
pub fn current_regs() -> Regs {
    let (pc, sp, bp): (u64, u64, u64);
    // SAFETY: reads rip, rsp and rbp into registers; touches no memory.
    unsafe {
        std::arch::asm!(
            "lea {pc}, [rip]",
            "mov {sp}, rsp",
            "mov {bp}, rbp",
            pc = out(reg) pc,
            sp = out(reg) sp,
            bp = out(reg) bp,
            options(nomem, nostack, preserves_flags)
        );
    }
    Regs {
        pc,
        sp,
        bp,
        pc_is_return: false,
    }
}

/// Capture the calling thread's stack into `ts.frames`. Returns the number
/// of root-side frames unchanged since the thread's previous event, and the
/// capture's number (see `Cursor::stamp_next`).
///
/// Unwinding (framehop's DWARF evaluation) takes up to ~16 KiB of stack:
/// where the thread's own stack has less than [`ROOM`] left below the
/// program's frame (a small thread stack, deep recursion) or the thread is
/// on another stack (a coroutine's), it runs on the tracer's own stack
/// (`tracer_stack.rs`).
#[inline(always)]
fn capture(g: &Guard, t: &Tracer, ts: &mut ThreadState, now: u64, regs: Regs) -> (usize, u64) {
    if t.config.unwind == UnwindMode::None {
        ts.frames.clear();
        return (0, 0);
    }
    if ts.stack.has_room(regs.sp, ROOM) {
        capture_here(t, ts, now, regs)
    } else {
        crate::tracer_stack::run(g, || capture_here(t, ts, now, regs))
    }
}

/// Run `f` where `need` bytes of stack are free: in place if the thread's
/// own stack has that much left below here, else on the tracer's stack.
pub fn with_stack<R>(g: &Guard, need: u64, f: impl FnOnce() -> R) -> R {
    let sp = crate::tracer_stack::sp();
    let own = g.per_thread().slot.own_stack();
    if own.is_some_and(|s| s.has_room(sp, need)) {
        f()
    } else {
        crate::tracer_stack::run(g, f)
    }
}

/// Stack below the program's frame that the tracer may use in place.
const ROOM: u64 = 64 << 10;

#[inline(never)]
fn capture_here(t: &Tracer, ts: &mut ThreadState, now: u64, regs: Regs) -> (usize, u64) {
    let validate = ts.validate.take();
    // A capture point at a call (`exports::from_caller`) has its return
    // address just below its stack pointer, where the call wrote it:
    // readable, and read by the reused-frame check. (From inside the tracer,
    // the MPI wrappers, the capture point is the tracer's frame, skipped.)
    let low = if regs.pc_is_return {
        regs.sp.saturating_sub(8)
    } else {
        regs.sp
    };
    let cap = if ts.stack.holds(low) {
        let mut reader = ts.stack.reader(low);
        capture_with(t, ts, now, regs, validate, false, &mut reader)
    } else {
        // A coroutine's, user-level thread's or alternate signal stack.
        let mut stack = SwitchedStack::new(low);
        capture_with(t, ts, now, regs, validate, true, &mut |a| stack.read(a))
    };
    // The rule cache grows here, after the capture, which never allocates;
    // not in a signal handler, whose allocations come from a small arena.
    if ts.unwinder.wants_growth() && !crate::reserve::handler_on() {
        ts.unwinder.grow_caches();
    }
    // `ts.frames` holds the previous capture's return addresses: its root
    // side, unchanged in this capture, stays in place; the rest is written.
    let frames = ts.unwinder.frames();
    let keep = if ts.frames_of + 1 == ts.captures {
        cap.unchanged_root.min(ts.frames.len()).min(frames.len())
    } else {
        0
    };
    let leaf = &frames[..frames.len() - keep];
    for (ra, f) in ts
        .frames
        .leaf_side_mut(leaf.len(), keep)
        .iter_mut()
        .zip(leaf)
    {
        *ra = f.ra;
    }
    ts.frames_of = ts.captures;
    // The hint is relative to the unwinder's previous capture: exact for a
    // cursor whose path came from it (a retry above counts twice).
    (cap.unchanged_root.min(ts.frames.len()), ts.captures)
}

/// `capture` with the stack reads for the stack the thread is on.
#[inline(always)]
fn capture_with<R: ReadStack>(
    t: &Tracer,
    ts: &mut ThreadState,
    now: u64,
    regs: Regs,
    validate: bool,
    switched: bool,
    read: &mut R,
) -> Capture {
    ts.unwinder.set_foreign_stack(switched);
    let mut cap = {
        let m = thread_modules(t, &mut ts.modules);
        ts.captures += 1;
        ts.unwinder
            .capture(m, regs, t.self_text.clone(), read, now, validate)
    };
    // An address in no known module: perhaps an object loaded since (MPI
    // loads its plugins late). Re-read the table if the loader changed.
    let outside = matches!(
        ts.unwinder.last_stop(),
        Stop::OutsideModules(_) | Stop::ForeignEnd(Some(_))
    );
    if outside && refresh_modules(t) {
        let m = thread_modules(t, &mut ts.modules);
        ts.captures += 1;
        cap = ts
            .unwinder
            .capture(m, regs, t.self_text.clone(), read, now, validate);
    }
    cap
}

/// The thread's reference to the current module table, renewed (under the
/// lock) only when the table changed since the thread last looked.
fn thread_modules<'a>(t: &Tracer, cached: &'a mut Option<(u64, Arc<Modules>)>) -> &'a Modules {
    let gen = t.modules_gen.load(Ordering::Acquire);
    if cached.as_ref().is_some_and(|(g, _)| *g != gen) {
        *cached = None;
    }
    let (_, m) = cached.get_or_insert_with(|| {
        let m = t.modules.lock();
        // The generation read under the lock belongs to this table.
        (t.modules_gen.load(Ordering::Acquire), Arc::clone(&m))
    });
    m
}

fn add_stats(acc: &mut UnwindStats, d: &UnwindStats) {
    acc.merge(d);
}

/// The thread's state, created on first use (the guard holds the thread's
/// block, so it is always at hand).
fn thread_state<'g>(g: &'g Guard, t: &Tracer) -> &'g mut ThreadState {
    let slot = &g.per_thread().slot;
    if !slot.is_set() {
        // The first event of the thread builds its state (and its caches):
        // on the tracer's stack.
        crate::tracer_stack::run(g, || {
            slot.get(&t.config);
        });
    }
    slot.get(&t.config)
}

/// The collector thread's ring, if events go there.
#[inline]
fn packets(t: &Tracer) -> Option<&Packets> {
    t.packets.as_ref().filter(|p| p.active())
}

/// The core lock, for recording an event directly: with a collector
/// thread, also its front lock, and every event handed to it already
/// applied (`packets.rs`).
pub struct Ordered<'a> {
    core: BiasedGuard<'a, Core>,
    front: Option<BiasedGuard<'a, Front>>,
}

impl std::ops::Deref for Ordered<'_> {
    type Target = Core;
    fn deref(&self) -> &Core {
        &self.core
    }
}

impl std::ops::DerefMut for Ordered<'_> {
    fn deref_mut(&mut self) -> &mut Core {
        &mut self.core
    }
}

/// See [`Ordered`].
pub fn lock_ordered(t: &Tracer) -> Ordered<'_> {
    match packets(t) {
        Some(p) => {
            let front = p.front.lock();
            p.publish(&front);
            let mut core = t.core.lock();
            p.drain(&mut core, usize::MAX);
            let mut o = Ordered {
                core,
                front: Some(front),
            };
            rearm(&mut o);
            o
        }
        None => Ordered {
            core: t.core.lock(),
            front: None,
        },
    }
}

/// Re-arm the pushing threads' snapshot check ([`Front::rearm`]) after the
/// core's snapshot threshold may have moved.
pub fn rearm(o: &mut Ordered<'_>) {
    if let Some(front) = o.front.as_deref_mut() {
        front.rearm(o.core.collector.live_bytes(), o.core.snapshot_at);
    }
}

/// Move the collector thread's front statistics into the core (every
/// record is already applied by [`lock_ordered`]).
pub fn settle(o: &mut Ordered<'_>) {
    if let Some(front) = o.front.as_deref_mut() {
        let core = &mut *o.core;
        core.unwind.merge(&std::mem::take(&mut front.unwind));
        core.threads += std::mem::take(&mut front.threads);
    }
}

/// Capture the stack at `at`, then run `f` under the collector lock (see
/// [`lock_ordered`]) with the thread state (its statistics already added),
/// the number of root-side frames unchanged since the thread's previous
/// event and the capture's number.
#[inline]
fn with_capture<R>(
    g: &Guard,
    t: &Tracer,
    now: u64,
    at: Regs,
    f: impl FnOnce(&mut Core, &mut ThreadState, usize, u64) -> R,
) -> R {
    let ts = thread_state(g, t);
    let (unchanged, stamp) = capture(g, t, ts, now, at);
    let mut core = lock_ordered(t);
    account_thread(&mut core, ts);
    f(&mut core, ts, unchanged, stamp)
}

/// The event clock, with the anchor from the guard's block, since tracer
/// start: the collector thread's published clock while it runs
/// (`shared_clock.rs`), else the thread's own reading.
#[inline]
fn event_ns(g: &Guard, t: &Tracer) -> u64 {
    let pt = g.per_thread();
    let mono = match packets(t) {
        Some(p) => p
            .clock
            .now(&pt.anchor, &pt.clock_trust, crate::clock::now_ns_at),
        None => crate::clock::now_ns_at(&pt.anchor),
    };
    mono.saturating_sub(t.start_mono_ns)
}

/// An allocation that returned `ptr` (NULL: failed) for `size` bytes.
/// `at`: the registers of the program's call (`exports::from_caller`), or
/// [`current_regs`] in the exported function it called.
pub fn on_alloc(g: &Guard, at: Regs, kind: AllocKind, ptr: *mut c_void, size: usize) {
    let Some(t) = get(g) else { return };
    let now = event_ns(g, t);
    if ptr.is_null() {
        lock_ordered(t).collector.count_call(kind as u16, 0);
        return;
    }
    g.per_thread().last_alloc.set(ptr as u64);
    let ts = thread_state(g, t);
    let (unchanged, stamp) = capture(g, t, ts, now, at);
    if let Some(p) = packets(t) {
        let mut front = p.front.lock();
        account_front(&mut front, ts);
        let cursor = ts.cursor.token();
        let (kept, leaf) = leaf_side(ts, stamp, unchanged);
        let ev = Event::Alloc {
            cursor,
            stamp,
            kind: kind as u16,
            unchanged,
            kept,
            ptr: ptr as u64,
            size: size as u64,
            t_ns: now,
            frames: leaf,
        };
        p.push(&mut front, &t.core, &ev);
        if front.allocated(size as u64) {
            drop(front);
            with_stack(g, crate::report::REPORT_STACK, || {
                crate::report::snapshot_ordered(t)
            });
        }
        return;
    }
    let mut core = t.core.lock();
    account_thread(&mut core, ts);
    let Core {
        collector, cursors, ..
    } = &mut *core;
    let cursor = &mut ts.cursor.get(cursors).cursor;
    cursor.stamp_next(stamp);
    collector.on_alloc(
        cursor,
        kind as u16,
        ts.frames.as_slice(),
        unchanged,
        ptr as u64,
        size as u64,
        now,
    );
    if core.collector.live_bytes() >= core.snapshot_at {
        with_stack(g, crate::report::REPORT_STACK, || {
            crate::report::snapshot_if_due(t, &mut core)
        });
    }
}

/// The frames a record of capture `stamp` carries: the leaf side, when the
/// collector thread's replay of this thread will hold the previous
/// capture's frames (`unchanged` of them are this one's root side), or all
/// of them. Returns how many root-side frames the record keeps, and the
/// frames it carries.
fn leaf_side(ts: &mut ThreadState, stamp: u64, unchanged: usize) -> (usize, &[u64]) {
    let kept = if ts.replayed != 0 && ts.replayed + 1 == stamp {
        unchanged.min(ts.frames.len())
    } else {
        0
    };
    ts.replayed = stamp;
    (kept, &ts.frames.as_slice()[..ts.frames.len() - kept])
}

/// [`account_thread`] into the collector thread's front.
fn account_front(front: &mut Front, ts: &mut ThreadState) {
    account(&mut front.threads, &mut front.unwind, ts);
}

/// Add the thread's new unwind statistics (and the thread itself, on its
/// first event) to the process totals.
fn account_thread(core: &mut Core, ts: &mut ThreadState) {
    account(&mut core.threads, &mut core.unwind, ts);
}

fn account(threads: &mut u32, unwind: &mut UnwindStats, ts: &mut ThreadState) {
    if !ts.counted {
        ts.counted = true;
        *threads += 1;
    }
    let d = ts.take_stats_delta();
    add_stats(unwind, &d);
}

/// `free(ptr)`, before the block is released to glibc.
pub fn on_free(g: &Guard, ptr: *mut c_void) {
    on_free_kind(g, AllocKind::Free, ptr);
}

/// A release through `kind` (`free`, `MPI_Free_mem`) of `ptr`.
pub fn on_free_kind(g: &Guard, kind: AllocKind, ptr: *mut c_void) {
    let Some(t) = get(g) else { return };
    let now = event_ns(g, t);
    let temporary = is_temporary(g, ptr as u64);
    if let Some(p) = packets(t) {
        let ev = Event::Free {
            kind: kind as u16,
            ptr: ptr as u64,
            t_ns: now,
            temporary,
        };
        p.push(&mut p.front.lock(), &t.core, &ev);
        return;
    }
    t.core
        .lock()
        .collector
        .on_free(kind as u16, ptr as u64, now, temporary);
}

/// Whether freeing `ptr` now frees a temporary allocation: the thread's
/// latest recorded allocation, with no free since (heaptrack's definition,
/// per thread). Any free of a block ends that run.
#[inline(always)]
fn is_temporary(g: &Guard, ptr: u64) -> bool {
    if ptr == 0 {
        return false;
    }
    let last = &g.per_thread().last_alloc;
    let temporary = last.get() == ptr;
    last.set(0);
    temporary
}

/// An MPI call of `kind` (index into `MPI_KINDS`) moving `bytes`.
pub fn on_mpi(g: &Guard, kind: usize, bytes: u64) {
    let Some(t) = get(g) else { return };
    let regs = current_regs();
    let match_frames = crate::mpi_repeats::frames_to_match(t.config.unwind);
    if match_frames.is_some() {
        // A repeat of one of the thread's recent MPI calls: counted, no
        // more.
        let ts = thread_state(g, t);
        if ts.stack.holds(regs.sp) {
            let mut stack = ts.stack.reader(regs.sp);
            if ts
                .mpi_fold
                .try_fold(kind as u16, bytes, regs.sp, |a| stack.read_word(a).ok())
            {
                return;
            }
        }
    }
    let now = event_ns(g, t);
    with_capture(g, t, now, regs, |core, ts, unchanged, stamp| {
        // The calls the thread folded go first, while their contexts are
        // held.
        ts.mpi_fold.take_pending(&mut core.repeats, |what, n| {
            record_folded(&mut core.mpi, &mut core.collector, what, n, now);
        });
        ts.mpi_cursor.stamp_next(stamp);
        let what = core.mpi.on_event(
            &mut ts.mpi_cursor,
            kind as u16,
            ts.frames.as_slice(),
            unchanged,
            bytes,
            now,
        );
        core.collector.record_mpi_event(now);
        let arm = ts.mpi_fold.arm(
            &mut core.repeats,
            what,
            match_frames,
            ts.unwinder.frames(),
            regs.sp,
        );
        if let Some(w) = &arm.hold {
            core.mpi.hold(w);
        }
        if let Some(w) = &arm.let_go {
            core.mpi.let_go(w);
        }
    });
}

/// `n` MPI calls repeating `what`, folded by their thread: in the MPI
/// tree, and at `now` in the time series.
fn record_folded(mpi: &mut Collector, series: &mut Collector, what: &Repeatable, n: u64, now: u64) {
    if n > 0 {
        mpi.on_repeats(what, n);
        series.record_mpi_events(now, n);
    }
}

/// Record every thread's folded MPI calls (before a profile is built).
pub fn apply_all_repeats(t: &Tracer, core: &mut Core) {
    let now = now_mono_ns().saturating_sub(t.start_mono_ns);
    let Core {
        repeats,
        mpi,
        collector,
        ..
    } = core;
    repeats.take_all(|what, n| record_folded(mpi, collector, what, n, now));
}

/// `realloc`/`reallocarray` of `old` to `size` bytes: `call` performs glibc's
/// call. The collector lock is held across it, so no other thread can be
/// handed the old address and record it before we release it.
pub fn on_realloc(
    g: &Guard,
    at: Regs,
    kind: AllocKind,
    old: *mut c_void,
    size: usize,
    call: impl FnOnce() -> *mut c_void,
) -> *mut c_void {
    let Some(t) = get(g) else { return call() };
    let now = event_ns(g, t);
    // The old block lives on in the new one: its release is no temporary's
    // end, and the new block is the thread's latest allocation (set once
    // the call returns, below).
    if let Some(p) = packets(t) {
        let ts = thread_state(g, t);
        let (unchanged, stamp) = capture(g, t, ts, now, at);
        // The front lock is held across the call, as the core lock is
        // below: no other thread pushes the new block's address first.
        let mut front = p.front.lock();
        account_front(&mut front, ts);
        let result = call();
        let errno = crate::errno::get();
        g.per_thread().last_alloc.set(result as u64);
        let cursor = ts.cursor.token();
        let (kept, leaf) = leaf_side(ts, stamp, unchanged);
        let ev = Event::Realloc {
            cursor,
            stamp,
            kind: kind as u16,
            unchanged,
            kept,
            old: old as u64,
            size: size as u64,
            new: result as u64,
            t_ns: now,
            frames: leaf,
        };
        p.push(&mut front, &t.core, &ev);
        crate::errno::set(errno);
        return result;
    }
    with_capture(g, t, now, at, |core, ts, unchanged, stamp| {
        let result = call();
        let errno = crate::errno::get();
        g.per_thread().last_alloc.set(result as u64);
        let Core {
            collector, cursors, ..
        } = core;
        let cursor = &mut ts.cursor.get(cursors).cursor;
        cursor.stamp_next(stamp);
        collector.on_realloc(
            kind as u16,
            old as u64,
            size as u64,
            result as u64,
            Some((cursor, ts.frames.as_slice(), unchanged)),
            now,
        );
        if core.collector.live_bytes() >= core.snapshot_at {
            with_stack(g, crate::report::REPORT_STACK, || {
                crate::report::snapshot_if_due(t, core)
            });
        }
        crate::errno::set(errno);
        result
    })
}

/// Record the allocator calls a signal handler made while this thread was
/// recording an event (`deferred.rs`): no stack, exact totals and heap.
pub fn on_deferred(g: &Guard) {
    crate::tracer_stack::run(g, || deferred(g))
}

fn deferred(g: &Guard) {
    let Some(t) = running() else {
        // The report was taken: like any later call, not recorded.
        crate::deferred::take(&mut |_| {}, &mut |_, _, _| {});
        return;
    };
    let now = event_ns(g, t);
    crate::deferred::take(
        &mut |op| {
            if matches!(op, Op::Alloc { .. } | Op::Realloc { .. }) {
                // An allocation between the thread's latest and its free.
                g.per_thread().last_alloc.set(0);
            }
            let mut core = lock_ordered(t);
            let c = &mut core.collector;
            match op {
                Op::Alloc { kind, ptr: 0, .. } => c.count_call(kind, 0),
                Op::Alloc { kind, ptr, size } => c.on_alloc_untraced(kind, ptr, size, now),
                Op::Free { kind, ptr } => {
                    c.on_free(kind, ptr, now, false);
                }
                Op::Realloc {
                    kind,
                    old,
                    new,
                    size,
                } => c.on_realloc(kind, old, size, new, None, now),
            }
        },
        &mut |kind, n, bytes| lock_ordered(t).collector.count_calls(kind, n, bytes),
    );
}

/// A thread is exiting: fold its leftovers into the process state.
/// Called by the thread-exit destructor before it frees the state.
pub fn clear_thread_slot() {
    let _ = crate::per_thread::with(|p| p.slot.clear());
}

pub fn thread_exit(mut ts: Box<ThreadState>) {
    if let Some(t) = running() {
        let d = ts.take_stats_delta();
        // Every record with this thread's cursor is applied before the
        // cursor is released (and freed with `ts`).
        let mut core = lock_ordered(t);
        add_stats(&mut core.unwind, &d);
        let Core {
            collector,
            mpi,
            cursors,
            repeats,
            ..
        } = &mut *core;
        collector.release_cursor(&mut ts.cursor.get(cursors).cursor);
        // The thread's last folded MPI calls, while their contexts are held.
        let now = now_mono_ns().saturating_sub(t.start_mono_ns);
        for (what, n) in ts.mpi_fold.release(repeats).into_iter().flatten() {
            record_folded(mpi, collector, &what, n, now);
            mpi.let_go(&what);
        }
        mpi.release_cursor(&mut ts.mpi_cursor);
    }
}

/// Let go of the calling thread's reference to the module table (after the
/// report was taken: nothing is unwound any more).
pub fn drop_thread_modules(g: &Guard, t: &Tracer) {
    thread_state(g, t).modules = None;
}

/// Flush the calling thread's statistics (before taking the report).
pub fn flush_current_thread(g: &Guard, t: &Tracer) {
    let d = thread_state(g, t).take_stats_delta();
    add_stats(&mut t.core.lock().unwind, &d);
}
