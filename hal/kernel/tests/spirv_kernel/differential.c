/* Runs one kernel twice on the first OpenCL device, once built from OpenCL C source and once
 * from SPIR 1.2 bitcode (the Kernel SPIR-V translated by llvm-spirv -r), with the same
 * arguments, and writes every buffer afterwards to OUT/c<b>.bin and OUT/s<b>.bin for the
 * caller to compare. Both follow xhal's parameter ABI: the buffers, then the scalar block by
 * value (when there is one), then the byte lengths (when the kernel calls arrayLength).
 * GROUPS workgroups run along x: two, so that workgroup ids are exercised, or one for a
 * kernel that does not read its workgroup's place (two copies of it would race on the same
 * cells, and the result would depend on which ran first).
 *
 * PATTERN 0 fills every word with a small integer (1..64), so that data-dependent indices and
 * loop counts stay small; PATTERN 1 with the bits of a float in [-125, 125], for kernels
 * that index only by invocation id or clamp.
 *
 * usage: differential SOURCE.cl BITCODE.bc KERNEL BUFFERS SCALAR_BYTES LENGTHS WX WY WZ OUT PATTERN GROUPS
 * exit status: 0 ran both, 2 could not (message on stderr). */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each buffer is allocated this large, but the kernel is told (through its byte lengths)
 * that the view holds VIEW_BYTES: indices into runtime-sized arrays are clamped to that. */
#define ALLOC_BYTES (1u << 20)
#define VIEW_BYTES 65536u
#define MAX_BUFFERS 16

static unsigned char *slurp(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *bytes = malloc((size_t)n + 1);
    if (!bytes || fread(bytes, 1, (size_t)n, f) != (size_t)n) { fclose(f); free(bytes); return NULL; }
    bytes[n] = 0;
    fclose(f);
    *size = (size_t)n;
    return bytes;
}

static int fail(const char *what, cl_int err) {
    fprintf(stderr, "%s failed: OpenCL error %d\n", what, (int)err);
    return 2;
}

static int float_pattern = 0;

static void pattern(unsigned char *bytes, size_t n, uint32_t seed) {
    for (size_t i = 0; i + 4 <= n; i += 4) {
        uint32_t v = (uint32_t)(i / 4) * 2654435761u + seed;
        if (float_pattern) {
            float f = (float)((int)((v >> 20) % 2001u) - 1000) / 8.0f;
            memcpy(&v, &f, 4);
        } else {
            v = (v >> 26) + 1;
        }
        memcpy(bytes + i, &v, 4);
    }
}

