//! Modules from AMD GPU code objects (`hsaco`) or HIP C source compiled by hiprtc (`hip-c`),
//! their kernels, the kernels' parameters as the argument ABI reads them, and the checks of a
//! launch's arguments against them (the launch itself is the stream's).
//!
//! The argument ABI on HIP: buffer argument `i` is pointer parameter `i` (the buffer's
//! device address plus the view's offset), and the scalar block, when the kernel has
//! scalars, is one more by-value parameter. A kernel emitted from WGSL may end with one more
//! by-value parameter, the buffer lengths (`xh_lengths_<entry> lengths`: one 64-bit length per
//! buffer parameter, at least one), which the backend fills at every launch. The parameters
//! come from the HIP C source where there is one (read by [`xhal_kernel::c_signature`]) and
//! from the code object's metadata (see [`crate::code_object`]), which also gives each
//! by-value parameter's size, so a scalar block of the wrong size is refused host-side.
//!
//! Kernels are looked up by `c_symbol(name)` first, the name the C emitter gives entry point
//! `name` (`main` is `main_`), then by `name` itself.

use crate::code_object::{self, KernelMetadata};
use crate::device::Gpu;
use crate::ffi::{self, HipFunction, HipModule};
use crate::instance::Instance;
use crate::RocmDriver;
use std::collections::HashMap;
use std::ffi::{c_char, c_void, CString};
use std::sync::Arc;
use xhal_backend::{DriverKernel, DriverModule, Error, KernelFormat, Object, Result};
use xhal_kernel::c::c_symbol;
use xhal_kernel::c_signature::{self, CKernel};
use xhal_kernel::parameters::{check_parameter_order, ParameterClass};
use xhal_kernel::Dialect;

/// A loaded code object.
pub struct Module {
    pub(crate) gpu: Arc<Gpu>,
    raw: HipModule,
    /// What the HIP C source declares, by kernel name (empty for `hsaco`).
    source_kernels: Vec<CKernel>,
    /// Type sizes the source asserts.
    source_sizes: HashMap<String, u64>,
    /// The code object's kernel metadata, or why it could not be read.
    metadata: std::result::Result<Vec<KernelMetadata>, String>,
}

// A loaded module may be used from any thread.
// SAFETY: see above.
unsafe impl Send for Module {}
// SAFETY: see above.
unsafe impl Sync for Module {}

impl Drop for Module {
    fn drop(&mut self) {
        if self.gpu.bind().is_err() {
            return;
        }
        // SAFETY: this backend's module, unloaded once; kernels hold the module.
        unsafe { (self.gpu.api().module_unload)(self.raw) };
    }
}

