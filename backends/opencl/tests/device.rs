//! The backend on a real OpenCL device (PoCL where nothing else is installed).

use std::sync::Arc;
use xhal_core::backend::{Backend, BufferArg, DeviceHandle, LaunchArgs, StreamHandle};
use xhal_core::{ErrorKind, Features, KernelFormat, Launch, Runtime};
use xhal_opencl::{OpenClBackend, OpenClDriver};

/// Fails when CI requires the backend (`XHAL_REQUIRE_BACKENDS` names `opencl`) and it is
/// missing: a missing driver must never pass as a quiet skip there.
fn require_unless_absent(reason: &str) {
    let required = std::env::var("XHAL_REQUIRE_BACKENDS").unwrap_or_default();
    assert!(
        !required.split(',').any(|name| name.trim() == "opencl"),
        "XHAL_REQUIRE_BACKENDS names opencl, but it is unavailable: {reason}"
    );
}

/// The backend, or `None` (after saying why) where the machine has no OpenCL device.
fn backend() -> Option<OpenClBackend> {
    let backend = OpenClBackend::new(OpenClDriver::from_env());
    if let Err(error) = backend.device_count() {
        require_unless_absent(&error.to_string());
        eprintln!("SKIPPED: no OpenCL device here, so this test checked nothing: {error}");
        return None;
    }
    Some(backend)
}

/// A runtime with just this backend.
fn runtime() -> Option<Runtime> {
    let backend = backend()?;
    let runtime = Runtime::builder()
        .without_static_backends()
        .without_plugin_search()
        .backend(Arc::new(backend))
        .build()
        .unwrap();
    Some(runtime)
}

const SAXPY: &str = r#"
typedef struct { float a; uint n; } Params;

__kernel __attribute__((reqd_work_group_size(64, 1, 1)))
void saxpy(__global const float* x, __global float* y, Params params) {
    uint i = get_global_id(0);
    if (i < params.n) { y[i] = params.a * x[i] + y[i]; }
}

__kernel __attribute__((reqd_work_group_size(8, 2, 1)))
void scale(__global float* data, float factor) {
    size_t i = get_global_id(1) * get_global_size(0) + get_global_id(0);
    data[i] *= factor;
}

__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void mark(__global uint* out) {
    out[0] = 7u;
}

__kernel void unsized(__global uint* out) {
    out[get_global_id(0)] = 1u;
}
"#;

#[test]
fn device_info_is_truthful() {
    let Some(backend) = backend() else {
        return;
    };
    let count = backend.device_count().unwrap();
    assert!(count >= 1);
    for index in 0..count {
        let info = backend.device_info(index).unwrap();
        eprintln!("{info:#?}");
        assert!(!info.name.is_empty());
        assert!(!info.vendor.is_empty());
        assert!(info.total_memory > 0);
        assert!(info.free_memory <= info.total_memory);
        assert!(info.max_allocation_size > 0 && info.max_allocation_size <= info.total_memory);
        assert!(info.max_workgroup_invocations >= 1);
        assert!(info.max_workgroup_size.iter().all(|&size| size >= 1));
        assert!(info.max_workgroup_memory > 0);
        assert!(info.buffer_offset_alignment.is_power_of_two());
        assert!(info.max_buffer_arguments >= 8, "{}", info.max_buffer_arguments);
        assert!(info.max_scalar_block_size >= 128, "{}", info.max_scalar_block_size);
        assert!(info.kernel_formats.contains(&KernelFormat::OPENCL_C));
        assert!(!info.kernel_formats.contains(&KernelFormat::WGSL));
        assert!(info.features.contains(Features::ATOMICS_32));
        if info.name.starts_with("pthread") || info.name.starts_with("cpu-") {
            // PoCL's CPU device: a CPU with doubles and profiling, taking no IL in Debian's build.
            assert_eq!(info.device_type, xhal_core::DeviceType::Cpu);
            assert!(info.features.contains(Features::F64));
            assert!(info.features.contains(Features::TIMESTAMPS));
            // PoCL lists cl_khr_int64_base_atomics and cl_khr_int64_extended_atomics.
            assert!(info.features.contains(Features::ATOMICS_64));
        }
        // The identity is stable: asking again gives the same uuid.
        assert_eq!(backend.device_info(index).unwrap().uuid, info.uuid);
    }
    let error = backend.device_info(count).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotFound, "{error}");
}

/// Backend-level helpers: write `data` at `offset`, read `size` bytes at `offset`.
fn write(
    backend: &OpenClBackend,
    stream: StreamHandle,
    buffer: xhal_core::backend::BufferHandle,
    offset: u64,
    data: &[u8],
) {
    // SAFETY: `data` outlives the write: the stream is synchronized before returning.
    unsafe { backend.stream_write(stream, buffer, offset, data.as_ptr(), data.len() as u64) }.unwrap();
    backend.stream_synchronize(stream).unwrap();
}

fn read(
    backend: &OpenClBackend,
    stream: StreamHandle,
    buffer: xhal_core::backend::BufferHandle,
    offset: u64,
    size: usize,
) -> Vec<u8> {
    let mut out = vec![0u8; size];
    // SAFETY: `out` outlives the read: the stream is synchronized before returning.
    unsafe { backend.stream_read(stream, buffer, offset, out.as_mut_ptr(), size as u64) }.unwrap();
    backend.stream_synchronize(stream).unwrap();
    out
}

