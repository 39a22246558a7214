//! The slice of the HIP runtime API (and of hiprtc) this backend calls, declared by hand and
//! resolved from `libamdhip64` at run time, so that nothing from ROCm is needed to build.
//!
//! Only calls whose C signatures and constants have not changed from ROCm 5.0 to ROCm 7 are
//! declared. `hipDeviceProp_t` is never read: its layout changed between ROCm 5, 6 and 7
//! (`hipGetDeviceProperties` became `hipGetDevicePropertiesR0600`); every property comes from
//! `hipDeviceGetAttribute`, whose attribute numbers below are the same in each of those
//! releases' `hip_runtime_api.h`. `hipDeviceGetUuid` (ROCm 5.1) is optional, and so are the
//! stream capture and graph calls of command lists ([`GraphApi`]; HIP 4.3 and later, used from
//! ROCm 5.3), so a runtime without them still loads.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use xhal_backend::ffi::LoadError;
use xhal_backend::{Error, ErrorKind, Result};

/// `hipError_t` (a C enum: an `int`).
pub(crate) type HipError = c_int;
/// `hipDevice_t`.
pub(crate) type HipDevice = c_int;
/// `hipDeviceptr_t`, and every device pointer.
pub(crate) type DevicePointer = *mut c_void;
/// `hipStream_t`.
pub(crate) type HipStream = *mut c_void;
/// `hipEvent_t`.
pub(crate) type HipEvent = *mut c_void;
/// `hipModule_t`.
pub(crate) type HipModule = *mut c_void;
/// `hipFunction_t`.
pub(crate) type HipFunction = *mut c_void;
/// `hipGraph_t`.
pub(crate) type HipGraph = *mut c_void;
/// `hipGraphExec_t`.
pub(crate) type HipGraphExec = *mut c_void;
/// `hipGraphNode_t`.
pub(crate) type HipGraphNode = *mut c_void;
/// `hiprtcProgram`.
pub(crate) type HiprtcProgram = *mut c_void;
/// `hiprtcResult` (a C enum: an `int`).
pub(crate) type HiprtcResult = c_int;

pub(crate) const HIP_SUCCESS: HipError = 0;
pub(crate) const HIP_ERROR_INVALID_DEVICE: HipError = 101;
pub(crate) const HIP_ERROR_NO_DEVICE: HipError = 100;
pub(crate) const HIP_ERROR_NOT_FOUND: HipError = 500;
pub(crate) const HIP_ERROR_NOT_READY: HipError = 600;

pub(crate) const HIPRTC_SUCCESS: HiprtcResult = 0;

/// `hipStreamNonBlocking`: the stream does not synchronise with the null stream.
pub(crate) const HIP_STREAM_NON_BLOCKING: c_uint = 0x01;
/// `hipEventDefault`.
pub(crate) const HIP_EVENT_DEFAULT: c_uint = 0x0;
/// `hipEventDisableTiming`.
pub(crate) const HIP_EVENT_DISABLE_TIMING: c_uint = 0x2;
/// `hipStreamCaptureModeRelaxed` (a C enum: an `int`): the capture leaves other threads' calls
/// alone, and this thread's calls that are unsafe during a capture (`hipMalloc`) are allowed.
pub(crate) const HIP_STREAM_CAPTURE_MODE_RELAXED: c_int = 2;

/// `hipDeviceAttribute_t` values (the same from ROCm 5.0 to ROCm 7).
pub(crate) mod attribute {
    pub(crate) const INTEGRATED: i32 = 16;
    pub(crate) const MAX_BLOCK_DIM_X: i32 = 26;
    pub(crate) const MAX_BLOCK_DIM_Y: i32 = 27;
    pub(crate) const MAX_BLOCK_DIM_Z: i32 = 28;
    pub(crate) const MAX_GRID_DIM_X: i32 = 29;
    pub(crate) const MAX_GRID_DIM_Y: i32 = 30;
    pub(crate) const MAX_GRID_DIM_Z: i32 = 31;
    pub(crate) const MAX_THREADS_PER_BLOCK: i32 = 56;
    pub(crate) const MULTIPROCESSOR_COUNT: i32 = 63;
    pub(crate) const PCI_DEVICE_ID: i32 = 68;
    pub(crate) const MAX_SHARED_MEMORY_PER_BLOCK: i32 = 74;
    pub(crate) const WARP_SIZE: i32 = 87;
}

