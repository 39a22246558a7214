// Elementwise operators of the `xhal` PyTorch device: one kernel family
// (kernels/elementwise.wgsl with its operator files) for arithmetic, math, activations and
// their backward formulas, comparisons, logic, selections and on-device copies, with
// broadcasting, any strides and mixed dtypes. This file picks the operator and fills the
// launch; the kernels hold every formula.

#include <ATen/Operators.h>
#include <torch/library.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>

#include "ops.h"

namespace xhal_torch {

bool native_dtype(const Device& device, at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
    case at::kInt:
    case at::kBool:
      return true;
    case at::kHalf:
      return (device.features & XHAL_DEVICE_FEATURE_F16) != 0;
    case at::kDouble:
      // f64 kernels read scalars, test for NaN and compute their math through u64 bits.
      return (device.features & XHAL_DEVICE_FEATURE_F64) != 0 && (device.features & XHAL_DEVICE_FEATURE_I64) != 0;
    case at::kLong:
      return (device.features & XHAL_DEVICE_FEATURE_I64) != 0;
    default:
      return false;
  }
}

bool is_floating(at::ScalarType dtype) { return dtype == at::kFloat || dtype == at::kHalf || dtype == at::kDouble; }

at::ScalarType float_compute(at::ScalarType dtype) { return dtype == at::kHalf ? at::kFloat : dtype; }

bool on_device(const at::Tensor& t, at::ScalarType dtype) { return native_dtype(device(t.device().index()), dtype); }

bool floating_on(const at::Tensor& t) { return is_floating(t.scalar_type()) && on_device(t, t.scalar_type()); }

uint64_t scalar_bits(const at::Scalar& value, at::ScalarType as) {
  switch (as) {
    case at::kFloat:
    case at::kHalf: {
      const float f = static_cast<float>(value.to<double>());
      uint32_t bits = 0;
      std::memcpy(&bits, &f, sizeof bits);
      return bits;
    }
    case at::kDouble: {
      const double d = value.to<double>();
      uint64_t bits = 0;
      std::memcpy(&bits, &d, sizeof bits);
      return bits;
    }
    case at::kInt:
      return static_cast<uint32_t>(static_cast<int32_t>(value.to<int64_t>()));
    case at::kLong:
      return static_cast<uint64_t>(value.to<int64_t>());
    case at::kBool:
      return value.to<bool>() ? 1 : 0;
    default:
      return 0;
  }
}

bool is_cpu_scalar(const at::Tensor& t) { return t.device().is_cpu() && t.dim() == 0; }

uint32_t element_offset(const at::Tensor& t) { return static_cast<uint32_t>(place_of(t).offset / t.element_size()); }

void prepare_out(at::Tensor& out, at::IntArrayRef shape) { at::native::resize_output(out, shape); }

at::DimVector broadcast_shape(at::ArrayRef<at::Tensor> inputs) {
  at::DimVector shape;
  for (const auto& t : inputs) shape = at::infer_size_dimvector(shape, t.sizes());
  return shape;
}

namespace {

constexpr int kMaxInputs = 3;

// Elementwise kernels also read and write bfloat16, two to a 32-bit word, computing in f32:
// the one family that does (the others reach it through widen_to_float). Within this file a
// floating dtype includes it.
bool floating(at::ScalarType dtype) { return is_floating(dtype) || dtype == at::kBFloat16; }

bool packed(at::ScalarType dtype) { return dtype == at::kBool || dtype == at::kBFloat16; }

const char* element_storage(at::ScalarType dtype) { return packed(dtype) ? "u32" : storage_type(dtype); }

at::ScalarType compute_type(at::ScalarType dtype) { return dtype == at::kBFloat16 ? at::kFloat : float_compute(dtype); }

bool storable(const Device& dev, at::ScalarType dtype) { return dtype == at::kBFloat16 || native_dtype(dev, dtype); }

// The immediate block of kernels/elementwise.wgsl (struct Params).
struct ElementwiseParams {
  uint32_t numel = 0;
  uint32_t ndim = 0;
  uint32_t pad0 = 0;
  uint32_t pad1 = 0;
  uint32_t offsets[4] = {};
  uint32_t scalars[4] = {};
  uint32_t constants[4] = {};
  uint32_t extra[4] = {};
};
static_assert(sizeof(ElementwiseParams) == 80, "the WGSL struct Params is 80 bytes");

// Elements of a run of `strided_runs` (kernels/elementwise.wgsl's RUN_LENGTH).
constexpr uint32_t kStridedRunLength = 64;

// The uniform of the strided entry points (struct Shape).
struct ElementwiseShape {
  uint32_t sizes[kMaxDims] = {};
  uint32_t strides[kMaxDims][4] = {};  // output, inputs 0, 1, 2
};
static_assert(sizeof(ElementwiseShape) == 160, "the WGSL struct Shape is 160 bytes");

void set_bits(uint32_t* slot, uint64_t bits) {
  slot[0] = static_cast<uint32_t>(bits);
  slot[1] = static_cast<uint32_t>(bits >> 32);
}

char dtype_code(at::ScalarType dtype) { return static_cast<char>('A' + static_cast<int>(dtype)); }

bool integral(at::ScalarType dtype) { return dtype == at::kInt || dtype == at::kLong; }

// An output laid out densely in another order than row-major (the output of an operation on
// a transposed tensor) is walked in its memory order: every operand is permuted so that the
// output is contiguous, which its kernel then writes as flat memory.
bool elementwise_in_memory_order(at::Tensor& out, at::ArrayRef<at::Tensor> inputs, ElementwiseOp op,
                                 const Computation& how) {
  std::vector<int64_t> order(out.dim());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return out.stride(a) > out.stride(b); });
  at::Tensor permuted = out.permute(order);
  if (!permuted.is_contiguous()) return false;
  std::vector<at::Tensor> operands;
  for (const at::Tensor& input : inputs) {
    if (is_cpu_scalar(input)) {
      operands.push_back(input);
    } else {
      operands.push_back((input.sizes() == out.sizes() ? input : input.expand(out.sizes())).permute(order));
    }
  }
  return elementwise(permuted, operands, op, how);
}

}  // namespace

// Elements an invocation of kernels/elementwise.wgsl's `main_runs` (FLAT_RUNS).
constexpr uint32_t kFlatRuns = 16;

// A tuning pass's candidate forced on this thread while it times it: -1 none, 0 an element an
// invocation (`plain`, `main`), 1 `main_runs`.
thread_local int t_forced_flat_runs = -1;

// Whether flat operands take `main_runs` on `dev`: XHAL_TORCH_ELEMENTWISE_RUNS (`on`, `off`)
// when set; else the answer of a tuning pass kept on disk (tuning_cache.cpp); else a pass now:
// `x + y` over 1M floats timed both ways (three runs each after one to compile and warm up),
// the faster kept for the process and on disk. Both compute each element alike, so the
// choice changes only the time. Inside a graph capture nothing is timed: an element an
// invocation, until a pass outside one.
bool flat_runs_for(Device& dev) {
  if (t_forced_flat_runs >= 0) return t_forced_flat_runs == 1;
  const int known = dev.flat_runs.load(std::memory_order_relaxed);
  if (known >= 0) return known == 1;
  const std::optional<size_t> answer = tuned_answer(
      dev, "XHAL_TORCH_ELEMENTWISE_RUNS", {"on", "off"}, tuning_question("elementwise runs", "elementwise.wgsl"),
      [&] {
        // Operations of the pass itself (making its operands) take an element an invocation;
        // the thread's choice is free again when the pass ends, however it ends.
        struct Forcing {
          Forcing() { t_forced_flat_runs = 0; }
          ~Forcing() { t_forced_flat_runs = -1; }
        } forcing;
        const auto options =
            at::TensorOptions().dtype(at::kFloat).device(c10::Device(c10::DeviceType::PrivateUse1, dev.index));
        const at::Tensor a = at::ones({1 << 20}, options), b = at::ones({1 << 20}, options);
        at::Tensor sum = at::empty({1 << 20}, options);
        xhal_stream_t* stream = current_xhal_stream(dev.index);
        std::vector<double> seconds;
        for (int candidate : {1, 0}) {  // in runs (`on`), then an element an invocation (`off`)
          t_forced_flat_runs = candidate;
          at::add_out(sum, a, b);
          check(xhal_stream_synchronize(stream), "synchronize");
          const auto start = std::chrono::steady_clock::now();
          for (int run = 0; run < 3; run++) at::add_out(sum, a, b);
          check(xhal_stream_synchronize(stream), "synchronize");
          seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 3);
        }
        return seconds;
      },
      [](size_t k) {
        return std::string("runs flat elementwise operations ") +
               (k == 0 ? "in runs of " + std::to_string(kFlatRuns) : std::string("an element an invocation"));
      });
  if (!answer) return false;
  const bool runs = *answer == 0;
  dev.flat_runs.store(runs ? 1 : 0, std::memory_order_relaxed);
  return runs;
}

