// Reductions of the `xhal` PyTorch device (kernels/reduce.wgsl): sum, mean, prod, max and min
// (whole, by dimension with indices, amax and amin), argmax and argmin, all and any, over any
// dimensions of any strides.

#include <ATen/Operators.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <torch/library.h>

#include <limits>

#include "ops.h"

namespace xhal_torch {
namespace {

enum class Reduction { Sum, Mean, Prod, Max, Min, All, Any };

const char* op_name(Reduction op) {
  switch (op) {
    case Reduction::Sum:
      return "OP_SUM";
    case Reduction::Mean:
      return "OP_MEAN";
    case Reduction::Prod:
      return "OP_PROD";
    case Reduction::Max:
      return "OP_MAX";
    case Reduction::Min:
      return "OP_MIN";
    case Reduction::All:
      return "OP_ALL";
    default:
      return "OP_ANY";
  }
}

// The uniform of kernels/reduce.wgsl (struct Layout).
struct ReduceLayout {
  uint32_t numel = 0;
  uint32_t kept = 0;
  uint32_t reduced = 0;
  uint32_t count = 0;
  uint32_t input_offset = 0;
  uint32_t output_offset = 0;
  uint32_t indices_offset = 0;
  uint32_t part = 0;  // elements of each part (split), or parts of each output (merge)
  uint32_t kept_sizes[kMaxDims] = {};
  uint32_t kept_strides[kMaxDims] = {};
  uint32_t reduced_sizes[kMaxDims] = {};
  uint32_t reduced_strides[kMaxDims] = {};
};
static_assert(sizeof(ReduceLayout) == 160, "the WGSL struct Layout is 160 bytes");

// Reductions at least this long get a workgroup each (the `groups` entry point), unless there
// are at least kRowsOutputs of them and none longer than kRowsCount: then an invocation each
// (`rows`) keeps every invocation busy, where a workgroup's tree would cost more than its few
// elements a lane (a linear layer's bias gradient, 256 rows summed into each of 64 outputs).
constexpr uint64_t kGroupThreshold = 128;
constexpr uint64_t kRowsOutputs = 16;
constexpr uint64_t kRowsCount = 1024;
// Fewer outputs than this, each reducing at least kSplitCount elements, are reduced in two
// stages (split, then merge), so that one long reduction is spread over the whole device
// instead of one workgroup; each part is about kSplitPart elements, and there are at most
// kMaxParts of them.
constexpr uint64_t kSplitOutputs = 64;
constexpr uint64_t kSplitCount = 32768;
constexpr uint64_t kSplitPart = 8192;
constexpr uint64_t kMaxParts = 256;
// A CPU device runs a workgroup's invocations in turn, and each workgroup of `split` pays a
// fixed cost (its 256 states, the combine's barriers) that 256 parts of a 4M-element sum
// made a third of its time: 64 parts still give every core several (0.62 to 0.45 ms on two
// cores; lavapipe 6.6 to 4.0 ms).
constexpr uint64_t kMaxPartsInTurn = 64;

// Merges dimension k + 1 of `sizes` and `strides` (the first `n`) into dimension k wherever
// stepping the pair in order is one stride (a contiguous block), so that a reduction over
// all of a contiguous tensor walks one dimension.
void coalesce(uint32_t* sizes, uint32_t* strides, uint32_t& n) {
  if (n == 0) return;
  uint32_t kept = 0;
  for (uint32_t k = 1; k < n; k++) {
    if (static_cast<uint64_t>(strides[kept]) == static_cast<uint64_t>(sizes[k]) * strides[k]) {
      sizes[kept] *= sizes[k];
      strides[kept] = strides[k];
    } else {
      kept++;
      sizes[kept] = sizes[k];
      strides[kept] = strides[k];
    }
  }
  n = kept + 1;
}

// The reduce.wgsl kernel of `entry` for these types.
const Kernel& reduce_kernel(Device& dev, Reduction op, const char* entry, at::ScalarType in_dtype,
                            at::ScalarType result_dtype, at::ScalarType accumulate, bool values, bool indices,
                            bool adjacent = false, bool runs = false) {
  std::string key = std::string("reduce|") + op_name(op) + entry + wgsl_type(in_dtype) + wgsl_type(result_dtype) +
                    wgsl_type(accumulate) + (values ? "v" : "") + (indices ? "i" : "") + (adjacent ? "a" : "") +
                    (runs ? "r" : "");
  return recipe_kernel(dev, key, [&] {
    KernelRecipe recipe;
    recipe.files = {"reduce.wgsl"};
    recipe.types = {{"SI", storage_type(in_dtype)},
                    {"SO", storage_type(result_dtype)},
                    {"A", wgsl_type(accumulate)},
                    {"F", accumulate == at::kDouble ? "f64" : "f32"}};
    recipe.overrides = {{"OP", kernel_constant("reduce.wgsl", op_name(op))},
                        {"BYTES", in_dtype == at::kBool ? 1.0 : 0.0},
                        {"VALUES", values ? 1.0 : 0.0},
                        {"INDICES", indices ? 1.0 : 0.0},
                        {"ADJACENT", adjacent ? 1.0 : 0.0},
                        {"RUNS", runs ? 1.0 : 0.0}};
    recipe.entry = entry;
    return recipe;
  });
}

// One launch: an invocation per output element (rows), or a workgroup per one (groups).
void reduce_in_one(Device& dev, Reduction op, ReduceLayout& layout, at::ScalarType in_dtype,
                   at::ScalarType result_dtype, at::ScalarType accumulate, Binding (&bindings)[4], bool values,
                   bool indices) {
  const bool grouped =
      layout.count >= kGroupThreshold && (layout.count > kRowsCount || layout.numel < kRowsOutputs);
  // A sum over two dimensions whose inner one is adjacent (a convolution's bias gradient) goes
  // run by run of it.
  const bool runs = grouped && (op == Reduction::Sum || op == Reduction::Mean) && in_dtype != at::kBool &&
                    layout.reduced == 2 && layout.reduced_strides[1] == 1 && layout.reduced_sizes[1] >= 32;
  const Kernel& compiled = reduce_kernel(dev, op, grouped ? "groups" : "rows", in_dtype, result_dtype, accumulate,
                                         values, indices, false, runs);
  bindings[0].data = &layout;
  launch(dev, compiled, bindings, grouped ? uint64_t{layout.numel} * 256 : layout.numel);
}

// Two launches for a few long reductions: each output's elements in parts, a workgroup each,
// into partial states, then a workgroup per output combining its parts.
void reduce_in_parts(Device& dev, const at::TensorOptions& options, Reduction op, ReduceLayout& layout,
                     at::ScalarType in_dtype, at::ScalarType result_dtype, at::ScalarType accumulate,
                     Binding (&bindings)[4], bool values, bool indices) {
  const uint64_t count = layout.count;
  const uint64_t max_parts = dev.runs_invocations_in_turn ? kMaxPartsInTurn : kMaxParts;
  uint64_t parts = std::min<uint64_t>(max_parts, (count + kSplitPart - 1) / kSplitPart);
  const uint64_t part = (count + parts - 1) / parts;
  parts = (count + part - 1) / part;
  at::Tensor partial_values = at::empty({static_cast<int64_t>(layout.numel * parts)}, options.dtype(accumulate));
  at::Tensor partial_indices = at::empty({static_cast<int64_t>(layout.numel * parts)}, options.dtype(at::kInt));
  const Binding partials[2] = {Binding{place_of(partial_values).buffer}, Binding{place_of(partial_indices).buffer}};
  ReduceLayout split = layout;
  split.part = static_cast<uint32_t>(part);
  // Sums whose every output's elements run with stride 1 read them four at a time a lane.
  const bool adjacent = (op == Reduction::Sum || op == Reduction::Mean) && in_dtype != at::kBool &&
                        layout.reduced == 1 && layout.reduced_strides[0] == 1;
  const Binding split_bindings[6] = {Binding{nullptr, 0, sizeof split, &split}, bindings[1], bindings[2], bindings[3],
                                     partials[0], partials[1]};
  launch_workgroups(dev, reduce_kernel(dev, op, "split", in_dtype, result_dtype, accumulate, values, indices, adjacent),
                    split_bindings, {static_cast<uint32_t>(parts), layout.numel, 1});
  ReduceLayout merge = layout;
  merge.part = static_cast<uint32_t>(parts);
  const Binding merge_bindings[6] = {Binding{nullptr, 0, sizeof merge, &merge}, bindings[1], bindings[2], bindings[3],
                                     partials[0], partials[1]};
  launch(dev, reduce_kernel(dev, op, "merge", in_dtype, result_dtype, accumulate, values, indices), merge_bindings,
         uint64_t{layout.numel} * 256);
}

// Reduces `input` over `dims` (all of them when none are given) into `values` and/or
// `indices` (int64), each resized to the shape the reduction leaves. A 0-dimensional input
// reduces as one element over dimension 0 or -1. Returns false, doing nothing, when a kernel
// cannot do it; raises PyTorch's errors for bad dimensions.
bool reduce(const at::Tensor& input, at::OptionalIntArrayRef dims, bool keepdim, Reduction op, at::Tensor* values,
            at::Tensor* indices) {
  const at::ScalarType in_dtype = input.scalar_type();
  if (input.dim() > kMaxDims || !on_device(input, in_dtype)) return false;
  const bool extremum = op == Reduction::Max || op == Reduction::Min;
  const bool truth = op == Reduction::All || op == Reduction::Any;
  if (extremum && in_dtype == at::kBool) return false;
  // A 0-dimensional tensor reduces as one element of a 1-dimensional one: PyTorch accepts
  // dimension 0 and -1 for it, and keeps the result 0-dimensional.
  const at::Tensor self = input.dim() == 0 ? input.reshape({1}) : input;
  const int64_t ndim = self.dim();
  std::bitset<at::dim_bitset_size> reduced;
  if (!dims.has_value() || dims->empty()) {
    for (int64_t d = 0; d < ndim; d++) reduced.set(d);
  } else {
    reduced = at::dim_list_to_bitset(*dims, ndim);
  }
  at::DimVector shape;
  ReduceLayout layout;
  uint64_t count = 1;
  for (int64_t d = 0; d < ndim; d++) {
    if (reduced[d]) {
      if (keepdim && input.dim() > 0) shape.push_back(1);
      layout.reduced_sizes[layout.reduced] = static_cast<uint32_t>(self.size(d));
      layout.reduced_strides[layout.reduced] = static_cast<uint32_t>(self.stride(d));
      layout.reduced++;
      count *= self.size(d);
    } else {
      shape.push_back(self.size(d));
      layout.kept_sizes[layout.kept] = static_cast<uint32_t>(self.size(d));
      layout.kept_strides[layout.kept] = static_cast<uint32_t>(self.stride(d));
      layout.kept++;
    }
  }
  at::ScalarType out_dtype = in_dtype;
  if (values != nullptr) {
    prepare_out(*values, shape);
    out_dtype = values->scalar_type();
    if (values->device() != input.device() || !on_device(*values, out_dtype) || wgsl_type(out_dtype) == nullptr)
      return false;
  }
  if (indices != nullptr) {
    prepare_out(*indices, shape);
    if (indices->scalar_type() != at::kLong || indices->device() != input.device()) return false;
  }
  // Sums and products accumulate floats in f32 (f64 when either end is f64) and integers in
  // the output's type; max and min compare in the input's own type; all and any in 0 and 1.
  at::ScalarType accumulate = in_dtype;
  if (truth) {
    if (values == nullptr || out_dtype != at::kBool) return false;
    accumulate = at::kInt;
  } else if (extremum) {
    if (out_dtype != in_dtype) return false;
    accumulate = float_compute(in_dtype);
  } else if (is_floating(out_dtype)) {
    accumulate = in_dtype == at::kDouble || out_dtype == at::kDouble ? at::kDouble : at::kFloat;
  } else {
    if (op == Reduction::Mean || is_floating(in_dtype) || out_dtype == at::kBool) return false;
    accumulate = out_dtype;
  }
  if (!on_device(input, accumulate)) return false;
  const uint64_t out_numel = c10::multiply_integers(shape);
  if (out_numel == 0) return true;
  // An empty max or min is PyTorch's error to raise; the others have a value.
  if (count == 0) {
    if (extremum) return false;
    const double empty = op == Reduction::Mean ? std::numeric_limits<double>::quiet_NaN()
                         : op == Reduction::Prod || op == Reduction::All ? 1.0
                                                                         : 0.0;
    values->fill_(empty);
    return true;
  }
  if (count > std::numeric_limits<uint32_t>::max() || out_numel > std::numeric_limits<uint32_t>::max()) return false;
  // A bool result is bytes, which invocations cannot write one at a time: it is reduced into
  // int32 first, then converted.
  at::Tensor result;
  if (values != nullptr) {
    result = out_dtype == at::kBool || !values->is_contiguous() ? at::empty(shape, values->options().dtype(truth ? at::kInt : out_dtype))
                                                                 : *values;
  }
  at::Tensor index_result;
  if (indices != nullptr) index_result = indices->is_contiguous() ? *indices : at::empty(shape, indices->options());
  Device& dev = device(input.device().index());
  const Place in_place = place_of(self);
  layout.numel = static_cast<uint32_t>(out_numel);
  layout.count = static_cast<uint32_t>(count);
  layout.input_offset = element_offset(self);
  Binding bindings[4] = {Binding{nullptr, 0, sizeof layout, &layout}, Binding{in_place.buffer},
                         Binding{dev.placeholder}, Binding{dev.placeholder}};
  if (result.defined()) {
    if (place_of(result).buffer == in_place.buffer) result = at::empty(shape, result.options());
    layout.output_offset = element_offset(result);
    bindings[2] = Binding{place_of(result).buffer};
  }
  if (index_result.defined()) {
    if (place_of(index_result).buffer == in_place.buffer || (result.defined() && place_of(index_result).buffer == place_of(result).buffer))
      index_result = at::empty(shape, index_result.options());
    layout.indices_offset = element_offset(index_result);
    bindings[3] = Binding{place_of(index_result).buffer};
  }
  const at::ScalarType result_dtype = result.defined() ? result.scalar_type() : in_dtype;
  coalesce(layout.kept_sizes, layout.kept_strides, layout.kept);
  coalesce(layout.reduced_sizes, layout.reduced_strides, layout.reduced);
  if (out_numel < kSplitOutputs && count >= kSplitCount) {
    reduce_in_parts(dev, self.options(), op, layout, in_dtype, result_dtype, accumulate, bindings, result.defined(),
                    index_result.defined());
  } else {
    reduce_in_one(dev, op, layout, in_dtype, result_dtype, accumulate, bindings, result.defined(),
                  index_result.defined());
  }
  if (values != nullptr && !result.is_same(*values)) copy_on_device(*values, result);
  if (indices != nullptr && !index_result.is_same(*indices)) copy_on_device(*indices, index_result);
  return true;
}

at::Tensor& sum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype, at::Tensor& out) {
  if (!reduce(self, dim, keepdim, Reduction::Sum, &out, nullptr))
    return XHAL_FALLBACK(sum_IntList_out, self, dim, keepdim, dtype, out);
  return out;
}

at::Tensor& mean_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                     std::optional<at::ScalarType> dtype, at::Tensor& out) {
  if (!reduce(self, dim, keepdim, Reduction::Mean, &out, nullptr))
    return XHAL_FALLBACK(mean_out, self, dim, keepdim, dtype, out);
  return out;
}

