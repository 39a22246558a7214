/*
 * A plugin in C whose table layout is set byte by byte, for the ABI evolution tests
 * (hal/core/tests/abi_evolution.rs). One source, one variant per build, chosen with
 * -DZOO_VARIANT_<NAME>:
 *
 *   NEWER_MINOR            reports the host's minor + 1; its table is longer than the host's
 *                          and its extra trailing entries are traps; its errors carry a
 *                          larger XhalError; it knows a device-info field the host does not.
 *                          It has the optional entries of 1.1, 1.3 and 1.5 and the 1.4 command
 *                          lists, and counts the lists submitted to its streams.
 *   V1_0_TABLE_AT_PAGE_END reports minor 0 with a table of exactly the v1.0 size, placed so
 *                          that it ends where an unreadable page begins.
 *   TRUNCATED_TRAPPED      struct_size ends before `kernel_get`; the two last v1.0 slots,
 *                          beyond struct_size, hold traps.
 *   TRUNCATED_AT_PAGE_END  the same struct_size, ending where an unreadable page begins.
 *   MAJOR_ABOVE            reports the host's major + 1 (minor 3) with only the header
 *                          (struct_size, abi_major, abi_minor) before an unreadable page.
 *   MAJOR_BELOW            reports the host's major - 1 (minor 9) with a full working table.
 *
 * A trap writes "xhal zoo trap: ..." to stderr and ends the process with status 86; a read
 * of an unreadable page ends it with SIGSEGV. The tests run each load in a child process and
 * read either as a failure of the host.
 *
 * The device behind the table is small but real: host memory, streams that complete each
 * operation before returning, timing events, and kernels of a vendor format that name one
 * of the C functions below. Its command lists (1.4) keep each command's arguments and run
 * them through the stream entries when submitted.
 */
#define _DEFAULT_SOURCE
#include "xhal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* The vendor kernel format of this plugin: any code, kernels named by `kernel_get`. */
#define ZOO_KERNEL_FORMAT (XHAL_KERNEL_FORMAT_VENDOR_BASE + 0xE70)

#define TRAP_EXIT_STATUS 86

/* Each variant uses some of the traps and helpers below. */
#define ZOO_SOME_VARIANTS __attribute__((unused))

/* ---- traps ------------------------------------------------------------------------------ */

static void trap(const char *what) {
    fprintf(stderr, "xhal zoo trap: %s\n", what);
    fflush(stderr);
    _exit(TRAP_EXIT_STATUS);
}

ZOO_SOME_VARIANTS static XhalStatus trap_kernel_get(struct XhalModule *module, struct XhalStr name, struct XhalKernel **kernel,
                                  XhalErrorOut error) {
    (void)module, (void)name, (void)kernel, (void)error;
    trap("kernel_get, which lies beyond the table's struct_size, was called");
    return XHAL_STATUS_INTERNAL;
}

ZOO_SOME_VARIANTS static void trap_kernel_destroy(struct XhalKernel *kernel) {
    (void)kernel;
    trap("kernel_destroy, which lies beyond the table's struct_size, was called");
}

ZOO_SOME_VARIANTS static void trap_future_entry_0(void) { trap("future entry 0 (unknown to the host) was called"); }
ZOO_SOME_VARIANTS static void trap_future_entry_1(void) { trap("future entry 1 (unknown to the host) was called"); }
ZOO_SOME_VARIANTS static void trap_future_entry_2(void) { trap("future entry 2 (unknown to the host) was called"); }

/* ---- errors ----------------------------------------------------------------------------- */

/* An error as a newer minor might define it: the v1.0 fields, then one the host does not know. */
typedef struct ZooError {
    XhalError base;
    uint32_t future_detail;
    char text[200];
} ZooError;

#if defined(ZOO_VARIANT_NEWER_MINOR)
#define ZOO_ERROR_STRUCT_SIZE (offsetof(ZooError, future_detail) + sizeof(uint32_t))
#else
#define ZOO_ERROR_STRUCT_SIZE XHAL_ERROR_V1_0_SIZE
#endif

static XhalStatus fail(XhalErrorOut error, XhalStatus code, const char *message) {
    if (error == NULL) {
        return code;
    }
    ZooError *made = calloc(1, sizeof(ZooError));
    if (made == NULL) {
        *error = NULL;
        return code;
    }
    snprintf(made->text, sizeof made->text, "%s", message);
    made->base.struct_size = ZOO_ERROR_STRUCT_SIZE;
    made->base.code = code;
    made->base.message.ptr = (const uint8_t *)made->text;
    made->base.message.len = strlen(made->text);
    made->future_detail = 0xE70;
    *error = &made->base;
    return code;
}

static void zoo_error_free(XhalError *error) { free(error); }

/* ---- the device ------------------------------------------------------------------------- */

struct XhalDevice {
    int unused;
};
struct XhalBuffer {
    uint64_t size;
    uint8_t *bytes;
};
struct XhalStream {
    int unused;
};
struct XhalEvent {
    uint32_t flags;
    int recorded;
    uint64_t nanoseconds;
};
struct XhalModule {
    int unused;
};

typedef void (*ZooKernelFn)(const XhalLaunchInfo *launch);
struct XhalKernel {
    ZooKernelFn run;
};

