//! `xhal run`, as a user runs it (see `common` for the controlled environment): kernels are
//! written into the sandbox and run on the built-in CPU device.

mod common;

use common::*;
use serde_json::{json, Value};

const SAXPY: &str = "\
struct Params {
    a: f32,
    n: u32,
}

var<immediate> params: Params;

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn saxpy(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < params.n {
        y[id.x] = params.a * x[id.x] + y[id.x];
    }
}
";

/// A sandbox holding `saxpy.wgsl`.
fn saxpy_sandbox(name: &str) -> Sandbox {
    let sandbox = Sandbox::new(name);
    sandbox.write("saxpy.wgsl", SAXPY);
    sandbox
}

/// The values of buffer `name` in a run's JSON document.
fn buffer_values<'v>(document: &'v Value, name: &str) -> &'v Value {
    let buffers = document["buffers"].as_array().expect("`buffers` is an array");
    let buffer = buffers
        .iter()
        .find(|buffer| buffer["name"] == name)
        .unwrap_or_else(|| panic!("no buffer `{name}`: {document:#}"));
    &buffer["values"]
}

/// Asserts exit 1 with nothing on stdout and an `error: ` on stderr that contains every one
/// of `parts`; returns the message.
fn assert_error(output: &std::process::Output, parts: &[&str]) -> String {
    assert_exit(output, 1);
    assert!(output.stdout.is_empty(), "{}", stdout(output));
    let message = stderr(output);
    assert!(message.starts_with("error: "), "{message}");
    for part in parts {
        assert!(message.contains(part), "`{part}` is not in:\n{message}");
    }
    message
}

#[test]
fn saxpy_json_has_the_device_the_launch_the_time_and_every_value() {
    let sandbox = saxpy_sandbox("run-saxpy-json");
    let output = sandbox.run(
        &[
            "run",
            "saxpy.wgsl",
            "--buffer",
            "range:0..64",
            "--buffer",
            "fill:1:64",
            "--scalar",
            "2",
            "--scalar",
            "64",
            "--invocations",
            "64",
            "--json",
        ],
        &[],
    );
    assert_exit(&output, 0);
    let document = json(&output);
    assert_eq!(document["schema_version"], 1);
    assert_eq!(document["device"]["label"], "cpu:0");
    assert_eq!(document["device"]["backend"], "cpu");
    assert!(document["device"]["name"].is_string());
    assert!(document["why"]
        .as_str()
        .is_some_and(|why| why.starts_with("chose cpu:0")));
    assert_eq!(
        document["kernel"],
        json!({"file": "saxpy.wgsl", "entry": "saxpy", "workgroups": [1, 1, 1],
               "workgroup_size": [64, 1, 1], "invocations": 64})
    );
    assert!(
        document["time"]["wall_ms"].as_f64().is_some_and(|ms| ms >= 0.0),
        "{document:#}"
    );
    let device_ms = &document["time"]["device_ms"];
    assert!(device_ms.is_null() || device_ms.as_f64().is_some_and(|ms| ms >= 0.0));
    assert_eq!(
        document["scalars"],
        json!([{"name": "a", "type": "f32", "values": [2.0]}, {"name": "n", "type": "u32", "values": [64]}])
    );

    let x: Vec<f64> = (0..64).map(f64::from).collect();
    let y: Vec<f64> = (0..64).map(|i| 2.0 * f64::from(i) + 1.0).collect();
    assert_eq!(buffer_values(&document, "x"), &json!(x));
    assert_eq!(buffer_values(&document, "y"), &json!(y));
    let y_buffer = &document["buffers"][1];
    assert_eq!(y_buffer["binding"], 1);
    assert_eq!(y_buffer["type"], "array<f32>");
    assert_eq!(y_buffer["element"], "f32");
    assert_eq!(y_buffer["access"], "read_write");
    assert_eq!(y_buffer["length"], 64);
    assert_eq!(y_buffer["bytes"], 256);
    assert_eq!(document["buffers"][0]["access"], "read");
}

