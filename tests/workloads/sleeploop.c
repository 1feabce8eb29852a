/* sleeploop N MS [go]: blocks N times in nanosleep for MS milliseconds each,
 * always from sleep_once(). With "go", first waits for a byte on stdin.
 * Prints its own measured time inside nanosleep as "blocked_us=<n>" on
 * stderr: the ground truth the tests compare against. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rawsys.h"

__attribute__((noinline)) long sleep_once(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    return raw_syscall3(SYS_nanosleep, (long)&ts, 0, 0);
}

__attribute__((noinline)) long long sleep_loop(int n, long ms)
{
    long long blocked = 0;
    for (int i = 0; i < n; i++) {
        long long t0 = now_us();
        sleep_once(ms);
        blocked += now_us() - t0;
    }
    return blocked;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: sleeploop N MS [go]\n");
        return 2;
    }
    int n = atoi(argv[1]);
    long ms = atol(argv[2]);
    if (argc > 3 && strcmp(argv[3], "go") == 0)
        wait_for_go();
    maybe_pin();
    long long blocked = sleep_loop(n, ms);
    fprintf(stderr, "blocked_us=%lld\n", blocked);
    return 0;
}
