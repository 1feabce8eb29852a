/* wallclock: threads that measure where their own time goes, for the
 * wall-clock profile (--wall). Both modes print their measurements on
 * stderr as name=value words.
 *
 *   wallclock burn N BURN_MS NAP_MS
 *     Thread "burner", N times: burns BURN_MS of its own CPU time
 *     (CLOCK_THREAD_CPUTIME_ID) in burn(), then naps NAP_MS. Prints
 *     burn_cpu_us (CPU time inside burn()), cpu_us (the thread's CPU time)
 *     and wall_us (the thread's life).
 *
 *   wallclock late N PERIOD_MS SPIN_MS
 *     Thread "sleeper" sleeps to N absolute deadlines PERIOD_MS apart while
 *     thread "spinner", at SCHED_FIFO on the same CPU, spins SPIN_MS then
 *     sleeps SPIN_MS, over and over: the deadlines that fall in a spin wait
 *     for the CPU. Prints lateness_us: the sum over the deadlines of the
 *     time the sleeper ran again minus the deadline. Needs root
 *     (SCHED_FIFO); pin both with OFFWAKE_PIN_CPU.
 *
 * With a last argument "go", the threads start once a byte arrives on
 * stdin. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include "rawsys.h"

static long long ns_of(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
}

static long n_iter, burn_ms, nap, period_ms, spin_ms;
static volatile int done;

__attribute__((noinline)) long long burn(long ms)
{
    long long start = ns_of(CLOCK_THREAD_CPUTIME_ID);
    long long end = start + ms * 1000000LL;
    volatile unsigned long x = 0;
    long long now;
    while ((now = ns_of(CLOCK_THREAD_CPUTIME_ID)) < end)
        for (int i = 0; i < 1000; i++)
            x += i;
    return now - start;
}

static void *burner(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, "burner");
    long long wall0 = ns_of(CLOCK_MONOTONIC), burnt = 0;
    for (long i = 0; i < n_iter; i++) {
        burnt += burn(burn_ms);
        nap_ms(nap);
    }
    long long cpu = ns_of(CLOCK_THREAD_CPUTIME_ID);
    long long wall = ns_of(CLOCK_MONOTONIC) - wall0;
    fprintf(stderr, "burn_cpu_us=%lld cpu_us=%lld wall_us=%lld\n", burnt / 1000, cpu / 1000,
            wall / 1000);
    return NULL;
}

__attribute__((noinline)) void spin(long ms)
{
    long long end = ns_of(CLOCK_MONOTONIC) + ms * 1000000LL;
    while (ns_of(CLOCK_MONOTONIC) < end)
        ;
}

static void *spinner(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, "spinner");
    struct sched_param p = {.sched_priority = 1};
    int err = pthread_setschedparam(pthread_self(), SCHED_FIFO, &p);
    if (err != 0) {
        fprintf(stderr, "wallclock: SCHED_FIFO: %s\n", strerror(err));
        exit(1);
    }
    while (!done) {
        spin(spin_ms);
        nap_ms(spin_ms);
    }
    return NULL;
}

__attribute__((noinline)) long long sleep_until(long long deadline)
{
    struct timespec ts = {deadline / 1000000000LL, deadline % 1000000000LL};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
        ;
    return ns_of(CLOCK_MONOTONIC) - deadline;
}

static void *sleeper(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, "sleeper");
    /* Timers fire on time, not up to 50 us late. */
    prctl(PR_SET_TIMERSLACK, 1UL);
    long long late = 0, deadline = ns_of(CLOCK_MONOTONIC);
    for (long i = 0; i < n_iter; i++) {
        deadline += period_ms * 1000000LL;
        late += sleep_until(deadline);
    }
    done = 1;
    fprintf(stderr, "lateness_us=%lld\n", late / 1000);
    return NULL;
}

int main(int argc, char **argv)
{
    maybe_pin();
    pthread_t a, b;
    if (argc == 6 && strcmp(argv[5], "go") == 0) {
        wait_for_go();
        argc--;
    }
    if (argc == 5 && strcmp(argv[1], "burn") == 0) {
        n_iter = atol(argv[2]);
        burn_ms = atol(argv[3]);
        nap = atol(argv[4]);
        pthread_create(&a, NULL, burner, NULL);
        pthread_join(a, NULL);
        return 0;
    }
    if (argc == 5 && strcmp(argv[1], "late") == 0) {
        n_iter = atol(argv[2]);
        period_ms = atol(argv[3]);
        spin_ms = atol(argv[4]);
        if (period_ms <= 0 || spin_ms <= 0) {
            fprintf(stderr, "wallclock: PERIOD_MS and SPIN_MS must be positive\n");
            return 2;
        }
        pthread_create(&b, NULL, spinner, NULL);
        pthread_create(&a, NULL, sleeper, NULL);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        return 0;
    }
    fprintf(stderr, "usage: wallclock burn N BURN_MS NAP_MS | late N PERIOD_MS SPIN_MS\n");
    return 2;
}
