// Operators of the `xhal` PyTorch device built from its own kernels: statistics (var, std,
// norms), the common regression and binary losses, padding by reflection and replication,
// im2col and col2im (F.unfold and F.fold), gated and parametric activations, ranges, and a few
// reductions. Each runs on the device without a fallback; where PyTorch's CPU has a dedicated
// kernel, the composition computes the same formula.

#include <ATen/Operators.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "ops.h"

namespace xhal_torch {
namespace {

bool floating_native(const at::Tensor& t) { return floating_on(t); }

// The dimensions a reduction over `dims` covers (all of them for none), and how many
// elements each output reduces.
at::DimVector reduced_dims(const at::Tensor& self, at::OptionalIntArrayRef dims) {
  at::DimVector out;
  if (!dims.has_value() || dims->empty()) {
    for (int64_t d = 0; d < self.dim(); d++) out.push_back(d);
    return out;
  }
  const auto bits = at::dim_list_to_bitset(*dims, std::max<int64_t>(self.dim(), 1));
  for (int64_t d = 0; d < std::max<int64_t>(self.dim(), 1); d++) {
    if (bits[d]) out.push_back(d);
  }
  return out;
}

int64_t reduced_count(const at::Tensor& self, at::IntArrayRef dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= self.dim() == 0 ? 1 : self.size(d);
  return n;
}

// --- var, std and their means ---------------------------------------------------------------

// Variance over `dims` with Bessel's `correction`, as PyTorch's CPU computes it: from the
// deviations from the mean, divided by max(0, N - correction).
std::pair<at::Tensor, at::Tensor> var_and_mean(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                               const std::optional<at::Scalar>& correction, bool keepdim) {
  const at::DimVector dims = reduced_dims(self, dim);
  const double n = static_cast<double>(reduced_count(self, dims));
  const double c = correction.has_value() ? correction->toDouble() : 1.0;
  const at::Tensor mean = self.mean(dims, true);
  const at::Tensor deviation = self - mean;
  const at::Tensor var = (deviation * deviation).sum(dims, keepdim) / std::max(0.0, n - c);
  return {var, keepdim ? mean : mean.squeeze(dims)};
}

at::Tensor variance(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
               bool keepdim) {
  if (!floating_native(self)) return XHAL_FALLBACK(var_correction, self, dim, correction, keepdim);
  return var_and_mean(self, dim, correction, keepdim).first;
}

at::Tensor standard_deviation(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
                bool keepdim) {
  if (!floating_native(self)) return XHAL_FALLBACK(std_correction, self, dim, correction, keepdim);
  return var_and_mean(self, dim, correction, keepdim).first.sqrt();
}

at::Tensor& var_out(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
                    bool keepdim, at::Tensor& out) {
  if (!floating_native(self)) return XHAL_FALLBACK(var_correction_out, self, dim, correction, keepdim, out);
  const at::Tensor result = variance(self, dim, correction, keepdim);
  prepare_out(out, result.sizes());
  return out.copy_(result);
}

at::Tensor& std_out(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
                    bool keepdim, at::Tensor& out) {
  if (!floating_native(self)) return XHAL_FALLBACK(std_correction_out, self, dim, correction, keepdim, out);
  const at::Tensor result = standard_deviation(self, dim, correction, keepdim);
  prepare_out(out, result.sizes());
  return out.copy_(result);
}

std::tuple<at::Tensor, at::Tensor> var_mean(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                            const std::optional<at::Scalar>& correction, bool keepdim) {
  if (!floating_native(self)) return XHAL_FALLBACK(var_mean_correction, self, dim, correction, keepdim);
  auto [v, m] = var_and_mean(self, dim, correction, keepdim);
  return {v, m};
}

std::tuple<at::Tensor, at::Tensor> std_mean(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                            const std::optional<at::Scalar>& correction, bool keepdim) {
  if (!floating_native(self)) return XHAL_FALLBACK(std_mean_correction, self, dim, correction, keepdim);
  auto [v, m] = var_and_mean(self, dim, correction, keepdim);
  return {v.sqrt(), m};
}

// --- Norms -----------------------------------------------------------------------------------

at::Tensor& vector_norm_out(const at::Tensor& self, const at::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                            std::optional<at::ScalarType> dtype, at::Tensor& out) {
  if (!floating_native(self) || (dtype.has_value() && *dtype != self.scalar_type()))
    return XHAL_FALLBACK(linalg_vector_norm_out, self, ord, dim, keepdim, dtype, out);
  const at::DimVector dims = reduced_dims(self, dim);
  const double p = ord.toDouble();
  // float16 is summed in f32, as on the CPU: |x|^p overflows float16 long before the norm does.
  const at::Tensor magnitude = self.abs().to(float_compute(self.scalar_type()));
  at::Tensor result;
  if (std::isinf(p)) {
    TORCH_CHECK(self.numel() > 0 || !dims.empty(), "linalg.vector_norm cannot compute the ", p,
                " norm on an empty tensor because the operation does not have an identity");
    result = p > 0 ? magnitude.amax(dims, keepdim) : magnitude.amin(dims, keepdim);
  } else if (p == 0) {
    result = magnitude.ne(0).to(magnitude.scalar_type()).sum(dims, keepdim);
  } else if (p == 1) {
    result = magnitude.sum(dims, keepdim);
  } else if (p == 2) {
    result = (magnitude * magnitude).sum(dims, keepdim).sqrt();
  } else {
    result = magnitude.pow(p).sum(dims, keepdim).pow(1.0 / p);
  }
  result = result.to(self.scalar_type());
  prepare_out(out, result.sizes());
  return out.copy_(result);
}

// --- Losses ----------------------------------------------------------------------------------

at::Tensor reduce_loss(const at::Tensor& loss, int64_t reduction) {
  if (reduction == at::Reduction::Mean) return loss.mean();
  if (reduction == at::Reduction::Sum) return loss.sum();
  return loss;
}

// The gradient of a loss with `reduction` reaching each element.
at::Tensor loss_gradient(const at::Tensor& grad_output, const at::Tensor& self, int64_t reduction) {
  if (reduction == at::Reduction::Mean) return grad_output / static_cast<double>(std::max<int64_t>(self.numel(), 1));
  return grad_output;
}

bool loss_supported(const at::Tensor& self, const at::Tensor& target) {
  return floating_native(self) && target.device() == self.device() && target.scalar_type() == self.scalar_type();
}

at::Tensor& mse_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction, at::Tensor& out) {
  if (!loss_supported(self, target)) return XHAL_FALLBACK(mse_loss_out, self, target, reduction, out);
  const at::Tensor difference = self - target;
  const at::Tensor result = reduce_loss(difference * difference, reduction);
  prepare_out(out, result.sizes());
  return out.copy_(result);
}

at::Tensor mse_gradient(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                             int64_t reduction) {
  if (!loss_supported(self, target)) return XHAL_FALLBACK(mse_loss_backward, grad_output, self, target, reduction);
  return loss_gradient(grad_output, self, reduction) * 2 * (self - target);
}

at::Tensor& mse_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                                  int64_t reduction, at::Tensor& grad_input) {
  const at::Tensor result = mse_gradient(grad_output, self, target, reduction);
  prepare_out(grad_input, result.sizes());
  return grad_input.copy_(result);
}

