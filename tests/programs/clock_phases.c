/* Test program for the event clock's time stamps (tests/tests/
 * collector_thread.rs): the heap's peak is one large block allocated at a
 * known time, with the tracer's collector thread awake or asleep.
 *
 *   clock_phases busy   small allocations for ~150 ms, the 24 MiB block in
 *                       the middle of them (the collector thread is awake
 *                       and lends its clock)
 *   clock_phases idle   small allocations for ~100 ms, then ~400 ms with
 *                       none (the collector thread goes to sleep), then the
 *                       block
 *
 * Prints "block T1 T2": CLOCK_REALTIME in ns just before and just after the
 * block's malloc. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile int sink;

static unsigned long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

__attribute__((noinline)) static void churn(unsigned long long ms) {
    unsigned long long end = now_ns() + ms * 1000000ull;
    do {
        for (int i = 0; i < 1000; i++) {
            char *p = malloc(64 + (i & 7));
            p[0] = (char)i;
            sink += p[0];
            free(p);
        }
    } while (now_ns() < end);
}

__attribute__((noinline)) static char *block(void) {
    char *p = malloc(24u << 20);
    p[0] = 1;
    return p;
}

int main(int argc, char **argv) {
    int busy = argc > 1 && strcmp(argv[1], "busy") == 0;
    churn(busy ? 75 : 100);
    if (!busy) {
        struct timespec ts = {0, 400000000};
        nanosleep(&ts, NULL);
    }
    unsigned long long t1 = now_ns();
    char *p = block();
    unsigned long long t2 = now_ns();
    if (busy) churn(75);
    sink += p[0];
    free(p);
    printf("block %llu %llu\n", t1, t2);
    return 0;
}
