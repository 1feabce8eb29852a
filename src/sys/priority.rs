//! The priorities of the threads that keep up with the kernel while
//! tracing, once the reader falls behind: real-time, for the reader and
//! for the stages' thread behind it.
//!
//! A burst of context switches (thousands of threads waking on one timer)
//! fills the kernel's rings in milliseconds, and the thread that empties
//! them is then one of as many runnable threads. Under `SCHED_FIFO` it runs
//! as soon as the kernel wakes it, so the rings are read while the burst
//! goes on instead of after it. Its work is the same either way: what
//! changes is when it is done. But a real-time thread wakes on the CPU it
//! last ran on, even a busy one with another idle, so the reader stays a
//! normal thread until a ring is found more than half full
//! ([`OnDemand`], which any thread can raise), and then keeps off the
//! CPUs of pinned targets ([`crate::sys::affinity`]). `SCHED_RESET_ON_FORK`
//! keeps any thread or process it starts from inheriting the policy.

use std::io;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Held by a brief raise ([`raise_briefly`]) for its whole length, and by
/// [`OnDemand::behind`] around its raise: a raise for good, which another
/// thread may make, never lands inside a brief one, whose end would undo
/// it (and whose saved policy it would keep).
static BRIEFLY: Mutex<()> = Mutex::new(());

/// The calling thread at real-time priority for as long as this lives
/// (when it may be raised), then as it was.
pub(crate) struct Brief {
    // Dropped first: the policy comes back while the lock is held.
    _raised: Option<Raised>,
    _held: MutexGuard<'static, ()>,
}

/// Raises the calling thread (see [`raise`]) until the [`Brief`] is
/// dropped: for a short stretch it must not be preempted in. A thread
/// already real-time (the raised reader) is left as it is.
pub(crate) fn raise_briefly() -> Brief {
    let held = BRIEFLY.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: sched_getscheduler takes no pointer.
    let policy = unsafe { libc::sched_getscheduler(0) } & !libc::SCHED_RESET_ON_FORK;
    let real_time = policy == libc::SCHED_FIFO || policy == libc::SCHED_RR;
    Brief {
        _raised: if real_time { None } else { raise(0).ok() },
        _held: held,
    }
}

/// A thread at real-time priority; its old policy comes back on drop.
pub(crate) struct Raised {
    tid: libc::pid_t,
    policy: libc::c_int,
    param: libc::sched_param,
}

/// Why the priority could not be raised, said when records were lost.
#[derive(Debug)]
pub(crate) struct NotRaised(pub(crate) io::Error);

/// Gives thread `tid` of this process (0: the calling one) `SCHED_FIFO` at
/// the lowest real-time priority (above every normal thread, below any
/// other real-time one): needs `CAP_SYS_NICE` or a real-time
/// `RLIMIT_RTPRIO`. The reader goes one higher ([`READER`]).
pub(crate) fn raise(tid: libc::pid_t) -> Result<Raised, NotRaised> {
    raise_to(tid, 1)
}

/// The reader's real-time priority: one above the threads that work
/// behind it, so that it preempts them where they share a CPU (see
/// [`crate::sys::affinity`]).
const READER: libc::c_int = 2;

/// [`raise`] to `SCHED_FIFO` `priority`.
fn raise_to(tid: libc::pid_t, priority: libc::c_int) -> Result<Raised, NotRaised> {
    // SAFETY: sched_getscheduler takes no pointer.
    let policy = unsafe { libc::sched_getscheduler(tid) };
    if policy < 0 {
        return Err(NotRaised(io::Error::last_os_error()));
    }
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_getparam writes one sched_param, which outlives the call.
    if unsafe { libc::sched_getparam(tid, &mut param) } < 0 {
        return Err(NotRaised(io::Error::last_os_error()));
    }
    let fifo = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: sched_setscheduler reads one sched_param, which outlives the
    // call.
    let set = unsafe {
        libc::sched_setscheduler(tid, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &fifo)
    };
    if set < 0 {
        return Err(NotRaised(io::Error::last_os_error()));
    }
    Ok(Raised { tid, policy, param })
}

/// Gives a thread just spawned `SCHED_FIFO` at `priority`, where that is
/// allowed, before it first runs: among thousands of runnable threads a
/// normal one can wait a quarter of a second for a CPU, while tracing
/// waits for it to end.
pub(crate) fn raise_spawned<T>(thread: &std::thread::JoinHandle<T>, priority: libc::c_int) {
    use std::os::unix::thread::JoinHandleExt;
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: the handle's thread has not been joined or detached, so its
    // pthread_t is valid; the sched_param outlives the call. Failing (no
    // CAP_SYS_NICE) leaves the thread as it was.
    unsafe { libc::pthread_setschedparam(thread.as_pthread_t(), libc::SCHED_FIFO, &param) };
}

/// A thread that works behind the reader (the stages'), real-time while the
/// reader is, or while it is far behind the reader itself. At a normal
/// priority among thousands of busy threads it was preempted for tens of
/// milliseconds at a time, and so was the reader then, waiting for a lock
/// it held: glibc's malloc arena lock, which freeing the reader's stack
/// copies takes. Without `CAP_SYS_NICE`, it is left as it is.
pub(crate) struct Helper {
    tid: libc::pid_t,
    state: Mutex<HelperState>,
}

