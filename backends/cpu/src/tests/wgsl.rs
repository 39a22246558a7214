//! WGSL kernels through the `Backend` trait: results against Rust references, WGSL's
//! integer and float rules, control flow, atomics and barriers.

use super::*;

pub(super) fn f32s(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|value| value.to_le_bytes()).collect()
}

pub(super) fn i32s(values: &[i32]) -> Vec<u8> {
    values.iter().flat_map(|value| value.to_le_bytes()).collect()
}

pub(super) fn as_u32s(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect()
}

pub(super) fn as_i32s(bytes: &[u8]) -> Vec<i32> {
    as_u32s(bytes).into_iter().map(|w| w as i32).collect()
}

pub(super) fn as_f32s(bytes: &[u8]) -> Vec<f32> {
    as_u32s(bytes).into_iter().map(f32::from_bits).collect()
}

impl Fixture {
    pub(super) fn wgsl(&self, source: &str, entry: &str) -> Result<KernelHandle> {
        let module = self
            .backend
            .module_load(self.device, KernelFormat::WGSL, source.as_bytes())?;
        self.backend.kernel_get(module, entry)
    }

    /// Allocates one buffer per input (at least 4 bytes), fills it, launches `entry` over
    /// whole-buffer views and returns every buffer's bytes afterwards, or the first error.
    pub(super) fn dispatch(
        &self,
        source: &str,
        entry: &str,
        workgroups: [u32; 3],
        inputs: &[Vec<u8>],
        scalars: &[u8],
    ) -> Result<Vec<Vec<u8>>> {
        let kernel = self.wgsl(source, entry)?;
        let mut arguments = Vec::new();
        for input in inputs {
            let size = input.len().max(4) as u64;
            let buffer = self.allocate(size);
            if !input.is_empty() {
                self.write_now(buffer, 0, input);
            }
            arguments.push(whole(buffer, size));
        }
        self.launch(self.stream, kernel, workgroups, &arguments, scalars)?;
        self.backend.stream_synchronize(self.stream)?;
        Ok(arguments
            .iter()
            .zip(inputs)
            .map(|(argument, input)| self.read_now(argument.buffer, 0, input.len()))
            .collect())
    }
}

fn run(source: &str, entry: &str, workgroups: [u32; 3], inputs: &[Vec<u8>], scalars: &[u8]) -> Vec<Vec<u8>> {
    Fixture::new()
        .dispatch(source, entry, workgroups, inputs, scalars)
        .unwrap_or_else(|error| panic!("{entry}: {error}"))
}

pub(super) const SAXPY: &str = r#"
struct Params { a: f32, n: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn saxpy(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i < params.n) {
        y[i] = params.a * x[i] + y[i];
    }
}
"#;

pub(super) fn saxpy_scalars(a: f32, n: u32) -> Vec<u8> {
    let mut scalars = f32s(&[a]);
    scalars.extend(words(&[n]));
    scalars
}

#[test]
fn device_accepts_wgsl_first() {
    let fixture = Fixture::new();
    let info = fixture.backend.device_info(0).unwrap();
    assert_eq!(info.kernel_formats, [KernelFormat::WGSL, KernelFormat::CPU_BUILTIN]);
}

#[test]
fn saxpy_matches_rust() {
    let n = 1000usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let y: Vec<f32> = (0..n).map(|i| 1.0 - i as f32).collect();
    let out = run(
        SAXPY,
        "saxpy",
        [16, 1, 1],
        &[f32s(&x), f32s(&y)],
        &saxpy_scalars(2.5, 990),
    );
    let result = as_f32s(&out[1]);
    for i in 0..n {
        let expected = if i < 990 { 2.5 * x[i] + y[i] } else { y[i] };
        assert_eq!(result[i], expected, "element {i}");
    }
}

