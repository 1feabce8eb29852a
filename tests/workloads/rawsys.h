/* Raw system calls issued from a function of our own (not libc), so that the
 * first user frame of a blocked stack is a known function even though
 * Debian's libc is built without frame pointers. Compile with
 * -O0 -fno-omit-frame-pointer. */
#ifndef RAWSYS_H
#define RAWSYS_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>

#if defined(__x86_64__)
__attribute__((noinline)) static long raw_syscall3(long n, long a, long b, long c)
{
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a), "S"(b), "d"(c)
                     : "rcx", "r11", "memory");
    return ret;
}
#else
#include <unistd.h>
__attribute__((noinline)) static long raw_syscall3(long n, long a, long b, long c)
{
    return syscall(n, a, b, c);
}
#endif

/* Monotonic microseconds. */
static long long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

/* With OFFWAKE_PIN_CPU=N in the environment, runs on CPU N only. */
static void maybe_pin(void)
{
    const char *cpu = getenv("OFFWAKE_PIN_CPU");
    if (cpu == NULL)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(atoi(cpu), &set);
    sched_setaffinity(0, sizeof(set), &set);
}

/* Blocks until a byte arrives on stdin (or it closes): lets a test start the
 * measured part only once the tracer is attached. */
static void wait_for_go(void)
{
    char c;
    raw_syscall3(SYS_read, 0, (long)&c, 1);
}
#endif
