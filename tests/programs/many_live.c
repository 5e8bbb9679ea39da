/* N blocks of 16 bytes live at once, then half freed and allocated again,
 * then all freed (tests/tests/reliability_load.rs). Prints its peak
 * resident set (VmHWM) on stderr before it frees the last of them, as
 * "VmHWM_kB <n>". Usage: many_live N */
#include <stdio.h>
#include <stdlib.h>

#include "proc_status.h"

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000;
    void **p = malloc((size_t)n * sizeof *p);
    if (!p) return 2;
    for (long i = 0; i < n; i++)
        if (!(p[i] = malloc(16))) return 3;
    for (long i = 0; i < n; i += 2) free(p[i]);
    for (long i = 0; i < n; i += 2)
        if (!(p[i] = malloc(16))) return 3;
    fprintf(stderr, "VmHWM_kB %ld\n", status_kib("VmHWM"));
    for (long i = 0; i < n; i++) free(p[i]);
    free(p);
    printf("many_live done: %ld blocks\n", n);
    return 0;
}
