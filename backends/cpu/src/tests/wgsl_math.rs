//! WGSL built-in functions, vector and matrix arithmetic, and the wider and narrower types.

use super::wgsl::{as_f32s, as_i32s, as_u32s, f32s};
use super::*;

fn run(source: &str, entry: &str, inputs: &[Vec<u8>]) -> Vec<Vec<u8>> {
    Fixture::new()
        .dispatch(source, entry, [1, 1, 1], inputs, &[])
        .unwrap_or_else(|error| panic!("{entry}: {error}"))
}

#[track_caller]
fn assert_close(actual: &[f32], expected: &[f32]) {
    assert_eq!(actual.len(), expected.len());
    for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
        let close = a == e || (a - e).abs() <= 1e-6 * e.abs().max(1.0) || (a.is_nan() && e.is_nan());
        assert!(close, "output {i}: got {a}, expected {e}");
    }
}

#[test]
fn float_builtins() {
    const FLOATS: &str = r#"
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(1)
fn floats() {
    let a = x[0];
    let b = x[1];
    let c = x[2];
    var o = 0u;
    out[o] = sqrt(b); o++;
    out[o] = inverseSqrt(b); o++;
    out[o] = floor(a); o++;
    out[o] = ceil(a); o++;
    out[o] = round(c); o++;
    out[o] = round(c + 1.0); o++;
    out[o] = fract(a); o++;
    out[o] = trunc(a); o++;
    out[o] = sign(a); o++;
    out[o] = abs(a); o++;
    out[o] = min(a, b); o++;
    out[o] = max(a, b); o++;
    out[o] = clamp(b, a, c); o++;
    out[o] = mix(a, b, 0.25); o++;
    out[o] = step(c, b); o++;
    out[o] = smoothstep(a, b, c); o++;
    out[o] = fma(a, b, c); o++;
    out[o] = pow(b, c); o++;
    out[o] = exp(a); o++;
    out[o] = exp2(c); o++;
    out[o] = log(b); o++;
    out[o] = log2(b); o++;
    out[o] = sin(a); o++;
    out[o] = cos(a); o++;
    out[o] = tan(a); o++;
    out[o] = asin(0.5 * c / b); o++;
    out[o] = acos(0.5 * c / b); o++;
    out[o] = atan(a); o++;
    out[o] = atan2(a, b); o++;
    out[o] = sinh(a); o++;
    out[o] = cosh(a); o++;
    out[o] = tanh(a); o++;
    out[o] = asinh(a); o++;
    out[o] = acosh(b); o++;
    out[o] = atanh(0.5 * c / b); o++;
    out[o] = degrees(a); o++;
    out[o] = radians(b); o++;
    out[o] = saturate(a); o++;
    out[o] = ldexp(c, -3); o++;
    out[o] = a % c; o++;
    out[o] = a / 0.0; o++;
    out[o] = quantizeToF16(b + 0.0001); o++;
    let m = modf(a);
    out[o] = m.fract; o++;
    out[o] = m.whole; o++;
    let f = frexp(b);
    out[o] = f.fract; o++;
    out[o] = f32(f.exp); o++;
}
"#;
    let (a, b, c) = (-1.75f32, 3.0f32, 2.5f32);
    let rem = a - c * (a / c).trunc();
    let t = ((c - a) / (b - a)).clamp(0.0, 1.0);
    let expected = [
        b.sqrt(),
        1.0 / b.sqrt(),
        a.floor(),
        a.ceil(),
        2.0,
        4.0,
        a - a.floor(),
        a.trunc(),
        -1.0,
        a.abs(),
        a.min(b),
        a.max(b),
        b.max(a).min(c),
        a * 0.75 + b * 0.25,
        1.0,
        t * t * (3.0 - 2.0 * t),
        a.mul_add(b, c),
        b.powf(c),
        a.exp(),
        c.exp2(),
        b.ln(),
        b.log2(),
        a.sin(),
        a.cos(),
        a.tan(),
        (0.5 * c / b).asin(),
        (0.5 * c / b).acos(),
        a.atan(),
        a.atan2(b),
        a.sinh(),
        a.cosh(),
        a.tanh(),
        a.asinh(),
        b.acosh(),
        (0.5 * c / b).atanh(),
        a * (180.0 / std::f32::consts::PI),
        b * (std::f32::consts::PI / 180.0),
        0.0,
        c / 8.0,
        rem,
        f32::NEG_INFINITY,
        3.0,
        -0.75,
        -1.0,
        0.75,
        2.0,
    ];
    let out = run(FLOATS, "floats", &[f32s(&[a, b, c]), vec![0; expected.len() * 4]]);
    assert_close(&as_f32s(&out[1]), &expected);
}

