//! `--trace` and `xhal trace summary`, as a user runs them: a traced run is summarised, drawn,
//! and still read after the program was killed halfway.

mod common;

use common::*;
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const DOUBLE: &str = r#"
@group(0) @binding(0) var<storage, read_write> values: array<f32>;

@compute @workgroup_size(64)
fn double(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&values) {
        values[id.x] = 2.0 * values[id.x];
    }
}
"#;

fn summary_json(sandbox: &Sandbox, trace: &str) -> Value {
    let output = sandbox.run(&["trace", "summary", trace, "--json"], &[]);
    assert_exit(&output, 0);
    json(&output)
}

#[test]
fn a_traced_run_is_summarised_and_drawn() {
    let sandbox = Sandbox::new("trace-run");
    sandbox.write("double.wgsl", DOUBLE);
    let output = sandbox.run(
        &[
            "run",
            "double.wgsl",
            "-b",
            "range:0..1024",
            "-w",
            "16",
            "--trace",
            "run.json",
        ],
        &[],
    );
    assert_exit(&output, 0);
    assert!(stderr(&output).is_empty(), "nothing on stderr: {}", stderr(&output));

    let summary = summary_json(&sandbox, "run.json");
    assert_eq!(summary["complete"], true);
    assert_eq!(summary["dropped_records"], 0);
    let kernels = summary["kernels"].as_array().unwrap();
    assert_eq!(kernels.len(), 1, "{summary}");
    assert_eq!(kernels[0]["name"], "double");
    assert_eq!(kernels[0]["count"], 1);
    assert!(summary["streams"][0]["track"]
        .as_str()
        .unwrap()
        .starts_with("device cpu:0"));
    assert!(summary["memory"][0]["peak_allocated"].as_u64().unwrap() >= 4096);

    let output = sandbox.run(&["trace", "summary", "run.json", "--svg", "run.svg"], &[]);
    assert_exit(&output, 0);
    let text = stdout(&output);
    assert!(
        text.contains("kernels by device time") && text.contains("double"),
        "{text}"
    );
    let picture = std::fs::read_to_string(sandbox.root().join("run.svg")).unwrap();
    assert!(picture.starts_with("<svg") && picture.trim_end().ends_with("</svg>"));
    assert!(picture.contains("device cpu:0"), "the picture has the stream's lane");
}

