/* Started without mpirun (a singleton, tests/tests/mpi.rs): MPI_Init, 100
 * malloc/free pairs of its own, an MPI_Barrier, MPI_Finalize. Its own MPI
 * communication is kept to that barrier: Open MPI's lazy state (its class
 * table, free lists) grows on a program's first messages, where the MPI
 * side's start-up collectives of a traced run may have grown it already. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static volatile int sink;

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    for (int i = 0; i < 100; i++) {
        char *p = malloc(32 + i);
        p[0] = (char)i;
        sink += p[0];
        free(p);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    puts("mpi_singleton done");
    MPI_Finalize();
    return 0;
}
