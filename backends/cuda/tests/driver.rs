//! The backend without a driver library, with a stub driver that has no device, with a stub
//! that fails on cue, and with a stub whose one fake device runs copies and launches on host
//! memory.
//!
//! cudarc opens the driver once per process, by name, so each case with the stub runs in a
//! child process: this test binary again, with `XHAL_CUDA_STUB_SCENARIO` naming the case,
//! the stub's folder first on `LD_LIBRARY_PATH`, and the stub's behaviour in `STUB_*`
//! variables (see tests/stub/libcuda_stub.c).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use xhal_core::backend::{Backend, BufferArg, LaunchArgs};
use xhal_core::{ErrorKind, KernelFormat, Launch, Runtime};
use xhal_cuda::{CudaBackend, CudaDriver};

const SCENARIO_VARIABLE: &str = "XHAL_CUDA_STUB_SCENARIO";
const LIBRARY_VARIABLE: &str = "XHAL_CUDA_STUB_LIBRARY";
const PASSED: &str = "STUB SCENARIO PASSED";

/// Fails when CI requires the backend (`XHAL_REQUIRE_BACKENDS` names `cuda`) and it is
/// missing: a missing driver must never pass as a quiet skip there.
fn require_unless_absent(reason: &str) {
    let required = std::env::var("XHAL_REQUIRE_BACKENDS").unwrap_or_default();
    assert!(
        !required.split(',').any(|name| name.trim() == "cuda"),
        "XHAL_REQUIRE_BACKENDS names cuda, but it is unavailable: {reason}"
    );
}

#[test]
fn missing_library_is_driver_unavailable() {
    let backend = CudaBackend::new(CudaDriver::with_library_path("/nonexistent/libcuda.so.1"));
    let error = backend.device_count().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::DriverUnavailable, "{error}");
    assert!(error.message().contains("/nonexistent/libcuda.so.1"), "{error}");
    assert_eq!(backend.device_count().unwrap_err(), error);
    assert_eq!(backend.device_info(0).unwrap_err().kind(), ErrorKind::DriverUnavailable);
    assert_eq!(backend.device_open(0).unwrap_err().kind(), ErrorKind::DriverUnavailable);
}

/// The system's driver, as this machine has it: devices, or zero devices and a reason.
#[test]
fn this_machine_has_devices_or_a_reason() {
    if std::env::var_os(SCENARIO_VARIABLE).is_some() {
        return;
    }
    let backend = CudaBackend::new(CudaDriver::from_env());
    match backend.device_count() {
        Ok(count) => assert!(count >= 1),
        Err(error) => {
            assert_eq!(error.kind(), ErrorKind::DriverUnavailable, "{error}");
            assert!(
                error.message().contains("libcuda") || error.message().contains("CUDA"),
                "{error}"
            );
            require_unless_absent(&error.to_string());
            eprintln!("no CUDA device here, as expected without a driver: {error}");
        }
    }
}

/// Builds the stub (`variant` adds C flags) into a folder of its own, once per process.
fn stub(variant: &'static str) -> Option<PathBuf> {
    static PLAIN: OnceLock<Option<PathBuf>> = OnceLock::new();
    static WITHOUT_UUID: OnceLock<Option<PathBuf>> = OnceLock::new();
    let cell = if variant.is_empty() { &PLAIN } else { &WITHOUT_UUID };
    cell.get_or_init(|| {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/stub/libcuda_stub.c");
        let folder = std::env::temp_dir().join(format!(
            "xhal-cuda-stub-{}-{}",
            std::process::id(),
            if variant.is_empty() { "plain" } else { "variant" }
        ));
        std::fs::create_dir_all(&folder).unwrap();
        let library = folder.join("libcuda.so.1");
        let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
        let mut command = Command::new(&compiler);
        command.args(["-shared", "-fPIC", "-O1", "-Wl,-soname,libcuda.so.1", "-o"]);
        command.arg(&library).arg(&source);
        if !variant.is_empty() {
            command.arg(variant);
        }
        match command.output() {
            Ok(output) if output.status.success() => {}
            Ok(output) => panic!(
                "building the stub driver failed:\n{}",
                String::from_utf8_lossy(&output.stderr)
            ),
            Err(error) => {
                eprintln!(
                    "SKIPPED: the stub driver cannot be built because there is no C compiler ({compiler}: {error})"
                );
                return None;
            }
        }
        // The unversioned name too, so that it is found first on a machine with a real driver.
        let _ = std::fs::remove_file(folder.join("libcuda.so"));
        std::os::unix::fs::symlink("libcuda.so.1", folder.join("libcuda.so")).unwrap();
        Some(library)
    })
    .clone()
}

