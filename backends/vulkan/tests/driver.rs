//! The backend without a driver, and with one (lavapipe, where installed).

use std::sync::Arc;
use xhal_core::backend::Backend;
use xhal_core::{ErrorKind, Launch, Runtime};
use xhal_vulkan::{VulkanBackend, VulkanDriver};

/// Set in the child process of [`no_icd_is_driver_unavailable`].
const CHILD_VARIABLE: &str = "XHAL_VULKAN_TEST_NO_ICD_CHILD";

#[test]
fn missing_loader_is_driver_unavailable() {
    let backend = VulkanBackend::new(VulkanDriver::with_library_path("/nonexistent/libvulkan.so.1"));
    let error = backend.device_count().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::DriverUnavailable, "{error}");
    assert!(error.message().contains("/nonexistent/libvulkan.so.1"), "{error}");
    // Asking again gives the same answer, and describing or opening a device is refused too.
    assert_eq!(backend.device_count().unwrap_err(), error);
    assert_eq!(backend.device_open(0).unwrap_err().kind(), ErrorKind::DriverUnavailable);
}

/// The loader is present but finds no driver: run in a child process whose environment points
/// the loader at a driver list that does not exist.
#[test]
fn no_icd_is_driver_unavailable() {
    if std::env::var_os(CHILD_VARIABLE).is_some() {
        return;
    }
    if VulkanBackend::new(VulkanDriver::with_library_path("libvulkan.so.1"))
        .device_count()
        .is_err()
    {
        require_unless_absent("no Vulkan loader on this machine");
        eprintln!("SKIPPED: no Vulkan loader on this machine");
        return;
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "no_icd_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_VARIABLE, "1")
        .env("VK_ICD_FILENAMES", "/nonexistent/icd.json")
        .env("VK_DRIVER_FILES", "/nonexistent/icd.json")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("1 passed"), "{text}");
}

#[test]
fn no_icd_child() {
    if std::env::var_os(CHILD_VARIABLE).is_none() {
        return;
    }
    let error = VulkanBackend::new(VulkanDriver::from_env()).device_count().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::DriverUnavailable, "{error}");
    eprintln!("reason: {error}");
}

/// Fails when CI requires the backend (`XHAL_REQUIRE_BACKENDS` names `vulkan`) and it is
/// missing: a missing driver must never pass as a quiet skip there.
fn require_unless_absent(reason: &str) {
    let required = std::env::var("XHAL_REQUIRE_BACKENDS").unwrap_or_default();
    assert!(
        !required.split(',').any(|name| name.trim() == "vulkan"),
        "XHAL_REQUIRE_BACKENDS names vulkan, but it is unavailable: {reason}"
    );
}

/// A runtime with just this backend, or `None` where the machine has no Vulkan device.
fn vulkan_runtime() -> Option<Runtime> {
    runtime_of(VulkanBackend::new(VulkanDriver::from_env()))
}

/// [`vulkan_runtime`] with the validation layer on where it is installed, so that a descriptor
/// the kernel and its layout disagree about fails the test.
fn validated_vulkan_runtime() -> Option<Runtime> {
    let validated = VulkanBackend::new(VulkanDriver::from_env().with_validation(true));
    match validated.device_count() {
        Ok(_) => runtime_of(validated),
        Err(error) => {
            eprintln!("testing without the validation layer: {error}");
            vulkan_runtime()
        }
    }
}

fn runtime_of(backend: VulkanBackend) -> Option<Runtime> {
    if let Err(error) = backend.device_count() {
        require_unless_absent(&error.to_string());
        eprintln!("SKIPPED: no Vulkan device here, so this test checked nothing: {error}");
        return None;
    }
    let runtime = Runtime::builder()
        .without_static_backends()
        .without_plugin_search()
        .backend(Arc::new(backend))
        .build()
        .unwrap();
    Some(runtime)
}

