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
static void free_device_memory(CUdeviceptr pointer) {
    if (!pointer) return;
    unsigned char *memory = (unsigned char *)(uintptr_t)pointer - STUB_ALLOCATION_HEADER;
    size_t rounded;
    memcpy(&rounded, memory, sizeof rounded);
    __atomic_fetch_sub(&allocated_memory, rounded, __ATOMIC_RELAXED);
    free(memory);
}
static void synchronize_all(void);
CUresult cuMemAllocAsync(CUdeviceptr *pointer, size_t size, CUstream stream) {
    CUE("cuMemAllocAsync");
    (void)stream;
    CUresult code = cuMemAlloc_v2(pointer, size);
    if (code == 2) {
        /* A pool reuses memory whose stream-ordered frees are still queued, by making the
           allocation wait for them (CUDA's default reuse policy allows it): so does the stub. */
        synchronize_all();
        code = cuMemAlloc_v2(pointer, size);
    }
    return code;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr to, const void *from, size_t size) {
    CUE_CONTEXT("cuMemcpyHtoD_v2");
    synchronize_all();
    memcpy((void *)(uintptr_t)to, from, size);
    return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr to, CUdeviceptr from, size_t size) {
    CUE_CONTEXT("cuMemcpyDtoD_v2");
    synchronize_all();
    memcpy((void *)(uintptr_t)to, (const void *)(uintptr_t)from, size);
    return CUDA_SUCCESS;
}

/* Streams. By default a stream runs its work at once, in order, on the calling thread. With
   STUB_ASYNC=1 (set when the stream is created) each stream is a worker thread with a queue,
   as on a GPU: a call enqueues and returns, and the work runs later. Then the emulator sees
   what a synchronous stub cannot: a host buffer changed or freed before the copy that reads it
   ran, a wait on an event that was not recorded yet, a read of a result before it was made.
   Copies follow CUDA's rules for host memory: pinned memory (cuMemHostAlloc) is read or
   written when the copy runs; pageable memory is read at the call (host to device) or written
   before the call returns (device to host). */
#include <pthread.h>

/* The launch of an executable kernel, defined with the modules below. */
typedef struct StubFunction StubFunction;
static int run_launch(StubFunction *function, const unsigned *grid, const unsigned *block, void **parameters);

/* Events: the flags, the count of records asked for and done, and when the last one was done
   (STUB_CLOCK=real). */
typedef struct {
    unsigned flags;
    unsigned long long recorded, completed;
    double milliseconds;
} StubEvent;

enum { WORK_COPY, WORK_FILL, WORK_HOST, WORK_LAUNCH, WORK_RECORD, WORK_WAIT, WORK_FREE };
typedef struct Work {
    struct Work *next;
    int kind;
    void *to;
    const void *from;
    size_t size;
    void *owned; /* freed once the work ran: a copy of pageable memory, or launch parameters */
    unsigned width, value;
    CUhostFn function;
    void *data;
    StubFunction *kernel;
    unsigned grid[3], block[3];
    void **parameters;
    StubEvent *event;
    unsigned long long target;
    CUdeviceptr pointer;
} Work;

typedef struct StubStream {
    int asynchronous;
    /* Between cuStreamBeginCapture_v2 and cuStreamEndCapture: work is recorded, not run. */
    int capturing;
    Work *captured_head, *captured_tail;
    Work *head, *tail;
    int busy, stop;
    CUresult error; /* a launch that failed while running; returned by the next sync or query */
    pthread_t worker;
} StubStream;

/* One lock and one condition for every stream and event: the stub wants simple, not fast. */
static pthread_mutex_t stub_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stub_changed = PTHREAD_COND_INITIALIZER;
static StubStream **streams;
static size_t stream_count, stream_capacity;

/* Pinned host memory, for the copy rules above. */
typedef struct { const unsigned char *start; size_t size; } PinnedRange;
static PinnedRange *pinned;
static size_t pinned_count, pinned_capacity;