static const char DEVICE_NAME[] = "zoo evolution device";
static const char DEVICE_VENDOR[] = "xhal plugin zoo";
#define DEVICE_MEMORY (64u << 20)

/* Reported back in driver_version, so a test can see what the host passed. */
static uint32_t host_abi_major_seen;
static uint32_t host_abi_minor_seen;
static char driver_version[128];

static XhalStatus zoo_device_count(uint32_t *count, XhalErrorOut error) {
    if (count == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "device_count: count is null");
    }
    *count = 1;
    return XHAL_STATUS_OK;
}

#if defined(ZOO_VARIANT_NEWER_MINOR)
/* A device-info field this plugin's (future) minor would append after kernel_formats. */
#define FUTURE_CLOCK_FIELD_OFFSET XHAL_DEVICE_INFO_V1_0_SIZE
#define FUTURE_DEVICE_INFO_SIZE (FUTURE_CLOCK_FIELD_OFFSET + sizeof(uint32_t))
#endif

static XhalStatus zoo_device_get_info(uint32_t index, XhalDeviceInfo *info, XhalErrorOut error) {
    if (info == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "device_get_info: info is null");
    }
    if (index != 0) {
        return fail(error, XHAL_STATUS_NOT_FOUND, "device_get_info: only device 0 exists");
    }
    if (info->struct_size < XHAL_DEVICE_INFO_V1_0_SIZE) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "device_get_info: struct_size below the v1.0 size");
    }
    size_t host_info_size = info->struct_size;
    snprintf(driver_version, sizeof driver_version, "host ABI %u.%u, device-info struct_size %zu",
             (unsigned)host_abi_major_seen, (unsigned)host_abi_minor_seen, host_info_size);
    info->name.ptr = (const uint8_t *)DEVICE_NAME;
    info->name.len = sizeof DEVICE_NAME - 1;
    info->vendor.ptr = (const uint8_t *)DEVICE_VENDOR;
    info->vendor.len = sizeof DEVICE_VENDOR - 1;
    info->vendor_id = 0;
    info->device_id = 0;
    info->device_type = XHAL_DEVICE_TYPE_OTHER;
    for (int i = 0; i < 16; i++) {
        info->uuid[i] = (uint8_t)(0xE0 + i);
    }
    info->pci_bus_id.ptr = NULL;
    info->pci_bus_id.len = 0;
    info->driver_version.ptr = (const uint8_t *)driver_version;
    info->driver_version.len = strlen(driver_version);
    info->total_memory = DEVICE_MEMORY;
    info->free_memory = DEVICE_MEMORY;
    info->max_allocation_size = DEVICE_MEMORY;
    for (int i = 0; i < 3; i++) {
        info->max_workgroup_size[i] = 1;
        info->max_workgroup_count[i] = 65535;
    }
    info->max_workgroup_invocations = 1;
    info->max_workgroup_memory = 0;
    info->subgroup_size = 1;
    info->max_buffer_arguments = 8;
    info->max_scalar_block_size = 256;
    info->buffer_offset_alignment = 4;
    info->features = XHAL_FEATURE_TIMESTAMPS;
    info->kernel_format_count = 1;
    info->kernel_formats[0] = ZOO_KERNEL_FORMAT;
#if defined(ZOO_VARIANT_NEWER_MINOR)
    /* The field this plugin knows and the host may not: written only where the host's
     * struct_size says the host's struct has it. */
    if (host_info_size >= FUTURE_DEVICE_INFO_SIZE) {
        uint32_t clock_mhz = 1000;
        memcpy((uint8_t *)info + FUTURE_CLOCK_FIELD_OFFSET, &clock_mhz, sizeof clock_mhz);
    }
#endif
    return XHAL_STATUS_OK;
}

static XhalStatus zoo_device_open(uint32_t index, struct XhalDevice **device, XhalErrorOut error) {
    if (device == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "device_open: device is null");
    }
    if (index != 0) {
        return fail(error, XHAL_STATUS_NOT_FOUND, "device_open: only device 0 exists");
    }
    *device = calloc(1, sizeof(struct XhalDevice));
    return *device ? XHAL_STATUS_OK : fail(error, XHAL_STATUS_OUT_OF_MEMORY, "device_open: out of host memory");
}

static void zoo_device_close(struct XhalDevice *device) { free(device); }

/* The 1.1 entry, filled in by the newer-minor variant only. */
ZOO_SOME_VARIANTS static XhalStatus zoo_device_memory_usage(struct XhalDevice *device, uint64_t *free_bytes,
                                                            uint64_t *total_bytes, XhalErrorOut error) {
    if (device == NULL || free_bytes == NULL || total_bytes == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "device_memory_usage: null device or out pointer");
    }
    *free_bytes = DEVICE_MEMORY / 4;
    *total_bytes = DEVICE_MEMORY;
    return XHAL_STATUS_OK;
}

static uint64_t now_nanoseconds(void);

/* The 1.3 entries, filled in by the newer-minor variant only: the zoo's events are stamped
 * with the host's monotonic clock, so its device clock is the host's. */
