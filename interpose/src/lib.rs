//! `libwmhcct.so`: the LD_PRELOAD tracer.
//!
//! `exports` holds every exported C symbol; each calls the core API in
//! `tracer`. The tracer's own allocations go straight to glibc through
//! `real::LibcAllocator`; `guard::Guard` keeps the hooks from re-entering.

mod clock;
pub mod config;
mod diag;
mod errno;
pub mod exports;
mod foreign;
mod guard;
mod lifecycle;
mod lock;
pub mod modules;
mod mpi;
mod mpi_table;
pub mod output;
mod real;
mod report;
mod reserve;
mod signals;
mod thread;
pub mod tracer;

#[global_allocator]
static ALLOCATOR: real::LibcAllocator = real::LibcAllocator;
