//! Bad input: every rule of the command line gives a clear message and a
//! non-zero exit, never a panic. These need no privileges, but the one
//! that the kernel decides (ring sizes).

use crate::common::{live, run, suite};

fn expect_usage_error(args: &[&str], needle: &str) {
    let out = run(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(
        err.contains(needle),
        "{args:?}: expected {needle:?} in:\n{err}"
    );
    assert!(!err.contains("panicked"), "{args:?} panicked:\n{err}");
    assert!(out.stdout.is_empty(), "{args:?} wrote to stdout");
}

#[test]
fn exclusive_options() {
    let _suite = suite(module_path!());
    expect_usage_error(&["-p", "1", "-t", "1"], "cannot be used with");
    expect_usage_error(&["-p", "1", "-u"], "cannot be used with");
    expect_usage_error(&["-t", "1", "-k"], "cannot be used with");
    expect_usage_error(&["-u", "-k"], "cannot be used with");
    expect_usage_error(&["-U", "-K"], "cannot be used with");
    expect_usage_error(&["-p", "1", "--", "true"], "cannot be used with");
}

/// The usage printed with a refused `-i` is valid: both forms, not the
/// arguments given (`--input <FILE> [DURATION]`).
#[test]
fn usage_after_an_input_conflict_is_valid() {
    let _suite = suite(module_path!());
    let usage = "\nUsage: offwake-perf [OPTIONS] [DURATION] [-- <COMMAND>...]\n       \
                 offwake-perf -i <FILE> [OPTIONS]\n";
    for args in [
        &["-i", "perf.data", "2"][..],
        &["-i", "perf.data", "--", "true"],
    ] {
        expect_usage_error(args, "cannot be used with");
        expect_usage_error(args, usage);
        let err = String::from_utf8_lossy(&run(args).stderr).into_owned();
        assert!(!err.contains("--input <FILE> [DURATION]"), "{err}");
    }
}

#[test]
fn numbers() {
    let _suite = suite(module_path!());
    expect_usage_error(&["0"], "non-zero");
    expect_usage_error(&["abc"], "DURATION");
    expect_usage_error(
        &["1.5"],
        "DURATION is whole seconds: '1.5' is not a whole number of seconds",
    );
    // Past what a deadline on the clock holds: refused, not a panic later.
    for big in ["9223372036854775808", "18446744073709551615"] {
        expect_usage_error(&["-p", "1", big], "is too large");
        expect_usage_error(&[big], "DURATION is at most 4294967295 seconds");
    }
    expect_usage_error(&["-m", "0"], "non-zero");
    expect_usage_error(&["-M", "0"], "non-zero");
    expect_usage_error(&["--stack-storage-size", "0"], "non-zero");
    expect_usage_error(&["-m", "100", "-M", "10"], "must not be greater than");
    expect_usage_error(&["--mmap-pages", "100"], "power of two");
    expect_usage_error(&["--mmap-pages", "9223372036854775808"], "is too large");
    expect_usage_error(&["-p", "1,,2"], "empty entry");
    expect_usage_error(&["-p", "x"], "non-negative integer");
    expect_usage_error(&["-t", "0"], "non-zero");
    expect_usage_error(&["-m", "-1"], "unexpected argument");
    expect_usage_error(&["--backend", "bpf"], "invalid value");
    expect_usage_error(&["--bogus"], "unexpected argument");
}

#[test]
fn missing_targets_are_named() {
    let _suite = suite(module_path!());
    for (args, needle) in [
        (&["-p", "1,2147483646"][..], "2147483646"),
        (&["-t", "2147483645"][..], "2147483645"),
    ] {
        let out = run(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn unreportable_state_bits_are_refused() {
    let _suite = suite(module_path!());
    for n in ["256", "512", "8192", "32768", "257"] {
        expect_usage_error(&["--state", n, "1"], "never");
    }
}

#[test]
fn help_has_examples() {
    let _suite = suite(module_path!());
    let out = run(&["--help"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for opt in [
        "--pid",
        "--tid",
        "--user-threads-only",
        "--kernel-threads-only",
        "--user-stacks-only",
        "--kernel-stacks-only",
        "--delimited",
        "--folded",
        "--min-block-time",
        "--max-block-time",
        "--state",
        "--stack-storage-size",
        "--backend",
        "--mmap-pages",
        "examples:",
        "flamegraph.pl",
    ] {
        assert!(text.contains(opt), "--help lacks {opt}");
    }
}

/// A ring smaller than one sample would lose every sample: refused, with
/// the way out.
#[test]
fn a_ring_smaller_than_a_sample_is_refused() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let out = run(&["--backend", "perf", "--mmap-pages", "1", "1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("smaller than one sample") && err.contains("--call-graph fp copies none"),
        "{err}"
    );
    // Frame pointers fit.
    let out = run(&[
        "--backend",
        "perf",
        "--call-graph",
        "fp",
        "--mmap-pages",
        "1",
        "1",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