bool elementwise(at::Tensor& out, at::ArrayRef<at::Tensor> inputs, ElementwiseOp op, const Computation& how) {
  if (!how.uses_index && out.dim() > 1 && !out.is_contiguous() && out.is_non_overlapping_and_dense()) {
    for (const at::Tensor& input : inputs) {
      if (!is_cpu_scalar(input) && input.dim() > out.dim()) return false;
    }
    return elementwise_in_memory_order(out, inputs, op, how);
  }
  const at::ScalarType out_dtype = out.scalar_type();
  if (element_storage(out_dtype) == nullptr || out.dim() > kMaxDims || inputs.size() > kMaxInputs) return false;
  if (out.numel() == 0) return true;
  Device& dev = device(out.device().index());
  if (!storable(dev, out_dtype)) return false;
  const bool packed_out = packed(out_dtype);
  const uint32_t packing = out_dtype == at::kBool ? 4 : 2;
  if (packed_out && !out.is_contiguous()) return false;
  const Place out_place = place_of(out);
  constexpr uint64_t kLimit = std::numeric_limits<uint32_t>::max() / 4;
  if (static_cast<uint64_t>(out.numel()) > kLimit || out_place.offset > kLimit) return false;

  // The compute types: F and I of the kernel. Floating operators compute in the given type
  // (f64 or f32), integer ones in i64 or i32; a logical operator reads each input in a type
  // that holds it.
  const bool floating_ops = op.file == kFloatOps;
  const bool integer_ops = op.file == kIntegerOps;
  at::ScalarType compute = how.compute;
  if (compute == at::ScalarType::Undefined) compute = floating_ops ? compute_type(out_dtype) : out_dtype;
  bool wide_float = compute == at::kDouble;
  bool wide_int = compute == at::kLong;
  if (floating_ops && !is_floating(compute)) return false;
  if (integer_ops && compute != at::kInt && compute != at::kLong) return false;
  if (!floating_ops && !integer_ops) {
    for (const at::Tensor& input : inputs) {
      wide_float = wide_float || input.scalar_type() == at::kDouble;
      wide_int = wide_int || input.scalar_type() == at::kLong;
    }
  }
  const at::ScalarType float_type = wide_float ? at::kDouble : at::kFloat;
  const at::ScalarType int_type = wide_int ? at::kLong : at::kInt;
  if ((wide_float && !native_dtype(dev, at::kDouble)) || (wide_int && !native_dtype(dev, at::kLong))) return false;
  // f16 and the 64-bit types meet through f32 on the CPU instead: not every backend converts
  // between them directly.
  bool any_half = out_dtype == at::kHalf;

  ElementwiseParams params;
  params.numel = static_cast<uint32_t>(out.numel());
  params.offsets[0] = static_cast<uint32_t>(out_place.offset / out.element_size());
  const at::ScalarType scalar_type = integer_ops ? int_type : float_type;
  if (how.diagonal.has_value()) {
    params.scalars[0] = static_cast<uint32_t>(*how.diagonal);
  } else {
    set_bits(&params.scalars[0], scalar_bits(how.a, scalar_type));
  }
  set_bits(&params.scalars[2], scalar_bits(how.b, scalar_type));
  set_bits(&params.extra[0], scalar_bits(how.c, scalar_type));
  params.extra[2] = how.words[0];
  params.extra[3] = how.words[1];

  uint32_t bytes = 0, halves = 0, in_out = 0, constant = 0, floating_inputs = 0;
  bool flat = out.is_contiguous();
  // kernels/elementwise.wgsl's bindings: the output, the inputs, the shape.
  Binding bindings[2 + kMaxInputs];
  bindings[0] = Binding{out_place.buffer};
  at::ScalarType input_storage[kMaxInputs] = {at::kFloat, at::kFloat, at::kFloat};
  at::Tensor expanded[kMaxInputs];
  for (size_t k = 0; k < inputs.size(); k++) {
    const at::Tensor& input = inputs[k];
    const at::ScalarType dtype = input.scalar_type();
    bindings[1 + k] = Binding{dev.placeholder};
    if (is_cpu_scalar(input)) {
      constant |= 1u << k;
      // A scalar reaches the kernel in the type the operator reads it as: floating and
      // integer operators read theirs; comparisons read the type they compare in; logic reads
      // each input by its own dtype.
      bool as_float = floating(dtype);
      if (floating_ops || floating(how.compute)) as_float = true;
      if (integer_ops || integral(how.compute)) as_float = false;
      if (as_float) floating_inputs |= 1u << k;
      uint32_t* slot = k == 0 ? &params.constants[0] : k == 1 ? &params.constants[2] : &params.extra[0];
      set_bits(slot, scalar_bits(input.item(), as_float ? float_type : int_type));
      continue;
    }
    if (input.device() != out.device() || !storable(dev, dtype)) return false;
    if (floating(dtype)) floating_inputs |= 1u << k;
    any_half = any_half || dtype == at::kHalf;
    expanded[k] = input.sizes() == out.sizes() ? input : input.expand(out.sizes());
    flat = flat && expanded[k].is_contiguous();
    const Place place = place_of(expanded[k]);
    if (place.offset > kLimit) return false;
    params.offsets[k + 1] = static_cast<uint32_t>(place.offset / input.element_size());
    if (dtype == at::kBool) bytes |= 1u << k;
    if (dtype == at::kBFloat16) halves |= 1u << k;
    if (place.buffer == out_place.buffer) {
      // Read through the output's binding: a buffer bound twice, once writable, is an error on
      // some backends.
      if (std::strcmp(element_storage(dtype), element_storage(out_dtype)) != 0) return false;
      in_out |= 1u << k;
      input_storage[k] = out_dtype;
    } else {
      bindings[1 + k] = Binding{place.buffer};
      input_storage[k] = dtype;
    }
  }
  for (size_t k = inputs.size(); k < kMaxInputs; k++) bindings[1 + k] = Binding{dev.placeholder};
  if (any_half && (wide_float || wide_int)) return false;

  ElementwiseShape shape;
  if (!flat) {
    // Dimensions of size 1 are left out, and a dimension joins the one before it wherever
    // every operand steps through the pair as one (a contiguous block, a broadcast one): each
    // dimension costs the kernel a division per element.
    uint32_t ndim = 0;
    for (int64_t d = 0; d < out.dim(); d++) {
      const uint32_t size = static_cast<uint32_t>(out.size(d));
      if (size == 1) continue;
      uint32_t strides[4] = {static_cast<uint32_t>(out.stride(d)), 0, 0, 0};
      for (size_t k = 0; k < inputs.size(); k++) {
        if (expanded[k].defined()) strides[k + 1] = static_cast<uint32_t>(expanded[k].stride(d));
      }
      bool joins = ndim > 0;
      for (int k = 0; k < 4 && joins; k++) {
        joins = static_cast<uint64_t>(shape.strides[ndim - 1][k]) == static_cast<uint64_t>(size) * strides[k];
      }
      if (joins) {
        shape.sizes[ndim - 1] *= size;
        for (int k = 0; k < 4; k++) shape.strides[ndim - 1][k] = strides[k];
      } else {
        shape.sizes[ndim] = size;
        for (int k = 0; k < 4; k++) shape.strides[ndim][k] = strides[k];
        ndim++;
      }
    }
    if (ndim == 0) {
      shape.sizes[0] = 1;
      ndim = 1;
    }
    params.ndim = ndim;
  }
  // Floating results over flat operands with no bytes or half-words (most of a model's
  // arithmetic) use `plain`, whose indices a compiler for CPUs can see move with the
  // invocation.
  const bool plain = flat && !packed_out && bytes == 0 && halves == 0 && std::strcmp(op.file, kFloatOps) == 0;
  // A device that runs an invocation at a time takes strided elements a run of the innermost
  // dimension at a time: even a run of 4 shares one element's divisions among 4 (a permuted
  // [8, 32, 4, 16] tensor's copy goes from 303 to 80 µs with runs of 16).
  const bool runs = !flat && !packed_out && dev.runs_invocations_in_turn &&
                    shape.sizes[params.ndim - 1] >= 4;
  const bool flat_runs = flat && !packed_out && flat_runs_for(dev);
  const char* entry = packed_out  ? (flat ? "main_packed" : "strided_packed")
                      : flat_runs ? "main_runs"
                                  : (plain ? "plain" : flat ? "main" : runs ? "strided_runs" : "strided");
  const uint32_t code = kernel_constant(op.file, op.name);
  const uint32_t arity = static_cast<uint32_t>(inputs.size());

  // The operator, entry, types and flags identify the kernel: a short key, written without
  // formatting into this thread's buffer, which keeps its capacity from one operation to the
  // next.
  thread_local std::string key;
  key.clear();
  key += op.file[12];  // elementwise_(f)loat, (i)nteger, (l)ogical
  key += std::to_string(code);
  key += entry[0];
  key += entry[std::strlen(entry) - 1];
  key += dtype_code(out_dtype);
  for (int k = 0; k < kMaxInputs; k++) key += dtype_code(input_storage[k]);
  key += dtype_code(float_type);
  key += dtype_code(int_type);
  for (uint32_t flags : {arity, bytes, halves, in_out, constant, floating_inputs}) key += static_cast<char>('0' + flags);
  const Kernel& compiled = recipe_kernel(dev, key, [&] {
    KernelRecipe recipe;
    recipe.files = {"elementwise.wgsl", op.file};
    recipe.types = {{"SO", element_storage(out_dtype)},
                    {"S0", element_storage(input_storage[0])},
                    {"S1", element_storage(input_storage[1])},
                    {"S2", element_storage(input_storage[2])},
                    {"F", wgsl_type(float_type)},
                    {"I", wgsl_type(int_type)}};
    recipe.overrides = {{"OP", code},         {"ARITY", arity},        {"BYTES", bytes},
                        {"HALVES", halves},   {"PACKING", packing},    {"IN_OUT", in_out},
                        {"CONSTANT", constant}, {"FLOATING", floating_inputs}};
    recipe.entry = entry;
    return recipe;
  });
  if (!flat) bindings[1 + kMaxInputs] = Binding{nullptr, 0, sizeof shape, &shape};
  const uint64_t first = params.offsets[0];
  uint64_t invocations = packed_out ? (first + params.numel + packing - 1) / packing - first / packing : params.numel;
  if (flat_runs) invocations = (params.numel + kFlatRuns - 1) / kFlatRuns;
  if (runs) {
    const uint64_t inner = shape.sizes[params.ndim - 1];
    invocations = params.numel / inner * ((inner + kStridedRunLength - 1) / kStridedRunLength);
  }
  launch(dev, compiled, at::ArrayRef<Binding>(bindings, 2 + kMaxInputs), invocations, &params, sizeof params);
  return true;
}

