/* spinafter MS SPIN_MS [go]: sleeps once for MS milliseconds (in
 * sleep_once), then spins for SPIN_MS milliseconds without blocking, as a
 * SCHED_FIFO task when it may be one, so that nothing but a higher
 * real-time priority switches it out. A tracer that stops while it spins has
 * seen it switch out for the sleep, but no switch-out after it switched back
 * in. With "go", first waits for a byte on stdin. Prints its own measured
 * time inside nanosleep as "blocked_us=<n>" on stderr. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rawsys.h"

__attribute__((noinline)) long sleep_once(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    return raw_syscall3(SYS_nanosleep, (long)&ts, 0, 0);
}

__attribute__((noinline)) void spin(long ms)
{
    long long end = now_us() + ms * 1000LL;
    while (now_us() < end)
        ;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: spinafter MS SPIN_MS [go]\n");
        return 2;
    }
    long ms = atol(argv[1]);
    long spin_ms = atol(argv[2]);
    maybe_pin();
    struct sched_param p = { .sched_priority = 10 };
    sched_setscheduler(0, SCHED_FIFO, &p);
    if (argc > 3 && strcmp(argv[3], "go") == 0)
        wait_for_go();
    long long t0 = now_us();
    sleep_once(ms);
    long long blocked = now_us() - t0;
    spin(spin_ms);
    fprintf(stderr, "blocked_us=%lld\n", blocked);
    return 0;
}
