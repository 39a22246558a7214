// Scans, compactions and sorts of the `xhal` PyTorch device (kernels/scan.wgsl and
// kernels/sort.wgsl): cumsum, cumprod, cummax, cummin and logcumsumexp; nonzero and
// masked_select; sort (so argsort and msort) and topk; and flip, by index_select.

#include <ATen/Operators.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <torch/library.h>

#include "ops.h"

namespace xhal_torch {
namespace {

// The uniform of kernels/scan.wgsl (struct Rows).
struct ScanRows {
  uint32_t rows = 0, length = 0, inner = 1, ndim = 0;
  uint32_t sizes[kMaxDims] = {};
};
static_assert(sizeof(ScanRows) == 48, "the WGSL struct Rows of scan.wgsl is 48 bytes");

// The immediate block of kernels/sort.wgsl (struct Rows).
struct SortRows {
  uint32_t rows = 0, length = 0, inner = 1, keep = 0;
};

enum class Scan { Sum, Prod, Max, Min, LogSumExp };

const char* scan_name(Scan op) {
  switch (op) {
    case Scan::Sum:
      return "OP_SUM";
    case Scan::Prod:
      return "OP_PROD";
    case Scan::Max:
      return "OP_MAX";
    case Scan::Min:
      return "OP_MIN";
    default:
      return "OP_LOGSUMEXP";
  }
}

bool integral(at::ScalarType dtype) { return dtype == at::kInt || dtype == at::kLong; }

// The rows of `t` along `dim`: outer x inner rows of `length`.
void rows_along(const at::Tensor& t, int64_t dim, uint32_t& rows, uint32_t& length, uint32_t& inner) {
  const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(t.dim(), 1));
  length = t.dim() == 0 ? 1 : static_cast<uint32_t>(t.size(d));
  inner = 1;
  for (int64_t k = d + 1; k < t.dim(); k++) inner *= static_cast<uint32_t>(t.size(k));
  rows = length == 0 ? 0 : static_cast<uint32_t>(t.numel() / length);
}

// Scans `self` along `dim` into `out` (and `indices` for max and min), accumulating in the
// type PyTorch's CPU does. False when a kernel cannot do it.
bool scan(const at::Tensor& self, int64_t dim, Scan op, at::Tensor& out, at::Tensor* indices) {
  at::ScalarType in = self.scalar_type();
  const at::ScalarType out_dtype = out.scalar_type();
  if (!on_device(self, in) || !on_device(out, out_dtype) || out_dtype == at::kBool || self.dim() > kMaxDims) return false;
  const bool floating = is_floating(out_dtype);
  if ((op == Scan::LogSumExp && !floating) || (!floating && !integral(out_dtype))) return false;
  // Floats accumulate in f64 where the device has it (PyTorch's CPU uses double for float32,
  // logcumsumexp's included), integers in i64; max and min keep the input's own type.
  at::ScalarType accumulate = out_dtype;
  if (op == Scan::Sum || op == Scan::Prod || (op == Scan::LogSumExp && out_dtype != at::kHalf)) {
    if (floating) {
      accumulate = on_device(self, at::kDouble) && out_dtype != at::kHalf ? at::kDouble : at::kFloat;
    } else {
      accumulate = on_device(self, at::kLong) ? at::kLong : at::kInt;
    }
  } else if (out_dtype == at::kHalf) {
    accumulate = at::kFloat;
  }
  if ((op == Scan::Max || op == Scan::Min) && in != out_dtype) return false;
  // Bools are bytes: they scan as int32.
  const at::Tensor input = (in == at::kBool ? self.to(at::kInt) : self).contiguous();
  in = input.scalar_type();
  at::Tensor result = at::empty(self.sizes(), out.options().memory_format(at::MemoryFormat::Contiguous));
  at::Tensor where = indices != nullptr ? at::empty(self.sizes(), self.options().dtype(at::kLong)) : at::Tensor();
  ScanRows layout;
  rows_along(input, dim, layout.rows, layout.length, layout.inner);
  if (layout.rows > 0 && place_of(input).offset == 0) {
    Device& dev = device(self.device().index());
    const std::string key = std::string("scan|") + scan_name(op) + wgsl_type(in) + wgsl_type(out_dtype) + wgsl_type(accumulate);
    const Kernel& compiled = recipe_kernel(dev, key, [&] {
      KernelRecipe recipe;
      recipe.files = {"scan.wgsl"};
      recipe.types = {{"SI", storage_type(in)},
                      {"SO", storage_type(out_dtype)},
                      {"V", wgsl_type(accumulate)},
                      {"F", accumulate == at::kDouble ? "f64" : "f32"}};
      recipe.overrides = {{"OP", kernel_constant("scan.wgsl", scan_name(op))}};
      recipe.entry = "scan";
      return recipe;
    });
    const Binding bindings[4] = {Binding{nullptr, 0, sizeof layout, &layout}, Binding{place_of(result).buffer},
                                 Binding{place_of(input).buffer},
                                 Binding{where.defined() ? place_of(where).buffer : dev.placeholder}};
    launch(dev, compiled, bindings, layout.rows);
  } else if (layout.rows > 0) {
    return false;
  }
  prepare_out(out, self.sizes());
  out.copy_(result);
  if (indices != nullptr) {
    prepare_out(*indices, self.sizes());
    indices->copy_(where);
  }
  return true;
}

at::Tensor& cumsum_out(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype, at::Tensor& out) {
  if (!scan(self, dim, Scan::Sum, out, nullptr)) return XHAL_FALLBACK(cumsum_out, self, dim, dtype, out);
  return out;
}

at::Tensor& cumprod_out(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype, at::Tensor& out) {
  if (!scan(self, dim, Scan::Prod, out, nullptr)) return XHAL_FALLBACK(cumprod_out, self, dim, dtype, out);
  return out;
}

at::Tensor& logcumsumexp_out(const at::Tensor& self, int64_t dim, at::Tensor& out) {
  if (!scan(self, dim, Scan::LogSumExp, out, nullptr)) return XHAL_FALLBACK(_logcumsumexp_out, self, dim, out);
  return out;
}

at::Tensor logcumsumexp(const at::Tensor& self, int64_t dim) {
  at::Tensor out = at::empty({0}, self.options());
  return logcumsumexp_out(self, dim, out);
}

void cummax_helper(const at::Tensor& self, at::Tensor& values, at::Tensor& indices, int64_t dim) {
  if (!scan(self, dim, Scan::Max, values, &indices)) XHAL_FALLBACK(_cummax_helper, self, values, indices, dim);
}

void cummin_helper(const at::Tensor& self, at::Tensor& values, at::Tensor& indices, int64_t dim) {
  if (!scan(self, dim, Scan::Min, values, &indices)) XHAL_FALLBACK(_cummin_helper, self, values, indices, dim);
}

// --- Compactions --------------------------------------------------------------------------------

// Where each kept element goes: the inclusive scan of the mask, and how many are kept.
std::pair<at::Tensor, int64_t> places_of(const at::Tensor& keep) {
  at::Tensor places = at::empty(keep.sizes(), keep.options().dtype(at::kLong));
  scan(keep, 0, Scan::Sum, places, nullptr);
  const int64_t count = keep.numel() == 0 ? 0 : places[-1].item<int64_t>();
  return {places, count};
}

void run_compaction(const char* entry, const at::Tensor& input, const at::Tensor& keep, const at::Tensor& places,
                    at::Tensor& out, ScanRows& layout) {
  Device& dev = device(input.device().index());
  const at::ScalarType in = input.scalar_type(), to = out.scalar_type();
  const std::string key = std::string("scan|") + entry + wgsl_type(in) + wgsl_type(to);
  const Kernel& compiled = recipe_kernel(dev, key, [&] {
    KernelRecipe recipe;
    recipe.files = {"scan.wgsl"};
    recipe.types = {{"SI", storage_type(in)}, {"SO", storage_type(to)}, {"V", "f32"}, {"F", "f32"}};
    recipe.entry = entry;
    return recipe;
  });
  const Binding bindings[5] = {Binding{nullptr, 0, sizeof layout, &layout}, Binding{place_of(out).buffer},
                               Binding{place_of(input).buffer}, Binding{place_of(places).buffer},
                               Binding{place_of(keep).buffer}};
  launch(dev, compiled, bindings, layout.length);
}

at::Tensor& nonzero_out(const at::Tensor& self, at::Tensor& out) {
  auto fallback = [&]() -> at::Tensor& { return XHAL_FALLBACK(nonzero_out, self, out); };
  if (!on_device(self, self.scalar_type()) || !on_device(self, at::kLong) || self.dim() > kMaxDims) return fallback();
  const at::Tensor keep = at::ne(self, 0).to(at::kInt).reshape({-1});
  auto [places, count] = places_of(keep);
  const int64_t ndim = self.dim();
  at::Tensor result = at::empty({count, ndim}, self.options().dtype(at::kLong));
  if (count > 0 && ndim > 0) {
    ScanRows layout;
    layout.length = static_cast<uint32_t>(keep.numel());
    layout.ndim = static_cast<uint32_t>(ndim);
    for (int64_t d = 0; d < ndim; d++) layout.sizes[d] = static_cast<uint32_t>(self.size(d));
    run_compaction("compact_coordinates", keep, keep, places, result, layout);
  }
  prepare_out(out, result.sizes());
  out.copy_(result);
  return out;
}

at::Tensor nonzero(const at::Tensor& self) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return nonzero_out(self, out);
}

