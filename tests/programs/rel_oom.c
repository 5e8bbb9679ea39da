/* Allocation failure, with and without the tracer (tests/tests/reliability_faults.rs).
 *
 * huge:    every allocator entry point with an impossible size (and calloc /
 *          reallocarray with an overflowing product): prints NULL or not,
 *          errno (ENOMEM or not) and return codes; a realloc that fails
 *          keeps the old block intact.
 * exhaust: run under `ulimit -v`: allocate 1 MiB blocks (rel_big) until
 *          malloc returns NULL, then 64-byte blocks (rel_small) until NULL
 *          (at most 4*10^7); prints whether each phase ended with NULL and
 *          errno == ENOMEM, frees everything, then checks that allocation
 *          works again. The block counts depend on the memory left and go to
 *          stderr only, so stdout is the same with and without the tracer.
 * small:   run under `ulimit -v`: 64-byte blocks (rel_small) only, until
 *          NULL (at most 4*10^7), kept in a list; then as exhaust.
 *          With millions of live blocks the tracer's live-block table is
 *          what cannot grow.
 * little:  1000 64-byte blocks, freed (under a limit that leaves the
 *          tracer no room to start).
 * contexts: run under `ulimit -v`: 1 MiB blocks (rel_big) until NULL, 4 of
 *          them freed again, then 3 rounds over 100 000 distinct calling
 *          contexts (rel_ctx0..9, 5 levels deep), each a 32-byte
 *          malloc/free: the tracer's context tree has to grow when the
 *          address space is all but used up. The number of big blocks goes
 *          to stderr ("rel_oom: N big blocks").
 * Usage: rel_oom huge|exhaust|small|little|contexts
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOIPA __attribute__((noinline, noclone))
#define HUGE_SIZE (SIZE_MAX / 2)
#pragma GCC diagnostic ignored "-Walloc-size-larger-than="

static void show(const char *what, void *p, int err) {
    printf("%s: %s errno %s\n", what, p ? "non-NULL" : "NULL",
           err == ENOMEM ? "ENOMEM" : err == 0 ? "0" : "other");
}

NOIPA void *rel_big(void) { return malloc(1 << 20); }
NOIPA void *rel_small(void) { return malloc(64); }

static int huge(void) {
    void *p;
    errno = 0; p = malloc(HUGE_SIZE); show("malloc(SIZE_MAX/2)", p, errno);
    errno = 0; p = calloc(HUGE_SIZE, 4); show("calloc(SIZE_MAX/2, 4)", p, errno);
    errno = 0; p = calloc(1, HUGE_SIZE); show("calloc(1, SIZE_MAX/2)", p, errno);
    char *keep = malloc(32);
    strcpy(keep, "still here");
    errno = 0; p = realloc(keep, HUGE_SIZE); show("realloc(p, SIZE_MAX/2)", p, errno);
    printf("old block after failed realloc: %s\n", keep);
    errno = 0; p = reallocarray(keep, HUGE_SIZE, 4); show("reallocarray(p, SIZE_MAX/2, 4)", p, errno);
    printf("old block after failed reallocarray: %s\n", keep);
    free(keep);
    void *q = (void *)1;
    errno = 0; int rc = posix_memalign(&q, 64, HUGE_SIZE);
    printf("posix_memalign(64, SIZE_MAX/2): rc %s, errno untouched %s\n",
           rc == ENOMEM ? "ENOMEM" : "other", errno == 0 ? "yes" : "no");
    errno = 0; p = aligned_alloc(64, HUGE_SIZE & ~(size_t)63); show("aligned_alloc(64, huge)", p, errno);
    errno = 0; p = memalign(64, HUGE_SIZE); show("memalign(64, SIZE_MAX/2)", p, errno);
    errno = 0; p = valloc(HUGE_SIZE); show("valloc(SIZE_MAX/2)", p, errno);
    errno = 0; p = pvalloc(HUGE_SIZE); show("pvalloc(SIZE_MAX/2)", p, errno);
    errno = 0; p = malloc(100); show("malloc(100) afterwards", p, errno);
    free(p);
    return 0;
}

static int exhaust(void) {
    size_t cap = 1 << 16, n = 0;
    void **big = malloc(cap * sizeof *big);
    int err = 0;
    for (;;) {
        errno = 0;
        void *p = rel_big();
        if (!p) { err = errno; break; }
        if (n == cap) { fprintf(stderr, "too many big blocks\n"); return 1; }
        memset(p, 1, 4096);
        big[n++] = p;
    }
    printf("big blocks: ended with NULL, errno %s\n", err == ENOMEM ? "ENOMEM" : "other");
    fprintf(stderr, "rel_oom: %zu big blocks\n", n);
    size_t scap = 40000000, sn = 0;
    /* The array for small blocks comes from the big blocks' space: free
     * 4 big blocks (4 MiB) and keep the array there. */
    for (int i = 0; i < 4 && n > 0; i++) free(big[--n]);
    void **small = malloc(1 << 22);
    if (!small) { printf("small array: NULL\n"); return 1; }
    scap = (1 << 22) / sizeof *small;
    err = 0;
    for (;;) {
        errno = 0;
        void *p = rel_small();
        if (!p) { err = errno; break; }
        if (sn == scap) break;
        small[sn++] = p;
    }
    printf("small blocks: ended with %s, errno %s\n", sn == scap ? "a full array" : "NULL",
           sn == scap ? "-" : err == ENOMEM ? "ENOMEM" : "other");
    fprintf(stderr, "rel_oom: %zu small blocks\n", sn);
    for (size_t i = 0; i < sn; i++) free(small[i]);
    free(small);
    for (size_t i = 0; i < n; i++) free(big[i]);
    free(big);
    errno = 0;
    void *p = malloc(1 << 20);
    show("malloc(1 MiB) after freeing everything", p, errno);
    free(p);
    return 0;
}

