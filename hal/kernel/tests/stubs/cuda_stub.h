/* Declarations of the CUDA built-ins the C emitter uses, so that g++ can check the syntax and
   types of emitted CUDA C without the CUDA toolkit. Not a CUDA implementation. */
#pragma once
#include <math.h>
#define __global__
#define __launch_bounds__(threads)
#define __device__
#define __shared__ static
#define __forceinline__ inline
struct xh_stub_dim3 { unsigned int x, y, z; };
extern const xh_stub_dim3 threadIdx, blockIdx, blockDim, gridDim;
void __syncthreads();
void __threadfence();
void __threadfence_block();
#define XH_STUB_ATOMIC(name) unsigned int name(unsigned int*, unsigned int); int name(int*, int); \
    unsigned long long name(unsigned long long*, unsigned long long);
XH_STUB_ATOMIC(atomicAdd)
unsigned int atomicSub(unsigned int*, unsigned int);
int atomicSub(int*, int);
XH_STUB_ATOMIC(atomicMin)
XH_STUB_ATOMIC(atomicMax)
XH_STUB_ATOMIC(atomicAnd)
XH_STUB_ATOMIC(atomicOr)
XH_STUB_ATOMIC(atomicXor)
XH_STUB_ATOMIC(atomicExch)
long long atomicMin(long long*, long long);
long long atomicMax(long long*, long long);
unsigned int atomicCAS(unsigned int*, unsigned int, unsigned int);
unsigned long long atomicCAS(unsigned long long*, unsigned long long, unsigned long long);
int atomicCAS(int*, int, int);
float __uint_as_float(unsigned int);
unsigned int __float_as_uint(float);
long long __double_as_longlong(double);
double __longlong_as_double(long long);
