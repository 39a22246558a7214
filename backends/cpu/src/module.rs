//! Modules, kernels and launches as the driver hands them out: a module loaded by its format,
//! a kernel keeping the code it runs, and a launch prepared from the views the adapter checked.
//!
//! The code itself lives elsewhere: the built-ins, the `cpu-builtin` format and the launch
//! checks against a kernel's parameters in `kernels`, WGSL in `wgsl` and `native`.

use crate::config::KernelTimeout;
use crate::device::DeviceMemory;
use crate::kernels::{self, KernelCode, PreparedLaunch};
use crate::memory::Buffer;
use crate::CpuDriver;
use std::sync::Arc;
use xhal_backend::{DriverKernel, DriverModule, Error, KernelFormat, Launch, Object, Result};

/// A loaded module: `cpu-builtin` text or WGSL.
#[derive(Debug)]
pub struct Module(kernels::Module);

/// One entry point of a module; it keeps its code, so destroying the module never breaks it,
/// and the driver's launch settings as they were when it was got.
#[derive(Debug)]
pub struct Kernel {
    code: KernelCode,
    timeout: KernelTimeout,
    strict_bounds: bool,
}

impl DriverModule<CpuDriver> for Module {
    /// Loads `code` in `format`. WGSL runs as the driver's kernel mode says; when that could
    /// not be read from the environment, only WGSL modules fail, with that error.
    fn load(
        driver: &CpuDriver,
        _device: &Arc<Object<Arc<DeviceMemory>>>,
        format: KernelFormat,
        code: &[u8],
    ) -> Result<Module> {
        let module = match format {
            KernelFormat::WGSL => kernels::Module::wgsl(code, driver.kernel_mode.clone()?)?,
            KernelFormat::CPU_BUILTIN => kernels::Module::parse(code)?,
            _ => {
                return Err(Error::unsupported(format!(
                    "kernel format {format} is not supported by the cpu backend; accepted formats: {}, {}",
                    KernelFormat::WGSL,
                    KernelFormat::CPU_BUILTIN
                )))
            }
        };
        Ok(Module(module))
    }
}

impl DriverKernel<CpuDriver> for Kernel {
    /// The entry point called `name`; the error names the module's handle and its kernels.
    fn get(driver: &CpuDriver, module: &Arc<Object<Module>>, name: &str) -> Result<Kernel> {
        Ok(Kernel {
            code: module.0.kernel(module.handle(), name)?,
            timeout: driver.kernel_timeout.clone(),
            strict_bounds: driver.strict_bounds,
        })
    }
}

impl Kernel {
    /// Checks `launch` against the kernel (workgroup counts, buffer count and sizes, the
    /// scalar block) and makes it ready to run later, owning everything it touches.
    pub(crate) fn prepare(launch: &Launch<'_, CpuDriver>) -> Result<PreparedLaunch> {
        let buffers: kernels::LaunchBuffers = launch
            .buffers
            .iter()
            .map(|view| (Buffer::named(&view.buffer), view.offset, view.size))
            .collect();
        PreparedLaunch::new(
            &launch.kernel.code,
            launch.workgroups,
            buffers,
            launch.scalars,
            &launch.kernel.timeout,
            launch.kernel.strict_bounds,
        )
    }
}
