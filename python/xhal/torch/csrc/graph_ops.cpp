// torch.accelerator.Graph on the `xhal` PyTorch device: the work queued on the current stream
// between capture_begin and capture_end is captured into an xhal graph (the C API's stream
// capture), and replay() enqueues all of it again with one call (a native command list where
// the device has them).
//
// Memory: an xhal graph holds the memory its work names, so a tensor freed during or after the
// capture keeps its memory, for the replays, until the graph is reset or destroyed; the caching
// allocator never hands that memory to other tensors meanwhile. Each graph is its own pool.

#include <ATen/core/GraphImplInterface.h>

#include <atomic>
#include <fstream>

#include "xhal_torch.h"

namespace xhal_torch {
namespace {

std::atomic<uint64_t> g_next_pool{1};

struct XhalGraph final : public at::GraphImplInterface {
  explicit XhalGraph(const at::GraphImplArgs& = {}) {}
  ~XhalGraph() override { release(); }

  void capture_begin(at::MempoolId_t, at::GraphCaptureMode) override {
    TORCH_CHECK(graph_ == nullptr && capturing_ == nullptr,
                "xhal: this graph already holds a capture; reset() it before capturing again");
    device_ = current_device();
    draws_.device = device_;
    capture_draws(&draws_);
    xhal_stream_t* stream = current_xhal_stream(device_);
    const xhal_status_t begun = xhal_stream_begin_capture(stream);
    if (begun != XHAL_SUCCESS) capture_draws(nullptr);
    check(begun, "begin a graph capture");
    capturing_ = stream;
    pool_ = g_next_pool++;
  }

  void capture_end() override {
    TORCH_CHECK(capturing_ != nullptr, "xhal: capture_end() without capture_begin()");
    TORCH_CHECK(current_xhal_stream(device_) == capturing_,
                "xhal: capture_end() must be called with the stream that began the capture current");
    xhal_stream_t* stream = capturing_;
    capturing_ = nullptr;
    capture_draws(nullptr);
    check(xhal_stream_end_capture(stream, &graph_), "end a graph capture");
  }

  // The graph is ready to replay once captured.
  void instantiate() override {
    TORCH_CHECK(graph_ != nullptr, "xhal: instantiate() needs a captured graph (capture_begin, then capture_end)");
  }

  void replay() override {
    TORCH_CHECK(graph_ != nullptr, "xhal: replay() needs a captured graph (capture_begin, then capture_end)");
    xhal_stream_t* stream = current_xhal_stream(device_);
    // Each generator the graph draws from: its seed and offset now go to the graph's state
    // buffer, and it moves on by what the graph draws, as eager draws would move it.
    for (const CapturedGenerator& captured : draws_.generators) {
      const auto [seed, offset] = captured.generator->advance(captured.words);
      const uint64_t block = offset / 4;
      const uint32_t words[4] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                                 static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32)};
      check(xhal_stream_write_async(stream, captured.state, 0, words, sizeof words), "write a graph's random state");
    }
    check(xhal_graph_replay(graph_, stream), "replay a graph");
  }

  void reset() override { release(); }

  at::MempoolId_t pool() const override { return {pool_, 0}; }

  void enable_debug_mode() override { debug_ = true; }

  void debug_dump(const std::string& path) override {
    TORCH_CHECK(debug_, "xhal: call enable_debug_mode() before debug_dump()");
    TORCH_CHECK(graph_ != nullptr, "xhal: debug_dump() needs a captured graph");
    int native = 0;
    check(xhal_graph_is_native(graph_, &native), "describe a graph");
    std::ofstream out(path);
    TORCH_CHECK(out, "xhal: cannot write ", path);
    out << "xhal graph on xhal:" << device_ << " (" << device(device_).label << ")\n"
        << "replays as native command lists: " << (native ? "yes" : "no (core enqueues its operations)") << "\n";
  }

 private:
  void release() {
    if (capturing_ != nullptr) {
      xhal_graph_t* abandoned = nullptr;
      if (xhal_stream_end_capture(capturing_, &abandoned) == XHAL_SUCCESS) xhal_graph_destroy(abandoned);
      capturing_ = nullptr;
      capture_draws(nullptr);
    }
    if (graph_ != nullptr) {
      xhal_graph_destroy(graph_);
      graph_ = nullptr;
    }
    // The graph held its state buffers' memory; freeing the handles returns it once it is gone.
    for (CapturedGenerator& captured : draws_.generators) xhal_buffer_free(captured.state);
    draws_.generators.clear();
  }

  int device_ = 0;
  xhal_stream_t* capturing_ = nullptr;
  xhal_graph_t* graph_ = nullptr;
  uint64_t pool_ = 0;
  bool debug_ = false;
  CapturedDraws draws_;
};

}  // namespace
}  // namespace xhal_torch

// The registry's key is the device type's name in capitals, after the rename to `xhal`.
namespace at {
C10_REGISTER_CLASS(GraphImplRegistry, XHAL, xhal_torch::XhalGraph)
}  // namespace at
