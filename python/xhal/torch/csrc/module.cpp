// The Python module of the `xhal` PyTorch device: what `torch.xhal` and `xhal.torch` call.

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
}
