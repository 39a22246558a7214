// Native operators of the `xhal` PyTorch device, each a WGSL kernel that runs on every xhal
// backend: elementwise arithmetic and activations with broadcasting and any strides, their
// backward formulas, reductions, matrix products, softmax and layer norm. A case a kernel
// does not cover (a dtype without kernels, more than 8 dimensions, mixed dtypes) runs on the
// CPU through the fallback, and is counted there like any other fallback.

#include <ATen/Operators.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <cmath>
#include <cstring>
#include <sstream>

#include "xhal_torch.h"

namespace xhal_torch {

bool native_dtype(const Device&, at::ScalarType dtype) {
  return dtype == at::kFloat || dtype == at::kInt;
}

namespace {

constexpr int kMaxDims = 8;
constexpr int kMaxOperands = 4;  // the output and up to three inputs

const char* wgsl_type(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return "f32";
    case at::kInt:
      return "i32";
    default:
      return nullptr;
  }
}

// The uniform every elementwise kernel reads; its WGSL twin is kElementwiseParams.
struct ElementwiseParams {
  uint32_t numel = 0;
  uint32_t ndim = 0;
  float alpha = 1.0f;
  float beta = 0.0f;
  uint32_t sizes[kMaxDims] = {};
  uint32_t offsets[kMaxOperands] = {};
  uint32_t strides[kMaxOperands][kMaxDims] = {};
  float constants[kMaxOperands] = {};
};
static_assert(sizeof(ElementwiseParams) == 208, "the WGSL struct P is 208 bytes");

const char* kElementwiseParams = R"(
struct P {
  numel: u32, ndim: u32, alpha: f32, beta: f32,
  sizes: array<vec4<u32>, 2>,
  offsets: vec4<u32>,
  strides: array<vec4<u32>, 8>,
  c: vec4<f32>,
}
@group(0) @binding(0) var<uniform> p: P;
)";

// Flat kernels (every operand contiguous) need only this much, which travels as the launch's
// `var<immediate>` block rather than as a uniform buffer the stream must stage.
struct FlatParams {
  uint32_t numel = 0;
  uint32_t ndim = 1;
  float alpha = 1.0f;
  float beta = 0.0f;
  uint32_t offsets[kMaxOperands] = {};
  float constants[kMaxOperands] = {};
};
static_assert(sizeof(FlatParams) == 48, "the WGSL struct P of flat kernels is 48 bytes");

const char* kFlatParams = R"(
struct P { numel: u32, ndim: u32, alpha: f32, beta: f32, offsets: vec4<u32>, c: vec4<f32> }
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

// Helpers an expression may call; each is added to a kernel's source only when it uses it.
const char* kErf = R"(
fn erf_approx(x: f32) -> f32 {
  let a = abs(x);
  let t = 1.0 / (1.0 + 0.3275911 * a);
  let poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t;
  return sign(x) * (1.0 - poly * exp(-a * a));
}
)";

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

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

uint32_t element_offset(const at::Tensor& t) {
  return static_cast<uint32_t>(place_of(t).offset / t.element_size());
}

