// The operators a device must implement itself: creating tensors, views, copies between
// the CPU and xhal, fills, `item()`, resizing, and the CPU fallback for everything else.
// Device memory is reached only through xhal streams: a storage's data pointer is an xhal
// address, never a host pointer, so no CPU code may read it.

#include <ATen/EmptyTensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/util/strides.h>
#include <torch/library.h>

#include "xhal_torch.h"

namespace xhal_torch {
namespace {

constexpr c10::DispatchKeySet kKeys(c10::DispatchKey::PrivateUse1);

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  const auto where = c10::device_or_default(device);
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "xhal: tensors are strided; layout ", c10::layout_or_default(layout), " is not supported");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "xhal: only CPU memory can be pinned");
  const c10::DeviceGuard guard(where);
  return at::detail::empty_generic(size, allocator(), kKeys, c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                         std::optional<bool> pin_memory) {
  const auto where = c10::device_or_default(device);
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "xhal: tensors are strided; layout ", c10::layout_or_default(layout), " is not supported");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "xhal: only CPU memory can be pinned");
  const c10::DeviceGuard guard(where);
  return at::detail::empty_strided_generic(size, stride, allocator(), kKeys, c10::dtype_or_default(dtype));
}

at::Tensor as_strided(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                      std::optional<c10::SymInt> storage_offset) {
  return at::native::as_strided_tensorimpl(
      self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride),
      storage_offset.has_value() ? std::optional<int64_t>(storage_offset->expect_int()) : std::nullopt);
}

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

at::Tensor reshape_alias(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride));
}

// The storage elements a tensor's view touches: [first, end).
std::pair<int64_t, int64_t> span(const at::Tensor& t) {
  int64_t first = t.storage_offset();
  int64_t last = first;
  for (int64_t d = 0; d < t.dim(); d++) last += (t.size(d) - 1) * t.stride(d);
  return {first, last + 1};
}

Device& device_on(const at::Tensor& t) { return device(t.device().index()); }

xhal_stream_t* stream_for(const at::Tensor& t) { return current_xhal_stream(t.device().index()); }

// Host bytes of the storage range a view touches, as a CPU tensor of the view's shape.
at::Tensor read_span(const at::Tensor& t) {
  auto [first, end] = span(t);
  const int64_t item = t.element_size();
  auto host = at::empty({(end - first) * item}, at::TensorOptions().dtype(at::kByte));
  Place p = place_of(t);
  uint64_t base = p.offset - static_cast<uint64_t>(t.storage_offset() - first) * item;
  check(xhal_stream_read(stream_for(t), p.buffer, base, host.data_ptr(), host.numel()), "read");
  auto typed = host.view(t.scalar_type());
  return typed.as_strided(t.sizes(), t.strides(), 0);
}

// Writes back the storage range of `t` from `host_span` (what read_span returned, changed).
void write_span(const at::Tensor& t, const at::Tensor& host_view) {
  auto [first, end] = span(t);
  const int64_t item = t.element_size();
  Place p = place_of(t);
  uint64_t base = p.offset - static_cast<uint64_t>(t.storage_offset() - first) * item;
  // host_view is a view at offset 0 of a contiguous byte tensor holding the whole span.
  const void* bytes = host_view.storage().data();
  check(xhal_stream_write_async(stream_for(t), p.buffer, base, bytes, (end - first) * item), "write");
}

void write_contiguous(const at::Tensor& destination, const at::Tensor& host) {
  Place p = place_of(destination);
  check(xhal_stream_write_async(stream_for(destination), p.buffer, p.offset, host.data_ptr(), host.nbytes()),
        "write");
}

void read_contiguous(const at::Tensor& source, void* out) {
  Place p = place_of(source);
  check(xhal_stream_read(stream_for(source), p.buffer, p.offset, out, source.nbytes()), "read");
}

// CPU -> xhal.
void upload(at::Tensor& destination, const at::Tensor& source) {
  auto host = source.to(destination.scalar_type()).expand(destination.sizes()).contiguous();
  if (destination.is_contiguous()) {
    write_contiguous(destination, host);
    return;
  }
  if (native_dtype(device_on(destination), destination.scalar_type())) {
    auto staged = at::empty(destination.sizes(), destination.options());
    write_contiguous(staged, host);
    if (copy_on_device(destination, staged)) return;
  }
  // Any dtype and layout: read the bytes the view covers, change them on the host, write back.
  auto view = read_span(destination);
  view.copy_(host);
  write_span(destination, view);
}

// xhal -> CPU.
void download(at::Tensor& destination, const at::Tensor& source) {
  if (source.is_contiguous()) {
    if (destination.is_contiguous() && destination.scalar_type() == source.scalar_type() &&
        destination.sizes() == source.sizes()) {
      read_contiguous(source, destination.data_ptr());
      return;
    }
    auto host = at::empty(source.sizes(), source.options().device(at::kCPU));
    read_contiguous(source, host.data_ptr());
    destination.copy_(host);
    return;
  }
  if (native_dtype(device_on(source), source.scalar_type())) {
    auto packed = at::empty(source.sizes(), source.options());
    if (copy_on_device(packed, source)) {
      download(destination, packed);
      return;
    }
  }
  destination.copy_(read_span(source));
}