/// Compiles HIP C `text` with hiprtc for the device, returning the code object.
fn compile(gpu: &Gpu, instance: &Instance, text: &str) -> Result<Vec<u8>> {
    let name = gpu.name();
    let Some(rtc) = instance.rtc.as_ref() else {
        return Err(Error::unsupported(format!(
            "{name} takes no hip-c: hiprtc (libhiprtc.so) could not be loaded; install ROCm's hiprtc \
             (hip-runtime-amd) or load code objects (hsaco)"
        )));
    };
    let source = CString::new(text).map_err(|_| Error::invalid_argument("HIP C source contains a NUL byte"))?;
    let arch = gpu.adapter().arch.clone();
    // Without --offload-arch, hiprtc compiles for the calling thread's current device.
    gpu.bind()?;
    let mut program: ffi::HiprtcProgram = std::ptr::null_mut();
    // SAFETY: NUL-terminated source and name; no headers.
    let result = unsafe {
        (rtc.create_program)(
            &mut program,
            source.as_ptr(),
            c"xhal_module.hip".as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    if result != ffi::HIPRTC_SUCCESS {
        return Err(rtc.error(&format!("compiling HIP C for {name}"), "hiprtcCreateProgram", result));
    }
    struct Program<'a>(&'a ffi::Rtc, ffi::HiprtcProgram);
    impl Drop for Program<'_> {
        fn drop(&mut self) {
            // SAFETY: a program made by hiprtcCreateProgram, destroyed once.
            unsafe { (self.0.destroy_program)(&mut self.1) };
        }
    }
    let program = Program(rtc, program);
    let options: Vec<CString> = arch
        .iter()
        .filter_map(|arch| CString::new(format!("--offload-arch={arch}")).ok())
        .collect();
    let option_pointers: Vec<*const c_char> = options.iter().map(|option| option.as_ptr()).collect();
    // SAFETY: `option_pointers` holds that many NUL-terminated strings.
    let result = unsafe { (rtc.compile_program)(program.1, option_pointers.len() as i32, option_pointers.as_ptr()) };
    if result != ffi::HIPRTC_SUCCESS {
        let error = rtc.error(
            &format!(
                "compiling HIP C for {name} ({})",
                arch.as_deref()
                    .map_or("for the current device's target".to_string(), |arch| format!(
                        "--offload-arch={arch}"
                    ))
            ),
            "hiprtcCompileProgram",
            result,
        );
        let log = program_log(rtc, program.1);
        return Err(if log.is_empty() {
            error
        } else {
            Error::new(error.kind(), format!("{}; hiprtc log:\n{log}", error.message()))
        });
    }
    let mut size = 0usize;
    // SAFETY: writes one size_t.
    let result = unsafe { (rtc.get_code_size)(program.1, &mut size) };
    if result != ffi::HIPRTC_SUCCESS {
        return Err(rtc.error(&format!("compiling HIP C for {name}"), "hiprtcGetCodeSize", result));
    }
    let mut code = vec![0u8; size];
    // SAFETY: the buffer holds the size hiprtc reported.
    let result = unsafe { (rtc.get_code)(program.1, code.as_mut_ptr().cast()) };
    if result != ffi::HIPRTC_SUCCESS {
        return Err(rtc.error(&format!("compiling HIP C for {name}"), "hiprtcGetCode", result));
    }
    Ok(code)
}

fn program_log(rtc: &ffi::Rtc, program: ffi::HiprtcProgram) -> String {
    let mut size = 0usize;
    // SAFETY: writes one size_t.
    if unsafe { (rtc.get_program_log_size)(program, &mut size) } != ffi::HIPRTC_SUCCESS || size == 0 {
        return String::new();
    }
    let mut log = vec![0u8; size];
    // SAFETY: the buffer holds the size hiprtc reported.
    if unsafe { (rtc.get_program_log)(program, log.as_mut_ptr().cast()) } != ffi::HIPRTC_SUCCESS {
        return String::new();
    }
    let end = log.iter().position(|&byte| byte == 0).unwrap_or(log.len());
    String::from_utf8_lossy(&log[..end]).trim().to_string()
}

impl DriverModule<RocmDriver> for Module {
    /// Loads `code` in `format`: a code object, or HIP C compiled first.
    fn load(_driver: &RocmDriver, device: &Arc<Object<Arc<Gpu>>>, format: KernelFormat, code: &[u8]) -> Result<Module> {
        let gpu: &Arc<Gpu> = device;
        let adapter = gpu.adapter();
        let (image, source_kernels, source_sizes) = if format == KernelFormat::HIP_C {
            let Ok(text) = std::str::from_utf8(code) else {
                return Err(Error::invalid_argument("HIP C source is not valid UTF-8"));
            };
            let image = compile(gpu, &gpu.instance, text)?;
            (
                image,
                c_signature::kernels(text, Dialect::HipC),
                c_signature::asserted_sizes(text),
            )
        } else if format == KernelFormat::HSACO {
            if !code_object::is_code_object(code) {
                return Err(Error::invalid_argument(format!(
                    "invalid hsaco: {} bytes that start with neither an ELF header nor a clang offload bundle",
                    code.len()
                )));
            }
            (code.to_vec(), Vec::new(), HashMap::new())
        } else {
            let accepted: Vec<String> = adapter.info.kernel_formats.iter().map(|format| format.name()).collect();
            return Err(Error::unsupported(format!(
                "the ROCm backend does not load {format} modules; {} accepts: {}",
                gpu.name(),
                accepted.join(", ")
            )));
        };
        let metadata = code_object::kernels(&image, adapter.arch.as_deref());
        gpu.bind()?;
        let mut raw: HipModule = std::ptr::null_mut();
        // SAFETY: a complete code object in memory that outlives the call.
        let code = unsafe { (gpu.api().module_load_data)(&mut raw, image.as_ptr().cast::<c_void>()) };
        gpu.api().check(code, "hipModuleLoadData", || {
            format!("loading a {}-byte code object on {}", image.len(), gpu.name())
        })?;
        Ok(Module {
            gpu: Arc::clone(gpu),
            raw,
            source_kernels,
            source_sizes,
            metadata,
        })
    }
}

