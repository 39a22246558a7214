/* A stand-in for the CUDA driver library (libcuda.so.1), built by the tests with
 * `cc -shared -fPIC -Wl,-soname,libcuda.so.1`, so the backend's paths can run on a machine
 * without an NVIDIA GPU.
 *
 * - STUB_DEVICES=N (default 0): how many devices cuDeviceGetCount reports.
 * - STUB_POOLS=1: the devices report memory pools (CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED).
 * - STUB_FAIL=name:code[,name:code...]: entry point `name` returns `code` (a CUresult).
 * - Built with -DSTUB_WITHOUT_UUID: cuDeviceGetUuid_v2 is not exported.
 *
 * "Device" memory is host memory and every stream runs its work at once, in order, so
 * copies, fills and host functions really happen. cuLaunchKernel writes what it was given
 * into the first buffer parameter: grid x, y, z, block x, y, z (uint32 each), then the
 * bytes of the parameters (see STUB_PARAM_SIZES below). A cubin module has every name.
 *
 * The emulated device (tests/emulator/README.md): a module whose image is a shared object for
 * this machine, as the emulator's NVRTC makes from CUDA C, is opened with dlopen, and its
 * kernels really run: cuLaunchKernel calls its `xhemu_launch_<name>`, cuFuncGetParamInfo its
 * `xhemu_parameter_<name>`. STUB_CLOCK=real: events hold the time they were recorded at. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUevent;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUmemoryPool;
typedef void (*CUhostFn)(void *);

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_SUPPORTED = 801,
};

static CUresult fail(const char *name) {
    const char *cue = getenv("STUB_FAIL");
    size_t length = strlen(name);
    while (cue && *cue) {
        if (strncmp(cue, name, length) == 0 && cue[length] == ':') {
            return (CUresult)atoi(cue + length + 1);
        }
        cue = strchr(cue, ',');
        if (cue) cue++;
    }
    return CUDA_SUCCESS;
}

/* Set while a host function (cuLaunchHostFunc) runs: CUDA forbids driver calls from it, and
   the stub refuses them with CUDA_ERROR_NOT_PERMITTED. */
static _Thread_local int in_host_function;
/* The context current on this thread (cuCtxSetCurrent); calls that act on "the current
   context" fail with CUDA_ERROR_INVALID_CONTEXT without one, as the driver's do. */
static _Thread_local void *current_context;

#define CUE(name)                                  \
    do {                                           \
        if (in_host_function) return 800;          \
        CUresult stub_code = fail(name);           \
        if (stub_code != CUDA_SUCCESS) return stub_code; \
    } while (0)
/* CUE, for an entry point that needs a current context. */
#define CUE_CONTEXT(name)                          \
    do {                                           \
        CUE(name);                                 \
        if (!current_context) return 201;          \
    } while (0)

static int devices(void) {
    const char *count = getenv("STUB_DEVICES");
    return count ? atoi(count) : 0;
}

static int context_token;