// Huber: 0.5 d^2 where |d| < delta, delta (|d| - 0.5 delta) beyond.
at::Tensor& huber_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double delta,
                           at::Tensor& out) {
  if (!loss_supported(self, target)) return XHAL_FALLBACK(huber_loss_out, self, target, reduction, delta, out);
  const at::Tensor d = (self - target).abs();
  const at::Tensor loss = at::where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta));
  const at::Tensor result = reduce_loss(loss, reduction);
  prepare_out(out, result.sizes());
  return out.copy_(result);
}

at::Tensor huber(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double delta) {
  at::Tensor out = at::empty({0}, self.options());
  return huber_loss_out(self, target, reduction, delta, out);
}

at::Tensor& huber_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                                    int64_t reduction, double delta, at::Tensor& grad_input) {
  if (!loss_supported(self, target))
    return XHAL_FALLBACK(huber_loss_backward_out, grad_output, self, target, reduction, delta, grad_input);
  const at::Tensor d = self - target;
  const at::Tensor result = loss_gradient(grad_output, self, reduction) * d.clamp(-delta, delta);
  prepare_out(grad_input, result.sizes());
  return grad_input.copy_(result);
}

// Smooth L1: 0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta beyond (L1 for beta 0).
at::Tensor& smooth_l1_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double beta,
                               at::Tensor& out) {
  if (!loss_supported(self, target)) return XHAL_FALLBACK(smooth_l1_loss_out, self, target, reduction, beta, out);
  const at::Tensor d = (self - target).abs();
  const at::Tensor loss = beta == 0 ? d : at::where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta);
  const at::Tensor result = reduce_loss(loss, reduction);
  prepare_out(out, result.sizes());
  return out.copy_(result);
}

at::Tensor& smooth_l1_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                        const at::Tensor& target, int64_t reduction, double beta,
                                        at::Tensor& grad_input) {
  if (!loss_supported(self, target))
    return XHAL_FALLBACK(smooth_l1_loss_backward_grad_input, grad_output, self, target, reduction, beta, grad_input);
  const at::Tensor d = self - target;
  const at::Tensor slope = beta == 0 ? d.sign() : at::where(d.abs() < beta, d / beta, d.sign());
  const at::Tensor result = loss_gradient(grad_output, self, reduction) * slope;
  prepare_out(grad_input, result.sizes());
  return grad_input.copy_(result);
}

// Binary cross entropy, with PyTorch's clamp of each logarithm at -100.
at::Tensor binary_cross_entropy(const at::Tensor& self, const at::Tensor& target,
                                const std::optional<at::Tensor>& weight, int64_t reduction) {
  if (!loss_supported(self, target)) return XHAL_FALLBACK(binary_cross_entropy, self, target, weight, reduction);
  TORCH_CHECK(!self.numel() || (self.ge(0).all().item<bool>() && self.le(1).all().item<bool>()),
              "all elements of input should be between 0 and 1");
  at::Tensor loss = -(target * self.log().clamp_min(-100) + (1 - target) * (1 - self).log().clamp_min(-100));
  if (weight.has_value() && weight->defined()) loss = loss * *weight;
  return reduce_loss(loss, reduction);
}

