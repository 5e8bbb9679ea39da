/* Which allocator serves each allocator entry point
 * (tests/tests/reliability_faults.rs, jemalloc_preloaded_before_or_after).
 *
 * jemalloc's per-thread counters (mallctl "thread.allocated" and
 * "thread.deallocated", looked up with dlsym so the program also runs
 * without jemalloc) tell whether a block came from jemalloc and went back
 * to it: a call served by another allocator leaves them unchanged.
 *
 *   rel_nextalloc std    the standard entry points jemalloc defines
 *   rel_nextalloc extra  pvalloc and reallocarray, which jemalloc lacks
 *
 * One line per call: "<call>: <ptr|NULL> errno=<e> jemalloc=<0|1> ..." and
 * at the end, as in allocators.c, "CALLS <function> <calls> <bytes>". A
 * block that is not jemalloc's is neither measured nor freed (jemalloc's
 * malloc_usable_size and free would crash on it) and the lines say so. Output goes through snprintf into a static
 * buffer and write(2): no stdio stream, no allocation of the program's own.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "say.h"

typedef int (*mallctl_fn)(const char *, void *, size_t *, void *, size_t);
typedef size_t (*sallocx_fn)(const void *, int);
static mallctl_fn mallctl_p;
static sallocx_fn sallocx_p;

static uint64_t counter(const char *name) {
    uint64_t v = 0;
    size_t len = sizeof v;
    if (mallctl_p(name, &v, &len, NULL, 0) != 0) return 0;
    return v;
}

enum { MALLOC, CALLOC, REALLOC, FREE, POSIX_MEMALIGN, ALIGNED_ALLOC, MEMALIGN, VALLOC, PVALLOC, REALLOCARRAY, NKINDS };
static const char *names[NKINDS] = {"malloc", "calloc", "realloc", "free", "posix_memalign",
                                    "aligned_alloc", "memalign", "valloc", "pvalloc", "reallocarray"};
static unsigned long calls[NKINDS], bytes[NKINDS];

static volatile size_t vmax = SIZE_MAX;
static volatile size_t vhalf = SIZE_MAX / 2 + 1;
static void *volatile null_block = NULL;
static long page;

static const char *err_name(int e) {
    return e == 0 ? "0" : strerrorname_np(e) ? strerrorname_np(e) : "?";
}

static uint64_t before;

static void start(void) { before = counter("thread.allocated"); }

/* After an allocation of `size` bytes by `kind`: count it and say whether
 * jemalloc served it (its allocated counter grew by at least `size`). */
static void *made(const char *what, int kind, void *p, size_t size, size_t align) {
    int err = errno;
    uint64_t grew = counter("thread.allocated") - before;
    calls[kind]++;
    if (p) bytes[kind] += size;
    int je = p != NULL && grew >= size;
    say("%s: %s errno=%s jemalloc=%d", what, p ? "ptr" : "NULL", err_name(err), je);
    if (je) {
        size_t usable = malloc_usable_size(p);
        say(" usable>=size=%d aligned=%d", usable >= size, ((uintptr_t)p % align) == 0);
        /* jemalloc's own view of the block agrees with malloc_usable_size. */
        if (sallocx_p) say(" sallocx=usable:%d", sallocx_p(p, 0) == usable);
    }
    say("\n");
    return je ? p : NULL;
}

/* free(p), and whether jemalloc took the block back. */
static void release(const char *what, void *p) {
    if (!p) {
        say("free(%s): skipped, not jemalloc's\n", what);
        return;
    }
    size_t usable = malloc_usable_size(p);
    uint64_t d = counter("thread.deallocated");
    errno = EBADF;
    free(p);
    calls[FREE]++;
    int kept = errno == EBADF;
    say("free(%s): jemalloc=%d keeps errno=%d\n", what, counter("thread.deallocated") - d >= usable, kept);
}

