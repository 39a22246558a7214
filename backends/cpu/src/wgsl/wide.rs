//! 64-bit operations (`i64`, `u64`, `f64`) and conversions between widths, as per-lane
//! [`LaneFn`]s. A 64-bit value is two slots, low word first; argument `k` of a lane
//! function is words `2k` (low) and `2k + 1` (high, 0 for a 32-bit argument).
//!
//! These run one lane at a time through a function pointer, slower than the 32-bit column
//! loops; 64-bit arithmetic is rare in kernels, and correctness matters more here.

use super::ops::LaneFn;
use super::types::Num;

/// A scalar that crosses a lane function as words.
trait Word: Copy {
    fn from_word(value: u64) -> Self;
    fn to_words(self) -> [u32; 4];
}

impl Word for u64 {
    fn from_word(value: u64) -> u64 {
        value
    }
    fn to_words(self) -> [u32; 4] {
        [self as u32, (self >> 32) as u32, 0, 0]
    }
}

impl Word for i64 {
    fn from_word(value: u64) -> i64 {
        value as i64
    }
    fn to_words(self) -> [u32; 4] {
        (self as u64).to_words()
    }
}

impl Word for f64 {
    fn from_word(value: u64) -> f64 {
        f64::from_bits(value)
    }
    fn to_words(self) -> [u32; 4] {
        self.to_bits().to_words()
    }
}

impl Word for u32 {
    fn from_word(value: u64) -> u32 {
        value as u32
    }
    fn to_words(self) -> [u32; 4] {
        [self, 0, 0, 0]
    }
}

impl Word for i32 {
    fn from_word(value: u64) -> i32 {
        value as u32 as i32
    }
    fn to_words(self) -> [u32; 4] {
        [self as u32, 0, 0, 0]
    }
}

impl Word for f32 {
    fn from_word(value: u64) -> f32 {
        f32::from_bits(value as u32)
    }
    fn to_words(self) -> [u32; 4] {
        [self.to_bits(), 0, 0, 0]
    }
}

impl Word for bool {
    fn from_word(value: u64) -> bool {
        value as u32 != 0
    }
    fn to_words(self) -> [u32; 4] {
        [u32::from(self), 0, 0, 0]
    }
}

#[inline(always)]
fn arg<T: Word>(words: &[u32; 8], k: usize) -> T {
    let low = u64::from(words[2 * k]);
    let high = u64::from(words[2 * k + 1]);
    T::from_word(low | (high << 32))
}

/// Defines lane functions from closures over typed scalars.
macro_rules! lane_fns {
    ($($name:ident = |$($a:ident: $t:ty),+| $body:expr;)*) => {
        $(
            fn $name(words: [u32; 8]) -> [u32; 4] {
                let mut _k = 0usize;
                $(
                    let $a: $t = arg(&words, _k);
                    _k += 1;
                )+
                Word::to_words($body)
            }
        )*
    };
}