#[test]
fn tiled_matmul_with_workgroup_memory_and_barriers_matches_rust() {
    const MATMUL: &str = r#"
struct Dims { n: u32 }
var<immediate> dims: Dims;
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
const TILE: u32 = 8u;
var<workgroup> tile_a: array<array<f32, 8>, 8>;
var<workgroup> tile_b: array<array<f32, 8>, 8>;

@compute @workgroup_size(8, 8)
fn matmul(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let n = dims.n;
    let row = wid.y * TILE + lid.y;
    let col = wid.x * TILE + lid.x;
    var acc = 0.0;
    for (var t = 0u; t < n / TILE; t++) {
        tile_a[lid.y][lid.x] = a[row * n + t * TILE + lid.x];
        tile_b[lid.y][lid.x] = b[(t * TILE + lid.y) * n + col];
        workgroupBarrier();
        for (var k = 0u; k < TILE; k++) {
            acc += tile_a[lid.y][k] * tile_b[k][lid.x];
        }
        workgroupBarrier();
    }
    c[row * n + col] = acc;
}
"#;
    let n = 32usize;
    let a: Vec<f32> = (0..n * n).map(|i| ((i * 7) % 13) as f32 * 0.25 - 1.0).collect();
    let b: Vec<f32> = (0..n * n).map(|i| ((i * 5) % 11) as f32 * 0.5 - 2.0).collect();
    let out = run(
        MATMUL,
        "matmul",
        [4, 4, 1],
        &[f32s(&a), f32s(&b), vec![0; n * n * 4]],
        &words(&[n as u32]),
    );
    let c = as_f32s(&out[2]);
    for row in 0..n {
        for col in 0..n {
            let mut acc = 0.0f32;
            for k in 0..n {
                acc += a[row * n + k] * b[k * n + col];
            }
            assert_eq!(c[row * n + col], acc, "c[{row}][{col}]");
        }
    }
}

#[test]
fn tree_reduction_with_barriers() {
    const REDUCE: &str = r#"
@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> sums: array<u32>;
var<workgroup> partial: array<u32, 64>;

@compute @workgroup_size(64)
fn reduce(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>,
          @builtin(global_invocation_id) gid: vec3<u32>) {
    partial[li] = input[gid.x];
    workgroupBarrier();
    for (var stride = 32u; stride > 0u; stride >>= 1u) {
        if (li < stride) {
            partial[li] += partial[li + stride];
        }
        workgroupBarrier();
    }
    if (li == 0u) {
        sums[wid.x] = partial[0];
    }
}
"#;
    let input: Vec<u32> = (0..64 * 8).map(|i| i * 3 + 1).collect();
    let out = run(REDUCE, "reduce", [8, 1, 1], &[words(&input), vec![0; 32]], &[]);
    let expected: Vec<u32> = input.chunks(64).map(|chunk| chunk.iter().sum()).collect();
    assert_eq!(as_u32s(&out[1]), expected);
}

#[test]
fn histogram_with_storage_atomics_across_threads() {
    const HISTOGRAM: &str = r#"
@group(0) @binding(0) var<storage, read> values: array<u32>;
@group(0) @binding(1) var<storage, read_write> bins: array<atomic<u32>>;

@compute @workgroup_size(64)
fn histogram(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x < arrayLength(&values)) {
        atomicAdd(&bins[values[gid.x] % arrayLength(&bins)], 1u);
    }
}
"#;
    let values: Vec<u32> = (0..4096u32).map(|i| i.wrapping_mul(2_654_435_761) >> 7).collect();
    let out = run(
        HISTOGRAM,
        "histogram",
        [64, 1, 1],
        &[words(&values), vec![0; 16 * 4]],
        &[],
    );
    let mut expected = [0u32; 16];
    for value in &values {
        expected[(*value % 16) as usize] += 1;
    }
    assert_eq!(as_u32s(&out[1]), expected);
}

