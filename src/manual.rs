//! What `--generate` prints: the man page (clap_mangen, with the sections
//! `--help` has no room for) and the shells' completion scripts
//! (clap_complete), both built from the command line's own definitions,
//! so they cannot drift from the options.

use std::io::Write;

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;
use roff::{Roff, bold, italic, roman};

use crate::cli::{Cli, EXAMPLES, Generate};

/// The binary's name, as the completions and the man page know it.
const NAME: &str = "offwake-perf";

/// Writes what `what` asks for to `out`. A reader that goes away early
/// (`| head`) only stops the writing, as it does for the report.
pub(crate) fn write(what: Generate, out: &mut dyn Write) -> Result<()> {
    let mut cmd = Cli::command();
    let written = match what {
        Generate::Man => man(cmd, out),
        Generate::CompleteBash => complete(Shell::Bash, &mut cmd, out),
        Generate::CompleteZsh => complete(Shell::Zsh, &mut cmd, out),
        Generate::CompleteFish => complete(Shell::Fish, &mut cmd, out),
    }
    .and_then(|()| out.flush());
    match written {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing to stdout"),
    }
}

fn complete(shell: Shell, cmd: &mut clap::Command, out: &mut dyn Write) -> std::io::Result<()> {
    // clap_complete panics when its writer fails: it writes to memory, and
    // a closed stdout is met here.
    let mut buf = Vec::new();
    clap_complete::generate(shell, cmd, NAME, &mut buf);
    out.write_all(&buf)
}

/// The man page: clap's sections, then examples and what a manual adds.
fn man(cmd: clap::Command, out: &mut dyn Write) -> std::io::Result<()> {
    let version = cmd.get_version().unwrap_or_default().to_string();
    let page = clap_mangen::Man::new(cmd)
        .date(page_date())
        .source(format!("{NAME} {version}"))
        .manual("User Commands");
    let mut parts = Vec::new();
    page.render_title(&mut parts)?;
    page.render_name_section(&mut parts)?;
    page.render_synopsis_section(&mut parts)?;
    page.render_description_section(&mut parts)?;
    page.render_options_section(&mut parts)?;
    sections().to_writer(&mut parts)?;
    // Each part starts with the same preamble (the apostrophe's
    // definition): once, at the top, is enough.
    let parts = String::from_utf8_lossy(&parts);
    let preamble = Roff::new().render();
    write!(out, "{preamble}{}", parts.replace(&preamble, ""))
}

/// The page's date: `SOURCE_DATE_EPOCH`'s, as reproducible builds set it
/// (pkg/deb sets it to the commit's), else today's.
fn page_date() -> String {
    let from_env = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .and_then(date_of);
    from_env.unwrap_or_else(|| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(0));
        date_of(now).unwrap_or_default()
    })
}

/// `secs` after the epoch as a UTC date, YYYY-MM-DD.
fn date_of(secs: i64) -> Option<String> {
    let tm = crate::sys::host::utc(secs)?;
    Some(format!(
        "{:04}-{:02}-{:02}",
        i64::from(tm.tm_year) + 1900,
        tm.tm_mon + 1,
        tm.tm_mday
    ))
}

/// A paragraph of running text.
fn para(roff: &mut Roff, text: &str) {
    roff.control("PP", []).text([roman(text)]);
}

/// An indented entry: `tag` in bold, then its text.
fn entry(roff: &mut Roff, tag: &str, text: &str) {
    roff.control("TP", []).text([bold(tag)]).text([roman(text)]);
}

/// EXIT STATUS: each status and what it means.
const EXIT_STATUS: &[(&str, &str)] = &[
    (
        "0",
        "The report was written. Records lost on the way are said on stderr, with the \
         intervals they cost.",
    ),
    ("1", "Any other failure, said on stderr."),
    (
        "2",
        "A usage error (a bad option or value, or options that conflict), said on stderr \
         with the usage.",
    ),
    (
        "130",
        "A second SIGINT (Ctrl-C) aborted the run at once, said on stderr: the report is \
         missing or cut short. The first SIGINT only ends tracing.",
    ),
];

/// After EXIT STATUS's entries.
const COMMAND_STATUS: &str = "After -- COMMAND, a run that ends with the command exits with \
    the command's status, or 128+N if signal N killed it.";

/// ENVIRONMENT: the variables the tool reads.
const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "OFFWAKE_TIMING",
        "When set, the time of each phase (attach, trace, drain, symbolize, write) is \
         printed on stderr.",
    ),
    (
        "DEBUGINFOD_URLS",
        "Space-separated debuginfod servers, asked in order for the debug files of \
         binaries that lack them, by GNU build-id, after tracing.",
    ),
    (
        "DEBUGINFOD_CACHE_PATH",
        "Where fetched debug files are kept (default: $XDG_CACHE_HOME/debuginfod_client, \
         else ~/.cache/debuginfod_client).",
    ),
    (
        "DEBUGINFOD_TIMEOUT",
        "Seconds to wait for the servers (default 90).",
    ),
    (
        "XDG_CACHE_HOME, HOME",
        "Where the cache directory is (see FILES); only absolute paths are used.",
    ),
    (
        "SOURCE_DATE_EPOCH",
        "The date --generate man gives the page, in seconds since the epoch (default: \
         today).",
    ),
];