const SAXPY: &str = r#"
struct Params { a: f32, n: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn saxpy(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < params.n { y[id.x] = params.a * x[id.x] + y[id.x]; }
}
"#;

#[test]
fn saxpy_runs_and_device_info_is_truthful() {
    let Some(runtime) = vulkan_runtime() else {
        return;
    };
    let device = runtime.open("vulkan:0").unwrap();
    let info = device.info().clone();
    assert!(info.total_memory > 0);
    assert!(info.max_allocation_size <= info.total_memory);
    assert_eq!(info.kernel_formats[0], xhal_core::KernelFormat::SPIRV_SHADER);
    let stream = device.create_stream().unwrap();
    let n = 1000usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let y = vec![1.0f32; n];
    let x_buffer = device.alloc_from(&stream, &x).unwrap();
    let y_buffer = device.alloc_from(&stream, &y).unwrap();
    let kernel = device.load_wgsl(SAXPY).unwrap().kernel("saxpy").unwrap();
    for _ in 0..3 {
        stream
            .launch(
                &Launch::new(&kernel)
                    .workgroups_for_invocations(n as u64)
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
}

#[test]
fn allocations_past_the_largest_are_out_of_memory_naming_the_limit() {
    let Some(runtime) = vulkan_runtime() else {
        return;
    };
    let entry = runtime.backend("vulkan").unwrap();
    let backend = entry.backend();
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
    backend.device_close(device);
}

#[test]
fn invalid_spirv_is_refused_before_the_driver_sees_it() {
    let Some(runtime) = vulkan_runtime() else {
        return;
    };
    let entry = runtime.backend("vulkan").unwrap();
    let backend = entry.backend();
    let device = backend.device_open(0).unwrap();
    let mut garbage = vec![0x03, 0x02, 0x23, 0x07];
    garbage.extend_from_slice(&[0xff; 60]);
    let error = backend
        .module_load(device, xhal_core::KernelFormat::SPIRV_SHADER, &garbage)
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    assert!(error.message().contains("invalid SPIR-V"), "{error}");
    backend.device_close(device);
}

/// SPIR-V tagged with WGSL as its source language (as naga writes it with debug info) loads
/// with the validation layer on, and the layer reports nothing.
#[test]
fn spirv_with_a_wgsl_source_tag_loads_under_validation() {
    let backend = VulkanBackend::new(VulkanDriver::from_env().with_validation(true));
    if let Err(error) = backend.device_count() {
        eprintln!("skipped: {error}");
        return;
    }
    let mut words = xhal_core::kernel::parse_wgsl(SAXPY).unwrap().to_spirv().unwrap();
    // OpSource WGSL (source language 10), version 1, where debug instructions go: after the
    // capabilities, extensions, imports, memory model, entry points and execution modes.
    let mut at = 5;
    while matches!(words[at] & 0xffff, 17 | 10 | 11 | 14 | 15 | 16 | 331) {
        at += (words[at] >> 16) as usize;
    }
    words.splice(at..at, [(3 << 16) | 3, 10, 1]);
    let bytes: Vec<u8> = words.iter().flat_map(|word| word.to_le_bytes()).collect();
    let device = backend.device_open(0).unwrap();
    let module = backend
        .module_load(device, xhal_core::KernelFormat::SPIRV_SHADER, &bytes)
        .unwrap();
    let kernel = backend.kernel_get(module, "saxpy").unwrap();
    let stream = backend.stream_create(device).unwrap();
    backend.stream_synchronize(stream).unwrap();
    backend.stream_destroy(stream);
    backend.kernel_destroy(kernel);
    backend.module_destroy(module);
    backend.device_close(device);
}

/// The module's SPIR-V words as bytes, with `insert` placed after the leading capabilities.
fn spirv_with(source: &str, insert: &[u32]) -> Vec<u8> {
    let mut words = xhal_core::kernel::parse_wgsl(source).unwrap().to_spirv().unwrap();
    let mut at = 5;
    while words[at] & 0xffff == 17 {
        at += (words[at] >> 16) as usize;
    }
    words.splice(at..at, insert.iter().copied());
    words.iter().flat_map(|word| word.to_le_bytes()).collect()
}

/// A validation message fails the call that caused it (or the next one), and is not sticky
/// for later, valid work.
#[test]
fn validation_messages_fail_the_call() {
    let backend = VulkanBackend::new(VulkanDriver::from_env().with_validation(true));
    if let Err(error) = backend.device_count() {
        eprintln!("skipped: {error}");
        return;
    }
    let device = backend.device_open(0).unwrap();
    // `OpCapability Geometry` without the geometryShader feature enabled: valid SPIR-V, invalid Vulkan.
    // The layer checks capabilities when the pipeline is made.
    let bytes = spirv_with(SAXPY, &[(2 << 16) | 17, 2]);
    let error = backend
        .module_load(device, xhal_core::KernelFormat::SPIRV_SHADER, &bytes)
        .and_then(|module| backend.kernel_get(module, "saxpy"))
        .unwrap_err();
    assert!(error.message().contains("validation layer"), "{error}");
    assert!(error.message().contains("Geometry"), "{error}");
    let clean = spirv_with(SAXPY, &[]);
    let module = backend
        .module_load(device, xhal_core::KernelFormat::SPIRV_SHADER, &clean)
        .unwrap();
    let kernel = backend.kernel_get(module, "saxpy").unwrap();
    backend.kernel_destroy(kernel);
    backend.module_destroy(module);
    backend.device_close(device);
}

#[test]
fn limits_are_named_when_a_kernel_or_binding_exceeds_them() {
    let Some(runtime) = vulkan_runtime() else {
        return;
    };
    let entry = runtime.backend("vulkan").unwrap();
    let backend = entry.backend();
    let info = backend.device_info(0).unwrap();
    let device = backend.device_open(0).unwrap();

    let words = info.max_workgroup_memory / 4 + 1;
    let greedy = format!(
        "var<workgroup> scratch: array<u32, {words}>;\n@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n@compute @workgroup_size(1) fn greedy() {{ scratch[0] = 1u; out[0] = scratch[{}]; }}",
        words - 1
    );
    let module = backend
        .module_load(device, xhal_core::KernelFormat::SPIRV_SHADER, &spirv_with(&greedy, &[]))
        .unwrap();
    let error = backend.kernel_get(module, "greedy").unwrap_err();
    assert!(error.message().contains(&(words * 4).to_string()), "{error}");
    assert!(
        error.message().contains(&info.max_workgroup_memory.to_string()),
        "{error}"
    );
    backend.module_destroy(module);

    let module = backend
        .module_load(device, xhal_core::KernelFormat::SPIRV_SHADER, &spirv_with(SAXPY, &[]))
        .unwrap();
    let kernel = backend.kernel_get(module, "saxpy").unwrap();
    let range = 128u64 << 20;
    let size = (range + 4096).min(info.max_allocation_size);
    let big = backend.buffer_allocate(device, size).unwrap();
    let stream = backend.stream_create(device).unwrap();
    let views = [
        xhal_core::backend::BufferArg {
            buffer: big,
            offset: 0,
            size: 4,
        },
        xhal_core::backend::BufferArg {
            buffer: big,
            offset: 0,
            size,
        },
    ];
    let scalars = [0u8; 8];
    let launch = xhal_core::backend::LaunchArgs {
        kernel,
        workgroups: [1, 1, 1],
        buffers: &views,
        scalars: &scalars,
    };
    // lavapipe binds at most 128 MiB per storage buffer; other devices may bind more.
    match backend.stream_launch(stream, &launch) {
        Err(error) => assert!(error.message().contains("maxStorageBufferRange"), "{error}"),
        Ok(()) => assert!(!info.name.starts_with("llvmpipe"), "a {size}-byte binding was accepted"),
    }
    backend.stream_synchronize(stream).unwrap();
    backend.stream_destroy(stream);
    backend.buffer_free(big);
    backend.kernel_destroy(kernel);
    backend.module_destroy(module);
    backend.device_close(device);
}

/// A `var<uniform>` whose layout has padding everywhere WGSL puts it: after a `vec3<f32>`
/// (none: the `u32` fills it), before an `@align(16)` struct member, after that member, and
/// an array of `vec4<f32>`; bound between storage buffers with gaps and in other groups.
const UNIFORM_PARAMS: &str = r#"
struct Inner { scale: f32, bias: f32 }
struct Params {
    origin: vec3<f32>,
    count: u32,
    tag: f32,
    @align(16) inner: Inner,
    weights: array<vec4<f32>, 2>,
}
@group(0) @binding(3) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> input: array<f32>;
@group(2) @binding(0) var<storage, read_write> output: array<f32>;

@compute @workgroup_size(8)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= params.count { return; }
    output[i] = input[i] * params.inner.scale + params.inner.bias
        + params.origin[i % 3u] * params.weights[i % 2u][i % 4u] + params.tag;
}
"#;

/// `Params` of [`UNIFORM_PARAMS`] in the uniform address space's layout (80 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, xhal_core::bytemuck::Pod, xhal_core::bytemuck::Zeroable)]
#[bytemuck(crate = "xhal_core::bytemuck")]
struct UniformParams {
    origin: [f32; 3],
    count: u32,
    tag: f32,
    before_inner: [u32; 3],
    inner_scale: f32,
    inner_bias: f32,
    after_inner: [u32; 2],
    weights: [[f32; 4]; 2],
}

/// Padding bytes that make any misplaced read a NaN.
const NAN_PADDING: u32 = 0x7fc0_0001;

impl UniformParams {
    fn new(count: u32, scale: f32, tag: f32) -> UniformParams {
        UniformParams {
            origin: [1.0, 2.0, 3.0],
            count,
            tag,
            before_inner: [NAN_PADDING; 3],
            inner_scale: scale,
            inner_bias: 0.5,
            after_inner: [NAN_PADDING; 2],
            weights: [[1.0, 2.0, 4.0, 8.0], [16.0, 32.0, 64.0, 128.0]],
        }
    }

    /// What the kernel writes at `i` for `input[i] = i`; every value is exact in f32.
    fn expected(&self, length: usize) -> Vec<f32> {
        (0..length)
            .map(|i| {
                if i >= self.count as usize {
                    return -1.0;
                }
                i as f32 * self.inner_scale
                    + self.inner_bias
                    + self.origin[i % 3] * self.weights[i % 2][i % 4]
                    + self.tag
            })
            .collect()
    }
}

#[test]
fn uniform_structs_with_padding_and_binding_gaps_give_the_expected_values() {
    let Some(runtime) = validated_vulkan_runtime() else {
        return;
    };
    let device = runtime.open("vulkan:0").unwrap();
    assert!(device.has_features(xhal_core::Features::UNIFORM_BUFFERS));
    let module = device.load_wgsl(UNIFORM_PARAMS).unwrap();
    let info = &module.entry_points().unwrap()[0];
    let spaces: Vec<_> = info
        .buffers
        .iter()
        .map(|buffer| (buffer.name.as_str(), buffer.space))
        .collect();
    use xhal_core::kernel::BufferSpace;
    assert_eq!(
        spaces,
        [
            ("input", BufferSpace::Storage),
            ("params", BufferSpace::Uniform),
            ("output", BufferSpace::Storage)
        ]
    );
    let kernel = module.kernel("main").unwrap();
    let stream = device.create_stream().unwrap();
    let length = 24;
    let input: Vec<f32> = (0..length).map(|i| i as f32).collect();
    let input = device.alloc_from(&stream, &input).unwrap();
    let output = device.alloc_from(&stream, &vec![-1.0f32; length]).unwrap();

    // Bound from a buffer the application owns; the last 4 invocations are past `count`.
    let in_a_buffer = UniformParams::new(20, 2.0, 100.0);
    let params = device.alloc_from(&stream, &[in_a_buffer]).unwrap();
    stream
        .launch(
            &Launch::new(&kernel)
                .workgroups_for_invocations(length as u64)
                .buffer(&input)
                .buffer(&params)
                .buffer(&output),
        )
        .unwrap();
    assert_eq!(stream.read_to_vec(&output).unwrap(), in_a_buffer.expected(length));

    // Staged by core with `Launch::uniform`, several values in a row on one stream.
    for (scale, tag) in [(3.0, 1000.0), (0.25, -8.0), (5.0, 0.0)] {
        let value = UniformParams::new(length as u32, scale, tag);
        stream
            .launch(
                &Launch::new(&kernel)
                    .workgroups_for_invocations(length as u64)
                    .buffer(&input)
                    .uniform(&value)
                    .buffer(&output),
            )
            .unwrap();
        assert_eq!(stream.read_to_vec(&output).unwrap(), value.expected(length));
    }
    stream.synchronize().unwrap();
}

/// An application's own SPIR-V with a `Uniform` block (here written by xhal-kernel, at
/// set 0, bindings 0..3 as the argument ABI says) loads and runs as the WGSL does.
#[test]
fn native_spirv_with_a_uniform_block_runs() {
    let Some(runtime) = validated_vulkan_runtime() else {
        return;
    };
    let device = runtime.open("vulkan:0").unwrap();
    let words = xhal_core::kernel::parse_wgsl(UNIFORM_PARAMS)
        .unwrap()
        .to_spirv_with(true)
        .unwrap();
    // `OpTypePointer %id Uniform %type` is there: the block is a uniform one, not storage.
    let mut at = 5;
    let mut uniform_pointers = 0;
    while at < words.len() {
        let count = (words[at] >> 16) as usize;
        if words[at] & 0xffff == 32 && words[at + 2] == 2 {
            uniform_pointers += 1;
        }
        at += count;
    }
    assert!(uniform_pointers > 0, "the SPIR-V declares no Uniform-class pointer");
    let bytes: Vec<u8> = words.iter().flat_map(|word| word.to_le_bytes()).collect();
    let kernel = device
        .load_module(xhal_core::KernelFormat::SPIRV_SHADER, &bytes)
        .unwrap()
        .kernel("main")
        .unwrap();
    let stream = device.create_stream().unwrap();
    let length = 16;
    let input: Vec<f32> = (0..length).map(|i| i as f32).collect();
    let input = device.alloc_from(&stream, &input).unwrap();
    let output = device.alloc_from(&stream, &vec![-1.0f32; length]).unwrap();
    let value = UniformParams::new(11, 1.5, 7.0);
    let params = device.alloc_from(&stream, &[value]).unwrap();
    stream
        .launch(
            &Launch::new(&kernel)
                .workgroups(2, 1, 1)
                .buffer(&input)
                .buffer(&params)
                .buffer(&output),
        )
        .unwrap();
    assert_eq!(stream.read_to_vec(&output).unwrap(), value.expected(length));
}