/// Runs `scenario` in a child process against the stub; returns its output.
fn run_child(scenario: &str, variant: &'static str, environment: &[(&str, &str)]) -> Option<String> {
    let library = stub(variant)?;
    let folder = library.parent().unwrap().to_path_buf();
    let path = match std::env::var("LD_LIBRARY_PATH") {
        Ok(old) if !old.is_empty() => format!("{}:{old}", folder.display()),
        _ => folder.display().to_string(),
    };
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", "stub_child", "--nocapture", "--test-threads=1"])
        .env(SCENARIO_VARIABLE, scenario)
        .env(LIBRARY_VARIABLE, &library)
        .env("LD_LIBRARY_PATH", path)
        .env_remove("STUB_FAIL")
        .env_remove("STUB_DEVICES")
        .env_remove("STUB_POOLS");
    for (name, value) in environment {
        command.env(name, value);
    }
    let output = command.output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "scenario {scenario} failed:\n{text}");
    assert!(text.contains(PASSED), "scenario {scenario} did not run:\n{text}");
    Some(text)
}

#[test]
fn a_driver_without_devices_is_driver_unavailable() {
    if let Some(text) = run_child("no_device", "", &[]) {
        assert!(text.contains("found no CUDA device"), "{text}");
    }
}

#[test]
fn a_failing_cu_init_is_driver_unavailable_naming_the_error() {
    run_child("init_fails", "", &[("STUB_FAIL", "cuInit:999")]);
}

#[test]
fn a_failing_device_count_names_the_call() {
    run_child("count_fails", "", &[("STUB_FAIL", "cuDeviceGetCount:3")]);
}

#[test]
fn a_missing_entry_point_is_an_error_not_a_panic() {
    run_child("missing_symbol", "-DSTUB_WITHOUT_UUID", &[("STUB_DEVICES", "1")]);
}

#[test]
fn the_stub_device_runs_everything_through_cu_mem_alloc() {
    run_child("device", "", &[("STUB_DEVICES", "1")]);
}

#[test]
fn the_stub_device_runs_everything_through_the_memory_pool() {
    run_child("device", "", &[("STUB_DEVICES", "1"), ("STUB_POOLS", "1")]);
}

#[test]
fn vendor_errors_become_xhal_errors() {
    run_child(
        "vendor_errors",
        "",
        &[
            ("STUB_DEVICES", "1"),
            (
                "STUB_FAIL",
                "cuMemAlloc_v2:2,cuModuleLoadDataEx:218,cuEventCreate:999,cuStreamCreate:201",
            ),
        ],
    );
}

/// WGSL through the runtime: CUDA C from the emitter, compiled by NVRTC (where the machine has
/// it), launched with the scalar block and the buffer lengths the backend fills.
#[test]
fn wgsl_kernels_launch_with_their_scalars_and_lengths() {
    if let Some(text) = run_child(
        "wgsl_launch",
        "",
        &[("STUB_DEVICES", "1"), ("STUB_PARAM_SIZES", "8,8,8,16")],
    ) {
        if text.contains("SKIPPED") {
            require_unless_absent("NVRTC was not found");
            eprintln!("SKIPPED: NVRTC was not found, so no WGSL kernel ran on the stub device");
        }
    }
}

