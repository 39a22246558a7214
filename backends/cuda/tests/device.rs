//! The backend on a real NVIDIA GPU. Without one, every test here prints why it checked
//! nothing, and fails when `XHAL_REQUIRE_BACKENDS` names `cuda`.

use std::sync::Arc;
use xhal_core::backend::Backend;
use xhal_core::{ErrorKind, Features, KernelFormat, Launch, Runtime};
use xhal_cuda::{CudaBackend, CudaDriver};

fn require_unless_absent(reason: &str) {
    let required = std::env::var("XHAL_REQUIRE_BACKENDS").unwrap_or_default();
    assert!(
        !required.split(',').any(|name| name.trim() == "cuda"),
        "XHAL_REQUIRE_BACKENDS names cuda, but it is unavailable: {reason}"
    );
}

/// The backend, or `None` (after saying why) where the machine has no CUDA device.
fn backend() -> Option<CudaBackend> {
    let backend = CudaBackend::new(CudaDriver::from_env());
    if let Err(error) = backend.device_count() {
        require_unless_absent(&error.to_string());
        eprintln!("SKIPPED: no CUDA device here, so this test checked nothing: {error}");
        return None;
    }
    Some(backend)
}

fn runtime() -> Option<Runtime> {
    let backend = backend()?;
    Some(
        Runtime::builder()
            .without_static_backends()
            .without_plugin_search()
            .backend(Arc::new(backend))
            .build()
            .unwrap(),
    )
}

/// A runtime whose device 0 takes CUDA C (NVRTC was found), or `None` after saying why.
fn runtime_with_nvrtc() -> Option<Runtime> {
    let runtime = runtime()?;
    let device = runtime.open("cuda:0").unwrap();
    if !device.info().kernel_formats.contains(&KernelFormat::CUDA_C) {
        let reason = "NVRTC (libnvrtc.so.13, .so.12, .so.11.2 or libnvrtc.so, or XHAL_NVRTC_LIBRARY) was not found, so no cuda-c";
        require_unless_absent(reason);
        eprintln!("SKIPPED: {reason}");
        return None;
    }
    Some(runtime)
}

#[test]
fn device_info_is_truthful() {
    let Some(backend) = backend() else {
        return;
    };
    let count = backend.device_count().unwrap();
    for index in 0..count {
        let info = backend.device_info(index).unwrap();
        eprintln!("{info:#?}");
        assert!(!info.name.is_empty());
        assert_eq!(info.vendor_id, 0x10de);
        assert!(info.total_memory > 0);
        assert!(info.free_memory <= info.total_memory);
        assert!(info.max_workgroup_invocations >= 256);
        assert!(info.max_workgroup_memory >= 48 * 1024);
        assert_eq!(info.subgroup_size, 32);
        assert!(info.pci_bus_id.is_some());
        assert!(info.uuid != [0; 16]);
        assert!(
            info.driver_version.contains("compute capability"),
            "{}",
            info.driver_version
        );
        assert!(info.kernel_formats.contains(&KernelFormat::PTX));
        assert!(info.kernel_formats.contains(&KernelFormat::CUBIN));
        assert!(info.features.contains(Features::ATOMICS_64 | Features::TIMESTAMPS));
        assert_eq!(backend.device_info(index).unwrap().uuid, info.uuid);
    }
    assert_eq!(backend.device_info(count).unwrap_err().kind(), ErrorKind::NotFound);
}

#[test]
fn large_transfers_round_trip_through_the_staging_blocks() {
    let Some(runtime) = runtime() else {
        return;
    };
    let device = runtime.open("cuda:0").unwrap();
    let stream = device.create_stream().unwrap();
    let data: Vec<u32> = (0..(5u32 << 20)).map(|i| i.wrapping_mul(2654435761)).collect();
    let buffer = device.alloc_from(&stream, &data).unwrap();
    assert!(stream.read_to_vec(&buffer).unwrap() == data);
}

const SAXPY_WGSL: &str = r#"
struct Params { a: f32, n: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn saxpy(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < params.n) { y[id.x] = params.a * x[id.x] + y[id.x]; }
}

@compute @workgroup_size(1)
fn main() {
    y[0] = f32(arrayLength(&x)) * 100.0 + f32(arrayLength(&y));
}
"#;

#[test]
fn wgsl_kernels_run_through_nvrtc_with_their_lengths() {
    let Some(runtime) = runtime_with_nvrtc() else {
        return;
    };
    let device = runtime.open("cuda:0").unwrap();
    let stream = device.create_stream().unwrap();
    let module = device.load_wgsl(SAXPY_WGSL).unwrap();
    let saxpy = module.kernel("saxpy").unwrap();
    let n = 1000usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let x_buffer = device.alloc_from(&stream, &x).unwrap();
    let y_buffer = device.alloc_from(&stream, &vec![1.0f32; n]).unwrap();
    stream
        .launch(
            &Launch::new(&saxpy)
                .workgroups(n.div_ceil(64) as u32, 1, 1)
                .buffer(&x_buffer)
                .buffer(&y_buffer)
                .scalar(2.0f32)
                .scalar(n as u32),
        )
        .unwrap();
    let back = stream.read_to_vec(&y_buffer).unwrap();
    let expected: Vec<f32> = (0..n).map(|i| 1.0 + 2.0 * i as f32).collect();
    assert_eq!(back, expected);

    // `main` is found under its C name; the lengths are the views' lengths.
    let main = module.kernel("main").unwrap();
    stream
        .launch(
            &Launch::new(&main)
                .workgroups(1, 1, 1)
                .buffer(x_buffer.slice(4..10))
                .buffer(y_buffer.slice(0..3)),
        )
        .unwrap();
    assert_eq!(stream.read_to_vec(&y_buffer).unwrap()[0], 603.0);
}

