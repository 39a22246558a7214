//! Running tests inside this process: what `xhal-cts`'s worker does for each test, and what a
//! vendor calls from their own `cargo test`.

use crate::context::Target;
use crate::known_failures::{KnownFailures, RunIdentity};
use crate::outcome::{Outcome, TestRecord};
use crate::test_case::{TestCase, Verdict};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs one test on device `index`: checks its requirements, opens a fresh context, runs the
/// body. A panic in the body (a bug in a statically linked backend, or in the test) is a
/// failure that quotes the panic.
pub fn run_test(target: &Target, index: u32, case: &TestCase) -> Outcome {
    if let Some(reason) = missing_requirement(target, index, case) {
        return Outcome::Skipped { reason };
    }
    let body = || -> Outcome {
        let context = match target.context(index) {
            Ok(context) => context,
            Err(error) => {
                return Outcome::Fail {
                    message: format!("cannot open the device and a stream on it: {error}"),
                    expected: None,
                    actual: None,
                }
            }
        };
        match (case.run)(&context) {
            Ok(()) => Outcome::Pass,
            Err(Verdict::Skip(reason)) => Outcome::Skipped { reason },
            Err(Verdict::Fail(failure)) => Outcome::Fail {
                message: failure.message,
                expected: failure.expected,
                actual: failure.actual,
            },
        }
    };
    match std::panic::catch_unwind(AssertUnwindSafe(body)) {
        Ok(outcome) => outcome,
        Err(payload) => Outcome::Fail {
            message: format!("the test panicked: {}", panic_text(payload.as_ref())),
            expected: None,
            actual: None,
        },
    }
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|text| text.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-text panic".to_string())
}

/// Why `case` cannot run on this device, or `None` when it can.
pub fn missing_requirement(target: &Target, index: u32, case: &TestCase) -> Option<String> {
    if case.requires.plugin_file && target.plugin_path().is_none() {
        return Some(format!(
            "backend `{}` is linked into this program, not loaded from a plugin file; \
             ABI-level tests need a plugin (run with --plugin PATH)",
            target.backend_name()
        ));
    }
    let features = case.requires.features;
    if features.0 != 0 {
        let claimed = target
            .runtime()
            .backend(target.backend_name())
            .and_then(|entry| entry.backend().device_info(index).ok())
            .map(|info| info.features)
            .unwrap_or_default();
        let missing: Vec<&str> = xhal::Features(features.0 & !claimed.0).names();
        if !missing.is_empty() {
            return Some(format!("the device does not claim {}", missing.join(", ")));
        }
    }
    None
}

/// How known failures are treated.
#[derive(Debug, Clone, Default)]
pub struct KnownFailurePolicy {
    /// The declarations.
    pub declared: KnownFailures,
    /// Run declared tests anyway and report a pass as an unexpected pass.
    pub run_anyway: bool,
}

/// Runs `case` unless it is a declared known failure, and turns the outcome into the one a
/// report shows.
pub fn run_declared(
    case: &TestCase,
    identity: RunIdentity<'_>,
    policy: &KnownFailurePolicy,
    run: impl FnOnce() -> Outcome,
) -> Outcome {
    let Some(declared) = policy.declared.find(case.id, identity) else {
        return run();
    };
    if !policy.run_anyway {
        return Outcome::KnownFailure {
            reason: declared.reason.clone(),
            observed: None,
        };
    }
    match run() {
        Outcome::Pass => Outcome::UnexpectedPass {
            reason: declared.reason.clone(),
        },
        skipped @ Outcome::Skipped { .. } => skipped,
        other => Outcome::KnownFailure {
            reason: declared.reason.clone(),
            observed: Some(format!("{}: {}", other.name(), other.detail())),
        },
    }
}

/// Runs `cases` one after another on device `index` in this process, each on its own thread
/// so that a test that hangs ends as timed out after `timeout` (its thread is abandoned; the
/// tests after it still run). Crashes cannot be caught in-process: `xhal-cts run` runs tests
/// in worker processes for that.
pub fn run_in_process(
    target: Arc<Target>,
    index: u32,
    cases: &[TestCase],
    policy: &KnownFailurePolicy,
    timeout: Duration,
    mut on_record: impl FnMut(&TestRecord),
) -> Vec<TestRecord> {
    let plugin_version = target.backend_info().map(|info| info.version).unwrap_or_default();
    let device_name = target
        .devices()
        .ok()
        .and_then(|devices| devices.into_iter().find(|(i, _)| *i == index))
        .map(|(_, info)| info.name)
        .unwrap_or_default();
    let backend_name = target.backend_name().to_string();
    let identity = RunIdentity {
        backend: &backend_name,
        plugin_version: &plugin_version,
        device: &device_name,
    };
    let mut records = Vec::with_capacity(cases.len());
    for case in cases {
        let started = Instant::now();
        let outcome = run_declared(case, identity, policy, || {
            run_on_thread(target.clone(), index, *case, timeout)
        });
        let record = TestRecord {
            id: case.id.to_string(),
            area: case.area().to_string(),
            profile: case.profile(),
            outcome,
            seconds: started.elapsed().as_secs_f64(),
        };
        on_record(&record);
        records.push(record);
    }
    records
}

fn run_on_thread(target: Arc<Target>, index: u32, case: TestCase, timeout: Duration) -> Outcome {
    let (sender, receiver) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name(format!("cts {}", case.id))
        .spawn(move || {
            let _ = sender.send(run_test(&target, index, &case));
        });
    if let Err(error) = spawned {
        return Outcome::Crashed {
            message: format!("cannot start a thread for the test: {error}"),
        };
    }
    match receiver.recv_timeout(timeout) {
        Ok(outcome) => outcome,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Outcome::TimedOut {
            limit_seconds: timeout.as_secs_f64(),
        },
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Outcome::Crashed {
            message: "the test's thread ended without a result".to_string(),
        },
    }
}
