//! The backend without the HIP runtime, with a runtime that finds no device, with a runtime
//! that fails on cue, and on the stub runtime's pretend device (tests/stub_hip.c: memory
//! is host memory, work happens at once, launches are recorded rather than run).

mod support;

use support::{code_object, open_device, require_unless_absent, Stub};
use xhal_core::backend::{Backend, BufferArg, LaunchArgs};
use xhal_core::{ErrorKind, Features, KernelFormat};
use xhal_rocm::{RocmBackend, RocmDriver};

#[test]
fn a_missing_runtime_is_driver_unavailable() {
    let backend = RocmBackend::new(RocmDriver::with_library_path("/nonexistent/libamdhip64.so"));
    let error = backend.device_count().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::DriverUnavailable, "{error}");
    assert!(error.message().contains("/nonexistent/libamdhip64.so"), "{error}");
    assert!(error.message().contains("install ROCm's HIP runtime"), "{error}");
    // Asking again gives the same answer, and describing or opening a device is refused too.
    assert_eq!(backend.device_count().unwrap_err(), error);
    assert_eq!(backend.device_info(0).unwrap_err().kind(), ErrorKind::DriverUnavailable);
    assert_eq!(backend.device_open(0).unwrap_err().kind(), ErrorKind::DriverUnavailable);
}

/// A library that is not a HIP runtime is refused the same way, naming the entry point it
/// lacks.
#[test]
fn a_library_without_the_api_is_driver_unavailable() {
    let backend = RocmBackend::new(RocmDriver::with_library_path("libc.so.6"));
    let error = backend.device_count().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::DriverUnavailable, "{error}");
    assert!(error.message().contains("has no hipInit"), "{error}");
}

#[test]
fn a_runtime_without_devices_is_driver_unavailable_with_the_reason() {
    let Some(stub) = Stub::new() else {
        return;
    };
    let backend = RocmBackend::new(RocmDriver::with_library_path(&stub.path));
    let error = backend.device_count().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::DriverUnavailable, "{error}");
    assert!(error.message().contains("finds no AMD GPU"), "{error}");
    assert!(
        error
            .message()
            .contains("hipGetDeviceCount answers hipErrorNoDevice (100)"),
        "{error}"
    );
    assert!(error.message().contains("/dev/kfd"), "{error}");
    assert_eq!(backend.device_open(0).unwrap_err().kind(), ErrorKind::DriverUnavailable);
}

/// ROCm's runtime on a machine without an AMD GPU fails hipInit itself with
/// hipErrorInvalidDevice (Debian's libamdhip64 5.2 does): that is no device, not a fault.
#[test]
fn hip_init_finding_no_device_is_driver_unavailable() {
    let Some(stub) = Stub::new() else {
        return;
    };
    stub.set_devices(1);
    stub.set_init_result(101);
    let error = RocmBackend::new(RocmDriver::with_library_path(&stub.path))
        .device_count()
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::DriverUnavailable, "{error}");
    assert!(
        error.message().contains("hipInit answers hipErrorInvalidDevice (101)"),
        "{error}"
    );
}

#[test]
fn a_failing_hip_init_names_the_call_and_the_error() {
    let Some(stub) = Stub::new() else {
        return;
    };
    stub.set_devices(1);
    stub.fail("hipInit", 2, 0);
    let error = RocmBackend::new(RocmDriver::with_library_path(&stub.path))
        .device_count()
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::DriverUnavailable, "{error}");
    assert!(
        error.message().contains("hipInit failed: hipErrorOutOfMemory (2)"),
        "{error}"
    );
}

#[test]
fn a_device_that_cannot_be_described_is_skipped_with_the_reason() {
    let Some(stub) = Stub::new() else {
        return;
    };
    stub.set_devices(1);
    stub.fail("hipDeviceGetAttribute", 1, 0);
    let error = RocmBackend::new(RocmDriver::with_library_path(&stub.path))
        .device_count()
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::DriverUnavailable, "{error}");
    assert!(
        error
            .message()
            .contains("hipDeviceGetAttribute failed: hipErrorInvalidValue (1)"),
        "{error}"
    );
    assert!(
        error.message().contains("hipDeviceAttributeMultiprocessorCount"),
        "{error}"
    );
}

/// One device of the stub, opened.
fn stub_device() -> Option<(Stub, RocmBackend, xhal_core::backend::DeviceHandle)> {
    let stub = Stub::new()?;
    stub.set_devices(1);
    let backend = RocmBackend::new(RocmDriver::with_library_path(&stub.path));
    let device = backend.device_open(0).expect("the stub's device opens");
    Some((stub, backend, device))
}

