//! Modules from Kernel SPIR-V (`zeModuleCreate` with `ZE_MODULE_FORMAT_IL_SPIRV`), their
//! kernels, and the kernels' parameters as the argument ABI reads them; the stream appends
//! the launches (`stream.rs`).
//!
//! Level Zero reports how many arguments a kernel has but not what they are, so the backend
//! reads the kernel's parameters and `LocalSize` from the SPIR-V itself (`reflect.rs`): buffer
//! argument `i` is `CrossWorkgroup` pointer parameter `i`, set to the view's device address
//! (the buffer's base plus the view's offset); the scalar block, when the kernel has scalars,
//! is the next parameter, set from the block's bytes; a kernel written from WGSL may end with
//! a by-value struct of one `u64` per buffer (at least one), the byte length of each bound
//! view, which the backend fills at every launch.

use crate::device::Gpu;
use crate::ffi::{self, KernelHandle, ModuleHandle};
use crate::reflect::{self, EntryPoint, Parameter};
use crate::LevelZeroDriver;
use parking_lot::Mutex;
use std::ffi::{c_char, CStr, CString};
use std::sync::Arc;
use xhal_backend::{DriverKernel, DriverModule, Error, KernelFormat, Object, Result};
use xhal_kernel::c::c_symbol;
use xhal_kernel::parameters::check_parameter_order;

/// A built module.
pub struct Module {
    pub(crate) gpu: Arc<Gpu>,
    module: ModuleHandle,
    entry_points: Vec<EntryPoint>,
}

// A built module may be used from any thread.
// SAFETY: see above.
unsafe impl Send for Module {}
// SAFETY: see above.
unsafe impl Sync for Module {}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: kernels hold the module, so none is left.
        unsafe { (self.gpu.api().module_destroy)(self.module) };
    }
}

impl DriverModule<LevelZeroDriver> for Module {
    /// Builds `code`, Kernel SPIR-V, for the device.
    fn load(
        _driver: &LevelZeroDriver,
        device: &Arc<Object<Arc<Gpu>>>,
        format: KernelFormat,
        code: &[u8],
    ) -> Result<Module> {
        let gpu: &Arc<Gpu> = device;
        if format != KernelFormat::SPIRV_KERNEL {
            return Err(Error::unsupported(format!(
                "the Level Zero backend does not load {format} modules; {} accepts: {}",
                gpu.name(),
                KernelFormat::SPIRV_KERNEL.name()
            )));
        }
        let Some(entry_points) = reflect::entry_points(code) else {
            return Err(Error::invalid_argument(format!(
                "invalid SPIR-V: {} bytes that do not start with the SPIR-V magic number 0x07230203 in whole words",
                code.len()
            )));
        };
        let desc = ffi::ModuleDesc {
            stype: ffi::ZE_STRUCTURE_TYPE_MODULE_DESC,
            p_next: std::ptr::null(),
            format: ffi::ZE_MODULE_FORMAT_IL_SPIRV,
            input_size: code.len(),
            p_input_module: code.as_ptr(),
            p_build_flags: c"".as_ptr(),
            p_constants: std::ptr::null(),
        };
        let api = gpu.api();
        let mut module = std::ptr::null_mut();
        let mut log = std::ptr::null_mut();
        // SAFETY: a live context and device; the descriptor points at `code`, which outlives
        // the call; the driver writes the module and build log handles.
        let code = unsafe { (api.module_create)(gpu.context, gpu.adapter().device, &desc, &mut module, &mut log) };
        let log_text = build_log(api, log);
        if code != ffi::ZE_RESULT_SUCCESS {
            let error = ffi::ze_error(
                "zeModuleCreate",
                format!("building a SPIR-V module for {}", gpu.name()),
                code,
            );
            if !module.is_null() {
                // SAFETY: a module the failed call still returned.
                unsafe { (api.module_destroy)(module) };
            }
            return Err(if log_text.is_empty() {
                error
            } else {
                Error::new(error.kind(), format!("{}; build log:\n{log_text}", error.message()))
            });
        }
        if !log_text.is_empty() {
            tracing::debug!(log = %log_text, "Level Zero module build log");
        }
        Ok(Module {
            gpu: Arc::clone(gpu),
            module,
            entry_points,
        })
    }
}