bool copy_on_device(at::Tensor& destination, const at::Tensor& source) {
  const at::ScalarType to = destination.scalar_type();
  const at::ScalarType from = source.scalar_type();
  if (wgsl_type(to) == nullptr || wgsl_type(from) == nullptr) return false;
  if (to == at::kBool) return elementwise(destination, {source}, {kLogicalOps, "OP_NONZERO"});
  if (floating(to)) {
    // Computed in the wider of the two floating types, so that the value rounds once.
    const at::ScalarType compute = to == at::kDouble || from == at::kDouble ? at::kDouble : at::kFloat;
    return elementwise(destination, {source}, {kFloatOps, "OP_COPY"}, {compute});
  }
  return elementwise(destination, {source}, {kIntegerOps, "OP_COPY"}, {to});
}

namespace {

// --- Arithmetic ----------------------------------------------------------------------------

bool numeric(at::ScalarType dtype) { return dtype != at::kBool && wgsl_type(dtype) != nullptr; }

// A binary operator with a floating or an integer form, by the output's dtype.
bool arithmetic(at::Tensor& out, at::ArrayRef<at::Tensor> inputs, const char* name, const Computation& how = {}) {
  const at::ScalarType dtype = out.scalar_type();
  if (floating(dtype)) return elementwise(out, inputs, {kFloatOps, name}, how);
  if (integral(dtype)) {
    Computation integer = how;
    integer.compute = dtype;
    return elementwise(out, inputs, {kIntegerOps, name}, integer);
  }
  return false;
}

// PyTorch's ZeroDivisionError, for integer division and remainders by a tensor or a scalar.
void check_integer_divisor(const at::Tensor& divisor) {
  if (is_cpu_scalar(divisor)) {
    TORCH_CHECK(divisor.item<int64_t>() != 0, "ZeroDivisionError");
    return;
  }
  TORCH_CHECK(!at::eq(divisor, 0).any().item<bool>(), "ZeroDivisionError");
}

at::Tensor& add_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, other}));
  if (out.scalar_type() == at::kBool) {
    // bool + bool is `or`, with alpha 1 (PyTorch refuses another alpha for bools).
    if (elementwise(out, {self, other}, {kLogicalOps, "OP_OR"})) return out;
  } else if (arithmetic(out, {self, other}, "OP_ADD", {.a = alpha})) {
    return out;
  }
  return XHAL_FALLBACK(add_out, self, other, alpha, out);
}

at::Tensor& sub_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, other}));
  if (!arithmetic(out, {self, other}, "OP_SUB", {.a = alpha})) return XHAL_FALLBACK(sub_out, self, other, alpha, out);
  return out;
}

at::Tensor& mul_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, other}));
  const bool done = out.scalar_type() == at::kBool ? elementwise(out, {self, other}, {kLogicalOps, "OP_AND"})
                                                   : arithmetic(out, {self, other}, "OP_MUL");
  if (!done) return XHAL_FALLBACK(mul_out, self, other, out);
  return out;
}

at::Tensor& div_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, other}));
  if (!floating(out.scalar_type()) || !elementwise(out, {self, other}, {kFloatOps, "OP_DIV"}))
    return XHAL_FALLBACK(div_out, self, other, out);
  return out;
}

bool divide_rounded(at::Tensor& out, const at::Tensor& self, const at::Tensor& other, const char* name) {
  if (integral(out.scalar_type()) && on_device(out, out.scalar_type())) check_integer_divisor(other);
  return arithmetic(out, {self, other}, name);
}

at::Tensor& div_mode_out(const at::Tensor& self, const at::Tensor& other, std::optional<c10::string_view> mode,
                         at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, other}));
  bool done = false;
  if (!mode.has_value()) {
    done = floating(out.scalar_type()) && elementwise(out, {self, other}, {kFloatOps, "OP_DIV"});
  } else {
    done = divide_rounded(out, self, other, *mode == "trunc" ? "OP_DIV_TRUNC" : "OP_DIV_FLOOR");
  }
  if (!done) return XHAL_FALLBACK(div_out_mode, self, other, mode, out);
  return out;
}

at::Tensor& floor_divide_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, other}));
  if (!divide_rounded(out, self, other, "OP_DIV_FLOOR")) return XHAL_FALLBACK(floor_divide_out, self, other, out);
  return out;
}

at::Tensor& remainder_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, other}));
  if (!divide_rounded(out, self, other, "OP_REMAINDER")) return XHAL_FALLBACK(remainder_Tensor_out, self, other, out);
  return out;
}

at::Tensor& fmod_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, other}));
  if (!divide_rounded(out, self, other, "OP_FMOD")) return XHAL_FALLBACK(fmod_Tensor_out, self, other, out);
  return out;
}

#define XHAL_BINARY(aten, fallback_op, name, floats_only)                                           \
  at::Tensor& aten##_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {       \
    prepare_out(out, broadcast_shape({self, other}));                                              \
    if ((floats_only && !floating(out.scalar_type())) || !arithmetic(out, {self, other}, name)) \
      return XHAL_FALLBACK(fallback_op, self, other, out);                                         \
    return out;                                                                                    \
  }

XHAL_BINARY(maximum, maximum_out, "OP_MAXIMUM", false)
XHAL_BINARY(minimum, minimum_out, "OP_MINIMUM", false)
XHAL_BINARY(fmax, fmax_out, "OP_FMAX", true)
XHAL_BINARY(fmin, fmin_out, "OP_FMIN", true)
XHAL_BINARY(atan2, atan2_out, "OP_ATAN2", true)
XHAL_BINARY(hypot, hypot_out, "OP_HYPOT", true)
XHAL_BINARY(copysign, copysign_out, "OP_COPYSIGN", true)
XHAL_BINARY(xlogy, xlogy_OutTensor, "OP_XLOGY", true)
XHAL_BINARY(pow_tensor, pow_Tensor_Tensor_out, "OP_POW", false)
XHAL_BINARY(logaddexp, logaddexp_out, "OP_LOGADDEXP", true)
XHAL_BINARY(logaddexp2, logaddexp2_out, "OP_LOGADDEXP2", true)
XHAL_BINARY(heaviside, heaviside_out, "OP_HEAVISIDE", false)
XHAL_BINARY(xlog1py, special_xlog1py_out, "OP_XLOG1PY", true)

// x ** exponent for a scalar exponent: the exponents PyTorch's CPU computes exactly (squares,
// cubes, square roots, reciprocals) by their arithmetic, any other through pow.
at::Tensor& pow_tensor_scalar_out(const at::Tensor& self, const at::Scalar& exponent, at::Tensor& out) {
  prepare_out(out, self.sizes());
  const at::ScalarType dtype = out.scalar_type();
  bool done = false;
  if (floating(dtype)) {
    const double e = exponent.to<double>();
    const char* name = "OP_POW";
    if (e == 1.0) name = "OP_COPY";
    if (e == 2.0) name = "OP_SQUARE";
    if (e == 3.0) name = "OP_CUBE";
    if (e == 0.5) name = "OP_SQRT";
    if (e == -0.5) name = "OP_RSQRT";
    if (e == -1.0) name = "OP_RECIPROCAL";
    if (e == -2.0) name = "OP_RECIPROCAL_SQUARE";
    const at::Tensor power = at::scalar_tensor(exponent, at::kDouble);
    done = std::strcmp(name, "OP_POW") == 0 ? elementwise(out, {self, power}, {kFloatOps, name})
                                            : elementwise(out, {self}, {kFloatOps, name});
  } else if (integral(dtype)) {
    const int64_t e = exponent.to<int64_t>();
    TORCH_CHECK(e >= 0 || !exponent.isIntegral(false), "Integers to negative integer powers are not allowed.");
    done = elementwise(out, {self, at::scalar_tensor(exponent, at::kLong)}, {kIntegerOps, "OP_POW"}, {dtype});
  }
  if (!done) return XHAL_FALLBACK(pow_Tensor_Scalar_out, self, exponent, out);
  return out;
}

