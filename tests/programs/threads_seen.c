/* Allocates, then prints how many threads the process has ("threads=N")
 * and its address space now ("vmsize_kib=N"; not the peak, which the
 * tracer's start-up probe for room sets):
 * with WMHCCT_COLLECTOR=auto the tracer's collector thread is there only
 * when the process has a spare CPU (tests/tests/collector_thread.rs). */
#include <stdio.h>
#include <stdlib.h>
#include "proc_status.h"

/* Through a volatile pointer, so the compiler keeps every malloc/free. */
static char *volatile sink;

int main(void) {
    long sum = 0;
    for (int i = 0; i < 1000; i++) {
        sink = malloc(64 + i);
        sink[0] = (char)i;
        sum += sink[0];
        free(sink);
    }
    printf("threads=%ld vmsize_kib=%ld sum=%ld\n", status_kib("Threads"),
           status_kib("VmSize"), sum);
    return 0;
}
