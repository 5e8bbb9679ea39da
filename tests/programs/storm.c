/* 8-thread allocation storm (tests/tests/threads.rs).
 *
 * Each of 8 threads runs storm_worker: N mallocs of 16..1039 bytes from one
 * call site, keeping a ring of 64 live blocks (freed as the ring turns), and
 * handing every 8th block to the next thread through a mutex-protected
 * mailbox: the next thread frees it (a cross-thread free). At the end every
 * block is freed. Output (one line, write(2)) only after all threads joined:
 *   storm done: <threads> threads x <N> mallocs
 * Usage: storm [N]   (default 20000)
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <unistd.h>

#define THREADS 8
#define RING 64
#define MAILBOX 4096

struct mailbox {
    pthread_mutex_t lock;
    void *slots[MAILBOX];
    int n;
};

static struct mailbox boxes[THREADS];
static long n_per_thread = 20000;

static void post(int to, void *p) {
    struct mailbox *b = &boxes[to];
    pthread_mutex_lock(&b->lock);
    if (b->n < MAILBOX) {
        b->slots[b->n++] = p;
        p = NULL;
    }
    pthread_mutex_unlock(&b->lock);
    free(p); /* mailbox full: free here */
}

static void drain(int me) {
    struct mailbox *b = &boxes[me];
    pthread_mutex_lock(&b->lock);
    for (int i = 0; i < b->n; i++) free(b->slots[i]);
    b->n = 0;
    pthread_mutex_unlock(&b->lock);
}

__attribute__((noinline, noclone)) void *storm_alloc(size_t size) {
    void *p = malloc(size);
    memset(p, 0x5a, size < 64 ? size : 64);
    return p;
}

__attribute__((noinline, noclone)) void *storm_worker(void *arg) {
    int me = (int)(long)arg;
    void *ring[RING] = {0};
    unsigned seed = 12345u + (unsigned)me;
    for (long i = 0; i < n_per_thread; i++) {
        seed = seed * 1103515245u + 12345u;
        void *p = storm_alloc(16 + (seed >> 16) % 1024);
        if (i % 8 == 7) {
            post((me + 1) % THREADS, p);
        } else {
            int k = (int)(i % RING);
            free(ring[k]);
            ring[k] = p;
        }
        if (i % 256 == 0) drain(me);
    }
    for (int k = 0; k < RING; k++) free(ring[k]);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) n_per_thread = atol(argv[1]);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) pthread_mutex_init(&boxes[i].lock, NULL);
    for (long i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, storm_worker, (void *)i);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < THREADS; i++) drain(i);
    char msg[128];
    int n = snprintf(msg, sizeof msg, "storm done: %d threads x %ld mallocs\n", THREADS, n_per_thread);
    if (write(1, msg, (size_t)n) != n) return 3;
    return 0;
}
