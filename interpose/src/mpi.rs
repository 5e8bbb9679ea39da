//! MPI support, core side: the implementation behind every generated MPI
//! wrapper (C and Fortran share it), the job's life cycle (init, finalize,
//! abort) and the calls into `libwmhcct_mpi.so`, the separate library that
//! links MPI and performs the reduction. `libwmhcct.so` itself links no MPI
//! library: PMPI entry points are looked up with `dlsym(RTLD_NEXT, …)` when
//! the program first calls MPI, and the MPI-side library is loaded only once
//! the program has called `MPI_Init`.

use std::cell::Cell;
use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::guard::Guard;

thread_local! {
    /// Depth of MPI wrappers on this thread: an MPI call made from inside
    /// another wrapper (MPICH's Fortran bindings calling C, the tracer's own
    /// reduction) is not an event of the program.
    static IN_MPI: Cell<u32> = const { Cell::new(0) };
}

/// Marks the thread as inside an MPI wrapper while alive.
pub struct MpiScope(());

impl MpiScope {
    /// `None` when the thread is already inside an MPI wrapper.
    pub fn enter() -> Option<MpiScope> {
        IN_MPI
            .try_with(|d| {
                if d.get() > 0 {
                    None
                } else {
                    d.set(1);
                    Some(MpiScope(()))
                }
            })
            .ok()
            .flatten()
    }
}

impl Drop for MpiScope {
    fn drop(&mut self) {
        let _ = IN_MPI.try_with(|d| d.set(0));
    }
}

pub use crate::loaded_symbol::next_symbol;

/// Report a missing MPI entry point and stop: the program called an MPI
/// function that the process's MPI library does not define.
pub fn missing(name: &CStr) -> ! {
    crate::diag::message(&[
        "the MPI library does not define ",
        &name.to_string_lossy(),
        "; libwmhcct.so was built for OpenMPI/MPICH ABIs",
    ]);
    // SAFETY: abort has no preconditions.
    unsafe { libc::abort() }
}

/// How the arguments of a wrapper were passed.
#[derive(Clone, Copy)]
pub enum Abi {
    /// C: ints by value, handles by value.
    C,
    /// Fortran: every argument by reference, handles are INTEGERs.
    Fortran,
}

static TYPE_SIZE_C: AtomicUsize = AtomicUsize::new(0);
static COMM_SIZE_C: AtomicUsize = AtomicUsize::new(0);
static TYPE_SIZE_F: AtomicUsize = AtomicUsize::new(0);
static COMM_SIZE_F: AtomicUsize = AtomicUsize::new(0);
static COMM_RANK_C: AtomicUsize = AtomicUsize::new(0);
static COMM_RANK_F: AtomicUsize = AtomicUsize::new(0);

/// What tells the two MPI families' special handles apart, looked up once
/// from the loaded MPI library's data symbols.
mod family {
    use std::ffi::CStr;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use crate::guard::Guard;

    /// Cached as this when looked up and absent (no object is at address 1).
    const ABSENT: usize = 1;

    /// The address of the data symbol `name` (0: none), looked up once.
    fn data_symbol(cache: &AtomicUsize, name: &CStr) -> usize {
        match cache.load(Ordering::Acquire) {
            0 => {
                let _g = Guard::acquire();
                let a = crate::loaded_symbol::lookup(libc::RTLD_DEFAULT, name);
                cache.store(if a == 0 { ABSENT } else { a }, Ordering::Release);
                a
            }
            ABSENT => 0,
            a => a,
        }
    }

    static DATATYPE_NULL: AtomicUsize = AtomicUsize::new(0);

    /// Open MPI's C `MPI_DATATYPE_NULL` (`&ompi_mpi_datatype_null`); `None`
    /// in the MPICH family.
    pub fn open_mpi_null_type() -> Option<usize> {
        match data_symbol(&DATATYPE_NULL, c"ompi_mpi_datatype_null") {
            0 => None,
            a => Some(a),
        }
    }