impl Module {
    fn kernel_names(&self) -> Vec<String> {
        match &self.metadata {
            Ok(kernels) => kernels.iter().map(|kernel| kernel.name.clone()).collect(),
            Err(_) => self.source_kernels.iter().map(|kernel| kernel.name.clone()).collect(),
        }
    }
}

impl DriverKernel<RocmDriver> for KernelObject {
    /// Finds kernel `name` (a WGSL entry point's name, found under the symbol the C emitter
    /// gives it, or a native kernel's name) and reads its parameters and workgroup size.
    fn get(_driver: &RocmDriver, module: &Arc<Object<Module>>, name: &str) -> Result<KernelObject> {
        let symbol = c_symbol(name);
        let mut candidates = vec![symbol.clone()];
        if symbol != name {
            candidates.push(name.to_string());
        }
        let mut found = None;
        for candidate in &candidates {
            let Ok(c_name) = CString::new(candidate.as_str()) else {
                return Err(Error::invalid_argument(format!(
                    "kernel name {name:?} contains a NUL byte"
                )));
            };
            module.gpu.bind()?;
            let mut function: HipFunction = std::ptr::null_mut();
            // SAFETY: a loaded module and a NUL-terminated name.
            let code = unsafe { (module.gpu.api().module_get_function)(&mut function, module.raw, c_name.as_ptr()) };
            match code {
                ffi::HIP_SUCCESS => {
                    found = Some((candidate.clone(), function));
                    break;
                }
                // hipErrorNotFound, or hipErrorInvalidDeviceFunction on some releases.
                ffi::HIP_ERROR_NOT_FOUND | 98 => continue,
                _ => {
                    return Err(module.gpu.api().error(
                        &format!("looking up kernel `{candidate}`"),
                        "hipModuleGetFunction",
                        code,
                    ))
                }
            }
        }
        let Some((symbol, function)) = found else {
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
        };
        let description = module.describe(&symbol)?;
        Ok(KernelObject {
            module: Arc::clone(module),
            function,
            name: name.to_string(),
            workgroup_size: description.workgroup_size,
            parameters: description.parameters,
        })
    }
}

