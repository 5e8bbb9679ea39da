/* A library that allocates in its constructor and frees in its destructor,
 * which also allocates (tests/tests/reliability_process.rs). glibc runs
 * this destructor after the tracer's: the tracer's report must still come
 * after it. Its destructor ends with what main names (dtor_main.c):
 * fflush(NULL), fcloseall() or _exit(5), which writes the tracer's report
 * then. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOIPA __attribute__((noinline, noclone))

static void *kept[20];
static const char *at_end = "";

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
    if (!strcmp(at_end, "fflush")) fflush(NULL);
    if (!strcmp(at_end, "fcloseall")) fcloseall();
    if (!strcmp(at_end, "_exit")) _exit(5);
}

void dtor_lib_linked(const char *end) { at_end = end; }