// Runs `expression` for every element of `out`: the inputs broadcast to its shape and are
// named x0, x1, x2 in the expression (a CPU scalar becomes a constant of the output's type),
// `T` is the output's WGSL type, and p.alpha and p.beta are the given scalars. Returns false,
// doing nothing, when a kernel cannot do it (the caller then falls back to the CPU).
bool elementwise(at::Tensor& out, const std::vector<at::Tensor>& inputs, const std::string& expression,
                 float alpha = 1.0f, float beta = 0.0f) {
  const char* out_type = wgsl_type(out.scalar_type());
  if (out_type == nullptr || out.dim() > kMaxDims || inputs.size() >= kMaxOperands) return false;
  if (out.numel() == 0) return true;
  if (out.numel() > std::numeric_limits<uint32_t>::max() / 2) return false;
  Device& dev = device(out.device().index());
  ElementwiseParams params;
  params.numel = static_cast<uint32_t>(out.numel());
  params.alpha = alpha;
  params.beta = beta;
  const int64_t ndim = std::max<int64_t>(out.dim(), 1);
  params.ndim = static_cast<uint32_t>(ndim);
  for (int64_t d = 0; d < ndim; d++) params.sizes[d] = out.dim() == 0 ? 1 : static_cast<uint32_t>(out.size(d));

  BufferSet set;
  bool flat = out.is_contiguous();
  auto add_strides = [&](int operand, const at::Tensor& t) {
    for (int64_t d = 0; d < t.dim(); d++) params.strides[operand][d] = static_cast<uint32_t>(t.stride(d));
  };
  std::string out_name = set.bind(place_of(out).buffer, out_type, true);
  if (out_name.empty()) return false;
  params.offsets[0] = element_offset(out);
  add_strides(0, out);

  std::string loads;
  for (size_t k = 0; k < inputs.size(); k++) {
    const at::Tensor& input = inputs[k];
    const std::string x = "x" + std::to_string(k);
    if (is_cpu_scalar(input)) {
      params.constants[k + 1] = static_cast<float>(input.item<double>());
      loads += "  let " + x + " = " + out_type + "(p.c[" + std::to_string(k + 1) + "]);\n";
      continue;
    }
    if (input.device() != out.device()) return false;
    const bool boolean = input.scalar_type() == at::kBool;
    const char* type = boolean ? "u32" : wgsl_type(input.scalar_type());
    if (type == nullptr) return false;
    at::Tensor expanded = input.sizes() == out.sizes() ? input : input.expand(out.sizes());
    flat = flat && expanded.is_contiguous();
    std::string name = set.bind(place_of(expanded).buffer, type, false);
    if (name.empty()) return false;
    params.offsets[k + 1] = element_offset(expanded);
    add_strides(static_cast<int>(k + 1), expanded);
    const std::string at = "offset_of(" + std::to_string(k + 1) + "u, i)";
    if (boolean) {
      // A bool is one byte: read its word (buffers are whole words) and pick the byte.
      loads += "  let " + x + "_at = " + at + ";\n  let " + x + " = ((" + name + "[" + x + "_at / 4u] >> ((" + x +
               "_at % 4u) * 8u)) & 0xffu) != 0u;\n";
    } else {
      loads += "  let " + x + " = " + name + "[" + at + "];\n";
    }
  }
  // The expression, the loads (which binding each input reads, and how), every binding's
  // element type and access, and the layout identify the kernel.
  const bool immediate = flat && dev.max_scalar_block_size >= sizeof(FlatParams);
  std::string key = expression;
  key += immediate ? "|immediate|" : flat ? "|flat|" : "|strided|";
  key += out_name;
  key += loads;
  for (size_t b = 0; b < set.buffers.size(); b++) {
    key += set.types[b];
    key += set.written[b] ? 'w' : 'r';
  }
  const Kernel& compiled = kernel_by_key(dev, key, [&] {
    std::string body = expression;
    replace_all(body, "T(", std::string(out_type) + "(");
    std::string source = immediate ? kFlatParams : kElementwiseParams;
    source += set.declarations();
    source += flat ? kFlatOffset : kStridedOffset;
    if (body.find("erf_approx") != std::string::npos) source += kErf;
    source += "@compute @workgroup_size(256)\n"
              "fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {\n"
              "  let i = gid.x + gid.y * groups.x * 256u;\n"
              "  if (i >= p.numel) { return; }\n";
    source += loads;
    source += "  " + out_name + "[offset_of(0u, i)] = " + body + ";\n}\n";
    return source;
  });
  if (immediate) {
    FlatParams flat_params;
    flat_params.numel = params.numel;
    flat_params.alpha = params.alpha;
    flat_params.beta = params.beta;
    std::memcpy(flat_params.offsets, params.offsets, sizeof flat_params.offsets);
    std::memcpy(flat_params.constants, params.constants, sizeof flat_params.constants);
    // Binding 0, the uniform the strided kernels read, is not in these kernels.
    launch(dev, compiled, set.bindings(nullptr, 0), out.numel(), &flat_params, sizeof flat_params);
  } else {
    launch(dev, compiled, set.bindings(&params, sizeof params), out.numel());
  }
  return true;
}

// `out` resized to `shape`, as structured out= kernels do.
void prepare_out(at::Tensor& out, at::IntArrayRef shape) { at::native::resize_output(out, shape); }

at::DimVector broadcast_shape(const std::vector<at::Tensor>& inputs) {
  at::DimVector shape;
  for (const auto& t : inputs) shape = at::infer_size_dimvector(shape, t.sizes());
  return shape;
}

using at::native::call_fallback_fn;

// --- Binary arithmetic -------------------------------------------------------------------

at::Tensor& add_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, other}));
  const char* e = out.scalar_type() == at::kInt ? "x0 + i32(p.alpha) * x1" : "x0 + p.alpha * x1";
  if (!elementwise(out, {self, other}, e, alpha.to<float>()))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(add_out)>::call(self, other, alpha, out);
  return out;
}

at::Tensor& sub_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, other}));
  const char* e = out.scalar_type() == at::kInt ? "x0 - i32(p.alpha) * x1" : "x0 - p.alpha * x1";
  if (!elementwise(out, {self, other}, e, alpha.to<float>()))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(sub_out)>::call(self, other, alpha, out);
  return out;
}

at::Tensor& mul_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, other}));
  if (!elementwise(out, {self, other}, "x0 * x1"))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(mul_out)>::call(self, other, out);
  return out;
}

at::Tensor& div_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, other}));
  if (out.scalar_type() != at::kFloat || !elementwise(out, {self, other}, "x0 / x1"))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(div_out)>::call(self, other, out);
  return out;
}

at::Tensor& maximum_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, other}));
  const char* e = out.scalar_type() == at::kFloat ? "select(max(x0, x1), x0 + x1, x0 != x0 || x1 != x1)" : "max(x0, x1)";
  if (!elementwise(out, {self, other}, e))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(maximum_out)>::call(self, other, out);
  return out;
}

at::Tensor& minimum_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, other}));
  const char* e = out.scalar_type() == at::kFloat ? "select(min(x0, x1), x0 + x1, x0 != x0 || x1 != x1)" : "min(x0, x1)";
  if (!elementwise(out, {self, other}, e))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(minimum_out)>::call(self, other, out);
  return out;
}

// --- Unary operations and activations (f32) ------------------------------------------------

bool unary(at::Tensor& out, const at::Tensor& self, const char* expression) {
  prepare_out(out, self.sizes());
  if (out.scalar_type() != at::kFloat || self.scalar_type() != at::kFloat) return false;
  return elementwise(out, {self}, expression);
}