CUresult cuInit(unsigned flags) { CUE("cuInit"); return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
/* NVRTC opens libcuda.so.1 itself and asks for the driver's private export tables; the stub
 * has none, and says so. */
CUresult cuGetExportTable(const void **table, const void *id) {
    (void)id;
    *table = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuDriverGetVersion(int *version) { CUE("cuDriverGetVersion"); *version = 12080; return CUDA_SUCCESS; }
CUresult cuDeviceGetCount(int *count) { CUE("cuDeviceGetCount"); *count = devices(); return CUDA_SUCCESS; }
CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    CUE("cuDeviceGet");
    if (ordinal < 0 || ordinal >= devices()) return CUDA_ERROR_INVALID_VALUE;
    *device = ordinal;
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetName(char *name, int length, CUdevice device) {
    CUE("cuDeviceGetName");
    (void)device;
    strncpy(name, "xhal stub GPU", (size_t)length);
    return CUDA_SUCCESS;
}
#ifndef STUB_WITHOUT_UUID
CUresult cuDeviceGetUuid_v2(unsigned char *uuid, CUdevice device) {
    CUE("cuDeviceGetUuid_v2");
    for (int i = 0; i < 16; i++) uuid[i] = (unsigned char)(0xa0 + i + device);
    return CUDA_SUCCESS;
}
#endif
CUresult cuDeviceGetPCIBusId(char *bus, int length, CUdevice device) {
    CUE("cuDeviceGetPCIBusId");
    (void)device;
    strncpy(bus, "0000:3B:00.0", (size_t)length);
    return CUDA_SUCCESS;
}
static size_t total_memory(void);
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice device) {
    CUE("cuDeviceTotalMem_v2");
    (void)device;
    *bytes = total_memory();
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetAttribute(int *value, int attribute, CUdevice device) {
    CUE("cuDeviceGetAttribute");
    (void)device;
    switch (attribute) {
    case 1: *value = 1024; break;             /* max threads per block */
    case 2: case 3: *value = 1024; break;     /* block x, y */
    case 4: *value = 64; break;               /* block z */
    case 5: *value = 2147483647; break;       /* grid x */
    case 6: case 7: *value = 65535; break;    /* grid y, z */
    case 8: *value = 49152; break;            /* shared memory per block */
    case 10: *value = 32; break;              /* warp */
    case 16: *value = 132; break;             /* SMs */
    case 18: *value = 0; break;               /* integrated */
    case 75: *value = 9; break;               /* compute capability */
    case 76: *value = 0; break;
    case 115: *value = getenv("STUB_POOLS") ? atoi(getenv("STUB_POOLS")) : 0; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice device) {
    CUE("cuDevicePrimaryCtxRetain");
    (void)device;
    *context = &context_token;
    return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) { (void)device; return CUDA_SUCCESS; }
CUresult cuCtxSetCurrent(CUcontext context) {
    CUE("cuCtxSetCurrent");
    if (context != NULL && context != &context_token) return CUDA_ERROR_INVALID_VALUE;
    current_context = context;
    return CUDA_SUCCESS;
}
/* Device memory: 1 GiB (STUB_MEMORY_MIB=N: N MiB), of which the driver keeps 512 MiB for
   itself, so free memory starts below the total; allocations beyond what is free fail with
   CUDA_ERROR_OUT_OF_MEMORY. */
#define STUB_DRIVER_MEMORY ((size_t)1 << 29)
static size_t total_memory(void) {
    const char *mebibytes = getenv("STUB_MEMORY_MIB");
    size_t total = mebibytes ? (size_t)strtoull(mebibytes, NULL, 10) << 20 : (size_t)1 << 30;
    return total > STUB_DRIVER_MEMORY ? total : STUB_DRIVER_MEMORY * 2;
}
#define STUB_TOTAL_MEMORY total_memory()
/* Each allocation is preceded by 256 bytes that hold its size, keeping the 256-byte alignment
   cuMemAlloc promises. */
#define STUB_ALLOCATION_HEADER 256
static size_t allocated_memory;

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    CUE_CONTEXT("cuMemGetInfo_v2");
    *free_bytes = STUB_TOTAL_MEMORY - STUB_DRIVER_MEMORY - __atomic_load_n(&allocated_memory, __ATOMIC_RELAXED);
    *total = STUB_TOTAL_MEMORY;
    return CUDA_SUCCESS;
}

/* Memory. */
CUresult cuMemAlloc_v2(CUdeviceptr *pointer, size_t size) {
    CUE_CONTEXT("cuMemAlloc_v2");
    if (size == 0) return CUDA_ERROR_INVALID_VALUE;
    size_t rounded = (size + 255) / 256 * 256;
    size_t before = __atomic_fetch_add(&allocated_memory, rounded, __ATOMIC_RELAXED);
    if (rounded > STUB_TOTAL_MEMORY || before + rounded > STUB_TOTAL_MEMORY - STUB_DRIVER_MEMORY) {
        __atomic_fetch_sub(&allocated_memory, rounded, __ATOMIC_RELAXED);
        return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    }
    unsigned char *memory = aligned_alloc(256, STUB_ALLOCATION_HEADER + rounded);
    if (!memory) {
        __atomic_fetch_sub(&allocated_memory, rounded, __ATOMIC_RELAXED);
        return 2;
    }
    memcpy(memory, &rounded, sizeof rounded);
    *pointer = (CUdeviceptr)(uintptr_t)(memory + STUB_ALLOCATION_HEADER);
    return CUDA_SUCCESS;
}
CUresult cuMemFree_v2(CUdeviceptr pointer) {
    CUE_CONTEXT("cuMemFree_v2");
    if (!pointer) return CUDA_SUCCESS;
    unsigned char *memory = (unsigned char *)(uintptr_t)pointer - STUB_ALLOCATION_HEADER;
    size_t rounded;
    memcpy(&rounded, memory, sizeof rounded);
    __atomic_fetch_sub(&allocated_memory, rounded, __ATOMIC_RELAXED);
    free(memory);
    return CUDA_SUCCESS;
}
CUresult cuMemAllocAsync(CUdeviceptr *pointer, size_t size, CUstream stream) {
    CUE("cuMemAllocAsync");
    (void)stream;
    return cuMemAlloc_v2(pointer, size);
}
CUresult cuMemFreeAsync(CUdeviceptr pointer, CUstream stream) { (void)stream; return cuMemFree_v2(pointer); }
CUresult cuMemHostAlloc(void **pointer, size_t size, unsigned flags) {
    CUE_CONTEXT("cuMemHostAlloc");
    (void)flags;
    *pointer = malloc(size);
    return *pointer ? CUDA_SUCCESS : 2;
}
CUresult cuMemAllocHost_v2(void **pointer, size_t size) { return cuMemHostAlloc(pointer, size, 0); }
CUresult cuMemFreeHost(void *pointer) { free(pointer); return CUDA_SUCCESS; }
CUresult cuMemcpyHtoD_v2(CUdeviceptr to, const void *from, size_t size) {
    CUE_CONTEXT("cuMemcpyHtoD_v2");
    memcpy((void *)(uintptr_t)to, from, size);
    return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr to, CUdeviceptr from, size_t size) {
    CUE_CONTEXT("cuMemcpyDtoD_v2");
    memcpy((void *)(uintptr_t)to, (const void *)(uintptr_t)from, size);
    return CUDA_SUCCESS;
}

/* Streams run their work at once. */
CUresult cuStreamCreate(CUstream *stream, unsigned flags) {
    CUE_CONTEXT("cuStreamCreate");
    (void)flags;
    *stream = malloc(16);
    return CUDA_SUCCESS;
}
CUresult cuStreamDestroy_v2(CUstream stream) { free(stream); return CUDA_SUCCESS; }
CUresult cuCtxSynchronize(void) { CUE_CONTEXT("cuCtxSynchronize"); return CUDA_SUCCESS; }
CUresult cuStreamSynchronize(CUstream stream) { (void)stream; CUE("cuStreamSynchronize"); return CUDA_SUCCESS; }
CUresult cuStreamQuery(CUstream stream) { (void)stream; CUE("cuStreamQuery"); return CUDA_SUCCESS; }
CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned flags) {
    (void)stream; (void)event;
    CUE("cuStreamWaitEvent");
    return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr to, const void *from, size_t size, CUstream stream) {
    (void)stream;
    CUE("cuMemcpyHtoDAsync_v2");
    memcpy((void *)(uintptr_t)to, from, size);
    return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoHAsync_v2(void *to, CUdeviceptr from, size_t size, CUstream stream) {
    (void)stream;
    CUE("cuMemcpyDtoHAsync_v2");
    memcpy(to, (const void *)(uintptr_t)from, size);
    return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr to, CUdeviceptr from, size_t size, CUstream stream) {
    (void)stream;
    CUE("cuMemcpyDtoDAsync_v2");
    memcpy((void *)(uintptr_t)to, (const void *)(uintptr_t)from, size);
    return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoH_v2(void *to, CUdeviceptr from, size_t size) {
    CUE_CONTEXT("cuMemcpyDtoH_v2");
    memcpy(to, (const void *)(uintptr_t)from, size);
    return CUDA_SUCCESS;
}
CUresult cuMemsetD8Async(CUdeviceptr to, unsigned char value, size_t count, CUstream stream) {
    (void)stream;
    CUE("cuMemsetD8Async");
    memset((void *)(uintptr_t)to, value, count);
    return CUDA_SUCCESS;
}
CUresult cuMemsetD16Async(CUdeviceptr to, unsigned short value, size_t count, CUstream stream) {
    (void)stream;
    CUE("cuMemsetD16Async");
    for (size_t i = 0; i < count; i++) ((unsigned short *)(uintptr_t)to)[i] = value;
    return CUDA_SUCCESS;
}
CUresult cuMemsetD32Async(CUdeviceptr to, unsigned value, size_t count, CUstream stream) {
    (void)stream;
    CUE("cuMemsetD32Async");
    for (size_t i = 0; i < count; i++) ((unsigned *)(uintptr_t)to)[i] = value;
    return CUDA_SUCCESS;
}
CUresult cuLaunchHostFunc(CUstream stream, CUhostFn function, void *data) {
    (void)stream;
    CUE("cuLaunchHostFunc");
    in_host_function = 1;
    function(data);
    in_host_function = 0;
    return CUDA_SUCCESS;
}

/* Events: the flags, how often recorded, and when (STUB_CLOCK=real). */
typedef struct { unsigned flags; unsigned records; double milliseconds; } StubEvent;
CUresult cuEventCreate(CUevent *event, unsigned flags) {
    CUE_CONTEXT("cuEventCreate");
    StubEvent *state = calloc(1, sizeof(StubEvent));
    state->flags = flags;
    *event = state;
    return CUDA_SUCCESS;
}
CUresult cuEventDestroy_v2(CUevent event) { free(event); return CUDA_SUCCESS; }
CUresult cuEventRecord(CUevent event, CUstream stream) {
    (void)stream;
    CUE("cuEventRecord");
    StubEvent *state = event;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    state->records += 1;
    state->milliseconds = (double)now.tv_sec * 1e3 + (double)now.tv_nsec / 1e6;
    return CUDA_SUCCESS;
}
CUresult cuEventQuery(CUevent event) { (void)event; CUE("cuEventQuery"); return CUDA_SUCCESS; }
CUresult cuEventSynchronize(CUevent event) { (void)event; CUE("cuEventSynchronize"); return CUDA_SUCCESS; }
CUresult cuEventElapsedTime(float *milliseconds, CUevent start, CUevent end) {
    CUE("cuEventElapsedTime");
    const StubEvent *first = start, *last = end;
    if ((first->flags | last->flags) & 2) return 400; /* CUDA_ERROR_INVALID_HANDLE */
    const char *clock = getenv("STUB_CLOCK");
    *milliseconds = clock && strcmp(clock, "real") == 0 ? (float)(last->milliseconds - first->milliseconds) : 0.25f;
    return CUDA_SUCCESS;
}

/* Modules: the image is kept; every name the text contains is a function. An executable
   module (a shared object from the emulator's NVRTC) is opened instead. */
typedef struct { char *text; int any_name; void *executable; } StubModule;
typedef int (*StubLaunch)(const unsigned *grid, const unsigned *block, void **parameters);
typedef int (*StubParameter)(size_t index, size_t *offset, size_t *size);
typedef struct { char name[128]; StubLaunch launch; StubParameter parameter; int parameters; } StubFunction;

#include "../emulator/executable_module.h"

CUresult cuModuleLoadData(CUmodule *module, const void *image) {
    CUE_CONTEXT("cuModuleLoadData");
    StubModule *loaded = calloc(1, sizeof(StubModule));
    size_t executable = shared_object_size(image);
    if (executable) {
        loaded->executable = open_executable(image, executable);
        if (!loaded->executable) {
            free(loaded);
            return 200; /* CUDA_ERROR_INVALID_IMAGE */
        }
        loaded->text = strdup("");
        *module = loaded;
        return CUDA_SUCCESS;
    }
    loaded->text = strdup((const char *)image);
    /* A cubin (from NVRTC) is not read: every name is a function of it. */
    loaded->any_name = memcmp(image, "\x7f" "ELF", 4) == 0;
    *module = loaded;
    return CUDA_SUCCESS;
}
CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned count, int *options, void **values) {
    CUresult code = fail("cuModuleLoadDataEx");
    if (code != CUDA_SUCCESS) {
        for (unsigned i = 0; i < count; i++) {
            if (options[i] == 5) strcpy((char *)values[i], "ptxas fatal: stub JIT log");
        }
        return code;
    }
    return cuModuleLoadData(module, image);
}
CUresult cuModuleUnload(CUmodule module) {
    if (((StubModule *)module)->executable) dlclose(((StubModule *)module)->executable);
    free(((StubModule *)module)->text);
    free(module);
    return CUDA_SUCCESS;
}
CUresult cuModuleGetFunction(CUfunction *function, CUmodule module, const char *name) {
    CUE("cuModuleGetFunction");
    char entry[160];
    StubModule *loaded = module;
    StubLaunch launch = NULL;
    StubParameter parameter = NULL;
    if (loaded->executable) {
        snprintf(entry, sizeof entry, "xhemu_launch_%s", name);
        launch = (StubLaunch)dlsym(loaded->executable, entry);
        snprintf(entry, sizeof entry, "xhemu_parameter_%s", name);
        parameter = (StubParameter)dlsym(loaded->executable, entry);
        if (!launch || !parameter) return CUDA_ERROR_NOT_FOUND;
    } else {
        snprintf(entry, sizeof entry, ".entry %s(", name);
        if (!loaded->any_name && !strstr(loaded->text, entry)) return CUDA_ERROR_NOT_FOUND;
    }
    /* The parameters a PTX entry declares; a cubin's are not read, so it is taken to have the
       two a recording launch reads without STUB_PARAM_SIZES. */
    int declared = 2;
    const char *text = strstr(loaded->text, entry);
    if (!loaded->executable && text) {
        const char *end = strchr(text, ')');
        declared = 0;
        for (const char *at = strstr(text, ".param"); at && (!end || at < end); at = strstr(at + 1, ".param")) declared++;
    }
    StubFunction *found = calloc(1, sizeof(StubFunction));
    found->parameters = declared;
    strncpy(found->name, name, sizeof found->name - 1);
    found->launch = launch;
    found->parameter = parameter;
    *function = found;
    return CUDA_SUCCESS;
}
CUresult cuModuleGetGlobal_v2(CUdeviceptr *pointer, size_t *bytes, CUmodule module, const char *name) {
    (void)pointer; (void)bytes; (void)module; (void)name;
    CUE("cuModuleGetGlobal_v2");
    return CUDA_ERROR_NOT_FOUND;
}
CUresult cuFuncGetAttribute(int *value, int attribute, CUfunction function) {
    (void)function;
    CUE("cuFuncGetAttribute");
    if (attribute != 0) return CUDA_ERROR_INVALID_VALUE;
    *value = 1024;
    return CUDA_SUCCESS;
}
CUresult cuFuncGetParamInfo(CUfunction function, size_t index, size_t *offset, size_t *size) {
    CUE("cuFuncGetParamInfo");
    StubFunction *found = function;
    if (found->parameter) return found->parameter(index, offset, size);
    return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuLaunchKernel(CUfunction function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shared, CUstream stream, void **parameters, void **extra) {
    (void)shared; (void)stream; (void)extra;
    CUE_CONTEXT("cuLaunchKernel");
    StubFunction *found = function;
    if (found->launch) {
        if (!gx || !gy || !gz || !bx || !by || !bz || bx > 1024 || by > 1024 || bz > 64 ||
            (unsigned long long)bx * by * bz > 1024 || gy > 65535 || gz > 65535)
            return CUDA_ERROR_INVALID_VALUE;
        const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
        return found->launch(grid, block, parameters);
    }
    uint32_t *out = (uint32_t *)(uintptr_t)(*(CUdeviceptr *)parameters[0]);
    uint32_t shape[6] = {gx, gy, gz, bx, by, bz};
    memcpy(out, shape, sizeof shape);
    /* STUB_PARAM_SIZES=8,8,8,16: the bytes of each parameter follow the shape, in order;
       without it, the first 32 bytes the second parameter points to. */
    const char *sizes = getenv("STUB_PARAM_SIZES");
    if (!sizes) {
        if (found->parameters >= 2) memcpy(out + 6, parameters[1], 32);
        return CUDA_SUCCESS;
    }
    unsigned char *cursor = (unsigned char *)(out + 6);
    for (int i = 0; sizes && *sizes; i++) {
        size_t size = (size_t)strtoul(sizes, NULL, 10);
        memcpy(cursor, parameters[i], size);
        cursor += size;
        sizes = strchr(sizes, ',');
        if (sizes) sizes++;
    }
    return CUDA_SUCCESS;
}
