// Losses of the `xhal` PyTorch device (kernels/loss.wgsl): the negative log-likelihood, so
// cross entropy, forward and backward.

#include <ATen/Operators.h>
#include <torch/library.h>

#include "ops.h"

namespace xhal_torch {
namespace {

// The immediate block of kernels/loss.wgsl (struct Loss).
struct LossLayout {
  uint32_t n = 0, classes = 0;
  int32_t ignore = -100;
  uint32_t pad = 0;
  uint32_t self_offset = 0, self_row = 0, self_column = 0, target_offset = 0;
  uint32_t weight_offset = 0, out_offset = 0, total_offset = 0, grad_offset = 0;
  uint32_t grad_stride = 0, pad0 = 0, pad1 = 0, pad2 = 0;
};
static_assert(sizeof(LossLayout) == 64, "the WGSL struct Loss is 64 bytes");

// The checks PyTorch's CPU makes, on the host before a kernel trusts the targets; false when a
// kernel cannot do it.
bool nll_checks(const at::Tensor& self, const at::Tensor& target, const at::Tensor& weight, int64_t ignore_index) {
  if (!floating_on(self) || target.scalar_type() != at::kLong || self.dim() < 1 || self.dim() > 2 ||
      target.device() != self.device())
    return false;
  if (weight.defined() && (weight.scalar_type() != self.scalar_type() || weight.device() != self.device() || weight.dim() != 1))
    return false;
  if (ignore_index < std::numeric_limits<int32_t>::min() || ignore_index > std::numeric_limits<int32_t>::max()) return false;
  const int64_t classes = self.size(-1);
  const at::Tensor t = target.to(at::kCPU);
  const at::Tensor bad = ((t < 0) | (t >= classes)) & (t != ignore_index);
  if (bad.any().item<bool>()) {
    TORCH_CHECK_INDEX(false, "Target ", t.masked_select(bad)[0].item<int64_t>(), " is out of bounds.");
  }
  return true;
}

const Kernel& loss_kernel(Device& dev, const char* entry, at::ScalarType dtype, bool has_weight, int64_t reduction) {
  const std::string key = std::string("loss|") + entry + wgsl_type(dtype) + (has_weight ? "w" : "") + std::to_string(reduction);
  return recipe_kernel(dev, key, [&] {
    KernelRecipe recipe;
    recipe.files = {"loss.wgsl"};
    recipe.types = {{"E", wgsl_type(dtype)}, {"F", wgsl_type(float_compute(dtype))}};
    recipe.overrides = {{"HAS_WEIGHT", has_weight ? 1.0 : 0.0}, {"REDUCTION", static_cast<double>(reduction)}};
    recipe.entry = entry;
    return recipe;
  });
}

at::Tensor weight_of(const std::optional<at::Tensor>& weight) {
  return weight.has_value() && weight->defined() ? weight->contiguous() : at::Tensor();
}

std::tuple<at::Tensor&, at::Tensor&> nll_loss_forward_out(const at::Tensor& self, const at::Tensor& target,
                                                          const std::optional<at::Tensor>& weight, int64_t reduction,
                                                          c10::SymInt ignore_index, at::Tensor& output,
                                                          at::Tensor& total_weight) {
  const int64_t ignore = ignore_index.expect_int();
  const at::Tensor w = weight_of(weight);
  if (!nll_checks(self, target, w, ignore))
    return XHAL_FALLBACK_SYMINT(nll_loss_forward_output, self, target, weight, reduction, ignore_index, output,
                                total_weight);
  const int64_t n = self.dim() == 2 ? self.size(0) : 1;
  const bool per_sample = reduction == at::Reduction::None && self.dim() == 2;
  prepare_out(output, per_sample ? at::IntArrayRef{n} : at::IntArrayRef{});
  prepare_out(total_weight, {});
  const at::ScalarType dtype = self.scalar_type();
  if (output.scalar_type() != dtype || total_weight.scalar_type() != dtype || !output.is_contiguous())
    return XHAL_FALLBACK_SYMINT(nll_loss_forward_output, self, target, weight, reduction, ignore_index, output,
                                total_weight);
  Device& dev = device(self.device().index());
  const at::Tensor t = target.contiguous();
  LossLayout q;
  q.n = static_cast<uint32_t>(n);
  q.classes = static_cast<uint32_t>(self.size(-1));
  q.ignore = static_cast<int32_t>(ignore);
  q.self_offset = element_offset(self);
  q.self_row = self.dim() == 2 ? static_cast<uint32_t>(self.stride(0)) : 0;
  q.self_column = static_cast<uint32_t>(self.stride(-1));
  q.target_offset = element_offset(t);
  q.out_offset = element_offset(output);
  q.total_offset = element_offset(total_weight);
  // kernels/loss.wgsl's bindings: target, weight, output, scores, total weight.
  Binding bindings[5] = {Binding{place_of(t).buffer}, Binding{dev.placeholder}, Binding{place_of(output).buffer},
                         Binding{place_of(self).buffer}, Binding{place_of(total_weight).buffer}};
  if (w.defined()) {
    q.weight_offset = element_offset(w);
    bindings[1] = Binding{place_of(w).buffer};
  }
  if (n == 0 || self.size(-1) == 0) {
    // No samples: PyTorch's CPU gives a loss of 0 summed, NaN averaged, and a total weight of 0.
    output.fill_(reduction == at::Reduction::Mean ? std::numeric_limits<double>::quiet_NaN() : 0.0);
    total_weight.zero_();
    return {output, total_weight};
  }
  const char* entry = per_sample ? "nll_none" : "nll_reduce";
  launch(dev, loss_kernel(dev, entry, dtype, w.defined(), per_sample ? 0 : reduction), bindings,
         per_sample ? static_cast<uint64_t>(n) : 256, &q, sizeof q);
  return {output, total_weight};
}

at::Tensor& nll_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                                  const std::optional<at::Tensor>& weight, int64_t reduction, c10::SymInt ignore_index,
                                  const at::Tensor& total_weight, at::Tensor& grad_input) {
  const int64_t ignore = ignore_index.expect_int();
  const at::Tensor w = weight_of(weight);
  const at::ScalarType dtype = self.scalar_type();
  auto fallback = [&]() -> at::Tensor& {
    return XHAL_FALLBACK_SYMINT(nll_loss_backward_grad_input, grad_output, self, target, weight, reduction, ignore_index,
                                total_weight, grad_input);
  };
  if (!nll_checks(self, target, w, ignore) || grad_output.scalar_type() != dtype || total_weight.scalar_type() != dtype)
    return fallback();
  prepare_out(grad_input, self.sizes());
  if (!grad_input.is_contiguous() || grad_input.scalar_type() != dtype) return fallback();
  if (grad_input.numel() == 0) return grad_input;
  Device& dev = device(self.device().index());
  const int64_t n = self.dim() == 2 ? self.size(0) : 1;
  const at::Tensor t = target.contiguous();
  LossLayout q;
  q.n = static_cast<uint32_t>(n);
  q.classes = static_cast<uint32_t>(self.size(-1));
  q.ignore = static_cast<int32_t>(ignore);
  q.target_offset = element_offset(t);
  q.out_offset = element_offset(grad_input);
  q.grad_offset = element_offset(grad_output);
  q.grad_stride = grad_output.dim() == 1 ? static_cast<uint32_t>(grad_output.stride(0)) : 0;
  q.total_offset = element_offset(total_weight);
  at::Tensor result = grad_input;
  if (place_of(result).buffer == place_of(grad_output).buffer || place_of(result).buffer == place_of(total_weight).buffer)
    result = at::empty(grad_input.sizes(), grad_input.options());
  q.out_offset = element_offset(result);
  // kernels/loss.wgsl's bindings: target, weight, grad_input, (scores and total weight: the
  // forward pass's), grad_output, total weight.
  Binding bindings[7] = {Binding{place_of(t).buffer}, Binding{dev.placeholder}, Binding{place_of(result).buffer},
                         Binding{dev.placeholder}, Binding{dev.placeholder},
                         Binding{place_of(grad_output).buffer}, Binding{place_of(total_weight).buffer}};
  if (w.defined()) {
    q.weight_offset = element_offset(w);
    bindings[1] = Binding{place_of(w).buffer};
  }
  // kernels/loss.wgsl's nll_backward: 64 classes a workgroup, a sample a row of workgroups.
  constexpr uint64_t kMostInY = 65535;
  const uint64_t samples = static_cast<uint64_t>(n);
  const uint64_t down = std::min(samples, kMostInY), deep = (samples + kMostInY - 1) / kMostInY;
  TORCH_CHECK(deep <= kMostInY, "xhal: nll_loss's backward pass got ", samples, " samples, more than one launch takes");
  launch_workgroups(dev, loss_kernel(dev, "nll_backward", dtype, w.defined(), reduction), bindings,
                    {static_cast<uint32_t>((q.classes + 63) / 64), static_cast<uint32_t>(down), static_cast<uint32_t>(deep)},
                    &q, sizeof q);
  if (!result.is_same(grad_input)) grad_input.copy_(result);
  return grad_input;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nll_loss_forward.output", nll_loss_forward_out);
  m.impl("nll_loss_backward.grad_input", nll_loss_backward_out);
}

}  // namespace xhal_torch