at::Tensor& prod_out(const at::Tensor& self, int64_t dim, bool keepdim, std::optional<at::ScalarType> dtype,
                     at::Tensor& out) {
  if (!reduce(self, at::IntArrayRef(dim), keepdim, Reduction::Prod, &out, nullptr))
    return XHAL_FALLBACK(prod_int_out, self, dim, keepdim, dtype, out);
  return out;
}

at::Tensor prod_all(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  at::ScalarType result = dtype.value_or(at::isIntegralType(self.scalar_type(), true) ? at::kLong : self.scalar_type());
  at::Tensor out = at::empty({}, self.options().dtype(result));
  if (!reduce(self, std::nullopt, false, Reduction::Prod, &out, nullptr)) return XHAL_FALLBACK(prod, self, dtype);
  return out;
}

at::Tensor& amax_out(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, at::Tensor& out) {
  if (!reduce(self, dim, keepdim, Reduction::Max, &out, nullptr)) return XHAL_FALLBACK(amax_out, self, dim, keepdim, out);
  return out;
}

at::Tensor& amin_out(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, at::Tensor& out) {
  if (!reduce(self, dim, keepdim, Reduction::Min, &out, nullptr)) return XHAL_FALLBACK(amin_out, self, dim, keepdim, out);
  return out;
}

