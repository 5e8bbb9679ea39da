/* Each rank forks a child that allocates (child_allocs: 10 x (rank + 1)
 * blocks of 48 bytes) and ends with exit(0) without MPI; the rank waits
 * for it, then finalizes (tests/tests/mpi.rs). The child is not the rank:
 * it writes its own report beside the job's, and leaves no spill file. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) static void child_allocs(int n) {
    for (int i = 0; i < n; i++) {
        void *volatile p = malloc(48);
        free(p);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    pid_t pid = fork();
    if (pid < 0) MPI_Abort(MPI_COMM_WORLD, 2);
    if (pid == 0) {
        child_allocs(10 * (rank + 1));
        exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("forked on %d ranks\n", size);
    MPI_Finalize();
    return WIFEXITED(st) ? WEXITSTATUS(st) : 3;
}
