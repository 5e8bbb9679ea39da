/* 16 threads allocating and freeing across threads (tests/tests/reliability_load.rs).
 *
 * Each of 16 threads runs storm16_worker: N mallocs of 16..2063 bytes from
 * one call site (storm16_alloc). Every 4th block is handed to the next
 * thread through a mutex-protected mailbox and freed there (a cross-thread
 * free); the others live in a ring of 32 and are freed as the ring turns.
 * Every block is freed exactly once. The program counts its own calls and
 * prints, after all threads joined (write(2), no stdio buffer):
 *   storm16 done: <mallocs> mallocs <frees> frees
 * and on stderr its peak RSS (VmHWM, kB) read from /proc/self/status:
 *   storm16 VmHWM_kB <n>
 * Usage: rel_storm16 N   (mallocs per thread; N = 0: threads only)
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define THREADS 16
#define RING 32
#define MAILBOX 1024
#define NOIPA __attribute__((noinline, noclone))

struct mailbox {
    pthread_mutex_t lock;
    void *slots[MAILBOX];
    int n;
};

static struct mailbox boxes[THREADS];
static long n_per_thread;
static atomic_long mallocs, frees;

NOIPA void *storm16_alloc(size_t size) {
    void *p = malloc(size);
    if (!p) abort();
    memset(p, 0x5a, 16);
    return p;
}

NOIPA void storm16_free(void *p, long *count) {
    free(p);
    (*count)++;
}

static void drain(int me, long *freed) {
    struct mailbox *b = &boxes[me];
    pthread_mutex_lock(&b->lock);
    for (int i = 0; i < b->n; i++) storm16_free(b->slots[i], freed);
    b->n = 0;
    pthread_mutex_unlock(&b->lock);
}

static void post(int to, void *p, long *freed) {
    struct mailbox *b = &boxes[to];
    pthread_mutex_lock(&b->lock);
    if (b->n < MAILBOX) {
        b->slots[b->n++] = p;
        p = NULL;
    }
    pthread_mutex_unlock(&b->lock);
    if (p) storm16_free(p, freed); /* mailbox full: free here */
}

NOIPA void *storm16_worker(void *arg) {
    int me = (int)(long)arg;
    void *ring[RING] = {0};
    long made = 0, freed = 0;
    unsigned seed = 777u + (unsigned)me;
    for (long i = 0; i < n_per_thread; i++) {
        seed = seed * 1103515245u + 12345u;
        void *p = storm16_alloc(16 + (seed >> 16) % 2048);
        made++;
        if (i % 4 == 3) {
            post((me + 1) % THREADS, p, &freed);
        } else {
            int k = (int)(i % RING);
            if (ring[k]) storm16_free(ring[k], &freed);
            ring[k] = p;
        }
        if (i % 128 == 0) drain(me, &freed);
    }
    for (int k = 0; k < RING; k++)
        if (ring[k]) storm16_free(ring[k], &freed);
    atomic_fetch_add(&mallocs, made);
    atomic_fetch_add(&frees, freed);
    return NULL;
}

#include "proc_status.h"

int main(int argc, char **argv) {
    n_per_thread = argc > 1 ? atol(argv[1]) : 1000;
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) pthread_mutex_init(&boxes[i].lock, NULL);
    for (long i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, storm16_worker, (void *)i);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    long freed = 0;
    for (int i = 0; i < THREADS; i++) drain(i, &freed);
    atomic_fetch_add(&frees, freed);
    char msg[160];
    int n = snprintf(msg, sizeof msg, "storm16 done: %ld mallocs %ld frees\n",
                     atomic_load(&mallocs), atomic_load(&frees));
    if (write(1, msg, (size_t)n) != n) return 3;
    long hwm = status_kib("VmHWM");
    n = snprintf(msg, sizeof msg, "storm16 VmHWM_kB %ld\n", hwm);
    if (write(2, msg, (size_t)n) != n) return 3;
    return 0;
}
