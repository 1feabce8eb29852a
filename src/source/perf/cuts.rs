//! Stacks cut while reading: when the unwinder is behind by more than the
//! budget of user stack copies ([`crate::event::copies`]), a sample keeps
//! its first user frame and loses its copy, rather than the reader
//! falling behind the kernel and records being lost. What was cut, per
//! thread, for the run's note.

use rustc_hash::FxHashMap;

/// Most threads named one by one; cuts of others are counted together.
const MAX_THREADS: usize = 4096;

/// Threads a note names.
const NOTE_THREADS: usize = 5;

/// One thread's cut stacks.
#[derive(Clone, Copy, Debug)]
struct Cut {
    stacks: u64,
    first: u64,
    last: u64,
}

/// The stacks cut in a run.
#[derive(Clone, Debug, Default)]
pub(crate) struct StackCuts {
    threads: FxHashMap<u32, Cut>,
    /// Cuts of threads past [`MAX_THREADS`].
    others: u64,
    total: u64,
}

impl StackCuts {
    /// `tid`'s sample at `time` was cut.
    pub(crate) fn cut(&mut self, tid: u32, time: u64) {
        self.total += 1;
        let full = self.threads.len() >= MAX_THREADS;
        match self.threads.get_mut(&tid) {
            Some(c) => {
                c.stacks += 1;
                c.first = c.first.min(time);
                c.last = c.last.max(time);
            }
            None if full => self.others += 1,
            None => {
                self.threads.insert(
                    tid,
                    Cut {
                        stacks: 1,
                        first: time,
                        last: time,
                    },
                );
            }
        }
    }

    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// The NOTE that says how many stacks were cut, of which threads, and
    /// over how long; `budget` is the bytes of copies the reader keeps.
    pub(crate) fn note(&self, budget: u64) -> Option<String> {
        if self.total == 0 {
            return None;
        }
        let threads = self.threads.len() as u64 + u64::from(self.others > 0);
        let mut by_count: Vec<(&u32, &Cut)> = self.threads.iter().collect();
        by_count.sort_by(|a, b| b.1.stacks.cmp(&a.1.stacks).then(a.0.cmp(b.0)));
        let named: Vec<String> = by_count
            .iter()
            .take(NOTE_THREADS)
            .map(|(tid, c)| {
                let span = c.last.saturating_sub(c.first) as f64 / 1e9;
                format!("thread {tid} ({} over {span:.3} s)", c.stacks)
            })
            .collect();
        let rest = self.threads.len().saturating_sub(named.len());
        let more = match (rest, self.others) {
            (0, 0) => String::new(),
            (0, _) => ", and threads not counted one by one".to_string(),
            (n, _) => format!(", and {n} more"),
        };
        Some(format!(
            "NOTE: {} of {} were cut to their first frame: the unwinder was more than {} \
             MiB of stack copies or 32,000 events behind the reader, which cut them rather \
             than lose records: {}{more}.",
            crate::diag::counted(self.total, "user stack", "user stacks"),
            crate::diag::counted(threads, "thread", "threads"),
            budget >> 20,
            named.join(", "),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_note_names_the_threads_cut_most_and_their_span() {
        let mut cuts = StackCuts::default();
        assert_eq!(cuts.note(32 << 20), None);
        for i in 0..3 {
            cuts.cut(7, 1_000_000_000 + i * 500_000_000);
        }
        cuts.cut(9, 5);
        assert_eq!(cuts.total(), 4);
        assert_eq!(
            cuts.note(32 << 20).unwrap(),
            "NOTE: 4 user stacks of 2 threads were cut to their first frame: the unwinder \
             was more than 32 MiB of stack copies or 32,000 events behind the reader, which \
             cut them rather than lose records: thread 7 (3 over 1.000 s), thread 9 (1 over \
             0.000 s)."
        );
    }

    #[test]
    fn threads_past_the_limit_are_counted_together() {
        let mut cuts = StackCuts::default();
        for tid in 0..(MAX_THREADS as u32 + 10) {
            cuts.cut(tid, 1);
        }
        assert_eq!(cuts.threads.len(), MAX_THREADS);
        let note = cuts.note(1 << 20).unwrap();
        assert!(
            note.starts_with("NOTE: 4106 user stacks of 4097 threads"),
            "{note}"
        );
        assert!(note.ends_with(", and 4091 more."), "{note}");
    }
}
