//! What every example does the same way: pick the device `XHAL_DEVICE` selects (or the best
//! one), say which and why, and report a timing and a verification verdict.

// Each example uses only some of these helpers.
#![allow(dead_code)]

use std::time::Duration;
use xhal::{Device, Runtime, Selector};

/// Discovers backends and opens the selected device, printing the choice and its reason.
pub fn choose_device() -> xhal::Result<(Runtime, Device)> {
    let runtime = Runtime::discover()?;
    let (device, explanation) = runtime.choose(&Selector::from_env()?)?;
    let source = runtime
        .backend(device.backend_name())
        .map(|entry| entry.source.to_string())
        .unwrap_or_default();
    println!("device: {} ({}), {source}", device.label(), device.name());
    println!("why:    {}", explanation.summary);
    Ok((runtime, device))
}

/// Prints one timing line: the time and a rate (`GB/s`, `GFLOP/s`...).
pub fn report(what: &str, elapsed: Duration, amount: f64, unit: &str) {
    let seconds = elapsed.as_secs_f64();
    println!("{what}: {:.3} ms, {:.3} {unit}", seconds * 1e3, amount / seconds / 1e9);
}

/// Prints the verdict and turns a failure into an error, so the example exits non-zero.
pub fn verdict(wrong: usize, total: usize, first_wrong: Option<String>) -> xhal::Result<()> {
    if wrong == 0 {
        println!("verification: PASS ({total} values match the Rust reference)");
        Ok(())
    } else {
        println!("verification: FAIL ({wrong} of {total} values differ)");
        Err(xhal::Error::internal(format!(
            "{wrong} of {total} values differ from the Rust reference; first: {}",
            first_wrong.unwrap_or_default()
        )))
    }
}

/// Compares two float slices with a relative tolerance.
pub fn compare_floats(actual: &[f32], expected: &[f32], tolerance: f32) -> xhal::Result<()> {
    let mut wrong = 0;
    let mut first = None;
    for (index, (&got, &want)) in actual.iter().zip(expected).enumerate() {
        if (got - want).abs() > tolerance * want.abs().max(1.0) {
            wrong += 1;
            first.get_or_insert_with(|| format!("index {index}: got {got}, expected {want}"));
        }
    }
    verdict(wrong, expected.len(), first)
}

/// Runs `main_body` and exits 1 with the error on failure.
pub fn run(main_body: fn() -> xhal::Result<()>) {
    if let Err(error) = main_body() {
        eprintln!("error: {error}");
        std::process::exit(1);
    }
}
