// Indexing of the `xhal` PyTorch device (kernels/indexing.wgsl): index_select (so embedding)
// and the embedding's gradient; gather, scatter (with its reductions), index_add, index_copy
// and index_fill along a dimension; advanced indexing (x[i, j]) and index_put (x[i, j] = v,
// with or without accumulation); masked_select; and concatenation through on-device copies.
// Every index is checked on the host first, as PyTorch's CPU checks it.

#include <ATen/Operators.h>
#include <torch/library.h>

#include "ops.h"

namespace xhal_torch {
namespace {

// The immediate block of kernels/indexing.wgsl (struct Gather).
struct GatherLayout {
  uint32_t outer = 1, size = 0, inner = 1, count = 0;
  uint32_t data_offset = 0, index_offset = 0, out_offset = 0, padding = 0xffffffffu;
};
static_assert(sizeof(GatherLayout) == 32, "the WGSL struct Gather is 32 bytes");

bool index_dtype(const at::Tensor& index) {
  return index.scalar_type() == at::kLong || index.scalar_type() == at::kInt;
}

// Raises PyTorch's IndexError unless every index is in [0, size).
void check_indices(const at::Tensor& index, int64_t size, const char* message) {
  if (index.numel() == 0) return;
  const at::Tensor bad = (index < 0) | (index >= size);
  if (bad.any().item<bool>()) TORCH_CHECK_INDEX(false, message);
}

// The type scatters and accumulations combine values of `dtype` in.
const char* value_type(at::ScalarType dtype) {
  if (dtype == at::kLong) return "i64";
  if (dtype == at::kInt || dtype == at::kBool) return "i32";
  return dtype == at::kDouble ? "f64" : "f32";
}

const Kernel& gather_kernel(Device& dev, const char* entry, at::ScalarType dtype, bool wide_index, uint32_t reduce = 0,
                            bool has_alpha = false) {
  const std::string key = std::string("index|") + entry + wgsl_type(dtype) + (wide_index ? "l" : "i") +
                          std::to_string(reduce) + (has_alpha ? "a" : "");
  return recipe_kernel(dev, key, [&] {
    KernelRecipe recipe;
    recipe.files = {"indexing.wgsl"};
    recipe.types = {{"E", storage_type(dtype)}, {"F", dtype == at::kDouble ? "f64" : "f32"}, {"V", value_type(dtype)}};
    recipe.overrides = {{"WIDE_INDEX", wide_index ? 1.0 : 0.0}, {"REDUCE", static_cast<double>(reduce)},
                        {"HAS_ALPHA", has_alpha ? 1.0 : 0.0},
                        {"INTEGER_VALUES", at::isIntegralType(dtype, true) ? 1.0 : 0.0}};
    recipe.entry = entry;
    return recipe;
  });
}

at::Tensor& index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& out) {
  auto fallback = [&]() -> at::Tensor& { return XHAL_FALLBACK(index_select_out, self, dim, index, out); };
  const at::ScalarType dtype = self.scalar_type();
  if (!on_device(self, dtype) || index.dim() > 1 || !index_dtype(index) || index.device() != self.device() ||
      (out.defined() && out.scalar_type() != dtype))
    return fallback();
  const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  const at::Tensor data = self.dim() == 0 ? self.reshape({1}) : self;
  at::DimVector shape(data.sizes());
  shape[d] = index.numel();
  if (dtype == at::kBool) {
    // Bools are bytes, which a gather cannot write one at a time: the rows gather as int32 and
    // come back to bool through a comparison, which writes whole words; all on the device.
    at::Tensor gathered = at::index_select(self.to(at::kInt), dim, index);
    prepare_out(out, gathered.sizes());
    return at::ne_out(out, gathered, 0);
  }
  check_indices(index, data.size(d), "index out of range in self");
  prepare_out(out, self.dim() == 0 ? at::IntArrayRef{} : at::IntArrayRef(shape));
  if (out.numel() == 0) return out;
  const at::Tensor source = data.contiguous();
  const at::Tensor idx = index.contiguous();
  at::Tensor result = out.is_contiguous() ? out : at::empty(out.sizes(), out.options());
  Device& dev = device(self.device().index());
  GatherLayout q;
  q.outer = static_cast<uint32_t>(c10::multiply_integers(source.sizes().slice(0, d)));
  q.size = static_cast<uint32_t>(source.size(d));
  q.inner = static_cast<uint32_t>(c10::multiply_integers(source.sizes().slice(d + 1)));
  q.count = static_cast<uint32_t>(idx.numel());
  q.data_offset = element_offset(source);
  q.index_offset = element_offset(idx);
  q.out_offset = element_offset(result);
  if (place_of(result).buffer == place_of(source).buffer) return fallback();
  const Binding bindings[3] = {Binding{place_of(source).buffer}, Binding{place_of(idx).buffer},
                               Binding{place_of(result).buffer}};
  launch(dev, gather_kernel(dev, "index_select", dtype, idx.scalar_type() == at::kLong), bindings, result.numel(), &q,
         sizeof q);
  if (!result.is_same(out)) out.copy_(result);
  return out;
}

at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  at::Tensor out = at::empty({0}, self.options());
  return index_select_out(self, dim, index, out);
}

