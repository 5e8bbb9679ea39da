/* Every allocator entry point the tracer interposes, including the failure
 * cases (tests/tests/allocators.rs). The program prints what it observed
 * (NULL or not, errno, return codes, alignment, malloc_usable_size) and at
 * the end one line per entry point with the number of calls it made and the
 * bytes of the successful ones:
 *
 *   CALLS <function> <calls> <bytes>
 *
 * The test runs it with and without the tracer and compares stdout, then
 * compares the CALLS lines with the report's totals. Output goes through
 * snprintf into a static buffer and write(2): no stdio stream, so glibc
 * makes no allocation of its own and the totals are exactly these calls.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "say.h"

enum { MALLOC, CALLOC, REALLOC, FREE, POSIX_MEMALIGN, ALIGNED_ALLOC, MEMALIGN, VALLOC, PVALLOC, REALLOCARRAY, NKINDS };
static const char *names[NKINDS] = {"malloc", "calloc", "realloc", "free", "posix_memalign",
                                    "aligned_alloc", "memalign", "valloc", "pvalloc", "reallocarray"};
static unsigned long calls[NKINDS], bytes[NKINDS];

/* Sizes go through volatiles so the compiler folds nothing. */
static volatile size_t vmax = SIZE_MAX;
/* Through a volatile: compilers fold realloc(NULL, n) into malloc(n). */
static void *volatile null_block = NULL;
static volatile size_t vhalf = SIZE_MAX / 2 + 1;

static void *count(int kind, void *p, size_t size) {
    calls[kind]++;
    if (p) bytes[kind] += size;
    return p;
}

static void show(const char *what, void *p, int err) {
    say("%s: %s errno=%s\n", what, p ? "ptr" : "NULL", err == 0 ? "0" : strerrorname_np(err) ? strerrorname_np(err) : "?");
}

static int aligned(void *p, size_t a) { return ((uintptr_t)p % a) == 0; }

