/*
 * A test double of the HIP runtime (libamdhip64) and of hiprtc, built by the tests with
 * `cc -shared -fPIC`. It exports every entry point xhal's ROCm backend resolves, with the C
 * signatures of AMD's hip_runtime_api.h and hiprtc.h.
 *
 * It pretends: "device memory" is host memory from malloc, and every copy, fill, record and
 * launch happens at once on the calling thread. Nothing here runs GPU code: a launch of a
 * kernel from any other image than the emulator's (below) records its arguments for the test
 * to read back. Each test loads its own copy of the file, so each copy's settings (below) are
 * its own.
 *
 * Settings, through the exported stub_* functions:
 *   stub_set_devices(n)                devices reported (0: hipGetDeviceCount answers
 *                                      hipErrorNoDevice)
 *   stub_set_init_result(code)         what hipInit returns
 *   stub_fail(name, code, after)       the call `name` returns `code` after `after` successes
 *   stub_set_kernels("a,b")            kernel names hipModuleGetFunction finds
 *   stub_set_parameter_sizes(n, sizes) sizes of the parameters a launch reads
 *   stub_set_compiled_code(bytes, n)   what the fake hiprtc "compiles" every source to
 *   stub_set_compile_failure(log)      the fake hiprtc fails to compile, with this log
 *
 * The emulated HIP device (backends/cuda/tests/emulator/README.md): a module whose image is a
 * shared object for this machine, as the emulator's hiprtc makes from HIP C, is opened with
 * dlopen, and its kernels really run: hipModuleLaunchKernel calls its `xhemu_launch_<name>`.
 * Where no test set it, the device count comes from the environment:
 *   STUB_DEVICES=N                     devices reported (0 by default)
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, mkstemp */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define XHEMU_DEVICE "rocm"
#include "../../cuda/tests/emulator/executable_module.h"

typedef int hipError_t;
typedef int hipDevice_t;
typedef void* hipStream_t;
typedef void* hipEvent_t;
typedef void* hipModule_t;
typedef void* hipFunction_t;
typedef void* hipDeviceptr_t;
typedef struct { char bytes[16]; } hipUUID;
typedef int hiprtcResult;
typedef void* hiprtcProgram;

/* What stub_set_devices set; until a test sets it (-1), STUB_DEVICES decides. */
static int device_count = -1;
static int init_result = 0;
static char failing_call[128];
static int failing_code = 0;
static int failing_after = 0;
static char kernel_names[1024];
static size_t parameter_sizes[64];
static int parameter_count = 0;
/* Bytes allocated, changed by any thread that allocates or frees. */
static size_t allocated = 0;
static const size_t total_memory = (size_t)1 << 30;

/* The last launch: grid, block, and a copy of each parameter's bytes. */
static unsigned launch_dims[6];
static unsigned char launch_parameters[64][1024];
static int launches = 0;

static unsigned char* compiled_code = NULL;
static size_t compiled_size = 0;
static char compile_log[4096];
static int compile_fails = 0;
static char compile_options[4096];

void stub_set_devices(int count) { device_count = count; }
void stub_set_init_result(int code) { init_result = code; }
void stub_fail(const char* name, int code, int after) {
    strncpy(failing_call, name, sizeof failing_call - 1);
    failing_code = code;
    failing_after = after;
}
void stub_set_kernels(const char* names) { strncpy(kernel_names, names, sizeof kernel_names - 1); }
void stub_set_parameter_sizes(int count, const size_t* sizes) {
    parameter_count = count < 64 ? count : 64;
    for (int i = 0; i < parameter_count; i++) parameter_sizes[i] = sizes[i] < 1024 ? sizes[i] : 1024;
}
void stub_set_compiled_code(const unsigned char* bytes, size_t size) {
    free(compiled_code);
    compiled_code = malloc(size);
    memcpy(compiled_code, bytes, size);
    compiled_size = size;
}
void stub_set_compile_failure(const char* log) {
    compile_fails = 1;
    strncpy(compile_log, log, sizeof compile_log - 1);
}
int stub_launches(void) { return launches; }
void stub_launch_dims(unsigned* out) { memcpy(out, launch_dims, sizeof launch_dims); }
void stub_launch_parameter(int index, unsigned char* out, size_t size) {
    memcpy(out, launch_parameters[index], size < 1024 ? size : 1024);
}
const char* stub_compile_options(void) { return compile_options; }
size_t stub_allocated(void) { return __atomic_load_n(&allocated, __ATOMIC_RELAXED); }

