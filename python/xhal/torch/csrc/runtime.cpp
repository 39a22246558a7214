// The runtime half of the `xhal` PyTorch device: devices in XHAL_DEVICE's order, the device
// guard (current device, streams, events), the allocator (xhal's caching allocator as a
// c10::DeviceAllocator) and the PrivateUse1 hooks that make `torch.accelerator` see xhal.

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include "xhal_torch.h"

namespace xhal_torch {

void check(xhal_status_t status, const char* what) {
  TORCH_CHECK(status == XHAL_SUCCESS, "xhal: ", what, ": ", xhal_last_error_message());
}

namespace {

constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;
// Streams per device and priority beyond the default one; torch's pools hand them out in turn.
// Stream ids 1 to kPoolStreams are priority 0, the next kPoolStreams the device's urgent
// priority (-1 where the device has priorities, else 0).
constexpr int kPoolStreams = 8;

struct Runtime {
  xhal_runtime_t* runtime = nullptr;
  std::vector<uint32_t> order;  // xhal:N is runtime device order[N]
  std::vector<std::unique_ptr<Device>> devices;
  std::string error;  // why there is no runtime, when there is none
};

std::mutex g_runtime_mutex;
std::string g_plugin_path;
bool g_plugin_path_set = false;
// Set in a child forked from a process whose runtime existed: the drivers' state (threads,
// device handles) does not survive fork, so the child may not touch it.
std::atomic<bool> g_in_bad_fork{false};

void check_not_forked() {
  TORCH_CHECK(!g_in_bad_fork.load(std::memory_order_relaxed),
              "xhal: cannot use xhal devices in a forked child process whose parent had initialised them (a device "
              "driver's state does not survive fork()); start the child processes with the 'spawn' method "
              "(torch.multiprocessing.set_start_method('spawn')), or use xhal only in the children");
}

std::atomic<bool> g_runtime_created{false};

Runtime& runtime() {
  check_not_forked();
  static Runtime* instance = [] {
    pthread_atfork(nullptr, nullptr, [] { g_in_bad_fork.store(true); });
    g_runtime_created.store(true);
    auto* r = new Runtime();
    xhal_runtime_options_t options{};
    options.struct_size = sizeof options;
    std::string path;
    {
      std::lock_guard<std::mutex> lock(g_runtime_mutex);
      path = g_plugin_path;
    }
    options.plugin_path = (g_plugin_path_set && std::getenv("XHAL_PLUGIN_PATH") == nullptr) ? path.c_str() : nullptr;
    if (xhal_runtime_create(XHAL_API_MAJOR, XHAL_API_MINOR, &options, &r->runtime) != XHAL_SUCCESS) {
      r->error = xhal_last_error_message();
      return r;
    }
    uint32_t count = 0;
    if (xhal_runtime_select(r->runtime, nullptr, nullptr, 0, &count) != XHAL_SUCCESS) {
      r->error = xhal_last_error_message();
      return r;
    }
    r->order.resize(count);
    if (count > 0 && xhal_runtime_select(r->runtime, nullptr, r->order.data(), count, &count) != XHAL_SUCCESS) {
      r->error = xhal_last_error_message();
      r->order.clear();
      return r;
    }
    for (uint32_t i = 0; i < count; i++) r->devices.push_back(nullptr);
    return r;
  }();
  return *instance;
}

thread_local int t_current_device = 0;
// The current stream of each device on this thread, as a torch stream id (0: the default).
thread_local c10::StreamId t_current_stream[64] = {};

}  // namespace

void set_plugin_path(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_runtime_mutex);
  g_plugin_path = path;
  g_plugin_path_set = true;
}

int device_count() { return static_cast<int>(runtime().order.size()); }

// The devices opened so far, readable without the runtime's lock: every operation asks for its
// device, and an opened one stays for the life of the process.
static std::atomic<Device*> g_opened[64];

