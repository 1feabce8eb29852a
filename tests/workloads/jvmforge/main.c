/* jvmforge [ROUNDS]: a process that pretends to be a HotSpot 17 JVM (see
 * libjvm.c and README.md). Prints "ready", waits 0.5 s (the fake libjvm's
 * strides are still 0, like a JVM whose libjvm is not initialized yet),
 * then runs the attacks ROUNDS times (default 1, ~4.5 s each) and exits 0.
 *
 *   cc -shared -fPIC -O0 -g -fno-omit-frame-pointer -o libjvm.so libjvm.c
 *   cc -O0 -g -fno-omit-frame-pointer -o jvmforge main.c -L. -ljvm \
 *      -Wl,-rpath,'$ORIGIN'
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void forge_run(void);

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 1;
    if (rounds < 1)
        rounds = 1;
    printf("ready\n");
    fflush(stdout);
    struct timespec half = { 0, 500000000L };
    nanosleep(&half, NULL);
    for (long i = 0; i < rounds; i++)
        forge_run();
    return 0;
}
