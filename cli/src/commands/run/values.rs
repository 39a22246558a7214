//! The scalar types a buffer or scalar argument is made of, and the text and bytes of their
//! values: parsing what the command line says, writing it little-endian, and reading it back
//! for printing.

use serde_json::Value;
use xhal::kernel::naga;

/// A host-shareable scalar: what one value on the command line, and one value printed, is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarType {
    F16,
    F32,
    F64,
    I32,
    U32,
    I64,
    U64,
}

impl ScalarType {
    /// The type of a naga scalar, or `None` for one a buffer or immediate cannot hold (bool,
    /// abstract numbers, 8- and 16-bit integers, which xhal kernels do not enable).
    pub fn from_naga(scalar: naga::Scalar) -> Option<ScalarType> {
        use naga::ScalarKind::{Float, Sint, Uint};
        match (scalar.kind, scalar.width) {
            (Float, 2) => Some(ScalarType::F16),
            (Float, 4) => Some(ScalarType::F32),
            (Float, 8) => Some(ScalarType::F64),
            (Sint, 4) => Some(ScalarType::I32),
            (Uint, 4) => Some(ScalarType::U32),
            (Sint, 8) => Some(ScalarType::I64),
            (Uint, 8) => Some(ScalarType::U64),
            _ => None,
        }
    }

    /// WGSL spelling.
    pub fn name(self) -> &'static str {
        match self {
            ScalarType::F16 => "f16",
            ScalarType::F32 => "f32",
            ScalarType::F64 => "f64",
            ScalarType::I32 => "i32",
            ScalarType::U32 => "u32",
            ScalarType::I64 => "i64",
            ScalarType::U64 => "u64",
        }
    }

    /// Bytes one value takes.
    pub fn size(self) -> usize {
        match self {
            ScalarType::F16 => 2,
            ScalarType::F32 | ScalarType::I32 | ScalarType::U32 => 4,
            ScalarType::F64 | ScalarType::I64 | ScalarType::U64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, ScalarType::F16 | ScalarType::F32 | ScalarType::F64)
    }

    /// Smallest and largest value of an integer type; `None` for a float type.
    fn integer_bounds(self) -> Option<(i128, i128)> {
        match self {
            ScalarType::I32 => Some((i32::MIN.into(), i32::MAX.into())),
            ScalarType::U32 => Some((0, u32::MAX.into())),
            ScalarType::I64 => Some((i64::MIN.into(), i64::MAX.into())),
            ScalarType::U64 => Some((0, u64::MAX.into())),
            ScalarType::F16 | ScalarType::F32 | ScalarType::F64 => None,
        }
    }

    /// The default range of `random:` values: `[0, 1)` for floats, the whole type for
    /// integers (so that bit patterns, hashes and indices all get exercised).
    pub fn default_random_bounds(self) -> (Number, Number) {
        match self.integer_bounds() {
            Some((min, max)) => (Number::Int(min), Number::Int(max + 1)),
            None => (Number::Float(0.0), Number::Float(1.0)),
        }
    }
}

/// The little-endian bytes of one value (at most 8), without a heap allocation: a buffer may
/// hold millions of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Raw {
    bytes: [u8; 8],
    len: usize,
}

impl Raw {
    fn new(bytes: &[u8]) -> Raw {
        let mut raw = Raw {
            bytes: [0; 8],
            len: bytes.len().min(8),
        };
        raw.bytes[..raw.len].copy_from_slice(&bytes[..raw.len]);
        raw
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// A number before it is given a type: the bounds of `range:` and `random:`, which apply to
/// every value of a buffer whatever its type. Integers stay exact.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    Int(i128),
    Float(f64),
}

impl Number {
    /// An integer when the text is one (decimal, or `0x`/`0b` with an optional sign), else a
    /// float (`1.5`, `1e-3`, `inf`, `nan`).
    pub fn parse(text: &str) -> Option<Number> {
        if let Some(value) = parse_integer(text) {
            return Some(Number::Int(value));
        }
        parse_float(text).map(Number::Float)
    }

    pub fn as_f64(self) -> f64 {
        match self {
            Number::Int(value) => value as f64,
            Number::Float(value) => value,
        }
    }
}

impl std::fmt::Display for Number {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Number::Int(value) => write!(f, "{value}"),
            Number::Float(value) => write!(f, "{value}"),
        }
    }
}

/// `12`, `-3`, `0xff`, `-0x10`, `0b101`, `+7`. `None` for anything else, floats included.
fn parse_integer(text: &str) -> Option<i128> {
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let lowered = digits.to_ascii_lowercase();
    let (radix, digits) = if let Some(rest) = lowered.strip_prefix("0x") {
        (16, rest)
    } else if let Some(rest) = lowered.strip_prefix("0b") {
        (2, rest)
    } else {
        (10, lowered.as_str())
    };
    // `from_str_radix` accepts a sign of its own; one sign is enough.
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = i128::from_str_radix(digits, radix).ok()?;
    Some(if negative { -magnitude } else { magnitude })
}