#[test]
fn vendor_errors_name_the_call_and_the_hip_error() {
    let Some((stub, backend, device)) = stub_device() else {
        return;
    };
    stub.fail("hipMalloc", 2, 0);
    let error = backend.buffer_allocate(device, 4096).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::OutOfMemory, "{error}");
    assert!(
        error
            .message()
            .contains("hipMalloc failed: hipErrorOutOfMemory (2): out of memory"),
        "{error}"
    );
    assert!(error.message().contains("allocating 4096 bytes"), "{error}");

    stub.fail("hipStreamCreateWithFlags", 1, 0);
    let error = backend.stream_create(device).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    assert!(
        error
            .message()
            .contains("hipStreamCreateWithFlags failed: hipErrorInvalidValue (1)"),
        "{error}"
    );

    stub.fail("hipSetDevice", 101, 0);
    let error = backend.event_create(device, false).unwrap_err();
    assert!(
        error
            .message()
            .contains("hipSetDevice failed: hipErrorInvalidDevice (101)"),
        "{error}"
    );
}

#[test]
fn the_stub_device_is_described_truthfully() {
    let Some(stub) = Stub::new() else {
        return;
    };
    stub.set_devices(2);
    let backend = RocmBackend::new(RocmDriver::with_library_path(&stub.path));
    assert_eq!(backend.device_count().unwrap(), 2);
    assert_eq!(backend.info().name, "rocm");
    let info = backend.device_info(1).unwrap();
    assert_eq!(info.name, "xhal stub HIP device (host memory)");
    assert_eq!(info.vendor, "AMD");
    assert_eq!(info.vendor_id, 0x1002);
    assert_eq!(info.device_id, 0x740c);
    assert!(info.device_type.is_gpu());
    assert_eq!(info.pci_bus_id.as_deref(), Some("0000:0f:01.0"));
    assert_eq!(info.uuid[0], 0xa1);
    assert_eq!(info.total_memory, 1 << 30);
    assert_eq!(info.max_workgroup_invocations, 1024);
    assert_eq!(info.max_workgroup_size, [1024, 1024, 1024]);
    assert_eq!(info.max_workgroup_count, [i32::MAX as u32, 65536, 65536]);
    assert_eq!(info.max_workgroup_memory, 65536);
    assert_eq!(info.subgroup_size, 64);
    assert!(
        info.driver_version.starts_with("HIP 6.2.41134"),
        "{}",
        info.driver_version
    );
    assert!(info
        .features
        .contains(Features::ATOMICS_64 | Features::F64 | Features::TIMESTAMPS | Features::F16));
    // The stub carries hiprtc, as ROCm's runtime did before 5.3.
    assert_eq!(info.kernel_formats, vec![KernelFormat::HIP_C, KernelFormat::HSACO]);
    assert_ne!(backend.device_info(0).unwrap().uuid, info.uuid);
    let error = backend.device_info(2).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotFound, "{error}");
}

#[test]
fn buffers_round_trip_through_the_stub_device() {
    let Some((stub, backend, device)) = stub_device() else {
        return;
    };
    let stream = backend.stream_create(device).unwrap();
    let buffer = backend.buffer_allocate(device, 64).unwrap();
    let other = backend.buffer_allocate(device, 64).unwrap();
    assert_eq!(stub.allocated(), 128);
    assert_eq!(backend.device_info(0).unwrap().free_memory, (1 << 30) - 128);
    let usage = backend.device_memory_usage(device).unwrap();
    assert_eq!(
        (usage.free, usage.total),
        ((1 << 30) - 128, 1 << 30),
        "hipMemGetInfo, now"
    );
    let data: Vec<u8> = (0..64).collect();
    let mut out = vec![0u8; 64];
    // SAFETY: `data` and `out` outlive the synchronize below.
    unsafe {
        backend.stream_write(stream, buffer, 0, data.as_ptr(), 64).unwrap();
        backend.stream_read(stream, buffer, 8, out.as_mut_ptr(), 16).unwrap();
    }
    backend.stream_synchronize(stream).unwrap();
    assert_eq!(&out[..16], &data[8..24]);

    // Copies, within one buffer where the ranges overlap, and between buffers.
    backend.stream_copy(stream, buffer, 0, buffer, 4, 32).unwrap();
    backend.stream_copy(stream, buffer, 0, other, 0, 64).unwrap();
    // SAFETY: as above.
    unsafe { backend.stream_read(stream, other, 0, out.as_mut_ptr(), 64).unwrap() };
    backend.stream_synchronize(stream).unwrap();
    let mut expected = data.clone();
    expected.copy_within(0..32, 4);
    assert_eq!(out, expected);

    // Fills with each pattern width.
    backend.stream_fill(stream, other, 0, 8, &[0xab]).unwrap();
    backend.stream_fill(stream, other, 8, 8, &[0x01, 0x02]).unwrap();
    backend.stream_fill(stream, other, 16, 8, &[1, 2, 3, 4]).unwrap();
    // SAFETY: as above.
    unsafe { backend.stream_read(stream, other, 0, out.as_mut_ptr(), 24).unwrap() };
    assert!(backend.stream_query(stream).unwrap());
    backend.stream_synchronize(stream).unwrap();
    assert_eq!(&out[..8], &[0xab; 8]);
    assert_eq!(&out[8..16], &[1, 2, 1, 2, 1, 2, 1, 2]);
    assert_eq!(&out[16..24], &[1, 2, 3, 4, 1, 2, 3, 4]);

    backend.stream_destroy(stream);
    backend.buffer_free(buffer);
    backend.buffer_free(other);
    assert_eq!(stub.allocated(), 0);
}

