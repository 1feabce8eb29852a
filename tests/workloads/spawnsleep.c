/* spawnsleep N MS [go]: N times, creates a thread "newborn" that blocks once
 * in nanosleep for MS milliseconds, from nap(), and exits; the main thread
 * joins it before creating the next. Each newborn's only wakeup comes MS
 * milliseconds after its creation: a tracer must know new threads from their
 * first wakeup on to name its waker. Prints the newborns' measured time inside
 * nanosleep as "blocked_us=<n>" on stderr. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rawsys.h"

static long delay_ms;
static long long blocked;

__attribute__((noinline)) long nap(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    return raw_syscall3(SYS_nanosleep, (long)&ts, 0, 0);
}

__attribute__((noinline)) void *newborn_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "newborn");
    long long t0 = now_us();
    nap(delay_ms);
    blocked += now_us() - t0;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: spawnsleep N MS [go]\n");
        return 2;
    }
    int n = atoi(argv[1]);
    delay_ms = atol(argv[2]);
    if (argc > 3 && strcmp(argv[3], "go") == 0)
        wait_for_go();
    maybe_pin();
    for (int i = 0; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, newborn_main, NULL) != 0) {
            perror("pthread_create");
            return 1;
        }
        pthread_join(t, NULL);
    }
    fprintf(stderr, "blocked_us=%lld\n", blocked);
    return 0;
}