/// Rust's float syntax, which takes `1e-3`, `inf`, `-infinity` and `NaN` in any case.
fn parse_float(text: &str) -> Option<f64> {
    text.parse::<f64>().ok()
}

/// The bytes of `text` as a value of `ty`, or a message saying what `ty` takes.
pub fn parse_value(ty: ScalarType, text: &str) -> Result<Raw, String> {
    let text = text.trim();
    let not_a = |why: &str| format!("`{text}` is not {}{why}", article_name(ty));
    if ty.is_float() {
        // Parsed straight into the type, not through f64, so that rounding happens once.
        return match ty {
            ScalarType::F32 => text
                .parse::<f32>()
                .map(|value| Raw::new(&value.to_le_bytes()))
                .map_err(|_| not_a(" (a number such as 1, -2.5, 1e-3, inf or nan)")),
            ScalarType::F16 => parse_float(text)
                .map(|value| Raw::new(&f64_to_f16_bits(value).to_le_bytes()))
                .ok_or_else(|| not_a(" (a number such as 1, -2.5, 1e-3, inf or nan)")),
            _ => parse_float(text)
                .map(|value| Raw::new(&value.to_le_bytes()))
                .ok_or_else(|| not_a(" (a number such as 1, -2.5, 1e-3, inf or nan)")),
        };
    }
    match parse_integer(text) {
        Some(value) => encode(ty, Number::Int(value)),
        None => Err(not_a(&integer_hint(ty))),
    }
}

/// ` (a whole number from 0 to 4294967295)`.
fn integer_hint(ty: ScalarType) -> String {
    match ty.integer_bounds() {
        Some((min, max)) => format!(" (a whole number from {min} to {max})"),
        None => String::new(),
    }
}

/// `a u32`, `an i32`, `an f32`.
pub fn article_name(ty: ScalarType) -> String {
    let article = match ty {
        ScalarType::U32 | ScalarType::U64 => "a",
        _ => "an",
    };
    format!("{article} {}", ty.name())
}

/// The bytes of `number` as a value of `ty`: an integer type takes only whole numbers in its
/// range; a float type takes any number, rounded to nearest.
pub fn encode(ty: ScalarType, number: Number) -> Result<Raw, String> {
    let out_of_range = || format!("{number} is not {}{}", article_name(ty), integer_hint(ty));
    let integer = match (ty.integer_bounds(), number) {
        (None, _) => None,
        (Some(bounds), number) => {
            let whole = match number {
                Number::Int(value) => value,
                // A float that holds a whole number is accepted: `range:0..8:2.0` into u32.
                // `as` saturates, and the bounds check below catches the saturated values.
                Number::Float(value) if value.is_finite() && value.fract() == 0.0 => value as i128,
                Number::Float(_) => return Err(out_of_range()),
            };
            if whole < bounds.0 || whole > bounds.1 {
                return Err(out_of_range());
            }
            Some(whole)
        }
    };
    // Every integer below is within its type's bounds (checked above), so `as` is exact.
    Ok(match (ty, integer) {
        (ScalarType::I32, Some(value)) => Raw::new(&(value as i32).to_le_bytes()),
        (ScalarType::U32, Some(value)) => Raw::new(&(value as u32).to_le_bytes()),
        (ScalarType::I64, Some(value)) => Raw::new(&(value as i64).to_le_bytes()),
        (ScalarType::U64, Some(value)) => Raw::new(&(value as u64).to_le_bytes()),
        (ScalarType::F16, _) => Raw::new(&f64_to_f16_bits(number.as_f64()).to_le_bytes()),
        (ScalarType::F32, _) => match number {
            // Straight from the integer, so that one rounding happens, not two.
            Number::Int(value) => Raw::new(&(value as f32).to_le_bytes()),
            Number::Float(value) => Raw::new(&(value as f32).to_le_bytes()),
        },
        _ => Raw::new(&number.as_f64().to_le_bytes()),
    })
}

/// A value read back, ready for both outputs.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    Int(i128),
    /// The shortest decimal text that reads back as the same value of its type (so an f32
    /// 0.1 is `0.1`, not `0.10000000149011612`), and that text's value as an f64.
    Float {
        text: String,
        value: f64,
    },
}