#[test]
fn misuse_is_refused_with_what_was_expected() {
    let Some((_stub, backend, device)) = stub_device() else {
        return;
    };
    let stream = backend.stream_create(device).unwrap();
    let buffer = backend.buffer_allocate(device, 16).unwrap();
    let error = backend.buffer_allocate(device, 0).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    let error = backend.buffer_allocate(device, 2 << 30).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::OutOfMemory, "{error}");
    assert!(error.message().contains("1073741824 bytes of memory"), "{error}");
    let data = [0u8; 32];
    // SAFETY: the call is refused before it reads anything.
    let error = unsafe { backend.stream_write(stream, buffer, 8, data.as_ptr(), 16) }.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::OutOfBounds, "{error}");
    // SAFETY: as above.
    let error = unsafe { backend.stream_read(stream, buffer, 0, std::ptr::null_mut(), 4) }.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    let error = backend.stream_fill(stream, buffer, 0, 16, &[1, 2, 3]).unwrap_err();
    assert!(error.message().contains("1, 2 or 4 bytes"), "{error}");
    let error = backend.stream_fill(stream, buffer, 2, 8, &[1, 2, 3, 4]).unwrap_err();
    assert!(error.message().contains("multiples"), "{error}");
    let error = backend
        .module_load(device, KernelFormat::SPIRV_KERNEL, &[0; 16])
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unsupported, "{error}");
    assert!(error.message().contains("accepts: hip-c, hsaco"), "{error}");
    let error = backend
        .module_load(device, KernelFormat::HSACO, b"not a code object")
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    assert!(error.message().contains("neither an ELF header"), "{error}");
    let error = backend
        .module_load(device, KernelFormat::HIP_C, &[0xff, 0xfe])
        .unwrap_err();
    assert!(error.message().contains("UTF-8"), "{error}");
}

#[test]
fn events_order_streams_and_measure_time() {
    let Some((stub, backend, device)) = stub_device() else {
        return;
    };
    let first = backend.stream_create(device).unwrap();
    let second = backend.stream_create(device).unwrap();
    let start = backend.event_create(device, true).unwrap();
    let end = backend.event_create(device, true).unwrap();
    let untimed = backend.event_create(device, false).unwrap();
    // Never recorded: complete, and nothing to wait for.
    assert!(backend.event_query(untimed).unwrap());
    backend.event_synchronize(untimed).unwrap();
    let error = backend.event_elapsed_time(start, end).unwrap_err();
    assert!(error.message().contains("never recorded"), "{error}");

    backend.stream_record_event(first, start).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    backend.stream_record_event(first, end).unwrap();
    backend.stream_record_event(first, untimed).unwrap();
    backend.stream_wait_event(second, untimed).unwrap();
    backend.event_synchronize(end).unwrap();
    assert!(backend.event_query(end).unwrap());
    let nanoseconds = backend.event_elapsed_time(start, end).unwrap();
    assert!(nanoseconds >= 4_000_000, "{nanoseconds} ns");
    let error = backend.event_elapsed_time(start, untimed).unwrap_err();
    assert!(error.message().contains("created without timing"), "{error}");

    // A failing wait names the call.
    stub.fail("hipStreamWaitEvent", 400, 0);
    let error = backend.stream_wait_event(second, untimed).unwrap_err();
    // The stub's hipGetErrorName does not know 400; the backend's own table does.
    assert!(
        error
            .message()
            .contains("hipStreamWaitEvent failed: hipErrorInvalidHandle (400)"),
        "{error}"
    );
    assert_eq!(error.kind(), ErrorKind::InvalidHandle, "{error}");
}

