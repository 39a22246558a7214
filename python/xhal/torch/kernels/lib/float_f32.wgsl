// The float library of the PyTorch device's kernels for F = f32 (float32 tensors, and float16
// tensors, which compute in f32). A kernel file declares `alias F = f32;` and the loader
// prepends this file; float_f64.wgsl defines the same functions for F = f64. README.md lists
// them, with the accuracy measured on every backend.
//
// WGSL's f32 built-ins (exp, log, sin, pow, ...) have loose accuracy requirements and differ
// between backends (on lavapipe, log(1e-45) is -88.0, not -103.3, and asin is off by 3800 ulp), so
// everything here but sqrt is written from arithmetic and gives the same answer on every
// device. Only 32-bit types are used. NaN is found from the bits (compilers may assume there
// is none). No result depends on whether a compiler fuses a * b + c: where a product must be
// exact, its factors are cut to few enough bits that it is exact either way. Every constant
// and coefficient comes from derive_coefficients.py, which finds them by the comments that
// name them (--check compares, --update rewrites). Internal names start with xl_ and XL_.

const XL_LN2_HI = 0.693115234375; // constant: LN2F_HI
const XL_LN2_LO = 3.194618329871446e-05; // constant: LN2F_LO
const XL_LN2R_HI = 0.6931471824645996; // constant: LN2FR_HI
const XL_LN2R_LO = -1.9046542121259336e-09; // constant: LN2FR_LO
const XL_LOG2E = 1.4426950216293335; // constant: LOG2E
const XL_IVLN2_HI = 1.4423828125; // constant: IVLN2F_HI
const XL_IVLN2_LO = 0.00031222839606925845; // constant: IVLN2F_LO
const XL_IVLN10_HI = 0.4342041015625; // constant: IVLN10F_HI
const XL_IVLN10_LO = 9.038033749675378e-05; // constant: IVLN10F_LO
const XL_LOG10_2_HI = 0.301025390625; // constant: LOG10_2F_HI
const XL_LOG10_2_LO = 4.605039066518657e-06; // constant: LOG10_2F_LO
const XL_SQRT2 = 1.4142135381698608; // constant: SQRT2
const XL_TWO_THIRDS = 0.6666666865348816; // constant: TWO_THIRDS
const XL_TWO_THIRDS_HI = 0.66650390625; // constant: TWO_THIRDSF_HI
const XL_TWO_THIRDS_LO = 0.00016276042151730508; // constant: TWO_THIRDSF_LO
const XL_TWO_OVER_PI = 0.6366197466850281; // constant: TWO_OVER_PI
const XL_PIO2_1 = 1.5703125; // constant: PIO2F_1
const XL_PIO2_2 = 0.0004837512969970703; // constant: PIO2F_2
const XL_PIO2_3 = 7.549533620476723e-08; // constant: PIO2F_3
const XL_PIO2_4 = 2.5632829192545614e-12; // constant: PIO2F_4
const XL_PIO2_5 = 6.120321263680673e-17; // constant: PIO2F_5
const XL_PIO2_6 = 2.9127320270547964e-20; // constant: PIO2F_6
const XL_PIO4 = 0.7853981852531433; // constant: PIO4
const XL_PI_HI = 3.1415927410125732; // constant: PIF_HI
const XL_PI_LO = -8.742277657347586e-08; // constant: PIF_LO
const XL_PIO2_HI = 1.5707963705062866; // constant: PIO2F_R_HI
const XL_PIO2_LO = -4.371138828673793e-08; // constant: PIO2F_R_LO
const XL_PIO4_HI = 0.7853981852531433; // constant: PIO4F_R_HI
const XL_PIO4_LO = -2.1855694143368964e-08; // constant: PIO4F_R_LO
const XL_PI3O4 = 2.356194496154785; // constant: PI3O4
const XL_ATAN_HALF_HI = 0.46364760398864746; // constant: ATAN_HALFF_HI
const XL_ATAN_HALF_LO = 5.01215868808913e-09; // constant: ATAN_HALFF_LO
const XL_ATAN_ONE_HALF_HI = 0.9827937483787537; // constant: ATAN_ONE_HALFF_HI
const XL_ATAN_ONE_HALF_LO = -2.5131424052915463e-08; // constant: ATAN_ONE_HALFF_LO
const XL_ERX = 0.8427007794380188; // constant: ERX
const XL_SQRTPI_2 = 0.8862269520759583; // constant: SQRTPI_2
const XL_HALF_LOG_2PI = 0.9189385175704956; // constant: HALF_LOG_2PI
const XL_X0M1_HI = 0.4616321325302124; // constant: X0M1F_HI
const XL_X0M1_LO = 1.243815006546356e-08; // constant: X0M1F_LO
const XL_EULER = 0.5772156715393066; // constant: EULER
const XL_ERFC_MID_HI = 0.5133160352706909; // constant: ERFC_MIDF_HI
const XL_ERFC_MID_LO = -1.1890856299601182e-08; // constant: ERFC_MIDF_LO
const XL_INVSQRTPI_HI = 0.564189612865448; // constant: INVSQRTPIF_HI
const XL_INVSQRTPI_LO = -2.9317691385699618e-08; // constant: INVSQRTPIF_LO
const XL_LGAMMA_MID_HI = -0.12078224122524261; // constant: LGAMMA_MIDF_HI
const XL_LGAMMA_MID_LO = 3.589997410458068e-09; // constant: LGAMMA_MIDF_LO

// ---- bits ------------------------------------------------------------------------------

// The f32 whose bits the host passed in lo (hi is ignored).
fn float_from_bits(lo: u32, hi: u32) -> F { return bitcast<F>(lo); }
fn is_nan(x: F) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn is_inf(x: F) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }
// True for -0.0 and for NaNs with the sign bit set too.
fn sign_bit(x: F) -> bool { return (bitcast<u32>(x) >> 31u) != 0u; }

// +infinity and a quiet NaN, for kernels that return them: a division by zero would be a
// constant expression, which WGSL refuses.
fn float_infinity() -> F { return bitcast<F>(0x7f800000u); }
fn float_nan() -> F { return bitcast<F>(0x7fc00000u); }
fn xl_inf() -> F { return float_infinity(); }
fn xl_nan() -> F { return float_nan(); }
// |a| with b's sign bit.
fn xl_copysign(a: F, b: F) -> F {
  return bitcast<F>((bitcast<u32>(a) & 0x7fffffffu) | (bitcast<u32>(b) & 0x80000000u));
}
// 2^k, -126 <= k <= 127.
fn xl_pow2(k: i32) -> F { return bitcast<F>(u32(k + 127) << 23u); }
// m 2^k for |k| <= 252, in two normal factors so that a subnormal result rounds once.
fn xl_scale(m: F, k: i32) -> F {
  let h = k / 2;
  return m * xl_pow2(h) * xl_pow2(k - h);
}
// a with its 12 low significand bits cleared (12 significant bits): the product of two such
// numbers is exact, and so is each of the four partial products of two floats' halves.
fn xl_hi12(a: F) -> F { return bitcast<F>(bitcast<u32>(a) & 0xfffff000u); }