#[test]
fn human_output_shows_each_buffer_cut_to_its_ends() {
    let sandbox = saxpy_sandbox("run-saxpy-text");
    let arguments = [
        "run",
        "saxpy.wgsl",
        "-b",
        "range:0..64",
        "-b",
        "fill:1:64",
        "-s",
        "2",
        "-s",
        "64",
        "-w",
        "1",
    ];
    let output = sandbox.run(&arguments, &[]);
    assert_exit(&output, 0);
    let text = stdout(&output);
    assert!(text.starts_with("device   cpu:0  "), "{text}");
    assert!(
        text.contains("kernel   saxpy from saxpy.wgsl, 1 x 1 x 1 workgroups of 64 x 1 x 1"),
        "{text}"
    );
    assert!(text.contains("scalars  a = 2, n = 64"), "{text}");
    assert!(
        text.contains(
            "buffer 1  y: array<f32>, read_write, 64 elements (256 bytes)\n  [1, 3, 5, 7, 9, 11, 13, 15, ..., 113,"
        ),
        "{text}"
    );

    let mut full = arguments.to_vec();
    full.push("--full");
    let text = stdout(&sandbox.run(&full, &[]));
    assert!(!text.contains("..."), "{text}");
    assert!(text.contains(" 63, 65, 67,"), "{text}");
}

#[test]
fn buffers_and_scalars_can_be_named_in_any_order() {
    let sandbox = saxpy_sandbox("run-names");
    let output = sandbox.run(
        &[
            "run",
            "saxpy.wgsl",
            "--entry",
            "saxpy",
            "-b",
            "y=fill:1:8",
            "-b",
            "x=[0, 1, 2, 3, 4, 5, 6, 7]",
            "-s",
            "n=8",
            "-s",
            "a=0.5",
            "-w",
            "1",
            "--json",
        ],
        &[],
    );
    assert_exit(&output, 0);
    let document = json(&output);
    assert_eq!(
        buffer_values(&document, "y"),
        &json!([1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5])
    );

    // Unnamed arguments fill the places the named ones leave, in order.
    let output = sandbox.run(
        &[
            "run",
            "saxpy.wgsl",
            "-b",
            "y=zeros:2",
            "-b",
            "5,6",
            "-s",
            "n=2",
            "-s",
            "1",
            "-w",
            "1",
            "--json",
        ],
        &[],
    );
    assert_exit(&output, 0);
    assert_eq!(buffer_values(&json(&output), "y"), &json!([5.0, 6.0]));
}

#[test]
fn random_values_are_the_same_for_the_same_seed() {
    let sandbox = saxpy_sandbox("run-random");
    let run = |x: &str, y: &str| {
        let output = sandbox.run(
            &[
                "run",
                "saxpy.wgsl",
                "-b",
                x,
                "-b",
                y,
                "-s",
                "0",
                "-s",
                "16",
                "-w",
                "1",
                "--json",
            ],
            &[],
        );
        assert_exit(&output, 0);
        let document = json(&output);
        (
            buffer_values(&document, "x").clone(),
            buffer_values(&document, "y").clone(),
        )
    };
    let first = run("random:16:42:-1..1", "random:16");
    assert_eq!(first, run("random:16:42:-1..1", "random:16"), "same seeds, same values");
    let (x, y) = &first;
    let x: Vec<f64> = x.as_array().expect("values").iter().filter_map(Value::as_f64).collect();
    assert_eq!(x.len(), 16);
    assert!(x.iter().all(|v| (-1.0..1.0).contains(v)), "{x:?}");
    // Without a seed, y uses its binding number, so it differs from x with seed 1 or 42.
    assert_ne!(&first.0, y);
    assert_ne!(
        run("random:16:43:-1..1", "random:16").0,
        first.0,
        "another seed, other values"
    );
    assert_eq!(
        run("random:16:1", "zeros:16").0,
        *y,
        "the default seed is the binding number"
    );
}