impl Module {
    fn kernel_names(&self) -> Vec<String> {
        let api = self.gpu.api();
        let mut count = 0u32;
        // SAFETY: asks for the count only.
        if unsafe { (api.module_get_kernel_names)(self.module, &mut count, std::ptr::null_mut()) }
            != ffi::ZE_RESULT_SUCCESS
        {
            return Vec::new();
        }
        let mut names: Vec<*const c_char> = vec![std::ptr::null(); count as usize];
        // SAFETY: room for `count` pointers, to strings the module owns.
        if unsafe { (api.module_get_kernel_names)(self.module, &mut count, names.as_mut_ptr()) }
            != ffi::ZE_RESULT_SUCCESS
        {
            return Vec::new();
        }
        names
            .iter()
            .take(count as usize)
            .filter(|name| !name.is_null())
            // SAFETY: NUL-terminated strings owned by the live module.
            .map(|name| unsafe { CStr::from_ptr(*name) }.to_string_lossy().into_owned())
            .collect()
    }
}

impl DriverKernel<LevelZeroDriver> for KernelObject {
    /// Creates kernel `name` of `module`: a WGSL entry point's name, found under the symbol the
    /// Kernel SPIR-V writer gives it (`c_symbol`), or a kernel's own name.
    fn get(_driver: &LevelZeroDriver, module: &Arc<Object<Module>>, name: &str) -> Result<KernelObject> {
        let symbol = c_symbol(name);
        let mut candidates = Vec::with_capacity(2);
        if symbol != name {
            candidates.push(symbol.clone());
        }
        candidates.push(name.to_string());
        let api = module.gpu.api();
        for candidate in &candidates {
            let Ok(c_name) = CString::new(candidate.as_str()) else {
                return Err(Error::invalid_argument(format!(
                    "kernel name {name:?} contains a NUL byte"
                )));
            };
            let desc = ffi::KernelDesc {
                stype: ffi::ZE_STRUCTURE_TYPE_KERNEL_DESC,
                p_next: std::ptr::null(),
                flags: 0,
                p_kernel_name: c_name.as_ptr(),
            };
            let mut kernel = std::ptr::null_mut();
            // SAFETY: a built module and a filled descriptor whose name outlives the call.
            let code = unsafe { (api.kernel_create)(module.module, &desc, &mut kernel) };
            if code == ffi::ZE_RESULT_ERROR_INVALID_KERNEL_NAME {
                continue;
            }
            ffi::check(code, "zeKernelCreate", || format!("creating kernel `{candidate}`"))?;
            let object = KernelObject {
                module: Arc::clone(module),
                kernel: Mutex::new(kernel),
                name: name.to_string(),
                workgroup_size: [1; 3],
                parameters: Vec::new(),
            };
            return object.reflect(candidate);
        }
        let names = module.kernel_names();
        let also = if symbol != name {
            format!(" (nor `{symbol}`, the name Kernel SPIR-V gives WGSL entry point `{name}`)")
        } else {
            String::new()
        };
        Err(Error::not_found(format!(
            "the module has no kernel `{name}`{also}; it has: {}",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        )))
    }
}

/// The text of a build log, which is then destroyed; empty when there is none.
fn build_log(api: &ffi::Api, log: ffi::BuildLogHandle) -> String {
    if log.is_null() {
        return String::new();
    }
    let mut size = 0usize;
    let mut text = String::new();
    // SAFETY: asks for the size only.
    if unsafe { (api.module_build_log_get_string)(log, &mut size, std::ptr::null_mut()) } == ffi::ZE_RESULT_SUCCESS
        && size > 0
    {
        let mut bytes = vec![0 as c_char; size];
        // SAFETY: room for `size` characters.
        if unsafe { (api.module_build_log_get_string)(log, &mut size, bytes.as_mut_ptr()) } == ffi::ZE_RESULT_SUCCESS {
            text = ffi::c_string(&bytes);
        }
    }
    // SAFETY: the log handle the module call returned, destroyed once.
    unsafe { (api.module_build_log_destroy)(log) };
    text
}

/// One kernel of a module.
pub struct KernelObject {
    pub(crate) module: Arc<Object<Module>>,
    /// Arguments are set and the launch appended under this lock: a kernel's arguments are
    /// state shared by every thread using it (Level Zero captures them when appended).
    pub(crate) kernel: Mutex<KernelHandle>,
    pub(crate) name: String,
    pub(crate) workgroup_size: [u32; 3],
    parameters: Vec<Parameter>,
}