impl Decoded {
    /// A JSON number; NaN and infinities, which JSON lacks, as the strings `"NaN"`, `"inf"`
    /// and `"-inf"`.
    pub fn to_json(&self) -> Value {
        match self {
            Decoded::Int(value) => match (i64::try_from(*value), u64::try_from(*value)) {
                (Ok(small), _) => Value::from(small),
                (_, Ok(large)) => Value::from(large),
                // Wider than any type this reads; kept as text rather than rounded.
                _ => Value::from(value.to_string()),
            },
            Decoded::Float { value, .. } if value.is_nan() => Value::from("NaN"),
            Decoded::Float { value, .. } if value.is_infinite() => {
                Value::from(if *value > 0.0 { "inf" } else { "-inf" })
            }
            Decoded::Float { value, .. } => serde_json::Number::from_f64(*value)
                .map(Value::Number)
                .unwrap_or(Value::Null),
        }
    }

    /// For people: `3`, `0.1`, `-2.5e-9`, `inf`, `NaN`.
    pub fn text(&self) -> String {
        match self {
            Decoded::Int(value) => value.to_string(),
            Decoded::Float { text, .. } => text.clone(),
        }
    }
}

/// Reads the value of `ty` at the start of `bytes` (which the caller sized).
pub fn decode(ty: ScalarType, bytes: &[u8]) -> Decoded {
    let mut raw = [0u8; 8];
    let size = ty.size().min(bytes.len());
    raw[..size].copy_from_slice(&bytes[..size]);
    let word = u64::from_le_bytes(raw);
    // The truncating casts below pick the low bytes, which hold the value.
    match ty {
        ScalarType::I32 => Decoded::Int((word as u32 as i32).into()),
        ScalarType::U32 => Decoded::Int((word as u32).into()),
        ScalarType::I64 => Decoded::Int((word as i64).into()),
        ScalarType::U64 => Decoded::Int(word.into()),
        ScalarType::F32 => {
            let value = f32::from_bits(word as u32);
            float(format_f32(value))
        }
        ScalarType::F64 => float(format_f64(f64::from_bits(word))),
        ScalarType::F16 => float(format_f16(word as u16)),
    }
}

fn float(text: String) -> Decoded {
    let value = match text.as_str() {
        "NaN" => f64::NAN,
        "inf" => f64::INFINITY,
        "-inf" => f64::NEG_INFINITY,
        other => other.parse().unwrap_or(f64::NAN),
    };
    Decoded::Float { text, value }
}

/// Rust's `Display` is the shortest text that reads back as the same value, but it never
/// uses an exponent: `f32::MAX` would be 39 digits. Very large and very small magnitudes get
/// the exponent form instead.
fn wants_exponent(magnitude: f64) -> bool {
    magnitude.is_finite() && magnitude != 0.0 && !(1e-5..1e16).contains(&magnitude)
}

fn format_f32(value: f32) -> String {
    if wants_exponent(f64::from(value.abs())) {
        format!("{value:e}")
    } else {
        format!("{value}")
    }
}

fn format_f64(value: f64) -> String {
    if wants_exponent(value.abs()) {
        format!("{value:e}")
    } else {
        format!("{value}")
    }
}

/// The shortest decimal that reads back as the same f16: the fewest significant digits (at
/// most 5, which always suffice) whose value rounds to these bits.
fn format_f16(bits: u16) -> String {
    let value = f16_bits_to_f64(bits);
    if !value.is_finite() || value == 0.0 {
        return format_f64(value);
    }
    for digits in 0..5 {
        let candidate = format!("{value:.digits$e}");
        if let Ok(parsed) = candidate.parse::<f64>() {
            if f64_to_f16_bits(parsed) == bits {
                return format_f64(parsed);
            }
        }
    }
    format_f64(value)
}

