//! The `device` area: what a device says about itself, whether it is true, and opening and
//! closing it.
//!
//! The floors for limits are ones every real compute device meets (they are WebGPU's and
//! Vulkan's required minimums, or lower), so a device that reports less is misreporting, not
//! small. A limit of 0 means "no limit" where the ABI says so: the largest allocation, the
//! workgroup count, the buffer arguments and the scalar block.

use super::test_case;
use crate::context::{wgsl_unreachable, Target, TestContext};
use crate::test_case::{check, check_eq, check_slice_eq, expect_error, TestCase, TestResult, Verdict};
use std::collections::HashSet;
use xhal::{Device, DeviceInfo, DeviceType, ErrorKind, Features, KernelFormat, Launch};

pub(super) fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            "device.info.name_and_vendor",
            "the device has a non-empty name and vendor, free of control characters",
            name_and_vendor
        ),
        test_case!(
            "device.info.known_type_and_features",
            "the device claims only feature bits the ABI defines, 64-bit atomics only with 64-bit integers, and a device type the ABI names",
            known_type_and_features
        ),
        test_case!(
            "device.info.pci_bus_id_form",
            "a PCI bus id, where the device has one, reads domain:bus:device.function in hex",
            pci_bus_id_form
        ),
        test_case!(
            "device.info.stable_across_enumerations",
            "everything but free memory reads the same at discovery, at open, when asked again, and from a fresh runtime",
            stable_across_enumerations
        ),
        test_case!(
            "device.identity.uuid_nonzero",
            "the device's uuid is not all zeros",
            uuid_nonzero
        ),
        test_case!(
            "device.identity.uuid_stable",
            "the uuid is the same at discovery, when asked again, after reopening, and from a fresh runtime",
            uuid_stable
        ),
        test_case!(
            "device.identity.uuids_distinct",
            "no two devices of the backend share a uuid",
            uuids_distinct
        ),
        test_case!(
            "device.limits.workgroup_size",
            "the largest workgroup is at least 64 wide in x and at least 1 in y and z",
            limits_workgroup_size
        ),
        test_case!(
            "device.limits.workgroup_invocations",
            "at least 64 invocations fit in a workgroup, no dimension exceeds that, and the dimensions can hold it",
            limits_workgroup_invocations
        ),
        test_case!(
            "device.limits.workgroup_count",
            "a launch may have at least 65535 workgroups in each dimension (or no limit)",
            limits_workgroup_count
        ),
        test_case!(
            "device.limits.workgroup_memory",
            "at least 16 KiB of workgroup memory is reported",
            limits_workgroup_memory
        ),
        test_case!(
            "device.limits.workgroup_memory_usable",
            "a kernel using the reported workgroup memory (up to 64 KiB) loads, and every word of it holds its own value",
            workgroup_memory_usable
        ),
        test_case!(
            "device.limits.buffer_arguments",
            "a launch may bind at least 8 buffers (or no limit)",
            limits_buffer_arguments
        ),
        test_case!(
            "device.limits.scalar_block",
            "a launch may pass at least 128 bytes of scalars (or no limit)",
            limits_scalar_block
        ),
        test_case!(
            "device.limits.buffer_offset_alignment",
            "the buffer offset alignment is a power of two of at most 256 bytes",
            limits_buffer_offset_alignment
        ),
        test_case!(
            "device.limits.subgroup_size",
            "the subgroup width is a power of two between 1 and 128",
            limits_subgroup_size
        ),
        test_case!(
            "device.memory.sizes_consistent",
            "total memory is non-zero, free memory and the largest allocation do not exceed it",
            memory_sizes_consistent
        ),
        test_case!(
            "device.memory.allocation_usable",
            "a buffer of min(largest allocation, a quarter of memory, 32 MiB) can be allocated and holds data at both ends and in the middle",
            memory_allocation_usable
        ),
        test_case!(
            "device.kernel_formats.listed_once",
            "the device accepts at least one kernel format, and lists each format once",
            kernel_formats_listed_once
        ),
        test_case!(
            "device.kernel_formats.wgsl_reachable",
            "a WGSL kernel loads in a format the device accepts and runs; a device that accepts no format the host makes from WGSL skips this and every other WGSL test",
            kernel_formats_wgsl_reachable
        ),
        test_case!(
            "device.features.claimed_kernels_run",
            "for every kernel feature the device claims (f16, f64, i64, atomics), a kernel using it loads and computes the right value",
            features_claimed_kernels_run
        ),
        test_case!(
            "device.features.unclaimed_kernels_refused",
            "a kernel needing a feature the device does not claim is refused as unsupported, naming the feature",
            features_unclaimed_kernels_refused
        ),
        test_case!(
            "device.memory_usage.consistent",
            "the device's memory usage (ABI 1.1) is unsupported, or a total equal to the reported memory and a free amount that an allocation never raises",
            memory_usage_consistent
        ),
        test_case!(
            "device.open.close_and_reopen",
            "the device can be opened, used and closed twice in a row, each time working",
            open_close_and_reopen
        ),
        test_case!(
            "device.open.two_handles",
            "two handles to one device open at once keep their buffers apart and both work",
            open_two_handles
        ),
        test_case!(
            "device.open.index_out_of_range",
            "describing or opening a device index past the last is refused as not found",
            open_index_out_of_range
        ),
    ]
}