at::Tensor& pow_scalar_out(const at::Scalar& base, const at::Tensor& exponent, at::Tensor& out) {
  prepare_out(out, exponent.sizes());
  if (base.isComplex()) return XHAL_FALLBACK(pow_Scalar_out, base, exponent, out);
  const at::Tensor scalar = at::scalar_tensor(base, base.isFloatingPoint() ? at::kDouble : at::kLong);
  if (!arithmetic(out, {scalar, exponent}, "OP_POW")) return XHAL_FALLBACK(pow_Scalar_out, base, exponent, out);
  return out;
}

// --- Unary math and activations ------------------------------------------------------------

// A floating operator of one input (of any dtype; integers and bools convert), computed in f32
// for f16 and f32 results and in f64 for f64 ones.
bool float_unary(at::Tensor& out, const at::Tensor& self, const char* name, const Computation& how = {}) {
  prepare_out(out, self.sizes());
  return floating(out.scalar_type()) && elementwise(out, {self}, {kFloatOps, name}, how);
}

#define XHAL_FLOAT_UNARY(aten, name)                                                            \
  at::Tensor& aten##_out(const at::Tensor& self, at::Tensor& out) {                            \
    if (!float_unary(out, self, name)) return XHAL_FALLBACK(aten##_out, self, out);             \
    return out;                                                                                 \
  }

XHAL_FLOAT_UNARY(sqrt, "OP_SQRT")
XHAL_FLOAT_UNARY(rsqrt, "OP_RSQRT")
XHAL_FLOAT_UNARY(reciprocal, "OP_RECIPROCAL")
XHAL_FLOAT_UNARY(exp, "OP_EXP")
XHAL_FLOAT_UNARY(exp2, "OP_EXP2")
XHAL_FLOAT_UNARY(expm1, "OP_EXPM1")
XHAL_FLOAT_UNARY(log, "OP_LOG")
XHAL_FLOAT_UNARY(log2, "OP_LOG2")
XHAL_FLOAT_UNARY(log10, "OP_LOG10")
XHAL_FLOAT_UNARY(log1p, "OP_LOG1P")
XHAL_FLOAT_UNARY(sin, "OP_SIN")
XHAL_FLOAT_UNARY(cos, "OP_COS")
XHAL_FLOAT_UNARY(tan, "OP_TAN")
XHAL_FLOAT_UNARY(asin, "OP_ASIN")
XHAL_FLOAT_UNARY(acos, "OP_ACOS")
XHAL_FLOAT_UNARY(atan, "OP_ATAN")
XHAL_FLOAT_UNARY(sinh, "OP_SINH")
XHAL_FLOAT_UNARY(cosh, "OP_COSH")
XHAL_FLOAT_UNARY(tanh, "OP_TANH")
XHAL_FLOAT_UNARY(asinh, "OP_ASINH")
XHAL_FLOAT_UNARY(acosh, "OP_ACOSH")
XHAL_FLOAT_UNARY(atanh, "OP_ATANH")
XHAL_FLOAT_UNARY(erf, "OP_ERF")
XHAL_FLOAT_UNARY(erfc, "OP_ERFC")
XHAL_FLOAT_UNARY(erfinv, "OP_ERFINV")
XHAL_FLOAT_UNARY(lgamma, "OP_LGAMMA")
XHAL_FLOAT_UNARY(digamma, "OP_DIGAMMA")
XHAL_FLOAT_UNARY(sigmoid, "OP_SIGMOID")
XHAL_FLOAT_UNARY(silu, "OP_SILU")
XHAL_FLOAT_UNARY(mish, "OP_MISH")
XHAL_FLOAT_UNARY(hardsigmoid, "OP_HARDSIGMOID")
XHAL_FLOAT_UNARY(hardswish, "OP_HARDSWISH")
XHAL_FLOAT_UNARY(frac, "OP_FRAC")
XHAL_FLOAT_UNARY(sinc, "OP_SINC")

// Rounding: the identity on integers (PyTorch keeps their dtype), F's rounding on floats.
#define XHAL_ROUNDING(aten, name)                                                                      \
  at::Tensor& aten##_out(const at::Tensor& self, at::Tensor& out) {                                   \
    prepare_out(out, self.sizes());                                                                    \
    const bool done = floating(out.scalar_type()) ? elementwise(out, {self}, {kFloatOps, name})     \
                                                     : copy_on_device(out, self);                      \
    if (!done) return XHAL_FALLBACK(aten##_out, self, out);                                            \
    return out;                                                                                        \
  }

XHAL_ROUNDING(floor, "OP_FLOOR")
XHAL_ROUNDING(ceil, "OP_CEIL")
XHAL_ROUNDING(round, "OP_ROUND")
XHAL_ROUNDING(trunc, "OP_TRUNC")

at::Tensor& round_decimals_out(const at::Tensor& self, int64_t decimals, at::Tensor& out) {
  prepare_out(out, self.sizes());
  const double power = std::pow(10.0, static_cast<double>(std::abs(decimals)));
  if (!floating(out.scalar_type()) ||
      !elementwise(out, {self}, {kFloatOps, "OP_ROUND_DECIMALS"}, {.a = power, .words = {decimals < 0 ? 1u : 0u, 0}}))
    return XHAL_FALLBACK(round_decimals_out, self, decimals, out);
  return out;
}

// Operators with a floating form and an integer form of the same name.
#define XHAL_SIGNED(aten, name)                                                          \
  at::Tensor& aten##_out(const at::Tensor& self, at::Tensor& out) {                     \
    prepare_out(out, self.sizes());                                                      \
    if (!numeric(self.scalar_type()) || !arithmetic(out, {self}, name))                  \
      return XHAL_FALLBACK(aten##_out, self, out);                                       \
    return out;                                                                          \
  }

XHAL_SIGNED(neg, "OP_NEG")
XHAL_SIGNED(abs, "OP_ABS")
XHAL_SIGNED(sign, "OP_SIGN")
XHAL_SIGNED(sgn, "OP_SIGN")

at::Tensor& gelu_out(const at::Tensor& self, c10::string_view approximate, at::Tensor& out) {
  if (!float_unary(out, self, approximate == "tanh" ? "OP_GELU_TANH" : "OP_GELU"))
    return XHAL_FALLBACK(gelu_out, self, approximate, out);
  return out;
}

at::Tensor relu(const at::Tensor& self) {
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  // Floats keep a NaN, as PyTorch's relu does; integers are max(x, 0).
  const bool done = floating(self.scalar_type())
                        ? elementwise(out, {self}, {kFloatOps, "OP_RELU"})
                        : integral(self.scalar_type()) &&
                              elementwise(out, {self, at::scalar_tensor(0, at::kLong)}, {kIntegerOps, "OP_MAXIMUM"},
                                          {self.scalar_type()});
  if (!done) return XHAL_FALLBACK(relu, self);
  return out;
}

at::Tensor& relu_(at::Tensor& self) {
  const bool done = floating(self.scalar_type())
                        ? elementwise(self, {self}, {kFloatOps, "OP_RELU"})
                        : integral(self.scalar_type()) &&
                              elementwise(self, {self, at::scalar_tensor(0, at::kLong)}, {kIntegerOps, "OP_MAXIMUM"},
                                          {self.scalar_type()});
  if (!done) return XHAL_FALLBACK(relu_, self);
  return self;
}

at::Tensor& leaky_relu_out(const at::Tensor& self, const at::Scalar& slope, at::Tensor& out) {
  if (!float_unary(out, self, "OP_LEAKY_RELU", {.a = slope})) return XHAL_FALLBACK(leaky_relu_out, self, slope, out);
  return out;
}

at::Tensor& elu_out(const at::Tensor& self, const at::Scalar& alpha, const at::Scalar& scale,
                    const at::Scalar& input_scale, at::Tensor& out) {
  if (!float_unary(out, self, "OP_ELU", {.a = alpha, .b = scale, .c = input_scale}))
    return XHAL_FALLBACK(elu_out, self, alpha, scale, input_scale, out);
  return out;
}

at::Tensor& hardtanh_out(const at::Tensor& self, const at::Scalar& low, const at::Scalar& high, at::Tensor& out) {
  if (!float_unary(out, self, "OP_HARDTANH", {.a = low, .b = high}))
    return XHAL_FALLBACK(hardtanh_out, self, low, high, out);
  return out;
}

at::Tensor& hardtanh_(at::Tensor& self, const at::Scalar& low, const at::Scalar& high) {
  if (!floating(self.scalar_type()) || !elementwise(self, {self}, {kFloatOps, "OP_HARDTANH"}, {.a = low, .b = high}))
    return XHAL_FALLBACK(hardtanh_, self, low, high);
  return self;
}

