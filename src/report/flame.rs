//! The off-wake flame graph (`--format svg`), drawn by inferno as
//! `flamegraph.pl --color=chain --countname=us` draws it: the target's
//! stack grows from the bottom, then the grey `--`, then the waker's stack
//! and comm on top. Target frames are blue, waker frames aqua, each name
//! keeping its shade across the graph; with `--chain`, each further level
//! has a hue family of its own (purple and pink, green and lime, orange
//! and yellow, then again). A wall-clock profile (`--wall`) is a hot/cold
//! graph: on-CPU stacks in warm colours, waits for a CPU in tan, each kind
//! a tower of its own beside the blocked stacks. Search and click-to-zoom
//! are inferno's own script.

use std::io::{self, Write};

use inferno::flamegraph::color::{BackgroundColor, BasicPalette, Color, PaletteMap};
use inferno::flamegraph::{self, Options, Palette, TextTruncateDirection};

use super::chain::{self, Side, WAKER_MARK};
use super::{Kind, ReportOptions, ResolvedEntry};

/// The suffixes that keep on-CPU and run-queue frames apart from blocked
/// ones of the same name, so that each has its colour: annotations
/// inferno strips from the names it shows, as it strips [`WAKER_MARK`].
const ON_CPU_MARK: &str = "_[j]";
const RUNNABLE_MARK: &str = "_[i]";

/// The graph's title.
const TITLE: &str = "Off-Wake Time Flame Graph";

/// Writes the flame graph of `entries`.
pub(super) fn write(
    out: &mut dyn Write,
    options: &ReportOptions,
    entries: &[ResolvedEntry],
) -> io::Result<()> {
    let mut palette = PaletteMap::default();
    let mut lines: Vec<String> = Vec::with_capacity(entries.len());
    for e in entries {
        let mut frames = chain::frames(options, e);
        let share = match e.kind() {
            Kind::OnCpu => Some((ON_CPU_MARK, HOT)),
            Kind::Runnable => Some((RUNNABLE_MARK, TAN)),
            Kind::Blocked => None,
        };
        for (name, side) in &mut frames {
            let shade = shade(name);
            let color = match (*side, share) {
                // inferno greys `--` and `-` itself.
                (Side::Delimiter, _) => None,
                // Its frames, and the marker frame that says which it is.
                (Side::Target(_), Some((mark, hue))) => {
                    name.push_str(mark);
                    Some(shaded(hue, shade))
                }
                (Side::Waker(_), Some((_, hue))) => Some(shaded(hue, shade)),
                (Side::Target(level), None) => Some(hue(level, false, shade)),
                (Side::Waker(level), None) => Some(hue(level, true, shade)),
            };
            if let Some(color) = color
                && palette.get(name).is_none()
            {
                palette.insert(name, color);
            }
        }
        let mut line = frames
            .into_iter()
            .map(|(name, _)| name)
            .collect::<Vec<_>>()
            .join(";");
        // inferno skips a line that starts "# " as a comment: a comm may.
        if line.starts_with('#') {
            line.replace_range(..1, "\\x23");
        }
        line.push(' ');
        line.push_str(&e.total_us.to_string());
        lines.push(line);
    }
    if lines.is_empty() {
        return write_empty(out);
    }
    let mut opts = Options::default();
    opts.title = TITLE.to_string();
    opts.count_name = "us".to_string();
    opts.colors = Palette::Basic(BasicPalette::Blue);
    opts.bgcolors = Some(BackgroundColor::Blue);
    opts.palette_map = Some(&mut palette);
    // flamegraph.pl keeps a long name's start: `sche..`.
    opts.text_truncate_direction = TextTruncateDirection::Right;
    flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), &mut *out)?;
    out.flush()
}

/// An SVG that says the trace gave nothing to draw (inferno refuses an
/// empty graph).
fn write_empty(out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "<?xml version=\"1.0\" standalone=\"no\"?>\n\
         <svg version=\"1.1\" width=\"1200\" height=\"60\" xmlns=\"http://www.w3.org/2000/svg\">\
         <text x=\"600\" y=\"24\" text-anchor=\"middle\" font-family=\"Verdana\" font-size=\"17\">\
         {TITLE}</text><text x=\"600\" y=\"48\" text-anchor=\"middle\" font-family=\"Verdana\" \
         font-size=\"12\">No blocked time was recorded.</text></svg>"
    )?;
    out.flush()
}

/// A shade in 0..1 for `name`, the same on every run (FNV-1a, without
/// the waker mark and the level prefix, so that a function keeps its shade
/// on both sides and at every level).
fn shade(name: &str) -> f32 {
    let name = [WAKER_MARK, ON_CPU_MARK, RUNNABLE_MARK]
        .into_iter()
        .find_map(|mark| name.strip_suffix(mark))
        .unwrap_or(name);
    let name = match name.split_once("] ") {
        Some((level, rest)) if level.starts_with('[') => rest,
        _ => name,
    };
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (hash >> 40) as f32 / (1u64 << 24) as f32
}

