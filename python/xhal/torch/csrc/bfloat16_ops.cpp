// bfloat16 on the device. The elementwise kernels read and write it themselves (two to a 32-bit
// word, computing in f32). Every other operator with an xhal kernel runs on f32 copies of its
// bfloat16 operands, made on the device, and its floating results are rounded back to
// bfloat16, as PyTorch's CPU kernels compute bfloat16 in float and round once. Without this,
// bfloat16 operands would cross to the CPU and back for each such operator.

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "ops.h"

namespace xhal_torch {
namespace {

bool on_xhal(const at::Tensor& t) { return t.defined() && t.is_privateuseone(); }

// Whether every floating tensor among an operator's arguments is bfloat16 (at least one of them
// on the device), so that computing in f32 and rounding the results gives the operator's own
// answer. Mixed floating dtypes promote to the wider one, which this does not decide.
struct Operands {
  bool bfloat16_on_device = false;
  bool other_floating = false;

  void look_at(const at::Tensor& t) {
    if (!t.defined()) return;
    const at::ScalarType dtype = t.scalar_type();
    if (dtype == at::kBFloat16) {
      bfloat16_on_device = bfloat16_on_device || on_xhal(t);
      // A bfloat16 tensor on another device than the CPU or xhal is its own backend's.
      other_floating = other_floating || !(t.is_cpu() || on_xhal(t));
    } else if (at::isFloatingType(dtype) || at::isComplexType(dtype)) {
      other_floating = true;
    }
  }

  void look_at(const c10::IValue& value) {
    if (value.isTensor()) {
      look_at(value.toTensor());
    } else if (value.isTensorList()) {
      for (const at::Tensor& t : value.toTensorList()) look_at(t);
    } else if (value.isOptionalTensorList()) {
      for (const std::optional<at::Tensor>& t : value.toOptionalTensorList()) {
        if (t.has_value()) look_at(*t);
      }
    }
  }
};

at::Tensor widen(const at::Tensor& t) {
  return t.defined() && t.scalar_type() == at::kBFloat16 ? t.to(at::kFloat) : t;
}

c10::IValue widen(const c10::IValue& value) {
  if (value.isTensor()) return widen(value.toTensor());
  if (value.isTensorList()) {
    c10::List<at::Tensor> wide;
    for (const at::Tensor& t : value.toTensorList()) wide.push_back(widen(t));
    return wide;
  }
  if (value.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> wide;
    for (const std::optional<at::Tensor>& t : value.toOptionalTensorList()) {
      wide.push_back(t.has_value() ? std::optional<at::Tensor>(widen(*t)) : std::nullopt);
    }
    return wide;
  }
  return value;
}

at::Tensor narrow(const at::Tensor& t) {
  return t.defined() && t.scalar_type() == at::kFloat ? t.to(at::kBFloat16) : t;
}

c10::IValue narrow(const c10::IValue& value) {
  if (value.isTensor()) return narrow(value.toTensor());
  if (value.isTensorList()) {
    c10::List<at::Tensor> narrowed;
    for (const at::Tensor& t : value.toTensorList()) narrowed.push_back(narrow(t));
    return narrowed;
  }
  return value;
}

// Writes what the operator wrote into a widened argument back into the bfloat16 original,
// resized as the operator resized its copy (an `out=` argument).
void write_back(const at::Tensor& original, const at::Tensor& wide) {
  if (!original.defined() || original.scalar_type() != at::kBFloat16) return;
  if (original.sizes() != wide.sizes()) original.resize_(wide.sizes());
  original.copy_(wide);
}

void write_back(const c10::IValue& original, const c10::IValue& wide) {
  if (original.isTensor()) {
    write_back(original.toTensor(), wide.toTensor());
  } else if (original.isTensorList()) {
    const c10::List<at::Tensor> originals = original.toTensorList();
    const c10::List<at::Tensor> wides = wide.toTensorList();
    for (size_t i = 0; i < originals.size(); i++) write_back(originals.get(i), wides.get(i));
  }
}

// native_batch_norm updates its running statistics in place, though its schema does not say
// so (the variants after it do).
bool updates_unannotated(const c10::Argument& argument) {
  return argument.name() == "running_mean" || argument.name() == "running_var";
}

}  // namespace

bool widen_bfloat16(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  // Only operators with xhal kernels gain: the others would run on the CPU in f32 instead.
  if (!op.hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) return false;
  const c10::FunctionSchema& schema = op.schema();
  const size_t count = schema.arguments().size();
  auto arguments = torch::jit::last(stack, count);

  // An explicit dtype (`sum(dtype=)`) decides the result's type itself: f32 is what the
  // operator computes in anyway, and its results (and `out=`) stay f32; any other is left to
  // the CPU.
  bool results_in_float = false;
  for (size_t i = 0; i < count; i++) {
    const c10::Argument& argument = schema.arguments()[i];
    c10::TypePtr type = argument.real_type();
    if (type->kind() == c10::TypeKind::OptionalType) type = type->containedType(0);
    if (type->kind() == c10::TypeKind::ScalarTypeType && !arguments[i].isNone()) {
      if (arguments[i].toScalarType() != at::kFloat) return false;
      results_in_float = true;
    }
    // A view must alias its operand, which a copy cannot.
    if (argument.alias_info() != nullptr && !argument.alias_info()->isWrite()) return false;
  }
  Operands operands;
  for (size_t i = 0; i < count; i++) {
    const bool written = schema.arguments()[i].alias_info() != nullptr;
    if (results_in_float && written && arguments[i].isTensor() && arguments[i].toTensor().scalar_type() == at::kFloat)
      continue;
    operands.look_at(arguments[i]);
  }
  if (!operands.bfloat16_on_device || operands.other_floating) return false;

  const std::vector<c10::IValue> originals(arguments.begin(), arguments.end());
  std::vector<c10::IValue> wide(count);
  for (size_t i = 0; i < count; i++) wide[i] = widen(originals[i]);
  torch::jit::drop(stack, count);
  for (const c10::IValue& value : wide) torch::jit::push(stack, value);

  op.callBoxed(stack);

  for (size_t i = 0; i < count; i++) {
    const c10::Argument& argument = schema.arguments()[i];
    const c10::AliasInfo* alias = argument.alias_info();
    if ((alias != nullptr && alias->isWrite()) || updates_unannotated(argument)) write_back(originals[i], wide[i]);
  }
  const size_t returns = schema.returns().size();
  c10::IValue* results = stack->data() + (stack->size() - returns);
  for (size_t r = 0; r < returns; r++) {
    const c10::AliasInfo* alias = schema.returns()[r].alias_info();
    if (alias == nullptr) {
      if (!results_in_float) results[r] = narrow(results[r]);
      continue;
    }
    // A return that is a written argument (`self` of an in-place operator, `out`) is the
    // original argument.
    for (size_t i = 0; i < count; i++) {
      const c10::AliasInfo* argument_alias = schema.arguments()[i].alias_info();
      if (argument_alias != nullptr && argument_alias->beforeSets() == alias->beforeSets()) {
        results[r] = originals[i];
        break;
      }
    }
  }
  return true;
}

}  // namespace xhal_torch
