//! The backend on a real AMD GPU. Where the machine has none, every test says so and checks
//! nothing (and fails where `XHAL_REQUIRE_BACKENDS` names `rocm`).

mod support;

use support::{open_device, require_unless_absent};
use xhal_core::backend::Backend;
use xhal_core::{ErrorKind, Features, KernelFormat, Launch};
use xhal_rocm::{RocmBackend, RocmDriver};

/// The backend, or `None` (after saying why) where the machine has no AMD GPU.
fn backend() -> Option<RocmBackend> {
    let backend = RocmBackend::new(RocmDriver::from_env());
    if let Err(error) = backend.device_count() {
        require_unless_absent(&error.to_string());
        eprintln!("SKIPPED: no AMD GPU here, so this test checked nothing: {error}");
        return None;
    }
    Some(backend)
}

fn device() -> Option<xhal_core::Device> {
    Some(open_device(backend()?))
}

#[test]
fn device_info_is_truthful() {
    let Some(backend) = backend() else {
        return;
    };
    for index in 0..backend.device_count().unwrap() {
        let info = backend.device_info(index).unwrap();
        eprintln!("{info:#?}");
        assert!(!info.name.is_empty());
        assert_eq!(info.vendor, "AMD");
        assert!(info.total_memory > 0 && info.free_memory <= info.total_memory);
        assert!(info.max_workgroup_invocations >= 256);
        assert!(
            info.subgroup_size == 32 || info.subgroup_size == 64,
            "{}",
            info.subgroup_size
        );
        assert!(info.pci_bus_id.is_some());
        assert!(info.kernel_formats.contains(&KernelFormat::HSACO));
        assert!(info.features.contains(Features::TIMESTAMPS));
    }
}

#[test]
fn buffers_round_trip() {
    let Some(device) = device() else {
        return;
    };
    let stream = device.create_stream().unwrap();
    let data: Vec<u32> = (0..1 << 20).collect();
    let buffer = device.alloc_from(&stream, &data).unwrap();
    assert_eq!(stream.read_to_vec(&buffer).unwrap(), data);
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

#[test]
fn a_wgsl_kernel_runs_through_hiprtc() {
    let Some(device) = device() else {
        return;
    };
    if !device.info().kernel_formats.contains(&KernelFormat::HIP_C) {
        require_unless_absent("hiprtc is not installed");
        eprintln!("SKIPPED: hiprtc is not installed, so WGSL cannot reach this device");
        return;
    }
    let module = device.load_wgsl(SAXPY_WGSL).unwrap();
    let kernel = module.kernel("main").unwrap();
    let stream = device.create_stream().unwrap();
    let n = 1000;
    let x = device.alloc_from(&stream, &vec![1.0f32; n]).unwrap();
    let y = device.alloc_from(&stream, &vec![2.0f32; n]).unwrap();
    stream
        .launch(
            &Launch::new(&kernel)
                .workgroups_for_invocations(n as u64)
                .buffer(&x)
                .buffer(&y)
                .scalar(3.0f32)
                .scalar(n as u32),
        )
        .unwrap();
    assert_eq!(stream.read_to_vec(&y).unwrap(), vec![5.0f32; n]);
}

#[test]
fn a_kernel_without_a_workgroup_size_is_refused() {
    let Some(backend) = backend() else {
        return;
    };
    let device = backend.device_open(0).unwrap();
    if !backend
        .device_info(0)
        .unwrap()
        .kernel_formats
        .contains(&KernelFormat::HIP_C)
    {
        eprintln!("SKIPPED: hiprtc is not installed");
        return;
    }
    let module = backend
        .module_load(
            device,
            KernelFormat::HIP_C,
            b"extern \"C\" __global__ void unsized(unsigned* out) { out[threadIdx.x] = 1u; }",
        )
        .unwrap();
    let error = backend.kernel_get(module, "unsized").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    assert!(error.message().contains("reqd_work_group_size"), "{error}");
}
