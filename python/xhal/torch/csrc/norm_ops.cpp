// Normalizations of the `xhal` PyTorch device (kernels/norms.wgsl): layer norm, RMS norm,
// group norm and batch norm with its running statistics (and so instance norm, which PyTorch
// builds on batch norm), forward and backward.

#include <ATen/Operators.h>
#include <torch/library.h>

#include <cstring>
#include <limits>

#include "ops.h"

namespace xhal_torch {
namespace {

// The immediate block of kernels/norms.wgsl (struct Norm).
struct NormLayout {
  uint32_t rows = 0;
  uint32_t count = 0;
  uint32_t inner = 1;
  uint32_t outer_stride = 0;
  uint32_t row_stride = 0;
  uint32_t groups = 1;
  uint32_t group_channels = 1;
  uint32_t spatial = 1;
  uint32_t eps[2] = {};
  uint32_t momentum[2] = {};
  uint32_t part_rows = 0;
  uint32_t pad[3] = {};
};
static_assert(sizeof(NormLayout) == 64, "the WGSL struct Norm is 64 bytes");

enum class Mode { Layer, Rms, Group, Batch };
enum class Running { None, Update, Use };

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::Layer:
      return "MODE_LAYER";
    case Mode::Rms:
      return "MODE_RMS";
    case Mode::Group:
      return "MODE_GROUP";
    default:
      return "MODE_BATCH";
  }
}

const char* running_name(Running running) {
  switch (running) {
    case Running::None:
      return "RUNNING_NONE";
    case Running::Update:
      return "RUNNING_UPDATE";
    default:
      return "RUNNING_USE";
  }
}

// Contiguous and at the start of its memory, which the kernels index from.
at::Tensor fresh(const at::Tensor& t) {
  if (t.is_contiguous() && place_of(t).offset == 0) return t;
  return t.clone(at::MemoryFormat::Contiguous);
}