fn open(backend: &OpenClBackend) -> (DeviceHandle, StreamHandle) {
    let device = backend.device_open(0).unwrap();
    let stream = backend.stream_create(device).unwrap();
    (device, stream)
}

#[test]
fn copies_and_fills_at_odd_offsets_and_lengths() {
    let Some(backend) = backend() else {
        return;
    };
    let (device, stream) = open(&backend);
    let size = 1001usize;
    let first = backend.buffer_allocate(device, size as u64).unwrap();
    let second = backend.buffer_allocate(device, size as u64).unwrap();
    let mut model_first: Vec<u8> = (0..size).map(|i| (i * 7 + 3) as u8).collect();
    let mut model_second = vec![0u8; size];
    write(&backend, stream, first, 0, &model_first);
    write(&backend, stream, second, 0, &model_second);

    // A write at an odd offset and length.
    let patch: Vec<u8> = (0..37).map(|i| 200u8.wrapping_add(i)).collect();
    write(&backend, stream, first, 5, &patch);
    model_first[5..42].copy_from_slice(&patch);

    // Fills with each pattern size, at offsets that are multiples of the pattern only.
    backend.stream_fill(stream, second, 3, 11, &[0xab]).unwrap();
    model_second[3..14].fill(0xab);
    backend.stream_fill(stream, second, 18, 10, &[0x12, 0x34]).unwrap();
    for chunk in model_second[18..28].chunks_mut(2) {
        chunk.copy_from_slice(&[0x12, 0x34]);
    }
    backend.stream_fill(stream, second, 996, 4, &[1, 2, 3, 4]).unwrap();
    model_second[996..1000].copy_from_slice(&[1, 2, 3, 4]);
    let refused = backend.stream_fill(stream, second, 2, 8, &[1, 2, 3, 4]).unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::InvalidArgument, "{refused}");

    // Copies between buffers at odd offsets, and overlapping copies within one buffer both ways.
    backend.stream_copy(stream, first, 1, second, 101, 333).unwrap();
    model_second[101..434].copy_from_slice(&model_first[1..334]);
    backend.stream_copy(stream, first, 10, first, 13, 500).unwrap();
    model_first.copy_within(10..510, 13);
    backend.stream_copy(stream, first, 613, first, 600, 301).unwrap();
    model_first.copy_within(613..914, 600);
    backend.stream_copy(stream, second, 7, second, 7, 9).unwrap();

    assert_eq!(read(&backend, stream, first, 0, size), model_first);
    assert_eq!(read(&backend, stream, second, 0, size), model_second);
    assert_eq!(read(&backend, stream, first, 999, 2), model_first[999..]);

    let past = backend.stream_copy(stream, first, 900, second, 0, 102).unwrap_err();
    assert_eq!(past.kind(), ErrorKind::OutOfBounds, "{past}");
    backend.stream_destroy(stream);
    backend.buffer_free(first);
    backend.buffer_free(second);
    backend.device_close(device);
}

#[test]
fn saxpy_follows_the_argument_abi() {
    let Some(runtime) = runtime() else {
        return;
    };
    let device = runtime.open("opencl:0").unwrap();
    let stream = device.create_stream().unwrap();
    let n = 1000usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let y = vec![1.0f32; n];
    let x_buffer = device.alloc_from(&stream, &x).unwrap();
    let y_buffer = device.alloc_from(&stream, &y).unwrap();
    let module = device.load_module(KernelFormat::OPENCL_C, SAXPY.as_bytes()).unwrap();
    let kernel = module.kernel("saxpy").unwrap();
    for _ in 0..3 {
        stream
            .launch(
                &Launch::new(&kernel)
                    .workgroups(n.div_ceil(64) as u32, 1, 1)
                    .buffer(&x_buffer)
                    .buffer(&y_buffer)
                    .scalar(2.0f32)
                    .scalar(n as u32),
            )
            .unwrap();
    }
    let back = stream.read_to_vec(&y_buffer).unwrap();
    let expected: Vec<f32> = (0..n).map(|i| 1.0 + 6.0 * i as f32).collect();
    assert_eq!(back, expected);

    // A view at an offset the device aligns sub-buffers to binds as a sub-buffer.
    let alignment = device.info().buffer_offset_alignment as usize / 4;
    let count = 64usize;
    stream
        .launch(
            &Launch::new(&kernel)
                .workgroups(1, 1, 1)
                .buffer(x_buffer.slice(alignment..alignment + count))
                .buffer(y_buffer.slice(alignment..alignment + count))
                .scalar(1.0f32)
                .scalar(count as u32),
        )
        .unwrap();
    let back = stream.read_to_vec(&y_buffer).unwrap();
    for (i, value) in back.iter().enumerate() {
        let mut expected = 1.0 + 6.0 * i as f32;
        if (alignment..alignment + count).contains(&i) {
            expected += i as f32;
        }
        assert_eq!(*value, expected, "element {i}");
    }

    // A single scalar as the block, and a 2-D launch.
    let kernel = module.kernel("scale").unwrap();
    let data = device.alloc_from(&stream, &[2.0f32; 16 * 4]).unwrap();
    stream
        .launch(&Launch::new(&kernel).workgroups(2, 2, 1).buffer(&data).scalar(0.5f32))
        .unwrap();
    assert_eq!(stream.read_to_vec(&data).unwrap(), vec![1.0f32; 64]);
}

