//! The task states `sched_switch` reports in `prev_state`, their names,
//! and the `--state` filter over them.

use anyhow::{Result, bail};

/// `--state N`, mapped onto the bits the tracepoint reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StateFilter {
    /// 0 selects preempted/running intervals; otherwise a mask of reported
    /// bits, any of which selects.
    pub(crate) reported_mask: u64,
}

/// The report bits `sched_switch` can show in `prev_state` (S D T t X Z P I).
pub(crate) const REPORTED_BITS: u64 = 0xff;

/// Each report bit's state, by the bit's position (S is bit 0, I bit 7),
/// named with the letter `ps` shows for it.
const STATE_NAMES: [&str; 8] = [
    "interruptible sleep (S)",
    "uninterruptible sleep (D)",
    "stopped (T)",
    "traced (t)",
    "dead (X)",
    "zombie (Z)",
    "parked (P)",
    "idle (I)",
];

/// The position of the report bit a switch-out's `prev_state` shows (S 0
/// … I 7), or `None` when it shows none: the task was preempted.
pub(crate) fn reported_state(prev_state: u64) -> Option<u8> {
    let bits = prev_state & REPORTED_BITS;
    // At most 7: the lowest of eight bits.
    (bits != 0).then(|| bits.trailing_zeros() as u8)
}

/// The state at report bit position `index` (from [`reported_state`]), in
/// words with its `ps` letter, e.g. "interruptible sleep (S)".
pub(crate) fn state_name(index: u8) -> &'static str {
    STATE_NAMES
        .get(usize::from(index))
        .copied()
        .unwrap_or("an unknown state")
}

/// `TASK_NOLOAD`: only ever set together with D as `TASK_IDLE`, reported as I.
const TASK_NOLOAD: u64 = 1024;
/// `TASK_REPORT_IDLE`, the I bit.
const REPORT_IDLE: u64 = 128;
/// `TASK_RTLOCK_WAIT`: reported as D.
const TASK_RTLOCK_WAIT: u64 = 4096;
/// `TASK_UNINTERRUPTIBLE`, the D bit.
const REPORT_UNINTERRUPTIBLE: u64 = 2;

/// Why a task-struct bit can never be seen at switch-out, and what to ask for.
fn refusal(bit: u64) -> String {
    match bit {
        256 => "TASK_WAKEKILL (256) is never reported by sched_switch: killable sleeps \
                are reported as D; use --state 2"
            .to_string(),
        512 => "TASK_WAKING (512) is never reported by sched_switch: it is a transient \
                state of a task that is already off the CPU and being woken; to see \
                what a task slept in use --state 1 (S) or 2 (D)"
            .to_string(),
        2048 => "TASK_NEW (2048) is never reported by sched_switch: a task being \
                 created has not run yet, so it cannot switch out"
            .to_string(),
        8192 => "TASK_FREEZABLE (8192) is never reported by sched_switch: it is a \
                 modifier of a sleep, which is reported as S or D; use --state 1, 2 or 3"
            .to_string(),
        16384 => "16384 (__TASK_FREEZABLE_UNSAFE) is never reported by sched_switch: it \
                  is a debugging modifier of a sleep, which is reported as S or D; use \
                  --state 1, 2 or 3"
            .to_string(),
        32768 => "TASK_FROZEN (32768) is never reported by sched_switch: a task is \
                  frozen while it already sleeps, and its switch-out was reported as S \
                  or D; use --state 1, 2 or 3"
            .to_string(),
        other => format!(
            "bit {other} is not a task state sched_switch can report; the reported \
             states are S=1 D=2 T=4 t=8 X=16 Z=32 P=64 I=128, or 0 for preempted"
        ),
    }
}

impl StateFilter {
    /// Maps the user's `--state N` to reported bits, or explains why N can
    /// never match.
    ///
    /// 0 selects preempted (or still running) intervals. Bits 1..=128 are
    /// kept as they are; 1024 (`TASK_NOLOAD`, part of `TASK_IDLE`) maps to I
    /// (128) and 4096 (`TASK_RTLOCK_WAIT`) maps to D (2), as the kernel
    /// reports them. Any other bit is refused, even when mixed with valid
    /// ones, so that part of a request is never silently dropped.
    pub(crate) fn from_user(n: u64) -> Result<StateFilter> {
        if n == 0 {
            return Ok(StateFilter { reported_mask: 0 });
        }
        let mut mask = n & REPORTED_BITS;
        let mut rest = n & !REPORTED_BITS;
        for (bit, reported) in [
            (TASK_NOLOAD, REPORT_IDLE),
            (TASK_RTLOCK_WAIT, REPORT_UNINTERRUPTIBLE),
        ] {
            if rest & bit != 0 {
                mask |= reported;
                rest &= !bit;
            }
        }
        if rest != 0 {
            let lowest = rest & rest.wrapping_neg();
            bail!("--state {n} can never match: {}", refusal(lowest));
        }
        Ok(StateFilter {
            reported_mask: mask,
        })
    }

