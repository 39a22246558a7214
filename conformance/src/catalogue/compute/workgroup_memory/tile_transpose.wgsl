struct Dims { width: u32, height: u32 }
var<immediate> dims: Dims;
@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> output: array<u32>;
var<workgroup> tile: array<u32, 64>;

@compute @workgroup_size(8, 8)
fn transpose_tile(@builtin(local_invocation_id) local: vec3<u32>, @builtin(workgroup_id) group: vec3<u32>) {
    let x = group.x * 8u + local.x;
    let y = group.y * 8u + local.y;
    tile[local.y * 8u + local.x] = input[y * dims.width + x];
    workgroupBarrier();
    let out_x = group.y * 8u + local.x;
    let out_y = group.x * 8u + local.y;
    output[out_y * dims.height + out_x] = tile[local.x * 8u + local.y];
}
