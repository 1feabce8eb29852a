/* bench/probe.c: holds the kernel side of `offwake-perf -p PID` one part at a
 * time, so that bench/components can tell what each part costs.
 *
 *   probe MODE PID
 *
 * MODE:
 *   waking    sched_waking on every CPU with callchains and a `pid == PID`
 *             filter (how the tool records the wakeups of traced threads)
 *   switch    sched_switch per task (PID), per CPU, with callchains, inherited
 *   switchcs  the same with context-switch records (the tool's switch-ins)
 *   all       waking + switchcs + comm/task/mmap records: what the tool
 *             opened before it read switch-ins from time_running
 *   allread   waking + switch with PERF_SAMPLE_READ (each sample carries the
 *             thread's time_running, from which a switch-in is derived) +
 *             comm/task/mmap records, no context-switch records: what the
 *             tool opens
 *
 * Every event writes into one ring per CPU (owned by a dummy event), as in the
 * tool. Prints "ready" on stderr once everything is enabled, then waits to be
 * killed. Build: cc -O2 -o probe bench/probe.c */
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static int tracepoint_id(const char *name)
{
    char path[256];
    int id = -1;
    snprintf(path, sizeof path, "/sys/kernel/tracing/events/sched/%s/id", name);
    FILE *f = fopen(path, "r");
    if (f == NULL || fscanf(f, "%d", &id) != 1) {
        fprintf(stderr, "probe: cannot read %s (is tracefs mounted?)\n", path);
        exit(1);
    }
    fclose(f);
    return id;
}

static int open_event(struct perf_event_attr *a, int pid, int cpu)
{
    int fd = syscall(SYS_perf_event_open, a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
        perror("probe: perf_event_open");
        exit(1);
    }
    return fd;
}

static void base_attr(struct perf_event_attr *a)
{
    memset(a, 0, sizeof *a);
    a->size = sizeof *a;
    a->sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                     PERF_SAMPLE_CPU | PERF_SAMPLE_RAW | PERF_SAMPLE_CALLCHAIN;
    a->sample_id_all = 1;
    a->use_clockid = 1;
    a->clockid = 1; /* CLOCK_MONOTONIC */
    a->disabled = 1;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: probe waking|switch|switchcs|all|allread PID\n");
        return 2;
    }
    const char *mode = argv[1];
    int pid = atoi(argv[2]);
    int read = strcmp(mode, "allread") == 0;
    int all = read || strcmp(mode, "all") == 0;
    int waking = all || strcmp(mode, "waking") == 0;
    int switches = all || strncmp(mode, "switch", 6) == 0;
    int cs = (all && !read) || strcmp(mode, "switchcs") == 0;
    if (!waking && !switches) {
        fprintf(stderr, "probe: unknown mode %s\n", mode);
        return 2;
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    for (int cpu = 0; cpu < cpus; cpu++) {
        struct perf_event_attr a;
        base_attr(&a);
        a.type = PERF_TYPE_SOFTWARE;
        a.config = PERF_COUNT_SW_DUMMY;
        a.watermark = 1;
        a.wakeup_watermark = 1 << 20;
        int owner = open_event(&a, -1, cpu);
        if (mmap(NULL, (1 + 256) * sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE,
                 MAP_SHARED, owner, 0) == MAP_FAILED) {
            perror("probe: mmap");
            return 1;
        }
        ioctl(owner, PERF_EVENT_IOC_ENABLE, 0);
        if (waking) {
            base_attr(&a);
            a.type = PERF_TYPE_TRACEPOINT;
            a.config = tracepoint_id("sched_waking");
            a.sample_period = 1;
            int fd = open_event(&a, -1, cpu);
            char filter[64];
            snprintf(filter, sizeof filter, "pid == %d", pid);
            if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, owner) ||
                ioctl(fd, PERF_EVENT_IOC_SET_FILTER, filter) ||
                ioctl(fd, PERF_EVENT_IOC_ENABLE, 0)) {
                perror("probe: sched_waking");
                return 1;
            }
        }
        if (switches) {
            base_attr(&a);
            a.type = PERF_TYPE_TRACEPOINT;
            a.config = tracepoint_id("sched_switch");
            a.sample_period = 1;
            a.inherit = 1;
            a.inherit_thread = 1;
            a.context_switch = cs;
            if (read) {
                a.sample_type |= PERF_SAMPLE_READ;
                a.read_format = PERF_FORMAT_TOTAL_TIME_RUNNING;
            }
            if (all) {
                a.comm = a.comm_exec = a.task = a.mmap = a.mmap2 = 1;
            }
            int fd = open_event(&a, pid, cpu);
            if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, owner) ||
                ioctl(fd, PERF_EVENT_IOC_ENABLE, 0)) {
                perror("probe: sched_switch");
                return 1;
            }
        }
    }
    fprintf(stderr, "ready\n");
    pause();
    return 0;
}