static int is_pinned(const void *pointer, size_t size) {
    const unsigned char *at = pointer;
    int found = 0;
    pthread_mutex_lock(&stub_lock);
    for (size_t i = 0; i < pinned_count && !found; i++)
        found = at >= pinned[i].start && at + size <= pinned[i].start + pinned[i].size;
    pthread_mutex_unlock(&stub_lock);
    return found;
}

static void free_device_memory(CUdeviceptr pointer);
static double now_milliseconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec * 1e3 + (double)now.tv_nsec / 1e6;
}

/* Runs `work`, on whichever thread runs the stream; the lock is not held. */
static CUresult run_work(Work *work) {
    switch (work->kind) {
    case WORK_COPY: memcpy(work->to, work->from, work->size); break;
    case WORK_FILL:
        for (size_t i = 0; i < work->size; i++) {
            if (work->width == 1) ((unsigned char *)work->to)[i] = (unsigned char)work->value;
            else if (work->width == 2) ((unsigned short *)work->to)[i] = (unsigned short)work->value;
            else ((unsigned *)work->to)[i] = work->value;
        }
        break;
    case WORK_HOST:
        in_host_function = 1;
        work->function(work->data);
        in_host_function = 0;
        break;
    case WORK_LAUNCH: return (CUresult)run_launch(work->kernel, work->grid, work->block, work->parameters);
    case WORK_RECORD:
        pthread_mutex_lock(&stub_lock);
        work->event->completed = work->target;
        work->event->milliseconds = now_milliseconds();
        pthread_cond_broadcast(&stub_changed);
        pthread_mutex_unlock(&stub_lock);
        break;
    case WORK_WAIT: break; /* the worker does not start it before the event is done */
    case WORK_FREE: free_device_memory(work->pointer); break;
    }
    return CUDA_SUCCESS;
}

static void *stream_worker(void *argument) {
    StubStream *stream = argument;
    pthread_mutex_lock(&stub_lock);
    for (;;) {
        Work *work = stream->head;
        if (!work) {
            if (stream->stop) break;
            pthread_cond_wait(&stub_changed, &stub_lock);
            continue;
        }
        if (work->kind == WORK_WAIT && work->event->completed < work->target) {
            pthread_cond_wait(&stub_changed, &stub_lock);
            continue;
        }
        stream->head = work->next;
        if (!stream->head) stream->tail = NULL;
        stream->busy = 1;
        pthread_mutex_unlock(&stub_lock);
        CUresult code = run_work(work);
        pthread_mutex_lock(&stub_lock);
        if (code != CUDA_SUCCESS && stream->error == CUDA_SUCCESS) stream->error = code;
        stream->busy = 0;
        free(work->owned);
        free(work);
        pthread_cond_broadcast(&stub_changed);
    }
    pthread_mutex_unlock(&stub_lock);
    return NULL;
}

static void synchronize_stream(StubStream *stream) {
    pthread_mutex_lock(&stub_lock);
    while (stream->head || stream->busy) pthread_cond_wait(&stub_changed, &stub_lock);
    pthread_mutex_unlock(&stub_lock);
}

static void synchronize_all(void) {
    pthread_mutex_lock(&stub_lock);
    for (;;) {
        int pending = 0;
        for (size_t i = 0; i < stream_count; i++) pending |= streams[i]->head != NULL || streams[i]->busy;
        if (!pending) break;
        pthread_cond_wait(&stub_changed, &stub_lock);
    }
    pthread_mutex_unlock(&stub_lock);
}

/* Queues `work` on an asynchronous stream; runs it at once on a synchronous one, or on the
   legacy default stream (NULL), which waits for every other stream first. */
