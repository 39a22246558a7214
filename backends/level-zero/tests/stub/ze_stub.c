/*
 * A test double of the Level Zero loader for xhal's Level Zero backend tests: it exports the
 * entry points the backend resolves and pretends to be one integrated GPU whose memory is
 * host memory. Commands appended to an immediate list run synchronously when appended (copies
 * and fills really copy and fill); a kernel launch runs nothing, but records its group count,
 * group size and argument bytes, which a test reads back with xhal_ze_stub_last_launch.
 *
 * Regular command lists (zeCommandListCreate) behave as a driver's do: appending records a
 * command, taking a launch's arguments and group size as they are at the append; a closed
 * list refuses appends until it is reset; only a closed list can be executed, through
 * zeCommandListImmediateAppendCommandListsExp (the ZE_experimental_immediate_command_list_append
 * extension, listed by zeDriverGetExtensionProperties), and its commands run then, each time
 * it is executed. A list created without ZE_COMMAND_LIST_FLAG_IN_ORDER may run the commands
 * between two barriers in any order, and this device runs them last first, so that a missing
 * barrier changes results.
 *
 * Built by the tests with `cc -shared -fPIC`, once per scenario, with these macros:
 *   STUB_MODE_NO_DRIVER   zeDriverGet lists no driver
 *   STUB_MODE_NO_DEVICE   the driver lists no device
 *   STUB_MODE_INIT_FAILS  zeInit answers ZE_RESULT_ERROR_DEVICE_LOST
 *   STUB_FAIL="zeXxx"     that entry point fails (with the error a driver would give it)
 *   STUB_NO_HOST_SYNC     zeCommandListHostSynchronize is not exported (an API 1.5 loader)
 *   STUB_NO_APPEND_LISTS  zeCommandListImmediateAppendCommandListsExp is not exported (a loader
 *                         older than API 1.9)
 *   STUB_NO_APPEND_LISTS_EXTENSION  the driver does not list the extension, and the entry point
 *                         answers ZE_RESULT_ERROR_UNSUPPORTED_FEATURE (a new loader, an old driver)
 *   STUB_EXTENSION_COUNT_LIES  zeDriverGetExtensionProperties counts 2^32 - 1 extensions (a
 *                         broken driver the plugin must not allocate for)
 *   STUB_EXECUTE          the emulated device: kernels really run (below)
 *
 * A test may also make the next calls of one entry point fail while it runs, with
 * xhal_ze_stub_fail_next (the entry points that call fail_next below), and reads how many
 * regular lists and memory allocations are alive in the record of xhal_ze_stub_last_launch.
 * With xhal_ze_stub_defer_completion(1), executed regular lists still run at once, but the
 * event their execution signals is signalled only by the next zeCommandListHostSynchronize:
 * the list may still be running until then, as on a device that is behind the host.
 *
 * STUB_EXECUTE makes this the emulated Level Zero device that `make level-zero-emulator`
 * builds (../emulator.md). Kernels run on an OpenCL device that takes SPIR 1.2 bitcode (PoCL):
 * a module's SPIR-V becomes bitcode through `llvm-spirv -r`, since such a device reads no
 * SPIR-V IL. Device memory is that device's fine-grained buffer SVM, so the host reaches it
 * as it is and copies and fills stay memcpy. A launch waits for its kernel, so every command
 * still completes as it is appended. Without the OpenCL device or llvm-spirv the driver lists
 * no device, and zeDriverGetLastErrorDescription says why.
 *
 * Structures are declared here from ze_api.h (1.x), and OpenCL's from cl.h, so building needs
 * neither's headers.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef STUB_EXECUTE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#endif

typedef uint32_t ze_result_t;
#define OK 0u
#define NOT_READY 1u
#define DEVICE_LOST 0x70000001u
#define OUT_OF_DEVICE_MEMORY 0x70000003u
#define MODULE_BUILD_FAILURE 0x70000004u
#define INVALID_ARGUMENT 0x78000004u
#define INVALID_KERNEL_NAME 0x78000011u
#define UNKNOWN 0x7ffffffeu
#define OUT_OF_HOST_MEMORY 0x70000002u
#define DEPENDENCY_UNAVAILABLE 0x70020000u
#define INVALID_SIZE 0x78000008u
#define UNSUPPORTED_SIZE 0x78000009u
#define INVALID_GROUP_SIZE_DIMENSION 0x78000013u
#define INVALID_KERNEL_ARGUMENT_INDEX 0x78000015u
#define INVALID_KERNEL_ARGUMENT_SIZE 0x78000016u
#define UNSUPPORTED_FEATURE 0x78000003u
#define INVALID_NULL_POINTER 0x78000007u
#define INVALID_ENUMERATION 0x7800000cu

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
typedef struct { uint32_t stype; const void *pNext; uint32_t ordinal, index, flags, mode, priority; } queue_desc_t;
typedef struct { uint32_t stype; const void *pNext; uint32_t commandQueueGroupOrdinal, flags; } list_desc_t;
typedef struct { char name[256]; uint32_t version; } extension_properties_t;
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
    /* Regular command lists created and not yet destroyed; allocations (device and host) not
     * yet freed. */
    uint32_t regular_lists_alive, allocations_alive;
} stub_launch_t;

static stub_launch_t last_launch;
static uint64_t clock_ticks = 1000;
static int driver_object, device_object, context_object;

typedef struct { int signalled; uint64_t end; } stub_event_t;
typedef struct { uint8_t *code; size_t size; void *program; } stub_module_t;
/* What a launch runs with: a kernel's arguments and group size as they are set, or a copy of
 * them that a regular list's launch took when it was appended. */
typedef struct {
    uint32_t count, group_size[3];
    uint64_t size[MAX_ARGS];
    uint8_t set[MAX_ARGS];
    uint8_t *bytes[MAX_ARGS];
} arguments_t;
typedef struct {
    stub_module_t *module; char name[128];
    arguments_t arguments;
    /* Which parameters are CrossWorkgroup pointers. */
    uint8_t pointer[MAX_ARGS];
    /* Held while the arguments change and while a launch runs with them: the emulator sets
     * them on one OpenCL kernel, which launches from several lists share. */
    pthread_mutex_t lock;
    void *cl_kernel;
} stub_kernel_t;

/* A command of a regular list, run when the list is executed. */
typedef enum { COMMAND_COPY, COMMAND_FILL, COMMAND_BARRIER, COMMAND_LAUNCH, COMMAND_WAIT } command_kind_t;
typedef struct {
    command_kind_t kind;
    void *signal;
    uint32_t wait_count;
    void **waits;
    void *to;
    const void *from; /* a copy's source, a fill's pattern (read when the fill runs) */
    size_t size, pattern_size;
    stub_kernel_t *kernel;
    group_count_t groups;
    arguments_t arguments;
} command_t;
typedef struct {
    int immediate, closed, in_order;
    void *queue;
    command_t *commands;
    size_t count, room;
} stub_list_t;

EXPORT void xhal_ze_stub_last_launch(stub_launch_t *out) { *out = last_launch; }

static void arguments_free(arguments_t *a) {
    for (uint32_t i = 0; i < MAX_ARGS; i++) {
        free(a->bytes[i]);
        a->bytes[i] = NULL;
    }
}

/* `from` copied into `to`, with bytes of its own: what a launch appended to a regular list
 * keeps, so that arguments set afterwards do not reach it. 0 without memory. */
static int arguments_copy(arguments_t *to, const arguments_t *from) {
    *to = *from;
    for (uint32_t i = 0; i < MAX_ARGS; i++) to->bytes[i] = NULL;
    for (uint32_t i = 0; i < from->count && i < MAX_ARGS; i++) {
        if (!from->bytes[i]) continue;
        if (!(to->bytes[i] = malloc(from->size[i] ? from->size[i] : 1))) {
            arguments_free(to);
            return 0;
        }
        memcpy(to->bytes[i], from->bytes[i], from->size[i]);
    }
    return 1;
}