/// Launches on more views than a buffer keeps sub-buffers for, twice round, so that views
/// are bound from a kept sub-buffer, made again after being dropped from the cache, and
/// dropped while launches that bind them are still queued: every result must be right.
#[test]
fn views_launched_again_and_again_reuse_their_sub_buffers_correctly() {
    let Some(runtime) = runtime() else {
        return;
    };
    let device = runtime.open("opencl:0").unwrap();
    let stream = device.create_stream().unwrap();
    let kernel = device
        .load_module(KernelFormat::OPENCL_C, SAXPY.as_bytes())
        .unwrap()
        .kernel("saxpy")
        .unwrap();
    let width = (device.info().buffer_offset_alignment as usize / 4).max(1);
    let views = 20usize;
    let x_buffer = device.alloc_from(&stream, &vec![1.0f32; width * views]).unwrap();
    let y_buffer = device.alloc_from(&stream, &vec![0.0f32; width * views]).unwrap();
    for _ in 0..2 {
        for view in 0..views {
            let range = view * width..(view + 1) * width;
            stream
                .launch(
                    &Launch::new(&kernel)
                        .workgroups(width.div_ceil(64) as u32, 1, 1)
                        .buffer(x_buffer.slice(range.clone()))
                        .buffer(y_buffer.slice(range))
                        .scalar((view + 1) as f32)
                        .scalar(width as u32),
                )
                .unwrap();
        }
    }
    let back = stream.read_to_vec(&y_buffer).unwrap();
    for (i, value) in back.iter().enumerate() {
        assert_eq!(*value, 2.0 * (i / width + 1) as f32, "element {i} (view {})", i / width);
    }
}

#[test]
fn offsets_off_the_base_address_alignment_are_refused_naming_it() {
    let Some(backend) = backend() else {
        return;
    };
    let (device, stream) = open(&backend);
    let alignment = backend.device_info(0).unwrap().buffer_offset_alignment as u64;
    let module = backend
        .module_load(device, KernelFormat::OPENCL_C, SAXPY.as_bytes())
        .unwrap();
    let kernel = backend.kernel_get(module, "mark").unwrap();
    let buffer = backend.buffer_allocate(device, 4 * alignment).unwrap();
    if alignment > 1 {
        let views = [BufferArg {
            buffer,
            offset: alignment / 2,
            size: 4,
        }];
        let error = backend
            .stream_launch(
                stream,
                &LaunchArgs {
                    kernel,
                    workgroups: [1, 1, 1],
                    buffers: &views,
                    scalars: &[],
                },
            )
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
        // The checked adapter refuses it, against the device's buffer offset alignment, which
        // is CL_DEVICE_MEM_BASE_ADDR_ALIGN.
        assert!(
            error
                .message()
                .contains("the buffer offset alignment of opencl device 0"),
            "{error}"
        );
        assert!(error.message().contains(&alignment.to_string()), "{error}");
    }
    let views = [BufferArg {
        buffer,
        offset: alignment,
        size: 4,
    }];
    backend
        .stream_launch(
            stream,
            &LaunchArgs {
                kernel,
                workgroups: [1, 1, 1],
                buffers: &views,
                scalars: &[],
            },
        )
        .unwrap();
    let back = read(&backend, stream, buffer, alignment, 4);
    assert_eq!(u32::from_ne_bytes(back.try_into().unwrap()), 7);
    backend.stream_destroy(stream);
    backend.buffer_free(buffer);
    backend.kernel_destroy(kernel);
    backend.module_destroy(module);
    backend.device_close(device);
}

#[test]
fn a_build_error_carries_the_build_log() {
    let Some(backend) = backend() else {
        return;
    };
    let device = backend.device_open(0).unwrap();
    let broken = "__kernel __attribute__((reqd_work_group_size(1,1,1))) void broken(__global float* x) { x[0] = undeclared_thing; }";
    let error = backend
        .module_load(device, KernelFormat::OPENCL_C, broken.as_bytes())
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    assert!(error.message().contains("CL_BUILD_PROGRAM_FAILURE"), "{error}");
    assert!(error.message().contains("build log"), "{error}");
    assert!(error.message().contains("undeclared_thing"), "{error}");

    // SPIR-V is offered only where the device reports IL support; elsewhere it is refused.
    let spirv = backend
        .module_load(device, KernelFormat::SPIRV_KERNEL, &[0u8; 64])
        .unwrap_err();
    if backend
        .device_info(0)
        .unwrap()
        .kernel_formats
        .contains(&KernelFormat::SPIRV_KERNEL)
    {
        assert_eq!(spirv.kind(), ErrorKind::InvalidArgument, "{spirv}");
        assert!(spirv.message().contains("magic number"), "{spirv}");
    } else {
        assert_eq!(spirv.kind(), ErrorKind::Unsupported, "{spirv}");
        assert!(spirv.message().contains("CL_DEVICE_IL_VERSION"), "{spirv}");
    }
    let wgsl = backend.module_load(device, KernelFormat::WGSL, b"").unwrap_err();
    assert_eq!(wgsl.kind(), ErrorKind::Unsupported, "{wgsl}");
    assert!(wgsl.message().contains("opencl-c"), "{wgsl}");
    backend.device_close(device);
}

