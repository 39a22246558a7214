// Pooling of the `xhal` PyTorch device (kernels/pool.wgsl): max and average pooling in 2 and
// 3 dimensions (PyTorch builds the 1-dimensional forms on the 2-dimensional ones), adaptive
// average and max pooling, forward and backward. Shapes and argument errors come from
// PyTorch's own meta kernels, so they are the CPU's.

#include <ATen/Operators.h>
#include <torch/library.h>

#include <cstring>

#include "ops.h"

namespace xhal_torch {
namespace {

// The uniform of kernels/pool.wgsl (struct Pooling).
struct Pooling {
  uint32_t planes = 0;
  int32_t divisor = 0;
  uint32_t pad0 = 0, pad1 = 0;
  uint32_t in_size[4] = {1, 1, 1, 0};
  uint32_t out_size[4] = {1, 1, 1, 0};
  uint32_t kernel[4] = {1, 1, 1, 0};
  uint32_t stride[4] = {1, 1, 1, 0};
  uint32_t padding[4] = {0, 0, 0, 0};
  uint32_t dilation[4] = {1, 1, 1, 0};
};
static_assert(sizeof(Pooling) == 112, "the WGSL struct Pooling is 112 bytes");

enum class Mode { Max, Average, AdaptiveMax, AdaptiveAverage };

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::Max:
      return "MODE_MAX";
    case Mode::Average:
      return "MODE_AVERAGE";
    case Mode::AdaptiveMax:
      return "MODE_ADAPTIVE_MAX";
    default:
      return "MODE_ADAPTIVE_AVERAGE";
  }
}

// A tensor on the meta device of `t`'s shape and dtype: PyTorch's meta kernels check the
// arguments and give the output's shape from it.
at::Tensor meta_like(const at::Tensor& t) { return at::empty(t.sizes(), t.options().device(at::kMeta)); }

at::Tensor fresh(const at::Tensor& t) {
  if (t.is_contiguous() && place_of(t).offset == 0) return t;
  return t.clone(at::MemoryFormat::Contiguous);
}

// The value of a pooling argument along spatial dimension d of `spatial` (one value serves
// every dimension; an empty stride is the kernel's).
int64_t along(at::IntArrayRef values, int64_t d, int64_t fallback) {
  if (values.empty()) return fallback;
  return values.size() == 1 ? values[0] : values[d];
}

// The pooling geometry of `input` ([N, C, *in] or [C, *in]) into `output` (the same, *out).
Pooling geometry(const at::Tensor& input, const at::Tensor& output, int64_t spatial, at::IntArrayRef kernel,
                 at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation) {
  Pooling q;
  q.planes = static_cast<uint32_t>(input.numel() == 0 ? 0 : c10::multiply_integers(input.sizes().slice(0, input.dim() - spatial)));
  for (int64_t d = 0; d < spatial; d++) {
    const int64_t slot = 3 - spatial + d;
    q.in_size[slot] = static_cast<uint32_t>(input.size(input.dim() - spatial + d));
    q.out_size[slot] = static_cast<uint32_t>(output.size(output.dim() - spatial + d));
    const int64_t k = along(kernel, d, 1);
    q.kernel[slot] = static_cast<uint32_t>(k);
    q.stride[slot] = static_cast<uint32_t>(along(stride, d, k));
    q.padding[slot] = static_cast<uint32_t>(along(padding, d, 0));
    q.dilation[slot] = static_cast<uint32_t>(along(dilation, d, 1));
  }
  return q;
}