at::Tensor binary_cross_entropy_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                         const at::Tensor& target, const std::optional<at::Tensor>& weight,
                                         int64_t reduction) {
  if (!loss_supported(self, target))
    return XHAL_FALLBACK(binary_cross_entropy_backward, grad_output, self, target, weight, reduction);
  // PyTorch's CPU bounds the denominator below by 1e-12.
  at::Tensor grad = loss_gradient(grad_output, self, reduction) * (self - target) / ((1 - self) * self).clamp_min(1e-12);
  if (weight.has_value() && weight->defined()) grad = grad * *weight;
  return grad;
}

// --- Gated and parametric activations -----------------------------------------------------------

at::Tensor& glu_out(const at::Tensor& self, int64_t dim, at::Tensor& out) {
  const int64_t d = c10::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(self.size(d) % 2 == 0, "Halving dimension must be even, but dimension ", d, " is size ", self.size(d));
  if (!floating_native(self)) return XHAL_FALLBACK(glu_out, self, dim, out);
  const auto halves = self.chunk(2, d);
  const at::Tensor result = halves[0] * halves[1].sigmoid();
  prepare_out(out, result.sizes());
  return out.copy_(result);
}

at::Tensor gated_gradient(const at::Tensor& grad_output, const at::Tensor& self, int64_t dim) {
  if (!floating_native(self)) return XHAL_FALLBACK(glu_backward, grad_output, self, dim);
  const int64_t d = c10::maybe_wrap_dim(dim, self.dim());
  const auto halves = self.chunk(2, d);
  const at::Tensor gate = halves[1].sigmoid();
  return at::cat({grad_output * gate, grad_output * halves[0] * gate * (1 - gate)}, d);
}

at::Tensor& glu_backward_out(const at::Tensor& grad_output, const at::Tensor& self, int64_t dim, at::Tensor& grad_input) {
  const at::Tensor result = gated_gradient(grad_output, self, dim);
  prepare_out(grad_input, result.sizes());
  return grad_input.copy_(result);
}

at::Tensor prelu_kernel(const at::Tensor& self, const at::Tensor& weight) {
  if (!floating_native(self) || weight.device() != self.device()) return XHAL_FALLBACK(_prelu_kernel, self, weight);
  return at::where(self > 0, self, weight * self);
}

std::tuple<at::Tensor, at::Tensor> prelu_kernel_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                                         const at::Tensor& weight) {
  if (!floating_native(self) || weight.device() != self.device())
    return XHAL_FALLBACK(_prelu_kernel_backward, grad_output, self, weight);
  const at::Tensor positive = self > 0;
  const at::Tensor grad_input = at::where(positive, grad_output, weight * grad_output);
  const at::Tensor grad_weight = at::where(positive, at::zeros({}, self.options()), self * grad_output);
  return {grad_input, grad_weight.sum_to_size(weight.sizes())};
}

// --- Padding by reflection and replication -------------------------------------------------------

// The source of each padded position along a dimension of `size`: mirrored at the edges
// (reflection, the edge itself not repeated) or clamped to them (replication).
at::Tensor pad_sources(int64_t size, int64_t before, int64_t after, bool reflect, const at::Tensor& like) {
  const at::Tensor positions = at::arange(-before, size + after, like.options().dtype(at::kLong));
  if (!reflect) return positions.clamp(0, size - 1);
  // Mirror about 0 and size - 1: |i|, then reflected down from size - 1.
  const at::Tensor folded = positions.abs();
  return (size - 1) - (folded - (size - 1)).abs();
}

void check_pad(const at::Tensor& self, at::IntArrayRef padding, bool reflect, int64_t spatial) {
  TORCH_CHECK(static_cast<int64_t>(padding.size()) == 2 * spatial, "padding size is expected to be ", 2 * spatial,
              ", but got: ", padding.size());
  TORCH_CHECK(self.dim() == spatial + 1 || self.dim() == spatial + 2, "Expected ", spatial + 1, "D or ", spatial + 2,
              "D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for input, but got: ",
              self.sizes());
  for (int64_t d = 0; d < spatial; d++) {
    const int64_t size = self.size(self.dim() - spatial + d);
    const int64_t before = padding[2 * (spatial - 1 - d)], after = padding[2 * (spatial - 1 - d) + 1];
    if (reflect) {
      TORCH_CHECK(before < size && after < size, "Argument #4: Padding size should be less than the corresponding "
                  "input dimension, but got: padding (", before, ", ", after, ") at dimension ", self.dim() - spatial + d,
                  " of input ", self.sizes());
    }
    TORCH_CHECK(size + before + after > 0, "input (", size, ") and padding (", before, ", ", after, ") give an empty output");
  }
}

// Pads the last `spatial` dimensions (padding as PyTorch orders it: last dimension first).
at::Tensor pad(const at::Tensor& self, at::IntArrayRef padding, bool reflect, int64_t spatial) {
  check_pad(self, padding, reflect, spatial);
  at::Tensor out = self;
  for (int64_t d = 0; d < spatial; d++) {
    const int64_t axis = self.dim() - spatial + d;
    const int64_t before = padding[2 * (spatial - 1 - d)], after = padding[2 * (spatial - 1 - d) + 1];
    // Negative padding crops.
    const at::Tensor sources = pad_sources(self.size(axis), before, after, reflect, self);
    out = at::index_select(out, axis, sources);
  }
  return out;
}

