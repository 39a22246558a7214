// The C API from C++ under AddressSanitizer: RAII ownership, threads sharing a device,
// handles used after destruction and after their slot is reused, and churn through the
// caching allocator. Any out-of-bounds access, use after free or leak in the library's
// handling of these fails the run. Run by hal/capi/tests/programs.rs.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "xhal_capi.h"

namespace {

void check(xhal_status_t status, const char* what) {
    if (status != XHAL_SUCCESS) {
        throw std::runtime_error(std::string(what) + ": " + xhal_status_name(status) + ": " +
                                 xhal_last_error_message());
    }
}

void expect_error(xhal_status_t status, xhal_status_t expected, const char* fragment, const char* what) {
    std::string message = xhal_last_error_message();
    if (status != expected || message.find(fragment) == std::string::npos) {
        throw std::runtime_error(std::string(what) + ": got " + xhal_status_name(status) + " \"" + message +
                                 "\", expected " + xhal_status_name(expected) + " with \"" + fragment + "\"");
    }
}

template <typename T, xhal_status_t (*Destroy)(T*)>
struct Deleter {
    void operator()(T* handle) const { Destroy(handle); }
};
using Runtime = std::unique_ptr<xhal_runtime_t, Deleter<xhal_runtime_t, xhal_runtime_destroy>>;
using Device = std::unique_ptr<xhal_device_t, Deleter<xhal_device_t, xhal_device_destroy>>;
using Buffer = std::unique_ptr<xhal_buffer_t, Deleter<xhal_buffer_t, xhal_buffer_free>>;
using Stream = std::unique_ptr<xhal_stream_t, Deleter<xhal_stream_t, xhal_stream_destroy>>;
using Event = std::unique_ptr<xhal_event_t, Deleter<xhal_event_t, xhal_event_destroy>>;
using Module = std::unique_ptr<xhal_module_t, Deleter<xhal_module_t, xhal_module_destroy>>;
using Kernel = std::unique_ptr<xhal_kernel_t, Deleter<xhal_kernel_t, xhal_kernel_destroy>>;

Buffer alloc(xhal_device_t* device, uint64_t bytes) {
    xhal_buffer_t* raw = nullptr;
    check(xhal_buffer_alloc(device, bytes, &raw), "xhal_buffer_alloc");
    return Buffer(raw);
}

const char* kAddOne = R"(
struct Params { n: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read_write> values: array<u32>;
@compute @workgroup_size(64)
fn add_one(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < params.n { values[id.x] = values[id.x] + 1u; }
}
)";

// Each worker owns a stream and buffers on the shared device, and adds one `rounds` times.
void worker(xhal_device_t* device, xhal_kernel_t* kernel, int seed, std::string* failure) {
    try {
        xhal_stream_t* raw_stream = nullptr;
        check(xhal_stream_create(device, &raw_stream), "xhal_stream_create");
        Stream stream(raw_stream);
        const uint32_t n = 1000 + 37 * static_cast<uint32_t>(seed);
        std::vector<uint32_t> values(n);
        for (uint32_t i = 0; i < n; i++) values[i] = i * static_cast<uint32_t>(seed);
        Buffer buffer = alloc(device, n * sizeof(uint32_t));
        check(xhal_stream_write_async(stream.get(), buffer.get(), 0, values.data(), n * sizeof(uint32_t)),
              "write_async");
        const int rounds = 20;
        for (int r = 0; r < rounds; r++) {
            xhal_binding_t binding{buffer.get(), 0, XHAL_WHOLE_SIZE, nullptr};
            xhal_launch_t launch{};
            launch.struct_size = sizeof launch;
            launch.kernel = kernel;
            launch.invocations = n;
            launch.bindings = &binding;
            launch.binding_count = 1;
            launch.scalars = &n;
            launch.scalar_size = sizeof n;
            check(xhal_stream_launch(stream.get(), &launch), "launch");
            // Churn the allocator meanwhile: blocks freed while work may still be queued.
            Buffer scratch = alloc(device, 4096 + 512 * static_cast<uint64_t>(r));
            uint32_t pattern = static_cast<uint32_t>(r);
            check(xhal_stream_fill(stream.get(), scratch.get(), 0, 4096, &pattern, 4), "fill");
        }
        std::vector<uint32_t> back(n);
        check(xhal_stream_read(stream.get(), buffer.get(), 0, back.data(), n * sizeof(uint32_t)), "read");
        for (uint32_t i = 0; i < n; i++) {
            if (back[i] != i * static_cast<uint32_t>(seed) + rounds) {
                *failure = "worker " + std::to_string(seed) + ": element " + std::to_string(i) + " is " +
                           std::to_string(back[i]);
                return;
            }
        }
    } catch (const std::exception& e) {
        *failure = e.what();
    }
}

void run() {
    xhal_runtime_options_t options{};
    options.struct_size = sizeof options;
    options.flags = XHAL_RUNTIME_NO_PLUGINS;
    xhal_runtime_t* raw_runtime = nullptr;
    check(xhal_runtime_create(XHAL_API_MAJOR, XHAL_API_MINOR, &options, &raw_runtime), "runtime");
    Runtime runtime(raw_runtime);
    xhal_device_t* raw_device = nullptr;
    check(xhal_device_open(runtime.get(), "cpu:0", &raw_device), "open");
    Device device(raw_device);

    xhal_module_t* raw_module = nullptr;
    check(xhal_module_load_wgsl(device.get(), kAddOne, nullptr, 0, &raw_module), "load");
    Module module(raw_module);
    xhal_kernel_t* raw_kernel = nullptr;
    check(xhal_module_kernel(module.get(), "add_one", &raw_kernel), "kernel");
    Kernel kernel(raw_kernel);

    // Four threads share the device and the kernel.
    std::vector<std::string> failures(4);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; t++) threads.emplace_back(worker, device.get(), kernel.get(), t + 1, &failures[t]);
    for (auto& thread : threads) thread.join();
    for (auto& failure : failures) {
        if (!failure.empty()) throw std::runtime_error(failure);
    }

