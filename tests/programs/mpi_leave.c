/* A rank that leaves without MPI_Finalize while the others finalize
 * (tests/slurm/run.sh, under srun, which lets the others end normally).
 * Every rank r keeps one block of 1000 (r+1) bytes from keep_block(); rank
 * LEAVER (argv[1], default 1) returns from main 2 s after MPI_Init without
 * MPI_Finalize (exit status 0); every other rank prints "rank r finished
 * after MPI_Finalize". With "late" (argv[2]), rank LEAVER calls
 * MPI_Finalize 3 s late instead (tests/tests/mpi.rs: the others wait). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *kept;

__attribute__((noinline)) void keep_block(int rank) {
    kept = malloc(1000 * (size_t)(rank + 1));
    memset(kept, rank, 1000 * (size_t)(rank + 1));
}

int main(int argc, char **argv) {
    int rank, leaver = argc > 1 ? atoi(argv[1]) : 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    keep_block(rank);
    int late = argc > 2 && strcmp(argv[2], "late") == 0;
    if (rank == leaver && late) {
        sleep(3);
    } else if (rank == leaver) {
        sleep(2);
        return 0;
    }
    MPI_Finalize();
    printf("rank %d finished after MPI_Finalize\n", rank);
    return 0;
}