// The largest (smallest) element of the whole tensor, as a 0-dimensional tensor.
at::Tensor max_all(const at::Tensor& self) {
  at::Tensor out = at::empty({}, self.options());
  if (self.numel() == 0 || !reduce(self, std::nullopt, false, Reduction::Max, &out, nullptr))
    return XHAL_FALLBACK(max, self);
  return out;
}

at::Tensor min_all(const at::Tensor& self) {
  at::Tensor out = at::empty({}, self.options());
  if (self.numel() == 0 || !reduce(self, std::nullopt, false, Reduction::Min, &out, nullptr))
    return XHAL_FALLBACK(min, self);
  return out;
}

// max and min along one dimension, with the index of the first extremum. An empty dimension
// is PyTorch's error, which the CPU raises.
bool extremum_along(const at::Tensor& self, int64_t dim, bool keepdim, Reduction op, at::Tensor& values,
                    at::Tensor& indices) {
  const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  if (self.dim() > 0 && self.size(d) == 0) return false;
  return reduce(self, at::IntArrayRef(d), keepdim, op, &values, &indices);
}

std::tuple<at::Tensor&, at::Tensor&> max_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& max,
                                                 at::Tensor& max_indices) {
  if (!extremum_along(self, dim, keepdim, Reduction::Max, max, max_indices))
    return XHAL_FALLBACK(max_dim_max, self, dim, keepdim, max, max_indices);
  return {max, max_indices};
}

