/*
 * libxhal_c-plugin.so: an xhal backend plugin in plain C11, written against include/xhal.h only.
 *
 * The device is the host itself: buffers are host RAM (counted against a fixed device memory
 * budget, so running out of memory is deterministic), every stream is a worker thread that runs
 * its queue in order, events are points in those queues stamped with CLOCK_MONOTONIC when the
 * worker reaches them, and kernels are C functions compiled into this file. A module in this
 * plugin's kernel format (C_PLUGIN_KERNEL_FORMAT) is UTF-8 text naming one of those functions
 * per line; see README.md. Command lists (ABI 1.4) are arrays of the same prepared copies,
 * fills and launches the eager entries enqueue, and a submission enqueues the whole array as
 * one operation of the stream.
 *
 * Build (what `make c-plugin` runs):
 *   cc -std=c11 -pedantic -Wall -Wextra -Werror -O2 -fPIC -shared -fvisibility=hidden -I include \
 *      -o target/c-plugin/libxhal_c-plugin.so examples/c-plugin/c_plugin.c -lpthread
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xhal.h"

/* Vendor formats start at XHAL_KERNEL_FORMAT_VENDOR_BASE (docs/abi.md, "Kernel formats"). */
#define C_PLUGIN_KERNEL_FORMAT (XHAL_KERNEL_FORMAT_VENDOR_BASE + 0xC01u)

#define PLUGIN_NAME "c-plugin"
#define PLUGIN_VERSION "0.1.0"
#define DEVICE_COUNT 1u
/* A fixed budget rather than the machine's RAM, so that "out of memory" and "free memory"
 * mean the same thing on every host the suite runs on. */
#define DEVICE_MEMORY (512ull << 20)
#define MAX_ALLOCATION (256ull << 20)
#define WORKGROUP_SIZE 64u
#define MAX_WORKGROUP_COUNT 65535u
#define MAX_BUFFER_ARGUMENTS 8u
#define MAX_SCALAR_BLOCK 128u
#define BUFFER_OFFSET_ALIGNMENT 4u
#define FAILURE_MESSAGE_SIZE 448

/* ------------------------------------------------------------------------------------------ */
/* Errors                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* One allocation: the XhalError, then its message. */
typedef struct OwnedError {
    XhalError error;
    char text[];
} OwnedError;

static XhalError *error_new(XhalStatus code, const char *text) {
    size_t length = strlen(text);
    OwnedError *owned = malloc(sizeof *owned + length + 1);
    if (owned == NULL) {
        return NULL;
    }
    memcpy(owned->text, text, length + 1);
    owned->error.struct_size = XHAL_ERROR_V1_0_SIZE;
    owned->error.code = code;
    owned->error.message.ptr = (const uint8_t *)owned->text;
    owned->error.message.len = length;
    return &owned->error;
}

/* Returns `code`; when the caller asked for an error object, stores one saying what was wrong.
 * When even that allocation fails the host still gets the status ("no message"). */
static XhalStatus fail(XhalError **error, XhalStatus code, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static XhalStatus fail(XhalError **error, XhalStatus code, const char *format, ...) {
    if (error != NULL) {
        char text[FAILURE_MESSAGE_SIZE + 256];
        va_list arguments;
        va_start(arguments, format);
        vsnprintf(text, sizeof text, format, arguments);
        va_end(arguments);
        *error = error_new(code, text);
    }
    return code;
}

static void plugin_error_free(XhalError *error) {
    /* Every error this plugin hands out is the head of an OwnedError. */
    free(error);
}

/* ------------------------------------------------------------------------------------------ */
/* Objects                                                                                    */
/* ------------------------------------------------------------------------------------------ */

/* Every handle starts with its kind, so a handle of the wrong kind is refused by name instead
 * of being misread. (A destroyed handle cannot be detected without reading freed memory; the
 * xhal host never passes one.) */
typedef enum ObjectKind {
    KIND_DEVICE = 0x0de71ce0,
    KIND_BUFFER = 0x0b0ffe20,
    KIND_STREAM = 0x057ea300,
    KIND_EVENT = 0x0e7e0700,
    KIND_MODULE = 0x0a0d0100,
    KIND_KERNEL = 0x0ce77e10,
    KIND_COMMAND_LIST = 0x0c0d1157,
} ObjectKind;

struct XhalDevice {
    ObjectKind kind;
    uint32_t index;
};

struct XhalBuffer {
    ObjectKind kind;
    struct XhalDevice *device;
    uint64_t size;
    uint8_t *bytes;
};

/* A point in a stream. Shared by the event that was recorded (until it is recorded again or
 * destroyed), the queued record operation, and every wait or host query holding on to it. */
typedef struct Record {
    pthread_mutex_t lock;
    pthread_cond_t completed_signal;
    atomic_uint references;
    bool completed;
    XhalStatus failure;       /* the recording stream's sticky error, when it had one */
    char failure_message[FAILURE_MESSAGE_SIZE];
    uint64_t completed_at_ns; /* CLOCK_MONOTONIC when the stream reached the record */
} Record;

struct XhalEvent {
    ObjectKind kind;
    struct XhalDevice *device;
    bool timing;
    pthread_mutex_t lock; /* guards latest */
    Record *latest;       /* the most recent record; null when never recorded */
};

typedef struct KernelArguments KernelArguments;
/* Runs one launch. Returns XHAL_STATUS_OK, or a failure with its message in `message`. */
typedef XhalStatus (*KernelFunction)(const KernelArguments *arguments, char *message, size_t message_size);
/* Checks a launch's arguments at enqueue time; fills `message` and returns a status on refusal. */
typedef XhalStatus (*KernelCheck)(const KernelArguments *arguments, char *message, size_t message_size);

typedef struct KernelDefinition {
    const char *name;
    uint32_t buffer_count;
    uint32_t scalar_size;
    KernelCheck check;
    KernelFunction run;
} KernelDefinition;

struct XhalModule {
    ObjectKind kind;
    struct XhalDevice *device;
    size_t entry_count;
    const KernelDefinition **entries;
};

struct XhalKernel {
    ObjectKind kind;
    struct XhalDevice *device;
    const KernelDefinition *definition;
};

typedef struct BufferView {
    struct XhalBuffer *buffer;
    uint64_t offset;
    uint64_t size;
} BufferView;

struct KernelArguments {
    uint32_t workgroups[3];
    uint32_t buffer_count;
    BufferView buffers[MAX_BUFFER_ARGUMENTS];
    uint8_t scalars[MAX_SCALAR_BLOCK];
    size_t scalar_size;
};

typedef enum OperationKind {
    OPERATION_WRITE,
    OPERATION_READ,
    OPERATION_COPY,
    OPERATION_FILL,
    OPERATION_LAUNCH,
    OPERATION_RECORD,
    OPERATION_WAIT,
    OPERATION_LIST,
} OperationKind;

typedef struct CommandArray CommandArray;

/* One unit of a stream's queue. A copy, fill or launch is also a command of a command list:
 * the same struct, prepared by the same function, whichever way it is enqueued. */
typedef struct Operation {
    struct Operation *next;
    OperationKind kind;
    union {
        struct {
            struct XhalBuffer *buffer;
            uint64_t offset;
            const uint8_t *source;
            uint64_t size;
        } write;
        struct {
            struct XhalBuffer *buffer;
            uint64_t offset;
            uint8_t *destination;
            uint64_t size;
        } read;
        struct {
            struct XhalBuffer *source;
            uint64_t source_offset;
            struct XhalBuffer *destination;
            uint64_t destination_offset;
            uint64_t size;
        } copy;
        struct {
            struct XhalBuffer *buffer;
            uint64_t offset;
            uint64_t size;
            uint8_t pattern[4];
            size_t pattern_size;
        } fill;
        struct {
            const KernelDefinition *definition;
            KernelArguments arguments;
        } launch;
        Record *record; /* OPERATION_RECORD and OPERATION_WAIT */
        CommandArray *list; /* OPERATION_LIST: a submission of a command list, holding a reference */
    } as;
} Operation;

/* The commands of a command list. A finished list's array is shared, by reference count, by
 * the list and by every submission of it still queued on a stream: an update gives the list a
 * new array (copy on write), so a submission queued before the update runs the commands it was
 * submitted with, and the list may be submitted again, to any stream, at any time. */
struct CommandArray {
    atomic_uint references;
    size_t count;
    Operation commands[]; /* each of kind OPERATION_COPY, OPERATION_FILL or OPERATION_LAUNCH */
};

/* A command list. A real device records its native command buffer as the appends come (a
 * VkCommandBuffer, a CUDA graph, a Level Zero command list) and closes it in `finish`; this
 * one keeps the prepared commands, which is all its stream worker needs. */
struct XhalCommandList {
    ObjectKind kind;
    struct XhalDevice *device;
    pthread_mutex_t lock; /* guards the fields below: appends, updates and submissions may race */
    bool finished;        /* no more appends; submissions and updates allowed */
    size_t capacity;      /* commands the array has room for while the list is open */
    CommandArray *commands;
};

struct XhalStream {
    ObjectKind kind;
    struct XhalDevice *device;
    pthread_t worker;
    pthread_mutex_t lock;
    pthread_cond_t work_signal; /* new work, or the stream is stopping */
    pthread_cond_t idle_signal; /* the queue drained */
    Operation *head;
    Operation *tail;
    bool busy;       /* the worker holds an operation it took off the queue */
    bool destroying; /* stream_destroy began: refuse new work */
    bool stopping;   /* the queue drained during destroy: the worker exits */
    XhalStatus failure; /* sticky error; OK while the stream is healthy */
    char failure_message[FAILURE_MESSAGE_SIZE];
};

/* Device memory in use, over every open handle of the one device. */
static atomic_uint_least64_t allocated_bytes;

/* Keeps as much of `text` as fits; a cut message still starts with what failed. */
static void store_message(char *target, size_t size, const char *text) {
    size_t length = strlen(text);
    if (length >= size) {
        length = size - 1;
    }
    memcpy(target, text, length);
    target[length] = '\0';
}

static uint64_t now_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

/* ------------------------------------------------------------------------------------------ */
/* Handle checks                                                                              */
/* ------------------------------------------------------------------------------------------ */

static XhalStatus check_handle(const void *handle, ObjectKind kind, const char *what, XhalError **error) {
    if (handle == NULL) {
        return fail(error, XHAL_STATUS_INVALID_HANDLE, "%s handle is null", what);
    }
    if (*(const ObjectKind *)handle != kind) {
        return fail(error, XHAL_STATUS_INVALID_HANDLE, "%s handle %p is not a %s of this plugin", what,
                    handle, what);
    }
    return XHAL_STATUS_OK;
}

/* Checks that `what` was made on `expected`, the device of `owner` (a stream or a command list). */
static XhalStatus check_same_device(const struct XhalDevice *expected, const struct XhalDevice *actual,
                                    const char *what, const char *owner, XhalError **error) {
    if (expected != actual) {
        return fail(error, XHAL_STATUS_INVALID_HANDLE,
                    "%s belongs to another opened device than the %s (device %p, %s's device %p)", what, owner,
                    (const void *)actual, owner, (const void *)expected);
    }
    return XHAL_STATUS_OK;
}

/* Checks that [offset, offset + size) lies within a buffer of `buffer_size` bytes. */
static XhalStatus check_range(uint64_t buffer_size, uint64_t offset, uint64_t size, const char *what,
                              XhalError **error) {
    if (offset > buffer_size || size > buffer_size - offset) {
        return fail(error, XHAL_STATUS_OUT_OF_BOUNDS,
                    "%s of %llu bytes at offset %llu reaches past the end of the %llu-byte buffer", what,
                    (unsigned long long)size, (unsigned long long)offset, (unsigned long long)buffer_size);
    }
    return XHAL_STATUS_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Devices                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static XhalStatus plugin_device_count(uint32_t *count, XhalError **error) {
    if (count == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "device_count: count must not be null");
    }
    *count = DEVICE_COUNT;
    return XHAL_STATUS_OK;
}

static XhalStatus check_device_index(uint32_t index, const char *entry, XhalError **error) {
    if (index >= DEVICE_COUNT) {
        return fail(error, XHAL_STATUS_NOT_FOUND, "%s: no device %u; the plugin has %u device(s), 0 to %u",
                    entry, index, DEVICE_COUNT, DEVICE_COUNT - 1);
    }
    return XHAL_STATUS_OK;
}

#define STATIC_STR(text) ((XhalStr){(const uint8_t *)(text), sizeof(text) - 1})

static XhalStatus plugin_device_get_info(uint32_t index, XhalDeviceInfo *info, XhalError **error) {
    if (info == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "device_get_info: info must not be null");
    }
    if (info->struct_size < XHAL_DEVICE_INFO_V1_0_SIZE) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                    "device_get_info: info->struct_size is %zu; it must be at least %zu (the v1.0 size)",
                    info->struct_size, (size_t)XHAL_DEVICE_INFO_V1_0_SIZE);
    }
    XhalStatus status = check_device_index(index, "device_get_info", error);
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    /* Built in a local struct and copied up to the v1.0 size: the caller's struct_size may be
     * larger, but this plugin knows only v1.0 fields and must not write the tail padding. */
    XhalDeviceInfo filled;
    memset(&filled, 0, sizeof filled);
    filled.struct_size = info->struct_size;
    filled.name = STATIC_STR("xhal C plugin host device");
    filled.vendor = STATIC_STR("xhal examples");
    filled.device_type = XHAL_DEVICE_TYPE_CPU;
    static const uint8_t uuid[16] = {0x78, 0x68, 0x61, 0x6c, 0x2d, 0x63, 0x2d, 0x70,
                                     0x6c, 0x75, 0x67, 0x69, 0x6e, 0x00, 0x00, 0x01};
    memcpy(filled.uuid, uuid, sizeof uuid);
    filled.uuid[15] = (uint8_t)(index + 1);
    filled.pci_bus_id = STATIC_STR("");
    filled.driver_version = STATIC_STR(PLUGIN_VERSION);
    filled.total_memory = DEVICE_MEMORY;
    uint64_t in_use = atomic_load(&allocated_bytes);
    filled.free_memory = in_use < DEVICE_MEMORY ? DEVICE_MEMORY - in_use : 0;
    filled.max_allocation_size = MAX_ALLOCATION;
    filled.max_workgroup_size[0] = WORKGROUP_SIZE;
    filled.max_workgroup_size[1] = 1;
    filled.max_workgroup_size[2] = 1;
    filled.max_workgroup_invocations = WORKGROUP_SIZE;
    filled.max_workgroup_count[0] = MAX_WORKGROUP_COUNT;
    filled.max_workgroup_count[1] = MAX_WORKGROUP_COUNT;
    filled.max_workgroup_count[2] = MAX_WORKGROUP_COUNT;
    filled.max_workgroup_memory = 16384;
    filled.subgroup_size = 1;
    filled.max_buffer_arguments = MAX_BUFFER_ARGUMENTS;
    filled.max_scalar_block_size = MAX_SCALAR_BLOCK;
    filled.buffer_offset_alignment = BUFFER_OFFSET_ALIGNMENT;
    filled.features = XHAL_FEATURE_TIMESTAMPS;
    filled.kernel_format_count = 1;
    filled.kernel_formats[0] = C_PLUGIN_KERNEL_FORMAT;
    memcpy(info, &filled, XHAL_DEVICE_INFO_V1_0_SIZE);
    return XHAL_STATUS_OK;
}

