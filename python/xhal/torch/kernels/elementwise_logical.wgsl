// The elementwise operators with bool results (see elementwise.wgsl): comparisons of floating
// inputs in F and of integer and bool inputs in I, tests of floating values, and logic on the
// truth of any input (not zero). x, y and z are inputs 0, 1 and 2. A comparison answers as
// IEEE 754 does for a NaN (only != holds), testing for it from the bits: WGSL lets a compiler
// assume there are none, and llvmpipe does.

const OP_NONZERO: u32 = 0u;          // the truth of x: a conversion to bool
const OP_EQ: u32 = 1u;               // floating comparisons
const OP_NE: u32 = 2u;
const OP_LT: u32 = 3u;
const OP_LE: u32 = 4u;
const OP_GT: u32 = 5u;
const OP_GE: u32 = 6u;
const OP_EQ_INTEGER: u32 = 11u;      // integer (and bool) comparisons
const OP_NE_INTEGER: u32 = 12u;
const OP_LT_INTEGER: u32 = 13u;
const OP_LE_INTEGER: u32 = 14u;
const OP_GT_INTEGER: u32 = 15u;
const OP_GE_INTEGER: u32 = 16u;
const OP_ISNAN: u32 = 20u;
const OP_ISINF: u32 = 21u;
const OP_ISPOSINF: u32 = 22u;
const OP_ISNEGINF: u32 = 23u;
const OP_ISFINITE: u32 = 24u;
const OP_SIGNBIT: u32 = 25u;
const OP_NOT: u32 = 30u;             // logical_not, and bitwise_not of bools
const OP_AND: u32 = 31u;
const OP_OR: u32 = 32u;
const OP_XOR: u32 = 33u;
const OP_WHERE: u32 = 34u;           // x ? y : z
const OP_MASKED_FILL: u32 = 35u;     // y ? (word z is 1) : x
const OP_TRIU: u32 = 36u;            // words z, w: columns, rows; scalar a's low word: the diagonal
const OP_TRIL: u32 = 37u;
const OP_ISCLOSE: u32 = 38u;         // |x - y| <= a + b |y|; NaNs equal where word z is 1

// Whether x < y (`less`), x == y (`equal`) or x > y (`greater`) holds, for floats.
fn float_compare(x: F, y: F, less: bool, equal: bool, greater: bool) -> bool {
  if (is_nan(x) || is_nan(y)) { return false; }
  return (less && x < y) || (equal && x == y) || (greater && x > y);
}

fn integer_compare(x: I, y: I, less: bool, equal: bool, greater: bool) -> bool {
  return (less && x < y) || (equal && x == y) || (greater && x > y);
}

fn in_logical_triangle(i: u32, upper: bool) -> bool {
  let columns = p.extra.z;
  let rows = p.extra.w;
  let offset = i32(i % columns) - i32((i / columns) % rows);
  let diagonal = bitcast<i32>(p.scalars.x);
  return select(offset <= diagonal, offset >= diagonal, upper);
}

fn element_bool(i: u32, at: vec4<u32>) -> bool {
  switch OP {
    case OP_NONZERO: { return truth_in(0u, at.y); }
    case OP_EQ: { return float_compare(float_in(0u, at.y), float_in(1u, at.z), false, true, false); }
    case OP_NE: { return !float_compare(float_in(0u, at.y), float_in(1u, at.z), false, true, false); }
    case OP_LT: { return float_compare(float_in(0u, at.y), float_in(1u, at.z), true, false, false); }
    case OP_LE: { return float_compare(float_in(0u, at.y), float_in(1u, at.z), true, true, false); }
    case OP_GT: { return float_compare(float_in(0u, at.y), float_in(1u, at.z), false, false, true); }
    case OP_GE: { return float_compare(float_in(0u, at.y), float_in(1u, at.z), false, true, true); }
    case OP_EQ_INTEGER: { return integer_compare(int_in(0u, at.y), int_in(1u, at.z), false, true, false); }
    case OP_NE_INTEGER: { return !integer_compare(int_in(0u, at.y), int_in(1u, at.z), false, true, false); }
    case OP_LT_INTEGER: { return integer_compare(int_in(0u, at.y), int_in(1u, at.z), true, false, false); }
    case OP_LE_INTEGER: { return integer_compare(int_in(0u, at.y), int_in(1u, at.z), true, true, false); }
    case OP_GT_INTEGER: { return integer_compare(int_in(0u, at.y), int_in(1u, at.z), false, false, true); }
    case OP_GE_INTEGER: { return integer_compare(int_in(0u, at.y), int_in(1u, at.z), false, true, true); }
    case OP_ISNAN: { return is_nan(float_in(0u, at.y)); }
    case OP_ISINF: { return is_inf(float_in(0u, at.y)); }
    case OP_ISPOSINF: {
      let x = float_in(0u, at.y);
      return is_inf(x) && !sign_bit(x);
    }
    case OP_ISNEGINF: {
      let x = float_in(0u, at.y);
      return is_inf(x) && sign_bit(x);
    }
    case OP_ISFINITE: {
      let x = float_in(0u, at.y);
      return !is_inf(x) && !is_nan(x);
    }
    case OP_SIGNBIT: { return sign_bit(float_in(0u, at.y)); }
    case OP_NOT: { return !truth_in(0u, at.y); }
    case OP_AND: { return truth_in(0u, at.y) && truth_in(1u, at.z); }
    case OP_OR: { return truth_in(0u, at.y) || truth_in(1u, at.z); }
    case OP_XOR: { return truth_in(0u, at.y) != truth_in(1u, at.z); }
    case OP_WHERE: { return select(truth_in(2u, at.w), truth_in(1u, at.z), truth_in(0u, at.y)); }
    case OP_MASKED_FILL: { return select(truth_in(0u, at.y), p.extra.z != 0u, truth_in(1u, at.z)); }
    case OP_TRIU: { return truth_in(0u, at.y) && in_logical_triangle(i, true); }
    case OP_TRIL: { return truth_in(0u, at.y) && in_logical_triangle(i, false); }
    case OP_ISCLOSE: {
      let x = float_in(0u, at.y);
      let y = float_in(1u, at.z);
      if (is_nan(x) || is_nan(y)) { return p.extra.z != 0u && is_nan(x) && is_nan(y); }
      if (x == y) { return true; }
      if (is_inf(x) || is_inf(y)) { return false; }
      let a = float_from_bits(p.scalars.x, p.scalars.y);
      let b = float_from_bits(p.scalars.z, p.scalars.w);
      return abs(x - y) <= a + b * abs(y);
    }
    default: { return false; }
  }
}

fn element(i: u32, at: vec4<u32>) -> SO { return select(SO(0), SO(1), element_bool(i, at)); }

fn element_float(i: u32, at: vec4<u32>) -> F { return select(F(0), F(1), element_bool(i, at)); }
