/*
 * A test double of the HIP runtime (libamdhip64) and of hiprtc, built by the tests with
 * `cc -shared -fPIC`. It exports every entry point xhal's ROCm backend resolves, with the C
 * signatures of AMD's hip_runtime_api.h and hiprtc.h.
 *
 * It pretends: "device memory" is host memory from malloc, and every copy, fill, record and
 * launch happens at once on the calling thread (on a deferred stream, when something waits for
 * it: see stub_set_deferred below). Nothing here runs GPU code: a launch of a
 * kernel from any other image than the emulator's (below) records its arguments for the test
 * to read back. Each test loads its own copy of the file, so each copy's settings (below) are
 * its own.
 *
 * Graphs through stream capture, with the rules of AMD's runtime (ROCm's clr, hip_graph.cpp):
 * between hipStreamBeginCapture and hipStreamEndCapture, copies, fills and kernel launches on
 * the stream are recorded into its graph instead of running, a launch's argument values copied
 * at the call; hipGraphInstantiate makes an executable graph of its own copy of that work, and
 * hipGraphLaunch runs it, in order. As in HIP: a capture cannot begin on the null stream
 * (hipErrorStreamCaptureUnsupported) or on a stream already capturing (hipErrorIllegalState);
 * synchronizing or querying a capturing stream fails with hipErrorStreamCaptureUnsupported;
 * hipMalloc, hipFree, hipHostMalloc and hipHostFree fail the same way, and invalidate the
 * capture, while any capture in global mode is open, or one the calling thread began in
 * thread-local mode (relaxed mode allows them); work on an invalidated capture fails with
 * hipErrorStreamCaptureInvalidated, and so does its hipStreamEndCapture, which gives no graph;
 * a capture not in relaxed mode ends on the thread that began it
 * (hipErrorStreamCaptureWrongThread); a handle that is not a live executable graph does not
 * launch (hipErrorInvalidValue), and a graph destroyed twice is hipErrorIllegalState. Where
 * HIP would capture something this stub does not (an event record or wait, a graph launch on a
 * capturing stream), the call fails with hipErrorStreamCaptureUnsupported and invalidates the
 * capture. Built with -DSTUB_NO_GRAPHS, the library has no graph entry points at all, as a
 * runtime without graphs.
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
 *   stub_set_runtime_version(v)        what hipRuntimeGetVersion and hipDriverGetVersion
 *                                      report (HIP_VERSION; 60241134, HIP 6.2.41134, by default)
 *   stub_set_deferred(on)              streams created afterwards queue their work until it is
 *                                      waited for, as a GPU runs it (see "Deferred streams")
 * and what the tests read back: stub_launches() and the last launch's grid, block and argument
 * bytes, stub_graph_launches() (hipGraphLaunch calls that ran), stub_last_capture_mode() (the
 * mode of the last hipStreamBeginCapture, -1 before any) and stub_graph_objects() (graphs and
 * executable graphs not yet destroyed), stub_released_uses() (queued work that ran after
 * what it uses was released: a kernel of an unloaded module, a destroyed executable graph).
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
typedef void* hipGraph_t;
typedef void* hipGraphExec_t;
typedef void* hipGraphNode_t;
typedef int hipStreamCaptureMode; /* a C enum */
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
static int graph_launches = 0;
static int last_capture_mode = -1;
int stub_graph_launches(void) { return __atomic_load_n(&graph_launches, __ATOMIC_RELAXED); }
int stub_last_capture_mode(void) { return __atomic_load_n(&last_capture_mode, __ATOMIC_RELAXED); }

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

/* The HIP error codes of stream capture (hip_runtime_api.h). */
#define HIP_ERROR_INVALID_VALUE 1
#define HIP_ERROR_OUT_OF_MEMORY 2
#define HIP_ERROR_ILLEGAL_STATE 401
#define HIP_ERROR_STREAM_CAPTURE_UNSUPPORTED 900
#define HIP_ERROR_STREAM_CAPTURE_INVALIDATED 901
#define HIP_ERROR_STREAM_CAPTURE_WRONG_THREAD 908
/* hipStreamCaptureMode. */
enum { CAPTURE_GLOBAL = 0, CAPTURE_THREAD_LOCAL = 1, CAPTURE_RELAXED = 2 };

/* One lock for the capture and graph registries below: spun, as the stub needs no pthreads. */
static char registry_lock;
static void lock_registry(void) {
    while (__atomic_test_and_set(&registry_lock, __ATOMIC_ACQUIRE)) {
    }
}
static void unlock_registry(void) { __atomic_clear(&registry_lock, __ATOMIC_RELEASE); }