/* ABI 1.1: the device's memory now. The budget is shared by every device of the plugin. */
static XhalStatus plugin_device_memory_usage(struct XhalDevice *device, uint64_t *free_bytes, uint64_t *total_bytes,
                                             XhalError **error) {
    if (device == NULL || free_bytes == NULL || total_bytes == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                    "device_memory_usage: device, free and total must not be null");
    }
    uint64_t in_use = atomic_load(&allocated_bytes);
    *free_bytes = in_use < DEVICE_MEMORY ? DEVICE_MEMORY - in_use : 0;
    *total_bytes = DEVICE_MEMORY;
    return XHAL_STATUS_OK;
}

/* ABI 1.3: the device's clock read with the host's. Records complete on the stream's worker
 * thread, stamped with the host's monotonic clock, so the device's clock is the host's and the
 * two readings are one. A device with a clock of its own reads both as close together as its
 * driver can, and says how far apart they may be. */
static XhalStatus plugin_device_clock(struct XhalDevice *device, uint64_t *device_ns, uint64_t *host_ns,
                                      uint64_t *uncertainty_ns, XhalError **error) {
    XhalStatus status = check_handle(device, KIND_DEVICE, "device", error);
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    if (device_ns == NULL || host_ns == NULL || uncertainty_ns == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                    "device_clock: device_ns, host_ns and uncertainty_ns must not be null");
    }
    *device_ns = *host_ns = now_ns();
    *uncertainty_ns = 0;
    return XHAL_STATUS_OK;
}

static XhalStatus plugin_device_open(uint32_t index, struct XhalDevice **device, XhalError **error) {
    if (device == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "device_open: device must not be null");
    }
    XhalStatus status = check_device_index(index, "device_open", error);
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    struct XhalDevice *opened = malloc(sizeof *opened);
    if (opened == NULL) {
        return fail(error, XHAL_STATUS_OUT_OF_MEMORY, "device_open: no host memory for the device");
    }
    opened->kind = KIND_DEVICE;
    opened->index = index;
    *device = opened;
    return XHAL_STATUS_OK;
}

static void plugin_device_close(struct XhalDevice *device) {
    if (device == NULL || device->kind != KIND_DEVICE) {
        return;
    }
    device->kind = 0;
    free(device);
}

/* ------------------------------------------------------------------------------------------ */
/* Memory                                                                                     */
/* ------------------------------------------------------------------------------------------ */

static XhalStatus plugin_buffer_allocate(struct XhalDevice *device, uint64_t size, struct XhalBuffer **buffer,
                                         XhalError **error) {
    XhalStatus status = check_handle(device, KIND_DEVICE, "device", error);
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    if (buffer == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "buffer_allocate: buffer must not be null");
    }
    if (size == 0) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "buffer_allocate: size is 0; it must be at least 1 byte");
    }
    if (size > MAX_ALLOCATION) {
        return fail(error, XHAL_STATUS_OUT_OF_MEMORY,
                    "buffer_allocate: %llu bytes is more than the largest allocation, %llu bytes",
                    (unsigned long long)size, MAX_ALLOCATION);
    }
    /* Reserve the budget first, so that concurrent allocations never overshoot it together. */
    uint64_t in_use = atomic_load(&allocated_bytes);
    do {
        if (size > DEVICE_MEMORY - in_use) {
            return fail(error, XHAL_STATUS_OUT_OF_MEMORY,
                        "buffer_allocate: %llu bytes asked, %llu of the device's %llu bytes are free",
                        (unsigned long long)size, (unsigned long long)(DEVICE_MEMORY - in_use), DEVICE_MEMORY);
        }
    } while (!atomic_compare_exchange_weak(&allocated_bytes, &in_use, in_use + size));
    struct XhalBuffer *allocated = malloc(sizeof *allocated);
    uint8_t *bytes = malloc((size_t)size);
    if (allocated == NULL || bytes == NULL) {
        free(allocated);
        free(bytes);
        atomic_fetch_sub(&allocated_bytes, size);
        return fail(error, XHAL_STATUS_OUT_OF_MEMORY, "buffer_allocate: the host has no %llu bytes to give",
                    (unsigned long long)size);
    }
    allocated->kind = KIND_BUFFER;
    allocated->device = device;
    allocated->size = size;
    allocated->bytes = bytes;
    *buffer = allocated;
    return XHAL_STATUS_OK;
}

static void plugin_buffer_free(struct XhalBuffer *buffer) {
    if (buffer == NULL || buffer->kind != KIND_BUFFER) {
        return;
    }
    atomic_fetch_sub(&allocated_bytes, buffer->size);
    buffer->kind = 0;
    free(buffer->bytes);
    free(buffer);
}