#define XHAL_UNARY(op, expression)                                                          \
  at::Tensor& op##_out(const at::Tensor& self, at::Tensor& out) {                           \
    if (!unary(out, self, expression))                                                      \
      return call_fallback_fn<&cpu_fallback, ATEN_OP(op##_out)>::call(self, out);           \
    return out;                                                                             \
  }

XHAL_UNARY(neg, "-x0")
XHAL_UNARY(exp, "exp(x0)")
XHAL_UNARY(log, "log(x0)")
XHAL_UNARY(sqrt, "sqrt(x0)")
XHAL_UNARY(rsqrt, "inverseSqrt(x0)")
XHAL_UNARY(sin, "sin(x0)")
XHAL_UNARY(cos, "cos(x0)")
XHAL_UNARY(tanh, "tanh(clamp(x0, -15.0, 15.0))")
XHAL_UNARY(sigmoid, "1.0 / (1.0 + exp(-x0))")
XHAL_UNARY(reciprocal, "1.0 / x0")
XHAL_UNARY(silu, "x0 / (1.0 + exp(-x0))")

at::Tensor& abs_out(const at::Tensor& self, at::Tensor& out) {
  prepare_out(out, self.sizes());
  if (out.scalar_type() != self.scalar_type() || !elementwise(out, {self}, "abs(x0)"))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(abs_out)>::call(self, out);
  return out;
}

at::Tensor& gelu_out(const at::Tensor& self, c10::string_view approximate, at::Tensor& out) {
  const char* e = approximate == "tanh"
                      ? "0.5 * x0 * (1.0 + tanh(clamp(0.7978845608 * (x0 + 0.044715 * x0 * x0 * x0), -15.0, 15.0)))"
                      : "0.5 * x0 * (1.0 + erf_approx(x0 * 0.7071067812))";
  if (!unary(out, self, e)) return call_fallback_fn<&cpu_fallback, ATEN_OP(gelu_out)>::call(self, approximate, out);
  return out;
}

at::Tensor relu(const at::Tensor& self) {
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  if (!elementwise(out, {self}, "max(x0, T(0))")) return call_fallback_fn<&cpu_fallback, ATEN_OP(relu)>::call(self);
  return out;
}

at::Tensor& relu_(at::Tensor& self) {
  if (!elementwise(self, {self}, "max(x0, T(0))")) return call_fallback_fn<&cpu_fallback, ATEN_OP(relu_)>::call(self);
  return self;
}

// --- Backward formulas ---------------------------------------------------------------------

bool backward(at::Tensor& grad_input, const at::Tensor& grad_output, const at::Tensor& other, const char* e,
              float alpha = 0.0f) {
  prepare_out(grad_input, broadcast_shape({grad_output, other}));
  if (grad_input.scalar_type() != at::kFloat || grad_output.scalar_type() != at::kFloat ||
      other.scalar_type() != at::kFloat)
    return false;
  return elementwise(grad_input, {grad_output, other}, e, alpha);
}

at::Tensor& threshold_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Scalar& threshold,
                                   at::Tensor& grad_input) {
  if (!backward(grad_input, grad_output, self, "select(x0, 0.0, x1 <= p.alpha)", threshold.to<float>()))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(threshold_backward_grad_input)>::call(grad_output, self, threshold,
                                                                                         grad_input);
  return grad_input;
}

at::Tensor& sigmoid_backward_out(const at::Tensor& grad_output, const at::Tensor& output, at::Tensor& grad_input) {
  if (!backward(grad_input, grad_output, output, "x0 * x1 * (1.0 - x1)"))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(sigmoid_backward_grad_input)>::call(grad_output, output, grad_input);
  return grad_input;
}

at::Tensor& tanh_backward_out(const at::Tensor& grad_output, const at::Tensor& output, at::Tensor& grad_input) {
  if (!backward(grad_input, grad_output, output, "x0 * (1.0 - x1 * x1)"))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(tanh_backward_grad_input)>::call(grad_output, output, grad_input);
  return grad_input;
}

at::Tensor& gelu_backward_out(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate,
                              at::Tensor& grad_input) {
  const char* e =
      "x0 * (0.5 * (1.0 + erf_approx(x1 * 0.7071067812)) + x1 * 0.3989422804 * exp(-0.5 * x1 * x1))";
  if (approximate == "tanh" || !backward(grad_input, grad_output, self, e))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(gelu_backward_grad_input)>::call(grad_output, self, approximate,
                                                                                    grad_input);
  return grad_input;
}

at::Tensor& silu_backward_out(const at::Tensor& grad_output, const at::Tensor& self, at::Tensor& grad_input) {
  const char* e = "x0 * (1.0 / (1.0 + exp(-x1))) * (1.0 + x1 * (1.0 - 1.0 / (1.0 + exp(-x1))))";
  if (!backward(grad_input, grad_output, self, e))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(silu_backward_grad_input)>::call(grad_output, self, grad_input);
  return grad_input;
}

// --- Copies on the device ----------------------------------------------------------------

}  // namespace

bool copy_on_device(at::Tensor& destination, const at::Tensor& source) {
  if (wgsl_type(destination.scalar_type()) == nullptr || wgsl_type(source.scalar_type()) == nullptr) return false;
  return elementwise(destination, {source}, "T(x0)");
}