/* The calling thread, as the address of a variable each thread has its own of. */
static _Thread_local char thread_identity;
#define THIS_THREAD ((const void*)&thread_identity)

/* Work a stream runs, or that a graph holds: a copy, a fill of `size` patterns of `width`
   bytes, or a launch with its own copy of the argument values; and, queued on a deferred
   stream only, a launch of an executable graph or a wait for another stream's work. */
typedef struct StubFunction StubFunction;
static hipError_t run_launch(StubFunction* function, const unsigned* dims, void** parameters);
static hipError_t run_graph(void* exec);
static void wait_for(unsigned long stream, unsigned long long sequence);
enum { WORK_COPY, WORK_FILL, WORK_LAUNCH, WORK_GRAPH, WORK_WAIT };
#define MAX_PARAMETERS 64
typedef struct Work {
    struct Work* next;
    int kind;
    void* to;
    const void* from;
    size_t size;
    unsigned width;
    unsigned char pattern[4];
    StubFunction* function;
    unsigned dims[6];
    int parameter_count;
    size_t parameter_offsets[MAX_PARAMETERS];
    unsigned char* values;
    size_t values_size;
    /* WORK_GRAPH: the executable graph. WORK_WAIT: the stream (its id) and how much of its
       work (a count of its queued items) to wait for. */
    void* exec;
    unsigned long wait_stream;
    unsigned long long wait_sequence;
} Work;

static Work* new_work(int kind) {
    Work* work = calloc(1, sizeof(Work));
    if (work) work->kind = kind;
    return work;
}
static void free_works(Work* work) {
    while (work) {
        Work* next = work->next;
        free(work->values);
        free(work);
        work = next;
    }
}
static hipError_t run_work(const Work* work) {
    switch (work->kind) {
        case WORK_COPY: memcpy(work->to, work->from, work->size); return 0;
        case WORK_FILL:
            for (size_t i = 0; i < work->size; i++)
                memcpy((char*)work->to + (size_t)work->width * i, work->pattern, work->width);
            return 0;
        case WORK_GRAPH: return run_graph(work->exec);
        case WORK_WAIT: wait_for(work->wait_stream, work->wait_sequence); return 0;
        default: {
            void* parameters[MAX_PARAMETERS];
            for (int i = 0; i < work->parameter_count; i++) parameters[i] = work->values + work->parameter_offsets[i];
            return run_launch(work->function, work->dims, parameters);
        }
    }
}

/* A stream: its capture, where one is open, and on a deferred stream the work it queued. */
typedef struct StubStream {
    int capturing;
    /* A call broke the capture's rules: its work and its end fail. */
    int invalidated;
    int mode;
    /* The thread that began the capture. */
    const void* thread;
    Work *captured_head, *captured_tail;
    /* Deferred streams (see stub_set_deferred) only: a number of its own, the work queued and
       not run yet, how many items were ever queued and how many ran, the first failure of
       queued work (what the next hipStreamSynchronize reports), and the next deferred stream. */
    int deferred;
    unsigned long id;
    Work *queued_head, *queued_tail;
    unsigned long long enqueued, completed;
    hipError_t error;
    struct StubStream* next;
} StubStream;

/* Every stream capturing now, for the calls that check them all. */
#define MAX_CAPTURES 256
static StubStream* captures[MAX_CAPTURES];
static int capture_count = 0;

static void forget_capture(StubStream* stream) {
    lock_registry();
    for (int i = 0; i < capture_count; i++) {
        if (captures[i] == stream) {
            captures[i] = captures[--capture_count];
            break;
        }
    }
    unlock_registry();
    stream->capturing = 0;
    free_works(stream->captured_head);
    stream->captured_head = stream->captured_tail = NULL;
}

/* HIP's check before a call that is unsafe during capture (hipMalloc, hipFree, hipHostMalloc,
   hipHostFree), for a thread in the default (global) capture mode: every capture in global
   mode, and every one this thread began in thread-local mode, is invalidated, and the call
   fails. Relaxed captures are left alone. */
static int refused_during_capture(void) {
    int refused = 0;
    lock_registry();
    for (int i = 0; i < capture_count; i++) {
        StubStream* stream = captures[i];
        if (stream->mode == CAPTURE_GLOBAL || (stream->mode == CAPTURE_THREAD_LOCAL && stream->thread == THIS_THREAD)) {
            stream->invalidated = 1;
            refused = 1;
        }
    }
    unlock_registry();
    return refused;
}
#define REFUSED_DURING_CAPTURE() \
    if (refused_during_capture()) return HIP_ERROR_STREAM_CAPTURE_UNSUPPORTED

