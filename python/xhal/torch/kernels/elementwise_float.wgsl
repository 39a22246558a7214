// The elementwise operators with floating results, computed in F (see elementwise.wgsl): x, y
// and z are inputs 0, 1 and 2, a, b and c the operator's scalars. Each OP_ constant names one
// operator; the C++ side looks them up by name, so their numbers are free to change.
// Formulas are PyTorch's CPU kernels', special values included: a NaN in gives a NaN out.

const OP_COPY: u32 = 0u;
const OP_ADD: u32 = 1u;                  // x + a y
const OP_SUB: u32 = 2u;                  // x - a y
const OP_MUL: u32 = 3u;
const OP_DIV: u32 = 4u;
const OP_DIV_TRUNC: u32 = 5u;
const OP_DIV_FLOOR: u32 = 6u;
const OP_REMAINDER: u32 = 7u;            // Python's %: the sign of the divisor
const OP_FMOD: u32 = 8u;                 // C's fmod: the sign of the dividend
const OP_MAXIMUM: u32 = 9u;              // NaN if either is
const OP_MINIMUM: u32 = 10u;
const OP_FMAX: u32 = 11u;                // the other if one is NaN
const OP_FMIN: u32 = 12u;
const OP_NEG: u32 = 13u;
const OP_ABS: u32 = 14u;
const OP_RECIPROCAL: u32 = 15u;
const OP_SQUARE: u32 = 16u;
const OP_CUBE: u32 = 17u;
const OP_RECIPROCAL_SQUARE: u32 = 18u;
const OP_SQRT: u32 = 19u;
const OP_RSQRT: u32 = 20u;
const OP_EXP: u32 = 21u;
const OP_EXP2: u32 = 22u;
const OP_EXPM1: u32 = 23u;
const OP_LOG: u32 = 24u;
const OP_LOG2: u32 = 25u;
const OP_LOG10: u32 = 26u;
const OP_LOG1P: u32 = 27u;
const OP_SIN: u32 = 28u;
const OP_COS: u32 = 29u;
const OP_TAN: u32 = 30u;
const OP_ASIN: u32 = 31u;
const OP_ACOS: u32 = 32u;
const OP_ATAN: u32 = 33u;
const OP_SINH: u32 = 34u;
const OP_COSH: u32 = 35u;
const OP_TANH: u32 = 36u;
const OP_ASINH: u32 = 37u;
const OP_ACOSH: u32 = 38u;
const OP_ATANH: u32 = 39u;
const OP_ERF: u32 = 40u;
const OP_ERFC: u32 = 41u;
const OP_ERFINV: u32 = 42u;
const OP_LGAMMA: u32 = 43u;
const OP_DIGAMMA: u32 = 44u;
const OP_POW: u32 = 45u;                 // x ** y
const OP_ATAN2: u32 = 46u;
const OP_HYPOT: u32 = 47u;
const OP_COPYSIGN: u32 = 48u;
const OP_XLOGY: u32 = 49u;
const OP_XLOG1PY: u32 = 50u;
const OP_FLOOR: u32 = 51u;
const OP_CEIL: u32 = 52u;
const OP_ROUND: u32 = 53u;               // half to even
const OP_ROUND_DECIMALS: u32 = 54u;      // a = 10^|decimals|; word z is 1 for negative decimals
const OP_TRUNC: u32 = 55u;
const OP_FRAC: u32 = 56u;
const OP_SIGN: u32 = 57u;                // 0 for NaN, as PyTorch
const OP_SIGMOID: u32 = 58u;
const OP_LOGIT: u32 = 59u;               // with the input clamped to [a, 1 - a] where word z is 1
const OP_SILU: u32 = 60u;
const OP_MISH: u32 = 61u;
const OP_GELU: u32 = 62u;
const OP_GELU_TANH: u32 = 63u;
const OP_RELU: u32 = 64u;
const OP_HARDTANH: u32 = 65u;            // clamp to [a, b]
const OP_LEAKY_RELU: u32 = 66u;          // slope a
const OP_ELU: u32 = 67u;                 // alpha a, scale b, input scale c
const OP_CELU: u32 = 68u;                // alpha a
const OP_SOFTPLUS: u32 = 69u;            // beta a, threshold b
const OP_HARDSIGMOID: u32 = 70u;
const OP_HARDSWISH: u32 = 71u;
const OP_LOG_SIGMOID: u32 = 72u;
const OP_SOFTSHRINK: u32 = 73u;          // lambda a
const OP_HARDSHRINK: u32 = 74u;          // lambda a
const OP_THRESHOLD: u32 = 75u;           // x <= a: b
const OP_NAN_TO_NUM: u32 = 76u;          // NaN: a, +inf: b, -inf: c
const OP_CLAMP: u32 = 77u;               // to [a, b]; word z bit 0: a given, bit 1: b given
const OP_CLAMP_TENSOR: u32 = 78u;        // to [y, z]; word z bit 0: y given, bit 1: z given
const OP_LERP: u32 = 79u;                // x + a (y - x), from the nearer end
const OP_LERP_TENSOR: u32 = 80u;         // weight z
const OP_ADDCMUL: u32 = 81u;             // x + a y z
const OP_ADDCDIV: u32 = 82u;             // x + a y / z
const OP_WHERE: u32 = 83u;               // x ? y : z
const OP_MASKED_FILL: u32 = 84u;         // y ? a : x
const OP_TRIU: u32 = 85u;                // words z, w: columns, rows; a's low word: the diagonal (i32)
const OP_TRIL: u32 = 86u;
const OP_ARANGE: u32 = 87u;              // a + b i
const OP_THRESHOLD_BACKWARD: u32 = 88u;  // gradient x, input y, threshold a
const OP_SIGMOID_BACKWARD: u32 = 89u;    // gradient x, output y
const OP_TANH_BACKWARD: u32 = 90u;       // gradient x, output y
const OP_GELU_BACKWARD: u32 = 91u;       // gradient x, input y
const OP_GELU_TANH_BACKWARD: u32 = 92u;
const OP_SILU_BACKWARD: u32 = 93u;
const OP_MISH_BACKWARD: u32 = 94u;
const OP_ELU_BACKWARD: u32 = 95u;        // alpha a, scale b, input scale c; y the output where word z is 1
const OP_LEAKY_RELU_BACKWARD: u32 = 96u;
const OP_HARDTANH_BACKWARD: u32 = 97u;
const OP_SOFTPLUS_BACKWARD: u32 = 98u;
const OP_HARDSIGMOID_BACKWARD: u32 = 99u;
const OP_HARDSWISH_BACKWARD: u32 = 100u;
const OP_LOG_SIGMOID_BACKWARD: u32 = 101u;
const OP_SHRINK_BACKWARD: u32 = 102u;    // hardshrink's and softshrink's: lambda a
const OP_LOGIT_BACKWARD: u32 = 103u;     // eps a where word z is 1
const OP_LOGADDEXP: u32 = 104u;          // log(e^x + e^y)
const OP_LOGADDEXP2: u32 = 105u;         // log2(2^x + 2^y)
const OP_HEAVISIDE: u32 = 106u;          // x == 0: y; else x > 0
const OP_SINC: u32 = 107u;               // sin(pi x) / (pi x)
const OP_LINSPACE: u32 = 108u;           // from a to b in steps of c, word z steps: PyTorch's two halves

