//! Modules, kernels and launches as the driver hands them out: a module loaded by its format,
//! a kernel keeping the code it runs, and a launch prepared from the views the adapter checked.
//!
//! The code itself lives elsewhere: the built-ins, the `cpu-builtin` format and the launch
//! checks against a kernel's parameters in `kernels`, WGSL in `wgsl` and `native`.

use crate::config::KernelTimeout;
use crate::kernels::{self, KernelCode, PreparedLaunch};
use crate::memory::Buffer;
use crate::native::KernelMode;
use crate::CpuDriver;
use xhal_backend::{Error, KernelFormat, Launch, Object, Result};

/// A loaded module: `cpu-builtin` text or WGSL.
#[derive(Debug)]
pub struct Module(kernels::Module);

/// One entry point of a module; it keeps its code, so destroying the module never breaks it.
#[derive(Debug)]
pub struct Kernel(KernelCode);

impl Module {
    /// Loads `code` in `format`. `mode` is how WGSL runs, or why it could not be read from
    /// the environment (then only WGSL modules fail, with that error).
    pub(crate) fn load(format: KernelFormat, code: &[u8], mode: Result<KernelMode>) -> Result<Module> {
        let module = match format {
            KernelFormat::WGSL => kernels::Module::wgsl(code, mode?)?,
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

    /// The entry point called `name`; the error names the module's handle and its kernels.
    pub(crate) fn kernel(module: &Object<Module>, name: &str) -> Result<Kernel> {
        module.0.kernel(module.handle(), name).map(Kernel)
    }
}

impl Kernel {
    /// Checks `launch` against the kernel (workgroup counts, buffer count and sizes, the
    /// scalar block) and makes it ready to run later, owning everything it touches.
    pub(crate) fn prepare(
        launch: &Launch<'_, CpuDriver>,
        timeout: &KernelTimeout,
        strict_bounds: bool,
    ) -> Result<PreparedLaunch> {
        let buffers = launch
            .buffers
            .iter()
            .map(|view| (Buffer::named(&view.buffer), view.offset, view.size))
            .collect();
        PreparedLaunch::new(
            &launch.kernel.0,
            launch.workgroups,
            buffers,
            launch.scalars,
            timeout,
            strict_bounds,
        )
    }
}
