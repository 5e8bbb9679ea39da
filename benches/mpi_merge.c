/* MPI merge benchmark program (benches/mpi_merge.py): every rank makes
 * `events` allocations over 2^DEPTH call paths (a recursion through s0/s1
 * chosen by the code's bits), Zipf(1.0) with the hot spot shifted by 13·rank
 * so that ranks share most contexts but not all, then an MPI_Barrier and the
 * timed MPI_Finalize (where the tracer's reduction runs).
 *
 * Rank 0 prints one line of key=value figures: the wall clock (CLOCK_REALTIME,
 * ns) just before and after MPI_Finalize, and its VmHWM/VmRSS (KiB) before
 * and after. Usage: mpi_merge [events per rank] */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEPTH 10
#define CODES (1u << DEPTH)

static volatile int sink;

__attribute__((noinline)) void leaf(unsigned code) {
    char *p = malloc(16 + 8 * (code % 128));
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
    sink++;
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

static long status_kib(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') {
            v = atol(line + n + 1);
            break;
        }
    if (f) fclose(f);
    return v;
}

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static unsigned long long state;

static double uniform(void) {
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
    long events = argc > 1 ? atol(argv[1]) : 20000;
    static double cdf[CODES];
    double acc = 0;
    for (unsigned i = 0; i < CODES; i++) cdf[i] = acc += 1.0 / (i + 1);
    state = 777 + rank;
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
        unsigned code = (lo + 13u * rank) % CODES;
        s0(DEPTH, code, code);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    long hwm0 = status_kib("VmHWM"), rss0 = status_kib("VmRSS");
    long long t0 = now_ns();
    MPI_Finalize();
    long long t1 = now_ns();
    long hwm1 = status_kib("VmHWM"), rss1 = status_kib("VmRSS");
    if (rank == 0)
        printf("mpi_merge ranks=%d finalize_start_ns=%lld finalize_end_ns=%lld "
               "hwm_before_kib=%ld hwm_after_kib=%ld rss_before_kib=%ld rss_after_kib=%ld\n",
               size, t0, t1, hwm0, hwm1, rss0, rss1);
    return 0;
}