void run_pool(const char* entry, Mode mode, bool count_padding, Pooling& q, const at::Tensor& a, at::Tensor& out,
              const at::Tensor& indices) {
  if (out.numel() == 0) return;
  Device& dev = device(out.device().index());
  const at::ScalarType dtype = out.scalar_type();
  // A CPU takes max pooling's scattered gradients a run of an output row an invocation
  // (pool.wgsl's scatter_max_runs).
  const bool scatter = std::strcmp(entry, "scatter_max") == 0;
  const bool runs = dev.runs_invocations_in_turn && scatter;
  if (runs) entry = "scatter_max_runs";
  const Binding bindings[4] = {Binding{nullptr, 0, sizeof q, &q}, Binding{a.numel() > 0 ? place_of(a).buffer : dev.placeholder},
                               Binding{place_of(out).buffer},
                               Binding{indices.defined() && indices.numel() > 0 ? place_of(indices).buffer : dev.placeholder}};
  // Adaptive windows that tile the input (every output size divides its input size).
  bool even = mode == Mode::AdaptiveAverage || mode == Mode::AdaptiveMax;
  for (int d = 0; d < 3; d++) even = even && q.out_size[d] > 0 && q.in_size[d] % q.out_size[d] == 0;
  const std::string key = std::string("pool|") + entry + mode_name(mode) + wgsl_type(dtype) + (count_padding ? "p" : "") +
                          (even ? "e" : "");
  const Kernel& compiled = recipe_kernel(dev, key, [&] {
    KernelRecipe recipe;
    recipe.files = {"pool.wgsl"};
    recipe.types = {{"E", wgsl_type(dtype)}, {"F", wgsl_type(float_compute(dtype))}};
    recipe.overrides = {{"MODE", kernel_constant("pool.wgsl", mode_name(mode))},
                        {"COUNT_PADDING", count_padding ? 1.0 : 0.0},
                        {"EVEN", even ? 1.0 : 0.0}};
    recipe.entry = entry;
    return recipe;
  });
  if (runs) {
    constexpr uint64_t kRun = 64;  // pool.wgsl's RUN
    const uint64_t rows = uint64_t{q.planes} * q.out_size[0] * q.out_size[1];
    launch(dev, compiled, bindings, rows * ((q.out_size[2] + kRun - 1) / kRun));
    return;
  }
  if (scatter) {
    // An invocation per output (q.out_size) of each plane: planes along y, past 65,535 in z.
    constexpr uint64_t kMostInY = 65535;
    const uint64_t outputs = uint64_t{q.out_size[0]} * q.out_size[1] * q.out_size[2];
    const uint64_t deep = (q.planes + kMostInY - 1) / kMostInY;
    TORCH_CHECK(deep <= kMostInY && (outputs + 63) / 64 <= kMostInY, "xhal: max pooling's backward pass over ",
                q.planes, " planes of ", outputs, " outputs is more than one launch takes");
    launch_workgroups(dev, compiled, bindings,
                      {static_cast<uint32_t>((outputs + 63) / 64), static_cast<uint32_t>(std::min<uint64_t>(q.planes, kMostInY)),
                       static_cast<uint32_t>(deep)});
    return;
  }
  launch(dev, compiled, bindings, out.numel());
}

// `values` and `indices` written into `out` and `out_indices`, resized to them.
void deliver(at::Tensor& out, const at::Tensor& values) {
  prepare_out(out, values.sizes());
  if (!values.is_same(out)) out.copy_(values);
}

// Max pooling in `spatial` dimensions, forward.
bool max_pool(const at::Tensor& self, int64_t spatial, at::IntArrayRef kernel, at::IntArrayRef stride,
              at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode, at::Tensor& out, at::Tensor& indices) {
  if (!floating_on(self)) return false;
  const auto meta = spatial == 2 ? at::max_pool2d_with_indices(meta_like(self), kernel, stride, padding, dilation, ceil_mode)
                                 : at::max_pool3d_with_indices(meta_like(self), kernel, stride, padding, dilation, ceil_mode);
  at::Tensor values = at::empty(std::get<0>(meta).sizes(), self.options());
  at::Tensor where = at::empty(std::get<1>(meta).sizes(), self.options().dtype(at::kLong));
  Pooling q = geometry(self, values, spatial, kernel, stride, padding, dilation);
  run_pool("forward", Mode::Max, true, q, fresh(self), values, where);
  deliver(out, values);
  deliver(indices, where);
  return true;
}

