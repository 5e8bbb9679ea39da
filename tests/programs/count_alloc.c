/* Preloaded after libwmhcct.so by a test: counts the bytes the allocator
 * family is asked for from count_start() on; the program finds count_start
 * and count_bytes with dlsym. Everything goes on to glibc. */
#include <stddef.h>
#include <string.h>
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);
static volatile int on;
static unsigned long total;
static void add(size_t n) { if (on) __atomic_fetch_add(&total, n, __ATOMIC_RELAXED); }
void count_start(void) { total = 0; on = 1; }
unsigned long count_bytes(void) { return __atomic_load_n(&total, __ATOMIC_RELAXED); }
void *malloc(size_t n) { add(n); return __libc_malloc(n); }
void *calloc(size_t k, size_t n) { add(k * n); return __libc_calloc(k, n); }
void *realloc(void *p, size_t n) { add(n); return __libc_realloc(p, n); }
void free(void *p) { __libc_free(p); }
void *memalign(size_t a, size_t n) { add(n); return __libc_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { add(n); return __libc_memalign(a, n); }
int posix_memalign(void **r, size_t a, size_t n) {
    add(n);
    void *p = __libc_memalign(a, n);
    if (!p) return 12;
    *r = p;
    return 0;
}