/* Deferred streams, with stub_set_deferred(1): a stream created afterwards queues its copies,
   fills, launches and graph launches instead of running them, as a GPU does, and runs them,
   in order, only when something waits for them: hipStreamSynchronize and hipStreamDestroy (all
   of the stream's work), hipEventSynchronize (the work before the record), another stream's
   run reaching a hipStreamWaitEvent for it, and hipFree and hipHostFree (every stream's work:
   HIP's free waits for the device). hipStreamQuery and hipEventQuery answer hipErrorNotReady
   while that work is queued. Nothing else waits: hipModuleUnload and hipGraphExecDestroy
   release at once, as in HIP, so queued work that runs after what it uses was released fails
   (hipErrorLaunchFailure) and is counted (stub_released_uses()) rather than read freed memory.
   Meant for tests that drive the runtime from one thread. */
static int deferred_mode = 0;
static unsigned long last_stream_id = 0;
static StubStream* deferred_streams = NULL;
static int released_uses = 0;
void stub_set_deferred(int on) { deferred_mode = on; }
int stub_released_uses(void) { return __atomic_load_n(&released_uses, __ATOMIC_RELAXED); }

static StubStream* deferred_stream(unsigned long id) {
    StubStream* found = NULL;
    lock_registry();
    for (StubStream* stream = deferred_streams; stream && !found; stream = stream->next)
        if (stream->id == id) found = stream;
    unlock_registry();
    return found;
}
/* Runs `stream`'s queued work until `sequence` of its items have run; the first failure is
   kept for the next hipStreamSynchronize. */
static void run_queued(StubStream* stream, unsigned long long sequence) {
    while (stream->completed < sequence && stream->queued_head) {
        Work* work = stream->queued_head;
        stream->queued_head = work->next;
        if (!stream->queued_head) stream->queued_tail = NULL;
        work->next = NULL;
        hipError_t code = run_work(work);
        if (code != 0 && stream->error == 0) stream->error = code;
        free_works(work);
        stream->completed++;
    }
}
/* A wait for the first `sequence` items of stream `id` (none once the stream is gone: it ran
   all its work before it went). */
static void wait_for(unsigned long id, unsigned long long sequence) {
    StubStream* stream = deferred_stream(id);
    if (stream) run_queued(stream, sequence);
}
static void run_every_stream(void) {
    for (StubStream* stream = deferred_streams; stream; stream = stream->next) run_queued(stream, stream->enqueued);
}
static void released_in_use(void) { __atomic_fetch_add(&released_uses, 1, __ATOMIC_RELAXED); }

/* Runs `work` at once, queues it on a deferred stream, or records it where the stream is
   capturing; takes `work`. */
static hipError_t submit(hipStream_t handle, Work* work) {
    StubStream* stream = handle;
    if (!work) return HIP_ERROR_OUT_OF_MEMORY;
    if (stream && stream->capturing) {
        if (stream->invalidated) {
            free_works(work);
            return HIP_ERROR_STREAM_CAPTURE_INVALIDATED;
        }
        if (stream->captured_tail) stream->captured_tail->next = work;
        else stream->captured_head = work;
        stream->captured_tail = work;
        return 0;
    }
    if (stream && stream->deferred) {
        if (stream->queued_tail) stream->queued_tail->next = work;
        else stream->queued_head = work;
        stream->queued_tail = work;
        stream->enqueued++;
        return 0;
    }
    hipError_t code = run_work(work);
    free_works(work);
    return code;
}
static Work* copy_work(void* to, const void* from, size_t size) {
    Work* work = new_work(WORK_COPY);
    if (work) work->to = to, work->from = from, work->size = size;
    return work;
}
static Work* fill_work(void* to, unsigned width, const void* pattern, size_t count) {
    Work* work = new_work(WORK_FILL);
    if (!work) return NULL;
    work->to = to, work->width = width, work->size = count;
    memcpy(work->pattern, pattern, width);
    return work;
}
/* What HIP refuses on a capturing stream that it would capture, and this stub does not. */
static int refused_while_capturing(hipStream_t handle) {
    StubStream* stream = handle;
    if (!stream || !stream->capturing) return 0;
    stream->invalidated = 1;
    return 1;
}

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
static int runtime_version = 60241134; /* HIP_VERSION: HIP 6.2.41134 */
void stub_set_runtime_version(int version) { runtime_version = version; }
hipError_t hipDriverGetVersion(int* version) { *version = runtime_version; return 0; }
hipError_t hipRuntimeGetVersion(int* version) { *version = runtime_version; return 0; }