// x itself, in a form that no compiler can see through. Mesa's NIR (Vulkan here, on lavapipe,
// and Mesa's GPU drivers) treats WGSL's float operations as inexact and rewrites (a + b) - a
// to b and (x - c1) - c2 to x - (c1 + c2), which undoes the error-free transformations and
// the two-part constants below; a value passed through xl_fence is opaque to those rules.
fn xl_fence(x: F) -> F { return select(x, -x, is_nan(x)); }

// ---- two-float arithmetic ----------------------------------------------------------------

// hi + lo, |lo| <= ulp(hi) / 2.
struct XlDD { hi: F, lo: F }
// a + b = hi + lo exactly (Knuth's two-sum).
fn xl_two_sum(a: F, b: F) -> XlDD {
  let s = xl_fence(a + b);
  let bb = xl_fence(s - a);
  return XlDD(s, (a - (s - bb)) + (b - bb));
}
// a + b = hi + lo exactly, for |a| >= |b| or a = 0 (Dekker's fast two-sum).
fn xl_fast_two_sum(a: F, b: F) -> XlDD {
  let s = xl_fence(a + b);
  return XlDD(s, b - (s - a));
}
// a b = hi + lo exactly, barring underflow (Dekker's product, with halves cut by bits).
fn xl_two_prod(a: F, b: F) -> XlDD {
  let p = a * b;
  let ah = xl_hi12(a);
  let al = a - ah;
  let bh = xl_hi12(b);
  let bl = b - bh;
  return XlDD(p, ((ah * bh - p) + ah * bl + al * bh) + al * bl);
}

// ---- exp ---------------------------------------------------------------------------------

// (e^r - 1 - r) / r^2 for |r| <= ln2 / 2: minimax polynomial of degree 4.
fn xl_exp_tail(r: F) -> F {
  // coefficients: exp
  var p = F(0.0013941110810264945);
  p = p * r + 0.008363177999854088;
  p = p * r + 0.04166637361049652;
  p = p * r + 0.16666576266288757;
  p = p * r + 0.5;
  return p;
}

// e^(hi + lo) = m 2^k, m in [0.7, 1.5], for |hi| <= 200 and |lo| <= 2^-10.
struct XlExp { m: F, k: i32 }
fn xl_exp_parts(hi: F, lo: F) -> XlExp {
  // hi + lo = k ln2 + r, |r| <= ln2 / 2: k LN2_HI is exact (LN2_HI has 12 bits) and so is
  // hi - k LN2_HI (Sterbenz), so r = r_hi + r_lo loses nothing to the reduction.
  let k = round(hi * XL_LOG2E);
  let r_hi = hi - k * XL_LN2_HI;
  let r_lo = lo - k * XL_LN2_LO;
  let r = r_hi + r_lo;
  // e^r = 1 + r + r^2 P(r), the small terms added first.
  return XlExp(1.0 + xl_fence(r_hi + xl_fence(r_lo + r * r * xl_exp_tail(r))), i32(k));
}

fn xexp(x: F) -> F {
  if (is_nan(x)) { return x; }
  if (x > 88.8) { return xl_inf(); }
  if (x < -104.0) { return 0.0; }
  let e = xl_exp_parts(x, 0.0);
  return xl_scale(e.m, e.k);
}

fn xexp2(x: F) -> F {
  if (is_nan(x)) { return x; }
  if (x >= 128.0) { return xl_inf(); }
  if (x < -151.0) { return 0.0; }
  // 2^x = 2^k e^(f ln2), f = x - k exact, f ln2 in two floats.
  let k = round(x);
  let f = x - k;
  let r = xl_two_prod(f, XL_LN2R_HI);
  let e = xl_exp_parts(r.hi, r.lo + f * XL_LN2R_LO);
  return xl_scale(e.m, e.k + i32(k));
}

fn xexpm1(x: F) -> F {
  if (is_nan(x) || x == 0.0) { return x; }
  if (x > 88.8) { return xl_inf(); }
  if (x < -20.0) { return -1.0; }
  // x = k ln2 + r as in xl_exp_parts; e^r - 1 = r + r^2 P(r) keeps its relative accuracy
  // near 0, and 2^k (1 + e) - 1 = 2^k e + (2^k - 1) rounds once (2^k e and 2^k - 1 exact).
  let k = round(x * XL_LOG2E);
  let r_hi = x - k * XL_LN2_HI;
  let r_lo = -(k * XL_LN2_LO);
  let r = r_hi + r_lo;
  let e = r_hi + xl_fence(r_lo + r * r * xl_exp_tail(r));
  if (k == 0.0) { return e; }
  let ki = i32(k);
  if (ki > 25) { return xl_scale(1.0 + e, ki); }
  let p = xl_pow2(ki);
  return p * e + xl_fence(p - 1.0);
}

// ---- log ---------------------------------------------------------------------------------

// (2 atanh(s) / s - 2) / s^2 at z = s^2, s^2 <= 0.0295: minimax polynomial of degree 3.
// log(1 + f) = 2 atanh(s), s = f / (2 + f), = 2s + s z Q(z) = f - f^2/2 + s (f^2/2 + z Q(z)).
fn xl_log_q(z: F) -> F {
  // coefficients: log
  var p = F(0.23332267999649048);
  p = p * z + 0.2855074107646942;
  p = p * z + 0.4000012278556824;
  p = p * z + 0.6666666865348816;
  return p;
}

// x = 2^e (1 + f), 1 + f in [sqrt(1/2), sqrt(2)), f exact; for x > 0 finite (a subnormal x
// is scaled by 2^24 first).
struct XlLogArg { e: F, f: F }
fn xl_log_arg(x: F) -> XlLogArg {
  var v = x;
  var e = -127;
  if (x < 0x1p-126) {
    v = x * 0x1p24;
    e = -151;
  }
  let b = bitcast<u32>(v);
  e = e + i32(b >> 23u);
  var m = bitcast<F>((b & 0x007fffffu) | 0x3f800000u);
  if (m > XL_SQRT2) {
    m = m * 0.5;
    e = e + 1;
  }
  return XlLogArg(F(e), m - 1.0);
}

// log(1 + f) - f + f^2/2 = s (f^2/2 + z Q(z)), for 1 + f in [sqrt(1/2), sqrt(2)].
fn xl_log_tail(f: F) -> F {
  let s = f / (2.0 + f);
  let z = s * s;
  return s * (0.5 * f * f + z * xl_log_q(z));
}

fn xlog(x: F) -> F {
  if (is_nan(x)) { return x; }
  if (x == 0.0) { return -xl_inf(); }
  if (x < 0.0) { return xl_nan(); }
  if (is_inf(x)) { return x; }
  let a = xl_log_arg(x);
  let hfsq = 0.5 * a.f * a.f;
  return a.e * XL_LN2_HI - xl_fence(xl_fence(hfsq - xl_fence(xl_log_tail(a.f) + a.e * XL_LN2_LO)) - a.f);
}

fn xlog1p(x: F) -> F {
  if (is_nan(x) || x == 0.0) { return x; }
  if (x == -1.0) { return -xl_inf(); }
  if (x < -1.0) { return xl_nan(); }
  if (is_inf(x)) { return x; }
  var e = F(0.0);
  var f = x;
  var c = F(0.0);
  if (x < -0.2928 || x > 0.4142) {
    // 1 + x = u (1 + c): log1p(x) = log(u) + c
    let u = xl_fence(1.0 + x);
    let a = xl_log_arg(u);
    e = a.e;
    f = a.f;
    c = (x - (u - 1.0)) / u;
  }
  let hfsq = 0.5 * f * f;
  return e * XL_LN2_HI - xl_fence(xl_fence(hfsq - xl_fence(xl_log_tail(f) + (e * XL_LN2_LO + c))) - f);
}

