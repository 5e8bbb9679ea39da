/* glibc's debugging allocator (libc_malloc_debug.so.0, preloaded) under the
 * tracer (tests/tests/reliability_faults.rs). It defines malloc & co. only
 * under glibc's symbol versions, not as default definitions.
 *
 *   rel_malloc_debug trace      mtrace() around a fixed set of calls (the
 *                               log goes to $MALLOC_TRACE); prints "done"
 *   rel_malloc_debug overflow   writes one byte past a block and frees it:
 *                               with MALLOC_CHECK_=3 the debugging
 *                               allocator aborts; without it, "survived" */
#include <mcheck.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "overflow") == 0) {
        char *p = malloc(10);
        /* MALLOC_CHECK_ keeps a check byte after the block, derived from
         * the block's address ((a >> 3) ^ (a >> 11), of the chunk or of
         * the block): the byte written past the end must differ from it,
         * or the overflow goes unseen (1 run in 256, with ASLR, when it
         * was always 'x'). */
        uintptr_t m = (uintptr_t)p, c = m - 2 * sizeof(size_t);
        unsigned char past = 'x';
        while (past == (unsigned char)((m >> 3) ^ (m >> 11)) ||
               past == (unsigned char)((c >> 3) ^ (c >> 11)))
            past++;
        memset(p, 'x', 10);
        p[10] = (char)past;
        free(p);
        puts("survived");
        return 0;
    }
    mtrace();
    void *a = malloc(10);
    void *b = calloc(2, 8);
    b = realloc(b, 100);
    void *c = memalign(64, 32);
    void *d = NULL;
    if (posix_memalign(&d, 64, 48) != 0) return 2;
    void *e = aligned_alloc(64, 64);
    free(a);
    free(b);
    free(c);
    free(d);
    free(e);
    void *kept = malloc(33);
    muntrace();
    printf("done %d\n", kept != NULL);
    return 0;
}
