//! The slice of the OpenCL C API this backend calls, declared by hand and resolved from the
//! ICD loader at run time, so that nothing OpenCL is needed to build the crate.
//!
//! Every function is OpenCL 1.2 core, except `clCreateProgramWithIL` (2.1), which is
//! optional: where the loader lacks it, the `cl_khr_il_program` entry point is asked of the
//! platform instead, and where neither exists SPIR-V is simply not offered.

use std::ffi::{c_char, c_void};
use xhal_backend::ffi::LoadError;
use xhal_backend::{Error, ErrorKind, Result};

pub(crate) type ClInt = i32;
pub(crate) type ClUint = u32;
pub(crate) type ClBool = u32;
pub(crate) type ClBitfield = u64;

pub(crate) type PlatformId = *mut c_void;
pub(crate) type DeviceId = *mut c_void;
pub(crate) type Context = *mut c_void;
pub(crate) type CommandQueue = *mut c_void;
pub(crate) type Mem = *mut c_void;
pub(crate) type Program = *mut c_void;
pub(crate) type Kernel = *mut c_void;
pub(crate) type ClEventId = *mut c_void;

pub(crate) const CL_SUCCESS: ClInt = 0;
pub(crate) const CL_DEVICE_NOT_FOUND: ClInt = -1;
pub(crate) const CL_KERNEL_ARG_INFO_NOT_AVAILABLE: ClInt = -19;
pub(crate) const CL_INVALID_KERNEL_NAME: ClInt = -46;
pub(crate) const CL_PLATFORM_NOT_FOUND_KHR: ClInt = -1001;

pub(crate) const CL_TRUE: ClBool = 1;
pub(crate) const CL_FALSE: ClBool = 0;

pub(crate) const CL_PLATFORM_VERSION: ClUint = 0x0901;
pub(crate) const CL_PLATFORM_NAME: ClUint = 0x0902;
pub(crate) const CL_PLATFORM_VENDOR: ClUint = 0x0903;

pub(crate) const CL_DEVICE_TYPE_CPU: ClBitfield = 1 << 1;
pub(crate) const CL_DEVICE_TYPE_GPU: ClBitfield = 1 << 2;
pub(crate) const CL_DEVICE_TYPE_ACCELERATOR: ClBitfield = 1 << 3;
pub(crate) const CL_DEVICE_TYPE_ALL: ClBitfield = 0xFFFF_FFFF;

pub(crate) const CL_DEVICE_TYPE: ClUint = 0x1000;
pub(crate) const CL_DEVICE_VENDOR_ID: ClUint = 0x1001;
pub(crate) const CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS: ClUint = 0x1003;
pub(crate) const CL_DEVICE_MAX_WORK_GROUP_SIZE: ClUint = 0x1004;
pub(crate) const CL_DEVICE_MAX_WORK_ITEM_SIZES: ClUint = 0x1005;
pub(crate) const CL_DEVICE_ADDRESS_BITS: ClUint = 0x100D;
pub(crate) const CL_DEVICE_MAX_MEM_ALLOC_SIZE: ClUint = 0x1010;
pub(crate) const CL_DEVICE_MAX_PARAMETER_SIZE: ClUint = 0x1017;
pub(crate) const CL_DEVICE_MEM_BASE_ADDR_ALIGN: ClUint = 0x1019;
pub(crate) const CL_DEVICE_GLOBAL_MEM_SIZE: ClUint = 0x101F;
pub(crate) const CL_DEVICE_LOCAL_MEM_SIZE: ClUint = 0x1023;
pub(crate) const CL_DEVICE_AVAILABLE: ClUint = 0x1027;
pub(crate) const CL_DEVICE_COMPILER_AVAILABLE: ClUint = 0x1028;
pub(crate) const CL_DEVICE_QUEUE_PROPERTIES: ClUint = 0x102A;
pub(crate) const CL_DEVICE_NAME: ClUint = 0x102B;
pub(crate) const CL_DEVICE_VENDOR: ClUint = 0x102C;
pub(crate) const CL_DRIVER_VERSION: ClUint = 0x102D;
pub(crate) const CL_DEVICE_PROFILE: ClUint = 0x102E;
pub(crate) const CL_DEVICE_VERSION: ClUint = 0x102F;
pub(crate) const CL_DEVICE_EXTENSIONS: ClUint = 0x1030;
pub(crate) const CL_DEVICE_HOST_UNIFIED_MEMORY: ClUint = 0x1035;
pub(crate) const CL_DEVICE_IL_VERSION: ClUint = 0x105B;
pub(crate) const CL_DEVICE_UUID_KHR: ClUint = 0x106A;
pub(crate) const CL_DEVICE_SUB_GROUP_SIZES_INTEL: ClUint = 0x4108;
pub(crate) const CL_DEVICE_PCI_BUS_INFO_KHR: ClUint = 0x410F;

