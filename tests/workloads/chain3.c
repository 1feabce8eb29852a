/* chain3 K MS [go]: a three-stage pipeline whose every wait is explained
 * by the one below it. Thread "stage_c" naps MS ms in c_nap() (nanosleep,
 * woken by its timer), then wakes "stage_b" through a futex in
 * c_release(); "stage_b", blocked on that futex in b_wait(), then writes a
 * pipe in b_poke(), waking "stage_a", blocked reading it in a_wait(). K
 * rounds. All three are SCHED_FIFO at one priority (when root), so none
 * preempts another, nor does any other task of the CPU: b and c are
 * blocked by the time a blocks, and stay blocked until c's timer fires.
 * Prints a's measured time inside read as "blocked_us=<n>" on stderr,
 * then b's and c's as "b_blocked_us=" and "c_blocked_us="; as
 * "clean_us=" a's time in the rounds in which neither b nor c was
 * preempted between the start of its wait and its wakeup of the next
 * stage (their involuntary switches, from getrusage), as "b_clean_us="
 * b's in the rounds in which c was not; and "fifo=1" when the policy was
 * set.
 *
 * Built with CHAIN3_LIBC defined (chain3libc.c), the stages call glibc as
 * programs do (read, write, nanosleep, sem_wait, sem_post); otherwise each
 * system call is made from the stage's own function, so that a
 * frame-pointer walk finds it. */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <semaphore.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include "rawsys.h"

static int fds[2];
static int rounds;
static long nap_ms;
#ifndef CHAIN3_LIBC
static int tokens;
#endif
static long long a_blocked, b_blocked, c_blocked;

#define MAX_ROUNDS 1000
static long long a_round[MAX_ROUNDS], b_round[MAX_ROUNDS];
static int b_disturbed[MAX_ROUNDS], c_disturbed[MAX_ROUNDS];

/* This thread's involuntary context switches so far. */
static long involuntary(void)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return ru.ru_nivcsw;
}

#ifndef CHAIN3_LIBC
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
#endif

#ifdef CHAIN3_LIBC
/* No clones under other names, and a call (not a jump) to glibc that
 * keeps the caller's frame, however the file is optimized. */
#define STAGE __attribute__((noinline, noipa))
#define KEEP_FRAME __asm__ volatile("" ::: "memory")
static sem_t token_sem;
#else
#define STAGE __attribute__((noinline))
#define KEEP_FRAME
#endif

STAGE long a_wait(void)
{
    char c;
#ifdef CHAIN3_LIBC
    long r = read(fds[0], &c, 1);
#else
    long r = raw_syscall3(SYS_read, fds[0], (long)&c, 1);
#endif
    KEEP_FRAME;
    return r;
}

__attribute__((noinline)) void *a_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "stage_a");
    for (int i = 0; i < rounds; i++) {
        long long t0 = now_us();
        a_wait();
        a_round[i] = now_us() - t0;
        a_blocked += a_round[i];
    }
    return NULL;
}

/* Takes one token, sleeping on the futex while there is none. */
STAGE void b_wait(void)
{
#ifdef CHAIN3_LIBC
    while (sem_wait(&token_sem) != 0) {
    }
    KEEP_FRAME;
#else
    while (__atomic_load_n(&tokens, __ATOMIC_SEQ_CST) == 0)
        raw_syscall4(SYS_futex, (long)&tokens, FUTEX_WAIT_PRIVATE, 0, 0);
    __atomic_sub_fetch(&tokens, 1, __ATOMIC_SEQ_CST);
#endif
}

STAGE long b_poke(void)
{
    char c = 'x';
#ifdef CHAIN3_LIBC
    long r = write(fds[1], &c, 1);
#else
    long r = raw_syscall3(SYS_write, fds[1], (long)&c, 1);
#endif
    KEEP_FRAME;
    return r;
}

__attribute__((noinline)) void *b_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "stage_b");
    for (int i = 0; i < rounds; i++) {
        long before = involuntary();
        long long t0 = now_us();
        b_wait();
        b_round[i] = now_us() - t0;
        b_blocked += b_round[i];
        b_poke();
        b_disturbed[i] = involuntary() != before;
    }
    return NULL;
}

STAGE long c_nap(void)
{
    struct timespec ts = { nap_ms / 1000, (nap_ms % 1000) * 1000000L };
#ifdef CHAIN3_LIBC
    long r = nanosleep(&ts, NULL);
#else
    long r = raw_syscall3(SYS_nanosleep, (long)&ts, 0, 0);
#endif
    KEEP_FRAME;
    return r;
}

STAGE long c_release(void)
{
#ifdef CHAIN3_LIBC
    long r = sem_post(&token_sem);
#else
    __atomic_add_fetch(&tokens, 1, __ATOMIC_SEQ_CST);
    long r = raw_syscall4(SYS_futex, (long)&tokens, FUTEX_WAKE_PRIVATE, 1, 0);
#endif
    KEEP_FRAME;
    return r;
}

__attribute__((noinline)) void *c_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "stage_c");
    for (int i = 0; i < rounds; i++) {
        long before = involuntary();
        long long t0 = now_us();
        c_nap();
        c_blocked += now_us() - t0;
        c_release();
        c_disturbed[i] = involuntary() != before;
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
    if (rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "K must be 1 to %d\n", MAX_ROUNDS);
        return 2;
    }
    if (argc > 3 && strcmp(argv[3], "go") == 0)
        wait_for_go();
    if (pipe(fds) != 0) {
        perror("pipe");
        return 1;
    }
#ifdef CHAIN3_LIBC
    sem_init(&token_sem, 0, 0);
#endif
    /* The threads inherit it. */
    struct sched_param sp = { .sched_priority = 1 };
    int fifo = sched_setscheduler(0, SCHED_FIFO, &sp) == 0;
    pthread_t a, b, c;
    pthread_create(&a, NULL, a_main, NULL);
    pthread_create(&b, NULL, b_main, NULL);
    pthread_create(&c, NULL, c_main, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    pthread_join(c, NULL);
    long long clean = 0, b_clean = 0;
    for (int i = 0; i < rounds; i++) {
        if (!b_disturbed[i] && !c_disturbed[i])
            clean += a_round[i];
        if (!c_disturbed[i])
            b_clean += b_round[i];
    }
    fprintf(stderr, "blocked_us=%lld\nb_blocked_us=%lld\nc_blocked_us=%lld\n", a_blocked,
            b_blocked, c_blocked);
    fprintf(stderr, "clean_us=%lld\nb_clean_us=%lld\nfifo=%d\n", clean, b_clean, fifo);
    return 0;
}
