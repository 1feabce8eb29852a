//! Names a traced process chose (its comms, its symbols) are data in the
//! output, never format: a hostile one forges no line, no field and no
//! separator, in the folded output or in the default one.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::OnceLock;

use crate::common::*;

/// The reader's comm, `ev;il c\nFAKE;99`, as each output prints it.
const READER_FOLDED: &str = r"ev\x3bil c\nFAKE\x3b99";
const READER_TEXT: &str = r"ev;il c\nFAKE;99";
/// The writer's comm, `wk;r\nFAKE;-- 99`. In the folded output its last
/// space is escaped too: flamegraph.pl would read ` 99` as a count.
const WRITER_FOLDED: &str = r"wk\x3br\nFAKE\x3b--\x2099";
const WRITER_TEXT: &str = r"wk;r\nFAKE;-- 99";
/// Part of the symbol the reader blocks in, `ev;il\nFAKE;1 rd\x1b[31m -- 12`.
const SYMBOL_FOLDED: &str = r"ev\x3bil\nFAKE\x3b1 rd\x1b[31m -- 12";
const SYMBOL_TEXT: &str = r"ev;il\nFAKE;1 rd\x1b[31m -- 12";

/// The `evilname` workload with the newline put into its symbol (see the
/// workload), built once.
fn evilname() -> PathBuf {
    static PATCHED: OnceLock<PathBuf> = OnceLock::new();
    PATCHED
        .get_or_init(|| {
            let built = workload("evilname");
            let mut bytes = std::fs::read(&built).expect("reading evilname");
            let (from, to) = (b"ev;il\x01FAKE", b"ev;il\nFAKE");
            let mut replaced = 0;
            let mut i = 0;
            while let Some(at) = bytes[i..].windows(from.len()).position(|w| w == from) {
                let at = i + at;
                bytes[at..at + to.len()].copy_from_slice(to);
                replaced += 1;
                i = at + to.len();
            }
            assert!(replaced > 0, "no placeholder in {}", built.display());
            let out = built.with_file_name("evilname-nl");
            std::fs::write(&out, &bytes).expect("writing evilname-nl");
            std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o755))
                .expect("making evilname-nl executable");
            out
        })
        .clone()
}

/// Runs the workload under the tool with `args` before `--`, pinned to
/// CPU 0 (this VM's kernel hides switches out of CPU 1's idle task).
/// Returns stdout and stderr.
fn trace(args: &[&str]) -> (String, String) {
    let path = evilname();
    let path = path.to_str().expect("a UTF-8 path");
    let mut all = args.to_vec();
    all.extend(["--", path, "40", "5"]);
    let out = run_env(&[("OFFWAKE_PIN_CPU", "0")], &all);
    let stdout = String::from_utf8(out.stdout).expect("stdout is UTF-8");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?}: {}\n{stderr}", out.status);
    (stdout, stderr)
}

/// No line of `text` holds a control character, and none starts with the
/// part of a name after its newline. (Progress on stderr returns to the
/// start of its line: a carriage return ends a line here.)
fn assert_no_forged_line(what: &str, text: &str) {
    for line in text.split(['\n', '\r']) {
        assert!(
            !line.chars().any(char::is_control),
            "{what}: control character in {line:?}"
        );
        assert!(
            !line.trim_start().starts_with("FAKE"),
            "{what}: forged line {line:?}"
        );
    }
}