/// FILES: what the tool reads and keeps.
const FILES: &[(&str, &str)] = &[
    (
        "$XDG_CACHE_HOME/offwake-perf/ (else ~/.cache/offwake-perf/)",
        "The cache: the kernel's symbol table and what the kernel's perf events can do, \
         both kept for the current boot, and the names found in binaries. Files are mode \
         0600 in a directory of mode 0700, used only when no other user could have \
         written it or any directory above it.",
    ),
    (
        "/run/offwake-perf/",
        "The helper processes of recent runs (a file per pid with its start time, mode \
         0600, root's only): no run reports another's helper, which releases that run's \
         perf events a second after it ends.",
    ),
    (
        "/usr/lib/debug/",
        "Debug files, by GNU build-id or debuglink name, used only when they match the \
         binary.",
    ),
    (
        "/tmp/perf-PID.map",
        "Names of JIT-compiled code (node --perf-basic-prof, and others), read inside the \
         process's root.",
    ),
    (
        "/sys/kernel/tracing",
        "tracefs, for the event formats and the tracefs backend; mounted there when \
         missing and running as root.",
    ),
];

/// SECURITY: what a traced process can and cannot make the tool do.
const SECURITY: &str = "offwake-perf runs as root and reads what traced processes \
    control: their names, stacks, binaries, debug files and perf maps. A traced process \
    cannot make it open a file outside the process's own root, a FIFO, a device or a file \
    on FUSE, use a debug file whose build-id does not match, read a process's memory \
    beyond the one stack mapping of a waiting thread, or spend unbounded memory or time \
    on what it reads; names it chose are escaped in the report, so they cannot forge \
    lines or terminal sequences. It can make its own stacks and names come out wrong or \
    [unknown], and its waits longer by as much as the tool spends reading it.";

/// EXAMPLES, EXIT STATUS, ENVIRONMENT, FILES, SECURITY and SEE ALSO.
fn sections() -> Roff {
    let mut r = Roff::new();
    r.control("SH", ["EXAMPLES"]).control("nf", []);
    for line in EXAMPLES
        .lines()
        .filter(|l| !l.ends_with(':') && !l.is_empty())
    {
        r.text([roman(line.trim_start())]);
    }
    r.control("fi", []);
    for (title, entries) in [
        ("EXIT STATUS", EXIT_STATUS),
        ("ENVIRONMENT", ENVIRONMENT),
        ("FILES", FILES),
    ] {
        r.control("SH", [title]);
        for (tag, text) in entries {
            entry(&mut r, tag, text);
        }
        if title == "EXIT STATUS" {
            para(&mut r, COMMAND_STATUS);
        }
    }
    r.control("SH", ["SECURITY"]);
    para(&mut r, SECURITY);
    r.control("SH", ["SEE ALSO"]);
    r.text([
        bold("perf"),
        roman("(1), "),
        bold("perf-record"),
        roman("(1), "),
        bold("offwaketime"),
        roman("(8), "),
        bold("flamegraph.pl"),
        roman(" ("),
        italic("https://github.com/brendangregg/FlameGraph"),
        roman(")"),
    ]);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generate(what: Generate) -> String {
        let mut out = Vec::new();
        write(what, &mut out).expect("writing to a Vec");
        String::from_utf8(out).expect("UTF-8")
    }

    #[test]
    fn the_man_page_has_every_option_and_the_manual_sections() {
        let page = generate(Generate::Man);
        assert!(page.starts_with(".ie \\n(.g .ds Aq"), "{page}");
        assert_eq!(page.matches(".ds Aq").count(), 2, "one preamble:\n{page}");
        // Title, section, date, source, manual: each in its place.
        let th = page
            .lines()
            .find(|l| l.starts_with(".TH "))
            .expect("a .TH line");
        let date = th.split(' ').nth(3).expect("a date");
        assert!(
            th.starts_with(".TH offwake-perf 1 ")
                && th.ends_with(" \"User Commands\"")
                && date.len() == 10
                && date.bytes().filter(|&b| b == b'-').count() == 2,
            "{th}"
        );
        for section in [
            "NAME",
            "SYNOPSIS",
            "DESCRIPTION",
            "OPTIONS",
            "EXAMPLES",
            "\"EXIT STATUS\"",
            "ENVIRONMENT",
            "FILES",
            "SECURITY",
            "\"SEE ALSO\"",
        ] {
            assert!(page.contains(&format!(".SH {section}\n")), "{section}");
        }
        for arg in Cli::command().get_arguments().filter(|a| !a.is_hide_set()) {
            if let Some(long) = arg.get_long() {
                assert!(
                    page.contains(&format!("\\-\\-{}", long.replace('-', "\\-"))),
                    "--{long}"
                );
            }
        }
        // Each status the tool itself ends with.
        let status =
            &page[page.find(".SH \"EXIT STATUS\"").unwrap()..page.find(".SH ENVIRONMENT").unwrap()];
        for code in ["0", "1", "2", "130"] {
            assert!(
                status.contains(&format!(".TP\n\\fB{code}\\fR\n")),
                "{code}: {status}"
            );
        }
        // Hidden from the options; the examples name it.
        let options = &page[page.find(".SH OPTIONS").unwrap()..page.find(".SH EXAMPLES").unwrap()];
        assert!(!options.contains("\\-\\-generate"), "{options}");
        assert!(page.contains("offwake\\-perf \\-\\-generate man"), "{page}");
    }

    #[test]
    fn dates_are_utc_days() {
        assert_eq!(date_of(0).as_deref(), Some("1970-01-01"));
        assert_eq!(date_of(1_700_000_000).as_deref(), Some("2023-11-14"));
        assert_eq!(date_of(951_825_600).as_deref(), Some("2000-02-29"));
        assert_eq!(date_of(i64::MAX), None);
    }

    #[test]
    fn completions_name_the_options() {
        let bash = generate(Generate::CompleteBash);
        assert!(bash.contains("--call-graph") && bash.contains("offwake-perf"));
        let zsh = generate(Generate::CompleteZsh);
        assert!(zsh.starts_with("#compdef offwake-perf"), "{zsh}");
        let fish = generate(Generate::CompleteFish);
        assert!(fish.contains("-l call-graph"), "{fish}");
    }
}
