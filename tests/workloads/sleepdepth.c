/* sleepdepth N MS [go]: blocks N times in nanosleep for MS milliseconds
 * each; sleep I (from 0) is taken I + 1 calls of descend() deep, so every
 * sleep has a user stack of its own and a tracer's total for that stack is
 * that one sleep. With "go", first waits for a byte on stdin. Prints, on
 * stderr, each sleep's own measured time inside nanosleep as
 * "sleep_ns=<depth> <ns>" (depth = I + 1, the number of descend frames),
 * then their sum as "blocked_us=<n>". A tracer's interval for a sleep lies
 * between the two clock readings around its system call: no tracer may
 * report more than the measured time. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rawsys.h"

/* Monotonic nanoseconds (the clock perf stamps events with here). */
static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

__attribute__((noinline)) long long sleep_at_depth(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    long long t0 = now_ns();
    raw_syscall3(SYS_nanosleep, (long)&ts, 0, 0);
    return now_ns() - t0;
}

__attribute__((noinline)) long long descend(int levels, long ms)
{
    if (levels > 1)
        return descend(levels - 1, ms);
    return sleep_at_depth(ms);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: sleepdepth N MS [go]\n");
        return 2;
    }
    int n = atoi(argv[1]);
    long ms = atol(argv[2]);
    if (n < 1 || n > 64 || ms < 1) {
        fprintf(stderr, "sleepdepth: N must be 1..64 and MS positive\n");
        return 2;
    }
    if (argc > 3 && strcmp(argv[3], "go") == 0)
        wait_for_go();
    maybe_pin();
    long long ns[64];
    for (int i = 0; i < n; i++)
        ns[i] = descend(i + 1, ms);
    long long total = 0;
    for (int i = 0; i < n; i++) {
        fprintf(stderr, "sleep_ns=%d %lld\n", i + 1, ns[i]);
        total += ns[i];
    }
    fprintf(stderr, "blocked_us=%lld\n", total / 1000);
    return 0;
}