#[test]
fn kernels_outside_the_abi_or_without_a_size_are_refused() {
    let Some(backend) = backend() else {
        return;
    };
    let device = backend.device_open(0).unwrap();
    let module = backend
        .module_load(device, KernelFormat::OPENCL_C, SAXPY.as_bytes())
        .unwrap();
    let missing = backend.kernel_get(module, "nonexistent").unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound, "{missing}");
    assert!(missing.message().contains("saxpy"), "{missing}");
    let no_size = backend.kernel_get(module, "unsized").unwrap_err();
    assert_eq!(no_size.kind(), ErrorKind::InvalidArgument, "{no_size}");
    assert!(no_size.message().contains("reqd_work_group_size"), "{no_size}");

    let odd = r#"
        __kernel __attribute__((reqd_work_group_size(1,1,1))) void late(float a, __global float* x) { x[0] = a; }
        __kernel __attribute__((reqd_work_group_size(1,1,1))) void local_scratch(__global float* x, __local float* s) { x[0] = s[0]; }
    "#;
    let module_odd = backend
        .module_load(device, KernelFormat::OPENCL_C, odd.as_bytes())
        .unwrap();
    let late = backend.kernel_get(module_odd, "late").unwrap_err();
    assert!(late.message().contains("comes after"), "{late}");
    let local = backend.kernel_get(module_odd, "local_scratch").unwrap_err();
    assert!(local.message().contains("__local"), "{local}");
    backend.module_destroy(module_odd);
    backend.module_destroy(module);
    backend.device_close(device);
}

#[test]
fn wrong_argument_counts_are_refused_host_side() {
    let Some(backend) = backend() else {
        return;
    };
    let (device, stream) = open(&backend);
    let module = backend
        .module_load(device, KernelFormat::OPENCL_C, SAXPY.as_bytes())
        .unwrap();
    let saxpy = backend.kernel_get(module, "saxpy").unwrap();
    let scale = backend.kernel_get(module, "scale").unwrap();
    let buffer = backend.buffer_allocate(device, 256).unwrap();
    let view = BufferArg {
        buffer,
        offset: 0,
        size: 256,
    };
    let params = [0u8; 8];
    let launch = |kernel, buffers: &[BufferArg], scalars: &[u8]| {
        backend.stream_launch(
            stream,
            &LaunchArgs {
                kernel,
                workgroups: [1, 1, 1],
                buffers,
                scalars,
            },
        )
    };
    let too_few = launch(saxpy, &[view], &params).unwrap_err();
    assert_eq!(too_few.kind(), ErrorKind::InvalidArgument, "{too_few}");
    assert!(too_few.message().contains("takes 2 buffer(s)"), "{too_few}");
    assert!(too_few.message().contains("but 1 were given"), "{too_few}");
    let too_many = launch(saxpy, &[view, view, view], &params).unwrap_err();
    assert!(too_many.message().contains("but 3 were given"), "{too_many}");
    let no_scalars = launch(saxpy, &[view, view], &[]).unwrap_err();
    assert!(no_scalars.message().contains("no scalars were given"), "{no_scalars}");
    assert!(no_scalars.message().contains("Params"), "{no_scalars}");
    let wrong_size = launch(scale, &[view], &params).unwrap_err();
    assert!(wrong_size.message().contains("4 bytes"), "{wrong_size}");
    let mark = backend.kernel_get(module, "mark").unwrap();
    let extra = launch(mark, &[view], &params).unwrap_err();
    assert!(extra.message().contains("takes no scalars"), "{extra}");
    // A struct the source defines is sized host-side too.
    let short = launch(saxpy, &[view, view], &[0u8; 4]).unwrap_err();
    assert!(short.message().contains("Params"), "{short}");
    assert!(
        short.message().contains("of 8 bytes, but 4 bytes were given"),
        "{short}"
    );
    // None of this reached the queue: the stream is still clean.
    launch(mark, &[view], &[]).unwrap();
    backend.stream_synchronize(stream).unwrap();
    backend.stream_destroy(stream);
    backend.buffer_free(buffer);
    for kernel in [saxpy, scale, mark] {
        backend.kernel_destroy(kernel);
    }
    backend.module_destroy(module);
    backend.device_close(device);
}

#[test]
fn events_order_work_across_two_streams() {
    let Some(runtime) = runtime() else {
        return;
    };
    let device = runtime.open("opencl:0").unwrap();
    let producer = device.create_stream().unwrap();
    let consumer = device.create_stream().unwrap();
    let n = 1 << 20;
    let source = device.alloc::<u32>(n).unwrap();
    let target = device.alloc::<u32>(n).unwrap();
    let event = device.create_event_without_timing().unwrap();
    assert!(event.query().unwrap(), "an event never recorded counts as complete");
    for round in 0..4u32 {
        producer.fill(source.slice(..n), round * 3 + 1).unwrap();
        producer.record(&event).unwrap();
        consumer.wait(&event).unwrap();
        consumer.copy(source.slice(..n), &target).unwrap();
        let back = consumer.read_to_vec(&target).unwrap();
        assert!(back.iter().all(|&value| value == round * 3 + 1), "round {round}");
        event.synchronize().unwrap();
        assert!(event.query().unwrap());
    }
    producer.synchronize().unwrap();
    assert!(producer.query().unwrap());
}