Device& device(int index) {
  check_not_forked();
  if (index >= 0 && index < 64) {
    if (Device* opened = g_opened[index].load(std::memory_order_acquire)) return *opened;
  }
  Runtime& r = runtime();
  TORCH_CHECK(r.error.empty(), "xhal: no devices: ", r.error);
  TORCH_CHECK(index >= 0 && index < static_cast<int>(r.order.size()), "xhal: device xhal:", index,
              " does not exist; there are ", r.order.size(), " (XHAL_DEVICE chooses them and their order)");
  std::lock_guard<std::mutex> lock(g_runtime_mutex);
  auto& slot = r.devices[index];
  if (!slot) {
    auto opened = std::make_unique<Device>();
    xhal_device_info_t info{};
    info.struct_size = sizeof info;
    check(xhal_runtime_device_info(r.runtime, r.order[index], &info), "device info");
    check(xhal_device_open(r.runtime, info.label, &opened->device), "open a device");
    check(xhal_device_default_stream(opened->device, &opened->default_stream), "default stream");
    check(xhal_buffer_alloc(opened->device, 16, &opened->placeholder), "allocate a placeholder buffer");
    int32_t least = 0, greatest = 0;
    check(xhal_device_stream_priorities(opened->device, &least, &greatest), "stream priorities");
    opened->urgent_priority = std::max(greatest, -1);
    opened->index = index;
    opened->label = info.label;
    opened->name = info.name;
    opened->features = info.features;
    opened->runs_invocations_in_turn = info.device_type == XHAL_DEVICE_TYPE_CPU;
    opened->total_memory = info.total_memory;
    opened->max_scalar_block_size = info.max_scalar_block_size;
    slot = std::move(opened);
    if (index < 64) g_opened[index].store(slot.get(), std::memory_order_release);
  }
  return *slot;
}

int current_device() { return t_current_device; }

bool device_opened(int index) {
  return index >= 0 && index < 64 && g_opened[index].load(std::memory_order_acquire) != nullptr;
}

bool runtime_initialized() { return g_runtime_created.load() && !g_in_bad_fork.load(); }

bool in_bad_fork() { return g_in_bad_fork.load(); }

int stream_priority(const c10::Stream& stream) {
  if (stream.id() == 0) return 0;
  int32_t priority = 0;
  check(xhal_stream_priority(stream_of(stream), &priority), "stream priority");
  return priority;
}

int urgent_priority(int index) { return device(index).urgent_priority; }

xhal_device_info_t device_info(int index) {
  Runtime& r = runtime();
  TORCH_CHECK(r.error.empty(), "xhal: no devices: ", r.error);
  TORCH_CHECK(index >= 0 && index < static_cast<int>(r.order.size()), "xhal: device xhal:", index,
              " does not exist; there are ", r.order.size());
  xhal_device_info_t info{};
  info.struct_size = sizeof info;
  check(xhal_runtime_device_info(r.runtime, r.order[index], &info), "device info");
  return info;
}

void set_device(int index) {
  TORCH_CHECK(index >= 0 && index < device_count(), "xhal: device xhal:", index, " does not exist; there are ",
              device_count());
  t_current_device = index;
}

xhal_stream_t* stream_of(const c10::Stream& stream) {
  Device& d = device(stream.device_index() < 0 ? current_device() : stream.device_index());
  if (stream.id() == 0) return d.default_stream;
  std::lock_guard<std::mutex> lock(d.mutex);
  auto k = static_cast<size_t>(stream.id());
  TORCH_CHECK(k <= d.streams.size(), "xhal: stream ", stream.id(), " of xhal:", d.index, " does not exist");
  return d.streams[k - 1];
}

c10::Stream current_stream(int index) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kType, static_cast<c10::DeviceIndex>(index)),
                     t_current_stream[index & 63]);
}

xhal_stream_t* current_xhal_stream(int index) { return stream_of(current_stream(index)); }

