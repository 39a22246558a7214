//! The device, kernels and compute areas against the CPU reference backend: every test
//! passes or is skipped for a capability the device lacks.

use std::sync::Arc;
use std::time::Duration;
use xhal_conformance::*;

#[test]
fn device_kernels_and_compute_pass_on_the_cpu_backend() {
    let target = Arc::new(Target::open(&TargetSpec::Backend("cpu".into())).unwrap());
    let cases: Vec<TestCase> = catalogue()
        .into_iter()
        .filter(|case| ["device", "kernels", "compute"].contains(&case.area()))
        .collect();
    let records = run_in_process(
        target,
        0,
        &cases,
        &KnownFailurePolicy::default(),
        Duration::from_secs(60),
        |_| {},
    );
    let bad: Vec<_> = records
        .iter()
        .filter(|record| !matches!(record.outcome, Outcome::Pass | Outcome::Skipped { .. }))
        .collect();
    assert!(bad.is_empty(), "{bad:#?}");
}
