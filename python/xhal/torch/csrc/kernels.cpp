// Native operators of the `xhal` PyTorch device, each a WGSL kernel that runs on every xhal
// backend: elementwise arithmetic and activations with broadcasting and any strides, their
// backward formulas, reductions, matrix products, softmax and layer norm. A case a kernel
// does not cover (a dtype without kernels, more than 8 dimensions, mixed dtypes) runs on the
// CPU through the fallback, and is counted there like any other fallback.

#include <ATen/Operators.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>

#include "xhal_torch.h"

namespace xhal_torch {

bool native_dtype(const Device& device, at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
    case at::kInt:
    case at::kBool:
      return true;
    case at::kHalf:
      return (device.features & XHAL_DEVICE_FEATURE_F16) != 0;
    case at::kDouble:
      // f64 kernels read scalars, test for NaN and compute exp and log through u64 bits.
      return (device.features & XHAL_DEVICE_FEATURE_F64) != 0 && (device.features & XHAL_DEVICE_FEATURE_I64) != 0;
    case at::kLong:
      return (device.features & XHAL_DEVICE_FEATURE_I64) != 0;
    default:
      return false;
  }
}

namespace {

constexpr int kMaxDims = 8;
constexpr int kMaxOperands = 4;  // the output and up to three inputs
constexpr int kScalarSlots = 6;  // $a, $b, then a constant per input

// The WGSL type a dtype's values have in a kernel; nullptr for dtypes without kernels.
const char* wgsl_type(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return "f32";
    case at::kHalf:
      return "f16";
    case at::kDouble:
      return "f64";
    case at::kInt:
      return "i32";
    case at::kLong:
      return "i64";
    case at::kBool:
      return "bool";
    default:
      return nullptr;
  }
}

// The element type of the array a dtype's memory is bound as: bools are bytes, which WGSL
// cannot address, so their memory is bound as words.
const char* storage_type(at::ScalarType dtype) { return dtype == at::kBool ? "u32" : wgsl_type(dtype); }

bool is_floating(at::ScalarType dtype) { return dtype == at::kFloat || dtype == at::kHalf || dtype == at::kDouble; }

bool on_device(const at::Tensor& t, at::ScalarType dtype) {
  return native_dtype(device(t.device().index()), dtype);
}

// The scalars of a launch travel as 64-bit slots (two words, low first), each in the bits of
// the type the kernel reads it as, so that f64 and i64 scalars stay exact.
uint64_t scalar_bits(const at::Scalar& value, at::ScalarType as) {
  switch (as) {
    case at::kFloat:
    case at::kHalf: {
      float f = static_cast<float>(value.to<double>());
      uint32_t bits = 0;
      std::memcpy(&bits, &f, sizeof bits);
      return bits;
    }
    case at::kDouble: {
      double d = value.to<double>();
      uint64_t bits = 0;
      std::memcpy(&bits, &d, sizeof bits);
      return bits;
    }
    case at::kInt:
      return static_cast<uint32_t>(static_cast<int32_t>(value.to<int64_t>()));
    case at::kLong:
      return static_cast<uint64_t>(value.to<int64_t>());
    case at::kBool:
      return value.to<bool>() ? 1 : 0;
    default:
      return 0;
  }
}

// The WGSL that reads scalar slot `k` as `as`.
std::string scalar_load(int k, at::ScalarType as) {
  const char* low = (k % 2) == 0 ? "x" : "z";
  const char* high = (k % 2) == 0 ? "y" : "w";
  const std::string lo = "p.s" + std::to_string(k / 2) + "." + low;
  const std::string hi = "p.s" + std::to_string(k / 2) + "." + high;
  const std::string wide = "((u64(" + hi + ") << 32u) | u64(" + lo + "))";
  switch (as) {
    case at::kFloat:
      return "bitcast<f32>(" + lo + ")";
    case at::kHalf:
      return "f16(bitcast<f32>(" + lo + "))";
    case at::kDouble:
      return "bitcast<f64>" + wide;
    case at::kInt:
      return "bitcast<i32>(" + lo + ")";
    case at::kLong:
      return "bitcast<i64>" + wide;
    default:
      return "(" + lo + " != 0u)";
  }
}

// `value`, of type `from`, as type `to`, the way PyTorch converts.
std::string convert(const std::string& value, at::ScalarType from, at::ScalarType to) {
  if (from == to) return value;
  const char* target = wgsl_type(to);
  if (from == at::kBool) return "select(" + std::string(target) + "(0), " + target + "(1), " + value + ")";
  if (to == at::kBool) return "(" + value + " != " + wgsl_type(from) + "(0))";
  // f16 and f64 meet through f32, which every backend converts both to and from.
  if ((from == at::kHalf && to == at::kDouble) || (from == at::kDouble && to == at::kHalf))
    return std::string(target) + "(f32(" + value + "))";
  return std::string(target) + "(" + value + ")";
}

// The uniform every strided elementwise kernel reads; its WGSL twin is kElementwiseParams.
struct ElementwiseParams {
  uint32_t numel = 0;
  uint32_t ndim = 0;
  uint32_t pad0 = 0;
  uint32_t pad1 = 0;
  uint32_t sizes[kMaxDims] = {};
  uint32_t offsets[kMaxOperands] = {};
  uint32_t strides[kMaxOperands][kMaxDims] = {};
  uint32_t scalars[2 * kScalarSlots] = {};
};
static_assert(sizeof(ElementwiseParams) == 240, "the WGSL struct P is 240 bytes");

const char* kElementwiseParams = R"(
struct P {
  numel: u32, ndim: u32, pad0: u32, pad1: u32,
  sizes: array<vec4<u32>, 2>,
  offsets: vec4<u32>,
  strides: array<vec4<u32>, 8>,
  s0: vec4<u32>, s1: vec4<u32>, s2: vec4<u32>,
}
@group(0) @binding(0) var<uniform> p: P;
)";

// Flat kernels (every operand contiguous) need only this much, which travels as the launch's
// `var<immediate>` block rather than as a uniform buffer the stream must stage.
struct FlatParams {
  uint32_t numel = 0;
  uint32_t ndim = 1;
  uint32_t pad0 = 0;
  uint32_t pad1 = 0;
  uint32_t offsets[kMaxOperands] = {};
  uint32_t scalars[2 * kScalarSlots] = {};
};
static_assert(sizeof(FlatParams) == 80, "the WGSL struct P of flat kernels is 80 bytes");

const char* kFlatParams = R"(
struct P { numel: u32, ndim: u32, pad0: u32, pad1: u32, offsets: vec4<u32>, s0: vec4<u32>, s1: vec4<u32>, s2: vec4<u32> }
var<immediate> p: P;
)";

const char* kStridedOffset = R"(
fn offset_of(t: u32, linear: u32) -> u32 {
  var rest = linear;
  var at = p.offsets[t];
  for (var k = 0u; k < p.ndim; k = k + 1u) {
    let d = p.ndim - 1u - k;
    let size = p.sizes[d / 4u][d % 4u];
    at = at + (rest % size) * p.strides[t * 2u + d / 4u][d % 4u];
    rest = rest / size;
  }
  return at;
}
)";

const char* kFlatOffset = R"(
fn offset_of(t: u32, linear: u32) -> u32 { return p.offsets[t] + linear; }
)";

// `xnan(x)`, for values of type `dtype`: whether x is a NaN, from its bits. Comparisons cannot
// tell: WGSL lets a compiler assume no NaN, and llvmpipe does (x != x is false for a NaN).
std::string nan_test(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return "fn xnan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }\n";
    case at::kHalf:
      return "fn xnan(x: f16) -> bool { return (bitcast<u32>(f32(x)) & 0x7fffffffu) > 0x7f800000u; }\n";
    case at::kDouble:
      return "fn xnan(x: f64) -> bool { return (bitcast<u64>(x) & 0x7ffffffffffffffflu) > 0x7ff0000000000000lu; }\n";
    default:
      return std::string("fn xnan(x: ") + wgsl_type(dtype) + ") -> bool { return false; }\n";
  }
}

// Helpers an expression may call; each is added to a kernel's source only when it uses it.
const char* kErf = R"(
fn erf_approx(x: f32) -> f32 {
  let a = abs(x);
  let t = 1.0 / (1.0 + 0.3275911 * a);
  let poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t;
  return sign(x) * (1.0 - poly * exp(-a * a));
}
)";

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

// exp, expm1, log, tanh and erf in f64. WGSL's built-ins stop at 32 bits (and SPIR-V's GLSL set
// has no 64-bit exp, log or tanh, nor anyone an erf), so kernels that compute in f64 call these
// instead: over the whole range, subnormals, infinities and NaN included, they stay within 1,
// 2, 3 and 5 ulp of the CPU's exp, log, tanh and erf (the PyTorch tests allow 3, 3, 3 and 6).
const char* kF64Math = R"(
fn xnan64(x: f64) -> bool { return (bitcast<u64>(x) & 0x7ffffffffffffffflu) > 0x7ff0000000000000lu; }
fn xpow2_64(e: i32) -> f64 { return bitcast<f64>(u64(e + 1023) << 52u); }
// (e^r - 1) / r for |r| <= ln2 / 2: 1 + r / 2! + ... + r^12 / 13!.
fn xexprel64(r: f64) -> f64 {
  var p = f64(1.6059043836821613e-10);
  p = p * r + 2.08767569878681e-9;
  p = p * r + 2.505210838544172e-8;
  p = p * r + 2.755731922398589e-7;
  p = p * r + 2.7557319223985893e-6;
  p = p * r + 2.48015873015873e-5;
  p = p * r + 1.984126984126984e-4;
  p = p * r + 1.3888888888888889e-3;
  p = p * r + 8.333333333333333e-3;
  p = p * r + 4.1666666666666664e-2;
  p = p * r + 0.16666666666666666;
  p = p * r + 0.5;
  return p * r + 1.0;
}
fn xexp64(x: f64) -> f64 {
  if (xnan64(x)) { return x; }
  if (x > 709.782712893384) { return bitcast<f64>(0x7ff0000000000000lu); }
  if (x < -745.1332191019412) { return 0.0; }
  // x = k ln2 + r, |r| <= ln2 / 2; ln2 in two parts, the first with 32 trailing zero bits, so
  // that k * high is exact.
  let k = round(x * 1.4426950408889634);
  let r = (x - k * 0.6931471803691238) - k * 1.9082149292705877e-10;
  let p = 1.0 + r * xexprel64(r);
  // 2^k in two factors, each a normal number, so that results near the ends of the range
  // (overflowing 2^k alone, or subnormal) round once.
  let half = i32(k) / 2;
  return p * xpow2_64(half) * xpow2_64(i32(k) - half);
}
// expm1, exact near 0 where exp(x) - 1 would cancel.
fn xexpm1_64(x: f64) -> f64 {
  if (xnan64(x) || abs(x) >= 0.34657359027997264) { return xexp64(x) - 1.0; }
  return x * xexprel64(x);
}
// tanh |x| = -m / (m + 2) with m = expm1(-2 |x|), with x's sign (so tanh(-0) is -0).
fn xtanh64(x: f64) -> f64 {
  if (xnan64(x)) { return x; }
  let m = xexpm1_64(-2.0 * abs(x));
  let t = -m / (m + 2.0);
  return select(t, -t, (bitcast<u64>(x) >> 63u) != 0lu);
}
// erf: below 1.5 its Taylor series (alternating, but the terms fall from the start, so few
// bits cancel); above, 1 - erfc from erfc's continued fraction, evaluated from a tail 100 deep,
// which reaches f64's precision there; past 6, erf is 1 in f64.
fn xerf64(x: f64) -> f64 {
  if (xnan64(x)) { return x; }
  let a = abs(x);
  var r = f64(1.0);
  if (a < 1.5) {
    let z = a * a;
    var term = a;
    var sum = a;
    for (var n = 1; n < 80; n = n + 1) {
      term = -term * z / f64(n);
      let add = term / f64(2 * n + 1);
      sum = sum + add;
      if (abs(add) < 1e-17 * abs(sum)) { break; }
    }
    r = sum * 1.1283791670955126;
  } else if (a < 6.0) {
    // erfc(a) = exp(-a^2) / sqrt(pi) / (a + (1/2) / (a + 1 / (a + (3/2) / (a + ...)))).
    var f = a;
    for (var k = 100; k >= 1; k = k - 1) { f = a + (f64(k) * 0.5) / f; }
    r = 1.0 - xexp64(-a * a) * 0.5641895835477563 / f;
  }
  return select(r, -r, (bitcast<u64>(x) >> 63u) != 0lu);
}
fn xlog64(x: f64) -> f64 {
  if (xnan64(x)) { return x; }
  if (x == 0.0) { return bitcast<f64>(0xfff0000000000000lu); }
  if (x < 0.0) { return bitcast<f64>(0x7ff8000000000000lu); }
  if (bitcast<u64>(x) == 0x7ff0000000000000lu) { return x; }
  // x = m 2^e with m in [sqrt(1/2), sqrt(2)); a subnormal x is scaled up first.
  var v = x;
  var e = 0;
  if (x < 2.2250738585072014e-308) {
    v = x * 18014398509481984.0;
    e = -54;
  }
  let bits = bitcast<u64>(v);
  e = e + i32((bits >> 52u) & 0x7fflu) - 1023;
  var m = bitcast<f64>((bits & 0x000ffffffffffffflu) | 0x3ff0000000000000lu);
  if (m > 1.4142135623730951) {
    m = m * 0.5;
    e = e + 1;
  }
  // log m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172: the series to s^21.
  let s = (m - 1.0) / (m + 1.0);
  let z = s * s;
  var q = f64(1.0 / 21.0);
  q = q * z + 1.0 / 19.0;
  q = q * z + 1.0 / 17.0;
  q = q * z + 1.0 / 15.0;
  q = q * z + 1.0 / 13.0;
  q = q * z + 1.0 / 11.0;
  q = q * z + 1.0 / 9.0;
  q = q * z + 1.0 / 7.0;
  q = q * z + 1.0 / 5.0;
  q = q * z + 1.0 / 3.0;
  let ef = f64(e);
  return ef * 0.6931471803691238 + ((ef * 1.9082149292705877e-10 + 2.0 * s * z * q) + 2.0 * s);
}
)";

