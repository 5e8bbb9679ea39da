/* The program's heap as the program sees it: the first block's offset in
 * its page (where the heap starts is random, its first page's layout is
 * not), then every block's offset from the first block, hashed in the
 * order the blocks were returned. Blocks come
 * from many calling contexts (the tracer's tables grow while this runs),
 * with frees and reallocs in between. Without the tracer and with it the
 * line printed must be the same: the tracer keeps its own allocations out
 * of the program's heap. With a second argument `thread` the work runs in a
 * new thread, in its own arena, which the tracer meets at its first event. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "four_way_walk.h"

static char *first;
static uint64_t hash = 1469598103934665603ull;
static unsigned long blocks;

static void note(void *p) {
    uint64_t d = (uint64_t)((char *)p - first);
    hash = (hash ^ d) * 1099511628211ull;
    blocks++;
}

static void *keep[4096];

static long events = 200000;

static void *work(void *arg) {
    (void)arg;
    unsigned r = 12345;
    first = malloc(24);
    hash = (hash ^ ((uintptr_t)first & 4095)) * 1099511628211ull;
    note(first);
    for (long i = 0; i < events; i++) {
        r = r * 1103515245u + 12345u;
        size_t n = 16 + (r >> 8) % 3000;
        void *p = walk(4 + (r >> 28) % 8, r * 2654435761u, n);
        note(p);
        unsigned slot = (r >> 4) % 4096;
        free(keep[slot]);
        keep[slot] = p;
        if (i % 7 == 0) {
            keep[slot] = realloc(p, 2 * n);
            note(keep[slot]);
        }
    }
    for (unsigned i = 0; i < 4096; i++) free(keep[i]);
    free(first);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) events = atol(argv[1]);
    if (argc > 2 && strcmp(argv[2], "thread") == 0) {
        pthread_t t;
        if (pthread_create(&t, NULL, work, NULL) != 0 || pthread_join(t, NULL) != 0) {
            fprintf(stderr, "heap_layout: no thread\n");
            return 1;
        }
    } else {
        work(NULL);
    }
    printf("%lu blocks, layout %016llx\n", blocks, (unsigned long long)hash);
    return 0;
}