#[test]
fn integer_and_bit_builtins() {
    const BITS: &str = r#"
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(1)
fn bits() {
    let a = x[0];
    let s = bitcast<i32>(x[1]);
    var o = 0u;
    out[o] = countOneBits(a); o++;
    out[o] = countLeadingZeros(a); o++;
    out[o] = countTrailingZeros(a); o++;
    out[o] = reverseBits(a); o++;
    out[o] = firstLeadingBit(a); o++;
    out[o] = firstTrailingBit(a); o++;
    out[o] = bitcast<u32>(firstLeadingBit(s)); o++;
    out[o] = extractBits(a, 4u, 8u); o++;
    out[o] = bitcast<u32>(extractBits(s, 28u, 4u)); o++;
    out[o] = insertBits(a, 0xfu, 8u, 4u); o++;
    out[o] = bitcast<u32>(abs(s)); o++;
    out[o] = bitcast<u32>(sign(s)); o++;
    out[o] = min(a, 5u); o++;
    out[o] = bitcast<u32>(max(s, -3)); o++;
    out[o] = bitcast<u32>(clamp(s, -10, 10)); o++;
    out[o] = ~a; o++;
    out[o] = a ^ 0xffu; o++;
    out[o] = dot(vec3<u32>(a, 2u, 3u), vec3<u32>(1u, 4u, 5u)); o++;
    out[o] = pack4x8unorm(vec4<f32>(0.0, 0.5, 1.0, 2.0)); o++;
    out[o] = pack4x8snorm(vec4<f32>(-1.0, -0.5, 0.5, 1.0)); o++;
    out[o] = pack2x16float(vec2<f32>(1.0, -2.0)); o++;
    out[o] = pack2x16unorm(vec2<f32>(0.25, 1.0)); o++;
    out[o] = bitcast<u32>(unpack2x16float(0xc0003c00u).y); o++;
    out[o] = bitcast<u32>(unpack4x8snorm(0x7f81u).x); o++;
    out[o] = dot4U8Packed(0x01020304u, 0x01010101u); o++;
    out[o] = bitcast<u32>(dot4I8Packed(0xffu, 0x02u)); o++;
}
"#;
    let a = 0x00f0_0f00u32;
    let s = -0x1234_5678i32;
    let expected = [
        a.count_ones(),
        a.leading_zeros(),
        a.trailing_zeros(),
        a.reverse_bits(),
        31 - a.leading_zeros(),
        a.trailing_zeros(),
        (31 - (!s as u32).leading_zeros()),
        (a >> 4) & 0xff,
        (s >> 28) as u32,
        (a & !0xf00) | 0xf00,
        s.unsigned_abs(),
        u32::MAX,
        5,
        (-3i32) as u32,
        (-10i32) as u32,
        !a,
        a ^ 0xff,
        a + 8 + 15,
        0xff_ff_80_00,
        0x7f_40_c1_81,
        0xc000_3c00,
        0xffff_4000,
        (-2.0f32).to_bits(),
        (-1.0f32).to_bits(),
        4 + 3 + 2 + 1,
        (-2i32) as u32,
    ];
    let out = run(BITS, "bits", &[words(&[a, s as u32]), vec![0; expected.len() * 4]]);
    assert_eq!(as_u32s(&out[1]), expected);
}

