/*
 * check_c_plugin: tests what xhal-cts cannot reach in the C plugin. The suite's kernels are
 * WGSL, and this plugin takes only its own kernel format, so the suite skips every kernel test
 * and every stream and event test that needs a kernel to keep a stream busy. This program loads
 * the plugin as the host does (dlopen, xhal_plugin_query) and checks its kernels, in-order
 * streams, cross-stream waits, event timing, sticky execution errors, and the refusal of each
 * kind of misuse with a message that names it.
 *
 * Usage: check_c_plugin PATH/libxhal_c-plugin.so    (exit status 0 when every check holds)
 */
#define _POSIX_C_SOURCE 200809L

#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xhal.h"

#define C_PLUGIN_KERNEL_FORMAT (XHAL_KERNEL_FORMAT_VENDOR_BASE + 0xC01u)

static XhalPluginQueryFn query;
static const XhalPluginApi *api;
static int failures;
static int checks;

static void check(bool condition, const char *what) {
    checks++;
    if (!condition) {
        failures++;
        printf("FAIL: %s\n", what);
    }
}

/* Calls that must succeed: a failure prints the plugin's message and counts. */
static void expect_ok(XhalStatus status, XhalError *error, const char *what) {
    checks++;
    if (status != XHAL_STATUS_OK) {
        failures++;
        printf("FAIL: %s: status %u: %.*s\n", what, status, error != NULL ? (int)error->message.len : 0,
               error != NULL ? (const char *)error->message.ptr : "");
    }
    api->error_free(error);
}

/* Calls that must be refused with `expected`, with a message containing `needle`. */
static void expect_error(XhalStatus status, XhalError *error, XhalStatus expected, const char *needle,
                         const char *what) {
    checks++;
    char message[1024] = "";
    if (error != NULL) {
        size_t length = error->message.len < sizeof message - 1 ? error->message.len : sizeof message - 1;
        memcpy(message, error->message.ptr, length);
        message[length] = '\0';
    }
    if (status != expected) {
        failures++;
        printf("FAIL: %s: status %u, expected %u (%s)\n", what, status, expected, message);
    } else if (error == NULL) {
        failures++;
        printf("FAIL: %s: status %u without an error object\n", what, status);
    } else if (error->code != status) {
        failures++;
        printf("FAIL: %s: the error's code %u differs from the status %u\n", what, error->code, status);
    } else if (strstr(message, needle) == NULL) {
        failures++;
        printf("FAIL: %s: the message does not mention `%s`: %s\n", what, needle, message);
    }
    api->error_free(error);
}

#define OK(call, what)                                                                                                \
    do {                                                                                                              \
        XhalError *error_ = NULL;                                                                                     \
        XhalStatus status_ = (call);                                                                                  \
        expect_ok(status_, error_, what);                                                                             \
    } while (0)

/* `call` must use `&error_` as its error argument. */
#define REFUSED(call, expected, needle, what)                                                                         \
    do {                                                                                                              \
        XhalError *error_ = NULL;                                                                                     \
        XhalStatus status_ = (call);                                                                                  \
        expect_error(status_, error_, expected, needle, what);                                                        \
    } while (0)

static XhalBuffer *allocate(XhalDevice *device, uint64_t size) {
    XhalBuffer *buffer = NULL;
    OK(api->buffer_allocate(device, size, &buffer, &error_), "buffer_allocate");
    return buffer;
}

static XhalStream *create_stream(XhalDevice *device) {
    XhalStream *stream = NULL;
    OK(api->stream_create(device, &stream, &error_), "stream_create");
    return stream;
}

static XhalEvent *create_event(XhalDevice *device, uint32_t flags) {
    XhalEvent *event = NULL;
    OK(api->event_create(device, flags, &event, &error_), "event_create");
    return event;
}

static XhalKernel *kernel_named(XhalModule *module, const char *name) {
    XhalKernel *kernel = NULL;
    XhalStr text = {(const uint8_t *)name, strlen(name)};
    OK(api->kernel_get(module, text, &kernel, &error_), name);
    return kernel;
}

