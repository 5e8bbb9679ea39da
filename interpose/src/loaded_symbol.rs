//! A symbol defined by any loaded object, also by one that only an object
//! loaded with `RTLD_LOCAL` brought in, which neither `RTLD_NEXT` nor
//! `RTLD_DEFAULT` sees. Python loads its extension modules that way: with
//! mpi4py the MPI library sits in the extension's own scope, while the
//! extension's MPI calls reach the tracer's wrappers, which are global.

use std::ffi::{c_int, c_void, CStr, CString};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The names of the loaded objects, in the loader's order (the program
/// itself, which has none, left out).
fn loaded_objects() -> Vec<CString> {
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> c_int {
        // SAFETY: `data` is the Vec passed below, alive for the whole
        // iteration; `info` is the loader's, its name NUL-terminated.
        let (names, info) = unsafe { (&mut *data.cast::<Vec<CString>>(), &*info) };
        if !info.dlpi_name.is_null() {
            // SAFETY: as above.
            let name = unsafe { CStr::from_ptr(info.dlpi_name) };
            if !name.is_empty() {
                names.push(name.to_owned());
            }
        }
        0
    }
    let mut names: Vec<CString> = Vec::new();
    // SAFETY: `each` has the callback's signature and only touches `names`;
    // nothing in it calls into the loader.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut names as *mut Vec<CString>).cast()) };
    names
}

/// The next definition of `name` after this library (`RTLD_NEXT`, else
/// [`find`]: also an MPI library outside the global scope, as mpi4py's,
/// which Python loads with its extension, `RTLD_LOCAL`), looked up once
/// into `cache`; 0 when there is none (looked up again next time).
pub fn next_symbol(cache: &AtomicUsize, name: &CStr) -> usize {
    let f = cache.load(Ordering::Acquire);
    if f != 0 {
        return f;
    }
    // The lookup may allocate: not an event of the program.
    let _g = crate::guard::Guard::acquire();
    let f = lookup(libc::RTLD_NEXT, name);
    cache.store(f, Ordering::Release);
    f
}

/// `dlsym(handle, name)` (`RTLD_NEXT`, `RTLD_DEFAULT`), else [`find`]: a
/// symbol of an MPI library loaded out of the handle's reach.
pub fn lookup(handle: *mut c_void, name: &CStr) -> usize {
    // SAFETY: dlsym with a pseudo-handle or a handle from dlopen, and a
    // NUL-terminated name.
    match unsafe { libc::dlsym(handle, name.as_ptr()) } as usize {
        0 => find(name),
        f => f,
    }
}

/// The address of `name` in the first loaded object that defines it, or
/// in that object's dependencies (as `dlsym` on its handle searches); 0
/// when none does. Each object is only looked up (`RTLD_NOLOAD`), never
/// loaded.
pub fn find(name: &CStr) -> usize {
    let mut found = 0;
    for object in loaded_objects() {
        // SAFETY: RTLD_NOLOAD returns a handle only for an object already
        // loaded (and loads nothing); the handle is closed right after.
        let h = unsafe { libc::dlopen(object.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
        if h.is_null() {
            continue;
        }
        // SAFETY: a handle from dlopen and a NUL-terminated name.
        found = unsafe { libc::dlsym(h, name.as_ptr()) } as usize;
        // SAFETY: closes only the reference taken above; the object stays.
        unsafe { libc::dlclose(h) };
        if found != 0 {
            break;
        }
    }
    // Leave no error of ours for the program's next dlerror().
    // SAFETY: dlerror has no preconditions.
    unsafe { libc::dlerror() };
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_libc_function_and_nothing_for_an_unknown_name() {
        assert!(loaded_objects()
            .iter()
            .any(|n| n.to_bytes().ends_with(b".so.6")));
        assert_eq!(find(c"getpid"), libc::getpid as *const () as usize);
        assert_eq!(find(c"wmhcct_no_such_symbol"), 0);
    }
}
