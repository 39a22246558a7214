// The PyTorch device `xhal`: shared declarations of the runtime layer (devices, streams,
// events, memory, kernels) that the copy and operator files use. Everything goes through
// the xhal C API (xhal_capi.h); nothing here knows a backend.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/Stream.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "xhal_capi.h"

namespace xhal_torch {

// Throws a c10::Error with the C API's message when `status` is not XHAL_SUCCESS.
void check(xhal_status_t status, const char* what);

// A compiled kernel and the `@binding` numbers (group 0) of the bindings it uses, in
// launch order.
struct Kernel {
  xhal_kernel_t* kernel = nullptr;
  std::vector<uint32_t> bindings;
};
// One xhal device as torch sees it: `xhal:N` is the Nth device the selector accepts.
struct Device {
  int index = 0;
  std::string label;  // `vulkan:0`
  std::string name;
  xhal_device_t* device = nullptr;
  xhal_stream_t* default_stream = nullptr;
  uint64_t features = 0;
  uint64_t total_memory = 0;
  uint32_t max_scalar_block_size = 0;  // bytes of `var<immediate>` a launch may pass
  std::mutex mutex;  // guards streams and kernels
  std::vector<xhal_stream_t*> streams;  // torch stream id k > 0 is streams[k - 1]
  std::unordered_map<std::string, std::unique_ptr<Kernel>> kernels;  // by WGSL source
  std::unordered_map<std::string, const Kernel*> kernels_by_key;
};

// Where the plugins are (the package's own folder), before the first device is used;
// XHAL_PLUGIN_PATH, when set, wins.
void set_plugin_path(const std::string& path);

// Devices, opened on first use.
int device_count();
Device& device(int index);
int current_device();
void set_device(int index);

// The xhal stream of a torch stream, and the current stream of a device on this thread.
xhal_stream_t* stream_of(const c10::Stream& stream);
c10::Stream current_stream(int index);
xhal_stream_t* current_xhal_stream(int index);

// Memory: each torch storage is one xhal buffer. A DataPtr's data is the buffer's xhal
// address (so pointer arithmetic on data_ptr works), and its context is the buffer.
c10::Allocator* allocator();

// The pinned memory (from `pin_memory()`) that holds host address `pointer`, and the offset
// of `pointer` in it; `pinned` is null for any other address.
struct PinnedPlace {
  xhal_pinned_t* pinned = nullptr;
  uint64_t offset = 0;
};
PinnedPlace pinned_of(const void* pointer);

// Where a tensor's first element lives: its storage's buffer and the byte offset in it.
struct Place {
  xhal_buffer_t* buffer = nullptr;
  uint64_t offset = 0;
};
Place place_of(const at::Tensor& tensor);

// The kernel of `source` on `device`, compiled once per source.
const Kernel& kernel(Device& device, const std::string& source);
// The kernel cached under `key`, or null.
const Kernel* find_kernel_by_key(Device& device, const std::string& key);
// Compiles `source` (or finds it compiled) and caches it under `key` too.
const Kernel& remember_kernel_by_key(Device& device, const std::string& key, const std::string& source);
// The kernel cached under `key`, whose source `make_source` writes on the first use: for hot
// paths, where writing the whole source to look it up would cost more than the launch. A
// template, so that the lookup allocates nothing.
template <typename MakeSource>
const Kernel& kernel_by_key(Device& device, const std::string& key, MakeSource&& make_source) {
  if (const Kernel* found = find_kernel_by_key(device, key)) return *found;
  return remember_kernel_by_key(device, key, make_source());
}

// One binding of a launch: a tensor's buffer (from its storage offset on), or uniform bytes.
struct Binding {
  xhal_buffer_t* buffer = nullptr;
  uint64_t offset = 0;
  uint64_t size = XHAL_WHOLE_SIZE;
  const void* data = nullptr;
};
// Launches `kernel` over `invocations` invocations; `bindings[n]` is `@binding(n)`, and
// those the kernel does not use are left out.
// `scalars` (`scalar_size` bytes) is the kernel's `var<immediate>` block, if it has one.
void launch(Device& device, const Kernel& kernel, at::ArrayRef<Binding> bindings, uint64_t invocations,
            const void* scalars = nullptr, size_t scalar_size = 0);

// Operators that fell back to the CPU: counted per operator, logged once per operator.
void count_fallback(const std::string& op);
std::vector<std::pair<std::string, int64_t>> fallback_counts();
void reset_fallback_counts();

// The boxed CPU fallback: counts the operator, then runs it on the CPU (memory_ops.cpp).
void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Copies between the CPU and xhal, and within xhal (copy.cpp).
at::Tensor& copy_into(at::Tensor& destination, const at::Tensor& source);
// Registered in ops.cpp: whether a dtype has native kernels on a device.
bool native_dtype(const Device& device, at::ScalarType dtype);
// A device-side strided copy with conversion, for dtypes with native kernels (ops.cpp).
bool copy_on_device(at::Tensor& destination, const at::Tensor& source);

}  // namespace xhal_torch
