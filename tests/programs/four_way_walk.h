/* Many calling contexts from a few lines (heap_layout.c,
 * mpi_finalize_heap.c): `walk` mallocs n bytes (plus 16 per level that took
 * another branch) at the end of a recursion `depth` deep whose four call
 * sites per level are chosen by two bits of `path` each: 4^depth calling
 * contexts. */
#ifndef FOUR_WAY_WALK_H
#define FOUR_WAY_WALK_H

#include <stdlib.h>

__attribute__((noinline)) static void *walk(int depth, unsigned path, size_t n) {
    void *p;
    if (depth == 0) return malloc(n);
    switch (path & 3) {
    case 0: p = walk(depth - 1, path >> 2, n); break;
    case 1: p = walk(depth - 1, path >> 2, n + 16); break;
    case 2: p = walk(depth - 1, path >> 2, n + 32); break;
    default: p = walk(depth - 1, path >> 2, n + 48); break;
    }
    __asm__ volatile("" ::: "memory");
    return p;
}

#endif