/// The info with the one field that may change between two questions cleared.
fn without_free_memory(info: &DeviceInfo) -> DeviceInfo {
    DeviceInfo {
        free_memory: 0,
        ..info.clone()
    }
}

/// The backend under test's object, for checks below the application API.
fn backend_of(context: &TestContext) -> Result<std::sync::Arc<dyn xhal::backend::Backend>, Verdict> {
    let target = context.target();
    target
        .runtime()
        .backend(target.backend_name())
        .map(|entry| entry.backend().clone())
        .ok_or_else(|| {
            Verdict::fail(format!(
                "backend `{}` is no longer in the runtime",
                target.backend_name()
            ))
        })
}

/// The device opened anew, as a second handle of its own: through a runtime over the same
/// backend object, whose devices are not shared with the target's runtime.
fn open_anew(context: &TestContext) -> Result<Device, Verdict> {
    let runtime = xhal::Runtime::builder()
        .without_static_backends()
        .without_plugin_search()
        .backend(backend_of(context)?)
        .build()?;
    Ok(runtime.open(&format!(
        "{}:{}",
        context.target().backend_name(),
        context.device_index()
    ))?)
}

/// The device's info as discovery recorded it.
fn discovered_info(context: &TestContext) -> Result<DeviceInfo, Verdict> {
    let target = context.target();
    target
        .runtime()
        .devices()
        .into_iter()
        .find(|entry| entry.backend == target.backend_name() && entry.index == context.device_index())
        .map(|entry| entry.info)
        .ok_or_else(|| Verdict::fail("the device is missing from the runtime's discovered devices"))
}

/// The device's info as a runtime built afresh, the same way, reports it.
fn fresh_runtime_info(context: &TestContext) -> Result<DeviceInfo, Verdict> {
    let fresh = Target::open(context.target().spec())
        .map_err(|error| Verdict::fail(format!("a second runtime for the same backend does not open: {error}")))?;
    let devices = fresh
        .devices()
        .map_err(|error| Verdict::fail(format!("a second runtime lists no devices: {error}")))?;
    devices
        .into_iter()
        .find(|(index, _)| *index == context.device_index())
        .map(|(_, info)| info)
        .ok_or_else(|| {
            Verdict::fail(format!(
                "a second runtime has no device {} of backend `{}`",
                context.device_index(),
                context.target().backend_name()
            ))
        })
}

fn name_and_vendor(context: &TestContext) -> TestResult {
    let info = context.info();
    for (what, text) in [("name", &info.name), ("vendor", &info.vendor)] {
        check(!text.trim().is_empty(), || format!("the device's {what} is empty"))?;
        check(!text.chars().any(char::is_control), || {
            format!("the device's {what} {text:?} holds control characters")
        })?;
    }
    Ok(())
}