int main(void) {
    long page = sysconf(_SC_PAGESIZE);
    void *p, *q;
    int rc;

    /* malloc */
    errno = 0; p = count(MALLOC, malloc(100), 100); show("malloc(100)", p, errno);
    say("malloc_usable_size(malloc(100)) >= 100: %d\n", malloc_usable_size(p) >= 100);
    memset(p, 0xab, 100);
    errno = EBADF; free(p); calls[FREE]++;
    say("free keeps errno: %d\n", errno == EBADF);
    errno = 0; p = count(MALLOC, malloc(0), 0); show("malloc(0)", p, errno);
    free(p); calls[FREE]++;
    errno = 0; p = count(MALLOC, malloc(vmax), vmax); show("malloc(SIZE_MAX)", p, errno);
    errno = EEXIST; p = count(MALLOC, malloc(24), 24);
    say("malloc success keeps errno: %d\n", errno == EEXIST);
    free(p); calls[FREE]++;

    /* calloc */
    errno = 0; p = count(CALLOC, calloc(10, 100), 1000); show("calloc(10,100)", p, errno);
    { int zero = 1; for (int i = 0; i < 1000; i++) zero &= ((unsigned char *)p)[i] == 0; say("calloc zeroed: %d\n", zero); }
    free(p); calls[FREE]++;
    errno = 0; p = count(CALLOC, calloc(vhalf, 4), 0); show("calloc(SIZE_MAX/2+1,4) overflow", p, errno);
    errno = 0; p = count(CALLOC, calloc(vmax, 1), 0); show("calloc(SIZE_MAX,1)", p, errno);

    /* realloc */
    errno = 0; p = count(REALLOC, realloc(null_block, 64), 64); show("realloc(NULL,64)", p, errno);
    memset(p, 7, 64);
    errno = 0; p = count(REALLOC, realloc(p, 100000), 100000); show("realloc(p,100000)", p, errno);
    say("realloc kept contents: %d\n", ((unsigned char *)p)[63] == 7);
    errno = 0; q = count(REALLOC, realloc(p, vmax), vmax); show("realloc(p,SIZE_MAX)", q, errno);
    errno = 0; q = count(REALLOC, realloc(p, 16), 16); show("realloc(p,16)", q, errno);
    p = q;
    errno = 0; q = count(REALLOC, realloc(p, 0), 0); show("realloc(p,0)", q, errno);
    if (q) { free(q); calls[FREE]++; }

    /* reallocarray */
    errno = 0; p = count(REALLOCARRAY, reallocarray(null_block, 10, 8), 80); show("reallocarray(NULL,10,8)", p, errno);
    errno = 0; q = count(REALLOCARRAY, reallocarray(p, vhalf, 4), 0); show("reallocarray(p,overflow)", q, errno);
    errno = 0; q = count(REALLOCARRAY, reallocarray(p, 20, 8), 160); show("reallocarray(p,20,8)", q, errno);
    free(q); calls[FREE]++;

    /* posix_memalign: returns the error, leaves errno and *out alone */
    p = (void *)0x1234;
    errno = 0; rc = posix_memalign(&p, 64, 1000); count(POSIX_MEMALIGN, rc == 0 ? p : NULL, 1000);
    say("posix_memalign(64,1000): rc=%d aligned=%d errno=%d\n", rc, rc == 0 && aligned(p, 64), errno);
    free(p); calls[FREE]++;
    p = (void *)0x1234;
    errno = 0; rc = posix_memalign(&p, 3, 64); count(POSIX_MEMALIGN, rc == 0 ? p : NULL, 64);
    say("posix_memalign(3,64): rc=%s out unchanged=%d errno=%d\n", rc == EINVAL ? "EINVAL" : "other", p == (void *)0x1234, errno);
    errno = 0; rc = posix_memalign(&p, 4, 64); count(POSIX_MEMALIGN, rc == 0 ? p : NULL, 64);
    say("posix_memalign(4,64): rc=%s errno=%d\n", rc == EINVAL ? "EINVAL" : "other", errno);
    errno = 0; rc = posix_memalign(&p, 64, vmax); count(POSIX_MEMALIGN, rc == 0 ? p : NULL, vmax);
    say("posix_memalign(64,SIZE_MAX): rc=%s errno=%d\n", rc == ENOMEM ? "ENOMEM" : "other", errno);

    /* aligned_alloc */
    errno = 0; p = count(ALIGNED_ALLOC, aligned_alloc(256, 512), 512); show("aligned_alloc(256,512)", p, errno);
    say("aligned_alloc aligned: %d\n", aligned(p, 256));
    free(p); calls[FREE]++;
    errno = 0; p = count(ALIGNED_ALLOC, aligned_alloc(64, vmax), vmax); show("aligned_alloc(64,SIZE_MAX)", p, errno);

    /* memalign */
    errno = 0; p = count(MEMALIGN, memalign(128, 300), 300); show("memalign(128,300)", p, errno);
    say("memalign aligned: %d\n", aligned(p, 128));
    free(p); calls[FREE]++;
    errno = 0; p = count(MEMALIGN, memalign(vhalf + 1, 16), 16); show("memalign(huge alignment)", p, errno);

    /* valloc, pvalloc */
    errno = 0; p = count(VALLOC, valloc(1000), 1000); show("valloc(1000)", p, errno);
    say("valloc page aligned: %d\n", aligned(p, (size_t)page));
    free(p); calls[FREE]++;
    errno = 0; p = count(VALLOC, valloc(vmax), vmax); show("valloc(SIZE_MAX)", p, errno);
    errno = 0; p = count(PVALLOC, pvalloc(1000), 1000); show("pvalloc(1000)", p, errno);
    say("pvalloc page aligned: %d usable >= page: %d\n", aligned(p, (size_t)page), malloc_usable_size(p) >= (size_t)page);
    free(p); calls[FREE]++;
    errno = 0; p = count(PVALLOC, pvalloc(vmax), vmax); show("pvalloc(SIZE_MAX)", p, errno);

    /* free(NULL) is a call too */
    errno = ENOENT; free(null_block); calls[FREE]++;
    say("free(NULL) keeps errno: %d\n", errno == ENOENT);

    for (int k = 0; k < NKINDS; k++) say("CALLS %s %lu %lu\n", names[k], calls[k], bytes[k]);
    if (say_flush() != 0) return 3;
    return 0;
}
