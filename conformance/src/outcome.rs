//! How a test ended.

use serde::{Deserialize, Serialize};

/// The one result each test ends in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Outcome {
    /// Everything checked held.
    Pass,
    /// A check failed.
    Fail {
        /// What went wrong.
        message: String,
        /// The value the contract demands, where there is one.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        expected: Option<String>,
        /// The value the device produced.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        actual: Option<String>,
    },
    /// Not run: the device lacks a capability.
    Skipped {
        /// The capability, and what the device reported instead.
        reason: String,
    },
    /// Declared as failing on this backend and device; not counted as a failure.
    KnownFailure {
        /// The declared cause.
        reason: String,
        /// What the test saw, when it was run anyway (`--run-known-failures`).
        #[serde(skip_serializing_if = "Option::is_none", default)]
        observed: Option<String>,
    },
    /// Declared as failing, run anyway, and passed: the declaration is stale.
    UnexpectedPass {
        /// The declared cause.
        reason: String,
    },
    /// The process running the test died.
    Crashed {
        /// The signal or exit status, and what the process printed last.
        message: String,
    },
    /// The test did not finish within the time limit and was stopped.
    TimedOut {
        /// The limit, in seconds.
        limit_seconds: f64,
    },
}

impl Outcome {
    /// The result's name in reports: `pass`, `fail`, `skipped`, `known_failure`,
    /// `unexpected_pass`, `crashed`, `timed_out`.
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail { .. } => "fail",
            Outcome::Skipped { .. } => "skipped",
            Outcome::KnownFailure { .. } => "known_failure",
            Outcome::UnexpectedPass { .. } => "unexpected_pass",
            Outcome::Crashed { .. } => "crashed",
            Outcome::TimedOut { .. } => "timed_out",
        }
    }

    /// True for the results that make a run fail: fail, crashed, timed out.
    pub fn is_failure(&self) -> bool {
        matches!(
            self,
            Outcome::Fail { .. } | Outcome::Crashed { .. } | Outcome::TimedOut { .. }
        )
    }

    /// One line saying why the test did not pass; empty for a pass.
    pub fn detail(&self) -> String {
        match self {
            Outcome::Pass => String::new(),
            Outcome::Fail {
                message,
                expected,
                actual,
            } => {
                let mut text = message.clone();
                if let Some(expected) = expected {
                    text.push_str(&format!("; expected {expected}"));
                }
                if let Some(actual) = actual {
                    text.push_str(&format!(", got {actual}"));
                }
                text
            }
            Outcome::Skipped { reason } => reason.clone(),
            Outcome::KnownFailure { reason, observed } => match observed {
                Some(observed) => format!("{reason} (observed: {observed})"),
                None => reason.clone(),
            },
            Outcome::UnexpectedPass { reason } => format!("passed, but is declared as failing: {reason}"),
            Outcome::Crashed { message } => message.clone(),
            Outcome::TimedOut { limit_seconds } => format!("did not finish within {limit_seconds} s"),
        }
    }

    /// Every result name, in report order.
    pub const NAMES: [&'static str; 7] = [
        "pass",
        "fail",
        "skipped",
        "known_failure",
        "unexpected_pass",
        "crashed",
        "timed_out",
    ];
}

/// One test's result on one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestRecord {
    /// The test's id.
    pub id: String,
    /// Its area.
    pub area: String,
    /// The profile it counts towards.
    pub profile: String,
    /// How it ended.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// Wall time in seconds.
    pub seconds: f64,
}