/* What the tests read back: a launch ran with `a` over `groups`. */
static void record_launch(const arguments_t *a, const group_count_t *groups) {
    last_launch.launches++;
    last_launch.groups[0] = groups->x; last_launch.groups[1] = groups->y; last_launch.groups[2] = groups->z;
    memcpy(last_launch.group_size, a->group_size, sizeof a->group_size);
    last_launch.arg_count = a->count;
    memset(last_launch.arg_size, 0, sizeof last_launch.arg_size);
    memset(last_launch.arg_value, 0, sizeof last_launch.arg_value);
    for (uint32_t i = 0; i < a->count && i < MAX_ARGS; i++) {
        last_launch.arg_size[i] = a->size[i];
        if (a->bytes[i]) memcpy(last_launch.arg_value[i], a->bytes[i], a->size[i] < MAX_ARG_BYTES ? a->size[i] : MAX_ARG_BYTES);
    }
}

/* What zeDriverGetLastErrorDescription answers: per thread, as Level Zero specifies. */
static __thread char last_error[2048];

static ze_result_t failure(ze_result_t code, const char *format, ...) __attribute__((format(printf, 2, 3)));
static ze_result_t failure(ze_result_t code, const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(last_error, sizeof last_error, format, arguments);
    va_end(arguments);
    return code;
}

/* The failure a test asked for with xhal_ze_stub_fail_next: the entry point, its result, and
 * how many more calls of it fail. */
static char fail_name[128];
static ze_result_t fail_code;
static uint32_t fail_times;

EXPORT void xhal_ze_stub_fail_next(const char *name, ze_result_t code, uint32_t times) {
    snprintf(fail_name, sizeof fail_name, "%s", name);
    fail_code = code;
    fail_times = times;
}

/* OK, or the result of a call of `name` that the test made fail. */
static ze_result_t fail_next(const char *name) {
    if (fail_times == 0 || strcmp(fail_name, name) != 0) return OK;
    fail_times--;
    return failure(fail_code, "%s failed because the test asked it to", name);
}

/* With completion deferred: the events executions of regular lists signal at the next host
 * synchronization. */
#define MAX_DEFERRED 256
static int defer_completion;
static void *deferred[MAX_DEFERRED];
static uint32_t deferred_count;

EXPORT void xhal_ze_stub_defer_completion(int on) { defer_completion = on; }

EXPORT ze_result_t zeDriverGetLastErrorDescription(void *driver, const char **text) {
    (void)driver;
    *text = last_error;
    return OK;
}

/* SPIR-V: the function id of OpEntryPoint `name`, the parameter count of that function and,
 * in `pointer`, which parameters are pointers to CrossWorkgroup memory (storage class 5):
 * the buffers, which OpenCL takes as SVM pointers, unlike the by-value parameters. */
static int spirv_entry(const stub_module_t *m, const char *name, uint32_t *parameters, uint8_t pointer[MAX_ARGS]) {
    const uint32_t *w = (const uint32_t *)m->code;
    size_t n = m->size / 4, at = 5;
    uint32_t function = 0, bound = n > 3 ? w[3] : 0;
    int found = 0, counting = 0;
    uint8_t *global_pointer = calloc(bound + 1, 1);
    *parameters = 0;
    memset(pointer, 0, MAX_ARGS);
    while (global_pointer && at < n) {
        uint32_t count = w[at] >> 16, op = w[at] & 0xffff;
        if (count == 0 || at + count > n) break;
        if (op == 15 && count > 3 && strcmp((const char *)&w[at + 3], name) == 0) { function = w[at + 2]; found = 1; }
        if (op == 32 && count > 3 && w[at + 1] <= bound) global_pointer[w[at + 1]] = w[at + 2] == 5;
        if (op == 54) counting = found && w[at + 2] == function;
        else if (op == 55) {
            if (counting) {
                if (*parameters < MAX_ARGS && w[at + 1] <= bound) pointer[*parameters] = global_pointer[w[at + 1]];
                (*parameters)++;
            }
        }
        else counting = 0;
        at += count;
    }
    free(global_pointer);
    return found;
}

#ifdef STUB_EXECUTE
/* The emulated device. OpenCL is opened with dlopen; its handles are opaque pointers. */
typedef int32_t cl_int;
typedef void *cl_handle;
#define CL_DEVICE_TYPE_ALL 0xffffffffull
#define CL_PLATFORM_VERSION 0x0901
#define CL_DEVICE_MAX_WORK_GROUP_SIZE 0x1004
#define CL_DEVICE_MAX_WORK_ITEM_SIZES 0x1005
#define CL_DEVICE_MAX_MEM_ALLOC_SIZE 0x1010
#define CL_DEVICE_MAX_PARAMETER_SIZE 0x1017
#define CL_DEVICE_GLOBAL_MEM_SIZE 0x101f
#define CL_DEVICE_LOCAL_MEM_SIZE 0x1023
#define CL_DEVICE_NAME 0x102b
#define CL_DEVICE_EXTENSIONS 0x1030
#define CL_DEVICE_SVM_CAPABILITIES 0x1053
#define CL_DEVICE_SVM_FINE_GRAIN_BUFFER (1ull << 1)
#define CL_MEM_READ_WRITE (1ull << 0)
#define CL_MEM_SVM_FINE_GRAIN_BUFFER (1ull << 10)
#define CL_PROGRAM_BUILD_LOG 0x1183
#define CL_OUT_OF_RESOURCES (-5)
#define CL_OUT_OF_HOST_MEMORY (-6)
#define CL_INVALID_ARG_SIZE (-51)

#define CL_FUNCTIONS(X)                                                                                              \
    X(GetPlatformIDs, cl_int, uint32_t, cl_handle *, uint32_t *)                                                     \
    X(GetPlatformInfo, cl_int, cl_handle, uint32_t, size_t, void *, size_t *)                                        \
    X(GetDeviceIDs, cl_int, cl_handle, uint64_t, uint32_t, cl_handle *, uint32_t *)                                  \
    X(GetDeviceInfo, cl_int, cl_handle, uint32_t, size_t, void *, size_t *)                                          \
    X(CreateContext, cl_handle, const intptr_t *, uint32_t, const cl_handle *, void *, void *, cl_int *)             \
    X(CreateCommandQueueWithProperties, cl_handle, cl_handle, cl_handle, const uint64_t *, cl_int *)                 \
    X(ReleaseCommandQueue, cl_int, cl_handle)                                                                        \
    X(SVMAlloc, void *, cl_handle, uint64_t, size_t, uint32_t)                                                       \
    X(SVMFree, void, cl_handle, void *)                                                                              \
    X(CreateProgramWithBinary, cl_handle, cl_handle, uint32_t, const cl_handle *, const size_t *,                    \
      const unsigned char **, cl_int *, cl_int *)                                                                    \
    X(BuildProgram, cl_int, cl_handle, uint32_t, const cl_handle *, const char *, void *, void *)                    \
    X(GetProgramBuildInfo, cl_int, cl_handle, cl_handle, uint32_t, size_t, void *, size_t *)                         \
    X(ReleaseProgram, cl_int, cl_handle)                                                                             \
    X(CreateKernel, cl_handle, cl_handle, const char *, cl_int *)                                                    \
    X(ReleaseKernel, cl_int, cl_handle)                                                                              \
    X(SetKernelArg, cl_int, cl_handle, uint32_t, size_t, const void *)                                               \
    X(SetKernelArgSVMPointer, cl_int, cl_handle, uint32_t, const void *)                                             \
    X(EnqueueNDRangeKernel, cl_int, cl_handle, cl_handle, uint32_t, const size_t *, const size_t *, const size_t *,  \
      uint32_t, const cl_handle *, cl_handle *)                                                                      \
    X(Finish, cl_int, cl_handle)
#define CL_FIELD(name, result, ...) result (*name)(__VA_ARGS__);
static struct { CL_FUNCTIONS(CL_FIELD) } cl;