    static IN_PLACE: [AtomicUsize; 5] = [const { AtomicUsize::new(0) }; 5];
    /// Open MPI's Fortran `MPI_IN_PLACE` in each mangling of its common
    /// block, and MPICH's pointer to its own (`MPIR_F_MPI_IN_PLACE`).
    const IN_PLACE_NAMES: [&CStr; 5] = [
        c"mpi_fortran_in_place_",
        c"mpi_fortran_in_place",
        c"mpi_fortran_in_place__",
        c"MPI_FORTRAN_IN_PLACE",
        c"MPIR_F_MPI_IN_PLACE",
    ];

    /// Whether `buf` is the Fortran `MPI_IN_PLACE` of the process's MPI.
    pub fn fortran_in_place(buf: usize) -> bool {
        IN_PLACE_NAMES
            .iter()
            .zip(&IN_PLACE)
            .enumerate()
            .any(|(i, (name, cache))| {
                let a = data_symbol(cache, name);
                if a == 0 {
                    return false;
                }
                if i == IN_PLACE_NAMES.len() - 1 {
                    // SAFETY: MPICH's `void *MPIR_F_MPI_IN_PLACE`, a
                    // pointer-sized variable at this address.
                    unsafe { *(a as *const usize) == buf }
                } else {
                    a == buf
                }
            })
    }
}

type CQuery = unsafe extern "C" fn(usize, *mut c_int) -> c_int;
type FQuery = unsafe extern "C" fn(usize, *mut c_int, *mut c_int);

impl Abi {
    fn int(self, v: usize) -> i64 {
        match self {
            Abi::C => v as i32 as i64,
            // SAFETY: Fortran passes a valid INTEGER by reference.
            Abi::Fortran if v != 0 => unsafe { *(v as *const i32) as i64 },
            Abi::Fortran => 0,
        }
    }

    fn aint(self, v: usize) -> i64 {
        match self {
            Abi::C => v as i64,
            // SAFETY: Fortran passes INTEGER(KIND=MPI_ADDRESS_KIND) by reference.
            Abi::Fortran if v != 0 => unsafe { *(v as *const i64) },
            Abi::Fortran => 0,
        }
    }

    fn query(self, c: (&AtomicUsize, &CStr), f: (&AtomicUsize, &CStr), handle: usize) -> i64 {
        let mut out: c_int = 0;
        match self {
            Abi::C => {
                let sym = next_symbol(c.0, c.1);
                if sym == 0 {
                    return 0;
                }
                // SAFETY: PMPI_Type_size/PMPI_Comm_size(handle, int*).
                let rc = unsafe { std::mem::transmute::<usize, CQuery>(sym)(handle, &mut out) };
                if rc != 0 {
                    return 0;
                }
            }
            Abi::Fortran => {
                let sym = next_symbol(f.0, f.1);
                if sym == 0 {
                    return 0;
                }
                let mut ierr: c_int = 0;
                // SAFETY: pmpi_type_size_/pmpi_comm_size_(INTEGER*, INTEGER*, INTEGER*).
                unsafe { std::mem::transmute::<usize, FQuery>(sym)(handle, &mut out, &mut ierr) };
                if ierr != 0 {
                    return 0;
                }
            }
        }
        out as i64
    }

    /// The size of datatype `dt`; 0 for `MPI_DATATYPE_NULL`, which MPI
    /// must not be asked about: its error handler (fatal by default)
    /// would end the job over an argument the standard says is ignored
    /// (`MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, …)`).
    fn type_size(self, dt: usize) -> i64 {
        if self.null_type(dt) {
            return 0;
        }
        self.query(
            (&TYPE_SIZE_C, c"PMPI_Type_size"),
            (&TYPE_SIZE_F, c"pmpi_type_size_"),
            dt,
        )
    }

    /// Whether `dt` is `MPI_DATATYPE_NULL` in this process's MPI family:
    /// Open MPI's is the address of `ompi_mpi_datatype_null` in C and 0 in
    /// Fortran, the MPICH family's `0x0c000000` in both.
    fn null_type(self, dt: usize) -> bool {
        const MPICH_NULL: u32 = 0x0c00_0000;
        let open_mpi = family::open_mpi_null_type();
        match self {
            // A C int handle (MPICH) is passed in a 64-bit register whose
            // upper half is unspecified.
            Abi::C => match open_mpi {
                Some(null) => dt == null || dt == 0,
                None => dt as u32 == MPICH_NULL,
            },
            Abi::Fortran => {
                let v = self.int(dt) as u32;
                match open_mpi {
                    Some(_) => v == 0,
                    None => v == MPICH_NULL,
                }
            }
        }
    }