const char* hipGetErrorName(hipError_t code) {
    switch (code) {
        case 0: return "hipSuccess";
        case 1: return "hipErrorInvalidValue";
        case 2: return "hipErrorOutOfMemory";
        case 98: return "hipErrorInvalidDeviceFunction";
        case 100: return "hipErrorNoDevice";
        case 101: return "hipErrorInvalidDevice";
        case 209: return "hipErrorNoBinaryForGpu";
        case 400: return "hipErrorInvalidHandle";
        case 401: return "hipErrorIllegalState";
        case 500: return "hipErrorNotFound";
        case 600: return "hipErrorNotReady";
        case 700: return "hipErrorIllegalAddress";
        case 719: return "hipErrorLaunchFailure";
        case 900: return "hipErrorStreamCaptureUnsupported";
        case 901: return "hipErrorStreamCaptureInvalidated";
        case 908: return "hipErrorStreamCaptureWrongThread";
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
    REFUSED_DURING_CAPTURE();
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
    REFUSED_DURING_CAPTURE();
    (void)flags;
    /* A size the page rounding would wrap is more memory than any host has. */
    if (size > SIZE_MAX - 4096) {
        *pointer = NULL;
        return 2;
    }
    *pointer = aligned_alloc(4096, ((size ? size : 1) + 4095) / 4096 * 4096);
    return *pointer ? 0 : 2;
}
hipError_t hipHostFree(void* pointer) {
    FAIL_ON_CUE("hipHostFree");
    REFUSED_DURING_CAPTURE();
    run_every_stream();
    free(pointer);
    return 0;
}
hipError_t hipFree(void* pointer) {
    FAIL_ON_CUE("hipFree");
    REFUSED_DURING_CAPTURE();
    run_every_stream();
    if (!pointer) return 0;
    size_t* block = (size_t*)((char*)pointer - ALLOCATION_HEADER);
    __atomic_fetch_sub(&allocated, block[0], __ATOMIC_RELAXED);
    free(block);
    return 0;
}

hipError_t hipMemcpyHtoDAsync(hipDeviceptr_t destination, void* source, size_t size, hipStream_t stream) {
    FAIL_ON_CUE("hipMemcpyHtoDAsync");
    return submit(stream, copy_work(destination, source, size));
}
hipError_t hipMemcpyDtoHAsync(void* destination, hipDeviceptr_t source, size_t size, hipStream_t stream) {
    FAIL_ON_CUE("hipMemcpyDtoHAsync");
    return submit(stream, copy_work(destination, source, size));
}
/* A copy between overlapping ranges is undefined in HIP; refused here, so no caller relies on
   whatever a runtime happens to do. */
hipError_t hipMemcpyDtoDAsync(hipDeviceptr_t destination, hipDeviceptr_t source, size_t size, hipStream_t stream) {
    FAIL_ON_CUE("hipMemcpyDtoDAsync");
    const char *to = destination, *from = source;
    if (size && to < from + size && from < to + size) return HIP_ERROR_INVALID_VALUE;
    return submit(stream, copy_work(destination, source, size));
}
hipError_t hipMemsetD8Async(hipDeviceptr_t destination, unsigned char value, size_t count, hipStream_t stream) {
    FAIL_ON_CUE("hipMemsetD8Async");
    return submit(stream, fill_work(destination, 1, &value, count));
}
hipError_t hipMemsetD16Async(hipDeviceptr_t destination, unsigned short value, size_t count, hipStream_t stream) {
    FAIL_ON_CUE("hipMemsetD16Async");
    return submit(stream, fill_work(destination, 2, &value, count));
}
hipError_t hipMemsetD32Async(hipDeviceptr_t destination, int value, size_t count, hipStream_t stream) {
    FAIL_ON_CUE("hipMemsetD32Async");
    return submit(stream, fill_work(destination, 4, &value, count));
}

/* AMD GPUs' range. The stub runs streams in order and ignores the priority, which is only a
 * hint; out of range it refuses, so that a test notices if the backend ever passes one. */
hipError_t hipDeviceGetStreamPriorityRange(int* least, int* greatest) {
    FAIL_ON_CUE("hipDeviceGetStreamPriorityRange");
    if (least) *least = 0;
    if (greatest) *greatest = -1;
    return 0;
}

hipError_t hipStreamCreateWithFlags(hipStream_t* stream, unsigned int flags);

hipError_t hipStreamCreateWithPriority(hipStream_t* stream, unsigned int flags, int priority) {
    FAIL_ON_CUE("hipStreamCreateWithPriority");
    if (priority > 0 || priority < -1) return 1; /* hipErrorInvalidValue */
    return hipStreamCreateWithFlags(stream, flags);
}

hipError_t hipStreamCreateWithFlags(hipStream_t* stream, unsigned int flags) {
    FAIL_ON_CUE("hipStreamCreateWithFlags");
    if (flags != 1) return 1; /* the backend asks for hipStreamNonBlocking */
    StubStream* created = calloc(1, sizeof(StubStream));
    if (!created) return HIP_ERROR_OUT_OF_MEMORY;
    if (deferred_mode) {
        created->deferred = 1;
        lock_registry();
        created->id = ++last_stream_id;
        created->next = deferred_streams;
        deferred_streams = created;
        unlock_registry();
    }
    *stream = created;
    return 0;
}
/* A capture still open ends with the stream, its graph discarded; queued work runs first. */
hipError_t hipStreamDestroy(hipStream_t handle) {
    StubStream* stream = handle;
    if (!stream) return 400;
    if (stream->capturing) forget_capture(stream);
    if (stream->deferred) {
        run_queued(stream, stream->enqueued);
        lock_registry();
        for (StubStream** at = &deferred_streams; *at; at = &(*at)->next) {
            if (*at == stream) {
                *at = stream->next;
                break;
            }
        }
        unlock_registry();
    }
    free(stream);
    return 0;
}
hipError_t hipStreamSynchronize(hipStream_t handle) {
    FAIL_ON_CUE("hipStreamSynchronize");
    StubStream* stream = handle;
    if (stream && stream->capturing) return HIP_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (!stream || !stream->deferred) return 0;
    run_queued(stream, stream->enqueued);
    hipError_t code = stream->error;
    stream->error = 0;
    return code;
}
hipError_t hipStreamQuery(hipStream_t handle) {
    FAIL_ON_CUE("hipStreamQuery");
    StubStream* stream = handle;
    if (stream && stream->capturing) return HIP_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (stream && stream->completed < stream->enqueued) return 600; /* hipErrorNotReady */
    return 0;
}

/* An event: its timing flag, when it was recorded and, recorded on a deferred stream, that
   stream (its id) and the count of its items the record follows. */
typedef struct {
    unsigned flags;
    double milliseconds;
    unsigned long stream;
    unsigned long long sequence;
} StubEvent;
static double now_milliseconds(void) {
    struct timespec time;
    clock_gettime(CLOCK_MONOTONIC, &time);
    return (double)time.tv_sec * 1e3 + (double)time.tv_nsec / 1e6;
}
/* Waits for the most recent record, as HIP's does: on a deferred stream, the wait is queued;
   on any other, the work recorded runs now, since what follows the wait runs at once. */
hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags) {
    FAIL_ON_CUE("hipStreamWaitEvent");
    if (refused_while_capturing(stream)) return HIP_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (flags != 0 || !event) return 1;
    StubEvent* awaited = event;
    if (!awaited->stream) return 0;
    StubStream* waiting = stream;
    if (waiting && waiting->deferred) {
        Work* work = new_work(WORK_WAIT);
        if (work) work->wait_stream = awaited->stream, work->wait_sequence = awaited->sequence;
        return submit(stream, work);
    }
    wait_for(awaited->stream, awaited->sequence);
    return 0;
}
hipError_t hipEventCreateWithFlags(hipEvent_t* event, unsigned flags) {
    FAIL_ON_CUE("hipEventCreateWithFlags");
    StubEvent* created = calloc(1, sizeof(StubEvent));
    if (!created) return HIP_ERROR_OUT_OF_MEMORY;
    created->flags = flags;
    *event = created;
    return 0;
}
hipError_t hipEventDestroy(hipEvent_t event) { free(event); return 0; }
hipError_t hipEventRecord(hipEvent_t event, hipStream_t handle) {
    FAIL_ON_CUE("hipEventRecord");
    if (refused_while_capturing(handle)) return HIP_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    StubEvent* recorded = event;
    StubStream* stream = handle;
    recorded->milliseconds = now_milliseconds();
    recorded->stream = stream && stream->deferred ? stream->id : 0;
    recorded->sequence = stream ? stream->enqueued : 0;
    return 0;
}
/* Whether the work before the event's record is queued still. */
static int event_pending(const StubEvent* event) {
    if (!event->stream) return 0;
    StubStream* stream = deferred_stream(event->stream);
    return stream && stream->completed < event->sequence;
}
hipError_t hipEventQuery(hipEvent_t event) {
    FAIL_ON_CUE("hipEventQuery");
    return event_pending(event) ? 600 : 0;
}
hipError_t hipEventSynchronize(hipEvent_t event) {
    FAIL_ON_CUE("hipEventSynchronize");
    StubEvent* awaited = event;
    if (awaited->stream) wait_for(awaited->stream, awaited->sequence);
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
/* The offset and size of an executable kernel's parameter `index`; nonzero past the last. */
typedef int (*StubParameter)(size_t index, size_t* offset, size_t* size);
struct StubFunction {
    StubLaunch launch;
    StubParameter parameter;
    /* Its module was unloaded: the function is kept (never freed), so a launch of it queued
       before the unload is caught when it runs rather than reading freed memory. */
    int unloaded;
    struct StubFunction* next;
};
typedef struct {
    void* executable;
    StubFunction* functions;
} StubModule;
static StubFunction* unloaded_functions = NULL;

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
    /* The functions go on the list of unloaded ones, kept (see StubFunction). */
    for (StubFunction* function = loaded->functions; function;) {
        StubFunction* next = function->next;
        function->launch = NULL;
        function->parameter = NULL;
        __atomic_store_n(&function->unloaded, 1, __ATOMIC_RELAXED);
        lock_registry();
        function->next = unloaded_functions;
        unloaded_functions = function;
        unlock_registry();
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
    StubParameter parameter = NULL;
    if (loaded->executable) {
        char entry[160];
        snprintf(entry, sizeof entry, "xhemu_launch_%s", name);
        launch = (StubLaunch)(uintptr_t)dlsym(loaded->executable, entry);
        snprintf(entry, sizeof entry, "xhemu_parameter_%s", name);
        parameter = (StubParameter)(uintptr_t)dlsym(loaded->executable, entry);
        if (!launch || !parameter) return 500;
    } else if (!listed_kernel(name)) {
        return 500;
    }
    StubFunction* found = calloc(1, sizeof(StubFunction));
    if (!found) return 2;
    found->launch = launch;
    found->parameter = parameter;
    /* Functions may be looked up from several threads at once. */
    found->next = __atomic_load_n(&loaded->functions, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&loaded->functions, &found->next, found, 0, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED)) {
    }
    *function = found;
    return 0;
}
/* Runs a launch: an executable kernel runs; any other records its grid, block and the bytes
   of the parameters stub_set_parameter_sizes names. */
