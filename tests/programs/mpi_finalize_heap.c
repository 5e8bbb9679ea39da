/* Many calling contexts (~50 000 per rank), then MPI_Finalize: rank 0 tells
 * on stderr how many bytes the allocator family was asked for during
 * MPI_Finalize, as count_alloc.c counts them when it is preloaded, and how
 * long MPI_Finalize took. */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "four_way_walk.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (unsigned i = 0; i < 200000; i++) free(walk(8, (i + 7919u * rank) * 2654435761u, 32));
    void (*start)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "count_start");
    unsigned long (*bytes)(void) = (unsigned long (*)(void))dlsym(RTLD_DEFAULT, "count_bytes");
    struct timespec a, b;
    if (start) start();
    clock_gettime(CLOCK_MONOTONIC, &a);
    MPI_Finalize();
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (rank == 0)
        fprintf(stderr, "MPI_Finalize allocated %lu bytes in %.3f s\n", bytes ? bytes() : 0ul,
                (b.tv_sec - a.tv_sec) + 1e-9 * (b.tv_nsec - a.tv_nsec));
    return 0;
}
