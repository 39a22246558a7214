// Convolutions of the `xhal` PyTorch device (kernels/conv.wgsl): conv1d, conv2d and conv3d
// and their transposes, with stride, padding, dilation, output padding and groups, forward and
// backward, through PyTorch's entry for accelerators (convolution_overrideable).

#include <ATen/Operators.h>
#include <torch/library.h>

#include "ops.h"

namespace xhal_torch {
namespace {

// The uniform of kernels/conv.wgsl (struct Geometry).
struct Geometry {
  uint32_t batch = 0, in_channels = 0, out_channels = 0, groups = 1;
  uint32_t batch_chunk = 0;  // the columns' batch-inner layout: batch elements per chunk
  uint32_t column_lines = 1;  // `columns`: rows of output positions an invocation fills
  uint32_t unused[2] = {0, 0};
  uint32_t in_size[4] = {1, 1, 1, 0};
  uint32_t out_size[4] = {1, 1, 1, 0};
  uint32_t kernel[4] = {1, 1, 1, 0};
  uint32_t stride[4] = {1, 1, 1, 0};
  uint32_t padding[4] = {0, 0, 0, 0};
  uint32_t dilation[4] = {1, 1, 1, 0};
};
static_assert(sizeof(Geometry) == 128, "the WGSL struct Geometry is 128 bytes");

// A convolution's geometry: x [N, C, *in], w [O, C / G, *kernel], y [N, O, *out], the spatial
// dimensions right-aligned into depth, height and width.
Geometry geometry(const at::Tensor& x, const at::Tensor& w, const at::Tensor& y, at::IntArrayRef stride,
                  at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  Geometry g;
  g.batch = static_cast<uint32_t>(x.size(0));
  g.in_channels = static_cast<uint32_t>(x.size(1));
  g.out_channels = static_cast<uint32_t>(y.size(1));
  g.groups = static_cast<uint32_t>(groups);
  g.batch_chunk = g.batch;
  const int64_t spatial = x.dim() - 2;
  for (int64_t d = 0; d < spatial; d++) {
    const int64_t slot = 3 - spatial + d;
    g.in_size[slot] = static_cast<uint32_t>(x.size(2 + d));
    g.out_size[slot] = static_cast<uint32_t>(y.size(2 + d));
    g.kernel[slot] = static_cast<uint32_t>(w.size(2 + d));
    g.stride[slot] = static_cast<uint32_t>(stride.size() == 1 ? stride[0] : stride[d]);
    g.padding[slot] = static_cast<uint32_t>(padding.size() == 1 ? padding[0] : padding[d]);
    g.dilation[slot] = static_cast<uint32_t>(dilation.size() == 1 ? dilation[0] : dilation[d]);
  }
  return g;
}

// Runs `entry` writing `out` from `a` and `b` (and `bias` by channel, if defined).
void run_conv(const char* entry, Geometry& g, const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias,
              at::Tensor& out, bool batch_inner = false) {
  if (out.numel() == 0) return;
  Device& dev = device(out.device().index());
  const at::ScalarType dtype = out.scalar_type();
  auto buffer = [&](const at::Tensor& t) { return t.defined() && t.numel() > 0 ? place_of(t).buffer : dev.placeholder; };
  const Binding bindings[5] = {Binding{nullptr, 0, sizeof g, &g}, Binding{buffer(a)}, Binding{buffer(b)},
                               Binding{place_of(out).buffer}, Binding{buffer(bias)}};
  const bool has_bias = bias.defined();
  const bool unit_strides = g.stride[0] == 1 && g.stride[1] == 1 && g.stride[2] == 1;
  // A CPU sums x's rows a run at a time (image_rows), which gives the same sums.
  const bool image_rows = std::strcmp(entry, "image") == 0 && unit_strides && dev.runs_invocations_in_turn;
  if (image_rows) entry = "image_rows";
  const std::string key = std::string("conv|") + entry + wgsl_type(dtype) + (has_bias ? "b" : "") +
                          (batch_inner ? "i" : "") + (unit_strides ? "u" : "");
  const Kernel& compiled = recipe_kernel(dev, key, [&] {
    KernelRecipe recipe;
    recipe.files = {"conv.wgsl"};
    recipe.types = {{"E", wgsl_type(dtype)}, {"F", wgsl_type(float_compute(dtype))}};
    recipe.overrides = {{"HAS_BIAS", has_bias ? 1.0 : 0.0},
                        {"BATCH_INNER", batch_inner ? 1.0 : 0.0},
                        {"UNIT_STRIDES", unit_strides ? 1.0 : 0.0}};
    recipe.entry = entry;
    return recipe;
  });
  // `columns` runs an invocation per row of output positions (all widths of one depth and
  // height), `image_rows` one per run of up to 64 elements of a row of x, the others one per
  // element they write.
  constexpr uint64_t kImageRun = 64;  // conv.wgsl's IMAGE_RUN
  uint64_t invocations = image_rows ? static_cast<uint64_t>(out.numel()) / g.in_size[2] *
                                          ((g.in_size[2] + kImageRun - 1) / kImageRun)
                                    : out.numel();
  if (std::strcmp(entry, "columns") == 0) {
    // A CPU fills about 512 elements an invocation, so that placing one (six divisions) is
    // small beside its copying; a GPU one row of output positions, for more invocations.
    const uint32_t lines = g.out_size[0] * g.out_size[1];
    g.column_lines = dev.runs_invocations_in_turn ? std::max<uint32_t>(1, std::min(lines, 512 / g.out_size[2])) : 1;
    const uint64_t chunks = (lines + g.column_lines - 1) / g.column_lines;
    invocations = static_cast<uint64_t>(out.numel()) / (uint64_t{g.out_size[2]} * lines) * chunks;
  }
  launch(dev, compiled, bindings, invocations);
}

// The matrix of x's receptive fields (columns in kernels/conv.wgsl) is at most this many
// bytes; a convolution whose matrix would be larger runs the direct kernels.
constexpr uint64_t kMaxColumnsBytes = uint64_t{1} << 30;

// Whether convolution geometry `g` (with elements of `element_size` bytes) runs as matrix
// products over its columns.
bool by_columns(const Geometry& g, size_t element_size) {
  const uint64_t taps = uint64_t{g.kernel[0]} * g.kernel[1] * g.kernel[2];
  const uint64_t positions = uint64_t{g.out_size[0]} * g.out_size[1] * g.out_size[2];
  const uint64_t elements = uint64_t{g.batch} * g.in_channels * taps * positions;
  const uint64_t in_elements = uint64_t{g.batch} * g.in_channels * g.in_size[0] * g.in_size[1] * g.in_size[2];
  return elements > 0 && elements < (uint64_t{1} << 31) && in_elements < (uint64_t{1} << 31) &&
         elements * element_size <= kMaxColumnsBytes;
}

int64_t output_positions(const Geometry& g) { return int64_t{g.out_size[0]} * g.out_size[1] * g.out_size[2]; }

int64_t taps_of(const Geometry& g) { return int64_t{g.kernel[0]} * g.kernel[1] * g.kernel[2]; }

// x's columns, [N, G, C / G * taps, positions], or with `batch_inner` [S, G, C / G * taps,
// N / S * positions], S = N / g.batch_chunk: one row then spans a chunk of the batch, and a
// product over it is one long product.
at::Tensor columns_of(Geometry& g, const at::Tensor& x, bool batch_inner) {
  const int64_t rows = g.in_channels / g.groups * taps_of(g);
  at::Tensor columns =
      batch_inner ? at::empty({g.batch / g.batch_chunk, g.groups, rows, int64_t{g.batch_chunk} * output_positions(g)},
                              x.options())
                  : at::empty({g.batch, g.groups, rows, output_positions(g)}, x.options());
  run_conv("columns", g, x, at::Tensor(), at::Tensor(), columns, batch_inner);
  return columns;
}

// The convolution's weight as G matrices [G, O / G, C / G * taps].
at::Tensor weight_matrices(const Geometry& g, const at::Tensor& w) {
  return w.reshape({g.groups, g.out_channels / g.groups, -1});
}

// An output-shaped tensor (y, dy) as each batch element's G matrices [N, G, O / G, positions].
at::Tensor output_matrices(const Geometry& g, const at::Tensor& t) {
  return t.reshape({g.batch, g.groups, g.out_channels / g.groups, output_positions(g)});
}

// The one group's weight matrix [O, C * taps] for every batch element, read through a batch
// stride of 0.
at::Tensor for_every_batch(const Geometry& g, const at::Tensor& weights) {
  return weights.select(0, 0).expand({g.batch, weights.size(1), weights.size(2)});
}

// dy as S * G matrices [O / G, N / S * positions], S = N / chunk, the batch elements of a
// chunk inside each row, as the backward products read it.
at::Tensor gradient_rows(const Geometry& g, const at::Tensor& dy, uint32_t chunk) {
  const int64_t per_group = g.out_channels / g.groups, positions = output_positions(g);
  return dy.reshape({g.batch / chunk, chunk, g.groups, per_group, positions})
      .permute({0, 2, 3, 1, 4})
      .contiguous()
      .view({g.batch / chunk * g.groups, per_group, chunk * positions});
}

// The tiled product's blocks are 64 x 64.
int64_t product_blocks(int64_t rows, int64_t columns) { return (rows + 63) / 64 * ((columns + 63) / 64); }

// Batch elements per chunk of the weight gradient's product. One product over the whole batch
// is one block per 64 x 64 of the weight, which for an early layer (16 x 27) is a single
// workgroup running a depth of N * positions alone; splitting the depth by batch chunks, and
// summing the chunks' products, gives at least about 32 workgroups where the chunks stay at
// least 256 deep.
uint32_t weight_gradient_chunk(const Geometry& g) {
  const int64_t blocks = g.groups * product_blocks(g.out_channels / g.groups, g.in_channels / g.groups * taps_of(g));
  uint32_t chunk = g.batch;
  for (uint32_t size = g.batch; size >= 1; size--) {
    if (g.batch % size != 0) continue;
    if (int64_t{size} * output_positions(g) < 256) break;
    chunk = size;
    if (blocks * (g.batch / size) >= 32) break;
  }
  return chunk;
}

// Below this many output positions, a product per batch element would fill a fraction of the
// tiled product's 64-wide blocks (a late ResNet layer has 4 to 49 positions): the forward and
// the input gradient run one product over the whole batch instead, at the cost of reordering y
// (or a copy of dy).
constexpr int64_t kFewPositions = 64;

// y = conv(x, w) + bias as products of the weight and x's columns.
void forward_by_columns(Geometry& g, const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias, at::Tensor& y) {
  const at::Tensor weights = weight_matrices(g, w);
  const int64_t positions = output_positions(g);
  if (positions < kFewPositions) {
    const at::Tensor columns = columns_of(g, x, /*batch_inner=*/true).select(0, 0);  // one chunk
    const int64_t per_group = g.out_channels / g.groups;
    at::Tensor rows = bias.defined()
                          ? at::baddbmm(bias.view({g.groups, per_group, 1}).expand({g.groups, per_group, columns.size(2)}),
                                        weights, columns)
                          : at::bmm(weights, columns);
    y.view({g.batch, g.groups, per_group, positions})
        .copy_(rows.view({g.groups, per_group, g.batch, positions}).permute({2, 0, 1, 3}));
    return;
  }
  const at::Tensor columns = columns_of(g, x, /*batch_inner=*/false);
  at::Tensor target = y.view({g.batch, g.out_channels, positions});
  if (g.groups == 1) {
    // Into y directly, with the bias added by the product's last step.
    const at::Tensor expanded = for_every_batch(g, weights);
    if (bias.defined()) {
      at::baddbmm_out(target, bias.view({1, g.out_channels, 1}).expand(target.sizes()), expanded, columns.select(1, 0));
    } else {
      at::bmm_out(target, expanded, columns.select(1, 0));
    }
    return;
  }
  target.copy_(at::matmul(weights.unsqueeze(0), columns).view(target.sizes()));
  if (bias.defined()) target.add_(bias.view({1, g.out_channels, 1}));
}

// A convolution's input gradient: the weight's transpose times dy gives the columns' gradient,
// which `image` sums back into x's shape. With few positions, one product over the whole batch
// ([G, C / G * taps, N * positions], from a reordered copy of dy); otherwise a product per
// batch element, reading dy where it is.
void input_gradient_by_columns(Geometry& g, const at::Tensor& dy, const at::Tensor& w, at::Tensor& dx) {
  const at::Tensor weights = weight_matrices(g, w).transpose(1, 2);
  if (output_positions(g) < kFewPositions) {
    const at::Tensor columns = at::bmm(weights, gradient_rows(g, dy, g.batch));
    run_conv("image", g, columns, at::Tensor(), at::Tensor(), dx, /*batch_inner=*/true);
    return;
  }
  const at::Tensor gradient = output_matrices(g, dy);
  const at::Tensor columns =
      g.groups == 1 ? at::bmm(for_every_batch(g, weights), gradient.select(1, 0))
                    : at::matmul(weights.unsqueeze(0), gradient).contiguous();
  run_conv("image", g, columns, at::Tensor(), at::Tensor(), dx, /*batch_inner=*/false);
}

// A convolution's weight gradient: dy times the columns' transpose, over the batch elements of
// each chunk, the chunks' products summed. A product per batch element (chunks of one, which
// read dy where it is) writes N weight-sized results from products of depth `positions`, short
// in late layers; one product over the whole batch may leave most of the device idle.
void weight_gradient_by_columns(Geometry g, const at::Tensor& x, const at::Tensor& dy, at::Tensor& dw) {
  g.batch_chunk = weight_gradient_chunk(g);
  const at::Tensor columns = columns_of(g, x, /*batch_inner=*/true);
  const int64_t chunks = g.batch / g.batch_chunk, per_group = g.out_channels / g.groups;
  const at::Tensor gradient = g.batch_chunk == 1
                                  ? dy.reshape({chunks * g.groups, per_group, output_positions(g)})
                                  : gradient_rows(g, dy, g.batch_chunk);
  at::Tensor target = dw.view({g.groups, per_group, -1});
  const at::Tensor flat = columns.view({chunks * g.groups, columns.size(2), columns.size(3)});
  if (chunks == 1) {
    at::bmm_out(target, gradient, flat.transpose(1, 2));
  } else {
    target.copy_(at::bmm(gradient, flat.transpose(1, 2)).view({chunks, g.groups, per_group, -1}).sum(0));
  }
}

// Contiguous at the start of its memory, which the kernels index from.
at::Tensor fresh(const at::Tensor& t) {
  if (t.is_contiguous() && place_of(t).offset == 0) return t;
  return t.clone(at::MemoryFormat::Contiguous);
}

bool supported(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& other, int64_t groups) {
  if (!floating_on(input) || input.dim() < 3 || input.dim() > 5 || weight.dim() != input.dim() || groups <= 0) return false;
  for (const at::Tensor* t : {&weight, &other}) {
    if (t->defined() && (t->scalar_type() != input.scalar_type() || t->device() != input.device())) return false;
  }
  return true;
}

bool all_bfloat16(std::initializer_list<const at::Tensor*> tensors) {
  for (const at::Tensor* t : tensors) {
    if (t->defined() && t->scalar_type() != at::kBFloat16) return false;
  }
  return true;
}

at::Tensor on_cpu(const at::Tensor& t) { return t.defined() ? t.cpu() : t; }

at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                       c10::SymIntArrayRef stride_, c10::SymIntArrayRef padding_, c10::SymIntArrayRef dilation_,
                       bool transposed, c10::SymIntArrayRef output_padding_, c10::SymInt groups_) {
  const auto stride = C10_AS_INTARRAYREF_SLOW(stride_);
  const auto padding = C10_AS_INTARRAYREF_SLOW(padding_);
  const auto dilation = C10_AS_INTARRAYREF_SLOW(dilation_);
  const auto output_padding = C10_AS_INTARRAYREF_SLOW(output_padding_);
  const int64_t groups = groups_.expect_int();
  const at::Tensor b = bias.has_value() && bias->defined() ? fresh(*bias) : at::Tensor();
  if (!supported(input, weight, b, groups)) {
    // bfloat16 runs in f32 on the device (bfloat16_ops.cpp); other dtypes (integers, float16
    // or float64 on a device without them) on the CPU, whose own convolution is not this
    // operator, so the boxed fallback cannot run it.
    if (all_bfloat16({&input, &weight, &b}) && input.device() == weight.device())
      return XHAL_FALLBACK_SYMINT(convolution_overrideable, input, weight, bias, stride_, padding_, dilation_,
                                  transposed, output_padding_, groups_);
    count_fallback("aten::convolution_overrideable");
    return at::convolution(on_cpu(input), on_cpu(weight), on_cpu(b), stride, padding, dilation, transposed,
                           output_padding, groups)
        .to(input.device());
  }
  const int64_t spatial = input.dim() - 2;
  at::DimVector shape{input.size(0), transposed ? weight.size(1) * groups : weight.size(0)};
  for (int64_t d = 0; d < spatial; d++) {
    const int64_t s = stride.size() == 1 ? stride[0] : stride[d];
    const int64_t p = padding.size() == 1 ? padding[0] : padding[d];
    const int64_t l = dilation.size() == 1 ? dilation[0] : dilation[d];
    const int64_t k = weight.size(2 + d);
    const int64_t size = input.size(2 + d);
    if (transposed) {
      const int64_t extra = output_padding.empty() ? 0 : output_padding.size() == 1 ? output_padding[0] : output_padding[d];
      shape.push_back((size - 1) * s - 2 * p + l * (k - 1) + extra + 1);
    } else {
      shape.push_back((size + 2 * p - l * (k - 1) - 1) / s + 1);
    }
  }
  at::Tensor out = at::empty(shape, input.options());
  const at::Tensor x = fresh(input), w = fresh(weight);
  if (transposed) {
    // A transposed convolution is the input gradient of the convolution from its output to its
    // input, whose weight has the transposed layout already: [in, out / groups, *kernel].
    Geometry g = geometry(out, w, x, stride, padding, dilation, groups);
    run_conv("backward_input", g, x, w, b, out);
  } else {
    Geometry g = geometry(x, w, out, stride, padding, dilation, groups);
    if (by_columns(g, x.element_size())) {
      forward_by_columns(g, x, w, b, out);
    } else {
      run_conv("forward", g, x, w, b, out);
    }
  }
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::SymIntArrayRef stride_,
    c10::SymIntArrayRef padding_, c10::SymIntArrayRef dilation_, bool transposed, c10::SymIntArrayRef output_padding_,
    c10::SymInt groups_, std::array<bool, 3> output_mask) {
  const auto stride = C10_AS_INTARRAYREF_SLOW(stride_);
  const auto padding = C10_AS_INTARRAYREF_SLOW(padding_);
  const auto dilation = C10_AS_INTARRAYREF_SLOW(dilation_);
  const int64_t groups = groups_.expect_int();
  if (!supported(input, weight, grad_output, groups)) {
    if (all_bfloat16({&input, &weight, &grad_output}) && input.device() == weight.device())
      return XHAL_FALLBACK_SYMINT(convolution_backward_overrideable, grad_output, input, weight, stride_, padding_,
                                  dilation_, transposed, output_padding_, groups_, output_mask);
    count_fallback("aten::convolution_backward_overrideable");
    const int64_t channels = transposed ? weight.size(1) * groups : weight.size(0);
    auto [dx, dw, db] = at::convolution_backward(on_cpu(grad_output), on_cpu(input), on_cpu(weight),
                                                 at::IntArrayRef{channels}, stride, padding, dilation, transposed,
                                                 C10_AS_INTARRAYREF_SLOW(output_padding_), groups, output_mask);
    auto back = [&](const at::Tensor& t) { return t.defined() ? t.to(input.device()) : t; };
    return {back(dx), back(dw), back(db)};
  }
  const at::Tensor x = fresh(input), w = fresh(weight), dy = fresh(grad_output);
  at::Tensor grad_input, grad_weight, grad_bias;
  // In the convolution's own geometry: for a transposed one, its output is the convolution's
  // input and its input the convolution's output.
  const at::Tensor& conv_x = transposed ? dy : x;
  const at::Tensor& conv_y = transposed ? x : dy;
  Geometry g = geometry(conv_x, w, conv_y, stride, padding, dilation, groups);
  const bool products = !transposed && by_columns(g, x.element_size());
  if (output_mask[0]) {
    grad_input = at::empty(input.sizes(), input.options());
    if (products) {
      input_gradient_by_columns(g, dy, w, grad_input);
    } else {
      run_conv(transposed ? "forward" : "backward_input", g, dy, w, at::Tensor(), grad_input);
    }
  }
  if (output_mask[1]) {
    grad_weight = at::empty(weight.sizes(), weight.options());
    if (products) {
      weight_gradient_by_columns(g, x, dy, grad_weight);
    } else {
      run_conv("backward_weight", g, conv_x, conv_y, at::Tensor(), grad_weight);
    }
  }
  if (output_mask[2]) {
    at::DimVector dims{0};
    for (int64_t d = 2; d < grad_output.dim(); d++) dims.push_back(d);
    grad_bias = grad_output.sum(dims);
  }
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", convolution);
  m.impl("convolution_backward_overrideable", convolution_backward);
}

}  // namespace xhal_torch
