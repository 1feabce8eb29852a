/* spinner MS: spins for MS milliseconds in spin_here() without blocking, at
 * normal priority, so that a timer interrupt on its CPU lands in its user
 * code. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include "rawsys.h"

__attribute__((noinline)) void spin_here(long ms)
{
    long long end = now_us() + ms * 1000LL;
    while (now_us() < end)
        ;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: spinner MS\n");
        return 2;
    }
    maybe_pin();
    spin_here(atol(argv[1]));
    return 0;
}