#[test]
fn file_input_and_output_dir_round_trip() {
    let sandbox = saxpy_sandbox("run-files");
    let x: Vec<u8> = [1.5f32, -2.0, 4.0, 0.25].iter().flat_map(|v| v.to_le_bytes()).collect();
    sandbox.write("x.bin", &x);
    let output = sandbox.run(
        &[
            "run",
            "saxpy.wgsl",
            "-b",
            "file:x.bin",
            "-b",
            "zeros:4",
            "-s",
            "2",
            "-s",
            "4",
            "-w",
            "1",
            "--output-dir",
            "out",
            "--json",
        ],
        &[],
    );
    assert_exit(&output, 0);
    let document = json(&output);
    assert_eq!(buffer_values(&document, "x"), &json!([1.5, -2.0, 4.0, 0.25]));
    assert_eq!(buffer_values(&document, "y"), &json!([3.0, -4.0, 8.0, 0.5]));
    let written = std::fs::read(sandbox.root().join("out/y.bin")).expect("out/y.bin");
    let expected: Vec<u8> = [3.0f32, -4.0, 8.0, 0.5].iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(written, expected);
    assert_eq!(std::fs::read(sandbox.root().join("out/x.bin")).expect("out/x.bin"), x);

    // A file that is not whole elements is refused, naming the binding and the sizes.
    sandbox.write("odd.bin", [0u8; 6]);
    let output = sandbox.run(
        &[
            "run",
            "saxpy.wgsl",
            "-b",
            "file:odd.bin",
            "-b",
            "zeros:1",
            "-s",
            "1",
            "-s",
            "1",
            "-w",
            "1",
        ],
        &[],
    );
    assert_error(
        &output,
        &["buffer `x` (binding 0, array<f32>)", "odd.bin has 6 bytes", "4 bytes"],
    );
}

#[test]
fn vectors_structs_and_fixed_arrays_are_flattened_in_memory_order() {
    let sandbox = Sandbox::new("run-layouts");
    sandbox.write(
        "layouts.wgsl",
        "\
enable f16;
struct Particle { position: vec3<f32>, mass: f32, id: u32 }
struct Counted { count: atomic<u32>, items: array<i32> }
struct Params { scale: f32, offset: vec3<f32> }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read_write> particles: array<Particle>;
@group(0) @binding(1) var<storage, read_write> counted: Counted;
@group(0) @binding(2) var<storage, read_write> table: array<vec3<f32>, 2>;
@group(0) @binding(3) var<storage, read_write> halves: array<f16>;

@compute @workgroup_size(4)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i < arrayLength(&particles) {
        particles[i].position = particles[i].position * params.scale + params.offset;
        particles[i].id += 100u;
    }
    if i < arrayLength(&counted.items) {
        atomicAdd(&counted.count, 1u);
        counted.items[i] = -counted.items[i];
    }
    if i < 2u { table[i] += vec3<f32>(f32(i)); }
    if i < arrayLength(&halves) { halves[i] = halves[i] * 2.0h; }
}
",
    );
    let output = sandbox.run(
        &[
            "run",
            "layouts.wgsl",
            "-b",
            "1,2,3,10,7, 4,5,6,20,8",
            "-b",
            "0, 5,6,7",
            "-b",
            "range:0..6",
            "-b",
            "0.1,65504,-inf",
            "-s",
            "2",
            "-s",
            "1,1,1",
            "-w",
            "1",
            "--json",
        ],
        &[],
    );
    assert_exit(&output, 0);
    let document = json(&output);
    assert_eq!(
        buffer_values(&document, "particles"),
        &json!([3.0, 5.0, 7.0, 10.0, 107, 9.0, 11.0, 13.0, 20.0, 108])
    );
    let particles = &document["buffers"][0];
    assert_eq!(particles["length"], 2);
    assert_eq!(particles["values_per_element"], 5);
    assert_eq!(particles["value_types"], json!(["f32", "f32", "f32", "f32", "u32"]));
    assert_eq!(particles["bytes"], 64, "a Particle takes 32 bytes");
    assert_eq!(buffer_values(&document, "counted"), &json!([3, -5, -6, -7]));
    assert_eq!(document["buffers"][1]["header_values"], 1);
    assert_eq!(document["buffers"][1]["value_types"], json!(["u32", "i32"]));
    assert_eq!(
        buffer_values(&document, "table"),
        &json!([0.0, 1.0, 2.0, 4.0, 5.0, 6.0])
    );
    // f16 values print as the shortest decimal that is the same f16; overflow is infinity.
    assert_eq!(buffer_values(&document, "halves"), &json!([0.2, "inf", "-inf"]));

    let output = sandbox.run(
        &[
            "run",
            "layouts.wgsl",
            "-b",
            "1,2,3,10",
            "-b",
            "0,1",
            "-b",
            "zeros:6",
            "-b",
            "1",
            "-s",
            "1",
            "-s",
            "0,0,0",
            "-w",
            "1",
        ],
        &[],
    );
    assert_error(
        &output,
        &[
            "buffer `particles` (binding 0, array<Particle>)",
            "5 values per element (Particle)",
            "gives 4",
        ],
    );
}

