/* alloc_stress: a deterministic allocation stress program for benchmarking
 * wmhcct (and other tracers) against native runs.
 *
 * Every event is one malloc (and later one free) at the end of a call path of
 * `--depth` frames. The last levels of the path pick one of BRANCH distinct
 * call sites each, so `--contexts` distinct calling contexts exist. Which
 * context an event uses is drawn from a Zipf distribution (`--zipf s`), either
 * independently per event (`--order random`) or in bursts that walk through
 * neighbouring contexts (`--order bursts`), the temporal clustering the
 * WMTools paper describes.
 *
 *   alloc_stress [--events N] [--depth D] [--contexts C] [--zipf S]
 *                [--sizes fixed|random] [--order random|bursts]
 *                [--free immediate|live:K] [--threads T] [--seed X]
 *                [--pairs 1]
 *
 * Prints one line: events, checksum (independent of timing), elapsed seconds
 * of the event loop, and the process's peak RSS (VmHWM, KiB) read before
 * main returns, so it excludes a tracer's exit work. `--pairs 1` also counts
 * the distinct (size, context) pairs (a bitmap: for sizing runs only, it
 * changes the timing).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <math.h>
#include "../tests/programs/proc_status.h"

#define BRANCH 10

static long g_events = 1000000;
static int g_depth = 30;
static long g_contexts = 10000;
static double g_zipf = 1.0;
static int g_random_sizes = 0;
static int g_bursts = 0;
static long g_live = 0; /* 0: free immediately */
static int g_threads = 1;
static uint64_t g_seed = 42;
static int g_pairs = 0;
static uint8_t *g_pair_bits; /* contexts x SIZE_SPAN bits, with --pairs */
#define SIZE_SPAN 4112

static int g_var_levels; /* levels whose call site depends on the context */
static double *g_cdf;

struct worker {
    uint64_t rng;
    uint64_t checksum;
    long events;
    void **ring;
    long ring_pos;
};

static inline uint64_t next_rand(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* A context drawn from the Zipf distribution. Ranks are scattered over the
 * tree (rank r is context r * 7919 mod C, a bijection when C is not a
 * multiple of 7919), so the hottest contexts are not all siblings. */
static long zipf_draw(struct worker *w) {
    double u = (double)(next_rand(&w->rng) >> 11) / (double)(1ULL << 53);
    long lo = 0, hi = g_contexts - 1;
    while (lo < hi) {
        long mid = (lo + hi) / 2;
        if (g_cdf[mid] < u) lo = mid + 1; else hi = mid;
    }
    if (g_contexts % 7919 == 0) return lo;
    return (long)(((unsigned long long)lo * 7919ULL) % (unsigned long long)g_contexts);
}

static size_t size_for(struct worker *w, long ctx) {
    if (g_random_sizes) return 16 + (next_rand(&w->rng) % 4096);
    return 16 + (size_t)((ctx * 2654435761u) % 2048);
}

static void leaf(struct worker *w, long ctx) __attribute__((noinline));
static void leaf(struct worker *w, long ctx) {
    size_t n = size_for(w, ctx);
    unsigned char *p = malloc(n);
    if (!p) { fprintf(stderr, "alloc_stress: out of memory\n"); exit(3); }
    p[0] = (unsigned char)(ctx & 0xff);
    p[n - 1] = 1;
    w->checksum += p[0] + n;
    if (g_pairs) {
        uint64_t bit = (uint64_t)ctx * SIZE_SPAN + (n < SIZE_SPAN ? n : SIZE_SPAN - 1);
        __atomic_fetch_or(&g_pair_bits[bit / 8], (uint8_t)(1u << (bit % 8)), __ATOMIC_RELAXED);
    }
    if (g_live == 0) {
        free(p);
    } else {
        long i = w->ring_pos++ % g_live;
        free(w->ring[i]);
        w->ring[i] = p;
    }
}

static volatile int sink;

/* One level of the call path: BRANCH distinct functions level_0..level_9,
 * each calling the next level through a switch on one base-BRANCH digit of
 * the context, so every (level, digit) pair has its own call site and return
 * address. The functions differ (sink += K) so identical-code folding cannot
 * merge them, and the call is not in tail position so every level keeps its
 * frame. The leaf-most variable level takes the lowest digit: contexts c and
 * c+1 share all but the last frames. */
#define DECLARE_LEVEL(K) \
    static void level_##K(struct worker *w, long ctx, int d) __attribute__((noinline));
DECLARE_LEVEL(0) DECLARE_LEVEL(1) DECLARE_LEVEL(2) DECLARE_LEVEL(3) DECLARE_LEVEL(4)
DECLARE_LEVEL(5) DECLARE_LEVEL(6) DECLARE_LEVEL(7) DECLARE_LEVEL(8) DECLARE_LEVEL(9)

static inline int digit_at(long ctx, int d) {
    int var_from = g_depth - g_var_levels;
    if (d < var_from) return 0;
    long c = ctx;
    for (int k = g_depth - 1 - d; k > 0; k--) c /= BRANCH;
    return (int)(c % BRANCH);
}

#define DEFINE_LEVEL(K)                                                      \
    static void level_##K(struct worker *w, long ctx, int d) {               \
        volatile char pad[16 * (K + 1)]; /* frame sizes differ, as in real code */ \
        pad[0] = (char)d;                                                    \
        if (d == g_depth) {                                                  \
            leaf(w, ctx);                                                    \
        } else {                                                             \
            switch (digit_at(ctx, d)) {                                      \
            case 0: level_0(w, ctx, d + 1); break;                           \
            case 1: level_1(w, ctx, d + 1); break;                           \
            case 2: level_2(w, ctx, d + 1); break;                           \
            case 3: level_3(w, ctx, d + 1); break;                           \
            case 4: level_4(w, ctx, d + 1); break;                           \
            case 5: level_5(w, ctx, d + 1); break;                           \
            case 6: level_6(w, ctx, d + 1); break;                           \
            case 7: level_7(w, ctx, d + 1); break;                           \
            case 8: level_8(w, ctx, d + 1); break;                           \
            default: level_9(w, ctx, d + 1); break;                          \
            }                                                                \
        }                                                                    \
        sink += K + 1 + pad[0]; /* no tail calls, no identical functions */  \
    }
