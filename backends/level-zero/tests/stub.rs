//! The backend against `tests/stub/ze_stub.c`, a test double of the Level Zero loader built
//! here with `cc`: one integrated GPU whose memory is host memory, whose commands run as they
//! are appended and whose launches record their arguments instead of running. Each scenario
//! builds its own copy (the stub's behaviour is chosen by macros), so tests do not share one.
//!
//! This proves what can be proved without Intel hardware: the "no driver" and "no device"
//! answers, vendor errors becoming xhal errors, and that every call carries what the Level
//! Zero API expects (device addresses with view offsets, the scalar block, buffer lengths,
//! group counts and sizes).

mod common;

use common::{fail_next, last_launch, spirv, stub, SAXPY};
use std::sync::Arc;
use xhal_backend::{Backend, BufferArg, ErrorKind, KernelFormat, LaunchArgs};
use xhal_level_zero::{LevelZeroBackend, LevelZeroDriver};

#[test]
fn no_driver_is_zero_devices_and_a_reason() {
    let Some(path) = stub("no-driver", &["STUB_MODE_NO_DRIVER"]) else {
        return;
    };
    let error = LevelZeroBackend::new(LevelZeroDriver::with_library_path(&path))
        .device_count()
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::DriverUnavailable, "{error}");
    assert!(error.message().contains("no Level Zero driver"), "{error}");
    assert!(error.message().contains("zeDriverGet lists none"), "{error}");
}

#[test]
fn no_device_is_zero_devices_and_a_reason() {
    let Some(path) = stub("no-device", &["STUB_MODE_NO_DEVICE"]) else {
        return;
    };
    let error = LevelZeroBackend::new(LevelZeroDriver::with_library_path(&path))
        .device_count()
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::DriverUnavailable, "{error}");
    assert!(error.message().contains("no usable device"), "{error}");
}

#[test]
fn a_device_the_driver_cannot_list_carries_the_drivers_description() {
    let Some(path) = stub("device-unavailable", &["STUB_FAIL=\"zeDeviceGet\""]) else {
        return;
    };
    let error = LevelZeroBackend::new(LevelZeroDriver::with_library_path(&path))
        .device_count()
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::DriverUnavailable, "{error}");
    assert!(
        error.message().contains("ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE")
            && error
                .message()
                .contains("the driver says: the stub's device needs what is not here"),
        "{error}"
    );
}

#[test]
fn a_failing_init_names_the_result() {
    let Some(path) = stub("init-fails", &["STUB_MODE_INIT_FAILS"]) else {
        return;
    };
    let error = LevelZeroBackend::new(LevelZeroDriver::with_library_path(&path))
        .device_count()
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::DriverUnavailable, "{error}");
    assert!(
        error.message().contains("zeInit failed") && error.message().contains("ZE_RESULT_ERROR_DEVICE_LOST"),
        "{error}"
    );
}

#[test]
fn a_device_is_described_from_its_properties() {
    let Some(path) = stub("describe", &[]) else { return };
    let backend = LevelZeroBackend::new(LevelZeroDriver::with_library_path(&path));
    assert_eq!(backend.info().name, "level-zero");
    assert_eq!(backend.device_count().unwrap(), 1);
    let info = backend.device_info(0).unwrap();
    assert_eq!(info.name, "xhal Level Zero stub (host memory)");
    assert_eq!(
        (info.vendor.as_str(), info.vendor_id, info.device_id),
        ("Intel", 0x8086, 0x1234)
    );
    assert_eq!(info.device_type, xhal_backend::DeviceType::IntegratedGpu);
    assert_eq!(info.uuid[0], 0xa0);
    assert_eq!(info.pci_bus_id.as_deref(), Some("0000:03:00.0"));
    assert_eq!(info.total_memory, 1 << 31);
    assert_eq!(info.max_allocation_size, 1 << 30);
    assert_eq!(info.max_workgroup_size, [1024, 1024, 64]);
    assert_eq!(info.max_workgroup_count, [65535; 3]);
    assert_eq!(info.max_workgroup_memory, 65536);
    assert_eq!(info.subgroup_size, 8);
    assert_eq!(info.kernel_formats, vec![KernelFormat::SPIRV_KERNEL]);
    assert!(info.features.contains(xhal_backend::Features::F64));
    assert!(info.features.contains(xhal_backend::Features::TIMESTAMPS));
    assert_eq!(backend.device_info(1).unwrap_err().kind(), ErrorKind::NotFound);
}