lane_fns! {
    add_i64 = |a: u64, b: u64| a.wrapping_add(b);
    sub_i64 = |a: u64, b: u64| a.wrapping_sub(b);
    mul_i64 = |a: u64, b: u64| a.wrapping_mul(b);
    div_i64 = |a: i64, b: i64| if b == 0 || (a == i64::MIN && b == -1) { a } else { a / b };
    div_u64 = |a: u64, b: u64| a.checked_div(b).unwrap_or(a);
    rem_i64 = |a: i64, b: i64| if b == 0 || (a == i64::MIN && b == -1) { 0 } else { a % b };
    rem_u64 = |a: u64, b: u64| a.checked_rem(b).unwrap_or(0);
    eq_i64 = |a: u64, b: u64| a == b;
    ne_i64 = |a: u64, b: u64| a != b;
    lt_i64 = |a: i64, b: i64| a < b;
    le_i64 = |a: i64, b: i64| a <= b;
    gt_i64 = |a: i64, b: i64| a > b;
    ge_i64 = |a: i64, b: i64| a >= b;
    lt_u64 = |a: u64, b: u64| a < b;
    le_u64 = |a: u64, b: u64| a <= b;
    gt_u64 = |a: u64, b: u64| a > b;
    ge_u64 = |a: u64, b: u64| a >= b;
    and_64 = |a: u64, b: u64| a & b;
    or_64 = |a: u64, b: u64| a | b;
    xor_64 = |a: u64, b: u64| a ^ b;
    shl_64 = |a: u64, b: u32| a << (b & 63);
    shr_i64 = |a: i64, b: u32| a >> (b & 63);
    shr_u64 = |a: u64, b: u32| a >> (b & 63);
    min_i64 = |a: i64, b: i64| a.min(b);
    max_i64 = |a: i64, b: i64| a.max(b);
    min_u64 = |a: u64, b: u64| a.min(b);
    max_u64 = |a: u64, b: u64| a.max(b);
    clamp_i64 = |e: i64, low: i64, high: i64| e.max(low).min(high);
    clamp_u64 = |e: u64, low: u64, high: u64| e.max(low).min(high);
    neg_i64 = |a: u64| a.wrapping_neg();
    not_64 = |a: u64| !a;
    abs_i64 = |a: i64| a.wrapping_abs();
    sign_i64 = |a: i64| a.signum();
    count_one_bits_64 = |a: u64| a.count_ones() as u64;
    count_leading_zeros_64 = |a: u64| u64::from(a.leading_zeros());
    count_trailing_zeros_64 = |a: u64| u64::from(a.trailing_zeros());
    reverse_bits_64 = |a: u64| a.reverse_bits();
    frexp_fract_f64 = |a: f64| frexp_f64(a).0;
    // naga types the exponent of an f64's frexp `i64`.
    frexp_exp_f64 = |a: f64| i64::from(frexp_f64(a).1);
    first_trailing_bit_64 = |a: u64| if a == 0 { u64::MAX } else { u64::from(a.trailing_zeros()) };
    first_leading_bit_u64 = |a: u64| if a == 0 { u64::MAX } else { 63 - u64::from(a.leading_zeros()) };
    first_leading_bit_i64 = |a: i64| {
        let v = if a < 0 { !a } else { a };
        if v == 0 { -1 } else { 63 - i64::from(v.leading_zeros()) }
    };
    // WGSL's bit fields: the offset and the count clamped to the 64 bits.
    extract_bits_u64 = |e: u64, offset: u32, count: u32| {
        let o = offset.min(64);
        let c = count.min(64 - o);
        match c {
            0 => 0,
            64 => e,
            _ => (e >> o) & ((1u64 << c) - 1),
        }
    };
    extract_bits_i64 = |e: i64, offset: u32, count: u32| {
        let o = offset.min(64);
        let c = count.min(64 - o);
        if c == 0 { 0 } else { (e << (64 - o - c)) >> (64 - c) }
    };
    insert_bits_64 = |e: u64, n: u64, offset: u32, count: u32| {
        let o = offset.min(64);
        let c = count.min(64 - o);
        match c {
            0 => e,
            64 => n,
            _ => {
                let mask = ((1u64 << c) - 1) << o;
                (e & !mask) | ((n << o) & mask)
            }
        }
    };

    add_f64 = |a: f64, b: f64| a + b;
    sub_f64 = |a: f64, b: f64| a - b;
    mul_f64 = |a: f64, b: f64| a * b;
    div_f64 = |a: f64, b: f64| a / b;
    rem_f64 = |a: f64, b: f64| a - b * (a / b).trunc();
    eq_f64 = |a: f64, b: f64| a == b;
    ne_f64 = |a: f64, b: f64| a != b;
    lt_f64 = |a: f64, b: f64| a < b;
    le_f64 = |a: f64, b: f64| a <= b;
    gt_f64 = |a: f64, b: f64| a > b;
    ge_f64 = |a: f64, b: f64| a >= b;
    min_f64 = |a: f64, b: f64| a.min(b);
    max_f64 = |a: f64, b: f64| a.max(b);
    pow_f64 = |a: f64, b: f64| a.powf(b);
    atan2_f64 = |a: f64, b: f64| a.atan2(b);
    step_f64 = |edge: f64, x: f64| if edge <= x { 1.0 } else { 0.0 };
    clamp_f64 = |e: f64, low: f64, high: f64| e.max(low).min(high);
    fma_f64 = |a: f64, b: f64, c: f64| a.mul_add(b, c);
    mix_f64 = |a: f64, b: f64, t: f64| a * (1.0 - t) + b * t;
    smooth_step_f64 = |low: f64, high: f64, x: f64| {
        let t = ((x - low) / (high - low)).clamp(0.0, 1.0);
        t * t * (3.0 - 2.0 * t)
    };
    neg_f64 = |a: f64| -a;
    abs_f64 = |a: f64| a.abs();
    sign_f64 = |a: f64| if a > 0.0 { 1.0 } else if a < 0.0 { -1.0 } else { 0.0 };
    sqrt_f64 = |a: f64| a.sqrt();
    inverse_sqrt_f64 = |a: f64| 1.0 / a.sqrt();
    floor_f64 = |a: f64| a.floor();
    ceil_f64 = |a: f64| a.ceil();
    round_f64 = |a: f64| a.round_ties_even();
    trunc_f64 = |a: f64| a.trunc();
    fract_f64 = |a: f64| a - a.floor();
    saturate_f64 = |a: f64| if a >= 1.0 { 1.0 } else if a > 0.0 { a } else { 0.0 };
    sin_f64 = |a: f64| a.sin();
    cos_f64 = |a: f64| a.cos();
    tan_f64 = |a: f64| a.tan();
    asin_f64 = |a: f64| a.asin();
    acos_f64 = |a: f64| a.acos();
    atan_f64 = |a: f64| a.atan();
    sinh_f64 = |a: f64| a.sinh();
    cosh_f64 = |a: f64| a.cosh();
    tanh_f64 = |a: f64| a.tanh();
    asinh_f64 = |a: f64| a.asinh();
    acosh_f64 = |a: f64| a.acosh();
    atanh_f64 = |a: f64| a.atanh();
    exp_f64 = |a: f64| a.exp();
    exp2_f64 = |a: f64| a.exp2();
    log_f64 = |a: f64| a.ln();
    log2_f64 = |a: f64| a.log2();
    degrees_f64 = |a: f64| a.to_degrees();
    radians_f64 = |a: f64| a.to_radians();
    is_nan_f64 = |a: f64| a.is_nan();
    is_inf_f64 = |a: f64| a.is_infinite();

    i64_from_i32 = |a: i32| i64::from(a);
    i64_from_u32 = |a: u32| i64::from(a);
    // Float to integer: truncate, then clamp to the largest value both types represent.
    // (Comparisons are false for NaN, which `as` maps to 0.)
    i64_from_f32 = |a: f32| if a >= 9_223_371_487_098_961_920.0 { 9_223_371_487_098_961_920 } else { a as i64 };
    i64_from_f64 = |a: f64| if a >= 9_223_372_036_854_774_784.0 { 9_223_372_036_854_774_784 } else { a as i64 };
    u64_from_i32 = |a: i32| a as u64;
    u64_from_u32 = |a: u32| u64::from(a);
    u64_from_f32 = |a: f32| if a >= 18_446_742_974_197_923_840.0 { 18_446_742_974_197_923_840 } else { a as u64 };
    u64_from_f64 = |a: f64| if a >= 18_446_744_073_709_549_568.0 { 18_446_744_073_709_549_568 } else { a as u64 };
    f64_from_i32 = |a: i32| f64::from(a);
    f64_from_u32 = |a: u32| f64::from(a);
    f64_from_f32 = |a: f32| f64::from(a);
    f64_from_i64 = |a: i64| a as f64;
    f64_from_u64 = |a: u64| a as f64;
    f64_from_bool = |a: bool| if a { 1.0 } else { 0.0 };
    i32_from_i64 = |a: u64| a as u32;
    i32_from_f64 = |a: f64| a as i32;
    u32_from_f64 = |a: f64| a as u32;
    f32_from_i64 = |a: i64| a as f32;
    f32_from_u64 = |a: u64| a as f32;
    f32_from_f64 = |a: f64| a as f32;
    bool_from_64 = |a: u64| a != 0;
    bool_from_f64 = |a: f64| a != 0.0;
    wide_from_bool = |a: bool| u64::from(a);
}

