/* Allocation while a timer signal handler runs (tests/tests/reliability_signals.rs).
 *
 * A 200 us ITIMER_REAL drives a SIGALRM handler while main runs N
 * malloc/free pairs in rel_main_loop (sizes 2-6 KiB, beyond glibc's
 * tcache, so the handler's 32-byte blocks never share a free list with the
 * main loop). Modes:
 *   quiet:  the handler only counts ticks (no allocation);
 *   alloc:  the handler also mallocs and frees 32 bytes in rel_handler_alloc
 *           (not async-signal-safe in principle; glibc tolerates it here
 *           because the 32-byte tcache bin is warmed before the timer
 *           starts and is only ever touched by the handler).
 * stdout: "sigalrm <mode>: <N> main allocations done" (same with and
 * without the tracer); stderr: "sigalrm ticks <t> handler_allocs <h>".
 * Usage: rel_sigalrm quiet|alloc N
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#define NOIPA __attribute__((noinline, noclone))
static volatile sig_atomic_t ticks, handler_allocs, alloc_mode;
volatile unsigned long sink;

NOIPA void rel_handler_alloc(void) {
    void *p = malloc(32);
    if (p) {
        ((volatile char *)p)[0] = 1;
        handler_allocs++;
    }
    free(p);
}

static void on_alarm(int sig) {
    (void)sig;
    ticks++;
    if (alloc_mode) rel_handler_alloc();
}

NOIPA void rel_main_loop(long n) {
    unsigned seed = 42;
    for (long i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        void *p = malloc(2048 + (seed >> 16) % 4096);
        ((volatile char *)p)[0] = 1;
        free(p);
    }
    sink++;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "quiet";
    long n = argc > 2 ? atol(argv[2]) : 100000;
    alloc_mode = strcmp(mode, "alloc") == 0;
    free(malloc(32)); /* warm the 32-byte tcache bin */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 200}, {0, 200}};
    setitimer(ITIMER_REAL, &it, NULL);
    rel_main_loop(n);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    char msg[128];
    int len = snprintf(msg, sizeof msg, "sigalrm %s: %ld main allocations done\n", mode, n);
    if (write(1, msg, (size_t)len) != len) return 3;
    len = snprintf(msg, sizeof msg, "sigalrm ticks %d handler_allocs %d\n", (int)ticks,
                   (int)handler_allocs);
    if (write(2, msg, (size_t)len) != len) return 3;
    return 0;
}