#[derive(Default)]
struct HelperState {
    /// The reader is raised.
    for_reader: bool,
    /// The helper is far behind.
    behind: bool,
    /// Its old policy, while raised.
    raised: Option<Raised>,
}

impl Helper {
    /// Thread `tid` of this process, not raised yet.
    pub(crate) fn new(tid: libc::pid_t) -> Helper {
        Helper {
            tid,
            state: Mutex::new(HelperState::default()),
        }
    }

    /// The thread's id.
    pub(crate) fn tid(&self) -> libc::pid_t {
        self.tid
    }

    /// Raised from now on, with the reader.
    pub(crate) fn with_reader(&self) {
        self.set(|s| s.for_reader = true);
    }

    /// Raised while `behind`, or while the reader is.
    pub(crate) fn behind(&self, behind: bool) {
        self.set(|s| s.behind = behind);
    }

    /// Back to its old policy for good: called while the thread still
    /// lives, so that its id is not another's yet.
    pub(crate) fn lower(&self) {
        self.set(|s| {
            s.for_reader = false;
            s.behind = false;
        });
    }

    fn set(&self, change: impl FnOnce(&mut HelperState)) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        change(&mut state);
        let wanted = state.for_reader || state.behind;
        if wanted && state.raised.is_none() {
            state.raised = raise(self.tid).ok();
        } else if !wanted {
            state.raised = None;
        }
    }
}

/// The reader's priority: raised the first time it falls behind, by the
/// reader or by a thread that watches the rings, and kept so until it is
/// dropped, after the rings are drained. The threads that work behind the
/// reader are raised then too ([`Helper`]).
pub(crate) struct OnDemand {
    /// The reader.
    tid: libc::pid_t,
    /// Threads raised with it.
    helpers: Mutex<Vec<std::sync::Arc<Helper>>>,
    /// When tracing began.
    began: Instant,
    /// When, in the trace, it was raised or refused, and which.
    raised: Mutex<Option<(Duration, Result<Raised, NotRaised>)>>,
}

impl OnDemand {
    /// The calling thread's, which reads the rings from now on.
    pub(crate) fn for_this_thread() -> OnDemand {
        OnDemand {
            tid: nix::unistd::gettid().as_raw(),
            helpers: Mutex::new(Vec::new()),
            began: Instant::now(),
            raised: Mutex::new(None),
        }
    }

    /// Has `helper`, which works behind the reader, raised with it.
    pub(crate) fn with_helper(&self, helper: std::sync::Arc<Helper>) {
        self.helpers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(helper);
    }

    /// Raises the reader's priority, and its helpers', unless that was
    /// done or refused already.
    pub(crate) fn behind(&self) {
        let mut raised = self.raised.lock().unwrap_or_else(|e| e.into_inner());
        if raised.is_none() {
            let _briefly = BRIEFLY.lock().unwrap_or_else(|e| e.into_inner());
            *raised = Some((self.began.elapsed(), raise_to(self.tid, READER)));
            for helper in self
                .helpers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
            {
                helper.with_reader();
            }
        }
    }

    /// Whether the reader was raised.
    pub(crate) fn is_raised(&self) -> bool {
        let raised = self.raised.lock().unwrap_or_else(|e| e.into_inner());
        raised.as_ref().is_some_and(|(_, r)| r.is_ok())
    }

    /// What the run says of it: when it was raised, or, if records were
    /// lost (`lost`), why it could not be.
    pub(crate) fn note(&self, lost: u64) -> Option<String> {
        let raised = self.raised.lock().unwrap_or_else(|e| e.into_inner());
        let (at, raised) = raised.as_ref()?;
        let at = at.as_secs_f64();
        match raised {
            Ok(_) => Some(format!(
                "NOTE: the rings filled faster than they were read {at:.3} s into tracing: \
                 the reader ran at real-time priority from then on, ahead of the threads \
                 it traces",
            )),
            Err(_) if lost == 0 => None,
            Err(NotRaised(e)) => Some(format!(
                "NOTE: the rings filled faster than they were read {at:.3} s into tracing, \
                 and the reader stayed behind the threads it traces: real-time priority \
                 was refused ({e}); it needs CAP_SYS_NICE",
            )),
        }
    }
}

