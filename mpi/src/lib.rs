//! `libwmhcct_mpi.so`: the MPI side of the tracer. `libwmhcct.so` links no
//! MPI library; it loads this one with `dlopen` once the program has called
//! `MPI_Init`. Everything here runs inside the tracer's reentrancy guard, so
//! its MPI calls and allocations are never recorded as the program's; its
//! Rust allocations go to the tracer's own heap (`heap`).

pub mod exports;
mod heap;
pub mod reduce;
pub mod tree;

#[cfg(not(test))]
#[global_allocator]
static ALLOCATOR: heap::SideHeap = heap::SideHeap;
