@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read> b: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn wrapping(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = bitcast<i32>(a[i]);
    let y = bitcast<i32>(b[i]);
    let o = 8u * i;
    out[o] = bitcast<u32>(x + y);
    out[o + 1u] = bitcast<u32>(x - y);
    out[o + 2u] = bitcast<u32>(x * y);
    out[o + 3u] = bitcast<u32>(-x);
    out[o + 4u] = bitcast<u32>(abs(x));
    out[o + 5u] = a[i] * b[i] + 0xffffffffu;
    var c = x;
    c++;
    c += y;
    c *= 3;
    out[o + 6u] = bitcast<u32>(c);
    var d = a[i];
    d--;
    out[o + 7u] = d;
}
