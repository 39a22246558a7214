//! WGSL kernels that must fail, and how: bad source, missing entry points, wrong
//! arguments at enqueue, out-of-bounds accesses and time limits while running.

use super::wgsl::{f32s, saxpy_scalars};
use super::*;
use crate::config::KernelTimeout;
use std::time::{Duration, Instant};

const COPY: &str = r#"
@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn read_past(@builtin(global_invocation_id) gid: vec3<u32>) {
    out[gid.x] = input[gid.x + 1u];
}

@compute @workgroup_size(64)
fn write_past(@builtin(global_invocation_id) gid: vec3<u32>) {
    out[gid.x + 1u] = input[gid.x];
}

@compute @workgroup_size(64)
fn guarded(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x + 1u < arrayLength(&input)) {
        out[gid.x] = input[gid.x + 1u];
    }
}
"#;

use super::wgsl::SAXPY;

const SPIN: &str = r#"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(4)
fn spin() {
    while (out[0] != 12345u) {
        out[1] += 1u;
    }
}
"#;

#[test]
fn reading_past_a_binding_faults_naming_kernel_binding_and_index() {
    let fixture = Fixture::new();
    let input: Vec<u32> = (0..64).collect();
    let result = fixture.dispatch(COPY, "read_past", [1, 1, 1], &[words(&input), vec![0; 256]], &[]);
    assert_error(
        result,
        ErrorKind::KernelFault,
        &[
            "kernel `read_past`",
            "binding 0 (`input`)",
            "index 64 is out of bounds",
            "array has 64 elements",
        ],
    );
}

#[test]
fn writing_past_a_binding_faults_and_the_stream_error_sticks() {
    let fixture = Fixture::new();
    let input: Vec<u32> = (0..64).collect();
    let result = fixture.dispatch(COPY, "write_past", [1, 1, 1], &[words(&input), vec![0; 256]], &[]);
    let error = assert_error(
        result,
        ErrorKind::KernelFault,
        &["kernel `write_past`", "binding 1 (`out`)", "index 64 is out of bounds"],
    );
    assert_eq!(fixture.backend.stream_query(fixture.stream).unwrap_err(), error);
    // The same kernel, guarded, runs on a fresh stream of the same backend.
    let healthy = fixture.new_stream();
    let kernel = fixture.wgsl(COPY, "guarded").unwrap();
    let (a, b) = (fixture.allocate(256), fixture.allocate(256));
    fixture
        .launch(healthy, kernel, [1, 1, 1], &[whole(a, 256), whole(b, 256)], &[])
        .unwrap();
    fixture.backend.stream_synchronize(healthy).unwrap();
}

#[test]
fn negative_index_into_a_local_array_faults_with_the_signed_index() {
    const LOCAL: &str = r#"
@group(0) @binding(0) var<storage, read_write> out: array<i32>;

@compute @workgroup_size(4)
fn local_oob(@builtin(local_invocation_index) k: u32) {
    var table = array<i32, 4>(1, 2, 3, 4);
    out[k] = table[i32(k) - 2];
}
"#;
    let result = Fixture::new().dispatch(LOCAL, "local_oob", [1, 1, 1], &[vec![0; 16]], &[]);
    assert_error(
        result,
        ErrorKind::KernelFault,
        &[
            "kernel `local_oob`",
            "variable `table`",
            "index -2 is out of bounds",
            "array has 4 elements",
        ],
    );
}

#[test]
fn inactive_lanes_never_fault() {
    const GUARD: &str = r#"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<workgroup> cells: array<u32, 8>;

@compute @workgroup_size(64)
fn guard(@builtin(local_invocation_index) k: u32) {
    if (k < 8u) {
        cells[k] = k * 2u;
        out[k] = cells[7u - k];
    }
}
"#;
    // The read of `cells` races with other invocations' writes, so only the interpreter,
    // whose lanes run in lockstep, gives one answer; this test is about its lane masks.
    let driver = CpuDriver::with_config(CpuConfig {
        devices: 1,
        memory_per_device: TEST_MEMORY,
    })
    .with_kernel_mode(crate::KernelMode::Interpret);
    let out = Fixture::with_driver(driver)
        .dispatch(GUARD, "guard", [1, 1, 1], &[vec![0; 32]], &[])
        .unwrap();
    assert_eq!(super::wgsl::as_u32s(&out[0]), [14, 12, 10, 8, 6, 4, 2, 0]);
}

