//! Programs from OpenCL C source (or SPIR-V where the device takes IL), their kernels, the
//! kernels' parameters as the argument ABI reads them, and launches.
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

use crate::ffi::{self, ClUint, Kernel, Program};
use crate::gpu::{DeviceBuffer, Gpu};
use crate::layout::{builtin_size, struct_layouts, Layout};
use crate::stream::Stream;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::Arc;
use xhal_core::kernel::c::c_symbol;
use xhal_core::{BufferArg, Error, KernelFormat, Result};

/// Options every OpenCL C program is built with: keep parameter names and types, so
/// arguments can be checked before a launch.
const SOURCE_BUILD_OPTIONS: &std::ffi::CStr = c"-cl-kernel-arg-info";

/// A built program.
pub(crate) struct Module {
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

impl Module {
    /// Creates and builds a program from `code` in `format`.
    pub(crate) fn load(gpu: &Arc<Gpu>, format: KernelFormat, code: &[u8]) -> Result<Module> {
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
        Ok(module)
    }

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
    fn type_size(&self, type_name: &str) -> Option<usize> {
        let name = type_name.trim();
        builtin_size(name).or_else(|| {
            let name = name.strip_prefix("struct ").unwrap_or(name).trim();
            self.layouts.get(name).map(|layout| layout.size)
        })
    }

    /// Creates kernel `name` and reads its parameters and workgroup size. `name` is a WGSL
    /// entry point's name, found under the symbol the C emitter gives it (`c_symbol`), or the
    /// name of a kernel of native OpenCL C.
    pub(crate) fn kernel(self: &Arc<Module>, name: &str) -> Result<KernelObject> {
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
        for candidate in &candidates {
            // SAFETY: a built program and a NUL-terminated name.
            kernel = unsafe { (self.gpu.api().create_kernel)(self.program, candidate.as_ptr(), &mut status) };
            if status != ffi::CL_INVALID_KERNEL_NAME {
                break;
            }
        }
        if status == ffi::CL_INVALID_KERNEL_NAME {
            let names = self.kernel_names();
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
        let mut object = KernelObject {
            module: Arc::clone(self),
            kernel: Mutex::new(kernel),
            name: name.to_string(),
            workgroup_size: [1; 3],
            parameters: Vec::new(),
            argument_count: 0,
        };
        object.reflect()?;
        Ok(object)
    }
}

/// How a kernel parameter is passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ParameterKind {
    /// A `__global` or `__constant` pointer: a buffer argument.
    Buffer,
    /// A `__local` pointer, which the argument ABI has no place for.
    Local,
    /// A by-value parameter: the scalar block.
    Value,
    /// The by-value buffer-lengths parameter of a kernel emitted from WGSL (its type is a
    /// struct named `xh_lengths_*`), filled by the backend.
    Lengths,
}

/// Whether a by-value parameter of type `type_name` is the buffer-lengths parameter the C
/// emitter writes (`xh_lengths_<entry> lengths`); the `xh_` prefix is the emitter's own.
fn is_lengths_type(type_name: &str) -> bool {
    let name = type_name.trim();
    name.strip_prefix("struct ")
        .unwrap_or(name)
        .trim()
        .starts_with("xh_lengths_")
}

/// One parameter, as `clGetKernelArgInfo` describes it.
#[derive(Debug, Clone)]
struct Parameter {
    kind: ParameterKind,
    name: String,
    type_name: String,
}

impl Parameter {
    fn describe(&self) -> String {
        format!("`{} {}`", self.type_name, self.name)
    }
}

/// One kernel of a module.
pub(crate) struct KernelObject {
    module: Arc<Module>,
    /// Arguments are set and the launch enqueued under this lock: a kernel's arguments are
    /// state shared by every thread using it.
    kernel: Mutex<Kernel>,
    name: String,
    /// From `reqd_work_group_size`.
    workgroup_size: [usize; 3],
    /// Empty where the program kept no argument information (SPIR-V without it).
    parameters: Vec<Parameter>,
    argument_count: u32,
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

impl KernelObject {
    pub(crate) fn gpu(&self) -> &Arc<Gpu> {
        &self.module.gpu
    }

    fn raw(&self) -> Kernel {
        *self.kernel.lock()
    }