/* Whether call `name` fails now (counting its calls). */
static int fails(const char* name) {
    if (failing_call[0] == 0 || strcmp(failing_call, name) != 0) return 0;
    if (failing_after > 0) {
        failing_after--;
        return 0;
    }
    return 1;
}
#define FAIL_ON_CUE(name) \
    if (fails(name)) return failing_code

static int devices(void) {
    if (device_count >= 0) return device_count;
    const char* count = getenv("STUB_DEVICES");
    return count ? atoi(count) : 0;
}
static int valid_device(int ordinal) { return ordinal >= 0 && ordinal < devices(); }

hipError_t hipInit(unsigned int flags) {
    FAIL_ON_CUE("hipInit");
    return flags == 0 ? init_result : 1;
}
hipError_t hipGetDeviceCount(int* count) {
    FAIL_ON_CUE("hipGetDeviceCount");
    *count = devices();
    return *count == 0 ? 100 : 0;
}
static int current_device = 0;
hipError_t hipSetDevice(int ordinal) {
    FAIL_ON_CUE("hipSetDevice");
    if (!valid_device(ordinal)) return 101;
    current_device = ordinal;
    return 0;
}
hipError_t hipDeviceGet(hipDevice_t* device, int ordinal) {
    FAIL_ON_CUE("hipDeviceGet");
    if (!valid_device(ordinal)) return 101;
    *device = ordinal;
    return 0;
}
hipError_t hipDeviceGetName(char* name, int length, hipDevice_t device) {
    FAIL_ON_CUE("hipDeviceGetName");
    if (!valid_device(device) || length < 1) return 1;
    strncpy(name, "xhal stub HIP device (host memory)", (size_t)length - 1);
    name[length - 1] = 0;
    return 0;
}
hipError_t hipDeviceTotalMem(size_t* bytes, hipDevice_t device) {
    FAIL_ON_CUE("hipDeviceTotalMem");
    if (!valid_device(device)) return 101;
    *bytes = total_memory;
    return 0;
}
hipError_t hipDeviceGetAttribute(int* value, int attribute, int device) {
    FAIL_ON_CUE("hipDeviceGetAttribute");
    if (!valid_device(device)) return 101;
    switch (attribute) {
        case 16: *value = 0; return 0;                  /* Integrated */
        case 26: case 27: *value = 1024; return 0;      /* MaxBlockDimX, Y */
        case 28: *value = 1024; return 0;               /* MaxBlockDimZ */
        case 29: *value = 2147483647; return 0;         /* MaxGridDimX */
        case 30: case 31: *value = 65536; return 0;     /* MaxGridDimY, Z */
        case 56: *value = 1024; return 0;               /* MaxThreadsPerBlock */
        case 63: *value = 104; return 0;                /* MultiprocessorCount */
        case 68: *value = 0x740c; return 0;             /* PciDeviceId */
        case 74: *value = 65536; return 0;              /* MaxSharedMemoryPerBlock */
        case 87: *value = 64; return 0;                 /* WarpSize */
        default: return 1;
    }
}
hipError_t hipDeviceGetPCIBusId(char* bus, int length, int device) {
    FAIL_ON_CUE("hipDeviceGetPCIBusId");
    if (!valid_device(device) || length < 13) return 1;
    strncpy(bus, "0000:0F:00.0", (size_t)length);
    bus[12] = 0;
    bus[9] = (char)('0' + device % 10);
    return 0;
}
hipError_t hipDeviceGetUuid(hipUUID* uuid, hipDevice_t device) {
    FAIL_ON_CUE("hipDeviceGetUuid");
    if (!valid_device(device)) return 101;
    for (int i = 0; i < 16; i++) uuid->bytes[i] = (char)(0xa0 + i + device);
    return 0;
}
hipError_t hipDriverGetVersion(int* version) { *version = 60241134; return 0; }
hipError_t hipRuntimeGetVersion(int* version) { *version = 60241134; return 0; }

