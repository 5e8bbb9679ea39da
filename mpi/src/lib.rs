//! `libwmhcct_mpi.so`: the MPI side of the tracer. `libwmhcct.so` links no
//! MPI library; it loads this one with `dlopen` once the program has called
//! `MPI_Init`. Everything here runs inside the tracer's reentrancy guard, so
//! its MPI calls and allocations are never recorded as the program's.

pub mod exports;
pub mod reduce;
pub mod tree;