// The WGSL of `body` computing in `compute`: in f64, exp, expm1, log, tanh and erf are
// kF64Math's. Says whether the body now calls them, so that kernels add kF64Math only then.
bool use_f64_math(std::string& body, at::ScalarType compute) {
  if (compute != at::kDouble) return false;
  const std::string before = body;
  replace_all(body, "expm1(", "xexpm1_64(");
  replace_all(body, "exp(", "xexp64(");
  replace_all(body, "log(", "xlog64(");
  replace_all(body, "tanh(", "xtanh64(");
  replace_all(body, "erf(", "xerf64(");
  return body != before;
}

// The WGSL of a floating kernel for `dtype`: ELEM is the type its buffers hold and ACC the type
// it computes in, f32 for f16 and f32 (f16 rounded once at the end, as PyTorch's CPU does) and
// f64 for f64; f16 buffers are enabled.
std::string typed_source(std::string source, at::ScalarType dtype) {
  replace_all(source, "ELEM", wgsl_type(dtype));
  replace_all(source, "ACC", wgsl_type(dtype == at::kDouble ? at::kDouble : at::kFloat));
  return (dtype == at::kHalf ? std::string("enable f16;\n") : std::string()) + source;
}

// The dtypes the loss, lookup and normalisation kernels take: the floating ones the device has.
bool floating_on(const at::Tensor& t) {
  const at::ScalarType dtype = t.scalar_type();
  return (dtype == at::kFloat || dtype == at::kHalf || dtype == at::kDouble) && on_device(t, dtype);
}

// The buffers a launch binds: one binding per distinct buffer, so that an in-place operation
// (the output is an input) binds its memory once, read_write.
struct BufferSet {
  std::vector<xhal_buffer_t*> buffers;
  std::vector<std::string> types;
  std::vector<bool> written;
  // The binding name of `buffer`, adding it; empty when it is already bound with another type.
  std::string bind(xhal_buffer_t* buffer, const std::string& type, bool write) {
    for (size_t i = 0; i < buffers.size(); i++) {
      if (buffers[i] == buffer) {
        if (types[i] != type) return "";
        written[i] = written[i] || write;
        return "b" + std::to_string(i + 1);
      }
    }
    buffers.push_back(buffer);
    types.push_back(type);
    written.push_back(write);
    return "b" + std::to_string(buffers.size());
  }
  std::string declarations() const {
    std::string out;
    for (size_t i = 0; i < buffers.size(); i++) {
      out += "@group(0) @binding(" + std::to_string(i + 1) + ") var<storage, " +
             (written[i] ? "read_write" : "read") + "> b" + std::to_string(i + 1) + ": array<" + types[i] + ">;\n";
    }
    return out;
  }
  std::vector<Binding> bindings(const void* uniform, size_t uniform_size) const {
    std::vector<Binding> out;
    out.push_back(Binding{nullptr, 0, uniform_size, uniform});
    for (auto* b : buffers) out.push_back(Binding{b, 0, XHAL_WHOLE_SIZE, nullptr});
    return out;
  }
};

bool is_cpu_scalar(const at::Tensor& t) { return t.device().is_cpu() && t.dim() == 0; }

uint32_t element_offset(const at::Tensor& t) {
  return static_cast<uint32_t>(place_of(t).offset / t.element_size());
}

// What an elementwise kernel computes in: `compute` (default: the output's dtype) is the type
// of the inputs x0, x1, x2 once loaded, of $a and $b, and of the expression, except that the
// inputs in `conditions` (a bit per input) load as bool.
struct Computation {
  at::ScalarType compute = at::ScalarType::Undefined;
  at::Scalar alpha = 0;
  at::Scalar beta = 0;
  uint32_t conditions = 0;
  uint32_t words[2] = {0, 0};  // $ua and $ub
  bool uses_index = false;      // the expression reads `i`, so elements keep their order
};

bool elementwise(at::Tensor& out, at::ArrayRef<at::Tensor> inputs, std::string_view expression,
                 const Computation& how = {});

// An output laid out densely in another order than row-major (the output of an operation on
// a transposed tensor) is walked in its memory order: every operand is permuted so that the
// output is contiguous, which its kernel then writes as flat memory.
bool elementwise_in_memory_order(at::Tensor& out, at::ArrayRef<at::Tensor> inputs, std::string_view expression,
                                 const Computation& how) {
  std::vector<int64_t> order(out.dim());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return out.stride(a) > out.stride(b); });
  at::Tensor permuted = out.permute(order);
  if (!permuted.is_contiguous()) return false;
  std::vector<at::Tensor> operands;
  for (const at::Tensor& input : inputs) {
    if (is_cpu_scalar(input)) {
      operands.push_back(input);
    } else {
      operands.push_back((input.sizes() == out.sizes() ? input : input.expand(out.sizes())).permute(order));
    }
  }
  return elementwise(permuted, operands, expression, how);
}

// Runs `expression` for every element of `out`: the inputs broadcast to its shape and are
// named x0, x1, x2 in the expression (a CPU scalar becomes a constant), `i` is the element's
// index in `out`, `$C` is the compute type, `$0` its zero, `$a` and `$b` the given scalars in
// it, and `$ua` and `$ub` the two given words. A bool output takes a bool expression.
// Returns false, doing nothing, when a kernel cannot do it: a dtype the device has no kernels
// for, more than 8 dimensions, or a strided bool output; the caller then falls back.
bool elementwise(at::Tensor& out, at::ArrayRef<at::Tensor> inputs, std::string_view expression,
                 const Computation& how) {
  if (!how.uses_index && out.dim() > 1 && !out.is_contiguous() && out.is_non_overlapping_and_dense()) {
    for (const at::Tensor& input : inputs) {
      if (!is_cpu_scalar(input) && input.dim() > out.dim()) return false;
    }
    return elementwise_in_memory_order(out, inputs, expression, how);
  }
  const at::ScalarType out_dtype = out.scalar_type();
  const at::ScalarType compute = how.compute == at::ScalarType::Undefined ? out_dtype : how.compute;
  if (wgsl_type(out_dtype) == nullptr || wgsl_type(compute) == nullptr) return false;
  if (out.dim() > kMaxDims || inputs.size() >= kMaxOperands) return false;
  if (out.numel() == 0) return true;
  Device& dev = device(out.device().index());
  if (!native_dtype(dev, out_dtype) || !native_dtype(dev, compute)) return false;
  const bool bytes_out = out_dtype == at::kBool;
  if (bytes_out && !out.is_contiguous()) return false;
  const Place out_place = place_of(out);
  if (out.numel() > std::numeric_limits<uint32_t>::max() / 4 || out_place.offset > std::numeric_limits<uint32_t>::max() / 4)
    return false;
  ElementwiseParams params;
  params.numel = static_cast<uint32_t>(out.numel());
  const int64_t ndim = std::max<int64_t>(out.dim(), 1);
  params.ndim = static_cast<uint32_t>(ndim);
  for (int64_t d = 0; d < ndim; d++) params.sizes[d] = out.dim() == 0 ? 1 : static_cast<uint32_t>(out.size(d));
  auto set_slot = [&](int k, uint64_t bits) {
    params.scalars[2 * k] = static_cast<uint32_t>(bits);
    params.scalars[2 * k + 1] = static_cast<uint32_t>(bits >> 32);
  };
  set_slot(0, scalar_bits(how.alpha, compute));
  set_slot(1, scalar_bits(how.beta, compute));
  set_slot(kScalarSlots - 1, how.words[0] | (static_cast<uint64_t>(how.words[1]) << 32));

  // The distinct buffers, each bound once (binding k + 1): an in-place operation binds its
  // memory once, read_write. Kept in arrays, since this runs for every operation.
  struct Bound {
    xhal_buffer_t* buffer;
    at::ScalarType dtype;
    bool written;
  };
  Bound bound[kMaxOperands];
  int bound_count = 0;
  // The binding of `buffer` (from 1), adding it; 0 when it is bound already with another type.
  auto bind = [&](xhal_buffer_t* buffer, at::ScalarType dtype, bool write) -> int {
    for (int b = 0; b < bound_count; b++) {
      if (bound[b].buffer != buffer) continue;
      if (std::strcmp(storage_type(bound[b].dtype), storage_type(dtype)) != 0) return 0;
      bound[b].written = bound[b].written || write;
      return b + 1;
    }
    bound[bound_count] = Bound{buffer, dtype, write};
    return ++bound_count;
  };
  struct Operand {
    bool scalar;
    at::ScalarType dtype;
    at::ScalarType as;
    int binding;
  };
  Operand operands[kMaxOperands];
  bool flat = out.is_contiguous();
  auto add_strides = [&](int operand, const at::Tensor& t) {
    for (int64_t d = 0; d < t.dim(); d++) params.strides[operand][d] = static_cast<uint32_t>(t.stride(d));
  };
  const int out_binding = bind(out_place.buffer, out_dtype, true);
  params.offsets[0] = static_cast<uint32_t>(out_place.offset / out.element_size());
  add_strides(0, out);

  for (size_t k = 0; k < inputs.size(); k++) {
    const at::Tensor& input = inputs[k];
    const at::ScalarType as = (how.conditions >> k) & 1 ? at::kBool : compute;
    if (is_cpu_scalar(input)) {
      set_slot(static_cast<int>(k) + 2, scalar_bits(input.item(), as));
      operands[k] = Operand{true, as, as, 0};
      continue;
    }
    const at::ScalarType dtype = input.scalar_type();
    if (input.device() != out.device() || !native_dtype(dev, dtype)) return false;
    at::Tensor expanded = input.sizes() == out.sizes() ? input : input.expand(out.sizes());
    flat = flat && expanded.is_contiguous();
    const int binding = bind(place_of(expanded).buffer, dtype, false);
    if (binding == 0) return false;
    params.offsets[k + 1] = element_offset(expanded);
    add_strides(static_cast<int>(k + 1), expanded);
    operands[k] = Operand{false, dtype, as, binding};
  }
  const bool immediate = flat && dev.max_scalar_block_size >= sizeof(FlatParams);
  // The expression, the types, how each input loads, every binding's element type and
  // access, and the layout identify the kernel: a short key, written without formatting
  // into this thread's buffer, which keeps its capacity from one operation to the next.
  thread_local std::string key;
  key.clear();
  key += expression;
  key += '|';
  key += immediate ? 'i' : flat ? 'f' : 's';
  key += static_cast<char>('A' + static_cast<int>(compute));
  key += static_cast<char>('A' + static_cast<int>(out_dtype));
  for (size_t k = 0; k < inputs.size(); k++) {
    key += operands[k].scalar ? 'c' : static_cast<char>('0' + operands[k].binding);
    key += static_cast<char>('A' + static_cast<int>(operands[k].dtype));
    key += static_cast<char>('A' + static_cast<int>(operands[k].as));
  }
  key += '|';
  for (int b = 0; b < bound_count; b++) {
    key += static_cast<char>('A' + static_cast<int>(bound[b].dtype));
    key += bound[b].written ? 'w' : 'r';
  }
  Binding all[kMaxOperands + 1];
  auto bindings_of = [&](const void* uniform, size_t uniform_size) {
    all[0] = Binding{nullptr, 0, uniform_size, uniform};
    for (int b = 0; b < bound_count; b++) all[b + 1] = Binding{bound[b].buffer, 0, XHAL_WHOLE_SIZE, nullptr};
    return at::ArrayRef<Binding>(all, bound_count + 1);
  };
  const Kernel& compiled = kernel_by_key(dev, key, [&] {
    std::string loads;
    for (size_t k = 0; k < inputs.size(); k++) {
      const Operand& operand = operands[k];
      const std::string x = "x" + std::to_string(k);
      if (operand.scalar) {
        loads += "  let " + x + " = " + scalar_load(static_cast<int>(k) + 2, operand.as) + ";\n";
        continue;
      }
      const std::string name = "b" + std::to_string(operand.binding);
      const std::string at = "offset_of(" + std::to_string(k + 1) + "u, i)";
      std::string raw;
      if (operand.dtype == at::kBool) {
        // A bool is one byte: read its word (buffers are whole words) and pick the byte.
        loads += "  let " + x + "_at = " + at + ";\n";
        raw = "(((" + name + "[" + x + "_at / 4u] >> ((" + x + "_at % 4u) * 8u)) & 0xffu) != 0u)";
      } else {
        raw = name + "[" + at + "]";
      }
      loads += "  let " + x + " = " + convert(raw, operand.dtype, operand.as) + ";\n";
    }
    std::string declarations;
    bool uses_f16 = compute == at::kHalf;
    for (int b = 0; b < bound_count; b++) {
      uses_f16 = uses_f16 || bound[b].dtype == at::kHalf;
      declarations += "@group(0) @binding(" + std::to_string(b + 1) + ") var<storage, " +
                      (bound[b].written ? "read_write" : "read") + "> b" + std::to_string(b + 1) + ": array<" +
                      storage_type(bound[b].dtype) + ">;\n";
    }
    const std::string c = wgsl_type(compute);
    std::string body(expression);
    replace_all(body, "$ua", "p.s2.z");
    replace_all(body, "$ub", "p.s2.w");
    replace_all(body, "$a", scalar_load(0, compute));
    replace_all(body, "$b", scalar_load(1, compute));
    replace_all(body, "$0", compute == at::kBool ? "false" : c + "(0)");
    replace_all(body, "$C", c);
    replace_all(body, "$nan(", "xnan(");
    const bool calls_f64_math = use_f64_math(body, compute);
    const std::string out_name = "b" + std::to_string(out_binding);
    std::string source;
    if (uses_f16 || body.find("f16") != std::string::npos || loads.find("f16") != std::string::npos)
      source += "enable f16;\n";
    source += immediate ? kFlatParams : kElementwiseParams;
    source += declarations;
    source += flat ? kFlatOffset : kStridedOffset;
    if (body.find("erf_approx") != std::string::npos) source += kErf;
    if (body.find("xnan(") != std::string::npos) source += nan_test(compute);
    if (calls_f64_math) source += kF64Math;
    const char* entry =
        "@compute @workgroup_size(256)\n"
        "fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {\n"
        "  let t = gid.x + gid.y * groups.x * 256u;\n";
    if (bytes_out) {
      // Each invocation owns one word of the output, and sets the bytes of it that the
      // tensor covers, so that no two invocations write the same word.
      source += "fn value(i: u32) -> bool {\n" + loads + "  return " + body + ";\n}\n";
      source += entry;
      source += "  let first = p.offsets[0];\n"
                "  if (t >= (first + p.numel + 3u) / 4u - first / 4u) { return; }\n"
                "  let w = first / 4u + t;\n"
                "  var word = " + out_name + "[w];\n"
                "  for (var j = 0u; j < 4u; j = j + 1u) {\n"
                "    let byte = w * 4u + j;\n"
                "    if (byte >= first && byte - first < p.numel) {\n"
                "      let shift = j * 8u;\n"
                "      word = (word & ~(0xffu << shift)) | (select(0u, 1u, value(byte - first)) << shift);\n"
                "    }\n"
                "  }\n"
                "  " + out_name + "[w] = word;\n}\n";
    } else {
      source += entry;
      source += "  let i = t;\n  if (i >= p.numel) { return; }\n";
      source += loads;
      source += "  " + out_name + "[offset_of(0u, i)] = " + convert("(" + body + ")", compute, out_dtype) + ";\n}\n";
    }
    return source;
  });
  const uint64_t first = params.offsets[0];
  const uint64_t invocations = bytes_out ? (first + params.numel + 3) / 4 - first / 4 : params.numel;
  if (immediate) {
    FlatParams flat_params;
    flat_params.numel = params.numel;
    std::memcpy(flat_params.offsets, params.offsets, sizeof flat_params.offsets);
    std::memcpy(flat_params.scalars, params.scalars, sizeof flat_params.scalars);
    // Binding 0, the uniform the strided kernels read, is not in these kernels.
    launch(dev, compiled, bindings_of(nullptr, 0), invocations, &flat_params, sizeof flat_params);
  } else {
    launch(dev, compiled, bindings_of(&params, sizeof params), invocations);
  }
  return true;
}

