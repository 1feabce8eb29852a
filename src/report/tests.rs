//! Tests of the header and the text and folded reports (some against
//! golden files), and the sample entries the other formats' tests share.

use std::path::PathBuf;

use super::*;

pub(super) fn names(frames: &[&str]) -> Frames {
    Frames::Names(
        frames
            .iter()
            .map(|s| Frame::Name(s.to_string().into()))
            .collect(),
    )
}

/// A thread sleeping in nanosleep, woken by a timer in another process.
pub(super) fn sleeper(tid: u32, total_us: u64) -> ResolvedEntry {
    ResolvedEntry {
        target_comm: "app".into(),
        target_tid: tid,
        waker_comm: "waker".into(),
        waker_tid: 200,
        waker_context: crate::event::WakeContext::Task,
        target_kernel: names(&["schedule", "do_nanosleep", "__x64_sys_nanosleep"]),
        target_user: names(&["clock_nanosleep", "main", "__libc_start_main"]),
        waker_kernel: names(&[
            "hrtimer_wakeup",
            "__hrtimer_run_queues",
            "hrtimer_interrupt",
        ]),
        waker_user: names(&["spin", "main"]),
        total_us,
        chain: Vec::new(),
        cgroup: None,
        target_ns_tid: None,
    }
}

/// A kernel thread that was never woken (no user stack, no waker).
pub(super) fn unwoken() -> ResolvedEntry {
    ResolvedEntry {
        target_comm: "kworker/0:1".into(),
        target_tid: 300,
        waker_comm: Comm::default(),
        waker_tid: 0,
        waker_context: crate::event::WakeContext::Task,
        target_kernel: names(&["schedule", "worker_thread", "kthread", "ret_from_fork"]),
        target_user: names(&[]),
        waker_kernel: names(&[]),
        waker_user: names(&[]),
        total_us: 42,
        chain: Vec::new(),
        cgroup: None,
        target_ns_tid: None,
    }
}

/// A reader whose kernel stack did not fit, woken by idle.
pub(super) fn missed() -> ResolvedEntry {
    ResolvedEntry {
        target_comm: "app".into(),
        target_tid: 101,
        waker_comm: "swapper/1".into(),
        waker_tid: 0,
        waker_context: crate::event::WakeContext::Task,
        target_kernel: Frames::Missed,
        target_user: names(&["read", "main"]),
        waker_kernel: names(&["ttwu_do_activate", "sched_ttwu_pending"]),
        waker_user: names(&[]),
        total_us: 500,
        chain: Vec::new(),
        cgroup: None,
        target_ns_tid: None,
    }
}

/// A wall-clock profile's shares of thread 100: on a CPU in `burn`
/// (sampled in user mode: no kernel stack), waiting for one where it
/// slept, and the sleep itself.
pub(super) fn wall() -> Vec<ResolvedEntry> {
    let share = |context, total_us| ResolvedEntry {
        waker_comm: Comm::default(),
        waker_tid: 0,
        waker_context: context,
        waker_kernel: names(&[]),
        waker_user: names(&[]),
        ..sleeper(100, total_us)
    };
    let mut on_cpu = share(crate::event::WakeContext::OnCpu, 30);
    on_cpu.target_kernel = names(&[]);
    on_cpu.target_user = names(&["burn", "main", "__libc_start_main"]);
    vec![
        on_cpu,
        share(crate::event::WakeContext::Runnable, 4),
        sleeper(100, 70),
    ]
}

/// Out of order on purpose; the first and last give the same folded line.
pub(super) fn sample() -> Vec<ResolvedEntry> {
    vec![sleeper(100, 500), missed(), unwoken(), sleeper(102, 7)]
}

pub(super) fn opts(folded: bool, delimited: bool, stacks: StackMode) -> ReportOptions {
    ReportOptions {
        format: if folded { Format::Folded } else { Format::Text },
        delimited,
        stacks,
        per_cgroup: false,
        wall: false,
    }
}

