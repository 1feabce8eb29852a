//! The reports other tools read: one trace written at once as folded
//! text, an SVG flame graph, speedscope JSON and pprof, each read back by
//! a reader written apart from the tool (Chromium for the SVG, the
//! speedscope package's schema, Datadog's pprof-format), and each holding
//! the folded output's entries and totals exactly.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use serde_json::Value;

use crate::common::*;

/// True when the readers can run: `node` with `tests/js`'s packages
/// (installed by `npm ci` on first use) and Chromium. Without them the
/// tests are skipped, unless `OFFWAKE_REQUIRE_LIVE=1`, when they fail.
fn readers() -> bool {
    static INSTALLED: Mutex<Option<Result<(), String>>> = Mutex::new(None);
    let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    let result = installed.get_or_insert_with(install_readers).clone();
    match result {
        Ok(()) => true,
        Err(why) if std::env::var("OFFWAKE_REQUIRE_LIVE").as_deref() == Ok("1") => {
            panic!("{why} (OFFWAKE_REQUIRE_LIVE=1 forbids skipping)")
        }
        Err(why) => {
            eprintln!("skipping: {why}");
            false
        }
    }
}

fn js_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js")
}

fn chromium() -> PathBuf {
    std::env::var_os("CHROMIUM").map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from)
}

