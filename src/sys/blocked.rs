//! A blocked thread's user registers and stack, read from the thread
//! itself, for unwinding a stack that no event copied (the tracefs
//! backend).
//!
//! `/proc/TGID/task/TID/syscall` holds `NR ARG1 .. ARG6 SP PC` for a
//! thread blocked in a system call, `NR SP PC` (NR negative) for one
//! blocked outside any (a page fault), and `running` for one that is not
//! blocked. The kernel takes the process's exec lock, waits for the thread
//! to be off its CPU, and answers `running` if it switched meanwhile; the
//! reads are made on [`super::memory::GuardedReader`]'s thread, which a
//! read that waits too long does not hold up. Only SP and PC are given:
//! the frame pointer is not (see [`crate::unwind::live`]).
//!
//! `schedstat` gives the thread's time on a CPU and how many times it was
//! switched in: the same before and after the reads, it did not run in
//! between (the count covers a thread switched in and still on its CPU,
//! whose time the kernel adds to only at ticks and switches).

use std::path::Path;

use super::memory::{Stacks, read_stack};
use super::proc::read_capped;

/// A thread's user stack pointer and instruction pointer, as the kernel
/// saved them when it entered the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Regs {
    pub(crate) sp: u64,
    pub(crate) pc: u64,
}

/// What a `syscall` file says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Syscall {
    /// Blocked in the kernel, in a system call or not.
    Blocked(Regs),
    /// Not blocked (or it switched while the kernel looked).
    Running,
    /// Gone, not readable, or not laid out as expected.
    Unreadable,
}

/// Most bytes read of a `syscall` or `schedstat` file: a whole one is
/// under 200.
const FILE_CAP: u64 = 256;

/// Parses a `syscall` file: `running`, `NR SP PC` with NR negative, or
/// `NR A1 A2 A3 A4 A5 A6 SP PC` with NR from 0; numbers past NR in hex
/// with `0x`. Anything else is [`Syscall::Unreadable`].
pub(crate) fn parse_syscall(text: &[u8]) -> Syscall {
    let Ok(text) = std::str::from_utf8(text) else {
        return Syscall::Unreadable;
    };
    let fields: Vec<&str> = text.split_ascii_whitespace().take(10).collect();
    if fields == ["running"] {
        return Syscall::Running;
    }
    let Some(nr) = fields.first().and_then(|f| f.parse::<i64>().ok()) else {
        return Syscall::Unreadable;
    };
    let expected = if nr < 0 { 3 } else { 9 };
    if fields.len() != expected {
        return Syscall::Unreadable;
    }
    let hex = |f: &str| u64::from_str_radix(f.strip_prefix("0x")?, 16).ok();
    let Some(words) = fields[1..]
        .iter()
        .map(|f| hex(f))
        .collect::<Option<Vec<u64>>>()
    else {
        return Syscall::Unreadable;
    };
    match words[words.len() - 2..] {
        [sp, pc] if sp != 0 && pc != 0 => Syscall::Blocked(Regs { sp, pc }),
        _ => Syscall::Unreadable,
    }
}

/// A `schedstat` file's time on a CPU (ns) and count of switches in.
pub(crate) fn parse_schedstat(text: &[u8]) -> Option<(u64, u64)> {
    let text = std::str::from_utf8(text).ok()?;
    let mut fields = text.split_ascii_whitespace();
    let time = fields.next()?.parse().ok()?;
    let _waited = fields.next()?;
    let runs = fields.next()?.parse().ok()?;
    Some((time, runs))
}

fn task_file(tgid: u32, tid: u32, name: &str) -> Option<Vec<u8>> {
    let path = format!("/proc/{tgid}/task/{tid}/{name}");
    read_capped(Path::new(&path), FILE_CAP).ok()
}

fn syscall_of(tgid: u32, tid: u32) -> Syscall {
    task_file(tgid, tid, "syscall").map_or(Syscall::Unreadable, |t| parse_syscall(&t))
}

fn schedstat_of(tgid: u32, tid: u32) -> Option<(u64, u64)> {
    parse_schedstat(&task_file(tgid, tid, "schedstat")?)
}

/// What reading a blocked thread gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ThreadRead {
    /// Its registers, and its stack from SP up: it stayed blocked, at the
    /// PC asked, and did not run while it was read.
    Still { regs: Regs, stack: Vec<u8> },
    /// It is not blocked, or it ran while it was read.
    Ran,
    /// It is blocked at another PC than the one asked.
    Moved,
    /// It is gone, or its files or stack could not be read.
    Unreadable,
}

