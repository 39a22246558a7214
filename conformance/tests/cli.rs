//! `xhal-cts` as a user meets it: listing, exit statuses, and the error for each misuse.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn cts(arguments: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xhal-cts"))
        .args(arguments)
        .output()
        .expect("xhal-cts runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

fn cpu_plugin() -> PathBuf {
    let path = Path::new(env!("CARGO_BIN_EXE_xhal-cts")).with_file_name("libxhal_cpu.so");
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace` first",
        path.display()
    );
    path
}

#[test]
fn list_json_names_every_test_once_with_its_profile() {
    let output = cts(&["list", "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let tests = document["tests"].as_array().unwrap();
    assert!(tests.len() >= 120, "only {} tests", tests.len());
    let mut ids: Vec<&str> = tests.iter().map(|test| test["id"].as_str().unwrap()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), tests.len(), "duplicate ids");
    assert!(tests
        .iter()
        .all(|test| test["profile"].is_string() && test["description"].is_string()));
}

#[test]
fn list_filters_by_glob() {
    let output = cts(&["list", "--filter", "plugin.abi.*"]);
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.lines().filter(|line| line.starts_with("plugin.abi.")).count() >= 3,
        "{text}"
    );
    assert!(!text.contains("memory."), "{text}");
}

#[test]
fn a_filter_matching_nothing_is_refused() {
    let output = cts(&["run", "--backend", "cpu", "--filter", "nothing.like.this"]);
    assert_eq!(output.status.code(), Some(3));
    assert!(stderr(&output).contains("matches no test"), "{}", stderr(&output));
}

#[test]
fn a_missing_plugin_file_is_a_setup_error_naming_the_file() {
    let output = cts(&["run", "--plugin", "/nonexistent/libxhal_ghost.so"]);
    assert_eq!(output.status.code(), Some(3));
    assert!(
        stderr(&output).contains("/nonexistent/libxhal_ghost.so"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_file_that_is_not_a_plugin_is_a_setup_error_with_the_reason() {
    let dir = std::env::temp_dir().join(format!("xhal-cts-junk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let junk = dir.join("libxhal_junk.so");
    std::fs::write(&junk, "not a library").unwrap();
    let output = cts(&["run", "--plugin", junk.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(3));
    assert!(
        stderr(&output).contains("not a loadable shared library"),
        "{}",
        stderr(&output)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unknown_backend_is_a_setup_error_listing_what_is_present() {
    let output = cts(&["run", "--backend", "warp_drive"]);
    assert_eq!(output.status.code(), Some(3));
    let text = stderr(&output);
    assert!(text.contains("warp_drive") && text.contains("cpu"), "{text}");
}

#[test]
fn usage_errors_exit_with_status_2() {
    for arguments in [
        vec!["run"],
        vec!["run", "--backend", "cpu", "--timeout", "0"],
        vec!["run", "--backend", "cpu", "--jobs", "0"],
        vec!["run", "--backend", "cpu", "--device", "cpu:"],
        vec!["run", "--backend", "cpu", "--no-such-flag"],
    ] {
        let output = cts(&arguments);
        assert_eq!(output.status.code(), Some(2), "{arguments:?}: {}", stderr(&output));
        assert!(!stderr(&output).trim().is_empty(), "{arguments:?} gave no message");
    }
}

#[test]
fn a_device_selector_matching_no_device_is_refused_listing_the_devices() {
    let plugin = cpu_plugin();
    let output = cts(&[
        "run",
        "--plugin",
        plugin.to_str().unwrap(),
        "--device",
        "cpu:7",
        "--filter",
        "plugin.*",
    ]);
    assert_eq!(output.status.code(), Some(3));
    let text = stderr(&output);
    assert!(text.contains("cpu:7") && text.contains("cpu:0"), "{text}");
}

#[test]
fn bad_known_failure_files_are_refused_with_the_reason() {
    let dir = std::env::temp_dir().join(format!("xhal-cts-known-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let stale = dir.join("stale.toml");
    std::fs::write(
        &stale,
        "[[known_failure]]\ntest = \"memory.no_such_test\"\nbackend = \"cpu\"\nreason = \"x\"\n",
    )
    .unwrap();
    let output = cts(&["run", "--backend", "cpu", "--known-failures", stale.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(3));
    assert!(stderr(&output).contains("matches no test"), "{}", stderr(&output));
    let missing = dir.join("missing.toml");
    let output = cts(&["run", "--backend", "cpu", "--known-failures", missing.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(3));
    assert!(stderr(&output).contains("missing.toml"), "{}", stderr(&output));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_declared_failure_is_reported_as_known_and_a_pass_as_unexpected_when_run() {
    let dir = std::env::temp_dir().join(format!("xhal-cts-declared-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let declared = dir.join("known.toml");
    std::fs::write(
        &declared,
        "[[known_failure]]\ntest = \"plugin.metadata.version\"\nbackend = \"cpu\"\nreason = \"declared by the test\"\n",
    )
    .unwrap();
    let plugin = cpu_plugin();
    let base = [
        "run",
        "--plugin",
        plugin.to_str().unwrap(),
        "--filter",
        "plugin.metadata.*",
        "--no-performance",
        "--json",
        "--known-failures",
        declared.to_str().unwrap(),
    ];
    let outcome_of = |output: &Output| -> String {
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        report["devices"][0]["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|record| record["id"] == "plugin.metadata.version")
            .map(|record| record["result"].as_str().unwrap().to_string())
            .unwrap()
    };
    let output = cts(&base);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(outcome_of(&output), "known_failure");
    let mut run_anyway = base.to_vec();
    run_anyway.push("--run-known-failures");
    let output = cts(&run_anyway);
    assert_eq!(
        output.status.code(),
        Some(0),
        "an unexpected pass is not a failure: {}",
        stderr(&output)
    );
    assert_eq!(outcome_of(&output), "unexpected_pass");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn parallel_workers_report_every_test_once_in_catalogue_order() {
    let plugin = cpu_plugin();
    let output = cts(&[
        "run",
        "--plugin",
        plugin.to_str().unwrap(),
        "--filter",
        "kernels.grid.*,kernels.arguments.*",
        "--jobs",
        "3",
        "--no-performance",
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let ids: Vec<&str> = report["devices"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|record| record["id"].as_str().unwrap())
        .collect();
    let listed = cts(&["list", "--json", "--filter", "kernels.grid.*,kernels.arguments.*"]);
    let catalogue: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let expected: Vec<&str> = catalogue["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|test| test["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, expected);
    assert_eq!(report["options"]["jobs"], 3);
}

#[test]
fn a_trace_folder_that_cannot_be_made_is_a_setup_error_naming_it() {
    let plugin = cpu_plugin();
    let output = cts(&[
        "run",
        "--plugin",
        plugin.to_str().unwrap(),
        "--filter",
        "plugin.metadata.*",
        "--trace",
        "/proc/no-such-folder/traces",
    ]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("--trace /proc/no-such-folder/traces: cannot create the folder"),
        "{}",
        stderr(&output)
    );
}