std::tuple<at::Tensor&, at::Tensor&> min_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& min,
                                                 at::Tensor& min_indices) {
  if (!extremum_along(self, dim, keepdim, Reduction::Min, min, min_indices))
    return XHAL_FALLBACK(min_dim_min, self, dim, keepdim, min, min_indices);
  return {min, min_indices};
}

// argmax and argmin: over one dimension, or over the flattened tensor (whose shape keepdim
// keeps as ones).
bool arg_reduce(at::Tensor& out, const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, Reduction op) {
  if (self.numel() == 0) return false;
  if (dim.has_value()) {
    const int64_t d = c10::maybe_wrap_dim(*dim, std::max<int64_t>(self.dim(), 1));
    return reduce(self, at::IntArrayRef(d), keepdim, op, nullptr, &out);
  }
  if (!keepdim) return reduce(self.reshape({-1}), std::nullopt, false, op, nullptr, &out);
  return reduce(self, std::nullopt, true, op, nullptr, &out);
}

at::Tensor& argmax_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, at::Tensor& out) {
  if (!arg_reduce(out, self, dim, keepdim, Reduction::Max)) return XHAL_FALLBACK(argmax_out, self, dim, keepdim, out);
  return out;
}

at::Tensor& argmin_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, at::Tensor& out) {
  if (!arg_reduce(out, self, dim, keepdim, Reduction::Min)) return XHAL_FALLBACK(argmin_out, self, dim, keepdim, out);
  return out;
}