// `out` resized to `shape`, as structured out= kernels do.
void prepare_out(at::Tensor& out, at::IntArrayRef shape) { at::native::resize_output(out, shape); }

at::DimVector broadcast_shape(at::ArrayRef<at::Tensor> inputs) {
  at::DimVector shape;
  for (const auto& t : inputs) shape = at::infer_size_dimvector(shape, t.sizes());
  return shape;
}

using at::native::call_fallback_fn;

// --- Binary arithmetic -------------------------------------------------------------------

bool numeric(at::ScalarType dtype) { return dtype != at::kBool && wgsl_type(dtype) != nullptr; }

// The type a floating operation computes in: f16 in f32 (as PyTorch's CPU kernels do), f32
// and f64 in themselves.
at::ScalarType float_compute(at::ScalarType dtype) { return dtype == at::kHalf ? at::kFloat : dtype; }

at::Tensor& add_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, other}));
  if (!numeric(out.scalar_type()) ||
      !elementwise(out, {self, other}, "x0 + $a * x1", {float_compute(out.scalar_type()), alpha}))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(add_out)>::call(self, other, alpha, out);
  return out;
}

at::Tensor& sub_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, other}));
  if (!numeric(out.scalar_type()) ||
      !elementwise(out, {self, other}, "x0 - $a * x1", {float_compute(out.scalar_type()), alpha}))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(sub_out)>::call(self, other, alpha, out);
  return out;
}

at::Tensor& mul_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, other}));
  const at::ScalarType dtype = out.scalar_type();
  // bool * bool is `and`; PyTorch keeps bool.
  const char* e = dtype == at::kBool ? "x0 && x1" : "x0 * x1";
  if (!elementwise(out, {self, other}, e, {float_compute(dtype)}))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(mul_out)>::call(self, other, out);
  return out;
}

at::Tensor& div_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, other}));
  if (!is_floating(out.scalar_type()) || !elementwise(out, {self, other}, "x0 / x1", {float_compute(out.scalar_type())}))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(div_out)>::call(self, other, out);
  return out;
}

at::Tensor& maximum_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, other}));
  const at::ScalarType dtype = out.scalar_type();
  const char* e = is_floating(dtype) ? "select(max(x0, x1), x0 + x1, $nan(x0) || $nan(x1))" : "max(x0, x1)";
  if (!numeric(dtype) || !elementwise(out, {self, other}, e, {float_compute(dtype)}))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(maximum_out)>::call(self, other, out);
  return out;
}

at::Tensor& minimum_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, other}));
  const at::ScalarType dtype = out.scalar_type();
  const char* e = is_floating(dtype) ? "select(min(x0, x1), x0 + x1, $nan(x0) || $nan(x1))" : "min(x0, x1)";
  if (!numeric(dtype) || !elementwise(out, {self, other}, e, {float_compute(dtype)}))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(minimum_out)>::call(self, other, out);
  return out;
}

// x ** exponent for a scalar exponent. WGSL's pow is NaN for a negative base, so an integral
// exponent goes through |x| and the sign, as the CPU's does.
at::Tensor& pow_tensor_scalar_out(const at::Tensor& self, const at::Scalar& exponent, at::Tensor& out) {
  prepare_out(out, self.sizes());
  const at::ScalarType dtype = out.scalar_type();
  const double e = exponent.to<double>();
  std::string expression;
  if (e == 0.0) {
    expression = "$C(1)";  // even for a NaN, as C's pow
  } else if (e == 1.0) {
    expression = "x0";
  } else if (e == 2.0) {
    expression = "x0 * x0";
  } else if (e == 3.0) {
    expression = "x0 * x0 * x0";
  } else if (e == 0.5) {
    expression = "sqrt(x0)";
  } else if (std::floor(e) == e && std::fabs(e) < 1e6) {
    const bool odd = std::fmod(std::fabs(e), 2.0) == 1.0;
    expression = odd ? "sign(x0) * pow(abs(x0), $a)" : "pow(abs(x0), $a)";
  } else {
    expression = "pow(x0, $a)";
  }
  if (dtype == at::kDouble && expression.find("pow") != std::string::npos) expression.clear();
  // WGSL leaves pow, sign and abs of a NaN open; PyTorch gives the NaN.
  if (e != 0.0 && !expression.empty()) expression = "select(" + expression + ", x0, $nan(x0))";
  if (!is_floating(dtype) || self.scalar_type() != dtype || expression.empty() ||
      !elementwise(out, {self}, expression, {float_compute(dtype), exponent}))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(pow_Tensor_Scalar_out)>::call(self, exponent, out);
  return out;
}

// --- Comparisons and logic (bool results) ---------------------------------------------------

// The type two operands compare in: PyTorch's promotion of the pair, except that bools,
// which WGSL only tests for equality, order as integers.
template <typename Other>
at::ScalarType comparison_type(const at::Tensor& self, const Other& other, const char* op) {
  const at::ScalarType common = at::result_type(self, other);
  const bool equality = op[0] == '=' || op[0] == '!';
  if (common == at::kHalf) return at::kFloat;  // exact, and one NaN test for both
  return common == at::kBool && !equality ? at::kInt : common;
}

// x0 `op` other, with IEEE's answer for NaNs whatever the compiler assumes: only != holds.
std::string comparison(const char* op, const std::string& other) {
  const std::string compared = "x0 " + std::string(op) + " " + other;
  const std::string nan = "$nan(x0) || $nan(" + other + ")";
  if (std::string(op) == "!=") return "(" + compared + ") || " + nan;
  return "(" + compared + ") && !(" + nan + ")";
}

bool compare(at::Tensor& out, const at::Tensor& self, const at::Tensor& other, const char* op) {
  prepare_out(out, broadcast_shape({self, other}));
  if (out.scalar_type() != at::kBool) return false;
  return elementwise(out, {self, other}, comparison(op, "x1"), {comparison_type(self, other, op)});
}

bool compare_scalar(at::Tensor& out, const at::Tensor& self, const at::Scalar& other, const char* op) {
  prepare_out(out, self.sizes());
  if (out.scalar_type() != at::kBool) return false;
  return elementwise(out, {self}, comparison(op, "$a"), {comparison_type(self, other, op), other});
}

#define XHAL_COMPARISON(name, op)                                                                          \
  at::Tensor& name##_tensor_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {         \
    if (!compare(out, self, other, op))                                                                    \
      return call_fallback_fn<&cpu_fallback, ATEN_OP(name##_Tensor_out)>::call(self, other, out);          \
    return out;                                                                                            \
  }                                                                                                        \
  at::Tensor& name##_scalar_out(const at::Tensor& self, const at::Scalar& other, at::Tensor& out) {         \
    if (!compare_scalar(out, self, other, op))                                                             \
      return call_fallback_fn<&cpu_fallback, ATEN_OP(name##_Scalar_out)>::call(self, other, out);          \
    return out;                                                                                            \
  }

XHAL_COMPARISON(eq, "==")
XHAL_COMPARISON(ne, "!=")
XHAL_COMPARISON(lt, "<")
XHAL_COMPARISON(le, "<=")
XHAL_COMPARISON(gt, ">")
XHAL_COMPARISON(ge, ">=")

at::Tensor& logical_not_out(const at::Tensor& self, at::Tensor& out) {
  prepare_out(out, self.sizes());
  if (out.scalar_type() != at::kBool || !elementwise(out, {self}, "!x0", {at::kBool}))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(logical_not_out)>::call(self, out);
  return out;
}

#define XHAL_LOGICAL(name, expression)                                                                     \
  at::Tensor& name##_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {               \
    prepare_out(out, broadcast_shape({self, other}));                                                      \
    if (out.scalar_type() != at::kBool || !elementwise(out, {self, other}, expression, {at::kBool}))       \
      return call_fallback_fn<&cpu_fallback, ATEN_OP(name##_out)>::call(self, other, out);                 \
    return out;                                                                                            \
  }

// Bitwise operations: logic on bools, bits on integers (PyTorch refuses a bool result of
// integer operands before this is called).
#define XHAL_BITWISE(name, on_bool, on_integers)                                                           \
  at::Tensor& name##_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {               \
    prepare_out(out, broadcast_shape({self, other}));                                                      \
    const at::ScalarType dtype = out.scalar_type();                                                        \
    const bool integral = dtype == at::kInt || dtype == at::kLong;                                         \
    if ((dtype != at::kBool && !integral) ||                                                               \
        !elementwise(out, {self, other}, dtype == at::kBool ? on_bool : on_integers, {dtype}))             \
      return call_fallback_fn<&cpu_fallback, ATEN_OP(name##_Tensor_out)>::call(self, other, out);          \
    return out;                                                                                            \
  }

XHAL_BITWISE(bitwise_and, "x0 && x1", "x0 & x1")
XHAL_BITWISE(bitwise_or, "x0 || x1", "x0 | x1")
XHAL_BITWISE(bitwise_xor, "x0 != x1", "x0 ^ x1")

at::Tensor& bitwise_not_out(const at::Tensor& self, at::Tensor& out) {
  prepare_out(out, self.sizes());
  const at::ScalarType dtype = out.scalar_type();
  const bool integral = dtype == at::kInt || dtype == at::kLong;
  if ((dtype != at::kBool && !integral) || self.scalar_type() != dtype ||
      !elementwise(out, {self}, dtype == at::kBool ? "!x0" : "~x0", {dtype}))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(bitwise_not_out)>::call(self, out);
  return out;
}

XHAL_LOGICAL(logical_and, "x0 && x1")
XHAL_LOGICAL(logical_or, "x0 || x1")
XHAL_LOGICAL(logical_xor, "x0 != x1")

at::Tensor& where_out(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  prepare_out(out, broadcast_shape({condition, self, other}));
  if (condition.scalar_type() != at::kBool || condition.device() != out.device() ||
      !elementwise(out, {condition, self, other}, "select(x2, x1, x0)", {out.scalar_type(), 0, 0, 1u}))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(where_self_out)>::call(condition, self, other, out);
  return out;
}

at::Tensor where_self(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  const bool placed = condition.is_privateuseone() && (self.is_privateuseone() || is_cpu_scalar(self)) &&
                      (other.is_privateuseone() || is_cpu_scalar(other));
  if (placed) {
    at::Tensor out = at::empty(broadcast_shape({condition, self, other}),
                               condition.options().dtype(at::result_type(self, other)));
    if (condition.scalar_type() == at::kBool &&
        elementwise(out, {condition, self, other}, "select(x2, x1, x0)", {out.scalar_type(), 0, 0, 1u}))
      return out;
  }
  return call_fallback_fn<&cpu_fallback, ATEN_OP(where_self)>::call(condition, self, other);
}

at::Tensor& clamp_out(const at::Tensor& self, const std::optional<at::Scalar>& min, const std::optional<at::Scalar>& max,
                      at::Tensor& out) {
  prepare_out(out, self.sizes());
  const at::ScalarType dtype = out.scalar_type();
  std::string e = "x0";
  if (min.has_value()) e = "max(" + e + ", $a)";
  if (max.has_value()) e = "min(" + e + ", $b)";
  // WGSL's min and max may drop a NaN; PyTorch's clamp keeps it.
  if (is_floating(dtype)) e = "select(" + e + ", x0, $nan(x0))";
  if (!numeric(dtype) || self.scalar_type() != dtype || (!min.has_value() && !max.has_value()) ||
      !elementwise(out, {self}, e, {float_compute(dtype), min.value_or(0), max.value_or(0)}))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(clamp_out)>::call(self, min, max, out);
  return out;
}

// --- Unary operations and activations ------------------------------------------------------

// `expression` on a floating tensor, computed in f32 (f16 too), or `in_f64` on an f64 one:
// an expression of arithmetic, sqrt and kF64Math's functions, or none where there is no f64
// form (WGSL's other transcendental built-ins stop at 32 bits). Either may be none.
bool unary(at::Tensor& out, const at::Tensor& self, const char* expression, const char* in_f64) {
  prepare_out(out, self.sizes());
  const at::ScalarType dtype = out.scalar_type();
  if (!is_floating(dtype) || self.scalar_type() != dtype) return false;
  if ((dtype == at::kDouble ? in_f64 : expression) == nullptr) return false;
  return elementwise(out, {self}, dtype == at::kDouble ? in_f64 : expression, {float_compute(dtype)});
}

#define XHAL_UNARY(op, expression, in_f64)                                                  \
  at::Tensor& op##_out(const at::Tensor& self, at::Tensor& out) {                           \
    if (!unary(out, self, expression, in_f64))                                              \
      return call_fallback_fn<&cpu_fallback, ATEN_OP(op##_out)>::call(self, out);           \
    return out;                                                                             \
  }

