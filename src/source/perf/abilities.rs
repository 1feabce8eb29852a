//! What the running kernel does with inherited per-task `sched_switch`
//! events: whether it samples them with their counts
//! ([`sys::samples_inherited_reads`]) and whether a per-task
//! `sched_process_exit` event counts the exits of the threads that inherit
//! it ([`sys::counts_inherited_exits`]). Probing both costs about a
//! millisecond of attach (a thread is started and joined), so the answers
//! are kept for the boot in the cache directory that holds the kallsyms
//! tables, and later runs of the same boot and build read them instead.

use anyhow::Context;

use super::sys::{self, Probes, TracepointAttr};
use crate::sys::cache::CacheDir;

/// The file in the cache directory.
const FILE: &str = "perf-abilities";
/// Larger than any file this writes (a few lines).
const MAX_FILE: u64 = 4096;
/// The first line, naming the format.
const MAGIC: &str = "offwake-perf-abilities-v1";

/// The probes' answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Abilities {
    /// The kernel samples an inherited event with `PERF_SAMPLE_READ`.
    pub(crate) inherited_reads: bool,
    /// A per-task exit event counts the exits of the threads inheriting
    /// it (asked only when `inherited_reads`).
    pub(crate) inherited_exits: bool,
}

/// What the answers hold for: this boot, this build of the tool, and the
/// event as it is opened (its sample type and stack copy decide whether the
/// kernel takes it).
fn key(boot: &str, probe: &TracepointAttr) -> String {
    format!(
        "{MAGIC}\n{} {}\nboot {boot}\nevent {:#x} {} {}\n",
        env!("CARGO_PKG_NAME"),
        env!("CARGO_PKG_VERSION"),
        probe.sample_type,
        probe.stack_user,
        probe.inherit_thread,
    )
}

fn render(key: &str, a: Abilities) -> String {
    format!(
        "{key}answers {} {}\n",
        u8::from(a.inherited_reads),
        u8::from(a.inherited_exits)
    )
}

/// The answers in `text` if it was written for `key`.
fn parse(text: &str, key: &str) -> Option<Abilities> {
    let answers = text.strip_prefix(key)?.strip_prefix("answers ")?;
    let answers = answers.strip_suffix('\n')?;
    let bit = |s: &str| match s {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    };
    let (reads, exits) = answers.split_once(' ')?;
    Some(Abilities {
        inherited_reads: bit(reads)?,
        inherited_exits: bit(exits)?,
    })
}

/// The answers for `probe` (a `sched_switch` event as it would be opened,
/// inherited) and the exit tracepoint (`exit_id` gives its id): remembered
/// from an earlier run of this boot, else probed on `cpu` (the probes'
/// events are left in `keep`) and remembered.
pub(crate) fn of(
    probe: &TracepointAttr,
    exit_id: impl FnOnce() -> anyhow::Result<u64> + Send,
    cpu: u32,
    keep: &mut Probes,
) -> anyhow::Result<Abilities> {
    let dir = CacheDir::open();
    let boot: Option<String> = crate::sys::host::kernel_sysctl("random/boot_id");
    let key = boot.map(|boot| key(&boot, probe));
    let remembered = dir.as_ref().zip(key.as_deref()).and_then(|(dir, key)| {
        let bytes = dir.read_small(FILE, MAX_FILE)?;
        parse(std::str::from_utf8(&bytes).ok()?, key)
    });
    if let Some(a) = remembered {
        return Ok(a);
    }
    // On a thread of their own: the probes' events are inherited by the
    // threads their task creates, and this one creates none after them.
    let (a, mine) = std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("offwake-probe".into())
            .spawn_scoped(s, || {
                let mut mine = Probes::default();
                let inherited_reads = sys::samples_inherited_reads(probe, cpu, &mut mine);
                let inherited_exits = inherited_reads
                    && match exit_id() {
                        Ok(id) => sys::counts_inherited_exits(id, &mut mine),
                        Err(e) => return (Err(e), mine),
                    };
                let a = Abilities {
                    inherited_reads,
                    inherited_exits,
                };
                (Ok(a), mine)
            })
            .context("starting a thread")?
            .join()
            .map_err(|_| anyhow::anyhow!("the thread probing perf panicked"))
    })?;
    keep.append(mine);
    let a = a?;
    // Best effort: without it, the next run probes again.
    if let (Some(dir), Some(key)) = (dir, key) {
        let _ = dir.write_small(FILE, render(&key, a).as_bytes());
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(sample_type: u64) -> TracepointAttr {
        TracepointAttr {
            id: 300,
            sample_type,
            exclude_callchain_user: false,
            exclude_callchain_kernel: false,
            side_band: sys::SideBand::All,
            context_switch: false,
            wakeup_watermark: 1,
            inherit: true,
            inherit_thread: false,
            stack_user: 8192,
            cpu_clock_ns: 0,
        }
    }

    #[test]
    fn answers_come_back_for_their_boot_and_event_only() {
        let k = key("boot-1", &probe(0x1ef));
        for a in [
            Abilities {
                inherited_reads: true,
                inherited_exits: false,
            },
            Abilities {
                inherited_reads: false,
                inherited_exits: false,
            },
            Abilities {
                inherited_reads: true,
                inherited_exits: true,
            },
        ] {
            assert_eq!(parse(&render(&k, a), &k), Some(a));
        }
        let a = Abilities {
            inherited_reads: true,
            inherited_exits: true,
        };
        let text = render(&k, a);
        assert_eq!(parse(&text, &key("boot-2", &probe(0x1ef))), None);
        assert_eq!(parse(&text, &key("boot-1", &probe(0x1ff))), None);
        let mut fp = probe(0x1ef);
        fp.stack_user = 0;
        assert_eq!(parse(&text, &key("boot-1", &fp)), None);
    }

    #[test]
    fn damaged_answers_are_not_used() {
        let k = key("boot-1", &probe(0x1ef));
        for text in [
            String::new(),
            k.clone(),
            format!("{k}answers 1 1"),
            format!("{k}answers 1 2\n"),
            format!("{k}answers 1\n"),
            format!("{k}answers 1 1 1\n"),
            format!("{k}answers  1 1\n"),
        ] {
            assert_eq!(parse(&text, &k), None, "{text:?}");
        }
    }
}
