/* A library that allocates in its constructor and frees in its destructor,
 * which also allocates (tests/tests/reliability_process.rs). glibc runs
 * this destructor after the tracer's: the tracer's report must still come
 * after it. */
#include <stdlib.h>

#define NOIPA __attribute__((noinline, noclone))

static void *kept[20];

NOIPA static void dtor_ctor_keep(void) {
    for (int i = 0; i < 20; i++) kept[i] = malloc(100);
}

NOIPA static void dtor_work(void) {
    for (int i = 0; i < 30; i++) {
        void *volatile p = malloc(200);
        free(p);
    }
}

__attribute__((constructor)) static void dtor_lib_start(void) { dtor_ctor_keep(); }

__attribute__((destructor)) static void dtor_lib_end(void) {
    dtor_work();
    for (int i = 0; i < 20; i++) free(kept[i]);
}

void dtor_lib_linked(void) {}