    /// The same selection as a tracepoint filter on `sched_switch`, for the
    /// kernel to apply before it takes a callchain.
    pub(crate) fn tracepoint_filter(&self) -> String {
        if self.reported_mask == 0 {
            format!("!(prev_state & {REPORTED_BITS})")
        } else {
            format!("prev_state & {}", self.reported_mask)
        }
    }

    /// Whether an interval whose switch-out reported `prev_state` is selected.
    pub(crate) fn matches(&self, prev_state: u64) -> bool {
        if self.reported_mask == 0 {
            prev_state & REPORTED_BITS == 0
        } else {
            prev_state & self.reported_mask != 0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREEMPTED: u64 = 256; // TASK_REPORT_MAX on current kernels

    fn mask(n: u64) -> u64 {
        StateFilter::from_user(n).unwrap().reported_mask
    }

    fn refused(n: u64) -> String {
        format!("{:#}", StateFilter::from_user(n).unwrap_err())
    }

    #[test]
    fn reported_states_are_named_as_ps_names_them() {
        assert_eq!(reported_state(0), None);
        assert_eq!(reported_state(PREEMPTED), None);
        let name = |state| reported_state(state).map(state_name);
        assert_eq!(name(1), Some("interruptible sleep (S)"));
        assert_eq!(name(2), Some("uninterruptible sleep (D)"));
        assert_eq!(name(4), Some("stopped (T)"));
        assert_eq!(name(8), Some("traced (t)"));
        assert_eq!(name(64), Some("parked (P)"));
        assert_eq!(name(128), Some("idle (I)"));
        // A kernel that reports the raw state word (before 4.14): a
        // killable sleep, D with TASK_WAKEKILL, is D.
        assert_eq!(name(2 | 256), Some("uninterruptible sleep (D)"));
    }

    #[test]
    fn zero_selects_preempted_and_running() {
        let f = StateFilter::from_user(0).unwrap();
        assert!(f.matches(PREEMPTED));
        assert!(f.matches(0));
        assert!(!f.matches(1));
        assert!(!f.matches(2));
        assert!(!f.matches(128));
    }

    #[test]
    fn tracepoint_filters_say_the_same() {
        assert_eq!(
            StateFilter::from_user(0).unwrap().tracepoint_filter(),
            "!(prev_state & 255)"
        );
        assert_eq!(
            StateFilter::from_user(2 | 1024)
                .unwrap()
                .tracepoint_filter(),
            "prev_state & 130"
        );
    }

    #[test]
    fn single_bits() {
        let s = StateFilter::from_user(1).unwrap();
        assert!(s.matches(1));
        assert!(!s.matches(2));
        assert!(!s.matches(0));
        assert!(!s.matches(PREEMPTED));
        let d = StateFilter::from_user(2).unwrap();
        assert!(d.matches(2));
        assert!(!d.matches(1));
        for bit in [4, 8, 16, 32, 64, 128] {
            assert_eq!(mask(bit), bit);
            assert!(StateFilter::from_user(bit).unwrap().matches(bit));
        }
    }

    #[test]
    fn mix_shares_a_bit() {
        let f = StateFilter::from_user(1 | 2).unwrap();
        assert!(f.matches(1));
        assert!(f.matches(2));
        assert!(!f.matches(4));
        assert!(!f.matches(PREEMPTED));
        assert!(!f.matches(0));
    }

    #[test]
    fn noload_maps_to_idle() {
        assert_eq!(mask(1024), 128);
        assert!(StateFilter::from_user(1024).unwrap().matches(128));
        // TASK_IDLE = TASK_UNINTERRUPTIBLE | TASK_NOLOAD
        assert_eq!(mask(2 | 1024), 2 | 128);
    }

    #[test]
    fn rtlock_wait_maps_to_d() {
        assert_eq!(mask(4096), 2);
        assert!(StateFilter::from_user(4096).unwrap().matches(2));
        assert_eq!(mask(1 | 4096), 1 | 2);
    }

    #[test]
    fn refused_bits_explain() {
        let m = refused(256);
        assert!(m.contains("TASK_WAKEKILL (256)"), "{m}");
        assert!(m.contains("use --state 2"), "{m}");
        assert!(refused(512).contains("TASK_WAKING (512)"));
        assert!(refused(2048).contains("TASK_NEW (2048)"));
        assert!(refused(8192).contains("TASK_FREEZABLE (8192)"));
        assert!(refused(16384).contains("16384"));
        assert!(refused(32768).contains("TASK_FROZEN (32768)"));
        assert!(refused(65536).contains("bit 65536"));
        assert!(refused(1 << 40).contains("can never match"));
    }

    #[test]
    fn mixed_valid_and_refused_is_refused() {
        let m = refused(1 | 256);
        assert!(m.contains("--state 257"), "{m}");
        assert!(m.contains("TASK_WAKEKILL"), "{m}");
        assert!(StateFilter::from_user(2 | 1024 | 32768).is_err());
    }
}
