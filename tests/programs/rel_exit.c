/* Ways a process ends without exit()'s handlers (tests/tests/reliability_process.rs).
 *
 * Every mode first makes 100 malloc/free pairs in rel_exit_work and 7
 * blocks in rel_exit_keep that stay live, then prints "worked" and ends:
 * _exit:    _exit(3)
 * _Exit:    _Exit(4)
 * quick:    quick_exit(5)
 * handler:  a thread keeps allocating (rel_exit_spin) while SIGUSR1's
 *           handler, on the main thread, calls _exit(6)
 * vfork:    a vfork child calls _exit(9) at once (it shares the parent's
 *           memory: nothing may happen there); the parent prints the
 *           child's status and ends with _exit(8)
 * fork:     a forked child makes 10 malloc/free pairs in rel_exit_child
 *           and calls _exit(7); the parent prints its status and returns 0
 * Usage: rel_exit MODE
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOIPA __attribute__((noinline, noclone))

static char *volatile sink;
static void *volatile kept[7];

NOIPA void rel_exit_work(void) {
    for (int i = 0; i < 100; i++) {
        sink = malloc(48 + i);
        sink[0] = 1;
        free(sink);
    }
}

NOIPA void rel_exit_keep(void) {
    for (int i = 0; i < 7; i++) kept[i] = malloc(1000);
}

NOIPA void rel_exit_child(void) {
    for (int i = 0; i < 10; i++) {
        sink = malloc(32);
        free(sink);
    }
}

static volatile int spinning;
NOIPA void *rel_exit_spin(void *arg) {
    (void)arg;
    spinning = 1;
    for (;;) {
        char *volatile p = malloc(64);
        free(p);
    }
    return NULL;
}

static void on_usr1(int sig) {
    (void)sig;
    _exit(6);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    rel_exit_work();
    rel_exit_keep();
    printf("worked\n");
    fflush(stdout);
    if (!strcmp(mode, "_exit")) _exit(3);
    if (!strcmp(mode, "_Exit")) _Exit(4);
    if (!strcmp(mode, "quick")) quick_exit(5);
    if (!strcmp(mode, "handler")) {
        pthread_t t;
        signal(SIGUSR1, on_usr1);
        pthread_create(&t, NULL, rel_exit_spin, NULL);
        while (!spinning) usleep(1000);
        usleep(20000);
        raise(SIGUSR1);
        return 1; /* not reached */
    }
    if (!strcmp(mode, "vfork")) {
        pid_t pid = vfork();
        if (pid == 0) _exit(9);
        int st = 0;
        waitpid(pid, &st, 0);
        printf("child: %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        fflush(stdout);
        _exit(8);
    }
    if (!strcmp(mode, "fork")) {
        pid_t pid = fork();
        if (pid == 0) {
            rel_exit_child();
            _exit(7);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        printf("child: %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        return 0;
    }
    return 2;
}