fn install_readers() -> Result<(), String> {
    if !chromium().is_file() {
        return Err(format!(
            "no Chromium at {} (apt-get install chromium, or set CHROMIUM)",
            chromium().display()
        ));
    }
    if js_dir().join("node_modules/.package-lock.json").is_file() {
        return Ok(());
    }
    let status = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(js_dir())
        .status()
        .map_err(|e| format!("running npm ci in tests/js (apt-get install npm): {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("npm ci in tests/js failed: {status}"))
    }
}

/// Runs `tests/js/SCRIPT ARGS` and parses the JSON it prints.
fn node(script: &str, args: &[&Path], extra: &[&str]) -> Value {
    let out = Command::new("node")
        .arg(js_dir().join(script))
        .args(args)
        .args(extra)
        .env("CHROMIUM", chromium())
        .output()
        .expect("running node");
    assert!(
        out.status.success(),
        "{script} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{script} printed no JSON ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// A folded line's frames as the drawn formats give them (root first,
/// waker frames marked `_[w]`), turned back into the folded line: the mark
/// dropped, and an empty last field for an entry with no waker.
fn as_folded_line(frames: &[Value]) -> String {
    let mut names: Vec<String> = frames
        .iter()
        .map(|f| {
            let f = f.as_str().expect("a frame name");
            f.strip_suffix("_[w]").unwrap_or(f).to_string()
        })
        .collect();
    if names.last().map(String::as_str) == Some("--") {
        names.push(String::new());
    }
    names.join(";")
}

/// Folded text as line → total.
fn folded_totals(text: &str) -> BTreeMap<String, u64> {
    let mut totals = BTreeMap::new();
    for line in text.lines() {
        let (stack, total) = line.rsplit_once(' ').expect("a total");
        *totals.entry(stack.to_string()).or_insert(0) += total.parse::<u64>().expect("a number");
    }
    totals
}

fn sum(totals: &BTreeMap<String, u64>) -> u64 {
    totals.values().sum()
}

/// One run of `pipewake` written in every format at once: the pprof and
/// speedscope files, decoded by their own readers, hold exactly the folded
/// lines and totals; the SVG renders in Chromium with target frames blue,
/// waker frames aqua and `--` grey, its root titled with the folded total,
/// and a click on the reader's frame zooms in on it.
#[test]
fn one_trace_in_every_format() {
    let _suite = suite(module_path!());
    if !live() || !readers() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("offwake-formats-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating the directory");
    let [folded, svg, json, pprof] =
        ["a.folded", "a.svg", "a.json", "a.pb.gz"].map(|n| dir.join(n));
    let exe = workload("pipewake");
    let out = run_env(
        &[("OFFWAKE_PIN_CPU", "0")],
        &[
            "-f",
            "-o",
            folded.to_str().unwrap(),
            "-o",
            svg.to_str().unwrap(),
            "-o",
            json.to_str().unwrap(),
            "-o",
            pprof.to_str().unwrap(),
            "-o",
            "-",
            "--",
            exe.to_str().unwrap(),
            "20",
            "5",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    let text = std::fs::read_to_string(&folded).expect("reading the folded file");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        text,
        "stdout and -o agree"
    );
    let lines = folded_totals(&text);
    let total = sum(&lines);
    let reader_line = lines
        .keys()
        .find(|l| {
            l.starts_with("reader;") && l.contains(";reader_wait;") && l.contains(";writer_poke;")
        })
        .unwrap_or_else(|| panic!("no reader line woken by writer_poke in:\n{text}"))
        .clone();

    // pprof, decoded by pprof-format.
    let p = node("decode-pprof.mjs", &[&pprof], &[]);
    assert_eq!(
        p["sampleTypes"],
        serde_json::json!([["blocked", "microseconds"]])
    );
    let mut from_pprof: BTreeMap<String, u64> = BTreeMap::new();
    for s in p["samples"].as_array().expect("samples") {
        let line = as_folded_line(s["frames"].as_array().expect("frames"));
        let value = s["values"][0].as_u64().expect("a value");
        if line == reader_line {
            assert_eq!(s["labels"]["target_comm"], "reader", "{s}");
            assert_eq!(s["labels"]["waker_comm"], "writer", "{s}");
            assert!(
                s["labels"]["target_tid"].as_u64().is_some_and(|t| t > 0),
                "{s}"
            );
            assert!(
                s["labels"]["waker_tid"].as_u64().is_some_and(|t| t > 0),
                "{s}"
            );
            let frames = s["frames"].as_array().unwrap();
            assert!(frames.contains(&Value::from("writer_poke_[w]")), "{s}");
            assert!(frames.contains(&Value::from("reader_wait")), "{s}");
        }
        *from_pprof.entry(line).or_insert(0) += value;
    }
    assert_eq!(from_pprof, lines, "pprof against folded");
    eprintln!(
        "pprof total {} us, folded total {total} us",
        sum(&from_pprof)
    );

    // speedscope, checked against the speedscope package's schema.
    let s = node("check-speedscope.mjs", &[&json], &[]);
    assert_eq!(s["valid"], true);
    let mut from_speedscope: BTreeMap<String, u64> = BTreeMap::new();
    for sample in s["samples"].as_array().expect("samples") {
        assert_eq!(sample["unit"], "microseconds");
        let line = as_folded_line(sample["frames"].as_array().expect("frames"));
        *from_speedscope.entry(line).or_insert(0) += sample["weight"].as_u64().expect("a weight");
    }
    assert_eq!(from_speedscope, lines, "speedscope against folded");

    // The SVG, in Chromium.
    let shot = dir.join("a.png");
    let v = node(
        "check-svg.mjs",
        &[&svg],
        &["reader_wait", "writer_poke", shot.to_str().unwrap()],
    );
    assert_eq!(v["errors"], serde_json::json!([]), "script errors");
    let frames = v["frames"].as_array().expect("frames");
    assert_eq!(
        v["rendered"].as_u64(),
        Some(frames.len() as u64),
        "frames of no size"
    );
    let family = |name: &str| -> Vec<String> {
        frames
            .iter()
            .filter(|f| {
                f["title"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("{name} ("))
            })
            .map(|f| f["family"].as_str().unwrap().to_string())
            .collect()
    };
    // Each frame is in the colours of the side(s) its name is on in the
    // folded lines: blue below `--`, aqua above it.
    let mut sides: BTreeMap<&str, (bool, bool)> = BTreeMap::new();
    for line in lines.keys() {
        let fields: Vec<&str> = line.split(';').collect();
        let sep = fields.iter().position(|f| *f == "--").expect("a separator");
        for (i, f) in fields.iter().enumerate().filter(|(_, f)| !f.is_empty()) {
            let side = sides.entry(f).or_default();
            if i < sep {
                side.0 = true;
            } else if i > sep {
                side.1 = true;
            }
        }
    }
    for (name, (target, waker)) in &sides {
        for f in family(name) {
            let ok = match f.as_str() {
                "grey" => *name == "--" || *name == "-",
                "blue" => *target,
                "aqua" => *waker,
                _ => false,
            };
            assert!(
                ok,
                "{name} drawn {f} (target side {target}, waker side {waker})"
            );
        }
    }
    assert_eq!(family("reader_wait"), ["blue"], "the target's frame");
    assert!(
        family("reader").contains(&"blue".to_string()),
        "the target's comm"
    );
    assert!(
        family("writer_poke").contains(&"aqua".to_string()),
        "the waker's frame"
    );
    assert!(
        family("writer").contains(&"aqua".to_string()),
        "the waker's comm"
    );
    assert!(!family("--").is_empty());
    let with_thousands = |n: u64| {
        let digits = n.to_string();
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        out
    };
    let root = format!("all ({} us, 100%)", with_thousands(total));
    assert!(
        frames.iter().any(|f| f["title"] == root.as_str()),
        "no frame titled {root:?}"
    );
    let zoom = &v["zoom"];
    assert!(zoom.is_object(), "no reader_wait frame to click: {v}");
    let (before, after) = (
        zoom["widthBefore"].as_f64().unwrap(),
        zoom["widthAfter"].as_f64().unwrap(),
    );
    assert!(
        after > before && after > 1000.0,
        "the click did not zoom: {zoom}"
    );
    assert_eq!(zoom["resetShown"], true, "{zoom}");
    assert!(zoom["hiddenAfter"].as_u64().unwrap() > 0, "{zoom}");
    let matched = v["matched"].as_str().unwrap();
    assert!(
        matched.starts_with("Matched: "),
        "search found nothing: {matched:?}"
    );
    assert!(
        std::fs::metadata(&shot).is_ok_and(|m| m.len() > 0),
        "no screenshot"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A wall-clock profile (`--wall`) of `wallclock burn`, in pprof and
/// speedscope: the pprof, decoded by pprof-format, is one profile of
/// sample type `wall` whose samples each carry their kind as a label and
/// hold exactly the folded lines; the speedscope file follows the schema,
/// its first profile holds the folded lines and one more per kind holds
/// that kind's.
#[test]
fn a_wall_profile_in_pprof_and_speedscope() {
    let _suite = suite(module_path!());
    if !live() || !readers() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("offwake-wall-formats-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating the directory");
    let [folded, json, pprof] = ["w.folded", "w.json", "w.pb.gz"].map(|n| dir.join(n));
    let exe = workload("wallclock");
    let out = run_env(
        &[("OFFWAKE_PIN_CPU", "0")],
        &[
            "--wall",
            "-f",
            "-o",
            folded.to_str().unwrap(),
            "-o",
            json.to_str().unwrap(),
            "-o",
            pprof.to_str().unwrap(),
            "--",
            exe.to_str().unwrap(),
            "burn",
            "10",
            "20",
            "30",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&folded).expect("reading the folded file");
    let lines = folded_totals(&text);
    let kind_of = |line: &str| match line.rsplit(';').next() {
        Some("[on-cpu]") => "on-cpu",
        Some("[runnable]") => "runnable",
        _ => "blocked",
    };
    for kind in ["on-cpu", "runnable", "blocked"] {
        assert!(
            lines.keys().any(|l| kind_of(l) == kind),
            "no {kind} line in:\n{text}"
        );
    }

    let p = node("decode-pprof.mjs", &[&pprof], &[]);
    assert_eq!(
        p["sampleTypes"],
        serde_json::json!([["wall", "microseconds"]])
    );
    let mut from_pprof: BTreeMap<String, u64> = BTreeMap::new();
    for s in p["samples"].as_array().expect("samples") {
        let line = as_folded_line(s["frames"].as_array().expect("frames"));
        assert_eq!(s["labels"]["kind"], kind_of(&line), "{s}");
        *from_pprof.entry(line).or_insert(0) += s["values"][0].as_u64().expect("a value");
    }
    assert_eq!(from_pprof, lines, "pprof against folded");

    let s = node("check-speedscope.mjs", &[&json], &[]);
    assert_eq!(s["valid"], true);
    let mut by_profile: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for sample in s["samples"].as_array().expect("samples") {
        let profile = sample["profile"].as_str().expect("a profile name");
        let kind = profile.split(' ').next().unwrap_or("").to_string();
        let line = as_folded_line(sample["frames"].as_array().expect("frames"));
        *by_profile.entry(kind).or_default().entry(line).or_insert(0) +=
            sample["weight"].as_u64().expect("a weight");
    }
    assert_eq!(
        by_profile.get("wall"),
        Some(&lines),
        "speedscope against folded"
    );
    for kind in ["on-cpu", "runnable", "blocked"] {
        let want: BTreeMap<String, u64> = lines
            .iter()
            .filter(|(l, _)| kind_of(l) == kind)
            .map(|(l, &us)| (l.clone(), us))
            .collect();
        assert_eq!(by_profile.get(kind), Some(&want), "{kind}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--interval`: a sleeper traced for about 4.5 s with a report every
/// second. Each `-o` report is a file of its own, named with the start of
/// its interval, and decodes in pprof-format; on stdout the folded reports
/// follow each other, a blank line between. Every sleep is in exactly one
/// report: summed over them, the sleeper's own measurement.
#[test]
fn a_report_every_interval() {
    let _suite = suite(module_path!());
    if !live() || !readers() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("offwake-interval-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating the directory");
    let pprof = dir.join("r.pb.gz");
    let exe = workload("sleeploop");
    let out = run_env(
        &[("OFFWAKE_PIN_CPU", "0")],
        &[
            "--interval",
            "1",
            "-f",
            "-o",
            pprof.to_str().unwrap(),
            "-o",
            "-",
            "--",
            exe.to_str().unwrap(),
            "90",
            "50",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let truth = ground_truth(&stderr);
    let reports = stdout.split("\n\n").count();
    let sleeps = |lines: &[Folded]| -> u64 {
        lines
            .iter()
            .filter(|l| l.target_comm == "sleeploop" && has(&l.target, "sleep_once"))
            .map(|l| l.total)
            .sum()
    };
    let total = sleeps(&parse_folded(&stdout));
    assert_ratio("sleeps over every report", total, truth, 0.97, 1.03);

    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("listing the directory")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    assert!(names.len() >= 4, "{names:?}");
    assert_eq!(names.len(), reports, "{names:?}\n{stdout}");
    let mut from_pprof = 0;
    for (i, name) in names.iter().enumerate() {
        let stamp = name
            .strip_prefix("r.")
            .and_then(|n| n.strip_suffix(".pb.gz"))
            .unwrap_or_else(|| panic!("{name} is not r.STAMP.pb.gz"));
        let (date, time) = stamp.split_once('T').expect("a T");
        assert!(
            date.len() == 8
                && time.len() == 7
                && time.ends_with('Z')
                && date
                    .bytes()
                    .chain(time[..6].bytes())
                    .all(|b| b.is_ascii_digit()),
            "{name}"
        );
        let p = node("decode-pprof.mjs", &[&dir.join(name)], &[]);
        let samples = p["samples"].as_array().expect("samples");
        // The last report is the remainder, which may hold nothing.
        assert!(i + 1 == names.len() || !samples.is_empty(), "{name}: {p}");
        for s in samples {
            let frames = s["frames"].as_array().expect("frames");
            if s["labels"]["target_comm"] == "sleeploop"
                && frames.contains(&Value::from("sleep_once"))
            {
                from_pprof += s["values"][0].as_u64().expect("a value");
            }
        }
    }
    assert_eq!(from_pprof, total, "pprof files against stdout");
    let _ = std::fs::remove_dir_all(&dir);
}