/// `XHAL_NVRTC_LIBRARY` naming a file that is not NVRTC: the device is still listed, without
/// cuda-c, and compiling CUDA C says which variable named what.
#[test]
fn an_unusable_nvrtc_named_by_the_environment_is_explained() {
    run_child(
        "nvrtc_unusable",
        "",
        &[
            ("STUB_DEVICES", "1"),
            ("XHAL_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so.13"),
        ],
    );
    let stub = stub("").expect("the stub was built above");
    run_child(
        "nvrtc_unusable",
        "",
        &[("STUB_DEVICES", "1"), ("XHAL_NVRTC_LIBRARY", stub.to_str().unwrap())],
    );
}

/// A command the driver refuses while a list is captured fails the list's build naming the
/// call, and the partial graph the capture made is destroyed, not leaked.
#[test]
fn a_refused_command_during_capture_leaks_no_graph() {
    run_child(
        "capture_fails",
        "",
        &[("STUB_DEVICES", "1"), ("STUB_FAIL", "cuMemsetD8Async:1")],
    );
}

#[test]
fn execution_errors_stick_to_the_stream() {
    run_child(
        "sticky",
        "",
        &[("STUB_DEVICES", "1"), ("STUB_FAIL", "cuStreamSynchronize:700")],
    );
}

/// The child side: runs the scenario named in the environment.
#[test]
fn stub_child() {
    let Ok(scenario) = std::env::var(SCENARIO_VARIABLE) else {
        return;
    };
    let library = std::env::var(LIBRARY_VARIABLE).unwrap();
    let backend = CudaBackend::new(CudaDriver::with_library_path(&library));
    match scenario.as_str() {
        "no_device" => {
            let error = backend.device_count().unwrap_err();
            assert_eq!(error.kind(), ErrorKind::DriverUnavailable, "{error}");
            assert!(error.message().contains("cuDeviceGetCount returned 0"), "{error}");
            assert_eq!(backend.device_open(0).unwrap_err().kind(), ErrorKind::DriverUnavailable);
            eprintln!("reason: {error}");
        }
        "init_fails" => {
            let error = backend.device_count().unwrap_err();
            assert_eq!(error.kind(), ErrorKind::DriverUnavailable, "{error}");
            assert!(
                error.message().contains("cuInit failed: CUDA_ERROR_UNKNOWN (999)"),
                "{error}"
            );
        }
        "count_fails" => {
            let error = backend.device_count().unwrap_err();
            assert_eq!(error.kind(), ErrorKind::DriverUnavailable, "{error}");
            assert!(
                error
                    .message()
                    .contains("cuDeviceGetCount failed: CUDA_ERROR_NOT_INITIALIZED (3)"),
                "{error}"
            );
        }
        "missing_symbol" => {
            let error = backend.device_count().unwrap_err();
            assert_eq!(error.kind(), ErrorKind::DriverUnavailable, "{error}");
            assert!(
                error.message().contains("cuDeviceGetUuid_v2 could not be called"),
                "{error}"
            );
            assert!(error.message().contains("Missing symbol"), "{error}");
        }
        "device" => device_scenario(&backend),
        "vendor_errors" => vendor_errors_scenario(&backend),
        "sticky" => sticky_scenario(&backend),
        "wgsl_launch" => wgsl_launch_scenario(backend),
        "nvrtc_unusable" => nvrtc_unusable_scenario(&backend),
        "capture_fails" => capture_fails_scenario(&backend, &library),
        other => panic!("unknown scenario {other}"),
    }
    println!("{PASSED}");
}

fn capture_fails_scenario(backend: &CudaBackend, library: &str) {
    let device = backend.device_open(0).unwrap();
    let buffer = backend.buffer_allocate(device, 16).unwrap();
    let list = backend.command_list_create(device).unwrap();
    backend.command_list_append_fill(list, buffer, 0, 16, &[5]).unwrap();
    let error = backend.command_list_finish(list).unwrap_err();
    assert!(error.message().contains("cuMemsetD8Async"), "{error}");
    // SAFETY: the stub the backend loaded, which exports this counter.
    let live = unsafe {
        let stub = libloading::Library::new(library).unwrap();
        let count: libloading::Symbol<unsafe extern "C" fn() -> i32> =
            stub.get(b"xhal_cuda_stub_live_graphs\0").unwrap();
        count()
    };
    assert_eq!(live, 0, "the failed capture's graph was not destroyed");
    backend.command_list_destroy(list);
    backend.buffer_free(buffer);
    backend.device_close(device);
}