at::Tensor embedding_dense_backward(const at::Tensor& grad_output, const at::Tensor& indices, c10::SymInt num_weights,
                                   c10::SymInt padding_idx, bool scale_grad_by_freq) {
  const int64_t rows = num_weights.expect_int();
  if (scale_grad_by_freq || !floating_on(grad_output) || !index_dtype(indices) || indices.device() != grad_output.device())
    return XHAL_FALLBACK_SYMINT(embedding_dense_backward, grad_output, indices, num_weights, padding_idx,
                                scale_grad_by_freq);
  const int64_t width = grad_output.size(-1);
  const at::Tensor grad = grad_output.reshape({-1, width}).contiguous();
  const at::Tensor idx = indices.reshape({-1}).contiguous();
  at::Tensor out = at::empty({rows, width}, grad_output.options());
  if (out.numel() == 0) return out;
  if (idx.numel() == 0) return out.zero_();
  Device& dev = device(out.device().index());
  GatherLayout q;
  q.size = static_cast<uint32_t>(rows);
  q.inner = static_cast<uint32_t>(width);
  q.count = static_cast<uint32_t>(idx.numel());
  const int64_t padding = padding_idx.expect_int();
  q.padding = padding < 0 || padding >= rows ? 0xffffffffu : static_cast<uint32_t>(padding);
  q.data_offset = element_offset(grad);
  q.index_offset = element_offset(idx);
  q.out_offset = element_offset(out);
  constexpr uint64_t kMostInY = 65535;
  const uint64_t deep = (static_cast<uint64_t>(rows) + kMostInY - 1) / kMostInY;
  if (native_dtype(dev, at::kLong) && deep <= kMostInY && (width + 63) / 64 <= static_cast<int64_t>(kMostInY)) {
    // Each row's positions from a stable sort of the indices, found by binary search: the
    // work is the gradient's size and a search per element, where the loop below looks at
    // every index for every element of the weight.
    const auto [sorted, order] = at::sort(idx, /*stable=*/true, 0, false);
    q.index_offset = element_offset(sorted);
    TORCH_CHECK(element_offset(order) == 0, "xhal: embedding's backward pass: the sort's order is a view");
    const Binding bindings[4] = {Binding{place_of(grad).buffer}, Binding{place_of(sorted).buffer},
                                 Binding{place_of(out).buffer}, Binding{place_of(order).buffer}};
    launch_workgroups(dev, gather_kernel(dev, "embedding_backward_sorted", grad.scalar_type(), idx.scalar_type() == at::kLong),
                      bindings,
                      {static_cast<uint32_t>((width + 63) / 64),
                       static_cast<uint32_t>(std::min<uint64_t>(static_cast<uint64_t>(rows), kMostInY)),
                       static_cast<uint32_t>(deep)},
                      &q, sizeof q);
    return out;
  }
  const Binding bindings[3] = {Binding{place_of(grad).buffer}, Binding{place_of(idx).buffer},
                               Binding{place_of(out).buffer}};
  launch(dev, gather_kernel(dev, "embedding_backward", grad.scalar_type(), idx.scalar_type() == at::kLong), bindings,
         out.numel(), &q, sizeof q);
  return out;
}

