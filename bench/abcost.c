/* bench/abcost.c: what a kernel-side part of `offwake-perf -p PID` costs an
 * unrelated, busy workload, measured tightly enough to tell parts of a few
 * percent apart on a noisy machine.
 *
 *   abcost [--cpu] ROUNDS TRIPS MODE...
 *
 * Two processes pinned to CPU 0 play pipe ping-pong (as `perf bench sched
 * pipe` does). Each round runs TRIPS round trips untraced, then for each MODE
 * opens that mode's events (or starts its tracer), waits $ABCOST_SETTLE_MS
 * (default 300), runs TRIPS round trips, closes them and runs TRIPS round
 * trips untraced again. Each of those runs follows a tenth of one, not
 * measured, that warms CPU 0 up again after the pause, or after a tracer's
 * start or stop. Every traced run is divided by the mean
 * of the untraced runs just before and after it; the median over ROUNDS of
 * that ratio, per mode, goes to stdout with its quartiles (time per round
 * trip, so 1.05 means 5% slower). The events are about PID, an idle child
 * this program starts (it waits in pause(2) until the end). With --cpu, a
 * run's cost is the CPU time both players used (from /proc/PID/schedstat)
 * rather than its wall time. With ABCOST_RAW=FILE, every round's ratios go
 * to FILE too, a line a round and a column a mode.
 *
 * MODE is one of these, or several joined by '+' (as in waking+cstask;
 * offwake, offwakestop, bpftrace and the modes that stand for several parts,
 * tool, exact, exactsw and exactswrec, only alone):
 *   none        nothing (how far two untraced runs differ, the pause
 *               included)
 *   waking      sched_waking per CPU, callchains, filter `pid == PID`
 *   wakingtask  sched_waking per task (PID), per CPU: the tracepoint's probe
 *               formats every wakeup, and no per-CPU filter runs
 *   switch      sched_switch per task (PID), per CPU, callchains, inherited,
 *               PERF_SAMPLE_READ of time_running (the tool's switch events)
 *   cstask      the context-switches software event per task (PID), per
 *               CPU, callchains, inherited, PERF_SAMPLE_READ: switch-outs
 *               without the sched_switch tracepoint
 *   dummytask   a dummy software event per task (PID), per CPU: perf's
 *               context-switch hooks alone
 *   switchcpu   sched_switch per CPU, callchains, filter
 *               `prev_pid == PID || next_pid == PID`
 *   tool        waking + switch (the two events the tool needs)
 * and the tool's events exactly as it opens them (its attributes: every
 * event samples READ, wakes at a watermark, per-CPU ones are inherited):
 *   wakingfc    sched_waking per CPU, filter `pid == PID || (pid >= A &&
 *               pid <= B)`, A..B the next 64 pids (the tool's forecast)
 *   own         sched_switch per task, not inherited, READ (PID's own)
 *   kids        sched_switch per task, inherited, side-band records (comm,
 *               task, mmap), filter `prev_pid != PID`; sched_process_exit
 *               per task, inherited, filter `pid != PID` (for the threads
 *               PID creates)
 *   bigring     the rings the tool maps: 1024 data pages a CPU, not 64
 *   exact       wakingfc + own + kids + bigring
 *   ownsw, kidssw  own and kids with the context-switches software event
 *               in place of sched_switch (no filter: the kids' event
 *               samples PID too)
 *   exactsw     wakingfc + ownsw + kidssw + bigring
 *   records     with ownsw and kidssw: context-switch records as well (their
 *               preempt flag would stand in for prev_state)
 *   exactswrec  exactsw + records
 *   offwake     offwake-perf -f -p PID itself, from $ABCOST_TOOL, once it
 *               says tracing is active (its default call graph: dwarf)
 *   offwakefp   the same with --call-graph fp
 *   offwakestop the same, stopped (SIGSTOP) while measured: its events
 *               without its reading them
 *   bpftrace    bpftrace $ABCOST_BT PID (bench/offwake.bt: an eBPF tool's
 *               cost for the same question), once its probes are attached
 *
 * Build: cc -O2 -o abcost bench/abcost.c */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_FDS 256

static int fds[MAX_FDS];
static int nfds;