ZOO_SOME_VARIANTS static XhalStatus zoo_device_clock(struct XhalDevice *device, uint64_t *device_ns, uint64_t *host_ns,
                                                     uint64_t *uncertainty_ns, XhalErrorOut error) {
    if (device == NULL || device_ns == NULL || host_ns == NULL || uncertainty_ns == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "device_clock: null device or out pointer");
    }
    *device_ns = *host_ns = now_nanoseconds();
    *uncertainty_ns = 0;
    return XHAL_STATUS_OK;
}

static XhalStatus zoo_buffer_allocate(struct XhalDevice *device, uint64_t size, struct XhalBuffer **buffer,
                                      XhalErrorOut error) {
    if (device == NULL || buffer == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "buffer_allocate: null device or out pointer");
    }
    if (size == 0 || size > DEVICE_MEMORY) {
        return fail(error, XHAL_STATUS_OUT_OF_MEMORY, "buffer_allocate: size is 0 or above the device memory");
    }
    struct XhalBuffer *made = calloc(1, sizeof(struct XhalBuffer));
    uint8_t *bytes = calloc(1, (size_t)size);
    if (made == NULL || bytes == NULL) {
        free(made);
        free(bytes);
        return fail(error, XHAL_STATUS_OUT_OF_MEMORY, "buffer_allocate: out of host memory");
    }
    made->size = size;
    made->bytes = bytes;
    *buffer = made;
    return XHAL_STATUS_OK;
}

static void zoo_buffer_free(struct XhalBuffer *buffer) {
    if (buffer != NULL) {
        free(buffer->bytes);
        free(buffer);
    }
}

static XhalStatus zoo_stream_create(struct XhalDevice *device, struct XhalStream **stream, XhalErrorOut error) {
    if (device == NULL || stream == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "stream_create: null device or out pointer");
    }
    *stream = calloc(1, sizeof(struct XhalStream));
    return *stream ? XHAL_STATUS_OK : fail(error, XHAL_STATUS_OUT_OF_MEMORY, "stream_create: out of host memory");
}

static void zoo_stream_destroy(struct XhalStream *stream) { free(stream); }

/* The 1.5 entries, filled in by the newer-minor variant only: priorities 0 to -2. The zoo runs
 * every stream's work at once, so a priority changes nothing but what it was asked for. */
#define ZOO_MOST_URGENT (-2)
ZOO_SOME_VARIANTS static XhalStatus zoo_device_stream_priorities(struct XhalDevice *device, int32_t *least,
                                                                 int32_t *greatest, XhalErrorOut error) {
    if (device == NULL || least == NULL || greatest == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "device_stream_priorities: null device or out pointer");
    }
    *least = 0;
    *greatest = ZOO_MOST_URGENT;
    return XHAL_STATUS_OK;
}

ZOO_SOME_VARIANTS static XhalStatus zoo_stream_create_with_priority(struct XhalDevice *device, int32_t priority,
                                                                    struct XhalStream **stream, XhalErrorOut error) {
    if (priority > 0 || priority < ZOO_MOST_URGENT) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "stream_create_with_priority: priority outside 0 to -2");
    }
    return zoo_stream_create(device, stream, error);
}

static int out_of_range(const struct XhalBuffer *buffer, uint64_t offset, uint64_t size) {
    return offset > buffer->size || size > buffer->size - offset;
}

static XhalStatus zoo_stream_write(struct XhalStream *stream, struct XhalBuffer *buffer, uint64_t offset,
                                   const uint8_t *source, uint64_t size, XhalErrorOut error) {
    if (stream == NULL || buffer == NULL || (source == NULL && size > 0)) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "stream_write: null stream, buffer or source");
    }
    if (out_of_range(buffer, offset, size)) {
        return fail(error, XHAL_STATUS_OUT_OF_BOUNDS, "stream_write: range outside the buffer");
    }
    if (size > 0) {
        memcpy(buffer->bytes + offset, source, (size_t)size);
    }
    return XHAL_STATUS_OK;
}

static XhalStatus zoo_stream_read(struct XhalStream *stream, struct XhalBuffer *buffer, uint64_t offset,
                                  uint8_t *destination, uint64_t size, XhalErrorOut error) {
    if (stream == NULL || buffer == NULL || (destination == NULL && size > 0)) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "stream_read: null stream, buffer or destination");
    }
    if (out_of_range(buffer, offset, size)) {
        return fail(error, XHAL_STATUS_OUT_OF_BOUNDS, "stream_read: range outside the buffer");
    }
    if (size > 0) {
        memcpy(destination, buffer->bytes + offset, (size_t)size);
    }
    return XHAL_STATUS_OK;
}

static XhalStatus zoo_stream_copy(struct XhalStream *stream, struct XhalBuffer *source, uint64_t source_offset,
                                  struct XhalBuffer *destination, uint64_t destination_offset, uint64_t size,
                                  XhalErrorOut error) {
    if (stream == NULL || source == NULL || destination == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "stream_copy: null stream or buffer");
    }
    if (out_of_range(source, source_offset, size) || out_of_range(destination, destination_offset, size)) {
        return fail(error, XHAL_STATUS_OUT_OF_BOUNDS, "stream_copy: range outside a buffer");
    }
    if (size > 0) {
        memmove(destination->bytes + destination_offset, source->bytes + source_offset, (size_t)size);
    }
    return XHAL_STATUS_OK;
}

