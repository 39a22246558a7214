//! `libxhal_cpu.so`: the CPU reference backend exported through the C ABI.

/// A backend configured from the environment (`XHAL_CPU_DEVICES`, `XHAL_CPU_MEMORY`,
/// `XHAL_KERNEL_TIMEOUT`). Its logs go to stderr under `XHAL_LOG`, such as the warning that a
/// kernel runs on the interpreter because the compiled path cannot take it.
fn create() -> xhal_backend::Result<cpu::CpuBackend> {
    xhal_backend::init_logging();
    Ok(cpu::CpuBackend::new(cpu::CpuDriver::from_env()?))
}

xhal_backend::export_plugin!(create);