#[test]
fn wall_shares_end_in_their_marker_frame() {
    let got = render(opts(true, false, StackMode::Both), &wall());
    assert_eq!(
        got,
        "app;__libc_start_main;main;clock_nanosleep;__x64_sys_nanosleep;do_nanosleep;\
         schedule;--;[runnable] 4\n\
         app;__libc_start_main;main;burn;--;[on-cpu] 30\n\
         app;__libc_start_main;main;clock_nanosleep;__x64_sys_nanosleep;do_nanosleep;\
         schedule;--;hrtimer_wakeup;__hrtimer_run_queues;hrtimer_interrupt;spin;main;waker 70\n"
    );
    let got = render(opts(false, false, StackMode::Both), &wall());
    assert!(
        got.contains("    waker:           [on-cpu] 0\n    --               --\n    burn\n"),
        "{got}"
    );
    assert!(
        got.contains("    waker:           [runnable] 0\n    --"),
        "{got}"
    );
}

#[test]
fn module_offsets_print_escaped_base_names() {
    let mut e = sleeper(100, 5);
    e.target_user = Frames::from(vec![
        Frame::InFile {
            module: Arc::from("libx.so"),
            offset: 0x1f0a,
        },
        Frame::InFile {
            module: Arc::from("a;b\n[unknown]"),
            offset: 0,
        },
    ]);
    let got = render(opts(true, false, StackMode::UserOnly), &[e.clone()]);
    assert_eq!(
        got,
        "app;a\\x3bb\\n[unknown]+0x0;libx.so+0x1f0a;--;spin;main;waker 5\n"
    );
    let got = render(opts(false, false, StackMode::UserOnly), &[e]);
    assert!(got.contains("\n    libx.so+0x1f0a\n"), "{got}");
}

#[test]
fn per_cgroup_puts_the_cgroup_at_the_root_and_in_the_block() {
    let mut e = sleeper(100, 7);
    e.cgroup = Some(CgroupName::Path(
        b"/system.slice/a;b\n.service".as_slice().into(),
    ));
    let mut unknown = sleeper(101, 9);
    unknown.cgroup = Some(CgroupName::Unknown);
    let split = |folded| ReportOptions {
        per_cgroup: true,
        ..opts(folded, false, StackMode::Both)
    };
    let folded = render(split(true), &[e.clone(), unknown.clone()]);
    let roots: Vec<&str> = folded
        .lines()
        .map(|l| l.split(';').next().unwrap())
        .collect();
    // The name's `;` and newline cannot split the line or the frame.
    assert_eq!(
        roots,
        ["/system.slice/a\\x3bb\\n.service", "[unknown cgroup]"]
    );
    assert!(folded.lines().all(|l| l.contains(";app;")), "{folded}");
    let text = render(split(false), std::slice::from_ref(&e));
    assert!(
        text.contains(
            "    target:          app 100\n    cgroup:          /system.slice/a;b\\n.service\n        7\n"
        ),
        "{text}"
    );
    // A target in another PID namespace: its id there, after `target:`.
    let mut inside = e.clone();
    inside.target_ns_tid = Some(7);
    let text = render(split(false), &[inside]);
    assert!(
        text.contains("    target:          app 100\n    ns tid:          7\n    cgroup:"),
        "{text}"
    );
    // Without --per-cgroup, nothing of it shows.
    assert_eq!(
        render(opts(true, false, StackMode::Both), &[e.clone()]),
        render(opts(true, false, StackMode::Both), &[sleeper(100, 7)])
    );
}

/// Cgroup names that are not UTF-8 print their bytes as `\xNN`: none
/// reads as another, nor as a name holding a real U+FFFD.
#[test]
fn cgroup_names_that_are_not_utf8_stay_apart() {
    let names: [&[u8]; 3] = [b"/v\xff", b"/v\xfe", "/v\u{FFFD}".as_bytes()];
    let entries: Vec<ResolvedEntry> = names
        .iter()
        .zip(100..)
        .map(|(name, tid)| {
            let mut e = sleeper(tid, 7);
            e.cgroup = Some(CgroupName::Path((*name).into()));
            e
        })
        .collect();
    let split = |folded| ReportOptions {
        per_cgroup: true,
        ..opts(folded, false, StackMode::Both)
    };
    let folded = render(split(true), &entries);
    let mut roots: Vec<&str> = folded
        .lines()
        .map(|l| l.split(';').next().unwrap())
        .collect();
    roots.sort_unstable();
    assert_eq!(roots, ["/v\\xfe", "/v\\xff", "/v\u{FFFD}"], "{folded}");
    let text = render(split(false), &entries);
    for shown in ["/v\\xff\n", "/v\\xfe\n", "/v\u{FFFD}\n"] {
        assert!(
            text.contains(&format!("    cgroup:          {shown}")),
            "{text}"
        );
    }
}