// The adjoint: each padded position's gradient goes back to its source.
at::Tensor pad_backward(const at::Tensor& grad_output, const at::Tensor& self, at::IntArrayRef padding, bool reflect,
                        int64_t spatial) {
  at::Tensor grad = grad_output;
  for (int64_t d = spatial - 1; d >= 0; d--) {
    const int64_t axis = self.dim() - spatial + d;
    const int64_t before = padding[2 * (spatial - 1 - d)], after = padding[2 * (spatial - 1 - d) + 1];
    const at::Tensor sources = pad_sources(self.size(axis), before, after, reflect, self);
    at::DimVector shape(grad.sizes());
    shape[axis] = self.size(axis);
    grad = at::zeros(shape, grad.options()).index_add(axis, sources, grad);
  }
  return grad;
}

#define XHAL_PAD(name, reflect, spatial)                                                                           \
  at::Tensor name##_padded(const at::Tensor& self, c10::SymIntArrayRef padding) {                                  \
    if (!on_device(self, self.scalar_type()) || self.scalar_type() == at::kBool)                                   \
      return XHAL_FALLBACK_SYMINT(name, self, padding);                                                            \
    return pad(self, C10_AS_INTARRAYREF_SLOW(padding), reflect, spatial);                                          \
  }                                                                                                                \
  at::Tensor& name##_out(const at::Tensor& self, c10::SymIntArrayRef padding, at::Tensor& out) {                  \
    const at::Tensor result = name##_padded(self, padding);                                                        \
    prepare_out(out, result.sizes());                                                                              \
    return out.copy_(result);                                                                                      \
  }                                                                                                                \
  at::Tensor name##_gradient(const at::Tensor& grad_output, const at::Tensor& self, c10::SymIntArrayRef padding) { \
    if (!floating_native(grad_output)) return XHAL_FALLBACK_SYMINT(name##_backward, grad_output, self, padding);   \
    return pad_backward(grad_output, self, C10_AS_INTARRAYREF_SLOW(padding), reflect, spatial);                    \
  }                                                                                                                \
  at::Tensor& name##_backward_out(const at::Tensor& grad_output, const at::Tensor& self,                           \
                                  c10::SymIntArrayRef padding, at::Tensor& grad_input) {                           \
    const at::Tensor result = name##_gradient(grad_output, self, padding);                                         \
    prepare_out(grad_input, result.sizes());                                                                       \
    return grad_input.copy_(result);                                                                               \
  }

XHAL_PAD(reflection_pad1d, true, 1)
XHAL_PAD(reflection_pad2d, true, 2)
XHAL_PAD(reflection_pad3d, true, 3)
XHAL_PAD(replication_pad1d, false, 1)
XHAL_PAD(replication_pad2d, false, 2)
XHAL_PAD(replication_pad3d, false, 3)

// --- im2col and col2im (F.unfold and F.fold) -------------------------------------------------------

// For each (kernel tap, output position) of a 2-dimensional sliding window over an [H, W]
// plane: the flat position it reads, or H W (a slot past the plane) where it reads padding.
at::Tensor window_sources(int64_t height, int64_t width, at::IntArrayRef kernel, at::IntArrayRef dilation,
                          at::IntArrayRef padding, at::IntArrayRef stride, int64_t& out_h, int64_t& out_w,
                          const at::Tensor& like) {
  out_h = (height + 2 * padding[0] - dilation[0] * (kernel[0] - 1) - 1) / stride[0] + 1;
  out_w = (width + 2 * padding[1] - dilation[1] * (kernel[1] - 1) - 1) / stride[1] + 1;
  TORCH_CHECK(out_h > 0 && out_w > 0, "Given input with spatial size (", height, ", ", width, "), kernel_size=", kernel,
              ", dilation=", dilation, ", padding=", padding, ", calculated shape of the array of sliding blocks as (",
              out_h, ", ", out_w, "), but its components must be at least one.");
  const auto options = like.options().dtype(at::kLong);
  const at::Tensor ki = at::arange(kernel[0], options).view({-1, 1, 1, 1});
  const at::Tensor kj = at::arange(kernel[1], options).view({1, -1, 1, 1});
  const at::Tensor oi = at::arange(out_h, options).view({1, 1, -1, 1});
  const at::Tensor oj = at::arange(out_w, options).view({1, 1, 1, -1});
  const at::Tensor row = oi * stride[0] - padding[0] + ki * dilation[0];
  const at::Tensor column = oj * stride[1] - padding[1] + kj * dilation[1];
  const at::Tensor inside = (row >= 0) & (row < height) & (column >= 0) & (column < width);
  return at::where(inside, row * width + column, at::full({}, height * width, options)).reshape({-1});
}

