//! Modules from PTX, cubin or CUDA C (through NVRTC), their kernels, and the checks of a
//! launch's arguments against a kernel's parameters (the launch itself is the stream's).
//!
//! The argument ABI on CUDA: buffer argument `i` is pointer parameter `i`, given the view's
//! device address (the buffer's base plus the view's offset); the scalar block, when the
//! kernel has scalars, is one more by-value parameter; a kernel emitted from WGSL may end with
//! the by-value buffer-lengths parameter (`xh_lengths_<entry>`: one `u64` per buffer, the byte
//! length of each bound view), which the backend fills. Parameters are checked before a
//! launch against the CUDA C signature where the module came as source, and against the
//! driver's parameter sizes (`cuFuncGetParamInfo`, CUDA 12.4 drivers and later) otherwise.

use crate::device::Gpu;
use crate::ffi::{self, call, raw_call, sys, CUfunction, CUmodule, CUresult};
use crate::nvrtc;
use crate::reflect::{builtin_size, reflect_ptx, reflect_source, SourceReflection};
use crate::CudaDriver;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::Arc;
use xhal_backend::{DriverKernel, DriverModule, Error, KernelFormat, Object, Result};
use xhal_kernel::c::c_symbol;
use xhal_kernel::c_signature::CParameter;
use xhal_kernel::parameters::{check_parameter_order, ParameterClass};

/// A loaded module.
pub struct Module {
    pub(crate) gpu: Arc<Gpu>,
    raw: CUmodule,
    /// From CUDA C source: each kernel's parameters and workgroup size.
    source: Option<SourceReflection>,
    /// From PTX: the entries and the `.reqntid` they declare.
    ptx_entries: Vec<String>,
    ptx_sizes: HashMap<String, [u32; 3]>,
}

// A loaded module may be used from any thread (with its context current).
// SAFETY: see above.
unsafe impl Send for Module {}
// SAFETY: see above.
unsafe impl Sync for Module {}

impl Drop for Module {
    fn drop(&mut self) {
        let _ = self.gpu.bind();
        let raw = self.raw;
        // SAFETY: this backend's module; kernels hold it, so none is left.
        let _ = call("cuModuleUnload", ffi::quiet, || unsafe { sys::cuModuleUnload(raw) });
    }
}

/// Bytes of the JIT's error log kept when loading fails.
const JIT_LOG_BYTES: usize = 16 << 10;

/// `cuModuleLoadDataEx` with the JIT's error log, which a failure carries.
fn load_image(gpu: &Gpu, format: KernelFormat, image: &[u8]) -> Result<CUmodule> {
    let mut raw: CUmodule = std::ptr::null_mut();
    let mut log = vec![0u8; JIT_LOG_BYTES];
    let mut options = [
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
    ];
    // The size travels in the pointer-sized slot itself, as the driver API defines it.
    let mut values = [log.as_mut_ptr().cast::<c_void>(), JIT_LOG_BYTES as *mut c_void];
    // SAFETY: a NUL-terminated PTX text or a whole cubin, which the driver copies; two options
    // whose values are a log buffer and its size.
    let code = raw_call("cuModuleLoadDataEx", || unsafe {
        sys::cuModuleLoadDataEx(
            &mut raw,
            image.as_ptr().cast(),
            options.len() as u32,
            options.as_mut_ptr(),
            values.as_mut_ptr(),
        )
    })?;
    if code == CUresult::CUDA_SUCCESS {
        return Ok(raw);
    }
    let error = ffi::cuda_error("cuModuleLoadDataEx", code, || {
        format!("loading a {format} module on {}", gpu.name())
    });
    let text: Vec<u8> = log.iter().take_while(|&&byte| byte != 0).copied().collect();
    let text = String::from_utf8_lossy(&text);
    Err(if text.trim().is_empty() {
        error
    } else {
        Error::new(
            error.kind(),
            format!("{}; JIT log:\n{}", error.message(), text.trim_end()),
        )
    })
}

/// An ELF file (a cubin) or a fat binary.
fn is_cubin(code: &[u8]) -> bool {
    code.starts_with(b"\x7fELF") || code.starts_with(&0xBA55_ED50u32.to_le_bytes())
}

