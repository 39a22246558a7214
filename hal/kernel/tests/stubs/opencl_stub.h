/* Declarations of the OpenCL C 1.2 built-ins the C emitter uses, so that gcc can check the
   syntax and types of emitted OpenCL C as C11. Not an OpenCL implementation. */
#include <stdbool.h>
#include <stddef.h>
#include <math.h>
#define __kernel
#define __global
#define __local
#define __private
#define reqd_work_group_size(x, y, z) unused
typedef unsigned char uchar;
typedef unsigned int uint;
typedef unsigned long ulong;
size_t get_global_id(uint);
size_t get_local_id(uint);
size_t get_group_id(uint);
size_t get_num_groups(uint);
#define CLK_LOCAL_MEM_FENCE 1
#define CLK_GLOBAL_MEM_FENCE 2
void barrier(int);
void mem_fence(int);
#define XH_STUB_ATOMIC(name) \
    uint xh_stub_##name##_u(volatile uint*, uint); \
    int xh_stub_##name##_i(volatile int*, int);
XH_STUB_ATOMIC(add)
XH_STUB_ATOMIC(sub)
XH_STUB_ATOMIC(min)
XH_STUB_ATOMIC(max)
XH_STUB_ATOMIC(and)
XH_STUB_ATOMIC(or)
XH_STUB_ATOMIC(xor)
XH_STUB_ATOMIC(xchg)
#define XH_STUB_PICK(name, p) _Generic((p), uint*: xh_stub_##name##_u, int*: xh_stub_##name##_i)
#define atomic_add(p, v) XH_STUB_PICK(add, p)(p, v)
#define atomic_sub(p, v) XH_STUB_PICK(sub, p)(p, v)
#define atomic_min(p, v) XH_STUB_PICK(min, p)(p, v)
#define atomic_max(p, v) XH_STUB_PICK(max, p)(p, v)
#define atomic_and(p, v) XH_STUB_PICK(and, p)(p, v)
#define atomic_or(p, v) XH_STUB_PICK(or, p)(p, v)
#define atomic_xor(p, v) XH_STUB_PICK(xor, p)(p, v)
#define atomic_xchg(p, v) XH_STUB_PICK(xchg, p)(p, v)
uint xh_stub_cmpxchg_u(volatile uint*, uint, uint);
int xh_stub_cmpxchg_i(volatile int*, int, int);
#define atomic_cmpxchg(p, c, v) _Generic((p), uint*: xh_stub_cmpxchg_u, int*: xh_stub_cmpxchg_i)(p, c, v)
