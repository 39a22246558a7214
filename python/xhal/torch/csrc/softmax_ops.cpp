// Softmax and log-softmax of the `xhal` PyTorch device (kernels/softmax.wgsl), forward and
// backward, along any dimension.

#include <ATen/Operators.h>
#include <torch/library.h>

#include "ops.h"

namespace xhal_torch {
namespace {

// The immediate block of kernels/softmax.wgsl (struct Rows).
struct RowsLayout {
  uint32_t outer = 1, length = 1, inner = 1, pad = 0;
  uint32_t offsets[4] = {};
};
static_assert(sizeof(RowsLayout) == 32, "the WGSL struct Rows is 32 bytes");

// Rows at least this long whose elements are adjacent take a workgroup each (the `_wide` entry
// points); shorter ones, or rows strided through memory, an invocation each.
constexpr uint32_t kWideRow = 256;

// Entry point `name` of kernels/softmax.wgsl for `dtype`, computed in its compute type.
const Kernel& softmax_kernel(Device& dev, const std::string& name, at::ScalarType dtype) {
  return recipe_kernel(dev, "softmax|" + name + wgsl_type(dtype), [&] {
    KernelRecipe recipe;
    recipe.files = {"softmax.wgsl"};
    recipe.types = {{"E", wgsl_type(dtype)}, {"F", wgsl_type(float_compute(dtype))}};
    recipe.overrides = {{"EXACT", float_compute(dtype) == dtype ? 1.0 : 0.0}};
    recipe.entry = name;
    return recipe;
  });
}

// Runs softmax-family entry point `entry` along `dim`: out = f(x, y), y being the forward
// output in the backward passes.
bool softmax_rows(at::Tensor& out, const at::Tensor& x_in, const at::Tensor& y_in, int64_t dim, const char* entry) {
  const at::ScalarType dtype = x_in.scalar_type();
  if (!floating_on(x_in) || (y_in.defined() && y_in.scalar_type() != dtype) || x_in.dim() > kMaxDims) return false;
  prepare_out(out, x_in.sizes());
  if (out.scalar_type() != dtype) return false;
  if (out.numel() == 0) return true;
  const at::Tensor x = x_in.contiguous();
  const at::Tensor y = y_in.defined() ? y_in.contiguous() : x;
  at::Tensor result = out.is_contiguous() ? out : at::empty(out.sizes(), out.options());
  const Place px = place_of(x), py = place_of(y);
  if (place_of(result).buffer == px.buffer || place_of(result).buffer == py.buffer)
    result = at::empty(out.sizes(), out.options());
  dim = c10::maybe_wrap_dim(dim, std::max<int64_t>(x.dim(), 1));
  RowsLayout s;
  for (int64_t d = 0; d < x.dim(); d++) {
    if (d < dim) s.outer *= static_cast<uint32_t>(x.size(d));
    if (d > dim) s.inner *= static_cast<uint32_t>(x.size(d));
  }
  s.length = x.dim() == 0 ? 1 : static_cast<uint32_t>(x.size(dim));
  s.offsets[0] = element_offset(x);
  s.offsets[1] = element_offset(y);
  s.offsets[2] = element_offset(result);
  Device& dev = device(out.device().index());
  const bool wide = s.inner == 1 && s.length >= kWideRow;
  const Kernel& compiled = softmax_kernel(dev, std::string(entry) + (wide ? "_wide" : ""), dtype);
  const Binding bindings[3] = {Binding{px.buffer}, Binding{place_of(result).buffer}, Binding{py.buffer}};
  const uint64_t invocations = static_cast<uint64_t>(s.outer) * (wide ? 256 : s.inner);
  launch(dev, compiled, bindings, invocations, &s, sizeof s);
  if (!result.is_same(out)) out.copy_(result);
  return true;
}

}  // namespace

std::optional<std::pair<at::Tensor, at::Tensor>> softmax_with_logsumexp(const at::Tensor& x_in) {
  const at::ScalarType dtype = x_in.scalar_type();
  if (!floating_on(x_in) || x_in.dim() < 1 || x_in.dim() > kMaxDims || x_in.numel() == 0) return std::nullopt;
  const int64_t length = x_in.size(-1);
  // Long rows keep the composite, whose softmax takes a workgroup a row.
  if (length >= kWideRow) return std::nullopt;
  const at::Tensor x = x_in.contiguous();
  at::Tensor probabilities = at::empty(x.sizes(), x.options());
  at::Tensor logsumexp = at::empty(x.sizes().slice(0, x.dim() - 1), x.options().dtype(float_compute(dtype)));
  RowsLayout s;
  s.outer = static_cast<uint32_t>(x.numel() / length);
  s.length = static_cast<uint32_t>(length);
  s.offsets[0] = element_offset(x);
  s.offsets[1] = element_offset(x);
  s.offsets[2] = element_offset(probabilities);
  s.offsets[3] = element_offset(logsumexp);
  Device& dev = device(x.device().index());
  const Kernel& compiled = softmax_kernel(dev, "softmax_lse", dtype);
  // x is bound again where `y` is, which softmax_lse does not read.
  const Binding bindings[4] = {Binding{place_of(x).buffer}, Binding{place_of(probabilities).buffer},
                               Binding{place_of(x).buffer}, Binding{place_of(logsumexp).buffer}};
  launch(dev, compiled, bindings, s.outer, &s, sizeof s);
  return std::make_pair(probabilities, logsumexp);
}

namespace {

at::Tensor& softmax_out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& out) {
  if (half_to_float || !softmax_rows(out, self, at::Tensor(), dim, "softmax"))
    return XHAL_FALLBACK(_softmax_out, self, dim, half_to_float, out);
  return out;
}

at::Tensor& log_softmax_out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& out) {
  if (half_to_float || !softmax_rows(out, self, at::Tensor(), dim, "log_softmax"))
    return XHAL_FALLBACK(_log_softmax_out, self, dim, half_to_float, out);
  return out;
}

at::Tensor& softmax_backward_out(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                 at::ScalarType input_dtype, at::Tensor& grad_input) {
  if (input_dtype != grad_output.scalar_type() ||
      !softmax_rows(grad_input, grad_output, output, dim, "softmax_backward"))
    return XHAL_FALLBACK(_softmax_backward_data_out, grad_output, output, dim, input_dtype, grad_input);
  return grad_input;
}

at::Tensor& log_softmax_backward_out(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                     at::ScalarType input_dtype, at::Tensor& grad_input) {
  if (input_dtype != grad_output.scalar_type() ||
      !softmax_rows(grad_input, grad_output, output, dim, "log_softmax_backward"))
    return XHAL_FALLBACK(_log_softmax_backward_data_out, grad_output, output, dim, input_dtype, grad_input);
  return grad_input;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_softmax.out", softmax_out);
  m.impl("_log_softmax.out", log_softmax_out);
  m.impl("_softmax_backward_data.out", softmax_backward_out);
  m.impl("_log_softmax_backward_data.out", log_softmax_backward_out);
}

}  // namespace xhal_torch
