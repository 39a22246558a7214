//! The compiled mode against the interpreter: the same kernels give the same bytes, what the
//! compiled path lacks still runs, and a bad mode is a clear error.

use super::wgsl::f32s;
use super::words;
use super::{Fixture, TEST_MEMORY};
use crate::{CpuBackend, CpuConfig, CpuDriver, KernelMode};
use xhal_backend::{Backend, ErrorKind, KernelFormat};

fn driver(mode: KernelMode) -> CpuDriver {
    driver_with_memory(mode, TEST_MEMORY)
}

fn driver_with_memory(mode: KernelMode, memory_per_device: u64) -> CpuDriver {
    CpuDriver::with_config(CpuConfig {
        devices: 1,
        memory_per_device,
    })
    .with_kernel_mode(mode)
}

fn compiler_present() -> bool {
    std::process::Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".to_owned()))
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success())
}

/// Runs `entry` in both modes and checks the outputs are the same bytes.
fn agree(source: &str, entry: &str, workgroups: [u32; 3], inputs: &[Vec<u8>], scalars: &[u8]) -> Vec<Vec<u8>> {
    agree_in(TEST_MEMORY, source, entry, workgroups, inputs, scalars)
}

/// [`agree`] on devices of `memory` bytes.
fn agree_in(
    memory: u64,
    source: &str,
    entry: &str,
    workgroups: [u32; 3],
    inputs: &[Vec<u8>],
    scalars: &[u8],
) -> Vec<Vec<u8>> {
    let interpreted = Fixture::with_driver(driver_with_memory(KernelMode::Interpret, memory))
        .dispatch(source, entry, workgroups, inputs, scalars)
        .unwrap_or_else(|error| panic!("{entry}, interpreted: {error}"));
    let compiled = Fixture::with_driver(driver_with_memory(KernelMode::Compile, memory))
        .dispatch(source, entry, workgroups, inputs, scalars)
        .unwrap_or_else(|error| panic!("{entry}, compiled: {error}"));
    assert_eq!(
        compiled, interpreted,
        "{entry}: the compiled kernel and the interpreter disagree"
    );
    compiled
}

#[test]
fn compiled_kernels_match_the_interpreter_on_the_examples() {
    if !compiler_present() {
        println!("skipped: no C compiler (cc or $CC); the compiled mode cannot be tested here");
        return;
    }
    let n = 3000usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let y: Vec<f32> = (0..n).map(|i| 7.0 - i as f32).collect();
    let mut scalars = f32s(&[1.5]);
    scalars.extend(words(&[n as u32]));
    agree(
        include_str!("../../../../examples/kernels/saxpy.wgsl"),
        "saxpy",
        [(n as u32).div_ceil(256), 1, 1],
        &[f32s(&x), f32s(&y)],
        &scalars,
    );

    let values: Vec<f32> = (0..n).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
    let groups = n.div_ceil(512);
    let out = agree(
        include_str!("../../../../examples/kernels/reduce.wgsl"),
        "reduce",
        [groups as u32, 1, 1],
        &[f32s(&values), vec![0; groups * 4]],
        &words(&[n as u32]),
    );
    let sums: Vec<f32> = out[1]
        .chunks(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let expected: Vec<f32> = values.chunks(512).map(|chunk| chunk.iter().sum()).collect();
    assert_eq!(sums, expected);

    let (m, k, cols) = (37usize, 29usize, 41usize);
    let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 - 3.0).collect();
    let b: Vec<f32> = (0..k * cols).map(|i| (i % 5) as f32 - 2.0).collect();
    agree(
        include_str!("../../../../examples/kernels/matmul.wgsl"),
        "matmul",
        [cols.div_ceil(16) as u32, m.div_ceil(16) as u32, 1],
        &[f32s(&a), f32s(&b), vec![0; m * cols * 4]],
        &words(&[m as u32, cols as u32, k as u32]),
    );
}