/// A trace of a plugin built for ABI 1.0 (the zoo plugin of hal/core/tests/abi_evolution.rs,
/// as its 1.0 table test traced it): without the 1.3 clock entries, its device spans are
/// timed from elapsed times and marked so, and the summary reads them like any other.
#[test]
fn a_trace_of_a_plugin_of_an_older_abi_minor_is_summarised() {
    let sandbox = Sandbox::new("trace-abi-1.0");
    sandbox.write("abi-1.0.json", include_str!("fixtures/trace-abi-1.0.json"));
    let summary = summary_json(&sandbox, "abi-1.0.json");
    assert_eq!(summary["complete"], true, "{summary}");
    let stream = &summary["streams"][0];
    assert!(
        stream["track"].as_str().unwrap().starts_with("device zoo_evolution:0"),
        "{summary}"
    );
    assert_eq!(stream["operations"], 4, "fill, launch, copy and record: {summary}");
    assert_eq!(stream["device_elapsed"], 4, "{summary}");
    assert_eq!(stream["host_observed"], 0, "{summary}");
    assert_eq!(summary["kernels"][0]["name"], "add_scalar", "{summary}");
    let copies: Vec<&str> = summary["copies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|copy| copy["name"].as_str().unwrap())
        .collect();
    assert_eq!(copies, ["copy", "fill"], "{summary}");

    let output = sandbox.run(&["trace", "summary", "abi-1.0.json"], &[]);
    assert_exit(&output, 0);
    assert!(stdout(&output).contains("4 device-elapsed"), "{}", stdout(&output));
}

#[test]
fn a_trace_of_a_killed_program_is_still_read() {
    let sandbox = Sandbox::new("trace-killed");
    let trace = sandbox.root().join("killed.json");
    // A long benchmark, killed with SIGKILL once the device has run a few kernels. The
    // native loop runs its repeats first, so they are enough to outlast the poll below but
    // few enough that a debug build's loop takes seconds, not minutes.
    let mut child = Command::new(xhal_binary())
        .args([
            "bench", "--size", "small", "--kernel", "saxpy", "--warmup", "0", "--repeat", "20000", "--device", "cpu",
        ])
        .arg("--trace")
        .arg(&trace)
        .current_dir(sandbox.root())
        .env_clear()
        .env("HOME", sandbox.home())
        .env("XHAL_PLUGIN_PATH", sandbox.plugins())
        .env("XHAL_CPU_MEMORY", (256u64 << 20).to_string())
        // Compiled where a C compiler is on PATH: interpreted, a debug build takes seconds a
        // kernel, and this test only needs a few to have run.
        .env("XHAL_CPU_MODE", "auto")
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let written = std::fs::read_to_string(&trace).unwrap_or_default();
        if written.matches(r#""cat":"kernel""#).count() >= 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the traced benchmark wrote no kernels in 120 s"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the benchmark ended before it was killed"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();

    let summary = summary_json(&sandbox, "killed.json");
    assert_eq!(summary["complete"], false, "a killed program's trace has no end record");
    assert!(!summary["kernels"].as_array().unwrap().is_empty(), "{summary}");
    let output = sandbox.run(&["trace", "summary", "killed.json"], &[]);
    assert_exit(&output, 0);
    assert!(stdout(&output).contains("cut short"), "{}", stdout(&output));
}

#[test]
fn misuse_is_a_clear_error() {
    let sandbox = Sandbox::new("trace-misuse");
    sandbox.write("not-a-trace.txt", "hello");
    let output = sandbox.run(&["trace", "summary", "not-a-trace.txt"], &[]);
    assert_exit(&output, 1);
    assert!(stderr(&output).contains("is not a trace"), "{}", stderr(&output));
    let output = sandbox.run(&["trace", "summary", "missing.json"], &[]);
    assert_exit(&output, 1);
    assert!(
        stderr(&output).contains("cannot read the trace missing.json"),
        "{}",
        stderr(&output)
    );
    sandbox.write("t.json", "[\n]\n");
    let output = sandbox.run(&["trace", "summary", "t.json", "--gap-us", "0"], &[]);
    assert_exit(&output, 2);
    assert!(stderr(&output).contains("--gap-us 0"), "{}", stderr(&output));
    sandbox.write("double.wgsl", DOUBLE);
    let output = sandbox.run(
        &[
            "run",
            "double.wgsl",
            "-b",
            "zeros:64",
            "-w",
            "1",
            "--trace",
            "no-such-folder/t.json",
        ],
        &[],
    );
    assert_exit(&output, 1);
    assert!(
        stderr(&output).contains("cannot create the trace file"),
        "{}",
        stderr(&output)
    );
    let output = sandbox.run(
        &["run", "double.wgsl", "-b", "zeros:64", "-w", "1"],
        &[("XHAL_TRACE_MAX_MB", "lots")],
    );
    // XHAL_TRACE_MAX_MB only matters when a trace is recorded.
    assert_exit(&output, 0);
}

#[test]
fn one_process_of_an_appended_trace_can_be_summarised_alone() {
    let sandbox = Sandbox::new("trace-process");
    sandbox.write("double.wgsl", DOUBLE);
    let run = ["run", "double.wgsl", "-b", "range:0..256", "-w", "4"];
    // Two processes, one file: the second adds to the first's finished trace.
    for _ in 0..2 {
        let output = sandbox.run(&run, &[("XHAL_TRACE", "two.json"), ("XHAL_TRACE_APPEND", "1")]);
        assert_exit(&output, 0);
    }
    let both = summary_json(&sandbox, "two.json");
    assert_eq!(both["complete"], true, "both processes ended their traces");
    assert_eq!(both["kernels"][0]["count"], 2, "{both}");
    let text = std::fs::read_to_string(sandbox.root().join("two.json")).unwrap();
    let events: Vec<Value> = serde_json::from_str(&text).unwrap();
    let hosts: Vec<u64> = events
        .iter()
        .filter(|event| event["name"] == "process_name" && event["args"]["name"].as_str().unwrap().starts_with("host"))
        .map(|event| event["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(hosts.len(), 2);
    let first = hosts[0].to_string();
    let output = sandbox.run(&["trace", "summary", "two.json", "--json", "--process", &first], &[]);
    assert_exit(&output, 0);
    assert_eq!(json(&output)["kernels"][0]["count"], 1);
    let output = sandbox.run(&["trace", "summary", "two.json", "--process", "1"], &[]);
    assert_exit(&output, 1);
    assert!(
        stderr(&output).contains("the trace has no process 1; its processes are"),
        "{}",
        stderr(&output)
    );
}