at::Tensor& softplus_out(const at::Tensor& self, const at::Scalar& beta, const at::Scalar& threshold, at::Tensor& out) {
  if (!float_unary(out, self, "OP_SOFTPLUS", {.a = beta, .b = threshold}))
    return XHAL_FALLBACK(softplus_out, self, beta, threshold, out);
  return out;
}

at::Tensor& softshrink_out(const at::Tensor& self, const at::Scalar& lambda, at::Tensor& out) {
  if (!float_unary(out, self, "OP_SOFTSHRINK", {.a = lambda})) return XHAL_FALLBACK(softshrink_out, self, lambda, out);
  return out;
}

at::Tensor& hardshrink_out(const at::Tensor& self, const at::Scalar& lambda, at::Tensor& out) {
  if (!float_unary(out, self, "OP_HARDSHRINK", {.a = lambda})) return XHAL_FALLBACK(hardshrink_out, self, lambda, out);
  return out;
}

at::Tensor& threshold_out(const at::Tensor& self, const at::Scalar& threshold, const at::Scalar& value, at::Tensor& out) {
  prepare_out(out, self.sizes());
  if (!arithmetic(out, {self}, "OP_THRESHOLD", {.a = threshold, .b = value}))
    return XHAL_FALLBACK(threshold_out, self, threshold, value, out);
  return out;
}

std::tuple<at::Tensor&, at::Tensor&> log_sigmoid_forward_out(const at::Tensor& self, at::Tensor& output,
                                                             at::Tensor& buffer) {
  // The CPU's buffer holds intermediate values its backward does not need here: it stays empty.
  prepare_out(buffer, {0});
  if (!float_unary(output, self, "OP_LOG_SIGMOID")) return XHAL_FALLBACK(log_sigmoid_forward_output, self, output, buffer);
  return {output, buffer};
}

at::Tensor& logit_out(const at::Tensor& self, std::optional<double> eps, at::Tensor& out) {
  if (!float_unary(out, self, "OP_LOGIT", {.a = eps.value_or(0.0), .words = {eps.has_value() ? 1u : 0u, 0}}))
    return XHAL_FALLBACK(logit_out, self, eps, out);
  return out;
}

at::Tensor& nan_to_num_out(const at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                           std::optional<double> neginf, at::Tensor& out) {
  prepare_out(out, self.sizes());
  const at::ScalarType dtype = out.scalar_type();
  bool done = false;
  if (floating(dtype)) {
    const double largest = dtype == at::kHalf    ? 65504.0
                           : dtype == at::kFloat ? static_cast<double>(std::numeric_limits<float>::max())
                                                 : std::numeric_limits<double>::max();
    done = elementwise(out, {self}, {kFloatOps, "OP_NAN_TO_NUM"},
                       {.a = nan.value_or(0.0), .b = posinf.value_or(largest), .c = neginf.value_or(-largest)});
  } else if (!at::isComplexType(dtype)) {
    done = copy_on_device(out, self);  // integers have no NaN nor infinity
  }
  if (!done) return XHAL_FALLBACK(nan_to_num_out, self, nan, posinf, neginf, out);
  return out;
}

// --- Backward formulas ---------------------------------------------------------------------

// The backward of an activation: `name` of the gradient and one saved tensor.
bool backward(at::Tensor& grad_input, const at::Tensor& grad_output, const at::Tensor& saved, const char* name,
              const Computation& how = {}) {
  prepare_out(grad_input, broadcast_shape({grad_output, saved}));
  return floating(grad_input.scalar_type()) && elementwise(grad_input, {grad_output, saved}, {kFloatOps, name}, how);
}

#define XHAL_BACKWARD(aten, fallback_op, name)                                                                  \
  at::Tensor& aten##_out(const at::Tensor& grad_output, const at::Tensor& saved, at::Tensor& grad_input) {     \
    if (!backward(grad_input, grad_output, saved, name)) return XHAL_FALLBACK(fallback_op, grad_output, saved, grad_input); \
    return grad_input;                                                                                           \
  }

XHAL_BACKWARD(sigmoid_backward, sigmoid_backward_grad_input, "OP_SIGMOID_BACKWARD")
XHAL_BACKWARD(tanh_backward, tanh_backward_grad_input, "OP_TANH_BACKWARD")
XHAL_BACKWARD(silu_backward, silu_backward_grad_input, "OP_SILU_BACKWARD")
XHAL_BACKWARD(hardsigmoid_backward, hardsigmoid_backward_grad_input, "OP_HARDSIGMOID_BACKWARD")

at::Tensor& threshold_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Scalar& threshold,
                                   at::Tensor& grad_input) {
  if (!backward(grad_input, grad_output, self, "OP_THRESHOLD_BACKWARD", {.a = threshold}))
    return XHAL_FALLBACK(threshold_backward_grad_input, grad_output, self, threshold, grad_input);
  return grad_input;
}

at::Tensor& gelu_backward_out(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate,
                              at::Tensor& grad_input) {
  if (!backward(grad_input, grad_output, self, approximate == "tanh" ? "OP_GELU_TANH_BACKWARD" : "OP_GELU_BACKWARD"))
    return XHAL_FALLBACK(gelu_backward_grad_input, grad_output, self, approximate, grad_input);
  return grad_input;
}

// PyTorch's own functional form would decompose into elementwise steps, each rounding (to
// float16, say) where the fused kernel rounds once, as the CPU's does.
at::Tensor silu_backward(const at::Tensor& grad_output, const at::Tensor& self) {
  at::Tensor grad_input = at::empty({0}, grad_output.options());
  return silu_backward_out(grad_output, self, grad_input);
}

at::Tensor mish_backward(const at::Tensor& grad_output, const at::Tensor& self) {
  at::Tensor grad_input = at::empty({0}, grad_output.options());
  if (!backward(grad_input, grad_output, self, "OP_MISH_BACKWARD")) return XHAL_FALLBACK(mish_backward, grad_output, self);
  return grad_input;
}

at::Tensor hardswish_backward(const at::Tensor& grad_output, const at::Tensor& self) {
  at::Tensor grad_input = at::empty({0}, grad_output.options());
  if (!backward(grad_input, grad_output, self, "OP_HARDSWISH_BACKWARD"))
    return XHAL_FALLBACK(hardswish_backward, grad_output, self);
  return grad_input;
}

at::Tensor& elu_backward_out(const at::Tensor& grad_output, const at::Scalar& alpha, const at::Scalar& scale,
                             const at::Scalar& input_scale, bool is_result, const at::Tensor& self_or_result,
                             at::Tensor& grad_input) {
  if (!backward(grad_input, grad_output, self_or_result, "OP_ELU_BACKWARD",
                {.a = alpha, .b = scale, .c = input_scale, .words = {is_result ? 1u : 0u, 0}}))
    return XHAL_FALLBACK(elu_backward_grad_input, grad_output, alpha, scale, input_scale, is_result, self_or_result,
                         grad_input);
  return grad_input;
}

at::Tensor& leaky_relu_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Scalar& slope,
                                    bool self_is_result, at::Tensor& grad_input) {
  if (!backward(grad_input, grad_output, self, "OP_LEAKY_RELU_BACKWARD", {.a = slope}))
    return XHAL_FALLBACK(leaky_relu_backward_grad_input, grad_output, self, slope, self_is_result, grad_input);
  return grad_input;
}

at::Tensor& hardtanh_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Scalar& low,
                                  const at::Scalar& high, at::Tensor& grad_input) {
  if (!backward(grad_input, grad_output, self, "OP_HARDTANH_BACKWARD", {.a = low, .b = high}))
    return XHAL_FALLBACK(hardtanh_backward_grad_input, grad_output, self, low, high, grad_input);
  return grad_input;
}

at::Tensor& softplus_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Scalar& beta,
                                  const at::Scalar& threshold, at::Tensor& grad_input) {
  if (!backward(grad_input, grad_output, self, "OP_SOFTPLUS_BACKWARD", {.a = beta, .b = threshold}))
    return XHAL_FALLBACK(softplus_backward_grad_input, grad_output, self, beta, threshold, grad_input);
  return grad_input;
}

at::Tensor& log_sigmoid_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& buffer,
                                     at::Tensor& grad_input) {
  if (!backward(grad_input, grad_output, self, "OP_LOG_SIGMOID_BACKWARD"))
    return XHAL_FALLBACK(log_sigmoid_backward_grad_input, grad_output, self, buffer, grad_input);
  return grad_input;
}

at::Tensor& softshrink_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Scalar& lambda,
                                    at::Tensor& grad_input) {
  if (!backward(grad_input, grad_output, self, "OP_SHRINK_BACKWARD", {.a = lambda}))
    return XHAL_FALLBACK(softshrink_backward_grad_input, grad_output, self, lambda, grad_input);
  return grad_input;
}