namespace {

// A stream from the device's pool of its priority (0, or below 0: the device's urgent priority,
// which xhal's plugins schedule first), created when first handed out.
c10::Stream pool_stream(c10::Device d, int priority = 0) {
  int index = d.index() < 0 ? current_device() : d.index();
  Device& dev = device(index);
  static std::atomic<uint32_t> next[2] = {0, 0};
  const bool high = priority < 0;
  std::lock_guard<std::mutex> lock(dev.mutex);
  size_t k = next[high]++ % kPoolStreams + (high ? kPoolStreams : 0);
  while (dev.streams.size() <= k) {
    xhal_stream_t* s = nullptr;
    const bool urgent_slot = dev.streams.size() >= static_cast<size_t>(kPoolStreams);
    check(xhal_stream_create_with_priority(dev.device, urgent_slot ? dev.urgent_priority : 0, &s), "create a stream");
    dev.streams.push_back(s);
  }
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kType, static_cast<c10::DeviceIndex>(index)),
                     static_cast<c10::StreamId>(k + 1));
}

// A torch event: the xhal event, made on the first record (when the device is known).
struct Event {
  xhal_event_t* event = nullptr;
  int device = -1;
  bool timing = false;
};

struct GuardImpl final : public c10::impl::DeviceGuardImplInterface {
  GuardImpl() = default;
  explicit GuardImpl(c10::DeviceType t) { TORCH_INTERNAL_ASSERT(t == kType); }
  c10::DeviceType type() const override { return kType; }
  c10::Device exchangeDevice(c10::Device d) const override {
    auto old = getDevice();
    if (old.index() != d.index()) set_device(d.index());
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kType, static_cast<c10::DeviceIndex>(current_device())); }
  void setDevice(c10::Device d) const override { set_device(d.index()); }
  void uncheckedSetDevice(c10::Device d) const noexcept override { t_current_device = d.index(); }
  c10::Stream getStream(c10::Device d) const override {
    return current_stream(d.index() < 0 ? current_device() : d.index());
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT,
                       c10::Device(kType, d.index() < 0 ? static_cast<c10::DeviceIndex>(current_device()) : d.index()));
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool high_priority = false) const override {
    return pool_stream(d, high_priority ? -1 : 0);
  }
  c10::Stream getNewStream(c10::Device d, int priority = 0) const override { return pool_stream(d, priority); }
  // Tensors of every dtype can be made on an xhal device and converted (operators without
  // kernels for a dtype run on the CPU); quantized tensors cannot.
  c10::DeviceCapability getDeviceCapability(c10::Device) const override {
    c10::DeviceCapability capability;
    auto& types = capability.capability_data.supported_scalar_types;
    types.has_QInt8 = types.has_QUInt8 = types.has_QInt32 = types.has_QUInt4x2 = types.has_QUInt2x4 = 0;
    return capability;
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    auto old = current_stream(s.device_index());
    t_current_stream[s.device_index() & 63] = s.id();
    return old;
  }
  c10::DeviceIndex deviceCount() const noexcept override { return static_cast<c10::DeviceIndex>(device_count()); }

  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    auto* e = static_cast<Event*>(event);
    if (e == nullptr) return;
    xhal_event_destroy(e->event);
    delete e;
  }
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "xhal: event device ", device_index,
                " does not match the recording stream's device ", stream.device_index());
    auto* e = static_cast<Event*>(*event);
    if (e == nullptr) {
      e = new Event();
      Device& d = device(stream.device_index());
      e->device = d.index;
      e->timing = flag == c10::EventFlag::BACKEND_DEFAULT && (d.features & XHAL_DEVICE_FEATURE_TIMESTAMPS);
      xhal_status_t status = xhal_event_create(d.device, e->timing ? XHAL_EVENT_TIMING : 0, &e->event);
      if (status != XHAL_SUCCESS) {
        delete e;
        check(status, "create an event");
      }
      *event = e;
    }
    TORCH_CHECK(e->device == stream.device_index(), "xhal: an event of xhal:", e->device,
                " cannot be recorded on a stream of xhal:", stream.device_index());
    check(xhal_stream_record_event(stream_of(stream), e->event), "record an event");
  }
  void block(void* event, const c10::Stream& stream) const override {
    auto* e = static_cast<Event*>(event);
    if (e == nullptr) return;  // never recorded: nothing to wait for
    check(xhal_stream_wait_event(stream_of(stream), e->event), "wait for an event");
  }
  bool queryEvent(void* event) const override {
    auto* e = static_cast<Event*>(event);
    if (e == nullptr) return true;
    int complete = 0;
    check(xhal_event_query(e->event, &complete), "query an event");
    return complete != 0;
  }
  void synchronizeEvent(void* event) const override {
    auto* e = static_cast<Event*>(event);
    if (e != nullptr) check(xhal_event_synchronize(e->event), "synchronize an event");
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    auto* a = static_cast<Event*>(start);
    auto* b = static_cast<Event*>(end);
    TORCH_CHECK(a != nullptr && b != nullptr, "xhal: both events must be recorded before elapsed_time");
    TORCH_CHECK(a->timing && b->timing,
                "xhal: elapsed_time needs events made with enable_timing=True on a device with timestamps");
    double ms = 0.0;
    check(xhal_event_elapsed_ms(a->event, b->event, &ms), "elapsed time");
    return ms;
  }
  bool queryStream(const c10::Stream& stream) const override {
    int complete = 0;
    check(xhal_stream_query(stream_of(stream), &complete), "query a stream");
    return complete != 0;
  }
  void synchronizeStream(const c10::Stream& stream) const override {
    check(xhal_stream_synchronize(stream_of(stream)), "synchronize a stream");
  }
  void synchronizeDevice(const c10::DeviceIndex index) const override {
    Device& d = device(index < 0 ? current_device() : index);
    check(xhal_stream_synchronize(d.default_stream), "synchronize the device");
    std::vector<xhal_stream_t*> streams;
    {
      std::lock_guard<std::mutex> lock(d.mutex);
      streams = d.streams;
    }
    for (auto* s : streams) check(xhal_stream_synchronize(s), "synchronize the device");
  }
  // xhal keeps memory that queued work on another stream uses until that work completes, and
  // reuses it early only for the one stream whose queued work alone uses it, so a storage
  // used on another stream needs no record.
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, GuardImpl);