/// The HIP runtime's file names, most recent first; the unversioned name is ROCm's
/// development link and comes first, so an installation's own choice wins.
pub(crate) const HIP_LIBRARIES: &[&str] = &[
    "libamdhip64.so",
    "libamdhip64.so.7",
    "libamdhip64.so.6",
    "libamdhip64.so.5",
];

/// hiprtc's file names. Before ROCm 5.3, hiprtc lived inside `libamdhip64` itself, which is
/// tried last (see [`Rtc::load`]).
pub(crate) const HIPRTC_LIBRARIES: &[&str] = &["libhiprtc.so", "libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so.5"];

/// `hipUUID`.
#[repr(C)]
#[derive(Default)]
pub(crate) struct HipUuid {
    pub(crate) bytes: [u8; 16],
}

/// What to install, for every message about a missing runtime.
pub(crate) const INSTALL_HINT: &str = "install ROCm's HIP runtime (the hip-runtime-amd package from repo.radeon.com, \
     or Debian's libamdhip64-5) and make sure its library folder (/opt/rocm/lib) is on the loader path";

xhal_backend::function_table! {
    /// The HIP runtime's entry points (kept loaded for the life of the process: the runtime
    /// keeps threads and device queues that must not outlive its code).
    pub(crate) struct Api: extern "C";
    required {
        init = "hipInit": fn(c_uint) -> HipError;
        get_device_count = "hipGetDeviceCount": fn(*mut c_int) -> HipError;
        set_device = "hipSetDevice": fn(c_int) -> HipError;
        device_get = "hipDeviceGet": fn(*mut HipDevice, c_int) -> HipError;
        device_get_name = "hipDeviceGetName": fn(*mut c_char, c_int, HipDevice) -> HipError;
        device_total_mem = "hipDeviceTotalMem": fn(*mut usize, HipDevice) -> HipError;
        device_get_attribute = "hipDeviceGetAttribute": fn(*mut c_int, c_int, c_int) -> HipError;
        device_get_pci_bus_id = "hipDeviceGetPCIBusId": fn(*mut c_char, c_int, c_int) -> HipError;
        driver_get_version = "hipDriverGetVersion": fn(*mut c_int) -> HipError;
        runtime_get_version = "hipRuntimeGetVersion": fn(*mut c_int) -> HipError;
        get_error_name = "hipGetErrorName": fn(HipError) -> *const c_char;
        get_error_string = "hipGetErrorString": fn(HipError) -> *const c_char;
        mem_get_info = "hipMemGetInfo": fn(*mut usize, *mut usize) -> HipError;
        malloc = "hipMalloc": fn(*mut DevicePointer, usize) -> HipError;
        free = "hipFree": fn(DevicePointer) -> HipError;
        memcpy_htod_async = "hipMemcpyHtoDAsync": fn(DevicePointer, *mut c_void, usize, HipStream) -> HipError;
        memcpy_dtoh_async = "hipMemcpyDtoHAsync": fn(*mut c_void, DevicePointer, usize, HipStream) -> HipError;
        memcpy_dtod_async = "hipMemcpyDtoDAsync": fn(DevicePointer, DevicePointer, usize, HipStream) -> HipError;
        memset_d8_async = "hipMemsetD8Async": fn(DevicePointer, u8, usize, HipStream) -> HipError;
        memset_d16_async = "hipMemsetD16Async": fn(DevicePointer, u16, usize, HipStream) -> HipError;
        memset_d32_async = "hipMemsetD32Async": fn(DevicePointer, c_int, usize, HipStream) -> HipError;
        stream_create_with_flags = "hipStreamCreateWithFlags": fn(*mut HipStream, c_uint) -> HipError;
        stream_destroy = "hipStreamDestroy": fn(HipStream) -> HipError;
        stream_synchronize = "hipStreamSynchronize": fn(HipStream) -> HipError;
        stream_query = "hipStreamQuery": fn(HipStream) -> HipError;
        stream_wait_event = "hipStreamWaitEvent": fn(HipStream, HipEvent, c_uint) -> HipError;
        event_create_with_flags = "hipEventCreateWithFlags": fn(*mut HipEvent, c_uint) -> HipError;
        event_destroy = "hipEventDestroy": fn(HipEvent) -> HipError;
        event_record = "hipEventRecord": fn(HipEvent, HipStream) -> HipError;
        event_query = "hipEventQuery": fn(HipEvent) -> HipError;
        event_synchronize = "hipEventSynchronize": fn(HipEvent) -> HipError;
        event_elapsed_time = "hipEventElapsedTime": fn(*mut f32, HipEvent, HipEvent) -> HipError;
        module_load_data = "hipModuleLoadData": fn(*mut HipModule, *const c_void) -> HipError;
        module_unload = "hipModuleUnload": fn(HipModule) -> HipError;
        module_get_function = "hipModuleGetFunction": fn(*mut HipFunction, HipModule, *const c_char) -> HipError;
        module_launch_kernel = "hipModuleLaunchKernel": fn(
            HipFunction,
            c_uint,
            c_uint,
            c_uint,
            c_uint,
            c_uint,
            c_uint,
            c_uint,
            HipStream,
            *mut *mut c_void,
            *mut *mut c_void,
        ) -> HipError;
    }
    optional {
        device_get_uuid = "hipDeviceGetUuid": fn(*mut HipUuid, HipDevice) -> HipError;
        /// Page-locked host memory (`hipHostMallocPortable` and friends in `flags`).
        host_malloc = "hipHostMalloc": fn(*mut *mut c_void, usize, u32) -> HipError;
        host_free = "hipHostFree": fn(*mut c_void) -> HipError;
        /// Stream priorities (HIP 1.9 and later): the range, and a stream of one of them.
        device_get_stream_priority_range = "hipDeviceGetStreamPriorityRange": fn(*mut c_int, *mut c_int) -> HipError;
        stream_create_with_priority = "hipStreamCreateWithPriority": fn(*mut HipStream, c_uint, c_int) -> HipError;
        /// Stream capture and executable graphs, for command lists (see [`GraphApi`]).
        stream_begin_capture = "hipStreamBeginCapture": fn(HipStream, c_int) -> HipError;
        stream_end_capture = "hipStreamEndCapture": fn(HipStream, *mut HipGraph) -> HipError;
        graph_instantiate = "hipGraphInstantiate": fn(
            *mut HipGraphExec,
            HipGraph,
            *mut HipGraphNode,
            *mut c_char,
            usize,
        ) -> HipError;
        graph_launch = "hipGraphLaunch": fn(HipGraphExec, HipStream) -> HipError;
        graph_exec_destroy = "hipGraphExecDestroy": fn(HipGraphExec) -> HipError;
        graph_destroy = "hipGraphDestroy": fn(HipGraph) -> HipError;
    }
}