/* ------------------------------------------------------------------------------------------ */
/* Records                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static Record *record_new(void) {
    Record *record = calloc(1, sizeof *record);
    if (record == NULL) {
        return NULL;
    }
    if (pthread_mutex_init(&record->lock, NULL) != 0) {
        free(record);
        return NULL;
    }
    if (pthread_cond_init(&record->completed_signal, NULL) != 0) {
        pthread_mutex_destroy(&record->lock);
        free(record);
        return NULL;
    }
    atomic_init(&record->references, 1);
    return record;
}

static Record *record_retain(Record *record) {
    if (record != NULL) {
        atomic_fetch_add(&record->references, 1);
    }
    return record;
}

static void record_release(Record *record) {
    if (record == NULL || atomic_fetch_sub(&record->references, 1) != 1) {
        return;
    }
    pthread_cond_destroy(&record->completed_signal);
    pthread_mutex_destroy(&record->lock);
    free(record);
}

static void record_complete(Record *record, XhalStatus failure, const char *failure_message) {
    uint64_t completed_at = now_ns();
    pthread_mutex_lock(&record->lock);
    record->completed_at_ns = completed_at;
    record->failure = failure;
    store_message(record->failure_message, sizeof record->failure_message, failure_message);
    record->completed = true;
    pthread_cond_broadcast(&record->completed_signal);
    pthread_mutex_unlock(&record->lock);
}

/* The record's failure as an error of the caller's; OK when it completed cleanly. The record
 * must have completed. */
static XhalStatus record_result(Record *record, const char *what, XhalError **error) {
    pthread_mutex_lock(&record->lock);
    XhalStatus failure = record->failure;
    XhalStatus status = XHAL_STATUS_OK;
    if (failure != XHAL_STATUS_OK) {
        status = fail(error, failure, "%s: the recording stream failed before the record: %s", what,
                      record->failure_message);
    }
    pthread_mutex_unlock(&record->lock);
    return status;
}

static void record_wait(Record *record) {
    pthread_mutex_lock(&record->lock);
    while (!record->completed) {
        pthread_cond_wait(&record->completed_signal, &record->lock);
    }
    pthread_mutex_unlock(&record->lock);
}

static bool record_is_complete(Record *record) {
    pthread_mutex_lock(&record->lock);
    bool completed = record->completed;
    pthread_mutex_unlock(&record->lock);
    return completed;
}

/* ------------------------------------------------------------------------------------------ */
/* Streams                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static void command_array_release(CommandArray *array) {
    if (array != NULL && atomic_fetch_sub(&array->references, 1) == 1) {
        free(array);
    }
}

static void operation_free(Operation *operation) {
    if (operation->kind == OPERATION_RECORD || operation->kind == OPERATION_WAIT) {
        record_release(operation->as.record);
    }
    if (operation->kind == OPERATION_LIST) {
        command_array_release(operation->as.list);
    }
    free(operation);
}

static void stream_fail(struct XhalStream *stream, XhalStatus failure, const char *message) {
    pthread_mutex_lock(&stream->lock);
    if (stream->failure == XHAL_STATUS_OK) {
        stream->failure = failure;
        store_message(stream->failure_message, sizeof stream->failure_message, message);
    }
    pthread_mutex_unlock(&stream->lock);
}

static void fill_bytes(uint8_t *target, uint64_t size, const uint8_t *pattern, size_t pattern_size) {
    if (pattern_size == 1) {
        memset(target, pattern[0], (size_t)size);
        return;
    }
    for (uint64_t at = 0; at < size; at += pattern_size) {
        memcpy(target + at, pattern, pattern_size);
    }
}

/* Runs one copy, fill or launch on the worker thread, enqueued alone or as a command of a list.
 * A launch that fails makes the stream's error sticky; the status says whether it did. */
static XhalStatus command_execute(struct XhalStream *stream, const Operation *command) {
    switch (command->kind) {
    case OPERATION_COPY:
        memmove(command->as.copy.destination->bytes + command->as.copy.destination_offset,
                command->as.copy.source->bytes + command->as.copy.source_offset, (size_t)command->as.copy.size);
        return XHAL_STATUS_OK;
    case OPERATION_FILL:
        fill_bytes(command->as.fill.buffer->bytes + command->as.fill.offset, command->as.fill.size,
                   command->as.fill.pattern, command->as.fill.pattern_size);
        return XHAL_STATUS_OK;
    case OPERATION_LAUNCH: {
        char message[256] = "";
        const KernelDefinition *definition = command->as.launch.definition;
        XhalStatus status = definition->run(&command->as.launch.arguments, message, sizeof message);
        if (status != XHAL_STATUS_OK) {
            char described[FAILURE_MESSAGE_SIZE + 128];
            snprintf(described, sizeof described, "kernel `%s` failed: %s", definition->name, message);
            stream_fail(stream, status, described);
        }
        return status;
    }
    default:
        return XHAL_STATUS_OK; /* no other kind is a command */
    }
}

/* Runs one operation on the worker thread. `failure`/`failure_message` are the stream's sticky
 * error as of now: after a failure only records run (carrying it), everything else is
 * abandoned. */
static void operation_execute(struct XhalStream *stream, Operation *operation, XhalStatus failure,
                              const char *failure_message) {
    if (operation->kind == OPERATION_RECORD) {
        record_complete(operation->as.record, failure, failure_message);
        return;
    }
    if (failure != XHAL_STATUS_OK) {
        return;
    }
    switch (operation->kind) {
    case OPERATION_WRITE:
        memcpy(operation->as.write.buffer->bytes + operation->as.write.offset, operation->as.write.source,
               (size_t)operation->as.write.size);
        break;
    case OPERATION_READ:
        memcpy(operation->as.read.destination, operation->as.read.buffer->bytes + operation->as.read.offset,
               (size_t)operation->as.read.size);
        break;
    case OPERATION_COPY:
    case OPERATION_FILL:
    case OPERATION_LAUNCH:
        command_execute(stream, operation);
        break;
    case OPERATION_LIST: {
        /* A submitted list: its commands in order, each after the previous one, as if each had
         * been enqueued alone. The first that fails has made the stream's error sticky, and the
         * rest are abandoned, as queued work after a failure is. */
        const CommandArray *list = operation->as.list;
        for (size_t index = 0; index < list->count; index++) {
            if (command_execute(stream, &list->commands[index]) != XHAL_STATUS_OK) {
                break;
            }
        }
        break;
    }
    case OPERATION_WAIT: {
        Record *record = operation->as.record;
        record_wait(record);
        pthread_mutex_lock(&record->lock);
        if (record->failure != XHAL_STATUS_OK) {
            char described[FAILURE_MESSAGE_SIZE + 128];
            snprintf(described, sizeof described, "dependency failed: a waited-for event's stream failed: %s",
                     record->failure_message);
            XhalStatus dependency_failure = record->failure;
            pthread_mutex_unlock(&record->lock);
            stream_fail(stream, dependency_failure, described);
        } else {
            pthread_mutex_unlock(&record->lock);
        }
        break;
    }
    case OPERATION_RECORD:
        break;
    }
}

static void *stream_worker(void *argument) {
    struct XhalStream *stream = argument;
    pthread_mutex_lock(&stream->lock);
    for (;;) {
        while (stream->head == NULL && !stream->stopping) {
            pthread_cond_wait(&stream->work_signal, &stream->lock);
        }
        if (stream->head == NULL) {
            break; /* stopping, and nothing is left */
        }
        Operation *operation = stream->head;
        stream->head = operation->next;
        if (stream->head == NULL) {
            stream->tail = NULL;
        }
        stream->busy = true;
        XhalStatus failure = stream->failure;
        char failure_message[FAILURE_MESSAGE_SIZE];
        memcpy(failure_message, stream->failure_message, sizeof failure_message);
        pthread_mutex_unlock(&stream->lock);

        operation_execute(stream, operation, failure, failure_message);
        operation_free(operation);

        pthread_mutex_lock(&stream->lock);
        stream->busy = false;
        if (stream->head == NULL) {
            pthread_cond_broadcast(&stream->idle_signal);
        }
    }
    pthread_mutex_unlock(&stream->lock);
    return NULL;
}

static XhalStatus plugin_stream_create(struct XhalDevice *device, struct XhalStream **stream, XhalError **error) {
    XhalStatus status = check_handle(device, KIND_DEVICE, "device", error);
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    if (stream == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "stream_create: stream must not be null");
    }
    struct XhalStream *created = calloc(1, sizeof *created);
    if (created == NULL) {
        return fail(error, XHAL_STATUS_OUT_OF_MEMORY, "stream_create: no host memory for the stream");
    }
    created->kind = KIND_STREAM;
    created->device = device;
    created->failure = XHAL_STATUS_OK;
    if (pthread_mutex_init(&created->lock, NULL) != 0) {
        free(created);
        return fail(error, XHAL_STATUS_INTERNAL, "stream_create: cannot create the stream's lock");
    }
    if (pthread_cond_init(&created->work_signal, NULL) != 0) {
        pthread_mutex_destroy(&created->lock);
        free(created);
        return fail(error, XHAL_STATUS_INTERNAL, "stream_create: cannot create the stream's work signal");
    }
    if (pthread_cond_init(&created->idle_signal, NULL) != 0) {
        pthread_cond_destroy(&created->work_signal);
        pthread_mutex_destroy(&created->lock);
        free(created);
        return fail(error, XHAL_STATUS_INTERNAL, "stream_create: cannot create the stream's idle signal");
    }
    int started = pthread_create(&created->worker, NULL, stream_worker, created);
    if (started != 0) {
        pthread_cond_destroy(&created->idle_signal);
        pthread_cond_destroy(&created->work_signal);
        pthread_mutex_destroy(&created->lock);
        free(created);
        return fail(error, XHAL_STATUS_INTERNAL, "stream_create: cannot start the stream's worker thread: %s",
                    strerror(started));
    }
    *stream = created;
    return XHAL_STATUS_OK;
}

/* Waits, with the stream's lock held, until nothing is queued or executing. */
static void stream_drain_locked(struct XhalStream *stream) {
    while (stream->head != NULL || stream->busy) {
        pthread_cond_wait(&stream->idle_signal, &stream->lock);
    }
}

static void plugin_stream_destroy(struct XhalStream *stream) {
    if (stream == NULL || stream->kind != KIND_STREAM) {
        return;
    }
    pthread_mutex_lock(&stream->lock);
    stream->destroying = true;
    stream_drain_locked(stream);
    stream->stopping = true;
    pthread_cond_broadcast(&stream->work_signal);
    pthread_mutex_unlock(&stream->lock);
    pthread_join(stream->worker, NULL);
    pthread_cond_destroy(&stream->idle_signal);
    pthread_cond_destroy(&stream->work_signal);
    pthread_mutex_destroy(&stream->lock);
    stream->kind = 0;
    free(stream);
}