at::Tensor& cat_out(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out) {
  auto list = tensors.materialize();
  auto fallback = [&]() -> at::Tensor& { return XHAL_FALLBACK(cat_out, tensors, dim, out); };
  std::vector<at::Tensor> parts;
  for (const at::Tensor& t : list) {
    if (t.dim() == 1 && t.numel() == 0) continue;  // the legacy empty tensor joins anything
    parts.push_back(t);
  }
  if (parts.empty() || !on_device(out, out.scalar_type())) return fallback();
  dim = c10::maybe_wrap_dim(dim, parts[0].dim());
  at::DimVector shape(parts[0].sizes());
  shape[dim] = 0;
  for (const auto& t : parts) {
    if (t.device() != out.device() || t.scalar_type() != out.scalar_type() || t.dim() != parts[0].dim()) return fallback();
    shape[dim] += t.size(dim);
  }
  prepare_out(out, shape);
  int64_t at = 0;
  for (const auto& t : parts) {
    at::Tensor slot = out.narrow(dim, at, t.size(dim));
    if (place_of(slot).buffer == place_of(t).buffer || !copy_on_device(slot, t)) return fallback();
    at += t.size(dim);
  }
  return out;
}

// --- gather, scatter, index_add along one dimension ----------------------------------------

// The uniform of the `gather` and `scatter` entry points (struct Along).
struct AlongLayout {
  uint32_t ndim = 0, dim = 0, numel = 0, count = 0;
  uint32_t include_self = 0, pad0 = 0, alpha[2] = {};
  uint32_t sizes[kMaxDims] = {};
  uint32_t index_sizes[kMaxDims] = {};
  uint32_t strides[kMaxDims][4] = {};  // output, data, index, source
  uint32_t offsets[4] = {};
};
static_assert(sizeof(AlongLayout) == 240, "the WGSL struct Along is 240 bytes");

// Raises PyTorch's error unless every index along `dim` is in [0, size).
void check_along(const at::Tensor& index, int64_t dim, int64_t size, const char* op) {
  if (index.numel() == 0) return;
  const at::Tensor bad = (index < 0) | (index >= size);
  if (bad.any().item<bool>()) {
    const int64_t first = index.masked_select(bad).to(at::kCPU)[0].item<int64_t>();
    TORCH_CHECK_INDEX(false, op, "(): index ", first, " is out of bounds for dimension ", dim, " with size ", size);
  }
}

// A 0-dimensional tensor as a 1-dimensional one of one element.
at::Tensor at_least_1d(const at::Tensor& t) { return t.dim() == 0 ? t.reshape({1}) : t; }

void run_along(const char* entry, AlongLayout& layout, const at::Tensor& data, const at::Tensor& index,
               at::Tensor& out, const at::Tensor& source, uint32_t reduce = 0, bool has_alpha = false) {
  if (layout.numel == 0) return;
  Device& dev = device(out.device().index());
  auto buffer = [&](const at::Tensor& t) { return t.defined() && t.numel() > 0 ? place_of(t).buffer : dev.placeholder; };
  const Binding bindings[5] = {Binding{nullptr, 0, sizeof layout, &layout}, Binding{buffer(data)}, Binding{buffer(index)},
                               Binding{buffer(out)}, Binding{buffer(source)}};
  launch(dev, gather_kernel(dev, entry, out.scalar_type(), index.scalar_type() == at::kLong, reduce, has_alpha),
         bindings, layout.numel);
}

at::Tensor& gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad, at::Tensor& out) {
  auto fallback = [&]() -> at::Tensor& { return XHAL_FALLBACK(gather_out, self, dim, index, sparse_grad, out); };
  if (!on_device(self, self.scalar_type()) || self.scalar_type() == at::kBool || !index_dtype(index) ||
      index.device() != self.device() || self.dim() > kMaxDims)
    return fallback();
  // PyTorch's meta kernel checks the shapes and gives the result's.
  const at::Tensor meta = at::gather(at::empty(self.sizes(), self.options().device(at::kMeta)), dim,
                                     at::empty(index.sizes(), index.options().device(at::kMeta)));
  const at::Tensor data = at_least_1d(self), idx = at_least_1d(index);
  const int64_t d = c10::maybe_wrap_dim(dim, data.dim());
  check_along(idx, d, data.size(d), "gather");
  at::Tensor result = at::empty(idx.sizes(), self.options());
  AlongLayout layout;
  layout.ndim = static_cast<uint32_t>(idx.dim());
  layout.dim = static_cast<uint32_t>(d);
  layout.numel = static_cast<uint32_t>(idx.numel());
  for (int64_t k = 0; k < idx.dim(); k++) {
    layout.sizes[k] = static_cast<uint32_t>(idx.size(k));
    layout.index_sizes[k] = static_cast<uint32_t>(idx.size(k));
    layout.strides[k][0] = static_cast<uint32_t>(result.stride(k));
    layout.strides[k][1] = static_cast<uint32_t>(data.stride(k));
    layout.strides[k][2] = static_cast<uint32_t>(idx.stride(k));
  }
  layout.offsets[0] = element_offset(result);
  layout.offsets[1] = element_offset(data);
  layout.offsets[2] = element_offset(idx);
  run_along("gather", layout, data, idx, result, at::Tensor());
  prepare_out(out, meta.sizes());
  out.copy_(result.view(meta.sizes()));
  return out;
}

