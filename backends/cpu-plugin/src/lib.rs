//! `libxhal_cpu.so`: the CPU reference backend exported through the C ABI.

/// A backend configured from the environment (`XHAL_CPU_DEVICES`, `XHAL_CPU_MEMORY`,
/// `XHAL_KERNEL_TIMEOUT`).
fn create() -> xhal_core::Result<cpu::CpuBackend> {
    cpu::CpuBackend::from_env()
}

xhal_core::export_plugin!(create);
