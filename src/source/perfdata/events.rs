//! The recording's events: which two are the sched tracepoints, whether
//! they were sampled as pairing needs, which sample CPU time (`--wall`),
//! and a decoder for each record layout.

use std::path::Path;

use anyhow::{Result, bail, ensure};
use linux_perf_data::AttributeDescription;
use linux_perf_data::linux_perf_event_reader::{
    AttrFlags, PerfEventType, SamplingPolicy, SoftwareCounterType,
};

use super::RECORD_COMMAND;
use crate::diag::escape::{Place, escape};
use crate::kallsyms::machinery::ProbeRanges;
use crate::source::perf::record::{Decoder, Tracepoint};
use crate::source::perf::sys::{SAMPLE_CALLCHAIN, SAMPLE_RAW, SAMPLE_REGS_USER};
use crate::source::tracepoint::EventFormat;

/// Most ids of either tracepoint (perf opens one per CPU, or per thread).
const MAX_IDS: usize = 1 << 17;

/// Most record layouts of a file's events (perf's share one or two).
const MAX_LAYOUTS: usize = 16;

/// The indexes of the attributes of `sched_switch` and `sched_waking`;
/// an error naming the file's events when it lacks either.
pub(super) fn sched_attrs(
    attrs: &[AttributeDescription],
    switch: &EventFormat,
    waking: &EventFormat,
    path: &Path,
) -> Result<[usize; 2]> {
    let shown = path.display();
    // By name (which must agree with the tracepoint id the attribute
    // opened); in a file whose names were lost, by tracepoint id.
    let is_tracepoint = |a: &AttributeDescription, format: &EventFormat| {
        matches!(a.attributes().type_,
            PerfEventType::Tracepoint(id) if id == u64::from(format.id))
    };
    let find = |name: &str, format: &EventFormat| -> Result<Option<usize>> {
        if let Some(at) = attrs.iter().position(|a| a.name() == Some(name)) {
            ensure!(
                is_tracepoint(&attrs[at], format),
                "{shown}: the event named {name} is not that tracepoint (id {}) in the file's \
                 own formats",
                format.id
            );
            return Ok(Some(at));
        }
        Ok(attrs
            .iter()
            .position(|a| a.name().is_none() && is_tracepoint(a, format)))
    };
    let (Some(switch_at), Some(waking_at)) = (
        find("sched:sched_switch", switch)?,
        find("sched:sched_waking", waking)?,
    ) else {
        let names: Vec<String> = attrs
            .iter()
            .filter_map(|a| a.name())
            .map(|n| escape(n.as_bytes(), Place::Quoted).into_owned())
            .collect();
        bail!(
            "{shown} does not record both sched:sched_switch and sched:sched_waking (it has: \
             {}); record them with:\n    {RECORD_COMMAND}",
            if names.is_empty() {
                "no named events".to_string()
            } else {
                names.join(", ")
            }
        );
    };
    Ok([switch_at, waking_at])
}

/// The indexes of the events that sample CPU time with callchains
/// (`cpu-clock`, `task-clock`), with the nanoseconds each sample stands
/// for when the samples do not say (a fixed period; in frequency mode,
/// the period at that rate).
pub(super) fn clock_attrs(attrs: &[AttributeDescription]) -> Vec<(usize, u64)> {
    attrs
        .iter()
        .enumerate()
        .filter_map(|(at, a)| {
            let attr = a.attributes();
            let clock = matches!(
                attr.type_,
                PerfEventType::Software(
                    SoftwareCounterType::CpuClock | SoftwareCounterType::TaskClock
                )
            );
            let period = match attr.sampling_policy {
                SamplingPolicy::Period(p) => p.get(),
                SamplingPolicy::Frequency(f) => 1_000_000_000 / f.max(1),
                SamplingPolicy::NoSampling => return None,
            };
            (clock && attr.sample_format.bits() & SAMPLE_CALLCHAIN != 0).then_some((at, period))
        })
        .collect()
}

/// Checks that both tracepoints were sampled as pairing needs: with
/// callchains, on every event, and with `sample_id_all`.
pub(super) fn check_sampling(
    attrs: &[AttributeDescription],
    [switch_at, waking_at]: [usize; 2],
    path: &Path,
) -> Result<()> {
    let shown = path.display();
    for (at, name) in [
        (switch_at, "sched:sched_switch"),
        (waking_at, "sched:sched_waking"),
    ] {
        let attr = attrs[at].attributes();
        let sample_type = attr.sample_format.bits();
        if sample_type & SAMPLE_CALLCHAIN == 0 {
            bail!(
                "{shown} has no callchains for {name} (recorded without -g); record it \
                 with:\n    {RECORD_COMMAND}"
            );
        }
        if !matches!(attr.sampling_policy, SamplingPolicy::Period(p) if p.get() == 1) {
            bail!(
                "{shown} samples {name} not on every event (perf record -c or -F): \
                 blocked intervals need every switch and wakeup; record with:\n    \
                 {RECORD_COMMAND}"
            );
        }
        if !attr.flags.contains(AttrFlags::SAMPLE_ID_ALL) {
            bail!(
                "{shown}: {name} was recorded without sample_id_all, which every perf since \
                 Linux 2.6.38 sets; record it again with:\n    {RECORD_COMMAND}"
            );
        }
    }
    Ok(())
}

