@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read> b: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn division(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = a[i];
    let y = b[i];
    out[4u * i] = bitcast<u32>(bitcast<i32>(x) / bitcast<i32>(y));
    out[4u * i + 1u] = bitcast<u32>(bitcast<i32>(x) % bitcast<i32>(y));
    out[4u * i + 2u] = x / y;
    out[4u * i + 3u] = x % y;
}