#[test]
fn a_kernel_past_its_time_limit_is_stopped_and_the_backend_lives_on() {
    let driver = CpuDriver::with_config(CpuConfig {
        devices: 1,
        memory_per_device: TEST_MEMORY,
    })
    .with_kernel_timeout(Duration::from_millis(300));
    let fixture = Fixture::with_driver(driver);
    let started = Instant::now();
    let result = fixture.dispatch(SPIN, "spin", [8, 1, 1], &[vec![0; 8]], &[]);
    assert_error(
        result,
        ErrorKind::Timeout,
        &["kernel `spin` ran past XHAL_KERNEL_TIMEOUT=0.3s"],
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(
        fixture.backend.stream_query(fixture.stream).unwrap_err().kind(),
        ErrorKind::Timeout
    );
    // The worker survived: a fresh stream runs a kernel to completion.
    let healthy = fixture.new_stream();
    let kernel = fixture.wgsl(SAXPY, "saxpy").unwrap();
    let (x, y) = (fixture.allocate(16), fixture.allocate(16));
    fixture.write(healthy, x, 0, &f32s(&[1.0; 4])).unwrap();
    fixture.write(healthy, y, 0, &f32s(&[1.0; 4])).unwrap();
    fixture
        .launch(
            healthy,
            kernel,
            [1, 1, 1],
            &[whole(x, 16), whole(y, 16)],
            &saxpy_scalars(2.0, 4),
        )
        .unwrap();
    fixture.backend.stream_synchronize(healthy).unwrap();
}

#[test]
fn a_malformed_time_limit_fails_the_launch_naming_the_variable() {
    let mut driver = CpuDriver::with_config(CpuConfig {
        devices: 1,
        memory_per_device: TEST_MEMORY,
    });
    driver.kernel_timeout = KernelTimeout::Malformed(format!(
        "{} must be a positive number of seconds, got `soon`",
        crate::KERNEL_TIMEOUT_VARIABLE
    ));
    let fixture = Fixture::with_driver(driver);
    let result = fixture.dispatch(SPIN, "spin", [1, 1, 1], &[vec![0; 8]], &[]);
    assert_error(result, ErrorKind::InvalidArgument, &["XHAL_KERNEL_TIMEOUT", "`soon`"]);
}

#[test]
fn wrong_arguments_are_refused_at_enqueue() {
    let fixture = Fixture::new();
    let kernel = fixture.wgsl(SAXPY, "saxpy").unwrap();
    let (x, y) = (fixture.allocate(64), fixture.allocate(64));
    let scalars = saxpy_scalars(1.0, 16);
    assert_error(
        fixture.launch(fixture.stream, kernel, [1, 1, 1], &[whole(x, 64)], &scalars),
        ErrorKind::InvalidArgument,
        &["kernel `saxpy`", "expects 2 buffer arguments", "`x`, `y`", "got 1"],
    );
    assert_error(
        fixture.launch(
            fixture.stream,
            kernel,
            [1, 1, 1],
            &[whole(x, 64), whole(y, 64)],
            &scalars[..4],
        ),
        ErrorKind::InvalidArgument,
        &["kernel `saxpy`", "expects 8 scalar bytes", "`params`", "got 4"],
    );
    let tiny = BufferArg {
        buffer: y,
        offset: 4,
        size: 2,
    };
    assert_error(
        fixture.launch(fixture.stream, kernel, [1, 1, 1], &[whole(x, 64), tiny], &scalars),
        ErrorKind::InvalidArgument,
        &[
            "kernel `saxpy`",
            "buffer argument 1 (`y`",
            "2-byte view",
            "at least 4 bytes",
        ],
    );
    // Nothing was enqueued: the stream is healthy.
    fixture.backend.stream_synchronize(fixture.stream).unwrap();
}

#[test]
fn bad_wgsl_is_an_invalid_argument_with_line_and_column() {
    let fixture = Fixture::new();
    let source = "@compute @workgroup_size(1)\nfn main() {\n    let x: u32 = ;\n}\n";
    let error = assert_error(
        fixture
            .backend
            .module_load(fixture.device, KernelFormat::WGSL, source.as_bytes()),
        ErrorKind::InvalidArgument,
        &["WGSL parse error at line 3:"],
    );
    assert!(error.message().contains("wgsl:3:"), "{error}");

    let invalid = r#"
var<workgroup> total: atomic<u32>;
fn add(p: ptr<workgroup, atomic<u32>>) {
    atomicAdd(p, 1u);
}
@compute @workgroup_size(4)
fn main() {
    add(&total);
}
"#;
    assert_error(
        fixture
            .backend
            .module_load(fixture.device, KernelFormat::WGSL, invalid.as_bytes()),
        ErrorKind::InvalidArgument,
        &["WGSL validation error at line 3:1", "can't be passed into functions"],
    );
    assert_error(
        fixture
            .backend
            .module_load(fixture.device, KernelFormat::WGSL, &[0xff, 0xfe]),
        ErrorKind::InvalidArgument,
        &["UTF-8"],
    );
}

#[test]
fn a_missing_entry_point_is_not_found_and_lists_the_entry_points() {
    let fixture = Fixture::new();
    let module = fixture
        .backend
        .module_load(fixture.device, KernelFormat::WGSL, COPY.as_bytes())
        .unwrap();
    assert_error(
        fixture.backend.kernel_get(module, "nope"),
        ErrorKind::NotFound,
        &["no entry point `nope`", "`read_past`, `write_past`, `guarded`"],
    );
}

#[test]
fn interfaces_outside_the_abi_are_refused_at_kernel_get() {
    let fixture = Fixture::new();
    let gap = r#"
@group(0) @binding(0) var<storage, read_write> a: array<u32>;
@group(0) @binding(2) var<storage, read_write> c: array<u32>;
@compute @workgroup_size(1)
fn main() { a[0] = c[0]; }
"#;
    let module = fixture
        .backend
        .module_load(fixture.device, KernelFormat::WGSL, gap.as_bytes())
        .unwrap();
    assert_error(
        fixture.backend.kernel_get(module, "main"),
        ErrorKind::InvalidArgument,
        &["kernel `main`", "@binding(2)", "not @binding(1)"],
    );
}

#[test]
fn without_strict_bounds_an_out_of_bounds_index_is_clamped() {
    let driver = CpuDriver::with_config(CpuConfig {
        devices: 1,
        memory_per_device: TEST_MEMORY,
    })
    .with_strict_bounds(false);
    let fixture = Fixture::with_driver(driver);
    let input: Vec<u32> = (0..64).map(|i| i * 2).collect();
    let out = fixture
        .dispatch(COPY, "read_past", [1, 1, 1], &[words(&input), vec![0; 256]], &[])
        .unwrap();
    let expected: Vec<u32> = (0..64).map(|i: u32| (i + 1).min(63) * 2).collect();
    assert_eq!(super::wgsl::as_u32s(&out[1]), expected);
}

#[test]
fn dropping_the_backend_stops_a_running_kernel() {
    let driver = CpuDriver::with_config(CpuConfig {
        devices: 1,
        memory_per_device: TEST_MEMORY,
    })
    .with_kernel_timeout(Duration::from_secs(600));
    let fixture = Fixture::with_driver(driver);
    let kernel = fixture.wgsl(SPIN, "spin").unwrap();
    let buffer = fixture.allocate(8);
    fixture.write_now(buffer, 0, &words(&[0, 0]));
    fixture
        .launch(fixture.stream, kernel, [2, 1, 1], &[whole(buffer, 8)], &[])
        .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let started = Instant::now();
    drop(fixture);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}