    /// Whether the buffer argument `buf` is `MPI_IN_PLACE`: `(void *)1`
    /// (Open MPI) or `(void *)-1` (MPICH) in C; in Fortran the address of
    /// the MPI library's in-place variable.
    fn in_place(self, buf: usize) -> bool {
        match self {
            Abi::C => buf == 1 || buf == usize::MAX,
            Abi::Fortran => buf != 0 && family::fortran_in_place(buf),
        }
    }

    fn comm_rank(self, comm: usize) -> i64 {
        self.query(
            (&COMM_RANK_C, c"PMPI_Comm_rank"),
            (&COMM_RANK_F, c"pmpi_comm_rank_"),
            comm,
        )
    }

    fn comm_size(self, comm: usize) -> i64 {
        self.query(
            (&COMM_SIZE_C, c"PMPI_Comm_size"),
            (&COMM_SIZE_F, c"pmpi_comm_size_"),
            comm,
        )
    }
}

/// The bytes of one call, as the table in `mpi_table.rs` describes them.
pub mod bytes {
    use super::Abi;

    pub fn none(_abi: Abi) -> u64 {
        0
    }

    /// `count` elements of `dt`; a count of 0 (or less) without asking MPI
    /// the type's size, since the type may be one the call ignores.
    pub fn count(abi: Abi, count: usize, dt: usize) -> u64 {
        let n = abi.int(count);
        if n <= 0 {
            return 0;
        }
        (n * abi.type_size(dt).max(0)) as u64
    }

    /// `count` of `dt`, or where `buf` is `MPI_IN_PLACE` (which makes
    /// `count` and `dt` ignored) `alt_count` of `alt_dt`: this rank's part
    /// of the data either way (Gather and Allgather send side, Scatter
    /// receive side).
    pub fn in_place(
        abi: Abi,
        buf: usize,
        count: usize,
        dt: usize,
        alt_count: usize,
        alt_dt: usize,
    ) -> u64 {
        if abi.in_place(buf) {
            self::count(abi, alt_count, alt_dt)
        } else {
            self::count(abi, count, dt)
        }
    }

    /// [`in_place`] times the communicator's size (Alltoall).
    pub fn comm_in_place(
        abi: Abi,
        buf: usize,
        count: usize,
        dt: usize,
        alt_count: usize,
        alt_dt: usize,
        comm: usize,
    ) -> u64 {
        in_place(abi, buf, count, dt, alt_count, alt_dt) * abi.comm_size(comm).max(0) as u64
    }

    /// [`sum`] of `counts`, or of `alt_counts` where `buf` is
    /// `MPI_IN_PLACE` (Alltoallv: `counts` is then ignored, may be NULL).
    pub fn sum_in_place(
        abi: Abi,
        buf: usize,
        counts: usize,
        dt: usize,
        alt_counts: usize,
        alt_dt: usize,
        comm: usize,
    ) -> u64 {
        if abi.in_place(buf) {
            sum(abi, alt_counts, alt_dt, comm)
        } else {
            sum(abi, counts, dt, comm)
        }
    }

    /// `count` of `dt`, or where `buf` is `MPI_IN_PLACE` (only at the
    /// root) the root's own entry of the root's `alt_counts` (Gatherv,
    /// Scatterv).
    pub fn in_place_at_root(
        abi: Abi,
        buf: usize,
        count: usize,
        dt: usize,
        alt_counts: usize,
        alt_dt: usize,
        root: usize,
    ) -> u64 {
        let alt = (alt_counts, alt_dt);
        in_place_entry(abi, buf, count, dt, alt, || abi.int(root))
    }