namespace {

// --- Reductions --------------------------------------------------------------------------

struct ReduceParams {
  uint32_t numel = 0;      // output elements
  uint32_t kept = 0;       // kept dimensions
  uint32_t reduced = 0;    // reduced dimensions
  uint32_t count = 0;      // elements reduced into each output
  float scale = 1.0f;      // 1 for sum, 1/count for mean
  uint32_t input_offset = 0;
  uint32_t output_offset = 0;
  uint32_t pad = 0;
  uint32_t kept_sizes[kMaxDims] = {};
  uint32_t kept_strides[kMaxDims] = {};
  uint32_t reduced_sizes[kMaxDims] = {};
  uint32_t reduced_strides[kMaxDims] = {};
};
static_assert(sizeof(ReduceParams) == 160, "the WGSL struct R is 160 bytes");

const char* kReduce = R"(
struct R {
  numel: u32, kept: u32, reduced: u32, count: u32,
  scale: f32, input_offset: u32, output_offset: u32, pad: u32,
  kept_sizes: array<vec4<u32>, 2>, kept_strides: array<vec4<u32>, 2>,
  reduced_sizes: array<vec4<u32>, 2>, reduced_strides: array<vec4<u32>, 2>,
}
@group(0) @binding(0) var<uniform> r: R;
@group(0) @binding(1) var<storage, read> input: array<f32>;
@group(0) @binding(2) var<storage, read_write> output: array<f32>;
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
  // Four partial sums, so that long reductions lose less to rounding.
  var partial = vec4<f32>(0.0);
  for (var j = 0u; j < r.count; j = j + 1u) {
    var left = j;
    var at = base;
    for (var k = 0u; k < r.reduced; k = k + 1u) {
      let d = r.reduced - 1u - k;
      let size = r.reduced_sizes[d / 4u][d % 4u];
      at = at + (left % size) * r.reduced_strides[d / 4u][d % 4u];
      left = left / size;
    }
    partial[j % 4u] = partial[j % 4u] + input[at];
  }
  output[r.output_offset + o] = ((partial.x + partial.y) + (partial.z + partial.w)) * r.scale;
}
)";

bool reduce(at::Tensor& out, const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim, bool mean,
            std::optional<at::ScalarType> dtype) {
  if (self.scalar_type() != at::kFloat || (dtype.has_value() && *dtype != at::kFloat)) return false;
  if (self.dim() > kMaxDims) return false;
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
  prepare_out(out, shape);
  if (out.scalar_type() != at::kFloat || !out.is_contiguous() || out.device() != self.device()) return false;
  if (out.numel() == 0) return true;
  if (count == 0) {
    out.fill_(mean ? std::numeric_limits<float>::quiet_NaN() : 0.0f);
    return true;
  }
  r.numel = static_cast<uint32_t>(out.numel());
  r.count = static_cast<uint32_t>(count);
  r.scale = mean ? 1.0f / static_cast<float>(count) : 1.0f;
  r.input_offset = element_offset(self);
  r.output_offset = element_offset(out);
  Place in = place_of(self), o = place_of(out);
  if (in.buffer == o.buffer) return false;
  Device& dev = device(out.device().index());
  launch(dev, kernel(dev, kReduce),
         {Binding{nullptr, 0, sizeof r, &r}, Binding{in.buffer, 0, XHAL_WHOLE_SIZE, nullptr},
          Binding{o.buffer, 0, XHAL_WHOLE_SIZE, nullptr}},
         out.numel());
  return true;
}

at::Tensor& sum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype, at::Tensor& out) {
  if (!reduce(out, self, dim, keepdim, false, dtype))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(sum_IntList_out)>::call(self, dim, keepdim, dtype, out);
  return out;
}

at::Tensor& mean_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                     std::optional<at::ScalarType> dtype, at::Tensor& out) {
  if (!reduce(out, self, dim, keepdim, true, dtype))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(mean_out)>::call(self, dim, keepdim, dtype, out);
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
                          const std::string& out) {
  std::string source = R"(
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
  var acc = vec4<f32>(0.0);
  for (var kk = 0u; kk < q.k; kk = kk + 1u) {
    acc[kk % 4u] = acc[kk % 4u] + A[a_at] * B[b_at];
    a_at = a_at + q.a_strides.z;
    b_at = b_at + q.b_strides.y;
  }
  var value = q.alpha * ((acc.x + acc.y) + (acc.z + acc.w));
  if (q.has_bias != 0u) {
    value = value + q.beta * BIAS[q.offsets.z + bat * q.bias_strides.x + row * q.bias_strides.y + col * q.bias_strides.z];
  }
  OUT[q.offsets.w + i] = value;
}
)";
  replace_all(source, "A[", a + "[");
  replace_all(source, "B[", b + "[");
  replace_all(source, "BIAS[", (bias.empty() ? a : bias) + "[");
  replace_all(source, "OUT[", out + "[");
  return source;
}

