//! `compute.matrix`: matrix products, memory layout and determinants.

use super::random_f32;
use crate::catalogue::kernels::{groups_for, kernel_of};
use crate::catalogue::test_case;
use crate::context::TestContext;
use crate::test_case::{check_close, check_slice_eq, TestCase, TestResult};
use xhal::Launch;

pub(super) fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            "compute.matrix.products_and_layout",
            "mat4x4 and mat3x3 (with its padded columns) from buffers multiply, transpose and give determinants as Rust computes",
            matrix_products_and_layout
        ),
        test_case!(
            "compute.matrix.determinants",
            "determinant of 2x2, 3x3 and 4x4 matrices of small integers, where every evaluation order is exact, equals Rust's",
            matrix_determinants
        ),
    ]
}

const MATRICES: &str = include_str!("matrix/products_and_layout.wgsl");

fn matrix_products_and_layout(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "matrices", MATRICES, "matrices")?;
    let count = 70usize;
    // Column-major, as WGSL stores them; a mat3x3 column is a vec3 padded to 16 bytes.
    let m4: Vec<[[f32; 4]; 4]> = random_f32(context, 20, 16 * count)
        .chunks_exact(16)
        .map(|c| {
            [
                [c[0], c[1], c[2], c[3]],
                [c[4], c[5], c[6], c[7]],
                [c[8], c[9], c[10], c[11]],
                [c[12], c[13], c[14], c[15]],
            ]
        })
        .collect();
    let m3: Vec<[[f32; 4]; 3]> = random_f32(context, 21, 9 * count)
        .chunks_exact(9)
        .map(|c| {
            [
                [c[0], c[1], c[2], 0.0],
                [c[3], c[4], c[5], 0.0],
                [c[6], c[7], c[8], 0.0],
            ]
        })
        .collect();
    let v: Vec<[f32; 4]> = random_f32(context, 22, 4 * count)
        .chunks_exact(4)
        .map(|c| [c[0], c[1], c[2], c[3]])
        .collect();
    let m4_buffer = context.device().alloc_from(context.stream(), &m4)?;
    let m3_buffer = context.device().alloc_from(context.stream(), &m3)?;
    let v_buffer = context.device().alloc_from(context.stream(), &v)?;
    let out_vectors = context
        .device()
        .alloc_from(context.stream(), &vec![[0f32; 4]; 2 * count])?;
    let out_m4 = context
        .device()
        .alloc_from(context.stream(), &vec![[[0f32; 4]; 4]; count])?;
    let out_m3 = context
        .device()
        .alloc_from(context.stream(), &vec![[[0f32; 4]; 3]; count])?;
    context.stream().launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(count, 64), 1, 1)
            .buffer(&m4_buffer)
            .buffer(&m3_buffer)
            .buffer(&v_buffer)
            .buffer(&out_vectors)
            .buffer(&out_m4)
            .buffer(&out_m3),
    )?;
    let mut expected_vectors = Vec::new();
    let mut expected_m4 = Vec::new();
    let mut expected_m3 = Vec::new();
    for i in 0..count {
        let m = &m4[i];
        // m[column][row].
        let at = |row: usize, column: usize| f64::from(m[column][row]);
        expected_vectors.extend((0..4).map(|row| (0..4).map(|c| at(row, c) * f64::from(v[i][c])).sum::<f64>() as f32));
        expected_vectors
            .extend((0..4).map(|column| (0..4).map(|r| f64::from(v[i][r]) * at(r, column)).sum::<f64>() as f32));
        // (m * transpose(m))[column][row] = sum over k of m[row][k] * m[column][k].
        for column in 0..4 {
            for row in 0..4 {
                expected_m4.push((0..4).map(|k| at(row, k) * at(column, k)).sum::<f64>() as f32);
            }
        }
        let n = &m3[i];
        let at3 = |row: usize, column: usize| f64::from(n[column][row]);
        let determinant = at3(0, 0) * (at3(1, 1) * at3(2, 2) - at3(1, 2) * at3(2, 1))
            - at3(0, 1) * (at3(1, 0) * at3(2, 2) - at3(1, 2) * at3(2, 0))
            + at3(0, 2) * (at3(1, 0) * at3(2, 1) - at3(1, 1) * at3(2, 0));
        for column in 0..3 {
            for row in 0..3 {
                let product: f64 = (0..3).map(|k| at3(row, k) * at3(k, column)).sum();
                let identity = if row == column { determinant } else { 0.0 };
                expected_m3.push((product + identity) as f32);
            }
        }
    }
    let vectors: Vec<f32> = context
        .stream()
        .read_to_vec(&out_vectors)?
        .into_iter()
        .flatten()
        .collect();
    check_close(
        &vectors,
        &expected_vectors,
        1e-5,
        "m * v then v * m for mat4x4 m, 8 floats per element",
    )?;
    let products: Vec<f32> = context
        .stream()
        .read_to_vec(&out_m4)?
        .into_iter()
        .flat_map(|matrix| matrix.into_iter().flatten())
        .collect();
    check_close(
        &products,
        &expected_m4,
        1e-5,
        "m * transpose(m) for mat4x4 m, column-major",
    )?;
    // The padding float of each mat3x3 column is not compared: WGSL leaves it undefined.
    let squares: Vec<f32> = context
        .stream()
        .read_to_vec(&out_m3)?
        .into_iter()
        .flat_map(|matrix| matrix.into_iter().flat_map(|column| [column[0], column[1], column[2]]))
        .collect();
    check_close(
        &squares,
        &expected_m3,
        1e-5,
        "n * n + determinant(n) * I for mat3x3 n, column-major",
    )
}

