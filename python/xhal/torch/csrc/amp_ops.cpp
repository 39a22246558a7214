// Mixed precision on the `xhal` PyTorch device: torch.autocast("xhal") with PyTorch's cast
// policies for CUDA, which the public autocast lists name (matrix products and convolutions in
// the lower precision, reductions, norms and losses in float32, mixed inputs promoted), and
// torch.amp.GradScaler's two kernels (kernels/amp.wgsl).

#include <ATen/Operators.h>
#include <ATen/autocast_mode.h>
#include <torch/library.h>

#include "ops.h"

namespace xhal_torch {
namespace {

using at::Tensor;

// The immediate block of kernels/amp.wgsl (struct Amp).
struct AmpLayout {
  uint32_t count = 0, grad_offset = 0, inv_offset = 0, found_offset = 0, scale_offset = 0, tracker_offset = 0;
  int32_t growth_interval = 0;
  float growth_factor = 0, backoff_factor = 0;
};
static_assert(sizeof(AmpLayout) == 36, "the WGSL struct Amp is 36 bytes");

const Kernel& amp_kernel(Device& dev, const char* entry, at::ScalarType element) {
  return recipe_kernel(dev, std::string("amp|") + entry + "|" + wgsl_type(element), [&] {
    KernelRecipe recipe;
    recipe.files = {"amp.wgsl"};
    recipe.types = {{"E", wgsl_type(element)}, {"F", "f32"}};
    recipe.entry = entry;
    return recipe;
  });
}

bool is_one_float(const Tensor& t) { return t.numel() == 1 && t.scalar_type() == at::kFloat; }

// Every gradient times inv_scale, and found_inf set to 1 when any element of any of them is not
// finite, as GradScaler.unscale_ needs: one launch per gradient.
void non_finite_check_and_unscale(at::TensorList grads, Tensor& found_inf, const Tensor& inv_scale) {
  TORCH_CHECK(is_one_float(inv_scale), "inv_scale must be a 1-element float tensor.");
  TORCH_CHECK(is_one_float(found_inf), "found_inf must be a 1-element float tensor.");
  TORCH_CHECK(inv_scale.device() == found_inf.device(), "inv_scale and found_inf must be on the same device, got ",
              inv_scale.device(), " and ", found_inf.device());
  for (const Tensor& grad : grads) {
    if (!grad.defined() || grad.numel() == 0) continue;
    TORCH_CHECK(grad.device() == found_inf.device(), "xhal: a gradient on ", grad.device(),
                " cannot be unscaled with found_inf on ", found_inf.device());
    TORCH_CHECK(at::isFloatingType(grad.scalar_type()), "xhal: gradients to unscale are floating tensors; got ",
                grad.scalar_type());
    const at::ScalarType dtype = grad.scalar_type();
    if (!grad.is_contiguous() || (dtype != at::kFloat && !(dtype == at::kHalf && on_device(grad, at::kHalf))) ||
        grad.numel() > std::numeric_limits<uint32_t>::max()) {
      // Strided, bfloat16 or float64 gradients: the same from the device's own operators.
      Tensor bad = grad.isfinite().logical_not().any().to(at::kFloat).reshape({1});
      found_inf.copy_(at::maximum(found_inf.reshape({1}), bad).reshape(found_inf.sizes()));
      const_cast<Tensor&>(grad).mul_(inv_scale.to(dtype));
      continue;
    }
    AmpLayout layout;
    layout.count = static_cast<uint32_t>(grad.numel());
    layout.grad_offset = element_offset(grad);
    layout.inv_offset = element_offset(inv_scale);
    layout.found_offset = element_offset(found_inf);
    Device& dev = device(grad.device().index());
    const Binding bindings[3] = {Binding{place_of(grad).buffer}, Binding{place_of(inv_scale).buffer},
                                 Binding{place_of(found_inf).buffer}};
    launch(dev, amp_kernel(dev, "unscale", dtype), bindings, layout.count, &layout, sizeof layout);
  }
}

Tensor& update_scale(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                     double backoff_factor, int64_t growth_interval) {
  TORCH_CHECK(is_one_float(scale), "current_scale must be a 1-element float tensor.");
  TORCH_CHECK(growth_tracker.numel() == 1 && growth_tracker.scalar_type() == at::kInt,
              "growth_tracker must be a 1-element int tensor.");
  TORCH_CHECK(is_one_float(found_inf), "found_inf must be a 1-element float tensor.");
  TORCH_CHECK(scale.device() == growth_tracker.device() && scale.device() == found_inf.device(),
              "xhal: the scale, growth tracker and found_inf must be on one device");
  AmpLayout layout;
  layout.scale_offset = element_offset(scale);
  layout.tracker_offset = element_offset(growth_tracker);
  layout.found_offset = element_offset(found_inf);
  layout.growth_interval = static_cast<int32_t>(growth_interval);
  layout.growth_factor = static_cast<float>(growth_factor);
  layout.backoff_factor = static_cast<float>(backoff_factor);
  Device& dev = device(scale.device().index());
  Binding bindings[6] = {Binding{dev.placeholder},          Binding{dev.placeholder},
                         Binding{dev.placeholder},          Binding{place_of(scale).buffer},
                         Binding{place_of(growth_tracker).buffer}, Binding{place_of(found_inf).buffer}};
  launch(dev, amp_kernel(dev, "update_scale", at::kFloat), bindings, 1, &layout, sizeof layout);
  return scale;
}

// binary_cross_entropy of float16 inputs loses what it computes: autocast refuses it, as on CUDA.
Tensor binary_cross_entropy_banned(const Tensor&, const Tensor&, const std::optional<Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast: the inputs may "
              "be float16. Use torch.nn.functional.binary_cross_entropy_with_logits or torch.nn.BCEWithLogitsLoss, "
              "which are safe to autocast, or compute the loss outside the autocast region.");
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_amp_foreach_non_finite_check_and_unscale_", non_finite_check_and_unscale);
  m.impl("_amp_update_scale_", update_scale);
}

// Operators autocast does not name run as they are.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

using namespace at;  // the autocast lists name operators as at:: functions

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define XHAL_AUTOCAST_LOWER_PRECISION(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define XHAL_AUTOCAST_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define XHAL_AUTOCAST_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define XHAL_AUTOCAST_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
#define XHAL_AUTOCAST_APPEND_DTYPE(REDISPATCH, NAME, SIGNATURE, REDISPATCH_SIGNATURE, POLICY) \
  KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE(REDISPATCH, NAME, SIGNATURE, REDISPATCH_SIGNATURE, POLICY)
  AT_FORALL_LOWER_PRECISION_FP(XHAL_AUTOCAST_LOWER_PRECISION)
  AT_FORALL_FP32(XHAL_AUTOCAST_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(XHAL_AUTOCAST_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(XHAL_AUTOCAST_APPEND_DTYPE)
  AT_FORALL_PROMOTE(XHAL_AUTOCAST_PROMOTE)
#undef XHAL_AUTOCAST_LOWER_PRECISION
#undef XHAL_AUTOCAST_FP32
#undef XHAL_AUTOCAST_FP32_SET_OPT_DTYPE
#undef XHAL_AUTOCAST_PROMOTE
#undef XHAL_AUTOCAST_APPEND_DTYPE
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"),
         TORCH_FN((&xhal_torch::binary_cross_entropy_banned)));
}

}  // namespace xhal_torch
