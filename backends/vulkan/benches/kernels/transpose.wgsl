// 64x64 tiled transpose: each of 256 invocations moves a 4x4 block through workgroup memory.
@group(0) @binding(0) var<storage, read> input: array<f32>;
@group(0) @binding(1) var<storage, read_write> output: array<f32>;

var<workgroup> tile: array<f32, 4096>;

@compute @workgroup_size(16, 16)
fn transpose(@builtin(local_invocation_id) local: vec3<u32>, @builtin(workgroup_id) group: vec3<u32>) {
    let base = group.x * 4096u;
    for (var i = 0u; i < 4u; i++) {
        for (var j = 0u; j < 4u; j++) {
            let r = local.y * 4u + i;
            let c = local.x * 4u + j;
            tile[r * 64u + c] = input[base + r * 64u + c];
        }
    }
    workgroupBarrier();
    for (var i = 0u; i < 4u; i++) {
        for (var j = 0u; j < 4u; j++) {
            let r = local.y * 4u + i;
            let c = local.x * 4u + j;
            output[base + r * 64u + c] = tile[c * 64u + r];
        }
    }
}
