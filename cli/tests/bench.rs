//! `xhal bench`, as a user runs it (see `common` for the controlled environment), on the
//! built-in CPU device at small sizes with one timed run. Times are never asserted: only
//! that every row is there, checked, and reported.

mod common;

use common::*;
use serde_json::Value;

/// Small sizes, no warm-up, one timed run: the quickest full run.
const QUICK: [&str; 6] = ["--size", "small", "--warmup", "0", "--repeat", "1"];

fn bench(sandbox: &Sandbox, extra: &[&str], variables: &[(&str, &str)]) -> std::process::Output {
    let mut args = vec!["bench"];
    args.extend(QUICK);
    args.extend(extra);
    sandbox.run(&args, variables)
}

/// The cells of the table line that starts with `kernel` and names `device`.
fn table_row<'t>(text: &'t str, kernel: &str, device: &str) -> Vec<&'t str> {
    text.lines()
        .find(|line| line.starts_with(&format!("{kernel} ")) && line.split_whitespace().any(|cell| cell == device))
        .unwrap_or_else(|| panic!("no row for {kernel} on {device}:\n{text}"))
        .split_whitespace()
        .collect()
}

#[test]
fn small_run_on_the_cpu_checks_all_three_kernels_and_exits_0() {
    let sandbox = Sandbox::new("bench-small");
    let output = bench(&sandbox, &[], &[]);
    assert_exit(&output, 0);
    let text = stdout(&output);
    let header = text
        .lines()
        .find(|line| line.starts_with("KERNEL  SIZE  ") && line.contains("DEVICE"))
        .unwrap_or_else(|| panic!("no results header:\n{text}"));
    for column in ["NAME", "MEDIAN", "MIN", "VS NATIVE", "CHECK"] {
        assert!(header.contains(column), "{header}");
    }
    assert!(text.contains("native single-threaded Rust loops"), "{text}");
    for (kernel, size) in [("saxpy", "64K"), ("matmul", "64x64"), ("reduce", "64K")] {
        let row = table_row(&text, kernel, "cpu:0");
        assert_eq!(row[1], size, "{text}");
        assert_eq!(row.last(), Some(&"ok"), "{text}");
        assert!(row.iter().any(|cell| cell.ends_with('x')), "a ratio: {text}");
    }
    // Not a terminal: no progress line.
    assert!(output.stderr.is_empty(), "{}", stderr(&output));
}

#[test]
fn json_has_the_host_the_native_times_and_one_object_per_row() {
    let sandbox = Sandbox::new("bench-json");
    let output = bench(&sandbox, &["--json"], &[]);
    assert_exit(&output, 0);
    assert!(output.stderr.is_empty(), "{}", stderr(&output));
    let document = json(&output);
    assert_eq!(document["schema_version"], 1);
    assert_eq!(document["size"], "small");
    assert_eq!(document["repeat"], 1);
    let host = &document["host"];
    for field in ["os", "arch", "cpus", "xhal_version", "optimized"] {
        assert!(!host[field].is_null(), "host.{field}: {document:#}");
    }
    let native = document["native"].as_array().expect("`native` is an array");
    let kernels: Vec<&Value> = native.iter().map(|row| &row["kernel"]).collect();
    assert_eq!(kernels, ["saxpy", "matmul", "reduce"]);
    for row in native {
        assert!(row["median_ns"].as_u64().is_some_and(|ns| ns > 0), "{row}");
        assert!(row["min_ns"].as_u64().is_some(), "{row}");
    }
    let results = document["results"].as_array().expect("`results` is an array");
    assert_eq!(results.len(), 3, "{document:#}");
    for (row, kernel) in results.iter().zip(["saxpy", "matmul", "reduce"]) {
        assert_eq!(row["kernel"], kernel);
        assert_eq!(row["backend"], "cpu");
        assert_eq!(row["device"], "cpu:0");
        assert_eq!(row["device_name"], "xhal CPU reference device 0");
        assert_eq!(row["status"], "ok", "{row}");
        assert!(row["message"].is_null(), "{row}");
        assert!(row["size"].is_string(), "{row}");
        assert!(row["median_ns"].as_u64().is_some_and(|ns| ns > 0), "{row}");
        assert!(row["min_ns"].as_u64().is_some(), "{row}");
        assert!(
            row["ratio_vs_native"].as_f64().is_some_and(|ratio| ratio > 0.0),
            "{row}"
        );
    }
}