at::Tensor im2col(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef dilation, at::IntArrayRef padding,
                  at::IntArrayRef stride) {
  if (!on_device(self, self.scalar_type()) || self.scalar_type() == at::kBool || (self.dim() != 3 && self.dim() != 4))
    return XHAL_FALLBACK(im2col, self, kernel, dilation, padding, stride);
  const bool batched = self.dim() == 4;
  const at::Tensor input = batched ? self : self.unsqueeze(0);
  const int64_t n = input.size(0), c = input.size(1), h = input.size(2), w = input.size(3);
  int64_t out_h = 0, out_w = 0;
  const at::Tensor sources = window_sources(h, w, kernel, dilation, padding, stride, out_h, out_w, self);
  // One zero past each plane stands for the padding.
  const at::Tensor planes = at::cat({input.reshape({n, c, h * w}), at::zeros({n, c, 1}, input.options())}, 2);
  const at::Tensor columns = at::index_select(planes, 2, sources).view({n, c * kernel[0] * kernel[1], out_h * out_w});
  return batched ? columns : columns.squeeze(0);
}

at::Tensor col2im(const at::Tensor& self, c10::SymIntArrayRef output_size_, at::IntArrayRef kernel,
                  at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride) {
  const auto output_size = C10_AS_INTARRAYREF_SLOW(output_size_);
  if (!on_device(self, self.scalar_type()) || self.scalar_type() == at::kBool || (self.dim() != 2 && self.dim() != 3))
    return XHAL_FALLBACK_SYMINT(col2im, self, output_size_, kernel, dilation, padding, stride);
  const bool batched = self.dim() == 3;
  const at::Tensor columns = batched ? self : self.unsqueeze(0);
  const int64_t taps = kernel[0] * kernel[1];
  TORCH_CHECK(columns.size(1) % taps == 0, "Expected size of input's dimension 1 to be divisible by the product of "
              "kernel_size, but got input.size(1)=", columns.size(1), " and kernel_size=", kernel);
  const int64_t n = columns.size(0), c = columns.size(1) / taps, h = output_size[0], w = output_size[1];
  int64_t out_h = 0, out_w = 0;
  const at::Tensor sources = window_sources(h, w, kernel, dilation, padding, stride, out_h, out_w, self);
  TORCH_CHECK(columns.size(2) == out_h * out_w, "Given output_size=", output_size, ", kernel_size=", kernel,
              ", dilation=", dilation, ", padding=", padding, ", stride=", stride, ", expected size of input's "
              "dimension 2 to match the calculated number of sliding blocks ", out_h, " * ", out_w, " = ",
              out_h * out_w, ", but got input.size(2)=", columns.size(2), ".");
  // Each tap's value adds into the position it was read from; the padding's slot is dropped.
  const at::Tensor summed = at::zeros({n, c, h * w + 1}, self.options())
                                .index_add(2, sources, columns.reshape({n, c, taps * out_h * out_w}));
  const at::Tensor image = summed.narrow(2, 0, h * w).reshape({n, c, h, w});
  return batched ? image : image.squeeze(0);
}

// --- Ranges and small reductions -----------------------------------------------------------------

at::Tensor& linspace_out(const at::Scalar& start, const at::Scalar& end, int64_t steps, at::Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  prepare_out(out, {steps});
  if (steps == 0) return out;
  if (steps == 1) return out.fill_(start);
  const at::ScalarType dtype = out.scalar_type();
  const bool floating = is_floating(dtype);
  if ((!floating && dtype != at::kInt && dtype != at::kLong) || !on_device(out, dtype))
    return XHAL_FALLBACK(linspace_out, start, end, steps, out);
  // PyTorch's CPU steps in the output's type for floats and in double for integers.
  const at::ScalarType compute = floating ? float_compute(dtype) : (on_device(out, at::kDouble) ? at::kDouble : at::kFloat);
  double step = 0;
  if (compute == at::kFloat) {
    step = static_cast<double>((static_cast<float>(end.toDouble()) - static_cast<float>(start.toDouble())) /
                               static_cast<float>(steps - 1));
  } else {
    step = (end.toDouble() - start.toDouble()) / static_cast<double>(steps - 1);
  }
  at::Tensor values = floating ? out : at::empty({steps}, out.options().dtype(compute));
  Computation how{.compute = compute, .a = start, .b = end, .c = step,
                  .words = {static_cast<uint32_t>(steps), 0}, .uses_index = true};
  if (!elementwise(values, {}, {kFloatOps, "OP_LINSPACE"}, how)) return XHAL_FALLBACK(linspace_out, start, end, steps, out);
  if (!values.is_same(out)) out.copy_(values);
  return out;
}

at::Tensor& logspace_out(const at::Scalar& start, const at::Scalar& end, int64_t steps, double base, at::Tensor& out) {
  if (!is_floating(out.scalar_type())) return XHAL_FALLBACK(logspace_out, start, end, steps, base, out);
  at::Tensor exponents = at::empty({steps}, out.options());
  linspace_out(start, end, steps, exponents);
  prepare_out(out, {steps});
  return at::pow_out(out, base, exponents);
}

bool equal(const at::Tensor& self, const at::Tensor& other) {
  if (self.sizes() != other.sizes() || self.scalar_type() != other.scalar_type()) return false;
  if (self.numel() == 0) return true;
  return at::eq(self, other).all().item<bool>();
}

