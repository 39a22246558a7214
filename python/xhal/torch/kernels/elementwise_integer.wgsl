// The elementwise operators with integer results, computed in I (see elementwise.wgsl): x, y
// and z are inputs 0, 1 and 2, a and b the operator's scalars. Integer arithmetic wraps, as
// PyTorch's does. Division by zero never reaches a kernel: the C++ side raises PyTorch's
// ZeroDivisionError first.

const OP_COPY: u32 = 0u;
const OP_ADD: u32 = 1u;            // x + a y
const OP_SUB: u32 = 2u;            // x - a y
const OP_MUL: u32 = 3u;
const OP_DIV_TRUNC: u32 = 5u;
const OP_DIV_FLOOR: u32 = 6u;
const OP_REMAINDER: u32 = 7u;      // Python's %: the sign of the divisor
const OP_FMOD: u32 = 8u;           // C's %: the sign of the dividend
const OP_MAXIMUM: u32 = 9u;
const OP_MINIMUM: u32 = 10u;
const OP_NEG: u32 = 13u;
const OP_ABS: u32 = 14u;
const OP_SQUARE: u32 = 16u;
const OP_POW: u32 = 45u;           // x ** y; a negative y gives 0 but for x = 1 and x = -1
const OP_SIGN: u32 = 57u;
const OP_THRESHOLD: u32 = 75u;     // x <= a: b
const OP_CLAMP: u32 = 77u;         // to [a, b]; word z bit 0: a given, bit 1: b given
const OP_CLAMP_TENSOR: u32 = 78u;  // to [y, z]; word z bit 0: y given, bit 1: z given
const OP_WHERE: u32 = 83u;         // x ? y : z
const OP_MASKED_FILL: u32 = 84u;   // y ? a : x
const OP_TRIU: u32 = 85u;          // words z, w: columns, rows; a's low word: the diagonal
const OP_TRIL: u32 = 86u;
const OP_ARANGE: u32 = 87u;        // a + b i
const OP_BITWISE_AND: u32 = 110u;
const OP_BITWISE_OR: u32 = 111u;
const OP_BITWISE_XOR: u32 = 112u;
const OP_BITWISE_NOT: u32 = 113u;
const OP_HEAVISIDE: u32 = 106u;    // x == 0: y; else x > 0

fn integer_scalar_a() -> I { return int_from_bits(p.scalars.x, p.scalars.y); }
fn integer_scalar_b() -> I { return int_from_bits(p.scalars.z, p.scalars.w); }

fn integer_pow(base: I, exponent: I) -> I {
  if (exponent < I(0)) {
    if (base == I(1)) { return I(1); }
    if (base == I(-1)) { return select(I(1), I(-1), (exponent & I(1)) != I(0)); }
    return I(0);
  }
  var result = I(1);
  var factor = base;
  var e = exponent;
  for (var step = 0u; step < 64u && e != I(0); step = step + 1u) {
    if ((e & I(1)) != I(0)) { result = result * factor; }
    factor = factor * factor;
    e = e >> 1u;
  }
  return result;
}

// Whether output element i is kept by triu (upper) or tril.
fn in_integer_triangle(i: u32, upper: bool) -> bool {
  let columns = p.extra.z;
  let rows = p.extra.w;
  let offset = i32(i % columns) - i32((i / columns) % rows);
  let diagonal = bitcast<i32>(p.scalars.x);
  return select(offset <= diagonal, offset >= diagonal, upper);
}

fn integer_op(i: u32, at: vec4<u32>) -> I {
  var x = I(0);
  var y = I(0);
  var z = I(0);
  if (ARITY > 0u) { x = int_in(0u, at.y); }
  if (ARITY > 1u) { y = int_in(1u, at.z); }
  if (ARITY > 2u) { z = int_in(2u, at.w); }
  let a = integer_scalar_a();
  let b = integer_scalar_b();
  switch OP {
    case OP_COPY: { return x; }
    case OP_ADD: { return x + a * y; }
    case OP_SUB: { return x - a * y; }
    case OP_MUL: { return x * y; }
    case OP_DIV_TRUNC: { return x / y; }
    case OP_DIV_FLOOR: {
      let q = x / y;
      return select(q, q - I(1), x % y != I(0) && (x < I(0)) != (y < I(0)));
    }
    case OP_REMAINDER: {
      let r = x % y;
      return select(r, r + y, r != I(0) && (r < I(0)) != (y < I(0)));
    }
    case OP_FMOD: { return x % y; }
    case OP_MAXIMUM: { return max(x, y); }
    case OP_MINIMUM: { return min(x, y); }
    case OP_NEG: { return -x; }
    case OP_ABS: { return abs(x); }
    case OP_SQUARE: { return x * x; }
    case OP_POW: { return integer_pow(x, y); }
    case OP_SIGN: { return select(select(I(0), I(1), x > I(0)), I(-1), x < I(0)); }
    case OP_THRESHOLD: { return select(x, b, x <= a); }
    case OP_CLAMP: {
      var v = x;
      if ((p.extra.z & 1u) != 0u) { v = max(v, a); }
      if ((p.extra.z & 2u) != 0u) { v = min(v, b); }
      return v;
    }
    case OP_CLAMP_TENSOR: {
      var v = x;
      if ((p.extra.z & 1u) != 0u) { v = max(v, y); }
      if ((p.extra.z & 2u) != 0u) { v = min(v, z); }
      return v;
    }
    case OP_WHERE: { return select(z, y, x != I(0)); }
    case OP_MASKED_FILL: { return select(x, a, y != I(0)); }
    case OP_TRIU: { return select(I(0), x, in_integer_triangle(i, true)); }
    case OP_TRIL: { return select(I(0), x, in_integer_triangle(i, false)); }
    case OP_ARANGE: { return a + b * I(i); }
    case OP_BITWISE_AND: { return x & y; }
    case OP_BITWISE_OR: { return x | y; }
    case OP_BITWISE_XOR: { return x ^ y; }
    case OP_BITWISE_NOT: { return ~x; }
    case OP_HEAVISIDE: { return select(select(I(0), I(1), x > I(0)), y, x == I(0)); }
    default: { return x; }
  }
}

fn element(i: u32, at: vec4<u32>) -> SO { return SO(integer_op(i, at)); }

fn element_bool(i: u32, at: vec4<u32>) -> bool { return integer_op(i, at) != I(0); }

fn element_float(i: u32, at: vec4<u32>) -> F { return F(integer_op(i, at)); }
