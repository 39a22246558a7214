// Upsampling of the `xhal` PyTorch device (kernels/upsample.wgsl): nearest and nearest-exact
// in 1, 2 and 3 dimensions, linear, bilinear and trilinear with or without aligned corners,
// forward and backward (so nn.Upsample and F.interpolate in these modes).

#include <ATen/Operators.h>
#include <torch/library.h>

#include "ops.h"

namespace xhal_torch {
namespace {

template <typename T>
struct ResizeLayout {
  uint32_t planes = 0, pad0 = 0, pad1 = 0, pad2 = 0;
  uint32_t in_size[4] = {1, 1, 1, 0};
  uint32_t out_size[4] = {1, 1, 1, 0};
  // A vec4<F> aligns to four of its elements: 16 bytes for f32, 32 for f64 (then 16 bytes of
  // padding come before it).
  alignas(4 * sizeof(T)) T scale[4] = {0, 0, 0, 0};
};
static_assert(sizeof(ResizeLayout<float>) == 64 && sizeof(ResizeLayout<double>) == 96,
              "the WGSL struct Resize is 64 bytes with f32 and 96 with f64");

enum class Mode { Nearest, NearestExact, Linear };

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::Nearest:
      return "MODE_NEAREST";
    case Mode::NearestExact:
      return "MODE_NEAREST_EXACT";
    default:
      return "MODE_LINEAR";
  }
}

at::Tensor fresh(const at::Tensor& t) {
  if (t.is_contiguous() && place_of(t).offset == 0) return t;
  return t.clone(at::MemoryFormat::Contiguous);
}

// PyTorch's scale along one dimension: input per output, from the given scale factor where
// there is one; with aligned corners, (in - 1) / (out - 1).
double scale_of(Mode mode, bool align_corners, int64_t in, int64_t out, std::optional<double> given) {
  if (mode == Mode::Linear && align_corners) return out > 1 ? static_cast<double>(in - 1) / (out - 1) : 0.0;
  if (given.has_value() && *given > 0) return 1.0 / *given;
  return static_cast<double>(in) / out;
}

template <typename T>
void fill_layout(ResizeLayout<T>& q, Mode mode, bool align_corners, at::IntArrayRef in, at::IntArrayRef out,
                 at::ArrayRef<std::optional<double>> scales) {
  const int64_t spatial = static_cast<int64_t>(out.size());
  q.planes = static_cast<uint32_t>(c10::multiply_integers(in.slice(0, in.size() - spatial)));
  for (int64_t d = 0; d < spatial; d++) {
    const int64_t slot = 3 - spatial + d;
    const int64_t i = in[in.size() - spatial + d];
    q.in_size[slot] = static_cast<uint32_t>(i);
    q.out_size[slot] = static_cast<uint32_t>(out[d]);
    q.scale[slot] = static_cast<T>(scale_of(mode, align_corners, i, out[d], scales[d]));
  }
}

// Resizes `source` (forward: the input; backward: the output's gradient) into `result`.
void run_resize(const char* entry, Mode mode, bool align_corners, const at::Tensor& source, at::Tensor& result,
                at::IntArrayRef in_sizes, at::IntArrayRef out_size, at::ArrayRef<std::optional<double>> scales) {
  if (result.numel() == 0 || source.numel() == 0) {
    result.zero_();
    return;
  }
  Device& dev = device(result.device().index());
  const at::ScalarType dtype = result.scalar_type();
  const bool wide = dtype == at::kDouble;
  ResizeLayout<float> narrow_layout;
  ResizeLayout<double> wide_layout;
  const void* layout = nullptr;
  size_t layout_size = 0;
  if (wide) {
    fill_layout(wide_layout, mode, align_corners, in_sizes, out_size, scales);
    layout = &wide_layout;
    layout_size = sizeof wide_layout;
  } else {
    fill_layout(narrow_layout, mode, align_corners, in_sizes, out_size, scales);
    layout = &narrow_layout;
    layout_size = sizeof narrow_layout;
  }
  const Binding bindings[3] = {Binding{nullptr, 0, layout_size, layout}, Binding{place_of(source).buffer},
                               Binding{place_of(result).buffer}};
  const std::string key = std::string("upsample|") + entry + mode_name(mode) + wgsl_type(dtype) + (align_corners ? "a" : "");
  const Kernel& compiled = recipe_kernel(dev, key, [&] {
    KernelRecipe recipe;
    recipe.files = {"upsample.wgsl"};
    recipe.types = {{"E", wgsl_type(dtype)}, {"F", wgsl_type(float_compute(dtype))}};
    recipe.overrides = {{"MODE", kernel_constant("upsample.wgsl", mode_name(mode))},
                        {"ALIGN_CORNERS", align_corners ? 1.0 : 0.0}};
    recipe.entry = entry;
    return recipe;
  });
  launch(dev, compiled, bindings, result.numel());
}