/// The runtime's stream capture and graph entry points, all of them: command lists are built
/// only where every one is there.
#[derive(Clone, Copy)]
pub(crate) struct GraphApi {
    pub(crate) stream_begin_capture: unsafe extern "C" fn(HipStream, c_int) -> HipError,
    pub(crate) stream_end_capture: unsafe extern "C" fn(HipStream, *mut HipGraph) -> HipError,
    pub(crate) graph_instantiate:
        unsafe extern "C" fn(*mut HipGraphExec, HipGraph, *mut HipGraphNode, *mut c_char, usize) -> HipError,
    pub(crate) graph_launch: unsafe extern "C" fn(HipGraphExec, HipStream) -> HipError,
    pub(crate) graph_exec_destroy: unsafe extern "C" fn(HipGraphExec) -> HipError,
    pub(crate) graph_destroy: unsafe extern "C" fn(HipGraph) -> HipError,
}

xhal_backend::function_table! {
    /// hiprtc's entry points.
    pub(crate) struct Rtc: extern "C";
    required {
        create_program = "hiprtcCreateProgram": fn(
            *mut HiprtcProgram,
            *const c_char,
            *const c_char,
            c_int,
            *const *const c_char,
            *const *const c_char,
        ) -> HiprtcResult;
        compile_program = "hiprtcCompileProgram": fn(HiprtcProgram, c_int, *const *const c_char) -> HiprtcResult;
        destroy_program = "hiprtcDestroyProgram": fn(*mut HiprtcProgram) -> HiprtcResult;
        get_program_log_size = "hiprtcGetProgramLogSize": fn(HiprtcProgram, *mut usize) -> HiprtcResult;
        get_program_log = "hiprtcGetProgramLog": fn(HiprtcProgram, *mut c_char) -> HiprtcResult;
        get_code_size = "hiprtcGetCodeSize": fn(HiprtcProgram, *mut usize) -> HiprtcResult;
        get_code = "hiprtcGetCode": fn(HiprtcProgram, *mut c_char) -> HiprtcResult;
        get_error_string = "hiprtcGetErrorString": fn(HiprtcResult) -> *const c_char;
    }
}

