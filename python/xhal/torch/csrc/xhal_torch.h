// The PyTorch device `xhal`: shared declarations of the runtime layer (devices, streams,
// events, memory, kernels) that the copy and operator files use. Everything goes through
// the xhal C API (xhal_capi.h); nothing here knows a backend.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/Stream.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <optional>
#include <vector>

#include "xhal_capi.h"

namespace xhal_torch {

// Throws a c10::Error with the C API's message when `status` is not XHAL_SUCCESS.
void check(xhal_status_t status, const char* what);
// Whether XHAL_LOG asks for info (or debug, trace) lines, which go to stderr.
bool log_info();

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
  // A CPU, which runs a workgroup's invocations one after another (or a few in vector lanes),
  // so that a kernel's per-invocation work (index divisions) is worth sharing across elements.
  bool runs_invocations_in_turn = false;
  // Tuning passes' answers for this process, -1 until known: read on every matrix product and
  // every flat elementwise operation, so without a lock (matmul_ops.cpp, elementwise_ops.cpp).
  std::atomic<int> matmul_tiles{-1};
  std::atomic<int> flat_runs{-1};
  int32_t urgent_priority = 0;  // what torch's high-priority streams get: -1, or 0 on a device without priorities
  // A small buffer bound where a kernel declares memory that a launch does not use (an input
  // past an operator's arity), so that a binding never aliases one the kernel writes.
  xhal_buffer_t* placeholder = nullptr;
  std::mutex mutex;  // guards streams and kernels
  std::vector<xhal_stream_t*> streams;  // torch stream id k > 0 is streams[k - 1]
  std::unordered_map<std::string, std::unique_ptr<Kernel>> kernels;  // by recipe key
};

// Choices of tuning passes kept on disk per device and xhal version (tuning_cache.cpp):
// the file (empty: none) and the version, set once from Python before the first pass.
void set_tuning_cache(const std::string& path, const std::string& version);
// A tuning question: `name` and the kernel file whose variants are timed, with a hash of its
// text, so that a changed kernel is asked again.
std::string tuning_question(const std::string& name, const std::string& kernel_path);
// The answer a pass gave `question` on this device, if the cache holds one.
std::optional<std::string> cached_tuning(Device& dev, const std::string& question);
// Keeps the answer of a pass for later processes (when the cache can be written).
void keep_tuning(Device& dev, const std::string& question, const std::string& answer);
// A tuning question's answer on `dev`, as an index into `answers`: the environment variable
// `setting` when set (one of the answers, else an error naming them); else the answer the
// cache holds; else a pass now, outside a graph capture: `time_each()` gives each answer's
// seconds, and the fastest is kept on disk. Nothing inside a capture when nothing is known
// yet (a capture cannot time: its work runs at replay), so the caller takes its untimed
// default and asks again later. `doing(answer)` says on XHAL_LOG=info's line what the device
// then does.
std::optional<size_t> tuned_answer(Device& dev, const char* setting, const std::vector<std::string>& answers,
                                   const std::string& question, const std::function<std::vector<double>()>& time_each,
                                   const std::function<std::string(size_t)>& doing);

// Where the plugins are (the package's own folder), before the first device is used;
// XHAL_PLUGIN_PATH, when set, wins.
void set_plugin_path(const std::string& path);

// Devices, opened on first use.
int device_count();
Device& device(int index);
// Whether xhal:`index` has been opened (never opens it).
bool device_opened(int index);
int current_device();
void set_device(int index);
// What the plugin reports of xhal:`index`, without opening it.
xhal_device_info_t device_info(int index);
// A torch stream's priority on its xhal device: 0, or the device's urgent priority.
int stream_priority(const c10::Stream& stream);
// The priority of device `index`'s high-priority streams: -1, or 0 where it has no priorities.
int urgent_priority(int index);

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

// --- The package's WGSL kernels (python/xhal/torch/kernels; kernel_library.cpp) ---------------
//
// Each kernel family is a WGSL file, embedded at build time. A kernel is an instantiation of
// one or more of them: each `alias NAME = TYPE;` they declare set to a type (the dtype-dependent
// parts), each `override` given a value (layouts and operator choices), and one entry point.
// Kernels that declare `alias F` or `alias I` get the math library of their type,
// lib/float_<F>.wgsl and lib/int_<I>.wgsl, before them. See kernels/README.md.

// The text of kernels/`path` (`"elementwise.wgsl"`, `"lib/float_f32.wgsl"`).
const std::string& kernel_file(const std::string& path);

// The value of `const NAME: u32 = N;` in kernels/`path`: how the C++ side names an operator
// that a kernel selects with an override.
uint32_t kernel_constant(const char* path, const char* name);

struct KernelRecipe {
  std::vector<std::string> files;                            // joined in this order
  std::vector<std::pair<std::string, std::string>> types;    // alias -> WGSL type
  std::vector<std::pair<std::string, double>> overrides;     // override -> value
  std::string entry;                                         // the entry point
};
// The WGSL source of `recipe`: its libraries, then its files with their aliases set.
std::string compose(const KernelRecipe& recipe);

