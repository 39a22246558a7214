// c = a * b for row-major a (m×k), b (k×n), c (m×n), in 16×16 tiles staged through
// workgroup memory. Launch ceil(n/16) × ceil(m/16) workgroups.
struct Dims {
    m: u32,
    n: u32,
    k: u32,
}

var<immediate> dims: Dims;

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;

const TILE: u32 = 16u;

var<workgroup> tile_a: array<f32, 256>;
var<workgroup> tile_b: array<f32, 256>;

@compute @workgroup_size(16, 16)
fn matmul(@builtin(local_invocation_id) local: vec3<u32>, @builtin(workgroup_id) group: vec3<u32>) {
    let row = group.y * TILE + local.y;
    let col = group.x * TILE + local.x;
    let slot = local.y * TILE + local.x;
    var sum = 0.0;
    let tiles = (dims.k + TILE - 1u) / TILE;
    for (var t = 0u; t < tiles; t++) {
        let a_col = t * TILE + local.x;
        let b_row = t * TILE + local.y;
        // Guarded loads: edge tiles read zeros instead of reaching past the matrices.
        if row < dims.m && a_col < dims.k {
            tile_a[slot] = a[row * dims.k + a_col];
        } else {
            tile_a[slot] = 0.0;
        }
        if b_row < dims.k && col < dims.n {
            tile_b[slot] = b[b_row * dims.n + col];
        } else {
            tile_b[slot] = 0.0;
        }
        workgroupBarrier();
        for (var i = 0u; i < TILE; i++) {
            sum = sum + tile_a[local.y * TILE + i] * tile_b[i * TILE + local.x];
        }
        workgroupBarrier();
    }
    if row < dims.m && col < dims.n {
        c[row * dims.n + col] = sum;
    }
}
