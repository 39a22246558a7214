// WGSL's integer rules at run time, where C and many GPUs differ or trap:
//   division by zero gives e1, remainder by zero gives 0;
//   i32 MIN / -1 gives MIN, MIN % -1 gives 0;
//   shifts use the amount modulo 32; >> on i32 is arithmetic;
//   +, -, * and negation wrap; abs(MIN) is MIN.
// Operands come from buffers (constant operands would be rejected at shader creation).

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
    let o = i * 4u;
    out[o + 0u] = bitcast<u32>(bitcast<i32>(x) / bitcast<i32>(y));
    out[o + 1u] = bitcast<u32>(bitcast<i32>(x) % bitcast<i32>(y));
    out[o + 2u] = x / y;
    out[o + 3u] = x % y;
}

@compute @workgroup_size(64)
fn shifts(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = a[i];
    let s = b[i];
    let o = i * 6u;
    out[o + 0u] = x << s;
    out[o + 1u] = x >> s;
    out[o + 2u] = bitcast<u32>(bitcast<i32>(x) << s);
    out[o + 3u] = bitcast<u32>(bitcast<i32>(x) >> s);
    let v = vec2<u32>(x, ~x) >> vec2<u32>(s, s + 1u);
    out[o + 4u] = v.x ^ v.y;
    var w = x;
    w <<= s + 32u;
    out[o + 5u] = w;
}

@compute @workgroup_size(64)
fn wrapping(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = bitcast<i32>(a[i]);
    let y = bitcast<i32>(b[i]);
    let o = i * 8u;
    out[o + 0u] = bitcast<u32>(x + y);
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