/// A hue: its red, green and blue at shade 0, and how far each goes at
/// shade 1.
type Hue = [(f32, f32); 3];

/// flamegraph.pl's "blue" and "aqua", which its chain palette gives
/// off-CPU and waker frames: the first level's.
const FIRST: [Hue; 2] = [
    [(80.0, 60.0), (80.0, 60.0), (205.0, 50.0)],
    [(50.0, 60.0), (165.0, 55.0), (165.0, 55.0)],
];

/// The further levels' families, blocked and waker: purple and pink,
/// green and lime, orange and yellow.
const FURTHER: [[Hue; 2]; 3] = [
    [
        [(140.0, 50.0), (90.0, 40.0), (200.0, 50.0)],
        [(215.0, 35.0), (120.0, 50.0), (190.0, 40.0)],
    ],
    [
        [(70.0, 50.0), (165.0, 50.0), (70.0, 50.0)],
        [(165.0, 50.0), (205.0, 45.0), (80.0, 50.0)],
    ],
    [
        [(225.0, 30.0), (135.0, 50.0), (50.0, 40.0)],
        [(215.0, 35.0), (195.0, 45.0), (70.0, 50.0)],
    ],
];

/// flamegraph.pl's "hot", for on-CPU frames.
const HOT: Hue = [(205.0, 50.0), (0.0, 230.0), (0.0, 55.0)];

/// Tan, for waits for a CPU: no chain level's family is near it.
const TAN: Hue = [(175.0, 40.0), (140.0, 35.0), (100.0, 30.0)];

/// The colour of `hue` at shade `v`.
fn shaded(hue: Hue, v: f32) -> Color {
    let [r, g, b] = hue.map(|(base, spread)| base + spread * v);
    rgb(r, g, b)
}

/// The colour, at shade `v`, of a blocked (or, if `waker`, waking) frame
/// at `level`.
fn hue(level: u8, waker: bool, v: f32) -> Color {
    let family = match level {
        0 | 1 => FIRST,
        n => FURTHER[usize::from(n - 2) % FURTHER.len()],
    };
    shaded(family[usize::from(waker)], v)
}

