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
/* cl_khr_int64_base_atomics and cl_khr_int64_extended_atomics. */
#define XH_STUB_ATOM(name) \
    ulong xh_stub_atom_##name##_u(volatile ulong*, ulong); \
    long xh_stub_atom_##name##_i(volatile long*, long);
XH_STUB_ATOM(add)
XH_STUB_ATOM(sub)
XH_STUB_ATOM(min)
XH_STUB_ATOM(max)
XH_STUB_ATOM(and)
XH_STUB_ATOM(or)
XH_STUB_ATOM(xor)
XH_STUB_ATOM(xchg)
#define XH_STUB_PICK_ATOM(name, p) _Generic((p), ulong*: xh_stub_atom_##name##_u, long*: xh_stub_atom_##name##_i)
#define atom_add(p, v) XH_STUB_PICK_ATOM(add, p)(p, v)
#define atom_sub(p, v) XH_STUB_PICK_ATOM(sub, p)(p, v)
#define atom_min(p, v) XH_STUB_PICK_ATOM(min, p)(p, v)
#define atom_max(p, v) XH_STUB_PICK_ATOM(max, p)(p, v)
#define atom_and(p, v) XH_STUB_PICK_ATOM(and, p)(p, v)
#define atom_or(p, v) XH_STUB_PICK_ATOM(or, p)(p, v)
#define atom_xor(p, v) XH_STUB_PICK_ATOM(xor, p)(p, v)
#define atom_xchg(p, v) XH_STUB_PICK_ATOM(xchg, p)(p, v)
ulong xh_stub_atom_cmpxchg_u(volatile ulong*, ulong, ulong);
long xh_stub_atom_cmpxchg_i(volatile long*, long, long);
#define atom_cmpxchg(p, c, v) _Generic((p), ulong*: xh_stub_atom_cmpxchg_u, long*: xh_stub_atom_cmpxchg_i)(p, c, v)
/* cl_khr_fp16. */
typedef _Float16 half;
typedef unsigned short ushort;
ushort as_ushort(half);
half as_half(ushort);
half convert_half_rte(float);
