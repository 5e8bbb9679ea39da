/* A program that reaps every child in a SIGCHLD handler, as shells and
 * servers do (tests/tests/reliability_process.rs). It starts one child of
 * its own, allocates in rel_sigchld_work, and says on stdout (from the
 * handler, with write) about any child it reaps that it never started.
 * Without the tracer: "own child reaped\n" only. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOIPA __attribute__((noinline, noclone))

static volatile pid_t own;
static volatile int own_reaped;
static char *volatile sink;

static void on_chld(int sig) {
    (void)sig;
    int st;
    pid_t p;
    while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
        if (p == own)
            own_reaped = 1;
        else
            write(1, "foreign child reaped\n", 21);
    }
}

NOIPA void rel_sigchld_work(void) {
    for (int i = 0; i < 100; i++) {
        sink = malloc(100);
        free(sink);
    }
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_chld;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGCHLD, &sa, NULL);
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGCHLD);
    sigprocmask(SIG_BLOCK, &block, &old);
    pid_t p = fork();
    if (p == 0) _exit(0);
    own = p;
    while (!own_reaped) sigsuspend(&old);
    sigprocmask(SIG_SETMASK, &old, NULL);
    rel_sigchld_work();
    printf("own child reaped\n");
    fflush(stdout);
    return 0;
}
