//! How many bytes of user stack copies are waiting to be unwound, so that a
//! reader that runs ahead of the unwinder keeps its memory bounded: past
//! the budget it cuts stacks (keeps their first user frame, drops the
//! copy) instead of letting the copies pile up.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The bytes of copies read but not yet unwound, shared by the reader that
/// takes them and whoever drops them.
#[derive(Clone, Debug)]
pub(crate) struct CopyBudget {
    used: Arc<AtomicU64>,
    limit: u64,
    /// Set while the unwinder is far behind in events, not only bytes
    /// ([`CopyBudget::squeeze`]): no copy is charged meanwhile.
    squeezed: Arc<AtomicBool>,
}

impl CopyBudget {
    /// A budget of `limit` bytes.
    pub(crate) fn new(limit: u64) -> CopyBudget {
        CopyBudget {
            used: Arc::new(AtomicU64::new(0)),
            limit,
            squeezed: Arc::new(AtomicBool::new(false)),
        }
    }

    /// While `squeezed`, every copy is cut: the unwinder has so many
    /// events to go through that the copies' unwinding would hold up the
    /// reader, whatever their bytes.
    pub(crate) fn squeeze(&self, squeezed: bool) {
        self.squeezed.store(squeezed, Ordering::Relaxed);
    }

    /// A charge for a copy of `bytes`, or `None` when that would pass the
    /// limit.
    pub(crate) fn take(&self, bytes: usize) -> Option<Charge> {
        if self.squeezed.load(Ordering::Relaxed) {
            return None;
        }
        let bytes = bytes as u64;
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            let after = used.checked_add(bytes).filter(|&a| a <= self.limit)?;
            match self
                .used
                .compare_exchange_weak(used, after, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => {
                    return Some(Charge {
                        used: Some(Arc::clone(&self.used)),
                        bytes,
                    });
                }
                Err(now) => used = now,
            }
        }
    }

    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }

    /// The bytes charged now.
    #[cfg(test)]
    pub(crate) fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }
}

/// What one copy holds of a [`CopyBudget`]: given back when dropped.
#[derive(Debug, Default)]
pub(crate) struct Charge {
    used: Option<Arc<AtomicU64>>,
    bytes: u64,
}

impl Drop for Charge {
    fn drop(&mut self) {
        if let Some(used) = &self.used {
            used.fetch_sub(self.bytes, Ordering::Relaxed);
        }
    }
}

impl Clone for Charge {
    /// A clone of a copy is charged too.
    fn clone(&self) -> Charge {
        if let Some(used) = &self.used {
            used.fetch_add(self.bytes, Ordering::Relaxed);
        }
        Charge {
            used: self.used.clone(),
            bytes: self.bytes,
        }
    }
}

/// Charges say nothing of what a copy holds.
impl PartialEq for Charge {
    fn eq(&self, _: &Charge) -> bool {
        true
    }
}

impl Eq for Charge {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_are_given_back_when_dropped_or_cloned_and_dropped() {
        let budget = CopyBudget::new(100);
        let a = budget.take(60).expect("within the limit");
        assert!(budget.take(41).is_none(), "past the limit");
        let b = budget.take(40).expect("exactly the limit");
        assert_eq!(budget.used(), 100);
        drop(a);
        assert_eq!(budget.used(), 40);
        let c = b.clone();
        assert_eq!(budget.used(), 80);
        drop(b);
        drop(c);
        assert_eq!(budget.used(), 0);
        assert!(budget.take(u64::MAX as usize).is_none());
        assert_eq!(Charge::default(), Charge::default());
    }

    #[test]
    fn a_squeezed_budget_charges_nothing_until_released() {
        let budget = CopyBudget::new(100);
        let shared = budget.clone();
        shared.squeeze(true);
        assert!(budget.take(1).is_none());
        shared.squeeze(false);
        assert!(budget.take(1).is_some());
    }
}