#[test]
fn compare_exchange_loop_counts_every_invocation() {
    const CAS: &str = r#"
@group(0) @binding(0) var<storage, read_write> counter: atomic<u32>;
@group(0) @binding(1) var<storage, read_write> tries: array<u32>;
var<workgroup> local_max: atomic<i32>;

@compute @workgroup_size(32)
fn cas(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    var attempts = 0u;
    loop {
        let old = atomicLoad(&counter);
        let result = atomicCompareExchangeWeak(&counter, old, old + 1u);
        attempts += 1u;
        if (result.exchanged) {
            break;
        }
    }
    tries[gid.x] = attempts;
    atomicMax(&local_max, i32(li) - 8);
    workgroupBarrier();
    if (li == 0u) {
        let previous = atomicExchange(&local_max, -100);
        atomicMin(&local_max, -200);
        tries[gid.x] = u32(previous) * 1000u + u32(-atomicLoad(&local_max));
    }
}
"#;
    let out = run(CAS, "cas", [4, 1, 1], &[vec![0; 4], vec![0; 128 * 4]], &[]);
    assert_eq!(as_u32s(&out[0]), [128]);
    let tries = as_u32s(&out[1]);
    assert!(
        tries.iter().enumerate().all(|(i, t)| i % 32 == 0 || *t >= 1),
        "{tries:?}"
    );
    for group in 0..4 {
        assert_eq!(tries[group * 32], 23 * 1000 + 200);
    }
}

#[test]
fn integer_division_remainder_and_shifts_follow_wgsl() {
    const EDGES: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<i32>;
@group(0) @binding(1) var<storage, read_write> out: array<i32>;

@compute @workgroup_size(1)
fn edges() {
    let zero = a[0];
    let seven = a[1];
    let min = a[2];
    let minus_one = a[3];
    let shift = u32(a[4]);
    out[0] = seven / zero;
    out[1] = seven % zero;
    out[2] = min / minus_one;
    out[3] = min % minus_one;
    out[4] = seven << shift;
    out[5] = min >> shift;
    out[6] = i32(u32(seven) / u32(zero));
    out[7] = i32(u32(seven) % u32(zero));
    out[8] = i32(u32(min) >> shift);
    out[9] = -min;
    out[10] = min - 1;
    out[11] = (-seven) / 2;
    out[12] = (-seven) % 2;
    out[13] = abs(min);
    out[14] = seven * 0x7fffffff;
    out[15] = i32(u32(seven) << (shift + 31u));
}
"#;
    let input = i32s(&[0, 7, i32::MIN, -1, 33]);
    let out = run(EDGES, "edges", [1, 1, 1], &[input, vec![0; 16 * 4]], &[]);
    assert_eq!(
        as_i32s(&out[1]),
        [
            7,
            0,
            i32::MIN,
            0,
            14,
            i32::MIN >> 1,
            7,
            0,
            0x4000_0000,
            i32::MIN,
            i32::MAX,
            -3,
            -1,
            i32::MIN,
            7i32.wrapping_mul(i32::MAX),
            7,
        ]
    );
}

#[test]
fn float_to_int_saturates_and_nan_is_zero() {
    const CONVERT: &str = r#"
@group(0) @binding(0) var<storage, read> f: array<f32>;
@group(0) @binding(1) var<storage, read_write> i: array<i32>;
@group(0) @binding(2) var<storage, read_write> u: array<u32>;

@compute @workgroup_size(8)
fn convert(@builtin(local_invocation_index) k: u32) {
    i[k] = i32(f[k]);
    u[k] = u32(f[k]);
}
"#;
    let input = [3e9, -3e9, f32::NAN, 1.9, -1.9, f32::INFINITY, f32::NEG_INFINITY, 0.5];
    let out = run(
        CONVERT,
        "convert",
        [1, 1, 1],
        &[f32s(&input), vec![0; 32], vec![0; 32]],
        &[],
    );
    // Saturation stops at the largest value f32 and the integer type share (2^31 - 128 and
    // 2^32 - 256), as WGSL specifies; NaN gives 0.
    let top = 2_147_483_520;
    assert_eq!(as_i32s(&out[1]), [top, i32::MIN, 0, 1, -1, top, i32::MIN, 0]);
    assert_eq!(as_u32s(&out[2]), [3_000_000_000, 0, 0, 1, 0, 4_294_967_040, 0, 0]);
}