#[test]
fn bad_wgsl_exits_1_with_file_line_and_column() {
    let sandbox = Sandbox::new("run-bad-wgsl");
    sandbox.write(
        "bad.wgsl",
        "@group(0) @binding(0) var<storage, read_write> out: array<f32>;\n\
         @compute @workgroup_size(1)\n\
         fn main() {\n    out[0] = undefined_name + 1.0;\n}\n",
    );
    let output = sandbox.run(&["run", "bad.wgsl", "-b", "zeros:1", "-w", "1"], &[]);
    let message = assert_error(
        &output,
        &[
            "cannot load bad.wgsl (parse error)\nbad.wgsl:4:14: error:",
            "undefined_name",
        ],
    );
    assert!(
        message.contains("\n4 |     out[0] = undefined_name + 1.0;\n"),
        "{message}"
    );
    assert!(message.contains("^^^^^^^^^^^^^^"), "{message}");

    let output = sandbox.run(&["run", "missing.wgsl", "-w", "1"], &[]);
    assert_error(&output, &["reading missing.wgsl"]);
}

#[test]
fn a_missing_entry_point_exits_1_listing_the_entry_points() {
    let sandbox = Sandbox::new("run-entry");
    sandbox.write(
        "two.wgsl",
        "@group(0) @binding(0) var<storage, read_write> data: array<u32, 4>;\n\
         @compute @workgroup_size(1) fn first() { data[0] = 1u; }\n\
         @compute @workgroup_size(1) fn second() { data[1] = 2u; }\n",
    );
    let output = sandbox.run(
        &["run", "two.wgsl", "--entry", "third", "-b", "zeros:4", "-w", "1"],
        &[],
    );
    assert_error(
        &output,
        &[
            "two.wgsl has no compute entry point `third`",
            "entry points are: first, second",
        ],
    );
    let output = sandbox.run(&["run", "two.wgsl", "-b", "zeros:4", "-w", "1"], &[]);
    assert_error(&output, &["2 compute entry points (first, second)", "--entry NAME"]);
    // `-` reads the kernel from stdin, here empty.
    let output = sandbox.run(&["run", "-", "-w", "1"], &[]);
    assert_error(&output, &["<stdin> has no compute entry point"]);
    let output = sandbox.run(
        &["run", "two.wgsl", "-e", "second", "-b", "zeros:4", "-w", "1", "--json"],
        &[],
    );
    assert_exit(&output, 0);
    assert_eq!(buffer_values(&json(&output), "data"), &json!([0, 2, 0, 0]));
}

#[test]
fn arguments_that_do_not_fit_the_kernel_exit_1_naming_the_argument() {
    let sandbox = saxpy_sandbox("run-arguments");
    let run = |arguments: &[&str]| {
        let mut all = vec!["run", "saxpy.wgsl", "-w", "1"];
        all.extend_from_slice(arguments);
        sandbox.run(&all, &[])
    };
    assert_error(
        &run(&["-b", "1,2", "-s", "1", "-s", "2"]),
        &[
            "kernel `saxpy` takes 2 buffers (x: array<f32>, y: array<f32>)",
            "1 --buffer argument was given",
            "missing `y` (binding 1, array<f32>)",
        ],
    );
    assert_error(
        &run(&["-b", "1", "-b", "1", "-b", "1", "-s", "1", "-s", "2"]),
        &["takes 2 buffers", "3 --buffer arguments were given"],
    );
    assert_error(
        &run(&["-b", "1", "-b", "1", "-s", "1"]),
        &[
            "takes 2 scalars, the members of `params: Params` (a: f32, n: u32)",
            "missing `n: u32`",
        ],
    );
    assert_error(
        &run(&["-b", "1", "-b", "1", "-s", "1", "-s", "2", "-s", "3"]),
        &["takes 2 scalars", "3 --scalar arguments were given"],
    );
    assert_error(
        &run(&["-b", "1", "-b", "1", "-s", "1", "-s", "-2"]),
        &["scalar `n` (u32, member of `params: Params`)", "-2 is not a u32"],
    );
    assert_error(
        &run(&["-b", "1", "-b", "1", "-s", "one", "-s", "2"]),
        &["scalar `a` (f32, member of `params: Params`)", "`one` is not an f32"],
    );
    assert_error(
        &run(&["-b", "z=1", "-b", "1", "-s", "1", "-s", "2"]),
        &["--buffer z=1: the kernel has no buffer `z`; its buffers are: x, y"],
    );
    assert_error(
        &run(&["-b", "1", "-b", "1", "-s", "m=1", "-s", "2"]),
        &["the kernel has no scalar `m`; its scalars are: a, n"],
    );
    assert_error(
        &run(&["-b", "1,2,nope", "-b", "1", "-s", "1", "-s", "2"]),
        &["buffer `x` (binding 0, array<f32>)", "value 3", "`nope` is not an f32"],
    );
    assert_error(
        &run(&["-b", "rnage:0..4", "-b", "1", "-s", "1", "-s", "2"]),
        &["buffer `x` (binding 0, array<f32>): unknown form `rnage:`"],
    );
    assert_error(
        &run(&["-b", "zeros:0", "-b", "1", "-s", "1", "-s", "2"]),
        &["buffer `x` (binding 0, array<f32>): it needs at least one element"],
    );

    sandbox.write(
        "fixed.wgsl",
        "@group(0) @binding(0) var<storage, read_write> table: array<u32, 16>;\n\
         @compute @workgroup_size(1) fn main() { table[0] = 1u; }\n",
    );
    let output = sandbox.run(&["run", "fixed.wgsl", "-b", "range:0..10", "-w", "1"], &[]);
    assert_error(
        &output,
        &[
            "buffer `table` (binding 0, array<u32, 16>)",
            "fixed size",
            "exactly 16 values (64 bytes)",
            "`range:0..10` gives 10",
        ],
    );
}

