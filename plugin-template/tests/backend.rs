//! The hostmem driver behind the checked adapter, as the host calls it.

use xhal_backend::{
    Backend, BufferArg, BufferHandle, Checked, DeviceHandle, Error, ErrorKind, KernelFormat, LaunchArgs,
};
use xhal_cpu::KernelMode;
use xhal_hostmem::{HostmemBackend, HostmemDriver, DEVICE_MEMORY};

const DOUBLE: &str = "
    @group(0) @binding(0) var<storage, read_write> data: array<u32>;
    @compute @workgroup_size(64)
    fn double(@builtin(global_invocation_id) id: vec3<u32>) {
        if id.x < arrayLength(&data) { data[id.x] = data[id.x] * 2u; }
    }
";

#[test]
fn a_kernel_runs_between_a_write_and_a_read() {
    let backend = HostmemBackend::new(HostmemDriver::from_env());
    let device = backend.device_open(0).unwrap();
    let stream = backend.stream_create(device).unwrap();
    let buffer = backend.buffer_allocate(device, 400).unwrap();
    let input: Vec<u8> = (0u32..100).flat_map(u32::to_le_bytes).collect();
    let mut output = vec![0u8; 400];
    let module = backend
        .module_load(device, KernelFormat::WGSL, DOUBLE.as_bytes())
        .unwrap();
    let kernel = backend.kernel_get(module, "double").unwrap();
    let views = [BufferArg {
        buffer,
        offset: 0,
        size: 400,
    }];
    // SAFETY: `input` and `output` outlive the synchronize below.
    unsafe { backend.stream_write(stream, buffer, 0, input.as_ptr(), 400).unwrap() };
    let launch = LaunchArgs {
        kernel,
        workgroups: [2, 1, 1],
        buffers: &views,
        scalars: &[],
    };
    backend.stream_launch(stream, &launch).unwrap();
    // SAFETY: as above.
    unsafe {
        backend
            .stream_read(stream, buffer, 0, output.as_mut_ptr(), 400)
            .unwrap()
    };
    backend.stream_synchronize(stream).unwrap();
    let expected: Vec<u8> = (0u32..100).flat_map(|value| (value * 2).to_le_bytes()).collect();
    assert_eq!(output, expected);
    backend.stream_destroy(stream);
}

#[test]
fn a_malformed_kernel_setting_fails_the_calls_that_need_it_naming_it() {
    let malformed = |variable: &str| Error::invalid_argument(format!("{variable} is malformed"));
    let backend = Checked::new(HostmemDriver::with_kernel_settings(
        Err(malformed("XHAL_CPU_MODE")),
        Err(malformed("XHAL_KERNEL_TIMEOUT")),
    ));
    let device = backend.device_open(0).unwrap();
    let stream = backend.stream_create(device).unwrap();
    let buffer = backend.buffer_allocate(device, 16).unwrap();
    backend.stream_fill(stream, buffer, 0, 16, &[1]).unwrap();
    backend.stream_synchronize(stream).unwrap();
    let load = backend
        .module_load(device, KernelFormat::WGSL, DOUBLE.as_bytes())
        .unwrap_err();
    assert!(load.message().contains("XHAL_CPU_MODE"), "{load}");

    let backend = Checked::new(HostmemDriver::with_kernel_settings(
        Ok(KernelMode::Interpret),
        Err(malformed("XHAL_KERNEL_TIMEOUT")),
    ));
    let device = backend.device_open(0).unwrap();
    let stream = backend.stream_create(device).unwrap();
    let buffer = backend.buffer_allocate(device, 16).unwrap();
    let module = backend
        .module_load(device, KernelFormat::WGSL, DOUBLE.as_bytes())
        .unwrap();
    let kernel = backend.kernel_get(module, "double").unwrap();
    let views = [BufferArg {
        buffer,
        offset: 0,
        size: 16,
    }];
    let launch = LaunchArgs {
        kernel,
        workgroups: [1, 1, 1],
        buffers: &views,
        scalars: &[],
    };
    let error = backend.stream_launch(stream, &launch).unwrap_err();
    assert!(error.message().contains("XHAL_KERNEL_TIMEOUT"), "{error}");
}