static int run(cl_context ctx, cl_command_queue queue, cl_program program, const char *what, const char *name,
               int buffers, size_t scalar_bytes, int lengths, const size_t *workgroup, size_t groups,
               unsigned char **out) {
    cl_int err;
    cl_kernel kernel = clCreateKernel(program, name, &err);
    if (err) {
        fprintf(stderr, "%s: ", what);
        return fail("clCreateKernel", err);
    }
    cl_mem mems[MAX_BUFFERS];
    unsigned char *init = malloc(ALLOC_BYTES);
    int arg = 0;
    for (int b = 0; b < buffers; b++) {
        pattern(init, ALLOC_BYTES, 17u * (uint32_t)b + 5u);
        mems[b] = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, ALLOC_BYTES, init, &err);
        if (err) return fail("clCreateBuffer", err);
        err = clSetKernelArg(kernel, arg++, sizeof(cl_mem), &mems[b]);
        if (err) return fail("clSetKernelArg (buffer)", err);
    }
    free(init);
    if (scalar_bytes > 0) {
        unsigned char *scalars = malloc(scalar_bytes);
        pattern(scalars, scalar_bytes, 99u);
        err = clSetKernelArg(kernel, arg++, scalar_bytes, scalars);
        free(scalars);
        if (err) return fail("clSetKernelArg (scalars)", err);
    }
    if (lengths) {
        uint64_t bytes[MAX_BUFFERS];
        for (int b = 0; b < MAX_BUFFERS; b++) bytes[b] = VIEW_BYTES;
        size_t n = (size_t)(buffers > 0 ? buffers : 1) * sizeof(uint64_t);
        err = clSetKernelArg(kernel, arg++, n, bytes);
        if (err) return fail("clSetKernelArg (lengths)", err);
    }
    size_t global[3] = {groups * workgroup[0], workgroup[1], workgroup[2]};
    err = clEnqueueNDRangeKernel(queue, kernel, 3, NULL, global, workgroup, 0, NULL, NULL);
    if (err) return fail("clEnqueueNDRangeKernel", err);
    for (int b = 0; b < buffers; b++) {
        out[b] = malloc(ALLOC_BYTES);
        err = clEnqueueReadBuffer(queue, mems[b], CL_TRUE, 0, ALLOC_BYTES, out[b], 0, NULL, NULL);
        if (err) return fail("clEnqueueReadBuffer", err);
        clReleaseMemObject(mems[b]);
    }
    clReleaseKernel(kernel);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 13) {
        fprintf(stderr, "usage: %s SOURCE.cl BITCODE.bc KERNEL BUFFERS SCALAR_BYTES LENGTHS WX WY WZ OUT PATTERN GROUPS\n",
                argv[0]);
        return 2;
    }
    float_pattern = atoi(argv[11]) == 1;
    const char *name = argv[3];
    int buffers = atoi(argv[4]);
    size_t scalar_bytes = (size_t)atol(argv[5]);
    int lengths = atoi(argv[6]);
    size_t workgroup[3] = {(size_t)atol(argv[7]), (size_t)atol(argv[8]), (size_t)atol(argv[9])};
    const char *out_dir = argv[10];
    size_t groups = (size_t)atol(argv[12]);
    if (groups < 1 || groups > 2) return fail("GROUPS must be 1 or 2", 0);
    if (buffers > MAX_BUFFERS) return fail("too many buffers", 0);
    cl_platform_id platform;
    cl_device_id dev;
    cl_int err = clGetPlatformIDs(1, &platform, NULL);
    if (err) return fail("clGetPlatformIDs", err);
    err = clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &dev, NULL);
    if (err) return fail("clGetDeviceIDs", err);
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    if (err) return fail("clCreateContext", err);
    cl_command_queue queue = clCreateCommandQueueWithProperties(ctx, dev, NULL, &err);
    if (err) return fail("clCreateCommandQueue", err);

    size_t source_size, bitcode_size;
    unsigned char *source = slurp(argv[1], &source_size);
    unsigned char *bitcode = slurp(argv[2], &bitcode_size);
    if (!source || !bitcode) return fail("reading the inputs", 0);
    const char *sources[1] = {(const char *)source};
    cl_program from_source = clCreateProgramWithSource(ctx, 1, sources, &source_size, &err);
    if (err) return fail("clCreateProgramWithSource", err);
    const unsigned char *binaries[1] = {bitcode};
    cl_int status;
    cl_program from_spirv = clCreateProgramWithBinary(ctx, 1, &dev, &bitcode_size, binaries, &status, &err);
    if (err) return fail("clCreateProgramWithBinary", err);
    cl_program programs[2] = {from_source, from_spirv};
    const char *options[2] = {"-cl-kernel-arg-info", "-x spir -spir-std=1.2"};
    for (int p = 0; p < 2; p++) {
        err = clBuildProgram(programs[p], 1, &dev, options[p], NULL, NULL);
        if (err) {
            static char log[1 << 16];
            clGetProgramBuildInfo(programs[p], dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
            fprintf(stderr, "building the %s failed (%d):\n%s\n", p ? "SPIR bitcode" : "OpenCL C", (int)err, log);
            return 2;
        }
    }
    unsigned char *results[2][MAX_BUFFERS];
    const char *what[2] = {"OpenCL C", "Kernel SPIR-V"};
    for (int p = 0; p < 2; p++) {
        int r = run(ctx, queue, programs[p], what[p], name, buffers, scalar_bytes, lengths, workgroup, groups, results[p]);
        if (r) return r;
        for (int b = 0; b < buffers; b++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%c%d.bin", out_dir, p ? 's' : 'c', b);
            FILE *f = fopen(path, "wb");
            if (!f || fwrite(results[p][b], 1, ALLOC_BYTES, f) != ALLOC_BYTES) return fail("writing a result", 0);
            fclose(f);
        }
    }
    return 0;
}
