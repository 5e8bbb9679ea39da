/* A program that brings its own allocator (tests/tests/reliability_faults.rs):
 * malloc, free, calloc, realloc, posix_memalign, aligned_alloc, memalign,
 * valloc, pvalloc and malloc_usable_size are defined here, in the
 * executable (a bump allocator over a static pool with a size header;
 * free does nothing), so they take precedence over every shared library,
 * libc's calls and libwmhcct.so's exports included.
 * Output: own allocator: <n> calls, checksum <sum>
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static _Alignas(64) unsigned char pool[64 << 20];
static size_t used;
static unsigned long calls;

static void *bump(size_t align, size_t size) {
    calls++;
    if (align < 16) align = 16;
    size_t start = (used + 16 + align - 1) & ~(align - 1);
    if (size > sizeof pool || start + size > sizeof pool) {
        errno = ENOMEM;
        return NULL;
    }
    ((size_t *)(pool + start))[-1] = size;
    used = start + size;
    return pool + start;
}

void *malloc(size_t n) { return bump(16, n); }
void free(void *p) { (void)p; }
void *calloc(size_t n, size_t s) {
    if (s && n > SIZE_MAX / s) { errno = ENOMEM; return NULL; }
    void *p = bump(16, n * s);
    if (p) memset(p, 0, n * s);
    return p;
}
size_t malloc_usable_size(void *p) { return p ? ((size_t *)p)[-1] : 0; }
void *realloc(void *old, size_t n) {
    void *p = bump(16, n);
    if (p && old) {
        size_t o = malloc_usable_size(old);
        memcpy(p, old, o < n ? o : n);
    }
    return p;
}
int posix_memalign(void **out, size_t a, size_t n) {
    void *p = bump(a, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
void *aligned_alloc(size_t a, size_t n) { return bump(a, n); }
void *memalign(size_t a, size_t n) { return bump(a, n); }
void *valloc(size_t n) { return bump(4096, n); }
void *pvalloc(size_t n) { return bump(4096, (n + 4095) & ~(size_t)4095); }

int main(void) {
    unsigned long sum = 0;
    for (int i = 0; i < 1000; i++) {
        char *p = malloc(10 + i);
        memset(p, i, 10 + i);
        p = realloc(p, 20 + i);
        sum += (unsigned char)p[5];
        free(p);
    }
    /* stdio allocates its buffer through our malloc too. */
    printf("own allocator: %lu calls, checksum %lu\n", calls, sum);
    return 0;
}
