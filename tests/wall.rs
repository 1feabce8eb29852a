//! Wall-clock profiles (`--wall`) against `wallclock`, whose threads
//! measure where their own time went: a thread that burns its own CPU
//! time in `burn` and naps must find its CPU time on-CPU in `burn`, and
//! all of its entries must add up to its life; a thread sleeping to
//! deadlines beside a `SCHED_FIFO` spinner must find its lateness as its
//! waits for a CPU. Both are pinned to CPU 0 (this VM hides CPU 1's idle
//! switches).

use std::collections::BTreeMap;

use crate::common::*;

/// `name=value` of a workload's stderr.
fn measured(stderr: &str, name: &str) -> u64 {
    let key = format!("{name}=");
    stderr
        .split_whitespace()
        .find_map(|w| w.strip_prefix(key.as_str()))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in:\n{stderr}"))
}

/// The microseconds of `comm`'s entries by what ends their folded line
/// (`[on-cpu]`, `[runnable]`, or a waker's name), and in all.
fn shares(entries: &[Folded], comm: &str) -> (BTreeMap<String, u64>, u64) {
    let mut by = BTreeMap::new();
    let mut all = 0;
    for e in entries.iter().filter(|e| e.target_comm == comm) {
        *by.entry(e.waker_comm.clone()).or_insert(0) += e.total;
        all += e.total;
    }
    (by, all)
}

/// Each frame's title (without its counts) and fill of a flame graph, as
/// an XML reader reads them.
fn fills(svg: &str) -> Vec<(String, (u8, u8, u8))> {
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    let doc = roxmltree::Document::parse_with_options(svg, options)
        .unwrap_or_else(|e| panic!("the SVG is not well-formed XML: {e}"));
    doc.descendants()
        .filter(|g| g.has_tag_name("g"))
        .filter_map(|g| {
            let title = g.children().find(|n| n.has_tag_name("title"))?.text()?;
            let fill = g
                .children()
                .find(|n| n.has_tag_name("rect"))?
                .attribute("fill")?;
            let rgb: Vec<u8> = fill
                .strip_prefix("rgb(")?
                .strip_suffix(')')?
                .split(',')
                .map(|c| c.trim().parse().ok())
                .collect::<Option<_>>()?;
            let (name, _) = title.rsplit_once(" (")?;
            Some((name.to_string(), (rgb[0], rgb[1], rgb[2])))
        })
        .collect()
}