static hipError_t run_launch(StubFunction* function, const unsigned* dims, void** parameters) {
    if (__atomic_load_n(&function->unloaded, __ATOMIC_RELAXED)) {
        released_in_use();
        return 719; /* hipErrorLaunchFailure */
    }
    if (function->launch) return function->launch(dims, dims + 3, parameters);
    memcpy(launch_dims, dims, sizeof launch_dims);
    for (int i = 0; i < parameter_count; i++) memcpy(launch_parameters[i], parameters[i], parameter_sizes[i]);
    launches++;
    return 0;
}

/* A launch as work, with a copy of each parameter's value, as HIP reads them at the call: an
   executable kernel's parameters are those its `xhemu_parameter_<name>` describes, any other's
   those stub_set_parameter_sizes names. */
static hipError_t launch_work(StubFunction* function, const unsigned* dims, void** parameters, Work** out) {
    size_t sizes[MAX_PARAMETERS];
    int count = 0;
    if (function->parameter) {
        size_t offset, size;
        while (function->parameter((size_t)count, &offset, &size) == 0) {
            if (count == MAX_PARAMETERS) return HIP_ERROR_INVALID_VALUE;
            sizes[count++] = size;
        }
    } else {
        count = parameter_count;
        memcpy(sizes, parameter_sizes, sizeof sizes);
    }
    Work* work = new_work(WORK_LAUNCH);
    size_t total = 0;
    for (int i = 0; i < count; i++) {
        if (work) work->parameter_offsets[i] = total;
        total += (sizes[i] + 15) / 16 * 16;
    }
    unsigned char* values = total ? malloc(total) : NULL;
    if (!work || (total && !values)) {
        free(work);
        free(values);
        return HIP_ERROR_OUT_OF_MEMORY;
    }
    for (int i = 0; i < count; i++) memcpy(values + work->parameter_offsets[i], parameters[i], sizes[i]);
    work->function = function;
    memcpy(work->dims, dims, sizeof work->dims);
    work->parameter_count = count;
    work->values = values;
    work->values_size = total;
    *out = work;
    return 0;
}