fn known_type_and_features(context: &TestContext) -> TestResult {
    let info = context.info();
    let known = Features::ALL.iter().fold(0u64, |bits, (feature, _)| bits | feature.0);
    let unknown = info.features.0 & !known;
    check(unknown == 0, || {
        format!(
            "the device claims feature bits {unknown:#x}, which the ABI does not define (claimed: {:#x})",
            info.features.0
        )
    })?;
    let kinds = [
        DeviceType::Cpu,
        DeviceType::IntegratedGpu,
        DeviceType::DiscreteGpu,
        DeviceType::Accelerator,
        DeviceType::Other,
    ];
    check(kinds.contains(&info.device_type), || {
        format!("the device type {:?} is none of the ABI's kinds", info.device_type)
    })?;
    check_eq(
        DeviceType::from_abi(info.device_type.to_abi()),
        info.device_type,
        "device type read back through its ABI value",
    )?;
    // A 64-bit atomic works on a 64-bit integer, so claiming the one without the other
    // promises kernels that cannot be written.
    if info.features.contains(Features::ATOMICS_64) {
        check(info.features.contains(Features::I64), || {
            "the device claims 64-bit atomics but not 64-bit integers".to_string()
        })?;
    }
    Ok(())
}

fn pci_bus_id_form(context: &TestContext) -> TestResult {
    let Some(bus_id) = &context.info().pci_bus_id else {
        return Err(Verdict::skip("the device reports no PCI bus id"));
    };
    // domain:bus:device.function, as lspci -D and CUDA print it: 0000:01:00.0.
    let well_formed = (|| {
        let (domain, rest) = bus_id.split_once(':')?;
        let (bus, rest) = rest.split_once(':')?;
        let (device, function) = rest.split_once('.')?;
        let hex = |part: &str, width: std::ops::RangeInclusive<usize>| {
            width.contains(&part.len()) && part.chars().all(|c| c.is_ascii_hexdigit())
        };
        Some(hex(domain, 4..=8) && hex(bus, 2..=2) && hex(device, 2..=2) && hex(function, 1..=1))
    })()
    .unwrap_or(false);
    check(well_formed, || {
        format!("the PCI bus id {bus_id:?} is not of the form domain:bus:device.function (0000:01:00.0)")
    })
}

fn stable_across_enumerations(context: &TestContext) -> TestResult {
    let opened = without_free_memory(context.info());
    let sources = [
        ("discovery", discovered_info(context)?),
        (
            "a second device_info call",
            backend_of(context)?.device_info(context.device_index())?,
        ),
        ("a second open", open_anew(context)?.info().clone()),
        ("a fresh runtime", fresh_runtime_info(context)?),
    ];
    for (source, info) in sources {
        if without_free_memory(&info) != opened {
            return Err(Verdict::mismatch(
                format!("the device info from {source} differs from the info at open (free memory aside)"),
                opened,
                without_free_memory(&info),
            ));
        }
    }
    Ok(())
}

fn uuid_nonzero(context: &TestContext) -> TestResult {
    check(context.info().uuid != [0; 16], || {
        "the device's uuid is all zeros".to_string()
    })
}

fn uuid_stable(context: &TestContext) -> TestResult {
    let uuid = context.info().uuid_string();
    let reopened = {
        let device = open_anew(context)?;
        device.info().uuid_string()
    };
    let sources = [
        ("discovery", discovered_info(context)?.uuid_string()),
        (
            "a second device_info call",
            backend_of(context)?.device_info(context.device_index())?.uuid_string(),
        ),
        ("a second open", reopened),
        ("a fresh runtime", fresh_runtime_info(context)?.uuid_string()),
    ];
    for (source, other) in sources {
        check_eq(other.as_str(), uuid.as_str(), &format!("uuid from {source}"))?;
    }
    Ok(())
}

