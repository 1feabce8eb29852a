/* The shared part of pipewake and dwarfchain: a reader thread blocks K
 * times on a pipe that a writer thread writes to every MS milliseconds.
 * Each program gives its own thread functions (their frames are what the
 * tests look for); this header holds the state they share and the main()
 * that parses "NAME K MS [go|ready]", starts them and prints the reader's
 * time inside read as "blocked_us=<n>" on stderr. With "go" it waits for a
 * byte on stdin first; with "ready" it creates the threads first, which then
 * wait (in a barrier) until that byte comes: a tracer can then be attached
 * to threads that exist, before any of their work. */
#ifndef PIPEPAIR_H
#define PIPEPAIR_H
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
static pthread_barrier_t ready;

struct held {
    void *(*run)(void *);
};

/* A thread of the "ready" mode: waits for main's go, then runs. */
static void *held_start(void *arg)
{
    pthread_barrier_wait(&ready);
    return ((struct held *)arg)->run(NULL);
}

static int pipe_pair_main(int argc, char **argv, const char *name,
                          void *(*reader)(void *), void *(*writer)(void *))
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s K MS [go]\n", name);
        return 2;
    }
    /* Threads inherit the affinity set here. */
    maybe_pin();
    rounds = atoi(argv[1]);
    delay_ms = atol(argv[2]);
    int held = argc > 3 && strcmp(argv[3], "ready") == 0;
    if (argc > 3 && strcmp(argv[3], "go") == 0)
        wait_for_go();
    if (pipe(fds) != 0) {
        perror("pipe");
        return 1;
    }
    pthread_t r, w;
    if (held) {
        static struct held hr, hw;
        hr.run = reader;
        hw.run = writer;
        pthread_barrier_init(&ready, NULL, 3);
        pthread_create(&r, NULL, held_start, &hr);
        pthread_create(&w, NULL, held_start, &hw);
        wait_for_go();
        pthread_barrier_wait(&ready);
    } else {
        pthread_create(&r, NULL, reader, NULL);
        pthread_create(&w, NULL, writer, NULL);
    }
    pthread_join(r, NULL);
    pthread_join(w, NULL);
    fprintf(stderr, "blocked_us=%lld\n", reader_blocked);
    return 0;
}
#endif