/* Checks a stream handle and that it may take work; on a failed stream, returns its sticky
 * error as the docs require of every later call. */
static XhalStatus check_stream_usable(struct XhalStream *stream, const char *entry, XhalError **error) {
    XhalStatus status = check_handle(stream, KIND_STREAM, "stream", error);
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    pthread_mutex_lock(&stream->lock);
    if (stream->destroying) {
        status = fail(error, XHAL_STATUS_INVALID_HANDLE, "%s: the stream is being destroyed", entry);
    } else if (stream->failure != XHAL_STATUS_OK) {
        status = fail(error, stream->failure, "%s: the stream failed earlier: %s", entry, stream->failure_message);
    }
    pthread_mutex_unlock(&stream->lock);
    return status;
}

/* Takes ownership of `operation`: appends it, or frees it when the stream cannot take it. */
static XhalStatus stream_enqueue(struct XhalStream *stream, Operation *operation, const char *entry,
                                 XhalError **error) {
    XhalStatus status = XHAL_STATUS_OK;
    pthread_mutex_lock(&stream->lock);
    if (stream->destroying) {
        status = fail(error, XHAL_STATUS_INVALID_HANDLE, "%s: the stream is being destroyed", entry);
    } else if (stream->failure != XHAL_STATUS_OK) {
        status = fail(error, stream->failure, "%s: the stream failed earlier: %s", entry, stream->failure_message);
    } else {
        operation->next = NULL;
        if (stream->tail != NULL) {
            stream->tail->next = operation;
        } else {
            stream->head = operation;
        }
        stream->tail = operation;
        pthread_cond_signal(&stream->work_signal);
    }
    pthread_mutex_unlock(&stream->lock);
    if (status != XHAL_STATUS_OK) {
        operation_free(operation);
    }
    return status;
}

static Operation *operation_new(OperationKind kind, const char *entry, XhalError **error) {
    Operation *operation = calloc(1, sizeof *operation);
    if (operation == NULL) {
        fail(error, XHAL_STATUS_OUT_OF_MEMORY, "%s: no host memory for the operation", entry);
        return NULL;
    }
    operation->kind = kind;
    return operation;
}

/* Checks that `buffer` is a buffer of this plugin made on `device`, the device of `owner` (a
 * stream or a command list). */
static XhalStatus check_buffer_on(const struct XhalDevice *device, const char *owner, struct XhalBuffer *buffer,
                                  const char *what, XhalError **error) {
    XhalStatus status = check_handle(buffer, KIND_BUFFER, what, error);
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    return check_same_device(device, buffer->device, what, owner, error);
}

/* Enqueues a prepared copy, fill or launch: the queue owns a heap copy of it. */
static XhalStatus stream_enqueue_prepared(struct XhalStream *stream, const Operation *prepared, const char *entry,
                                          XhalError **error) {
    Operation *operation = operation_new(prepared->kind, entry, error);
    if (operation == NULL) {
        return XHAL_STATUS_OUT_OF_MEMORY;
    }
    *operation = *prepared;
    return stream_enqueue(stream, operation, entry, error);
}

static XhalStatus plugin_stream_write(struct XhalStream *stream, struct XhalBuffer *buffer, uint64_t offset,
                                      const uint8_t *source, uint64_t size, XhalError **error) {
    XhalStatus status = check_stream_usable(stream, "stream_write", error);
    if (status == XHAL_STATUS_OK) {
        status = check_buffer_on(stream->device, "stream", buffer, "buffer", error);
    }
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    if (source == NULL && size > 0) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "stream_write: source is null for a %llu-byte write",
                    (unsigned long long)size);
    }
    status = check_range(buffer->size, offset, size, "stream_write: a write", error);
    if (status != XHAL_STATUS_OK || size == 0) {
        return status;
    }
    Operation *operation = operation_new(OPERATION_WRITE, "stream_write", error);
    if (operation == NULL) {
        return XHAL_STATUS_OUT_OF_MEMORY;
    }
    operation->as.write.buffer = buffer;
    operation->as.write.offset = offset;
    operation->as.write.source = source;
    operation->as.write.size = size;
    return stream_enqueue(stream, operation, "stream_write", error);
}

static XhalStatus plugin_stream_read(struct XhalStream *stream, struct XhalBuffer *buffer, uint64_t offset,
                                     uint8_t *destination, uint64_t size, XhalError **error) {
    XhalStatus status = check_stream_usable(stream, "stream_read", error);
    if (status == XHAL_STATUS_OK) {
        status = check_buffer_on(stream->device, "stream", buffer, "buffer", error);
    }
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    if (destination == NULL && size > 0) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "stream_read: destination is null for a %llu-byte read",
                    (unsigned long long)size);
    }
    status = check_range(buffer->size, offset, size, "stream_read: a read", error);
    if (status != XHAL_STATUS_OK || size == 0) {
        return status;
    }
    Operation *operation = operation_new(OPERATION_READ, "stream_read", error);
    if (operation == NULL) {
        return XHAL_STATUS_OUT_OF_MEMORY;
    }
    operation->as.read.buffer = buffer;
    operation->as.read.offset = offset;
    operation->as.read.destination = destination;
    operation->as.read.size = size;
    return stream_enqueue(stream, operation, "stream_read", error);
}

/* The three commands a command list can hold are checked and prepared by one function each,
 * called by the eager entry (stream_copy, stream_fill, stream_launch) and by the list's append
 * alike, so that both refuse the same arguments with the same messages. `entry` names the
 * caller in messages; `device` is the device of `owner`, the stream or the command list. The
 * prepared operation refers to buffers by pointer: the host keeps them alive as long as any
 * operation or list names them. */

/* A copy: both buffers on the device, both ranges inside them. */
static XhalStatus prepare_copy(const char *entry, const struct XhalDevice *device, const char *owner,
                               struct XhalBuffer *source, uint64_t source_offset, struct XhalBuffer *destination,
                               uint64_t destination_offset, uint64_t size, Operation *copy, XhalError **error) {
    char what[96];
    XhalStatus status = check_buffer_on(device, owner, source, "source buffer", error);
    if (status == XHAL_STATUS_OK) {
        status = check_buffer_on(device, owner, destination, "destination buffer", error);
    }
    if (status == XHAL_STATUS_OK) {
        snprintf(what, sizeof what, "%s: the source range", entry);
        status = check_range(source->size, source_offset, size, what, error);
    }
    if (status == XHAL_STATUS_OK) {
        snprintf(what, sizeof what, "%s: the destination range", entry);
        status = check_range(destination->size, destination_offset, size, what, error);
    }
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    memset(copy, 0, sizeof *copy);
    copy->kind = OPERATION_COPY;
    copy->as.copy.source = source;
    copy->as.copy.source_offset = source_offset;
    copy->as.copy.destination = destination;
    copy->as.copy.destination_offset = destination_offset;
    copy->as.copy.size = size;
    return XHAL_STATUS_OK;
}

/* A fill: the buffer on the device, a 1-, 2- or 4-byte pattern (copied), whole patterns
 * inside the buffer. */
static XhalStatus prepare_fill(const char *entry, const struct XhalDevice *device, const char *owner,
                               struct XhalBuffer *buffer, uint64_t offset, uint64_t size, const uint8_t *pattern,
                               size_t pattern_size, Operation *fill, XhalError **error) {
    XhalStatus status = check_buffer_on(device, owner, buffer, "buffer", error);
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    if (pattern == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "%s: pattern must not be null", entry);
    }
    if (pattern_size != 1 && pattern_size != 2 && pattern_size != 4) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "%s: the pattern is %zu bytes; it must be 1, 2 or 4", entry,
                    pattern_size);
    }
    if (offset % pattern_size != 0 || size % pattern_size != 0) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                    "%s: offset %llu and size %llu must be multiples of the %zu-byte pattern", entry,
                    (unsigned long long)offset, (unsigned long long)size, pattern_size);
    }
    char what[96];
    snprintf(what, sizeof what, "%s: a fill", entry);
    status = check_range(buffer->size, offset, size, what, error);
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    memset(fill, 0, sizeof *fill);
    fill->kind = OPERATION_FILL;
    fill->as.fill.buffer = buffer;
    fill->as.fill.offset = offset;
    fill->as.fill.size = size;
    memcpy(fill->as.fill.pattern, pattern, pattern_size);
    fill->as.fill.pattern_size = pattern_size;
    return XHAL_STATUS_OK;
}

/* A launch: the kernel on the device, workgroup counts within the limits, the arguments the
 * kernel takes, every view on the device, aligned and inside its buffer, then the kernel's own
 * check. The buffer array and the scalar block are copied. */