#[test]
fn an_execution_error_sticks_to_the_stream() {
    let Some((stub, backend, device)) = stub_device() else {
        return;
    };
    let stream = backend.stream_create(device).unwrap();
    let other = backend.stream_create(device).unwrap();
    let buffer = backend.buffer_allocate(device, 16).unwrap();
    let event = backend.event_create(device, false).unwrap();
    stub.fail("hipStreamSynchronize", 700, 0);
    let error = backend.stream_synchronize(stream).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::KernelFault, "{error}");
    assert!(
        error
            .message()
            .contains("hipStreamSynchronize failed: hipErrorIllegalAddress (700)"),
        "{error}"
    );
    stub.fail("", 0, 0);
    // Every later call on the stream returns it; another stream is unaffected.
    assert_eq!(backend.stream_synchronize(stream).unwrap_err(), error);
    assert_eq!(backend.stream_query(stream).unwrap_err(), error);
    assert_eq!(backend.stream_fill(stream, buffer, 0, 16, &[0]).unwrap_err(), error);
    assert_eq!(backend.stream_record_event(stream, event).unwrap_err(), error);
    backend.stream_fill(other, buffer, 0, 16, &[0]).unwrap();
    backend.stream_synchronize(other).unwrap();
    // A failure an event wait finds sticks to the stream the event was recorded on.
    let late = backend.stream_create(device).unwrap();
    backend.stream_record_event(late, event).unwrap();
    stub.fail("hipEventSynchronize", 719, 0);
    let error = backend.event_synchronize(event).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::KernelFault, "{error}");
    assert!(
        error
            .message()
            .contains("hipEventSynchronize failed: hipErrorLaunchFailure (719)"),
        "{error}"
    );
    stub.fail("", 0, 0);
    assert_eq!(backend.stream_synchronize(late).unwrap_err(), error);
    // An event recorded after the failure was found cannot be recorded at all.
    assert_eq!(backend.stream_record_event(late, event).unwrap_err(), error);
}

/// Reads the device pointer a launch passed, and the bytes behind it (the stub's device
/// memory is host memory).
fn pointed_bytes(pointer: &[u8], count: usize) -> Vec<u8> {
    let address = usize::from_ne_bytes(pointer.try_into().unwrap());
    // SAFETY: the stub's "device" pointers are host allocations of at least `count` bytes
    // from the pointer, still allocated.
    unsafe { std::slice::from_raw_parts(address as *const u8, count) }.to_vec()
}

#[test]
fn a_code_object_kernel_gets_its_arguments_by_the_argument_abi() {
    let Some((stub, backend, device)) = stub_device() else {
        return;
    };
    let code = code_object::with_kernels(&[
        code_object::kernel(
            "scale",
            &[
                ("global_buffer", 8, Some("data")),
                ("global_buffer", 8, None),
                ("by_value", 8, Some("params")),
            ],
            Some([64, 2, 1]),
        ),
        code_object::kernel("sizeless", &[("global_buffer", 8, None)], None),
        code_object::kernel(
            "local",
            &[("dynamic_shared_pointer", 4, Some("scratch"))],
            Some([1, 1, 1]),
        ),
    ]);
    stub.set_kernels("scale,sizeless,local");
    let module = backend.module_load(device, KernelFormat::HSACO, &code).unwrap();
    let error = backend.kernel_get(module, "missing").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotFound, "{error}");
    assert!(error.message().contains("it has: scale, sizeless, local"), "{error}");
    let error = backend.kernel_get(module, "sizeless").unwrap_err();
    assert!(error.message().contains("reqd_work_group_size"), "{error}");
    let error = backend.kernel_get(module, "local").unwrap_err();
    assert!(error.message().contains("dynamic_shared_pointer"), "{error}");

    let kernel = backend.kernel_get(module, "scale").unwrap();
    let stream = backend.stream_create(device).unwrap();
    let data = backend.buffer_allocate(device, 256).unwrap();
    let out = backend.buffer_allocate(device, 256).unwrap();
    let pattern: Vec<u8> = (0..=255).collect();
    // SAFETY: `pattern` outlives the synchronize.
    unsafe { backend.stream_write(stream, data, 0, pattern.as_ptr(), 256).unwrap() };
    backend.stream_synchronize(stream).unwrap();
    let scalars = [1u8, 2, 3, 4, 5, 6, 7, 8];
    let buffers = [
        BufferArg {
            buffer: data,
            offset: 32,
            size: 64,
        },
        BufferArg {
            buffer: out,
            offset: 0,
            size: 256,
        },
    ];
    let launch = |buffers: &[BufferArg], scalars: &[u8]| {
        backend.stream_launch(
            stream,
            &LaunchArgs {
                kernel,
                workgroups: [3, 2, 1],
                buffers,
                scalars,
            },
        )
    };
    stub.set_parameter_sizes(&[8, 8, 8]);
    launch(&buffers, &scalars).unwrap();
    assert_eq!(stub.launches(), 1);
    assert_eq!(stub.launch_dims(), [3, 2, 1, 64, 2, 1]);
    // Buffer 0 is its allocation's address plus the view's offset.
    assert_eq!(pointed_bytes(&stub.launch_parameter(0, 8), 4), [32, 33, 34, 35]);
    assert_eq!(stub.launch_parameter(2, 8), scalars);

    let error = launch(&buffers[..1], &scalars).unwrap_err();
    assert!(error.message().contains("takes 2 buffer(s) (`data`"), "{error}");
    let error = launch(&buffers, &scalars[..4]).unwrap_err();
    assert!(
        error.message().contains("of 8 bytes, but 4 bytes were given"),
        "{error}"
    );
    let error = launch(&buffers, &[]).unwrap_err();
    assert!(error.message().contains("no scalars were given"), "{error}");
    let error = backend
        .stream_launch(
            stream,
            &LaunchArgs {
                kernel,
                workgroups: [1, 0, 1],
                buffers: &buffers,
                scalars: &scalars,
            },
        )
        .unwrap_err();
    assert!(error.message().contains("0 workgroups in y"), "{error}");
    // 67108864 workgroups of 64 invocations are 2^32 invocations along x: within the grid
    // limit, but beyond what HIP launches.
    let error = backend
        .stream_launch(
            stream,
            &LaunchArgs {
                kernel,
                workgroups: [67_108_864, 1, 1],
                buffers: &buffers,
                scalars: &scalars,
            },
        )
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    assert!(
        error
            .message()
            .contains("make 4294967296 invocations; HIP launches at most 4294967295"),
        "{error}"
    );
    assert_eq!(stub.launches(), 1);

    stub.fail("hipModuleLaunchKernel", 701, 0);
    let error = launch(&buffers, &scalars).unwrap_err();
    assert!(error.message().contains("hipModuleLaunchKernel failed"), "{error}");
    assert!(
        error
            .message()
            .contains("launching kernel `scale` with 3x2x1 workgroups of 64x2x1"),
        "{error}"
    );
}

