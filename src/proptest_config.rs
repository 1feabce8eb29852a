//! The one proptest configuration shared by the crate's property tests
//! (`perf::proptests`, `tracefs::proptests`, `symbolize::tests::corrupt`):
//! bounded case counts and a deterministic run.
//!
//! * The RNG seed is fixed, so CI runs the same inputs every time and a
//!   failure reproduces on any machine. Set `PROPTEST_RNG_SEED=<u64>` to
//!   explore other inputs, and `PROPTEST_CASES=<n>` to run more of them.
//! * Failure persistence is off: no `proptest-regressions/` files to commit
//!   or to go stale while the decoders change. A failure prints its shrunk
//!   input; it belongs in a regular unit test next to the code it broke.
//! * No fork or timeout (proptest is built without those features): every
//!   property bounds its own work (records ≤ bytes / header size and the
//!   like), so a loop that never ends shows as a test that never ends.

use proptest::test_runner::{Config, RngSeed};

/// Seed used unless `PROPTEST_RNG_SEED` says otherwise.
const SEED: u64 = 0x0ff_5eed;

/// `cases` cases (unless `PROPTEST_CASES` is set), a fixed seed (unless
/// `PROPTEST_RNG_SEED` is set), no persistence files.
pub(crate) fn config(cases: u32) -> Config {
    let env = Config::default();
    Config {
        cases: if std::env::var_os("PROPTEST_CASES").is_some() {
            env.cases
        } else {
            cases
        },
        rng_seed: match env.rng_seed {
            RngSeed::Random => RngSeed::Fixed(SEED),
            fixed => fixed,
        },
        failure_persistence: None,
        ..env
    }
}