bool upsample(const at::Tensor& self, at::IntArrayRef output_size, Mode mode, bool align_corners,
              at::ArrayRef<std::optional<double>> scales, at::Tensor& out) {
  if (!floating_on(self) || self.dim() != static_cast<int64_t>(output_size.size()) + 2) return false;
  at::DimVector shape(self.sizes().begin(), self.sizes().begin() + 2);
  shape.append(output_size.begin(), output_size.end());
  for (int64_t s : output_size) TORCH_CHECK(s > 0, "Input and output sizes should be greater than 0, but got output_size ", output_size);
  at::Tensor result = at::empty(shape, self.options());
  run_resize("forward", mode, align_corners, fresh(self), result, self.sizes(), output_size, scales);
  prepare_out(out, shape);
  if (!result.is_same(out)) out.copy_(result);
  return true;
}

bool upsample_backward(const at::Tensor& grad_output, at::IntArrayRef output_size, at::IntArrayRef input_size,
                       Mode mode, bool align_corners, at::ArrayRef<std::optional<double>> scales, at::Tensor& grad_input) {
  if (!floating_on(grad_output) || static_cast<int64_t>(input_size.size()) != grad_output.dim()) return false;
  at::Tensor result = at::empty(input_size, grad_output.options());
  run_resize("backward", mode, align_corners, fresh(grad_output), result, input_size, output_size, scales);
  prepare_out(grad_input, input_size);
  if (!result.is_same(grad_input)) grad_input.copy_(result);
  return true;
}

#define XHAL_NEAREST(name, mode, dims, ...)                                                                        \
  at::Tensor& name##_out(const at::Tensor& self, c10::SymIntArrayRef output_size, XHAL_SCALES_##dims,           \
                         at::Tensor& out) {                                                                      \
    if (!upsample(self, C10_AS_INTARRAYREF_SLOW(output_size), mode, false, {__VA_ARGS__}, out))                  \
      return XHAL_FALLBACK_SYMINT(name##_out, self, output_size, __VA_ARGS__, out);                              \
    return out;                                                                                                  \
  }                                                                                                              \
  at::Tensor& name##_backward_out(const at::Tensor& grad_output, c10::SymIntArrayRef output_size,               \
                                  c10::SymIntArrayRef input_size, XHAL_SCALES_##dims, at::Tensor& grad_input) {  \
    if (!upsample_backward(grad_output, C10_AS_INTARRAYREF_SLOW(output_size), C10_AS_INTARRAYREF_SLOW(input_size), \
                           mode, false, {__VA_ARGS__}, grad_input))                                              \
      return XHAL_FALLBACK_SYMINT(name##_backward_grad_input, grad_output, output_size, input_size, __VA_ARGS__,  \
                                  grad_input);                                                                   \
    return grad_input;                                                                                           \
  }