static XhalStatus zoo_stream_fill(struct XhalStream *stream, struct XhalBuffer *buffer, uint64_t offset,
                                  uint64_t size, const uint8_t *pattern, size_t pattern_size, XhalErrorOut error) {
    if (stream == NULL || buffer == NULL || pattern == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "stream_fill: null stream, buffer or pattern");
    }
    if (pattern_size != 1 && pattern_size != 2 && pattern_size != 4) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "stream_fill: the pattern is not 1, 2 or 4 bytes");
    }
    if (offset % pattern_size != 0 || size % pattern_size != 0) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "stream_fill: offset or size not a multiple of the pattern");
    }
    if (out_of_range(buffer, offset, size)) {
        return fail(error, XHAL_STATUS_OUT_OF_BOUNDS, "stream_fill: range outside the buffer");
    }
    for (uint64_t at = 0; at < size; at += pattern_size) {
        memcpy(buffer->bytes + offset + at, pattern, pattern_size);
    }
    return XHAL_STATUS_OK;
}

static XhalStatus zoo_stream_launch(struct XhalStream *stream, const XhalLaunchInfo *launch, XhalErrorOut error) {
    if (stream == NULL || launch == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "stream_launch: null stream or launch");
    }
    if (launch->struct_size < XHAL_LAUNCH_INFO_V1_0_SIZE) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "stream_launch: struct_size below the v1.0 size");
    }
    if (launch->kernel == NULL || launch->kernel->run == NULL) {
        return fail(error, XHAL_STATUS_INVALID_HANDLE, "stream_launch: null kernel");
    }
    for (uint32_t i = 0; i < launch->buffer_count; i++) {
        const XhalBufferArg *arg = &launch->buffers[i];
        if (arg->buffer == NULL || out_of_range(arg->buffer, arg->offset, arg->size)) {
            return fail(error, XHAL_STATUS_OUT_OF_BOUNDS, "stream_launch: a buffer argument reaches outside its buffer");
        }
    }
    launch->kernel->run(launch);
    return XHAL_STATUS_OK;
}

static uint64_t now_nanoseconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static XhalStatus zoo_stream_record_event(struct XhalStream *stream, struct XhalEvent *event, XhalErrorOut error) {
    if (stream == NULL || event == NULL) {
        return fail(error, XHAL_STATUS_INVALID_HANDLE, "stream_record_event: null stream or event");
    }
    event->recorded = 1;
    event->nanoseconds = now_nanoseconds();
    return XHAL_STATUS_OK;
}

static XhalStatus zoo_stream_wait_event(struct XhalStream *stream, struct XhalEvent *event, XhalErrorOut error) {
    if (stream == NULL || event == NULL) {
        return fail(error, XHAL_STATUS_INVALID_HANDLE, "stream_wait_event: null stream or event");
    }
    return XHAL_STATUS_OK;
}

static XhalStatus zoo_stream_synchronize(struct XhalStream *stream, XhalErrorOut error) {
    return stream ? XHAL_STATUS_OK : fail(error, XHAL_STATUS_INVALID_HANDLE, "stream_synchronize: null stream");
}

static XhalStatus zoo_stream_query(struct XhalStream *stream, XhalErrorOut error) {
    return stream ? XHAL_STATUS_OK : fail(error, XHAL_STATUS_INVALID_HANDLE, "stream_query: null stream");
}

static XhalStatus zoo_event_create(struct XhalDevice *device, uint32_t flags, struct XhalEvent **event,
                                   XhalErrorOut error) {
    if (device == NULL || event == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "event_create: null device or out pointer");
    }
    if ((flags & ~(uint32_t)XHAL_EVENT_FLAG_TIMING) != 0) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "event_create: unknown flags");
    }
    struct XhalEvent *made = calloc(1, sizeof(struct XhalEvent));
    if (made == NULL) {
        return fail(error, XHAL_STATUS_OUT_OF_MEMORY, "event_create: out of host memory");
    }
    made->flags = flags;
    *event = made;
    return XHAL_STATUS_OK;
}

static void zoo_event_destroy(struct XhalEvent *event) { free(event); }

static XhalStatus zoo_event_query(struct XhalEvent *event, XhalErrorOut error) {
    return event ? XHAL_STATUS_OK : fail(error, XHAL_STATUS_INVALID_HANDLE, "event_query: null event");
}

static XhalStatus zoo_event_synchronize(struct XhalEvent *event, XhalErrorOut error) {
    return event ? XHAL_STATUS_OK : fail(error, XHAL_STATUS_INVALID_HANDLE, "event_synchronize: null event");
}

static XhalStatus zoo_event_elapsed_time(struct XhalEvent *start, struct XhalEvent *end, uint64_t *nanoseconds,
                                         XhalErrorOut error) {
    if (start == NULL || end == NULL || nanoseconds == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "event_elapsed_time: null event or out pointer");
    }
    if (!(start->flags & XHAL_EVENT_FLAG_TIMING) || !(end->flags & XHAL_EVENT_FLAG_TIMING)) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "event_elapsed_time: an event was created without timing");
    }
    if (!start->recorded || !end->recorded) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "event_elapsed_time: an event was never recorded");
    }
    *nanoseconds = end->nanoseconds >= start->nanoseconds ? end->nanoseconds - start->nanoseconds : 0;
    return XHAL_STATUS_OK;
}