at::Tensor& eye_out(c10::SymInt n_, c10::SymInt m_, at::Tensor& out) {
  const int64_t n = n_.expect_int(), m = m_.expect_int();
  TORCH_CHECK(n >= 0 && m >= 0, "n and m must be greater or equal to 0, got ", n, " and ", m);
  prepare_out(out, {n, m});
  if (out.numel() == 0) return out;
  const auto positions = out.options().dtype(at::kLong);
  return out.copy_(at::arange(n, positions).unsqueeze(1) == at::arange(m, positions));
}

at::Tensor trace(const at::Tensor& self) {
  TORCH_CHECK(self.dim() == 2, "trace: expected a matrix, but got tensor with dim ", self.dim());
  if (!on_device(self, self.scalar_type()) || self.scalar_type() == at::kBool) return XHAL_FALLBACK(trace, self);
  return self.diagonal().sum();
}

at::Tensor& nansum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                       std::optional<at::ScalarType> dtype, at::Tensor& out) {
  const at::Tensor zeroed = at::isFloatingType(self.scalar_type()) ? at::where(self.isnan(), at::zeros({}, self.options()), self) : self;
  return at::sum_out(out, zeroed, dim, keepdim, dtype);
}

at::Tensor nansum(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<at::ScalarType> dtype) {
  at::Tensor out = at::empty({0}, self.options().dtype(dtype.value_or(
                                     at::isIntegralType(self.scalar_type(), true) ? at::kLong : self.scalar_type())));
  return nansum_out(self, dim, keepdim, dtype, out);
}

std::tuple<at::Tensor&, at::Tensor&> aminmax_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                                                 at::Tensor& min, at::Tensor& max) {
  if (dim.has_value()) {
    at::amin_out(min, self, *dim, keepdim);
    at::amax_out(max, self, *dim, keepdim);
  } else {
    TORCH_CHECK(self.numel() > 0, "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity.");
    const at::Tensor flat = keepdim ? self : self.reshape({-1});
    const at::DimVector all = reduced_dims(flat, std::nullopt);
    at::amin_out(min, flat, all, keepdim);
    at::amax_out(max, flat, all, keepdim);
  }
  return {min, max};
}

at::Tensor count_nonzero(const at::Tensor& self, at::IntArrayRef dims) {
  return self.ne(0).sum(dims.empty() ? at::OptionalIntArrayRef() : at::OptionalIntArrayRef(dims), false, at::kLong);
}

at::Tensor rsub(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  return at::sub(other, self, alpha);
}

at::Tensor floor_divide(const at::Tensor& self, const at::Tensor& other) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::result_type(self, other)));
  return at::floor_divide_out(out, self, other);
}

at::Tensor logit(const at::Tensor& self, std::optional<double> eps) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::isFloatingType(self.scalar_type()) ? self.scalar_type() : at::kFloat));
  return at::logit_out(out, self, eps);
}

at::Tensor& addbmm_out(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                       const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  // float16 and bfloat16 sum the products in f32 and round once, as the CPU does.
  const at::ScalarType dtype = out.scalar_type();
  // Complex factors (alpha = 2+3j) have no meaning for the real compute types below.
  if (at::isComplexType(dtype) || beta.isComplex() || alpha.isComplex())
    return XHAL_FALLBACK(addbmm_out, self, batch1, batch2, beta, alpha, out);
  const at::ScalarType compute = at::isReducedFloatingType(dtype) ? at::kFloat : dtype;
  const at::Tensor products = at::bmm(batch1.to(compute), batch2.to(compute)).sum(0);
  // Integer tensors take the factors as integers (0.6 is 0), as PyTorch's kernels do, rather
  // than promoting to float.
  const bool integral = at::isIntegralType(dtype, true);
  const at::Scalar b = integral ? at::Scalar(beta.toLong()) : beta;
  const at::Scalar a = integral ? at::Scalar(alpha.toLong()) : alpha;
  const at::Tensor result = (b.toDouble() == 0 ? products * a : self.to(compute) * b + products * a).to(dtype);
  prepare_out(out, result.sizes());
  return out.copy_(result.expand(out.sizes()));
}

// beta self + alpha (vec1 outer vec2), rounded once: as one kernel on the CPU, and not as
// PyTorch's decomposition, which rounds a float16 or bfloat16 result after each step.
at::Tensor& addr_out(const at::Tensor& self, const at::Tensor& vec1, const at::Tensor& vec2, const at::Scalar& beta,
                     const at::Scalar& alpha, at::Tensor& out) {
  const at::ScalarType dtype = out.scalar_type();
  if (!at::isFloatingType(dtype) || vec1.dim() != 1 || vec2.dim() != 1)
    return XHAL_FALLBACK(addr_out, self, vec1, vec2, beta, alpha, out);
  const at::ScalarType compute = at::isReducedFloatingType(dtype) ? at::kFloat : dtype;
  const at::Tensor products = at::outer(vec1.to(compute), vec2.to(compute)) * alpha;
  // beta 0 ignores self, NaN and infinities included, as PyTorch documents.
  const at::Tensor result = beta.toDouble() == 0 ? products : self.to(compute) * beta + products;
  prepare_out(out, {vec1.size(0), vec2.size(0)});
  return out.copy_(result.to(dtype).expand(out.sizes()));
}

