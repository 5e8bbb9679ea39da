/* handover_floor: the cheapest interposer that hands every allocator call to
 * another thread, to measure the floor under any tracer of that design
 * (benches/run.py, the "floor:" rows). Not a tracer: it records no stack and
 * keeps nothing.
 *
 * LD_PRELOAD it into alloc_stress (which calls only malloc and free) with
 * HANDOVER_FLOOR set to one of:
 *   count              count the calls and forward them to glibc;
 *   ring               also write a record (kind, pointer, size, 0) of four
 *                      words into a 1 MiB ring that nobody reads;
 *   ring+thread        the same ring read by a consumer thread, which sums
 *                      the records; the writer publishes its position every
 *                      32 records and waits when the ring is full;
 *   ring+thread+clock  the same with a time-stamp counter read per call in
 *                      the record's last word (wmhcct's event clock reads
 *                      the TSC too, then converts it);
 *   ring+thread+lent-clock
 *                      the same, but the consumer thread publishes its TSC
 *                      reading whenever it has moved on by ~10 µs and the
 *                      writer stores that word, reading the TSC itself
 *                      once every 32 calls (wmhcct's collector thread lends
 *                      its clock so: interpose/src/shared_clock.rs).
 *
 * wmhcct's collector thread works like `ring+thread+lent-clock` (one ring,
 * records published in batches, a time stamp per event) plus the stack: the
 * difference between these rows and wmhcct's is what the stack and the
 * per-event bookkeeping cost.
 *
 * Build: cc -O2 -shared -fPIC -o handover_floor.so handover_floor.c -lpthread
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);

#define RING_WORDS (1u << 17)
#define RECORD_WORDS 4
#define PUBLISH_EVERY 32
/* Words the consumer lets pile up before it reads them (as wmhcct's). */
#define MIN_WORDS 2048

static uint64_t ring[RING_WORDS] __attribute__((aligned(128)));
/* Position published by the writer, and the consumer's position: each alone
 * on its cache lines. */
static struct { volatile uint64_t v; char pad[120]; } published __attribute__((aligned(128)));
static struct { volatile uint64_t v; char pad[120]; } consumed __attribute__((aligned(128)));
/* The writer's own state. */
static struct {
    uint64_t tail, pushes, calls;
    int level; /* -1: not read yet; 0 count; 1 ring; 2 +thread; 3 +clock;
                  4 +lent clock */
    uint32_t own_reads; /* level 4: calls left before the writer's own read */
} w __attribute__((aligned(128))) = {0, 0, 0, -1, 0};
/* Level 4: the consumer's TSC reading, lent to the writer. */
static struct { volatile uint64_t v; char pad[120]; } lent __attribute__((aligned(128)));
/* TSC ticks between two publications of the lent clock (~10 µs at 3 GHz). */
#define LEND_STEP 30000
static volatile uint64_t sink;
static __thread int inside;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int level(void) {
    if (w.level < 0) {
        const char *s = getenv("HANDOVER_FLOOR");
        int l = -1;
        if (!s || !strcmp(s, "count")) l = 0;
        else if (!strcmp(s, "ring")) l = 1;
        else if (!strcmp(s, "ring+thread")) l = 2;
        else if (!strcmp(s, "ring+thread+clock")) l = 3;
        else if (!strcmp(s, "ring+thread+lent-clock")) l = 4;
        if (l < 0) {
            fprintf(stderr, "handover_floor: HANDOVER_FLOOR=%s: accepted values are count, ring, "
                            "ring+thread, ring+thread+clock, ring+thread+lent-clock\n", s);
            exit(2);
        }
        w.level = l;
    }
    return w.level;
}

static inline uint64_t clock_word(void) {
#if defined(__x86_64__)
    return __rdtsc();
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}

static void *consume(void *arg) {
    (void)arg;
    uint64_t sum = 0, head = 0;
    int lend = w.level >= 4;
    for (;;) {
        if (lend) {
            uint64_t now = clock_word();
            if (now - lent.v >= LEND_STEP) lent.v = now;
        }
        uint64_t tail = __atomic_load_n(&published.v, __ATOMIC_ACQUIRE);
        if (tail - head < MIN_WORDS) {
#if defined(__x86_64__)
            __builtin_ia32_pause();
#endif
            continue;
        }
        for (; head != tail; head++) sum += ring[head % RING_WORDS];
        sink = sum;
        __atomic_store_n(&consumed.v, head, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void start_consumer(void) {
    pthread_t t;
    if (pthread_create(&t, NULL, consume, NULL) != 0) {
        fprintf(stderr, "handover_floor: could not start the consumer thread\n");
        exit(2);
    }
    pthread_detach(t);
}

static inline void push(uint64_t kind, uint64_t ptr, uint64_t size) {
    int l = w.level;
    uint64_t t = w.tail;
    if (l >= 2) {
        while (t + RECORD_WORDS - __atomic_load_n(&consumed.v, __ATOMIC_ACQUIRE) > RING_WORDS) {
            __atomic_store_n(&published.v, t, __ATOMIC_RELEASE);
#if defined(__x86_64__)
            __builtin_ia32_pause();
#endif
        }
    }
    uint64_t *r = &ring[t % RING_WORDS]; /* RING_WORDS is a multiple of RECORD_WORDS */
    r[0] = kind;
    r[1] = ptr;
    r[2] = size;
    if (l == 4 && w.own_reads != 0) {
        w.own_reads--;
        r[3] = lent.v;
    } else if (l >= 3) {
        r[3] = clock_word();
        w.own_reads = 32;
    } else {
        r[3] = 0;
    }
    w.tail = t + RECORD_WORDS;
    if (++w.pushes % PUBLISH_EVERY == 0 && l >= 2)
        __atomic_store_n(&published.v, w.tail, __ATOMIC_RELEASE);
}

void *malloc(size_t n) {
    int l = level();
    void *p = __libc_malloc(n);
    w.calls++;
    if (l >= 1 && !inside) {
        inside = 1;
        if (l >= 2) pthread_once(&once, start_consumer);
        push(1, (uint64_t)(uintptr_t)p, n);
        inside = 0;
    }
    return p;
}

/* The count is kept for real: read once at exit. */
__attribute__((destructor)) static void publish_count(void) { sink = w.calls; }

void free(void *p) {
    int l = level();
    w.calls++;
    if (l >= 1 && !inside) push(2, (uint64_t)(uintptr_t)p, 0);
    __libc_free(p);
}