ZOO_SOME_VARIANTS static XhalStatus zoo_event_timestamp(struct XhalEvent *event, uint64_t *device_ns,
                                                        XhalErrorOut error) {
    if (event == NULL || device_ns == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "event_timestamp: null event or out pointer");
    }
    if (!(event->flags & XHAL_EVENT_FLAG_TIMING) || !event->recorded) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "event_timestamp: the event has no timing or was never recorded");
    }
    *device_ns = event->nanoseconds;
    return XHAL_STATUS_OK;
}

static XhalStatus zoo_module_load(struct XhalDevice *device, uint32_t format, const uint8_t *code, size_t size,
                                  struct XhalModule **module, XhalErrorOut error) {
    (void)code, (void)size;
    if (device == NULL || module == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "module_load: null device or out pointer");
    }
    if (format != ZOO_KERNEL_FORMAT) {
        return fail(error, XHAL_STATUS_UNSUPPORTED, "module_load: only the zoo's own kernel format is accepted");
    }
    *module = calloc(1, sizeof(struct XhalModule));
    return *module ? XHAL_STATUS_OK : fail(error, XHAL_STATUS_OUT_OF_MEMORY, "module_load: out of host memory");
}

static void zoo_module_destroy(struct XhalModule *module) { free(module); }

/* Adds the u32 scalar to every u32 of buffer argument 0. */
static void kernel_add_scalar(const XhalLaunchInfo *launch) {
    if (launch->buffer_count < 1 || launch->scalar_size < sizeof(uint32_t)) {
        return;
    }
    uint32_t addend;
    memcpy(&addend, launch->scalars, sizeof addend);
    const XhalBufferArg *arg = &launch->buffers[0];
    uint8_t *bytes = arg->buffer->bytes + arg->offset;
    for (uint64_t at = 0; at + sizeof(uint32_t) <= arg->size; at += sizeof(uint32_t)) {
        uint32_t value;
        memcpy(&value, bytes + at, sizeof value);
        value += addend;
        memcpy(bytes + at, &value, sizeof value);
    }
}

/* Writes the struct_size of the XhalLaunchInfo the host passed into buffer argument 0. */
static void kernel_report_launch_struct_size(const XhalLaunchInfo *launch) {
    if (launch->buffer_count < 1 || launch->buffers[0].size < sizeof(uint64_t)) {
        return;
    }
    uint64_t size = launch->struct_size;
    memcpy(launch->buffers[0].buffer->bytes + launch->buffers[0].offset, &size, sizeof size);
}

/* Command lists submitted to the zoo's streams so far (1.4, newer-minor variant only). */
static atomic_ulong list_submissions;

/* Writes how many command lists were submitted so far into buffer argument 0, as a u64. */
static void kernel_report_list_submissions(const XhalLaunchInfo *launch) {
    if (launch->buffer_count < 1 || launch->buffers[0].size < sizeof(uint64_t)) {
        return;
    }
    uint64_t count = atomic_load(&list_submissions);
    memcpy(launch->buffers[0].buffer->bytes + launch->buffers[0].offset, &count, sizeof count);
}

static int name_is(struct XhalStr name, const char *expected) {
    size_t length = strlen(expected);
    return name.len == length && (length == 0 || memcmp(name.ptr, expected, length) == 0);
}

static XhalStatus zoo_kernel_get(struct XhalModule *module, struct XhalStr name, struct XhalKernel **kernel,
                                 XhalErrorOut error) {
    if (module == NULL || kernel == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "kernel_get: null module or out pointer");
    }
    ZooKernelFn run = NULL;
    if (name_is(name, "add_scalar")) {
        run = kernel_add_scalar;
    } else if (name_is(name, "report_launch_struct_size")) {
        run = kernel_report_launch_struct_size;
    } else if (name_is(name, "report_list_submissions")) {
        run = kernel_report_list_submissions;
    } else {
        return fail(error, XHAL_STATUS_NOT_FOUND,
                    "kernel_get: no such kernel; the zoo has add_scalar, report_launch_struct_size and "
                    "report_list_submissions");
    }
    struct XhalKernel *made = calloc(1, sizeof(struct XhalKernel));
    if (made == NULL) {
        return fail(error, XHAL_STATUS_OUT_OF_MEMORY, "kernel_get: out of host memory");
    }
    made->run = run;
    *kernel = made;
    return XHAL_STATUS_OK;
}

static void zoo_kernel_destroy(struct XhalKernel *kernel) { free(kernel); }


/* ---- command lists (1.4), filled in by the newer-minor variant only ----------------------- */

#define ZOO_LIST_CAPACITY 16
#define ZOO_MAX_BUFFERS 8
#define ZOO_MAX_SCALARS 256

typedef enum ZooCommandKind { ZOO_COPY, ZOO_FILL, ZOO_LAUNCH } ZooCommandKind;