#[test]
fn vectors_matrices_and_select() {
    const LINEAR: &str = r#"
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(1)
fn linear() {
    let u = vec3<f32>(x[0], x[1], x[2]);
    let v = vec3<f32>(x[3], x[4], x[5]);
    let m = mat3x3<f32>(u, v, cross(u, v));
    let n = mat2x3<f32>(v, u);
    var o = 0u;
    out[o] = dot(u, v); o++;
    let c = cross(u, v);
    out[o] = c.x; o++; out[o] = c.y; o++; out[o] = c.z; o++;
    out[o] = length(u); o++;
    out[o] = distance(u, v); o++;
    out[o] = normalize(v).z; o++;
    out[o] = reflect(u, vec3<f32>(0.0, 1.0, 0.0)).y; o++;
    out[o] = faceForward(u, v, u).x; o++;
    out[o] = refract(vec3<f32>(0.0, -1.0, 0.0), vec3<f32>(0.0, 1.0, 0.0), 0.5).y; o++;
    let mv = m * v;
    out[o] = mv.x; o++; out[o] = mv.y; o++; out[o] = mv.z; o++;
    let vm = v * m;
    out[o] = vm.x; o++; out[o] = vm.z; o++;
    let mn = m * n;
    out[o] = mn[1][2]; o++;
    let t = transpose(n);
    out[o] = t[2][1]; o++;
    out[o] = determinant(m); o++;
    out[o] = determinant(mat2x2<f32>(u.xy, v.yz)); o++;
    out[o] = determinant(mat4x4<f32>(vec4(u, 1.0), vec4(v, 2.0), vec4(c, 3.0), vec4(1.0, 0.0, 2.0, 5.0))); o++;
    out[o] = (m * 2.0)[2][0]; o++;
    out[o] = (m + m - m)[0][1]; o++;
    let picked = select(u, v, vec3<bool>(true, false, true));
    out[o] = picked.x; o++; out[o] = picked.y; o++;
    out[o] = select(1.0, 2.0, all(u < v)); o++;
    out[o] = select(1.0, 2.0, any(u < v)); o++;
    out[o] = (u.zyx * 2.0 + v.xxx).x; o++;
    out[o] = (-u).y; o++;
}
"#;
    let u = [1.0f32, 2.0, -3.0];
    let v = [4.0f32, -0.5, 6.0];
    let dot = |a: [f32; 3], b: [f32; 3]| a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
    let cross = [
        u[1] * v[2] - u[2] * v[1],
        u[2] * v[0] - u[0] * v[2],
        u[0] * v[1] - u[1] * v[0],
    ];
    let length = |a: [f32; 3]| dot(a, a).sqrt();
    let m = [u, v, cross];
    let mv = |r: usize| m[0][r] * v[0] + m[1][r] * v[1] + m[2][r] * v[2];
    let det3 = |m: [[f32; 3]; 3]| {
        m[0][0] * (m[1][1] * m[2][2] - m[2][1] * m[1][2]) - m[1][0] * (m[0][1] * m[2][2] - m[2][1] * m[0][2])
            + m[2][0] * (m[0][1] * m[1][2] - m[1][1] * m[0][2])
    };
    let m4 = [
        [u[0], u[1], u[2], 1.0],
        [v[0], v[1], v[2], 2.0],
        [cross[0], cross[1], cross[2], 3.0],
        [1.0, 0.0, 2.0, 5.0],
    ];
    let det4 = {
        let minor = |skip: usize| {
            let columns: Vec<[f32; 3]> = (0..4)
                .filter(|c| *c != skip)
                .map(|c| [m4[c][1], m4[c][2], m4[c][3]])
                .collect();
            det3([columns[0], columns[1], columns[2]])
        };
        m4[0][0] * minor(0) - m4[1][0] * minor(1) + m4[2][0] * minor(2) - m4[3][0] * minor(3)
    };
    let n = [v, u];
    let mn_1_2 = m[0][2] * n[1][0] + m[1][2] * n[1][1] + m[2][2] * n[1][2];
    let expected = [
        dot(u, v),
        cross[0],
        cross[1],
        cross[2],
        length(u),
        length([u[0] - v[0], u[1] - v[1], u[2] - v[2]]),
        v[2] / length(v),
        -u[1],
        if dot(v, u) < 0.0 { u[0] } else { -u[0] },
        -1.0,
        mv(0),
        mv(1),
        mv(2),
        dot(v, m[0]),
        dot(v, m[2]),
        mn_1_2,
        n[1][2],
        det3(m),
        u[0] * v[2] - v[1] * u[1],
        det4,
        cross[0] * 2.0,
        u[1] + u[1] - u[1],
        v[0],
        u[1],
        1.0,
        2.0,
        u[2] * 2.0 + v[0],
        -u[1],
    ];
    let input = f32s(&[u[0], u[1], u[2], v[0], v[1], v[2]]);
    let out = run(LINEAR, "linear", &[input, vec![0; expected.len() * 4]]);
    assert_close(&as_f32s(&out[1]), &expected);
}