fn uuids_distinct(context: &TestContext) -> TestResult {
    let devices = context
        .target()
        .devices()
        .map_err(|error| Verdict::fail(format!("cannot list the backend's devices: {error}")))?;
    if devices.len() < 2 {
        return Err(Verdict::skip(
            "the backend has one device, so there are no uuids to compare",
        ));
    }
    let mut seen = std::collections::HashMap::new();
    for (index, info) in &devices {
        if let Some(first) = seen.insert(info.uuid, *index) {
            return Err(Verdict::fail(format!(
                "devices {first} and {index} share the uuid {}",
                info.uuid_string()
            )));
        }
    }
    Ok(())
}

fn limits_workgroup_size(context: &TestContext) -> TestResult {
    let [x, y, z] = context.info().max_workgroup_size;
    check(x >= 64, || {
        format!("the largest workgroup is {x} wide in x; every compute device allows 64")
    })?;
    check(y >= 1 && z >= 1, || {
        format!("the largest workgroup is {y} in y and {z} in z; each must be at least 1")
    })
}

fn limits_workgroup_invocations(context: &TestContext) -> TestResult {
    let info = context.info();
    let invocations = info.max_workgroup_invocations;
    check(invocations >= 64, || {
        format!("{invocations} invocations per workgroup are reported; every compute device allows 64")
    })?;
    for (axis, size) in ["x", "y", "z"].iter().zip(info.max_workgroup_size) {
        check(size <= invocations, || {
            format!(
                "the largest workgroup is {size} in {axis}, more than the {invocations} invocations a workgroup may have"
            )
        })?;
    }
    let room: u64 = info.max_workgroup_size.iter().map(|&size| u64::from(size)).product();
    check(room >= u64::from(invocations), || {
        format!(
            "{invocations} invocations per workgroup cannot fit in the largest workgroup shape {:?}",
            info.max_workgroup_size
        )
    })
}

fn limits_workgroup_count(context: &TestContext) -> TestResult {
    let counts = context.info().max_workgroup_count;
    for (axis, count) in ["x", "y", "z"].iter().zip(counts) {
        check(count == 0 || count >= 65_535, || {
            format!("at most {count} workgroups in {axis} are reported; every compute device allows 65535")
        })?;
    }
    Ok(())
}

fn limits_workgroup_memory(context: &TestContext) -> TestResult {
    let bytes = context.info().max_workgroup_memory;
    check(bytes >= 16 * 1024, || {
        format!("{bytes} bytes of workgroup memory are reported; every compute device has 16384")
    })
}

/// Fills `scratch` through 64 invocations, then has each read back words another invocation
/// wrote, so every word must hold its own value at once.
const WORKGROUP_MEMORY_TEMPLATE: &str = r#"
const WORDS: u32 = __WORDS__u;
var<workgroup> scratch: array<u32, WORDS>;
@group(0) @binding(0) var<storage, read_write> mismatches: array<u32, 64>;

@compute @workgroup_size(64)
fn fill_and_check(@builtin(local_invocation_index) lane: u32) {
    for (var i = lane; i < WORDS; i += 64u) {
        scratch[i] = i * 2654435761u + 12345u;
    }
    workgroupBarrier();
    var wrong = 0u;
    for (var i = (lane + 1u) % 64u; i < WORDS; i += 64u) {
        if scratch[i] != i * 2654435761u + 12345u {
            wrong += 1u;
        }
    }
    mismatches[lane] = wrong;
}
"#;

fn workgroup_memory_usable(context: &TestContext) -> TestResult {
    let bytes = context.info().max_workgroup_memory.min(64 * 1024);
    let words = bytes / 4;
    if words < 64 {
        return Err(Verdict::skip(format!(
            "the device reports {bytes} bytes of workgroup memory, less than the 256 the test needs"
        )));
    }
    let source = WORKGROUP_MEMORY_TEMPLATE.replace("__WORDS__", &words.to_string());
    let kernel = context
        .load_wgsl("workgroup memory", &source)?
        .kernel("fill_and_check")?;
    let mismatches = context.device().alloc_from(context.stream(), &[u32::MAX; 64])?;
    context
        .stream()
        .launch(&Launch::new(&kernel).workgroups(1, 1, 1).buffer(&mismatches))?;
    let found = context.stream().read_to_vec(&mismatches)?;
    check_slice_eq(
        &found,
        &[0; 64],
        &format!("words of a {bytes}-byte workgroup array that lost their value, per invocation"),
    )
}