impl Api {
    /// The graph entry points, where the runtime exports every one.
    pub(crate) fn graphs(&self) -> Option<GraphApi> {
        Some(GraphApi {
            stream_begin_capture: self.stream_begin_capture?,
            stream_end_capture: self.stream_end_capture?,
            graph_instantiate: self.graph_instantiate?,
            graph_launch: self.graph_launch?,
            graph_exec_destroy: self.graph_exec_destroy?,
            graph_destroy: self.graph_destroy?,
        })
    }

    /// Opens the first of `candidates` that loads and resolves every required entry point.
    pub(crate) fn load(candidates: &[String]) -> Result<Api> {
        let mut failures = Vec::new();
        for name in candidates {
            // SAFETY: loading the HIP runtime runs its initialisers, as every HIP program
            // does; each entry point is declared with the signature AMD's headers give it.
            match unsafe { Api::open(name) } {
                Ok(api) => return Ok(api),
                Err(missing @ LoadError::MissingSymbol { .. }) => {
                    failures.push(format!("{missing}; it is not a HIP runtime xhal can use"))
                }
                Err(unopened) => failures.push(unopened.to_string()),
            }
        }
        Err(Error::new(
            ErrorKind::DriverUnavailable,
            format!(
                "the HIP runtime could not be loaded ({}); {INSTALL_HINT}",
                failures.join("; ")
            ),
        ))
    }

    /// The name HIP gives `code` (`hipErrorOutOfMemory`), or a name from this backend's own
    /// table where the runtime has none.
    pub(crate) fn error_name(&self, code: HipError) -> String {
        // SAFETY: returns a static string (or null), for any value.
        let name = unsafe { (self.get_error_name)(code) };
        let from_runtime = (!name.is_null())
            // SAFETY: a NUL-terminated static string from the runtime.
            .then(|| unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned())
            .filter(|name| name.starts_with("hip") && name != "hipErrorUnknown" || code == 999);
        from_runtime.unwrap_or_else(|| known_error_name(code).to_string())
    }

    /// HIP's description of `code`, where it has one.
    pub(crate) fn error_description(&self, code: HipError) -> Option<String> {
        // SAFETY: as for `error_name`.
        let text = unsafe { (self.get_error_string)(code) };
        if text.is_null() {
            return None;
        }
        // SAFETY: a NUL-terminated static string from the runtime.
        let text = unsafe { CStr::from_ptr(text) }.to_string_lossy().trim().to_string();
        (!text.is_empty() && text != "unknown error").then_some(text)
    }

    /// An xhal error for HIP `code`, returned by `call` while `doing` something:
    /// `doing: call failed: hipErrorName (code)`, with HIP's description where it has one.
    pub(crate) fn error(&self, doing: &str, call: &str, code: HipError) -> Error {
        let name = self.error_name(code);
        let description = self
            .error_description(code)
            .filter(|text| !text.eq_ignore_ascii_case(&name))
            .map(|text| format!(": {text}"))
            .unwrap_or_default();
        Error::new(
            error_kind(code),
            format!("{doing}: {call} failed: {name} ({code}){description}"),
        )
    }

