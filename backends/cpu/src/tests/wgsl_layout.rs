//! WGSL's host-shareable layout (padding of `vec3`, matrix columns, struct members) and
//! composite values passed around by value.

use super::wgsl::{as_f32s, as_u32s, f32s};
use super::*;

fn run(source: &str, entry: &str, workgroups: [u32; 3], inputs: &[Vec<u8>], scalars: &[u8]) -> Vec<Vec<u8>> {
    Fixture::new()
        .dispatch(source, entry, workgroups, inputs, scalars)
        .unwrap_or_else(|error| panic!("{entry}: {error}"))
}

#[test]
fn structs_with_vec3_and_matrices_follow_wgsl_offsets() {
    const PARTICLES: &str = r#"
struct Particle { position: vec3<f32>, mass: f32, velocity: vec2<f32>, id: u32 }
struct Params { transform: mat3x3<f32>, offset: vec3<f32>, count: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read_write> particles: array<Particle>;

fn moved(p: Particle) -> Particle {
    var q = p;
    q.position = params.transform * p.position + params.offset;
    q.velocity = q.velocity.yx;
    q.id = p.id * 10u;
    return q;
}

@compute @workgroup_size(4)
fn step(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x < params.count) {
        particles[gid.x] = moved(particles[gid.x]);
        particles[gid.x].mass += 0.5;
    }
}
"#;
    // Particle: position at 0 (12 bytes), mass at 12, velocity at 16, id at 24; stride 32.
    let mut bytes = Vec::new();
    for i in 0..4u32 {
        let f = i as f32;
        bytes.extend(f32s(&[f, f + 1.0, f + 2.0, 10.0 * f]));
        bytes.extend(f32s(&[f * 3.0, -f]));
        bytes.extend(words(&[i, 0xdead]));
    }
    // Params: mat3x3 columns at 0, 16, 32 (each a padded vec3), offset at 48, count at 60.
    let mut scalars = Vec::new();
    for column in [[2.0f32, 0.0, 0.0], [0.0, 3.0, 0.0], [1.0, 0.0, 1.0]] {
        scalars.extend(f32s(&column));
        scalars.extend(words(&[0]));
    }
    scalars.extend(f32s(&[100.0, 200.0, 300.0]));
    scalars.extend(words(&[3]));
    let out = run(PARTICLES, "step", [1, 1, 1], &[bytes], &scalars);
    let words_out = as_u32s(&out[0]);
    for i in 0..4usize {
        let p = &words_out[i * 8..i * 8 + 8];
        let f = i as f32;
        let value = |k: usize| f32::from_bits(p[k]);
        if i < 3 {
            assert_eq!(
                [value(0), value(1), value(2)],
                [2.0 * f + (f + 2.0) + 100.0, 3.0 * (f + 1.0) + 200.0, f + 2.0 + 300.0],
                "particle {i} position"
            );
            assert_eq!(value(3), 10.0 * f + 0.5, "particle {i} mass");
            assert_eq!([value(4), value(5)], [-f, f * 3.0], "particle {i} velocity");
            assert_eq!(p[6], i as u32 * 10, "particle {i} id");
        } else {
            assert_eq!(value(0), f, "particle 3 untouched");
        }
        assert_eq!(p[7], 0xdead, "padding of particle {i} untouched");
    }
}

#[test]
fn matrices_in_storage_and_whole_array_copies() {
    const MATRICES: &str = r#"
struct Block { m4: mat4x4<f32>, m2: mat2x2<f32>, v: array<vec3<f32>, 2> }
@group(0) @binding(0) var<storage, read> input: Block;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
var<private> copies: array<vec3<f32>, 2>;

@compute @workgroup_size(1)
fn matrices() {
    let v = input.m4 * vec4<f32>(1.0, 2.0, 3.0, 4.0);
    out[0] = v.x;
    out[1] = v.w;
    out[2] = (input.m2 * input.m2)[1][0];
    copies = input.v;
    var local = copies;
    local[1].z = -1.0;
    out[3] = copies[1].z;
    out[4] = local[1].z;
    out[5] = local[0].y;
    out[6] = transpose(input.m4)[3][0];
}
"#;
    let m4: Vec<f32> = (0..16).map(|i| i as f32).collect();
    let mut input = f32s(&m4);
    input.extend(f32s(&[1.0, 2.0, 3.0, 4.0]));
    // array<vec3<f32>, 2> at offset 80, stride 16.
    input.extend(f32s(&[5.0, 6.0, 7.0, 0.0, 8.0, 9.0, 10.0, 0.0]));
    let out = run(MATRICES, "matrices", [1, 1, 1], &[input, vec![0; 28]], &[]);
    let column = |c: usize, r: usize| m4[c * 4 + r];
    let v = |r: usize| column(0, r) + 2.0 * column(1, r) + 3.0 * column(2, r) + 4.0 * column(3, r);
    // m2 columns (1, 2) and (3, 4); (m2 * m2)[1][0] = 1 * 3 + 3 * 4.
    assert_eq!(as_f32s(&out[1]), [v(0), v(3), 15.0, 10.0, -1.0, 6.0, column(0, 3)]);
}

