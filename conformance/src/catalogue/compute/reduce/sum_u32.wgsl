// Each workgroup of 64 sums 128 words through a tree in workgroup memory.
var<immediate> n: u32;
@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> partial_sums: array<u32>;
var<workgroup> scratch: array<u32, 64>;

@compute @workgroup_size(64)
fn reduce(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    let first = group.x * 128u + lane;
    var value = 0u;
    if first < n {
        value = input[first];
    }
    if first + 64u < n {
        value += input[first + 64u];
    }
    scratch[lane] = value;
    workgroupBarrier();
    for (var stride = 32u; stride > 0u; stride >>= 1u) {
        if lane < stride {
            scratch[lane] += scratch[lane + stride];
        }
        workgroupBarrier();
    }
    if lane == 0u {
        partial_sums[group.x] = scratch[0];
    }
}
