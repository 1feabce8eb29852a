/* fifopoke PATH: opens PATH (a FIFO) for writing, writes one byte in poke(),
 * and exits at once: a short-lived waker of whoever reads PATH. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

__attribute__((noinline)) int poke(int fd)
{
    return write(fd, "x", 1) == 1 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fifopoke PATH\n");
        return 2;
    }
    int fd = open(argv[1], O_WRONLY);
    if (fd < 0) {
        perror(argv[1]);
        return 1;
    }
    return poke(fd);
}
