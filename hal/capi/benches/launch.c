/*
 * What one launch costs through the C API: `make bench-capi DEVICE=cpu:0`. Queues 20,000
 * launches of a tiny kernel back to back, three rounds each, in three shapes: one buffer and
 * a 16-byte uniform; three buffers and a 208-byte uniform (the PyTorch device's strided
 * elementwise kernels); three buffers and a 48-byte immediate block (its flat ones). Prints
 * the enqueue time per launch, and the time per launch including the final synchronize.
 */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "xhal_capi.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static const char *ONE_BUFFER =
    "struct P { n: u32, a: f32, b: f32, c: f32 }\n"
    "@group(0) @binding(0) var<uniform> p: P;\n"
    "@group(0) @binding(1) var<storage, read_write> y: array<f32>;\n"
    "@compute @workgroup_size(64)\n"
    "fn main(@builtin(global_invocation_id) g: vec3<u32>) { if (g.x < p.n) { y[g.x] = y[g.x] + p.a; } }\n";

static const char *THREE_UNIFORM =
    "struct P { numel: u32, ndim: u32, alpha: f32, beta: f32, sizes: array<vec4<u32>, 2>,\n"
    "  offsets: vec4<u32>, strides: array<vec4<u32>, 8>, c: vec4<f32> }\n"
    "@group(0) @binding(0) var<uniform> p: P;\n"
    "@group(0) @binding(1) var<storage, read_write> o: array<f32>;\n"
    "@group(0) @binding(2) var<storage, read> a: array<f32>;\n"
    "@group(0) @binding(3) var<storage, read> b: array<f32>;\n"
    "@compute @workgroup_size(256)\n"
    "fn main(@builtin(global_invocation_id) g: vec3<u32>) {\n"
    "  if (g.x < p.numel) { o[p.offsets.x + g.x] = a[p.offsets.y + g.x] + p.alpha * b[p.offsets.z + g.x]; }\n"
    "}\n";

static const char *THREE_IMMEDIATE =
    "struct P { numel: u32, ndim: u32, alpha: f32, beta: f32, offsets: vec4<u32>, c: vec4<f32> }\n"
    "var<immediate> p: P;\n"
    "@group(0) @binding(1) var<storage, read_write> o: array<f32>;\n"
    "@group(0) @binding(2) var<storage, read> a: array<f32>;\n"
    "@group(0) @binding(3) var<storage, read> b: array<f32>;\n"
    "@compute @workgroup_size(256)\n"
    "fn main(@builtin(global_invocation_id) g: vec3<u32>) {\n"
    "  if (g.x < p.numel) { o[p.offsets.x + g.x] = a[p.offsets.y + g.x] + p.alpha * b[p.offsets.z + g.x]; }\n"
    "}\n";

static int fail(const char *what) {
    fprintf(stderr, "bench-capi: %s: %s\n", what, xhal_last_error_message());
    return 1;
}

int main(int argc, char **argv) {
    const char *selector = argc > 1 ? argv[1] : NULL;
    xhal_runtime_t *runtime = NULL;
    xhal_device_t *device = NULL;
    xhal_stream_t *stream = NULL;
    xhal_buffer_t *buffers[3];
    if (xhal_runtime_create_default(&runtime) || xhal_runtime_choose(runtime, selector, &device)) return fail("device");
    xhal_device_info_t info = {0};
    info.struct_size = sizeof info;
    xhal_device_get_info(device, &info);
    xhal_device_default_stream(device, &stream);
    for (int i = 0; i < 3; i++) {
        if (xhal_buffer_alloc(device, 256, &buffers[i])) return fail("alloc");
    }
    const char *names[3] = {"1 buffer, 16-byte uniform", "3 buffers, 208-byte uniform", "3 buffers, 48-byte immediates"};
    const char *sources[3] = {ONE_BUFFER, THREE_UNIFORM, THREE_IMMEDIATE};
    unsigned char block[208];
    memset(block, 0, sizeof block);
    unsigned n = 16;
    float one = 1.0f;
    memcpy(block, &n, 4);
    memcpy(block + 4, &one, 4);
    memcpy(block + 8, &one, 4);
    printf("| device | launch | enqueue | with synchronize |\n| --- | --- | --- | --- |\n");
    for (int shape = 0; shape < 3; shape++) {
        xhal_module_t *module = NULL;
        xhal_kernel_t *kernel = NULL;
        if (xhal_module_load_wgsl(device, sources[shape], NULL, 0, &module) ||
            xhal_module_kernel(module, NULL, &kernel))
            return fail("kernel");
        xhal_binding_t bindings[4] = {{NULL, 0, shape == 0 ? 16 : 208, block},
                                      {buffers[0], 0, XHAL_WHOLE_SIZE, NULL},
                                      {buffers[1], 0, XHAL_WHOLE_SIZE, NULL},
                                      {buffers[2], 0, XHAL_WHOLE_SIZE, NULL}};
        xhal_launch_t launch = {0};
        launch.struct_size = sizeof launch;
        launch.kernel = kernel;
        launch.invocations = 16;
        if (shape == 0) {
            launch.bindings = bindings;
            launch.binding_count = 2;
        } else if (shape == 1) {
            launch.bindings = bindings;
            launch.binding_count = 4;
        } else {
            launch.bindings = bindings + 1;
            launch.binding_count = 3;
            launch.scalars = block;
            launch.scalar_size = 48;
        }
        for (int round = 0; round < 3; round++) {
            const int count = 20000;
            if (xhal_stream_synchronize(stream)) return fail("synchronize");
            double start = now();
            for (int i = 0; i < count; i++) {
                if (xhal_stream_launch(stream, &launch)) return fail("launch");
            }
            double queued = now() - start;
            if (xhal_stream_synchronize(stream)) return fail("synchronize");
            double total = now() - start;
            printf("| %s | %s | %.2f µs | %.2f µs |\n", info.label, names[shape], queued / count * 1e6, total / count * 1e6);
        }
        xhal_kernel_destroy(kernel);
        xhal_module_destroy(module);
    }
    for (int i = 0; i < 3; i++) xhal_buffer_free(buffers[i]);
    xhal_device_destroy(device);
    xhal_runtime_destroy(runtime);
    return 0;
}
