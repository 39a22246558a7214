// f64 (naga's extension to WGSL, feature F64): storage arrays of f64, +, -, *, /, sqrt,
// literals with the `lf` suffix, and conversions to and from f32 and i32. 8 results per pair.

@group(0) @binding(0) var<storage, read> a: array<f64>;
@group(0) @binding(1) var<storage, read> b: array<f64>;
@group(0) @binding(2) var<storage, read_write> out: array<f64>;

@compute @workgroup_size(64)
fn arith(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = a[i];
    let y = b[i];
    let o = i * 8u;
    out[o + 0u] = x + y;
    out[o + 1u] = x - y;
    out[o + 2u] = x * y;
    out[o + 3u] = x / y;
    out[o + 4u] = sqrt(abs(x)) + 0.5lf;
    out[o + 5u] = f64(f32(x));
    out[o + 6u] = f64(i32(x * 1000.0lf));
    out[o + 7u] = select(-1.0lf, 1.0lf, x < y);
}