/// The decoders of the file's record layouts (sample type and user
/// registers), one each, shared by the events that have it (perf's
/// events share one), and the decoder of each attribute, by its index.
/// Each knows the ids of both tracepoints, and trims kernel stacks with
/// `probes` when given.
/// The events that sample CPU time (`clocks`, see [`clock_attrs`]) are
/// known to each too.
pub(super) fn decoders(
    attrs: &[AttributeDescription],
    (sched_attrs, clocks): ([usize; 2], &[(usize, u64)]),
    (switch, waking): (&EventFormat, &EventFormat),
    probes: Option<&ProbeRanges>,
    path: &Path,
) -> Result<(Vec<Decoder>, Vec<usize>)> {
    let shown = path.display();
    // Each decoder knows the ids of both tracepoints: one per CPU (or
    // per thread) each, a few thousand at most.
    for at in sched_attrs {
        ensure!(
            attrs[at].ids().len() <= MAX_IDS,
            "{shown}: an event has more than {MAX_IDS} ids"
        );
    }
    let mut decoders: Vec<Decoder> = Vec::new();
    let mut layouts: Vec<(u64, u64)> = Vec::new();
    let mut decoder_of = Vec::with_capacity(attrs.len());
    for (at, a) in attrs.iter().enumerate() {
        // Every record goes through the decoder of its event. Only the
        // tracepoints' samples carry a payload; the others' side-band
        // records are read by their trailers, which RAW does not change.
        // The samples of CPU time are read as they are.
        let clock = clocks.iter().any(|&(c, _)| c == at);
        let sample_type = a.attributes().sample_format.bits() | if clock { 0 } else { SAMPLE_RAW };
        let regs = a.attributes().sample_regs_user;
        if let Some(i) = layouts.iter().position(|&l| l == (sample_type, regs)) {
            decoder_of.push(i);
            continue;
        }
        ensure!(
            layouts.len() < MAX_LAYOUTS,
            "{shown}: its events have more than {MAX_LAYOUTS} record layouts"
        );
        let mut d = layout_decoder(a, sample_type, (switch, waking), path)?;
        for (at, tp) in [
            (sched_attrs[0], Tracepoint::Switch),
            (sched_attrs[1], Tracepoint::Waking),
        ] {
            for &id in attrs[at].ids() {
                d.add_id(id, tp);
            }
        }
        // At most MAX_IDS of them in all, however many such events.
        let ids = clocks
            .iter()
            .flat_map(|&(at, period)| attrs[at].ids().iter().map(move |&id| (id, period)));
        for (id, period) in ids.take(MAX_IDS) {
            d.add_clock(id, 0, period);
        }
        if let Some(p) = probes {
            d.set_probes(p.clone());
        }
        decoder_of.push(decoders.len());
        decoders.push(d);
        layouts.push((sample_type, regs));
    }
    Ok((decoders, decoder_of))
}

/// The decoder of the record layout of event `a`, whose samples carry
/// `sample_type`; an error, naming the event, when its samples cannot be
/// read.
fn layout_decoder(
    a: &AttributeDescription,
    sample_type: u64,
    (switch, waking): (&EventFormat, &EventFormat),
    path: &Path,
) -> Result<Decoder> {
    let shown = path.display();
    let regs = a.attributes().sample_regs_user;
    let event = escape(a.name().unwrap_or("an event").as_bytes(), Place::Quoted);
    let unreadable = |why: &str| {
        anyhow::anyhow!(
            "{shown}: the samples of {event} cannot be read ({why}); record them \
             with:\n    {RECORD_COMMAND}"
        )
    };
    // The formats were checked (see `super::formats`): what fails here is
    // the samples' layout, said without its values.
    let mut d = Decoder::new(sample_type, switch, waking).map_err(|_| {
        unreadable("they lack a field this tool needs, or carry one it cannot walk")
    })?;
    if sample_type & SAMPLE_REGS_USER != 0 {
        d.set_user_regs(regs).map_err(|_| {
            unreadable("their user registers lack BP, SP or IP, which unwinding needs")
        })?;
    }
    Ok(d)
}