using c10::CachingAllocator::StatType;
constexpr size_t kAggregate = static_cast<size_t>(StatType::AGGREGATE);

// The device of each live buffer, for the hooks' getDeviceFromPtr.
std::mutex g_owners_mutex;
std::unordered_map<xhal_buffer_t*, int> g_owners;

void free_buffer(void* context) {
  // In a forked child the parent's buffers are not this process's to free (check_not_forked).
  if (context == nullptr || g_in_bad_fork.load(std::memory_order_relaxed)) return;
  auto* buffer = static_cast<xhal_buffer_t*>(context);
  {
    std::lock_guard<std::mutex> lock(g_owners_mutex);
    g_owners.erase(buffer);
  }
  xhal_buffer_free(buffer);
}

int owner_of(xhal_buffer_t* buffer) {
  std::lock_guard<std::mutex> lock(g_owners_mutex);
  auto found = g_owners.find(buffer);
  TORCH_CHECK(found != g_owners.end(), "xhal: the pointer is not in memory xhal.torch allocated");
  return found->second;
}

// xhal's caching allocator (per device, in the C API) as torch's device allocator: torch's
// memory statistics read xhal's own.
struct Allocator final : public c10::DeviceAllocator {
  std::mutex mutex;
  std::set<int> used;  // devices that have allocated

