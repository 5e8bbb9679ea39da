/* MPI_THREAD_MULTIPLE with THREADS threads per rank, each calling MPI and
 * malloc concurrently (see tests/tests/mpi_threads.rs): thread t of every
 * rank runs ITERS rounds of K malloc/free pairs of 48 bytes in `thr_alloc`
 * and one ring MPI_Sendrecv of 100 ints with tag t, then checks the data.
 * Rank 0 prints one line to stdout and one to stderr.
 * Usage: mpi_threads [iters] */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 3
#define K 20

static int rank, size, iters;
static volatile int sink;

__attribute__((noinline)) void thr_alloc(int t) {
    for (int i = 0; i < K; i++) {
        char *p = malloc(48);
        p[0] = (char)(t + i);
        sink += p[0];
        free(p);
    }
}

__attribute__((noinline)) void thr_exchange(int t, int it) {
    int out[100], in[100];
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (int i = 0; i < 100; i++) out[i] = rank * 1000000 + t * 10000 + it;
    MPI_Sendrecv(out, 100, MPI_INT, right, t, in, 100, MPI_INT, left, t, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    if (in[99] != left * 1000000 + t * 10000 + it) {
        fprintf(stderr, "mpi_threads: rank %d thread %d: wrong data\n", rank, t);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
}

static void *thread_main(void *arg) {
    int t = (int)(long)arg;
    for (int it = 0; it < iters; it++) {
        thr_alloc(t);
        thr_exchange(t, it);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided != MPI_THREAD_MULTIPLE) {
        if (rank == 0)
            fprintf(stderr, "mpi_threads: MPI_THREAD_MULTIPLE not provided (%d)\n", provided);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    iters = argc > 1 ? atoi(argv[1]) : 50;
    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, thread_main, (void *)t);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    MPI_Finalize();
    if (rank == 0) {
        printf("mpi_threads done: %d ranks x %d threads x %d rounds\n", size, THREADS, iters);
        fprintf(stderr, "mpi_threads: a line of the program's own on stderr\n");
    }
    return 0;
}