#[test]
fn loops_with_continue_continuing_and_break_if_diverge_per_lane() {
    const LOOPS: &str = r#"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(16)
fn loops(@builtin(local_invocation_index) k: u32) {
    var i = 0u;
    var sum = 0u;
    loop {
        i += 1u;
        if (i % 3u == 0u) {
            continue;
        }
        sum += i;
        continuing {
            break if i >= k;
        }
    }
    var product = 1u;
    for (var j = 0u; j < 100u; j++) {
        if (j == k) {
            break;
        }
        if (j % 2u == 1u) {
            continue;
        }
        product = product * 3u + j;
    }
    var w = k;
    while (w > 3u) {
        w -= 2u;
    }
    out[k] = sum * 10000u + product % 10000u + w * 100000000u;
}
"#;
    let out = run(LOOPS, "loops", [1, 1, 1], &[vec![0; 64]], &[]);
    let expected: Vec<u32> = (0..16u32)
        .map(|k| {
            let (mut i, mut sum) = (0u32, 0u32);
            loop {
                i += 1;
                if i % 3 != 0 {
                    sum += i;
                }
                if i >= k {
                    break;
                }
            }
            let mut product = 1u32;
            for j in 0..100u32 {
                if j == k {
                    break;
                }
                if j % 2 == 1 {
                    continue;
                }
                product = product.wrapping_mul(3).wrapping_add(j);
            }
            let mut w = k;
            while w > 3 {
                w -= 2;
            }
            sum.wrapping_mul(10000)
                .wrapping_add(product % 10000)
                .wrapping_add(w.wrapping_mul(100_000_000))
        })
        .collect();
    assert_eq!(as_u32s(&out[0]), expected);
}

#[test]
fn switch_selects_cases_defaults_and_breaks() {
    const SWITCH: &str = r#"
@group(0) @binding(0) var<storage, read_write> out: array<i32>;

@compute @workgroup_size(10)
fn switches(@builtin(local_invocation_index) k: u32) {
    var r = 0i;
    switch (i32(k) - 1) {
        case 0, 1: { r = 10; }
        case 2: {
            r = 20;
            if (k == 3u) { break; }
            r = 99;
        }
        case 5, default: { r = 50; }
        case -1: { r = -1; }
        case 7: { r = 70; }
    }
    out[k] = r;
}
"#;
    let out = run(SWITCH, "switches", [1, 1, 1], &[vec![0; 40]], &[]);
    assert_eq!(as_i32s(&out[0]), [-1, 10, 10, 20, 50, 50, 50, 50, 70, 50]);
}

/// Branches an override decides are dropped before compiling (xhal-kernel's prune.rs): the kernel with
/// the override gives what the same kernel gives with the selector read at run time, for
/// every case (fall-through clauses, `break` and `continue` inside the switch, the default,
/// conditions built from the override), and a buffer used only in a dropped branch is still
/// an argument of the launch.
#[test]
fn branches_decided_by_overrides_run_as_written() {
    const BODY: &str = r#"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read> sel: array<u32>;

@compute @workgroup_size(4)
fn chosen(@builtin(local_invocation_index) k: u32) {
    var r = 0u;
    for (var i = 0u; i < 4u; i++) {
        switch SELECT {
            case 0u: { r += 1u; }
            case 1u, 2u: {
                r += 10u * (i + 1u);
                if (i == 2u) { break; }
                r += 100u;
            }
            case 3u: {
                if (i == 1u) { continue; }
                r += 1000u;
            }
            case 4u: { r = r * 2u + k; }
            default: { r += 7u; }
        }
        if (SELECT == 5u || SELECT == 6u) { r += 3u; } else { r += 1u; }
        if (!(SELECT != 6u)) { r ^= 0x55u; }
        if (SELECT == 100u) { r = sel[1]; }
    }
    out[k] = r;
}
"#;
    let fixture = Fixture::new();
    for op in 0u32..8 {
        let decided = format!("override OP: u32 = {op}u;\n{}", BODY.replace("SELECT", "OP"));
        let read = BODY.replace("SELECT", "sel[0]");
        let inputs = [vec![0; 16], i32s(&[op as i32, 0])];
        let results: Vec<Vec<u32>> = [decided, read]
            .iter()
            .map(|source| {
                let out = fixture
                    .dispatch(source, "chosen", [1, 1, 1], &inputs, &[])
                    .unwrap_or_else(|error| panic!("OP = {op}: {error}"));
                as_u32s(&out[0])
            })
            .collect();
        assert_eq!(results[0], results[1], "OP = {op}");
    }
}