    /// Reads the parameter list and the workgroup size, and refuses kernels that do not
    /// follow the argument ABI or declare no workgroup size.
    fn reflect(&mut self) -> Result<()> {
        let api = self.module.gpu.api();
        let kernel = self.raw();
        let device = self.module.gpu.adapter().device;
        let name = self.name.clone();
        // SAFETY: a cl_uint parameter of a live kernel.
        self.argument_count =
            unsafe { ffi::info_value::<ClUint>(ffi::query_of(api.get_kernel_info, kernel, ffi::CL_KERNEL_NUM_ARGS)) }
                .map_err(|code| ffi::cl_error(format!("counting the parameters of kernel `{name}`"), code))?;
        let mut parameters = Vec::new();
        for index in 0..self.argument_count {
            let arg_info = |parameter: ClUint| {
                move |size, value, size_ret| {
                    // SAFETY: an argument-info parameter of a live kernel's parameter `index`.
                    unsafe { (api.get_kernel_arg_info)(kernel, index, parameter, size, value, size_ret) }
                }
            };
            // SAFETY: the address qualifier is a cl_uint.
            let qualifier = match unsafe { ffi::info_value::<ClUint>(arg_info(ffi::CL_KERNEL_ARG_ADDRESS_QUALIFIER)) } {
                Ok(qualifier) => qualifier,
                Err(ffi::CL_KERNEL_ARG_INFO_NOT_AVAILABLE) => {
                    parameters.clear();
                    break;
                }
                Err(code) => {
                    return Err(ffi::cl_error(
                        format!("reading parameter {index} of kernel `{name}`"),
                        code,
                    ))
                }
            };
            // SAFETY: string parameters of the same argument.
            let text =
                |parameter| unsafe { ffi::info_bytes(arg_info(parameter)) }.map(|bytes| ffi::info_string(&bytes));
            let type_name = text(ffi::CL_KERNEL_ARG_TYPE_NAME).unwrap_or_else(|_| "?".to_string());
            let kind = match qualifier {
                ffi::CL_KERNEL_ARG_ADDRESS_GLOBAL | ffi::CL_KERNEL_ARG_ADDRESS_CONSTANT => ParameterKind::Buffer,
                ffi::CL_KERNEL_ARG_ADDRESS_LOCAL => ParameterKind::Local,
                _ if is_lengths_type(&type_name) => ParameterKind::Lengths,
                _ => ParameterKind::Value,
            };
            parameters.push(Parameter {
                kind,
                name: text(ffi::CL_KERNEL_ARG_NAME).unwrap_or_else(|_| format!("parameter{index}")),
                type_name,
            });
        }
        check_parameter_order(&name, &parameters)?;
        if let Some(lengths) = parameters
            .iter()
            .find(|parameter| parameter.kind == ParameterKind::Lengths)
        {
            let buffers = parameters
                .iter()
                .filter(|parameter| parameter.kind == ParameterKind::Buffer)
                .count();
            check_lengths_size(&name, lengths, buffers, self.module.type_size(&lengths.type_name))?;
        }
        self.parameters = parameters;

        let work_group_info = |parameter: ClUint| {
            move |size, value, size_ret| {
                // SAFETY: a work-group parameter of a live kernel on its device.
                unsafe { (api.get_kernel_work_group_info)(kernel, device, parameter, size, value, size_ret) }
            }
        };
        // SAFETY: CL_KERNEL_COMPILE_WORK_GROUP_SIZE is a size_t[3].
        let size = unsafe { ffi::info_value::<[usize; 3]>(work_group_info(ffi::CL_KERNEL_COMPILE_WORK_GROUP_SIZE)) }
            .map_err(|code| ffi::cl_error(format!("reading the workgroup size of kernel `{name}`"), code))?;
        if size.contains(&0) {
            return Err(Error::invalid_argument(format!(
                "kernel `{name}` declares no workgroup size: an xhal launch counts workgroups of a fixed size, so an \
                 OpenCL C kernel must declare it with __attribute__((reqd_work_group_size(X, Y, Z)))"
            )));
        }
        // SAFETY: CL_KERNEL_WORK_GROUP_SIZE is a size_t.
        let most = unsafe { ffi::info_value::<usize>(work_group_info(ffi::CL_KERNEL_WORK_GROUP_SIZE)) }
            .map_err(|code| ffi::cl_error(format!("reading the largest workgroup of kernel `{name}`"), code))?;
        let invocations = size[0] * size[1] * size[2];
        if invocations > most {
            // SAFETY: CL_KERNEL_LOCAL_MEM_SIZE is a cl_ulong.
            let local = unsafe { ffi::info_value::<u64>(work_group_info(ffi::CL_KERNEL_LOCAL_MEM_SIZE)) }.unwrap_or(0);
            return Err(Error::unsupported(format!(
                "kernel `{name}` asks for workgroups of {}x{}x{} ({invocations} invocations), but {} runs it with at \
                 most {most} (CL_KERNEL_WORK_GROUP_SIZE; it uses {local} bytes of local memory)",
                size[0],
                size[1],
                size[2],
                self.module.gpu.name()
            )));
        }
        self.workgroup_size = size;
        Ok(())
    }

