/* deep_stack: allocations at the end of call paths 32 frames deep, for the
 * heuristic-unwinder tests (tests/tests/heuristic.rs).
 *
 * 1000 contexts: the last three levels of the path each pick one of ten call
 * sites from one decimal digit of the context number (the leaf-most level
 * takes the lowest digit), and the allocating function is one of ten leaf
 * functions chosen by the hundreds digit. The event stream has the
 * clustering the WMTools paper describes: bursts of allocations from one
 * context and its neighbours (c, c+1, ...), and phases that jump to another
 * part of the tree. Deterministic (fixed-seed generator); every block is
 * freed right away.
 *
 *   deep_stack [events]      (default 200000)
 *
 * Prints "deep_stack done: <events> events".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define DEPTH 32
#define VAR_LEVELS 3
#define CONTEXTS 1000

static volatile long sink;
static uint64_t rng = 0x9E3779B97F4A7C15ULL;

static uint64_t next_rand(void) {
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1DULL;
}

#define DEFINE_LEAF(K)                                                       \
    static void leaf_##K(long ctx) __attribute__((noinline));                \
    static void leaf_##K(long ctx) {                                         \
        char *p = malloc(16 + (size_t)(ctx % 64) * 8 + K);                   \
        if (!p) exit(3);                                                     \
        p[0] = (char)ctx;                                                    \
        sink += p[0];                                                        \
        free(p);                                                             \
        sink += K;                                                           \
    }
DEFINE_LEAF(0) DEFINE_LEAF(1) DEFINE_LEAF(2) DEFINE_LEAF(3) DEFINE_LEAF(4)
DEFINE_LEAF(5) DEFINE_LEAF(6) DEFINE_LEAF(7) DEFINE_LEAF(8) DEFINE_LEAF(9)

static void leaf(long ctx) {
    switch (ctx / 100 % 10) {
    case 0: leaf_0(ctx); break;
    case 1: leaf_1(ctx); break;
    case 2: leaf_2(ctx); break;
    case 3: leaf_3(ctx); break;
    case 4: leaf_4(ctx); break;
    case 5: leaf_5(ctx); break;
    case 6: leaf_6(ctx); break;
    case 7: leaf_7(ctx); break;
    case 8: leaf_8(ctx); break;
    default: leaf_9(ctx); break;
    }
}

static inline int digit_at(long ctx, int d) {
    if (d < DEPTH - VAR_LEVELS) return 0;
    for (int k = DEPTH - 1 - d; k > 0; k--) ctx /= 10;
    return (int)(ctx % 10);
}

#define DECLARE_LEVEL(K) static void level_##K(long ctx, int d) __attribute__((noinline));
DECLARE_LEVEL(0) DECLARE_LEVEL(1) DECLARE_LEVEL(2) DECLARE_LEVEL(3) DECLARE_LEVEL(4)
DECLARE_LEVEL(5) DECLARE_LEVEL(6) DECLARE_LEVEL(7) DECLARE_LEVEL(8) DECLARE_LEVEL(9)

/* Ten distinct functions (sink += K: no identical-code folding), the call
 * not in tail position: every level keeps its own frame. Frames differ in
 * size from one function to the next, as in real code (with equal sizes
 * every frame is the paper's Figure 3 case: same frame at the same height
 * over a different caller). */
#define DEFINE_LEVEL(K)                                                      \
    static void level_##K(long ctx, int d) {                                 \
        volatile char pad[16 * (K + 1)];                                     \
        pad[0] = (char)d;                                                    \
        if (d == DEPTH) {                                                    \
            leaf(ctx);                                                       \
        } else {                                                             \
            switch (digit_at(ctx, d)) {                                      \
            case 0: level_0(ctx, d + 1); break;                              \
            case 1: level_1(ctx, d + 1); break;                              \
            case 2: level_2(ctx, d + 1); break;                              \
            case 3: level_3(ctx, d + 1); break;                              \
            case 4: level_4(ctx, d + 1); break;                              \
            case 5: level_5(ctx, d + 1); break;                              \
            case 6: level_6(ctx, d + 1); break;                              \
            case 7: level_7(ctx, d + 1); break;                              \
            case 8: level_8(ctx, d + 1); break;                              \
            default: level_9(ctx, d + 1); break;                             \
            }                                                                \
        }                                                                    \
        sink += K + 1 + pad[0];                                              \
    }
DEFINE_LEVEL(0) DEFINE_LEVEL(1) DEFINE_LEVEL(2) DEFINE_LEVEL(3) DEFINE_LEVEL(4)
DEFINE_LEVEL(5) DEFINE_LEVEL(6) DEFINE_LEVEL(7) DEFINE_LEVEL(8) DEFINE_LEVEL(9)

int main(int argc, char **argv) {
    long events = argc > 1 ? atol(argv[1]) : 200000;
    long ctx = 0, done = 0;
    while (done < events) {
        /* A phase: a region of the tree (one hundreds digit). */
        long region = (long)(next_rand() % 10) * 100;
        long phase_bursts = 4 + (long)(next_rand() % 8);
        for (long b = 0; b < phase_bursts && done < events; b++) {
            /* A burst: one context and its neighbours. */
            ctx = region + (long)(next_rand() % 100);
            long len = 8 + (long)(next_rand() % 120);
            for (long i = 0; i < len && done < events; i++, done++) {
                if (next_rand() % 8 == 0) ctx = region + (ctx + 1) % 100;
                level_0(ctx, 1);
            }
        }
    }
    printf("deep_stack done: %ld events\n", events);
    return 0;
}
