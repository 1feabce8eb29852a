/* manycgroups DIR N [rm]: under DIR, 14 nested directories of 250-byte
 * names, then N more of 250-byte names beside each other at the bottom:
 * paths of 3.8 KB, made with mkdirat in a few seconds (an unprivileged
 * user can do this in a cgroup subtree delegated to it). The bottom ones
 * are "wide<I>-xxx...". With "rm", removes them all, deepest first. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEPTH 14

/* TAG and I, then '-' and 'x' up to 250 bytes. */
static void name(char *buf, const char *tag, long i)
{
    int n = snprintf(buf, 251, "%s%ld-", tag, i);
    memset(buf + n, 'x', 250 - n);
    buf[250] = 0;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    long n = atol(argv[2]);
    int rm = argc > 3 && strcmp(argv[3], "rm") == 0;
    int fds[DEPTH + 1];
    char b[251];
    fds[0] = open(argv[1], O_RDONLY | O_DIRECTORY);
    if (fds[0] < 0) {
        perror(argv[1]);
        return 1;
    }
    for (int d = 0; d < DEPTH; d++) {
        name(b, "level", d);
        if (!rm && mkdirat(fds[d], b, 0755) && errno != EEXIST) {
            perror("mkdirat");
            return 1;
        }
        fds[d + 1] = openat(fds[d], b, O_RDONLY | O_DIRECTORY);
        if (fds[d + 1] < 0)
            return rm ? 0 : 1;
    }
    for (long i = 0; i < n; i++) {
        name(b, "wide", i);
        if (rm)
            unlinkat(fds[DEPTH], b, AT_REMOVEDIR);
        else if (mkdirat(fds[DEPTH], b, 0755) && errno != EEXIST) {
            perror("mkdirat");
            return 1;
        }
    }
    if (rm)
        for (int d = DEPTH - 1; d >= 0; d--) {
            name(b, "level", d);
            unlinkat(fds[d], b, AT_REMOVEDIR);
        }
    return 0;
}