// xhal -> xhal.
void device_to_device(at::Tensor& destination, const at::Tensor& source) {
  if (source.device() != destination.device()) {
    destination.copy_(source.to(at::kCPU));
    return;
  }
  if (source.scalar_type() == destination.scalar_type() && source.sizes() == destination.sizes() &&
      source.is_contiguous() && destination.is_contiguous()) {
    Place from = place_of(source), to = place_of(destination);
    check(xhal_stream_copy(stream_for(destination), from.buffer, from.offset, to.buffer, to.offset,
                           source.nbytes()),
          "copy");
    return;
  }
  if (copy_on_device(destination, source)) return;
  upload(destination, source.to(at::kCPU));
}

// A non-blocking copy between a device tensor and pinned memory (`pin_memory()`) of the same
// layout: queued on the stream without staging, and returns at once. False, doing nothing,
// for any other pair (memory pinned for another device included).
bool copy_pinned(const at::Tensor& device_tensor, const at::Tensor& host, bool to_device) {
  if (!host.is_contiguous() || !device_tensor.is_contiguous() || host.scalar_type() != device_tensor.scalar_type() ||
      host.sizes() != device_tensor.sizes())
    return false;
  const PinnedPlace pinned = pinned_of(host.data_ptr());
  if (pinned.pinned == nullptr) return false;
  const Place p = place_of(device_tensor);
  xhal_stream_t* stream = stream_for(device_tensor);
  const xhal_status_t status =
      to_device ? xhal_stream_write_pinned(stream, p.buffer, p.offset, pinned.pinned, pinned.offset, host.nbytes())
                : xhal_stream_read_pinned(stream, p.buffer, p.offset, pinned.pinned, pinned.offset, host.nbytes());
  return status == XHAL_SUCCESS;
}

// The same memory, sizes and strides as `t`, without the conjugate and negative bits: what
// its bytes hold.
at::Tensor raw_view(const at::Tensor& t) {
  const c10::DispatchKeySet keys =
      t.key_set().remove(c10::DispatchKey::Conjugate).remove(c10::DispatchKey::Negative);
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(t.storage()), keys, t.dtype());
  impl->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return at::Tensor(std::move(impl));
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& destination, bool non_blocking);

// A copy where either side is a conjugate or negative view (`z.conj()`, `x._neg_view()`): the
// bits are applied on the CPU, and only bytes cross. Without this, PyTorch's conjugate fallback
// would resolve the source by cloning it, which copies it again, without end.
void copy_with_bits(const at::Tensor& self, const at::Tensor& destination) {
  at::Tensor value = self.is_cpu() ? self.resolve_conj().resolve_neg() : raw_view(self).to(at::kCPU);
  if (!self.is_cpu() && self.is_conj()) value = value.conj_physical();
  if (!self.is_cpu() && self.is_neg()) value = value.neg();
  if (destination.is_conj()) value = value.conj_physical();
  if (destination.is_neg()) value = value.neg();
  if (destination.is_cpu()) {
    raw_view(destination).copy_(value);
  } else {
    copy_from(value, raw_view(destination), false);
  }
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& destination, bool non_blocking) {
  auto dst = destination;
  if (dst.numel() == 0) return destination;
  if (self.is_conj() || self.is_neg() || destination.is_conj() || destination.is_neg()) {
    copy_with_bits(self, destination);
    return destination;
  }
  // Only a non-blocking copy may leave pinned memory in use when it returns; a blocking one
  // from ordinary or pinned memory stages the bytes (to the device) or waits (to the host).
  if (non_blocking && self.is_cpu() && copy_pinned(destination, self, true)) return destination;
  if (non_blocking && destination.is_cpu() && copy_pinned(self, destination, false)) return destination;
  if (self.is_cpu()) {
    upload(dst, self);
  } else if (destination.is_cpu()) {
    download(dst, self);
  } else {
    TORCH_CHECK(self.is_privateuseone() && destination.is_privateuseone(), "xhal: cannot copy from ",
                self.device(), " to ", destination.device(), "; copy through the CPU");
    device_to_device(dst, self);
  }
  return destination;
}

// Resizes the storage of `self` to `bytes`, keeping its contents.
void resize_storage(const at::Tensor& self, size_t bytes) {
  auto* impl = self.storage().unsafeGetStorageImpl();
  TORCH_CHECK(impl->resizable(), "xhal: trying to resize a storage that is not resizable");
  const c10::DeviceGuard guard(self.device());
  at::DataPtr fresh = allocator()->allocate(bytes);
  size_t keep = std::min(bytes, impl->nbytes());
  if (keep > 0) {
    auto* from = static_cast<xhal_buffer_t*>(impl->data_ptr().get_context());
    auto* to = static_cast<xhal_buffer_t*>(fresh.get_context());
    check(xhal_stream_copy(stream_for(self), from, 0, to, 0, keep), "resize");
  }
  impl->set_data_ptr_noswap(std::move(fresh));
  impl->set_nbytes(bytes);
}

