/* pipewake K MS [go]: thread "reader" blocks K times reading a pipe in
 * reader_wait(); thread "writer" sleeps MS milliseconds then writes one byte
 * in writer_poke(), K times. Prints the reader's measured time inside read
 * as "blocked_us=<n>" on stderr. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "rawsys.h"

static int fds[2];
static int rounds;
static long delay_ms;
static long long reader_blocked;

__attribute__((noinline)) long reader_wait(void)
{
    char c;
    return raw_syscall3(SYS_read, fds[0], (long)&c, 1);
}

__attribute__((noinline)) void *reader_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "reader");
    for (int i = 0; i < rounds; i++) {
        long long t0 = now_us();
        reader_wait();
        reader_blocked += now_us() - t0;
    }
    return NULL;
}

__attribute__((noinline)) long writer_poke(void)
{
    char c = 'x';
    return raw_syscall3(SYS_write, fds[1], (long)&c, 1);
}

__attribute__((noinline)) void *writer_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "writer");
    struct timespec ts = { delay_ms / 1000, (delay_ms % 1000) * 1000000L };
    for (int i = 0; i < rounds; i++) {
        nanosleep(&ts, NULL);
        writer_poke();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: pipewake K MS [go]\n");
        return 2;
    }
    /* Threads inherit the affinity set here. */
    maybe_pin();
    rounds = atoi(argv[1]);
    delay_ms = atol(argv[2]);
    if (argc > 3 && strcmp(argv[3], "go") == 0)
        wait_for_go();
    if (pipe(fds) != 0) {
        perror("pipe");
        return 1;
    }
    pthread_t r, w;
    pthread_create(&r, NULL, reader_main, NULL);
    pthread_create(&w, NULL, writer_main, NULL);
    pthread_join(r, NULL);
    pthread_join(w, NULL);
    fprintf(stderr, "blocked_us=%lld\n", reader_blocked);
    return 0;
}
