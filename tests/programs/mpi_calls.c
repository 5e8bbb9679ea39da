/* Every interposed MPI call kind, a known number of times with known sizes
 * (see tests/tests/mpi_calls.rs, which holds the expected table). Needs an
 * even number of ranks, at most 8 (blocking sends go even-first around the ring).
 *
 * Per rank r of P (right = r+1, left = r-1 around the ring), int = 4 bytes,
 * double = 8 bytes:
 *   MPI_Send        1 × 10 int                  (even/odd ordered ring)
 *   MPI_Recv        3 × 10 int                  (after Send, Ssend, Bsend)
 *   MPI_Isend       5 × 20 double               (Wait, Waitall, Waitany phases; 2 in Test*)
 *   MPI_Irecv       6 × 20 double               (the same + the Rsend phase)
 *   MPI_Wait        2 + 1 + 1                   (Wait phase, Test phase, Rsend phase)
 *   MPI_Waitall     1 + 1                       (Waitall phase, Test phase)
 *   MPI_Waitany     2
 *   MPI_Waitsome    1                           (on one request)
 *   MPI_Test        3, MPI_Testall 3, MPI_Testany 3, MPI_Testsome 3
 *   MPI_Sendrecv    1 × 1000 double
 *   MPI_Ssend       1 × 10 int
 *   MPI_Bsend       1 × 10 int
 *   MPI_Rsend       1 × 20 double
 *   MPI_Barrier     2                           (Rsend phase, end)
 *   MPI_Bcast       1 × 100 int
 *   MPI_Reduce      1 × 7 double
 *   MPI_Allreduce   1 × 3 int
 *   MPI_Gather      1 × 5 int
 *   MPI_Gatherv     1 × (r+1) int
 *   MPI_Scatter     1 × 6 int                   (bytes received)
 *   MPI_Scatterv    1 × (r+1) double            (bytes received)
 *   MPI_Allgather   1 × 4 double
 *   MPI_Allgatherv  1 × (r+2) int
 *   MPI_Alltoall    1 × 2 int to each of P ranks
 *   MPI_Alltoallv   1 × (i+1) int to rank i
 *   MPI_Reduce_scatter 1, recvcounts[i] = i+1 int
 *   MPI_Scan        1 × 9 double
 *   MPI_Alloc_mem   2 × 4096 bytes, MPI_Free_mem 2
 * Usage: mpi_calls */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond, what)                                                      \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "mpi_calls: rank %d: %s\n", rank, what);           \
            MPI_Abort(MPI_COMM_WORLD, 3);                                      \
        }                                                                      \
    } while (0)

static int rank, size, right, left;

