// The fused LSTM and GRU cells of the `xhal` PyTorch device (kernels/rnn.wgsl), which
// PyTorch's nn.LSTM, nn.GRU, LSTMCell and GRUCell call on an accelerator, forward and backward.

#include <ATen/Operators.h>
#include <torch/library.h>

#include "ops.h"

namespace xhal_torch {
namespace {

// The immediate block of kernels/rnn.wgsl (struct Cell).
struct Cell {
  uint32_t batch = 0, hidden = 0, pad0 = 0, pad1 = 0;
};

at::Tensor fresh(const at::Tensor& t) {
  if (t.is_contiguous() && place_of(t).offset == 0) return t;
  return t.clone(at::MemoryFormat::Contiguous);
}

bool present(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

// Every defined tensor is of `like`'s floating dtype and device.
bool matching(const at::Tensor& like, std::initializer_list<const at::Tensor*> tensors) {
  if (!floating_on(like)) return false;
  for (const at::Tensor* t : tensors) {
    if (t->defined() && (t->scalar_type() != like.scalar_type() || t->device() != like.device())) return false;
  }
  return true;
}

void run_cell(const char* entry, const at::Tensor& like, int64_t batch, int64_t hidden, bool has_bias,
              std::initializer_list<at::Tensor> tensors) {
  if (batch == 0 || hidden == 0) return;
  Device& dev = device(like.device().index());
  const at::ScalarType dtype = like.scalar_type();
  std::vector<Binding> bindings;
  for (const at::Tensor& t : tensors) {
    bindings.push_back(Binding{t.defined() && t.numel() > 0 ? place_of(t).buffer : dev.placeholder});
  }
  Cell q;
  q.batch = static_cast<uint32_t>(batch);
  q.hidden = static_cast<uint32_t>(hidden);
  const std::string key = std::string("rnn|") + entry + wgsl_type(dtype) + (has_bias ? "b" : "");
  const Kernel& compiled = recipe_kernel(dev, key, [&] {
    KernelRecipe recipe;
    recipe.files = {"rnn.wgsl"};
    recipe.types = {{"E", wgsl_type(dtype)}, {"F", wgsl_type(float_compute(dtype))}};
    recipe.overrides = {{"HAS_BIAS", has_bias ? 1.0 : 0.0}};
    recipe.entry = entry;
    return recipe;
  });
  launch(dev, compiled, bindings, static_cast<uint64_t>(batch * hidden), &q, sizeof q);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_cell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                                         const at::Tensor& cx, const std::optional<at::Tensor>& input_bias,
                                                         const std::optional<at::Tensor>& hidden_bias) {
  const bool has_bias = present(input_bias) && present(hidden_bias);
  const at::Tensor ib = has_bias ? fresh(*input_bias) : at::Tensor();
  const at::Tensor hb = has_bias ? fresh(*hidden_bias) : at::Tensor();
  if (!matching(input_gates, {&hidden_gates, &cx, &ib, &hb}) || cx.dim() != 2 ||
      input_gates.sizes() != hidden_gates.sizes() || input_gates.size(1) != 4 * cx.size(1))
    return XHAL_FALLBACK(_thnn_fused_lstm_cell, input_gates, hidden_gates, cx, input_bias, hidden_bias);
  const int64_t batch = cx.size(0), hidden = cx.size(1);
  at::Tensor hy = at::empty_like(cx, at::MemoryFormat::Contiguous);
  at::Tensor cy = at::empty_like(cx, at::MemoryFormat::Contiguous);
  at::Tensor workspace = at::empty_like(input_gates, at::MemoryFormat::Contiguous);
  run_cell("lstm_cell", cx, batch, hidden, has_bias,
           {fresh(input_gates), fresh(hidden_gates), fresh(cx), ib, hb, hy, cy, workspace});
  return {hy, cy, workspace};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_cell_backward(const std::optional<at::Tensor>& grad_hy,
                                                                  const std::optional<at::Tensor>& grad_cy,
                                                                  const at::Tensor& cx, const at::Tensor& cy,
                                                                  const at::Tensor& workspace, bool has_bias) {
  // An output that got no gradient contributes zeros.
  const at::Tensor ghy = present(grad_hy) ? fresh(*grad_hy) : at::zeros_like(cx);
  const at::Tensor gcy = present(grad_cy) ? fresh(*grad_cy) : at::zeros_like(cx);
  if (!matching(cx, {&ghy, &gcy, &cy, &workspace}) || cx.dim() != 2)
    return XHAL_FALLBACK(_thnn_fused_lstm_cell_backward_impl, grad_hy, grad_cy, cx, cy, workspace, has_bias);
  const int64_t batch = cx.size(0), hidden = cx.size(1);
  at::Tensor grad_gates = at::empty({batch, 4 * hidden}, cx.options());
  at::Tensor grad_cx = at::empty({batch, hidden}, cx.options());
  run_cell("lstm_cell_backward", cx, batch, hidden, false,
           {ghy, gcy, fresh(cx), fresh(cy), fresh(workspace), grad_gates, grad_cx});
  at::Tensor grad_bias = has_bias ? grad_gates.sum(0) : at::Tensor();
  return {grad_gates, grad_cx, grad_bias};
}

std::tuple<at::Tensor, at::Tensor> gru_cell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                            const at::Tensor& hx, const std::optional<at::Tensor>& input_bias,
                                            const std::optional<at::Tensor>& hidden_bias) {
  const bool has_bias = present(input_bias) && present(hidden_bias);
  const at::Tensor ib = has_bias ? fresh(*input_bias) : at::Tensor();
  const at::Tensor hb = has_bias ? fresh(*hidden_bias) : at::Tensor();
  if (!matching(input_gates, {&hidden_gates, &hx, &ib, &hb}) || hx.dim() != 2 ||
      input_gates.sizes() != hidden_gates.sizes() || input_gates.size(1) != 3 * hx.size(1))
    return XHAL_FALLBACK(_thnn_fused_gru_cell, input_gates, hidden_gates, hx, input_bias, hidden_bias);
  const int64_t batch = hx.size(0), hidden = hx.size(1);
  at::Tensor hy = at::empty_like(hx, at::MemoryFormat::Contiguous);
  at::Tensor workspace = at::empty({batch, 5 * hidden}, hx.options());
  run_cell("gru_cell", hx, batch, hidden, has_bias, {fresh(input_gates), fresh(hidden_gates), fresh(hx), ib, hb, hy, workspace});
  return {hy, workspace};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> gru_cell_backward(const at::Tensor& grad_hy,
                                                                                         const at::Tensor& workspace,
                                                                                         bool has_bias) {
  if (!matching(grad_hy, {&workspace}) || grad_hy.dim() != 2)
    return XHAL_FALLBACK(_thnn_fused_gru_cell_backward, grad_hy, workspace, has_bias);
  const int64_t batch = grad_hy.size(0), hidden = grad_hy.size(1);
  at::Tensor grad_input_gates = at::empty({batch, 3 * hidden}, grad_hy.options());
  at::Tensor grad_hidden_gates = at::empty({batch, 3 * hidden}, grad_hy.options());
  at::Tensor grad_hx = at::empty({batch, hidden}, grad_hy.options());
  run_cell("gru_cell_backward", grad_hy, batch, hidden, false,
           {fresh(grad_hy), fresh(workspace), grad_input_gates, grad_hidden_gates, grad_hx});
  at::Tensor grad_input_bias = has_bias ? grad_input_gates.sum(0) : at::Tensor();
  at::Tensor grad_hidden_bias = has_bias ? grad_hidden_gates.sum(0) : at::Tensor();
  return {grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", lstm_cell);
  m.impl("_thnn_fused_lstm_cell_backward_impl", lstm_cell_backward);
  m.impl("_thnn_fused_gru_cell", gru_cell);
  m.impl("_thnn_fused_gru_cell_backward", gru_cell_backward);
}

}  // namespace xhal_torch
