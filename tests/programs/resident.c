/* Resident memory that is not heap (tests/tests/resident.rs): maps MIB
 * MiB of anonymous memory (times rank+1 in an MPI job), touches every page,
 * prints its own VmHWM, then unmaps it, so the process's resident peak is
 * far above its heap's and its resident size at the end far below the
 * peak. A few small heap blocks, freed.
 *
 *   resident [MIB]            (default 48)
 *   built with -DWITH_MPI: each rank maps (rank+1)*MIB MiB between barriers
 *
 * Prints "rank R mapped N MiB hwm_kib K" (rank 0 without MPI). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#ifdef WITH_MPI
#include <mpi.h>
#endif
#include "proc_status.h"

static volatile char sink;

__attribute__((noinline)) static void small_blocks(void) {
    for (int i = 0; i < 10; i++) {
        char *p = malloc(64);
        p[0] = (char)i;
        sink += p[0];
        free(p);
    }
}

int main(int argc, char **argv) {
    int rank = 0;
#ifdef WITH_MPI
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
#endif
    long mib = argc > 1 ? atol(argv[1]) : 48;
    size_t bytes = (size_t)mib * (rank + 1) << 20;
    small_blocks();
#ifdef WITH_MPI
    MPI_Barrier(MPI_COMM_WORLD);
#endif
    char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    for (size_t i = 0; i < bytes; i += 4096) p[i] = 1;
    long hwm = status_kib("VmHWM");
    munmap(p, bytes);
    small_blocks();
    printf("rank %d mapped %zu MiB hwm_kib %ld\n", rank, bytes >> 20, hwm);
    fflush(stdout);
#ifdef WITH_MPI
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
#endif
    return 0;
}