XHAL_UNARY(exp, "exp(x0)", "exp(x0)")
XHAL_UNARY(log, "log(x0)", "log(x0)")
XHAL_UNARY(sqrt, "sqrt(x0)", "sqrt(x0)")
XHAL_UNARY(rsqrt, "inverseSqrt(x0)", "1.0 / sqrt(x0)")
XHAL_UNARY(sin, "sin(x0)", nullptr)
XHAL_UNARY(cos, "cos(x0)", nullptr)
// In f32 tanh is 1 to the last bit past 15, and the clamp keeps drivers' tanh from overflowing.
XHAL_UNARY(tanh, "select(tanh(clamp(x0, -15.0, 15.0)), x0, $nan(x0))", "tanh(x0)")
XHAL_UNARY(sigmoid, "1.0 / (1.0 + exp(-x0))", "1.0 / (1.0 + exp(-x0))")
XHAL_UNARY(reciprocal, "1.0 / x0", "1.0 / x0")
XHAL_UNARY(silu, "x0 / (1.0 + exp(-x0))", "x0 / (1.0 + exp(-x0))")
// erf_approx (gelu's, within 1.5e-7) loses all relative precision near 0: no f32 form.
XHAL_UNARY(erf, nullptr, "erf(x0)")

at::Tensor& neg_out(const at::Tensor& self, at::Tensor& out) {
  prepare_out(out, self.sizes());
  if (!numeric(out.scalar_type()) || out.scalar_type() != self.scalar_type() ||
      !elementwise(out, {self}, "-x0", {float_compute(out.scalar_type())}))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(neg_out)>::call(self, out);
  return out;
}

at::Tensor& abs_out(const at::Tensor& self, at::Tensor& out) {
  prepare_out(out, self.sizes());
  if (!numeric(out.scalar_type()) || out.scalar_type() != self.scalar_type() ||
      !elementwise(out, {self}, "abs(x0)", {float_compute(out.scalar_type())}))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(abs_out)>::call(self, out);
  return out;
}

at::Tensor& gelu_out(const at::Tensor& self, c10::string_view approximate, at::Tensor& out) {
  const char* e = approximate == "tanh"
                      ? "0.5 * x0 * (1.0 + tanh(clamp(0.7978845608 * (x0 + 0.044715 * x0 * x0 * x0), -15.0, 15.0)))"
                      : "0.5 * x0 * (1.0 + erf_approx(x0 * 0.7071067812))";
  // In f64, kF64Math's tanh and erf, with the constants to f64's precision (erf_approx is good
  // to f32's only).
  const char* in_f64 = approximate == "tanh"
                           ? "0.5 * x0 * (1.0 + tanh(0.7978845608028654 * (x0 + 0.044715 * x0 * x0 * x0)))"
                           : "0.5 * x0 * (1.0 + erf(x0 * 0.7071067811865476))";
  if (!unary(out, self, e, in_f64))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(gelu_out)>::call(self, approximate, out);
  return out;
}

const char* kRelu = "select(x0, $0, x0 < $0 && !$nan(x0))";  // keeps a NaN, as PyTorch's does

at::Tensor relu(const at::Tensor& self) {
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  if (!numeric(self.scalar_type()) || !elementwise(out, {self}, kRelu, {float_compute(self.scalar_type())}))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(relu)>::call(self);
  return out;
}

at::Tensor& relu_(at::Tensor& self) {
  if (!numeric(self.scalar_type()) || !elementwise(self, {self}, kRelu, {float_compute(self.scalar_type())}))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(relu_)>::call(self);
  return self;
}

// --- Backward formulas ---------------------------------------------------------------------

// An activation's backward: `e` in f32 (f16 too), `in_f64` in f64 (arithmetic, sqrt and
// kF64Math's functions only; none where there is no f64 form).
bool backward(at::Tensor& grad_input, const at::Tensor& grad_output, const at::Tensor& other, const char* e,
              const char* in_f64, const at::Scalar& alpha = 0) {
  prepare_out(grad_input, broadcast_shape({grad_output, other}));
  const at::ScalarType dtype = grad_input.scalar_type();
  if ((dtype == at::kDouble && in_f64 == nullptr) || !is_floating(dtype) || grad_output.scalar_type() != dtype ||
      other.scalar_type() != dtype)
    return false;
  return elementwise(grad_input, {grad_output, other}, dtype == at::kDouble ? in_f64 : e, {float_compute(dtype), alpha});
}

at::Tensor& threshold_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Scalar& threshold,
                                   at::Tensor& grad_input) {
  const char* e = "select(x0, 0.0, x1 <= $a && !$nan(x1))";
  if (!backward(grad_input, grad_output, self, e, e, threshold))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(threshold_backward_grad_input)>::call(grad_output, self, threshold,
                                                                                         grad_input);
  return grad_input;
}

at::Tensor& sigmoid_backward_out(const at::Tensor& grad_output, const at::Tensor& output, at::Tensor& grad_input) {
  const char* e = "x0 * x1 * (1.0 - x1)";
  if (!backward(grad_input, grad_output, output, e, e))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(sigmoid_backward_grad_input)>::call(grad_output, output, grad_input);
  return grad_input;
}

at::Tensor& tanh_backward_out(const at::Tensor& grad_output, const at::Tensor& output, at::Tensor& grad_input) {
  const char* e = "x0 * (1.0 - x1 * x1)";
  if (!backward(grad_input, grad_output, output, e, e))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(tanh_backward_grad_input)>::call(grad_output, output, grad_input);
  return grad_input;
}

at::Tensor& gelu_backward_out(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate,
                              at::Tensor& grad_input) {
  const char* e =
      "x0 * (0.5 * (1.0 + erf_approx(x1 * 0.7071067812)) + x1 * 0.3989422804 * exp(-0.5 * x1 * x1))";
  const char* in_f64 =
      "x0 * (0.5 * (1.0 + erf(x1 * 0.7071067811865476)) + x1 * 0.3989422804014327 * exp(-0.5 * x1 * x1))";
  if (approximate == "tanh" || !backward(grad_input, grad_output, self, e, in_f64))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(gelu_backward_grad_input)>::call(grad_output, self, approximate,
                                                                                    grad_input);
  return grad_input;
}

at::Tensor& silu_backward_out(const at::Tensor& grad_output, const at::Tensor& self, at::Tensor& grad_input) {
  const char* e = "x0 * (1.0 / (1.0 + exp(-x1))) * (1.0 + x1 * (1.0 - 1.0 / (1.0 + exp(-x1))))";
  if (!backward(grad_input, grad_output, self, e, e))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(silu_backward_grad_input)>::call(grad_output, self, grad_input);
  return grad_input;
}

// --- Triangles -----------------------------------------------------------------------------

// Keeps the elements on and above (`upper`) or on and below diagonal `diagonal` of the last
// two dimensions; $ua and $ub carry their sizes.
bool triangle(at::Tensor& out, const at::Tensor& self, int64_t diagonal, bool upper) {
  prepare_out(out, self.sizes());
  if (self.dim() < 2 || self.scalar_type() != out.scalar_type()) return false;
  const int64_t rows = self.size(-2), columns = self.size(-1);
  if (std::abs(diagonal) > std::max<int64_t>(rows, columns) + 1 || columns == 0 || rows == 0 ||
      columns > std::numeric_limits<int32_t>::max() || rows > std::numeric_limits<int32_t>::max())
    return false;
  const std::string offset = "i32(i % $ua) - i32((i / $ua) % $ub)";
  const std::string keep = upper ? offset + " >= " + std::to_string(diagonal) : offset + " <= " + std::to_string(diagonal);
  // WGSL's select(f, t, c) is `c ? t : f`.
  return elementwise(out, {self}, "select($0, x0, " + keep + ")",
                     {out.scalar_type(), 0, 0, 0, {static_cast<uint32_t>(columns), static_cast<uint32_t>(rows)}, true});
}

at::Tensor& triu_out(const at::Tensor& self, int64_t diagonal, at::Tensor& out) {
  if (!triangle(out, self, diagonal, true))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(triu_out)>::call(self, diagonal, out);
  return out;
}

at::Tensor& tril_out(const at::Tensor& self, int64_t diagonal, at::Tensor& out) {
  if (!triangle(out, self, diagonal, false))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(tril_out)>::call(self, diagonal, out);
  return out;
}

// --- Copies on the device ----------------------------------------------------------------

}  // namespace

bool copy_on_device(at::Tensor& destination, const at::Tensor& source) {
  if (wgsl_type(destination.scalar_type()) == nullptr || wgsl_type(source.scalar_type()) == nullptr) return false;
  // The conversion happens where the value is stored, from the source's own type.
  const at::ScalarType from = source.scalar_type();
  const std::string value = destination.scalar_type() == at::kBool ? convert("x0", from, at::kBool) : "x0";
  return elementwise(destination, {source}, value, {from});
}

namespace {

// --- Reductions --------------------------------------------------------------------------

struct ReduceParams {
  uint32_t numel = 0;      // output elements
  uint32_t kept = 0;       // kept dimensions
  uint32_t reduced = 0;    // reduced dimensions
  uint32_t count = 0;      // elements reduced into each output
  uint32_t input_offset = 0;
  uint32_t output_offset = 0;
  uint32_t indices_offset = 0;
  uint32_t pad = 0;
  uint32_t kept_sizes[kMaxDims] = {};
  uint32_t kept_strides[kMaxDims] = {};
  uint32_t reduced_sizes[kMaxDims] = {};
  uint32_t reduced_strides[kMaxDims] = {};
};
static_assert(sizeof(ReduceParams) == 160, "the WGSL struct R is 160 bytes");

enum class Reduction { Sum, Mean, Max, Min };

// One invocation per output element walks the reduced elements. Sums keep four partial sums
// in the accumulator type, so that long reductions lose less to rounding; max and min keep
// the first NaN, as PyTorch does, and where `indices` is bound, the index of the winner
// (int64, written as two words).
std::string reduce_source(Reduction op, at::ScalarType input, at::ScalarType accumulate, at::ScalarType output,
                          bool values, bool indices) {
  const std::string acc = wgsl_type(accumulate);
  std::string source;
  if (input == at::kHalf || output == at::kHalf) source += "enable f16;\n";
  source += R"(
struct R {
  numel: u32, kept: u32, reduced: u32, count: u32,
  input_offset: u32, output_offset: u32, indices_offset: u32, pad: u32,
  kept_sizes: array<vec4<u32>, 2>, kept_strides: array<vec4<u32>, 2>,
  reduced_sizes: array<vec4<u32>, 2>, reduced_strides: array<vec4<u32>, 2>,
}
@group(0) @binding(0) var<uniform> r: R;
)";
  source += "@group(0) @binding(1) var<storage, read> input: array<" + std::string(storage_type(input)) + ">;\n";
  if (values)
    source += "@group(0) @binding(2) var<storage, read_write> output: array<" + std::string(storage_type(output)) + ">;\n";
  if (indices) source += "@group(0) @binding(3) var<storage, read_write> indices: array<u32>;\n";
  const std::string raw = input == at::kBool ? "(((input[at / 4u] >> ((at % 4u) * 8u)) & 0xffu) != 0u)" : "input[at]";
  source += "fn load(at: u32) -> " + acc + " { return " + convert(raw, input, accumulate) + "; }\n";
  source += nan_test(accumulate);
  source += R"(
fn element(base: u32, j: u32) -> u32 {
  var left = j;
  var at = base;
  for (var k = 0u; k < r.reduced; k = k + 1u) {
    let d = r.reduced - 1u - k;
    let size = r.reduced_sizes[d / 4u][d % 4u];
    at = at + (left % size) * r.reduced_strides[d / 4u][d % 4u];
    left = left / size;
  }
  return at;
}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let o = gid.x + gid.y * groups.x * 64u;
  if (o >= r.numel) { return; }
  var rest = o;
  var base = r.input_offset;
  for (var k = 0u; k < r.kept; k = k + 1u) {
    let d = r.kept - 1u - k;
    let size = r.kept_sizes[d / 4u][d % 4u];
    base = base + (rest % size) * r.kept_strides[d / 4u][d % 4u];
    rest = rest / size;
  }
)";
  std::string result;
  if (op == Reduction::Sum || op == Reduction::Mean) {
    source += "  var partial = vec4<" + acc + ">(" + acc + "(0));\n"
              "  for (var j = 0u; j < r.count; j = j + 1u) {\n"
              "    partial[j % 4u] = partial[j % 4u] + load(element(base, j));\n"
              "  }\n"
              "  var total = (partial.x + partial.y) + (partial.z + partial.w);\n";
    if (op == Reduction::Mean) source += "  total = total / " + acc + "(r.count);\n";
    result = "total";
  } else {
    const char* better = op == Reduction::Max ? ">" : "<";
    source += "  var best = load(element(base, 0u));\n"
              "  var best_j = 0u;\n"
              "  for (var j = 1u; j < r.count; j = j + 1u) {\n"
              "    let v = load(element(base, j));\n"
              "    if ((v " + std::string(better) + " best && !xnan(best)) || (xnan(v) && !xnan(best))) { best = v; best_j = j; }\n"
              "  }\n";
    result = "best";
  }
  if (values) source += "  output[r.output_offset + o] = " + convert(result, accumulate, output) + ";\n";
  if (indices) source += "  indices[2u * (r.indices_offset + o)] = best_j;\n  indices[2u * (r.indices_offset + o) + 1u] = 0u;\n";
  source += "}\n";
  return source;
}

