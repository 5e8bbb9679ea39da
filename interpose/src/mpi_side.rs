//! Finding the MPI-side library (`libwmhcct_mpi.so`) that matches the
//! job's MPI, and loading it.
//!
//! A side library built for one MPI family must never be loaded into a job
//! of the other: its calls would hand Open MPI's pointer handles to an
//! MPICH-family library (or the reverse), which aborts the job. So the
//! tracer first tells which family the process runs (Open MPI's world
//! communicator symbol, else `MPI_Get_library_version`), then reads the
//! family each candidate file was built for from the file itself
//! (`wmhcct_format::mpi_abi`), and loads only a match. Candidates: the file
//! `WMHCCT_MPI_LIB` names, else `libwmhcct_mpi_<family>.so` and then
//! `libwmhcct_mpi.so` next to `libwmhcct.so`. Without a match the ranks
//! leave per-rank profiles, as for any failure of the MPI side, and rank 0
//! says why (every rank finds the same).

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};

use wmhcct_format::mpi_abi::{self, MpiAbi};

type LibraryVersion = unsafe extern "C" fn(*mut c_char, *mut c_int) -> c_int;
type AbiQuery = extern "C" fn() -> c_int;

/// What the ranks do without the MPI side, for the end of every message.
const FALLBACK: &str = "; this job's ranks will leave per-rank profiles instead of one report";

/// A line about the whole job (every rank finds the same): rank 0's only.
fn say(parts: &[&str]) {
    if crate::launcher::speaks_for_the_job() {
        crate::diag::message(parts);
    }
}

/// A symbol of the process's global scope (the program and the libraries
/// it loaded, MPI among them), else of any loaded object (an MPI library
/// that Python loaded with mpi4py, `RTLD_LOCAL`), or null.
fn global_symbol(name: &CStr) -> *mut c_void {
    crate::loaded_symbol::lookup(libc::RTLD_DEFAULT, name) as *mut c_void
}

/// The MPI family of this process, or the first line of its library's
/// version string when it is neither.
fn process_abi() -> Result<MpiAbi, String> {
    // Open MPI's MPI_COMM_WORLD is this object (`&ompi_mpi_comm_world`).
    if !global_symbol(c"ompi_mpi_comm_world").is_null() {
        return Ok(MpiAbi::OpenMpi);
    }
    let f = global_symbol(c"PMPI_Get_library_version");
    if f.is_null() {
        return Err("an MPI library without MPI_Get_library_version".into());
    }
    // Larger than MPI_MAX_LIBRARY_VERSION_STRING of every implementation
    // (8192 in MPICH); zeroed, so the text is terminated either way.
    let mut buf = vec![0u8; 16 * 1024 + 1];
    let mut len: c_int = 0;
    // SAFETY: MPI_Get_library_version(char *version, int *resultlen) writes
    // at most MPI_MAX_LIBRARY_VERSION_STRING bytes; it may be called at any
    // time, before MPI_Init and after MPI_Finalize.
    let rc = unsafe {
        std::mem::transmute::<*mut c_void, LibraryVersion>(f)(buf.as_mut_ptr().cast(), &mut len)
    };
    let text = CStr::from_bytes_until_nul(&buf)
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_default();
    if rc != 0 {
        return Err("an MPI library whose MPI_Get_library_version failed".into());
    }
    MpiAbi::from_library_version(&text).ok_or_else(|| {
        text.lines()
            .next()
            .unwrap_or("an unknown MPI library")
            .trim()
            .to_owned()
    })
}

/// Load the side library for this job's MPI; `None` (with a message) when
/// there is none.
pub fn load() -> Option<*mut c_void> {
    let abi = match process_abi() {
        Ok(abi) => abi,
        Err(what) => {
            say(&[
                "the MPI-side library supports Open MPI and the MPICH family, not ",
                &what,
                FALLBACK,
            ]);
            return None;
        }
    };
    // Empty is unset, as for WMHCCT_LIB (`wmhcct run`): a script's
    // `WMHCCT_MPI_LIB=` used to name the path "", and no job had a report.
    if let Some(p) = std::env::var_os("WMHCCT_MPI_LIB").filter(|v| !v.is_empty()) {
        let path = PathBuf::from(p);
        return match mpi_abi::read_library(&path) {
            Some(built) if built == abi => open(&path, abi),
            Some(built) => {
                say(&[
                    "WMHCCT_MPI_LIB=",
                    &path.to_string_lossy(),
                    " was built for ",
                    built.describe(),
                    ", but this job runs ",
                    abi.describe(),
                    FALLBACK,
                ]);
                None
            }
            None => {
                say(&[
                    "WMHCCT_MPI_LIB=",
                    &path.to_string_lossy(),
                    " is not a readable libwmhcct_mpi.so (one built by this version of wmhcct)",
                    FALLBACK,
                ]);
                None
            }
        };
    }
    let dir = crate::report::own_path()?.parent()?.to_path_buf();
    let candidates = [
        dir.join(format!("libwmhcct_mpi_{}.so", abi.tag())),
        dir.join("libwmhcct_mpi.so"),
    ];
    let mut others = Vec::new();
    for path in candidates.iter().filter(|p| p.is_file()) {
        match mpi_abi::read_library(path) {
            Some(built) if built == abi => return open(path, abi),
            Some(built) => others.push(format!(
                "; {} is built for {}",
                path.display(),
                built.describe()
            )),
            None => others.push(format!("; {} is not readable", path.display())),
        }
    }
    let mut msg = vec![
        "no MPI-side library for ",
        abi.describe(),
        " next to libwmhcct.so",
    ];
    msg.extend(others.iter().map(String::as_str));
    msg.extend([
        "; build libwmhcct_mpi_",
        abi.tag(),
        ".so (README: \"Another MPI implementation\")",
        FALLBACK,
    ]);
    say(&msg);
    None
}

/// `dlopen` the side library at `path` (built for `abi`, as its file says)
/// and check, before any of its MPI calls, that it says so too.
fn open(path: &Path, abi: MpiAbi) -> Option<*mut c_void> {
    let c = CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: dlopen of our own MPI-side library, with a NUL-terminated path.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if h.is_null() {
        crate::diag::message(&["cannot load ", &path.to_string_lossy(), FALLBACK]);
        return None;
    }
    // SAFETY: dlsym on the handle we opened, NUL-terminated name.
    let query = unsafe { libc::dlsym(h, c"wmhcct_mpi_abi".as_ptr()) };
    let built = if query.is_null() {
        None
    } else {
        // SAFETY: wmhcct_mpi_abi() -> int, defined in mpi/src/exports.rs;
        // it makes no MPI call.
        MpiAbi::from_code(unsafe {
            std::mem::transmute::<*mut c_void, AbiQuery>(query)
        }())
    };
    if built != Some(abi) {
        // SAFETY: our handle, none of whose code runs any more.
        unsafe { libc::dlclose(h) };
        crate::diag::message(&[
            &path.to_string_lossy(),
            " is not an MPI-side library for ",
            abi.describe(),
            FALLBACK,
        ]);
        return None;
    }
    Some(h)
}
