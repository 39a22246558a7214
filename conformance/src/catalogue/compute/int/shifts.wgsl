@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read> b: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn shifts(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = a[i];
    let s = b[i];
    out[4u * i] = x << s;
    out[4u * i + 1u] = x >> s;
    out[4u * i + 2u] = bitcast<u32>(bitcast<i32>(x) << s);
    out[4u * i + 3u] = bitcast<u32>(bitcast<i32>(x) >> s);
}