static CUresult submit(CUstream handle, Work *work) {
    StubStream *stream = handle;
    if (stream && stream->capturing) {
        /* Captured into the stream's graph: the launch's parameter block goes with it. */
        if (stream->captured_tail) stream->captured_tail->next = work;
        else stream->captured_head = work;
        stream->captured_tail = work;
        return CUDA_SUCCESS;
    }
    if (!stream || !stream->asynchronous) {
        if (!stream) synchronize_all();
        /* A wait here has nothing to wait for: whatever it names ran when it was submitted. */
        CUresult code = run_work(work);
        free(work->owned);
        free(work);
        return code;
    }
    pthread_mutex_lock(&stub_lock);
    if (stream->tail) stream->tail->next = work;
    else stream->head = work;
    stream->tail = work;
    pthread_cond_broadcast(&stub_changed);
    pthread_mutex_unlock(&stub_lock);
    return CUDA_SUCCESS;
}

static Work *new_work(int kind) {
    Work *work = calloc(1, sizeof(Work));
    if (work) work->kind = kind;
    return work;
}

CUresult cuStreamCreate(CUstream *handle, unsigned flags) {
    CUE_CONTEXT("cuStreamCreate");
    (void)flags;
    StubStream *stream = calloc(1, sizeof(StubStream));
    if (!stream) return 2;
    const char *asynchronous = getenv("STUB_ASYNC");
    stream->asynchronous = asynchronous && strcmp(asynchronous, "1") == 0;
    if (stream->asynchronous) {
        pthread_mutex_lock(&stub_lock);
        if (stream_count == stream_capacity) {
            size_t capacity = stream_capacity ? stream_capacity * 2 : 16;
            StubStream **grown = realloc(streams, capacity * sizeof *grown);
            if (!grown) {
                pthread_mutex_unlock(&stub_lock);
                free(stream);
                return 2;
            }
            streams = grown;
            stream_capacity = capacity;
        }
        streams[stream_count++] = stream;
        pthread_mutex_unlock(&stub_lock);
        if (pthread_create(&stream->worker, NULL, stream_worker, stream) != 0) return 2;
    }
    *handle = stream;
    return CUDA_SUCCESS;
}
/* The range of recent GPUs. The stub runs every stream's work in order on its own thread,
 * so a priority changes nothing it does: it only has to be in the range. */