// Reduces `self` over `dims` (all of them when none are given) into `values` and/or
// `indices` (int64), each contiguous and shaped as the reduction leaves it. False when a
// kernel cannot do it.
bool reduce(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim, Reduction op, at::Tensor* values,
            at::Tensor* indices) {
  if (self.dim() > kMaxDims || !on_device(self, self.scalar_type()) || (self.scalar_type() == at::kBool && op != Reduction::Sum))
    return false;
  std::vector<bool> reduced(self.dim(), false);
  if (!dims.has_value() || dims->empty()) {
    std::fill(reduced.begin(), reduced.end(), true);
  } else {
    for (int64_t d : *dims) reduced[c10::maybe_wrap_dim(d, self.dim())] = true;
  }
  at::DimVector shape;
  ReduceParams r;
  uint64_t count = 1;
  for (int64_t d = 0; d < self.dim(); d++) {
    if (reduced[d]) {
      if (keepdim) shape.push_back(1);
      r.reduced_sizes[r.reduced] = static_cast<uint32_t>(self.size(d));
      r.reduced_strides[r.reduced] = static_cast<uint32_t>(self.stride(d));
      r.reduced++;
      count *= self.size(d);
    } else {
      shape.push_back(self.size(d));
      r.kept_sizes[r.kept] = static_cast<uint32_t>(self.size(d));
      r.kept_strides[r.kept] = static_cast<uint32_t>(self.stride(d));
      r.kept++;
    }
  }
  const at::ScalarType input = self.scalar_type();
  at::ScalarType output = input;
  if (values != nullptr) {
    prepare_out(*values, shape);
    output = values->scalar_type();
    if (!values->is_contiguous() || values->device() != self.device() || !numeric(output) ||
        !on_device(self, output) || place_of(*values).buffer == place_of(self).buffer)
      return false;
  }
  if (indices != nullptr) {
    prepare_out(*indices, shape);
    if (!indices->is_contiguous() || indices->scalar_type() != at::kLong || indices->device() != self.device() ||
        place_of(*indices).buffer == place_of(self).buffer)
      return false;
  }
  // Sums accumulate floats in f32 (f64 when either end is f64) and integers in the output's
  // type; max and min compare in the input's own type.
  at::ScalarType accumulate = input;
  if (op == Reduction::Sum || op == Reduction::Mean) {
    if (is_floating(input) != is_floating(output) && input != at::kBool) return false;
    if (is_floating(output)) {
      accumulate = input == at::kDouble || output == at::kDouble ? at::kDouble : at::kFloat;
    } else {
      accumulate = output;
    }
    if (op == Reduction::Mean && !is_floating(output)) return false;
  } else if (output != input) {
    return false;
  }
  if (!on_device(self, accumulate)) return false;
  const uint64_t out_numel = c10::multiply_integers(shape);
  if (out_numel == 0) return true;
  // An empty max or min is PyTorch's error to raise; an empty sum is zero, an empty mean NaN.
  if (count == 0) {
    if (op == Reduction::Max || op == Reduction::Min) return false;
    values->fill_(op == Reduction::Mean ? std::numeric_limits<double>::quiet_NaN() : 0.0);
    return true;
  }
  if (count > std::numeric_limits<uint32_t>::max() || out_numel > std::numeric_limits<uint32_t>::max()) return false;
  r.numel = static_cast<uint32_t>(out_numel);
  r.count = static_cast<uint32_t>(count);
  r.input_offset = element_offset(self);
  std::vector<Binding> bindings{Binding{nullptr, 0, sizeof r, &r}, Binding{place_of(self).buffer, 0, XHAL_WHOLE_SIZE, nullptr},
                                Binding{}, Binding{}};
  if (values != nullptr) {
    r.output_offset = element_offset(*values);
    bindings[2] = Binding{place_of(*values).buffer, 0, XHAL_WHOLE_SIZE, nullptr};
  }
  if (indices != nullptr) {
    r.indices_offset = element_offset(*indices);
    bindings[3] = Binding{place_of(*indices).buffer, 0, XHAL_WHOLE_SIZE, nullptr};
    if (values != nullptr && bindings[3].buffer == bindings[2].buffer) return false;
  }
  Device& dev = device(self.device().index());
  const std::string key = "reduce|" + std::to_string(static_cast<int>(op)) + wgsl_type(input) + wgsl_type(accumulate) +
                          wgsl_type(output) + (values != nullptr ? "v" : "") + (indices != nullptr ? "i" : "");
  const Kernel& compiled = kernel_by_key(dev, key, [&] {
    return reduce_source(op, input, accumulate, output, values != nullptr, indices != nullptr);
  });
  launch(dev, compiled, bindings, out_numel);
  return true;
}

at::Tensor& sum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype, at::Tensor& out) {
  if (!reduce(self, dim, keepdim, Reduction::Sum, &out, nullptr))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(sum_IntList_out)>::call(self, dim, keepdim, dtype, out);
  return out;
}

at::Tensor& mean_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                     std::optional<at::ScalarType> dtype, at::Tensor& out) {
  if (!reduce(self, dim, keepdim, Reduction::Mean, &out, nullptr))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(mean_out)>::call(self, dim, keepdim, dtype, out);
  return out;
}

at::Tensor& amax_out(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, at::Tensor& out) {
  if (!reduce(self, dim, keepdim, Reduction::Max, &out, nullptr))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(amax_out)>::call(self, dim, keepdim, out);
  return out;
}

at::Tensor& amin_out(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, at::Tensor& out) {
  if (!reduce(self, dim, keepdim, Reduction::Min, &out, nullptr))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(amin_out)>::call(self, dim, keepdim, out);
  return out;
}

// The largest (smallest) element of the whole tensor, as a 0-dimensional tensor.
at::Tensor max_all(const at::Tensor& self) {
  at::Tensor out = at::empty({}, self.options());
  if (self.numel() == 0 || !reduce(self, std::nullopt, false, Reduction::Max, &out, nullptr))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(max)>::call(self);
  return out;
}

at::Tensor min_all(const at::Tensor& self) {
  at::Tensor out = at::empty({}, self.options());
  if (self.numel() == 0 || !reduce(self, std::nullopt, false, Reduction::Min, &out, nullptr))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(min)>::call(self);
  return out;
}

std::tuple<at::Tensor&, at::Tensor&> max_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& max,
                                                 at::Tensor& max_values) {
  const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  if (self.dim() == 0 || self.size(d) == 0 ||
      !reduce(self, at::IntArrayRef(d), keepdim, Reduction::Max, &max, &max_values))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(max_dim_max)>::call(self, dim, keepdim, max, max_values);
  return {max, max_values};
}

std::tuple<at::Tensor&, at::Tensor&> min_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& min,
                                                 at::Tensor& min_indices) {
  const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  if (self.dim() == 0 || self.size(d) == 0 ||
      !reduce(self, at::IntArrayRef(d), keepdim, Reduction::Min, &min, &min_indices))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(min_dim_min)>::call(self, dim, keepdim, min, min_indices);
  return {min, min_indices};
}

// argmax and argmin: over one dimension, or over the flattened tensor (whose shape keepdim
// keeps as ones).
bool arg_reduce(at::Tensor& out, const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, Reduction op) {
  if (self.numel() == 0) return false;
  if (dim.has_value()) {
    if (self.dim() == 0) return false;
    const int64_t d = c10::maybe_wrap_dim(*dim, self.dim());
    return reduce(self, at::IntArrayRef(d), keepdim, op, nullptr, &out);
  }
  return reduce(self, std::nullopt, keepdim, op, nullptr, &out);
}

at::Tensor& argmax_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, at::Tensor& out) {
  if (!arg_reduce(out, self, dim, keepdim, Reduction::Max))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(argmax_out)>::call(self, dim, keepdim, out);
  return out;
}

at::Tensor& argmin_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, at::Tensor& out) {
  if (!arg_reduce(out, self, dim, keepdim, Reduction::Min))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(argmin_out)>::call(self, dim, keepdim, out);
  return out;
}

// --- Matrix products ---------------------------------------------------------------------

struct MatmulParams {
  uint32_t batch = 1, m = 0, n = 0, k = 0;
  float alpha = 1.0f, beta = 0.0f;
  uint32_t has_bias = 0, pad = 0;
  // Element offsets of a, b, bias and out.
  uint32_t offsets[4] = {};
  // Strides (batch, row, column) of a, b, bias; out is contiguous.
  uint32_t a_strides[4] = {}, b_strides[4] = {}, bias_strides[4] = {};
};
static_assert(sizeof(MatmulParams) == 96, "the WGSL struct M is 96 bytes");

std::string matmul_source(const BufferSet& set, const std::string& a, const std::string& b, const std::string& bias,
                          const std::string& out, at::ScalarType dtype) {
  std::string source = dtype == at::kHalf ? "enable f16;\n" : "";
  source += R"(
struct M {
  batch: u32, m: u32, n: u32, k: u32,
  alpha: f32, beta: f32, has_bias: u32, pad: u32,
  offsets: vec4<u32>, a_strides: vec4<u32>, b_strides: vec4<u32>, bias_strides: vec4<u32>,
}
@group(0) @binding(0) var<uniform> q: M;
)";
  source += set.declarations();
  source += R"(
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 64u;
  if (i >= q.batch * q.m * q.n) { return; }
  let col = i % q.n;
  let row = (i / q.n) % q.m;
  let bat = i / (q.n * q.m);
  var a_at = q.offsets.x + bat * q.a_strides.x + row * q.a_strides.y;
  var b_at = q.offsets.y + bat * q.b_strides.x + col * q.b_strides.z;
  var acc = vec4<ACC>(ACC(0));
  for (var kk = 0u; kk < q.k; kk = kk + 1u) {
    acc[kk % 4u] = acc[kk % 4u] + ACC(A[a_at]) * ACC(B[b_at]);
    a_at = a_at + q.a_strides.z;
    b_at = b_at + q.b_strides.y;
  }
  var value = ACC(q.alpha) * ((acc.x + acc.y) + (acc.z + acc.w));
  if (q.has_bias != 0u) {
    value = value + ACC(q.beta) * ACC(BIAS[q.offsets.z + bat * q.bias_strides.x + row * q.bias_strides.y + col * q.bias_strides.z]);
  }
  OUT[q.offsets.w + i] = ELEMENT(value);
}
)";
  replace_all(source, "A[", a + "[");
  replace_all(source, "B[", b + "[");
  replace_all(source, "BIAS[", (bias.empty() ? a : bias) + "[");
  replace_all(source, "OUT[", out + "[");
  // f16 products accumulate in f32, as PyTorch's CPU does.
  replace_all(source, "ACC", dtype == at::kDouble ? "f64" : "f32");
  replace_all(source, "ELEMENT", wgsl_type(dtype));
  return source;
}

// out[b] = beta * bias[b] + alpha * a[b] @ b[b], for 3-dimensional a, b and out (bias
// broadcast to out, or undefined). False when a kernel cannot do it.
bool matmul(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias, double alpha,
            double beta) {
  const at::ScalarType dtype = out.scalar_type();
  if (!is_floating(dtype) || !on_device(out, dtype)) return false;
  for (const at::Tensor* t : {static_cast<const at::Tensor*>(&out), &a, &b}) {
    if (t->scalar_type() != dtype || t->device() != out.device()) return false;
  }
  // alpha and beta travel as f32: an f64 product takes only those that f32 holds exactly.
  if (static_cast<double>(static_cast<float>(alpha)) != alpha || static_cast<double>(static_cast<float>(beta)) != beta)
    return false;
  const char* element = storage_type(dtype);
  if (!out.is_contiguous()) return false;
  MatmulParams q;
  q.batch = static_cast<uint32_t>(out.size(0));
  q.m = static_cast<uint32_t>(out.size(1));
  q.n = static_cast<uint32_t>(out.size(2));
  q.k = static_cast<uint32_t>(a.size(2));
  q.alpha = static_cast<float>(alpha);
  q.beta = static_cast<float>(beta);
  if (out.numel() == 0) return true;
  BufferSet set;
  std::string an = set.bind(place_of(a).buffer, element, false);
  std::string bn = set.bind(place_of(b).buffer, element, false);
  std::string biasn;
  q.offsets[0] = element_offset(a);
  q.offsets[1] = element_offset(b);
  for (int d = 0; d < 3; d++) {
    q.a_strides[d] = static_cast<uint32_t>(a.size(d) == 1 ? 0 : a.stride(d));
    q.b_strides[d] = static_cast<uint32_t>(b.size(d) == 1 ? 0 : b.stride(d));
  }
  if (bias.defined() && beta != 0.0f) {
    if (bias.scalar_type() != dtype || bias.device() != out.device()) return false;
    at::Tensor expanded = bias.expand(out.sizes());
    biasn = set.bind(place_of(expanded).buffer, element, false);
    q.has_bias = 1;
    q.offsets[2] = element_offset(expanded);
    for (int d = 0; d < 3; d++) q.bias_strides[d] = static_cast<uint32_t>(expanded.stride(d));
  }
  std::string outn = set.bind(place_of(out).buffer, element, true);
  if (an.empty() || bn.empty() || outn.empty() || outn == an || outn == bn || (!biasn.empty() && outn == biasn))
    return false;
  q.offsets[3] = element_offset(out);
  Device& dev = device(out.device().index());
  launch(dev, kernel(dev, matmul_source(set, an, bn, biasn, outn, dtype)), set.bindings(&q, sizeof q), out.numel());
  return true;
}

at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  prepare_out(out, {self.size(0), mat2.size(1)});
  at::Tensor out3 = out.unsqueeze(0);
  if (!matmul(out3, self.unsqueeze(0), mat2.unsqueeze(0), at::Tensor(), 1.0, 0.0))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(mm_out)>::call(self, mat2, out);
  return out;
}

at::Tensor& bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  prepare_out(out, {self.size(0), self.size(1), mat2.size(2)});
  if (!matmul(out, self, mat2, at::Tensor(), 1.0, 0.0))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(bmm_out)>::call(self, mat2, out);
  return out;
}

at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                      const at::Scalar& alpha, at::Tensor& out) {
  prepare_out(out, {mat1.size(0), mat2.size(1)});
  at::Tensor out3 = out.unsqueeze(0);
  at::Tensor bias = self.dim() <= 2 ? self.expand({mat1.size(0), mat2.size(1)}).unsqueeze(0) : self;
  bool same = place_of(out).buffer == place_of(self).buffer;
  if (same || !matmul(out3, mat1.unsqueeze(0), mat2.unsqueeze(0), bias, alpha.to<double>(), beta.to<double>()))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(addmm_out)>::call(self, mat1, mat2, beta, alpha, out);
  return out;
}

// --- Softmax -----------------------------------------------------------------------------

struct RowParams {
  uint32_t outer = 0, length = 0, inner = 0, pad = 0;
};

// The kernel of a softmax-family `body` over rows of `dtype` elements. The body reads through
// xv and yv and writes through put, in typed_source's ACC (so f16 rows are computed in f32 and
// rounded once, as PyTorch's CPU does; f64 rows use kF64Math's exp and log).
std::string softmax_source(const char* body, at::ScalarType dtype) {
  std::string source = R"(
struct Rows { outer: u32, length: u32, inner: u32, pad: u32 }
@group(0) @binding(0) var<uniform> s: Rows;
@group(0) @binding(1) var<storage, read> x: array<ELEM>;
@group(0) @binding(2) var<storage, read> y: array<ELEM>;
@group(0) @binding(3) var<storage, read_write> out: array<ELEM>;
fn xv(k: u32) -> ACC { return ACC(x[k]); }
fn yv(k: u32) -> ACC { return ACC(y[k]); }
fn put(k: u32, v: ACC) { out[k] = ELEM(v); }
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let row = gid.x + gid.y * groups.x * 64u;
  if (row >= s.outer * s.inner) { return; }
  let base = (row / s.inner) * s.length * s.inner + row % s.inner;
  let step = s.inner;
)";
  std::string rows(body);
  const bool calls_f64_math = use_f64_math(rows, dtype);
  source += rows;
  source += "}\n";
  if (calls_f64_math) source += kF64Math;
  return typed_source(source, dtype);
}

