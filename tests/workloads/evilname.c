/* evilname N MS: names in the tool's output that a traced process chose.
 * Both threads set a hostile 15-byte comm (with ';' and a newline), and the
 * reader blocks in a function whose symbol holds ';', spaces, "--" and a
 * terminal escape. The writer sleeps MS milliseconds N times in nanosleep
 * and each time wakes the reader through a pipe. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>
#include "rawsys.h"

/* Exactly 15 bytes each: the most a comm holds. */
#define READER_COMM "ev;il c\nFAKE;99"
#define WRITER_COMM "wk;r\nFAKE;-- 99"

static int fds[2];
static int n;
static long ms;

/* An assembler line cannot hold a newline: the tests replace the \x01 in
 * the built binary with one. */
__attribute__((noinline)) long read_byte(char *c)
    __asm__("\"ev;il\x01" "FAKE;1 rd\x1b[31m -- 12\"");

__attribute__((noinline)) long read_byte(char *c)
{
    return raw_syscall3(SYS_read, fds[0], (long)c, 1);
}

static void *writer(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, WRITER_COMM);
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    for (int i = 0; i < n; i++) {
        raw_syscall3(SYS_nanosleep, (long)&ts, 0, 0);
        raw_syscall3(SYS_write, fds[1], (long)"x", 1);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: evilname N MS\n");
        return 2;
    }
    n = atoi(argv[1]);
    ms = atol(argv[2]);
    maybe_pin();
    prctl(PR_SET_NAME, READER_COMM);
    if (pipe(fds) != 0) {
        perror("pipe");
        return 1;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, writer, NULL) != 0) {
        fprintf(stderr, "pthread_create failed\n");
        return 1;
    }
    char c;
    for (int i = 0; i < n; i++)
        read_byte(&c);
    pthread_join(t, NULL);
    return 0;
}
