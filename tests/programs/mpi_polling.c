/* Polling loops, which the tracer folds into the record of their first
 * call (see tests/tests/mpi_polling.rs). On every rank a self-addressed
 * MPI_Irecv stays pending while
 *  - `from_a` and `from_b`, two callers of one polling function at the same
 *    stack height, take turns for ROUNDS rounds: NA and NB calls of
 *    MPI_Test from one call site, under a different caller each time (b also
 *    allocates every 100 calls);
 *  - `cycle_sites` calls MPI_Test NC times from six call sites in turn, more
 *    than the tracer keeps armed at once;
 *  - main calls MPI_Testany NT times;
 *  - a second thread polls its own pending request NH times with MPI_Test,
 *    then stays alive until after MPI_Finalize, so that its last folded
 *    calls are only taken with the profile;
 * then both requests complete (sends to itself) and the job finalizes.
 * Rank 0 prints one line. Needs MPI_THREAD_MULTIPLE. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define ROUNDS 40
#define NA 700
#define NB 333
#define NT 1000
#define NH 1000
#define NC 600

static volatile long sink;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int polled, finalized;
static int rank;

__attribute__((noinline)) static long poll_n(MPI_Request *r, int n, int alloc_every) {
    long done = 0;
    for (int i = 0; i < n; i++) {
        int flag = 0;
        MPI_Test(r, &flag, MPI_STATUS_IGNORE);
        done += flag;
        if (alloc_every && i % alloc_every == 0) {
            char *p = malloc(64);
            p[0] = (char)i;
            sink += p[0];
            free(p);
        }
    }
    return done;
}

__attribute__((noinline)) void from_a(MPI_Request *r) { sink += poll_n(r, NA, 0); }
__attribute__((noinline)) void from_b(MPI_Request *r) { sink += poll_n(r, NB, 100); }

__attribute__((noinline)) void cycle_sites(MPI_Request *r) {
    for (int i = 0; i < NC; i++) {
        int flag = 0;
        switch (i % 6) {
        case 0: MPI_Test(r, &flag, MPI_STATUS_IGNORE); break;
        case 1: MPI_Test(r, &flag, MPI_STATUS_IGNORE); break;
        case 2: MPI_Test(r, &flag, MPI_STATUS_IGNORE); break;
        case 3: MPI_Test(r, &flag, MPI_STATUS_IGNORE); break;
        case 4: MPI_Test(r, &flag, MPI_STATUS_IGNORE); break;
        default: MPI_Test(r, &flag, MPI_STATUS_IGNORE); break;
        }
        sink += flag;
    }
}

__attribute__((noinline)) void test_any(MPI_Request *r) {
    for (int i = 0; i < NT; i++) {
        int idx = 0, flag = 0;
        MPI_Testany(1, r, &idx, &flag, MPI_STATUS_IGNORE);
        sink += flag;
    }
}

__attribute__((noinline)) void poll_thread(MPI_Request *r) {
    for (int i = 0; i < NH; i++) {
        int flag = 0;
        MPI_Test(r, &flag, MPI_STATUS_IGNORE);
        sink += flag;
    }
}

static void *thread_main(void *arg) {
    poll_thread((MPI_Request *)arg);
    pthread_mutex_lock(&mu);
    polled = 1;
    pthread_cond_broadcast(&cv);
    while (!finalized) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return NULL;
}

int main(int argc, char **argv) {
    int provided = 0, size = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided != MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "mpi_polling: MPI_THREAD_MULTIPLE not provided (%d)\n", provided);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int in[2] = {0, 0}, out = 1;
    MPI_Request mine, theirs;
    MPI_Irecv(&in[0], 1, MPI_INT, rank, 1, MPI_COMM_WORLD, &mine);
    MPI_Irecv(&in[1], 1, MPI_INT, rank, 2, MPI_COMM_WORLD, &theirs);
    pthread_t th;
    pthread_create(&th, NULL, thread_main, &theirs);
    for (int k = 0; k < ROUNDS; k++) {
        from_a(&mine);
        from_b(&mine);
    }
    cycle_sites(&mine);
    test_any(&mine);
    pthread_mutex_lock(&mu);
    while (!polled) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    MPI_Send(&out, 1, MPI_INT, rank, 1, MPI_COMM_WORLD);
    MPI_Send(&out, 1, MPI_INT, rank, 2, MPI_COMM_WORLD);
    MPI_Wait(&mine, MPI_STATUS_IGNORE);
    MPI_Wait(&theirs, MPI_STATUS_IGNORE);
    if (rank == 0)
        printf("mpi_polling: %d ranks, %d tests, checksum %ld\n", size,
               ROUNDS * (NA + NB) + NC + NT + NH, sink);
    MPI_Finalize();
    pthread_mutex_lock(&mu);
    finalized = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(th, NULL);
    return 0;
}