#[test]
fn timing_events_measure_elapsed_time() {
    let Some(runtime) = runtime() else {
        return;
    };
    let device = runtime.open("opencl:0").unwrap();
    if !device.has_features(Features::TIMESTAMPS) {
        eprintln!("SKIPPED: {} has no timestamps", device.name());
        return;
    }
    let stream = device.create_stream().unwrap();
    let start = device.create_event().unwrap();
    let end = device.create_event().unwrap();
    let n = 8 << 20;
    let buffer = device.alloc::<u8>(n).unwrap();
    stream.record(&start).unwrap();
    for value in 0..8u8 {
        stream.fill(buffer.slice(..n), value).unwrap();
    }
    stream.record(&end).unwrap();
    end.synchronize().unwrap();
    let elapsed = end.elapsed_since(&start).unwrap();
    assert!(elapsed.as_nanos() > 0, "{elapsed:?}");
    assert!(elapsed.as_secs() < 60, "{elapsed:?}");
    let untimed = device.create_event_without_timing().unwrap();
    stream.record(&untimed).unwrap();
    stream.synchronize().unwrap();
    let error = untimed.elapsed_since(&start).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
}

/// Spins for `rounds` iterations per work-item, so queued work stays busy for a while.
const BUSY: &str = r#"
__kernel __attribute__((reqd_work_group_size(64, 1, 1)))
void busy(__global uint* out, uint rounds) {
    uint value = get_global_id(0);
    for (uint i = 0; i < rounds; ++i) { value = value * 1664525u + 1013904223u; }
    out[get_global_id(0)] = value;
}

__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void add_one(__global uint* data) {
    data[0] += 1u;
}
"#;

#[test]
fn queries_see_busy_work_and_events_move_when_recorded_again() {
    let Some(runtime) = runtime() else {
        return;
    };
    let device = runtime.open("opencl:0").unwrap();
    let module = device.load_module(KernelFormat::OPENCL_C, BUSY.as_bytes()).unwrap();
    let busy = module.kernel("busy").unwrap();
    let add_one = module.kernel("add_one").unwrap();
    let stream = device.create_stream().unwrap();
    let other = device.create_stream().unwrap();
    let out = device.alloc::<u32>(64).unwrap();
    let counter = device.alloc_from(&stream, &[0u32]).unwrap();
    let event = device.create_event().unwrap();

    let launch_busy = |stream: &xhal_core::Stream, rounds: u32| {
        stream
            .launch(&Launch::new(&busy).workgroups(1, 1, 1).buffer(&out).scalar(rounds))
            .unwrap();
    };
    // Long enough that the host asks before it finishes, on any device this runs on.
    launch_busy(&stream, 2_000_000);
    stream.record(&event).unwrap();
    let pending_stream = !stream.query().unwrap();
    let pending_event = !event.query().unwrap();
    // The other stream waits for the event, so its increment lands after the busy work.
    other.wait(&event).unwrap();
    other.launch(&Launch::new(&add_one).buffer(&counter)).unwrap();
    stream.synchronize().unwrap();
    assert!(stream.query().unwrap());
    assert!(event.query().unwrap());
    assert_eq!(other.read_to_vec(&counter).unwrap(), vec![1]);
    eprintln!("seen pending: stream {pending_stream}, event {pending_event}");

    // Recording again moves the event to the new point; destroying it does not undo a wait.
    launch_busy(&stream, 1_000_000);
    stream.record(&event).unwrap();
    other.wait(&event).unwrap();
    event.destroy().unwrap();
    other.launch(&Launch::new(&add_one).buffer(&counter)).unwrap();
    assert_eq!(other.read_to_vec(&counter).unwrap(), vec![2]);
    stream.synchronize().unwrap();

    // Timing: busy work between two markers takes time, and the order of the events matters.
    let start = device.create_event().unwrap();
    let end = device.create_event().unwrap();
    stream.record(&start).unwrap();
    launch_busy(&stream, 200_000);
    stream.record(&end).unwrap();
    stream.synchronize().unwrap();
    let elapsed = end.elapsed_since(&start).unwrap();
    assert!(elapsed.as_micros() > 0, "{elapsed:?}");
    let backwards = start.elapsed_since(&end).unwrap_err();
    assert_eq!(backwards.kind(), ErrorKind::InvalidArgument, "{backwards}");
    assert!(backwards.message().contains("before"), "{backwards}");
}

#[test]
fn allocations_past_the_largest_are_out_of_memory_naming_the_limit() {
    let Some(backend) = backend() else {
        return;
    };
    let info = backend.device_info(0).unwrap();
    let device = backend.device_open(0).unwrap();
    let error = backend
        .buffer_allocate(device, info.max_allocation_size + 1)
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::OutOfMemory, "{error}");
    assert!(
        error.message().contains(&info.max_allocation_size.to_string()),
        "{error}"
    );
    let zero = backend.buffer_allocate(device, 0).unwrap_err();
    assert_eq!(zero.kind(), ErrorKind::InvalidArgument, "{zero}");
    // Memory this backend holds shows in the free figure.
    let buffer = backend.buffer_allocate(device, 1 << 20).unwrap();
    assert_eq!(
        backend.device_info(0).unwrap().free_memory,
        info.free_memory - (1 << 20)
    );
    backend.buffer_free(buffer);
    assert_eq!(backend.device_info(0).unwrap().free_memory, info.free_memory);
    backend.device_close(device);
}

