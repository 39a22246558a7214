//! The whole catalogue against the CPU reference backend, linked in and run in this process
//! the way a vendor would from their own `cargo test`: zero failures, and every skip says why.
//! (`make cts` certifies the same backend as a plugin file, through worker processes.)

use std::sync::Arc;
use std::time::Duration;
use xhal_conformance::{catalogue, run_in_process, KnownFailurePolicy, Outcome, Target, TargetSpec};

#[test]
fn the_reference_backend_passes_the_whole_catalogue() {
    let target = Arc::new(Target::open(&TargetSpec::Backend("cpu".into())).expect("the CPU backend is linked in"));
    let records = run_in_process(
        target,
        0,
        &catalogue(),
        &KnownFailurePolicy::default(),
        Duration::from_secs(120),
        |_| {},
    );
    let not_passed: Vec<String> = records
        .iter()
        .filter(|record| !matches!(record.outcome, Outcome::Pass | Outcome::Skipped { .. }))
        .map(|record| format!("{} {}: {}", record.outcome.name(), record.id, record.outcome.detail()))
        .collect();
    assert!(not_passed.is_empty(), "{}", not_passed.join("\n"));
    for record in &records {
        if let Outcome::Skipped { reason } = &record.outcome {
            assert!(!reason.trim().is_empty(), "{} skipped without a reason", record.id);
            // Linked in, the backend is not a plugin file: only the ABI-level tests and the
            // features the CPU device does not claim may skip.
            assert!(
                record.area == "plugin" || reason.contains("does not claim"),
                "{} skipped for an unexpected reason: {reason}",
                record.id
            );
        }
    }
}
