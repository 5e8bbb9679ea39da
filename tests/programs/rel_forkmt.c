/* fork in a multi-threaded program while other threads allocate
 * (tests/tests/reliability_process.rs).
 *
 * 4 worker threads malloc/free in a loop (rel_spinner) the whole time. The
 * main thread, in the mode given:
 *   fork:    forks FORKS times without exec; each child mallocs and frees
 *            in rel_child_work (also from a thread it starts), then leaves
 *            with _exit(0), or with exit(0) for every 10th child (which
 *            runs the exit handlers: the tracer writes the child's report);
 *   exec:    fork + execl of this program in mode "child"
 *   system:  system("<this program> child")
 *   vfork:   vfork + execl of this program in mode "child"
 *   spawn:   posix_spawn of this program in mode "child"
 *   child:   (the started program) rel_child_work once, exit(0)
 * and waits for each child with a 30 s watchdog: a child that hangs (a
 * deadlock inherited across fork) is killed and reported. Output (stdout):
 *   forkmt <mode>: <n> children, <ok> exited 0, <hung> hung
 * Usage: rel_forkmt MODE [N]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOIPA __attribute__((noinline, noclone))
#define WORKERS 4

extern char **environ;
static atomic_int stop;
volatile unsigned long sink;

NOIPA void *rel_spinner(void *arg) {
    unsigned seed = (unsigned)(long)arg;
    void *keep[16] = {0};
    while (!atomic_load(&stop)) {
        seed = seed * 1103515245u + 12345u;
        int k = (seed >> 16) % 16;
        free(keep[k]);
        keep[k] = malloc(16 + (seed >> 8) % 4096);
    }
    for (int k = 0; k < 16; k++) free(keep[k]);
    return NULL;
}

NOIPA void rel_child_work(void) {
    void *p[100];
    for (int i = 0; i < 100; i++) p[i] = malloc(100 + i);
    for (int i = 0; i < 100; i++) free(p[i]);
    sink++;
}

static void *child_thread(void *arg) {
    (void)arg;
    rel_child_work();
    return NULL;
}

static int wait_child(pid_t pid, int *hung) {
    struct timespec d = {0, 1000000};
    for (int i = 0; i < 30000; i++) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) return WIFEXITED(st) && WEXITSTATUS(st) == 0;
        if (r < 0) return 0;
        nanosleep(&d, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    (*hung)++;
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "fork";
    int n = argc > 2 ? atoi(argv[2]) : 50;
    if (strcmp(mode, "child") == 0) {
        rel_child_work();
        return 0;
    }
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return 2;
    self[len] = 0;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "'%s' child", self);
    pthread_t t[WORKERS];
    for (long i = 0; i < WORKERS; i++) pthread_create(&t[i], NULL, rel_spinner, (void *)(i + 1));
    int ok = 0, hung = 0;
    for (int i = 0; i < n; i++) {
        pid_t pid = -1;
        if (strcmp(mode, "fork") == 0) {
            pid = fork();
            if (pid == 0) {
                rel_child_work();
                pthread_t ct;
                if (pthread_create(&ct, NULL, child_thread, NULL) == 0) pthread_join(ct, NULL);
                rel_child_work();
                if (i % 10 == 0) exit(0);
                _exit(0);
            }
        } else if (strcmp(mode, "exec") == 0) {
            pid = fork();
            if (pid == 0) {
                execl(self, "rel_forkmt", "child", (char *)NULL);
                _exit(127);
            }
        } else if (strcmp(mode, "vfork") == 0) {
            pid = vfork();
            if (pid == 0) {
                execl(self, "rel_forkmt", "child", (char *)NULL);
                _exit(127);
            }
        } else if (strcmp(mode, "spawn") == 0) {
            char *args[] = {"rel_forkmt", "child", NULL};
            if (posix_spawn(&pid, self, NULL, NULL, args, environ) != 0) pid = -1;
        } else if (strcmp(mode, "system") == 0) {
            int st = system(cmd);
            if (st == 0) ok++;
            continue;
        } else {
            fprintf(stderr, "unknown mode %s\n", mode);
            return 2;
        }
        if (pid < 0) continue;
        ok += wait_child(pid, &hung);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < WORKERS; i++) pthread_join(t[i], NULL);
    printf("forkmt %s: %d children, %d exited 0, %d hung\n", mode, n, ok, hung);
    return ok == n ? 0 : 1;
}