fn limits_buffer_arguments(context: &TestContext) -> TestResult {
    let count = context.info().max_buffer_arguments;
    check(count == 0 || count >= 8, || {
        format!("{count} buffer arguments per launch are reported; every compute device allows 8")
    })
}

fn limits_scalar_block(context: &TestContext) -> TestResult {
    let bytes = context.info().max_scalar_block_size;
    check(bytes == 0 || bytes >= 128, || {
        format!("a {bytes}-byte scalar block is reported; every compute device takes 128 bytes of push constants")
    })
}

fn limits_buffer_offset_alignment(context: &TestContext) -> TestResult {
    // 0 reads as 1 (no requirement), as the ABI says.
    let alignment = context.info().buffer_offset_alignment.max(1);
    check(alignment.is_power_of_two(), || {
        format!("the buffer offset alignment {alignment} is not a power of two")
    })?;
    check(alignment <= 256, || {
        format!("the buffer offset alignment is {alignment} bytes; no compute device needs more than 256")
    })
}

fn limits_subgroup_size(context: &TestContext) -> TestResult {
    let width = context.info().subgroup_size;
    check(width.is_power_of_two() && width <= 128, || {
        format!("the subgroup width {width} is not a power of two between 1 and 128")
    })
}

fn memory_sizes_consistent(context: &TestContext) -> TestResult {
    let info = context.info();
    check(info.total_memory > 0, || "the device reports no memory".to_string())?;
    check(info.free_memory <= info.total_memory, || {
        format!(
            "{} bytes are free of a total of {}",
            info.free_memory, info.total_memory
        )
    })?;
    check(info.max_allocation_size <= info.total_memory, || {
        format!(
            "the largest allocation, {} bytes, exceeds the total memory, {} bytes",
            info.max_allocation_size, info.total_memory
        )
    })
}

fn memory_allocation_usable(context: &TestContext) -> TestResult {
    let info = context.info();
    let largest = match info.max_allocation_size {
        0 => u64::MAX,
        limit => limit,
    };
    let size = largest.min(info.total_memory / 4).min(32 << 20) & !4095;
    if size < 8192 {
        return Err(Verdict::fail(format!(
            "the device cannot hold a {size}-byte buffer: largest allocation {}, total memory {}",
            info.max_allocation_size, info.total_memory
        )));
    }
    let size = size as usize;
    let buffer = context.device().alloc::<u8>(size)?;
    let stream = context.stream();
    stream.fill(buffer.slice(..size), 0x5a_u8)?;
    let head = context.random_bytes(11, 4096);
    let tail = context.random_bytes(12, 4096);
    stream.write(&buffer, &head)?;
    stream.write(buffer.slice(size - tail.len()..), &tail)?;
    let mut back = vec![0u8; 4096];
    stream.read(&buffer, &mut back)?;
    check_slice_eq(&back, &head, &format!("first 4 KiB of a {size}-byte buffer"))?;
    stream.read(buffer.slice(size - tail.len()..), &mut back)?;
    check_slice_eq(&back, &tail, &format!("last 4 KiB of a {size}-byte buffer"))?;
    stream.read(buffer.slice(size / 2..), &mut back)?;
    check_slice_eq(
        &back,
        &[0x5a; 4096],
        &format!("4 KiB filled in the middle of a {size}-byte buffer"),
    )
}

