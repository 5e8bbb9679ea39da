//! The one table of interposed MPI calls. `exports.rs` expands it into the C
//! wrappers (`MPI_Send`, …) and the Fortran wrappers in every mangling
//! (`mpi_send_`, `mpi_send__`, `mpi_send`, `MPI_SEND`, `mpi_send_f08_`), which
//! share one implementation (`mpi::c_call` / `mpi::fortran_call`).
//!
//! Each row: C name, PMPI name, Fortran lower-case name, Fortran upper-case
//! name, the parameters (name: kind), and how the bytes of the call are
//! computed. Parameter kinds: `P` pointer, `I` C int (by value in C),
//! `H` handle (passed through untouched, so OpenMPI's pointer handles and
//! MPICH's int handles both work), `A` MPI_Aint. In Fortran every parameter is
//! passed by reference and an `ierr` pointer (possibly NULL) follows.
//!
//! Bytes (the `bytes` of the report, per call on this rank):
//! `count(c, t)` = c × size(t);
//! `sum(a, t, k)` = (Σ a[i] over the communicator) × size(t); `aint(n)` = n;
//! `none` = 0. The `in_place` forms take the other side's count and type
//! where the buffer is `MPI_IN_PLACE` (which makes the first side's
//! ignored): `in_place(b, c, t, c2, t2)`, `comm_in_place(…, k)`,
//! `sum_in_place(b, a, t, a2, t2, k)`, and for the v-collectives the root's
//! (`in_place_at_root(b, c, t, a2, t2, root)`) or this rank's
//! (`in_place_own(b, c, t, a2, t2, k)`) entry of the other side's counts.
//! A count of 0 and `MPI_DATATYPE_NULL` give 0 without asking MPI the
//! type's size: an ignored argument may hold either, and MPI's error
//! handler would end the job over it.