fn rgb(r: f32, g: f32, b: f32) -> Color {
    // In 0..=255 by construction (v < 1).
    let c = |x: f32| x.clamp(0.0, 255.0) as u8;
    Color {
        r: c(r),
        g: c(g),
        b: c(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::{hostile, names, opts, sample, sleeper};
    use crate::report::{Format, Frame, Frames, StackMode};

    /// The flame graph of `entries`, checked to be well-formed XML.
    fn svg(entries: &[ResolvedEntry]) -> String {
        let options = ReportOptions {
            format: Format::Svg,
            ..opts(false, false, StackMode::Both)
        };
        let mut out = Vec::new();
        write(&mut out, &options, entries).unwrap();
        let text = String::from_utf8(out).unwrap();
        if let Err(e) = parse(&text) {
            panic!("not well-formed XML: {e}\n{text}");
        }
        text
    }

    fn parse(text: &str) -> Result<roxmltree::Document<'_>, roxmltree::Error> {
        let options = roxmltree::ParsingOptions {
            allow_dtd: true,
            ..Default::default()
        };
        roxmltree::Document::parse_with_options(text, options)
    }

    /// The frame names of `svg` as an XML reader reads them: each frame's
    /// `<title>` without its `(N us, P%)`, and its `<text>`.
    fn frame_names(svg: &str) -> Vec<(String, String)> {
        let doc = parse(svg).unwrap();
        let text_of = |g: roxmltree::Node<'_, '_>, tag: &str| -> String {
            g.children()
                .find(|n| n.has_tag_name(tag))
                .map(|n| n.text().unwrap_or("").to_string())
                .unwrap_or_else(|| panic!("a frame without <{tag}>"))
        };
        doc.descendants()
            .filter(|n| n.has_tag_name("g") && n.children().any(|c| c.has_tag_name("title")))
            .map(|g| {
                let title = text_of(g, "title");
                let (name, _) = title.rsplit_once(" (").unwrap();
                (name.to_string(), text_of(g, "text"))
            })
            .collect()
    }

    /// The fill of the frame whose title starts with `name (`.
    fn fill_of(svg: &str, name: &str) -> (u8, u8, u8) {
        fills_of(svg, name)
            .first()
            .copied()
            .unwrap_or_else(|| panic!("no frame {name}"))
    }

    /// The fills of every frame whose title starts with `name (`.
    fn fills_of(svg: &str, name: &str) -> Vec<(u8, u8, u8)> {
        let title = format!("<title>{name} (");
        svg.match_indices(&title)
            .map(|(at, _)| {
                let rest = &svg[at..];
                let fill = &rest[rest.find("fill=\"rgb(").unwrap() + 10..];
                let rgb: Vec<u8> = fill[..fill.find(')').unwrap()]
                    .split(',')
                    .map(|c| c.parse().unwrap())
                    .collect();
                (rgb[0], rgb[1], rgb[2])
            })
            .collect()
    }

    fn is_blue((r, g, b): (u8, u8, u8)) -> bool {
        (80..=140).contains(&r) && r == g && (205..=255).contains(&b)
    }

    fn is_aqua((r, g, b): (u8, u8, u8)) -> bool {
        (50..=110).contains(&r) && g == b && (165..=220).contains(&g)
    }

    #[test]
    fn target_frames_are_blue_waker_frames_aqua_and_the_separator_grey() {
        let got = svg(&sample());
        for target in ["app", "schedule", "do_nanosleep", "clock_nanosleep"] {
            assert!(is_blue(fill_of(&got, target)), "{target}");
        }
        // `main` is on both sides: one blue frame, one aqua.
        for waker in ["hrtimer_wakeup", "spin", "waker"] {
            assert!(is_aqua(fill_of(&got, waker)), "{waker}");
        }
        assert_eq!(fill_of(&got, "--"), (160, 160, 160));
        // The mark only colours: titles do not show it.
        assert!(!got.contains("_[w]"));
        // Microseconds and percentages in the titles.
        assert!(got.contains("<title>app (1,007 us, 96.00%)"), "{got}");
        assert!(got.contains("<title>all (1,049 us, 100%)"), "{got}");
    }

    #[test]
    fn each_chain_level_has_a_hue_family_of_its_own() {
        let got = svg(&[crate::report::tests::chained(None)]);
        assert!(is_blue(fill_of(&got, "spin")) || is_aqua(fill_of(&got, "spin")));
        let (r, g, b) = fill_of(&got, "[2] futex_wait");
        assert!(b > g && r > g && !is_blue((r, g, b)), "purple: {r},{g},{b}");
        let (r, g, b) = fill_of(&got, "[2] hrtimer_wakeup");
        assert!(r > b && b > g && r >= 215, "pink: {r},{g},{b}");
        assert!(is_aqua(fill_of(&got, "hrtimer_wakeup")));
        let (r, g, b) = fill_of(&got, "[2] [hardirq]");
        assert!(
            r > b && b > g,
            "the interrupt is level 2's waker: {r},{g},{b}"
        );
        // Later levels cycle through the other families.
        assert_ne!(hue(3, false, 0.5), hue(2, false, 0.5));
        assert_eq!(hue(5, true, 0.5), hue(2, true, 0.5));
    }

    #[test]
    fn a_wall_profile_is_hot_and_cold_each_kind_a_tower() {
        let got = svg(&crate::report::tests::wall());
        // Three towers from three roots, all named `app`.
        let roots = frame_names(&got)
            .into_iter()
            .filter(|(title, _)| title == "app")
            .count();
        assert_eq!(roots, 3, "{got}");
        let fills = |name: &str| fills_of(&got, name);
        // On-CPU frames are warm: red high, blue low.
        let hot = |(r, g, b): (u8, u8, u8)| r >= 205 && b <= 55 && g < r;
        assert!(fills("burn").into_iter().all(hot), "{:?}", fills("burn"));
        assert!(fills("[on-cpu]").into_iter().all(hot));
        // The run queue's are tan; blocked ones blue, waker ones aqua.
        let tan = |(r, g, b): (u8, u8, u8)| r > g && g > b && b >= 100 && r <= 215;
        assert!(fills("[runnable]").into_iter().all(tan));
        let schedule = fills("schedule");
        assert_eq!(schedule.len(), 2, "a blocked and a runnable tower");
        assert_eq!(schedule.iter().filter(|&&c| tan(c)).count(), 1);
        assert_eq!(schedule.iter().filter(|&&c| is_blue(c)).count(), 1);
        assert!(is_aqua(fill_of(&got, "hrtimer_wakeup")));
        // The marks only colour.
        assert!(!got.contains("_[j]") && !got.contains("_[i]"), "{got}");
    }

    #[test]
    fn the_graph_has_inferno_search_and_zoom() {
        let got = svg(&[sleeper(1, 5)]);
        assert!(got.contains("function search("), "no search");
        assert!(got.contains("function zoom("), "no zoom");
        assert!(got.contains(TITLE));
        // Long names keep their start, as flamegraph.pl shows them.
        assert!(got.contains("truncate_text_right = true"), "{got}");
    }

    #[test]
    fn hostile_names_cannot_add_markup() {
        let got = svg(&[hostile()]);
        assert!(!got.contains("\x1b"));
        assert!(got.contains("\\x1b[31mred"), "escaped as in folded output");
        let mut e = sleeper(1, 5);
        e.target_comm = "# <script>alert(1)</script>".into();
        let got = svg(&[e]);
        assert!(!got.contains("<script>alert"), "{got}");
        assert!(got.contains("\\x23 &lt;script&gt;"), "kept, not a comment");
    }

    /// The reader the tests rely on refuses what XML 1.0 forbids, raw or
    /// as a character reference.
    #[test]
    fn the_xml_reader_refuses_characters_xml_forbids() {
        let doc = |body: &str| format!("<svg><title>{body}</title><text a=\"{body}\"/></svg>");
        assert!(parse(&doc("a &lt; \u{fffd} \u{10fffd} \t")).is_ok());
        for bad in [
            "\u{fffe}", "\u{ffff}", "\u{0}", "\u{1}", "\u{1b}", "&#xFFFE;", "&#xFFFF;", "&#x1;",
        ] {
            assert!(parse(&doc(bad)).is_err(), "{bad:?} accepted");
        }
    }

    /// A name a traced process chose, with every character XML forbids
    /// and those it treats apart, as comm and as function name.
    fn xml_hostile() -> ResolvedEntry {
        let c0: String = (0u8..0x20).map(char::from).collect();
        let name = |n: &str| Frame::Name(n.into());
        ResolvedEntry {
            target_comm: "\u{fffe}\u{ffff}<&\"]]>".into(),
            target_tid: 7,
            waker_comm: "w\u{ffff}\x01'\x1f".into(),
            waker_tid: 8,
            waker_context: crate::event::WakeContext::Task,
            target_kernel: names(&["schedule"]),
            target_user: Frames::from(vec![
                name(&format!("c0{c0}")),
                name("a\u{fffe}b\u{ffff}c"),
                name("<script>x&amp;</script>"),
                name("cdata]]><![CDATA["),
                name("&#xFFFE;"),
                name("del\x7f c1\u{80}\u{85}\u{9f}"),
                name("nc\u{fdd0}\u{fdef}\u{1fffe}\u{10ffff}"),
            ]),
            waker_kernel: names(&["hrtimer_wakeup"]),
            waker_user: Frames::from(vec![name("q\"'\u{ffff}")]),
            total_us: 5,
            chain: Vec::new(),
            cgroup: None,
            target_ns_tid: None,
        }
    }

    #[test]
    fn names_with_characters_xml_forbids_make_a_well_formed_svg() {
        let got = svg(&[xml_hostile()]);
        for c in [
            '\u{fffe}',
            '\u{ffff}',
            '\u{fdd0}',
            '\u{1fffe}',
            '\u{10ffff}',
        ] {
            assert!(!got.contains(c), "{c:?} in the SVG");
        }
        assert!(
            !got.chars()
                .any(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r')),
            "a control character in the SVG"
        );
        // Root first: the target's comm, its stack, `--`, the waker's
        // stack and comm.
        let want = [
            "all",
            r#"\xef\xbf\xbe\xef\xbf\xbf<&"]]>"#,
            r"nc\xef\xb7\x90\xef\xb7\xaf\xf0\x9f\xbf\xbe\xf4\x8f\xbf\xbf",
            r"del\x7f c1\xc2\x80\xc2\x85\xc2\x9f",
            r"&#xFFFE\x3b",
            "cdata]]><![CDATA[",
            r"<script>x&amp\x3b</script>",
            r"a\xef\xbf\xbeb\xef\xbf\xbfc",
            concat!(
                r"c0\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f",
                r"\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f",
            ),
            "schedule",
            "--",
            "hrtimer_wakeup",
            r#"q"'\xef\xbf\xbf"#,
            r"w\xef\xbf\xbf\x01'\x1f",
        ];
        let frames = frame_names(&got);
        let titles: Vec<&str> = frames.iter().map(|(title, _)| title.as_str()).collect();
        assert_eq!(titles, want);
        // The one stack is as wide as the graph: each name is shown whole.
        for (title, text) in &frames {
            if title != "all" {
                assert_eq!(title, text);
            }
        }
        // Names are in no script or style.
        let doc = parse(&got).unwrap();
        let code: String = doc
            .descendants()
            .filter(|n| n.has_tag_name("script") || n.has_tag_name("style"))
            .flat_map(|n| n.descendants().filter_map(|t| t.text()))
            .collect();
        assert!(code.contains("function zoom("), "{code}");
        assert!(!code.contains("cdata") && !code.contains("\\x"), "{code}");
    }

    #[test]
    fn an_empty_trace_is_a_valid_svg_that_says_so() {
        let got = svg(&[]);
        assert!(got.starts_with("<?xml"));
        assert!(got.contains("No blocked time was recorded."));
        assert!(got.trim_end().ends_with("</svg>"));
    }
}