at::Tensor& hardshrink_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Scalar& lambda,
                                    at::Tensor& grad_input) {
  if (!backward(grad_input, grad_output, self, "OP_SHRINK_BACKWARD", {.a = lambda}))
    return XHAL_FALLBACK(hardshrink_backward_grad_input, grad_output, self, lambda, grad_input);
  return grad_input;
}

at::Tensor& logit_backward_out(const at::Tensor& grad_output, const at::Tensor& self, std::optional<double> eps,
                               at::Tensor& grad_input) {
  if (!backward(grad_input, grad_output, self, "OP_LOGIT_BACKWARD",
                {.a = eps.value_or(0.0), .words = {eps.has_value() ? 1u : 0u, 0}}))
    return XHAL_FALLBACK(logit_backward_grad_input, grad_output, self, eps, grad_input);
  return grad_input;
}

// --- Comparisons, tests and logic (bool results, or 0 and 1) ---------------------------------

// The operator comparing `self` with `other` in the type PyTorch promotes them to: floats as
// floats (f16 in f32, exactly), integers and bools as integers.
template <typename Other>
bool compare(at::Tensor& out, at::ArrayRef<at::Tensor> operands, const Other& other, const char* floating_name,
             const char* integer_name) {
  const at::ScalarType common = at::result_type(operands[0], other);
  if (floating(common)) return elementwise(out, operands, {kLogicalOps, floating_name}, {compute_type(common)});
  if (common != at::kBool && !integral(common)) return false;
  return elementwise(out, operands, {kLogicalOps, integer_name}, {common == at::kLong ? at::kLong : at::kInt});
}

#define XHAL_COMPARISON(aten, upper)                                                                          \
  at::Tensor& aten##_tensor_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {            \
    prepare_out(out, broadcast_shape({self, other}));                                                          \
    if (!compare(out, {self, other}, other, "OP_" #upper, "OP_" #upper "_INTEGER"))                            \
      return XHAL_FALLBACK(aten##_Tensor_out, self, other, out);                                               \
    return out;                                                                                                \
  }                                                                                                            \
  at::Tensor& aten##_scalar_out(const at::Tensor& self, const at::Scalar& other, at::Tensor& out) {            \
    prepare_out(out, self.sizes());                                                                            \
    if (other.isComplex()) return XHAL_FALLBACK(aten##_Scalar_out, self, other, out);                          \
    const at::Tensor wrapped = at::scalar_tensor(other, other.isFloatingPoint() ? at::kDouble : at::kLong);   \
    if (!compare(out, {self, wrapped}, other, "OP_" #upper, "OP_" #upper "_INTEGER"))                          \
      return XHAL_FALLBACK(aten##_Scalar_out, self, other, out);                                               \
    return out;                                                                                                \
  }

XHAL_COMPARISON(eq, EQ)
XHAL_COMPARISON(ne, NE)
XHAL_COMPARISON(lt, LT)
XHAL_COMPARISON(le, LE)
XHAL_COMPARISON(gt, GT)
XHAL_COMPARISON(ge, GE)

// A test of a floating value; integers and bools answer as a finite number would.
bool float_test(at::Tensor& out, const at::Tensor& self, const char* name, bool integer_answer) {
  prepare_out(out, self.sizes());
  // A complex element is NaN or infinite through either part: the CPU's kernels answer it.
  if (at::isComplexType(self.scalar_type())) return false;
  if (!floating(self.scalar_type())) {
    if (!on_device(out, out.scalar_type())) return false;
    out.fill_(integer_answer);
    return true;
  }
  return elementwise(out, {self}, {kLogicalOps, name});
}

#define XHAL_FLOAT_TEST(aten, name, integer_answer)                                                \
  at::Tensor& aten##_out(const at::Tensor& self, at::Tensor& out) {                               \
    if (!float_test(out, self, name, integer_answer)) return XHAL_FALLBACK(aten##_out, self, out); \
    return out;                                                                                    \
  }

XHAL_FLOAT_TEST(isposinf, "OP_ISPOSINF", false)
XHAL_FLOAT_TEST(isneginf, "OP_ISNEGINF", false)

at::Tensor& signbit_out(const at::Tensor& self, at::Tensor& out) {
  prepare_out(out, self.sizes());
  const bool done = floating(self.scalar_type())
                        ? elementwise(out, {self}, {kLogicalOps, "OP_SIGNBIT"})
                        : elementwise(out, {self, at::scalar_tensor(0, at::kLong)}, {kLogicalOps, "OP_LT_INTEGER"},
                                      {self.scalar_type() == at::kLong ? at::kLong : at::kInt});
  if (!done) return XHAL_FALLBACK(signbit_out, self, out);
  return out;
}

at::Tensor isnan(const at::Tensor& self) {
  at::Tensor out = at::empty(self.sizes(), self.options().dtype(at::kBool));
  if (!float_test(out, self, "OP_ISNAN", false)) return XHAL_FALLBACK(isnan, self);
  return out;
}

at::Tensor isinf(const at::Tensor& self) {
  at::Tensor out = at::empty(self.sizes(), self.options().dtype(at::kBool));
  if (!float_test(out, self, "OP_ISINF", false)) return XHAL_FALLBACK(isinf, self);
  return out;
}

at::Tensor isfinite(const at::Tensor& self) {
  at::Tensor out = at::empty(self.sizes(), self.options().dtype(at::kBool));
  if (!float_test(out, self, "OP_ISFINITE", true)) return XHAL_FALLBACK(isfinite, self);
  return out;
}

at::Tensor& logical_not_out(const at::Tensor& self, at::Tensor& out) {
  prepare_out(out, self.sizes());
  if (!elementwise(out, {self}, {kLogicalOps, "OP_NOT"})) return XHAL_FALLBACK(logical_not_out, self, out);
  return out;
}

#define XHAL_LOGICAL(aten, name)                                                                       \
  at::Tensor& aten##_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {          \
    prepare_out(out, broadcast_shape({self, other}));                                                  \
    if (!elementwise(out, {self, other}, {kLogicalOps, name})) return XHAL_FALLBACK(aten##_out, self, other, out); \
    return out;                                                                                        \
  }

XHAL_LOGICAL(logical_and, "OP_AND")
XHAL_LOGICAL(logical_or, "OP_OR")
XHAL_LOGICAL(logical_xor, "OP_XOR")

// Bitwise operations: logic on bools, bits on integers.
#define XHAL_BITWISE(aten, on_bool, on_integers)                                                          \
  at::Tensor& aten##_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {             \
    prepare_out(out, broadcast_shape({self, other}));                                                     \
    const at::ScalarType dtype = out.scalar_type();                                                       \
    const bool done = dtype == at::kBool ? elementwise(out, {self, other}, {kLogicalOps, on_bool})         \
                                         : integral(dtype) &&                                             \
                                               elementwise(out, {self, other}, {kIntegerOps, on_integers}, {dtype}); \
    if (!done) return XHAL_FALLBACK(aten##_Tensor_out, self, other, out);                                 \
    return out;                                                                                           \
  }

XHAL_BITWISE(bitwise_and, "OP_AND", "OP_BITWISE_AND")
XHAL_BITWISE(bitwise_or, "OP_OR", "OP_BITWISE_OR")
XHAL_BITWISE(bitwise_xor, "OP_XOR", "OP_BITWISE_XOR")

at::Tensor& bitwise_not_out(const at::Tensor& self, at::Tensor& out) {
  prepare_out(out, self.sizes());
  const at::ScalarType dtype = out.scalar_type();
  const bool done = self.scalar_type() == dtype &&
                    (dtype == at::kBool ? elementwise(out, {self}, {kLogicalOps, "OP_NOT"})
                                        : integral(dtype) && elementwise(out, {self}, {kIntegerOps, "OP_BITWISE_NOT"}, {dtype}));
  if (!done) return XHAL_FALLBACK(bitwise_not_out, self, out);
  return out;
}

// --- Selections ----------------------------------------------------------------------------

// `op` of the class that `out`'s dtype computes in: floating, integer or bool.
bool by_result(at::Tensor& out, at::ArrayRef<at::Tensor> inputs, const char* name, Computation how = {}) {
  const at::ScalarType dtype = out.scalar_type();
  if (dtype == at::kBool) return elementwise(out, inputs, {kLogicalOps, name}, how);
  if (floating(dtype)) return elementwise(out, inputs, {kFloatOps, name}, how);
  if (!integral(dtype)) return false;
  how.compute = dtype;
  return elementwise(out, inputs, {kIntegerOps, name}, how);
}

at::Tensor& where_out(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  prepare_out(out, broadcast_shape({condition, self, other}));
  if (condition.scalar_type() != at::kBool || !by_result(out, {condition, self, other}, "OP_WHERE"))
    return XHAL_FALLBACK(where_self_out, condition, self, other, out);
  return out;
}

at::Tensor where_self(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  const bool placed = condition.is_privateuseone() && (self.is_privateuseone() || is_cpu_scalar(self)) &&
                      (other.is_privateuseone() || is_cpu_scalar(other));
  if (placed && condition.scalar_type() == at::kBool) {
    at::Tensor out = at::empty(broadcast_shape({condition, self, other}),
                               condition.options().dtype(at::result_type(self, other)));
    if (by_result(out, {condition, self, other}, "OP_WHERE")) return out;
  }
  return XHAL_FALLBACK(where_self, condition, self, other);
}

at::Tensor& masked_fill_scalar_(at::Tensor& self, const at::Tensor& mask, const at::Scalar& value) {
  bool done = false;
  if (mask.scalar_type() == at::kBool && mask.device() == self.device()) {
    Computation how{.a = value, .words = {value.toBool() ? 1u : 0u, 0}};
    done = by_result(self, {self, mask}, "OP_MASKED_FILL", how);
  }
  if (!done) return XHAL_FALLBACK(masked_fill__Scalar, self, mask, value);
  return self;
}

at::Tensor& masked_fill_tensor_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  return masked_fill_scalar_(self, mask, value.is_cpu() ? value.item() : value.to(at::kCPU).item());
}

at::Tensor& clamp_out(const at::Tensor& self, const std::optional<at::Scalar>& min, const std::optional<at::Scalar>& max,
                      at::Tensor& out) {
  prepare_out(out, self.sizes());
  const uint32_t given = (min.has_value() ? 1u : 0u) | (max.has_value() ? 2u : 0u);
  if (given == 0 || !numeric(out.scalar_type()) ||
      !arithmetic(out, {self}, "OP_CLAMP", {.a = min.value_or(0), .b = max.value_or(0), .words = {given, 0}}))
    return XHAL_FALLBACK(clamp_out, self, min, max, out);
  return out;
}

at::Tensor& clamp_tensor_out(const at::Tensor& self, const std::optional<at::Tensor>& min,
                             const std::optional<at::Tensor>& max, at::Tensor& out) {
  const bool has_min = min.has_value() && min->defined();
  const bool has_max = max.has_value() && max->defined();
  const at::Tensor low = has_min ? *min : self;
  const at::Tensor high = has_max ? *max : self;
  prepare_out(out, broadcast_shape({self, low, high}));
  const uint32_t given = (has_min ? 1u : 0u) | (has_max ? 2u : 0u);
  if (given == 0 || !numeric(out.scalar_type()) ||
      !arithmetic(out, {self, low, high}, "OP_CLAMP_TENSOR", {.words = {given, 0}}))
    return XHAL_FALLBACK(clamp_Tensor_out, self, min, max, out);
  return out;
}

at::Tensor& clamp_min_out(const at::Tensor& self, const at::Scalar& min, at::Tensor& out) {
  return clamp_out(self, min, std::nullopt, out);
}

at::Tensor& clamp_max_out(const at::Tensor& self, const at::Scalar& max, at::Tensor& out) {
  return clamp_out(self, std::nullopt, max, out);
}

at::Tensor& clamp_min_tensor_out(const at::Tensor& self, const at::Tensor& min, at::Tensor& out) {
  return clamp_tensor_out(self, min, std::nullopt, out);
}

at::Tensor& clamp_max_tensor_out(const at::Tensor& self, const at::Tensor& max, at::Tensor& out) {
  return clamp_tensor_out(self, std::nullopt, max, out);
}

// --- Optimizer updates ---------------------------------------------------------------------

at::Tensor& addcmul_out(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                        const at::Scalar& value, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, tensor1, tensor2}));
  if (!floating(out.scalar_type()) ||
      !elementwise(out, {self, tensor1, tensor2}, {kFloatOps, "OP_ADDCMUL"}, {.a = value}))
    return XHAL_FALLBACK(addcmul_out, self, tensor1, tensor2, value, out);
  return out;
}

at::Tensor& addcdiv_out(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                        const at::Scalar& value, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, tensor1, tensor2}));
  if (!floating(out.scalar_type()) ||
      !elementwise(out, {self, tensor1, tensor2}, {kFloatOps, "OP_ADDCDIV"}, {.a = value}))
    return XHAL_FALLBACK(addcdiv_out, self, tensor1, tensor2, value, out);
  return out;
}