    /// `count` of `dt`, or where `buf` is `MPI_IN_PLACE` this rank's entry
    /// of `alt_counts` (Allgatherv).
    pub fn in_place_own(
        abi: Abi,
        buf: usize,
        count: usize,
        dt: usize,
        alt_counts: usize,
        alt_dt: usize,
        comm: usize,
    ) -> u64 {
        let alt = (alt_counts, alt_dt);
        in_place_entry(abi, buf, count, dt, alt, || abi.comm_rank(comm))
    }

    /// `count` of `dt`, or where `buf` is `MPI_IN_PLACE` the entry
    /// `index()` of the other side's counts `alt.0`, of its type `alt.1`.
    fn in_place_entry(
        abi: Abi,
        buf: usize,
        count: usize,
        dt: usize,
        alt: (usize, usize),
        index: impl FnOnce() -> i64,
    ) -> u64 {
        if !abi.in_place(buf) {
            return self::count(abi, count, dt);
        }
        entry(abi, alt.0, index(), alt.1)
    }

    /// `counts[i]` elements of `dt` (0 for no array or a negative index).
    fn entry(abi: Abi, counts: usize, i: i64, dt: usize) -> u64 {
        if counts == 0 || i < 0 {
            return 0;
        }
        // SAFETY: MPI requires `counts` to hold one int per rank of the
        // communicator, and `i` is a rank of it.
        let n = unsafe { *(counts as *const i32).add(i as usize) } as i64;
        if n <= 0 {
            return 0;
        }
        (n * abi.type_size(dt).max(0)) as u64
    }

    pub fn sum(abi: Abi, counts: usize, dt: usize, comm: usize) -> u64 {
        let n = abi.comm_size(comm).max(0) as usize;
        if counts == 0 {
            return 0;
        }
        // SAFETY: MPI requires `counts` to hold one int per rank of `comm`.
        let total: i64 = (0..n)
            .map(|i| unsafe { *(counts as *const i32).add(i) } as i64)
            .filter(|&c| c > 0)
            .sum();
        (total * abi.type_size(dt).max(0)) as u64
    }

    pub fn aint(abi: Abi, n: usize) -> u64 {
        abi.aint(n).max(0) as u64
    }
}

pub const KIND_ALLOC_MEM: usize = 30;
pub const KIND_FREE_MEM: usize = 31;

/// One interposed MPI call: `call` performs the PMPI call and returns its
/// error code; `bytes` computes the call's bytes (before the call, as the
/// arguments may be changed by it). `base` is the Alloc_mem/Free_mem pointer
/// argument.
pub fn event(
    kind: usize,
    base: usize,
    bytes: impl FnOnce() -> u64,
    call: impl FnOnce() -> c_int,
) -> c_int {
    let Some(scope) = MpiScope::enter() else {
        return call();
    };
    let b = if crate::tracer::running().is_some() {
        bytes()
    } else {
        0
    };
    if kind == KIND_FREE_MEM {
        if let Some(g) = Guard::acquire_event() {
            // SAFETY: C passes the block, Fortran a reference to it: either
            // way the argument is the block's address.
            crate::tracer::on_free_kind(
                &g,
                wmhcct_format::AllocKind::MpiFreeMem,
                base as *mut c_void,
            );
        }
    }
    let rc = if kind == KIND_ALLOC_MEM || kind == KIND_FREE_MEM {
        // The MPI library's own malloc/free of this very block (OpenMPI
        // allocates it with malloc) belong to this call, which is recorded
        // below: hidden, so the block is neither counted twice nor freed as
        // an unknown pointer.
        let _hidden = Guard::acquire();
        call()
    } else {
        call()
    };
    let e = crate::errno::get();
    if let Some(g) = Guard::acquire_event() {
        // A failed MPI_Alloc_mem counts as a call of 0 bytes, as a failed
        // malloc does, in both its rows (the MPI call and the allocation).
        let failed = kind == KIND_ALLOC_MEM && (rc != 0 || base == 0);
        crate::tracer::on_mpi(&g, kind, if failed { 0 } else { b });
        if kind == KIND_ALLOC_MEM {
            // SAFETY: on success MPI stored the block's address at `base`.
            let block = if failed {
                0
            } else {
                unsafe { *(base as *const usize) }
            };
            crate::tracer::on_alloc(
                &g,
                crate::tracer::current_regs(),
                wmhcct_format::AllocKind::MpiAllocMem,
                block as *mut c_void,
                b as usize,
            );
        }
    }
    crate::errno::set(e);
    drop(scope);
    rc
}

