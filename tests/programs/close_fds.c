/* Writes a line, allocates, then closes its standard output (as coreutils
 * do at exit) or, with the argument `all`, every descriptor from 3 up (as
 * a daemon does): the report a tracer writes "into stdout" must not be
 * lost with the descriptor, nor go into whatever file takes its number
 * next. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int all = argc > 1 && strcmp(argv[1], "all") == 0;
    char *p = malloc(100);
    snprintf(p, 100, "output of close_fds\n");
    fputs(p, stdout);
    free(p);
    fflush(stdout);
    if (all) {
        for (int fd = 3; fd < 4096; fd++) close(fd);
    } else {
        close(1);
    }
    /* Descriptors opened after the closes take the lowest numbers free. */
    FILE *f = tmpfile();
    for (int i = 0; i < 10; i++) free(malloc(64 + i));
    if (f) fclose(f);
    return 0;
}