#[macro_export]
macro_rules! mpi_calls {
    ($m:ident) => {
        $m! {
            (MPI_Send, "PMPI_Send", "mpi_send", "MPI_SEND", 0, (buf: P, count: I, dt: H, dest: I, tag: I, comm: H), count(count, dt));
            (MPI_Recv, "PMPI_Recv", "mpi_recv", "MPI_RECV", 1, (buf: P, count: I, dt: H, src: I, tag: I, comm: H, st: P), count(count, dt));
            (MPI_Isend, "PMPI_Isend", "mpi_isend", "MPI_ISEND", 2, (buf: P, count: I, dt: H, dest: I, tag: I, comm: H, req: P), count(count, dt));
            (MPI_Irecv, "PMPI_Irecv", "mpi_irecv", "MPI_IRECV", 3, (buf: P, count: I, dt: H, src: I, tag: I, comm: H, req: P), count(count, dt));
            (MPI_Sendrecv, "PMPI_Sendrecv", "mpi_sendrecv", "MPI_SENDRECV", 4, (sbuf: P, scount: I, sdt: H, dest: I, stag: I, rbuf: P, rcount: I, rdt: H, src: I, rtag: I, comm: H, st: P), count(scount, sdt));
            (MPI_Ssend, "PMPI_Ssend", "mpi_ssend", "MPI_SSEND", 5, (buf: P, count: I, dt: H, dest: I, tag: I, comm: H), count(count, dt));
            (MPI_Bsend, "PMPI_Bsend", "mpi_bsend", "MPI_BSEND", 6, (buf: P, count: I, dt: H, dest: I, tag: I, comm: H), count(count, dt));
            (MPI_Rsend, "PMPI_Rsend", "mpi_rsend", "MPI_RSEND", 7, (buf: P, count: I, dt: H, dest: I, tag: I, comm: H), count(count, dt));
            (MPI_Wait, "PMPI_Wait", "mpi_wait", "MPI_WAIT", 8, (req: P, st: P), none());
            (MPI_Waitall, "PMPI_Waitall", "mpi_waitall", "MPI_WAITALL", 9, (n: I, reqs: P, sts: P), none());
            (MPI_Waitany, "PMPI_Waitany", "mpi_waitany", "MPI_WAITANY", 10, (n: I, reqs: P, idx: P, st: P), none());
            (MPI_Waitsome, "PMPI_Waitsome", "mpi_waitsome", "MPI_WAITSOME", 11, (n: I, reqs: P, outn: P, idx: P, sts: P), none());
            (MPI_Test, "PMPI_Test", "mpi_test", "MPI_TEST", 12, (req: P, flag: P, st: P), none());
            (MPI_Testall, "PMPI_Testall", "mpi_testall", "MPI_TESTALL", 13, (n: I, reqs: P, flag: P, sts: P), none());
            (MPI_Testany, "PMPI_Testany", "mpi_testany", "MPI_TESTANY", 14, (n: I, reqs: P, idx: P, flag: P, st: P), none());
            (MPI_Testsome, "PMPI_Testsome", "mpi_testsome", "MPI_TESTSOME", 15, (n: I, reqs: P, outn: P, idx: P, sts: P), none());
            (MPI_Barrier, "PMPI_Barrier", "mpi_barrier", "MPI_BARRIER", 16, (comm: H), none());
            (MPI_Bcast, "PMPI_Bcast", "mpi_bcast", "MPI_BCAST", 17, (buf: P, count: I, dt: H, root: I, comm: H), count(count, dt));
            (MPI_Reduce, "PMPI_Reduce", "mpi_reduce", "MPI_REDUCE", 18, (sbuf: P, rbuf: P, count: I, dt: H, op: H, root: I, comm: H), count(count, dt));
            (MPI_Allreduce, "PMPI_Allreduce", "mpi_allreduce", "MPI_ALLREDUCE", 19, (sbuf: P, rbuf: P, count: I, dt: H, op: H, comm: H), count(count, dt));
            (MPI_Gather, "PMPI_Gather", "mpi_gather", "MPI_GATHER", 20, (sbuf: P, scount: I, sdt: H, rbuf: P, rcount: I, rdt: H, root: I, comm: H), in_place(sbuf, scount, sdt, rcount, rdt));
            (MPI_Gatherv, "PMPI_Gatherv", "mpi_gatherv", "MPI_GATHERV", 21, (sbuf: P, scount: I, sdt: H, rbuf: P, rcounts: P, displs: P, rdt: H, root: I, comm: H), in_place_at_root(sbuf, scount, sdt, rcounts, rdt, root));
            (MPI_Scatter, "PMPI_Scatter", "mpi_scatter", "MPI_SCATTER", 22, (sbuf: P, scount: I, sdt: H, rbuf: P, rcount: I, rdt: H, root: I, comm: H), in_place(rbuf, rcount, rdt, scount, sdt));
            (MPI_Scatterv, "PMPI_Scatterv", "mpi_scatterv", "MPI_SCATTERV", 23, (sbuf: P, scounts: P, displs: P, sdt: H, rbuf: P, rcount: I, rdt: H, root: I, comm: H), in_place_at_root(rbuf, rcount, rdt, scounts, sdt, root));
            (MPI_Allgather, "PMPI_Allgather", "mpi_allgather", "MPI_ALLGATHER", 24, (sbuf: P, scount: I, sdt: H, rbuf: P, rcount: I, rdt: H, comm: H), in_place(sbuf, scount, sdt, rcount, rdt));
            (MPI_Allgatherv, "PMPI_Allgatherv", "mpi_allgatherv", "MPI_ALLGATHERV", 25, (sbuf: P, scount: I, sdt: H, rbuf: P, rcounts: P, displs: P, rdt: H, comm: H), in_place_own(sbuf, scount, sdt, rcounts, rdt, comm));
            (MPI_Alltoall, "PMPI_Alltoall", "mpi_alltoall", "MPI_ALLTOALL", 26, (sbuf: P, scount: I, sdt: H, rbuf: P, rcount: I, rdt: H, comm: H), comm_in_place(sbuf, scount, sdt, rcount, rdt, comm));
            (MPI_Alltoallv, "PMPI_Alltoallv", "mpi_alltoallv", "MPI_ALLTOALLV", 27, (sbuf: P, scounts: P, sdispls: P, sdt: H, rbuf: P, rcounts: P, rdispls: P, rdt: H, comm: H), sum_in_place(sbuf, scounts, sdt, rcounts, rdt, comm));
            (MPI_Reduce_scatter, "PMPI_Reduce_scatter", "mpi_reduce_scatter", "MPI_REDUCE_SCATTER", 28, (sbuf: P, rbuf: P, rcounts: P, dt: H, op: H, comm: H), sum(rcounts, dt, comm));
            (MPI_Scan, "PMPI_Scan", "mpi_scan", "MPI_SCAN", 29, (sbuf: P, rbuf: P, count: I, dt: H, op: H, comm: H), count(count, dt));
            (MPI_Alloc_mem, "PMPI_Alloc_mem", "mpi_alloc_mem", "MPI_ALLOC_MEM", 30, (size: A, info: H, base: P), aint(size));
            (MPI_Free_mem, "PMPI_Free_mem", "mpi_free_mem", "MPI_FREE_MEM", 31, (base: P), none());
        }
    };
}
