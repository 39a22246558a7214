//! Programs from OpenCL C source (or SPIR-V where the device takes IL), their kernels, and
//! the check of a launch's arguments against the kernel's signature (see `reflect`); the
//! stream enqueues the launch (`stream.rs`).
//!
//! The argument ABI on OpenCL: buffer argument `i` is pointer parameter `i` (`__global` or
//! `__constant`), and the scalar block, when the kernel has scalars, is one more by-value
//! parameter (a struct, or a single scalar) set from the block's bytes. A kernel emitted from
//! WGSL may end with one more by-value parameter, the buffer lengths: `lengths`, of a struct
//! type named `xh_lengths_<entry>` holding one `ulong` per buffer parameter (at least one),
//! the byte length of each bound view in binding order; the backend fills it at every launch
//! where the kernel declares it (see `xhal_kernel::c`). Every kernel declares its workgroup
//! size with `__attribute__((reqd_work_group_size(X, Y, Z)))`, so a launch of `workgroups` is
//! an NDRange of `workgroups × size` work-items in groups of `size`.
//!
//! Kernels are looked up by `c_symbol(name)` first, the name the C emitter gives entry point
//! `name` (`main` is `main_`), then by `name` itself.

use crate::device::Gpu;
use crate::ffi::{self, Kernel, Program};
use crate::reflect::{builtin_size, struct_layouts, Layout, Parameter, Signature};
use crate::OpenClDriver;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::Arc;
use xhal_backend::{DriverKernel, DriverModule, Error, KernelFormat, Object, Result};
use xhal_kernel::c::c_symbol;
use xhal_kernel::parameters::ParameterClass;

/// Options every OpenCL C program is built with: keep parameter names and types, so
/// arguments can be checked before a launch.
const SOURCE_BUILD_OPTIONS: &std::ffi::CStr = c"-cl-kernel-arg-info";

/// A built program.
pub struct Module {
    pub(crate) gpu: Arc<Gpu>,
    program: Program,
    /// The structs the source defines, for checking a struct scalar block's size.
    layouts: HashMap<String, Layout>,
}

// A built program may be used from any thread.
// SAFETY: see above.
unsafe impl Send for Module {}
// SAFETY: see above.
unsafe impl Sync for Module {}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: this backend's one reference; kernels hold the module.
        unsafe { (self.gpu.api().release_program)(self.program) };
    }
}

impl DriverModule<OpenClDriver> for Arc<Module> {
    /// Creates and builds a program from `code` in `format`.
    fn load(
        _driver: &OpenClDriver,
        device: &Arc<Object<Arc<Gpu>>>,
        format: KernelFormat,
        code: &[u8],
    ) -> Result<Arc<Module>> {
        let gpu: &Arc<Gpu> = device;
        let adapter = gpu.adapter();
        let mut status = ffi::CL_SUCCESS;
        let mut layouts = HashMap::new();
        let (program, options, what) = if format == KernelFormat::OPENCL_C {
            let Ok(text) = std::str::from_utf8(code) else {
                return Err(Error::invalid_argument("OpenCL C source is not valid UTF-8"));
            };
            layouts = struct_layouts(text);
            let source = code.as_ptr().cast::<std::ffi::c_char>();
            let length = code.len();
            // SAFETY: one string of `length` bytes; OpenCL copies it.
            let program =
                unsafe { (gpu.api().create_program_with_source)(gpu.context, 1, &source, &length, &mut status) };
            (program, SOURCE_BUILD_OPTIONS, "OpenCL C program")
        } else if format == KernelFormat::SPIRV_KERNEL {
            let Some(create) = adapter.create_program_with_il else {
                return Err(Error::unsupported(format!(
                    "{} takes no SPIR-V (its CL_DEVICE_IL_VERSION names none, or the loader has no \
                     clCreateProgramWithIL)",
                    gpu.name()
                )));
            };
            if code.len() < 20 || !code.len().is_multiple_of(4) || code[..4] != 0x0723_0203u32.to_le_bytes() {
                return Err(Error::invalid_argument(format!(
                    "invalid SPIR-V: {} bytes that do not start with the SPIR-V magic number 0x07230203 in whole words",
                    code.len()
                )));
            }
            // SAFETY: `code.len()` readable bytes; OpenCL copies them.
            let program = unsafe { create(gpu.context, code.as_ptr().cast::<c_void>(), code.len(), &mut status) };
            (program, c"", "SPIR-V program")
        } else {
            let accepted: Vec<String> = adapter.info.kernel_formats.iter().map(|format| format.name()).collect();
            return Err(Error::unsupported(format!(
                "the OpenCL backend does not load {format} modules; {} accepts: {}",
                gpu.name(),
                accepted.join(", ")
            )));
        };
        ffi::check(status, || format!("creating an {what} on {}", gpu.name()))?;
        let module = Module {
            gpu: Arc::clone(gpu),
            program,
            layouts,
        };
        // SAFETY: one device of the program's context; the options are NUL-terminated.
        let built = unsafe {
            (gpu.api().build_program)(
                program,
                1,
                &adapter.device,
                options.as_ptr(),
                None,
                std::ptr::null_mut(),
            )
        };
        if built != ffi::CL_SUCCESS {
            let log = module.build_log();
            let error = ffi::cl_error(format!("building the {what} for {}", gpu.name()), built);
            return Err(if log.is_empty() {
                error
            } else {
                Error::new(error.kind(), format!("{}; build log:\n{log}", error.message()))
            });
        }
        Ok(Arc::new(module))
    }
}