#[test]
fn misuse_is_refused_at_enqueue_and_memory_is_accounted() {
    let backend = HostmemBackend::new(HostmemDriver::from_env());
    assert_eq!(backend.device_open(1).unwrap_err().kind(), ErrorKind::NotFound);
    let device = backend.device_open(0).unwrap();
    let stream = backend.stream_create(device).unwrap();
    let too_much = backend.buffer_allocate(device, DEVICE_MEMORY + 1).unwrap_err();
    assert_eq!(too_much.kind(), ErrorKind::OutOfMemory, "{too_much}");
    let buffer = backend.buffer_allocate(device, 64).unwrap();
    assert_eq!(backend.device_info(0).unwrap().free_memory, DEVICE_MEMORY - 64);
    let fill = backend.stream_fill(stream, buffer, 0, 64, &[1, 2, 3]).unwrap_err();
    assert!(fill.message().contains("1, 2 or 4 bytes"), "{fill}");
    let past = backend.stream_fill(stream, buffer, 60, 8, &[0]).unwrap_err();
    assert_eq!(past.kind(), ErrorKind::OutOfBounds, "{past}");
    let module = backend
        .module_load(device, KernelFormat::WGSL, DOUBLE.as_bytes())
        .unwrap();
    let kernel = backend.kernel_get(module, "double").unwrap();
    let launch = LaunchArgs {
        kernel,
        workgroups: [1, 1, 1],
        buffers: &[],
        scalars: &[],
    };
    let missing = backend.stream_launch(stream, &launch).unwrap_err();
    assert!(missing.message().contains("expects 1 buffer argument"), "{missing}");
    backend.buffer_free(buffer);
    backend.stream_synchronize(stream).unwrap();
    assert_eq!(backend.device_info(0).unwrap().free_memory, DEVICE_MEMORY);
}

/// Writes one past the end of its buffer: a fault, since kernels run with bounds checks.
const PAST_THE_END: &str = "
    @group(0) @binding(0) var<storage, read_write> data: array<u32>;
    @compute @workgroup_size(1)
    fn past_the_end() { data[arrayLength(&data)] = 1u; }
";

/// The `u32`s of `buffer`, read on a fresh stream.
fn read_words(backend: &HostmemBackend, device: DeviceHandle, buffer: BufferHandle, words: usize) -> Vec<u32> {
    let stream = backend.stream_create(device).unwrap();
    let mut bytes = vec![0u8; words * 4];
    // SAFETY: `bytes` outlives the synchronize below.
    unsafe {
        backend
            .stream_read(stream, buffer, 0, bytes.as_mut_ptr(), bytes.len() as u64)
            .unwrap()
    };
    backend.stream_synchronize(stream).unwrap();
    backend.stream_destroy(stream);
    bytes
        .chunks_exact(4)
        .map(|word| u32::from_le_bytes(word.try_into().unwrap()))
        .collect()
}

