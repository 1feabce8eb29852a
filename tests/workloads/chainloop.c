/* chainloop K MS [go]: two threads that wake each other in turn, on one
 * CPU with a hog between them. Thread "loop_a" writes a byte to pipe ab in
 * a_send(), then blocks reading pipe ba in a_wait(); thread "loop_b"
 * blocks reading pipe ab in b_wait(), then writes pipe ba in b_send(). K
 * rounds. Thread "hog" spins MS ms at a time in hog_spin(), yielding
 * between spins. All three are SCHED_FIFO at one priority, so a woken
 * thread queues behind the hog: each switch between a and b passes through
 * a spin of the hog. a's wait and the wait of b that a ended then overlap
 * both ways, and a's wait is explained by b's, which a itself ended: a
 * chain that loops. Prints a's measured time inside read as
 * "blocked_us=<n>" on stderr, b's as "b_blocked_us=", and "fifo=1" when
 * the threads got SCHED_FIFO (root only). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "rawsys.h"

static int ab[2], ba[2];
static int rounds;
static long spin_ms;
static int done;
static long long a_blocked, b_blocked;

__attribute__((noinline)) long a_send(void)
{
    char c = 'a';
    return raw_syscall3(SYS_write, ab[1], (long)&c, 1);
}

__attribute__((noinline)) long a_wait(void)
{
    char c;
    return raw_syscall3(SYS_read, ba[0], (long)&c, 1);
}

/* A first nap, while b waits for the first byte: a's own wait before it
 * wakes b the first time, as every later round has one. */
__attribute__((noinline)) long a_settle(void)
{
    struct timespec ts = { 0, 1000000L };
    return raw_syscall3(SYS_nanosleep, (long)&ts, 0, 0);
}

__attribute__((noinline)) void *a_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "loop_a");
    a_settle();
    for (int i = 0; i < rounds; i++) {
        a_send();
        long long t0 = now_us();
        a_wait();
        a_blocked += now_us() - t0;
    }
    return NULL;
}

__attribute__((noinline)) long b_wait(void)
{
    char c;
    return raw_syscall3(SYS_read, ab[0], (long)&c, 1);
}

__attribute__((noinline)) long b_send(void)
{
    char c = 'b';
    return raw_syscall3(SYS_write, ba[1], (long)&c, 1);
}

__attribute__((noinline)) void *b_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "loop_b");
    for (int i = 0; i < rounds; i++) {
        long long t0 = now_us();
        b_wait();
        b_blocked += now_us() - t0;
        b_send();
    }
    return NULL;
}

__attribute__((noinline)) void hog_spin(void)
{
    long long end = now_us() + spin_ms * 1000LL;
    while (now_us() < end)
        ;
}

__attribute__((noinline)) void *hog_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "hog");
    while (!__atomic_load_n(&done, __ATOMIC_RELAXED)) {
        hog_spin();
        sched_yield();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: chainloop K MS [go]\n");
        return 2;
    }
    /* Threads inherit the affinity and the policy set here. */
    maybe_pin();
    rounds = atoi(argv[1]);
    spin_ms = atol(argv[2]);
    if (argc > 3 && strcmp(argv[3], "go") == 0)
        wait_for_go();
    if (pipe(ab) != 0 || pipe(ba) != 0) {
        perror("pipe");
        return 1;
    }
    struct sched_param sp = { .sched_priority = 1 };
    int fifo = sched_setscheduler(0, SCHED_FIFO, &sp) == 0;
    /* At one FIFO priority a new thread waits for main to block: the hog
     * first, then b, then a run in that order. */
    pthread_t a, b, h;
    pthread_create(&h, NULL, hog_main, NULL);
    pthread_create(&b, NULL, b_main, NULL);
    pthread_create(&a, NULL, a_main, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    __atomic_store_n(&done, 1, __ATOMIC_RELAXED);
    pthread_join(h, NULL);
    fprintf(stderr, "blocked_us=%lld\nb_blocked_us=%lld\nfifo=%d\n", a_blocked, b_blocked,
            fifo);
    return 0;
}
