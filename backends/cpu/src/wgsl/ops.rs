//! WGSL's scalar operations on raw lane words, with the language's rules.
//!
//! Every 32-bit value lives in a `u32` lane word: `i32` as its two's-complement bits, `f32`
//! (and `f16`, widened) as its IEEE bits, `bool` as 0 or 1. The per-operation functions here
//! are total (no panics, no UB) on any input bits, because the interpreter evaluates pure
//! operations on inactive lanes too, whose words may hold anything.
//!
//! The operation enums ([`Un32`], [`Bin32`], [`Tern32`]) are generated together with a
//! column loop per variant, so each loop is monomorphised around one inlined function and
//! the compiler can vectorise it: the interpreter pays dispatch once per instruction and
//! workgroup, then runs a tight loop over the lanes.

use super::half::{f16_bits_to_f32, f32_to_f16_bits};
use std::cell::Cell;

#[inline(always)]
fn f(x: u32) -> f32 {
    f32::from_bits(x)
}

#[inline(always)]
fn fb(x: f32) -> u32 {
    x.to_bits()
}

#[inline(always)]
fn s(x: u32) -> i32 {
    x as i32
}

#[inline(always)]
fn b(x: bool) -> u32 {
    u32::from(x)
}

/// Declares an operation enum whose variants each name a scalar function, plus:
/// `func()` (the function, for constant folding), `run()` (the column loop) and
/// `run_in_place()` (the same where an operand may be the destination).
macro_rules! operations {
    ($(#[$doc:meta])* $name:ident, $lanes:ident, $args:ty, $cells:ident, $cell_args:ty, $func_ty:ty,
     { $($variant:ident => $func:path,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub(crate) enum $name {
            $(#[allow(missing_docs)] $variant,)*
        }

        impl $name {
            /// The scalar function, for constant folding.
            #[allow(dead_code)]
            pub(crate) fn func(self) -> $func_ty {
                match self {
                    $($name::$variant => $func,)*
                }
            }

            /// Applies the operation to every lane: `dst[l] = op(args[l]...)`.
            #[inline(always)]
            pub(crate) fn run(self, dst: &mut [u32], args: $args) {
                match self {
                    $($name::$variant => $lanes(dst, args, $func),)*
                }
            }

            /// As `run`, on columns of one register file that may overlap lane for lane.
            #[inline(always)]
            pub(crate) fn run_in_place(self, dst: &[Cell<u32>], args: $cell_args) {
                match self {
                    $($name::$variant => $cells(dst, args, $func),)*
                }
            }
        }
    };
}

#[inline(always)]
fn lanes1(dst: &mut [u32], [a]: [&[u32]; 1], f: impl Fn(u32) -> u32) {
    let n = dst.len().min(a.len());
    for (d, &x) in dst[..n].iter_mut().zip(&a[..n]) {
        *d = f(x);
    }
}

#[inline(always)]
fn lanes2(dst: &mut [u32], [a, b]: [&[u32]; 2], f: impl Fn(u32, u32) -> u32) {
    let n = dst.len().min(a.len()).min(b.len());
    let (dst, a, b) = (&mut dst[..n], &a[..n], &b[..n]);
    for i in 0..n {
        dst[i] = f(a[i], b[i]);
    }
}

#[inline(always)]
fn lanes3(dst: &mut [u32], [a, b, c]: [&[u32]; 3], f: impl Fn(u32, u32, u32) -> u32) {
    let n = dst.len().min(a.len()).min(b.len()).min(c.len());
    let (dst, a, b, c) = (&mut dst[..n], &a[..n], &b[..n], &c[..n]);
    for i in 0..n {
        dst[i] = f(a[i], b[i], c[i]);
    }
}

/// Lanes per block of the in-place loops: every operand word of a block is read before any
/// result is written, so a destination that is also an operand is read before it changes.
/// (Plain loops over the block rather than `array::from_fn`, which is not always inlined
/// into the AVX2 copy of the interpreter.)
const BLOCK: usize = 8;

#[inline(always)]
fn cells1(dst: &[Cell<u32>], [a]: [&[Cell<u32>]; 1], f: impl Fn(u32) -> u32) {
    let n = dst.len().min(a.len());
    let (d_blocks, d_rest) = dst[..n].as_chunks::<BLOCK>();
    let (a_blocks, a_rest) = a[..n].as_chunks::<BLOCK>();
    for (d, a) in d_blocks.iter().zip(a_blocks) {
        let mut v = [0u32; BLOCK];
        for (v, a) in v.iter_mut().zip(a) {
            *v = f(a.get());
        }
        for (d, v) in d.iter().zip(v) {
            d.set(v);
        }
    }
    for (d, a) in d_rest.iter().zip(a_rest) {
        d.set(f(a.get()));
    }
}

#[inline(always)]
fn cells2(dst: &[Cell<u32>], [a, b]: [&[Cell<u32>]; 2], f: impl Fn(u32, u32) -> u32) {
    let n = dst.len().min(a.len()).min(b.len());
    let (d_blocks, d_rest) = dst[..n].as_chunks::<BLOCK>();
    let (a_blocks, a_rest) = a[..n].as_chunks::<BLOCK>();
    let (b_blocks, b_rest) = b[..n].as_chunks::<BLOCK>();
    for ((d, a), b) in d_blocks.iter().zip(a_blocks).zip(b_blocks) {
        let mut v = [0u32; BLOCK];
        for ((v, a), b) in v.iter_mut().zip(a).zip(b) {
            *v = f(a.get(), b.get());
        }
        for (d, v) in d.iter().zip(v) {
            d.set(v);
        }
    }
    for ((d, a), b) in d_rest.iter().zip(a_rest).zip(b_rest) {
        d.set(f(a.get(), b.get()));
    }
}

#[inline(always)]
fn cells3(dst: &[Cell<u32>], [a, b, c]: [&[Cell<u32>]; 3], f: impl Fn(u32, u32, u32) -> u32) {
    let n = dst.len().min(a.len()).min(b.len()).min(c.len());
    let (d_blocks, d_rest) = dst[..n].as_chunks::<BLOCK>();
    let (a_blocks, a_rest) = a[..n].as_chunks::<BLOCK>();
    let (b_blocks, b_rest) = b[..n].as_chunks::<BLOCK>();
    let (c_blocks, c_rest) = c[..n].as_chunks::<BLOCK>();
    for (((d, a), b), c) in d_blocks.iter().zip(a_blocks).zip(b_blocks).zip(c_blocks) {
        let mut v = [0u32; BLOCK];
        for (((v, a), b), c) in v.iter_mut().zip(a).zip(b).zip(c) {
            *v = f(a.get(), b.get(), c.get());
        }
        for (d, v) in d.iter().zip(v) {
            d.set(v);
        }
    }
    for (((d, a), b), c) in d_rest.iter().zip(a_rest).zip(b_rest).zip(c_rest) {
        d.set(f(a.get(), b.get(), c.get()));
    }
}

operations!(
    /// One-operand 32-bit operations.
    Un32, lanes1, [&[u32]; 1], cells1, [&[Cell<u32>]; 1], fn(u32) -> u32, {
        NegF => neg_f,
        NegI => neg_i,
        NotB => not_b,
        BitNot => bit_not,
        AbsF => abs_f,
        AbsI => abs_i,
        SignF => sign_f,
        SignI => sign_i,
        Sqrt => sqrt_f,
        InverseSqrt => inverse_sqrt_f,
        Sin => sin_f,
        Cos => cos_f,
        Tan => tan_f,
        Asin => asin_f,
        Acos => acos_f,
        Atan => atan_f,
        Sinh => sinh_f,
        Cosh => cosh_f,
        Tanh => tanh_f,
        Asinh => asinh_f,
        Acosh => acosh_f,
        Atanh => atanh_f,
        Exp => exp_f,
        Exp2 => exp2_f,
        Log => log_f,
        Log2 => log2_f,
        Floor => floor_f,
        Ceil => ceil_f,
        Round => round_f,
        Trunc => trunc_f,
        Fract => fract_f,
        Degrees => degrees_f,
        Radians => radians_f,
        Saturate => saturate_f,
        QuantizeF16 => quantize_f16,
        FrexpFract => frexp_fract,
        FrexpExp => frexp_exp,
        CountOneBits => count_one_bits,
        CountLeadingZeros => count_leading_zeros,
        CountTrailingZeros => count_trailing_zeros,
        FirstLeadingBitU => first_leading_bit_u,
        FirstLeadingBitI => first_leading_bit_i,
        FirstTrailingBit => first_trailing_bit,
        ReverseBits => reverse_bits,
        F32ToI32 => f32_to_i32,
        F32ToU32 => f32_to_u32,
        I32ToF32 => i32_to_f32,
        U32ToF32 => u32_to_f32,
        BoolToF32 => bool_to_f32,
        F32ToBool => f32_to_bool,
        IntToBool => int_to_bool,
        IsNan => is_nan,
        IsInf => is_inf,
    }
);

operations!(
    /// Two-operand 32-bit operations.
    Bin32, lanes2, [&[u32]; 2], cells2, [&[Cell<u32>]; 2], fn(u32, u32) -> u32, {
        AddF => add_f,
        SubF => sub_f,
        MulF => mul_f,
        DivF => div_f,
        RemF => rem_f,
        AddI => add_i,
        SubI => sub_i,
        MulI => mul_i,
        DivI => div_i,
        DivU => div_u,
        RemI => rem_i,
        RemU => rem_u,
        EqF => eq_f,
        NeF => ne_f,
        LtF => lt_f,
        LeF => le_f,
        GtF => gt_f,
        GeF => ge_f,
        Eq => eq_i,
        Ne => ne_i,
        LtI => lt_i,
        LeI => le_i,
        GtI => gt_i,
        GeI => ge_i,
        LtU => lt_u,
        LeU => le_u,
        GtU => gt_u,
        GeU => ge_u,
        And => and,
        Or => or,
        Xor => xor,
        Shl => shl,
        ShrI => shr_i,
        ShrU => shr_u,
        MinF => min_f,
        MaxF => max_f,
        MinI => min_i,
        MaxI => max_i,
        MinU => min_u,
        MaxU => max_u,
        Atan2 => atan2_f,
        Pow => pow_f,
        Step => step_f,
        Ldexp => ldexp_f,
        Dot4I8Packed => dot4_i8_packed,
        Dot4U8Packed => dot4_u8_packed,
        Pack2x16Snorm => pack2x16_snorm,
        Pack2x16Unorm => pack2x16_unorm,
        Pack2x16Float => pack2x16_float,
    }
);

operations!(
    /// Three-operand 32-bit operations.
    Tern32, lanes3, [&[u32]; 3], cells3, [&[Cell<u32>]; 3], fn(u32, u32, u32) -> u32, {
        Select => select,
        Fma => fma_f,
        MulAddF => mul_add_f,
        Mix => mix_f,
        ClampF => clamp_f,
        ClampI => clamp_i,
        ClampU => clamp_u,
        SmoothStep => smooth_step_f,
        ExtractBitsI => extract_bits_i,
        ExtractBitsU => extract_bits_u,
    }
);

// ---- one operand -------------------------------------------------------------------------

fn neg_f(a: u32) -> u32 {
    fb(-f(a))
}
fn neg_i(a: u32) -> u32 {
    a.wrapping_neg()
}
fn not_b(a: u32) -> u32 {
    b(a == 0)
}
fn bit_not(a: u32) -> u32 {
    !a
}
fn abs_f(a: u32) -> u32 {
    a & 0x7fff_ffff
}
fn abs_i(a: u32) -> u32 {
    s(a).wrapping_abs() as u32
}
fn sign_f(a: u32) -> u32 {
    let x = f(a);
    fb(if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        0.0
    })
}
fn sign_i(a: u32) -> u32 {
    s(a).signum() as u32
}
fn sqrt_f(a: u32) -> u32 {
    fb(f(a).sqrt())
}
fn inverse_sqrt_f(a: u32) -> u32 {
    fb(1.0 / f(a).sqrt())
}
fn sin_f(a: u32) -> u32 {
    fb(f(a).sin())
}
fn cos_f(a: u32) -> u32 {
    fb(f(a).cos())
}
fn tan_f(a: u32) -> u32 {
    fb(f(a).tan())
}
fn asin_f(a: u32) -> u32 {
    fb(f(a).asin())
}
fn acos_f(a: u32) -> u32 {
    fb(f(a).acos())
}
fn atan_f(a: u32) -> u32 {
    fb(f(a).atan())
}
fn sinh_f(a: u32) -> u32 {
    fb(f(a).sinh())
}
fn cosh_f(a: u32) -> u32 {
    fb(f(a).cosh())
}
fn tanh_f(a: u32) -> u32 {
    fb(f(a).tanh())
}
fn asinh_f(a: u32) -> u32 {
    fb(f(a).asinh())
}
fn acosh_f(a: u32) -> u32 {
    fb(f(a).acosh())
}
fn atanh_f(a: u32) -> u32 {
    fb(f(a).atanh())
}
fn exp_f(a: u32) -> u32 {
    fb(f(a).exp())
}
fn exp2_f(a: u32) -> u32 {
    fb(f(a).exp2())
}
fn log_f(a: u32) -> u32 {
    fb(f(a).ln())
}
fn log2_f(a: u32) -> u32 {
    fb(f(a).log2())
}
fn floor_f(a: u32) -> u32 {
    fb(f(a).floor())
}
fn ceil_f(a: u32) -> u32 {
    fb(f(a).ceil())
}
/// Ties to even, as WGSL's `round` requires.
fn round_f(a: u32) -> u32 {
    fb(f(a).round_ties_even())
}
fn trunc_f(a: u32) -> u32 {
    fb(f(a).trunc())
}
/// `e - floor(e)`, WGSL's definition.
fn fract_f(a: u32) -> u32 {
    let x = f(a);
    fb(x - x.floor())
}
fn degrees_f(a: u32) -> u32 {
    fb(f(a) * (180.0 / std::f32::consts::PI))
}
fn radians_f(a: u32) -> u32 {
    fb(f(a) * (std::f32::consts::PI / 180.0))
}
/// `clamp(e, 0, 1)` by WGSL's min/max rules, under which NaN gives 0.
fn saturate_f(a: u32) -> u32 {
    let x = f(a);
    fb(if x >= 1.0 {
        1.0
    } else if x > 0.0 {
        x
    } else {
        0.0
    })
}
fn quantize_f16(a: u32) -> u32 {
    fb(f16_bits_to_f32(f32_to_f16_bits(f(a))))
}
/// The significand of `frexp`: magnitude in [0.5, 1), the sign of `e`; 0 for 0.
fn frexp_fract(a: u32) -> u32 {
    fb(frexp(f(a)).0)
}
/// The exponent of `frexp` (an `i32`).
fn frexp_exp(a: u32) -> u32 {
    frexp(f(a)).1 as u32
}

pub(crate) fn frexp(x: f32) -> (f32, i32) {
    if x == 0.0 || !x.is_finite() {
        return (x, 0);
    }
    let (x, bias) = if x.abs() < f32::MIN_POSITIVE {
        (x * 2f32.powi(64), -64)
    } else {
        (x, 0)
    };
    let bits = x.to_bits();
    let exponent = ((bits >> 23) & 0xff) as i32 - 126;
    let fraction = f32::from_bits((bits & 0x807f_ffff) | (126 << 23));
    (fraction, exponent + bias)
}

fn count_one_bits(a: u32) -> u32 {
    a.count_ones()
}
fn count_leading_zeros(a: u32) -> u32 {
    a.leading_zeros()
}
fn count_trailing_zeros(a: u32) -> u32 {
    a.trailing_zeros()
}
fn first_leading_bit_u(a: u32) -> u32 {
    if a == 0 {
        u32::MAX
    } else {
        31 - a.leading_zeros()
    }
}
/// For signed values the first bit that differs from the sign bit; -1 for 0 and -1.
fn first_leading_bit_i(a: u32) -> u32 {
    let v = if s(a) < 0 { !a } else { a };
    first_leading_bit_u(v)
}
fn first_trailing_bit(a: u32) -> u32 {
    if a == 0 {
        u32::MAX
    } else {
        a.trailing_zeros()
    }
}
fn reverse_bits(a: u32) -> u32 {
    a.reverse_bits()
}
/// WGSL: truncate, then clamp to the largest value both types represent: 2^31 - 128 (the
/// largest `f32` below 2^31), not `i32::MAX`. NaN gives 0 (indeterminate in WGSL; xhal's
/// choice on every backend).
fn f32_to_i32(a: u32) -> u32 {
    let x = f(a);
    // `as` maps NaN to 0 and saturates below; the comparison is false for NaN.
    (if x >= 2_147_483_520.0 { 2_147_483_520 } else { x as i32 }) as u32
}
/// As [`f32_to_i32`], up to 2^32 - 256.
fn f32_to_u32(a: u32) -> u32 {
    let x = f(a);
    if x >= 4_294_967_040.0 {
        4_294_967_040
    } else {
        x as u32
    }
}
fn i32_to_f32(a: u32) -> u32 {
    fb(s(a) as f32)
}
fn u32_to_f32(a: u32) -> u32 {
    fb(a as f32)
}
fn bool_to_f32(a: u32) -> u32 {
    fb(if a != 0 { 1.0 } else { 0.0 })
}
fn f32_to_bool(a: u32) -> u32 {
    b(f(a) != 0.0)
}
fn int_to_bool(a: u32) -> u32 {
    b(a != 0)
}
fn is_nan(a: u32) -> u32 {
    b(f(a).is_nan())
}
fn is_inf(a: u32) -> u32 {
    b(f(a).is_infinite())
}

// ---- two operands ------------------------------------------------------------------------

fn add_f(a: u32, c: u32) -> u32 {
    fb(f(a) + f(c))
}
fn sub_f(a: u32, c: u32) -> u32 {
    fb(f(a) - f(c))
}
fn mul_f(a: u32, c: u32) -> u32 {
    fb(f(a) * f(c))
}
fn div_f(a: u32, c: u32) -> u32 {
    fb(f(a) / f(c))
}
/// WGSL: `e1 - e2 * trunc(e1 / e2)`.
fn rem_f(a: u32, c: u32) -> u32 {
    let (x, y) = (f(a), f(c));
    fb(x - y * (x / y).trunc())
}
fn add_i(a: u32, c: u32) -> u32 {
    a.wrapping_add(c)
}
fn sub_i(a: u32, c: u32) -> u32 {
    a.wrapping_sub(c)
}
fn mul_i(a: u32, c: u32) -> u32 {
    a.wrapping_mul(c)
}
/// WGSL: division by zero, and `MIN / -1`, give `e1`.
fn div_i(a: u32, c: u32) -> u32 {
    let (x, y) = (s(a), s(c));
    if y == 0 || (x == i32::MIN && y == -1) {
        a
    } else {
        (x / y) as u32
    }
}
fn div_u(a: u32, c: u32) -> u32 {
    a.checked_div(c).unwrap_or(a)
}
/// WGSL: remainder by zero, and `MIN % -1`, give 0.
fn rem_i(a: u32, c: u32) -> u32 {
    let (x, y) = (s(a), s(c));
    if y == 0 || (x == i32::MIN && y == -1) {
        0
    } else {
        (x % y) as u32
    }
}
fn rem_u(a: u32, c: u32) -> u32 {
    a.checked_rem(c).unwrap_or(0)
}
fn eq_f(a: u32, c: u32) -> u32 {
    b(f(a) == f(c))
}
fn ne_f(a: u32, c: u32) -> u32 {
    b(f(a) != f(c))
}
fn lt_f(a: u32, c: u32) -> u32 {
    b(f(a) < f(c))
}
fn le_f(a: u32, c: u32) -> u32 {
    b(f(a) <= f(c))
}
fn gt_f(a: u32, c: u32) -> u32 {
    b(f(a) > f(c))
}
fn ge_f(a: u32, c: u32) -> u32 {
    b(f(a) >= f(c))
}
fn eq_i(a: u32, c: u32) -> u32 {
    b(a == c)
}
fn ne_i(a: u32, c: u32) -> u32 {
    b(a != c)
}
fn lt_i(a: u32, c: u32) -> u32 {
    b(s(a) < s(c))
}
fn le_i(a: u32, c: u32) -> u32 {
    b(s(a) <= s(c))
}
fn gt_i(a: u32, c: u32) -> u32 {
    b(s(a) > s(c))
}
fn ge_i(a: u32, c: u32) -> u32 {
    b(s(a) >= s(c))
}
fn lt_u(a: u32, c: u32) -> u32 {
    b(a < c)
}
fn le_u(a: u32, c: u32) -> u32 {
    b(a <= c)
}
fn gt_u(a: u32, c: u32) -> u32 {
    b(a > c)
}
fn ge_u(a: u32, c: u32) -> u32 {
    b(a >= c)
}
fn and(a: u32, c: u32) -> u32 {
    a & c
}
fn or(a: u32, c: u32) -> u32 {
    a | c
}
fn xor(a: u32, c: u32) -> u32 {
    a ^ c
}
/// Shift amounts are taken modulo the bit width, as WGSL specifies for run-time shifts.
fn shl(a: u32, c: u32) -> u32 {
    a << (c & 31)
}
fn shr_i(a: u32, c: u32) -> u32 {
    (s(a) >> (c & 31)) as u32
}
fn shr_u(a: u32, c: u32) -> u32 {
    a >> (c & 31)
}
/// WGSL: when one operand is NaN the other is returned, which `f32::min` does.
fn min_f(a: u32, c: u32) -> u32 {
    fb(f(a).min(f(c)))
}
fn max_f(a: u32, c: u32) -> u32 {
    fb(f(a).max(f(c)))
}
fn min_i(a: u32, c: u32) -> u32 {
    s(a).min(s(c)) as u32
}
fn max_i(a: u32, c: u32) -> u32 {
    s(a).max(s(c)) as u32
}
fn min_u(a: u32, c: u32) -> u32 {
    a.min(c)
}
fn max_u(a: u32, c: u32) -> u32 {
    a.max(c)
}
fn atan2_f(a: u32, c: u32) -> u32 {
    fb(f(a).atan2(f(c)))
}
fn pow_f(a: u32, c: u32) -> u32 {
    fb(f(a).powf(f(c)))
}
/// `step(edge, x)`: 1.0 when `edge <= x`.
fn step_f(a: u32, c: u32) -> u32 {
    fb(if f(a) <= f(c) { 1.0 } else { 0.0 })
}
/// `e1 * 2^e2`, rounded once: the product is exact in f64 for every f32 and the exponents
/// that matter (anything past ±400 is already 0 or infinity).
fn ldexp_f(a: u32, c: u32) -> u32 {
    let exponent = s(c).clamp(-400, 400);
    fb((f64::from(f(a)) * 2f64.powi(exponent)) as f32)
}
fn dot4_i8_packed(a: u32, c: u32) -> u32 {
    let mut sum = 0i32;
    for shift in [0, 8, 16, 24] {
        let x = i32::from((a >> shift) as u8 as i8);
        let y = i32::from((c >> shift) as u8 as i8);
        sum = sum.wrapping_add(x * y);
    }
    sum as u32
}
fn dot4_u8_packed(a: u32, c: u32) -> u32 {
    let mut sum = 0u32;
    for shift in [0, 8, 16, 24] {
        sum = sum.wrapping_add(((a >> shift) & 0xff) * ((c >> shift) & 0xff));
    }
    sum
}
fn snorm16(x: u32) -> u32 {
    u32::from(((0.5 + 32767.0 * f(x).clamp(-1.0, 1.0)).floor() as i32) as i16 as u16)
}
fn unorm16(x: u32) -> u32 {
    u32::from((0.5 + 65535.0 * f(x).clamp(0.0, 1.0)).floor() as u16)
}
fn pack2x16_snorm(a: u32, c: u32) -> u32 {
    snorm16(a) | (snorm16(c) << 16)
}
fn pack2x16_unorm(a: u32, c: u32) -> u32 {
    unorm16(a) | (unorm16(c) << 16)
}
fn pack2x16_float(a: u32, c: u32) -> u32 {
    u32::from(f32_to_f16_bits(f(a))) | (u32::from(f32_to_f16_bits(f(c))) << 16)
}

// ---- three operands ----------------------------------------------------------------------

/// `select` with the condition first: `cond ? a : c`.
fn select(cond: u32, a: u32, c: u32) -> u32 {
    if cond != 0 {
        a
    } else {
        c
    }
}
fn fma_f(a: u32, c: u32, d: u32) -> u32 {
    fb(f(a).mul_add(f(c), f(d)))
}
/// `e1 * e2 + e3` rounded twice, as the separate WGSL operations are: a multiplication
/// whose product only an addition reads, fused into one pass.
fn mul_add_f(a: u32, c: u32, d: u32) -> u32 {
    fb(f(d) + f(a) * f(c))
}
/// WGSL: `e1 * (1 - e3) + e2 * e3`.
fn mix_f(a: u32, c: u32, t: u32) -> u32 {
    let t = f(t);
    fb(f(a) * (1.0 - t) + f(c) * t)
}
/// WGSL: `min(max(e, low), high)`.
fn clamp_f(e: u32, low: u32, high: u32) -> u32 {
    fb(f(e).max(f(low)).min(f(high)))
}
fn clamp_i(e: u32, low: u32, high: u32) -> u32 {
    s(e).max(s(low)).min(s(high)) as u32
}
fn clamp_u(e: u32, low: u32, high: u32) -> u32 {
    e.max(low).min(high)
}
fn smooth_step_f(low: u32, high: u32, x: u32) -> u32 {
    let (low, high) = (f(low), f(high));
    let t = ((f(x) - low) / (high - low)).clamp(0.0, 1.0);
    fb(t * t * (3.0 - 2.0 * t))
}
/// Offset and count are clamped to the word as WGSL specifies; the result is sign-extended.
fn extract_bits_i(e: u32, offset: u32, count: u32) -> u32 {
    let o = offset.min(32);
    let c = count.min(32 - o);
    if c == 0 {
        return 0;
    }
    let shifted = e >> (o & 31);
    ((shifted << (32 - c)) as i32 >> (32 - c)) as u32
}
fn extract_bits_u(e: u32, offset: u32, count: u32) -> u32 {
    let o = offset.min(32);
    let c = count.min(32 - o);
    if c == 0 {
        return 0;
    }
    (e >> (o & 31)) & (u32::MAX >> (32 - c))
}

// ---- four operands and several results: per-lane functions on word arrays ---------------

/// A per-lane operation on up to 8 argument words, giving up to 4 result words. Used for the
/// rare operations that do not fit the column loops: 64-bit arithmetic (a 64-bit value is
/// two words, low first), packing and unpacking.
pub(crate) type LaneFn = fn([u32; 8]) -> [u32; 4];

pub(crate) fn insert_bits(w: [u32; 8]) -> [u32; 4] {
    let (e, new_bits, offset, count) = (w[0], w[2], w[4], w[6]);
    let o = offset.min(32);
    let c = count.min(32 - o);
    if c == 0 {
        return [e, 0, 0, 0];
    }
    let mask = (u32::MAX >> (32 - c)) << (o & 31);
    [(e & !mask) | ((new_bits << (o & 31)) & mask), 0, 0, 0]
}

fn snorm8(x: u32) -> u32 {
    u32::from(((0.5 + 127.0 * f(x).clamp(-1.0, 1.0)).floor() as i32) as i8 as u8)
}
fn unorm8(x: u32) -> u32 {
    u32::from((0.5 + 255.0 * f(x).clamp(0.0, 1.0)).floor() as u8)
}
fn pack4(w: [u32; 8], byte: fn(u32) -> u32) -> [u32; 4] {
    [
        byte(w[0]) | (byte(w[2]) << 8) | (byte(w[4]) << 16) | (byte(w[6]) << 24),
        0,
        0,
        0,
    ]
}
pub(crate) fn pack4x8_snorm(w: [u32; 8]) -> [u32; 4] {
    pack4(w, snorm8)
}
pub(crate) fn pack4x8_unorm(w: [u32; 8]) -> [u32; 4] {
    pack4(w, unorm8)
}
pub(crate) fn pack4x_i8(w: [u32; 8]) -> [u32; 4] {
    pack4(w, |x| x & 0xff)
}
pub(crate) fn pack4x_u8(w: [u32; 8]) -> [u32; 4] {
    pack4(w, |x| x & 0xff)
}
pub(crate) fn pack4x_i8_clamp(w: [u32; 8]) -> [u32; 4] {
    pack4(w, |x| (s(x).clamp(-128, 127) as u32) & 0xff)
}
pub(crate) fn pack4x_u8_clamp(w: [u32; 8]) -> [u32; 4] {
    pack4(w, |x| x.min(255))
}
fn unpack4(w: [u32; 8], part: fn(u32) -> u32) -> [u32; 4] {
    let x = w[0];
    [
        part(x & 0xff),
        part((x >> 8) & 0xff),
        part((x >> 16) & 0xff),
        part(x >> 24),
    ]
}
pub(crate) fn unpack4x8_snorm(w: [u32; 8]) -> [u32; 4] {
    unpack4(w, |byte| fb((f32::from(byte as u8 as i8) / 127.0).max(-1.0)))
}
pub(crate) fn unpack4x8_unorm(w: [u32; 8]) -> [u32; 4] {
    unpack4(w, |byte| fb(byte as f32 / 255.0))
}
pub(crate) fn unpack4x_i8(w: [u32; 8]) -> [u32; 4] {
    unpack4(w, |byte| i32::from(byte as u8 as i8) as u32)
}
pub(crate) fn unpack4x_u8(w: [u32; 8]) -> [u32; 4] {
    unpack4(w, |byte| byte)
}
pub(crate) fn unpack2x16_snorm(w: [u32; 8]) -> [u32; 4] {
    let part = |half: u32| fb((f32::from(half as u16 as i16) / 32767.0).max(-1.0));
    [part(w[0] & 0xffff), part(w[0] >> 16), 0, 0]
}
pub(crate) fn unpack2x16_unorm(w: [u32; 8]) -> [u32; 4] {
    let part = |half: u32| fb(half as f32 / 65535.0);
    [part(w[0] & 0xffff), part(w[0] >> 16), 0, 0]
}
pub(crate) fn unpack2x16_float(w: [u32; 8]) -> [u32; 4] {
    let part = |half: u32| fb(f16_bits_to_f32(half as u16));
    [part(w[0] & 0xffff), part(w[0] >> 16), 0, 0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_division_follows_wgsl() {
        assert_eq!(div_u(7, 0), 7);
        assert_eq!(rem_u(7, 0), 0);
        assert_eq!(div_i(i32::MIN as u32, u32::MAX), i32::MIN as u32);
        assert_eq!(rem_i(i32::MIN as u32, u32::MAX), 0);
        assert_eq!(div_i((-7i32) as u32, 2) as i32, -3);
        assert_eq!(rem_i((-7i32) as u32, 2) as i32, -1);
        assert_eq!(shl(1, 33), 2);
        assert_eq!(shr_i(0x8000_0000, 35), 0xf000_0000);
    }

    #[test]
    fn bit_functions_follow_wgsl() {
        assert_eq!(first_leading_bit_i(u32::MAX), u32::MAX);
        assert_eq!(first_leading_bit_i((-2i32) as u32), 0);
        assert_eq!(first_leading_bit_u(0x10), 4);
        assert_eq!(extract_bits_u(0xf0, 4, 4), 0xf);
        assert_eq!(extract_bits_i(0xf0, 4, 4), u32::MAX);
        assert_eq!(extract_bits_u(0xf0, 40, 4), 0);
        assert_eq!(insert_bits([0xffff_ffff, 0, 0, 0, 8, 0, 8, 0])[0], 0xffff_00ff);
    }

    #[test]
    fn float_helpers_follow_wgsl() {
        assert_eq!(f(round_f(fb(2.5))), 2.0);
        assert_eq!(f(round_f(fb(3.5))), 4.0);
        assert_eq!(f(sign_f(fb(-0.0))), 0.0);
        assert_eq!(f32_to_i32(fb(f32::NAN)), 0);
        assert_eq!(f32_to_i32(fb(3e9)), 2_147_483_520);
        assert_eq!(f32_to_u32(fb(f32::INFINITY)), 4_294_967_040);
        assert_eq!(f32_to_u32(fb(-5.0)), 0);
        assert_eq!(frexp(8.0), (0.5, 4));
        assert_eq!(frexp(-0.75), (-0.75, 0));
        assert_eq!(f(ldexp_f(fb(0.75), 4)), 12.0);
        assert_eq!(
            pack4x8_unorm([fb(1.0), 0, fb(0.0), 0, fb(0.5), 0, fb(2.0), 0])[0],
            0xff80_00ff
        );
    }
}