const DETERMINANTS: &str = include_str!("matrix/determinants.wgsl");

/// The determinant of the leading `n` x `n` block of a column-major 4x4 matrix, in f64.
fn determinant_of(m: &[f32; 16], columns: &[usize], rows: &[usize]) -> f64 {
    if columns.len() == 1 {
        return f64::from(m[columns[0] * 4 + rows[0]]);
    }
    columns
        .iter()
        .enumerate()
        .map(|(k, &column)| {
            let minor: Vec<usize> = columns.iter().copied().filter(|&c| c != column).collect();
            let sign = if k % 2 == 0 { 1.0 } else { -1.0 };
            sign * f64::from(m[column * 4 + rows[0]]) * determinant_of(m, &minor, &rows[1..])
        })
        .sum()
}

fn matrix_determinants(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "determinants", DETERMINANTS, "determinants")?;
    let count = 40usize;
    // Entries in -3..=3: every product and sum of a 4x4 determinant stays far below 2^24, so
    // each is exact in f32 whatever the order.
    let entries: Vec<f32> = context
        .random_u32(77, count * 16)
        .iter()
        .map(|v| (v % 7) as f32 - 3.0)
        .collect();
    let out: Vec<[f32; 4]> = {
        let input = context.device().alloc_from(context.stream(), &entries)?;
        let output = context
            .device()
            .alloc_from(context.stream(), &vec![[0.0f32; 4]; count])?;
        context.stream().launch(
            &Launch::new(&kernel)
                .workgroups(groups_for(count, 16), 1, 1)
                .buffer(&input)
                .buffer(&output),
        )?;
        context.stream().read_to_vec(&output)?
    };
    let expected: Vec<[f32; 4]> = entries
        .chunks_exact(16)
        .map(|chunk| {
            let m: [f32; 16] = chunk.try_into().unwrap_or([0.0; 16]);
            let d4 = determinant_of(&m, &[0, 1, 2, 3], &[0, 1, 2, 3]) as f32;
            [
                determinant_of(&m, &[0, 1], &[0, 1]) as f32,
                determinant_of(&m, &[0, 1, 2], &[0, 1, 2]) as f32,
                d4,
                d4,
            ]
        })
        .collect();
    check_slice_eq(&out, &expected, "determinants of each matrix and of its transpose")
}