bool max_pool_backward(const at::Tensor& grad_output, const at::Tensor& self, int64_t spatial, at::IntArrayRef kernel,
                       at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                       const at::Tensor& indices, at::Tensor& grad_input) {
  if (!floating_on(self) || grad_output.scalar_type() != self.scalar_type() || indices.scalar_type() != at::kLong)
    return false;
  Pooling q = geometry(self, grad_output, spatial, kernel, stride, padding, dilation);
  q.planes = static_cast<uint32_t>(c10::multiply_integers(self.sizes().slice(0, self.dim() - spatial)));
  at::Tensor where = fresh(indices);
  // Windows that do not overlap (a stride of at least the window's extent in every dimension)
  // take the scattering pass: an input is in one window at most.
  bool apart = true;
  for (int d = 0; d < 3; d++) apart = apart && q.stride[d] >= q.dilation[d] * (q.kernel[d] - 1) + 1;
  at::Tensor result = apart ? at::zeros(self.sizes(), self.options()) : at::empty(self.sizes(), self.options());
  if (result.numel() > 0 && grad_output.numel() > 0)
    run_pool(apart ? "scatter_max" : "backward", Mode::Max, true, q, fresh(grad_output), result, where);
  deliver(grad_input, result);
  return true;
}

std::tuple<at::Tensor&, at::Tensor&> max_pool2d_out(const at::Tensor& self, at::IntArrayRef kernel_size,
                                                    at::IntArrayRef stride, at::IntArrayRef padding,
                                                    at::IntArrayRef dilation, bool ceil_mode, at::Tensor& out,
                                                    at::Tensor& indices) {
  if (!max_pool(self, 2, kernel_size, stride, padding, dilation, ceil_mode, out, indices))
    return XHAL_FALLBACK(max_pool2d_with_indices_out, self, kernel_size, stride, padding, dilation, ceil_mode, out,
                         indices);
  return {out, indices};
}

std::tuple<at::Tensor&, at::Tensor&> max_pool3d_out(const at::Tensor& self, at::IntArrayRef kernel_size,
                                                    at::IntArrayRef stride, at::IntArrayRef padding,
                                                    at::IntArrayRef dilation, bool ceil_mode, at::Tensor& out,
                                                    at::Tensor& indices) {
  if (!max_pool(self, 3, kernel_size, stride, padding, dilation, ceil_mode, out, indices))
    return XHAL_FALLBACK(max_pool3d_with_indices_out, self, kernel_size, stride, padding, dilation, ceil_mode, out,
                         indices);
  return {out, indices};
}

// max_pool3d's functional forms are not built on its out= forms, as max_pool2d's are.
std::tuple<at::Tensor, at::Tensor> max_pool3d(const at::Tensor& self, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                                              at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
  at::Tensor out = at::empty({0}, self.options());
  at::Tensor indices = at::empty({0}, self.options().dtype(at::kLong));
  if (!max_pool(self, 3, kernel_size, stride, padding, dilation, ceil_mode, out, indices))
    return XHAL_FALLBACK(max_pool3d_with_indices, self, kernel_size, stride, padding, dilation, ceil_mode);
  return {out, indices};
}

at::Tensor max_pool3d_backward(const at::Tensor& grad_output, const at::Tensor& self, at::IntArrayRef kernel_size,
                               at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode,
                               const at::Tensor& indices) {
  at::Tensor grad_input = at::empty({0}, self.options());
  if (!max_pool_backward(grad_output, self, 3, kernel_size, stride, padding, dilation, indices, grad_input))
    return XHAL_FALLBACK(max_pool3d_with_indices_backward, grad_output, self, kernel_size, stride, padding, dilation,
                         ceil_mode, indices);
  return grad_input;
}