fn scalar_a() -> F { return float_from_bits(p.scalars.x, p.scalars.y); }
fn scalar_b() -> F { return float_from_bits(p.scalars.z, p.scalars.w); }
fn scalar_c() -> F { return float_from_bits(p.extra.x, p.extra.y); }

// A result with x's NaN where x is one: WGSL leaves what min, max, sign and friends give for a
// NaN open, and PyTorch keeps it.
fn keep_nan(result: F, x: F) -> F { return select(result, x, is_nan(x)); }

// C's fmod, exactly, by binary long division: |y| is doubled to the largest t <= |x|, then
// halved back, subtracted wherever it fits. Each subtraction is exact (the remainder is below
// 2t), and so is the result.
fn fmod_exact(x: F, y: F) -> F {
  if (is_nan(x) || is_nan(y) || is_inf(x) || y == F(0)) { return float_nan(); }
  if (is_inf(y)) { return x; }
  let ay = abs(y);
  var r = abs(x);
  if (r < ay) { return x; }
  var t = ay;
  for (var step = 0; step < 70 && t * F(4294967296.0) <= r; step = step + 1) { t = t * F(4294967296.0); }
  for (var step = 0; step < 33 && t * F(2) <= r; step = step + 1) { t = t * F(2); }
  for (var step = 0; step < 2200 && t >= ay; step = step + 1) {
    if (r >= t) { r = r - t; }
    t = t * F(0.5);
  }
  return select(r, -r, sign_bit(x));
}