// out[b] = beta * bias[b] + alpha * a[b] @ b[b], for 3-dimensional a, b and out (bias
// broadcast to out, or undefined). False when a kernel cannot do it.
bool matmul(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias, float alpha,
            float beta) {
  for (const at::Tensor* t : {static_cast<const at::Tensor*>(&out), &a, &b}) {
    if (t->scalar_type() != at::kFloat || t->device() != out.device()) return false;
  }
  if (!out.is_contiguous()) return false;
  MatmulParams q;
  q.batch = static_cast<uint32_t>(out.size(0));
  q.m = static_cast<uint32_t>(out.size(1));
  q.n = static_cast<uint32_t>(out.size(2));
  q.k = static_cast<uint32_t>(a.size(2));
  q.alpha = alpha;
  q.beta = beta;
  if (out.numel() == 0) return true;
  BufferSet set;
  std::string an = set.bind(place_of(a).buffer, "f32", false);
  std::string bn = set.bind(place_of(b).buffer, "f32", false);
  std::string biasn;
  q.offsets[0] = element_offset(a);
  q.offsets[1] = element_offset(b);
  for (int d = 0; d < 3; d++) {
    q.a_strides[d] = static_cast<uint32_t>(a.size(d) == 1 ? 0 : a.stride(d));
    q.b_strides[d] = static_cast<uint32_t>(b.size(d) == 1 ? 0 : b.stride(d));
  }
  if (bias.defined() && beta != 0.0f) {
    if (bias.scalar_type() != at::kFloat || bias.device() != out.device()) return false;
    at::Tensor expanded = bias.expand(out.sizes());
    biasn = set.bind(place_of(expanded).buffer, "f32", false);
    q.has_bias = 1;
    q.offsets[2] = element_offset(expanded);
    for (int d = 0; d < 3; d++) q.bias_strides[d] = static_cast<uint32_t>(expanded.stride(d));
  }
  std::string outn = set.bind(place_of(out).buffer, "f32", true);
  if (an.empty() || bn.empty() || outn.empty() || outn == an || outn == bn || (!biasn.empty() && outn == biasn))
    return false;
  q.offsets[3] = element_offset(out);
  Device& dev = device(out.device().index());
  launch(dev, kernel(dev, matmul_source(set, an, bn, biasn, outn)), set.bindings(&q, sizeof q), out.numel());
  return true;
}

at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  prepare_out(out, {self.size(0), mat2.size(1)});
  at::Tensor out3 = out.unsqueeze(0);
  if (!matmul(out3, self.unsqueeze(0), mat2.unsqueeze(0), at::Tensor(), 1.0f, 0.0f))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(mm_out)>::call(self, mat2, out);
  return out;
}

at::Tensor& bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  prepare_out(out, {self.size(0), self.size(1), mat2.size(2)});
  if (!matmul(out, self, mat2, at::Tensor(), 1.0f, 0.0f))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(bmm_out)>::call(self, mat2, out);
  return out;
}

at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                      const at::Scalar& alpha, at::Tensor& out) {
  prepare_out(out, {mat1.size(0), mat2.size(1)});
  at::Tensor out3 = out.unsqueeze(0);
  at::Tensor bias = self.dim() <= 2 ? self.expand({mat1.size(0), mat2.size(1)}).unsqueeze(0) : self;
  bool same = place_of(out).buffer == place_of(self).buffer;
  if (same || !matmul(out3, mat1.unsqueeze(0), mat2.unsqueeze(0), bias, alpha.to<float>(), beta.to<float>()))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(addmm_out)>::call(self, mat1, mat2, beta, alpha, out);
  return out;
}

// --- Softmax -----------------------------------------------------------------------------

struct RowParams {
  uint32_t outer = 0, length = 0, inner = 0, pad = 0;
};

std::string softmax_source(const char* body) {
  std::string source = R"(
struct Rows { outer: u32, length: u32, inner: u32, pad: u32 }
@group(0) @binding(0) var<uniform> s: Rows;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> y: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let row = gid.x + gid.y * groups.x * 64u;
  if (row >= s.outer * s.inner) { return; }
  let base = (row / s.inner) * s.length * s.inner + row % s.inner;
  let step = s.inner;
)";
  source += body;
  source += "}\n";
  return source;
}

// Forward: x is the input (y unused). Backward: x is the gradient, y the forward output.
const char* kSoftmax = R"(
  var top = -3.4028235e38;
  for (var j = 0u; j < s.length; j = j + 1u) { top = max(top, x[base + j * step]); }
  var total = 0.0;
  for (var j = 0u; j < s.length; j = j + 1u) { total = total + exp(x[base + j * step] - top); }
  for (var j = 0u; j < s.length; j = j + 1u) { out[base + j * step] = exp(x[base + j * step] - top) / total; }
)";
const char* kLogSoftmax = R"(
  var top = -3.4028235e38;
  for (var j = 0u; j < s.length; j = j + 1u) { top = max(top, x[base + j * step]); }
  var total = 0.0;
  for (var j = 0u; j < s.length; j = j + 1u) { total = total + exp(x[base + j * step] - top); }
  let shift = top + log(total);
  for (var j = 0u; j < s.length; j = j + 1u) { out[base + j * step] = x[base + j * step] - shift; }
)";
const char* kSoftmaxBackward = R"(
  var dot = 0.0;
  for (var j = 0u; j < s.length; j = j + 1u) { dot = dot + x[base + j * step] * y[base + j * step]; }
  for (var j = 0u; j < s.length; j = j + 1u) { out[base + j * step] = y[base + j * step] * (x[base + j * step] - dot); }
)";
const char* kLogSoftmaxBackward = R"(
  var total = 0.0;
  for (var j = 0u; j < s.length; j = j + 1u) { total = total + x[base + j * step]; }
  for (var j = 0u; j < s.length; j = j + 1u) { out[base + j * step] = x[base + j * step] - exp(y[base + j * step]) * total; }
)";

