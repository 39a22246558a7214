// The Python module of the `xhal` PyTorch device: what `torch.xhal` and `xhal.torch` call.

#include <torch/csrc/Generator.h>
#include <torch/extension.h>

#include "xhal_torch.h"

namespace {

void synchronize(int index) {
  auto& impl = *c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1);
  impl.synchronizeDevice(static_cast<c10::DeviceIndex>(index));
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "The native half of xhal.torch: the PrivateUse1 device `xhal` over the xhal C API";
  m.def("set_plugin_path", &xhal_torch::set_plugin_path, "Where the bundled plugins are, before first use");
  m.def("set_tuning_cache", &xhal_torch::set_tuning_cache,
        "Where tuning passes keep their choices (empty: nowhere), and the xhal version they hold for");
  m.def("device_count", &xhal_torch::device_count);
  m.def("current_device", &xhal_torch::current_device);
  m.def("set_device", &xhal_torch::set_device);
  m.def("synchronize", &synchronize, pybind11::arg("index"), pybind11::call_guard<pybind11::gil_scoped_release>());
  m.def("device_label", [](int index) { return xhal_torch::device(index).label; });
  m.def("device_name", [](int index) { return xhal_torch::device(index).name; });
  m.def("device_features", [](int index) { return xhal_torch::device(index).features; });
  m.def("native_dtype", [](int index, at::ScalarType dtype) {
    return xhal_torch::native_dtype(xhal_torch::device(index), dtype);
  });
  m.def("fallback_counts", []() {
    pybind11::dict counts;
    for (auto& [op, count] : xhal_torch::fallback_counts()) counts[pybind11::str(op)] = count;
    return counts;
  });
  m.def("reset_fallback_counts", &xhal_torch::reset_fallback_counts);

  m.def("device_properties", [](int index) {
    const xhal_device_info_t info = xhal_torch::device_info(index);
    static const std::pair<uint64_t, const char*> kFeatures[] = {
        {XHAL_DEVICE_FEATURE_F16, "f16"},
        {XHAL_DEVICE_FEATURE_F64, "f64"},
        {XHAL_DEVICE_FEATURE_I64, "i64"},
        {XHAL_DEVICE_FEATURE_ATOMICS_32, "atomics32"},
        {XHAL_DEVICE_FEATURE_ATOMICS_64, "atomics64"},
        {XHAL_DEVICE_FEATURE_TIMESTAMPS, "timestamps"},
        {XHAL_DEVICE_FEATURE_HOST_MAPPABLE, "host_mappable"},
        {XHAL_DEVICE_FEATURE_UNIFORM_BUFFERS, "uniform_buffers"},
    };
    pybind11::list features;
    for (const auto& [bit, name] : kFeatures)
      if (info.features & bit) features.append(name);
    static const char* kTypes[] = {"unknown", "cpu", "integrated_gpu", "discrete_gpu", "accelerator", "other"};
    pybind11::dict d;
    d["name"] = info.name;
    d["label"] = info.label;
    d["backend"] = info.backend;
    d["vendor"] = info.vendor;
    d["driver_version"] = info.driver_version;
    d["type"] = info.device_type < 6 ? kTypes[info.device_type] : "other";
    d["total_memory"] = info.total_memory;
    d["max_allocation_size"] = info.max_allocation_size;
    d["max_workgroup_invocations"] = info.max_workgroup_invocations;
    d["max_workgroup_memory"] = info.max_workgroup_memory;
    d["subgroup_size"] = info.subgroup_size;
    d["features"] = pybind11::tuple(features);
    return d;
  });
  m.def("stream_priority_range", [](int index) { return std::make_pair(0, xhal_torch::urgent_priority(index)); });
  m.def("stream_priority", [](int index, int64_t id) {
    return xhal_torch::stream_priority(c10::Stream(c10::Stream::UNSAFE,
                                                   c10::Device(c10::DeviceType::PrivateUse1, index), id));
  });
  m.def("device_type_index", []() { return static_cast<int>(c10::DeviceType::PrivateUse1); });

  // Random numbers: each device's default generator (random_ops.cpp).
  m.def("default_generator", [](int index) {
    return pybind11::reinterpret_steal<pybind11::object>(
        THPGenerator_initDefaultGenerator(xhal_torch::default_generator(index)));
  });
  m.def("seed_all", &xhal_torch::seed_all, "Seeds every device's default generator, now or when they are made");
  m.def("seed_device", &xhal_torch::seed_device, "Seeds one device's default generator, now or when it is made");
  m.def("is_initialized", &xhal_torch::runtime_initialized);
  m.def("in_bad_fork", &xhal_torch::in_bad_fork);
}