fn sigmoid(x: F) -> F { return F(1) / (F(1) + xexp(-x)); }

fn softplus(x: F) -> F { return xlog1p(xexp(x)); }

fn gelu_tanh_inner(x: F) -> F {
  return F(0.7978845608028654) * (x + F(0.044715) * x * x * x);
}

fn clamp_keeping_nan(x: F, low: F, high: F, flags: u32) -> F {
  // A NaN anywhere is the answer (min and max may drop a NaN operand); a low above the high
  // gives the high, as PyTorch's min(max(x, low), high) does.
  if (is_nan(x)) { return x; }
  var v = x;
  if ((flags & 1u) != 0u) {
    if (is_nan(low)) { return low; }
    v = max(v, low);
  }
  if ((flags & 2u) != 0u) {
    if (is_nan(high)) { return high; }
    v = min(v, high);
  }
  return v;
}

// Whether output element i is kept by triu (upper) or tril.
fn in_triangle(i: u32, upper: bool) -> bool {
  let columns = p.extra.z;
  let rows = p.extra.w;
  let offset = i32(i % columns) - i32((i / columns) % rows);
  let diagonal = bitcast<i32>(p.scalars.x);
  return select(offset <= diagonal, offset >= diagonal, upper);
}

fn float_op(i: u32, at: vec4<u32>) -> F {
  var x = F(0);
  var y = F(0);
  var z = F(0);
  if (ARITY > 0u) { x = float_in(0u, at.y); }
  if (ARITY > 1u) { y = float_in(1u, at.z); }
  if (ARITY > 2u) { z = float_in(2u, at.w); }
  return float_of(i, x, y, z);
}