const SAXPY_WGSL: &str = r#"
struct Params { a: f32, n: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(128)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < params.n) { y[id.x] = params.a * x[id.x] + y[id.x]; }
}
"#;

fn saxpy_hip_c() -> String {
    xhal_core::kernel::parse_wgsl(SAXPY_WGSL)
        .unwrap()
        .to_c(xhal_core::kernel::Dialect::HipC, None)
        .unwrap()
        .text
}

/// HIP C written from WGSL goes through hiprtc; the launch fills the buffer-lengths
/// parameter the emitter added, and the workgroup size comes from the WGSL.
#[test]
fn hip_c_from_wgsl_is_compiled_and_launched_with_the_buffer_lengths() {
    let Some((stub, backend, device)) = stub_device() else {
        return;
    };
    // What hiprtc compiles this source to: `main_` with two pointers, the 8-byte scalar
    // block and the 16-byte lengths, as ROCm's compiler describes it (no argument names).
    stub.set_compiled_code(&code_object::with_kernels(&[code_object::kernel(
        "main_",
        &[
            ("global_buffer", 8, None),
            ("global_buffer", 8, None),
            ("by_value", 8, None),
            ("by_value", 16, None),
        ],
        None,
    )]));
    stub.set_kernels("main_");
    let module = backend
        .module_load(device, KernelFormat::HIP_C, saxpy_hip_c().as_bytes())
        .unwrap();
    // No driver topology names the stub's target, so hiprtc picks the current device's.
    assert_eq!(stub.compile_options(), "");
    let kernel = backend.kernel_get(module, "main").unwrap();
    let stream = backend.stream_create(device).unwrap();
    let x = backend.buffer_allocate(device, 1024).unwrap();
    let y = backend.buffer_allocate(device, 1024).unwrap();
    stub.set_parameter_sizes(&[8, 8, 8, 16]);
    let scalars = [0, 0, 0x80, 0x3f, 100, 0, 0, 0];
    backend
        .stream_launch(
            stream,
            &LaunchArgs {
                kernel,
                workgroups: [2, 1, 1],
                buffers: &[
                    BufferArg {
                        buffer: x,
                        offset: 0,
                        size: 400,
                    },
                    BufferArg {
                        buffer: y,
                        offset: 16,
                        size: 400,
                    },
                ],
                scalars: &scalars,
            },
        )
        .unwrap();
    assert_eq!(stub.launch_dims(), [2, 1, 1, 128, 1, 1]);
    assert_eq!(stub.launch_parameter(2, 8), scalars);
    let lengths = stub.launch_parameter(3, 16);
    assert_eq!(lengths[..8], 400u64.to_ne_bytes());
    assert_eq!(lengths[8..], 400u64.to_ne_bytes());
    let error = backend
        .stream_launch(
            stream,
            &LaunchArgs {
                kernel,
                workgroups: [2, 1, 1],
                buffers: &[BufferArg {
                    buffer: x,
                    offset: 0,
                    size: 400,
                }],
                scalars: &scalars,
            },
        )
        .unwrap_err();
    assert!(error.message().contains("takes 2 buffer(s)"), "{error}");
}