/* The rings mapped for the current mode, unmapped when it closes. */
static void *maps[MAX_FDS];
static size_t map_len[MAX_FDS];
static int nmaps;

static void die(const char *what)
{
    perror(what);
    exit(1);
}

/* The number a file begins with; exits 1, with `hint` after the message,
 * when it cannot be read. */
static long long read_number(const char *path, const char *hint)
{
    long long n;
    FILE *f = fopen(path, "r");
    if (f == NULL || fscanf(f, "%lld", &n) != 1) {
        fprintf(stderr, "abcost: cannot read %s%s\n", path, hint);
        exit(1);
    }
    fclose(f);
    return n;
}

static int tracepoint_id(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "/sys/kernel/tracing/events/sched/%s/id", name);
    return (int)read_number(path, " (is tracefs mounted?)");
}

static int open_event(struct perf_event_attr *a, int pid, int cpu)
{
    int fd = syscall(SYS_perf_event_open, a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0)
        die("abcost: perf_event_open");
    if (nfds == MAX_FDS) {
        fprintf(stderr, "abcost: too many events\n");
        exit(1);
    }
    fds[nfds++] = fd;
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

/* A sampling event (every hit) on the sched tracepoint `name`. */
static void tracepoint_attr(struct perf_event_attr *a, const char *name)
{
    base_attr(a);
    a->type = PERF_TYPE_TRACEPOINT;
    a->config = tracepoint_id(name);
    a->sample_period = 1;
}

/* Samples carry the event's time_running (PERF_SAMPLE_READ), as the tool's
 * per-task events do; inherited (by the threads PID creates) if `inherit`. */
static void read_running(struct perf_event_attr *a, int inherit)
{
    a->sample_type |= PERF_SAMPLE_READ;
    a->read_format = PERF_FORMAT_TOTAL_TIME_RUNNING;
    a->inherit = inherit;
    a->inherit_thread = inherit;
}

/* The event made the context-switches software event, every hit a sample
 * without raw data (no tracepoint record to carry). */
static void as_context_switches(struct perf_event_attr *a)
{
    a->type = PERF_TYPE_SOFTWARE;
    a->config = PERF_COUNT_SW_CONTEXT_SWITCHES;
    a->sample_period = 1;
    a->sample_type &= ~(unsigned long long)PERF_SAMPLE_RAW;
}

/* A tracepoint event as the tool opens it under -p: READ of time_running,
 * woken at a watermark, inherited (by the threads PID creates) if `inherit`. */
static void tool_attr(struct perf_event_attr *a, const char *name, int inherit)
{
    tracepoint_attr(a, name);
    read_running(a, inherit);
    a->watermark = 1;
    a->wakeup_watermark = 1 << 20;
}

/* The last pid the kernel allocated. */
static int last_pid(void)
{
    return (int)read_number("/proc/sys/kernel/ns_last_pid", "");
}

static void add(int fd, int owner, const char *filter)
{
    if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, owner))
        die("abcost: PERF_EVENT_IOC_SET_OUTPUT");
    if (filter && ioctl(fd, PERF_EVENT_IOC_SET_FILTER, filter))
        die("abcost: PERF_EVENT_IOC_SET_FILTER");
    if (ioctl(fd, PERF_EVENT_IOC_ENABLE, 0))
        die("abcost: PERF_EVENT_IOC_ENABLE");
}

/* Modes that stand for several parts. */
static const char *const aliases[][2] = {
    {"tool", "waking+switch"},
    {"exact", "wakingfc+own+kids+bigring"},
    {"exactsw", "wakingfc+ownsw+kidssw+bigring"},
    {"exactswrec", "wakingfc+ownsw+kidssw+bigring+records"},
};

/* MODE with an alias replaced by its parts. */
static const char *expand(const char *mode)
{
    for (size_t i = 0; i < sizeof aliases / sizeof *aliases; i++)
        if (strcmp(mode, aliases[i][0]) == 0)
            return aliases[i][1];
    return mode;
}

/* Whether MODE (parts joined by '+', or an alias) has `part`. */
static int has(const char *mode, const char *part)
{
    mode = expand(mode);
    size_t n = strlen(part);
    for (const char *p = mode; p != NULL; p = strchr(p, '+') ? strchr(p, '+') + 1 : NULL)
        if (strncmp(p, part, n) == 0 && (p[n] == '+' || p[n] == '\0'))
            return 1;
    return 0;
}

