/*
 * A test double of the Level Zero loader for xhal's Level Zero backend tests: it exports the
 * entry points the backend resolves and pretends to be one integrated GPU whose memory is
 * host memory. Commands run synchronously when appended (copies and fills really copy and
 * fill); a kernel launch runs nothing, but records its group count, group size and argument
 * bytes, which a test reads back with xhal_ze_stub_last_launch.
 *
 * Built by the tests with `cc -shared -fPIC`, once per scenario, with these macros:
 *   STUB_MODE_NO_DRIVER   zeDriverGet lists no driver
 *   STUB_MODE_NO_DEVICE   the driver lists no device
 *   STUB_MODE_INIT_FAILS  zeInit answers ZE_RESULT_ERROR_DEVICE_LOST
 *   STUB_FAIL="zeXxx"     that entry point fails (with the error a driver would give it)
 *   STUB_NO_HOST_SYNC     zeCommandListHostSynchronize is not exported (an API 1.5 loader)
 *
 * Structures are declared here from ze_api.h (1.x), so building needs no Level Zero headers.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef uint32_t ze_result_t;
#define OK 0u
#define NOT_READY 1u
#define DEVICE_LOST 0x70000001u
#define OUT_OF_DEVICE_MEMORY 0x70000003u
#define MODULE_BUILD_FAILURE 0x70000004u
#define INVALID_ARGUMENT 0x78000004u
#define INVALID_KERNEL_NAME 0x78000011u
#define UNKNOWN 0x7ffffffeu

#ifndef STUB_FAIL
#define STUB_FAIL ""
#endif
#define FAILS(name) (strcmp(STUB_FAIL, name) == 0)
#define EXPORT __attribute__((visibility("default")))

typedef struct {
    uint32_t stype; void *pNext; uint32_t type, vendorId, deviceId, flags, subdeviceId, coreClockRate;
    uint64_t maxMemAllocSize; uint32_t maxHardwareContexts, maxCommandQueuePriority, numThreadsPerEU,
    physicalEUSimdWidth, numEUsPerSubslice, numSubslicesPerSlice, numSlices; uint64_t timerResolution;
    uint32_t timestampValidBits, kernelTimestampValidBits; uint8_t uuid[16]; char name[256];
} device_properties_t;
typedef struct {
    uint32_t stype; void *pNext; uint32_t maxTotalGroupSize, maxGroupSize[3], maxGroupCount[3],
    maxSharedLocalMemory, numSubGroupSizes, subGroupSizes[8];
} compute_properties_t;
typedef struct {
    uint32_t stype; void *pNext; uint32_t flags, maxClockRate, maxBusWidth; uint64_t totalSize; char name[256];
} memory_properties_t;
typedef struct {
    uint32_t stype; void *pNext; uint32_t spirvVersionSupported, flags, fp16flags, fp32flags, fp64flags,
    maxArgumentsSize, printfBufferSize; uint8_t nativeKernelSupported[16];
} module_properties_t;
typedef struct { uint32_t stype; void *pNext; uint32_t flags; size_t maxMemoryFillPatternSize; uint32_t numQueues; } queue_group_properties_t;
typedef struct { uint32_t stype; void *pNext; uint32_t domain, bus, device, function; int32_t gen, width; int64_t bandwidth; } pci_properties_t;
typedef struct { uint32_t stype; const void *pNext; uint32_t format; size_t inputSize; const uint8_t *pInputModule; const char *pBuildFlags; const void *pConstants; } module_desc_t;
typedef struct { uint32_t stype; const void *pNext; uint32_t flags; const char *pKernelName; } kernel_desc_t;
typedef struct {
    uint32_t stype; void *pNext; uint32_t numKernelArgs, requiredGroupSize[3], requiredNumSubGroups,
    requiredSubgroupSize, maxSubgroupSize, maxNumSubgroups, localMemSize, privateMemSize, spillMemSize;
    uint8_t uuid[32];
} kernel_properties_t;
typedef struct { uint32_t x, y, z; } group_count_t;
typedef struct { uint64_t globalStart, globalEnd, contextStart, contextEnd; } kernel_timestamp_t;

/* What the last launch passed, for the tests. */
#define MAX_ARGS 64
#define MAX_ARG_BYTES 256
typedef struct {
    uint32_t launches, groups[3], group_size[3], arg_count;
    uint64_t arg_size[MAX_ARGS];
    uint8_t arg_value[MAX_ARGS][MAX_ARG_BYTES];
    uint32_t kernels_alive, modules_alive;
} stub_launch_t;

static stub_launch_t last_launch;
static uint64_t clock_ticks = 1000;
static int driver_object, device_object, context_object;

