//! Arbitrary bytes as WGSL, through the whole module-loading path of the CPU reference
//! backend: host-side parsing, validation and reflection (xhal-kernel), then the backend's own
//! compilation. Every input must end in a module or an error, never a panic or an abort.

#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, OnceLock};
use xhal::cpu::{CpuBackend, CpuConfig, CpuDriver};
use xhal::{Device, Runtime};

fn device() -> &'static Device {
    static DEVICE: OnceLock<Device> = OnceLock::new();
    DEVICE.get_or_init(|| {
        Runtime::builder()
            .without_plugin_search()
            .without_static_backends()
            .backend(Arc::new(CpuBackend::new(CpuDriver::with_config(CpuConfig {
                devices: 1,
                memory_per_device: 64 << 20,
            }))))
            .device_selector(None)
            .build()
            .and_then(|runtime| runtime.open("cpu:0"))
            .expect("the CPU backend always opens")
    })
}

fuzz_target!(|data: &[u8]| {
    // Bytes that are not UTF-8 go through the backend's raw path, which must refuse them.
    let Ok(source) = std::str::from_utf8(data) else {
        let _ = device().load_module(xhal::KernelFormat::WGSL, data);
        return;
    };
    if let Ok(module) = device().load_wgsl(source) {
        for entry in module.entry_points().unwrap_or_default() {
            let _ = module.kernel(&entry.name);
        }
    }
});