at::Tensor& masked_select_out(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out) {
  auto fallback = [&]() -> at::Tensor& { return XHAL_FALLBACK(masked_select_out, self, mask, out); };
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  const at::ScalarType dtype = self.scalar_type();
  if (!on_device(self, dtype) || !on_device(self, at::kLong) || mask.device() != self.device() || dtype == at::kBool)
    return fallback();
  const auto shape = at::infer_size_dimvector(self.sizes(), mask.sizes());
  const at::Tensor keep = mask.expand(shape).to(at::kInt).reshape({-1});
  auto [places, count] = places_of(keep);
  at::Tensor result = at::empty({count}, self.options());
  if (count > 0) {
    const at::Tensor input = self.expand(shape).contiguous().reshape({-1});
    ScanRows layout;
    layout.length = static_cast<uint32_t>(keep.numel());
    run_compaction("compact_values", input, keep, places, result, layout);
  }
  prepare_out(out, result.sizes());
  out.copy_(result);
  return out;
}

at::Tensor masked_select(const at::Tensor& self, const at::Tensor& mask) {
  at::Tensor out = at::empty({0}, self.options());
  return masked_select_out(self, mask, out);
}

// --- Sorting ---------------------------------------------------------------------------------

// Sorts `self` along `dim`, keeping the first `keep` places of each row.
bool sort_rows(const at::Tensor& self, int64_t dim, bool descending, int64_t keep, at::Tensor& values,
               at::Tensor& indices) {
  const at::ScalarType dtype = self.scalar_type();
  if (!on_device(self, dtype) || !on_device(self, at::kLong) || self.dim() > kMaxDims) return false;
  // Bools are bytes: they sort as int32.
  const at::Tensor input = (dtype == at::kBool ? self.to(at::kInt) : self).contiguous();
  const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  at::DimVector shape(self.sizes());
  if (!shape.empty()) shape[d] = keep;
  at::Tensor sorted = at::empty(shape, input.options());
  at::Tensor where = at::empty(shape, self.options().dtype(at::kLong));
  SortRows rows;
  rows_along(input, dim, rows.rows, rows.length, rows.inner);
  rows.keep = static_cast<uint32_t>(keep);
  if (rows.rows > 0 && keep > 0) {
    Device& dev = device(self.device().index());
    const at::ScalarType element = input.scalar_type();
    const std::string key = std::string("sort|") + wgsl_type(element) + (descending ? "d" : "a");
    const Kernel& compiled = recipe_kernel(dev, key, [&] {
      KernelRecipe recipe;
      recipe.files = {"sort.wgsl"};
      recipe.types = {{"E", wgsl_type(element)}, {"F", element == at::kDouble ? "f64" : "f32"}};
      recipe.overrides = {{"DESCENDING", descending ? 1.0 : 0.0}};
      recipe.entry = "sort";
      return recipe;
    });
    const Binding bindings[3] = {Binding{place_of(input).buffer}, Binding{place_of(sorted).buffer},
                                 Binding{place_of(where).buffer}};
    if (place_of(input).offset != 0) return false;
    launch(dev, compiled, bindings, static_cast<uint64_t>(rows.rows) * rows.length, &rows, sizeof rows);
  }
  prepare_out(values, shape);
  values.copy_(dtype == at::kBool ? sorted.to(at::kBool) : sorted);
  prepare_out(indices, shape);
  indices.copy_(where);
  return true;
}

