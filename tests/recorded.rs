//! `-i FILE`: perf.data files written by stock `perf record`, read back by
//! the tool. A recording of a run is checked against a live trace of the
//! same run and against the workload's own measurement; a recording that
//! lacks what is needed, or is cut short, is checked for what the tool
//! says and still reports.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::common::*;

/// What `perf record` is given to record, as the README says.
const EVENTS: [&str; 4] = ["-e", "sched:sched_switch", "-e", "sched:sched_waking"];

/// The recordings are of the whole system: a test's workload would be in
/// another's file. They run one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn alone() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner)
}

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("offwake-recorded-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating the directory");
    dir
}

/// `perf record ARGS -o FILE -- COMMAND` (stock perf, as users run it).
fn perf_record(file: &Path, args: &[&str], command: &[&str]) -> Output {
    let out = Command::new("perf")
        .arg("record")
        .arg("-q")
        // 4 MiB per CPU: perf's default rings can overflow while the other
        // tests load the machine, and a lost record costs an interval.
        .args(["-m", "1024"])
        .args(args)
        .arg("-o")
        .arg(file)
        .arg("--")
        .args(command)
        .env("OFFWAKE_PIN_CPU", "0")
        .output()
        .expect("running perf record (apt-get install linux-perf)");
    assert!(
        out.status.success(),
        "perf record failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The total of folded lines whose target is the reader blocked in
/// `reader_wait` and whose waker is the writer in `writer_poke`.
fn reader_total(folded: &str) -> u64 {
    parse_folded(folded)
        .iter()
        .filter(|l| l.target_comm == "reader" && has(&l.target, "reader_wait"))
        .filter(|l| l.waker_comm == "writer" && has(&l.waker, "writer_poke"))
        .map(|l| l.total)
        .sum()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// One run of `pipewake`, recorded by stock perf (system-wide, as the
/// README says) while the live tool traces the same run (the perf
/// command and its child, under `-- COMMAND`): the totals the tool reads
/// from the file agree with the live ones within 2%, and both with the
/// workload's own measurement. Every output format of the file holds the
/// folded totals.
#[test]
fn a_recording_agrees_with_a_live_trace_of_the_same_run() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _alone = alone();
    let dir = scratch("agree");
    let data = dir.join("perf.data");
    let pipewake = workload("pipewake");
    let (k, ms) = (30u64, 10u64);
    // The workload runs on CPU 0, whose events this VM's kernel reports
    // in full; the notes of intervals it hid are of other threads (perf's,
    // the tool's) on CPU 1.
    let live = run_env(
        &[("OFFWAKE_PIN_CPU", "0")],
        &[
            "-f",
            "--",
            "perf",
            "record",
            "-q",
            EVENTS[0],
            EVENTS[1],
            EVENTS[2],
            EVENTS[3],
            "-a",
            "-g",
            "-o",
            data.to_str().unwrap(),
            "--",
            pipewake.to_str().unwrap(),
            &k.to_string(),
            &ms.to_string(),
        ],
    );
    let live_err = text(&live.stderr);
    assert!(live.status.success(), "{}: {live_err}", live.status);
    let truth = ground_truth(&live_err);
    let live_out = text(&live.stdout);
    let offline = run(&["-f", "-i", data.to_str().unwrap()]);
    let offline_err = text(&offline.stderr);
    assert!(
        offline.status.success(),
        "{}: {offline_err}",
        offline.status
    );
    let offline_out = text(&offline.stdout);
    let live = reader_total(&live_out);
    let offline = reader_total(&offline_out);
    eprintln!("reader in reader_wait: live {live} us, perf.data {offline} us, workload {truth} us");
    assert_ratio("perf.data against live", offline, live, 0.98, 1.02);
    assert_ratio("perf.data against the workload", offline, truth, 0.97, 1.03);
    assert!(
        !offline_err.contains("WARNING"),
        "a whole recording warns of nothing:\n{offline_err}"
    );

    // The other formats, from the same file.
    let pprof = dir.join("a.pb.gz");
    let svg = dir.join("a.svg");
    let out = run(&[
        "-i",
        data.to_str().unwrap(),
        "-o",
        pprof.to_str().unwrap(),
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(std::fs::metadata(&pprof).is_ok_and(|m| m.len() > 0));
    let svg_text = std::fs::read_to_string(&svg).expect("reading the SVG");
    assert!(
        svg_text.contains("<title>reader_wait ("),
        "no reader_wait frame"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The filters apply to a recording as to a live trace: `-p` keeps the
/// workload's threads, `-t` one thread, `--state 1` its sleeps, `-m` drops
/// what is shorter; and the text header says the report is read from the
/// file. The pids need not exist any more.
#[test]
fn filters_apply_to_a_recording() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _alone = alone();
    let dir = scratch("filters");
    let data = dir.join("perf.data");
    let pipewake = workload("pipewake");
    perf_record(
        &data,
        &[EVENTS[0], EVENTS[1], EVENTS[2], EVENTS[3], "-a", "-g"],
        &[pipewake.to_str().unwrap(), "20", "10"],
    );
    let file = data.to_str().unwrap();
    let all = run(&["-f", "-i", file]);
    assert!(all.status.success(), "{}", text(&all.stderr));
    let all_lines = parse_folded(&text(&all.stdout));
    // The workload's pid, from perf's own view of the file.
    let script = Command::new("perf")
        .args(["script", "-F", "comm,pid,tid", "-i", file])
        .output()
        .expect("perf script");
    let listing = text(&script.stdout);
    let ids = |comm: &str| -> (String, String) {
        let line = listing
            .lines()
            .find(|l| l.split_whitespace().next() == Some(comm))
            .unwrap_or_else(|| panic!("no {comm} in perf script's listing"));
        let (pid, tid) = line
            .split_whitespace()
            .nth(1)
            .unwrap()
            .split_once('/')
            .unwrap();
        (pid.to_string(), tid.to_string())
    };
    let (pid, reader_tid) = ids("reader");

    let by_pid = run(&["-f", "-p", &pid, "-i", file]);
    assert!(by_pid.status.success(), "{}", text(&by_pid.stderr));
    let lines = parse_folded(&text(&by_pid.stdout));
    assert!(!lines.is_empty(), "nothing for -p {pid}");
    // perf record's child is named perf-exec until it execs the workload:
    // with the binary out of the page cache, that exec blocks on its read.
    for l in &lines {
        assert!(
            ["perf-exec", "pipewake", "reader", "writer"].contains(&l.target_comm.as_str()),
            "-p {pid} kept {l:?}"
        );
    }
    assert!(lines.len() < all_lines.len());

    let by_tid = run(&["-f", "-t", &reader_tid, "-i", file]);
    let lines = parse_folded(&text(&by_tid.stdout));
    assert!(!lines.is_empty() && lines.iter().all(|l| l.target_comm == "reader"));
    assert_slept(
        "the reader, by -t",
        reader_total(&text(&by_tid.stdout)),
        20,
        10,
        &format!("{}\n{}", text(&by_tid.stderr), text(&by_tid.stdout)),
    );

    let min = run(&["-f", "-m", "5000", "-t", &reader_tid, "-i", file]);
    let lines = parse_folded(&text(&min.stdout));
    assert!(!lines.is_empty());
    assert!(
        lines.iter().all(|l| has(&l.target, "reader_wait")),
        "-m 5000 kept short waits: {lines:?}"
    );

    let sleeps = run(&["-f", "--state", "1", "-t", &reader_tid, "-i", file]);
    let preempted = run(&["-f", "--state", "0", "-t", &reader_tid, "-i", file]);
    let s = reader_total(&text(&sleeps.stdout));
    assert_slept("the reader's S sleeps", s, 20, 10, "");
    assert!(
        reader_total(&text(&preempted.stdout)) * 100 < s,
        "preempted waits hold the sleeps"
    );

    let header = run(&["-K", "-i", file]);
    assert!(
        text(&header.stdout).starts_with(&format!(
            "Reading blocked time (us) by kernel off-CPU and waker stack from {file}.\n"
        )),
        "{}",
        text(&header.stdout)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Asserts that `stderr`, with the file's name taken out, quotes nothing
/// of `content`: no run of four of its bytes, nor its first bytes as
/// numbers (as a parser's "magic value [114, 111, …]").
fn assert_quotes_nothing(stderr: &str, path: &Path, content: &[u8]) {
    let said = stderr.replace(path.to_str().unwrap(), "");
    for run in content.windows(4) {
        let run = String::from_utf8_lossy(run);
        assert!(!said.contains(&*run), "{run:?} quoted in:\n{stderr}");
    }
    if let [a, b, ..] = content {
        for shown in [format!("{a}, {b}"), format!("{a:#x}, {b:#x}")] {
            assert!(!said.contains(&shown), "{shown} quoted in:\n{stderr}");
        }
    }
}

/// `-i` refuses a file that is not a perf.data, saying what it is not
/// and quoting none of it (it may be a secret, as /etc/shadow is): an
/// empty file, text, perf's magic followed by less than a header.
#[test]
fn a_file_that_is_not_a_recording_is_refused_without_quoting_it() {
    let _suite = suite(module_path!());
    let dir = scratch("not-perf");
    let shadow =
        b"root:*:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\nbin:*:19000:0:99999:7:::\n\
                   sys:*:19000:0:99999:7:::\n";
    let cases: [(&str, &[u8], &str); 5] = [
        ("empty", b"", "is an empty file, not a perf.data file"),
        (
            "shadow-line",
            b"root:*:19000:0:99999:7:::\n",
            "is not a perf.data file",
        ),
        ("shadow", shadow, "is not a perf.data file"),
        (
            "header-cut",
            b"PERFILE2\x68\0\0\0\0\0\0\0\x90\0\0\0",
            "is cut short: it ends inside its perf.data header",
        ),
        (
            "magic-cut",
            b"PERFIL",
            "is cut short: it ends inside its perf.data header",
        ),
    ];
    for (name, content, says) in cases {
        let file = dir.join(name);
        std::fs::write(&file, content).expect("writing the file");
        let out = run(&["-f", "-i", file.to_str().unwrap()]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert_eq!(
            err,
            format!("offwake-perf: error: {} {says}", file.display())
                + if says.ends_with("header") {
                    ", before any record\n"
                } else {
                    "\n"
                },
            "{name}"
        );
        assert_quotes_nothing(&err, &file, content);
        assert!(out.stdout.is_empty(), "{name}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A recording without both events, or without callchains, is refused
/// with the `perf record` command that works; a file cut short gives its
/// whole records and a warning.
#[test]
fn what_a_recording_lacks_is_said() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _alone = alone();
    let dir = scratch("lacks");
    let command =
        "perf record -e sched:sched_switch -e sched:sched_waking -a -g --buildid-all -- sleep 10";
    let cases: [(&str, &[&str], &str); 2] = [
        (
            "switch-only.data",
            &["-e", "sched:sched_switch", "-a", "-g"],
            "does not record both",
        ),
        (
            "no-g.data",
            &[EVENTS[0], EVENTS[1], EVENTS[2], EVENTS[3], "-a"],
            "no callchains",
        ),
    ];
    for (name, args, says) in cases {
        let data = dir.join(name);
        perf_record(&data, args, &["sleep", "0.1"]);
        let out = run(&["-i", data.to_str().unwrap()]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(err.contains(says) && err.contains(command), "{name}: {err}");
    }

    let data = dir.join("whole.data");
    let pipewake = workload("pipewake");
    perf_record(
        &data,
        &[EVENTS[0], EVENTS[1], EVENTS[2], EVENTS[3], "-a", "-g"],
        &[pipewake.to_str().unwrap(), "30", "5"],
    );
    let bytes = std::fs::read(&data).expect("reading the recording");
    let whole = run(&["-f", "-i", data.to_str().unwrap()]);
    let whole_total = reader_total(&text(&whole.stdout));
    let whole_records = records_read(&text(&whole.stderr));
    let cut = dir.join("cut.data");
    // Cut inside the last records (the data section's offset and size
    // are at 40 and 48 in the header).
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
    let end = word(40) + word(48);
    std::fs::write(&cut, &bytes[..end - 100]).expect("writing the cut file");
    let out = run(&["-f", "-i", cut.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("WARNING") && err.contains("cut short"),
        "{err}"
    );
    let cut_records = records_read(&err);
    assert!(
        cut_records > 0 && cut_records < whole_records,
        "cut: {cut_records} records, whole: {whole_records}\n{err}"
    );
    let cut_total = reader_total(&text(&out.stdout));
    assert!(
        cut_total > 0 && cut_total <= whole_total,
        "cut {cut_total} us, whole {whole_total} us\n{err}"
    );

    // Cut inside its header, or inside its event attributes (their offset
    // and size are at 24 and 32): refused in words, quoting nothing.
    for (end, says) in [
        (
            20,
            "is cut short: it ends inside its perf.data header, before any record",
        ),
        (
            word(24) + 10,
            "cannot be read: its event attributes run past its end: it is cut short, or \
             its header is malformed",
        ),
    ] {
        std::fs::write(&cut, &bytes[..end]).expect("writing the cut file");
        let out = run(&["-f", "-i", cut.to_str().unwrap()]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert_eq!(
            err,
            format!("offwake-perf: error: {} {says}\n", cut.display())
        );
        assert_quotes_nothing(&err, &cut, &bytes[..end]);
    }

    // A header whose attribute size is 0 (a parser would divide by it) is
    // refused; a record whose size says 4 ends the records there.
    let bad = dir.join("bad.data");
    let mut b = bytes.clone();
    b[16..24].fill(0);
    std::fs::write(&bad, &b).expect("writing");
    let out = run(&["-f", "-i", bad.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("malformed header"), "{err}");
    let mut b = bytes.clone();
    let last_quarter = word(40) + word(48) * 3 / 4;
    // The record that starts at or after it: walk the sizes.
    let mut at = word(40);
    while at < last_quarter {
        at += u16::from_le_bytes([b[at + 6], b[at + 7]]) as usize;
    }
    b[at + 6..at + 8].copy_from_slice(&4u16.to_le_bytes());
    std::fs::write(&bad, &b).expect("writing");
    let out = run(&["-f", "-i", bad.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("malformed record at byte {at}")),
        "{err}"
    );
    let read = records_read(&err);
    assert!(
        read > whole_records / 2 && read < whole_records,
        "{read} of {whole_records}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A recording made with `perf record --call-graph dwarf` (all user
/// registers and 8 KiB of stack per sample) is unwound as the live tool
/// unwinds: `dwarfchain`, built without frame pointers, shows its whole
/// chain, which a frame-pointer recording of it cannot.
#[test]
fn a_dwarf_recording_is_unwound() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _alone = alone();
    let dir = scratch("dwarf");
    let exe = workload("dwarfchain");
    let chain = |graph: &[&str]| -> (String, String) {
        let data = dir.join("perf.data");
        let mut args = EVENTS.to_vec();
        args.push("-a");
        args.extend_from_slice(graph);
        let rec = perf_record(&data, &args, &[exe.to_str().unwrap(), "10", "5"]);
        let out = run(&["-f", "-i", data.to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        (text(&out.stdout), text(&rec.stderr))
    };
    let (dwarf, rec_err) = chain(&["--call-graph", "dwarf"]);
    let blocked: Vec<Folded> = parse_folded(&dwarf)
        .into_iter()
        .filter(|l| l.target_comm == "blocked" && has(&l.target, "chain_inner"))
        .collect();
    assert!(!blocked.is_empty(), "no chain_inner line in:\n{dwarf}");
    let l = blocked.iter().max_by_key(|l| l.total).unwrap();
    for f in ["chain_outer", "chain_middle", "chain_inner", "blocked_main"] {
        assert!(has(&l.target, f), "{f} missing from {l:?}");
    }
    assert!(
        has(&l.waker, "wake_inner") && has(&l.waker, "wake_outer"),
        "{l:?}"
    );
    let total: u64 = blocked.iter().map(|l| l.total).sum();
    assert_slept("dwarfchain's reads", total, 10, 5, &rec_err);

    let (fp, _) = chain(&["-g"]);
    assert!(
        !parse_folded(&fp)
            .iter()
            .any(|l| has(&l.target, "chain_middle")),
        "frame pointers found what only DWARF can:\n{fp}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--wall -i`: a recording with `cpu-clock` samples besides the
/// tracepoints gives `wallclock burn`'s burner its CPU time in `burn` and
/// all of its life, as a live trace does; one without says it has none to
/// read and still splits the waits.
#[test]
fn a_recordings_cpu_clock_samples_make_a_wall_profile() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _alone = alone();
    let dir = scratch("wall");
    let data = dir.join("perf.data");
    let exe = workload("wallclock");
    let mut args = EVENTS.to_vec();
    args.extend(["-e", "cpu-clock/freq=199/", "-a", "-g"]);
    let (burn, nap) = (slowed(30).to_string(), slowed(70).to_string());
    let rec = perf_record(
        &data,
        &args,
        &[exe.to_str().unwrap(), "burn", "10", &burn, &nap],
    );
    let truth = text(&rec.stderr);
    let measured = |name: &str| -> u64 {
        let key = format!("{name}=");
        truth
            .split_whitespace()
            .find_map(|w| w.strip_prefix(key.as_str()))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in:\n{truth}"))
    };
    let out = run(&["--wall", "-f", "-i", data.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let burner: Vec<Folded> = parse_folded(&text(&out.stdout))
        .into_iter()
        .filter(|l| l.target_comm == "burner")
        .collect();
    let in_burn: u64 = burner
        .iter()
        .filter(|l| l.waker_comm == "[on-cpu]" && has(&l.target, "burn"))
        .map(|l| l.total)
        .sum();
    let all: u64 = burner.iter().map(|l| l.total).sum();
    assert_ratio(
        &format!("on-CPU in burn\n{err}"),
        in_burn,
        measured("burn_cpu_us"),
        0.90,
        1.10,
    );
    assert_ratio(
        &format!("the burner's life\n{err}"),
        all,
        measured("wall_us"),
        0.95,
        1.05,
    );

    // Without --wall, the samples are another event's, skipped.
    let plain = run(&["-f", "-i", data.to_str().unwrap()]);
    assert!(text(&plain.stderr).contains("samples of other events"));
    assert!(!text(&plain.stdout).contains("[on-cpu]"));
    // A recording of the tracepoints alone.
    let mut args = EVENTS.to_vec();
    args.extend(["-a", "-g"]);
    perf_record(
        &data,
        &args,
        &[exe.to_str().unwrap(), "burn", "2", "10", "10"],
    );
    let out = run(&["--wall", "-f", "-i", data.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("has no cpu-clock samples"), "{err}");
    assert!(!text(&out.stdout).contains("[on-cpu]"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A recording's binaries are found by the build-ids it lists (perf
/// record --buildid-all), whatever is at their paths now: a copy of the
/// same binary there is used, another binary there never is, and a
/// binary gone from its path is taken from perf's build-id cache.
#[test]
fn binaries_are_found_by_build_id() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _alone = alone();
    let dir = scratch("buildid");
    let exe = dir.join("pw");
    std::fs::copy(workload("pipewake"), &exe).expect("copying pipewake");
    let record = |name: &str, extra: &[&str]| -> PathBuf {
        let data = dir.join(name);
        let mut args = EVENTS.to_vec();
        args.extend_from_slice(&["-a", "-g"]);
        args.extend_from_slice(extra);
        perf_record(&data, &args, &[exe.to_str().unwrap(), "10", "5"]);
        data
    };
    let names = |data: &Path| -> String {
        let out = run(&["-f", "-i", data.to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let no_ids = record("no-ids.data", &["--no-buildid-cache"]);
    let ids = record("ids.data", &["--buildid-all", "--no-buildid-cache"]);
    let cached = record("cached.data", &["--buildid-all"]);
    assert!(
        names(&no_ids).contains(";reader_wait;"),
        "the file itself, unchanged"
    );

    // The same binary, copied over its path: another inode.
    let copy = dir.join("pw.copy");
    std::fs::copy(&exe, &copy).expect("copying");
    std::fs::rename(&copy, &exe).expect("replacing");
    assert!(names(&ids).contains(";reader_wait;"), "found by build-id");
    assert!(
        !names(&no_ids).contains(";reader_wait;"),
        "without build-ids, a file with another inode is not the one mapped"
    );

    // Another binary at the path: never named from it (the right one may
    // still be found in perf's build-id cache, which earlier runs fill).
    std::fs::copy(workload("sleeploop"), &exe).expect("copying sleeploop");
    let other = names(&ids);
    assert!(!other.contains("sleep_once"), "{other}");

    // Gone: from perf's build-id cache.
    std::fs::remove_file(&exe).expect("removing the binary");
    assert!(
        names(&cached).contains(";reader_wait;"),
        "from perf's build-id cache"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A recording made with `perf record --all-cgroups` names its own
/// cgroups: `--cgroup` finds one among them (gone from this machine by
/// the time the file is read), by its path or its mount's, and
/// `--per-cgroup` puts it at the root of its lines. A sleeper in a fresh
/// cgroup and an identical decoy outside it (copies of `sleep`, named
/// apart) loop pinned to CPU 0, where this VM reports every scheduler
/// event. A recording without cgroup ids is refused with the command
/// that records them.
#[test]
fn a_recording_names_its_own_cgroups() {
    use std::process::Child;
    use std::time::Duration;

    /// The loops, killed, and the cgroup removed, when dropped.
    struct Made {
        cgroup: PathBuf,
        loops: Vec<Child>,
    }
    impl Drop for Made {
        fn drop(&mut self) {
            let _ = std::fs::write(self.cgroup.join("cgroup.kill"), "1");
            for c in &mut self.loops {
                let _ = c.kill();
                let _ = c.wait();
            }
            for _ in 0..250 {
                if std::fs::remove_dir(&self.cgroup).is_ok() || !self.cgroup.exists() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _alone = alone();
    let dir = scratch("cgroups");
    // perf's cgroup ids are of the v2 hierarchy on the test machines.
    let unified = Path::new("/sys/fs/cgroup/unified");
    let mount = if unified.join("cgroup.procs").exists() {
        unified
    } else {
        Path::new("/sys/fs/cgroup")
    };
    let name = format!("offwake-rec-{}", std::process::id());
    let mut made = Made {
        cgroup: mount.join(&name),
        loops: Vec::new(),
    };
    let _ = std::fs::remove_dir(&made.cgroup);
    std::fs::create_dir(&made.cgroup)
        .unwrap_or_else(|e| panic!("creating {}: {e}", made.cgroup.display()));
    let mut start_loop = |comm: &str| -> u32 {
        let exe = dir.join(comm);
        std::fs::copy("/bin/sleep", &exe).expect("copying sleep");
        let child = Command::new("taskset")
            .args(["-c", "0", "sh", "-c"])
            .arg(format!("while :; do {} 0.05; done", exe.display()))
            .spawn()
            .expect("starting taskset");
        let pid = child.id();
        made.loops.push(child);
        pid
    };
    let sleeper = start_loop("cgsleeper");
    let decoy = start_loop("cgdecoy");
    std::fs::write(made.cgroup.join("cgroup.procs"), sleeper.to_string())
        .expect("moving the sleeper into its cgroup");
    // The sleeper's first sleep, started before it moved, is over.
    std::thread::sleep(Duration::from_millis(200));
    let data = dir.join("cgroups.data");
    let mut args = EVENTS.to_vec();
    args.extend_from_slice(&["-a", "-g", "--all-cgroups"]);
    perf_record(&data, &args, &["sleep", "1"]);
    drop(made);
    assert!(
        !mount.join(&name).exists(),
        "the cgroup is gone from this machine"
    );
    let file = data.to_str().unwrap();
    let context = format!("sleeper {sleeper}, decoy {decoy}");

    // Text: every block is the sleeper's loop or its sleeps.
    let out = run(&["-i", file, "--cgroup", &name]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let stdout = text(&out.stdout);
    let blocks = parse_default(stdout.split_once('\n').map_or("", |(_, rest)| rest));
    let slept: u64 = blocks
        .iter()
        .filter(|b| b.target_comm == "cgsleeper")
        .map(|b| b.total)
        .sum();
    assert!(
        slept > 300_000,
        "{context}: cgsleeper blocked {slept} us in 1 s:\n{stdout}\n{err}"
    );
    let strays: Vec<&Block> = blocks
        .iter()
        .filter(|b| !["cgsleeper", "sh"].contains(&b.target_comm.as_str()) || b.target_tid == decoy)
        .collect();
    assert!(strays.is_empty(), "{context}: {strays:#?}\n{err}");

    // Its mount's path names it too; the decoy is never there.
    let full = format!("{}/{name}", mount.display());
    let out = run(&["-i", file, "-f", "--cgroup", &full]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let folded = text(&out.stdout);
    let comms: Vec<String> = parse_folded(&folded)
        .into_iter()
        .map(|l| l.target_comm)
        .collect();
    assert!(comms.iter().any(|c| c == "cgsleeper"), "{folded}\n{err}");
    assert!(!comms.iter().any(|c| c == "cgdecoy"), "{folded}\n{err}");

    // Per cgroup: the sleeper's lines start with its cgroup, the decoy's
    // with another.
    let out = run(&["-i", file, "-f", "--per-cgroup"]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let folded = text(&out.stdout);
    let root = format!("/{name}");
    let roots_of = |comm: &str| -> Vec<&str> {
        folded
            .lines()
            .map(|l| l.split(';').collect::<Vec<&str>>())
            .filter(|f| f.get(1) == Some(&comm))
            .map(|f| f[0])
            .collect()
    };
    let (inside, outside) = (roots_of("cgsleeper"), roots_of("cgdecoy"));
    assert!(
        !inside.is_empty() && inside.iter().all(|r| *r == root),
        "{context}: cgsleeper under {inside:?}\n{folded}"
    );
    assert!(
        !outside.is_empty() && outside.iter().all(|r| *r != root),
        "{context}: cgdecoy under {outside:?}\n{folded}"
    );

    // Without cgroup ids: refused, with the command that records them.
    let plain = dir.join("plain.data");
    perf_record(
        &plain,
        &[EVENTS[0], EVENTS[1], EVENTS[2], EVENTS[3], "-a", "-g"],
        &["true"],
    );
    for option in [&["--cgroup", name.as_str()][..], &["--per-cgroup"]] {
        let mut args = vec!["-i", plain.to_str().unwrap()];
        args.extend_from_slice(option);
        let out = run(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains("has no cgroup ids, which") && err.contains(" --all-cgroups -- "),
            "{err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