// Forward: x is the input (y unused). Backward: x is the gradient, y the forward output.
// The row's maximum starts from its first element, which serves every precision.
const char* kSoftmax = R"(
  var top = xv(base);
  for (var j = 1u; j < s.length; j = j + 1u) { top = max(top, xv(base + j * step)); }
  var total = ACC(0);
  for (var j = 0u; j < s.length; j = j + 1u) { total = total + exp(xv(base + j * step) - top); }
  for (var j = 0u; j < s.length; j = j + 1u) { put(base + j * step, exp(xv(base + j * step) - top) / total); }
)";
const char* kLogSoftmax = R"(
  var top = xv(base);
  for (var j = 1u; j < s.length; j = j + 1u) { top = max(top, xv(base + j * step)); }
  var total = ACC(0);
  for (var j = 0u; j < s.length; j = j + 1u) { total = total + exp(xv(base + j * step) - top); }
  // (x - top) - log(total), as PyTorch's CPU computes it: near the row's maximum, x - (top +
  // log(total)) would lose the low bits of log(total) to top's.
  let log_total = log(total);
  for (var j = 0u; j < s.length; j = j + 1u) { put(base + j * step, (xv(base + j * step) - top) - log_total); }
)";
const char* kSoftmaxBackward = R"(
  var dot = ACC(0);
  for (var j = 0u; j < s.length; j = j + 1u) { dot = dot + xv(base + j * step) * yv(base + j * step); }
  for (var j = 0u; j < s.length; j = j + 1u) { put(base + j * step, yv(base + j * step) * (xv(base + j * step) - dot)); }
)";
const char* kLogSoftmaxBackward = R"(
  var total = ACC(0);
  for (var j = 0u; j < s.length; j = j + 1u) { total = total + xv(base + j * step); }
  for (var j = 0u; j < s.length; j = j + 1u) { put(base + j * step, xv(base + j * step) - exp(yv(base + j * step)) * total); }
)";

// Runs a softmax-family kernel along `dim` of contiguous tensors: out = f(x, y).
bool softmax_rows(at::Tensor& out, const at::Tensor& x_in, const at::Tensor& y_in, int64_t dim, const char* body) {
  const at::ScalarType dtype = x_in.scalar_type();
  if ((dtype != at::kFloat && dtype != at::kHalf && dtype != at::kDouble) || !on_device(x_in, dtype) ||
      (y_in.defined() && y_in.scalar_type() != dtype))
    return false;
  prepare_out(out, x_in.sizes());
  if (out.scalar_type() != dtype || !out.is_contiguous() || x_in.dim() > kMaxDims) return false;
  if (out.numel() == 0) return true;
  at::Tensor x = x_in.contiguous();
  at::Tensor y = y_in.defined() ? y_in.contiguous() : x;
  dim = c10::maybe_wrap_dim(dim, std::max<int64_t>(x.dim(), 1));
  RowParams s;
  s.outer = 1;
  s.inner = 1;
  for (int64_t d = 0; d < x.dim(); d++) {
    if (d < dim) s.outer *= static_cast<uint32_t>(x.size(d));
    if (d > dim) s.inner *= static_cast<uint32_t>(x.size(d));
  }
  s.length = x.dim() == 0 ? 1 : static_cast<uint32_t>(x.size(dim));
  Place px = place_of(x), py = place_of(y), po = place_of(out);
  if (po.buffer == px.buffer || po.buffer == py.buffer) return false;
  if (px.offset != 0 || py.offset != 0 || po.offset != 0) {
    // The kernel indexes from each buffer's start; views at an offset take a fresh copy.
    if (px.offset != 0) x = x.clone();
    if (py.offset != 0) y = y.clone();
    if (po.offset != 0) return false;
    px = place_of(x);
    py = place_of(y);
  }
  Device& dev = device(out.device().index());
  const std::string key = "softmax|" + std::to_string(reinterpret_cast<uintptr_t>(body)) + wgsl_type(dtype);
  launch(dev, kernel_by_key(dev, key, [&] { return softmax_source(body, dtype); }),
         {Binding{nullptr, 0, sizeof s, &s}, Binding{px.buffer, 0, XHAL_WHOLE_SIZE, nullptr},
          Binding{py.buffer, 0, XHAL_WHOLE_SIZE, nullptr}, Binding{po.buffer, 0, XHAL_WHOLE_SIZE, nullptr}},
         static_cast<uint64_t>(s.outer) * s.inner);
  return true;
}

at::Tensor& softmax_out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& out) {
  if (half_to_float || !softmax_rows(out, self, at::Tensor(), dim, kSoftmax))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(_softmax_out)>::call(self, dim, half_to_float, out);
  return out;
}

at::Tensor& log_softmax_out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& out) {
  if (half_to_float || !softmax_rows(out, self, at::Tensor(), dim, kLogSoftmax))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(_log_softmax_out)>::call(self, dim, half_to_float, out);
  return out;
}

at::Tensor& softmax_backward_out(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                 at::ScalarType input_dtype, at::Tensor& grad_input) {
  if (input_dtype != grad_output.scalar_type() || !softmax_rows(grad_input, grad_output, output, dim, kSoftmaxBackward))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(_softmax_backward_data_out)>::call(grad_output, output, dim,
                                                                                      input_dtype, grad_input);
  return grad_input;
}

at::Tensor& log_softmax_backward_out(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                     at::ScalarType input_dtype, at::Tensor& grad_input) {
  if (input_dtype != grad_output.scalar_type() ||
      !softmax_rows(grad_input, grad_output, output, dim, kLogSoftmaxBackward))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(_log_softmax_backward_data_out)>::call(grad_output, output, dim,
                                                                                          input_dtype, grad_input);
  return grad_input;
}

// --- Optimizer updates ---------------------------------------------------------------------

at::Tensor& addcmul_out(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                        const at::Scalar& value, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, tensor1, tensor2}));
  if (!is_floating(out.scalar_type()) ||
      !elementwise(out, {self, tensor1, tensor2}, "x0 + $a * x1 * x2", {float_compute(out.scalar_type()), value}))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(addcmul_out)>::call(self, tensor1, tensor2, value, out);
  return out;
}

at::Tensor& addcdiv_out(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                        const at::Scalar& value, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, tensor1, tensor2}));
  if (!is_floating(out.scalar_type()) ||
      !elementwise(out, {self, tensor1, tensor2}, "x0 + $a * x1 / x2", {float_compute(out.scalar_type()), value}))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(addcdiv_out)>::call(self, tensor1, tensor2, value, out);
  return out;
}

at::Tensor& lerp_scalar_out(const at::Tensor& self, const at::Tensor& end, const at::Scalar& weight, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, end}));
  // PyTorch's formula: from the nearer end, so that weight 1 gives `end` exactly.
  const char* e = "select(x1 - (x1 - x0) * (1.0 - $a), x0 + $a * (x1 - x0), abs($a) < 0.5)";
  if (!is_floating(out.scalar_type()) || !elementwise(out, {self, end}, e, {float_compute(out.scalar_type()), weight}))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(lerp_Scalar_out)>::call(self, end, weight, out);
  return out;
}

at::Tensor& zero_(at::Tensor& self) {
  at::Tensor& out = self;
  if (self.numel() == 0) return self;
  const size_t item = self.element_size();
  if (self.is_contiguous() && (item == 1 || item == 2 || item == 4 || item == 8 || item == 16)) {
    uint8_t zero = 0;
    Place p = place_of(self);
    check(xhal_stream_fill(current_xhal_stream(self.device().index()), p.buffer, p.offset, self.nbytes(), &zero, 1),
          "zero");
    return out;
  }
  if (!elementwise(self, {}, "$0")) return call_fallback_fn<&cpu_fallback, ATEN_OP(zero_)>::call(self);
  return out;
}

at::Tensor& masked_fill_scalar_(at::Tensor& self, const at::Tensor& mask, const at::Scalar& value) {
  if (mask.scalar_type() != at::kBool || mask.device() != self.device() ||
      !elementwise(self, {self, mask}, "select(x0, $a, x1)", {self.scalar_type(), value, 0, 2u}))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(masked_fill__Scalar)>::call(self, mask, value);
  return self;
}

// --- Losses and lookups --------------------------------------------------------------------

// Integer indices (int64 or int32) on the host, to check before a kernel trusts them.
at::Tensor host_indices(const at::Tensor& indices) { return indices.to(at::kCPU).to(at::kLong); }

// The WGSL that reads index `k` of an int64 (two words, little end first) or int32 tensor.
std::string index_load(const std::string& buffer, at::ScalarType dtype, const std::string& k) {
  if (dtype == at::kLong) return "i32(" + buffer + "[2u * (" + k + ")])";
  return "i32(" + buffer + "[" + k + "])";
}

struct LossParams {
  uint32_t n = 0, classes = 0, reduction = 0, has_weight = 0;
  int32_t ignore = -100;
  uint32_t self_offset = 0, self_row = 0, self_column = 0;
  uint32_t target_offset = 0, weight_offset = 0, out_offset = 0, total_offset = 0;
  uint32_t grad_offset = 0, grad_stride = 0, pad0 = 0, pad1 = 0;
};
const char* kLossParams = R"(
struct L {
  n: u32, classes: u32, reduction: u32, has_weight: u32,
  ignore: i32, self_offset: u32, self_row: u32, self_column: u32,
  target_offset: u32, weight_offset: u32, out_offset: u32, total_offset: u32,
  grad_offset: u32, grad_stride: u32, pad0: u32, pad1: u32,
}
@group(0) @binding(0) var<uniform> q: L;
)";

bool nll_checks(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight,
                int64_t ignore_index) {
  if (!floating_on(self) || target.scalar_type() != at::kLong || self.dim() < 1 || self.dim() > 2 ||
      target.device() != self.device())
    return false;
  if (weight.has_value() && weight->defined() &&
      (weight->scalar_type() != self.scalar_type() || weight->device() != self.device() || weight->dim() != 1))
    return false;
  const int64_t classes = self.size(-1);
  auto t = host_indices(target);
  auto bad = ((t < 0) | (t >= classes)) & (t != ignore_index);
  if (bad.any().item<bool>()) {
    int64_t first = t.masked_select(bad)[0].item<int64_t>();
    TORCH_CHECK_INDEX(false, "Target ", first, " is out of bounds.");
  }
  return true;
}

std::tuple<at::Tensor&, at::Tensor&> nll_loss_forward_out(const at::Tensor& self, const at::Tensor& target,
                                                          const std::optional<at::Tensor>& weight, int64_t reduction,
                                                          c10::SymInt ignore_index, at::Tensor& output,
                                                          at::Tensor& total_weight) {
  const int64_t ignore = ignore_index.expect_int();
  auto fallback = [&]() {
    return at::native::call_fallback_fn_symint<&cpu_fallback, ATEN_OP(nll_loss_forward_output)>::call(self, target, weight, reduction,
                                                                                    ignore_index, output, total_weight);
  };
  if (!nll_checks(self, target, weight, ignore)) return fallback();
  const int64_t n = self.dim() == 2 ? self.size(0) : 1;
  prepare_out(output, reduction == at::Reduction::None && self.dim() == 2 ? at::IntArrayRef{n} : at::IntArrayRef{});
  prepare_out(total_weight, {});
  const at::ScalarType dtype = self.scalar_type();
  const char* element = wgsl_type(dtype);
  if (output.scalar_type() != dtype || total_weight.scalar_type() != dtype) return fallback();
  LossParams q;
  q.n = static_cast<uint32_t>(n);
  q.classes = static_cast<uint32_t>(self.size(-1));
  q.reduction = static_cast<uint32_t>(reduction);
  q.ignore = static_cast<int32_t>(ignore);
  q.self_offset = element_offset(self);
  q.self_row = self.dim() == 2 ? static_cast<uint32_t>(self.stride(0)) : 0;
  q.self_column = static_cast<uint32_t>(self.stride(-1));
  at::Tensor t = target.contiguous();
  q.target_offset = static_cast<uint32_t>(place_of(t).offset / 4);
  BufferSet set;
  std::string x = set.bind(place_of(self).buffer, element, false);
  std::string tb = set.bind(place_of(t).buffer, "u32", false);
  std::string wb = x;
  if (weight.has_value() && weight->defined()) {
    at::Tensor w = weight->contiguous();
    q.has_weight = 1;
    q.weight_offset = element_offset(w);
    wb = set.bind(place_of(w).buffer, element, false);
  }
  std::string ob = set.bind(place_of(output).buffer, element, true);
  std::string tw = set.bind(place_of(total_weight).buffer, element, true);
  q.out_offset = element_offset(output);
  q.total_offset = element_offset(total_weight);
  if (x.empty() || tb.empty() || wb.empty() || ob.empty() || tw.empty()) return fallback();
  std::string source = kLossParams + set.declarations() + R"(
fn loss_of(i: u32) -> vec2<ACC> {
  let t = TARGET;
  if (t == q.ignore) { return vec2<ACC>(ACC(0), ACC(0)); }
  var w = ACC(1);
  if (q.has_weight != 0u) { w = ACC(WEIGHT[q.weight_offset + u32(t)]); }
  return vec2<ACC>(-w * ACC(X[q.self_offset + i * q.self_row + u32(t) * q.self_column]), w);
}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (q.reduction == 0u) {
    if (gid.x >= q.n) { return; }
    OUT[q.out_offset + gid.x] = ELEM(loss_of(gid.x).x);
    if (gid.x == 0u) { TOTAL[q.total_offset] = ELEM(0); }
    return;
  }
  if (gid.x != 0u) { return; }
  var sum = ACC(0);
  var weights = ACC(0);
  for (var i = 0u; i < q.n; i = i + 1u) {
    let l = loss_of(i);
    sum = sum + l.x;
    weights = weights + l.y;
  }
  if (q.reduction == 1u) { sum = sum / weights; }
  OUT[q.out_offset] = ELEM(sum);
  TOTAL[q.total_offset] = ELEM(weights);
}
)";
  replace_all(source, "TARGET", index_load(tb, at::kLong, "q.target_offset / 2u + i"));
  replace_all(source, "WEIGHT[", wb + "[");
  replace_all(source, "X[", x + "[");
  replace_all(source, "OUT[", ob + "[");
  replace_all(source, "TOTAL[", tw + "[");
  Device& dev = device(self.device().index());
  launch(dev, kernel(dev, typed_source(source, dtype)), set.bindings(&q, sizeof q),
         reduction == 0 ? std::max<int64_t>(n, 1) : 1);
  return {output, total_weight};
}

