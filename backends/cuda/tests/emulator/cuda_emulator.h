/* CUDA C on the host processor, for the emulated CUDA device (see README.md beside this file).
 *
 * The emulator's NVRTC (libnvrtc_emulator.c) compiles a module's CUDA C with the system's C++
 * compiler, with this header included first and one XHEMU_KERNEL(name) line appended for each
 * `extern "C" __global__` function. The result is a shared object that the emulator's driver
 * (libcuda_stub.c) opens in cuModuleLoadData and calls through `xhemu_launch_<name>` in
 * cuLaunchKernel, and `xhemu_parameter_<name>` in cuFuncGetParamInfo.
 *
 * Execution model: blocks run one after another on the thread that launches them. The threads of a block
 * run one after another too; where the module has `__syncthreads`, each thread is a fiber with
 * its own stack, and a barrier switches to the next thread until every thread of the block has
 * reached it. That is a legal schedule of a CUDA block, so a kernel whose result depends on
 * anything CUDA leaves unordered can still pass here and fail on hardware; a kernel that is
 * wrong under every schedule fails here too. */
#pragma once
/* Fibers switch with _longjmp between stacks, which fortified longjmp takes for a corrupt
   stack and aborts. */
#undef _FORTIFY_SOURCE
#include <math.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
/* A block's shared memory: one copy per host thread, since a host thread runs one block at a
   time, and host threads launching on different streams run at once. */
#define __shared__ static thread_local

