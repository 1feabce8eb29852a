/* hold: keeps the scheduler tracepoints that the tests use in use for the
 * whole life of a test VM, then sleeps until killed.
 *
 * Enabling a tracepoint, or giving it a second probe, patches kernel text
 * that other CPUs may be running (static keys and static calls, through
 * int3). qemu's multi-threaded TCG does not emulate that safely: a vCPU can
 * run the old text after the patch is done, which oopsed or locked up some
 * guests. With a perf probe and an ftrace probe on each tracepoint from the
 * start, the tests' own events change no patched site: the key is already
 * on, and the call already goes through the iterator for two or more
 * probes. The ftrace instance filters out every event, and the perf events
 * only count, so the guest pays almost nothing for them.
 *
 * Usage: hold TRACEFS-DIR EVENT... (EVENT as sched/sched_switch) */
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        perror(path);
        return -1;
    }
    return 0;
}

static long open_event(unsigned long long config, unsigned type, int pid, int cpu)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = type;
    a.config = config;
    return syscall(SYS_perf_event_open, &a, pid, cpu, -1, 0);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: hold TRACEFS-DIR EVENT...\n");
        return 2;
    }
    const char *tracefs = argv[1];
    char path[512];
    snprintf(path, sizeof path, "%s/instances/vm-hold", tracefs);
    if (mkdir(path, 0700) != 0) {
        perror(path);
        return 1;
    }
    /* A per-task event turns on perf's context-switch hooks for good. */
    if (open_event(PERF_COUNT_SW_DUMMY, PERF_TYPE_SOFTWARE, 0, -1) < 0)
        perror("perf_event_open(dummy)");
    for (int i = 2; i < argc; i++) {
        snprintf(path, sizeof path, "%s/events/%s/id", tracefs, argv[i]);
        FILE *f = fopen(path, "r");
        unsigned long long id;
        if (!f || fscanf(f, "%llu", &id) != 1) {
            perror(path);
            return 1;
        }
        fclose(f);
        if (open_event(id, PERF_TYPE_TRACEPOINT, -1, 0) < 0) {
            perror(argv[i]);
            return 1;
        }
        snprintf(path, sizeof path, "%s/instances/vm-hold/events/%s/filter", tracefs, argv[i]);
        if (put(path, "common_pid < 0") != 0)
            return 1;
        snprintf(path, sizeof path, "%s/instances/vm-hold/events/%s/enable", tracefs, argv[i]);
        if (put(path, "1") != 0)
            return 1;
    }
    printf("holding %d tracepoints\n", argc - 2);
    fflush(stdout);
    for (;;)
        pause();
}