fn kernel_formats_listed_once(context: &TestContext) -> TestResult {
    let formats = &context.info().kernel_formats;
    check(!formats.is_empty(), || {
        "the device accepts no kernel format".to_string()
    })?;
    check(!formats.contains(&KernelFormat(0)), || {
        format!("the device lists format 0, an unused slot, among {formats:?}")
    })?;
    let mut seen = HashSet::new();
    for format in formats {
        check(seen.insert(*format), || {
            format!("the device lists kernel format {format} more than once: {formats:?}")
        })?;
    }
    Ok(())
}

const FORMAT_PROBE: &str = r#"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn probe(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&out) {
        out[id.x] = id.x * 3u + 1u;
    }
}
"#;

fn kernel_formats_wgsl_reachable(context: &TestContext) -> TestResult {
    let formats = &context.info().kernel_formats;
    // A device that takes only formats of its own is certified without kernels: this and
    // every other kernel test is skipped, each saying so.
    context.require_wgsl_kernels()?;
    let module = context.load_wgsl("format probe", FORMAT_PROBE)?;
    check(formats.contains(&module.format()), || {
        format!(
            "the module was handed over as {}, which the device does not list",
            module.format()
        )
    })?;
    let kernel = module.kernel("probe")?;
    let out = context.device().alloc_from(context.stream(), &[0u32; 100])?;
    context
        .stream()
        .launch(&Launch::new(&kernel).workgroups(2, 1, 1).buffer(&out))?;
    let expected: Vec<u32> = (0..100).map(|i| i * 3 + 1).collect();
    check_slice_eq(&context.stream().read_to_vec(&out)?, &expected, "probe kernel output")
}

/// One small kernel per kernel feature: each reads inputs it cannot fold away and writes a
/// u32 the test knows.
struct FeatureProbe {
    feature: Features,
    name: &'static str,
    source: &'static str,
    /// `out[0]` after one workgroup with `input = [3, 5]`.
    expected: u32,
}

const FEATURE_PROBES: [FeatureProbe; 5] = [
    FeatureProbe {
        feature: Features::F16,
        name: "f16",
        source: r#"
enable f16;
@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(1)
fn probe() {
    let x = f16(input[0]) * 1.5h + f16(input[1]);
    out[0] = u32(f32(x) * 10.0);
}
"#,
        // 3 * 1.5 + 5 = 9.5
        expected: 95,
    },
    FeatureProbe {
        feature: Features::F64,
        name: "f64",
        source: r#"
@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(1)
fn probe() {
    let big = f64(input[0]) * 1099511627776.0lf + f64(input[1]);
    out[0] = u32(big - 3298534883328.0lf);
}
"#,
        // 3 * 2^40 + 5 - 3 * 2^40 = 5, which f32 would lose.
        expected: 5,
    },
    FeatureProbe {
        feature: Features::I64,
        name: "i64",
        source: r#"
@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(1)
fn probe() {
    let wide = (u64(input[0]) << 40u) + u64(input[1]);
    out[0] = u32(wide >> 38u) + u32(wide & 0xfflu);
}
"#,
        // (3 << 40 + 5) >> 38 = 12, plus the low byte 5.
        expected: 17,
    },
    FeatureProbe {
        feature: Features::ATOMICS_32,
        name: "atomics32",
        source: r#"
@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<atomic<u32>>;
@compute @workgroup_size(8)
fn probe() {
    atomicAdd(&out[0], input[0] + input[1]);
}
"#,
        // 8 invocations each add 8.
        expected: 64,
    },
    FeatureProbe {
        feature: Features::ATOMICS_64,
        name: "atomics64",
        source: r#"
@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<atomic<u64>>;
@compute @workgroup_size(8)
fn probe() {
    atomicAdd(&out[0], (u64(input[0]) << 32u) + u64(input[1]));
}
"#,
        // The low word of 8 * (3 << 32 | 5): 40; the carry-free high word is checked by the
        // compute area.
        expected: 40,
    },
];