/// Reads thread `tid` of process `tgid`, blocked at `pc`: its registers,
/// then up to `len` bytes of its stack from SP up (within the mapping that
/// holds SP, [`read_stack`]), between two reads of its `schedstat`.
pub(crate) fn read_blocked(
    stacks: &mut Stacks,
    tgid: u32,
    tid: u32,
    pc: u64,
    len: usize,
) -> ThreadRead {
    let Some(before) = schedstat_of(tgid, tid) else {
        return ThreadRead::Unreadable;
    };
    let regs = match syscall_of(tgid, tid) {
        Syscall::Blocked(r) => r,
        Syscall::Running => return ThreadRead::Ran,
        Syscall::Unreadable => return ThreadRead::Unreadable,
    };
    if regs.pc != pc {
        return ThreadRead::Moved;
    }
    let stack = read_stack(stacks, tid, regs.sp, len);
    if schedstat_of(tgid, tid) != Some(before) {
        return ThreadRead::Ran;
    }
    if stack.is_empty() {
        return ThreadRead::Unreadable;
    }
    ThreadRead::Still { regs, stack }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::OtherThread;

    #[test]
    fn syscall_files_as_the_kernel_writes_them() {
        let in_call = b"0 0x3 0x7ffd5c3f8e47 0x1 0x0 0x0 0x0 0x7ffd5c3f8e28 0x7f2797c86503\n";
        assert_eq!(
            parse_syscall(in_call),
            Syscall::Blocked(Regs {
                sp: 0x7ffd_5c3f_8e28,
                pc: 0x7f27_97c8_6503
            })
        );
        assert_eq!(
            parse_syscall(b"-1 0x7ffd5c3f8e28 0x401136\n"),
            Syscall::Blocked(Regs {
                sp: 0x7ffd_5c3f_8e28,
                pc: 0x401136
            })
        );
        assert_eq!(parse_syscall(b"running\n"), Syscall::Running);
    }

    #[test]
    fn anything_else_is_unreadable() {
        let max = format!("0 {}", ["0xffffffffffffffff"; 8].join(" "));
        assert!(matches!(parse_syscall(max.as_bytes()), Syscall::Blocked(_)));
        for bad in [
            &b""[..],
            b"\n",
            b"garbage",
            b"running now",
            b"Running",
            b"\xff\xfe",
            // Missing fields, one too many, no 0x, not hex, too large.
            b"0 0x3 0x7ffd 0x1 0x0 0x0 0x0 0x7ffd",
            b"0 0x3 0x7ffd 0x1 0x0 0x0 0x0 0x7ffd 0x7f27 0x1",
            b"-1 0x7ffd",
            b"-1 7ffd 401136",
            b"-1 0x7ffd 0x40zz",
            b"-1 0x7ffd 0x1ffffffffffffffff",
            b"-1 0x0x7ffd 0x401136",
            b"-1 0x 0x401136",
            b"99999999999999999999 0x7ffd 0x401136",
            b"x 0x7ffd 0x401136",
            // A thread with no stack: nothing to unwind.
            b"-1 0x0 0x0",
        ] {
            assert_eq!(parse_syscall(bad), Syscall::Unreadable, "{bad:?}");
        }
        let long = "0x1 ".repeat(10_000);
        assert_eq!(parse_syscall(long.as_bytes()), Syscall::Unreadable);
    }

    #[test]
    fn schedstat_gives_time_and_runs() {
        assert_eq!(
            parse_schedstat(b"1620512 3391044 7\n"),
            Some((1_620_512, 7))
        );
        for bad in [
            &b""[..],
            b"1 2",
            b"x 2 3",
            b"1 2 -3",
            b"99999999999999999999 1 1",
        ] {
            assert_eq!(parse_schedstat(bad), None, "{bad:?}");
        }
    }

    /// A thread of this process, blocked on a channel: read still where
    /// its `syscall` file says it is, moved when asked for another PC.
    #[test]
    fn a_blocked_thread_is_read_where_it_waits() {
        let other = OtherThread::start();
        let me = std::process::id();
        let mut stacks = Stacks::default();
        // It may not have blocked yet.
        let mut regs = None;
        for _ in 0..1000 {
            if let Syscall::Blocked(r) = syscall_of(me, other.tid) {
                regs = Some(r);
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let regs = regs.expect("the other thread blocks");
        match read_blocked(&mut stacks, me, other.tid, regs.pc, 4096) {
            ThreadRead::Still { regs: got, stack } => {
                assert_eq!(got, regs);
                assert!(!stack.is_empty() && stack.len() <= 4096);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            read_blocked(&mut stacks, me, other.tid, regs.pc ^ 1, 4096),
            ThreadRead::Moved
        );
        assert_eq!(
            read_blocked(&mut stacks, me, 4_194_304, regs.pc, 4096),
            ThreadRead::Unreadable
        );
    }
}
