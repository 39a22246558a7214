//! Kernels that exercise the interpreter's shortcuts: variables read in place, fused
//! instructions, whole-workgroup memory accesses and their fallbacks. Each result is checked
//! against Rust, with every lane active and with lanes switched off.

use super::wgsl::{as_f32s, as_u32s, f32s};
use super::*;

fn run(source: &str, entry: &str, inputs: &[Vec<u8>]) -> Vec<Vec<u8>> {
    Fixture::new()
        .dispatch(source, entry, [1, 1, 1], inputs, &[])
        .unwrap_or_else(|error| panic!("{entry}: {error}"))
}

#[test]
fn a_loaded_value_keeps_its_value_after_the_variable_changes() {
    const SOURCE: &str = r#"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(16)
fn main(@builtin(local_invocation_index) lane: u32) {
    var v = lane;
    let before = v;
    let pair = vec2(v, v + 1u);
    v = v * 10u;
    var sum = 0u;
    for (var i = 0u; i < 4u; i++) {
        let seen = v;
        if lane % 3u == 0u {
            v = v + 1u;
        }
        sum = sum + seen;
    }
    out[lane] = before * 1000000u + pair.y * 10000u + sum;
}
"#;
    let out = as_u32s(&run(SOURCE, "main", &[vec![0; 64]])[0]);
    for (lane, value) in out.iter().enumerate() {
        let lane = lane as u32;
        let step = u32::from(lane.is_multiple_of(3));
        let sum: u32 = (0..4).map(|i| lane * 10 + i * step).sum();
        assert_eq!(*value, lane * 1_000_000 + (lane + 1) * 10_000 + sum, "lane {lane}");
    }
}

#[test]
fn variables_updated_on_some_lanes_keep_the_others() {
    const SOURCE: &str = r#"
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(20)
fn main(@builtin(local_invocation_index) lane: u32) {
    var sum = 0.0;
    var count = 0u;
    for (var i = 0u; i < 5u; i++) {
        if (lane + i) % 2u == 0u {
            sum = sum + x[lane] * x[i];
            count = count + 1u;
        }
        if lane < i {
            break;
        }
    }
    out[lane] = sum + f32(count) * 1000.0;
}
"#;
    let x: Vec<f32> = (0..20).map(|i| i as f32 * 0.5 + 1.0).collect();
    let out = as_f32s(&run(SOURCE, "main", &[f32s(&x), vec![0; 80]])[1]);
    for (lane, value) in out.iter().enumerate() {
        let (mut sum, mut count) = (0f32, 0u32);
        for i in 0..5 {
            if (lane + i).is_multiple_of(2) {
                sum += x[lane] * x[i];
                count += 1;
            }
            if lane < i {
                break;
            }
        }
        assert_eq!(*value, sum + count as f32 * 1000.0, "lane {lane}");
    }
}

#[test]
fn a_product_added_is_rounded_twice_not_fused() {
    const SOURCE: &str = r#"
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(8)
fn main(@builtin(local_invocation_index) lane: u32) {
    var acc = x[2];
    acc = acc + x[0] * x[1];
    out[lane] = x[2] + x[0] * x[1];
    out[lane + 8u] = acc;
}
"#;
    // (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 rounds to 1 + 2^-11 in f32: separate rounding gives
    // exactly 0 here, a fused multiply-add 2^-24.
    let a = 1.0 + 2f32.powi(-12);
    let c = -(1.0 + 2f32.powi(-11));
    let out = as_f32s(&run(SOURCE, "main", &[f32s(&[a, a, c]), vec![0; 64]])[1]);
    assert_eq!(a * a + c, 0.0);
    assert!(out.iter().all(|value| *value == 0.0), "{out:?}");
}

const SHARED: &str = r#"
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

var<workgroup> tile: array<u32, 48>;
var<workgroup> grid: array<array<u32, 6>, 8>;

@compute @workgroup_size(4, 3)
fn patterns(@builtin(local_invocation_id) id: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    tile[lane] = x[lane];
    tile[lane + 12u] = x[lane + 12u];
    tile[47u - lane] = x[lane + 24u];
    grid[id.x][id.y] = x[lane] * 3u;
    grid[id.x + 4u][id.y + 3u] = x[lane] * 5u;
    workgroupBarrier();
    let row = tile[id.y * 4u];
    let column = tile[id.x + 8u];
    let scattered = tile[(lane * 7u) % 48u];
    let nested = grid[(id.x + 1u) % 8u][id.y] + grid[id.x + 4u][id.y + 3u];
    var some = 0u;
    if lane % 2u == 1u {
        some = tile[lane + 20u];
    }
    out[lane] = row + column * 10u + scattered * 100u + nested * 1000u + some * 100000u;
}