/// The lane function for a two-operand WGSL operator on 64-bit operands of type `num`
/// (a shift takes a `u32` amount), or `None` when it does not apply.
/// `frexp` on f64, as on f32: zero, infinities and NaN are their own fraction with exponent
/// 0; a subnormal is scaled by 2^64 first.
fn frexp_f64(x: f64) -> (f64, i32) {
    if x == 0.0 || !x.is_finite() {
        return (x, 0);
    }
    let (x, bias) = if x.abs() < f64::MIN_POSITIVE {
        (x * 2f64.powi(64), -64)
    } else {
        (x, 0)
    };
    let bits = x.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i32 - 1022;
    let fraction = f64::from_bits((bits & 0x800f_ffff_ffff_ffff) | (1022 << 52));
    (fraction, exponent + bias)
}

/// The fraction and the exponent of `frexp` on f64, as lane functions.
pub(crate) fn frexp() -> (LaneFn, LaneFn) {
    (frexp_fract_f64, frexp_exp_f64)
}

pub(crate) fn binary(op: naga::BinaryOperator, num: Num) -> Option<LaneFn> {
    use naga::BinaryOperator as B;
    let signed = num == Num::I64;
    let f: LaneFn = match (op, num) {
        (B::Add, Num::F64) => add_f64,
        (B::Subtract, Num::F64) => sub_f64,
        (B::Multiply, Num::F64) => mul_f64,
        (B::Divide, Num::F64) => div_f64,
        (B::Modulo, Num::F64) => rem_f64,
        (B::Equal, Num::F64) => eq_f64,
        (B::NotEqual, Num::F64) => ne_f64,
        (B::Less, Num::F64) => lt_f64,
        (B::LessEqual, Num::F64) => le_f64,
        (B::Greater, Num::F64) => gt_f64,
        (B::GreaterEqual, Num::F64) => ge_f64,
        (_, Num::F64) => return None,
        (B::Add, _) => add_i64,
        (B::Subtract, _) => sub_i64,
        (B::Multiply, _) => mul_i64,
        (B::Divide, _) if signed => div_i64,
        (B::Divide, _) => div_u64,
        (B::Modulo, _) if signed => rem_i64,
        (B::Modulo, _) => rem_u64,
        (B::Equal, _) => eq_i64,
        (B::NotEqual, _) => ne_i64,
        (B::Less, _) if signed => lt_i64,
        (B::LessEqual, _) if signed => le_i64,
        (B::Greater, _) if signed => gt_i64,
        (B::GreaterEqual, _) if signed => ge_i64,
        (B::Less, _) => lt_u64,
        (B::LessEqual, _) => le_u64,
        (B::Greater, _) => gt_u64,
        (B::GreaterEqual, _) => ge_u64,
        (B::And, _) => and_64,
        (B::InclusiveOr, _) => or_64,
        (B::ExclusiveOr, _) => xor_64,
        (B::ShiftLeft, _) => shl_64,
        (B::ShiftRight, _) if signed => shr_i64,
        (B::ShiftRight, _) => shr_u64,
        (B::LogicalAnd | B::LogicalOr, _) => return None,
    };
    Some(f)
}

