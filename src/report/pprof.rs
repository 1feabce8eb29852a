//! pprof output (`--format pprof`): a gzipped `profile.proto`, as
//! `go tool pprof`, Pyroscope, Parca and Grafana read it. One sample per
//! entry; its locations are the frames of the entry's folded line, leaf
//! first, waker frames marked `_[w]`; its value is the blocked time in
//! microseconds; comms, thread ids and the target's cgroup are labels. A
//! wall-clock profile's sample type is `wall`, and each sample's `kind`
//! label says what its time was: `on-cpu`, `runnable` or `blocked`.

use std::collections::HashMap;
use std::io::{self, Write};

use flate2::Compression;
use flate2::write::GzEncoder;
use prost::Message;

use super::chain;
use super::{ReportOptions, ResolvedEntry, Span, comm};
use crate::report::Place;

/// The messages of google/pprof's `proto/profile.proto` that the report
/// fills, with that file's field numbers (fields left out stay at their
/// defaults, which readers take as unset).
mod proto {
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Profile {
        #[prost(message, repeated, tag = "1")]
        pub(super) sample_type: Vec<ValueType>,
        #[prost(message, repeated, tag = "2")]
        pub(super) sample: Vec<Sample>,
        #[prost(message, repeated, tag = "4")]
        pub(super) location: Vec<Location>,
        #[prost(message, repeated, tag = "5")]
        pub(super) function: Vec<Function>,
        #[prost(string, repeated, tag = "6")]
        pub(super) string_table: Vec<String>,
        #[prost(int64, tag = "9")]
        pub(super) time_nanos: i64,
        #[prost(int64, tag = "10")]
        pub(super) duration_nanos: i64,
        #[prost(message, optional, tag = "11")]
        pub(super) period_type: Option<ValueType>,
        #[prost(int64, tag = "12")]
        pub(super) period: i64,
        #[prost(int64, repeated, tag = "13")]
        pub(super) comment: Vec<i64>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct ValueType {
        #[prost(int64, tag = "1")]
        pub(super) r#type: i64,
        #[prost(int64, tag = "2")]
        pub(super) unit: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Sample {
        /// Leaf first.
        #[prost(uint64, repeated, tag = "1")]
        pub(super) location_id: Vec<u64>,
        #[prost(int64, repeated, tag = "2")]
        pub(super) value: Vec<i64>,
        #[prost(message, repeated, tag = "3")]
        pub(super) label: Vec<Label>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Label {
        #[prost(int64, tag = "1")]
        pub(super) key: i64,
        #[prost(int64, tag = "2")]
        pub(super) str: i64,
        #[prost(int64, tag = "3")]
        pub(super) num: i64,
        #[prost(int64, tag = "4")]
        pub(super) num_unit: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Location {
        #[prost(uint64, tag = "1")]
        pub(super) id: u64,
        #[prost(message, repeated, tag = "4")]
        pub(super) line: Vec<Line>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Line {
        #[prost(uint64, tag = "1")]
        pub(super) function_id: u64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Function {
        #[prost(uint64, tag = "1")]
        pub(super) id: u64,
        #[prost(int64, tag = "2")]
        pub(super) name: i64,
        #[prost(int64, tag = "3")]
        pub(super) system_name: i64,
    }
}

/// The sample type: what a sample's value is, and its unit.
const SAMPLE_TYPE: (&str, &str) = ("blocked", "microseconds");

/// The sample type of a wall-clock profile (`--wall`).
const WALL_SAMPLE_TYPE: (&str, &str) = ("wall", "microseconds");

/// Builds the profile for `entries`: strings, functions and locations each
/// stored once.
struct Builder {
    profile: proto::Profile,
    strings: HashMap<String, i64>,
    /// Location (and function) id of each frame name.
    locations: HashMap<String, u64>,
}

impl Builder {
    fn new(wall: bool) -> Builder {
        let mut b = Builder {
            profile: proto::Profile::default(),
            strings: HashMap::new(),
            locations: HashMap::new(),
        };
        // string_table[0] must be "".
        b.string("");
        let (kind, unit) = if wall { WALL_SAMPLE_TYPE } else { SAMPLE_TYPE };
        let value_type = proto::ValueType {
            r#type: b.string(kind),
            unit: b.string(unit),
        };
        b.profile.sample_type = vec![value_type.clone()];
        b.profile.period_type = Some(value_type);
        b.profile.period = 1;
        let comment = b.string(concat!(
            "offwake-perf ",
            env!("CARGO_PKG_VERSION"),
            ": off-CPU time by blocked stack and waker stack; frames marked _[w] are the waker's"
        ));
        b.profile.comment = vec![comment];
        b
    }

    fn string(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.profile.string_table.len() as i64;
        self.profile.string_table.push(s.to_string());
        self.strings.insert(s.to_string(), i);
        i
    }

    fn location(&mut self, name: &str) -> u64 {
        if let Some(&id) = self.locations.get(name) {
            return id;
        }
        let id = self.profile.location.len() as u64 + 1;
        let name_index = self.string(name);
        self.profile.function.push(proto::Function {
            id,
            name: name_index,
            system_name: name_index,
        });
        self.profile.location.push(proto::Location {
            id,
            line: vec![proto::Line { function_id: id }],
        });
        self.locations.insert(name.to_string(), id);
        id
    }

    fn str_label(&mut self, key: &str, value: &str) -> proto::Label {
        proto::Label {
            key: self.string(key),
            str: self.string(value),
            ..Default::default()
        }
    }

    fn num_label(&mut self, key: &str, value: u32) -> proto::Label {
        proto::Label {
            key: self.string(key),
            num: i64::from(value),
            ..Default::default()
        }
    }

    fn add(&mut self, options: &ReportOptions, e: &ResolvedEntry) {
        let frames = chain::frames(options, e);
        let location_id = frames
            .iter()
            .rev()
            .map(|(name, _)| self.location(name))
            .collect();
        let mut label = vec![
            self.str_label("target_comm", &comm(&e.target_comm, Place::Folded)),
            self.num_label("target_tid", e.target_tid),
        ];
        if e.has_waker() {
            label.push(self.str_label("waker_comm", &e.waker_comm(Place::Folded)));
            label.push(self.num_label("waker_tid", e.waker_tid));
        }
        if let Some(ns) = e.target_ns_tid {
            label.push(self.num_label("target_ns_tid", ns));
        }
        if let Some(cgroup) = &e.cgroup {
            label.push(self.str_label("cgroup", &cgroup.shown(Place::Folded)));
        }
        if options.wall {
            label.push(self.str_label("kind", e.kind().name()));
        }
        self.profile.sample.push(proto::Sample {
            location_id,
            value: vec![i64::try_from(e.total_us).unwrap_or(i64::MAX)],
            label,
        });
    }
}

/// Writes the gzipped profile of `entries`.
/// `span` is when the trace ran: viewers place the profile in time by it.
pub(super) fn write(
    out: &mut dyn Write,
    options: &ReportOptions,
    entries: &[ResolvedEntry],
    span: Span,
) -> io::Result<()> {
    let mut builder = Builder::new(options.wall);
    let nanos = |d: std::time::Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
    builder.profile.time_nanos = span
        .start
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, nanos);
    builder.profile.duration_nanos = nanos(span.duration);
    for e in entries {
        builder.add(options, e);
    }
    let mut gz = GzEncoder::new(out, Compression::default());
    gz.write_all(&builder.profile.encode_to_vec())?;
    gz.finish()?.flush()
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;
    use crate::report::tests::{hostile, opts, render, sample};
    use crate::report::{Format, StackMode};

    fn decode(bytes: &[u8]) -> proto::Profile {
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(bytes)
            .read_to_end(&mut raw)
            .unwrap();
        proto::Profile::decode(raw.as_slice()).unwrap()
    }

    fn pprof(entries: &[ResolvedEntry]) -> proto::Profile {
        let options = ReportOptions {
            format: Format::Pprof,
            ..opts(false, true, StackMode::Both)
        };
        let mut out = Vec::new();
        let span = Span {
            start: std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000),
            duration: std::time::Duration::from_millis(2500),
        };
        write(&mut out, &options, entries, span).unwrap();
        decode(&out)
    }

    /// The frames of a sample, root first, as names.
    fn frames(p: &proto::Profile, s: &proto::Sample) -> Vec<String> {
        s.location_id
            .iter()
            .rev()
            .map(|&id| {
                let loc = &p.location[id as usize - 1];
                assert_eq!(loc.id, id);
                let f = &p.function[loc.line[0].function_id as usize - 1];
                p.string_table[f.name as usize].clone()
            })
            .collect()
    }

    fn labels(p: &proto::Profile, s: &proto::Sample) -> Vec<(String, String)> {
        s.label
            .iter()
            .map(|l| {
                let value = if l.str != 0 {
                    p.string_table[l.str as usize].clone()
                } else {
                    l.num.to_string()
                };
                (p.string_table[l.key as usize].clone(), value)
            })
            .collect()
    }

    #[test]
    fn a_wall_profile_labels_each_sample_with_its_kind() {
        let options = ReportOptions {
            format: Format::Pprof,
            wall: true,
            ..opts(false, false, StackMode::Both)
        };
        let mut out = Vec::new();
        write(
            &mut out,
            &options,
            &crate::report::tests::wall(),
            Span::default(),
        )
        .unwrap();
        let p = decode(&out);
        let ty = &p.sample_type[0];
        assert_eq!(
            (
                p.string_table[ty.r#type as usize].as_str(),
                p.sample_type.len()
            ),
            ("wall", 1)
        );
        let kinds: Vec<(String, i64)> = p
            .sample
            .iter()
            .map(|s| {
                let kind = labels(&p, s)
                    .into_iter()
                    .find(|(k, _)| k == "kind")
                    .map(|(_, v)| v)
                    .unwrap();
                (kind, s.value[0])
            })
            .collect();
        let want = [("on-cpu", 30), ("runnable", 4), ("blocked", 70)];
        assert_eq!(kinds, want.map(|(k, v)| (k.to_string(), v)).to_vec());
        // Without --wall, no kind.
        let plain = pprof(&crate::report::tests::wall());
        assert!(
            plain
                .sample
                .iter()
                .all(|s| labels(&plain, s).iter().all(|(k, _)| k != "kind"))
        );
    }

    #[test]
    fn one_sample_per_entry_with_the_folded_frames_leaf_first() {
        let entries = sample();
        let p = pprof(&entries);
        assert_eq!(p.string_table[0], "");
        assert_eq!(p.time_nanos, 1_700_000_000_000_000_000);
        assert_eq!(p.duration_nanos, 2_500_000_000);
        let st = &p.sample_type[0];
        assert_eq!(p.string_table[st.r#type as usize], "blocked");
        assert_eq!(p.string_table[st.unit as usize], "microseconds");
        assert_eq!(p.sample.len(), entries.len());
        let total: i64 = p.sample.iter().map(|s| s.value[0]).sum();
        assert_eq!(
            total,
            entries.iter().map(|e| e.total_us as i64).sum::<i64>()
        );
        // The same frames as the folded line, waker frames marked.
        let folded = render(opts(true, true, StackMode::Both), &entries[..1]);
        let (line, _) = folded.trim_end().rsplit_once(' ').unwrap();
        let want: Vec<String> = {
            let fields: Vec<&str> = line.split(';').collect();
            let sep = fields.iter().position(|f| *f == "--").unwrap();
            fields
                .iter()
                .enumerate()
                .map(|(i, f)| match *f {
                    "-" | "--" => f.to_string(),
                    _ if i > sep => format!("{f}_[w]"),
                    _ => f.to_string(),
                })
                .collect()
        };
        assert_eq!(frames(&p, &p.sample[0]), want);
        assert_eq!(
            labels(&p, &p.sample[0]),
            [
                ("target_comm".to_string(), "app".to_string()),
                ("target_tid".to_string(), "100".to_string()),
                ("waker_comm".to_string(), "waker".to_string()),
                ("waker_tid".to_string(), "200".to_string()),
            ]
        );
    }

    #[test]
    fn the_targets_cgroup_is_a_label() {
        let mut e = sample().remove(0);
        e.cgroup = Some(crate::report::CgroupName::Path(
            b"/kubepods.slice/pod1".as_slice().into(),
        ));
        let p = pprof(&[e]);
        let got = labels(&p, &p.sample[0]);
        assert!(
            got.contains(&("cgroup".to_string(), "/kubepods.slice/pod1".to_string())),
            "{got:?}"
        );
        // The frames stay as they were without --per-cgroup.
        assert_eq!(frames(&p, &p.sample[0])[0], "app");
    }

    #[test]
    fn an_entry_without_a_waker_ends_at_the_separator_with_no_waker_labels() {
        let entries = sample();
        let p = pprof(&entries[2..3]);
        let f = frames(&p, &p.sample[0]);
        assert_eq!(f.first().map(String::as_str), Some("kworker/0:1"));
        assert_eq!(f.last().map(String::as_str), Some("--"));
        assert_eq!(labels(&p, &p.sample[0]).len(), 2);
    }

    #[test]
    fn a_chain_levels_frames_carry_its_number() {
        let p = pprof(&[crate::report::tests::chained(None)]);
        let f = frames(&p, &p.sample[0]);
        let at = |name: &str| f.iter().position(|n| n == name);
        // Root first: level 1 unmarked, then level 2's blocked stack and
        // its waker.
        assert_eq!(f.first().map(String::as_str), Some("app"));
        assert!(at("waker_[w]") < at("[2] futex_wait"), "{f:?}");
        assert!(at("hrtimer_wakeup_[w]") < at("[2] spin"), "{f:?}");
        assert!(at("[2] hrtimer_wakeup_[w]").is_some(), "{f:?}");
        assert_eq!(f.last().map(String::as_str), Some("[2] [hardirq]_[w]"));
    }

    #[test]
    fn each_frame_name_is_one_location_and_one_string() {
        let entries = sample();
        let p = pprof(&entries);
        let mut names: Vec<&String> = p
            .function
            .iter()
            .map(|f| &p.string_table[f.name as usize])
            .collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n);
        let mut strings = p.string_table.clone();
        strings.sort();
        strings.dedup();
        assert_eq!(strings.len(), p.string_table.len());
    }

    #[test]
    fn hostile_names_are_escaped_as_in_the_folded_line() {
        let p = pprof(&[hostile()]);
        let f = frames(&p, &p.sample[0]);
        assert_eq!(f[0], "ev\\x3bil c\\nFAKE\\x3b9");
        assert!(f.iter().all(|n| !n.contains(['\n', ';', '\x1b'])), "{f:?}");
        assert_eq!(f.last().unwrap(), "wk\\x3br\\nFAKE\\x3b--\\x2099_[w]");
    }
}