#[test]
fn nested_calls_with_function_and_private_pointers() {
    const CALLS: &str = r#"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<workgroup> total: atomic<u32>;
var<private> calls: u32;

fn bump(p: ptr<function, u32>, by: u32) {
    *p += by;
    calls += 1u;
}

fn twice(p: ptr<function, u32>, by: u32) -> u32 {
    bump(p, by);
    bump(p, by);
    return *p;
}

fn collatz(x: u32) -> u32 {
    if (x % 2u == 0u) {
        return x / 2u;
    }
    return x * 3u + 1u;
}

fn add_shared(v: u32) {
    atomicAdd(&total, v);
}

fn count_into(p: ptr<private, u32>) {
    *p += 100u;
}

fn second(pair: ptr<function, array<u32, 2>>) -> u32 {
    (*pair)[1] += 1u;
    return (*pair)[1];
}

fn store(index: u32, value: u32) {
    out[index] = value;
}

@compute @workgroup_size(8)
fn calls_main(@builtin(local_invocation_index) k: u32) {
    var v = k;
    let r = twice(&v, 5u);
    let c = collatz(collatz(k));
    add_shared(k);
    workgroupBarrier();
    var pair = array<u32, 2>(5u, k);
    count_into(&calls);
    store(k, r * 1000u + c * 10u + calls + second(&pair) * 1000000u);
    if (k == 0u) {
        store(8u, atomicLoad(&total));
    }
}
"#;
    let out = run(CALLS, "calls_main", [1, 1, 1], &[vec![0; 36]], &[]);
    let collatz = |x: u32| if x.is_multiple_of(2) { x / 2 } else { x * 3 + 1 };
    let mut expected: Vec<u32> = (0..8u32)
        .map(|k| (k + 10) * 1000 + collatz(collatz(k)) * 10 + 102 + (k + 1) * 1_000_000)
        .collect();
    expected.push(28);
    assert_eq!(as_u32s(&out[0]), expected);
}

#[test]
fn struct_with_runtime_array_sees_the_view_length() {
    const SCALE: &str = r#"
struct Block { count: u32, scale: f32, data: array<f32> }
@group(0) @binding(0) var<storage, read_write> block: Block;

@compute @workgroup_size(64)
fn scale(@builtin(global_invocation_id) gid: vec3<u32>) {
    let n = arrayLength(&block.data);
    if (gid.x == 0u) {
        block.count = n;
    }
    if (gid.x < n) {
        block.data[gid.x] = block.data[gid.x] * block.scale;
    }
}
"#;
    let fixture = Fixture::new();
    let buffer = fixture.allocate(64);
    let mut contents = words(&[0, 0, 0, 0]);
    contents.extend(f32s(&[3.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]));
    contents.extend(words(&[77, 88, 99, 111, 122]));
    fixture.write_now(buffer, 0, &contents);
    let kernel = fixture.wgsl(SCALE, "scale").unwrap();
    // The view starts at byte 12 (`count` overlays word 3, `scale` is word 4) and is 30 bytes:
    // 8 bytes of header and room for 5 whole elements (22 bytes), the last 2 bytes unused.
    let view = BufferArg {
        buffer,
        offset: 12,
        size: 30,
    };
    fixture.launch(fixture.stream, kernel, [1, 1, 1], &[view], &[]).unwrap();
    let after = as_u32s(&fixture.read_now(buffer, 0, 64));
    assert_eq!(after[3], 5, "arrayLength over the view");
    assert_eq!(f32::from_bits(after[4]), 3.0);
    let data: Vec<f32> = after[5..10].iter().map(|w| f32::from_bits(*w)).collect();
    assert_eq!(data, [3.0, 6.0, 9.0, 12.0, 15.0]);
    assert_eq!(
        &after[10..],
        &[6.0f32.to_bits(), 77, 88, 99, 111, 122][..],
        "bytes past the view untouched"
    );
}