#[test]
fn kernel_chooses_the_kernels_and_an_unknown_one_exits_2_naming_the_choices() {
    let sandbox = Sandbox::new("bench-kernel");
    let output = bench(&sandbox, &["--kernel", "reduce", "--json"], &[]);
    assert_exit(&output, 0);
    let document = json(&output);
    let results = document["results"].as_array().expect("`results` is an array");
    assert_eq!(results.len(), 1, "{document:#}");
    assert_eq!(results[0]["kernel"], "reduce");

    let output = bench(&sandbox, &["--kernel", "fft"], &[]);
    assert_exit(&output, 2);
    assert!(output.stdout.is_empty(), "{}", stdout(&output));
    let message = stderr(&output);
    assert!(message.contains("fft"), "{message}");
    assert!(message.contains("saxpy, matmul, reduce"), "{message}");
}

#[test]
fn a_malformed_device_selector_exits_2_with_the_parse_error() {
    let sandbox = Sandbox::new("bench-bad-selector");
    let output = bench(&sandbox, &["--device", "cpu,,x"], &[]);
    assert_exit(&output, 2);
    assert!(output.stdout.is_empty(), "{}", stdout(&output));
    let message = stderr(&output);
    assert!(message.starts_with("error: "), "{message}");
    assert!(message.contains("--device \"cpu,,x\""), "{message}");
    assert!(message.contains("at column 5"), "{message}");
}

#[test]
fn a_selector_matching_nothing_exits_3_listing_what_is_present() {
    let sandbox = Sandbox::new("bench-no-device");
    let output = bench(&sandbox, &["--device", "cuda"], &[]);
    assert_exit(&output, 3);
    assert!(output.stdout.is_empty(), "{}", stdout(&output));
    let message = stderr(&output);
    assert!(message.starts_with("error: "), "{message}");
    assert!(message.contains("\"cuda\" matches no device"), "{message}");
    assert!(message.contains("present: cpu:0"), "{message}");
}

#[test]
fn xhal_device_does_not_narrow_or_break_the_run() {
    let sandbox = Sandbox::new("bench-xhal-device");
    let output = bench(&sandbox, &["--kernel", "saxpy", "--json"], &[("XHAL_DEVICE", "cuda,,")]);
    assert_exit(&output, 0);
    assert_eq!(json(&output)["results"][0]["device"], "cpu:0");
}

#[test]
fn the_device_selector_keeps_every_device_it_accepts() {
    let sandbox = Sandbox::new("bench-selector");
    let devices = [("XHAL_CPU_DEVICES", "3")];
    let output = bench(&sandbox, &["--kernel", "matmul", "--json"], &devices);
    assert_exit(&output, 0);
    let labels = |output: &std::process::Output| -> Vec<String> {
        json(output)["results"]
            .as_array()
            .expect("`results` is an array")
            .iter()
            .map(|row| row["device"].as_str().expect("a label").to_owned())
            .collect()
    };
    assert_eq!(labels(&output), ["cpu:0", "cpu:1", "cpu:2"]);
    let output = bench(
        &sandbox,
        &["--kernel", "matmul", "--json", "--device", "cpu,!cpu:1"],
        &devices,
    );
    assert_exit(&output, 0);
    assert_eq!(labels(&output), ["cpu:0", "cpu:2"]);
}

