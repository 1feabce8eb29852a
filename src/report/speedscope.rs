//! speedscope output (`--format speedscope`): one sampled profile in
//! speedscope's file format, whose samples are the entries' folded lines
//! (root first, waker frames marked `_[w]`) weighted by their blocked
//! microseconds, so that `speedscope FILE` opens it as a flame graph. A
//! wall-clock profile has three more, one per kind of time (on-CPU,
//! waiting for a CPU, blocked), which speedscope lists to choose from.

use std::collections::HashMap;
use std::io::{self, Write};

use serde_json::json;

use super::chain;
use super::{Kind, ReportOptions, ResolvedEntry};

/// The schema the file follows, as speedscope names it.
const SCHEMA: &str = "https://www.speedscope.app/file-format-schema.json";

/// Writes the speedscope file of `entries`.
pub(super) fn write(
    out: &mut dyn Write,
    options: &ReportOptions,
    entries: &[ResolvedEntry],
) -> io::Result<()> {
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut frames: Vec<serde_json::Value> = Vec::new();
    let mut samples: Vec<Vec<usize>> = Vec::with_capacity(entries.len());
    for e in entries {
        let sample = chain::frames(options, e)
            .into_iter()
            .map(|(name, _)| {
                *index.entry(name).or_insert_with_key(|name| {
                    frames.push(json!({ "name": name }));
                    frames.len() - 1
                })
            })
            .collect();
        samples.push(sample);
    }
    let (name, first) = if options.wall {
        (
            "offwake-perf: wall time by stack, and blocked time by waker",
            "wall (us): on-CPU, runnable and blocked; frames marked _[w] are the waker's",
        )
    } else {
        (
            "offwake-perf: blocked time by off-CPU and waker stack",
            "off-CPU + waker (us); frames marked _[w] are the waker's",
        )
    };
    let mut profiles = vec![profile(first, entries, &samples, |_| true)];
    if options.wall {
        for kind in Kind::ALL {
            let name = format!("{} (us)", kind.name());
            profiles.push(profile(&name, entries, &samples, |e| e.kind() == kind));
        }
    }
    let file = json!({
        "$schema": SCHEMA,
        "name": name,
        "exporter": concat!("offwake-perf ", env!("CARGO_PKG_VERSION")),
        "activeProfileIndex": 0,
        "shared": { "frames": frames },
        "profiles": profiles,
    });
    serde_json::to_writer(&mut *out, &file)?;
    writeln!(out)?;
    out.flush()
}

/// A sampled profile named `name` of the entries `keep` keeps, whose
/// frames are `samples` (one per entry).
fn profile(
    name: &str,
    entries: &[ResolvedEntry],
    samples: &[Vec<usize>],
    keep: impl Fn(&ResolvedEntry) -> bool,
) -> serde_json::Value {
    let (mut kept, mut weights, mut total) = (Vec::new(), Vec::new(), 0u64);
    for (e, sample) in entries.iter().zip(samples).filter(|(e, _)| keep(e)) {
        kept.push(sample);
        weights.push(e.total_us);
        total = total.saturating_add(e.total_us);
    }
    json!({
        "type": "sampled",
        "name": name,
        "unit": "microseconds",
        "startValue": 0,
        "endValue": total,
        "samples": kept,
        "weights": weights,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::{opts, sample};
    use crate::report::{Format, StackMode};

    #[test]
    fn a_wall_profile_has_a_profile_per_kind() {
        let options = ReportOptions {
            format: Format::Speedscope,
            wall: true,
            ..opts(false, false, StackMode::Both)
        };
        let mut out = Vec::new();
        write(&mut out, &options, &crate::report::tests::wall()).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let got: Vec<(String, u64)> = v["profiles"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let name = p["name"].as_str().unwrap();
                (
                    name.split(' ').next().unwrap().to_string(),
                    p["endValue"].as_u64().unwrap(),
                )
            })
            .collect();
        let want = [
            ("wall", 104),
            ("on-cpu", 30),
            ("runnable", 4),
            ("blocked", 70),
        ];
        assert_eq!(got, want.map(|(n, us)| (n.to_string(), us)).to_vec());
    }

    #[test]
    fn samples_are_the_chains_weighted_by_their_totals() {
        let entries = sample();
        let options = ReportOptions {
            format: Format::Speedscope,
            ..opts(false, false, StackMode::Both)
        };
        let mut out = Vec::new();
        write(&mut out, &options, &entries).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let profile = &v["profiles"][0];
        assert_eq!(profile["type"], "sampled");
        assert_eq!(profile["unit"], "microseconds");
        let weights: Vec<u64> = profile["weights"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_u64().unwrap())
            .collect();
        assert_eq!(
            weights,
            entries.iter().map(|e| e.total_us).collect::<Vec<_>>()
        );
        assert_eq!(profile["endValue"], weights.iter().sum::<u64>());
        let frames = v["shared"]["frames"].as_array().unwrap();
        let names: Vec<&str> = profile["samples"][0]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                frames[i.as_u64().unwrap() as usize]["name"]
                    .as_str()
                    .unwrap()
            })
            .collect();
        assert_eq!(names.first(), Some(&"app"));
        assert!(names.contains(&"--"));
        assert_eq!(names.last(), Some(&"waker_[w]"));
        assert!(names.contains(&"hrtimer_wakeup_[w]"));
        assert!(names.contains(&"do_nanosleep"));
    }
}