  c10::DataPtr allocate(size_t bytes) override {
    int index = current_device();
    c10::Device where(kType, static_cast<c10::DeviceIndex>(index));
    if (bytes == 0) return c10::DataPtr(nullptr, nullptr, &free_buffer, where);
    Device& d = device(index);
    xhal_buffer_t* buffer = nullptr;
    // Whole 32-bit words, so that kernels can read 1- and 2-byte elements (bool masks) as
    // words without reading past the buffer. Memory is the current stream's, as in torch's
    // CUDA allocator: a block freed while only that stream's queued work used it comes back
    // at once, instead of after the work completes, when the host is already far ahead.
    xhal_status_t status =
        xhal_stream_buffer_alloc(current_xhal_stream(index), (bytes + 3) & ~static_cast<size_t>(3), &buffer);
    if (status == XHAL_ERROR_OUT_OF_MEMORY) {
      TORCH_CHECK_WITH(OutOfMemoryError, false, "xhal: out of memory on xhal:", index, " (", d.label,
                       ") allocating ", bytes, " bytes: ", xhal_last_error_message());
    }
    check(status, "allocate");
    uint64_t address = 0;
    check(xhal_buffer_address(buffer, &address), "buffer address");
    {
      std::lock_guard<std::mutex> lock(mutex);
      used.insert(index);
    }
    {
      std::lock_guard<std::mutex> lock(g_owners_mutex);
      g_owners[buffer] = index;
    }
    return c10::DataPtr(reinterpret_cast<void*>(address), buffer, &free_buffer, where);
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* destination, const void* source, std::size_t count) const override {
    // Addresses of xhal buffers: copy on the device of the destination.
    xhal_buffer_t *to = nullptr, *from = nullptr;
    uint64_t to_offset = 0, from_offset = 0;
    check(xhal_resolve_address(reinterpret_cast<uint64_t>(destination), &to, &to_offset), "copy destination");
    check(xhal_resolve_address(reinterpret_cast<uint64_t>(source), &from, &from_offset), "copy source");
    check(xhal_stream_copy(current_xhal_stream(current_device()), from, from_offset, to, to_offset, count), "copy");
  }
  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t = {0, 0}) override {
    std::set<int> devices;
    {
      std::lock_guard<std::mutex> lock(mutex);
      devices = used;
    }
    for (int index : devices) check(xhal_device_empty_cache(device(index).device), "empty the cache");
  }
  void recordStream(const c10::DataPtr&, c10::Stream) override {}
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex index) override {
    c10::CachingDeviceAllocator::DeviceStats stats;
    Device& d = device(index < 0 ? current_device() : index);
    xhal_memory_stats_t s{};
    s.struct_size = sizeof s;
    check(xhal_device_memory_stats(d.device, &s), "memory statistics");
    auto set = [](c10::CachingAllocator::Stat& stat, uint64_t current, uint64_t peak) {
      stat.current = static_cast<int64_t>(current);
      stat.peak = static_cast<int64_t>(peak);
    };
    set(stats.allocated_bytes[kAggregate], s.allocated, s.peak_allocated);
    set(stats.active_bytes[kAggregate], s.allocated, s.peak_allocated);
    set(stats.requested_bytes[kAggregate], s.allocated, s.peak_allocated);
    set(stats.reserved_bytes[kAggregate], s.reserved, s.peak_reserved);
    set(stats.active[kAggregate], s.active_blocks, s.active_blocks);
    set(stats.allocation[kAggregate], s.active_blocks, s.active_blocks);
    set(stats.inactive_split[kAggregate], s.cached_blocks, s.cached_blocks);
    stats.num_device_alloc = static_cast<int64_t>(s.backend_allocations);
    return stats;
  }
  void resetAccumulatedStats(c10::DeviceIndex) override {}
  void resetPeakStats(c10::DeviceIndex index) override {
    check(xhal_device_reset_peak_memory_stats(device(index < 0 ? current_device() : index).device),
          "reset peak statistics");
  }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex index) override {
    Device& d = device(index < 0 ? current_device() : index);
    xhal_memory_stats_t s{};
    s.struct_size = sizeof s;
    check(xhal_device_memory_stats(d.device, &s), "memory statistics");
    size_t total = d.total_memory;
    size_t used_bytes = std::min<size_t>(s.reserved, total);
    return {total - used_bytes, total};
  }
};