pub(super) fn render(options: ReportOptions, entries: &[ResolvedEntry]) -> String {
    let mut out = Vec::new();
    write_report(&mut out, &options, entries, Span::default()).unwrap();
    String::from_utf8(out).unwrap()
}

fn golden(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/report")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn check(name: &str, options: ReportOptions) {
    let got = render(options, &sample());
    if std::env::var_os("OFFWAKE_BLESS").is_some() {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/report")
            .join(name);
        std::fs::write(path, &got).unwrap();
    }
    assert_eq!(got, golden(name), "golden {name}");
}

#[test]
fn headers() {
    let both = opts(false, false, StackMode::Both);
    assert_eq!(
        header(&both, Some(5), false),
        "Tracing blocked time (us) by user + kernel off-CPU and waker stack for 5 secs.\n"
    );
    assert_eq!(
        header(&both, None, false),
        "Tracing blocked time (us) by user + kernel off-CPU and waker stack... Hit Ctrl-C to end.\n"
    );
    assert_eq!(
        header(&opts(false, true, StackMode::UserOnly), None, false),
        "Tracing blocked time (us) by user off-CPU and waker stack... Hit Ctrl-C to end.\n"
    );
    assert_eq!(
        header(&opts(false, false, StackMode::KernelOnly), Some(10), false),
        "Tracing blocked time (us) by kernel off-CPU and waker stack for 10 secs.\n"
    );
    assert_eq!(
        header(&opts(true, false, StackMode::Both), Some(5), false),
        ""
    );
    assert_eq!(header(&opts(true, false, StackMode::Both), None, true), "");
}

#[test]
fn headers_with_a_command_say_its_exit_ends_tracing() {
    let both = opts(false, false, StackMode::Both);
    assert_eq!(
        header(&both, None, true),
        "Tracing blocked time (us) by user + kernel off-CPU and waker stack until the command exits.\n"
    );
    assert_eq!(
        header(&both, Some(3), true),
        "Tracing blocked time (us) by user + kernel off-CPU and waker stack for 3 secs, or until the command exits.\n"
    );
}

#[test]
fn one_default_block_by_hand() {
    let got = render(opts(false, false, StackMode::Both), &[sleeper(100, 500)]);
    let want = "\n\
        \x20   waker:           waker 200\n\
        \x20   main\n\
        \x20   spin\n\
        \x20   hrtimer_interrupt\n\
        \x20   __hrtimer_run_queues\n\
        \x20   hrtimer_wakeup\n\
        \x20   --               --\n\
        \x20   schedule\n\
        \x20   do_nanosleep\n\
        \x20   __x64_sys_nanosleep\n\
        \x20   clock_nanosleep\n\
        \x20   main\n\
        \x20   __libc_start_main\n\
        \x20   target:          app 100\n\
        \x20       500\n\
        \n";
    assert_eq!(got, want);
}

#[test]
fn one_folded_line_by_hand() {
    let got = render(opts(true, true, StackMode::Both), &[sleeper(100, 500)]);
    assert_eq!(
        got,
        "app;__libc_start_main;main;clock_nanosleep;-;__x64_sys_nanosleep;do_nanosleep;\
         schedule;--;hrtimer_wakeup;__hrtimer_run_queues;hrtimer_interrupt;-;spin;main;\
         waker 500\n"
    );
}

#[test]
fn no_waker_lines() {
    let got = render(opts(true, false, StackMode::Both), &[unwoken()]);
    assert_eq!(
        got,
        "kworker/0:1;ret_from_fork;kthread;worker_thread;schedule;--; 42\n"
    );
    let got = render(opts(false, true, StackMode::Both), &[unwoken()]);
    assert_eq!(
        got,
        "\n    waker:            0\n    --               --\n    schedule\n    \
         worker_thread\n    kthread\n    ret_from_fork\n    target:          \
         kworker/0:1 300\n        42\n\n"
    );
}

#[test]
fn missed_user_stacks() {
    let mut e = sleeper(100, 9);
    e.target_user = Frames::Missed;
    e.waker_user = Frames::Missed;
    let got = render(opts(true, true, StackMode::Both), std::slice::from_ref(&e));
    assert_eq!(
        got,
        "app;[Missed User Stack];-;__x64_sys_nanosleep;do_nanosleep;schedule;--;\
         hrtimer_wakeup;__hrtimer_run_queues;hrtimer_interrupt;-;[Missed User Stack];\
         waker 9\n"
    );
    let got = render(opts(false, false, StackMode::UserOnly), &[e]);
    assert_eq!(
        got,
        "\n    waker:           waker 200\n    [Missed User Stack]\n    --               \
         --\n    [Missed User Stack]\n    target:          app 100\n        9\n\n"
    );
}

