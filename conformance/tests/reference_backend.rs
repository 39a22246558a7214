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
    // The skips of the reference device are known exactly: any other skip means a test
    // stopped running on the device every other backend is compared with.
    let mut skipped: Vec<&str> = records
        .iter()
        .filter(|record| record.area != "plugin" && matches!(record.outcome, Outcome::Skipped { .. }))
        .map(|record| record.id.as_str())
        .collect();
    skipped.sort();
    for record in &records {
        if let Outcome::Skipped { reason } = &record.outcome {
            assert!(!reason.trim().is_empty(), "{} skipped without a reason", record.id);
        }
    }
    assert_eq!(skipped, EXPECTED_SKIPS);
    assert!(records
        .iter()
        .filter(|record| record.area == "plugin")
        .all(|record| matches!(&record.outcome, Outcome::Skipped { reason } if reason.contains("plugin file"))));
}

/// Besides the `plugin` area (linked in, the backend is not a plugin file): the default
/// configuration has one device, with no PCI bus and more memory than the exhaustion test
/// cycles through, and the CPU device does not claim 64-bit atomics.
/// `two_small_cpu_devices.rs` runs the device-pair and exhaustion tests.
const EXPECTED_SKIPS: [&str; 7] = [
    "compute.atomics64.add_min_max",
    "device.identity.uuids_distinct",
    "device.info.pci_bus_id_form",
    "events.misuse.event_of_another_device",
    "memory.misuse.copy_between_devices",
    "memory.oom.exhaustion",
    "streams.misuse.buffer_of_another_device",
];