#[test]
fn builtins_cover_three_dimensions_and_private_memory_is_per_invocation() {
    const IDS: &str = r#"
@group(0) @binding(0) var<storage, read_write> out: array<vec4<u32>>;
var<private> seen: u32 = 7u;

@compute @workgroup_size(2, 2, 2)
fn ids(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
       @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
       @builtin(local_invocation_index) li: u32) {
    seen += li;
    let width = groups.x * 2u;
    let height = groups.y * 2u;
    let index = gid.x + width * (gid.y + height * gid.z);
    out[index] = vec4<u32>(lid.x + 10u * lid.y + 100u * lid.z, wid.x + 10u * wid.y + 100u * wid.z,
                           groups.x + 10u * groups.y + 100u * groups.z, seen);
}
"#;
    let count = 4 * 6 * 2;
    let out = run(IDS, "ids", [2, 3, 1], &[vec![0; count * 16]], &[]);
    let values = as_u32s(&out[0]);
    for z in 0..2u32 {
        for y in 0..6u32 {
            for x in 0..4u32 {
                let index = (x + 4 * (y + 6 * z)) as usize;
                let (lid, wid) = ((x % 2, y % 2, z % 2), (x / 2, y / 2, z / 2));
                let li = lid.0 + 2 * lid.1 + 4 * lid.2;
                assert_eq!(
                    &values[index * 4..index * 4 + 4],
                    &[
                        lid.0 + 10 * lid.1 + 100 * lid.2,
                        wid.0 + 10 * wid.1 + 100 * wid.2,
                        2 + 30 + 100,
                        7 + li
                    ],
                    "invocation ({x}, {y}, {z})"
                );
            }
        }
    }
}

#[test]
fn local_arrays_vectors_and_matrices_index_dynamically() {
    const LOCALS: &str = r#"
@group(0) @binding(0) var<storage, read_write> out: array<f32>;

fn fill(a: ptr<function, array<f32, 8>>) {
    for (var i = 0; i < 8; i++) {
        (*a)[i] = f32(i * i);
    }
}

@compute @workgroup_size(8)
fn locals(@builtin(local_invocation_index) k: u32) {
    var a: array<f32, 8>;
    fill(&a);
    var v = vec4<f32>(1.0, 2.0, 3.0, 4.0);
    v[k % 4u] = 10.0;
    var m = mat2x2<f32>(vec2<f32>(1.0, 2.0), vec2<f32>(3.0, 4.0));
    m[k % 2u][1] = -1.0;
    let lookup = array<f32, 4>(0.5, 1.5, 2.5, 3.5);
    out[k] = a[7u - k] + v.x * 100.0 + m[1].y * 1000.0 + lookup[k % 4u] * 10000.0 + v.wzyx[k % 4u] * 100000.0;
}
"#;
    let out = run(LOCALS, "locals", [1, 1, 1], &[vec![0; 32]], &[]);
    let result = as_f32s(&out[0]);
    for k in 0..8usize {
        let a = ((7 - k) * (7 - k)) as f32;
        let mut v = [1.0f32, 2.0, 3.0, 4.0];
        v[k % 4] = 10.0;
        let mut m = [[1.0f32, 2.0], [3.0, 4.0]];
        m[k % 2][1] = -1.0;
        let lookup = [0.5f32, 1.5, 2.5, 3.5][k % 4];
        let swizzled = [v[3], v[2], v[1], v[0]][k % 4];
        let expected = a + v[0] * 100.0 + m[1][1] * 1000.0 + lookup * 10000.0 + swizzled * 100000.0;
        assert_eq!(result[k], expected, "invocation {k}");
    }
}
