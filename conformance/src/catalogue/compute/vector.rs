//! `compute.vector`: integer and float operations on vectors.

use super::{random_f32, run_elementwise};
use crate::catalogue::kernels::kernel_of;
use crate::catalogue::test_case;
use crate::context::TestContext;
use crate::test_case::{check_close, check_slice_eq, TestCase, TestResult};
use xhal::Launch;

pub(super) fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            "compute.vector.integer_ops",
            "vec4<i32> arithmetic, swizzles, comparisons, select, any, all, dot, min, max, clamp, division and remainder match Rust",
            vector_integer_ops
        ),
        test_case!(
            "compute.vector.float_ops",
            "cross, dot, length, normalize, distance and mix on float vectors match Rust within 1e-5",
            vector_float_ops
        ),
        test_case!(
            "compute.vector.dynamic_index",
            "vector components written and read through indices known only at run time (acc[k % 4u] += ...) match Rust",
            vector_dynamic_index
        ),
    ]
}

const VECTOR_INT: &str = include_str!("vector/integer_ops.wgsl");

fn vector_integer_ops(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "integer vectors", VECTOR_INT, "vectors")?;
    let small = |v: u32| (v % 1999) as i32 - 999;
    let raw = context.random_u32(18, 8 * 100);
    let mut a: Vec<[i32; 4]> = raw[..400]
        .chunks_exact(4)
        .map(|c| [small(c[0]), small(c[1]), small(c[2]), small(c[3])])
        .collect();
    let b: Vec<[i32; 4]> = raw[400..]
        .chunks_exact(4)
        .map(|c| [small(c[0]), small(c[1]), small(c[2]), small(c[3])])
        .collect();
    // Some equal components, for any(x == y).
    for k in (0..a.len()).step_by(7) {
        a[k][2] = b[k][2];
    }
    let out: Vec<[i32; 4]> = run_elementwise(context, &kernel, &[&a, &b], a.len(), 6 * a.len())?;
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        let each = |f: &dyn Fn(usize) -> i32| [f(0), f(1), f(2), f(3)];
        let d = each(&|c| y[c].abs() + 1);
        let expected = [
            each(&|c| x[c] + y[c] * 3),
            [x[3] - y[0], x[2] - y[0], x[1] - y[1], x[0] - y[1]],
            each(&|c| if x[c] < y[c] { y[c] } else { x[c] }),
            [
                (0..4).map(|c| x[c] * y[c]).sum(),
                i32::from((0..4).any(|c| x[c] == y[c])),
                i32::from((0..4).all(|c| x[c] > -1000)),
                i32::from(x[0] > y[0]),
            ],
            each(&|c| x[c].abs() + x[c].min(y[c]) * 2 + x[c].max(y[c]) - x[c].clamp(-10, 10)),
            each(&|c| x[c] / d[c] + (x[c] % d[c]) * 100),
        ];
        check_slice_eq(
            &out[6 * i..6 * i + 6],
            &expected,
            &format!("vector results for x = {x:?}, y = {y:?}"),
        )?;
    }
    Ok(())
}

const VECTOR_DYNAMIC_INDEX: &str = include_str!("vector/dynamic_index.wgsl");

fn vector_dynamic_index(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "dynamic vector indices", VECTOR_DYNAMIC_INDEX, "vectors")?;
    let raw = context.random_u32(20, 4 * 100);
    let a: Vec<[u32; 4]> = raw
        .chunks_exact(4)
        .map(|c| [c[0] % 1000, c[1] % 1000, c[2] % 1000, c[3] % 1000])
        .collect();
    let out: Vec<[u32; 4]> = run_elementwise(context, &kernel, &[&a], a.len(), 2 * a.len())?;
    for (i, x) in a.iter().enumerate() {
        let mut acc = [0u32; 4];
        for k in 0..8usize {
            acc[k % 4] += x[(k + i) % 4] * (k as u32 + 1);
        }
        for k in 0..8usize {
            acc[k % 4] += x[k % 4] + k as u32;
        }
        let mut swapped = *x;
        let j = (x[0] % 4) as usize;
        swapped[j] = swapped[3 - j] + 1;
        check_slice_eq(
            &out[2 * i..2 * i + 2],
            &[acc, swapped],
            &format!("dynamic indices for x = {x:?}"),
        )?;
    }
    let folded = kernel_of(context, "dynamic vector indices", VECTOR_DYNAMIC_INDEX, "folded")?;
    let sums = context.device().alloc_from(context.stream(), &[0f32; 4])?;
    context.stream().launch(&Launch::new(&folded).buffer(&sums))?;
    check_slice_eq(
        &context.stream().read_to_vec(&sums)?,
        &[4.0f32, 6.0, 8.0, 10.0],
        "acc[k % 4u] += f32(k) for k below 8, folded to constants",
    )?;
    Ok(())
}

const VECTOR_FLOAT: &str = include_str!("vector/float_ops.wgsl");

fn vector_float_ops(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "float vectors", VECTOR_FLOAT, "vectors")?;
    let raw = random_f32(context, 19, 8 * 100);
    let to_vec4 = |c: &[f32]| [c[0] * 4.0, c[1] * 4.0, c[2] * 4.0 + 0.5, c[3] * 4.0];
    let a: Vec<[f32; 4]> = raw[..400].chunks_exact(4).map(to_vec4).collect();
    let b: Vec<[f32; 4]> = raw[400..].chunks_exact(4).map(to_vec4).collect();
    let out: Vec<[f32; 4]> = run_elementwise(context, &kernel, &[&a, &b], a.len(), 4 * a.len())?;
    let mut expected = Vec::with_capacity(out.len());
    for (x, y) in a.iter().zip(&b) {
        let dot = |p: &[f32], q: &[f32]| p.iter().zip(q).map(|(u, v)| f64::from(*u) * f64::from(*v)).sum::<f64>();
        let length3 = dot(&x[..3], &x[..3]).sqrt();
        let difference: Vec<f32> = (0..4).map(|c| x[c] - y[c]).collect();
        expected.push([
            x[1] * y[2] - x[2] * y[1],
            x[2] * y[0] - x[0] * y[2],
            x[0] * y[1] - x[1] * y[0],
            dot(x, y) as f32,
        ]);
        expected.push([
            (f64::from(x[0]) / length3) as f32,
            (f64::from(x[1]) / length3) as f32,
            (f64::from(x[2]) / length3) as f32,
            dot(x, x).sqrt() as f32,
        ]);
        expected.push([0, 1, 2, 3].map(|c| x[c] + (y[c] - x[c]) * 0.25));
        expected.push([
            dot(&difference, &difference).sqrt() as f32,
            x[1] * y[2],
            x[2].max(y[3]),
            x[3].min(y[0]),
        ]);
    }
    let flatten = |values: &[[f32; 4]]| values.iter().flatten().copied().collect::<Vec<f32>>();
    check_close(
        &flatten(&out),
        &flatten(&expected),
        1e-5,
        "cross+dot, normalize+length, mix, distance and component picks, 4 vec4 per element",
    )
}
