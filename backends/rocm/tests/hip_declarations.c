/*
 * The C signature and constant of every HIP and hiprtc entry point the backend declares in
 * src/ffi.rs (and the stub in stub_hip.c exports), checked against an installed HIP's own
 * headers: tests/driver.rs compiles this file where the headers exist. A declaration that
 * drifts from AMD's is a compile error here.
 */
#define __HIP_PLATFORM_AMD__
#include <hip/hip_runtime_api.h>
#include <hip/hiprtc.h>
#include <stddef.h>

#define CHECK(name, type) \
    static void check_##name(void) __attribute__((unused)); \
    static void check_##name(void) { __typeof__(type) declared = name; (void)declared; }

CHECK(hipInit, hipError_t (*)(unsigned int))
CHECK(hipGetDeviceCount, hipError_t (*)(int*))
CHECK(hipSetDevice, hipError_t (*)(int))
CHECK(hipDeviceGet, hipError_t (*)(hipDevice_t*, int))
CHECK(hipDeviceGetName, hipError_t (*)(char*, int, hipDevice_t))
CHECK(hipDeviceTotalMem, hipError_t (*)(size_t*, hipDevice_t))
CHECK(hipDeviceGetPCIBusId, hipError_t (*)(char*, int, int))
CHECK(hipDriverGetVersion, hipError_t (*)(int*))
CHECK(hipRuntimeGetVersion, hipError_t (*)(int*))
CHECK(hipGetErrorName, const char* (*)(hipError_t))
CHECK(hipGetErrorString, const char* (*)(hipError_t))
CHECK(hipMemGetInfo, hipError_t (*)(size_t*, size_t*))
CHECK(hipMalloc, hipError_t (*)(void**, size_t))
CHECK(hipFree, hipError_t (*)(void*))
CHECK(hipMemcpyHtoDAsync, hipError_t (*)(hipDeviceptr_t, void*, size_t, hipStream_t))
CHECK(hipMemcpyDtoHAsync, hipError_t (*)(void*, hipDeviceptr_t, size_t, hipStream_t))
CHECK(hipMemcpyDtoDAsync, hipError_t (*)(hipDeviceptr_t, hipDeviceptr_t, size_t, hipStream_t))
CHECK(hipMemsetD8Async, hipError_t (*)(hipDeviceptr_t, unsigned char, size_t, hipStream_t))
CHECK(hipMemsetD16Async, hipError_t (*)(hipDeviceptr_t, unsigned short, size_t, hipStream_t))
CHECK(hipMemsetD32Async, hipError_t (*)(hipDeviceptr_t, int, size_t, hipStream_t))
CHECK(hipStreamCreateWithFlags, hipError_t (*)(hipStream_t*, unsigned int))
CHECK(hipStreamDestroy, hipError_t (*)(hipStream_t))
CHECK(hipStreamSynchronize, hipError_t (*)(hipStream_t))
CHECK(hipStreamQuery, hipError_t (*)(hipStream_t))
CHECK(hipStreamWaitEvent, hipError_t (*)(hipStream_t, hipEvent_t, unsigned int))
CHECK(hipEventCreateWithFlags, hipError_t (*)(hipEvent_t*, unsigned int))
CHECK(hipEventDestroy, hipError_t (*)(hipEvent_t))
CHECK(hipEventRecord, hipError_t (*)(hipEvent_t, hipStream_t))
CHECK(hipEventQuery, hipError_t (*)(hipEvent_t))
CHECK(hipEventSynchronize, hipError_t (*)(hipEvent_t))
CHECK(hipEventElapsedTime, hipError_t (*)(float*, hipEvent_t, hipEvent_t))
CHECK(hipModuleLoadData, hipError_t (*)(hipModule_t*, const void*))
CHECK(hipModuleUnload, hipError_t (*)(hipModule_t))
CHECK(hipModuleGetFunction, hipError_t (*)(hipFunction_t*, hipModule_t, const char*))
CHECK(hipModuleLaunchKernel, hipError_t (*)(hipFunction_t, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, hipStream_t, void**, void**))
CHECK(hipDeviceGetUuid, hipError_t (*)(hipUUID*, hipDevice_t))
CHECK(hipStreamBeginCapture, hipError_t (*)(hipStream_t, hipStreamCaptureMode))
CHECK(hipStreamEndCapture, hipError_t (*)(hipStream_t, hipGraph_t*))
CHECK(hipGraphInstantiate, hipError_t (*)(hipGraphExec_t*, hipGraph_t, hipGraphNode_t*, char*, size_t))
CHECK(hipGraphLaunch, hipError_t (*)(hipGraphExec_t, hipStream_t))
CHECK(hipGraphExecDestroy, hipError_t (*)(hipGraphExec_t))
CHECK(hipGraphDestroy, hipError_t (*)(hipGraph_t))
CHECK(hiprtcCreateProgram, hiprtcResult (*)(hiprtcProgram*, const char*, const char*, int, const char**, const char**))
CHECK(hiprtcCompileProgram, hiprtcResult (*)(hiprtcProgram, int, const char**))
CHECK(hiprtcDestroyProgram, hiprtcResult (*)(hiprtcProgram*))
CHECK(hiprtcGetProgramLogSize, hiprtcResult (*)(hiprtcProgram, size_t*))
CHECK(hiprtcGetProgramLog, hiprtcResult (*)(hiprtcProgram, char*))
CHECK(hiprtcGetCodeSize, hiprtcResult (*)(hiprtcProgram, size_t*))
CHECK(hiprtcGetCode, hiprtcResult (*)(hiprtcProgram, char*))
CHECK(hiprtcGetErrorString, const char* (*)(hiprtcResult))
_Static_assert(sizeof(hipError_t) == 4 && sizeof(hiprtcResult) == 4, "the enums are ints");
_Static_assert(sizeof(hipUUID) == 16, "hipUUID is 16 bytes");
_Static_assert(hipDeviceAttributeIntegrated == 16 && hipDeviceAttributeMaxBlockDimX == 26 && hipDeviceAttributeMaxGridDimZ == 31, "device attribute numbers");
_Static_assert(hipDeviceAttributeMaxThreadsPerBlock == 56 && hipDeviceAttributeMultiprocessorCount == 63, "device attribute numbers");
_Static_assert(hipDeviceAttributePciDeviceId == 68 && hipDeviceAttributeMaxSharedMemoryPerBlock == 74 && hipDeviceAttributeWarpSize == 87, "device attribute numbers");
_Static_assert(hipStreamNonBlocking == 1 && hipEventDefault == 0 && hipEventDisableTiming == 2, "the stream and event flags");
_Static_assert(hipErrorNoDevice == 100 && hipErrorInvalidDevice == 101 && hipErrorNotFound == 500 && hipErrorNotReady == 600, "error codes");
_Static_assert(sizeof(hipStreamCaptureMode) == sizeof(int) && hipStreamCaptureModeRelaxed == 2, "the capture mode is an int");
_Static_assert(sizeof(hipGraph_t) == sizeof(void*) && sizeof(hipGraphExec_t) == sizeof(void*) && sizeof(hipGraphNode_t) == sizeof(void*), "graph handles are pointers");
_Static_assert(hipErrorIllegalState == 401 && hipErrorStreamCaptureUnsupported == 900 && hipErrorStreamCaptureInvalidated == 901 && hipErrorStreamCaptureWrongThread == 908, "capture error codes");
_Static_assert(HIPRTC_SUCCESS == 0 && HIPRTC_ERROR_COMPILATION == 6, "hiprtc results");