fn write(
    backend: &CudaBackend,
    stream: xhal_core::backend::StreamHandle,
    buffer: xhal_core::backend::BufferHandle,
    offset: u64,
    data: &[u8],
) {
    // SAFETY: `data` outlives the write: the stream is synchronized before returning.
    unsafe { backend.stream_write(stream, buffer, offset, data.as_ptr(), data.len() as u64) }.unwrap();
    backend.stream_synchronize(stream).unwrap();
}

fn read(
    backend: &CudaBackend,
    stream: xhal_core::backend::StreamHandle,
    buffer: xhal_core::backend::BufferHandle,
    offset: u64,
    size: usize,
) -> Vec<u8> {
    let mut data = vec![0u8; size];
    // SAFETY: `data` outlives the read: the stream is synchronized before returning.
    unsafe { backend.stream_read(stream, buffer, offset, data.as_mut_ptr(), size as u64) }.unwrap();
    backend.stream_synchronize(stream).unwrap();
    data
}

const PTX: &str = ".version 8.0\n.target sm_90\n.address_size 64\n\
    .visible .entry mark(\n.param .u64 mark_param_0,\n.param .align 4 .b8 mark_param_1[8]\n)\n.reqntid 64, 2, 1\n{\nret;\n}\n\
    .visible .entry unsized(\n.param .u64 unsized_param_0\n)\n{\nret;\n}\n";

