// FLAGS: -O2 -fomit-frame-pointer
/* dwarfchain K MS [go]: built as distributions build, without frame
 * pointers. Thread "blocked" reads a pipe K times through glibc's read(),
 * under chain_outer() -> chain_middle() -> chain_inner(); thread "waker"
 * sleeps MS milliseconds, then writes a byte through glibc's write() under
 * wake_outer() -> wake_inner(), K times. Prints the reader's time inside
 * read as "blocked_us=<n>" on stderr. Only DWARF unwinding finds these
 * functions: a frame-pointer walk stops in glibc. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include "pipepair.h"

/* noipa: no clones with other names; the empty asm after each call keeps
 * it a call (not a jump) so that every function keeps its frame. */
#define KEEP_FRAME __asm__ volatile("" ::: "memory")

__attribute__((noipa)) long chain_inner(int fd)
{
    char c;
    long r = read(fd, &c, 1);
    KEEP_FRAME;
    return r;
}

__attribute__((noipa)) long chain_middle(int fd)
{
    long r = chain_inner(fd);
    KEEP_FRAME;
    return r;
}

__attribute__((noipa)) long chain_outer(int fd)
{
    long r = chain_middle(fd);
    KEEP_FRAME;
    return r;
}

static void *blocked_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "blocked");
    for (int i = 0; i < rounds; i++) {
        long long t0 = now_us();
        chain_outer(fds[0]);
        reader_blocked += now_us() - t0;
    }
    return NULL;
}

__attribute__((noipa)) long wake_inner(int fd)
{
    char c = 'x';
    long r = write(fd, &c, 1);
    KEEP_FRAME;
    return r;
}

__attribute__((noipa)) long wake_outer(int fd)
{
    long r = wake_inner(fd);
    KEEP_FRAME;
    return r;
}

static void *waker_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "waker");
    struct timespec ts = { delay_ms / 1000, (delay_ms % 1000) * 1000000L };
    for (int i = 0; i < rounds; i++) {
        nanosleep(&ts, NULL);
        wake_outer(fds[1]);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    return pipe_pair_main(argc, argv, "dwarfchain", blocked_main, waker_main);
}