at::Tensor& nll_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                                  const std::optional<at::Tensor>& weight, int64_t reduction, c10::SymInt ignore_index,
                                  const at::Tensor& total_weight, at::Tensor& grad_input) {
  const int64_t ignore = ignore_index.expect_int();
  auto fallback = [&]() -> at::Tensor& {
    return at::native::call_fallback_fn_symint<&cpu_fallback, ATEN_OP(nll_loss_backward_grad_input)>::call(
        grad_output, self, target, weight, reduction, ignore_index, total_weight, grad_input);
  };
  const at::ScalarType dtype = self.scalar_type();
  const char* element = wgsl_type(dtype);
  if (!nll_checks(self, target, weight, ignore) || grad_output.scalar_type() != dtype ||
      total_weight.scalar_type() != dtype)
    return fallback();
  prepare_out(grad_input, self.sizes());
  if (!grad_input.is_contiguous() || grad_input.scalar_type() != dtype) return fallback();
  const int64_t n = self.dim() == 2 ? self.size(0) : 1;
  LossParams q;
  q.n = static_cast<uint32_t>(n);
  q.classes = static_cast<uint32_t>(self.size(-1));
  q.reduction = static_cast<uint32_t>(reduction);
  q.ignore = static_cast<int32_t>(ignore);
  at::Tensor t = target.contiguous();
  q.target_offset = static_cast<uint32_t>(place_of(t).offset / 4);
  BufferSet set;
  std::string tb = set.bind(place_of(t).buffer, "u32", false);
  std::string gb = set.bind(place_of(grad_output).buffer, element, false);
  std::string twb = set.bind(place_of(total_weight).buffer, element, false);
  std::string wb = gb;
  if (weight.has_value() && weight->defined()) {
    at::Tensor w = weight->contiguous();
    q.has_weight = 1;
    q.weight_offset = element_offset(w);
    wb = set.bind(place_of(w).buffer, element, false);
  }
  std::string ob = set.bind(place_of(grad_input).buffer, element, true);
  if (tb.empty() || gb.empty() || twb.empty() || wb.empty() || ob.empty() || ob == gb || ob == twb) return fallback();
  q.grad_offset = element_offset(grad_output);
  q.grad_stride = grad_output.dim() == 1 ? static_cast<uint32_t>(grad_output.stride(0)) : 0;
  q.total_offset = element_offset(total_weight);
  q.out_offset = element_offset(grad_input);
  std::string source = kLossParams + set.declarations() + R"(
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = gid.x + gid.y * groups.x * 64u;
  if (e >= q.n * q.classes) { return; }
  let i = e / q.classes;
  let c = e % q.classes;
  let t = TARGET;
  var value = ACC(0);
  if (t != q.ignore && u32(t) == c) {
    var w = ACC(1);
    if (q.has_weight != 0u) { w = ACC(WEIGHT[q.weight_offset + c]); }
    var g = ACC(GRAD[q.grad_offset]);
    if (q.reduction == 0u) { g = ACC(GRAD[q.grad_offset + i * q.grad_stride]); }
    if (q.reduction == 1u) { g = g / ACC(TOTALW[q.total_offset]); }
    value = -w * g;
  }
  OUT[q.out_offset + e] = ELEM(value);
}
)";
  replace_all(source, "TARGET", index_load(tb, at::kLong, "q.target_offset / 2u + i"));
  replace_all(source, "WEIGHT[", wb + "[");
  replace_all(source, "GRAD[", gb + "[");
  replace_all(source, "TOTALW[", twb + "[");
  replace_all(source, "OUT[", ob + "[");
  Device& dev = device(self.device().index());
  launch(dev, kernel(dev, typed_source(source, dtype)), set.bindings(&q, sizeof q), grad_input.numel());
  return grad_input;
}

struct GatherParams {
  uint32_t rows = 0, width = 0, count = 0, padding = 0;
  uint32_t table_offset = 0, table_row = 0, table_column = 0, index_offset = 0;
  uint32_t out_offset = 0, pad0 = 0, pad1 = 0, pad2 = 0;
};
const char* kGatherParams = R"(
struct G {
  rows: u32, width: u32, count: u32, padding: u32,
  table_offset: u32, table_row: u32, table_column: u32, index_offset: u32,
  out_offset: u32, pad0: u32, pad1: u32, pad2: u32,
}
@group(0) @binding(0) var<uniform> q: G;
)";

at::Tensor& index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& out) {
  auto fallback = [&]() -> at::Tensor& {
    return call_fallback_fn<&cpu_fallback, ATEN_OP(index_select_out)>::call(self, dim, index, out);
  };
  // A copy of rows, so any dtype the device has kernels for.
  const at::ScalarType dtype = self.scalar_type();
  if (self.dim() != 2 || c10::maybe_wrap_dim(dim, 2) != 0 || !on_device(self, dtype) || index.dim() > 1 ||
      (index.scalar_type() != at::kLong && index.scalar_type() != at::kInt) || index.device() != self.device())
    return fallback();
  if (dtype == at::kBool) {
    // Bools are bytes, which a gather cannot write one at a time: the rows gather as int32 and
    // come back to bool through a comparison, which writes whole words; all on the device.
    if (out.defined() && out.scalar_type() != at::kBool) return fallback();
    return at::ne_out(out, at::index_select(self.to(at::kInt), 0, index), 0);
  }
  auto host = host_indices(index);
  if (host.numel() > 0) {
    int64_t low = host.min().item<int64_t>(), high = host.max().item<int64_t>();
    TORCH_CHECK_INDEX(low >= 0 && high < self.size(0), "index out of range in self");
  }
  prepare_out(out, {index.numel(), self.size(1)});
  if (!out.is_contiguous() || out.scalar_type() != dtype) return fallback();
  if (out.numel() == 0) return out;
  at::Tensor idx = index.contiguous();
  GatherParams q;
  q.rows = static_cast<uint32_t>(self.size(0));
  q.width = static_cast<uint32_t>(self.size(1));
  q.count = static_cast<uint32_t>(idx.numel());
  q.table_offset = element_offset(self);
  q.table_row = static_cast<uint32_t>(self.stride(0));
  q.table_column = static_cast<uint32_t>(self.stride(1));
  q.index_offset = static_cast<uint32_t>(place_of(idx).offset / 4);
  q.out_offset = element_offset(out);
  BufferSet set;
  std::string tb = set.bind(place_of(self).buffer, storage_type(dtype), false);
  std::string ib = set.bind(place_of(idx).buffer, "u32", false);
  std::string ob = set.bind(place_of(out).buffer, storage_type(dtype), true);
  if (tb.empty() || ib.empty() || ob.empty() || ob == tb) return fallback();
  std::string source = std::string(dtype == at::kHalf ? "enable f16;\n" : "") + kGatherParams + set.declarations() + R"(
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = gid.x + gid.y * groups.x * 64u;
  if (e >= q.count * q.width) { return; }
  let i = e / q.width;
  let j = e % q.width;
  let row = u32(INDEX);
  OUT[q.out_offset + e] = TABLE[q.table_offset + row * q.table_row + j * q.table_column];
}
)";
  std::string k = idx.scalar_type() == at::kLong ? "q.index_offset / 2u + i" : "q.index_offset + i";
  replace_all(source, "INDEX", index_load(ib, idx.scalar_type(), k));
  replace_all(source, "TABLE[", tb + "[");
  replace_all(source, "OUT[", ob + "[");
  Device& dev = device(self.device().index());
  launch(dev, kernel(dev, source), set.bindings(&q, sizeof q), out.numel());
  return out;
}

at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  at::Tensor out = at::empty({0}, self.options());
  return index_select_out(self, dim, index, out);
}

at::Tensor embedding_dense_backward(const at::Tensor& grad_output, const at::Tensor& indices, c10::SymInt num_weights,
                                   c10::SymInt padding_idx, bool scale_grad_by_freq) {
  auto fallback = [&]() {
    return at::native::call_fallback_fn_symint<&cpu_fallback, ATEN_OP(embedding_dense_backward)>::call(grad_output, indices, num_weights,
                                                                                     padding_idx, scale_grad_by_freq);
  };
  const int64_t rows = num_weights.expect_int();
  if (scale_grad_by_freq || !floating_on(grad_output) ||
      (indices.scalar_type() != at::kLong && indices.scalar_type() != at::kInt) || indices.device() != grad_output.device())
    return fallback();
  const int64_t width = grad_output.size(-1);
  at::Tensor grad = grad_output.reshape({-1, width}).contiguous();
  at::Tensor idx = indices.reshape({-1}).contiguous();
  at::Tensor out = at::empty({rows, width}, grad_output.options());
  if (out.numel() == 0) return out;
  GatherParams q;
  q.rows = static_cast<uint32_t>(rows);
  q.width = static_cast<uint32_t>(width);
  q.count = static_cast<uint32_t>(idx.numel());
  q.padding = static_cast<uint32_t>(padding_idx.expect_int());
  q.table_offset = element_offset(grad);
  q.index_offset = static_cast<uint32_t>(place_of(idx).offset / 4);
  q.out_offset = element_offset(out);
  BufferSet set;
  const char* element = wgsl_type(grad.scalar_type());
  std::string gb = set.bind(place_of(grad).buffer, element, false);
  std::string ib = set.bind(place_of(idx).buffer, "u32", false);
  std::string ob = set.bind(place_of(out).buffer, element, true);
  if (gb.empty() || ib.empty() || ob.empty()) return fallback();
  // One invocation per weight element sums the gradient rows whose index names its row:
  // no atomics, and the same order of additions on every device.
  std::string source = kGatherParams + set.declarations() + R"(
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = gid.x + gid.y * groups.x * 64u;
  if (e >= q.rows * q.width) { return; }
  let row = e / q.width;
  let j = e % q.width;
  var sum = ACC(0);
  if (i32(row) != i32(q.padding)) {
    for (var i = 0u; i < q.count; i = i + 1u) {
      if (u32(INDEX) == row) { sum = sum + ACC(GRAD[q.table_offset + i * q.width + j]); }
    }
  }
  OUT[q.out_offset + e] = ELEM(sum);
}
)";
  std::string k = idx.scalar_type() == at::kLong ? "q.index_offset / 2u + i" : "q.index_offset + i";
  replace_all(source, "INDEX", index_load(ib, idx.scalar_type(), k));
  replace_all(source, "GRAD[", gb + "[");
  replace_all(source, "OUT[", ob + "[");
  Device& dev = device(out.device().index());
  launch(dev, kernel(dev, typed_source(source, grad.scalar_type())), set.bindings(&q, sizeof q), out.numel());
  return out;
}

// --- Layer norm ----------------------------------------------------------------------------

// eps travels twice: as f32 for f16 and f32 kernels, and as the bits of the f64 PyTorch gives.
struct NormParams {
  uint32_t rows = 0, width = 0, has_weight = 0, has_bias = 0;
  float eps = 0.0f;
  uint32_t eps_low = 0, eps_high = 0, pad = 0;
};
const char* kNormParams = R"(
struct N { rows: u32, width: u32, has_weight: u32, has_bias: u32, eps: f32, eps_low: u32, eps_high: u32, pad: u32 }
@group(0) @binding(0) var<uniform> q: N;
)";

// The WGSL for eps and for 1 / sqrt(v) in ACC: f64 computes the reciprocal of a square root
// as PyTorch's CPU does, where inverseSqrt may be less exact.
std::string norm_source(std::string source, at::ScalarType dtype) {
  if (dtype == at::kDouble) {
    replace_all(source, "EPS", "bitcast<f64>((u64(q.eps_high) << 32u) | u64(q.eps_low))");
    replace_all(source, "RSQRT(", "1.0 / sqrt(");
  } else {
    replace_all(source, "EPS", "q.eps");
    replace_all(source, "RSQRT(", "inverseSqrt(");
  }
  return typed_source(source, dtype);
}

NormParams norm_params(int64_t rows, int64_t width, bool has_weight, bool has_bias, double eps) {
  NormParams q;
  q.rows = static_cast<uint32_t>(rows);
  q.width = static_cast<uint32_t>(width);
  q.has_weight = has_weight;
  q.has_bias = has_bias;
  q.eps = static_cast<float>(eps);
  uint64_t bits = 0;
  std::memcpy(&bits, &eps, sizeof bits);
  q.eps_low = static_cast<uint32_t>(bits);
  q.eps_high = static_cast<uint32_t>(bits >> 32);
  return q;
}

