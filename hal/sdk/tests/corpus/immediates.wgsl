// The scalar block: a var<immediate> struct with members of several types and alignments
// (u32 @ 0, i32 @ 4, f32 @ 8, vec2<f32> @ 16 (align 8; 12..16 is padding), vec4<u32> @ 32,
// size 48), filled by the launch's scalars in member order.

struct Params {
    count: u32,
    bias: i32,
    scale: f32,
    offset: vec2<f32>,
    mask: vec4<u32>,
}

var<immediate> params: Params;

@group(0) @binding(0) var<storage, read> input: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn scaled(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    // The flat index that workgroups_for_invocations asks for, spilling into y.
    let i = id.x + id.y * groups.x * 64u;
    if i >= params.count {
        return;
    }
    let m = params.mask[i % 4u];
    out[i] = input[i] * params.scale + params.offset[i % 2u] + f32(params.bias) + f32(m & i);
}
