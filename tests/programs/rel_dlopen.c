/* dlopen/dlclose of a library that allocates (tests/tests/reliability_process.rs).
 *
 * LOADS times: dlopen(LIB), call rel_lib_work(i) (3 mallocs through
 * rel_lib_outer -> rel_lib_inner, freed), dlclose. Then one more load that
 * calls rel_lib_hot(1000) (1000 mallocs in rel_lib_hot_inner, freed) and
 * dlcloses too. After the last dlclose the program still allocates
 * (rel_after_close: 10 x malloc) and exits normally.
 * Output: dlopen done: <loads> loads, checksum <sum>
 * Usage: rel_dlopen LIB [LOADS]
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define NOIPA __attribute__((noinline, noclone))
volatile unsigned long sink;

NOIPA void rel_after_close(void) {
    void *p[10];
    for (int i = 0; i < 10; i++) p[i] = malloc(200);
    for (int i = 0; i < 10; i++) free(p[i]);
    sink++;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    int loads = argc > 2 ? atoi(argv[2]) : 1000;
    long sum = 0;
    for (int i = 0; i < loads; i++) {
        void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
        long (*work)(int) = (long (*)(int))dlsym(h, "rel_lib_work");
        if (!work) return 1;
        sum += work(i);
        if (dlclose(h) != 0) { fprintf(stderr, "dlclose: %s\n", dlerror()); return 1; }
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) return 1;
    long (*hot)(int) = (long (*)(int))dlsym(h, "rel_lib_hot");
    if (!hot) return 1;
    sum += hot(1000);
    dlclose(h);
    rel_after_close();
    printf("dlopen done: %d loads, checksum %ld\n", loads + 1, sum);
    return 0;
}