#define STUB_LEAST_PRIORITY 0
#define STUB_GREATEST_PRIORITY (-5)
CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest) {
    CUE_CONTEXT("cuCtxGetStreamPriorityRange");
    if (least) *least = STUB_LEAST_PRIORITY;
    if (greatest) *greatest = STUB_GREATEST_PRIORITY;
    return CUDA_SUCCESS;
}
CUresult cuStreamCreateWithPriority(CUstream *handle, unsigned flags, int priority) {
    CUE_CONTEXT("cuStreamCreateWithPriority");
    /* CUDA clamps a priority outside the range; xhal never passes one, and the stub refuses
     * it so that a test would notice if it did. */
    if (priority > STUB_LEAST_PRIORITY || priority < STUB_GREATEST_PRIORITY) return CUDA_ERROR_INVALID_VALUE;
    return cuStreamCreate(handle, flags);
}
CUresult cuStreamDestroy_v2(CUstream handle) {
    StubStream *stream = handle;
    if (!stream) return CUDA_ERROR_INVALID_VALUE;
    if (stream->asynchronous) {
        /* CUDA lets queued work finish after the destroy returns; the stub waits for it here. */
        synchronize_stream(stream);
        pthread_mutex_lock(&stub_lock);
        stream->stop = 1;
        for (size_t i = 0; i < stream_count; i++) {
            if (streams[i] == stream) {
                streams[i] = streams[--stream_count];
                break;
            }
        }
        pthread_cond_broadcast(&stub_changed);
        pthread_mutex_unlock(&stub_lock);
        pthread_join(stream->worker, NULL);
    }
    free(stream);
    return CUDA_SUCCESS;
}
CUresult cuCtxSynchronize(void) {
    CUE_CONTEXT("cuCtxSynchronize");
    synchronize_all();
    return CUDA_SUCCESS;
}
/* The error a running launch left on `stream`, once. */
static CUresult take_error(StubStream *stream) {
    pthread_mutex_lock(&stub_lock);
    CUresult code = stream ? stream->error : CUDA_SUCCESS;
    if (stream) stream->error = CUDA_SUCCESS;
    pthread_mutex_unlock(&stub_lock);
    return code;
}
CUresult cuStreamSynchronize(CUstream stream) {
    CUE("cuStreamSynchronize");
    if (stream) synchronize_stream(stream);
    else synchronize_all();
    return take_error(stream);
}
CUresult cuStreamQuery(CUstream handle) {
    CUE("cuStreamQuery");
    StubStream *stream = handle;
    if (!stream) return CUDA_SUCCESS;
    pthread_mutex_lock(&stub_lock);
    int pending = stream->head != NULL || stream->busy;
    pthread_mutex_unlock(&stub_lock);
    return pending ? 600 /* CUDA_ERROR_NOT_READY */ : take_error(stream);
}
CUresult cuStreamWaitEvent(CUstream stream, CUevent handle, unsigned flags) {
    CUE("cuStreamWaitEvent");
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    StubEvent *event = handle;
    /* The wait is for the record made last before this call; none yet is nothing to wait for. */
    pthread_mutex_lock(&stub_lock);
    unsigned long long target = event->recorded;
    pthread_mutex_unlock(&stub_lock);
    if (target == 0) return CUDA_SUCCESS;
    Work *work = new_work(WORK_WAIT);
    if (!work) return 2;
    work->event = event;
    work->target = target;
    return submit(stream, work);
}
static CUresult submit_copy(CUstream stream, void *to, const void *from, size_t size, void *owned) {
    Work *work = new_work(WORK_COPY);
    if (!work) {
        free(owned);
        return 2;
    }
    work->to = to;
    work->from = from;
    work->size = size;
    work->owned = owned;
    return submit(stream, work);
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr to, const void *from, size_t size, CUstream stream) {
    CUE("cuMemcpyHtoDAsync_v2");
    StubStream *queue = stream;
    if (queue && queue->asynchronous && !is_pinned(from, size)) {
        void *staged = malloc(size ? size : 1);
        if (!staged) return 2;
        memcpy(staged, from, size);
        return submit_copy(stream, (void *)(uintptr_t)to, staged, size, staged);
    }
    return submit_copy(stream, (void *)(uintptr_t)to, from, size, NULL);
}
CUresult cuMemcpyDtoHAsync_v2(void *to, CUdeviceptr from, size_t size, CUstream stream) {
    CUE("cuMemcpyDtoHAsync_v2");
    StubStream *queue = stream;
    if (queue && queue->asynchronous && !is_pinned(to, size)) {
        synchronize_stream(queue);
        memcpy(to, (const void *)(uintptr_t)from, size);
        return CUDA_SUCCESS;
    }
    return submit_copy(stream, to, (const void *)(uintptr_t)from, size, NULL);
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr to, CUdeviceptr from, size_t size, CUstream stream) {
    CUE("cuMemcpyDtoDAsync_v2");
    return submit_copy(stream, (void *)(uintptr_t)to, (const void *)(uintptr_t)from, size, NULL);
}
CUresult cuMemcpyDtoH_v2(void *to, CUdeviceptr from, size_t size) {
    CUE_CONTEXT("cuMemcpyDtoH_v2");
    synchronize_all();
    memcpy(to, (const void *)(uintptr_t)from, size);
    return CUDA_SUCCESS;
}
/* cuMemFree waits for the device, as CUDA's does; cuMemFreeAsync frees in stream order. */
CUresult cuMemFree_v2(CUdeviceptr pointer) {
    CUE_CONTEXT("cuMemFree_v2");
    synchronize_all();
    free_device_memory(pointer);
    return CUDA_SUCCESS;
}
CUresult cuMemFreeAsync(CUdeviceptr pointer, CUstream stream) {
    CUE("cuMemFreeAsync");
    Work *work = new_work(WORK_FREE);
    if (!work) return 2;
    work->pointer = pointer;
    return submit(stream, work);
}
CUresult cuMemHostAlloc(void **pointer, size_t size, unsigned flags) {
    CUE_CONTEXT("cuMemHostAlloc");
    (void)flags;
    /* Page-aligned, as CUDA's pinned memory is; a size the rounding would wrap is more memory
       than any host has. */
    if (size > SIZE_MAX - 4096) return 2;
    size_t rounded = ((size ? size : 1) + 4095) / 4096 * 4096;
    *pointer = aligned_alloc(4096, rounded);
    if (!*pointer) return 2;
    pthread_mutex_lock(&stub_lock);
    if (pinned_count == pinned_capacity) {
        size_t capacity = pinned_capacity ? pinned_capacity * 2 : 16;
        PinnedRange *grown = realloc(pinned, capacity * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&stub_lock);
            free(*pointer);
            return 2;
        }
        pinned = grown;
        pinned_capacity = capacity;
    }
    pinned[pinned_count++] = (PinnedRange){*pointer, size};
    pthread_mutex_unlock(&stub_lock);
    return CUDA_SUCCESS;
}
CUresult cuMemAllocHost_v2(void **pointer, size_t size) { return cuMemHostAlloc(pointer, size, 0); }
/* Waits for the device first, as CUDA's does: queued copies may still read the memory. */
CUresult cuMemFreeHost(void *pointer) {
    synchronize_all();
    pthread_mutex_lock(&stub_lock);
    for (size_t i = 0; i < pinned_count; i++) {
        if (pinned[i].start == pointer) {
            pinned[i] = pinned[--pinned_count];
            break;
        }
    }
    pthread_mutex_unlock(&stub_lock);
    free(pointer);
    return CUDA_SUCCESS;
}