pub(crate) const CL_QUEUE_PROFILING_ENABLE: ClBitfield = 1 << 1;

pub(crate) const CL_MEM_READ_WRITE: ClBitfield = 1 << 0;
pub(crate) const CL_BUFFER_CREATE_TYPE_REGION: ClUint = 0x1220;

pub(crate) const CL_PROGRAM_KERNEL_NAMES: ClUint = 0x1168;
pub(crate) const CL_PROGRAM_BUILD_LOG: ClUint = 0x1183;

pub(crate) const CL_KERNEL_NUM_ARGS: ClUint = 0x1191;
pub(crate) const CL_KERNEL_ARG_ADDRESS_QUALIFIER: ClUint = 0x1196;
pub(crate) const CL_KERNEL_ARG_TYPE_NAME: ClUint = 0x1198;
pub(crate) const CL_KERNEL_ARG_NAME: ClUint = 0x119A;
pub(crate) const CL_KERNEL_ARG_ADDRESS_GLOBAL: ClUint = 0x119B;
pub(crate) const CL_KERNEL_ARG_ADDRESS_LOCAL: ClUint = 0x119C;
pub(crate) const CL_KERNEL_ARG_ADDRESS_CONSTANT: ClUint = 0x119D;

pub(crate) const CL_KERNEL_WORK_GROUP_SIZE: ClUint = 0x11B0;
pub(crate) const CL_KERNEL_COMPILE_WORK_GROUP_SIZE: ClUint = 0x11B1;
pub(crate) const CL_KERNEL_LOCAL_MEM_SIZE: ClUint = 0x11B2;

pub(crate) const CL_EVENT_COMMAND_EXECUTION_STATUS: ClUint = 0x11D3;
pub(crate) const CL_COMPLETE: ClInt = 0;

pub(crate) const CL_PROFILING_COMMAND_END: ClUint = 0x1283;

/// `cl_buffer_region`.
#[repr(C)]
pub(crate) struct BufferRegion {
    pub(crate) origin: usize,
    pub(crate) size: usize,
}

/// `cl_device_pci_bus_info_khr`.
#[repr(C)]
#[derive(Default)]
pub(crate) struct PciBusInfo {
    pub(crate) domain: ClUint,
    pub(crate) bus: ClUint,
    pub(crate) device: ClUint,
    pub(crate) function: ClUint,
}

/// `clCreateProgramWithIL` and `clCreateProgramWithILKHR` share this signature.
pub(crate) type CreateProgramWithIl = unsafe extern "system" fn(Context, *const c_void, usize, *mut ClInt) -> Program;

/// A `cl_command_buffer_khr`.
pub(crate) type CommandBuffer = *mut c_void;

/// `clCreateCommandBufferKHR`.
pub(crate) type CreateCommandBuffer =
    unsafe extern "system" fn(ClUint, *const CommandQueue, *const u64, *mut ClInt) -> CommandBuffer;
/// `clFinalizeCommandBufferKHR` and `clReleaseCommandBufferKHR`.
pub(crate) type CommandBufferCall = unsafe extern "system" fn(CommandBuffer) -> ClInt;
/// `clEnqueueCommandBufferKHR`.
pub(crate) type EnqueueCommandBuffer = unsafe extern "system" fn(
    ClUint,
    *mut CommandQueue,
    CommandBuffer,
    ClUint,
    *const ClEventId,
    *mut ClEventId,
) -> ClInt;
/// `clCommandCopyBufferKHR`.
pub(crate) type CommandCopyBuffer = unsafe extern "system" fn(
    CommandBuffer,
    CommandQueue,
    Mem,
    Mem,
    usize,
    usize,
    usize,
    ClUint,
    *const ClUint,
    *mut ClUint,
    *mut *mut c_void,
) -> ClInt;
/// `clCommandFillBufferKHR`.
pub(crate) type CommandFillBuffer = unsafe extern "system" fn(
    CommandBuffer,
    CommandQueue,
    Mem,
    *const c_void,
    usize,
    usize,
    usize,
    ClUint,
    *const ClUint,
    *mut ClUint,
    *mut *mut c_void,
) -> ClInt;
/// `clCommandNDRangeKernelKHR`.
pub(crate) type CommandNdRangeKernel = unsafe extern "system" fn(
    CommandBuffer,
    CommandQueue,
    *const u64,
    Kernel,
    ClUint,
    *const usize,
    *const usize,
    *const usize,
    ClUint,
    *const ClUint,
    *mut ClUint,
    *mut *mut c_void,
) -> ClInt;