static XhalLaunchInfo launch_info(XhalKernel *kernel, uint32_t workgroups, const XhalBufferArg *buffers,
                                  uint32_t buffer_count, const void *scalars, size_t scalar_size) {
    XhalLaunchInfo launch;
    memset(&launch, 0, sizeof launch);
    launch.struct_size = XHAL_LAUNCH_INFO_V1_0_SIZE;
    launch.kernel = kernel;
    launch.workgroups[0] = workgroups;
    launch.workgroups[1] = 1;
    launch.workgroups[2] = 1;
    launch.buffers = buffers;
    launch.buffer_count = buffer_count;
    launch.scalars = scalars;
    launch.scalar_size = scalar_size;
    return launch;
}

static void sleep_on(XhalStream *stream, XhalKernel *sleep_us, uint32_t microseconds) {
    XhalLaunchInfo launch = launch_info(sleep_us, 1, NULL, 0, &microseconds, sizeof microseconds);
    OK(api->stream_launch(stream, &launch, &error_), "launch sleep_us");
}

static void check_table(void) {
    check(api->struct_size >= XHAL_PLUGIN_API_V1_0_SIZE, "the table reaches the v1.0 size");
    check(api->abi_major == XHAL_ABI_MAJOR, "the table is of major 1");
    check(api->plugin_name.len == strlen("c-plugin") && memcmp(api->plugin_name.ptr, "c-plugin", 8) == 0,
          "the plugin calls itself c-plugin, as its file name libxhal_c-plugin.so says");
    check(query(2, 0) == NULL && query(0, 0) == NULL, "other majors are declined");
    check(query(1, 999) == api, "a newer minor gets the same table");
    api->error_free(NULL);
    api->device_close(NULL);
    api->buffer_free(NULL);
    api->stream_destroy(NULL);
    api->event_destroy(NULL);
    api->module_destroy(NULL);
    api->kernel_destroy(NULL);
}

static void check_devices(void) {
    uint32_t count = 0;
    OK(api->device_count(&count, &error_), "device_count");
    check(count == 1, "the plugin has one device");
    REFUSED(api->device_count(NULL, &error_), XHAL_STATUS_INVALID_ARGUMENT, "count must not be null",
            "device_count(NULL)");

    unsigned char storage[sizeof(XhalDeviceInfo) + 32];
    memset(storage, 0xA5, sizeof storage);
    XhalDeviceInfo *info = (XhalDeviceInfo *)(void *)storage;
    info->struct_size = XHAL_DEVICE_INFO_V1_0_SIZE;
    OK(api->device_get_info(0, info, &error_), "device_get_info(0)");
    bool guard_intact = true;
    for (size_t at = XHAL_DEVICE_INFO_V1_0_SIZE; at < sizeof storage; at++) {
        guard_intact = guard_intact && storage[at] == 0xA5;
    }
    check(guard_intact, "device_get_info writes nothing past the v1.0 size it was given");
    check(info->kernel_format_count == 1 && info->kernel_formats[0] == C_PLUGIN_KERNEL_FORMAT,
          "the device takes exactly the plugin's own kernel format");
    check((info->features & XHAL_FEATURE_TIMESTAMPS) != 0, "the device claims timestamps");

    XhalDeviceInfo small;
    memset(&small, 0, sizeof small);
    small.struct_size = 8;
    REFUSED(api->device_get_info(0, &small, &error_), XHAL_STATUS_INVALID_ARGUMENT, "struct_size is 8",
            "device_get_info with a struct_size below v1.0");
    REFUSED(api->device_get_info(1, info, &error_), XHAL_STATUS_NOT_FOUND, "no device 1", "device_get_info(1)");
    XhalDevice *device = NULL;
    REFUSED(api->device_open(1, &device, &error_), XHAL_STATUS_NOT_FOUND, "no device 1", "device_open(1)");
    /* A failing call with a null error pointer reports the status and allocates nothing (a
     * leak here would show under the sanitizer build). */
    check(api->device_get_info(1, info, NULL) == XHAL_STATUS_NOT_FOUND, "a null error pointer still gets the status");
}