static CUresult submit_fill(CUstream stream, CUdeviceptr to, unsigned width, unsigned value, size_t count) {
    Work *work = new_work(WORK_FILL);
    if (!work) return 2;
    work->to = (void *)(uintptr_t)to;
    work->width = width;
    work->value = value;
    work->size = count;
    return submit(stream, work);
}
CUresult cuMemsetD8Async(CUdeviceptr to, unsigned char value, size_t count, CUstream stream) {
    CUE("cuMemsetD8Async");
    return submit_fill(stream, to, 1, value, count);
}
CUresult cuMemsetD16Async(CUdeviceptr to, unsigned short value, size_t count, CUstream stream) {
    CUE("cuMemsetD16Async");
    return submit_fill(stream, to, 2, value, count);
}
CUresult cuMemsetD32Async(CUdeviceptr to, unsigned value, size_t count, CUstream stream) {
    CUE("cuMemsetD32Async");
    return submit_fill(stream, to, 4, value, count);
}
/* Graphs through stream capture: a graph is the list of work captured, an executable graph
   names it, and a launch submits a copy of each piece of work (the parameter blocks stay the
   graph's). Only copies between device memory, fills and kernel launches are captured here. */
typedef struct StubGraph {
    Work *head;
} StubGraph;
typedef struct StubGraphExec {
    StubGraph *graph;
} StubGraphExec;

/* Graphs captured and not yet destroyed: a test reads it to find leaks. */
static int live_graphs;
int xhal_cuda_stub_live_graphs(void);
int xhal_cuda_stub_live_graphs(void) { return __atomic_load_n(&live_graphs, __ATOMIC_SEQ_CST); }