const char* hipGetErrorName(hipError_t code) {
    switch (code) {
        case 0: return "hipSuccess";
        case 1: return "hipErrorInvalidValue";
        case 2: return "hipErrorOutOfMemory";
        case 100: return "hipErrorNoDevice";
        case 101: return "hipErrorInvalidDevice";
        case 209: return "hipErrorNoBinaryForGpu";
        case 500: return "hipErrorNotFound";
        case 600: return "hipErrorNotReady";
        case 700: return "hipErrorIllegalAddress";
        case 719: return "hipErrorLaunchFailure";
        default: return "hipErrorUnknown";
    }
}
const char* hipGetErrorString(hipError_t code) {
    switch (code) {
        case 2: return "out of memory";
        case 700: return "an illegal memory access was encountered";
        default: return "unknown error";
    }
}

hipError_t hipMemGetInfo(size_t* free_bytes, size_t* total) {
    FAIL_ON_CUE("hipMemGetInfo");
    *free_bytes = total_memory - __atomic_load_n(&allocated, __ATOMIC_RELAXED);
    *total = total_memory;
    return 0;
}

/* Each allocation carries its size in the 256 bytes in front of it, for the allocated-bytes
   count, and keeps the 256-byte alignment hipMalloc promises. */
#define ALLOCATION_HEADER 256
hipError_t hipMalloc(void** pointer, size_t size) {
    FAIL_ON_CUE("hipMalloc");
    size_t before = __atomic_fetch_add(&allocated, size, __ATOMIC_RELAXED);
    if (size > total_memory || before + size > total_memory) {
        __atomic_fetch_sub(&allocated, size, __ATOMIC_RELAXED);
        return 2;
    }
    size_t* block = aligned_alloc(ALLOCATION_HEADER, ALLOCATION_HEADER + (size + 255) / 256 * 256);
    if (!block) {
        __atomic_fetch_sub(&allocated, size, __ATOMIC_RELAXED);
        return 2;
    }
    block[0] = size;
    *pointer = (char*)block + ALLOCATION_HEADER;
    return 0;
}
/* Page-locked host memory: page-aligned host memory here. */
hipError_t hipHostMalloc(void** pointer, size_t size, unsigned flags) {
    FAIL_ON_CUE("hipHostMalloc");
    (void)flags;
    *pointer = aligned_alloc(4096, ((size ? size : 1) + 4095) / 4096 * 4096);
    return *pointer ? 0 : 2;
}
hipError_t hipHostFree(void* pointer) {
    FAIL_ON_CUE("hipHostFree");
    free(pointer);
    return 0;
}
hipError_t hipFree(void* pointer) {
    FAIL_ON_CUE("hipFree");
    if (!pointer) return 0;
    size_t* block = (size_t*)((char*)pointer - ALLOCATION_HEADER);
    __atomic_fetch_sub(&allocated, block[0], __ATOMIC_RELAXED);
    free(block);
    return 0;
}

hipError_t hipMemcpyHtoDAsync(hipDeviceptr_t destination, void* source, size_t size, hipStream_t stream) {
    FAIL_ON_CUE("hipMemcpyHtoDAsync");
    (void)stream;
    memcpy(destination, source, size);
    return 0;
}
hipError_t hipMemcpyDtoHAsync(void* destination, hipDeviceptr_t source, size_t size, hipStream_t stream) {
    FAIL_ON_CUE("hipMemcpyDtoHAsync");
    (void)stream;
    memcpy(destination, source, size);
    return 0;
}
hipError_t hipMemcpyDtoDAsync(hipDeviceptr_t destination, hipDeviceptr_t source, size_t size, hipStream_t stream) {
    FAIL_ON_CUE("hipMemcpyDtoDAsync");
    (void)stream;
    memcpy(destination, source, size);
    return 0;
}
hipError_t hipMemsetD8Async(hipDeviceptr_t destination, unsigned char value, size_t count, hipStream_t stream) {
    FAIL_ON_CUE("hipMemsetD8Async");
    (void)stream;
    memset(destination, value, count);
    return 0;
}
hipError_t hipMemsetD16Async(hipDeviceptr_t destination, unsigned short value, size_t count, hipStream_t stream) {
    FAIL_ON_CUE("hipMemsetD16Async");
    (void)stream;
    for (size_t i = 0; i < count; i++) memcpy((char*)destination + 2 * i, &value, 2);
    return 0;
}
hipError_t hipMemsetD32Async(hipDeviceptr_t destination, int value, size_t count, hipStream_t stream) {
    FAIL_ON_CUE("hipMemsetD32Async");
    (void)stream;
    for (size_t i = 0; i < count; i++) memcpy((char*)destination + 4 * i, &value, 4);
    return 0;
}