impl DriverModule<CudaDriver> for Arc<Module> {
    fn load(
        _driver: &CudaDriver,
        device: &Arc<Object<Arc<Gpu>>>,
        format: KernelFormat,
        code: &[u8],
    ) -> Result<Arc<Module>> {
        let gpu: &Arc<Gpu> = device;
        let adapter = gpu.adapter();
        let mut source = None;
        let mut ptx_entries = Vec::new();
        let mut ptx_sizes = HashMap::new();
        let image: Vec<u8> = if format == KernelFormat::CUDA_C {
            let text =
                std::str::from_utf8(code).map_err(|_| Error::invalid_argument("CUDA C source is not valid UTF-8"))?;
            source = Some(reflect_source(text));
            let compiled = nvrtc::compile(text, adapter.compute_capability, gpu.name())?;
            tracing::debug!(architecture = %compiled.architecture, bytes = compiled.image.len(), "NVRTC compiled a module");
            compiled.image
        } else if format == KernelFormat::PTX {
            let text = std::str::from_utf8(code.strip_suffix(&[0]).unwrap_or(code))
                .map_err(|_| Error::invalid_argument("PTX is text, but this module is not valid UTF-8"))?;
            if !text.contains(".version") || text.contains('\0') {
                return Err(Error::invalid_argument(
                    "invalid PTX: no `.version` directive (PTX modules are text starting with `.version`), or a NUL \
                     byte inside",
                ));
            }
            (ptx_entries, ptx_sizes) = reflect_ptx(text);
            let mut image = text.as_bytes().to_vec();
            image.push(0);
            image
        } else if format == KernelFormat::CUBIN {
            if !is_cubin(code) {
                return Err(Error::invalid_argument(format!(
                    "invalid cubin: {} bytes that are neither an ELF file nor a fat binary",
                    code.len()
                )));
            }
            code.to_vec()
        } else {
            let accepted: Vec<String> = adapter.info.kernel_formats.iter().map(|format| format.name()).collect();
            return Err(Error::unsupported(format!(
                "the CUDA backend does not load {format} modules; {} accepts: {}",
                gpu.name(),
                accepted.join(", ")
            )));
        };
        gpu.bind()?;
        let raw = load_image(gpu, format, &image)?;
        Ok(Arc::new(Module {
            gpu: Arc::clone(gpu),
            raw,
            source,
            ptx_entries,
            ptx_sizes,
        }))
    }
}

impl Module {
    fn known_kernels(&self) -> Vec<String> {
        let mut names: Vec<String> = match &self.source {
            Some(source) => source.kernels.keys().cloned().collect(),
            None => self.ptx_entries.clone(),
        };
        names.sort();
        names
    }

    /// The device global `<symbol>__workgroup_size`, where the module defines one.
    fn declared_workgroup_size(&self, symbol: &str) -> Result<Option<[u32; 3]>> {
        let Ok(global) = CString::new(format!("{symbol}__workgroup_size")) else {
            return Ok(None);
        };
        let (mut address, mut bytes): (sys::CUdeviceptr, usize) = (0, 0);
        let raw = self.raw;
        // SAFETY: a lookup by NUL-terminated name in a loaded module.
        match raw_call("cuModuleGetGlobal_v2", || unsafe {
            sys::cuModuleGetGlobal_v2(&mut address, &mut bytes, raw, global.as_ptr())
        })? {
            CUresult::CUDA_SUCCESS => {}
            CUresult::CUDA_ERROR_NOT_FOUND => return Ok(None),
            code => return Err(ffi::cuda_error("cuModuleGetGlobal_v2", code, || format!("{global:?}"))),
        }
        if bytes != 12 {
            return Err(Error::invalid_argument(format!(
                "`{symbol}__workgroup_size` has {bytes} bytes; it must be three 32-bit unsigned integers"
            )));
        }
        let mut size = [0u32; 3];
        call(
            "cuMemcpyDtoH_v2",
            || format!("reading `{symbol}__workgroup_size`"),
            // SAFETY: 12 bytes from a device global of 12 bytes into a 12-byte array.
            || unsafe { sys::cuMemcpyDtoH_v2(size.as_mut_ptr().cast::<c_void>(), address, 12) },
        )?;
        Ok(Some(size))
    }
}