#[test]
fn sixty_four_bit_integers_and_doubles() {
    const WIDE: &str = r#"
@group(0) @binding(0) var<storage, read> x: array<i64>;
@group(0) @binding(1) var<storage, read_write> out: array<i64>;
@group(0) @binding(2) var<storage, read_write> doubles: array<f64>;

@compute @workgroup_size(2)
fn wide(@builtin(local_invocation_index) k: u32) {
    let a = x[0];
    let b = x[1];
    if (k == 0u) {
        out[0] = a * b;
        out[1] = a / b;
        out[2] = a % b;
        out[3] = a << 40u;
        out[4] = a >> u32(x[2]);
        out[5] = i64(u64(a) >> 60u);
        out[6] = select(0li, 1li, a < b);
        out[7] = a / 0li;
        out[8] = i64(i32(b) * 3);
        out[9] = max(a, b) - min(a, b);
        let d = f64(a) * 0.5lf;
        doubles[0] = d;
        doubles[1] = sqrt(f64(b));
        doubles[2] = floor(d);
        doubles[3] = f64(f32(b) / 3.0);
        out[10] = i64(d * 4.0lf);
    }
}
"#;
    let (a, b) = (-3_000_000_000_007i64, 12_345i64);
    let out = run(
        WIDE,
        "wide",
        &[
            [a, b, 65].iter().flat_map(|v| v.to_le_bytes()).collect(),
            vec![0; 11 * 8],
            vec![0; 4 * 8],
        ],
    );
    let longs: Vec<i64> = out[1]
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(
        longs,
        [
            a.wrapping_mul(b),
            a / b,
            a % b,
            a << 40,
            a >> 1,
            ((a as u64) >> 60) as i64,
            1,
            a,
            i64::from((b as i32) * 3),
            b - a,
            ((a as f64) * 0.5 * 4.0) as i64,
        ]
    );
    let doubles: Vec<f64> = out[2]
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(
        doubles,
        [
            a as f64 * 0.5,
            (b as f64).sqrt(),
            (a as f64 * 0.5).floor(),
            f64::from(b as f32 / 3.0)
        ]
    );
}

#[test]
fn half_precision_rounds_every_result() {
    const HALVES: &str = r#"
enable f16;
@group(0) @binding(0) var<storage, read> input: array<f16>;
@group(0) @binding(1) var<storage, read_write> out: array<f16>;
@group(0) @binding(2) var<storage, read_write> wide: array<f32>;

@compute @workgroup_size(4)
fn halves(@builtin(local_invocation_index) k: u32) {
    let h = input[k];
    out[k] = h * 2.0h + 1.0h;
    wide[k] = f32(h / 3.0h);
}
"#;
    use crate::wgsl::test_support::{f16_bits_to_f32, f32_to_f16_bits};
    let inputs = [1.5f32, -0.1, 1000.0, 3.0];
    let bits: Vec<u8> = inputs.iter().flat_map(|x| f32_to_f16_bits(*x).to_le_bytes()).collect();
    let out = run(HALVES, "halves", &[bits, vec![0; 8], vec![0; 16]]);
    let round = |x: f32| f16_bits_to_f32(f32_to_f16_bits(x));
    let halves: Vec<f32> = out[1]
        .chunks_exact(2)
        .map(|c| f16_bits_to_f32(u16::from_le_bytes([c[0], c[1]])))
        .collect();
    let expected: Vec<f32> = inputs.iter().map(|x| round(round(round(*x) * 2.0) + 1.0)).collect();
    assert_eq!(halves, expected);
    let thirds: Vec<f32> = inputs.iter().map(|x| round(round(*x) / 3.0)).collect();
    assert_eq!(as_f32s(&out[2]), thirds);
}

