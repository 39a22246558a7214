// Scaled dot-product attention of the `xhal` PyTorch device (kernels/attention.wgsl), through
// PyTorch's entry for accelerators' fused attention: F.scaled_dot_product_attention runs as one
// kernel forward and two backward, with additive or boolean masks, causal masking and
// grouped-query heads. What the kernel does not cover (dropout, which needs the device's
// random numbers) takes PyTorch's math path, itself built of the device's kernels.

#include <ATen/Operators.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/transformers/attention.h>
#include <torch/library.h>

#include <cmath>
#include <cstdlib>

#include "ops.h"

namespace xhal_torch {
namespace {

// The uniform of kernels/attention.wgsl (struct Shapes).
struct Shapes {
  uint32_t batch = 0, heads = 0, key_heads = 0, queries = 0;
  uint32_t keys = 0, head_size = 0, value_size = 0, scale_low = 0;
  uint32_t scale_high = 0, pad = 0, pad_a = 0, pad_b = 0;
  uint32_t q_strides[4] = {}, k_strides[4] = {}, v_strides[4] = {}, mask_strides[4] = {}, do_strides[4] = {};
  uint32_t offsets[4] = {};
  uint32_t do_offset = 0, pad1 = 0, pad2 = 0, pad3 = 0;
};
static_assert(sizeof(Shapes) == 160, "the WGSL struct Shapes is 160 bytes");

enum class MaskKind { None, Additive, Bool };

bool fused_supported(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& mask,
                     double dropout_p) {
  if (dropout_p != 0.0 || q.dim() != 4 || k.dim() != 4 || v.dim() != 4 || !floating_on(q)) return false;
  for (const at::Tensor* t : {&k, &v}) {
    if (t->scalar_type() != q.scalar_type() || t->device() != q.device()) return false;
  }
  if (k.size(1) == 0 || q.size(1) % k.size(1) != 0 || k.size(1) != v.size(1) || k.size(2) != v.size(2)) return false;
  if (mask.has_value() && mask->defined()) {
    const at::Tensor& m = *mask;
    if (m.dim() > 4 || m.device() != q.device() || (m.scalar_type() != at::kBool && m.scalar_type() != q.scalar_type()))
      return false;
  }
  return true;
}

int64_t sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                   const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                   std::optional<double> scale, bool enable_gqa) {
  const bool grouped = query.dim() == 4 && key.dim() == 4 && query.size(1) != key.size(1);
  if ((!grouped || enable_gqa) && fused_supported(query, key, value, attn_mask, dropout_p))
    return static_cast<int64_t>(at::SDPBackend::overrideable);
  return static_cast<int64_t>(at::SDPBackend::math);
}

void set_strides(uint32_t* target, const at::Tensor& t) {
  for (int d = 0; d < 4; d++) target[d] = static_cast<uint32_t>(t.size(d) == 1 ? 0 : t.stride(d));
}

struct Attention {
  Shapes shapes;
  MaskKind mask_kind = MaskKind::None;
  at::Tensor mask;  // broadcast to [B, H, L, S]
};

Attention describe(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                   std::optional<double> scale) {
  Attention a;
  Shapes& s = a.shapes;
  s.batch = static_cast<uint32_t>(q.size(0));
  s.heads = static_cast<uint32_t>(q.size(1));
  s.key_heads = static_cast<uint32_t>(k.size(1));
  s.queries = static_cast<uint32_t>(q.size(2));
  s.keys = static_cast<uint32_t>(k.size(2));
  s.head_size = static_cast<uint32_t>(q.size(3));
  s.value_size = static_cast<uint32_t>(v.size(3));
  const double factor = scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  const uint64_t bits = scalar_bits(factor, float_compute(q.scalar_type()));
  s.scale_low = static_cast<uint32_t>(bits);
  s.scale_high = static_cast<uint32_t>(bits >> 32);
  set_strides(s.q_strides, q);
  set_strides(s.k_strides, k);
  set_strides(s.v_strides, v);
  s.offsets[0] = element_offset(q);
  s.offsets[1] = element_offset(k);
  s.offsets[2] = element_offset(v);
  if (mask.defined()) {
    a.mask_kind = mask.scalar_type() == at::kBool ? MaskKind::Bool : MaskKind::Additive;
    a.mask = mask.expand({q.size(0), q.size(1), q.size(2), k.size(2)});
    set_strides(s.mask_strides, a.mask);
    s.offsets[3] = static_cast<uint32_t>(place_of(a.mask).offset / a.mask.element_size());
  }
  return a;
}

const char* mask_name(MaskKind kind) {
  switch (kind) {
    case MaskKind::None:
      return "MASK_NONE";
    case MaskKind::Additive:
      return "MASK_ADDITIVE";
    default:
      return "MASK_BOOL";
  }
}

void run_attention(const char* entry, Attention& a, bool causal, const at::Tensor& q, const at::Tensor& k,
                   const at::Tensor& v, at::Tensor& out, at::Tensor& stats, const at::Tensor& grad_out,
                   uint64_t invocations) {
  if (invocations == 0) return;
  Device& dev = device(q.device().index());
  const at::ScalarType dtype = q.scalar_type();
  auto buffer = [&](const at::Tensor& t) { return t.defined() && t.numel() > 0 ? place_of(t).buffer : dev.placeholder; };
  const Binding bindings[8] = {Binding{nullptr, 0, sizeof a.shapes, &a.shapes}, Binding{buffer(q)}, Binding{buffer(k)},
                               Binding{buffer(v)}, Binding{buffer(a.mask)}, Binding{buffer(out)}, Binding{buffer(stats)},
                               Binding{buffer(grad_out)}};
  const std::string key = std::string("attention|") + entry + mask_name(a.mask_kind) + wgsl_type(dtype) + (causal ? "c" : "");
  const Kernel& compiled = recipe_kernel(dev, key, [&] {
    KernelRecipe recipe;
    recipe.files = {"attention.wgsl"};
    recipe.types = {{"E", wgsl_type(dtype)},
                    {"F", wgsl_type(float_compute(dtype))},
                    {"M", a.mask_kind == MaskKind::Bool ? "u32" : wgsl_type(dtype)}};
    recipe.overrides = {{"MASK", kernel_constant("attention.wgsl", mask_name(a.mask_kind))},
                        {"CAUSAL", causal ? 1.0 : 0.0}};
    recipe.entry = entry;
    return recipe;
  });
  launch(dev, compiled, bindings, invocations);
}

at::Tensor defined_or_empty(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined() ? *t : at::Tensor(); }

// Score matrices of up to this many elements ([batch, heads, queries, keys], all together)
// are kept in memory: each pass is then the matrix products it is, on the tiled kernel,
// instead of fused kernels that compute every score again for each row of each output.
// PyTorch's CPU attention keeps them too. XHAL_TORCH_ATTENTION_SCORES sets another limit (0:
// always the fused kernels).
int64_t scores_in_memory_limit() {
  constexpr int64_t kDefault = int64_t{1} << 22;
  const char* text = std::getenv("XHAL_TORCH_ATTENTION_SCORES");
  if (text == nullptr || *text == '\0') return kDefault;
  char* end = nullptr;
  const long long limit = std::strtoll(text, &end, 10);
  TORCH_CHECK(end != nullptr && *end == '\0' && limit >= 0, "xhal: XHAL_TORCH_ATTENTION_SCORES is '", text,
              "'; expected a count of score elements (0 or more)");
  return limit;
}

// a @ b for 4-dimensional a and b of the same batch sizes, without copying an operand that a
// transposition left strided (see batched_product); at::matmul otherwise.
at::Tensor product(const at::Tensor& a, const at::Tensor& b) {
  if (a.dim() == 4 && b.dim() == 4 && a.size(0) == b.size(0) && a.size(1) == b.size(1) && a.size(3) == b.size(2)) {
    at::Tensor out = at::empty({a.size(0), a.size(1), a.size(2), b.size(3)}, a.options());
    if (batched_product(out, a, b)) return out;
  }
  return at::matmul(a, b);
}

// Scores of query i for key j, scaled, masked and with the causal mask: [b, h, queries, keys]
// in the compute type, with grouped-query heads' keys repeated for their query heads.
at::Tensor masked_scores(const at::Tensor& q, const at::Tensor& k, const at::Tensor& attn_bias, bool is_causal,
                         double factor) {
  at::Tensor scores = product(q, k.transpose(-2, -1)).mul_(factor);
  if (attn_bias.defined()) {
    if (attn_bias.scalar_type() == at::kBool) {
      scores.masked_fill_(attn_bias.logical_not(), -INFINITY);
    } else {
      scores.add_(attn_bias.to(scores.scalar_type()));
    }
  }
  if (is_causal)
    scores.masked_fill_(at::ones({q.size(2), k.size(2)}, q.options().dtype(at::kBool)).triu(1), -INFINITY);
  return scores;
}

// Key heads repeated for the query heads that share them (grouped-query attention).
at::Tensor per_query_head(const at::Tensor& t, int64_t heads, at::ScalarType compute) {
  const at::Tensor c = t.to(compute);
  return heads == t.size(1) ? c : c.repeat_interleave(heads / t.size(1), 1);
}

// The probabilities from the scores: a softmax over each row, as PyTorch's math path takes it
// (exp(S - lse) instead loses the rounding of lse, about 1e-5 where scores reach 200), and 0
// in a row that sees no key, whose log-sum-exp is +inf, as in the fused kernels.
at::Tensor probabilities(const at::Tensor& scores, const at::Tensor& lse) {
  return at::softmax(scores, -1).masked_fill_((lse == INFINITY).unsqueeze(-1), 0);
}

// The forward pass from whole score matrices: P and out = P v in the compute type, and each
// row's log-sum-exp for the backward pass (+inf for a row that sees no key).
std::pair<at::Tensor, at::Tensor> scores_in_memory_forward(const at::Tensor& query, const at::Tensor& key,
                                                           const at::Tensor& value, const at::Tensor& attn_bias,
                                                           bool is_causal, double factor) {
  const at::ScalarType dtype = query.scalar_type(), compute = float_compute(dtype);
  const int64_t heads = query.size(1);
  const at::Tensor q = query.to(compute);
  const at::Tensor scores = masked_scores(q, per_query_head(key, heads, compute), attn_bias, is_causal, factor);
  const at::Tensor v = per_query_head(value, heads, compute);
  if (auto both = softmax_with_logsumexp(scores)) return {product(both->first, v).to(dtype), both->second};
  at::Tensor lse = at::logsumexp(scores, -1);
  lse.masked_fill_(lse == -INFINITY, INFINITY);
  return {product(probabilities(scores, lse), v).to(dtype), lse};
}

using ForwardResult = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor,
                                 at::Tensor, at::Tensor>;

ForwardResult fused_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                              const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
                              bool return_debug_mask, std::optional<double> scale) {
  TORCH_CHECK(fused_supported(query, key, value, attn_bias, dropout_p),
              "xhal: fused attention takes 4-dimensional query, key and value of one floating dtype, heads a multiple "
              "of the key's, a bool or same-dtype mask, and no dropout; got query ", query.sizes(), " ",
              query.scalar_type(), ", key ", key.sizes(), ", dropout ", dropout_p);
  const at::ScalarType compute = float_compute(query.scalar_type());
  at::Tensor out, lse;
  if (query.size(0) * query.size(1) * query.size(2) * key.size(2) <= scores_in_memory_limit()) {
    std::tie(out, lse) = scores_in_memory_forward(query, key, value, defined_or_empty(attn_bias), is_causal,
                                                  scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(query.size(3))));
  } else {
    Attention a = describe(query, key, value, defined_or_empty(attn_bias), scale);
    out = at::empty({query.size(0), query.size(1), query.size(2), value.size(3)}, query.options());
    lse = at::empty({query.size(0), query.size(1), query.size(2)}, query.options().dtype(compute));
    run_attention("forward", a, is_causal, query, key, value, out, lse, at::Tensor(), lse.numel());
  }
  const at::Tensor none = at::empty({0}, query.options().dtype(at::kLong));
  return {out, lse, none, none, c10::SymInt(query.size(2)), c10::SymInt(key.size(2)), none, none,
          at::empty({0}, query.options())};
}