Allocator g_allocator;
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

// Pinned host memory (`pin_memory()`, `pin_memory=True`): xhal's host memory for transfers of
// the current device, page-locked where that device has such memory. Its tensors are CPU
// tensors; copies between them and the device do not wait (copy_from).
void free_pinned(void* context) { xhal_pinned_free(static_cast<xhal_pinned_t*>(context)); }

struct PinnedAllocator final : public c10::Allocator {
  at::DataPtr allocate(size_t bytes) override {
    if (bytes == 0) return {nullptr, nullptr, &free_pinned, at::Device(at::kCPU)};
    Device& d = device(current_device());
    xhal_pinned_t* pinned = nullptr;
    check(xhal_pinned_alloc(d.device, bytes, &pinned), "pin memory");
    void* pointer = nullptr;
    check(xhal_pinned_info(pinned, &pointer, nullptr, nullptr), "pinned memory");
    return {pointer, pinned, &free_pinned, at::Device(at::kCPU)};
  }
  void copy_data(void* destination, const void* source, std::size_t count) const final {
    std::memcpy(destination, source, count);
  }
};

PinnedAllocator g_pinned_allocator;

struct Hooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  void init() const override {}
  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(device_count()); }
  void setCurrentDevice(c10::DeviceIndex d) const override { set_device(d); }
  c10::DeviceIndex getCurrentDevice() const override { return static_cast<c10::DeviceIndex>(current_device()); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    auto old = current_device();
    set_device(d);
    return static_cast<c10::DeviceIndex>(old);
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override { return exchangeDevice(d); }
  at::Device getDeviceFromPtr(void* data) const override {
    xhal_buffer_t* buffer = nullptr;
    uint64_t offset = 0;
    check(xhal_resolve_address(reinterpret_cast<uint64_t>(data), &buffer, &offset), "device of a pointer");
    return at::Device(kType, static_cast<c10::DeviceIndex>(owner_of(buffer)));
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex index) const override {
    return default_generator(index < 0 ? current_device() : index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override {
    return new_generator(index < 0 ? current_device() : index);
  }
  bool isPinnedPtr(const void* data) const override { return pinned_of(data).pinned != nullptr; }
  c10::Allocator* getPinnedMemoryAllocator() const override { return &g_pinned_allocator; }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t bytes) const override {
    auto* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
    c10::DeviceGuard guard(impl->device());
    at::DataPtr fresh = g_allocator.allocate(bytes);
    size_t keep = std::min(bytes, impl->nbytes());
    if (keep > 0) {
      auto* from = static_cast<xhal_buffer_t*>(impl->data_ptr().get_context());
      auto* to = static_cast<xhal_buffer_t*>(fresh.get_context());
      check(xhal_stream_copy(current_xhal_stream(impl->device().index()), from, 0, to, 0, keep), "resize a storage");
    }
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(bytes);
  }
};

bool g_hooks_registered [[maybe_unused]] = [] {
  at::RegisterPrivateUse1HooksInterface(new Hooks());
  return true;
}();

std::mutex g_fallback_mutex;
std::unordered_map<std::string, int64_t> g_fallbacks;

}  // namespace

bool log_info() {
  static const bool enabled = [] {
    const char* level = std::getenv("XHAL_LOG");
    if (level == nullptr) return false;
    std::string text(level);
    return text.find("info") != std::string::npos || text.find("debug") != std::string::npos ||
           text.find("trace") != std::string::npos;
  }();
  return enabled;
}

c10::Allocator* allocator() { return &g_allocator; }