CUresult cuStreamBeginCapture_v2(CUstream handle, int mode) {
    CUE_CONTEXT("cuStreamBeginCapture_v2");
    (void)mode;
    StubStream *stream = handle;
    if (!stream || stream->capturing) return CUDA_ERROR_INVALID_VALUE;
    synchronize_stream(stream);
    stream->capturing = 1;
    stream->captured_head = stream->captured_tail = NULL;
    return CUDA_SUCCESS;
}
CUresult cuStreamEndCapture(CUstream handle, void **graph) {
    CUE_CONTEXT("cuStreamEndCapture");
    StubStream *stream = handle;
    if (!stream || !stream->capturing || !graph) return CUDA_ERROR_INVALID_VALUE;
    StubGraph *made = calloc(1, sizeof *made);
    if (!made) return 2;
    made->head = stream->captured_head;
    stream->captured_head = stream->captured_tail = NULL;
    stream->capturing = 0;
    *graph = made;
    __atomic_add_fetch(&live_graphs, 1, __ATOMIC_SEQ_CST);
    return CUDA_SUCCESS;
}
CUresult cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags) {
    CUE_CONTEXT("cuGraphInstantiateWithFlags");
    (void)flags;
    if (!exec || !graph) return CUDA_ERROR_INVALID_VALUE;
    StubGraphExec *made = calloc(1, sizeof *made);
    if (!made) return 2;
    made->graph = graph;
    *exec = made;
    return CUDA_SUCCESS;
}
CUresult cuGraphLaunch(void *exec, CUstream stream) {
    CUE_CONTEXT("cuGraphLaunch");
    StubGraphExec *graph_exec = exec;
    if (!graph_exec) return CUDA_ERROR_INVALID_VALUE;
    for (Work *work = graph_exec->graph->head; work; work = work->next) {
        Work *copy = new_work(work->kind);
        if (!copy) return 2;
        *copy = *work;
        copy->next = NULL;
        copy->owned = NULL;
        CUresult code = submit(stream, copy);
        if (code != CUDA_SUCCESS) return code;
    }
    return CUDA_SUCCESS;
}
CUresult cuGraphExecDestroy(void *exec) {
    CUE_CONTEXT("cuGraphExecDestroy");
    free(exec);
    return CUDA_SUCCESS;
}
/* Waits for the device first: launches of the graph may still read its parameter blocks. */
CUresult cuGraphDestroy(void *graph) {
    CUE_CONTEXT("cuGraphDestroy");
    StubGraph *stub = graph;
    if (!stub) return CUDA_SUCCESS;
    synchronize_all();
    for (Work *work = stub->head; work;) {
        Work *next = work->next;
        free(work->owned);
        free(work);
        work = next;
    }
    free(stub);
    __atomic_sub_fetch(&live_graphs, 1, __ATOMIC_SEQ_CST);
    return CUDA_SUCCESS;
}

CUresult cuLaunchHostFunc(CUstream stream, CUhostFn function, void *data) {
    CUE("cuLaunchHostFunc");
    Work *work = new_work(WORK_HOST);
    if (!work) return 2;
    work->function = function;
    work->data = data;
    return submit(stream, work);
}

