//! The xhal conformance suite.
//!
//! A catalogue of tests, each with a stable id (`memory.copy.overlap`), written against the
//! public API as an application would use it, with kernels written once in WGSL. The
//! `xhal-cts` binary runs it against a plugin and writes a report and a certificate; a
//! vendor can also run it from their own `cargo test`:
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use xhal_conformance::{catalogue, run_in_process, KnownFailurePolicy, Target, TargetSpec};
//!
//! let target = Arc::new(Target::open(&TargetSpec::Plugin("target/debug/libxhal_acme.so".into())).unwrap());
//! let records = run_in_process(target, 0, &catalogue(), &KnownFailurePolicy::default(), Duration::from_secs(60), |_| {});
//! let failed: Vec<_> = records.iter().filter(|record| record.outcome.is_failure()).collect();
//! assert!(failed.is_empty(), "{failed:#?}");
//! ```

pub mod catalogue;
mod context;
pub mod glob;
mod known_failures;
mod outcome;
pub mod perf;
pub mod report;
mod runner;
mod test_case;

pub use catalogue::catalogue;
pub use context::{wgsl_unreachable, SetupError, Target, TargetSpec, TestContext};
pub use known_failures::{KnownFailure, KnownFailures, RunIdentity};
pub use outcome::{Outcome, TestRecord};
pub use runner::{missing_requirement, run_declared, run_in_process, run_test, KnownFailurePolicy};
pub use test_case::{
    check, check_close, check_eq, check_slice_eq, expect_error, Failure, Requirement, TestCase, TestResult, Verdict,
};

/// The suite's version: certificates name it.
pub const SUITE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The git commit the suite was built from (`-dirty` when the tree had changes), or `unknown`.
pub const SUITE_COMMIT: &str = env!("XHAL_CTS_GIT_COMMIT");
