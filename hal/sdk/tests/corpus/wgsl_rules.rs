//! WGSL's runtime rules for integer and bit operations and conversions, written from the
//! WGSL specification (sections "Arithmetic Expressions", "Bit Expressions", "Floating Point
//! Conversion" and the built-in functions), not from any implementation. Shared by the
//! corpus references and the property tests; each test binary uses a subset.
#![allow(dead_code)]

/// `e1 / e2` on i32: by zero gives e1; MIN / -1 gives e1 (MIN); otherwise truncating.
pub fn div_i32(x: i32, y: i32) -> i32 {
    if y == 0 || (x == i32::MIN && y == -1) {
        x
    } else {
        x / y
    }
}

/// `e1 % e2` on i32: by zero gives 0; MIN % -1 gives 0; otherwise the sign of e1.
pub fn rem_i32(x: i32, y: i32) -> i32 {
    if y == 0 || (x == i32::MIN && y == -1) {
        0
    } else {
        x % y
    }
}

/// `e1 / e2` on u32: by zero gives e1.
pub fn div_u32(x: u32, y: u32) -> u32 {
    x.checked_div(y).unwrap_or(x)
}

/// `e1 % e2` on u32: by zero gives 0.
pub fn rem_u32(x: u32, y: u32) -> u32 {
    x.checked_rem(y).unwrap_or(0)
}

/// `e1 << e2` on a 32-bit value: the amount is taken modulo 32.
pub fn shl_u32(x: u32, amount: u32) -> u32 {
    x << (amount % 32)
}

/// `e1 >> e2` on u32: logical, the amount modulo 32.
pub fn shr_u32(x: u32, amount: u32) -> u32 {
    x >> (amount % 32)
}

/// `e1 >> e2` on i32: arithmetic (copies the sign bit), the amount modulo 32.
pub fn shr_i32(x: i32, amount: u32) -> i32 {
    x >> (amount % 32)
}

/// `i32(f32)`: NaN gives 0 (WGSL: indeterminate; xhal defines 0); otherwise the value in
/// i32 closest to trunc(x) that f32 can also represent exactly, so values at or above 2^31
/// give 2147483520 (2^31 - 128, the largest f32 below 2^31), not i32::MAX.
pub fn f32_to_i32(x: f32) -> i32 {
    if x.is_nan() {
        0
    } else if x >= 2_147_483_648.0 {
        2_147_483_520
    } else if x <= -2_147_483_648.0 {
        i32::MIN
    } else {
        x.trunc() as i32
    }
}

/// `u32(f32)`: NaN gives 0 (xhal's choice); negative values give 0; values at or above
/// 2^32 give 4294967040 (2^32 - 256, the largest f32 below 2^32).
pub fn f32_to_u32(x: f32) -> u32 {
    if x.is_nan() || x <= 0.0 {
        0
    } else if x >= 4_294_967_296.0 {
        4_294_967_040
    } else {
        x.trunc() as u32
    }
}

/// `countOneBits`.
pub fn count_one_bits(x: u32) -> u32 {
    x.count_ones()
}

/// `reverseBits`.
pub fn reverse_bits(x: u32) -> u32 {
    x.reverse_bits()
}

/// `firstLeadingBit` on u32: -1 (all ones) for 0, else the position of the most
/// significant 1.
pub fn first_leading_bit_u32(x: u32) -> u32 {
    if x == 0 {
        u32::MAX
    } else {
        31 - x.leading_zeros()
    }
}

/// `firstLeadingBit` on i32: -1 for 0 and -1, else the position of the most significant
/// bit that differs from the sign bit.
pub fn first_leading_bit_i32(x: i32) -> i32 {
    if x == 0 || x == -1 {
        -1
    } else if x > 0 {
        31 - x.leading_zeros() as i32
    } else {
        31 - (!x).leading_zeros() as i32
    }
}

/// `firstTrailingBit`: -1 (all ones) for 0, else the position of the least significant 1.
pub fn first_trailing_bit(x: u32) -> u32 {
    if x == 0 {
        u32::MAX
    } else {
        x.trailing_zeros()
    }
}

/// The clamped offset and count of extractBits and insertBits: o = min(offset, 32),
/// c = min(count, 32 - o).
fn bit_field(offset: u32, count: u32) -> (u32, u32) {
    let o = offset.min(32);
    (o, count.min(32 - o))
}

/// `c` low bits set (c in 0..=32).
fn low_mask(c: u32) -> u32 {
    ((1u64 << c) - 1) as u32
}

/// `extractBits` on u32: bits o..o+c of e, zero-extended; 0 when c is 0.
pub fn extract_bits_u32(e: u32, offset: u32, count: u32) -> u32 {
    let (o, c) = bit_field(offset, count);
    if c == 0 {
        return 0;
    }
    ((u64::from(e) >> o) as u32) & low_mask(c)
}

/// `extractBits` on i32: bits o..o+c of e, sign-extended from bit c-1; 0 when c is 0.
pub fn extract_bits_i32(e: i32, offset: u32, count: u32) -> i32 {
    let (_, c) = bit_field(offset, count);
    if c == 0 {
        return 0;
    }
    let field = extract_bits_u32(e as u32, offset, count);
    ((field << (32 - c)) as i32) >> (32 - c)
}

/// `insertBits`: bits o..o+c of the result from the low c bits of newbits, the rest from e.
pub fn insert_bits(e: u32, newbits: u32, offset: u32, count: u32) -> u32 {
    let (o, c) = bit_field(offset, count);
    if c == 0 {
        return e;
    }
    let mask = ((u64::from(low_mask(c)) << o) & 0xffff_ffff) as u32;
    let placed = ((u64::from(newbits) << o) & 0xffff_ffff) as u32;
    (e & !mask) | (placed & mask)
}

/// `sign` on floats: 1, 0 or -1 (unlike Rust's `signum`, 0 for a zero).
pub fn sign_f32(x: f32) -> f32 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        0.0
    }
}
