/* napproc K MS [go]: two processes. The parent, "listener", blocks K
 * times reading a pipe in l_wait(); its child, "napper", naps MS ms in
 * n_nap() (woken by its timer), then writes the pipe in n_poke(), K times.
 * The child is forked before the "go" byte is read, so a tracer given the
 * parent's pid (-p) finds the child outside its targets. Prints the
 * listener's measured time inside read as "blocked_us=<n>" on stderr,
 * then the child's pid as "napper_pid=". */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "rawsys.h"

static int data[2], start[2];
static int rounds;
static long nap_ms;

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
        n_nap();
        n_poke();
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

__attribute__((noinline)) long long listener_main(void)
{
    long long blocked = 0;
    prctl(PR_SET_NAME, "listener");
    l_start();
    for (int i = 0; i < rounds; i++) {
        long long t0 = now_us();
        l_wait();
        blocked += now_us() - t0;
    }
    return blocked;
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
    if (pipe(data) != 0 || pipe(start) != 0) {
        perror("pipe");
        return 1;
    }
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
    long long blocked = listener_main();
    int status;
    waitpid(child, &status, 0);
    fprintf(stderr, "blocked_us=%lld\nnapper_pid=%d\n", blocked, (int)child);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