const NATIVE_CUDA_C: &str = r#"
extern "C" __device__ unsigned int scale__workgroup_size[3] = {8, 2, 1};
extern "C" __global__ void scale(float* data, float factor) {
    unsigned int i = (blockIdx.y * blockDim.y + threadIdx.y) * (gridDim.x * blockDim.x)
        + blockIdx.x * blockDim.x + threadIdx.x;
    data[i] *= factor;
}
extern "C" __global__ void unsized(float* data) { data[0] = 1.0f; }
"#;

#[test]
fn native_cuda_c_declares_its_workgroup_size() {
    let Some(runtime) = runtime_with_nvrtc() else {
        return;
    };
    let device = runtime.open("cuda:0").unwrap();
    let stream = device.create_stream().unwrap();
    let module = device
        .load_module(KernelFormat::CUDA_C, NATIVE_CUDA_C.as_bytes())
        .unwrap();
    let scale = module.kernel("scale").unwrap();
    let data = device.alloc_from(&stream, &[2.0f32; 16 * 4]).unwrap();
    stream
        .launch(&Launch::new(&scale).workgroups(2, 2, 1).buffer(&data).scalar(0.5f32))
        .unwrap();
    assert_eq!(stream.read_to_vec(&data).unwrap(), vec![1.0f32; 64]);
    let error = module.kernel("unsized").unwrap_err();
    assert!(error.message().contains("declares no workgroup size"), "{error}");
    // A scalar block of the wrong size is refused host-side.
    let error = stream
        .launch(&Launch::new(&scale).workgroups(2, 2, 1).buffer(&data).scalar(0.5f64))
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
}

#[test]
fn a_compile_error_carries_the_nvrtc_log() {
    let Some(runtime) = runtime_with_nvrtc() else {
        return;
    };
    let device = runtime.open("cuda:0").unwrap();
    let error = device
        .load_module(
            KernelFormat::CUDA_C,
            b"extern \"C\" __global__ void broken() { undeclared = 1; }",
        )
        .unwrap_err();
    assert!(error.message().contains("nvrtcCompileProgram failed"), "{error}");
    assert!(error.message().contains("undeclared"), "{error}");
}

#[test]
fn timing_events_measure_elapsed_time_and_order_streams() {
    let Some(backend) = backend() else {
        return;
    };
    let device = backend.device_open(0).unwrap();
    let first = backend.stream_create(device).unwrap();
    let second = backend.stream_create(device).unwrap();
    let start = backend.event_create(device, true).unwrap();
    let end = backend.event_create(device, true).unwrap();
    let size = 256u64 << 20;
    let source = backend.buffer_allocate(device, size).unwrap();
    let target = backend.buffer_allocate(device, size).unwrap();
    backend.stream_fill(first, source, 0, size, &[7]).unwrap();
    backend.stream_record_event(first, start).unwrap();
    backend.stream_copy(first, source, 0, target, 0, size).unwrap();
    backend.stream_record_event(first, end).unwrap();
    backend.stream_wait_event(second, end).unwrap();
    let mut tail = [0u8; 4];
    // SAFETY: `tail` outlives the read: the stream is synchronized below.
    unsafe { backend.stream_read(second, target, size - 4, tail.as_mut_ptr(), 4) }.unwrap();
    backend.stream_synchronize(second).unwrap();
    assert_eq!(tail, [7; 4]);
    let nanoseconds = backend.event_elapsed_time(start, end).unwrap();
    assert!(nanoseconds > 0, "{nanoseconds}");
    let untimed = backend.event_create(device, false).unwrap();
    backend.stream_record_event(first, untimed).unwrap();
    backend.event_synchronize(untimed).unwrap();
    let error = backend.event_elapsed_time(start, untimed).unwrap_err();
    assert!(error.message().contains("without timing"), "{error}");
    for event in [start, end, untimed] {
        backend.event_destroy(event);
    }
    backend.stream_destroy(first);
    backend.stream_destroy(second);
    backend.buffer_free(source);
    backend.buffer_free(target);
    backend.device_close(device);
}

#[test]
fn allocations_past_the_memory_are_out_of_memory() {
    let Some(backend) = backend() else {
        return;
    };
    let device = backend.device_open(0).unwrap();
    let total = backend.device_info(0).unwrap().total_memory;
    let error = backend.buffer_allocate(device, total * 2).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::OutOfMemory, "{error}");
    backend.device_close(device);
}