static struct {
    int running;
    /* Why the device does not run, when it does not. */
    char refusal[1536];
    cl_handle device, context;
    char llvm_spirv[4096], device_name[200];
    uint64_t total, max_allocation, local_memory, parameter_bytes;
    size_t group_invocations, group_size[3];
    int fp64, int64_atomics;
    uint64_t allocated;
} emulator;
static pthread_once_t emulator_once = PTHREAD_ONCE_INIT;

static void refuse(const char *format, ...) __attribute__((format(printf, 1, 2)));
static void refuse(const char *format, ...) {
    int used = snprintf(emulator.refusal, sizeof emulator.refusal, "the xhal Level Zero emulator cannot run: ");
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(emulator.refusal + used, sizeof emulator.refusal - (size_t)used, format, arguments);
    va_end(arguments);
}

/* Whether the space-separated `list` holds `word`. */
static int has_word(const char *list, const char *word) {
    size_t length = strlen(word);
    for (const char *at = strstr(list, word); at; at = strstr(at + 1, word))
        if ((at == list || at[-1] == ' ') && (at[length] == ' ' || at[length] == 0)) return 1;
    return 0;
}

/* `name` as an executable path: itself when it holds a slash, else the first on PATH. */
static int find_program(const char *name, char *path, size_t size) {
    if (strchr(name, '/')) {
        snprintf(path, size, "%s", name);
        return access(path, X_OK) == 0;
    }
    const char *folders = getenv("PATH");
    if (!folders || !*folders) folders = "/usr/local/bin:/usr/bin:/bin";
    for (const char *at = folders; *at;) {
        size_t length = strcspn(at, ":");
        snprintf(path, size, "%.*s/%s", (int)length, length ? at : ".", name);
        if (access(path, X_OK) == 0) return 1;
        at += length;
        if (*at == ':') at++;
    }
    return 0;
}

static uint64_t device_u64(uint32_t what) {
    uint64_t value = 0;
    cl.GetDeviceInfo(emulator.device, what, sizeof value, &value, NULL);
    return value;
}