at::Tensor& lerp_scalar_out(const at::Tensor& self, const at::Tensor& end, const at::Scalar& weight, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, end}));
  if (!floating(out.scalar_type()) || !elementwise(out, {self, end}, {kFloatOps, "OP_LERP"}, {.a = weight}))
    return XHAL_FALLBACK(lerp_Scalar_out, self, end, weight, out);
  return out;
}

at::Tensor& lerp_tensor_out(const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight, at::Tensor& out) {
  prepare_out(out, broadcast_shape({self, end, weight}));
  if (!floating(out.scalar_type()) || !elementwise(out, {self, end, weight}, {kFloatOps, "OP_LERP_TENSOR"}))
    return XHAL_FALLBACK(lerp_Tensor_out, self, end, weight, out);
  return out;
}

// --- Fills, triangles and ranges -----------------------------------------------------------

at::Tensor& zero_(at::Tensor& self) {
  if (self.numel() == 0) return self;
  const size_t item = self.element_size();
  if (self.is_contiguous() && (item == 1 || item == 2 || item == 4 || item == 8 || item == 16)) {
    uint8_t zero = 0;
    const Place p = place_of(self);
    check(xhal_stream_fill(current_xhal_stream(self.device().index()), p.buffer, p.offset, self.nbytes(), &zero, 1),
          "zero");
    return self;
  }
  if (!copy_on_device(self, at::scalar_tensor(0, self.scalar_type()))) return XHAL_FALLBACK(zero_, self);
  return self;
}

// Keeps the elements on and above (`upper`) or on and below diagonal `diagonal` of the last
// two dimensions.
bool triangle(at::Tensor& out, const at::Tensor& self, int64_t diagonal, bool upper) {
  prepare_out(out, self.sizes());
  if (self.dim() < 2 || self.scalar_type() != out.scalar_type()) return false;
  const int64_t rows = self.size(-2), columns = self.size(-1);
  if (rows == 0 || columns == 0) return true;
  if (columns > std::numeric_limits<int32_t>::max() || rows > std::numeric_limits<int32_t>::max()) return false;
  // Past the matrix, every diagonal keeps all or nothing: clamped so that it fits an i32.
  const int64_t bound = std::max(rows, columns) + 1;
  const int32_t clamped = static_cast<int32_t>(std::clamp<int64_t>(diagonal, -bound, bound));
  Computation how{.words = {static_cast<uint32_t>(columns), static_cast<uint32_t>(rows)}, .uses_index = true,
                  .diagonal = clamped};
  return by_result(out, {self}, upper ? "OP_TRIU" : "OP_TRIL", how);
}

at::Tensor& triu_out(const at::Tensor& self, int64_t diagonal, at::Tensor& out) {
  if (!triangle(out, self, diagonal, true)) return XHAL_FALLBACK(triu_out, self, diagonal, out);
  return out;
}

at::Tensor& tril_out(const at::Tensor& self, int64_t diagonal, at::Tensor& out) {
  if (!triangle(out, self, diagonal, false)) return XHAL_FALLBACK(tril_out, self, diagonal, out);
  return out;
}

at::Tensor& arange_out(const at::Scalar& start, const at::Scalar& end, const at::Scalar& step, at::Tensor& out) {
  const at::ScalarType dtype = out.scalar_type();
  if (!numeric(dtype) || (integral(dtype) && !(start.isIntegral(false) && step.isIntegral(false))))
    return XHAL_FALLBACK(arange_start_out, start, end, step, out);
  const double from = start.to<double>(), to = end.to<double>(), by = step.to<double>();
  TORCH_CHECK(by != 0, "step must be nonzero");
  TORCH_CHECK(std::isfinite(from) && std::isfinite(to), "unsupported range: ", from, " -> ", to);
  TORCH_CHECK((by > 0 && to >= from) || (by < 0 && to <= from), "upper bound and larger bound inconsistent with step sign");
  const int64_t size = static_cast<int64_t>(std::ceil((to - from) / by));
  prepare_out(out, {size});
  bool done = false;
  if (integral(dtype)) {
    done = elementwise(out, {}, {kIntegerOps, "OP_ARANGE"}, {.compute = dtype, .a = start, .b = step, .uses_index = true});
  } else {
    // PyTorch's CPU computes start + i * step in double, then rounds once; so does this, where
    // the device has f64.
    const at::ScalarType compute = on_device(out, at::kDouble) && dtype != at::kHalf ? at::kDouble : at::kFloat;
    done = elementwise(out, {}, {kFloatOps, "OP_ARANGE"}, {.compute = compute, .a = start, .b = step, .uses_index = true});
  }
  if (!done) return XHAL_FALLBACK(arange_start_out, start, end, step, out);
  return out;
}

// Functional forms that PyTorch does not build on the out= forms above.
at::Tensor hardtanh(const at::Tensor& self, const at::Scalar& low, const at::Scalar& high) {
  at::Tensor out = at::empty({0}, self.options());
  return hardtanh_out(self, low, high, out);
}

at::Tensor hardtanh_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Scalar& low,
                             const at::Scalar& high) {
  at::Tensor grad_input = at::empty({0}, grad_output.options());
  return hardtanh_backward_out(grad_output, self, low, high, grad_input);
}

