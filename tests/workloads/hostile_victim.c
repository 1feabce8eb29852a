/* hostile_victim [options] FILE: the unprivileged victim of tests/hostile.rs.
 * Maps the first page of FILE read+exec and blocks, again and again, in
 * pause(2) made through the x86-64 stub(s) at offset -o in it (mov rax,rdi;
 * mov rdi,rsi; mov rsi,rdx; syscall; ret), so every off-CPU user stack of
 * the main thread starts inside FILE, whose symbols and DWARF the test
 * crafted. A clock thread ("hv-clock") spins and sends the main thread
 * SIGUSR1 every -s ms: the main thread's waker is always this process
 * (never a process that a timer interrupt happened to hit, whose files
 * the tool would symbolize too). Everything runs on CPU 0.
 *
 * Options, applied in this order whatever their order on the line:
 *   -n COMM      set the comm (PR_SET_NAME)
 *   -N COMM      set the clock thread's comm, the waker's (default hv-clock)
 *   -r DIR       chroot into DIR (needs root), then -u/-g drop to a user
 *   -u UID -g GID  setgroups(0), setgid, setuid (numbers: no NSS in a jail)
 *   -D DIR       mkdir DIR (repeatable, in order)
 *   -L TGT:LINK  symlink TGT at LINK (repeatable, in order)
 *   -o OFF       stub offset in FILE (default 0x800); -k N stubs, 16 bytes
 *                apart, used in turn
 *   -s MS        period of the wakeups (default 10); -c N wakeups then exit
 *                (default: until killed, 300 s at most)
 *   -q           do not print "ready"
 *   -T MS        MS ms after someone else opens FILE, truncate it to one
 *                page (the stub stays valid for us)
 *   -S MS        MS ms after start, a child process starts swapping FILE
 *                between a FIFO and empty regular files, each a new inode
 *                (rename), as fast as it can
 * Prints "ready" on stdout once FILE is mapped (and -T armed), unless -q. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_LIST 16

typedef long (*stub_fn)(long nr, void *a, void *b);

static const char *file;

static void die(const char *what)
{
    perror(what);
    exit(111);
}

static int inotify_fd;
static long truncate_after_ms = -1;

/* -T: after an IN_OPEN of FILE (by anyone), cut it to its first page. */
static void *truncate_on_open(void *arg)
{
    (void)arg;
    char buf[4096];
    struct timespec delay = { truncate_after_ms / 1000,
                              (truncate_after_ms % 1000) * 1000000L };
    for (;;) {
        ssize_t n = read(inotify_fd, buf, sizeof buf);
        if (n <= 0)
            return NULL;
        nanosleep(&delay, NULL);
        if (truncate(file, 4096) != 0)
            perror("truncate");
    }
}

#define POOL 4096

/* -S: a child process (untraced: -p names the victim only) that, swap_ms
 * after it starts, swaps forever: a FIFO, then one of POOL empty regular
 * files, are renamed over FILE, so FILE is a FIFO for one rename each
 * round and a regular file the rest of the time. The regular files keep a
 * second name, so their inode numbers stay distinct (a freed one is
 * reused at once): a reader that caches files by inode opens each anew. */
static void swap_forever(long swap_ms)
{
    static char keep[POOL][4096];
    char reg[4096], fifo[4096];
    struct timespec delay = { swap_ms / 1000, (swap_ms % 1000) * 1000000L };
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    prctl(PR_SET_NAME, "hv-swapper", 0, 0, 0);
    snprintf(reg, sizeof reg, "%s.r", file);
    snprintf(fifo, sizeof fifo, "%s.p", file);
    for (int i = 0; i < POOL; i++) {
        snprintf(keep[i], sizeof keep[i], "%s.k%d", file, i);
        if (mknod(keep[i], S_IFREG | 0644, 0) != 0)
            die("mknod");
    }
    nanosleep(&delay, NULL);
    for (int i = 0;; i = (i + 1) % POOL) {
        if (link(keep[i], reg) != 0)
            die("link");
        if (mkfifo(fifo, 0644) != 0)
            die("mkfifo");
        if (rename(fifo, file) != 0)
            die("rename fifo");
        if (rename(reg, file) != 0)
            die("rename regular file");
    }
}

