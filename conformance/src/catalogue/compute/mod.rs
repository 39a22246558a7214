//! The `compute` area: whole kernels checked against Rust. Linear algebra, reductions with
//! barriers, atomics, WGSL's integer and float rules, vectors and matrices, control flow,
//! function calls, workgroup memory, and the optional f16, f64, i64 and 64-bit atomics.
//!
//! Integer results must match exactly. Float results match exactly where WGSL's accuracy
//! rules make them exact (small dyadic values, correctly rounded operations), and within a
//! stated tolerance elsewhere. Inputs come from buffers, so nothing folds at compile time.
//!
//! One module per area of test ids (`compute.AREA.case`); each kernel is a `.wgsl` file in the
//! area's folder, or one of `examples/kernels` where the test runs that very kernel.

// `f16`, `f64` and `i64` are named like the primitive types they test, which they hide in
// this module: spell those types `core::primitive::f64` here, or leave them to the areas.
mod atomics;
mod atomics64;
mod carried;
mod control_flow;
mod f16;
mod f64;
mod float;
mod functions;
mod i64;
mod int;
mod math;
mod matmul;
mod matrix;
mod reduce;
mod saxpy;
mod storage;
mod vector;
mod workgroup_memory;

use super::kernels::groups_for;
use crate::context::TestContext;
use crate::test_case::{check_eq, Requirement, TestCase, TestResult, Verdict};
use xhal::{Features, Launch};

const ATOMICS: Requirement = Requirement::features(Features::ATOMICS_32);
const F16: Requirement = Requirement::features(Features::F16);
const F64: Requirement = Requirement::features(Features::F64);
const I64: Requirement = Requirement::features(Features::I64);
const F64_AND_I64: Requirement = Requirement::features(Features(Features::F64.0 | Features::I64.0));
const ATOMICS_64: Requirement = Requirement::features(Features(Features::ATOMICS_64.0 | Features::I64.0));

pub(super) fn tests() -> Vec<TestCase> {
    let mut tests = Vec::new();
    tests.extend(saxpy::tests());
    tests.extend(matmul::tests());
    tests.extend(reduce::tests());
    tests.extend(atomics::tests());
    tests.extend(int::tests());
    tests.extend(float::tests());
    tests.extend(math::tests());
    tests.extend(vector::tests());
    tests.extend(matrix::tests());
    tests.extend(control_flow::tests());
    tests.extend(functions::tests());
    tests.extend(carried::tests());
    tests.extend(storage::tests());
    tests.extend(workgroup_memory::tests());
    tests.extend(f16::tests());
    tests.extend(f64::tests());
    tests.extend(i64::tests());
    tests.extend(atomics64::tests());
    tests
}

// ---- helpers -------------------------------------------------------------------------------

/// Seeded floats in [-1, 1), each a multiple of 2^-23, so exactly representable.
fn random_f32(context: &TestContext, seed: u64, count: usize) -> Vec<f32> {
    context
        .random_u32(seed, count)
        .into_iter()
        .map(|value| (value >> 8) as f32 / (1 << 23) as f32 - 1.0)
        .collect()
}

/// Seeded 64-bit words.
fn random_u64(context: &TestContext, seed: u64, count: usize) -> Vec<u64> {
    context
        .random_u32(seed, 2 * count)
        .chunks_exact(2)
        .map(|pair| (u64::from(pair[0]) << 32) | u64::from(pair[1]))
        .collect()
}

/// Runs a 1D kernel with 64-wide workgroups over `count` invocations, binding `inputs` and
/// then a fresh output of `outputs_per_invocation * count` words, and returns the output.
fn run_elementwise<T: bytemuck::Pod, O: bytemuck::Pod>(
    context: &TestContext,
    kernel: &xhal::Kernel,
    inputs: &[&[T]],
    count: usize,
    output_len: usize,
) -> Result<Vec<O>, Verdict> {
    let buffers = inputs
        .iter()
        .map(|data| context.device().alloc_from(context.stream(), data))
        .collect::<xhal::Result<Vec<_>>>()?;
    let output = context
        .device()
        .alloc_from(context.stream(), &vec![O::zeroed(); output_len])?;
    let launch = buffers
        .iter()
        .fold(
            Launch::new(kernel).workgroups(groups_for(count, 64), 1, 1),
            |launch, buffer| launch.buffer(buffer),
        )
        .buffer(&output);
    context.stream().launch(&launch)?;
    Ok(context.stream().read_to_vec(&output)?)
}

