/* 100 allocations of 100 sizes, each freed; prints "ok" and exits 7. Its
 * report (about 42 KiB) is written sparsely by libhdf5: the full-disk test
 * of tests/tests/reliability_faults.rs, where a report cut short used to be
 * sealed and said written. */
#include <stdio.h>
#include <stdlib.h>

int main(void) {
    for (int i = 0; i < 100; i++) {
        char *volatile p = malloc(10 + i);
        p[0] = 1;
        free(p);
    }
    printf("ok\n");
    return 7;
}