/// `cl_khr_command_buffer`'s entry points (version 0.9, as the Khronos headers of this
/// platform declare them), found with `clGetExtensionFunctionAddressForPlatform`.
#[derive(Clone, Copy)]
pub(crate) struct CommandBufferApi {
    pub(crate) create: CreateCommandBuffer,
    pub(crate) finalize: CommandBufferCall,
    pub(crate) release: CommandBufferCall,
    pub(crate) enqueue: EnqueueCommandBuffer,
    pub(crate) copy: CommandCopyBuffer,
    pub(crate) fill: CommandFillBuffer,
    pub(crate) nd_range: CommandNdRangeKernel,
}

/// `CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR`.
pub(crate) const CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR: ClUint = 0x12A9;
/// `CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR`.
pub(crate) const CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR: ClUint = 0x12AA;
/// `CL_COMMAND_BUFFER_CAPABILITY_SIMULTANEOUS_USE_KHR`.
pub(crate) const CL_COMMAND_BUFFER_CAPABILITY_SIMULTANEOUS_USE_KHR: u64 = 1 << 2;
/// `CL_COMMAND_BUFFER_FLAGS_KHR`.
pub(crate) const CL_COMMAND_BUFFER_FLAGS_KHR: u64 = 0x1293;
/// `CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR`.
pub(crate) const CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR: u64 = 1;

/// The loader's file name.
pub(crate) const LOADER_LIBRARY: &str = "libOpenCL.so.1";

type InfoFn<T> = unsafe extern "system" fn(T, ClUint, usize, *mut c_void, *mut usize) -> ClInt;
type Notify = Option<unsafe extern "system" fn(*const c_char, *const c_void, usize, *mut c_void)>;
type BuildNotify = Option<unsafe extern "system" fn(Program, *mut c_void)>;