static XhalStatus prepare_launch(const char *entry, const struct XhalDevice *device, const char *owner,
                                 const XhalLaunchInfo *launch, Operation *prepared, XhalError **error) {
    if (launch == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "%s: launch must not be null", entry);
    }
    if (launch->struct_size < XHAL_LAUNCH_INFO_V1_0_SIZE) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                    "%s: launch->struct_size is %zu; it must be at least %zu (the v1.0 size)", entry,
                    launch->struct_size, (size_t)XHAL_LAUNCH_INFO_V1_0_SIZE);
    }
    XhalStatus status = check_handle(launch->kernel, KIND_KERNEL, "kernel", error);
    if (status == XHAL_STATUS_OK) {
        status = check_same_device(device, launch->kernel->device, "kernel", owner, error);
    }
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    const KernelDefinition *definition = launch->kernel->definition;
    for (int axis = 0; axis < 3; axis++) {
        if (launch->workgroups[axis] == 0 || launch->workgroups[axis] > MAX_WORKGROUP_COUNT) {
            return fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                        "%s: kernel `%s`: workgroup count %u in %c must be 1 to %u", entry, definition->name,
                        launch->workgroups[axis], "xyz"[axis], MAX_WORKGROUP_COUNT);
        }
    }
    if (launch->buffer_count != definition->buffer_count) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "%s: kernel `%s` takes %u buffer(s), got %u", entry,
                    definition->name, definition->buffer_count, launch->buffer_count);
    }
    if (launch->buffers == NULL && launch->buffer_count > 0) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "%s: buffers is null with buffer_count %u", entry,
                    launch->buffer_count);
    }
    if (launch->scalar_size != definition->scalar_size) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "%s: kernel `%s` takes a %u-byte scalar block, got %zu bytes",
                    entry, definition->name, definition->scalar_size, launch->scalar_size);
    }
    if (launch->scalars == NULL && launch->scalar_size > 0) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "%s: scalars is null with scalar_size %zu", entry,
                    launch->scalar_size);
    }
    memset(prepared, 0, sizeof *prepared);
    prepared->kind = OPERATION_LAUNCH;
    KernelArguments *arguments = &prepared->as.launch.arguments;
    memcpy(arguments->workgroups, launch->workgroups, sizeof arguments->workgroups);
    arguments->buffer_count = launch->buffer_count;
    for (uint32_t index = 0; index < launch->buffer_count; index++) {
        const XhalBufferArg *argument = &launch->buffers[index];
        char what[32];
        snprintf(what, sizeof what, "buffer argument %u", index);
        status = check_buffer_on(device, owner, argument->buffer, what, error);
        if (status == XHAL_STATUS_OK && argument->offset % BUFFER_OFFSET_ALIGNMENT != 0) {
            status = fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                          "%s: %s: offset %llu is not a multiple of the %u-byte buffer offset alignment", entry, what,
                          (unsigned long long)argument->offset, BUFFER_OFFSET_ALIGNMENT);
        }
        if (status == XHAL_STATUS_OK) {
            char range[96];
            snprintf(range, sizeof range, "%s: the view of %s", entry, what);
            status = check_range(argument->buffer->size, argument->offset, argument->size, range, error);
        }
        if (status != XHAL_STATUS_OK) {
            return status;
        }
        arguments->buffers[index] = (BufferView){argument->buffer, argument->offset, argument->size};
    }
    if (launch->scalar_size > 0) {
        memcpy(arguments->scalars, launch->scalars, launch->scalar_size);
    }
    arguments->scalar_size = launch->scalar_size;
    char message[256];
    status = definition->check(arguments, message, sizeof message);
    if (status != XHAL_STATUS_OK) {
        return fail(error, status, "%s: kernel `%s`: %s", entry, definition->name, message);
    }
    prepared->as.launch.definition = definition;
    return XHAL_STATUS_OK;
}

static XhalStatus plugin_stream_copy(struct XhalStream *stream, struct XhalBuffer *source, uint64_t source_offset,
                                     struct XhalBuffer *destination, uint64_t destination_offset, uint64_t size,
                                     XhalError **error) {
    Operation copy;
    XhalStatus status = check_stream_usable(stream, "stream_copy", error);
    if (status == XHAL_STATUS_OK) {
        status = prepare_copy("stream_copy", stream->device, "stream", source, source_offset, destination,
                              destination_offset, size, &copy, error);
    }
    if (status != XHAL_STATUS_OK || size == 0) {
        return status; /* a copy of 0 bytes enqueues nothing */
    }
    return stream_enqueue_prepared(stream, &copy, "stream_copy", error);
}

static XhalStatus plugin_stream_fill(struct XhalStream *stream, struct XhalBuffer *buffer, uint64_t offset,
                                     uint64_t size, const uint8_t *pattern, size_t pattern_size, XhalError **error) {
    Operation fill;
    XhalStatus status = check_stream_usable(stream, "stream_fill", error);
    if (status == XHAL_STATUS_OK) {
        status = prepare_fill("stream_fill", stream->device, "stream", buffer, offset, size, pattern, pattern_size,
                              &fill, error);
    }
    if (status != XHAL_STATUS_OK || size == 0) {
        return status; /* a fill of 0 bytes enqueues nothing */
    }
    return stream_enqueue_prepared(stream, &fill, "stream_fill", error);
}

static XhalStatus plugin_stream_launch(struct XhalStream *stream, const XhalLaunchInfo *launch, XhalError **error) {
    Operation prepared;
    XhalStatus status = check_stream_usable(stream, "stream_launch", error);
    if (status == XHAL_STATUS_OK) {
        status = prepare_launch("stream_launch", stream->device, "stream", launch, &prepared, error);
    }
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    return stream_enqueue_prepared(stream, &prepared, "stream_launch", error);
}

static XhalStatus plugin_stream_record_event(struct XhalStream *stream, struct XhalEvent *event, XhalError **error) {
    XhalStatus status = check_stream_usable(stream, "stream_record_event", error);
    if (status == XHAL_STATUS_OK) {
        status = check_handle(event, KIND_EVENT, "event", error);
    }
    if (status == XHAL_STATUS_OK) {
        status = check_same_device(stream->device, event->device, "event", "stream", error);
    }
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    Operation *operation = operation_new(OPERATION_RECORD, "stream_record_event", error);
    if (operation == NULL) {
        return XHAL_STATUS_OUT_OF_MEMORY;
    }
    Record *record = record_new();
    if (record == NULL) {
        free(operation);
        return fail(error, XHAL_STATUS_OUT_OF_MEMORY, "stream_record_event: no host memory for the record");
    }
    operation->as.record = record_retain(record);
    /* Taking the event's lock across the enqueue makes "enqueued" and "most recent record"
     * one step: a concurrent query never sees a record that is not queued. */
    pthread_mutex_lock(&event->lock);
    status = stream_enqueue(stream, operation, "stream_record_event", error);
    if (status == XHAL_STATUS_OK) {
        Record *previous = event->latest;
        event->latest = record;
        record = previous;
    }
    pthread_mutex_unlock(&event->lock);
    record_release(record);
    return status;
}

/* The event's most recent record, retained; null when it was never recorded. */
static Record *event_latest(struct XhalEvent *event) {
    pthread_mutex_lock(&event->lock);
    Record *record = record_retain(event->latest);
    pthread_mutex_unlock(&event->lock);
    return record;
}

static XhalStatus plugin_stream_wait_event(struct XhalStream *stream, struct XhalEvent *event, XhalError **error) {
    XhalStatus status = check_stream_usable(stream, "stream_wait_event", error);
    if (status == XHAL_STATUS_OK) {
        status = check_handle(event, KIND_EVENT, "event", error);
    }
    if (status == XHAL_STATUS_OK) {
        status = check_same_device(stream->device, event->device, "event", "stream", error);
    }
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    Record *record = event_latest(event);
    if (record == NULL) {
        return XHAL_STATUS_OK; /* never recorded: nothing to wait for */
    }
    Operation *operation = operation_new(OPERATION_WAIT, "stream_wait_event", error);
    if (operation == NULL) {
        record_release(record);
        return XHAL_STATUS_OUT_OF_MEMORY;
    }
    operation->as.record = record;
    return stream_enqueue(stream, operation, "stream_wait_event", error);
}

static XhalStatus plugin_stream_synchronize(struct XhalStream *stream, XhalError **error) {
    XhalStatus status = check_handle(stream, KIND_STREAM, "stream", error);
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    pthread_mutex_lock(&stream->lock);
    stream_drain_locked(stream);
    if (stream->failure != XHAL_STATUS_OK) {
        status = fail(error, stream->failure, "%s", stream->failure_message);
    }
    pthread_mutex_unlock(&stream->lock);
    return status;
}

static XhalStatus plugin_stream_query(struct XhalStream *stream, XhalError **error) {
    XhalStatus status = check_handle(stream, KIND_STREAM, "stream", error);
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    pthread_mutex_lock(&stream->lock);
    if (stream->failure != XHAL_STATUS_OK) {
        /* Safe to report at once: from the failure on, the worker runs nothing but records,
         * so no queued operation touches host or device memory any more. */
        status = fail(error, stream->failure, "%s", stream->failure_message);
    } else if (stream->head != NULL || stream->busy) {
        status = XHAL_STATUS_NOT_READY;
    }
    pthread_mutex_unlock(&stream->lock);
    return status;
}

/* ------------------------------------------------------------------------------------------ */
/* Command lists (ABI 1.4)                                                                    */
/* ------------------------------------------------------------------------------------------ */

/* A list is recorded once and submitted many times. The appends check their arguments exactly
 * as the eager entries do (prepare_copy, prepare_fill, prepare_launch), so a submission checks
 * nothing: it enqueues the whole array as one operation, and the stream worker runs its
 * commands in order. A GPU plugin records its command buffer in the appends, closes it in
 * `finish`, and submits it with one driver call. */

static CommandArray *command_array_new(size_t capacity) {
    CommandArray *array = malloc(sizeof *array + capacity * sizeof(Operation));
    if (array == NULL) {
        return NULL;
    }
    atomic_init(&array->references, 1);
    array->count = 0;
    return array;
}

static CommandArray *command_array_retain(CommandArray *array) {
    atomic_fetch_add(&array->references, 1);
    return array;
}

static XhalStatus plugin_command_list_create(struct XhalDevice *device, struct XhalCommandList **list,
                                             XhalError **error) {
    XhalStatus status = check_handle(device, KIND_DEVICE, "device", error);
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    if (list == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "command_list_create: list must not be null");
    }
    enum { INITIAL_CAPACITY = 8 };
    struct XhalCommandList *created = calloc(1, sizeof *created);
    CommandArray *commands = command_array_new(INITIAL_CAPACITY);
    if (created == NULL || commands == NULL) {
        free(created);
        free(commands);
        return fail(error, XHAL_STATUS_OUT_OF_MEMORY, "command_list_create: no host memory for the command list");
    }
    if (pthread_mutex_init(&created->lock, NULL) != 0) {
        free(created);
        free(commands);
        return fail(error, XHAL_STATUS_INTERNAL, "command_list_create: cannot create the command list's lock");
    }
    created->kind = KIND_COMMAND_LIST;
    created->device = device;
    created->capacity = INITIAL_CAPACITY;
    created->commands = commands;
    *list = created;
    return XHAL_STATUS_OK;
}

/* Adds a prepared command to the end of an open list. The array is not shared while the list
 * is open (only finished lists are submitted), so it may move as it grows. */
static XhalStatus command_list_append(struct XhalCommandList *list, const Operation *command, const char *entry,
                                      XhalError **error) {
    XhalStatus status = XHAL_STATUS_OK;
    pthread_mutex_lock(&list->lock);
    if (list->finished) {
        status = fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                      "%s: the command list is finished; a finished list takes no more commands (record them in a "
                      "new list)",
                      entry);
    } else if (list->commands->count == list->capacity) {
        size_t capacity = list->capacity * 2;
        CommandArray *grown = NULL;
        if (capacity <= (SIZE_MAX - sizeof *grown) / sizeof(Operation)) {
            grown = realloc(list->commands, sizeof *grown + capacity * sizeof(Operation));
        }
        if (grown == NULL) {
            status = fail(error, XHAL_STATUS_OUT_OF_MEMORY, "%s: no host memory for command %zu of the list", entry,
                          list->commands->count);
        } else {
            list->commands = grown;
            list->capacity = capacity;
        }
    }
    if (status == XHAL_STATUS_OK) {
        list->commands->commands[list->commands->count++] = *command;
    }
    pthread_mutex_unlock(&list->lock);
    return status;
}