fn device_scenario(backend: &CudaBackend) {
    assert_eq!(backend.device_count().unwrap(), 1);
    let info = backend.device_info(0).unwrap();
    eprintln!("{info:#?}");
    assert_eq!(info.name, "xhal stub GPU");
    assert_eq!(info.vendor_id, 0x10de);
    assert_eq!(info.uuid[0], 0xa0);
    assert_eq!(info.pci_bus_id.as_deref(), Some("0000:3b:00.0"));
    assert!(info.driver_version.contains("CUDA 12.8"), "{}", info.driver_version);
    assert!(info.driver_version.contains("sm_90"), "{}", info.driver_version);
    assert!(info.driver_version.contains("132 SMs"), "{}", info.driver_version);
    assert_eq!(info.total_memory, 1 << 30);
    assert_eq!(info.max_workgroup_size, [1024, 1024, 64]);
    assert_eq!(info.max_workgroup_count, [2147483647, 65535, 65535]);
    assert_eq!(info.subgroup_size, 32);
    assert!(info.kernel_formats.contains(&KernelFormat::PTX));
    assert!(info.kernel_formats.contains(&KernelFormat::CUBIN));
    // Compute capability 9.0 has half precision.
    assert!(info
        .features
        .contains(xhal_core::Features::F16 | xhal_core::Features::F64));
    assert_eq!(backend.device_info(1).unwrap_err().kind(), ErrorKind::NotFound);

    let device = backend.device_open(0).unwrap();
    assert_eq!(backend.device_info(0).unwrap().free_memory, 1 << 29);
    let stream = backend.stream_create(device).unwrap();
    // Larger than one staging block, so the transfer takes several.
    let size = 9 << 20;
    let buffer = backend.buffer_allocate(device, size as u64).unwrap();
    let data: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
    write(backend, stream, buffer, 0, &data);
    assert!(read(backend, stream, buffer, 0, size) == data);
    assert_eq!(read(backend, stream, buffer, 1000, 5), data[1000..1005]);
    assert_eq!(
        backend.buffer_allocate(device, 0).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );

    // Fills of each pattern width.
    backend.stream_fill(stream, buffer, 0, 8, &[0xab]).unwrap();
    backend.stream_fill(stream, buffer, 8, 8, &[0x01, 0x02]).unwrap();
    backend.stream_fill(stream, buffer, 16, 8, &[1, 2, 3, 4]).unwrap();
    let filled = read(backend, stream, buffer, 0, 24);
    assert_eq!(&filled[..8], &[0xab; 8]);
    assert_eq!(&filled[8..16], &[1, 2, 1, 2, 1, 2, 1, 2]);
    assert_eq!(&filled[16..24], &[1, 2, 3, 4, 1, 2, 3, 4]);
    let error = backend.stream_fill(stream, buffer, 1, 4, &[1, 2, 3, 4]).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");

    // Copies, including overlapping ranges of one buffer.
    write(backend, stream, buffer, 0, &[1, 2, 3, 4, 5, 6, 7, 8]);
    backend.stream_copy(stream, buffer, 0, buffer, 2, 6).unwrap();
    assert_eq!(read(backend, stream, buffer, 0, 8), [1, 2, 1, 2, 3, 4, 5, 6]);
    let other = backend.buffer_allocate(device, 64).unwrap();
    backend.stream_copy(stream, buffer, 0, other, 8, 8).unwrap();
    assert_eq!(read(backend, stream, other, 8, 8), [1, 2, 1, 2, 3, 4, 5, 6]);
    let error = backend.stream_copy(stream, buffer, 0, other, 60, 8).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::OutOfBounds, "{error}");

    // Events: record, wait, query, host wait, timing.
    let start = backend.event_create(device, true).unwrap();
    let end = backend.event_create(device, true).unwrap();
    let untimed = backend.event_create(device, false).unwrap();
    assert!(backend.event_query(start).unwrap());
    let error = backend.event_elapsed_time(start, end).unwrap_err();
    assert!(error.message().contains("never recorded"), "{error}");
    backend.stream_record_event(stream, start).unwrap();
    backend.stream_record_event(stream, end).unwrap();
    backend.stream_record_event(stream, untimed).unwrap();
    let second = backend.stream_create(device).unwrap();
    backend.stream_wait_event(second, end).unwrap();
    backend.event_synchronize(end).unwrap();
    assert!(backend.event_query(end).unwrap());
    assert_eq!(backend.event_elapsed_time(start, end).unwrap(), 250_000);
    let error = backend.event_elapsed_time(start, untimed).unwrap_err();
    assert!(error.message().contains("without timing"), "{error}");
    assert!(backend.stream_query(stream).unwrap());

    // Modules and launches: the PTX entry's .reqntid is the workgroup size; the view's offset
    // moves the pointer; the scalar block passes by value.
    let module = backend.module_load(device, KernelFormat::PTX, PTX.as_bytes()).unwrap();
    let mark = backend.kernel_get(module, "mark").unwrap();
    let error = backend.kernel_get(module, "unsized").unwrap_err();
    assert!(error.message().contains("declares no workgroup size"), "{error}");
    let error = backend.kernel_get(module, "absent").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotFound, "{error}");
    assert!(error.message().contains("mark, unsized"), "{error}");
    let target = backend.buffer_allocate(device, 1024).unwrap();
    backend.stream_fill(stream, target, 0, 1024, &[0]).unwrap();
    let scalars = [7u8, 0, 0, 0, 9, 0, 0, 0];
    let view = [BufferArg {
        buffer: target,
        offset: 256,
        size: 512,
    }];
    let launch = LaunchArgs {
        kernel: mark,
        workgroups: [3, 2, 1],
        buffers: &view,
        scalars: &scalars,
    };
    backend.stream_launch(stream, &launch).unwrap();
    let out = read(backend, stream, target, 256, 32);
    let words: Vec<u32> = out
        .chunks_exact(4)
        .map(|chunk| u32::from_le_bytes(chunk.try_into().unwrap()))
        .collect();
    assert_eq!(words[..6], [3, 2, 1, 64, 2, 1]);
    assert_eq!(words[6..8], [7, 9]);
    assert_eq!(read(backend, stream, target, 0, 4), [0, 0, 0, 0]);
    let error = backend
        .stream_launch(
            stream,
            &LaunchArgs {
                workgroups: [0, 1, 1],
                ..launch
            },
        )
        .unwrap_err();
    assert!(error.message().contains("workgroup count in x is 0"), "{error}");
    let error = backend
        .stream_launch(
            stream,
            &LaunchArgs {
                workgroups: [1, 65536, 1],
                ..launch
            },
        )
        .unwrap_err();
    assert!(error.message().contains("MAX_GRID_DIM_Y"), "{error}");
    let misaligned = [BufferArg {
        buffer: target,
        offset: 8,
        size: 512,
    }];
    let error = backend
        .stream_launch(
            stream,
            &LaunchArgs {
                buffers: &misaligned,
                ..launch
            },
        )
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    assert!(error.message().contains("alignment"), "{error}");

    // Misuse of module formats.
    let error = backend
        .module_load(device, KernelFormat::CUBIN, b"not a cubin")
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    let error = backend.module_load(device, KernelFormat::PTX, b"garbage").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    let error = backend
        .module_load(device, KernelFormat::SPIRV_KERNEL, &[0; 20])
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unsupported, "{error}");
    assert!(error.message().contains("ptx"), "{error}");
    if !info.kernel_formats.contains(&KernelFormat::CUDA_C) {
        let error = backend
            .module_load(device, KernelFormat::CUDA_C, b"extern \"C\" __global__ void k() {}")
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Unsupported, "{error}");
        assert!(error.message().contains("NVRTC"), "{error}");
    }

    backend.kernel_destroy(mark);
    backend.module_destroy(module);
    for event in [start, end, untimed] {
        backend.event_destroy(event);
    }
    backend.stream_destroy(second);
    backend.stream_destroy(stream);
    for buffer in [buffer, other, target] {
        backend.buffer_free(buffer);
    }
    backend.device_close(device);
}