enum class ScatterReduce : uint32_t { Assign = 0, Sum = 1, Prod = 2, Mean = 3, Max = 4, Min = 5 };

ScatterReduce reduce_of(c10::string_view name) {
  if (name == "add" || name == "sum") return ScatterReduce::Sum;
  if (name == "multiply" || name == "prod") return ScatterReduce::Prod;
  if (name == "mean") return ScatterReduce::Mean;
  if (name == "amax") return ScatterReduce::Max;
  if (name == "amin") return ScatterReduce::Min;
  TORCH_CHECK(false, "reduce argument must be either sum, prod, mean, amax or amin, got ", name);
}

// out = self with `source` scattered into it along `dim` at `index` (whose other dimensions
// may be shorter than self's), combined by `reduce`; index_add and index_copy are this with a
// one-dimensional index (`broadcast_index`) and, for index_add, a factor.
bool scatter(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
             ScatterReduce reduce, bool include_self, bool broadcast_index, const at::Scalar& alpha, at::Tensor& out) {
  const at::ScalarType dtype = self.scalar_type();
  if (!on_device(self, dtype) || dtype == at::kBool || !index_dtype(index) || index.device() != self.device() ||
      source.device() != self.device() || source.scalar_type() != dtype || self.dim() > kMaxDims)
    return false;
  const at::Tensor data = at_least_1d(self), idx = at_least_1d(index), src = at_least_1d(source);
  const int64_t d = c10::maybe_wrap_dim(dim, data.dim());
  check_along(idx, d, data.size(d), broadcast_index ? "index_add" : "scatter");
  at::Tensor result = at::empty(data.sizes(), self.options());
  AlongLayout layout;
  layout.ndim = static_cast<uint32_t>(data.dim());
  layout.dim = static_cast<uint32_t>(d);
  layout.numel = static_cast<uint32_t>(data.numel());
  layout.count = static_cast<uint32_t>(broadcast_index ? idx.numel() : idx.size(d));
  layout.include_self = include_self ? 1 : 0;
  const bool has_alpha = alpha.to<double>() != 1.0;
  const uint64_t alpha_bits = scalar_bits(alpha, dtype == at::kDouble ? at::kDouble : at::kFloat);
  layout.alpha[0] = static_cast<uint32_t>(alpha_bits);
  layout.alpha[1] = static_cast<uint32_t>(alpha_bits >> 32);
  for (int64_t k = 0; k < data.dim(); k++) {
    layout.sizes[k] = static_cast<uint32_t>(data.size(k));
    layout.strides[k][0] = static_cast<uint32_t>(result.stride(k));
    layout.strides[k][1] = static_cast<uint32_t>(data.stride(k));
    layout.strides[k][3] = static_cast<uint32_t>(src.size(k) == 1 && k != d ? 0 : src.stride(k));
    if (broadcast_index) {
      layout.index_sizes[k] = static_cast<uint32_t>(k == d ? idx.numel() : data.size(k));
      layout.strides[k][2] = static_cast<uint32_t>(k == d ? idx.stride(0) : 0);
    } else {
      layout.index_sizes[k] = static_cast<uint32_t>(idx.size(k));
      layout.strides[k][2] = static_cast<uint32_t>(idx.stride(k));
    }
  }
  layout.offsets[0] = element_offset(result);
  layout.offsets[1] = element_offset(data);
  layout.offsets[2] = element_offset(idx);
  layout.offsets[3] = src.numel() > 0 ? element_offset(src) : 0;
  run_along("scatter", layout, data, idx, result, src, static_cast<uint32_t>(reduce), has_alpha);
  prepare_out(out, self.sizes());
  out.copy_(result.view(self.sizes()));
  return true;
}

