/* dlopen LIB (dl_ctor_lib.c) LOADS times, calling its dl_ctor_value and
 * dlclosing it each time; prints the sum (tests/tests/reliability_process.rs).
 * Usage: dl_ctor_main LIB LOADS */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define NOIPA __attribute__((noinline, noclone))

NOIPA static long dl_ctor_load(const char *lib) {
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        exit(1);
    }
    long (*value)(void) = (long (*)(void))dlsym(h, "dl_ctor_value");
    long v = value ? value() : -100;
    dlclose(h);
    return v;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int loads = atoi(argv[2]);
    long sum = 0;
    for (int i = 0; i < loads; i++) sum += dl_ctor_load(argv[1]);
    printf("loaded %d times, sum %ld\n", loads, sum);
    return 0;
}
