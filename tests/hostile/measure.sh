#!/usr/bin/env bash
# Runs every hostile case of tests/hostile.rs against one build of the tool
# and prints a table: how each run of the tool ended (exit code, signal,
# timeout, rss-cap), its peak RSS, its wall time, and the test's verdict.
# Needs root, like the tests.
#
#   tests/hostile/measure.sh [BINARY]
#
# BINARY defaults to the release build (built first). Each run is killed
# after OFFWAKE_HOSTILE_TIMEOUT seconds (default here 120) or once its RSS
# passes OFFWAKE_HOSTILE_RSS_CAP_MIB (default here 12288): unbounded cases
# really take GBs and minutes. The full log is kept in a temporary file.
set -euo pipefail
cd "$(dirname "$0")/../.."

target=${CARGO_TARGET_DIR:-target}
if [ $# -ge 1 ]; then
    bin=$(realpath "$1")
else
    cargo build --release --locked
    bin=$(realpath "$target/release/offwake-perf")
fi

log=$(mktemp /tmp/offwake-hostile-measure.XXXXXX)
echo "binary: $bin" >&2
echo "log: $log" >&2
OFFWAKE_HOSTILE_BIN=$bin \
    OFFWAKE_HOSTILE_TIMEOUT=${OFFWAKE_HOSTILE_TIMEOUT:-120} \
    OFFWAKE_HOSTILE_RSS_CAP_MIB=${OFFWAKE_HOSTILE_RSS_CAP_MIB:-12288} \
    OFFWAKE_REQUIRE_LIVE=1 \
    cargo test --locked --test integration hostile:: -- --test-threads=1 --nocapture >"$log" 2>&1 || true

# The verdicts: the last "failures:" block lists the failed tests.
failed=$(awk '/^failures:$/ { n++ } n == 2 && /^    [a-z_0-9]+$/ { print $1 }' "$log")
grep -o 'HOSTILE case=.*' "$log" | awk -v failed="$failed" '
    BEGIN { split(failed, f, "\n"); for (i in f) bad[f[i]] = 1 }
    {
        for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        t = v["case"]; sub(/_default$/, "", t)
        end_ = v["end"]; gsub(/_/, " ", end_)
        rows[++n] = sprintf("| %-34s | %-16s | %14s | %8s | %-6s |", v["case"], end_, v["peak_rss_mib"], v["wall_s"], (t in bad) ? "FAIL" : "pass")
    }
    END {
        printf "| %-34s | %-16s | %14s | %8s | %-6s |\n", "case", "end", "peak RSS (MiB)", "wall (s)", "test"
        print "|------------------------------------|------------------|----------------|----------|--------|"
        for (i = 1; i <= n; i++) print rows[i]
    }
'
grep -E '^test result:' "$log" || true
