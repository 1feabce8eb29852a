# shellcheck shell=bash
# Helpers shared by the bench/ scripts (sourced, not run).
# Needs bash 5 ($EPOCHREALTIME: wall-clock seconds with microseconds).

# The caller sets $prog (its name, for messages). Functions below return values
# in global variables (stop_s, lost, ...), read by the caller (hence the
# file-wide SC2034 below).
# shellcheck disable=SC2034
: "${prog:=bench}"
bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$bench_dir")
# rustup's cargo, when the shell that started us did not source its env.
if [ -d "$HOME/.cargo/bin" ]; then PATH=$HOME/.cargo/bin:$PATH; fi

log() { printf '%s: %s\n' "$prog" "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

# Background processes still running, to end on exit: PIDs, or -PGID for a
# process group. Each is removed with `forget` once it has been waited for, so
# a recycled PID is never signalled.
bg=()
forget() {
    local p keep=()
    for p in "${bg[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
    bg=("${keep[@]}")
}
tmp=$(mktemp -d "/tmp/offwake-bench.XXXXXX")
cleanup() {
    local sig p live
    trap - EXIT INT TERM
    # SIGINT first, so tracers clean up; then SIGTERM, then SIGKILL.
    for sig in INT TERM KILL; do
        live=()
        for p in "${bg[@]}"; do kill -0 -- "$p" 2>/dev/null && live+=("$p"); done
        [ ${#live[@]} -eq 0 ] && break
        for p in "${live[@]}"; do kill -s "$sig" -- "$p" 2>/dev/null || true; done
        for _ in $(seq 1 20); do
            sleep 0.1
            for p in "${live[@]}"; do kill -0 -- "$p" 2>/dev/null && continue 2; done
            break
        done
    done
    if [ -n "${BENCH_KEEP_TMP:-}" ]; then
        log "kept $tmp"
    else
        rm -rf "$tmp"
    fi
}
trap cleanup EXIT
# Under set -e a failing command would otherwise end the script without a word.
set -E
trap 'log "error: exit status $? at ${BASH_SOURCE[0]##*/} line $LINENO: $BASH_COMMAND"' ERR
trap 'exit 130' INT
trap 'exit 143' TERM

# Installs bpftrace, perf and GNU time when missing (Debian packages).
install_tools() {
    local need=()
    command -v bpftrace >/dev/null 2>&1 || need+=(bpftrace)
    command -v perf >/dev/null 2>&1 || need+=(linux-perf)
    [ -x /usr/bin/time ] || need+=(time)
    command -v taskset >/dev/null 2>&1 || need+=(util-linux)
    if [ "$prog" = fidelity ]; then
        command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
    fi
    if [ ${#need[@]} -gt 0 ]; then
        log "installing ${need[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2
        apt-get install -y -qq "${need[@]}" >&2
    fi
}

# Sets $bin: $OFFWAKE_BIN, or a fresh release build of the repo.
build_tool() {
    if [ -n "${OFFWAKE_BIN:-}" ]; then
        bin=$OFFWAKE_BIN
    else
        command -v cargo >/dev/null 2>&1 || die "cargo not found (see the README's Quick start), or set OFFWAKE_BIN"
        log "building offwake-perf (cargo build --release --locked)"
        (cd "$repo" && cargo build --release --locked >&2)
        local target=${CARGO_TARGET_DIR:-target}
        case $target in /*) ;; *) target=$repo/$target ;; esac
        bin=$target/release/offwake-perf
    fi
    [ -x "$bin" ] || die "no executable at $bin"
}

# Seconds elapsed between two $EPOCHREALTIME readings.
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

# Median of the numeric arguments ("n/a" arguments are ignored).
median() {
    printf '%s\n' "$@" | { grep -E '^[0-9.]+$' || true; } | sort -g |
        awk '{ v[NR] = $1 } END {
            if (NR == 0) print "n/a";
            else if (NR % 2) print v[(NR + 1) / 2];
            else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# wait_for FILE REGEX PID SECONDS [LOG]: waits until FILE has a line matching
# REGEX; fails, showing FILE and LOG, if PID exits first or the time runs out.
wait_for() {
    local file=$1 re=$2 pid=$3 deadline
    deadline=$(awk -v t="$EPOCHREALTIME" -v s="$4" 'BEGIN { printf "%d", t + s }')
    until grep -Eq -- "$re" "$file" 2>/dev/null; do
        if ! kill -0 "$pid" 2>/dev/null; then
            cat "$file" ${5:+"$5"} 2>/dev/null | sed 's/^/    /' >&2 || true
            die "process $pid exited before printing /$re/ in $file"
        fi
        [ "${EPOCHREALTIME%.*}" -lt "$deadline" ] || die "timed out waiting for /$re/ in $file"
        sleep 0.02
    done
}

# Tracers someone else is running slow every condition down: check_foreign
# [PID...], called before each condition starts its own tracer, notes them,
# leaving out the PIDs given and their children (the caller's own load).
# Sets foreign_runs (the calls that found one) and foreign_names (their comms).
foreign_runs=0
declare -A foreign_names=()
# shellcheck disable=SC2120 # (the PIDs are optional)
check_foreign() {
    local pid ppid c args seen=0
    while read -r pid ppid c args; do
        case $c in offwake-perf | bpftrace | perf | trace-cmd) ;; *) continue ;; esac
        case " $* " in *" $pid "* | *" $ppid "*) continue ;; esac
        log "  note: already running: $pid $args"
        foreign_names[$c]=1
        seen=1
    done < <(ps -eo pid=,ppid=,comm=,args=)
    foreign_runs=$((foreign_runs + seen))
}

# start_offwake TAG ARGS...: starts offwake-perf ARGS under GNU time and waits
# until its tracing is active. Sets $tool_pid (offwake-perf) and $time_pid.
# Output goes to $tmp/TAG.{out,err,time}.
start_offwake() {
    local tag=$1
    shift
    rm -f "$tmp/$tag.pid"
    # sh writes its PID and execs the tool: SIGINT must reach the tool itself,
    # since GNU time ignores it.
    # shellcheck disable=SC2016
    OFFWAKE_TIMING=1 /usr/bin/time -f 'time %M %U %S' -o "$tmp/$tag.time" \
        sh -c 'echo $$ > "$0"; exec "$@"' "$tmp/$tag.pid" "$bin" "$@" \
        >"$tmp/$tag.out" 2>"$tmp/$tag.err" &
    time_pid=$!
    bg+=("$time_pid")
    wait_for "$tmp/$tag.err" 'tracing active' "$time_pid" 60
    tool_pid=$(cat "$tmp/$tag.pid")
    bg+=("$tool_pid")
}

# stop_offwake TAG: SIGINT to the tool, waits for its exit (report written).
# Sets stop_s, rss_mib, cpu_s, lost, records, intervals.
stop_offwake() {
    local tag=$1 t0 t1 rc=0
    t0=$EPOCHREALTIME
    kill -INT "$tool_pid"
    wait "$time_pid" || rc=$?
    t1=$EPOCHREALTIME
    forget "$time_pid"
    forget "$tool_pid"
    stop_s=$(elapsed "$t0" "$t1")
    finish_offwake "$tag" "$rc"
}

# finish_offwake TAG RC: reads what a finished run left (see stop_offwake).
finish_offwake() {
    local tag=$1 rc=$2 line
    line=$(grep -E '^offwake-perf: [0-9]+ records? read' "$tmp/$tag.err" | tail -n 1) || true
    if [ "$rc" -ne 0 ] || [ -z "$line" ]; then
        sed 's/^/    /' "$tmp/$tag.err" >&2
        die "offwake-perf ($tag) exited with status $rc without its summary line"
    fi
    records=$(sed -E 's/^offwake-perf: ([0-9]+) records? read.*/\1/' <<<"$line")
    lost=$(sed -E 's/.* ([0-9]+) lost;.*/\1/' <<<"$line")
    intervals=$(sed -E 's/.*; ([0-9]+) intervals? counted.*/\1/' <<<"$line")
    # GNU time: "time MAXRSS_KIB USER_S SYS_S" (last line; a first line may say
    # the command exited non-zero).
    read -r _ rss_kib user_s sys_s < <(grep '^time ' "$tmp/$tag.time" | tail -n 1) ||
        die "no GNU time line in $tmp/$tag.time"
    rss_mib=$(awk -v k="$rss_kib" 'BEGIN { printf "%.1f", k / 1024 }')
    cpu_s=$(awk -v u="$user_s" -v s="$sys_s" 'BEGIN { printf "%.2f", u + s }')
}

# start_bpftrace TAG ARGS...: runs bench/offwake.bt with ARGS (positional
# parameters) and waits until its probes are attached. Sets $bt_pid.
start_bpftrace() {
    local tag=$1 want n
    shift
    # Raising RLIMIT_MEMLOCK needs CAP_SYS_RESOURCE; where it fails, bpftrace
    # warns, harmlessly on kernels >= 5.11 (BPF memory is charged to memcg).
    (
        ulimit -l unlimited 2>/dev/null || true
        exec bpftrace "$bench_dir/offwake.bt" "$@"
    ) >"$tmp/$tag.out" 2>"$tmp/$tag.err" &
    bt_pid=$!
    bg+=("$bt_pid")
    wait_for "$tmp/$tag.out" '^Attaching' "$bt_pid" 120 "$tmp/$tag.err"
    # "Attaching" is printed before the probes attach. Attached means one perf
    # event per tracepoint (2) plus bpftrace's per-CPU output buffers.
    want=$(($(nproc) + 2))
    for _ in $(seq 1 500); do
        # (find fails when a descriptor closes under it: not an error here.)
        n=$({ find "/proc/$bt_pid/fd" -lname 'anon_inode:\[perf_event\]' 2>/dev/null || true; } | wc -l)
        [ "$n" -ge "$want" ] && break
        kill -0 "$bt_pid" 2>/dev/null || die "bpftrace exited: $(cat "$tmp/$tag.err")"
        sleep 0.02
    done
    [ "$n" -ge "$want" ] || log "warning: bpftrace has $n perf events open, expected $want; going on"
    sleep 0.2
}

# stop_bpftrace: SIGINT, waits until it has printed its maps.
stop_bpftrace() {
    # bpftrace has been seen to miss a SIGINT (it slept on in epoll_wait):
    # the signal is sent again every 2 s until it exits.
    local i
    for i in $(seq 1 30); do
        kill -INT "$bt_pid" 2>/dev/null || break
        for _ in $(seq 1 20); do
            kill -0 "$bt_pid" 2>/dev/null || break 2
            sleep 0.1
        done
        log "bpftrace is still running after SIGINT $i; sending another"
    done
    wait "$bt_pid" || true
    forget "$bt_pid"
}

# start_up_run CACHE BINARY ARGS...: one `BINARY -f ARGS -- true`, with
# XDG_CACHE_HOME=CACHE (made here: the tool creates only its own directory
# in it) and OFFWAKE_TIMING=1. Sets su_ms (launch to exit, ms), su_active
# (its "tracing active" ms, - without one) and su_timing (its phase line,
# empty from builds without one).
start_up_run() {
    local cache=$1 b=$2 t0 t1
    shift 2
    mkdir -p "$cache"
    t0=$EPOCHREALTIME
    XDG_CACHE_HOME=$cache OFFWAKE_TIMING=1 "$b" -f "$@" -- true >/dev/null 2>"$tmp/startup.err" ||
        die "$b -f $* -- true failed: $(cat "$tmp/startup.err")"
    t1=$EPOCHREALTIME
    su_ms=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) * 1000 }')
    su_active=$(sed -nE 's/.*tracing active ([0-9.]+) ms after launch.*/\1/p' "$tmp/startup.err" | head -n 1)
    su_active=${su_active:--}
    su_timing=$(grep '^offwake-perf: timing (ms):' "$tmp/startup.err" || true)
}

# phase_ms NAME: the time of phase NAME in $su_timing, - when absent.
phase_ms() {
    local x
    x=$(sed -nE "s/.*[:,] $1 ([0-9.]+)[,;].*/\\1/p" <<<"$su_timing")
    echo "${x:--}"
}