at::Tensor addr(const at::Tensor& self, const at::Tensor& vec1, const at::Tensor& vec2, const at::Scalar& beta,
                const at::Scalar& alpha) {
  const at::ScalarType dtype = at::promote_types(at::result_type(self, vec1), vec2.scalar_type());
  at::Tensor out = at::empty({0}, self.options().dtype(dtype));
  return addr_out(self, vec1, vec2, beta, alpha, out);
}

at::Tensor addbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2, const at::Scalar& beta,
                  const at::Scalar& alpha) {
  at::Tensor out = at::empty({0}, self.options());
  return addbmm_out(self, batch1, batch2, beta, alpha, out);
}

// The elements of `self` at k-th smallest place along `dim`, with their indices.
std::tuple<at::Tensor&, at::Tensor&> kthvalue_out(const at::Tensor& self, c10::SymInt k_, int64_t dim, bool keepdim,
                                                  at::Tensor& values, at::Tensor& indices) {
  const int64_t k = k_.expect_int();
  const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  const int64_t size = self.dim() == 0 ? 1 : self.size(d);
  TORCH_CHECK(k >= 1 && k <= size, "kthvalue(): selected number k out of range for dimension ", d);
  const auto sorted = self.dim() == 0 ? std::make_tuple(self, at::zeros({}, self.options().dtype(at::kLong)))
                                      : at::sort(self, /*stable=*/true, d, false);
  at::Tensor v = std::get<0>(sorted), i = std::get<1>(sorted);
  if (self.dim() > 0) {
    v = v.narrow(d, k - 1, 1);
    i = i.narrow(d, k - 1, 1);
    if (!keepdim) {
      v = v.squeeze(d);
      i = i.squeeze(d);
    }
  }
  prepare_out(values, v.sizes());
  prepare_out(indices, i.sizes());
  values.copy_(v);
  indices.copy_(i);
  return {values, indices};
}

// The lower median, as PyTorch takes it; a NaN makes it NaN (sorted last, so median of the
// NaN-free values is not what PyTorch gives: it returns the NaN).
std::tuple<at::Tensor&, at::Tensor&> median_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& values,
                                                at::Tensor& indices) {
  const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  const int64_t size = self.dim() == 0 ? 1 : self.size(d);
  TORCH_CHECK(size > 0, "median() cannot compute median for a dimension of size 0 because the operation does not have "
              "an identity");
  if (is_floating(self.scalar_type()) && self.isnan().any().item<bool>())
    return XHAL_FALLBACK(median_dim_values, self, dim, keepdim, values, indices);
  return kthvalue_out(self, (size - 1) / 2 + 1, dim, keepdim, values, indices);
}

at::Tensor median(const at::Tensor& self) {
  TORCH_CHECK(self.numel() > 0, "median() input tensor cannot be empty");
  at::Tensor values = at::empty({0}, self.options()), indices = at::empty({0}, self.options().dtype(at::kLong));
  median_out(self.reshape({-1}), 0, false, values, indices);
  return values;
}

// --- Batch norm's newer entries -----------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> batch_norm_with_update(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    at::Tensor& running_mean, at::Tensor& running_var, double momentum, double eps) {
  auto [out, mean, invstd] = at::_native_batch_norm_legit(input, weight, bias, running_mean, running_var, true,
                                                          momentum, eps);
  return {out, mean, invstd, at::empty({0}, input.options().dtype(at::kByte))};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_var, bool update, double eps,
    std::array<bool, 3> output_mask, const at::Tensor& reserve) {
  return at::native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_var, update,
                                        eps, output_mask);
}

// --- Cross products and unfold's gradient ---------------------------------------------------------

at::Tensor& cross_out(const at::Tensor& self, const at::Tensor& other, int64_t dim, at::Tensor& out) {
  const auto shape = at::infer_size_dimvector(self.sizes(), other.sizes());
  const int64_t d = c10::maybe_wrap_dim(dim, static_cast<int64_t>(shape.size()));
  TORCH_CHECK(self.size(d) == 3 && other.size(d) == 3, "linalg.cross: inputs dimension ", dim, " must have length 3. "
              "Got ", self.size(d), " and ", other.size(d));
  if (!on_device(self, self.scalar_type()) || self.scalar_type() == at::kBool)
    return XHAL_FALLBACK(linalg_cross_out, self, other, dim, out);
  const at::Tensor a = self.expand(shape), b = other.expand(shape);
  auto part = [&](const at::Tensor& t, int64_t i) { return t.narrow(d, i, 1); };
  const at::Tensor result = at::cat({part(a, 1) * part(b, 2) - part(a, 2) * part(b, 1),
                                     part(a, 2) * part(b, 0) - part(a, 0) * part(b, 2),
                                     part(a, 0) * part(b, 1) - part(a, 1) * part(b, 0)}, d);
  prepare_out(out, result.sizes());
  return out.copy_(result);
}