#[test]
fn empty_report() {
    assert_eq!(render(opts(false, false, StackMode::Both), &[]), "\n");
    assert_eq!(render(opts(true, false, StackMode::Both), &[]), "");
}

#[test]
fn golden_default() {
    check("default.txt", opts(false, false, StackMode::Both));
}

#[test]
fn golden_delimited() {
    check("delimited.txt", opts(false, true, StackMode::Both));
}

#[test]
fn golden_user_only() {
    check("user-only.txt", opts(false, true, StackMode::UserOnly));
}

#[test]
fn golden_kernel_only() {
    check("kernel-only.txt", opts(false, true, StackMode::KernelOnly));
}

#[test]
fn golden_folded() {
    check("folded.txt", opts(true, false, StackMode::Both));
}

#[test]
fn golden_folded_delimited() {
    check("folded-delimited.txt", opts(true, true, StackMode::Both));
}

#[test]
fn golden_folded_user_only() {
    check(
        "folded-user-only.txt",
        opts(true, false, StackMode::UserOnly),
    );
}

#[test]
fn golden_folded_kernel_only() {
    check(
        "folded-kernel-only.txt",
        opts(true, true, StackMode::KernelOnly),
    );
}

#[test]
fn folded_merges_identical_lines_and_orders() {
    let mut b = sleeper(100, 3);
    b.target_comm = "b".into();
    let mut a = sleeper(100, 3);
    a.target_comm = "a".into();
    let entries = vec![sleeper(100, 5), b, sleeper(101, 1), a, unwoken()];
    let got = render(opts(true, false, StackMode::KernelOnly), &entries);
    let lines: Vec<&str> = got.lines().collect();
    assert_eq!(
        lines,
        vec![
            "a;__x64_sys_nanosleep;do_nanosleep;schedule;--;hrtimer_wakeup;\
             __hrtimer_run_queues;hrtimer_interrupt;waker 3",
            "b;__x64_sys_nanosleep;do_nanosleep;schedule;--;hrtimer_wakeup;\
             __hrtimer_run_queues;hrtimer_interrupt;waker 3",
            "app;__x64_sys_nanosleep;do_nanosleep;schedule;--;hrtimer_wakeup;\
             __hrtimer_run_queues;hrtimer_interrupt;waker 6",
            "kworker/0:1;ret_from_fork;kthread;worker_thread;schedule;--; 42",
        ]
    );
}

#[test]
fn default_orders_by_total_then_text_regardless_of_input_order() {
    let mut entries = sample();
    let first = render(opts(false, false, StackMode::Both), &entries);
    entries.reverse();
    assert_eq!(render(opts(false, false, StackMode::Both), &entries), first);
    let totals: Vec<&str> = first
        .lines()
        .filter(|l| l.starts_with("        "))
        .map(str::trim)
        .collect();
    assert_eq!(totals, vec!["7", "42", "500", "500"]);
}

/// Names a traced process chose: comms (the target's with separators and
/// a newline, the waker's a real 15-byte one) and symbols with the folded
/// separator, spaces, a newline, a terminal escape and the tool's words.
pub(super) fn hostile() -> ResolvedEntry {
    let name = |n: &str| Frame::Name(n.into());
    ResolvedEntry {
        target_comm: "ev;il c\nFAKE;9".into(),
        target_tid: 66,
        waker_comm: "wk;r\nFAKE;-- 99".into(),
        waker_tid: 67,
        waker_context: crate::event::WakeContext::Task,
        target_kernel: names(&["schedule", "do_nanosleep"]),
        target_user: Frames::from(vec![
            name("a;b"),
            name("c d"),
            name("e\nFAKE;1 2"),
            name("\x1b[31mred"),
            name("--"),
            name("[unknown]"),
            Frame::Unknown,
            name("-"),
            name(""),
        ]),
        waker_kernel: names(&["hrtimer_wakeup"]),
        waker_user: Frames::from(vec![name("x 5"), name("w;")]),
        total_us: 5,
        chain: Vec::new(),
        cgroup: None,
        target_ns_tid: None,
    }
}

