// bfloat16 on the device, and float16 on devices without f16. The elementwise kernels read and
// write bfloat16 themselves (two to a 32-bit word, computing in f32). Every other operator with
// an xhal kernel runs on f32 copies of its narrow operands and its floating results are rounded
// back, as PyTorch's CPU kernels compute bfloat16 and float16 in float and round once. Without
// this, such operands would cross to the CPU and back for each operator.

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "ops.h"

namespace xhal_torch {
namespace {

bool on_xhal(const at::Tensor& t) { return t.defined() && t.is_privateuseone(); }

// The floating operands of one operator: whether they are all of one narrow dtype that the
// device computes in f32 (bfloat16 always, float16 where the device lacks f16), at least one of
// them on the device, so that computing in f32 and rounding the results gives the operator's
// own answer. Mixed floating dtypes promote to the wider one, which this does not decide.
struct Operands {
  bool half_has_kernels = true;  // of the device of the operator's xhal tensors
  at::ScalarType narrow = at::ScalarType::Undefined;
  bool narrow_on_device = false;
  bool other_floating = false;

  void look_at(const at::Tensor& t) {
    if (!t.defined()) return;
    const at::ScalarType dtype = t.scalar_type();
    const bool widened = dtype == at::kBFloat16 || (dtype == at::kHalf && !half_has_kernels);
    if (widened && (narrow == at::ScalarType::Undefined || narrow == dtype)) {
      narrow = dtype;
      narrow_on_device = narrow_on_device || on_xhal(t);
      // A tensor on another device than the CPU or xhal is its own backend's.
      other_floating = other_floating || !(t.is_cpu() || on_xhal(t));
    } else if (at::isFloatingType(dtype) || at::isComplexType(dtype)) {
      other_floating = true;
    }
  }

  void find_device(const at::Tensor& t) {
    if (on_xhal(t)) half_has_kernels = half_has_kernels && on_device(t, at::kHalf);
  }
};

// `value` with each tensor in it (alone or in a list) replaced by `change(tensor)`.
template <typename Change>
c10::IValue map_tensors(const c10::IValue& value, Change&& change) {
  if (value.isTensor()) return change(value.toTensor());
  if (value.isTensorList()) {
    c10::List<at::Tensor> changed;
    for (const at::Tensor& t : value.toTensorList()) changed.push_back(change(t));
    return changed;
  }
  if (value.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> changed;
    for (const std::optional<at::Tensor>& t : value.toOptionalTensorList()) {
      changed.push_back(t.has_value() ? std::optional<at::Tensor>(change(*t)) : std::nullopt);
    }
    return changed;
  }
  return value;
}

template <typename Visit>
void for_each_tensor(const c10::IValue& value, Visit&& visit) {
  map_tensors(value, [&](const at::Tensor& t) {
    visit(t);
    return t;
  });
}

// Writes what the operator wrote into a widened argument back into the narrow original,
// resized as the operator resized its copy (an `out=` argument).
void write_back(const at::Tensor& original, const at::Tensor& wide, at::ScalarType narrow) {
  if (!original.defined() || original.scalar_type() != narrow) return;
  if (original.sizes() != wide.sizes()) original.resize_(wide.sizes());
  original.copy_(wide);
}

void write_back(const c10::IValue& original, const c10::IValue& wide, at::ScalarType narrow) {
  if (original.isTensor()) {
    write_back(original.toTensor(), wide.toTensor(), narrow);
  } else if (original.isTensorList()) {
    const c10::List<at::Tensor> originals = original.toTensorList();
    const c10::List<at::Tensor> wides = wide.toTensorList();
    for (size_t i = 0; i < originals.size(); i++) write_back(originals.get(i), wides.get(i), narrow);
  }
}

// native_batch_norm updates its running statistics in place, though its schema does not say
// so (the variants after it do).
bool updates_unannotated(const c10::Argument& argument) {
  return argument.name() == "running_mean" || argument.name() == "running_var";
}

}  // namespace

bool widen_to_float(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  // Only operators with xhal kernels gain: the others would run on the CPU in f32 instead.
  if (!op.hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) return false;
  const c10::FunctionSchema& schema = op.schema();
  const size_t count = schema.arguments().size();
  auto arguments = torch::jit::last(stack, count);

  // An explicit dtype (`sum(dtype=)`) decides the result's type itself: f32 is what the
  // operator computes in anyway, and its results (and `out=`) stay f32. The narrow dtype
  // itself (the `input_dtype` of softmax's backward) becomes f32 with the operands, and the
  // results are rounded back as usual; any other is left to the CPU.
  bool results_in_float = false;
  std::vector<size_t> narrow_dtype_arguments;
  for (size_t i = 0; i < count; i++) {
    const c10::Argument& argument = schema.arguments()[i];
    c10::TypePtr type = argument.real_type();
    if (type->kind() == c10::TypeKind::OptionalType) type = type->containedType(0);
    if (type->kind() == c10::TypeKind::ScalarTypeType && !arguments[i].isNone()) {
      if (arguments[i].toScalarType() == at::kFloat) {
        results_in_float = true;
      } else {
        narrow_dtype_arguments.push_back(i);
      }
    }
    // A view must alias its operand, which a copy cannot.
    if (argument.alias_info() != nullptr && !argument.alias_info()->isWrite()) return false;
  }
  Operands operands;
  for (size_t i = 0; i < count; i++) for_each_tensor(arguments[i], [&](const at::Tensor& t) { operands.find_device(t); });
  for (size_t i = 0; i < count; i++) {
    const bool written = schema.arguments()[i].alias_info() != nullptr;
    if (results_in_float && written && arguments[i].isTensor() && arguments[i].toTensor().scalar_type() == at::kFloat)
      continue;
    for_each_tensor(arguments[i], [&](const at::Tensor& t) { operands.look_at(t); });
  }
  if (!operands.narrow_on_device || operands.other_floating) return false;
  const at::ScalarType narrow = operands.narrow;
  for (size_t i : narrow_dtype_arguments) {
    if (results_in_float || arguments[i].toScalarType() != narrow) return false;
  }

  const std::vector<c10::IValue> originals(arguments.begin(), arguments.end());
  std::vector<c10::IValue> wide(count);
  for (size_t i = 0; i < count; i++) {
    wide[i] = map_tensors(originals[i], [&](const at::Tensor& t) {
      return t.defined() && t.scalar_type() == narrow ? t.to(at::kFloat) : t;
    });
  }
  for (size_t i : narrow_dtype_arguments) wide[i] = c10::IValue(at::kFloat);
  torch::jit::drop(stack, count);
  for (const c10::IValue& value : wide) torch::jit::push(stack, value);

  op.callBoxed(stack);

  for (size_t i = 0; i < count; i++) {
    const c10::Argument& argument = schema.arguments()[i];
    const c10::AliasInfo* alias = argument.alias_info();
    if ((alias != nullptr && alias->isWrite()) || updates_unannotated(argument)) write_back(originals[i], wide[i], narrow);
  }
  const size_t returns = schema.returns().size();
  c10::IValue* results = stack->data() + (stack->size() - returns);
  for (size_t r = 0; r < returns; r++) {
    const c10::AliasInfo* alias = schema.returns()[r].alias_info();
    if (alias == nullptr) {
      if (!results_in_float) {
        results[r] = map_tensors(results[r], [&](const at::Tensor& t) {
          return t.defined() && t.scalar_type() == at::kFloat ? t.to(narrow) : t;
        });
      }
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
