/* mmapstorm FILE: maps the first page of FILE read+exec at a new address
 * and unmaps it, again and again, napping 1 ms every 100 maps (perf
 * records each map, and no unmap). Runs on CPU 0 with OFFWAKE_PIN_CPU=0.
 * Prints "ready" once the first map is made. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "rawsys.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: mmapstorm FILE\n");
        return 2;
    }
    maybe_pin();
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0) {
        perror("open");
        return 1;
    }
    /* A range of new addresses: reserved, then freed for the maps. */
    size_t span = 1UL << 34;
    char *base = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    munmap(base, span);
    struct timespec nap = {0, 1000000};
    for (unsigned long i = 0;; i++) {
        char *at = base + ((i % (span >> 12)) << 12);
        void *p = mmap(at, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED_NOREPLACE, fd, 0);
        if (p != MAP_FAILED)
            munmap(p, 4096);
        if (i == 0) {
            printf("ready\n");
            fflush(stdout);
        }
        if (i % 100 == 99)
            nanosleep(&nap, NULL);
    }
}