/// A kernel's arguments are state OpenCL shares between threads; launches of one kernel from
/// several threads at once each keep their own arguments.
#[test]
fn one_kernel_launched_from_many_threads_keeps_each_launchs_arguments() {
    let Some(runtime) = runtime() else {
        return;
    };
    let device = runtime.open("opencl:0").unwrap();
    let module = device.load_module(KernelFormat::OPENCL_C, SAXPY.as_bytes()).unwrap();
    let kernel = module.kernel("scale").unwrap();
    std::thread::scope(|scope| {
        for thread in 0..4u32 {
            let (device, kernel) = (&device, &kernel);
            scope.spawn(move || {
                let stream = device.create_stream().unwrap();
                let data = device.alloc_from(&stream, &[1.0f32; 64]).unwrap();
                let factor = (2u32 << thread) as f32;
                for _ in 0..50 {
                    stream
                        .launch(&Launch::new(kernel).workgroups(2, 2, 1).buffer(&data).scalar(factor))
                        .unwrap();
                    stream
                        .launch(
                            &Launch::new(kernel)
                                .workgroups(2, 2, 1)
                                .buffer(&data)
                                .scalar(1.0 / factor),
                        )
                        .unwrap();
                }
                stream
                    .launch(&Launch::new(kernel).workgroups(2, 2, 1).buffer(&data).scalar(factor))
                    .unwrap();
                let back = stream.read_to_vec(&data).unwrap();
                assert!(
                    back.iter().all(|&value| (value - factor).abs() < 1e-3),
                    "thread {thread}: {back:?}"
                );
            });
        }
    });
}

/// A command that fails while executing makes its error stick to the stream: synchronize,
/// later calls and events recorded after it all return it; other streams are unaffected.
#[test]
fn execution_failures_stick_to_the_stream() {
    let Some(backend) = backend() else {
        return;
    };
    let (device, stream) = open(&backend);
    let other = backend.stream_create(device).unwrap();
    let buffer = backend.buffer_allocate(device, 64).unwrap();
    backend.stream_fill(stream, buffer, 0, 64, &[1]).unwrap();
    let before = backend.event_create(device, false).unwrap();
    backend.stream_record_event(stream, before).unwrap();
    backend
        .driver()
        .inject_execution_failure(&backend.stream(stream).unwrap())
        .unwrap();
    backend.stream_fill(stream, buffer, 0, 64, &[2]).unwrap();
    // An event recorded after the failure, before anyone asked, reports it when waited for.
    let after = backend.event_create(device, false).unwrap();
    backend.stream_record_event(stream, after).unwrap();
    let waited = backend.event_synchronize(after).unwrap_err();
    assert_eq!(waited.kind(), ErrorKind::KernelFault, "{waited}");
    assert_eq!(backend.event_query(after).unwrap_err().kind(), ErrorKind::KernelFault);
    backend.event_destroy(after);
    // One recorded before the failure does not.
    backend.event_synchronize(before).unwrap();
    assert!(backend.event_query(before).unwrap());
    backend.event_destroy(before);
    let error = backend.stream_synchronize(stream).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::KernelFault, "{error}");
    assert!(error.message().contains("failed while executing"), "{error}");
    assert_eq!(backend.stream_synchronize(stream).unwrap_err(), error);
    assert_eq!(backend.stream_query(stream).unwrap_err(), error);
    assert_eq!(backend.stream_fill(stream, buffer, 0, 4, &[3]).unwrap_err(), error);
    let event = backend.event_create(device, false).unwrap();
    assert_eq!(backend.stream_record_event(stream, event).unwrap_err(), error);
    // Another stream goes on working.
    backend.stream_fill(other, buffer, 0, 64, &[4]).unwrap();
    assert_eq!(read(&backend, other, buffer, 0, 64), vec![4u8; 64]);
    backend.event_destroy(event);
    backend.stream_destroy(stream);
    backend.stream_destroy(other);
    backend.buffer_free(buffer);
    backend.device_close(device);
}

/// Two WGSL entry points with names OpenCL C gives a meaning (`main`, and the built-in
/// `step`), both calling `arrayLength`: one with a scalar block, one without.
const LENGTHS_WGSL: &str = r#"
struct Params { add: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read_write> pairs: array<vec2<u32>>;

@compute @workgroup_size(1)
fn main() {
    out[0] = arrayLength(&out);
    out[1] = arrayLength(&pairs);
}

@compute @workgroup_size(1)
fn step() {
    out[2] = arrayLength(&pairs) * 100u + params.add;
}
"#;

#[test]
fn wgsl_kernels_get_their_buffer_lengths_and_are_found_by_their_wgsl_names() {
    let Some(runtime) = runtime() else {
        return;
    };
    let device = runtime.open("opencl:0").unwrap();
    let stream = device.create_stream().unwrap();
    let module = device.load_wgsl(LENGTHS_WGSL).unwrap();
    let main = module.kernel("main").unwrap();
    let step = module.kernel("step").unwrap();
    let out = device.alloc_from(&stream, &[0u32; 8]).unwrap();
    // The pairs are a view at an offset the device aligns sub-buffers to: their length is
    // the view's, not the buffer's.
    let alignment = (device.info().buffer_offset_alignment as usize / 4).max(2);
    let pairs = device.alloc_from(&stream, &vec![0u32; alignment + 64]).unwrap();
    stream
        .launch(
            &Launch::new(&main)
                .workgroups(1, 1, 1)
                .buffer(&out)
                .buffer(pairs.slice(alignment..alignment + 6)),
        )
        .unwrap();
    stream
        .launch(
            &Launch::new(&step)
                .workgroups(1, 1, 1)
                .buffer(&out)
                .buffer(pairs.slice(0..10))
                .scalar(5u32),
        )
        .unwrap();
    assert_eq!(stream.read_to_vec(&out).unwrap(), [8, 3, 505, 0, 0, 0, 0, 0]);
    // The lengths are the backend's to pass: the caller gives only the scalars.
    let refused = stream
        .launch(
            &Launch::new(&main)
                .workgroups(1, 1, 1)
                .buffer(&out)
                .buffer(&pairs)
                .scalar(1u32),
        )
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::InvalidArgument, "{refused}");
}