// Runs a softmax-family kernel along `dim` of contiguous tensors: out = f(x, y).
bool softmax_rows(at::Tensor& out, const at::Tensor& x_in, const at::Tensor& y_in, int64_t dim, const char* body) {
  if (x_in.scalar_type() != at::kFloat || (y_in.defined() && y_in.scalar_type() != at::kFloat)) return false;
  prepare_out(out, x_in.sizes());
  if (out.scalar_type() != at::kFloat || !out.is_contiguous() || x_in.dim() > kMaxDims) return false;
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
  launch(dev, kernel(dev, softmax_source(body)),
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
  if (input_dtype != at::kFloat || !softmax_rows(grad_input, grad_output, output, dim, kSoftmaxBackward))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(_softmax_backward_data_out)>::call(grad_output, output, dim,
                                                                                      input_dtype, grad_input);
  return grad_input;
}

at::Tensor& log_softmax_backward_out(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                     at::ScalarType input_dtype, at::Tensor& grad_input) {
  if (input_dtype != at::kFloat || !softmax_rows(grad_input, grad_output, output, dim, kLogSoftmaxBackward))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(_log_softmax_backward_data_out)>::call(grad_output, output, dim,
                                                                                          input_dtype, grad_input);
  return grad_input;
}

// --- Optimizer updates ---------------------------------------------------------------------

at::Tensor& addcmul_out(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                        const at::Scalar& value, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, tensor1, tensor2}));
  if (out.scalar_type() != at::kFloat || !elementwise(out, {self, tensor1, tensor2}, "x0 + p.alpha * x1 * x2", value.to<float>()))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(addcmul_out)>::call(self, tensor1, tensor2, value, out);
  return out;
}

at::Tensor& addcdiv_out(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                        const at::Scalar& value, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, tensor1, tensor2}));
  if (out.scalar_type() != at::kFloat || !elementwise(out, {self, tensor1, tensor2}, "x0 + p.alpha * x1 / x2", value.to<float>()))
    return call_fallback_fn<&cpu_fallback, ATEN_OP(addcdiv_out)>::call(self, tensor1, tensor2, value, out);
  return out;
}

at::Tensor& lerp_scalar_out(const at::Tensor& self, const at::Tensor& end, const at::Scalar& weight, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, end}));
  // PyTorch's formula: from the nearer end, so that weight 1 gives `end` exactly.
  const char* e = "select(x1 - (x1 - x0) * (1.0 - p.alpha), x0 + p.alpha * (x1 - x0), abs(p.alpha) < 0.5)";
  if (out.scalar_type() != at::kFloat || !elementwise(out, {self, end}, e, weight.to<float>()))
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
  if (!elementwise(self, {}, "T(0)")) return call_fallback_fn<&cpu_fallback, ATEN_OP(zero_)>::call(self);
  return out;
}