static void start_tool(int pid, int fp);
static void start_bpftrace(int pid);

/* Every traced run starts $ABCOST_SETTLE_MS (default 300) after its mode is
 * open or its tracer ready: a tracer's start-up settles meanwhile, and runs
 * under kernel modes follow the same pause as theirs (a run after a pause
 * was seen to be slower by itself, about half a point). */
static void settle(void)
{
    const char *ms = getenv("ABCOST_SETTLE_MS");
    usleep((useconds_t)(ms ? atoi(ms) : 300) * 1000);
}

static pid_t tool_pid;

static void open_mode(const char *mode, int pid)
{
    if (has(mode, "offwake") || has(mode, "offwakestop") || has(mode, "offwakefp"))
        start_tool(pid, has(mode, "offwakefp"));
    if (has(mode, "bpftrace"))
        start_bpftrace(pid);
    size_t pages = 1 + (has(mode, "bigring") ? 1024 : 64);
    int last = has(mode, "wakingfc") ? last_pid() : 0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    for (int cpu = 0; cpu < cpus; cpu++) {
        struct perf_event_attr a;
        char filter[96];
        base_attr(&a);
        a.type = PERF_TYPE_SOFTWARE;
        a.config = PERF_COUNT_SW_DUMMY;
        a.watermark = 1;
        a.wakeup_watermark = 1 << 18;
        int owner = open_event(&a, -1, cpu);
        size_t len = pages * sysconf(_SC_PAGESIZE);
        void *ring = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, owner, 0);
        if (ring == MAP_FAILED)
            die("abcost: mmap");
        maps[nmaps] = ring;
        map_len[nmaps++] = len;
        if (has(mode, "waking")) {
            tracepoint_attr(&a, "sched_waking");
            snprintf(filter, sizeof filter, "pid == %d", pid);
            add(open_event(&a, -1, cpu), owner, filter);
        }
        if (has(mode, "wakingtask")) {
            tracepoint_attr(&a, "sched_waking");
            a.inherit = 1;
            add(open_event(&a, pid, cpu), owner, NULL);
        }
        if (has(mode, "switch")) {
            tracepoint_attr(&a, "sched_switch");
            read_running(&a, 1);
            add(open_event(&a, pid, cpu), owner, NULL);
        }
        if (has(mode, "cstask")) {
            base_attr(&a);
            as_context_switches(&a);
            read_running(&a, 1);
            add(open_event(&a, pid, cpu), owner, NULL);
        }
        if (has(mode, "dummytask")) {
            base_attr(&a);
            a.type = PERF_TYPE_SOFTWARE;
            a.config = PERF_COUNT_SW_DUMMY;
            a.inherit = 1;
            add(open_event(&a, pid, cpu), owner, NULL);
        }
        if (has(mode, "wakingfc")) {
            tool_attr(&a, "sched_waking", 1);
            snprintf(filter, sizeof filter, "pid == %d || (pid >= %d && pid <= %d)", pid,
                     last + 1, last + 64);
            add(open_event(&a, -1, cpu), owner, filter);
        }
        if (has(mode, "own")) {
            tool_attr(&a, "sched_switch", 0);
            add(open_event(&a, pid, cpu), owner, NULL);
        }
        if (has(mode, "kids")) {
            tool_attr(&a, "sched_switch", 1);
            a.comm = a.comm_exec = a.task = a.mmap = a.mmap2 = 1;
            snprintf(filter, sizeof filter, "prev_pid != %d", pid);
            add(open_event(&a, pid, cpu), owner, filter);
            tool_attr(&a, "sched_process_exit", 1);
            snprintf(filter, sizeof filter, "pid != %d", pid);
            add(open_event(&a, pid, cpu), owner, filter);
        }
        if (has(mode, "ownsw") || has(mode, "kidssw")) {
            /* The own and kids events on the context-switches software
             * event instead: no filter can drop the thread's own samples
             * from the kids' event. */
            tool_attr(&a, "sched_switch", 0);
            as_context_switches(&a);
            a.context_switch = has(mode, "records");
            if (has(mode, "ownsw"))
                add(open_event(&a, pid, cpu), owner, NULL);
            if (has(mode, "kidssw")) {
                a.inherit = a.inherit_thread = 1;
                a.comm = a.comm_exec = a.task = a.mmap = a.mmap2 = 1;
                add(open_event(&a, pid, cpu), owner, NULL);
                tool_attr(&a, "sched_process_exit", 1);
                snprintf(filter, sizeof filter, "pid != %d", pid);
                add(open_event(&a, pid, cpu), owner, filter);
            }
        }
        if (has(mode, "switchcpu")) {
            tracepoint_attr(&a, "sched_switch");
            snprintf(filter, sizeof filter, "prev_pid == %d || next_pid == %d", pid, pid);
            add(open_event(&a, -1, cpu), owner, filter);
        }
        if (ioctl(owner, PERF_EVENT_IOC_ENABLE, 0))
            die("abcost: PERF_EVENT_IOC_ENABLE");
    }
    settle();
    /* Stopped, the tool keeps its events open and does nothing else. */
    if (has(mode, "offwakestop"))
        kill(tool_pid, SIGSTOP);
}