static long period_ms = 10, swap_after_ms = -1;
static const char *clock_comm = "hv-clock";

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Spins (never sleeps: a sleep would be woken by whatever a timer
 * interrupt hits), signalling the main thread every period_ms. With -S it
 * runs as SCHED_IDLE, so that it leaves CPU 0 to the swapper. */
static void *clock_thread(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, clock_comm, 0, 0, 0);
    if (swap_after_ms >= 0) {
        struct sched_param idle = { 0 };
        pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle);
    }
    long long next = now_ms() + period_ms;
    pid_t pid = getpid();
    for (;;) {
        long long now = now_ms();
        if (now >= next) {
            if (syscall(SYS_tgkill, pid, pid, SIGUSR1) != 0)
                die("tgkill");
            next += period_ms;
        }
    }
    return NULL;
}

static void tick(int sig)
{
    (void)sig;
}

int main(int argc, char **argv)
{
    const char *comm = NULL, *jail = NULL, *dirs[MAX_LIST], *links[MAX_LIST];
    int ndirs = 0, nlinks = 0, stubs = 1, quiet = 0;
    long uid = -1, gid = -1, off = 0x800, count = -1;
    int opt;
    while ((opt = getopt(argc, argv, "n:N:r:u:g:D:L:o:k:s:c:qT:S:")) != -1) {
        switch (opt) {
        case 'n': comm = optarg; break;
        case 'N': clock_comm = optarg; break;
        case 'r': jail = optarg; break;
        case 'u': uid = strtol(optarg, NULL, 0); break;
        case 'g': gid = strtol(optarg, NULL, 0); break;
        case 'D': if (ndirs < MAX_LIST) dirs[ndirs++] = optarg; break;
        case 'L': if (nlinks < MAX_LIST) links[nlinks++] = optarg; break;
        case 'o': off = strtol(optarg, NULL, 0); break;
        case 'k': stubs = atoi(optarg); break;
        case 's': period_ms = atol(optarg); break;
        case 'c': count = atol(optarg); break;
        case 'q': quiet = 1; break;
        case 'T': truncate_after_ms = atol(optarg); break;
        case 'S': swap_after_ms = atol(optarg); break;
        default: return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "usage: hostile_victim [options] FILE\n");
        return 2;
    }
    file = argv[optind];
    if (count < 0)
        alarm(300);

    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    sched_setaffinity(0, sizeof set, &set);
    if (comm != NULL)
        prctl(PR_SET_NAME, comm, 0, 0, 0);
    if (jail != NULL && (chroot(jail) != 0 || chdir("/") != 0))
        die("chroot");
    if (gid >= 0 && (setgroups(0, NULL) != 0 || setgid(gid) != 0))
        die("setgid");
    if (uid >= 0 && setuid(uid) != 0)
        die("setuid");
    for (int i = 0; i < ndirs; i++)
        if (mkdir(dirs[i], 0755) != 0)
            die(dirs[i]);
    for (int i = 0; i < nlinks; i++) {
        char *colon = strchr(links[i], ':');
        if (colon == NULL)
            return 2;
        *colon = '\0';
        if (symlink(links[i], colon + 1) != 0)
            die(colon + 1);
    }

    int fd = open(file, O_RDONLY);
    if (fd < 0)
        die(file);
    char *base = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
    if (base == MAP_FAILED)
        die("mmap");
    close(fd);

    if (swap_after_ms >= 0) {
        pid_t child = fork();
        if (child < 0)
            die("fork");
        if (child == 0)
            swap_forever(swap_after_ms);
    }
    pthread_t thread;
    if (truncate_after_ms >= 0) {
        inotify_fd = inotify_init1(IN_CLOEXEC);
        if (inotify_fd < 0 || inotify_add_watch(inotify_fd, file, IN_OPEN) < 0)
            die("inotify");
        if (pthread_create(&thread, NULL, truncate_on_open, NULL) != 0)
            die("pthread_create");
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = tick;
    if (sigaction(SIGUSR1, &sa, NULL) != 0)
        die("sigaction");
    if (pthread_create(&thread, NULL, clock_thread, NULL) != 0)
        die("pthread_create");
    if (!quiet) {
        printf("ready\n");
        fflush(stdout);
    }

    for (long i = 0; count < 0 || i < count; i++) {
        stub_fn stub = (stub_fn)(base + off + (i % stubs) * 16);
        stub(SYS_pause, NULL, NULL);
    }
    return 0;
}