std::tuple<at::Tensor&, at::Tensor&> sort_out(const at::Tensor& self, std::optional<bool> stable, int64_t dim,
                                              bool descending, at::Tensor& values, at::Tensor& indices) {
  const int64_t length = self.dim() == 0 ? 1 : self.size(c10::maybe_wrap_dim(dim, self.dim()));
  if (!sort_rows(self, dim, descending, length, values, indices))
    return XHAL_FALLBACK(sort_values_stable, self, stable, dim, descending, values, indices);
  return {values, indices};
}

std::tuple<at::Tensor&, at::Tensor&> topk_out(const at::Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted,
                                              at::Tensor& values, at::Tensor& indices) {
  const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  const int64_t length = self.dim() == 0 ? 1 : self.size(d);
  TORCH_CHECK(k >= 0 && k <= length, "selected index k out of range");
  if (!sort_rows(self, dim, largest, k, values, indices))
    return XHAL_FALLBACK(topk_values, self, k, dim, largest, sorted, values, indices);
  return {values, indices};
}

// flip: an index_select with reversed indices along each flipped dimension, on the device.
at::Tensor flip(const at::Tensor& self, at::IntArrayRef dims) {
  if (!on_device(self, self.scalar_type()) || !on_device(self, at::kLong)) return XHAL_FALLBACK(flip, self, dims);
  const auto flipped = at::dim_list_to_bitset(dims, std::max<int64_t>(self.dim(), 1));
  at::Tensor out = self;
  for (int64_t d = 0; d < self.dim(); d++) {
    if (!flipped[d]) continue;
    const at::Tensor reversed = at::arange(self.size(d) - 1, -1, -1, self.options().dtype(at::kLong));
    out = at::index_select(out, d, reversed);
  }
  return out.is_same(self) ? self.clone() : out;
}

