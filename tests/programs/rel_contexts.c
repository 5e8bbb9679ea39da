/* 10^5 distinct calling contexts, any number of events, bounded live set
 * (tests/tests/reliability_load.rs, tracer memory independent of events).
 *
 * Five levels of ten functions each (lv<level>_<digit>, all different call
 * sites); the digits of a context number 0..99999 choose the path, so there
 * are exactly 10^5 leaf contexts, each ending in rel_leaf, which mallocs a
 * block (size fixed per context) and frees the block it allocated 64
 * events earlier (a ring of 64 live blocks). Contexts are visited in a
 * pseudo-random order (LCG), 8 calls in a row each (a burst: 16 events);
 * every other visit goes to one of the 100 contexts 0..99 (hot ones, half
 * of the events), the others are uniform over all 10^5. One malloc + one
 * free = 2 events. A warm-up visits every context once first (2·10^5
 * events), so every checkpoint sees all 10^5 contexts.
 *
 * At each checkpoint (events = 10^6, 10^7, 10^8, ... up to the total given)
 * it prints, from /proc/self/status:
 *   checkpoint <events> VmRSS_kB <n> VmHWM_kB <n> seconds <s>
 * and at the end:
 *   contexts done: <events> events <mallocs> mallocs <frees> frees
 * Usage: rel_contexts EVENTS
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOIPA __attribute__((noinline, noclone))
#define RING 64

static void *ring[RING];
static unsigned long ring_pos, mallocs, frees;
volatile unsigned long sink;

NOIPA void rel_leaf(unsigned ctx) {
    void *p = malloc(16 + ctx % 500);
    if (!p) abort();
    ((volatile char *)p)[0] = 1;
    mallocs++;
    void **slot = &ring[ring_pos++ % RING];
    if (*slot) {
        free(*slot);
        frees++;
    }
    *slot = p;
    sink++;
}

typedef void (*lvfn)(unsigned);
static lvfn table[5][10];

/* Level L, digit D: different frame sizes, then the next level chosen by
 * the next digit; the statement after the call prevents a tail call. */
#define LV(L, D)                                                        \
    NOIPA void lv##L##_##D(unsigned ctx) {                              \
        volatile char pad[16 * (D + 1)];                                \
        pad[0] = (char)ctx;                                             \
        if (L == 4)                                                     \
            rel_leaf(ctx);                                              \
        else {                                                          \
            unsigned div = 1;                                           \
            for (int i = 0; i < L + 1; i++) div *= 10;                  \
            table[L + 1][(ctx / div) % 10](ctx);                        \
        }                                                               \
        sink += pad[0];                                                 \
    }
#define LEVEL(L) LV(L,0) LV(L,1) LV(L,2) LV(L,3) LV(L,4) LV(L,5) LV(L,6) LV(L,7) LV(L,8) LV(L,9)
LEVEL(0) LEVEL(1) LEVEL(2) LEVEL(3) LEVEL(4)
#define ROW(L) { lv##L##_0, lv##L##_1, lv##L##_2, lv##L##_3, lv##L##_4, \
                 lv##L##_5, lv##L##_6, lv##L##_7, lv##L##_8, lv##L##_9 }
static lvfn init_table[5][10] = { ROW(0), ROW(1), ROW(2), ROW(3), ROW(4) };

#include "proc_status.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    unsigned long events = argc > 1 ? strtoul(argv[1], NULL, 10) : 2000000;
    memcpy(table, init_table, sizeof table);
    unsigned long long x = 88172645463325252ull;
    unsigned long next_cp = 1000000;
    double t0 = now();
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (unsigned ctx = 0; ctx < 100000; ctx++) table[0][ctx % 10](ctx);
    while (mallocs + frees < events) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        unsigned ctx = (unsigned)((x >> 33) % 100000);
        if ((x >> 20) & 1) ctx %= 100;
        for (int b = 0; b < 8; b++) table[0][ctx % 10](ctx);
        if (mallocs + frees >= next_cp) {
            printf("checkpoint %lu VmRSS_kB %ld VmHWM_kB %ld seconds %.2f\n", next_cp,
                   status_kib("VmRSS"), status_kib("VmHWM"), now() - t0);
            next_cp *= 10;
        }
    }
    for (int i = 0; i < RING; i++)
        if (ring[i]) {
            free(ring[i]);
            frees++;
        }
    printf("contexts done: %lu events %lu mallocs %lu frees\n", mallocs + frees, mallocs, frees);
    return 0;
}
