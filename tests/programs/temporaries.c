/* temporaries: known numbers of temporary allocations (a block freed by the
 * thread that allocated it before that thread allocates or frees anything
 * else), for
 * tests/tests/temporaries.rs.
 *
 *   churn      CHURN blocks, each freed at once: all temporary;
 *   batch      BATCH blocks allocated, then freed: only the last of each
 *              batch is temporary (BATCHES of them);
 *   interleave a, b allocated, b freed (temporary), a freed (not: a free
 *              came between), INTERLEAVE times;
 *   grow       realloc of the latest block, then its free: the realloc's
 *              new block is the latest allocation, so the free is a
 *              temporary's (GROW of them); the realloc itself is not;
 *   threads    two threads, each CHURN_T blocks freed at once, while the
 *              other allocates too: every one is temporary, per thread.
 *
 * Usage: temporaries [N]: churn N times over (default 1), for `wmhcct diff`.
 * Prints its own expected totals for the test to compare. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define CHURN 3000
#define BATCH 10
#define BATCHES 200
#define INTERLEAVE 500
#define GROW 400
#define CHURN_T 2000

static volatile unsigned long sink;

static void touch(void *p) {
    ((volatile unsigned char *)p)[0] = 1;
    sink += (unsigned long)p & 1;
}

static void __attribute__((noinline)) churn(int times) {
    for (int i = 0; i < CHURN * times; i++) {
        void *p = malloc(24);
        touch(p);
        free(p);
    }
}

static void __attribute__((noinline)) batch(void) {
    void *v[BATCH];
    for (int b = 0; b < BATCHES; b++) {
        for (int i = 0; i < BATCH; i++) {
            v[i] = malloc(40);
            touch(v[i]);
        }
        for (int i = BATCH - 1; i >= 0; i--) free(v[i]);
    }
}

static void __attribute__((noinline)) interleave(void) {
    for (int i = 0; i < INTERLEAVE; i++) {
        void *a = malloc(56);
        void *b = malloc(72);
        touch(a);
        touch(b);
        free(b);
        free(a);
    }
}

static void __attribute__((noinline)) grow(void) {
    for (int i = 0; i < GROW; i++) {
        void *p = malloc(16);
        touch(p);
        p = realloc(p, 4096);
        touch(p);
        free(p);
    }
}

static void *__attribute__((noinline)) churn_thread(void *arg) {
    (void)arg;
    for (int i = 0; i < CHURN_T; i++) {
        void *p = calloc(1, 88);
        touch(p);
        free(p);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int times = argc > 1 ? atoi(argv[1]) : 1;
    churn(times);
    batch();
    interleave();
    grow();
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, churn_thread, NULL);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    printf("churn %d batch %d interleave %d grow %d threads %d\n", CHURN * times, BATCHES, INTERLEAVE,
           GROW, 2 * CHURN_T);
    return 0;
}