/* A tracer run as a process of its own (the offwake and bpftrace modes). */
static FILE *tool_out; /* the stream it says it is ready on */
static int tool_is_bpftrace;

static void start_process(char *const argv[], int ready_fd, const char *ready)
{
    int out[2];
    if (pipe(out))
        die("abcost: pipe");
    tool_pid = fork();
    if (tool_pid < 0)
        die("abcost: fork");
    if (tool_pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null < 0 || dup2(null, 3 - ready_fd) < 0 || dup2(out[1], ready_fd) < 0)
            die("abcost: redirect");
        /* Not pinned like this process: it goes where the kernel puts it. */
        cpu_set_t all;
        CPU_ZERO(&all);
        for (int c = 0; c < CPU_SETSIZE; c++)
            CPU_SET(c, &all);
        sched_setaffinity(0, sizeof all, &all);
        execvp(argv[0], argv);
        die("abcost: exec");
    }
    close(out[1]);
    tool_out = fdopen(out[0], "r");
    if (tool_out == NULL)
        die("abcost: fdopen");
    char line[512];
    for (;;) {
        if (fgets(line, sizeof line, tool_out) == NULL) {
            fprintf(stderr, "abcost: %s exited before saying \"%s\"\n", argv[0], ready);
            exit(1);
        }
        if (strstr(line, ready))
            return;
    }
}

/* How many perf events process `pid` has open. */
static int perf_fds(pid_t pid)
{
    char dir[64], path[384], target[64];
    int n = 0;
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        ssize_t len = readlink(path, target, sizeof target - 1);
        if (len > 0) {
            target[len] = '\0';
            n += strcmp(target, "anon_inode:[perf_event]") == 0;
        }
    }
    closedir(d);
    return n;
}

/* $VAR, which MODE needs (exits 2, saying so, when it is not set). */
static const char *need_env(const char *var, const char *mode, const char *example)
{
    const char *value = getenv(var);
    if (value == NULL) {
        fprintf(stderr, "abcost: the %s mode needs %s=%s\n", mode, var, example);
        exit(2);
    }
    return value;
}

static void start_tool(int pid, int fp)
{
    char p[16];
    snprintf(p, sizeof p, "%d", pid);
    const char *bin = need_env("ABCOST_TOOL", "offwake", "path/to/offwake-perf");
    setenv("OFFWAKE_TIMING", "1", 1);
    char *argv[] = {(char *)bin, "-f", "-p", p, fp ? "--call-graph" : NULL, "fp", NULL};
    start_process(argv, 2, "tracing active");
    tool_is_bpftrace = 0;
}

static void start_bpftrace(int pid)
{
    char p[16];
    snprintf(p, sizeof p, "%d", pid);
    const char *script = need_env("ABCOST_BT", "bpftrace", "path/to/offwake.bt");
    char *argv[] = {"bpftrace", (char *)script, p, NULL};
    start_process(argv, 1, "Attaching");
    tool_is_bpftrace = 1;
    /* "Attaching" comes before the probes are: attached means a perf event
     * per tracepoint (2) and bpftrace's per-CPU output buffers. */
    long want = sysconf(_SC_NPROCESSORS_ONLN) + 2;
    for (int i = 0; i < 500 && perf_fds(tool_pid) < want; i++)
        usleep(20000);
    if (perf_fds(tool_pid) < want)
        fprintf(stderr, "abcost: bpftrace has fewer perf events open than %ld; going on\n", want);
}