at::Tensor& all_dims_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, at::Tensor& out) {
  if (!reduce(self, dim, keepdim, Reduction::All, &out, nullptr)) return XHAL_FALLBACK(all_dims_out, self, dim, keepdim, out);
  return out;
}

at::Tensor& any_dims_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, at::Tensor& out) {
  if (!reduce(self, dim, keepdim, Reduction::Any, &out, nullptr)) return XHAL_FALLBACK(any_dims_out, self, dim, keepdim, out);
  return out;
}

at::Tensor& all_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& out) {
  if (!reduce(self, at::IntArrayRef(dim), keepdim, Reduction::All, &out, nullptr))
    return XHAL_FALLBACK(all_out, self, dim, keepdim, out);
  return out;
}

at::Tensor& any_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& out) {
  if (!reduce(self, at::IntArrayRef(dim), keepdim, Reduction::Any, &out, nullptr))
    return XHAL_FALLBACK(any_out, self, dim, keepdim, out);
  return out;
}

at::Tensor& all_all_out(const at::Tensor& self, at::Tensor& out) {
  if (!reduce(self, std::nullopt, false, Reduction::All, &out, nullptr)) return XHAL_FALLBACK(all_all_out, self, out);
  return out;
}

at::Tensor& any_all_out(const at::Tensor& self, at::Tensor& out) {
  if (!reduce(self, std::nullopt, false, Reduction::Any, &out, nullptr)) return XHAL_FALLBACK(any_all_out, self, out);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sum.IntList_out", sum_out);
  m.impl("mean.out", mean_out);
  m.impl("prod.int_out", prod_out);
  m.impl("prod", prod_all);
  m.impl("amax.out", amax_out);
  m.impl("amin.out", amin_out);
  m.impl("max", max_all);
  m.impl("min", min_all);
  m.impl("max.dim_max", max_dim_out);
  m.impl("min.dim_min", min_dim_out);
  m.impl("argmax.out", argmax_out);
  m.impl("argmin.out", argmin_out);
  m.impl("all.dims_out", all_dims_out);
  m.impl("any.dims_out", any_dims_out);
  m.impl("all.out", all_dim_out);
  m.impl("any.out", any_dim_out);
  m.impl("all.all_out", all_all_out);
  m.impl("any.all_out", any_all_out);
}

}  // namespace xhal_torch