#[test]
fn a_hiprtc_failure_carries_the_compiler_log() {
    let Some((stub, backend, device)) = stub_device() else {
        return;
    };
    stub.set_compile_failure("xhal_module.hip:3:1: error: unknown type name 'flaot'");
    let error = backend
        .module_load(
            device,
            KernelFormat::HIP_C,
            b"extern \"C\" __global__ void k(flaot* x) {}",
        )
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    assert!(
        error
            .message()
            .contains("hiprtcCompileProgram failed: HIPRTC_ERROR_COMPILATION (6)"),
        "{error}"
    );
    assert!(
        error
            .message()
            .contains("hiprtc log:\nxhal_module.hip:3:1: error: unknown type name 'flaot'"),
        "{error}"
    );
}

/// The HIP runtime itself, where one is installed (Debian's libamdhip64-5 is enough): on a
/// machine without an AMD GPU it must report no device, with the reason, and not abort.
#[test]
fn the_installed_runtime_without_a_gpu_reports_no_device() {
    let backend = RocmBackend::new(RocmDriver::from_env());
    match backend.device_count() {
        Ok(count) => eprintln!("SKIPPED: this machine has {count} AMD GPU(s); tests/device.rs covers them"),
        Err(error) if error.message().contains("could not be loaded") => {
            require_unless_absent(&error.to_string());
            eprintln!("SKIPPED: no HIP runtime is installed here, so this test checked nothing: {error}");
        }
        Err(error) => {
            assert_eq!(error.kind(), ErrorKind::DriverUnavailable, "{error}");
            assert!(error.message().contains("finds no AMD GPU"), "{error}");
            eprintln!("reason: {error}");
        }
    }
}

/// Where ROCm's hiprtc is installed, HIP C written from WGSL compiles with it (for a fixed
/// target, which needs no GPU), and the backend reads the code object it produces.
#[test]
fn the_installed_hiprtc_compiles_hip_c_from_wgsl() {
    let Some(code) = compile_with_installed_hiprtc(&saxpy_hip_c(), "gfx90a") else {
        return;
    };
    let Some((stub, backend, device)) = stub_device() else {
        return;
    };
    stub.set_compiled_code(&code);
    stub.set_kernels("main_");
    let module = backend
        .module_load(device, KernelFormat::HIP_C, saxpy_hip_c().as_bytes())
        .unwrap();
    let kernel = backend.kernel_get(module, "main").unwrap();
    let stream = backend.stream_create(device).unwrap();
    let x = backend.buffer_allocate(device, 64).unwrap();
    // The compiler's own description of the scalar block (8 bytes) is enforced.
    let error = backend
        .stream_launch(
            stream,
            &LaunchArgs {
                kernel,
                workgroups: [1, 1, 1],
                buffers: &[
                    BufferArg {
                        buffer: x,
                        offset: 0,
                        size: 64,
                    },
                    BufferArg {
                        buffer: x,
                        offset: 0,
                        size: 64,
                    },
                ],
                scalars: &[0; 12],
            },
        )
        .unwrap_err();
    assert!(
        error.message().contains("of 8 bytes, but 12 bytes were given"),
        "{error}"
    );
}

/// Compiles `source` for `arch` with the system's hiprtc, or `None` (after saying why).
fn compile_with_installed_hiprtc(source: &str, arch: &str) -> Option<Vec<u8>> {
    use std::ffi::{c_char, c_int, c_void, CString};
    type Program = *mut c_void;
    let library = [
        "libhiprtc.so",
        "libhiprtc.so.7",
        "libhiprtc.so.6",
        "libhiprtc.so.5",
        "libamdhip64.so.5",
    ]
    .iter()
    // SAFETY: loading ROCm's hiprtc runs only its initialisers.
    .find_map(|name| unsafe { libloading::Library::new(*name) }.ok());
    let Some(library) = library else {
        require_unless_absent("no hiprtc is installed");
        eprintln!(
            "SKIPPED: no hiprtc is installed here (Debian's libamdhip64-5 carries one), so this test checked nothing"
        );
        return None;
    };
    // SAFETY: the declarations follow hiprtc.h.
    unsafe {
        let create = library
            .get::<unsafe extern "C" fn(
                *mut Program,
                *const c_char,
                *const c_char,
                c_int,
                *const *const c_char,
                *const *const c_char,
            ) -> c_int>(b"hiprtcCreateProgram")
            .ok()?;
        let compile = library
            .get::<unsafe extern "C" fn(Program, c_int, *const *const c_char) -> c_int>(b"hiprtcCompileProgram")
            .ok()?;
        let log_size = library
            .get::<unsafe extern "C" fn(Program, *mut usize) -> c_int>(b"hiprtcGetProgramLogSize")
            .ok()?;
        let log = library
            .get::<unsafe extern "C" fn(Program, *mut c_char) -> c_int>(b"hiprtcGetProgramLog")
            .ok()?;
        let code_size = library
            .get::<unsafe extern "C" fn(Program, *mut usize) -> c_int>(b"hiprtcGetCodeSize")
            .ok()?;
        let get_code = library
            .get::<unsafe extern "C" fn(Program, *mut c_char) -> c_int>(b"hiprtcGetCode")
            .ok()?;
        let source = CString::new(source).unwrap();
        let option = CString::new(format!("--offload-arch={arch}")).unwrap();
        let mut program: Program = std::ptr::null_mut();
        assert_eq!(
            create(
                &mut program,
                source.as_ptr(),
                c"saxpy.hip".as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null()
            ),
            0
        );
        let result = compile(program, 1, &option.as_ptr());
        let mut size = 0usize;
        log_size(program, &mut size);
        let mut text = vec![0u8; size.max(1)];
        log(program, text.as_mut_ptr().cast());
        assert_eq!(result, 0, "hiprtc log: {}", String::from_utf8_lossy(&text));
        code_size(program, &mut size);
        let mut code = vec![0u8; size];
        assert_eq!(get_code(program, code.as_mut_ptr().cast()), 0);
        Some(code)
    }
}