at::Tensor& max_pool2d_backward_out(const at::Tensor& grad_output, const at::Tensor& self, at::IntArrayRef kernel_size,
                                    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                                    bool ceil_mode, const at::Tensor& indices, at::Tensor& grad_input) {
  if (!max_pool_backward(grad_output, self, 2, kernel_size, stride, padding, dilation, indices, grad_input))
    return XHAL_FALLBACK(max_pool2d_with_indices_backward_grad_input, grad_output, self, kernel_size, stride, padding,
                         dilation, ceil_mode, indices, grad_input);
  return grad_input;
}

at::Tensor& max_pool3d_backward_out(const at::Tensor& grad_output, const at::Tensor& self, at::IntArrayRef kernel_size,
                                    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                                    bool ceil_mode, const at::Tensor& indices, at::Tensor& grad_input) {
  if (!max_pool_backward(grad_output, self, 3, kernel_size, stride, padding, dilation, indices, grad_input))
    return XHAL_FALLBACK(max_pool3d_with_indices_backward_grad_input, grad_output, self, kernel_size, stride, padding,
                         dilation, ceil_mode, indices, grad_input);
  return grad_input;
}

// Average pooling in `spatial` dimensions, forward or backward (`grad_output` defined).
bool avg_pool(const at::Tensor& self, const at::Tensor& grad_output, int64_t spatial, at::IntArrayRef kernel,
              at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
              std::optional<int64_t> divisor_override, at::Tensor& out) {
  if (!floating_on(self) || (grad_output.defined() && grad_output.scalar_type() != self.scalar_type())) return false;
  const at::Tensor meta =
      spatial == 2 ? at::avg_pool2d(meta_like(self), kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
                   : at::avg_pool3d(meta_like(self), kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
  at::Tensor result = at::empty(grad_output.defined() ? self.sizes() : meta.sizes(), self.options());
  Pooling q = geometry(self, meta, spatial, kernel, stride, padding, {});
  q.divisor = static_cast<int32_t>(divisor_override.value_or(0));
  if (grad_output.defined()) {
    run_pool("backward", Mode::Average, count_include_pad, q, fresh(grad_output), result, at::Tensor());
  } else {
    run_pool("forward", Mode::Average, count_include_pad, q, fresh(self), result, at::Tensor());
  }
  deliver(out, result);
  return true;
}

at::Tensor& avg_pool2d_out(const at::Tensor& self, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                           at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                           std::optional<int64_t> divisor_override, at::Tensor& out) {
  if (!avg_pool(self, at::Tensor(), 2, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, out))
    return XHAL_FALLBACK(avg_pool2d_out, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                         divisor_override, out);
  return out;
}

at::Tensor& avg_pool3d_out(const at::Tensor& self, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                           at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                           std::optional<int64_t> divisor_override, at::Tensor& out) {
  if (!avg_pool(self, at::Tensor(), 3, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, out))
    return XHAL_FALLBACK(avg_pool3d_out, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                         divisor_override, out);
  return out;
}

at::Tensor& avg_pool2d_backward_out(const at::Tensor& grad_output, const at::Tensor& self, at::IntArrayRef kernel_size,
                                    at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,
                                    bool count_include_pad, std::optional<int64_t> divisor_override,
                                    at::Tensor& grad_input) {
  if (!avg_pool(self, grad_output, 2, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
                grad_input))
    return XHAL_FALLBACK(avg_pool2d_backward_grad_input, grad_output, self, kernel_size, stride, padding, ceil_mode,
                         count_include_pad, divisor_override, grad_input);
  return grad_input;
}

at::Tensor& avg_pool3d_backward_out(const at::Tensor& grad_output, const at::Tensor& self, at::IntArrayRef kernel_size,
                                    at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,
                                    bool count_include_pad, std::optional<int64_t> divisor_override,
                                    at::Tensor& grad_input) {
  if (!avg_pool(self, grad_output, 3, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
                grad_input))
    return XHAL_FALLBACK(avg_pool3d_backward_grad_input, grad_output, self, kernel_size, stride, padding, ceil_mode,
                         count_include_pad, divisor_override, grad_input);
  return grad_input;
}

// --- Adaptive pooling ---------------------------------------------------------------------------

at::DimVector adaptive_shape(const at::Tensor& self, at::IntArrayRef output_size) {
  at::DimVector shape(self.sizes().begin(), self.sizes().end() - static_cast<int64_t>(output_size.size()));
  shape.append(output_size.begin(), output_size.end());
  return shape;
}

void check_adaptive(const at::Tensor& self, int64_t spatial, at::IntArrayRef output_size) {
  TORCH_CHECK(self.dim() == spatial + 1 || self.dim() == spatial + 2, "adaptive pooling in ", spatial,
              " dimensions: expected a ", spatial + 1, "D or ", spatial + 2, "D input, but got one of sizes ", self.sizes());
  TORCH_CHECK(static_cast<int64_t>(output_size.size()) == spatial, "adaptive pooling in ", spatial,
              " dimensions: output_size must have ", spatial, " elements, not ", output_size.size());
  for (int64_t d = self.dim() - spatial - 1; d < self.dim(); d++) {
    TORCH_CHECK(self.size(d) > 0, "adaptive pooling: expected input to have non-zero size for non-batch dimensions, "
                "but input has sizes ", self.sizes(), " with dimension ", d, " being empty");
  }
}

at::Tensor adaptive_avg_pool(const at::Tensor& self, at::IntArrayRef output_size, int64_t spatial) {
  check_adaptive(self, spatial, output_size);
  at::Tensor out = at::empty(adaptive_shape(self, output_size), self.options());
  Pooling q = geometry(self, out, spatial, {}, {}, {}, {});
  run_pool("forward", Mode::AdaptiveAverage, true, q, fresh(self), out, at::Tensor());
  return out;
}

at::Tensor adaptive_avg_pool2d(const at::Tensor& self, c10::SymIntArrayRef output_size) {
  if (!floating_on(self)) return XHAL_FALLBACK_SYMINT(_adaptive_avg_pool2d, self, output_size);
  return adaptive_avg_pool(self, C10_AS_INTARRAYREF_SLOW(output_size), 2);
}

at::Tensor adaptive_avg_pool3d(const at::Tensor& self, c10::SymIntArrayRef output_size) {
  if (!floating_on(self)) return XHAL_FALLBACK_SYMINT(_adaptive_avg_pool3d, self, output_size);
  return adaptive_avg_pool(self, C10_AS_INTARRAYREF_SLOW(output_size), 3);
}

at::Tensor adaptive_avg_pool_backward(const at::Tensor& grad_output, const at::Tensor& self, int64_t spatial) {
  at::Tensor grad_input = at::empty(self.sizes(), self.options());
  Pooling q = geometry(self, grad_output, spatial, {}, {}, {}, {});
  run_pool("backward", Mode::AdaptiveAverage, true, q, fresh(grad_output), grad_input, at::Tensor());
  return grad_input;
}

at::Tensor adaptive_avg_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& self) {
  if (!floating_on(self) || grad_output.scalar_type() != self.scalar_type())
    return XHAL_FALLBACK(_adaptive_avg_pool2d_backward, grad_output, self);
  return adaptive_avg_pool_backward(grad_output, self, 2);
}

at::Tensor adaptive_avg_pool3d_backward(const at::Tensor& grad_output, const at::Tensor& self) {
  if (!floating_on(self) || grad_output.scalar_type() != self.scalar_type())
    return XHAL_FALLBACK(_adaptive_avg_pool3d_backward, grad_output, self);
  return adaptive_avg_pool_backward(grad_output, self, 3);
}

bool adaptive_max_pool(const at::Tensor& self, at::IntArrayRef output_size, int64_t spatial, at::Tensor& out,
                       at::Tensor& indices) {
  if (!floating_on(self)) return false;
  check_adaptive(self, spatial, output_size);
  at::Tensor values = at::empty(adaptive_shape(self, output_size), self.options());
  at::Tensor where = at::empty(values.sizes(), self.options().dtype(at::kLong));
  Pooling q = geometry(self, values, spatial, {}, {}, {}, {});
  run_pool("forward", Mode::AdaptiveMax, true, q, fresh(self), values, where);
  deliver(out, values);
  deliver(indices, where);
  return true;
}

std::tuple<at::Tensor&, at::Tensor&> adaptive_max_pool2d_out(const at::Tensor& self, at::IntArrayRef output_size,
                                                             at::Tensor& out, at::Tensor& indices) {
  if (!adaptive_max_pool(self, output_size, 2, out, indices))
    return XHAL_FALLBACK(adaptive_max_pool2d_out, self, output_size, out, indices);
  return {out, indices};
}

std::tuple<at::Tensor&, at::Tensor&> adaptive_max_pool3d_out(const at::Tensor& self, at::IntArrayRef output_size,
                                                             at::Tensor& out, at::Tensor& indices) {
  if (!adaptive_max_pool(self, output_size, 3, out, indices))
    return XHAL_FALLBACK(adaptive_max_pool3d_out, self, output_size, out, indices);
  return {out, indices};
}

bool adaptive_max_pool_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& indices,
                                int64_t spatial, at::Tensor& grad_input) {
  if (!floating_on(self) || grad_output.scalar_type() != self.scalar_type() || indices.scalar_type() != at::kLong)
    return false;
  at::Tensor result = at::empty(self.sizes(), self.options());
  Pooling q = geometry(self, grad_output, spatial, {}, {}, {}, {});
  run_pool("backward", Mode::AdaptiveMax, true, q, fresh(grad_output), result, fresh(indices));
  deliver(grad_input, result);
  return true;
}