#[test]
fn an_out_of_bounds_kernel_exits_1_with_the_kernel_fault() {
    let sandbox = Sandbox::new("run-fault");
    sandbox.write(
        "oob.wgsl",
        "@group(0) @binding(0) var<storage, read_write> data: array<u32>;\n\
         @compute @workgroup_size(1)\n\
         fn main() {\n    data[1000000u] = 1u;\n}\n",
    );
    let output = sandbox.run(&["run", "oob.wgsl", "-b", "zeros:4", "-w", "1"], &[]);
    let message = assert_error(
        &output,
        &["running kernel `main` on cpu:0", "kernel fault", "out of bounds"],
    );
    // Said once, as the command's error, not again as a log line.
    assert_eq!(message.matches("out of bounds").count(), 1, "{message}");
}

#[test]
fn the_device_comes_from_device_then_xhal_device() {
    let sandbox = saxpy_sandbox("run-device");
    let arguments = [
        "run",
        "saxpy.wgsl",
        "-b",
        "1",
        "-b",
        "1",
        "-s",
        "1",
        "-s",
        "1",
        "-w",
        "1",
        "--json",
    ];
    let mut on_cpu_1 = arguments.to_vec();
    on_cpu_1.extend(["--device", "cpu:1"]);
    let output = sandbox.run(&on_cpu_1, &[("XHAL_CPU_DEVICES", "2")]);
    assert_exit(&output, 0);
    assert_eq!(json(&output)["device"]["label"], "cpu:1");

    let output = sandbox.run(&arguments, &[("XHAL_CPU_DEVICES", "2"), ("XHAL_DEVICE", "cpu:1")]);
    assert_exit(&output, 0);
    assert_eq!(json(&output)["device"]["label"], "cpu:1");

    let mut on_cuda = arguments.to_vec();
    on_cuda.extend(["--device", "cuda"]);
    assert_error(
        &sandbox.run(&on_cuda, &[]),
        &["--device \"cuda\" matches no device", "present: cpu:0"],
    );
}

#[test]
fn usage_errors_exit_2_and_help_documents_the_syntax() {
    let sandbox = saxpy_sandbox("run-usage");
    // Neither --workgroups nor --invocations.
    assert_exit(&sandbox.run(&["run", "saxpy.wgsl", "-b", "1", "-b", "1"], &[]), 2);
    assert_exit(&sandbox.run(&["run", "saxpy.wgsl", "-w", "1", "-n", "4"], &[]), 2);
    assert_exit(&sandbox.run(&["run", "saxpy.wgsl", "-w", "1,x"], &[]), 2);
    assert_exit(&sandbox.run(&["run", "saxpy.wgsl", "-w", "1,1,1,1"], &[]), 2);
    assert_exit(&sandbox.run(&["run"], &[]), 2);

    let output = sandbox.run(&["run", "--help"], &[]);
    assert_exit(&output, 0);
    let text = stdout(&output);
    for syntax in [
        "--buffer",
        "--scalar",
        "--workgroups",
        "--invocations",
        "--device",
        "--json",
        "NAME=SPEC",
        "range:START..END[:STEP]",
        "zeros:N",
        "fill:VALUE:N",
        "random:N[:SEED][:MIN..MAX]",
        "file:PATH",
        "1e-3",
    ] {
        assert!(text.contains(syntax), "`{syntax}` is not in the help:\n{text}");
    }
}

