/* MPI polling cost (benches/mpi_poll.py). Every rank times two loops:
 *  - poll:     N calls of MPI_Test on a self-addressed receive that stays
 *              pending (a progress loop waiting for a message);
 *  - exchange: R rounds of MPI_Irecv + MPI_Isend with the partner rank,
 *              then MPI_Testall until both complete (polling broken by
 *              other calls every round).
 * Rank 0 prints "poll_ns=<ns per MPI_Test> exchange_ns=<ns per round>
 * tests=<MPI_Testall calls>"; every rank checks the data it received.
 * Usage: mpi_poll N R */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

__attribute__((noinline)) static long poll(MPI_Request *r, long n) {
    long done = 0;
    for (long i = 0; i < n; i++) {
        int flag = 0;
        MPI_Test(r, &flag, MPI_STATUS_IGNORE);
        done += flag;
    }
    return done;
}

__attribute__((noinline)) static long exchange(int rank, int size, long rounds) {
    int partner = rank ^ 1;
    long tests = 0;
    if (partner >= size) partner = rank;
    for (long k = 0; k < rounds; k++) {
        int out[4] = {rank, (int)k, 0, 0}, in[4];
        MPI_Request rq[2];
        MPI_Irecv(in, 4, MPI_INT, partner, 3, MPI_COMM_WORLD, &rq[0]);
        MPI_Isend(out, 4, MPI_INT, partner, 3, MPI_COMM_WORLD, &rq[1]);
        int flag = 0;
        while (!flag) {
            MPI_Testall(2, rq, &flag, MPI_STATUSES_IGNORE);
            tests++;
        }
        if (in[0] != partner || in[1] != (int)k) {
            fprintf(stderr, "mpi_poll: rank %d: wrong data\n", rank);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
    return tests;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long n = argc > 1 ? atol(argv[1]) : 10000000;
    long rounds = argc > 2 ? atol(argv[2]) : 100000;
    int buf = 0, one = 1;
    MPI_Request r;
    MPI_Irecv(&buf, 1, MPI_INT, rank, 7, MPI_COMM_WORLD, &r);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    long done = poll(&r, n);
    double t1 = now();
    MPI_Send(&one, 1, MPI_INT, rank, 7, MPI_COMM_WORLD);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
    double t2 = now();
    long tests = exchange(rank, size, rounds);
    double t3 = now();
    if (done != 0 || buf != 1) {
        fprintf(stderr, "mpi_poll: rank %d: the receive completed early\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    if (rank == 0)
        printf("poll_ns=%.2f exchange_ns=%.1f tests=%ld\n", (t1 - t0) / n * 1e9,
               (t3 - t2) / rounds * 1e9, tests);
    MPI_Finalize();
    return 0;
}