// The backward pass from whole score matrices, in the compute type: P again from the scores
// (0 in a row whose saved log-sum-exp is +inf), dP = dout v^T, dS = P (dP - delta), and the
// gradients as products with dS and P.
void scores_in_memory_backward(const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key,
                               const at::Tensor& value, const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask,
                               const at::Tensor& logsumexp, const at::Tensor& delta, bool is_causal, double factor,
                               at::Tensor& grad_query, at::Tensor& grad_key, at::Tensor& grad_value,
                               at::Tensor& grad_bias) {
  const at::ScalarType dtype = query.scalar_type(), compute = float_compute(dtype);
  const int64_t b = query.size(0), h = query.size(1), hk = key.size(1), s = key.size(2);
  const int64_t group = h / hk;
  const at::Tensor q = query.to(compute), k = per_query_head(key, h, compute), v = per_query_head(value, h, compute);
  const at::Tensor dout = grad_out.to(compute);
  const at::Tensor p = probabilities(masked_scores(q, k, attn_bias, is_causal, factor), logsumexp.to(compute));
  const at::Tensor dp = product(dout, v.transpose(-2, -1));
  const at::Tensor ds = dp.sub_(delta.to(compute).unsqueeze(-1)).mul_(p);
  // Heads that share a key head sum their gradients.
  auto per_key_head = [&](const at::Tensor& t) {
    return (group == 1 ? t : t.view({b, hk, group, s, t.size(-1)}).sum(2)).to(dtype);
  };
  if (grad_input_mask[0]) grad_query = product(ds, k).mul_(factor).to(dtype);
  if (grad_input_mask[1]) grad_key = per_key_head(product(ds.transpose(-2, -1), q).mul_(factor));
  if (grad_input_mask[2]) grad_value = per_key_head(product(p.transpose(-2, -1), dout));
  if (grad_input_mask[3] && attn_bias.defined() && attn_bias.scalar_type() != at::kBool)
    grad_bias = ds.sum_to_size(attn_bias.sizes()).to(attn_bias.scalar_type());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask, const at::Tensor& out, const at::Tensor& logsumexp,
    const at::Tensor& cum_seq_q, const at::Tensor& cum_seq_k, c10::SymInt max_q, c10::SymInt max_k, double dropout_p,
    bool is_causal, const at::Tensor& philox_seed, const at::Tensor& philox_offset, std::optional<double> scale) {
  TORCH_CHECK(fused_supported(query, key, value, attn_bias, dropout_p), "xhal: fused attention's backward pass got "
              "tensors its forward pass does not take");
  Attention a = describe(query, key, value, attn_bias, scale);
  const at::ScalarType compute = float_compute(query.scalar_type());
  a.shapes.do_offset = element_offset(grad_out);
  set_strides(a.shapes.do_strides, grad_out);
  // The log-sum-exp, then delta_i = dout_i . out_i, in the compute type.
  const at::Tensor delta = (grad_out.to(compute) * out.to(compute)).sum(-1);
  at::Tensor stats = at::cat({logsumexp.to(compute).reshape({-1}), delta.reshape({-1})});
  const int64_t b = query.size(0), h = query.size(1), hk = key.size(1), s = key.size(2), e = query.size(3),
                ev = value.size(3);
  at::Tensor grad_query, grad_key, grad_value, grad_bias;
  if (b * h * query.size(2) * s <= scores_in_memory_limit()) {
    scores_in_memory_backward(grad_out, query, key, value, attn_bias, grad_input_mask, logsumexp, delta, is_causal,
                              scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(e)), grad_query,
                              grad_key, grad_value, grad_bias);
    return {grad_query, grad_key, grad_value, grad_bias};
  }
  if (grad_input_mask[0]) {
    grad_query = at::empty({b, h, query.size(2), e}, query.options());
    run_attention("backward_query", a, is_causal, query, key, value, grad_query, stats, grad_out, grad_query.numel() / std::max<int64_t>(e, 1));
  }
  if (grad_input_mask[1] || grad_input_mask[2]) {
    at::Tensor both = at::empty({b * h * s * (e + ev)}, query.options());
    run_attention("backward_key_value", a, is_causal, query, key, value, both, stats, grad_out, b * h * s);
    // Each query head wrote its own: heads that share a key head sum theirs.
    grad_key = both.narrow(0, 0, b * h * s * e).view({b, hk, h / hk, s, e}).sum(2);
    grad_value = both.narrow(0, b * h * s * e, b * h * s * ev).view({b, hk, h / hk, s, ev}).sum(2);
  }
  if (grad_input_mask[3] && attn_bias.defined()) {
    // The mask's gradient, P (dP - delta), through the device's own operators: a learned
    // bias is rare.
    const double factor = scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(e));
    const at::Tensor k_full = key.repeat_interleave(h / hk, 1), v_full = value.repeat_interleave(h / hk, 1);
    at::Tensor scores = at::matmul(query, k_full.transpose(-2, -1)) * factor + attn_bias;
    if (is_causal) scores = scores.masked_fill(at::ones({query.size(2), s}, query.options().dtype(at::kBool)).triu(1), -INFINITY);
    const at::Tensor p = at::softmax(scores, -1);
    const at::Tensor dp = at::matmul(grad_out, v_full.transpose(-2, -1));
    grad_bias = (p * (dp - delta.unsqueeze(-1).to(p.scalar_type()))).sum_to_size(attn_bias.sizes());
  }
  return {grad_query, grad_key, grad_value, grad_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", sdp_choice);
  m.impl("_scaled_dot_product_fused_attention_overrideable", fused_attention);
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", fused_attention_backward);
}

}  // namespace xhal_torch

// F.scaled_dot_product_attention asks this stub, not the operator, which backend to take.
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &xhal_torch::sdp_choice)
}  // namespace at::native