/// How a float result is held to its expected value.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Rule {
    /// The same value (+0 and -0 alike), or both NaN.
    Exact,
    /// IEEE 754 special values exactly: NaN for NaN, the infinity of the right sign, zero
    /// for zero (with its sign when `signed_zero`); finite results within 1e-6 relative,
    /// since WGSL lets +, -, * round either way and / and sqrt be off by a few ulp.
    Ieee { signed_zero: bool },
    /// Within this relative tolerance (NaN and infinities exactly).
    Relative(f32),
}

impl Rule {
    fn holds(self, actual: f32, expected: f32) -> bool {
        if expected.is_nan() {
            return actual.is_nan();
        }
        match self {
            Rule::Exact => actual == expected,
            Rule::Ieee { signed_zero } => {
                if expected.is_infinite() || expected == 0.0 {
                    actual == expected && (!signed_zero || actual.to_bits() == expected.to_bits())
                } else {
                    (actual - expected).abs() <= 1e-6 * expected.abs()
                }
            }
            Rule::Relative(tolerance) => {
                if expected.is_infinite() {
                    actual == expected
                } else {
                    (actual - expected).abs() <= tolerance * expected.abs()
                }
            }
        }
    }
}

/// One expected float result, how it is compared, and what it is.
struct Expected {
    value: f32,
    rule: Rule,
    label: String,
}

/// Fails on the first result that breaks its rule, naming it.
fn check_floats(actual: &[f32], expected: &[Expected], what: &str) -> TestResult {
    check_eq(actual.len(), expected.len(), &format!("{what}: number of results"))?;
    for (index, (a, e)) in actual.iter().zip(expected).enumerate() {
        if !e.rule.holds(*a, e.value) {
            return Err(Verdict::mismatch(
                format!("{what}: {} (result {index}, compared {:?})", e.label, e.rule),
                format!("{:?} ({:#010x})", e.value, e.value.to_bits()),
                format!("{a:?} ({:#010x})", a.to_bits()),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    // `super::`: the modules `f16`, `f64` and `i64` are named like the primitive types.
    use super::atomics64::ATOMICS_64_SOURCE;
    use super::f16::{F16_ARITHMETIC, F16_STORAGE};
    use super::f64::{F64_ACCUMULATION, F64_ARITHMETIC, F64_WORDS};
    use super::i64::I64_ARITHMETIC;

    /// Kernels the CPU backend skips must still be valid for a device that claims their
    /// features: they parse, validate, reflect, need exactly those features, and translate
    /// to SPIR-V for Vulkan devices.
    #[test]
    fn kernels_for_optional_features_compile_for_a_device_that_has_them() {
        let cases = [
            (ATOMICS_64_SOURCE, ATOMICS_64.features),
            (F16_ARITHMETIC, F16.features),
            (F16_STORAGE, F16.features),
            (F64_ARITHMETIC, F64.features),
            (F64_ACCUMULATION, F64.features),
            (F64_WORDS, F64_AND_I64.features),
            (I64_ARITHMETIC, I64.features),
        ];
        for (source, features) in cases {
            let module = xhal::kernel::parse_wgsl(source).unwrap_or_else(|error| panic!("{error}"));
            assert_eq!(module.required_features(), features.0, "{source}");
            for target in [xhal::kernel::Target::SpirvShader, xhal::kernel::Target::Wgsl] {
                xhal::kernel::translate(source, target).unwrap_or_else(|error| panic!("{target:?}: {error}\n{source}"));
            }
        }
    }
}
