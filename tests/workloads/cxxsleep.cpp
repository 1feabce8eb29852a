// cxxsleep N MS: blocks N times in nanosleep from a C++ member function
// (ns::Sleeper::nap(long)), so its frame must come out demangled. Prints its
// own measured time inside nanosleep as "blocked_us=<n>" on stderr.
#include <cstdio>
#include <cstdlib>
extern "C" {
#include "rawsys.h"
}

namespace ns {
struct Sleeper {
    __attribute__((noinline)) long nap(long ms);
};

long Sleeper::nap(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    return raw_syscall3(SYS_nanosleep, (long)&ts, 0, 0);
}
} // namespace ns

int main(int argc, char **argv)
{
    if (argc < 3) {
        std::fprintf(stderr, "usage: cxxsleep N MS\n");
        return 2;
    }
    ns::Sleeper s;
    int n = std::atoi(argv[1]);
    long ms = std::atol(argv[2]);
    long long blocked = 0;
    for (int i = 0; i < n; i++) {
        long long t0 = now_us();
        s.nap(ms);
        blocked += now_us() - t0;
    }
    std::fprintf(stderr, "blocked_us=%lld\n", blocked);
    return 0;
}