#[test]
fn transfers_copies_and_fills_reach_memory() {
    let Some(path) = stub("transfers", &[]) else { return };
    let backend = LevelZeroBackend::new(LevelZeroDriver::with_library_path(&path));
    let device = backend.device_open(0).unwrap();
    let stream = backend.stream_create(device).unwrap();
    let buffer = backend.buffer_allocate(device, 64).unwrap();
    let other = backend.buffer_allocate(device, 64).unwrap();
    let data: Vec<u8> = (0..64).collect();
    let mut out = vec![0u8; 64];
    // SAFETY: `data` and `out` outlive the synchronize below.
    unsafe {
        backend.stream_write(stream, buffer, 0, data.as_ptr(), 64).unwrap();
        backend.stream_fill(stream, other, 0, 64, &[0xee]).unwrap();
        backend.stream_copy(stream, buffer, 8, other, 16, 8).unwrap();
        // Overlapping ranges of one buffer go through a temporary.
        backend.stream_copy(stream, buffer, 0, buffer, 4, 16).unwrap();
        backend.stream_fill(stream, other, 32, 8, &[1, 2, 3, 4]).unwrap();
        backend.stream_read(stream, other, 0, out.as_mut_ptr(), 64).unwrap();
    }
    backend.stream_synchronize(stream).unwrap();
    assert!(out[..16].iter().all(|&byte| byte == 0xee));
    assert_eq!(out[16..24], data[8..16]);
    assert_eq!(out[32..40], [1, 2, 3, 4, 1, 2, 3, 4]);
    let mut moved = vec![0u8; 24];
    // SAFETY: `moved` outlives the synchronize.
    unsafe { backend.stream_read(stream, buffer, 0, moved.as_mut_ptr(), 24).unwrap() };
    assert!(
        backend.stream_query(stream).unwrap(),
        "the stub completes commands as they are appended"
    );
    backend.stream_synchronize(stream).unwrap();
    assert_eq!(moved[..4], data[..4]);
    assert_eq!(moved[4..20], data[..16]);
    // Misuse is refused before Level Zero sees it.
    let error = backend.stream_fill(stream, other, 0, 6, &[1, 2, 3, 4]).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    let error = backend.stream_copy(stream, buffer, 60, other, 0, 8).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::OutOfBounds, "{error}");
    backend.buffer_free(buffer);
    backend.buffer_free(other);
    backend.stream_destroy(stream);
    backend.device_close(device);
}

#[test]
fn events_order_streams_and_measure_time() {
    let Some(path) = stub("events", &[]) else { return };
    let backend = LevelZeroBackend::new(LevelZeroDriver::with_library_path(&path));
    let device = backend.device_open(0).unwrap();
    let (first, second) = (
        backend.stream_create(device).unwrap(),
        backend.stream_create(device).unwrap(),
    );
    let buffer = backend.buffer_allocate(device, 16).unwrap();
    let start = backend.event_create(device, true).unwrap();
    let end = backend.event_create(device, true).unwrap();
    let untimed = backend.event_create(device, false).unwrap();
    assert!(
        backend.event_query(start).unwrap(),
        "an event never recorded is complete"
    );
    backend.stream_record_event(first, start).unwrap();
    backend.stream_fill(first, buffer, 0, 16, &[7]).unwrap();
    backend.stream_record_event(first, end).unwrap();
    backend.stream_wait_event(second, end).unwrap();
    let mut out = [0u8; 16];
    // SAFETY: `out` outlives the event wait below.
    unsafe { backend.stream_read(second, buffer, 0, out.as_mut_ptr(), 16).unwrap() };
    backend.stream_record_event(second, untimed).unwrap();
    backend.event_synchronize(untimed).unwrap();
    assert_eq!(
        out, [7; 16],
        "waiting for an event recorded after a read delivers the read"
    );
    assert!(backend.event_query(end).unwrap());
    // The stub's clock advances 7 ticks after each command and its timer ticks are 2 ns; the
    // stub's API is 1.3, so an ordering barrier precedes each command after the first: the
    // start's barrier, an ordering barrier, the fill and another ordering barrier.
    let elapsed = backend.event_elapsed_time(start, end).unwrap();
    assert_eq!(elapsed, 4 * 7 * 2);
    let error = backend.event_elapsed_time(end, start).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument);
    assert!(error.message().contains("completed before"), "{error}");
    let error = backend.event_elapsed_time(start, untimed).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument);
    assert!(error.message().contains("without timing"), "{error}");
    for event in [start, end, untimed] {
        backend.event_destroy(event);
    }
    backend.buffer_free(buffer);
    backend.stream_destroy(first);
    backend.stream_destroy(second);
}

