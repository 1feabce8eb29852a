//! Diagnostics on stderr: warnings, notes, progress and the final error.
//!
//! A closed or broken stderr (say `2>&1 | head -3`) must neither stop a run
//! nor change its exit status, so these writes ignore errors instead of
//! panicking as `eprintln!` does, and once one write has failed nothing
//! more is tried.

pub(crate) mod escape;

use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a write to stderr has failed.
static BROKEN: AtomicBool = AtomicBool::new(false);

/// Writes `args` to stderr as they are, unless stderr has failed before.
pub(crate) fn write(args: fmt::Arguments<'_>) {
    write_to(&mut io::stderr().lock(), &BROKEN, args);
}

/// Writes `args` and a newline to stderr, unless stderr has failed before.
pub fn line(args: fmt::Arguments<'_>) {
    write(format_args!("{args}\n"));
}

fn write_to(out: &mut dyn Write, broken: &AtomicBool, args: fmt::Arguments<'_>) {
    if broken.load(Ordering::Relaxed) {
        return;
    }
    if out.write_fmt(args).and_then(|()| out.flush()).is_err() {
        broken.store(true, Ordering::Relaxed);
    }
}

/// `eprintln!` that survives a closed stderr (see [`line`]).
macro_rules! diag {
    ($($arg:tt)*) => {
        $crate::diag::line(format_args!($($arg)*))
    };
}
pub(crate) use diag;

/// `n` and what is counted, in the singular or plural.
pub(crate) fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer whose every write fails as a closed pipe does, counting
    /// the attempts.
    struct ClosedPipe {
        attempts: usize,
    }

    impl Write for ClosedPipe {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            self.attempts += 1;
            Err(io::Error::from(io::ErrorKind::BrokenPipe))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_stream_is_written_once_and_then_left_alone() {
        let broken = AtomicBool::new(false);
        let mut pipe = ClosedPipe { attempts: 0 };
        write_to(&mut pipe, &broken, format_args!("NOTE: {}\n", 1));
        assert!(broken.load(Ordering::Relaxed));
        write_to(&mut pipe, &broken, format_args!("NOTE: {}\n", 2));
        assert_eq!(pipe.attempts, 1);
    }

    #[test]
    fn an_open_stream_gets_every_write() {
        let broken = AtomicBool::new(false);
        let mut out = Vec::new();
        write_to(&mut out, &broken, format_args!("a {}\n", 1));
        write_to(&mut out, &broken, format_args!("b\n"));
        assert_eq!(out, b"a 1\nb\n");
        assert!(!broken.load(Ordering::Relaxed));
    }
}
