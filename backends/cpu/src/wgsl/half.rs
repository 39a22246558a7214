//! IEEE binary16 conversions, for `f16` values, `quantizeToF16` and the `2x16float` packs.
//!
//! Written out here (a few lines) rather than taking a dependency: only the two conversions
//! are needed, both exactly specified.

/// The binary16 bits nearest to `x` (ties to even); out-of-range values become infinities,
/// NaN stays NaN.
pub(crate) fn f32_to_f16_bits(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exponent = ((bits >> 23) & 0xff) as i32;
    let mantissa = bits & 0x007f_ffff;
    if exponent == 0xff {
        let nan = if mantissa != 0 {
            0x0200 | (mantissa >> 13) as u16
        } else {
            0
        };
        return sign | 0x7c00 | nan;
    }
    let unbiased = exponent - 127 + 15;
    if unbiased >= 31 {
        return sign | 0x7c00;
    }
    if unbiased <= 0 {
        if unbiased < -10 {
            return sign;
        }
        // Subnormal result: the value is `m * 2^(exponent - 150)` with the implicit bit,
        // and a binary16 subnormal counts units of 2^-24.
        let m = mantissa | 0x0080_0000;
        let shift = (14 - unbiased) as u32;
        return sign | round_shift(m, shift) as u16;
    }
    // Carrying out of the mantissa bumps the exponent, and out of the largest exponent gives
    // infinity: both are what the encoding arithmetic does by itself.
    let value = ((unbiased as u32) << 10) | (mantissa >> 13);
    let rest = mantissa & 0x1fff;
    let rounded = if rest > 0x1000 || (rest == 0x1000 && value & 1 == 1) {
        value + 1
    } else {
        value
    };
    sign | rounded as u16
}

/// `m >> shift`, rounded to nearest with ties to even (`1 <= shift < 32`).
fn round_shift(m: u32, shift: u32) -> u32 {
    let half = 1u32 << (shift - 1);
    let rest = m & ((1u32 << shift) - 1);
    let value = m >> shift;
    if rest > half || (rest == half && value & 1 == 1) {
        value + 1
    } else {
        value
    }
}

/// The value of binary16 bits `h`, exactly.
pub(crate) fn f16_bits_to_f32(h: u16) -> f32 {
    let sign = u32::from(h & 0x8000) << 16;
    let exponent = u32::from((h >> 10) & 0x1f);
    let mantissa = u32::from(h & 0x03ff);
    match exponent {
        0 => {
            let magnitude = mantissa as f32 * (1.0 / 16_777_216.0);
            f32::from_bits(sign | magnitude.to_bits())
        }
        0x1f => f32::from_bits(sign | 0x7f80_0000 | (mantissa << 13)),
        _ => f32::from_bits(sign | ((exponent + 112) << 23) | (mantissa << 13)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_trip_and_round_to_even() {
        for h in 0..=u16::MAX {
            let x = f16_bits_to_f32(h);
            if x.is_nan() {
                assert!(f16_bits_to_f32(f32_to_f16_bits(x)).is_nan());
            } else {
                assert_eq!(f32_to_f16_bits(x), h, "{h:#x}");
            }
        }
        assert_eq!(f32_to_f16_bits(1.0), 0x3c00);
        assert_eq!(f32_to_f16_bits(65520.0), 0x7c00);
        assert_eq!(f32_to_f16_bits(65519.0), 0x7bff);
        // 1 + 2^-11 is halfway between 1 and the next f16: ties go to the even neighbour.
        assert_eq!(f32_to_f16_bits(1.0 + 1.0 / 2048.0), 0x3c00);
        assert_eq!(f32_to_f16_bits(1.0 + 3.0 / 2048.0), 0x3c02);
        assert_eq!(f32_to_f16_bits(2.0f32.powi(-25)), 0);
        assert_eq!(f32_to_f16_bits(2.0f32.powi(-24)), 1);
    }
}
