/* Allocates, then prints how many threads the process has ("threads=N"):
 * with WMHCCT_COLLECTOR=auto the tracer's collector thread is there only
 * when the process has a spare CPU (tests/tests/collector_thread.rs). */
#include <stdio.h>
#include <stdlib.h>
#include "proc_status.h"

int main(void) {
    long sum = 0;
    for (int i = 0; i < 1000; i++) {
        char *p = malloc(64 + i);
        p[0] = (char)i;
        sum += p[0];
        free(p);
    }
    printf("threads=%ld sum=%ld\n", status_kib("Threads"), sum);
    return 0;
}