/// `wallclock ARGS` pinned to CPU 0, traced as `-- COMMAND` with the
/// tool's `options` (folded on stdout) until a run has every event
/// reported: its folded entries and the tool's stderr, which holds the
/// workload's own.
fn traced(options: &[&str], args: &[&str]) -> (Vec<Folded>, String) {
    let exe = workload("wallclock");
    let mut all = options.to_vec();
    all.push("--");
    all.push(exe.to_str().unwrap());
    all.extend(args);
    let out = with_every_event_reported(
        || run_env(&[("OFFWAKE_PIN_CPU", "0")], &all),
        |o| String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{options:?}: {err}");
    (parse_folded(&String::from_utf8_lossy(&out.stdout)), err)
}

/// On-CPU: red high, blue low (flamegraph.pl's "hot").
fn hot((r, g, b): (u8, u8, u8)) -> bool {
    r >= 205 && b <= 55 && g < r
}

/// Blocked: flamegraph.pl's "blue".
fn blue((r, g, b): (u8, u8, u8)) -> bool {
    r == g && b > r + 60
}

/// A wait for a CPU: tan, neither hot nor blue nor aqua.
fn tan((r, g, b): (u8, u8, u8)) -> bool {
    r > g && g > b && b >= 100
}

/// `wallclock burn 20 30 70` under `--wall -- COMMAND`: the burner's
/// on-CPU time in `burn` within 10% of the CPU time it measured there,
/// all of its entries within 5% of its life, and the SVG a hot/cold
/// graph whose on-CPU, run-queue and blocked frames have their own hues.
#[test]
fn on_cpu_time_is_the_threads_own_and_every_share_adds_up_to_its_life() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("offwake-wall-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let svg = dir.join("wall.svg");
    let (burn, nap) = (slowed(30).to_string(), slowed(70).to_string());
    let (entries, err) = traced(
        &["--wall", "-f", "-o", "-", "-o", svg.to_str().unwrap()],
        &["burn", "20", &burn, &nap],
    );
    let (by, all) = shares(&entries, "burner");
    let context = format!("{by:?}\n{err}");
    let in_burn: u64 = entries
        .iter()
        .filter(|e| e.target_comm == "burner" && e.waker_comm == "[on-cpu]")
        .filter(|e| has(&e.target, "burn"))
        .map(|e| e.total)
        .sum();
    assert_ratio(
        &format!("on-CPU in burn ({context})"),
        in_burn,
        measured(&err, "burn_cpu_us"),
        0.90,
        1.10,
    );
    assert_ratio(
        &format!("all of the burner's entries ({context})"),
        all,
        measured(&err, "wall_us"),
        0.95,
        1.05,
    );
    // Its naps are blocked waits, woken by the timer's interrupt.
    assert!(by.get("[hardirq]").is_some_and(|&us| us > 0), "{context}");
    assert!(
        err.contains("on-CPU samples ("),
        "the last line counts them: {err}"
    );

    let drawn = fills(&std::fs::read_to_string(&svg).expect("reading the SVG"));
    let of = |name: &str| -> Vec<(u8, u8, u8)> {
        drawn
            .iter()
            .filter(|(n, _)| n == name)
            .map(|&(_, c)| c)
            .collect()
    };
    // A tower per kind, each rooted in the thread's comm in its hue.
    let roots = of("burner");
    for (kind, family) in [
        ("on-CPU", hot as fn(_) -> bool),
        ("runnable", tan),
        ("blocked", blue),
    ] {
        assert!(
            roots.iter().any(|&c| family(c)),
            "no {kind} burner: {roots:?}"
        );
    }
    assert!(of("burn").into_iter().any(hot), "{:?}", of("burn"));
    assert!(of("[on-cpu]").into_iter().all(hot), "{:?}", of("[on-cpu]"));
    assert!(
        of("[runnable]").into_iter().all(tan) && !of("[runnable]").is_empty(),
        "{:?}",
        of("[runnable]")
    );
    assert!(of("do_nanosleep").into_iter().any(blue));
    // Every frame is in one of the families: the three kinds, the
    // wakers' aqua and the delimiter's grey.
    let aqua = |(r, g, b): (u8, u8, u8)| g == b && g > r + 60;
    let grey = |(r, g, b): (u8, u8, u8)| r == g && g == b;
    for (name, c) in &drawn {
        let families = [hot(*c), tan(*c), blue(*c), aqua(*c), grey(*c)];
        assert_eq!(
            families.iter().filter(|&&f| f).count(),
            1,
            "{name} drawn {c:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `wallclock late 80 13 10` under `--wall -- COMMAND`: the sleeper's
/// waits for a CPU, after each deadline's wakeup, within 15% of the
/// lateness it measured (time it ran again minus the deadline). Under
/// tracefs too, which cannot sample and says so.
#[test]
fn waits_for_a_cpu_are_the_lateness_the_thread_measured() {
    // Alone: its spinner holds CPU 0, where the other tests pin theirs.
    let _suite = suite(concat!(module_path!(), "::fifo"));
    if !live() {
        return;
    }
    let (period, spin) = (slowed(13).to_string(), slowed(10).to_string());
    // An emulated machine's timers fire late: the time from a deadline to
    // its timer's wakeup is lateness the thread measures but a blocked
    // wait to the kernel.
    let lo = if slowed(1) > 1 { 0.6 } else { 0.85 };
    for backend in ["perf", "tracefs"] {
        let (entries, err) = traced(
            &["--wall", "-f", "--backend", backend],
            &["late", "80", &period, &spin],
        );
        // Waits for a CPU where the sleeper slept: after a wakeup.
        let runnable: u64 = entries
            .iter()
            .filter(|e| e.target_comm == "sleeper" && e.waker_comm == "[runnable]")
            .filter(|e| has(&e.target, "do_nanosleep"))
            .map(|e| e.total)
            .sum();
        let (by, _) = shares(&entries, "sleeper");
        assert_ratio(
            &format!("{backend}: the sleeper's waits for a CPU ({by:?})\n{err}"),
            runnable,
            measured(&err, "lateness_us"),
            lo,
            1.15,
        );
        let sampled = entries.iter().any(|e| e.waker_comm == "[on-cpu]");
        let said = err.contains("tracefs backend cannot sample");
        match backend {
            "perf" => assert!(sampled && !said, "{by:?}\n{err}"),
            _ => assert!(!sampled && said, "{by:?}\n{err}"),
        }
    }
}

/// `-p PID`: a burner started once the tool is attached, traced until it
/// ends: its CPU time in `burn` and its life, as under `-- COMMAND`.
#[test]
fn a_running_process_adds_up_too() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let (burn, nap) = (slowed(30).to_string(), slowed(70).to_string());
    let (blocks, err, truth) = with_every_event_reported(
        || {
            let mut w = start_gated_env(
                &workload("wallclock"),
                &["burn", "10", &burn, &nap],
                &[("OFFWAKE_PIN_CPU", "0")],
            );
            let pid = w.pid().to_string();
            let tracer = start_traced(&["--wall=999", "-p", &pid]);
            w.go();
            let truth = w.finish();
            // SAFETY: kill with the pid of a child of this process, not
            // yet waited for, and a valid signal.
            let rc = unsafe { libc::kill(tracer.child.id() as i32, libc::SIGINT) };
            assert_eq!(rc, 0, "interrupting offwake-perf");
            let (out, err) = tracer.finish();
            (parse_default(&out), err, truth)
        },
        |(_, err, _)| err.clone(),
    );
    let burner: Vec<&Block> = blocks
        .iter()
        .filter(|b| b.target_comm == "burner")
        .collect();
    let in_burn: u64 = burner
        .iter()
        .filter(|b| b.waker_comm == "[on-cpu]" && has(&b.target, "burn"))
        .map(|b| b.total)
        .sum();
    let all: u64 = burner.iter().map(|b| b.total).sum();
    let context = format!("{burner:#?}\n{err}");
    assert_ratio(
        &format!("on-CPU in burn at 999 Hz ({context})"),
        in_burn,
        measured(&truth, "burn_cpu_us"),
        0.90,
        1.10,
    );
    assert_ratio(
        &format!("all of the burner's entries ({context})"),
        all,
        measured(&truth, "wall_us"),
        0.95,
        1.05,
    );
}