hipError_t hipStreamCreateWithFlags(hipStream_t* stream, unsigned int flags) {
    FAIL_ON_CUE("hipStreamCreateWithFlags");
    if (flags != 1) return 1; /* the backend asks for hipStreamNonBlocking */
    *stream = malloc(1);
    return 0;
}
hipError_t hipStreamDestroy(hipStream_t stream) { free(stream); return 0; }
hipError_t hipStreamSynchronize(hipStream_t stream) {
    FAIL_ON_CUE("hipStreamSynchronize");
    (void)stream;
    return 0;
}
hipError_t hipStreamQuery(hipStream_t stream) {
    FAIL_ON_CUE("hipStreamQuery");
    (void)stream;
    return 0;
}
hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags) {
    FAIL_ON_CUE("hipStreamWaitEvent");
    (void)stream;
    (void)event;
    return flags == 0 ? 0 : 1;
}

typedef struct { unsigned flags; double milliseconds; } StubEvent;
static double now_milliseconds(void) {
    struct timespec time;
    clock_gettime(CLOCK_MONOTONIC, &time);
    return (double)time.tv_sec * 1e3 + (double)time.tv_nsec / 1e6;
}
hipError_t hipEventCreateWithFlags(hipEvent_t* event, unsigned flags) {
    FAIL_ON_CUE("hipEventCreateWithFlags");
    StubEvent* created = calloc(1, sizeof(StubEvent));
    created->flags = flags;
    *event = created;
    return 0;
}
hipError_t hipEventDestroy(hipEvent_t event) { free(event); return 0; }
hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream) {
    FAIL_ON_CUE("hipEventRecord");
    (void)stream;
    ((StubEvent*)event)->milliseconds = now_milliseconds();
    return 0;
}
hipError_t hipEventQuery(hipEvent_t event) {
    FAIL_ON_CUE("hipEventQuery");
    (void)event;
    return 0;
}
hipError_t hipEventSynchronize(hipEvent_t event) {
    FAIL_ON_CUE("hipEventSynchronize");
    (void)event;
    return 0;
}
hipError_t hipEventElapsedTime(float* milliseconds, hipEvent_t start, hipEvent_t stop) {
    FAIL_ON_CUE("hipEventElapsedTime");
    StubEvent* first = start;
    StubEvent* last = stop;
    if ((first->flags | last->flags) & 2) return 400; /* hipEventDisableTiming */
    *milliseconds = (float)(last->milliseconds - first->milliseconds);
    return 0;
}

/* A module: an executable one (from the emulator's hiprtc) is opened; any other image's
   kernels are the names stub_set_kernels lists. Its functions are freed with it. */
typedef int (*StubLaunch)(const unsigned* grid, const unsigned* block, void** parameters);
typedef struct StubFunction {
    StubLaunch launch;
    struct StubFunction* next;
} StubFunction;
typedef struct {
    void* executable;
    StubFunction* functions;
} StubModule;

hipError_t hipModuleLoadData(hipModule_t* module, const void* image) {
    FAIL_ON_CUE("hipModuleLoadData");
    if (!image) return 1;
    StubModule* loaded = calloc(1, sizeof(StubModule));
    if (!loaded) return 2;
    size_t executable = shared_object_size(image);
    if (executable && !(loaded->executable = open_executable(image, executable))) {
        free(loaded);
        return 200; /* hipErrorInvalidImage */
    }
    *module = loaded;
    return 0;
}
hipError_t hipModuleUnload(hipModule_t module) {
    StubModule* loaded = module;
    if (!loaded) return 400;
    for (StubFunction* function = loaded->functions; function;) {
        StubFunction* next = function->next;
        free(function);
        function = next;
    }
    if (loaded->executable) dlclose(loaded->executable);
    free(loaded);
    return 0;
}

static int listed_kernel(const char* name) {
    size_t length = strlen(name);
    const char* at = kernel_names;
    while (*at) {
        const char* end = strchr(at, ',');
        size_t item = end ? (size_t)(end - at) : strlen(at);
        if (item == length && strncmp(at, name, length) == 0) return 1;
        if (!end) break;
        at = end + 1;
    }
    return 0;
}

