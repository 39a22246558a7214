/* Declarations of what the C emitter uses from CUDA's cuda_fp16.h, so that g++ can check
   emitted CUDA C that uses f16. Not an implementation. */
#pragma once
struct __half { unsigned short x; };
float __half2float(__half);
__half __float2half_rn(float);
unsigned short __half_as_ushort(__half);
__half __ushort_as_half(unsigned short);