typedef struct { int signalled; uint64_t end; } stub_event_t;
typedef struct { uint8_t *code; size_t size; } stub_module_t;
typedef struct {
    stub_module_t *module; char name[128]; uint32_t group_size[3]; uint32_t arg_count;
    uint64_t arg_size[MAX_ARGS]; uint8_t arg_value[MAX_ARGS][MAX_ARG_BYTES];
} stub_kernel_t;

EXPORT void xhal_ze_stub_last_launch(stub_launch_t *out) { *out = last_launch; }

EXPORT ze_result_t zeInit(uint32_t flags) {
    (void)flags;
#ifdef STUB_MODE_INIT_FAILS
    return DEVICE_LOST;
#endif
    return OK;
}

EXPORT ze_result_t zeDriverGet(uint32_t *count, void **drivers) {
#ifdef STUB_MODE_NO_DRIVER
    *count = 0;
    return OK;
#endif
    if (drivers && *count >= 1) drivers[0] = &driver_object;
    *count = 1;
    return OK;
}

EXPORT ze_result_t zeDriverGetApiVersion(void *driver, uint32_t *version) {
    (void)driver;
    *version = (1u << 16) | 3; /* 1.3: no in-order flag, so the backend orders with barriers */
    return OK;
}

EXPORT ze_result_t zeDeviceGet(void *driver, uint32_t *count, void **devices) {
    (void)driver;
#ifdef STUB_MODE_NO_DEVICE
    *count = 0;
    return OK;
#endif
    if (devices && *count >= 1) devices[0] = &device_object;
    *count = 1;
    return OK;
}

EXPORT ze_result_t zeDeviceGetProperties(void *device, device_properties_t *p) {
    (void)device;
    if (FAILS("zeDeviceGetProperties")) return UNKNOWN;
    p->type = 1; p->vendorId = 0x8086; p->deviceId = 0x1234; p->flags = 1; /* integrated */
    p->maxMemAllocSize = 1u << 30; p->timerResolution = 2; p->timestampValidBits = 64;
    p->kernelTimestampValidBits = 32;
    for (int i = 0; i < 16; i++) p->uuid[i] = (uint8_t)(0xa0 + i);
    strcpy(p->name, "xhal Level Zero stub (host memory)");
    return OK;
}

EXPORT ze_result_t zeDeviceGetComputeProperties(void *device, compute_properties_t *p) {
    (void)device;
    p->maxTotalGroupSize = 1024; p->maxGroupSize[0] = 1024; p->maxGroupSize[1] = 1024; p->maxGroupSize[2] = 64;
    p->maxGroupCount[0] = p->maxGroupCount[1] = p->maxGroupCount[2] = 65535;
    p->maxSharedLocalMemory = 65536; p->numSubGroupSizes = 3;
    p->subGroupSizes[0] = 8; p->subGroupSizes[1] = 16; p->subGroupSizes[2] = 32;
    return OK;
}

EXPORT ze_result_t zeDeviceGetModuleProperties(void *device, module_properties_t *p) {
    (void)device;
    p->spirvVersionSupported = 0x10400; p->flags = 2; /* FP64 */ p->maxArgumentsSize = 2048;
    return OK;
}

EXPORT ze_result_t zeDeviceGetMemoryProperties(void *device, uint32_t *count, memory_properties_t *p) {
    (void)device;
    if (p && *count >= 1) { p[0].totalSize = 1ull << 31; strcpy(p[0].name, "host"); }
    *count = 1;
    return OK;
}

EXPORT ze_result_t zeDeviceGetCommandQueueGroupProperties(void *device, uint32_t *count, queue_group_properties_t *p) {
    (void)device;
    if (p && *count >= 1) { p[0].flags = 1 | 2; p[0].maxMemoryFillPatternSize = 128; p[0].numQueues = 1; }
    *count = 1;
    return OK;
}

EXPORT ze_result_t zeDevicePciGetPropertiesExt(void *device, pci_properties_t *p) {
    (void)device;
    p->domain = 0; p->bus = 3; p->device = 0; p->function = 0;
    return OK;
}

EXPORT ze_result_t zeContextCreate(void *driver, const void *desc, void **context) {
    (void)driver; (void)desc;
    if (FAILS("zeContextCreate")) return UNKNOWN;
    *context = &context_object;
    return OK;
}
EXPORT ze_result_t zeContextDestroy(void *context) { (void)context; return OK; }

