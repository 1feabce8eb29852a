/* napproc K MS [go]: two processes. The parent, "listener", blocks K
 * times reading a pipe in l_wait(); its child, "napper", naps MS ms in
 * n_nap() (woken by its timer), then writes the pipe in n_poke(), K times.
 * The child is forked before the "go" byte is read, so a tracer given the
 * parent's pid (-p) finds the child outside its targets. Both are
 * SCHED_FIFO at one priority (when root): no other task of the CPU
 * preempts the napper between its nap and its write. Prints the
 * listener's measured time inside read as "blocked_us=<n>" on stderr; as
 * "clean_us=" that of the rounds in which the napper was not preempted
 * from the start of its nap to its write (its involuntary switches, from
 * getrusage); the child's pid as "napper_pid="; and "fifo=1" when the
 * policy was set. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "rawsys.h"

#define MAX_ROUNDS 1000

static int data[2], start[2];
static int rounds;
static long nap_ms;
/* Shared with the child: which of its rounds were preempted. */
static int *disturbed;
static long long blocked[MAX_ROUNDS];

/* This thread's involuntary context switches so far. */
static long involuntary(void)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return ru.ru_nivcsw;
}

__attribute__((noinline)) long n_start(void)
{
    char c;
    return raw_syscall3(SYS_read, start[0], (long)&c, 1);
}

__attribute__((noinline)) long n_nap(void)
{
    struct timespec ts = { nap_ms / 1000, (nap_ms % 1000) * 1000000L };
    return raw_syscall3(SYS_nanosleep, (long)&ts, 0, 0);
}

__attribute__((noinline)) long n_poke(void)
{
    char c = 'x';
    return raw_syscall3(SYS_write, data[1], (long)&c, 1);
}

__attribute__((noinline)) void napper_main(void)
{
    prctl(PR_SET_NAME, "napper");
    n_start();
    for (int i = 0; i < rounds; i++) {
        long before = involuntary();
        n_nap();
        n_poke();
        disturbed[i] = involuntary() != before;
    }
}

__attribute__((noinline)) long l_start(void)
{
    char c = 's';
    return raw_syscall3(SYS_write, start[1], (long)&c, 1);
}

__attribute__((noinline)) long l_wait(void)
{
    char c;
    return raw_syscall3(SYS_read, data[0], (long)&c, 1);
}

__attribute__((noinline)) void listener_main(void)
{
    prctl(PR_SET_NAME, "listener");
    l_start();
    for (int i = 0; i < rounds; i++) {
        long long t0 = now_us();
        l_wait();
        blocked[i] = now_us() - t0;
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: napproc K MS [go]\n");
        return 2;
    }
    /* The child inherits the affinity set here. */
    maybe_pin();
    rounds = atoi(argv[1]);
    nap_ms = atol(argv[2]);
    if (rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "K must be 1 to %d\n", MAX_ROUNDS);
        return 2;
    }
    disturbed = mmap(NULL, MAX_ROUNDS * sizeof(int), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (disturbed == MAP_FAILED || pipe(data) != 0 || pipe(start) != 0) {
        perror("napproc");
        return 1;
    }
    /* The child inherits it. */
    struct sched_param sp = { .sched_priority = 1 };
    int fifo = sched_setscheduler(0, SCHED_FIFO, &sp) == 0;
    pid_t child = fork();
    if (child < 0) {
        perror("fork");
        return 1;
    }
    if (child == 0) {
        napper_main();
        _exit(0);
    }
    if (argc > 3 && strcmp(argv[3], "go") == 0)
        wait_for_go();
    listener_main();
    int status;
    waitpid(child, &status, 0);
    long long total = 0, clean = 0;
    for (int i = 0; i < rounds; i++) {
        total += blocked[i];
        if (!disturbed[i])
            clean += blocked[i];
    }
    fprintf(stderr, "blocked_us=%lld\nclean_us=%lld\nnapper_pid=%d\nfifo=%d\n", total, clean,
            (int)child, fifo);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