#[test]
fn native_kernels_with_a_lengths_parameter_follow_the_abi_or_are_refused() {
    let Some(backend) = backend() else {
        return;
    };
    let (device, stream) = open(&backend);
    let source = r#"
        typedef ulong xh_u64;
        typedef struct xh_lengths_native { xh_u64 bytes[2]; } xh_lengths_native;
        __kernel __attribute__((reqd_work_group_size(1, 1, 1)))
        void native(__global uint* a, __global uint* b, uint add, xh_lengths_native lengths) {
            a[0] = (uint)lengths.bytes[0] + add;
            a[1] = (uint)lengths.bytes[1];
        }
        typedef struct xh_lengths_short { xh_u64 bytes[1]; } xh_lengths_short;
        __kernel __attribute__((reqd_work_group_size(1, 1, 1)))
        void short_lengths(__global uint* a, __global uint* b, xh_lengths_short lengths) {
            a[0] = (uint)lengths.bytes[0];
        }
        typedef struct xh_lengths_early { xh_u64 bytes[1]; } xh_lengths_early;
        __kernel __attribute__((reqd_work_group_size(1, 1, 1)))
        void early(__global uint* a, xh_lengths_early lengths, uint add) {
            a[0] = add;
        }
    "#;
    let module = backend
        .module_load(device, KernelFormat::OPENCL_C, source.as_bytes())
        .unwrap();
    let short = backend.kernel_get(module, "short_lengths").unwrap_err();
    assert_eq!(short.kind(), ErrorKind::InvalidArgument, "{short}");
    assert!(short.message().contains("has 8 bytes"), "{short}");
    assert!(short.message().contains("16 bytes"), "{short}");
    let early = backend.kernel_get(module, "early").unwrap_err();
    assert_eq!(early.kind(), ErrorKind::InvalidArgument, "{early}");
    assert!(early.message().contains("must be the last"), "{early}");

    let kernel = backend.kernel_get(module, "native").unwrap();
    let a = backend.buffer_allocate(device, 64).unwrap();
    let b = backend.buffer_allocate(device, 64).unwrap();
    let views = [
        BufferArg {
            buffer: a,
            offset: 0,
            size: 16,
        },
        BufferArg {
            buffer: b,
            offset: 0,
            size: 40,
        },
    ];
    let launch = |scalars: &[u8]| {
        backend.stream_launch(
            stream,
            &LaunchArgs {
                kernel,
                workgroups: [1, 1, 1],
                buffers: &views,
                scalars,
            },
        )
    };
    // The scalar block is still the caller's, and still checked.
    let no_scalars = launch(&[]).unwrap_err();
    assert!(no_scalars.message().contains("no scalars were given"), "{no_scalars}");
    assert!(no_scalars.message().contains("uint add"), "{no_scalars}");
    launch(&5u32.to_ne_bytes()).unwrap();
    let back = read(&backend, stream, a, 0, 8);
    assert_eq!(back[..4], 21u32.to_ne_bytes());
    assert_eq!(back[4..], 40u32.to_ne_bytes());

    // A name not in the module: the error names the C symbol looked for too.
    let missing = backend.kernel_get(module, "step").unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound, "{missing}");
    assert!(missing.message().contains("`step_`"), "{missing}");
    assert!(missing.message().contains("native"), "{missing}");
    backend.stream_destroy(stream);
    backend.buffer_free(a);
    backend.buffer_free(b);
    backend.kernel_destroy(kernel);
    backend.module_destroy(module);
    backend.device_close(device);
}

/// Every 64-bit atomic operation, on buffer and on workgroup memory.
const ATOMICS_64_WGSL: &str = r#"
@group(0) @binding(0) var<storage, read> values: array<u64>;
@group(0) @binding(1) var<storage, read_write> unsigned_results: array<atomic<u64>, 8>;
@group(0) @binding(2) var<storage, read_write> signed_results: array<atomic<i64>, 3>;
var<workgroup> local_sum: atomic<u64>;

@compute @workgroup_size(8)
fn combine(@builtin(global_invocation_id) id: vec3<u32>, @builtin(local_invocation_index) index: u32) {
    let v = values[id.x];
    atomicAdd(&unsigned_results[0], v);
    atomicMax(&unsigned_results[1], v);
    atomicMin(&unsigned_results[2], v);
    atomicSub(&unsigned_results[3], v);
    atomicAnd(&unsigned_results[4], ~(1lu << id.x));
    atomicOr(&unsigned_results[5], 1lu << (id.x + 32u));
    atomicXor(&unsigned_results[6], v);
    atomicMax(&signed_results[0], bitcast<i64>(v));
    atomicMin(&signed_results[1], bitcast<i64>(v));
    let r = atomicCompareExchangeWeak(&signed_results[2], 0li, bitcast<i64>(v));
    if r.exchanged {
        atomicExchange(&unsigned_results[7], v);
    }
    atomicAdd(&local_sum, v);
    workgroupBarrier();
    if index == 0u {
        atomicAdd(&unsigned_results[0], atomicLoad(&local_sum));
    }
}
"#;