at::Tensor hardswish(const at::Tensor& self) {
  at::Tensor out = at::empty({0}, self.options());
  return hardswish_out(self, out);
}

at::Tensor& hardswish_(at::Tensor& self) {
  if (!floating(self.scalar_type()) || !elementwise(self, {self}, {kFloatOps, "OP_HARDSWISH"}))
    return XHAL_FALLBACK(hardswish_, self);
  return self;
}

std::tuple<at::Tensor, at::Tensor> log_sigmoid_forward(const at::Tensor& self) {
  at::Tensor output = at::empty({0}, self.options()), buffer = at::empty({0}, self.options());
  log_sigmoid_forward_out(self, output, buffer);
  return {output, buffer};
}

at::Tensor log_sigmoid_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& buffer) {
  at::Tensor grad_input = at::empty({0}, grad_output.options());
  return log_sigmoid_backward_out(grad_output, self, buffer, grad_input);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("hardtanh", hardtanh);
  m.impl("hardtanh_backward", hardtanh_backward);
  m.impl("hardswish", hardswish);
  m.impl("hardswish_", hardswish_);
  m.impl("log_sigmoid_forward", log_sigmoid_forward);
  m.impl("log_sigmoid_backward", log_sigmoid_backward);
  m.impl("add.out", add_out);
  m.impl("sub.out", sub_out);
  m.impl("mul.out", mul_out);
  m.impl("div.out", div_out);
  m.impl("div.out_mode", div_mode_out);
  m.impl("floor_divide.out", floor_divide_out);
  m.impl("remainder.Tensor_out", remainder_out);
  m.impl("fmod.Tensor_out", fmod_out);
  m.impl("maximum.out", maximum_out);
  m.impl("minimum.out", minimum_out);
  m.impl("fmax.out", fmax_out);
  m.impl("fmin.out", fmin_out);
  m.impl("atan2.out", atan2_out);
  m.impl("hypot.out", hypot_out);
  m.impl("copysign.out", copysign_out);
  m.impl("xlogy.OutTensor", xlogy_out);
  m.impl("pow.Tensor_Tensor_out", pow_tensor_out);
  m.impl("pow.Tensor_Scalar_out", pow_tensor_scalar_out);
  m.impl("pow.Scalar_out", pow_scalar_out);
  m.impl("logaddexp.out", logaddexp_out);
  m.impl("logaddexp2.out", logaddexp2_out);
  m.impl("heaviside.out", heaviside_out);
  m.impl("special_xlog1py.out", xlog1py_out);
  m.impl("sinc.out", sinc_out);
  m.impl("sqrt.out", sqrt_out);
  m.impl("rsqrt.out", rsqrt_out);
  m.impl("reciprocal.out", reciprocal_out);
  m.impl("exp.out", exp_out);
  m.impl("exp2.out", exp2_out);
  m.impl("expm1.out", expm1_out);
  m.impl("log.out", log_out);
  m.impl("log2.out", log2_out);
  m.impl("log10.out", log10_out);
  m.impl("log1p.out", log1p_out);
  m.impl("sin.out", sin_out);
  m.impl("cos.out", cos_out);
  m.impl("tan.out", tan_out);
  m.impl("asin.out", asin_out);
  m.impl("acos.out", acos_out);
  m.impl("atan.out", atan_out);
  m.impl("sinh.out", sinh_out);
  m.impl("cosh.out", cosh_out);
  m.impl("tanh.out", tanh_out);
  m.impl("asinh.out", asinh_out);
  m.impl("acosh.out", acosh_out);
  m.impl("atanh.out", atanh_out);
  m.impl("erf.out", erf_out);
  m.impl("erfc.out", erfc_out);
  m.impl("erfinv.out", erfinv_out);
  m.impl("lgamma.out", lgamma_out);
  m.impl("digamma.out", digamma_out);
  m.impl("sigmoid.out", sigmoid_out);
  m.impl("silu.out", silu_out);
  m.impl("mish.out", mish_out);
  m.impl("hardsigmoid.out", hardsigmoid_out);
  m.impl("hardswish.out", hardswish_out);
  m.impl("frac.out", frac_out);
  m.impl("floor.out", floor_out);
  m.impl("ceil.out", ceil_out);
  m.impl("round.out", round_out);
  m.impl("round.decimals_out", round_decimals_out);
  m.impl("trunc.out", trunc_out);
  m.impl("neg.out", neg_out);
  m.impl("abs.out", abs_out);
  m.impl("sign.out", sign_out);
  m.impl("sgn.out", sgn_out);
  m.impl("gelu.out", gelu_out);
  m.impl("relu", relu);
  m.impl("relu_", relu_);
  m.impl("leaky_relu.out", leaky_relu_out);
  m.impl("elu.out", elu_out);
  m.impl("hardtanh.out", hardtanh_out);
  m.impl("hardtanh_", hardtanh_);
  m.impl("softplus.out", softplus_out);
  m.impl("softshrink.out", softshrink_out);
  m.impl("hardshrink.out", hardshrink_out);
  m.impl("threshold.out", threshold_out);
  m.impl("log_sigmoid_forward.output", log_sigmoid_forward_out);
  m.impl("logit.out", logit_out);
  m.impl("nan_to_num.out", nan_to_num_out);
  m.impl("threshold_backward.grad_input", threshold_backward_out);
  m.impl("sigmoid_backward.grad_input", sigmoid_backward_out);
  m.impl("tanh_backward.grad_input", tanh_backward_out);
  m.impl("silu_backward.grad_input", silu_backward_out);
  m.impl("silu_backward", silu_backward);
  m.impl("hardsigmoid_backward.grad_input", hardsigmoid_backward_out);
  m.impl("gelu_backward.grad_input", gelu_backward_out);
  m.impl("mish_backward", mish_backward);
  m.impl("hardswish_backward", hardswish_backward);
  m.impl("elu_backward.grad_input", elu_backward_out);
  m.impl("leaky_relu_backward.grad_input", leaky_relu_backward_out);
  m.impl("hardtanh_backward.grad_input", hardtanh_backward_out);
  m.impl("softplus_backward.grad_input", softplus_backward_out);
  m.impl("log_sigmoid_backward.grad_input", log_sigmoid_backward_out);
  m.impl("softshrink_backward.grad_input", softshrink_backward_out);
  m.impl("hardshrink_backward.grad_input", hardshrink_backward_out);
  m.impl("logit_backward.grad_input", logit_backward_out);
  m.impl("eq.Tensor_out", eq_tensor_out);
  m.impl("eq.Scalar_out", eq_scalar_out);
  m.impl("ne.Tensor_out", ne_tensor_out);
  m.impl("ne.Scalar_out", ne_scalar_out);
  m.impl("lt.Tensor_out", lt_tensor_out);
  m.impl("lt.Scalar_out", lt_scalar_out);
  m.impl("le.Tensor_out", le_tensor_out);
  m.impl("le.Scalar_out", le_scalar_out);
  m.impl("gt.Tensor_out", gt_tensor_out);
  m.impl("gt.Scalar_out", gt_scalar_out);
  m.impl("ge.Tensor_out", ge_tensor_out);
  m.impl("ge.Scalar_out", ge_scalar_out);
  m.impl("isposinf.out", isposinf_out);
  m.impl("isneginf.out", isneginf_out);
  m.impl("signbit.out", signbit_out);
  m.impl("isnan", isnan);
  m.impl("isinf", isinf);
  m.impl("isfinite", isfinite);
  m.impl("logical_not.out", logical_not_out);
  m.impl("logical_and.out", logical_and_out);
  m.impl("logical_or.out", logical_or_out);
  m.impl("logical_xor.out", logical_xor_out);
  m.impl("bitwise_and.Tensor_out", bitwise_and_out);
  m.impl("bitwise_or.Tensor_out", bitwise_or_out);
  m.impl("bitwise_xor.Tensor_out", bitwise_xor_out);
  m.impl("bitwise_not.out", bitwise_not_out);
  m.impl("where.self_out", where_out);
  m.impl("where.self", where_self);
  m.impl("masked_fill_.Scalar", masked_fill_scalar_);
  m.impl("masked_fill_.Tensor", masked_fill_tensor_);
  m.impl("clamp.out", clamp_out);
  m.impl("clamp.Tensor_out", clamp_tensor_out);
  m.impl("clamp_min.out", clamp_min_out);
  m.impl("clamp_max.out", clamp_max_out);
  m.impl("clamp_min.Tensor_out", clamp_min_tensor_out);
  m.impl("clamp_max.Tensor_out", clamp_max_tensor_out);
  m.impl("addcmul.out", addcmul_out);
  m.impl("addcdiv.out", addcdiv_out);
  m.impl("lerp.Scalar_out", lerp_scalar_out);
  m.impl("lerp.Tensor_out", lerp_tensor_out);
  m.impl("zero_", zero_);
  m.impl("triu.out", triu_out);
  m.impl("tril.out", tril_out);
  m.impl("arange.start_out", arange_out);
}

}  // namespace xhal_torch
