//! The C entry points `libwmhcct.so` looks up with `dlsym` after MPI_Init.
//! Both are collective over MPI_COMM_WORLD.

use std::ffi::{c_int, c_void};
use std::sync::Mutex;

use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

use wmhcct_format::mpi_abi::{self, MpiAbi};

use crate::reduce;

/// The tracer's private communicator (a duplicate of the world), so its
/// traffic can never match the program's messages.
struct Private(SimpleCommunicator);
// SAFETY: the communicator is only used by the thread that calls into this
// library, one call at a time (MPI_Init and MPI_Finalize of the program).
unsafe impl Send for Private {}

static COMM: Mutex<Option<Private>> = Mutex::new(None);

/// The MPI family this library was built for, from the width of the
/// `MPI_Comm` it was compiled against.
const BUILT_FOR: MpiAbi = MpiAbi::from_handle_size(
    std::mem::size_of::<mpi::ffi::MPI_Comm>(),
    std::mem::size_of::<*const u8>(),
);

/// The family, in an ELF section of its own, which the tracer reads from
/// the file before it loads the library (`wmhcct_format::mpi_abi`).
#[used]
#[link_section = ".wmhcct_mpi_abi"]
static MARKER: [u8; mpi_abi::MARKER_LEN] = mpi_abi::marker(BUILT_FOR);

/// The family this library was built for ([`MpiAbi::code`]): the tracer
/// checks it once more after loading, before any MPI call. Reading the
/// marker here also keeps its section in the linked library.
#[no_mangle]
pub extern "C" fn wmhcct_mpi_abi() -> c_int {
    match mpi_abi::parse_marker(&std::hint::black_box(MARKER)) {
        Some(abi) => abi.code(),
        None => 0,
    }
}

/// After PMPI_Init: rank and size of the world, and rank 0's report path
/// and launch (in `path[..*len]` on rank 0, of capacity `cap`: the path, a
/// NUL byte, the launch) broadcast to every rank.
///
/// # Safety
/// All pointers valid; `path` holds `cap` bytes.
#[no_mangle]
pub unsafe extern "C" fn wmhcct_mpi_init(
    rank: *mut c_int,
    size: *mut c_int,
    path: *mut u8,
    cap: usize,
    len: *mut usize,
) -> c_int {
    let world = SimpleCommunicator::world();
    let private = world.duplicate();
    let r = private.rank();
    // SAFETY: caller passes valid out-pointers and a buffer of `cap` bytes.
    unsafe {
        *rank = r;
        *size = private.size();
        let buf = std::slice::from_raw_parts_mut(path, cap);
        if r == 0 && spawned() {
            // A job started by MPI_Comm_spawn: its report must not be the
            // parent job's (both would write the same path).
            let given = &buf[..(*len).min(cap)];
            let path_end = given.iter().position(|&b| b == 0).unwrap_or(given.len());
            let mut own = spawned_report_path(&given[..path_end], std::process::id());
            own.extend_from_slice(&given[path_end..]);
            if own.len() <= cap {
                buf[..own.len()].copy_from_slice(&own);
                *len = own.len();
            }
        }
        let mut n = [*len as u64];
        private.process_at_rank(0).broadcast_into(&mut n[..]);
        let n = (n[0] as usize).min(cap);
        private.process_at_rank(0).broadcast_into(&mut buf[..n]);
        *len = n;
    }
    if let Ok(mut c) = COMM.lock() {
        *c = Some(Private(private));
    }
    0
}

/// Whether this job was started by another one (`MPI_Comm_spawn`).
fn spawned() -> bool {
    // SAFETY: MPI is initialised (the caller runs after MPI_Init);
    // RSMPI_COMM_NULL is rsmpi's constant, set before MPI_Init and never
    // written again; MPI_Comm_get_parent only writes the handle, which is
    // not freed here.
    unsafe {
        let null = mpi::ffi::RSMPI_COMM_NULL;
        let mut parent = null;
        mpi::ffi::MPI_Comm_get_parent(&mut parent);
        parent != null
    }
}

/// The report of a spawned job whose rank 0 is process `pid`, next to the
/// one the spawning job writes at `path`: `job.h5` → `job-spawn-<pid>.h5`.
fn spawned_report_path(path: &[u8], pid: u32) -> Vec<u8> {
    let name_at = path.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
    let ext_at = path[name_at..]
        .iter()
        .rposition(|&b| b == b'.')
        .filter(|&i| i > 0)
        .map_or(path.len(), |i| name_at + i);
    let mut out = path[..ext_at].to_vec();
    out.extend_from_slice(format!("-spawn-{pid}").as_bytes());
    out.extend_from_slice(&path[ext_at..]);
    out
}

/// Merge every rank's profile (`data[..len]`, encoded) up a binomial tree;
/// rank 0 hands the job's profile to `sink(bytes, len, ranks, 0, ctx)`,
/// with the number of ranks it holds. `left(rank, ctx)` is nonzero once
/// `rank` has left without `MPI_Finalize` (`reduce.rs`); a rank whose
/// parent left hands its subtree's profile to `sink(bytes, len, 0, 1, ctx)`
/// to keep. Returns 0, or 1 on an error.
///
/// # Safety
/// `data` holds `len` bytes; `sink` and `left` are callable with `ctx`.
#[no_mangle]
pub unsafe extern "C" fn wmhcct_mpi_merge(
    data: *const u8,
    len: usize,
    capacity: u64,
    sink: extern "C" fn(*const u8, usize, u32, c_int, *mut c_void),
    left: extern "C" fn(u32, *mut c_void) -> c_int,
    ctx: *mut c_void,
) -> c_int {
    let Ok(guard) = COMM.lock() else { return 1 };
    let Some(Private(comm)) = guard.as_ref() else {
        return 1;
    };
    // SAFETY: caller passes `len` readable bytes.
    let local = unsafe { std::slice::from_raw_parts(data, len) };
    let gone = |rank: u32| left(rank, ctx) != 0;
    match reduce::reduce(comm, local, capacity as usize, &gone) {
        Ok(reduce::Reduced::Root(merged, ranks)) => {
            sink(merged.as_ptr(), merged.len(), ranks, 0, ctx);
            0
        }
        Ok(reduce::Reduced::Sent) => 0,
        Ok(reduce::Reduced::Orphaned(subtree)) => {
            sink(subtree.as_ptr(), subtree.len(), 0, 1, ctx);
            0
        }
        Err(e) => {
            eprintln!("wmhcct: rank {}: {e}", comm.rank());
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::spawned_report_path;

    #[test]
    fn spawned_jobs_name_their_report_after_their_rank_0() {
        let cases: [(&str, &str); 4] = [
            ("/runs/job.h5", "/runs/job-spawn-42.h5"),
            ("/runs/v1.2/job", "/runs/v1.2/job-spawn-42"),
            ("job.x.h5", "job.x-spawn-42.h5"),
            ("/runs/.hidden", "/runs/.hidden-spawn-42"),
        ];
        for (path, want) in cases {
            let got = spawned_report_path(path.as_bytes(), 42);
            assert_eq!(String::from_utf8(got).unwrap(), want, "{path}");
        }
    }
}