/// Lane functions for the math built-ins on 64-bit operands.
pub(crate) fn math(fun: naga::MathFunction, num: Num) -> Option<LaneFn> {
    use naga::MathFunction as M;
    let f: LaneFn = if num == Num::F64 {
        match fun {
            M::Abs => abs_f64,
            M::Min => min_f64,
            M::Max => max_f64,
            M::Clamp => clamp_f64,
            M::Saturate => saturate_f64,
            M::Cos => cos_f64,
            M::Cosh => cosh_f64,
            M::Sin => sin_f64,
            M::Sinh => sinh_f64,
            M::Tan => tan_f64,
            M::Tanh => tanh_f64,
            M::Acos => acos_f64,
            M::Asin => asin_f64,
            M::Atan => atan_f64,
            M::Atan2 => atan2_f64,
            M::Asinh => asinh_f64,
            M::Acosh => acosh_f64,
            M::Atanh => atanh_f64,
            M::Radians => radians_f64,
            M::Degrees => degrees_f64,
            M::Ceil => ceil_f64,
            M::Floor => floor_f64,
            M::Round => round_f64,
            M::Fract => fract_f64,
            M::Trunc => trunc_f64,
            M::Exp => exp_f64,
            M::Exp2 => exp2_f64,
            M::Log => log_f64,
            M::Log2 => log2_f64,
            M::Pow => pow_f64,
            M::Sign => sign_f64,
            M::Fma => fma_f64,
            M::Mix => mix_f64,
            M::Step => step_f64,
            M::SmoothStep => smooth_step_f64,
            M::Sqrt => sqrt_f64,
            M::InverseSqrt => inverse_sqrt_f64,
            _ => return None,
        }
    } else {
        let signed = num == Num::I64;
        match fun {
            M::Abs if signed => abs_i64,
            M::Abs => |w| [w[0], w[1], 0, 0],
            M::Min if signed => min_i64,
            M::Min => min_u64,
            M::Max if signed => max_i64,
            M::Max => max_u64,
            M::Clamp if signed => clamp_i64,
            M::Clamp => clamp_u64,
            M::Sign if signed => sign_i64,
            M::CountOneBits => count_one_bits_64,
            M::CountLeadingZeros => count_leading_zeros_64,
            M::CountTrailingZeros => count_trailing_zeros_64,
            M::ReverseBits => reverse_bits_64,
            M::FirstTrailingBit => first_trailing_bit_64,
            M::FirstLeadingBit if signed => first_leading_bit_i64,
            M::FirstLeadingBit => first_leading_bit_u64,
            M::ExtractBits if signed => extract_bits_i64,
            M::ExtractBits => extract_bits_u64,
            M::InsertBits => insert_bits_64,
            _ => return None,
        }
    };
    Some(f)
}

