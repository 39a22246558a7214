// Every read-modify-write atomic on storage memory, from every invocation of several
// workgroups at once. The counters start at the values the host wrote; the final values do
// not depend on the order the invocations ran in.

struct Counters {
    add: atomic<u32>,
    sub: atomic<u32>,
    max_u: atomic<u32>,
    min_u: atomic<u32>,
    and_u: atomic<u32>,
    or_u: atomic<u32>,
    xor_u: atomic<u32>,
    add_i: atomic<i32>,
    max_i: atomic<i32>,
    min_i: atomic<i32>,
}

@group(0) @binding(0) var<storage, read> values: array<u32>;
@group(0) @binding(1) var<storage, read_write> counters: Counters;

@compute @workgroup_size(64)
fn combine(@builtin(global_invocation_id) id: vec3<u32>) {
    let v = values[id.x];
    let s = bitcast<i32>(v);
    atomicAdd(&counters.add, v);
    atomicSub(&counters.sub, v);
    atomicMax(&counters.max_u, v);
    atomicMin(&counters.min_u, v);
    // Keep a few bits set in every operand so that the AND does not collapse to zero.
    atomicAnd(&counters.and_u, v | 0x0f00f00fu);
    atomicOr(&counters.or_u, v & 0x10204081u);
    atomicXor(&counters.xor_u, v);
    atomicAdd(&counters.add_i, s);
    atomicMax(&counters.max_i, s);
    atomicMin(&counters.min_i, s);
}
