/* One function with a frame of <argv[1]> MiB on the main thread's stack
 * (as a Fortran routine with large automatic arrays under
 * `ulimit -s unlimited`) calls malloc: the stack above that frame, down to
 * main, must still be captured. */
#include <alloca.h>
#include <stdio.h>
#include <stdlib.h>

void *volatile keep;

__attribute__((noinline)) void alloc_below_big_frame(void) {
    keep = malloc(100);
    free(keep);
}

__attribute__((noinline)) void big_frame(size_t bytes) {
    volatile char *a = alloca(bytes);
    /* Top down, a page at a time: the stack grows as on any kernel. */
    for (size_t i = 0; i < bytes; i += 4096) a[bytes - 1 - i] = 0;
    alloc_below_big_frame();
    a[0] = 1;
}

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 1;
    /* A first event up here, so the tracer meets this thread at main's
     * depth. */
    keep = malloc(10);
    free(keep);
    big_frame(mib << 20);
    puts("ok");
    return 0;
}
