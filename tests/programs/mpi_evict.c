/* Many calling contexts, Zipf-distributed per rank (see
 * tests/tests/mpi_evict.rs): 2^DEPTH distinct call paths, one per code, built
 * by a recursion through two functions (s0, s1) chosen by the code's bits, so
 * every code has its own stack of return addresses. Rank r draws `events`
 * codes from a Zipf(1.0) distribution over the codes, its hot spot shifted by
 * 97·r, with a fixed seed per rank: the sequence, and so every context's
 * count, is the same in every run. Each event is one malloc (size 16 +
 * 8·(code mod 64)) and its free, in `leaf`.
 * Usage: mpi_evict [events per rank] */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define DEPTH 11
#define CODES (1u << DEPTH)

static volatile int sink;

__attribute__((noinline)) void leaf(unsigned code) {
    char *p = malloc(16 + 8 * (code % 64));
    p[0] = (char)code;
    sink += p[0];
    free(p);
}

__attribute__((noinline)) void s1(int d, unsigned code, unsigned path);

__attribute__((noinline)) void s0(int d, unsigned code, unsigned path) {
    if (d == 0)
        leaf(code);
    else if (path & 1)
        s1(d - 1, code, path >> 1);
    else
        s0(d - 1, code, path >> 1);
    sink++; /* no tail calls: every level keeps its frame */
}

__attribute__((noinline)) void s1(int d, unsigned code, unsigned path) {
    if (d == 0)
        leaf(code);
    else if (path & 1)
        s1(d - 1, code, path >> 1);
    else
        s0(d - 1, code, path >> 1);
    sink++;
}

static unsigned long long state;

static double uniform(void) {
    /* splitmix64 */
    unsigned long long z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (z >> 11) * (1.0 / 9007199254740992.0);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long events = argc > 1 ? atol(argv[1]) : 50000;
    static double cdf[CODES];
    double acc = 0;
    for (unsigned i = 0; i < CODES; i++) cdf[i] = acc += 1.0 / (i + 1);
    state = 12345 + rank;
    for (long e = 0; e < events; e++) {
        double u = uniform() * acc;
        unsigned lo = 0, hi = CODES - 1;
        while (lo < hi) {
            unsigned mid = (lo + hi) / 2;
            if (cdf[mid] < u)
                lo = mid + 1;
            else
                hi = mid;
        }
        unsigned code = (lo + 97u * rank) % CODES;
        s0(DEPTH, code, code);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    if (rank == 0) printf("mpi_evict done on %d ranks\n", size);
    return 0;
}