static void check_memory(XhalDevice *device, XhalStream *stream) {
    XhalBuffer *buffer = NULL;
    REFUSED(api->buffer_allocate(device, 0, &buffer, &error_), XHAL_STATUS_INVALID_ARGUMENT, "size is 0",
            "a 0-byte allocation");
    REFUSED(api->buffer_allocate(device, (256ull << 20) + 1, &buffer, &error_), XHAL_STATUS_OUT_OF_MEMORY,
            "largest allocation", "an allocation past the largest allocation");
    /* The device's 512 MiB budget: two of the largest allocations fill it, a third byte does not fit. */
    XhalBuffer *first = allocate(device, 256ull << 20);
    XhalBuffer *second = allocate(device, 256ull << 20);
    REFUSED(api->buffer_allocate(device, 1, &buffer, &error_), XHAL_STATUS_OUT_OF_MEMORY, "0 of the device's",
            "an allocation with the budget used up");
    api->buffer_free(first);
    api->buffer_free(second);
    buffer = allocate(device, 64);
    api->buffer_free(buffer);

    XhalBuffer *bytes = allocate(device, 16);
    uint8_t source[16];
    for (int i = 0; i < 16; i++) {
        source[i] = (uint8_t)i;
    }
    uint8_t back[16] = {0};
    OK(api->stream_write(stream, bytes, 0, source, 16, &error_), "stream_write");
    /* Overlapping copy within one buffer: bytes 0..12 move to 4..16, as if through a copy aside. */
    OK(api->stream_copy(stream, bytes, 0, bytes, 4, 12, &error_), "overlapping stream_copy");
    const uint8_t pattern[2] = {0xAB, 0xCD};
    OK(api->stream_fill(stream, bytes, 0, 4, pattern, 2, &error_), "stream_fill");
    OK(api->stream_read(stream, bytes, 0, back, 16, &error_), "stream_read");
    OK(api->stream_synchronize(stream, &error_), "stream_synchronize");
    const uint8_t expected[16] = {0xAB, 0xCD, 0xAB, 0xCD, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    check(memcmp(back, expected, 16) == 0, "write, overlapping copy, fill and read give the expected bytes");

    REFUSED(api->stream_write(stream, bytes, 8, source, 9, &error_), XHAL_STATUS_OUT_OF_BOUNDS,
            "reaches past the end of the 16-byte buffer", "a write past the end");
    REFUSED(api->stream_read(stream, bytes, UINT64_MAX, back, 2, &error_), XHAL_STATUS_OUT_OF_BOUNDS,
            "reaches past the end", "a read whose offset + size overflows");
    REFUSED(api->stream_read(stream, bytes, 0, NULL, 2, &error_), XHAL_STATUS_INVALID_ARGUMENT, "destination is null",
            "a read into null");
    REFUSED(api->stream_copy(stream, bytes, 10, bytes, 0, 8, &error_), XHAL_STATUS_OUT_OF_BOUNDS, "source range",
            "a copy from past the end");
    REFUSED(api->stream_fill(stream, bytes, 0, 6, pattern, 3, &error_), XHAL_STATUS_INVALID_ARGUMENT,
            "must be 1, 2 or 4", "a 3-byte fill pattern");
    REFUSED(api->stream_fill(stream, bytes, 1, 4, pattern, 2, &error_), XHAL_STATUS_INVALID_ARGUMENT,
            "multiples of the 2-byte pattern", "a misaligned fill");
    REFUSED(api->stream_write(stream, (XhalBuffer *)(void *)stream, 0, source, 1, &error_),
            XHAL_STATUS_INVALID_HANDLE, "is not a buffer", "a stream passed as a buffer");
    /* The refusals enqueued nothing and left the stream healthy. */
    OK(api->stream_read(stream, bytes, 0, back, 16, &error_), "stream_read after refusals");
    OK(api->stream_synchronize(stream, &error_), "stream_synchronize after refusals");
    check(memcmp(back, expected, 16) == 0, "refused calls changed nothing");
    api->buffer_free(bytes);
}

static XhalModule *check_modules(XhalDevice *device) {
    XhalModule *module = NULL;
    const char *valid = "# every kernel of the plugin\nfill_u32\n  add_u32  # with a comment\n\nsaxpy_f32\r\nsleep_us\nfault";
    REFUSED(api->module_load(device, XHAL_KERNEL_FORMAT_WGSL, (const uint8_t *)valid, strlen(valid), &module, &error_),
            XHAL_STATUS_UNSUPPORTED, "takes only its own format", "a WGSL module");
    const char *unknown = "fill_u32\nmatmul_f32\n";
    REFUSED(api->module_load(device, C_PLUGIN_KERNEL_FORMAT, (const uint8_t *)unknown, strlen(unknown), &module,
                             &error_),
            XHAL_STATUS_INVALID_ARGUMENT, "line 2: no kernel named `matmul_f32`", "a module naming an unknown kernel");
    const char *twice = "add_u32\nadd_u32\n";
    REFUSED(api->module_load(device, C_PLUGIN_KERNEL_FORMAT, (const uint8_t *)twice, strlen(twice), &module, &error_),
            XHAL_STATUS_INVALID_ARGUMENT, "named twice", "a module naming a kernel twice");
    const char *empty = "# nothing\n\n";
    REFUSED(api->module_load(device, C_PLUGIN_KERNEL_FORMAT, (const uint8_t *)empty, strlen(empty), &module, &error_),
            XHAL_STATUS_INVALID_ARGUMENT, "names no kernel", "a module of comments only");
    REFUSED(api->module_load(device, C_PLUGIN_KERNEL_FORMAT, NULL, 0, &module, &error_), XHAL_STATUS_INVALID_ARGUMENT,
            "names no kernel", "an empty module");
    const char *binary = "fill\xff_u32\n";
    REFUSED(api->module_load(device, C_PLUGIN_KERNEL_FORMAT, (const uint8_t *)binary, strlen(binary), &module,
                             &error_),
            XHAL_STATUS_INVALID_ARGUMENT, "0xff at column 5", "a module with a byte outside kernel names");
    OK(api->module_load(device, C_PLUGIN_KERNEL_FORMAT, (const uint8_t *)valid, strlen(valid), &module, &error_),
       "module_load");
    XhalKernel *kernel = NULL;
    XhalStr missing = {(const uint8_t *)"saxpy", 5};
    REFUSED(api->kernel_get(module, missing, &kernel, &error_), XHAL_STATUS_NOT_FOUND, "no kernel named `saxpy`",
            "kernel_get of a name the module lacks");
    XhalStr empty_name = {NULL, 0};
    REFUSED(api->kernel_get(module, empty_name, &kernel, &error_), XHAL_STATUS_NOT_FOUND, "the name is empty",
            "kernel_get of an empty name");
    XhalStr null_name = {NULL, 3};
    REFUSED(api->kernel_get(module, null_name, &kernel, &error_), XHAL_STATUS_INVALID_ARGUMENT,
            "name.ptr is null with length 3", "kernel_get of a null name with a length");
    XhalModule *only_fill = NULL;
    const char *fill_only = "fill_u32\n";
    OK(api->module_load(device, C_PLUGIN_KERNEL_FORMAT, (const uint8_t *)fill_only, strlen(fill_only), &only_fill,
                        &error_),
       "module_load of one kernel");
    XhalStr add = {(const uint8_t *)"add_u32", 7};
    REFUSED(api->kernel_get(only_fill, add, &kernel, &error_), XHAL_STATUS_NOT_FOUND, "add_u32",
            "kernel_get of a kernel the plugin has but the module does not name");
    api->module_destroy(only_fill);
    return module;
}

static void check_kernels(XhalDevice *device, XhalStream *stream, XhalModule *module) {
    XhalKernel *fill = kernel_named(module, "fill_u32");
    XhalKernel *add = kernel_named(module, "add_u32");
    XhalKernel *saxpy = kernel_named(module, "saxpy_f32");
    XhalKernel *sleep_us = kernel_named(module, "sleep_us");
    enum { COUNT = 100 };
    XhalBuffer *a = allocate(device, 4 * COUNT);
    XhalBuffer *b = allocate(device, 4 * COUNT + 16);
    XhalBuffer *out = allocate(device, 4 * COUNT);
    uint32_t value = 7;
    XhalBufferArg fill_a = {a, 0, 4 * COUNT};
    XhalLaunchInfo launch = launch_info(fill, 2, &fill_a, 1, &value, 4);
    OK(api->stream_launch(stream, &launch, &error_), "launch fill_u32");
    uint32_t counting[COUNT + 4];
    for (uint32_t i = 0; i < COUNT + 4; i++) {
        counting[i] = i;
    }
    OK(api->stream_write(stream, b, 0, (const uint8_t *)counting, sizeof counting, &error_), "write b");
    /* b is read through a view that starts 16 bytes (4 elements) in. */
    XhalBufferArg add_arguments[3] = {{a, 0, 4 * COUNT}, {b, 16, 4 * COUNT}, {out, 0, 4 * COUNT}};
    launch = launch_info(add, 2, add_arguments, 3, NULL, 0);
    OK(api->stream_launch(stream, &launch, &error_), "launch add_u32");
    uint32_t sums[COUNT];
    OK(api->stream_read(stream, out, 0, (uint8_t *)sums, sizeof sums, &error_), "read sums");
    OK(api->stream_synchronize(stream, &error_), "synchronize after add_u32");
    bool sums_right = true;
    for (uint32_t i = 0; i < COUNT; i++) {
        sums_right = sums_right && sums[i] == 7 + i + 4;
    }
    check(sums_right, "fill_u32 then add_u32 through an offset view compute a[i] + b[i + 4]");

    /* Only the invocations of one workgroup (64) run: elements past them stay as they were. */
    float x[COUNT];
    float y[COUNT];
    for (int i = 0; i < COUNT; i++) {
        x[i] = (float)i;
        y[i] = 1.0f;
    }
    XhalBuffer *xs = allocate(device, sizeof x);
    XhalBuffer *ys = allocate(device, sizeof y);
    OK(api->stream_write(stream, xs, 0, (const uint8_t *)x, sizeof x, &error_), "write x");
    OK(api->stream_write(stream, ys, 0, (const uint8_t *)y, sizeof y, &error_), "write y");
    float factor = 2.0f;
    XhalBufferArg saxpy_arguments[2] = {{xs, 0, sizeof x}, {ys, 0, sizeof y}};
    launch = launch_info(saxpy, 1, saxpy_arguments, 2, &factor, 4);
    OK(api->stream_launch(stream, &launch, &error_), "launch saxpy_f32");
    float result[COUNT];
    OK(api->stream_read(stream, ys, 0, (uint8_t *)result, sizeof result, &error_), "read y");
    OK(api->stream_synchronize(stream, &error_), "synchronize after saxpy_f32");
    bool saxpy_right = true;
    for (int i = 0; i < COUNT; i++) {
        saxpy_right = saxpy_right && result[i] == (i < 64 ? 2.0f * (float)i + 1.0f : 1.0f);
    }
    check(saxpy_right, "saxpy_f32 over one workgroup computes 2 x + y for the first 64 elements only");

    launch = launch_info(add, 2, add_arguments, 2, NULL, 0);
    REFUSED(api->stream_launch(stream, &launch, &error_), XHAL_STATUS_INVALID_ARGUMENT, "takes 3 buffer(s), got 2",
            "add_u32 with two buffers");
    launch = launch_info(fill, 2, &fill_a, 1, &value, 2);
    REFUSED(api->stream_launch(stream, &launch, &error_), XHAL_STATUS_INVALID_ARGUMENT,
            "takes a 4-byte scalar block, got 2", "fill_u32 with a 2-byte scalar block");
    launch = launch_info(fill, 2, &fill_a, 1, &value, 4);
    launch.workgroups[1] = 2;
    REFUSED(api->stream_launch(stream, &launch, &error_), XHAL_STATUS_INVALID_ARGUMENT, "one-dimensional",
            "fill_u32 over a 2D grid");
    launch.workgroups[1] = 1;
    launch.workgroups[0] = 0;
    REFUSED(api->stream_launch(stream, &launch, &error_), XHAL_STATUS_INVALID_ARGUMENT, "workgroup count 0 in x",
            "a launch of 0 workgroups");
    XhalBufferArg short_input[3] = {{a, 0, 8}, {b, 0, 16}, {out, 0, 16}};
    launch = launch_info(add, 1, short_input, 3, NULL, 0);
    REFUSED(api->stream_launch(stream, &launch, &error_), XHAL_STATUS_OUT_OF_BOUNDS, "shorter than the 16-byte output",
            "add_u32 with an input shorter than its output");
    XhalBufferArg misaligned = {a, 2, 8};
    launch = launch_info(fill, 1, &misaligned, 1, &value, 4);
    REFUSED(api->stream_launch(stream, &launch, &error_), XHAL_STATUS_INVALID_ARGUMENT,
            "not a multiple of the 4-byte buffer offset alignment", "a view at offset 2");
    XhalBufferArg outside = {a, 4 * COUNT - 4, 8};
    launch = launch_info(fill, 1, &outside, 1, &value, 4);
    REFUSED(api->stream_launch(stream, &launch, &error_), XHAL_STATUS_OUT_OF_BOUNDS, "view of buffer argument 0",
            "a view past the end of its buffer");
    uint32_t too_long = 2000000;
    launch = launch_info(sleep_us, 1, NULL, 0, &too_long, 4);
    REFUSED(api->stream_launch(stream, &launch, &error_), XHAL_STATUS_INVALID_ARGUMENT, "at most 1000000 microseconds",
            "a two-second sleep");
    launch = launch_info(fill, 1, &fill_a, 1, &value, 4);
    launch.struct_size = 16;
    REFUSED(api->stream_launch(stream, &launch, &error_), XHAL_STATUS_INVALID_ARGUMENT, "struct_size is 16",
            "a launch struct below the v1.0 size");

    api->kernel_destroy(fill);
    api->kernel_destroy(add);
    api->kernel_destroy(saxpy);
    api->kernel_destroy(sleep_us);
    api->buffer_free(a);
    api->buffer_free(b);
    api->buffer_free(out);
    api->buffer_free(xs);
    api->buffer_free(ys);
}

static void check_events(XhalDevice *device, XhalModule *module) {
    XhalKernel *fill = kernel_named(module, "fill_u32");
    XhalKernel *sleep_us = kernel_named(module, "sleep_us");
    XhalStream *producer = create_stream(device);
    XhalStream *consumer = create_stream(device);
    XhalEvent *ready = create_event(device, 0);
    XhalBuffer *shared = allocate(device, 256);

    check(api->event_query(ready, NULL) == XHAL_STATUS_OK, "a never-recorded event is complete");
    OK(api->stream_wait_event(consumer, ready, &error_), "waiting on a never-recorded event is a no-op");

    /* The producer is busy for 100 ms, then fills; the consumer waits on the event and reads.
     * Without the wait the read would run at once and see the 0xFF bytes written first. */
    uint8_t ones[256];
    memset(ones, 0xFF, sizeof ones);
    OK(api->stream_write(consumer, shared, 0, ones, sizeof ones, &error_), "write 0xFF");
    OK(api->stream_synchronize(consumer, &error_), "synchronize consumer");
    sleep_on(producer, sleep_us, 100000);
    uint32_t value = 42;
    XhalBufferArg whole = {shared, 0, 256};
    XhalLaunchInfo launch = launch_info(fill, 1, &whole, 1, &value, 4);
    OK(api->stream_launch(producer, &launch, &error_), "launch fill_u32 on the producer");
    OK(api->stream_record_event(producer, ready, &error_), "record on the producer");
    check(api->event_query(ready, NULL) == XHAL_STATUS_NOT_READY, "the record is pending while the producer sleeps");
    check(api->stream_query(producer, NULL) == XHAL_STATUS_NOT_READY, "the producer is busy while it sleeps");
    OK(api->stream_wait_event(consumer, ready, &error_), "consumer waits on the record");
    uint32_t seen[64];
    OK(api->stream_read(consumer, shared, 0, (uint8_t *)seen, sizeof seen, &error_), "consumer reads");
    OK(api->stream_synchronize(consumer, &error_), "synchronize consumer after the wait");
    bool ordered = true;
    for (int i = 0; i < 64; i++) {
        ordered = ordered && seen[i] == 42;
    }
    check(ordered, "the consumer's read ran after the producer's fill it waited for");
    check(api->event_query(ready, NULL) == XHAL_STATUS_OK, "the record completed");
    /* The worker publishes the record before it marks itself idle: the stream reports idle
     * right after, without being synchronized. */
    XhalStatus producer_state = api->stream_query(producer, NULL);
    for (int tries = 0; producer_state == XHAL_STATUS_NOT_READY && tries < 1000; tries++) {
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
        producer_state = api->stream_query(producer, NULL);
    }
    check(producer_state == XHAL_STATUS_OK, "the producer becomes idle once its last record completed");
    OK(api->event_synchronize(ready, &error_), "event_synchronize on a completed record");

    /* Timing: two records around a 20 ms sleep are 20 ms or more apart. */
    XhalEvent *start = create_event(device, XHAL_EVENT_FLAG_TIMING);
    XhalEvent *end = create_event(device, XHAL_EVENT_FLAG_TIMING);
    uint64_t nanoseconds = 0;
    REFUSED(api->event_elapsed_time(start, end, &nanoseconds, &error_), XHAL_STATUS_INVALID_ARGUMENT, "never recorded",
            "elapsed time of never-recorded events");
    OK(api->stream_record_event(producer, start, &error_), "record start");
    sleep_on(producer, sleep_us, 20000);
    OK(api->stream_record_event(producer, end, &error_), "record end");
    REFUSED(api->event_elapsed_time(start, end, &nanoseconds, &error_), XHAL_STATUS_INVALID_ARGUMENT,
            "has not completed yet", "elapsed time while the end record is pending");
    OK(api->event_synchronize(end, &error_), "event_synchronize end");
    OK(api->event_elapsed_time(start, end, &nanoseconds, &error_), "event_elapsed_time");
    check(nanoseconds >= 20000000ull && nanoseconds < 2000000000ull, "a 20 ms sleep measures 20 ms to 2 s");
    REFUSED(api->event_elapsed_time(end, start, &nanoseconds, &error_), XHAL_STATUS_INVALID_ARGUMENT,
            "before the start event", "elapsed time with start and end swapped");
    REFUSED(api->event_elapsed_time(ready, end, &nanoseconds, &error_), XHAL_STATUS_INVALID_ARGUMENT,
            "without XHAL_EVENT_FLAG_TIMING", "elapsed time from an event without timing");
    XhalEvent *unused = NULL;
    REFUSED(api->event_create(device, 6, &unused, &error_), XHAL_STATUS_INVALID_ARGUMENT, "unknown flag bits 0x6",
            "an event with unknown flags");

    /* A wait holds on to the record that is current when it is enqueued: the consumer's own
     * record completes only after the producer's new record. */
    sleep_on(producer, sleep_us, 50000);
    OK(api->stream_record_event(producer, ready, &error_), "record again");
    OK(api->stream_wait_event(consumer, ready, &error_), "wait on the new record");
    OK(api->stream_record_event(consumer, end, &error_), "record end on the consumer");
    check(api->event_query(end, NULL) == XHAL_STATUS_NOT_READY, "the consumer's record waits for the producer");
    OK(api->stream_synchronize(consumer, &error_), "synchronize consumer");
    check(api->event_query(ready, NULL) == XHAL_STATUS_OK, "the consumer returned only after the producer's record");

    /* Destroying a stream waits for its work: the read below lands before destroy returns. */
    uint32_t late[4] = {0, 0, 0, 0};
    sleep_on(producer, sleep_us, 30000);
    OK(api->stream_read(producer, shared, 0, (uint8_t *)late, sizeof late, &error_), "read queued behind a sleep");
    api->stream_destroy(producer);
    check(late[0] == 42 && late[3] == 42, "stream_destroy returned after the queued read ran");

    api->stream_destroy(consumer);
    api->event_destroy(ready);
    api->event_destroy(start);
    api->event_destroy(end);
    api->buffer_free(shared);
    api->kernel_destroy(fill);
    api->kernel_destroy(sleep_us);
}

static void check_sticky_errors(XhalDevice *device, XhalModule *module) {
    XhalKernel *fault = kernel_named(module, "fault");
    XhalKernel *sleep_us = kernel_named(module, "sleep_us");
    XhalStream *failing = create_stream(device);
    XhalStream *dependent = create_stream(device);
    XhalEvent *after_fault = create_event(device, XHAL_EVENT_FLAG_TIMING);
    XhalBuffer *buffer = allocate(device, 16);
    uint8_t bytes[16];
    memset(bytes, 0x22, sizeof bytes);
    XhalStream *healthy = create_stream(device);
    OK(api->stream_write(healthy, buffer, 0, bytes, sizeof bytes, &error_), "write 0x22 on a healthy stream");
    OK(api->stream_synchronize(healthy, &error_), "synchronize the healthy stream");
    memset(bytes, 0x11, sizeof bytes);

    sleep_on(failing, sleep_us, 20000);
    XhalLaunchInfo launch = launch_info(fault, 1, NULL, 0, NULL, 0);
    OK(api->stream_launch(failing, &launch, &error_), "launching fault is accepted: it fails when it runs");
    OK(api->stream_write(failing, buffer, 0, bytes, sizeof bytes, &error_), "a write queued behind the fault");
    OK(api->stream_record_event(failing, after_fault, &error_), "a record queued behind the fault");
    OK(api->stream_wait_event(dependent, after_fault, &error_), "another stream waits on that record");
    REFUSED(api->stream_synchronize(failing, &error_), XHAL_STATUS_KERNEL_FAULT, "faults whenever it runs",
            "synchronize after the fault");
    REFUSED(api->stream_synchronize(failing, &error_), XHAL_STATUS_KERNEL_FAULT, "faults whenever it runs",
            "synchronize again: the error sticks");
    REFUSED(api->stream_query(failing, &error_), XHAL_STATUS_KERNEL_FAULT, "fault", "stream_query after the fault");
    REFUSED(api->stream_write(failing, buffer, 0, bytes, sizeof bytes, &error_), XHAL_STATUS_KERNEL_FAULT,
            "the stream failed earlier", "a write on the failed stream");
    REFUSED(api->stream_record_event(failing, after_fault, &error_), XHAL_STATUS_KERNEL_FAULT,
            "the stream failed earlier", "a record on the failed stream");
    REFUSED(api->event_synchronize(after_fault, &error_), XHAL_STATUS_KERNEL_FAULT,
            "the recording stream failed before the record", "event_synchronize on a record behind the fault");
    REFUSED(api->event_query(after_fault, &error_), XHAL_STATUS_KERNEL_FAULT, "failed before the record",
            "event_query on a record behind the fault");
    uint64_t nanoseconds = 0;
    REFUSED(api->event_elapsed_time(after_fault, after_fault, &nanoseconds, &error_), XHAL_STATUS_KERNEL_FAULT,
            "failed before the record", "elapsed time of a record behind the fault");
    REFUSED(api->stream_synchronize(dependent, &error_), XHAL_STATUS_KERNEL_FAULT, "dependency failed",
            "a stream that waited on the failed record");

    uint8_t back[16] = {0};
    OK(api->stream_read(healthy, buffer, 0, back, sizeof back, &error_), "read on a healthy stream");
    OK(api->stream_synchronize(healthy, &error_), "a healthy stream is unaffected");
    check(back[0] == 0x22 && back[15] == 0x22, "the write queued behind the fault never ran");

    api->stream_destroy(healthy);
    api->stream_destroy(failing);
    api->stream_destroy(dependent);
    api->event_destroy(after_fault);
    api->buffer_free(buffer);
    api->kernel_destroy(fault);
    api->kernel_destroy(sleep_us);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s PATH/libxhal_c-plugin.so\n", argv[0]);
        return 2;
    }
    void *library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        fprintf(stderr, "error: cannot load %s: %s\n", argv[1], dlerror());
        return 2;
    }
    void *symbol = dlsym(library, XHAL_PLUGIN_QUERY_SYMBOL);
    if (symbol == NULL) {
        fprintf(stderr, "error: %s does not export %s\n", argv[1], XHAL_PLUGIN_QUERY_SYMBOL);
        return 2;
    }
    /* POSIX guarantees that a function pointer survives the trip through dlsym's void *. */
    memcpy(&query, &symbol, sizeof query);
    api = query(XHAL_ABI_MAJOR, XHAL_ABI_MINOR);
    if (api == NULL) {
        fprintf(stderr, "error: %s declined ABI %d.%d\n", argv[1], XHAL_ABI_MAJOR, XHAL_ABI_MINOR);
        return 2;
    }

    check_table();
    check_devices();
    XhalDevice *device = NULL;
    OK(api->device_open(0, &device, &error_), "device_open(0)");
    XhalStream *stream = create_stream(device);
    check_memory(device, stream);
    XhalModule *module = check_modules(device);
    check_kernels(device, stream, module);
    check_events(device, module);
    check_sticky_errors(device, module);
    api->stream_destroy(stream);
    api->module_destroy(module);
    api->device_close(device);

    printf("check_c_plugin: %d checks, %d failed\n", checks, failures);
    /* The plugin is never unloaded, as the host never unloads one. */
    return failures == 0 ? 0 : 1;
}