PinnedPlace pinned_of(const void* pointer) {
  PinnedPlace place;
  if (pointer == nullptr || xhal_resolve_pinned(pointer, &place.pinned, &place.offset) != XHAL_SUCCESS) return {};
  return place;
}

Place place_of(const at::Tensor& tensor) {
  const auto& storage = tensor.storage();
  const at::DataPtr& data = storage.data_ptr();
  Place p;
  p.offset = static_cast<uint64_t>(tensor.storage_offset()) * tensor.element_size();
  if (data.get_deleter() == &free_buffer || data.get() == nullptr) {
    p.buffer = static_cast<xhal_buffer_t*>(data.get_context());
    return p;
  }
  // Memory this allocator did not hand out (a tensor from torch.from_dlpack): its pointer is
  // still an xhal address, which the C API resolves to its buffer and offset.
  uint64_t base = 0;
  const auto address = reinterpret_cast<uint64_t>(data.get());
  TORCH_CHECK(xhal_resolve_address(address, &p.buffer, &base) == XHAL_SUCCESS, "xhal: the memory of this tensor (",
              data.get(), ") is not in a live xhal buffer");
  p.offset += base;
  return p;
}

namespace {

void launch_with(Device& device, const Kernel& kernel, at::ArrayRef<Binding> bindings, xhal_launch_t& launch) {
  xhal_binding_t raw[16];
  TORCH_CHECK(kernel.bindings.size() <= 16, "xhal: a kernel of more than 16 bindings");
  for (size_t i = 0; i < kernel.bindings.size(); i++) {
    uint32_t n = kernel.bindings[i];
    TORCH_CHECK(n < bindings.size(), "xhal: the kernel binds @binding(", n, "), which the launch does not give");
    const Binding& b = bindings[n];
    raw[i] = xhal_binding_t{b.buffer, b.offset, b.size, b.data};
  }
  launch.struct_size = sizeof launch;
  launch.kernel = kernel.kernel;
  launch.bindings = raw;
  launch.binding_count = kernel.bindings.size();
  check(xhal_stream_launch(current_xhal_stream(device.index), &launch), "launch");
}

}  // namespace

void launch_workgroups(Device& device, const Kernel& kernel, at::ArrayRef<Binding> bindings,
                       const std::array<uint32_t, 3>& workgroups, const void* scalars, size_t scalar_size) {
  if (workgroups[0] == 0 || workgroups[1] == 0 || workgroups[2] == 0) return;
  xhal_launch_t launch{};
  launch.workgroups[0] = workgroups[0];
  launch.workgroups[1] = workgroups[1];
  launch.workgroups[2] = workgroups[2];
  launch.scalars = scalars;
  launch.scalar_size = scalar_size;
  launch_with(device, kernel, bindings, launch);
}

void launch(Device& device, const Kernel& kernel, at::ArrayRef<Binding> bindings, uint64_t invocations,
            const void* scalars, size_t scalar_size) {
  if (invocations == 0) return;
  xhal_launch_t launch{};
  launch.invocations = invocations;
  launch.scalars = scalars;
  launch.scalar_size = scalar_size;
  launch_with(device, kernel, bindings, launch);
}

void count_fallback(const std::string& op) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(g_fallback_mutex);
    first = g_fallbacks[op]++ == 0;
  }
  if (first && log_info()) {
    std::fprintf(stderr, "INFO xhal.torch: %s runs on the CPU (no xhal kernel); xhal.torch.fallback_counts() counts it\n",
                 op.c_str());
  }
}

std::vector<std::pair<std::string, int64_t>> fallback_counts() {
  std::lock_guard<std::mutex> lock(g_fallback_mutex);
  return {g_fallbacks.begin(), g_fallbacks.end()};
}

void reset_fallback_counts() {
  std::lock_guard<std::mutex> lock(g_fallback_mutex);
  g_fallbacks.clear();
}

}  // namespace xhal_torch
