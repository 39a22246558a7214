var<immediate> n: u32;
@group(0) @binding(0) var<storage, read> values: array<u32>;
@group(0) @binding(1) var<storage, read_write> counts: array<atomic<u32>, 64>;
var<workgroup> local_counts: array<atomic<u32>, 64>;

@compute @workgroup_size(64)
fn histogram(@builtin(global_invocation_id) id: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    atomicStore(&local_counts[lane], 0u);
    workgroupBarrier();
    if id.x < n {
        atomicAdd(&local_counts[values[id.x] % 64u], 1u);
    }
    workgroupBarrier();
    let count = atomicLoad(&local_counts[lane]);
    if count != 0u {
        atomicAdd(&counts[lane], count);
    }
}
