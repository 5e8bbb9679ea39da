/* Contexts whose plot labels read alike unless told apart: one wrapper
 * called from two lines of main, and one recursion ending in an allocation
 * at each of many depths. Sizes are small (bytes, not MiB). */
#include <stdlib.h>

#include "say.h"

static void *volatile keep;

__attribute__((noinline)) static void site_c(size_t n) {
    keep = malloc(n);
    free(keep);
}

__attribute__((noinline)) static void rec(int depth) {
    if (depth <= 1) {
        keep = malloc(16);
        free(keep);
        return;
    }
    rec(depth - 1);
    __asm__ volatile("" ::: "memory"); /* no tail call */
}

int main(int argc, char **argv) {
    int depths = argc > 1 ? atoi(argv[1]) : 45;
    for (int i = 0; i < 3; i++)
        site_c(300);
    site_c(100);
    for (int d = 1; d <= depths; d++)
        for (int k = 0; k < d; k++)
            rec(d);
    say("done\n");
    say_flush();
    return 0;
}