namespace xhemu {

struct Dim3 {
    unsigned int x, y, z;
};

/* The running thread's coordinates; the scheduler sets them before it runs a thread. Each
   host thread that launches has its own scheduler: its fibers never leave it. */
inline thread_local Dim3 thread_index, block_index, block_size, grid_size;

enum class State { Ready, AtBarrier, Done };

/* A fiber's first entry goes through its ucontext; every switch after that is a _setjmp and a
   _longjmp, which keep the signal mask as it is: swapcontext makes two system calls a switch to
   save and restore it, and a tiled kernel switches at every barrier of every thread. A fiber
   outlives its block: it runs the body once a block, then parks until the next block. */
struct Fiber {
    ucontext_t context;
    jmp_buf resume;
    bool started;
    Dim3 index;
    State state;
};

struct Scheduler {
    jmp_buf home;
    Fiber *current = nullptr;
    void (*body)(void **) = nullptr;
    void **parameters = nullptr;
};
inline thread_local Scheduler scheduler;

/* Where a barrier is reached outside a fiber: the module was compiled without barriers. */
[[noreturn]] inline void barrier_outside_fiber() {
    fprintf(stderr, "cuda emulator: __syncthreads reached in a module compiled without barriers\n");
    abort();
}

/* Parks the running fiber in `state` and goes back to the scheduler. */
inline void park(State state) {
    Fiber *fiber = scheduler.current;
    fiber->state = state;
    if (_setjmp(fiber->resume) == 0) _longjmp(scheduler.home, 1);
}

inline void barrier() {
    if (scheduler.current == nullptr) barrier_outside_fiber();
    park(State::AtBarrier);
}

inline void fiber_main() {
    for (;;) {
        scheduler.body(scheduler.parameters);
        park(State::Done);
    }
}

/* Runs `fiber` until it reaches a barrier or the end of its block's body. */
inline void resume(Fiber &fiber) {
    scheduler.current = &fiber;
    thread_index = fiber.index;
    if (_setjmp(scheduler.home) == 0) {
        if (!fiber.started) {
            fiber.started = true;
            setcontext(&fiber.context);
        }
        _longjmp(fiber.resume, 1);
    }
}

/* Stack bytes for each thread of a block with barriers: WGSL's function-scope arrays live on
   it. Pages are committed only when touched. */
constexpr size_t fiber_stack_bytes = 256 * 1024;

/* Runs `body` for every thread of every block; 0, or a CUresult. */
inline int launch(void (*body)(void **), void **parameters, const unsigned int *grid, const unsigned int *block,
                  bool barriers) {
    const size_t threads = (size_t)block[0] * block[1] * block[2];
    grid_size = Dim3{grid[0], grid[1], grid[2]};
    block_size = Dim3{block[0], block[1], block[2]};
    scheduler.body = body;
    scheduler.parameters = parameters;
    scheduler.current = nullptr;
    if (!barriers) {
        for (unsigned int bz = 0; bz < grid[2]; bz++)
            for (unsigned int by = 0; by < grid[1]; by++)
                for (unsigned int bx = 0; bx < grid[0]; bx++) {
                    block_index = Dim3{bx, by, bz};
                    for (unsigned int tz = 0; tz < block[2]; tz++)
                        for (unsigned int ty = 0; ty < block[1]; ty++)
                            for (unsigned int tx = 0; tx < block[0]; tx++) {
                                thread_index = Dim3{tx, ty, tz};
                                body(parameters);
                            }
                }
        return 0;
    }
    Fiber *fibers = (Fiber *)calloc(threads, sizeof(Fiber));
    void *stacks = mmap(nullptr, threads * fiber_stack_bytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (fibers == nullptr || stacks == MAP_FAILED) {
        free(fibers);
        if (stacks != MAP_FAILED) munmap(stacks, threads * fiber_stack_bytes);
        return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    }
    size_t t = 0;
    for (unsigned int tz = 0; tz < block[2]; tz++)
        for (unsigned int ty = 0; ty < block[1]; ty++)
            for (unsigned int tx = 0; tx < block[0]; tx++, t++) {
                Fiber &fiber = fibers[t];
                fiber.index = Dim3{tx, ty, tz};
                getcontext(&fiber.context);
                fiber.context.uc_stack.ss_sp = (char *)stacks + t * fiber_stack_bytes;
                fiber.context.uc_stack.ss_size = fiber_stack_bytes;
                /* fiber_main never returns: a fiber parks at the end of each block's body. */
                fiber.context.uc_link = nullptr;
                makecontext(&fiber.context, fiber_main, 0);
            }
    for (unsigned int bz = 0; bz < grid[2]; bz++)
        for (unsigned int by = 0; by < grid[1]; by++)
            for (unsigned int bx = 0; bx < grid[0]; bx++) {
                block_index = Dim3{bx, by, bz};
                /* Rounds: every thread runs to its next barrier or its end; then all go on. */
                for (t = 0; t < threads; t++) fibers[t].state = State::Ready;
                for (;;) {
                    size_t done = 0;
                    for (t = 0; t < threads; t++) {
                        Fiber &fiber = fibers[t];
                        if (fiber.state != State::Done) resume(fiber);
                        if (fiber.state == State::Done) done++;
                    }
                    if (done == threads) break;
                }
                scheduler.current = nullptr;
            }
    munmap(stacks, threads * fiber_stack_bytes);
    free(fibers);
    return 0;
}

/* Calls `kernel` with its parameters, each read from where CUDA's kernelParams points. */
template <typename... Parameters, size_t... Index>
void call_with(void (*kernel)(Parameters...), void **parameters, std::index_sequence<Index...>) {
    kernel(*static_cast<Parameters *>(parameters[Index])...);
}
template <typename... Parameters>
void call(void (*kernel)(Parameters...), void **parameters) {
    call_with(kernel, parameters, std::index_sequence_for<Parameters...>{});
}

/* A parameter's offset and size in CUDA's parameter buffer: each at its type's alignment. */
template <typename... Parameters>
int parameter(void (*)(Parameters...), size_t index, size_t *offset, size_t *size) {
    const size_t sizes[] = {sizeof(Parameters)..., 0};
    const size_t alignments[] = {alignof(Parameters)..., 1};
    if (index >= sizeof...(Parameters)) return 1; /* CUDA_ERROR_INVALID_VALUE */
    size_t at = 0;
    for (size_t i = 0;; i++) {
        at = (at + alignments[i] - 1) / alignments[i] * alignments[i];
        if (i == index) break;
        at += sizes[i];
    }
    *offset = at;
    *size = sizes[index];
    return 0;
}

template <typename T>
T atomic_min(T *address, T value) {
    T old = __atomic_load_n(address, __ATOMIC_RELAXED);
    while (value < old && !__atomic_compare_exchange_n(address, &old, value, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}
template <typename T>
T atomic_max(T *address, T value) {
    T old = __atomic_load_n(address, __ATOMIC_RELAXED);
    while (value > old && !__atomic_compare_exchange_n(address, &old, value, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}

} // namespace xhemu

#define threadIdx (::xhemu::thread_index)
#define blockIdx (::xhemu::block_index)
#define blockDim (::xhemu::block_size)
#define gridDim (::xhemu::grid_size)

inline void __syncthreads() { ::xhemu::barrier(); }
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

template <typename T> T atomicAdd(T *a, T v) { return __atomic_fetch_add(a, v, __ATOMIC_RELAXED); }
template <typename T> T atomicSub(T *a, T v) { return __atomic_fetch_sub(a, v, __ATOMIC_RELAXED); }
template <typename T> T atomicAnd(T *a, T v) { return __atomic_fetch_and(a, v, __ATOMIC_RELAXED); }
template <typename T> T atomicOr(T *a, T v) { return __atomic_fetch_or(a, v, __ATOMIC_RELAXED); }
template <typename T> T atomicXor(T *a, T v) { return __atomic_fetch_xor(a, v, __ATOMIC_RELAXED); }
template <typename T> T atomicExch(T *a, T v) { return __atomic_exchange_n(a, v, __ATOMIC_RELAXED); }
template <typename T> T atomicMin(T *a, T v) { return ::xhemu::atomic_min(a, v); }
template <typename T> T atomicMax(T *a, T v) { return ::xhemu::atomic_max(a, v); }
template <typename T> T atomicCAS(T *a, T compare, T v) {
    __atomic_compare_exchange_n(a, &compare, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return compare;
}

inline float __uint_as_float(unsigned int v) { float f; memcpy(&f, &v, 4); return f; }
inline float __int_as_float(int v) { float f; memcpy(&f, &v, 4); return f; }
inline unsigned int __float_as_uint(float v) { unsigned int u; memcpy(&u, &v, 4); return u; }
inline int __float_as_int(float v) { int u; memcpy(&u, &v, 4); return u; }
inline long long __double_as_longlong(double v) { long long u; memcpy(&u, &v, 8); return u; }
inline double __longlong_as_double(long long v) { double f; memcpy(&f, &v, 8); return f; }

/* The entry points the emulator's driver looks up for kernel `name`. */
#define XHEMU_KERNEL(name, barriers)                                                                   \
    static void xhemu_body_##name(void **parameters) { ::xhemu::call(name, parameters); }             \
    extern "C" __attribute__((visibility("default"))) int xhemu_launch_##name(                         \
        const unsigned int *grid, const unsigned int *block, void **parameters) {                      \
        return ::xhemu::launch(xhemu_body_##name, parameters, grid, block, barriers);                  \
    }                                                                                                  \
    extern "C" __attribute__((visibility("default"))) int xhemu_parameter_##name(size_t index, size_t *offset, \
                                                                                  size_t *size) {      \
        return ::xhemu::parameter(name, index, offset, size);                                          \
    }