@compute @workgroup_size(32)
fn wide(@builtin(local_invocation_index) lane: u32) {
    tile[lane] = x[lane];
    workgroupBarrier();
    let same = tile[lane / 8u];
    let consecutive = tile[(lane / 8u) * 8u + lane % 8u + 8u];
    out[lane] = same + consecutive * 100u;
}

@compute @workgroup_size(16)
fn read_past(@builtin(local_invocation_index) lane: u32) {
    tile[lane] = lane;
    workgroupBarrier();
    if lane > 2u {
        out[lane] = tile[lane * 4u] + x[0];
    }
}
"#;

#[test]
fn workgroup_memory_patterns_match_rust() {
    let x: Vec<u32> = (0..48).map(|i| i * 3 + 1).collect();
    let out = as_u32s(&run(SHARED, "patterns", &[words(&x), vec![0; 4 * 12]])[1]);
    let mut tile = [0u32; 48];
    let mut grid = [[0u32; 6]; 8];
    for lane in 0..12usize {
        let (ix, iy) = (lane % 4, lane / 4);
        tile[lane] = x[lane];
        tile[lane + 12] = x[lane + 12];
        tile[47 - lane] = x[lane + 24];
        grid[ix][iy] = x[lane] * 3;
        grid[ix + 4][iy + 3] = x[lane] * 5;
    }
    for (lane, value) in out.iter().enumerate() {
        let (ix, iy) = (lane % 4, lane / 4);
        let some = if lane % 2 == 1 { tile[lane + 20] } else { 0 };
        let nested = grid[(ix + 1) % 8][iy] + grid[ix + 4][iy + 3];
        let expected = tile[iy * 4] + tile[ix + 8] * 10 + tile[(lane * 7) % 48] * 100 + nested * 1000 + some * 100_000;
        assert_eq!(*value, expected, "lane {lane}");
    }

    let out = as_u32s(&run(SHARED, "wide", &[words(&x), vec![0; 4 * 32]])[1]);
    let tile = |i: usize| if i < 32 { x[i] } else { 0 };
    for (lane, value) in out.iter().enumerate() {
        let expected = tile(lane / 8) + tile((lane / 8) * 8 + lane % 8 + 8) * 100;
        assert_eq!(*value, expected, "lane {lane}");
    }
}

#[test]
fn reading_past_a_workgroup_array_faults_naming_it() {
    let fixture = Fixture::new();
    let result = fixture.dispatch(SHARED, "read_past", [1, 1, 1], &[vec![0; 4], vec![0; 64]], &[]);
    assert_error(
        result,
        ErrorKind::KernelFault,
        &[
            "kernel `read_past`",
            "workgroup variable `tile`",
            "index 48 is out of bounds",
            "array has 48 elements",
        ],
    );
}

#[test]
fn without_strict_bounds_a_workgroup_index_is_clamped() {
    let driver = CpuDriver::with_config(CpuConfig {
        devices: 1,
        memory_per_device: TEST_MEMORY,
    })
    .with_strict_bounds(false);
    let out = Fixture::with_driver(driver)
        .dispatch(SHARED, "read_past", [1, 1, 1], &[words(&[7]), vec![0; 64]], &[])
        .unwrap();
    let expected: Vec<u32> = (0..16u32)
        .map(|lane| match lane {
            0..=2 => 0,
            _ => {
                // Elements 16 and up were never written (zero); 47 is the last element.
                let index = (lane * 4).min(47);
                7 + if index < 16 { index } else { 0 }
            }
        })
        .collect();
    assert_eq!(as_u32s(&out[1]), expected);
}

#[test]
fn division_by_a_constant_power_of_two_matches_rust() {
    const SOURCE: &str = r#"
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(8)
fn main(@builtin(local_invocation_index) lane: u32) {
    let v = x[lane];
    out[4u * lane] = v / 8u;
    out[4u * lane + 1u] = v % 16u;
    out[4u * lane + 2u] = v / 1u + v % 1u;
    out[4u * lane + 3u] = u32(i32(v) / 4i) ^ u32(i32(v) % 4i);
}
"#;
    let x = [0, 1, 7, 8, 1023, u32::MAX, 0x8000_0001, 0xffff_fff9];
    let out = as_u32s(&run(SOURCE, "main", &[words(&x), vec![0; 4 * 32]])[1]);
    for (lane, v) in x.iter().enumerate() {
        let signed = *v as i32;
        let expected = [v / 8, v % 16, *v, ((signed / 4) ^ (signed % 4)) as u32];
        assert_eq!(out[4 * lane..4 * lane + 4], expected, "lane {lane}");
    }
}
