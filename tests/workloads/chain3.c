/* chain3 K MS [go]: a three-stage pipeline whose every wait is explained
 * by the one below it. Thread "stage_c" naps MS ms in c_nap() (nanosleep,
 * woken by its timer), then wakes "stage_b" through a futex in
 * c_release(); "stage_b", blocked on that futex in b_wait(), then writes a
 * pipe in b_poke(), waking "stage_a", blocked reading it in a_wait(). K
 * rounds. b and c are blocked by the time a blocks, and stay blocked until
 * c's timer fires. Prints a's measured time inside read as
 * "blocked_us=<n>" on stderr, then b's and c's as "b_blocked_us=" and
 * "c_blocked_us=". */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "rawsys.h"

static int fds[2];
static int rounds;
static long nap_ms;
static int tokens;
static long long a_blocked, b_blocked, c_blocked;

/* A raw system call with a fourth argument (futex's timeout), as
 * raw_syscall3 is for three. */
#if defined(__x86_64__)
__attribute__((noinline)) static long raw_syscall4(long n, long a, long b, long c, long d)
{
    long ret;
    register long r10 __asm__("r10") = d;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10)
                     : "rcx", "r11", "memory");
    return ret;
}
#else
__attribute__((noinline)) static long raw_syscall4(long n, long a, long b, long c, long d)
{
    return syscall(n, a, b, c, d);
}
#endif

__attribute__((noinline)) long a_wait(void)
{
    char c;
    return raw_syscall3(SYS_read, fds[0], (long)&c, 1);
}

__attribute__((noinline)) void *a_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "stage_a");
    for (int i = 0; i < rounds; i++) {
        long long t0 = now_us();
        a_wait();
        a_blocked += now_us() - t0;
    }
    return NULL;
}

/* Takes one token, sleeping on the futex while there is none. */
__attribute__((noinline)) void b_wait(void)
{
    while (__atomic_load_n(&tokens, __ATOMIC_SEQ_CST) == 0)
        raw_syscall4(SYS_futex, (long)&tokens, FUTEX_WAIT_PRIVATE, 0, 0);
    __atomic_sub_fetch(&tokens, 1, __ATOMIC_SEQ_CST);
}

__attribute__((noinline)) long b_poke(void)
{
    char c = 'x';
    return raw_syscall3(SYS_write, fds[1], (long)&c, 1);
}

__attribute__((noinline)) void *b_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "stage_b");
    for (int i = 0; i < rounds; i++) {
        long long t0 = now_us();
        b_wait();
        b_blocked += now_us() - t0;
        b_poke();
    }
    return NULL;
}

__attribute__((noinline)) long c_nap(void)
{
    struct timespec ts = { nap_ms / 1000, (nap_ms % 1000) * 1000000L };
    return raw_syscall3(SYS_nanosleep, (long)&ts, 0, 0);
}

__attribute__((noinline)) long c_release(void)
{
    __atomic_add_fetch(&tokens, 1, __ATOMIC_SEQ_CST);
    return raw_syscall4(SYS_futex, (long)&tokens, FUTEX_WAKE_PRIVATE, 1, 0);
}

__attribute__((noinline)) void *c_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "stage_c");
    for (int i = 0; i < rounds; i++) {
        long long t0 = now_us();
        c_nap();
        c_blocked += now_us() - t0;
        c_release();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: chain3 K MS [go]\n");
        return 2;
    }
    /* Threads inherit the affinity set here. */
    maybe_pin();
    rounds = atoi(argv[1]);
    nap_ms = atol(argv[2]);
    if (argc > 3 && strcmp(argv[3], "go") == 0)
        wait_for_go();
    if (pipe(fds) != 0) {
        perror("pipe");
        return 1;
    }
    pthread_t a, b, c;
    pthread_create(&a, NULL, a_main, NULL);
    pthread_create(&b, NULL, b_main, NULL);
    pthread_create(&c, NULL, c_main, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    pthread_join(c, NULL);
    fprintf(stderr, "blocked_us=%lld\nb_blocked_us=%lld\nc_blocked_us=%lld\n", a_blocked,
            b_blocked, c_blocked);
    return 0;
}
