/* Many calling contexts for the MPI eviction test (mpi_evict.c) and the MPI
 * merge benchmark (benches/mpi_merge.c): 2^DEPTH distinct call paths, one
 * per code, built by a recursion through two functions (s0, s1) chosen by
 * the code's bits, so every code has its own stack of return addresses;
 * codes drawn from a Zipf(1.0) distribution with a seeded splitmix64.
 * Before including: DEPTH (path length) and LEAF_SIZES (each event is one
 * malloc of 16 + 8·(code mod LEAF_SIZES) bytes and its free, in `leaf`). */
#ifndef ZIPF_PATHS_H
#define ZIPF_PATHS_H

#include <stdlib.h>

#define CODES (1u << DEPTH)

static volatile int sink;

__attribute__((noinline)) void leaf(unsigned code) {
    char *p = malloc(16 + 8 * (code % LEAF_SIZES));
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

static unsigned long long zipf_state;

static double uniform(void) {
    /* splitmix64 */
    unsigned long long z = (zipf_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (z >> 11) * (1.0 / 9007199254740992.0);
}

/* `events` calls through the paths: Zipf(1.0) over the codes with the hot
 * spot shifted by `shift`, from seed `seed` (the same sequence every run). */
static void run_zipf_paths(long events, unsigned long long seed, unsigned shift) {
    static double cdf[CODES];
    double acc = 0;
    for (unsigned i = 0; i < CODES; i++) cdf[i] = acc += 1.0 / (i + 1);
    zipf_state = seed;
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
        unsigned code = (lo + shift) % CODES;
        s0(DEPTH, code, code);
    }
}

#endif