// log(1 + f) = hi + lo with hi = f - f^2/2 cut to 12 bits, so that hi times a 12-bit constant
// is exact; log2 and log10 scale hi and lo separately.
fn xl_log_hi_lo(f: F) -> XlDD {
  let hfsq = 0.5 * f * f;
  let hi = xl_hi12(f - hfsq);
  return XlDD(hi, xl_fence((f - hi) - hfsq) + xl_log_tail(f));
}

fn xlog2(x: F) -> F {
  if (is_nan(x)) { return x; }
  if (x == 0.0) { return -xl_inf(); }
  if (x < 0.0) { return xl_nan(); }
  if (is_inf(x)) { return x; }
  let a = xl_log_arg(x);
  let l = xl_log_hi_lo(a.f);
  let v_hi = l.hi * XL_IVLN2_HI;
  let v_lo = xl_fence((l.lo + l.hi) * XL_IVLN2_LO) + l.lo * XL_IVLN2_HI;
  let w = xl_fence(a.e + v_hi);
  return xl_fence(v_lo + ((a.e - w) + v_hi)) + w;
}

fn xlog10(x: F) -> F {
  if (is_nan(x)) { return x; }
  if (x == 0.0) { return -xl_inf(); }
  if (x < 0.0) { return xl_nan(); }
  if (is_inf(x)) { return x; }
  let a = xl_log_arg(x);
  let l = xl_log_hi_lo(a.f);
  let v_hi = l.hi * XL_IVLN10_HI;
  let v_lo = xl_fence((l.lo + l.hi) * XL_IVLN10_LO) + l.lo * XL_IVLN10_HI;
  let y = a.e * XL_LOG10_2_HI;
  let w = xl_fence(y + v_hi);
  return xl_fence(v_lo + xl_fence(((y - w) + v_hi) + a.e * XL_LOG10_2_LO)) + w;
}

// 3 (atanh(s) / s - 1 - s^2 / 3) / s^4 at z = s^2, s^2 <= 0.0295: minimax polynomial of degree 3.
fn xl_log_dd_w(z: F) -> F {
  // coefficients: log_dd
  var p = F(0.28682881593704224);
  p = p * z + 0.33307045698165894;
  p = p * z + 0.42857298254966736;
  p = p * z + 0.6000000238418579;
  return p;
}

// log x = hi + lo to about 2^-40 relative, x > 0 finite: the log of pow and lgamma.
// log(1 + f) = 2 atanh(s) = (2/3) s (3 + s^2 + w), w = s^4 W(s^2), s = f / (2 + f); s is
// carried as s_h + s_l, 3 + s^2 + w as b_h + b_l, and each product is of halves cut so
// that it is exact.
fn xl_log_dd(x: F) -> XlDD {
  let a = xl_log_arg(x);
  let f = a.f;
  let v = 2.0 + f;
  let s = f / v;
  let s_h = xl_hi12(s);
  let v_h = xl_hi12(v);
  let v_l = f - (v_h - 2.0);
  let s_l = ((f - s_h * v_h) - s_h * v_l) / v;
  let z = s * s;
  let sh2 = s_h * s_h;
  let b_h = xl_fence(3.0 + sh2);
  let b_l = (sh2 - (b_h - 3.0)) + (s_l * (s_h + s) + z * z * xl_log_dd_w(z));
  let c_h = xl_hi12(b_h + b_l);
  let c_l = (b_h - c_h) + b_l;
  let u = s_h * c_h;
  let t = s_l * c_h + s * c_l;
  let p_h = xl_hi12(u + t);
  let p_l = t - (p_h - u);
  let l = xl_two_sum(a.e * XL_LN2_HI, XL_TWO_THIRDS_HI * p_h);
  let lo = (XL_TWO_THIRDS_LO * p_h + XL_TWO_THIRDS * p_l) + a.e * XL_LN2_LO;
  return xl_fast_two_sum(l.hi, l.lo + lo);
}

// ---- pow ---------------------------------------------------------------------------------

fn xpow(x: F, y: F) -> F {
  if (y == 0.0 || x == 1.0) { return 1.0; }
  if (is_nan(x) || is_nan(y)) { return x + y; }
  let ax = abs(x);
  if (is_inf(y)) {
    if (ax == 1.0) { return 1.0; }
    return select(xl_inf(), F(0.0), (ax < 1.0) == (y > 0.0));
  }
  let y_int = floor(y) == y;
  let y_odd = y_int && abs(y) < 0x1p24 && y - 2.0 * floor(0.5 * y) == 1.0;
  if (x == 0.0 || is_inf(x)) {
    let r = select(F(0.0), xl_inf(), (x == 0.0) == (y < 0.0));
    return select(r, xl_copysign(r, x), y_odd);
  }
  if (x < 0.0 && !y_int) { return xl_nan(); }
  // |x|^y = e^(y log|x|), y log|x| to about 2^-40 relative in two floats.
  let l = xl_log_dd(ax);
  let t = y * l.hi;
  var r = F(0.0);
  if (t > 88.8) {
    r = xl_inf();
  } else if (t >= -104.0) {
    let p = xl_two_prod(y, l.hi);
    let q = xl_fast_two_sum(p.hi, p.lo + y * l.lo);
    let e = xl_exp_parts(q.hi, q.lo);
    r = xl_scale(e.m, e.k);
  }
  return select(r, -r, x < 0.0 && y_odd);
}

// ---- sqrt --------------------------------------------------------------------------------

// WGSL's sqrt is correctly rounded on every backend here (measured), sqrt(-0) = -0.
fn xsqrt(x: F) -> F {
  if (is_nan(x)) { return x; }
  return sqrt(x);
}
// 1 / sqrt(x), as PyTorch computes rsqrt (WGSL's inverseSqrt is off by up to 1.5 ulp).
fn xrsqrt(x: F) -> F {
  if (is_nan(x)) { return x; }
  return 1.0 / sqrt(x);
}

// ---- sin, cos, tan -----------------------------------------------------------------------

// x = q pi/2 + (hi + lo), q in 0..3 (mod 4), |hi + lo| <= pi/4 + ulp.
struct XlAngle { hi: F, lo: F, q: i32 }

// 2/pi in 12-bit words, the most significant first: 2/pi = sum_j w[j] 2^(-12 (j + 1)).
const XL_TWO_OVER_PI_12 = array<u32, 18>( // table: TWO_OVER_PI_12
  0xa2fu, 0x983u, 0x6e4u, 0xe44u, 0x152u, 0x9fcu, 0x275u, 0x7d1u, 0xf53u,
  0x4ddu, 0xc0du, 0xb62u, 0x959u, 0x93cu, 0x439u, 0x041u, 0xfe5u, 0x163u
);