    /// `Ok` for `hipSuccess`, else [`Api::error`].
    pub(crate) fn check(&self, code: HipError, call: &str, doing: impl FnOnce() -> String) -> Result<()> {
        if code == HIP_SUCCESS {
            Ok(())
        } else {
            Err(self.error(&doing(), call, code))
        }
    }
}

impl Rtc {
    /// Opens hiprtc to go with the HIP runtime `hip_library`. A runtime opened by path takes
    /// the hiprtc beside it, else its own (ROCm before 5.3 carried hiprtc inside
    /// `libamdhip64`); the system's runtime takes the system's hiprtc, else its own. `Err`,
    /// with the reasons, where none has it.
    pub(crate) fn load(hip_library: &str) -> std::result::Result<Rtc, String> {
        let folder = std::path::Path::new(hip_library)
            .parent()
            .filter(|folder| !folder.as_os_str().is_empty());
        let candidates: Vec<String> = match folder {
            Some(folder) => HIPRTC_LIBRARIES
                .iter()
                .map(|name| folder.join(name).display().to_string())
                .chain(std::iter::once(hip_library.to_string()))
                .collect(),
            None => HIPRTC_LIBRARIES
                .iter()
                .map(|name| name.to_string())
                .chain(std::iter::once(hip_library.to_string()))
                .collect(),
        };
        let mut failures = Vec::new();
        for name in candidates {
            // SAFETY: as for the HIP runtime in `Api::load`; hiprtc's signatures are those of
            // AMD's headers too.
            match unsafe { Rtc::open(&name) } {
                Ok(rtc) => return Ok(rtc),
                Err(LoadError::MissingSymbol { library, symbol, .. }) => {
                    failures.push(format!("{library} has no {symbol}"))
                }
                Err(unopened) => failures.push(unopened.to_string()),
            }
        }
        Err(failures.join("; "))
    }

    /// hiprtc's description of `result`.
    pub(crate) fn error(&self, doing: &str, call: &str, result: HiprtcResult) -> Error {
        // SAFETY: returns a static string (or null), for any value.
        let text = unsafe { (self.get_error_string)(result) };
        let name = if text.is_null() {
            known_hiprtc_name(result).to_string()
        } else {
            // SAFETY: a NUL-terminated static string.
            unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
        };
        let kind = match result {
            1 => ErrorKind::OutOfMemory,
            3 | 5 | 6 => ErrorKind::InvalidArgument,
            _ => ErrorKind::Internal,
        };
        Error::new(kind, format!("{doing}: {call} failed: {name} ({result})"))
    }
}

/// The xhal error kind of a HIP error code.
pub(crate) fn error_kind(code: HipError) -> ErrorKind {
    match code {
        2 | 1052 => ErrorKind::OutOfMemory,
        1 | 9 | 12 | 13 | 17 | 21 | 98 | 200 | 209 | 218 | 300 | 701 | 1054 => ErrorKind::InvalidArgument,
        101 | 400 | 201 => ErrorKind::InvalidHandle,
        500 | 301 | 302 => ErrorKind::NotFound,
        3 | 4 | 35 | 100 | 303 => ErrorKind::DriverUnavailable,
        801 => ErrorKind::Unsupported,
        700 | 710 | 719 | 53 => ErrorKind::KernelFault,
        702 => ErrorKind::Timeout,
        _ => ErrorKind::Internal,
    }
}