#[test]
fn workgroup_uniform_load_and_signed_loops() {
    const UNIFORM: &str = r#"
@group(0) @binding(0) var<storage, read_write> out: array<i32>;
var<workgroup> limit: i32;

@compute @workgroup_size(4)
fn uniform(@builtin(local_invocation_index) k: u32) {
    if (k == 0u) {
        limit = 3;
    }
    let n = workgroupUniformLoad(&limit);
    var total = 0;
    for (var i = -n; i <= n; i++) {
        total += i * i32(k);
    }
    out[k] = total + n * 100;
}
"#;
    let out = run(UNIFORM, "uniform", &[vec![0; 16]]);
    assert_eq!(as_i32s(&out[0]), [300, 300, 300, 300]);
}

/// The words of `hal/kernel/tests/spirv_kernel/packing.expected`: hex, `#` starts a comment.
fn expected_words(text: &str) -> Vec<u32> {
    text.lines()
        .map(|line| line.split('#').next().unwrap_or(""))
        .flat_map(str::split_whitespace)
        .map(|word| u32::from_str_radix(word, 16).unwrap_or_else(|_| panic!("not a hex word: {word}")))
        .collect()
}

/// The pack family over edge cases (`hal/kernel/tests/spirv_kernel/packing.wgsl`: NaNs,
/// infinities, subnormals, binary16 ties and overflow, out-of-range and halfway values): the
/// interpreter, and the compiled path where a C compiler is present, write exactly the words
/// of `packing.expected`, which the Kernel SPIR-V test holds the Kernel SPIR-V and the OpenCL C
/// translation to on PoCL. `XHAL_BLESS=1` rewrites the file from the interpreter.
#[test]
fn the_pack_family_on_edge_cases_writes_the_expected_words() {
    use crate::KernelMode;
    let source = include_str!("../../../../hal/kernel/tests/spirv_kernel/packing.wgsl");
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../hal/kernel/tests/spirv_kernel/packing.expected"
    );
    // Two workgroups of 64 invocations, 28 words each, as the Kernel SPIR-V test launches it.
    let words = 2 * 64 * 28;
    let run = |mode: KernelMode| {
        let driver = CpuDriver::with_config(CpuConfig {
            devices: 1,
            memory_per_device: TEST_MEMORY,
        })
        .with_kernel_mode(mode);
        let out = Fixture::with_driver(driver)
            .dispatch(source, "packing", [2, 1, 1], &[vec![0; words * 4]], &[])
            .unwrap_or_else(|error| panic!("packing ({mode:?}): {error}"));
        as_u32s(&out[0])
    };
    let interpreted = run(KernelMode::Interpret);
    if std::env::var_os("XHAL_BLESS").is_some() {
        let mut text = String::from(
            "# What the CPU interpreter writes for packing.wgsl, 28 words per invocation, 128\n\
             # invocations (XHAL_BLESS=1 cargo test -p xhal-cpu the_pack_family rewrites it).\n",
        );
        for row in interpreted.chunks(28) {
            let line: Vec<String> = row.iter().map(|w| format!("{w:08x}")).collect();
            text.push_str(&line.join(" "));
            text.push('\n');
        }
        std::fs::write(path, text).expect("write packing.expected");
    }
    let expected = expected_words(&std::fs::read_to_string(path).expect("packing.expected"));
    assert_eq!(expected.len(), words);
    for (i, (got, want)) in interpreted.iter().zip(&expected).enumerate() {
        assert_eq!(got, want, "interpreter, invocation {}, word {}", i / 28, i % 28);
    }
    let compiler = std::process::Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".to_owned()))
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success());
    if compiler {
        let compiled = run(KernelMode::Compile);
        for (i, (got, want)) in compiled.iter().zip(&expected).enumerate() {
            assert_eq!(got, want, "compiled, invocation {}, word {}", i / 28, i % 28);
        }
    }
}