#[test]
fn a_launch_passes_device_addresses_the_scalar_block_and_lengths() {
    let Some(path) = stub("launch", &[]) else { return };
    let backend = LevelZeroBackend::new(LevelZeroDriver::with_library_path(&path));
    let device = backend.device_open(0).unwrap();
    let stream = backend.stream_create(device).unwrap();
    let module = backend
        .module_load(device, KernelFormat::SPIRV_KERNEL, &spirv(SAXPY))
        .unwrap();
    let kernel = backend.kernel_get(module, "saxpy").unwrap();
    let (x, y) = (
        backend.buffer_allocate(device, 1024).unwrap(),
        backend.buffer_allocate(device, 512).unwrap(),
    );
    let marker = [0x5au8; 4];
    // SAFETY: `marker` outlives the synchronize.
    unsafe { backend.stream_write(stream, x, 128, marker.as_ptr(), 4).unwrap() };
    let mut scalars = Vec::new();
    scalars.extend(2.5f32.to_ne_bytes());
    scalars.extend(100u32.to_ne_bytes());
    let buffers = [
        BufferArg {
            buffer: x,
            offset: 128,
            size: 400,
        },
        BufferArg {
            buffer: y,
            offset: 0,
            size: 512,
        },
    ];
    backend
        .stream_launch(
            stream,
            &LaunchArgs {
                kernel,
                workgroups: [3, 2, 1],
                buffers: &buffers,
                scalars: &scalars,
            },
        )
        .unwrap();
    backend.stream_synchronize(stream).unwrap();
    let record = last_launch(&path);
    assert_eq!(record.launches, 1);
    assert_eq!(record.groups, [3, 2, 1]);
    assert_eq!(record.group_size, [256, 1, 1], "from OpExecutionMode LocalSize");
    assert_eq!(record.arg_count, 4);
    assert_eq!(record.arg_size[..4], [8, 8, 8, 16]);
    // Argument 0 is the device address of x's byte 128: the stub's memory is host memory, so
    // the bytes written there are visible through it.
    let address = u64::from_ne_bytes(record.arg_value[0][..8].try_into().unwrap()) as usize as *const u8;
    // SAFETY: the stub's device memory is host memory, still allocated.
    assert_eq!(unsafe { std::slice::from_raw_parts(address, 4) }, marker);
    assert_eq!(record.arg_value[2][..8], scalars[..]);
    assert_eq!(record.arg_value[3][..8], 400u64.to_ne_bytes());
    assert_eq!(record.arg_value[3][8..16], 512u64.to_ne_bytes());

    // Misuse, each refused with what was expected.
    let launch = |buffers: &[BufferArg], scalars: &[u8], workgroups: [u32; 3]| {
        backend
            .stream_launch(
                stream,
                &LaunchArgs {
                    kernel,
                    workgroups,
                    buffers,
                    scalars,
                },
            )
            .unwrap_err()
    };
    let error = launch(&buffers[..1], &scalars, [1, 1, 1]);
    assert!(
        error.message().contains("takes 2 buffer(s), but 1 were given"),
        "{error}"
    );
    let error = launch(&buffers, &scalars[..4], [1, 1, 1]);
    assert!(
        error.message().contains("scalar block of 8 bytes, but 4 bytes"),
        "{error}"
    );
    let error = launch(&buffers, &[], [1, 1, 1]);
    assert!(error.message().contains("no scalars were given"), "{error}");
    let error = launch(&buffers, &scalars, [0, 1, 1]);
    assert!(error.message().contains("workgroup count in x is 0"), "{error}");
    let error = launch(&buffers, &scalars, [70000, 1, 1]);
    assert!(error.message().contains("65535"), "{error}");
    let misaligned = [
        BufferArg {
            offset: 4,
            ..buffers[0]
        },
        buffers[1],
    ];
    let error = launch(&misaligned, &scalars, [1, 1, 1]);
    assert!(error.message().contains("not a multiple of 64"), "{error}");
    assert_eq!(last_launch(&path).launches, 1, "no refused launch reached the driver");

    let error = backend.kernel_get(module, "nope").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotFound);
    assert!(error.message().contains("it has: saxpy"), "{error}");
    backend.kernel_destroy(kernel);
    backend.module_destroy(module);
    backend.buffer_free(x);
    backend.buffer_free(y);
    backend.stream_destroy(stream);
}