/// Through xhal's own API, as an application uses it: WGSL is translated host-side to HIP C
/// for the device (it lists `hip-c`), compiled, and launched by its WGSL name.
#[test]
fn the_runtime_translates_wgsl_to_hip_c_for_the_device() {
    let Some(stub) = Stub::new() else {
        return;
    };
    stub.set_devices(1);
    stub.set_compiled_code(&code_object::with_kernels(&[code_object::kernel(
        "main_",
        &[
            ("global_buffer", 8, None),
            ("global_buffer", 8, None),
            ("by_value", 8, None),
            ("by_value", 16, None),
        ],
        None,
    )]));
    stub.set_kernels("main_");
    let device = open_device(RocmBackend::new(RocmDriver::with_library_path(&stub.path)));
    let module = device.load_wgsl(SAXPY_WGSL).unwrap();
    let kernel = module.kernel("main").unwrap();
    let stream = device.create_stream().unwrap();
    let x = device.alloc_from(&stream, &[1.0f32; 300]).unwrap();
    let y = device.alloc_from(&stream, &[2.0f32; 300]).unwrap();
    stub.set_parameter_sizes(&[8, 8, 8, 16]);
    stream
        .launch(
            &xhal_core::Launch::new(&kernel)
                .workgroups_for_invocations(300)
                .buffer(&x)
                .buffer(&y)
                .scalar(3.0f32)
                .scalar(300u32),
        )
        .unwrap();
    stream.synchronize().unwrap();
    assert_eq!(stub.launch_dims(), [3, 1, 1, 128, 1, 1]);
    assert_eq!(stub.launch_parameter(2, 8)[..4], 3.0f32.to_ne_bytes());
    let lengths = stub.launch_parameter(3, 16);
    assert_eq!(lengths[..8], 1200u64.to_ne_bytes());
    assert_eq!(stream.read_to_vec(&y).unwrap(), vec![2.0f32; 300]);
}

/// Where HIP's headers are installed (ROCm's, or Debian's libamdhip64-dev), every
/// declaration the backend makes is compiled against them.
#[test]
fn the_declarations_match_the_installed_hip_headers() {
    let roots: Vec<std::path::PathBuf> = std::env::var_os("ROCM_PATH")
        .map(|root| std::path::PathBuf::from(root).join("include"))
        .into_iter()
        .chain(["/opt/rocm/include", "/usr/include"].map(std::path::PathBuf::from))
        .collect();
    let Some(include) = roots.iter().find(|root| root.join("hip/hip_runtime_api.h").exists()) else {
        require_unless_absent("no HIP headers are installed");
        eprintln!("SKIPPED: no HIP headers here (ROCm, or Debian's libamdhip64-dev), so this test checked nothing");
        return;
    };
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hip_declarations.c");
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let Ok(output) = std::process::Command::new(&compiler)
        .args([
            "-std=gnu11",
            "-fsyntax-only",
            "-Werror=incompatible-pointer-types",
            "-Werror=discarded-qualifiers",
        ])
        .arg("-I")
        .arg(include)
        .arg(&source)
        .output()
    else {
        require_unless_absent("no C compiler");
        eprintln!("SKIPPED: no C compiler `{compiler}`, so this test checked nothing");
        return;
    };
    assert!(
        output.status.success(),
        "{} does not match the headers in {}:\n{}",
        source.display(),
        include.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Set in the child process of [`hiprtc_compiles_for_the_overridden_target`].
const OVERRIDE_CHILD: &str = "XHAL_ROCM_TEST_OVERRIDE_CHILD";

/// ROCm's runtime uses the target HSA_OVERRIDE_GFX_VERSION names; hiprtc is told to compile
/// for it. Run in a child process, since the variable is the whole process's.
#[test]
fn hiprtc_compiles_for_the_overridden_target() {
    if std::env::var_os(OVERRIDE_CHILD).is_some() {
        return;
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "overridden_target_child", "--nocapture", "--test-threads=1"])
        .env(OVERRIDE_CHILD, "1")
        .env("HSA_OVERRIDE_GFX_VERSION", "10.3.0")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("1 passed") && !text.contains("SKIPPED"), "{text}");
}

