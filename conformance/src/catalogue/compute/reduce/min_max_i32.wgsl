@group(0) @binding(0) var<storage, read> input: array<i32>;
@group(0) @binding(1) var<storage, read_write> extremes: array<vec2<i32>>;
var<workgroup> scratch: array<vec2<i32>, 64>;

@compute @workgroup_size(64)
fn min_max(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    let i = group.x * 64u + lane;
    var value = vec2<i32>(2147483647, -2147483647 - 1);
    if i < arrayLength(&input) {
        value = vec2<i32>(input[i], input[i]);
    }
    scratch[lane] = value;
    workgroupBarrier();
    for (var stride = 32u; stride > 0u; stride /= 2u) {
        if lane < stride {
            let other = scratch[lane + stride];
            scratch[lane] = vec2<i32>(min(scratch[lane].x, other.x), max(scratch[lane].y, other.y));
        }
        workgroupBarrier();
    }
    if lane == 0u {
        extremes[group.x] = scratch[0];
    }
}