#define XHAL_LINEAR(name, dims, ...)                                                                               \
  at::Tensor& name##_out(const at::Tensor& self, c10::SymIntArrayRef output_size, bool align_corners,            \
                         XHAL_SCALES_##dims, at::Tensor& out) {                                                  \
    if (!upsample(self, C10_AS_INTARRAYREF_SLOW(output_size), Mode::Linear, align_corners, {__VA_ARGS__}, out))   \
      return XHAL_FALLBACK_SYMINT(name##_out, self, output_size, align_corners, __VA_ARGS__, out);               \
    return out;                                                                                                  \
  }                                                                                                              \
  at::Tensor& name##_backward_out(const at::Tensor& grad_output, c10::SymIntArrayRef output_size,               \
                                  c10::SymIntArrayRef input_size, bool align_corners, XHAL_SCALES_##dims,        \
                                  at::Tensor& grad_input) {                                                      \
    if (!upsample_backward(grad_output, C10_AS_INTARRAYREF_SLOW(output_size), C10_AS_INTARRAYREF_SLOW(input_size), \
                           Mode::Linear, align_corners, {__VA_ARGS__}, grad_input))                              \
      return XHAL_FALLBACK_SYMINT(name##_backward_grad_input, grad_output, output_size, input_size, align_corners, \
                                  __VA_ARGS__, grad_input);                                                      \
    return grad_input;                                                                                           \
  }

#define XHAL_SCALES_1 std::optional<double> scales
#define XHAL_SCALES_2 std::optional<double> scales_h, std::optional<double> scales_w
#define XHAL_SCALES_3 std::optional<double> scales_d, std::optional<double> scales_h, std::optional<double> scales_w

XHAL_NEAREST(upsample_nearest1d, Mode::Nearest, 1, scales)
XHAL_NEAREST(upsample_nearest2d, Mode::Nearest, 2, scales_h, scales_w)
XHAL_NEAREST(upsample_nearest3d, Mode::Nearest, 3, scales_d, scales_h, scales_w)
XHAL_NEAREST(_upsample_nearest_exact1d, Mode::NearestExact, 1, scales)
XHAL_NEAREST(_upsample_nearest_exact2d, Mode::NearestExact, 2, scales_h, scales_w)
XHAL_NEAREST(_upsample_nearest_exact3d, Mode::NearestExact, 3, scales_d, scales_h, scales_w)
XHAL_LINEAR(upsample_linear1d, 1, scales)
XHAL_LINEAR(upsample_bilinear2d, 2, scales_h, scales_w)
XHAL_LINEAR(upsample_trilinear3d, 3, scales_d, scales_h, scales_w)

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("upsample_nearest1d.out", upsample_nearest1d_out);
  m.impl("upsample_nearest2d.out", upsample_nearest2d_out);
  m.impl("upsample_nearest3d.out", upsample_nearest3d_out);
  m.impl("_upsample_nearest_exact1d.out", _upsample_nearest_exact1d_out);
  m.impl("_upsample_nearest_exact2d.out", _upsample_nearest_exact2d_out);
  m.impl("_upsample_nearest_exact3d.out", _upsample_nearest_exact3d_out);
  m.impl("upsample_linear1d.out", upsample_linear1d_out);
  m.impl("upsample_bilinear2d.out", upsample_bilinear2d_out);
  m.impl("upsample_trilinear3d.out", upsample_trilinear3d_out);
  m.impl("upsample_nearest1d_backward.grad_input", upsample_nearest1d_backward_out);
  m.impl("upsample_nearest2d_backward.grad_input", upsample_nearest2d_backward_out);
  m.impl("upsample_nearest3d_backward.grad_input", upsample_nearest3d_backward_out);
  m.impl("_upsample_nearest_exact1d_backward.grad_input", _upsample_nearest_exact1d_backward_out);
  m.impl("_upsample_nearest_exact2d_backward.grad_input", _upsample_nearest_exact2d_backward_out);
  m.impl("_upsample_nearest_exact3d_backward.grad_input", _upsample_nearest_exact3d_backward_out);
  m.impl("upsample_linear1d_backward.grad_input", upsample_linear1d_backward_out);
  m.impl("upsample_bilinear2d_backward.grad_input", upsample_bilinear2d_backward_out);
  m.impl("upsample_trilinear3d_backward.grad_input", upsample_trilinear3d_backward_out);
}

}  // namespace xhal_torch