    /// Checks a launch's arguments against the parameters, host-side.
    fn check_arguments(&self, buffers: usize, scalars: &[u8]) -> Result<()> {
        let name = &self.name;
        if self.parameters.is_empty() {
            // No argument information: only the count can be checked.
            let given = buffers + usize::from(!scalars.is_empty());
            if given != self.argument_count as usize {
                return Err(Error::invalid_argument(format!(
                    "kernel `{name}` has {} parameter(s), but the launch passes {buffers} buffer(s){}",
                    self.argument_count,
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
            .parameters
            .iter()
            .filter(|parameter| parameter.kind == ParameterKind::Buffer)
            .collect();
        // The lengths parameter is not the caller's: the backend fills it.
        let scalar = self
            .parameters
            .iter()
            .find(|parameter| parameter.kind == ParameterKind::Value);
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

    /// Sets the arguments and enqueues the NDRange on `stream`.
    pub(crate) fn launch(
        &self,
        stream: &Stream,
        workgroups: [u32; 3],
        buffers: &[(Arc<DeviceBuffer>, BufferArg)],
        scalars: &[u8],
    ) -> Result<()> {
        let name = &self.name;
        self.check_arguments(buffers.len(), scalars)?;
        let adapter = self.module.gpu.adapter();
        let mut global = [0usize; 3];
        for axis in 0..3 {
            let count = workgroups[axis];
            if count == 0 {
                return Err(Error::invalid_argument(format!(
                    "kernel `{name}`: workgroup count in {} is 0; every dimension needs at least 1",
                    ["x", "y", "z"][axis]
                )));
            }
            let items = u64::from(count) * self.workgroup_size[axis] as u64;
            let limit = if adapter.address_bits >= 64 {
                u64::MAX
            } else {
                (1u64 << adapter.address_bits) - 1
            };
            global[axis] = usize::try_from(items).ok().filter(|_| items <= limit).ok_or_else(|| {
                Error::invalid_argument(format!(
                    "kernel `{name}`: {count} workgroups of {} in {} are {items} work-items, more than {} addresses \
                     ({} bits)",
                    self.workgroup_size[axis],
                    ["x", "y", "z"][axis],
                    adapter.info.name,
                    adapter.address_bits
                ))
            })?;
        }
        let mut views = Vec::with_capacity(buffers.len());
        for (index, (buffer, argument)) in buffers.iter().enumerate() {
            views.push(buffer.view(
                argument.offset,
                argument.size,
                &format!("buffer argument {index} of kernel `{name}`"),
            )?);
        }
        let api = self.module.gpu.api();
        let kernel = self.kernel.lock();
        for (index, view) in views.iter().enumerate() {
            // SAFETY: a cl_mem argument, passed by address as OpenCL requires.
            let code = unsafe {
                (api.set_kernel_arg)(
                    *kernel,
                    index as ClUint,
                    std::mem::size_of::<ffi::Mem>(),
                    (&view.mem as *const ffi::Mem).cast(),
                )
            };
            ffi::check(code, || {
                format!(
                    "setting buffer argument {index} of kernel `{name}`{}",
                    self.parameter_name(index)
                )
            })?;
        }
        let mut index = views.len();
        if !scalars.is_empty() {
            // SAFETY: `scalars.len()` readable bytes; OpenCL copies them.
            let code =
                unsafe { (api.set_kernel_arg)(*kernel, index as ClUint, scalars.len(), scalars.as_ptr().cast()) };
            ffi::check(code, || {
                format!(
                    "setting the {}-byte scalar block as parameter {index} of kernel `{name}`{}",
                    scalars.len(),
                    self.parameter_name(index)
                )
            })?;
            index += 1;
        }
        if self.takes_lengths() {
            let lengths = lengths_block(buffers.iter().map(|(_, argument)| argument.size));
            // SAFETY: `lengths.len()` readable bytes; OpenCL copies them.
            let code =
                unsafe { (api.set_kernel_arg)(*kernel, index as ClUint, lengths.len(), lengths.as_ptr().cast()) };
            ffi::check(code, || {
                format!(
                    "setting the {}-byte buffer lengths as parameter {index} of kernel `{name}`{}",
                    lengths.len(),
                    self.parameter_name(index)
                )
            })?;
        }
        let local = self.workgroup_size;
        stream
            .enqueue(
                || {
                    format!(
                        "launching kernel `{name}` with {}x{}x{} workgroups of {}x{}x{}",
                        workgroups[0], workgroups[1], workgroups[2], local[0], local[1], local[2]
                    )
                },
                |queue, out| {
                    // SAFETY: every argument was set above, under the kernel's lock; the sizes
                    // are three-element arrays, as the work dimension says.
                    unsafe {
                        (api.enqueue_nd_range_kernel)(
                            queue,
                            *kernel,
                            3,
                            std::ptr::null(),
                            global.as_ptr(),
                            local.as_ptr(),
                            0,
                            std::ptr::null(),
                            out,
                        )
                    }
                },
            )
            .map(drop)
        // The views (and any sub-buffers) are released here; the enqueued launch holds them.
    }

    /// Whether the kernel declares the buffer-lengths parameter.
    fn takes_lengths(&self) -> bool {
        self.parameters
            .iter()
            .any(|parameter| parameter.kind == ParameterKind::Lengths)
    }

    fn parameter_name(&self, index: usize) -> String {
        self.parameters
            .get(index)
            .map(|parameter| format!(" ({})", parameter.describe()))
            .unwrap_or_default()
    }
}

/// The buffer-lengths block: one `ulong` per buffer view, the view's byte length, in the
/// host's byte order as the scalar block; at least one entry (zero where there are no buffers).
fn lengths_block(sizes: impl Iterator<Item = u64>) -> Vec<u8> {
    let mut block: Vec<u8> = sizes.flat_map(u64::to_ne_bytes).collect();
    if block.is_empty() {
        block.resize(8, 0);
    }
    block
}

/// The C emitter's buffer-lengths struct holds one `ulong` per buffer parameter, and one
/// when there are none; refuses a kernel whose struct (where the host can size it) holds
/// another number, since the launch would pass a block of the wrong size.
fn check_lengths_size(name: &str, lengths: &Parameter, buffers: usize, size: Option<usize>) -> Result<()> {
    let expected = 8 * buffers.max(1);
    match size {
        Some(size) if size != expected => Err(Error::invalid_argument(format!(
            "kernel `{name}` does not follow the xhal argument ABI: its buffer-lengths parameter {} has {size} bytes, \
             but with {buffers} buffer parameter(s) it must hold {} ulong(s), {expected} bytes",
            lengths.describe(),
            buffers.max(1)
        ))),
        _ => Ok(()),
    }
}

/// Buffers first, then at most one by-value parameter (the scalar block), then at most one
/// buffer-lengths parameter, and no `__local` pointers.
fn check_parameter_order(name: &str, parameters: &[Parameter]) -> Result<()> {
    let mut seen_value: Option<&Parameter> = None;
    let mut seen_lengths: Option<&Parameter> = None;
    for (index, parameter) in parameters.iter().enumerate() {
        if let Some(lengths) = seen_lengths {
            return Err(Error::invalid_argument(format!(
                "kernel `{name}` does not follow the xhal argument ABI: parameter {index} {} comes after the \
                 buffer-lengths parameter {}, which must be the last",
                parameter.describe(),
                lengths.describe()
            )));
        }
        match parameter.kind {
            ParameterKind::Local => {
                return Err(Error::invalid_argument(format!(
                    "kernel `{name}`: parameter {index} {} is a __local pointer, which the xhal argument ABI cannot \
                     pass; declare local memory inside the kernel",
                    parameter.describe()
                )))
            }
            ParameterKind::Lengths => seen_lengths = Some(parameter),
            ParameterKind::Buffer => {
                if let Some(value) = seen_value {
                    return Err(Error::invalid_argument(format!(
                        "kernel `{name}` does not follow the xhal argument ABI: buffer parameter {index} {} comes after \
                         the by-value parameter {}; buffers come first, then one scalar block",
                        parameter.describe(),
                        value.describe()
                    )));
                }
            }
            ParameterKind::Value => {
                if let Some(value) = seen_value {
                    return Err(Error::invalid_argument(format!(
                        "kernel `{name}` does not follow the xhal argument ABI: it has by-value parameters {} and {}; \
                         the scalars travel as one block, so gather them in one struct parameter",
                        value.describe(),
                        parameter.describe()
                    )));
                }
                seen_value = Some(parameter);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parameter(kind: ParameterKind, name: &str) -> Parameter {
        Parameter {
            kind,
            name: name.to_string(),
            type_name: "float*".to_string(),
        }
    }

    #[test]
    fn the_lengths_parameter_is_known_by_its_type() {
        assert!(is_lengths_type("xh_lengths_main_"));
        assert!(is_lengths_type("struct xh_lengths_fill"));
        assert!(!is_lengths_type("xh_s1_Params"));
        assert!(!is_lengths_type("lengths"));
    }

    #[test]
    fn the_lengths_parameter_comes_last_once() {
        let buffer = parameter(ParameterKind::Buffer, "x");
        let value = parameter(ParameterKind::Value, "scalars");
        let lengths = parameter(ParameterKind::Lengths, "lengths");
        // With or without a scalar block, with or without buffers.
        assert!(check_parameter_order("k", &[buffer.clone(), value.clone(), lengths.clone()]).is_ok());
        assert!(check_parameter_order("k", &[buffer.clone(), lengths.clone()]).is_ok());
        assert!(check_parameter_order("k", std::slice::from_ref(&lengths)).is_ok());
        for wrong in [
            vec![buffer.clone(), lengths.clone(), value.clone()],
            vec![lengths.clone(), buffer.clone()],
            vec![buffer, lengths.clone(), lengths.clone()],
        ] {
            let error = check_parameter_order("k", &wrong).unwrap_err();
            assert_eq!(error.kind(), xhal_core::ErrorKind::InvalidArgument);
            assert!(error.message().contains("must be the last"), "{error}");
        }
        let _ = value;
    }

    #[test]
    fn the_lengths_block_holds_one_ulong_per_buffer() {
        let block = lengths_block([16u64, 4].into_iter());
        assert_eq!(block.len(), 16);
        assert_eq!(block[..8], 16u64.to_ne_bytes());
        assert_eq!(block[8..], 4u64.to_ne_bytes());
        assert_eq!(lengths_block(std::iter::empty()), vec![0; 8]);
        let lengths = parameter(ParameterKind::Lengths, "lengths");
        assert!(check_lengths_size("k", &lengths, 2, Some(16)).is_ok());
        assert!(check_lengths_size("k", &lengths, 0, Some(8)).is_ok());
        assert!(check_lengths_size("k", &lengths, 2, None).is_ok());
        let error = check_lengths_size("k", &lengths, 3, Some(16)).unwrap_err();
        assert_eq!(error.kind(), xhal_core::ErrorKind::InvalidArgument);
        assert!(error.message().contains("24 bytes"), "{error}");
    }

    #[test]
    fn parameters_must_be_buffers_then_one_block() {
        let buffer = parameter(ParameterKind::Buffer, "x");
        let value = parameter(ParameterKind::Value, "p");
        let local = parameter(ParameterKind::Local, "scratch");
        assert!(check_parameter_order("k", &[buffer.clone(), buffer.clone(), value.clone()]).is_ok());
        assert!(check_parameter_order("k", &[]).is_ok());
        let late = check_parameter_order("k", &[value.clone(), buffer.clone()]).unwrap_err();
        assert!(late.message().contains("comes after"), "{late}");
        let two = check_parameter_order("k", &[value.clone(), value]).unwrap_err();
        assert!(two.message().contains("one struct"), "{two}");
        let local = check_parameter_order("k", &[buffer, local]).unwrap_err();
        assert!(local.message().contains("__local"), "{local}");
    }
}