static void stop_tool(void)
{
    char line[512];
    int fd = fileno(tool_out);
    /* bpftrace has been seen to miss a SIGINT: it is sent again every 2 s. */
    kill(tool_pid, SIGCONT);
    for (int eof = 0; !eof;) {
        kill(tool_pid, SIGINT);
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        while (poll(&pfd, 1, 2000) > 0) {
            if (read(fd, line, sizeof line) <= 0) {
                eof = 1;
                break;
            }
        }
    }
    fclose(tool_out);
    int status;
    if (waitpid(tool_pid, &status, 0) < 0 ||
        (!tool_is_bpftrace && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))) {
        fprintf(stderr, "abcost: the tracer failed (status %d)\n", status);
        exit(1);
    }
    tool_pid = 0;
}

static void close_mode(void)
{
    if (tool_pid)
        stop_tool();
    for (int i = 0; i < nmaps; i++)
        munmap(maps[i], map_len[i]);
    nmaps = 0;
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    nfds = 0;
}

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set))
        die("abcost: sched_setaffinity");
}

static void read_all(int fd, void *buf, size_t n)
{
    if (read(fd, buf, n) != (ssize_t)n)
        die("abcost: read");
}

static void write_all(int fd, const void *buf, size_t n)
{
    if (write(fd, buf, n) != (ssize_t)n)
        die("abcost: write");
}

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Ping-pong pair pinned to CPU 0; returns the pid of the pinger. The pinger
 * reads a trip count from `ctl`, runs it and writes the elapsed ns to `res`. */
static int ctl[2], res[2];
static pid_t kids[2];

static pid_t parent, idle;

/* At exit, also after an error: the children go too (in the parent only). */
static void kill_children(void)
{
    if (getpid() != parent)
        return;
    pid_t *all[] = {&kids[0], &kids[1], &idle, &tool_pid};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        if (*all[i] > 0)
            kill(*all[i], SIGKILL);
        *all[i] = 0;
    }
}

static void start_pair(void)
{
    int ab[2], ba[2];
    if (pipe(ab) || pipe(ba) || pipe(ctl) || pipe(res))
        die("abcost: pipe");
    kids[1] = fork();
    if (kids[1] < 0)
        die("abcost: fork");
    if (kids[1] == 0) {
        pin(0);
        char c;
        for (;;) {
            read_all(ab[0], &c, 1);
            write_all(ba[1], &c, 1);
        }
    }
    kids[0] = fork();
    if (kids[0] < 0)
        die("abcost: fork");
    if (kids[0] == 0) {
        pin(0);
        long trips;
        char c = 'x';
        for (;;) {
            read_all(ctl[0], &trips, sizeof trips);
            long long t0 = now_ns();
            for (long i = 0; i < trips; i++) {
                write_all(ab[1], &c, 1);
                read_all(ba[0], &c, 1);
            }
            long long dt = now_ns() - t0;
            write_all(res[1], &dt, sizeof dt);
        }
    }
}

/* Nanoseconds `pid` has run on a CPU (the first field of its schedstat). */
static long long runtime_ns(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/schedstat", (int)pid);
    return read_number(path, "");
}

static int use_cpu;

/* Runs `trips` round trips; returns the nanoseconds each took, of wall time
 * or (with use_cpu) of both players' CPU time. */
