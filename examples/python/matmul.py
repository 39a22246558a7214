"""A tiled matrix product (16x16 tiles staged through workgroup memory), checked against numpy."""

import numpy as np

import xhal

MATMUL = """
struct Dims { m: u32, n: u32, k: u32 }
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
    var sum = 0.0;
    for (var t = 0u; t < (dims.k + TILE - 1u) / TILE; t++) {
        let a_col = t * TILE + local.x;
        let b_row = t * TILE + local.y;
        // Guarded loads: `select` would read both sides, and the CPU reference device reports
        // any index past the end of a buffer as a fault.
        var va = 0.0;
        if row < dims.m && a_col < dims.k { va = a[row * dims.k + a_col]; }
        var vb = 0.0;
        if b_row < dims.k && col < dims.n { vb = b[b_row * dims.n + col]; }
        tile_a[local.y * TILE + local.x] = va;
        tile_b[local.y * TILE + local.x] = vb;
        workgroupBarrier();
        for (var i = 0u; i < TILE; i++) {
            sum += tile_a[local.y * TILE + i] * tile_b[i * TILE + local.x];
        }
        workgroupBarrier();
    }
    if row < dims.m && col < dims.n {
        c[row * dims.n + col] = sum;
    }
}
"""

m, k, n = 200, 150, 120
rng = np.random.default_rng(1)
# Small integers: every device's float arithmetic gives the exact product.
a_host = rng.integers(-4, 4, (m, k)).astype(np.float32)
b_host = rng.integers(-4, 4, (k, n)).astype(np.float32)

dev = xhal.device()
print(f"{dev.label} ({dev.name})")
a, b, c = dev.asarray(a_host), dev.asarray(b_host), dev.zeros((m, n))
matmul = dev.load_wgsl(MATMUL).kernel()
matmul(a, b, c, m=m, n=n, k=k, workgroups=((n + 15) // 16, (m + 15) // 16))

assert np.array_equal(c.numpy(), a_host @ b_host), "matmul differs from numpy"
print(f"{m}x{k} @ {k}x{n} matches numpy")