// The operator on output element i's inputs x, y and z.
fn float_of(i: u32, x: F, y: F, z: F) -> F {
  let a = scalar_a();
  let b = scalar_b();
  switch OP {
    case OP_COPY: { return x; }
    case OP_ADD: { return x + a * y; }
    case OP_SUB: { return x - a * y; }
    case OP_MUL: { return x * y; }
    case OP_DIV: { return x / y; }
    case OP_DIV_TRUNC: { return trunc(x / y); }
    case OP_DIV_FLOOR: {
      // PyTorch's: from the exact remainder, so that (x - r) / y is an integer up to rounding.
      if (y == F(0)) { return x / y; }
      let r = fmod_exact(x, y);
      var q = (x - r) / y;
      if (r != F(0) && (y < F(0)) != (r < F(0))) { q = q - F(1); }
      if (q == F(0)) { return select(F(0), -F(0), sign_bit(x) != sign_bit(y)); }
      let whole = floor(q);
      return select(whole, whole + F(1), q - whole > F(0.5));
    }
    case OP_REMAINDER: {
      var r = fmod_exact(x, y);
      if (r != F(0) && (y < F(0)) != (r < F(0))) { r = r + y; }
      return r;
    }
    case OP_FMOD: { return fmod_exact(x, y); }
    case OP_MAXIMUM: { return select(max(x, y), x + y, is_nan(x) || is_nan(y)); }
    case OP_MINIMUM: { return select(min(x, y), x + y, is_nan(x) || is_nan(y)); }
    case OP_FMAX: { return select(select(max(x, y), x, is_nan(y)), y, is_nan(x)); }
    case OP_FMIN: { return select(select(min(x, y), x, is_nan(y)), y, is_nan(x)); }
    case OP_NEG: { return -x; }
    case OP_ABS: { return keep_nan(abs(x), x); }
    case OP_RECIPROCAL: { return F(1) / x; }
    case OP_SQUARE: { return x * x; }
    case OP_CUBE: { return x * x * x; }
    case OP_RECIPROCAL_SQUARE: { return F(1) / (x * x); }
    case OP_SQRT: { return xsqrt(x); }
    case OP_RSQRT: { return xrsqrt(x); }
    case OP_EXP: { return xexp(x); }
    case OP_EXP2: { return xexp2(x); }
    case OP_EXPM1: { return xexpm1(x); }
    case OP_LOG: { return xlog(x); }
    case OP_LOG2: { return xlog2(x); }
    case OP_LOG10: { return xlog10(x); }
    case OP_LOG1P: { return xlog1p(x); }
    case OP_SIN: { return xsin(x); }
    case OP_COS: { return xcos(x); }
    case OP_TAN: { return xtan(x); }
    case OP_ASIN: { return xasin(x); }
    case OP_ACOS: { return xacos(x); }
    case OP_ATAN: { return xatan(x); }
    case OP_SINH: { return xsinh(x); }
    case OP_COSH: { return xcosh(x); }
    case OP_TANH: { return xtanh(x); }
    case OP_ASINH: { return xasinh(x); }
    case OP_ACOSH: { return xacosh(x); }
    case OP_ATANH: { return xatanh(x); }
    case OP_ERF: { return xerf(x); }
    case OP_ERFC: { return xerfc(x); }
    case OP_ERFINV: { return xerfinv(x); }
    case OP_LGAMMA: { return xlgamma(x); }
    case OP_DIGAMMA: { return xdigamma(x); }
    case OP_POW: { return xpow(x, y); }
    case OP_ATAN2: { return xatan2(x, y); }
    case OP_HYPOT: {
      if (is_inf(x) || is_inf(y)) { return float_infinity(); }
      if (is_nan(x) || is_nan(y)) { return x + y; }
      let large = max(abs(x), abs(y));
      let small = min(abs(x), abs(y));
      if (large == F(0)) { return F(0); }
      let ratio = small / large;
      return large * xsqrt(F(1) + ratio * ratio);
    }
    case OP_COPYSIGN: { return select(abs(x), -abs(x), sign_bit(y)); }
    case OP_XLOGY: {
      if (is_nan(y)) { return y; }
      if (x == F(0)) { return F(0); }
      return x * xlog(y);
    }
    case OP_XLOG1PY: {
      if (is_nan(y)) { return y; }
      if (x == F(0)) { return F(0); }
      return x * xlog1p(y);
    }
    case OP_FLOOR: { return floor(x); }
    case OP_CEIL: { return ceil(x); }
    case OP_ROUND: { return round(x); }
    case OP_ROUND_DECIMALS: { return select(round(x * a) / a, round(x / a) * a, p.extra.z != 0u); }
    case OP_TRUNC: { return trunc(x); }
    case OP_FRAC: { return x - trunc(x); }
    case OP_SIGN: {
      if (is_nan(x)) { return F(0); }
      return select(select(F(0), F(1), x > F(0)), F(-1), x < F(0));
    }
    case OP_SIGMOID: { return sigmoid(x); }
    case OP_LOGIT: {
      var v = x;
      if (p.extra.z != 0u) { v = keep_nan(clamp(x, a, F(1) - a), x); }
      return xlog(v / (F(1) - v));
    }
    case OP_SILU: { return x / (F(1) + xexp(-x)); }
    case OP_MISH: { return x * xtanh(softplus(x)); }
    case OP_GELU: { return F(0.5) * x * (F(1) + xerf(x * F(0.7071067811865476))); }
    case OP_GELU_TANH: { return F(0.5) * x * (F(1) + xtanh(gelu_tanh_inner(x))); }
    case OP_RELU: { return select(x, F(0), x < F(0) && !is_nan(x)); }
    case OP_HARDTANH: { return clamp_keeping_nan(x, a, b, 3u); }
    case OP_LEAKY_RELU: { return keep_nan(select(x * a, x, x > F(0)), x); }
    case OP_ELU: {
      let c = scalar_c();
      return keep_nan(select(x * b, xexpm1(x * c) * a * b, x <= F(0)), x);
    }
    case OP_CELU: { return keep_nan(max(x, F(0)) + min(F(0), a * xexpm1(x / a)), x); }
    case OP_SOFTPLUS: { return keep_nan(select(xlog1p(xexp(x * a)) / a, x, x * a > b), x); }
    case OP_HARDSIGMOID: { return keep_nan(min(max(x + F(3), F(0)), F(6)) / F(6), x); }
    case OP_HARDSWISH: { return x * keep_nan(min(max(x + F(3), F(0)), F(6)), x) / F(6); }
    case OP_LOG_SIGMOID: { return keep_nan(min(x, F(0)) - xlog1p(xexp(-abs(x))), x); }
    case OP_SOFTSHRINK: { return keep_nan(select(select(F(0), x + a, x < -a), x - a, x > a), x); }
    case OP_HARDSHRINK: { return select(x, F(0), x >= -a && x <= a && !is_nan(x)); }
    case OP_THRESHOLD: { return select(x, b, x <= a && !is_nan(x)); }
    case OP_NAN_TO_NUM: {
      if (is_nan(x)) { return a; }
      if (is_inf(x)) { return select(b, scalar_c(), x < F(0)); }
      return x;
    }
    case OP_CLAMP: { return clamp_keeping_nan(x, a, b, p.extra.z); }
    case OP_CLAMP_TENSOR: { return clamp_keeping_nan(x, y, z, p.extra.z); }
    case OP_LERP: { return select(y - (y - x) * (F(1) - a), x + a * (y - x), abs(a) < F(0.5)); }
    case OP_LERP_TENSOR: { return select(y - (y - x) * (F(1) - z), x + z * (y - x), abs(z) < F(0.5)); }
    case OP_ADDCMUL: { return x + a * y * z; }
    case OP_ADDCDIV: { return x + a * (y / z); }
    case OP_WHERE: { return select(z, y, x != F(0)); }
    case OP_MASKED_FILL: { return select(x, a, y != F(0)); }
    case OP_TRIU: { return select(F(0), x, in_triangle(i, true)); }
    case OP_TRIL: { return select(F(0), x, in_triangle(i, false)); }
    case OP_ARANGE: { return a + b * F(i); }
    case OP_THRESHOLD_BACKWARD: { return select(x, F(0), y <= a && !is_nan(y)); }
    case OP_SIGMOID_BACKWARD: { return x * (F(1) - y) * y; }
    case OP_TANH_BACKWARD: { return x * (F(1) - y * y); }
    case OP_GELU_BACKWARD: {
      let cdf = F(0.5) * (F(1) + xerf(y * F(0.7071067811865476)));
      let pdf = xexp(F(-0.5) * y * y) * F(0.3989422804014327);
      return x * (cdf + y * pdf);
    }
    case OP_GELU_TANH_BACKWARD: {
      let t = xtanh(gelu_tanh_inner(y));
      let inner_derivative = F(0.7978845608028654) * (F(1) + F(3) * F(0.044715) * y * y);
      return x * (F(0.5) * (F(1) + t) + F(0.5) * y * (F(1) - t * t) * inner_derivative);
    }
    case OP_SILU_BACKWARD: {
      let s = sigmoid(y);
      return x * s * (F(1) + y * (F(1) - s));
    }
    case OP_MISH_BACKWARD: {
      let t = xtanh(softplus(y));
      return x * (t + y * sigmoid(y) * (F(1) - t * t));
    }
    case OP_ELU_BACKWARD: {
      let c = scalar_c();
      if (is_nan(y)) { return y; }  // PyTorch's CPU gives NaN for a NaN input
      if (y > F(0)) { return x * b; }
      if (p.extra.z != 0u) { return x * c * (y + a * b); }
      return x * c * a * b * xexp(y * c);
    }
    case OP_LEAKY_RELU_BACKWARD: { return select(x * a, x, y > F(0)); }
    // The gradient passes strictly inside (a, b), not at a NaN, as on PyTorch's CPU.
    // A NaN input's gradient is 0, as in the CPU's vectorized loop (its scalar loop, for short
    // tensors, passes the gradient instead).
    case OP_HARDTANH_BACKWARD: { return select(F(0), x, y > a && y < b && !is_nan(y)); }
    case OP_SOFTPLUS_BACKWARD: {
      let e = xexp(y * a);
      return select(x * e / (e + F(1)), x, y * a > b);
    }
    case OP_HARDSIGMOID_BACKWARD: { return select(F(0), x / F(6), y > F(-3) && y < F(3)); }
    case OP_HARDSWISH_BACKWARD: {
      // PyTorch's ends: 0 at -3 itself, the whole gradient at 3 itself (and for NaN).
      if (y <= F(-3)) { return F(0); }
      if (y < F(3)) { return x * (y / F(3) + F(0.5)); }
      return x;
    }
    case OP_LOG_SIGMOID_BACKWARD: {
      let negative = y < F(0);
      let e = xexp(-abs(y));
      return x * (select(F(0), F(1), negative) - select(F(-1), F(1), negative) * (e / (F(1) + e)));
    }
    case OP_SHRINK_BACKWARD: { return select(x, F(0), (y >= -a && y <= a) || is_nan(y)); }
    case OP_LOGIT_BACKWARD: {
      if (p.extra.z != 0u) {
        if (y < a || y > F(1) - a) { return F(0); }
      } else if (y < F(0) || y > F(1) || is_nan(y)) {
        return float_nan();  // outside logit's domain, as PyTorch's CPU says
      }
      return x / (y * (F(1) - y));
    }
    case OP_LOGADDEXP, OP_LOGADDEXP2: {
      if (is_nan(x) || is_nan(y)) { return x + y; }
      // Equal infinities stay (their difference would be NaN).
      if (is_inf(x) && x == y) { return x; }
      let high = max(x, y);
      if (OP == OP_LOGADDEXP) { return high + xlog1p(xexp(-abs(x - y))); }
      return high + xlog1p(xexp2(-abs(x - y))) * F(1.4426950408889634);
    }
    case OP_HEAVISIDE: {
      if (is_nan(x)) { return F(0); }
      return select(select(F(0), F(1), x > F(0)), y, x == F(0));
    }
    case OP_SINC: {
      if (x == F(0)) { return F(1); }
      let product = F(3.141592653589793) * x;
      return xsin(product) / product;
    }
    case OP_LINSPACE: {
      let steps = p.extra.z;
      if (i < steps / 2u) { return a + scalar_c() * F(i); }
      return b - scalar_c() * F(steps - 1u - i);
    }
    default: { return x; }
  }
}

