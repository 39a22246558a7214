// Workgroup memory written by the kernel and read, written and synchronised inside the
// functions it calls (a tree sum, as in workloads.reduce.pointer_across_barriers), and an
// atomic counter in workgroup memory bumped by a function.
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<workgroup> lanes: array<u32, 64>;
var<workgroup> hits: atomic<u32>;

fn neighbour(i: u32) -> u32 {
    return lanes[63u - i];
}

fn tree_sum(lane: u32) -> u32 {
    var stride = 32u;
    while stride > 0u {
        if lane < stride {
            lanes[lane] += lanes[lane + stride];
        }
        workgroupBarrier();
        stride >>= 1u;
    }
    return lanes[0];
}

fn count_hit() {
    atomicAdd(&hits, 1u);
}

@compute @workgroup_size(64)
fn sum_in_functions(@builtin(local_invocation_index) lane: u32, @builtin(global_invocation_id) id: vec3<u32>) {
    lanes[lane] = out[id.x] * (lane + 1u);
    workgroupBarrier();
    let mirrored = neighbour(lane);
    workgroupBarrier();
    let total = tree_sum(lane);
    count_hit();
    workgroupBarrier();
    out[id.x] = mirrored + total * 3u + atomicLoad(&hits);
}