__attribute__((noinline)) static void point_to_point(void) {
    int s[10], r[10];
    for (int i = 0; i < 10; i++) s[i] = rank * 100 + i;
    /* Send / Recv, Ssend / Recv: even ranks send first. */
    if (rank % 2 == 0) {
        MPI_Send(s, 10, MPI_INT, right, 1, MPI_COMM_WORLD);
        MPI_Recv(r, 10, MPI_INT, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(r, 10, MPI_INT, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(s, 10, MPI_INT, right, 1, MPI_COMM_WORLD);
    }
    CHECK(r[9] == left * 100 + 9, "Send/Recv data");
    if (rank % 2 == 0) {
        MPI_Ssend(s, 10, MPI_INT, right, 2, MPI_COMM_WORLD);
        MPI_Recv(r, 10, MPI_INT, left, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(r, 10, MPI_INT, left, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Ssend(s, 10, MPI_INT, right, 2, MPI_COMM_WORLD);
    }
    CHECK(r[0] == left * 100, "Ssend data");
    /* Bsend: buffered, so everyone sends first. */
    int bsize = 10 * sizeof(int) + MPI_BSEND_OVERHEAD;
    void *buf = malloc(bsize);
    MPI_Buffer_attach(buf, bsize);
    MPI_Bsend(s, 10, MPI_INT, right, 3, MPI_COMM_WORLD);
    MPI_Recv(r, 10, MPI_INT, left, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Buffer_detach(&buf, &bsize);
    free(buf);
    CHECK(r[5] == left * 100 + 5, "Bsend data");
    /* Sendrecv. */
    double *d = malloc(2000 * sizeof(double));
    for (int i = 0; i < 1000; i++) d[i] = rank;
    MPI_Sendrecv(d, 1000, MPI_DOUBLE, right, 4, d + 1000, 1000, MPI_DOUBLE, left, 4,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(d[1999] == left, "Sendrecv data");
    free(d);
}

__attribute__((noinline)) static void nonblocking(void) {
    double s[20], r[20], r2[20];
    MPI_Request q[2];
    MPI_Status st[2];
    for (int i = 0; i < 20; i++) s[i] = rank + i;
    /* Wait ×2. */
    MPI_Irecv(r, 20, MPI_DOUBLE, left, 10, MPI_COMM_WORLD, &q[0]);
    MPI_Isend(s, 20, MPI_DOUBLE, right, 10, MPI_COMM_WORLD, &q[1]);
    MPI_Wait(&q[0], &st[0]);
    MPI_Wait(&q[1], &st[1]);
    CHECK(r[19] == left + 19, "Wait data");
    /* Waitall ×1. */
    MPI_Irecv(r, 20, MPI_DOUBLE, left, 11, MPI_COMM_WORLD, &q[0]);
    MPI_Isend(s, 20, MPI_DOUBLE, right, 11, MPI_COMM_WORLD, &q[1]);
    MPI_Waitall(2, q, st);
    CHECK(r[3] == left + 3, "Waitall data");
    /* Waitany ×2: each call completes one of the two requests. */
    MPI_Irecv(r, 20, MPI_DOUBLE, left, 12, MPI_COMM_WORLD, &q[0]);
    MPI_Isend(s, 20, MPI_DOUBLE, right, 12, MPI_COMM_WORLD, &q[1]);
    for (int k = 0; k < 2; k++) {
        int idx;
        MPI_Waitany(2, q, &idx, MPI_STATUS_IGNORE);
        CHECK(idx == 0 || idx == 1, "Waitany index");
    }
    CHECK(r[7] == left + 7, "Waitany data");
    /* Test family ×3 each, then Wait, Waitsome and Waitall on whatever is
     * left (a completed request is MPI_REQUEST_NULL, which every call
     * accepts), so the call counts do not depend on timing. Waitsome on one
     * request completes it in one call. */
    MPI_Request t[2];
    MPI_Irecv(r, 20, MPI_DOUBLE, left, 13, MPI_COMM_WORLD, &t[0]);
    MPI_Irecv(r2, 20, MPI_DOUBLE, left, 14, MPI_COMM_WORLD, &t[1]);
    MPI_Isend(s, 20, MPI_DOUBLE, right, 13, MPI_COMM_WORLD, &q[0]);
    MPI_Isend(s, 20, MPI_DOUBLE, right, 14, MPI_COMM_WORLD, &q[1]);
    for (int k = 0; k < 3; k++) {
        int flag, idx, outn, idxs[1];
        MPI_Test(&t[0], &flag, MPI_STATUS_IGNORE);
        MPI_Testall(2, q, &flag, MPI_STATUSES_IGNORE);
        MPI_Testany(2, q, &idx, &flag, MPI_STATUS_IGNORE);
        MPI_Testsome(1, &t[1], &outn, idxs, MPI_STATUSES_IGNORE);
    }
    int outn, idxs[1];
    MPI_Wait(&t[0], MPI_STATUS_IGNORE);
    MPI_Waitsome(1, &t[1], &outn, idxs, MPI_STATUSES_IGNORE);
    MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
    CHECK(r[1] == left + 1 && r2[2] == left + 2, "Test data");
    /* Rsend: the receive is posted before the barrier. */
    MPI_Irecv(r, 20, MPI_DOUBLE, left, 16, MPI_COMM_WORLD, &q[0]);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Rsend(s, 20, MPI_DOUBLE, right, 16, MPI_COMM_WORLD);
    MPI_Wait(&q[0], MPI_STATUS_IGNORE);
    CHECK(r[4] == left + 4, "Rsend data");
}

__attribute__((noinline)) static void collectives(void) {
    int ib[100], ir[64];
    double db[64], dr[64];
    for (int i = 0; i < 100; i++) ib[i] = rank == 0 ? i : -1;
    MPI_Bcast(ib, 100, MPI_INT, 0, MPI_COMM_WORLD);
    CHECK(ib[99] == 99, "Bcast data");
    for (int i = 0; i < 64; i++) db[i] = rank + 1;
    MPI_Reduce(db, dr, 7, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    CHECK(rank != 0 || dr[6] == size * (size + 1) / 2.0, "Reduce data");
    for (int i = 0; i < 64; i++) ib[i] = rank;
    MPI_Allreduce(ib, ir, 3, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    CHECK(ir[2] == size - 1, "Allreduce data");
    int *big = malloc(64 * size * sizeof(int));
    int counts[64], displs[64];
    for (int i = 0; i < size; i++) {
        counts[i] = i + 1;
        displs[i] = i * 16;
    }
    MPI_Gather(ib, 5, MPI_INT, big, 5, MPI_INT, 0, MPI_COMM_WORLD);
    CHECK(rank != 0 || big[5 * (size - 1)] == size - 1, "Gather data");
    MPI_Gatherv(ib, rank + 1, MPI_INT, big, counts, displs, MPI_INT, 0, MPI_COMM_WORLD);
    CHECK(rank != 0 || big[16 * (size - 1) + size - 1] == size - 1, "Gatherv data");
    for (int i = 0; i < 64 * size; i++) big[i] = i;
    MPI_Scatter(big, 6, MPI_INT, ir, 6, MPI_INT, 0, MPI_COMM_WORLD);
    CHECK(ir[0] == 6 * rank, "Scatter data");
    double *dbig = malloc(64 * size * sizeof(double));
    for (int i = 0; i < 64 * size; i++) dbig[i] = i;
    MPI_Scatterv(dbig, counts, displs, MPI_DOUBLE, dr, rank + 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    CHECK(dr[rank] == 16 * rank + rank, "Scatterv data");
    MPI_Allgather(db, 4, MPI_DOUBLE, dbig, 4, MPI_DOUBLE, MPI_COMM_WORLD);
    CHECK(dbig[4 * (size - 1)] == size, "Allgather data");
    for (int i = 0; i < size; i++) {
        counts[i] = i + 2;
        displs[i] = i * 16;
    }
    MPI_Allgatherv(ib, rank + 2, MPI_INT, big, counts, displs, MPI_INT, MPI_COMM_WORLD);
    CHECK(big[16 * (size - 1)] == size - 1, "Allgatherv data");
    MPI_Alltoall(ib, 2, MPI_INT, big, 2, MPI_INT, MPI_COMM_WORLD);
    CHECK(big[2 * (size - 1)] == size - 1, "Alltoall data");
    int sc[64], sd[64], rc[64], rd[64];
    for (int i = 0; i < size; i++) {
        sc[i] = i + 1; /* to rank i */
        sd[i] = 0;
        rc[i] = rank + 1; /* from rank i: what it sends to me */
        rd[i] = i * 16;
    }
    MPI_Alltoallv(ib, sc, sd, MPI_INT, big, rc, rd, MPI_INT, MPI_COMM_WORLD);
    CHECK(big[16 * (size - 1)] == size - 1, "Alltoallv data");
    int *ones = malloc(size * (size + 1) / 2 * sizeof(int));
    for (int i = 0; i < size * (size + 1) / 2; i++) ones[i] = 1;
    for (int i = 0; i < size; i++) rc[i] = i + 1;
    MPI_Reduce_scatter(ones, ir, rc, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(ir[rank] == size, "Reduce_scatter data");
    MPI_Scan(db, dr, 9, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    CHECK(dr[8] == (rank + 1) * (rank + 2) / 2.0, "Scan data");
    free(ones);
    free(dbig);
    free(big);
}

__attribute__((noinline)) static void alloc_mem_ctx(void) {
    void *a, *b;
    MPI_Alloc_mem(4096, MPI_INFO_NULL, &a);
    MPI_Alloc_mem(4096, MPI_INFO_NULL, &b);
    ((char *)a)[4095] = 1;
    ((char *)b)[0] = 1;
    MPI_Free_mem(a);
    MPI_Free_mem(b);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size % 2 == 0 && size <= 8, "needs an even number of ranks, at most 8");
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;
    point_to_point();
    nonblocking();
    collectives();
    alloc_mem_ctx();
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    if (rank == 0) printf("mpi_calls done on %d ranks\n", size);
    return 0;
}