// The source of a scatter of one value: the value, broadcast to the index's shape.
at::Tensor value_source(const at::Tensor& self, const at::Tensor& index, const at::Scalar& value) {
  return at::full({}, value, self.options()).expand(index.sizes());
}

void check_scatter_shapes(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
  auto meta = [](const at::Tensor& t) { return at::empty(t.sizes(), t.options().device(at::kMeta)); };
  at::scatter(meta(self), dim, meta(index), meta(src));
}

at::Tensor& scatter_src_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                            at::Tensor& out) {
  check_scatter_shapes(self, dim, index, src);
  if (!scatter(self, dim, index, src, ScatterReduce::Assign, true, false, 1, out))
    return XHAL_FALLBACK(scatter_src_out, self, dim, index, src, out);
  return out;
}

at::Tensor& scatter_value_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Scalar& value,
                              at::Tensor& out) {
  if (!scatter(self, dim, index, value_source(self, index, value), ScatterReduce::Assign, true, false, 1, out))
    return XHAL_FALLBACK(scatter_value_out, self, dim, index, value, out);
  return out;
}

at::Tensor& scatter_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                               c10::string_view reduce, at::Tensor& out) {
  check_scatter_shapes(self, dim, index, src);
  if (!scatter(self, dim, index, src, reduce_of(reduce), true, false, 1, out))
    return XHAL_FALLBACK(scatter_reduce_out, self, dim, index, src, reduce, out);
  return out;
}

at::Tensor& scatter_value_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                     const at::Scalar& value, c10::string_view reduce, at::Tensor& out) {
  if (!scatter(self, dim, index, value_source(self, index, value), reduce_of(reduce), true, false, 1, out))
    return XHAL_FALLBACK(scatter_value_reduce_out, self, dim, index, value, reduce, out);
  return out;
}

at::Tensor& scatter_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                            at::Tensor& out) {
  check_scatter_shapes(self, dim, index, src);
  if (!scatter(self, dim, index, src, ScatterReduce::Sum, true, false, 1, out))
    return XHAL_FALLBACK(scatter_add_out, self, dim, index, src, out);
  return out;
}

at::Tensor& scatter_reduce_two_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                   c10::string_view reduce, bool include_self, at::Tensor& out) {
  check_scatter_shapes(self, dim, index, src);
  if (!scatter(self, dim, index, src, reduce_of(reduce), include_self, false, 1, out))
    return XHAL_FALLBACK(scatter_reduce_two_out, self, dim, index, src, reduce, include_self, out);
  return out;
}

// index_add, index_copy and index_fill take a one-dimensional index.
void check_index_along(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                       const char* op) {
  TORCH_CHECK_INDEX(index.dim() <= 1, op, "(): Index is supposed to be a vector");
  const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  if (source.defined() && source.dim() > 0 && self.dim() > 0) {
    TORCH_CHECK(source.dim() == self.dim(), op, "(): Source/destination tensor must have same number of dimensions");
    TORCH_CHECK_INDEX(source.size(d) == index.numel(), op, "(): Number of indices (", index.numel(),
                      ") should be equal to source.size(dim) (", source.size(d), ")");
    for (int64_t k = 0; k < self.dim(); k++) {
      TORCH_CHECK(k == d || source.size(k) == self.size(k), op, "(): Source/destination tensor must have same slice shapes");
    }
  }
}

at::Tensor& index_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                          const at::Scalar& alpha, at::Tensor& out) {
  check_index_along(self, dim, index, source, "index_add");
  if (!scatter(self, dim, index.reshape({-1}), source, ScatterReduce::Sum, true, true, alpha, out))
    return XHAL_FALLBACK(index_add_out, self, dim, index, source, alpha, out);
  return out;
}

at::Tensor& index_copy_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                           at::Tensor& out) {
  check_index_along(self, dim, index, source, "index_copy");
  if (!scatter(self, dim, index.reshape({-1}), source, ScatterReduce::Assign, true, true, 1, out))
    return XHAL_FALLBACK(index_copy_out, self, dim, index, source, out);
  return out;
}