/// One folded line is exactly one entry: `frame;...;comm <space> total`,
/// with the tool's `--` once, no empty field but the last (no waker), no
/// field with whitespace at either end or that reads as a token of the
/// tool's, and no whitespace and number at the end of the stack, which
/// flamegraph.pl would take for a second count.
fn assert_folded_grammar(what: &str, line: &str) {
    let (stack, total) = line
        .rsplit_once(' ')
        .unwrap_or_else(|| panic!("{what}: no total in {line:?}"));
    assert!(
        !total.is_empty() && total.bytes().all(|b| b.is_ascii_digit()),
        "{what}: bad total in {line:?}"
    );
    let fields: Vec<&str> = stack.split(';').collect();
    assert!(fields.len() >= 3, "{what}: short line {line:?}");
    assert_eq!(
        fields.iter().filter(|f| **f == "--").count(),
        1,
        "{what}: not one -- in {line:?}"
    );
    let last = fields.len() - 1;
    for (i, f) in fields.iter().enumerate() {
        assert!(
            i == last || !f.is_empty(),
            "{what}: empty field in {line:?}"
        );
        assert_eq!(f.trim(), *f, "{what}: whitespace around {f:?} in {line:?}");
        assert_ne!(*f, "-", "{what}: a - without -d in {line:?}");
        if f.starts_with('[') {
            // An interrupt's pseudo-task is a waker, the last field.
            let interrupt = i == last && ["[hardirq]", "[softirq]", "[nmi]"].contains(f);
            assert!(
                interrupt
                    || ["[unknown]", "[Missed User Stack]", "[Missed Kernel Stack]"].contains(f),
                "{what}: {f:?} reads as the tool's in {line:?}"
            );
        }
    }
    let head = stack.trim_end_matches(|c: char| c.is_numeric() || c == '.');
    assert!(
        head.len() == stack.len() || !head.ends_with(char::is_whitespace),
        "{what}: the stack ends in a number flamegraph.pl reads as a count: {line:?}"
    );
}

/// The folded output of a process with hostile comms and symbols: each
/// line one entry, the names escaped, under both backends. (Under tracefs
/// the short-lived workload's user frames may all be `[unknown]`, see
/// docs/tracefs.md, so only perf must show the symbol.)
#[test]
fn hostile_names_forge_no_folded_line() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    for backend in ["perf", "tracefs"] {
        let (out, err) = trace(&["--backend", backend, "-f"]);
        let what = format!("-f --backend {backend}");
        assert_no_forged_line(&what, &out);
        assert_no_forged_line(&format!("{what} stderr"), &err);
        for line in out.lines() {
            assert_folded_grammar(&what, line);
        }
        let fields: Vec<Vec<&str>> = out
            .lines()
            .filter_map(|l| Some(l.rsplit_once(' ')?.0.split(';').collect()))
            .collect();
        assert!(
            fields.iter().any(|f| f[0] == READER_FOLDED),
            "{what}: no entry of the reader {READER_FOLDED:?}:\n{out}\n{err}"
        );
        assert!(
            fields.iter().any(|f| f[0] == WRITER_FOLDED),
            "{what}: no entry of the writer {WRITER_FOLDED:?}:\n{out}\n{err}"
        );
        assert!(
            fields
                .iter()
                .any(|f| f[0] == READER_FOLDED && f.last() == Some(&WRITER_FOLDED)),
            "{what}: the writer never woke the reader:\n{out}\n{err}"
        );
        assert!(
            backend == "tracefs" || fields.iter().flatten().any(|f| f.contains(SYMBOL_FOLDED)),
            "{what}: no frame {SYMBOL_FOLDED:?}:\n{out}\n{err}"
        );
    }
}

/// The default output of the same process: one frame per line, every
/// block in the layout the tests parse strictly, the names escaped.
#[test]
fn hostile_names_forge_no_default_line() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    for backend in ["perf", "tracefs"] {
        let (out, err) = trace(&["--backend", backend]);
        let what = format!("--backend {backend}");
        assert_no_forged_line(&what, &out);
        assert_no_forged_line(&format!("{what} stderr"), &err);
        let report = out
            .split_once('\n')
            .map(|(_, rest)| rest)
            .unwrap_or_else(|| panic!("{what}: no header in {out:?}"));
        let blocks = parse_default(report);
        assert!(
            blocks
                .iter()
                .any(|b| b.target_comm == READER_TEXT && b.waker_comm == WRITER_TEXT),
            "{what}: the writer {WRITER_TEXT:?} never woke the reader {READER_TEXT:?}:\n{out}"
        );
        assert!(
            backend == "tracefs"
                || blocks
                    .iter()
                    .flat_map(|b| &b.target)
                    .any(|f| f.contains(SYMBOL_TEXT)),
            "{what}: no frame {SYMBOL_TEXT:?}:\n{out}"
        );
    }
}