#[test]
fn entry_points_are_found_by_their_c_symbol() {
    let Some(path) = stub("symbols", &[]) else { return };
    let backend = LevelZeroBackend::new(LevelZeroDriver::with_library_path(&path));
    let device = backend.device_open(0).unwrap();
    let source = "@group(0) @binding(0) var<storage, read_write> d: array<u32, 4>;\n\
                  @compute @workgroup_size(4, 2, 1)\nfn main() { d[0] = 1u; }\n";
    let module = backend
        .module_load(device, KernelFormat::SPIRV_KERNEL, &spirv(source))
        .unwrap();
    let kernel = backend.kernel_get(module, "main").unwrap();
    let stream = backend.stream_create(device).unwrap();
    let buffer = backend.buffer_allocate(device, 16).unwrap();
    let buffers = [BufferArg {
        buffer,
        offset: 0,
        size: 16,
    }];
    backend
        .stream_launch(
            stream,
            &LaunchArgs {
                kernel,
                workgroups: [1, 1, 1],
                buffers: &buffers,
                scalars: &[],
            },
        )
        .unwrap();
    let record = last_launch(&path);
    assert_eq!(
        (record.arg_count, record.group_size),
        (1, [4, 2, 1]),
        "no scalars, no lengths"
    );
    let error = backend
        .stream_launch(
            stream,
            &LaunchArgs {
                kernel,
                workgroups: [1, 1, 1],
                buffers: &buffers,
                scalars: &[1, 2, 3, 4],
            },
        )
        .unwrap_err();
    assert!(error.message().contains("takes no scalars"), "{error}");
    backend.stream_destroy(stream);
}

#[test]
fn modules_other_than_kernel_spirv_are_refused() {
    let Some(path) = stub("formats", &[]) else { return };
    let backend = LevelZeroBackend::new(LevelZeroDriver::with_library_path(&path));
    let device = backend.device_open(0).unwrap();
    let error = backend
        .module_load(device, KernelFormat::CUDA_C, b"__global__ void k() {}")
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unsupported);
    assert!(error.message().contains("spirv-kernel"), "{error}");
    let error = backend
        .module_load(device, KernelFormat::SPIRV_KERNEL, b"not SPIR-V, not even close")
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument);
    assert!(error.message().contains("magic number"), "{error}");
}

#[test]
fn a_failed_allocation_is_out_of_memory_naming_the_call() {
    let Some(path) = stub("fail-alloc", &["STUB_FAIL=\"zeMemAllocDevice\""]) else {
        return;
    };
    let backend = LevelZeroBackend::new(LevelZeroDriver::with_library_path(&path));
    let device = backend.device_open(0).unwrap();
    let error = backend.buffer_allocate(device, 256).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::OutOfMemory, "{error}");
    assert!(
        error.message().contains("zeMemAllocDevice failed")
            && error.message().contains("ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY"),
        "{error}"
    );
    let error = backend.buffer_allocate(device, 1 << 31).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::OutOfMemory);
    assert!(error.message().contains("maxMemAllocSize"), "{error}");
}

