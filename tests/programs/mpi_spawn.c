/* MPI_Comm_spawn (tests/tests/mpi_spawn.rs): each rank of the parent job
 * allocates K blocks of 64 bytes in parent_work, then the parent job spawns
 * two children (this program with the argument "child"), which allocate K
 * blocks of 128 bytes each in child_work. Both jobs meet in a barrier over
 * the inter-communicator, disconnect and finalize. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define K 100

static volatile int sink;

__attribute__((noinline)) void parent_work(void) {
    for (int i = 0; i < K; i++) {
        char *p = malloc(64);
        p[0] = (char)i;
        sink += p[0];
        free(p);
    }
}

__attribute__((noinline)) void child_work(void) {
    for (int i = 0; i < K; i++) {
        char *p = malloc(128);
        p[0] = (char)i;
        sink += p[0];
        free(p);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (parent == MPI_COMM_NULL) {
        parent_work();
        MPI_Comm children;
        char *args[] = {"child", NULL};
        MPI_Comm_spawn(argv[0], args, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &children,
                       MPI_ERRCODES_IGNORE);
        MPI_Barrier(children);
        MPI_Comm_disconnect(&children);
        if (rank == 0) printf("parent done\n");
    } else {
        child_work();
        MPI_Barrier(parent);
        MPI_Comm_disconnect(&parent);
        if (rank == 0) printf("children done\n");
    }
    MPI_Finalize();
    return 0;
}