at::Tensor& adaptive_max_pool2d_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                             const at::Tensor& indices, at::Tensor& grad_input) {
  if (!adaptive_max_pool_backward(grad_output, self, indices, 2, grad_input))
    return XHAL_FALLBACK(adaptive_max_pool2d_backward_grad_input, grad_output, self, indices, grad_input);
  return grad_input;
}

at::Tensor& adaptive_max_pool3d_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                             const at::Tensor& indices, at::Tensor& grad_input) {
  if (!adaptive_max_pool_backward(grad_output, self, indices, 3, grad_input))
    return XHAL_FALLBACK(adaptive_max_pool3d_backward_grad_input, grad_output, self, indices, grad_input);
  return grad_input;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("max_pool2d_with_indices.out", max_pool2d_out);
  m.impl("max_pool3d_with_indices.out", max_pool3d_out);
  m.impl("max_pool2d_with_indices_backward.grad_input", max_pool2d_backward_out);
  m.impl("max_pool3d_with_indices_backward.grad_input", max_pool3d_backward_out);
  m.impl("max_pool3d_with_indices", max_pool3d);
  m.impl("max_pool3d_with_indices_backward", max_pool3d_backward);
  m.impl("avg_pool2d.out", avg_pool2d_out);
  m.impl("avg_pool3d.out", avg_pool3d_out);
  m.impl("avg_pool2d_backward.grad_input", avg_pool2d_backward_out);
  m.impl("avg_pool3d_backward.grad_input", avg_pool3d_backward_out);
  m.impl("_adaptive_avg_pool2d", adaptive_avg_pool2d);
  m.impl("_adaptive_avg_pool3d", adaptive_avg_pool3d);
  m.impl("_adaptive_avg_pool2d_backward", adaptive_avg_pool2d_backward);
  m.impl("_adaptive_avg_pool3d_backward", adaptive_avg_pool3d_backward);
  m.impl("adaptive_max_pool2d.out", adaptive_max_pool2d_out);
  m.impl("adaptive_max_pool3d.out", adaptive_max_pool3d_out);
  m.impl("adaptive_max_pool2d_backward.grad_input", adaptive_max_pool2d_backward_out);
  m.impl("adaptive_max_pool3d_backward.grad_input", adaptive_max_pool3d_backward_out);
}

}  // namespace xhal_torch
