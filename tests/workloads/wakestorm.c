/* wakestorm [THREADS [TOKENS [SECONDS [NAMED]]]]: THREADS threads (default 2000)
 * each block on a semaphore of their own (sem_wait, a futex), and TOKENS
 * tokens (default 50) go round them: a thread woken by one posts the
 * semaphore of another thread picked at random, then waits again. So
 * every thread wakes every other, in chains that never repeat: the
 * unbounded case of per-thread entries and of `--chain`. Prints "ready" on
 * stdout once every thread waits and the tokens go round; runs until
 * killed, or for SECONDS (default 300) at most. Threads are named
 * "storm", or with NAMED 1 each its own name ("storm0", "storm1", ...),
 * so that even merged by process their entries stay apart. */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

static int threads = 2000;
static int tokens = 50;
static int named;
static sem_t *sems;
static sem_t started;

static void die(const char *what)
{
    perror(what);
    exit(111);
}

static void *storm(void *arg)
{
    unsigned seed = (unsigned)(long)arg * 2654435761u + 1;
    sem_t *mine = &sems[(long)arg];
    char name[16] = "storm";
    if (named)
        snprintf(name, sizeof name, "storm%ld", (long)arg);
    prctl(PR_SET_NAME, name);
    sem_post(&started);
    for (;;) {
        while (sem_wait(mine) != 0) {
        }
        sem_post(&sems[rand_r(&seed) % threads]);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    long seconds = 300;
    if (argc > 1)
        threads = atoi(argv[1]);
    if (argc > 2)
        tokens = atoi(argv[2]);
    if (argc > 3)
        seconds = atol(argv[3]);
    if (argc > 4)
        named = atoi(argv[4]);
    if (threads < 2 || tokens < 1) {
        fprintf(stderr, "usage: wakestorm [THREADS>1 [TOKENS>0 [SECONDS [NAMED]]]]\n");
        return 2;
    }
    sems = calloc(threads, sizeof *sems);
    if (!sems)
        die("calloc");
    sem_init(&started, 0, 0);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    for (long i = 0; i < threads; i++) {
        sem_init(&sems[i], 0, 0);
        pthread_t t;
        if (pthread_create(&t, &attr, storm, (void *)i) != 0)
            die("pthread_create");
    }
    for (int i = 0; i < threads; i++)
        sem_wait(&started);
    unsigned seed = 12345;
    for (int i = 0; i < tokens; i++)
        sem_post(&sems[rand_r(&seed) % threads]);
    printf("ready\n");
    fflush(stdout);
    sleep(seconds);
    return 0;
}