#[test]
fn a_failure_is_reported_in_its_row_the_run_goes_on_and_exits_1() {
    let sandbox = Sandbox::new("bench-failure");
    // Room for the 64×64 matrices (16 KiB each) but not for a 64K-element vector (256 KiB).
    let output = bench(&sandbox, &[], &[("XHAL_CPU_MEMORY", "100000")]);
    assert_exit(&output, 1);
    let text = stdout(&output);
    assert_eq!(table_row(&text, "matmul", "cpu:0").last(), Some(&"ok"), "{text}");
    for kernel in ["saxpy", "reduce"] {
        let line = text
            .lines()
            .find(|line| line.starts_with(kernel) && line.contains("cpu:0"))
            .unwrap_or_else(|| panic!("no row for {kernel}:\n{text}"));
        assert!(line.contains("error: uploading"), "{line}");
        assert!(line.contains("out of memory"), "{line}");
    }
    assert!(text.contains("2 of 3 measurements failed"), "{text}");

    let output = bench(&sandbox, &["--json"], &[("XHAL_CPU_MEMORY", "100000")]);
    assert_exit(&output, 1);
    let document = json(&output);
    let statuses: Vec<&Value> = document["results"]
        .as_array()
        .expect("`results` is an array")
        .iter()
        .map(|row| &row["status"])
        .collect();
    assert_eq!(statuses, ["error", "ok", "error"], "{document:#}");
    assert!(document["results"][0]["median_ns"].is_null());
    assert!(document["results"][0]["message"]
        .as_str()
        .is_some_and(|message| message.contains("out of memory")));
}

#[test]
fn a_cpu_plugin_shadowing_the_built_in_is_measured_once() {
    let plugin = built_cpu_plugin();
    let sandbox = Sandbox::new("bench-cpu-plugin");
    let installed = sandbox.plugins().join(plugin.file_name().expect("a file name"));
    #[cfg(unix)]
    std::os::unix::fs::symlink(&plugin, &installed).expect("link the CPU plugin");
    #[cfg(not(unix))]
    std::fs::copy(&plugin, &installed).expect("copy the CPU plugin");
    let output = bench(&sandbox, &["--kernel", "saxpy", "--json"], &[]);
    assert_exit(&output, 0);
    let document = json(&output);
    let results = document["results"].as_array().expect("`results` is an array");
    assert_eq!(results.len(), 1, "{document:#}");
    assert_eq!(results[0]["device"], "cpu:0");
    assert_eq!(results[0]["status"], "ok");
}

#[test]
fn cpu_modes_measures_the_cpu_interpreted_and_compiled() {
    let sandbox = Sandbox::new("bench-cpu-modes");
    let output = bench(&sandbox, &["--cpu-modes", "--kernel", "reduce"], &[]);
    assert_exit(&output, 0);
    let text = stdout(&output);
    for device in ["cpu:0/interpret", "cpu:0/compile"] {
        let row = table_row(&text, "reduce", device);
        assert_eq!(row.last(), Some(&"ok"), "{text}");
    }
    assert!(text.contains("LOAD"), "{text}");
}

#[test]
fn compile_mode_without_a_c_compiler_fails_each_kernel_saying_why_and_auto_interprets() {
    let sandbox = Sandbox::new("bench-no-cc");
    let missing = [("CC", "/nonexistent/cc"), ("XHAL_CPU_MODE", "compile")];
    let output = bench(&sandbox, &["--kernel", "saxpy"], &missing);
    assert_exit(&output, 1);
    let text = stdout(&output);
    let row = table_row(&text, "saxpy", "cpu:0").join(" ");
    assert!(
        row.contains("XHAL_CPU_MODE=compile") && row.contains("/nonexistent/cc"),
        "{text}"
    );
    let output = bench(
        &sandbox,
        &["--kernel", "saxpy"],
        &[("CC", "/nonexistent/cc"), ("XHAL_CPU_MODE", "auto")],
    );
    assert_exit(&output, 0);
    assert_eq!(table_row(&stdout(&output), "saxpy", "cpu:0").last(), Some(&"ok"));
}