// The kernel cached under `key` on `device`, compiled from `make_recipe()` on its first use.
// The key must identify the recipe; a template, so that a hit allocates nothing.
const Kernel* find_kernel_by_key(Device& device, const std::string& key);
const Kernel& remember_recipe_kernel(Device& device, const std::string& key, const KernelRecipe& recipe);
template <typename MakeRecipe>
const Kernel& recipe_kernel(Device& device, const std::string& key, MakeRecipe&& make_recipe) {
  if (const Kernel* found = find_kernel_by_key(device, key)) return *found;
  return remember_recipe_kernel(device, key, make_recipe());
}

// The WGSL type of a dtype's values in a kernel, and of the elements of its memory (bools are
// bytes, which WGSL cannot address, so their memory is read as u32 words); nullptr for dtypes
// without kernels.
const char* wgsl_type(at::ScalarType dtype);
const char* storage_type(at::ScalarType dtype);

// The kernel of `source` on `device`, compiled once per source.
const Kernel& kernel(Device& device, const std::string& source);

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
// Launches `kernel` over `workgroups` workgroups in x, y and z, for kernels that lay their work
// out in blocks (the tiled matrix product); otherwise as `launch`.
void launch_workgroups(Device& device, const Kernel& kernel, at::ArrayRef<Binding> bindings,
                       const std::array<uint32_t, 3>& workgroups, const void* scalars = nullptr,
                       size_t scalar_size = 0);

// --- Random numbers (random_ops.cpp) ------------------------------------------------------------
//
// The generator of an xhal device: Philox4x32-10 keyed by the seed, at a counter that is the
// offset (in 32-bit words, a multiple of 4) over 4; its state is CUDA's, the seed then the
// offset, 8 bytes each. kernels/random.wgsl draws from it.
struct PhiloxGenerator : public c10::GeneratorImpl {
  static constexpr int64_t kStateSize = 16;
  explicit PhiloxGenerator(c10::DeviceIndex index, uint64_t seed = c10::default_rng_seed_val);
  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override { return offset_; }
  void set_state(const c10::TensorImpl& state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  // The seed and first Philox block of a draw of `words` words; the offset moves past them.
  // During a graph capture, `state` is the buffer that holds the seed and the replay's first
  // block, and `block` counts from that block (random.wgsl's FROM_STATE).
  struct Reservation {
    uint64_t seed;
    uint64_t block;
    xhal_buffer_t* state = nullptr;
  };
  Reservation reserve(uint64_t words);
  // The seed and offset now, and the offset moved `words` on: what a graph's replay draws from.
  std::pair<uint64_t, uint64_t> advance(uint64_t words);

 private:
  PhiloxGenerator* clone_impl() const override;
  uint64_t seed_ = 0;
  uint64_t offset_ = 0;
};

// The default generator of xhal:`index` (what torch.manual_seed seeds), and a new one.
const at::Generator& default_generator(int index);
at::Generator new_generator(int index);
// Random draws in a graph capture (graph_ops.cpp). Each generator a captured draw uses gets a
// device buffer for its seed and the replay's first block, which the graph writes before each
// replay, moving the generator on by the words the graph draws: every replay draws new numbers,
// the ones eager steps would.
struct CapturedGenerator {
  c10::intrusive_ptr<PhiloxGenerator> generator;
  xhal_buffer_t* state = nullptr;
  uint64_t words = 0;
};
struct CapturedDraws {
  int device = 0;
  std::vector<CapturedGenerator> generators;
};
// Makes draws from now on record into `draws` (nullptr: draw as usual again).
void capture_draws(CapturedDraws* draws);
// Whether a capture is under way (random operators that cannot be captured refuse then).
bool capturing_draws();
// Seeds every device's default generator; before they exist, they will start from `seed`.
void seed_all(uint64_t seed);
void seed_device(int index, uint64_t seed);
// Whether the runtime exists (its devices were found): torch.xhal.is_initialized.
bool runtime_initialized();
// Whether this is a forked child of a process whose runtime existed, which may not use it.
bool in_bad_fork();
// Block `block` of the Philox stream of `seed`, as kernels/random.wgsl computes it.
std::array<uint32_t, 4> philox_block(uint64_t seed, uint64_t block);
// Gives a random operator that falls back to the CPU a CPU generator seeded from the xhal one.
void random_fallback_generators(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Operators that fell back to the CPU: counted per operator, logged once per operator.
void count_fallback(const std::string& op);
std::vector<std::pair<std::string, int64_t>> fallback_counts();
void reset_fallback_counts();

// The boxed CPU fallback: counts the operator, then runs it on the CPU (memory_ops.cpp).
void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// Runs an operator whose floating operands are bfloat16 (or float16 on a device without f16) on
// f32 copies of them on the device, when it has an xhal kernel; false, touching nothing, when it
// does not apply (bfloat16_ops.cpp).
bool widen_to_float(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Copies between the CPU and xhal, and within xhal (copy.cpp).
at::Tensor& copy_into(at::Tensor& destination, const at::Tensor& source);
// Registered in ops.cpp: whether a dtype has native kernels on a device.
bool native_dtype(const Device& device, at::ScalarType dtype);
// A device-side strided copy with conversion, for dtypes with native kernels (ops.cpp).
bool copy_on_device(at::Tensor& destination, const at::Tensor& source);

}  // namespace xhal_torch