#[test]
fn wgsl_64_bit_atomics_run_where_claimed() {
    let Some(runtime) = runtime() else {
        return;
    };
    let device = runtime.open("opencl:0").unwrap();
    if !device.has_features(Features::ATOMICS_64) {
        eprintln!("SKIPPED: {} has no 64-bit atomics", device.name());
        return;
    }
    let stream = device.create_stream().unwrap();
    let values: Vec<u64> = (1..=32u64)
        .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i << 60))
        .collect();
    assert!(values.iter().all(|&v| v != 0));
    let values_buffer = device.alloc_from(&stream, &values).unwrap();
    let unsigned = device
        .alloc_from(&stream, &[0u64, 0, u64::MAX, 1000, u64::MAX, 0, 0, 0])
        .unwrap();
    let signed = device.alloc_from(&stream, &[i64::MIN, i64::MAX, 0]).unwrap();
    let module = device.load_wgsl(ATOMICS_64_WGSL).unwrap();
    let kernel = module.kernel("combine").unwrap();
    stream
        .launch(
            &Launch::new(&kernel)
                .workgroups(4, 1, 1)
                .buffer(&values_buffer)
                .buffer(&unsigned)
                .buffer(&signed),
        )
        .unwrap();
    let u = stream.read_to_vec(&unsigned).unwrap();
    let s = stream.read_to_vec(&signed).unwrap();
    let sum = values.iter().fold(0u64, |a, &b| a.wrapping_add(b));
    let xor = values.iter().fold(0u64, |a, &b| a ^ b);
    let winner = s[2];
    assert!(values.contains(&(winner as u64)), "{winner:#x}");
    assert_eq!(
        u,
        [
            sum.wrapping_mul(2),
            *values.iter().max().unwrap(),
            *values.iter().min().unwrap(),
            1000u64.wrapping_sub(sum),
            !0xffff_ffffu64,
            0xffff_ffffu64 << 32,
            xor,
            winner as u64,
        ]
    );
    assert_eq!(s[0], values.iter().map(|&v| v as i64).max().unwrap());
    assert_eq!(s[1], values.iter().map(|&v| v as i64).min().unwrap());
}

/// f16 storage and arithmetic rounded after each operation.
const F16_WGSL: &str = r#"
enable f16;
@group(0) @binding(0) var<storage, read> a: array<vec4<f16>>;
@group(0) @binding(1) var<storage, read_write> out: array<f16>;

@compute @workgroup_size(4)
fn half_ops(@builtin(global_invocation_id) id: vec3<u32>) {
    let v = a[id.x];
    out[id.x] = v.x * v.y + v.z + v.w * 0.0h;
}
"#;

/// A device that lists cl_khr_fp16 claims f16 and runs f16 kernels with WGSL's rounding; one
/// that does not refuses them, naming f16, and cannot build the OpenCL C either.
#[test]
fn wgsl_f16_runs_where_claimed_and_is_refused_by_name_elsewhere() {
    let Some(runtime) = runtime() else {
        return;
    };
    let device = runtime.open("opencl:0").unwrap();
    let module = xhal_core::kernel::parse_wgsl(F16_WGSL).unwrap();
    let c = module.to_c(xhal_core::kernel::Dialect::OpenclC, None).unwrap();
    assert!(c.text.contains("#pragma OPENCL EXTENSION cl_khr_fp16 : enable"));
    if !device.has_features(Features::F16) {
        let error = device.load_wgsl(F16_WGSL).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Unsupported, "{error}");
        assert!(error.message().contains("f16"), "{error}");
        // The emitted OpenCL C itself does not build without the extension.
        let backend = backend().unwrap();
        let handle = backend.device_open(0).unwrap();
        let built = backend.module_load(handle, KernelFormat::OPENCL_C, c.text.as_bytes());
        assert!(
            built.is_err(),
            "{} built f16 OpenCL C without cl_khr_fp16",
            device.name()
        );
        backend.device_close(handle);
        eprintln!("SKIPPED running f16: {} does not list cl_khr_fp16", device.name());
        return;
    }
    // (1 + 3 * 2^-10)^2 is 1 + 6 * 2^-10 in f16; minus 1 leaves 6 * 2^-10 (0x1e00). Rounded
    // once at the end instead, the product's 9 * 2^-20 would survive as 0x1e02.
    let input: Vec<u16> = [0x3c03u16, 0x3c03, 0xbc00, 0x3c00]
        .into_iter()
        .cycle()
        .take(16)
        .collect();
    let stream = device.create_stream().unwrap();
    let a = device.alloc_from(&stream, &input).unwrap();
    let out = device.alloc_from(&stream, &[0u16; 4]).unwrap();
    let module = device.load_wgsl(F16_WGSL).unwrap();
    let kernel = module.kernel("half_ops").unwrap();
    stream
        .launch(&Launch::new(&kernel).workgroups(1, 1, 1).buffer(&a).buffer(&out))
        .unwrap();
    assert_eq!(stream.read_to_vec(&out).unwrap(), [0x1e00u16; 4]);
}
