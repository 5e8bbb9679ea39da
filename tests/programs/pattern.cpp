// C++ version of pattern.c (tests/tests/pattern.rs), with new/delete and
// std::vector:
//
//   main -> path_a -> leaf_a : 1000 x new Obj32 (32 bytes)       (deleted)
//   main -> path_b -> leaf_b :  100 x std::vector<char>.resize(4096) (freed)
//   main -> path_c -> leaf_c :   10 x new char[1 MiB]()          (leaked)
//
// Every one of these reaches malloc through operator new (libstdc++), so
// the innermost frames of a stack may be libstdc++'s: the tests look for
// the first frame that is ours. Same order as pattern.c, so the program's
// own peak is 32000 + 10 MiB = 10517760 bytes, on top of what libstdc++
// allocates before main (its emergency exception pool). No iostream.
#include <cstddef>
#include <vector>
#include <unistd.h>

#define NOIPA __attribute__((noinline, noclone, used))

struct Obj32 {
    long v[4];
};
static_assert(sizeof(Obj32) == 32, "Obj32 is 32 bytes");

static const int NA = 1000, NB = 100, NC = 10;
static const std::size_t SB = 4096, SC = 1024 * 1024;

static Obj32 *blocks_a[NA];
static std::vector<char> blocks_b[NB];
char *blocks_c[NC];
volatile unsigned long sink;

NOIPA void leaf_a() {
    for (int i = 0; i < NA; i++) {
        blocks_a[i] = new Obj32;
        blocks_a[i]->v[0] = i;
    }
}
NOIPA void leaf_b() {
    for (int i = 0; i < NB; i++) {
        blocks_b[i].resize(SB);
        blocks_b[i][0] = (char)i;
    }
}
NOIPA void leaf_c() {
    for (int i = 0; i < NC; i++) {
        blocks_c[i] = new char[SC]();
        blocks_c[i][SC - 1] = (char)i;
    }
}
NOIPA void path_a() { leaf_a(); sink += (unsigned long)blocks_a[0]->v[0]; }
NOIPA void path_b() { leaf_b(); sink += (unsigned long)blocks_b[0][0]; }
NOIPA void path_c() { leaf_c(); sink += (unsigned long)blocks_c[0][0]; }

NOIPA static void free_b() {
    for (int i = 0; i < NB; i++) std::vector<char>().swap(blocks_b[i]);
}
NOIPA static void free_a() {
    for (int i = 0; i < NA; i++) delete blocks_a[i];
}

int main() {
    path_a();
    path_b();
    free_b();
    path_c();
    free_a();
    static const char msg[] = "pattern done: peak 10517760 leak 10485760\n";
    if (write(1, msg, sizeof msg - 1) < 0) return 3;
    return sink == 12345 ? 1 : 0;
}
