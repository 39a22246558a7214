//! What the integration tests of this crate share: runtimes over the CPU backend, linked in or
//! loaded as a plugin, and the path of libraries the workspace builds.
//!
//! The plugin tests load real cdylibs of this workspace; `make test` builds them first
//! (`cargo build --workspace`). A missing one fails the test with that instruction.

// Each test binary uses only some of these helpers.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use xhal::cpu::{CpuBackend, CpuConfig, CpuDriver};
use xhal::{Device, Runtime};

/// Memory of each CPU test device: small, so out-of-memory cases are quick to reach.
pub const TEST_DEVICE_MEMORY: u64 = 64 << 20;

/// `target/<profile>`, found from this test binary's own path (`target/<profile>/deps/...`).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .expect("test binary lives in target/<profile>/deps")
}

/// A library the workspace builds into `target/<profile>`, which must exist.
pub fn built_library(file: &str) -> PathBuf {
    let path = target_dir().join(file);
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build --workspace` (as `make test` does) before the tests",
        path.display()
    );
    path
}

/// A runtime holding only a CPU backend with `devices` devices, linked in.
pub fn static_cpu_runtime(devices: u32) -> Runtime {
    Runtime::builder()
        .without_plugin_search()
        .without_static_backends()
        .backend(Arc::new(CpuBackend::new(CpuDriver::with_config(CpuConfig {
            devices,
            memory_per_device: TEST_DEVICE_MEMORY,
        }))))
        .device_selector(None)
        .build()
        .expect("a runtime with the static CPU backend")
}

/// Device 0 of the linked-in CPU backend.
pub fn static_cpu_device() -> Device {
    static_cpu_runtime(1).open("cpu:0").expect("cpu:0")
}

/// A runtime holding only the CPU plugin `libxhal_cpu.so`, loaded through the C ABI.
pub fn plugin_cpu_runtime() -> Runtime {
    Runtime::builder()
        .without_plugin_search()
        .without_static_backends()
        .plugin(built_library("libxhal_cpu.so"))
        .device_selector(None)
        .build()
        .expect("a runtime with the CPU plugin")
}

/// Device 0 of the CPU plugin.
pub fn plugin_cpu_device() -> Device {
    plugin_cpu_runtime().open("cpu:0").expect("cpu:0 through the plugin")
}