fn vendor_errors_scenario(backend: &CudaBackend) {
    let device = backend.device_open(0).unwrap();
    let error = backend.buffer_allocate(device, 64).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::OutOfMemory, "{error}");
    assert!(
        error
            .message()
            .starts_with("cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (2)"),
        "{error}"
    );
    let error = backend
        .module_load(device, KernelFormat::PTX, PTX.as_bytes())
        .unwrap_err();
    assert!(
        error
            .message()
            .starts_with("cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX (218)"),
        "{error}"
    );
    assert!(
        error.message().contains("JIT log:\nptxas fatal: stub JIT log"),
        "{error}"
    );
    assert_eq!(error.kind(), ErrorKind::Unsupported, "{error}");
    let error = backend.event_create(device, true).unwrap_err();
    assert!(
        error
            .message()
            .starts_with("cuEventCreate failed: CUDA_ERROR_UNKNOWN (999)"),
        "{error}"
    );
    let error = backend.stream_create(device).unwrap_err();
    assert!(
        error
            .message()
            .starts_with("cuStreamCreate failed: CUDA_ERROR_INVALID_CONTEXT (201)"),
        "{error}"
    );
    backend.device_close(device);
}

fn sticky_scenario(backend: &CudaBackend) {
    let device = backend.device_open(0).unwrap();
    let stream = backend.stream_create(device).unwrap();
    let buffer = backend.buffer_allocate(device, 64).unwrap();
    let data = [1u8; 16];
    // SAFETY: the data outlives the stream's work (the stub runs it at once).
    unsafe { backend.stream_write(stream, buffer, 0, data.as_ptr(), 16) }.unwrap();
    let error = backend.stream_synchronize(stream).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::KernelFault, "{error}");
    assert!(
        error
            .message()
            .starts_with("cuStreamSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS (700)"),
        "{error}"
    );
    // Every later call on the stream returns the same error.
    // SAFETY: as above.
    let again = unsafe { backend.stream_write(stream, buffer, 0, data.as_ptr(), 16) }.unwrap_err();
    assert_eq!(again, error);
    assert_eq!(backend.stream_fill(stream, buffer, 0, 16, &[0]).unwrap_err(), error);
    // An empty command never reaches CUDA, and still reports the stream's fault.
    assert_eq!(backend.stream_fill(stream, buffer, 0, 0, &[0]).unwrap_err(), error);
    assert_eq!(backend.stream_query(stream).unwrap_err(), error);
    assert_eq!(backend.stream_synchronize(stream).unwrap_err(), error);
    // Another stream is not poisoned by this one's record.
    let other = backend.stream_create(device).unwrap();
    backend.stream_fill(other, buffer, 0, 16, &[0]).unwrap();
    backend.stream_destroy(stream);
    backend.buffer_free(buffer);
    backend.device_close(device);
}