/// IEEE binary16 from an f64, rounded to nearest, ties to even; overflow gives infinity.
pub fn f64_to_f16_bits(value: f64) -> u16 {
    let sign: u16 = if value.is_sign_negative() { 0x8000 } else { 0 };
    let magnitude = value.abs();
    if magnitude.is_nan() {
        return sign | 0x7e00;
    }
    // 65520 is halfway between the largest f16 (65504) and the next power of two: from there
    // on, rounding goes to infinity.
    if magnitude >= 65520.0 {
        return sign | 0x7c00;
    }
    // Below the smallest normal f16 (2^-14), values are multiples of 2^-24. A result of 1024
    // is the smallest normal, whose bits are the same 0x0400.
    if magnitude < 2f64.powi(-14) {
        return sign | (magnitude * 2f64.powi(24)).round_ties_even() as u16;
    }
    // The f64 exponent; the magnitude is normal in f64, so the field is the true exponent.
    let exponent = ((magnitude.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    let fraction = magnitude / 2f64.powi(exponent) - 1.0;
    let mut mantissa = (fraction * 1024.0).round_ties_even() as u16;
    let mut biased = (exponent + 15) as u16;
    if mantissa == 1024 {
        mantissa = 0;
        biased += 1;
    }
    sign | (biased << 10) | mantissa
}

/// The exact value of IEEE binary16 bits.
pub fn f16_bits_to_f64(bits: u16) -> f64 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exponent = i32::from((bits >> 10) & 0x1f);
    let mantissa = f64::from(bits & 0x3ff);
    sign * match exponent {
        0 => mantissa * 2f64.powi(-24),
        31 if mantissa == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        _ => (1.0 + mantissa / 1024.0) * 2f64.powi(exponent - 15),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_take_signs_hex_and_binary_and_refuse_floats() {
        assert_eq!(parse_integer("42"), Some(42));
        assert_eq!(parse_integer("-0x10"), Some(-16));
        assert_eq!(parse_integer("0b101"), Some(5));
        assert_eq!(parse_integer("+7"), Some(7));
        for bad in ["", "-", "1.0", "1e3", "0x", "--1", "+-1", "0xg"] {
            assert_eq!(parse_integer(bad), None, "{bad}");
        }
    }

    #[test]
    fn values_are_checked_against_their_type() {
        let bytes = |raw: Result<Raw, String>| raw.map(|raw| raw.as_bytes().to_vec());
        assert_eq!(bytes(parse_value(ScalarType::U32, "4294967295")), Ok(vec![255; 4]));
        let error = parse_value(ScalarType::U32, "-1").unwrap_err();
        assert!(
            error.contains("-1 is not a u32 (a whole number from 0 to 4294967295)"),
            "{error}"
        );
        let error = parse_value(ScalarType::I32, "1.5").unwrap_err();
        assert!(error.contains("`1.5` is not an i32"), "{error}");
        assert_eq!(
            bytes(parse_value(ScalarType::F32, "1e-3")),
            Ok(1e-3f32.to_le_bytes().to_vec())
        );
        let nan = bytes(parse_value(ScalarType::F32, "nan")).unwrap_or_default();
        assert!(f32::from_le_bytes([nan[0], nan[1], nan[2], nan[3]]).is_nan());
        assert_eq!(
            bytes(parse_value(ScalarType::F32, "-inf")),
            Ok(f32::NEG_INFINITY.to_le_bytes().to_vec())
        );
        assert!(parse_value(ScalarType::F32, "x").is_err());
        assert_eq!(
            bytes(encode(ScalarType::U32, Number::Float(3.0))),
            Ok(3u32.to_le_bytes().to_vec())
        );
        assert!(encode(ScalarType::U32, Number::Float(0.5)).is_err());
    }

    #[test]
    fn f16_round_trips_and_rounds_to_nearest_even() {
        for bits in 0..=u16::MAX {
            let value = f16_bits_to_f64(bits);
            if value.is_nan() {
                continue;
            }
            assert_eq!(f64_to_f16_bits(value), bits, "{bits:#06x}");
            // The printed text reads back as the same bits.
            if let Decoded::Float { text, .. } = decode(ScalarType::F16, &bits.to_le_bytes()) {
                let parsed: f64 = text.parse().unwrap_or(f64::NAN);
                assert_eq!(f64_to_f16_bits(parsed), bits, "{bits:#06x} printed as {text}");
            }
        }
        assert_eq!(f64_to_f16_bits(1.0), 0x3c00);
        assert_eq!(f64_to_f16_bits(65504.0), 0x7bff);
        assert_eq!(f64_to_f16_bits(65519.0), 0x7bff);
        assert_eq!(f64_to_f16_bits(65520.0), 0x7c00);
        // 1 + 2^-11 is halfway between 1 and the next f16: ties go to the even mantissa.
        assert_eq!(f64_to_f16_bits(1.0 + 2f64.powi(-11)), 0x3c00);
        assert_eq!(f64_to_f16_bits(1.0 + 3.0 * 2f64.powi(-11)), 0x3c02);
        assert_eq!(
            decode(ScalarType::F16, &f64_to_f16_bits(0.1).to_le_bytes()).text(),
            "0.1"
        );
    }

    #[test]
    fn floats_print_shortest_and_json_has_no_nan() {
        assert_eq!(decode(ScalarType::F32, &0.1f32.to_le_bytes()).text(), "0.1");
        assert_eq!(
            decode(ScalarType::F32, &0.1f32.to_le_bytes()).to_json(),
            serde_json::json!(0.1)
        );
        assert_eq!(decode(ScalarType::F32, &f32::MAX.to_le_bytes()).text(), "3.4028235e38");
        assert_eq!(decode(ScalarType::F32, &f32::NAN.to_le_bytes()).to_json(), "NaN");
        assert_eq!(
            decode(ScalarType::F64, &f64::NEG_INFINITY.to_le_bytes()).to_json(),
            "-inf"
        );
        assert_eq!(decode(ScalarType::I32, &(-5i32).to_le_bytes()).to_json(), -5);
        assert_eq!(decode(ScalarType::U64, &u64::MAX.to_le_bytes()).to_json(), u64::MAX);
    }
}