xhal_backend::function_table! {
    /// The OpenCL entry points, resolved from the loader (kept loaded for the life of the
    /// process: an ICD loader unloads its drivers when it goes, which is not safe while
    /// anything still runs).
    pub(crate) struct Api: extern "system";
    required {
        get_platform_ids = "clGetPlatformIDs": fn(ClUint, *mut PlatformId, *mut ClUint) -> ClInt;
        get_platform_info = "clGetPlatformInfo": fn(PlatformId, ClUint, usize, *mut c_void, *mut usize) -> ClInt;
        get_device_ids = "clGetDeviceIDs": fn(PlatformId, ClBitfield, ClUint, *mut DeviceId, *mut ClUint) -> ClInt;
        get_device_info = "clGetDeviceInfo": fn(DeviceId, ClUint, usize, *mut c_void, *mut usize) -> ClInt;
        create_context = "clCreateContext":
            fn(*const isize, ClUint, *const DeviceId, Notify, *mut c_void, *mut ClInt) -> Context;
        release_context = "clReleaseContext": fn(Context) -> ClInt;
        create_command_queue = "clCreateCommandQueue": fn(Context, DeviceId, ClBitfield, *mut ClInt) -> CommandQueue;
        release_command_queue = "clReleaseCommandQueue": fn(CommandQueue) -> ClInt;
        flush = "clFlush": fn(CommandQueue) -> ClInt;
        finish = "clFinish": fn(CommandQueue) -> ClInt;
        create_buffer = "clCreateBuffer": fn(Context, ClBitfield, usize, *mut c_void, *mut ClInt) -> Mem;
        create_sub_buffer = "clCreateSubBuffer": fn(Mem, ClBitfield, ClUint, *const c_void, *mut ClInt) -> Mem;
        release_mem_object = "clReleaseMemObject": fn(Mem) -> ClInt;
        enqueue_write_buffer = "clEnqueueWriteBuffer":
            fn(
                CommandQueue,
                Mem,
                ClBool,
                usize,
                usize,
                *const c_void,
                ClUint,
                *const ClEventId,
                *mut ClEventId,
            ) -> ClInt;
        enqueue_read_buffer = "clEnqueueReadBuffer":
            fn(CommandQueue, Mem, ClBool, usize, usize, *mut c_void, ClUint, *const ClEventId, *mut ClEventId) -> ClInt;
        enqueue_copy_buffer = "clEnqueueCopyBuffer":
            fn(CommandQueue, Mem, Mem, usize, usize, usize, ClUint, *const ClEventId, *mut ClEventId) -> ClInt;
        enqueue_fill_buffer = "clEnqueueFillBuffer":
            fn(
                CommandQueue,
                Mem,
                *const c_void,
                usize,
                usize,
                usize,
                ClUint,
                *const ClEventId,
                *mut ClEventId,
            ) -> ClInt;
        enqueue_marker_with_wait_list = "clEnqueueMarkerWithWaitList":
            fn(CommandQueue, ClUint, *const ClEventId, *mut ClEventId) -> ClInt;
        enqueue_barrier_with_wait_list = "clEnqueueBarrierWithWaitList":
            fn(CommandQueue, ClUint, *const ClEventId, *mut ClEventId) -> ClInt;
        wait_for_events = "clWaitForEvents": fn(ClUint, *const ClEventId) -> ClInt;
        get_event_info = "clGetEventInfo": fn(ClEventId, ClUint, usize, *mut c_void, *mut usize) -> ClInt;
        get_event_profiling_info = "clGetEventProfilingInfo":
            fn(ClEventId, ClUint, usize, *mut c_void, *mut usize) -> ClInt;
        release_event = "clReleaseEvent": fn(ClEventId) -> ClInt;
        create_user_event = "clCreateUserEvent": fn(Context, *mut ClInt) -> ClEventId;
        set_user_event_status = "clSetUserEventStatus": fn(ClEventId, ClInt) -> ClInt;
        create_program_with_source = "clCreateProgramWithSource":
            fn(Context, ClUint, *const *const c_char, *const usize, *mut ClInt) -> Program;
        build_program = "clBuildProgram":
            fn(Program, ClUint, *const DeviceId, *const c_char, BuildNotify, *mut c_void) -> ClInt;
        get_program_info = "clGetProgramInfo": fn(Program, ClUint, usize, *mut c_void, *mut usize) -> ClInt;
        get_program_build_info = "clGetProgramBuildInfo":
            fn(Program, DeviceId, ClUint, usize, *mut c_void, *mut usize) -> ClInt;
        release_program = "clReleaseProgram": fn(Program) -> ClInt;
        create_kernel = "clCreateKernel": fn(Program, *const c_char, *mut ClInt) -> Kernel;
        release_kernel = "clReleaseKernel": fn(Kernel) -> ClInt;
        get_kernel_info = "clGetKernelInfo": fn(Kernel, ClUint, usize, *mut c_void, *mut usize) -> ClInt;
        get_kernel_arg_info = "clGetKernelArgInfo": fn(Kernel, ClUint, ClUint, usize, *mut c_void, *mut usize) -> ClInt;
        get_kernel_work_group_info = "clGetKernelWorkGroupInfo":
            fn(Kernel, DeviceId, ClUint, usize, *mut c_void, *mut usize) -> ClInt;
        set_kernel_arg = "clSetKernelArg": fn(Kernel, ClUint, usize, *const c_void) -> ClInt;
        enqueue_nd_range_kernel = "clEnqueueNDRangeKernel": fn(
            CommandQueue,
            Kernel,
            ClUint,
            *const usize,
            *const usize,
            *const usize,
            ClUint,
            *const ClEventId,
            *mut ClEventId,
        ) -> ClInt;
    }
    optional {
        /// `clCreateProgramWithIL`, where the loader exports it.
        create_program_with_il = "clCreateProgramWithIL": fn(Context, *const c_void, usize, *mut ClInt) -> Program;
        /// `clGetExtensionFunctionAddressForPlatform`.
        get_extension_function_address_for_platform = "clGetExtensionFunctionAddressForPlatform":
            fn(PlatformId, *const c_char) -> *mut c_void;
    }
}

impl Api {
    /// Opens `library` and resolves every entry point.
    pub(crate) fn load(library: &str) -> Result<Api> {
        // SAFETY: loading an OpenCL ICD loader runs its initialisers, which is what every
        // OpenCL program does; each entry point is declared with the signature the OpenCL
        // headers give it.
        unsafe { Api::open(library) }.map_err(|error| {
            let message = match error {
                LoadError::Open { library, error } => format!(
                    "the OpenCL loader {library} could not be loaded ({error}); install an ICD loader \
                     (ocl-icd-libopencl1) and an OpenCL driver (pocl-opencl-icd, or the vendor's)"
                ),
                missing @ LoadError::MissingSymbol { .. } => {
                    format!("the OpenCL loader {missing}; it is older than OpenCL 1.2")
                }
            };
            Error::new(ErrorKind::DriverUnavailable, message)
        })
    }
}