fn features_claimed_kernels_run(context: &TestContext) -> TestResult {
    context.require_wgsl_kernels()?;
    let mut tried = 0;
    for probe in FEATURE_PROBES.iter() {
        if !context.device().has_features(probe.feature) {
            continue;
        }
        tried += 1;
        let module = context.device().load_wgsl(probe.source).map_err(|error| {
            Verdict::fail(format!(
                "the device claims {} but a kernel using it does not load: {error}",
                probe.name
            ))
        })?;
        let kernel = module.kernel("probe")?;
        let input = context.device().alloc_from(context.stream(), &[3u32, 5])?;
        // Two words so a 64-bit atomic has its slot; the low word is read back.
        let out = context.device().alloc_from(context.stream(), &[0u32; 2])?;
        context
            .stream()
            .launch(&Launch::new(&kernel).buffer(&input).buffer(&out))?;
        let result = context.stream().read_to_vec(&out)?;
        check_eq(
            result[0],
            probe.expected,
            &format!("result of the {} probe kernel", probe.name),
        )?;
    }
    if tried == 0 {
        return Err(Verdict::skip(
            "the device claims none of f16, f64, i64, atomics32, atomics64",
        ));
    }
    Ok(())
}

fn memory_usage_consistent(context: &TestContext) -> TestResult {
    let device = context.device();
    // Freed blocks the caching allocator keeps would serve the allocation below without the
    // backend: give them back first.
    device.empty_cache();
    let before = match device.memory_usage() {
        Ok(usage) => usage,
        Err(error) if error.kind() == ErrorKind::Unsupported => {
            return Err(Verdict::skip(format!(
                "the backend does not report memory usage: {}",
                error.message()
            )))
        }
        Err(error) => return Err(error.into()),
    };
    check(before.total == device.info().total_memory, || {
        format!(
            "memory usage says {} bytes in total, device info says {}",
            before.total,
            device.info().total_memory
        )
    })?;
    check(before.free <= before.total, || {
        format!("{} bytes free of {} in total", before.free, before.total)
    })?;
    let size: usize = (3 << 20) + 4096;
    if before.free < 2 * size as u64 {
        return Err(Verdict::skip(format!(
            "only {} bytes free, too few to see an allocation",
            before.free
        )));
    }
    let buffer = device.alloc::<u8>(size)?;
    let during = device.memory_usage()?;
    // Only "never more free": a driver's own pool (CUDA's stream-ordered allocator) may serve
    // an allocation from memory it already holds, and other processes share the device.
    check(during.free <= before.free && during.total == before.total, || {
        format!(
            "{} of {} bytes were free before a {size}-byte allocation and {} of {} after it",
            before.free, before.total, during.free, during.total
        )
    })?;
    drop(buffer);
    Ok(())
}

fn features_unclaimed_kernels_refused(context: &TestContext) -> TestResult {
    let mut tried = 0;
    for probe in FEATURE_PROBES.iter() {
        if context.device().has_features(probe.feature) {
            continue;
        }
        tried += 1;
        let message = expect_error(
            context.device().load_wgsl(probe.source),
            &[ErrorKind::Unsupported],
            &format!("a kernel using {}, which the device does not claim", probe.name),
        )?;
        check(message.contains(probe.name), || {
            format!(
                "refusing a kernel that needs {}, the message does not name it: {message}",
                probe.name
            )
        })?;
    }
    if tried == 0 {
        return Err(Verdict::skip(
            "the device claims every kernel feature, so none can be refused",
        ));
    }
    Ok(())
}

/// Allocates, writes, runs a kernel on and reads back a buffer on `device`.
fn exercise(device: &Device, seed: u32) -> TestResult {
    let stream = device.create_stream()?;
    let data: Vec<u32> = (0..300).map(|i| i ^ seed).collect();
    let buffer = device.alloc_from(&stream, &data)?;
    check_slice_eq(
        &stream.read_to_vec(&buffer)?,
        &data,
        "data written to the opened device",
    )?;
    if let Some(reason) = wgsl_unreachable(device.info()) {
        return Err(Verdict::skip(reason));
    }
    let kernel = device.load_wgsl(FORMAT_PROBE)?.kernel("probe")?;
    stream.launch(&Launch::new(&kernel).workgroups(5, 1, 1).buffer(&buffer))?;
    let expected: Vec<u32> = (0..300).map(|i| i * 3 + 1).collect();
    check_slice_eq(
        &stream.read_to_vec(&buffer)?,
        &expected,
        "kernel output on the opened device",
    )
}

