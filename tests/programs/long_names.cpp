// C++ names of thousands of characters in the text report
// (tests/tests/cli.rs): 100 insertions into a map whose types spell out
// nested standard containers, built at -O0 so that every library frame
// (the allocator, the tree's node functions) is its own, with its full
// template name.
#include <map>
#include <string>
#include <vector>

using Inner = std::vector<std::map<int, std::string>>;
using Outer = std::map<std::string, std::vector<std::pair<Inner, Inner>>>;

template <typename T> struct Registry {
    T table;
    __attribute__((noinline)) void fill(int n) {
        for (int i = 0; i < n; i++) table[std::to_string(i * 7919)].emplace_back();
    }
};

int main() {
    Registry<Outer> r;
    r.fill(100);
    return r.table.size() == 100 ? 0 : 1;
}