at::Tensor& index_fill_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Scalar& value) {
  check_index_along(self, dim, index, at::Tensor(), "index_fill");
  at::DimVector shape(self.sizes());
  if (!shape.empty()) shape[c10::maybe_wrap_dim(dim, self.dim())] = index.numel();
  const at::Tensor source = at::full({}, value, self.options()).expand(shape);
  if (!scatter(self, dim, index.reshape({-1}), source, ScatterReduce::Assign, true, true, 1, self))
    return XHAL_FALLBACK(index_fill__int_Scalar, self, dim, index, value);
  return self;
}

// --- Advanced indexing ------------------------------------------------------------------------

// The uniform of the advanced-indexing entry points (struct Advanced).
struct AdvancedLayout {
  uint32_t ndim = 0, numel = 0, indices = 0, target_numel = 0;
  uint32_t sizes[kMaxDims] = {};
  uint32_t strides[kMaxDims][4] = {};  // the restrided data, indices 0, 1, 2
  uint32_t value_strides[kMaxDims] = {};
  uint32_t indexed_strides[4] = {};
  uint32_t indexed_sizes[4] = {};
  uint32_t offsets[4] = {};
  uint32_t value_offset = 0, out_offset = 0, target_ndim = 0, pad = 0;
  uint32_t target_sizes[kMaxDims] = {};
  uint32_t target_strides[kMaxDims] = {};
};
static_assert(sizeof(AdvancedLayout) == 336, "the WGSL struct Advanced is 336 bytes");

constexpr int kMaxIndexTensors = 3;

// PyTorch's layout of an advanced index (its AdvancedIndex, which is not exported): index
// tensors broadcast together (bool masks as their nonzero positions), moved to the front with
// the dimensions they index when they are not adjacent, and the data restrided so that the
// indexed dimensions give way to the indices' shape.
struct Indexing {
  at::Tensor src;                    // restrided
  std::vector<at::Tensor> indices;   // int64, expanded to the result's shape
  at::DimVector indexed_sizes;
  at::DimVector indexed_strides;     // in elements
  bool ok = false;
};

Indexing make_indexing(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& orig) {
  Indexing info;
  std::vector<at::Tensor> indices;
  for (const std::optional<at::Tensor>& index : orig) {
    if (!index.has_value() || !index->defined()) {
      indices.emplace_back();
      continue;
    }
    const at::Tensor& t = *index;
    TORCH_CHECK_INDEX(t.scalar_type() == at::kLong || t.scalar_type() == at::kInt || t.scalar_type() == at::kBool ||
                          t.scalar_type() == at::kByte,
                      "tensors used as indices must be long, int, byte or bool tensors");
    if (t.scalar_type() == at::kBool || t.scalar_type() == at::kByte) {
      // A mask stands for the indices of its true elements, one index tensor per dimension.
      const int64_t first = static_cast<int64_t>(indices.size());
      for (int64_t k = 0; k < t.dim(); k++) {
        TORCH_CHECK_INDEX(first + k < self.dim() && t.size(k) == self.size(first + k), "The shape of the mask ",
                          t.sizes(), " at index ", k, " does not match the shape of the indexed tensor ", self.sizes(),
                          " at index ", first + k);
      }
      const at::Tensor nonzero = t.nonzero();
      for (int64_t k = 0; k < t.dim(); k++) indices.push_back(nonzero.select(1, k));
    } else {
      indices.push_back(t);
    }
  }
  TORCH_CHECK_INDEX(static_cast<int64_t>(indices.size()) <= self.dim(), "too many indices for tensor of dimension ",
                    self.dim(), " (got ", indices.size(), ")");
  std::vector<at::Tensor> defined;
  for (const at::Tensor& t : indices) {
    if (t.defined()) defined.push_back(t);
  }
  if (defined.empty() || static_cast<int>(defined.size()) > kMaxIndexTensors) return info;
  at::DimVector shape;
  try {
    for (const at::Tensor& t : defined) shape = at::infer_size_dimvector(shape, t.sizes());
  } catch (const std::exception&) {
    TORCH_CHECK_INDEX(false, "shape mismatch: indexing tensors could not be broadcast together");
  }
  for (at::Tensor& t : indices) {
    if (t.defined()) t = t.expand(shape);
  }
  while (static_cast<int64_t>(indices.size()) < self.dim()) indices.emplace_back();
  at::Tensor src = self;
  // Indexed dimensions that are not adjacent move to the front, with their indices.
  int64_t first = -1, last = -1;
  for (int64_t k = 0; k < static_cast<int64_t>(indices.size()); k++) {
    if (!indices[k].defined()) continue;
    if (first < 0) first = k;
    last = k;
  }
  bool adjacent = true;
  for (int64_t k = first; k <= last; k++) adjacent = adjacent && indices[k].defined();
  if (!adjacent) {
    std::vector<int64_t> order;
    std::vector<at::Tensor> moved;
    for (int64_t k = 0; k < self.dim(); k++) {
      if (indices[k].defined()) {
        order.push_back(k);
        moved.push_back(indices[k]);
      }
    }
    for (int64_t k = 0; k < self.dim(); k++) {
      if (!indices[k].defined()) {
        order.push_back(k);
        moved.emplace_back();
      }
    }
    src = self.permute(order);
    indices = moved;
  }
  int64_t before = 0, after = 0, indexed = 0;
  for (int64_t k = 0; k < src.dim(); k++) {
    if (!indices[k].defined()) {
      (indexed == 0 ? before : after)++;
    } else {
      indexed++;
      info.indexed_sizes.push_back(src.size(k));
      info.indexed_strides.push_back(src.stride(k));
    }
  }
  // Restride: the indexed dimensions give way to the indices' shape, with stride 0.
  at::DimVector sizes(src.sizes().begin(), src.sizes().begin() + before);
  at::DimVector strides(src.strides().begin(), src.strides().begin() + before);
  sizes.append(shape.begin(), shape.end());
  strides.append(shape.size(), 0);
  sizes.append(src.sizes().end() - after, src.sizes().end());
  strides.append(src.strides().end() - after, src.strides().end());
  info.src = src.as_strided(sizes, strides, src.storage_offset());
  for (const at::Tensor& t : indices) {
    if (!t.defined()) continue;
    at::DimVector view(before, 1);
    view.append(t.sizes().begin(), t.sizes().end());
    view.append(after, 1);
    // Index tensors may be on the CPU, as PyTorch allows.
    info.indices.push_back(t.to(src.device(), at::kLong).reshape(view).expand(sizes));
  }
  info.ok = true;
  return info;
}

