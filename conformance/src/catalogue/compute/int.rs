//! `compute.int`: WGSL's integer rules: division, shifts, wrapping and the bit built-ins.

use super::run_elementwise;
use crate::catalogue::kernels::kernel_of;
use crate::catalogue::test_case;
use crate::context::TestContext;
use crate::test_case::{check_slice_eq, TestCase, TestResult};

pub(super) fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            "compute.int.division",
            "i32 and u32 division and remainder follow WGSL: by zero gives the dividend and 0, MIN / -1 gives MIN",
            int_division
        ),
        test_case!(
            "compute.int.shifts",
            "shifts take their amount modulo 32, and >> on i32 copies the sign bit",
            int_shifts
        ),
        test_case!(
            "compute.int.wrapping",
            "i32 and u32 +, -, *, negation, abs(MIN) and increments wrap around",
            int_wrapping
        ),
        test_case!(
            "compute.int.bit_builtins",
            "countOneBits, reverseBits, firstLeadingBit, firstTrailingBit, countLeading/TrailingZeros, extractBits and insertBits match WGSL's definitions",
            int_bit_builtins
        ),
    ]
}

/// WGSL's integer rules, from the specification ("Arithmetic Expressions", "Bit
/// Expressions" and the built-in functions).
mod wgsl_int {
    /// `e1 / e2` on i32: by zero gives e1; MIN / -1 gives MIN.
    pub fn div_i32(x: i32, y: i32) -> i32 {
        if y == 0 {
            x
        } else {
            x.wrapping_div(y)
        }
    }

    /// `e1 % e2` on i32: by zero gives 0; MIN % -1 gives 0; else the sign of e1.
    pub fn rem_i32(x: i32, y: i32) -> i32 {
        if y == 0 {
            0
        } else {
            x.wrapping_rem(y)
        }
    }

    pub fn div_u32(x: u32, y: u32) -> u32 {
        x.checked_div(y).unwrap_or(x)
    }

    pub fn rem_u32(x: u32, y: u32) -> u32 {
        x.checked_rem(y).unwrap_or(0)
    }

    pub fn first_leading_bit_u32(x: u32) -> u32 {
        if x == 0 {
            u32::MAX
        } else {
            31 - x.leading_zeros()
        }
    }

    /// For i32: the most significant bit that differs from the sign bit; -1 for 0 and -1.
    pub fn first_leading_bit_i32(x: i32) -> i32 {
        let magnitude = if x < 0 { !x } else { x } as u32;
        if magnitude == 0 {
            -1
        } else {
            31 - magnitude.leading_zeros() as i32
        }
    }

    pub fn first_trailing_bit(x: u32) -> u32 {
        if x == 0 {
            u32::MAX
        } else {
            x.trailing_zeros()
        }
    }

    /// `extractBits` on u32 for offset + count <= 32.
    pub fn extract_bits_u32(e: u32, offset: u32, count: u32) -> u32 {
        if count == 0 {
            0
        } else {
            ((u64::from(e) >> offset) & ((1u64 << count) - 1)) as u32
        }
    }

    /// `extractBits` on i32: the field sign-extended from its top bit.
    pub fn extract_bits_i32(e: i32, offset: u32, count: u32) -> i32 {
        if count == 0 {
            0
        } else {
            let field = extract_bits_u32(e as u32, offset, count);
            ((field << (32 - count)) as i32) >> (32 - count)
        }
    }

    pub fn insert_bits(e: u32, newbits: u32, offset: u32, count: u32) -> u32 {
        let mask = (((1u64 << count) - 1) << offset) as u32;
        (e & !mask) | ((newbits << offset) & mask)
    }
}

/// Operand pairs for the integer tests: the edge cases first, then random pairs (half with a
/// small second operand, so division and shifts see ordinary values too).
fn int_pairs(context: &TestContext, seed: u64) -> (Vec<u32>, Vec<u32>) {
    let min = i32::MIN as u32;
    let minus = |v: i32| v as u32;
    let mut pairs = vec![
        (7, 2),
        (minus(-7), 2),
        (7, minus(-2)),
        (minus(-7), minus(-2)),
        (5, 0),
        (0, 0),
        (minus(-5), 0),
        (min, 0),
        (u32::MAX, 0),
        (min, minus(-1)),
        (min, 1),
        (i32::MAX as u32, minus(-1)),
        (min, min),
        (u32::MAX, 0x1_0000),
        (0x8000_0001, 0x7fff_ffff),
        (0, 5),
        (100, 7),
        (123_456_789, 1000),
        (u32::MAX, u32::MAX),
        (0xffff_0000, 0xffff),
    ];
    let random = context.random_u32(seed, 88);
    for (k, chunk) in random.chunks_exact(2).enumerate() {
        let second = if k % 2 == 0 { chunk[1] % 100 } else { chunk[1] };
        pairs.push((chunk[0], second));
    }
    pairs.into_iter().unzip()
}

const INT_DIVISION: &str = include_str!("int/division.wgsl");

