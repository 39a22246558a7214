/* Declarations of what the C emitter uses from HIP's hip/hip_fp16.h (CUDA's names), so that
   g++ can check emitted HIP C that uses f16. Not an implementation. */
#pragma once
#include "../cuda_fp16.h"