// ---------------------------------------------------------------------------
// The job: the MPI-side library and the report at MPI_Finalize.

type SideInit = unsafe extern "C" fn(*mut c_int, *mut c_int, *mut u8, usize, *mut usize) -> c_int;
type Sink = extern "C" fn(*const u8, usize, u32, c_int, *mut c_void);
type Left = extern "C" fn(u32, *mut c_void) -> c_int;
type SideReduce = unsafe extern "C" fn(*const u8, usize, u64, Sink, Left, *mut c_void) -> c_int;

static SIDE_REDUCE: AtomicUsize = AtomicUsize::new(0);

/// An MPMD job (`mpirun -np 1 a : -np 3 b`) may run some executables
/// without the tracer, and those ranks would never join the reduction's
/// collectives: the others would wait in MPI_Init for ever. So such a job
/// gets no MPI side; its traced ranks leave per-rank profiles (the first
/// rank of each executable says so). Known from Open MPI's launcher, which
/// tells every rank how many executables the job has.
fn several_executables() -> bool {
    match crate::launcher::app_contexts(|v| std::env::var(v).ok()) {
        Some((n, first)) if n > 1 => {
            if first {
                crate::diag::message(&[
                    "a job of several executables: its traced ranks leave per-rank profiles for \
                     `wmhcct merge` instead of one report (a job-wide merge would wait for ever \
                     for executables run without the tracer)",
                ]);
            }
            true
        }
        _ => false,
    }
}

/// After a successful PMPI_Init(_thread): learn rank and size, agree on the
/// report path (rank 0's), and load the MPI side for the reduction.
pub fn after_init() {
    let Some(g) = Guard::acquire() else { return };
    let Some(t) = crate::tracer::get(&g) else {
        return;
    };
    let _scope = MpiScope::enter();
    if several_executables() {
        return;
    }
    let Some(h) = crate::mpi_side::load() else {
        return;
    };
    // SAFETY: dlsym on a handle we opened, NUL-terminated names.
    let (init, reduce) = unsafe {
        (
            libc::dlsym(h, c"wmhcct_mpi_init".as_ptr()) as usize,
            libc::dlsym(h, c"wmhcct_mpi_merge".as_ptr()) as usize,
        )
    };
    if init == 0 || reduce == 0 {
        crate::diag::message(&["libwmhcct_mpi.so lacks its entry points; job report disabled"]);
        return;
    }
    let mut rank: c_int = -1;
    let mut size: c_int = 0;
    let mut buf = vec![0u8; 4096];
    // The path, a NUL byte and the launch: rank 0's are everyone's. The
    // other ranks, as far as their launcher tells, do not look at the file
    // system for a path that is not used (thousands of ranks at once on a
    // shared file system's metadata server).
    let path = match crate::launcher::world_rank(|v| std::env::var(v).ok()) {
        Some(r) if r != 0 => crate::report::job_report_path(t),
        _ => crate::report::new_job_report_path(t),
    };
    let mut mine = path.into_os_string().into_encoded_bytes();
    mine.push(0);
    mine.extend_from_slice(crate::report::mpi_launch(t).as_bytes());
    let n = mine.len().min(buf.len());
    buf[..n].copy_from_slice(&mine[..n]);
    let mut len = n;
    // SAFETY: wmhcct_mpi_init(rank*, size*, buf, cap, len*) as defined in mpi/.
    let rc = unsafe {
        std::mem::transmute::<usize, SideInit>(init)(
            &mut rank,
            &mut size,
            buf.as_mut_ptr(),
            buf.len(),
            &mut len,
        )
    };
    if rc != 0 || rank < 0 || size <= 0 {
        crate::diag::message(&["MPI-side initialisation failed; job report disabled"]);
        return;
    }
    let agreed = &buf[..len.min(buf.len())];
    let path_end = agreed.iter().position(|&b| b == 0).unwrap_or(agreed.len());
    let (path, launch) = agreed.split_at(path_end);
    let launch = launch.get(1..).unwrap_or_default();
    crate::tracer::set_job(
        t,
        crate::tracer::Job {
            rank: rank as u32,
            size: size as u32,
            report: std::path::PathBuf::from(String::from_utf8_lossy(path).into_owned()),
            launch: String::from_utf8_lossy(launch).into_owned(),
        },
    );
    SIDE_REDUCE.store(reduce, Ordering::Release);
}

