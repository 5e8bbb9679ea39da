/* The shared library of stripped_main.c (tests/tests/symbols.rs), built with
 * -shared -fPIC -fno-toplevel-reorder and then stripped (`strip --strip-all` keeps only .dynsym).
 *
 *   stripped_api(n):  the exported function, defined first
 *   stripped_hidden_worker(n):  static, defined after it, so it lies past
 *       the end of stripped_api in the text: n x malloc(4242), freed
 * Returns a checksum so the calls cannot be optimised away.
 */
#include <stdlib.h>
#include <string.h>

#define NOIPA __attribute__((noinline, noclone))

static NOIPA long stripped_hidden_worker(int n);

NOIPA long stripped_api(int n) {
    long s = stripped_hidden_worker(n);
    return s + 1; /* not a tail call: stripped_api keeps its frame */
}

static NOIPA long stripped_hidden_worker(int n) {
    long sum = 0;
    for (int i = 0; i < n; i++) {
        char *p = malloc(4242);
        if (!p) return -1;
        memset(p, i, 4242);
        sum += p[i % 4242];
        free(p);
    }
    return sum;
}