static XhalStatus plugin_command_list_append_copy(struct XhalCommandList *list, struct XhalBuffer *source,
                                                  uint64_t source_offset, struct XhalBuffer *destination,
                                                  uint64_t destination_offset, uint64_t size, XhalError **error) {
    static const char ENTRY[] = "command_list_append_copy";
    Operation copy;
    XhalStatus status = check_handle(list, KIND_COMMAND_LIST, "command list", error);
    if (status == XHAL_STATUS_OK) {
        status = prepare_copy(ENTRY, list->device, "command list", source, source_offset, destination,
                              destination_offset, size, &copy, error);
    }
    if (status == XHAL_STATUS_OK && size == 0) {
        status = fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                      "%s: a copy of 0 bytes does nothing; leave it out (a list's copies have at least 1 byte)", ENTRY);
    }
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    return command_list_append(list, &copy, ENTRY, error);
}

static XhalStatus plugin_command_list_append_fill(struct XhalCommandList *list, struct XhalBuffer *buffer,
                                                  uint64_t offset, uint64_t size, const uint8_t *pattern,
                                                  size_t pattern_size, XhalError **error) {
    static const char ENTRY[] = "command_list_append_fill";
    Operation fill;
    XhalStatus status = check_handle(list, KIND_COMMAND_LIST, "command list", error);
    if (status == XHAL_STATUS_OK) {
        status = prepare_fill(ENTRY, list->device, "command list", buffer, offset, size, pattern, pattern_size,
                              &fill, error);
    }
    if (status == XHAL_STATUS_OK && size == 0) {
        status = fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                      "%s: a fill of 0 bytes does nothing; leave it out (a list's fills have at least 1 byte)", ENTRY);
    }
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    return command_list_append(list, &fill, ENTRY, error);
}

static XhalStatus plugin_command_list_append_launch(struct XhalCommandList *list, const XhalLaunchInfo *launch,
                                                    XhalError **error) {
    static const char ENTRY[] = "command_list_append_launch";
    Operation prepared;
    XhalStatus status = check_handle(list, KIND_COMMAND_LIST, "command list", error);
    if (status == XHAL_STATUS_OK) {
        status = prepare_launch(ENTRY, list->device, "command list", launch, &prepared, error);
    }
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    return command_list_append(list, &prepared, ENTRY, error);
}

static XhalStatus plugin_command_list_finish(struct XhalCommandList *list, XhalError **error) {
    XhalStatus status = check_handle(list, KIND_COMMAND_LIST, "command list", error);
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    pthread_mutex_lock(&list->lock);
    if (list->finished) {
        status = fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                      "command_list_finish: the command list is already finished; finish a list once");
    } else {
        /* Everything was checked as it was appended, so finishing only gives back the room kept
         * for appends. A GPU plugin ends its command buffer here (vkEndCommandBuffer,
         * cuGraphInstantiate, zeCommandListClose), so that a submission is one driver call. */
        size_t count = list->commands->count;
        CommandArray *fitted = realloc(list->commands, sizeof *fitted + count * sizeof(Operation));
        if (fitted != NULL) {
            list->commands = fitted; /* when shrinking fails, the larger array is as good */
            list->capacity = count;
        }
        list->finished = true;
    }
    pthread_mutex_unlock(&list->lock);
    return status;
}

/* The update rules: the same kernel, as many buffer views each of the same size, a scalar
 * block of the same size. Only the buffers, offsets, scalar values and workgroup counts change. */
static XhalStatus check_same_shape(uint32_t index, const Operation *previous, const XhalLaunchInfo *launch,
                                   XhalError **error) {
    const KernelDefinition *kernel = previous->as.launch.definition;
    const KernelArguments *recorded = &previous->as.launch.arguments;
    if (launch->kernel->definition != kernel) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                    "command_list_update_launch: command %u launches kernel `%s`; an update must launch the same "
                    "kernel, not `%s`",
                    index, kernel->name, launch->kernel->definition->name);
    }
    if (launch->buffer_count != recorded->buffer_count) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                    "command_list_update_launch: command %u binds %u buffer view(s); an update must bind as many, "
                    "not %u",
                    index, recorded->buffer_count, launch->buffer_count);
    }
    if (launch->scalar_size != recorded->scalar_size) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                    "command_list_update_launch: command %u has a %zu-byte scalar block; an update must give one of "
                    "the same size, not %zu bytes",
                    index, recorded->scalar_size, launch->scalar_size);
    }
    for (uint32_t view = 0; launch->buffers != NULL && view < launch->buffer_count; view++) {
        if (launch->buffers[view].size != recorded->buffers[view].size) {
            return fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                        "command_list_update_launch: buffer argument %u of command %u is a view of %llu bytes; an "
                        "update must give a view of the same size, not %llu bytes",
                        view, index, (unsigned long long)recorded->buffers[view].size,
                        (unsigned long long)launch->buffers[view].size);
        }
    }
    return XHAL_STATUS_OK;
}

static XhalStatus plugin_command_list_update_launch(struct XhalCommandList *list, uint32_t index,
                                                    const XhalLaunchInfo *launch, XhalError **error) {
    static const char ENTRY[] = "command_list_update_launch";
    XhalStatus status = check_handle(list, KIND_COMMAND_LIST, "command list", error);
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    if (launch == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "%s: launch must not be null", ENTRY);
    }
    if (launch->struct_size < XHAL_LAUNCH_INFO_V1_0_SIZE) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                    "%s: launch->struct_size is %zu; it must be at least %zu (the v1.0 size)", ENTRY,
                    launch->struct_size, (size_t)XHAL_LAUNCH_INFO_V1_0_SIZE);
    }
    status = check_handle(launch->kernel, KIND_KERNEL, "kernel", error);
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    pthread_mutex_lock(&list->lock);
    const CommandArray *current = list->commands;
    Operation replacement;
    if (!list->finished) {
        status = fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                      "%s: the command list is not finished; finish it before updating its launches", ENTRY);
    } else if (index >= current->count) {
        status = fail(error, XHAL_STATUS_OUT_OF_BOUNDS,
                      "%s: the command list has %zu command(s); there is no command %u", ENTRY, current->count, index);
    } else if (current->commands[index].kind != OPERATION_LAUNCH) {
        status = fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                      "%s: command %u is a %s, not a launch; only launches are updated", ENTRY, index,
                      current->commands[index].kind == OPERATION_COPY ? "copy" : "fill");
    } else {
        status = check_same_shape(index, &current->commands[index], launch, error);
    }
    if (status == XHAL_STATUS_OK) {
        /* Then every check an append of this launch makes. */
        status = prepare_launch(ENTRY, list->device, "command list", launch, &replacement, error);
    }
    if (status == XHAL_STATUS_OK) {
        /* Copy on write: a submission still queued keeps the array it was submitted with. (The
         * host only updates lists none of whose submissions is pending, so a GPU plugin may
         * rewrite its descriptors or kernel arguments in place; this one need not rely on it.) */
        CommandArray *updated = command_array_new(current->count);
        if (updated == NULL) {
            status = fail(error, XHAL_STATUS_OUT_OF_MEMORY, "%s: no host memory for the updated command list", ENTRY);
        } else {
            memcpy(updated->commands, current->commands, current->count * sizeof(Operation));
            updated->count = current->count;
            updated->commands[index] = replacement;
            command_array_release(list->commands);
            list->commands = updated;
            list->capacity = updated->count;
        }
    }
    pthread_mutex_unlock(&list->lock);
    return status;
}

static XhalStatus plugin_stream_submit_command_list(struct XhalStream *stream, struct XhalCommandList *list,
                                                    XhalError **error) {
    static const char ENTRY[] = "stream_submit_command_list";
    /* A failed stream refuses the submission with its sticky error, as it refuses any work. */
    XhalStatus status = check_stream_usable(stream, ENTRY, error);
    if (status == XHAL_STATUS_OK) {
        status = check_handle(list, KIND_COMMAND_LIST, "command list", error);
    }
    if (status == XHAL_STATUS_OK) {
        status = check_same_device(stream->device, list->device, "command list", "stream", error);
    }
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    Operation *operation = operation_new(OPERATION_LIST, ENTRY, error);
    if (operation == NULL) {
        return XHAL_STATUS_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&list->lock);
    if (list->finished) {
        operation->as.list = command_array_retain(list->commands);
    } else {
        status = fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                      "%s: the command list is not finished; call command_list_finish before submitting it", ENTRY);
    }
    pthread_mutex_unlock(&list->lock);
    if (status != XHAL_STATUS_OK) {
        free(operation);
        return status;
    }
    /* One operation for the whole list; on refusal it is freed, releasing its reference. */
    return stream_enqueue(stream, operation, ENTRY, error);
}

static void plugin_command_list_destroy(struct XhalCommandList *list) {
    if (list == NULL || list->kind != KIND_COMMAND_LIST) {
        return;
    }
    /* Submissions still queued hold the array; it goes with the last of them. */
    command_array_release(list->commands);
    pthread_mutex_destroy(&list->lock);
    list->kind = 0;
    free(list);
}

/* ------------------------------------------------------------------------------------------ */
/* Events                                                                                     */
/* ------------------------------------------------------------------------------------------ */

static XhalStatus plugin_event_create(struct XhalDevice *device, uint32_t flags, struct XhalEvent **event,
                                      XhalError **error) {
    XhalStatus status = check_handle(device, KIND_DEVICE, "device", error);
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    if (event == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "event_create: event must not be null");
    }
    if ((flags & ~(uint32_t)XHAL_EVENT_FLAG_TIMING) != 0) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                    "event_create: unknown flag bits %#x; ABI 1.0 defines only XHAL_EVENT_FLAG_TIMING (1)",
                    flags & ~(uint32_t)XHAL_EVENT_FLAG_TIMING);
    }
    struct XhalEvent *created = calloc(1, sizeof *created);
    if (created == NULL) {
        return fail(error, XHAL_STATUS_OUT_OF_MEMORY, "event_create: no host memory for the event");
    }
    if (pthread_mutex_init(&created->lock, NULL) != 0) {
        free(created);
        return fail(error, XHAL_STATUS_INTERNAL, "event_create: cannot create the event's lock");
    }
    created->kind = KIND_EVENT;
    created->device = device;
    created->timing = (flags & XHAL_EVENT_FLAG_TIMING) != 0;
    *event = created;
    return XHAL_STATUS_OK;
}

