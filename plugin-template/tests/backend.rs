//! The hostmem driver behind the checked adapter, as the host calls it.

use xhal_backend::{Backend, BufferArg, Checked, Error, ErrorKind, KernelFormat, LaunchArgs};
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
