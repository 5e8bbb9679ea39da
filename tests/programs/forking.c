/* fork and fork+exec under the tracer (tests/tests/fork.rs).
 *
 *   main -> parent_before : 50 x malloc(64), kept until the end
 *   fork
 *     mode "exec":   the child execs /bin/echo "hello from the child"
 *     mode "noexec": the child runs child_work (30 x malloc(128), freed)
 *                    and exits normally with exit(0)
 *     mode "exec_uexit": the child execs this program with "uexit", which
 *                    runs child_work and ends with _exit(6), as a shell
 *                    (dash) run by system() does
 *   the parent waits for the child, then
 *   main -> parent_after : 25 x malloc(256), freed with the first 50
 *
 * The parent prints "parent: child exit <code>" (write(2)) at the end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOIPA __attribute__((noinline, noclone))

static void *before[50], *after[25];
volatile unsigned long sink;

NOIPA void parent_before(void) {
    for (int i = 0; i < 50; i++) { before[i] = malloc(64); ((char *)before[i])[0] = 1; }
    sink++;
}
NOIPA void parent_after(void) {
    for (int i = 0; i < 25; i++) { after[i] = malloc(256); ((char *)after[i])[0] = 1; }
    sink++;
}
NOIPA void child_work(void) {
    void *p[30];
    for (int i = 0; i < 30; i++) { p[i] = malloc(128); ((char *)p[i])[0] = 1; }
    for (int i = 0; i < 30; i++) free(p[i]);
    sink++;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "uexit") == 0) {
        child_work();
        _exit(6);
    }
    int exec_child = argc > 1 && strcmp(argv[1], "exec") == 0;
    int exec_self = argc > 1 && strcmp(argv[1], "exec_uexit") == 0;
    parent_before();
    pid_t pid = fork();
    if (pid < 0) return 4;
    if (pid == 0) {
        if (exec_self) {
            execl(argv[0], argv[0], "uexit", (char *)NULL);
            _exit(127);
        }
        if (exec_child) {
            execl("/bin/echo", "echo", "hello from the child", (char *)NULL);
            _exit(127);
        }
        child_work();
        exit(0);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return 5;
    parent_after();
    for (int i = 0; i < 50; i++) free(before[i]);
    for (int i = 0; i < 25; i++) free(after[i]);
    char msg[64];
    int n = snprintf(msg, sizeof msg, "parent: child exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    if (write(1, msg, (size_t)n) != n) return 3;
    return 0;
}