impl Module {
    /// The parameters and workgroup size of kernel `symbol`, from the source and the
    /// metadata; refuses kernels that do not follow the argument ABI or have no fixed size.
    fn describe(&self, symbol: &str) -> Result<Description> {
        let from_source = self.source_kernels.iter().find(|kernel| kernel.name == symbol);
        let from_metadata = match &self.metadata {
            Ok(kernels) => kernels.iter().find(|kernel| kernel.name == symbol),
            Err(reason) if from_source.is_none() => {
                return Err(Error::invalid_argument(format!(
                    "kernel `{symbol}` cannot be described, so its arguments cannot be checked or passed: {reason}"
                )))
            }
            Err(_) => None,
        };
        let parameters = match (from_source, from_metadata) {
            (Some(source), metadata) => {
                let sizes: Vec<Option<u64>> = match metadata {
                    Some(metadata) if metadata.arguments.len() == source.parameters.len() => {
                        metadata.arguments.iter().map(|argument| Some(argument.size)).collect()
                    }
                    _ => vec![None; source.parameters.len()],
                };
                source
                    .parameters
                    .iter()
                    .zip(sizes)
                    .map(|(parameter, size)| Parameter {
                        class: parameter.class,
                        description: parameter.describe(),
                        size: match parameter.class {
                            ParameterClass::Buffer => size,
                            _ => size.or_else(|| self.source_sizes.get(&parameter.type_name).copied()),
                        },
                    })
                    .collect::<Vec<_>>()
            }
            (None, Some(metadata)) => metadata
                .arguments
                .iter()
                .enumerate()
                .map(|(index, argument)| {
                    let label = argument.name.clone().unwrap_or_else(|| format!("parameter {index}"));
                    let class = match argument.value_kind.as_str() {
                        "global_buffer" => ParameterClass::Buffer,
                        "by_value"
                            if argument.name.as_deref() == Some("lengths")
                                || argument.type_name.as_deref().is_some_and(c_signature::is_lengths_type) =>
                        {
                            ParameterClass::Lengths
                        }
                        "by_value" => ParameterClass::Value,
                        other => {
                            return Err(Error::invalid_argument(format!(
                                "kernel `{symbol}`: {label} is a {other} argument, which the xhal argument ABI \
                                 cannot pass (it passes global buffers and one by-value scalar block)"
                            )))
                        }
                    };
                    Ok(Parameter {
                        class,
                        description: format!("`{label}` ({}, {} bytes)", argument.value_kind, argument.size),
                        size: Some(argument.size),
                    })
                })
                .collect::<Result<Vec<_>>>()?,
            (None, None) => {
                return Err(Error::invalid_argument(format!(
                "kernel `{symbol}` is in the code object but not in its metadata, so its arguments cannot be checked"
            )))
            }
        };
        check_parameter_order(
            symbol,
            parameters
                .iter()
                .map(|parameter| (parameter.class, &parameter.description)),
        )
        .map_err(|error| Error::invalid_argument(error.message()))?;
        let buffers = parameters
            .iter()
            .filter(|parameter| parameter.class == ParameterClass::Buffer)
            .count();
        if let Some(lengths) = parameters
            .iter()
            .find(|parameter| parameter.class == ParameterClass::Lengths)
        {
            check_lengths_size(symbol, lengths, buffers)?;
        }
        let workgroup_size = from_metadata
            .and_then(|metadata| metadata.reqd_workgroup_size)
            .or_else(|| from_source.and_then(|source| source.workgroup_size))
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "kernel `{symbol}` declares no workgroup size: an xhal launch counts workgroups of a fixed size, \
                     so a native HIP kernel must declare it with __attribute__((reqd_work_group_size(X, Y, Z))) \
                     (for a code object: `.reqd_workgroup_size` in its metadata)"
                ))
            })?;
        let invocations = u64::from(workgroup_size[0]) * u64::from(workgroup_size[1]) * u64::from(workgroup_size[2]);
        let info = &self.gpu.adapter().info;
        let most = from_metadata
            .and_then(|metadata| metadata.max_flat_workgroup_size)
            .map_or(info.max_workgroup_invocations, |flat| {
                flat.min(info.max_workgroup_invocations)
            });
        let fits_axes = workgroup_size
            .iter()
            .zip(info.max_workgroup_size)
            .all(|(size, most)| *size <= most);
        if invocations > u64::from(most) || !fits_axes {
            return Err(Error::unsupported(format!(
                "kernel `{symbol}` asks for workgroups of {}x{}x{} ({invocations} invocations), but {} runs it with at \
                 most {most} (and at most {:?} per axis)",
                workgroup_size[0], workgroup_size[1], workgroup_size[2], info.name, info.max_workgroup_size
            )));
        }
        Ok(Description {
            parameters,
            workgroup_size,
        })
    }
}

struct Description {
    parameters: Vec<Parameter>,
    workgroup_size: [u32; 3],
}

/// One parameter of a kernel.
#[derive(Debug, Clone)]
pub(crate) struct Parameter {
    class: ParameterClass,
    /// For messages: the declaration, or the metadata's name and kind.
    description: String,
    /// The size in bytes, where the metadata or the source says.
    size: Option<u64>,
}

/// One kernel of a module.
pub struct KernelObject {
    pub(crate) module: Arc<Object<Module>>,
    pub(crate) function: HipFunction,
    pub(crate) name: String,
    pub(crate) workgroup_size: [u32; 3],
    parameters: Vec<Parameter>,
}

// A kernel function handle may be launched from any thread; the module outlives it.
// SAFETY: see above.
unsafe impl Send for KernelObject {}
// SAFETY: see above.
unsafe impl Sync for KernelObject {}

/// When the size of a kernel's scalar block is not known host-side, the block is passed in a
/// zeroed area this large (the largest scalar block a device reports), so that HIP, which
/// copies as many bytes as the kernel's parameter has, never reads past it.
pub(crate) const UNSIZED_SCALAR_AREA: usize = 1024;