at::Tensor& masked_fill_scalar_(at::Tensor& self, const at::Tensor& mask, const at::Scalar& value) {
  if (mask.scalar_type() != at::kBool || mask.device() != self.device() || self.scalar_type() != at::kFloat ||
      !elementwise(self, {self, mask}, "select(x0, T(p.alpha), x1)", value.to<float>()))
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
  if (self.scalar_type() != at::kFloat || target.scalar_type() != at::kLong || self.dim() < 1 || self.dim() > 2 ||
      target.device() != self.device())
    return false;
  if (weight.has_value() && weight->defined() &&
      (weight->scalar_type() != at::kFloat || weight->device() != self.device() || weight->dim() != 1))
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
  if (output.scalar_type() != at::kFloat || total_weight.scalar_type() != at::kFloat) return fallback();
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
  std::string x = set.bind(place_of(self).buffer, "f32", false);
  std::string tb = set.bind(place_of(t).buffer, "u32", false);
  std::string wb = x;
  if (weight.has_value() && weight->defined()) {
    at::Tensor w = weight->contiguous();
    q.has_weight = 1;
    q.weight_offset = element_offset(w);
    wb = set.bind(place_of(w).buffer, "f32", false);
  }
  std::string ob = set.bind(place_of(output).buffer, "f32", true);
  std::string tw = set.bind(place_of(total_weight).buffer, "f32", true);
  q.out_offset = element_offset(output);
  q.total_offset = element_offset(total_weight);
  if (x.empty() || tb.empty() || wb.empty() || ob.empty() || tw.empty()) return fallback();
  std::string source = kLossParams + set.declarations() + R"(
fn loss_of(i: u32) -> vec2<f32> {
  let t = TARGET;
  if (t == q.ignore) { return vec2<f32>(0.0, 0.0); }
  var w = 1.0;
  if (q.has_weight != 0u) { w = WEIGHT[q.weight_offset + u32(t)]; }
  return vec2<f32>(-w * X[q.self_offset + i * q.self_row + u32(t) * q.self_column], w);
}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (q.reduction == 0u) {
    if (gid.x >= q.n) { return; }
    OUT[q.out_offset + gid.x] = loss_of(gid.x).x;
    if (gid.x == 0u) { TOTAL[q.total_offset] = 0.0; }
    return;
  }
  if (gid.x != 0u) { return; }
  var sum = 0.0;
  var weights = 0.0;
  for (var i = 0u; i < q.n; i = i + 1u) {
    let l = loss_of(i);
    sum = sum + l.x;
    weights = weights + l.y;
  }
  if (q.reduction == 1u) { sum = sum / weights; }
  OUT[q.out_offset] = sum;
  TOTAL[q.total_offset] = weights;
}
)";
  replace_all(source, "TARGET", index_load(tb, at::kLong, "q.target_offset / 2u + i"));
  replace_all(source, "WEIGHT[", wb + "[");
  replace_all(source, "X[", x + "[");
  replace_all(source, "OUT[", ob + "[");
  replace_all(source, "TOTAL[", tw + "[");
  Device& dev = device(self.device().index());
  launch(dev, kernel(dev, source), set.bindings(&q, sizeof q), reduction == 0 ? std::max<int64_t>(n, 1) : 1);
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
  if (!nll_checks(self, target, weight, ignore) || grad_output.scalar_type() != at::kFloat ||
      total_weight.scalar_type() != at::kFloat)
    return fallback();
  prepare_out(grad_input, self.sizes());
  if (!grad_input.is_contiguous() || grad_input.scalar_type() != at::kFloat) return fallback();
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
  std::string gb = set.bind(place_of(grad_output).buffer, "f32", false);
  std::string twb = set.bind(place_of(total_weight).buffer, "f32", false);
  std::string wb = gb;
  if (weight.has_value() && weight->defined()) {
    at::Tensor w = weight->contiguous();
    q.has_weight = 1;
    q.weight_offset = element_offset(w);
    wb = set.bind(place_of(w).buffer, "f32", false);
  }
  std::string ob = set.bind(place_of(grad_input).buffer, "f32", true);
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
  var value = 0.0;
  if (t != q.ignore && u32(t) == c) {
    var w = 1.0;
    if (q.has_weight != 0u) { w = WEIGHT[q.weight_offset + c]; }
    var g = GRAD[q.grad_offset];
    if (q.reduction == 0u) { g = GRAD[q.grad_offset + i * q.grad_stride]; }
    if (q.reduction == 1u) { g = g / TOTALW[q.total_offset]; }
    value = -w * g;
  }
  OUT[q.out_offset + e] = value;
}
)";
  replace_all(source, "TARGET", index_load(tb, at::kLong, "q.target_offset / 2u + i"));
  replace_all(source, "WEIGHT[", wb + "[");
  replace_all(source, "GRAD[", gb + "[");
  replace_all(source, "TOTALW[", twb + "[");
  replace_all(source, "OUT[", ob + "[");
  Device& dev = device(self.device().index());
  launch(dev, kernel(dev, source), set.bindings(&q, sizeof q), grad_input.numel());
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
  if (self.dim() != 2 || c10::maybe_wrap_dim(dim, 2) != 0 || self.scalar_type() != at::kFloat || index.dim() > 1 ||
      (index.scalar_type() != at::kLong && index.scalar_type() != at::kInt) || index.device() != self.device())
    return fallback();
  auto host = host_indices(index);
  if (host.numel() > 0) {
    int64_t low = host.min().item<int64_t>(), high = host.max().item<int64_t>();
    TORCH_CHECK_INDEX(low >= 0 && high < self.size(0), "index out of range in self");
  }
  prepare_out(out, {index.numel(), self.size(1)});
  if (!out.is_contiguous() || out.scalar_type() != at::kFloat) return fallback();
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
  std::string tb = set.bind(place_of(self).buffer, "f32", false);
  std::string ib = set.bind(place_of(idx).buffer, "u32", false);
  std::string ob = set.bind(place_of(out).buffer, "f32", true);
  if (tb.empty() || ib.empty() || ob.empty() || ob == tb) return fallback();
  std::string source = kGatherParams + set.declarations() + R"(
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
  if (scale_grad_by_freq || grad_output.scalar_type() != at::kFloat ||
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
  std::string gb = set.bind(place_of(grad).buffer, "f32", false);
  std::string ib = set.bind(place_of(idx).buffer, "u32", false);
  std::string ob = set.bind(place_of(out).buffer, "f32", true);
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
  var sum = 0.0;
  if (i32(row) != i32(q.padding)) {
    for (var i = 0u; i < q.count; i = i + 1u) {
      if (u32(INDEX) == row) { sum = sum + GRAD[q.table_offset + i * q.width + j]; }
    }
  }
  OUT[q.out_offset + e] = sum;
}
)";
  std::string k = idx.scalar_type() == at::kLong ? "q.index_offset / 2u + i" : "q.index_offset + i";
  replace_all(source, "INDEX", index_load(ib, idx.scalar_type(), k));
  replace_all(source, "GRAD[", gb + "[");
  replace_all(source, "OUT[", ob + "[");
  Device& dev = device(out.device().index());
  launch(dev, kernel(dev, source), set.bindings(&q, sizeof q), out.numel());
  return out;
}

// --- Layer norm ----------------------------------------------------------------------------

