/* Known allocation pattern for the end-to-end tests (tests/tests/pattern.rs).
 *
 *   main -> path_a -> leaf_a : 1000 x malloc(32)        (freed at the end)
 *   main -> path_b -> leaf_b :  100 x malloc(4096)      (freed before path_c)
 *   main -> path_c -> leaf_c :   10 x calloc(1, 1 MiB)  (leaked: 10 MiB)
 *
 * Order: a (live 32000), b (live 32000 + 409600), free b, c (live 32000 +
 * 10 MiB = the peak), free a. So peak = 32000 + 10485760 = 10517760 bytes,
 * leak = 10485760 bytes, malloc = 1100, calloc = 10, free = 1100.
 *
 * No stdio at all: glibc makes no hidden allocation, so the totals are exact.
 * The one output line goes through write(2). Every function is noinline and
 * noclone, and no call is a tail call, so the stacks are exact at -O2 too.
 */
#include <stdlib.h>
#include <unistd.h>

#define NOIPA __attribute__((noinline, noclone, used))

#define NA 1000
#define NB 100
#define NC 10
#define SA 32
#define SB 4096
#define SC (1024 * 1024)

static char *blocks_a[NA];
static char *blocks_b[NB];
char *blocks_c[NC]; /* global: the leak stays reachable, as in real codes */
volatile unsigned long sink;

NOIPA void leaf_a(void) {
    for (int i = 0; i < NA; i++) {
        blocks_a[i] = malloc(SA);
        blocks_a[i][0] = (char)i;
    }
}
NOIPA void leaf_b(void) {
    for (int i = 0; i < NB; i++) {
        blocks_b[i] = malloc(SB);
        blocks_b[i][0] = (char)i;
    }
}
NOIPA void leaf_c(void) {
    for (int i = 0; i < NC; i++) {
        blocks_c[i] = calloc(1, SC);
        blocks_c[i][SC - 1] = (char)i;
    }
}
NOIPA void path_a(void) { leaf_a(); sink += (unsigned long)blocks_a[0][0]; }
NOIPA void path_b(void) { leaf_b(); sink += (unsigned long)blocks_b[0][0]; }
NOIPA void path_c(void) { leaf_c(); sink += (unsigned long)blocks_c[0][0]; }

NOIPA static void free_b(void) {
    for (int i = 0; i < NB; i++) free(blocks_b[i]);
}
NOIPA static void free_a(void) {
    for (int i = 0; i < NA; i++) free(blocks_a[i]);
}

int main(void) {
    path_a();
    path_b();
    free_b();
    path_c();
    free_a();
    static const char msg[] = "pattern done: peak 10517760 leak 10485760\n";
    if (write(1, msg, sizeof msg - 1) < 0) return 3;
    return sink == 12345 ? 1 : 0;
}