/// Names of the HIP error codes, as in `hip_runtime_api.h`, for runtimes whose
/// `hipGetErrorName` does not know a code.
pub(crate) fn known_error_name(code: HipError) -> &'static str {
    match code {
        0 => "hipSuccess",
        1 => "hipErrorInvalidValue",
        2 => "hipErrorOutOfMemory",
        3 => "hipErrorNotInitialized",
        4 => "hipErrorDeinitialized",
        9 => "hipErrorInvalidConfiguration",
        13 => "hipErrorInvalidSymbol",
        17 => "hipErrorInvalidDevicePointer",
        21 => "hipErrorInvalidMemcpyDirection",
        35 => "hipErrorInsufficientDriver",
        53 => "hipErrorPriorLaunchFailure",
        98 => "hipErrorInvalidDeviceFunction",
        100 => "hipErrorNoDevice",
        101 => "hipErrorInvalidDevice",
        200 => "hipErrorInvalidImage",
        201 => "hipErrorInvalidContext",
        209 => "hipErrorNoBinaryForGpu",
        218 => "hipErrorInvalidKernelFile",
        300 => "hipErrorInvalidSource",
        301 => "hipErrorFileNotFound",
        302 => "hipErrorSharedObjectSymbolNotFound",
        303 => "hipErrorSharedObjectInitFailed",
        400 => "hipErrorInvalidHandle",
        401 => "hipErrorIllegalState",
        500 => "hipErrorNotFound",
        600 => "hipErrorNotReady",
        700 => "hipErrorIllegalAddress",
        701 => "hipErrorLaunchOutOfResources",
        702 => "hipErrorLaunchTimeOut",
        710 => "hipErrorAssert",
        719 => "hipErrorLaunchFailure",
        801 => "hipErrorNotSupported",
        900 => "hipErrorStreamCaptureUnsupported",
        901 => "hipErrorStreamCaptureInvalidated",
        902 => "hipErrorStreamCaptureMerge",
        903 => "hipErrorStreamCaptureUnmatched",
        904 => "hipErrorStreamCaptureUnjoined",
        905 => "hipErrorStreamCaptureIsolation",
        906 => "hipErrorStreamCaptureImplicit",
        907 => "hipErrorCapturedEvent",
        908 => "hipErrorStreamCaptureWrongThread",
        910 => "hipErrorGraphExecUpdateFailure",
        999 => "hipErrorUnknown",
        1052 => "hipErrorRuntimeMemory",
        1053 => "hipErrorRuntimeOther",
        _ => "an error code this backend does not know",
    }
}

fn known_hiprtc_name(result: HiprtcResult) -> &'static str {
    match result {
        0 => "HIPRTC_SUCCESS",
        1 => "HIPRTC_ERROR_OUT_OF_MEMORY",
        2 => "HIPRTC_ERROR_PROGRAM_CREATION_FAILURE",
        3 => "HIPRTC_ERROR_INVALID_INPUT",
        4 => "HIPRTC_ERROR_INVALID_PROGRAM",
        5 => "HIPRTC_ERROR_INVALID_OPTION",
        6 => "HIPRTC_ERROR_COMPILATION",
        7 => "HIPRTC_ERROR_BUILTIN_OPERATION_FAILURE",
        11 => "HIPRTC_ERROR_INTERNAL_ERROR",
        100 => "HIPRTC_ERROR_LINKING",
        _ => "a hiprtc result this backend does not know",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_keep_their_names_and_kinds() {
        assert_eq!(known_error_name(2), "hipErrorOutOfMemory");
        assert_eq!(known_error_name(100), "hipErrorNoDevice");
        assert_eq!(known_error_name(600), "hipErrorNotReady");
        assert_eq!(error_kind(2), ErrorKind::OutOfMemory);
        assert_eq!(error_kind(100), ErrorKind::DriverUnavailable);
        assert_eq!(error_kind(700), ErrorKind::KernelFault);
        assert_eq!(error_kind(1), ErrorKind::InvalidArgument);
        assert_eq!(error_kind(123_456), ErrorKind::Internal);
        assert!(known_error_name(123_456).contains("does not know"));
        assert_eq!(known_hiprtc_name(6), "HIPRTC_ERROR_COMPILATION");
    }

    #[test]
    fn a_missing_runtime_names_every_file_tried_and_what_to_install() {
        let candidates = vec![
            "/nonexistent/libamdhip64.so".to_string(),
            "/nonexistent/libamdhip64.so.6".to_string(),
        ];
        let error = Api::load(&candidates).err().expect("nothing loads");
        assert_eq!(error.kind(), ErrorKind::DriverUnavailable);
        assert!(error.message().contains("/nonexistent/libamdhip64.so:"), "{error}");
        assert!(error.message().contains("/nonexistent/libamdhip64.so.6"), "{error}");
        assert!(error.message().contains("libamdhip64-5"), "{error}");
    }
}
