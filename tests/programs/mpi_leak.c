/* MPI test program for the leak list (tests/tests/mpi.rs): rank r leaks r+1
 * blocks of 3000 bytes in keep_forever() and frees everything else it
 * allocates; its MPI library keeps the state MPI_Init made until the rest of
 * MPI_Finalize. Prints "leaked on N ranks" from rank 0. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *kept[16];
static volatile int sink;

__attribute__((noinline)) void keep_forever(int n) {
    for (int i = 0; i < n && i < 16; i++) {
        kept[i] = malloc(3000);
        memset(kept[i], i, 3000);
        sink += kept[i][i];
    }
}

__attribute__((noinline)) void scratch(int n) {
    for (int i = 0; i < n; i++) {
        char *p = malloc(100 + i);
        p[0] = (char)i;
        sink += p[0];
        free(p);
    }
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    keep_forever(rank + 1);
    scratch(1000);
    int x = rank, sum = 0;
    MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("leaked on %d ranks (sum %d)\n", size, sum);
    MPI_Finalize();
    return 0;
}
