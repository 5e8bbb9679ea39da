// Allocation sites for `wmhcct report --group function|line`
// (tests/tests/cli.rs):
//   build_grid:  10 x xmalloc(64) on one line, 5 x xmalloc(128) on another,
//                each freed -> one function, two lines; xmalloc, a
//                wrapper, is the site of neither
//   read_input:  1 x malloc(1000) per call, called from load_a and from
//                load_b, never freed -> one line in two contexts, 2000 B
//                leaked
//   fill_vector: a std::vector<long> grown by 1000 push_backs -> operator
//                new under std:: frames; the site is fill_vector
// Writes with write(2), so stdio's buffer is no allocation of its own.
// -DGRID_SMALL=N makes build_grid's first line allocate N times instead
// (`wmhcct diff --group`).
#include <cstdlib>
#include <cstring>
#include <vector>
#include <unistd.h>

#define NOIPA __attribute__((noinline, noclone))

#ifndef GRID_SMALL
#define GRID_SMALL 10
#endif

static volatile long sink;

NOIPA static void *xmalloc(size_t n) {
    void *p = malloc(n);
    if (!p) abort();
    return p;
}

NOIPA static void build_grid() {
    for (int i = 0; i < GRID_SMALL; i++) {
        char *p = static_cast<char *>(xmalloc(64));
        p[0] = static_cast<char>(i);
        sink += p[0];
        free(p);
    }
    for (int i = 0; i < 5; i++) {
        char *p = static_cast<char *>(xmalloc(128));
        p[0] = static_cast<char>(i);
        sink += p[0];
        free(p);
    }
}

static void *kept[2];

NOIPA static void *read_input() {
    void *p = malloc(1000);
    memset(p, 1, 1000);
    return p;
}

NOIPA static void load_a() { kept[0] = read_input(); }
NOIPA static void load_b() { kept[1] = read_input(); }

NOIPA static void fill_vector() {
    std::vector<long> v;
    for (long i = 0; i < 1000; i++) v.push_back(i);
    sink += v[999];
}

int main() {
    build_grid();
    load_a();
    load_b();
    fill_vector();
    static const char line[] = "done\n";
    return write(1, line, sizeof line - 1) < 0;
}