#[test]
fn atomics_in_struct_members_and_workgroup_flags() {
    const COUNTER: &str = r#"
struct Counter { hits: atomic<u32>, flags: array<u32> }
@group(0) @binding(0) var<storage, read_write> counter: Counter;
var<workgroup> seen: array<bool, 8>;
var<workgroup> winner: atomic<u32>;

@compute @workgroup_size(8)
fn count(@builtin(local_invocation_index) k: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    atomicAdd(&counter.hits, 1u);
    seen[k] = k % 3u == 0u;
    let won = atomicCompareExchangeWeak(&winner, 0u, k + 1u);
    workgroupBarrier();
    if (k == 0u) {
        var mask = 0u;
        for (var i = 0u; i < 8u; i++) {
            if (seen[i]) {
                mask |= 1u << i;
            }
        }
        counter.flags[wid.x] = mask | (atomicLoad(&winner) << 16u);
    }
    if (won.exchanged) {
        counter.flags[wid.x + 4u] = won.old_value + 100u + k;
    }
}
"#;
    let out = run(COUNTER, "count", [4, 1, 1], &[vec![0; 4 + 8 * 4]], &[]);
    let values = as_u32s(&out[0]);
    assert_eq!(values[0], 32);
    assert_eq!(&values[1..5], &[0b0100_1001 | (1 << 16); 4]);
    assert_eq!(&values[5..9], &[100; 4]);
}

#[test]
fn early_returns_and_switches_in_loops_diverge_per_lane() {
    const DIVERGE: &str = r#"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;

fn classify(x: u32) -> u32 {
    var total = 0u;
    for (var i = 0u; i < 10u; i++) {
        switch (i % 4u) {
            case 0u: { total += 1u; }
            case 1u: {
                if (i > x) {
                    return total + 1000u;
                }
                continue;
            }
            default: {
                if (i + x == 9u) { break; }
                total += 10u;
            }
        }
        total += 100u;
    }
    return total;
}

@compute @workgroup_size(16)
fn diverge(@builtin(local_invocation_index) k: u32) {
    if (k >= 12u) {
        return;
    }
    out[k] = classify(k);
}
"#;
    let classify = |x: u32| -> u32 {
        let mut total = 0;
        for i in 0..10u32 {
            match i % 4 {
                0 => total += 1,
                1 => {
                    if i > x {
                        return total + 1000;
                    }
                    continue;
                }
                _ => {
                    if i + x != 9 {
                        total += 10;
                    }
                }
            }
            total += 100;
        }
        total
    };
    let mut initial = vec![7u32; 16];
    initial[15] = 99;
    let out = run(DIVERGE, "diverge", [1, 1, 1], &[words(&initial)], &[]);
    let mut expected: Vec<u32> = (0..12).map(classify).collect();
    expected.extend([7, 7, 7, 99]);
    assert_eq!(as_u32s(&out[0]), expected);
}

#[test]
fn every_storage_atomic_operation() {
    const ATOMICS: &str = r#"
@group(0) @binding(0) var<storage, read_write> u: array<atomic<u32>, 6>;
@group(0) @binding(1) var<storage, read_write> i: array<atomic<i32>, 2>;
@group(0) @binding(2) var<storage, read_write> old: array<u32>;

@compute @workgroup_size(8)
fn atomics(@builtin(global_invocation_id) gid: vec3<u32>) {
    let k = gid.x;
    atomicSub(&u[0], k);
    atomicAnd(&u[1], ~(1u << k));
    atomicOr(&u[2], 1u << k);
    atomicXor(&u[3], 1u << (k % 4u));
    atomicMin(&u[4], k + 5u);
    atomicMax(&u[5], k * 3u);
    atomicMin(&i[0], 3 - i32(k));
    atomicMax(&i[1], i32(k) - 100);
    old[k] = atomicExchange(&u[2], atomicLoad(&u[2]));
    atomicStore(&u[2], 0xffffu);
}
"#;
    let out = run(
        ATOMICS,
        "atomics",
        [4, 1, 1],
        &[
            words(&[1000, u32::MAX, 0, 0, 100, 0]),
            super::wgsl::i32s(&[0, -1000]),
            vec![0; 32 * 4],
        ],
        &[],
    );
    let total: u32 = (0..32).sum();
    let and = (0..32u32).fold(u32::MAX, |m, k| m & !(1 << k));
    let xor = (0..32u32).fold(0, |m, k| m ^ (1 << (k % 4)));
    assert_eq!(as_u32s(&out[0]), [1000u32.wrapping_sub(total), and, 0xffff, xor, 5, 93]);
    assert_eq!(super::wgsl::as_i32s(&out[1]), [3 - 31, -69]);
}
