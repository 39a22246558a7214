// Atomics on workgroup memory. Workgroup variables start zeroed in every workgroup
// (the sum, OR and XOR rely on it); invocation 0 initialises the others with atomicStore.
// After a barrier, invocation 0 writes the workgroup's results:
//   [sum, max (i32), min (i32), and, or, xor, 1000000 - sum, CAS-counted invocations]

var<workgroup> sum: atomic<u32>;
var<workgroup> max_i: atomic<i32>;
var<workgroup> min_i: atomic<i32>;
var<workgroup> and_u: atomic<u32>;
var<workgroup> or_u: atomic<u32>;
var<workgroup> xor_u: atomic<u32>;
var<workgroup> down: atomic<u32>;
var<workgroup> counted: atomic<u32>;

@group(0) @binding(0) var<storage, read> values: array<u32>;
@group(0) @binding(1) var<storage, read_write> results: array<u32>;

@compute @workgroup_size(32)
fn per_group(@builtin(local_invocation_index) l: u32, @builtin(workgroup_id) w: vec3<u32>) {
    if l == 0u {
        atomicStore(&max_i, -2147483647 - 1);
        atomicStore(&min_i, 2147483647);
        atomicStore(&and_u, 0xffffffffu);
        atomicStore(&down, 1000000u);
    }
    workgroupBarrier();
    let v = values[w.x * 32u + l];
    let s = bitcast<i32>(v);
    atomicAdd(&sum, v & 0xffffu);
    atomicMax(&max_i, s);
    atomicMin(&min_i, s);
    atomicAnd(&and_u, v | 0xf0f0f0f0u);
    atomicOr(&or_u, v & 0x00ff00ffu);
    atomicXor(&xor_u, v);
    atomicSub(&down, v & 0xffffu);
    var seen = atomicLoad(&counted);
    loop {
        let r = atomicCompareExchangeWeak(&counted, seen, seen + 1u);
        if r.exchanged {
            break;
        }
        seen = r.old_value;
    }
    workgroupBarrier();
    if l == 0u {
        let base = w.x * 8u;
        results[base + 0u] = atomicLoad(&sum);
        results[base + 1u] = bitcast<u32>(atomicLoad(&max_i));
        results[base + 2u] = bitcast<u32>(atomicLoad(&min_i));
        results[base + 3u] = atomicLoad(&and_u);
        results[base + 4u] = atomicLoad(&or_u);
        results[base + 5u] = atomicLoad(&xor_u);
        results[base + 6u] = atomicLoad(&down);
        results[base + 7u] = atomicLoad(&counted);
    }
}
