/* MPI test program with a known pattern (see tests/tests/mpi.rs):
 * rank r allocates (r+1)*K blocks of 64 bytes in context A (ctx_a) and K
 * blocks of 256 bytes in context B (ctx_b), freeing them all; then a ring
 * MPI_Sendrecv of 1000 doubles, an MPI_Bcast of 100 ints from rank 0, an
 * MPI_Allreduce of 1 double and an MPI_Barrier. Usage: mpi_pattern [K] [abort|noexit|_exit]
 * (noexit: return from main without MPI_Finalize; _exit: _exit(0) there). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile int sink;

__attribute__((noinline)) void ctx_a(int n) {
    for (int i = 0; i < n; i++) {
        char *p = malloc(64);
        p[0] = (char)i;
        sink += p[0];
        free(p);
    }
}

__attribute__((noinline)) void ctx_b(int n) {
    for (int i = 0; i < n; i++) {
        char *p = malloc(256);
        p[0] = (char)i;
        sink += p[0];
        free(p);
    }
}

__attribute__((noinline)) void exchange(int rank, int size) {
    double out[1000], in[1000];
    for (int i = 0; i < 1000; i++) out[i] = rank;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Sendrecv(out, 1000, MPI_DOUBLE, right, 7, in, 1000, MPI_DOUBLE, left, 7,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int b[100];
    for (int i = 0; i < 100; i++) b[i] = rank == 0 ? i : -1;
    MPI_Bcast(b, 100, MPI_INT, 0, MPI_COMM_WORLD);
    double x = rank, sum = 0;
    MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (in[0] != left || b[99] != 99 || sum != size * (size - 1) / 2.0) {
        fprintf(stderr, "mpi_pattern: wrong data on rank %d\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int k = argc > 1 ? atoi(argv[1]) : 100;
    ctx_a((rank + 1) * k);
    ctx_b(k);
    exchange(rank, size);
    if (argc > 2 && !strcmp(argv[2], "abort")) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 1) MPI_Abort(MPI_COMM_WORLD, 5);
        for (;;) MPI_Barrier(MPI_COMM_WORLD);
    }
    if (argc > 2 && !strcmp(argv[2], "noexit")) {
        /* Leave without MPI_Finalize. */
        MPI_Barrier(MPI_COMM_WORLD);
        return 0;
    }
    if (argc > 2 && !strcmp(argv[2], "_exit")) {
        /* Leave without MPI_Finalize or exit()'s handlers. */
        MPI_Barrier(MPI_COMM_WORLD);
        _exit(0);
    }
    MPI_Finalize();
    if (rank == 0) printf("mpi_pattern done on %d ranks\n", size);
    return 0;
}