// x = q pi/2 + (hi + lo) for 2^13 <= |x| finite: Payne and Hanek's reduction. |x| = m 2^e, m a
// 24-bit integer; the bits of 2/pi before word j0 add only multiples of 4 to x 2/pi, so m times
// words j0 .. j0 + 9 (exact, in 12-bit limbs) gives x 2/pi mod 4 to 2^-71 or better, so that
// the reduced argument keeps its 24 bits down to 2^-46.
fn xl_reduce_big(x: F) -> XlAngle {
  let b = bitcast<u32>(abs(x));
  let e = i32(b >> 23u) - 150;
  let m = (b & 0x007fffffu) | 0x00800000u;
  let m_lo = m & 0xfffu;
  let m_hi = m >> 12u;
  let j0 = select(0, (e - 14) / 12 + 1, e >= 14);
  var w = array<u32, 10>();
  for (var i = 0; i < 10; i = i + 1) { w[i] = XL_TWO_OVER_PI_12[j0 + 9 - i]; }
  // s = m (w[9] ... w[0]) in 12-bit limbs, the least significant first
  var s = array<u32, 13>();
  var carry = 0u;
  for (var k = 0; k < 13; k = k + 1) {
    var col = carry;
    if (k < 10) { col = col + ((m_lo * w[k]) & 0xfffu); }
    if (k >= 1 && k < 11) { col = col + ((m_lo * w[k - 1]) >> 12u) + ((m_hi * w[k - 1]) & 0xfffu); }
    if (k >= 2 && k < 12) { col = col + ((m_hi * w[k - 2]) >> 12u); }
    s[k] = col & 0xfffu;
    carry = col >> 12u;
  }
  // x 2/pi = s 2^-sh: the quadrant is bits sh and sh + 1, the fraction the 72 bits below.
  let sh = 12 * (j0 + 10) - e;
  let l = sh / 12;
  let off = u32(sh % 12);
  var q = i32(((s[l] | (s[l + 1] << 12u)) >> off) & 3u);
  var f = array<u32, 3>();
  for (var i = 0; i < 3; i = i + 1) {
    let p = sh - 24 * (i + 1);
    let pl = p / 12;
    let po = u32(p % 12);
    f[i] = ((s[pl] >> po) | (s[pl + 1] << (12u - po)) | (s[pl + 2] << (24u - po))) & 0xffffffu;
  }
  // a fraction of 1/2 or more is one quadrant on, minus the rest (f in base 2^24)
  var neg = false;
  if (f[0] >= 0x800000u) {
    neg = true;
    q = q + 1;
    var c = 1u;
    for (var i = 2; i >= 0; i = i - 1) {
      let v = (0xffffffu - f[i]) + c;
      f[i] = v & 0xffffffu;
      c = v >> 24u;
    }
  }
  // the fraction in two floats, 24 bits at a time (each conversion exact)
  var t = xl_fast_two_sum(F(f[0]) * 0x1p-24, F(f[1]) * 0x1p-48);
  t = xl_fast_two_sum(t.hi, t.lo + F(f[2]) * 0x1p-72);
  // times pi/2
  let p = xl_two_prod(t.hi, XL_PIO2_HI);
  var r = xl_fast_two_sum(p.hi, p.lo + (t.hi * XL_PIO2_LO + t.lo * XL_PIO2_HI));
  if (neg) { r = XlDD(-r.hi, -r.lo); }
  if (x < 0.0) { return XlAngle(-r.hi, -r.lo, (4 - (q & 3)) & 3); }
  return XlAngle(r.hi, r.lo, q & 3);
}

// Cody and Waite's reduction with pi/2 in five 11-bit pieces and a rest: k PIO2_i is exact for
// |k| < 2^13, and the running difference is carried in two floats, so hi + lo is right to
// about 2^-66 absolute for |x| < 2^13; xl_reduce_big beyond.
fn xl_reduce(x: F) -> XlAngle {
  if (abs(x) <= XL_PIO4) { return XlAngle(x, 0.0, 0); }
  if (abs(x) >= 0x1p13) { return xl_reduce_big(x); }
  let k = round(x * XL_TWO_OVER_PI);
  var s = xl_two_sum(x - k * XL_PIO2_1, -(k * XL_PIO2_2));
  var lo = s.lo;
  s = xl_two_sum(s.hi, -(k * XL_PIO2_3));
  lo = lo + s.lo;
  s = xl_two_sum(s.hi, -(k * XL_PIO2_4));
  lo = lo + s.lo;
  s = xl_two_sum(s.hi, -(k * XL_PIO2_5));
  lo = lo + s.lo - k * XL_PIO2_6;
  s = xl_fast_two_sum(s.hi, lo);
  return XlAngle(s.hi, s.lo, i32(k - 4.0 * floor(0.25 * k)));
}

// (sin(y) / y - 1) / y^2 at z = y^2, |y| <= pi/4: minimax polynomial of degree 3.
fn xl_sin_s(z: F) -> F {
  // coefficients: sin
  var p = F(2.725000058489968e-06);
  p = p * z + -0.00019840087043121457;
  p = p * z + 0.008333331905305386;
  p = p * z + -0.1666666716337204;
  return p;
}
// (cos(y) - 1 + y^2/2) / y^4 at z = y^2, |y| <= pi/4: minimax polynomial of degree 2.
fn xl_cos_c(z: F) -> F {
  // coefficients: cos
  var p = F(2.454804052831605e-05);
  p = p * z + -0.001388830365613103;
  p = p * z + 0.0416666641831398;
  return p;
}
// sin(y + yl) for |y| <= pi/4, |yl| <= ulp(y): y + y^3 S(y^2) + yl cos(y).
fn xl_sin_kernel(y: F, yl: F) -> F {
  let z = y * y;
  return y + xl_fence(y * z * xl_sin_s(z) + yl * xl_fence(1.0 - 0.5 * z));
}
// cos(y + yl) = 1 - y^2/2 + y^4 C(y^2) - y yl, with the rounding error of 1 - y^2/2 added back.
fn xl_cos_kernel(y: F, yl: F) -> F {
  let z = y * y;
  let hz = 0.5 * z;
  let w = xl_fence(1.0 - hz);
  return w + xl_fence(xl_fence((1.0 - w) - hz) + (z * z * xl_cos_c(z) - y * yl));
}

fn xsin(x: F) -> F {
  if (is_nan(x)) { return x; }
  if (is_inf(x)) { return xl_nan(); }
  if (abs(x) < 0x1p-12) { return x; }
  let a = xl_reduce(x);
  let v = select(xl_sin_kernel(a.hi, a.lo), xl_cos_kernel(a.hi, a.lo), (a.q & 1) == 1);
  return select(v, -v, a.q >= 2);
}

fn xcos(x: F) -> F {
  if (is_nan(x)) { return x; }
  if (is_inf(x)) { return xl_nan(); }
  let a = xl_reduce(x);
  let v = select(xl_cos_kernel(a.hi, a.lo), xl_sin_kernel(a.hi, a.lo), (a.q & 1) == 1);
  return select(v, -v, a.q == 1 || a.q == 2);
}

fn xtan(x: F) -> F {
  if (is_nan(x)) { return x; }
  if (is_inf(x)) { return xl_nan(); }
  if (abs(x) < 0x1p-12) { return x; }
  let a = xl_reduce(x);
  let s = xl_sin_kernel(a.hi, a.lo);
  let c = xl_cos_kernel(a.hi, a.lo);
  return select(s / c, -c / s, (a.q & 1) == 1);
}