impl DriverKernel<CudaDriver> for KernelObject {
    /// Finds kernel `name` (a WGSL entry point's, under `c_symbol(name)`, or a native one).
    fn get(_driver: &CudaDriver, module: &Arc<Object<Arc<Module>>>, name: &str) -> Result<KernelObject> {
        let module: &Arc<Module> = module;
        let symbol = c_symbol(name);
        let mut candidates = vec![symbol.clone()];
        if symbol != name {
            candidates.push(name.to_string());
        }
        module.gpu.bind()?;
        let mut found = None;
        for candidate in &candidates {
            let Ok(c_name) = CString::new(candidate.as_str()) else {
                return Err(Error::invalid_argument(format!(
                    "kernel name {name:?} contains a NUL byte"
                )));
            };
            let mut function: CUfunction = std::ptr::null_mut();
            let raw = module.raw;
            // SAFETY: a lookup by NUL-terminated name in a loaded module.
            match raw_call("cuModuleGetFunction", || unsafe {
                sys::cuModuleGetFunction(&mut function, raw, c_name.as_ptr())
            })? {
                CUresult::CUDA_SUCCESS => {
                    found = Some((candidate.clone(), function));
                    break;
                }
                CUresult::CUDA_ERROR_NOT_FOUND => continue,
                code => {
                    return Err(ffi::cuda_error("cuModuleGetFunction", code, || {
                        format!("looking up kernel `{candidate}`")
                    }))
                }
            }
        }
        let Some((symbol_found, function)) = found else {
            let names = module.known_kernels();
            let also = if symbol != name {
                format!(" (nor `{symbol}`, the C name of WGSL entry point `{name}`)")
            } else {
                String::new()
            };
            return Err(Error::not_found(format!(
                "the module has no kernel `{name}`{also}; it has: {}",
                if names.is_empty() {
                    "none that the host can list (kernels must be extern \"C\")".to_string()
                } else {
                    names.join(", ")
                }
            )));
        };
        let source_kernel = module
            .source
            .as_ref()
            .and_then(|source| source.kernels.get(&symbol_found).cloned());
        let workgroup_size = match source_kernel.as_ref().and_then(|kernel| kernel.workgroup_size) {
            Some(size) => size,
            None => match module.declared_workgroup_size(&symbol_found)? {
                Some(size) => size,
                None => module.ptx_sizes.get(&symbol_found).copied().ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "kernel `{symbol_found}` declares no workgroup size: an xhal launch counts workgroups of a fixed \
                         size, so a CUDA module must give it, as a device global `unsigned int \
                         {symbol_found}__workgroup_size[3]`, or in PTX as `.reqntid X, Y, Z` (CUDA C from WGSL gives \
                         it by itself)"
                    ))
                })?,
            },
        };
        // `cuFuncGetParamInfo` came with CUDA 12.4 drivers; older ones do not export it.
        let parameter_sizes = if module.gpu.adapter().driver_version >= 12040 {
            parameter_sizes(function)
        } else {
            None
        };
        let object = KernelObject {
            module: Arc::clone(module),
            function,
            name: symbol_found,
            workgroup_size,
            parameters: source_kernel.map(|kernel| kernel.parameters),
            parameter_sizes,
        };
        object.check_shape()?;
        if let Some(parameters) = &object.parameters {
            check_parameter_order(
                &object.name,
                parameters
                    .iter()
                    .map(|parameter| (parameter.class, parameter.describe())),
            )
            .map_err(|error| Error::invalid_argument(error.message()))?;
        }
        Ok(object)
    }
}

/// The byte size of every parameter, from `cuFuncGetParamInfo` (CUDA 12.4 drivers and later);
/// `None` where the driver cannot tell.
fn parameter_sizes(function: CUfunction) -> Option<Vec<usize>> {
    let mut sizes = Vec::new();
    for index in 0..1024usize {
        let (mut offset, mut size) = (0usize, 0usize);
        // SAFETY: writes two sizes for a parameter index of a live function.
        match raw_call("cuFuncGetParamInfo", || unsafe {
            sys::cuFuncGetParamInfo(function, index, &mut offset, &mut size)
        }) {
            Ok(CUresult::CUDA_SUCCESS) => sizes.push(size),
            Ok(CUresult::CUDA_ERROR_INVALID_VALUE) => return Some(sizes),
            _ => return None,
        }
    }
    None
}

/// One kernel of a module.
pub struct KernelObject {
    pub(crate) module: Arc<Module>,
    pub(crate) function: CUfunction,
    pub(crate) name: String,
    pub(crate) workgroup_size: [u32; 3],
    /// From the CUDA C signature, where the module came as source.
    parameters: Option<Vec<CParameter>>,
    /// From the driver, where it tells.
    parameter_sizes: Option<Vec<usize>>,
}

// A CUfunction may be used from any thread; launches take no shared mutable state.
// SAFETY: see above.
unsafe impl Send for KernelObject {}
// SAFETY: see above.
unsafe impl Sync for KernelObject {}