struct NormParams {
  uint32_t rows = 0, width = 0, has_weight = 0, has_bias = 0;
  float eps = 0.0f;
  uint32_t pad0 = 0, pad1 = 0, pad2 = 0;
};
const char* kNormParams = R"(
struct N { rows: u32, width: u32, has_weight: u32, has_bias: u32, eps: f32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> q: N;
)";

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
  bool ok = input.scalar_type() == at::kFloat && (!has_weight || weight->scalar_type() == at::kFloat) &&
            (!has_bias || bias->scalar_type() == at::kFloat) && input.dim() >= static_cast<int64_t>(shape.size());
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
  NormParams q;
  q.rows = static_cast<uint32_t>(rows);
  q.width = static_cast<uint32_t>(width);
  q.has_weight = has_weight;
  q.has_bias = has_bias;
  q.eps = static_cast<float>(eps);
  std::string source = std::string(kNormParams) + R"(
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read_write> mean: array<f32>;
@group(0) @binding(6) var<storage, read_write> rstd: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let r = gid.x + gid.y * groups.x * 64u;
  if (r >= q.rows) { return; }
  let base = r * q.width;
  var sum = 0.0;
  for (var j = 0u; j < q.width; j = j + 1u) { sum = sum + x[base + j]; }
  let m = sum / f32(q.width);
  var squares = 0.0;
  for (var j = 0u; j < q.width; j = j + 1u) { let d = x[base + j] - m; squares = squares + d * d; }
  let s = inverseSqrt(squares / f32(q.width) + q.eps);
  for (var j = 0u; j < q.width; j = j + 1u) {
    var y = (x[base + j] - m) * s;
    if (q.has_weight != 0u) { y = y * w[j]; }
    if (q.has_bias != 0u) { y = y + b[j]; }
    out[base + j] = y;
  }
  mean[r] = m;
  rstd[r] = s;
}
)";
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
  bool ok = input.scalar_type() == at::kFloat && grad_out.scalar_type() == at::kFloat &&
            (!has_weight || weight->scalar_type() == at::kFloat);
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
  NormParams q;
  q.rows = static_cast<uint32_t>(rows);
  q.width = static_cast<uint32_t>(width);
  q.has_weight = has_weight;
  Device& dev = device(input.device().index());
  const char* bindings = R"(
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> dy: array<f32>;
@group(0) @binding(3) var<storage, read> mean: array<f32>;
@group(0) @binding(4) var<storage, read> rstd: array<f32>;
@group(0) @binding(5) var<storage, read> w: array<f32>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;
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
  var a = 0.0;
  var c = 0.0;
  for (var j = 0u; j < q.width; j = j + 1u) {
    var g = dy[base + j];
    if (q.has_weight != 0u) { g = g * w[j]; }
    a = a + g;
    c = c + g * (x[base + j] - mean[r]) * rstd[r];
  }
  a = a / f32(q.width);
  c = c / f32(q.width);
  for (var j = 0u; j < q.width; j = j + 1u) {
    var g = dy[base + j];
    if (q.has_weight != 0u) { g = g * w[j]; }
    let xhat = (x[base + j] - mean[r]) * rstd[r];
    out[base + j] = rstd[r] * (g - a - xhat * c);
  }
}
)";
    auto b = common;
    b.push_back(Binding{place_of(dx).buffer});
    launch(dev, kernel(dev, source), b, rows);
  }
  for (int which = 0; which < 2; which++) {
    at::Tensor& target = which == 0 ? dw : db;
    if (!target.defined()) continue;
    std::string term = which == 0 ? "dy[i * q.width + j] * (x[i * q.width + j] - mean[i]) * rstd[i]" : "dy[i * q.width + j]";
    std::string source = std::string(kNormParams) + bindings + R"(
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let j = gid.x + gid.y * groups.x * 64u;
  if (j >= q.width) { return; }
  var sum = 0.0;
  for (var i = 0u; i < q.rows; i = i + 1u) { sum = sum + TERM; }
  out[j] = sum;
}
)";
    replace_all(source, "TERM", term);
    auto b = common;
    b.push_back(Binding{place_of(target).buffer});
    launch(dev, kernel(dev, source), b, width);
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
  if (out.scalar_type() != at::kFloat)
    return call_fallback_fn<&cpu_fallback, ATEN_OP(arange_start_out)>::call(start, end, step, out);
  const double from = start.to<double>(), to = end.to<double>(), by = step.to<double>();
  TORCH_CHECK(by != 0, "step must be nonzero");
  TORCH_CHECK(std::isfinite(from) && std::isfinite(to), "unsupported range: ", from, " -> ", to);
  TORCH_CHECK((by > 0 && to >= from) || (by < 0 && to <= from), "upper bound and larger bound inconsistent with step sign");
  const int64_t size = static_cast<int64_t>(std::ceil((to - from) / by));
  prepare_out(out, {size});
  if (!elementwise(out, {}, "T(p.alpha + p.beta * f32(i))", static_cast<float>(from), static_cast<float>(by)))
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
  m.impl("gelu.out", gelu_out);
  m.impl("relu", relu);
  m.impl("relu_", relu_);
  m.impl("threshold_backward.grad_input", threshold_backward_out);
  m.impl("sigmoid_backward.grad_input", sigmoid_backward_out);
  m.impl("tanh_backward.grad_input", tanh_backward_out);
  m.impl("gelu_backward.grad_input", gelu_backward_out);
  m.impl("silu_backward.grad_input", silu_backward_out);
  m.impl("sum.IntList_out", sum_out);
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