// The kernel handle is only used under its lock.
// SAFETY: see above.
unsafe impl Send for KernelObject {}
// SAFETY: see above.
unsafe impl Sync for KernelObject {}

impl Drop for KernelObject {
    fn drop(&mut self) {
        // SAFETY: every launch of the kernel held it until the launch was seen complete.
        unsafe { (self.module.gpu.api().kernel_destroy)(*self.kernel.get_mut()) };
    }
}

impl KernelObject {
    /// Reads the parameters and the workgroup size of `symbol` from the SPIR-V, checks them
    /// against what Level Zero reports and sets the group size.
    fn reflect(mut self, symbol: &str) -> Result<KernelObject> {
        let name = self.name.clone();
        let api = self.module.gpu.api();
        let kernel = *self.kernel.get_mut();
        let mut properties = ffi::KernelProperties::new();
        // SAFETY: a live kernel; the struct has its stype set.
        let code = unsafe { (api.kernel_get_properties)(kernel, &mut properties) };
        ffi::check(code, "zeKernelGetProperties", || format!("describing kernel `{name}`"))?;
        let entry = self.module.entry_points.iter().find(|entry| entry.name == symbol);
        let (size, parameters) = match entry {
            Some(entry) => (entry.workgroup_size, entry.parameters.clone()),
            None => (None, Vec::new()),
        };
        let size = size
            .or_else(|| {
                let required = properties.required_group_size;
                (!required.contains(&0)).then_some(required)
            })
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "kernel `{name}` declares no workgroup size: an xhal launch counts workgroups of a fixed size, so a \
                     SPIR-V kernel must declare it with OpExecutionMode LocalSize"
                ))
            })?;
        if size.contains(&0) {
            return Err(Error::invalid_argument(format!(
                "kernel `{name}` declares a workgroup size of {}x{}x{}; every dimension needs at least 1",
                size[0], size[1], size[2]
            )));
        }
        if !parameters.is_empty() && parameters.len() != properties.num_kernel_args as usize {
            return Err(Error::internal(format!(
                "kernel `{name}` has {} parameters in its SPIR-V, but the driver reports {}",
                parameters.len(),
                properties.num_kernel_args
            )));
        }
        check_parameters(&name, &parameters)?;
        let info = &self.module.gpu.adapter().info;
        let invocations = u64::from(size[0]) * u64::from(size[1]) * u64::from(size[2]);
        let fits = (0..3).all(|axis| size[axis] <= info.max_workgroup_size[axis]);
        if !fits || invocations > u64::from(info.max_workgroup_invocations) {
            return Err(Error::unsupported(format!(
                "kernel `{name}` asks for workgroups of {}x{}x{} ({invocations} invocations), but {} runs at most \
                 {:?} and {} invocations",
                size[0], size[1], size[2], info.name, info.max_workgroup_size, info.max_workgroup_invocations
            )));
        }
        // SAFETY: a live kernel, not yet shared.
        let code = unsafe { (api.kernel_set_group_size)(kernel, size[0], size[1], size[2]) };
        ffi::check(code, "zeKernelSetGroupSize", || {
            format!(
                "setting the workgroup size of kernel `{name}` to {}x{}x{}",
                size[0], size[1], size[2]
            )
        })?;
        self.workgroup_size = size;
        self.parameters = parameters;
        Ok(self)
    }

    fn buffer_parameters(&self) -> usize {
        self.parameters
            .iter()
            .filter(|parameter| **parameter == Parameter::Buffer)
            .count()
    }

    /// The scalar block's parameter, if the kernel has one.
    fn scalar_parameter(&self) -> Option<&Parameter> {
        self.parameters
            .iter()
            .find(|parameter| matches!(parameter, Parameter::Value(_)))
    }

    pub(crate) fn takes_lengths(&self) -> bool {
        self.parameters
            .iter()
            .any(|parameter| matches!(parameter, Parameter::Lengths(_)))
    }

    /// Checks a launch's arguments against the parameters, host-side.
    pub(crate) fn check_arguments(&self, buffers: usize, scalars: &[u8]) -> Result<()> {
        let name = &self.name;
        let expected = self.buffer_parameters();
        if buffers != expected {
            return Err(Error::invalid_argument(format!(
                "kernel `{name}` takes {expected} buffer(s), but {buffers} were given"
            )));
        }
        match (self.scalar_parameter(), scalars.len()) {
            (None, 0) => Ok(()),
            (None, given) => Err(Error::invalid_argument(format!(
                "kernel `{name}` takes no scalars (it has no by-value parameter), but a {given}-byte scalar block was given"
            ))),
            (Some(_), 0) => Err(Error::invalid_argument(format!(
                "kernel `{name}` takes a scalar block, but no scalars were given"
            ))),
            (Some(Parameter::Value(Some(size))), given) if *size != given => Err(Error::invalid_argument(format!(
                "kernel `{name}` takes a scalar block of {size} bytes, but {given} bytes were given"
            ))),
            _ => Ok(()),
        }
    }
}