/* One command: the arguments of the stream entry that runs it, copied when appended. */
typedef struct ZooCommand {
    ZooCommandKind kind;
    struct XhalBuffer *source; /* copy */
    uint64_t source_offset;
    struct XhalBuffer *destination; /* copy; the filled buffer of a fill */
    uint64_t destination_offset;
    uint64_t size;
    uint8_t pattern[4];
    size_t pattern_size;
    XhalLaunchInfo launch; /* its buffers and scalars point into the two arrays below */
    XhalBufferArg buffers[ZOO_MAX_BUFFERS];
    uint8_t scalars[ZOO_MAX_SCALARS];
} ZooCommand;

struct XhalCommandList {
    int finished;
    size_t count;
    ZooCommand commands[ZOO_LIST_CAPACITY];
};

ZOO_SOME_VARIANTS static XhalStatus zoo_command_list_create(struct XhalDevice *device, struct XhalCommandList **list,
                                                            XhalErrorOut error) {
    if (device == NULL || list == NULL) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "command_list_create: null device or out pointer");
    }
    *list = calloc(1, sizeof(struct XhalCommandList));
    return *list ? XHAL_STATUS_OK : fail(error, XHAL_STATUS_OUT_OF_MEMORY, "command_list_create: out of host memory");
}

/* The next free command of an open list, cleared, or the reason there is none. */
ZOO_SOME_VARIANTS static XhalStatus zoo_next_command(struct XhalCommandList *list, ZooCommand **command,
                                                     XhalErrorOut error) {
    if (list == NULL) {
        return fail(error, XHAL_STATUS_INVALID_HANDLE, "command list append: null list");
    }
    if (list->finished) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "command list append: the list is finished");
    }
    if (list->count == ZOO_LIST_CAPACITY) {
        return fail(error, XHAL_STATUS_OUT_OF_MEMORY, "command list append: a zoo list holds at most 16 commands");
    }
    *command = &list->commands[list->count];
    memset(*command, 0, sizeof **command);
    return XHAL_STATUS_OK;
}

ZOO_SOME_VARIANTS static XhalStatus zoo_command_list_append_copy(struct XhalCommandList *list,
                                                                 struct XhalBuffer *source, uint64_t source_offset,
                                                                 struct XhalBuffer *destination,
                                                                 uint64_t destination_offset, uint64_t size,
                                                                 XhalErrorOut error) {
    ZooCommand *command = NULL;
    XhalStatus status = zoo_next_command(list, &command, error);
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    if (source == NULL || destination == NULL || size == 0) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "command_list_append_copy: null buffer or 0 bytes");
    }
    if (out_of_range(source, source_offset, size) || out_of_range(destination, destination_offset, size)) {
        return fail(error, XHAL_STATUS_OUT_OF_BOUNDS, "command_list_append_copy: range outside a buffer");
    }
    command->kind = ZOO_COPY;
    command->source = source;
    command->source_offset = source_offset;
    command->destination = destination;
    command->destination_offset = destination_offset;
    command->size = size;
    list->count++;
    return XHAL_STATUS_OK;
}

ZOO_SOME_VARIANTS static XhalStatus zoo_command_list_append_fill(struct XhalCommandList *list,
                                                                 struct XhalBuffer *buffer, uint64_t offset,
                                                                 uint64_t size, const uint8_t *pattern,
                                                                 size_t pattern_size, XhalErrorOut error) {
    ZooCommand *command = NULL;
    XhalStatus status = zoo_next_command(list, &command, error);
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    if (buffer == NULL || pattern == NULL || size == 0) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                    "command_list_append_fill: null buffer or pattern, or 0 bytes");
    }
    if (pattern_size != 1 && pattern_size != 2 && pattern_size != 4) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                    "command_list_append_fill: the pattern is not 1, 2 or 4 bytes");
    }
    if (offset % pattern_size != 0 || size % pattern_size != 0 || out_of_range(buffer, offset, size)) {
        return fail(error, XHAL_STATUS_OUT_OF_BOUNDS,
                    "command_list_append_fill: a range outside the buffer or not a whole number of patterns");
    }
    command->kind = ZOO_FILL;
    command->destination = buffer;
    command->destination_offset = offset;
    command->size = size;
    memcpy(command->pattern, pattern, pattern_size);
    command->pattern_size = pattern_size;
    list->count++;
    return XHAL_STATUS_OK;
}

/* Copies `launch` into `command`, checking what the zoo's stream_launch checks. */
ZOO_SOME_VARIANTS static XhalStatus zoo_keep_launch(ZooCommand *command, const XhalLaunchInfo *launch,
                                                    const char *entry, XhalErrorOut error) {
    char message[160];
    if (launch == NULL || launch->struct_size < XHAL_LAUNCH_INFO_V1_0_SIZE || launch->kernel == NULL) {
        snprintf(message, sizeof message, "%s: null launch or kernel, or struct_size below the v1.0 size", entry);
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, message);
    }
    if (launch->buffer_count > ZOO_MAX_BUFFERS || launch->scalar_size > ZOO_MAX_SCALARS) {
        snprintf(message, sizeof message, "%s: more than 8 buffers or 256 scalar bytes", entry);
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, message);
    }
    for (uint32_t i = 0; i < launch->buffer_count; i++) {
        const XhalBufferArg *arg = &launch->buffers[i];
        if (arg->buffer == NULL || out_of_range(arg->buffer, arg->offset, arg->size)) {
            snprintf(message, sizeof message, "%s: a buffer argument reaches outside its buffer", entry);
            return fail(error, XHAL_STATUS_OUT_OF_BOUNDS, message);
        }
        command->buffers[i] = *arg;
    }
    if (launch->scalar_size > 0) {
        memcpy(command->scalars, launch->scalars, launch->scalar_size);
    }
    command->kind = ZOO_LAUNCH;
    command->launch.struct_size = launch->struct_size;
    command->launch.kernel = launch->kernel;
    memcpy(command->launch.workgroups, launch->workgroups, sizeof command->launch.workgroups);
    command->launch.buffers = command->buffers;
    command->launch.buffer_count = launch->buffer_count;
    command->launch.scalars = command->scalars;
    command->launch.scalar_size = launch->scalar_size;
    return XHAL_STATUS_OK;
}