DEFINE_LEVEL(0) DEFINE_LEVEL(1) DEFINE_LEVEL(2) DEFINE_LEVEL(3) DEFINE_LEVEL(4)
DEFINE_LEVEL(5) DEFINE_LEVEL(6) DEFINE_LEVEL(7) DEFINE_LEVEL(8) DEFINE_LEVEL(9)

static void *run(void *arg) {
    struct worker *w = arg;
    long ctx = 0, burst_left = 0;
    for (long i = 0; i < w->events; i++) {
        if (g_bursts) {
            if (burst_left == 0) {
                ctx = zipf_draw(w);
                burst_left = 1 + (long)(next_rand(&w->rng) % 64);
            } else if (next_rand(&w->rng) % 4 == 0) {
                ctx = (ctx + 1) % g_contexts; /* a neighbouring context */
            }
            burst_left--;
        } else {
            ctx = zipf_draw(w);
        }
        level_0(w, ctx, 1);
    }
    if (g_live) {
        for (long i = 0; i < g_live; i++) free(w->ring[i]);
    }
    return NULL;
}

int main(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--events")) g_events = atol(v);
        else if (!strcmp(k, "--depth")) g_depth = atoi(v);
        else if (!strcmp(k, "--contexts")) g_contexts = atol(v);
        else if (!strcmp(k, "--zipf")) g_zipf = atof(v);
        else if (!strcmp(k, "--sizes")) g_random_sizes = !strcmp(v, "random");
        else if (!strcmp(k, "--order")) g_bursts = !strcmp(v, "bursts");
        else if (!strcmp(k, "--free")) g_live = strncmp(v, "live:", 5) ? 0 : atol(v + 5);
        else if (!strcmp(k, "--threads")) g_threads = atoi(v);
        else if (!strcmp(k, "--seed")) g_seed = strtoull(v, 0, 10);
        else if (!strcmp(k, "--pairs")) g_pairs = atoi(v);
        else { fprintf(stderr, "alloc_stress: unknown option %s\n", k); return 2; }
    }
    if (g_contexts < 1 || g_depth < 1 || g_threads < 1 || g_events < 0) {
        fprintf(stderr, "alloc_stress: bad arguments\n");
        return 2;
    }
    g_var_levels = 1;
    for (long c = BRANCH; c < g_contexts; c *= BRANCH) g_var_levels++;
    if (g_var_levels >= g_depth) g_depth = g_var_levels + 1;
    g_cdf = malloc(sizeof(double) * g_contexts);
    double sum = 0;
    for (long c = 0; c < g_contexts; c++) sum += 1.0 / pow((double)(c + 1), g_zipf);
    double acc = 0;
    for (long c = 0; c < g_contexts; c++) {
        acc += 1.0 / pow((double)(c + 1), g_zipf) / sum;
        g_cdf[c] = acc;
    }
    g_cdf[g_contexts - 1] = 1.0;

    if (g_pairs) g_pair_bits = calloc((size_t)g_contexts * SIZE_SPAN / 8 + 1, 1);

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_t tid[256];
    struct worker ws[256];
    int nt = g_threads > 256 ? 256 : g_threads;
    for (int t = 0; t < nt; t++) {
        ws[t].rng = g_seed * 0x9E3779B97F4A7C15ULL + (uint64_t)t + 1;
        ws[t].checksum = 0;
        ws[t].events = g_events / nt + (t < g_events % nt);
        ws[t].ring = g_live ? calloc(g_live, sizeof(void *)) : NULL;
        ws[t].ring_pos = 0;
    }
    if (nt == 1) {
        run(&ws[0]);
    } else {
        for (int t = 0; t < nt; t++) pthread_create(&tid[t], NULL, run, &ws[t]);
        for (int t = 0; t < nt; t++) pthread_join(tid[t], NULL);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    uint64_t checksum = 0;
    for (int t = 0; t < nt; t++) { checksum += ws[t].checksum; free(ws[t].ring); }
    free(g_cdf);
    long hwm = status_kib("VmHWM");
    printf("events=%ld checksum=%llu seconds=%.6f hwm_kib=%ld", g_events,
           (unsigned long long)checksum,
           (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9, hwm);
    if (g_pairs) {
        long pairs = 0;
        size_t nbytes = (size_t)g_contexts * SIZE_SPAN / 8 + 1;
        for (size_t i = 0; i < nbytes; i++) pairs += __builtin_popcount(g_pair_bits[i]);
        printf(" pairs=%ld", pairs);
        free(g_pair_bits);
    }
    printf("\n");
    return 0;
}
