/* SIGTERM, SIGINT and SIGHUP under the tracer
 * (tests/tests/reliability_signals.rs). The signal is the third argument,
 * TERM (default), INT or HUP; "SIGTERM" below stands for it.
 *
 *   raise N:    rel_before_term: N x malloc(100) (kept), prints
 *               "allocated N", then raise(SIGTERM): killed by SIGTERM.
 *   loop T:     T threads (and main) malloc/free in rel_term_loop forever
 *               after printing "looping"; the test kills the process with
 *               SIGTERM from outside.
 *   bigloop T:  the same with blocks of 2–6 KiB, past glibc's per-thread
 *               cache, so most calls take the arena's lock inside glibc.
 *   own N:      installs its own SIGTERM handler first (prints
 *               "own handler" and exits with code 3), allocates N blocks,
 *               raise(SIGTERM).
 *   ignore N:   ignores SIGTERM first, allocates N blocks, raise(SIGTERM),
 *               prints "still alive" and exits 0.
 * Output through write(2).
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOIPA __attribute__((noinline, noclone))
volatile unsigned long sink;

static void say(const char *s) {
    if (write(1, s, strlen(s)) < 0) _exit(9);
}

NOIPA void rel_before_term(long n) {
    for (long i = 0; i < n; i++) {
        void *p = malloc(100);
        ((volatile char *)p)[0] = 1;
    }
    sink++;
}

static size_t g_base = 16;

NOIPA void *rel_term_loop(void *arg) {
    unsigned seed = (unsigned)(long)arg;
    void *keep[32] = {0};
    for (;;) {
        seed = seed * 1103515245u + 12345u;
        int k = (seed >> 16) % 32;
        free(keep[k]);
        keep[k] = malloc(g_base + (seed >> 8) % (g_base == 16 ? 1024 : 4096));
    }
    return NULL;
}

static void own_handler(int sig) {
    (void)sig;
    say("own handler\n");
    exit(3);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "raise";
    long n = argc > 2 ? atol(argv[2]) : 1000;
    const char *name = argc > 3 ? argv[3] : "TERM";
    int SIG = !strcmp(name, "INT") ? SIGINT : !strcmp(name, "HUP") ? SIGHUP : SIGTERM;
    char msg[64];
    if (strcmp(mode, "raise") == 0) {
        rel_before_term(n);
        snprintf(msg, sizeof msg, "allocated %ld\n", n);
        say(msg);
        raise(SIG);
        say("not reached\n");
        return 1;
    }
    if (strcmp(mode, "bigloop") == 0) {
        g_base = 2048;
        mode = "loop";
    }
    if (strcmp(mode, "loop") == 0) {
        pthread_t t;
        for (long i = 0; i < n; i++) pthread_create(&t, NULL, rel_term_loop, (void *)(i + 1));
        say("looping\n");
        rel_term_loop((void *)99);
    }
    if (strcmp(mode, "own") == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = own_handler;
        sigaction(SIG, &sa, NULL);
        rel_before_term(n);
        raise(SIG);
        say("not reached\n");
        return 1;
    }
    if (strcmp(mode, "ignore") == 0) {
        signal(SIG, SIG_IGN);
        rel_before_term(n);
        raise(SIG);
        say("still alive\n");
        return 0;
    }
    return 2;
}