bool present(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

// Every tensor given is of `input`'s dtype and device.
bool matches(const at::Tensor& input, std::initializer_list<const at::Tensor*> others) {
  for (const at::Tensor* t : others) {
    if (t->defined() && (t->scalar_type() != input.scalar_type() || t->device() != input.device())) return false;
  }
  return true;
}

// The invocations a row gets: a power of two from 32 to 256, no more than the row needs.
// The invocations a row: enough that each takes about 16 elements, 32 to 256. The workgroup's
// tree costs a step per halving of it, on a device that runs invocations one after another
// (the cpu device) a loop over the invocations each.
uint32_t workgroup_for(uint64_t count) {
  uint32_t size = 32;
  while (size < 256 && size * 16 < count) size *= 2;
  return size;
}

struct NormLaunch {
  Mode mode = Mode::Layer;
  Running running = Running::None;
  NormLayout layout;
  double eps = 0;
  double momentum = 0;
  // Bindings 0 to 7 in kernels/norms.wgsl's order; undefined ones bind the placeholder.
  at::Tensor tensors[8];
};

void run_norm(const char* entry, NormLaunch& how, const at::Tensor& input) {
  const at::ScalarType dtype = input.scalar_type();
  const at::ScalarType compute = float_compute(dtype);
  Device& dev = device(input.device().index());
  const uint64_t eps_bits = scalar_bits(how.eps, compute), momentum_bits = scalar_bits(how.momentum, compute);
  how.layout.eps[0] = static_cast<uint32_t>(eps_bits);
  how.layout.eps[1] = static_cast<uint32_t>(eps_bits >> 32);
  how.layout.momentum[0] = static_cast<uint32_t>(momentum_bits);
  how.layout.momentum[1] = static_cast<uint32_t>(momentum_bits >> 32);
  Binding bindings[8];
  for (int k = 0; k < 8; k++) {
    const at::Tensor& t = how.tensors[k];
    bindings[k] = Binding{t.defined() && t.numel() > 0 ? place_of(t).buffer : dev.placeholder};
  }
  const bool has_weight = how.tensors[1].defined(), has_bias = how.tensors[2].defined() && std::strcmp(entry, "forward") == 0;
  const bool adjacent = how.layout.inner >= how.layout.count;
  // A batch norm's channel of 32 or more adjacent elements a sample is walked a run at a time,
  // the invocations along the run, as many as a run has (up to 256).
  const bool runs = !adjacent && how.mode == Mode::Batch && how.layout.inner >= 32 &&
                    how.layout.count % how.layout.inner == 0;
  uint32_t group = workgroup_for(how.layout.count);
  if (runs) {
    group = 32;
    while (group < 256 && group < how.layout.inner) group *= 2;
  }
  const std::string key = std::string("norm|") + entry + mode_name(how.mode) + running_name(how.running) +
                          wgsl_type(dtype) + (has_weight ? "w" : "") + (has_bias ? "b" : "") + std::to_string(group) +
                          (adjacent ? "a" : "") + (runs ? "r" : "");
  const Kernel& compiled = recipe_kernel(dev, key, [&] {
    KernelRecipe recipe;
    recipe.files = {"norms.wgsl"};
    recipe.types = {{"E", wgsl_type(dtype)}, {"F", wgsl_type(compute)}};
    recipe.overrides = {{"MODE", kernel_constant("norms.wgsl", mode_name(how.mode))},
                        {"RUNNING", kernel_constant("norms.wgsl", running_name(how.running))},
                        {"HAS_WEIGHT", has_weight ? 1.0 : 0.0},
                        {"HAS_BIAS", has_bias ? 1.0 : 0.0},
                        {"WG", static_cast<double>(group)},
                        {"ADJACENT", adjacent ? 1.0 : 0.0},
                        {"RUNS", runs ? 1.0 : 0.0}};
    recipe.entry = entry;
    return recipe;
  });
  launch(dev, compiled, bindings, static_cast<uint64_t>(how.layout.rows) * group, &how.layout, sizeof how.layout);
}

// --- Layer norm and RMS norm ----------------------------------------------------------------

// The weight's and the bias's gradients of a layer norm (or the weight's of an RMS norm, whose
// mean is not read): for each of `width` columns, the sums over the rows of dy * xhat and of
// dy, in the compute type, by kernels/norms.wgsl's affine_gradients in parts of the rows
// (enough parts for about 32 workgroups), then summed over the parts.
std::pair<at::Tensor, at::Tensor> affine_gradients(Mode mode, const at::Tensor& input, const at::Tensor& grad_out,
                                                   const at::Tensor& mean, const at::Tensor& rstd, int64_t rows,
                                                   int64_t width) {
  const at::ScalarType dtype = input.scalar_type(), compute = float_compute(dtype);
  Device& dev = device(input.device().index());
  constexpr int64_t kColumns = 256;  // affine_gradients' workgroup
  const int64_t column_blocks = (width + kColumns - 1) / kColumns;
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>((32 + column_blocks - 1) / column_blocks, (rows + 15) / 16));
  const int64_t part_rows = (rows + parts - 1) / parts;
  TORCH_CHECK(column_blocks <= 65535 && parts <= 65535, "xhal: a norm's affine gradients over ", width, " columns");
  at::Tensor sums = at::empty({parts, width, 2}, input.options().dtype(compute));
  NormLayout layout;
  layout.rows = static_cast<uint32_t>(rows);
  layout.count = static_cast<uint32_t>(width);
  layout.inner = static_cast<uint32_t>(width);
  layout.row_stride = static_cast<uint32_t>(width);
  layout.part_rows = static_cast<uint32_t>(part_rows);
  const at::Tensor x = fresh(input), dy = fresh(grad_out), m = mode == Mode::Rms ? rstd : fresh(mean), r = fresh(rstd);
  Binding bindings[9];
  for (Binding& b : bindings) b = Binding{dev.placeholder};
  bindings[0] = Binding{place_of(x).buffer};
  bindings[2] = Binding{place_of(dy).buffer};
  bindings[4] = Binding{place_of(m).buffer};
  bindings[5] = Binding{place_of(r).buffer};
  bindings[8] = Binding{place_of(sums).buffer};
  const std::string key = std::string("norm|affine_gradients") + mode_name(mode) + wgsl_type(dtype);
  const Kernel& compiled = recipe_kernel(dev, key, [&] {
    KernelRecipe recipe;
    recipe.files = {"norms.wgsl"};
    recipe.types = {{"E", wgsl_type(dtype)}, {"F", wgsl_type(compute)}};
    recipe.overrides = {{"MODE", kernel_constant("norms.wgsl", mode_name(mode))}};
    recipe.entry = "affine_gradients";
    return recipe;
  });
  launch_workgroups(dev, compiled, bindings, {static_cast<uint32_t>(column_blocks), static_cast<uint32_t>(parts), 1},
                    &layout, sizeof layout);
  const at::Tensor total = parts == 1 ? sums.select(0, 0) : sums.sum(0);
  return {total.select(1, 0), total.select(1, 1)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm(const at::Tensor& input,
                                                                 c10::SymIntArrayRef normalized_shape,
                                                                 const std::optional<at::Tensor>& weight,
                                                                 const std::optional<at::Tensor>& bias, double eps) {
  const auto shape = C10_AS_INTARRAYREF_SLOW(normalized_shape);
  const at::Tensor w = present(weight) ? *weight : at::Tensor();
  const at::Tensor b = present(bias) ? *bias : at::Tensor();
  const int64_t axis = input.dim() - static_cast<int64_t>(shape.size());
  if (!floating_on(input) || !matches(input, {&w, &b}) || axis < 0 ||
      input.sizes().slice(axis) != shape)
    return XHAL_FALLBACK_SYMINT(native_layer_norm, input, normalized_shape, weight, bias, eps);
  const int64_t width = c10::multiply_integers(shape);
  const int64_t rows = width == 0 ? 0 : input.numel() / width;
  at::DimVector stat_shape(input.sizes().begin(), input.sizes().begin() + axis);
  stat_shape.resize(input.dim(), 1);
  at::Tensor out = at::empty(input.sizes(), input.options());
  at::Tensor mean = at::empty(stat_shape, input.options());
  at::Tensor rstd = at::empty(stat_shape, input.options());
  if (rows == 0 || width == 0) {
    // PyTorch's CPU: the statistics of no elements are NaN.
    if (mean.numel() > 0) {
      mean.fill_(std::numeric_limits<double>::quiet_NaN());
      rstd.fill_(std::numeric_limits<double>::quiet_NaN());
    }
    return {out, mean, rstd};
  }
  NormLaunch how;
  how.mode = Mode::Layer;
  how.eps = eps;
  how.layout.rows = static_cast<uint32_t>(rows);
  how.layout.count = static_cast<uint32_t>(width);
  how.layout.inner = static_cast<uint32_t>(width);
  how.layout.row_stride = static_cast<uint32_t>(width);
  how.tensors[0] = fresh(input);
  if (w.defined()) how.tensors[1] = fresh(w);
  if (b.defined()) how.tensors[2] = fresh(b);
  how.tensors[3] = out;
  how.tensors[4] = mean;
  how.tensors[5] = rstd;
  run_norm("forward", how, input);
  return {out, mean, rstd};
}

// The reduction over every dimension but the trailing `kept` ones: what the per-element
// affine parameters' gradients sum.
at::DimVector leading_dims(int64_t ndim, int64_t kept) {
  at::DimVector dims;
  for (int64_t d = 0; d < ndim - kept; d++) dims.push_back(d);
  return dims;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, c10::SymIntArrayRef normalized_shape, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    std::array<bool, 3> output_mask) {
  const auto shape = C10_AS_INTARRAYREF_SLOW(normalized_shape);
  const at::Tensor w = present(weight) ? *weight : at::Tensor();
  if (!floating_on(input) || !matches(input, {&grad_out, &mean, &rstd, &w}))
    return XHAL_FALLBACK_SYMINT(native_layer_norm_backward, grad_out, input, normalized_shape, mean, rstd, weight, bias,
                                output_mask);
  const int64_t width = c10::multiply_integers(shape);
  const int64_t rows = width == 0 ? 0 : input.numel() / width;
  at::Tensor dx = output_mask[0] ? at::empty(input.sizes(), input.options()) : at::Tensor();
  at::Tensor dw, db;
  if (rows > 0 && width > 0 && dx.defined()) {
    NormLaunch how;
    how.mode = Mode::Layer;
    how.layout.rows = static_cast<uint32_t>(rows);
    how.layout.count = static_cast<uint32_t>(width);
    how.layout.inner = static_cast<uint32_t>(width);
    how.layout.row_stride = static_cast<uint32_t>(width);
    how.tensors[0] = fresh(input);
    if (w.defined()) how.tensors[1] = fresh(w);
    how.tensors[2] = fresh(grad_out);
    how.tensors[3] = dx;
    how.tensors[4] = fresh(mean);
    how.tensors[5] = fresh(rstd);
    run_norm("backward", how, input);
  }
  // The affine parameters' gradients sum over the rows, with the device's own reductions.
  const auto dims = leading_dims(input.dim(), static_cast<int64_t>(shape.size()));
  // Summed over the rows; with a single row (the normalized shape is the whole input) there
  // is nothing to sum, and sum(dim=[]) would sum everything.
  auto over_rows = [&](const at::Tensor& t) { return dims.empty() ? t : t.sum(dims); };
  const bool want_weight = output_mask[1] && w.defined(), want_bias = output_mask[2] && present(bias);
  if ((want_weight || want_bias) && rows > 0 && width > 0) {
    const auto [weight_sums, bias_sums] = affine_gradients(Mode::Layer, input, grad_out, mean, rstd, rows, width);
    if (want_weight) dw = weight_sums.to(w.scalar_type()).reshape(w.sizes());
    if (want_bias) db = bias_sums.to(bias->scalar_type()).reshape(bias->sizes());
    return {dx, dw, db};
  }
  if (want_weight) dw = over_rows(grad_out * ((input - mean) * rstd)).reshape(w.sizes());
  if (want_bias) db = over_rows(grad_out).reshape(bias->sizes());
  return {dx, dw, db};
}

std::tuple<at::Tensor, at::Tensor> fused_rms_norm(const at::Tensor& input, at::IntArrayRef normalized_shape,
                                                  const std::optional<at::Tensor>& weight, std::optional<double> eps) {
  // PyTorch's default is the machine epsilon of the input's dtype, which bfloat16 must name
  // before it is computed in f32.
  if (input.scalar_type() == at::kBFloat16 && !eps.has_value()) eps = 0.0078125;
  const at::Tensor w = present(weight) ? *weight : at::Tensor();
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
  if (!floating_on(input) || !matches(input, {&w}) || axis < 0 || input.sizes().slice(axis) != normalized_shape)
    return XHAL_FALLBACK(_fused_rms_norm, input, normalized_shape, weight, eps);
  const int64_t width = c10::multiply_integers(normalized_shape);
  const int64_t rows = width == 0 ? 0 : input.numel() / width;
  at::DimVector stat_shape(input.sizes().begin(), input.sizes().begin() + axis);
  stat_shape.resize(input.dim(), 1);
  at::Tensor out = at::empty(input.sizes(), input.options());
  at::Tensor rstd = at::empty(stat_shape, input.options());
  if (rows == 0 || width == 0) return {out, rstd};
  NormLaunch how;
  how.mode = Mode::Rms;
  // PyTorch's default: the machine epsilon of the input's dtype.
  how.eps = eps.value_or(input.scalar_type() == at::kDouble ? std::numeric_limits<double>::epsilon()
                         : input.scalar_type() == at::kHalf ? 0.0009765625
                                                            : static_cast<double>(std::numeric_limits<float>::epsilon()));
  how.layout.rows = static_cast<uint32_t>(rows);
  how.layout.count = static_cast<uint32_t>(width);
  how.layout.inner = static_cast<uint32_t>(width);
  how.layout.row_stride = static_cast<uint32_t>(width);
  how.tensors[0] = fresh(input);
  if (w.defined()) how.tensors[1] = fresh(w);
  how.tensors[3] = out;
  how.tensors[4] = at::empty(stat_shape, input.options());  // the mean RMS norm does not take out
  how.tensors[5] = rstd;
  run_norm("forward", how, input);
  return {out, rstd};
}

std::tuple<at::Tensor, at::Tensor> fused_rms_norm_backward(const at::Tensor& grad_out, const at::Tensor& input,
                                                           at::IntArrayRef normalized_shape, const at::Tensor& rstd,
                                                           const std::optional<at::Tensor>& weight,
                                                           std::array<bool, 2> output_mask) {
  const at::Tensor w = present(weight) ? *weight : at::Tensor();
  if (!floating_on(input) || !matches(input, {&grad_out, &rstd, &w})) {
    if (input.scalar_type() == at::kBFloat16 && matches(input, {&grad_out, &rstd, &w}))
      return XHAL_FALLBACK(_fused_rms_norm_backward, grad_out, input, normalized_shape, rstd, weight, output_mask);
    // The CPU has no kernel of its own for this: with y = x rstd w and rstd = (mean(x^2) +
    // eps)^-1/2 over the normalized dimensions, dx = rstd g w - x rstd^3 mean(g w x).
    const at::Tensor gw = w.defined() ? grad_out * w : grad_out;
    const auto dims = leading_dims(input.dim(), static_cast<int64_t>(normalized_shape.size()));
    at::DimVector normalized;
    for (int64_t d = input.dim() - static_cast<int64_t>(normalized_shape.size()); d < input.dim(); d++) normalized.push_back(d);
    at::Tensor dx, dw;
    // mean over no dimensions is the value itself (at::mean over [] would take them all).
    const at::Tensor moment = normalized.empty() ? gw * input : (gw * input).mean(normalized, true);
    if (output_mask[0]) dx = rstd * gw - input * rstd.pow(3) * moment;
    if (output_mask[1] && w.defined()) {
      const at::Tensor products = grad_out * (input * rstd);
      dw = (dims.empty() ? products : products.sum(dims)).reshape(w.sizes());
    }
    return {dx, dw};
  }
  const int64_t width = c10::multiply_integers(normalized_shape);
  const int64_t rows = width == 0 ? 0 : input.numel() / width;
  at::Tensor dx = output_mask[0] ? at::empty(input.sizes(), input.options()) : at::Tensor();
  at::Tensor dw;
  if (rows > 0 && width > 0 && dx.defined()) {
    NormLaunch how;
    how.mode = Mode::Rms;
    how.layout.rows = static_cast<uint32_t>(rows);
    how.layout.count = static_cast<uint32_t>(width);
    how.layout.inner = static_cast<uint32_t>(width);
    how.layout.row_stride = static_cast<uint32_t>(width);
    how.tensors[0] = fresh(input);
    if (w.defined()) how.tensors[1] = fresh(w);
    how.tensors[2] = fresh(grad_out);
    how.tensors[3] = dx;
    how.tensors[4] = at::zeros(rstd.sizes(), rstd.options());  // RMS norm's mean is 0
    how.tensors[5] = fresh(rstd);
    run_norm("backward", how, input);
  }
  if (output_mask[1] && w.defined() && rows > 0 && width > 0) {
    dw = affine_gradients(Mode::Rms, input, grad_out, rstd, rstd, rows, width).first.to(w.scalar_type()).reshape(w.sizes());
  } else if (output_mask[1] && w.defined()) {
    const auto dims = leading_dims(input.dim(), static_cast<int64_t>(normalized_shape.size()));
    const at::Tensor products = grad_out * (input * rstd);
    dw = (dims.empty() ? products : products.sum(dims)).reshape(w.sizes());
  }
  return {dx, dw};
}

// --- Group norm -------------------------------------------------------------------------------

NormLayout group_layout(int64_t n, int64_t c, int64_t spatial, int64_t group) {
  NormLayout layout;
  const int64_t per_row = c / group * spatial;
  layout.rows = static_cast<uint32_t>(n * group);
  layout.count = static_cast<uint32_t>(per_row);
  layout.inner = static_cast<uint32_t>(per_row);
  layout.row_stride = static_cast<uint32_t>(per_row);
  layout.groups = static_cast<uint32_t>(group);
  layout.group_channels = static_cast<uint32_t>(c / group);
  layout.spatial = static_cast<uint32_t>(std::max<int64_t>(spatial, 1));
  return layout;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_group_norm(const at::Tensor& input,
                                                                 const std::optional<at::Tensor>& weight,
                                                                 const std::optional<at::Tensor>& bias, c10::SymInt N,
                                                                 c10::SymInt C, c10::SymInt HxW, int64_t group,
                                                                 double eps) {
  const at::Tensor w = present(weight) ? *weight : at::Tensor();
  const at::Tensor b = present(bias) ? *bias : at::Tensor();
  const int64_t n = N.expect_int(), c = C.expect_int(), spatial = HxW.expect_int();
  if (!floating_on(input) || !matches(input, {&w, &b}) || group <= 0 || c % group != 0)
    return XHAL_FALLBACK_SYMINT(native_group_norm, input, weight, bias, N, C, HxW, group, eps);
  at::Tensor out = at::empty(input.sizes(), input.options());
  at::Tensor mean = at::empty({n, group}, input.options());
  at::Tensor rstd = at::empty({n, group}, input.options());
  if (input.numel() == 0) return {out, mean, rstd};
  NormLaunch how;
  how.mode = Mode::Group;
  how.eps = eps;
  how.layout = group_layout(n, c, spatial, group);
  how.tensors[0] = fresh(input);
  if (w.defined()) how.tensors[1] = fresh(w);
  if (b.defined()) how.tensors[2] = fresh(b);
  how.tensors[3] = out;
  how.tensors[4] = mean;
  how.tensors[5] = rstd;
  run_norm("forward", how, input);
  return {out, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_group_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean, const at::Tensor& rstd,
    const std::optional<at::Tensor>& weight, c10::SymInt N, c10::SymInt C, c10::SymInt HxW, int64_t group,
    std::array<bool, 3> output_mask) {
  const at::Tensor w = present(weight) ? *weight : at::Tensor();
  const int64_t n = N.expect_int(), c = C.expect_int(), spatial = HxW.expect_int();
  if (!floating_on(input) || !matches(input, {&grad_out, &mean, &rstd, &w}) || group <= 0 || c % group != 0)
    return XHAL_FALLBACK_SYMINT(native_group_norm_backward, grad_out, input, mean, rstd, weight, N, C, HxW, group,
                                output_mask);
  at::Tensor dx = output_mask[0] ? at::empty(input.sizes(), input.options()) : at::Tensor();
  at::Tensor dw, db;
  if (input.numel() > 0 && dx.defined()) {
    NormLaunch how;
    how.mode = Mode::Group;
    how.layout = group_layout(n, c, spatial, group);
    how.tensors[0] = fresh(input);
    if (w.defined()) how.tensors[1] = fresh(w);
    how.tensors[2] = fresh(grad_out);
    how.tensors[3] = dx;
    how.tensors[4] = fresh(mean);
    how.tensors[5] = fresh(rstd);
    run_norm("backward", how, input);
  }
  if ((output_mask[1] || output_mask[2]) && n * c * spatial == 0) {
    if (output_mask[1] && w.defined()) dw = at::zeros({c}, input.options());
    if (output_mask[2]) db = at::zeros({c}, input.options());
  } else if (output_mask[1] || output_mask[2]) {
    // In f32 for float16, rounded once, as the CPU computes them.
    const at::ScalarType dtype = input.scalar_type();
    const at::ScalarType compute = float_compute(dtype);
    const at::Tensor dy = grad_out.reshape({n, c, spatial}).to(compute);
    if (output_mask[1] && w.defined()) {
      const at::Tensor xhat = ((input.reshape({n, group, -1}).to(compute) - mean.unsqueeze(-1).to(compute)) *
                               rstd.unsqueeze(-1).to(compute))
                                  .reshape({n, c, spatial});
      dw = (dy * xhat).sum({0, 2}).to(dtype);
    }
    if (output_mask[2]) db = dy.sum({0, 2}).to(dtype);
  }
  return {dx, dw, db};
}

// --- Batch norm -------------------------------------------------------------------------------

NormLayout batch_layout(const at::Tensor& input) {
  const int64_t n = input.size(0), c = input.size(1);
  const int64_t spatial = c == 0 || n == 0 ? 0 : input.numel() / (n * c);
  NormLayout layout;
  layout.rows = static_cast<uint32_t>(c);
  layout.count = static_cast<uint32_t>(n * spatial);
  layout.inner = static_cast<uint32_t>(std::max<int64_t>(spatial, 1));
  layout.outer_stride = static_cast<uint32_t>(c * spatial);
  layout.row_stride = static_cast<uint32_t>(spatial);
  return layout;
}

// Batch norm's forward pass: statistics of the batch (updating the running ones when given),
// or the running statistics in evaluation. What PyTorch's CPU returns as the saved statistics:
// the batch's mean and 1 / sqrt(var + eps) in training, empty tensors in evaluation.
bool batch_norm(const at::Tensor& input, const at::Tensor& w, const at::Tensor& b, const at::Tensor& running_mean,
                const at::Tensor& running_var, bool training, double momentum, double eps, at::Tensor& out,
                at::Tensor& save_mean, at::Tensor& save_invstd) {
  if (!floating_on(input) || input.dim() < 2 || !matches(input, {&w, &b, &running_mean, &running_var})) return false;
  const bool has_running = running_mean.defined() && running_var.defined();
  if (!training && !has_running) return false;
  const int64_t c = input.size(1);
  out = at::empty(input.sizes(), input.options());
  save_mean = at::empty({training ? c : 0}, input.options());
  save_invstd = at::empty({training ? c : 0}, input.options());
  if (input.numel() == 0) return true;
  // The running statistics are written in place: contiguous at the start of their memory, or
  // computed aside and copied back.
  at::Tensor mean_place = has_running ? fresh(running_mean) : at::Tensor();
  at::Tensor var_place = has_running ? fresh(running_var) : at::Tensor();
  NormLaunch how;
  how.mode = Mode::Batch;
  how.running = !training ? Running::Use : has_running ? Running::Update : Running::None;
  how.eps = eps;
  how.momentum = momentum;
  how.layout = batch_layout(input);
  how.tensors[0] = fresh(input);
  if (w.defined()) how.tensors[1] = fresh(w);
  if (b.defined()) how.tensors[2] = fresh(b);
  how.tensors[3] = out;
  how.tensors[4] = training ? save_mean : at::Tensor();
  how.tensors[5] = training ? save_invstd : at::Tensor();
  how.tensors[6] = mean_place;
  how.tensors[7] = var_place;
  run_norm("forward", how, input);
  if (has_running && training) {
    if (!mean_place.is_same(running_mean)) const_cast<at::Tensor&>(running_mean).copy_(mean_place);
    if (!var_place.is_same(running_var)) const_cast<at::Tensor&>(running_var).copy_(var_place);
  }
  return true;
}

at::Tensor defined_or_empty(const std::optional<at::Tensor>& t) { return present(t) ? *t : at::Tensor(); }

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm(const at::Tensor& input,
                                                                 const std::optional<at::Tensor>& weight,
                                                                 const std::optional<at::Tensor>& bias,
                                                                 const std::optional<at::Tensor>& running_mean,
                                                                 const std::optional<at::Tensor>& running_var,
                                                                 bool training, double momentum, double eps) {
  at::Tensor out, save_mean, save_invstd;
  if (!batch_norm(input, defined_or_empty(weight), defined_or_empty(bias), defined_or_empty(running_mean),
                  defined_or_empty(running_var), training, momentum, eps, out, save_mean, save_invstd))
    return XHAL_FALLBACK(native_batch_norm, input, weight, bias, running_mean, running_var, training, momentum, eps);
  return {out, save_mean, save_invstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_legit(const at::Tensor& input,
                                                                       const std::optional<at::Tensor>& weight,
                                                                       const std::optional<at::Tensor>& bias,
                                                                       at::Tensor& running_mean, at::Tensor& running_var,
                                                                       bool training, double momentum, double eps) {
  at::Tensor out, save_mean, save_invstd;
  if (!batch_norm(input, defined_or_empty(weight), defined_or_empty(bias), running_mean, running_var, training,
                  momentum, eps, out, save_mean, save_invstd))
    return XHAL_FALLBACK(_native_batch_norm_legit, input, weight, bias, running_mean, running_var, training, momentum,
                         eps);
  return {out, save_mean, save_invstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_legit_no_stats(const at::Tensor& input,
                                                                                const std::optional<at::Tensor>& weight,
                                                                                const std::optional<at::Tensor>& bias,
                                                                                bool training, double momentum,
                                                                                double eps) {
  at::Tensor out, save_mean, save_invstd;
  if (!batch_norm(input, defined_or_empty(weight), defined_or_empty(bias), at::Tensor(), at::Tensor(), training,
                  momentum, eps, out, save_mean, save_invstd))
    return XHAL_FALLBACK(_native_batch_norm_legit_no_stats, input, weight, bias, training, momentum, eps);
  return {out, save_mean, save_invstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_legit_no_training(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    const at::Tensor& running_mean, const at::Tensor& running_var, double momentum, double eps) {
  at::Tensor out, save_mean, save_invstd;
  if (!batch_norm(input, defined_or_empty(weight), defined_or_empty(bias), running_mean, running_var, false, momentum,
                  eps, out, save_mean, save_invstd))
    return XHAL_FALLBACK(_native_batch_norm_legit_no_training, input, weight, bias, running_mean, running_var, momentum,
                         eps);
  return {out, save_mean, save_invstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_invstd, bool train, double eps,
    std::array<bool, 3> output_mask) {
  const at::Tensor w = defined_or_empty(weight);
  at::Tensor mean, invstd;
  if (train) {
    mean = defined_or_empty(save_mean);
    invstd = defined_or_empty(save_invstd);
  } else if (present(running_mean) && present(running_var)) {
    // Evaluation: the running statistics, which are constants.
    mean = *running_mean;
    invstd = (*running_var + eps).rsqrt();
  }
  auto fallback = [&] {
    return XHAL_FALLBACK(native_batch_norm_backward, grad_out, input, weight, running_mean, running_var, save_mean,
                         save_invstd, train, eps, output_mask);
  };
  if (!floating_on(input) || input.dim() < 2 || !mean.defined() || !invstd.defined() ||
      !matches(input, {&grad_out, &w, &mean, &invstd}))
    return fallback();
  const int64_t c = input.size(1);
  at::Tensor dx = at::empty(input.sizes(), input.options());
  at::Tensor dw = at::empty({c}, input.options());
  at::Tensor db = at::empty({c}, input.options());
  if (input.numel() == 0) {
    dw.zero_();
    db.zero_();
  } else {
    NormLaunch how;
    how.mode = Mode::Batch;
    how.running = train ? Running::None : Running::Use;
    how.layout = batch_layout(input);
    how.tensors[0] = fresh(input);
    if (w.defined()) how.tensors[1] = fresh(w);
    how.tensors[2] = fresh(grad_out);
    how.tensors[3] = dx;
    how.tensors[4] = fresh(mean);
    how.tensors[5] = fresh(invstd);
    how.tensors[6] = dw;
    how.tensors[7] = db;
    run_norm("backward", how, input);
  }
  return {output_mask[0] ? dx : at::Tensor(), output_mask[1] && w.defined() ? dw : at::Tensor(),
          output_mask[2] ? db : at::Tensor()};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_layer_norm", native_layer_norm);
  m.impl("native_layer_norm_backward", native_layer_norm_backward);
  m.impl("_fused_rms_norm", fused_rms_norm);
  m.impl("_fused_rms_norm_backward", fused_rms_norm_backward);
  m.impl("native_group_norm", native_group_norm);
  m.impl("native_group_norm_backward", native_group_norm_backward);
  m.impl("native_batch_norm", native_batch_norm);
  m.impl("_native_batch_norm_legit", native_batch_norm_legit);
  m.impl("_native_batch_norm_legit.no_stats", native_batch_norm_legit_no_stats);
  m.impl("_native_batch_norm_legit_no_training", native_batch_norm_legit_no_training);
  m.impl("native_batch_norm_backward", native_batch_norm_backward);
}

}  // namespace xhal_torch