hipError_t hipModuleLaunchKernel(hipFunction_t function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                 unsigned by, unsigned bz, unsigned shared, hipStream_t stream, void** parameters,
                                 void** extra) {
    FAIL_ON_CUE("hipModuleLaunchKernel");
    (void)shared;
    if (extra) return 1;
    StubFunction* found = function;
    if (__atomic_load_n(&found->unloaded, __ATOMIC_RELAXED)) {
        released_in_use();
        return 98; /* hipErrorInvalidDeviceFunction */
    }
    if (found->launch) {
        /* The device's limits (hipDeviceGetAttribute above). */
        if (!gx || !gy || !gz || !bx || !by || !bz || bx > 1024 || by > 1024 || bz > 1024 ||
            (unsigned long long)bx * by * bz > 1024 || gx > 2147483647u || gy > 65536 || gz > 65536)
            return 1;
        /* AMD's runtime also refuses more than 2^32 - 1 threads along an axis. */
        if ((unsigned long long)gx * bx > 0xffffffffull || (unsigned long long)gy * by > 0xffffffffull ||
            (unsigned long long)gz * bz > 0xffffffffull)
            return 9; /* hipErrorInvalidConfiguration */
    }
    const unsigned dims[6] = {gx, gy, gz, bx, by, bz};
    Work* work = NULL;
    hipError_t code = launch_work(found, dims, parameters, &work);
    if (code != 0) return code;
    return submit(stream, work);
}