static void emulator_start(void) {
    const char *library_name = getenv("STUB_OPENCL_LIBRARY");
    if (!library_name || !*library_name) library_name = "libOpenCL.so.1";
    void *library = dlopen(library_name, RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        refuse("the OpenCL library %s does not load (%s); install an OpenCL loader and PoCL "
               "(apt install ocl-icd-libopencl1 pocl-opencl-icd)", library_name, dlerror());
        return;
    }
#define CL_RESOLVE(name, ...)                                                                                \
    if (!(*(void **)&cl.name = dlsym(library, "cl" #name))) {                                                \
        refuse("the OpenCL library %s has no cl" #name "; the emulator needs OpenCL 2.0 or later", library_name); \
        return;                                                                                              \
    }
    CL_FUNCTIONS(CL_RESOLVE)
    cl_handle platforms[16], devices[16];
    uint32_t platform_count = 0, seen = 0;
    char platform_version[256] = "";
    if (cl.GetPlatformIDs(16, platforms, &platform_count) != 0) platform_count = 0;
    for (uint32_t p = 0; p < platform_count && p < 16 && !emulator.device; p++) {
        uint32_t device_count = 0;
        if (cl.GetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 16, devices, &device_count) != 0) continue;
        for (uint32_t d = 0; d < device_count && d < 16; d++) {
            static char extensions[1 << 16];
            uint64_t svm = 0;
            seen++;
            if (cl.GetDeviceInfo(devices[d], CL_DEVICE_EXTENSIONS, sizeof extensions, extensions, NULL) != 0) continue;
            if (cl.GetDeviceInfo(devices[d], CL_DEVICE_SVM_CAPABILITIES, sizeof svm, &svm, NULL) != 0) svm = 0;
            if (has_word(extensions, "cl_khr_spir") && (svm & CL_DEVICE_SVM_FINE_GRAIN_BUFFER)) {
                emulator.device = devices[d];
                emulator.fp64 = has_word(extensions, "cl_khr_fp64");
                emulator.int64_atomics = has_word(extensions, "cl_khr_int64_base_atomics") &&
                                         has_word(extensions, "cl_khr_int64_extended_atomics");
                cl.GetPlatformInfo(platforms[p], CL_PLATFORM_VERSION, sizeof platform_version, platform_version, NULL);
                break;
            }
        }
    }
    if (!emulator.device) {
        if (seen == 0)
            refuse("the OpenCL library %s lists no device; kernels run on PoCL (apt install pocl-opencl-icd)",
                   library_name);
        else
            refuse("none of the %u OpenCL device(s) here takes SPIR 1.2 bitcode (cl_khr_spir) with fine-grained "
                   "buffer SVM, which kernels run on; PoCL does (apt install pocl-opencl-icd)", seen);
        return;
    }
    /* Bitcode is read by the device's own LLVM, which reads no newer LLVM's: the translator of
     * the same LLVM version comes first. */
    const char *chosen = getenv("STUB_LLVM_SPIRV");
    const char *llvm = strstr(platform_version, "LLVM ");
    int major = llvm ? atoi(llvm + 5) : 0;
    char versioned[32];
    snprintf(versioned, sizeof versioned, "llvm-spirv-%d", major);
    int found = chosen && *chosen ? find_program(chosen, emulator.llvm_spirv, sizeof emulator.llvm_spirv)
                                  : (major > 0 && find_program(versioned, emulator.llvm_spirv, sizeof emulator.llvm_spirv)) ||
                                        find_program("llvm-spirv", emulator.llvm_spirv, sizeof emulator.llvm_spirv);
    if (!found) {
        if (chosen && *chosen)
            refuse("STUB_LLVM_SPIRV names %s, which is not an executable program", chosen);
        else if (major > 0)
            refuse("neither %s nor llvm-spirv is on PATH; the emulator translates each module's SPIR-V to SPIR "
                   "bitcode with it (apt install llvm-spirv-%d, the LLVM of the OpenCL device)", versioned, major);
        else
            refuse("llvm-spirv is not on PATH; the emulator translates each module's SPIR-V to SPIR bitcode with "
                   "it (apt install llvm-spirv-15, or the version of the OpenCL device's LLVM)");
        return;
    }
    cl_int error = 0;
    emulator.context = cl.CreateContext(NULL, 1, &emulator.device, NULL, NULL, &error);
    if (error || !emulator.context) {
        refuse("clCreateContext failed on the OpenCL device: OpenCL error %d", error);
        return;
    }
    char name[160] = "";
    cl.GetDeviceInfo(emulator.device, CL_DEVICE_NAME, sizeof name, name, NULL);
    snprintf(emulator.device_name, sizeof emulator.device_name, "xhal Level Zero emulator on OpenCL %s", name);
    const char *mib = getenv("STUB_MEMORY_MIB");
    uint64_t budget = (mib && *mib ? strtoull(mib, NULL, 10) : 1024) << 20;
    uint64_t global = device_u64(CL_DEVICE_GLOBAL_MEM_SIZE);
    emulator.total = global && global < budget ? global : budget;
    emulator.max_allocation = device_u64(CL_DEVICE_MAX_MEM_ALLOC_SIZE);
    if (!emulator.max_allocation || emulator.max_allocation > emulator.total / 2) emulator.max_allocation = emulator.total / 2;
    emulator.local_memory = device_u64(CL_DEVICE_LOCAL_MEM_SIZE);
    emulator.parameter_bytes = device_u64(CL_DEVICE_MAX_PARAMETER_SIZE);
    cl.GetDeviceInfo(emulator.device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof emulator.group_invocations,
                     &emulator.group_invocations, NULL);
    cl.GetDeviceInfo(emulator.device, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof emulator.group_size, emulator.group_size, NULL);
    emulator.running = 1;
}

static int emulator_running(void) {
    pthread_once(&emulator_once, emulator_start);
    return emulator.running;
}

/* Device and host memory alike are fine-grained SVM, which the host reads and writes as it is.
 * Every live allocation is listed, so that each address the plugin hands to a command can be
 * checked to lie in memory it still holds, as Level Zero's validation layer checks. */
typedef struct allocation { uint8_t *start; size_t size; int device_memory; struct allocation *next; } allocation_t;
static allocation_t *allocations;
static pthread_mutex_t allocations_lock = PTHREAD_MUTEX_INITIALIZER;

static ze_result_t emulator_allocate(size_t size, size_t alignment, int device_memory, void **out) {
    *out = NULL;
    if (alignment < 64) alignment = 64;
    if (alignment & (alignment - 1)) return failure(0x7800000au, "alignment %zu is not a power of two", alignment);
    if (device_memory && size > emulator.max_allocation)
        return failure(UNSUPPORTED_SIZE, "%zu bytes is more than the largest allocation, %llu bytes", size,
                       (unsigned long long)emulator.max_allocation);
    allocation_t *record = malloc(sizeof *record);
    if (!record) return failure(OUT_OF_HOST_MEMORY, "no host memory for the allocation's record");
    pthread_mutex_lock(&allocations_lock);
    ze_result_t result = OK;
    if (device_memory && emulator.allocated + size > emulator.total)
        result = failure(OUT_OF_DEVICE_MEMORY, "%zu more bytes do not fit in the device's %llu bytes", size,
                         (unsigned long long)emulator.total);
    else if (!(record->start = cl.SVMAlloc(emulator.context, CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER,
                                           size ? size : 1, (uint32_t)alignment)))
        result = failure(device_memory ? OUT_OF_DEVICE_MEMORY : OUT_OF_HOST_MEMORY, "clSVMAlloc gave no %zu bytes", size);
    if (result == OK) {
        record->size = size;
        record->device_memory = device_memory;
        record->next = allocations;
        allocations = record;
        if (device_memory) emulator.allocated += size;
        *out = record->start;
    } else {
        free(record);
    }
    pthread_mutex_unlock(&allocations_lock);
    return result;
}

static ze_result_t emulator_free(void *pointer) {
    pthread_mutex_lock(&allocations_lock);
    allocation_t **link = &allocations;
    while (*link && (*link)->start != pointer) link = &(*link)->next;
    allocation_t *record = *link;
    if (record) {
        *link = record->next;
        if (record->device_memory) emulator.allocated -= record->size;
    }
    pthread_mutex_unlock(&allocations_lock);
    if (!record) return failure(INVALID_ARGUMENT, "zeMemFree of %p, which is no live allocation", pointer);
    cl.SVMFree(emulator.context, record->start);
    free(record);
    return OK;
}

/* Whether the `size` bytes at `pointer` lie in one live allocation (of device memory, when
 * `device_only`); says which command did not, and why, when they do not. */
static int emulator_owns(const void *pointer, size_t size, int device_only, const char *what) {
    const uint8_t *at = pointer;
    int owned = 0, found = 0;
    pthread_mutex_lock(&allocations_lock);
    for (allocation_t *record = allocations; record && !found; record = record->next) {
        if (at >= record->start && at < record->start + (record->size ? record->size : 1)) {
            found = 1;
            owned = size <= record->size - (size_t)(at - record->start) && (record->device_memory || !device_only);
        }
    }
    pthread_mutex_unlock(&allocations_lock);
    if (!found) failure(INVALID_ARGUMENT, "%s: %p is in no live allocation", what, pointer);
    else if (!owned) failure(INVALID_ARGUMENT, "%s: the %zu bytes at %p are not all in one live %s allocation", what,
                             size, pointer, device_only ? "device" : "");
    return owned;
}

static uint64_t now_nanoseconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static char *read_file(const char *path, size_t *size) {
    FILE *file = fopen(path, "rb");
    if (!file) return NULL;
    char *bytes = NULL;
    size_t used = 0, room = 0, got;
    do {
        if (used + 4096 + 1 > room) {
            room = (used + 4096 + 1) * 2;
            char *larger = realloc(bytes, room);
            if (!larger) { free(bytes); fclose(file); return NULL; }
            bytes = larger;
        }
        got = fread(bytes + used, 1, room - used - 1, file);
        used += got;
    } while (got > 0);
    fclose(file);
    bytes[used] = 0;
    if (size) *size = used;
    return bytes;
}

/* Runs the translator on `input`, its output and messages going to files; its exit status,
 * 256 plus the signal that killed it, or -1 where it could not be started. */
static int translate(const char *input, const char *output, const char *messages) {
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    /* The process's own standard streams may be a protocol (xhal-cts workers talk on stdout). */
    posix_spawn_file_actions_addopen(&files, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&files, 1, messages, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&files, 1, 2);
    char *arguments[] = {emulator.llvm_spirv, "-r", "--spirv-target-env=CL1.2", (char *)input, "-o", (char *)output, NULL};
    extern char **environ;
    pid_t child;
    int started = posix_spawn(&child, emulator.llvm_spirv, &files, NULL, arguments, environ);
    posix_spawn_file_actions_destroy(&files);
    if (started != 0) return -1;
    int status;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 256 + WTERMSIG(status);
}

/* The module's SPIR-V through llvm-spirv -r to SPIR 1.2 bitcode, built for the OpenCL device
 * as hal/kernel/tests/spirv_kernel/differential.c builds it. */
static ze_result_t emulator_build(stub_module_t *m, char **log) {
    const char *temporary = getenv("TMPDIR");
    char folder[4096], spirv[4200], bitcode[4200], messages[4200];
    snprintf(folder, sizeof folder, "%s/xhal-ze-emulator-XXXXXX", temporary && *temporary ? temporary : "/tmp");
    if (!mkdtemp(folder)) {
        *log = strdup("the emulator could not make a temporary folder for llvm-spirv");
        return failure(OUT_OF_HOST_MEMORY, "mkdtemp failed: %s", strerror(errno));
    }
    snprintf(spirv, sizeof spirv, "%s/module.spv", folder);
    snprintf(bitcode, sizeof bitcode, "%s/module.bc", folder);
    snprintf(messages, sizeof messages, "%s/llvm-spirv.log", folder);
    FILE *file = fopen(spirv, "wb");
    int written = file && fwrite(m->code, 1, m->size, file) == m->size;
    if (file) written = fclose(file) == 0 && written;
    int status = written ? translate(spirv, bitcode, messages) : -1;
    size_t bitcode_size = 0;
    char *said = read_file(messages, NULL);
    unsigned char *bits = status == 0 ? (unsigned char *)read_file(bitcode, &bitcode_size) : NULL;
    unlink(spirv); unlink(bitcode); unlink(messages); rmdir(folder);
    if (!bits) {
        const char *how = status < 0 ? "it could not be run" : status >= 256 ? "killed by signal" : "exit status";
        if (asprintf(log, "%s -r could not translate the module's SPIR-V to SPIR 1.2 bitcode (%s %d):\n%s",
                     emulator.llvm_spirv, how, status >= 256 ? status - 256 : status, said ? said : "") < 0)
            *log = NULL;
        free(said);
        return failure(MODULE_BUILD_FAILURE, "llvm-spirv -r failed on the module");
    }
    free(said);
    cl_int error = 0, binary_error = 0;
    const unsigned char *binaries[1] = {bits};
    m->program = cl.CreateProgramWithBinary(emulator.context, 1, &emulator.device, &bitcode_size, binaries,
                                            &binary_error, &error);
    free(bits);
    if (!error && !binary_error) error = cl.BuildProgram(m->program, 1, &emulator.device, "-x spir -spir-std=1.2", NULL, NULL);
    if (error || binary_error) {
        static __thread char build_log[1 << 16];
        build_log[0] = 0;
        if (m->program) {
            cl.GetProgramBuildInfo(m->program, emulator.device, CL_PROGRAM_BUILD_LOG, sizeof build_log, build_log, NULL);
            cl.ReleaseProgram(m->program);
            m->program = NULL;
        }
        if (asprintf(log, "the OpenCL device did not build the SPIR 1.2 bitcode llvm-spirv made of the module (OpenCL "
                          "error %d):\n%s", error ? error : binary_error, build_log) < 0)
            *log = NULL;
        return failure(MODULE_BUILD_FAILURE, "the OpenCL device did not build the module");
    }
    return OK;
}

/* Sets one argument on the OpenCL kernel, whose own size check is the one a driver makes;
 * the caller holds the kernel's lock. */
static ze_result_t emulator_apply_argument(stub_kernel_t *k, uint32_t index, size_t size, const void *value) {
    cl_int error;
    if (k->pointer[index]) {
        if (size != sizeof(void *))
            return failure(INVALID_KERNEL_ARGUMENT_SIZE, "argument %u of kernel %s is a pointer, not %zu bytes", index,
                           k->name, size);
        error = cl.SetKernelArgSVMPointer(k->cl_kernel, index, value ? *(void *const *)value : NULL);
    } else {
        error = cl.SetKernelArg(k->cl_kernel, index, size, value);
    }
    if (error == CL_INVALID_ARG_SIZE)
        return failure(INVALID_KERNEL_ARGUMENT_SIZE, "argument %u of kernel %s does not take %zu bytes", index, k->name, size);
    if (error) return failure(INVALID_ARGUMENT, "setting argument %u of kernel %s: OpenCL error %d", index, k->name, error);
    return OK;
}

/* Runs kernel `k` with arguments `a` (its own, or those a regular list's launch took), and
 * waits for it. */
static ze_result_t emulator_launch(stub_list_t *list, stub_kernel_t *k, const group_count_t *groups, const arguments_t *a) {
    char what[200];
    for (uint32_t i = 0; i < a->count; i++) {
        if (!a->set[i]) return failure(INVALID_ARGUMENT, "argument %u of kernel %s was never set", i, k->name);
        /* Level Zero would take host memory too, but xhal's buffers are device allocations:
         * host memory here is staging memory taken for a buffer. */
        snprintf(what, sizeof what, "pointer argument %u of kernel %s", i, k->name);
        if (k->pointer[i] && !emulator_owns(*(void *const *)a->bytes[i], 1, 1, what)) return INVALID_ARGUMENT;
    }
    size_t local[3], global[3];
    uint32_t count[3] = {groups->x, groups->y, groups->z};
    for (int axis = 0; axis < 3; axis++) {
        if (a->group_size[axis] == 0) return failure(INVALID_GROUP_SIZE_DIMENSION, "kernel %s has no group size", k->name);
        local[axis] = a->group_size[axis];
        global[axis] = (size_t)count[axis] * local[axis];
    }
    /* The OpenCL kernel is shared: another launch may have set other arguments on it since,
     * so this launch's go on again, and OpenCL takes them when the kernel is enqueued. */
    pthread_mutex_lock(&k->lock);
    ze_result_t applied = OK;
    for (uint32_t i = 0; i < a->count && applied == OK; i++) applied = emulator_apply_argument(k, i, a->size[i], a->bytes[i]);
    cl_int error = applied == OK ? cl.EnqueueNDRangeKernel(list->queue, k->cl_kernel, 3, NULL, global, local, 0, NULL, NULL) : 0;
    pthread_mutex_unlock(&k->lock);
    if (applied != OK) return applied;
    if (error)
        return failure(error == CL_OUT_OF_RESOURCES || error == CL_OUT_OF_HOST_MEMORY ? OUT_OF_HOST_MEMORY : INVALID_ARGUMENT,
                       "clEnqueueNDRangeKernel failed for kernel %s: OpenCL error %d", k->name, error);
    error = cl.Finish(list->queue);
    if (error) return failure(DEVICE_LOST, "kernel %s failed on the OpenCL device: OpenCL error %d", k->name, error);
    return OK;
}
#endif

static uint64_t device_memory_bytes(void) {
#ifdef STUB_EXECUTE
    return emulator.total;
#else
    return 1ull << 31;
#endif
}

EXPORT ze_result_t zeInit(uint32_t flags) {
    (void)flags;
#ifdef STUB_MODE_INIT_FAILS
    return DEVICE_LOST;
#endif
#ifdef STUB_EXECUTE
    emulator_running();
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
#ifdef STUB_EXECUTE
    /* 1.9, the first with in-order lists, as the drivers of today have: the path the backend
     * takes on hardware. STUB_API_VERSION=1.3 takes the older one. */
    const char *asked = getenv("STUB_API_VERSION");
    unsigned major = 1, minor = 9;
    if (asked && *asked && sscanf(asked, "%u.%u", &major, &minor) != 2)
        return failure(UNKNOWN, "STUB_API_VERSION=%s is not MAJOR.MINOR", asked);
    *version = (major << 16) | (minor & 0xffff);
#endif
    return OK;
}

EXPORT ze_result_t zeDeviceGet(void *driver, uint32_t *count, void **devices) {
    (void)driver;
#ifdef STUB_MODE_NO_DEVICE
    *count = 0;
    return OK;
#endif
    if (FAILS("zeDeviceGet")) return failure(DEPENDENCY_UNAVAILABLE, "the stub's device needs what is not here");
#ifdef STUB_EXECUTE
    if (!emulator_running()) return failure(DEPENDENCY_UNAVAILABLE, "%s", emulator.refusal);
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
#ifdef STUB_EXECUTE
    /* Events hold CLOCK_MONOTONIC nanoseconds, which do not wrap. */
    p->maxMemAllocSize = emulator.max_allocation; p->timerResolution = 1; p->kernelTimestampValidBits = 64;
    snprintf(p->name, sizeof p->name, "%s", emulator.device_name);
#endif
    return OK;
}

EXPORT ze_result_t zeDeviceGetComputeProperties(void *device, compute_properties_t *p) {
    (void)device;
    p->maxTotalGroupSize = 1024; p->maxGroupSize[0] = 1024; p->maxGroupSize[1] = 1024; p->maxGroupSize[2] = 64;
    p->maxGroupCount[0] = p->maxGroupCount[1] = p->maxGroupCount[2] = 65535;
    p->maxSharedLocalMemory = 65536; p->numSubGroupSizes = 3;
    p->subGroupSizes[0] = 8; p->subGroupSizes[1] = 16; p->subGroupSizes[2] = 32;
#ifdef STUB_EXECUTE
    /* The OpenCL device's limits; it has no subgroups, so a subgroup is one invocation. */
    p->maxTotalGroupSize = (uint32_t)emulator.group_invocations;
    for (int axis = 0; axis < 3; axis++) p->maxGroupSize[axis] = (uint32_t)emulator.group_size[axis];
    p->maxSharedLocalMemory = (uint32_t)emulator.local_memory;
    p->numSubGroupSizes = 1; p->subGroupSizes[0] = 1;
#endif
    return OK;
}

EXPORT ze_result_t zeDeviceGetModuleProperties(void *device, module_properties_t *p) {
    (void)device;
    p->spirvVersionSupported = 0x10400; p->flags = 2; /* FP64 */ p->maxArgumentsSize = 2048;
#ifdef STUB_EXECUTE
    /* FP64 and INT64_ATOMICS as the OpenCL device has them. */
    p->flags = (emulator.fp64 ? 2u : 0u) | (emulator.int64_atomics ? 4u : 0u);
    p->maxArgumentsSize = (uint32_t)emulator.parameter_bytes;
#endif
    return OK;
}

EXPORT ze_result_t zeDeviceGetMemoryProperties(void *device, uint32_t *count, memory_properties_t *p) {
    (void)device;
    if (p && *count >= 1) { p[0].totalSize = device_memory_bytes(); strcpy(p[0].name, "host"); }
    *count = 1;
    return OK;
}

EXPORT ze_result_t zeDeviceGetCommandQueueGroupProperties(void *device, uint32_t *count, queue_group_properties_t *p) {
    (void)device;
    if (p && *count >= 1) { p[0].flags = 1 | 2; p[0].maxMemoryFillPatternSize = 128; p[0].numQueues = 1; }
    *count = 1;
    return OK;
}

EXPORT ze_result_t zeDeviceGetGlobalTimestamps(void *device, uint64_t *host, uint64_t *device_ticks) {
    (void)device;
    if (FAILS("zeDeviceGetGlobalTimestamps")) return UNKNOWN;
#ifdef STUB_EXECUTE
    /* The emulator stamps events with the host's monotonic clock. */
    *host = *device_ticks = now_nanoseconds();
#else
    /* The plain stub's clock is a counter that each signalled event advances. */
    *host = *device_ticks = clock_ticks;
#endif
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
    void *memory = aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
    if (memory) __atomic_add_fetch(&last_launch.allocations_alive, 1, __ATOMIC_RELAXED);
    return memory;
}
EXPORT ze_result_t zeMemAllocDevice(void *context, const void *desc, size_t size, size_t alignment, void *device, void **out) {
    (void)context; (void)desc; (void)device;
    if (FAILS("zeMemAllocDevice")) return OUT_OF_DEVICE_MEMORY;
#ifdef STUB_EXECUTE
    return emulator_allocate(size, alignment, 1, out);
#endif
    *out = allocate(size, alignment);
    return *out ? OK : OUT_OF_DEVICE_MEMORY;
}
EXPORT ze_result_t zeMemAllocHost(void *context, const void *desc, size_t size, size_t alignment, void **out) {
    (void)context; (void)desc;
#ifdef STUB_EXECUTE
    return emulator_allocate(size, alignment, 0, out);
#endif
    *out = allocate(size, alignment);
    return *out ? OK : 0x70000002u;
}
EXPORT ze_result_t zeMemFree(void *context, void *pointer) {
    (void)context;
#ifdef STUB_EXECUTE
    return emulator_free(pointer);
#endif
    if (pointer) __atomic_sub_fetch(&last_launch.allocations_alive, 1, __ATOMIC_RELAXED);
    free(pointer);
    return OK;
}

/* The API version the driver reports, for the checks a driver's validation makes on flags. */
static ze_result_t api_version(uint32_t *version) { return zeDriverGetApiVersion(&driver_object, version); }

EXPORT ze_result_t zeCommandListCreateImmediate(void *context, void *device, const queue_desc_t *desc, void **list) {
    (void)context; (void)device; (void)desc;
#ifdef STUB_EXECUTE
    /* What a driver's validation refuses: a queue group it does not have, and flags newer than
     * its API (ZE_COMMAND_QUEUE_FLAG_IN_ORDER came with 1.9). */
    uint32_t version;
    ze_result_t asked = api_version(&version);
    if (asked != OK) return asked;
    if (desc->ordinal != 0 || desc->index != 0)
        return failure(INVALID_ARGUMENT, "queue group %u, queue %u: the device has one group of one queue", desc->ordinal,
                       desc->index);
    uint32_t known = version >= ((1u << 16) | 9) ? 3u : 1u;
    if (desc->flags & ~known)
        return failure(INVALID_ENUMERATION, "queue flags %#x are not all flags of API %u.%u", desc->flags, version >> 16,
                       version & 0xffff);
    /* NORMAL, LOW and HIGH; the stub runs every queue alike, as a driver may. */
    if (desc->priority > 2) return failure(INVALID_ENUMERATION, "queue priority %u is not a ze_command_queue_priority_t", desc->priority);
#endif
    stub_list_t *l = calloc(1, sizeof *l);
    if (!l) return OUT_OF_HOST_MEMORY;
    l->immediate = 1;
#ifdef STUB_EXECUTE
    /* A queue of the list's own: a launch waits for its own kernel, not for other lists'. */
    cl_int error = 0;
    l->queue = cl.CreateCommandQueueWithProperties(emulator.context, emulator.device, NULL, &error);
    if (error || !l->queue) {
        free(l);
        return failure(OUT_OF_HOST_MEMORY, "clCreateCommandQueueWithProperties failed: OpenCL error %d", error);
    }
#endif
    *list = l;
    return OK;
}

/* A regular list: its commands are recorded, and run each time it is executed. */
EXPORT ze_result_t zeCommandListCreate(void *context, void *device, const list_desc_t *desc, void **list) {
    (void)context; (void)device;
    if (!desc || !list) return INVALID_NULL_POINTER;
    /* What a driver's validation refuses: a queue group it does not have, and flags newer than
     * its API (ZE_COMMAND_LIST_FLAG_IN_ORDER, taken from 1.9 as for immediate lists). */
    uint32_t version;
    ze_result_t asked = api_version(&version);
    if (asked != OK) return asked;
    if (desc->commandQueueGroupOrdinal != 0)
        return failure(INVALID_ARGUMENT, "queue group %u: the device has one group", desc->commandQueueGroupOrdinal);
    uint32_t known = version >= ((1u << 16) | 9) ? 0xfu : 0x7u;
    if (desc->flags & ~known)
        return failure(INVALID_ENUMERATION, "command list flags %#x are not all flags of API %u.%u", desc->flags,
                       version >> 16, version & 0xffff);
    ze_result_t failed = fail_next("zeCommandListCreate");
    if (failed != OK) return failed;
    stub_list_t *l = calloc(1, sizeof *l);
    if (!l) return OUT_OF_HOST_MEMORY;
    l->in_order = (desc->flags & 8u) != 0;
    __atomic_add_fetch(&last_launch.regular_lists_alive, 1, __ATOMIC_RELAXED);
    *list = l;
    return OK;
}

static void forget_commands(stub_list_t *l) {
    for (size_t i = 0; i < l->count; i++) {
        free(l->commands[i].waits);
        arguments_free(&l->commands[i].arguments);
    }
    l->count = 0;
}

EXPORT ze_result_t zeCommandListDestroy(void *list) {
    stub_list_t *l = list;
#ifdef STUB_EXECUTE
    if (l->queue) cl.ReleaseCommandQueue(l->queue);
#endif
    if (!l->immediate) __atomic_sub_fetch(&last_launch.regular_lists_alive, 1, __ATOMIC_RELAXED);
    forget_commands(l);
    free(l->commands);
    free(l);
    return OK;
}

EXPORT ze_result_t zeCommandListClose(void *list) {
    stub_list_t *l = list;
    if (l->immediate) return failure(INVALID_ARGUMENT, "command list %p is immediate: it is never closed", list);
    if (l->closed) return failure(INVALID_ARGUMENT, "command list %p is closed already", list);
    ze_result_t failed = fail_next("zeCommandListClose");
    if (failed != OK) return failed;
    l->closed = 1;
    return OK;
}

EXPORT ze_result_t zeCommandListReset(void *list) {
    stub_list_t *l = list;
    ze_result_t failed = fail_next("zeCommandListReset");
    if (failed != OK) return failed;
    forget_commands(l);
    l->closed = 0;
    return OK;
}

/* Records `command` at the end of regular list `l`, with copies of its wait list; the list
 * then owns the launch arguments the command holds. */
static ze_result_t record_command(stub_list_t *l, command_t command, uint32_t wait_count, void **waits) {
    ze_result_t result = OK;
    if (l->closed)
        result = failure(INVALID_ARGUMENT, "command list %p is closed: reset it before appending to it again", (void *)l);
    else if (wait_count > 0 && !waits)
        result = failure(0x78000008u, "%u events to wait for, but no list of them", wait_count);
    if (result == OK && l->count == l->room) {
        size_t room = l->room ? l->room * 2 : 16;
        command_t *larger = realloc(l->commands, room * sizeof *larger);
        if (larger) { l->commands = larger; l->room = room; }
        else result = OUT_OF_HOST_MEMORY;
    }
    command.wait_count = wait_count;
    command.waits = NULL;
    if (result == OK && wait_count > 0) {
        if ((command.waits = malloc(wait_count * sizeof *command.waits))) memcpy(command.waits, waits, wait_count * sizeof *waits);
        else result = OUT_OF_HOST_MEMORY;
    }
    if (result != OK) {
        arguments_free(&command.arguments);
        return result;
    }
    l->commands[l->count++] = command;
    return OK;
}

static void signal_event(void *event) {
#ifdef STUB_EXECUTE
    if (event) { ((stub_event_t *)event)->signalled = 1; ((stub_event_t *)event)->end = now_nanoseconds(); }
    return;
#endif
    if (event) { ((stub_event_t *)event)->signalled = 1; ((stub_event_t *)event)->end = clock_ticks; }
    clock_ticks += 7;
}

/* Every event of the list signalled: this device runs what it is given at once, so an event
 * nothing signalled yet would never be. */
static ze_result_t events_signalled(uint32_t count, void **events) {
    for (uint32_t i = 0; i < count; i++)
        if (!((stub_event_t *)events[i])->signalled) return failure(UNKNOWN, "a command waits for an event that nothing signals");
    return OK;
}

static ze_result_t run_copy(void *to, const void *from, size_t size) {
#ifdef STUB_EXECUTE
    if (!emulator_owns(to, size, 0, "a copy's destination") || !emulator_owns(from, size, 0, "a copy's source"))
        return INVALID_ARGUMENT;
#endif
    memcpy(to, from, size);
    return OK;
}

static ze_result_t run_fill(void *to, const void *pattern, size_t pattern_size, size_t size) {
#ifdef STUB_EXECUTE
    if (!emulator_owns(to, size, 0, "a fill")) return INVALID_ARGUMENT;
    if (pattern_size == 0 || size % pattern_size)
        return failure(INVALID_SIZE, "a fill of %zu bytes with a %zu-byte pattern", size, pattern_size);
#endif
    for (size_t at = 0; at < size; at += pattern_size) memcpy((uint8_t *)to + at, pattern, pattern_size);
    return OK;
}

static ze_result_t run_launch(stub_list_t *list, stub_kernel_t *kernel, const group_count_t *groups, const arguments_t *a) {
#ifdef STUB_EXECUTE
    return emulator_launch(list, kernel, groups, a);
#endif
    (void)list; (void)kernel;
    record_launch(a, groups);
    return OK;
}

/* Runs one recorded command of a regular list executed from `immediate`. */
static ze_result_t run_command(stub_list_t *immediate, const command_t *c) {
    ze_result_t result = events_signalled(c->wait_count, c->waits);
    if (result != OK) return result;
    switch (c->kind) {
    case COMMAND_COPY: result = run_copy(c->to, c->from, c->size); break;
    case COMMAND_FILL: result = run_fill(c->to, c->from, c->pattern_size, c->size); break;
    case COMMAND_LAUNCH: result = run_launch(immediate, c->kernel, &c->groups, &c->arguments); break;
    case COMMAND_BARRIER: case COMMAND_WAIT: break;
    }
    if (result == OK) signal_event(c->signal);
    return result;
}

/* Runs regular list `l` from `immediate`. In an in-order list each command follows the one
 * before it; otherwise only barriers order commands, and the commands between two barriers
 * run last first. */
static ze_result_t run_list(stub_list_t *immediate, const stub_list_t *l) {
    size_t start = 0;
    while (start < l->count) {
        size_t end = start + 1;
        if (!l->in_order)
            for (end = start; end < l->count && l->commands[end].kind != COMMAND_BARRIER; end++) {}
        for (size_t i = end; i > start; i--) {
            ze_result_t result = run_command(immediate, &l->commands[i - 1]);
            if (result != OK) return result;
        }
        if (!l->in_order && end < l->count) {
            ze_result_t result = run_command(immediate, &l->commands[end]);
            if (result != OK) return result;
            end++;
        }
        start = end;
    }
    return OK;
}

/* Without STUB_NO_APPEND_LISTS the entry point is exported; with it, the library is a loader
 * older than API 1.9, which has none. */
#ifdef STUB_NO_APPEND_LISTS
#define APPEND_LISTS_ENTRY __attribute__((unused)) static
#else
#define APPEND_LISTS_ENTRY EXPORT
#endif

/* ZE_experimental_immediate_command_list_append: closed regular lists run from an immediate
 * list, after everything appended to it before (this device has run that already). */
APPEND_LISTS_ENTRY ze_result_t zeCommandListImmediateAppendCommandListsExp(void *immediate, uint32_t count, void **lists,
                                                                          void *signal, uint32_t wait_count, void **waits) {
#ifdef STUB_NO_APPEND_LISTS_EXTENSION
    /* A loader that has the entry point, over a driver that has not. */
    return failure(UNSUPPORTED_FEATURE, "the driver has no ZE_experimental_immediate_command_list_append");
#endif
    if (FAILS("zeCommandListImmediateAppendCommandListsExp"))
        return failure(DEVICE_LOST, "the stub's device was lost running a command list");
    ze_result_t failed = fail_next("zeCommandListImmediateAppendCommandListsExp");
    if (failed != OK) return failed;
    stub_list_t *to = immediate;
    if (!to || !to->immediate)
        return failure(INVALID_ARGUMENT, "command lists run from an immediate list; %p is a regular one", immediate);
    if (!lists) return INVALID_NULL_POINTER;
    if (wait_count > 0 && !waits) return failure(0x78000008u, "%u events to wait for, but no list of them", wait_count);
    for (uint32_t i = 0; i < count; i++) {
        const stub_list_t *l = lists[i];
        if (!l || l->immediate)
            return failure(INVALID_ARGUMENT, "command list %u of %u is immediate; only regular lists run from another", i,
                           count);
        if (!l->closed)
            return failure(INVALID_ARGUMENT, "command list %p is not closed: close it before executing it", lists[i]);
    }
    ze_result_t result = events_signalled(wait_count, waits);
    for (uint32_t i = 0; i < count && result == OK; i++) result = run_list(to, lists[i]);
    if (result == OK && signal && defer_completion) {
        if (deferred_count == MAX_DEFERRED) return failure(OUT_OF_HOST_MEMORY, "more than %d deferred events", MAX_DEFERRED);
        deferred[deferred_count++] = signal;
    } else if (result == OK) {
        signal_event(signal);
    }
    return result;
}

EXPORT ze_result_t zeDriverGetExtensionProperties(void *driver, uint32_t *count, extension_properties_t *properties) {
    (void)driver;
    static const char *const names[] = {
        "ZE_extension_pci_properties",
#ifndef STUB_NO_APPEND_LISTS_EXTENSION
        "ZE_experimental_immediate_command_list_append",
#endif
    };
    uint32_t known = (uint32_t)(sizeof names / sizeof names[0]);
    if (!count) return INVALID_NULL_POINTER;
    if (properties) {
        for (uint32_t i = 0; i < known && i < *count; i++) {
            memset(properties[i].name, 0, sizeof properties[i].name);
            snprintf(properties[i].name, sizeof properties[i].name, "%s", names[i]);
            properties[i].version = 1u << 16;
        }
        if (*count > known) *count = known;
    } else {
#ifdef STUB_EXTENSION_COUNT_LIES
        *count = 0xFFFFFFFFu;
#else
        *count = known;
#endif
    }
    return OK;
}

EXPORT ze_result_t zeCommandListAppendMemoryCopy(void *list, void *to, const void *from, size_t size, void *signal, uint32_t n, void **wait) {
    stub_list_t *l = list;
    if (FAILS("zeCommandListAppendMemoryCopy")) return INVALID_ARGUMENT;
    if (!l->immediate) {
#ifdef STUB_EXECUTE
        /* The validation layer checks the ranges at the append; they are checked again when
         * the copy runs, since memory may be freed in between. */
        if (!emulator_owns(to, size, 0, "a copy's destination") || !emulator_owns(from, size, 0, "a copy's source"))
            return INVALID_ARGUMENT;
#endif
        return record_command(l, (command_t){.kind = COMMAND_COPY, .signal = signal, .to = to, .from = from, .size = size}, n,
                              wait);
    }
    ze_result_t result = run_copy(to, from, size);
    if (result == OK) signal_event(signal);
    return result;
}
EXPORT ze_result_t zeCommandListAppendMemoryFill(void *list, void *to, const void *pattern, size_t pattern_size, size_t size, void *signal, uint32_t n, void **wait) {
    stub_list_t *l = list;
    ze_result_t failed = fail_next("zeCommandListAppendMemoryFill");
    if (failed != OK) return failed;
    if (!l->immediate) {
        if (pattern_size == 0 || size % pattern_size)
            return failure(INVALID_SIZE, "a fill of %zu bytes with a %zu-byte pattern", size, pattern_size);
#ifdef STUB_EXECUTE
        if (!emulator_owns(to, size, 0, "a fill")) return INVALID_ARGUMENT;
#endif
        return record_command(l,
                              (command_t){.kind = COMMAND_FILL, .signal = signal, .to = to, .from = pattern, .size = size,
                                          .pattern_size = pattern_size},
                              n, wait);
    }
    ze_result_t result = run_fill(to, pattern, pattern_size, size);
    if (result == OK) signal_event(signal);
    return result;
}
EXPORT ze_result_t zeCommandListAppendBarrier(void *list, void *signal, uint32_t n, void **wait) {
    stub_list_t *l = list;
    if (!l->immediate) return record_command(l, (command_t){.kind = COMMAND_BARRIER, .signal = signal}, n, wait);
    signal_event(signal);
    return OK;
}
EXPORT ze_result_t zeCommandListAppendWaitOnEvents(void *list, uint32_t n, void **events) {
    stub_list_t *l = list;
    if (!l->immediate) return record_command(l, (command_t){.kind = COMMAND_WAIT}, n, events);
    for (uint32_t i = 0; i < n; i++) if (!((stub_event_t *)events[i])->signalled) return UNKNOWN;
    return OK;
}
EXPORT ze_result_t zeCommandListAppendLaunchKernel(void *list, void *kernel_handle, const group_count_t *groups, void *signal, uint32_t n, void **wait) {
    stub_list_t *l = list;
    stub_kernel_t *kernel = kernel_handle;
    ze_result_t failed = fail_next("zeCommandListAppendLaunchKernel");
    if (failed != OK) return failed;
    if (!l->immediate) {
        /* The arguments and group size as they are now are the ones this launch runs with. */
        command_t command = {.kind = COMMAND_LAUNCH, .signal = signal, .kernel = kernel, .groups = *groups};
        for (uint32_t i = 0; i < kernel->arguments.count; i++)
            if (!kernel->arguments.set[i])
                return failure(INVALID_ARGUMENT, "argument %u of kernel %s was never set", i, kernel->name);
        if (!arguments_copy(&command.arguments, &kernel->arguments)) return OUT_OF_HOST_MEMORY;
        return record_command(l, command, n, wait);
    }
    ze_result_t result = run_launch(l, kernel, groups, &kernel->arguments);
    if (result == OK) signal_event(signal);
    return result;
}
#ifndef STUB_NO_HOST_SYNC
EXPORT ze_result_t zeCommandListHostSynchronize(void *list, uint64_t timeout) {
    (void)list; (void)timeout;
    if (FAILS("zeCommandListHostSynchronize")) return DEVICE_LOST;
    for (uint32_t i = 0; i < deferred_count; i++) signal_event(deferred[i]);
    deferred_count = 0;
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
EXPORT ze_result_t zeEventDestroy(void *event) {
    for (uint32_t i = 0; i < deferred_count; i++)
        if (deferred[i] == event) return failure(0x78000006u, "event %p is destroyed while a running list signals it", event);
    free(event);
    return OK;
}
EXPORT ze_result_t zeEventHostReset(void *event) {
    ((stub_event_t *)event)->signalled = 0;
    return OK;
}
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

EXPORT ze_result_t zeModuleCreate(void *context, void *device, const module_desc_t *desc, void **module, void **log) {
    (void)context; (void)device;
    if (FAILS("zeModuleCreate")) {
        if (log) *log = strdup("stub compiler: error: the stub cannot build this module");
        return MODULE_BUILD_FAILURE;
    }
    stub_module_t *m = calloc(1, sizeof *m);
    m->code = malloc(desc->inputSize); m->size = desc->inputSize;
    memcpy(m->code, desc->pInputModule, desc->inputSize);
#ifdef STUB_EXECUTE
    char *build_log = NULL;
    ze_result_t built = emulator_build(m, &build_log);
    if (built != OK) {
        if (log) *log = build_log ? build_log : strdup("");
        else free(build_log);
        free(m->code); free(m);
        return built;
    }
#endif
    if (log) *log = strdup("");
    *module = m;
    __atomic_add_fetch(&last_launch.modules_alive, 1, __ATOMIC_RELAXED);
    return OK;
}
EXPORT ze_result_t zeModuleDestroy(void *module) {
    stub_module_t *m = module;
#ifdef STUB_EXECUTE
    cl.ReleaseProgram(m->program);
#endif
    free(m->code); free(m);
    __atomic_sub_fetch(&last_launch.modules_alive, 1, __ATOMIC_RELAXED);
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
    uint8_t pointer[MAX_ARGS];
    if (!spirv_entry(module, desc->pKernelName, &parameters, pointer)) return INVALID_KERNEL_NAME;
    if (parameters > MAX_ARGS) return UNKNOWN;
    stub_kernel_t *k = calloc(1, sizeof *k);
    if (!k) return OUT_OF_HOST_MEMORY;
    k->module = module;
    strncpy(k->name, desc->pKernelName, sizeof k->name - 1);
    k->arguments.count = parameters;
    memcpy(k->pointer, pointer, sizeof pointer);
    pthread_mutex_init(&k->lock, NULL);
#ifdef STUB_EXECUTE
    cl_int error = 0;
    k->cl_kernel = cl.CreateKernel(((stub_module_t *)module)->program, desc->pKernelName, &error);
    if (error || !k->cl_kernel) {
        pthread_mutex_destroy(&k->lock);
        free(k);
        return failure(INVALID_KERNEL_NAME, "clCreateKernel found no kernel %s: OpenCL error %d", desc->pKernelName, error);
    }
#endif
    *kernel = k;
    __atomic_add_fetch(&last_launch.kernels_alive, 1, __ATOMIC_RELAXED);
    return OK;
}
EXPORT ze_result_t zeKernelDestroy(void *kernel) {
    stub_kernel_t *k = kernel;
#ifdef STUB_EXECUTE
    cl.ReleaseKernel(k->cl_kernel);
#endif
    arguments_free(&k->arguments);
    pthread_mutex_destroy(&k->lock);
    free(k);
    __atomic_sub_fetch(&last_launch.kernels_alive, 1, __ATOMIC_RELAXED);
    return OK;
}
EXPORT ze_result_t zeKernelSetGroupSize(void *kernel, uint32_t x, uint32_t y, uint32_t z) {
    stub_kernel_t *k = kernel;
    k->arguments.group_size[0] = x; k->arguments.group_size[1] = y; k->arguments.group_size[2] = z;
    return OK;
}
EXPORT ze_result_t zeKernelSetArgumentValue(void *kernel, uint32_t index, size_t size, const void *value) {
    stub_kernel_t *k = kernel;
    if (index >= k->arguments.count) return INVALID_KERNEL_ARGUMENT_INDEX;
#ifndef STUB_EXECUTE
    if (size > MAX_ARG_BYTES) return INVALID_KERNEL_ARGUMENT_SIZE;
#endif
    /* A null value is a null argument: zero bytes. */
    uint8_t *bytes = calloc(1, size ? size : 1);
    if (!bytes) return OUT_OF_HOST_MEMORY;
    if (value) memcpy(bytes, value, size);
    ze_result_t result = OK;
    pthread_mutex_lock(&k->lock);
#ifdef STUB_EXECUTE
    result = emulator_apply_argument(k, index, size, bytes);
#endif
    if (result == OK) {
        free(k->arguments.bytes[index]);
        k->arguments.bytes[index] = bytes;
        k->arguments.size[index] = size;
        k->arguments.set[index] = 1;
    } else {
        free(bytes);
    }
    pthread_mutex_unlock(&k->lock);
    return result;
}
EXPORT ze_result_t zeKernelGetProperties(void *kernel, kernel_properties_t *p) {
    stub_kernel_t *k = kernel;
    p->numKernelArgs = k->arguments.count;
    return OK;
}
