/*
 * The C API from C: every object, the happy paths and the misuse each must refuse with a
 * status and a message. Run by hal/capi/tests/programs.rs; with XHAL_CAPI_DEVICE set it also
 * runs saxpy on that device (scripts name each certified backend this way).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xhal_capi.h"

static int failures = 0;

#define CHECK(call)                                                                          \
    do {                                                                                     \
        xhal_status_t status_ = (call);                                                      \
        if (status_ != XHAL_SUCCESS) {                                                       \
            fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__, #call,         \
                    xhal_status_name(status_), xhal_last_error_message());                   \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

/* `call` must fail with `expected`, and the message must contain `fragment`. */
#define EXPECT_ERROR(call, expected, fragment)                                               \
    do {                                                                                     \
        xhal_status_t status_ = (call);                                                      \
        const char *message_ = xhal_last_error_message();                                    \
        if (status_ != (expected) || strstr(message_, (fragment)) == NULL) {                 \
            fprintf(stderr, "%s:%d: %s gave %s (\"%s\"); expected %s with \"%s\"\n",          \
                    __FILE__, __LINE__, #call, xhal_status_name(status_), message_,          \
                    #expected, (fragment));                                                  \
            failures++;                                                                      \
        }                                                                                    \
    } while (0)

#define EXPECT(condition)                                                                    \
    do {                                                                                     \
        if (!(condition)) {                                                                  \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #condition);         \
            failures++;                                                                      \
        }                                                                                    \
    } while (0)

static const char *SAXPY =
    "override block: u32 = 64;\n"
    "struct Params { a: f32, n: u32 }\n"
    "var<immediate> params: Params;\n"
    "@group(0) @binding(0) var<storage, read> x: array<f32>;\n"
    "@group(0) @binding(2) var<storage, read_write> y: array<f32>;\n"
    "@compute @workgroup_size(block)\n"
    "fn saxpy(@builtin(global_invocation_id) id: vec3<u32>) {\n"
    "    if id.x < params.n { y[id.x] = params.a * x[id.x] + y[id.x]; }\n"
    "}\n";

static const char *SCALE_BY_UNIFORM =
    "struct Scale { factor: f32, count: u32 }\n"
    "@group(0) @binding(0) var<uniform> scale: Scale;\n"
    "@group(0) @binding(1) var<storage, read_write> data: array<f32>;\n"
    "@compute @workgroup_size(32)\n"
    "fn scale_all(@builtin(global_invocation_id) id: vec3<u32>) {\n"
    "    if id.x < scale.count { data[id.x] = data[id.x] * scale.factor; }\n"
    "}\n";

struct saxpy_params {
    float a;
    uint32_t n;
};

/* y = 2x + y on `device` over n elements, checked on the host. */
static void run_saxpy(xhal_device_t *device, uint32_t n) {
    xhal_stream_t *stream = NULL;
    CHECK(xhal_device_default_stream(device, &stream));
    float *x = malloc(n * sizeof(float));
    float *y = malloc(n * sizeof(float));
    for (uint32_t i = 0; i < n; i++) {
        x[i] = (float)i;
        y[i] = 1.0f;
    }
    xhal_buffer_t *bx = NULL, *by = NULL;
    CHECK(xhal_buffer_alloc(device, n * sizeof(float), &bx));
    CHECK(xhal_buffer_alloc(device, n * sizeof(float), &by));
    CHECK(xhal_stream_write(stream, bx, 0, x, n * sizeof(float)));
    CHECK(xhal_stream_write_async(stream, by, 0, y, n * sizeof(float)));

    xhal_override_t block = {"block", 128.0};
    xhal_module_t *module = NULL;
    CHECK(xhal_module_load_wgsl(device, SAXPY, &block, 1, &module));
    xhal_kernel_t *kernel = NULL;
    CHECK(xhal_module_kernel(module, "saxpy", &kernel));
    xhal_kernel_info_t info = {0};
    info.struct_size = sizeof info;
    CHECK(xhal_kernel_get_info(kernel, &info));
    EXPECT(info.workgroup_size[0] == 128 && info.binding_count == 2 && info.scalar_count == 2);
    EXPECT(info.scalar_block_size == sizeof(struct saxpy_params));

    struct saxpy_params params = {2.0f, n};
    xhal_binding_t bindings[2] = {{bx, 0, XHAL_WHOLE_SIZE, NULL}, {by, 0, XHAL_WHOLE_SIZE, NULL}};
    xhal_launch_t launch = {0};
    launch.struct_size = sizeof launch;
    launch.kernel = kernel;
    launch.invocations = n;
    launch.bindings = bindings;
    launch.binding_count = 2;
    launch.scalars = &params;
    launch.scalar_size = sizeof params;
    CHECK(xhal_stream_launch(stream, &launch));
    CHECK(xhal_stream_read(stream, by, 0, y, n * sizeof(float)));
    for (uint32_t i = 0; i < n; i++) {
        if (y[i] != 2.0f * (float)i + 1.0f) {
            fprintf(stderr, "saxpy: y[%u] = %g, expected %g\n", i, y[i], 2.0f * (float)i + 1.0f);
            failures++;
            break;
        }
    }
    CHECK(xhal_kernel_destroy(kernel));
    CHECK(xhal_module_destroy(module));
    CHECK(xhal_buffer_free(bx));
    CHECK(xhal_buffer_free(by));
    free(x);
    free(y);
}

static void test_versions(void) {
    uint32_t major = 0, minor = 99;
    xhal_api_version(&major, &minor);
    EXPECT(major == XHAL_API_MAJOR && minor == XHAL_API_MINOR);
    xhal_runtime_t *runtime = NULL;
    EXPECT_ERROR(xhal_runtime_create(XHAL_API_MAJOR + 1, 0, NULL, &runtime), XHAL_ERROR_UNSUPPORTED,
                 "built for xhal C API 2.0");
    EXPECT_ERROR(xhal_runtime_create(XHAL_API_MAJOR, XHAL_API_MINOR + 1, NULL, &runtime),
                 XHAL_ERROR_UNSUPPORTED, "or later");
    EXPECT(runtime == NULL);
    xhal_runtime_options_t options = {0};
    options.struct_size = 4;
    EXPECT_ERROR(xhal_runtime_create(XHAL_API_MAJOR, XHAL_API_MINOR, &options, &runtime),
                 XHAL_ERROR_INVALID_ARGUMENT, "struct_size is 4");
    options.struct_size = sizeof options;
    options.flags = 0x80;
    EXPECT_ERROR(xhal_runtime_create(XHAL_API_MAJOR, XHAL_API_MINOR, &options, &runtime),
                 XHAL_ERROR_INVALID_ARGUMENT, "bits this library does not know");
    EXPECT(strcmp(xhal_status_name(XHAL_ERROR_SELECTION), "XHAL_ERROR_SELECTION") == 0);
    EXPECT(strcmp(xhal_status_name(12345), "XHAL_ERROR_UNKNOWN") == 0);
}

static xhal_runtime_t *cpu_runtime(void) {
    xhal_runtime_options_t options = {0};
    options.struct_size = sizeof options;
    options.flags = XHAL_RUNTIME_NO_PLUGINS;
    xhal_runtime_t *runtime = NULL;
    CHECK(xhal_runtime_create(XHAL_API_MAJOR, XHAL_API_MINOR, &options, &runtime));
    return runtime;
}

static void test_discovery(xhal_runtime_t *runtime) {
    uint32_t count = 0;
    CHECK(xhal_runtime_device_count(runtime, &count));
    EXPECT(count >= 1);
    xhal_device_info_t info = {0};
    info.struct_size = sizeof info;
    CHECK(xhal_runtime_device_info(runtime, 0, &info));
    EXPECT(strcmp(info.label, "cpu:0") == 0 && info.device_type == XHAL_DEVICE_TYPE_CPU);
    EXPECT(info.total_memory > 0 && info.max_workgroup_invocations > 0);
    EXPECT_ERROR(xhal_runtime_device_info(runtime, count, &info), XHAL_ERROR_NOT_FOUND, "device(s)");
    info.struct_size = 8;
    EXPECT_ERROR(xhal_runtime_device_info(runtime, 0, &info), XHAL_ERROR_INVALID_ARGUMENT,
                 "info.struct_size is 8");
    EXPECT_ERROR(xhal_runtime_device_count(runtime, NULL), XHAL_ERROR_INVALID_ARGUMENT, "count is a null");

    const char *json = NULL;
    CHECK(xhal_runtime_report_json(runtime, &json));
    EXPECT(json != NULL && json[0] == '{');

    uint32_t indices[8], selected = 0;
    CHECK(xhal_runtime_select(runtime, "cpu", indices, 8, &selected));
    EXPECT(selected == 1 && indices[0] == 0);
    CHECK(xhal_runtime_select(runtime, "cuda", indices, 8, &selected));
    EXPECT(selected == 0);
    EXPECT_ERROR(xhal_runtime_select(runtime, "cpu:zero", indices, 8, &selected),
                 XHAL_ERROR_SELECTION, "cpu:zero");
    EXPECT_ERROR(xhal_runtime_select(runtime, "cpu", NULL, 8, &selected), XHAL_ERROR_INVALID_ARGUMENT,
                 "indices is a null pointer");

    xhal_device_t *device = NULL;
    EXPECT_ERROR(xhal_runtime_choose(runtime, "cuda:7", &device), XHAL_ERROR_SELECTION, "cpu:0");
    EXPECT_ERROR(xhal_device_open(runtime, "cpu:3", &device), XHAL_ERROR_NOT_FOUND, "no device 3");
    EXPECT_ERROR(xhal_device_open(runtime, "cpu", &device), XHAL_ERROR_INVALID_ARGUMENT, "not a device label");
    EXPECT(device == NULL);
    CHECK(xhal_runtime_choose(runtime, "cpu", &device));
    const char *why = NULL;
    CHECK(xhal_device_why(device, &why));
    EXPECT(strstr(why, "chose cpu:0") != NULL);
    CHECK(xhal_device_destroy(device));
    EXPECT_ERROR(xhal_device_why(device, &why), XHAL_ERROR_INVALID_HANDLE, "destroyed");
}

/* Pinned host memory: transfers that return at once, at offsets on both sides. */
static void test_pinned(xhal_device_t *device, xhal_stream_t *stream) {
    xhal_pinned_t *pinned = NULL;
    CHECK(xhal_pinned_alloc(device, 4096, &pinned));
    void *pointer = NULL;
    uint64_t size = 0;
    int page_locked = -1;
    CHECK(xhal_pinned_info(pinned, &pointer, &size, &page_locked));
    EXPECT(pointer != NULL && size == 4096 && (page_locked == 0 || page_locked == 1));
    EXPECT(((uintptr_t)pointer % 64) == 0);
    uint8_t *host = (uint8_t *)pointer;
    for (int i = 0; i < 4096; i++) EXPECT(host[i] == 0);
    for (int i = 0; i < 1024; i++) host[i] = (uint8_t)(i * 13 + 1);

    xhal_buffer_t *buffer = NULL;
    CHECK(xhal_buffer_alloc(device, 2048, &buffer));
    CHECK(xhal_stream_write_pinned(stream, buffer, 512, pinned, 0, 1024));
    CHECK(xhal_stream_read_pinned(stream, buffer, 512, pinned, 2048, 1024));
    CHECK(xhal_stream_synchronize(stream));
    EXPECT(memcmp(host, host + 2048, 1024) == 0);

    /* Pointers anywhere inside resolve to the memory and an offset. */
    xhal_pinned_t *found = NULL;
    uint64_t offset = 0;
    CHECK(xhal_resolve_pinned(host + 100, &found, &offset));
    EXPECT(found == pinned && offset == 100);
    uint8_t elsewhere = 0;
    EXPECT_ERROR(xhal_resolve_pinned(&elsewhere, &found, &offset), XHAL_ERROR_NOT_FOUND, "not in live pinned memory");

    EXPECT_ERROR(xhal_stream_write_pinned(stream, buffer, 0, pinned, 4000, 200), XHAL_ERROR_OUT_OF_BOUNDS,
                 "past the end of pinned memory of 4096 bytes");
    EXPECT_ERROR(xhal_stream_read_pinned(stream, buffer, 2000, pinned, 0, 100), XHAL_ERROR_OUT_OF_BOUNDS,
                 "past the end of a buffer of 2048 bytes");
    EXPECT_ERROR(xhal_stream_read_pinned(stream, buffer, 0, (xhal_pinned_t *)buffer, 0, 4), XHAL_ERROR_INVALID_HANDLE,
                 "is a buffer, not a pinned");
    EXPECT_ERROR(xhal_pinned_alloc(device, UINT64_MAX, &found), XHAL_ERROR_OUT_OF_MEMORY, "");

    /* Freed under a queued read: the stream keeps the memory until the read is done. */
    CHECK(xhal_stream_read_pinned(stream, buffer, 0, pinned, 0, 2048));
    CHECK(xhal_pinned_free(pinned));
    EXPECT_ERROR(xhal_pinned_info(pinned, &pointer, NULL, NULL), XHAL_ERROR_INVALID_HANDLE, "destroyed");
    EXPECT_ERROR(xhal_resolve_pinned(host + 100, &found, &offset), XHAL_ERROR_NOT_FOUND, "not in live pinned memory");
    CHECK(xhal_stream_synchronize(stream));
    CHECK(xhal_pinned_free(NULL));
    CHECK(xhal_buffer_free(buffer));
}

static void test_memory(xhal_device_t *device) {
    xhal_stream_t *stream = NULL;
    CHECK(xhal_stream_create(device, &stream));
    xhal_buffer_t *buffer = NULL;
    CHECK(xhal_buffer_alloc(device, 1024, &buffer));
    uint64_t size = 0;
    CHECK(xhal_buffer_size(buffer, &size));
    EXPECT(size == 1024);

    uint8_t bytes[1024], back[1024];
    for (int i = 0; i < 1024; i++) bytes[i] = (uint8_t)(i * 7);
    CHECK(xhal_stream_write(stream, buffer, 0, bytes, sizeof bytes));
    CHECK(xhal_stream_read(stream, buffer, 0, back, sizeof back));
    EXPECT(memcmp(bytes, back, sizeof bytes) == 0);

    /* Copy within the buffer (overlapping), a 4-byte fill, and a read at an offset. */
    CHECK(xhal_stream_copy(stream, buffer, 0, buffer, 16, 64));
    uint32_t pattern = 0xdeadbeef;
    CHECK(xhal_stream_fill(stream, buffer, 512, 256, &pattern, 4));
    uint8_t part[64];
    CHECK(xhal_stream_read(stream, buffer, 16, part, 64));
    EXPECT(memcmp(part, bytes, 64) == 0);
    uint32_t filled[64];
    CHECK(xhal_stream_read(stream, buffer, 512, filled, 256));
    EXPECT(filled[0] == 0xdeadbeef && filled[63] == 0xdeadbeef);

    EXPECT_ERROR(xhal_stream_write(stream, buffer, 1000, bytes, 100), XHAL_ERROR_OUT_OF_BOUNDS,
                 "reach past the end of a buffer of 1024 bytes");
    EXPECT_ERROR(xhal_stream_read(stream, buffer, UINT64_MAX, back, 2), XHAL_ERROR_OUT_OF_BOUNDS, "past the end");
    EXPECT_ERROR(xhal_stream_write(stream, buffer, 0, NULL, 4), XHAL_ERROR_INVALID_ARGUMENT, "null pointer");
    EXPECT_ERROR(xhal_stream_fill(stream, buffer, 2, 8, &pattern, 4), XHAL_ERROR_INVALID_ARGUMENT, "multiples of 4");
    EXPECT_ERROR(xhal_stream_fill(stream, buffer, 0, 8, &pattern, 3), XHAL_ERROR_INVALID_ARGUMENT, "1, 2 or 4");
    EXPECT_ERROR(xhal_stream_copy(stream, buffer, 0, (xhal_buffer_t *)stream, 0, 4), XHAL_ERROR_INVALID_HANDLE,
                 "is a stream, not a buffer");

    /* Addresses: arithmetic within a buffer resolves back to it. */
    uint64_t address = 0, offset = 0;
    xhal_buffer_t *found = NULL;
    CHECK(xhal_buffer_address(buffer, &address));
    CHECK(xhal_resolve_address(address + 100, &found, &offset));
    EXPECT(found == buffer && offset == 100);
    CHECK(xhal_resolve_address(address + 1024, &found, &offset));
    EXPECT(found == buffer && offset == 1024);
    EXPECT_ERROR(xhal_resolve_address(address + 1025, &found, &offset), XHAL_ERROR_NOT_FOUND, "not in a live buffer");

    /* Statistics. */
    xhal_memory_stats_t stats = {0};
    stats.struct_size = sizeof stats;
    CHECK(xhal_device_memory_stats(device, &stats));
    EXPECT(stats.allocated >= 1024 && stats.reserved >= stats.allocated && stats.peak_allocated >= 1024);

    CHECK(xhal_buffer_free(buffer));
    EXPECT_ERROR(xhal_buffer_size(buffer, &size), XHAL_ERROR_INVALID_HANDLE, "destroyed");
    EXPECT_ERROR(xhal_buffer_free(buffer), XHAL_ERROR_INVALID_HANDLE, "destroyed");
    EXPECT_ERROR(xhal_resolve_address(address, &found, &offset), XHAL_ERROR_NOT_FOUND, "not in a live buffer");
    CHECK(xhal_buffer_free(NULL));
    CHECK(xhal_device_empty_cache(device));
    CHECK(xhal_device_reset_peak_memory_stats(device));

    /* A zero-byte buffer is a buffer. */
    xhal_buffer_t *empty = NULL;
    CHECK(xhal_buffer_alloc(device, 0, &empty));
    CHECK(xhal_stream_write(stream, empty, 0, NULL, 0));
    CHECK(xhal_buffer_free(empty));

    test_pinned(device, stream);

    int complete = 0;
    CHECK(xhal_stream_query(stream, &complete));
    CHECK(xhal_stream_synchronize(stream));
    CHECK(xhal_stream_destroy(stream));
    EXPECT_ERROR(xhal_stream_synchronize(stream), XHAL_ERROR_INVALID_HANDLE, "destroyed");
    xhal_stream_t *default_stream = NULL;
    CHECK(xhal_device_default_stream(device, &default_stream));
    EXPECT_ERROR(xhal_stream_destroy(default_stream), XHAL_ERROR_INVALID_ARGUMENT, "default stream");
}

static void test_kernels(xhal_device_t *device) {
    run_saxpy(device, 1000);

    xhal_module_t *module = NULL;
    EXPECT_ERROR(xhal_module_load_wgsl(device, "fn broken( {", NULL, 0, &module), XHAL_ERROR_INVALID_ARGUMENT, "");
    EXPECT(strlen(xhal_last_error_message()) > 20);
    xhal_override_t unknown = {"no_such_constant", 1.0};
    EXPECT_ERROR(xhal_module_load_wgsl(device, SAXPY, &unknown, 1, &module), XHAL_ERROR_INVALID_ARGUMENT,
                 "no_such_constant");
    EXPECT_ERROR(xhal_module_load_wgsl(device, SAXPY, NULL, 1, &module), XHAL_ERROR_INVALID_ARGUMENT,
                 "null pointer");

    CHECK(xhal_module_load_wgsl(device, SAXPY, NULL, 0, &module));
    uint32_t entry_points = 0;
    CHECK(xhal_module_entry_point_count(module, &entry_points));
    const char *name = NULL;
    CHECK(xhal_module_entry_point_name(module, 0, &name));
    EXPECT(entry_points == 1 && strcmp(name, "saxpy") == 0);
    xhal_kernel_t *kernel = NULL;
    EXPECT_ERROR(xhal_module_kernel(module, "saxpi", &kernel), XHAL_ERROR_NOT_FOUND, "saxpi");
    CHECK(xhal_module_kernel(module, NULL, &kernel));

    /* Reflection: x, y (binding 2), then the scalars a and n. */
    xhal_param_info_t param = {0};
    param.struct_size = sizeof param;
    CHECK(xhal_kernel_param(kernel, 1, &param));
    EXPECT(strcmp(param.name, "y") == 0 && param.binding == 2 && param.kind == XHAL_PARAM_STORAGE);
    EXPECT(param.access == XHAL_ACCESS_READ_WRITE && param.writes == 1 && param.element_stride == 4);
    CHECK(xhal_kernel_param(kernel, 3, &param));
    EXPECT(strcmp(param.name, "n") == 0 && param.kind == XHAL_PARAM_SCALAR && param.offset == 4);
    EXPECT(strcmp(param.type_name, "u32") == 0);
    EXPECT_ERROR(xhal_kernel_param(kernel, 4, &param), XHAL_ERROR_NOT_FOUND, "the kernel has 4");

    xhal_buffer_t *small = NULL, *big = NULL;
    CHECK(xhal_buffer_alloc(device, 64, &small));
    CHECK(xhal_buffer_alloc(device, 4096, &big));
    struct saxpy_params params = {1.0f, 16};
    xhal_binding_t bindings[2] = {{small, 0, XHAL_WHOLE_SIZE, NULL}, {big, 0, XHAL_WHOLE_SIZE, NULL}};
    xhal_launch_t launch = {0};
    launch.struct_size = sizeof launch;
    launch.kernel = kernel;
    launch.workgroups[0] = 1;
    launch.bindings = bindings;
    launch.binding_count = 2;
    launch.scalars = &params;
    launch.scalar_size = sizeof params;
    xhal_stream_t *stream = NULL;
    CHECK(xhal_device_default_stream(device, &stream));
    CHECK(xhal_stream_launch(stream, &launch));

    launch.binding_count = 1;
    EXPECT_ERROR(xhal_stream_launch(stream, &launch), XHAL_ERROR_INVALID_ARGUMENT, "has 2 binding(s)");
    launch.binding_count = 2;
    launch.scalar_size = 4;
    EXPECT_ERROR(xhal_stream_launch(stream, &launch), XHAL_ERROR_INVALID_ARGUMENT, "scalar block of 8 bytes");
    launch.scalar_size = sizeof params;
    launch.invocations = 16;
    EXPECT_ERROR(xhal_stream_launch(stream, &launch), XHAL_ERROR_INVALID_ARGUMENT, "both invocations and workgroups");
    launch.invocations = 0;
    bindings[1].offset = 8192;
    bindings[1].size = 4;
    EXPECT_ERROR(xhal_stream_launch(stream, &launch), XHAL_ERROR_OUT_OF_BOUNDS, "`y`");
    bindings[1].offset = 0;
    bindings[1].size = XHAL_WHOLE_SIZE;
    bindings[0].buffer = NULL;
    EXPECT_ERROR(xhal_stream_launch(stream, &launch), XHAL_ERROR_INVALID_ARGUMENT, "both null");
    bindings[0].buffer = (xhal_buffer_t *)kernel;
    EXPECT_ERROR(xhal_stream_launch(stream, &launch), XHAL_ERROR_INVALID_HANDLE, "is a kernel, not a buffer");
    bindings[0].buffer = small;
    launch.struct_size = 16;
    EXPECT_ERROR(xhal_stream_launch(stream, &launch), XHAL_ERROR_INVALID_ARGUMENT, "launch.struct_size is 16");
    launch.struct_size = sizeof launch;
    launch.kernel = NULL;
    EXPECT_ERROR(xhal_stream_launch(stream, &launch), XHAL_ERROR_INVALID_HANDLE, "a null handle");
    EXPECT_ERROR(xhal_stream_launch(stream, NULL), XHAL_ERROR_INVALID_ARGUMENT, "launch is a null pointer");
    launch.kernel = kernel;
    CHECK(xhal_stream_synchronize(stream));

    /* A uniform binding passed by value. */
    xhal_module_t *scale_module = NULL;
    xhal_kernel_t *scale = NULL;
    CHECK(xhal_module_load_wgsl(device, SCALE_BY_UNIFORM, NULL, 0, &scale_module));
    CHECK(xhal_module_kernel(scale_module, "scale_all", &scale));
    CHECK(xhal_kernel_param(scale, 0, &param));
    EXPECT(param.kind == XHAL_PARAM_UNIFORM && param.size == 8);
    float data[40];
    for (int i = 0; i < 40; i++) data[i] = (float)i;
    CHECK(xhal_stream_write(stream, big, 0, data, sizeof data));
    struct {
        float factor;
        uint32_t count;
    } value = {3.0f, 40};
    xhal_binding_t scale_bindings[2] = {{NULL, 0, sizeof value, &value}, {big, 0, sizeof data, NULL}};
    xhal_launch_t scale_launch = {0};
    scale_launch.struct_size = sizeof scale_launch;
    scale_launch.kernel = scale;
    scale_launch.invocations = 40;
    scale_launch.bindings = scale_bindings;
    scale_launch.binding_count = 2;
    CHECK(xhal_stream_launch(stream, &scale_launch));
    CHECK(xhal_stream_read(stream, big, 0, data, sizeof data));
    EXPECT(data[39] == 117.0f && data[1] == 3.0f);

    /* Events time work on a stream. */
    xhal_event_t *start = NULL, *end = NULL;
    CHECK(xhal_event_create(device, XHAL_EVENT_TIMING, &start));
    CHECK(xhal_event_create(device, XHAL_EVENT_TIMING, &end));
    EXPECT_ERROR(xhal_event_create(device, 6, &end), XHAL_ERROR_INVALID_ARGUMENT, "flags");
    CHECK(xhal_stream_record_event(stream, start));
    CHECK(xhal_stream_launch(stream, &scale_launch));
    CHECK(xhal_stream_record_event(stream, end));
    xhal_stream_t *other = NULL;
    CHECK(xhal_stream_create(device, &other));
    CHECK(xhal_stream_wait_event(other, end));
    CHECK(xhal_event_synchronize(end));
    int complete = 0;
    CHECK(xhal_event_query(end, &complete));
    EXPECT(complete == 1);
    double ms = -1.0;
    CHECK(xhal_event_elapsed_ms(start, end, &ms));
    EXPECT(ms >= 0.0);
    CHECK(xhal_stream_destroy(other));
    CHECK(xhal_event_destroy(start));
    CHECK(xhal_event_destroy(end));
    EXPECT_ERROR(xhal_event_query(end, &complete), XHAL_ERROR_INVALID_HANDLE, "destroyed");

    CHECK(xhal_kernel_destroy(scale));
    CHECK(xhal_module_destroy(scale_module));
    CHECK(xhal_module_destroy(module));
    /* A kernel outlives its module handle. */
    CHECK(xhal_stream_launch(stream, &launch));
    CHECK(xhal_stream_synchronize(stream));
    CHECK(xhal_kernel_destroy(kernel));
    CHECK(xhal_buffer_free(small));
    CHECK(xhal_buffer_free(big));
}

/* Stream priorities: a lower number is more urgent, requests are clamped into the range. */
static void test_stream_priorities(xhal_device_t *device) {
    int32_t least = 7, greatest = 7;
    CHECK(xhal_device_stream_priorities(device, &least, &greatest));
    /* The cpu device has ordinary (0) and urgent (-1) streams. */
    EXPECT(least == 0 && greatest == -1);
    EXPECT_ERROR(xhal_device_stream_priorities(device, &least, NULL), XHAL_ERROR_INVALID_ARGUMENT, "greatest");
    EXPECT_ERROR(xhal_device_stream_priorities(NULL, &least, &greatest), XHAL_ERROR_INVALID_HANDLE, "device");

    xhal_stream_t *plain = NULL, *urgent = NULL, *clamped = NULL;
    CHECK(xhal_stream_create(device, &plain));
    CHECK(xhal_stream_create_with_priority(device, -1, &urgent));
    CHECK(xhal_stream_create_with_priority(device, -100, &clamped));
    int32_t priority = 7;
    CHECK(xhal_stream_priority(plain, &priority));
    EXPECT(priority == 0);
    CHECK(xhal_stream_priority(urgent, &priority));
    EXPECT(priority == -1);
    CHECK(xhal_stream_priority(clamped, &priority));
    EXPECT(priority == -1);
    EXPECT_ERROR(xhal_stream_priority(urgent, NULL), XHAL_ERROR_INVALID_ARGUMENT, "priority");
    EXPECT_ERROR(xhal_stream_create_with_priority(device, -1, NULL), XHAL_ERROR_INVALID_ARGUMENT, "stream");
    EXPECT_ERROR(xhal_stream_create(device, NULL), XHAL_ERROR_INVALID_ARGUMENT, "stream");
    /* Nothing was written when the other out pointer is null. */
    least = 7;
    EXPECT_ERROR(xhal_device_stream_priorities(device, &least, NULL), XHAL_ERROR_INVALID_ARGUMENT, "greatest");
    EXPECT(least == 7);

    /* Work on an urgent stream, waited for by a plain one, arrives. */
    enum { N = 4096 };
    xhal_buffer_t *source = NULL, *target = NULL;
    CHECK(xhal_buffer_alloc(device, N * sizeof(uint32_t), &source));
    CHECK(xhal_buffer_alloc(device, N * sizeof(uint32_t), &target));
    uint32_t pattern = 0xA5A5A5A5u;
    CHECK(xhal_stream_fill(urgent, source, 0, N * sizeof(uint32_t), &pattern, sizeof pattern));
    xhal_event_t *filled = NULL;
    CHECK(xhal_event_create(device, 0, &filled));
    CHECK(xhal_stream_record_event(urgent, filled));
    CHECK(xhal_stream_wait_event(plain, filled));
    CHECK(xhal_stream_copy(plain, source, 0, target, 0, N * sizeof(uint32_t)));
    static uint32_t back[N];
    CHECK(xhal_stream_read(plain, target, 0, back, sizeof back));
    int same = 1;
    for (int i = 0; i < N; i++) same &= back[i] == pattern;
    EXPECT(same);
    CHECK(xhal_event_destroy(filled));
    CHECK(xhal_buffer_free(source));
    CHECK(xhal_buffer_free(target));
    CHECK(xhal_stream_destroy(plain));
    CHECK(xhal_stream_destroy(urgent));
    CHECK(xhal_stream_destroy(clamped));
}

/* Stream-ordered memory: a block freed on a stream comes back to that stream's allocations;
 * what its work writes is what a read on the stream sees. */
static void test_stream_buffers(xhal_device_t *device) {
    xhal_stream_t *stream = NULL;
    CHECK(xhal_stream_create(device, &stream));
    enum { N = 8192 };
    xhal_memory_stats_t before = {0};
    before.struct_size = sizeof before;
    CHECK(xhal_device_memory_stats(device, &before));
    xhal_buffer_t *first = NULL, *second = NULL;
    CHECK(xhal_stream_buffer_alloc(stream, N * sizeof(uint32_t), &first));
    uint32_t one = 1u, two = 2u;
    CHECK(xhal_stream_fill(stream, first, 0, N * sizeof(uint32_t), &one, sizeof one));
    CHECK(xhal_buffer_free(first));
    CHECK(xhal_stream_buffer_alloc(stream, N * sizeof(uint32_t), &second));
    CHECK(xhal_stream_fill(stream, second, 0, N * sizeof(uint32_t), &two, sizeof two));
    static uint32_t back[N];
    CHECK(xhal_stream_read(stream, second, 0, back, sizeof back));
    int same = 1;
    for (int i = 0; i < N; i++) same &= back[i] == two;
    EXPECT(same);
    xhal_memory_stats_t after = {0};
    after.struct_size = sizeof after;
    CHECK(xhal_device_memory_stats(device, &after));
    /* The second allocation reused the first block, whether or not the fill had run. */
    EXPECT(after.backend_allocations <= before.backend_allocations + 1);
    EXPECT(after.cache_hits >= before.cache_hits + 1);
    CHECK(xhal_buffer_free(second));

    EXPECT_ERROR(xhal_stream_buffer_alloc(stream, 16, NULL), XHAL_ERROR_INVALID_ARGUMENT, "buffer");
    EXPECT_ERROR(xhal_stream_buffer_alloc(NULL, 16, &first), XHAL_ERROR_INVALID_HANDLE, "stream");
    EXPECT_ERROR(xhal_stream_buffer_alloc((xhal_stream_t *)device, 16, &first), XHAL_ERROR_INVALID_HANDLE, "stream");
    /* While capturing, the allocation is an ordinary one, and works. */
    CHECK(xhal_stream_begin_capture(stream));
    xhal_buffer_t *captured = NULL;
    CHECK(xhal_stream_buffer_alloc(stream, 64, &captured));
    xhal_graph_t *graph = NULL;
    CHECK(xhal_stream_end_capture(stream, &graph));
    CHECK(xhal_graph_destroy(graph));
    CHECK(xhal_buffer_free(captured));
    CHECK(xhal_stream_destroy(stream));
    EXPECT_ERROR(xhal_stream_buffer_alloc(stream, 16, &first), XHAL_ERROR_INVALID_HANDLE, "destroyed");
}

/* Graphs by stream capture: work queued while a stream captures is recorded, not run, and
 * each replay runs it again; what needs the work to have run is refused during a capture. */
static void test_graphs(xhal_device_t *device) {
    enum { N = 1000 };
    xhal_stream_t *stream = NULL, *other = NULL;
    CHECK(xhal_stream_create(device, &stream));
    CHECK(xhal_stream_create(device, &other));
    float x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = (float)i;
    xhal_buffer_t *bx = NULL, *by = NULL, *copy = NULL;
    CHECK(xhal_buffer_alloc(device, sizeof x, &bx));
    CHECK(xhal_buffer_alloc(device, sizeof y, &by));
    CHECK(xhal_buffer_alloc(device, sizeof y, &copy));
    CHECK(xhal_stream_write(stream, bx, 0, x, sizeof x));
    float zero = 0.0f;
    CHECK(xhal_stream_fill(stream, by, 0, sizeof y, &zero, sizeof zero));

    xhal_override_t block = {"block", 64.0};
    xhal_module_t *module = NULL;
    CHECK(xhal_module_load_wgsl(device, SAXPY, &block, 1, &module));
    xhal_kernel_t *kernel = NULL;
    CHECK(xhal_module_kernel(module, "saxpy", &kernel));
    struct saxpy_params params = {2.0f, N};
    xhal_binding_t bindings[2] = {{bx, 0, XHAL_WHOLE_SIZE, NULL}, {by, 0, XHAL_WHOLE_SIZE, NULL}};
    xhal_launch_t launch = {0};
    launch.struct_size = sizeof launch;
    launch.kernel = kernel;
    launch.invocations = N;
    launch.bindings = bindings;
    launch.binding_count = 2;
    launch.scalars = &params;
    launch.scalar_size = sizeof params;

    int capturing = -1;
    CHECK(xhal_stream_is_capturing(stream, &capturing));
    EXPECT(capturing == 0);
    CHECK(xhal_stream_begin_capture(stream));
    CHECK(xhal_stream_is_capturing(stream, &capturing));
    EXPECT(capturing == 1);
    EXPECT_ERROR(xhal_stream_begin_capture(stream), XHAL_ERROR_INVALID_ARGUMENT, "already capturing");
    /* y = 2x + y, then a copy of y: recorded with the launch's scalars as they are now. */
    CHECK(xhal_stream_launch(stream, &launch));
    params.a = 100.0f;
    /* An event recorded during the capture orders the graph's work only (as in CUDA): it may
     * be destroyed once the capture ends. */
    xhal_event_t *point = NULL;
    CHECK(xhal_event_create(device, 0, &point));
    CHECK(xhal_stream_record_event(stream, point));
    CHECK(xhal_stream_wait_event(stream, point));
    CHECK(xhal_stream_copy(stream, by, 0, copy, 0, sizeof y));
    EXPECT_ERROR(xhal_stream_synchronize(stream), XHAL_ERROR_INVALID_ARGUMENT, "capturing a graph");
    EXPECT_ERROR(xhal_stream_read(stream, by, 0, y, sizeof y), XHAL_ERROR_INVALID_ARGUMENT, "capturing a graph");
    EXPECT_ERROR(xhal_stream_write(stream, by, 0, y, sizeof y), XHAL_ERROR_INVALID_ARGUMENT, "capturing a graph");
    int complete = -1;
    EXPECT_ERROR(xhal_stream_query(stream, &complete), XHAL_ERROR_INVALID_ARGUMENT, "capturing a graph");
    xhal_graph_t *graph = NULL;
    CHECK(xhal_stream_end_capture(stream, &graph));
    CHECK(xhal_event_destroy(point));
    EXPECT_ERROR(xhal_stream_end_capture(stream, &graph), XHAL_ERROR_INVALID_ARGUMENT, "not capturing");

    /* Nothing ran during the capture. */
    CHECK(xhal_stream_read(stream, by, 0, y, sizeof y));
    for (int i = 0; i < N; i++) EXPECT(y[i] == 0.0f);
    /* Two replays, the second on another stream: y = 2x, then 4x. The buffers may go: the
     * graph holds their memory. */
    CHECK(xhal_graph_replay(graph, stream));
    CHECK(xhal_stream_synchronize(stream));
    CHECK(xhal_graph_replay(graph, other));
    CHECK(xhal_stream_synchronize(other));
    CHECK(xhal_stream_read(stream, copy, 0, y, sizeof y));
    for (int i = 0; i < N; i++) {
        if (y[i] != 4.0f * (float)i) {
            fprintf(stderr, "graph: y[%d] = %g, expected %g\n", i, y[i], 4.0f * (float)i);
            failures++;
            break;
        }
    }
    int native = -1;
    CHECK(xhal_graph_is_native(graph, &native));
    EXPECT(native == 0 || native == 1);
    CHECK(xhal_buffer_free(bx));
    CHECK(xhal_graph_replay(graph, stream));
    CHECK(xhal_stream_synchronize(stream));

    /* A replay is not captured into another graph. */
    CHECK(xhal_stream_begin_capture(other));
    EXPECT_ERROR(xhal_graph_replay(graph, other), XHAL_ERROR_INVALID_ARGUMENT, "capturing a graph");
    xhal_graph_t *empty = NULL;
    CHECK(xhal_stream_end_capture(other, &empty));
    CHECK(xhal_graph_replay(empty, other));
    CHECK(xhal_graph_destroy(empty));

    CHECK(xhal_graph_destroy(graph));
    EXPECT_ERROR(xhal_graph_replay(graph, stream), XHAL_ERROR_INVALID_HANDLE, "destroyed");
    EXPECT_ERROR(xhal_graph_replay((xhal_graph_t *)stream, stream), XHAL_ERROR_INVALID_HANDLE, "not a graph");
    EXPECT_ERROR(xhal_stream_end_capture(stream, NULL), XHAL_ERROR_INVALID_ARGUMENT, "null");
    CHECK(xhal_graph_destroy(NULL));
    CHECK(xhal_kernel_destroy(kernel));
    CHECK(xhal_module_destroy(module));
    CHECK(xhal_buffer_free(by));
    CHECK(xhal_buffer_free(copy));
    CHECK(xhal_stream_destroy(stream));
    CHECK(xhal_stream_destroy(other));
}

/* Device activities for profilers: each launch, copy and fill with its device times and the
 * correlation id of the thread that queued it. */
static void test_profiler(xhal_device_t *device) {
    xhal_stream_t *stream = NULL;
    CHECK(xhal_device_default_stream(device, &stream));
    xhal_buffer_t *buffer = NULL;
    CHECK(xhal_buffer_alloc(device, 4096, &buffer));
    uint32_t zero = 0;
    EXPECT_ERROR(xhal_profiler_stop(NULL), XHAL_ERROR_INVALID_ARGUMENT, "not being collected");
    CHECK(xhal_profiler_start());
    EXPECT_ERROR(xhal_profiler_start(), XHAL_ERROR_INVALID_ARGUMENT, "already being collected");
    CHECK(xhal_profiler_set_correlation(42));
    CHECK(xhal_stream_fill(stream, buffer, 0, 4096, &zero, sizeof zero));
    CHECK(xhal_profiler_set_correlation(0));
    run_saxpy(device, 1000);
    CHECK(xhal_stream_synchronize(stream));
    uint64_t dropped = 1;
    CHECK(xhal_profiler_stop(&dropped));
    EXPECT(dropped == 0);

    xhal_activity_t activities[64];
    for (int i = 0; i < 64; i++) activities[i].struct_size = sizeof activities[i];
    size_t count = 0;
    CHECK(xhal_profiler_take(activities, 64, &count));
    int fills = 0, kernels = 0;
    for (size_t i = 0; i < count; i++) {
        const xhal_activity_t *a = &activities[i];
        EXPECT(a->end_ns >= a->start_ns && a->start_ns > 0);
        if (strcmp(a->category, "fill") == 0) {
            fills++;
            EXPECT(a->correlation == 42);
        }
        if (strcmp(a->category, "kernel") == 0) {
            kernels++;
            EXPECT(strcmp(a->name, "saxpy") == 0 && a->correlation == 0);
        }
    }
    EXPECT(fills == 1 && kernels == 1);
    size_t again = 99;
    CHECK(xhal_profiler_take(activities, 64, &again));
    EXPECT(again == 0);
    activities[0].struct_size = 0;
    EXPECT_ERROR(xhal_profiler_take(activities, 1, &again), XHAL_ERROR_INVALID_ARGUMENT, "struct_size");
    EXPECT_ERROR(xhal_profiler_take(activities, 1, NULL), XHAL_ERROR_INVALID_ARGUMENT, "count is a null");
    EXPECT_ERROR(xhal_profiler_take(NULL, 4, &again), XHAL_ERROR_INVALID_ARGUMENT, "null pointer");
    CHECK(xhal_buffer_free(buffer));
}

int main(void) {
    test_versions();
    xhal_runtime_t *runtime = cpu_runtime();
    test_discovery(runtime);
    xhal_device_t *device = NULL;
    CHECK(xhal_device_open(runtime, "cpu:0", &device));
    test_memory(device);
    test_kernels(device);
    test_stream_priorities(device);
    test_stream_buffers(device);
    test_graphs(device);
    test_profiler(device);
    CHECK(xhal_device_destroy(device));
    CHECK(xhal_runtime_destroy(runtime));
    CHECK(xhal_runtime_destroy(NULL));

    /* The device a script names, through the default plugin search. */
    const char *label = getenv("XHAL_CAPI_DEVICE");
    if (label != NULL && label[0] != '\0') {
        xhal_runtime_t *everything = NULL;
        CHECK(xhal_runtime_create_default(&everything));
        xhal_device_t *chosen = NULL;
        CHECK(xhal_runtime_choose(everything, label, &chosen));
        xhal_device_info_t info = {0};
        info.struct_size = sizeof info;
        CHECK(xhal_device_get_info(chosen, &info));
        run_saxpy(chosen, 100000);
        test_memory(chosen);
        printf("capi: saxpy and memory on %s (%s)\n", info.label, info.name);
        CHECK(xhal_device_destroy(chosen));
        CHECK(xhal_runtime_destroy(everything));
    }

    if (failures != 0) {
        fprintf(stderr, "capi_test: %d check(s) failed\n", failures);
        return 1;
    }
    printf("capi_test: all checks passed\n");
    return 0;
}