/// The buffer-lengths block: one `u64` per buffer view, the view's byte length, in the
/// host's byte order as the scalar block; at least one entry (zero where there are no buffers).
pub(crate) fn lengths_block(sizes: impl Iterator<Item = u64>) -> Vec<u8> {
    let mut block: Vec<u8> = sizes.flat_map(u64::to_ne_bytes).collect();
    if block.is_empty() {
        block.resize(8, 0);
    }
    block
}

/// Buffers first, then at most one value (the scalar block), then at most one buffer-lengths
/// struct with one entry per buffer; nothing else.
pub(crate) fn check_parameters(name: &str, parameters: &[Parameter]) -> Result<()> {
    check_parameter_order(
        name,
        parameters
            .iter()
            .map(|parameter| (parameter.class(), parameter.describe())),
    )
    .map_err(|error| Error::invalid_argument(error.message()))?;
    let buffers = parameters
        .iter()
        .filter(|parameter| **parameter == Parameter::Buffer)
        .count();
    match parameters.iter().find_map(|parameter| match parameter {
        Parameter::Lengths(count) => Some(*count),
        _ => None,
    }) {
        Some(count) if count != buffers.max(1) => Err(Error::invalid_argument(format!(
            "kernel `{name}` does not follow the xhal argument ABI: its buffer-lengths parameter holds {count} \
             entries, but with {buffers} buffer parameter(s) it must hold {}",
            buffers.max(1)
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lengths_parameter_holds_one_entry_per_buffer() {
        let ok = [
            vec![Parameter::Buffer, Parameter::Value(Some(8)), Parameter::Lengths(1)],
            vec![Parameter::Lengths(1)],
            vec![Parameter::Buffer, Parameter::Buffer, Parameter::Lengths(2)],
        ];
        for parameters in ok {
            assert!(check_parameters("k", &parameters).is_ok(), "{parameters:?}");
        }
        let error = check_parameters("k", &[Parameter::Buffer, Parameter::Lengths(3)]).unwrap_err();
        assert_eq!(error.kind(), xhal_backend::ErrorKind::InvalidArgument);
        assert!(error.message().contains("3 entries"), "{error}");
    }

    #[test]
    fn the_order_is_checked_as_on_every_backend() {
        let wrong = [
            vec![Parameter::Value(None), Parameter::Buffer],
            vec![Parameter::Buffer, Parameter::Value(None), Parameter::Value(None)],
            vec![Parameter::Buffer, Parameter::Lengths(1), Parameter::Value(None)],
            vec![Parameter::Buffer, Parameter::Other],
        ];
        for parameters in wrong {
            let error = check_parameters("k", &parameters).unwrap_err();
            assert_eq!(error.kind(), xhal_backend::ErrorKind::InvalidArgument, "{parameters:?}");
        }
        let error =
            check_parameters("k", &[Parameter::Buffer, Parameter::Value(Some(8)), Parameter::Other]).unwrap_err();
        assert_eq!(
            error.message(),
            "kernel `k`: parameter 2 (a pointer) is a pointer to local or private memory, which the xhal argument \
             ABI cannot pass; declare local memory inside the kernel"
        );
    }

    #[test]
    fn the_lengths_block_holds_one_u64_per_buffer() {
        let block = lengths_block([16u64, 4].into_iter());
        assert_eq!(block.len(), 16);
        assert_eq!(block[..8], 16u64.to_ne_bytes());
        assert_eq!(block[8..], 4u64.to_ne_bytes());
        assert_eq!(lengths_block(std::iter::empty()), vec![0; 8]);
    }
}
