/* pipewake K MS [go]: thread "reader" blocks K times reading a pipe in
 * reader_wait(); thread "writer" sleeps MS milliseconds then writes one byte
 * in writer_poke(), K times. Prints the reader's measured time inside read
 * as "blocked_us=<n>" on stderr. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include "pipepair.h"

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
    return pipe_pair_main(argc, argv, "pipewake", reader_main, writer_main);
}