ZOO_SOME_VARIANTS static XhalStatus zoo_command_list_append_launch(struct XhalCommandList *list,
                                                                   const XhalLaunchInfo *launch, XhalErrorOut error) {
    ZooCommand *command = NULL;
    XhalStatus status = zoo_next_command(list, &command, error);
    if (status != XHAL_STATUS_OK) {
        return status;
    }
    status = zoo_keep_launch(command, launch, "command_list_append_launch", error);
    if (status == XHAL_STATUS_OK) {
        list->count++;
    }
    return status;
}

ZOO_SOME_VARIANTS static XhalStatus zoo_command_list_finish(struct XhalCommandList *list, XhalErrorOut error) {
    if (list == NULL || list->finished) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "command_list_finish: null or already finished list");
    }
    list->finished = 1;
    return XHAL_STATUS_OK;
}

ZOO_SOME_VARIANTS static XhalStatus zoo_command_list_update_launch(struct XhalCommandList *list, uint32_t index,
                                                                   const XhalLaunchInfo *launch, XhalErrorOut error) {
    if (list == NULL || !list->finished || index >= list->count || list->commands[index].kind != ZOO_LAUNCH) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                    "command_list_update_launch: not a finished list, or command index is not a launch");
    }
    ZooCommand *command = &list->commands[index];
    if (launch == NULL || launch->kernel != command->launch.kernel ||
        launch->buffer_count != command->launch.buffer_count || launch->scalar_size != command->launch.scalar_size) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT,
                    "command_list_update_launch: another kernel, buffer count or scalar block size");
    }
    for (uint32_t i = 0; i < launch->buffer_count; i++) {
        if (launch->buffers[i].size != command->buffers[i].size) {
            return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "command_list_update_launch: a view of another size");
        }
    }
    /* The host calls this only when no submission is pending, and the zoo's streams complete
     * each submission before returning, so the command is rewritten in place. */
    ZooCommand updated;
    memset(&updated, 0, sizeof updated);
    XhalStatus status = zoo_keep_launch(&updated, launch, "command_list_update_launch", error);
    if (status == XHAL_STATUS_OK) {
        *command = updated;
        command->launch.buffers = command->buffers;
        command->launch.scalars = command->scalars;
    }
    return status;
}

ZOO_SOME_VARIANTS static XhalStatus zoo_stream_submit_command_list(struct XhalStream *stream,
                                                                   struct XhalCommandList *list, XhalErrorOut error) {
    if (stream == NULL || list == NULL || !list->finished) {
        return fail(error, XHAL_STATUS_INVALID_ARGUMENT, "stream_submit_command_list: null stream or unfinished list");
    }
    atomic_fetch_add(&list_submissions, 1);
    /* Each command runs through the stream entry it was appended for, in order. */
    for (size_t i = 0; i < list->count; i++) {
        const ZooCommand *command = &list->commands[i];
        XhalStatus status = XHAL_STATUS_OK;
        switch (command->kind) {
        case ZOO_COPY:
            status = zoo_stream_copy(stream, command->source, command->source_offset, command->destination,
                                     command->destination_offset, command->size, error);
            break;
        case ZOO_FILL:
            status = zoo_stream_fill(stream, command->destination, command->destination_offset, command->size,
                                     command->pattern, command->pattern_size, error);
            break;
        case ZOO_LAUNCH:
            status = zoo_stream_launch(stream, &command->launch, error);
            break;
        }
        if (status != XHAL_STATUS_OK) {
            return status;
        }
    }
    return XHAL_STATUS_OK;
}

ZOO_SOME_VARIANTS static void zoo_command_list_destroy(struct XhalCommandList *list) { free(list); }

/* ---- the table -------------------------------------------------------------------------- */

/* A table as a later minor would lay it out: this header's table, then entries it lacks. */
typedef struct FutureTable {
    XhalPluginApi known;
    void (*future_entries[3])(void);
} FutureTable;

static const char PLUGIN_NAME[] = "zoo_evolution";
static const char PLUGIN_VERSION[] = "1.0.0";

static FutureTable table;
static const XhalPluginApi *published;
static pthread_once_t build_once = PTHREAD_ONCE_INIT;