const at::Tensor& resize(const at::Tensor& self, c10::SymIntArrayRef size,
                         std::optional<at::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  auto sizes = C10_AS_INTARRAYREF_SLOW(size);
  // Resizing to the same sizes keeps the strides, as on the CPU: the fallback resizes each
  // `out=` argument it writes back, views included.
  if (self.sizes() == sizes && (!memory_format.has_value() || *memory_format == at::MemoryFormat::Preserve)) return self;
  impl->set_sizes_contiguous(sizes);
  if (memory_format.has_value() && *memory_format != at::MemoryFormat::Preserve) {
    impl->empty_tensor_restride(*memory_format);
  }
  const size_t needed = static_cast<size_t>(self.storage_offset() + self.numel()) * self.element_size();
  if (self.numel() > 0 && needed > self.storage().nbytes()) resize_storage(self, needed);
  return self;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& destination) {
  resize(destination, self.sym_sizes(), std::nullopt);
  return copy_from(self, destination, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  auto host = at::empty({}, self.options().device(at::kCPU));
  read_contiguous(self, host.data_ptr());
  return host.item();
}

at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value) {
  if (self.numel() == 0) return self;
  auto pattern = at::empty({}, self.options().device(at::kCPU)).fill_(value);
  const size_t item = self.element_size();
  if (self.is_contiguous() && (item == 1 || item == 2 || item == 4)) {
    Place p = place_of(self);
    check(xhal_stream_fill(stream_for(self), p.buffer, p.offset, self.nbytes(), pattern.data_ptr(), item), "fill");
    return self;
  }
  upload(self, pattern);
  return self;
}

at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ takes a 0-dimensional value tensor, not one of ", value.dim(),
              " dimensions");
  return fill_scalar(self, value.is_cpu() ? value.item() : local_scalar_dense(value));
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  return at::native::set_tensor_(self, source);
}

at::Tensor& set_source_storage(at::Tensor& self, at::Storage source) { return at::native::set_(self, source); }

at::Tensor& set_storage_offset(at::Tensor& self, at::Storage storage, c10::SymInt storage_offset,
                               c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  auto sizes = C10_AS_INTARRAYREF_SLOW(size);
  // No strides means contiguous ones.
  at::DimVector strides(C10_AS_INTARRAYREF_SLOW(stride));
  if (strides.empty() && !sizes.empty()) strides = c10::contiguous_strides(sizes);
  const int64_t offset = storage_offset.expect_int();
  int64_t end = offset + 1;
  bool empty = false;
  for (size_t d = 0; d < sizes.size(); d++) {
    if (sizes[d] == 0) empty = true;
    end += (sizes[d] - 1) * (d < strides.size() ? strides[d] : 1);
  }
  TORCH_CHECK(empty || static_cast<size_t>(end) * self.element_size() <= storage.nbytes(),
              "xhal: set_ would view past the end of a storage of ", storage.nbytes(), " bytes");
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(storage));
  impl->set_sizes_and_strides(sizes, strides, offset);
  return self;
}

// Whether `self` can take `from`'s data in place (`param.data = t`, and so nn.Module.to
// moving a model's parameters in place). PyTorch answers yes only between its own devices'
// dense tensors; between the CPU's and xhal's it is as true, and saying so keeps a model's
// Parameter objects (and parameters tied to each other) what they were when it moves.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    return t.layout() == c10::Layout::Strided && (t.is_cpu() || t.is_privateuseone()) && !t.is_quantized();
  };
  if (dense(self) && dense(from)) return true;
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

}  // namespace

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  random_fallback_generators(op, stack);
  if (widen_to_float(op, stack)) return;
  const auto& name = op.schema().operator_name();
  count_fallback(name.overload_name.empty() ? name.name : name.name + "." + name.overload_name);
  at::native::cpu_fallback(op, stack);
}

at::Tensor& copy_into(at::Tensor& destination, const at::Tensor& source) {
  copy_from(source, destination, false);
  return destination;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", as_strided);
  m.impl("view", view);
  m.impl("_reshape_alias", reshape_alias);
  // Views PyTorch implements per backend: each only restrides, so they alias as on the CPU
  // (through the fallback they would be copies, and writes through them lost).
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
  m.impl("unfold", at::native::unfold);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("resize_", resize);
  m.impl("fill_.Scalar", fill_scalar);
  m.impl("fill_.Tensor", fill_tensor);
  m.impl("set_.source_Tensor", set_source_tensor);
  m.impl("set_.source_Storage", set_source_storage);
  m.impl("set_.source_Storage_storage_offset", set_storage_offset);
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
}

// Before autograd's own answer (PyTorch's composite kernel), which would decide first.
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
}

// Copies handle conjugate and negative views themselves (copy_with_bits).
TORCH_LIBRARY_IMPL(aten, Conjugate, m) { m.impl("_copy_from", torch::CppFunction::makeFallthrough()); }
TORCH_LIBRARY_IMPL(aten, Negative, m) { m.impl("_copy_from", torch::CppFunction::makeFallthrough()); }

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
}

}  // namespace xhal_torch
