//! The suite proves itself: each deliberately broken plugin (tests/cts-broken) must be caught
//! with the right result, and a good plugin's certificate must hold the file's real hash.
//!
//! The plugins are built by `cargo build --workspace` (`make test` does it first).

use serde_json::Value;
use sha2::Digest;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn build_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_xhal-cts"))
        .parent()
        .expect("the binary lives in a folder")
        .to_path_buf()
}

fn plugin(name: &str) -> PathBuf {
    let path = build_dir().join(format!("libxhal_{name}.so"));
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace` (or `make test`) first",
        path.display()
    );
    path
}

struct Run {
    status: i32,
    report: Value,
    stderr: String,
    elapsed: Duration,
}

fn cts(arguments: &[&str]) -> Run {
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_xhal-cts"))
        .args(arguments)
        .arg("--json")
        .arg("--no-performance")
        .output()
        .expect("xhal-cts runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    let report = serde_json::from_str(&stdout).unwrap_or_else(|error| {
        panic!("xhal-cts printed no JSON report ({error}); stdout: {stdout}\nstderr: {stderr}")
    });
    Run {
        status: output.status.code().unwrap_or(-1),
        report,
        stderr,
        elapsed: started.elapsed(),
    }
}

fn results(run: &Run) -> Vec<(String, String, String)> {
    run.report["devices"][0]["results"]
        .as_array()
        .expect("a results list")
        .iter()
        .map(|record| {
            let outcome: xhal_conformance::Outcome =
                serde_json::from_value(record.clone()).expect("a record deserialises");
            (
                record["id"].as_str().unwrap_or_default().to_string(),
                outcome.name().to_string(),
                outcome.detail(),
            )
        })
        .collect()
}

fn with_result<'a>(results: &'a [(String, String, String)], result: &str) -> Vec<&'a (String, String, String)> {
    results.iter().filter(|(_, name, _)| name == result).collect()
}

fn profile_status(run: &Run, profile: &str) -> String {
    run.report["devices"][0]["profiles"]
        .as_array()
        .expect("profiles")
        .iter()
        .find(|entry| entry["name"] == profile)
        .map(|entry| entry["status"].as_str().unwrap_or_default().to_string())
        .unwrap_or_else(|| format!("no profile {profile}"))
}

#[test]
fn a_copy_that_ignores_its_source_offset_fails_the_copy_tests() {
    let path = plugin("broken_copy_offset");
    let run = cts(&["run", "--plugin", path.to_str().unwrap(), "--filter", "memory.*"]);
    let results = results(&run);
    assert_eq!(run.status, 1, "{}", run.stderr);
    let failed = with_result(&results, "fail");
    assert!(
        failed.iter().any(|(id, _, _)| id.contains("copy")),
        "no copy test failed: {results:#?}"
    );
}

#[test]
fn a_fill_that_ignores_its_length_fails_the_fill_tests() {
    let path = plugin("broken_fill_length");
    let run = cts(&["run", "--plugin", path.to_str().unwrap(), "--filter", "memory.*"]);
    let results = results(&run);
    assert_eq!(run.status, 1, "{}", run.stderr);
    let failed = with_result(&results, "fail");
    assert!(
        failed.iter().any(|(id, _, _)| id.contains("fill")),
        "no fill test failed: {results:#?}"
    );
}

#[test]
fn an_event_that_never_signals_times_out_and_the_run_goes_on() {
    let path = plugin("broken_event_never");
    let run = cts(&[
        "run",
        "--plugin",
        path.to_str().unwrap(),
        "--filter",
        "events.synchronize.*,events.query.*",
        "--timeout",
        "2",
    ]);
    let results = results(&run);
    assert_eq!(run.status, 1, "{}", run.stderr);
    let timed_out = with_result(&results, "timed_out");
    assert!(!timed_out.is_empty(), "nothing timed out: {results:#?}");
    assert!(with_result(&results, "crashed").is_empty(), "{results:#?}");
    // Every test ended, none hung the run: at most one time limit per test, plus set-up.
    assert!(
        run.elapsed < Duration::from_secs(2 * results.len() as u64 + 60),
        "the run took {:?}",
        run.elapsed
    );
}

#[test]
fn an_entry_that_panics_fails_with_the_panic_named() {
    let path = plugin("broken_panicking_fill");
    let run = cts(&["run", "--plugin", path.to_str().unwrap(), "--filter", "memory.fill.*"]);
    let results = results(&run);
    assert_eq!(run.status, 1, "{}", run.stderr);
    let failed = with_result(&results, "fail");
    assert!(!failed.is_empty(), "{results:#?}");
    assert!(
        failed.iter().any(|(_, _, detail)| detail.contains("panic")),
        "no failure names the panic: {failed:#?}"
    );
    assert!(
        with_result(&results, "crashed").is_empty(),
        "a caught panic is not a crash: {results:#?}"
    );
}

#[test]
fn a_segfault_is_a_crash_under_isolation_and_the_other_tests_still_run() {
    let path = plugin("broken_segfault");
    let run = cts(&[
        "run",
        "--plugin",
        path.to_str().unwrap(),
        "--filter",
        "memory.*",
        "--isolate",
    ]);
    let results = results(&run);
    assert_eq!(run.status, 1, "{}", run.stderr);
    let crashed = with_result(&results, "crashed");
    assert!(!crashed.is_empty(), "nothing crashed: {results:#?}");
    assert!(
        crashed.iter().all(|(_, _, detail)| detail.contains("SIGSEGV")),
        "{crashed:#?}"
    );
    assert!(
        !with_result(&results, "pass").is_empty(),
        "tests after the crash must still run: {results:#?}"
    );
}

#[test]
fn a_device_that_computes_f64_wrongly_loses_the_f64_profile_only() {
    let path = plugin("broken_f64_wrong");
    let run = cts(&["run", "--plugin", path.to_str().unwrap(), "--filter", "compute.*"]);
    let results = results(&run);
    assert_eq!(run.status, 1, "{}", run.stderr);
    let failed = with_result(&results, "fail");
    assert!(!failed.is_empty(), "no f64 test failed: {results:#?}");
    assert!(
        failed.iter().all(|(id, _, _)| id.contains("f64")),
        "only f64 tests may fail: {failed:#?}"
    );
    assert_eq!(profile_status(&run, "f64"), "not_achieved");
}

#[test]
fn an_event_query_that_says_complete_too_early_fails_the_query_tests() {
    let path = plugin("broken_event_query_lies");
    let run = cts(&["run", "--plugin", path.to_str().unwrap(), "--filter", "events.query.*"]);
    let results = results(&run);
    assert_eq!(run.status, 1, "{}", run.stderr);
    assert!(
        with_result(&results, "fail")
            .iter()
            .any(|(id, _, _)| id == "events.query.pending_to_complete"),
        "{results:#?}"
    );
}

#[test]
fn ignored_event_waits_fail_the_cross_stream_tests() {
    let path = plugin("broken_wait_ignored");
    let run = cts(&["run", "--plugin", path.to_str().unwrap(), "--filter", "events.wait.*"]);
    let results = results(&run);
    assert_eq!(run.status, 1, "{}", run.stderr);
    assert!(
        with_result(&results, "fail")
            .iter()
            .any(|(id, _, _)| id == "events.wait.orders_work_across_streams"),
        "{results:#?}"
    );
}

#[test]
fn a_certificate_carries_the_plugins_real_sha256() {
    let path = plugin("cpu");
    let dir = std::env::temp_dir().join(format!("xhal-cts-certificate-{}", std::process::id()));
    let run = cts(&[
        "run",
        "--plugin",
        path.to_str().unwrap(),
        "--filter",
        "plugin.*",
        "--report",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    let certificate: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("certificate.json")).unwrap()).unwrap();
    let expected: String = sha2::Sha256::digest(std::fs::read(&path).unwrap())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    assert_eq!(certificate["plugin"]["sha256"], expected.as_str());
    assert_eq!(certificate["plugin"]["name"], "cpu");
    assert_eq!(
        certificate["plugin"]["abi_version"],
        format!("{}.{}", xhal::abi::XHAL_ABI_MAJOR, xhal::abi::XHAL_ABI_MINOR)
    );
    assert_eq!(certificate["passed"], true);
    // A filtered run cannot certify the core profile.
    let core = &certificate["devices"][0]["profiles"][0];
    assert_eq!(core["name"], "core");
    assert_eq!(core["status"], "incomplete");
    assert!(dir.join("junit.xml").exists() && dir.join("report.json").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_traced_run_keeps_the_trace_of_each_failing_test_and_drops_the_others() {
    let path = plugin("broken_fill_length");
    let folder = std::env::temp_dir().join(format!("xhal-cts-traces-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&folder);
    let run = cts(&[
        "run",
        "--plugin",
        path.to_str().unwrap(),
        "--filter",
        "memory.fill.*",
        "--trace",
        folder.to_str().unwrap(),
    ]);
    assert_eq!(run.status, 1, "{}", run.stderr);
    let results = results(&run);
    let kept: Vec<String> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    let failed = with_result(&results, "fail");
    assert!(!failed.is_empty(), "{results:#?}");
    for (id, result, _) in &results {
        let trace = kept.iter().find(|name| name.ends_with(&format!("-0-{id}.json")));
        match result.as_str() {
            "fail" => {
                let trace = trace.unwrap_or_else(|| panic!("no trace kept for failing {id}: {kept:?}"));
                let text = std::fs::read_to_string(folder.join(trace)).unwrap();
                let events: Vec<Value> = serde_json::from_str(&text).unwrap();
                assert!(
                    events
                        .iter()
                        .any(|event| event["cat"] == "api" && event["name"] == "fill"),
                    "the trace of {id} holds its fills"
                );
            }
            _ => assert!(trace.is_none(), "the trace of {result} test {id} was kept"),
        }
    }
    let _ = std::fs::remove_dir_all(&folder);
}