#[test]
fn hostile_names_stay_one_folded_line_of_their_fields() {
    assert_eq!(hostile().waker_comm.as_bytes().len(), 15);
    let got = render(opts(true, true, StackMode::Both), &[hostile()]);
    assert_eq!(
        got,
        "ev\\x3bil c\\nFAKE\\x3b9;[empty];\\x2d;[unknown];\\x5bunknown];\\x2d-;\\x1b[31mred;\
         e\\nFAKE\\x3b1\\x202;c d;a\\x3bb;-;do_nanosleep;schedule;--;hrtimer_wakeup;-;\
         x\\x205;w\\x3b;wk\\x3br\\nFAKE\\x3b--\\x2099 5\n"
    );
    assert_eq!(got.matches('\n').count(), 1);
    let (stack, total) = got.trim_end().rsplit_once(' ').unwrap();
    assert_eq!(total, "5");
    let fields: Vec<&str> = stack.split(';').collect();
    // The comms, 9 + 2 + 1 + 2 frames, two `-` and one `--`.
    assert_eq!(fields.len(), 19);
    assert_eq!(fields.iter().filter(|f| **f == "--").count(), 1);
    assert_eq!(fields.iter().filter(|f| **f == "-").count(), 2);
    assert_eq!(fields.iter().filter(|f| **f == "[unknown]").count(), 1);
}

#[test]
fn hostile_names_stay_one_frame_per_default_line() {
    let got = render(opts(false, true, StackMode::Both), &[hostile()]);
    let want = [
        "",
        "    waker:           wk;r\\nFAKE;-- 99 67",
        "    w;",
        "    x 5",
        "    -",
        "    hrtimer_wakeup",
        "    --               --",
        "    schedule",
        "    do_nanosleep",
        "    -",
        "    a;b",
        "    c d",
        "    e\\nFAKE;1 2",
        "    \\x1b[31mred",
        "    \\x2d-",
        "    \\x5bunknown]",
        "    [unknown]",
        "    \\x2d",
        "    [empty]",
        "    target:          ev;il c\\nFAKE;9 66",
        "        5",
        "",
    ];
    assert_eq!(got, want.join("\n") + "\n");
}

#[test]
fn the_tools_own_words_differ_from_names_that_look_alike() {
    let mut e = unwoken();
    e.target_comm = Comm::UNKNOWN;
    e.waker_comm = Comm::from("[unknown]");
    e.waker_tid = 9;
    e.target_kernel = Frames::from(vec![Frame::Unknown, Frame::Name("[unknown]".into())]);
    let got = render(opts(true, false, StackMode::Both), std::slice::from_ref(&e));
    assert_eq!(
        got,
        "[unknown];\\x5bunknown];[unknown];--;\\x5bunknown] 42\n"
    );
    // A waker whose comm is empty is not "no waker".
    e.waker_comm = Comm::default();
    let got = render(opts(true, false, StackMode::Both), std::slice::from_ref(&e));
    assert_eq!(got, "[unknown];\\x5bunknown];[unknown];--;[empty] 42\n");
    e.waker_tid = 0;
    let got = render(opts(true, false, StackMode::Both), std::slice::from_ref(&e));
    assert_eq!(got, "[unknown];\\x5bunknown];[unknown];--; 42\n");
    // Bytes that are not UTF-8 stay told apart.
    e.target_comm = Comm::from_bytes(b"\xff\xfeab");
    let got = render(opts(false, false, StackMode::Both), &[e]);
    assert!(
        got.contains("    target:          \\xff\\xfeab 300\n"),
        "{got}"
    );
}

#[test]
fn broken_pipe_is_an_error_not_a_panic() {
    struct Closed;
    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::from(io::ErrorKind::BrokenPipe))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    for folded in [false, true] {
        let err = write_report(
            &mut Closed,
            &opts(folded, false, StackMode::Both),
            &sample(),
            Span::default(),
        )
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
    }
}