/* The blocks form a list (each holds the previous one's address): no array
 * that would take address space of its own. */
static int small_only(void) {
    size_t sn = 0;
    int err = 0;
    void *head = NULL;
    for (;;) {
        errno = 0;
        void **p = rel_small();
        if (!p) { err = errno; break; }
        *p = head;
        head = p;
        if (++sn == 40000000) break;
    }
    printf("small blocks: ended with %s, errno %s\n", sn == 40000000 ? "a full list" : "NULL", sn == 40000000 ? "-" : err == ENOMEM ? "ENOMEM" : "other");
    fprintf(stderr, "rel_oom: %zu small blocks\n", sn);
    while (head) {
        void *next = *(void **)head;
        free(head);
        head = next;
    }
    errno = 0;
    void *p = malloc(1 << 20);
    show("malloc(1 MiB) after freeing everything", p, errno);
    free(p);
    return 0;
}

static int little(void) {
    long n = 0;
    for (int i = 0; i < 1000; i++) {
        char *p = rel_small();
        if (!p) break;
        p[0] = 1;
        n += p[0];
        free(p);
    }
    printf("little: %ld blocks\n", n);
    return 0;
}

static long ctx_failed;
NOIPA void rel_ctx_leaf(void) {
    char *volatile p = malloc(32);
    if (!p) { ctx_failed++; return; }
    p[0] = 1;
    free(p);
}
/* rel_ctxK(c, d): one of 10^d contexts, by the decimal digits of c. */
#define CTX_DECL(K) NOIPA void rel_ctx##K(long c, int d);
CTX_DECL(0) CTX_DECL(1) CTX_DECL(2) CTX_DECL(3) CTX_DECL(4)
CTX_DECL(5) CTX_DECL(6) CTX_DECL(7) CTX_DECL(8) CTX_DECL(9)
static volatile int ctx_sink;
static void rel_ctx_next(long c, int d) {
    switch (c % 10) {
    case 0: rel_ctx0(c / 10, d - 1); break;
    case 1: rel_ctx1(c / 10, d - 1); break;
    case 2: rel_ctx2(c / 10, d - 1); break;
    case 3: rel_ctx3(c / 10, d - 1); break;
    case 4: rel_ctx4(c / 10, d - 1); break;
    case 5: rel_ctx5(c / 10, d - 1); break;
    case 6: rel_ctx6(c / 10, d - 1); break;
    case 7: rel_ctx7(c / 10, d - 1); break;
    case 8: rel_ctx8(c / 10, d - 1); break;
    default: rel_ctx9(c / 10, d - 1); break;
    }
}
#define CTX_DEF(K)                                                     \
    NOIPA void rel_ctx##K(long c, int d) {                             \
        ctx_sink += K;                                                 \
        if (d == 0) rel_ctx_leaf(); else rel_ctx_next(c, d);           \
        ctx_sink -= K; /* not a tail call: every level keeps a frame */ \
    }
CTX_DEF(0) CTX_DEF(1) CTX_DEF(2) CTX_DEF(3) CTX_DEF(4)
CTX_DEF(5) CTX_DEF(6) CTX_DEF(7) CTX_DEF(8) CTX_DEF(9)

static int contexts(void) {
    void **big = malloc(100000 * sizeof *big);
    if (!big) { printf("array: NULL\n"); return 1; }
    long n = 0;
    while (n < 100000) {
        void *p = rel_big();
        if (!p) break;
        memset(p, 1, 64);
        big[n++] = p;
    }
    printf("big blocks: ended with %s\n", n < 100000 ? "NULL" : "a full array");
    fprintf(stderr, "rel_oom: %ld big blocks\n", n);
    for (int i = 0; i < 4 && n > 0; i++) free(big[--n]);
    for (int r = 0; r < 3; r++)
        for (long c = 0; c < 100000; c++) rel_ctx0(c, 5);
    printf("contexts: %ld small mallocs failed\n", ctx_failed);
    for (long i = 0; i < n; i++) free(big[i]);
    free(big);
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc > 1 && strcmp(argv[1], "exhaust") == 0) return exhaust();
    if (argc > 1 && strcmp(argv[1], "small") == 0) return small_only();
    if (argc > 1 && strcmp(argv[1], "little") == 0) return little();
    if (argc > 1 && strcmp(argv[1], "contexts") == 0) return contexts();
    return huge();
}