extern "C" fn write_merged(
    data: *const u8,
    len: usize,
    ranks: u32,
    orphaned: c_int,
    ctx: *mut c_void,
) {
    // SAFETY: the side library passes a valid buffer; ctx is our &Tracer.
    let (bytes, t) = unsafe {
        (
            std::slice::from_raw_parts(data, len),
            &*(ctx as *const crate::tracer::Tracer),
        )
    };
    if orphaned != 0 {
        // The rank above it in the reduction left without MPI_Finalize:
        // this rank's subtree (itself and the ranks that reported to it)
        // is not in the report, but in the spill directory.
        crate::diag::message(&[
            "the rank this one reports to left without MPI_Finalize; writing the profiles of \
             this rank and of those that reported to it to the spill directory",
        ]);
        crate::report::spill_bytes(t, bytes);
        return;
    }
    match crate::tracer::job(t) {
        // Ranks left without MPI_Finalize, their profiles in the spill
        // directory.
        Some(j) if ranks < j.size => crate::report::write_partial_job(t, bytes, ranks, j.size),
        _ => crate::report::write_bytes(t, bytes),
    }
}

/// Whether `rank` of this job has left without `MPI_Finalize`: its mark in
/// the spill directory ([`crate::report::rank_left`]), for the reduction,
/// which then stops waiting for it.
extern "C" fn rank_left(rank: u32, ctx: *mut c_void) -> c_int {
    // SAFETY: ctx is the &Tracer `before_finalize` passes.
    let t = unsafe { &*(ctx as *const crate::tracer::Tracer) };
    c_int::from(crate::report::rank_left(t, rank))
}

/// Before PMPI_Finalize: merge every rank's profile into one report.
pub fn before_finalize() {
    let Some(g) = Guard::acquire() else { return };
    let Some(t) = crate::tracer::running() else {
        return;
    };
    let _scope = MpiScope::enter();
    let reduce = SIDE_REDUCE.load(Ordering::Acquire);
    if reduce == 0 {
        // No MPI side: each rank leaves its own profile in the spill directory.
        crate::report::spill(&g, t, "finalize");
        return;
    }
    let Some(profile) = crate::report::take(&g, t, "finalize") else {
        return;
    };
    let capacity = if t.config.exact {
        0
    } else {
        t.config.capacity() as u64
    };
    let bytes = match wmhcct_format::encode(&profile) {
        Ok(b) => b,
        Err(_) => return,
    };
    // The reduction decodes its own copy: keeping this one would hold the
    // profile twice at the job's memory peak.
    drop(profile);
    // SAFETY: wmhcct_mpi_merge(data, len, capacity, sink, left, ctx) as
    // defined in mpi/; collective over the job; the sink runs on rank 0
    // only.
    let rc = unsafe {
        std::mem::transmute::<usize, SideReduce>(reduce)(
            bytes.as_ptr(),
            bytes.len(),
            capacity,
            write_merged,
            rank_left,
            t as *const crate::tracer::Tracer as *mut c_void,
        )
    };
    match rc {
        0 => crate::report::forget_snapshot(t),
        _ => {
            crate::diag::message(&[
                "the cross-rank reduction failed; writing this rank's profile to the spill directory",
            ]);
            crate::report::spill_bytes(t, &bytes);
        }
    }
}

/// Before PMPI_Abort: this rank's profile goes to the spill directory.
pub fn before_abort() {
    let Some(g) = Guard::acquire() else { return };
    let Some(t) = crate::tracer::running() else {
        return;
    };
    crate::report::spill(&g, t, "abort");
}