/// Reads an info value of any size with the usual two calls (size, then bytes).
///
/// # Safety
/// `query` must be an OpenCL `clGet*Info` call with its object and parameter bound, that
/// writes at most the size it is given.
pub(crate) unsafe fn info_bytes(
    query: impl Fn(usize, *mut c_void, *mut usize) -> ClInt,
) -> std::result::Result<Vec<u8>, ClInt> {
    let mut size = 0usize;
    let code = query(0, std::ptr::null_mut(), &mut size);
    if code != CL_SUCCESS {
        return Err(code);
    }
    let mut bytes = vec![0u8; size];
    if size > 0 {
        let code = query(size, bytes.as_mut_ptr().cast(), std::ptr::null_mut());
        if code != CL_SUCCESS {
            return Err(code);
        }
    }
    Ok(bytes)
}

/// An info string, without its terminating NUL.
pub(crate) fn info_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&byte| byte == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).trim().to_string()
}

/// Reads a fixed-size info value (an integer, a bitfield, a struct of them).
///
/// # Safety
/// As for [`info_bytes`]; `T` must be the type the parameter is documented to return, or a
/// plain-data type of the same size.
pub(crate) unsafe fn info_value<T: Default>(
    query: impl Fn(usize, *mut c_void, *mut usize) -> ClInt,
) -> std::result::Result<T, ClInt> {
    let mut value = T::default();
    let code = query(
        std::mem::size_of::<T>(),
        (&mut value as *mut T).cast(),
        std::ptr::null_mut(),
    );
    if code != CL_SUCCESS {
        return Err(code);
    }
    Ok(value)
}

/// Binds an object to a `clGet*Info` function, for [`info_bytes`] and [`info_value`].
pub(crate) fn query_of<T: Copy>(
    function: InfoFn<T>,
    object: T,
    parameter: ClUint,
) -> impl Fn(usize, *mut c_void, *mut usize) -> ClInt {
    // SAFETY: the caller of `info_bytes`/`info_value` vouches for the object and parameter.
    move |size, value, size_ret| unsafe { function(object, parameter, size, value, size_ret) }
}