// Contiguous tensors at offset 0 of their buffers, which the layer-norm kernels index from.
bool fresh(const at::Tensor& t) { return t.is_contiguous() && place_of(t).offset == 0; }
at::Tensor freshen(const at::Tensor& t) { return fresh(t) ? t : t.clone(at::MemoryFormat::Contiguous); }

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm(const at::Tensor& input,
                                                                 c10::SymIntArrayRef normalized_shape,
                                                                 const std::optional<at::Tensor>& weight,
                                                                 const std::optional<at::Tensor>& bias, double eps) {
  auto shape = C10_AS_INTARRAYREF_SLOW(normalized_shape);
  const bool has_weight = weight.has_value() && weight->defined();
  const bool has_bias = bias.has_value() && bias->defined();
  const at::ScalarType dtype = input.scalar_type();
  bool ok = floating_on(input) && (!has_weight || weight->scalar_type() == dtype) &&
            (!has_bias || bias->scalar_type() == dtype) && input.dim() >= static_cast<int64_t>(shape.size());
  if (!ok)
    return at::native::call_fallback_fn_symint<&cpu_fallback, ATEN_OP(native_layer_norm)>::call(input, normalized_shape, weight, bias, eps);
  const int64_t axis = input.dim() - static_cast<int64_t>(shape.size());
  int64_t width = 1;
  for (int64_t s : shape) width *= s;
  const int64_t rows = width == 0 ? 0 : input.numel() / width;
  at::Tensor x = freshen(input);
  at::Tensor out = at::empty(input.sizes(), input.options());
  at::DimVector stat_shape(input.sizes().begin(), input.sizes().begin() + axis);
  for (size_t k = 0; k < shape.size(); k++) stat_shape.push_back(1);
  at::Tensor mean = at::empty(stat_shape, input.options());
  at::Tensor rstd = at::empty(stat_shape, input.options());
  if (rows == 0 || width == 0) return {out, mean, rstd};
  at::Tensor w = has_weight ? freshen(*weight) : x;
  at::Tensor b = has_bias ? freshen(*bias) : x;
  const NormParams q = norm_params(rows, width, has_weight, has_bias, eps);
  std::string source = norm_source(std::string(kNormParams) + R"(
@group(0) @binding(1) var<storage, read> x: array<ELEM>;
@group(0) @binding(2) var<storage, read> w: array<ELEM>;
@group(0) @binding(3) var<storage, read> b: array<ELEM>;
@group(0) @binding(4) var<storage, read_write> out: array<ELEM>;
@group(0) @binding(5) var<storage, read_write> mean: array<ELEM>;
@group(0) @binding(6) var<storage, read_write> rstd: array<ELEM>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let r = gid.x + gid.y * groups.x * 64u;
  if (r >= q.rows) { return; }
  let base = r * q.width;
  var sum = ACC(0);
  for (var j = 0u; j < q.width; j = j + 1u) { sum = sum + ACC(x[base + j]); }
  let m = sum / ACC(q.width);
  var squares = ACC(0);
  for (var j = 0u; j < q.width; j = j + 1u) { let d = ACC(x[base + j]) - m; squares = squares + d * d; }
  let s = RSQRT(squares / ACC(q.width) + ACC(EPS));
  for (var j = 0u; j < q.width; j = j + 1u) {
    var y = (ACC(x[base + j]) - m) * s;
    if (q.has_weight != 0u) { y = y * ACC(w[j]); }
    if (q.has_bias != 0u) { y = y + ACC(b[j]); }
    out[base + j] = ELEM(y);
  }
  mean[r] = ELEM(m);
  rstd[r] = ELEM(s);
}
)", dtype);
  Device& dev = device(input.device().index());
  launch(dev, kernel(dev, source),
         {Binding{nullptr, 0, sizeof q, &q}, Binding{place_of(x).buffer}, Binding{place_of(w).buffer},
          Binding{place_of(b).buffer}, Binding{place_of(out).buffer}, Binding{place_of(mean).buffer},
          Binding{place_of(rstd).buffer}},
         rows);
  return {out, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, c10::SymIntArrayRef normalized_shape, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    std::array<bool, 3> output_mask) {
  auto shape = C10_AS_INTARRAYREF_SLOW(normalized_shape);
  const bool has_weight = weight.has_value() && weight->defined();
  const at::ScalarType dtype = input.scalar_type();
  bool ok = floating_on(input) && grad_out.scalar_type() == dtype && mean.scalar_type() == dtype &&
            rstd.scalar_type() == dtype && (!has_weight || weight->scalar_type() == dtype);
  if (!ok)
    return at::native::call_fallback_fn_symint<&cpu_fallback, ATEN_OP(native_layer_norm_backward)>::call(
        grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask);
  int64_t width = 1;
  for (int64_t s : shape) width *= s;
  const int64_t rows = width == 0 ? 0 : input.numel() / width;
  at::Tensor x = freshen(input), dy = freshen(grad_out), m = freshen(mean), s = freshen(rstd);
  at::Tensor w = has_weight ? freshen(*weight) : x;
  at::Tensor dx = output_mask[0] ? at::empty(input.sizes(), input.options()) : at::Tensor();
  at::Tensor dw = output_mask[1] && has_weight ? at::empty(weight->sizes(), weight->options()) : at::Tensor();
  at::Tensor db = output_mask[2] && bias.has_value() && bias->defined() ? at::empty(bias->sizes(), bias->options())
                                                                         : at::Tensor();
  if (rows == 0 || width == 0) {
    if (dw.defined()) dw.zero_();
    if (db.defined()) db.zero_();
    return {dx, dw, db};
  }
  const NormParams q = norm_params(rows, width, has_weight, false, 0.0);
  Device& dev = device(input.device().index());
  const char* bindings = R"(
@group(0) @binding(1) var<storage, read> x: array<ELEM>;
@group(0) @binding(2) var<storage, read> dy: array<ELEM>;
@group(0) @binding(3) var<storage, read> mean: array<ELEM>;
@group(0) @binding(4) var<storage, read> rstd: array<ELEM>;
@group(0) @binding(5) var<storage, read> w: array<ELEM>;
@group(0) @binding(6) var<storage, read_write> out: array<ELEM>;
)";
  std::vector<Binding> common = {Binding{nullptr, 0, sizeof q, &q}, Binding{place_of(x).buffer},
                                 Binding{place_of(dy).buffer}, Binding{place_of(m).buffer},
                                 Binding{place_of(s).buffer}, Binding{place_of(w).buffer}};
  if (dx.defined()) {
    std::string source = std::string(kNormParams) + bindings + R"(
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let r = gid.x + gid.y * groups.x * 64u;
  if (r >= q.rows) { return; }
  let base = r * q.width;
  let m = ACC(mean[r]);
  let s = ACC(rstd[r]);
  var a = ACC(0);
  var c = ACC(0);
  for (var j = 0u; j < q.width; j = j + 1u) {
    var g = ACC(dy[base + j]);
    if (q.has_weight != 0u) { g = g * ACC(w[j]); }
    a = a + g;
    c = c + g * (ACC(x[base + j]) - m) * s;
  }
  a = a / ACC(q.width);
  c = c / ACC(q.width);
  for (var j = 0u; j < q.width; j = j + 1u) {
    var g = ACC(dy[base + j]);
    if (q.has_weight != 0u) { g = g * ACC(w[j]); }
    let xhat = (ACC(x[base + j]) - m) * s;
    out[base + j] = ELEM(s * (g - a - xhat * c));
  }
}
)";
    auto b = common;
    b.push_back(Binding{place_of(dx).buffer});
    launch(dev, kernel(dev, typed_source(source, dtype)), b, rows);
  }
  for (int which = 0; which < 2; which++) {
    at::Tensor& target = which == 0 ? dw : db;
    if (!target.defined()) continue;
    std::string term = which == 0 ? "ACC(dy[i * q.width + j]) * (ACC(x[i * q.width + j]) - ACC(mean[i])) * ACC(rstd[i])"
                                  : "ACC(dy[i * q.width + j])";
    std::string source = std::string(kNormParams) + bindings + R"(
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let j = gid.x + gid.y * groups.x * 64u;
  if (j >= q.width) { return; }
  var sum = ACC(0);
  for (var i = 0u; i < q.rows; i = i + 1u) { sum = sum + TERM; }
  out[j] = ELEM(sum);
}
)";
    replace_all(source, "TERM", term);
    auto b = common;
    b.push_back(Binding{place_of(target).buffer});
    launch(dev, kernel(dev, typed_source(source, dtype)), b, width);
  }
  return {dx, dw, db};
}

// --- Concatenation -------------------------------------------------------------------------

at::Tensor& cat_out(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out) {
  auto list = tensors.materialize();
  auto fallback = [&]() -> at::Tensor& { return call_fallback_fn<&cpu_fallback, ATEN_OP(cat_out)>::call(tensors, dim, out); };
  std::vector<at::Tensor> parts;
  for (const at::Tensor& t : list) {
    if (t.dim() == 1 && t.numel() == 0) continue;  // the legacy empty tensor joins anything
    parts.push_back(t);
  }
  if (parts.empty() || !native_dtype(device(out.device().index()), out.scalar_type())) return fallback();
  dim = c10::maybe_wrap_dim(dim, parts[0].dim());
  at::DimVector shape(parts[0].sizes());
  shape[dim] = 0;
  for (const auto& t : parts) {
    if (t.device() != out.device() || t.scalar_type() != out.scalar_type() || t.dim() != parts[0].dim()) return fallback();
    shape[dim] += t.size(dim);
  }
  prepare_out(out, shape);
  int64_t at = 0;
  for (const auto& t : parts) {
    at::Tensor slot = out.narrow(dim, at, t.size(dim));
    if (place_of(slot).buffer == place_of(t).buffer || !copy_on_device(slot, t)) return fallback();
    at += t.size(dim);
  }
  return out;
}


// --- Ranges --------------------------------------------------------------------------------

at::Tensor& arange_out(const at::Scalar& start, const at::Scalar& end, const at::Scalar& step, at::Tensor& out) {
  const at::ScalarType dtype = out.scalar_type();
  const bool integral = dtype == at::kInt || dtype == at::kLong;
  if (!numeric(dtype) || (integral && !(start.isIntegral(false) && step.isIntegral(false))))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(arange_start_out)>::call(start, end, step, out);
  const double from = start.to<double>(), to = end.to<double>(), by = step.to<double>();
  TORCH_CHECK(by != 0, "step must be nonzero");
  TORCH_CHECK(std::isfinite(from) && std::isfinite(to), "unsupported range: ", from, " -> ", to);
  TORCH_CHECK((by > 0 && to >= from) || (by < 0 && to <= from), "upper bound and larger bound inconsistent with step sign");
  const int64_t size = static_cast<int64_t>(std::ceil((to - from) / by));
  prepare_out(out, {size});
  // PyTorch's CPU computes start + i * step in double, then rounds once; so does this, where
  // the device has f64.
  at::ScalarType compute = dtype;
  if (!integral) compute = on_device(out, at::kDouble) ? at::kDouble : at::kFloat;
  if (!elementwise(out, {}, "$a + $b * $C(i)", {compute, start, step, 0, {0, 0}, true}))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(arange_start_out)>::call(start, end, step, out);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("add.out", add_out);
  m.impl("sub.out", sub_out);
  m.impl("mul.out", mul_out);
  m.impl("div.out", div_out);
  m.impl("maximum.out", maximum_out);
  m.impl("minimum.out", minimum_out);
  m.impl("neg.out", neg_out);
  m.impl("abs.out", abs_out);
  m.impl("exp.out", exp_out);
  m.impl("log.out", log_out);
  m.impl("sqrt.out", sqrt_out);
  m.impl("rsqrt.out", rsqrt_out);
  m.impl("sin.out", sin_out);
  m.impl("cos.out", cos_out);
  m.impl("tanh.out", tanh_out);
  m.impl("sigmoid.out", sigmoid_out);
  m.impl("reciprocal.out", reciprocal_out);
  m.impl("silu.out", silu_out);
  m.impl("erf.out", erf_out);
  m.impl("gelu.out", gelu_out);
  m.impl("relu", relu);
  m.impl("relu_", relu_);
  m.impl("threshold_backward.grad_input", threshold_backward_out);
  m.impl("sigmoid_backward.grad_input", sigmoid_backward_out);
  m.impl("tanh_backward.grad_input", tanh_backward_out);
  m.impl("gelu_backward.grad_input", gelu_backward_out);
  m.impl("silu_backward.grad_input", silu_backward_out);
  m.impl("pow.Tensor_Scalar_out", pow_tensor_scalar_out);
  m.impl("eq.Tensor_out", eq_tensor_out);
  m.impl("eq.Scalar_out", eq_scalar_out);
  m.impl("ne.Tensor_out", ne_tensor_out);
  m.impl("ne.Scalar_out", ne_scalar_out);
  m.impl("lt.Tensor_out", lt_tensor_out);
  m.impl("lt.Scalar_out", lt_scalar_out);
  m.impl("le.Tensor_out", le_tensor_out);
  m.impl("le.Scalar_out", le_scalar_out);
  m.impl("gt.Tensor_out", gt_tensor_out);
  m.impl("gt.Scalar_out", gt_scalar_out);
  m.impl("ge.Tensor_out", ge_tensor_out);
  m.impl("ge.Scalar_out", ge_scalar_out);
  m.impl("logical_not.out", logical_not_out);
  m.impl("bitwise_and.Tensor_out", bitwise_and_out);
  m.impl("bitwise_or.Tensor_out", bitwise_or_out);
  m.impl("bitwise_xor.Tensor_out", bitwise_xor_out);
  m.impl("bitwise_not.out", bitwise_not_out);
  m.impl("logical_and.out", logical_and_out);
  m.impl("logical_or.out", logical_or_out);
  m.impl("logical_xor.out", logical_xor_out);
  m.impl("where.self_out", where_out);
  m.impl("where.self", where_self);
  m.impl("clamp.out", clamp_out);
  m.impl("triu.out", triu_out);
  m.impl("tril.out", tril_out);
  m.impl("sum.IntList_out", sum_out);
  m.impl("amax.out", amax_out);
  m.impl("amin.out", amin_out);
  m.impl("max", max_all);
  m.impl("min", min_all);
  m.impl("max.dim_max", max_dim_out);
  m.impl("min.dim_min", min_dim_out);
  m.impl("argmax.out", argmax_out);
  m.impl("argmin.out", argmin_out);
  m.impl("mean.out", mean_out);
  m.impl("mm.out", mm_out);
  m.impl("bmm.out", bmm_out);
  m.impl("addmm.out", addmm_out);
  m.impl("_softmax.out", softmax_out);
  m.impl("_log_softmax.out", log_softmax_out);
  m.impl("_softmax_backward_data.out", softmax_backward_out);
  m.impl("_log_softmax_backward_data.out", log_softmax_backward_out);
  m.impl("addcmul.out", addcmul_out);
  m.impl("addcdiv.out", addcdiv_out);
  m.impl("lerp.Scalar_out", lerp_scalar_out);
  m.impl("zero_", zero_);
  m.impl("masked_fill_.Scalar", masked_fill_scalar_);
  m.impl("nll_loss_forward.output", nll_loss_forward_out);
  m.impl("nll_loss_backward.grad_input", nll_loss_backward_out);
  m.impl("index_select", index_select);
  m.impl("index_select.out", index_select_out);
  m.impl("embedding_dense_backward", embedding_dense_backward);
  m.impl("native_layer_norm", native_layer_norm);
  m.impl("native_layer_norm_backward", native_layer_norm_backward);
  m.impl("cat.out", cat_out);
  m.impl("arange.start_out", arange_out);
}

}  // namespace xhal_torch
