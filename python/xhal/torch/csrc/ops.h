// What the operator files share: dtype rules, scalars as kernel bits, `out=` handling, and the
// elementwise machinery every family builds on (elementwise_ops.cpp).
#pragma once

#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>

#include <optional>
#include <utility>

#include "xhal_torch.h"

namespace xhal_torch {

using at::native::call_fallback_fn;

// Runs `op` (an ATEN_OP) on the CPU through the counted fallback.
#define XHAL_FALLBACK(op, ...) call_fallback_fn<&cpu_fallback, ATEN_OP(op)>::call(__VA_ARGS__)
#define XHAL_FALLBACK_SYMINT(op, ...) at::native::call_fallback_fn_symint<&cpu_fallback, ATEN_OP(op)>::call(__VA_ARGS__)

constexpr int kMaxDims = 8;

bool is_floating(at::ScalarType dtype);
// The type a floating operation computes in: f16 in f32 (as PyTorch's CPU kernels do), f32
// and f64 in themselves.
at::ScalarType float_compute(at::ScalarType dtype);
// Whether `t`'s device has kernels for `dtype`.
bool on_device(const at::Tensor& t, at::ScalarType dtype);
// The floating dtypes the device has kernels for, for operators that only take floats.
bool floating_on(const at::Tensor& t);
// A scalar as the bits of `as` (f32 and i32 in the low word), as kernels read it.
uint64_t scalar_bits(const at::Scalar& value, at::ScalarType as);
bool is_cpu_scalar(const at::Tensor& t);
// `t`'s first element, in elements of its buffer.
uint32_t element_offset(const at::Tensor& t);
// `out` resized to `shape`, as structured out= kernels do.
void prepare_out(at::Tensor& out, at::IntArrayRef shape);
at::DimVector broadcast_shape(at::ArrayRef<at::Tensor> inputs);

// --- Elementwise operators (kernels/elementwise*.wgsl) -------------------------------------

// The operator files, by the type of their results.
constexpr const char* kFloatOps = "elementwise_float.wgsl";
constexpr const char* kIntegerOps = "elementwise_integer.wgsl";
constexpr const char* kLogicalOps = "elementwise_logical.wgsl";

// One operator: its file and its OP_ constant there.
struct ElementwiseOp {
  const char* file;
  const char* name;
};

// What an elementwise operator computes in, and its scalars.
struct Computation {
  // The compute type: of floating operators f32 (also for f16) or f64, by default from the
  // output; of integer operators i32 or i64; of comparisons the type the operands compare in.
  at::ScalarType compute = at::ScalarType::Undefined;
  at::Scalar a = 0;
  at::Scalar b = 0;
  at::Scalar c = 0;
  uint32_t words[2] = {0, 0};  // two integers some operators take
  bool uses_index = false;     // the operator reads the element's index, so elements keep their order
  std::optional<int32_t> diagonal = std::nullopt;  // triu and tril: the diagonal, in a's place
};

// Runs `op` for every element of `out`, the inputs (up to 3) broadcast to its shape; a CPU
// scalar input becomes a constant. Returns false, doing nothing, when a kernel cannot do it (a
// dtype the device has no kernels for, more than 8 dimensions, a strided bool output, mixed
// float16 and 64-bit types); the caller then falls back.
bool elementwise(at::Tensor& out, at::ArrayRef<at::Tensor> inputs, ElementwiseOp op, const Computation& how = {});

// out = a @ b over one batch dimension (3-dimensional tensors) or two (4-dimensional: the
// kernel reads each operand through its strides, so a [batch, heads, rows, depth] view of a
// [batch, rows, heads, depth] tensor is not copied, as at::matmul's folding of the batch
// dimensions would). An operand's batch dimension may be 1 (broadcast). Returns false, doing
// nothing, when a kernel cannot do it.
bool batched_product(at::Tensor& out, const at::Tensor& a, const at::Tensor& b);

// The softmax of x along its last dimension and each row's log-sum-exp (in the compute type),
// in one pass over each row (kernels/softmax.wgsl's softmax_lse); a row of only -inf gets
// probabilities 0 and a log-sum-exp of +inf. Nothing, doing nothing, when the kernel does not
// take x (rows of 256 or more, which a workgroup each serves better).
std::optional<std::pair<at::Tensor, at::Tensor>> softmax_with_logsumexp(const at::Tensor& x);

}  // namespace xhal_torch