/// Barriers inside loops and branches, a uniform early return, values and locals living
/// across barriers, `workgroupUniformLoad`, private variables and a helper function.
const REGIONS: &str = r#"
struct Params { n: u32, rounds: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
var<workgroup> shared_values: array<u32, 64>;
var<workgroup> flag: u32;
var<private> calls: u32;

fn mix(v: u32, salt: u32) -> u32 {
    calls += 1u;
    return (v ^ salt) * 2654435761u + calls;
}

@compute @workgroup_size(8, 8)
fn regions(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    if params.rounds == 0u {
        return;
    }
    let base = group.x * 64u;
    var value = data[base + lane];
    var total = 0u;
    for (var round = 0u; round < params.rounds; round++) {
        shared_values[lane] = mix(value, round);
        workgroupBarrier();
        if round % 2u == 0u {
            value = shared_values[63u - lane];
        } else {
            value = shared_values[(lane + 1u) % 64u] + value;
        }
        workgroupBarrier();
        if lane == 0u {
            flag = value % 5u;
        }
        let seen = workgroupUniformLoad(&flag);
        total += seen + value;
    }
    if lane >= params.n {
        return;
    }
    data[base + lane] = total;
}
"#;

#[test]
fn compiled_barrier_regions_match_the_interpreter() {
    if !compiler_present() {
        println!("skipped: no C compiler (cc or $CC); the compiled mode cannot be tested here");
        return;
    }
    let input: Vec<u32> = (0..128u32).map(|i| i.wrapping_mul(40503) ^ 0x5bd1).collect();
    for (n, rounds) in [(64u32, 5u32), (37, 4), (64, 0)] {
        let out = agree(REGIONS, "regions", [2, 1, 1], &[words(&input)], &words(&[n, rounds]));
        if rounds == 0 {
            assert_eq!(out[0], words(&input), "a uniform early return leaves the data alone");
        }
    }
}

/// Loops without barriers in an entry point with barriers: those every invocation runs the
/// same number of times (uniform `break` and `continue`, nested) run once for the workgroup
/// around the invocations, the others inside each invocation. A 3-D workgroup, so that the
/// invocations are looped over x, y and z.
const UNIFORM_LOOPS: &str = r#"
struct Params { n: u32, limit: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
var<workgroup> tile: array<u32, 64>;

@compute @workgroup_size(8, 4, 2)
fn loops(
    @builtin(local_invocation_id) local: vec3<u32>,
    @builtin(local_invocation_index) lane: u32,
    @builtin(workgroup_id) group: vec3<u32>,
) {
    let base = group.x * 64u;
    tile[lane] = data[base + lane];
    workgroupBarrier();
    var sum = lane;
    for (var i = 0u; i < 64u; i++) {
        if i == params.limit {
            break;
        }
        if i % 3u == 1u {
            continue;
        }
        sum = sum * 31u + tile[(lane + i) % 64u];
        var j = 0u;
        loop {
            if j >= local.x {
                break;
            }
            sum += j * i;
            j++;
        }
        for (var k = 0u; k < params.n; k++) {
            sum ^= tile[(k * 7u + local.y) % 64u] << (k % 5u);
        }
    }
    if local.y == 1u {
        for (var k = 0u; k < params.n; k++) {
            sum ^= k << (local.z + 1u);
        }
    }
    for (var r = 0u; r < 8u; r++) {
        if r > local.x {
            break;
        }
        sum += r * tile[r];
    }
    workgroupBarrier();
    tile[lane] = sum;
    workgroupBarrier();
    data[base + lane] = tile[63u - lane] + sum;
}
"#;

#[test]
fn compiled_uniform_loops_match_the_interpreter() {
    if !compiler_present() {
        println!("skipped: no C compiler (cc or $CC); the compiled mode cannot be tested here");
        return;
    }
    let input: Vec<u32> = (0..192u32).map(|i| i.wrapping_mul(2_246_822_519) ^ 0x9e37).collect();
    for (n, limit) in [(3u32, 64u32), (0, 5), (7, 0), (1, 40)] {
        let out = agree(UNIFORM_LOOPS, "loops", [3, 1, 1], &[words(&input)], &words(&[n, limit]));
        assert_ne!(
            out[0],
            words(&input),
            "n={n} limit={limit}: the kernel wrote its results"
        );
    }
}

/// Divisions by divisors the same across a workgroup, which compiled code divides through a
/// memo of each divisor's reciprocal: from the scalar block, through a helper called with two
/// divisors in turn (the memo's two entries), as vectors, signed, and past the memo (a divisor
/// that differs between invocations).
const UNIFORM_DIVISIONS: &str = r#"
struct Params { u: u32, v: u32, s: i32, t: i32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read_write> data: array<u32>;

fn split(e: u32, size: u32) -> vec2<u32> { return vec2<u32>(e / size, e % size); }
fn signed_split(e: i32, size: i32) -> vec2<i32> { return vec2<i32>(e / size, e % size); }

@compute @workgroup_size(64)
fn divide(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = id.x;
    let e = data[i];
    let a = split(e, params.u);
    let b = split(e, params.v);
    let c = split(a.x, params.u * params.v + 1u);
    let vectors = vec2<u32>(e, e ^ 0x5bd1e995u) / vec2<u32>(params.u, params.v)
                + vec2<u32>(e, ~e) % vec2<u32>(params.v);
    let signed = signed_split(bitcast<i32>(e), params.s) + signed_split(bitcast<i32>(~e), params.t);
    let grid = e / (groups.x * 3u);
    let own = e / (i + params.u);
    data[i] = a.x ^ (a.y << 3u) ^ b.x ^ (b.y << 7u) ^ c.x ^ (c.y << 11u) ^ vectors.x ^ (vectors.y << 13u)
            ^ bitcast<u32>(signed.x) ^ (bitcast<u32>(signed.y) << 17u) ^ grid ^ (own << 19u);
}
"#;

#[test]
fn compiled_divisions_by_uniform_divisors_match_the_interpreter() {
    if !compiler_present() {
        println!("skipped: no C compiler (cc or $CC); the compiled mode cannot be tested here");
        return;
    }
    let specials = [
        0u32,
        1,
        2,
        3,
        7,
        0x7fff_ffff,
        0x8000_0000,
        0x8000_0001,
        0xffff_fffe,
        0xffff_ffff,
    ];
    let input: Vec<u32> = (0..256u32)
        .map(|i| match specials.get(i as usize) {
            Some(&special) => special,
            None => i.wrapping_mul(2_654_435_761) ^ (i << 7),
        })
        .collect();
    let divisors: [(u32, u32, i32, i32); 8] = [
        (0, 1, 0, 1),
        (1, 0, -1, i32::MIN),
        (2, 3, 7, -7),
        (6, 64, -3, 5),
        (641, 6_700_417, i32::MAX, -1),
        (0x8000_0000, 0x8000_0001, i32::MIN + 1, 2),
        (0xffff_ffff, 0xffff_fffe, -2, 3),
        (10, 100_000, 65_536, -65_536),
    ];
    for (u, v, s, t) in divisors {
        let scalars = words(&[u, v, s as u32, t as u32]);
        let out = agree(UNIFORM_DIVISIONS, "divide", [4, 1, 1], &[words(&input)], &scalars);
        assert_ne!(
            out[0],
            words(&input),
            "u={u} v={v} s={s} t={t}: the kernel wrote its results"
        );
    }
}

/// A costly pure function of a value the workgroup shares (`workgroupUniformLoad`), which
/// compiled code calls once for the workgroup.
const UNIFORM_CALLS: &str = r#"
@group(0) @binding(0) var<storage, read_write> data: array<f32>;
var<workgroup> total: f32;

fn costly(x: f32) -> f32 {
    var y = x;
    for (var i = 0; i < 8; i++) { y = sqrt(abs(y) + 1.0) - 0.25; }
    return y;
}

@compute @workgroup_size(64)
fn scale(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    let base = group.x * 64u;
    if (lane == 0u) { total = data[base] + data[base + 63u]; }
    let whole = workgroupUniformLoad(&total);
    let factor = costly(whole);
    data[base + lane] = data[base + lane] * factor + f32(lane);
}
"#;

#[test]
fn compiled_uniform_calls_match_the_interpreter() {
    if !compiler_present() {
        println!("skipped: no C compiler (cc or $CC); the compiled mode cannot be tested here");
        return;
    }
    let input: Vec<f32> = (0..192).map(|i| (i as f32 * 0.37).sin() * 10.0).collect();
    let bytes: Vec<u8> = input.iter().flat_map(|v| v.to_le_bytes()).collect();
    let out = agree(UNIFORM_CALLS, "scale", [3, 1, 1], std::slice::from_ref(&bytes), &[]);
    assert_ne!(out[0], bytes, "the kernel wrote its results");
}

/// Regions that are only `if lane < n` stop at the first invocation the condition fails in;
/// one whose earlier values a later region reads (`kept`) must visit every invocation.
const PREFIXES: &str = r#"
struct Params { n: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
var<workgroup> w: array<u32, 64>;

@compute @workgroup_size(64)
fn prefixes(
    @builtin(local_invocation_index) lane: u32,
    @builtin(local_invocation_id) local: vec3<u32>,
    @builtin(workgroup_id) group: vec3<u32>,
) {
    let base = group.x * 64u;
    w[lane] = data[base + lane];
    workgroupBarrier();
    for (var s = 32u; s > 0u; s >>= 1u) {
        if lane < s {
            w[lane] += w[lane + s] * (s + 1u);
        }
        workgroupBarrier();
    }
    if params.n > local.x {
        w[lane] = w[lane] * 3u + 1u;
    }
    workgroupBarrier();
    let kept = data[base + lane] + lane;
    if lane <= params.n {
        w[lane] ^= kept;
    }
    workgroupBarrier();
    data[base + lane] = w[lane] + kept;
}
"#;

#[test]
fn compiled_prefix_regions_match_the_interpreter() {
    if !compiler_present() {
        println!("skipped: no C compiler (cc or $CC); the compiled mode cannot be tested here");
        return;
    }
    let input: Vec<u32> = (0..128u32).map(|i| i.wrapping_mul(0x2545_f491) ^ 0x1234).collect();
    for n in [0u32, 10, 63, 100] {
        agree(PREFIXES, "prefixes", [2, 1, 1], &[words(&input)], &words(&[n]));
    }
}

const GUARDED: &str = r#"
struct Params { n: u32, scale: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;

@compute @workgroup_size(64)
fn below(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i < params.n {
        y[i] = y[i] * params.scale + x[i];
    }
}

@compute @workgroup_size(64)
fn returns_first(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = 2u * id.x + 1u;
    if i >= params.n {
        return;
    }
    y[i] = x[i - 1u] + params.scale;
    y[i - 1u] = x[i] ^ params.scale;
}

@compute @workgroup_size(64)
fn above(@builtin(global_invocation_id) id: vec3<u32>, @builtin(workgroup_id) group: vec3<u32>) {
    if params.n - group.x * 7u > id.x {
        y[id.x] += x[id.x] | 1u;
    }
}
"#;

/// Bodies under a condition that lets a prefix of each workgroup's invocations through run
/// that prefix without the condition when compiled: every limit (none, part of a workgroup,
/// a workgroup's edge, all, one that wraps around) gives the interpreter's bytes.
#[test]
fn compiled_guarded_prefixes_match_the_interpreter() {
    if !compiler_present() {
        println!("skipped: no C compiler (cc or $CC); the compiled mode cannot be tested here");
        return;
    }
    let x: Vec<u32> = (0..512u32).map(|i| i.wrapping_mul(0x9e37_79b9) >> 3).collect();
    let y: Vec<u32> = (0..512u32).map(|i| i ^ 0x5a5a).collect();
    for n in [0u32, 1, 63, 64, 65, 130, 200, 256, 511, 512, 1000, u32::MAX] {
        for entry in ["below", "returns_first", "above"] {
            let outputs = agree(GUARDED, entry, [4, 1, 1], &[words(&x), words(&y)], &words(&[n, 3]));
            // The kernels did work wherever the limit let any invocation through (`above`'s
            // limit wraps around past the first workgroup, so it always does).
            let idle = match entry {
                "below" => n == 0,
                "returns_first" => n <= 1,
                _ => false,
            };
            assert_eq!(outputs[1] == words(&y), idle, "{entry}, n = {n}");
        }
    }
}

#[test]
fn a_kernel_the_compiled_path_lacks_runs_on_the_interpreter() {
    // Host C has no array constructor of more than 1024 elements: the compiled mode
    // interprets this kernel (with a warning).
    let elements: Vec<String> = (0..1025).map(|i| format!("{i}.0")).collect();
    let big = format!(
        "@group(0) @binding(0) var<storage, read_write> d: array<f32>;\n\
         @compute @workgroup_size(1)\n\
         fn big() {{ let t = array<f32, 1025>({}); d[0] = t[u32(d[0])] + d[0]; }}\n",
        elements.join(", ")
    );
    let before = crate::interpreter_fallbacks();
    let out = Fixture::with_driver(driver(KernelMode::Compile))
        .dispatch(&big, "big", [1, 1, 1], &[f32s(&[3.0])], &[])
        .expect("the interpreter runs it");
    assert_eq!(out[0], f32s(&[6.0]));
    assert!(crate::interpreter_fallbacks() > before, "the fallback was counted");
}

#[test]
fn a_malformed_mode_variable_fails_each_wgsl_module_load_naming_it() {
    let mut driver = driver(KernelMode::Auto);
    driver.kernel_mode = crate::native::KernelMode::from_lookup(|_| Some("fast".into()));
    let backend = CpuBackend::new(driver);
    let device = backend.device_open(0).unwrap();
    let error = backend
        .module_load(device, KernelFormat::WGSL, super::wgsl::SAXPY.as_bytes())
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument);
    assert!(
        error.message().contains("XHAL_CPU_MODE") && error.message().contains("`fast`"),
        "{error}"
    );
    // Built-in kernels do not depend on it.
    backend
        .module_load(device, KernelFormat::CPU_BUILTIN, b"add_u32")
        .expect("cpu-builtin modules still load");
}

#[test]
fn a_new_kernel_is_compiled_once_and_then_comes_from_the_cache() {
    if !compiler_present() {
        println!("skipped: no C compiler (cc or $CC); the compiled mode cannot be tested here");
        return;
    }
    // A kernel no other run has seen (the salt is in the code, so it is in the emitted C and
    // its cache key), so the first load must compile it.
    let salt = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.subsec_nanos())
        ^ std::process::id().rotate_left(16)
        | 0x1000;
    let source = format!(
        "struct Params {{ a: f32, n: u32 }}\nvar<immediate> params: Params;\n\
         @group(0) @binding(0) var<storage, read> x: array<f32>;\n\
         @group(0) @binding(1) var<storage, read_write> y: array<f32>;\n\
         @compute @workgroup_size(64)\nfn saxpy(@builtin(global_invocation_id) id: vec3<u32>) {{\n\
         if id.x < params.n {{ y[id.x] = params.a * x[id.x] + y[id.x]; }}\n\
         if params.n == {salt}u {{ y[0] = 0.0; }}\n}}\n"
    );
    let mut scalars = f32s(&[2.0]);
    scalars.extend(words(&[4]));
    let before = crate::compile_stats();
    let fixture = Fixture::with_driver(driver(KernelMode::Compile));
    let out = fixture
        .dispatch(
            &source,
            "saxpy",
            [1, 1, 1],
            &[f32s(&[1.0, 2.0, 3.0, 4.0]), f32s(&[1.0; 4])],
            &scalars,
        )
        .unwrap();
    assert_eq!(out[1], f32s(&[3.0, 5.0, 7.0, 9.0]));
    let after = crate::compile_stats();
    assert!(after.compiled > before.compiled, "{before:?} -> {after:?}");
    // Loading it again, from another backend, finds it (loaded, or in the disk cache).
    let again = Fixture::with_driver(driver(KernelMode::Compile));
    again
        .dispatch(
            &source,
            "saxpy",
            [1, 1, 1],
            &[f32s(&[1.0; 4]), f32s(&[1.0; 4])],
            &scalars,
        )
        .unwrap();
    let objects: Vec<_> = std::fs::read_dir(crate::native::cache_dir().join("cpu"))
        .unwrap()
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.path().extension().is_some_and(|ext| ext == "so"))
        .collect();
    assert!(!objects.is_empty(), "the cache holds the compiled objects");
}

#[test]
fn the_unchecked_fast_path_still_faults_past_the_end_and_clamps_like_the_interpreter() {
    if !compiler_present() {
        println!("skipped: no C compiler (cc or $CC); the compiled mode cannot be tested here");
        return;
    }
    // Affine indices: the compiled kernel runs workgroups whose indices stay in bounds
    // without per-access checks; the second workgroup here reaches past `y`.
    const SHIFT: &str = r#"
struct Params { shift: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(64)
fn shift(@builtin(global_invocation_id) id: vec3<u32>) {
    y[id.x + params.shift] = x[id.x] + 1u;
}
"#;
    let x: Vec<u32> = (0..128).collect();
    let inputs = [words(&x), vec![0; 128 * 4]];
    let strict =
        Fixture::with_driver(driver(KernelMode::Compile)).dispatch(SHIFT, "shift", [2, 1, 1], &inputs, &words(&[3]));
    let error = strict.expect_err("index 130 of a 128-element `y` faults");
    assert_eq!(error.kind(), ErrorKind::KernelFault, "{error}");
    assert!(error.message().contains("out of bounds"), "{error}");
    // In bounds everywhere: the fast path, same bytes as the interpreter.
    agree(SHIFT, "shift", [2, 1, 1], &[words(&x), vec![0; 131 * 4]], &words(&[3]));
    // Lenient: clamped into the array, as the interpreter does.
    let lenient = |mode| {
        Fixture::with_driver(driver(mode).with_strict_bounds(false))
            .dispatch(SHIFT, "shift", [2, 1, 1], &inputs, &words(&[3]))
            .unwrap()
    };
    assert_eq!(lenient(KernelMode::Compile), lenient(KernelMode::Interpret));
}

/// The unchecked body of a kernel with barriers: workgroups whose affine indices stay in
/// bounds run it, one reaching past the end still faults (strict) or clamps as the
/// interpreter does (lenient), and a value the workgroup shares, computed in one region and
/// read in the next, gets there.
#[test]
fn the_unchecked_body_of_a_kernel_with_barriers_still_faults_past_the_end() {
    if !compiler_present() {
        println!("skipped: no C compiler (cc or $CC); the compiled mode cannot be tested here");
        return;
    }
    const STAGED: &str = r#"
struct Params { shift: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
var<workgroup> staged: array<u32, 64>;
@compute @workgroup_size(64)
fn staged_shift(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    let base = group.x * 64u + params.shift;
    staged[lane] = x[group.x * 64u + lane] * 3u;
    workgroupBarrier();
    y[base + lane] = staged[63u - lane] + base;
}
"#;
    let x: Vec<u32> = (0..128).map(|i| i * 7 + 1).collect();
    let inputs = [words(&x), vec![0; 128 * 4]];
    let strict = Fixture::with_driver(driver(KernelMode::Compile)).dispatch(
        STAGED,
        "staged_shift",
        [2, 1, 1],
        &inputs,
        &words(&[3]),
    );
    let error = strict.expect_err("index 130 of a 128-element `y` faults");
    assert_eq!(error.kind(), ErrorKind::KernelFault, "{error}");
    assert!(error.message().contains("out of bounds"), "{error}");
    let outputs = agree(
        STAGED,
        "staged_shift",
        [2, 1, 1],
        &[words(&x), vec![0; 131 * 4]],
        &words(&[3]),
    );
    let y: Vec<u32> = outputs[1]
        .chunks(4)
        .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
        .collect();
    assert_eq!(y[3], x[63] * 3 + 3, "the first workgroup's first store");
    assert_eq!(y[130], x[64] * 3 + 67, "the second workgroup's last store");
    let lenient = |mode| {
        Fixture::with_driver(driver(mode).with_strict_bounds(false))
            .dispatch(STAGED, "staged_shift", [2, 1, 1], &inputs, &words(&[3]))
            .unwrap()
    };
    assert_eq!(lenient(KernelMode::Compile), lenient(KernelMode::Interpret));
}

#[test]
fn barriers_in_called_functions_and_in_switches_are_compiled() {
    // Host C inlines the function and turns the switch into `if`s before it splits the entry
    // point at its barriers: both kernels are compiled, not interpreted.
    const HELPER: &str = r#"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<workgroup> cells: array<u32, 64>;
fn exchange(lane: u32) -> u32 {
    cells[lane] = lane * 3u;
    workgroupBarrier();
    return cells[63u - lane];
}
@compute @workgroup_size(64)
fn helper(@builtin(local_invocation_index) lane: u32) {
    out[lane] = exchange(lane);
}
"#;
    const SWITCHED: &str = r#"
struct Params { mode: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<workgroup> cells: array<u32, 64>;
@compute @workgroup_size(64)
fn switched(@builtin(local_invocation_index) lane: u32) {
    cells[lane] = lane + 1u;
    switch params.mode {
        case 1u: { workgroupBarrier(); out[lane] = cells[(lane + 1u) % 64u]; }
        default: { workgroupBarrier(); out[lane] = cells[lane]; }
    }
}
"#;
    for source in [HELPER, SWITCHED] {
        let module = xhal_kernel::parse_wgsl(source).expect("parses");
        module
            .to_c(xhal_kernel::c::Dialect::HostC, None)
            .unwrap_or_else(|error| panic!("host C refused a kernel it can write: {error}"));
    }
    let out = agree(HELPER, "helper", [1, 1, 1], &[vec![0; 256]], &[]);
    let expected: Vec<u32> = (0..64u32).map(|lane| (63 - lane) * 3).collect();
    assert_eq!(out[0], words(&expected));
    let out = agree(SWITCHED, "switched", [1, 1, 1], &[vec![0; 256]], &words(&[1]));
    let expected: Vec<u32> = (0..64u32).map(|lane| (lane + 1) % 64 + 1).collect();
    assert_eq!(out[0], words(&expected));
}

#[test]
fn inlined_functions_with_barriers_keep_their_semantics() {
    // What inlining must keep: locals that start afresh at every call, a uniform `return`
    // inside a loop with barriers, a non-uniform `return` inside a switch after the last
    // barrier, pointer parameters, and a lowered switch inside an inlined function.
    const TRICKY: &str = r#"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<workgroup> cells: array<u32, 64>;

fn counted(lane: u32) -> u32 {
    var n = 3u;
    cells[lane] = lane + n;
    workgroupBarrier();
    n += cells[(lane + 1u) % 64u];
    workgroupBarrier();
    return n;
}

fn find(lane: u32, limit: u32) -> u32 {
    var i = 0u;
    loop {
        cells[lane] = lane + i;
        workgroupBarrier();
        if (i >= limit) {
            return cells[(lane + 1u) % 64u] + i;
        }
        i += 1u;
        workgroupBarrier();
    }
    return 0u;
}

fn pick(lane: u32, mode: u32) -> u32 {
    cells[lane] = lane * 2u;
    workgroupBarrier();
    let mirrored = cells[63u - lane];
    workgroupBarrier();
    switch (mode) {
        case 0u: {
            if (lane < 5u) {
                return 7u;
            }
        }
        default: {
            return mirrored;
        }
    }
    return mirrored + 1u;
}

fn accumulate(total: ptr<function, u32>, lane: u32) {
    cells[lane] = *total;
    workgroupBarrier();
    *total += cells[(lane + 3u) % 64u];
    workgroupBarrier();
}

fn stepped(lane: u32, mode: u32) -> u32 {
    var result = 0u;
    for (var k = 0u; k < 3u; k++) {
        switch (mode + k) {
            case 1u: {
                cells[lane] = lane;
                workgroupBarrier();
                result += cells[63u - lane];
                workgroupBarrier();
            }
            case 2u: {
                workgroupBarrier();
                if (lane % 3u == 0u) {
                    result += 1000u;
                    break;
                }
                result += 1u;
            }
            default: {
                workgroupBarrier();
                continue;
            }
        }
        result += 10u;
    }
    return result;
}

@compute @workgroup_size(64)
fn tricky(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    var total = lane;
    for (var k = 0u; k < 2u; k++) {
        total += counted(lane);
        accumulate(&total, lane);
    }
    let base = group.x * 64u * 4u + lane * 4u;
    out[base] = total;
    out[base + 1u] = find(lane, group.x + 1u);
    out[base + 2u] = pick(lane, group.x % 2u);
    out[base + 3u] = stepped(lane, group.x % 3u);
}
"#;
    xhal_kernel::parse_wgsl(TRICKY)
        .expect("parses")
        .to_c(xhal_kernel::c::Dialect::HostC, None)
        .unwrap_or_else(|error| panic!("host C refused a kernel it can write: {error}"));
    let out = agree(TRICKY, "tricky", [3, 1, 1], &[vec![0; 3 * 64 * 16]], &[]);
    let out: Vec<u32> = out[0]
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    // Spot checks against values worked out by hand (the interpreter agrees on all of them).
    // counted: 3 + (lane + 1) % 64 + 3, fresh at each call.
    let counted = |lane: u32| 3 + (lane + 1) % 64 + 3;
    let lane = 10u32;
    let mut totals: Vec<u32> = (0..64).collect();
    for _ in 0..2 {
        for (l, t) in totals.iter_mut().enumerate() {
            *t += counted(l as u32);
        }
        let before = totals.clone();
        for (l, t) in totals.iter_mut().enumerate() {
            *t += before[(l + 3) % 64];
        }
    }
    assert_eq!(
        out[lane as usize * 4],
        totals[lane as usize],
        "locals start afresh at every call"
    );
    // find in group 0 returns at i == 1: cells hold lane + 1.
    assert_eq!(
        out[lane as usize * 4 + 1],
        (lane + 1) % 64 + 1 + 1,
        "a return inside a loop"
    );
    // pick in group 0 (mode 0): lanes under 5 return 7, the rest fall out of the switch.
    assert_eq!(out[2], 7);
    assert_eq!(
        out[lane as usize * 4 + 2],
        (63 - lane) * 2 + 1,
        "falling out of the switch"
    );
    // pick in group 1 (mode 1): the default case returns the mirrored value.
    assert_eq!(out[64 * 4 + lane as usize * 4 + 2], (63 - lane) * 2);
}

/// State carried across barriers in loops, the way real kernels carry it: a pointer advanced
/// by the same amount in every invocation, before a barrier, and used as an index; the
/// usual tree reduction written as a `while` loop; a stride doubled between two barriers and
/// used in the same region; a uniform value stepped inside a loop with a uniform trip count
/// and through a pointer parameter. Each such value has one slot for the workgroup, and each
/// invocation must start from the value the region started with.
const CARRIED_ACROSS_BARRIERS: &str = r#"
@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
var<workgroup> tile: array<u32, 64>;

fn advance(p: ptr<function, u32>, by: u32) {
    *p = *p + by;
}

@compute @workgroup_size(64)
fn walk(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    var ptr = group.x * 256u;
    var acc = 0u;
    for (var k = 0; k < 4; k++) {
        tile[lane] = input[ptr + lane];
        ptr += 64u;
        workgroupBarrier();
        acc += tile[63u - lane] * u32(k + 1);
        workgroupBarrier();
    }
    out[group.x * 64u + lane] = acc + ptr;
}

@compute @workgroup_size(64)
fn tree(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    tile[lane] = input[group.x * 64u + lane];
    workgroupBarrier();
    var offset = 32u;
    while (offset > 0u) {
        if (lane < offset) { tile[lane] += tile[lane + offset]; }
        offset = offset / 2u;
        workgroupBarrier();
    }
    out[group.x * 64u + lane] = tile[0] + offset;
}

@compute @workgroup_size(8, 8)
fn strides(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    tile[lane] = input[group.x * 64u + lane];
    workgroupBarrier();
    var stride = 1u;
    var step = 0u;
    loop {
        if (stride >= 64u) { break; }
        let mine = tile[lane];
        stride *= 2u;
        let other = tile[(lane + stride / 2u) % 64u];
        workgroupBarrier();
        if (lane % stride == 0u) { tile[lane] = mine + other; }
        for (var j = 0u; j < 3u; j++) {
            advance(&step, j + 1u);
            // Each invocation updates only its own element: no two race.
            out[group.x * 64u + lane] ^= mine + step;
        }
        workgroupBarrier();
    }
    out[group.x * 64u + lane] += tile[0] * 1000u + stride + step;
}
"#;

#[test]
fn compiled_state_carried_across_barriers_in_loops_matches_the_interpreter() {
    if !compiler_present() {
        println!("skipped: no C compiler (cc or $CC); the compiled mode cannot be tested here");
        return;
    }
    let input: Vec<u32> = (0..768u32).map(|i| i % 256).collect();
    let walked = agree(
        CARRIED_ACROSS_BARRIERS,
        "walk",
        [3, 1, 1],
        &[words(&input), vec![0; 192 * 4]],
        &[],
    );
    // Invocation `lane` of group `g` adds tile[63 - lane] of each pass k, times k + 1.
    let expected: Vec<u32> = (0..3u32)
        .flat_map(|g| {
            let input = &input;
            (0..64u32).map(move |lane| {
                let sum: u32 = (0..4u32)
                    .map(|k| input[(g * 256 + k * 64 + 63 - lane) as usize] * (k + 1))
                    .sum();
                sum + g * 256 + 256
            })
        })
        .collect();
    assert_eq!(walked[1], words(&expected), "the pointer walk");

    let trees = agree(
        CARRIED_ACROSS_BARRIERS,
        "tree",
        [3, 1, 1],
        &[words(&input), vec![0; 192 * 4]],
        &[],
    );
    let sums: Vec<u32> = (0..3)
        .flat_map(|g| [input[g * 64..g * 64 + 64].iter().sum::<u32>(); 64])
        .collect();
    assert_eq!(trees[1], words(&sums), "the while-loop tree reduction");

    agree(
        CARRIED_ACROSS_BARRIERS,
        "strides",
        [3, 1, 1],
        &[words(&input), vec![0; 192 * 4]],
        &[],
    );
}

#[test]
fn a_storage_struct_holding_only_a_runtime_array_compiles() {
    if !compiler_present() {
        println!("skipped: no C compiler (cc or $CC); the compiled mode cannot be tested here");
        return;
    }
    const ONLY_AN_ARRAY: &str = "struct Data { values: array<u32> }\n\
        @group(0) @binding(0) var<storage, read_write> d: Data;\n\
        @compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) id: vec3<u32>) {\n\
        if (id.x < arrayLength(&d.values)) { d.values[id.x] = d.values[id.x] * 2u + 1u; }\n}\n";
    let values: Vec<u32> = (0..100).collect();
    let out = agree(ONLY_AN_ARRAY, "main", [2, 1, 1], &[words(&values)], &[]);
    assert_eq!(out[0], words(&values.iter().map(|v| v * 2 + 1).collect::<Vec<_>>()));
}

/// Kernels the compiled path used to hand to the interpreter: a 4x4 determinant, array
/// constructors of more than 32 elements (a lookup table, a literal list). Each must now
/// compile, and agree with the interpreter.
#[test]
fn kernels_once_left_to_the_interpreter_now_compile() {
    if !compiler_present() {
        println!("skipped: no C compiler (cc or $CC); the compiled mode cannot be tested here");
        return;
    }
    let table: Vec<String> = (0..64u32).map(|i| format!("{}u", (i * 37) % 101)).collect();
    let floats: Vec<String> = (0..35).map(|i| format!("{i}.5")).collect();
    let source = format!(
        "const table = array<u32, 64>({});\n\
         @group(0) @binding(0) var<storage, read> m: array<mat4x4<f32>>;\n\
         @group(0) @binding(1) var<storage, read_write> out: array<f32>;\n\
         @compute @workgroup_size(8)\n\
         fn main(@builtin(global_invocation_id) id: vec3<u32>) {{\n\
             let listed = array<f32, 36>({}, f32(id.x));\n\
             out[id.x] = determinant(m[id.x]) + f32(table[id.x * 7u % 64u]) + listed[id.x % 36u];\n\
         }}\n",
        table.join(", "),
        floats.join(", ")
    );
    if let Err(error) = crate::native::compile(&source, "main") {
        panic!("the kernel did not compile: {error:?}");
    }
    let matrices: Vec<f32> = (0..16 * 16).map(|i| ((i * 5) % 7) as f32 - 3.0).collect();
    agree(&source, "main", [2, 1, 1], &[f32s(&matrices), vec![0; 16 * 4]], &[]);
}

#[path = "../../../../tests/support/repository_kernels.rs"]
mod repository;

/// The examples, the WGSL corpus and the conformance catalogue's kernels.
fn repository_kernels() -> Vec<(String, String)> {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    repository::repository_kernels(
        &repo,
        &["examples/kernels", "hal/sdk/tests/corpus", "conformance/src/catalogue"],
    )
}

/// Host C that the C compiler rejects is a bug of the emitter: for every compute entry point
/// of every repository kernel, the compiled path either compiles it or says, before any
/// compiler runs, what it lacks. The list of what it lacked is printed, so it stays short and
/// honest.
#[test]
fn the_c_compiler_accepts_the_host_c_of_every_repository_kernel() {
    if !compiler_present() {
        println!("skipped: no C compiler (cc or $CC); the compiled mode cannot be tested here");
        return;
    }
    let mut compiled = 0;
    let mut lacked: Vec<String> = Vec::new();
    let mut rejected: Vec<String> = Vec::new();
    for (name, source) in repository_kernels() {
        let Ok(module) = xhal_kernel::parse_wgsl(&source) else {
            continue;
        };
        for entry in module.entry_points() {
            match crate::native::compile(&source, &entry.name) {
                Ok(_) => compiled += 1,
                Err(crate::native::NotCompiled::Unsupported(why)) => lacked.push(format!(
                    "{name} `{}`: {}",
                    entry.name,
                    why.lines().next().unwrap_or_default()
                )),
                Err(other) => rejected.push(format!("{name} `{}`: {other:?}", entry.name)),
            }
        }
    }
    println!(
        "{compiled} entry points compiled; the compiled path lacked something in {}:",
        lacked.len()
    );
    for line in &lacked {
        println!("  {line}");
    }
    assert!(
        rejected.is_empty(),
        "the C compiler rejected emitted host C:\n{}",
        rejected.join("\n")
    );
    assert!(compiled >= 140, "only {compiled} entry points compiled");
}

// ---- f16 ------------------------------------------------------------------------------------

/// f16 bits as little-endian bytes.
fn halves(bits: &[u16]) -> Vec<u8> {
    bits.iter().flat_map(|h| h.to_le_bytes()).collect()
}

/// Every f16 bit pattern but the signalling NaNs, in an order that a multiplier scrambles.
/// (The interpreter holds an f16 as an f32 and quiets a signalling NaN when it loads one;
/// the compiled path copies f16 values as they are. WGSL leaves NaN payloads unspecified.)
fn f16_patterns(multiplier: u32) -> Vec<u16> {
    (0..=u16::MAX as u32)
        .map(|i| (i.wrapping_mul(multiplier) & 0xffff) as u16)
        .map(|h| {
            let signalling = h & 0x7c00 == 0x7c00 && h & 0x3ff != 0 && h & 0x200 == 0;
            if signalling {
                h | 0x200
            } else {
                h
            }
        })
        .collect()
}

/// f16 values whose arithmetic stays finite: multiples of 1/16 in [-8, 8).
fn f16_moderate(count: usize, salt: u32) -> Vec<u16> {
    use crate::wgsl::test_support::f32_to_f16_bits;
    (0..count as u32)
        .map(|i| f32_to_f16_bits((scramble(i, salt) % 256) as f32 / 16.0 - 8.0))
        .collect()
}

/// A hash of `i`: test inputs that look random and are the same on every run.
fn scramble(i: u32, salt: u32) -> u32 {
    let x = (i ^ salt.wrapping_mul(0x9e37_79b9)).wrapping_mul(0x85eb_ca6b);
    (x ^ (x >> 13)).wrapping_mul(0xc2b2_ae35) ^ (x >> 16)
}

/// Asserts that the compiled path takes `entry` itself, with no interpreter behind it.
fn compiles(source: &str, entry: &str) {
    if let Err(error) = crate::native::compile(source, entry) {
        panic!("`{entry}` did not compile: {error:?}");
    }
}

const F16_OPS: &str = r#"
enable f16;
@group(0) @binding(0) var<storage, read> a: array<f16>;
@group(0) @binding(1) var<storage, read> b: array<f16>;
@group(0) @binding(2) var<storage, read> wide: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f16>;
@group(0) @binding(4) var<storage, read_write> words: array<u32>;

@compute @workgroup_size(64)
fn ops(@builtin(global_invocation_id) id: vec3<u32>) {
    let n = arrayLength(&a);
    let i = id.x;
    if i >= n { return; }
    let x = a[i];
    let y = b[i];
    let z = a[(i * 7u + 3u) % n];
    let f = wide[i];
    var o = i * 40u;
    // a * b + c rounds twice; in f32 it would round once.
    out[o] = x * y + z; o++;
    out[o] = x - y / z; o++;
    out[o] = x % y; o++;
    out[o] = -x; o++;
    out[o] = select(x, y, x < y); o++;
    out[o] = select(z, x, x >= y && y != z); o++;
    out[o] = min(x, y); o++;
    out[o] = max(x, y); o++;
    out[o] = clamp(x, min(y, z), max(y, z)); o++;
    out[o] = fma(x, y, z); o++;
    out[o] = mix(x, y, 0.25h); o++;
    out[o] = sqrt(abs(x)); o++;
    out[o] = inverseSqrt(abs(y)); o++;
    out[o] = exp(x * 0.0625h); o++;
    out[o] = log(abs(y)); o++;
    out[o] = sin(x); o++;
    out[o] = tanh(y); o++;
    out[o] = pow(abs(x), 0.5h); o++;
    out[o] = atan2(x, y); o++;
    out[o] = floor(x) + ceil(y); o++;
    out[o] = round(x * 0.5h); o++;
    out[o] = trunc(y) - fract(x); o++;
    out[o] = sign(x) * step(y, x); o++;
    out[o] = smoothstep(-1.0h, 1.0h, x); o++;
    out[o] = ldexp(x, 3); o++;
    out[o] = degrees(y); o++;
    out[o] = f16(f); o++;
    out[o] = f16(i32(i) - 32768); o++;
    out[o] = f16(i * 37u); o++;
    out[o] = f16(x < y); o++;
    let v = vec3<f16>(x, y, z);
    let u = vec3<f16>(z, x, 1.5h);
    out[o] = dot(v, u); o++;
    out[o] = length(v); o++;
    out[o] = distance(v, u); o++;
    let c = cross(v, u);
    out[o] = c.x; o++;
    out[o] = c.y; o++;
    out[o] = c.z; o++;
    let nv = normalize(vec2<f16>(x, 1.0h));
    out[o] = nv.x; o++;
    out[o] = nv.y; o++;
    out[o] = length(y); o++;
    out[o] = f16(f32(x) * 3.0); o++;

    var w = i * 8u;
    words[w] = bitcast<u32>(f32(x)); w++;
    words[w] = bitcast<u32>(i32(x)); w++;
    words[w] = u32(y); w++;
    words[w] = u32(x != 0.0h) | (u32(x == y) << 1u) | (u32(x <= z) << 2u); w++;
    words[w] = bitcast<u32>(i32(x * 4096.0h)); w++;
    words[w] = u32(f32(x) + f32(y) * f32(z) > 1.0); w++;
    words[w] = bitcast<u32>(f32(x * y)); w++;
    words[w] = pack2x16float(vec2<f32>(f32(y), f)); w++;
}
"#;

/// Every f16 bit pattern through the arithmetic, comparisons, conversions and math built-ins:
/// the compiled kernel takes it itself and writes the interpreter's bits.
#[test]
fn compiled_f16_arithmetic_matches_the_interpreter_bit_for_bit() {
    if !compiler_present() {
        println!("skipped: no C compiler (cc or $CC); the compiled mode cannot be tested here");
        return;
    }
    compiles(F16_OPS, "ops");
    let a = f16_patterns(1);
    let b = f16_patterns(40503);
    let n = a.len();
    let wide: Vec<u32> = (0..n as u32).map(|i| scramble(i, 9)).collect();
    let inputs = [
        halves(&a),
        halves(&b),
        words(&wide),
        vec![0; n * 40 * 2],
        vec![0; n * 8 * 4],
    ];
    let run = |mode| {
        Fixture::with_driver(driver_with_memory(mode, 64 << 20))
            .dispatch(F16_OPS, "ops", [(n as u32).div_ceil(64), 1, 1], &inputs, &[])
            .unwrap_or_else(|error| panic!("ops, {mode:?}: {error}"))
    };
    let interpreted = run(KernelMode::Interpret);
    let out = run(KernelMode::Compile);
    // Name the first few disagreements: the result's number in the kernel and the inputs.
    // Two NaNs count as the same result: which NaN's payload an operation on two NaNs keeps
    // is unspecified (x86 keeps the first operand's, and a C compiler may swap the operands
    // of a commutative operation). Everything else must be the same bits.
    let nan16 = |h: &[u8]| h[1] & 0x7c == 0x7c && (h[1] & 0x03 != 0 || h[0] != 0);
    let mut differences = Vec::new();
    let mut nans = 0usize;
    for (buffer, width, per) in [(3usize, 2usize, 40usize), (4, 4, 8)] {
        for (k, (c, i)) in out[buffer]
            .chunks(width)
            .zip(interpreted[buffer].chunks(width))
            .enumerate()
        {
            if width == 2 && nan16(c) && nan16(i) {
                nans += 1;
                continue;
            }
            if c != i && differences.len() < 12 {
                let e = k / per;
                differences.push(format!(
                    "buffer {buffer} result {} of x={:#06x} y={:#06x} z={:#06x}: compiled {c:02x?}, interpreted {i:02x?}",
                    k % per,
                    a[e],
                    b[e],
                    a[(e * 7 + 3) % n]
                ));
            }
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
    assert!(nans > 0);
    // Results cover the whole f16 range: infinities, NaNs, subnormals and zeros.
    let results: Vec<u16> = out[3].chunks(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
    for class in [0x7c00u16, 0xfc00, 0x0001, 0x0000, 0x8000] {
        assert!(results.contains(&class), "no {class:#06x} among the results");
    }
    assert!(results.iter().any(|&h| h & 0x7c00 == 0x7c00 && h & 0x3ff != 0));
}

const F16_ATTENTION: &str = r#"
enable f16;
struct Params { n: u32, scale: f16, bias: f16 }
@group(0) @binding(0) var<storage, read> q: array<vec4<f16>>;
@group(0) @binding(1) var<storage, read> k: array<vec4<f16>>;
@group(0) @binding(2) var<storage, read_write> probs: array<f16>;
@group(0) @binding(3) var<storage, read> params: Params;
var<workgroup> scores: array<f32, 64>;
var<workgroup> logits: array<f16, 64>;

// Softmax over 64 keys of one query's scores: f16 products, f32 sums, an f16 result.
@compute @workgroup_size(64)
fn attend(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    var acc = 0.0;
    for (var c = 0u; c < params.n; c++) {
        let p = q[group.x * params.n + c] * k[lane * params.n + c];
        acc += f32(p.x) + f32(p.y) + f32(p.z) + f32(p.w);
    }
    let s = f16(acc) * params.scale + params.bias;
    logits[lane] = s;
    scores[lane] = f32(s);
    workgroupBarrier();
    var m = scores[0];
    for (var j = 1u; j < 64u; j++) {
        m = max(m, scores[j]);
    }
    let e = exp(f32(logits[lane]) - m);
    workgroupBarrier();
    scores[lane] = e;
    workgroupBarrier();
    var total = 0.0;
    for (var j = 0u; j < 64u; j++) {
        total += scores[j];
    }
    probs[group.x * 64u + lane] = f16(e / total);
}

// The same dot products as an f16 accumulation.
@compute @workgroup_size(64)
fn dot_half(@builtin(global_invocation_id) id: vec3<u32>) {
    var acc = 0.0h;
    for (var c = 0u; c < params.n; c++) {
        acc += dot(q[c], k[id.x * params.n + c]);
    }
    probs[id.x] = acc * params.scale + params.bias;
}
"#;

/// The way f16 kernels are written: vec4<f16> loads, f32 accumulation, f16 workgroup memory
/// across barriers, f16 members of a parameter struct. (naga refuses f16 in immediates.)
#[test]
fn compiled_f16_softmax_and_dot_products_match_the_interpreter() {
    if !compiler_present() {
        println!("skipped: no C compiler (cc or $CC); the compiled mode cannot be tested here");
        return;
    }
    use crate::wgsl::test_support::f32_to_f16_bits;
    compiles(F16_ATTENTION, "attend");
    compiles(F16_ATTENTION, "dot_half");
    let n = 8u32;
    let queries = 4u32;
    let q = f16_moderate((queries * n * 4) as usize, 1);
    let k = f16_moderate((64 * n * 4) as usize, 2);
    let mut scalars = words(&[n]);
    scalars.extend(halves(&[f32_to_f16_bits(0.125), f32_to_f16_bits(-0.75)]));
    let out = agree(
        F16_ATTENTION,
        "attend",
        [queries, 1, 1],
        &[
            halves(&q),
            halves(&k),
            vec![0; (queries * 64 * 2) as usize],
            scalars.clone(),
        ],
        &[],
    );
    // Each query's probabilities add up to about 1.
    let probabilities: Vec<f32> = out[2]
        .chunks(2)
        .map(|c| crate::wgsl::test_support::f16_bits_to_f32(u16::from_le_bytes([c[0], c[1]])))
        .collect();
    for row in probabilities.chunks(64) {
        let sum: f32 = row.iter().sum();
        assert!((sum - 1.0).abs() < 0.05, "{sum}");
    }
    agree(
        F16_ATTENTION,
        "dot_half",
        [1, 1, 1],
        &[halves(&q), halves(&k), vec![0; 64 * 2], scalars],
        &[],
    );
}

const F16_SHAPES: &str = r#"
enable f16;
struct Item { a: f16, v: vec3<f16>, b: f16, m: mat3x3<f16>, w: vec2<f16> }
@group(0) @binding(0) var<storage, read> items: array<Item>;
@group(0) @binding(1) var<storage, read_write> outs: array<Item>;
@group(0) @binding(2) var<storage, read_write> tall: array<mat2x4<f16>>;
@group(0) @binding(3) var<storage, read_write> threes: array<vec3<f16>>;

@compute @workgroup_size(16)
fn shapes(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    let it = items[i];
    var r: Item;
    r.a = determinant(it.m);
    r.v = it.m * it.v + cross(it.v, vec3<f16>(it.w, it.b));
    r.b = length(it.v) + distance(it.w, it.v.xy);
    r.m = transpose(it.m) * it.m - mat3x3<f16>(it.v, it.v.yzx, it.v.zxy) * it.a;
    r.w = normalize(it.w) * it.a + (it.v * it.m).xy;
    outs[i] = r;
    let t = tall[i];
    tall[i] = mat2x4<f16>(t[1] * it.b, t[0] + vec4<f16>(it.v, it.a));
    threes[i] = threes[i].zxy * it.w.x + it.v;
}
"#;

/// f16 in structs, matrices and arrays of vec3 at WGSL's offsets, through matrix arithmetic.
#[test]
fn compiled_f16_structs_and_matrices_match_the_interpreter() {
    if !compiler_present() {
        println!("skipped: no C compiler (cc or $CC); the compiled mode cannot be tested here");
        return;
    }
    compiles(F16_SHAPES, "shapes");
    let count = 32usize;
    // Item is 48 bytes (24 halves); padding halves get values too, which neither path reads.
    let items = f16_moderate(count * 24, 3);
    let tall = f16_moderate(count * 8, 4);
    let threes = f16_moderate(count * 4, 5);
    agree(
        F16_SHAPES,
        "shapes",
        [(count as u32).div_ceil(16), 1, 1],
        &[halves(&items), vec![0; count * 48], halves(&tall), halves(&threes)],
        &[],
    );
}

/// reflect, faceForward, refract, modf and frexp over edge cases (signed zeros, subnormals,
/// infinities, NaN, the largest floats), and the bit built-ins on 64-bit integers: the
/// compiled kernel must exist (no fallback) and write the interpreter's bits. The kernel is
/// the one the Kernel SPIR-V tests run on PoCL.
const GEOMETRY_AND_SPLITS: &str = include_str!("../../../../hal/kernel/tests/spirv_kernel/geometry_and_splits.wgsl");

const BITS_64: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<u64>;
@group(0) @binding(1) var<storage, read_write> out: array<u64>;

@compute @workgroup_size(16)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let n = arrayLength(&a);
    let i = id.x;
    if i >= n { return; }
    let u = a[i];
    let s = bitcast<i64>(u);
    let o = i * 24u;
    out[o] = countOneBits(u);
    out[o + 1u] = countLeadingZeros(u);
    out[o + 2u] = countTrailingZeros(u);
    out[o + 3u] = reverseBits(u);
    out[o + 4u] = bitcast<u64>(countOneBits(s));
    out[o + 5u] = bitcast<u64>(countLeadingZeros(s));
    out[o + 6u] = bitcast<u64>(countTrailingZeros(s));
    out[o + 7u] = bitcast<u64>(reverseBits(s));
    let v = vec2<u64>(u, ~u);
    out[o + 8u] = countOneBits(v).y;
    out[o + 9u] = countLeadingZeros(v).y;
    out[o + 10u] = countTrailingZeros(v).y;
    out[o + 11u] = reverseBits(v).y;
    let at = u32(u & 63lu);
    let count = u32((u >> 8u) & 127lu);
    out[o + 12u] = firstTrailingBit(u);
    out[o + 13u] = firstLeadingBit(u);
    out[o + 14u] = bitcast<u64>(firstTrailingBit(s));
    out[o + 15u] = bitcast<u64>(firstLeadingBit(s));
    out[o + 16u] = extractBits(u, at, count);
    out[o + 17u] = bitcast<u64>(extractBits(s, at, count));
    out[o + 18u] = insertBits(u, ~u, at, count);
    out[o + 19u] = bitcast<u64>(insertBits(s, -s, count, at));
    out[o + 20u] = extractBits(u, 70u, 3u) | extractBits(u, 3u, 70u);
    out[o + 21u] = firstLeadingBit(v).y ^ firstTrailingBit(v).y;
    out[o + 22u] = extractBits(v, at, 5u).y;
    out[o + 23u] = insertBits(v, v.yx, 60u, 8u).y;
}
"#;

/// [`agree`] for kernels whose results include NaNs: word by word (elements of `widths[b]`
/// bytes in buffer `b`), naming each disagreement, where two NaNs agree whatever their signs.
/// Where NaNs of both signs meet (`-x` of a NaN and the default NaN of `inf - inf`), x86 keeps
/// the first operand's, and the C compiler and rustc may each commute a product; WGSL leaves
/// the sign and payload of NaN unspecified.
fn agree_but_nan_signs(source: &str, workgroups: [u32; 3], inputs: &[Vec<u8>], widths: &[usize]) -> Vec<Vec<u8>> {
    let run = |mode| {
        Fixture::with_driver(driver(mode))
            .dispatch(source, "main", workgroups, inputs, &[])
            .unwrap_or_else(|error| panic!("{mode:?}: {error}"))
    };
    let (compiled, interpreted) = (run(KernelMode::Compile), run(KernelMode::Interpret));
    let nan = |b: &[u8]| match b.len() {
        2 => {
            let h = u16::from_le_bytes(b.try_into().unwrap());
            h & 0x7c00 == 0x7c00 && h & 0x3ff != 0
        }
        4 => f32::from_le_bytes(b.try_into().unwrap()).is_nan(),
        _ => f64::from_le_bytes(b.try_into().unwrap()).is_nan(),
    };
    let mut differences = Vec::new();
    for (b, ((c, i), &width)) in compiled.iter().zip(&interpreted).zip(widths).enumerate() {
        for (k, (x, y)) in c.chunks(width).zip(i.chunks(width)).enumerate() {
            if x != y && !(nan(x) && nan(y)) {
                differences.push(format!(
                    "buffer {b} element {k}: compiled {x:02x?}, interpreted {y:02x?}"
                ));
            }
        }
    }
    let shown: Vec<&String> = differences.iter().take(20).collect();
    assert!(
        differences.is_empty(),
        "{} disagreements:\n{}",
        differences.len(),
        shown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n")
    );
    compiled
}

fn edge_floats() -> Vec<f32> {
    vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -2.75,
        3.25,
        1e-40,
        -1e-45,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE * 0.75,
        f32::MAX,
        -f32::MAX,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        0.3,
        7.0e30,
        -123_456.79,
        1.5e-20,
        8_388_609.0,
        0.999,
        -0.001,
        100.5,
        -7.5,
        16_777_216.0,
        -0.5,
        2.5e-38,
        1e38,
        -3.0,
        0.1,
        42.0,
    ]
}

#[test]
fn geometric_built_ins_modf_frexp_and_64_bit_bit_counts_compile_and_match_the_interpreter() {
    if !compiler_present() {
        println!("skipped: no C compiler (cc or $CC); the compiled mode cannot be tested here");
        return;
    }
    for source in [GEOMETRY_AND_SPLITS, BITS_64] {
        if let Err(error) = crate::native::compile(source, "main") {
            panic!("the kernel did not compile: {error:?}");
        }
    }
    let floats = edge_floats();
    let out = agree_but_nan_signs(
        GEOMETRY_AND_SPLITS,
        [2, 1, 1],
        &[f32s(&floats), vec![0; floats.len() * 64 * 4]],
        &[4, 4],
    );
    // A few values checked by hand: modf(-2.75) = (-0.75, -2), frexp(-2.75) = (-0.6875, 2),
    // frexp(1e-40) has exponent -132.
    let word = |k: usize| u32::from_le_bytes(out[1][k * 4..k * 4 + 4].try_into().unwrap());
    assert_eq!(f32::from_bits(word(5 * 64 + 30)), -0.75);
    assert_eq!(f32::from_bits(word(5 * 64 + 31)), -2.0);
    assert_eq!(f32::from_bits(word(5 * 64 + 38)), -0.6875);
    assert_eq!(word(5 * 64 + 39), 2);
    assert_eq!(word(7 * 64 + 39) as i32, -132);
    assert_eq!(
        f32::from_bits(word(7 * 64 + 38)),
        (f64::from(1e-40f32) * 2f64.powi(132)) as f32
    );

    let longs: Vec<u64> = vec![
        0,
        1,
        u64::MAX,
        1 << 63,
        1 << 32,
        0xffff_ffff,
        0x8000_0000,
        0x0123_4567_89ab_cdef,
        0xfedc_ba98_7654_3210,
        (1 << 31) | (1 << 33),
        0x0000_0001_0000_0000,
        i64::MIN as u64 + 1,
        i64::MAX as u64,
        0xdead_beef_0000_0000,
        42,
        0x5555_5555_5555_5555,
    ];
    let bytes: Vec<u8> = longs.iter().flat_map(|v| v.to_le_bytes()).collect();
    let out = agree(BITS_64, "main", [1, 1, 1], &[bytes, vec![0; longs.len() * 24 * 8]], &[]);
    let long = |k: usize| u64::from_le_bytes(out[1][k * 8..k * 8 + 8].try_into().unwrap());
    for (i, &v) in longs.iter().enumerate() {
        let o = i * 24;
        assert_eq!(
            [long(o), long(o + 1), long(o + 2), long(o + 3)],
            [
                u64::from(v.count_ones()),
                u64::from(v.leading_zeros()),
                u64::from(v.trailing_zeros()),
                v.reverse_bits()
            ],
            "{v:#x}"
        );
        assert_eq!(long(o + 11), (!v).reverse_bits(), "{v:#x}");
        let lowest = if v == 0 {
            u64::MAX
        } else {
            u64::from(v.trailing_zeros())
        };
        assert_eq!([long(o + 12), long(o + 14)], [lowest, lowest], "{v:#x}");
        let (at, count) = ((v & 63) as u32, ((v >> 8) & 127) as u32);
        let c = count.min(64 - at);
        let field = if c == 0 {
            0
        } else if c == 64 {
            v
        } else {
            (v >> at) & ((1 << c) - 1)
        };
        assert_eq!(long(o + 16), field, "{v:#x}");
    }
}

/// The same built-ins on f16 (each operation rounded to f16, as the interpreter rounds it) and
/// on f64. (No frexp on f16: naga types its exponent `i16`, which its validator refuses.)
const GEOMETRY_F16_F64: &str = r#"
enable f16;
@group(0) @binding(0) var<storage, read> h: array<f16>;
@group(0) @binding(1) var<storage, read> d: array<f64>;
@group(0) @binding(2) var<storage, read_write> out16: array<f16>;
@group(0) @binding(3) var<storage, read_write> out64: array<f64>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    let n = arrayLength(&h);
    if i >= n { return; }
    let v = vec3<f16>(h[i], h[(i * 7u + 3u) % n], h[(i * 13u + 5u) % n]);
    let u = vec3<f16>(h[(i * 5u + 1u) % n], 0.5h, h[(i * 3u + 2u) % n]);
    let eta = h[(i * 11u + 7u) % n];
    let o = i * 16u;
    let r = reflect(v, u);
    out16[o] = r.x; out16[o + 1u] = r.y; out16[o + 2u] = r.z;
    let f = faceForward(v, u, v.zxy);
    out16[o + 3u] = f.x; out16[o + 4u] = f.y; out16[o + 5u] = f.z;
    let t = refract(v, u, eta);
    out16[o + 6u] = t.x; out16[o + 7u] = t.y; out16[o + 8u] = t.z;
    let m = modf(v);
    out16[o + 9u] = m.fract.x; out16[o + 10u] = m.fract.y; out16[o + 11u] = m.fract.z;
    out16[o + 12u] = m.whole.x; out16[o + 13u] = m.whole.y;
    let s = modf(eta);
    out16[o + 14u] = s.fract; out16[o + 15u] = s.whole;

    let k = arrayLength(&d);
    if i >= k { return; }
    let x = d[i];
    let y = d[(i * 7u + 3u) % k];
    let z = d[(i * 13u + 5u) % k];
    let p = i * 18u;
    let dv = vec2<f64>(x, y);
    let du = vec2<f64>(z, 0.25lf);
    let dr = reflect(dv, du);
    out64[p] = dr.x; out64[p + 1u] = dr.y;
    let df = faceForward(dv, du, vec2<f64>(y, z));
    out64[p + 2u] = df.x; out64[p + 3u] = df.y;
    let dt = refract(normalize(dv), vec2<f64>(0.0lf, 1.0lf), 0.75lf);
    out64[p + 4u] = dt.x; out64[p + 5u] = dt.y;
    let dm = modf(x);
    out64[p + 6u] = dm.fract; out64[p + 7u] = dm.whole;
    let dmv = modf(dv);
    out64[p + 8u] = dmv.fract.x; out64[p + 9u] = dmv.fract.y;
    out64[p + 10u] = dmv.whole.x; out64[p + 11u] = dmv.whole.y;
    let dx = frexp(x);
    out64[p + 12u] = dx.fract; out64[p + 13u] = f64(dx.exp);
    let dxv = frexp(vec3<f64>(x, y, z));
    out64[p + 14u] = dxv.fract.x; out64[p + 15u] = dxv.fract.z;
    out64[p + 16u] = f64(dxv.exp.y); out64[p + 17u] = f64(dxv.exp.z);
}
"#;

#[test]
fn geometric_built_ins_and_modf_on_f16_and_f64_match_the_interpreter() {
    if !compiler_present() {
        println!("skipped: no C compiler (cc or $CC); the compiled mode cannot be tested here");
        return;
    }
    compiles(GEOMETRY_F16_F64, "main");
    let patterns: Vec<u16> = f16_patterns(40_503).into_iter().take(4096).collect();
    let doubles: Vec<f64> = edge_floats()
        .into_iter()
        .map(f64::from)
        .chain([f64::MAX, -f64::MIN_POSITIVE, 5e-324, 1e300, -4.5e15, 0.1])
        .collect();
    let bytes: Vec<u8> = doubles.iter().flat_map(|v| v.to_le_bytes()).collect();
    let out = agree_but_nan_signs(
        GEOMETRY_F16_F64,
        [(patterns.len() as u32).div_ceil(64), 1, 1],
        &[
            halves(&patterns),
            bytes,
            vec![0; patterns.len() * 16 * 2],
            vec![0; doubles.len() * 18 * 8],
        ],
        &[2, 8, 2, 8],
    );
    // frexp(-2.75) = (-0.6875, 2); frexp of the smallest subnormal f64 (element 34) is
    // (0.5, -1073).
    let double = |k: usize| f64::from_le_bytes(out[3][k * 8..k * 8 + 8].try_into().unwrap());
    assert_eq!([double(5 * 18 + 12), double(5 * 18 + 13)], [-0.6875, 2.0]);
    assert_eq!([double(34 * 18 + 12), double(34 * 18 + 13)], [0.5, -1073.0]);
}

const ROWS_ACROSS_LANES: &str = r#"
struct Rows { rows: u32, length: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
var<immediate> shape: Rows;
var<workgroup> lanes: array<f32, 64>;

// Each row less its largest element: a workgroup a row, the row's elements lane by lane.
@compute @workgroup_size(64)
fn center(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    if wid.x >= shape.rows { return; }
    let base = wid.x * shape.length;
    var top = x[base];
    for (var start = 0u; start < shape.length; start += 64u) {
        let j = start + lane;
        if j < shape.length { top = max(top, x[base + j]); }
    }
    lanes[lane] = top;
    workgroupBarrier();
    for (var width = 32u; width > 0u; width /= 2u) {
        if lane < width { lanes[lane] = max(lanes[lane], lanes[lane + width]); }
        workgroupBarrier();
    }
    for (var start = 0u; start < shape.length; start += 64u) {
        let j = start + lane;
        if j < shape.length { y[base + j] = x[base + j] - lanes[0]; }
    }
}
"#;

/// The way a row's reductions are written for vector lanes (softmax's `_wide` kernels): a
/// return of the whole workgroup past the last row, loops that run as often in every
/// invocation with the elements lane by lane (their indices written as steps from the first
/// invocation's), `max` with NaNs among the elements, and a length that leaves the last
/// step part empty.
#[test]
fn compiled_rows_across_lanes_match_the_interpreter() {
    if !compiler_present() {
        println!("skipped: no C compiler (cc or $CC); the compiled mode cannot be tested here");
        return;
    }
    compiles(ROWS_ACROSS_LANES, "center");
    let (rows, length) = (5u32, 150u32);
    let mut x: Vec<f32> = (0..rows * length)
        .map(|i| (scramble(i, 7) % 2001) as f32 / 100.0 - 10.0)
        .collect();
    x[3] = f32::NAN;
    x[length as usize + 64] = f32::NAN;
    x[2 * length as usize] = f32::NEG_INFINITY;
    x[3 * length as usize + 149] = 1e30;
    // Two workgroups past the last row, which return at once.
    let out = agree(
        ROWS_ACROSS_LANES,
        "center",
        [rows + 2, 1, 1],
        &[f32s(&x), vec![0; (rows * length * 4) as usize]],
        &words(&[rows, length]),
    );
    let y: Vec<f32> = out[1]
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    // Row 3 holds 1e30, which every element of it less 1e30 shows.
    assert_eq!(y[3 * length as usize + 149], 0.0);
    assert!(y[3 * length as usize..4 * length as usize].iter().all(|&v| v <= 0.0));
}

/// Counted loops whose indices are affine in their counter: forward with `continue` and
/// `break`, a signed counter with a stride from the scalar block (negative too, and wrapping
/// in 32 bits), a literal stride running backwards, and a loop that changes its own counter.
const COUNTED_LOOPS: &str = r#"
struct Params { start: u32, count: u32, offset: i32, stride: i32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@group(0) @binding(2) var<storage, read_write> totals: array<u32>;
@compute @workgroup_size(4)
fn runs(@builtin(global_invocation_id) id: vec3<u32>) {
    let row = id.x * params.count;
    var total = 0u;
    for (var k = params.start; k < params.count; k++) {
        if (x[row + k] % 7u == 3u) { continue; }
        if (x[row + k] == 1000u) { break; }
        y[row + k] = x[row + k] * 2u + total;
        total += 1u;
    }
    for (var j = 0i; j < i32(params.count); j++) {
        total = total * 31u + x[u32(i32(row) + params.offset + j * params.stride)];
    }
    for (var k = 0u; k < params.count; k = k + 1u) {
        y[row + params.count - 1u - k] ^= x[row + k * 1u] + total;
    }
    for (var k = 0u; k < params.count; k = k + 1u) {
        total += x[row + k];
        if (x[row + k] == 5u) { k += 1u; }
    }
    totals[id.x] = total;
}
"#;

#[test]
fn compiled_counted_loops_match_the_interpreter_in_and_out_of_bounds() {
    if !compiler_present() {
        println!("skipped: no C compiler (cc or $CC); the compiled mode cannot be tested here");
        return;
    }
    let count = 24u32;
    let invocations = 8u32;
    let n = (count * invocations) as usize;
    let x: Vec<u32> = (0..n as u32)
        .map(|i| i.wrapping_mul(2_654_435_761) % 1013)
        .chain([1000, 5])
        .collect();
    let mut with_stops = x.clone();
    with_stops[30] = 1000;
    with_stops[77] = 5;
    // (start, count, offset, stride, in bounds): runs inside the arrays (the second one
    // backwards, the third with no iterations in its first loop and a fixed index in its
    // second), then runs that reach past the end, before the start, or wrap in 32 bits.
    let cases: [(u32, u32, i32, i32, bool); 7] = [
        (0, count, 0, 1, true),
        (3, count, count as i32 - 1, -1, true),
        (30, count, 0, 0, true),
        (0, count, 0, 2, false),
        (0, count, -1, 1, false),
        (0, count, 0, 1 << 30, false),
        (0, count, 5, 1, false),
    ];
    for input in [&x, &with_stops] {
        for (start, count, offset, stride, in_bounds) in cases {
            let scalars = words(&[start, count, offset as u32, stride as u32]);
            let inputs = [words(input), vec![0; n * 4], vec![0; invocations as usize * 4]];
            let run = |mode, strict| {
                Fixture::with_driver(driver(mode).with_strict_bounds(strict)).dispatch(
                    COUNTED_LOOPS,
                    "runs",
                    [invocations / 4, 1, 1],
                    &inputs,
                    &scalars,
                )
            };
            let case = format!("start={start} offset={offset} stride={stride}");
            match (run(KernelMode::Compile, true), run(KernelMode::Interpret, true)) {
                (Ok(compiled), Ok(interpreted)) if in_bounds => assert_eq!(compiled, interpreted, "{case}"),
                (Err(compiled), Err(interpreted)) if !in_bounds => {
                    assert_eq!(compiled.kind(), ErrorKind::KernelFault, "{case}: {compiled}");
                    assert_eq!(interpreted.kind(), ErrorKind::KernelFault, "{case}: {interpreted}");
                }
                (compiled, interpreted) => panic!("{case}: compiled {compiled:?}, interpreted {interpreted:?}"),
            }
            let compiled = run(KernelMode::Compile, false).unwrap_or_else(|e| panic!("{case}: {e}"));
            let interpreted = run(KernelMode::Interpret, false).unwrap_or_else(|e| panic!("{case}: {e}"));
            assert_eq!(compiled, interpreted, "{case}, lenient");
        }
    }
}
