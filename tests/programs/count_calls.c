/* An independent count of the allocator calls a program makes, for
 * tests/tests/mpi.rs: preloaded alone (without libwmhcct.so), it counts
 * every call of the ten allocator entry points that reaches it (the
 * program's, its libraries', the dynamic loader's) and forwards it to
 * glibc; at the entry of MPI_Finalize, the instant the tracer takes its
 * profile, it prints `count_calls <function> <calls>` for each. */
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stddef.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

enum { MALLOC, CALLOC, REALLOC, FREE, POSIX_MEMALIGN, ALIGNED_ALLOC, MEMALIGN, VALLOC, PVALLOC, REALLOCARRAY, N };
static const char *names[N] = {"malloc", "calloc", "realloc", "free", "posix_memalign",
                               "aligned_alloc", "memalign", "valloc", "pvalloc", "reallocarray"};
static unsigned long calls[N];
static void count(int f) { __atomic_fetch_add(&calls[f], 1, __ATOMIC_RELAXED); }

void *malloc(size_t n) { count(MALLOC); return __libc_malloc(n); }
void *calloc(size_t k, size_t n) { count(CALLOC); return __libc_calloc(k, n); }
void *realloc(void *p, size_t n) { count(REALLOC); return __libc_realloc(p, n); }
void free(void *p) { count(FREE); __libc_free(p); }
void *memalign(size_t a, size_t n) { count(MEMALIGN); return __libc_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { count(ALIGNED_ALLOC); return __libc_memalign(a, n); }
void *valloc(size_t n) { count(VALLOC); return __libc_valloc(n); }
void *pvalloc(size_t n) { count(PVALLOC); return __libc_pvalloc(n); }
int posix_memalign(void **r, size_t a, size_t n) {
    count(POSIX_MEMALIGN);
    if (a == 0 || (a & (a - 1)) || a % sizeof(void *)) return EINVAL;
    void *p = __libc_memalign(a, n);
    if (!p) return ENOMEM;
    *r = p;
    return 0;
}
void *reallocarray(void *p, size_t k, size_t n) {
    count(REALLOCARRAY);
    size_t b;
    if (__builtin_mul_overflow(k, n, &b)) { errno = ENOMEM; return NULL; }
    return __libc_realloc(p, b);
}

int MPI_Finalize(void) {
    unsigned long now[N];
    for (int f = 0; f < N; f++) now[f] = __atomic_load_n(&calls[f], __ATOMIC_RELAXED);
    char line[2048];
    int len = 0;
    for (int f = 0; f < N; f++)
        len += snprintf(line + len, sizeof line - len, "count_calls %s %lu\n", names[f], now[f]);
    if (write(2, line, len) < 0) return MPI_ERR_OTHER;
    return PMPI_Finalize();
}