// Raises PyTorch's IndexError unless every index is within its dimension.
void check_indexing(const Indexing& info) {
  for (size_t k = 0; k < info.indices.size(); k++) {
    const at::Tensor& t = info.indices[k];
    const int64_t size = info.indexed_sizes[k];
    if (t.numel() == 0) continue;
    const at::Tensor bad = (t < -size) | (t >= size);
    if (bad.any().item<bool>()) {
      const int64_t first = t.masked_select(bad).to(at::kCPU)[0].item<int64_t>();
      TORCH_CHECK_INDEX(false, "index ", first, " is out of bounds for dimension ", k, " with size ", size);
    }
  }
}

AdvancedLayout advanced_layout(const Indexing& info) {
  AdvancedLayout layout;
  const at::Tensor& src = info.src;
  layout.ndim = static_cast<uint32_t>(src.dim());
  layout.numel = static_cast<uint32_t>(src.numel());
  layout.indices = static_cast<uint32_t>(info.indices.size());
  for (int64_t d = 0; d < src.dim(); d++) {
    layout.sizes[d] = static_cast<uint32_t>(src.size(d));
    layout.strides[d][0] = static_cast<uint32_t>(src.stride(d));
    for (size_t k = 0; k < info.indices.size(); k++) {
      layout.strides[d][k + 1] = static_cast<uint32_t>(info.indices[k].stride(d));
    }
  }
  layout.offsets[0] = static_cast<uint32_t>(src.storage_offset());
  for (size_t k = 0; k < info.indices.size(); k++) {
    layout.indexed_strides[k] = static_cast<uint32_t>(info.indexed_strides[k]);
    layout.indexed_sizes[k] = static_cast<uint32_t>(info.indexed_sizes[k]);
    layout.offsets[k + 1] = element_offset(info.indices[k]);
  }
  return layout;
}

void run_advanced(const char* entry, AdvancedLayout& layout, const Indexing& info, const at::Tensor& data,
                  const at::Tensor& other, uint64_t invocations) {
  if (invocations == 0) return;
  Device& dev = device(data.device().index());
  auto buffer = [&](const at::Tensor& t) { return t.defined() && t.numel() > 0 ? place_of(t).buffer : dev.placeholder; };
  Binding bindings[6] = {Binding{nullptr, 0, sizeof layout, &layout}, Binding{buffer(data)}, Binding{buffer(other)},
                         Binding{dev.placeholder}, Binding{dev.placeholder}, Binding{dev.placeholder}};
  for (size_t k = 0; k < info.indices.size(); k++) bindings[3 + k] = Binding{buffer(info.indices[k])};
  launch(dev, gather_kernel(dev, entry, data.scalar_type(), true), bindings, invocations);
}