// ---- atan, asin, acos --------------------------------------------------------------------

// (atan(t) / t - 1) / t^2 at z = t^2, |t| <= 7/16: minimax polynomial of degree 5.
fn xl_atan_a(z: F) -> F {
  // coefficients: atan
  var p = F(0.04836508259177208);
  p = p * z + -0.0853893831372261;
  p = p * z + 0.11059371381998062;
  p = p * z + -0.14283478260040283;
  p = p * z + 0.1999996453523636;
  p = p * z + -0.3333333432674408;
  return p;
}

fn xatan(x: F) -> F {
  if (is_nan(x)) { return x; }
  let a = abs(x);
  if (a < 0x1p-12) { return x; }
  var r = F(0.0);
  if (a < 0.4375) {
    let z = a * a;
    r = a + a * z * xl_atan_a(z);
  } else if (a >= 0x1p26) {
    r = XL_PIO2_HI;
  } else {
    // atan(a) = atan(b) + atan(t), t = (a - b) / (1 + a b), for b = 1/2, 1, 3/2 and infinity:
    // |t| <= 7/16, and each a - b is exact.
    var t = -1.0 / a;
    var b_hi: F = XL_PIO2_HI;
    var b_lo: F = XL_PIO2_LO;
    if (a < 0.6875) {
      t = (2.0 * a - 1.0) / (2.0 + a);
      b_hi = XL_ATAN_HALF_HI;
      b_lo = XL_ATAN_HALF_LO;
    } else if (a < 1.1875) {
      t = (a - 1.0) / (a + 1.0);
      b_hi = XL_PIO4_HI;
      b_lo = XL_PIO4_LO;
    } else if (a < 2.4375) {
      t = (a - 1.5) / (1.0 + 1.5 * a);
      b_hi = XL_ATAN_ONE_HALF_HI;
      b_lo = XL_ATAN_ONE_HALF_LO;
    }
    let z = t * t;
    r = b_hi + xl_fence(t + xl_fence(t * z * xl_atan_a(z) + b_lo));
  }
  return xl_copysign(r, x);
}

// C's atan2: the angle of (x, y), with its quadrant, signed zeros and infinities.
fn xatan2(y: F, x: F) -> F {
  if (is_nan(x) || is_nan(y)) { return x + y; }
  if (y == 0.0) { return select(y, xl_copysign(XL_PI_HI, y), sign_bit(x)); }
  if (x == 0.0) { return xl_copysign(XL_PIO2_HI, y); }
  if (is_inf(x)) {
    if (is_inf(y)) { return xl_copysign(select(F(XL_PIO4_HI), F(XL_PI3O4), x < 0.0), y); }
    return xl_copysign(select(F(0.0), F(XL_PI_HI), x < 0.0), y);
  }
  if (is_inf(y)) { return xl_copysign(XL_PIO2_HI, y); }
  // |y / x| may overflow (atan gives pi/2) or underflow (atan of it is itself).
  let z = xatan(abs(y / x));
  return xl_copysign(select(z, XL_PI_HI - xl_fence(z - XL_PI_LO), x < 0.0), y);
}

// (asin(x) / x - 1) / x^2 at z = x^2, |x| <= 1/2: minimax polynomial of degree 5.
fn xl_asin_b(z: F) -> F {
  // coefficients: asin
  var p = F(0.03392108529806137);
  p = p * z + 0.017005784437060356;
  p = p * z + 0.031131919473409653;
  p = p * z + 0.04459662362933159;
  p = p * z + 0.07500103116035461;
  p = p * z + 0.1666666567325592;
  return p;
}

fn xasin(x: F) -> F {
  if (is_nan(x)) { return x; }
  let a = abs(x);
  if (a > 1.0) { return xl_nan(); }
  if (a == 1.0) { return xl_copysign(XL_PIO2_HI, x); }
  if (a < 0.5) {
    if (a < 0x1p-12) { return x; }
    let z = x * x;
    return x + x * z * xl_asin_b(z);
  }
  // asin(a) = pi/2 - 2 asin(s), s = sqrt(w), w = (1 - a) / 2 <= 1/4 exact; s = s_h + c to
  // twice the precision (s_h^2 exact); pi/4 - 2 s_h is exact.
  let w = (1.0 - a) * 0.5;
  let s = sqrt(w);
  let s_h = xl_hi12(s);
  let c = (w - s_h * s_h) / (s + s_h);
  let r = s * w * xl_asin_b(w);
  let v = xl_fence(XL_PIO4_HI - 2.0 * s_h) + xl_fence(XL_PIO4_HI - xl_fence(2.0 * (r + c) - XL_PIO2_LO));
  return xl_copysign(v, x);
}

fn xacos(x: F) -> F {
  if (is_nan(x)) { return x; }
  let a = abs(x);
  if (a > 1.0) { return xl_nan(); }
  if (x == 1.0) { return 0.0; }
  if (x == -1.0) { return XL_PI_HI; }
  if (a < 0.5) {
    // pi/2 - asin(x)
    let z = x * x;
    return XL_PIO2_HI - xl_fence(x - xl_fence(XL_PIO2_LO - x * z * xl_asin_b(z)));
  }
  let w = (1.0 - a) * 0.5;
  let s = sqrt(w);
  let r = s * w * xl_asin_b(w);
  if (x < 0.0) {
    // pi - 2 asin(s)
    return XL_PI_HI - 2.0 * xl_fence(s + xl_fence(r - XL_PIO2_LO));
  }
  // 2 asin(s), s = s_h + c
  let s_h = xl_hi12(s);
  let c = (w - s_h * s_h) / (s + s_h);
  return 2.0 * (s_h + xl_fence(r + c));
}

// ---- hyperbolic functions ----------------------------------------------------------------

// (sinh(x) / x - 1) / x^2 at z = x^2, |x| <= 1: minimax polynomial of degree 3.
fn xl_sinh_s(z: F) -> F {
  // coefficients: sinh
  var p = F(2.806300699376152e-06);
  p = p * z + 0.00019838099251501262;
  p = p * z + 0.008333339355885983;
  p = p * z + 0.1666666716337204;
  return p;
}
// (cosh(x) - 1 - x^2/2) / x^4 at z = x^2, |x| <= 1: minimax polynomial of degree 3.
fn xl_cosh_c(z: F) -> F {
  // coefficients: cosh
  var p = F(2.797816875954595e-07);
  p = p * z + 2.4798950107651763e-05;
  p = p * z + 0.0013888893881812692;
  p = p * z + 0.0416666679084301;
  return p;
}
// (tanh(x) / x - 1) / x^2 at z = x^2, |x| <= 0.55: minimax polynomial of degree 4.
fn xl_tanh_t(z: F) -> F {
  // coefficients: tanh
  var p = F(-0.00662128534168005);
  p = p * z + 0.02131609059870243;
  p = p * z + -0.05391069874167442;
  p = p * z + 0.13333120942115784;
  p = p * z + -0.3333333134651184;
  return p;
}

// e^a / 2 for 9 <= a, overflowing only where the result does.
fn xl_half_exp(a: F) -> F {
  if (a > 89.5) { return xl_inf(); }
  let e = xl_exp_parts(a, 0.0);
  return xl_scale(e.m, e.k - 1);
}

