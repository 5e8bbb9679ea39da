/* Many calling contexts, then MPI_Finalize: prints on rank 0 how many bytes
 * the allocator family was asked for during MPI_Finalize, as counted by
 * count_alloc.c when it is preloaded. */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

__attribute__((noinline)) static void *walk(int depth, unsigned path, size_t n) {
    void *p;
    if (depth == 0) return malloc(n);
    switch (path & 3) {
    case 0: p = walk(depth - 1, path >> 2, n); break;
    case 1: p = walk(depth - 1, path >> 2, n + 16); break;
    case 2: p = walk(depth - 1, path >> 2, n + 32); break;
    default: p = walk(depth - 1, path >> 2, n + 48); break;
    }
    __asm__ volatile("" ::: "memory");
    return p;
}

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