static void *allocate(size_t size, size_t alignment) {
    if (alignment < 64) alignment = 64;
    return aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
}
EXPORT ze_result_t zeMemAllocDevice(void *context, const void *desc, size_t size, size_t alignment, void *device, void **out) {
    (void)context; (void)desc; (void)device;
    if (FAILS("zeMemAllocDevice")) return OUT_OF_DEVICE_MEMORY;
    *out = allocate(size, alignment);
    return *out ? OK : OUT_OF_DEVICE_MEMORY;
}
EXPORT ze_result_t zeMemAllocHost(void *context, const void *desc, size_t size, size_t alignment, void **out) {
    (void)context; (void)desc;
    *out = allocate(size, alignment);
    return *out ? OK : 0x70000002u;
}
EXPORT ze_result_t zeMemFree(void *context, void *pointer) { (void)context; free(pointer); return OK; }

EXPORT ze_result_t zeCommandListCreateImmediate(void *context, void *device, const void *desc, void **list) {
    (void)context; (void)device; (void)desc;
    *list = malloc(1);
    return OK;
}
EXPORT ze_result_t zeCommandListDestroy(void *list) { free(list); return OK; }

static void signal_event(void *event) {
    if (event) { ((stub_event_t *)event)->signalled = 1; ((stub_event_t *)event)->end = clock_ticks; }
    clock_ticks += 7;
}

EXPORT ze_result_t zeCommandListAppendMemoryCopy(void *list, void *to, const void *from, size_t size, void *signal, uint32_t n, void **wait) {
    (void)list; (void)n; (void)wait;
    if (FAILS("zeCommandListAppendMemoryCopy")) return INVALID_ARGUMENT;
    memcpy(to, from, size);
    signal_event(signal);
    return OK;
}
EXPORT ze_result_t zeCommandListAppendMemoryFill(void *list, void *to, const void *pattern, size_t pattern_size, size_t size, void *signal, uint32_t n, void **wait) {
    (void)list; (void)n; (void)wait;
    for (size_t at = 0; at < size; at += pattern_size) memcpy((uint8_t *)to + at, pattern, pattern_size);
    signal_event(signal);
    return OK;
}
EXPORT ze_result_t zeCommandListAppendBarrier(void *list, void *signal, uint32_t n, void **wait) {
    (void)list; (void)n; (void)wait;
    signal_event(signal);
    return OK;
}
EXPORT ze_result_t zeCommandListAppendWaitOnEvents(void *list, uint32_t n, void **events) {
    (void)list;
    for (uint32_t i = 0; i < n; i++) if (!((stub_event_t *)events[i])->signalled) return UNKNOWN;
    return OK;
}
EXPORT ze_result_t zeCommandListAppendLaunchKernel(void *list, void *kernel_handle, const group_count_t *groups, void *signal, uint32_t n, void **wait) {
    (void)list; (void)n; (void)wait;
    stub_kernel_t *kernel = kernel_handle;
    last_launch.launches++;
    last_launch.groups[0] = groups->x; last_launch.groups[1] = groups->y; last_launch.groups[2] = groups->z;
    memcpy(last_launch.group_size, kernel->group_size, sizeof kernel->group_size);
    last_launch.arg_count = kernel->arg_count;
    memcpy(last_launch.arg_size, kernel->arg_size, sizeof kernel->arg_size);
    memcpy(last_launch.arg_value, kernel->arg_value, sizeof kernel->arg_value);
    signal_event(signal);
    return OK;
}
#ifndef STUB_NO_HOST_SYNC
EXPORT ze_result_t zeCommandListHostSynchronize(void *list, uint64_t timeout) {
    (void)list; (void)timeout;
    if (FAILS("zeCommandListHostSynchronize")) return DEVICE_LOST;
    return OK;
}
#endif

EXPORT ze_result_t zeEventPoolCreate(void *context, const void *desc, uint32_t n, void **devices, void **pool) {
    (void)context; (void)desc; (void)n; (void)devices;
    *pool = malloc(1);
    return OK;
}
EXPORT ze_result_t zeEventPoolDestroy(void *pool) { free(pool); return OK; }
EXPORT ze_result_t zeEventCreate(void *pool, const void *desc, void **event) {
    (void)pool; (void)desc;
    *event = calloc(1, sizeof(stub_event_t));
    return OK;
}
EXPORT ze_result_t zeEventDestroy(void *event) { free(event); return OK; }
EXPORT ze_result_t zeEventHostSynchronize(void *event, uint64_t timeout) {
    if (FAILS("zeEventHostSynchronize")) return DEVICE_LOST;
    if (((stub_event_t *)event)->signalled) return OK;
    return timeout == 0 ? NOT_READY : UNKNOWN; /* nothing would ever signal it */
}
EXPORT ze_result_t zeEventQueryStatus(void *event) { return ((stub_event_t *)event)->signalled ? OK : NOT_READY; }
EXPORT ze_result_t zeEventQueryKernelTimestamp(void *event, kernel_timestamp_t *out) {
    stub_event_t *e = event;
    out->globalStart = out->globalEnd = out->contextStart = out->contextEnd = e->end;
    return OK;
}