impl KernelObject {
    /// Checks a launch's arguments against the parameters, host-side.
    pub(crate) fn check_arguments(&self, buffers: usize, scalars: &[u8]) -> Result<()> {
        let name = &self.name;
        let expected: Vec<&Parameter> = self
            .parameters
            .iter()
            .filter(|parameter| parameter.class == ParameterClass::Buffer)
            .collect();
        if buffers != expected.len() {
            let list: Vec<&str> = expected
                .iter()
                .map(|parameter| parameter.description.as_str())
                .collect();
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
        let scalar = self
            .parameters
            .iter()
            .find(|parameter| parameter.class == ParameterClass::Value);
        match (scalar, scalars.len()) {
            (None, 0) => Ok(()),
            (None, given) => Err(Error::invalid_argument(format!(
                "kernel `{name}` takes no scalars (it has no by-value parameter), but a {given}-byte scalar block was given"
            ))),
            (Some(parameter), 0) => Err(Error::invalid_argument(format!(
                "kernel `{name}` takes the scalar block {}, but no scalars were given",
                parameter.description
            ))),
            (Some(parameter), given) => match parameter.size {
                Some(size) if size != given as u64 => Err(Error::invalid_argument(format!(
                    "kernel `{name}` takes the scalar block {} of {size} bytes, but {given} bytes were given",
                    parameter.description
                ))),
                None if given > UNSIZED_SCALAR_AREA => Err(Error::invalid_argument(format!(
                    "kernel `{name}`: a {given}-byte scalar block is larger than the {UNSIZED_SCALAR_AREA} bytes a \
                     scalar block may have"
                ))),
                _ => Ok(()),
            },
        }
    }

    /// Whether the size of the kernel's scalar block is known host-side; where it is not,
    /// the block is passed in an area of [`UNSIZED_SCALAR_AREA`] bytes.
    pub(crate) fn scalar_size_known(&self) -> bool {
        self.parameters
            .iter()
            .any(|parameter| parameter.class == ParameterClass::Value && parameter.size.is_some())
    }

    /// Whether the kernel declares the buffer-lengths parameter.
    pub(crate) fn takes_lengths(&self) -> bool {
        self.parameters
            .iter()
            .any(|parameter| parameter.class == ParameterClass::Lengths)
    }
}

/// The buffer-lengths block: one 64-bit length per buffer view, in the host's byte order as
/// the scalar block; at least one entry (zero where there are no buffers).
pub(crate) fn lengths_block(sizes: impl Iterator<Item = u64>) -> Vec<u8> {
    let mut block: Vec<u8> = sizes.flat_map(u64::to_ne_bytes).collect();
    if block.is_empty() {
        block.resize(8, 0);
    }
    block
}

/// The emitter's buffer-lengths struct holds one 64-bit length per buffer parameter, and one
/// when there are none; refuses a kernel whose parameter (where its size is known) holds
/// another number, since the launch would pass a block of the wrong size.
fn check_lengths_size(name: &str, lengths: &Parameter, buffers: usize) -> Result<()> {
    let expected = 8 * buffers.max(1) as u64;
    match lengths.size {
        Some(size) if size != expected => Err(Error::invalid_argument(format!(
            "kernel `{name}` does not follow the xhal argument ABI: its buffer-lengths parameter {} has {size} bytes, \
             but with {buffers} buffer parameter(s) it must hold {} 64-bit length(s), {expected} bytes",
            lengths.description,
            buffers.max(1)
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parameter(class: ParameterClass, size: Option<u64>) -> Parameter {
        Parameter {
            class,
            description: format!("`{class:?}`"),
            size,
        }
    }

    #[test]
    fn the_lengths_parameter_holds_one_length_per_buffer() {
        let lengths = parameter(ParameterClass::Lengths, Some(16));
        assert!(check_lengths_size("k", &lengths, 2).is_ok());
        let wrong = check_lengths_size("k", &lengths, 3).unwrap_err();
        assert!(wrong.message().contains("24 bytes"), "{wrong}");
    }

    #[test]
    fn the_lengths_block_holds_one_u64_per_buffer() {
        let block = lengths_block([16u64, 4].into_iter());
        assert_eq!(block.len(), 16);
        assert_eq!(block[..8], 16u64.to_ne_bytes());
        assert_eq!(lengths_block(std::iter::empty()), vec![0; 8]);
    }
}
