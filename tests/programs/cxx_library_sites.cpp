// C++ library frames whose names the report must still know for the
// library's (tests/tests/cli.rs), built at -O0 where nothing is inlined:
//   share_buffer: 10 x std::make_shared<std::vector<char>>(n) (20
//                 allocations: the control block with the vector, and the
//                 vector's buffer), whose mangled name has an expression
//                 (`!std::is_array<T>::value`) the demangler cannot read
//   start_workers: 2 std::threads in a std::vector (GCC names the thread's
//                 constructor and the vector's _M_realloc_insert in its
//                 debug information without their class and namespace)
// Each site is the program's function, never a library frame.
#include <memory>
#include <thread>
#include <vector>

#define NOIPA __attribute__((noinline, noclone))

static volatile long sink;

NOIPA static long share_buffer(int n) {
    auto p = std::make_shared<std::vector<char>>(n);
    return static_cast<long>(p->size());
}

NOIPA static void start_workers() {
    std::vector<std::thread> ts;
    for (int t = 0; t < 2; t++) ts.emplace_back([] { sink += 1; });
    for (auto &t : ts) t.join();
}

int main() {
    for (int i = 0; i < 10; i++) sink += share_buffer(100 + i);
    start_workers();
    return 0;
}