static void plugin_event_destroy(struct XhalEvent *event) {
    if (event == NULL || event->kind != KIND_EVENT) {
        return;
    }
    record_release(event->latest);
    pthread_mutex_destroy(&event->lock);
    event->kind = 0;
    free(event);
}

static XhalStatus plugin_event_query(struct XhalEvent *event, XhalError **error) {
    XhalStatus status = check_handle(event, KIND_EVENT, "event", error);
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    Record *record = event_latest(event);
    if (record == NULL) {
        return XHAL_STATUS_OK;
    }
    status = record_is_complete(record) ? record_result(record, "event_query", error) : XHAL_STATUS_NOT_READY;
    record_release(record);
    return status;
}

static XhalStatus plugin_event_synchronize(struct XhalEvent *event, XhalError **error) {
    XhalStatus status = check_handle(event, KIND_EVENT, "event", error);
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    Record *record = event_latest(event);
    if (record == NULL) {
        return XHAL_STATUS_OK;
    }
    record_wait(record);
    status = record_result(record, "event_synchronize", error);
    record_release(record);
    return status;
}

/* The completion time of an event's most recent record, or a refusal naming why there is none. */
static XhalStatus event_timestamp(struct XhalEvent *event, const char *entry, const char *which,
                                  uint64_t *timestamp, XhalError **error) {
    XhalStatus status = check_handle(event, KIND_EVENT, which, error);
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    if (!event->timing) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                    "%s: the %s event was created without XHAL_EVENT_FLAG_TIMING", entry, which);
    }
    Record *record = event_latest(event);
    if (record == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "%s: the %s event was never recorded", entry, which);
    }
    if (!record_is_complete(record)) {
        status = fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                      "%s: the %s event's record has not completed yet", entry, which);
    } else {
        status = record_result(record, entry, error);
        *timestamp = record->completed_at_ns;
    }
    record_release(record);
    return status;
}

/* ABI 1.3: when an event's latest record completed, on this device's clock. */
static XhalStatus plugin_event_timestamp(struct XhalEvent *event, uint64_t *device_ns, XhalError **error) {
    if (device_ns == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "event_timestamp: device_ns must not be null");
    }
    return event_timestamp(event, "event_timestamp", "the", device_ns, error);
}

static XhalStatus plugin_event_elapsed_time(struct XhalEvent *start, struct XhalEvent *end, uint64_t *nanoseconds,
                                            XhalError **error) {
    if (nanoseconds == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "event_elapsed_time: nanoseconds must not be null");
    }
    uint64_t started_at = 0;
    uint64_t ended_at = 0;
    XhalStatus status = event_timestamp(start, "event_elapsed_time", "start", &started_at, error);
    if (status == XHAL_STATUS_OK) {
        status = event_timestamp(end, "event_elapsed_time", "end", &ended_at, error);
    }
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    if (start->device != end->device) {
        return fail(error, XHAL_STATUS_INVALID_HANDLE, "event_elapsed_time: the two events belong to different devices");
    }
    if (ended_at < started_at) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                    "event_elapsed_time: the end event completed %llu ns before the start event",
                    (unsigned long long)(started_at - ended_at));
    }
    *nanoseconds = ended_at - started_at;
    return XHAL_STATUS_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Kernels: C functions, one workgroup of 64 invocations per 64 elements, in x only           */
/* ------------------------------------------------------------------------------------------ */

static uint32_t load_u32(const uint8_t *bytes) {
    uint32_t value;
    memcpy(&value, bytes, sizeof value);
    return value;
}

static float load_f32(const uint8_t *bytes) {
    float value;
    memcpy(&value, bytes, sizeof value);
    return value;
}

static void store_u32(uint8_t *bytes, uint32_t value) { memcpy(bytes, &value, sizeof value); }
static void store_f32(uint8_t *bytes, float value) { memcpy(bytes, &value, sizeof value); }

static uint8_t *view_bytes(const BufferView *view) { return view->buffer->bytes + view->offset; }

/* Invocations a launch runs. The kernels are one-dimensional: launches whose y or z count is
 * not 1 are refused at enqueue time. */
static uint64_t invocations(const KernelArguments *arguments) {
    return (uint64_t)arguments->workgroups[0] * WORKGROUP_SIZE;
}

static XhalStatus check_one_dimensional(const KernelArguments *arguments, char *message, size_t message_size) {
    if (arguments->workgroups[1] != 1 || arguments->workgroups[2] != 1) {
        snprintf(message, message_size, "the kernel is one-dimensional: workgroups must be (n, 1, 1), got (%u, %u, %u)",
                 arguments->workgroups[0], arguments->workgroups[1], arguments->workgroups[2]);
        return XHAL_STATUS_INVALID_ARGUMENT;
    }
    return XHAL_STATUS_OK;
}

/* Views of 4-byte elements: each size a multiple of 4, the inputs at least as long as the
 * output they are combined into. `output` is the index of the view that is written. */
static XhalStatus check_element_views(const KernelArguments *arguments, uint32_t output, char *message,
                                      size_t message_size) {
    XhalStatus status = check_one_dimensional(arguments, message, message_size);
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    for (uint32_t index = 0; index < arguments->buffer_count; index++) {
        if (arguments->buffers[index].size % 4 != 0) {
            snprintf(message, message_size, "buffer argument %u is %llu bytes, not a whole number of 4-byte elements",
                     index, (unsigned long long)arguments->buffers[index].size);
            return XHAL_STATUS_INVALID_ARGUMENT;
        }
        if (arguments->buffers[index].size < arguments->buffers[output].size) {
            snprintf(message, message_size,
                     "buffer argument %u is %llu bytes, shorter than the %llu-byte output (argument %u) it is read "
                     "with",
                     index, (unsigned long long)arguments->buffers[index].size,
                     (unsigned long long)arguments->buffers[output].size, output);
            return XHAL_STATUS_OUT_OF_BOUNDS;
        }
    }
    return XHAL_STATUS_OK;
}

/* The elements a launch covers: every invocation with an element to work on. */
static uint64_t covered_elements(const KernelArguments *arguments, const BufferView *output) {
    uint64_t elements = output->size / 4;
    uint64_t running = invocations(arguments);
    return elements < running ? elements : running;
}

/* fill_u32(out: array<u32>; scalars { value: u32 }): out[i] = value. */
static XhalStatus check_fill_u32(const KernelArguments *arguments, char *message, size_t message_size) {
    return check_element_views(arguments, 0, message, message_size);
}

static XhalStatus run_fill_u32(const KernelArguments *arguments, char *message, size_t message_size) {
    (void)message;
    (void)message_size;
    uint8_t *out = view_bytes(&arguments->buffers[0]);
    uint32_t value = load_u32(arguments->scalars);
    uint64_t count = covered_elements(arguments, &arguments->buffers[0]);
    for (uint64_t i = 0; i < count; i++) {
        store_u32(out + 4 * i, value);
    }
    return XHAL_STATUS_OK;
}

/* add_u32(a, b, out: array<u32>): out[i] = a[i] + b[i], wrapping. */
static XhalStatus check_add_u32(const KernelArguments *arguments, char *message, size_t message_size) {
    return check_element_views(arguments, 2, message, message_size);
}

static XhalStatus run_add_u32(const KernelArguments *arguments, char *message, size_t message_size) {
    (void)message;
    (void)message_size;
    const uint8_t *a = view_bytes(&arguments->buffers[0]);
    const uint8_t *b = view_bytes(&arguments->buffers[1]);
    uint8_t *out = view_bytes(&arguments->buffers[2]);
    uint64_t count = covered_elements(arguments, &arguments->buffers[2]);
    for (uint64_t i = 0; i < count; i++) {
        store_u32(out + 4 * i, load_u32(a + 4 * i) + load_u32(b + 4 * i));
    }
    return XHAL_STATUS_OK;
}

/* saxpy_f32(x, y: array<f32>; scalars { a: f32 }): y[i] = a * x[i] + y[i]. */
static XhalStatus check_saxpy_f32(const KernelArguments *arguments, char *message, size_t message_size) {
    return check_element_views(arguments, 1, message, message_size);
}

static XhalStatus run_saxpy_f32(const KernelArguments *arguments, char *message, size_t message_size) {
    (void)message;
    (void)message_size;
    const uint8_t *x = view_bytes(&arguments->buffers[0]);
    uint8_t *y = view_bytes(&arguments->buffers[1]);
    float a = load_f32(arguments->scalars);
    uint64_t count = covered_elements(arguments, &arguments->buffers[1]);
    for (uint64_t i = 0; i < count; i++) {
        store_f32(y + 4 * i, a * load_f32(x + 4 * i) + load_f32(y + 4 * i));
    }
    return XHAL_STATUS_OK;
}

/* sleep_us(scalars { microseconds: u32 }): keeps the stream busy, so ordering and timing can
 * be observed. At most one second, so a launch cannot hang a stream. */
#define SLEEP_LIMIT_US 1000000u

static XhalStatus check_sleep_us(const KernelArguments *arguments, char *message, size_t message_size) {
    XhalStatus status = check_one_dimensional(arguments, message, message_size);
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    uint32_t microseconds = load_u32(arguments->scalars);
    if (microseconds > SLEEP_LIMIT_US) {
        snprintf(message, message_size, "sleeps of at most %u microseconds, got %u", SLEEP_LIMIT_US, microseconds);
        return XHAL_STATUS_INVALID_ARGUMENT;
    }
    return XHAL_STATUS_OK;
}

static XhalStatus run_sleep_us(const KernelArguments *arguments, char *message, size_t message_size) {
    uint32_t microseconds = load_u32(arguments->scalars);
    struct timespec remaining = {(time_t)(microseconds / 1000000u), (long)(microseconds % 1000000u) * 1000L};
    while (nanosleep(&remaining, &remaining) != 0) {
        if (errno != EINTR) {
            snprintf(message, message_size, "nanosleep failed: %s", strerror(errno));
            return XHAL_STATUS_INTERNAL;
        }
    }
    return XHAL_STATUS_OK;
}

