// The raw OpenCL baseline for the PyTorch device's matrix products (python/benches/torch_ops.py):
// matmul.cl on the first OpenCL device, through the OpenCL API with nothing of xhal in between.
// For each order n given, the product of two n x n float matrices is timed (one run to warm up,
// then as many as fit a second, at most 20, between clFinish calls), checked against a product
// computed here on a sample of rows, and printed as one JSON object a line:
//   {"n": 1024, "ms": 12.3, "gflops": 174.2, "device": "...", "max_error": 1.2e-06}
//
//   cc -O2 -std=c11 python/benches/raw/opencl_matmul.c -o target/raw_opencl_matmul -l:libOpenCL.so.1
//   target/raw_opencl_matmul python/benches/raw/matmul.cl 256 1024
//
// Exit status: 0 when every product was right, 1 when one was wrong, 2 on a usage or OpenCL error
// (named on stderr).

#define _POSIX_C_SOURCE 199309L
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void fail(const char* what, cl_int status) {
  fprintf(stderr, "raw_opencl_matmul: %s failed with OpenCL status %d\n", what, (int)status);
  exit(2);
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static char* read_file(const char* path) {
  FILE* file = fopen(path, "rb");
  if (file == NULL) {
    fprintf(stderr, "raw_opencl_matmul: cannot open the kernel file %s\n", path);
    exit(2);
  }
  fseek(file, 0, SEEK_END);
  const long length = ftell(file);
  fseek(file, 0, SEEK_SET);
  char* text = malloc((size_t)length + 1);
  if (text == NULL || fread(text, 1, (size_t)length, file) != (size_t)length) {
    fprintf(stderr, "raw_opencl_matmul: cannot read %s\n", path);
    exit(2);
  }
  text[length] = '\0';
  fclose(file);
  return text;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: raw_opencl_matmul KERNEL.cl N [N...]\n");
    return 2;
  }
  cl_int status;
  cl_platform_id platform;
  cl_uint platforms = 0;
  status = clGetPlatformIDs(1, &platform, &platforms);
  if (status != CL_SUCCESS || platforms == 0) fail("clGetPlatformIDs (no OpenCL platform)", status);
  cl_device_id device;
  status = clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL);
  if (status != CL_SUCCESS) fail("clGetDeviceIDs", status);
  char name[256] = {0};
  clGetDeviceInfo(device, CL_DEVICE_NAME, sizeof name - 1, name, NULL);
  for (char* p = name; *p; p++)
    if (*p == '"' || *p == '\\') *p = ' ';
  cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &status);
  if (status != CL_SUCCESS) fail("clCreateContext", status);
  cl_command_queue queue = clCreateCommandQueue(context, device, 0, &status);
  if (status != CL_SUCCESS) fail("clCreateCommandQueue", status);
  const char* source = read_file(argv[1]);
  cl_program program = clCreateProgramWithSource(context, 1, &source, NULL, &status);
  if (status != CL_SUCCESS) fail("clCreateProgramWithSource", status);
  status = clBuildProgram(program, 1, &device, "-cl-mad-enable", NULL, NULL);
  if (status != CL_SUCCESS) {
    char log[8192] = {0};
    clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
    fprintf(stderr, "raw_opencl_matmul: building %s:\n%s\n", argv[1], log);
    fail("clBuildProgram", status);
  }
  cl_kernel kernel = clCreateKernel(program, "matmul", &status);
  if (status != CL_SUCCESS) fail("clCreateKernel", status);

  int all_right = 1;
  for (int arg = 2; arg < argc; arg++) {
    const long parsed = strtol(argv[arg], NULL, 10);
    if (parsed <= 0 || parsed > 16384) {
      fprintf(stderr, "raw_opencl_matmul: the order %s is not between 1 and 16384\n", argv[arg]);
      return 2;
    }
    const cl_uint n = (cl_uint)parsed;
    const size_t count = (size_t)n * n, bytes = count * sizeof(float);
    float* a = malloc(bytes);
    float* b = malloc(bytes);
    float* c = malloc(bytes);
    if (a == NULL || b == NULL || c == NULL) {
      fprintf(stderr, "raw_opencl_matmul: no memory for order %u\n", n);
      return 2;
    }
    unsigned state = 12345u + n;
    for (size_t i = 0; i < count; i++) {
      state = state * 1664525u + 1013904223u;
      a[i] = (float)((state >> 8) & 0xffff) / 32768.0f - 1.0f;
      state = state * 1664525u + 1013904223u;
      b[i] = (float)((state >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    cl_mem a_mem = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, a, &status);
    if (status != CL_SUCCESS) fail("clCreateBuffer", status);
    cl_mem b_mem = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, b, &status);
    if (status != CL_SUCCESS) fail("clCreateBuffer", status);
    cl_mem c_mem = clCreateBuffer(context, CL_MEM_WRITE_ONLY, bytes, NULL, &status);
    if (status != CL_SUCCESS) fail("clCreateBuffer", status);
    clSetKernelArg(kernel, 0, sizeof a_mem, &a_mem);
    clSetKernelArg(kernel, 1, sizeof b_mem, &b_mem);
    clSetKernelArg(kernel, 2, sizeof c_mem, &c_mem);
    clSetKernelArg(kernel, 3, sizeof n, &n);
    const size_t blocks = (n + 63) / 64;
    const size_t global[2] = {blocks * 16, blocks * 16}, local[2] = {16, 16};
    double once = 0;
    for (int warm = 0; warm < 2; warm++) {
      const double start = now();
      status = clEnqueueNDRangeKernel(queue, kernel, 2, NULL, global, local, 0, NULL, NULL);
      if (status != CL_SUCCESS) fail("clEnqueueNDRangeKernel", status);
      clFinish(queue);
      once = now() - start;
    }
    int repeats = (int)(1.0 / (once > 1e-6 ? once : 1e-6));
    repeats = repeats < 1 ? 1 : repeats > 20 ? 20 : repeats;
    const double start = now();
    for (int r = 0; r < repeats; r++) {
      status = clEnqueueNDRangeKernel(queue, kernel, 2, NULL, global, local, 0, NULL, NULL);
      if (status != CL_SUCCESS) fail("clEnqueueNDRangeKernel", status);
    }
    clFinish(queue);
    const double seconds = (now() - start) / repeats;
    status = clEnqueueReadBuffer(queue, c_mem, CL_TRUE, 0, bytes, c, 0, NULL, NULL);
    if (status != CL_SUCCESS) fail("clEnqueueReadBuffer", status);
    // Sixteen rows spread over the matrix, against a product in double precision.
    double worst = 0, largest = 0;
    for (cl_uint k = 0; k < 16; k++) {
      const cl_uint row = (cl_uint)(((size_t)k * (n - 1)) / 15);
      for (cl_uint column = 0; column < n; column++) {
        double expected = 0;
        for (cl_uint d = 0; d < n; d++) expected += (double)a[(size_t)row * n + d] * (double)b[(size_t)d * n + column];
        const double error = fabs(expected - (double)c[(size_t)row * n + column]);
        worst = error > worst ? error : worst;
        largest = fabs(expected) > largest ? fabs(expected) : largest;
      }
    }
    const double relative = worst / (largest > 0 ? largest : 1);
    if (!(relative <= 1e-4)) all_right = 0;
    printf("{\"n\": %u, \"ms\": %.4f, \"gflops\": %.2f, \"device\": \"%s\", \"max_error\": %.3g}\n", n, seconds * 1e3,
           2.0 * n * n * (double)n / seconds * 1e-9, name, relative);
    fflush(stdout);
    clReleaseMemObject(a_mem);
    clReleaseMemObject(b_mem);
    clReleaseMemObject(c_mem);
    free(a);
    free(b);
    free(c);
  }
  clReleaseKernel(kernel);
  clReleaseProgram(program);
  clReleaseCommandQueue(queue);
  clReleaseContext(context);
  if (!all_right) {
    fprintf(stderr, "raw_opencl_matmul: a product differed from the one computed on the host\n");
    return 1;
  }
  return 0;
}
