/* slowwaker K MS [go]: thread "waiter" blocks K times reading a pipe in
 * t_wait(); thread "worker" computes MS ms in w_compute() without
 * blocking, then writes the pipe in w_poke(), K times. Before the first
 * round the worker waits in w_start() for the waiter's t_start(), so that
 * its last wait ends before the waiter's first. Both are SCHED_FIFO (when
 * root), the waiter one priority above: the worker is preempted by the
 * waiter it wakes, and by no other task of the CPU. Prints the waiter's
 * measured time inside read as "blocked_us=<n>" on stderr; as "clean_us="
 * that of the rounds in which the worker was never preempted while
 * computing (its involuntary switches, from getrusage), in which it ran
 * throughout the waiter's wait; and "fifo=1" when the policy was set. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include "rawsys.h"

#define MAX_ROUNDS 1000

static int data[2], start[2];
static int rounds;
static long compute_ms;
static long long blocked[MAX_ROUNDS];
static int preempted[MAX_ROUNDS];

__attribute__((noinline)) long t_start(void)
{
    char c = 's';
    return raw_syscall3(SYS_write, start[1], (long)&c, 1);
}

__attribute__((noinline)) long t_wait(void)
{
    char c;
    return raw_syscall3(SYS_read, data[0], (long)&c, 1);
}

__attribute__((noinline)) void *t_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "waiter");
    struct sched_param sp = { .sched_priority = 2 };
    pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
    t_start();
    for (int i = 0; i < rounds; i++) {
        long long t0 = now_us();
        t_wait();
        blocked[i] = now_us() - t0;
    }
    return NULL;
}

__attribute__((noinline)) long w_start(void)
{
    char c;
    return raw_syscall3(SYS_read, start[0], (long)&c, 1);
}

__attribute__((noinline)) void w_compute(void)
{
    long long end = now_us() + compute_ms * 1000LL;
    while (now_us() < end)
        ;
}

__attribute__((noinline)) long w_poke(void)
{
    char c = 'x';
    return raw_syscall3(SYS_write, data[1], (long)&c, 1);
}

/* This thread's involuntary context switches so far. */
static long involuntary(void)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return ru.ru_nivcsw;
}

__attribute__((noinline)) void *w_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "worker");
    w_start();
    for (int i = 0; i < rounds; i++) {
        long before = involuntary();
        w_compute();
        preempted[i] = involuntary() != before;
        w_poke();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: slowwaker K MS [go]\n");
        return 2;
    }
    /* Threads inherit the affinity set here. */
    maybe_pin();
    rounds = atoi(argv[1]);
    compute_ms = atol(argv[2]);
    if (rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "K must be 1 to %d\n", MAX_ROUNDS);
        return 2;
    }
    if (argc > 3 && strcmp(argv[3], "go") == 0)
        wait_for_go();
    if (pipe(data) != 0 || pipe(start) != 0) {
        perror("pipe");
        return 1;
    }
    /* The threads inherit it; the worker, created first, runs first. */
    struct sched_param sp = { .sched_priority = 1 };
    int fifo = sched_setscheduler(0, SCHED_FIFO, &sp) == 0;
    pthread_t t, w;
    pthread_create(&w, NULL, w_main, NULL);
    pthread_create(&t, NULL, t_main, NULL);
    pthread_join(t, NULL);
    pthread_join(w, NULL);
    long long total = 0, clean = 0;
    int dirty = 0;
    for (int i = 0; i < rounds; i++) {
        total += blocked[i];
        if (preempted[i])
            dirty++;
        else
            clean += blocked[i];
    }
    fprintf(stderr, "blocked_us=%lld\nclean_us=%lld\npreempted_rounds=%d\nfifo=%d\n", total,
            clean, dirty, fifo);
    return 0;
}