/* fault(): fails while it executes, so a stream's sticky error can be seen. */
static XhalStatus check_fault(const KernelArguments *arguments, char *message, size_t message_size) {
    return check_one_dimensional(arguments, message, message_size);
}

static XhalStatus run_fault(const KernelArguments *arguments, char *message, size_t message_size) {
    (void)arguments;
    snprintf(message, message_size, "the `fault` kernel faults whenever it runs");
    return XHAL_STATUS_KERNEL_FAULT;
}

static const KernelDefinition KERNELS[] = {
    {"fill_u32", 1, 4, check_fill_u32, run_fill_u32},
    {"add_u32", 3, 0, check_add_u32, run_add_u32},
    {"saxpy_f32", 2, 4, check_saxpy_f32, run_saxpy_f32},
    {"sleep_us", 0, 4, check_sleep_us, run_sleep_us},
    {"fault", 0, 0, check_fault, run_fault},
};
#define KERNEL_COUNT (sizeof KERNELS / sizeof KERNELS[0])
#define KERNEL_NAMES "fill_u32, add_u32, saxpy_f32, sleep_us, fault"

static const KernelDefinition *kernel_named(const uint8_t *name, size_t length) {
    for (size_t index = 0; index < KERNEL_COUNT; index++) {
        if (strlen(KERNELS[index].name) == length && memcmp(KERNELS[index].name, name, length) == 0) {
            return &KERNELS[index];
        }
    }
    return NULL;
}

static bool is_space(uint8_t byte) { return byte == ' ' || byte == '\t' || byte == '\r'; }

/* Parses a module: UTF-8 text, one kernel name per line; `#` starts a comment; blank lines and
 * surrounding spaces are ignored. Fills `entries` (KERNEL_COUNT long) and their count. */
static XhalStatus parse_module(const uint8_t *code, size_t size, const KernelDefinition **entries, size_t *count,
                               XhalError **error) {
    *count = 0;
    size_t line_number = 0;
    size_t at = 0;
    while (at < size) {
        line_number++;
        size_t line_end = at;
        while (line_end < size && code[line_end] != '\n') {
            line_end++;
        }
        size_t name_end = at;
        while (name_end < line_end && code[name_end] != '#') {
            name_end++;
        }
        size_t start = at;
        while (start < name_end && is_space(code[start])) {
            start++;
        }
        while (name_end > start && is_space(code[name_end - 1])) {
            name_end--;
        }
        for (size_t byte = start; byte < name_end; byte++) {
            uint8_t value = code[byte];
            bool allowed = (value >= 'a' && value <= 'z') || (value >= '0' && value <= '9') || value == '_';
            if (!allowed) {
                return fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                            "module_load: line %zu: byte %#04x at column %zu cannot be part of a kernel name "
                            "(lowercase letters, digits and _)",
                            line_number, value, byte - at + 1);
            }
        }
        if (name_end > start) {
            const KernelDefinition *definition = kernel_named(code + start, name_end - start);
            if (definition == NULL) {
                return fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                            "module_load: line %zu: no kernel named `%.*s` in this plugin; it has " KERNEL_NAMES,
                            line_number, (int)(name_end - start), (const char *)(code + start));
            }
            for (size_t seen = 0; seen < *count; seen++) {
                if (entries[seen] == definition) {
                    return fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                                "module_load: line %zu: kernel `%s` is named twice", line_number, definition->name);
                }
            }
            entries[(*count)++] = definition;
        }
        at = line_end + 1;
    }
    if (*count == 0) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                    "module_load: the module names no kernel; name at least one of " KERNEL_NAMES
                    ", one per line");
    }
    return XHAL_STATUS_OK;
}

static XhalStatus plugin_module_load(struct XhalDevice *device, uint32_t format, const uint8_t *code, size_t size,
                                     struct XhalModule **module, XhalError **error) {
    XhalStatus status = check_handle(device, KIND_DEVICE, "device", error);
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    if (module == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "module_load: module must not be null");
    }
    if (format != C_PLUGIN_KERNEL_FORMAT) {
        return fail(error, XHAL_STATUS_UNSUPPORTED,
                    "module_load: kernel format %u (%#x) is not accepted; this device takes only its own format "
                    "%#x (a list of the plugin's C kernels)",
                    format, format, C_PLUGIN_KERNEL_FORMAT);
    }
    if (code == NULL && size > 0) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "module_load: code is null with size %zu", size);
    }
    const KernelDefinition *entries[KERNEL_COUNT];
    size_t count = 0;
    status = parse_module(code, size, entries, &count, error);
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    struct XhalModule *loaded = malloc(sizeof *loaded);
    const KernelDefinition **kept = malloc(count * sizeof *kept);
    if (loaded == NULL || kept == NULL) {
        free(loaded);
        free(kept);
        return fail(error, XHAL_STATUS_OUT_OF_MEMORY, "module_load: no host memory for the module");
    }
    memcpy(kept, entries, count * sizeof *kept);
    loaded->kind = KIND_MODULE;
    loaded->device = device;
    loaded->entry_count = count;
    loaded->entries = kept;
    *module = loaded;
    return XHAL_STATUS_OK;
}

static void plugin_module_destroy(struct XhalModule *module) {
    if (module == NULL || module->kind != KIND_MODULE) {
        return;
    }
    module->kind = 0;
    free(module->entries);
    free(module);
}

static XhalStatus plugin_kernel_get(struct XhalModule *module, XhalStr name, struct XhalKernel **kernel,
                                    XhalError **error) {
    XhalStatus status = check_handle(module, KIND_MODULE, "module", error);
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    if (kernel == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "kernel_get: kernel must not be null");
    }
    if (name.ptr == NULL && name.len > 0) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "kernel_get: name.ptr is null with length %zu", name.len);
    }
    if (name.len == 0) {
        return fail(error, XHAL_STATUS_NOT_FOUND, "kernel_get: the name is empty; no kernel has an empty name");
    }
    for (size_t index = 0; index < module->entry_count; index++) {
        const KernelDefinition *definition = module->entries[index];
        if (strlen(definition->name) == name.len && memcmp(definition->name, name.ptr, name.len) == 0) {
            struct XhalKernel *found = malloc(sizeof *found);
            if (found == NULL) {
                return fail(error, XHAL_STATUS_OUT_OF_MEMORY, "kernel_get: no host memory for the kernel");
            }
            found->kind = KIND_KERNEL;
            found->device = module->device;
            found->definition = definition;
            *kernel = found;
            return XHAL_STATUS_OK;
        }
    }
    /* The name is only echoed when it is printable ASCII; anything else is described by length. */
    bool printable = name.len <= 64;
    for (size_t index = 0; printable && index < name.len; index++) {
        printable = name.ptr[index] >= 0x20 && name.ptr[index] < 0x7f;
    }
    if (printable) {
        return fail(error, XHAL_STATUS_NOT_FOUND, "kernel_get: the module has no kernel named `%.*s`", (int)name.len,
                    (const char *)name.ptr);
    }
    return fail(error, XHAL_STATUS_NOT_FOUND, "kernel_get: the module has no kernel with that %zu-byte name",
                name.len);
}

static void plugin_kernel_destroy(struct XhalKernel *kernel) {
    if (kernel == NULL || kernel->kind != KIND_KERNEL) {
        return;
    }
    kernel->kind = 0;
    free(kernel);
}

/* ------------------------------------------------------------------------------------------ */
/* The table                                                                                  */
/* ------------------------------------------------------------------------------------------ */

static const XhalPluginApi PLUGIN_TABLE = {
    .struct_size = XHAL_PLUGIN_API_V1_4_SIZE,
    .abi_major = XHAL_ABI_MAJOR,
    .abi_minor = XHAL_ABI_MINOR,
    .plugin_name = {(const uint8_t *)PLUGIN_NAME, sizeof PLUGIN_NAME - 1},
    .plugin_version = {(const uint8_t *)PLUGIN_VERSION, sizeof PLUGIN_VERSION - 1},
    .error_free = plugin_error_free,
    .device_count = plugin_device_count,
    .device_get_info = plugin_device_get_info,
    .device_open = plugin_device_open,
    .device_close = plugin_device_close,
    .buffer_allocate = plugin_buffer_allocate,
    .buffer_free = plugin_buffer_free,
    .stream_create = plugin_stream_create,
    .stream_destroy = plugin_stream_destroy,
    .stream_write = plugin_stream_write,
    .stream_read = plugin_stream_read,
    .stream_copy = plugin_stream_copy,
    .stream_fill = plugin_stream_fill,
    .stream_launch = plugin_stream_launch,
    .stream_record_event = plugin_stream_record_event,
    .stream_wait_event = plugin_stream_wait_event,
    .stream_synchronize = plugin_stream_synchronize,
    .stream_query = plugin_stream_query,
    .event_create = plugin_event_create,
    .event_destroy = plugin_event_destroy,
    .event_query = plugin_event_query,
    .event_synchronize = plugin_event_synchronize,
    .event_elapsed_time = plugin_event_elapsed_time,
    .module_load = plugin_module_load,
    .module_destroy = plugin_module_destroy,
    .kernel_get = plugin_kernel_get,
    .kernel_destroy = plugin_kernel_destroy,
    .device_memory_usage = plugin_device_memory_usage,
    .device_clock = plugin_device_clock,
    .event_timestamp = plugin_event_timestamp,
    .command_list_create = plugin_command_list_create,
    .command_list_append_copy = plugin_command_list_append_copy,
    .command_list_append_fill = plugin_command_list_append_fill,
    .command_list_append_launch = plugin_command_list_append_launch,
    .command_list_finish = plugin_command_list_finish,
    .command_list_update_launch = plugin_command_list_update_launch,
    .stream_submit_command_list = plugin_stream_submit_command_list,
    .command_list_destroy = plugin_command_list_destroy,
};

XHAL_PLUGIN_EXPORT const XhalPluginApi *xhal_plugin_query(uint32_t host_abi_major, uint32_t host_abi_minor) {
    /* Any 1.x host can use this table: an older host never calls past its own entries. */
    (void)host_abi_minor;
    return host_abi_major == XHAL_ABI_MAJOR ? &PLUGIN_TABLE : NULL;
}