/// The name of an OpenCL error code, as in the headers.
pub(crate) fn error_name(code: ClInt) -> &'static str {
    match code {
        0 => "CL_SUCCESS",
        -1 => "CL_DEVICE_NOT_FOUND",
        -2 => "CL_DEVICE_NOT_AVAILABLE",
        -3 => "CL_COMPILER_NOT_AVAILABLE",
        -4 => "CL_MEM_OBJECT_ALLOCATION_FAILURE",
        -5 => "CL_OUT_OF_RESOURCES",
        -6 => "CL_OUT_OF_HOST_MEMORY",
        -7 => "CL_PROFILING_INFO_NOT_AVAILABLE",
        -8 => "CL_MEM_COPY_OVERLAP",
        -9 => "CL_IMAGE_FORMAT_MISMATCH",
        -10 => "CL_IMAGE_FORMAT_NOT_SUPPORTED",
        -11 => "CL_BUILD_PROGRAM_FAILURE",
        -12 => "CL_MAP_FAILURE",
        -13 => "CL_MISALIGNED_SUB_BUFFER_OFFSET",
        -14 => "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST",
        -15 => "CL_COMPILE_PROGRAM_FAILURE",
        -16 => "CL_LINKER_NOT_AVAILABLE",
        -17 => "CL_LINK_PROGRAM_FAILURE",
        -18 => "CL_DEVICE_PARTITION_FAILED",
        -19 => "CL_KERNEL_ARG_INFO_NOT_AVAILABLE",
        -30 => "CL_INVALID_VALUE",
        -31 => "CL_INVALID_DEVICE_TYPE",
        -32 => "CL_INVALID_PLATFORM",
        -33 => "CL_INVALID_DEVICE",
        -34 => "CL_INVALID_CONTEXT",
        -35 => "CL_INVALID_QUEUE_PROPERTIES",
        -36 => "CL_INVALID_COMMAND_QUEUE",
        -37 => "CL_INVALID_HOST_PTR",
        -38 => "CL_INVALID_MEM_OBJECT",
        -39 => "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR",
        -40 => "CL_INVALID_IMAGE_SIZE",
        -41 => "CL_INVALID_SAMPLER",
        -42 => "CL_INVALID_BINARY",
        -43 => "CL_INVALID_BUILD_OPTIONS",
        -44 => "CL_INVALID_PROGRAM",
        -45 => "CL_INVALID_PROGRAM_EXECUTABLE",
        -46 => "CL_INVALID_KERNEL_NAME",
        -47 => "CL_INVALID_KERNEL_DEFINITION",
        -48 => "CL_INVALID_KERNEL",
        -49 => "CL_INVALID_ARG_INDEX",
        -50 => "CL_INVALID_ARG_VALUE",
        -51 => "CL_INVALID_ARG_SIZE",
        -52 => "CL_INVALID_KERNEL_ARGS",
        -53 => "CL_INVALID_WORK_DIMENSION",
        -54 => "CL_INVALID_WORK_GROUP_SIZE",
        -55 => "CL_INVALID_WORK_ITEM_SIZE",
        -56 => "CL_INVALID_GLOBAL_OFFSET",
        -57 => "CL_INVALID_EVENT_WAIT_LIST",
        -58 => "CL_INVALID_EVENT",
        -59 => "CL_INVALID_OPERATION",
        -60 => "CL_INVALID_GL_OBJECT",
        -61 => "CL_INVALID_BUFFER_SIZE",
        -62 => "CL_INVALID_MIP_LEVEL",
        -63 => "CL_INVALID_GLOBAL_WORK_SIZE",
        -64 => "CL_INVALID_PROPERTY",
        -65 => "CL_INVALID_IMAGE_DESCRIPTOR",
        -66 => "CL_INVALID_COMPILER_OPTIONS",
        -67 => "CL_INVALID_LINKER_OPTIONS",
        -68 => "CL_INVALID_DEVICE_PARTITION_COUNT",
        -69 => "CL_INVALID_PIPE_SIZE",
        -70 => "CL_INVALID_DEVICE_QUEUE",
        -71 => "CL_INVALID_SPEC_ID",
        -72 => "CL_MAX_SIZE_RESTRICTION_EXCEEDED",
        -1001 => "CL_PLATFORM_NOT_FOUND_KHR",
        _ => "an OpenCL error this backend does not know",
    }
}

/// An xhal error for OpenCL `code`, returned while `doing` something: the kind follows the
/// code, the message names both.
pub(crate) fn cl_error(doing: impl std::fmt::Display, code: ClInt) -> Error {
    let kind = match code {
        -6..=-4 => ErrorKind::OutOfMemory,
        -2 => ErrorKind::DeviceLost,
        -14 => ErrorKind::KernelFault,
        -1 | -3 | -7 | -16 => ErrorKind::Unsupported,
        -11 | -13 | -15 | -17 => ErrorKind::InvalidArgument,
        -72..=-30 => ErrorKind::InvalidArgument,
        _ => ErrorKind::Internal,
    };
    Error::new(kind, format!("{doing}: {} ({code})", error_name(code)))
}

/// `Ok` for `CL_SUCCESS`, else [`cl_error`].
pub(crate) fn check(code: ClInt, doing: impl FnOnce() -> String) -> Result<()> {
    if code == CL_SUCCESS {
        Ok(())
    } else {
        Err(cl_error(doing(), code))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_keep_their_names_and_kinds() {
        let error = cl_error("launching kernel `saxpy`", -52);
        assert_eq!(error.kind(), ErrorKind::InvalidArgument);
        assert_eq!(
            error.message(),
            "launching kernel `saxpy`: CL_INVALID_KERNEL_ARGS (-52)"
        );
        assert_eq!(cl_error("x", -5).kind(), ErrorKind::OutOfMemory);
        assert!(cl_error("x", -5).message().contains("CL_OUT_OF_RESOURCES"));
        assert_eq!(cl_error("x", -9999).kind(), ErrorKind::Internal);
        assert!(cl_error("x", -9999).message().contains("-9999"));
    }

    #[test]
    fn info_strings_stop_at_the_terminator() {
        assert_eq!(info_string(b"pthread\0"), "pthread");
        assert_eq!(info_string(b"OpenCL 3.0 \0junk"), "OpenCL 3.0");
        assert_eq!(info_string(b""), "");
    }
}
