/* The shared library of rel_dlopen.c (built with -shared -fPIC by the test).
 *
 *   rel_lib_work(i):  rel_lib_outer -> rel_lib_inner -> 3 x malloc, freed
 *   rel_lib_hot(n):   rel_lib_hot_inner -> n x malloc(48), freed
 * Both return a checksum so the calls cannot be optimised away.
 */
#include <stdlib.h>
#include <string.h>

#define NOIPA __attribute__((noinline, noclone))

NOIPA void *rel_lib_inner(size_t size) {
    void *p = malloc(size);
    if (p) memset(p, 7, size);
    return p;
}

NOIPA long rel_lib_outer(int i) {
    long sum = 0;
    void *p[3];
    for (int k = 0; k < 3; k++) {
        p[k] = rel_lib_inner(32 + (size_t)(i % 64) + (size_t)k);
        sum += ((char *)p[k])[0];
    }
    for (int k = 0; k < 3; k++) free(p[k]);
    return sum;
}

long rel_lib_work(int i) {
    long s = rel_lib_outer(i);
    return s + 1;
}

NOIPA void *rel_lib_hot_inner(void) {
    void *p = malloc(48);
    if (p) memset(p, 9, 48);
    return p;
}

long rel_lib_hot(int n) {
    long sum = 0;
    void **keep = calloc((size_t)n, sizeof *keep);
    for (int i = 0; i < n; i++) {
        keep[i] = rel_lib_hot_inner();
        sum += ((char *)keep[i])[0];
    }
    for (int i = 0; i < n; i++) free(keep[i]);
    free(keep);
    return sum + 1;
}