const TILED: &str = "\
struct Params { scale: f32, count: u32 }
override block: u32 = 8u;
@id(3) override offset: f32;
@group(1) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> params: Params;
var<workgroup> tile: array<f32, block>;

@compute @workgroup_size(block)
fn main(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    tile[lane] = f32(group.x * block + lane) * params.scale + offset;
    workgroupBarrier();
    let i = group.x * block + lane;
    if i < params.count { out[i] = tile[block - 1u - lane]; }
}
";

#[test]
fn overrides_uniforms_and_binding_gaps_run_from_the_command_line() {
    let sandbox = Sandbox::new("run-overrides-uniforms");
    sandbox.write("tiled.wgsl", TILED);
    let output = sandbox.run(
        &[
            "run",
            "tiled.wgsl",
            "-w",
            "2",
            "--override",
            "block=4",
            "-o",
            "3=0.5",
            "-b",
            "params=2,6",
            "-b",
            "out=zeros:8",
            "--json",
        ],
        &[],
    );
    assert_exit(&output, 0);
    assert_eq!(stderr(&output), "");
    let document = json(&output);
    assert_eq!(document["kernel"]["workgroup_size"], json!([4, 1, 1]));
    assert_eq!(
        buffer_values(&document, "out"),
        &json!([6.5, 4.5, 2.5, 0.5, 14.5, 12.5, 0.0, 0.0])
    );
    let out = document["buffers"]
        .as_array()
        .and_then(|b| b.iter().find(|b| b["name"] == "out"))
        .cloned();
    let out = out.expect("the out buffer");
    assert_eq!(
        (&out["argument"], &out["group"], &out["binding"]),
        (&json!(1), &json!(1), &json!(0))
    );
    let params = document["buffers"]
        .as_array()
        .and_then(|b| b.iter().find(|b| b["name"] == "params"))
        .cloned();
    assert_eq!(params.expect("the params buffer")["access"], "uniform");
    let overrides = &document["overrides"];
    assert_eq!(overrides[0]["name"], "block");
    assert_eq!(overrides[0]["value"], "4u");
    assert_eq!(overrides[0]["given"], true);
    assert_eq!(overrides[1]["id"], 3);

    // Text output names where each buffer is declared, and the overrides.
    let output = sandbox.run(
        &[
            "run",
            "tiled.wgsl",
            "-w",
            "2",
            "-o",
            "block=4",
            "-o",
            "offset=0",
            "-b",
            "2,6",
            "-b",
            "zeros:8",
        ],
        &[],
    );
    assert_exit(&output, 0);
    let text = stdout(&output);
    assert!(text.contains("buffer 0 (binding 4)  params: Params, uniform"), "{text}");
    assert!(
        text.contains("buffer 1 (@group(1) @binding(0))  out: array<f32>"),
        "{text}"
    );
    assert!(text.contains("block: u32 = 4u (given)"), "{text}");

    // An override the kernel lacks, a value that does not fit, and a missing one exit 1, naming it.
    for (arguments, needles) in [
        (&["-o", "blocks=4", "-o", "offset=0"][..], &["`blocks`", "`block`"][..]),
        (&["-o", "block=-4", "-o", "offset=0"][..], &["`block`", "u32"][..]),
        (
            &["-o", "block=4"][..],
            &["`offset`", "no default", "--override offset=VALUE"][..],
        ),
    ] {
        let mut args = vec!["run", "tiled.wgsl", "-w", "1", "-b", "2,6", "-b", "zeros:8"];
        args.extend_from_slice(arguments);
        let output = sandbox.run(&args, &[]);
        assert_error(&output, needles);
    }
    let output = sandbox.run(&["run", "tiled.wgsl", "-w", "1", "-o", "block"], &[]);
    assert_exit(&output, 2);
}
