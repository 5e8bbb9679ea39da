/* Four contexts that each lead a different order of `wmhcct report --by`
 * (tests/tests/cli.rs):
 *   sk_many_small:  1000 x malloc(16), each freed     -> most calls
 *   sk_churn:       100 x malloc(100 KiB), each freed -> most bytes
 *   sk_peak_holder: 4 x malloc(1 MiB) held together   -> the heap's peak
 *   sk_leaker:      3 x malloc(1000), never freed     -> the only leak
 * Writes with write(2), so stdio's buffer is no leak of its own.
 * -DCHURN=N makes sk_churn allocate N times instead, -DPEAK_MIB=N has
 * sk_peak_holder hold N blocks of 1 MiB and -DLEAKS=N has sk_leaker leak N
 * blocks (`wmhcct diff`, its limits). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOIPA __attribute__((noinline, noclone))

#ifndef CHURN
#define CHURN 100
#endif
#ifndef PEAK_MIB
#define PEAK_MIB 4
#endif
#ifndef LEAKS
#define LEAKS 3
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
    char *p[PEAK_MIB];
    for (int i = 0; i < PEAK_MIB; i++) {
        p[i] = malloc(1 << 20);
        memset(p[i], i, 1 << 20);
    }
    for (int i = 0; i < PEAK_MIB; i++) {
        sink += p[i][i];
        free(p[i]);
    }
}

static void *kept[LEAKS];

NOIPA static void sk_leaker(void) {
    for (int i = 0; i < LEAKS; i++) {
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
