//! `dlio-testkit`: what the test suites of dlio's crates share (a dev-dependency only).
//!
//! - [`skip`]: the one way a test may skip, and only for a [`MachineProperty`] that a probe
//!   found before the run (never by matching the output of the run under test). Each skip
//!   is appended to the file named by `DLIO_SKIP_LOG`, which `scripts/test.sh` sets and
//!   checks against `scripts/allowed-skips` at the end of the suite.
//! - [`probe`]: the probes of those properties (io_uring in the kernel, O_DIRECT and
//!   `RWF_NOWAIT` on a folder's file system, tmpfs).
//! - [`moto`]: moto's S3 server on a port it bound itself; [`net`]: a port that refuses
//!   connections for as long as it is held.

pub mod moto;
pub mod net;
pub mod probe;
pub mod skip;

pub use skip::{MachineProperty, skip};