static void standard(void) {
    void *p, *q;
    int rc;

    errno = 0; start(); p = made("malloc(100)", MALLOC, malloc(100), 100, 16);
    if (p) memset(p, 1, 100);
    release("malloc", p);
    errno = 0; start(); p = made("malloc(SIZE_MAX)", MALLOC, malloc(vmax), vmax, 1);

    errno = 0; start(); p = made("calloc(10,100)", CALLOC, calloc(10, 100), 1000, 16);
    if (p) { int zero = 1; for (int i = 0; i < 1000; i++) zero &= ((unsigned char *)p)[i] == 0; say("calloc zeroed: %d\n", zero); }
    release("calloc", p);
    errno = 0; start(); p = made("calloc(overflow)", CALLOC, calloc(vhalf, 4), 0, 1);

    errno = 0; start(); p = made("realloc(NULL,64)", REALLOC, realloc(null_block, 64), 64, 16);
    if (p) {
        memset(p, 7, 64);
        errno = 0; start(); q = made("realloc(p,100000)", REALLOC, realloc(p, 100000), 100000, 16);
        if (q) say("realloc kept contents: %d\n", ((unsigned char *)q)[63] == 7);
        release("realloc", q);
    }

    p = NULL;
    errno = 0; start(); rc = posix_memalign(&p, 64, 1000);
    say("posix_memalign(64,1000): rc=%d\n", rc);
    p = made("posix_memalign(64,1000)", POSIX_MEMALIGN, rc == 0 ? p : NULL, 1000, 64);
    release("posix_memalign", p);
    errno = 0; start(); rc = posix_memalign(&p, 3, 64);
    calls[POSIX_MEMALIGN]++;
    say("posix_memalign(3,64): rc=%s\n", err_name(rc));

    errno = 0; start(); p = made("aligned_alloc(256,512)", ALIGNED_ALLOC, aligned_alloc(256, 512), 512, 256);
    release("aligned_alloc", p);
    errno = 0; start(); p = made("memalign(128,300)", MEMALIGN, memalign(128, 300), 300, 128);
    release("memalign", p);
    errno = 0; start(); p = made("valloc(1000)", VALLOC, valloc(1000), 1000, (size_t)page);
    release("valloc", p);

    errno = ENOENT; free(null_block); calls[FREE]++;
    say("free(NULL) keeps errno: %d\n", errno == ENOENT);
}

/* The entry points jemalloc does not define. */
static void extra(void) {
    void *p, *q;

    errno = 0; start(); p = made("pvalloc(1000)", PVALLOC, pvalloc(1000), 1000, (size_t)page);
    if (p) say("pvalloc usable>=page: %d\n", malloc_usable_size(p) >= (size_t)page);
    release("pvalloc", p);
    errno = 0; start(); p = made("pvalloc(SIZE_MAX)", PVALLOC, pvalloc(vmax), vmax, 1);

    errno = 0; start(); p = made("reallocarray(NULL,10,8)", REALLOCARRAY, reallocarray(null_block, 10, 8), 80, 16);
    if (p) {
        /* Through a volatile: the failed call leaves the block live. */
        void *volatile live = p;
        memset(p, 9, 80);
        errno = 0; q = reallocarray(live, vhalf, 4);
        calls[REALLOCARRAY]++;
        say("reallocarray(p,overflow): %s errno=%s\n", q ? "ptr" : "NULL", err_name(errno));
        errno = 0; start(); q = made("reallocarray(p,2000,8)", REALLOCARRAY, reallocarray(live, 2000, 8), 16000, 16);
        if (q) say("reallocarray kept contents: %d\n", ((unsigned char *)q)[79] == 9);
        release("reallocarray", q);
    }
}

int main(int argc, char **argv) {
    page = sysconf(_SC_PAGESIZE);
    mallctl_p = (mallctl_fn)dlsym(RTLD_DEFAULT, "mallctl");
    sallocx_p = (sallocx_fn)dlsym(RTLD_DEFAULT, "sallocx");
    if (!mallctl_p) {
        say("no jemalloc in this process\n");
    } else if (argc > 1 && strcmp(argv[1], "extra") == 0) {
        extra();
    } else {
        standard();
    }
    for (int k = 0; k < NKINDS; k++) say("CALLS %s %lu %lu\n", names[k], calls[k], bytes[k]);
    if (say_flush() != 0) return 3;
    return 0;
}