#[test]
fn a_failed_build_carries_the_build_log() {
    let Some(path) = stub("fail-build", &["STUB_FAIL=\"zeModuleCreate\""]) else {
        return;
    };
    let backend = LevelZeroBackend::new(LevelZeroDriver::with_library_path(&path));
    let device = backend.device_open(0).unwrap();
    let error = backend
        .module_load(device, KernelFormat::SPIRV_KERNEL, &spirv(SAXPY))
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    assert!(
        error.message().contains("ZE_RESULT_ERROR_MODULE_BUILD_FAILURE"),
        "{error}"
    );
    assert!(error.message().contains("the stub cannot build this module"), "{error}");
}

#[test]
fn a_lost_device_sticks_to_the_stream() {
    let Some(path) = stub("fail-sync", &["STUB_FAIL=\"zeCommandListHostSynchronize\""]) else {
        return;
    };
    let backend = LevelZeroBackend::new(LevelZeroDriver::with_library_path(&path));
    let device = backend.device_open(0).unwrap();
    let stream = backend.stream_create(device).unwrap();
    let buffer = backend.buffer_allocate(device, 16).unwrap();
    backend.stream_fill(stream, buffer, 0, 16, &[1]).unwrap();
    let error = backend.stream_synchronize(stream).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::DeviceLost, "{error}");
    assert!(
        error.message().contains("zeCommandListHostSynchronize failed")
            && error.message().contains("ZE_RESULT_ERROR_DEVICE_LOST"),
        "{error}"
    );
    assert_eq!(backend.stream_fill(stream, buffer, 0, 16, &[2]).unwrap_err(), error);
    assert_eq!(backend.stream_query(stream).unwrap_err(), error);
}

/// An append reports what its submission met, since an immediate list submits as it appends: a
/// lost device, or device memory the submission could not get, sticks to the stream as a failed
/// synchronize does; a refused command (validation, host memory) enqueued nothing, and the stream
/// goes on.
#[test]
fn an_append_that_fails_the_device_or_the_work_sticks_and_a_refused_one_does_not() {
    let Some(path) = stub("fail-append", &[]) else {
        return;
    };
    let backend = LevelZeroBackend::new(LevelZeroDriver::with_library_path(&path));
    let device = backend.device_open(0).unwrap();
    let buffer = backend.buffer_allocate(device, 16).unwrap();
    for (code, kind, sticks) in [
        (0x7000_0001, ErrorKind::DeviceLost, true),
        (0x7000_0006, ErrorKind::DeviceLost, true),
        (0x7000_0003, ErrorKind::OutOfMemory, true),
        (0x7000_0002, ErrorKind::OutOfMemory, false),
        (0x7800_0004, ErrorKind::InvalidArgument, false),
        (0x7800_0008, ErrorKind::InvalidArgument, false),
        (0x7800_0003, ErrorKind::Unsupported, false),
    ] {
        let stream = backend.stream_create(device).unwrap();
        fail_next(&path, "zeCommandListAppendMemoryFill", code, 1);
        let error = backend.stream_fill(stream, buffer, 0, 16, &[1]).unwrap_err();
        assert_eq!(error.kind(), kind, "{code:#x}: {error}");
        assert!(
            error.message().contains("zeCommandListAppendMemoryFill failed"),
            "{error}"
        );
        // The driver would take the next fill.
        let next = backend.stream_fill(stream, buffer, 0, 16, &[2]);
        if sticks {
            assert_eq!(next.unwrap_err(), error, "{code:#x}");
            assert_eq!(backend.stream_query(stream).unwrap_err(), error, "{code:#x}");
            assert_eq!(backend.stream_synchronize(stream).unwrap_err(), error, "{code:#x}");
        } else {
            next.unwrap_or_else(|next| panic!("{code:#x}: {next}"));
            backend.stream_synchronize(stream).unwrap();
            let mut bytes = [0u8; 16];
            // SAFETY: `bytes` outlives the synchronize.
            unsafe { backend.stream_read(stream, buffer, 0, bytes.as_mut_ptr(), 16).unwrap() };
            backend.stream_synchronize(stream).unwrap();
            assert_eq!(bytes, [2; 16], "{code:#x}");
        }
        backend.stream_destroy(stream);
    }
}

