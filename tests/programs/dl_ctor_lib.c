/* A library whose constructor allocates, built -O2 without frame pointers
 * by tests/tests/reliability_process.rs and loaded by dl_ctor_main.c with
 * dlopen: the constructor runs inside dlopen, before the tracer could have
 * rescanned the loaded objects after dlopen returned.
 *
 *   dl_ctor_init -> dl_ctor_alloc -> malloc(DL_CTOR_BYTES), kept until the
 *   destructor (dlclose) frees it.
 */
#include <stdlib.h>
#include <string.h>

#define NOIPA __attribute__((noinline, noclone))
#define DL_CTOR_BYTES 4242

static char *table;
volatile long dl_ctor_sink;

NOIPA static char *dl_ctor_alloc(void) {
    char *p = malloc(DL_CTOR_BYTES);
    if (p) memset(p, 3, DL_CTOR_BYTES);
    return p;
}

__attribute__((constructor)) NOIPA static void dl_ctor_init(void) {
    table = dl_ctor_alloc();
    /* Work after the call, so it is no tail call. */
    dl_ctor_sink += table ? table[7] : -1;
}

__attribute__((destructor)) static void dl_ctor_fini(void) { free(table); }

long dl_ctor_value(void) { return table ? table[0] : -1; }