// Tensor.unfold's gradient: window j's element k adds into position j * step + k.
at::Tensor unfold_backward(const at::Tensor& grad_in, c10::SymIntArrayRef input_sizes_, int64_t dim, int64_t size,
                           int64_t step) {
  const auto input_sizes = C10_AS_INTARRAYREF_SLOW(input_sizes_);
  if (!floating_native(grad_in)) return XHAL_FALLBACK_SYMINT(unfold_backward, grad_in, input_sizes_, dim, size, step);
  // A 0-dim tensor unfolds into its one element.
  if (input_sizes.empty()) return grad_in.sum();
  const int64_t d = c10::maybe_wrap_dim(dim, static_cast<int64_t>(input_sizes.size()));
  at::Tensor grad_input = at::zeros(input_sizes, grad_in.options());
  if (grad_in.numel() == 0) return grad_input;
  const int64_t windows = grad_in.size(d);
  const auto positions = grad_in.options().dtype(at::kLong);
  const at::Tensor sources = (at::arange(windows, positions).unsqueeze(1) * step + at::arange(size, positions)).reshape({-1});
  // [.., windows, .., size] -> [.., windows * size, ..] along d.
  const at::Tensor moved = grad_in.movedim(-1, d + 1).flatten(d, d + 1);
  return grad_input.index_add(d, sources, moved);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("var.correction", variance);
  m.impl("std.correction", standard_deviation);
  m.impl("var.correction_out", var_out);
  m.impl("std.correction_out", std_out);
  m.impl("var_mean.correction", var_mean);
  m.impl("std_mean.correction", std_mean);
  m.impl("linalg_vector_norm.out", vector_norm_out);
  m.impl("mse_loss.out", mse_loss_out);
  m.impl("mse_loss_backward", mse_gradient);
  m.impl("mse_loss_backward.grad_input", mse_loss_backward_out);
  m.impl("huber_loss", huber);
  m.impl("huber_loss.out", huber_loss_out);
  m.impl("huber_loss_backward.out", huber_loss_backward_out);
  m.impl("smooth_l1_loss.out", smooth_l1_loss_out);
  m.impl("smooth_l1_loss_backward.grad_input", smooth_l1_loss_backward_out);
  m.impl("binary_cross_entropy", binary_cross_entropy);
  m.impl("binary_cross_entropy_backward", binary_cross_entropy_backward);
  m.impl("glu.out", glu_out);
  m.impl("glu_backward", gated_gradient);
  m.impl("glu_backward.grad_input", glu_backward_out);
  m.impl("_prelu_kernel", prelu_kernel);
  m.impl("_prelu_kernel_backward", prelu_kernel_backward);
  m.impl("reflection_pad1d", reflection_pad1d_padded);
  m.impl("reflection_pad1d.out", reflection_pad1d_out);
  m.impl("reflection_pad1d_backward", reflection_pad1d_gradient);
  m.impl("reflection_pad1d_backward.grad_input", reflection_pad1d_backward_out);
  m.impl("reflection_pad2d", reflection_pad2d_padded);
  m.impl("reflection_pad2d.out", reflection_pad2d_out);
  m.impl("reflection_pad2d_backward", reflection_pad2d_gradient);
  m.impl("reflection_pad2d_backward.grad_input", reflection_pad2d_backward_out);
  m.impl("reflection_pad3d", reflection_pad3d_padded);
  m.impl("reflection_pad3d.out", reflection_pad3d_out);
  m.impl("reflection_pad3d_backward", reflection_pad3d_gradient);
  m.impl("reflection_pad3d_backward.grad_input", reflection_pad3d_backward_out);
  m.impl("replication_pad1d", replication_pad1d_padded);
  m.impl("replication_pad1d.out", replication_pad1d_out);
  m.impl("replication_pad1d_backward", replication_pad1d_gradient);
  m.impl("replication_pad1d_backward.grad_input", replication_pad1d_backward_out);
  m.impl("replication_pad2d", replication_pad2d_padded);
  m.impl("replication_pad2d.out", replication_pad2d_out);
  m.impl("replication_pad2d_backward", replication_pad2d_gradient);
  m.impl("replication_pad2d_backward.grad_input", replication_pad2d_backward_out);
  m.impl("replication_pad3d", replication_pad3d_padded);
  m.impl("replication_pad3d.out", replication_pad3d_out);
  m.impl("replication_pad3d_backward", replication_pad3d_gradient);
  m.impl("replication_pad3d_backward.grad_input", replication_pad3d_backward_out);
  m.impl("im2col", im2col);
  m.impl("col2im", col2im);
  m.impl("linspace.out", linspace_out);
  m.impl("logspace.out", logspace_out);
  m.impl("equal", equal);
  m.impl("eye.m_out", eye_out);
  m.impl("trace", trace);
  m.impl("nansum", nansum);
  m.impl("nansum.out", nansum_out);
  m.impl("aminmax.out", aminmax_out);
  m.impl("count_nonzero.dim_IntList", count_nonzero);
  m.impl("rsub.Tensor", rsub);
  m.impl("floor_divide", floor_divide);
  m.impl("logit", logit);
  m.impl("addbmm", addbmm);
  m.impl("addr", addr);
  m.impl("addr.out", addr_out);
  m.impl("addbmm.out", addbmm_out);
  m.impl("kthvalue.values", kthvalue_out);
  m.impl("median.dim_values", median_out);
  m.impl("median", median);
  m.impl("_batch_norm_with_update", batch_norm_with_update);
  m.impl("batch_norm_backward", batch_norm_backward);
  m.impl("linalg_cross.out", cross_out);
  m.impl("unfold_backward", unfold_backward);
}

}  // namespace xhal_torch