const SAXPY_WGSL: &str = r#"
struct Params { a: f32, n: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < params.n) { y[id.x] = params.a * x[id.x] + y[id.x]; }
}
"#;

fn wgsl_launch_scenario(backend: CudaBackend) {
    let info = backend.device_info(0).unwrap();
    if !info.kernel_formats.contains(&KernelFormat::CUDA_C) {
        eprintln!("SKIPPED: NVRTC was not found, so no CUDA C reaches the stub device");
        return;
    }
    let runtime = Runtime::builder()
        .without_static_backends()
        .without_plugin_search()
        .backend(Arc::new(backend))
        .build()
        .unwrap();
    let device = runtime.open("cuda:0").unwrap();
    let stream = device.create_stream().unwrap();
    let module = device.load_wgsl(SAXPY_WGSL).unwrap();
    let kernel = module.kernel("main").unwrap();
    let x = device.alloc_from(&stream, &[0.0f32; 64]).unwrap();
    let y = device.alloc_from(&stream, &[0.0f32; 64]).unwrap();
    stream
        .launch(
            &Launch::new(&kernel)
                .workgroups(5, 1, 1)
                .buffer(x.slice(4..64))
                .buffer(y.slice(8..20))
                .scalar(2.5f32)
                .scalar(300u32),
        )
        .unwrap();
    // What the stub saw, written at the first view's start: the shape, then each parameter.
    let seen: Vec<u8> = stream.read_to_vec(&x).unwrap()[4..]
        .iter()
        .flat_map(|value| value.to_ne_bytes())
        .collect();
    let word = |at: usize| u32::from_ne_bytes(seen[at..at + 4].try_into().unwrap());
    let long = |at: usize| u64::from_ne_bytes(seen[at..at + 8].try_into().unwrap());
    assert_eq!([word(0), word(4), word(8)], [5, 1, 1], "grid");
    assert_eq!(
        [word(12), word(16), word(20)],
        [64, 1, 1],
        "block from the emitted workgroup size"
    );
    // The two pointers are the views' addresses: the stub wrote through the first one, at
    // the view's start (element 4 of x), which is where this was read from.
    assert_ne!(long(24), 0);
    assert_ne!(long(32), 0);
    assert_eq!(f32::from_bits(word(40)), 2.5, "scalar a");
    assert_eq!(word(44), 300, "scalar n");
    assert_eq!([long(48), long(56)], [60 * 4, 12 * 4], "the views' byte lengths");
}

fn nvrtc_unusable_scenario(backend: &CudaBackend) {
    let named = std::env::var("XHAL_NVRTC_LIBRARY").unwrap();
    let info = backend.device_info(0).unwrap();
    assert!(
        !info.kernel_formats.contains(&KernelFormat::CUDA_C),
        "{:?}",
        info.kernel_formats
    );
    assert!(info.kernel_formats.contains(&KernelFormat::PTX));
    let device = backend.device_open(0).unwrap();
    let error = backend
        .module_load(device, KernelFormat::CUDA_C, b"extern \"C\" __global__ void k() {}")
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unsupported, "{error}");
    assert!(
        error.message().contains("XHAL_NVRTC_LIBRARY names an unusable NVRTC"),
        "{error}"
    );
    assert!(error.message().contains(&named), "{error}");
    backend.device_close(device);
}
