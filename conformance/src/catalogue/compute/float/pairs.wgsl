@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn pairs(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = a[i];
    let y = b[i];
    let o = 7u * i;
    out[o] = x + y;
    out[o + 1u] = x - y;
    out[o + 2u] = x * y;
    out[o + 3u] = x / y;
    out[o + 4u] = -x;
    out[o + 5u] = sqrt(x);
    let flags = u32(x == y) | (u32(x != y) << 1u) | (u32(x < y) << 2u) | (u32(x <= y) << 3u)
        | (u32(x > y) << 4u) | (u32(x >= y) << 5u);
    out[o + 6u] = f32(flags);
}