static double run(long trips)
{
    long long dt;
    long long cpu0 = runtime_ns(kids[0]) + runtime_ns(kids[1]);
    write_all(ctl[1], &trips, sizeof trips);
    read_all(res[0], &dt, sizeof dt);
    if (use_cpu)
        dt = runtime_ns(kids[0]) + runtime_ns(kids[1]) - cpu0;
    return (double)dt / trips;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--cpu") == 0) {
        use_cpu = 1;
        argv++;
        argc--;
    }
    if (argc < 4) {
        fprintf(stderr, "usage: abcost [--cpu] ROUNDS TRIPS MODE...\n");
        return 2;
    }
    int rounds = atoi(argv[1]);
    long trips = atol(argv[2]);
    int modes = argc - 3;
    char **mode = argv + 3;
    if (rounds < 1 || trips < 1)
        return fprintf(stderr, "abcost: ROUNDS and TRIPS must be positive\n"), 2;
    static const char *known[] = {"none",     "waking",   "wakingtask", "switch",      "cstask",
                                  "dummytask", "switchcpu", "wakingfc",  "own",         "kids",
                                  "bigring",  "ownsw",    "kidssw",     "records",     "offwake",
                                  "offwakestop", "offwakefp", "bpftrace"};
    for (int m = 0; m < modes; m++) {
        if ((has(mode[m], "offwake") || has(mode[m], "offwakestop") || has(mode[m], "offwakefp") ||
             has(mode[m], "bpftrace")) &&
            strchr(mode[m], '+'))
        {
            fprintf(stderr, "abcost: %s: the offwake modes and bpftrace run alone\n", mode[m]);
            return 2;
        }
        char copy[256];
        snprintf(copy, sizeof copy, "%s", expand(mode[m]));
        for (char *save, *p = strtok_r(copy, "+", &save); p; p = strtok_r(NULL, "+", &save)) {
            int ok = 0;
            for (size_t k = 0; k < sizeof known / sizeof *known; k++)
                ok |= strcmp(p, known[k]) == 0;
            if (!ok)
                return fprintf(stderr, "abcost: unknown mode %s\n", p), 2;
        }
    }
    double *ratio = calloc((size_t)modes * rounds, sizeof *ratio);
    double *base = calloc((size_t)rounds, sizeof *base);
    if (!ratio || !base)
        die("abcost: calloc");
    parent = getpid();
    atexit(kill_children);
    pid_t pid = idle = fork();
    if (pid < 0)
        die("abcost: fork");
    if (pid == 0) {
        pause();
        _exit(0);
    }
    start_pair();
    pin(1);
    run(trips); /* warm up */
    for (int r = 0; r < rounds; r++) {
        double before = run(trips);
        base[r] = before;
        for (int m = 0; m < modes; m++) {
            /* After a pause, or a tracer's start or stop (which may have
             * run on CPU 0), a tenth of a run warms the pair up again. */
            open_mode(mode[m], pid);
            run(trips / 10 + 1);
            double traced = run(trips);
            close_mode();
            run(trips / 10 + 1);
            double after = run(trips);
            ratio[m * rounds + r] = traced * 2 / (before + after);
            before = after;
        }
        fprintf(stderr, "abcost: round %d/%d done (%.0f ns a trip untraced)\n", r + 1, rounds, base[r]);
    }
    /* $ABCOST_RAW: every round's ratios, a line a round, a column a mode
     * (for paired comparisons of modes measured in the same rounds). */
    const char *raw = getenv("ABCOST_RAW");
    if (raw) {
        FILE *f = fopen(raw, "w");
        if (f == NULL)
            die("abcost: ABCOST_RAW");
        for (int m = 0; m < modes; m++)
            fprintf(f, "%s%s", m ? " " : "", mode[m]);
        fputc('\n', f);
        for (int r = 0; r < rounds; r++)
            for (int m = 0; m < modes; m++)
                fprintf(f, "%.5f%c", ratio[m * rounds + r], m + 1 < modes ? ' ' : '\n');
        fclose(f);
    }
    pid_t ours[] = {kids[0], kids[1], idle};
    kill_children();
    for (size_t i = 0; i < sizeof ours / sizeof *ours; i++)
        waitpid(ours[i], NULL, 0);
    qsort(base, rounds, sizeof *base, cmp);
    printf("untraced: median %.0f ns a round trip\n", base[rounds / 2]);
    for (int m = 0; m < modes; m++) {
        double *v = ratio + m * rounds;
        qsort(v, rounds, sizeof *v, cmp);
        printf("%-12s median %.4f  quartiles %.4f %.4f\n", mode[m], v[rounds / 2], v[rounds / 4],
               v[rounds * 3 / 4]);
    }
    return 0;
}