impl KernelObject {
    /// Refuses a workgroup the device or this kernel cannot run.
    fn check_shape(&self) -> Result<()> {
        let gpu = &self.module.gpu;
        let info = &gpu.adapter().info;
        let size = self.workgroup_size;
        let name = &self.name;
        if size.contains(&0) {
            return Err(Error::invalid_argument(format!(
                "kernel `{name}` declares a workgroup of {}x{}x{}; every dimension needs at least 1",
                size[0], size[1], size[2]
            )));
        }
        for axis in 0..3 {
            if size[axis] > info.max_workgroup_size[axis] {
                return Err(Error::unsupported(format!(
                    "kernel `{name}` asks for workgroups of {} in {}, but {} allows at most {}",
                    size[axis],
                    ["x", "y", "z"][axis],
                    info.name,
                    info.max_workgroup_size[axis]
                )));
            }
        }
        let invocations = u64::from(size[0]) * u64::from(size[1]) * u64::from(size[2]);
        let mut most: i32 = 0;
        let function = self.function;
        call(
            "cuFuncGetAttribute",
            || format!("reading the largest block of kernel `{name}`"),
            // SAFETY: writes one int for a live function.
            || unsafe {
                sys::cuFuncGetAttribute(
                    &mut most,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                    function,
                )
            },
        )?;
        if invocations > u64::try_from(most).unwrap_or(0) {
            return Err(Error::unsupported(format!(
                "kernel `{name}` asks for workgroups of {}x{}x{} ({invocations} invocations), but {} runs it with at most \
                 {most} (CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: its registers and shared memory limit it)",
                size[0], size[1], size[2], info.name
            )));
        }
        Ok(())
    }

    /// Checks a launch's arguments against what is known of the parameters; returns the size
    /// of the scalar parameter where known, and whether the kernel takes the lengths block.
    pub(crate) fn check_arguments(&self, buffers: usize, scalars: &[u8]) -> Result<(Option<usize>, bool)> {
        let name = &self.name;
        let Some(parameters) = &self.parameters else {
            // PTX or cubin: the driver's parameter sizes are all there is.
            let expected = buffers + usize::from(!scalars.is_empty());
            let Some(sizes) = &self.parameter_sizes else {
                return Ok((None, false));
            };
            if sizes.len() != expected {
                return Err(Error::invalid_argument(format!(
                    "kernel `{name}` has {} parameter(s), but the launch passes {buffers} buffer(s){}",
                    sizes.len(),
                    if scalars.is_empty() {
                        String::new()
                    } else {
                        " and a scalar block".to_string()
                    }
                )));
            }
            if let Some(&pointer) = sizes[..buffers].iter().find(|&&size| size != 8) {
                return Err(Error::invalid_argument(format!(
                    "kernel `{name}`: a buffer argument binds a parameter of {pointer} bytes, not a 64-bit pointer"
                )));
            }
            let scalar = sizes.get(buffers).copied();
            if let Some(size) = scalar {
                if size != scalars.len() {
                    return Err(Error::invalid_argument(format!(
                        "kernel `{name}` takes a scalar block of {size} bytes, but {} bytes were given",
                        scalars.len()
                    )));
                }
            }
            return Ok((scalar, false));
        };
        let expected: Vec<&CParameter> = parameters
            .iter()
            .filter(|parameter| parameter.class == ParameterClass::Buffer)
            .collect();
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
        let lengths = parameters
            .iter()
            .any(|parameter| parameter.class == ParameterClass::Lengths);
        let scalar = parameters
            .iter()
            .position(|parameter| parameter.class == ParameterClass::Value);
        match (scalar, scalars.len()) {
            (None, 0) => Ok((None, lengths)),
            (None, given) => Err(Error::invalid_argument(format!(
                "kernel `{name}` takes no scalars (it has no by-value parameter), but a {given}-byte scalar block was given"
            ))),
            (Some(index), 0) => Err(Error::invalid_argument(format!(
                "kernel `{name}` takes the scalar block {}, but no scalars were given",
                parameters[index].describe()
            ))),
            (Some(index), given) => {
                let parameter = &parameters[index];
                let size = self
                    .parameter_sizes
                    .as_ref()
                    .and_then(|sizes| sizes.get(index).copied())
                    .or_else(|| {
                        self.module
                            .source
                            .as_ref()
                            .and_then(|source| source.struct_sizes.get(parameter.type_name.trim()).copied())
                    })
                    .or_else(|| builtin_size(&parameter.type_name));
                match size {
                    Some(size) if size != given => Err(Error::invalid_argument(format!(
                        "kernel `{name}` takes the scalar block {} of {size} bytes, but {given} bytes were given",
                        parameter.describe()
                    ))),
                    _ => Ok((size, lengths)),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cubins_are_elf_or_fat_binaries() {
        assert!(is_cubin(b"\x7fELF\x02\x01"));
        assert!(is_cubin(&0xBA55_ED50u32.to_le_bytes()));
        assert!(!is_cubin(b".version 8.0"));
    }
}