#[test]
fn a_command_list_runs_in_order_at_every_submission_and_an_update_changes_later_ones() {
    let backend = HostmemBackend::new(HostmemDriver::from_env());
    let device = backend.device_open(0).unwrap();
    let (first, second) = (
        backend.stream_create(device).unwrap(),
        backend.stream_create(device).unwrap(),
    );
    let data = backend.buffer_allocate(device, 400).unwrap();
    let other = backend.buffer_allocate(device, 400).unwrap();
    let copy = backend.buffer_allocate(device, 400).unwrap();
    let module = backend
        .module_load(device, KernelFormat::WGSL, DOUBLE.as_bytes())
        .unwrap();
    let kernel = backend.kernel_get(module, "double").unwrap();
    let view = |buffer| BufferArg {
        buffer,
        offset: 0,
        size: 400,
    };
    let (of_data, of_other) = ([view(data)], [view(other)]);
    let double = |views| LaunchArgs {
        kernel,
        workgroups: [2, 1, 1],
        buffers: views,
        scalars: &[],
    };
    // The template has command lists: without them this is `Unsupported`, and graphs replay
    // operation by operation.
    let list = backend.command_list_create(device).unwrap();
    backend
        .command_list_append_fill(list, data, 0, 400, &3u32.to_le_bytes())
        .unwrap();
    backend.command_list_append_launch(list, &double(&of_data)).unwrap();
    backend.command_list_append_copy(list, data, 0, copy, 0, 400).unwrap();
    backend.command_list_finish(list).unwrap();
    let late = backend.command_list_append_copy(list, data, 0, copy, 0, 4).unwrap_err();
    assert!(late.message().contains("finished"), "{late}");

    // Twice on one stream, then on another: each submission runs the whole list. The streams
    // take turns: submissions on two streams at once would race on the same buffers.
    backend.stream_submit_command_list(first, list).unwrap();
    backend.stream_submit_command_list(first, list).unwrap();
    backend.stream_synchronize(first).unwrap();
    backend.stream_submit_command_list(second, list).unwrap();
    backend.stream_synchronize(second).unwrap();
    assert_eq!(read_words(&backend, device, copy, 100), [6; 100]);

    // Command 1, the launch, now doubles `other`, for the submissions that follow.
    backend.stream_fill(first, other, 0, 400, &5u32.to_le_bytes()).unwrap();
    backend.command_list_update_launch(list, 1, &double(&of_other)).unwrap();
    backend.stream_submit_command_list(first, list).unwrap();
    backend.stream_synchronize(first).unwrap();
    assert_eq!(read_words(&backend, device, other, 100), [10; 100]);
    assert_eq!(
        read_words(&backend, device, copy, 100),
        [3; 100],
        "`data` is no longer doubled"
    );
    let fill = backend
        .command_list_update_launch(list, 0, &double(&of_other))
        .unwrap_err();
    assert_eq!(fill.kind(), ErrorKind::InvalidArgument, "{fill}");
    backend.command_list_destroy(list);
    backend.stream_destroy(first);
    backend.stream_destroy(second);
}

#[test]
fn a_failing_command_stops_its_list_and_sticks_to_the_stream() {
    let backend = HostmemBackend::new(HostmemDriver::from_env());
    let device = backend.device_open(0).unwrap();
    let stream = backend.stream_create(device).unwrap();
    let data = backend.buffer_allocate(device, 16).unwrap();
    let scratch = backend.buffer_allocate(device, 16).unwrap();
    let module = backend
        .module_load(device, KernelFormat::WGSL, PAST_THE_END.as_bytes())
        .unwrap();
    let kernel = backend.kernel_get(module, "past_the_end").unwrap();
    let views = [BufferArg {
        buffer: scratch,
        offset: 0,
        size: 16,
    }];
    let list = backend.command_list_create(device).unwrap();
    backend
        .command_list_append_fill(list, data, 0, 16, &5u32.to_le_bytes())
        .unwrap();
    let launch = LaunchArgs {
        kernel,
        workgroups: [1, 1, 1],
        buffers: &views,
        scalars: &[],
    };
    backend.command_list_append_launch(list, &launch).unwrap();
    backend
        .command_list_append_fill(list, data, 0, 16, &9u32.to_le_bytes())
        .unwrap();
    backend.command_list_finish(list).unwrap();
    backend.stream_submit_command_list(stream, list).unwrap();
    let fault = backend.stream_synchronize(stream).unwrap_err();
    assert_eq!(fault.kind(), ErrorKind::KernelFault, "{fault}");
    assert_eq!(
        read_words(&backend, device, data, 4),
        [5; 4],
        "the fill before the fault ran, the one after it did not"
    );
    let refused = backend.stream_submit_command_list(stream, list).unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::KernelFault, "{refused}");
    backend.command_list_destroy(list);
}
