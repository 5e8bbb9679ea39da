/* MPI test program with a known memory profile over time (see
 * tests/tests/series.rs): every rank makes 2000 small allocations spread
 * over ~0.2 s, then holds (r+1) MiB from t1 to t2 (~0.3 s), releases it,
 * and makes 2000 more small allocations; 10 MPI_Barrier calls in all.
 * Each rank prints "rank R t1 T1 t2 T2" (CLOCK_REALTIME, ns) and rank 0
 * "done on N ranks". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile int sink;

static unsigned long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

__attribute__((noinline)) void small_allocs(int n) {
    for (int i = 0; i < n; i++) {
        char *p = malloc(100);
        p[0] = (char)i;
        sink += p[0];
        free(p);
        if (i % 100 == 99) sleep_us(10000);
    }
}

__attribute__((noinline)) char *hold(size_t bytes) {
    char *p = malloc(bytes);
    memset(p, 1, bytes);
    return p;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 0; i < 3; i++) MPI_Barrier(MPI_COMM_WORLD);
    small_allocs(2000);
    MPI_Barrier(MPI_COMM_WORLD);
    unsigned long long t1 = now_ns();
    char *big = hold((size_t)(rank + 1) << 20);
    sleep_us(300000);
    sink += big[rank];
    unsigned long long t2 = now_ns();
    free(big);
    MPI_Barrier(MPI_COMM_WORLD);
    small_allocs(2000);
    for (int i = 0; i < 5; i++) MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d t1 %llu t2 %llu\n", rank, t1, t2);
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("done on %d ranks\n", size);
    MPI_Finalize();
    return 0;
}