fn int_division(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "integer division", INT_DIVISION, "division")?;
    let (a, b) = int_pairs(context, 11);
    let out: Vec<u32> = run_elementwise(context, &kernel, &[&a, &b], a.len(), 4 * a.len())?;
    for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
        let expected = [
            wgsl_int::div_i32(x as i32, y as i32) as u32,
            wgsl_int::rem_i32(x as i32, y as i32) as u32,
            wgsl_int::div_u32(x, y),
            wgsl_int::rem_u32(x, y),
        ];
        check_slice_eq(
            &out[4 * i..4 * i + 4],
            &expected,
            &format!(
                "i32 /, i32 %, u32 /, u32 % of {x:#x} ({}) and {y:#x} ({})",
                x as i32, y as i32
            ),
        )?;
    }
    Ok(())
}

const INT_SHIFTS: &str = include_str!("int/shifts.wgsl");

fn int_shifts(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "integer shifts", INT_SHIFTS, "shifts")?;
    let mut amounts = vec![0u32, 1, 31, 32, 33, 63, 64, 100, u32::MAX, 0x8000_0000, 16, 47];
    let mut values = vec![0x8000_0001u32, u32::MAX, 1, 0x7fff_ffff, 0xdead_beef, 0x8000_0000];
    let random = context.random_u32(12, 104);
    amounts.extend(random[..52].iter().map(|v| v % 70));
    values.extend(&random[52..]);
    values.truncate(amounts.len());
    amounts.truncate(values.len());
    let out: Vec<u32> = run_elementwise(context, &kernel, &[&values, &amounts], values.len(), 4 * values.len())?;
    for (i, (&x, &s)) in values.iter().zip(&amounts).enumerate() {
        let amount = s % 32;
        let expected = [x << amount, x >> amount, x << amount, ((x as i32) >> amount) as u32];
        check_slice_eq(
            &out[4 * i..4 * i + 4],
            &expected,
            &format!("u32 <<, u32 >>, i32 <<, i32 >> of {x:#x} by {s}"),
        )?;
    }
    Ok(())
}

const INT_WRAPPING: &str = include_str!("int/wrapping.wgsl");

fn int_wrapping(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "integer wrapping", INT_WRAPPING, "wrapping")?;
    let (a, b) = int_pairs(context, 13);
    let out: Vec<u32> = run_elementwise(context, &kernel, &[&a, &b], a.len(), 8 * a.len())?;
    for (i, (&ux, &uy)) in a.iter().zip(&b).enumerate() {
        let (x, y) = (ux as i32, uy as i32);
        let expected = [
            x.wrapping_add(y) as u32,
            x.wrapping_sub(y) as u32,
            x.wrapping_mul(y) as u32,
            x.wrapping_neg() as u32,
            x.wrapping_abs() as u32,
            ux.wrapping_mul(uy).wrapping_add(u32::MAX),
            x.wrapping_add(1).wrapping_add(y).wrapping_mul(3) as u32,
            ux.wrapping_sub(1),
        ];
        check_slice_eq(
            &out[8 * i..8 * i + 8],
            &expected,
            &format!("x+y, x-y, x*y, -x, abs(x), u32 x*y-1, (x+1+y)*3, u32 x-1 for x = {x}, y = {y}"),
        )?;
    }
    Ok(())
}

const BIT_BUILTINS: &str = include_str!("int/bit_builtins.wgsl");

fn int_bit_builtins(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "bit built-ins", BIT_BUILTINS, "bits")?;
    let mut values = vec![
        0u32,
        1,
        u32::MAX,
        0x8000_0000,
        0x7fff_ffff,
        0xffff_fffe,
        0x0001_0000,
        0xf0f0_f0f0,
    ];
    let mut fields = vec![0u32, 0x1f20, 0x0800, 0x201f, 0x0105, 0x1010, 7, 0xff03];
    let random = context.random_u32(14, 112);
    values.extend(&random[..56]);
    fields.extend(&random[56..]);
    let out: Vec<u32> = run_elementwise(context, &kernel, &[&values, &fields], values.len(), 10 * values.len())?;
    for (i, (&x, &y)) in values.iter().zip(&fields).enumerate() {
        let offset = y % 32;
        let count = (y >> 8) % (33 - offset);
        let expected = [
            x.count_ones(),
            x.reverse_bits(),
            wgsl_int::first_leading_bit_u32(x),
            wgsl_int::first_leading_bit_i32(x as i32) as u32,
            wgsl_int::first_trailing_bit(x),
            x.leading_zeros(),
            x.trailing_zeros(),
            wgsl_int::extract_bits_u32(x, offset, count),
            wgsl_int::extract_bits_i32(x as i32, offset, count) as u32,
            wgsl_int::insert_bits(x, y, offset, count),
        ];
        check_slice_eq(
            &out[10 * i..10 * i + 10],
            &expected,
            &format!(
                "countOneBits, reverseBits, firstLeadingBit u32/i32, firstTrailingBit, countLeadingZeros, \
                 countTrailingZeros, extractBits u32/i32, insertBits of {x:#010x} (field offset {offset}, count {count}, new bits {y:#x})"
            ),
        )?;
    }
    Ok(())
}
