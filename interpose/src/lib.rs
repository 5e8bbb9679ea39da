//! `libwmhcct.so`: the LD_PRELOAD tracer.
//!
//! `exports` holds every exported C symbol; each calls the core API in
//! `tracer`. The program's allocations are forwarded to the allocator it
//! would have used without us (`next_alloc`); the tracer's own go to pages
//! of its own, apart from the program's heap (`own_heap::OwnHeap`);
//! `guard::Guard` keeps the hooks from re-entering.

mod arena;
mod bernoulli;
mod biased_lock;
mod clock;
/// The settings (`WMHCCT_*`), parsed by the format crate, which `wmhcct run`
/// shares.
pub use wmhcct_format::settings as config;
mod deferred;
mod diag;
mod dir_entries;
mod errno;
// The unit-test binary exports no C symbol (it must not interpose its own
// malloc), so the entry points are unused there.
#[cfg_attr(test, allow(dead_code, non_snake_case))]
pub mod exports;
#[cfg_attr(test, allow(dead_code))]
mod foreign;
mod frame_keys;
mod guard;
mod last_flush;
mod launcher;
#[cfg_attr(test, allow(dead_code))]
mod lifecycle;
mod loaded_symbol;
mod lock;
pub mod modules;
#[cfg_attr(test, allow(dead_code))]
mod mpi;
mod mpi_repeats;
mod mpi_side;
mod mpi_table;
mod next_alloc;
pub mod output;
mod own_file;
mod own_heap;
mod packets;
mod per_thread;
mod placement;
mod quiet_child;
mod real;
mod report;
mod reserve;
mod resident;
mod sealed;
mod shared_clock;
mod signals;
mod stack_memory;
#[cfg(target_env = "gnu")]
mod stdio_streams;
mod thread;
mod thread_key;
pub mod tracer;
mod tracer_stack;
mod valgrind;

#[global_allocator]
static ALLOCATOR: own_heap::OwnHeap = own_heap::OwnHeap;