    // A freed handle stays refused after its slot holds a new buffer.
    xhal_buffer_t* stale = alloc(device.get(), 256).release();
    check(xhal_buffer_free(stale), "free");
    Buffer reused = alloc(device.get(), 256);
    uint64_t size = 0;
    expect_error(xhal_buffer_size(stale, &size), XHAL_ERROR_INVALID_HANDLE, "destroyed", "stale handle");
    check(xhal_buffer_size(reused.get(), &size), "reused");
    if (size != 256) throw std::runtime_error("the reused slot's buffer has the wrong size");

    // Garbage handles are refused, not dereferenced.
    expect_error(xhal_buffer_size(reinterpret_cast<xhal_buffer_t*>(0xdeadbeefULL), &size), XHAL_ERROR_INVALID_HANDLE,
                 "not a handle", "garbage handle");
    expect_error(xhal_buffer_size(reinterpret_cast<xhal_buffer_t*>(device.get()), &size), XHAL_ERROR_INVALID_HANDLE,
                 "is a device, not a buffer", "handle of another kind");

    // An event recorded on one stream orders a copy on another.
    xhal_stream_t* raw_a = nullptr;
    xhal_stream_t* raw_b = nullptr;
    check(xhal_stream_create(device.get(), &raw_a), "stream a");
    check(xhal_stream_create(device.get(), &raw_b), "stream b");
    Stream a(raw_a), b(raw_b);
    xhal_event_t* raw_event = nullptr;
    check(xhal_event_create(device.get(), 0, &raw_event), "event");
    Event event(raw_event);
    Buffer source = alloc(device.get(), 1 << 20), target = alloc(device.get(), 1 << 20);
    uint8_t byte = 0x5a;
    check(xhal_stream_fill(a.get(), source.get(), 0, 1 << 20, &byte, 1), "fill");
    check(xhal_stream_record_event(a.get(), event.get()), "record");
    check(xhal_stream_wait_event(b.get(), event.get()), "wait");
    check(xhal_stream_copy(b.get(), source.get(), 0, target.get(), 0, 1 << 20), "copy");
    std::vector<uint8_t> back(1 << 20);
    check(xhal_stream_read(b.get(), target.get(), 0, back.data(), back.size()), "read");
    for (uint8_t v : back) {
        if (v != 0x5a) throw std::runtime_error("the copy after the event read the wrong bytes");
    }

    // Freeing a buffer a queued launch still uses is safe: the memory waits for the launch.
    {
        uint32_t n = 1 << 16;
        Buffer in_use = alloc(device.get(), n * sizeof(uint32_t));
        xhal_binding_t binding{in_use.get(), 0, XHAL_WHOLE_SIZE, nullptr};
        xhal_launch_t launch{};
        launch.struct_size = sizeof launch;
        launch.kernel = kernel.get();
        launch.invocations = n;
        launch.bindings = &binding;
        launch.binding_count = 1;
        launch.scalars = &n;
        launch.scalar_size = sizeof n;
        check(xhal_stream_launch(a.get(), &launch), "launch");
    }
    check(xhal_stream_synchronize(a.get()), "synchronize");

    // Pinned memory freed while a read into it and a write from it are queued: the stream
    // keeps it until they complete, and nothing touches it after.
    for (int round = 0; round < 8; round++) {
        Buffer big = alloc(device.get(), 1 << 20);
        check(xhal_stream_fill(a.get(), big.get(), 0, 1 << 20, &round, 1), "fill");
        xhal_pinned_t* pinned = nullptr;
        check(xhal_pinned_alloc(device.get(), 1 << 20, &pinned), "pinned alloc");
        check(xhal_stream_read_pinned(a.get(), big.get(), 0, pinned, 0, 1 << 20), "read into pinned memory");
        check(xhal_stream_write_pinned(b.get(), big.get(), 0, pinned, 0, 1 << 19), "write from pinned memory");
        check(xhal_pinned_free(pinned), "free pinned memory under queued transfers");
    }
    check(xhal_stream_synchronize(a.get()), "synchronize");
    check(xhal_stream_synchronize(b.get()), "synchronize");

    // Destroying a device handle leaves what was made from it usable.
    Buffer survivor = alloc(device.get(), 64);
    device.reset();
    uint32_t word = 7;
    check(xhal_stream_write(a.get(), survivor.get(), 0, &word, 4), "write after the device handle is gone");
}

}  // namespace

int main() {
    try {
        run();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "capi_asan: %s\n", e.what());
        return 1;
    }
    std::printf("capi_asan: all checks passed\n");
    return 0;
}