CUresult cuEventCreate(CUevent *event, unsigned flags) {
    CUE_CONTEXT("cuEventCreate");
    StubEvent *state = calloc(1, sizeof(StubEvent));
    state->flags = flags;
    *event = state;
    return CUDA_SUCCESS;
}
CUresult cuEventDestroy_v2(CUevent event) {
    /* A record still queued refers to the event: CUDA lets it finish, so the stub does too. */
    synchronize_all();
    free(event);
    return CUDA_SUCCESS;
}
CUresult cuEventRecord(CUevent handle, CUstream stream) {
    CUE("cuEventRecord");
    StubEvent *event = handle;
    Work *work = new_work(WORK_RECORD);
    if (!work) return 2;
    pthread_mutex_lock(&stub_lock);
    work->target = ++event->recorded;
    pthread_mutex_unlock(&stub_lock);
    work->event = event;
    return submit(stream, work);
}
CUresult cuEventQuery(CUevent handle) {
    CUE("cuEventQuery");
    StubEvent *event = handle;
    pthread_mutex_lock(&stub_lock);
    int done = event->completed >= event->recorded;
    pthread_mutex_unlock(&stub_lock);
    return done ? CUDA_SUCCESS : 600; /* CUDA_ERROR_NOT_READY */
}
CUresult cuEventSynchronize(CUevent handle) {
    CUE("cuEventSynchronize");
    StubEvent *event = handle;
    pthread_mutex_lock(&stub_lock);
    while (event->completed < event->recorded) pthread_cond_wait(&stub_changed, &stub_lock);
    pthread_mutex_unlock(&stub_lock);
    return CUDA_SUCCESS;
}
CUresult cuEventElapsedTime(float *milliseconds, CUevent start, CUevent end) {
    CUE("cuEventElapsedTime");
    const StubEvent *first = start, *last = end;
    if ((first->flags | last->flags) & 2) return 400; /* CUDA_ERROR_INVALID_HANDLE */
    pthread_mutex_lock(&stub_lock);
    int done = first->completed >= first->recorded && last->completed >= last->recorded;
    pthread_mutex_unlock(&stub_lock);
    if (!done) return 600; /* CUDA_ERROR_NOT_READY */
    const char *clock = getenv("STUB_CLOCK");
    *milliseconds = clock && strcmp(clock, "real") == 0 ? (float)(last->milliseconds - first->milliseconds) : 0.25f;
    return CUDA_SUCCESS;
}

/* Modules: the image is kept; every name the text contains is a function. An executable
   module (a shared object from the emulator's NVRTC) is opened instead. */
typedef struct { char *text; int any_name; void *executable; } StubModule;
typedef int (*StubLaunch)(const unsigned *grid, const unsigned *block, void **parameters);
typedef int (*StubParameter)(size_t index, size_t *offset, size_t *size);
struct StubFunction { char name[128]; StubLaunch launch; StubParameter parameter; int parameters; };

static int run_launch(StubFunction *function, const unsigned *grid, const unsigned *block, void **parameters) {
    return function->launch(grid, block, parameters);
}

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
    (void)shared; (void)extra;
    CUE_CONTEXT("cuLaunchKernel");
    StubFunction *found = function;
    if (found->launch) {
        if (!gx || !gy || !gz || !bx || !by || !bz || bx > 1024 || by > 1024 || bz > 64 ||
            (unsigned long long)bx * by * bz > 1024 || gy > 65535 || gz > 65535)
            return CUDA_ERROR_INVALID_VALUE;
        /* CUDA reads the parameters' values at the call: they are copied, with the pointer
           array, into one block that lives until the launch ran. */
        size_t count = 0, bytes = 0, offset, size;
        while (found->parameter(count, &offset, &size) == CUDA_SUCCESS) {
            bytes += (size + 15) / 16 * 16;
            count++;
        }
        Work *work = new_work(WORK_LAUNCH);
        size_t pointers = (count * sizeof(void *) + 15) / 16 * 16;
        unsigned char *block = aligned_alloc(16, (pointers + bytes + 16) / 16 * 16);
        if (!work || !block) {
            free(work);
            free(block);
            return 2;
        }
        void **copied = (void **)block;
        unsigned char *values = block + pointers;
        for (size_t i = 0; i < count; i++) {
            found->parameter(i, &offset, &size);
            memcpy(values, parameters[i], size);
            copied[i] = values;
            values += (size + 15) / 16 * 16;
        }
        work->kernel = found;
        work->parameters = copied;
        work->owned = block;
        work->grid[0] = gx, work->grid[1] = gy, work->grid[2] = gz;
        work->block[0] = bx, work->block[1] = by, work->block[2] = bz;
        return submit(stream, work);
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