#ifndef STUB_NO_GRAPHS
/* A copy of the list `work` starts, argument values and all; NULL when memory ran out. */
static Work* copy_works(const Work* work, int* failed) {
    Work *head = NULL, **tail = &head;
    *failed = 0;
    for (; work; work = work->next) {
        Work* copy = malloc(sizeof(Work));
        unsigned char* values = work->values_size ? malloc(work->values_size) : NULL;
        if (!copy || (work->values_size && !values)) {
            free(copy);
            free(values);
            free_works(head);
            *failed = 1;
            return NULL;
        }
        *copy = *work;
        copy->next = NULL;
        copy->values = values;
        if (values) memcpy(values, work->values, work->values_size);
        *tail = copy;
        tail = &copy->next;
    }
    return head;
}
/* Graphs and executable graphs: each holds its own list of work. Every one not yet destroyed
   is in a registry, so a handle that is not one is refused rather than read. */
enum { GRAPH, GRAPH_EXEC };
typedef struct StubGraph {
    int kind;
    Work* work;
    struct StubGraph* next;
} StubGraph;
static StubGraph* live_graphs = NULL;

static StubGraph* new_graph(int kind, Work* work) {
    StubGraph* graph = calloc(1, sizeof(StubGraph));
    if (!graph) return NULL;
    graph->kind = kind;
    graph->work = work;
    lock_registry();
    graph->next = live_graphs;
    live_graphs = graph;
    unlock_registry();
    return graph;
}
static int is_live(const void* handle, int kind) {
    int found = 0;
    lock_registry();
    for (StubGraph* graph = live_graphs; graph && !found; graph = graph->next) found = graph == handle && graph->kind == kind;
    unlock_registry();
    return found;
}
/* Removes `handle` from the registry and frees it; 0 where it was no live graph of `kind`. */
static int destroy_graph(void* handle, int kind) {
    StubGraph* found = NULL;
    lock_registry();
    for (StubGraph** at = &live_graphs; *at; at = &(*at)->next) {
        if (*at == handle && (*at)->kind == kind) {
            found = *at;
            *at = found->next;
            break;
        }
    }
    unlock_registry();
    if (!found) return 0;
    free_works(found->work);
    free(found);
    return 1;
}
int stub_graph_objects(void) {
    int count = 0;
    lock_registry();
    for (StubGraph* graph = live_graphs; graph; graph = graph->next) count++;
    unlock_registry();
    return count;
}

