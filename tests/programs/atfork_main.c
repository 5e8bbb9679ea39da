/* Forks three times with atfork_lib's allocating handlers registered;
 * each child allocates once and exits. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

void atfork_lib_linked(void);

int main(void) {
    atfork_lib_linked();
    int done = 0;
    for (int i = 0; i < 3; i++) {
        pid_t p = fork();
        if (p < 0) return 2;
        if (p == 0) {
            void *volatile q = malloc(5);
            free(q);
            exit(7);
        }
        int st = 0;
        waitpid(p, &st, 0);
        done += WIFEXITED(st) && WEXITSTATUS(st) == 7;
    }
    printf("forked 3, %d children exited 7\n", done);
    return 0;
}
