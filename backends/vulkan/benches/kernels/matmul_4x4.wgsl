// 64x64 tiles of c per workgroup, each of the 256 invocations computes a 4x4 block (register tiling).
struct Dims { m: u32, n: u32, k: u32 }
var<immediate> dims: Dims;
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;

var<workgroup> ta: array<f32, 1024>; // 64 x 16
var<workgroup> tb: array<f32, 1024>; // 16 x 64

@compute @workgroup_size(16, 16)
fn matmul(@builtin(local_invocation_id) local: vec3<u32>, @builtin(workgroup_id) group: vec3<u32>,
          @builtin(local_invocation_index) lane: u32) {
    var acc: array<f32, 16>;
    let row0 = group.y * 64u + local.y * 4u;
    let col0 = group.x * 64u + local.x * 4u;
    for (var t = 0u; t < dims.k; t += 16u) {
        for (var l = 0u; l < 4u; l++) {
            let e = lane * 4u + l;
            let ar = group.y * 64u + e / 16u;
            let ac = t + e % 16u;
            ta[e] = select(0.0, a[ar * dims.k + ac], ar < dims.m && ac < dims.k);
            let br = t + e / 64u;
            let bc = group.x * 64u + e % 64u;
            tb[e] = select(0.0, b[br * dims.n + bc], br < dims.k && bc < dims.n);
        }
        workgroupBarrier();
        for (var kk = 0u; kk < 16u; kk++) {
            for (var i = 0u; i < 4u; i++) {
                for (var j = 0u; j < 4u; j++) {
                    acc[i * 4u + j] += ta[(local.y * 4u + i) * 16u + kk] * tb[kk * 64u + local.x * 4u + j];
                }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i++) {
        for (var j = 0u; j < 4u; j++) {
            let r = row0 + i;
            let cc = col0 + j;
            if r < dims.m && cc < dims.n { c[r * dims.n + cc] = acc[i * 4u + j]; }
        }
    }
}
