// NVRTC + driver API check of emitted CUDA C (see run.sh). Usage: harness compile FILES... | harness run DIR
#include <cuda.h>
#include <nvrtc.h>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <string>
#include <vector>
#include <fstream>
#include <sstream>
static int failures = 0;
#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char* s_; cuGetErrorString(r_, &s_); printf("CUDA error %s at %s:%d\n", s_, __FILE__, __LINE__); failures++; return false; } } while (0)
static std::string slurp(const std::string& p) { std::ifstream f(p); std::stringstream s; s << f.rdbuf(); return s.str(); }
static int arch_major = 9, arch_minor = 0;
static bool compile(const std::string& path, CUmodule* mod) {
  std::string src = slurp(path);
  nvrtcProgram prog;
  nvrtcCreateProgram(&prog, src.c_str(), path.c_str(), 0, nullptr, nullptr);
  std::string arch = "--gpu-architecture=compute_" + std::to_string(arch_major) + std::to_string(arch_minor);
  const char* opts[] = {arch.c_str(), "-std=c++17"};
  nvrtcResult r = nvrtcCompileProgram(prog, 2, opts);
  size_t logn; nvrtcGetProgramLogSize(prog, &logn);
  std::string log(logn, '\0'); nvrtcGetProgramLog(prog, &log[0]);
  if (r != NVRTC_SUCCESS) { printf("NVRTC FAIL %s:\n%s\n", path.c_str(), log.substr(0, 3000).c_str()); failures++; nvrtcDestroyProgram(&prog); return false; }
  if (logn > 2) printf("NVRTC log %s: %s\n", path.c_str(), log.substr(0, 800).c_str());
  size_t n; nvrtcGetPTXSize(prog, &n); std::string ptx(n, '\0'); nvrtcGetPTX(prog, &ptx[0]);
  nvrtcDestroyProgram(&prog);
  CUresult lr = cuModuleLoadData(mod, ptx.c_str());
  if (lr != CUDA_SUCCESS) { const char* s; cuGetErrorString(lr, &s); printf("LOAD FAIL %s: %s\n", path.c_str(), s); failures++; return false; }
  return true;
}
template <class T> static CUdeviceptr up(const std::vector<T>& v) { CUdeviceptr d; cuMemAlloc(&d, v.size() * sizeof(T) + 16); cuMemcpyHtoD(d, v.data(), v.size() * sizeof(T)); return d; }
template <class T> static void down(std::vector<T>& v, CUdeviceptr d) { cuMemcpyDtoH(v.data(), d, v.size() * sizeof(T)); }
static bool launch(CUmodule m, const char* name, unsigned gx, unsigned gy, unsigned bx, unsigned by, void** params) {
  CUfunction f; CK(cuModuleGetFunction(&f, m, name));
  CK(cuLaunchKernel(f, gx, gy, 1, bx, by, 1, 0, 0, params, nullptr));
  CK(cuCtxSynchronize());
  return true;
}
static void expect(bool ok, const char* what) { printf("%s %s\n", ok ? "PASS" : "FAIL", what); if (!ok) failures++; }
static int32_t sdiv(int32_t a, int32_t b) { if (b == 0 || (a == INT32_MIN && b == -1)) return a; return a / b; }
static int32_t srem(int32_t a, int32_t b) { if (b == 0 || (a == INT32_MIN && b == -1)) return 0; return a % b; }
static int32_t f2i(float v) { if (v != v) return 0; if (v >= 2147483648.0f) return 2147483520; if (v <= -2147483648.0f) return INT32_MIN; return (int32_t)v; }
static uint32_t f2u(float v) { if (!(v > 0.0f)) return 0; if (v >= 4294967296.0f) return 4294967040u; return (uint32_t)v; }
int main(int argc, char** argv) {
  CUdevice dev; CUcontext ctx;
  if (cuInit(0) != CUDA_SUCCESS) { printf("no CUDA driver\n"); return 2; }
  cuDeviceGet(&dev, 0); cuDevicePrimaryCtxRetain(&ctx, dev); cuCtxSetCurrent(ctx);
  cuDeviceGetAttribute(&arch_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  cuDeviceGetAttribute(&arch_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "compile") {
    int ok = 0;
    for (int i = 2; i < argc; i++) { CUmodule m; if (compile(argv[i], &m)) { ok++; cuModuleUnload(m); } }
    printf("compiled and loaded %d of %d\n", ok, argc - 2);
    return failures ? 1 : 0;
  }
  std::string dir = argc > 2 ? argv[2] : ".";
  CUmodule m;
  // saxpy
  if (compile(dir + "/examples_saxpy_wgsl.cu", &m)) {
    unsigned n = 100000; std::vector<float> x(n), y(n), e(n);
    for (unsigned i = 0; i < n; i++) { x[i] = i * 0.5f; y[i] = 3.0f - i; e[i] = 2.5f * x[i] + y[i]; }
    CUdeviceptr dx = up(x), dy = up(y); struct { float a; unsigned n; } p = {2.5f, n};
    void* params[] = {&dx, &dy, &p};
    if (launch(m, "saxpy", (n + 255) / 256, 1, 256, 1, params)) { down(y, dy); bool ok = true; for (unsigned i = 0; i < n; i++) ok &= y[i] == e[i]; expect(ok, "saxpy"); }
  }
  if (compile(dir + "/examples_reduce_wgsl.cu", &m)) {
    unsigned groups = 100, n = 512 * groups - 77; std::vector<float> in(n), out(groups, -1.0f);
    for (unsigned i = 0; i < n; i++) in[i] = (float)(i % 13);
    CUdeviceptr di = up(in), dout = up(out); struct { unsigned n; } p = {n};
    void* params[] = {&di, &dout, &p};
    if (launch(m, "reduce", groups, 1, 256, 1, params)) { down(out, dout); bool ok = true; for (unsigned g = 0; g < groups; g++) { float s = 0; for (unsigned i = g * 512; i < g * 512 + 512 && i < n; i++) s += in[i]; ok &= out[g] == s; } expect(ok, "reduce (workgroup memory, barriers)"); }
  }
  if (compile(dir + "/examples_matmul_wgsl.cu", &m)) {
    unsigned M = 37, N = 45, K = 29; std::vector<float> a(M * K), b(K * N), c(M * N, -1.0f);
    for (unsigned i = 0; i < M * K; i++) a[i] = (float)(i % 7) - 3; for (unsigned i = 0; i < K * N; i++) b[i] = (float)(i % 5) - 2;
    CUdeviceptr da = up(a), db = up(b), dc = up(c); struct { unsigned m, n, k; } p = {M, N, K};
    void* params[] = {&da, &db, &dc, &p};
    if (launch(m, "matmul", (N + 15) / 16, (M + 15) / 16, 16, 16, params)) { down(c, dc); bool ok = true; for (unsigned r = 0; r < M; r++) for (unsigned q = 0; q < N; q++) { float s = 0; for (unsigned t = 0; t < K; t++) s += a[r * K + t] * b[t * N + q]; ok &= c[r * N + q] == s; } expect(ok, "matmul (2D workgroups, tiles)"); }
  }
  if (compile(dir + "/examples_histogram_wgsl.cu", &m)) {
    unsigned n = 100000, bins = 37; std::vector<unsigned> v(n), counts(bins, 0), e(bins, 0);
    for (unsigned i = 0; i < n; i++) { v[i] = (i * 2654435761u) % 50; e[v[i] < bins - 1 ? v[i] : bins - 1]++; }
    CUdeviceptr dv = up(v), dc = up(counts); struct { unsigned n, bins; } p = {n, bins};
    void* params[] = {&dv, &dc, &p};
    if (launch(m, "histogram", (n + 255) / 256, 1, 256, 1, params)) { down(counts, dc); expect(counts == e, "histogram (atomicAdd)"); }
  }
  std::vector<uint32_t> A = {7, 0x80000000u, 0x80000000u, (uint32_t)-7, 7, 0xffffffffu, 0x80000001u, 0x12345678u, 0x7fffffffu, 123456789u, 0xdeadbeefu, 5};
  std::vector<uint32_t> B = {0, 0, 0xffffffffu, 2, (uint32_t)-2, 33, 31, 63, 1, 1000, 28, 0xffffffffu};
  unsigned n = A.size();
  struct { unsigned long long bytes[3]; } len3 = {{4ull * n, 4ull * n, 16ull * n}};
  if (compile(dir + "/compute_12.cu", &m)) {
    std::vector<uint32_t> out(4 * n, 0xcdcdcdcd); CUdeviceptr da = up(A), db = up(B), dout = up(out);
    void* params[] = {&da, &db, &dout, &len3};
    if (launch(m, "division", 1, 1, 64, 1, params)) { down(out, dout); bool ok = true; for (unsigned i = 0; i < n; i++) { int32_t x = (int32_t)A[i], y = (int32_t)B[i]; ok &= out[4*i] == (uint32_t)sdiv(x, y) && out[4*i+1] == (uint32_t)srem(x, y) && out[4*i+2] == (B[i] ? A[i] / B[i] : A[i]) && out[4*i+3] == (B[i] ? A[i] % B[i] : 0u); if (!ok) { printf("division mismatch at %u\n", i); break; } } expect(ok, "integer division edge cases"); }
  }
  if (compile(dir + "/compute_13.cu", &m)) {
    std::vector<uint32_t> out(4 * n, 0xcdcdcdcd); CUdeviceptr da = up(A), db = up(B), dout = up(out);
    void* params[] = {&da, &db, &dout, &len3};
    if (launch(m, "shifts", 1, 1, 64, 1, params)) { down(out, dout); bool ok = true; for (unsigned i = 0; i < n; i++) { uint32_t s = B[i] & 31; ok &= out[4*i] == (A[i] << s) && out[4*i+1] == (A[i] >> s) && out[4*i+2] == (uint32_t)(A[i] << s) && out[4*i+3] == (uint32_t)(((int32_t)A[i]) >> s); if (!ok) { printf("shift mismatch at %u\n", i); break; } } expect(ok, "shift masking"); }
  }
  if (compile(dir + "/compute_17.cu", &m)) {
    std::vector<float> f = {NAN, INFINITY, -INFINITY, 3.0e9f, -3.0e9f, 2.5f, -2.7f, 1.0e10f, 4294967040.0f, 2147483520.0f, -0.5f, 65535.9f};
    std::vector<uint32_t> out(2 * f.size(), 0xcdcdcdcd); CUdeviceptr df = up(f), dout = up(out);
    struct { unsigned long long bytes[2]; } len2 = {{4ull * f.size(), 8ull * f.size()}};
    void* params[] = {&df, &dout, &len2};
    if (launch(m, "convert", 1, 1, 64, 1, params)) { down(out, dout); bool ok = true; for (unsigned i = 0; i < f.size(); i++) { ok &= out[2*i] == (uint32_t)f2i(f[i]) && out[2*i+1] == f2u(f[i]); if (!ok) { printf("convert mismatch at %u: %u %u\n", i, out[2*i], out[2*i+1]); break; } } expect(ok, "saturating float-to-int conversions"); }
  }
  printf("failures: %d\n", failures);
  return failures ? 1 : 0;
}
