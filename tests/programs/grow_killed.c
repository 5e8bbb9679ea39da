/* Snapshots (tests/tests/snapshots.rs): the heap grows by 1 MiB blocks
 * from grow_mesh(), with some scratch allocations between them, to N MiB;
 * then the process either frees everything and exits 0 ("exit"), or is
 * killed by SIGKILL as the kernel's OOM killer would ("kill"), leaving no
 * chance to write a report. Prints "grew to N MiB" first. "kill-at-once"
 * grows by the blocks alone, without pausing, and is killed right after, as
 * the OOM killer kills a process whose heap has just grown.
 *
 * With -DWITH_MPI every rank starts MPI; only rank 1 grows and is killed,
 * the others wait in a barrier until mpirun ends the job. "both" (MPI
 * only): rank 1 grows and frees, then rank 0, and the job ends normally,
 * each rank with a snapshot in the spill directory rank 1 made.
 *
 *   grow_killed N exit|kill|kill-at-once|both */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef WITH_MPI
#include <mpi.h>
#endif

static volatile int sink;

__attribute__((noinline)) char *grow_mesh(size_t n) {
    char *p = malloc(n);
    memset(p, 1, n);
    return p;
}

__attribute__((noinline)) void scratch(int n) {
    for (int i = 0; i < n; i++) {
        char *volatile p = malloc(32 + i);
        p[0] = (char)i;
        sink += p[0];
        free(p);
    }
}

static void grow(int mib, int kill_at_end, int at_once) {
    char **blocks = calloc((size_t)mib, sizeof *blocks);
    for (int i = 0; i < mib; i++) {
        blocks[i] = grow_mesh(1 << 20);
        if (at_once) continue;
        scratch(200);
        usleep(5000);
    }
    printf("grew to %d MiB\n", mib);
    fflush(stdout);
    if (at_once) raise(SIGKILL);
    if (kill_at_end) {
        /* Long enough for a collector thread to have applied every record,
         * as it would have while a real program ran on. */
        usleep(300000);
        raise(SIGKILL);
    }
    for (int i = 0; i < mib; i++) free(blocks[i]);
    free(blocks);
}

int main(int argc, char **argv) {
    int mib = argc > 1 ? atoi(argv[1]) : 20;
    int kill_at_end = argc > 2 && strcmp(argv[2], "kill") == 0;
    int at_once = argc > 2 && strcmp(argv[2], "kill-at-once") == 0;
#ifdef WITH_MPI
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc > 2 && strcmp(argv[2], "both") == 0) {
        if (rank == 1) grow(mib, 0, 0);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) grow(mib, 0, 0);
    } else if (rank == 1) {
        grow(mib, kill_at_end, at_once);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
#else
    grow(mib, kill_at_end, at_once);
#endif
    return 0;
}
