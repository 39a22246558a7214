enable f16;
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn arith(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = f16(a[i]);
    let y = f16(b[i]);
    let o = 7u * i;
    out[o] = f32(x + y);
    out[o + 1u] = f32(x - y);
    out[o + 2u] = f32(x * y);
    out[o + 3u] = f32(x / y);
    out[o + 4u] = f32(min(x, y));
    out[o + 5u] = f32(max(x, y));
    out[o + 6u] = f32(abs(x) * 0.5h);
}