hipError_t hipStreamBeginCapture(hipStream_t handle, hipStreamCaptureMode mode) {
    FAIL_ON_CUE("hipStreamBeginCapture");
    StubStream* stream = handle;
    if (!stream) return HIP_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (mode < CAPTURE_GLOBAL || mode > CAPTURE_RELAXED) return HIP_ERROR_INVALID_VALUE;
    if (stream->capturing) return HIP_ERROR_ILLEGAL_STATE;
    lock_registry();
    if (capture_count == MAX_CAPTURES) {
        unlock_registry();
        return HIP_ERROR_OUT_OF_MEMORY;
    }
    captures[capture_count++] = stream;
    stream->capturing = 1;
    stream->invalidated = 0;
    stream->mode = mode;
    stream->thread = THIS_THREAD;
    stream->captured_head = stream->captured_tail = NULL;
    unlock_registry();
    __atomic_store_n(&last_capture_mode, mode, __ATOMIC_RELAXED);
    return 0;
}
hipError_t hipStreamEndCapture(hipStream_t handle, hipGraph_t* graph) {
    FAIL_ON_CUE("hipStreamEndCapture");
    StubStream* stream = handle;
    if (!graph) return HIP_ERROR_INVALID_VALUE;
    if (!stream || !stream->capturing) return HIP_ERROR_ILLEGAL_STATE;
    if (stream->mode != CAPTURE_RELAXED && stream->thread != THIS_THREAD) return HIP_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    *graph = NULL;
    if (stream->invalidated) {
        forget_capture(stream);
        return HIP_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    StubGraph* made = new_graph(GRAPH, stream->captured_head);
    if (!made) {
        forget_capture(stream);
        return HIP_ERROR_OUT_OF_MEMORY;
    }
    /* The work is the graph's now. */
    stream->captured_head = stream->captured_tail = NULL;
    forget_capture(stream);
    *graph = made;
    return 0;
}
/* An executable graph holds a copy of the graph's work, so it outlives the graph, as in HIP. */
hipError_t hipGraphInstantiate(hipGraphExec_t* exec, hipGraph_t graph, hipGraphNode_t* error_node, char* log,
                               size_t log_size) {
    FAIL_ON_CUE("hipGraphInstantiate");
    if (error_node) *error_node = NULL;
    if (log && log_size) log[0] = 0;
    if (!exec || !graph || !is_live(graph, GRAPH)) return HIP_ERROR_INVALID_VALUE;
    int failed;
    Work* work = copy_works(((StubGraph*)graph)->work, &failed);
    if (failed) return HIP_ERROR_OUT_OF_MEMORY;
    StubGraph* made = new_graph(GRAPH_EXEC, work);
    if (!made) {
        free_works(work);
        return HIP_ERROR_OUT_OF_MEMORY;
    }
    *exec = made;
    return 0;
}
/* Runs the executable graph's work in order; the first failure stops it. A graph destroyed
   before a launch of it queued on a deferred stream ran does not run. */
static hipError_t run_graph(void* exec) {
    if (!is_live(exec, GRAPH_EXEC)) {
        released_in_use();
        return 719; /* hipErrorLaunchFailure */
    }
    __atomic_fetch_add(&graph_launches, 1, __ATOMIC_RELAXED);
    for (const Work* work = ((StubGraph*)exec)->work; work; work = work->next) {
        hipError_t code = run_work(work);
        if (code != 0) return code;
    }
    return 0;
}
/* Runs the executable graph at once like all this stub's work, or queues the launch on a
   deferred stream. */
hipError_t hipGraphLaunch(hipGraphExec_t exec, hipStream_t stream) {
    FAIL_ON_CUE("hipGraphLaunch");
    if (!exec || !is_live(exec, GRAPH_EXEC)) return HIP_ERROR_INVALID_VALUE;
    if (refused_while_capturing(stream)) return HIP_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    Work* work = new_work(WORK_GRAPH);
    if (work) work->exec = exec;
    return submit(stream, work);
}
hipError_t hipGraphExecDestroy(hipGraphExec_t exec) {
    FAIL_ON_CUE("hipGraphExecDestroy");
    if (!exec || !destroy_graph(exec, GRAPH_EXEC)) return HIP_ERROR_INVALID_VALUE;
    return 0;
}
hipError_t hipGraphDestroy(hipGraph_t graph) {
    FAIL_ON_CUE("hipGraphDestroy");
    if (!graph) return HIP_ERROR_INVALID_VALUE;
    if (!destroy_graph(graph, GRAPH)) return HIP_ERROR_ILLEGAL_STATE;
    return 0;
}
#else
int stub_graph_objects(void) { return 0; }
/* Never queued: the library has no hipGraphLaunch. */
static hipError_t run_graph(void* exec) {
    (void)exec;
    return HIP_ERROR_INVALID_VALUE;
}
#endif

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
