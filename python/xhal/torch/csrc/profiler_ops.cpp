// torch.profiler on the `xhal` PyTorch device: a Kineto activity profiler for PrivateUse1
// (torch's REGISTER_PRIVATEUSE1_PROFILER), fed by the C API's device activities. Every kernel,
// copy and fill the devices ran while profiling becomes a device activity with the device's
// times and the correlation id of the operator that queued it, so key_averages() has device
// time per operator and the Chrome trace has a device track with arrows from the operators.

#include "xhal_torch.h"

// The registry and Kineto's interfaces exist only in builds with Kineto, as torch's wheels are.
#define USE_KINETO 1
#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <cstring>
#include <map>
#include <set>

namespace xhal_torch {
namespace {

using libkineto::ActivityType;

// The correlation ids of the operators running on this thread, innermost last: what the
// work this thread queues is tagged with.
thread_local std::vector<uint64_t> t_correlations;

libkineto::ActivityType activity_type(const char* category) {
  if (std::strcmp(category, "kernel") == 0) return ActivityType::CONCURRENT_KERNEL;
  if (std::strcmp(category, "fill") == 0) return ActivityType::GPU_MEMSET;
  if (std::strcmp(category, "copy") == 0) return ActivityType::GPU_MEMCPY;
  // A replayed graph: its whole run, as one span.
  if (std::strcmp(category, "graph") == 0) return ActivityType::CONCURRENT_KERNEL;
  return ActivityType::ENUM_COUNT;  // event records and waits: not device work
}

class Session final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    if (xhal_profiler_start() != XHAL_SUCCESS) {
      errors_.push_back(std::string("xhal: device activities are not collected: ") + xhal_last_error_message());
      status_ = libkineto::TraceStatus::ERROR;
      return;
    }
    started_ = true;
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    if (!started_) return;
    started_ = false;
    // Device times are read when a stream is known idle: wait for every opened device.
    for (int index = 0; index < device_count(); index++) {
      if (!device_opened(index)) continue;
      try {
        c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)
            ->synchronizeDevice(static_cast<c10::DeviceIndex>(index));
      } catch (const c10::Error& error) {
        errors_.push_back(std::string("xhal: synchronizing xhal:") + std::to_string(index) + ": " + error.what());
      }
    }
    uint64_t dropped = 0;
    if (xhal_profiler_stop(&dropped) != XHAL_SUCCESS) {
      errors_.push_back(std::string("xhal: ") + xhal_last_error_message());
    }
    if (dropped > 0) errors_.push_back("xhal: " + std::to_string(dropped) + " device activities were dropped");
    std::vector<xhal_activity_t> batch(4096);
    while (true) {
      for (auto& a : batch) a.struct_size = sizeof a;
      size_t count = 0;
      if (xhal_profiler_take(batch.data(), batch.size(), &count) != XHAL_SUCCESS || count == 0) break;
      activities_.insert(activities_.end(), batch.begin(), batch.begin() + static_cast<std::ptrdiff_t>(count));
    }
    status_ = libkineto::TraceStatus::READY;
  }

  std::vector<std::string> errors() override { return errors_; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, 0, 0);
  }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked, int64_t,
                    int64_t) override {
    std::map<std::string, int> indices;  // device label -> xhal:N
    for (int index = 0; index < device_count(); index++) {
      if (device_opened(index)) indices[device(index).label] = index;
    }
    for (const xhal_activity_t& a : activities_) {
      const ActivityType type = activity_type(a.category);
      if (type == ActivityType::ENUM_COUNT) continue;
      libkineto::GenericTraceActivity activity(span_, type, a.name);
      activity.startTime = a.start_ns;
      activity.endTime = std::max(a.end_ns, a.start_ns);
      activity.id = static_cast<int64_t>(a.correlation);
      auto found = indices.find(a.device);
      activity.device = found != indices.end() ? found->second : 0;
      activity.resource = static_cast<int64_t>(a.stream);
      streams_.insert({activity.device, activity.resource});
      if (a.correlation != 0) {
        activity.linked = linked(static_cast<int32_t>(a.correlation));
        activity.flow.id = a.correlation;
        activity.flow.type = libkineto::kLinkAsyncCpuGpu;
        activity.flow.start = false;
      }
      activity.addMetadataQuoted("device", a.device);
      activity.addMetadataQuoted("category", a.category);
      logger.handleGenericActivity(activity);
    }
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    const std::string label = device_count() > 0 && device_opened(0) ? device(0).label : "xhal";
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{0, 0, "xhal:0 (" + label + ")", "xhal"});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> resources;
    for (const auto& [device_index, stream] : streams_) {
      resources.push_back(libkineto::ResourceInfo{stream, stream, device_index, "stream " + std::to_string(stream)});
    }
    return resources;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return nullptr; }

  void pushCorrelationId(uint64_t id) override {
    t_correlations.push_back(id);
    xhal_profiler_set_correlation(id);
  }

  void popCorrelationId() override {
    if (!t_correlations.empty()) t_correlations.pop_back();
    xhal_profiler_set_correlation(t_correlations.empty() ? 0 : t_correlations.back());
  }

 private:
  libkineto::TraceSpan span_{0, 0, "xhal"};
  bool started_ = false;
  std::vector<std::string> errors_;
  std::vector<xhal_activity_t> activities_;
  std::set<std::pair<int64_t, int64_t>> streams_;
};

class Profiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<ActivityType>& availableActivities() const override { return activities_; }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<ActivityType>& types,
                                                                 const libkineto::Config&) override {
    for (ActivityType type : types) {
      if (activities_.count(type)) return std::make_unique<Session>();
    }
    return nullptr;  // no device activity asked for
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
                                                                 const std::set<ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_{"xhal"};
  std::set<ActivityType> activities_{ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY,
                                     ActivityType::GPU_MEMSET};
};

REGISTER_PRIVATEUSE1_PROFILER(Profiler);

}  // namespace
}  // namespace xhal_torch