/// An interrupt's wakeup prints as its pseudo-task, tid 0, in both
/// layouts; a task that names itself so is escaped.
#[test]
fn interrupt_wakers_print_as_their_pseudo_task() {
    let mut e = sleeper(100, 500);
    e.waker_comm = Comm::default();
    e.waker_tid = 0;
    e.waker_context = WakeContext::Softirq;
    e.waker_user = names(&[]);
    let got = render(opts(true, false, StackMode::Both), std::slice::from_ref(&e));
    assert!(
        got.ends_with(";--;hrtimer_wakeup;__hrtimer_run_queues;hrtimer_interrupt;[softirq] 500\n"),
        "{got}"
    );
    let got = render(opts(false, false, StackMode::Both), &[e]);
    assert!(
        got.starts_with("\n    waker:           [softirq] 0\n    hrtimer_interrupt\n"),
        "{got}"
    );
    let mut forged = sleeper(100, 500);
    forged.waker_comm = "[hardirq]".into();
    let got = render(opts(true, false, StackMode::Both), &[forged]);
    assert!(got.ends_with(";spin;main;\\x5bhardirq] 500\n"), "{got}");
}

/// `sleeper`'s waker was itself blocked in a futex, woken by a timer's
/// interrupt (level 2); then the chain ends.
pub(super) fn chained(end: Option<ChainEnd>) -> ResolvedEntry {
    let mut e = sleeper(100, 500);
    e.chain = vec![ResolvedLevel::Waited {
        kernel: names(&["schedule", "futex_wait"]),
        user: names(&["lock", "spin"]),
        waker: ResolvedWaker {
            comm: Comm::default(),
            tid: 0,
            context: WakeContext::Hardirq,
            kernel: names(&["hrtimer_wakeup", "asm_sysvec_apic_timer_interrupt"]),
            user: names(&[]),
        },
        overlap_us: 420,
    }];
    e.chain.extend(end.map(ResolvedLevel::End));
    e
}

#[test]
fn chain_levels_extend_the_folded_line() {
    let got = render(opts(true, false, StackMode::Both), &[chained(None)]);
    assert_eq!(
        got,
        "app;__libc_start_main;main;clock_nanosleep;__x64_sys_nanosleep;do_nanosleep;\
         schedule;--;hrtimer_wakeup;__hrtimer_run_queues;hrtimer_interrupt;spin;main;waker;\
         --;spin;lock;futex_wait;schedule;--;hrtimer_wakeup;\
         asm_sysvec_apic_timer_interrupt;[hardirq] 500\n"
    );
    let mut ended = chained(None);
    ended.chain = vec![ResolvedLevel::End(ChainEnd::Running)];
    let got = render(opts(true, false, StackMode::KernelOnly), &[ended]);
    assert!(
        got.ends_with(";hrtimer_interrupt;waker;--;[running] 500\n"),
        "{got}"
    );
}

#[test]
fn chain_levels_follow_the_block_with_numbered_labels() {
    // The waker was blocked in a futex that the target itself released:
    // a loop.
    let mut e = chained(Some(ChainEnd::Loop));
    if let ResolvedLevel::Waited { waker, .. } = &mut e.chain[0] {
        *waker = ResolvedWaker {
            comm: "app".into(),
            tid: 100,
            context: WakeContext::Task,
            kernel: names(&["futex_wake"]),
            user: names(&["unlock", "main"]),
        };
    }
    let got = render(opts(false, false, StackMode::Both), &[e]);
    // bcc's block, whole, where a script stops at the total; then level 2
    // in the same shape, and the marker that ends the chain.
    let plain = render(opts(false, false, StackMode::Both), &[sleeper(100, 500)]);
    let levels = "\
        \x20   [2] waker:       app 100\n\
        \x20   main\n\
        \x20   unlock\n\
        \x20   futex_wake\n\
        \x20   --               --\n\
        \x20   schedule\n\
        \x20   futex_wait\n\
        \x20   lock\n\
        \x20   spin\n\
        \x20   [2] target:      waker 200\n\
        \x20       420\n\
        \x20   [loop]\n\
        \x20   [3] target:      app 100\n\
        \n";
    let head = plain
        .strip_suffix('\n')
        .expect("the blank line after a block");
    assert_eq!(got, format!("{head}{levels}"));
}

#[test]
fn a_name_cannot_forge_a_level_label_or_a_marker() {
    let mut e = chained(None);
    e.target_user = names(&["[2] waker:       x 1", "[running]"]);
    let text = render(
        opts(false, false, StackMode::Both),
        std::slice::from_ref(&e),
    );
    assert!(!text.contains("\n    [2] waker:       x 1\n"), "{text}");
    assert!(!text.contains("\n    [running]\n"), "{text}");
    let folded = render(opts(true, false, StackMode::Both), &[e]);
    assert!(!folded.contains(";[running];"), "{folded}");
}