static void fill_v1_0_entries(XhalPluginApi *api) {
    api->plugin_name.ptr = (const uint8_t *)PLUGIN_NAME;
    api->plugin_name.len = sizeof PLUGIN_NAME - 1;
    api->plugin_version.ptr = (const uint8_t *)PLUGIN_VERSION;
    api->plugin_version.len = sizeof PLUGIN_VERSION - 1;
    api->error_free = zoo_error_free;
    api->device_count = zoo_device_count;
    api->device_get_info = zoo_device_get_info;
    api->device_open = zoo_device_open;
    api->device_close = zoo_device_close;
    api->buffer_allocate = zoo_buffer_allocate;
    api->buffer_free = zoo_buffer_free;
    api->stream_create = zoo_stream_create;
    api->stream_destroy = zoo_stream_destroy;
    api->stream_write = zoo_stream_write;
    api->stream_read = zoo_stream_read;
    api->stream_copy = zoo_stream_copy;
    api->stream_fill = zoo_stream_fill;
    api->stream_launch = zoo_stream_launch;
    api->stream_record_event = zoo_stream_record_event;
    api->stream_wait_event = zoo_stream_wait_event;
    api->stream_synchronize = zoo_stream_synchronize;
    api->stream_query = zoo_stream_query;
    api->event_create = zoo_event_create;
    api->event_destroy = zoo_event_destroy;
    api->event_query = zoo_event_query;
    api->event_synchronize = zoo_event_synchronize;
    api->event_elapsed_time = zoo_event_elapsed_time;
    api->module_load = zoo_module_load;
    api->module_destroy = zoo_module_destroy;
    api->kernel_get = zoo_kernel_get;
    api->kernel_destroy = zoo_kernel_destroy;
}

/* Copies the first `size` bytes of `source` so that they end exactly where a page that can be
 * neither read nor written begins: any read past `size` ends the process with SIGSEGV. */
ZOO_SOME_VARIANTS static const XhalPluginApi *place_before_unreadable_page(const void *source, size_t size) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t span = (size + page - 1) / page * page;
    uint8_t *region = mmap(NULL, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) {
        return NULL;
    }
    if (mprotect(region + span, page, PROT_NONE) != 0) {
        return NULL;
    }
    uint8_t *start = region + span - size;
    memcpy(start, source, size);
    return (const XhalPluginApi *)start;
}

static void build_table(void) {
    XhalPluginApi *api = &table.known;
    fill_v1_0_entries(api);
    api->abi_major = XHAL_ABI_MAJOR;
    api->abi_minor = XHAL_ABI_MINOR;
    api->struct_size = XHAL_PLUGIN_API_V1_0_SIZE;
    published = api;
#if defined(ZOO_VARIANT_NEWER_MINOR)
    api->abi_minor = XHAL_ABI_MINOR + 1;
    api->device_memory_usage = zoo_device_memory_usage;
    api->device_clock = zoo_device_clock;
    api->event_timestamp = zoo_event_timestamp;
    api->command_list_create = zoo_command_list_create;
    api->command_list_append_copy = zoo_command_list_append_copy;
    api->command_list_append_fill = zoo_command_list_append_fill;
    api->command_list_append_launch = zoo_command_list_append_launch;
    api->command_list_finish = zoo_command_list_finish;
    api->command_list_update_launch = zoo_command_list_update_launch;
    api->stream_submit_command_list = zoo_stream_submit_command_list;
    api->command_list_destroy = zoo_command_list_destroy;
    api->device_stream_priorities = zoo_device_stream_priorities;
    api->stream_create_with_priority = zoo_stream_create_with_priority;
    table.future_entries[0] = trap_future_entry_0;
    table.future_entries[1] = trap_future_entry_1;
    table.future_entries[2] = trap_future_entry_2;
    api->struct_size = sizeof(FutureTable);
#elif defined(ZOO_VARIANT_V1_0_TABLE_AT_PAGE_END)
    api->abi_minor = 0;
    published = place_before_unreadable_page(api, XHAL_PLUGIN_API_V1_0_SIZE);
#elif defined(ZOO_VARIANT_TRUNCATED_TRAPPED)
    api->abi_minor = 0;
    api->struct_size = offsetof(XhalPluginApi, kernel_get);
    api->kernel_get = trap_kernel_get;
    api->kernel_destroy = trap_kernel_destroy;
#elif defined(ZOO_VARIANT_TRUNCATED_AT_PAGE_END)
    api->abi_minor = 0;
    api->struct_size = offsetof(XhalPluginApi, kernel_get);
    published = place_before_unreadable_page(api, offsetof(XhalPluginApi, kernel_get));
#elif defined(ZOO_VARIANT_MAJOR_ABOVE)
    api->abi_major = XHAL_ABI_MAJOR + 1;
    api->abi_minor = 3;
    api->struct_size = offsetof(XhalPluginApi, plugin_name);
    published = place_before_unreadable_page(api, offsetof(XhalPluginApi, plugin_name));
#elif defined(ZOO_VARIANT_MAJOR_BELOW)
    api->abi_major = XHAL_ABI_MAJOR - 1;
    api->abi_minor = 9;
#else
#error "define one ZOO_VARIANT_*"
#endif
}

const XhalPluginApi *xhal_plugin_query(uint32_t host_abi_major, uint32_t host_abi_minor) {
    /* Every variant answers whatever the host's major: the host's own check is under test. */
    host_abi_major_seen = host_abi_major;
    host_abi_minor_seen = host_abi_minor;
    pthread_once(&build_once, build_table);
    return published;
}