fn element(i: u32, at: vec4<u32>) -> SO { return SO(float_op(i, at)); }

fn element_bool(i: u32, at: vec4<u32>) -> bool { return float_op(i, at) != F(0); }

fn element_float(i: u32, at: vec4<u32>) -> F { return float_op(i, at); }

// The value of input k where it is a scalar of the launch.
fn constant_in(k: u32) -> F {
  let bits = constant_bits(k);
  return float_from_bits(bits.x, bits.y);
}

// `main` for a floating result whose operands are all flat and plain: each input a scalar,
// memory of F (or of its storage type) or the output's memory, no bytes and no half-words.
// Every access is here, at the invocation's index plus an offset, so that a compiler for CPUs
// sees memory that moves one element per invocation, checks its bounds once for the
// workgroup and runs invocations in vector lanes.
@compute @workgroup_size(256)
fn plain(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 256u;
  if (i >= p.numel) { return; }
  var x = F(0);
  var y = F(0);
  var z = F(0);
  // The tests of CONSTANT and IN_OUT are written out, not through has(), so that they fold to
  // constants here and the accesses of the branches not taken are known never to run.
  if (ARITY > 0u) {
    if ((CONSTANT & 1u) != 0u) { x = constant_in(0u); }
    else if ((IN_OUT & 1u) != 0u) { x = F(out[p.offsets.y + i]); }
    else { x = F(in0[p.offsets.y + i]); }
  }
  if (ARITY > 1u) {
    if ((CONSTANT & 2u) != 0u) { y = constant_in(1u); }
    else if ((IN_OUT & 2u) != 0u) { y = F(out[p.offsets.z + i]); }
    else { y = F(in1[p.offsets.z + i]); }
  }
  if (ARITY > 2u) {
    if ((CONSTANT & 4u) != 0u) { z = constant_in(2u); }
    else if ((IN_OUT & 4u) != 0u) { z = F(out[p.offsets.w + i]); }
    else { z = F(in2[p.offsets.w + i]); }
  }
  out[p.offsets.x + i] = SO(float_of(i, x, y, z));
}
