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
 * Usage: rel_oom huge|exhaust|small|little
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

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc > 1 && strcmp(argv[1], "exhaust") == 0) return exhaust();
    if (argc > 1 && strcmp(argv[1], "small") == 0) return small_only();
    if (argc > 1 && strcmp(argv[1], "little") == 0) return little();
    return huge();
}