fn xsinh(x: F) -> F {
  if (is_nan(x)) { return x; }
  let a = abs(x);
  if (a < 0x1p-12) { return x; }
  var r = F(0.0);
  if (a < 1.0) {
    let z = a * a;
    r = a + a * z * xl_sinh_s(z);
  } else if (a < 9.0) {
    // (e^a - e^-a) / 2 with e = e^a - 1: (e + e / (e + 1)) / 2
    let e = xexpm1(a);
    r = 0.5 * (e + e / xl_fence(e + 1.0));
  } else {
    r = xl_half_exp(a);
  }
  return xl_copysign(r, x);
}

fn xcosh(x: F) -> F {
  if (is_nan(x)) { return x; }
  let a = abs(x);
  if (a < 1.0) {
    let z = a * a;
    return 1.0 + xl_fence(0.5 * z + z * z * xl_cosh_c(z));
  }
  if (a < 9.0) {
    let e = xexp(a);
    return xl_fence(0.5 * e) + 0.5 / e;
  }
  return xl_half_exp(a);
}

fn xtanh(x: F) -> F {
  if (is_nan(x)) { return x; }
  let a = abs(x);
  if (a < 0x1p-12) { return x; }
  var r = F(1.0);
  if (a < 0.55) {
    let z = a * a;
    r = a + a * z * xl_tanh_t(z);
  } else if (a < 9.5) {
    // 1 - 2 / (e^(2a) + 1)
    r = 1.0 - 2.0 / (xexpm1(2.0 * a) + 2.0);
  }
  return xl_copysign(r, x);
}

fn xasinh(x: F) -> F {
  if (is_nan(x) || is_inf(x)) { return x; }
  let a = abs(x);
  if (a < 0x1p-12) { return x; }
  var r = F(0.0);
  if (a > 0x1p12) {
    r = xlog(a) + XL_LN2R_HI;
  } else if (a > 2.0) {
    r = xlog(2.0 * a + 1.0 / (sqrt(a * a + 1.0) + a));
  } else {
    // log1p(a + a^2 / (1 + sqrt(1 + a^2)))
    let t = a * a;
    r = xlog1p(a + t / (1.0 + sqrt(1.0 + t)));
  }
  return xl_copysign(r, x);
}

fn xacosh(x: F) -> F {
  if (is_nan(x)) { return x; }
  if (x < 1.0) { return xl_nan(); }
  if (x > 0x1p12) { return xlog(x) + XL_LN2R_HI; }
  if (x > 2.0) { return xlog(2.0 * x - 1.0 / (x + sqrt(x * x - 1.0))); }
  let t = x - 1.0;
  return xlog1p(t + sqrt(xl_fence(2.0 * t) + t * t));
}

fn xatanh(x: F) -> F {
  if (is_nan(x)) { return x; }
  let a = abs(x);
  if (a > 1.0) { return xl_nan(); }
  if (a == 1.0) { return xl_copysign(xl_inf(), x); }
  if (a < 0x1p-12) { return x; }
  // (1/2) log1p(2a / (1 - a)), the argument as 2a + 2a^2 / (1 - a) below 1/2
  var r = F(0.0);
  if (a < 0.5) {
    let t = a + a;
    r = 0.5 * xlog1p(t + t * a / (1.0 - a));
  } else {
    r = 0.5 * xlog1p((a + a) / (1.0 - a));
  }
  return xl_copysign(r, x);
}

// ---- erf, erfc, erfinv -------------------------------------------------------------------

// erf(x) / x - 1 at z = x^2, |x| <= 0.84375: minimax polynomial of degree 5.
fn xl_erf_small(z: F) -> F {
  // coefficients: erf_small
  var p = F(-0.0006359993712976575);
  p = p * z + 0.0050586797297000885;
  p = p * z + -0.026807023212313652;
  p = p * z + 0.11282824724912643;
  p = p * z + -0.3761258125305176;
  p = p * z + 0.12837916612625122;
  return p;
}
// erf(1 + s) - ERX, -0.15625 <= s <= 0.25: minimax polynomial of degree 6.
fn xl_erf_one(s: F) -> F {
  // coefficients: erf_one
  var p = F(0.008777446113526821);
  p = p * s + -0.0687355175614357;
  p = p * s + 0.06900980323553085;
  p = p * s + 0.1383664458990097;
  p = p * s + -0.4151056408882141;
  p = p * s + 0.41510748863220215;
  p = p * s + 1.0585083920489069e-08;
  return p;
}
// erfc(x) = e^(-x^2) H(x) / x, H(x) = x e^(x^2) erfc(x) between 0.41 and 1/sqrt(pi) for
// x >= 1.25. H is approximated as H(c) + t R(t), so that R's own rounding errors enter the
// result only in proportion to |t R| / H (at most 1/5 here, 1/20 and 1/70 further out).
// (H(c + t) - H(c)) / t, c = 2.0625, |t| <= 0.8125: minimax polynomial of degree 8.
fn xl_erfc_mid(t: F) -> F {
  // coefficients: erfc_mid
  var p = F(2.2492265998153016e-05);
  p = p * t + -7.076545443851501e-05;
  p = p * t + 0.00018709205323830247;
  p = p * t + -0.000552032608538866;
  p = p * t + 0.001552819856442511;
  p = p * t + -0.004060664679855108;
  p = p * t + 0.009803015738725662;
  p = p * t + -0.021253764629364014;
  p = p * t + 0.03902706131339073;
  return p;
}
// (H(x) - 1/sqrt(pi)) / t at t = 1 / x^2, 2.875 <= x <= 6: minimax rational, degree 2/2.
fn xl_erfc_far(t: F) -> F {
  // coefficients: erfc_far
  var p = F(-0.23329004645347595);
  p = p * t + -1.134894609451294;
  p = p * t + -0.28209322690963745;
  var q = F(5.38323974609375);
  q = q * t + 5.522542476654053;
  q = q * t + 1.0;
  return p / q;
}
// (H(x) - 1/sqrt(pi)) / t at t = 1 / x^2, 6 <= x <= 28: minimax rational, degree 2/1.
fn xl_erfc_tail(t: F) -> F {
  // coefficients: erfc_tail
  var p = F(0.35211724042892456);
  p = p * t + -0.5148051977157593;
  p = p * t + -0.2820947766304016;
  var q = F(3.3248701095581055);
  q = q * t + 1.0;
  return p / q;
}

// erfc(a) for a >= 1.25: a^2 = a_h^2 + (a - a_h)(a + a_h) with a_h^2 exact, e^(-a^2) as
// m 2^k, and the scaling last, so that a subnormal result rounds once.
fn xl_erfc_big(a: F) -> F {
  if (a >= 10.1) { return 0.0; }
  var h = F(0.0);
  if (a < 2.875) {
    let t = a - 2.0625;
    h = XL_ERFC_MID_HI + xl_fence(t * xl_erfc_mid(t) + XL_ERFC_MID_LO);
  } else {
    let t = 1.0 / (a * a);
    let r = select(xl_erfc_tail(t), xl_erfc_far(t), a < 6.0);
    h = XL_INVSQRTPI_HI + xl_fence(t * r + XL_INVSQRTPI_LO);
  }
  let a_h = xl_hi12(a);
  let e = xl_exp_parts(-(a_h * a_h), -((a - a_h) * (a + a_h)));
  return xl_scale(e.m * h / a, e.k);
}

