/* twostacks FILE NAP_US: maps the first page of FILE 1300 times (its maps
 * then take the kernel long to print when FILE's path is long), then
 * blocks in nanosleep(NAP_US) alternately on two stacks of its own, each
 * under a 16 KiB frame: deeper than a default stack copy, with the stack
 * pointer never in the mapping it was in the time before. Runs on CPU 0
 * with OFFWAKE_PIN_CPU=0. Prints "ready" before it first blocks. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "rawsys.h"

static ucontext_t ctx[2], done;
static long nap_us;

static void __attribute__((noinline)) deep(int me)
{
    volatile char frame[16384];
    memset((char *)frame, me, sizeof frame);
    __asm__ volatile("" : : "r"(frame) : "memory");
    struct timespec t = {nap_us / 1000000, (nap_us % 1000000) * 1000};
    nanosleep(&t, NULL);
}

static void run(int me)
{
    for (;;) {
        deep(me);
        swapcontext(&ctx[me], &ctx[1 - me]);
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: twostacks FILE NAP_US\n");
        return 2;
    }
    maybe_pin();
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0) {
        perror("open");
        return 1;
    }
    nap_us = atol(argv[2]);
    /* The stacks first: above the file's maps, so that a maps reader goes
     * through those first. A guard page keeps them two mappings. */
    size_t size = 1 << 20;
    for (int i = 0; i < 2; i++) {
        char *stack = mmap(NULL, size, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (stack == MAP_FAILED) {
            perror("mmap");
            return 1;
        }
        mprotect(stack, 4096, PROT_NONE);
        getcontext(&ctx[i]);
        ctx[i].uc_stack.ss_sp = stack;
        ctx[i].uc_stack.ss_size = size;
        ctx[i].uc_link = &done;
        makecontext(&ctx[i], (void (*)(void))run, 1, i);
    }
    for (int i = 0; i < 1300; i++) {
        char *p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            perror("mmap");
            return 1;
        }
        /* A hole above each: no two of them merge. */
        mmap(p + 4096, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    }
    printf("ready\n");
    fflush(stdout);
    swapcontext(&done, &ctx[0]);
    return 0;
}