/// Unary operators on 64-bit operands.
pub(crate) fn unary(op: naga::UnaryOperator, num: Num) -> Option<LaneFn> {
    use naga::UnaryOperator as U;
    Some(match (op, num) {
        (U::Negate, Num::F64) => neg_f64,
        (U::Negate, Num::I64) => neg_i64,
        (U::BitwiseNot, Num::I64 | Num::U64) => not_64,
        _ => return None,
    })
}

/// `isNan` / `isInf` on `f64`.
pub(crate) fn relational(fun: naga::RelationalFunction) -> Option<LaneFn> {
    match fun {
        naga::RelationalFunction::IsNan => Some(is_nan_f64),
        naga::RelationalFunction::IsInf => Some(is_inf_f64),
        _ => None,
    }
}

/// The conversion from `from` to `to` when either is 64-bit.
pub(crate) fn convert(from: Num, to: Num) -> Option<LaneFn> {
    use Num::*;
    let f: LaneFn = match (from, to) {
        (I64 | U64, I64 | U64) | (F64, F64) => |w| [w[0], w[1], 0, 0],
        (I32, I64) => i64_from_i32,
        (U32, I64) => i64_from_u32,
        (F32 | F16, I64) => i64_from_f32,
        (F64, I64) => i64_from_f64,
        (I32, U64) => u64_from_i32,
        (U32, U64) => u64_from_u32,
        (F32 | F16, U64) => u64_from_f32,
        (F64, U64) => u64_from_f64,
        (Bool, I64 | U64) => wide_from_bool,
        (I32, F64) => f64_from_i32,
        (U32, F64) => f64_from_u32,
        (F32 | F16, F64) => f64_from_f32,
        (I64, F64) => f64_from_i64,
        (U64, F64) => f64_from_u64,
        (Bool, F64) => f64_from_bool,
        (I64 | U64, I32 | U32) => i32_from_i64,
        (F64, I32) => i32_from_f64,
        (F64, U32) => u32_from_f64,
        (I64, F32 | F16) => f32_from_i64,
        (U64, F32 | F16) => f32_from_u64,
        (F64, F32 | F16) => f32_from_f64,
        (I64 | U64, Bool) => bool_from_64,
        (F64, Bool) => bool_from_f64,
        _ => return None,
    };
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(values: &[u64]) -> [u32; 8] {
        let mut w = [0; 8];
        for (k, value) in values.iter().enumerate() {
            w[2 * k] = *value as u32;
            w[2 * k + 1] = (*value >> 32) as u32;
        }
        w
    }

    #[test]
    fn sixty_four_bit_rules_match_wgsl() {
        let min = i64::MIN as u64;
        assert_eq!(div_i64(words(&[min, u64::MAX])), min.to_words());
        assert_eq!(rem_i64(words(&[min, u64::MAX])), 0u64.to_words());
        assert_eq!(div_u64(words(&[9, 0])), 9u64.to_words());
        assert_eq!(shl_64(words(&[1, 65])), 2u64.to_words());
        assert_eq!(i64_from_i32(words(&[u64::from(u32::MAX)])), (-1i64).to_words());
        assert_eq!(f64_from_f32(words(&[u64::from(1.5f32.to_bits())])), 1.5f64.to_words());
    }
}