#[test]
fn overridden_target_child() {
    if std::env::var_os(OVERRIDE_CHILD).is_none() {
        return;
    }
    let Some((stub, backend, device)) = stub_device() else {
        return;
    };
    assert!(backend.device_info(0).unwrap().driver_version.ends_with(", gfx1030"));
    stub.set_compiled_code(&code_object::with_kernels(&[]));
    backend.module_load(device, KernelFormat::HIP_C, b"// nothing").unwrap();
    assert_eq!(stub.compile_options(), "--offload-arch=gfx1030");
}

#[test]
fn launches_beyond_the_devices_limits_are_refused() {
    let Some(stub) = Stub::new() else {
        return;
    };
    stub.set_devices(2);
    let backend = RocmBackend::new(RocmDriver::with_library_path(&stub.path));
    let device = backend.device_open(0).unwrap();
    let other_device = backend.device_open(1).unwrap();
    stub.set_kernels("wide,scale");
    let code = code_object::with_kernels(&[
        code_object::kernel("wide", &[], Some([2048, 1, 1])),
        code_object::kernel("scale", &[("global_buffer", 8, None)], Some([64, 1, 1])),
    ]);
    let module = backend.module_load(device, KernelFormat::HSACO, &code).unwrap();
    let error = backend.kernel_get(module, "wide").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unsupported, "{error}");
    assert!(error.message().contains("2048x1x1 (2048 invocations)"), "{error}");
    assert!(error.message().contains("at most 1024"), "{error}");

    let kernel = backend.kernel_get(module, "scale").unwrap();
    let stream = backend.stream_create(device).unwrap();
    let buffer = backend.buffer_allocate(device, 64).unwrap();
    let buffers = [BufferArg {
        buffer,
        offset: 0,
        size: 64,
    }];
    let launch = |stream, workgroups| {
        backend.stream_launch(
            stream,
            &LaunchArgs {
                kernel,
                workgroups,
                buffers: &buffers,
                scalars: &[],
            },
        )
    };
    let error = launch(stream, [1, 65537, 1]).unwrap_err();
    assert!(error.message().contains("65537 workgroups in y"), "{error}");
    assert!(error.message().contains("1 to 65536"), "{error}");
    let elsewhere = backend.stream_create(other_device).unwrap();
    let error = launch(elsewhere, [1, 1, 1]).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidHandle, "{error}");
    assert!(
        error
            .message()
            .contains("belongs to rocm device 0, the stream is on device 1"),
        "{error}"
    );
}

/// Where neither the code object nor the source gives the scalar block's size, a block
/// larger than any a device takes is refused rather than passed.
#[test]
fn a_scalar_block_of_unknown_size_is_bounded() {
    let Some((stub, backend, device)) = stub_device() else {
        return;
    };
    // The compiled code object describes no kernel, so only the source tells.
    stub.set_compiled_code(&code_object::with_kernels(&[]));
    stub.set_kernels("k");
    let source = "extern \"C\" __global__ __attribute__((reqd_work_group_size(1, 1, 1))) void k(float* x, P p) {}";
    let module = backend
        .module_load(device, KernelFormat::HIP_C, source.as_bytes())
        .unwrap();
    let kernel = backend.kernel_get(module, "k").unwrap();
    let stream = backend.stream_create(device).unwrap();
    let buffer = backend.buffer_allocate(device, 64).unwrap();
    let buffers = [BufferArg {
        buffer,
        offset: 0,
        size: 64,
    }];
    let launch = |scalars: &[u8]| {
        backend.stream_launch(
            stream,
            &LaunchArgs {
                kernel,
                workgroups: [1, 1, 1],
                buffers: &buffers,
                scalars,
            },
        )
    };
    let error = launch(&[0; 2000]).unwrap_err();
    assert!(error.message().contains("larger than the 1024 bytes"), "{error}");
    stub.set_parameter_sizes(&[8, 1024]);
    launch(&[7; 12]).unwrap();
    // The block travels zero-padded, so the kernel never reads past what was given.
    let block = stub.launch_parameter(1, 1024);
    assert_eq!(block[..12], [7; 12]);
    assert!(block[12..].iter().all(|&byte| byte == 0));
}
