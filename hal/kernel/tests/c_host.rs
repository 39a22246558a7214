//! Host C from the C emitter, compiled with the system C compiler and run one workgroup per
//! call, against results computed in Rust.

use std::ffi::c_void;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use libloading::Library;
use xhal_kernel::{parse_wgsl, CEntryPoint, Dialect};

/// `xhal_workgroup` of the emitted C.
#[repr(C)]
struct Workgroup {
    workgroup_id: [u32; 3],
    num_workgroups: [u32; 3],
    cancel: *const u32,
    out_of_bounds: *mut u32,
}

struct Kernel {
    library: Library,
    entry: CEntryPoint,
    dir: PathBuf,
}

impl Drop for Kernel {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

static BUILDS: AtomicUsize = AtomicUsize::new(0);

/// Emits host C for `entry`, compiles it with `cc -std=c11 -O2 -Wall -Werror -shared -fPIC`
/// and loads it; `None` (with a printed reason) when there is no C compiler.
fn build(source: &str, entry: &str) -> Option<Kernel> {
    if !Command::new("cc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        println!("skipped: no C compiler (`cc`) found");
        return None;
    }
    let module = parse_wgsl(source).expect("kernel parses");
    let c = module.to_c(Dialect::HostC, Some(entry)).expect("host C");
    let dir = std::env::temp_dir().join(format!(
        "xhal-c-host-{}-{}",
        std::process::id(),
        BUILDS.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let src = dir.join("kernel.c");
    let lib = dir.join("libkernel.so");
    std::fs::write(&src, &c.text).expect("write C");
    let output = Command::new("cc")
        .args(["-std=c11", "-O2", "-Wall", "-Werror", "-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&src)
        .output()
        .expect("run cc");
    assert!(
        output.status.success(),
        "cc failed:\n{}\n--- source ---\n{}",
        String::from_utf8_lossy(&output.stderr),
        c.text
    );
    // SAFETY: the library is C we just compiled; it has no initialisers.
    let library = unsafe { Library::new(&lib) }.expect("load library");
    Some(Kernel {
        library,
        entry: c.entry_points.into_iter().next().expect("one entry point"),
        dir,
    })
}

impl Kernel {
    /// Runs `invoke` once per workgroup of `groups`, in order, with the scratch memory the
    /// kernel asks for; returns whether the kernel met an out-of-bounds index.
    fn run(&self, groups: [u32; 3], mut invoke: impl FnMut(&Workgroup, *mut c_void)) -> bool {
        let scratch_bytes: usize = *self.symbol_named::<usize>(&format!("{}__scratch_bytes", self.entry.symbol));
        let mut scratch = vec![0u64; scratch_bytes.div_ceil(8).max(1)];
        let cancel = 0u32;
        let mut out_of_bounds = 0u32;
        for gz in 0..groups[2] {
            for gy in 0..groups[1] {
                for gx in 0..groups[0] {
                    // Scratch is the kernel's own: give it garbage, as a runner may.
                    scratch.iter_mut().for_each(|w| *w = 0xA5A5_A5A5_A5A5_A5A5);
                    let group = Workgroup {
                        workgroup_id: [gx, gy, gz],
                        num_workgroups: groups,
                        cancel: &cancel,
                        out_of_bounds: &mut out_of_bounds,
                    };
                    invoke(&group, scratch.as_mut_ptr().cast());
                }
            }
        }
        out_of_bounds != 0
    }

    fn symbol_named<T>(&self, name: &str) -> &T {
        // SAFETY: the emitted C defines `name` as a `T`.
        unsafe {
            let symbol = self.library.get::<*const T>(name.as_bytes()).expect("symbol");
            &**symbol
        }
    }

    fn symbol<T: Copy>(&self) -> T {
        // SAFETY: the caller names the C signature of the entry point as emitted.
        unsafe {
            *self
                .library
                .get::<T>(self.entry.symbol.as_bytes())
                .expect("entry symbol")
        }
    }
}

type Inv = *const Workgroup;
type Wg = *mut c_void;

#[test]
fn saxpy_example_runs_on_the_host() {
    let source = include_str!("../../../examples/kernels/saxpy.wgsl");
    let Some(k) = build(source, "saxpy") else { return };
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Params {
        a: f32,
        n: u32,
    }
    // Indices into runtime-sized arrays are clamped to the views, so the kernel takes their
    // byte lengths.
    assert!(k.entry.scalar_block && k.entry.buffers == 2 && k.entry.buffer_lengths);
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Lengths([u64; 2]);
    let f: unsafe extern "C" fn(*mut f32, *mut f32, Params, Lengths, Inv, Wg) = k.symbol();
    let n = 1000u32;
    let mut x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let mut y: Vec<f32> = (0..n).map(|i| 3.0 - i as f32).collect();
    let expected: Vec<f32> = x.iter().zip(&y).map(|(x, y)| 2.5 * x + y).collect();
    let params = Params { a: 2.5, n };
    k.run([n.div_ceil(256), 1, 1], |inv, wg| {
        // SAFETY: buffers as the kernel declares them; it checks `n`.
        unsafe {
            f(
                x.as_mut_ptr(),
                y.as_mut_ptr(),
                params,
                Lengths([4 * n as u64; 2]),
                inv,
                wg,
            )
        }
    });
    assert_eq!(y, expected);
}

const INTEGER_EDGES: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read> b: array<u32>;
@group(0) @binding(2) var<storage, read> f: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(8)
fn edges(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = a[i];
    let y = b[i];
    let sx = bitcast<i32>(x);
    let sy = bitcast<i32>(y);
    let o = 16u * i;
    out[o] = bitcast<u32>(sx / sy);
    out[o + 1u] = bitcast<u32>(sx % sy);
    out[o + 2u] = x / y;
    out[o + 3u] = x % y;
    out[o + 4u] = x << y;
    out[o + 5u] = x >> y;
    out[o + 6u] = bitcast<u32>(sx << y);
    out[o + 7u] = bitcast<u32>(sx >> y);
    out[o + 8u] = bitcast<u32>(sx + sy);
    out[o + 9u] = bitcast<u32>(sx * sy);
    out[o + 10u] = bitcast<u32>(-sx);
    out[o + 11u] = bitcast<u32>(abs(sx));
    out[o + 12u] = bitcast<u32>(i32(f[i]));
    out[o + 13u] = u32(f[i]);
    out[o + 14u] = countOneBits(x) + 64u * countLeadingZeros(y);
    out[o + 15u] = reverseBits(x) ^ extractBits(x, y % 32u, 5u);
}
"#;

fn f32_to_i32(v: f32) -> i32 {
    if v.is_nan() {
        0
    } else if v >= 2147483648.0 {
        2147483520
    } else if v <= -2147483648.0 {
        i32::MIN
    } else {
        v as i32
    }
}

fn f32_to_u32(v: f32) -> u32 {
    if v.is_nan() || v <= 0.0 {
        0
    } else if v >= 4294967296.0 {
        4294967040
    } else {
        v as u32
    }
}

fn extract_bits(x: u32, offset: u32, count: u32) -> u32 {
    let o = offset.min(32);
    let c = count.min(32 - o);
    if c == 0 {
        0
    } else if c == 32 {
        x
    } else {
        (x >> o) & ((1u32 << c) - 1)
    }
}

#[test]
fn integer_and_conversion_edge_cases_follow_wgsl() {
    let Some(k) = build(INTEGER_EDGES, "edges") else { return };
    assert!(k.entry.buffer_lengths && !k.entry.scalar_block && k.entry.buffers == 4);
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Lengths([u64; 4]);
    let f: unsafe extern "C" fn(*mut u32, *mut u32, *mut f32, *mut u32, Lengths, Inv, Wg) = k.symbol();
    let min = i32::MIN as u32;
    let pairs: Vec<(u32, u32)> = vec![
        (7, 0),
        (min, 0),
        (min, u32::MAX),
        ((-7i32) as u32, 2),
        (7, (-2i32) as u32),
        (u32::MAX, 33),
        (0x8000_0001, 31),
        (0x1234_5678, 63),
        (0x7fff_ffff, 1),
        (0x7fff_ffff, 0x7fff_ffff),
        (123456789, 1000),
        (0xdead_beef, 28),
    ];
    let floats = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        3.0e9,
        -3.0e9,
        2.5,
        -2.7,
        1.0e10,
        4294967040.0,
        2147483520.0,
        -0.5,
        65535.9,
    ];
    let mut a: Vec<u32> = pairs.iter().map(|p| p.0).collect();
    let mut b: Vec<u32> = pairs.iter().map(|p| p.1).collect();
    let mut fl: Vec<f32> = floats.to_vec();
    let n = a.len();
    let mut out = vec![0u32; 16 * n];
    let lengths = Lengths([4 * n as u64, 4 * n as u64, 4 * n as u64, 4 * 16 * n as u64]);
    k.run([(n as u32).div_ceil(8), 1, 1], |inv, wg| {
        // SAFETY: buffers of the declared lengths.
        unsafe {
            f(
                a.as_mut_ptr(),
                b.as_mut_ptr(),
                fl.as_mut_ptr(),
                out.as_mut_ptr(),
                lengths,
                inv,
                wg,
            )
        }
    });
    for i in 0..n {
        let (x, y) = pairs[i];
        let (sx, sy) = (x as i32, y as i32);
        let sdiv = if sy == 0 || (sx == i32::MIN && sy == -1) {
            sx
        } else {
            sx / sy
        };
        let srem = if sy == 0 || (sx == i32::MIN && sy == -1) {
            0
        } else {
            sx % sy
        };
        let expected = [
            sdiv as u32,
            srem as u32,
            x.checked_div(y).unwrap_or(x),
            if y == 0 { 0 } else { x % y },
            x.wrapping_shl(y),
            x.wrapping_shr(y),
            sx.wrapping_shl(y) as u32,
            sx.wrapping_shr(y) as u32,
            sx.wrapping_add(sy) as u32,
            sx.wrapping_mul(sy) as u32,
            sx.wrapping_neg() as u32,
            sx.wrapping_abs() as u32,
            f32_to_i32(floats[i]) as u32,
            f32_to_u32(floats[i]),
            x.count_ones() + 64 * y.leading_zeros(),
            x.reverse_bits() ^ extract_bits(x, y % 32, 5),
        ];
        assert_eq!(
            &out[16 * i..16 * i + 16],
            &expected,
            "pair {i}: ({x:#x}, {y:#x}), float {}",
            floats[i]
        );
    }
}

const SHAPES: &str = r#"
struct Item {
    p: vec3<f32>,
    w: f32,
    q: vec3<f32>,
}
struct Params {
    m: mat3x3<f32>,
    scale: f32,
}
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read> items: array<Item>;
@group(0) @binding(1) var<storage, read> dirs: array<vec3<f32>>;
@group(0) @binding(2) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> out3: array<vec3<f32>>;

@compute @workgroup_size(4)
fn shapes(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&items) {
        return;
    }
    let it = items[i];
    let d = dirs[i];
    let o = 4u * i;
    out[o] = vec4<f32>(cross(it.p, d), dot(it.q, d));
    out[o + 1u] = vec4<f32>(params.m * d, it.w * params.scale);
    out[o + 2u] = vec4<f32>(d * params.m, determinant(params.m));
    out[o + 3u] = select(vec4<f32>(it.p.zyx, length(it.q)), vec4<f32>(-1.0), vec4<bool>((it.w < 0.0), false, (it.p.x > 1.0), true));
    out3[2u * i] = transpose(params.m) * it.p + floor(vec3<f32>(it.w));
    out3[2u * i + 1u] = round(vec3<f32>(it.w, it.w + 1.0, -it.w));
}
"#;

#[test]
fn vectors_matrices_and_std430_padding() {
    let Some(k) = build(SHAPES, "shapes") else { return };
    #[repr(C)]
    #[derive(Clone, Copy, Default, Debug)]
    struct Item {
        p: [f32; 3],
        w: f32,
        q: [f32; 3],
        pad: f32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Params {
        m: [[f32; 4]; 3],
        scale: f32,
        pad: [f32; 3],
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Lengths([u64; 4]);
    let f: unsafe extern "C" fn(*mut Item, *mut [f32; 4], *mut [f32; 4], *mut [f32; 4], Params, Lengths, Inv, Wg) =
        k.symbol();
    let items = [
        Item {
            p: [1.0, 2.0, 3.0],
            w: 2.5,
            q: [0.5, -1.0, 2.0],
            pad: 0.0,
        },
        Item {
            p: [-2.0, 0.5, 4.0],
            w: -1.5,
            q: [3.0, 4.0, 0.0],
            pad: 0.0,
        },
        Item {
            p: [0.25, 8.0, -3.0],
            w: 3.5,
            q: [1.0, 1.0, 1.0],
            pad: 0.0,
        },
    ];
    let dirs = [[0.0f32, 1.0, 0.0, 99.0], [1.0, -2.0, 0.5, 99.0], [3.0, 0.0, -1.0, 99.0]];
    let m = [[2.0f32, 0.0, 1.0], [1.0, 3.0, -1.0], [0.0, 1.0, 4.0]]; // columns
    let params = Params {
        m: [
            [m[0][0], m[0][1], m[0][2], 0.0],
            [m[1][0], m[1][1], m[1][2], 0.0],
            [m[2][0], m[2][1], m[2][2], 0.0],
        ],
        scale: 10.0,
        pad: [0.0; 3],
    };
    let n = items.len();
    let mut items_buf = items.to_vec();
    let mut dirs_buf = dirs.to_vec();
    let mut out = vec![[0.0f32; 4]; 4 * n];
    let mut out3 = vec![[0.0f32; 4]; 2 * n];
    let lengths = Lengths([32 * n as u64, 16 * n as u64, 64 * n as u64, 32 * n as u64]);
    k.run([1, 1, 1], |inv, wg| {
        // SAFETY: buffers of the declared lengths, laid out as WGSL's std430 rules say.
        unsafe {
            f(
                items_buf.as_mut_ptr(),
                dirs_buf.as_mut_ptr(),
                out.as_mut_ptr(),
                out3.as_mut_ptr(),
                params,
                lengths,
                inv,
                wg,
            )
        }
    });
    let det = m[0][0] * (m[1][1] * m[2][2] - m[2][1] * m[1][2]) - m[1][0] * (m[0][1] * m[2][2] - m[2][1] * m[0][2])
        + m[2][0] * (m[0][1] * m[1][2] - m[1][1] * m[0][2]);
    let close = |a: f32, b: f32| (a - b).abs() <= 1e-5 * (1.0 + b.abs());
    for i in 0..n {
        let it = items[i];
        let (p, q, d) = (it.p, it.q, dirs[i]);
        let cross = [
            p[1] * d[2] - p[2] * d[1],
            p[2] * d[0] - p[0] * d[2],
            p[0] * d[1] - p[1] * d[0],
        ];
        let dot_qd = q[0] * d[0] + q[1] * d[1] + q[2] * d[2];
        let mv: Vec<f32> = (0..3).map(|r| (0..3).map(|c| m[c][r] * d[c]).sum()).collect();
        let vm: Vec<f32> = (0..3).map(|c| (0..3).map(|r| d[r] * m[c][r]).sum()).collect();
        let len_q = (q[0] * q[0] + q[1] * q[1] + q[2] * q[2]).sqrt();
        let mut sel = [p[2], p[1], p[0], len_q];
        let mask = [it.w < 0.0, false, p[0] > 1.0, true];
        for c in 0..4 {
            if mask[c] {
                sel[c] = -1.0;
            }
        }
        let tp: Vec<f32> = (0..3)
            .map(|r| (0..3).map(|c| m[r][c] * p[c]).sum::<f32>() + it.w.floor())
            .collect();
        let expected = [
            [cross[0], cross[1], cross[2], dot_qd],
            [mv[0], mv[1], mv[2], it.w * 10.0],
            [vm[0], vm[1], vm[2], det],
            sel,
        ];
        for (r, e) in expected.iter().enumerate() {
            let got = out[4 * i + r];
            assert!(
                (0..4).all(|c| close(got[c], e[c])),
                "item {i} row {r}: got {got:?}, expected {e:?}"
            );
        }
        let got = out3[2 * i];
        assert!(
            (0..3).all(|c| close(got[c], tp[c])),
            "item {i}: transpose got {got:?}, expected {tp:?}"
        );
        let rounded = [
            it.w.round_ties_even(),
            (it.w + 1.0).round_ties_even(),
            (-it.w).round_ties_even(),
        ];
        assert_eq!(&out3[2 * i + 1][..3], &rounded, "item {i}: round half to even");
    }
}

const CONTROL: &str = r#"
@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

struct Halves {
    low: u32,
    high: u32,
}

var<private> calls: u32;

fn classify(v: u32) -> u32 {
    var r = 0u;
    switch v % 7u {
        case 0u: {
            r = 100u;
        }
        case 1u, 2u: {
            r = 200u + v % 7u;
        }
        case 5u: {
            if v > 2147483648u {
                r = 500u;
            } else {
                r = 501u;
            }
        }
        case 3u, default: {
            r = 300u;
        }
    }
    switch bitcast<i32>(v) % 3 {
        case -2: {
            r += 10u;
        }
        case -1: {
            r += 20u;
        }
        case 0: {
            r += 30u;
        }
        default: {
            r += 40u;
        }
    }
    return r;
}

fn split(v: u32) -> Halves {
    return Halves(v & 0xffffu, v >> 16u);
}

fn accumulate(total: ptr<function, u32>, v: u32) {
    *total = *total * 3u + v;
}

fn counted(v: u32) -> u32 {
    calls += 1u;
    return v ^ (v >> 3u);
}

fn swap_halves(h: ptr<function, Halves>) {
    let low = (*h).low;
    (*h).low = (*h).high;
    (*h).high = low;
}

@compute @workgroup_size(16)
fn control(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&input) {
        return;
    }
    let v = input[i];
    var acc = v;
    for (var k = 0u; k < v % 23u; k++) {
        if (k & 1u) == 1u {
            continue;
        }
        acc = acc * 31u + k;
        if acc % 97u == 0u {
            break;
        }
    }
    var steps = 0u;
    var x = v % 5000u + 1u;
    loop {
        if x == 1u {
            break;
        }
        if (x & 1u) == 0u {
            x = x / 2u;
        } else {
            x = 3u * x + 1u;
        }
        steps++;
        continuing {
            break if steps >= 150u;
        }
    }
    var total = 1u;
    accumulate(&total, counted(counted(v)));
    var h = split(v);
    swap_halves(&h);
    let o = 6u * i;
    out[o] = acc;
    out[o + 1u] = steps;
    out[o + 2u] = x;
    out[o + 3u] = classify(v);
    out[o + 4u] = total + 1000000u * calls;
    out[o + 5u] = (h.high << 16u) | h.low;
}
"#;

fn control_expected(v: u32) -> [u32; 6] {
    let mut acc = v;
    let mut k = 0u32;
    while k < v % 23 {
        if k & 1 == 1 {
            k += 1;
            continue;
        }
        acc = acc.wrapping_mul(31).wrapping_add(k);
        if acc.is_multiple_of(97) {
            break;
        }
        k += 1;
    }
    let mut steps = 0u32;
    let mut x = v % 5000 + 1;
    loop {
        if x == 1 {
            break;
        }
        x = if x & 1 == 0 { x / 2 } else { 3 * x + 1 };
        steps += 1;
        if steps >= 150 {
            break;
        }
    }
    let mut r = match v % 7 {
        0 => 100,
        1 | 2 => 200 + v % 7,
        5 => {
            if v > 2147483648 {
                500
            } else {
                501
            }
        }
        _ => 300,
    };
    r += match (v as i32) % 3 {
        -2 => 10,
        -1 => 20,
        0 => 30,
        _ => 40,
    };
    let counted = |v: u32| v ^ (v >> 3);
    let total = 1u32.wrapping_mul(3).wrapping_add(counted(counted(v)));
    let swapped = ((v & 0xffff) << 16) | (v >> 16);
    [acc, steps, x, r, total.wrapping_add(2_000_000), swapped]
}

#[test]
fn loops_switches_calls_and_private_variables() {
    let Some(k) = build(CONTROL, "control") else { return };
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Lengths([u64; 2]);
    let f: unsafe extern "C" fn(*mut u32, *mut u32, Lengths, Inv, Wg) = k.symbol();
    let mut input: Vec<u32> = (0..100u32)
        .map(|i| i.wrapping_mul(2654435761).rotate_left(i % 32))
        .collect();
    input.extend([0, 1, 7, 0x8000_0005, u32::MAX, 2147483648, 4999, 5000]);
    let n = input.len();
    let mut out = vec![0u32; 6 * n];
    let lengths = Lengths([4 * n as u64, 24 * n as u64]);
    k.run([(n as u32).div_ceil(16), 1, 1], |inv, wg| {
        // SAFETY: buffers of the declared lengths.
        unsafe { f(input.as_mut_ptr(), out.as_mut_ptr(), lengths, inv, wg) }
    });
    for (i, &v) in input.iter().enumerate() {
        assert_eq!(&out[6 * i..6 * i + 6], &control_expected(v), "input {i}: {v:#x}");
    }
}

const ATOMICS: &str = r#"
@group(0) @binding(0) var<storage, read> values: array<u32>;
@group(0) @binding(1) var<storage, read_write> counts: array<atomic<u32>, 8>;
@group(0) @binding(2) var<storage, read_write> u: array<atomic<u32>, 6>;
@group(0) @binding(3) var<storage, read_write> s: array<atomic<i32>, 2>;
@group(0) @binding(4) var<storage, read_write> cell: array<atomic<u32>, 3>;
@group(0) @binding(5) var<storage, read_write> old: array<u32>;
var<workgroup> local_sum: atomic<u32>;

@compute @workgroup_size(4)
fn atoms(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&values) {
        return;
    }
    let v = values[i];
    atomicAdd(&counts[v % 8u], 1u);
    atomicMin(&u[0], v);
    atomicMax(&u[1], v);
    atomicAnd(&u[2], v);
    atomicOr(&u[3], v);
    atomicXor(&u[4], v);
    atomicSub(&u[5], 1u);
    atomicMin(&s[0], bitcast<i32>(v));
    atomicMax(&s[1], bitcast<i32>(v));
    let before = atomicAdd(&local_sum, v);
    var seen = atomicLoad(&cell[0]);
    loop {
        let r = atomicCompareExchangeWeak(&cell[0], seen, seen + v);
        if r.exchanged {
            break;
        }
        seen = r.old_value;
    }
    atomicStore(&cell[1], i);
    let previous = atomicExchange(&cell[2], i + 1u);
    old[3u * i] = before;
    old[3u * i + 1u] = seen;
    old[3u * i + 2u] = previous;
}
"#;

#[test]
fn atomics_on_storage_and_workgroup_memory() {
    let Some(k) = build(ATOMICS, "atoms") else { return };
    assert_eq!(k.entry.workgroup_bytes, 4);
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Lengths([u64; 6]);
    type F = unsafe extern "C" fn(*mut u32, *mut u32, *mut u32, *mut i32, *mut u32, *mut u32, Lengths, Inv, Wg);
    let f: F = k.symbol();
    let mut values: Vec<u32> = (0..22u32).map(|i| i.wrapping_mul(0x9e37_79b9) ^ (i << 3)).collect();
    values[5] = 0x8000_0000;
    let n = values.len();
    let mut counts = [0u32; 8];
    let mut u = [u32::MAX, 0, u32::MAX, 0, 0, 1000];
    let mut s = [i32::MAX, i32::MIN];
    let mut cell = [0u32; 3];
    let mut old = vec![0u32; 3 * n];
    let lengths = Lengths([4 * n as u64, 32, 24, 8, 12, 12 * n as u64]);
    k.run([(n as u32).div_ceil(4), 1, 1], |inv, wg| {
        // SAFETY: buffers of the declared lengths.
        unsafe {
            f(
                values.as_mut_ptr(),
                counts.as_mut_ptr(),
                u.as_mut_ptr(),
                s.as_mut_ptr(),
                cell.as_mut_ptr(),
                old.as_mut_ptr(),
                lengths,
                inv,
                wg,
            )
        }
    });
    let mut expected_counts = [0u32; 8];
    let mut prefix = 0u32;
    for (i, &v) in values.iter().enumerate() {
        expected_counts[(v % 8) as usize] += 1;
        let group_start = i / 4 * 4;
        let before: u32 = values[group_start..i].iter().fold(0u32, |a, &b| a.wrapping_add(b));
        assert_eq!(old[3 * i], before, "workgroup atomicAdd, invocation {i}");
        assert_eq!(old[3 * i + 1], prefix, "compare-exchange loop, invocation {i}");
        assert_eq!(old[3 * i + 2], i as u32, "atomicExchange, invocation {i}");
        prefix = prefix.wrapping_add(v);
    }
    assert_eq!(counts, expected_counts);
    let and = values.iter().fold(u32::MAX, |a, &b| a & b);
    let or = values.iter().fold(0, |a, &b| a | b);
    let xor = values.iter().fold(0, |a, &b| a ^ b);
    let min = *values.iter().min().unwrap_or(&0);
    let max = *values.iter().max().unwrap_or(&0);
    assert_eq!(u, [min, max, and, or, xor, 1000 - n as u32]);
    let smin = values.iter().map(|&v| v as i32).min().unwrap_or(0);
    let smax = values.iter().map(|&v| v as i32).max().unwrap_or(0);
    assert_eq!(s, [smin, smax]);
    assert_eq!(cell, [prefix, n as u32 - 1, n as u32]);
}

const ATOMICS_64: &str = r#"
@group(0) @binding(0) var<storage, read> values: array<u64>;
@group(0) @binding(1) var<storage, read_write> unsigned_results: array<atomic<u64>, 4>;
@group(0) @binding(2) var<storage, read_write> signed_results: array<atomic<i64>, 3>;

@compute @workgroup_size(8)
fn combine(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x >= arrayLength(&values) {
        return;
    }
    let v = values[id.x];
    atomicAdd(&unsigned_results[0], v);
    atomicMax(&unsigned_results[1], v);
    atomicMin(&unsigned_results[2], v);
    atomicSub(&unsigned_results[3], v);
    atomicMax(&signed_results[0], bitcast<i64>(v));
    atomicMin(&signed_results[1], bitcast<i64>(v));
    let r = atomicCompareExchangeWeak(&signed_results[2], 0li, bitcast<i64>(v));
    if r.exchanged {
        atomicStore(&unsigned_results[3], atomicLoad(&unsigned_results[3]) + 1lu);
    }
}
"#;

#[test]
fn atomics_on_64_bit_integers() {
    let Some(k) = build(ATOMICS_64, "combine") else { return };
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Lengths([u64; 3]);
    let f: unsafe extern "C" fn(*mut u64, *mut u64, *mut i64, Lengths, Inv, Wg) = k.symbol();
    let mut values: Vec<u64> = (1..21u64)
        .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i << 60))
        .collect();
    let n = values.len();
    let mut unsigned = [0u64, 0, u64::MAX, 1000];
    let mut signed = [i64::MIN, i64::MAX, 0];
    let lengths = Lengths([8 * n as u64, 32, 24]);
    k.run([(n as u32).div_ceil(8), 1, 1], |inv, wg| {
        // SAFETY: buffers of the declared lengths.
        unsafe {
            f(
                values.as_mut_ptr(),
                unsigned.as_mut_ptr(),
                signed.as_mut_ptr(),
                lengths,
                inv,
                wg,
            )
        }
    });
    let sum = values.iter().fold(0u64, |a, &b| a.wrapping_add(b));
    let max = *values.iter().max().unwrap_or(&0);
    let min = *values.iter().min().unwrap_or(&0);
    // No value is 0, so only the first invocation's exchange succeeds.
    assert!(values.iter().all(|&v| v != 0));
    let sub = 1000u64.wrapping_sub(sum).wrapping_add(1);
    assert_eq!(unsigned, [sum, max, min, sub]);
    let smax = values.iter().map(|&v| v as i64).max().unwrap_or(0);
    let smin = values.iter().map(|&v| v as i64).min().unwrap_or(0);
    assert_eq!(signed, [smax, smin, values[0] as i64]);
}

#[test]
fn reduce_example_meets_its_barriers_in_regions() {
    let source = include_str!("../../../examples/kernels/reduce.wgsl");
    let Some(k) = build(source, "reduce") else { return };
    assert!(k.entry.barriers);
    assert_eq!(k.entry.workgroup_bytes, 1024);
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Params {
        n: u32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Lengths([u64; 2]);
    let f: unsafe extern "C" fn(*mut f32, *mut f32, Params, Lengths, Inv, Wg) = k.symbol();
    let groups = 3u32;
    let n = 512 * groups - 77;
    let mut input: Vec<f32> = (0..n).map(|i| (i % 13) as f32).collect();
    let mut partial = vec![-1.0f32; groups as usize];
    let (input_address, partial_address) = (input.as_mut_ptr() as usize, partial.as_mut_ptr() as usize);
    let lengths = Lengths([4 * n as u64, 4 * groups as u64]);
    let fault = k.run([groups, 1, 1], |inv, wg| {
        // SAFETY: buffers of the sizes the kernel reads and writes.
        unsafe {
            f(
                input_address as *mut f32,
                partial_address as *mut f32,
                Params { n },
                lengths,
                inv,
                wg,
            )
        }
    });
    assert!(!fault, "no index is out of bounds");
    let expected: Vec<f32> = (0..groups as usize)
        .map(|g| input[g * 512..(g * 512 + 512).min(n as usize)].iter().sum())
        .collect();
    assert_eq!(partial, expected);
}

#[test]
fn matmul_example_meets_its_barriers_in_regions() {
    let source = include_str!("../../../examples/kernels/matmul.wgsl");
    let Some(k) = build(source, "matmul") else { return };
    assert!(k.entry.barriers && k.entry.workgroup_size == [16, 16, 1]);
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Dims {
        m: u32,
        n: u32,
        k: u32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Lengths([u64; 3]);
    let f: unsafe extern "C" fn(*mut f32, *mut f32, *mut f32, Dims, Lengths, Inv, Wg) = k.symbol();
    // Edge tiles only, then interior tiles too (whose regions run without checks).
    for (m, n, kk) in [(19usize, 21usize, 35usize), (40, 56, 70)] {
        let mut a: Vec<f32> = (0..m * kk).map(|i| (i % 7) as f32 - 3.0).collect();
        let mut b: Vec<f32> = (0..kk * n).map(|i| (i % 5) as f32 - 2.0).collect();
        let mut c = vec![-1.0f32; m * n];
        let addresses = (
            a.as_mut_ptr() as usize,
            b.as_mut_ptr() as usize,
            c.as_mut_ptr() as usize,
        );
        let dims = Dims {
            m: m as u32,
            n: n as u32,
            k: kk as u32,
        };
        let lengths = Lengths([4 * (m * kk) as u64, 4 * (kk * n) as u64, 4 * (m * n) as u64]);
        k.run([n.div_ceil(16) as u32, m.div_ceil(16) as u32, 1], |inv, wg| {
            // SAFETY: matrices of the sizes in `dims`; the kernel guards its edges.
            unsafe {
                f(
                    addresses.0 as *mut f32,
                    addresses.1 as *mut f32,
                    addresses.2 as *mut f32,
                    dims,
                    lengths,
                    inv,
                    wg,
                )
            }
        });
        for r in 0..m {
            for q in 0..n {
                let expected: f32 = (0..kk).map(|t| a[r * kk + t] * b[t * n + q]).sum();
                assert_eq!(c[r * n + q], expected, "c[{r}][{q}] of {m}x{kk} by {kk}x{n}");
            }
        }
    }
}

/// Runs a kernel of one read-only and one read-write `u32` buffer and a two-member scalar
/// block over `groups` workgroups; returns whether it met an out-of-bounds index.
fn run_two_buffers(k: &Kernel, source: &mut [u32], out: &mut [u32], scalars: [u32; 2], groups: [u32; 3]) -> bool {
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Lengths([u64; 2]);
    let f: unsafe extern "C" fn(*mut u32, *mut u32, [u32; 2], Lengths, Inv, Wg) = k.symbol();
    let lengths = Lengths([4 * source.len() as u64, 4 * out.len() as u64]);
    let (source, out) = (source.as_mut_ptr() as usize, out.as_mut_ptr() as usize);
    k.run(groups, |inv, wg| {
        // SAFETY: the kernel reaches its buffers only within `lengths`.
        unsafe { f(source as *mut u32, out as *mut u32, scalars, lengths, inv, wg) }
    })
}

const REGION_EDGES: &str = r#"
struct Params { n: u32, unused: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read> source: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
var<workgroup> seen: array<u32, 16>;

// Each comparison in a region of its own, so that each has its own test: with n = 15, the
// second workgroup (x from 8 to 15) passes `x <= n` and fails `x < n`.
@compute @workgroup_size(8, 2)
fn edges(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    seen[li] = source[0];
    workgroupBarrier();
    let at = gid.y * 32u + gid.x;
    if gid.x < params.n { out[at] += 1u; }
    workgroupBarrier();
    if params.n > gid.x { out[at] += 10u; }
    workgroupBarrier();
    if gid.x >= params.n { } else { out[at] += 100u; }
    workgroupBarrier();
    if gid.x <= params.n { out[at] += 1000u; }
    workgroupBarrier();
    if params.n <= gid.x { out[at] += 10000u; }
}
"#;

#[test]
fn region_tests_settle_size_comparisons_only_where_they_hold_everywhere() {
    let Some(k) = build(REGION_EDGES, "edges") else { return };
    let c = parse_wgsl(REGION_EDGES)
        .expect("parses")
        .to_c(Dialect::HostC, Some("edges"))
        .expect("host C");
    assert!(c.text.contains("xh_lin_in("), "the regions have tests");
    let mut source = vec![7u32; 4];
    for n in [15u32, 16, 0, 31, 40] {
        let mut out = vec![0u32; 64];
        let fault = run_two_buffers(&k, &mut source, &mut out, [n, 0], [4, 1, 1]);
        assert!(!fault, "n = {n}: every index is in bounds");
        for y in 0..2u32 {
            for x in 0..32u32 {
                let mut expected = 0;
                if x < n {
                    expected += 111;
                }
                if x <= n {
                    expected += 1000;
                }
                if n <= x {
                    expected += 10000;
                }
                assert_eq!(out[(y * 32 + x) as usize], expected, "n = {n}, x = {x}, y = {y}");
            }
        }
    }
}

const REGION_STORED_LOCAL: &str = r#"
struct Params { start: u32, jump: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read> source: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
var<workgroup> tile: array<u32, 16>;

@compute @workgroup_size(16)
fn moved(@builtin(local_invocation_id) lid: vec3<u32>) {
    var base = params.start;
    tile[lid.x] = lid.x + base;
    workgroupBarrier();
    // The region changes `base` before it indexes with it: its test cannot use the value
    // the region started with.
    base = base + params.jump;
    out[lid.x] = source[base + lid.x] + tile[lid.x];
}
"#;

#[test]
fn a_region_test_ignores_locals_the_region_changes() {
    let Some(k) = build(REGION_STORED_LOCAL, "moved") else {
        return;
    };
    let mut source: Vec<u32> = (0..32).map(|i| 100 + i).collect();
    let mut out = vec![0u32; 16];
    assert!(!run_two_buffers(&k, &mut source, &mut out, [4, 8], [1, 1, 1]));
    let expected: Vec<u32> = (0..16).map(|x| (100 + 12 + x) + (x + 4)).collect();
    assert_eq!(out, expected);
    // From where the region starts (4) every index is in bounds; from where it reads (4 +
    // 1000) none is, and the checks must catch it.
    let mut out = vec![0u32; 16];
    assert!(run_two_buffers(&k, &mut source, &mut out, [4, 1000], [1, 1, 1]));
    let expected: Vec<u32> = (0..16).map(|x| (100 + 31) + (x + 4)).collect();
    assert_eq!(out, expected, "out-of-bounds reads clamp to the last element");
}

const REGION_WRAPPING_INDEX: &str = r#"
struct Params { scale: u32, unused: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read> source: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
var<workgroup> tile: array<u32, 16>;

@compute @workgroup_size(16)
fn wrapping(@builtin(local_invocation_id) lid: vec3<u32>) {
    tile[lid.x] = lid.x;
    workgroupBarrier();
    // 15 * scale wraps around to 14 when scale = 286331154: the first and last invocations'
    // indices are in bounds, the others' are not.
    out[lid.x] = source[lid.x * params.scale] + tile[lid.x];
}
"#;

#[test]
fn a_region_test_works_out_indices_without_wrapping_around() {
    let Some(k) = build(REGION_WRAPPING_INDEX, "wrapping") else {
        return;
    };
    let mut source: Vec<u32> = (0..16).map(|i| 100 + i).collect();
    let mut out = vec![0u32; 16];
    assert!(!run_two_buffers(&k, &mut source, &mut out, [1, 0], [1, 1, 1]));
    assert_eq!(out, (0..16).map(|x| 100 + 2 * x).collect::<Vec<u32>>());
    let scale = 286_331_154u32;
    assert_eq!(15u32.wrapping_mul(scale), 14);
    let mut out = vec![0u32; 16];
    assert!(
        run_two_buffers(&k, &mut source, &mut out, [scale, 0], [1, 1, 1]),
        "the indices between the first and the last are out of bounds"
    );
    let expected: Vec<u32> = (0..16u32)
        .map(|x| {
            let index = x.wrapping_mul(scale).min(15);
            100 + index + x
        })
        .collect();
    assert_eq!(out, expected);
}

#[test]
fn a_region_whose_indices_come_from_memory_has_no_test() {
    // A buffer the kernel may write (through this binding) can change under the test.
    let source = r#"
@group(0) @binding(0) var<storage, read_write> indices: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
var<workgroup> tile: array<u32, 16>;
@compute @workgroup_size(16)
fn gathered(@builtin(local_invocation_id) lid: vec3<u32>) {
    tile[lid.x] = lid.x;
    workgroupBarrier();
    let first = indices[0];
    out[first + lid.x] = tile[(first + lid.x) % 16u];
}
"#;
    let c = parse_wgsl(source)
        .expect("parses")
        .to_c(Dialect::HostC, Some("gathered"))
        .expect("host C");
    assert!(
        !c.text.contains("xh_fast"),
        "no region can be proved in bounds:\n{}",
        c.text
    );
    // One bound read-only stays as it is for the whole dispatch (no writable binding may
    // alias it): the test reads the element the region reads, clamped as the region clamps it.
    let read_only = source.replace("var<storage, read_write> indices", "var<storage, read> indices");
    let c = parse_wgsl(&read_only)
        .expect("parses")
        .to_c(Dialect::HostC, Some("gathered"))
        .expect("host C");
    assert!(c.text.contains("xh_fast"), "{}", c.text);
}