// roll: slices joined in their rolled order, on the device.
at::Tensor roll(const at::Tensor& self, c10::SymIntArrayRef shifts_, at::IntArrayRef dims) {
  const auto shifts = C10_AS_INTARRAYREF_SLOW(shifts_);
  TORCH_CHECK(!shifts.empty(), "`shifts` required");
  if (dims.empty()) {
    TORCH_CHECK(shifts.size() == 1, "shifts and dimensions must align. shifts: ", shifts.size(), ", dims: 0");
    return roll(self.flatten(), shifts_, {0}).view(self.sizes());
  }
  TORCH_CHECK(shifts.size() == dims.size(), "shifts and dimensions must align. shifts: ", shifts.size(), ", dims:",
              dims.size());
  if (!on_device(self, self.scalar_type())) return XHAL_FALLBACK_SYMINT(roll, self, shifts_, dims);
  at::Tensor out = self;
  for (size_t k = 0; k < dims.size(); k++) {
    const int64_t d = c10::maybe_wrap_dim(dims[k], self.dim());
    const int64_t size = self.size(d);
    if (size == 0) continue;
    const int64_t shift = ((shifts[k] % size) + size) % size;
    if (shift == 0) continue;
    out = at::cat({out.narrow(d, size - shift, shift), out.narrow(d, 0, size - shift)}, d);
  }
  return out.is_same(self) ? self.clone() : out;
}

// masked_scatter_: the mask's true elements take the source's first elements in order, each
// from its place in the mask's scan.
at::Tensor& masked_scatter_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& source) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_scatter_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "masked_scatter: expected self and source to have same dtypes "
              "but got ", self.scalar_type(), " and ", source.scalar_type());
  if (!on_device(self, self.scalar_type()) || !on_device(self, at::kLong) || self.scalar_type() == at::kBool ||
      mask.device() != self.device() || source.device() != self.device())
    return XHAL_FALLBACK(masked_scatter_, self, mask, source);
  const at::Tensor keep = mask.expand(self.sizes()).to(at::kInt).reshape({-1});
  auto [places, count] = places_of(keep);
  TORCH_CHECK(count <= source.numel(), "masked_scatter: expected source to have at least ", count,
              " elements, but it has ", source.numel());
  if (count == 0) return self;
  const at::Tensor from = source.reshape({-1}).index_select(0, (places - 1).clamp_min(0));
  self.copy_(at::where(keep.to(at::kBool), from, self.reshape({-1})).view(self.sizes()));
  return self;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("roll", roll);
  m.impl("masked_scatter_", masked_scatter_);
  m.impl("cumsum.out", cumsum_out);
  m.impl("cumprod.out", cumprod_out);
  m.impl("_logcumsumexp.out", logcumsumexp_out);
  m.impl("_logcumsumexp", logcumsumexp);
  m.impl("_cummax_helper", cummax_helper);
  m.impl("_cummin_helper", cummin_helper);
  m.impl("nonzero.out", nonzero_out);
  m.impl("nonzero", nonzero);
  m.impl("masked_select.out", masked_select_out);
  m.impl("masked_select", masked_select);
  m.impl("sort.values_stable", sort_out);
  m.impl("topk.values", topk_out);
  m.impl("flip", flip);
}

}  // namespace xhal_torch