hipError_t hipModuleGetFunction(hipFunction_t* function, hipModule_t module, const char* name) {
    FAIL_ON_CUE("hipModuleGetFunction");
    StubModule* loaded = module;
    StubLaunch launch = NULL;
    if (loaded->executable) {
        char entry[160];
        snprintf(entry, sizeof entry, "xhemu_launch_%s", name);
        launch = (StubLaunch)(uintptr_t)dlsym(loaded->executable, entry);
        if (!launch) return 500;
    } else if (!listed_kernel(name)) {
        return 500;
    }
    StubFunction* found = calloc(1, sizeof(StubFunction));
    if (!found) return 2;
    found->launch = launch;
    /* Functions may be looked up from several threads at once. */
    found->next = __atomic_load_n(&loaded->functions, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&loaded->functions, &found->next, found, 0, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED)) {
    }
    *function = found;
    return 0;
}
hipError_t hipModuleLaunchKernel(hipFunction_t function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                 unsigned by, unsigned bz, unsigned shared, hipStream_t stream, void** parameters,
                                 void** extra) {
    FAIL_ON_CUE("hipModuleLaunchKernel");
    (void)shared;
    (void)stream;
    if (extra) return 1;
    StubFunction* found = function;
    if (found->launch) {
        /* The device's limits (hipDeviceGetAttribute above). */
        if (!gx || !gy || !gz || !bx || !by || !bz || bx > 1024 || by > 1024 || bz > 1024 ||
            (unsigned long long)bx * by * bz > 1024 || gx > 2147483647u || gy > 65536 || gz > 65536)
            return 1;
        /* AMD's runtime also refuses more than 2^32 - 1 threads along an axis. */
        if ((unsigned long long)gx * bx > 0xffffffffull || (unsigned long long)gy * by > 0xffffffffull ||
            (unsigned long long)gz * bz > 0xffffffffull)
            return 9; /* hipErrorInvalidConfiguration */
        const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
        return found->launch(grid, block, parameters);
    }
    unsigned dims[6] = {gx, gy, gz, bx, by, bz};
    memcpy(launch_dims, dims, sizeof dims);
    for (int i = 0; i < parameter_count; i++) memcpy(launch_parameters[i], parameters[i], parameter_sizes[i]);
    launches++;
    return 0;
}

/* hiprtc, as the runtime carried it before ROCm 5.3. */
hiprtcResult hiprtcCreateProgram(hiprtcProgram* program, const char* source, const char* name, int headers,
                                 const char** header_sources, const char** include_names) {
    (void)name;
    (void)header_sources;
    (void)include_names;
    if (!source || headers != 0) return 3;
    *program = malloc(1);
    return 0;
}
hiprtcResult hiprtcCompileProgram(hiprtcProgram program, int count, const char** options) {
    (void)program;
    compile_options[0] = 0;
    for (int i = 0; i < count; i++) {
        strncat(compile_options, options[i], sizeof compile_options - strlen(compile_options) - 2);
        strcat(compile_options, " ");
    }
    return compile_fails ? 6 : 0;
}
hiprtcResult hiprtcDestroyProgram(hiprtcProgram* program) {
    free(*program);
    *program = NULL;
    return 0;
}
hiprtcResult hiprtcGetProgramLogSize(hiprtcProgram program, size_t* size) {
    (void)program;
    *size = strlen(compile_log) + 1;
    return 0;
}
hiprtcResult hiprtcGetProgramLog(hiprtcProgram program, char* log) {
    (void)program;
    strcpy(log, compile_log);
    return 0;
}
hiprtcResult hiprtcGetCodeSize(hiprtcProgram program, size_t* size) {
    (void)program;
    *size = compiled_size;
    return 0;
}
hiprtcResult hiprtcGetCode(hiprtcProgram program, char* code) {
    (void)program;
    if (compiled_size) memcpy(code, compiled_code, compiled_size);
    return 0;
}
const char* hiprtcGetErrorString(hiprtcResult result) {
    switch (result) {
        case 0: return "HIPRTC_SUCCESS";
        case 3: return "HIPRTC_ERROR_INVALID_INPUT";
        case 6: return "HIPRTC_ERROR_COMPILATION";
        default: return "HIPRTC_ERROR_INTERNAL_ERROR";
    }
}
