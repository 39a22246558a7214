/* Declarations of the HIP built-ins the C emitter uses, so that g++ can check the syntax and
   types of emitted HIP C without the HIP toolkit. Not a HIP implementation. HIP gives these
   built-ins CUDA's names and signatures, so the CUDA stub declares them for both. */
#pragma once
#include "cuda_stub.h"