fn xerf(x: F) -> F {
  if (is_nan(x)) { return x; }
  let a = abs(x);
  if (a < 0.84375) { return x + x * xl_erf_small(x * x); }
  var r = F(1.0);
  if (a < 1.25) {
    r = XL_ERX + xl_fence(xl_erf_one(a - 1.0));
  } else if (a < 4.0) {
    r = 1.0 - xl_erfc_big(a);
  }
  return xl_copysign(r, x);
}

fn xerfc(x: F) -> F {
  if (is_nan(x)) { return x; }
  let a = abs(x);
  if (a < 0.84375) {
    // 1 - erf(x), erf(x) = x + y; above 1/4 as 1/2 - ((x - 1/2) + y), x - 1/2 exact
    let y = x * xl_erf_small(x * x);
    if (x < 0.25) { return 1.0 - (x + y); }
    return 0.5 - (xl_fence(x - 0.5) + y);
  }
  if (a < 1.25) {
    let p = xl_fence(xl_erf_one(a - 1.0));
    return select((1.0 - XL_ERX) - p, 1.0 + xl_fence(XL_ERX + p), x < 0.0);
  }
  if (x < 0.0) { return 2.0 - xl_erfc_big(a); }
  return xl_erfc_big(a);
}

// erfinv(x) / x at t = w - 3.125, w = -log(1 - x^2) <= 6.25: minimax polynomial of degree 8
// (error 6e-7: a first guess).
fn xl_erfinv_central(t: F) -> F {
  // coefficients: erfinv_central
  var p = F(-7.059350881633009e-09);
  p = p * t + 3.250202667004487e-07;
  p = p * t + -1.5557717460978893e-06;
  p = p * t + -1.3155758097127546e-05;
  p = p * t + 0.00018745094712357968;
  p = p * t + -0.0007426600204780698;
  p = p * t + -0.006034660618752241;
  p = p * t + 0.24015958607196808;
  p = p * t + 1.6536548137664795;
  return p;
}
// erfinv(x) / x at t = sqrt(w) - 4, 6.25 <= w: minimax polynomial of degree 6 (error 4e-5: a
// first guess).
fn xl_erfinv_tail(t: F) -> F {
  // coefficients: erfinv_tail
  var p = F(9.402133582625538e-05);
  p = p * t + -0.0003624484525062144;
  p = p * t + 0.00040958411409519613;
  p = p * t + -0.0005111534846946597;
  p = p * t + 0.0011196511331945658;
  p = p * t + 1.0093592405319214;
  p = p * t + 3.839803457260132;
  return p;
}

fn xerfinv(x: F) -> F {
  if (is_nan(x) || x == 0.0) { return x; }
  let a = abs(x);
  if (a > 1.0) { return xl_nan(); }
  if (a == 1.0) { return xl_copysign(xl_inf(), x); }
  if (a < 0x1p-13) { return x * XL_SQRTPI_2; }
  let w = -xlog((1.0 - a) * (1.0 + a));
  var y = F(0.0);
  if (w < 6.25) {
    y = a * xl_erfinv_central(w - 3.125);
  } else {
    y = a * xl_erfinv_tail(sqrt(w) - 4.0);
  }
  // Halley's step on erf(y) = a (cubic: the guess's 4e-5 becomes 1e-10): d = (erf(y) - a) /
  // erf'(y), y - d / (1 + y d); above 1/2, erf(y) - a = (1 - a) - erfc(y), 1 - a exact.
  let r = select(xerf(y) - a, (1.0 - a) - xerfc(y), a > 0.5);
  let d = r * XL_SQRTPI_2 * xexp(y * y);
  y = y - d / (1.0 + y * d);
  return xl_copysign(y, x);
}

// ---- lgamma, digamma ---------------------------------------------------------------------

// lgamma(1 + t) / t, 0 <= t <= 1/4: minimax polynomial of degree 6.
fn xl_lgamma_one(t: F) -> F {
  // coefficients: lgamma_one
  var p = F(-0.0717584490776062);
  p = p * t + 0.14835304021835327;
  p = p * t + -0.20405858755111694;
  p = p * t + 0.2703045606613159;
  p = p * t + -0.4006745517253876;
  p = p * t + 0.8224668502807617;
  p = p * t + -0.5772156715393066;
  return p;
}
// (lgamma(3/2 + t) - lgamma(3/2)) / t, |t| <= 1/4: minimax polynomial of degree 6 (lgamma is
// flat there, so t R(t) is a small correction to lgamma(3/2)).
fn xl_lgamma_mid(t: F) -> F {
  // coefficients: lgamma_mid
  var p = F(-0.009048244915902615);
  p = p * t + 0.015994369983673096;
  p = p * t + -0.028932640329003334;
  p = p * t + 0.058694493025541306;
  p = p * t + -0.13813306391239166;
  p = p * t + 0.4674012362957001;
  p = p * t + 0.036489974707365036;
  return p;
}
// lgamma(2 + t) / t, -0.28 <= t <= 1/2: minimax polynomial of degree 7.
fn xl_lgamma_two(t: F) -> F {
  // coefficients: lgamma_two
  var p = F(0.00037478789454326034);
  p = p * t + -0.0012005792232230306;
  p = p * t + 0.002911769784986973;
  p = p * t + -0.007387214805930853;
  p = p * t + 0.020579839125275612;
  p = p * t + -0.06735222786664963;
  p = p * t + 0.32246705889701843;
  p = p * t + 0.42278432846069336;
  return p;
}
// (lgamma(x) - (x - 1/2) log x + x - log(2 pi) / 2) x at t = 1 / x^2, x >= 8: minimax
// polynomial of degree 2 (Stirling's series, levelled).
fn xl_lgamma_stirling(t: F) -> F {
  // coefficients: lgamma_stirling
  var p = F(0.0007800583261996508);
  p = p * t + -0.002777698915451765;
  p = p * t + 0.0833333358168602;
  return p;
}

// sin(pi r), |r| <= 1/4, with pi r in two floats.
fn xl_sinpi_kernel(r: F) -> F {
  let p = xl_two_prod(r, XL_PI_HI);
  return xl_sin_kernel(p.hi, p.lo + r * XL_PI_LO);
}
fn xl_cospi_kernel(r: F) -> F {
  let p = xl_two_prod(r, XL_PI_HI);
  return xl_cos_kernel(p.hi, p.lo + r * XL_PI_LO);
}
// |sin(pi a)| for a > 0 not an integer, a < 2^23 (a - floor(a) is exact).
fn xl_sinpi_abs(a: F) -> F {
  var r = a - floor(a);
  if (r > 0.5) { r = 1.0 - r; }
  if (r <= 0.25) { return xl_sinpi_kernel(r); }
  return xl_cospi_kernel(0.5 - r);
}
// cot(pi x) for x not an integer, |x| < 2^23.
fn xl_cotpi(x: F) -> F {
  let r = x - round(x);
  if (abs(r) <= 0.25) { return xl_cospi_kernel(r) / xl_sinpi_kernel(r); }
  // cot(pi r) = tan(pi u), u = +-1/2 - r
  let u = select(F(0.5), F(-0.5), r < 0.0) - r;
  return xl_sinpi_kernel(u) / xl_cospi_kernel(u);
}