fn open_close_and_reopen(context: &TestContext) -> TestResult {
    for round in 0..2u32 {
        // Each round's device, stream, module and buffer are dropped before the next opens.
        let device = open_anew(context).map_err(|verdict| match verdict {
            Verdict::Fail(mut failure) => {
                failure.message = format!("opening the device, round {}: {}", round + 1, failure.message);
                Verdict::Fail(failure)
            }
            skip => skip,
        })?;
        exercise(&device, round).map_err(|verdict| match verdict {
            Verdict::Fail(mut failure) => {
                failure.message = format!("round {}: {}", round + 1, failure.message);
                Verdict::Fail(failure)
            }
            skip => skip,
        })?;
    }
    Ok(())
}

fn open_two_handles(context: &TestContext) -> TestResult {
    let second = open_anew(context)?;
    let second_stream = second.create_stream()?;
    let first_data = context.random_u32(21, 1000);
    let second_data = context.random_u32(22, 1000);
    let first_buffer = context.device().alloc_from(context.stream(), &first_data)?;
    let second_buffer = second.alloc_from(&second_stream, &second_data)?;
    exercise(&second, 7)?;
    check_slice_eq(
        &context.stream().read_to_vec(&first_buffer)?,
        &first_data,
        "buffer on the first handle",
    )?;
    check_slice_eq(
        &second_stream.read_to_vec(&second_buffer)?,
        &second_data,
        "buffer on the second handle",
    )?;
    expect_error(
        context.stream().read_to_vec(&second_buffer),
        &[ErrorKind::InvalidHandle],
        "reading a buffer of one opened device through a stream of another",
    )?;
    Ok(())
}

fn open_index_out_of_range(context: &TestContext) -> TestResult {
    let backend = backend_of(context)?;
    let count = backend.device_count()?;
    expect_error(
        backend.device_info(count),
        &[ErrorKind::NotFound],
        &format!("describing device {count} of a backend with {count} device(s)"),
    )?;
    match backend.device_open(count) {
        Ok(handle) => {
            backend.device_close(handle);
            Err(Verdict::fail(format!(
                "opening device {count} of a backend with {count} device(s) was accepted"
            )))
        }
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(()),
        Err(error) => Err(Verdict::mismatch(
            format!("opening device {count} of a backend with {count} device(s) was refused with the wrong kind"),
            "an error of kind not_found",
            error.to_string(),
        )),
    }?;
    expect_error(
        context
            .target()
            .runtime()
            .open(&format!("{}:{count}", context.target().backend_name())),
        &[ErrorKind::NotFound],
        &format!("opening device {count} through the runtime"),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every probe must load on a device that claims its feature, including the ones the CPU
    /// backend skips: it validates, needs exactly its feature (64-bit atomics also need
    /// 64-bit integers), and translates for every target the host makes.
    #[test]
    fn feature_probes_compile_and_need_their_feature() {
        for probe in FEATURE_PROBES.iter() {
            let module =
                xhal::kernel::parse_wgsl(probe.source).unwrap_or_else(|error| panic!("{}: {error}", probe.name));
            let mut needed = probe.feature;
            if probe.feature == Features::ATOMICS_64 {
                needed = needed | Features::I64;
            }
            assert_eq!(module.required_features(), needed.0, "{}", probe.name);
            for target in [xhal::kernel::Target::SpirvShader, xhal::kernel::Target::Wgsl] {
                xhal::kernel::translate(probe.source, target)
                    .unwrap_or_else(|error| panic!("{} for {target:?}: {error}", probe.name));
            }
        }
    }
}
