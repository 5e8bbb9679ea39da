/* A program that crashes (tests/tests/reliability_signals.rs).
 *
 * Every mode first makes 100 malloc/free pairs in rel_crash_work and keeps
 * 5 blocks of 1000 bytes (rel_crash_keep), prints "working" (unbuffered),
 * then:
 * segv:   writes through a null pointer (SIGSEGV)
 * abort:  calls abort() (SIGABRT)
 * double_free: frees a block twice; glibc's check aborts (SIGABRT)
 * fpe:    divides an integer by zero (SIGFPE)
 * kill:   sends itself SIGBUS with kill() (asynchronous)
 * thread: a second thread crashes (SIGSEGV) while the main thread keeps
 *         allocating in rel_crash_spin (1-byte blocks: however long the
 *         crash takes to come on a loaded machine, rel_crash_keep's 5000
 *         bytes stay above phi of all the bytes, a hot context; with 64-byte
 *         blocks a crash 70 ms late, 1.2 million calls, left it out)
 * own:    installs its own SIGSEGV handler, which recovers with
 *         siglongjmp; then the program prints "recovered" and exits 0
 * polite: installs its own SIGSEGV handler only if the disposition is the
 *         default (as Rust's runtime and Open MPI do), which says
 *         "polite handler" and calls _exit(42); then faults
 * polite_signal: the same with signal(): installs its handler, and puts
 *         the previous one back unless that was the default
 * polite_sysv, polite_bsd, polite_sigset: the same with sysv_signal(),
 *         bsd_signal() and sigset()
 * Usage: rel_crash MODE
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOIPA __attribute__((noinline, noclone))

/* glibc declares it only for older standards. */
extern __sighandler_t bsd_signal(int, __sighandler_t);

static char *volatile sink;
static void *volatile kept[5];
static int *volatile nowhere;
static volatile int zero;

NOIPA void rel_crash_work(void) {
    for (int i = 0; i < 100; i++) {
        sink = malloc(40 + i);
        sink[0] = 1;
        free(sink);
    }
}

NOIPA void rel_crash_keep(void) {
    for (int i = 0; i < 5; i++) kept[i] = malloc(1000);
}

NOIPA void rel_crash_segv(void) { *nowhere = 1; }

static volatile int spinning;
NOIPA void rel_crash_spin(void) {
    spinning = 1;
    for (;;) {
        char *volatile p = malloc(1);
        free(p);
    }
}

static void *crasher(void *arg) {
    (void)arg;
    while (!spinning) usleep(1000);
    usleep(20000);
    rel_crash_segv();
    return NULL;
}

static void polite(int sig) {
    (void)sig;
    write(1, "polite handler\n", 15);
    _exit(42);
}

static sigjmp_buf back;
static void on_segv(int sig) {
    (void)sig;
    siglongjmp(back, 1);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    setvbuf(stdout, NULL, _IONBF, 0);
    rel_crash_work();
    rel_crash_keep();
    printf("working\n");
    if (!strcmp(mode, "segv")) rel_crash_segv();
    if (!strcmp(mode, "abort")) abort();
    if (!strcmp(mode, "double_free")) {
        sink = malloc(32);
        free(sink);
        free(sink);
    }
    if (!strcmp(mode, "fpe")) printf("%d\n", (argc + 40) / zero);
    if (!strcmp(mode, "kill")) kill(getpid(), SIGBUS);
    if (!strcmp(mode, "thread")) {
        pthread_t t;
        pthread_create(&t, NULL, crasher, NULL);
        rel_crash_spin();
    }
    if (!strcmp(mode, "polite")) {
        struct sigaction old, sa;
        sigaction(SIGSEGV, NULL, &old);
        if (old.sa_handler == SIG_DFL) {
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = polite;
            sigaction(SIGSEGV, &sa, NULL);
        }
        rel_crash_segv();
    }
    if (!strcmp(mode, "polite_signal")) {
        void (*old)(int) = signal(SIGSEGV, polite);
        if (old != SIG_DFL) signal(SIGSEGV, old);
        rel_crash_segv();
    }
    if (!strcmp(mode, "polite_sysv") || !strcmp(mode, "polite_bsd") ||
        !strcmp(mode, "polite_sigset")) {
        void (*old)(int) = !strcmp(mode, "polite_sysv")  ? sysv_signal(SIGSEGV, polite)
                           : !strcmp(mode, "polite_bsd") ? bsd_signal(SIGSEGV, polite)
                                                         : sigset(SIGSEGV, polite);
        if (old != SIG_DFL) signal(SIGSEGV, old);
        rel_crash_segv();
    }
    if (!strcmp(mode, "own")) {
        signal(SIGSEGV, on_segv);
        if (sigsetjmp(back, 1) == 0) rel_crash_segv();
        printf("recovered\n");
        return 0;
    }
    return 2;
}