at::Tensor& index_out(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices, at::Tensor& out) {
  auto fallback = [&]() -> at::Tensor& { return XHAL_FALLBACK(index_Tensor_out, self, indices, out); };
  const at::ScalarType dtype = self.scalar_type();
  if (!on_device(self, dtype) || dtype == at::kBool || self.dim() > kMaxDims) return fallback();
  for (const std::optional<at::Tensor>& index : indices) {
    if (index.has_value() && index->defined() && index->device() != self.device() && !index->is_cpu()) return fallback();
  }
  const Indexing info = make_indexing(self, indices);
  if (!info.ok || info.src.dim() > kMaxDims) return fallback();
  check_indexing(info);
  at::Tensor result = at::empty(info.src.sizes(), self.options());
  AdvancedLayout layout = advanced_layout(info);
  layout.out_offset = element_offset(result);
  run_advanced("index_gather", layout, info, self, result, result.numel());
  prepare_out(out, result.sizes());
  out.copy_(result);
  return out;
}

at::Tensor index(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  at::Tensor out = at::empty({0}, self.options());
  return index_out(self, indices, out);
}

at::Tensor& index_put_impl(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                           const at::Tensor& values, bool accumulate, bool unsafe) {
  auto fallback = [&]() -> at::Tensor& { return XHAL_FALLBACK(_index_put_impl_, self, indices, values, accumulate, unsafe); };
  const at::ScalarType dtype = self.scalar_type();
  if (!on_device(self, dtype) || dtype == at::kBool || self.dim() > kMaxDims || !self.is_non_overlapping_and_dense())
    return fallback();
  const Indexing info = make_indexing(self, indices);
  if (!info.ok || info.src.dim() > kMaxDims) return fallback();
  check_indexing(info);
  at::Tensor v = values.to(self.device(), dtype);
  TORCH_CHECK(at::is_expandable_to(v.sizes(), info.src.sizes()), "shape mismatch: value tensor of shape ", values.sizes(),
              " cannot be broadcast to indexing result of shape ", info.src.sizes());
  // Values that share the data's memory are read before any is written.
  if (v.numel() > 0 && place_of(v).buffer == place_of(self).buffer) v = v.clone();
  v = v.expand(info.src.sizes());
  AdvancedLayout layout = advanced_layout(info);
  for (int64_t d = 0; d < v.dim(); d++) layout.value_strides[d] = static_cast<uint32_t>(v.stride(d));
  layout.value_offset = v.numel() > 0 ? element_offset(v) : 0;
  if (accumulate) {
    layout.target_ndim = static_cast<uint32_t>(self.dim());
    layout.target_numel = static_cast<uint32_t>(self.numel());
    for (int64_t d = 0; d < self.dim(); d++) {
      layout.target_sizes[d] = static_cast<uint32_t>(self.size(d));
      layout.target_strides[d] = static_cast<uint32_t>(self.stride(d));
    }
    run_advanced("index_accumulate", layout, info, self, v, self.numel());
  } else {
    run_advanced("index_put", layout, info, self, v, info.src.numel());
  }
  return self;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index_select", index_select);
  m.impl("index_select.out", index_select_out);
  m.impl("embedding_dense_backward", embedding_dense_backward);
  m.impl("cat.out", cat_out);
  m.impl("gather.out", gather_out);
  m.impl("scatter.src_out", scatter_src_out);
  m.impl("scatter.value_out", scatter_value_out);
  m.impl("scatter.reduce_out", scatter_reduce_out);
  m.impl("scatter.value_reduce_out", scatter_value_reduce_out);
  m.impl("scatter_add.out", scatter_add_out);
  m.impl("scatter_reduce.two_out", scatter_reduce_two_out);
  m.impl("index_add.out", index_add_out);
  m.impl("index_copy.out", index_copy_out);
  m.impl("index_fill_.int_Scalar", index_fill_);
  m.impl("index.Tensor", index);
  m.impl("index.Tensor_out", index_out);
  m.impl("_index_put_impl_", index_put_impl);
}

}  // namespace xhal_torch