/* SPIR-V: the function id of OpEntryPoint `name`, and the parameter count of that function. */
static int spirv_entry(const stub_module_t *m, const char *name, uint32_t *parameters) {
    const uint32_t *w = (const uint32_t *)m->code;
    size_t n = m->size / 4, at = 5;
    uint32_t function = 0;
    int found = 0, counting = 0;
    *parameters = 0;
    while (at < n) {
        uint32_t count = w[at] >> 16, op = w[at] & 0xffff;
        if (count == 0 || at + count > n) break;
        if (op == 15 && count > 3 && strcmp((const char *)&w[at + 3], name) == 0) { function = w[at + 2]; found = 1; }
        if (op == 54) counting = found && w[at + 2] == function;
        else if (op == 55) { if (counting) (*parameters)++; }
        else counting = 0;
        at += count;
    }
    return found;
}

EXPORT ze_result_t zeModuleCreate(void *context, void *device, const module_desc_t *desc, void **module, void **log) {
    (void)context; (void)device;
    if (FAILS("zeModuleCreate")) {
        if (log) *log = strdup("stub compiler: error: the stub cannot build this module");
        return MODULE_BUILD_FAILURE;
    }
    if (log) *log = strdup("");
    stub_module_t *m = malloc(sizeof *m);
    m->code = malloc(desc->inputSize); m->size = desc->inputSize;
    memcpy(m->code, desc->pInputModule, desc->inputSize);
    *module = m;
    last_launch.modules_alive++;
    return OK;
}
EXPORT ze_result_t zeModuleDestroy(void *module) {
    stub_module_t *m = module;
    free(m->code); free(m);
    last_launch.modules_alive--;
    return OK;
}
EXPORT ze_result_t zeModuleBuildLogGetString(void *log, size_t *size, char *text) {
    size_t length = strlen(log) + 1;
    if (text) memcpy(text, log, *size < length ? *size : length);
    *size = length;
    return OK;
}
EXPORT ze_result_t zeModuleBuildLogDestroy(void *log) { free(log); return OK; }
EXPORT ze_result_t zeModuleGetKernelNames(void *module, uint32_t *count, const char **names) {
    const stub_module_t *m = module;
    const uint32_t *w = (const uint32_t *)m->code;
    size_t n = m->size / 4, at = 5;
    uint32_t found = 0;
    while (at < n) {
        uint32_t words = w[at] >> 16, op = w[at] & 0xffff;
        if (words == 0 || at + words > n) break;
        if (op == 15 && words > 3) { if (names && found < *count) names[found] = (const char *)&w[at + 3]; found++; }
        at += words;
    }
    if (!names) *count = found;
    return OK;
}
EXPORT ze_result_t zeKernelCreate(void *module, const kernel_desc_t *desc, void **kernel) {
    uint32_t parameters;
    if (!spirv_entry(module, desc->pKernelName, &parameters)) return INVALID_KERNEL_NAME;
    if (parameters > MAX_ARGS) return UNKNOWN;
    stub_kernel_t *k = calloc(1, sizeof *k);
    k->module = module;
    strncpy(k->name, desc->pKernelName, sizeof k->name - 1);
    k->arg_count = parameters;
    *kernel = k;
    last_launch.kernels_alive++;
    return OK;
}
EXPORT ze_result_t zeKernelDestroy(void *kernel) { free(kernel); last_launch.kernels_alive--; return OK; }
EXPORT ze_result_t zeKernelSetGroupSize(void *kernel, uint32_t x, uint32_t y, uint32_t z) {
    stub_kernel_t *k = kernel;
    k->group_size[0] = x; k->group_size[1] = y; k->group_size[2] = z;
    return OK;
}
EXPORT ze_result_t zeKernelSetArgumentValue(void *kernel, uint32_t index, size_t size, const void *value) {
    stub_kernel_t *k = kernel;
    if (index >= k->arg_count) return 0x78000015u;
    if (size > MAX_ARG_BYTES) return 0x78000016u;
    k->arg_size[index] = size;
    memcpy(k->arg_value[index], value, size);
    return OK;
}
EXPORT ze_result_t zeKernelGetProperties(void *kernel, kernel_properties_t *p) {
    stub_kernel_t *k = kernel;
    p->numKernelArgs = k->arg_count;
    return OK;
}