impl Module {
    fn build_log(&self) -> String {
        let device = self.gpu.adapter().device;
        let api = self.gpu.api();
        // SAFETY: a string parameter of a program built for `device`.
        unsafe {
            ffi::info_bytes(|size, value, size_ret| {
                (api.get_program_build_info)(self.program, device, ffi::CL_PROGRAM_BUILD_LOG, size, value, size_ret)
            })
        }
        .map(|bytes| ffi::info_string(&bytes))
        .unwrap_or_default()
    }

    fn kernel_names(&self) -> Vec<String> {
        // SAFETY: a string parameter of a built program.
        unsafe {
            ffi::info_bytes(ffi::query_of(
                self.gpu.api().get_program_info,
                self.program,
                ffi::CL_PROGRAM_KERNEL_NAMES,
            ))
        }
        .map(|bytes| {
            ffi::info_string(&bytes)
                .split(';')
                .filter(|name| !name.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
    }

    /// The size of a parameter's type, where the host knows it: a built-in type, or a struct
    /// the source defines plainly.
    pub(crate) fn type_size(&self, type_name: &str) -> Option<usize> {
        let name = type_name.trim();
        builtin_size(name).or_else(|| {
            let name = name.strip_prefix("struct ").unwrap_or(name).trim();
            self.layouts.get(name).map(|layout| layout.size)
        })
    }
}

impl DriverKernel<OpenClDriver> for KernelObject {
    /// Creates kernel `name` and reads its parameters and workgroup size. `name` is a WGSL
    /// entry point's name, found under the symbol the C emitter gives it (`c_symbol`), or the
    /// name of a kernel of native OpenCL C.
    fn get(_driver: &OpenClDriver, module: &Arc<Object<Arc<Module>>>, name: &str) -> Result<KernelObject> {
        let module: &Arc<Module> = module;
        let c_name = CString::new(name)
            .map_err(|_| Error::invalid_argument(format!("kernel name {name:?} contains a NUL byte")))?;
        let symbol = c_symbol(name);
        let mut candidates = Vec::with_capacity(2);
        if symbol != name {
            // `c_symbol` only appends `_` to a name without NUL bytes.
            if let Ok(symbol) = CString::new(symbol.as_str()) {
                candidates.push(symbol);
            }
        }
        candidates.push(c_name);
        let mut status = ffi::CL_INVALID_KERNEL_NAME;
        let mut kernel = std::ptr::null_mut();
        let mut found = CString::default();
        for candidate in &candidates {
            // SAFETY: a built program and a NUL-terminated name.
            kernel = unsafe { (module.gpu.api().create_kernel)(module.program, candidate.as_ptr(), &mut status) };
            if status != ffi::CL_INVALID_KERNEL_NAME {
                found = candidate.clone();
                break;
            }
        }
        if status == ffi::CL_INVALID_KERNEL_NAME {
            let names = module.kernel_names();
            let also = if symbol != name {
                format!(" (nor `{symbol}`, the C name of WGSL entry point `{name}`)")
            } else {
                String::new()
            };
            return Err(Error::not_found(format!(
                "the module has no kernel `{name}`{also}; it has: {}",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            )));
        }
        ffi::check(status, || format!("creating kernel `{name}`"))?;
        // Made before the signature is read, so that a kernel refused there is released.
        let mut object = KernelObject {
            module: Arc::clone(module),
            kernel: Mutex::new(kernel),
            name: name.to_string(),
            symbol: found,
            signature: Signature::default(),
        };
        object.signature = Signature::read(module, kernel, name)?;
        Ok(object)
    }
}

/// One kernel of a module.
pub struct KernelObject {
    pub(crate) module: Arc<Module>,
    /// Arguments are set and the launch enqueued under this lock: a kernel's arguments are
    /// state shared by every thread using it.
    pub(crate) kernel: Mutex<Kernel>,
    pub(crate) name: String,
    /// The name the program knows the kernel by, for more objects of it.
    symbol: CString,
    pub(crate) signature: Signature,
}

// The kernel object is only touched under its lock.
// SAFETY: see above.
unsafe impl Send for KernelObject {}
// SAFETY: see above.
unsafe impl Sync for KernelObject {}

impl Drop for KernelObject {
    fn drop(&mut self) {
        // SAFETY: this backend's one reference; enqueued launches hold their own.
        unsafe { (self.module.gpu.api().release_kernel)(*self.kernel.get_mut()) };
    }
}

/// A kernel object of its own, whose arguments nobody else sets: a command list's launch
/// records with one, because a driver may read a shared kernel's arguments when the command
/// buffer runs rather than when the command was recorded.
pub(crate) struct OwnKernel {
    module: Arc<Module>,
    pub(crate) kernel: Kernel,
}

// The object is only used by the command list that owns it, under the list's lock.
// SAFETY: see above.
unsafe impl Send for OwnKernel {}
// SAFETY: see above.
unsafe impl Sync for OwnKernel {}

impl Drop for OwnKernel {
    fn drop(&mut self) {
        // SAFETY: this object's one reference; recorded command buffers hold their own.
        unsafe { (self.module.gpu.api().release_kernel)(self.kernel) };
    }
}

impl KernelObject {
    /// A new kernel object of the same program and entry point.
    pub(crate) fn own_kernel(&self) -> Result<OwnKernel> {
        let mut status = ffi::CL_SUCCESS;
        // SAFETY: the program is built, and made this kernel under the same name.
        let kernel =
            unsafe { (self.module.gpu.api().create_kernel)(self.module.program, self.symbol.as_ptr(), &mut status) };
        ffi::check(status, || format!("creating another object of kernel `{}`", self.name))?;
        Ok(OwnKernel {
            module: Arc::clone(&self.module),
            kernel,
        })
    }

    /// Checks a launch's arguments against the parameters, host-side.
    pub(crate) fn check_arguments(&self, buffers: usize, scalars: &[u8]) -> Result<()> {
        let name = &self.name;
        if self.signature.parameters.is_empty() {
            // No argument information: only the count can be checked.
            let given = buffers + usize::from(!scalars.is_empty());
            if given != self.signature.argument_count as usize {
                return Err(Error::invalid_argument(format!(
                    "kernel `{name}` has {} parameter(s), but the launch passes {buffers} buffer(s){}",
                    self.signature.argument_count,
                    if scalars.is_empty() {
                        String::new()
                    } else {
                        " and a scalar block".to_string()
                    }
                )));
            }
            return Ok(());
        }
        let expected: Vec<&Parameter> = self
            .signature
            .parameters
            .iter()
            .filter(|parameter| parameter.class == ParameterClass::Buffer)
            .collect();
        // The lengths parameter is not the caller's: the backend fills it.
        let scalar = self
            .signature
            .parameters
            .iter()
            .find(|parameter| parameter.class == ParameterClass::Value);
        if buffers != expected.len() {
            let list: Vec<String> = expected.iter().map(|parameter| parameter.describe()).collect();
            return Err(Error::invalid_argument(format!(
                "kernel `{name}` takes {} buffer(s) ({}), but {buffers} were given",
                expected.len(),
                if list.is_empty() {
                    "none".to_string()
                } else {
                    list.join(", ")
                }
            )));
        }
        match (scalar, scalars.len()) {
            (None, 0) => Ok(()),
            (None, given) => Err(Error::invalid_argument(format!(
                "kernel `{name}` takes no scalars (it has no by-value parameter), but a {given}-byte scalar block was given"
            ))),
            (Some(parameter), 0) => Err(Error::invalid_argument(format!(
                "kernel `{name}` takes the scalar block {}, but no scalars were given",
                parameter.describe()
            ))),
            (Some(parameter), given) => match self.module.type_size(&parameter.type_name) {
                Some(size) if size != given => Err(Error::invalid_argument(format!(
                    "kernel `{name}` takes the scalar block {} of {size} bytes, but {given} bytes were given",
                    parameter.describe()
                ))),
                _ => Ok(()),
            },
        }
    }

    /// Whether the kernel declares the buffer-lengths parameter.
    pub(crate) fn takes_lengths(&self) -> bool {
        self.signature
            .parameters
            .iter()
            .any(|parameter| parameter.class == ParameterClass::Lengths)
    }

    pub(crate) fn parameter_name(&self, index: usize) -> String {
        self.signature
            .parameters
            .get(index)
            .map(|parameter| format!(" ({})", parameter.describe()))
            .unwrap_or_default()
    }
}

/// The buffer-lengths block: one `ulong` per buffer view, the view's byte length, in the
/// host's byte order as the scalar block; at least one entry (zero where there are no buffers).
pub(crate) fn lengths_block(sizes: impl Iterator<Item = u64>) -> Vec<u8> {
    let mut block: Vec<u8> = sizes.flat_map(u64::to_ne_bytes).collect();
    if block.is_empty() {
        block.resize(8, 0);
    }
    block
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lengths_block_holds_one_ulong_per_buffer() {
        let block = lengths_block([16u64, 4].into_iter());
        assert_eq!(block.len(), 16);
        assert_eq!(block[..8], 16u64.to_ne_bytes());
        assert_eq!(block[8..], 4u64.to_ne_bytes());
        assert_eq!(lengths_block(std::iter::empty()), vec![0; 8]);
    }
}