impl Drop for Raised {
    fn drop(&mut self) {
        // SAFETY: as in `raise`; lowering a priority of this process needs
        // no privilege, and a failure leaves the thread real-time until it
        // exits, which is soon.
        unsafe { libc::sched_setscheduler(self.tid, self.policy, &self.param) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> libc::c_int {
        // SAFETY: as in `raise`.
        unsafe { libc::sched_getscheduler(0) }
    }

    /// Runs live test `name` on a thread of its own, whose policy it may
    /// change without changing the test harness's.
    fn on_its_own_thread(name: &str, test: impl FnOnce() + Send + 'static) {
        if !crate::live_gate::live_allowed(name) {
            return;
        }
        std::thread::spawn(test).join().expect("test thread");
    }

    #[test]
    fn raised_is_fifo_not_inherited_and_undone() {
        on_its_own_thread("raised_is_fifo_not_inherited_and_undone", || {
            let before = policy();
            let raised = raise(0).expect("root can raise its priority");
            assert_eq!(policy() & !libc::SCHED_RESET_ON_FORK, libc::SCHED_FIFO);
            let child = std::thread::spawn(policy).join().expect("child thread");
            assert_eq!(child, libc::SCHED_OTHER, "a new thread starts normal");
            drop(raised);
            assert_eq!(policy(), before);
        });
    }

    /// The watch raises the reader for good while the reader is briefly
    /// raised: it waits for the brief raise to end, so that the end does
    /// not undo it, and what comes back when the raise for good ends is
    /// the reader's own policy.
    #[test]
    fn a_raise_for_good_waits_for_a_brief_one() {
        on_its_own_thread("a_raise_for_good_waits_for_a_brief_one", || {
            let before = policy();
            let reader = std::sync::Arc::new(OnDemand::for_this_thread());
            let brief = raise_briefly();
            assert_eq!(policy() & !libc::SCHED_RESET_ON_FORK, libc::SCHED_FIFO);
            let watch = {
                let reader = reader.clone();
                std::thread::spawn(move || reader.behind())
            };
            std::thread::sleep(Duration::from_millis(50));
            assert!(!watch.is_finished(), "the raise for good waited");
            drop(brief);
            watch.join().expect("the watch");
            assert_eq!(policy() & !libc::SCHED_RESET_ON_FORK, libc::SCHED_FIFO);
            drop(reader);
            assert_eq!(policy(), before);
        });
    }

    fn fifo_priority() -> libc::c_int {
        let mut param = libc::sched_param { sched_priority: 0 };
        // SAFETY: as in `raise`.
        assert_eq!(unsafe { libc::sched_getparam(0, &mut param) }, 0);
        param.sched_priority
    }

    /// The raised reader is above its helpers, and a brief raise (while it
    /// opens an event) leaves it there rather than lowering it to theirs.
    #[test]
    fn the_reader_stays_above_its_helpers() {
        on_its_own_thread("the_reader_stays_above_its_helpers", || {
            let before = policy();
            let reader = OnDemand::for_this_thread();
            reader.behind();
            assert!(reader.is_raised());
            assert_eq!(fifo_priority(), READER);
            let brief = raise_briefly();
            assert_eq!(fifo_priority(), READER, "during a brief raise");
            drop(brief);
            assert_eq!(fifo_priority(), READER, "after a brief raise");
            let helper = std::thread::spawn(|| {
                let _raised = raise(0).expect("root can raise its priority");
                fifo_priority()
            });
            assert!(helper.join().expect("the helper") < READER);
            drop(reader);
            assert_eq!(policy(), before);
        });
    }

    #[test]
    fn on_demand_raises_once_and_says_when() {
        let p = OnDemand::for_this_thread();
        assert_eq!(p.note(5), None, "never behind");
        *p.raised.lock().unwrap() = Some((
            Duration::from_millis(1500),
            Err(NotRaised(io::Error::from_raw_os_error(libc::EPERM))),
        ));
        assert_eq!(p.note(0), None, "refused, nothing lost");
        assert_eq!(
            p.note(3).unwrap(),
            "NOTE: the rings filled faster than they were read 1.500 s into tracing, and \
             the reader stayed behind the threads it traces: real-time priority was \
             refused (Operation not permitted (os error 1)); it needs CAP_SYS_NICE"
        );
        // Already decided: a later fall behind changes nothing.
        p.behind();
        assert!(p.note(3).unwrap().contains("1.500 s into tracing"));
        if !crate::live_gate::live_allowed("on_demand_raises_once_and_says_when") {
            return;
        }
        std::thread::spawn(|| {
            let p = std::sync::Arc::new(OnDemand::for_this_thread());
            // A helper, raised with the reader.
            let (tid_tx, tid_rx) = std::sync::mpsc::channel();
            let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
            let helper = std::thread::spawn(move || {
                tid_tx.send(nix::unistd::gettid().as_raw()).expect("send");
                let _ = done_rx.recv();
                policy() & !libc::SCHED_RESET_ON_FORK
            });
            let raised_helper = std::sync::Arc::new(Helper::new(tid_rx.recv().expect("tid")));
            p.with_helper(raised_helper.clone());
            // Raised by another thread, as the watch on the rings does.
            let other = p.clone();
            std::thread::spawn(move || other.behind())
                .join()
                .expect("raising thread");
            // Far behind and caught up again: still raised with the reader.
            raised_helper.behind(true);
            raised_helper.behind(false);
            drop(done_tx);
            assert_eq!(helper.join().expect("helper"), libc::SCHED_FIFO);
            assert_eq!(policy() & !libc::SCHED_RESET_ON_FORK, libc::SCHED_FIFO);
            assert!(
                p.note(0)
                    .unwrap()
                    .contains(" s into tracing: the reader ran")
            );
            drop(p);
            assert_eq!(policy(), libc::SCHED_OTHER);
        });
    }
}
