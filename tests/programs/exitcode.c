/* Allocates a little, prints a line and exits with the code given (default
 * 7): exit-code passthrough of `wmhcct run` and of the preload. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static void *work(void) {
    void *p = malloc(1000);
    void *q = calloc(10, 10);
    free(q);
    return p;
}

int main(int argc, char **argv) {
    void *volatile p = work();
    (void)p;
    printf("exiting with %d\n", argc > 1 ? atoi(argv[1]) : 7);
    return argc > 1 ? atoi(argv[1]) : 7;
}