// lgamma(1 + u) for 0 <= u < 3/2, u exact: near the zeros at u = 0 and 1 as u A(u) and
// (u - 1) B(u - 1), so that the result keeps its relative accuracy there.
fn xl_lgamma_1p(u: F) -> F {
  if (u < 0.25) { return u * xl_lgamma_one(u); }
  if (u < 0.75) {
    let t = u - 0.5;
    return XL_LGAMMA_MID_HI + xl_fence(t * xl_lgamma_mid(t) + XL_LGAMMA_MID_LO);
  }
  return (u - 1.0) * xl_lgamma_two(u - 1.0);
}

// lgamma(x) for x > 0 finite.
fn xl_lgamma_pos(x: F) -> F {
  if (x < 0x1p-30) { return -xlog(x); }
  if (x < 0.72) { return xl_lgamma_1p(x) - xlog(x); }
  if (x < 1.0) {
    // lgamma(1 + t) = t (lgamma(2 + t) / t - 1) + (t - log1p(t)), t = x - 1: two positive terms
    let t = x - 1.0;
    return t * (xl_fence(xl_lgamma_two(t)) - 1.0) + (0.5 * t * t - xl_log_tail(t));
  }
  if (x == 1.0 || x == 2.0) { return 0.0; }
  if (x < 2.5) { return xl_lgamma_1p(x - 1.0); }
  if (x < 8.0) {
    // lgamma(x) = lgamma(y) + log((x - 1) ... (x - n)), y = x - n in [1.5, 2.5): the factors
    // are exact and their product is carried in two floats.
    let n = floor(x - 1.5);
    var p = XlDD(x - 1.0, 0.0);
    for (var j = 2; j <= 6; j = j + 1) {
      if (F(j) <= n) {
        let f = x - F(j);
        let q = xl_two_prod(p.hi, f);
        p = xl_fast_two_sum(q.hi, q.lo + p.lo * f);
      }
    }
    let l = xl_log_dd(p.hi);
    return xl_lgamma_1p(x - n - 1.0) + (l.hi + (l.lo + p.lo / p.hi));
  }
  if (x < 0x1p60) {
    // Stirling: (x - 1/2) log x - x in two floats, then log(2 pi) / 2 and the series.
    let l = xl_log_dd(x);
    let h = x - 0.5;
    let p = xl_two_prod(h, l.hi);
    let q = xl_two_sum(p.hi, -x);
    let series = XL_HALF_LOG_2PI + xl_lgamma_stirling(1.0 / (x * x)) / x;
    return q.hi + ((q.lo + (p.lo + h * l.lo)) + series);
  }
  return x * (xlog(x) - 1.0);
}

// C's lgamma: log |Gamma(x)|.
fn xlgamma(x: F) -> F {
  if (is_nan(x)) { return x; }
  if (is_inf(x)) { return xl_inf(); }
  if (x > 0.0) { return xl_lgamma_pos(x); }
  if (floor(x) == x) { return xl_inf(); }
  let a = -x;
  if (a < 0x1p-30) { return -xlog(a); }
  // Gamma(x) Gamma(1 - x) = pi / sin(pi x) and Gamma(1 - x) = a Gamma(a):
  // lgamma(x) = log(pi / |a sin(pi a)|) - lgamma(a).
  return xlog(XL_PI_HI / (a * xl_sinpi_abs(a))) - xl_lgamma_pos(a);
}

// digamma(x) / (x - x0) at t = x - 1.375, 1 <= x <= 1.75 (x0 digamma's positive zero):
// minimax polynomial of degree 9.
fn xl_digamma_low(t: F) -> F {
  // coefficients: digamma_low
  var p = F(-0.03573925420641899);
  p = p * t + 0.04736018180847168;
  p = p * t + -0.05277173966169357;
  p = p * t + 0.07359135150909424;
  p = p * t + -0.10382546484470367;
  p = p * t + 0.14550073444843292;
  p = p * t + -0.20742981135845184;
  p = p * t + 0.3064766824245453;
  p = p * t + -0.49154549837112427;
  p = p * t + 1.0080828666687012;
  return p;
}
// digamma(x) / (x - x0) at t = x - 2.125, 1.75 <= x <= 2.5: minimax polynomial of degree 7.
fn xl_digamma_high(t: F) -> F {
  // coefficients: digamma_high
  var p = F(-0.0018310056766495109);
  p = p * t + 0.003885738318786025;
  p = p * t + -0.007926428690552711;
  p = p * t + 0.017474986612796783;
  p = p * t + -0.03940417245030403;
  p = p * t + 0.09241431206464767;
  p = p * t + -0.23564137518405914;
  p = p * t + 0.7543268799781799;
  return p;
}
// (log x - 1 / (2x) - digamma(x)) x^2 at t = 1 / x^2, x >= 10: minimax polynomial of degree 2
// (the asymptotic series, levelled).
fn xl_digamma_asymptotic(t: F) -> F {
  // coefficients: digamma_asymptotic
  var p = F(0.003907085862010717);
  p = p * t + -0.008333105593919754;
  p = p * t + 0.0833333358168602;
  return p;
}

// digamma(1 + u) for 0 <= u <= 3/2, u exact, as (1 + u - x0) Z(u): relative accuracy kept
// at the zero.
fn xl_digamma_1p(u: F) -> F {
  let d = xl_fence(xl_fence(u) - XL_X0M1_HI) - XL_X0M1_LO;
  if (u < 0.75) { return d * xl_digamma_low(u - 0.375); }
  return d * xl_digamma_high(u - 1.125);
}

// digamma(x) for x > 0.
fn xl_digamma_pos(x: F) -> F {
  if (x < 0x1p-30) { return -1.0 / x - XL_EULER; }
  if (x < 1.0) { return xl_digamma_1p(x) - 1.0 / x; }
  if (x <= 2.5) { return xl_digamma_1p(x - 1.0); }
  if (x < 10.0) {
    // digamma(y) + 1 / y + ... + 1 / (x - 1), y = x - n in (1.5, 2.5]: positive terms, the
    // smallest first; each x - j is exact.
    let n = ceil(x - 2.5);
    var s = F(0.0);
    for (var j = 1; j <= 8; j = j + 1) {
      if (F(j) <= n) { s = s + 1.0 / (x - F(j)); }
    }
    return xl_digamma_1p(x - n - 1.0) + s;
  }
  if (is_inf(x)) { return x; }
  let t = 1.0 / (x * x);
  return xlog(x) - (0.5 / x + t * xl_digamma_asymptotic(t));
}

// PyTorch's digamma: -inf at +0, +inf at -0, NaN at the negative integers and -inf.
fn xdigamma(x: F) -> F {
  if (is_nan(x)) { return x; }
  if (x == 0.0) { return select(-xl_inf(), xl_inf(), sign_bit(x)); }
  if (x > 0.0) { return xl_digamma_pos(x); }
  if (floor(x) == x) { return xl_nan(); }
  if (x > -0x1p-30) { return -1.0 / x - XL_EULER; }
  // digamma(x) = digamma(1 - x) - pi cot(pi x), digamma(1 - x) = digamma(a) + 1 / a, a = -x
  let a = -x;
  return (xl_digamma_pos(a) + 1.0 / a) - XL_PI_HI * xl_cotpi(x);
}
