//! The gate of the crate's own tests that need root (a live kernel, a
//! mountable tracefs): without root they return early, unless
//! `OFFWAKE_REQUIRE_LIVE=1` (set by `.ci/run`) makes that a failure.

use crate::diag::diag;

/// True when test `name` can run; false, after saying so, when it is
/// skipped; a panic when skipping is forbidden.
pub(crate) fn live_allowed(name: &str) -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    if std::env::var("OFFWAKE_REQUIRE_LIVE").as_deref() == Ok("1") {
        panic!("{name}: OFFWAKE_REQUIRE_LIVE=1 but not running as root");
    }
    diag!("{name}: skipped (needs root; set OFFWAKE_REQUIRE_LIVE=1 to fail instead)");
    false
}
