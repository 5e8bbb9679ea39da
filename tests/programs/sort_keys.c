/* Four contexts that each lead a different order of `wmhcct report --by`
 * (tests/tests/cli.rs):
 *   sk_many_small:  1000 x malloc(16), each freed     -> most calls
 *   sk_churn:       100 x malloc(100 KiB), each freed -> most bytes
 *   sk_peak_holder: 4 x malloc(1 MiB) held together   -> the heap's peak
 *   sk_leaker:      3 x malloc(1000), never freed     -> the only leak
 * Writes with write(2), so stdio's buffer is no leak of its own.
 * -DCHURN=N makes sk_churn allocate N times instead (`wmhcct diff`). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOIPA __attribute__((noinline, noclone))

#ifndef CHURN
#define CHURN 100
#endif

static volatile long sink;

NOIPA static void sk_many_small(void) {
    for (int i = 0; i < 1000; i++) {
        char *p = malloc(16);
        p[0] = (char)i;
        sink += p[0];
        free(p);
    }
}

NOIPA static void sk_churn(void) {
    for (int i = 0; i < CHURN; i++) {
        char *p = malloc(100 << 10);
        memset(p, i, 100 << 10);
        sink += p[i];
        free(p);
    }
}

NOIPA static void sk_peak_holder(void) {
    char *p[4];
    for (int i = 0; i < 4; i++) {
        p[i] = malloc(1 << 20);
        memset(p[i], i, 1 << 20);
    }
    for (int i = 0; i < 4; i++) {
        sink += p[i][i];
        free(p[i]);
    }
}

static void *kept[3];

NOIPA static void sk_leaker(void) {
    for (int i = 0; i < 3; i++) {
        kept[i] = malloc(1000);
        memset(kept[i], i, 1000);
    }
}

int main(void) {
    sk_many_small();
    sk_churn();
    sk_peak_holder();
    sk_leaker();
    static const char line[] = "done\n";
    return write(1, line, sizeof line - 1) < 0;
}
