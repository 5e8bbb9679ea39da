/* dlopen/dlclose of a library that allocates (tests/tests/reliability_process.rs).
 *
 * LOADS times: dlopen(LIB), call rel_lib_work(i) (3 mallocs through
 * rel_lib_outer -> rel_lib_inner, freed), dlclose. Then one more load that
 * calls rel_lib_hot(1000) (1000 mallocs in rel_lib_hot_inner, freed) and
 * dlcloses too. After the last dlclose the program still allocates
 * (rel_after_close: 10 x malloc) and exits normally.
 * Output: dlopen done: <loads> loads, checksum <sum>
 * Usage: rel_dlopen LIB [LOADS [move]]
 *
 * With `move`, after each dlclose the first page where the library was is
 * kept mapped (PROT_NONE), so the next dlopen must load it at another
 * address; the output then also says at how many distinct addresses it
 * was loaded ("loaded at <n> addresses").
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

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
    int move = argc > 3 && strcmp(argv[3], "move") == 0;
    void *bases[64];
    int nbases = 0;
    long sum = 0;
    for (int i = 0; i < loads; i++) {
        void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
        long (*work)(int) = (long (*)(int))dlsym(h, "rel_lib_work");
        if (!work) return 1;
        sum += work(i);
        Dl_info info;
        void *base = move && dladdr((void *)work, &info) ? info.dli_fbase : NULL;
        if (dlclose(h) != 0) { fprintf(stderr, "dlclose: %s\n", dlerror()); return 1; }
        if (base) {
            int known = 0;
            for (int k = 0; k < nbases; k++) known |= bases[k] == base;
            if (!known && nbases < 64) bases[nbases++] = base;
            /* Keep the library's first page taken: the next load goes elsewhere. */
            mmap(base, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        }
    }
    if (move) printf("loaded at %d addresses\n", nbases);
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
