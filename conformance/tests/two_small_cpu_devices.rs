//! The memory, streams, events, concurrency and stress areas against the CPU reference
//! backend configured as two small devices, where the exhaustion and cross-device tests run
//! instead of skipping (`reference_backend.rs` runs everything on the default configuration).

use std::sync::Arc;
use std::time::Duration;
use xhal_conformance::*;

const AREAS: [&str; 5] = ["memory", "streams", "events", "concurrency", "stress"];

fn run_areas_without_skips() {
    let target = Arc::new(Target::open(&TargetSpec::Backend("cpu".into())).expect("the cpu backend"));
    let cases: Vec<TestCase> = catalogue()
        .into_iter()
        .filter(|case| AREAS.contains(&case.area()))
        .collect();
    let records = run_in_process(
        target,
        0,
        &cases,
        &KnownFailurePolicy::default(),
        Duration::from_secs(120),
        |_| {},
    );
    let bad: Vec<_> = records
        .iter()
        .filter(|record| match &record.outcome {
            Outcome::Pass => false,
            Outcome::Skipped { .. } => true,
            _ => true,
        })
        .collect();
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn runtime_areas_pass_on_two_small_cpu_devices_without_skips() {
    // Environment variables are read when a runtime is built; this is the file's only test,
    // so nothing else reads them concurrently.
    std::env::set_var("XHAL_CPU_DEVICES", "2");
    std::env::set_var("XHAL_CPU_MEMORY", (64u64 << 20).to_string());
    run_areas_without_skips();
}
