/* An MPI rank killed by SIGTERM (tests/tests/reliability_signals.rs).
 *
 * Every rank r mallocs (r+1) x 100 blocks of 64 B in rel_rank_work (kept),
 * then MPI_Barrier. Rank 1 then raises SIGTERM (it dies); the other ranks
 * wait in a second MPI_Barrier until mpirun terminates them. Rank 0 prints
 * "ranks ready" after the first barrier.
 * With the argument "segv", rank 1 writes through a null pointer instead
 * (Open MPI's own crash handler prints a backtrace).
 */
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOIPA __attribute__((noinline, noclone))
volatile unsigned long sink;
volatile uintptr_t sink_null;

NOIPA void rel_rank_work(int rank) {
    for (int i = 0; i < (rank + 1) * 100; i++) {
        void *p = malloc(64);
        ((volatile char *)p)[0] = 1;
    }
    sink++;
}

int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    rel_rank_work(rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        printf("ranks ready\n");
        fflush(stdout);
    }
    if (rank == 1) {
        if (argc > 1 && !strcmp(argv[1], "segv"))
            *(volatile int *)(uintptr_t)sink_null = 1;
        else
            raise(SIGTERM);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
