/* one_site: every allocation from one call site at one stack height
 * (tests/tests/heuristic.rs). With a heuristic unwind mode each stack after
 * a reseed is the previous one, which the tracer confirms by reading the
 * return-address slots without an unwinding step. */
#include <stdio.h>
#include <stdlib.h>

#define EVENTS 20000

static volatile unsigned long sink;

static void __attribute__((noinline)) leaf(int i) {
    unsigned char *p = malloc(32 + (i & 1));
    p[0] = (unsigned char)i;
    sink += p[0];
    free(p);
}

static void __attribute__((noinline)) middle(int i) {
    leaf(i);
    sink++;
}

static void __attribute__((noinline)) outer(int i) {
    middle(i);
    sink++;
}

int main(void) {
    for (int i = 0; i < EVENTS; i++) outer(i);
    printf("one_site done %d\n", EVENTS);
    return 0;
}
