/* Many calling contexts, Zipf-distributed per rank (see
 * tests/tests/mpi_evict.rs): 2^DEPTH distinct call paths, one per code, built
 * by a recursion through two functions (s0, s1) chosen by the code's bits, so
 * every code has its own stack of return addresses. Rank r draws `events`
 * codes from a Zipf(1.0) distribution over the codes, its hot spot shifted by
 * 97·r, with a fixed seed per rank: the sequence, and so every context's
 * count, is the same in every run. Each event is one malloc (size 16 +
 * 8·(code mod 64)) and its free, in `leaf`.
 * Usage: mpi_evict [events per rank] */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define DEPTH 11
#define LEAF_SIZES 64
#include "zipf_paths.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long events = argc > 1 ? atol(argv[1]) : 50000;
    run_zipf_paths(events, 12345 + rank, 97u * rank);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    if (rank == 0) printf("mpi_evict done on %d ranks\n", size);
    return 0;
}