/// A loader without `zeCommandListHostSynchronize` (before API 1.6): a stream synchronizes
/// through a barrier that signals an event.
#[test]
fn streams_synchronize_without_command_list_host_synchronize() {
    let Some(path) = stub("no-host-sync", &["STUB_NO_HOST_SYNC"]) else {
        return;
    };
    let backend = Arc::new(LevelZeroBackend::new(LevelZeroDriver::with_library_path(&path)));
    let device = backend.device_open(0).unwrap();
    let stream = backend.stream_create(device).unwrap();
    let buffer = backend.buffer_allocate(device, 8).unwrap();
    let mut out = [0u8; 8];
    backend.stream_fill(stream, buffer, 0, 8, &[3, 0]).unwrap();
    // SAFETY: `out` outlives the synchronize.
    unsafe { backend.stream_read(stream, buffer, 0, out.as_mut_ptr(), 8).unwrap() };
    assert!(backend.stream_query(stream).unwrap());
    backend.stream_synchronize(stream).unwrap();
    assert_eq!(out, [3, 0, 3, 0, 3, 0, 3, 0]);
}

/// `XHAL_LEVEL_ZERO_LOADER` names the library `from_env` opens (no other test of this binary
/// reads it, so setting it here races with nothing).
#[test]
fn the_loader_variable_chooses_the_library() {
    let Some(path) = stub("variable", &["STUB_MODE_NO_DRIVER"]) else {
        return;
    };
    std::env::set_var("XHAL_LEVEL_ZERO_LOADER", &path);
    let error = LevelZeroBackend::new(LevelZeroDriver::from_env())
        .device_count()
        .unwrap_err();
    std::env::remove_var("XHAL_LEVEL_ZERO_LOADER");
    assert_eq!(error.kind(), ErrorKind::DriverUnavailable, "{error}");
    assert!(error.message().contains(&path.display().to_string()), "{error}");
}

/// Level Zero must not destroy a kernel or module the device still references: a launch holds
/// its kernel and module until it is seen complete.
#[test]
fn a_queued_launch_keeps_its_kernel_and_module() {
    let Some(path) = stub("lifetimes", &[]) else { return };
    let backend = LevelZeroBackend::new(LevelZeroDriver::with_library_path(&path));
    let device = backend.device_open(0).unwrap();
    let stream = backend.stream_create(device).unwrap();
    let module = backend
        .module_load(device, KernelFormat::SPIRV_KERNEL, &spirv(SAXPY))
        .unwrap();
    let kernel = backend.kernel_get(module, "saxpy").unwrap();
    let (x, y) = (
        backend.buffer_allocate(device, 64).unwrap(),
        backend.buffer_allocate(device, 64).unwrap(),
    );
    let buffers = [
        BufferArg {
            buffer: x,
            offset: 0,
            size: 64,
        },
        BufferArg {
            buffer: y,
            offset: 0,
            size: 64,
        },
    ];
    let scalars = [0u8; 8];
    backend
        .stream_launch(
            stream,
            &LaunchArgs {
                kernel,
                workgroups: [1, 1, 1],
                buffers: &buffers,
                scalars: &scalars,
            },
        )
        .unwrap();
    backend.kernel_destroy(kernel);
    backend.module_destroy(module);
    let record = last_launch(&path);
    assert_eq!(
        (record.kernels_alive, record.modules_alive),
        (1, 1),
        "held by the queued launch"
    );
    backend.stream_synchronize(stream).unwrap();
    let record = last_launch(&path);
    assert_eq!(
        (record.kernels_alive, record.modules_alive),
        (0, 0),
        "released once it completed"
    );
}
