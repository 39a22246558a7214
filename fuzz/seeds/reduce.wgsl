// Sums `input` in a tree: each workgroup of 256 invocations reduces 512 elements through
// workgroup memory and writes one partial sum. Run it again on the partial sums until one
// value is left.
struct Params {
    n: u32,
}

var<immediate> params: Params;

@group(0) @binding(0) var<storage, read> input: array<f32>;
@group(0) @binding(1) var<storage, read_write> partial_sums: array<f32>;

var<workgroup> scratch: array<f32, 256>;

@compute @workgroup_size(256)
fn reduce(
    @builtin(local_invocation_index) lane: u32,
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let group_index = group.x + group.y * groups.x;
    let first = group_index * 512u + lane;
    var value = 0.0;
    if first < params.n {
        value = input[first];
    }
    if first + 256u < params.n {
        value = value + input[first + 256u];
    }
    scratch[lane] = value;
    workgroupBarrier();
    for (var stride = 128u; stride > 0u; stride = stride / 2u) {
        if lane < stride {
            scratch[lane] = scratch[lane] + scratch[lane + stride];
        }
        workgroupBarrier();
    }
    if lane == 0u {
        partial_sums[group_index] = scratch[0];
    }
}
